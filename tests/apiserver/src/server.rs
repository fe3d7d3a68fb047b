//! The HTTP layer: routing, content negotiation, fault injection, request
//! logging and the verb handlers on top of the store.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

use base64::Engine as _;
use serde_json::{json, Value};

use crate::http::{Connections, HttpRequest};
use crate::resources::{self, ResourceType};
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::{DeleteOptions, Origin, Part, Propagation, Store};
use crate::util::{parse_query, percent_decode_path};
use crate::watch::Watch;
use crate::{Fault, FaultKind, Request, FORBIDDEN_USER};

/// State shared by the accept loop, request threads and the test handle.
pub(crate) struct Shared {
    pub store: Mutex<Store>,
    /// Signalled after every store write; watches wait on it.
    pub changed: Condvar,
    pub requests: Mutex<Vec<Request>>,
    pub faults: Mutex<Vec<Fault>>,
    pub connections: Connections,
    pub aggregated_discovery: AtomicBool,
    pub stopping: AtomicBool,
    /// `127.0.0.1:<port>`, reported in `/api`.
    pub address: String,
}

/// Locks a mutex, shrugging off poisoning: a panicking test thread must
/// not take the whole server down with it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// Runs a store mutation and wakes the watches.
    pub fn write<T>(&self, f: impl FnOnce(&mut Store) -> T) -> T {
        let out = f(&mut lock(&self.store));
        self.changed.notify_all();
        out
    }
}

/// What an incoming request asked for, decoded once.
pub(crate) struct Ctx {
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub accept: Option<String>,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

impl Ctx {
    pub(crate) fn param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    pub(crate) fn flag(&self, key: &str) -> bool {
        matches!(self.param(key), Some("true" | "1"))
    }

    /// The body as JSON, or a 400 like the real decoder's. Protobuf bodies
    /// (kubectl's typed clients, e.g. `kubectl create namespace`) get a 415:
    /// only JSON is implemented.
    fn json_body(&self) -> Result<Value, ApiError> {
        let media = self.media_type();
        if matches!(self.method.as_str(), "POST" | "PUT")
            && !media.is_empty()
            && media != "application/json"
        {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format ({media}) - accepted media types include: application/json"
                ),
            ));
        }
        if self.body.is_empty() {
            return Err(ApiError::bad_request("the request body is empty"));
        }
        serde_json::from_slice(&self.body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })
    }

    /// The Content-Type without parameters, lower-cased.
    pub(crate) fn media_type(&self) -> String {
        let ct = self.content_type.as_deref().unwrap_or("");
        ct.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    }

    fn dry_run(&self) -> Result<bool, ApiError> {
        match self.param("dryRun") {
            None => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: {other:?}: supported values: \"All\""
            ))),
        }
    }
}

/// A response to send.
pub(crate) enum Reply {
    Json {
        code: u16,
        body: Value,
        content_type: &'static str,
        retry_after: Option<u64>,
    },
    Watch(Watch),
}

fn ok(code: u16, body: Value) -> Reply {
    Reply::Json {
        code,
        body,
        content_type: "application/json",
        retry_after: None,
    }
}

impl From<ApiError> for Reply {
    fn from(e: ApiError) -> Self {
        Reply::Json {
            code: e.code,
            body: e.to_status(),
            content_type: "application/json",
            retry_after: e.retry_after_secs,
        }
    }
}

/// A resource URL, resolved against the served types.
pub(crate) struct Target {
    pub rt: &'static ResourceType,
    pub ns: Option<String>,
    pub name: Option<String>,
    pub status: bool,
}

enum Route {
    Root,
    Version,
    CoreVersions,
    Groups,
    Group(String),
    Resources(String, String),
    OpenApiIndex,
    OpenApi(String, String),
    Resource(Target),
}

fn route(path: &str) -> Result<Route, ApiError> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let gv_exists = |g: &str, v: &str| resources::group_exists(g, Some(v));
    Ok(match segs.as_slice() {
        [] => Route::Root,
        ["version"] => Route::Version,
        ["api"] => Route::CoreVersions,
        ["apis"] => Route::Groups,
        ["api", v] if gv_exists("", v) => Route::Resources(String::new(), v.to_string()),
        ["apis", g] if resources::group_exists(g, None) => Route::Group(g.to_string()),
        ["apis", g, v] if gv_exists(g, v) => Route::Resources(g.to_string(), v.to_string()),
        ["openapi", "v3"] => Route::OpenApiIndex,
        ["openapi", "v3", "api", v] => Route::OpenApi(String::new(), v.to_string()),
        ["openapi", "v3", "apis", g, v] => Route::OpenApi(g.to_string(), v.to_string()),
        ["api", v, rest @ ..] => Route::Resource(target("", v, rest)?),
        ["apis", g, v, rest @ ..] => Route::Resource(target(g, v, rest)?),
        _ => return Err(ApiError::no_route()),
    })
}

/// Resolves `[namespaces/<ns>/]<resource>[/<name>[/status]]`. A namespace
/// path is only taken as such when a namespaced resource follows, since
/// `namespaces/<name>/status` is the namespace's own subresource.
fn target(group: &str, version: &str, rest: &[&str]) -> Result<Target, ApiError> {
    let (ns, rest) = match rest {
        ["namespaces", ns, r, tail @ ..] if resources::by_path(group, version, r).is_some() => {
            let mut rest = vec![*r];
            rest.extend_from_slice(tail);
            (Some(ns.to_string()), rest)
        }
        _ => (None, rest.to_vec()),
    };
    let (resource, name, status) = match rest.as_slice() {
        [r] => (*r, None, false),
        [r, n] => (*r, Some(n.to_string()), false),
        [r, n, "status"] => (*r, Some(n.to_string()), true),
        _ => return Err(ApiError::no_route()),
    };
    let rt = resources::by_path(group, version, resource).ok_or_else(ApiError::no_route)?;
    let misplaced = (ns.is_some() && !rt.namespaced)
        || (ns.is_none() && rt.namespaced && name.is_some())
        || (status && !rt.has_status);
    if misplaced {
        return Err(ApiError::no_route());
    }
    Ok(Target {
        rt,
        ns,
        name,
        status,
    })
}

/// The authorization verb of a request, for Forbidden faults.
fn verb(method: &str, target: &Target, watch: bool) -> &'static str {
    match (method, target.name.is_some()) {
        ("GET", _) if watch => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

/// How to render objects, chosen from the Accept header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Output {
    Full,
    /// `meta.k8s.io/<version>` PartialObjectMetadata(List).
    Metadata(&'static str),
}

/// Picks the first Accept media range this server can produce, as the real
/// server does: plain JSON, or PartialObjectMetadata(List) in meta.k8s.io
/// v1/v1beta1. Table and protobuf ranges are skipped, so clients listing
/// them first (kubectl) fall through to JSON.
pub(crate) fn negotiate(accept: Option<&str>, list: bool) -> Result<Output, ApiError> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(Output::Full);
    };
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        if !matches!(media.as_str(), "application/json" | "application/*" | "*/*") {
            continue;
        }
        let params: Vec<(&str, &str)> = parts.filter_map(|p| p.split_once('=')).collect();
        let param = |k: &str| params.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
        let Some(as_kind) = param("as") else {
            return Ok(Output::Full);
        };
        let wanted = if list {
            "PartialObjectMetadataList"
        } else {
            "PartialObjectMetadata"
        };
        if as_kind == wanted && param("g") == Some("meta.k8s.io") {
            match param("v") {
                Some("v1") => return Ok(Output::Metadata("v1")),
                Some("v1beta1") => return Ok(Output::Metadata("v1beta1")),
                _ => {}
            }
        }
    }
    Err(ApiError::not_acceptable())
}

/// Whether an Accept header asks for aggregated discovery, and which version.
fn wants_aggregated(accept: Option<&str>) -> Option<&'static str> {
    let accept = accept?;
    for range in accept.split(',') {
        let params: Vec<&str> = range.split(';').map(str::trim).collect();
        if !params.contains(&"as=APIGroupDiscoveryList")
            || !params.contains(&"g=apidiscovery.k8s.io")
        {
            continue;
        }
        if params.contains(&"v=v2") {
            return Some("v2");
        }
        if params.contains(&"v=v2beta1") {
            return Some("v2beta1");
        }
    }
    None
}

pub(crate) fn render(obj: &Value, output: Output) -> Value {
    match output {
        Output::Full => obj.clone(),
        Output::Metadata(v) => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": format!("meta.k8s.io/{v}"),
            "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
        }),
    }
}

/// Items of a typed list carry no apiVersion/kind on a real server; only the
/// list does. Clients that rely on per-item type fields fail here as there.
fn render_item(obj: &Value, output: Output) -> Value {
    let mut item = render(obj, output);
    if output == Output::Full {
        if let Some(map) = item.as_object_mut() {
            map.remove("apiVersion");
            map.remove("kind");
        }
    }
    item
}

/// The opaque continue token: base64 of the same JSON the real server uses,
/// `{"v":"meta.k8s.io/v1","rv":N,"start":"<ns>/<name>\u0000"}`.
struct ContinueToken {
    rv: u64,
    ns: String,
    name: String,
}

impl ContinueToken {
    fn encode(&self) -> String {
        let start = if self.ns.is_empty() {
            format!("{}\u{0}", self.name)
        } else {
            format!("{}/{}\u{0}", self.ns, self.name)
        };
        let raw = json!({"v": "meta.k8s.io/v1", "rv": self.rv, "start": start});
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw.to_string())
    }

    fn decode(token: &str) -> Result<Self, ApiError> {
        let invalid =
            |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token.trim_end_matches('='))
            .map_err(|_| invalid("illegal base64 data"))?;
        let v: Value = serde_json::from_slice(&raw).map_err(|_| invalid("malformed token"))?;
        if v["v"] != "meta.k8s.io/v1" {
            return Err(invalid("server does not recognize this encoded key"));
        }
        let rv = v["rv"].as_u64().filter(|rv| *rv > 0).ok_or_else(|| {
            invalid("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
        })?;
        let start = v["start"]
            .as_str()
            .ok_or_else(|| invalid("malformed token"))?;
        let start = start.strip_suffix('\u{0}').unwrap_or(start);
        let (ns, name) = start.split_once('/').unwrap_or(("", start));
        Ok(ContinueToken {
            rv,
            ns: ns.to_string(),
            name: name.to_string(),
        })
    }
}

/// Handles one request: logs it, applies faults, and answers it.
pub(crate) fn handle(shared: &Shared, request: &HttpRequest) -> Reply {
    let (path, query) = request
        .target
        .split_once('?')
        .unwrap_or((&request.target, ""));
    let ctx = Ctx {
        method: request.method.clone(),
        path: percent_decode_path(path),
        query: parse_query(query),
        accept: request.header("Accept").map(str::to_string),
        content_type: request.header("Content-Type").map(str::to_string),
        body: request.body.clone(),
    };
    lock(&shared.requests).push(Request {
        method: ctx.method.clone(),
        path: ctx.path.clone(),
        query: ctx.query.clone(),
        accept: ctx.accept.clone(),
        content_type: ctx.content_type.clone(),
        body: serde_json::from_slice(&ctx.body).ok(),
    });
    dispatch(shared, &ctx)
}

/// Takes the first fault matching the request, counting it down.
fn take_fault(shared: &Shared, ctx: &Ctx) -> Option<FaultKind> {
    let mut faults = lock(&shared.faults);
    let continuing = ctx.method == "GET" && ctx.param("continue").is_some();
    let pos = faults.iter().position(|f| {
        f.times > 0
            && f.method
                .as_ref()
                .is_none_or(|m| m.eq_ignore_ascii_case(&ctx.method))
            && ctx.path.contains(&f.path_contains)
            && (f.kind != FaultKind::ExpireContinue || continuing)
    })?;
    let fault = &mut faults[pos];
    fault.times -= 1;
    let kind = fault.kind.clone();
    if fault.times == 0 {
        faults.remove(pos);
    }
    Some(kind)
}

fn dispatch(shared: &Shared, ctx: &Ctx) -> Reply {
    let mut expire_continue = false;
    match take_fault(shared, ctx) {
        Some(FaultKind::Status(code)) => return ApiError::for_code(code).into(),
        Some(FaultKind::TooManyRequests { retry_after_secs }) => {
            return ApiError::too_many_requests(retry_after_secs).into()
        }
        Some(FaultKind::Delay(d)) => std::thread::sleep(d),
        Some(FaultKind::ExpireContinue) => expire_continue = true,
        Some(FaultKind::Forbidden) => return forbidden(ctx).into(),
        None => {}
    }
    let route = match route(&ctx.path) {
        Ok(r) => r,
        Err(e) => return e.into(),
    };
    if !matches!(route, Route::Resource(_)) && ctx.method != "GET" {
        return ApiError::method_not_allowed().into();
    }
    let aggregated = || {
        shared
            .aggregated_discovery
            .load(Ordering::Relaxed)
            .then(|| wants_aggregated(ctx.accept.as_deref()))
            .flatten()
    };
    let discovery = |core: bool, legacy: Value| match aggregated() {
        Some(v) => Reply::Json {
            code: 200,
            body: resources::aggregated_discovery(core, v),
            content_type: if v == "v2" {
                resources::AGGREGATED_CONTENT_TYPE
            } else {
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
            },
            retry_after: None,
        },
        None => ok(200, legacy),
    };
    match route {
        Route::Root => ok(200, root_paths()),
        Route::Version => ok(200, version_info()),
        Route::CoreVersions => discovery(true, resources::api_versions(&shared.address)),
        Route::Groups => discovery(false, resources::api_group_list()),
        Route::Group(g) => ok(200, resources::api_group(&g)),
        Route::Resources(g, v) => ok(200, resources::api_resource_list(&g, &v)),
        Route::OpenApiIndex => ok(200, resources::openapi_v3_index()),
        Route::OpenApi(g, v) => match resources::openapi_v3_document(&g, &v) {
            Some(doc) => ok(200, doc),
            None => ApiError::no_route().into(),
        },
        Route::Resource(t) => {
            resource(shared, ctx, &t, expire_continue).unwrap_or_else(Reply::from)
        }
    }
}

fn forbidden(ctx: &Ctx) -> ApiError {
    match route(&ctx.path) {
        Ok(Route::Resource(t)) => ApiError::forbidden(
            FORBIDDEN_USER,
            verb(&ctx.method, &t, ctx.flag("watch")),
            t.rt.group,
            t.rt.resource,
            t.ns.as_deref(),
            t.name.as_deref(),
        ),
        _ => ApiError::new(
            403,
            "Forbidden",
            format!(
                "forbidden: User {FORBIDDEN_USER:?} cannot {} path {:?}",
                ctx.method.to_ascii_lowercase(),
                ctx.path
            ),
        ),
    }
}

fn root_paths() -> Value {
    let mut paths = vec!["/api".to_string(), "/api/v1".into(), "/apis".into()];
    for g in resources::GROUPS {
        paths.push(format!("/apis/{g}"));
        paths.push(format!("/apis/{g}/v1"));
    }
    paths.extend(["/openapi/v3".into(), "/version".into()]);
    json!({"paths": paths})
}

fn version_info() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "emulationMajor": "1",
        "emulationMinor": "33",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "32",
        "gitVersion": "v1.33.0",
        "gitCommit": "60a317eadfcb839692a5551a1b8e6a4a4a6b14a5",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T13:03:43Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

fn resource(
    shared: &Shared,
    ctx: &Ctx,
    t: &Target,
    expire_continue: bool,
) -> Result<Reply, ApiError> {
    let ns = t.ns.as_deref();
    let part = if t.status { Part::Status } else { Part::Main };
    match (ctx.method.as_str(), t.name.as_deref()) {
        ("GET", None) if ctx.flag("watch") => Ok(Reply::Watch(Watch::new(ctx, t)?)),
        ("GET", None) => list(shared, ctx, t, expire_continue),
        ("GET", Some(name)) => {
            let output = negotiate(ctx.accept.as_deref(), false)?;
            let store = lock(&shared.store);
            let obj = store
                .get(t.rt, ns, name)
                .ok_or_else(|| ApiError::not_found(t.rt, name))?;
            Ok(ok(200, render(obj, output)))
        }
        ("POST", None) if ns.is_some() || !t.rt.namespaced => {
            let (body, dry_run) = (ctx.json_body()?, ctx.dry_run()?);
            let created = shared.write(|s| s.create(t.rt, ns, body, Origin::Api, dry_run))?;
            Ok(ok(201, created))
        }
        ("PUT", Some(name)) => {
            let (body, dry_run) = (ctx.json_body()?, ctx.dry_run()?);
            let updated =
                shared.write(|s| s.update(t.rt, ns, name, body, part, Origin::Api, dry_run))?;
            Ok(ok(200, updated))
        }
        ("PATCH", Some(name)) => patch(shared, ctx, t, name),
        ("DELETE", Some(name)) if !t.status => {
            let opts = delete_options(ctx)?;
            Ok(ok(200, shared.write(|s| s.delete(t.rt, ns, name, &opts))?))
        }
        ("DELETE", None) => delete_collection(shared, ctx, t),
        _ => Err(ApiError::method_not_allowed()),
    }
}

pub(crate) fn selectors(
    ctx: &Ctx,
    rt: &ResourceType,
) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(ctx.param("labelSelector").unwrap_or(""))
        .map_err(ApiError::bad_request)?;
    let fields = FieldSelector::parse(ctx.param("fieldSelector").unwrap_or(""), rt)
        .map_err(ApiError::bad_request)?;
    Ok((labels, fields))
}

fn list(shared: &Shared, ctx: &Ctx, t: &Target, expire_continue: bool) -> Result<Reply, ApiError> {
    let output = negotiate(ctx.accept.as_deref(), true)?;
    let (labels, fields) = selectors(ctx, t.rt)?;
    let limit: usize = match ctx.param("limit") {
        None => 0,
        Some(l) => l.parse().map_err(|_| {
            ApiError::bad_request(format!("limit: Invalid value: {l:?}: must be an integer"))
        })?,
    };
    let token = ctx
        .param("continue")
        .map(ContinueToken::decode)
        .transpose()?;
    if token.is_some() && ctx.param("resourceVersion").is_some_and(|rv| rv != "0") {
        return Err(ApiError::bad_request(
            "specifying resource version is not allowed when using continue",
        ));
    }
    let store = lock(&shared.store);
    let current = store.resource_version();
    if let (true, Some(t)) = (expire_continue, &token) {
        let fresh = ContinueToken {
            rv: current,
            ns: t.ns.clone(),
            name: t.name.clone(),
        };
        return Err(ApiError::expired_continue(Some(fresh.encode())));
    }
    let after = token.as_ref().map(|t| (t.ns.as_str(), t.name.as_str()));
    let matching: Vec<(&(usize, String, String), &Value)> = store
        .list(t.rt, t.ns.as_deref())
        .filter(|(k, _)| after.is_none_or(|a| (k.1.as_str(), k.2.as_str()) > a))
        .filter(|(_, o)| labels.matches_object(o) && fields.matches(o))
        .collect();
    let snapshot = token.as_ref().map_or(current, |t| t.rv);
    let mut metadata = json!({"resourceVersion": snapshot.to_string()});
    let page = if limit > 0 && matching.len() > limit {
        let last = matching[limit - 1].0;
        let next = ContinueToken {
            rv: snapshot,
            ns: last.1.clone(),
            name: last.2.clone(),
        };
        metadata["continue"] = json!(next.encode());
        // The real server only knows the count when no selector filters.
        if labels.is_empty() && fields.is_empty() {
            metadata["remainingItemCount"] = json!(matching.len() - limit);
        }
        &matching[..limit]
    } else {
        &matching[..]
    };
    let items: Vec<Value> = page.iter().map(|(_, o)| render_item(o, output)).collect();
    let (kind, api_version) = match output {
        Output::Full => (format!("{}List", t.rt.kind), t.rt.api_version()),
        Output::Metadata(v) => (
            "PartialObjectMetadataList".to_string(),
            format!("meta.k8s.io/{v}"),
        ),
    };
    Ok(ok(
        200,
        json!({"kind": kind, "apiVersion": api_version, "metadata": metadata, "items": items}),
    ))
}

fn patch(shared: &Shared, ctx: &Ctx, t: &Target, name: &str) -> Result<Reply, ApiError> {
    let media = ctx.media_type();
    const PATCH_TYPES: &[&str] = &[
        "application/apply-patch+yaml",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/json-patch+json",
    ];
    if !PATCH_TYPES.contains(&media.as_str()) {
        return Err(ApiError::unsupported_media_type(&media));
    }
    let body = ctx.json_body()?;
    let dry_run = ctx.dry_run()?;
    let ns = t.ns.as_deref();
    let part = if t.status { Part::Status } else { Part::Main };
    let mut store = lock(&shared.store);
    let existing = store.get(t.rt, ns, name).cloned();
    let patched = match media.as_str() {
        "application/apply-patch+yaml" => {
            if ctx.param("fieldManager").is_none() {
                return Err(ApiError::invalid(
                    "PatchOptions",
                    "meta.k8s.io",
                    "",
                    "fieldManager",
                    "Required value: is required for apply patch",
                ));
            }
            // Server-side apply, approximated: create when missing, else a
            // merge of the applied configuration (no managedFields).
            let Some(mut existing) = existing else {
                let mut obj = body;
                if obj.is_object() && obj.pointer("/metadata/name").is_none() {
                    crate::patch::merge(&mut obj, &json!({"metadata": {"name": name}}));
                }
                drop(store);
                let created = shared.write(|s| s.create(t.rt, ns, obj, Origin::Api, dry_run))?;
                return Ok(ok(201, created));
            };
            crate::patch::strategic(&mut existing, &body);
            existing
        }
        _ => {
            let mut existing = existing.ok_or_else(|| ApiError::not_found(t.rt, name))?;
            match media.as_str() {
                "application/merge-patch+json" => crate::patch::merge(&mut existing, &body),
                "application/strategic-merge-patch+json" => {
                    crate::patch::strategic(&mut existing, &body)
                }
                _ => {
                    existing = crate::patch::json_patch(&existing, &body).map_err(|e| {
                        ApiError::new(
                            422,
                            "Invalid",
                            format!(
                            "the server rejected our request due to an error in our request: {e}"
                        ),
                        )
                    })?
                }
            }
            existing
        }
    };
    let updated = store.update(t.rt, ns, name, patched, part, Origin::Api, dry_run);
    drop(store);
    shared.changed.notify_all();
    Ok(ok(200, updated?))
}

/// DeleteOptions from the body (kube-rs, kubectl) or the query string.
fn delete_options(ctx: &Ctx) -> Result<DeleteOptions, ApiError> {
    let body = if ctx.body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        ctx.json_body()?
    };
    if !body.is_object() {
        return Err(ApiError::bad_request("DeleteOptions must be a JSON object"));
    }
    let mut dry_run = ctx.dry_run()?;
    if let Some(values) = body.get("dryRun").and_then(Value::as_array) {
        for v in values {
            match v.as_str() {
                Some("All") => dry_run = true,
                other => {
                    return Err(ApiError::bad_request(format!(
                        "dryRun: Unsupported value: {}: supported values: \"All\"",
                        other.map_or("null".to_string(), |s| format!("{s:?}"))
                    )))
                }
            }
        }
    }
    let policy = body
        .get("propagationPolicy")
        .and_then(Value::as_str)
        .or_else(|| ctx.param("propagationPolicy"));
    let mut propagation = match policy {
        None => None,
        Some("Orphan") => Some(Propagation::Orphan),
        Some("Background") => Some(Propagation::Background),
        Some("Foreground") => Some(Propagation::Foreground),
        Some(other) => {
            return Err(ApiError::invalid(
                "DeleteOptions",
                "meta.k8s.io",
                "",
                "propagationPolicy",
                &format!(
                    "Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                ),
            ))
        }
    };
    if body.get("orphanDependents") == Some(&json!(true)) {
        propagation.get_or_insert(Propagation::Orphan);
    }
    let precondition = |field: &str| {
        body.pointer(&format!("/preconditions/{field}"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Ok(DeleteOptions {
        dry_run,
        uid: precondition("uid"),
        resource_version: precondition("resourceVersion"),
        propagation,
    })
}

fn delete_collection(shared: &Shared, ctx: &Ctx, t: &Target) -> Result<Reply, ApiError> {
    let (labels, fields) = selectors(ctx, t.rt)?;
    let opts = delete_options(ctx)?;
    let items = shared.write(|store| -> Result<Vec<Value>, ApiError> {
        let names: Vec<(String, String, Value)> = store
            .list(t.rt, t.ns.as_deref())
            .filter(|(_, o)| labels.matches_object(o) && fields.matches(o))
            .map(|(k, o)| (k.1.clone(), k.2.clone(), o.clone()))
            .collect();
        let mut items = Vec::new();
        for (ns, name, obj) in names {
            let ns = (!ns.is_empty()).then_some(ns.as_str());
            let response = store.delete(t.rt, ns, &name, &opts)?;
            let deleted = if response["kind"] == "Status" {
                obj
            } else {
                response
            };
            items.push(render_item(&deleted, Output::Full));
        }
        Ok(items)
    })?;
    let rv = lock(&shared.store).resource_version();
    Ok(ok(
        200,
        json!({
            "kind": format!("{}List", t.rt.kind),
            "apiVersion": t.rt.api_version(),
            "metadata": {"resourceVersion": rv.to_string()},
            "items": items,
        }),
    ))
}
