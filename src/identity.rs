//! The worker identity contract, fixed by what the NVCF agent (NVCA) provisions per
//! pod, and the names and objects derived from it.

use k8s_openapi::api::core::v1::{
    EnvVar, ProjectedVolumeSource, ServiceAccount, ServiceAccountTokenProjection, Volume,
    VolumeMount, VolumeProjection,
};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Per-pod worker accounts are `nvcf-worker-<pod>`; the agent reserves the prefix.
pub const PREFIX: &str = "nvcf-worker-";
/// The one worker account of a namespace: MiniService workers run as it
/// (`WorkerServiceAccountName` in the agent's `workerguard.go`), and so do the
/// workloads of `naming: per-namespace`.
pub const WORKER_NAME: &str = "nvcf-worker";
/// Annotation the agent puts on its own objects (`InfraObjectAnnotationKey`); it
/// registers with ICMS only pods that carry it, so a workload carrying it claims to
/// be the agent's.
pub const INFRA_ANNOTATION: &str = "nvca.nvcf.nvidia.io/nvca-infra-object";
/// Label naming the MiniService an agent-made identity belongs to (`MiniserviceNameLabel`).
pub const MINISERVICE_LABEL: &str = "nvca.nvcf.nvidia.io/miniservice-name";
/// The agent's own account, in its system namespace (operator constants
/// `NVCAModuleName`, `DefaultNVCASystemNamespace`; the namespace is the
/// NVCFBackend's `spec.clusterConfig.systemNamespace`).
pub const AGENT_ACCOUNT: &str = "nvca";
pub const AGENT_NAMESPACE: &str = "nvca-system";
/// The account the agent impersonates to apply a MiniService's chart objects
/// (`InstanceServiceAccountName`): evaluated by the agent's webhook like a user.
pub const MINISERVICE_APPLIER: &str = "miniservice-instance-permissions";
/// The label the agent puts on the namespaces it makes for its workloads
/// (`WorkloadInstanceTypeLabel`, the agent's `pkg/types/common_labels.go`).
pub const WORKLOAD_INSTANCE_TYPE_LABEL: &str = "nvca.nvcf.nvidia.io/workload-instance-type";
/// Its value on a MiniService's namespace (`WorkloadInstanceTypeValueMiniService`,
/// set by `ensureInstanceNamespace`): there the agent provisions the worker
/// identity itself (`ensureWorkerIdentity` resets the worker Role and RoleBinding)
/// and its webhook rejects reserved names in the charts it applies, so an identity
/// declared in a manifest there conflicts with the agent.
pub const WORKLOAD_INSTANCE_TYPE_MINISERVICE: &str = "miniservice";
/// Bootstrap tokens the worker library gives up for a mounted projected token
/// (`psat_source.go`): `NVCF_WORKER_TOKEN`, `NVCT_WORKER_TOKEN` for tasks.
pub const BOOTSTRAP_TOKEN_ENV: [&str; 2] = ["NVCF_WORKER_TOKEN", "NVCT_WORKER_TOKEN"];

/// `system:serviceaccount:NS:NAME`, the username the API server gives an account.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The namespace and name of a ServiceAccount username, if it is one.
pub fn parse_service_account_user(user: &str) -> Option<(&str, &str)> {
    let (ns, name) = user
        .strip_prefix("system:serviceaccount:")?
        .split_once(':')?;
    let dns = |s: &str| {
        !s.is_empty()
            && s.len() <= MAX_NAME_LEN
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    };
    (dns(ns) && dns(name)).then_some((ns, name))
}

pub const TOKEN_VOLUME: &str = "nvcf-worker-token";
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/tokens";
pub const TOKEN_PATH: &str = "token";
pub const TOKEN_FILE_PATH: &str = "/var/run/secrets/tokens/token";
pub const ENV_TOKEN_FILE_PATH: &str = "NVCF_TOKEN_FILE_PATH";
pub const ENV_IDENTITY_SOURCE: &str = "NVCF_IDENTITY_SOURCE";
pub const IDENTITY_SOURCE_PSAT: &str = "psat";
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 900;
/// Kubernetes rejects projected token lifetimes under 10 minutes.
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
pub const MAX_EXPIRATION_SECONDS: i64 = 86_400;
/// Longest name of a ServiceAccount, Role or RoleBinding (a DNS subdomain).
pub const MAX_NAME_LEN: usize = 253;

/// Marks objects this tool generated.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "kubectl-nvcf-worker";
/// `manifest` on identities declared in manifests (the agent's per-pod ones lack it).
pub const ORIGIN_LABEL: &str = "nvcf.io/identity-origin";
pub const ORIGIN_MANIFEST: &str = "manifest";
/// `Kind/name` of the workload a manifest-declared identity belongs to.
pub const WORKLOAD_ANNOTATION: &str = "nvcf.io/workload";
/// apiVersion of that workload, so the owner can be looked up exactly.
pub const WORKLOAD_API_VERSION_ANNOTATION: &str = "nvcf.io/workload-api-version";
/// `namespace` on a per-namespace identity declared in manifests (it names no workload).
pub const SCOPE_ANNOTATION: &str = "nvcf.io/identity-scope";
pub const SCOPE_NAMESPACE: &str = "namespace";
/// Default selector label.
pub const WORKER_LABEL: &str = "nvcf.io/worker";
/// Per-workload `a,b`: containers left without the token mount and env.
pub const SKIP_CONTAINERS_ANNOTATION: &str = "nvcf.io/skip-containers";
/// On a workload: the pod spec values `inject` replaced, as a JSON object
/// (`{"serviceAccountName":"app","automountServiceAccountToken":true}`), so that
/// `uninject` can put them back. A key inject set that is not recorded was absent.
pub const REPLACED_ANNOTATION: &str = "nvcf.io/replaced";
/// The record's key for the contract env a container's author had set before
/// inject (`{"env":{"app":["NVCF_IDENTITY_SOURCE"]}}`), which uninject leaves.
pub const REPLACED_ENV_KEY: &str = "env";
/// On a pod the mutating admission policy (`policy --mutating`) gave the identity
/// in its admission request. The same policy takes it off every other pod it
/// sees (all pods), so the guard's validating policy, with `--trust-mutation`,
/// admits a worker pod carrying it: it can only be the mutation's result.
pub const ADMITTED_ANNOTATION: &str = "nvcf.io/identity-admission";
/// The pod spec keys inject sets and records.
pub const REPLACED_KEYS: [&str; 3] = [
    "serviceAccountName",
    "serviceAccount",
    "automountServiceAccountToken",
];

/// Whether `name` is reserved for worker identities, as the agent's
/// `IsWorkerServiceAccountName` decides: `nvcf-worker` exactly or `nvcf-worker-*`.
pub fn is_reserved(name: &str) -> bool {
    name == WORKER_NAME || name.starts_with(PREFIX)
}

/// How identities are named: the contract the output follows.
///
/// `PerNamespace` (the default) is the one the newest agent and ICMS accept: the
/// agent's worker account is `nvcf-worker` in each namespace (`WorkerServiceAccountName`,
/// `nvca/pkg/miniservice/workerguard.go`), and ICMS takes a worker token only when its
/// subject is `system:serviceaccount:<ns>:nvcf-worker` (`WorkerAuth.expectedSubject`,
/// `WorkerTokenVerificationService`). `PerWorkload` is the PR #846 contract, one
/// `nvcf-worker-<name>` per workload, which an older ICMS read the instance from and the
/// newest agent calls "the legacy per-instance naming prefix".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Naming {
    /// One nvcf-worker-<name> identity per workload (PR #846; the legacy per-instance prefix).
    PerWorkload,
    /// One nvcf-worker identity per namespace (the MiniService agent; what the newest ICMS accepts).
    #[default]
    PerNamespace,
}

impl Naming {
    /// The value as the config and `--naming` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Naming::PerWorkload => "per-workload",
            Naming::PerNamespace => "per-namespace",
        }
    }
}

pub fn audience(cluster_id: &str) -> String {
    format!("nvcf-icms:{cluster_id}")
}

/// `nvcf-worker-<name>`, shortened when too long: a readable prefix, `-`, and ten hex
/// digits of the SHA-256 of the full name, so distinct names stay distinct.
pub fn derived_name(workload: &str) -> String {
    let full = format!("{PREFIX}{workload}");
    if full.len() <= MAX_NAME_LEN {
        return full;
    }
    let hash = hex(&Sha256::digest(full.as_bytes())[..5]);
    let mut keep = MAX_NAME_LEN - 1 - hash.len();
    while !full.is_char_boundary(keep) {
        keep -= 1;
    }
    let prefix = full[..keep].trim_end_matches(['-', '.']);
    format!("{prefix}-{hash}")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the token source of a pod looks like for a given audience and lifetime.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenSpec {
    pub audience: String,
    pub expiration_seconds: i64,
}

fn json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).expect("k8s-openapi types serialize")
}

pub fn token_volume(t: &TokenSpec) -> serde_json::Value {
    json(&Volume {
        name: TOKEN_VOLUME.into(),
        projected: Some(ProjectedVolumeSource {
            sources: Some(vec![VolumeProjection {
                service_account_token: Some(ServiceAccountTokenProjection {
                    audience: Some(t.audience.clone()),
                    expiration_seconds: Some(t.expiration_seconds),
                    path: TOKEN_PATH.into(),
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    })
}

pub fn token_mount() -> serde_json::Value {
    json(&VolumeMount {
        name: TOKEN_VOLUME.into(),
        mount_path: TOKEN_MOUNT_PATH.into(),
        read_only: Some(true),
        ..Default::default()
    })
}

/// The two env vars, in the order they are added.
pub fn env_vars() -> [(&'static str, &'static str); 2] {
    [
        (ENV_TOKEN_FILE_PATH, TOKEN_FILE_PATH),
        (ENV_IDENTITY_SOURCE, IDENTITY_SOURCE_PSAT),
    ]
}

pub fn env_var(name: &str, value: &str) -> serde_json::Value {
    json(&EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    })
}

/// Whom a manifest-declared identity belongs to, as its marks say.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Marks {
    /// One workload (`naming: per-workload`).
    Workload {
        api_version: String,
        kind: String,
        name: String,
    },
    /// Every selected workload of its namespace (`naming: per-namespace`).
    Namespace,
}

impl Marks {
    /// The identity name these marks imply; an object whose name differs was
    /// renamed after the transformer ran.
    pub fn identity_name(&self) -> String {
        match self {
            Marks::Workload { name, .. } => derived_name(name),
            Marks::Namespace => WORKER_NAME.to_string(),
        }
    }

    /// Reads the marks from labels and annotations (None: not the transformer's).
    pub fn read(
        label: impl Fn(&str) -> Option<String>,
        annotation: impl Fn(&str) -> Option<String>,
    ) -> Option<Marks> {
        if label(MANAGED_BY_LABEL).as_deref() != Some(MANAGED_BY)
            || label(ORIGIN_LABEL).as_deref() != Some(ORIGIN_MANIFEST)
        {
            return None;
        }
        if annotation(SCOPE_ANNOTATION).as_deref() == Some(SCOPE_NAMESPACE) {
            return Some(Marks::Namespace);
        }
        let workload = annotation(WORKLOAD_ANNOTATION)?;
        let (kind, name) = workload.split_once('/')?;
        Some(Marks::Workload {
            api_version: annotation(WORKLOAD_API_VERSION_ANNOTATION)?,
            kind: kind.to_string(),
            name: name.to_string(),
        })
        .filter(|_| !kind.is_empty() && !name.is_empty())
    }

    /// `Deployment/web`, or `namespace` for a per-namespace identity.
    pub fn describe(&self) -> String {
        match self {
            Marks::Workload { kind, name, .. } => format!("{kind}/{name}"),
            Marks::Namespace => "every selected workload of its namespace".into(),
        }
    }
}

/// The identity a manifest declares: its marks and namespace.
#[derive(Clone, Debug, PartialEq)]
pub struct Owner {
    pub marks: Marks,
    pub namespace: Option<String>,
}

impl Owner {
    pub fn workload(api_version: &str, kind: &str, name: &str, namespace: Option<&str>) -> Owner {
        Owner {
            marks: Marks::Workload {
                api_version: api_version.into(),
                kind: kind.into(),
                name: name.into(),
            },
            namespace: namespace.map(Into::into),
        }
    }
}

fn meta(name: &str, owner: &Owner) -> ObjectMeta {
    let annotations = match &owner.marks {
        Marks::Workload {
            api_version,
            kind,
            name,
        } => BTreeMap::from([
            (WORKLOAD_ANNOTATION.to_string(), format!("{kind}/{name}")),
            (
                WORKLOAD_API_VERSION_ANNOTATION.to_string(),
                api_version.clone(),
            ),
        ]),
        Marks::Namespace => {
            BTreeMap::from([(SCOPE_ANNOTATION.to_string(), SCOPE_NAMESPACE.to_string())])
        }
    };
    ObjectMeta {
        name: Some(name.into()),
        namespace: owner.namespace.clone(),
        labels: Some(BTreeMap::from([
            (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string()),
            (ORIGIN_LABEL.to_string(), ORIGIN_MANIFEST.to_string()),
        ])),
        annotations: Some(annotations),
        ..Default::default()
    }
}

/// A JSON object with apiVersion and kind first, as people write them.
fn with_type_meta(api_version: &str, kind: &str, body: serde_json::Value) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    out.insert("apiVersion".into(), api_version.into());
    out.insert("kind".into(), kind.into());
    if let serde_json::Value::Object(m) = body {
        out.extend(
            m.into_iter()
                .filter(|(k, _)| k != "apiVersion" && k != "kind"),
        );
    }
    out.into()
}

pub fn service_account(name: &str, owner: &Owner) -> serde_json::Value {
    let sa = ServiceAccount {
        metadata: meta(name, owner),
        automount_service_account_token: Some(false),
        ..Default::default()
    };
    with_type_meta("v1", "ServiceAccount", json(&sa))
}

/// The empty Role: deny by default, explicit so that an audit can see it.
pub fn role(name: &str, owner: &Owner) -> serde_json::Value {
    let role = Role {
        metadata: meta(name, owner),
        rules: Some(vec![]),
    };
    with_type_meta("rbac.authorization.k8s.io/v1", "Role", json(&role))
}

pub fn role_binding(name: &str, owner: &Owner) -> serde_json::Value {
    let rb = RoleBinding {
        metadata: meta(name, owner),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: name.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: name.into(),
            namespace: owner.namespace.clone(),
            ..Default::default()
        }]),
    };
    with_type_meta("rbac.authorization.k8s.io/v1", "RoleBinding", json(&rb))
}

/// ServiceAccount, Role and RoleBinding, in the order they are emitted.
pub fn trio(name: &str, owner: &Owner) -> [serde_json::Value; 3] {
    [
        service_account(name, owner),
        role(name, owner),
        role_binding(name, owner),
    ]
}

/// The kinds of the trio, as (apiVersion group, kind).
pub const TRIO_KINDS: [&str; 3] = ["ServiceAccount", "Role", "RoleBinding"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_prefixed() {
        assert_eq!(derived_name("web"), "nvcf-worker-web");
    }

    #[test]
    fn reserved_names_are_the_agents() {
        for name in ["nvcf-worker", "nvcf-worker-x", "nvcf-worker-"] {
            assert!(is_reserved(name), "{name}");
        }
        for name in [
            "nvcf-workers",
            "nvcf-worker2",
            "my-nvcf-worker",
            "nvcf-worke",
            "",
        ] {
            assert!(!is_reserved(name), "{name}");
        }
    }

    #[test]
    fn marks_round_trip_and_name_their_identity() {
        let owner = Owner::workload("apps/v1", "Deployment", "web", Some("ns"));
        let [sa, ..] = trio("nvcf-worker-web", &owner);
        let sa = &sa;
        let get =
            |k: &'static str| move |key: &str| sa["metadata"][k][key].as_str().map(str::to_string);
        let marks = Marks::read(get("labels"), get("annotations")).unwrap();
        assert_eq!(marks, owner.marks);
        assert_eq!(marks.identity_name(), "nvcf-worker-web");
        let ns = Owner {
            marks: Marks::Namespace,
            namespace: Some("ns".into()),
        };
        let [sa, ..] = trio(WORKER_NAME, &ns);
        assert_eq!(sa["metadata"]["annotations"][SCOPE_ANNOTATION], "namespace");
        assert!(sa["metadata"]["annotations"]
            .get(INFRA_ANNOTATION)
            .is_none());
        assert_eq!(sa["automountServiceAccountToken"], false);
        assert_eq!(Marks::Namespace.identity_name(), WORKER_NAME);
    }

    #[test]
    fn long_names_are_shortened_deterministically_and_stay_unique() {
        let a = "a".repeat(250);
        let b = format!("{}b", "a".repeat(249));
        let (na, nb) = (derived_name(&a), derived_name(&b));
        assert_eq!(na.len(), MAX_NAME_LEN);
        assert!(nb.len() <= MAX_NAME_LEN);
        assert_ne!(na, nb);
        assert_eq!(na, derived_name(&a));
        assert!(na.starts_with(PREFIX));
        // Exactly at the limit stays readable and unhashed.
        let c = "c".repeat(MAX_NAME_LEN - PREFIX.len());
        assert_eq!(derived_name(&c), format!("{PREFIX}{c}"));
        // A cut that would end in '-' or '.' is trimmed: still a valid DNS subdomain.
        let d = format!("{}.-{}", "d".repeat(228), "e".repeat(40));
        let nd = derived_name(&d);
        assert!(
            nd.starts_with(&format!("{PREFIX}{}-", "d".repeat(228))),
            "{nd}"
        );
        assert!(!nd.contains(".-") && !nd.contains("--"), "{nd}");
    }

    #[test]
    fn trio_matches_the_contract() {
        let owner = Owner::workload("apps/v1", "Deployment", "web", Some("ns"));
        let [sa, role, rb] = trio("nvcf-worker-web", &owner);
        assert_eq!(sa["automountServiceAccountToken"], false);
        assert_eq!(
            sa["metadata"]["annotations"][WORKLOAD_ANNOTATION],
            "Deployment/web"
        );
        assert_eq!(role["rules"], serde_json::json!([]));
        assert_eq!(
            rb["roleRef"],
            serde_json::json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "nvcf-worker-web"})
        );
        assert_eq!(
            rb["subjects"],
            serde_json::json!([{"kind": "ServiceAccount", "name": "nvcf-worker-web", "namespace": "ns"}])
        );
        let vol = token_volume(&TokenSpec {
            audience: audience("c1"),
            expiration_seconds: 900,
        });
        assert_eq!(
            vol,
            serde_json::json!({"name": "nvcf-worker-token", "projected": {"sources": [{"serviceAccountToken": {"audience": "nvcf-icms:c1", "expirationSeconds": 900, "path": "token"}}]}})
        );
        assert_eq!(
            token_mount(),
            serde_json::json!({"mountPath": "/var/run/secrets/tokens", "name": "nvcf-worker-token", "readOnly": true})
        );
    }
}
