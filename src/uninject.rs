//! Taking the identity out again: `uninject`, and `prune` for workloads no longer
//! selected. Both act only on the transformer's own output, recognised by the marks
//! on its trio and the exact shape of what it adds; anything that merely looks like
//! it is reported and left alone.

use std::collections::{HashMap, HashSet};

use crate::guard::Trios;
use crate::identity::{self, Marks};
use crate::inject::{ObjectReport, Outcome, Status};
use crate::manifest::batch::{Addr, Batch, Object};
use crate::manifest::{from_json, to_json, Node, Style};
use crate::report::Finding;
use crate::workload::{self, TokenWant};

/// What a workload carries of a worker identity.
#[derive(Debug, PartialEq)]
pub enum Recognition {
    /// Nothing: no worker account, token volume, mount or env.
    NotInjected,
    /// The transformer's output, for the identity of these marks.
    Own { account: String, marks: Marks },
    /// Something of a worker identity the transformer did not write as it is.
    LookAlike(String),
}

/// Whether `obj` (a workload kind) carries the transformer's output: its account is
/// a reserved name whose trio in the batch carries the transformer's marks for this
/// workload (or its namespace), and its pod spec holds one token volume of the
/// contract's shape (any audience and lifetime: an older config's) and, in each
/// container, the exact mount and env or none of them.
pub fn recognise(obj: &Object, trios: &Trios) -> Recognition {
    let Some(spec) = workload::pod_spec_path(obj.api_version(), obj.kind())
        .and_then(|p| obj.node.path(p))
        .filter(|s| s.is_map())
    else {
        return Recognition::NotInjected;
    };
    let account = spec
        .str_at(&["serviceAccountName"])
        .or_else(|| spec.str_at(&["serviceAccount"]))
        .unwrap_or("");
    let has_volume = spec
        .get("volumes")
        .and_then(Node::items)
        .unwrap_or(&[])
        .iter()
        .any(|v| v.str_at(&["name"]) == Some(identity::TOKEN_VOLUME));
    if !identity::is_reserved(account) && !has_volume {
        return Recognition::NotInjected;
    }
    let look_alike = |why: String| Recognition::LookAlike(why);
    if !identity::is_reserved(account) {
        return look_alike(format!(
            "it has volume {:?} but its account {account:?} is not a worker identity",
            identity::TOKEN_VOLUME
        ));
    }
    let marks = match trios.exact(obj.namespace(), account) {
        Ok(m) => m,
        Err(why) => return look_alike(why),
    };
    let names_this = match &marks {
        Marks::Workload {
            api_version,
            kind,
            name,
        } => {
            (api_version.as_str(), kind.as_str(), name.as_str())
                == (obj.api_version(), obj.kind(), obj.name())
        }
        Marks::Namespace => true,
    };
    if !names_this {
        return look_alike(format!("its trio is marked for {}", marks.describe()));
    }
    match own_spec_problem(spec, account) {
        Some(why) => look_alike(why),
        None => Recognition::Own {
            account: account.to_string(),
            marks,
        },
    }
}

/// Why a pod spec is not what the transformer writes, under any config.
fn own_spec_problem(spec: &Node, account: &str) -> Option<String> {
    if let Some(v) = spec.get("serviceAccount").filter(|v| !v.is_null()) {
        if v.as_str() != Some(account) {
            return Some(format!("serviceAccount is not {account:?}"));
        }
    }
    if spec.get("automountServiceAccountToken").map(to_json) != Some(serde_json::Value::Bool(false))
    {
        return Some("automountServiceAccountToken is not false".into());
    }
    let ours: Vec<&Node> = spec
        .get("volumes")
        .and_then(Node::items)
        .unwrap_or(&[])
        .iter()
        .filter(|v| v.str_at(&["name"]) == Some(identity::TOKEN_VOLUME))
        .collect();
    match ours.as_slice() {
        [v] if workload::is_token_volume(v, &TokenWant::Any) => {}
        [] => return Some(format!("it has no volume {:?}", identity::TOKEN_VOLUME)),
        _ => {
            return Some(format!(
                "volume {:?} is not the projected token the transformer writes",
                identity::TOKEN_VOLUME
            ))
        }
    }
    for list in ["containers", "initContainers"] {
        for c in spec.get(list).and_then(Node::items).unwrap_or(&[]) {
            let check = workload::check_container(c);
            let untouched = !check.has_mount
                && check.missing_env.len() == identity::env_vars().len()
                && check.problems.is_empty();
            if !(check.exact() || untouched) {
                let name = c.str_at(&["name"]).unwrap_or("");
                return Some(match check.problems.first() {
                    Some(p) => format!("{list} {name:?}: {}", p.message),
                    None => format!("{list} {name:?} has only part of the token mount and env"),
                });
            }
        }
    }
    None
}

/// Whether a container carries the exact token mount and env.
pub fn container_has_token(c: &Node) -> bool {
    workload::check_container(c).exact()
}

/// Takes the token mount and env out of one container; a list left empty goes too
/// (inject created it: the transformer's mount and env are never the only entries
/// of a list the author wrote empty, except in that rare case).
pub fn strip_container(c: &mut Node) {
    retain_list(c, "volumeMounts", |m| {
        m.str_at(&["name"]) != Some(identity::TOKEN_VOLUME)
    });
    retain_list(c, "env", |e| {
        !identity::env_vars().iter().any(|(name, value)| {
            e.str_at(&["name"]) == Some(name) && e.str_at(&["value"]) == Some(value)
        })
    });
}

fn retain_list(n: &mut Node, key: &str, keep: impl Fn(&Node) -> bool) {
    let Some(items) = n.get_mut(key).and_then(Node::items_mut) else {
        return;
    };
    items.retain(|i| keep(i));
    if items.is_empty() {
        n.remove(key);
    }
}

/// What `strip` restored, for the report.
pub fn describe_restored(recorded: &serde_json::Map<String, serde_json::Value>) -> Vec<String> {
    identity::REPLACED_KEYS
        .iter()
        .filter_map(|k| recorded.get(*k).map(|v| format!("restored {k} {v}")))
        .collect()
}

/// The values inject recorded on a workload, if it recorded any.
pub fn recorded(root: &Node) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let Some(text) = root
        .path(&["metadata", "annotations", identity::REPLACED_ANNOTATION])
        .and_then(Node::as_str)
    else {
        return Ok(Default::default());
    };
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(m))
            if m.keys()
                .all(|k| identity::REPLACED_KEYS.contains(&k.as_str())) =>
        {
            Ok(m)
        }
        _ => Err(format!(
            "annotation {} is not a JSON object of {}",
            identity::REPLACED_ANNOTATION,
            identity::REPLACED_KEYS.join(", ")
        )),
    }
}

/// Takes the transformer's output out of a recognised workload: the token volume,
/// every container's mount and env, the accounts and automount it set (the
/// recorded values come back), and its annotation. Returns what it restored.
pub fn strip(root: &mut Node, spec_path: &[&str]) -> Vec<String> {
    let recorded = recorded(root).unwrap_or_default();
    let spec = root.path_mut(spec_path).expect("recognised pod spec");
    for key in identity::REPLACED_KEYS {
        match recorded.get(key) {
            Some(v) => {
                let mut restored = from_json(v);
                // In the quoting of the value it replaces: a JSON document stays JSON.
                let quoted = spec.get(key).and_then(Node::as_scalar).map(|s| s.style);
                if let (Some(style @ (Style::DoubleQuoted | Style::SingleQuoted)), true) =
                    (quoted, v.is_string())
                {
                    if let crate::manifest::Value::Scalar(s) = &mut restored.value {
                        s.style = style;
                    }
                }
                spec.set(key, restored);
            }
            // `serviceAccount: null` was left as written; anything else inject set.
            None if key == "serviceAccount" && spec.get(key).is_some_and(Node::is_null) => {}
            None => {
                spec.remove(key);
            }
        }
    }
    retain_list(spec, "volumes", |v| {
        v.str_at(&["name"]) != Some(identity::TOKEN_VOLUME)
    });
    for list in ["containers", "initContainers"] {
        if let Some(items) = spec.get_mut(list).and_then(Node::items_mut) {
            items.iter_mut().for_each(strip_container);
        }
    }
    if let Some(meta) = root.get_mut("metadata") {
        retain_map(meta, "annotations", identity::REPLACED_ANNOTATION);
    }
    describe_restored(&recorded)
}

fn retain_map(n: &mut Node, key: &str, drop: &str) {
    let Some(m) = n.get_mut(key) else { return };
    m.remove(drop);
    if m.entries().is_some_and(<[_]>::is_empty) {
        n.remove(key);
    }
}

/// The trio objects of an identity, by kind, in the batch.
pub fn trio_addrs<'a>(trios: &Trios<'a>, ns: Option<&str>, name: &str) -> Vec<Object<'a>> {
    identity::TRIO_KINDS
        .iter()
        .filter_map(|k| trios.get(k, ns, name).copied())
        .collect()
}

/// `uninject`: takes the transformer's identity out of every workload that carries
/// it, selected or not, and removes its trio once no workload uses it. Workloads
/// without an identity pass untouched; look-alikes are reported and left as they are.
pub fn uninject(batch: &mut Batch) -> Outcome {
    let mut out = Outcome::default();
    let objects = batch.objects();
    let trios = Trios::index(&objects);
    let mut strip_at: Vec<(Addr, &'static [&'static str])> = Vec::new();
    let mut statuses: HashMap<Addr, Status> = HashMap::new();
    // Identities (namespace, name) whose users are all uninjected, and users left.
    let mut released: HashSet<(Option<String>, String)> = HashSet::new();
    let mut still_used: HashSet<(Option<String>, String)> = HashSet::new();
    for obj in &objects {
        let Some(spec_path) = workload::pod_spec_path(obj.api_version(), obj.kind()) else {
            continue;
        };
        match recognise(obj, &trios) {
            Recognition::NotInjected => {
                statuses.insert(obj.addr, Status::Unchanged("no worker identity"));
            }
            Recognition::Own { account, .. } => {
                if let Err(why) = recorded(obj.node) {
                    out.findings.push(
                        Finding::error(format!("{why}; fix or remove it, then uninject"))
                            .resource(Some(obj.resource_ref()))
                            .field(format!(
                                "metadata.annotations.{}",
                                identity::REPLACED_ANNOTATION
                            ))
                            .at(obj.location()),
                    );
                    continue;
                }
                released.insert((obj.namespace().map(Into::into), account));
                strip_at.push((obj.addr, spec_path));
            }
            Recognition::LookAlike(why) => {
                if let Some(account) = account_of(obj, spec_path) {
                    still_used.insert((obj.namespace().map(Into::into), account));
                }
                out.findings.push(
                    Finding::warning(format!(
                        "carries a worker identity the transformer did not write as it is ({why}); left untouched: undo it by hand"
                    ))
                    .resource(Some(obj.resource_ref()))
                    .at(obj.location()),
                );
                statuses.insert(obj.addr, Status::Skipped("not the transformer's output"));
            }
        }
    }
    let mut removals = Vec::new();
    for (ns, name) in released.difference(&still_used) {
        for member in trio_addrs(&trios, ns.as_deref(), name) {
            statuses.insert(member.addr, Status::Removed);
            removals.push(member.addr);
        }
    }
    let reports: Vec<ObjectReport> = objects
        .iter()
        .map(|o| ObjectReport {
            resource: o.resource_ref(),
            status: statuses
                .remove(&o.addr)
                .unwrap_or_else(|| other_status(o, &trios)),
        })
        .collect();
    let addrs: Vec<Addr> = objects.iter().map(|o| o.addr).collect();
    if out.has_errors() {
        return out;
    }
    let mut restored: HashMap<Addr, Vec<String>> = HashMap::new();
    for (addr, spec_path) in strip_at {
        restored.insert(addr, strip(batch.object_mut(addr), spec_path));
    }
    out.reports = reports;
    for (r, addr) in out.reports.iter_mut().zip(addrs) {
        if let Some(what) = restored.remove(&addr) {
            r.status = Status::Uninjected(what);
        }
    }
    for addr in removals {
        batch.remove(addr);
    }
    batch.commit_inserts();
    out
}

/// The report of an object uninject neither changes nor removes.
fn other_status(o: &Object, trios: &Trios) -> Status {
    if trios.get(o.kind(), o.namespace(), o.name()).is_some() {
        Status::Unchanged(
            "part of a worker identity still in use, or whose workload is not in the input",
        )
    } else {
        Status::Skipped("not a workload")
    }
}

/// The account a workload's pod spec names (`serviceAccountName`, else the
/// deprecated `serviceAccount`).
pub fn account_of(obj: &Object, spec_path: &[&str]) -> Option<String> {
    let spec = obj.node.path(spec_path)?;
    spec.str_at(&["serviceAccountName"])
        .or_else(|| spec.str_at(&["serviceAccount"]))
        .map(str::to_string)
}
