//! Opt-in suite against a real cluster (the current kubeconfig): set
//! NVCF_WORKER_REAL_CLUSTER=1. It creates and then deletes a namespace
//! `nvcf-worker-e2e-<pid>`; it needs kubectl and rights to create namespaces,
//! pods, ServiceAccounts, Roles and RoleBindings there.

mod support;

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-nvcf-worker");

fn enabled() -> bool {
    let on = std::env::var("NVCF_WORKER_REAL_CLUSTER").is_ok_and(|v| v == "1");
    if !on {
        println!("skipping the real-cluster suite: set NVCF_WORKER_REAL_CLUSTER=1 to run it against the current kubeconfig");
    }
    on
}

fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn kubectl_apply(yaml: &str) {
    ok(support::pipe(
        Command::new("kubectl").args(["apply", "-f", "-"]),
        yaml.as_bytes(),
    ));
}

fn trio(ns: &str, name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {name}, namespace: {ns}}}\nautomountServiceAccountToken: false\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: {name}, namespace: {ns}}}\nrules: []\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {name}, namespace: {ns}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {name}}}\n\
         subjects: [{{kind: ServiceAccount, name: {name}, namespace: {ns}}}]\n"
    )
}

struct Namespace(String);

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("kubectl")
            .args(["delete", "namespace", &self.0, "--wait=false"])
            .output();
    }
}

#[test]
fn list_describe_cleanup_on_a_real_cluster() {
    if !enabled() {
        return;
    }
    let ns = Namespace(format!("nvcf-worker-e2e-{}", std::process::id()));
    let n = ns.0.as_str();
    kubectl_apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {n}}}\n"
    ));
    kubectl_apply(&trio(n, "nvcf-worker-gone"));
    kubectl_apply(&trio(n, "nvcf-worker-runner"));
    kubectl_apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: runner, namespace: {n}}}\n\
         spec: {{serviceAccountName: nvcf-worker-runner, automountServiceAccountToken: false, \
         containers: [{{name: pause, image: registry.k8s.io/pause:3.10}}]}}\n"
    ));
    let run = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .args(["-n", n])
            .output()
            .unwrap()
    };

    let table = ok(run(&["list", "--min-age", "0s"]));
    assert!(
        table.contains("nvcf-worker-gone") && table.contains("orphaned"),
        "{table}"
    );
    assert!(table.contains("pod/runner"), "{table}");

    let auth: serde_json::Value = serde_json::from_str(&ok(run(&["describe", "runner"]))).unwrap();
    assert_eq!(
        auth["sub"],
        format!("system:serviceaccount:{n}:nvcf-worker-runner")
    );

    ok(run(&["cleanup", "--min-age", "0s", "--dry-run=server"]));
    let still = ok(Command::new("kubectl")
        .args(["get", "sa", "nvcf-worker-gone", "-n", n, "-o", "name"])
        .output()
        .unwrap());
    assert!(still.contains("nvcf-worker-gone"));

    let out = ok(run(&["cleanup", "--min-age", "0s", "--yes"]));
    assert!(out.contains("deleted: 1 identities (3 objects)"), "{out}");
    let gone = Command::new("kubectl")
        .args(["get", "sa", "nvcf-worker-gone", "-n", n])
        .output()
        .unwrap();
    assert!(!gone.status.success());
    ok(Command::new("kubectl")
        .args(["get", "sa", "nvcf-worker-runner", "-n", n])
        .output()
        .unwrap());
}
