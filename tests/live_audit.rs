//! `audit` end to end: the guard's rules on live objects and the worker pod checks,
//! in the same findings format as `validate`.

mod live_support;

use live_support::*;
use serde_json::{json, Value};

fn worker_pod(name: &str, audience: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
        "spec": {"serviceAccountName": format!("nvcf-worker-{name}"), "automountServiceAccountToken": false,
            "containers": [{"name": "app", "image": "x", "env": [
                {"name": "NVCF_TOKEN_FILE_PATH", "value": "/var/run/secrets/tokens/token"},
                {"name": "NVCF_IDENTITY_SOURCE", "value": "psat"}],
                "volumeMounts": [{"name": "nvcf-worker-token", "mountPath": "/var/run/secrets/tokens", "readOnly": true}]}],
            "volumes": [{"name": "nvcf-worker-token", "projected": {"sources": [{"serviceAccountToken":
                {"audience": audience, "expirationSeconds": 900, "path": "token"}}]}}]},
        "status": {"phase": "Running"}})
}

#[test]
fn a_clean_namespace_passes() {
    let c = Cluster::start();
    c.seed_trio(NS, "nvcf-worker-good", OLD);
    c.server.create(worker_pod("good", "nvcf-icms:prod-1"));
    let out = ok(&c.run(&["audit", "--cluster-id", "prod-1"]));
    assert!(out.starts_with("0 errors, 0 warnings in"), "{out}");
}

#[test]
fn guard_rules_and_pod_checks_fire_on_live_objects() {
    let c = Cluster::start();
    c.seed_trio(NS, "nvcf-worker-good", OLD);
    c.server.create(worker_pod("good", "nvcf-icms:other"));
    // A Deployment that borrows a worker account it does not own.
    c.server.create(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "thief", "namespace": NS},
        "spec": {"selector": {"matchLabels": {"app": "t"}},
            "template": {"metadata": {"labels": {"app": "t"}}, "spec": {"serviceAccountName": "nvcf-worker-good", "containers": [{"name": "a", "image": "x"}]}}}}));
    // A binding that widens a worker identity.
    c.server.create(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "widen", "namespace": NS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "nvcf-worker-good", "namespace": NS}]}),
    );
    // A long-lived token for a worker account.
    c.server.create(json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {"name": "forever", "namespace": NS, "annotations": {"kubernetes.io/service-account.name": "nvcf-worker-good"}}}));
    let out = c.run(&["audit", "--cluster-id", "prod-1"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    for expected in [
        "error NVW201: projected token audience is \"nvcf-icms:other\", want \"nvcf-icms:prod-1\" (Pod/team-a/good spec.volumes[0].projected)",
        "error NVW101: serviceAccountName \"nvcf-worker-good\" is a reserved NVCF worker account",
        "(Deployment/team-a/thief spec.template.spec.serviceAccountName)",
        "error NVW102: RoleBinding grants \"edit\" to worker account \"nvcf-worker-good\"",
        "error NVW106: a service-account-token Secret for worker account \"nvcf-worker-good\"",
        "4 errors, 0 warnings in",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    println!("{text}");

    let out = c.run(&["audit", "--cluster-id", "prod-1", "-o", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["kind"], "AuditReport");
    assert_eq!(doc["errors"], 4);
    let rules: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert_eq!(rules, ["NVW201", "NVW101", "NVW102", "NVW106"]);
    assert_eq!(
        doc["findings"][0]["resource"],
        json!({"apiVersion": "v1", "kind": "Pod", "name": "good", "namespace": NS})
    );
}

#[test]
fn a_controller_reference_that_does_not_verify_exempts_nothing() {
    let c = Cluster::start();
    c.seed_manifest_trio(NS, "nvcf-worker-web", ("apps/v1", "Deployment", "web"));
    let mut pod = worker_pod("web-5d8f-abcde", "nvcf-icms:prod-1");
    pod["spec"]["serviceAccountName"] = json!("nvcf-worker-web");
    pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f", "uid": "u", "controller": true}]);
    pod["spec"]["containers"][0]["env"] = json!([]);
    c.server.create(pod);
    let out = c.run(&["audit", "--cluster-id", "prod-1"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    // No ReplicaSet web-5d8f with UID u exists: the chain does not verify (the
    // verified chain is in tests/live_contract.rs).
    assert!(text.contains("NVW101"), "{text}");
    assert_eq!(text.matches("NVW204").count(), 2, "{text}");
}
