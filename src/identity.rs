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

/// Every worker ServiceAccount, Role and RoleBinding name starts with this.
pub const PREFIX: &str = "nvcf-worker-";
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
/// Default selector label.
pub const WORKER_LABEL: &str = "nvcf.io/worker";
/// Per-workload `a,b`: containers left without the token mount and env.
pub const SKIP_CONTAINERS_ANNOTATION: &str = "nvcf.io/skip-containers";

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

/// The workload a manifest-declared identity belongs to.
#[derive(Clone, Debug, PartialEq)]
pub struct Owner {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
}

fn meta(name: &str, owner: &Owner) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: owner.namespace.clone(),
        labels: Some(BTreeMap::from([
            (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string()),
            (ORIGIN_LABEL.to_string(), ORIGIN_MANIFEST.to_string()),
        ])),
        annotations: Some(BTreeMap::from([
            (
                WORKLOAD_ANNOTATION.to_string(),
                format!("{}/{}", owner.kind, owner.name),
            ),
            (
                WORKLOAD_API_VERSION_ANNOTATION.to_string(),
                owner.api_version.clone(),
            ),
        ])),
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
        let owner = Owner {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: "web".into(),
            namespace: Some("ns".into()),
        };
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
