//! `audit` end to end against the real control plane: the guard's rules on live
//! objects and the worker pod checks, in the same findings format as `validate`.

use crate::live_support;

use std::time::{Duration, Instant};

use live_support::*;
use serde_json::{json, Value};

fn worker_spec(account: &str, audience: &str) -> Value {
    json!({"serviceAccountName": account, "automountServiceAccountToken": false,
        "containers": [{"name": "app", "image": "x", "env": [
            {"name": "NVCF_TOKEN_FILE_PATH", "value": "/var/run/secrets/tokens/token"},
            {"name": "NVCF_IDENTITY_SOURCE", "value": "psat"}],
            "volumeMounts": [{"name": "nvcf-worker-token", "mountPath": "/var/run/secrets/tokens", "readOnly": true}]}],
        "volumes": [{"name": "nvcf-worker-token", "projected": {"sources": [{"serviceAccountToken":
            {"audience": audience, "expirationSeconds": 900, "path": "token"}}]}}]})
}

fn worker_pod(ns: &str, name: &str, audience: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": worker_spec(&format!("nvcf-worker-{name}"), audience),
        "status": {"phase": "Running"}})
}

#[test]
fn a_clean_namespace_passes() {
    let c = Cluster::start();
    c.seed_trio(&c.ns, "nvcf-worker-good");
    c.create(worker_pod(&c.ns, "good", "nvcf-icms:prod-1"));
    let out = ok(&c.run(&["audit", "--cluster-id", "prod-1"]));
    // A real cluster's bootstrap RBAC (`edit`, `admin`, `system:node`, ...) would
    // draw NVW103/NVW105 warnings on every cluster: objects the API server
    // labels `kubernetes.io/bootstrapping: rbac-defaults` have their warnings left out.
    let last = out.lines().last().unwrap_or("");
    assert!(last.starts_with("0 errors, 0 warnings in "), "{out}");
    assert!(!out.contains(&format!("/{}/", c.ns)), "{out}");
}

#[test]
fn guard_rules_and_pod_checks_fire_on_live_objects() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-good");
    c.create(worker_pod(&ns, "good", "nvcf-icms:other"));
    // A Deployment that borrows a worker account it does not own (scaled to 0,
    // so the controllers add no pods of their own to the findings).
    c.create(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "thief", "namespace": ns},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "t"}},
            "template": {"metadata": {"labels": {"app": "t"}}, "spec": {"serviceAccountName": "nvcf-worker-good", "containers": [{"name": "a", "image": "x"}]}}}}));
    // A binding that widens a worker identity.
    c.create(json!({"apiVersion": RBAC, "kind": "RoleBinding",
        "metadata": {"name": "widen", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "nvcf-worker-good", "namespace": ns}]}));
    // A long-lived token for a worker account (the controller-manager fills it in).
    c.create(json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {"name": "forever", "namespace": ns, "annotations": {"kubernetes.io/service-account.name": "nvcf-worker-good"}}}));
    // The deployment controller makes a ReplicaSet (0 replicas) from the forged
    // template: wait for it, so that what audit sees is settled.
    let start = std::time::Instant::now();
    while c.list("apps/v1", "ReplicaSet", Some(&ns)).is_empty() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "no ReplicaSet for thief"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let out = c.run(&["audit", "--cluster-id", "prod-1"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    for expected in [
        format!("error NVW201: projected token audience is \"nvcf-icms:other\", want \"nvcf-icms:prod-1\" (Pod/{ns}/good spec.volumes[0].projected)"),
        "error NVW101: serviceAccountName \"nvcf-worker-good\" is a reserved NVCF worker account".into(),
        format!("(Deployment/{ns}/thief spec.template.spec.serviceAccountName)"),
        "error NVW102: RoleBinding grants \"edit\" to worker account \"nvcf-worker-good\"".into(),
        "error NVW106: a service-account-token Secret for worker account \"nvcf-worker-good\"".into(),
        // The controller's ReplicaSet carries the same forged template.
        format!("(ReplicaSet/{ns}/thief-"),
        "5 errors, ".into(),
    ] {
        assert!(text.contains(&expected), "missing {expected:?} in\n{text}");
    }
    println!("{text}");

    let out = c.run(&["audit", "--cluster-id", "prod-1", "-o", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["apiVersion"], "report.nvcf.io/v1alpha1");
    assert_eq!(doc["kind"], "AuditReport");
    assert_eq!(doc["errors"], 5);
    let mut rules: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "error")
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    rules.sort_unstable();
    // Deployment and its ReplicaSet, once each: the server mirrors
    // serviceAccountName into the deprecated serviceAccount of every pod spec it
    // stores, and that copy is not a second finding.
    assert_eq!(rules, ["NVW101", "NVW101", "NVW102", "NVW106", "NVW201"]);
    assert!(!text.contains("spec.serviceAccount)"), "{text}");
    assert_eq!(
        doc["findings"][0]["resource"],
        json!({"apiVersion": "v1", "kind": "Pod", "name": "good", "namespace": ns})
    );
}

#[test]
fn a_controller_reference_that_does_not_verify_exempts_nothing() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_manifest_trio(&ns, "nvcf-worker-web", ("apps/v1", "Deployment", "web"));
    // The Deployment runs as its own derived account, but its container lacks the
    // env vars; the real controllers make a ReplicaSet and a pod from it.
    let mut spec = worker_spec("nvcf-worker-web", "nvcf-icms:prod-1");
    spec["containers"][0]["env"] = json!([]);
    c.create(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": spec}}}));
    let deadline = Instant::now() + Duration::from_secs(60);
    let pod = loop {
        if let Some(p) = c.list("v1", "Pod", Some(&ns)).into_iter().next() {
            break p;
        }
        assert!(
            Instant::now() < deadline,
            "the controllers made no pod for web"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
    let out = c.run(&["audit", "--cluster-id", "prod-1"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    // No ReplicaSet web-5d8f with UID u exists: the chain does not verify (the
    // verified chain is in tests/live_contract.rs).
    assert!(text.contains("NVW101"), "{text}");
    assert_eq!(text.matches("NVW204").count(), 2, "{text}");
    assert!(
        text.contains(&format!(
            "Pod/{ns}/{}",
            pod["metadata"]["name"].as_str().unwrap()
        )),
        "{text}"
    );
}

#[test]
fn bootstrap_rbac_warnings_are_left_out_but_a_look_alike_is_reported() {
    // Cluster-scoped objects: no other test's audit may see them meanwhile.
    let c = Cluster::start_exclusive();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-good");
    let impersonate =
        json!([{"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]}]);
    let role = |name: &str, bootstrap: bool| {
        let mut r = json!({"apiVersion": RBAC, "kind": "ClusterRole",
            "metadata": {"name": name}, "rules": impersonate});
        if bootstrap {
            r["metadata"]["labels"] = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
        }
        c.create(r);
        c.adopt_cluster_scoped(RBAC, "ClusterRole", name);
    };
    let plain = format!("nvw-impersonator-{}", c.id);
    let labelled = format!("nvw-impersonator-bootstrap-{}", c.id);
    role(&plain, false);
    role(&labelled, true);
    // The label can be forged: it never hides an error.
    let forged = format!("nvw-widen-{}", c.id);
    c.create(json!({"apiVersion": RBAC, "kind": "ClusterRoleBinding",
        "metadata": {"name": forged, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "nvcf-worker-good", "namespace": ns}]}));
    c.adopt_cluster_scoped(RBAC, "ClusterRoleBinding", &forged);
    let out = c.run(&["audit", "-o", "json"]);
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let findings = doc["findings"].as_array().unwrap();
    let on = |name: &str| -> Vec<(&str, &str)> {
        findings
            .iter()
            .filter(|f| f["resource"]["name"] == name)
            .map(|f| (f["severity"].as_str().unwrap(), f["rule"].as_str().unwrap()))
            .collect()
    };
    assert_eq!(on(&plain), [("warning", "NVW105")], "{doc:#}");
    assert!(on(&labelled).is_empty(), "{doc:#}");
    assert_eq!(on(&forged), [("error", "NVW102")], "{doc:#}");
    assert_eq!(doc["warnings"], 1, "{doc:#}");
}

fn nvw205(doc: &Value) -> Vec<&Value> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "NVW205")
        .collect()
}

#[test]
fn nvw205_flags_a_manifest_identity_where_the_agent_provisions_and_no_look_alike() {
    let c = Cluster::start();
    let [agent, pod_spec, plain] = c.agent_namespaces();

    let out = c.run(&["audit", "-n", &agent, "--cluster-id", "prod-1"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let expected = format!(
        "error NVW205: worker identity \"nvcf-worker-web\" is declared in a manifest in namespace {agent}, which the agent provisions itself ({INSTANCE_TYPE}=miniservice): its reconciler owns the worker identity there and registers only its own pods; remove this ServiceAccount, Role and RoleBinding and let the agent provision the namespace's identity (ServiceAccount/{agent}/nvcf-worker-web metadata.labels.nvcf.io/identity-origin)"
    );
    assert!(
        text.lines().any(|l| l == expected),
        "missing {expected:?} in\n{text}"
    );
    assert_eq!(text.matches("NVW205").count(), 1, "{text}");

    let doc: Value = serde_json::from_str(&stdout(&c.run(&[
        "audit",
        "-n",
        &agent,
        "--cluster-id",
        "prod-1",
        "-o",
        "json",
    ])))
    .unwrap();
    let found = nvw205(&doc);
    assert_eq!(found.len(), 1, "{doc:#}");
    assert_eq!(found[0]["severity"], "error");
    assert_eq!(
        found[0]["resource"],
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "name": "nvcf-worker-web", "namespace": agent})
    );

    // The agent's other value, and no label: the same identity passes.
    for ns in [&pod_spec, &plain] {
        let out = c.run(&["audit", "-n", ns, "--cluster-id", "prod-1", "-o", "json"]);
        let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert!(nvw205(&doc).is_empty(), "{ns}: {doc:#}");
        let text = stdout(&c.run(&["audit", "-n", ns, "--cluster-id", "prod-1"]));
        assert!(!text.contains("NVW205"), "{ns}: {text}");
    }
}

#[test]
fn nvw205_says_it_could_not_tell_when_namespaces_cannot_be_read() {
    let c = Cluster::start();
    let [agent, ..] = c.agent_namespaces();
    // A real user who may list everything audit reads, but not namespaces.
    let user = format!("auditor-{}", c.id);
    let name = format!("nvw-auditor-{}", c.id);
    c.create(json!({"apiVersion": RBAC, "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [
            {"apiGroups": [""], "resources": ["pods", "podtemplates", "replicationcontrollers", "serviceaccounts", "secrets"], "verbs": ["list"]},
            {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "daemonsets", "replicasets"], "verbs": ["list"]},
            {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["list"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings", "clusterroles", "clusterrolebindings"], "verbs": ["list"]}]}));
    c.adopt_cluster_scoped(RBAC, "ClusterRole", &name);
    c.create(json!({"apiVersion": RBAC, "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]}));
    c.adopt_cluster_scoped(RBAC, "ClusterRoleBinding", &name);
    let kubeconfig = c.cp.user_kubeconfig(&user, &[], Some(&agent));
    let out = run_with(
        &kubeconfig,
        &["audit", "--cluster-id", "prod-1", "-o", "json"],
    );
    let doc: Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&out), stderr(&out)));
    assert!(nvw205(&doc).is_empty(), "{doc:#}");
    let unchecked: Vec<&Value> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["message"]
                .as_str()
                .unwrap()
                .starts_with("NVW205 not checked")
        })
        .collect();
    assert_eq!(unchecked.len(), 1, "{doc:#}");
    assert_eq!(unchecked[0]["severity"], "warning");
    let message = unchecked[0]["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "NVW205 not checked for {agent}/nvcf-worker-web: cannot get namespace \"{agent}\""
        )) && message.contains(&format!(
            "User \"{user}\" cannot get resource \"namespaces\""
        )) && message.contains("grant get on namespaces"),
        "{message}"
    );
}
