//! The KRM function on what the real kpt sends it: ResourceLists built by
//! `kpt fn source` of packages made from the real files and the generated corpus,
//! and captured from `kpt fn eval --exec` (a function that tees its stdin). On
//! each, under validate, inject (several configs, then again on its output) and
//! uninject, the run that reads the items as a stream answers byte for byte as the
//! run that reads the ResourceList as one tree (`support::krm_diff::same`), and
//! the items are read as a stream wherever the parser finds them readable alone.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use kubectl_nvcf_worker::error::Exit;
use support::krm_diff::{same, streams};
use tempfile::TempDir;

/// The functionConfig kpt is given; the runs swap its `data` for theirs.
const FN_CONFIG: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fn\ndata:\n  mode: validate\n";

/// Runs kpt in `dir` with an isolated HOME; its stdout.
fn kpt(dir: &Path, args: &[&str], env: &[(&str, &Path)]) -> String {
    let home = dir.join(".home");
    std::fs::create_dir_all(home.join(".config")).unwrap();
    let mut cmd = Command::new("kpt");
    cmd.args(args)
        .current_dir(dir)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run kpt");
    assert!(
        out.status.success(),
        "kpt {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 from kpt")
}

/// A package of `files` (name, text) under `root`.
fn package(root: &Path, name: &str, files: &[(String, String)]) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for (file, text) in files {
        std::fs::write(dir.join(file), text).unwrap();
    }
    dir
}

/// What `kpt fn source PKG --fn-config fn.yaml` writes.
fn source(root: &Path, pkg: &Path) -> String {
    std::fs::write(root.join("fn.yaml"), FN_CONFIG).unwrap();
    kpt(
        root,
        &[
            "fn",
            "source",
            pkg.to_str().unwrap(),
            "--fn-config",
            "fn.yaml",
        ],
        &[],
    )
}

/// What `kpt fn eval PKG --exec` sends its function, captured by a function
/// that tees its stdin to a file and answers with it.
fn eval_input(root: &Path, pkg: &Path) -> String {
    std::fs::write(root.join("fn.yaml"), FN_CONFIG).unwrap();
    let tee = root.join("tee.sh");
    std::fs::write(&tee, "#!/bin/sh\ntee \"$CAPTURE\"\n").unwrap();
    let mut perms = std::fs::metadata(&tee).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&tee, perms).unwrap();
    let capture = root.join("captured.yaml");
    kpt(
        root,
        &[
            "fn",
            "eval",
            pkg.to_str().unwrap(),
            "--exec",
            tee.to_str().unwrap(),
            "--fn-config",
            "fn.yaml",
        ],
        &[("CAPTURE", &capture)],
    );
    std::fs::read_to_string(capture).expect("kpt ran the function")
}

/// The ResourceList kpt wrote with its functionConfig's `data` replaced (kpt
/// writes the functionConfig last, `data` its last key).
fn with_data(rl: &str, data: &[(&str, &str)]) -> String {
    let at = rl.rfind("\n  data:\n").expect("functionConfig data") + "\n  data:\n".len();
    let mut out = rl[..at].to_string();
    for (k, v) in data {
        out.push_str(&format!("    {k}: {}\n", serde_json::to_string(v).unwrap()));
    }
    out
}

/// The ResourceList a run answered, as kpt hands it to the next function:
/// without `results`.
fn without_results(answer: &str) -> Option<String> {
    let at = answer.find("\nresults:\n").map_or(answer.len(), |i| i + 1);
    let text = &answer[..at];
    text.contains("\nfunctionConfig:\n")
        .then(|| text.to_string())
}

const INJECT: [&[(&str, &str)]; 3] = [
    &[("clusterID", "c1")],
    &[("clusterID", "c1"), ("selector", "")],
    &[
        ("clusterID", "c1"),
        ("selector", ""),
        ("naming", "per-namespace"),
    ],
];

/// Every config on the ResourceList, then on what inject made of it: both ways
/// alike. Returns how many runs read the items as a stream, of how many, and
/// whether validate passed (items in error are read as one tree, which says why).
fn check(rl: &str, what: &str) -> (usize, usize, bool) {
    let (mut streamed, mut runs) = (0, 0);
    let mut run = |input: &str, label: &str| {
        runs += 1;
        streamed += usize::from(streams(input));
        same(input, &format!("{what} ({label})"))
    };
    let valid = matches!(
        run(&with_data(rl, &[("mode", "validate")]), "validate"),
        Ok((_, Exit::Success))
    );
    for (i, data) in INJECT.iter().enumerate() {
        let Ok((out, Exit::Success)) = run(&with_data(rl, data), &format!("inject {i}")) else {
            continue;
        };
        let Some(again) = without_results(&out) else {
            continue;
        };
        let _ = run(
            &with_data(&again, &[("clusterID", "c2"), ("selector", "")]),
            &format!("inject {i}, again"),
        );
        let _ = run(
            &with_data(&again, &[("mode", "uninject")]),
            &format!("inject {i}, uninject"),
        );
    }
    (streamed, runs, valid)
}

/// The real files as packages of ten files each, then those of every package
/// that validates as one package (both seqindent styles among them; JSON files,
/// which kpt writes as flow items; multi-line scalars).
#[test]
fn real_packages_from_kpt_stream_as_from_one_tree() {
    let root = TempDir::new().unwrap();
    let files: Vec<(String, String)> = support::corpus_files()
        .iter()
        .map(|f| {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(f).unwrap())
        })
        .collect();
    let (mut good, mut refused) = (Vec::new(), 0);
    for (i, chunk) in files.chunks(10).enumerate() {
        let pkg = package(root.path(), &format!("p{i}"), chunk);
        let (streamed, runs, valid) = check(&source(root.path(), &pkg), &format!("package {i}"));
        match valid {
            true => {
                assert_eq!(streamed, runs, "package {i}: streams in every run");
                good.extend_from_slice(chunk);
            }
            false => refused += 1,
        }
    }
    // (The corpus's 11 files that do not decode, in 7 packages.)
    assert!(refused <= 11 && good.len() > 180, "{refused} refused");
    let whole = source(root.path(), &package(root.path(), "all", &good));
    for note in ["seqindent: 'compact'", "seqindent: 'wide'", "\n- {\""] {
        assert!(whole.contains(note), "{note} among them");
    }
    let (streamed, runs, valid) = check(&whole, "the packages that validate, as one");
    assert!(valid);
    assert_eq!(streamed, runs, "the whole package streams in every run");
}

/// The generated corpus as a package, in kpt's serialization: its ConfigMaps'
/// multi-line single-quoted scalars end on a quote at the margin inside the item.
#[test]
fn generated_package_from_kpt_streams_as_from_one_tree() {
    let root = TempDir::new().unwrap();
    let text = support::generated_corpus(60, &[]);
    let pkg = package(root.path(), "gen", &[("all.yaml".into(), text)]);
    let rl = source(root.path(), &pkg);
    assert!(
        rl.lines().any(|l| l == "'"),
        "kpt writes a closing quote at the margin"
    );
    let (streamed, runs, valid) = check(&rl, "generated");
    assert!(valid && streamed == runs, "{streamed} of {runs}");
    let rl = eval_input(root.path(), &pkg);
    assert!(rl.contains("config.k8s.io/id"), "what eval sends");
    let (streamed, runs, valid) = check(&rl, "generated, as kpt fn eval sends it");
    assert!(valid && streamed == runs, "{streamed} of {runs}");
}

/// Files whose objects use anchors, aliases, merge keys and tags of their own
/// (`anchored_doc`, kinds but the one aliasing another object's anchor), as
/// `kpt fn source` writes them (`!!merge <<`, one anchor name in several items):
/// every run reads the items as a stream, and answers as the tree does (where
/// inject edits such an item, the tree's answer, as it writes the list anew).
#[test]
fn anchored_package_from_kpt_streams_as_from_one_tree() {
    use support::krm_diff::{anchored_doc, ANCHORED_KINDS};
    let root = TempDir::new().unwrap();
    // Kind 5 (in error) in a package of its own: the others validate.
    let (bad, good): (Vec<u8>, Vec<u8>) = (0..ANCHORED_KINDS - 1).partition(|&k| k == 5);
    for (name, kinds) in [("anchored", good), ("anchored-bad", bad)] {
        let files: Vec<(String, String)> = (kinds.iter().enumerate())
            .map(|(i, &k)| {
                let docs = [anchored_doc(2 * i, k), anchored_doc(2 * i + 1, k)];
                (format!("f{i}.yaml"), docs.join("---\n"))
            })
            .collect();
        let rl = source(root.path(), &package(root.path(), name, &files));
        assert!(rl.contains("!!merge <<: *c") || name != "anchored", "{rl}");
        let (streamed, runs, valid) = check(&rl, name);
        assert_eq!(valid, name == "anchored", "{name} validates");
        assert_eq!(streamed, runs, "{name}: streams in every run");
    }
}
