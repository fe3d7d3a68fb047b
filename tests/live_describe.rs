//! `describe POD` end to end: the agent's WorkerAuth JSON, and the errors when a
//! pod has no worker identity or its ServiceAccount is gone.

mod live_support;

use live_support::*;
use serde_json::{json, Value};

#[test]
fn prints_worker_auth_from_the_pod_and_its_service_account() {
    let c = Cluster::start();
    c.seed_trio(NS, "nvcf-worker-runner", OLD);
    let pod = c.seed_pod(NS, "runner", "nvcf-worker-runner", "Running");
    let sa = c
        .server
        .get("v1", "ServiceAccount", Some(NS), "nvcf-worker-runner")
        .unwrap();
    let out = ok(&c.run(&["describe", "runner"]));
    let auth: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        auth,
        json!({
            "sub": "system:serviceaccount:team-a:nvcf-worker-runner",
            "namespace": "team-a",
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
    c.seed_pod(NS, "plain", "default", "Running");
    let out = c.run(&["describe", "plain"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("pod team-a/plain has no worker identity: it runs as ServiceAccount \"default\", not nvcf-worker or nvcf-worker-*"),
        "{}",
        stderr(&out)
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_missing_service_account_is_a_clear_error() {
    let c = Cluster::start();
    c.seed_pod("team-b", "orphan", "nvcf-worker-orphan", "Running");
    let out = c.run(&["describe", "orphan", "-n", "team-b"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out)
            .contains("runs as ServiceAccount \"nvcf-worker-orphan\", which does not exist"),
        "{}",
        stderr(&out)
    );
    let out = c.run(&["describe", "nobody"]);
    assert!(
        stderr(&out).contains("pod team-a/nobody not found"),
        "{}",
        stderr(&out)
    );
}
