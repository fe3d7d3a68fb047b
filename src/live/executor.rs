//! Runs a cleanup plan. Right before an identity's deletes it checks again that
//! nothing came to run as it since the plan was made: a pod (one list by field
//! selector per identity) or a pod template of a built-in workload kind (the kinds
//! listed once per batch of identities and namespace, as the batch starts). Then
//! RoleBinding, Role, ServiceAccount, each with the UID it had when listed.

use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

use futures::future::{FutureExt, LocalBoxFuture, Shared};
use futures::stream::{self, StreamExt};
use serde_json::Value;

use super::cleanup::{Plan, PlannedIdentity};
use super::client::{self, DeleteOutcome, Kube, Scope};
use super::inventory::{is_terminated, template_account};
use crate::error::{Error, Result};
use crate::identity::is_reserved;

/// Identities in flight at once; each identity's own requests stay in order.
pub const CONCURRENCY: usize = 8;

/// Identities per workload re-check: the seven workload kinds are listed once per
/// namespace of a batch, so their cost is per batch, not per identity, and what a
/// batch holds of them is freed with it.
pub const BATCH: usize = 64;

#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Send every delete with dryRun=All.
    pub dry_run: bool,
    /// Succeeded and Failed pods count as gone (as in the plan).
    pub include_terminated: bool,
}

/// How one identity's deletion ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every object deleted or already gone; the count actually deleted.
    Deleted {
        objects: usize,
    },
    /// Stopped before deleting the rest: it came into use since the plan, or an
    /// object was replaced since it was listed. `objects` were deleted before that
    /// (the summary counts every delete).
    Skipped {
        reason: String,
        objects: usize,
    },
    Failed {
        error: String,
        objects: usize,
    },
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub deleted: usize,
    pub objects: usize,
    /// (namespace/name, why).
    pub skipped: Vec<(String, String)>,
    pub failed: Vec<(String, String)>,
}

impl Summary {
    pub fn add(&mut self, identity: &PlannedIdentity, outcome: Outcome) {
        let key = format!("{}/{}", identity.namespace, identity.name);
        match outcome {
            Outcome::Deleted { objects } => {
                self.deleted += 1;
                self.objects += objects;
            }
            Outcome::Skipped { reason, objects } => {
                self.objects += objects;
                self.skipped.push((key, reason));
            }
            Outcome::Failed { error, objects } => {
                self.objects += objects;
                self.failed.push((key, error));
            }
        }
    }
}

/// `(namespace, account)` → the first workload whose pod template runs as it
/// (`deployment/web`).
type Templates = HashMap<(String, String), String>;

/// A batch's workload lists, shared by its identities. A failed list fails the
/// batch's identities (nothing unchecked is deleted); a 403 stops the run.
#[derive(Clone)]
enum Listed {
    Templates(Rc<Templates>),
    Failed(String),
    Forbidden {
        verb: String,
        resource: String,
        namespace: Option<String>,
        message: String,
    },
}

type Batch<'a> = Shared<LocalBoxFuture<'a, Listed>>;

async fn list_templates(kube: &Kube, namespaces: BTreeSet<String>) -> Listed {
    let lists = namespaces.iter().flat_map(|ns| {
        client::WORKLOADS.iter().map(move |r| async move {
            let scope = Scope::Namespace(ns.clone());
            kube.list_fold(
                r,
                &scope,
                false,
                None,
                |found: &mut Templates, item: Value| {
                    let Some(account) = template_account(&item) else {
                        return;
                    };
                    let text = |p: &str| item.pointer(p).and_then(Value::as_str).unwrap_or("");
                    let user = format!(
                        "{}/{}",
                        text("/kind").to_ascii_lowercase(),
                        text("/metadata/name")
                    );
                    found
                        .entry((text("/metadata/namespace").to_string(), account.to_string()))
                        .or_insert(user);
                },
            )
            .await
        })
    });
    match futures::future::try_join_all(lists).await {
        Ok(found) => {
            let mut all = Templates::new();
            for f in found {
                for (k, v) in f {
                    all.entry(k).or_insert(v);
                }
            }
            Listed::Templates(Rc::new(all))
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

/// A pod that runs as the identity now (terminated ones only when they count).
async fn pod_user(
    kube: &Kube,
    target: &PlannedIdentity,
    options: Options,
) -> Result<Option<String>> {
    let selector = format!("spec.serviceAccountName={}", target.name);
    kube.list_unpaged(
        &client::PODS,
        &Scope::Namespace(target.namespace.clone()),
        &selector,
        |user: &mut Option<String>, pod: Value| {
            let phase = pod
                .pointer("/status/phase")
                .and_then(Value::as_str)
                .unwrap_or("");
            if user.is_none() && !(options.include_terminated && is_terminated(phase)) {
                *user = pod
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
        },
    )
    .await
}

/// What came to run as the identity since the plan, if anything.
async fn recheck(
    kube: &Kube,
    target: &PlannedIdentity,
    batch: Batch<'_>,
    options: Options,
) -> Result<std::result::Result<Option<String>, String>> {
    let (pod, listed) = futures::join!(pod_user(kube, target, options), batch);
    let pod = match pod {
        Ok(pod) => pod,
        Err(e @ Error::Forbidden { .. }) => return Err(e),
        Err(e) => return Ok(Err(e.to_string())),
    };
    if let Some(pod) = pod {
        return Ok(Ok(Some(format!("pod/{pod}"))));
    }
    match listed {
        Listed::Templates(t) => Ok(Ok(t
            .get(&(target.namespace.clone(), target.name.clone()))
            .cloned())),
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
            reason: format!("{} is not a worker identity name", target.name),
            objects: 0,
        });
    }
    match recheck(kube, target, batch, options).await? {
        Ok(None) => {}
        Ok(Some(user)) => {
            return Ok(Outcome::Skipped {
                reason: format!("in use by {user} since the plan"),
                objects: 0,
            })
        }
        Err(error) => {
            return Ok(Outcome::Failed {
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
                    error: e.to_string(),
                    objects,
                })
            }
        }
    }
    Ok(Outcome::Deleted { objects })
}

/// Runs the plan, [`CONCURRENCY`] identities at a time in one stream (no batch
/// waits for the last of the one before). A batch's workload lists start with its
/// first identity and run beside that identity's pod check. `progress` is called
/// after each identity. A 403 stops everything: no other request would be allowed
/// either.
pub async fn execute(
    kube: &Kube,
    plan: &Plan,
    options: Options,
    progress: &dyn Fn(),
) -> Result<Summary> {
    let mut current: Option<(usize, Batch<'_>)> = None;
    let targets = plan.delete.iter().enumerate().map(move |(i, target)| {
        let index = i / BATCH;
        if current.as_ref().map(|(b, _)| *b) != Some(index) {
            let end = ((index + 1) * BATCH).min(plan.delete.len());
            let namespaces = plan.delete[index * BATCH..end]
                .iter()
                .map(|t| t.namespace.clone())
                .collect();
            current = Some((
                index,
                list_templates(kube, namespaces).boxed_local().shared(),
            ));
        }
        let batch = current.as_ref().map(|(_, b)| b.clone()).expect("set above");
        (target, batch)
    });
    let mut results = stream::iter(targets)
        .map(|(target, batch)| async move {
            (target, delete_identity(kube, target, batch, options).await)
        })
        .buffer_unordered(CONCURRENCY);
    let mut summary = Summary::default();
    while let Some((target, outcome)) = results.next().await {
        summary.add(target, outcome?);
        progress();
    }
    summary.skipped.sort();
    summary.failed.sort();
    Ok(summary)
}
