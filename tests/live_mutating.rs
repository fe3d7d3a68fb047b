//! `kubectl nvcf-worker policy --mutating` on the real kube-apiserver 1.36 with
//! its controllers (issue 24): the MutatingAdmissionPolicy gives selected pods,
//! bare or made by the Deployment, StatefulSet and Job controllers (acting as
//! their own ServiceAccounts), exactly the identity fields `inject` writes into
//! the same template, as the server stores them; the ServiceAccount admission
//! plugin's API token is gone; unselected pods are untouched; the guard's
//! validating policy admits the mutated pod and refuses its hand-written copy;
//! the namespace kit passes `validate` and is admitted from the applier only;
//! a token minted for the account passes a TokenReview; deleting the binding
//! stops the mutation; the time to admit 100 pods is printed with and without.
//!
//! Every test binds its policies to its own namespaces by labels carrying the
//! test id; the tests run one at a time, since a mutating policy sees every pod
//! of the cluster (it takes stamps it did not write off them).

use crate::live_support;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kubectl_nvcf_worker::identity as id;
use kubectl_nvcf_worker::recognize::API_ACCESS_PREFIX;
use kubectl_nvcf_worker::rules;
use live_support::policy::kubectl_as;
use live_support::*;
use serde_json::{json, Value};

/// Its own control plane: its admission policies judge every cluster-scoped
/// object, so they must not meet the shared plane's tests.
const PLANE: Plane = Plane::Own("live_mutating");

const APPLIER_NS: &str = "flux-system";
const APPLIER: &str = "system:serviceaccount:flux-system:kustomize-controller";
const CLUSTER_ID: &str = "prod-1";
/// Selects a test's namespaces for the guard's validating policy.
const GUARD_LABEL: &str = "nvcf-guard-test";
/// Selects a test's namespaces for the mutating policy (the kit sets it).
const MUTATING_LABEL: &str = "nvcf-mutating-test";
const ADMISSION: &str = "/apis/admissionregistration.k8s.io/v1";

struct Callers {
    applier: PathBuf,
    user: PathBuf,
}

/// The applier's ServiceAccount (cluster-admin, as a GitOps controller usually
/// is) and a restricted user who may write pods, workloads and (with `bind`
/// and `escalate`, so RBAC leaves them to the policy) identities.
fn callers(c: &Cluster) -> &'static Callers {
    static CALLERS: OnceLock<Callers> = OnceLock::new();
    CALLERS.get_or_init(|| {
        for obj in [
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": APPLIER_NS}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "kustomize-controller", "namespace": APPLIER_NS}}),
            json!({"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": "mutating-test-applier"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"kind": "ServiceAccount", "name": "kustomize-controller", "namespace": APPLIER_NS}]}),
            json!({"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "mutating-test-writer"}, "rules": [
                {"apiGroups": [""], "resources": ["pods", "serviceaccounts"], "verbs": ["create", "get", "list"]},
                {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets"], "verbs": ["create", "get", "list"]},
                {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["create", "get", "list"]},
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create", "get", "list", "bind", "escalate"]},
            ]}),
            json!({"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": "mutating-test-writer"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "mutating-test-writer"},
                "subjects": [{"kind": "User", "name": "dev", "apiGroup": "rbac.authorization.k8s.io"}]}),
        ] {
            c.admin.create(&obj).unwrap_or_else(|e| panic!("create {obj}: {e}"));
        }
        let t = c.token(APPLIER_NS, "kustomize-controller", &[], 7200);
        Callers {
            applier: c.cp.token_kubeconfig("kustomize-controller", &t, None),
            user: c.cp.user_kubeconfig("dev", &[], None),
        }
    })
}

/// `kubectl create -o json` of `objs` (a List) as the caller; the created
/// objects as the server returns them.
fn create_as(kubeconfig: &PathBuf, objs: &[Value], dry_run: bool) -> Output {
    let text = json!({"apiVersion": "v1", "kind": "List", "items": objs}).to_string();
    let mut args = vec!["create", "-o", "json"];
    if dry_run {
        args.push("--dry-run=server");
    }
    kubectl_as(kubeconfig, &args, Some(&text))
}

/// The one object `create_as` printed.
fn created(out: &Output) -> Value {
    let v: Value = serde_json::from_str(&ok(out)).unwrap();
    match v["kind"].as_str() {
        Some("List") => v["items"][0].clone(),
        _ => v,
    }
}

fn refused_with(out: &Output, rule: &str) -> bool {
    let text = stderr(out);
    !out.status.success() && text.contains("denied request") && text.contains(&format!("{rule}: "))
}

/// Deletes what a test installed, cluster-scoped, when it ends.
struct Installed<'a>(&'a Cluster, Vec<String>);

impl Drop for Installed<'_> {
    fn drop(&mut self) {
        for path in &self.1 {
            let _ = self.0.admin.call("DELETE", path, None);
        }
    }
}

fn plugin(args: &[&str]) -> String {
    ok(&Command::new(BIN).args(args).output().unwrap())
}

/// The guard's validating policy (applier allowed) for namespaces labelled
/// `GUARD_LABEL=<id>`, and the mutating policy for those labelled
/// `MUTATING_LABEL=<id>`, applied by the admin.
fn install<'a>(c: &'a Cluster, extra: &[&str]) -> Installed<'a> {
    let guard = format!("nvcf-worker-guard-{}", c.id);
    let mutating = format!("nvcf-worker-identity-{}", c.id);
    let mut yaml = plugin(&[
        "policy",
        "--trust-mutation",
        "--allow-applier",
        APPLIER,
        "--name",
        &guard,
        "--namespace-selector",
        &format!("{GUARD_LABEL}={}", c.id),
    ]);
    let mut args = vec![
        "policy",
        "--mutating",
        "--cluster-id",
        CLUSTER_ID,
        "--name",
        &mutating,
    ];
    let selector = format!("{MUTATING_LABEL}={}", c.id);
    args.extend(["--namespace-selector", &selector]);
    args.extend_from_slice(extra);
    yaml.push_str("---\n");
    yaml.push_str(&plugin(&args));
    let check = format!("{mutating}-selected");
    let installed = Installed(
        c,
        vec![
            format!("{ADMISSION}/mutatingadmissionpolicybindings/{mutating}"),
            format!("{ADMISSION}/mutatingadmissionpolicies/{mutating}"),
            format!("{ADMISSION}/validatingadmissionpolicybindings/{check}"),
            format!("{ADMISSION}/validatingadmissionpolicies/{check}"),
            format!("{ADMISSION}/validatingadmissionpolicybindings/{guard}"),
            format!("{ADMISSION}/validatingadmissionpolicies/{guard}"),
        ],
    );
    ok(&kubectl_as(&c.admin_kubeconfig, &["apply"], Some(&yaml)));
    installed
}

fn label_namespace(c: &Cluster, ns: &str, key: &str, value: &str) {
    c.namespace(ns);
    let (code, text) = client::runtime()
        .block_on(c.admin.send_raw(
            "PATCH",
            &format!("/api/v1/namespaces/{ns}"),
            Some(&json!({"metadata": {"labels": {key: value}}})),
            "application/merge-patch+json",
        ))
        .unwrap();
    assert_eq!(code, 200, "label namespace {ns}: {text}");
}

/// The namespace kit for `ns`, as printed.
fn kit(c: &Cluster, ns: &str) -> String {
    plugin(&[
        "policy",
        "--namespace-kit",
        ns,
        "--namespace-selector",
        &format!("{MUTATING_LABEL}={}", c.id),
    ])
}

/// A selected pod spec: an app container with a volume of its own, a sidecar
/// the pod's `nvcf.io/skip-containers` leaves out, and an init container.
fn template(name: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": name, id::WORKER_LABEL: "true"},
            "annotations": {id::SKIP_CONTAINERS_ANNOTATION: "proxy"}},
        "spec": {
            "restartPolicy": "Always",
            "volumes": [{"name": "data", "emptyDir": {}}],
            "initContainers": [{"name": "init", "image": "busybox"}],
            "containers": [
                {"name": "app", "image": "busybox", "env": [{"name": "MODE", "value": "serve"}],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
                {"name": "proxy", "image": "envoy"},
            ],
        },
    })
}

fn bare_pod(ns: &str, name: &str) -> Value {
    let t = template(name);
    let mut meta = t["metadata"].clone();
    meta["name"] = json!(name);
    meta["namespace"] = json!(ns);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": t["spec"]})
}

/// The workload `kind` named `name` around `template(name)`; the skip
/// annotation is on the workload too, where inject reads it.
fn workload(kind: &str, ns: &str, name: &str) -> Value {
    if kind == "Pod" {
        return bare_pod(ns, name);
    }
    let mut t = template(name);
    let meta = json!({"name": name, "namespace": ns, "labels": {id::WORKER_LABEL: "true"},
        "annotations": {id::SKIP_CONTAINERS_ANNOTATION: "proxy"}});
    let selector = json!({"matchLabels": {"app": name}});
    match kind {
        "Deployment" => json!({"apiVersion": "apps/v1", "kind": kind, "metadata": meta,
            "spec": {"replicas": 1, "selector": selector, "template": t}}),
        "StatefulSet" => json!({"apiVersion": "apps/v1", "kind": kind, "metadata": meta,
            "spec": {"replicas": 1, "serviceName": name, "selector": selector, "template": t}}),
        "CronJob" => {
            t["spec"]["restartPolicy"] = json!("Never");
            json!({"apiVersion": "batch/v1", "kind": kind, "metadata": meta,
                "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": t}}}})
        }
        other => panic!("{other}"),
    }
}

/// `inject`'s output (per-namespace naming, init containers included) for `objs`.
fn inject(objs: &[Value]) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.json");
    std::fs::write(
        &file,
        json!({"apiVersion": "v1", "kind": "List", "items": objs}).to_string(),
    )
    .unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!("apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nspec:\n  clusterID: {CLUSTER_ID}\n  naming: per-namespace\n  includeInitContainers: true\n"),
    )
    .unwrap();
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

/// What of a pod spec is the identity: the accounts, automount, the volumes,
/// and per container its name, mounts and env.
fn identity_fields(spec: &Value) -> Value {
    let containers = |list: &str| -> Value {
        spec[list]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .map(|c| json!({"name": c["name"], "volumeMounts": c["volumeMounts"], "env": c["env"]}))
                    .collect()
            })
            .unwrap_or_default()
    };
    json!({
        "serviceAccountName": spec["serviceAccountName"],
        "serviceAccount": spec["serviceAccount"],
        "automountServiceAccountToken": spec["automountServiceAccountToken"],
        "volumes": spec["volumes"],
        "containers": containers("containers"),
        "initContainers": containers("initContainers"),
    })
}

/// The pod template spec of a stored workload (or a pod's own spec).
fn template_spec(obj: &Value) -> Value {
    match obj["kind"].as_str().unwrap() {
        "Pod" => obj["spec"].clone(),
        "CronJob" => obj["spec"]["jobTemplate"]["spec"]["template"]["spec"].clone(),
        _ => obj["spec"]["template"]["spec"].clone(),
    }
}

/// Waits (bounded) for a pod in `ns` whose name starts with `prefix`.
fn wait_for_pod(c: &Cluster, ns: &str, prefix: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(p) = c
            .list("v1", "Pod", Some(ns))
            .into_iter()
            .find(|p| p["metadata"]["name"].as_str().unwrap().starts_with(prefix))
        {
            return p;
        }
        assert!(
            Instant::now() < deadline,
            "no pod {prefix}* in {ns} within 90 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits (bounded) until a selected pod in `ns`, sent as a dry run by the
/// user, comes back as `want` says: bindings take effect when the API
/// server's informers see them.
fn wait_until(c: &Cluster, ns: &str, what: &str, want: impl Fn(&Output) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = create_as(&callers(c).user, &[bare_pod(ns, "probe")], true);
        if want(&out) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within 60 s: {}{}",
            stdout(&out),
            stderr(&out)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn mutated(out: &Output) -> bool {
    out.status.success() && created(out)["spec"]["serviceAccountName"] == id::WORKER_NAME
}

/// The pod's volumes and mounts with the ServiceAccount plugin's random
/// `kube-api-access-xxxxx` suffix cut, and what the server alone sets
/// (name, uid, times) dropped: the pod as the policy could have changed it.
fn comparable(pod: &Value) -> Value {
    let text = pod["spec"].to_string();
    let re = format!("\"{API_ACCESS_PREFIX}");
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find(&re) {
        out.push_str(&rest[..i + re.len()]);
        rest = &rest[i + re.len()..];
        let end = rest.find('"').unwrap();
        out.push_str("RANDOM");
        rest = &rest[end..];
    }
    out.push_str(rest);
    json!({"labels": pod["metadata"]["labels"], "annotations": pod["metadata"]["annotations"],
        "spec": serde_json::from_str::<Value>(&out).unwrap()})
}

#[test]
fn selected_pods_get_exactly_what_inject_writes_and_only_the_mutation_is_admitted() {
    let c = Cluster::start_exclusive_on(PLANE);
    let who = callers(&c);
    let ns = c.ns.clone();
    // The reference namespace: the guard's policy, no mutation; inject's output
    // is applied there by the applier and stored as the server stores it.
    let reference = c.ns_named("reference");
    for n in [&ns, &reference] {
        label_namespace(&c, n, GUARD_LABEL, &c.id.to_string());
    }
    let _installed = install(&c, &["--include-init-containers"]);

    // Item 3: the kit passes validate, is the applier's to apply (the
    // restricted user is refused the worker identity), and labels the namespace.
    let kit_yaml = kit(&c, &ns);
    let dir = tempfile::tempdir().unwrap();
    let kit_file = dir.path().join("kit.yaml");
    std::fs::write(&kit_file, &kit_yaml).unwrap();
    let validated = Command::new(BIN)
        .arg("validate")
        .arg(&kit_file)
        .output()
        .unwrap();
    assert!(
        ok(&validated).contains("0 errors, 0 warnings"),
        "{}",
        stdout(&validated)
    );
    let trio: Vec<Value> = serde_yaml_docs(&kit_yaml)
        .into_iter()
        .filter(|o| o["kind"] != "Namespace")
        .collect();
    assert_eq!(trio.len(), 3);
    // (Bounded wait: the guard's binding takes effect when the informers see it.)
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = create_as(&who.user, &trio[..1], true);
        if refused_with(&out, rules::HAND_WRITTEN_IDENTITY) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the user's nvcf-worker ServiceAccount was not refused: {}{}",
            stdout(&out),
            stderr(&out)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    ok(&kubectl_as(&who.applier, &["apply"], Some(&kit_yaml)));
    let labels = &c.get("v1", "Namespace", None, &ns).unwrap()["metadata"]["labels"];
    assert_eq!(labels[MUTATING_LABEL], c.id.to_string());
    assert!(c.exists("ServiceAccount", &ns, id::WORKER_NAME));

    wait_until(&c, &ns, "the mutation takes effect", mutated);

    // Item 5: a bare pod from the restricted user, and the controllers' pods.
    let bare = created(&create_as(&who.user, &[bare_pod(&ns, "bare")], false));
    for kind in ["Deployment", "StatefulSet", "CronJob"] {
        let name = kind.to_lowercase();
        ok(&create_as(&who.user, &[workload(kind, &ns, &name)], false));
    }
    // A Job made from the CronJob's template, as `kubectl create job --from` does.
    ok(&kubectl_as(
        &who.user,
        &[
            "create",
            "job",
            "-n",
            &ns,
            "cronjob-now",
            "--from=cronjob/cronjob",
        ],
        None,
    ));
    // inject's output of the same objects, stored by the server.
    let mut reference_objs: Vec<Value> = ["Pod", "Deployment", "StatefulSet", "CronJob"]
        .iter()
        .map(|k| {
            let mut w = workload(k, &reference, &k.to_lowercase().replace("pod", "bare"));
            if w["spec"]["replicas"].is_number() {
                w["spec"]["replicas"] = json!(0); // their templates are compared
            }
            w
        })
        .collect();
    reference_objs = inject(&reference_objs);
    let stored: Vec<Value> = reference_objs
        .iter()
        .map(|o| {
            let out = create_as(&who.applier, std::slice::from_ref(o), false);
            created(&out)
        })
        .collect();
    let stored_of = |kind: &str| {
        stored
            .iter()
            .find(|o| o["kind"] == kind)
            .unwrap_or_else(|| panic!("inject made no {kind}"))
    };

    // The bare pod is inject's pod, as stored, in every field of its spec;
    // the only other difference is the stamp of its own admission request.
    let want = stored_of("Pod");
    assert_eq!(bare["spec"], want["spec"], "bare pod: mutated vs injected");
    assert_eq!(
        bare["metadata"]["annotations"][id::ADMITTED_ANNOTATION],
        format!("nvcf-worker-identity-{}", c.id),
        "{}",
        bare["metadata"]
    );
    assert!(!bare.to_string().contains(API_ACCESS_PREFIX), "{bare}");
    // The controllers' pods carry the identity fields of inject's template.
    let mut failures = Vec::new();
    for (kind, prefix, owner) in [
        ("Deployment", "deployment-", "ReplicaSet"),
        ("StatefulSet", "statefulset-", "StatefulSet"),
        ("CronJob", "cronjob-now-", "Job"),
    ] {
        let pod = wait_for_pod(&c, &ns, prefix);
        if pod["metadata"]["ownerReferences"][0]["kind"] != owner {
            failures.push(format!(
                "{prefix}: not made by a {owner}: {}",
                pod["metadata"]
            ));
        }
        let got = identity_fields(&pod["spec"]);
        let want = identity_fields(&template_spec(stored_of(kind)));
        if got != want {
            failures.push(format!(
                "{kind}'s pod: identity fields\n got {got}\nwant {want}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));

    // A token minted for the pod's account with the audience, bound to the
    // pod, passes a TokenReview. The kubelet mints it (the guard refuses
    // anyone else a worker's TokenRequest, NVW114): as a node, here.
    let audience = id::audience(CLUSTER_ID);
    for obj in [
        json!({"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "mutating-test-node"},
            "rules": [{"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}]}),
        json!({"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": "mutating-test-node"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "mutating-test-node"},
            "subjects": [{"kind": "User", "name": "system:node:n1", "apiGroup": "rbac.authorization.k8s.io"}]}),
    ] {
        c.create(obj);
    }
    let node = c.dir.path().join("node.kubeconfig");
    std::fs::write(
        &node,
        controlplane::kubeconfig(
            &c.cp.ca(),
            &c.cp.url,
            None,
            &format!(
                "{}    as: system:node:n1\n    as-groups:\n    - system:nodes\n",
                controlplane::cert_user(&c.cp.dir, "admin")
            ),
        ),
    )
    .unwrap();
    let uid = bare["metadata"]["uid"].as_str().unwrap();
    let token = ok(&kubectl_as(
        &node,
        &[
            "create",
            "token",
            id::WORKER_NAME,
            "-n",
            &ns,
            "--audience",
            &audience,
            "--bound-object-kind",
            "Pod",
            "--bound-object-name",
            "bare",
            "--bound-object-uid",
            uid,
            "--duration",
            "15m",
        ],
        None,
    ));
    let minted = json!({"status": {"token": token.trim()}});
    let review = c
        .admin
        .call(
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            Some(
                &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "spec": {"token": minted["status"]["token"], "audiences": [audience]}}),
            ),
        )
        .unwrap();
    assert_eq!(review["status"]["authenticated"], true, "{review}");
    assert_eq!(
        review["status"]["user"]["username"],
        id::service_account_user(&ns, id::WORKER_NAME)
    );
    assert_eq!(review["status"]["audiences"], json!([audience]));
    assert_eq!(
        review["status"]["user"]["extra"]["authentication.kubernetes.io/pod-name"],
        json!(["bare"])
    );

    // Item 4: the same pod written by hand (its stamp copied) loses the stamp
    // to the mutation and is refused.
    let mut copy = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "copy", "namespace": ns, "labels": bare["metadata"]["labels"],
            "annotations": bare["metadata"]["annotations"]},
        "spec": bare["spec"]});
    for server_set in ["priority", "tolerations"] {
        copy["spec"].as_object_mut().unwrap().remove(server_set);
    }
    let out = create_as(&who.user, std::slice::from_ref(&copy), true);
    assert!(
        refused_with(&out, rules::POD_SPEC_ACCOUNT),
        "a hand-written copy of the mutated pod was not refused: {}{}",
        stdout(&out),
        stderr(&out)
    );
    // ...and so is it unlabelled, outside the mutation's selection.
    copy["metadata"]["labels"] = json!({"app": "copy"});
    let out = create_as(&who.user, &[copy], true);
    assert!(
        refused_with(&out, rules::POD_SPEC_ACCOUNT),
        "{}",
        stderr(&out)
    );

    // A selected pod the mutation cannot give the identity is left unmutated
    // and refused with the rule: another account, a volume at the token path.
    ok(&create_as(
        &who.user,
        &[
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "app", "namespace": ns}}),
        ],
        false,
    ));
    let mut other_account = bare_pod(&ns, "other-account");
    other_account["spec"]["serviceAccountName"] = json!("app");
    let mut at_token_path = bare_pod(&ns, "at-token-path");
    at_token_path["spec"]["containers"][0]["volumeMounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "data", "mountPath": id::TOKEN_MOUNT_PATH}));
    for pod in [other_account, at_token_path] {
        let out = create_as(&who.user, std::slice::from_ref(&pod), true);
        assert!(
            refused_with(&out, rules::POD_SPEC_ACCOUNT) && stderr(&out).contains("not given it"),
            "{}: {}{}",
            pod["metadata"]["name"],
            stdout(&out),
            stderr(&out)
        );
    }

    // An unselected pod is what it is without the policy: the same pod in the
    // reference namespace, the plugin's random volume suffix aside.
    c.wait_for_default_account(&reference);
    let plain = |n: &str| {
        let mut p = bare_pod(n, "plain");
        p["metadata"]["labels"] = json!({"app": "plain"});
        created(&create_as(&who.user, &[p], false))
    };
    let here = plain(&ns);
    let there = plain(&reference);
    assert_eq!(comparable(&here), comparable(&there));
    assert!(here.to_string().contains(API_ACCESS_PREFIX), "{here}");
}

/// The YAML stream the plugin printed, as JSON objects.
fn serde_yaml_docs(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect()
}

#[test]
fn admission_order_binding_removal_and_the_time_to_admit_100_pods() {
    let c = Cluster::start_exclusive_on(PLANE);
    let who = callers(&c);
    let ns = c.ns.clone();
    let without = c.ns_named("without");
    let no_kit = c.ns_named("no-kit");
    label_namespace(&c, &ns, GUARD_LABEL, &c.id.to_string());
    let installed = install(&c, &[]);
    ok(&kubectl_as(&who.applier, &["apply"], Some(&kit(&c, &ns))));
    wait_until(&c, &ns, "the mutation takes effect", mutated);

    // The ServiceAccount plugin's validating half runs after the mutation and
    // looks up the account the pod now names: selected, in a namespace without
    // the kit's account, a pod is refused, never admitted without the identity.
    label_namespace(&c, &no_kit, MUTATING_LABEL, &c.id.to_string());
    c.wait_for_default_account(&no_kit);
    let out = create_as(&who.user, &[bare_pod(&no_kit, "p")], true);
    assert!(
        !out.status.success()
            && stderr(&out).contains(&format!(
                "error looking up service account {no_kit}/{}",
                id::WORKER_NAME
            )),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );

    // 100 selected pods with the policies (the guard's, the mutation and its
    // companion), and the same 100 in a namespace no policy binds, in one run.
    c.wait_for_default_account(&without);
    let batch = |n: &str| -> Vec<Value> {
        (0..100)
            .map(|i| bare_pod(n, &format!("load-{i}")))
            .collect()
    };
    let time = |objs: Vec<Value>| {
        let started = Instant::now();
        let pods = c.create_all(objs);
        (started.elapsed(), pods)
    };
    let (warm, _) = time(
        batch(&without)
            .into_iter()
            .take(10)
            .map(|mut p| {
                p["metadata"]["name"] =
                    json!(format!("warm-{}", p["metadata"]["name"].as_str().unwrap()));
                p
            })
            .collect(),
    );
    let (plain, plain_pods) = time(batch(&without));
    let (with, with_pods) = time(batch(&ns));
    assert!(plain_pods
        .iter()
        .all(|p| p["spec"]["serviceAccountName"] == "default"));
    assert!(with_pods
        .iter()
        .all(|p| p["spec"]["serviceAccountName"] == id::WORKER_NAME));
    eprintln!(
        "admitting 100 pods (16 requests at a time): without the policies {:.0} ms, with them {:.0} ms, ratio {:.2} (warm-up of 10: {:.0} ms)",
        plain.as_secs_f64() * 1e3,
        with.as_secs_f64() * 1e3,
        with.as_secs_f64() / plain.as_secs_f64(),
        warm.as_secs_f64() * 1e3
    );

    // Deleting the mutating binding stops the mutation: the selected pod is
    // then refused by the companion check; with its binding gone too, it is
    // admitted as it was sent.
    let mutating = format!("nvcf-worker-identity-{}", c.id);
    c.admin
        .call(
            "DELETE",
            &format!("{ADMISSION}/mutatingadmissionpolicybindings/{mutating}"),
            None,
        )
        .unwrap();
    wait_until(&c, &ns, "the companion refuses the unmutated pod", |out| {
        refused_with(out, rules::POD_SPEC_ACCOUNT) && stderr(out).contains("not given it")
    });
    c.admin
        .call(
            "DELETE",
            &format!("{ADMISSION}/validatingadmissionpolicybindings/{mutating}-selected"),
            None,
        )
        .unwrap();
    wait_until(&c, &ns, "the pod is admitted unmutated", |out| {
        out.status.success() && created(out)["spec"]["serviceAccountName"] == "default"
    });
    drop(installed);
}
