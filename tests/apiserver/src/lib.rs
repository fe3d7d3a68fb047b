//! A small in-memory Kubernetes API server on 127.0.0.1 for end-to-end tests.
//!
//! No kube-apiserver can run where these tests run, so this crate serves
//! the resource types `kubectl-nvcf-worker` touches with the real server's
//! semantics (discovery, selectors, pagination, metadata-only lists,
//! optimistic concurrency, delete preconditions, dry runs, finalizers,
//! watches, `Status` errors with real wording), well enough for both kube-rs
//! and a real `kubectl` to work against it. Tests also get direct access to
//! the store, a log of requests and injectable faults.
//!
//! ```no_run
//! use loopback_apiserver::{ApiServer, Fault, FaultKind};
//! use serde_json::json;
//!
//! let server = ApiServer::start();
//! server.create(json!({
//!     "apiVersion": "v1", "kind": "ServiceAccount",
//!     "metadata": {"name": "worker", "namespace": "nvcf"},
//! }));
//! server.add_fault(Fault::new("/serviceaccounts/worker", FaultKind::Forbidden).method("DELETE"));
//! server.write_kubeconfig("/tmp/kubeconfig", Some("nvcf")).unwrap();
//! // ... run the plugin or kubectl with KUBECONFIG=/tmp/kubeconfig ...
//! assert!(server.requests().iter().any(|r| r.method == "DELETE"));
//! ```
//!
//! Real behaviour that clients sometimes do not expect, reproduced here:
//! - DELETE answers a Success `Status` for most types, but the deleted
//!   object for pods and namespaces, and the object (with
//!   `deletionTimestamp`) while finalizers hold it: kube-rs `Api::delete`
//!   gives `Right(Status)` or `Left(object)` accordingly.
//! - Items of a list carry no apiVersion/kind; only the list does.
//! - Creating in a missing namespace is a 404 `namespaces "x" not found`
//!   (the direct [`ApiServer::create`] creates the namespace instead). The
//!   server starts with `default`, `kube-node-lease`, `kube-public` and
//!   `kube-system`.
//! - Creating resets status (pods start `Pending`); PUT/PATCH on the main
//!   resource ignore status, `/status` changes only status.
//!
//! Differences from a real server worth knowing:
//! - No authentication or authorization (see [`FaultKind::Forbidden`]).
//! - No controllers run, except that deleting a namespace or an owner
//!   synchronously deletes its contents or dependents (orphaning on
//!   `propagationPolicy: Orphan`), and pods are deleted at once (as if
//!   unscheduled) instead of waiting for a kubelet.
//! - A given `metadata.creationTimestamp` is kept on create.
//! - Strategic merge and server-side apply patches are applied as merge
//!   patches (lists are replaced; no managedFields).
//! - Continued lists see current data rather than a snapshot.
//! - No schema validation beyond names, namespaces and types; no Table
//!   output (kubectl falls back to JSON and prints NAME/AGE columns).
//! - JSON only: protobuf request bodies get 415, so kubectl commands that
//!   write through typed clients (`kubectl create namespace|serviceaccount|
//!   secret ...`) fail; `kubectl create -f`, `apply`, `delete`, `label`,
//!   `annotate`, `patch` and every read work.

// Handlers return the API `Status` body as their error: that is what the server
// sends, so boxing it would only add noise.
#![allow(clippy::result_large_err)]

mod http;
mod patch;
mod resources;
mod selector;
mod server;
mod status;
mod store;
mod util;
mod watch;

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{json, Value};

pub use resources::{ResourceType, RESOURCES};
pub use util::{now_rfc3339, rfc3339, timestamp_ago};

use http::Connections;
use server::{lock, Shared};
use store::{Origin, Part, Store};

/// The user named in injected [`FaultKind::Forbidden`] denials.
pub const FORBIDDEN_USER: &str = "system:serviceaccount:nvcf:kubectl-nvcf-worker";

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Upper-case HTTP method.
    pub method: String,
    /// URL path without the query string.
    pub path: String,
    /// Decoded query parameters in the order sent.
    pub query: Vec<(String, String)>,
    pub accept: Option<String>,
    pub content_type: Option<String>,
    /// The body, when it was JSON.
    pub body: Option<Value>,
}

impl Request {
    /// The first value of a query parameter.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// What an injected fault does.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultKind {
    /// Answer with this HTTP code and a `Status` carrying the reason the real
    /// server pairs with it (500 InternalError, 503 ServiceUnavailable, ...).
    Status(u16),
    /// 429 with a `Retry-After` header and reason TooManyRequests, as API
    /// priority and fairness sends.
    TooManyRequests { retry_after_secs: u64 },
    /// Fire only on a list request carrying a `continue` token: 410 Expired,
    /// as when the token outlived etcd compaction.
    ExpireContinue,
    /// Wait, then handle the request normally.
    Delay(Duration),
    /// 403 with the real RBAC wording for this request's verb, resource,
    /// name and namespace, for user [`FORBIDDEN_USER`].
    Forbidden,
}

/// A fault to inject into matching requests; it fires `times` times, then
/// disappears. When several match, the one added first fires.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// HTTP method to match (case-insensitive); `None` matches any.
    pub method: Option<String>,
    /// Substring the URL path (without query) must contain; "" matches all.
    pub path_contains: String,
    pub times: usize,
    pub kind: FaultKind,
}

impl Fault {
    /// A fault firing once on any method.
    pub fn new(path_contains: &str, kind: FaultKind) -> Self {
        Fault {
            method: None,
            path_contains: path_contains.to_string(),
            times: 1,
            kind,
        }
    }

    pub fn method(mut self, method: &str) -> Self {
        self.method = Some(method.to_string());
        self
    }

    pub fn times(mut self, times: usize) -> Self {
        self.times = times;
        self
    }
}

/// A running server. It stops when dropped.
pub struct ApiServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    accept_loop: Option<JoinHandle<()>>,
}

/// Resolves a type for the direct accessors, panicking with the list of
/// served types: a typo in a test should fail loudly.
fn resource_type(api_version: &str, kind_or_resource: &str) -> &'static ResourceType {
    resources::find(api_version, kind_or_resource).unwrap_or_else(|| {
        let served: Vec<String> = RESOURCES
            .iter()
            .map(|r| format!("{} {}", r.api_version(), r.kind))
            .collect();
        panic!("{api_version} {kind_or_resource} is not served; served: {served:?}")
    })
}

/// The type and namespace an object names in its own apiVersion, kind and
/// metadata.namespace.
fn object_type(obj: &Value) -> (&'static ResourceType, Option<String>) {
    let field = |f: &str| obj.get(f).and_then(Value::as_str).unwrap_or("");
    let rt = resource_type(field("apiVersion"), field("kind"));
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| rt.namespaced.then(|| "default".to_string()));
    (rt, ns)
}

impl ApiServer {
    /// Binds 127.0.0.1 on a free port and serves on background threads,
    /// one per connection, so slow or delayed requests never block others.
    ///
    /// # Panics
    /// If no loopback port can be bound.
    pub fn start() -> ApiServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener
            .local_addr()
            .expect("a bound listener has an address");
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::new()),
            changed: Condvar::new(),
            requests: Mutex::new(Vec::new()),
            faults: Mutex::new(Vec::new()),
            connections: Connections::default(),
            aggregated_discovery: AtomicBool::new(true),
            stopping: AtomicBool::new(false),
            address: addr.to_string(),
        });
        let accept_loop = http::spawn_accept_loop(listener, Arc::clone(&shared));
        ApiServer {
            shared,
            addr,
            accept_loop: Some(accept_loop),
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kubeconfig (YAML) for this server with cluster, user and context
    /// `loopback`, current-context set, and an optional default namespace.
    /// Works for kubectl and kube-rs alike.
    pub fn kubeconfig(&self, namespace: Option<&str>) -> String {
        // JSON string literals are valid YAML double-quoted scalars.
        let quote = |s: &str| Value::String(s.to_string()).to_string();
        let namespace = namespace
            .map(|ns| format!("    namespace: {}\n", quote(ns)))
            .unwrap_or_default();
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: loopback\n  cluster:\n    server: {}\n\
             contexts:\n- name: loopback\n  context:\n    cluster: loopback\n    user: loopback\n{namespace}\
             current-context: loopback\nusers:\n- name: loopback\n  user:\n    token: loopback\npreferences: {{}}\n",
            quote(&self.url())
        )
    }

    /// Writes [`Self::kubeconfig`] to `path`.
    pub fn write_kubeconfig(
        &self,
        path: impl AsRef<Path>,
        namespace: Option<&str>,
    ) -> io::Result<()> {
        std::fs::write(path, self.kubeconfig(namespace))
    }

    /// Serves aggregated discovery (`apidiscovery.k8s.io/v2`) to clients that
    /// ask for it, as Kubernetes 1.30+ does (the default). When off, `/api`
    /// and `/apis` always answer the legacy documents, as older servers did.
    pub fn set_aggregated_discovery(&self, enabled: bool) {
        self.shared
            .aggregated_discovery
            .store(enabled, Ordering::Relaxed);
    }

    /// Stores an object with the defaulting of a POST (uid, resourceVersion,
    /// creationTimestamp when absent, generation, initial status when absent,
    /// type defaults), creating its namespace if missing. Unlike POST it
    /// keeps a given uid, status and deletionTimestamp, and a namespaced
    /// object without a namespace goes to `default`. Returns what was stored.
    ///
    /// # Panics
    /// If the type is not served or the API would reject the object.
    pub fn create(&self, obj: Value) -> Value {
        let (rt, ns) = object_type(&obj);
        self.shared
            .write(|s| s.create(rt, ns.as_deref(), obj, Origin::Direct, false))
            .unwrap_or_else(|e| panic!("create failed: {}", e.to_status()))
    }

    /// Replaces a stored object wholesale, as a controller would: status and
    /// system metadata are taken from `obj` where given. Bumps the
    /// resourceVersion unless nothing changed. Removing the last finalizer
    /// of an object being deleted completes its deletion, as on a real
    /// server. Returns what was stored.
    ///
    /// # Panics
    /// If the object does not exist or the type is not served.
    pub fn replace(&self, obj: Value) -> Value {
        let (rt, ns) = object_type(&obj);
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let mut obj = obj;
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        self.shared
            .write(|s| {
                s.update(
                    rt,
                    ns.as_deref(),
                    &name,
                    obj,
                    Part::Main,
                    Origin::Direct,
                    false,
                )
            })
            .unwrap_or_else(|e| panic!("replace failed: {}", e.to_status()))
    }

    /// One object, by apiVersion and kind (or plural, singular or short
    /// name). `namespace` is ignored for cluster-scoped types.
    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let rt = resource_type(api_version, kind);
        lock(&self.shared.store).get(rt, namespace, name).cloned()
    }

    /// Objects of a type in namespace/name order; `None` means all namespaces.
    pub fn list(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Vec<Value> {
        let rt = resource_type(api_version, kind);
        let store = lock(&self.shared.store);
        store.list(rt, namespace).map(|(_, o)| o.clone()).collect()
    }

    /// Removes an object at once, bypassing preconditions, finalizers and
    /// garbage collection. Returns it if it existed.
    pub fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let rt = resource_type(api_version, kind);
        self.shared.write(|s| s.remove(rt, namespace, name))
    }

    /// A snapshot of every stored object (including the system namespaces
    /// `default`, `kube-node-lease`, `kube-public` and `kube-system`).
    pub fn objects(&self) -> Vec<Value> {
        lock(&self.shared.store).all().cloned().collect()
    }

    /// Backdates (or changes) an object's creationTimestamp, e.g. to
    /// [`timestamp_ago`]. Returns false if the object does not exist.
    pub fn set_creation_timestamp(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        timestamp: &str,
    ) -> bool {
        let Some(mut obj) = self.get(api_version, kind, namespace, name) else {
            return false;
        };
        obj["metadata"]["creationTimestamp"] = json!(timestamp);
        self.replace(obj);
        true
    }

    /// The newest resourceVersion handed out.
    pub fn resource_version(&self) -> u64 {
        lock(&self.shared.store).resource_version()
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.shared.requests).clone()
    }

    pub fn clear_requests(&self) {
        lock(&self.shared.requests).clear();
    }

    pub fn add_fault(&self, fault: Fault) {
        lock(&self.shared.faults).push(fault);
    }

    /// Faults that have not yet fired as often as asked.
    pub fn pending_faults(&self) -> Vec<Fault> {
        lock(&self.shared.faults).clone()
    }

    pub fn clear_faults(&self) {
        lock(&self.shared.faults).clear();
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::Relaxed);
        http::wake(self.addr);
        if let Some(handle) = self.accept_loop.take() {
            let _ = handle.join();
        }
        // Hang up on keep-alive clients and end watches.
        self.shared.connections.close_all();
        self.shared.changed.notify_all();
    }
}
