//! Where pod specs live: by kind for the workloads the transformer handles, and by
//! shape for anything else (custom resources that embed a pod spec).

use std::collections::BTreeMap;

use crate::identity;
use crate::manifest::{to_json, Node};

/// A built-in kind that bears pods: a pod, or an object whose template makes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodBearing {
    /// The version the live commands list (`v1`, `apps/v1`, `batch/v1`).
    pub api_version: &'static str,
    pub kind: &'static str,
    /// The REST resource name.
    pub plural: &'static str,
    /// From the object root to its pod spec.
    pub spec_path: &'static [&'static str],
}

impl PodBearing {
    pub fn group(&self) -> &'static str {
        self.api_version.rsplit_once('/').map_or("", |(g, _)| g)
    }
}

const TEMPLATE: &[&str] = &["spec", "template", "spec"];

const fn kind(
    api_version: &'static str,
    kind: &'static str,
    plural: &'static str,
    spec_path: &'static [&'static str],
) -> PodBearing {
    PodBearing {
        api_version,
        kind,
        plural,
        spec_path,
    }
}

/// Every built-in pod-bearing kind, once: the transformer, the guard, the
/// policies and the live commands (what keeps an identity in use) all read this.
pub const POD_BEARING: [PodBearing; 9] = [
    kind("v1", "Pod", "pods", &["spec"]),
    kind("v1", "PodTemplate", "podtemplates", &["template", "spec"]),
    kind(
        "v1",
        "ReplicationController",
        "replicationcontrollers",
        TEMPLATE,
    ),
    kind("apps/v1", "Deployment", "deployments", TEMPLATE),
    kind("apps/v1", "ReplicaSet", "replicasets", TEMPLATE),
    kind("apps/v1", "StatefulSet", "statefulsets", TEMPLATE),
    kind("apps/v1", "DaemonSet", "daemonsets", TEMPLATE),
    kind("batch/v1", "Job", "jobs", TEMPLATE),
    kind(
        "batch/v1",
        "CronJob",
        "cronjobs",
        &["spec", "jobTemplate", "spec", "template", "spec"],
    ),
];

/// Path from the object root to the pod spec of a workload kind the transformer
/// handles, or None for everything else. Any version of the kind's group counts
/// (and the old `extensions` group for the `apps` kinds).
pub fn pod_spec_path(api_version: &str, kind: &str) -> Option<&'static [&'static str]> {
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    POD_BEARING
        .iter()
        .find(|k| {
            k.kind == kind && (k.group() == group || (group == "extensions" && k.group() == "apps"))
        })
        .map(|k| k.spec_path)
}

/// The labels of the pod template (the `metadata` beside the pod spec).
pub fn template_labels<'a>(obj: &'a Node, spec_path: &[&str]) -> Option<&'a Node> {
    let parent = &spec_path[..spec_path.len() - 1];
    if parent.is_empty() {
        return None; // a Pod's own metadata is the workload's
    }
    obj.path(parent)?.path(&["metadata", "labels"])
}

/// A label mapping as strings; values that are not strings are skipped, as the API
/// server would reject them anyway.
pub fn label_map(labels: Option<&Node>) -> BTreeMap<String, String> {
    labels
        .and_then(Node::entries)
        .unwrap_or(&[])
        .iter()
        .filter_map(|(k, v)| Some((k.text()?.to_string(), v.as_str()?.to_string())))
        .collect()
}

/// A mount path as the container runtime resolves it: `/var/run/secrets//tokens/.`
/// is `/var/run/secrets/tokens`.
pub fn normalize_path(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Whether a mount lands on the token directory or inside it (where a volume or a
/// `subPath` file would stand in for the projected token).
pub fn in_token_dir(path: &str) -> bool {
    let p = normalize_path(path);
    p == identity::TOKEN_MOUNT_PATH || p.starts_with(&format!("{}/", identity::TOKEN_MOUNT_PATH))
}

/// Something in a pod spec that contradicts the worker identity contract.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// Relative to the container or pod spec: `volumeMounts[1]`, `env[0]`.
    pub field: String,
    pub line: u32,
    pub message: String,
}

/// One container against the contract: what is missing and what is wrong.
#[derive(Debug, Default)]
pub struct ContainerCheck {
    pub has_mount: bool,
    /// Env vars of the contract the container lacks.
    pub missing_env: Vec<&'static str>,
    pub problems: Vec<Problem>,
}

impl ContainerCheck {
    pub fn exact(&self) -> bool {
        self.has_mount && self.missing_env.is_empty() && self.problems.is_empty()
    }
}

/// Checks a container's token mount and env as Kubernetes resolves them: paths
/// after normalisation, any mount at or under the token directory (subPath
/// included), and every env entry of a name (Kubernetes uses the last).
pub fn check_container(c: &Node) -> ContainerCheck {
    let mut out = ContainerCheck::default();
    let mounts = c.get("volumeMounts").and_then(Node::items).unwrap_or(&[]);
    for (mi, m) in mounts.iter().enumerate() {
        let name = m.str_at(&["name"]);
        let path = m.str_at(&["mountPath"]).unwrap_or("");
        let field = format!("volumeMounts[{mi}]");
        if name == Some(identity::TOKEN_VOLUME) {
            let read_only = m.get("readOnly").map(to_json) == Some(serde_json::Value::Bool(true));
            let exact = normalize_path(path) == identity::TOKEN_MOUNT_PATH
                && read_only
                && m.get("subPath").is_none()
                && m.get("subPathExpr").is_none();
            if exact && !out.has_mount {
                out.has_mount = true;
                continue;
            }
            out.problems.push(Problem {
                field,
                line: m.line,
                message: format!(
                    "volume {:?} is mounted {}; it must be mounted once, read-only, at {} without subPath",
                    identity::TOKEN_VOLUME,
                    if exact { "twice" } else { "otherwise" },
                    identity::TOKEN_MOUNT_PATH
                ),
            });
        } else if in_token_dir(path) {
            out.problems.push(Problem {
                field,
                line: m.line,
                message: format!(
                    "volume {:?} is mounted at {path:?}, at or under {} where the worker token goes; a file there would stand in for the token: move it",
                    name.unwrap_or(""),
                    identity::TOKEN_MOUNT_PATH
                ),
            });
        }
    }
    let env = c.get("env").and_then(Node::items).unwrap_or(&[]);
    for (var, want) in identity::env_vars() {
        let entries: Vec<(usize, &Node)> = env
            .iter()
            .enumerate()
            .filter(|(_, e)| e.str_at(&["name"]) == Some(var))
            .collect();
        match entries.as_slice() {
            [] => out.missing_env.push(var),
            [(ei, e)] => {
                if e.str_at(&["value"]) != Some(want) || e.get("valueFrom").is_some() {
                    out.problems.push(Problem {
                        field: format!("env[{ei}]"),
                        line: e.line,
                        message: format!(
                            "env {var} is already set to something else; it must be {want:?}"
                        ),
                    });
                }
            }
            [.., (ei, e)] => out.problems.push(Problem {
                field: format!("env[{ei}]"),
                line: e.line,
                message: format!(
                    "env {var} is set {} times; Kubernetes uses the last, so one entry can hide another: keep one, {want:?}",
                    entries.len()
                ),
            }),
        }
    }
    out
}

/// What the token volume of a pod spec must be.
pub enum TokenWant<'a> {
    /// Exactly this audience and lifetime (inject knows its config).
    Exact(&'a identity::TokenSpec),
    /// Any `nvcf-icms:<cluster>` audience and a lifetime Kubernetes and the agent
    /// accept (the guard, which has no config).
    Contract,
    /// Any audience and lifetime: what an earlier config of the transformer wrote.
    Any,
}

/// Whether a volume is the projected worker token; fields the API server adds
/// (`defaultMode`) are allowed, anything else is not.
pub fn is_token_volume(v: &Node, want: &TokenWant) -> bool {
    let keys = |n: &Node, allowed: &[&str]| {
        n.entries().is_some_and(|e| {
            e.iter()
                .all(|(k, _)| k.text().is_some_and(|k| allowed.contains(&k)))
        })
    };
    let Some(projected) = v.get("projected") else {
        return false;
    };
    let sources = projected
        .get("sources")
        .and_then(Node::items)
        .unwrap_or(&[]);
    let [source] = sources else { return false };
    let Some(token) = source.get("serviceAccountToken") else {
        return false;
    };
    let audience = token.str_at(&["audience"]).unwrap_or("");
    let expiry = token
        .get("expirationSeconds")
        .map(to_json)
        .and_then(|e| e.as_i64());
    let fits = match want {
        TokenWant::Exact(t) => audience == t.audience && expiry == Some(t.expiration_seconds),
        TokenWant::Contract => {
            audience
                .strip_prefix("nvcf-icms:")
                .is_some_and(|c| !c.trim().is_empty())
                && expiry.is_some_and(|e| {
                    (identity::MIN_EXPIRATION_SECONDS..=identity::MAX_EXPIRATION_SECONDS)
                        .contains(&e)
                })
        }
        TokenWant::Any => !audience.is_empty() && expiry.is_some(),
    };
    fits && keys(v, &["name", "projected"])
        && keys(projected, &["sources", "defaultMode"])
        && keys(source, &["serviceAccountToken"])
        && keys(token, &["audience", "expirationSeconds", "path"])
        && token.str_at(&["path"]) == Some(identity::TOKEN_PATH)
}

/// Audiences of the projected service account tokens of a pod spec, with the
/// volume index.
pub fn projected_audiences(spec: &Node) -> Vec<(usize, &Node, String)> {
    let volumes = spec.get("volumes").and_then(Node::items).unwrap_or(&[]);
    let mut out = Vec::new();
    for (i, v) in volumes.iter().enumerate() {
        for s in v
            .path(&["projected", "sources"])
            .and_then(Node::items)
            .unwrap_or(&[])
        {
            if let Some(t) = s.get("serviceAccountToken") {
                out.push((i, v, t.str_at(&["audience"]).unwrap_or("").to_string()));
            }
        }
    }
    out
}

/// `spec.template.spec` from path segments.
pub fn dotted(path: &[&str]) -> String {
    path.join(".")
}

/// Whether a mapping looks like a pod spec: a `containers` list whose entries have
/// an `image` or a `name`. This is how the guard finds pod specs in custom
/// resources (Argo Rollouts, Knative, operators) without a list of kinds.
pub fn looks_like_pod_spec(n: &Node) -> bool {
    n.get("containers").and_then(Node::items).is_some_and(|cs| {
        cs.iter()
            .any(|c| c.get("image").is_some() || c.get("name").is_some())
    })
}

/// Every pod-spec-shaped mapping in an object, with its dotted path. Also counts a
/// mapping with `serviceAccountName`/`serviceAccount` as a pod spec, so that a
/// forged account cannot hide behind a missing `containers` list.
pub fn find_pod_specs(obj: &Node) -> Vec<(String, &Node)> {
    let mut out = Vec::new();
    let mut path = Vec::new();
    walk(obj, &mut path, &mut out);
    out
}

/// One step of a field path; the dotted string is only built for what is found, so
/// walking every node of a large stream allocates nothing.
#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

fn render(path: &[Step]) -> String {
    let mut s = String::new();
    for step in path {
        match step {
            Step::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Step::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

fn walk<'a>(n: &'a Node, path: &mut Vec<Step<'a>>, out: &mut Vec<(String, &'a Node)>) {
    if let Some(entries) = n.entries() {
        if looks_like_pod_spec(n)
            || n.get("serviceAccountName").is_some()
            || n.get("serviceAccount").is_some()
        {
            out.push((render(path), n));
        }
        for (k, v) in entries {
            if v.as_scalar().is_some() {
                continue; // nothing below a scalar
            }
            path.push(Step::Key(k.text().unwrap_or("?")));
            walk(v, path, out);
            path.pop();
        }
    } else if let Some(items) = n.items() {
        for (i, v) in items.iter().enumerate() {
            if v.as_scalar().is_some() {
                continue;
            }
            path.push(Step::Index(i));
            walk(v, path, out);
            path.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::parse_stream;

    #[test]
    fn kinds_and_groups() {
        assert_eq!(pod_spec_path("v1", "Pod"), Some(&["spec"][..]));
        assert_eq!(pod_spec_path("batch/v1", "CronJob").unwrap().len(), 5);
        assert_eq!(pod_spec_path("example.com/v1", "Deployment"), None);
        assert_eq!(pod_spec_path("v1", "Service"), None);
    }

    #[test]
    fn pod_specs_found_by_shape_with_paths() {
        let d = parse_stream(b"kind: Rollout\nspec:\n  template:\n    spec:\n      containers:\n      - image: x\n  extra:\n  - serviceAccountName: a\n").unwrap();
        let found: Vec<String> = find_pod_specs(d[0].view())
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(found, vec!["spec.template.spec", "spec.extra[0]"]);
    }
}
