//! The guard: rejects every way a manifest could forge or widen a worker identity.
//!
//! Reserved names are the agent's (`IsWorkerServiceAccountName`): `nvcf-worker` and
//! `nvcf-worker-*`. The only exception is the transformer's exact output, checked
//! as a whole: a trio whose marks name this workload (or its namespace), and a pod
//! spec carrying exactly the contract's token volume, mounts and env.
//!
//! The rules, their ids and where each is enforced: `rules::RULES`.

use std::collections::HashMap;

use crate::identity::{self, Marks};
use crate::manifest::batch::{Addr, Batch, Object};
use crate::manifest::{to_json, Node};
use crate::recognize::{self, Record};
use crate::report::Finding;
use crate::workload;

pub use crate::rules::{
    ACCOUNT_REFERENCE, BINDING_TO_WORKER, DECODE, EPHEMERAL_CONTAINER, EXTRA_TOKEN,
    GROUP_INCLUDES_WORKERS, HAND_WRITTEN_IDENTITY, ICMS_AUDIENCE, IDENTITY_COLLISION,
    INFRA_ANNOTATION, LOOKALIKE_KEY, MINT_FOR_WORKER, POD_SPEC_ACCOUNT, RENAMED, REPLACED_RECORD,
    TOKEN_MINT_OR_IMPERSONATE, WORKER_ROLE_RULES, WORKER_TOKEN_SECRET,
};

/// What the caller already knows to be legitimate.
pub struct Allow<'a> {
    /// Selected workloads during inject, with the account inject is about to give
    /// them: naming it is what inject produces, trio or not.
    pub self_refs: &'a HashMap<Addr, String>,
}

fn is_worker(name: &str) -> bool {
    identity::is_reserved(name.trim())
}

/// The transformer's marks on an object, if it carries them.
pub fn marks_of(n: &Node) -> Option<Marks> {
    let meta = |group: &'static str| {
        move |key: &str| {
            n.path(&["metadata", group])
                .and_then(|m| m.get(key))
                .and_then(Node::as_str)
                .map(str::to_string)
        }
    };
    Marks::read(meta("labels"), meta("annotations"))
}

/// Whether two namespaces can be the same at apply time: an omitted namespace
/// takes whatever the apply chooses, so it collides with any.
pub fn namespaces_collide(a: Option<&str>, b: Option<&str>) -> bool {
    a.is_none() || b.is_none() || a == b
}

/// Checks every object of the batch (an evicted one was checked when it was read).
pub fn check(batch: &Batch, allow: &Allow) -> Vec<Finding> {
    let objects = batch.objects();
    let trios = Trios::index(&objects);
    let mut out = Vec::new();
    for obj in objects.iter().filter(|o| !o.is_evicted()) {
        check_object(obj, &trios, allow, &mut out);
    }
    check_collisions(&objects, &mut out);
    out
}

/// Whether the guard finds nothing in `obj` whatever else the batch holds, so that
/// the object need not be kept to be checked again with the others. What other
/// objects (a trio) or the caller (`Allow`) add only ever excuses a finding, so an
/// object with no finding on its own has none in any batch. The cross-object rule
/// (NVW113) reads ServiceAccounts, so those are never judged clean here.
pub fn clean_alone(obj: &Object) -> bool {
    if obj.kind() == "ServiceAccount" {
        return false;
    }
    let mut out = Vec::new();
    let none = HashMap::new();
    check_object(
        obj,
        &Trios(HashMap::new()),
        &Allow { self_refs: &none },
        &mut out,
    );
    out.is_empty()
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
                .filter(|o| identity::TRIO_KINDS.contains(&o.kind()) && is_worker(o.name()))
                .map(|o| (trio_key(o.kind(), o.namespace(), o.name()), *o))
                .collect(),
        )
    }

    /// The declared `kind` named `name` in `ns`, if any.
    pub fn get(&self, kind: &str, ns: Option<&str>, name: &str) -> Option<&Object<'a>> {
        self.0.get(&trio_key(kind, ns, name))
    }

    /// The marks of the exact, harmless trio `name` in `ns`: all three objects,
    /// each as the transformer writes it, all marked for the identity of this name.
    pub fn exact(&self, ns: Option<&str>, name: &str) -> Result<Marks, String> {
        let mut marks: Option<Marks> = None;
        for kind in identity::TRIO_KINDS {
            let Some(o) = self.get(kind, ns, name) else {
                return Err(format!("no {kind} {name} in its namespace"));
            };
            if let Some(problem) = member_problem(kind, o.node, name, ns) {
                return Err(format!("{kind} {name}: {problem}"));
            }
            let m = marks_of(o.node)
                .filter(|m| m.identity_name() == name)
                .ok_or_else(|| format!("{kind} {name} does not carry the transformer's marks"))?;
            if marks.as_ref().is_some_and(|first| *first != m) {
                return Err(format!("the trio {name} is marked for different owners"));
            }
            marks = Some(m);
        }
        Ok(marks.expect("three members"))
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
/// A subject without a namespace is the binding's own namespace's account (RBAC
/// reads it so), as inject writes it for a workload without one and as the cluster
/// stores it once the binding has a namespace.
fn is_own_binding(n: &Node, name: &str, ns: Option<&str>) -> bool {
    let want_ref =
        serde_json::json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name});
    let bare = serde_json::json!({"kind": "ServiceAccount", "name": name});
    let mut subject = bare.clone();
    if let Some(ns) = ns {
        subject["namespace"] = ns.into();
    }
    let subjects = n.get("subjects").map(to_json);
    n.get("roleRef").map(to_json) == Some(want_ref)
        && (subjects == Some(serde_json::json!([subject]))
            || subjects == Some(serde_json::json!([bare])))
}

fn binds_a_worker(n: &Node) -> bool {
    n.get("subjects")
        .and_then(Node::items)
        .unwrap_or(&[])
        .iter()
        .any(|s| s.str_at(&["name"]).is_some_and(is_worker))
}

fn check_object(obj: &Object, trios: &Trios, allow: &Allow, out: &mut Vec<Finding>) {
    let finding = |f: Finding, field: String, line: u32| {
        f.resource(Some(obj.resource_ref()))
            .field(field)
            .at(obj.location())
            .line(line)
    };
    check_pod_specs(obj, trios, allow, out);
    check_record(obj, trios, allow, out);
    check_references(obj, out);
    check_marks(obj, out);
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

/// NVW109 and NVW112 on the objects of an identity (ServiceAccount, Role, RoleBinding).
fn check_marks(obj: &Object, out: &mut Vec<Finding>) {
    if !identity::TRIO_KINDS.contains(&obj.kind()) {
        return;
    }
    let marks = marks_of(obj.node);
    let push = |f: Finding, out: &mut Vec<Finding>| {
        out.push(
            f.resource(Some(obj.resource_ref()))
                .field("metadata.name")
                .at(obj.location())
                .line(
                    obj.node
                        .path(&["metadata", "name"])
                        .map_or(obj.node.line, |n| n.line),
                ),
        )
    };
    if let Some(m) = &marks {
        let want = m.identity_name();
        if want != obj.name() {
            push(
                Finding::error(format!(
                    "{} {:?} is marked as the identity of {}, which is named {want:?}: it was renamed after the transformer ran (a namePrefix or nameSuffix in a later kustomization?), and ICMS will not accept a worker under that name; run the transformer in the overlay that sets the final names",
                    obj.kind(),
                    obj.name(),
                    m.describe()
                ))
                .rule(RENAMED),
                out,
            );
            return;
        }
    }
    if !is_worker(obj.name()) {
        return;
    }
    let why = match marks {
        None => Some("without the transformer's marks".to_string()),
        Some(_) => match obj.kind() {
            "ServiceAccount" | "RoleBinding"
                if !(obj.kind() == "RoleBinding" && binds_a_worker(obj.node)) =>
            {
                member_problem(obj.kind(), obj.node, obj.name(), obj.namespace())
                    .map(|p| format!("that differs from the transformer's: {p}"))
            }
            _ => None,
        },
    };
    if let Some(why) = why {
        push(
            Finding::error(format!(
                "{} {:?} uses a reserved worker identity name {why}; only the agent or `kubectl-nvcf-worker inject` may declare it: pick another name",
                obj.kind(),
                obj.name()
            ))
            .rule(HAND_WRITTEN_IDENTITY),
            out,
        );
    }
}

/// Whether the trio of `account` is the transformer's, marked for this workload
/// (or its namespace), or why not.
fn trio_exemption(obj: &Object, account: &str, trios: &Trios) -> Result<(), String> {
    let marks = trios.exact(obj.namespace(), account)?;
    match &marks {
        Marks::Workload {
            api_version,
            kind,
            name,
        } if (api_version.as_str(), kind.as_str(), name.as_str())
            != (obj.api_version(), obj.kind(), obj.name()) =>
        {
            Err(format!(
                "its trio is marked for {api_version} {}, not this {}",
                marks.describe(),
                obj.kind()
            ))
        }
        _ => Ok(()),
    }
}

/// The containers `nvcf.io/skip-containers` names on `obj`.
fn skipped<'a>(obj: &'a Object) -> Vec<&'a str> {
    obj.annotation(identity::SKIP_CONTAINERS_ANNOTATION)
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// The problems of a pod spec that runs as the worker `account`, judged as the
/// transformer's output for `obj` (`recognize::problems`).
fn spec_problems(obj: &Object, spec: &Node, account: &str) -> Vec<recognize::Problem> {
    let skip = skipped(obj);
    recognize::problems(
        spec,
        account,
        &recognize::Surface {
            token: workload::TokenWant::Contract,
            skip: &skip,
            any_untouched: false,
        },
    )
}

/// Whether `obj` is the transformer's output: its own pod spec runs as a worker
/// identity whose trio is marked for it, and passes NVW101's exemption (a second
/// token or an ephemeral container is a finding of its own rule, not this one's).
pub fn is_own_output(obj: &Object, trios: &Trios) -> bool {
    let Some(spec) = workload::pod_spec_path(obj.api_version(), obj.kind())
        .and_then(|p| obj.node.path(p))
        .filter(|s| s.is_map())
    else {
        return false;
    };
    let account = spec
        .str_at(&["serviceAccountName"])
        .or_else(|| spec.str_at(&["serviceAccount"]))
        .unwrap_or("");
    is_worker(account)
        && trio_exemption(obj, account, trios).is_ok()
        && spec_problems(obj, spec, account)
            .iter()
            .all(|p| p.rule != POD_SPEC_ACCOUNT)
}

/// NVW116: the record of what inject replaced is judged like any field.
fn check_record(obj: &Object, trios: &Trios, allow: &Allow, out: &mut Vec<Finding>) {
    let Some((k, _)) = obj
        .node
        .path(&["metadata", "annotations"])
        .and_then(|a| a.entry(identity::REPLACED_ANNOTATION))
    else {
        return;
    };
    let why = match Record::of(obj.node) {
        Err(why) => Some(why),
        // Inject's own selected workloads are planned, not yet written: a record
        // on one it has not injected is not its own either.
        Ok(_) if !is_own_output(obj, trios) => Some(format!(
            "annotation {} is on a workload that is not the transformer's exact output{}",
            identity::REPLACED_ANNOTATION,
            if allow.self_refs.contains_key(&obj.addr) {
                " (inject writes its own record, it never keeps one it did not write)"
            } else {
                ""
            }
        )),
        Ok(_) => None,
    };
    if let Some(why) = why {
        out.push(
            Finding::error(format!(
                "{why}; uninject would restore what it says: remove the annotation"
            ))
            .rule(REPLACED_RECORD)
            .resource(Some(obj.resource_ref()))
            .field(format!(
                "metadata.annotations.{}",
                identity::REPLACED_ANNOTATION
            ))
            .at(obj.location())
            .line(k.line),
        );
    }
}

fn check_pod_specs(obj: &Object, trios: &Trios, allow: &Allow, out: &mut Vec<Finding>) {
    let own_path = workload::pod_spec_path(obj.api_version(), obj.kind()).map(workload::dotted);
    for (path, spec) in workload::find_pod_specs(obj.node) {
        let at = |key: &str| {
            if path.is_empty() {
                key.to_string()
            } else {
                format!("{path}.{key}")
            }
        };
        let push = |f: Finding, field: String, line: u32, out: &mut Vec<Finding>| {
            out.push(
                f.resource(Some(obj.resource_ref()))
                    .field(field)
                    .at(obj.location())
                    .line(line),
            )
        };
        let is_own_spec = own_path.as_deref() == Some(path.as_str());
        let mut account = None;
        // Judged once per pod spec, for the first reserved account it names.
        let mut judged: Option<Vec<recognize::Problem>> = None;
        for (k, v) in spec.entries().unwrap_or(&[]) {
            let key = k.text().unwrap_or("");
            let target = ["serviceAccountName", "serviceAccount"]
                .into_iter()
                .find(|t| key == *t);
            if target.is_none() {
                if let Some(like) = lookalike_of(key) {
                    push(
                        Finding::error(format!("key {key:?} looks like {like} but is not; it can hide an account from reviewers and tools: spell it {like}"))
                            .rule(LOOKALIKE_KEY),
                        at(key),
                        k.line,
                        out,
                    );
                }
                continue;
            }
            // `serviceAccount: null` names no account (the API server drops it).
            let Some(name) = v.text().filter(|_| !v.is_null()) else {
                continue;
            };
            account = account.or(Some(name));
            if !is_worker(name) {
                continue;
            }
            let problems = judged.get_or_insert_with(|| spec_problems(obj, spec, name));
            let verdict = if !is_own_spec {
                Err("this is not the object's own pod spec".to_string())
            } else if allow.self_refs.get(&obj.addr).map(String::as_str) == Some(name) {
                Ok(())
            } else {
                trio_exemption(obj, name, trios).and_then(|()| {
                    match problems.iter().find(|p| p.rule == POD_SPEC_ACCOUNT) {
                        Some(p) => {
                            Err(format!("its pod spec is not the contract's: {}", p.message))
                        }
                        None => Ok(()),
                    }
                })
            };
            if let Err(why) = verdict {
                push(
                    Finding::error(format!(
                        "{key} {name:?} is a reserved NVCF worker account: only the agent or `kubectl-nvcf-worker inject` may assign it ({why}); use another ServiceAccount"
                    ))
                    .rule(POD_SPEC_ACCOUNT),
                    at(key),
                    v.line,
                    out,
                );
            }
        }
        // Rules of their own on every worker pod spec, exempt or not: a second
        // token, an ephemeral container.
        for p in judged
            .iter()
            .flatten()
            .filter(|p| p.rule != POD_SPEC_ACCOUNT)
        {
            push(
                Finding::error(p.message.clone()).rule(p.rule),
                at(&p.field),
                p.line,
                out,
            );
        }
        if account.is_some_and(is_worker) {
            continue;
        }
        // A pod spec carrying the worker token under another account: renamed by a
        // later transformer (NVW112), or a token ICMS would see for a non-worker.
        let account = account.unwrap_or("default");
        let volumes = spec.get("volumes").and_then(Node::items).unwrap_or(&[]);
        let worker_volume = volumes
            .iter()
            .position(|v| v.str_at(&["name"]) == Some(identity::TOKEN_VOLUME));
        let worker_env = ["containers", "initContainers"].iter().any(|list| {
            spec.get(list)
                .and_then(Node::items)
                .unwrap_or(&[])
                .iter()
                .any(|c| {
                    c.get("env")
                        .and_then(Node::items)
                        .unwrap_or(&[])
                        .iter()
                        .any(|e| {
                            e.str_at(&["name"]) == Some(identity::ENV_IDENTITY_SOURCE)
                                || e.str_at(&["name"]) == Some(identity::ENV_TOKEN_FILE_PATH)
                        })
                })
        });
        if let (Some(i), true) = (worker_volume, worker_env) {
            push(
                Finding::error(format!(
                    "this pod spec carries the worker token volume and env but runs as {account:?}, which is not a worker identity: it was renamed after the transformer ran (a namePrefix or nameSuffix in a later kustomization?), and ICMS will not accept it; run the transformer in the overlay that sets the final names"
                ))
                .rule(RENAMED),
                at("serviceAccountName"),
                volumes[i].line,
                out,
            );
            continue;
        }
        for (i, v, audience) in workload::projected_audiences(spec) {
            if audience.starts_with("nvcf-icms:") {
                push(
                    Finding::warning(format!(
                        "a token with audience {audience:?} is projected for {account:?}, which is not a worker account: ICMS accepts tokens only from worker identities the agent registered; drop the volume or use the worker identity"
                    ))
                    .rule(ICMS_AUDIENCE),
                    at(&format!("volumes[{i}]")),
                    v.line,
                    out,
                );
            }
        }
    }
}

/// NVW108 and NVW110: walks every mapping of the object.
fn check_references(obj: &Object, out: &mut Vec<Finding>) {
    let mut found = Vec::new();
    walk_refs(obj.node, &mut String::new(), &mut found);
    for (field, line, f) in found {
        out.push(
            f.resource(Some(obj.resource_ref()))
                .field(field)
                .at(obj.location())
                .line(line),
        );
    }
}

fn walk_refs(n: &Node, path: &mut String, out: &mut Vec<(String, u32, Finding)>) {
    let len = path.len();
    if let Some(entries) = n.entries() {
        for (k, v) in entries {
            let key = k.text().unwrap_or("?");
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(key);
            if key == "metadata" {
                if let Some((ak, _)) = v
                    .get("annotations")
                    .and_then(|a| a.entry(identity::INFRA_ANNOTATION))
                {
                    out.push((
                        format!("{path}.annotations.{}", identity::INFRA_ANNOTATION),
                        ak.line,
                        Finding::error(format!(
                            "{} is the NVCF agent's own mark: the agent registers with ICMS pods that carry it, and rejects workload objects that do; remove it",
                            identity::INFRA_ANNOTATION
                        ))
                        .rule(INFRA_ANNOTATION),
                    ));
                }
            }
            if key == "serviceAccountRef" || key == "serviceAccount" {
                if let Some(name) = v.get("name").and_then(Node::text).filter(|n| is_worker(n)) {
                    let line = v.get("name").map_or(v.line, |n| n.line);
                    out.push((
                        format!("{path}.name"),
                        line,
                        Finding::error(format!(
                            "{key}.name {name:?} is a reserved NVCF worker account: whatever reads this reference (a chart, an operator, a secret store) would act as the worker; use another ServiceAccount"
                        ))
                        .rule(ACCOUNT_REFERENCE),
                    ));
                }
            }
            if v.as_scalar().is_none() {
                walk_refs(v, path, out);
            }
            path.truncate(len);
        }
    } else if let Some(items) = n.items() {
        for (i, v) in items.iter().enumerate() {
            if v.as_scalar().is_some() {
                continue;
            }
            path.push_str(&format!("[{i}]"));
            walk_refs(v, path, out);
            path.truncate(len);
        }
    }
}

/// NVW113: identities of different workloads with one name in namespaces that can
/// be the same (hashed and plain names compare as the strings they are).
fn check_collisions(objects: &[Object], out: &mut Vec<Finding>) {
    let mut seen: HashMap<String, Vec<(Option<&str>, Marks)>> = HashMap::new();
    for obj in objects.iter().filter(|o| o.kind() == "ServiceAccount") {
        let Some(marks @ Marks::Workload { .. }) = marks_of(obj.node) else {
            continue;
        };
        if marks.identity_name() != obj.name() {
            continue;
        }
        let others = seen.entry(obj.name().to_string()).or_default();
        if let Some((ns, other)) = others
            .iter()
            .find(|(ns, m)| *m != marks && namespaces_collide(*ns, obj.namespace()))
        {
            out.push(
                Finding::error(format!(
                    "identity {:?} of {} collides with the one of {} (namespace {}): one ServiceAccount cannot be two workloads' identity; rename one workload",
                    obj.name(),
                    marks.describe(),
                    other.describe(),
                    ns.unwrap_or("omitted")
                ))
                .rule(IDENTITY_COLLISION)
                .resource(Some(obj.resource_ref()))
                .field("metadata.name")
                .at(obj.location())
                .line(obj.node.line),
            );
        }
        others.push((obj.namespace(), marks));
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
        if powers.is_empty() {
            continue;
        }
        // resourceNames narrow the grant: to a worker account it is an error, to
        // other accounts only it is what NVW105 asks for.
        let names = strings(rule, "resourceNames");
        let workers: Vec<&String> = names
            .iter()
            .filter(|n| {
                is_worker(n)
                    || n.strip_prefix("system:serviceaccount:")
                        .and_then(|r| r.split_once(':'))
                        .is_some_and(|(_, sa)| is_worker(sa))
            })
            .collect();
        let finding = if !workers.is_empty() {
            Finding::error(format!(
                "{} {:?} grants {} for worker account {}: whoever holds it obtains a worker token without being the worker; drop it",
                obj.kind(),
                obj.name(),
                powers.join(" and "),
                workers.iter().map(|w| format!("{w:?}")).collect::<Vec<_>>().join(", ")
            ))
            .rule(MINT_FOR_WORKER)
        } else if names.is_empty() {
            Finding::warning(format!(
                "{} {:?} grants {}: whoever holds it can obtain a worker token without being the worker; narrow it with resourceNames or drop it",
                obj.kind(),
                obj.name(),
                powers.join(" and ")
            ))
            .rule(TOKEN_MINT_OR_IMPERSONATE)
        } else {
            continue;
        };
        out.push(
            finding
                .resource(Some(obj.resource_ref()))
                .field(format!("rules[{i}]"))
                .at(obj.location())
                .line(rule.line),
        );
    }
}
