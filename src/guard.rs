//! The guard: rejects every way a manifest could forge or widen a worker identity.
//!
//! Rules (ids are stable; README lists them):
//! - NVW001 the input does not decode the way kubectl would (syntax, duplicate key,
//!   not an object)
//! - NVW101 a pod spec, anywhere in any object, names a `nvcf-worker-*` account
//! - NVW102 a (Cluster)RoleBinding grants something to a worker account
//! - NVW103 (warning) a binding to a group that contains every worker account
//! - NVW104 a worker Role or ClusterRole with rules
//! - NVW105 (warning) rules that mint tokens or impersonate: a worker token without
//!   being the worker
//! - NVW106 a long-lived token Secret for a worker account
//! - NVW107 a key that looks like `serviceAccountName` but is not (hides a value)

use std::collections::{HashMap, HashSet};

use crate::identity::{self, PREFIX};
use crate::manifest::batch::{Addr, Batch, Object};
use crate::manifest::{to_json, Node};
use crate::report::Finding;
use crate::workload;

pub const DECODE: &str = "NVW001";
pub const POD_SPEC_ACCOUNT: &str = "NVW101";
pub const BINDING_TO_WORKER: &str = "NVW102";
pub const GROUP_INCLUDES_WORKERS: &str = "NVW103";
pub const WORKER_ROLE_RULES: &str = "NVW104";
pub const TOKEN_MINT_OR_IMPERSONATE: &str = "NVW105";
pub const WORKER_TOKEN_SECRET: &str = "NVW106";
pub const LOOKALIKE_KEY: &str = "NVW107";

/// What the caller already knows to be legitimate.
pub struct Allow<'a> {
    /// Selected workloads during inject: naming their own derived account is what
    /// inject is about to produce, trio or not.
    pub self_refs: &'a HashSet<Addr>,
}

fn is_worker(name: &str) -> bool {
    name.trim().starts_with(PREFIX)
}

/// Checks every object of the batch.
pub fn check(batch: &Batch, allow: &Allow) -> Vec<Finding> {
    let objects = batch.objects();
    let trios = Trios::index(&objects);
    let mut out = Vec::new();
    for obj in &objects {
        check_object(obj, &trios, allow, &mut out);
    }
    out
}

/// The trio objects of the batch by (kind, namespace, name).
/// Inject reads it too, to reuse a trio the input already declares.
pub struct Trios<'a>(HashMap<TrioKey, Object<'a>>);

/// (kind, namespace, name); owned, so lookups need not outlive the batch.
type TrioKey = (String, Option<String>, String);

fn trio_key(kind: &str, ns: Option<&str>, name: &str) -> TrioKey {
    (kind.to_string(), ns.map(str::to_string), name.to_string())
}

impl<'a> Trios<'a> {
    pub fn index(objects: &[Object<'a>]) -> Trios<'a> {
        Trios(
            objects
                .iter()
                .filter(|o| {
                    identity::TRIO_KINDS.contains(&o.kind()) && o.name().starts_with(PREFIX)
                })
                .map(|o| (trio_key(o.kind(), o.namespace(), o.name()), *o))
                .collect(),
        )
    }

    /// The declared `kind` named `name` in `ns`, if any.
    pub fn get(&self, kind: &str, ns: Option<&str>, name: &str) -> Option<&Object<'a>> {
        self.0.get(&trio_key(kind, ns, name))
    }

    /// Whether the exact, harmless trio for `name` is declared in `ns`.
    fn complete(&self, ns: Option<&str>, name: &str) -> bool {
        identity::TRIO_KINDS.iter().all(|k| {
            self.get(k, ns, name)
                .is_some_and(|o| member_problem(k, o.node, name, ns).is_none())
        })
    }
}

/// Why an object of the trio does not match what the transformer generates.
pub fn member_problem(kind: &str, n: &Node, name: &str, ns: Option<&str>) -> Option<&'static str> {
    match kind {
        "ServiceAccount" => (n.get("automountServiceAccountToken").map(to_json)
            != Some(serde_json::Value::Bool(false)))
        .then_some("automountServiceAccountToken must be false"),
        "Role" => has_rules(n).then_some("rules must be empty"),
        _ => (!is_own_binding(n, name, ns))
            .then_some("it must bind exactly the empty Role to exactly the worker ServiceAccount"),
    }
}

fn has_rules(n: &Node) -> bool {
    n.get("rules")
        .is_some_and(|r| !r.is_null() && r.items().is_none_or(|i| !i.is_empty()))
}

/// The transformer's RoleBinding: Role `name` to ServiceAccount `name`, nothing else.
fn is_own_binding(n: &Node, name: &str, ns: Option<&str>) -> bool {
    let want_ref =
        serde_json::json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name});
    let mut subject = serde_json::json!({"kind": "ServiceAccount", "name": name});
    if let Some(ns) = ns {
        subject["namespace"] = ns.into();
    }
    n.get("roleRef").map(to_json) == Some(want_ref)
        && n.get("subjects").map(to_json) == Some(serde_json::json!([subject]))
}

fn check_object(obj: &Object, trios: &Trios, allow: &Allow, out: &mut Vec<Finding>) {
    let finding = |f: Finding, field: String, line: u32| {
        f.resource(Some(obj.resource_ref()))
            .field(field)
            .at(obj.location())
            .line(line)
    };
    check_pod_specs(obj, trios, allow, out);
    match obj.kind() {
        "RoleBinding" | "ClusterRoleBinding" => check_binding(obj, out),
        "Role" | "ClusterRole" => {
            if is_worker(obj.name())
                && (has_rules(obj.node) || obj.node.get("aggregationRule").is_some())
            {
                let line = obj.node.get("rules").map_or(obj.node.line, |r| r.line);
                out.push(finding(
                    Finding::error(format!("worker {} {:?} must have no rules (rules: []): a worker identity is deny-by-default", obj.kind(), obj.name()))
                        .rule(WORKER_ROLE_RULES),
                    "rules".into(),
                    line,
                ));
            }
            check_rules(obj, out);
        }
        "Secret" if obj.node.str_at(&["type"]) == Some("kubernetes.io/service-account-token") => {
            let sa = obj
                .annotation("kubernetes.io/service-account.name")
                .unwrap_or("");
            if is_worker(sa) {
                let line = obj
                    .node
                    .path(&["metadata", "annotations"])
                    .and_then(|a| a.get("kubernetes.io/service-account.name"))
                    .map_or(0, |n| n.line);
                out.push(finding(
                    Finding::error(format!(
                        "a service-account-token Secret for worker account {sa:?} never expires and defeats the short-lived projected token; delete it"
                    ))
                    .rule(WORKER_TOKEN_SECRET),
                    "metadata.annotations.kubernetes.io/service-account.name".into(),
                    line,
                ));
            }
        }
        _ => {}
    }
}

fn check_pod_specs(obj: &Object, trios: &Trios, allow: &Allow, out: &mut Vec<Finding>) {
    let own_path = workload::pod_spec_path(obj.api_version(), obj.kind()).map(workload::dotted);
    for (path, spec) in workload::find_pod_specs(obj.node) {
        for (k, v) in spec.entries().unwrap_or(&[]) {
            let key = k.text().unwrap_or("");
            let at = if path.is_empty() {
                key.to_string()
            } else {
                format!("{path}.{key}")
            };
            let target = ["serviceAccountName", "serviceAccount"]
                .into_iter()
                .find(|t| key == *t);
            if target.is_none() {
                if let Some(like) = lookalike_of(key) {
                    out.push(
                        Finding::error(format!("key {key:?} looks like {like} but is not; it can hide an account from reviewers and tools: spell it {like}"))
                            .rule(LOOKALIKE_KEY)
                            .resource(Some(obj.resource_ref()))
                            .field(at)
                            .at(obj.location())
                            .line(k.line),
                    );
                }
                continue;
            }
            let Some(account) = v.text() else { continue };
            if !is_worker(account) {
                continue;
            }
            let derived = identity::derived_name(obj.name());
            let is_own_spec = own_path.as_deref() == Some(path.as_str());
            let legitimate = is_own_spec
                && account == derived
                && (allow.self_refs.contains(&obj.addr)
                    || trios.complete(obj.namespace(), &derived));
            if !legitimate {
                out.push(
                    Finding::error(format!(
                        "{key} {account:?} is a reserved NVCF worker account: only the agent or `kubectl-nvcf-worker inject` may assign it; use another ServiceAccount"
                    ))
                    .rule(POD_SPEC_ACCOUNT)
                    .resource(Some(obj.resource_ref()))
                    .field(at)
                    .at(obj.location())
                    .line(v.line),
                );
            }
        }
    }
}

/// Key spelled with extra spaces, other case, invisible or look-alike Unicode.
fn lookalike_of(key: &str) -> Option<&'static str> {
    const CONFUSABLES: [(char, char); 19] = [
        // Greek and Armenian small letters (Greek capital `Α` lowercases to `α`).
        ('α', 'a'),
        ('ο', 'o'),
        ('ι', 'i'),
        ('ϲ', 'c'),
        ('υ', 'u'),
        ('օ', 'o'),
        ('ս', 'u'),
        ('а', 'a'),
        ('е', 'e'),
        ('о', 'o'),
        ('с', 'c'),
        ('і', 'i'),
        ('ѕ', 's'),
        ('ν', 'v'),
        ('Ν', 'n'),
        ('м', 'm'),
        ('т', 't'),
        ('ո', 'n'),
        ('ı', 'i'),
    ];
    let plain = |c: char| match c {
        '\u{ff01}'..='\u{ff5e}' => char::from_u32(c as u32 - 0xfee0).unwrap_or(c),
        _ => CONFUSABLES
            .iter()
            .find(|(u, _)| *u == c)
            .map_or(c, |(_, a)| *a),
    };
    let norm: String = key
        .chars()
        .filter(|c| {
            !c.is_whitespace()
                && !matches!(
                    c,
                    '\u{200b}'..='\u{200f}' | '\u{2060}' | '\u{feff}' | '\u{00ad}'
                )
        })
        .map(plain)
        // Again after lowercasing: a capital look-alike (Cyrillic `А`) lowercases to
        // a small one (`а`) that only then maps to ASCII.
        .flat_map(char::to_lowercase)
        .map(plain)
        .collect();
    ["serviceAccountName", "serviceAccount"]
        .into_iter()
        .find(|t| norm == t.to_ascii_lowercase() && key != *t)
}

fn check_binding(obj: &Object, out: &mut Vec<Finding>) {
    let subjects = obj
        .node
        .get("subjects")
        .and_then(Node::items)
        .unwrap_or(&[]);
    let own = obj.kind() == "RoleBinding"
        && is_worker(obj.name())
        && is_own_binding(obj.node, obj.name(), obj.namespace());
    for (i, s) in subjects.iter().enumerate() {
        let kind = s.str_at(&["kind"]).unwrap_or("");
        let name = s.str_at(&["name"]).unwrap_or("");
        let field = format!("subjects[{i}]");
        let push = |f: Finding, out: &mut Vec<Finding>| {
            out.push(
                f.resource(Some(obj.resource_ref()))
                    .field(field.clone())
                    .at(obj.location())
                    .line(s.line),
            )
        };
        let sa_user = name
            .strip_prefix("system:serviceaccount:")
            .and_then(|r| r.split_once(':'))
            .map(|(_, sa)| sa);
        match kind {
            "ServiceAccount" if is_worker(name) && !own => push(
                Finding::error(format!(
                    "{} grants {:?} to worker account {name:?}: a worker identity must keep only its empty Role; bind another ServiceAccount",
                    obj.kind(),
                    obj.node.str_at(&["roleRef", "name"]).unwrap_or("")
                ))
                .rule(BINDING_TO_WORKER),
                out,
            ),
            "User" if sa_user.is_some_and(is_worker) => push(
                Finding::error(format!("{} grants to user {name:?}, which is a worker account; bind another subject", obj.kind())).rule(BINDING_TO_WORKER),
                out,
            ),
            // system:authenticated holds every account with a token, workers included.
            "Group" if name == "system:serviceaccounts" || name.starts_with("system:serviceaccounts:") || name == "system:authenticated" => push(
                Finding::warning(format!("group {name:?} includes every worker account in its scope; grant to specific ServiceAccounts instead"))
                    .rule(GROUP_INCLUDES_WORKERS),
                out,
            ),
            _ => {}
        }
    }
}

fn strings(n: &Node, key: &str) -> Vec<String> {
    n.get(key)
        .and_then(Node::items)
        .unwrap_or(&[])
        .iter()
        // `apiGroups: [~]` is the core group "" to the API server.
        .filter_map(|v| {
            if v.is_null() {
                Some(String::new())
            } else {
                v.text().map(str::to_string)
            }
        })
        .collect()
}

fn check_rules(obj: &Object, out: &mut Vec<Finding>) {
    for (i, rule) in obj
        .node
        .get("rules")
        .and_then(Node::items)
        .unwrap_or(&[])
        .iter()
        .enumerate()
    {
        let groups = strings(rule, "apiGroups");
        let resources = strings(rule, "resources");
        let verbs = strings(rule, "verbs");
        let core = groups.iter().any(|g| g.is_empty() || g == "*");
        let verb = |v: &str| verbs.iter().any(|x| x == v || x == "*");
        let resource = |r: &str| {
            resources.iter().any(|x| {
                x == "*"
                    || x == r
                    || r.split_once('/').is_some_and(|(base, sub)| {
                        x == &format!("{base}/*") || x == &format!("*/{sub}")
                    })
            })
        };
        let mut powers = Vec::new();
        if core && verb("create") && resource("serviceaccounts/token") {
            powers.push("create serviceaccounts/token (mint tokens)");
        }
        if core && verb("impersonate") && (resource("serviceaccounts") || resource("users")) {
            powers.push("impersonate serviceaccounts or users");
        }
        if !powers.is_empty() {
            out.push(
                Finding::warning(format!(
                    "{} {:?} grants {}: whoever holds it can obtain a worker token without being the worker; narrow it with resourceNames or drop it",
                    obj.kind(),
                    obj.name(),
                    powers.join(" and ")
                ))
                .rule(TOKEN_MINT_OR_IMPERSONATE)
                .resource(Some(obj.resource_ref()))
                .field(format!("rules[{i}]"))
                .at(obj.location())
                .line(rule.line),
            );
        }
    }
}
