//! Directories as kpt reads them (issue 25, item 2): the objects the tool reads from
//! a directory are those the real `kpt fn source` (kpt 1.0) emits, `.krmignore`
//! honoured, except what the tool leaves out on purpose and names on stderr: hidden
//! files and folders (kpt reads them; `.github/`, `.expected/` are no manifests to
//! apply) and local-config objects. Kustomizations and Helm charts are refused with
//! what to do instead, and an input with no manifest is an error on every command.

use crate::support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use support::{run, run_in, temp_tree};

fn cm(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n")
}

/// (path, kind/name) of every item `kpt fn source DIR` emits.
fn kpt_source(dir: &Path) -> BTreeSet<(String, String)> {
    let out = Command::new("kpt")
        .args(["fn", "source"])
        .arg(dir)
        .output()
        .expect("kpt 1.0 is installed");
    assert!(
        out.status.success(),
        "kpt fn source: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Value = serde_yaml::from_slice(&out.stdout).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let path = i["metadata"]["annotations"]["config.kubernetes.io/path"]
                .as_str()
                .unwrap()
                .to_string();
            let kind = i["kind"].as_str().unwrap_or("").to_string();
            let name = i["metadata"]["name"].as_str().unwrap_or("").to_string();
            (path, format!("{kind}/{name}"))
        })
        .collect()
}

#[test]
fn a_directory_is_read_as_kpt_reads_it_less_what_is_named_as_left_out() {
    let json = r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "from-json"}}"#;
    let local = "apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nmetadata:\n  name: cfg\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\nspec: {clusterID: x}\n";
    let tmp = temp_tree(&[
        ("pkg/Kptfile", "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\n"),
        ("pkg/.krmignore", "# kpt's own syntax (gitignore)\nignored/\n*.tmp.yaml\n/only-top.yaml\n!keep.tmp.yaml\n"),
        ("pkg/a.yaml", &format!("{}---\n{}", cm("a"), cm("a2"))),
        ("pkg/sub/s.yml", &cm("s")),
        ("pkg/sub/only-top.yaml", &cm("nested-only-top")),
        ("pkg/only-top.yaml", &cm("only-top")),
        ("pkg/ignored/i.yaml", &cm("ignored")),
        ("pkg/x.tmp.yaml", &cm("tmp")),
        ("pkg/keep.tmp.yaml", &cm("kept")),
        ("pkg/j.json", json),
        ("pkg/local.yaml", local),
        ("pkg/.expected/out.yaml", &cm("expected")),
        ("pkg/.github/workflows/ci.yml", "on: push\njobs: {}\n"),
        ("pkg/.hidden.yaml", &cm("hidden")),
        ("pkg/README.md", "not read\n"),
    ]);
    let pkg = tmp.path().join("pkg");
    let kpt = kpt_source(&pkg);
    let hidden = |p: &str| p.split('/').any(|s| s.starts_with('.'));
    // What kpt reads and the tool leaves out on purpose: hidden paths, local
    // config, and kpt's own Kptfile (no .yaml name; kpt's configuration).
    let deliberate =
        |(p, o): &(String, String)| hidden(p) || o == "WorkerIdentity/cfg" || p == "Kptfile";
    let want: BTreeSet<String> = kpt
        .iter()
        .filter(|e| !deliberate(e))
        .map(|(_, o)| o.clone())
        .collect();
    // The package and kpt agree on .krmignore (kpt left these out)...
    for gone in ["ConfigMap/ignored", "ConfigMap/tmp", "ConfigMap/only-top"] {
        assert!(
            !kpt.iter().any(|(_, o)| o == gone),
            "kpt reads {gone}: {kpt:?}"
        );
    }
    // ...and kpt reads the hidden ones the tool leaves out.
    for (path, _) in [
        (".expected/out.yaml", ""),
        (".github/workflows/ci.yml", ""),
        (".hidden.yaml", ""),
    ] {
        assert!(
            kpt.iter().any(|(p, _)| p == path),
            "kpt does not read {path}: {kpt:?}"
        );
    }
    let out = run_in(
        Some(tmp.path()),
        &["inject", "-o", "json", "-f", "pkg", "--cluster-id", "c1"],
        b"",
    );
    out.ok();
    let list: Value = serde_json::from_str(&out.stdout).unwrap();
    let got: BTreeSet<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        got, want,
        "the tool reads what kpt reads, less what it names\n{out}"
    );
    // Each deliberate omission is named, with why.
    for line in [
        "left out: pkg/.expected: hidden",
        "left out: pkg/.github: hidden",
        "left out: pkg/.hidden.yaml: hidden",
        "left out: pkg/local.yaml: document 1 (WorkerIdentity cfg): local config",
    ] {
        assert!(
            out.stderr.lines().any(|l| l.starts_with(line)),
            "{line}\n{out}"
        );
    }
    // validate reads the same files (local config is checked too): kpt's paths
    // less the hidden ones and the Kptfile.
    let files: BTreeSet<&String> = kpt
        .iter()
        .map(|(p, _)| p)
        .filter(|p| !hidden(p) && *p != "Kptfile")
        .collect();
    let v = run_in(Some(tmp.path()), &["validate", "pkg"], b"");
    v.ok();
    assert_eq!(
        v.stdout,
        format!("0 errors, 0 warnings in {} files\n", files.len())
    );
}

#[test]
fn kustomizations_and_charts_are_refused_with_what_to_do() {
    let tmp = temp_tree(&[
        ("app/kustomization.yaml", "resources: [deployment.yaml]\ntransformers: [nvcf.yaml]\n"),
        ("app/deployment.yaml", &cm("d")),
        ("app/nvcf.yaml", "apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nmetadata: {name: cfg}\nspec: {clusterID: x}\n"),
        ("bare/Kustomization", "resources: [deployment.yaml]\n"),
        ("bare/deployment.yaml", &cm("d")),
        ("chart/Chart.yaml", "apiVersion: v2\nname: c\nversion: 0.1.0\n"),
        ("chart/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}}\n"),
    ]);
    let cases = [
        (
            "app",
            "app/kustomization.yaml",
            "app is a kustomization",
            "kustomize build app | kubectl nvcf-worker inject -f -",
        ),
        (
            "bare",
            "bare/Kustomization",
            "bare is a kustomization",
            "kustomize build bare | kubectl nvcf-worker inject -f -",
        ),
        (
            "chart",
            "chart/Chart.yaml",
            "chart is a Helm chart",
            "helm template RELEASE chart | kubectl nvcf-worker inject -f -",
        ),
    ];
    for (dir, file, what, fix) in cases {
        for cmd in [
            &["inject", "--cluster-id", "c1", "-f"][..],
            &["uninject", "-f"],
            &["validate"],
        ] {
            let args = [cmd, &[dir]].concat();
            let out = run_in(Some(tmp.path()), &args, b"");
            out.code(1);
            assert_eq!(out.stdout, "", "{args:?}");
            assert!(
                out.stderr.contains(&format!("error: {file}: "))
                    && out.stderr.contains(what)
                    && out.stderr.contains(fix),
                "{args:?}\n{out}"
            );
        }
    }
    // A file of it named on its own is read as any file.
    run_in(Some(tmp.path()), &["validate", "app/deployment.yaml"], b"").ok();
    // The repository's own deploy/ is a kustomization: the README's command on it
    // says to build it.
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let out = run(
        &[
            "inject",
            "-f",
            deploy.to_str().unwrap(),
            "--cluster-id",
            "c1",
        ],
        "",
    );
    out.code(1);
    assert!(
        out.stderr.contains("is a kustomization") && out.stderr.contains("kustomize build"),
        "{out}"
    );
}

#[test]
fn an_input_without_manifests_is_an_error_on_every_command() {
    let tmp = temp_tree(&[("hidden/.only.yaml", &cm("h")), ("docs/README.md", "x\n")]);
    std::fs::create_dir(tmp.path().join("empty")).unwrap();
    for dir in ["empty", "hidden", "docs"] {
        for cmd in [
            &["inject", "--cluster-id", "c1", "-f"][..],
            &["uninject", "-f"],
            &["validate"],
        ] {
            let args = [cmd, &[dir]].concat();
            let out = run_in(Some(tmp.path()), &args, b"");
            out.code(1);
            assert!(
                out.stderr.contains(&format!("error: {dir}: "))
                    && out.stderr.contains("no manifests"),
                "{args:?}\n{out}"
            );
            if dir == "hidden" {
                assert!(out.stderr.contains("hidden/.only.yaml: hidden"), "{out}");
            }
        }
    }
}
