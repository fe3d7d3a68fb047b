//! `--control-plane ID` on the live commands: which plane, its agent (named by
//! the flags, else read from the cluster where the agent's own ServiceAccount says
//! it), and keeping to the namespaces the plane owns. The rules are `controlplane`'s;
//! a plane that cannot be told is an error, never a guess: a cleanup asked about
//! plane A must never touch plane B's namespaces.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use super::client::{self, Kube, Scope};
use super::inventory::Identity;
use super::namespaces::{self, AgentNamespaces};
use crate::controlplane::{self, PlaneArgs, OWNER_LABEL};
use crate::error::{Error, Result};
use crate::identity::AGENT_ACCOUNT;

/// The plane a command keeps to, and its agent.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Selected {
    pub id: String,
    /// `system:serviceaccount:<system namespace>:nvca`.
    pub agent: String,
    /// `flags` or `cluster`: where the agent was read.
    pub agent_from: &'static str,
}

/// The selected plane, or None without `--control-plane`. `--agent` and
/// `--agent-namespace` name the plane's agent, so they need the plane.
pub async fn resolve(kube: &Kube, args: &PlaneArgs) -> Result<Option<Selected>> {
    let mut named = args.named_agents().map_err(Error::Usage)?;
    let Some(id) = args.control_plane.clone() else {
        if !named.is_empty() {
            return Err(Error::Usage(format!(
                "--agent and --agent-namespace name a control plane's agent: name the plane too, --control-plane ID ({} for the legacy plane)",
                controlplane::DEFAULT_OWNER
            )));
        }
        return Ok(None);
    };
    if named.len() > 1 {
        return Err(Error::Usage(format!(
            "control plane {id} has one agent: give --agent or --agent-namespace once"
        )));
    }
    if let Some(agent) = named.pop() {
        return Ok(Some(Selected {
            id,
            agent,
            agent_from: "flags",
        }));
    }
    let agent = read_agent(kube, &id).await?;
    Ok(Some(Selected {
        id,
        agent,
        agent_from: "cluster",
    }))
}

/// The plane's agent as its ServiceAccount `nvca` says: the one labelled with
/// the plane as owner (for `default`, also an unlabelled one). One metadata-only
/// list across namespaces, by name.
async fn read_agent(kube: &Kube, id: &str) -> Result<String> {
    let field = format!("metadata.name={AGENT_ACCOUNT}");
    let listed = kube
        .list_fold(
            &client::SERVICE_ACCOUNTS,
            &Scope::AllNamespaces,
            true,
            Some(&field),
            |found: &mut Vec<String>, item: Value| {
                let ns = item.pointer("/metadata/namespace").and_then(Value::as_str);
                if let Some(ns) = ns {
                    if controlplane::is_planes_agent(item.pointer("/metadata/labels"), id) {
                        found.push(ns.to_string());
                    }
                }
            },
        )
        .await;
    let hint = "name its system namespace with --agent-namespace NS";
    let found = match listed {
        Ok(found) => found,
        Err(Error::Forbidden { message, .. }) => {
            return Err(Error::Live(format!(
                "cannot list serviceaccounts across namespaces to find control plane {id}'s agent (ServiceAccount {AGENT_ACCOUNT} labelled {OWNER_LABEL}={id}) (forbidden: {message}); grant it, or {hint}"
            )))
        }
        Err(e) => return Err(e),
    };
    match found.as_slice() {
        [ns] => Ok(controlplane::agent_user(ns)),
        [] => Err(Error::Live(format!(
            "control plane {id}: no ServiceAccount {AGENT_ACCOUNT} labelled {OWNER_LABEL}={id} in any namespace{} (is the ID right?); {hint}",
            if id == controlplane::DEFAULT_OWNER { " nor unlabelled" } else { "" }
        ))),
        many => Err(Error::Live(format!(
            "control plane {id}: ServiceAccounts {AGENT_ACCOUNT} of the plane in several namespaces ({}): {hint}",
            many.join(", ")
        ))),
    }
}

/// Reads the namespaces of `needed`, which must be readable: a plane's scope is
/// never guessed.
pub async fn read_for_plane(
    kube: &Kube,
    scope: &Scope,
    needed: &BTreeSet<String>,
    plane: &str,
) -> Result<AgentNamespaces> {
    let read = namespaces::read(kube, scope, needed).await?;
    if let AgentNamespaces::Unreadable(why) = &read {
        return Err(Error::Live(format!(
            "--control-plane {plane}: the namespaces' owners cannot be told: {why}"
        )));
    }
    Ok(read)
}

/// Whether `ns` is one of `plane`'s namespaces, by a read of its labels.
pub fn owns(read: &AgentNamespaces, ns: &str, plane: &str) -> bool {
    read.planes(ns)
        .and_then(|p| p.plane)
        .is_some_and(|p| p == plane)
}

/// Keeps the identities in `plane`'s namespaces: the others are neither listed,
/// audited nor deleted. Returns the namespaces read (every identity's).
pub async fn keep_plane(
    kube: &Kube,
    scope: &Scope,
    identities: &mut Vec<Identity>,
    plane: &str,
) -> Result<AgentNamespaces> {
    let needed: BTreeSet<String> = identities.iter().map(|i| i.namespace.clone()).collect();
    let read = read_for_plane(kube, scope, &needed, plane).await?;
    identities.retain(|i| owns(&read, &i.namespace, plane));
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::namespaces::Planes;
    use std::collections::HashMap;

    #[test]
    fn a_namespace_belongs_to_its_plane_only() {
        let read = AgentNamespaces::Read(HashMap::from([
            (
                "a".to_string(),
                Planes {
                    plane: Some("plane-a".into()),
                    provisioned_by: None,
                },
            ),
            ("shared".to_string(), Planes::default()),
        ]));
        assert!(owns(&read, "a", "plane-a"));
        assert!(!owns(&read, "a", "plane-b"));
        assert!(!owns(&read, "shared", "plane-a"));
        assert!(!owns(&read, "gone", "plane-a"));
        assert!(!owns(
            &AgentNamespaces::Unreadable("x".into()),
            "a",
            "plane-a"
        ));
    }
}
