//! The contract as the agent has it now, against the cluster the live tests use:
//! cleanup never deletes an identity in use (issue 14, item 6), audit exempts a pod
//! only by its own agent identity or a controller chain verified by UIDs (item 7),
//! describe prints WorkerAuth as the agent builds it (item 8).

mod live_support;

use live_support::*;
use serde_json::{json, Value};

const CLUSTER: &str = "prod-1";

/// The pod spec `inject` gives a workload (per the contract), running as `account`.
fn contract_spec(account: &str) -> Value {
    json!({
        "serviceAccountName": account,
        "automountServiceAccountToken": false,
        "containers": [{"name": "app", "image": "busybox",
            "volumeMounts": [{"name": "nvcf-worker-token", "mountPath": "/var/run/secrets/tokens", "readOnly": true}],
            "env": [{"name": "NVCF_TOKEN_FILE_PATH", "value": "/var/run/secrets/tokens/token"},
                    {"name": "NVCF_IDENTITY_SOURCE", "value": "psat"}]}],
        "volumes": [{"name": "nvcf-worker-token", "projected": {"sources": [{"serviceAccountToken":
            {"audience": format!("nvcf-icms:{CLUSTER}"), "expirationSeconds": 900, "path": "token"}}]}}],
    })
}

/// A workload a real API server also accepts (Jobs' pods must not restart Always).
fn workload(api_version: &str, kind: &str, name: &str, mut spec: Value) -> Value {
    if matches!(kind, "Job" | "CronJob") {
        spec["restartPolicy"] = json!("Never");
    }
    let template = json!({"metadata": {"labels": {"app": name}}, "spec": spec});
    let body = match kind {
        "CronJob" => {
            json!({"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}})
        }
        "Job" => json!({"template": template}),
        _ => json!({"selector": {"matchLabels": {"app": name}}, "template": template}),
    };
    json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": name, "namespace": NS}, "spec": body})
}

fn owned(mut obj: Value, owner: &Value) -> Value {
    obj["metadata"]["ownerReferences"] = json!([{
        "apiVersion": owner["apiVersion"], "kind": owner["kind"],
        "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"], "controller": true}]);
    obj
}

fn pod(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
        "spec": spec, "status": {"phase": "Running"}})
}

#[test]
fn cleanup_never_deletes_an_identity_in_use_and_says_why() {
    let c = Cluster::start();
    // A CronJob between runs: no pod, an agent-shaped trio without labels.
    c.server.create(workload(
        "batch/v1",
        "CronJob",
        "nightly",
        json!({"serviceAccountName": "nvcf-worker-nightly", "containers": [{"name": "a", "image": "x"}]}),
    ));
    c.seed_trio(NS, "nvcf-worker-nightly", OLD);
    // A trio annotated for Deployment/web (gone) while a StatefulSet web uses it.
    c.server.create(workload(
        "apps/v1",
        "StatefulSet",
        "web",
        json!({"serviceAccountName": "nvcf-worker-web", "containers": [{"name": "a", "image": "x"}]}),
    ));
    c.seed_manifest_trio(NS, "nvcf-worker-web", ("apps/v1", "Deployment", "web"));
    // A failed pod still names its account; only --include-terminated lets it go.
    c.seed_trio(NS, "nvcf-worker-done", OLD);
    c.seed_pod(NS, "batch-1", "nvcf-worker-done", "Failed");
    // The namespace's `nvcf-worker`: declared per namespace and used by a Deployment
    // template here; declared and unused in team-b; the agent's own in team-c.
    c.server.create(workload(
        "apps/v1",
        "Deployment",
        "api",
        json!({"serviceAccountName": "nvcf-worker", "containers": [{"name": "a", "image": "x"}]}),
    ));
    for ns in [NS, "team-b"] {
        for mut o in trio(ns, "nvcf-worker", OLD, None) {
            o["metadata"]["labels"] = json!({"app.kubernetes.io/managed-by": "kubectl-nvcf-worker", "nvcf.io/identity-origin": "manifest"});
            o["metadata"]["annotations"] = json!({"nvcf.io/identity-scope": "namespace"});
            c.server.create(o);
        }
    }
    for mut o in trio("team-c", "nvcf-worker", OLD, None) {
        o["metadata"]["labels"] = json!({"nvca.nvcf.nvidia.io/miniservice-name": "ms-1"});
        o["metadata"]["annotations"] = json!({"nvca.nvcf.nvidia.io/nvca-infra-object": "true"});
        c.server.create(o);
    }
    // A look-alike that nothing uses is deleted.
    c.seed_trio(NS, "nvcf-worker-old", OLD);

    let plan = ok(&c.run(&["cleanup", "-A"]));
    for line in [
        "keep team-a/nvcf-worker-nightly (active): in use: CronJob/nightly's pod template runs as it",
        "keep team-a/nvcf-worker-web (active): in use: StatefulSet/web's pod template runs as it",
        "keep team-a/nvcf-worker-done (active): in use: pod batch-1 (Failed) runs as it",
        "keep team-a/nvcf-worker (active): in use: Deployment/api's pod template runs as it",
        "keep team-c/nvcf-worker (active): the agent reconciles it for MiniService ms-1",
        "delete team-b/nvcf-worker (orphaned): RoleBinding, Role, ServiceAccount",
        "delete team-a/nvcf-worker-old (orphaned): RoleBinding, Role, ServiceAccount",
    ] {
        assert!(plan.contains(line), "missing {line:?} in\n{plan}");
    }
    let out = ok(&c.run(&["cleanup", "-A", "--yes"]));
    assert!(out.contains("deleted: 2 identities (6 objects)"), "{out}");
    for (ns, name, left) in [
        (NS, "nvcf-worker-nightly", 3),
        (NS, "nvcf-worker-web", 3),
        (NS, "nvcf-worker-done", 3),
        (NS, "nvcf-worker", 3),
        ("team-c", "nvcf-worker", 3),
        ("team-b", "nvcf-worker", 0),
        (NS, "nvcf-worker-old", 0),
    ] {
        assert_eq!(c.members(ns, name), left, "{ns}/{name}");
    }
    let out = ok(&c.run(&["cleanup", "--include-terminated", "--yes"]));
    assert!(out.contains("deleted: 1 identities"), "{out}");
    assert_eq!(c.members(NS, "nvcf-worker-done"), 0);
    // list shows the namespace identity with its owner.
    let list = ok(&c.run(&["list", "-A", "-o", "json"]));
    let doc: Value = serde_json::from_str(&list).unwrap();
    let row = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["namespace"] == "team-c")
        .unwrap();
    assert_eq!(row["origin"], "namespace");
    assert_eq!(row["owner"]["kind"], "Namespace");
}

#[test]
fn audit_exempts_only_own_identities_and_verified_controller_chains() {
    let c = Cluster::start();
    c.seed_manifest_trio(NS, "nvcf-worker-web", ("apps/v1", "Deployment", "web"));
    let deploy = c.server.create(workload(
        "apps/v1",
        "Deployment",
        "web",
        contract_spec("nvcf-worker-web"),
    ));
    let mut rs = workload(
        "apps/v1",
        "ReplicaSet",
        "web-5d8f",
        contract_spec("nvcf-worker-web"),
    );
    rs = owned(rs, &deploy);
    let rs = c.server.create(rs);
    c.server.create(owned(
        pod("web-5d8f-abcde", contract_spec("nvcf-worker-web")),
        &rs,
    ));
    // The agent's per-pod identity.
    c.seed_trio(NS, "nvcf-worker-runner", OLD);
    c.server
        .create(pod("runner", contract_spec("nvcf-worker-runner")));
    let out = c.run(&["audit", "--cluster-id", CLUSTER]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(
        stdout(&out).starts_with("0 errors, 0 warnings"),
        "{}",
        stdout(&out)
    );

    // A pod controlled by an object of an unrelated kind, a controller whose UID
    // does not match, and a Job that exists but is not the identity's workload.
    let cm = c.server.create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": NS}}));
    c.server.create(owned(
        pod("by-configmap", contract_spec("nvcf-worker-web")),
        &cm,
    ));
    let mut stale = rs.clone();
    stale["metadata"]["uid"] = json!("not-the-uid");
    c.server.create(owned(
        pod("web-5d8f-stale", contract_spec("nvcf-worker-web")),
        &stale,
    ));
    let job = c.server.create(workload(
        "batch/v1",
        "Job",
        "web",
        json!({"containers": [{"name": "a", "image": "x"}], "restartPolicy": "Never"}),
    ));
    c.server.create(owned(
        pod("web-job-1", contract_spec("nvcf-worker-web")),
        &job,
    ));
    let out = c.run(&["audit", "--cluster-id", CLUSTER]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let flagged: Vec<&str> = text.lines().filter(|l| l.contains("NVW101")).collect();
    assert_eq!(flagged.len(), 3, "{text}");
    for name in ["by-configmap", "web-5d8f-stale", "web-job-1"] {
        assert!(
            flagged
                .iter()
                .any(|l| l.contains(&format!("Pod/{NS}/{name} "))),
            "{name}\n{text}"
        );
    }
}

#[test]
fn describe_prints_worker_auth_as_the_agent_builds_it() {
    let c = Cluster::start();
    for mut o in trio(NS, "nvcf-worker", OLD, None) {
        o["metadata"]["labels"] = json!({"nvca.nvcf.nvidia.io/miniservice-name": "ms-1"});
        o["metadata"]["annotations"] = json!({"nvca.nvcf.nvidia.io/nvca-infra-object": "true"});
        c.server.create(o);
    }
    let sa = c
        .server
        .get("v1", "ServiceAccount", Some(NS), "nvcf-worker")
        .unwrap();
    let infra = |name: &str| {
        let mut p = pod(
            name,
            json!({"serviceAccountName": "nvcf-worker", "containers": [{"name": "a", "image": "x"}]}),
        );
        p["metadata"]["annotations"] = json!({"nvca.nvcf.nvidia.io/nvca-infra-object": "true"});
        c.server.create(p)
    };
    let a = infra("utils-a");
    let b = infra("utils-b");
    c.server.create(pod(
        "forged",
        json!({"serviceAccountName": "nvcf-worker", "containers": [{"name": "a", "image": "x"}]}),
    ));
    let out = ok(&c.run(&["describe", "utils-a"]));
    let auth: Value = serde_json::from_str(&out).unwrap();
    let mut ids = auth["workerIdentifiers"].as_array().unwrap().clone();
    ids.sort_by_key(|i| i["name"].as_str().unwrap().to_string());
    assert_eq!(auth["sub"], "system:serviceaccount:team-a:nvcf-worker");
    assert_eq!(auth["namespace"], NS);
    assert_eq!(auth["saUid"], sa["metadata"]["uid"]);
    assert_eq!(
        ids,
        [
            json!({"name": "utils-a", "uid": a["metadata"]["uid"]}),
            json!({"name": "utils-b", "uid": b["metadata"]["uid"]}),
        ]
    );
    // The agent's field order.
    let at = |k: &str| out.find(&format!("\"{k}\"")).unwrap();
    assert!(
        at("sub") < at("namespace")
            && at("namespace") < at("saUid")
            && at("saUid") < at("workerIdentifiers")
    );
    // A pod the agent did not author is never registered.
    let out = c.run(&["describe", "forged"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("the agent did not author it"),
        "{}",
        stderr(&out)
    );
}
