//! The `events.k8s.io/v1` Events cleanup records, one per identity it set out to
//! delete, on that identity's ServiceAccount, so what a CronJob run did outlives
//! its pod's log and shows in `kubectl get events` as a controller's would.
//! Identities the plan keeps get none: they are in use or young, and a run every
//! 30 minutes would post an Event for each of them every time (thousands an
//! hour, each stored in etcd) to say nothing changed.
//!
//! Recording is best effort: a refused or failed Event (403 without the grant, or
//! in a namespace being deleted; 404 once the namespace is gone) is counted and
//! reported once, never a reason to stop deleting.

use serde_json::{json, Value};

use super::cleanup::PlannedIdentity;
use super::client::{res, Kube, Resource};
use super::executor::Outcome;
use super::inventory::Member;

pub const EVENTS: Resource = res("events.k8s.io/v1", "Event", "events", true);

/// `reportingController`: this tool, as a qualified name (the API requires one).
pub const REPORTING_CONTROLLER: &str = "nvcf.nvidia.com/kubectl-nvcf-worker";

/// The API's limits: `reportingInstance` 128 characters, `note` 1 kB, a name 253.
const INSTANCE_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;
const NAME_LIMIT: usize = 253;

/// `reportingInstance`: the pod's name in a CronJob (`HOSTNAME`), else the host's.
pub fn instance() -> String {
    let name = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into());
    format!("kubectl-nvcf-worker@{name}")
        .chars()
        .take(INSTANCE_LIMIT)
        .collect()
}

/// The first `limit` bytes of `text`, cut at a character boundary.
fn clip(text: &str, limit: usize) -> &str {
    let mut end = text.len().min(limit);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `<name>.<hex of the time in ns>`, as client-go names Events; the name is cut
/// so the whole stays a valid object name.
fn event_name(object: &str, nanos: u128) -> String {
    let suffix = format!(".{nanos:x}");
    let keep = clip(object, NAME_LIMIT - suffix.len()).trim_end_matches(['.', '-']);
    format!("{keep}{suffix}")
}

/// The Event for how `target` ended (`time`: now, as MicroTime wants it, and its
/// nanoseconds for the name). Regarding the ServiceAccount as listed, or, for a
/// partial identity without one, the last member it had.
pub fn event(
    target: &PlannedIdentity,
    outcome: &Outcome,
    instance: &str,
    time: k8s_openapi::jiff::Timestamp,
) -> Value {
    let regarding = target
        .deletions
        .iter()
        .find(|d| d.member == Member::ServiceAccount)
        .or(target.deletions.last());
    let (kind, api_version, uid, resource_version) = match regarding {
        Some(d) => (
            d.member.kind(),
            d.member.resource().api_version,
            d.uid.as_str(),
            d.resource_version.as_str(),
        ),
        None => ("ServiceAccount", "v1", "", ""),
    };
    let reason = outcome.reason();
    let note = match outcome {
        Outcome::Deleted { objects } => format!(
            "cleanup deleted this {} identity ({objects} objects): {}",
            target.state.as_str(),
            target.reason
        ),
        Outcome::Skipped {
            reason, objects, ..
        } => match objects {
            0 => format!("cleanup did not delete it: {reason}"),
            n => format!("cleanup stopped after {n} of its objects: {reason}"),
        },
        Outcome::Failed { error, objects, .. } => {
            format!("cleanup failed to delete it ({objects} objects deleted): {error}")
        }
    };
    json!({
        "apiVersion": EVENTS.api_version,
        "kind": EVENTS.kind,
        "metadata": {
            "name": event_name(&target.name, time.as_nanosecond().unsigned_abs()),
            "namespace": target.namespace,
        },
        "eventTime": format!("{time:.6}"),
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": instance,
        "action": reason.action(),
        "reason": reason.as_str(),
        "type": reason.event_type(),
        "note": clip(&note, NOTE_LIMIT),
        "regarding": {
            "apiVersion": api_version,
            "kind": kind,
            "name": target.name,
            "namespace": target.namespace,
            "uid": uid,
            "resourceVersion": resource_version,
        },
    })
}

/// Posts one Event; what went wrong, as one line without the Event's body.
pub async fn record(kube: &Kube, event: Value) -> std::result::Result<(), String> {
    let namespace = event["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    kube.create(&EVENTS, &namespace, &event)
        .await
        .map_err(|e| e.to_string())
}

/// Events posted and refused in one run, with the first refusal's reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub recorded: usize,
    pub failed: usize,
    pub first_error: Option<String>,
}

impl Tally {
    pub fn add(&mut self, posted: std::result::Result<(), String>) {
        match posted {
            Ok(()) => self.recorded += 1,
            Err(e) => {
                self.failed += 1;
                self.first_error.get_or_insert(e);
            }
        }
    }

    /// The one warning a run with refused Events prints, if it had any.
    pub fn warning(&self) -> Option<String> {
        let first = self.first_error.as_ref()?;
        Some(format!(
            "warning: {} of {} Events not recorded (cleanup went on without them); the first: {first}",
            self.failed,
            self.failed + self.recorded
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::cleanup::Deletion;
    use super::super::executor::Reason;
    use super::super::inventory::State;
    use super::*;

    fn target(members: &[Member]) -> PlannedIdentity {
        PlannedIdentity {
            namespace: "ns".into(),
            name: "nvcf-worker-p".into(),
            state: State::Orphaned,
            deletions: members
                .iter()
                .map(|&member| Deletion {
                    member,
                    uid: format!("uid-{}", member.kind()),
                    resource_version: "42".into(),
                })
                .collect(),
            reason: "nothing runs as it and its owner is gone".into(),
        }
    }

    fn at() -> k8s_openapi::jiff::Timestamp {
        "2026-12-07T22:40:01.5Z".parse().unwrap()
    }

    #[test]
    fn a_deletion_is_a_normal_event_on_the_service_account_as_listed() {
        let e = event(
            &target(&Member::DELETE_ORDER),
            &Outcome::Deleted { objects: 3 },
            "i",
            at(),
        );
        assert_eq!(e["eventTime"], "2026-12-07T22:40:01.500000Z");
        assert_eq!(
            e["regarding"],
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "name": "nvcf-worker-p",
                "namespace": "ns", "uid": "uid-ServiceAccount", "resourceVersion": "42"})
        );
        assert_eq!(
            (&e["action"], &e["reason"], &e["type"]),
            (&json!("Delete"), &json!("Deleted"), &json!("Normal"))
        );
        assert_eq!(e["metadata"]["name"], "nvcf-worker-p.18ef19da3f51af00");
        assert!(e["note"].as_str().unwrap().contains("its owner is gone"));
    }

    #[test]
    fn a_partial_identity_s_event_names_the_member_it_had() {
        let e = event(
            &target(&[Member::RoleBinding, Member::Role]),
            &Outcome::Skipped {
                why: Reason::ObjectReplaced,
                reason: "x".repeat(5000) + "é",
                objects: 1,
            },
            "i",
            at(),
        );
        assert_eq!(e["regarding"]["kind"], "Role");
        assert_eq!(e["regarding"]["apiVersion"], "rbac.authorization.k8s.io/v1");
        assert_eq!(
            (&e["action"], &e["type"]),
            (&json!("Skip"), &json!("Normal"))
        );
        assert_eq!(e["note"].as_str().unwrap().len(), NOTE_LIMIT);
    }

    #[test]
    fn names_and_instances_stay_within_the_api_s_limits() {
        let long = "a".repeat(300);
        let name = event_name(&long, u128::MAX);
        assert_eq!(name.len(), NAME_LIMIT);
        assert!(name.ends_with(&format!(".{:x}", u128::MAX)));
        assert!(instance().len() <= INSTANCE_LIMIT);
        assert!(instance().starts_with("kubectl-nvcf-worker@"));
    }

    #[test]
    fn refusals_are_counted_and_warned_of_once_with_the_first() {
        let mut t = Tally::default();
        assert_eq!(t.warning(), None);
        t.add(Ok(()));
        t.add(Err("forbidden".into()));
        t.add(Err("not found".into()));
        let w = t.warning().unwrap();
        assert!(w.starts_with("warning: 2 of 3 Events not recorded"), "{w}");
        assert!(w.ends_with("the first: forbidden"), "{w}");
    }
}
