//! Runs a cleanup plan. Before an identity's deletes it checks again, by the one
//! model of "in use" (`in_use`), that nothing came to use it since the plan was
//! made: a pod, a pod template of a pod-bearing kind, or (for `nvcf-worker`) the
//! tool's mutating policy. The pods and the pod-bearing kinds are listed again once per
//! batch of identities and namespace (consistent reads, page by page, each page
//! folded into who runs as one of the batch's identities), so the re-check costs
//! the namespace's pages per batch, not a request per identity: a field-selector
//! list per identity made the API server scan every pod of the namespace for each
//! identity, and waited on its watch cache each time. Then RoleBinding, Role,
//! ServiceAccount, each with the UID it had when listed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

use futures::future::{FutureExt, LocalBoxFuture, Shared};
use futures::stream::{FuturesUnordered, StreamExt};
use k8s_openapi::jiff::Timestamp;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::cleanup::{Plan, PlannedIdentity};
use super::client::{self, text, DeleteOutcome, Kube, Scope};
use super::events;
use super::in_use::{self, template_account, User, Uses};
use super::inventory::is_terminated;
use super::wire::Pod;
use crate::error::{Error, Result};
use crate::identity::is_reserved;

/// Identities in flight at once; each identity's own requests stay in order.
pub const CONCURRENCY: usize = 8;

/// Identities per re-check, per page of pods in their namespace: the pods and
/// the pod-bearing kinds are listed once per namespace of a batch, so their cost
/// is per batch, not per identity, and what a batch holds of them (its own
/// identities' users only) is freed with it. A batch in a namespace of many
/// pods covers as many more identities as its pods take pages (`batch_size`),
/// so the re-check reads about one page of pods per 64 identities however
/// large the namespace: the reads no longer grow as the square of it.
pub const BATCH: usize = 64;

/// The most identities one re-check covers: the time from a batch's re-check
/// to its last delete (about 4 s at this machine's 250 identities a second).
pub const MAX_BATCH: usize = 1024;

/// How many identities one re-check covers in a namespace of `pods` pods listed
/// `page` at a time: [`BATCH`] per page, at least one page, at most [`MAX_BATCH`].
pub fn batch_size(pods: usize, page: usize) -> usize {
    (BATCH * pods.div_ceil(page.max(1)).max(1)).min(MAX_BATCH)
}

/// The plan's identities cut into batches in order, each as large as its first
/// identity's namespace allows (`batch_size` of the pods the plan read there).
pub fn cut_batches(plan: &Plan, page: usize) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < plan.delete.len() {
        let pods = plan.pods.get(&plan.delete[start].namespace);
        let end = (start + batch_size(pods.copied().unwrap_or(0), page)).min(plan.delete.len());
        out.push(start..end);
        start = end;
    }
    out
}

/// How far into a batch its successor's reads start: at its first identity, so
/// they have the whole batch's deletes to finish in (a namespace of 5 000 pods
/// is 10 pages of 500, a quarter of a second on a loaded server).
pub const LOOKAHEAD: usize = 0;

#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Send every delete with dryRun=All.
    pub dry_run: bool,
    /// Succeeded and Failed pods count as gone (as in the plan).
    pub include_terminated: bool,
    /// `-A`: namespaces' labels are listed, not read one by one (as in the plan).
    pub all_namespaces: bool,
    /// Record an Event for each identity's outcome (never on a dry run).
    pub record_events: bool,
}

/// Why an identity the plan set out to delete ended as it did: the one list the
/// executor decides by and its Events' `reason` (CamelCase, as Kubernetes' own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Deleted,
    /// A pod runs as it since the plan.
    PodAppeared,
    /// A pod template of a pod-bearing kind names it since the plan.
    TemplateAppeared,
    /// The tool's mutating policy gives it to new pods (or that cannot be told).
    GivenAtAdmission,
    /// An object's UID is not the one listed: it was replaced since.
    ObjectReplaced,
    /// Not a worker identity name (the executor's own guard).
    NotWorkerName,
    /// The re-check's reads failed: nothing unchecked is deleted.
    RecheckFailed,
    DeleteFailed,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Deleted => "Deleted",
            Reason::PodAppeared => "PodAppeared",
            Reason::TemplateAppeared => "TemplateAppeared",
            Reason::GivenAtAdmission => "GivenAtAdmission",
            Reason::ObjectReplaced => "ObjectReplaced",
            Reason::NotWorkerName => "NotWorkerName",
            Reason::RecheckFailed => "RecheckFailed",
            Reason::DeleteFailed => "DeleteFailed",
        }
    }

    /// The Event's `action`: what cleanup did (`Delete`) or did not (`Skip`).
    pub fn action(self) -> &'static str {
        match self {
            Reason::Deleted | Reason::DeleteFailed => "Delete",
            _ => "Skip",
        }
    }

    /// A skip is the safety rules at work (`Normal`); a failure is `Warning`.
    pub fn event_type(self) -> &'static str {
        match self {
            Reason::RecheckFailed | Reason::DeleteFailed => "Warning",
            _ => "Normal",
        }
    }
}

/// How one identity's deletion ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every object deleted or already gone; the count actually deleted.
    Deleted { objects: usize },
    /// Stopped before deleting the rest: it came into use since the plan, or an
    /// object was replaced since it was listed. `objects` were deleted before that
    /// (the summary counts every delete).
    Skipped {
        why: Reason,
        reason: String,
        objects: usize,
    },
    Failed {
        why: Reason,
        error: String,
        objects: usize,
    },
}

impl Outcome {
    pub fn reason(&self) -> Reason {
        match self {
            Outcome::Deleted { .. } => Reason::Deleted,
            Outcome::Skipped { why, .. } | Outcome::Failed { why, .. } => *why,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub deleted: usize,
    pub objects: usize,
    /// (namespace/name, why).
    pub skipped: Vec<(String, String)>,
    pub failed: Vec<(String, String)>,
    /// The Events recorded and refused (none on a dry run or without them).
    pub events: super::events::Tally,
}

impl Summary {
    pub fn add(&mut self, identity: &PlannedIdentity, outcome: Outcome) {
        let key = format!("{}/{}", identity.namespace, identity.name);
        match outcome {
            Outcome::Deleted { objects } => {
                self.deleted += 1;
                self.objects += objects;
            }
            Outcome::Skipped {
                reason, objects, ..
            } => {
                self.objects += objects;
                self.skipped.push((key, reason));
            }
            Outcome::Failed { error, objects, .. } => {
                self.objects += objects;
                self.failed.push((key, error));
            }
        }
    }
}

/// The identities of a batch, by namespace: what its reads keep.
type Names = HashMap<String, HashSet<String>>;

/// A batch's re-check reads, shared by its identities. A failed read fails the
/// batch's identities (nothing unchecked is deleted); a 403 stops the run.
#[derive(Clone)]
enum Listed {
    Checked(Rc<Uses>),
    Failed(String),
    Forbidden {
        verb: String,
        resource: String,
        namespace: Option<String>,
        message: String,
    },
}

type Batch<'a> = Shared<LocalBoxFuture<'a, Listed>>;

/// One kind in one namespace, page by page (each item decoded as `T`), keeping
/// only the objects that run as one of `names` (`user` says which account an
/// item runs as and who it is).
async fn list_users<T: DeserializeOwned>(
    kube: &Kube,
    ns: &str,
    names: &HashSet<String>,
    r: client::Resource,
    user: impl Fn(T) -> Option<(String, User)>,
) -> Result<Uses> {
    let scope = Scope::Namespace(ns.to_string());
    kube.list_fold_as(&r, &scope, |found: &mut Uses, item: T| {
        let Some((account, who)) = user(item) else {
            return;
        };
        if names.contains(&account) {
            found.add(ns, &account, who);
        }
    })
    .await
}

/// The account a pod runs as (`serviceAccountName`, else the deprecated
/// `serviceAccount`), as the plan reads it, and the pod; `None` for a
/// terminated pod when those count as gone.
fn pod_user(pod: Pod, options: Options) -> Option<(String, User)> {
    let phase = pod.status.phase.unwrap_or_default();
    if options.include_terminated && is_terminated(&phase) {
        return None;
    }
    let account = [pod.spec.service_account_name, pod.spec.service_account]
        .into_iter()
        .flatten()
        .find(|a| !a.is_empty())?;
    let name = pod.metadata.name;
    Some((account, User::Pod { name, phase }))
}

/// A batch's reads: in each of its namespaces the pods and every pod-bearing
/// kind, all at once, each page folded into who runs as the batch's identities;
/// and when the batch holds an `nvcf-worker`, the tool's mutating policies.
async fn check_batch(kube: &Kube, names: Names, options: Options) -> Listed {
    let pods = names.iter().map(|(ns, names)| async move {
        let scope = Scope::Namespace(ns.to_string());
        kube.list_pods_fold(&scope, |found: &mut Uses, pod| {
            match pod_user(pod, options) {
                Some((account, who)) if names.contains(&account) => found.add(ns, &account, who),
                _ => {}
            }
        })
        .await
    });
    let templates = names.iter().flat_map(|(ns, names)| {
        client::workloads().map(move |r| {
            list_users(kube, ns, names, r, move |mut item: Value| {
                if let Some(map) = item.as_object_mut() {
                    map.insert("apiVersion".into(), r.api_version.into());
                    map.insert("kind".into(), r.kind.into());
                }
                let account = template_account(&item)?.to_string();
                let name = text(&item, "/metadata/name").to_string();
                let kind = r.kind.to_string();
                Some((account, User::Template { kind, name }))
            })
        })
    });
    let needed = in_use::admission_namespaces(
        names
            .iter()
            .flat_map(|(ns, names)| names.iter().map(move |n| (ns.as_str(), n.as_str()))),
    );
    let read = futures::future::try_join3(
        futures::future::try_join_all(pods),
        futures::future::try_join_all(templates),
        in_use::read_admission(kube, options.all_namespaces, &needed),
    )
    .await;
    match read {
        Ok((pods, templates, admission)) => {
            let mut uses = Uses::with(admission);
            for found in pods.into_iter().chain(templates) {
                uses.merge(found);
            }
            Listed::Checked(Rc::new(uses))
        }
        Err(Error::Forbidden {
            verb,
            resource,
            namespace,
            message,
        }) => Listed::Forbidden {
            verb,
            resource,
            namespace,
            message,
        },
        Err(e) => Listed::Failed(e.to_string()),
    }
}

/// What came to run as the identity since the plan, by its batch's reads.
async fn recheck(
    target: &PlannedIdentity,
    batch: Batch<'_>,
) -> Result<std::result::Result<Option<User>, String>> {
    match batch.await {
        Listed::Checked(uses) => Ok(Ok(uses
            .users(&target.namespace, &target.name, false)
            .into_iter()
            .next())),
        Listed::Failed(e) => Ok(Err(e)),
        Listed::Forbidden {
            verb,
            resource,
            namespace,
            message,
        } => Err(Error::Forbidden {
            verb,
            resource,
            namespace,
            message,
        }),
    }
}

/// Re-checks one identity, then deletes its objects in order. A NotFound counts
/// as done (the agent or an earlier run got there first); a UID conflict stops
/// this identity.
async fn delete_identity(
    kube: &Kube,
    target: &PlannedIdentity,
    batch: Batch<'_>,
    options: Options,
) -> Result<Outcome> {
    // The plan only holds worker names; this guards the executor on its own.
    if !is_reserved(&target.name) {
        return Ok(Outcome::Skipped {
            why: Reason::NotWorkerName,
            reason: format!("{} is not a worker identity name", target.name),
            objects: 0,
        });
    }
    match recheck(target, batch).await? {
        Ok(None) => {}
        Ok(Some(User::Admission(why))) => {
            return Ok(Outcome::Skipped {
                why: Reason::GivenAtAdmission,
                reason: format!("{why} (re-checked before deleting)"),
                objects: 0,
            })
        }
        Ok(Some(user)) => {
            let why = match user {
                User::Pod { .. } => Reason::PodAppeared,
                _ => Reason::TemplateAppeared,
            };
            return Ok(Outcome::Skipped {
                why,
                reason: format!("in use by {} since the plan", user.short()),
                objects: 0,
            });
        }
        Err(error) => {
            return Ok(Outcome::Failed {
                why: Reason::RecheckFailed,
                error: format!("checking that nothing uses it before deleting: {error}"),
                objects: 0,
            })
        }
    }
    let mut objects = 0;
    for d in &target.deletions {
        let deleted = kube
            .delete(
                &d.member.resource(),
                &target.namespace,
                &target.name,
                &d.uid,
                options.dry_run,
            )
            .await;
        match deleted {
            Ok(DeleteOutcome::Deleted) => objects += 1,
            Ok(DeleteOutcome::NotFound) => {}
            Ok(DeleteOutcome::Conflict(message)) => {
                return Ok(Outcome::Skipped {
                    why: Reason::ObjectReplaced,
                    reason: format!(
                        "{} changed since it was listed (UID precondition failed: {message})",
                        d.member.kind()
                    ),
                    objects,
                })
            }
            Err(e @ Error::Forbidden { .. }) => return Err(e),
            Err(e) => {
                return Ok(Outcome::Failed {
                    why: Reason::DeleteFailed,
                    error: e.to_string(),
                    objects,
                })
            }
        }
    }
    Ok(Outcome::Deleted { objects })
}

/// What [`execute`]'s stream yields: an identity's end, a read-ahead batch's
/// (driven until its identities come), or an Event's post.
enum Done<'a> {
    Identity(&'a PlannedIdentity, Result<Outcome>),
    Ahead,
    Event(std::result::Result<(), String>),
}

/// Runs the plan, [`CONCURRENCY`] identities at a time in one stream (no batch
/// waits for the last of the one before). The first batch's reads start with its
/// first identity; every later batch's ahead of it, when the batch before has
/// dispatched [`LOOKAHEAD`] identities, so they are read while that batch
/// deletes: [`CONCURRENCY`] identities' requests in flight, and beside them the
/// next batch's lists. Each identity's Event is posted in the same stream as it
/// ends, off the identity's own path; at most [`CONCURRENCY`] posts in flight,
/// no identity starts while that many are (so a slow Events API slows the run
/// rather than piling Events up). `progress` is called after each identity. A
/// 403 stops everything: no other request would be allowed either (a refused
/// Event is only counted: `Summary::events`).
pub async fn execute(
    kube: &Kube,
    plan: &Plan,
    options: Options,
    progress: &dyn Fn(),
) -> Result<Summary> {
    let targets = &plan.delete;
    let ranges = cut_batches(plan, kube.page_size as usize);
    let batch = |index: usize| -> Batch<'_> {
        let mut names = Names::new();
        for t in &targets[ranges[index].clone()] {
            names
                .entry(t.namespace.clone())
                .or_default()
                .insert(t.name.clone());
        }
        check_batch(kube, names, options).boxed_local().shared()
    };
    let record = options.record_events && !options.dry_run;
    let instance = events::instance();
    // The batch being dispatched and the one read ahead; a batch's identities
    // hold it until they end, so what it read is freed with its last.
    let mut batches: BTreeMap<usize, Batch<'_>> = BTreeMap::new();
    let mut tasks = FuturesUnordered::new();
    let (mut next, mut running, mut posting, mut index) = (0, 0, 0, 0);
    let mut summary = Summary::default();
    loop {
        while running < CONCURRENCY && posting < CONCURRENCY && next < targets.len() {
            while next >= ranges[index].end {
                index += 1;
            }
            batches.retain(|&b, _| b >= index);
            let own = batches.entry(index).or_insert_with(|| batch(index)).clone();
            if next - ranges[index].start == LOOKAHEAD && index + 1 < ranges.len() {
                let ahead = batches
                    .entry(index + 1)
                    .or_insert_with(|| batch(index + 1))
                    .clone();
                tasks.push(
                    async move {
                        ahead.await;
                        Done::Ahead
                    }
                    .boxed_local(),
                );
            }
            let target = &targets[next];
            tasks.push(
                async move { Done::Identity(target, delete_identity(kube, target, own, options).await) }
                    .boxed_local(),
            );
            next += 1;
            running += 1;
        }
        match tasks.next().await {
            None => break,
            Some(Done::Ahead) => {}
            Some(Done::Event(posted)) => {
                posting -= 1;
                summary.events.add(posted);
            }
            Some(Done::Identity(target, outcome)) => {
                running -= 1;
                let outcome = outcome?;
                if record {
                    let event = events::event(target, &outcome, &instance, Timestamp::now());
                    posting += 1;
                    tasks.push(
                        async move { Done::Event(events::record(kube, event).await) }.boxed_local(),
                    );
                }
                summary.add(target, outcome);
                progress();
            }
        }
    }
    summary.skipped.sort();
    summary.failed.sort();
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(pod: Value, include_terminated: bool) -> Option<(String, String)> {
        let options = Options {
            dry_run: false,
            include_terminated,
            all_namespaces: false,
            record_events: false,
        };
        let (account, user) = pod_user(serde_json::from_value::<Pod>(pod).unwrap(), options)?;
        Some((account, user.short().trim_start_matches("pod/").to_string()))
    }

    #[test]
    fn a_pod_is_read_for_its_account_name_and_phase_only() {
        let pod = json!({"metadata": {"name": "p", "namespace": "n", "uid": "u"},
            "spec": {"serviceAccountName": "nvcf-worker-a", "containers": [{"name": "c"}]},
            "status": {"phase": "Running", "conditions": []}});
        assert_eq!(user(pod, true), Some(("nvcf-worker-a".into(), "p".into())));
        // The deprecated field, as the plan reads it, when the other is empty.
        let old = json!({"metadata": {"name": "q"},
            "spec": {"serviceAccountName": "", "serviceAccount": "nvcf-worker-b"}});
        assert_eq!(user(old, false), Some(("nvcf-worker-b".into(), "q".into())));
        let none = json!({"metadata": {"name": "r"}, "spec": {}});
        assert_eq!(user(none, false), None);
    }

    #[test]
    fn a_batch_covers_64_identities_per_page_of_its_namespace_s_pods() {
        assert_eq!(batch_size(0, 500), 64);
        assert_eq!(batch_size(500, 500), 64);
        assert_eq!(batch_size(501, 500), 128);
        assert_eq!(batch_size(5000, 500), 640);
        assert_eq!(batch_size(5000, 1), MAX_BATCH);
        let identity = |ns: &str, k: usize| PlannedIdentity {
            namespace: ns.into(),
            name: format!("nvcf-worker-{k}"),
            state: super::super::inventory::State::Orphaned,
            deletions: Vec::new(),
            reason: String::new(),
        };
        let mut plan = Plan::default();
        plan.delete.extend((0..700).map(|k| identity("big", k)));
        plan.delete.extend((0..100).map(|k| identity("small", k)));
        plan.pods.insert("big".into(), 1200);
        plan.pods.insert("small".into(), 3);
        // 192 a batch from the big namespace's first identity (3 pages), then 64
        // from where a batch starts in the small one; a batch may cross over.
        assert_eq!(
            cut_batches(&plan, 500),
            vec![0..192, 192..384, 384..576, 576..768, 768..800]
        );
    }

    #[test]
    fn terminated_pods_count_as_gone_only_with_include_terminated() {
        for phase in ["Succeeded", "Failed"] {
            let pod = json!({"metadata": {"name": "p"},
                "spec": {"serviceAccountName": "nvcf-worker-a"}, "status": {"phase": phase}});
            assert_eq!(user(pod.clone(), true), None);
            assert_eq!(user(pod, false), Some(("nvcf-worker-a".into(), "p".into())));
        }
    }
}
