//! Shared by the tests/live_*.rs suites: a loopback API server with a kubeconfig,
//! seeding helpers, and ways to run the plugin (directly or through kubectl).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use loopback_apiserver::{timestamp_ago, ApiServer, Request};
use serde_json::{json, Value};

pub const BIN: &str = env!("CARGO_BIN_EXE_kubectl-nvcf-worker");
pub const NS: &str = "team-a";
pub const OLD: Duration = Duration::from_secs(3600);

pub struct Cluster {
    pub server: ApiServer,
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
}

impl Cluster {
    /// A server whose kubeconfig context defaults to namespace `team-a`.
    pub fn start() -> Cluster {
        let server = ApiServer::start();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        server.write_kubeconfig(&kubeconfig, Some(NS)).unwrap();
        Cluster {
            server,
            dir,
            kubeconfig,
        }
    }

    /// Runs the plugin binary with `--kubeconfig` appended.
    pub fn run(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .env_remove("KUBECONFIG");
        output_within(cmd, Duration::from_secs(60))
    }

    /// The ServiceAccount, Role and RoleBinding the agent makes for a pod, created `age` ago.
    pub fn seed_trio(&self, ns: &str, name: &str, age: Duration) {
        for obj in trio(ns, name, age, None) {
            self.server.create(obj);
        }
    }

    pub fn seed_manifest_trio(&self, ns: &str, name: &str, workload: (&str, &str, &str)) {
        for obj in trio(ns, name, OLD, Some(workload)) {
            self.server.create(obj);
        }
    }

    pub fn seed_pod(&self, ns: &str, name: &str, account: &str, phase: &str) -> Value {
        self.server.create(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": timestamp_ago(OLD)},
            "spec": {"serviceAccountName": account, "containers": [{"name": "app", "image": "busybox"}]},
            "status": {"phase": phase},
        }))
    }

    pub fn exists(&self, kind: &str, ns: &str, name: &str) -> bool {
        let api_version = if kind == "ServiceAccount" {
            "v1"
        } else {
            "rbac.authorization.k8s.io/v1"
        };
        self.server.get(api_version, kind, Some(ns), name).is_some()
    }

    /// Members of the trio still present.
    pub fn members(&self, ns: &str, name: &str) -> usize {
        ["ServiceAccount", "Role", "RoleBinding"]
            .iter()
            .filter(|k| self.exists(k, ns, name))
            .count()
    }

    pub fn deletes(&self) -> Vec<Request> {
        self.server
            .requests()
            .into_iter()
            .filter(|r| r.method == "DELETE")
            .collect()
    }
}

/// Runs a command, killing it (and failing the test) if it outlives `limit`: a
/// hung plugin must fail the suite, not stall it.
pub fn output_within(mut cmd: Command, limit: Duration) -> Output {
    use std::process::Stdio;
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let id = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("wait for the plugin"),
        Err(_) => {
            let _ = Command::new("kill").arg(id.to_string()).status();
            panic!("{cmd:?} did not finish within {limit:?}");
        }
    }
}

/// A trio as the agent (no labels) or the transformer (labels, workload annotations) makes it.
pub fn trio(
    ns: &str,
    name: &str,
    age: Duration,
    workload: Option<(&str, &str, &str)>,
) -> Vec<Value> {
    let mut meta = json!({"name": name, "namespace": ns, "creationTimestamp": timestamp_ago(age)});
    if let Some((api_version, kind, workload_name)) = workload {
        meta["labels"] = json!({"nvcf.io/identity-origin": "manifest", "app.kubernetes.io/managed-by": "kubectl-nvcf-worker"});
        meta["annotations"] = json!({"nvcf.io/workload": format!("{kind}/{workload_name}"), "nvcf.io/workload-api-version": api_version});
    }
    vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta, "automountServiceAccountToken": false}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": []}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]}),
    ]
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts success and returns stdout.
pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        stdout(o),
        stderr(o)
    );
    stdout(o)
}

/// A directory holding the plugin binary under `name`, for kubectl's plugin lookup.
pub fn plugin_dir(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join(name);
    std::fs::copy(BIN, &target).unwrap();
    dir
}

/// Runs the real kubectl with only `dir` (and kubectl's own directory) on PATH.
pub fn kubectl(dir: &Path, kubeconfig: &Path, args: &[&str]) -> Output {
    let path = format!("{}:/usr/bin:/bin", dir.display());
    let mut cmd = Command::new("/usr/bin/kubectl");
    cmd.args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("PATH", path)
        .env_remove("KUBECONFIG");
    output_within(cmd, Duration::from_secs(60))
}

/// List requests (GET with `limit`) and whether any GET named one object.
pub fn list_requests(requests: &[Request]) -> usize {
    requests
        .iter()
        .filter(|r| r.method == "GET" && r.param("limit").is_some())
        .count()
}
