//! `kubectl nvcf-worker policy` against the real kube-apiserver (issue 10, part 5):
//! the guard's forgery vectors, sent as a restricted user, are refused with the
//! policy's message and their look-alikes pass; the agent and the allowed applier
//! are admitted; a Deployment the applier was allowed gets its pods from the real
//! controllers; audit-only mode warns instead of refusing.
//!
//! Every test installs its own policy, bound to its own namespaces by a label
//! (`--namespace-selector`), so tests running side by side do not see each
//! other's bindings; cluster-scoped objects are seen by every binding, which is
//! why all tests share one agent and one applier.

use crate::live_support;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use live_support::policy::*;
use live_support::*;
use serde_json::{json, Value};

/// Its own control plane: its admission policies judge every cluster-scoped
/// object, so they must not meet the shared plane's tests.
const PLANE: Plane = Plane::Own("live_policy");

fn meta(name: &str, ns: Option<&str>) -> Value {
    match ns {
        Some(ns) => json!({"name": name, "namespace": ns}),
        None => json!({"name": name}),
    }
}

fn pod_spec(account: &str, restart: &str) -> Value {
    json!({"serviceAccountName": account, "restartPolicy": restart,
        "containers": [{"name": "app", "image": "busybox"}]})
}

/// A built-in pod-bearing object of `kind` running as `account`.
fn workload(kind: &str, ns: &str, name: &str, account: &str) -> Value {
    let restart = if matches!(kind, "Job" | "CronJob") {
        "Never"
    } else {
        "Always"
    };
    let template =
        json!({"metadata": {"labels": {"app": name}}, "spec": pod_spec(account, restart)});
    let selector = json!({"matchLabels": {"app": name}});
    let (api, spec) = match kind {
        "Pod" => ("v1", pod_spec(account, restart)),
        "PodTemplate" => {
            return json!({"apiVersion": "v1", "kind": kind, "metadata": meta(name, Some(ns)), "template": template})
        }
        "ReplicationController" => (
            "v1",
            json!({"replicas": 0, "selector": {"app": name}, "template": template}),
        ),
        "Deployment" | "ReplicaSet" | "DaemonSet" => (
            "apps/v1",
            json!({"selector": selector, "template": template}),
        ),
        "StatefulSet" => (
            "apps/v1",
            json!({"replicas": 0, "serviceName": name, "selector": selector, "template": template}),
        ),
        "Job" => ("batch/v1", json!({"template": template})),
        "CronJob" => (
            "batch/v1",
            json!({"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}}),
        ),
        other => panic!("{other}"),
    };
    let mut obj =
        json!({"apiVersion": api, "kind": kind, "metadata": meta(name, Some(ns)), "spec": spec});
    if matches!(kind, "Deployment" | "ReplicaSet") {
        obj["spec"]["replicas"] = json!(0);
    }
    obj
}

fn role(kind: &str, name: &str, ns: Option<&str>, rules: Value) -> Value {
    json!({"apiVersion": RBAC, "kind": kind, "metadata": meta(name, ns), "rules": rules})
}

fn binding(kind: &str, name: &str, ns: Option<&str>, subject: Value) -> Value {
    json!({"apiVersion": RBAC, "kind": kind, "metadata": meta(name, ns),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [subject]})
}

fn token_secret(ns: &str, account: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {"name": "tok", "namespace": ns,
            "annotations": {"kubernetes.io/service-account.name": account}}})
}

fn annotated(mut obj: Value, key: &str, on_template: bool) -> Value {
    let meta = if on_template {
        &mut obj["spec"]["template"]["metadata"]
    } else {
        &mut obj["metadata"]
    };
    meta["annotations"] = json!({key: "true"});
    obj
}

/// A rule that forges or widens a worker identity, and the look-alike that must pass.
struct Vector {
    what: String,
    rule: &'static str,
    bad: Value,
    good: Value,
}

fn vectors(ns: &str, id: usize) -> Vec<Vector> {
    let mut v = Vec::new();
    let mut push = |what: String, rule, bad, good| {
        v.push(Vector {
            what,
            rule,
            bad,
            good,
        })
    };
    for kind in [
        "Pod",
        "PodTemplate",
        "ReplicationController",
        "Deployment",
        "ReplicaSet",
        "StatefulSet",
        "DaemonSet",
        "Job",
        "CronJob",
    ] {
        push(
            format!("{kind} running as a worker account"),
            "NVW101",
            workload(kind, ns, "app", "nvcf-worker-other"),
            workload(kind, ns, "app", "nvcf-workers"),
        );
        push(
            format!("{kind} running as the namespace's worker account"),
            "NVW101",
            workload(kind, ns, "app", "nvcf-worker"),
            workload(kind, ns, "app", "nvcf-worker2"),
        );
    }
    // The deprecated key, which the server mirrors from/to serviceAccountName.
    let mut old_key = workload("Deployment", ns, "old", "default");
    let spec = &mut old_key["spec"]["template"]["spec"];
    spec.as_object_mut().unwrap().remove("serviceAccountName");
    spec["serviceAccount"] = json!("nvcf-worker-other");
    let mut old_good = old_key.clone();
    old_good["spec"]["template"]["spec"]["serviceAccount"] = json!("nvcf-workers");
    push(
        "Deployment with serviceAccount (deprecated key)".into(),
        "NVW101",
        old_key,
        old_good,
    );
    // An owner reference does not make a user a controller.
    let owned = |account: &str| {
        let mut p = workload("Pod", ns, "owned", account);
        p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "name": "web-1", "uid": "00000000-0000-0000-0000-000000000001", "controller": true}]);
        p
    };
    push(
        "a Pod claiming a controller owner".into(),
        "NVW101",
        owned("nvcf-worker-other"),
        owned("nvcf-workers"),
    );
    let infra = "nvca.nvcf.nvidia.io/nvca-infra-object";
    let other = "nvca.nvcf.nvidia.io/miniservice-name";
    let plain = workload("Deployment", ns, "web", "nvcf-workers");
    push(
        "the agent's annotation on a Deployment".into(),
        "NVW108",
        annotated(plain.clone(), infra, false),
        annotated(plain.clone(), other, false),
    );
    push(
        "the agent's annotation on a pod template".into(),
        "NVW108",
        annotated(plain.clone(), infra, true),
        annotated(plain, other, true),
    );
    let pod = workload("Pod", ns, "p", "nvcf-workers");
    push(
        "the agent's annotation on a Pod".into(),
        "NVW108",
        annotated(pod.clone(), infra, false),
        annotated(pod, other, false),
    );
    for (kind, good_name) in [
        ("ServiceAccount", "nvcf-workerz"),
        ("Role", "nvcf-worker2"),
        ("RoleBinding", "nvcf-workerx"),
    ] {
        let obj = |name: &str| {
            let mut o = trio(ns, name, None)
                .into_iter()
                .find(|o| o["kind"] == kind)
                .unwrap();
            if kind == "RoleBinding" {
                // Bind a non-worker account, so only the name is at stake.
                o["subjects"][0]["name"] = json!("default");
            }
            o
        };
        push(
            format!("a hand-written {kind} with a reserved name"),
            "NVW109",
            obj("nvcf-worker-x"),
            obj(good_name),
        );
    }
    let sa = |name: &str| json!({"kind": "ServiceAccount", "name": name, "namespace": ns});
    let user =
        |name: &str| json!({"kind": "User", "name": name, "apiGroup": "rbac.authorization.k8s.io"});
    push(
        "a RoleBinding granting to a worker account".into(),
        "NVW102",
        binding("RoleBinding", "grant", Some(ns), sa("nvcf-worker-other")),
        binding("RoleBinding", "grant", Some(ns), sa("nvcf-workers")),
    );
    push(
        "a RoleBinding granting to a worker account's user name".into(),
        "NVW102",
        binding(
            "RoleBinding",
            "grant",
            Some(ns),
            user(&format!("system:serviceaccount:{ns}:nvcf-worker-other")),
        ),
        binding(
            "RoleBinding",
            "grant",
            Some(ns),
            user(&format!("system:serviceaccount:{ns}:nvcf-workers")),
        ),
    );
    let crb = format!("grant-{id}");
    push(
        "a ClusterRoleBinding granting to a worker account".into(),
        "NVW102",
        binding("ClusterRoleBinding", &crb, None, sa("nvcf-worker")),
        binding("ClusterRoleBinding", &crb, None, sa("nvcf-worker2")),
    );
    let reads = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]);
    push(
        "a worker ClusterRole with rules".into(),
        "NVW104",
        role(
            "ClusterRole",
            &format!("nvcf-worker-x-{id}"),
            None,
            reads.clone(),
        ),
        role("ClusterRole", &format!("nvcf-workers-x-{id}"), None, reads),
    );
    let mint = |names: &[&str]| json!([{"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"], "resourceNames": names}]);
    push(
        "a Role minting tokens for a worker account".into(),
        "NVW114",
        role("Role", "minter", Some(ns), mint(&["nvcf-worker-other"])),
        role("Role", "minter", Some(ns), mint(&["other"])),
    );
    let impersonate = |name: String| json!([{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": [name]}]);
    push(
        "a ClusterRole impersonating a worker account".into(),
        "NVW114",
        role(
            "ClusterRole",
            &format!("imp-{id}"),
            None,
            impersonate(format!("system:serviceaccount:{ns}:nvcf-worker")),
        ),
        role(
            "ClusterRole",
            &format!("imp-{id}"),
            None,
            impersonate(format!("system:serviceaccount:{ns}:nvcf-workers")),
        ),
    );
    push(
        "a long-lived token Secret for a worker account".into(),
        "NVW106",
        token_secret(ns, "nvcf-worker-other"),
        token_secret(ns, "nvcf-workers"),
    );
    v
}

/// `inject`'s output for a Deployment `web` in `ns`, as documents.
fn injected(ns: &str, name: &str, replicas: u32) -> Vec<Value> {
    injected_with(ns, name, replicas, false)
}

/// With `per_namespace`: `naming: per-namespace`, and a sidecar left out by
/// `nvcf.io/skip-containers`.
fn injected_with(ns: &str, name: &str, replicas: u32, per_namespace: bool) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.yaml");
    let mut app = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": {"nvcf.io/worker": "true"}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "busybox"}]}}}});
    let config = dir.path().join("config.yaml");
    let mut naming = "per-workload";
    if per_namespace {
        naming = "per-namespace";
        app["metadata"]["annotations"] = json!({"nvcf.io/skip-containers": "proxy"});
        app["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "proxy", "image": "envoy"}));
    }
    std::fs::write(
        &config,
        format!("apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nspec:\n  clusterID: prod-1\n  naming: {naming}\n"),
    )
    .unwrap();
    std::fs::write(&file, app.to_string()).unwrap();
    let out = Command::new(BIN)
        .args(["inject", "-o", "json", "--config"])
        .arg(&config)
        .arg("-f")
        .arg(&file)
        .output()
        .unwrap();
    let text = ok(&out);
    serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .map(|v| v.unwrap())
        .flat_map(|v| match v["items"].as_array() {
            Some(items) if v["kind"] == "List" => items.clone(),
            _ => vec![v],
        })
        .collect()
}

fn refused_with(out: &Output, rule: &str) -> bool {
    let text = stderr(out);
    !out.status.success() && text.contains("denied request") && text.contains(&format!("{rule}: "))
}

#[test]
fn forgeries_from_a_restricted_user_are_refused_and_look_alikes_pass() {
    let c = Cluster::start_on(PLANE);
    let ns = c.ns.clone();
    cover(&c, &ns);
    let who = callers(&c);
    let _policy = install(&c, &[]);
    wait_until_enforced(&c, &ns, false);
    // The accounts the pods name must exist, or the ServiceAccount admission
    // plugin refuses them before the policy runs: the agent makes the worker
    // ones (admitted: it is exempt), the user the look-alikes (not reserved).
    let agent_made: Vec<Value> = ["nvcf-worker-other", "nvcf-worker"]
        .iter()
        .map(|n| json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(n, Some(&ns))}))
        .collect();
    ok(&try_create(&who.agent, &agent_made, false));
    let user_made: Vec<Value> = ["nvcf-workers", "nvcf-worker2"]
        .iter()
        .map(|n| json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(n, Some(&ns))}))
        .collect();
    ok(&try_create(&who.user, &user_made, false));

    // The API server type-checks the CEL against the matched kinds' schemas and
    // reports what it finds in the policy's status.
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        let p = c
            .admin
            .call(
                "GET",
                &format!(
                    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/nvcf-worker-guard-{}",
                    c.id
                ),
                None,
            )
            .unwrap();
        if p["status"]["observedGeneration"] == p["metadata"]["generation"] {
            break p["status"].clone();
        }
        assert!(Instant::now() < deadline, "policy status not observed: {p}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        status["typeChecking"]["expressionWarnings"].is_null(),
        "the API server's type check warns: {status}"
    );

    let started = Instant::now();
    let vectors = vectors(&ns, c.id);
    let mut failures = Vec::new();
    for v in &vectors {
        let bad = try_create(&who.user, std::slice::from_ref(&v.bad), true);
        if !refused_with(&bad, v.rule) {
            failures.push(format!(
                "{}: not refused with {}: exit {:?}\n{}{}",
                v.what,
                v.rule,
                bad.status.code(),
                stdout(&bad),
                stderr(&bad)
            ));
        }
        let good = try_create(&who.user, std::slice::from_ref(&v.good), true);
        if !good.status.success() || stderr(&good).contains("Warning") {
            failures.push(format!(
                "look-alike of {} not admitted cleanly: {}",
                v.what,
                stderr(&good)
            ));
        }
    }
    // The transformer's exact output is the applier's to apply, not the user's.
    let out = try_create(&who.user, &injected(&ns, "web", 0), true);
    assert!(
        refused_with(&out, "NVW101") || refused_with(&out, "NVW109"),
        "the user applied inject's output: {}",
        stderr(&out)
    );
    eprintln!(
        "{} vectors and look-alikes through the real API server in {:.1} s",
        vectors.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_agent_and_the_allowed_applier_are_admitted_and_controllers_make_the_pods() {
    let c = Cluster::start_on(PLANE);
    let ns = c.ns.clone();
    cover(&c, &ns);
    let who = callers(&c);
    let _policy = install(&c, &[]);
    wait_until_enforced(&c, &ns, false);

    // The agent: its own trio, annotated, and a pod running as the worker.
    let mut objs = trio(&ns, "nvcf-worker-w-0", None);
    objs.push(annotated(
        workload("Pod", &ns, "w-0", "nvcf-worker-w-0"),
        "nvca.nvcf.nvidia.io/nvca-infra-object",
        false,
    ));
    ok(&try_create(&who.agent, &objs, false));

    // The applier: inject's exact output is admitted, and the controllers
    // (acting as their own ServiceAccounts) make the ReplicaSet and its pod.
    let out = try_create(&who.applier, &injected(&ns, "web", 1), false);
    let created = ok(&out);
    assert!(
        created.contains("deployment.apps/web")
            && created.contains("serviceaccount/nvcf-worker-web"),
        "{created}"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let pod = loop {
        if let Some(p) = c
            .list("v1", "Pod", Some(&ns))
            .into_iter()
            .find(|p| p["spec"]["serviceAccountName"] == "nvcf-worker-web")
        {
            break p;
        }
        assert!(
            Instant::now() < deadline,
            "the controllers made no pod for the admitted Deployment"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
    // The namespace's one identity, with a sidecar left without the token.
    let out = try_create(&who.applier, &injected_with(&ns, "ms", 0, true), false);
    let created = ok(&out);
    assert!(
        created.contains("deployment.apps/ms") && created.contains("serviceaccount/nvcf-worker\n"),
        "{created}"
    );

    // The applier gets only the exact output: a token volume that lives too long,
    // a trio member that differs, a binding that grants more.
    let mut long = injected(&ns, "long", 0);
    for o in &mut long {
        if o["kind"] == "Deployment" {
            o["spec"]["template"]["spec"]["volumes"][0]["projected"]["sources"][0]
                ["serviceAccountToken"]["expirationSeconds"] = json!(172800);
        }
    }
    let deployment = long.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let out = try_create(&who.applier, std::slice::from_ref(deployment), true);
    assert!(refused_with(&out, "NVW101"), "{}", stderr(&out));
    let mut sa = long
        .iter()
        .find(|o| o["kind"] == "ServiceAccount")
        .unwrap()
        .clone();
    sa["automountServiceAccountToken"] = json!(true);
    let out = try_create(&who.applier, &[sa], true);
    assert!(refused_with(&out, "NVW109"), "{}", stderr(&out));
    let mut rb = long
        .iter()
        .find(|o| o["kind"] == "RoleBinding")
        .unwrap()
        .clone();
    rb["roleRef"]["kind"] = json!("ClusterRole");
    rb["roleRef"]["name"] = json!("admin");
    let out = try_create(&who.applier, &[rb], true);
    assert!(refused_with(&out, "NVW109"), "{}", stderr(&out));
    // Nor may the user make an admitted worker account automount its token.
    let out = kubectl_as(
        &who.user,
        &[
            "patch",
            "-n",
            &ns,
            "serviceaccount/nvcf-worker-web",
            "-p",
            r#"{"automountServiceAccountToken":true}"#,
        ],
        None,
    );
    assert!(refused_with(&out, "NVW109"), "{}", stderr(&out));
    let role = long.iter().find(|o| o["kind"] == "Role").unwrap().clone();
    let mut widened = role.clone();
    widened["rules"] = json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]);
    // A widened Role is refused for its rules (NVW104) before the applier's
    // exemption is asked about (NVW109): the guard reports it that way too.
    let out = try_create(&who.applier, &[widened], true);
    assert!(refused_with(&out, "NVW104"), "{}", stderr(&out));

    // An update that leaves what the rules read alone passes: the user may label
    // the agent's worker pod and scale the applied Deployment, but not point a
    // workload of their own at a worker account.
    ok(&kubectl_as(
        &who.user,
        &["label", "-n", &ns, "pod", "w-0", "team=a"],
        None,
    ));
    ok(&kubectl_as(
        &who.user,
        &[
            "patch",
            "-n",
            &ns,
            "deployment/web",
            "-p",
            r#"{"spec":{"replicas":2}}"#,
        ],
        None,
    ));
    ok(&try_create(
        &who.user,
        &[
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("mine", Some(&ns))}),
        ],
        false,
    ));
    ok(&try_create(
        &who.user,
        &[workload("Deployment", &ns, "mine", "mine")],
        false,
    ));
    let out = kubectl_as(
        &who.user,
        &[
            "set",
            "serviceaccount",
            "-n",
            &ns,
            "deployment/mine",
            "nvcf-worker-web",
        ],
        None,
    );
    assert!(refused_with(&out, "NVW101"), "{}", stderr(&out));
}

#[test]
fn audit_only_warns_instead_of_refusing() {
    let c = Cluster::start_on(PLANE);
    let ns = c.ns.clone();
    cover(&c, &ns);
    let who = callers(&c);
    let _policy = install(&c, &["--audit-only"]);
    wait_until_enforced(&c, &ns, true);
    ok(&try_create(
        &who.agent,
        &[
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("nvcf-worker-other", Some(&ns))}),
        ],
        false,
    ));
    let out = try_create(
        &who.user,
        &[workload("Deployment", &ns, "app", "nvcf-worker-other")],
        false,
    );
    let text = stderr(&out);
    assert!(
        out.status.success() && text.contains("Warning") && text.contains("NVW101: "),
        "exit {:?}: {text}",
        out.status.code()
    );
    assert!(c.get("apps/v1", "Deployment", Some(&ns), "app").is_some());
}

/// What CEL sees beyond an object's own fields (issue 20): TokenRequests for a
/// worker account (`kubectl create token`), ephemeral containers added to a worker
/// pod, a CronJob's `jobTemplate.metadata`, and a second token in the
/// transformer's exact output from the allowed applier. Each is refused with its
/// rule and its look-alike admitted.
#[test]
fn subresources_job_templates_and_second_tokens_are_guarded() {
    let c = Cluster::start_on(PLANE);
    let ns = c.ns.clone();
    cover(&c, &ns);
    let who = callers(&c);
    let _policy = install(&c, &[]);
    wait_until_enforced(&c, &ns, false);
    let sa = |n: &str| json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(n, Some(&ns))});
    ok(&try_create(&who.agent, &[sa("nvcf-worker-other")], false));
    ok(&try_create(&who.user, &[sa("nvcf-workers")], false));

    // TokenRequests: a real worker token is the agent's to mint.
    let token = |kubeconfig: &PathBuf, account: &str| {
        kubectl_as(
            kubeconfig,
            &[
                "create",
                "token",
                account,
                "-n",
                &ns,
                "--audience",
                "nvcf-icms:prod-1",
            ],
            None,
        )
    };
    let out = token(&who.user, "nvcf-worker-other");
    assert!(
        refused_with(&out, "NVW114"),
        "a user minted a worker token: {}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty());
    ok(&token(&who.user, "nvcf-workers"));
    ok(&token(&who.agent, "nvcf-worker-other"));

    // Ephemeral containers: into a worker pod refused, into another admitted.
    let pod = |name: &str, account: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta(name, Some(&ns)),
            "spec": {"serviceAccountName": account, "automountServiceAccountToken": false,
                "containers": [{"name": "app", "image": "busybox"}]}})
    };
    ok(&try_create(
        &who.agent,
        &[pod("worker", "nvcf-worker-other")],
        false,
    ));
    ok(&try_create(
        &who.user,
        &[pod("plain", "nvcf-workers")],
        false,
    ));
    let debug = |name: &str| {
        kubectl_as(
            &who.user,
            &[
                "patch",
                "pod",
                name,
                "-n",
                &ns,
                "--subresource=ephemeralcontainers",
                "--type=strategic",
                "-p",
                r#"{"spec":{"ephemeralContainers":[{"name":"dbg","image":"busybox"}]}}"#,
            ],
            None,
        )
    };
    let out = debug("worker");
    assert!(
        refused_with(&out, "NVW117"),
        "a debug container joined a worker pod: {}",
        stderr(&out)
    );
    ok(&debug("plain"));

    // A CronJob's jobTemplate claiming to be the agent's: the Job made from it
    // would be the controller's, exempt. Refused even from the applier.
    let cron = |key: &str| {
        let mut cj = workload("CronJob", &ns, "cj", "nvcf-workers");
        cj["spec"]["jobTemplate"]["metadata"] = json!({"annotations": {key: "true"}});
        cj
    };
    for caller in [&who.user, &who.applier] {
        let out = try_create(
            caller,
            &[cron("nvca.nvcf.nvidia.io/nvca-infra-object")],
            true,
        );
        assert!(refused_with(&out, "NVW108"), "{}", stderr(&out));
        ok(&try_create(
            caller,
            &[cron("nvca.nvcf.nvidia.io/other")],
            true,
        ));
    }

    // The transformer's exact output plus a second token, from the applier.
    let exact = injected(&ns, "two", 0);
    let mut second = exact.clone();
    let spec = &mut second
        .iter_mut()
        .find(|o| o["kind"] == "Deployment")
        .unwrap()["spec"]["template"]["spec"];
    spec["volumes"].as_array_mut().unwrap().push(json!({"name": "forever",
        "projected": {"sources": [{"serviceAccountToken": {"audience": "nvcf-icms:prod-1", "expirationSeconds": 4294967296u64, "path": "t"}}]}}));
    let out = try_create(&who.applier, &second, true);
    assert!(
        refused_with(&out, "NVW115"),
        "a second token was admitted: {}",
        stderr(&out)
    );
    let mut config = exact.clone();
    let spec = &mut config
        .iter_mut()
        .find(|o| o["kind"] == "Deployment")
        .unwrap()["spec"]["template"]["spec"];
    spec["volumes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "cfg",
        "projected": {"sources": [{"configMap": {"name": "settings"}}]}}));
    ok(&try_create(&who.applier, &config, true));
}
