//! The offline integration tests: the tool on its own, kubectl's decoder (the
//! oracle) and the SARIF schema as judges.

// One crate: the support code is compiled and linked once, and libtest runs
// the files' tests side by side instead of one binary after another.

#[path = "../support/mod.rs"]
mod support;

#[path = "../ci_formats.rs"]
mod ci_formats;
#[path = "../cli_conventions.rs"]
mod cli_conventions;
#[path = "../corpus.rs"]
mod corpus;
#[path = "../differential.rs"]
mod differential;
#[path = "../edit_fidelity.rs"]
mod edit_fidelity;
#[path = "../fn_config.rs"]
mod fn_config;
#[path = "../guard_rules.rs"]
mod guard_rules;
#[path = "../hostile.rs"]
mod hostile;
#[path = "../in_place_safety.rs"]
mod in_place_safety;
#[path = "../inject_rules.rs"]
mod inject_rules;
#[path = "../jsonpath_kubectl.rs"]
mod jsonpath_kubectl;
#[path = "../krm_streaming.rs"]
mod krm_streaming;
#[path = "../policy.rs"]
mod policy;
#[path = "../properties.rs"]
mod properties;
#[path = "../reconcile.rs"]
mod reconcile;
#[path = "../sarif.rs"]
mod sarif;
#[path = "../streaming.rs"]
mod streaming;
#[path = "../token_surface.rs"]
mod token_surface;

/// With `autotests = false`, a test file nobody lists would never run: every
/// `tests/*.rs` is a `[[test]]` of Cargo.toml or a module of exactly one suite.
#[test]
fn every_test_file_runs_in_exactly_one_binary() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut runs: Vec<String> = Vec::new();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    for line in manifest.lines() {
        if let Some(p) = line.strip_prefix("path = \"tests/") {
            runs.push(p.trim_end_matches('"').to_string());
        }
    }
    for suite in runs.clone().iter().filter(|p| p.starts_with("suites/")) {
        let text = std::fs::read_to_string(root.join("tests").join(suite)).unwrap();
        for line in text.lines() {
            if let Some(p) = line.strip_prefix("#[path = \"../") {
                let p = p.trim_end_matches("\"]");
                if !p.contains('/') {
                    runs.push(p.to_string());
                }
            }
        }
    }
    let mut files: Vec<String> = std::fs::read_dir(root.join("tests"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rs"))
        .collect();
    files.sort();
    let mut listed: Vec<String> = runs.into_iter().filter(|p| !p.contains('/')).collect();
    listed.sort();
    assert_eq!(
        listed, files,
        "each tests/*.rs must run in exactly one test binary"
    );
}
