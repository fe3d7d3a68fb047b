//! Taking the identity out again: `uninject`, and `prune` for workloads no longer
//! selected. Both act only on the transformer's own output, recognised by the marks
//! on its trio and the exact shape of what it adds; anything that merely looks like
//! it is reported and left alone.

use std::collections::{HashMap, HashSet};

use crate::guard::{self, Trios};
use crate::identity::{self, Marks};
use crate::manifest::batch::{Addr, Batch, Object};
use crate::manifest::{from_json, Node, Style};
use crate::recognize::{self, Record};
use crate::report::Finding;
use crate::report::{ObjectReport, Outcome, Status};
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
    // Any audience and lifetime (an older config's), any container left out.
    let surface = recognize::Surface {
        token: TokenWant::Any,
        skip: &[],
        any_untouched: true,
    };
    match recognize::problems(spec, account, &surface).first() {
        Some(p) => look_alike(p.message.clone()),
        None => Recognition::Own {
            account: account.to_string(),
            marks,
        },
    }
}

/// Whether a container carries the exact token mount and env.
pub fn container_has_token(c: &Node) -> bool {
    workload::check_container(c).exact()
}

/// Takes the token mount and env out of one container; a list left empty goes too
/// (inject created it: the transformer's mount and env are never the only entries
/// of a list the author wrote empty, except in that rare case).
/// `authors` lists the contract env the container's author had set before inject
/// (the record): those stay.
pub fn strip_container(c: &mut Node, authors: &[String]) {
    retain_list(c, "volumeMounts", |m| {
        m.str_at(&["name"]) != Some(identity::TOKEN_VOLUME)
    });
    retain_list(c, "env", |e| {
        !identity::env_vars().iter().any(|(name, value)| {
            e.str_at(&["name"]) == Some(name)
                && e.str_at(&["value"]) == Some(value)
                && !authors.iter().any(|a| a == name)
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
pub fn describe_restored(record: &Record) -> Vec<String> {
    identity::REPLACED_KEYS
        .iter()
        .filter_map(|k| record.values.get(*k).map(|v| format!("restored {k} {v}")))
        .collect()
}

/// The record inject left on a workload (empty if none), judged as the guard
/// judges it.
pub fn recorded(root: &Node) -> Result<Record, String> {
    Record::of(root).map(Option::unwrap_or_default)
}

/// Takes the transformer's output out of a recognised workload: the token volume,
/// every container's mount and env, the accounts and automount it set (the
/// recorded values come back), and its annotation. Returns what it restored.
pub fn strip(root: &mut Node, spec_path: &[&str]) -> Vec<String> {
    let record = recorded(root).unwrap_or_default();
    let spec = root.path_mut(spec_path).expect("recognised pod spec");
    for key in identity::REPLACED_KEYS {
        match record.values.get(key) {
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
            for c in items.iter_mut() {
                let name = c.str_at(&["name"]).unwrap_or("").to_string();
                strip_container(c, record.env.get(&name).map_or(&[], Vec::as_slice));
            }
        }
    }
    if let Some(meta) = root.get_mut("metadata") {
        retain_map(meta, "annotations", identity::REPLACED_ANNOTATION);
    }
    describe_restored(&record)
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
///
/// The guard runs on the input and on the output, as it runs before inject: a
/// finding means an error outcome (the faces write nothing), so uninject never
/// restores, nor passes through, a forged identity.
pub fn uninject(batch: &mut Batch) -> Outcome {
    let none = HashMap::new();
    let allow = guard::Allow { self_refs: &none };
    let mut out = Outcome {
        findings: guard::check(batch, &allow),
        ..Outcome::default()
    };
    if out.has_errors() {
        return out;
    }
    strip_identities(batch, &mut out);
    if out.has_errors() {
        return out;
    }
    for f in guard::check(batch, &allow) {
        let after = Finding {
            message: format!("uninject's output would carry this: {}", f.message),
            ..f
        };
        out.findings.push(after);
    }
    out
}

fn strip_identities(batch: &mut Batch, out: &mut Outcome) {
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
        return;
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
