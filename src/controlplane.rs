//! Several NVCF control planes on one cluster: the one place that knows the
//! agent's plane contract (its `controlplane` package, `control_plane.go` @
//! de2449ad, and the operator's webhooks and adoption @ 5b4c1184), and the one
//! flag set every face takes (`--control-plane`, `--agent-namespace`, `--agent`).
//!
//! A plane is named by an ID; the legacy unnamed plane is `default`. An object's
//! plane is its `nvcf.nvidia.com/control-plane-owner` label; an unlabelled
//! namespace is the default plane's, as the default plane's operator adopts every
//! unlabelled workload namespace (`control_plane_adoption.go`). A plane's agent
//! provisions the namespaces carrying its workload label *and* its owner
//! (`workloadNamespaceSelector`), and runs as `nvca` in the plane's system namespace.
//! This is unmerged upstream work (an older design used `control-plane-id`).

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::identity;

/// The label naming the plane that owns an object (`OwnerLabel`).
pub const OWNER_LABEL: &str = "nvcf.nvidia.com/control-plane-owner";
/// The legacy, unnamed plane (`DefaultOwner`): unlabelled objects are its.
pub const DEFAULT_OWNER: &str = "default";
/// Prerequisites shared by every plane (`SharedOwner`): no plane's agent provisions them.
pub const SHARED_OWNER: &str = "shared";
/// `MaxIDLength` (the design doc says 30; the code says 32 and is followed here).
pub const MAX_ID_LENGTH: usize = 32;
const DNS_LABEL_MAX: usize = 63;
const NAME_HASH_LENGTH: usize = 8;

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= DNS_LABEL_MAX
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A plane as a user names it (`--control-plane`): a named plane's ID, checked as
/// the agent's `ValidateID` checks it, or `default` for the legacy plane (which
/// the agent gets from an empty ID). `shared` owns no workloads: refused.
pub fn parse_plane(id: &str) -> Result<String, String> {
    if id == DEFAULT_OWNER {
        return Ok(id.into());
    }
    if id == SHARED_OWNER {
        return Err(format!(
            "control plane ID {id:?} is reserved for objects every plane shares: no agent provisions workloads as it"
        ));
    }
    if id.len() > MAX_ID_LENGTH {
        return Err(format!(
            "control plane ID {id:?} exceeds {MAX_ID_LENGTH} characters"
        ));
    }
    if !is_dns_label(id) {
        return Err(format!(
            "control plane ID {id:?} must be a lowercase DNS label (a-z, 0-9, '-', not at either end); the legacy plane is {DEFAULT_OWNER:?}"
        ));
    }
    Ok(id.into())
}

/// The plane-scoped name of an object whose legacy name is `legacy`
/// (`DNSLabelName`): `<id>-<legacy>`, cut to 54 characters and 8 hex digits of
/// its SHA-256 when longer than a DNS label; the legacy name for `default`.
pub fn dns_label_name(plane: &str, legacy: &str) -> String {
    if plane == DEFAULT_OWNER {
        return legacy.into();
    }
    let name = format!("{plane}-{legacy}");
    if name.len() <= DNS_LABEL_MAX {
        return name;
    }
    let hash: String = Sha256::digest(name.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let keep = DNS_LABEL_MAX - 1 - NAME_HASH_LENGTH;
    format!("{}-{}", &name[..keep], &hash[..NAME_HASH_LENGTH])
}

/// The plane that owns a namespace with these labels: its owner label when that
/// names a plane, `default` when it has none (the default plane adopts it); None
/// for `shared` or a value no agent can carry (no plane's).
pub fn namespace_plane(labels: Option<&Value>) -> Option<String> {
    match labels.and_then(|l| l.get(OWNER_LABEL)) {
        None => Some(DEFAULT_OWNER.into()),
        Some(v) => v.as_str().and_then(|s| parse_plane(s).ok()),
    }
}

/// The plane whose agent provisions a namespace with these labels itself (a
/// MiniService's: the workload label with exactly the MiniService value), or None.
pub fn provisioning_plane(labels: Option<&Value>) -> Option<String> {
    let miniservice = labels
        .and_then(|l| l.get(identity::WORKLOAD_INSTANCE_TYPE_LABEL))
        .and_then(Value::as_str)
        == Some(identity::WORKLOAD_INSTANCE_TYPE_MINISERVICE);
    if miniservice {
        namespace_plane(labels)
    } else {
        None
    }
}

/// A plane's agent, as the API server names it: `nvca` in its system namespace.
pub fn agent_user(system_namespace: &str) -> String {
    identity::service_account_user(system_namespace, identity::AGENT_ACCOUNT)
}

/// Whether a ServiceAccount `nvca` with these labels is `plane`'s agent: its owner
/// label names the plane; for `default`, also an unlabelled one (adoption labels
/// it only once the default plane's operator has run).
pub fn is_planes_agent(labels: Option<&Value>, plane: &str) -> bool {
    match labels
        .and_then(|l| l.get(OWNER_LABEL))
        .and_then(Value::as_str)
    {
        Some(owner) => owner == plane,
        None => plane == DEFAULT_OWNER,
    }
}

/// The flag set of every command that knows about planes (policy, list, cleanup,
/// audit, describe): the same names and help everywhere.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PlaneArgs {
    /// The NVCF control plane (its ID; `default` is the legacy unnamed plane): live
    /// commands keep to the namespaces it owns (label nvcf.nvidia.com/control-plane-owner)
    /// and read its agent from the cluster unless --agent-namespace or --agent names it.
    #[arg(long = "control-plane", value_name = "ID", value_parser = parse_plane)]
    pub control_plane: Option<String>,
    /// A plane's system namespace (the NVCFBackend's spec.clusterConfig.systemNamespace):
    /// its agent is system:serviceaccount:NAMESPACE:nvca [default: nvca-system]; repeatable
    /// with policy, one agent per plane.
    #[arg(
        long = "agent-namespace",
        value_name = "NAMESPACE",
        conflicts_with = "agents"
    )]
    pub agent_namespaces: Vec<String>,
    /// The NVCF agent's ServiceAccount as the API server names it
    /// (system:serviceaccount:NAMESPACE:NAME); repeatable with policy, whose requests it does not evaluate.
    #[arg(long = "agent", value_name = "SUBJECT")]
    pub agents: Vec<String>,
}

impl PlaneArgs {
    /// The agents the flags name, checked: each `--agent`, then `nvca` of each
    /// `--agent-namespace`. Empty when neither is given.
    pub fn named_agents(&self) -> Result<Vec<String>, String> {
        if let Some(bad) = self
            .agents
            .iter()
            .find(|a| a.trim() != a.as_str() || identity::parse_service_account_user(a).is_none())
        {
            return Err(format!(
                "--agent takes the agent's ServiceAccount as the API server names it, system:serviceaccount:NAMESPACE:NAME (the agent is system:serviceaccount:{}:{} unless its system namespace was changed: then --agent-namespace), not {bad:?}",
                identity::AGENT_NAMESPACE,
                identity::AGENT_ACCOUNT
            ));
        }
        let mut out = self.agents.clone();
        for ns in &self.agent_namespaces {
            let agent = agent_user(ns);
            if identity::parse_service_account_user(&agent).is_none() || ns.contains(':') {
                return Err(format!(
                    "--agent-namespace takes a namespace name, not {ns:?}"
                ));
            }
            out.push(agent);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_are_checked_as_the_agent_checks_them() {
        for ok in [
            "plane-a",
            "a",
            "p1",
            &"x".repeat(MAX_ID_LENGTH),
            DEFAULT_OWNER,
        ] {
            assert_eq!(parse_plane(ok).as_deref(), Ok(ok), "{ok}");
        }
        for bad in [
            SHARED_OWNER,
            "",
            "Plane-A",
            "-a",
            "a-",
            "a_b",
            "a.b",
            &"x".repeat(MAX_ID_LENGTH + 1),
        ] {
            assert!(parse_plane(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn dns_label_names_follow_the_agent() {
        assert_eq!(dns_label_name(DEFAULT_OWNER, "nvca"), "nvca");
        assert_eq!(dns_label_name("plane-a", "nvca"), "plane-a-nvca");
        // Longer than 63: 54 characters, '-', 8 hex digits of the whole name's hash.
        let plane = "p".repeat(MAX_ID_LENGTH);
        let legacy = "l".repeat(40);
        let full = format!("{plane}-{legacy}");
        let name = dns_label_name(&plane, &legacy);
        assert_eq!(name.len(), 63);
        let hash = format!("{:x}", Sha256::digest(full.as_bytes()));
        assert_eq!(name, format!("{}-{}", &full[..54], &hash[..8]));
        assert_ne!(name, dns_label_name(&plane, &"l".repeat(41)));
    }

    proptest::proptest! {
        /// Over generated IDs and legacy names (short and long, with hyphens):
        /// a plane's name is a DNS label, the legacy name's own within 63
        /// characters, names distinct planes apart, and an accepted ID is a
        /// namespace's plane when its owner label names it.
        #[test]
        fn plane_names_are_dns_labels_and_tell_planes_apart(
            a in "[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?",
            b in "[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?",
            legacy in "[a-z]([a-z0-9-]{0,50}[a-z0-9])?",
        ) {
            proptest::prop_assume!(a != DEFAULT_OWNER && a != SHARED_OWNER);
            proptest::prop_assert_eq!(parse_plane(&a), Ok(a.clone()));
            let name = dns_label_name(&a, &legacy);
            proptest::prop_assert!(is_dns_label(&name), "{}", name);
            let full = format!("{a}-{legacy}");
            if full.len() <= 63 {
                proptest::prop_assert_eq!(&name, &full);
            }
            if a != b && b != DEFAULT_OWNER {
                proptest::prop_assert_ne!(&name, &dns_label_name(&b, &legacy));
            }
            let labels = json!({OWNER_LABEL: a});
            proptest::prop_assert_eq!(namespace_plane(Some(&labels)), Some(a.clone()));
        }
    }

    #[test]
    fn a_namespace_is_its_owners_and_unlabelled_is_the_default_planes() {
        assert_eq!(namespace_plane(None).as_deref(), Some(DEFAULT_OWNER));
        assert_eq!(
            namespace_plane(Some(&json!({}))).as_deref(),
            Some(DEFAULT_OWNER)
        );
        assert_eq!(
            namespace_plane(Some(&json!({OWNER_LABEL: "plane-a"}))).as_deref(),
            Some("plane-a")
        );
        assert_eq!(
            namespace_plane(Some(&json!({OWNER_LABEL: DEFAULT_OWNER}))).as_deref(),
            Some(DEFAULT_OWNER)
        );
        for nobody in [SHARED_OWNER, "", "Plane_A"] {
            assert_eq!(namespace_plane(Some(&json!({OWNER_LABEL: nobody}))), None);
        }
    }

    #[test]
    fn a_plane_provisions_its_miniservice_namespaces_only() {
        let ty = identity::WORKLOAD_INSTANCE_TYPE_LABEL;
        let ms = identity::WORKLOAD_INSTANCE_TYPE_MINISERVICE;
        let cases = [
            (json!({ty: ms}), Some(DEFAULT_OWNER)),
            (json!({ty: ms, OWNER_LABEL: "plane-a"}), Some("plane-a")),
            (json!({ty: ms, OWNER_LABEL: "plane-b"}), Some("plane-b")),
            // Look-alikes: an owner without the workload type, the agent's other
            // value, the shared owner, an owner no agent can carry.
            (json!({OWNER_LABEL: "plane-a"}), None),
            (json!({ty: "pod_spec", OWNER_LABEL: "plane-a"}), None),
            (json!({ty: ms, OWNER_LABEL: SHARED_OWNER}), None),
            (json!({ty: ms, OWNER_LABEL: "Plane A"}), None),
            (json!({}), None),
        ];
        for (labels, want) in cases {
            assert_eq!(
                provisioning_plane(Some(&labels)).as_deref(),
                want,
                "{labels}"
            );
        }
    }

    #[test]
    fn a_planes_agent_is_named_by_its_owner_label() {
        assert!(is_planes_agent(
            Some(&json!({OWNER_LABEL: "plane-a"})),
            "plane-a"
        ));
        assert!(!is_planes_agent(
            Some(&json!({OWNER_LABEL: "plane-a"})),
            "plane-b"
        ));
        assert!(!is_planes_agent(None, "plane-a"));
        assert!(is_planes_agent(None, DEFAULT_OWNER));
        assert!(is_planes_agent(
            Some(&json!({OWNER_LABEL: DEFAULT_OWNER})),
            DEFAULT_OWNER
        ));
        assert!(!is_planes_agent(
            Some(&json!({OWNER_LABEL: "plane-a"})),
            DEFAULT_OWNER
        ));
        assert_eq!(
            agent_user("plane-a-nvca-system"),
            "system:serviceaccount:plane-a-nvca-system:nvca"
        );
    }

    #[test]
    fn flags_name_agents_and_refuse_what_is_not_one() {
        let args = PlaneArgs {
            agents: vec!["system:serviceaccount:x:nvca".into()],
            agent_namespaces: vec!["plane-a-nvca-system".into(), "plane-b-sys".into()],
            ..Default::default()
        };
        assert_eq!(
            args.named_agents().unwrap(),
            [
                "system:serviceaccount:x:nvca",
                "system:serviceaccount:plane-a-nvca-system:nvca",
                "system:serviceaccount:plane-b-sys:nvca"
            ]
        );
        for bad in [
            PlaneArgs {
                agents: vec!["nvca".into()],
                ..Default::default()
            },
            PlaneArgs {
                agents: vec![" system:serviceaccount:x:nvca".into()],
                ..Default::default()
            },
            PlaneArgs {
                agent_namespaces: vec!["a:b".into()],
                ..Default::default()
            },
            PlaneArgs {
                agent_namespaces: vec!["Upper".into()],
                ..Default::default()
            },
        ] {
            assert!(bad.named_agents().is_err(), "{bad:?}");
        }
    }
}
