//! The function config: the typed `fn.nvcf.io/v1alpha1 WorkerIdentity` kind, or the
//! same keys as the `data` of a ConfigMap (what `kpt fn eval -- clusterID=abc` sends).

use serde::Deserialize;

use crate::identity::{self, Naming, TokenSpec};
use crate::manifest::{self, Node};
use crate::selector::{Requirement, Selector};

pub const API_VERSION: &str = "fn.nvcf.io/v1alpha1";
pub const KIND: &str = "WorkerIdentity";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Inject,
    Validate,
    /// Takes out what inject added and restores what it replaced.
    Uninject,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub mode: Mode,
    pub cluster_id: Option<String>,
    pub audience: Option<String>,
    pub expiration_seconds: i64,
    /// `psat` (also for an empty value, as the agent does) or another source.
    pub token_source: String,
    pub selector: Selector,
    pub include_init_containers: bool,
    /// One `nvcf-worker` per namespace (default: the contract the newest agent and
    /// ICMS accept) or one identity per workload (PR #846's).
    pub naming: Naming,
    /// Take the identity out of workloads that carry it but are no longer selected
    /// (by default they keep it, and the report says so).
    pub prune: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            mode: Mode::Inject,
            cluster_id: None,
            audience: None,
            expiration_seconds: identity::DEFAULT_EXPIRATION_SECONDS,
            token_source: identity::IDENTITY_SOURCE_PSAT.into(),
            selector: default_selector(),
            include_init_containers: false,
            naming: Naming::default(),
            prune: false,
        }
    }
}

pub fn default_selector() -> Selector {
    Selector(vec![Requirement::Equals(
        identity::WORKER_LABEL.into(),
        "true".into(),
    )])
}

pub use crate::error::ConfigError;

fn err<T>(msg: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(msg.into()))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TypedSpec {
    mode: Option<String>,
    #[serde(rename = "clusterID")]
    cluster_id: Option<String>,
    audience: Option<String>,
    expiration_seconds: Option<i64>,
    token_source: Option<String>,
    selector: Option<serde_json::Value>,
    include_init_containers: Option<bool>,
    naming: Option<String>,
    prune: Option<bool>,
}

impl Config {
    /// Reads a config object: the typed kind or a ConfigMap. `None` (no config at all)
    /// gives the defaults, which cannot inject without a clusterID.
    pub fn from_node(node: Option<&Node>) -> Result<Config, ConfigError> {
        let Some(node) = node.filter(|n| !n.is_null()) else {
            return Ok(Config::default());
        };
        let json = manifest::to_json(node);
        let kind = json.get("kind").and_then(|k| k.as_str()).unwrap_or("");
        match kind {
            KIND => Config::from_typed(&json),
            "ConfigMap" => Config::from_config_map(&json),
            "" => err("has no kind (expected fn.nvcf.io/v1alpha1 WorkerIdentity or a ConfigMap)"),
            other => err(format!(
                "kind {other:?} is not {API_VERSION} {KIND} or a ConfigMap"
            )),
        }
    }

    fn from_typed(json: &serde_json::Value) -> Result<Config, ConfigError> {
        let api = json
            .get("apiVersion")
            .and_then(|a| a.as_str())
            .unwrap_or("");
        if api != API_VERSION {
            return err(format!("apiVersion {api:?} of {KIND} is not {API_VERSION}"));
        }
        if let Some(k) = json.as_object().and_then(|o| {
            o.keys()
                .find(|k| !["apiVersion", "kind", "metadata", "spec"].contains(&k.as_str()))
        }) {
            return err(format!(
                "unknown key {k:?} in {KIND} (settings go under spec)"
            ));
        }
        let spec_json = json.get("spec").cloned().unwrap_or(serde_json::Value::Null);
        if let Some(e) = spec_type_error(&spec_json) {
            return Err(e);
        }
        let spec: TypedSpec = if spec_json.is_null() {
            TypedSpec::default()
        } else {
            serde_json::from_value(spec_json).map_err(|e| ConfigError(format!("spec: {e}")))?
        };
        let mut c = Config::default();
        if let Some(m) = spec.mode {
            c.mode = parse_mode(&m)?;
        }
        c.cluster_id = spec.cluster_id;
        c.audience = spec.audience;
        if let Some(e) = spec.expiration_seconds {
            c.expiration_seconds = e;
        }
        if let Some(t) = spec.token_source {
            c.token_source = t;
        }
        if let Some(s) = spec.selector {
            c.selector = Selector::from_json(&s).map_err(|e| ConfigError(format!("spec.{e}")))?;
        }
        if let Some(i) = spec.include_init_containers {
            c.include_init_containers = i;
        }
        if let Some(n) = spec.naming {
            c.naming = parse_naming(&n)?;
        }
        if let Some(p) = spec.prune {
            c.prune = p;
        }
        c.normalize()
    }

    fn from_config_map(json: &serde_json::Value) -> Result<Config, ConfigError> {
        let mut c = Config::default();
        let Some(data) = json.get("data") else {
            return c.normalize();
        };
        let data = data
            .as_object()
            .ok_or_else(|| ConfigError("ConfigMap data must be a mapping".into()))?;
        for (k, v) in data {
            // kubectl and kpt send every data value as a string; accept scalars written bare.
            let v = match v {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Null => String::new(),
                other => other.to_string(),
            };
            match k.as_str() {
                "mode" => c.mode = parse_mode(&v)?,
                "clusterID" => c.cluster_id = Some(v),
                "audience" => c.audience = Some(v),
                "expirationSeconds" => {
                    c.expiration_seconds = v.trim().parse().map_err(|_| {
                        ConfigError(format!("expirationSeconds {v:?} is not a whole number"))
                    })?
                }
                "tokenSource" => c.token_source = v,
                "selector" => {
                    c.selector =
                        Selector::parse(&v).map_err(|e| ConfigError(format!("selector: {e}")))?
                }
                "includeInitContainers" => c.include_init_containers = parse_bool(k, &v)?,
                "prune" => c.prune = parse_bool(k, &v)?,
                "naming" => c.naming = parse_naming(&v)?,
                other => return err(format!("unknown key {other:?} in ConfigMap data")),
            }
        }
        c.normalize()
    }

    fn normalize(mut self) -> Result<Config, ConfigError> {
        if self.token_source.is_empty() {
            self.token_source = identity::IDENTITY_SOURCE_PSAT.into();
        }
        if !(identity::MIN_EXPIRATION_SECONDS..=identity::MAX_EXPIRATION_SECONDS)
            .contains(&self.expiration_seconds)
        {
            return err(format!(
                "expirationSeconds {} is outside {}..{} (Kubernetes rejects projected tokens shorter than 10 minutes)",
                self.expiration_seconds,
                identity::MIN_EXPIRATION_SECONDS,
                identity::MAX_EXPIRATION_SECONDS
            ));
        }
        if self.audience.as_deref() == Some("") {
            self.audience = None;
        }
        Ok(self)
    }

    pub fn is_psat(&self) -> bool {
        self.token_source == identity::IDENTITY_SOURCE_PSAT
    }

    /// The token to inject; an error when no clusterID was given.
    pub fn token_spec(&self) -> Result<TokenSpec, ConfigError> {
        let cluster = self.cluster_id.as_deref().filter(|c| !c.trim().is_empty());
        let audience = match (&self.audience, cluster) {
            (Some(a), _) => a.clone(),
            (None, Some(c)) => identity::audience(c),
            (None, None) => "".into(),
        };
        if cluster.is_none() {
            return err("clusterID is required to inject a worker identity (set spec.clusterID, or clusterID=... in a ConfigMap)");
        }
        Ok(TokenSpec {
            audience,
            expiration_seconds: self.expiration_seconds,
        })
    }
}

fn parse_bool(key: &str, v: &str) -> Result<bool, ConfigError> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => err(format!("{key} {v:?} is not true or false")),
    }
}

fn parse_naming(n: &str) -> Result<Naming, ConfigError> {
    match n {
        "" => Ok(Naming::default()),
        "per-workload" => Ok(Naming::PerWorkload),
        "per-namespace" => Ok(Naming::PerNamespace),
        other => err(format!(
            "naming {other:?} is not per-workload or per-namespace"
        )),
    }
}

/// A spec value of the wrong type, said in the user's terms (serde would say
/// `expected i64` and not name the key).
fn spec_type_error(spec: &serde_json::Value) -> Option<ConfigError> {
    for (key, value) in spec.as_object()? {
        let want = match key.as_str() {
            "expirationSeconds" if !value.is_i64() => "a whole number of seconds, like 3600",
            "includeInitContainers" | "prune" if !value.is_boolean() => "true or false",
            "mode" | "clusterID" | "audience" | "tokenSource" | "naming" if !value.is_string() => {
                "a string"
            }
            "selector" if !value.is_object() => "a mapping with matchLabels or matchExpressions",
            _ => continue,
        };
        let quoted = value.is_string() && want != "a string";
        return Some(ConfigError(format!(
            "spec.{key} is {value}, expected {want}{}",
            if quoted { " (without quotes)" } else { "" }
        )));
    }
    None
}

fn parse_mode(m: &str) -> Result<Mode, ConfigError> {
    match m {
        "" | "inject" => Ok(Mode::Inject),
        "validate" => Ok(Mode::Validate),
        "uninject" => Ok(Mode::Uninject),
        other => err(format!(
            "mode {other:?} is not inject, validate or uninject"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(yaml: &str) -> Result<Config, ConfigError> {
        let docs = manifest::parse_stream(yaml.as_bytes()).unwrap();
        Config::from_node(Some(docs[0].view()))
    }

    #[test]
    fn typed_kind_with_defaults() {
        let c =
            cfg("apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nspec:\n  clusterID: c1\n")
                .unwrap();
        assert_eq!(
            c.token_spec().unwrap(),
            TokenSpec {
                audience: "nvcf-icms:c1".into(),
                expiration_seconds: 900
            }
        );
        assert_eq!(c.selector, default_selector());
        assert!(c.is_psat());
    }

    #[test]
    fn unknown_typed_key_is_named() {
        let e =
            cfg("apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nspec:\n  clusterId: c1\n")
                .unwrap_err();
        assert!(e.0.contains("clusterId"), "{e}");
        let e = cfg("apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nclusterID: c1\n")
            .unwrap_err();
        assert!(e.0.contains("clusterID"), "{e}");
    }

    #[test]
    fn config_map_form() {
        let c = cfg("apiVersion: v1\nkind: ConfigMap\ndata:\n  clusterID: c1\n  expirationSeconds: \"3600\"\n  selector: team in (a,b)\n  tokenSource: \"\"\n  mode: validate\n").unwrap();
        assert_eq!(c.expiration_seconds, 3600);
        assert_eq!(c.mode, Mode::Validate);
        assert!(c.is_psat(), "an empty tokenSource means psat");
        assert_eq!(
            c.selector,
            Selector(vec![Requirement::In(
                "team".into(),
                vec!["a".into(), "b".into()]
            )])
        );
        assert!(cfg("apiVersion: v1\nkind: ConfigMap\ndata:\n  bogus: x\n")
            .unwrap_err()
            .0
            .contains("bogus"));
    }

    #[test]
    fn naming_in_both_forms() {
        let c = cfg("apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nspec:\n  clusterID: c1\n  naming: per-namespace\n").unwrap();
        assert_eq!(c.naming, Naming::PerNamespace);
        let c = cfg("apiVersion: v1\nkind: ConfigMap\ndata:\n  naming: per-workload\n").unwrap();
        assert_eq!(c.naming, Naming::PerWorkload);
        // The default is the contract the newest agent and ICMS accept; empty means it too.
        assert_eq!(Config::default().naming, Naming::PerNamespace);
        let c = cfg("apiVersion: v1\nkind: ConfigMap\ndata:\n  naming: \"\"\n").unwrap();
        assert_eq!(c.naming, Naming::PerNamespace);
        let c =
            cfg("apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nspec:\n  clusterID: c1\n")
                .unwrap();
        assert_eq!(c.naming, Naming::PerNamespace);
        let c = cfg("apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nspec:\n  naming: per-workload\n").unwrap();
        assert_eq!(c.naming, Naming::PerWorkload);
        let e = cfg("apiVersion: v1\nkind: ConfigMap\ndata:\n  naming: per-pod\n").unwrap_err();
        assert!(e.0.contains("per-pod"), "{e}");
    }

    #[test]
    fn uninject_mode_and_prune_in_both_forms() {
        let c = cfg("apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nspec:\n  mode: uninject\n  prune: true\n").unwrap();
        assert_eq!((c.mode, c.prune), (Mode::Uninject, true));
        let c = cfg("apiVersion: v1\nkind: ConfigMap\ndata:\n  prune: \"false\"\n").unwrap();
        assert!(!c.prune);
        let e = cfg("apiVersion: v1\nkind: ConfigMap\ndata:\n  prune: maybe\n").unwrap_err();
        assert!(e.0.contains("prune"), "{e}");
        let e = cfg(
            "apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nspec:\n  prune: \"true\"\n",
        )
        .unwrap_err();
        assert!(e.0.contains("spec.prune"), "{e}");
        assert!(!Config::default().prune);
    }

    #[test]
    fn expiration_bounds() {
        for bad in ["599", "86401", "0", "-1"] {
            let e = cfg(&format!("apiVersion: v1\nkind: ConfigMap\ndata:\n  clusterID: c\n  expirationSeconds: \"{bad}\"\n")).unwrap_err();
            assert!(e.0.contains("600..86400"), "{e}");
        }
        for ok in ["600", "86400"] {
            assert!(cfg(&format!("apiVersion: v1\nkind: ConfigMap\ndata:\n  clusterID: c\n  expirationSeconds: \"{ok}\"\n")).is_ok());
        }
    }

    #[test]
    fn missing_or_empty_cluster_id_cannot_inject() {
        assert!(Config::default().token_spec().is_err());
        let c = cfg("apiVersion: v1\nkind: ConfigMap\ndata:\n  clusterID: \"\"\n").unwrap();
        assert!(c
            .token_spec()
            .unwrap_err()
            .0
            .contains("clusterID is required"));
    }
}
