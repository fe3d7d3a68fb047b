//! The served resource types and the discovery documents derived from them.
//!
//! Discovery is generated from one table so that `/api/v1`, `/apis/<g>/<v>`,
//! aggregated discovery and routing can never disagree about what exists.

use serde_json::{json, Value};

/// A resource type the server stores and serves.
#[derive(Debug, PartialEq, Eq)]
pub struct ResourceType {
    /// API group, empty for core/v1.
    pub group: &'static str,
    pub version: &'static str,
    /// Plural name used in URLs, e.g. `serviceaccounts`.
    pub resource: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    /// Whether the type has a `/status` subresource: then the main resource
    /// ignores status writes and clients must use the subresource, as on a
    /// real server.
    pub has_status: bool,
    /// Whether `metadata.generation` tracks spec changes.
    pub tracks_generation: bool,
}

/// Verbs every resource supports.
pub const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

const ALL: &[&str] = &["all"];

/// One row of the resource table; positional like the table it builds.
#[allow(clippy::too_many_arguments)]
const fn rt(
    group: &'static str,
    resource: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    workload: bool,
    has_status: bool,
) -> ResourceType {
    ResourceType {
        group,
        version: "v1",
        resource,
        singular,
        kind,
        namespaced,
        short_names,
        categories: if workload { ALL } else { &[] },
        has_status,
        // Objects that controllers reconcile (apps, batch) count spec changes.
        tracks_generation: workload && !group.is_empty(),
    }
}

/// Every served type, grouped by group/version in discovery order.
/// Columns: group, plural, singular, kind, namespaced, short names,
/// workload (category `all`), has a status subresource.
#[rustfmt::skip]
pub static RESOURCES: &[ResourceType] = &[
    rt("", "configmaps", "configmap", "ConfigMap", true, &["cm"], false, false),
    rt("", "namespaces", "namespace", "Namespace", false, &["ns"], false, true),
    rt("", "pods", "pod", "Pod", true, &["po"], true, true),
    rt("", "replicationcontrollers", "replicationcontroller", "ReplicationController", true, &["rc"], true, true),
    rt("", "secrets", "secret", "Secret", true, &[], false, false),
    rt("", "serviceaccounts", "serviceaccount", "ServiceAccount", true, &["sa"], false, false),
    rt("apps", "daemonsets", "daemonset", "DaemonSet", true, &["ds"], true, true),
    rt("apps", "deployments", "deployment", "Deployment", true, &["deploy"], true, true),
    rt("apps", "replicasets", "replicaset", "ReplicaSet", true, &["rs"], true, true),
    rt("apps", "statefulsets", "statefulset", "StatefulSet", true, &["sts"], true, true),
    rt("batch", "cronjobs", "cronjob", "CronJob", true, &["cj"], true, true),
    rt("batch", "jobs", "job", "Job", true, &[], true, true),
    rt("rbac.authorization.k8s.io", "clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", false, &[], false, false),
    rt("rbac.authorization.k8s.io", "clusterroles", "clusterrole", "ClusterRole", false, &[], false, false),
    rt("rbac.authorization.k8s.io", "rolebindings", "rolebinding", "RoleBinding", true, &[], false, false),
    rt("rbac.authorization.k8s.io", "roles", "role", "Role", true, &[], false, false),
];

/// The API groups in discovery order (core excluded).
pub(crate) const GROUPS: &[&str] = &["apps", "batch", "rbac.authorization.k8s.io"];

impl ResourceType {
    /// `v1` or `<group>/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The group-qualified plural the real server uses in error messages,
    /// e.g. `deployments.apps`, or `pods` for core.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_string()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// Index into [`RESOURCES`], used as the compact store key.
    pub(crate) fn index(&'static self) -> usize {
        RESOURCES
            .iter()
            .position(|r| std::ptr::eq(r, self))
            .expect("resource type from RESOURCES")
    }

    /// The type that manages namespaces: used for namespace existence checks.
    pub(crate) fn namespaces() -> &'static ResourceType {
        find("v1", "namespaces").expect("namespaces are served")
    }
}

/// Looks a type up by apiVersion and any of kind, plural, singular or short
/// name (case-insensitive), the way kubectl resolves what users type.
pub fn find(api_version: &str, name: &str) -> Option<&'static ResourceType> {
    let name = name.to_ascii_lowercase();
    RESOURCES.iter().find(|r| {
        r.api_version() == api_version
            && (r.kind.to_ascii_lowercase() == name
                || r.resource == name
                || r.singular == name
                || r.short_names.contains(&name.as_str()))
    })
}

/// Looks a type up by its URL segments.
pub fn by_path(group: &str, version: &str, resource: &str) -> Option<&'static ResourceType> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.resource == resource)
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

fn in_group(group: &'static str) -> impl Iterator<Item = &'static ResourceType> {
    RESOURCES.iter().filter(move |r| r.group == group)
}

/// Whether `/apis/<group>` (or core when empty) exists.
pub fn group_exists(group: &str, version: Option<&str>) -> bool {
    RESOURCES
        .iter()
        .any(|r| r.group == group && version.is_none_or(|v| v == r.version))
}

/// `GET /api`: legacy APIVersions.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_entry(group: &str) -> Value {
    let gv = json!({"groupVersion": group_version(group, "v1"), "version": "v1"});
    json!({"name": group, "versions": [gv.clone()], "preferredVersion": gv})
}

/// `GET /apis`: legacy APIGroupList.
pub fn api_group_list() -> Value {
    let groups: Vec<Value> = GROUPS.iter().map(|g| group_entry(g)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /apis/<group>`: APIGroup.
pub fn api_group(group: &str) -> Value {
    let mut entry = group_entry(group);
    entry["kind"] = json!("APIGroup");
    entry["apiVersion"] = json!("v1");
    entry
}

/// `GET /api/v1` or `/apis/<g>/<v>`: APIResourceList, including the
/// `/status` subresources kubectl and kube-rs look for.
pub fn api_resource_list(group: &str, version: &str) -> Value {
    let mut resources = Vec::new();
    for r in RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let mut entry = json!({
            "name": r.resource,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": VERBS,
        });
        if !r.short_names.is_empty() {
            entry["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            entry["categories"] = json!(r.categories);
        }
        resources.push(entry);
        if r.has_status {
            resources.push(json!({
                "name": format!("{}/status", r.resource),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let mut list = json!({
        "kind": "APIResourceList",
        "groupVersion": group_version(group, version),
        "resources": resources,
    });
    if !group.is_empty() {
        list["apiVersion"] = json!("v1");
    }
    list
}

/// Content type of aggregated discovery answers: clients tell the two
/// discovery formats apart by it, not by the body.
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// `GET /api` or `/apis` with an aggregated-discovery Accept header:
/// APIGroupDiscoveryList (apidiscovery.k8s.io/v2).
pub fn aggregated_discovery(core: bool, version: &str) -> Value {
    let groups: Vec<&str> = if core { vec![""] } else { GROUPS.to_vec() };
    let items: Vec<Value> = groups
        .into_iter()
        .map(|group| {
            let resources: Vec<Value> = in_group(group)
                .map(|r| {
                    let kind = json!({"group": r.group, "version": r.version, "kind": r.kind});
                    let subresources: Vec<Value> = if r.has_status {
                        vec![json!({
                            "subresource": "status",
                            "responseKind": kind,
                            "verbs": ["get", "patch", "update"],
                        })]
                    } else {
                        Vec::new()
                    };
                    let mut entry = json!({
                        "resource": r.resource,
                        "responseKind": kind,
                        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                        "singularResource": r.singular,
                        "verbs": VERBS,
                        "subresources": subresources,
                    });
                    if !r.short_names.is_empty() {
                        entry["shortNames"] = json!(r.short_names);
                    }
                    if !r.categories.is_empty() {
                        entry["categories"] = json!(r.categories);
                    }
                    entry
                })
                .collect();
            let mut metadata = json!({"creationTimestamp": null});
            if !group.is_empty() {
                metadata["name"] = json!(group);
            }
            json!({
                "metadata": metadata,
                "versions": [{"version": "v1", "resources": resources, "freshness": "Current"}],
            })
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    })
}

/// `GET /openapi/v3`: the index of per-group-version documents.
///
/// kubectl 1.32 reads it to decide whether the server validates fields
/// itself (`fieldValidation`); without it, `kubectl create -f` falls back
/// to client-side validation against `/openapi/v2` and fails.
pub fn openapi_v3_index() -> Value {
    let mut paths = serde_json::Map::new();
    let mut gvs: Vec<(&str, &str)> = vec![("", "v1")];
    gvs.extend(GROUPS.iter().map(|g| (*g, "v1")));
    for (group, version) in gvs {
        let path = if group.is_empty() {
            format!("api/{version}")
        } else {
            format!("apis/{group}/{version}")
        };
        let url = format!("/openapi/v3/{path}?hash=loopback");
        paths.insert(path, json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

/// `GET /openapi/v3/<api|apis/g>/<v>`: a minimal OpenAPI document that
/// declares, for each kind, a PATCH operation accepting `fieldValidation`
/// (which is all kubectl looks for) and a permissive schema per kind.
pub fn openapi_v3_document(group: &str, version: &str) -> Option<Value> {
    if !group_exists(group, Some(version)) {
        return None;
    }
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    for r in RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let path = if r.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.resource)
        } else {
            format!("{prefix}/{}/{{name}}", r.resource)
        };
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let operation = |action: &str| {
            json!({
                "operationId": format!("{action}{}", r.kind),
                "parameters": [
                    {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
                ],
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
            })
        };
        paths.insert(
            path,
            json!({"patch": operation("patch"), "put": operation("put"), "get": operation("get")}),
        );
        let schema_name = format!(
            "io.k8s.loopback.{}.{}.{}",
            if group.is_empty() { "core" } else { group },
            version,
            r.kind
        );
        schemas.insert(
            schema_name,
            json!({
                "type": "object",
                "x-kubernetes-group-version-kind": [gvk],
                "x-kubernetes-preserve-unknown-fields": true,
            }),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}
