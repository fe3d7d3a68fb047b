//! The admission policy's test harness, shared by tests/live_policy.rs and
//! tests/faces.rs: the three callers (the agent, the allowed applier, a restricted
//! user), installing a test's own policy bound to its namespaces by a label, and
//! requests as a caller through the real kubectl.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::*;

pub const AGENT_NS: &str = "nvca-system";
pub const AGENT: &str = "system:serviceaccount:nvca-system:nvca";
pub const APPLIER_NS: &str = "flux-system";
pub const APPLIER: &str = "system:serviceaccount:flux-system:kustomize-controller";
/// The label whose value, the test id, selects a test's namespaces.
pub const POLICY_LABEL: &str = "nvcf-policy-test";

/// Kubeconfigs of the three callers, made once per test binary.
pub struct Callers {
    pub agent: PathBuf,
    pub applier: PathBuf,
    pub user: PathBuf,
}

/// The agent's and the applier's ServiceAccounts (cluster-admin, as the agent
/// and a GitOps controller usually are) with tokens, and a restricted user who
/// may write the kinds the policy covers (with `bind` and `escalate`, so RBAC
/// leaves the bindings to the policy) and nothing else.
pub fn callers(c: &Cluster) -> &'static Callers {
    // One set per control plane (by its URL): the suites that use it each run on
    // a plane of their own.
    static CALLERS: Mutex<BTreeMap<String, &'static OnceLock<Callers>>> =
        Mutex::new(BTreeMap::new());
    let once: &'static OnceLock<Callers> = *CALLERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(c.cp.url.clone())
        .or_insert_with(|| Box::leak(Box::new(OnceLock::new())));
    once.get_or_init(|| {
        let token = |ns: &str, sa: &str| {
            for obj in [
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": ns}}),
                json!({"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": format!("{ns}-{sa}")},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                    "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]}),
            ] {
                c.admin.create(&obj).unwrap_or_else(|e| panic!("create {obj}: {e}"));
            }
            let t = c.token(ns, sa, &[], 7200);
            c.cp.token_kubeconfig(sa, &t, None)
        };
        let agent = token(AGENT_NS, "nvca");
        let applier = token(APPLIER_NS, "kustomize-controller");
        let resources = json!([
            {"apiGroups": [""], "resources": ["pods", "podtemplates", "replicationcontrollers", "serviceaccounts", "secrets", "serviceaccounts/token", "pods/ephemeralcontainers"]},
            {"apiGroups": ["apps"], "resources": ["deployments", "replicasets", "statefulsets", "daemonsets"]},
            {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings", "clusterroles", "clusterrolebindings"]},
        ]);
        let rules: Vec<Value> = resources
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r["verbs"] = json!(["create", "get", "list", "update", "patch", "delete", "bind", "escalate"]);
                r
            })
            .collect();
        for obj in [
            json!({"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "policy-test-writer"}, "rules": rules}),
            json!({"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": "policy-test-writer"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "policy-test-writer"},
                "subjects": [{"kind": "User", "name": "dev", "apiGroup": "rbac.authorization.k8s.io"}]}),
        ] {
            c.admin.create(&obj).unwrap_or_else(|e| panic!("create {obj}: {e}"));
        }
        let user = c.cp.user_kubeconfig("dev", &[], None);
        Callers {
            agent,
            applier,
            user,
        }
    })
}

/// The real kubectl, with a bounded run time.
pub fn kubectl_as(kubeconfig: &PathBuf, args: &[&str], stdin: Option<&str>) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("/usr/bin/kubectl");
    cmd.arg("--kubeconfig").arg(kubeconfig).args(args);
    cmd.env_remove("KUBECONFIG");
    if let Some(text) = stdin {
        let file = dir.path().join("in.yaml");
        std::fs::write(&file, text).unwrap();
        cmd.arg("-f").arg(file);
    }
    output_within(cmd, Duration::from_secs(120))
}

/// `kubectl create --dry-run=server` of `objs` as the caller of `kubeconfig`:
/// the request runs through admission, nothing is stored.
pub fn try_create(kubeconfig: &PathBuf, objs: &[Value], dry_run: bool) -> Output {
    let text = json!({"apiVersion": "v1", "kind": "List", "items": objs}).to_string();
    let mut args = vec!["create", "-o", "name"];
    if dry_run {
        args.push("--dry-run=server");
    }
    kubectl_as(kubeconfig, &args, Some(&text))
}

/// Deletes a test's policy and binding when the test ends.
pub struct Installed<'a>(pub &'a Cluster, pub String);

impl Drop for Installed<'_> {
    fn drop(&mut self) {
        for plural in [
            "validatingadmissionpolicybindings",
            "validatingadmissionpolicies",
        ] {
            let _ = self.0.admin.call(
                "DELETE",
                &format!("/apis/admissionregistration.k8s.io/v1/{plural}/{}", self.1),
                None,
            );
        }
    }
}

/// This test's policy: the command's output piped into `kubectl apply` as the
/// admin, bound to namespaces labelled with the test id.
pub fn install<'a>(c: &'a Cluster, extra: &[&str]) -> Installed<'a> {
    let name = format!("nvcf-worker-guard-{}", c.id);
    let selector = format!("{POLICY_LABEL}={}", c.id);
    let mut args = vec![
        "policy",
        "--agent",
        AGENT,
        "--allow-applier",
        APPLIER,
        "--name",
        &name,
        "--namespace-selector",
        &selector,
    ];
    args.extend_from_slice(extra);
    let out = Command::new(BIN).args(&args).output().unwrap();
    let yaml = ok(&out);
    let applied = kubectl_as(&c.admin_kubeconfig, &["apply"], Some(&yaml));
    let installed = Installed(c, name);
    ok(&applied);
    installed
}

/// Labels namespace `ns` so this test's binding covers it.
pub fn cover(c: &Cluster, ns: &str) {
    c.namespace(ns);
    let (code, text) = client::runtime()
        .block_on(c.admin.send_raw(
            "PATCH",
            &format!("/api/v1/namespaces/{ns}"),
            Some(&json!({"metadata": {"labels": {POLICY_LABEL: c.id.to_string()}}})),
            "application/merge-patch+json",
        ))
        .unwrap();
    assert_eq!(code, 200, "label namespace {ns}: {text}");
}

/// Waits (bounded) until the policy named `name` refuses a forged ServiceAccount
/// in `ns`: bindings take effect when the API server's informers see them.
pub fn wait_until_enforced(c: &Cluster, ns: &str, audit: bool) {
    let probe = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "nvcf-worker-probe", "namespace": ns}});
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = try_create(&callers(c).user, std::slice::from_ref(&probe), true);
        let text = stderr(&out);
        let seen = if audit {
            out.status.success() && text.contains("NVW109")
        } else {
            !out.status.success() && text.contains("NVW109")
        };
        if seen {
            return;
        }
        assert!(
            !text.contains("error") || text.contains("denied") || text.contains("NVW"),
            "probe failed otherwise: {text}"
        );
        assert!(
            Instant::now() < deadline,
            "the policy did not take effect within 60 s: {text}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}
