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

/// Where a mount path lands beside the token directory, as the kubelet and the
/// container runtime resolve it: a relative path against `/`, empty and `.`
/// segments dropped. A `..` segment is never resolved: CEL (the policies) has no
/// way to, so every face takes such a path as possibly the token directory and
/// never as its exact mount (`TokenDir`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Not at or under the token directory.
    Outside,
    /// The token directory itself.
    Exact,
    /// Under the token directory.
    Under,
    /// A `..` segment: where it lands is not decided.
    Unresolved,
}

/// The one definition of the token directory's paths, as regular expressions
/// (RE2 syntax, the same in Rust's `regex` and the API server's CEL `matches`):
/// the Rust checks match them and `recognize::cel` renders them into both
/// policies, so every face reads a mount path the same way.
pub struct TokenDir;

impl TokenDir {
    /// Before the first segment: nothing, `/`, `./`, in any mix.
    const LEAD: &'static str = "^(/|\\./)*";
    /// Between two segments: a `/`, then any mix of `/` and `./`.
    const SEP: &'static str = "/(/|\\./)*";

    fn segments() -> String {
        let segs: Vec<String> = identity::TOKEN_MOUNT_PATH
            .split('/')
            .filter(|s| !s.is_empty())
            .map(regex_escape)
            .collect();
        format!("{}{}", Self::LEAD, segs.join(Self::SEP))
    }

    /// The token directory itself (trailing `/` and `/.` allowed).
    pub fn exact() -> String {
        format!("{}(/\\.?)*$", Self::segments())
    }

    /// At or under the token directory.
    pub fn at_or_under() -> String {
        format!("{}(/.*)?$", Self::segments())
    }

    /// A `..` segment anywhere.
    pub const DOT_DOT: &'static str = "(^|/)\\.\\.(/|$)";

    /// Where `path` lands.
    pub fn reach(path: &str) -> Reach {
        use std::sync::OnceLock;
        static RES: OnceLock<[regex::Regex; 3]> = OnceLock::new();
        let [dot_dot, exact, at_or_under] = RES.get_or_init(|| {
            [
                TokenDir::DOT_DOT.to_string(),
                TokenDir::exact(),
                TokenDir::at_or_under(),
            ]
            .map(|r| regex::Regex::new(&r).expect("token directory patterns compile"))
        });
        if dot_dot.is_match(path) {
            Reach::Unresolved
        } else if exact.is_match(path) {
            Reach::Exact
        } else if at_or_under.is_match(path) {
            Reach::Under
        } else {
            Reach::Outside
        }
    }
}

/// `s` as a literal in an RE2 pattern.
pub fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special
                .then_some('\\')
                .into_iter()
                .chain(std::iter::once(c))
        })
        .collect()
}

/// Whether a mount may land on the token directory or inside it (where a volume
/// or a `subPath` file would stand in for the projected token): at or under it,
/// or not decided (`..`).
pub fn in_token_dir(path: &str) -> bool {
    TokenDir::reach(path) != Reach::Outside
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

/// Whether a mount sets `subPath` or `subPathExpr` (an empty one is no subPath:
/// the API server drops it).
pub fn sub_path(m: &Node) -> bool {
    ["subPath", "subPathExpr"].iter().any(|k| {
        m.get(k)
            .is_some_and(|v| !v.is_null() && v.as_str() != Some(""))
    })
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
            let exact = TokenDir::reach(path) == Reach::Exact && read_only && !sub_path(m);
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
            let (why, fix) = if TokenDir::reach(path) == Reach::Unresolved {
                ("with a '..' segment the admission policies cannot resolve, so possibly at or under", "write the path without '..'")
            } else {
                ("at or under", "move it")
            };
            out.problems.push(Problem {
                field,
                line: m.line,
                message: format!(
                    "volume {:?} is mounted at {path:?}, {why} {} where the worker token goes; a file there would stand in for the token: {fix}",
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

    /// What the kubelet makes of a path, by segments: relative against `/`, empty
    /// and `.` segments dropped; a `..` segment undecided (`TokenDir`).
    fn by_segments(path: &str) -> Reach {
        let segs: Vec<&str> = path
            .split('/')
            .filter(|s| !s.is_empty() && *s != ".")
            .collect();
        let dir: Vec<&str> = identity::TOKEN_MOUNT_PATH
            .split('/')
            .filter(|s| !s.is_empty())
            .collect();
        if segs.contains(&"..") {
            Reach::Unresolved
        } else if segs == dir {
            Reach::Exact
        } else if segs.starts_with(&dir) {
            Reach::Under
        } else {
            Reach::Outside
        }
    }

    proptest::proptest! {
        /// The patterns both policies render mean the segments' reading, over
        /// paths made of the token directory's segments, `.`, `..`, look-alikes
        /// and slashes.
        #[test]
        fn the_token_dir_patterns_read_paths_by_segments(parts in proptest::collection::vec(
            proptest::sample::select(vec!["/", "//", ".", "..", "var", "run", "secrets", "tokens", "tokens2", "..cache", "x", "./", "/.", "..."]), 0..12)) {
            let path = parts.concat();
            proptest::prop_assert_eq!(TokenDir::reach(&path), by_segments(&path), "{:?}", path);
        }
    }

    #[test]
    fn relative_dotted_and_look_alike_paths() {
        use Reach::*;
        for (path, want) in [
            ("/var/run/secrets/tokens", Exact),
            ("var/run/secrets/tokens", Exact),
            ("./var/run/secrets//tokens/./", Exact),
            ("var/run/secrets/tokens/token", Under),
            ("/var/run/secrets/tokens/x/..", Unresolved),
            ("/data/../var/run/secrets/tokens", Unresolved),
            ("/data/..cache", Outside),
            ("/cache...", Outside),
            ("/var/run/secrets", Outside),
            ("/var/run/secrets/tokens2", Outside),
            ("/.var/run/secrets/tokens", Outside),
        ] {
            assert_eq!(TokenDir::reach(path), want, "{path}");
            assert_eq!(by_segments(path), want, "{path}");
        }
    }
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
