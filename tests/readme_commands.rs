//! Every command in the examples' READMEs, run exactly as written (`sh -c LINE`)
//! from a checkout-like directory, with the built binaries on PATH as
//! `cargo install` would put them and the real kpt and kubectl: what a new user
//! following the docs literally gets. Only commands that need a container
//! engine (`kpt fn eval --image`) are not run, and they are named here.

use crate::helm_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use helm_support::{bin_dir, copy_tree};

/// Commands that cannot run on a machine without a container engine.
fn needs_container_engine(line: &str) -> bool {
    line.contains(" --image ")
}

/// The lines of every ```shell block of `readme`.
fn shell_lines(readme: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut in_shell = false;
    for line in readme.lines() {
        match line.trim() {
            "```shell" | "```sh" | "```bash" => in_shell = true,
            "```" => in_shell = false,
            l if in_shell && !l.is_empty() && !l.starts_with('#') => lines.push(l.to_string()),
            _ => {}
        }
    }
    lines
}

fn examples() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("README.md").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// The exit code the example's `.expected/config.yaml` records for its kpt run.
fn expected_kpt_exit(example: &Path) -> i32 {
    let text = std::fs::read_to_string(example.join(".expected/config.yaml")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("exitCode:"))
        .map_or(0, |c| c.trim().parse().unwrap())
}

#[test]
fn every_example_readme_command_runs_as_written() {
    let system_path = std::env::var("PATH").unwrap_or_default();
    let mut ran = 0;
    let mut not_run = Vec::new();
    for example in examples() {
        let name = example.file_name().unwrap().to_str().unwrap().to_string();
        let lines = shell_lines(&std::fs::read_to_string(example.join("README.md")).unwrap());
        assert!(!lines.is_empty(), "{name}: README has no commands");
        // A fresh checkout per example: commands like `kpt fn eval` write back.
        let checkout = tempfile::tempdir().unwrap();
        copy_tree(&example, &checkout.path().join("examples").join(&name));
        let home = checkout.path().join("home");
        for line in lines {
            if needs_container_engine(&line) {
                not_run.push(format!("{name}: {line}"));
                continue;
            }
            let want = if line.starts_with("kpt fn eval") {
                expected_kpt_exit(&example)
            } else {
                0
            };
            let out = Command::new("sh")
                .args(["-c", &line])
                .current_dir(checkout.path())
                .env("PATH", format!("{}:{system_path}", bin_dir().display()))
                .env("HOME", &home)
                .env("XDG_CONFIG_HOME", home.join(".config"))
                .env_remove("KUSTOMIZE_PLUGIN_HOME")
                .output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(want),
                "{name}: `{line}`\n--- stdout\n{}\n--- stderr\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            ran += 1;
        }
    }
    assert!(ran >= 5, "ran {ran} commands");
    // Only the container-image invocation is left out; say so in the output.
    println!("not run (no container engine here): {not_run:#?}");
    assert!(not_run.iter().all(|l| l.contains("--image")), "{not_run:?}");
}

/// The Markdown and YAML a user reads: README, docs, examples, deploy.
fn doc_files() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    let mut stack = vec![
        root.join("README.md"),
        root.join("docs"),
        root.join("examples"),
        root.join("deploy"),
        root.join("Dockerfile"),
        root.join("metadata.yaml"),
    ];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else if let Ok(text) = std::fs::read_to_string(&p) {
            out.push((p.strip_prefix(root).unwrap().display().to_string(), text));
        }
    }
    out
}

#[test]
fn docs_agree_on_image_tag_and_install_commands() {
    let version = env!("CARGO_PKG_VERSION");
    // No image of this tool is published: the docs name the one the user
    // builds and pushes, and deploy/ takes it from kustomization.yaml's `images:`.
    let image = "YOUR-REGISTRY/kubectl-nvcf-worker:";
    let mut seen = 0;
    for (file, text) in doc_files() {
        assert!(
            !text.contains("ghcr.io/nvidia/kubectl-nvcf-worker:"),
            "{file} names an image no one has published"
        );
        for (i, _) in text.match_indices(image) {
            let tag: String = text[i + image.len()..]
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '`')
                .collect();
            assert_eq!(tag, format!("v{version}"), "{file}: image tag");
            seen += 1;
        }
        for line in text.lines().filter(|l| l.contains("cargo install")) {
            if let Some(cmd) = line.split("cargo install").nth(1) {
                let args = cmd.trim_start();
                if args.starts_with("--") {
                    assert!(
                        args.starts_with("--locked --path ."),
                        "{file}: `cargo install{cmd}` (README says cargo install --locked --path .)"
                    );
                }
            }
        }
    }
    assert!(seen >= 3, "{seen} image references");
    let kustomization = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kustomization.yaml"),
    )
    .unwrap();
    assert!(
        kustomization.contains(&format!(
            "- name: kubectl-nvcf-worker\n  newName: YOUR-REGISTRY/kubectl-nvcf-worker\n  newTag: v{version}\n"
        )),
        "{kustomization}"
    );
}

#[test]
fn pre_commit_hooks_run_serially_on_yaml_and_json() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(".pre-commit-hooks.yaml");
    let docs = kubectl_nvcf_worker::manifest::parse_stream(&std::fs::read(path).unwrap()).unwrap();
    let hooks = kubectl_nvcf_worker::manifest::to_json(docs[0].view());
    let hooks = hooks.as_array().unwrap();
    let languages: Vec<&str> = hooks
        .iter()
        .map(|h| h["language"].as_str().unwrap())
        .collect();
    assert_eq!(languages, ["script", "rust", "system"]);
    for h in hooks {
        assert_eq!(h["require_serial"], true, "{h}");
        assert_eq!(h["types_or"], serde_json::json!(["yaml", "json"]), "{h}");
    }
    // The repository-wide hook runs its script (tests/distribution.rs runs it
    // through real pre-commit); the others validate the staged files.
    assert_eq!(hooks[0]["entry"], "scripts/pre-commit-validate-repo.sh");
    assert_eq!(hooks[0]["pass_filenames"], false);
    for h in &hooks[1..] {
        assert_eq!(h["entry"], "kubectl-nvcf-worker validate", "{h}");
    }
}
