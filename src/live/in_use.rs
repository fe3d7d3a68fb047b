//! The one model of "in use": what keeps a worker identity from `cleanup`, read
//! by cleanup's plan, its re-check before each batch, `list` (STATE) and, for the
//! kinds it reads, `audit`. An identity `NS/NAME` is in use while
//!
//! - a pod in `NS` runs as `NAME` (any phase; Succeeded and Failed count as gone
//!   only with `--include-terminated`);
//! - a pod-bearing object in `NS` (every kind of `workload::POD_BEARING`,
//!   PodTemplates included) names `NAME` in its pod template, whatever its
//!   replicas or suspension: its next pod runs as it;
//! - `NAME` is the per-namespace `nvcf-worker` and a MutatingAdmissionPolicy of
//!   this tool (`policy --mutating`: labelled as ours, and bound) would give it to
//!   a pod created in `NS` now: its companion binding's namespaceSelector (the
//!   selection the policy's CEL holds) selects `NS`'s labels. A policy whose
//!   selection cannot be read selects every namespace. When the policies or the
//!   namespaces cannot be read, every `nvcf-worker` is kept and says why.
//!
//! The admission part is read only when an `nvcf-worker` identity is in question:
//! a per-pod `nvcf-worker-*` is never given at admission.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use super::client::{self, labels, text, Kube, Resource, Scope};
use crate::error::{Error, Result};
use crate::identity::{MANAGED_BY, MANAGED_BY_LABEL, WORKER_NAME};
use crate::selector::Selector;

/// Who uses an identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum User {
    /// A pod running as it, with its phase.
    Pod { name: String, phase: String },
    /// A pod-bearing object whose pod template names it.
    Template { kind: String, name: String },
    /// The tool's mutating policy would give it to a new pod (or that cannot be told).
    Admission(String),
}

impl User {
    /// Short, as the executor's skips name it: `pod/late`, `deployment/web`.
    pub fn short(&self) -> String {
        match self {
            User::Pod { name, .. } => format!("pod/{name}"),
            User::Template { kind, name } => format!("{}/{name}", kind.to_ascii_lowercase()),
            User::Admission(why) => why.clone(),
        }
    }

    fn long(&self) -> String {
        match self {
            User::Pod { name, phase } => format!("pod {name} ({phase})"),
            User::Template { kind, name } => format!("{kind}/{name}'s pod template"),
            User::Admission(why) => why.clone(),
        }
    }
}

/// What the tool's mutating admission policies give a pod created now.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Admission {
    /// Not read: nothing in question could be given at admission. An
    /// `nvcf-worker` asked about anyway is kept (never a guess that none does).
    #[default]
    NotRead,
    /// The tool's bound mutating policies, and the labels of the namespaces read
    /// (a namespace not in the map does not exist: no pod is created there).
    Read {
        givers: Vec<Giver>,
        namespaces: HashMap<String, BTreeMap<String, String>>,
    },
    /// They cannot be read: why.
    Unreadable(String),
}

/// One bound MutatingAdmissionPolicy of this tool.
#[derive(Clone, Debug, PartialEq)]
pub struct Giver {
    pub policy: String,
    /// The namespaces it selects; None when its selection cannot be read (its
    /// companion binding is missing): every namespace, then.
    pub namespaces: Option<Selector>,
}

impl Admission {
    /// No policy of the tool exists (what a cluster without any reads as).
    pub fn none() -> Admission {
        Admission::Read {
            givers: Vec::new(),
            namespaces: HashMap::new(),
        }
    }

    /// Why a pod created in `ns` now would be given `account`, if it would or
    /// that cannot be ruled out.
    pub fn gives(&self, ns: &str, account: &str) -> Option<String> {
        if account != WORKER_NAME {
            return None;
        }
        match self {
            Admission::NotRead => {
                Some("kept: the tool's mutating admission policies were not read".into())
            }
            Admission::Unreadable(why) => Some(format!(
                "kept: a mutating admission policy of this tool may give it to a new pod, and {why}"
            )),
            Admission::Read { givers, namespaces } => givers.iter().find_map(|g| {
                match &g.namespaces {
                    None => Some(format!(
                        "in use: MutatingAdmissionPolicy {} gives it to new pods (its namespace selection, binding {}{}, cannot be read: every namespace counts)",
                        g.policy, g.policy, crate::mutating::CHECK_SUFFIX
                    )),
                    Some(sel) => {
                        let labels = namespaces.get(ns)?;
                        sel.matches(labels).then(|| format!(
                            "in use: MutatingAdmissionPolicy {} gives it to new pods in namespace {ns}",
                            g.policy
                        ))
                    }
                }
            }),
        }
    }
}

/// Who uses which identities: pods, pod templates and the admission policies.
#[derive(Clone, Debug, Default)]
pub struct Uses {
    /// (namespace, account) → the pods and templates naming it, in the order found.
    users: HashMap<(String, String), Vec<User>>,
    pub admission: Admission,
}

impl Uses {
    /// No users yet; what the admission policies give, as read.
    pub fn with(admission: Admission) -> Uses {
        Uses {
            users: HashMap::new(),
            admission,
        }
    }

    pub fn add(&mut self, ns: &str, account: &str, user: User) {
        self.users
            .entry((ns.to_string(), account.to_string()))
            .or_default()
            .push(user);
    }

    pub fn merge(&mut self, other: Uses) {
        for (k, v) in other.users {
            self.users.entry(k).or_default().extend(v);
        }
        if other.admission != Admission::NotRead {
            self.admission = other.admission;
        }
    }

    /// Everything that uses `account` in `ns` (terminated pods left out when they
    /// count as gone).
    pub fn users(&self, ns: &str, account: &str, include_terminated: bool) -> Vec<User> {
        let key = (ns.to_string(), account.to_string());
        let mut out: Vec<User> = self
            .users
            .get(&key)
            .into_iter()
            .flatten()
            .filter(|u| match u {
                User::Pod { phase, .. } => {
                    !(include_terminated && super::inventory::is_terminated(phase))
                }
                _ => true,
            })
            .cloned()
            .collect();
        out.extend(self.admission.gives(ns, account).map(User::Admission));
        out
    }

    /// Why the identity is in use, or None: the plan's and `list`'s reason.
    pub fn why(&self, ns: &str, account: &str, include_terminated: bool) -> Option<String> {
        let users = self.users(ns, account, include_terminated);
        let (given, named): (Vec<&User>, Vec<&User>) =
            users.iter().partition(|u| matches!(u, User::Admission(_)));
        if !named.is_empty() {
            let names: Vec<String> = named.iter().map(|u| u.long()).collect();
            return Some(format!("in use: {} runs as it", names.join(", ")));
        }
        given.first().map(|u| u.long())
    }
}

/// The account a pod-bearing object's pod template runs as (`serviceAccountName`,
/// else the deprecated `serviceAccount`), if it names one.
pub fn template_account(item: &Value) -> Option<&str> {
    let path = crate::workload::pod_spec_path(text(item, "/apiVersion"), text(item, "/kind"))?;
    let spec = path.iter().try_fold(item, |v, k| v.get(k))?;
    spec.get("serviceAccountName")
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty())
        .or_else(|| spec.get("serviceAccount").and_then(Value::as_str))
        .filter(|a| !a.is_empty())
}

/// The namespaces among `names` (namespace, identity name) whose identity an
/// admission policy could give: those holding an `nvcf-worker`.
pub fn admission_namespaces<'a>(
    names: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> BTreeSet<String> {
    names
        .into_iter()
        .filter(|(_, name)| *name == WORKER_NAME)
        .map(|(ns, _)| ns.to_string())
        .collect()
}

/// The MutatingAdmissionPolicy API's versions, newest first (`v1` from 1.36,
/// `v1beta1` on 1.34 and 1.35): their policy and binding resources.
pub const MUTATING_VERSIONS: [(Resource, Resource); 2] = [
    (
        client::res(
            "admissionregistration.k8s.io/v1",
            "MutatingAdmissionPolicy",
            "mutatingadmissionpolicies",
            false,
        ),
        client::res(
            "admissionregistration.k8s.io/v1",
            "MutatingAdmissionPolicyBinding",
            "mutatingadmissionpolicybindings",
            false,
        ),
    ),
    (
        client::res(
            "admissionregistration.k8s.io/v1beta1",
            "MutatingAdmissionPolicy",
            "mutatingadmissionpolicies",
            false,
        ),
        client::res(
            "admissionregistration.k8s.io/v1beta1",
            "MutatingAdmissionPolicyBinding",
            "mutatingadmissionpolicybindings",
            false,
        ),
    ),
];

pub const VALIDATING_BINDINGS: Resource = client::res(
    "admissionregistration.k8s.io/v1",
    "ValidatingAdmissionPolicyBinding",
    "validatingadmissionpolicybindings",
    false,
);

fn ours(item: &Value) -> bool {
    item.pointer("/metadata/labels")
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .and_then(Value::as_str)
        == Some(MANAGED_BY)
}

/// The tool's bound mutating policies and each one's namespace selection, from
/// what was listed: `policies` and `bindings` of one API version, and the
/// ValidatingAdmissionPolicyBindings (the companions hold the selection).
pub fn givers(policies: &[Value], bindings: &[Value], validating: &[Value]) -> Vec<Giver> {
    let bound: BTreeSet<&str> = bindings
        .iter()
        .map(|b| text(b, "/spec/policyName"))
        .collect();
    policies
        .iter()
        .filter(|p| ours(p) && bound.contains(text(p, "/metadata/name")))
        .map(|p| {
            let policy = text(p, "/metadata/name").to_string();
            let companion = format!("{policy}{}", crate::mutating::CHECK_SUFFIX);
            let namespaces = validating
                .iter()
                .find(|b| {
                    ours(b)
                        && text(b, "/metadata/name") == companion
                        && text(b, "/spec/policyName") == companion
                })
                .and_then(|b| {
                    match b.pointer("/spec/matchResources/namespaceSelector") {
                        // No selector in matchResources selects every namespace.
                        None => Some(Selector::default()),
                        Some(sel) => Selector::from_json(sel).ok(),
                    }
                });
            Giver { policy, namespaces }
        })
        .collect()
}

/// Reads the tool's mutating policies (the first served version), and when one
/// is bound the labels of `needed` (one GET each in a namespace scope, one
/// metadata-only list with `-A`). A 403 makes it `Unreadable`, saying which
/// permission; other failures fail the command as every list does.
pub async fn read_admission(
    kube: &Kube,
    all_namespaces: bool,
    needed: &BTreeSet<String>,
) -> Result<Admission> {
    if needed.is_empty() {
        return Ok(Admission::NotRead);
    }
    match read_inner(kube, all_namespaces, needed).await {
        Err(Error::Forbidden {
            verb,
            resource,
            message,
            ..
        }) => Ok(Admission::Unreadable(format!(
            "cannot {verb} {resource} to tell (forbidden: {message}); grant it to let cleanup decide"
        ))),
        other => other,
    }
}

async fn read_inner(
    kube: &Kube,
    all_namespaces: bool,
    needed: &BTreeSet<String>,
) -> Result<Admission> {
    let cluster = Scope::AllNamespaces;
    let mut givers_found = Vec::new();
    for (policies, bindings) in &MUTATING_VERSIONS {
        let Some(policies) = kube.list_if_served(policies, &cluster).await? else {
            continue;
        };
        if !policies.iter().any(ours) {
            break;
        }
        let bindings = kube.list(bindings, &cluster, false, None).await?;
        let validating = kube
            .list(&VALIDATING_BINDINGS, &cluster, false, None)
            .await?;
        givers_found = givers(&policies, &bindings, &validating);
        break;
    }
    if givers_found.is_empty() {
        return Ok(Admission::none());
    }
    let mut namespaces = HashMap::new();
    if all_namespaces {
        namespaces = kube
            .list_fold(
                &client::NAMESPACES,
                &cluster,
                true,
                None,
                |map: &mut HashMap<String, BTreeMap<String, String>>, item| {
                    let name = text(&item, "/metadata/name").to_string();
                    map.insert(name, labels(&item));
                },
            )
            .await?;
    } else {
        for ns in needed {
            if let Some(item) = kube.get(&client::NAMESPACES, ns, ns).await? {
                namespaces.insert(ns.clone(), labels(&item));
            }
        }
    }
    Ok(Admission::Read {
        givers: givers_found,
        namespaces,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutating;
    use serde_json::json;

    fn admission_of(opts: &mutating::Options, ns_labels: Value) -> Admission {
        let [policy, binding, check, check_binding] = mutating::objects(opts);
        let _ = check;
        let givers = givers(&[policy], &[binding], &[check_binding]);
        let labels = labels(&json!({"metadata": {"labels": ns_labels}}));
        Admission::Read {
            givers,
            namespaces: HashMap::from([("team".to_string(), labels)]),
        }
    }

    #[test]
    fn the_policy_s_own_objects_say_which_namespaces_it_gives_nvcf_worker_in() {
        let opts = mutating::Options::new("c1");
        let selected = admission_of(&opts, json!({crate::identity::WORKER_LABEL: "true"}));
        assert_eq!(
            selected.gives("team", WORKER_NAME).as_deref(),
            Some("in use: MutatingAdmissionPolicy nvcf-worker-identity gives it to new pods in namespace team")
        );
        // Never a per-pod or declared per-workload identity.
        assert_eq!(selected.gives("team", "nvcf-worker-web"), None);
        // A namespace without the label, or one that does not exist: nothing given.
        let unlabelled = admission_of(&opts, json!({"other": "x"}));
        assert_eq!(unlabelled.gives("team", WORKER_NAME), None);
        assert_eq!(selected.gives("gone", WORKER_NAME), None);
        // Another selector, by `--namespace-selector`.
        let mut other = mutating::Options::new("c1");
        other.namespaces = Selector::parse("tier in (gpu),!frozen").unwrap();
        other.name = "custom".into();
        assert!(admission_of(&other, json!({"tier": "gpu"}))
            .gives("team", WORKER_NAME)
            .unwrap()
            .contains("MutatingAdmissionPolicy custom "));
        assert_eq!(
            admission_of(&other, json!({"tier": "gpu", "frozen": ""})).gives("team", WORKER_NAME),
            None
        );
    }

    #[test]
    fn unbound_foreign_or_unreadable_policies_are_told_apart() {
        let opts = mutating::Options::new("c1");
        let [policy, binding, _, check_binding] = mutating::objects(&opts);
        // Not bound: gives nothing.
        assert!(givers(&[policy.clone()], &[], &[check_binding.clone()]).is_empty());
        // Not ours (no managed-by label): not read as ours.
        let mut foreign = policy.clone();
        foreign["metadata"]["labels"] = json!({});
        assert!(givers(&[foreign], &[binding.clone()], &[check_binding]).is_empty());
        // Bound, but its companion is gone: every namespace counts.
        let g = givers(&[policy], &[binding], &[]);
        assert_eq!(g[0].namespaces, None);
        let any = Admission::Read {
            givers: g,
            namespaces: HashMap::new(),
        };
        assert!(any.gives("anywhere", WORKER_NAME).is_some());
        // Unread or unreadable: nvcf-worker kept, saying why.
        assert!(Admission::NotRead.gives("n", WORKER_NAME).is_some());
        let denied = Admission::Unreadable("cannot list x".into());
        assert!(denied
            .gives("n", WORKER_NAME)
            .unwrap()
            .ends_with("cannot list x"));
        assert_eq!(Admission::none().gives("n", WORKER_NAME), None);
    }

    #[test]
    fn the_api_versions_are_the_ones_policy_mutating_writes() {
        let written = [mutating::ApiVersion::V1, mutating::ApiVersion::V1beta1];
        for ((policy, binding), version) in MUTATING_VERSIONS.iter().zip(written) {
            assert_eq!(policy.api_version, version.group_version());
            assert_eq!(binding.api_version, version.group_version());
            assert_eq!(policy.group(), "admissionregistration.k8s.io");
        }
        let [_, _, _, check_binding] = mutating::objects(&mutating::Options::new("c"));
        assert_eq!(check_binding["apiVersion"], VALIDATING_BINDINGS.api_version);
        assert_eq!(check_binding["kind"], VALIDATING_BINDINGS.kind);
    }

    #[test]
    fn users_are_pods_then_templates_then_admission() {
        let mut uses = Uses::with(Admission::none());
        uses.add(
            "n",
            "nvcf-worker-p",
            User::Pod {
                name: "p".into(),
                phase: "Failed".into(),
            },
        );
        uses.add(
            "n",
            "nvcf-worker-p",
            User::Template {
                kind: "PodTemplate".into(),
                name: "t".into(),
            },
        );
        assert_eq!(
            uses.why("n", "nvcf-worker-p", false).as_deref(),
            Some("in use: pod p (Failed), PodTemplate/t's pod template runs as it")
        );
        assert_eq!(
            uses.why("n", "nvcf-worker-p", true).as_deref(),
            Some("in use: PodTemplate/t's pod template runs as it")
        );
        assert_eq!(uses.why("m", "nvcf-worker-p", false), None);
        assert_eq!(
            uses.users("n", "nvcf-worker-p", false)[1].short(),
            "podtemplate/t"
        );
    }
}
