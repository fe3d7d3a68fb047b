//! Worker identities as found in a cluster, their owners, and what state each is
//! in. Pure: built from listed objects, so list, cleanup and the tests share it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use serde_json::Value;

use super::client::{self, Resource};
use crate::identity::{
    is_reserved, INFRA_ANNOTATION, MINISERVICE_LABEL, ORIGIN_LABEL, ORIGIN_MANIFEST, PREFIX,
    SCOPE_ANNOTATION, SCOPE_NAMESPACE, WORKER_NAME, WORKLOAD_ANNOTATION,
    WORKLOAD_API_VERSION_ANNOTATION,
};

/// The three objects of an identity, in the order cleanup deletes them (the reverse
/// of the agent's creation order, so a half-deleted identity never grants more).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Member {
    RoleBinding,
    Role,
    ServiceAccount,
}

impl Member {
    pub const DELETE_ORDER: [Member; 3] =
        [Member::RoleBinding, Member::Role, Member::ServiceAccount];

    pub fn resource(self) -> Resource {
        match self {
            Member::RoleBinding => client::ROLE_BINDINGS,
            Member::Role => client::ROLES,
            Member::ServiceAccount => client::SERVICE_ACCOUNTS,
        }
    }

    pub fn kind(self) -> &'static str {
        self.resource().kind
    }

    fn of_kind(kind: &str) -> Option<Member> {
        Member::DELETE_ORDER.into_iter().find(|m| m.kind() == kind)
    }
}

/// One listed ServiceAccount, Role or RoleBinding (metadata only).
#[derive(Clone, Debug, PartialEq)]
pub struct ListedObject {
    pub member: Member,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// As listed: what an Event about it names (`regarding.resourceVersion`).
    pub resource_version: String,
    /// Seconds since the Unix epoch; None when the server sent none.
    pub created: Option<i64>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// RFC 3339 to Unix seconds.
pub fn parse_time(text: &str) -> Option<i64> {
    text.parse::<k8s_openapi::jiff::Timestamp>()
        .ok()
        .map(|t| t.as_second())
}

impl ListedObject {
    /// A worker trio member from a list item (with `kind` set); None for anything
    /// else, so names that are not reserved never enter the inventory.
    pub fn from_item(item: &Value) -> Option<ListedObject> {
        let member = Member::of_kind(item.get("kind")?.as_str()?)?;
        let meta = item.get("metadata")?;
        let text = |k: &str| meta.get(k).and_then(Value::as_str).map(str::to_string);
        let name = text("name")?;
        if !is_reserved(&name) {
            return None;
        }
        Some(ListedObject {
            member,
            namespace: text("namespace")?,
            name,
            uid: text("uid")?,
            resource_version: text("resourceVersion").unwrap_or_default(),
            created: text("creationTimestamp").as_deref().and_then(parse_time),
            labels: string_map(meta.get("labels")),
            annotations: string_map(meta.get("annotations")),
        })
    }
}

/// Who an identity belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Provisioned by the agent for one pod: `nvcf-worker-<pod>`.
    Pod { pod: String },
    /// Declared in a manifest by `kubectl-nvcf-worker inject`; owned by a workload.
    Manifest {
        api_version: String,
        kind: String,
        name: String,
    },
    /// Labelled as manifest-declared but without a readable workload annotation:
    /// its owner cannot be known, so it is never treated as orphaned.
    ManifestUnknownOwner,
    /// `nvcf-worker`, the one identity of a namespace: the agent's for a
    /// MiniService (`miniservice` names it), or declared with `naming: per-namespace`.
    /// Whatever runs as it is its owner.
    Namespace { miniservice: Option<String> },
}

/// Who made an identity, by the marks on its objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MadeBy {
    /// The agent: its infra annotation or MiniService label (`setWorkerIdentityMeta`),
    /// or a per-pod `nvcf-worker-<pod>` without any marks, as the per-pod agent
    /// provisions them.
    Agent,
    /// Declared in a manifest: `inject`'s origin label on some member.
    Manifest,
    /// `nvcf-worker` with neither the agent's marks nor the transformer's: made by
    /// hand or by an agent that did not mark it; never guessed either way.
    Unknown,
}

impl MadeBy {
    pub fn as_str(self) -> &'static str {
        match self {
            MadeBy::Agent => "agent",
            MadeBy::Manifest => "manifest",
            MadeBy::Unknown => "unknown",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnerStatus {
    /// A pod, with its phase (Pending, Running, Succeeded, Failed, Unknown).
    Pod {
        phase: String,
    },
    Exists,
    Gone,
    /// The owner's kind is not one this tool lists; treated as existing.
    Unknown,
}

/// What cleanup may do with an identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// The owner exists.
    Active,
    /// The owner is gone and the trio is complete.
    Orphaned,
    /// The owner is gone and only part of the trio is left (an interrupted teardown).
    Partial,
    /// Some member is younger than the minimum age: maybe still being provisioned.
    Young,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Active => "active",
            State::Orphaned => "orphaned",
            State::Partial => "partial",
            State::Young => "young",
        }
    }

    /// Whether cleanup deletes identities in this state.
    pub fn is_removable(self) -> bool {
        matches!(self, State::Orphaned | State::Partial)
    }
}

pub use super::in_use::template_account;
use super::in_use::{User, Uses};

/// Owners that exist, from pod and workload lists.
#[derive(Clone, Debug, Default)]
pub struct Owners {
    /// (namespace, pod) → phase.
    pub pods: HashMap<(String, String), String>,
    /// (namespace, apiVersion, kind, name) of existing workloads.
    pub workloads: HashSet<(String, String, String, String)>,
    /// Workload types that were listed; others are `OwnerStatus::Unknown`.
    pub listed_kinds: HashSet<(String, String)>,
    /// Who uses which account: the one model of "in use" (`in_use`).
    pub uses: Uses,
}

pub fn is_terminated(phase: &str) -> bool {
    phase == "Succeeded" || phase == "Failed"
}

impl Owners {
    pub fn add_pod(&mut self, pod: &Value) {
        let text = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or("");
        let (ns, name) = (text("/metadata/namespace"), text("/metadata/name"));
        let phase = match text("/status/phase") {
            "" => "Pending",
            p => p,
        }
        .to_string();
        let account = match text("/spec/serviceAccountName") {
            "" => text("/spec/serviceAccount"),
            a => a,
        };
        if !account.is_empty() {
            self.uses.add(
                ns,
                account,
                User::Pod {
                    name: name.to_string(),
                    phase: phase.clone(),
                },
            );
        }
        self.pods.insert((ns.to_string(), name.to_string()), phase);
    }

    pub fn add_workload(&mut self, item: &Value) {
        let text = |p: &str| item.pointer(p).and_then(Value::as_str).unwrap_or("");
        if let Some(account) = template_account(item) {
            self.uses.add(
                text("/metadata/namespace"),
                account,
                User::Template {
                    kind: text("/kind").into(),
                    name: text("/metadata/name").into(),
                },
            );
        }
        self.workloads.insert((
            text("/metadata/namespace").to_string(),
            text("/apiVersion").to_string(),
            text("/kind").to_string(),
            text("/metadata/name").to_string(),
        ));
    }

    /// Adds what another list found (lists are folded apart, then merged).
    pub fn merge(&mut self, other: Owners) {
        self.pods.extend(other.pods);
        self.workloads.extend(other.workloads);
        self.listed_kinds.extend(other.listed_kinds);
        self.uses.merge(other.uses);
    }

    /// What uses `account`, whatever the identity's labels say (`in_use`): a pod
    /// (terminated ones only when they are not to be treated as gone), the pod
    /// template of a listed pod-bearing object, or the tool's mutating policy.
    pub fn account_use(&self, ns: &str, account: &str, include_terminated: bool) -> Option<String> {
        self.uses.why(ns, account, include_terminated)
    }
}

/// A worker identity: up to three listed objects with one namespace and name.
#[derive(Clone, Debug, PartialEq)]
pub struct Identity {
    pub namespace: String,
    pub name: String,
    /// By `Member`; missing members are absent.
    pub members: BTreeMap<Member, ListedObject>,
}

impl Identity {
    pub fn is_complete(&self) -> bool {
        self.members.len() == 3
    }

    pub fn member(&self, m: Member) -> Option<&ListedObject> {
        self.members.get(&m)
    }

    /// The ServiceAccount's view wins, then the Role's, then the RoleBinding's.
    fn first_with<T>(&self, f: impl Fn(&ListedObject) -> Option<T>) -> Option<T> {
        [Member::ServiceAccount, Member::Role, Member::RoleBinding]
            .into_iter()
            .filter_map(|m| self.members.get(&m))
            .find_map(f)
    }

    pub fn origin(&self) -> Origin {
        let manifest = self.first_with(|o| {
            (o.labels.get(ORIGIN_LABEL).map(String::as_str) == Some(ORIGIN_MANIFEST)).then_some(())
        });
        let per_namespace = self.first_with(|o| {
            (o.annotations.get(SCOPE_ANNOTATION).map(String::as_str) == Some(SCOPE_NAMESPACE))
                .then_some(())
        });
        if self.name == WORKER_NAME && (manifest.is_none() || per_namespace.is_some()) {
            return Origin::Namespace {
                miniservice: self.first_with(|o| o.labels.get(MINISERVICE_LABEL).cloned()),
            };
        }
        if manifest.is_none() {
            return Origin::Pod {
                pod: self
                    .name
                    .strip_prefix(PREFIX)
                    .unwrap_or(&self.name)
                    .to_string(),
            };
        }
        let workload = self.first_with(|o| o.annotations.get(WORKLOAD_ANNOTATION).cloned());
        let api_version =
            self.first_with(|o| o.annotations.get(WORKLOAD_API_VERSION_ANNOTATION).cloned());
        match (
            workload.as_deref().and_then(|w| w.split_once('/')),
            api_version,
        ) {
            (Some((kind, name)), Some(api_version)) if !kind.is_empty() && !name.is_empty() => {
                Origin::Manifest {
                    api_version,
                    kind: kind.to_string(),
                    name: name.to_string(),
                }
            }
            _ => Origin::ManifestUnknownOwner,
        }
    }

    /// Who made it. The transformer's origin label wins over the agent's marks: a
    /// declared identity whose Role the agent has since reset is still declared.
    pub fn made_by(&self) -> MadeBy {
        let manifest = self.first_with(|o| {
            (o.labels.get(ORIGIN_LABEL).map(String::as_str) == Some(ORIGIN_MANIFEST)).then_some(())
        });
        if manifest.is_some() {
            return MadeBy::Manifest;
        }
        let agents = self.first_with(|o| {
            (o.annotations
                .get(INFRA_ANNOTATION)
                .is_some_and(|v| !v.is_empty())
                || o.labels
                    .get(MINISERVICE_LABEL)
                    .is_some_and(|v| !v.is_empty()))
            .then_some(())
        });
        if agents.is_some() || self.name != WORKER_NAME {
            MadeBy::Agent
        } else {
            MadeBy::Unknown
        }
    }

    /// The newest member's creation time: the identity is as young as its youngest part.
    pub fn created(&self) -> Option<i64> {
        self.members.values().filter_map(|o| o.created).max()
    }

    pub fn owner_status(&self, owners: &Owners) -> OwnerStatus {
        let ns = self.namespace.clone();
        match self.origin() {
            Origin::Pod { pod } => match owners.pods.get(&(ns, pod)) {
                Some(phase) => OwnerStatus::Pod {
                    phase: phase.clone(),
                },
                None => OwnerStatus::Gone,
            },
            Origin::Manifest {
                api_version,
                kind,
                name,
            } => {
                if api_version == "v1" && kind == "Pod" {
                    return match owners.pods.get(&(ns, name)) {
                        Some(phase) => OwnerStatus::Pod {
                            phase: phase.clone(),
                        },
                        None => OwnerStatus::Gone,
                    };
                }
                if !owners
                    .listed_kinds
                    .contains(&(api_version.clone(), kind.clone()))
                {
                    return OwnerStatus::Unknown;
                }
                if owners.workloads.contains(&(ns, api_version, kind, name)) {
                    OwnerStatus::Exists
                } else {
                    OwnerStatus::Gone
                }
            }
            Origin::ManifestUnknownOwner => OwnerStatus::Unknown,
            // The agent reconciles its own; a declared one lives by its users only.
            Origin::Namespace { miniservice } => match miniservice {
                Some(_) => OwnerStatus::Unknown,
                None => OwnerStatus::Gone,
            },
        }
    }

    /// The state, given the owners that exist and the clock.
    pub fn state(&self, owners: &Owners, now: i64, options: &StateOptions) -> State {
        self.assess(owners, now, options).0
    }

    /// The state and why: what keeps the identity, or why it may go.
    pub fn assess(&self, owners: &Owners, now: i64, options: &StateOptions) -> (State, String) {
        let min_age = options.min_age.as_secs() as i64;
        // An object without a timestamp is treated as new: never guess it is old.
        let young = self.members.values().any(|o| match o.created {
            Some(c) => now - c < min_age,
            None => true,
        });
        if young {
            return (
                State::Young,
                "an object is younger than --min-age (maybe still being provisioned)".into(),
            );
        }
        // Whatever runs as the account keeps it, whoever its owner is.
        if let Some(why) =
            owners.account_use(&self.namespace, &self.name, options.include_terminated)
        {
            return (State::Active, why);
        }
        let owner = self.origin();
        let kept = match (self.owner_status(owners), &owner) {
            (OwnerStatus::Pod { phase }, Origin::Pod { pod })
                if !(options.include_terminated && is_terminated(&phase)) =>
            {
                Some(format!("its pod {pod} exists ({phase})"))
            }
            (OwnerStatus::Pod { phase }, Origin::Manifest { name, .. })
                if !(options.include_terminated && is_terminated(&phase)) =>
            {
                Some(format!("its pod {name} exists ({phase})"))
            }
            (OwnerStatus::Exists, Origin::Manifest { kind, name, .. }) => {
                Some(format!("its workload {kind}/{name} exists"))
            }
            (
                OwnerStatus::Unknown,
                Origin::Namespace {
                    miniservice: Some(m),
                },
            ) => Some(format!("the agent reconciles it for MiniService {m}")),
            (OwnerStatus::Unknown, Origin::Manifest { kind, .. }) => Some(format!(
                "its owner's kind {kind} is not listed: never guessed gone"
            )),
            (OwnerStatus::Unknown, _) => Some("its owner cannot be known".into()),
            _ => None,
        };
        match kept {
            Some(why) => (State::Active, why),
            None if self.is_complete() => (
                State::Orphaned,
                "nothing runs as it and its owner is gone".into(),
            ),
            None => (
                State::Partial,
                "nothing runs as it, its owner is gone and part of it is missing".into(),
            ),
        }
    }
}

/// What decides an identity's state besides the cluster.
#[derive(Clone, Copy, Debug)]
pub struct StateOptions {
    pub min_age: Duration,
    /// Count Succeeded and Failed pods as gone.
    pub include_terminated: bool,
}

/// Groups listed objects into identities, sorted by namespace and name.
pub fn identities(objects: impl IntoIterator<Item = ListedObject>) -> Vec<Identity> {
    let mut by_key: BTreeMap<(String, String), Identity> = BTreeMap::new();
    for o in objects {
        if !is_reserved(&o.name) {
            continue;
        }
        let id = by_key
            .entry((o.namespace.clone(), o.name.clone()))
            .or_insert_with(|| Identity {
                namespace: o.namespace.clone(),
                name: o.name.clone(),
                members: BTreeMap::new(),
            });
        id.members.insert(o.member, o);
    }
    by_key.into_values().collect()
}

/// `5m`, `3h`, `2d`, kubectl's AGE column.
pub fn human_age(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..=119 => format!("{s}s"),
        120..=7_199 => format!("{}m", s / 60),
        7_200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    pub const NOW: i64 = 1_800_000_000;

    pub fn object(member: Member, ns: &str, name: &str, age_secs: i64) -> ListedObject {
        ListedObject {
            member,
            namespace: ns.into(),
            name: name.into(),
            uid: format!("uid-{}-{ns}-{name}", member.kind()),
            resource_version: "1".into(),
            created: Some(NOW - age_secs),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
        }
    }

    pub fn trio(ns: &str, name: &str, age_secs: i64) -> Vec<ListedObject> {
        Member::DELETE_ORDER
            .into_iter()
            .map(|m| object(m, ns, name, age_secs))
            .collect()
    }

    pub fn manifest_trio(
        ns: &str,
        name: &str,
        workload: &str,
        api_version: &str,
    ) -> Vec<ListedObject> {
        trio(ns, name, 3600)
            .into_iter()
            .map(|mut o| {
                o.labels.insert(ORIGIN_LABEL.into(), ORIGIN_MANIFEST.into());
                o.annotations
                    .insert(WORKLOAD_ANNOTATION.into(), workload.into());
                o.annotations
                    .insert(WORKLOAD_API_VERSION_ANNOTATION.into(), api_version.into());
                o
            })
            .collect()
    }

    pub fn options() -> StateOptions {
        StateOptions {
            min_age: Duration::from_secs(600),
            include_terminated: false,
        }
    }

    fn pod(owners: &mut Owners, ns: &str, name: &str, account: &str, phase: &str) {
        owners.add_pod(&json!({"metadata": {"namespace": ns, "name": name},
            "spec": {"serviceAccountName": account}, "status": {"phase": phase}}));
    }

    #[test]
    fn from_item_keeps_only_worker_trio_members() {
        let sa = json!({"kind": "ServiceAccount", "metadata": {"name": "nvcf-worker-a", "namespace": "n", "uid": "u1", "creationTimestamp": "2027-01-15T08:00:00Z"}});
        let o = ListedObject::from_item(&sa).unwrap();
        assert_eq!((o.member, o.uid.as_str()), (Member::ServiceAccount, "u1"));
        assert_eq!(o.created, Some(1800000000));
        let other = json!({"kind": "ServiceAccount", "metadata": {"name": "default", "namespace": "n", "uid": "u"}});
        assert!(ListedObject::from_item(&other).is_none());
        let pod = json!({"kind": "Pod", "metadata": {"name": "nvcf-worker-a", "namespace": "n", "uid": "u"}});
        assert!(ListedObject::from_item(&pod).is_none());
    }

    #[test]
    fn parse_time_reads_rfc3339() {
        assert_eq!(parse_time("1970-01-01T00:01:40Z"), Some(100));
        assert_eq!(parse_time("nonsense"), None);
    }

    #[test]
    fn per_pod_identity_follows_its_pod_and_phase() {
        let ids = identities(trio("n", "nvcf-worker-p", 3600));
        let mut owners = Owners::default();
        assert_eq!(ids[0].state(&owners, NOW, &options()), State::Orphaned);
        pod(&mut owners, "n", "p", "nvcf-worker-p", "Running");
        assert_eq!(ids[0].state(&owners, NOW, &options()), State::Active);
        let mut done = Owners::default();
        pod(&mut done, "n", "p", "nvcf-worker-p", "Succeeded");
        assert_eq!(ids[0].state(&done, NOW, &options()), State::Active);
        let include = StateOptions {
            include_terminated: true,
            ..options()
        };
        assert_eq!(ids[0].state(&done, NOW, &include), State::Orphaned);
    }

    #[test]
    fn young_wins_over_everything_and_missing_timestamps_count_as_young() {
        let mut objs = trio("n", "nvcf-worker-p", 3600);
        objs[0].created = Some(NOW - 30);
        let ids = identities(objs);
        assert_eq!(
            ids[0].state(&Owners::default(), NOW, &options()),
            State::Young
        );
        let mut objs = trio("n", "nvcf-worker-q", 3600);
        objs[2].created = None;
        let ids = identities(objs);
        assert_eq!(
            ids[0].state(&Owners::default(), NOW, &options()),
            State::Young
        );
    }

    #[test]
    fn incomplete_trio_of_a_gone_owner_is_partial() {
        let mut objs = trio("n", "nvcf-worker-p", 3600);
        objs.remove(0);
        let ids = identities(objs);
        assert!(!ids[0].is_complete());
        assert_eq!(
            ids[0].state(&Owners::default(), NOW, &options()),
            State::Partial
        );
    }

    #[test]
    fn manifest_identity_lives_while_its_workload_exists() {
        let ids = identities(manifest_trio(
            "n",
            "nvcf-worker-web",
            "Deployment/web",
            "apps/v1",
        ));
        let mut owners = Owners::default();
        owners
            .listed_kinds
            .insert(("apps/v1".into(), "Deployment".into()));
        assert_eq!(ids[0].state(&owners, NOW, &options()), State::Orphaned);
        // A Deployment scaled to 0 still exists: no pods, still active.
        owners.add_workload(&json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"namespace": "n", "name": "web"}}));
        assert_eq!(ids[0].state(&owners, NOW, &options()), State::Active);
        // An unlisted owner kind is never guessed to be gone.
        let ids = identities(manifest_trio(
            "n",
            "nvcf-worker-r",
            "Rollout/r",
            "argoproj.io/v1alpha1",
        ));
        assert_eq!(ids[0].owner_status(&owners), OwnerStatus::Unknown);
        assert_eq!(ids[0].state(&owners, NOW, &options()), State::Active);
    }

    #[test]
    fn a_pod_running_as_the_account_keeps_it_even_if_the_names_differ() {
        let ids = identities(trio("n", "nvcf-worker-web", 3600));
        let mut owners = Owners::default();
        pod(
            &mut owners,
            "n",
            "web-5d8f-abcde",
            "nvcf-worker-web",
            "Running",
        );
        assert_eq!(ids[0].state(&owners, NOW, &options()), State::Active);
    }

    #[test]
    fn template_account_reads_each_kinds_pod_spec_and_the_deprecated_field() {
        let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob", "spec": {"jobTemplate":
            {"spec": {"template": {"spec": {"serviceAccountName": "nvcf-worker-n"}}}}}});
        assert_eq!(template_account(&cron), Some("nvcf-worker-n"));
        let old = json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template":
            {"spec": {"serviceAccountName": "", "serviceAccount": "nvcf-worker-d"}}}});
        assert_eq!(template_account(&old), Some("nvcf-worker-d"));
        let none = json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"spec": {}}}});
        assert_eq!(template_account(&none), None);
        let custom = json!({"apiVersion": "example.com/v1", "kind": "Deployment", "spec": {"template":
            {"spec": {"serviceAccountName": "nvcf-worker-x"}}}});
        assert_eq!(template_account(&custom), None);
    }

    #[test]
    fn merged_owners_keep_every_list_s_findings() {
        let mut a = Owners::default();
        pod(&mut a, "n", "p", "nvcf-worker-p", "Running");
        let mut b = Owners::default();
        pod(&mut b, "n", "q", "nvcf-worker-p", "Pending");
        b.add_workload(&json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"namespace": "n", "name": "j"},
            "spec": {"template": {"spec": {"serviceAccountName": "nvcf-worker-p"}}}}));
        a.merge(b);
        assert_eq!(
            a.account_use("n", "nvcf-worker-p", false).as_deref(),
            Some("in use: pod p (Running), pod q (Pending), Job/j's pod template runs as it")
        );
        assert_eq!(a.pods.len(), 2);
    }

    #[test]
    fn made_by_reads_the_marks_and_never_guesses_a_bare_namespace_identity() {
        assert_eq!(
            identities(trio("n", "nvcf-worker-p", 3600))[0].made_by(),
            MadeBy::Agent
        );
        let declared = identities(manifest_trio(
            "n",
            "nvcf-worker-web",
            "Deployment/web",
            "apps/v1",
        ));
        assert_eq!(declared[0].made_by(), MadeBy::Manifest);
        assert_eq!(
            identities(trio("n", WORKER_NAME, 3600))[0].made_by(),
            MadeBy::Unknown
        );
        let agents: Vec<ListedObject> = trio("n", WORKER_NAME, 3600)
            .into_iter()
            .map(|mut o| {
                o.labels.insert(MINISERVICE_LABEL.into(), "ms".into());
                o.annotations.insert(INFRA_ANNOTATION.into(), "true".into());
                o
            })
            .collect();
        assert_eq!(identities(agents)[0].made_by(), MadeBy::Agent);
        // Declared, then reset by the agent's reconciler: still declared.
        let reset: Vec<ListedObject> =
            manifest_trio("n", "nvcf-worker-web", "Deployment/web", "apps/v1")
                .into_iter()
                .map(|mut o| {
                    if o.member == Member::Role {
                        o.annotations.insert(INFRA_ANNOTATION.into(), "true".into());
                    }
                    o
                })
                .collect();
        assert_eq!(identities(reset)[0].made_by(), MadeBy::Manifest);
    }

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(human_age(59), "59s");
        assert_eq!(human_age(600), "10m");
        assert_eq!(human_age(7200), "2h");
        assert_eq!(human_age(3 * 86_400), "3d");
    }
}
