//! `cleanup`'s plan: pure, from what was listed, so every safety rule is testable
//! without a cluster and the plan is what `--yes` sets out to do. The executor
//! (`executor.rs`) re-checks and deletes.

use std::collections::BTreeMap;
use std::time::Duration;

use super::inventory::{Identity, Member, Owners, State, StateOptions};
use crate::identity::is_reserved;

/// One object to delete, with the UID (and resourceVersion) it had when listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deletion {
    pub member: Member,
    pub uid: String,
    pub resource_version: String,
}

/// An identity to take, its objects in deletion order (RoleBinding, Role, ServiceAccount).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedIdentity {
    pub namespace: String,
    pub name: String,
    pub state: State,
    pub deletions: Vec<Deletion>,
    /// Why it may go.
    pub reason: String,
}

/// An identity left alone, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptIdentity {
    pub namespace: String,
    pub name: String,
    pub state: State,
    pub reason: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    pub delete: Vec<PlannedIdentity>,
    /// Identities left alone, counted by state (active, young).
    pub kept: BTreeMap<State, usize>,
    /// The same identities, each with its reason.
    pub keep: Vec<KeptIdentity>,
    /// The pods the plan read in each namespace it deletes in: how many
    /// identities one re-check there may cover (`executor::batch_size`).
    pub pods: BTreeMap<String, usize>,
}

impl Plan {
    pub fn objects(&self) -> usize {
        self.delete.iter().map(|p| p.deletions.len()).sum()
    }
}

/// Decides what cleanup deletes: orphaned and partial identities old enough that
/// no pod and no workload's pod template runs as, and only objects with reserved
/// names (`nvcf-worker`, `nvcf-worker-*`).
pub fn plan(identities: &[Identity], owners: &Owners, now: i64, options: &StateOptions) -> Plan {
    let mut out = Plan::default();
    for id in identities {
        let (state, reason) = id.assess(owners, now, options);
        if !state.is_removable() || !is_reserved(&id.name) {
            *out.kept.entry(state).or_default() += 1;
            out.keep.push(KeptIdentity {
                namespace: id.namespace.clone(),
                name: id.name.clone(),
                state,
                reason,
            });
            continue;
        }
        let deletions = Member::DELETE_ORDER
            .into_iter()
            .filter_map(|m| id.member(m))
            .filter(|o| is_reserved(&o.name))
            .map(|o| Deletion {
                member: o.member,
                uid: o.uid.clone(),
                resource_version: o.resource_version.clone(),
            })
            .collect();
        out.delete.push(PlannedIdentity {
            namespace: id.namespace.clone(),
            name: id.name.clone(),
            state,
            deletions,
            reason,
        });
    }
    let wanted: std::collections::BTreeSet<&str> =
        out.delete.iter().map(|p| p.namespace.as_str()).collect();
    for (ns, _) in owners.pods.keys() {
        if wanted.contains(ns.as_str()) {
            *out.pods.entry(ns.clone()).or_default() += 1;
        }
    }
    out
}

/// `10m`, `1h30m`, `45s`, `2d`, or plain seconds.
pub fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total = 0u64;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(format!("{text:?}: unknown unit {c:?} (use s, m, h or d)")),
        };
        let n: u64 = number
            .parse()
            .map_err(|_| format!("{text:?}: expected a number before {c:?}"))?;
        total += n * unit;
        number.clear();
    }
    if !number.is_empty() || text.is_empty() {
        return Err(format!(
            "{text:?}: expected a duration such as 10m, 1h or 90s"
        ));
    }
    Ok(Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use super::super::in_use::Admission;
    use super::super::inventory::tests::{manifest_trio, object, options, trio, NOW};
    use super::super::inventory::{identities, ListedObject};
    use super::*;
    use serde_json::json;

    fn plan_of(objects: Vec<ListedObject>, owners: &Owners) -> Plan {
        plan(&identities(objects), owners, NOW, &options())
    }

    #[test]
    fn orphan_is_deleted_rolebinding_then_role_then_serviceaccount_with_listed_uids() {
        let p = plan_of(trio("n", "nvcf-worker-p", 3600), &Owners::default());
        assert_eq!(p.delete.len(), 1);
        let d = &p.delete[0];
        assert_eq!(d.state, State::Orphaned);
        let order: Vec<_> = d.deletions.iter().map(|d| d.member).collect();
        assert_eq!(order, Member::DELETE_ORDER);
        assert_eq!(d.deletions[0].uid, "uid-RoleBinding-n-nvcf-worker-p");
        assert_eq!(p.objects(), 3);
    }

    #[test]
    fn identities_younger_than_min_age_are_never_taken() {
        let p = plan_of(trio("n", "nvcf-worker-p", 599), &Owners::default());
        assert!(p.delete.is_empty());
        assert_eq!(p.kept.get(&State::Young), Some(&1));
        let p = plan_of(trio("n", "nvcf-worker-p", 600), &Owners::default());
        assert_eq!(p.delete.len(), 1);
    }

    #[test]
    fn only_worker_names_are_ever_planned() {
        let mut objs = trio("n", "nvcf-worker-p", 3600);
        objs.push(object(Member::ServiceAccount, "n", "default", 3600));
        objs.push(object(Member::Role, "n", "nvcf-workerx", 3600));
        let p = plan_of(objs, &Owners::default());
        assert_eq!(p.delete.len(), 1);
        assert!(p.delete.iter().all(|d| is_reserved(&d.name)));
    }

    #[test]
    fn terminated_pods_count_as_gone_only_when_asked() {
        let mut owners = Owners::default();
        owners.add_pod(&json!({"metadata": {"namespace": "n", "name": "p"},
            "spec": {"serviceAccountName": "nvcf-worker-p"}, "status": {"phase": "Failed"}}));
        let ids = identities(trio("n", "nvcf-worker-p", 3600));
        assert!(plan(&ids, &owners, NOW, &options()).delete.is_empty());
        let include = StateOptions {
            include_terminated: true,
            ..options()
        };
        assert_eq!(plan(&ids, &owners, NOW, &include).delete.len(), 1);
    }

    #[test]
    fn manifest_identity_of_an_existing_workload_is_kept() {
        let mut owners = Owners::default();
        for (v, k) in [("apps/v1", "Deployment"), ("batch/v1", "CronJob")] {
            owners.listed_kinds.insert((v.into(), k.into()));
        }
        // Scaled to zero and between runs: the workloads exist, no pods do.
        owners.add_workload(&json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"namespace": "n", "name": "web"}}));
        owners.add_workload(&json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"namespace": "n", "name": "nightly"}}));
        let mut objs = manifest_trio("n", "nvcf-worker-web", "Deployment/web", "apps/v1");
        objs.extend(manifest_trio(
            "n",
            "nvcf-worker-nightly",
            "CronJob/nightly",
            "batch/v1",
        ));
        objs.extend(manifest_trio(
            "n",
            "nvcf-worker-old",
            "CronJob/old",
            "batch/v1",
        ));
        let p = plan_of(objs, &owners);
        let names: Vec<_> = p.delete.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["nvcf-worker-old"]);
        assert_eq!(p.kept.get(&State::Active), Some(&2));
    }

    #[test]
    fn an_identity_any_pod_template_uses_is_kept_whatever_its_labels_say() {
        let mut owners = Owners::default();
        owners.add_workload(&json!({"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"namespace": "n", "name": "nightly"},
            "spec": {"jobTemplate": {"spec": {"template": {"spec": {"serviceAccountName": "nvcf-worker-nightly"}}}}}}));
        owners.add_workload(&json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"namespace": "n", "name": "web"},
            "spec": {"template": {"spec": {"serviceAccount": "nvcf-worker-web"}}}}));
        owners
            .listed_kinds
            .insert(("apps/v1".into(), "Deployment".into()));
        // No mutating policy of the tool: the namespace's nvcf-worker is unused.
        owners.uses.admission = Admission::none();
        let mut objs = trio("n", "nvcf-worker-nightly", 3600);
        objs.extend(manifest_trio(
            "n",
            "nvcf-worker-web",
            "Deployment/web",
            "apps/v1",
        ));
        objs.extend(trio("m", "nvcf-worker-nightly", 3600));
        objs.extend(trio("n", "nvcf-worker", 3600));
        let p = plan_of(objs, &owners);
        let deleted: Vec<_> = p
            .delete
            .iter()
            .map(|d| format!("{}/{}", d.namespace, d.name))
            .collect();
        assert_eq!(deleted, ["m/nvcf-worker-nightly", "n/nvcf-worker"]);
        let kept: Vec<_> = p.keep.iter().map(|k| k.reason.as_str()).collect();
        assert_eq!(
            kept,
            [
                "in use: CronJob/nightly's pod template runs as it",
                "in use: StatefulSet/web's pod template runs as it"
            ]
        );
    }

    #[test]
    fn a_pod_template_s_identity_and_the_kit_a_mutating_policy_gives_are_kept() {
        let mut owners = Owners::default();
        owners.add_workload(&json!({"apiVersion": "v1", "kind": "PodTemplate",
            "metadata": {"namespace": "n", "name": "tpl"},
            "template": {"spec": {"serviceAccountName": "nvcf-worker"}}}));
        let opts = crate::mutating::Options::new("c1");
        let [policy, binding, _, check_binding] = crate::mutating::objects(&opts);
        let labels = BTreeMap::from([(crate::identity::WORKER_LABEL.into(), "true".into())]);
        owners.uses.admission = Admission::Read {
            givers: super::super::in_use::givers(&[policy], &[binding], &[check_binding]),
            namespaces: [
                ("k".to_string(), labels),
                ("u".to_string(), BTreeMap::new()),
            ]
            .into_iter()
            .collect(),
        };
        let mut objs = trio("n", "nvcf-worker", 3600);
        objs.extend(trio("k", "nvcf-worker", 3600));
        objs.extend(trio("u", "nvcf-worker", 3600));
        let p = plan_of(objs, &owners);
        let deleted: Vec<_> = p.delete.iter().map(|d| d.namespace.as_str()).collect();
        assert_eq!(deleted, ["u"]);
        let kept: Vec<_> = p.keep.iter().map(|k| k.reason.as_str()).collect();
        assert_eq!(
            kept,
            [
                "in use: MutatingAdmissionPolicy nvcf-worker-identity gives it to new pods in namespace k",
                "in use: PodTemplate/tpl's pod template runs as it",
            ]
        );
        // Policies that cannot be read: every nvcf-worker kept, saying why.
        owners.uses.admission = Admission::Unreadable("cannot list them".into());
        let p = plan_of(trio("u", "nvcf-worker", 3600), &owners);
        assert!(p.delete.is_empty());
        assert!(
            p.keep[0].reason.ends_with("cannot list them"),
            "{:?}",
            p.keep
        );
    }

    #[test]
    fn partial_leftovers_are_taken_with_what_is_left() {
        let objs = vec![object(Member::ServiceAccount, "n", "nvcf-worker-p", 3600)];
        let p = plan_of(objs, &Owners::default());
        assert_eq!(p.delete[0].state, State::Partial);
        assert_eq!(p.delete[0].deletions.len(), 1);
        assert_eq!(p.delete[0].deletions[0].member, Member::ServiceAccount);
    }

    #[test]
    fn durations_parse_like_kubectl() {
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert!(parse_duration("10x").is_err());
        assert!(parse_duration("m").is_err());
        assert!(parse_duration("").is_err());
    }
}
