//! The contract as the agent has it now, against the cluster the live tests use:
//! cleanup never deletes an identity in use (issue 14, item 6), audit exempts a pod
//! only by its own agent identity or a controller chain verified by UIDs (item 7),
//! describe prints WorkerAuth as the agent builds it (item 8).

use crate::live_support;

use std::time::{Duration, Instant};

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
/// Deployments, ReplicaSets and StatefulSets run `replicas` pods, so the controllers
/// only add what a test asks for.
fn workload(
    ns: &str,
    api_version: &str,
    kind: &str,
    name: &str,
    replicas: u32,
    mut spec: Value,
) -> Value {
    if matches!(kind, "Job" | "CronJob") {
        spec["restartPolicy"] = json!("Never");
    }
    let template = json!({"metadata": {"labels": {"app": name}}, "spec": spec});
    let body = match kind {
        "CronJob" => {
            json!({"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}})
        }
        "Job" => json!({"template": template}),
        _ => json!({"replicas": replicas, "serviceName": name,
            "selector": {"matchLabels": {"app": name}}, "template": template}),
    };
    let mut obj = json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": name, "namespace": ns}, "spec": body});
    if kind != "StatefulSet" {
        obj["spec"].as_object_mut().unwrap().remove("serviceName");
    }
    obj
}

/// `obj` with a reference to `owner` (a controller reference if `controller`).
fn owned(mut obj: Value, owner: &Value, controller: bool) -> Value {
    obj["metadata"]["ownerReferences"] = json!([{
        "apiVersion": owner["apiVersion"], "kind": owner["kind"],
        "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"], "controller": controller}]);
    obj
}

fn pod(ns: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": spec, "status": {"phase": "Running"}})
}

/// A trio as the agent makes it for MiniService `ms-1`'s infrastructure.
fn agent_namespace_trio(ns: &str) -> Vec<Value> {
    let mut objs = trio(ns, "nvcf-worker", None);
    for o in &mut objs {
        o["metadata"]["labels"] = json!({"nvca.nvcf.nvidia.io/miniservice-name": "ms-1"});
        o["metadata"]["annotations"] = json!({"nvca.nvcf.nvidia.io/nvca-infra-object": "true"});
    }
    objs
}

/// Waits (bounded) for the controllers to make a pod in `ns` matching `pred`.
fn wait_for_pod(c: &Cluster, ns: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(p) = c.list("v1", "Pod", Some(ns)).into_iter().find(&pred) {
            return p;
        }
        assert!(
            Instant::now() < deadline,
            "the controllers made no pod for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn cleanup_never_deletes_an_identity_in_use_and_says_why() {
    // `cleanup -A` spans every namespace: no other test's identities may be there.
    let c = Cluster::start_exclusive();
    let (a, b, cc) = (c.ns.clone(), c.ns_named("team-b"), c.ns_named("team-c"));
    let plain = || json!({"containers": [{"name": "a", "image": "x"}]});
    let runs_as = |account: &str| {
        let mut spec = plain();
        spec["serviceAccountName"] = json!(account);
        spec
    };
    // A CronJob between runs (it runs at 03:00): no pod, an agent-shaped trio without labels.
    c.create(workload(
        &a,
        "batch/v1",
        "CronJob",
        "nightly",
        0,
        runs_as("nvcf-worker-nightly"),
    ));
    c.seed_trio(&a, "nvcf-worker-nightly");
    // A trio annotated for Deployment/web (gone) while a StatefulSet web uses it.
    c.create(workload(
        &a,
        "apps/v1",
        "StatefulSet",
        "web",
        0,
        runs_as("nvcf-worker-web"),
    ));
    c.seed_manifest_trio(&a, "nvcf-worker-web", ("apps/v1", "Deployment", "web"));
    // A failed pod still names its account; only --include-terminated lets it go.
    c.seed_trio(&a, "nvcf-worker-done");
    c.seed_pod(&a, "batch-1", "nvcf-worker-done", "Failed");
    // The namespace's `nvcf-worker`: declared per namespace and used by a Deployment
    // template here; declared and unused in team-b; the agent's own in team-c.
    c.create(workload(
        &a,
        "apps/v1",
        "Deployment",
        "api",
        0,
        runs_as("nvcf-worker"),
    ));
    for ns in [&a, &b] {
        let mut objs = trio(ns, "nvcf-worker", None);
        for o in &mut objs {
            o["metadata"]["labels"] = json!({"app.kubernetes.io/managed-by": "kubectl-nvcf-worker", "nvcf.io/identity-origin": "manifest"});
            o["metadata"]["annotations"] = json!({"nvcf.io/identity-scope": "namespace"});
        }
        c.create_all(objs);
    }
    c.create_all(agent_namespace_trio(&cc));
    // A look-alike that nothing uses is deleted.
    c.seed_trio(&a, "nvcf-worker-old");

    let plan = ok(&c.run(&["cleanup", "-A", "--min-age", "0s"]));
    for line in [
        format!("keep {a}/nvcf-worker-nightly (active): in use: CronJob/nightly's pod template runs as it"),
        format!("keep {a}/nvcf-worker-web (active): in use: StatefulSet/web's pod template runs as it"),
        format!("keep {a}/nvcf-worker-done (active): in use: pod batch-1 (Failed) runs as it"),
        // The deployment controller's ReplicaSet may or may not be named as well.
        format!("keep {a}/nvcf-worker (active): in use: Deployment/api's pod template"),
        format!("keep {cc}/nvcf-worker (active): the agent reconciles it for MiniService ms-1"),
        format!("delete {b}/nvcf-worker (orphaned): RoleBinding, Role, ServiceAccount"),
        format!("delete {a}/nvcf-worker-old (orphaned): RoleBinding, Role, ServiceAccount"),
    ] {
        assert!(plan.contains(&line), "missing {line:?} in\n{plan}");
    }
    let out = ok(&c.run(&["cleanup", "-A", "--min-age", "0s", "--yes"]));
    assert!(out.contains("deleted: 2 identities (6 objects)"), "{out}");
    for (ns, name, left) in [
        (&a, "nvcf-worker-nightly", 3),
        (&a, "nvcf-worker-web", 3),
        (&a, "nvcf-worker-done", 3),
        (&a, "nvcf-worker", 3),
        (&cc, "nvcf-worker", 3),
        (&b, "nvcf-worker", 0),
        (&a, "nvcf-worker-old", 0),
    ] {
        assert_eq!(c.members(ns, name), left, "{ns}/{name}");
    }
    let out = ok(&c.run(&[
        "cleanup",
        "--include-terminated",
        "--min-age",
        "0s",
        "--yes",
    ]));
    assert!(out.contains("deleted: 1 identities"), "{out}");
    assert_eq!(c.members(&a, "nvcf-worker-done"), 0);
    // list shows the namespace identity with its owner.
    let list = ok(&c.run(&["list", "-A", "--min-age", "0s", "-o", "json"]));
    let doc: Value = serde_json::from_str(&list).unwrap();
    let row = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["namespace"] == cc.as_str())
        .unwrap_or_else(|| panic!("no row for {cc} in\n{list}"));
    assert_eq!(row["origin"], "namespace");
    assert_eq!(row["owner"]["kind"], "Namespace");
}

#[test]
fn audit_exempts_only_own_identities_and_verified_controller_chains() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_manifest_trio(&ns, "nvcf-worker-web", ("apps/v1", "Deployment", "web"));
    // The real controllers make the chain Deployment -> ReplicaSet -> Pod, with real UIDs.
    c.create(workload(
        &ns,
        "apps/v1",
        "Deployment",
        "web",
        1,
        contract_spec("nvcf-worker-web"),
    ));
    let web_pod = wait_for_pod(&c, &ns, "Deployment web", |p| {
        p["metadata"]["labels"]["app"] == "web"
    });
    assert_eq!(
        web_pod["metadata"]["ownerReferences"][0]["kind"],
        "ReplicaSet"
    );
    let rs_name = web_pod["metadata"]["ownerReferences"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let rs = c.get("apps/v1", "ReplicaSet", Some(&ns), &rs_name).unwrap();
    // The agent's per-pod identity.
    c.seed_trio(&ns, "nvcf-worker-runner");
    c.create(pod(&ns, "runner", contract_spec("nvcf-worker-runner")));
    let out = c.run(&["audit", "--cluster-id", CLUSTER]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    // A real cluster's bootstrap RBAC draws warnings; nothing in the namespace is flagged.
    assert!(
        text.lines().last().unwrap_or("").starts_with("0 errors, "),
        "{text}"
    );
    assert!(!text.contains(&format!("/{ns}/")), "{text}");

    // A pod controlled by an object of an unrelated kind, a pod that refers to web's
    // very ReplicaSet (right UID) without being controlled by it, and a pod
    // controlled by a Job that exists but is not the identity's workload. The
    // garbage collector deletes dependents of a UID that does not exist, so the
    // stale-UID chain is checked by `exemption`'s unit tests in src/live/audit.rs.
    let cm = c.create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": ns}}));
    c.create(owned(
        pod(&ns, "by-configmap", contract_spec("nvcf-worker-web")),
        &cm,
        true,
    ));
    c.create(owned(
        pod(&ns, "web-referrer", contract_spec("nvcf-worker-web")),
        &rs,
        false,
    ));
    let job = c.create(workload(
        &ns,
        "batch/v1",
        "Job",
        "web",
        0,
        json!({"containers": [{"name": "a", "image": "x"}]}),
    ));
    // Carrying the Job's selector labels, the pod counts as the Job's one active
    // pod: the job controller neither releases it nor starts another.
    let mut job_pod = owned(
        pod(&ns, "web-job-1", contract_spec("nvcf-worker-web")),
        &job,
        true,
    );
    job_pod["metadata"]["labels"] = job["spec"]["selector"]["matchLabels"].clone();
    job_pod["spec"]["restartPolicy"] = json!("Never");
    c.create(job_pod);
    let out = c.run(&["audit", "--cluster-id", CLUSTER]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let flagged: Vec<&str> = text.lines().filter(|l| l.contains("NVW101")).collect();
    // The server copies serviceAccountName into the deprecated serviceAccount of
    // every pod it stores; that copy is not a second finding.
    for name in ["by-configmap", "web-referrer", "web-job-1"] {
        let at = format!("Pod/{ns}/{name} spec.serviceAccountName)");
        assert!(flagged.iter().any(|l| l.ends_with(&at)), "{at}\n{text}");
    }
    // Only those three: the verified chain and the agent's own pod stay exempt.
    let in_ns = flagged
        .iter()
        .filter(|l| l.contains(&format!("/{ns}/")))
        .count();
    assert_eq!(in_ns, 3, "{text}");
}

#[test]
fn describe_prints_worker_auth_as_the_agent_builds_it() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.create_all(agent_namespace_trio(&ns));
    let sa = c
        .get("v1", "ServiceAccount", Some(&ns), "nvcf-worker")
        .unwrap();
    let runs_as_worker = || json!({"serviceAccountName": "nvcf-worker", "containers": [{"name": "a", "image": "x"}]});
    let infra = |name: &str| {
        let mut p = pod(&ns, name, runs_as_worker());
        p["metadata"]["annotations"] = json!({"nvca.nvcf.nvidia.io/nvca-infra-object": "true"});
        c.create(p)
    };
    let a = infra("utils-a");
    let b = infra("utils-b");
    c.create(pod(&ns, "forged", runs_as_worker()));
    // The pods hold no token, so the verdict is a refusal (exit 1; the token
    // conditions are tests/live_describe.rs's): the WorkerAuth follows it.
    let run = c.run(&["describe", "utils-a"]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr(&run));
    let text = String::from_utf8(run.stdout).unwrap();
    let out = text
        .split_once("\nverdict: ")
        .and_then(|(_, rest)| rest.split_once('\n'))
        .map(|(_, auth)| auth.to_string())
        .unwrap_or_else(|| panic!("{text}"));
    let auth: Value = serde_json::from_str(&out).unwrap();
    let mut ids = auth["workerIdentifiers"].as_array().unwrap().clone();
    ids.sort_by_key(|i| i["name"].as_str().unwrap().to_string());
    assert_eq!(
        auth["sub"],
        format!("system:serviceaccount:{ns}:nvcf-worker")
    );
    assert_eq!(auth["namespace"], ns.as_str());
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
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(
        text.lines()
            .any(|l| l.starts_with("FAIL  icms            registered ")
                && l.contains(
                    "the pod lacks the agent's nvca.nvcf.nvidia.io/nvca-infra-object annotation"
                )),
        "{text}"
    );
    assert!(!text.contains("\"forged\""), "{text}");
}
