//! Which namespaces an agent provisions itself, and which control plane owns each:
//! a MiniService's namespace, which the agent labels `WORKLOAD_INSTANCE_TYPE_LABEL:
//! WORKLOAD_INSTANCE_TYPE_MINISERVICE` (and, with several planes, its owner), and in
//! which its reconciler owns the worker ServiceAccount, Role and RoleBinding. The
//! rules are `controlplane`'s. An identity declared in a manifest there conflicts
//! with the agent; `list` and `audit` flag it. Namespaces are read only when some
//! identity needs it, and a namespace that cannot be read is said to be unknown,
//! never guessed either way.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::client::{self, Kube, Scope};
use crate::controlplane;
use crate::error::{Error, Result};
use crate::identity::WORKLOAD_INSTANCE_TYPE_LABEL;

/// Whether a namespace with these labels is one an agent provisions itself:
/// the label with exactly the MiniService value (the agent's other workload type,
/// `pod_spec`, and any other value are not), owned by a plane.
pub fn labels_say_agent(labels: Option<&Value>) -> bool {
    controlplane::provisioning_plane(labels).is_some()
}

/// What a namespace's labels say of planes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Planes {
    /// The plane that owns it (`controlplane::namespace_plane`).
    pub plane: Option<String>,
    /// The plane whose agent provisions it itself (`controlplane::provisioning_plane`).
    pub provisioned_by: Option<String>,
}

impl Planes {
    pub fn of(labels: Option<&Value>) -> Planes {
        Planes {
            plane: controlplane::namespace_plane(labels),
            provisioned_by: controlplane::provisioning_plane(labels),
        }
    }
}

/// What is known of the namespaces the identities live in.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum AgentNamespaces {
    /// Nothing needed them: no manifest-declared identity in scope.
    #[default]
    NotRead,
    /// Namespace -> its planes. A namespace that is not in the map does not
    /// exist (gone since its identity was listed): no plane's.
    Read(HashMap<String, Planes>),
    /// The namespaces could not be read: why, and what would let them be.
    Unreadable(String),
}

impl AgentNamespaces {
    /// Some(true) when the agent provisions `ns`, Some(false) when it does not,
    /// None when that cannot be told.
    pub fn provisioned(&self, ns: &str) -> Option<bool> {
        match self {
            AgentNamespaces::Read(map) => {
                Some(map.get(ns).is_some_and(|p| p.provisioned_by.is_some()))
            }
            AgentNamespaces::NotRead | AgentNamespaces::Unreadable(_) => None,
        }
    }

    /// The namespace's planes; None when that cannot be told.
    pub fn planes(&self, ns: &str) -> Option<Planes> {
        match self {
            AgentNamespaces::Read(map) => Some(map.get(ns).cloned().unwrap_or_default()),
            AgentNamespaces::NotRead | AgentNamespaces::Unreadable(_) => None,
        }
    }

    /// Why it cannot be told, when it cannot.
    pub fn why_unknown(&self) -> Option<&str> {
        match self {
            AgentNamespaces::Unreadable(why) => Some(why),
            AgentNamespaces::NotRead => Some("the namespaces were not read"),
            AgentNamespaces::Read(_) => None,
        }
    }
}

fn unreadable(verb: &str, what: &str, message: &str) -> AgentNamespaces {
    AgentNamespaces::Unreadable(format!(
        "cannot {verb} {what} to read the labels {WORKLOAD_INSTANCE_TYPE_LABEL} and {} (forbidden: {message}); grant {verb} on namespaces to tell whether the agent provisions them",
        controlplane::OWNER_LABEL
    ))
}

/// Reads the labels of the namespaces in `needed`: one GET in a namespace scope
/// (a RoleBinding in the namespace can grant it), one metadata-only list across
/// all. A 403 is not an error: the answer is then unknown, and says why; any other
/// failure fails the command as every other list does.
pub async fn read(
    kube: &Kube,
    scope: &Scope,
    needed: &BTreeSet<String>,
) -> Result<AgentNamespaces> {
    if needed.is_empty() {
        return Ok(AgentNamespaces::NotRead);
    }
    match scope {
        Scope::Namespace(_) => {
            let mut map = HashMap::new();
            for ns in needed {
                match kube.get(&client::NAMESPACES, ns, ns).await {
                    Ok(Some(obj)) => {
                        map.insert(ns.clone(), Planes::of(obj.pointer("/metadata/labels")));
                    }
                    Ok(None) => {}
                    Err(Error::Forbidden { message, .. }) => {
                        return Ok(unreadable("get", &format!("namespace {ns:?}"), &message))
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(AgentNamespaces::Read(map))
        }
        Scope::AllNamespaces => {
            let listed = kube
                .list_fold(
                    &client::NAMESPACES,
                    &Scope::AllNamespaces,
                    true,
                    None,
                    |map: &mut HashMap<String, Planes>, item| {
                        if let Some(name) = item.pointer("/metadata/name").and_then(Value::as_str) {
                            map.insert(
                                name.to_string(),
                                Planes::of(item.pointer("/metadata/labels")),
                            );
                        }
                    },
                )
                .await;
            match listed {
                Ok(map) => Ok(AgentNamespaces::Read(map)),
                Err(Error::Forbidden { message, .. }) => {
                    Ok(unreadable("list", "namespaces", &message))
                }
                Err(e) => Err(e),
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::identity::WORKLOAD_INSTANCE_TYPE_MINISERVICE;
    use serde_json::json;

    /// A read where `ns` is (or is not) provisioned by the default plane.
    pub fn read_of(entries: &[(&str, bool)]) -> AgentNamespaces {
        AgentNamespaces::Read(
            entries
                .iter()
                .map(|(ns, agent)| {
                    let planes = Planes {
                        plane: Some(controlplane::DEFAULT_OWNER.into()),
                        provisioned_by: agent.then(|| controlplane::DEFAULT_OWNER.into()),
                    };
                    (ns.to_string(), planes)
                })
                .collect(),
        )
    }

    #[test]
    fn only_the_miniservice_value_is_the_agents() {
        assert!(labels_say_agent(Some(
            &json!({WORKLOAD_INSTANCE_TYPE_LABEL: WORKLOAD_INSTANCE_TYPE_MINISERVICE})
        )));
        for other in [
            json!({WORKLOAD_INSTANCE_TYPE_LABEL: "pod_spec"}),
            json!({WORKLOAD_INSTANCE_TYPE_LABEL: "MiniService"}),
            json!({WORKLOAD_INSTANCE_TYPE_LABEL: ""}),
            json!({crate::identity::MINISERVICE_LABEL: "m"}),
            json!({}),
        ] {
            assert!(!labels_say_agent(Some(&other)), "{other}");
        }
        assert!(!labels_say_agent(None));
    }

    #[test]
    fn unknown_is_never_an_answer_either_way() {
        let read = read_of(&[("a", true)]);
        assert_eq!(read.provisioned("a"), Some(true));
        assert_eq!(read.provisioned("gone"), Some(false));
        assert_eq!(read.why_unknown(), None);
        let denied = AgentNamespaces::Unreadable("no".into());
        assert_eq!(denied.provisioned("a"), None);
        assert_eq!(denied.why_unknown(), Some("no"));
        assert_eq!(AgentNamespaces::NotRead.provisioned("a"), None);
    }
}
