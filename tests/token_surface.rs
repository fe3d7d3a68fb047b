//! inject never writes what its guard refuses: over pod specs generated around
//! the token surface (`support::surface`), every input inject accepts comes out
//! passing `validate`, a second inject leaves it byte for byte, and uninject
//! gives the input back byte for byte (but a worker account the input named
//! itself: that is the identity, and a record never restores one). What inject refuses it refuses with an
//! error naming the field, and changes nothing.

#[allow(unused)]
use crate::support;
use support::surface::{pod_spec, PodSpec};

use kubectl_nvcf_worker::config::Config;
use kubectl_nvcf_worker::guard;
use kubectl_nvcf_worker::inject;
use kubectl_nvcf_worker::manifest::batch::Batch;
use kubectl_nvcf_worker::manifest::read::{load, Input};
use kubectl_nvcf_worker::pipeline::sink::render_stream;
use kubectl_nvcf_worker::report::Severity;
use kubectl_nvcf_worker::uninject;
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestRunner};

/// Failing seeds, committed and replayed first.
const REGRESSIONS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/proptest-regressions/token_surface.txt"
);

fn batch(text: &str) -> Batch {
    let source = load(Input {
        name: "gen.yaml".into(),
        bytes: text.as_bytes().to_vec(),
        utf16: None,
    })
    .unwrap_or_else(|e| panic!("generated YAML loads: {e}\n{text}"));
    Batch::new(vec![source])
}

fn errors(findings: &[kubectl_nvcf_worker::report::Finding]) -> Vec<String> {
    findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| f.to_text())
        .collect()
}

/// The property for one spec; Ok(true) when inject accepted it.
fn holds(spec: &PodSpec) -> Result<bool, TestCaseError> {
    let text = serde_yaml::to_string(&spec.deployment("web", "nvcf-icms:prod-1")).unwrap();
    let cfg = Config {
        cluster_id: Some("prod-1".into()),
        include_init_containers: spec.include_init,
        ..Config::default()
    };
    let mut b = batch(&text);
    let outcome = inject::inject(&mut b, &cfg);
    let out = String::from_utf8(render_stream(&b)).unwrap();
    if outcome.has_errors() {
        prop_assert_eq!(&out, &text, "a refused input is left as it was");
        for f in outcome
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
        {
            prop_assert!(
                f.field.is_some(),
                "a refusal names the field: {}",
                f.to_text()
            );
        }
        return Ok(false);
    }
    let allow = guard::Allow {
        self_refs: &Default::default(),
    };
    let refused = errors(&guard::check(&batch(&out), &allow));
    prop_assert!(
        refused.is_empty(),
        "validate refuses inject's output: {refused:?}\n--- input\n{text}--- output\n{out}"
    );
    let mut again = batch(&out);
    let outcome = inject::inject(&mut again, &cfg);
    prop_assert!(
        !outcome.has_errors(),
        "a second inject refuses: {:?}\n{out}",
        errors(&outcome.findings)
    );
    prop_assert_eq!(
        String::from_utf8(render_stream(&again)).unwrap(),
        out.clone(),
        "a second inject changes its output"
    );
    let mut back = batch(&out);
    let outcome = uninject::uninject(&mut back);
    prop_assert!(
        !outcome.has_errors(),
        "uninject refuses: {:?}\n{out}",
        errors(&outcome.findings)
    );
    // A worker account the input named itself is the identity inject gives, not
    // something it replaced: a record never restores a reserved account (NVW116).
    let mut want = text.clone();
    if spec.account == 4 {
        want = want.replacen(
            &format!(
                "      serviceAccountName: {}\n",
                kubectl_nvcf_worker::identity::WORKER_NAME
            ),
            "",
            1,
        );
        prop_assert!(want != text, "the account line is found: {}", text);
    }
    prop_assert_eq!(
        String::from_utf8(render_stream(&back)).unwrap(),
        want,
        "uninject does not give the input back\n{}",
        out
    );
    Ok(true)
}

/// Cases per run: `NVCF_SURFACE_CASES` for a longer one.
fn cases() -> u32 {
    std::env::var("NVCF_SURFACE_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(512)
}

#[test]
fn the_generators_clear_paths_are_clear_of_the_token_directory() {
    use kubectl_nvcf_worker::workload::{Reach, TokenDir};
    use support::surface::{CLEAR, PATHS};
    for (i, p) in PATHS.iter().enumerate() {
        assert_eq!(
            TokenDir::reach(p) == Reach::Outside,
            CLEAR.contains(&i),
            "{p}"
        );
    }
}

#[test]
fn inject_output_passes_validate_reinjects_unchanged_and_uninjects_to_the_input() {
    let mut runner = TestRunner::new(ProptestConfig {
        cases: cases(),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(REGRESSIONS))),
        ..ProptestConfig::default()
    });
    let (accepted, refused) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
    let result = runner.run(&pod_spec(), |spec| {
        let c = if holds(&spec)? { &accepted } else { &refused };
        c.set(c.get() + 1);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    eprintln!(
        "token surface: {} specs inject accepted, {} it refused",
        accepted.get(),
        refused.get()
    );
    // Both sides of the property are exercised, not one.
    let n = accepted.get() + refused.get();
    assert!(
        accepted.get() * 10 >= n,
        "too few accepted: {} of {n}",
        accepted.get()
    );
    assert!(
        refused.get() * 10 >= n,
        "too few refused: {} of {n}",
        refused.get()
    );
}
