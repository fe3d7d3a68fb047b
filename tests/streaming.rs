//! `inject` drops the tree of every document as soon as it is read (`batch::evict`),
//! unless the guard or a trio needs it; it edits a selected workload that carries no
//! identity yet as it is read (`Need::Now`), reads any other again when its turn
//! comes (`Document::reread`), and writes each edited document as soon as it is
//! done with it (`Batch::freeze`). `validate` drops what the guard finds nothing in
//! on its own. None of it may change anything: over real files, generated streams,
//! re-injection with other settings (updates, naming changes that remove trios,
//! prune) and hand-made edge cases, stdout, stderr and verdict are those of the same
//! run holding every tree to the end.

use crate::support;

use std::path::Path;

use kubectl_nvcf_worker::config::Config;
use kubectl_nvcf_worker::identity::Naming;
use kubectl_nvcf_worker::pipeline::{
    self, Memory, Output, Processor, StreamFormat, ValidateFormat, WriteArgs,
};
use kubectl_nvcf_worker::selector::Selector;
use kubectl_nvcf_worker::work::Workers;
use support::corpus_files;

struct Run {
    ok: Result<(), String>,
    stdout: String,
    stderr: String,
}

fn run(path: &Path, cfg: &Config, holding: bool) -> Run {
    let paths = [path.display().to_string()];
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let output = Output {
        format: StreamFormat::Yaml,
        write: WriteArgs::default(),
    };
    let run = on(if holding { Memory::Hold } else { Memory::Evict });
    let ok = pipeline::edit(
        &run,
        &paths,
        &Processor::Inject(cfg),
        output,
        &mut stdout,
        &mut stderr,
    );
    Run {
        ok: ok.map_err(|e| e.to_string()),
        stdout: String::from_utf8(stdout).expect("UTF-8 output"),
        stderr: String::from_utf8(stderr).expect("UTF-8 report"),
    }
}

/// A run on two threads (the parallel parse and emit paths) with the memory
/// strategy under test.
fn on(memory: Memory) -> pipeline::Run {
    pipeline::Run {
        workers: Workers::new(2),
        memory,
        exits_after: false,
    }
}

/// Runs both ways and compares; returns the streaming run.
fn same(path: &Path, cfg: &Config, what: &str) -> Run {
    let held = run(path, cfg, true);
    let streamed = run(path, cfg, false);
    assert_eq!(streamed.ok, held.ok, "{what}: verdict");
    assert_eq!(streamed.stderr, held.stderr, "{what}: report");
    assert!(
        streamed.stdout == held.stdout,
        "{what}: output differs (first difference at byte {})",
        streamed
            .stdout
            .bytes()
            .zip(held.stdout.bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(streamed.stdout.len().min(held.stdout.len()))
    );
    streamed
}

/// `validate` drops what the guard finds nothing in on its own as it reads; its
/// verdict and report (text, JSON, SARIF, JUnit, GitHub) are those of the run holding every tree.
fn same_validation(path: &Path, what: &str) {
    let paths = [path.display().to_string()];
    for format in [
        ValidateFormat::Text,
        ValidateFormat::Json,
        ValidateFormat::Sarif,
        ValidateFormat::Junit,
        ValidateFormat::Github,
    ] {
        let (mut held, mut dropped) = (Vec::new(), Vec::new());
        let held_ok = pipeline::check(&on(Memory::Hold), &paths, format, false, &mut held)
            .map_err(|e| e.to_string());
        let dropped_ok = pipeline::check(&on(Memory::Evict), &paths, format, false, &mut dropped)
            .map_err(|e| e.to_string());
        assert_eq!(dropped_ok, held_ok, "{what}: validate verdict ({format:?})");
        assert!(
            dropped == held,
            "{what}: validate report ({format:?}):\n{}\n---\n{}",
            String::from_utf8_lossy(&dropped),
            String::from_utf8_lossy(&held)
        );
    }
}

fn cfg(selector: &str, naming: Naming, cluster: &str, prune: bool) -> Config {
    Config {
        cluster_id: Some(cluster.into()),
        selector: Selector::parse(selector).unwrap(),
        naming,
        prune,
        ..Config::default()
    }
}

fn configs() -> Vec<(&'static str, Config)> {
    vec![
        (
            "default",
            cfg("nvcf.io/worker=true", Naming::PerWorkload, "c1", false),
        ),
        ("everything", cfg("", Naming::PerWorkload, "c1", false)),
        ("per-namespace", cfg("", Naming::PerNamespace, "c1", false)),
    ]
}

/// Each input with every config, then its output once more with other settings:
/// a new cluster ID (updates), the other naming mode (old trios removed), and a
/// selector that matches nothing with prune (identities taken out).
fn check_input(dir: &Path, name: &str, text: &str) -> usize {
    check_with(dir, name, text, configs())
}

fn check_with(dir: &Path, name: &str, text: &str, configs: Vec<(&str, Config)>) -> usize {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    same_validation(&path, name);
    let mut injected = 0;
    for (label, c) in configs {
        let first = same(&path, &c, &format!("{name} ({label})"));
        if first.ok.is_err() || first.stdout == text {
            continue;
        }
        injected += 1;
        let again = dir.join(format!("again-{name}"));
        std::fs::write(&again, &first.stdout).unwrap();
        same_validation(&again, &format!("{name} ({label}), injected"));
        let naming = match c.naming {
            Naming::PerWorkload => Naming::PerNamespace,
            Naming::PerNamespace => Naming::PerWorkload,
        };
        let others = [
            ("new cluster", cfg("", c.naming, "c2", false)),
            ("other naming", cfg("", naming, "c1", false)),
            ("prune", cfg("none-such=x", c.naming, "c1", true)),
        ];
        for (l2, c2) in others {
            same(&again, &c2, &format!("{name} ({label}, then {l2})"));
        }
    }
    injected
}

#[test]
fn real_files_come_out_the_same_as_when_every_tree_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let mut injected = 0;
    for f in corpus_files() {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue; // not UTF-8: refused alike, and checked elsewhere
        };
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        injected += check_input(dir.path(), &name, &text);
    }
    assert!(
        injected > 100,
        "most files have a workload to inject: {injected}"
    );
    // All at once, inputs and outputs: trios and claims meet across files.
    same_validation(dir.path(), "the whole corpus, injected and not");
}

#[test]
fn a_generated_stream_comes_out_the_same_as_when_every_tree_is_held() {
    let text = support::generated_corpus(120, &[]);
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(check_input(dir.path(), "generated.yaml", &text), 3);
    // Large enough to be parsed in chunks on every core (2 MiB and more): the
    // documents are evicted on the threads that parse them.
    let big: String = (0..6)
        .map(|i| text.replace("name: ", &format!("name: x{i}")))
        .collect();
    assert!(big.len() > 2 << 20, "{}", big.len());
    check_with(dir.path(), "big.yaml", &big, vec![configs().remove(1)]);
}

/// Where keeping or dropping a tree is decided: trios before and after their
/// workload, a List, anchors, JSON, a forged account the guard refuses, a workload
/// first in its file (new documents at the stream's start), implicit documents.
#[test]
fn edge_cases_come_out_the_same_as_when_every_tree_is_held() {
    let pod = |name: &str, extra: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels:\n    nvcf.io/worker: \"true\"\nspec:\n{extra}  containers:\n  - name: c\n    image: x\n"
        )
    };
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: b\n";
    let cases = [
        ("first.yaml", format!("{}---\n{cm}", pod("p", ""))),
        ("implicit.yaml", format!("# head\n{cm}---\n{}", pod("p", ""))),
        (
            "list.yaml",
            format!(
                "apiVersion: v1\nkind: List\nitems:\n- {}\n---\n{cm}",
                pod("p", "").replace('\n', "\n  ").trim_end()
            ),
        ),
        (
            "anchors.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: &l\n    nvcf.io/worker: \"true\"\nspec:\n  containers:\n  - name: c\n    image: x\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  labels: *l\n".to_string(),
        ),
        (
            "json.yaml",
            format!("{cm}---\n{{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {{\"name\": \"j\", \"labels\": {{\"nvcf.io/worker\": \"true\"}}}}, \"spec\": {{\"containers\": [{{\"name\": \"c\", \"image\": \"x\"}}]}}}}\n"),
        ),
        (
            "forged.yaml",
            format!("{cm}---\n{}", pod("f", "  serviceAccountName: nvcf-worker-pod-f\n").replace("nvcf.io/worker: \"true\"", "app: f")),
        ),
        // Decided as read, though the batch has its say: errors undo every edit
        // made while reading (an error in one workload, a trio of another's marks
        // in another file's place); a Helm 4 post-render file name and kpt's
        // annotations go to the new trio; a workload already injected is read
        // again (recognising it needs the trios).
        (
            "error.yaml",
            format!("{}---
{}", pod("a", ""), pod("b", "  volumes:\n  - name: nvcf-worker-token\n    emptyDir: {}\n")),
        ),
        (
            "foreign-trio.yaml",
            format!("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: nvcf-worker-pod-a\n---\n{}", pod("a", "")),
        ),
        (
            "postrender.yaml",
            format!("{cm}---\n{}", pod("a", "").replace("  labels:", "  annotations:\n    postrenderer.helm.sh/postrender-filename: a.yaml\n    config.kubernetes.io/path: a.yaml\n    config.kubernetes.io/index: '0'\n  labels:")),
        ),
        (
            "hook.yaml",
            format!("{cm}---\n{}", pod("h", "").replace("  labels:", "  annotations:\n    helm.sh/hook: pre-install\n  labels:")),
        ),
        // Selected workloads are dropped as read and read again when edited: from
        // a stream with directives (never dropped), CRLF, a byte order mark, an
        // explicit end, comments between documents, no final line break.
        (
            "directives.yaml",
            format!("%YAML 1.1\n---\n{}...\n%YAML 1.1\n---\n{}---\n{}", pod("a", ""), pod("b", ""), pod("c", "")),
        ),
        (
            "crlf.yaml",
            format!("{}---\n{cm}---\n{}", pod("a", ""), pod("b", "")).replace('\n', "\r\n"),
        ),
        ("bom.yaml", format!("\u{feff}{}---\n{}", pod("a", ""), pod("b", ""))),
        (
            "ends.yaml",
            format!("# a\n{}...\n# after a\n--- # b\n{}\n\n# after b\n---\n{}", pod("a", ""), pod("b", ""), pod("c", "").trim_end()),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in &cases {
        check_input(dir.path(), name, text);
    }
    // The forged account is refused both ways.
    let forged = run(&dir.path().join("forged.yaml"), &configs()[0].1, false);
    assert!(forged.stderr.contains("NVW101"), "{}", forged.stderr);
    let error = run(&dir.path().join("error.yaml"), &configs()[0].1, false);
    assert!(
        error.ok.is_err() && error.stdout.is_empty(),
        "{}",
        error.stderr
    );
}

/// How each document of a stream is read for `inject`: a selected workload that
/// carries no identity yet is edited as it is read (`Need::Now`) and never read
/// again, on the threads that parse a large stream too; one already injected, or
/// with anchors, is held or read again when its turn comes; the rest keep a
/// skeleton.
#[test]
fn selected_workloads_are_edited_as_they_are_read() {
    use kubectl_nvcf_worker::manifest::read::{load_with, Input};
    let load = |text: &str, cfg: &Config| {
        let processor = Processor::Inject(cfg);
        let evict = |d: &mut kubectl_nvcf_worker::manifest::Document| processor.evict(d);
        let input = Input {
            name: "s.yaml".into(),
            bytes: text.as_bytes().to_vec(),
            utf16: None,
        };
        load_with(input, Some(&evict), Workers::new(2))
            .unwrap()
            .docs
    };
    // (edited as read, read again, held whole, skeleton) of the workloads; every other
    // object keeps its skeleton or, as a trio's kinds do, its tree.
    let kinds = |docs: &[kubectl_nvcf_worker::manifest::Document]| {
        let (mut now, mut again, mut held, mut skeleton) = (0, 0, 0, 0);
        for d in docs {
            let (api, kind) = (d.view().str_at(&["apiVersion"]), d.view().str_at(&["kind"]));
            let workload =
                kubectl_nvcf_worker::workload::pod_spec_path(api.unwrap_or(""), kind.unwrap_or(""))
                    .is_some();
            if !workload {
                assert!(!d.reread && d.decided.is_none(), "{kind:?}");
                continue;
            }
            match (d.decided.is_some(), d.reread, d.evicted) {
                (true, false, true) => now += 1,
                (false, true, true) => again += 1,
                (false, false, false) => held += 1,
                (false, false, true) => skeleton += 1,
                other => panic!("{kind:?}: {other:?}"),
            }
        }
        (now, again, held, skeleton)
    };
    let everything = &configs()[1].1;
    let text = support::generated_corpus(120, &[]);
    let (now, again, held, skeleton) = kinds(&load(&text, everything));
    assert!(
        now > 30 && (again, held, skeleton) == (0, 0, 0),
        "{now} {again} {held} {skeleton}"
    );
    // In chunks on two threads.
    let big: String = (0..6)
        .map(|i| text.replace("name: ", &format!("name: x{i}")))
        .collect();
    assert_eq!(kinds(&load(&big, everything)), (6 * now, 0, 0, 0));
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    image: x\n";
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n";
    let anchored = pod.replace("  name: p\n", "  name: &n q\n  labels: {a: *n}\n");
    let injected = support::inject(pod, &["-l", ""]);
    injected.ok();
    let injected = injected.stdout;
    assert!(injected.contains("nvcf-worker-token"), "{injected}");
    let stream = format!("{pod}---\n{cm}");
    assert_eq!(kinds(&load(&stream, everything)), (1, 0, 0, 0));
    // Read whole or again (as the guard wants), never edited as read.
    assert_eq!(kinds(&load(&anchored, everything)).0, 0);
    assert_eq!(kinds(&load(&injected, everything)).0, 0);
    // Not selected: a skeleton.
    let none = cfg("none-such=x", Naming::PerWorkload, "c1", false);
    assert_eq!(kinds(&load(pod, &none)), (0, 0, 0, 1));
}
