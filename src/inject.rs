//! The transformer: gives selected workloads their worker identity.
//!
//! Plan first, act second: `plan` reads the batch and decides every change and every
//! conflict without touching it; only a plan without errors is applied, so output is
//! never half-transformed.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::config::Config;
use crate::guard;
use crate::identity::{self, Marks, Naming, Owner, TokenSpec};
use crate::manifest::batch::{
    self, Addr, Batch, Need, Object, INDEX_ANNOTATIONS, PATH_ANNOTATIONS,
};
use crate::manifest::{from_json, to_json, Document, Edited, Node, Style, Value};
use crate::recognize::{self, Check, Record};
use crate::report::{Finding, ObjectReport, Outcome, ResourceRef, Status, KEPT_NOT_SELECTED};
use crate::rules;
use crate::uninject::{self, Recognition};
use crate::workload;

/// One selected workload and what it needs.
#[derive(Debug)]
struct WorkloadPlan {
    addr: Addr,
    spec_path: &'static [&'static str],
    name: String,
    owner: Owner,
    /// Container lists (`containers`, maybe `initContainers`) with the indexes to inject.
    containers: Vec<(&'static str, Vec<usize>)>,
    spec_changes: bool,
    /// The trio objects missing from the input, to generate.
    missing: Vec<usize>,
    json_style: bool,
    /// The identity it already carries when it is the transformer's own output.
    own: Option<String>,
    /// Own output whose token volume has another audience or lifetime.
    volume_update: bool,
    /// Containers whose token mount and env go (skipped now, or init containers
    /// no longer included).
    strip: Vec<(&'static str, Vec<usize>)>,
    /// What inject replaces, recorded on the workload for uninject.
    record: Option<Record>,
    /// For `updated`: what changed.
    changes: Vec<String>,
    /// Applied already: as it was read (`Early`), or as soon as it was planned (its
    /// document read again).
    applied: bool,
    /// The trio members `apply` adds, made in plan order: in a ResourceList their
    /// kpt indexes are then the same whichever workloads were applied earlier.
    trio: Vec<Node>,
}

impl WorkloadPlan {
    /// The plan of a workload before its pod spec is read.
    fn new(
        obj: &Object,
        spec_path: &'static [&'static str],
        owner: Owner,
        own: Option<String>,
    ) -> WorkloadPlan {
        WorkloadPlan {
            addr: obj.addr,
            spec_path,
            name: owner.marks.identity_name(),
            owner,
            containers: Vec::new(),
            spec_changes: false,
            missing: Vec::new(),
            json_style: obj.in_flow_document(),
            own,
            volume_update: false,
            strip: Vec::new(),
            record: None,
            changes: Vec::new(),
            applied: false,
            trio: Vec::new(),
        }
    }
}

/// What the plan does besides the selected workloads: identities taken out of
/// workloads no longer selected (prune) and trios no workload uses any more.
#[derive(Default)]
struct Cleanup {
    prune: Vec<(Addr, &'static [&'static str])>,
    remove: Vec<Addr>,
    statuses: HashMap<Addr, Status>,
}

/// Injects the identity into every selected workload of the batch, or changes
/// nothing and reports why.
pub fn inject(batch: &mut Batch, cfg: &Config) -> Outcome {
    let mut out = Outcome::default();
    if !cfg.is_psat() {
        // Nothing to inject, but a forged identity is still refused.
        out.findings.extend(guard::check(
            batch,
            &guard::Allow {
                self_refs: &HashMap::new(),
            },
        ));
        out.findings.push(Finding::info(format!(
            "tokenSource is {:?}: no PSAT worker identity is injected (only psat is provisioned by manifests)",
            cfg.token_source
        )));
        return out;
    }
    let token = match cfg.token_spec() {
        Ok(t) => t,
        Err(e) => {
            out.findings.push(Finding::error(e.to_string()));
            return out;
        }
    };
    let (plans, cleanup, done) = plan(batch, cfg, &token, &mut out);
    if out.has_errors() {
        batch.undo_decided();
        return out;
    }
    for d in done {
        batch.put_back(d.addr, d.doc, d.before);
    }
    apply(batch, plans, &token, &cleanup);
    out
}

/// A workload whose document was read again (`Document::reread`), applied and
/// frozen as soon as planned, to be put back into the batch with its new trio (or
/// only its trio: one edited as it was read, `Early`).
struct Done {
    addr: Addr,
    doc: Option<Result<Edited, Box<Document>>>,
    before: Vec<Document>,
}

/// What a selected workload's first read decided (`Need::Now`): all of its plan
/// that depends on the workload alone, which is all that edits it when it carries
/// no identity yet. The rest (its trio, collisions, kpt indexes) is the batch's, and
/// decided when its turn comes in `plan`, from what is kept (`EditedEarly`).
#[derive(Debug)]
struct Early {
    plan: WorkloadPlan,
    findings: Vec<Finding>,
    token: TokenSpec,
}

/// What `plan` reads of a workload edited as it was read (`Early`); its identity's
/// name and owner come from its skeleton again (`owner_of`).
#[derive(Debug)]
struct EditedEarly {
    spec_changes: bool,
    json_style: bool,
    findings: Vec<Finding>,
}

impl batch::Decided for Early {
    fn edit(&self, root: &mut Node) -> bool {
        // With an error nothing is applied: left as read.
        let edits = edits_workload(&self.plan) && !crate::report::has_errors(&self.findings);
        if edits {
            edit_workload(root, &self.plan, &self.token);
        }
        edits
    }
    fn keep(self: Box<Self>) -> batch::Kept {
        std::sync::Arc::new(EditedEarly {
            spec_changes: self.plan.spec_changes,
            json_style: self.plan.json_style,
            findings: self.findings,
        })
    }
}

/// Who claims an identity name: (namespace, marks, who for messages).
type Claim<'a> = (Option<&'a str>, Marks, String);

fn plan(
    batch: &Batch,
    cfg: &Config,
    token: &TokenSpec,
    out: &mut Outcome,
) -> (Vec<WorkloadPlan>, Cleanup, Vec<Done>) {
    let objects = batch.objects();
    // The kpt indexes new items take, given in plan order to the workloads read
    // again here and to the others in `apply`.
    let mut next_index = next_free_indexes(batch);
    let existing = guard::Trios::index(&objects);
    let mut plans = Vec::new();
    // Every selected workload that got a plan.
    let mut selected = HashSet::new();
    let mut self_refs = HashMap::new();
    // Identity name -> (namespace, marks, who) of every claim: selected workloads
    // and the trios the input already declares.
    let mut names: HashMap<String, Vec<Claim>> = HashMap::new();
    for obj in &objects {
        if obj.kind() == "ServiceAccount" {
            if let Some(m @ Marks::Workload { .. }) = guard::marks_of(obj.node) {
                if m.identity_name() == obj.name() {
                    let who = format!("{} (by {})", m.describe(), obj.resource_ref().display());
                    names.entry(obj.name().to_string()).or_default().push((
                        obj.namespace(),
                        m,
                        who,
                    ));
                }
            }
        }
    }
    let mut trio_members: HashSet<Addr> = HashSet::new();
    // Per-namespace identities already planned: one trio per namespace.
    let mut planned_trios: HashSet<(Option<&str>, String)> = HashSet::new();
    let mut cleanup = Cleanup::default();
    // Identities a workload leaves (naming changed, pruned), and the account every
    // workload has after this run: a trio nobody uses any more goes.
    let mut left: HashSet<(Option<&str>, String)> = HashSet::new();
    let mut accounts: Vec<(Option<&str>, String)> = Vec::new();

    // A selected workload edited as it was read has its trio and conflicts decided
    // now (`Need::Now`); one whose tree was dropped as read is read again now, and
    // applied as soon as planned: one tree at a time is held (`Need::Later`).
    let done = batch.with_rereads(|rereads| {
        let mut done = Vec::new();
        for outer in &objects {
            let Some(spec_path) = workload::pod_spec_path(outer.api_version(), outer.kind()) else {
                continue;
            };
            // Decided as it was read: selected, and no earlier output of inject.
            let early = outer.decided::<EditedEarly>();
            let reread = outer.is_reread().then(|| {
                rereads
                    .next()
                    .expect("every dropped workload is read again")
            });
            let obj = match &reread {
                Some(doc) => outer.in_document(doc),
                // Not selected, and no account the guard would question.
                None if outer.is_evicted() && early.is_none() => continue,
                None => *outer,
            };
            // What outlives this object's turn borrows from the batch.
            let ns = outer.namespace();
            let recognition = match early {
                Some(_) => Recognition::NotInjected,
                None => uninject::recognise(&obj, &existing),
            };
            if early.is_none() && !is_selected(&obj, spec_path, cfg) {
                if let Recognition::Own { account, .. } = recognition {
                    // Named by the guard as what inject produced earlier.
                    self_refs.insert(obj.addr, account.clone());
                    if cfg.prune {
                        match uninject::recorded(obj.node) {
                            Ok(recorded) => {
                                let restored = uninject::describe_restored(&recorded);
                                cleanup
                                    .statuses
                                    .insert(obj.addr, Status::Uninjected(restored));
                            }
                            Err(why) => out.findings.push(
                                Finding::error(format!("{why}; fix or remove it, then prune"))
                                    .resource(Some(obj.resource_ref()))
                                    .at(obj.location()),
                            ),
                        }
                        cleanup.prune.push((obj.addr, spec_path));
                        left.insert((ns, account));
                        continue;
                    }
                    cleanup
                        .statuses
                        .insert(obj.addr, Status::Unchanged(KEPT_NOT_SELECTED));
                    accounts.push((ns, account));
                } else if let Some(a) = uninject::account_of(&obj, spec_path) {
                    accounts.push((ns, a));
                }
                continue;
            }
            let own = match recognition {
                Recognition::Own { account, .. } => Some(account),
                _ => None,
            };
            let loc = obj.location();
            let rref = obj.resource_ref();
            if obj.name().is_empty() {
                out.findings.push(
                    Finding::error("selected workload has no metadata.name")
                        .resource(Some(rref))
                        .at(loc),
                );
                continue;
            }
            let owner = owner_of(&obj, cfg);
            let name = owner.marks.identity_name();
            let claims = names.entry(name.clone()).or_default();
            if let Some((theirs, _, other)) = claims.iter().find(|(ns, m, _)| {
                *m != owner.marks && guard::namespaces_collide(*ns, obj.namespace())
            }) {
                out.findings.push(
                    Finding::error(collision(&rref, &name, other, *theirs))
                        .rule(guard::IDENTITY_COLLISION)
                        .resource(Some(rref.clone()))
                        .at(loc.clone()),
                );
            }
            claims.push((ns, owner.marks.clone(), rref.display()));
            // Own output names the identity it carries until this run changes it.
            self_refs.insert(obj.addr, own.clone().unwrap_or_else(|| name.clone()));
            accounts.push((ns, name.clone()));
            if let Some(old) = own.as_ref().filter(|old| **old != name) {
                left.insert((ns, old.clone()));
            }
            let (mut p, mut findings) = match early {
                Some(early) => {
                    let mut p = WorkloadPlan::new(&obj, spec_path, owner, None);
                    p.spec_changes = early.spec_changes;
                    p.json_style = early.json_style;
                    (p, early.findings.clone())
                }
                None => match plan_workload(&obj, spec_path, owner, own, cfg, token) {
                    Some(planned) => planned,
                    None => {
                        out.findings.push(
                            Finding::error(format!(
                                "selected workload has no pod spec at {}",
                                workload::dotted(spec_path)
                            ))
                            .resource(Some(rref))
                            .field(workload::dotted(spec_path))
                            .at(loc),
                        );
                        continue;
                    }
                },
            };
            let first_claim = planned_trios.insert((ns, name.clone()));
            for (i, kind) in identity::TRIO_KINDS.iter().enumerate() {
                match existing.get(kind, obj.namespace(), &name) {
                    Some(member) if trio_members.insert(member.addr) => {
                        check_existing_member(member, &p.owner, &name, &mut findings);
                        account_after_pod(&obj, member, i, &mut findings);
                    }
                    Some(member) => account_after_pod(&obj, member, i, &mut findings),
                    None if first_claim => p.missing.push(i),
                    None => {}
                }
            }
            let ctx = Finding::error("")
                .resource(Some(rref.clone()))
                .at(loc.clone());
            out.findings.extend(findings.into_iter().map(|f| Finding {
                resource: f.resource.or(ctx.resource.clone()),
                location: if f.location.file.is_some() {
                    f.location
                } else {
                    // Keep the line of the field the finding is about.
                    crate::report::Location {
                        line: f.location.line.or(ctx.location.line),
                        ..ctx.location.clone()
                    }
                },
                ..f
            }));
            out.reports.push(ObjectReport {
                resource: rref,
                status: if p.own.is_some() && !p.changes.is_empty() {
                    Status::Updated(p.changes.clone())
                } else if p.own.is_none() && (p.spec_changes || !p.missing.is_empty()) {
                    Status::Injected
                } else {
                    Status::Unchanged("already has its identity")
                },
            });
            for &i in &p.missing {
                let resource = ResourceRef {
                    api_version: if i == 0 {
                        "v1".into()
                    } else {
                        "rbac.authorization.k8s.io/v1".into()
                    },
                    kind: identity::TRIO_KINDS[i].into(),
                    name: name.clone(),
                    namespace: obj.namespace().map(Into::into),
                };
                out.reports.push(ObjectReport {
                    resource,
                    status: Status::Generated,
                });
            }
            // (With errors nothing is applied: the plan goes on to find them all.)
            let krm = batch.sources[p.addr.source].kind.is_krm();
            // Every plan's trio is made in plan order, the kpt indexes with it.
            let trio =
                (!out.has_errors()).then(|| new_trio(&p, &obj, krm.then_some(&mut next_index)));
            if let Some(doc) = reread {
                p.applied = true;
                if let Some(trio) = trio {
                    done.push(apply_reread(doc, &p, token, trio));
                }
            } else if early.is_some() {
                p.applied = true;
                if let Some(trio) = trio {
                    done.push(Done {
                        addr: p.addr,
                        doc: None,
                        before: frozen_trio(trio),
                    });
                }
            } else {
                p.trio = trio.unwrap_or_default();
            }
            selected.insert(p.addr);
            // Only what `apply` has left to do is kept: a large stream's workloads
            // are mostly applied already, as they were read or read again.
            if !p.applied {
                plans.push(p);
            }
        }
        done
    });

    // The guard runs on the input first: a forged reference blocks injection. A
    // selected workload naming its own derived account is what inject produces.
    out.findings.extend(guard::check(
        batch,
        &guard::Allow {
            self_refs: &self_refs,
        },
    ));

    // Trios of identities left behind that no workload uses any more.
    for (ns, name) in &left {
        let used = accounts
            .iter()
            .any(|(ans, a)| a == name && guard::namespaces_collide(*ans, *ns));
        if used {
            continue;
        }
        for member in uninject::trio_addrs(&existing, *ns, name) {
            if guard::marks_of(member.node).is_some() {
                cleanup.statuses.insert(member.addr, Status::Removed);
                cleanup.remove.push(member.addr);
            }
        }
    }

    report_others(
        &objects,
        &selected,
        &trio_members,
        &cleanup.statuses,
        &mut out.reports,
    );
    (plans, cleanup, done)
}

/// Why a workload cannot have the identity `name`: `other` in namespace `ns` has it.
fn collision(rref: &ResourceRef, name: &str, other: &str, ns: Option<&str>) -> String {
    format!(
        "{} would get identity {name:?}, which is already {other}'s (namespace {}); an omitted namespace collides with any, and a hashed long name can equal a short one: rename one of them",
        rref.display(),
        ns.unwrap_or("omitted")
    )
}

/// Reports for the objects that are not selected workloads, in input order.
fn report_others(
    objects: &[Object],
    selected: &HashSet<Addr>,
    trio: &HashSet<Addr>,
    statuses: &HashMap<Addr, Status>,
    reports: &mut Vec<ObjectReport>,
) {
    // The selected workloads' reports, each followed by its generated objects'.
    let mut selected_reports = std::mem::take(reports).into_iter().peekable();
    reports.reserve_exact(objects.len() + selected_reports.len());
    for obj in objects {
        let status = if selected.contains(&obj.addr) {
            reports.extend(selected_reports.next());
            while let Some(r) = selected_reports.next_if(|r| r.status == Status::Generated) {
                reports.push(r);
            }
            continue;
        } else if let Some(status) = statuses.get(&obj.addr) {
            status.clone()
        } else if trio.contains(&obj.addr) {
            Status::Unchanged("part of a worker identity")
        } else if workload::pod_spec_path(obj.api_version(), obj.kind()).is_some() {
            if obj.annotation(HELM_HOOK).is_some() {
                Status::Skipped("a Helm hook (helm.sh/hook): hooks get no worker identity")
            } else {
                Status::Skipped("not selected")
            }
        } else {
            Status::Skipped("not a workload")
        };
        reports.push(ObjectReport {
            resource: obj.resource_ref(),
            status,
        });
    }
}

/// The file Helm 4 gives each document it post-renders.
pub const HELM_POSTRENDER_FILENAME: &str = "postrenderer.helm.sh/postrender-filename";
/// A Helm hook: Helm creates it apart from the release's other objects.
pub const HELM_HOOK: &str = "helm.sh/hook";

/// What inject needs of `obj` after reading it (see `batch::evict`): the tree of an
/// object it matches against others (the kinds of a trio) or the guard has something
/// to say about; a selected workload's when its turn comes, to edit it; nothing of
/// the rest, which passes through as read.
pub fn need(obj: &Object, cfg: &Config) -> Need {
    if identity::TRIO_KINDS.contains(&obj.kind()) || !guard::clean_alone(obj) {
        return Need::Tree;
    }
    match workload::pod_spec_path(obj.api_version(), obj.kind()) {
        Some(path) if is_selected(obj, path, cfg) => match early(obj, path, cfg) {
            Some(early) => Need::Now(Box::new(early)),
            None => Need::Later,
        },
        _ => Need::Skeleton,
    }
}

/// A selected workload's plan as far as it depends on the workload alone, decided
/// as it is read: for one that carries no identity yet (recognising earlier output
/// needs the batch's trios) and has a name and a pod spec (else an error `plan`
/// reports).
fn early(obj: &Object, spec_path: &'static [&'static str], cfg: &Config) -> Option<Early> {
    let token = cfg.token_spec().ok().filter(|_| cfg.is_psat())?;
    let fresh = matches!(
        uninject::recognise(obj, &guard::Trios::index(&[])),
        Recognition::NotInjected
    );
    if !fresh || obj.name().is_empty() {
        return None;
    }
    let (plan, findings) = plan_workload(obj, spec_path, owner_of(obj, cfg), None, cfg, &token)?;
    Some(Early {
        plan,
        findings,
        token,
    })
}

/// The identity a selected workload gets under the config's naming.
fn owner_of(obj: &Object, cfg: &Config) -> Owner {
    match cfg.naming {
        Naming::PerWorkload => {
            Owner::workload(obj.api_version(), obj.kind(), obj.name(), obj.namespace())
        }
        Naming::PerNamespace => Owner {
            marks: Marks::Namespace,
            namespace: obj.namespace().map(Into::into),
        },
    }
}

/// What a selected workload's pod spec needs, with what is wrong with it; `None`
/// when it has no pod spec.
fn plan_workload(
    obj: &Object,
    spec_path: &'static [&'static str],
    owner: Owner,
    own: Option<String>,
    cfg: &Config,
    token: &TokenSpec,
) -> Option<(WorkloadPlan, Vec<Finding>)> {
    let spec = obj.node.path(spec_path).filter(|s| s.is_map())?;
    let mut p = WorkloadPlan::new(obj, spec_path, owner, own);
    let mut findings = Vec::new();
    check_pod_spec(obj, spec, cfg, token, &mut p, &mut findings);
    Some((p, findings))
}

fn is_selected(obj: &Object, spec_path: &[&str], cfg: &Config) -> bool {
    // A hook runs when Helm says (a pre-install hook before any of the release's
    // objects exist, so before an identity generated beside it) and Helm 3 never
    // post-renders hooks: leave hooks alone under every Helm version alike.
    if obj.annotation(HELM_HOOK).is_some() {
        return false;
    }
    let own = workload::label_map(obj.node.path(&["metadata", "labels"]));
    let template = workload::label_map(workload::template_labels(obj.node, spec_path));
    cfg.selector.matches(&own) || (!template.is_empty() && cfg.selector.matches(&template))
}

/// A bare Pod that comes before the ServiceAccount it is given (a namespace's
/// `nvcf-worker`, declared by an earlier run further down the stream): `kubectl
/// apply` creates in stream order, and the API server refuses a Pod whose account
/// does not exist yet (a controller's pods are retried and wait for it). The trio
/// stays where it was declared: moving documents between places, or files, is
/// not inject's to do unasked; the warning says what to move.
fn account_after_pod(obj: &Object, member: &Object, kind: usize, findings: &mut Vec<Finding>) {
    if kind != 0 || obj.kind() != "Pod" || obj.api_version() != "v1" || member.addr < obj.addr {
        return;
    }
    findings.push(
        Finding::warning(format!(
            "this Pod comes before ServiceAccount {:?}{} in the input: kubectl apply creates objects in order and the API server refuses a Pod whose account does not exist yet; move the ServiceAccount, Role and RoleBinding above the Pod (or apply twice)",
            member.name(),
            member.location().file.map(|f| format!(" ({f})")).unwrap_or_default()
        ))
        .field("spec.serviceAccountName"),
    );
}

fn check_existing_member(member: &Object, owner: &Owner, name: &str, findings: &mut Vec<Finding>) {
    let ns = owner.namespace.as_deref();
    let marks = guard::marks_of(member.node);
    let problem = guard::member_problem(member.kind(), member.node, name, ns)
        .map(str::to_string)
        .or_else(|| match &marks {
            Some(m) if *m == owner.marks => None,
            Some(m) => Some(format!("it is marked for {}", m.describe())),
            None => Some("it does not carry the transformer's marks (hand-written?)".into()),
        });
    if let Some(problem) = problem {
        findings.push(
            Finding::error(format!(
                "{} {name} already exists and does not match the worker identity: {problem}",
                member.kind()
            ))
            .resource(Some(member.resource_ref()))
            .at(member.location()),
        );
    }
}

fn names_in(annotation: Option<&str>) -> HashSet<&str> {
    annotation
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

fn check_pod_spec(
    obj: &Object,
    spec: &Node,
    cfg: &Config,
    token: &TokenSpec,
    p: &mut WorkloadPlan,
    findings: &mut Vec<Finding>,
) {
    let base = workload::dotted(p.spec_path);
    let line = |n: &Node| n.line;
    if let Some(old) = p.own.clone() {
        return check_own_pod_spec(obj, spec, cfg, token, &old, p, findings);
    }
    // What inject replaces is recorded; a record inject did not write is the
    // guard's (NVW116), never kept. A reserved account is never recorded (the record would restore it, NVW116):
    // the one inject gives is its own, another is a forgery it replaces.
    let mut record = Record::default();
    record.values = identity::REPLACED_KEYS
        .iter()
        .filter_map(|k| Some((k.to_string(), to_json(spec.get(k)?))))
        .filter(|(k, v)| !(k == "serviceAccount" && v.is_null()))
        .filter(|(_, v)| !v.as_str().is_some_and(|a| identity::is_reserved(a.trim())))
        .collect();
    ill_typed(spec, &base, findings);
    // A worker holds one token: inject does not turn a pod spec that already has
    // another, or an ephemeral container, into a worker's.
    if let Some((field, line, audience)) = recognize::other_token_with(spec, true) {
        findings.push(
            Finding::error(format!("a service account token (audience {audience:?}) is already projected here; inject would make it a second token of the worker account: remove it"))
                .rule(rules::EXTRA_TOKEN)
                .field(format!("{base}.{field}"))
                .line(line),
        );
    }
    if let Some(pr) = Check::NoEphemeral.problem(
        spec,
        &p.name,
        &recognize::Surface {
            token: workload::TokenWant::Any,
            skip: &[],
            any_untouched: true,
        },
    ) {
        findings.push(
            Finding::error(pr.message)
                .rule(pr.rule)
                .field(format!("{base}.{}", pr.field))
                .line(pr.line),
        );
    }
    // serviceAccountName / serviceAccount: replaced, with a warning naming the old one.
    for key in ["serviceAccountName", "serviceAccount"] {
        match spec.get(key) {
            Some(v) if v.as_str() == Some(p.name.as_str()) => {}
            Some(v) if v.is_null() && key == "serviceAccount" => {}
            Some(v) => {
                findings.push(
                    Finding::warning(format!(
                        "{key} {:?} is replaced by the worker account {:?}",
                        v.text().unwrap_or(""),
                        p.name
                    ))
                    .field(format!("{base}.{key}"))
                    .line(line(v)),
                );
                p.spec_changes = true;
            }
            None if key == "serviceAccountName" => p.spec_changes = true,
            None => {}
        }
    }
    match spec.get("automountServiceAccountToken") {
        Some(v) if to_json(v) == serde_json::Value::Bool(false) => {}
        Some(v) => {
            findings.push(
                Finding::warning(format!("automountServiceAccountToken {:?} is set to false: worker pods use only the projected token", v.text().unwrap_or("")))
                    .field(format!("{base}.automountServiceAccountToken"))
                    .line(line(v)),
            );
            p.spec_changes = true;
        }
        None => p.spec_changes = true,
    }
    let volumes = spec.get("volumes").and_then(Node::items).unwrap_or(&[]);
    let ours: Vec<usize> = (0..volumes.len())
        .filter(|&i| volumes[i].str_at(&["name"]) == Some(identity::TOKEN_VOLUME))
        .collect();
    match ours.as_slice() {
        [] => p.spec_changes = true,
        // Written by hand: uninject, which takes out the volume inject adds,
        // could not give it back.
        [i] if workload::is_token_volume(&volumes[*i], &workload::TokenWant::Exact(token)) => findings.push(
            Finding::error(format!(
                "volume {:?} is already here, but the workload is not inject's own output (its trio with the transformer's marks is not in the input): inject writes the volume and its mounts itself, and uninject would take out the ones written here; remove them, or run inject on its output together with its trio",
                identity::TOKEN_VOLUME
            ))
            .field(format!("{base}.volumes[{i}]"))
            .line(line(&volumes[*i])),
        ),
        [.., i] => findings.push(
            Finding::error(format!(
                "volume {:?} exists with other content{}; remove it or make it the projected token (audience {:?}, expirationSeconds {}, path token)",
                identity::TOKEN_VOLUME,
                if ours.len() > 1 { " or more than once" } else { "" },
                token.audience,
                token.expiration_seconds
            ))
            .field(format!("{base}.volumes[{i}]"))
            .line(line(&volumes[*i])),
        ),
    }
    plan_containers(obj, spec, cfg, ours.is_empty(), p, &mut record, findings);
    if !record.is_empty() {
        p.record = Some(record);
    }
}

/// The containers inject gives the token (`p.containers`), the contract env
/// their authors set (the record), and the conflicts of every container,
/// left-out ones included.
fn plan_containers(
    obj: &Object,
    spec: &Node,
    cfg: &Config,
    no_volume: bool,
    p: &mut WorkloadPlan,
    record: &mut Record,
    findings: &mut Vec<Finding>,
) {
    let base = workload::dotted(p.spec_path);
    let skip = names_in(obj.annotation(identity::SKIP_CONTAINERS_ANNOTATION));
    let mut lists = vec!["containers"];
    if cfg.include_init_containers {
        lists.push("initContainers");
    }
    for list in ["containers", "initContainers"] {
        let containers = spec.get(list).and_then(Node::items).unwrap_or(&[]);
        let mut chosen = Vec::new();
        for (ci, c) in containers.iter().enumerate() {
            let at = format!("{base}.{list}[{ci}]");
            let skipped = c.str_at(&["name"]).is_some_and(|n| skip.contains(n));
            if skipped || !lists.contains(&list) {
                left_out(c, &at, skipped, findings);
                continue;
            }
            // The contract env its author set stays theirs: uninject leaves it.
            let had: Vec<String> = identity::env_vars()
                .iter()
                .filter(|(var, _)| !workload::check_container(c).missing_env.contains(var))
                .map(|(var, _)| var.to_string())
                .collect();
            if !had.is_empty() {
                record
                    .env
                    .insert(c.str_at(&["name"]).unwrap_or("").to_string(), had);
            }
            if workload::check_container(c).has_mount && no_volume {
                findings.push(
                    Finding::error(format!(
                        "the token is already mounted here by hand, but the workload is not inject's own output: inject writes the mount itself, and uninject would take out the one written here; remove it (and its volume {:?})",
                        identity::TOKEN_VOLUME
                    ))
                    .field(at.clone())
                    .line(c.line),
                );
            }
            p.spec_changes |= check_container(c, &at, findings);
            chosen.push(ci);
        }
        if lists.contains(&list) {
            p.containers.push((list, chosen));
        }
    }
}

/// The accounts and automount inject replaces and records for uninject hold
/// what the API server takes (a string, a boolean, or null for unset): inject
/// neither records nor replaces a value the API server would refuse.
fn ill_typed(spec: &Node, base: &str, findings: &mut Vec<Finding>) {
    for key in identity::REPLACED_KEYS {
        let Some(v) = spec.get(key) else { continue };
        let (ok, want) = match to_json(v) {
            serde_json::Value::Null => (true, ""),
            serde_json::Value::String(_) => {
                (key != "automountServiceAccountToken", "true or false")
            }
            serde_json::Value::Bool(_) => (key == "automountServiceAccountToken", "a string"),
            _ => (
                false,
                if key == "automountServiceAccountToken" {
                    "true or false"
                } else {
                    "a string"
                },
            ),
        };
        if !ok {
            findings.push(
                Finding::error(format!(
                    "{key} is {}, which the API server refuses: it takes {want}; write it so (inject records the value it replaces for uninject to restore)",
                    to_json(v)
                ))
                .field(format!("{base}.{key}"))
                .line(v.line),
            );
        }
    }
}

/// A container inject leaves without the token (skipped, or an init container
/// when init containers are not included) must carry nothing of the contract:
/// the contract's env without the token, or a mount where the token goes, is
/// refused by the guard and the policies (NVW101). Inject refuses it rather than
/// write such output; the author removes it, or stops leaving the container out.
fn left_out(c: &Node, at: &str, skipped: bool, findings: &mut Vec<Finding>) {
    let check = workload::check_container(c);
    if recognize::untouched(&check) {
        return;
    }
    let why = if skipped {
        format!("is skipped ({})", identity::SKIP_CONTAINERS_ANNOTATION)
    } else {
        "is an init container and init containers are not included (includeInitContainers)".into()
    };
    let env = c.get("env").and_then(Node::items).unwrap_or(&[]);
    let set = env.iter().enumerate().find(|(_, e)| {
        identity::env_vars()
            .iter()
            .any(|(n, _)| e.str_at(&["name"]) == Some(*n))
    });
    let (field, line, what) = match (check.problems.first(), set) {
        (Some(pr), _) => (pr.field.clone(), pr.line, pr.message.clone()),
        (None, Some((i, e))) => (
            format!("env[{i}]"),
            e.line,
            format!("it sets {} itself", e.str_at(&["name"]).unwrap_or("")),
        ),
        (None, None) => (String::new(), c.line, "it mounts the worker token".into()),
    };
    let name = c.str_at(&["name"]).unwrap_or("");
    findings.push(
        Finding::error(format!(
            "container {name:?} {why}, but {what}: a container left without the worker token carries nothing of the contract (the guard refuses it, {}); remove that, or do not leave the container out",
            rules::POD_SPEC_ACCOUNT
        ))
        .rule(rules::POD_SPEC_ACCOUNT)
        .field(if field.is_empty() { at.to_string() } else { format!("{at}.{field}") })
        .line(line),
    );
}

/// Brings the transformer's own output to the current config: the identity's name,
/// the token's audience and lifetime, and which containers carry the token. Nothing
/// here is a conflict: recognition already proved every part is the transformer's.
fn check_own_pod_spec(
    obj: &Object,
    spec: &Node,
    cfg: &Config,
    token: &TokenSpec,
    old: &str,
    p: &mut WorkloadPlan,
    findings: &mut Vec<Finding>,
) {
    if old != p.name {
        p.changes.push(format!("identity {old} -> {}", p.name));
        p.spec_changes = true;
    }
    let volume = spec
        .get("volumes")
        .and_then(Node::items)
        .unwrap_or(&[])
        .iter()
        .find(|v| v.str_at(&["name"]) == Some(identity::TOKEN_VOLUME))
        .and_then(|v| v.path(&["projected", "sources"])?.items()?.first())
        .and_then(|s| s.get("serviceAccountToken"));
    if let Some(t) = volume {
        let audience = t.str_at(&["audience"]).unwrap_or("");
        if audience != token.audience {
            p.changes
                .push(format!("audience {audience} -> {}", token.audience));
            p.volume_update = true;
        }
        let expiry = t.get("expirationSeconds").map(to_json);
        if expiry != Some(token.expiration_seconds.into()) {
            p.changes.push(format!(
                "expirationSeconds {} -> {}",
                expiry.unwrap_or_default(),
                token.expiration_seconds
            ));
            p.volume_update = true;
        }
    }
    let skip = names_in(obj.annotation(identity::SKIP_CONTAINERS_ANNOTATION));
    let authors = Record::of(obj.node).ok().flatten().unwrap_or_default().env;
    let base = workload::dotted(p.spec_path);
    for list in ["containers", "initContainers"] {
        let included = list == "containers" || cfg.include_init_containers;
        let containers = spec.get(list).and_then(Node::items).unwrap_or(&[]);
        let (mut add, mut strip) = (Vec::new(), Vec::new());
        for (ci, c) in containers.iter().enumerate() {
            let name = c.str_at(&["name"]).unwrap_or("");
            let want = included && !skip.contains(name);
            match (want, uninject::container_has_token(c)) {
                (true, true) => add.push(ci),
                (true, false) => {
                    p.changes.push(format!("token added to {list} {name:?}"));
                    p.spec_changes = true;
                    add.push(ci);
                }
                // Stripped, the env its author set would stay without the token.
                (false, true) if authors.contains_key(name) => findings.push(
                    Finding::error(format!(
                        "{list} {name:?} would be left without the worker token ({}), but its author set {} itself (recorded in {}): a container left without the token carries nothing of the contract (the guard refuses it, {}); remove that env first, or keep the container in",
                        if included { "skipped" } else { "init containers not included" },
                        authors[name].join(", "),
                        identity::REPLACED_ANNOTATION,
                        rules::POD_SPEC_ACCOUNT
                    ))
                    .rule(rules::POD_SPEC_ACCOUNT)
                    .field(format!("{base}.{list}[{ci}]"))
                    .line(c.line),
                ),
                (false, true) => {
                    p.changes.push(format!(
                        "token removed from {list} {name:?} ({})",
                        if included {
                            "skipped"
                        } else {
                            "init containers not included"
                        }
                    ));
                    strip.push(ci);
                }
                (false, false) => {}
            }
        }
        p.containers.push((list, add));
        if !strip.is_empty() {
            p.strip.push((list, strip));
        }
    }
}

/// Checks one container; returns whether it needs a mount or env var added.
fn check_container(c: &Node, at: &str, findings: &mut Vec<Finding>) -> bool {
    let check = workload::check_container(c);
    for problem in &check.problems {
        findings.push(
            Finding::error(problem.message.clone())
                .field(format!("{at}.{}", problem.field))
                .line(problem.line),
        );
    }
    // The worker library uses the mounted token as soon as NVCF_TOKEN_FILE_PATH is
    // set and gives up its bootstrap token: say so where a container has one.
    let env = c.get("env").and_then(Node::items).unwrap_or(&[]);
    for (i, e) in env.iter().enumerate() {
        if let Some(var) = e
            .str_at(&["name"])
            .filter(|n| identity::BOOTSTRAP_TOKEN_ENV.contains(n))
        {
            findings.push(
                Finding::warning(format!(
                    "{var} is this container's bootstrap token: with {} set the NVCF worker library sends the projected token instead, and ICMS accepts that only for pods the NVCF agent registers; a worker the agent deploys needs no injection",
                    identity::ENV_TOKEN_FILE_PATH
                ))
                .field(format!("{at}.env[{i}]"))
                .line(e.line),
            );
        }
    }
    !check.has_mount || !check.missing_env.is_empty()
}

/// A generated node: JSON-looking inside JSON documents, block YAML elsewhere.
fn generated(v: &serde_json::Value, json_style: bool) -> Node {
    let n = from_json(&conventional_order(&name_first(v)));
    if json_style {
        n.into_json_style()
    } else {
        n
    }
}

/// k8s-openapi serializes fields alphabetically; people write apiVersion, kind,
/// metadata first, and `name` first in any mapping that has one.
fn name_first(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) if m.contains_key("name") => {
            let mut out = serde_json::Map::new();
            out.insert("name".into(), m["name"].clone());
            out.extend(
                m.iter()
                    .filter(|(k, _)| *k != "name")
                    .map(|(k, v)| (k.clone(), name_first(v))),
            );
            out.into()
        }
        serde_json::Value::Object(m) => m
            .iter()
            .map(|(k, v)| (k.clone(), name_first(v)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
        serde_json::Value::Array(a) => a.iter().map(name_first).collect(),
        other => other.clone(),
    }
}

fn conventional_order(v: &serde_json::Value) -> serde_json::Value {
    const FIRST: [&str; 7] = [
        "apiVersion",
        "kind",
        "metadata",
        "name",
        "namespace",
        "labels",
        "annotations",
    ];
    match v {
        serde_json::Value::Object(m) => {
            let mut out = serde_json::Map::new();
            for k in FIRST {
                if let Some(x) = m.get(k) {
                    out.insert(k.into(), conventional_order(x));
                }
            }
            out.extend(
                m.iter()
                    .filter(|(k, _)| !FIRST.contains(&k.as_str()))
                    .map(|(k, x)| (k.clone(), conventional_order(x))),
            );
            out.into()
        }
        other => other.clone(),
    }
}

fn apply(batch: &mut Batch, plans: Vec<WorkloadPlan>, token: &TokenSpec, cleanup: &Cleanup) {
    for mut p in plans.into_iter().filter(|p| !p.applied) {
        let trio_nodes = std::mem::take(&mut p.trio);
        // Editing expands a document's aliases: only a workload that changes is edited.
        if edits_workload(&p) {
            edit_workload(batch.object_mut(p.addr), &p, token);
        }
        if !trio_nodes.is_empty() {
            batch.insert_before(p.addr, trio_nodes);
        }
        batch.freeze_object(p.addr);
    }
    for (addr, spec_path) in &cleanup.prune {
        uninject::strip(batch.object_mut(*addr), spec_path);
    }
    for addr in &cleanup.remove {
        batch.remove(*addr);
    }
    batch.commit_inserts();
}

/// `apply` for one workload whose document was read again: edited, then written at
/// once with its new trio (`batch::written`, `batch::freeze`), so that only what
/// writes them is kept: the edits to its text, the trio's bytes.
fn apply_reread(mut doc: Document, p: &WorkloadPlan, token: &TokenSpec, trio: Vec<Node>) -> Done {
    if edits_workload(p) {
        edit_workload(doc.edit(), p, token);
    }
    Done {
        addr: p.addr,
        doc: Some(batch::written(doc)),
        before: frozen_trio(trio),
    }
}

/// New trio members as documents written now (`batch::freeze`).
fn frozen_trio(trio: Vec<Node>) -> Vec<Document> {
    let mut before: Vec<Document> = trio.into_iter().map(Document::new).collect();
    before.iter_mut().for_each(batch::freeze);
    before
}

fn edits_workload(p: &WorkloadPlan) -> bool {
    p.record.is_some() || p.spec_changes || p.volume_update || !p.strip.is_empty()
}

/// The trio members a workload's plan adds: annotated like the workload in a
/// ResourceList (`next_index` given), and for Helm 4's post-renderer.
fn new_trio(
    p: &WorkloadPlan,
    obj: &Object,
    mut next_index: Option<&mut BTreeMap<String, usize>>,
) -> Vec<Node> {
    if p.missing.is_empty() {
        return Vec::new();
    }
    let trio = identity::trio(&p.name, &p.owner);
    p.missing
        .iter()
        .map(|&i| {
            let mut node = generated(&trio[i], p.json_style);
            if let Some(next_index) = next_index.as_deref_mut() {
                annotate_like(&mut node, obj, next_index);
            }
            // Helm 4 puts post-rendered documents back into files by this
            // annotation (one without it becomes generated-by-postrender-N.yaml).
            if let Some(file) = obj.annotation(HELM_POSTRENDER_FILENAME) {
                node.path_mut(&["metadata", "annotations"])
                    .expect("generated objects have annotations")
                    .set(HELM_POSTRENDER_FILENAME, Node::string(file));
            }
            node
        })
        .collect()
}

fn edit_workload(root: &mut Node, p: &WorkloadPlan, token: &TokenSpec) {
    let authors = Record::of(root).ok().flatten().unwrap_or_default().env;
    if let Some(record) = &p.record {
        record_replaced(root, record, p.json_style);
    }
    let spec = root.path_mut(p.spec_path).expect("planned pod spec");
    if p.spec_changes {
        apply_pod_spec(spec, p, token);
    }
    if p.volume_update {
        update_token(spec, token, p.json_style);
    }
    for (list, indexes) in &p.strip {
        if let Some(containers) = spec.get_mut(list).and_then(Node::items_mut) {
            for &ci in indexes {
                let c = &mut containers[ci];
                let name = c.str_at(&["name"]).unwrap_or("").to_string();
                uninject::strip_container(c, authors.get(&name).map_or(&[], Vec::as_slice));
            }
        }
    }
}

/// Records on the workload what inject replaces (`nvcf.io/replaced`).
fn record_replaced(root: &mut Node, record: &Record, js: bool) {
    let empty_map = || {
        let m = Node::map(vec![]);
        if js {
            m.into_json_style()
        } else {
            m
        }
    };
    let text = record.to_json();
    root.get_or_insert("metadata", empty_map)
        .get_or_insert("annotations", empty_map)
        .set(
            identity::REPLACED_ANNOTATION,
            Node::scalar(text, Style::DoubleQuoted),
        );
}

/// Sets the audience and lifetime of the token volume, in place.
fn update_token(spec: &mut Node, token: &TokenSpec, js: bool) {
    let Some(t) = spec
        .get_mut("volumes")
        .and_then(Node::items_mut)
        .and_then(|vs| {
            vs.iter_mut()
                .find(|v| v.str_at(&["name"]) == Some(identity::TOKEN_VOLUME))
        })
        .and_then(|v| v.path_mut(&["projected", "sources"]))
        .and_then(Node::items_mut)
        .and_then(|s| s.first_mut())
        .and_then(|s| s.get_mut("serviceAccountToken"))
    else {
        return;
    };
    let audience = if js {
        Node::scalar(token.audience.clone(), Style::DoubleQuoted)
    } else {
        Node::string(token.audience.clone())
    };
    t.set("audience", audience);
    t.set(
        "expirationSeconds",
        Node::scalar(token.expiration_seconds.to_string(), Style::Plain),
    );
}

fn apply_pod_spec(spec: &mut Node, p: &WorkloadPlan, token: &TokenSpec) {
    let js = p.json_style;
    let scalar = |text: &str, style: Style| {
        if js && style == Style::Plain && text.parse::<f64>().is_err() && text != "false" {
            Node::scalar(text, Style::DoubleQuoted)
        } else {
            Node::scalar(text, style)
        }
    };
    let name = if js {
        Node::scalar(p.name.clone(), Style::DoubleQuoted)
    } else {
        Node::string(p.name.clone())
    };
    // A replaced account keeps the quoting it was written with, as a hand edit
    // would (and uninject, restoring it, writes it back the same way).
    let quoted_like = |old: Option<&Node>| {
        let mut n = name.clone();
        let style = old.and_then(Node::as_scalar).map(|s| s.style);
        // (Worker account names never need quotes, so a plain one stays plain.)
        if let (
            Some(st @ (Style::Plain | Style::SingleQuoted | Style::DoubleQuoted)),
            Value::Scalar(s),
        ) = (style, &mut n.value)
        {
            s.style = st;
        }
        n
    };
    let account = quoted_like(spec.get("serviceAccountName"));
    spec.set("serviceAccountName", account);
    if spec.get("serviceAccount").is_some_and(|v| !v.is_null()) {
        let account = quoted_like(spec.get("serviceAccount"));
        spec.set("serviceAccount", account);
    }
    spec.set(
        "automountServiceAccountToken",
        scalar("false", Style::Plain),
    );
    let empty_seq = || {
        if js {
            Node::seq(vec![]).into_json_style()
        } else {
            Node::seq(vec![])
        }
    };
    let volumes = spec.get_or_insert("volumes", empty_seq);
    if let Some(items) = volumes.items_mut() {
        if !items
            .iter()
            .any(|v| v.str_at(&["name"]) == Some(identity::TOKEN_VOLUME))
        {
            items.push(generated(&identity::token_volume(token), js));
        }
    }
    for (list, indexes) in &p.containers {
        let Some(containers) = spec.get_mut(list).and_then(Node::items_mut) else {
            continue;
        };
        for &ci in indexes {
            let c = &mut containers[ci];
            let mounts = c.get_or_insert("volumeMounts", empty_seq);
            if let Some(items) = mounts.items_mut() {
                if !items
                    .iter()
                    .any(|m| m.str_at(&["name"]) == Some(identity::TOKEN_VOLUME))
                {
                    items.push(generated(&identity::token_mount(), js));
                }
            }
            let env = c.get_or_insert("env", empty_seq);
            if let Some(items) = env.items_mut() {
                for (var, value) in identity::env_vars() {
                    if !items.iter().any(|e| e.str_at(&["name"]) == Some(var)) {
                        items.push(generated(&identity::env_var(var, value), js));
                    }
                }
            }
        }
    }
}

/// Per file, the next index annotation value free after every existing item.
fn next_free_indexes(batch: &Batch) -> BTreeMap<String, usize> {
    let mut next = BTreeMap::new();
    for obj in batch.objects() {
        let loc = obj.location();
        if let (Some(file), Some(index)) = (loc.file, loc.index) {
            let e = next.entry(file).or_insert(0);
            *e = (*e).max(index + 1);
        }
    }
    next
}

/// Gives a generated item its workload's file and a fresh index in that file, so kpt
/// writes it beside its workload.
fn annotate_like(node: &mut Node, workload: &Object, next_index: &mut BTreeMap<String, usize>) {
    let Some(file) = PATH_ANNOTATIONS.iter().find_map(|a| workload.annotation(a)) else {
        return;
    };
    let index = next_index.entry(file.to_string()).or_insert(0);
    let annotations = node
        .path_mut(&["metadata", "annotations"])
        .expect("generated objects have annotations");
    for key in PATH_ANNOTATIONS {
        if workload.annotation(key).is_some() {
            annotations.set(key, Node::string(file));
        }
    }
    for key in INDEX_ANNOTATIONS {
        if workload.annotation(key).is_some() {
            annotations.set(key, Node::scalar(index.to_string(), Style::DoubleQuoted));
        }
    }
    *index += 1;
}
