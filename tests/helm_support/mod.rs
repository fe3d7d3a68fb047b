//! The real `helm` 3 and 4 for the Helm and Argo CD tests, built from the Helm Go
//! modules by scripts/build-helm.sh (cached outside the clone, keyed by inputs).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The directory holding `helm3/helm` and `helm4/helm`; builds them on first use.
pub fn helm_cache() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-helm.sh");
        let out = Command::new(&script)
            .output()
            .expect("run scripts/build-helm.sh");
        assert!(
            out.status.success(),
            "{} failed:\n{}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
}

pub fn helm3() -> PathBuf {
    helm_cache().join("helm3/helm")
}

pub fn helm4() -> PathBuf {
    helm_cache().join("helm4/helm")
}

/// The directory of the binaries cargo built for this test run
/// (`kubectl-nvcf-worker` and the others), for a PATH.
pub fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_kubectl-nvcf-worker"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A PATH of `dirs` first, then the directories of the system tools tests need
/// (kubectl, sh), without the developer's own PATH entries.
pub fn path_of(dirs: &[&Path]) -> String {
    let mut parts: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    for tool in ["kubectl", "sh", "mktemp"] {
        if let Some(dir) = which(tool) {
            parts.push(dir.display().to_string());
        }
    }
    parts.dedup();
    parts.join(":")
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).find(|d| d.join(tool).is_file()))
}

/// Copies a directory tree (the chart fixture) into `to`.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

pub fn fixture_chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/helm/worker-app")
}
