//! Fidelity checks with the real kubectl (/usr/bin/kubectl): if kubectl
//! works against the server, its discovery, list, error and write paths
//! match a real cluster closely enough for the plugin's end-to-end tests.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use loopback_apiserver::ApiServer;
use serde_json::{json, Value};

/// The kubectl under test; `LOOPBACK_KUBECTL` picks another binary (the
/// gcloud dispatcher at /usr/bin/kubectl runs the kubectl matching the
/// server's minor version, so e.g. `kubectl.1.32` must be named directly).
fn kubectl_binary() -> String {
    std::env::var("LOOPBACK_KUBECTL").unwrap_or_else(|_| "/usr/bin/kubectl".into())
}

/// kubectl pointed at a server, with its own HOME and discovery cache so
/// that nothing cached from another server (or test) is reused.
struct Kubectl {
    dir: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn new(server: &ApiServer, namespace: Option<&str>) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "loopback-kubectl-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        server.write_kubeconfig(&kubeconfig, namespace).unwrap();
        Kubectl { dir, kubeconfig }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(kubectl_binary())
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .env("HOME", &self.dir)
            .env("KUBECACHEDIR", self.dir.join("cache"))
            .env_remove("KUBECONFIG")
            .output()
            .expect("run kubectl")
    }

    /// Runs kubectl, expecting success, and returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn file(&self, name: &str, content: &str) -> String {
        let path = self.dir.join(name);
        std::fs::write(&path, content).unwrap();
        path.to_string_lossy().into_owned()
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn sa(ns: &str, name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ServiceAccount",
           "metadata": {"name": name, "namespace": ns, "labels": labels}})
}

/// Splits a kubectl table into rows of whitespace-separated cells.
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[test]
fn version_reports_the_server() {
    let server = ApiServer::start();
    let out = Kubectl::new(&server, None).ok(&["version"]);
    assert!(out.contains("Server Version: v1.33.0"), "{out}");
}

#[test]
fn get_pods_in_all_namespaces() {
    let server = ApiServer::start();
    for (ns, name) in [("team-b", "web"), ("team-a", "db"), ("team-a", "api")] {
        server.create(
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}}),
        );
    }
    let out = Kubectl::new(&server, None).ok(&["get", "pods", "-A"]);
    let table = rows(&out);
    assert_eq!(table[0][..2], ["NAMESPACE", "NAME"]);
    let listed: Vec<(&str, &str)> = table[1..]
        .iter()
        .map(|r| (r[0].as_str(), r[1].as_str()))
        .collect();
    assert_eq!(
        listed,
        [("team-a", "api"), ("team-a", "db"), ("team-b", "web")]
    );
    // kubectl fetched pods across namespaces in chunks of 500.
    assert!(server
        .requests()
        .iter()
        .any(|r| r.method == "GET" && r.path == "/api/v1/pods" && r.param("limit") == Some("500")));
}

#[test]
fn get_json_matches_the_store() {
    let server = ApiServer::start();
    server.create(sa("ns", "b", json!({"a": "b"})));
    server.create(sa("ns", "a", json!({})));
    server.create(sa("other", "c", json!({})));
    let out = Kubectl::new(&server, None).ok(&["get", "serviceaccounts", "-n", "ns", "-o", "json"]);
    let list: Value = serde_json::from_str(&out).unwrap();
    let items = list["items"].as_array().unwrap();
    let stored = server.list("v1", "ServiceAccount", Some("ns"));
    assert_eq!(items.len(), stored.len());
    for (item, stored) in items.iter().zip(&stored) {
        assert_eq!(item["metadata"], stored["metadata"]);
        assert_eq!(item["kind"], "ServiceAccount");
    }
}

#[test]
fn get_missing_object_fails_with_not_found() {
    let server = ApiServer::start();
    // kubectl reports a missing namespace instead, so the namespace must exist.
    server.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}));
    let out = Kubectl::new(&server, Some("ns")).run(&["get", "sa", "nope"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Error from server (NotFound): serviceaccounts \"nope\" not found"),
        "{stderr}"
    );
}

#[test]
fn create_from_file() {
    let server = ApiServer::start();
    server.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}));
    let kubectl = Kubectl::new(&server, None);
    let file = kubectl.file(
        "sa.yaml",
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: worker\n  namespace: team\n  labels:\n    app: nvcf\n",
    );
    let out = kubectl.ok(&["create", "-f", &file]);
    assert_eq!(out.trim(), "serviceaccount/worker created");
    let stored = server
        .get("v1", "ServiceAccount", Some("team"), "worker")
        .unwrap();
    assert_eq!(stored["metadata"]["labels"]["app"], "nvcf");
    let post = server
        .requests()
        .into_iter()
        .find(|r| r.method == "POST")
        .unwrap();
    assert_eq!(post.path, "/api/v1/namespaces/team/serviceaccounts");
    assert_eq!(post.param("fieldManager"), Some("kubectl-create"));

    let again = kubectl.run(&["create", "-f", &file]);
    assert!(String::from_utf8_lossy(&again.stderr)
        .contains("Error from server (AlreadyExists): error when creating"));
}

#[test]
fn delete_service_account() {
    let server = ApiServer::start();
    server.create(sa("ns", "x", json!({})));
    server.create(sa("ns", "y", json!({})));
    let out = Kubectl::new(&server, None).ok(&["delete", "sa", "x", "-n", "ns"]);
    assert_eq!(out.trim(), "serviceaccount \"x\" deleted");
    assert!(server.get("v1", "sa", Some("ns"), "x").is_none());
    assert!(server.get("v1", "sa", Some("ns"), "y").is_some());
    let delete = server
        .requests()
        .into_iter()
        .find(|r| r.method == "DELETE")
        .unwrap();
    assert_eq!(delete.path, "/api/v1/namespaces/ns/serviceaccounts/x");
    assert_eq!(delete.body.unwrap()["propagationPolicy"], "Background");
}

#[test]
fn delete_waits_for_finalizers_through_a_watch() {
    let server = ApiServer::start();
    let mut held = sa("ns", "held", json!({}));
    held["metadata"]["finalizers"] = json!(["example.com/cleanup"]);
    server.create(held);
    let kubectl = Kubectl::new(&server, Some("ns"));
    std::thread::scope(|s| {
        let deleting = s.spawn(|| kubectl.run(&["delete", "sa", "held", "--timeout=30s"]));
        // Wait until kubectl marked the object, then play the finalizer's controller.
        let mut obj = loop {
            let obj = server.get("v1", "sa", Some("ns"), "held").unwrap();
            if obj["metadata"]["deletionTimestamp"].is_string() {
                break obj;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        std::thread::sleep(Duration::from_millis(300));
        obj["metadata"]["finalizers"] = json!([]);
        server.replace(obj);
        let out = deleting.join().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
    assert!(server.get("v1", "sa", Some("ns"), "held").is_none());
}

#[test]
fn get_with_label_selector() {
    let server = ApiServer::start();
    server.create(sa("ns", "match", json!({"a": "b"})));
    server.create(sa("ns", "other", json!({"a": "c"})));
    server.create(sa("ns", "bare", json!({})));
    let kubectl = Kubectl::new(&server, Some("ns"));
    assert_eq!(
        kubectl.ok(&["get", "sa", "-l", "a=b", "-o", "name"]).trim(),
        "serviceaccount/match"
    );
    let out = kubectl.ok(&["get", "sa", "-l", "a in (b,c)", "-o", "name"]);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["serviceaccount/match", "serviceaccount/other"]
    );
    let table = rows(&kubectl.ok(&["get", "sa", "-l", "!a"]));
    assert_eq!(table[0], ["NAME", "AGE"]);
    assert_eq!(table[1][0], "bare");
}

#[test]
fn label_and_annotate() {
    let server = ApiServer::start();
    server.create(sa("ns", "w", json!({"keep": "me"})));
    let kubectl = Kubectl::new(&server, Some("ns"));
    assert_eq!(
        kubectl.ok(&["label", "sa", "w", "env=prod"]).trim(),
        "serviceaccount/w labeled"
    );
    assert_eq!(
        kubectl.ok(&["annotate", "sa", "w", "note=hi"]).trim(),
        "serviceaccount/w annotated"
    );
    let stored = server.get("v1", "sa", Some("ns"), "w").unwrap();
    assert_eq!(
        stored["metadata"]["labels"],
        json!({"keep": "me", "env": "prod"})
    );
    assert_eq!(stored["metadata"]["annotations"]["note"], "hi");
    let patch = server
        .requests()
        .into_iter()
        .find(|r| r.method == "PATCH")
        .unwrap();
    assert_eq!(
        patch.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    kubectl.ok(&["label", "sa", "w", "env-"]);
    let stored = server.get("v1", "sa", Some("ns"), "w").unwrap();
    assert_eq!(stored["metadata"]["labels"], json!({"keep": "me"}));
}

#[test]
fn legacy_discovery_fallback() {
    let server = ApiServer::start();
    server.set_aggregated_discovery(false);
    server.create(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ns"}}));
    let out = Kubectl::new(&server, Some("ns")).ok(&["get", "deploy", "-o", "name"]);
    assert_eq!(out.trim(), "deployment.apps/web");
    // Without aggregated discovery kubectl walks the group versions.
    assert!(server.requests().iter().any(|r| r.path == "/apis/apps/v1"));
}
