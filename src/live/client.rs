//! The API calls the live commands make, over kube's raw `Client::send`: that is the
//! one place that sees status codes and `Retry-After`, so retries, list restarts on
//! 410, UID preconditions and permission errors are handled once, here.

use std::time::Duration;

use http::StatusCode;
use kube::api::{ListParams, Request};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use super::wire;
use crate::error::{Error, Result};

/// A resource type the live commands read or delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Resource {
    /// `v1` or `group/version`.
    pub api_version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
}

pub const fn res(
    api_version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> Resource {
    Resource {
        api_version,
        kind,
        plural,
        namespaced,
    }
}

pub const SERVICE_ACCOUNTS: Resource = res("v1", "ServiceAccount", "serviceaccounts", true);
pub const NAMESPACES: Resource = res("v1", "Namespace", "namespaces", false);
pub const PODS: Resource = res("v1", "Pod", "pods", true);
pub const SECRETS: Resource = res("v1", "Secret", "secrets", true);
pub const REPLICATION_CONTROLLERS: Resource = res(
    "v1",
    "ReplicationController",
    "replicationcontrollers",
    true,
);
pub const DEPLOYMENTS: Resource = res("apps/v1", "Deployment", "deployments", true);
pub const STATEFUL_SETS: Resource = res("apps/v1", "StatefulSet", "statefulsets", true);
pub const DAEMON_SETS: Resource = res("apps/v1", "DaemonSet", "daemonsets", true);
pub const REPLICA_SETS: Resource = res("apps/v1", "ReplicaSet", "replicasets", true);
pub const JOBS: Resource = res("batch/v1", "Job", "jobs", true);
pub const CRON_JOBS: Resource = res("batch/v1", "CronJob", "cronjobs", true);
pub const POD_TEMPLATES: Resource = res("v1", "PodTemplate", "podtemplates", true);
const RBAC: &str = "rbac.authorization.k8s.io/v1";
pub const ROLES: Resource = res(RBAC, "Role", "roles", true);
pub const ROLE_BINDINGS: Resource = res(RBAC, "RoleBinding", "rolebindings", true);
pub const CLUSTER_ROLES: Resource = res(RBAC, "ClusterRole", "clusterroles", false);
pub const CLUSTER_ROLE_BINDINGS: Resource =
    res(RBAC, "ClusterRoleBinding", "clusterrolebindings", false);

/// The string at `pointer` in a listed object, or "" (absent or not a string).
pub fn text<'v>(item: &'v Value, pointer: &str) -> &'v str {
    item.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// A listed object's labels (values that are not strings left out).
pub fn labels(item: &Value) -> std::collections::BTreeMap<String, String> {
    item.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// A pod-bearing kind (`workload::POD_BEARING`) as a resource to list.
pub const fn bearing(k: &crate::workload::PodBearing) -> Resource {
    res(k.api_version, k.kind, k.plural, true)
}

/// Every pod-bearing kind but Pod itself, from the one definition the guard and
/// the transformer read: the objects whose pod templates name an account.
pub fn workloads() -> impl Iterator<Item = Resource> + Clone {
    crate::workload::POD_BEARING
        .iter()
        .filter(|k| k.kind != "Pod")
        .map(bearing)
}

impl Resource {
    pub fn group(&self) -> &'static str {
        self.api_version.rsplit_once('/').map_or("", |(g, _)| g)
    }

    /// The resource as RBAC rules name it: `rolebindings.rbac.authorization.k8s.io`.
    pub fn qualified(&self) -> String {
        match self.group() {
            "" => self.plural.to_string(),
            g => format!("{}.{g}", self.plural),
        }
    }

    fn collection_path(&self, namespace: Option<&str>) -> String {
        let base = match self.group() {
            "" => format!("/api/{}", self.api_version),
            _ => format!("/apis/{}", self.api_version),
        };
        match namespace.filter(|_| self.namespaced) {
            Some(ns) => format!("{base}/namespaces/{ns}/{}", self.plural),
            None => format!("{base}/{}", self.plural),
        }
    }

    /// The workload type a `nvcf.io/workload-api-version` + kind names, if we know it.
    pub fn workload(api_version: &str, kind: &str) -> Option<Resource> {
        workloads()
            .chain([PODS])
            .find(|r| r.kind == kind && r.api_version == api_version)
    }
}

/// Namespace scope of a list: one namespace, or one request series across all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    Namespace(String),
    AllNamespaces,
}

impl Scope {
    pub fn namespace(&self) -> Option<&str> {
        match self {
            Scope::Namespace(ns) => Some(ns),
            Scope::AllNamespaces => None,
        }
    }
}

/// Bounded retries for 429 and 5xx: enough to ride out API priority and fairness
/// throttling or an apiserver restart, short enough that a broken server fails fast.
#[derive(Clone, Copy, Debug)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub first_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 5,
            first_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(10),
        }
    }
}

/// What a delete with a UID precondition came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeleteOutcome {
    Deleted,
    /// Already gone: what cleanup wanted.
    NotFound,
    /// 409: the object was replaced since it was listed (UID changed).
    Conflict(String),
}

/// A page's items and its continue token (None on the last page).
type Page<T> = (Vec<T>, Option<String>);

/// How a list's pages are asked for and read.
struct Format<'a, D> {
    metadata_only: bool,
    field_selector: Option<&'a str>,
    /// The Accept header, when not kube's default for the list.
    accept: Option<&'static str>,
    decode: D,
}

/// A JSON list page, each item decoded straight into `T`.
fn json_page<T: DeserializeOwned>(body: &[u8]) -> std::result::Result<Page<T>, String> {
    #[derive(Deserialize)]
    struct Meta {
        #[serde(default, rename = "continue")]
        continue_token: Option<String>,
    }
    #[derive(Deserialize)]
    #[serde(bound = "T: DeserializeOwned")]
    struct List<T> {
        metadata: Option<Meta>,
        items: Option<Vec<T>>,
    }
    let page: List<T> = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let token = page
        .metadata
        .and_then(|m| m.continue_token)
        .filter(|t| !t.is_empty());
    Ok((page.items.unwrap_or_default(), token))
}

pub struct Kube {
    client: kube::Client,
    request_timeout: Option<Duration>,
    pub retry: RetryPolicy,
    pub page_size: u32,
    /// Default namespace of the kubeconfig context (or in-cluster namespace).
    pub default_namespace: String,
    /// The API server's URL, for errors when it cannot be reached.
    pub server: String,
}

/// A failed API call's status, reason and message.
struct ApiFailure {
    status: StatusCode,
    message: String,
}

fn api_message(status: StatusCode, body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
        // A list that asked for protobuf has its failures in protobuf too.
        .or_else(|| wire::status_message(body))
        .unwrap_or_else(|| {
            let text = String::from_utf8_lossy(body);
            format!("{status}: {}", text.trim())
        })
}

/// An error with its causes, `outer: inner: root`: kube's transport errors say
/// only "client error (Connect)" at the top; the cause says refused or timed out.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let c_text = c.to_string();
        if !text.contains(&c_text) {
            text.push_str(": ");
            text.push_str(&c_text);
        }
        cause = c.source();
    }
    text
}

fn build_err(e: impl std::fmt::Display) -> Error {
    Error::Live(format!("building a request: {e}"))
}

impl Kube {
    pub fn new(
        client: kube::Client,
        default_namespace: String,
        request_timeout: Option<Duration>,
    ) -> Kube {
        Kube {
            client,
            request_timeout,
            retry: RetryPolicy::default(),
            page_size: 500,
            default_namespace,
            server: String::new(),
        }
    }

    fn server_name(&self) -> &str {
        if self.server.is_empty() {
            "(unknown)"
        } else {
            &self.server
        }
    }

    /// Sends a request, retrying 429 and 5xx (honouring `Retry-After`) and transport
    /// errors. A 403 becomes `Error::Forbidden` naming the verb and resource.
    async fn send(
        &self,
        request: http::Request<Vec<u8>>,
        verb: &str,
        resource: &Resource,
        namespace: Option<&str>,
    ) -> Result<std::result::Result<Vec<u8>, ApiFailure>> {
        let mut backoff = self.retry.first_backoff;
        let mut attempt = 1;
        loop {
            let (parts, body) = request.clone().into_parts();
            let sent = self.client.send(http::Request::from_parts(
                parts,
                kube::client::Body::from(body),
            ));
            let outcome = match self.request_timeout {
                Some(t) => tokio::time::timeout(t, sent).await.unwrap_or_else(|_| {
                    Err(kube::Error::Service(
                        format!("request timed out after {t:?}").into(),
                    ))
                }),
                None => sent.await,
            };
            let (status, retry_after, bytes) = match outcome {
                Ok(response) => {
                    let status = response.status();
                    let retry_after = response
                        .headers()
                        .get(http::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    let bytes = response.into_body().collect_bytes().await;
                    match bytes {
                        Ok(b) => (status, retry_after, b.to_vec()),
                        // A connection cut mid-body: retried like a 503.
                        Err(_) if attempt < self.retry.attempts => {
                            (StatusCode::SERVICE_UNAVAILABLE, None, Vec::new())
                        }
                        Err(e) => {
                            return Err(Error::Live(format!(
                                "{verb} {}: the connection to the server {} broke mid-response: {e} (after {attempt} attempts)",
                                resource.qualified(),
                                self.server_name()
                            )))
                        }
                    }
                }
                // Transport errors (refused, reset, timed out): retried like a 503.
                Err(_) if attempt < self.retry.attempts => {
                    (StatusCode::SERVICE_UNAVAILABLE, None, Vec::new())
                }
                Err(e) => {
                    return Err(Error::Live(format!(
                        "{verb} {}: cannot reach the server {}: {} (after {attempt} attempts; check --server, --context or the kubeconfig)",
                        resource.qualified(),
                        self.server_name(),
                        error_chain(&e)
                    )))
                }
            };
            if status.is_success() {
                return Ok(Ok(bytes));
            }
            let retryable = status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error();
            if retryable && attempt < self.retry.attempts {
                let wait = retry_after.unwrap_or(backoff).min(self.retry.max_backoff);
                tokio::time::sleep(wait).await;
                backoff = (backoff * 2).min(self.retry.max_backoff);
                attempt += 1;
                continue;
            }
            let message = api_message(status, &bytes);
            if status == StatusCode::FORBIDDEN {
                return Err(Error::Forbidden {
                    verb: verb.to_string(),
                    resource: resource.qualified(),
                    namespace: namespace.map(str::to_string),
                    message,
                });
            }
            if retryable {
                return Err(Error::Live(format!(
                    "{verb} {}: gave up after {attempt} attempts: {message}",
                    resource.qualified()
                )));
            }
            return Ok(Err(ApiFailure { status, message }));
        }
    }

    /// Every object of a type in scope, page by page (`limit` + `continue`). An
    /// expired continue token (410) restarts the list from the top, as kubectl does.
    /// With `metadata_only` the server sends PartialObjectMetadata; either way each
    /// item gets the `apiVersion` and `kind` of `resource`, which lists omit.
    pub async fn list(
        &self,
        resource: &Resource,
        scope: &Scope,
        metadata_only: bool,
        field_selector: Option<&str>,
    ) -> Result<Vec<Value>> {
        self.list_fold(
            resource,
            scope,
            metadata_only,
            field_selector,
            |items: &mut Vec<Value>, item| items.push(item),
        )
        .await
    }

    /// [`Kube::list`] folded item by item into `A`, so only one page is held at a
    /// time; a restart after a 410 starts again from `A::default()`.
    pub async fn list_fold<A: Default>(
        &self,
        resource: &Resource,
        scope: &Scope,
        metadata_only: bool,
        field_selector: Option<&str>,
        mut fold: impl FnMut(&mut A, Value),
    ) -> Result<A> {
        let tagged = |acc: &mut A, mut item: Value| {
            if let Some(map) = item.as_object_mut() {
                map.insert("apiVersion".into(), resource.api_version.into());
                map.insert("kind".into(), resource.kind.into());
            }
            fold(acc, item)
        };
        self.fold_pages(resource, scope, metadata_only, field_selector, tagged)
            .await
    }

    /// [`Kube::list_fold`] with each item decoded straight into `T`, which names
    /// only the fields it needs: no `Value` is built for the rest (a pod's
    /// account and phase out of a page of full pods).
    pub async fn list_fold_as<T: DeserializeOwned, A: Default>(
        &self,
        resource: &Resource,
        scope: &Scope,
        fold: impl FnMut(&mut A, T),
    ) -> Result<A> {
        self.fold_pages(resource, scope, false, None, fold).await
    }

    /// Every pod in scope as the re-check reads it, page by page, asked for in
    /// protobuf (a fraction of JSON's cost to the server, which encodes every
    /// pod of a namespace for each batch); a JSON answer is read as JSON.
    pub async fn list_pods_fold<A: Default>(
        &self,
        scope: &Scope,
        fold: impl FnMut(&mut A, wire::Pod),
    ) -> Result<A> {
        let format = Format {
            metadata_only: false,
            field_selector: None,
            accept: Some(wire::ACCEPT_PROTOBUF),
            decode: |body: &[u8]| match wire::envelope(body) {
                Some(raw) => raw.and_then(wire::pod_list),
                None => json_page(body),
            },
        };
        self.fold_pages_in(&PODS, scope, format, fold)
            .await?
            .map_err(|failure| {
                Error::Live(format!("list {}: {}", PODS.qualified(), failure.message))
            })
    }

    async fn fold_pages<T: DeserializeOwned, A: Default>(
        &self,
        resource: &Resource,
        scope: &Scope,
        metadata_only: bool,
        field_selector: Option<&str>,
        fold: impl FnMut(&mut A, T),
    ) -> Result<A> {
        self.fold_pages_or_failure(resource, scope, metadata_only, field_selector, fold)
            .await?
            .map_err(|failure| {
                Error::Live(format!(
                    "list {}: {}",
                    resource.qualified(),
                    failure.message
                ))
            })
    }

    /// Every object of a type the server may not serve (an API of a newer
    /// release, or one behind a feature gate): `None` when it answers 404.
    pub async fn list_if_served(
        &self,
        resource: &Resource,
        scope: &Scope,
    ) -> Result<Option<Vec<Value>>> {
        self.served(resource, scope, false, None).await
    }

    /// The objects named `name` in scope, metadata only, of a type the server may
    /// not serve (a CRD's): `None` when it answers 404.
    pub async fn list_named_if_served(
        &self,
        resource: &Resource,
        scope: &Scope,
        name: &str,
    ) -> Result<Option<Vec<Value>>> {
        let selector = format!("metadata.name={name}");
        self.served(resource, scope, true, Some(&selector)).await
    }

    /// Every page of a list, or `None` when the server answers 404.
    async fn served(
        &self,
        resource: &Resource,
        scope: &Scope,
        metadata: bool,
        selector: Option<&str>,
    ) -> Result<Option<Vec<Value>>> {
        let listed = self
            .fold_pages_or_failure(
                resource,
                scope,
                metadata,
                selector,
                |items: &mut Vec<Value>, item| items.push(item),
            )
            .await?;
        match listed {
            Ok(items) => Ok(Some(items)),
            Err(f) if f.status == StatusCode::NOT_FOUND => Ok(None),
            Err(f) => Err(Error::Live(format!(
                "list {}: {}",
                resource.qualified(),
                f.message
            ))),
        }
    }

    async fn fold_pages_or_failure<T: DeserializeOwned, A: Default>(
        &self,
        resource: &Resource,
        scope: &Scope,
        metadata_only: bool,
        field_selector: Option<&str>,
        fold: impl FnMut(&mut A, T),
    ) -> Result<std::result::Result<A, ApiFailure>> {
        let format = Format {
            metadata_only,
            field_selector,
            accept: None,
            decode: json_page::<T>,
        };
        self.fold_pages_in(resource, scope, format, fold).await
    }

    /// The list loop: pages of `limit` items requested as `format` says, each
    /// decoded and folded, following `continue` tokens.
    async fn fold_pages_in<T, A: Default>(
        &self,
        resource: &Resource,
        scope: &Scope,
        format: Format<'_, impl Fn(&[u8]) -> std::result::Result<Page<T>, String>>,
        mut fold: impl FnMut(&mut A, T),
    ) -> Result<std::result::Result<A, ApiFailure>> {
        let namespace = scope.namespace();
        let request = Request::new(resource.collection_path(namespace));
        let mut acc = A::default();
        let mut continue_token: Option<String> = None;
        let mut restarts = 0;
        loop {
            let mut params = ListParams::default().limit(self.page_size);
            if let Some(fs) = format.field_selector {
                params = params.fields(fs);
            }
            params.continue_token = continue_token.clone();
            let mut http_request = if format.metadata_only {
                request.list_metadata(&params)
            } else {
                request.list(&params)
            }
            .map_err(build_err)?;
            if let Some(accept) = format.accept {
                http_request
                    .headers_mut()
                    .insert(http::header::ACCEPT, http::HeaderValue::from_static(accept));
            }
            match self.send(http_request, "list", resource, namespace).await? {
                Ok(body) => {
                    let (items, token) = (format.decode)(&body).map_err(|e| {
                        Error::Live(format!(
                            "list {}: undecodable response: {e}",
                            resource.plural
                        ))
                    })?;
                    drop(body);
                    for item in items {
                        fold(&mut acc, item);
                    }
                    continue_token = token;
                    if continue_token.is_none() {
                        return Ok(Ok(acc));
                    }
                }
                Err(failure)
                    if failure.status == StatusCode::GONE
                        && continue_token.is_some()
                        && restarts < 3 =>
                {
                    // The snapshot the token pointed at was compacted away: start over.
                    restarts += 1;
                    acc = A::default();
                    continue_token = None;
                }
                Err(failure) => return Ok(Err(failure)),
            }
        }
    }

    /// One object, or None when it does not exist.
    pub async fn get(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>> {
        let request = Request::new(resource.collection_path(Some(namespace)))
            .get(name, &Default::default())
            .map_err(build_err)?;
        match self.send(request, "get", resource, Some(namespace)).await? {
            Ok(body) => serde_json::from_slice(&body).map(Some).map_err(|e| {
                Error::Live(format!(
                    "get {}: undecodable response: {e}",
                    resource.plural
                ))
            }),
            Err(f) if f.status == StatusCode::NOT_FOUND => Ok(None),
            Err(f) => Err(Error::Live(format!(
                "get {} {namespace}/{name}: {}",
                resource.qualified(),
                f.message
            ))),
        }
    }

    /// Creates one namespaced object (an Event). Any refusal is an error naming
    /// the resource and namespace, with the server's message.
    pub async fn create(&self, resource: &Resource, namespace: &str, object: &Value) -> Result<()> {
        let request = http::Request::post(resource.collection_path(Some(namespace)))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(object).expect("JSON values serialize"))
            .map_err(build_err)?;
        match self
            .send(request, "create", resource, Some(namespace))
            .await?
        {
            Ok(_) => Ok(()),
            Err(f) => Err(Error::Live(format!(
                "create {} in namespace {namespace}: {}",
                resource.qualified(),
                f.message
            ))),
        }
    }

    /// Deletes one object only if it still has `uid`. With `dry_run` the server
    /// checks everything (admission, preconditions) and persists nothing.
    pub async fn delete(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        uid: &str,
        dry_run: bool,
    ) -> Result<DeleteOutcome> {
        let mut url = format!("{}/{name}", resource.collection_path(Some(namespace)));
        let mut options = json!({
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": uid},
        });
        if dry_run {
            url.push_str("?dryRun=All");
            options["dryRun"] = json!(["All"]);
        }
        let request = http::Request::delete(url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(&options).expect("JSON values serialize"))
            .map_err(build_err)?;
        match self
            .send(request, "delete", resource, Some(namespace))
            .await?
        {
            Ok(_) => Ok(DeleteOutcome::Deleted),
            Err(f) if f.status == StatusCode::NOT_FOUND => Ok(DeleteOutcome::NotFound),
            Err(f) if f.status == StatusCode::CONFLICT => Ok(DeleteOutcome::Conflict(f.message)),
            Err(f) => Err(Error::Live(format!(
                "delete {} {namespace}/{name}: {}",
                resource.qualified(),
                f.message
            ))),
        }
    }

    /// Server-side apply of `object` as field manager `kubectl-nvcf-worker`,
    /// forced (what the tool applies is the tool's), with strict field
    /// validation: a field the schema lacks is refused, not silently dropped.
    /// Returns the object as stored.
    pub async fn apply(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        object: &Value,
    ) -> Result<Value> {
        let url = format!(
            "{}/{name}?fieldManager={}&force=true&fieldValidation=Strict",
            resource.collection_path(namespace),
            crate::identity::MANAGED_BY
        );
        let request = http::Request::patch(url)
            .header(http::header::CONTENT_TYPE, "application/apply-patch+yaml")
            .body(serde_json::to_vec(object).expect("JSON values serialize"))
            .map_err(build_err)?;
        let at = namespace.map_or(name.to_string(), |ns| format!("{ns}/{name}"));
        let sent = match self.send(request, "patch", resource, namespace).await {
            // An apply that would create the object is authorized as a create too.
            Err(Error::Forbidden {
                resource,
                namespace,
                message,
                ..
            }) if message.contains("cannot create resource") => {
                return Err(Error::Forbidden {
                    verb: "create".into(),
                    resource,
                    namespace,
                    message,
                })
            }
            other => other?,
        };
        match sent {
            Ok(body) => serde_json::from_slice(&body).map_err(|e| {
                Error::Live(format!(
                    "apply {}: undecodable response: {e}",
                    resource.plural
                ))
            }),
            Err(f) if f.status == StatusCode::NOT_FOUND => Err(Error::Live(format!(
                "apply {} {at}: the server does not serve {} {} (are its CRDs installed?): {}",
                resource.qualified(),
                resource.api_version,
                resource.plural,
                f.message
            ))),
            Err(f) => Err(Error::Live(format!(
                "apply {} {at}: {}",
                resource.qualified(),
                f.message
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_rbac_names() {
        assert_eq!(
            ROLE_BINDINGS.collection_path(Some("a")),
            "/apis/rbac.authorization.k8s.io/v1/namespaces/a/rolebindings"
        );
        assert_eq!(PODS.collection_path(None), "/api/v1/pods");
        assert_eq!(
            CLUSTER_ROLES.collection_path(Some("a")),
            "/apis/rbac.authorization.k8s.io/v1/clusterroles"
        );
        assert_eq!(ROLES.qualified(), "roles.rbac.authorization.k8s.io");
        assert_eq!(SERVICE_ACCOUNTS.qualified(), "serviceaccounts");
        assert_eq!(
            Resource::workload("apps/v1", "Deployment"),
            Some(DEPLOYMENTS)
        );
        assert_eq!(Resource::workload("example.com/v1", "Deployment"), None);
        assert_eq!(Resource::workload("v1", "PodTemplate"), Some(POD_TEMPLATES));
    }

    #[test]
    fn the_named_pod_bearing_resources_are_the_one_definitions() {
        // The named constants (audit's list, the executor) and `workloads()` are
        // the pod-bearing kinds of `workload::POD_BEARING`, and nothing else.
        let named = [
            PODS,
            POD_TEMPLATES,
            REPLICATION_CONTROLLERS,
            DEPLOYMENTS,
            STATEFUL_SETS,
            DAEMON_SETS,
            REPLICA_SETS,
            JOBS,
            CRON_JOBS,
        ];
        let defined: std::collections::HashSet<Resource> =
            crate::workload::POD_BEARING.iter().map(bearing).collect();
        assert_eq!(defined, named.into_iter().collect());
        let listed: Vec<Resource> = workloads().collect();
        assert_eq!(listed.len(), crate::workload::POD_BEARING.len() - 1);
        assert!(!listed.contains(&PODS) && listed.contains(&POD_TEMPLATES));
        for r in named {
            assert!(
                crate::workload::pod_spec_path(r.api_version, r.kind).is_some(),
                "{r:?}"
            );
        }
    }
}
