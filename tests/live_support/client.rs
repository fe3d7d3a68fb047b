//! A blocking JSON client for seeding and inspecting the test cluster, on kube's
//! own client (the same TLS and kubeconfig handling the plugin uses).

use std::path::Path;
use std::sync::OnceLock;

use serde_json::Value;

/// The runtime shared by the admin clients and the fault proxies of a test binary.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime")
    })
}

#[derive(Clone)]
pub struct Admin {
    pub client: kube::Client,
}

/// An API error: HTTP status and the server's `Status` (or body text).
#[derive(Debug)]
pub struct ApiError {
    pub code: u16,
    pub body: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}: {}", self.code, self.body)
    }
}

/// The REST path of a kind's collection (`/api/v1/namespaces/ns/pods`).
fn collection_guess(api_version: &str, kind: &str, namespace: Option<&str>) -> String {
    let plural = format!("{}s", kind.to_lowercase());
    let root = format!("/apis/{api_version}");
    match namespace {
        Some(ns) => format!("{root}/namespaces/{ns}/{plural}"),
        None => format!("{root}/{plural}"),
    }
}

pub fn collection(api_version: &str, kind: &str, namespace: Option<&str>) -> String {
    let plural = match kind {
        "Namespace" => "namespaces",
        "ServiceAccount" => "serviceaccounts",
        "Role" => "roles",
        "RoleBinding" => "rolebindings",
        "ClusterRole" => "clusterroles",
        "ClusterRoleBinding" => "clusterrolebindings",
        "Pod" => "pods",
        "Secret" => "secrets",
        "ConfigMap" => "configmaps",
        "Deployment" => "deployments",
        "StatefulSet" => "statefulsets",
        "DaemonSet" => "daemonsets",
        "ReplicaSet" => "replicasets",
        "ReplicationController" => "replicationcontrollers",
        "Job" => "jobs",
        "CronJob" => "cronjobs",
        "PodTemplate" => "podtemplates",
        "Service" => "services",
        "MutatingAdmissionPolicy" => "mutatingadmissionpolicies",
        "MutatingAdmissionPolicyBinding" => "mutatingadmissionpolicybindings",
        "ValidatingAdmissionPolicy" => "validatingadmissionpolicies",
        "ValidatingAdmissionPolicyBinding" => "validatingadmissionpolicybindings",
        // Custom resources: the conventional plural (a kind this cluster does not
        // serve gets its 404 from the server).
        other => return collection_guess(api_version, other, namespace),
    };
    let root = if api_version.contains('/') {
        format!("/apis/{api_version}")
    } else {
        format!("/api/{api_version}")
    };
    match namespace {
        Some(ns) => format!("{root}/namespaces/{ns}/{plural}"),
        None => format!("{root}/{plural}"),
    }
}

/// The collection path of an object.
pub fn collection_of(obj: &Value) -> String {
    collection(
        obj["apiVersion"].as_str().expect("apiVersion"),
        obj["kind"].as_str().expect("kind"),
        obj["metadata"]["namespace"].as_str(),
    )
}

impl Admin {
    pub fn new(kubeconfig: &Path) -> Admin {
        let rt = runtime();
        let client = rt.block_on(async {
            let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
            let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .expect("kubeconfig");
            kube::Client::try_from(config).expect("client")
        });
        Admin { client }
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        let (code, text) = self
            .send_raw(method, path, body, "application/json")
            .await?;
        if (200..300).contains(&code) {
            Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
        } else {
            Err(ApiError { code, body: text })
        }
    }

    pub async fn send_raw(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        content_type: &str,
    ) -> Result<(u16, String), ApiError> {
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", content_type)
            .header("accept", "application/json")
            .body(
                body.map_or_else(Vec::new, |b| serde_json::to_vec(b).unwrap())
                    .into(),
            )
            .unwrap();
        let resp = self.client.send(req).await.map_err(|e| ApiError {
            code: 0,
            body: e.to_string(),
        })?;
        let code = resp.status().as_u16();
        let bytes = resp
            .into_body()
            .collect_bytes()
            .await
            .map_err(|e| ApiError {
                code,
                body: e.to_string(),
            })?;
        Ok((code, String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// A GET's status, Content-Type and body bytes as the server sent them, asked
    /// for with `accept` (protobuf is not text).
    pub fn get_bytes(&self, path: &str, accept: &str) -> (u16, String, Vec<u8>) {
        let req = http::Request::get(path)
            .header("accept", accept)
            .body(Vec::new().into())
            .unwrap();
        runtime().block_on(async {
            let resp = self.client.send(req).await.expect("GET");
            let code = resp.status().as_u16();
            let content_type = resp
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            let bytes = resp.into_body().collect_bytes().await.expect("body");
            (code, content_type, bytes.to_vec())
        })
    }

    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, ApiError> {
        runtime().block_on(self.send(method, path, body))
    }

    pub fn get_text(&self, path: &str) -> Result<String, ApiError> {
        runtime()
            .block_on(self.send_raw("GET", path, None, "application/json"))
            .and_then(|(code, text)| {
                if code == 200 {
                    Ok(text)
                } else {
                    Err(ApiError { code, body: text })
                }
            })
    }

    /// Creates an object and returns it as stored (uid, resourceVersion, ...).
    pub fn create(&self, obj: &Value) -> Result<Value, ApiError> {
        self.call("POST", &collection_of(obj), Some(obj))
    }

    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        ns: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        match self.call(
            "GET",
            &format!("{}/{name}", collection(api_version, kind, ns)),
            None,
        ) {
            Ok(v) => Some(v),
            Err(e) if e.code == 404 => None,
            Err(e) => panic!("get {kind} {ns:?}/{name}: {e}"),
        }
    }

    /// Every item of a kind (namespace or cluster), with apiVersion and kind set.
    pub fn list(&self, api_version: &str, kind: &str, ns: Option<&str>) -> Vec<Value> {
        let doc = self
            .call("GET", &collection(api_version, kind, ns), None)
            .unwrap_or_else(|e| panic!("list {kind}: {e}"));
        let mut items = doc["items"].as_array().cloned().unwrap_or_default();
        for i in &mut items {
            i["apiVersion"] = Value::from(api_version);
            i["kind"] = Value::from(kind);
        }
        items
    }

    /// Deletes an object; true if it existed.
    pub fn delete(&self, api_version: &str, kind: &str, ns: Option<&str>, name: &str) -> bool {
        match self.call(
            "DELETE",
            &format!("{}/{name}", collection(api_version, kind, ns)),
            None,
        ) {
            Ok(_) => true,
            Err(e) if e.code == 404 => false,
            Err(e) => panic!("delete {kind} {ns:?}/{name}: {e}"),
        }
    }
}
