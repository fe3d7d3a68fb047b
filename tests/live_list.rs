//! `list` end to end against the real control plane: states and owners, the
//! versioned JSON/YAML document, and both plugin names through the real kubectl's
//! plugin dispatch.

mod live_support;

use std::time::Duration;

use live_support::*;
use serde_json::{json, Value};

/// The real server stamps creationTimestamp itself, so ages are real: commands
/// run with `--min-age 0s` unless a test makes an identity young on purpose.
const ANY_AGE: [&str; 2] = ["--min-age", "0s"];

fn seeded() -> Cluster {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-runner");
    c.seed_pod(&ns, "runner", "nvcf-worker-runner", "Running");
    c.seed_trio(&ns, "nvcf-worker-gone");
    c.seed_trio(&ns, "nvcf-worker-half");
    c.delete(RBAC, "RoleBinding", Some(&ns), "nvcf-worker-half");
    c.create(deployment(&ns, "web"));
    c.seed_manifest_trio(&ns, "nvcf-worker-web", ("apps/v1", "Deployment", "web"));
    c
}

fn args<'a>(a: &[&'a str]) -> Vec<&'a str> {
    a.iter().copied().chain(ANY_AGE).collect()
}

#[test]
fn table_shows_one_row_per_identity_with_owner_and_state() {
    let c = seeded();
    // Everything above is at least 4 s old; this one is younger than --min-age 3s.
    std::thread::sleep(Duration::from_secs(4));
    c.seed_trio(&c.ns, "nvcf-worker-fresh");
    let out = ok(&c.run(&["list", "--min-age", "3s"]));
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("NAMESPACE   NAME"), "{out}");
    assert_eq!(lines.len(), 6, "{out}");
    let row = |name: &str| -> Vec<&str> {
        lines
            .iter()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_else(|| panic!("no row {name}: {out}"))
            .split_whitespace()
            .collect()
    };
    let runner = row("nvcf-worker-runner");
    assert_eq!(
        [&runner[..6], &runner[7..]].concat(),
        [
            c.ns.as_str(),
            "nvcf-worker-runner",
            "pod",
            "pod/runner",
            "Running",
            "complete",
            "active"
        ]
    );
    assert!(runner[6].ends_with('s'), "age {}", runner[6]);
    assert_eq!(row("nvcf-worker-gone")[4..6], ["gone", "complete"]);
    assert_eq!(row("nvcf-worker-gone")[7], "orphaned");
    assert_eq!(row("nvcf-worker-fresh")[7], "young");
    assert_eq!(row("nvcf-worker-half")[5..7], ["no", "RoleBinding"]);
    assert_eq!(row("nvcf-worker-half")[8], "partial");
    assert_eq!(
        row("nvcf-worker-web")[2..5],
        ["manifest", "deployment/web", "exists"]
    );
    assert_eq!(row("nvcf-worker-web")[7], "active");
    println!("{out}");
}

#[test]
fn json_and_yaml_are_a_versioned_worker_identity_list() {
    let c = seeded();
    let doc: Value = serde_json::from_str(&ok(&c.run(&args(&["list", "-o", "json"])))).unwrap();
    assert_eq!(doc["apiVersion"], "report.nvcf.io/v1alpha1");
    assert_eq!(doc["kind"], "WorkerIdentityList");
    let items = doc["items"].as_array().unwrap();
    assert_eq!(items.len(), 4);
    let web = items
        .iter()
        .find(|i| i["name"] == "nvcf-worker-web")
        .unwrap();
    assert_eq!(web["origin"], "manifest");
    assert_eq!(
        web["owner"],
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "exists": true, "checked": true})
    );
    assert_eq!(web["complete"], true);
    assert_eq!(web["state"], "active");
    let sa = c
        .get("v1", "ServiceAccount", Some(&c.ns), "nvcf-worker-web")
        .unwrap();
    assert_eq!(
        web["members"]["serviceAccount"]["uid"],
        sa["metadata"]["uid"]
    );
    assert_eq!(
        web["members"]["serviceAccount"]["createdAt"],
        sa["metadata"]["creationTimestamp"]
    );
    let half = items
        .iter()
        .find(|i| i["name"] == "nvcf-worker-half")
        .unwrap();
    assert_eq!(half["members"]["roleBinding"], Value::Null);
    assert_eq!(half["state"], "partial");

    let yaml = ok(&c.run(&args(&["list", "-o", "yaml"])));
    let mut from_yaml: Value = serde_yaml::from_str(&yaml).unwrap();
    // Ages move between the two runs; everything else must match.
    let mut doc = doc;
    for d in [&mut doc, &mut from_yaml] {
        for item in d["items"].as_array_mut().unwrap() {
            item.as_object_mut().unwrap().remove("ageSeconds");
        }
    }
    assert_eq!(from_yaml, doc);
    println!("{yaml}");
}

#[test]
fn kubectl_runs_both_plugin_names() {
    let c = seeded();
    // kubectl-nvcf_worker → `kubectl nvcf-worker`, straight to the real server.
    let dir = plugin_dir("kubectl-nvcf_worker");
    let out = ok(&kubectl(
        dir.path(),
        &c.admin_kubeconfig,
        &["nvcf-worker", "list", "--min-age", "0s"],
    ));
    assert!(
        out.contains("nvcf-worker-runner") && out.contains("orphaned"),
        "{out}"
    );
    // kubectl-nvcf-worker → `kubectl nvcf worker`.
    let dir = plugin_dir("kubectl-nvcf-worker");
    let out = ok(&kubectl(
        dir.path(),
        &c.admin_kubeconfig,
        &["nvcf", "worker", "list", "-o", "json"],
    ));
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["items"].as_array().unwrap().len(), 4);
    // Help names the command the way users type it, with an example.
    let help = ok(&kubectl(
        dir.path(),
        &c.admin_kubeconfig,
        &["nvcf", "worker", "cleanup", "--help"],
    ));
    assert!(
        help.contains("kubectl nvcf-worker cleanup -A --dry-run=server"),
        "{help}"
    );
}

#[test]
fn context_namespace_is_the_default_and_all_namespaces_spans_them() {
    // -A sees every namespace: no other test may have objects meanwhile.
    let c = Cluster::start_exclusive();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-runner");
    c.seed_pod(&ns, "runner", "nvcf-worker-runner", "Running");
    c.seed_trio(&ns, "nvcf-worker-gone");
    let team_b = c.ns_named("team-b");
    c.seed_trio(&team_b, "nvcf-worker-elsewhere");
    let out = ok(&c.run(&args(&["list"])));
    assert!(!out.contains("nvcf-worker-elsewhere"), "{out}");
    let out = ok(&c.run(&args(&["list", "-n", &team_b])));
    assert!(
        out.lines().any(|l| l
            .split_whitespace()
            .take(2)
            .eq([team_b.as_str(), "nvcf-worker-elsewhere"])),
        "{out}"
    );
    let out = ok(&c.run(&args(&["list", "-A"])));
    assert_eq!(out.lines().count(), 4, "{out}");
    assert!(
        out.contains("nvcf-worker-elsewhere") && out.contains("nvcf-worker-runner"),
        "{out}"
    );
}

#[test]
fn an_empty_namespace_says_so() {
    let c = Cluster::start();
    let empty = c.ns_named("nothing-here");
    let out = ok(&c.run(&["list", "-n", &empty]));
    assert_eq!(out.trim(), "No worker identities found.");
}

#[test]
fn a_bad_context_is_a_clear_error() {
    let c = Cluster::start();
    let out = c.run(&["list", "--context", "missing"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("kubeconfig:") && stderr(&out).contains("missing"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn request_timeout_cuts_a_stalled_request_and_the_retry_succeeds() {
    let c = seeded();
    c.add_fault(
        Fault::new("/serviceaccounts", FaultKind::Delay(Duration::from_secs(5))).method("GET"),
    );
    let started = std::time::Instant::now();
    let out = ok(&c.run(&args(&["list", "--request-timeout", "1s"])));
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert!(out.contains("nvcf-worker-runner"), "{out}");
    let sa_lists = c
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/serviceaccounts"))
        .count();
    assert_eq!(sa_lists, 2);
}
