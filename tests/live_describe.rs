//! `describe POD` end to end against the real control plane: the verdict on
//! whether ICMS would accept the pod's token, condition by condition, for a pod
//! that passes every condition and one failing each, in text and JSON; the
//! agent's WorkerAuth; and the errors when a pod has no worker identity.

use crate::live_support;

use live_support::*;
use serde_json::{json, Value};

const CONDITIONS: [&str; 9] = [
    "account",
    "serviceAccount",
    "podUID",
    "audience",
    "expiry",
    "tokenPath",
    "env",
    "automount",
    "registered",
];

/// A pod as the agent makes it (`injectWorkerTokenVolume`), changed by `tweak`.
fn worker_pod(ns: &str, name: &str, account: &str, tweak: impl Fn(&mut Value)) -> Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns,
            "annotations": {"nvca.nvcf.nvidia.io/nvca-infra-object": "true"}},
        "spec": {
            "serviceAccountName": account,
            "automountServiceAccountToken": false,
            "volumes": [{"name": "nvcf-worker-token", "projected": {"sources": [{"serviceAccountToken":
                {"audience": "nvcf-icms:c1", "expirationSeconds": 900, "path": "token"}}]}}],
            "containers": [{"name": "app", "image": "busybox",
                "volumeMounts": [{"name": "nvcf-worker-token", "mountPath": "/var/run/secrets/tokens", "readOnly": true}],
                "env": [{"name": "NVCF_TOKEN_FILE_PATH", "value": "/var/run/secrets/tokens/token"},
                        {"name": "NVCF_IDENTITY_SOURCE", "value": "psat"}]}],
        },
    });
    tweak(&mut p);
    p
}

fn token(p: &mut Value) -> &mut Value {
    &mut p["spec"]["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]
}

/// Runs describe in text and JSON; asserts `failing` (condition, reason part)
/// fail and every other condition passes, in both.
fn assert_verdict(c: &Cluster, ns: &str, pod: &str, failing: Option<(&str, &str)>) -> Value {
    let text = c.run(&["describe", pod, "-n", ns, "--cluster-id", "c1"]);
    let json_out = c.run(&[
        "describe",
        pod,
        "-n",
        ns,
        "--cluster-id",
        "c1",
        "-o",
        "json",
    ]);
    let want_code = if failing.is_some() { 1 } else { 0 };
    for out in [&text, &json_out] {
        assert_eq!(out.status.code(), Some(want_code), "{}", stderr(out));
    }
    let stdout = String::from_utf8(text.stdout.clone()).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    for (i, kind) in CONDITIONS.iter().enumerate() {
        let line = lines[i + 1];
        match failing {
            Some((k, reason)) if k == *kind => {
                assert!(line.starts_with(&format!("FAIL  {kind} ")), "{line}");
                assert!(line.contains(reason) && line.contains("; fix: "), "{line}");
                assert!(stderr(&text).contains(reason), "{}", stderr(&text));
            }
            _ => assert!(line.starts_with(&format!("ok    {kind} ")), "{line}"),
        }
    }
    let verdict = lines[CONDITIONS.len() + 1];
    match failing {
        None => assert_eq!(verdict, "verdict: ICMS would accept this pod's token"),
        Some((k, _)) => assert_eq!(
            verdict,
            format!("verdict: ICMS would refuse this pod's token ({k} failing)")
        ),
    }
    let auth: Value = serde_json::from_str(&lines[CONDITIONS.len() + 2..].join("\n")).unwrap();
    let doc: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    assert_eq!(doc["apiVersion"], "report.nvcf.io/v1alpha1");
    assert_eq!(doc["kind"], "WorkerVerdict");
    assert_eq!(doc["accepted"], failing.is_none());
    assert_eq!(doc["workerAuth"], auth);
    let conds = doc["conditions"].as_array().unwrap();
    assert_eq!(conds.len(), CONDITIONS.len());
    for (cond, kind) in conds.iter().zip(CONDITIONS) {
        assert_eq!(cond["type"], kind);
        match failing {
            Some((k, reason)) if k == kind => {
                assert_eq!(cond["status"], "fail", "{cond}");
                assert!(cond["reason"].as_str().unwrap().contains(reason), "{cond}");
                assert!(cond["fix"].is_string(), "{cond}");
            }
            _ => {
                assert_eq!(cond["status"], "ok", "{cond}");
                assert!(cond.get("fix").is_none(), "{cond}");
            }
        }
    }
    doc
}

#[test]
fn a_pod_the_agent_made_passes_and_each_condition_fails_alone() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker");
    let good = c.create(worker_pod(&ns, "utils", "nvcf-worker", |_| {}));
    let sa = c
        .get("v1", "ServiceAccount", Some(&ns), "nvcf-worker")
        .unwrap();
    let doc = assert_verdict(&c, &ns, "utils", None);
    assert_eq!(doc["contract"], "per-namespace");
    assert_eq!(doc["audience"], "nvcf-icms:c1");
    assert_eq!(
        doc["workerAuth"],
        json!({"sub": format!("system:serviceaccount:{ns}:nvcf-worker"), "namespace": ns,
            "saUid": sa["metadata"]["uid"],
            "workerIdentifiers": [{"name": "utils", "uid": good["metadata"]["uid"]}]})
    );
    // Without --cluster-id the audience found is reported, and passes.
    let out = ok(&c.run(&["describe", "utils", "-n", &ns]));
    assert!(out.contains("audience nvcf-icms:c1 (cluster c1;"), "{out}");

    c.create(worker_pod(&ns, "aud", "nvcf-worker", |p| {
        token(p)["audience"] = json!("nvcf-icms:other")
    }));
    assert_verdict(
        &c,
        &ns,
        "aud",
        Some((
            "audience",
            "audience \"nvcf-icms:other\", want \"nvcf-icms:c1\"",
        )),
    );
    c.create(worker_pod(&ns, "long", "nvcf-worker", |p| {
        token(p)["expirationSeconds"] = json!(100_000)
    }));
    assert_verdict(
        &c,
        &ns,
        "long",
        Some((
            "expiry",
            "expirationSeconds 100000, want 600..86400 (the agent requests 900)",
        )),
    );
    c.create(worker_pod(&ns, "path", "nvcf-worker", |p| {
        token(p)["path"] = json!("jwt")
    }));
    assert_verdict(
        &c,
        &ns,
        "path",
        Some((
            "tokenPath",
            "the token is projected at path \"jwt\", not \"token\"",
        )),
    );
    c.create(worker_pod(&ns, "env", "nvcf-worker", |p| {
        p["spec"]["containers"][0]["env"]
            .as_array_mut()
            .unwrap()
            .pop();
    }));
    assert_verdict(
        &c,
        &ns,
        "env",
        Some(("env", "container \"app\" lacks env NVCF_IDENTITY_SOURCE")),
    );
    c.create(worker_pod(&ns, "automount", "nvcf-worker", |p| {
        p["spec"]["automountServiceAccountToken"] = json!(true)
    }));
    assert_verdict(
        &c,
        &ns,
        "automount",
        Some((
            "automount",
            "the pod sets automountServiceAccountToken: true",
        )),
    );
    c.create(worker_pod(&ns, "declared", "nvcf-worker", |p| {
        p["metadata"].as_object_mut().unwrap().remove("annotations");
    }));
    let doc = assert_verdict(
        &c,
        &ns,
        "declared",
        Some((
            "registered",
            "the pod lacks the agent's nvca.nvcf.nvidia.io/nvca-infra-object annotation",
        )),
    );
    // The agent's registration for the namespace leaves the declared pod out.
    let names: Vec<&str> = doc["workerAuth"]["workerIdentifiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"utils") && !names.contains(&"declared"),
        "{names:?}"
    );

    // PR #846's per-pod account: every condition of its contract holds but the
    // newest ICMS's subject.
    c.seed_trio(&ns, "nvcf-worker-legacy");
    c.create(worker_pod(&ns, "legacy", "nvcf-worker-legacy", |_| {}));
    let doc = assert_verdict(
        &c,
        &ns,
        "legacy",
        Some(("account", "the newest ICMS accepts only the subject")),
    );
    assert_eq!(doc["contract"], "per-pod");

    // The ServiceAccount removed after its pod, as when cleanup raced a pod (the
    // ServiceAccount admission plugin refuses pods naming a missing account).
    let team_b = c.ns_named("team-b");
    c.seed_trio(&team_b, "nvcf-worker");
    c.create(worker_pod(&team_b, "orphan", "nvcf-worker", |_| {}));
    assert!(c.delete("v1", "ServiceAccount", Some(&team_b), "nvcf-worker"));
    let doc = assert_verdict(
        &c,
        &team_b,
        "orphan",
        Some((
            "serviceAccount",
            "runs as ServiceAccount \"nvcf-worker\", which does not exist",
        )),
    );
    assert_eq!(doc["workerAuth"]["saUid"], "");
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
    let out = c.run(&["describe", "nobody"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!("pod {}/nobody not found", c.ns)),
        "{}",
        stderr(&out)
    );
    assert!(out.stdout.is_empty());
}
