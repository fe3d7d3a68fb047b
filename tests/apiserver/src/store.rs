//! The in-memory object store and the write semantics of the real server:
//! system metadata, resourceVersion bookkeeping, optimistic concurrency,
//! status subresources, finalizers, and a synchronous stand-in for the
//! namespace and garbage-collector controllers.

use std::collections::{BTreeMap, VecDeque};

use base64::Engine as _;
use serde_json::{json, Map, Value};

use crate::resources::{ResourceType, RESOURCES};
use crate::status::{delete_success, ApiError};
use crate::util::{name_suffix, new_uid, now_rfc3339};

/// (index into RESOURCES, namespace or "" when cluster-scoped, name). The
/// BTreeMap order gives lists their namespace/name order for free.
pub(crate) type Key = (usize, String, String);

/// Watch events kept for resuming watches; older ones are compacted away.
const EVENT_HISTORY: usize = 10_000;

/// Namespaces every real cluster starts with.
const SYSTEM_NAMESPACES: &[&str] = &["default", "kube-node-lease", "kube-public", "kube-system"];

/// Who is writing. Tests writing directly may set fields the API would
/// overwrite (uid, status, deletionTimestamp), the way controllers and the
/// kubelet would on a real cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    Api,
    Direct,
}

/// Which part of an object an update may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Main,
    Status,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Propagation {
    Orphan,
    Background,
    Foreground,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct DeleteOptions {
    pub dry_run: bool,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub propagation: Option<Propagation>,
}

/// A change, as a watch reports it.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub rv: u64,
    pub kind: &'static str,
    pub rt: usize,
    pub object: Value,
    /// The object before a modification, so watches with selectors can turn
    /// an object leaving or entering the selection into DELETED/ADDED.
    pub previous: Option<Value>,
}

pub(crate) struct Store {
    objects: BTreeMap<Key, Value>,
    /// Owner uid -> keys of the objects that name it in ownerReferences, so garbage
    /// collection on delete does not scan every object (10 000s in benchmarks).
    dependents: std::collections::HashMap<String, std::collections::BTreeSet<Key>>,
    rv: u64,
    pub events: VecDeque<Event>,
    /// Newest resourceVersion whose event was dropped from `events`.
    pub compacted: u64,
}

fn meta(obj: &Value) -> &Value {
    obj.get("metadata").unwrap_or(&Value::Null)
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    meta(obj).get(field).and_then(Value::as_str).unwrap_or("")
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    let map = obj.as_object_mut().expect("objects are JSON objects");
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    metadata.as_object_mut().expect("made an object above")
}

fn has_finalizers(obj: &Value) -> bool {
    meta(obj)
        .get("finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty())
}

fn owner_uids(obj: &Value) -> Vec<String> {
    meta(obj)
        .get("ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', \
and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is \
'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', \
and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is \
'[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// Name rules per type: namespaces are DNS labels, RBAC objects only need
/// to be valid path segments, everything else here is a DNS subdomain.
fn name_error(rt: &ResourceType, name: &str) -> Option<String> {
    let dns = |allow_dot: bool, max: usize| {
        name.len() <= max
            && name.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (allow_dot && c == '.')
            })
            && name.starts_with(|c: char| c.is_ascii_alphanumeric())
            && name.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    match rt.kind {
        "Namespace" if !dns(false, 63) => Some(LABEL.to_string()),
        "Role" | "RoleBinding" | "ClusterRole" | "ClusterRoleBinding" => {
            (name == "." || name == ".." || name.contains('/') || name.contains('%'))
                .then(|| "may not be '.' or '..' and may not contain '/' or '%'".to_string())
        }
        "Namespace" => None,
        _ if !dns(true, 253) => Some(SUBDOMAIN.to_string()),
        _ => None,
    }
}

/// The status a freshly created object gets before any controller acts.
fn initial_status(rt: &ResourceType) -> Option<Value> {
    match rt.kind {
        _ if !rt.has_status => None,
        "Pod" => Some(json!({"phase": "Pending"})),
        "Namespace" => Some(json!({"phase": "Active"})),
        _ => Some(json!({})),
    }
}

/// Type-specific defaulting and normalisation the real server applies on
/// every write.
fn apply_defaults(rt: &ResourceType, obj: &mut Value) -> Result<(), ApiError> {
    fn object_at<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
        let v = map.entry(key).or_insert_with(|| json!({}));
        if !v.is_object() {
            *v = json!({});
        }
        v.as_object_mut().expect("made an object above")
    }
    let name = meta_str(obj, "name").to_string();
    match rt.kind {
        "Namespace" => {
            object_at(meta_mut(obj), "labels")
                .insert("kubernetes.io/metadata.name".into(), json!(name));
            let spec = object_at(
                obj.as_object_mut().expect("objects are JSON objects"),
                "spec",
            );
            spec.entry("finalizers")
                .or_insert_with(|| json!(["kubernetes"]));
        }
        "Secret" => {
            let map = obj.as_object_mut().expect("objects are JSON objects");
            if map.get("type").is_none_or(Value::is_null) {
                map.insert("type".into(), json!("Opaque"));
            }
            // stringData is write-only: it is folded into base64 `data`.
            if let Some(Value::Object(string_data)) = map.remove("stringData") {
                let data = object_at(map, "data");
                for (k, v) in string_data {
                    let text = v.as_str().ok_or_else(|| {
                        ApiError::bad_request(format!("stringData[{k:?}] must be a string"))
                    })?;
                    data.insert(
                        k,
                        json!(base64::engine::general_purpose::STANDARD.encode(text)),
                    );
                }
            }
        }
        "Pod" => {
            let spec = object_at(
                obj.as_object_mut().expect("objects are JSON objects"),
                "spec",
            );
            if spec.get("serviceAccountName").is_none_or(Value::is_null) {
                spec.insert("serviceAccountName".into(), json!("default"));
            }
        }
        _ => {}
    }
    Ok(())
}

/// Checks (and fills in) apiVersion and kind against the URL's type.
fn check_type(rt: &ResourceType, obj: &mut Value) -> Result<(), ApiError> {
    let Some(map) = obj.as_object_mut() else {
        return Err(ApiError::bad_request(format!(
            "the body of the request must be a JSON object for {}",
            rt.qualified()
        )));
    };
    let expected = rt.api_version();
    match map.get("apiVersion").and_then(Value::as_str) {
        Some(v) if !v.is_empty() && v != expected => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({expected})"
            )))
        }
        _ => {}
    }
    match map.get("kind").and_then(Value::as_str) {
        Some(k) if !k.is_empty() && k != rt.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                rt.kind
            )))
        }
        _ => {}
    }
    map.insert("apiVersion".into(), json!(expected));
    map.insert("kind".into(), json!(rt.kind));
    if map
        .get("metadata")
        .is_some_and(|m| !m.is_object() && !m.is_null())
    {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    Ok(())
}

/// Checks the body's namespace against the URL's and stores the URL's.
fn check_namespace(rt: &ResourceType, obj: &mut Value, ns: Option<&str>) -> Result<(), ApiError> {
    let given = meta_str(obj, "namespace").to_string();
    let meta = meta_mut(obj);
    match (rt.namespaced, ns) {
        (true, Some(ns)) => {
            if !given.is_empty() && given != ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            meta.insert("namespace".into(), json!(ns));
        }
        (true, None) => {
            return Err(ApiError::bad_request(format!(
                "a namespace is required to store {}",
                rt.qualified()
            )))
        }
        (false, _) => {
            meta.remove("namespace");
        }
    }
    Ok(())
}

impl Store {
    /// Stores an object, keeping the dependents index in step.
    fn put(&mut self, key: Key, obj: Value) {
        if let Some(old) = self.objects.get(&key) {
            for uid in owner_uids(old) {
                self.unindex(&uid, &key);
            }
        }
        for uid in owner_uids(&obj) {
            self.dependents.entry(uid).or_default().insert(key.clone());
        }
        self.objects.insert(key, obj);
    }

    /// Removes an object, keeping the dependents index in step.
    fn take(&mut self, key: &Key) -> Option<Value> {
        let obj = self.objects.remove(key)?;
        for uid in owner_uids(&obj) {
            self.unindex(&uid, key);
        }
        Some(obj)
    }

    fn unindex(&mut self, uid: &str, key: &Key) {
        if let Some(keys) = self.dependents.get_mut(uid) {
            keys.remove(key);
            if keys.is_empty() {
                self.dependents.remove(uid);
            }
        }
    }

    pub fn new() -> Self {
        let mut store = Store {
            objects: BTreeMap::new(),
            dependents: Default::default(),
            rv: 0,
            events: VecDeque::new(),
            compacted: 0,
        };
        for ns in SYSTEM_NAMESPACES {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            store
                .create(ResourceType::namespaces(), None, obj, Origin::Direct, false)
                .expect("system namespaces are valid");
        }
        store
    }

    /// The newest resourceVersion handed out.
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn record(&mut self, kind: &'static str, rt: usize, object: Value, previous: Option<Value>) {
        let rv = meta_str(&object, "resourceVersion")
            .parse()
            .unwrap_or(self.rv);
        self.events.push_back(Event {
            rv,
            kind,
            rt,
            object,
            previous,
        });
        while self.events.len() > EVENT_HISTORY {
            if let Some(old) = self.events.pop_front() {
                self.compacted = old.rv;
            }
        }
    }

    fn key(rt: &'static ResourceType, ns: Option<&str>, name: &str) -> Key {
        let ns = if rt.namespaced { ns.unwrap_or("") } else { "" };
        (rt.index(), ns.to_string(), name.to_string())
    }

    pub fn get(&self, rt: &'static ResourceType, ns: Option<&str>, name: &str) -> Option<&Value> {
        self.objects.get(&Self::key(rt, ns, name))
    }

    /// Objects of one type, optionally in one namespace, in namespace/name order.
    pub fn list<'a>(
        &'a self,
        rt: &'static ResourceType,
        ns: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a Key, &'a Value)> + 'a {
        let index = rt.index();
        self.objects
            .range((index, String::new(), String::new())..)
            .take_while(move |(k, _)| k.0 == index)
            .filter(move |(k, _)| ns.is_none_or(|ns| k.1 == ns))
    }

    /// Every stored object, grouped by type.
    pub fn all(&self) -> impl Iterator<Item = &Value> {
        self.objects.values()
    }

    fn namespace_exists(&self, ns: &str) -> bool {
        self.get(ResourceType::namespaces(), None, ns).is_some()
    }

    /// Creates an object as POST does.
    pub fn create(
        &mut self,
        rt: &'static ResourceType,
        ns: Option<&str>,
        mut obj: Value,
        origin: Origin,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        check_type(rt, &mut obj)?;
        check_namespace(rt, &mut obj, ns)?;
        let mut name = meta_str(&obj, "name").to_string();
        if name.is_empty() {
            let prefix = meta_str(&obj, "generateName");
            if prefix.is_empty() {
                return Err(ApiError::invalid(
                    rt.kind,
                    rt.group,
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required",
                ));
            }
            name = format!("{prefix}{}", name_suffix());
        }
        if let Some(why) = name_error(rt, &name) {
            return Err(ApiError::invalid(
                rt.kind,
                rt.group,
                &name,
                "metadata.name",
                &format!("Invalid value: {name:?}: {why}"),
            ));
        }
        let ns = ns.filter(|_| rt.namespaced);
        if let Some(ns) = ns {
            if !self.namespace_exists(ns) {
                if origin == Origin::Api {
                    return Err(ApiError::not_found(ResourceType::namespaces(), ns));
                }
                let namespace =
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
                self.create(ResourceType::namespaces(), None, namespace, origin, dry_run)?;
            }
        }
        let key = Self::key(rt, ns, &name);
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(rt, &name));
        }
        if origin == Origin::Api && !meta_str(&obj, "resourceVersion").is_empty() {
            return Err(ApiError::internal(
                "resourceVersion should not be set on objects to be created",
            ));
        }

        let status = obj.get("status").cloned();
        let m = meta_mut(&mut obj);
        m.insert("name".into(), json!(name));
        let keep_uid = origin == Origin::Direct
            && m.get("uid")
                .and_then(Value::as_str)
                .is_some_and(|u| !u.is_empty());
        if !keep_uid {
            m.insert("uid".into(), json!(new_uid()));
        }
        // Deliberately kept when given (the real server overwrites it), so
        // tests can create objects that look old.
        if m.get("creationTimestamp").is_none_or(Value::is_null) {
            m.insert("creationTimestamp".into(), json!(now_rfc3339()));
        }
        if origin == Origin::Api {
            m.remove("deletionTimestamp");
            m.remove("deletionGracePeriodSeconds");
        }
        if rt.tracks_generation && (origin == Origin::Api || m.get("generation").is_none()) {
            m.insert("generation".into(), json!(1));
        }
        let map = obj.as_object_mut().expect("checked by check_type");
        match initial_status(rt) {
            Some(initial) if origin == Origin::Api || status.is_none() => {
                map.insert("status".into(), initial);
            }
            Some(_) => {}
            None if origin == Origin::Api => {
                map.remove("status");
            }
            None => {}
        }
        apply_defaults(rt, &mut obj)?;
        if dry_run {
            meta_mut(&mut obj).remove("resourceVersion");
            return Ok(obj);
        }
        let rv = self.next_rv();
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        self.put(key, obj.clone());
        self.record("ADDED", rt.index(), obj.clone(), None);
        Ok(obj)
    }

    /// Replaces an object as PUT does (on the resource or its `/status`).
    #[allow(clippy::too_many_arguments)]
    pub fn update(
        &mut self,
        rt: &'static ResourceType,
        ns: Option<&str>,
        name: &str,
        mut obj: Value,
        part: Part,
        origin: Origin,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        check_type(rt, &mut obj)?;
        let given = meta_str(&obj, "name").to_string();
        if given.is_empty() {
            meta_mut(&mut obj).insert("name".into(), json!(name));
        } else if given != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({given}) does not match the name on the URL ({name})"
            )));
        }
        check_namespace(rt, &mut obj, ns)?;
        let key = Self::key(rt, ns, name);
        let old = self
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(rt, name))?;
        let old_rv = meta_str(&old, "resourceVersion").to_string();
        let want_rv = meta_str(&obj, "resourceVersion");
        if !want_rv.is_empty() && want_rv != old_rv {
            return Err(ApiError::stale(rt, name));
        }

        let mut new = match part {
            Part::Status => {
                let mut new = old.clone();
                let map = new.as_object_mut().expect("stored objects are objects");
                match obj.get("status") {
                    Some(status) => map.insert("status".into(), status.clone()),
                    None => map.remove("status"),
                };
                new
            }
            Part::Main => {
                // The API keeps status for the subresource; direct writes
                // keep it only when they do not bring their own.
                if rt.has_status && (origin == Origin::Api || obj.get("status").is_none()) {
                    let map = obj.as_object_mut().expect("checked by check_type");
                    match old.get("status") {
                        Some(status) => map.insert("status".into(), status.clone()),
                        None => map.remove("status"),
                    };
                }
                obj
            }
        };
        // System metadata is immutable through the API; direct writes may
        // set what a controller would.
        let system = [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ];
        let old_meta = meta(&old).as_object().cloned().unwrap_or_default();
        let m = meta_mut(&mut new);
        for field in system {
            let keep_given = origin == Origin::Direct && m.get(field).is_some_and(|v| !v.is_null());
            if keep_given {
                continue;
            }
            match old_meta.get(field) {
                Some(v) => m.insert(field.into(), v.clone()),
                None => m.remove(field),
            };
        }
        m.insert("resourceVersion".into(), json!(old_rv));
        apply_defaults(rt, &mut new)?;
        if rt.tracks_generation && new.get("spec") != old.get("spec") {
            let generation = meta(&old)
                .get("generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            meta_mut(&mut new).insert("generation".into(), json!(generation + 1));
        }
        // A no-op write keeps its resourceVersion and emits no event.
        if new == old || dry_run {
            return Ok(new);
        }
        let rv = self.next_rv();
        meta_mut(&mut new).insert("resourceVersion".into(), json!(rv.to_string()));
        if meta(&new)
            .get("deletionTimestamp")
            .is_some_and(|t| !t.is_null())
            && !has_finalizers(&new)
        {
            // The last finalizer is gone: the pending deletion completes.
            self.take(&key);
            self.record("DELETED", rt.index(), new.clone(), None);
            self.collect_dependents(&new, Propagation::Background);
            return Ok(new);
        }
        self.put(key, new.clone());
        self.record("MODIFIED", rt.index(), new.clone(), Some(old));
        Ok(new)
    }

    /// Deletes as DELETE does and returns the response body: the deleted
    /// object for pods and namespaces (like the real server), the object
    /// when finalizers hold the deletion, otherwise a Success `Status`.
    pub fn delete(
        &mut self,
        rt: &'static ResourceType,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let key = Self::key(rt, ns, name);
        let obj = self
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(rt, name))?;
        let uid = meta_str(&obj, "uid").to_string();
        if let Some(want) = opts.uid.as_deref().filter(|u| *u != uid) {
            return Err(ApiError::conflict(
                rt,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"
                ),
            ));
        }
        let rv = meta_str(&obj, "resourceVersion");
        if let Some(want) = opts.resource_version.as_deref().filter(|v| *v != rv) {
            return Err(ApiError::conflict(
                rt,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {rv}"
                ),
            ));
        }
        if has_finalizers(&obj) {
            return Ok(if opts.dry_run {
                let mut obj = obj;
                meta_mut(&mut obj)
                    .entry("deletionTimestamp")
                    .or_insert_with(|| json!(now_rfc3339()));
                obj
            } else {
                self.mark_deleting(&key)
            });
        }
        let mut response = obj.clone();
        if !opts.dry_run {
            let propagation = opts.propagation.unwrap_or(Propagation::Background);
            if let Some(removed) = self.remove_key(&key, propagation) {
                response = removed;
            }
        }
        Ok(match rt.kind {
            "Pod" => response,
            "Namespace" => {
                meta_mut(&mut response).insert("deletionTimestamp".into(), json!(now_rfc3339()));
                response["status"] = json!({"phase": "Terminating"});
                response
            }
            _ => delete_success(rt, name, &uid),
        })
    }

    /// Starts a finalizer-held deletion: the object stays, marked.
    fn mark_deleting(&mut self, key: &Key) -> Value {
        let old = self.objects[key].clone();
        if meta(&old)
            .get("deletionTimestamp")
            .is_some_and(|t| !t.is_null())
        {
            return old;
        }
        let mut new = old.clone();
        let rv = self.next_rv();
        let m = meta_mut(&mut new);
        m.insert("deletionTimestamp".into(), json!(now_rfc3339()));
        m.insert("deletionGracePeriodSeconds".into(), json!(0));
        m.insert("resourceVersion".into(), json!(rv.to_string()));
        self.put(key.clone(), new.clone());
        self.record("MODIFIED", key.0, new.clone(), Some(old));
        new
    }

    /// Removes an object (emitting DELETED), then does what the namespace
    /// controller and garbage collector would do next, synchronously.
    fn remove_key(&mut self, key: &Key, propagation: Propagation) -> Option<Value> {
        let mut obj = self.take(key)?;
        let rv = self.next_rv();
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        self.record("DELETED", key.0, obj.clone(), None);
        if RESOURCES[key.0].kind == "Namespace" {
            let contents: Vec<Key> = self
                .objects
                .keys()
                .filter(|k| RESOURCES[k.0].namespaced && k.1 == key.2)
                .cloned()
                .collect();
            for k in contents {
                self.remove_key(&k, Propagation::Background);
            }
        }
        self.collect_dependents(&obj, propagation);
        Some(obj)
    }

    /// Garbage collection of an owner's dependents: orphaning strips the
    /// owner reference; otherwise dependents with no remaining owner go.
    fn collect_dependents(&mut self, owner: &Value, propagation: Propagation) {
        let uid = meta_str(owner, "uid").to_string();
        let dependents: Vec<Key> = self
            .dependents
            .get(&uid)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default();
        for key in dependents {
            if propagation == Propagation::Orphan {
                let old = self.objects[&key].clone();
                let mut new = old.clone();
                let m = meta_mut(&mut new);
                if let Some(Value::Array(refs)) = m.get_mut("ownerReferences") {
                    refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(&uid));
                    if refs.is_empty() {
                        m.remove("ownerReferences");
                    }
                }
                let rv = self.next_rv();
                meta_mut(&mut new).insert("resourceVersion".into(), json!(rv.to_string()));
                self.put(key.clone(), new.clone());
                self.record("MODIFIED", key.0, new, Some(old));
                continue;
            }
            let alive =
                |store: &Self, u: &String| store.objects.values().any(|o| meta_str(o, "uid") == u);
            let owners = owner_uids(&self.objects[&key]);
            if owners.iter().any(|u| alive(self, u)) {
                continue;
            }
            if has_finalizers(&self.objects[&key]) {
                self.mark_deleting(&key);
            } else {
                self.remove_key(&key, Propagation::Background);
            }
        }
    }

    /// Removes an object without preconditions, finalizers or cascading:
    /// a test's backdoor.
    pub fn remove(
        &mut self,
        rt: &'static ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let key = Self::key(rt, ns, name);
        let mut obj = self.take(&key)?;
        let rv = self.next_rv();
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        self.record("DELETED", key.0, obj.clone(), None);
        Some(obj)
    }
}
