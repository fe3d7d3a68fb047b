//! `describe POD` end to end against the real control plane: the agent's
//! WorkerAuth JSON, and the errors when a pod has no worker identity or its
//! ServiceAccount is gone.

mod live_support;

use live_support::*;
use serde_json::{json, Value};

#[test]
fn prints_worker_auth_from_the_pod_and_its_service_account() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-runner");
    let pod = c.seed_pod(&ns, "runner", "nvcf-worker-runner", "Running");
    let sa = c
        .get("v1", "ServiceAccount", Some(&ns), "nvcf-worker-runner")
        .unwrap();
    let out = ok(&c.run(&["describe", "runner"]));
    let auth: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        auth,
        json!({
            "sub": format!("system:serviceaccount:{ns}:nvcf-worker-runner"),
            "namespace": ns,
            "saUid": sa["metadata"]["uid"],
            "workerIdentifiers": [{"name": "runner", "uid": pod["metadata"]["uid"]}],
        })
    );
    // Keys in the agent's order.
    assert!(out.find("\"sub\"").unwrap() < out.find("\"saUid\"").unwrap());
    println!("{out}");
}

#[test]
fn a_pod_without_a_worker_account_is_a_clear_error() {
    let c = Cluster::start();
    c.seed_pod(&c.ns, "plain", "default", "Running");
    let out = c.run(&["describe", "plain"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!("pod {}/plain has no worker identity: it runs as ServiceAccount \"default\", not nvcf-worker or nvcf-worker-*", c.ns)),
        "{}",
        stderr(&out)
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_missing_service_account_is_a_clear_error() {
    let c = Cluster::start();
    let team_b = c.ns_named("team-b");
    // The ServiceAccount admission plugin refuses pods naming a missing account,
    // so the account goes after its pod, as when cleanup raced a pod.
    c.seed_trio(&team_b, "nvcf-worker-orphan");
    c.seed_pod(&team_b, "orphan", "nvcf-worker-orphan", "Running");
    assert!(c.delete("v1", "ServiceAccount", Some(&team_b), "nvcf-worker-orphan"));
    let out = c.run(&["describe", "orphan", "-n", &team_b]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out)
            .contains("runs as ServiceAccount \"nvcf-worker-orphan\", which does not exist"),
        "{}",
        stderr(&out)
    );
    let out = c.run(&["describe", "nobody"]);
    assert!(
        stderr(&out).contains(&format!("pod {}/nobody not found", c.ns)),
        "{}",
        stderr(&out)
    );
}
