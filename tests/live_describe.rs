//! `describe POD` end to end against the real control plane: the verdict on
//! whether ICMS would accept the pod's token, condition by condition, for a pod
//! that passes every condition and one failing each, in text and JSON; the
//! agent's WorkerAuth; and the errors when a pod has no worker identity.

use crate::live_support;

use live_support::*;
use serde_json::{json, Value};

const CONDITIONS: [&str; 16] = [
    "account",
    "serviceAccount",
    "podUID",
    "audience",
    "registered",
    "sharedIdentity",
    "accountRecreated",
    "featureSwitches",
    "clusterKeys",
    "registrationLive",
    "instanceBinding",
    "tokenPath",
    "env",
    "httpsEndpoint",
    "automount",
    "expiry",
];

/// ICMS's conditions the cluster does not show: always `unknown`.
const NOT_VISIBLE: [&str; 5] = [
    "featureSwitches",
    "clusterKeys",
    "registrationLive",
    "instanceBinding",
    "httpsEndpoint",
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

/// Runs describe in text and JSON; asserts `broken` (condition, "fail", "warn"
/// or "unknown", reason part) is so and every other condition passes (ICMS's
/// conditions not visible from the cluster are always unknown), in both forms:
/// exit 1 only for an ICMS condition that fails.
fn assert_verdict(c: &Cluster, ns: &str, pod: &str, broken: Option<(&str, &str, &str)>) -> Value {
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
    let refused = matches!(broken, Some((_, "fail", _)));
    for out in [&text, &json_out] {
        assert_eq!(out.status.code(), Some(refused as i32), "{}", stderr(out));
    }
    let want = |kind: &str| match broken {
        Some((k, status, reason)) if k == kind => (status, Some(reason)),
        _ if NOT_VISIBLE.contains(&kind) => ("unknown", None),
        // Without a ServiceAccount there is no creation time to compare.
        Some(("serviceAccount", ..)) if kind == "accountRecreated" => ("unknown", None),
        _ => ("ok", None),
    };
    let stdout = String::from_utf8(text.stdout.clone()).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    for (i, kind) in CONDITIONS.iter().enumerate() {
        let line = lines[i + 1];
        let (status, reason) = want(kind);
        let shown = match status {
            "fail" => "FAIL",
            "unknown" => "?",
            s => s,
        };
        let fields: Vec<&str> = line.split_whitespace().take(3).collect();
        assert_eq!((fields[0], fields[2]), (shown, *kind), "{line}");
        if let Some(reason) = reason {
            assert!(line.contains(reason), "{line}");
            assert_eq!(line.contains("; fix: "), status != "unknown", "{line}");
        }
        if status == "fail" {
            assert!(stderr(&text).contains(reason.unwrap()), "{}", stderr(&text));
        }
    }
    let verdict = lines[CONDITIONS.len() + 1];
    match broken {
        Some((k, "fail", _)) => assert_eq!(
            verdict,
            format!("verdict: ICMS would refuse this pod's token ({k} failing)")
        ),
        _ => assert!(
            verdict.starts_with("verdict: ICMS would accept this pod's token as far as the cluster shows (not shown: "),
            "{verdict}"
        ),
    }
    let auth: Value = serde_json::from_str(&lines[CONDITIONS.len() + 2..].join("\n")).unwrap();
    let doc: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    assert_eq!(doc["apiVersion"], "report.nvcf.io/v1alpha1");
    assert_eq!(doc["kind"], "WorkerVerdict");
    assert_eq!(doc["accepted"], !refused);
    assert_eq!(doc["workerAuth"], auth);
    let conds = doc["conditions"].as_array().unwrap();
    assert_eq!(conds.len(), CONDITIONS.len());
    for (cond, kind) in conds.iter().zip(CONDITIONS) {
        assert_eq!(cond["type"], kind);
        assert!(
            cond["checker"].is_string() && cond["visibility"].is_string(),
            "{cond}"
        );
        let (status, reason) = want(kind);
        assert_eq!(cond["status"], status, "{cond}");
        if let Some(reason) = reason {
            assert!(cond["reason"].as_str().unwrap().contains(reason), "{cond}");
        }
        assert_eq!(
            cond.get("fix").is_some(),
            matches!(status, "fail" | "warn"),
            "{cond}"
        );
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
            "fail",
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
            "warn",
            "expirationSeconds 100000, outside this tool's 600..86400 (the agent requests 900",
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
            "warn",
            "the token is projected at path \"jwt\", not \"token\"",
        )),
    );
    c.create(worker_pod(&ns, "env", "nvcf-worker", |p| {
        p["spec"]["containers"][0]["env"]
            .as_array_mut()
            .unwrap()
            .remove(0);
    }));
    assert_verdict(
        &c,
        &ns,
        "env",
        Some((
            "env",
            "warn",
            "container \"app\" lacks env NVCF_TOKEN_FILE_PATH",
        )),
    );
    // Its look-alike: the worker library reads no NVCF_IDENTITY_SOURCE.
    c.create(worker_pod(&ns, "source", "nvcf-worker", |p| {
        p["spec"]["containers"][0]["env"]
            .as_array_mut()
            .unwrap()
            .pop();
    }));
    assert_verdict(&c, &ns, "source", None);
    c.create(worker_pod(&ns, "automount", "nvcf-worker", |p| {
        p["spec"]["automountServiceAccountToken"] = json!(true)
    }));
    assert_verdict(
        &c,
        &ns,
        "automount",
        Some((
            "automount",
            "warn",
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
            "fail",
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
        Some((
            "account",
            "fail",
            "the newest ICMS accepts only the subject",
        )),
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
            "fail",
            "runs as ServiceAccount \"nvcf-worker\", which does not exist",
        )),
    );
    assert_eq!(doc["workerAuth"]["saUid"], "");
}

/// A MiniService pod of the agent's, labelled with its instance.
fn instance_pod(ns: &str, name: &str, instance: &str) -> Value {
    worker_pod(ns, name, "nvcf-worker", |p| {
        p["metadata"]["labels"] = json!({"nvca.nvcf.nvidia.io/miniservice-name": instance})
    })
}

#[test]
fn icms_conditions_read_from_the_namespace_fail_alone() {
    let c = Cluster::start();
    // Two pods of one instance share the namespace's account: one registration.
    let one = c.ns_named("one");
    c.seed_trio(&one, "nvcf-worker");
    c.create(instance_pod(&one, "utils", "ms-a"));
    c.create(instance_pod(&one, "worker", "ms-a"));
    assert_verdict(&c, &one, "utils", None);
    // Two instances in one namespace register the same ServiceAccount UID.
    let two = c.ns_named("two");
    c.seed_trio(&two, "nvcf-worker");
    c.create(instance_pod(&two, "utils", "ms-a"));
    c.create(instance_pod(&two, "other", "ms-b"));
    for pod in ["utils", "other"] {
        assert_verdict(
            &c,
            &two,
            pod,
            Some((
                "sharedIdentity",
                "fail",
                "2 MiniService instances (ms-a, ms-b) run agent-made pods as",
            )),
        );
    }
    // The ServiceAccount recreated after the pod: the token's UID is one the agent
    // may not have registered yet, which the cluster cannot show.
    let again = c.ns_named("again");
    c.seed_trio(&again, "nvcf-worker");
    c.create(worker_pod(&again, "utils", "nvcf-worker", |_| {}));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert!(c.delete("v1", "ServiceAccount", Some(&again), "nvcf-worker"));
    c.create(json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "nvcf-worker", "namespace": again},
        "automountServiceAccountToken": false}));
    assert_verdict(
        &c,
        &again,
        "utils",
        Some(("accountRecreated", "unknown", "is newer than the pod")),
    );
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
