//! Shared by the tests/live_*.rs suites (one binary, `tests/suites/live.rs`): the
//! real control planes (`controlplane`: one shared, one per policy suite), a
//! namespace set per test, a fault-injecting proxy in front of the server that
//! records what the plugin sent (`proxy`), seeding helpers, and ways to run the
//! plugin (directly or through kubectl).
#![allow(dead_code)]

pub mod bench;
pub mod client;
pub mod controlplane;
pub mod policy;
pub mod proxy;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{json, Value};

pub use client::Admin;
pub use controlplane::{control_plane, ControlPlane, Plane};
#[allow(unused_imports)]
pub use proxy::{Fault, FaultKind, Gate, Proxy, Request};

/// The plugin binary (empty in examples, which cargo gives no binary path).
pub const BIN: &str = match option_env!("CARGO_BIN_EXE_kubectl-nvcf-worker") {
    Some(bin) => bin,
    None => "",
};
pub const RBAC: &str = "rbac.authorization.k8s.io/v1";
/// The agent's label on the namespaces it makes (`pkg/types/common_labels.go`),
/// written out here as the agent's code has it; `instance_type_label_is_the_agents`
/// ties the tool's constant to it.
pub const INSTANCE_TYPE: &str = "nvca.nvcf.nvidia.io/workload-instance-type";
/// The label on every namespace a test makes (value: the test process id).
pub const TEST_LABEL: &str = "nvcf-worker-test";

static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

enum Span {
    Shared(#[allow(dead_code)] RwLockReadGuard<'static, ()>),
    Exclusive(#[allow(dead_code)] RwLockWriteGuard<'static, ()>),
}

/// One test's view of the control plane: its namespaces (`<name>-<id>`), a proxy
/// whose kubeconfig defaults to namespace [`Cluster::ns`], and the admin client.
pub struct Cluster {
    pub cp: &'static ControlPlane,
    pub admin: Admin,
    pub proxy: Proxy,
    pub id: usize,
    /// The kubeconfig's default namespace, `team-a-<id>`.
    pub ns: String,
    /// Through the proxy, as the admin, default namespace [`Cluster::ns`].
    pub kubeconfig: PathBuf,
    /// Straight to kube-apiserver, as the admin, default namespace [`Cluster::ns`].
    pub admin_kubeconfig: PathBuf,
    pub dir: tempfile::TempDir,
    namespaces: Mutex<BTreeSet<String>>,
    cluster_scoped: Mutex<Vec<(String, String, String)>>,
    _span: Span,
}

impl Cluster {
    /// A test's share of the shared control plane.
    pub fn start() -> Cluster {
        Self::start_on(Plane::Shared)
    }

    /// A test's share of `plane`. Tests on one plane take its span lock for
    /// reading; a test that spans all namespaces (`-A`) takes it for writing, so
    /// no other test's objects exist on that plane while it runs.
    pub fn start_on(plane: Plane) -> Cluster {
        let lock = &controlplane::slot(plane).span;
        let span = Span::Shared(lock.read().unwrap_or_else(|e| e.into_inner()));
        let c = Self::with_span(plane, span);
        c.namespace(&c.ns);
        c
    }

    /// The shared control plane to itself: see [`Cluster::start_exclusive_on`].
    pub fn start_exclusive() -> Cluster {
        Self::start_exclusive_on(Plane::Shared)
    }

    /// `plane` to itself: waits for other tests' namespaces to be gone, for a test
    /// whose commands span every namespace.
    pub fn start_exclusive_on(plane: Plane) -> Cluster {
        let lock = &controlplane::slot(plane).span;
        let span = Span::Exclusive(lock.write().unwrap_or_else(|e| e.into_inner()));
        let c = Self::with_span(plane, span);
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let left: Vec<String> = c
                .admin
                .call(
                    "GET",
                    &format!("/api/v1/namespaces?labelSelector={TEST_LABEL}"),
                    None,
                )
                .expect("list namespaces")["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
                .collect();
            if left.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "other tests' namespaces still terminating after 180 s: {left:?}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        c.namespace(&c.ns);
        c
    }

    fn with_span(plane: Plane, span: Span) -> Cluster {
        let cp = control_plane(plane);
        let admin = Admin::new(&cp.admin_kubeconfig);
        let proxy = Proxy::start(admin.clone());
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let ns = format!("team-a-{id}");
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            controlplane::kubeconfig(&cp.ca(), &proxy.url, Some(&ns), "    token: via-proxy\n"),
        )
        .unwrap();
        let admin_kubeconfig = dir.path().join("admin.kubeconfig");
        std::fs::write(
            &admin_kubeconfig,
            controlplane::kubeconfig(
                &cp.ca(),
                &cp.url,
                Some(&ns),
                &controlplane::cert_user(&cp.dir, "admin"),
            ),
        )
        .unwrap();
        Cluster {
            cp,
            admin,
            proxy,
            id,
            ns,
            kubeconfig,
            admin_kubeconfig,
            dir,
            namespaces: Mutex::new(BTreeSet::new()),
            cluster_scoped: Mutex::new(Vec::new()),
            _span: span,
        }
    }

    /// This test's namespace of that name (`<base>-<id>`), created on first use.
    pub fn ns_named(&self, base: &str) -> String {
        let ns = format!("{base}-{}", self.id);
        self.namespace(&ns);
        ns
    }

    /// Creates namespace `ns` (labelled as a test's) unless this test already did.
    pub fn namespace(&self, ns: &str) {
        if !self.namespaces.lock().unwrap().insert(ns.to_string()) {
            return;
        }
        let obj = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": {TEST_LABEL: std::process::id().to_string()}}});
        self.admin
            .create(&obj)
            .unwrap_or_else(|e| panic!("create namespace {ns}: {e}"));
    }

    /// This test's namespace `<base>-<id>` with `labels` besides the test's own
    /// (the agent's `nvca.nvcf.nvidia.io/workload-instance-type`, say).
    pub fn ns_labelled(&self, base: &str, labels: Value) -> String {
        let ns = format!("{base}-{}", self.id);
        assert!(
            self.namespaces.lock().unwrap().insert(ns.clone()),
            "namespace {ns} made twice"
        );
        let mut all = labels;
        all[TEST_LABEL] = json!(std::process::id().to_string());
        let obj = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": all}});
        self.admin
            .create(&obj)
            .unwrap_or_else(|e| panic!("create namespace {ns}: {e}"));
        ns
    }

    /// Takes over a namespace made by other means (e.g. `kubectl apply`): it is
    /// labelled as a test's and deleted with this test's namespaces.
    pub fn adopt_namespace(&self, ns: &str) {
        self.namespaces.lock().unwrap().insert(ns.to_string());
        let (code, text) = client::runtime()
            .block_on(self.admin.send_raw(
                "PATCH",
                &format!("/api/v1/namespaces/{ns}"),
                Some(
                    &json!({"metadata": {"labels": {TEST_LABEL: std::process::id().to_string()}}}),
                ),
                "application/merge-patch+json",
            ))
            .unwrap();
        assert_eq!(code, 200, "label namespace {ns}: {text}");
    }

    /// A cluster-scoped object made by other means, deleted when the test ends.
    pub fn adopt_cluster_scoped(&self, api_version: &str, kind: &str, name: &str) {
        self.cluster_scoped
            .lock()
            .unwrap()
            .push((api_version.into(), kind.into(), name.into()));
    }

    /// Waits (bounded) for the controller-manager to give `ns` its `default`
    /// ServiceAccount: pods that name no account need it.
    pub fn wait_for_default_account(&self, ns: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self
            .get("v1", "ServiceAccount", Some(ns), "default")
            .is_none()
        {
            assert!(
                Instant::now() < deadline,
                "no default ServiceAccount in {ns}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs the plugin binary with `--kubeconfig` (through the proxy) appended.
    pub fn run(&self, args: &[&str]) -> Output {
        run_with(&self.kubeconfig, args)
    }

    /// Creates an object as the admin, straight to the server (not recorded by the
    /// proxy). A pod's `status.phase` is then set through its status subresource,
    /// as a kubelet would.
    pub fn create(&self, obj: Value) -> Value {
        self.create_all(vec![obj]).pop().unwrap()
    }

    /// Namespaces must exist already (see [`Cluster::create_all`]).
    async fn create_async(&self, mut obj: Value) -> Value {
        if obj["metadata"]["namespace"].is_null() {
            self.cluster_scoped.lock().unwrap().push((
                obj["apiVersion"].as_str().unwrap().to_string(),
                obj["kind"].as_str().unwrap().to_string(),
                obj["metadata"]["name"].as_str().unwrap().to_string(),
            ));
        }
        let status = obj.as_object_mut().unwrap().remove("status");
        let path = client::collection_of(&obj);
        let mut created = self
            .admin
            .send("POST", &path, Some(&obj))
            .await
            .unwrap_or_else(|e| panic!("create {path} {}: {e}", obj["metadata"]["name"]));
        if let (Some(status), "Pod") = (status, obj["kind"].as_str().unwrap_or("")) {
            let name = created["metadata"]["name"].as_str().unwrap().to_string();
            let (code, text) = self
                .admin
                .send_raw(
                    "PATCH",
                    &format!("{path}/{name}/status"),
                    Some(&json!({ "status": status })),
                    "application/merge-patch+json",
                )
                .await
                .unwrap();
            assert_eq!(code, 200, "set status of pod {name}: {text}");
            created = serde_json::from_str(&text).unwrap();
        }
        created
    }

    /// Creates many objects, 16 requests at a time (order within the batch is free).
    pub fn create_all(&self, objs: Vec<Value>) -> Vec<Value> {
        for o in &objs {
            if let Some(ns) = o["metadata"]["namespace"].as_str() {
                self.namespace(ns);
            }
        }
        client::runtime().block_on(
            futures::stream::iter(objs)
                .map(|o| self.create_async(o))
                .buffered(16)
                .collect(),
        )
    }

    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        ns: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        self.admin.get(api_version, kind, ns, name)
    }

    pub fn delete(&self, api_version: &str, kind: &str, ns: Option<&str>, name: &str) -> bool {
        self.admin.delete(api_version, kind, ns, name)
    }

    pub fn list(&self, api_version: &str, kind: &str, ns: Option<&str>) -> Vec<Value> {
        self.admin.list(api_version, kind, ns)
    }

    /// The ServiceAccount, Role and RoleBinding the agent makes for a pod.
    pub fn seed_trio(&self, ns: &str, name: &str) -> Vec<Value> {
        self.create_all(trio(ns, name, None))
    }

    /// The namespaces of the agent-namespace tests (`live_list`, `live_audit`): one
    /// the agent provisions (a MiniService's), one with the label but the agent's
    /// other value, one without; in each the same manifest-declared identity with
    /// its Deployment, and in the agent's also the identity the agent makes there.
    pub fn agent_namespaces(&self) -> [String; 3] {
        let agent = self.ns_labelled("miniservice", json!({INSTANCE_TYPE: "miniservice"}));
        let pod_spec = self.ns_labelled("podspec", json!({INSTANCE_TYPE: "pod_spec"}));
        let plain = self.ns.clone();
        for ns in [&agent, &pod_spec, &plain] {
            self.create(deployment(ns, "web"));
            self.seed_manifest_trio(ns, "nvcf-worker-web", ("apps/v1", "Deployment", "web"));
        }
        self.seed_agent_worker(&agent, "ms-1");
        [agent, pod_spec, plain]
    }

    /// `nvcf-worker` as the MiniService agent makes it (`ensureWorkerIdentity`):
    /// its MiniService label and infra annotation on all three.
    pub fn seed_agent_worker(&self, ns: &str, miniservice: &str) -> Vec<Value> {
        let objs = trio(ns, "nvcf-worker", None)
            .into_iter()
            .map(|mut o| {
                o["metadata"]["labels"] =
                    json!({"nvca.nvcf.nvidia.io/miniservice-name": miniservice});
                o["metadata"]["annotations"] =
                    json!({"nvca.nvcf.nvidia.io/nvca-infra-object": "true"});
                o
            })
            .collect();
        self.create_all(objs)
    }

    /// The trio as `inject` declares it for a workload `(apiVersion, kind, name)`.
    pub fn seed_manifest_trio(
        &self,
        ns: &str,
        name: &str,
        workload: (&str, &str, &str),
    ) -> Vec<Value> {
        self.create_all(trio(ns, name, Some(workload)))
    }

    /// A pod running as `account` (which must exist: the ServiceAccount admission
    /// plugin refuses pods naming a missing account) in `phase`.
    pub fn seed_pod(&self, ns: &str, name: &str, account: &str, phase: &str) -> Value {
        if account == "default" {
            self.namespace(ns);
            self.wait_for_default_account(ns);
        }
        self.create(pod(ns, name, account, phase))
    }

    pub fn exists(&self, kind: &str, ns: &str, name: &str) -> bool {
        let api_version = if kind == "ServiceAccount" { "v1" } else { RBAC };
        self.get(api_version, kind, Some(ns), name).is_some()
    }

    /// Members of the trio still present.
    pub fn members(&self, ns: &str, name: &str) -> usize {
        ["ServiceAccount", "Role", "RoleBinding"]
            .iter()
            .filter(|k| self.exists(k, ns, name))
            .count()
    }

    /// The uid of a trio member.
    pub fn uid(&self, kind: &str, ns: &str, name: &str) -> String {
        let api_version = if kind == "ServiceAccount" { "v1" } else { RBAC };
        self.get(api_version, kind, Some(ns), name)
            .unwrap_or_else(|| panic!("no {kind} {ns}/{name}"))["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_string()
    }

    pub fn requests(&self) -> Vec<Request> {
        self.proxy.requests()
    }

    pub fn clear_requests(&self) {
        self.proxy.clear_requests()
    }

    pub fn deletes(&self) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == "DELETE")
            .collect()
    }

    pub fn add_fault(&self, fault: Fault) {
        self.proxy.add_fault(fault)
    }

    pub fn pending_faults(&self) -> Vec<Fault> {
        self.proxy.pending_faults()
    }

    pub fn clear_faults(&self) {
        self.proxy.clear_faults()
    }

    /// A ServiceAccount token from the TokenRequest API (`audiences` empty: the
    /// API server's own).
    pub fn token(&self, ns: &str, account: &str, audiences: &[&str], seconds: u64) -> String {
        let resp = self
            .admin
            .call(
                "POST",
                &format!("/api/v1/namespaces/{ns}/serviceaccounts/{account}/token"),
                Some(
                    &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                    "spec": {"audiences": audiences, "expirationSeconds": seconds}}),
                ),
            )
            .unwrap_or_else(|e| panic!("token for {ns}/{account}: {e}"));
        resp["status"]["token"].as_str().unwrap().to_string()
    }
}

impl Drop for Cluster {
    /// Namespaces go (the namespace controller empties them in the background);
    /// cluster-scoped objects this test made are deleted.
    fn drop(&mut self) {
        for (api_version, kind, name) in self.cluster_scoped.lock().unwrap().iter() {
            let _ = self.admin.call(
                "DELETE",
                &format!("{}/{name}", client::collection(api_version, kind, None)),
                None,
            );
        }
        for ns in self.namespaces.lock().unwrap().iter() {
            let _ = self
                .admin
                .call("DELETE", &format!("/api/v1/namespaces/{ns}"), None);
        }
    }
}

/// Runs the plugin binary with `--kubeconfig KUBECONFIG` appended.
pub fn run_with(kubeconfig: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env_remove("KUBECONFIG");
    output_within(cmd, Duration::from_secs(120))
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
pub fn trio(ns: &str, name: &str, workload: Option<(&str, &str, &str)>) -> Vec<Value> {
    let mut meta = json!({"name": name, "namespace": ns});
    if let Some((api_version, kind, workload_name)) = workload {
        meta["labels"] = json!({"nvcf.io/identity-origin": "manifest", "app.kubernetes.io/managed-by": "kubectl-nvcf-worker"});
        meta["annotations"] = json!({"nvcf.io/workload": format!("{kind}/{workload_name}"), "nvcf.io/workload-api-version": api_version});
    }
    vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta, "automountServiceAccountToken": false}),
        json!({"apiVersion": RBAC, "kind": "Role", "metadata": meta, "rules": []}),
        json!({"apiVersion": RBAC, "kind": "RoleBinding", "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]}),
    ]
}

/// A pod running as `account`, with `status.phase` for [`Cluster::create`].
pub fn pod(ns: &str, name: &str, account: &str, phase: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"serviceAccountName": account, "containers": [{"name": "app", "image": "busybox"}]},
        "status": {"phase": phase},
    })
}

pub fn deployment(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "a", "image": "x"}]}}}})
}

/// A suspended CronJob: its template keeps an identity in use all the same, and
/// the controller-manager never starts its Jobs (unsuspended, a test running
/// across midnight UTC saw pods "appear" from it).
pub fn cron_job(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"schedule": "0 0 * * *", "suspend": true, "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "a", "image": "x"}]}}}}}})
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
    output_within(cmd, Duration::from_secs(120))
}

/// List requests (GET with `limit`).
pub fn list_requests(requests: &[Request]) -> usize {
    requests
        .iter()
        .filter(|r| r.method == "GET" && r.param("limit").is_some())
        .count()
}
