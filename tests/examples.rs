//! The catalog-style examples under examples/: each package is copied to a temp
//! dir (without `.expected/`), run twice with the real `kpt fn eval --exec`, and
//! compared with `.expected/`: `config.yaml` (testType, exitCode, execPath, args),
//! `diff.patch` (`git diff` of the package after the function, as the kpt
//! functions catalog records it) and, when present, `results.yaml`.
//!
//! `UPDATE_EXPECTED=1 cargo test --test examples` rewrites the expected files that
//! differ and then fails the test that wrote them ("golden updated: rerun without
//! UPDATE_EXPECTED"), as kpt-functions-sdk does: a run that rewrote its own
//! expectations proves nothing, so it never passes.

use crate::support;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-nvcf-worker");
const EXAMPLES: [&str; 4] = [
    "inject-deployment",
    "validate-forged-reference",
    "cronjob",
    "kustomize-overlay",
];

fn example_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
}

fn updating() -> bool {
    std::env::var_os("UPDATE_EXPECTED").is_some_and(|v| v == "1")
}

/// The expected files of one test: each is compared (or, updating, rewritten when
/// it differs), and [`Golden::finish`] fails the test when any was rewritten.
struct Golden {
    update: bool,
    updated: Vec<PathBuf>,
}

impl Golden {
    fn new() -> Golden {
        Golden::with(updating())
    }

    fn with(update: bool) -> Golden {
        Golden {
            update,
            updated: Vec::new(),
        }
    }

    /// Compares `actual` with `.expected/<file>` of example `name`.
    fn check(&mut self, name: &str, file: &str, actual: &str) {
        let path = example_dir(name).join(".expected").join(file);
        if let Err(e) = self.check_path(&path, actual) {
            panic!("{name}: {e}");
        }
    }

    /// Compares `actual` with the file at `path`; updating, rewrites a file that
    /// differs (or is missing) and records it, so that `finish` fails.
    fn check_path(&mut self, path: &Path, actual: &str) -> Result<(), String> {
        let expected = fs::read_to_string(path);
        if expected.as_deref().ok() == Some(actual) {
            return Ok(());
        }
        if self.update {
            fs::write(path, actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            self.updated.push(path.to_path_buf());
            return Ok(());
        }
        Err(match expected {
            Err(e) => format!("{}: {e} (UPDATE_EXPECTED=1 writes it)", path.display()),
            Ok(expected) => format!(
                "{} differs from the actual output\n--- expected\n{expected}\n--- actual\n{actual}",
                path.display()
            ),
        })
    }

    /// Fails when an expected file was rewritten by this test.
    fn result(&self) -> Result<(), String> {
        if self.updated.is_empty() {
            return Ok(());
        }
        Err(format!(
            "golden updated: rerun without UPDATE_EXPECTED ({})",
            self.updated
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }

    #[track_caller]
    fn finish(self) {
        if let Err(e) = self.result() {
            panic!("{e}");
        }
    }
}

struct TestCase {
    exit_code: i32,
    args: BTreeMap<String, String>,
}

fn test_case(name: &str) -> TestCase {
    let path = example_dir(name).join(".expected/config.yaml");
    let v: serde_yaml::Value = serde_yaml::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(v["testType"].as_str(), Some("eval"), "{name}: testType");
    assert_eq!(
        v["execPath"].as_str(),
        Some("kubectl-nvcf-worker"),
        "{name}: execPath names the function binary"
    );
    let args = v["args"]
        .as_mapping()
        .unwrap_or_else(|| panic!("{name}: args must be a mapping"))
        .iter()
        .map(|(k, v)| {
            let s = |v: &serde_yaml::Value| v.as_str().map(str::to_owned);
            (
                s(k).unwrap(),
                s(v).expect("args values are strings, as kpt sends them"),
            )
        })
        .collect();
    TestCase {
        exit_code: v["exitCode"].as_i64().unwrap_or(0) as i32,
        args,
    }
}

fn copy_package(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() == ".expected" {
            continue;
        }
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_package(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// git with no user or system config, so the diff format is git's default.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=examples",
            "-c",
            "user.email=examples@localhost",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "core.autocrlf=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git runs");
    ok(out, &format!("git {args:?}"))
}

/// One `kpt fn eval --exec`; returns the exit code and results.yaml with the
/// binary's path normalised to its name.
fn kpt_eval(pkg: &Path, results: &Path, case: &TestCase) -> (i32, String) {
    let _ = fs::remove_dir_all(results);
    let out = Command::new("kpt")
        .args(["fn", "eval", "--exec", BIN])
        .arg(pkg)
        .arg("--results-dir")
        .arg(results)
        .arg("--")
        .args(case.args.iter().map(|(k, v)| format!("{k}={v}")))
        .output()
        .expect("kpt runs");
    let code = out.status.code().expect("kpt exited");
    let results = fs::read_to_string(results.join("results.yaml"))
        .unwrap_or_else(|e| {
            panic!(
                "kpt wrote no results.yaml ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .replace(BIN, "kubectl-nvcf-worker");
    (code, results)
}

/// Runs an example as the kpt catalog does and checks it against `.expected/`.
/// Returns the temp dir holding the package after the runs.
fn run_example(name: &str) -> tempfile::TempDir {
    let case = test_case(name);
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join(name);
    let results_dir = tmp.path().join("results");
    copy_package(&example_dir(name), &pkg);
    git(&pkg, &["init", "-q"]);
    git(&pkg, &["add", "-A"]);
    git(&pkg, &["commit", "-q", "-m", "package"]);

    let (code, results) = kpt_eval(&pkg, &results_dir, &case);
    assert_eq!(
        code, case.exit_code,
        "{name}: first run's exit code\n{results}"
    );
    git(&pkg, &["add", "-A"]);
    let diff = git(
        &pkg,
        &[
            "diff",
            "--cached",
            "--no-color",
            "--no-ext-diff",
            "--no-renames",
        ],
    );
    let mut golden = Golden::new();
    golden.check(name, "diff.patch", &diff);
    if example_dir(name).join(".expected/results.yaml").exists() || case.exit_code != 0 {
        golden.check(name, "results.yaml", &results);
    }
    git(&pkg, &["commit", "-q", "--allow-empty", "-m", "first run"]);

    let (code2, results2) = kpt_eval(&pkg, &results_dir, &case);
    assert_eq!(code2, case.exit_code, "{name}: second run's exit code");
    // The second run reports what the first did, less its first injections
    // (nothing is injected twice).
    let without_injections = |text: &str| {
        let mut v: serde_json::Value = serde_yaml::from_str(text).unwrap();
        for item in v["items"].as_array_mut().into_iter().flatten() {
            if let Some(rs) = item.get_mut("results").and_then(|r| r.as_array_mut()) {
                rs.retain(|r| {
                    !r["message"]
                        .as_str()
                        .is_some_and(|m| m.ends_with(" injected"))
                });
                if rs.is_empty() {
                    item.as_object_mut().unwrap().remove("results");
                }
            }
        }
        v
    };
    assert_eq!(
        serde_yaml::from_str::<serde_json::Value>(&results2).unwrap(),
        without_injections(&results),
        "{name}: second run reports the same, less the first injections"
    );
    assert!(
        !results2.contains(" injected\n"),
        "{name}: injected twice:\n{results2}"
    );
    let changed = git(&pkg, &["status", "--porcelain", "--untracked-files=all"]);
    assert_eq!(
        changed, "",
        "{name}: second run changed the package (not idempotent)"
    );
    golden.finish();
    tmp
}

#[test]
fn inject_deployment() {
    run_example("inject-deployment");
    let diff =
        fs::read_to_string(example_dir("inject-deployment").join(".expected/diff.patch")).unwrap();
    // The default contract: the namespace's one nvcf-worker.
    assert!(diff.contains("+      serviceAccountName: nvcf-worker\n"));
    assert!(diff.contains("+    nvcf.io/identity-scope: namespace"));
    assert!(diff.contains("+                  audience: nvcf-icms:prod-1"));
    assert!(diff.contains("+kind: RoleBinding"));
    assert!(
        !diff.contains("frontend.yaml"),
        "an unlabelled workload must be left alone"
    );
}

#[test]
fn validate_forged_reference_is_rejected() {
    run_example("validate-forged-reference");
    let dir = example_dir("validate-forged-reference").join(".expected");
    assert_eq!(fs::read_to_string(dir.join("diff.patch")).unwrap(), "");
    let results = fs::read_to_string(dir.join("results.yaml")).unwrap();
    assert!(results.contains("rule: NVW101"), "{results}");
    assert!(results.contains("severity: error"), "{results}");
    assert!(
        results.contains("path: spec.template.spec.serviceAccountName"),
        "{results}"
    );
}

#[test]
fn cronjob() {
    run_example("cronjob");
    let diff = fs::read_to_string(example_dir("cronjob").join(".expected/diff.patch")).unwrap();
    assert!(diff.contains("+          serviceAccountName: nvcf-worker\n"));
    assert!(diff.contains("+                      expirationSeconds: 3600"));
    // includeInitContainers=true: the init container gets the mount too.
    assert_eq!(
        diff.matches("+                - name: nvcf-worker-token")
            .count(),
        2
    );
}

#[test]
fn kustomize_overlay() {
    let tmp = run_example("kustomize-overlay");
    assert_eq!(
        fs::read_to_string(example_dir("kustomize-overlay").join(".expected/diff.patch")).unwrap(),
        "",
        "validate mode changes nothing"
    );

    let xdg = tmp.path().join("xdg");
    let root = xdg.join("kustomize/plugin");
    let installed = ok(
        Command::new(BIN)
            .args(["install-kustomize-plugin", "--plugin-root"])
            .arg(&root)
            .output()
            .unwrap(),
        "install-kustomize-plugin",
    );
    assert!(installed.contains("fn.nvcf.io/v1alpha1/workeridentity/WorkerIdentity"));
    let rendered = ok(
        Command::new("kubectl")
            .args(["kustomize", "--enable-alpha-plugins"])
            .arg(tmp.path().join("kustomize-overlay/overlay"))
            .env("XDG_CONFIG_HOME", &xdg)
            .output()
            .unwrap(),
        "kubectl kustomize",
    );
    let mut golden = Golden::new();
    golden.check("kustomize-overlay", "kustomize.yaml", &rendered);
    golden.finish();
    assert!(rendered.contains("audience: nvcf-icms:staging-1"));
    assert!(rendered.contains("namespace: nvcf-staging"));

    // What the plugin produced passes the guard.
    ok(
        support::pipe(
            Command::new(BIN).args(["validate", "-"]),
            rendered.as_bytes(),
        ),
        "validate of the rendered overlay",
    );
}

#[test]
fn every_example_is_a_tested_package_with_a_readme() {
    let mut found: Vec<String> =
        fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples"))
            .unwrap()
            .map(|e| e.unwrap())
            // Plain files are cargo examples (`examples/*.rs`), not kpt packages.
            .filter(|e| e.file_type().unwrap().is_dir())
            .map(|e| e.file_name().into_string().unwrap())
            .collect();
    found.sort();
    let mut want = EXAMPLES.map(String::from).to_vec();
    want.sort();
    assert_eq!(found, want, "every example has a test above");
    for name in EXAMPLES {
        let dir = example_dir(name);
        assert!(dir.join("Kptfile").is_file(), "{name}: Kptfile");
        let readme = fs::read_to_string(dir.join("README.md")).unwrap();
        for section in [
            "## Overview",
            "## Function invocation",
            "## Expected result",
        ] {
            assert!(readme.contains(section), "{name}/README.md lacks {section}");
        }
        // The README shows the same invocation the test runs.
        let case = test_case(name);
        let args: Vec<String> = case.args.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert!(
            readme.contains(&format!("-- {}", args.join(" "))),
            "{name}/README.md shows `kpt fn eval ... -- {}`",
            args.join(" ")
        );
    }
}

/// Updating never passes: a rewritten expected file fails the test that wrote it,
/// an unchanged one does not, and without updating a difference fails unwritten.
#[test]
fn updating_an_expected_file_fails_the_test_that_wrote_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("diff.patch");
    fs::write(&path, "old\n").unwrap();

    let mut compare = Golden::with(false);
    let err = compare.check_path(&path, "new\n").unwrap_err();
    assert!(err.contains("--- expected\nold\n"), "{err}");
    assert_eq!(fs::read_to_string(&path).unwrap(), "old\n", "not written");
    assert!(compare.result().is_ok());

    let mut update = Golden::with(true);
    update.check_path(&path, "new\n").unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "new\n", "written");
    let missing = dir.path().join("results.yaml");
    update.check_path(&missing, "r\n").unwrap();
    assert_eq!(fs::read_to_string(&missing).unwrap(), "r\n");
    let err = update.result().unwrap_err();
    assert!(
        err.starts_with("golden updated: rerun without UPDATE_EXPECTED")
            && err.contains("diff.patch")
            && err.contains("results.yaml"),
        "{err}"
    );

    let mut again = Golden::with(true);
    again.check_path(&path, "new\n").unwrap();
    assert!(
        again.result().is_ok(),
        "nothing to rewrite: nothing updated"
    );
    let err = Golden::with(false)
        .check_path(&dir.path().join("none"), "x")
        .unwrap_err();
    assert!(err.contains("UPDATE_EXPECTED=1 writes it"), "{err}");
}
