//! `validate -o sarif` checked against the official SARIF 2.1.0 JSON schema
//! (sarif-2.1.0-rtm.5, from the npm package @microsoft/jest-sarif, fetched and
//! checksum-pinned by scripts/fetch-sarif-schema.sh) with Python's jsonschema,
//! and for what code scanning reads: rules, levels, relative URIs, the field's
//! line and column, and fingerprints that survive unrelated edits.

use crate::support;

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use support::{run_in, temp_tree};

const FORGED: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: team-a
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      serviceAccountName: nvcf-worker-other
      containers: [{name: app, image: nginx}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: all, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects:
  - kind: Group
    name: system:serviceaccounts
";

const TEMPLATE: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Values.name }}
";

fn schema() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fetch-sarif-schema.sh");
    let out = Command::new(&script)
        .output()
        .expect("run fetch-sarif-schema.sh");
    assert!(
        out.status.success(),
        "{}: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The schema's complaints about `log` (empty when it is valid).
fn schema_errors(schema: &str, log: &Value) -> Vec<String> {
    const CHECK: &str = "
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
cls = jsonschema.validators.validator_for(schema)
cls.check_schema(schema)
for e in cls(schema).iter_errors(json.load(sys.stdin)):
    print(list(e.absolute_path), e.message)
";
    let out = support::pipe(
        Command::new("python3").args(["-c", CHECK, schema]),
        log.to_string().as_bytes(),
    );
    assert!(
        out.status.success(),
        "python3 jsonschema (pip install jsonschema): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn sarif(dir: &Path, args: &[&str]) -> Value {
    let mut a = vec!["validate", "-o", "sarif"];
    a.extend_from_slice(args);
    let out = run_in(Some(dir), &a, b"");
    out.code(1);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}\n{out}"))
}

fn results(log: &Value) -> &Vec<Value> {
    log["runs"][0]["results"].as_array().unwrap()
}

fn find<'a>(log: &'a Value, rule: &str) -> &'a Value {
    results(log)
        .iter()
        .find(|r| r["ruleId"] == rule)
        .unwrap_or_else(|| panic!("no {rule} result in {log:#}"))
}

#[test]
fn validate_sarif_meets_the_sarif_2_1_0_schema() {
    let schema = schema();
    let tmp = temp_tree(&[
        ("k8s/app.yaml", FORGED),
        ("chart/templates/cm.yaml", TEMPLATE),
    ]);
    let abs = tmp.path().join("chart").display().to_string();
    let log = sarif(tmp.path(), &["k8s", &abs]);
    assert_eq!(
        schema_errors(&schema, &log),
        Vec::<String>::new(),
        "{log:#}"
    );
    assert_eq!(log["version"], "2.1.0");

    // The checker is live: a result without its message is refused.
    let mut broken = log.clone();
    broken["runs"][0]["results"][0]
        .as_object_mut()
        .unwrap()
        .remove("message");
    assert!(
        !schema_errors(&schema, &broken).is_empty(),
        "the schema check accepts anything"
    );
}

#[test]
fn sarif_names_rules_levels_files_lines_and_columns() {
    let tmp = temp_tree(&[
        ("k8s/app.yaml", FORGED),
        ("chart/templates/cm.yaml", TEMPLATE),
    ]);
    let abs = tmp.path().join("chart").display().to_string();
    let log = sarif(tmp.path(), &["./k8s", &abs]);
    let driver = &log["runs"][0]["tool"]["driver"];
    let rules = driver["rules"].as_array().unwrap();
    for r in rules {
        for key in ["shortDescription", "fullDescription", "help"] {
            assert!(!r[key]["text"].as_str().unwrap().is_empty(), "{r:#}");
        }
    }
    for r in results(&log) {
        let i = r["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[i]["id"], r["ruleId"]);
    }

    let forged = find(&log, "NVW101");
    assert_eq!(forged["level"], "error");
    let loc = &forged["locations"][0]["physicalLocation"];
    assert_eq!(loc["artifactLocation"]["uri"], "k8s/app.yaml");
    assert_eq!(loc["artifactLocation"]["uriBaseId"], "%SRCROOT%");
    // `      serviceAccountName: nvcf-worker-other` is line 11, the key at column 7.
    assert_eq!(loc["region"]["startLine"], 11);
    assert_eq!(loc["region"]["startColumn"], 7);
    assert!(forged["message"]["text"]
        .as_str()
        .unwrap()
        .contains("Deployment/team-a/web"));

    let group = find(&log, "NVW103");
    assert_eq!(group["level"], "warning");

    // An absolute path under the working directory is made relative too, and the
    // template's message says to render it first.
    let template = find(&log, "NVW001");
    assert_eq!(
        template["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "chart/templates/cm.yaml"
    );
    assert!(
        template["message"]["text"]
            .as_str()
            .unwrap()
            .contains("render it first"),
        "{template:#}"
    );
    let base = log["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"]
        .as_str()
        .unwrap();
    assert!(
        base.starts_with("file:///") && base.ends_with('/'),
        "{base}"
    );
}

#[test]
fn fingerprints_are_stable_when_lines_move() {
    let fingerprints = |log: &Value| -> Vec<(String, String, u64)> {
        results(log)
            .iter()
            .map(|r| {
                (
                    r["ruleId"].as_str().unwrap().to_string(),
                    r["partialFingerprints"]["nvcfWorkerFinding/v1"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                    r["locations"][0]["physicalLocation"]["region"]["startLine"]
                        .as_u64()
                        .unwrap(),
                )
            })
            .collect()
    };
    let a = temp_tree(&[("app.yaml", FORGED)]);
    let shifted = format!("# a comment added above\n\n{FORGED}");
    let b = temp_tree(&[("app.yaml", shifted.as_str())]);
    let (fa, fb) = (
        fingerprints(&sarif(a.path(), &["."])),
        fingerprints(&sarif(b.path(), &["."])),
    );
    assert_eq!(fa.len(), 2);
    for (x, y) in fa.iter().zip(&fb) {
        assert_eq!((&x.0, &x.1), (&y.0, &y.1), "same finding, same fingerprint");
        assert_eq!(x.2 + 2, y.2, "the line moved");
    }
    assert_ne!(fa[0].1, fa[1].1, "different findings differ");
}

#[test]
fn a_clean_run_is_a_valid_empty_log() {
    let tmp = temp_tree(&[(
        "ok.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
    )]);
    let out = run_in(
        Some(tmp.path()),
        &["validate", "-o", "sarif", "ok.yaml"],
        b"",
    );
    out.ok();
    let log: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(results(&log).len(), 0);
    assert_eq!(schema_errors(&schema(), &log), Vec::<String>::new());
}
