//! Pod specs generated around the worker token surface: accounts and automount
//! (well and ill typed), volumes of every kind beside the contract's (other
//! `serviceAccountToken` projections, the API token volume, look-alike token
//! volumes), mounts at paths that do and do not reach the token directory
//! (absolute, relative, `.`/`..` segments, trailing slashes, `subPath`, above and
//! below it), the contract's env right and wrong (`valueFrom`, twice), `envFrom`,
//! skip annotations, init and ephemeral containers, and the record.
//!
//! Every spec is one a kube-apiserver accepts as a Deployment (mounts name
//! declared volumes, mount paths unique per container, container names unique),
//! so the live differential compares admission verdicts, not validation errors;
//! the offline property test uses the same generator.

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use kubectl_nvcf_worker::identity as id;

/// Mount paths around the token directory; the ones with `..` are those CEL
/// cannot resolve.
pub const PATHS: &[&str] = &[
    "/var/run/secrets/tokens",
    "var/run/secrets/tokens",
    "/var/run/secrets/tokens/",
    "/var/run/secrets//tokens/.",
    "./var/run/secrets/tokens",
    "/var/run/secrets/./tokens",
    "/var/run/secrets/tokens/x",
    "var/run/secrets/tokens/token",
    "/var/run/secrets/tokens/x/..",
    "/var/run/secrets/tokens/../tokens",
    "/var/run/secrets",
    "/var/run",
    "/var/run/secrets/tokens2",
    "/.var/run/secrets/tokens",
    "/data",
    "data/x",
    "/data/..cache",
    "/data/../var/run/secrets/tokens",
    "/data/..",
    "/cache...",
];

/// One mount: volume (index into the spec's volumes), path, readOnly, subPath.
#[derive(Clone, Debug)]
pub struct MountSpec {
    pub volume: usize,
    pub path: usize,
    pub read_only: Option<bool>,
    pub sub_path: bool,
}

#[derive(Clone, Debug)]
pub struct ContainerSpec {
    pub mounts: Vec<MountSpec>,
    /// Indexes into `ENV`.
    pub env: Vec<usize>,
    pub env_from: bool,
    /// Injected as the contract has it (mount and env), before the rest.
    pub contract: bool,
}

/// Env entries: the contract's right, wrong, from elsewhere, and another.
pub fn env_entry(i: usize) -> Value {
    let [(file, file_v), (source, source_v)] = id::env_vars();
    match i {
        0 => json!({"name": file, "value": file_v}),
        1 => json!({"name": source, "value": source_v}),
        2 => json!({"name": source, "value": "bootstrap"}),
        3 => {
            json!({"name": file, "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "path"}}})
        }
        _ => json!({"name": "APP_MODE", "value": "serve"}),
    }
}
pub const ENV: usize = 5;

/// The volumes a spec may declare.
pub fn volume(kind: usize, audience: &str) -> Value {
    let token = |name: &str, aud: &str, exp: i64| json!({"name": name, "projected": {"sources": [{"serviceAccountToken": {"audience": aud, "expirationSeconds": exp, "path": "token"}}]}});
    match kind {
        0 => json!({"name": "data", "emptyDir": {}}),
        1 => json!({"name": "cfg", "configMap": {"name": "cfg"}}),
        2 => token(id::TOKEN_VOLUME, audience, 900),
        3 => token(id::TOKEN_VOLUME, audience, 100_000),
        4 => token("vault-token", "vault", 3600),
        5 => token(
            "kube-api-access-abcde",
            "https://kubernetes.default.svc",
            3607,
        ),
        _ => {
            json!({"name": "both", "projected": {"sources": [{"configMap": {"name": "cfg"}}, {"serviceAccountToken": {"audience": audience, "expirationSeconds": 900, "path": "t"}}]}})
        }
    }
}
pub const VOLUMES: usize = 7;

#[derive(Clone, Debug)]
pub struct PodSpec {
    /// serviceAccountName: none, "app", "default", null, the worker, a number.
    pub account: usize,
    /// automountServiceAccountToken: none, true, false, null, "true".
    pub automount: usize,
    /// Kinds of `volume`, deduplicated by name.
    pub volumes: Vec<usize>,
    pub containers: Vec<ContainerSpec>,
    pub init: Vec<ContainerSpec>,
    pub ephemeral: bool,
    /// Container names in `nvcf.io/skip-containers` (indexes, init after main).
    pub skip: Vec<usize>,
    /// A hand-written `nvcf.io/replaced`.
    pub record: Option<usize>,
    pub include_init: bool,
}

/// Paths in `PATHS` that stay clear of the token directory (above it, beside
/// it, or `..` inside a name), drawn more often so that inject accepts a good
/// share of the specs.
pub const CLEAR: [usize; 8] = [10, 11, 12, 13, 14, 15, 16, 19];

fn mount() -> impl Strategy<Value = MountSpec> {
    (
        0..8usize,
        prop_oneof![3 => prop::sample::select(&CLEAR[..]), 2 => 0..PATHS.len()],
        prop_oneof![Just(None), Just(Some(true)), Just(Some(false))],
        prop::bool::weighted(0.1),
    )
        .prop_map(|(volume, path, read_only, sub_path)| MountSpec {
            volume,
            path,
            read_only,
            sub_path,
        })
}

fn container() -> impl Strategy<Value = ContainerSpec> {
    (
        prop::collection::vec(mount(), 0..3),
        // The other env more often: most of the contract's is a conflict.
        prop::collection::vec(prop_oneof![2 => Just(ENV - 1), 1 => 0..ENV], 0..3),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(mounts, env, env_from, contract)| ContainerSpec {
            mounts,
            env,
            env_from,
            contract,
        })
}

pub fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (
        (
            prop_oneof![4 => 0..5usize, 1 => 0..6usize],
            prop_oneof![4 => 0..4usize, 1 => 0..5usize],
        ),
        // Plain volumes more often than token projections.
        prop::collection::vec(prop_oneof![3 => 0..2usize, 2 => 0..VOLUMES], 0..4),
        prop::collection::vec(container(), 1..3),
        prop::collection::vec(container(), 0..2),
        prop::bool::weighted(0.05),
        prop::collection::vec(0..4usize, 0..2),
        prop::option::weighted(0.1, 0..4usize),
        any::<bool>(),
    )
        .prop_map(
            |(
                (account, automount),
                volumes,
                containers,
                init,
                ephemeral,
                skip,
                record,
                include_init,
            )| PodSpec {
                account,
                automount,
                volumes,
                containers,
                init,
                ephemeral,
                skip,
                record,
                include_init,
            },
        )
}

impl PodSpec {
    fn container_name(i: usize) -> String {
        format!("c{i}")
    }

    fn container_json(&self, c: &ContainerSpec, i: usize, volumes: &[Value]) -> Value {
        let mut o = Map::new();
        o.insert("name".into(), Self::container_name(i).into());
        o.insert("image".into(), "registry.k8s.io/pause:3.10".into());
        let mut mounts: Vec<Value> = Vec::new();
        let mut paths: Vec<&str> = Vec::new();
        let mut env: Vec<Value> = Vec::new();
        if c.contract {
            mounts.push(id::token_mount());
            paths.push(id::TOKEN_MOUNT_PATH);
            env.extend(id::env_vars().iter().map(|(n, v)| id::env_var(n, v)));
        }
        for m in &c.mounts {
            let (Some(v), path) = (volumes.get(m.volume % volumes.len().max(1)), PATHS[m.path])
            else {
                continue;
            };
            if paths.contains(&path) {
                continue; // the API server refuses a mount path twice
            }
            paths.push(path);
            let mut mo = Map::new();
            mo.insert("name".into(), v["name"].clone());
            mo.insert("mountPath".into(), path.into());
            if let Some(r) = m.read_only {
                mo.insert("readOnly".into(), r.into());
            }
            if m.sub_path {
                mo.insert("subPath".into(), "token".into());
            }
            mounts.push(Value::Object(mo));
        }
        // A name twice is kept twice: Kubernetes takes the last.
        env.extend(c.env.iter().map(|&e| env_entry(e)));
        if !mounts.is_empty() {
            o.insert("volumeMounts".into(), mounts.into());
        }
        if !env.is_empty() {
            o.insert("env".into(), env.into());
        }
        if c.env_from {
            o.insert("envFrom".into(), json!([{"configMapRef": {"name": "cfg"}}]));
        }
        Value::Object(o)
    }

    /// The pod spec and the pod template's annotations, as JSON.
    pub fn spec_json(&self, audience: &str) -> (Value, Map<String, Value>) {
        let mut volumes: Vec<Value> = Vec::new();
        for &k in &self.volumes {
            let v = volume(k, audience);
            if !volumes.iter().any(|x| x["name"] == v["name"]) {
                volumes.push(v);
            }
        }
        if self.containers.iter().chain(&self.init).any(|c| c.contract)
            && !volumes.iter().any(|v| v["name"] == id::TOKEN_VOLUME)
        {
            volumes.push(volume(2, audience));
        }
        let mut s = Map::new();
        match self.account {
            1 => drop(s.insert("serviceAccountName".into(), "app".into())),
            2 => drop(s.insert("serviceAccountName".into(), "default".into())),
            3 => drop(s.insert("serviceAccountName".into(), Value::Null)),
            4 => drop(s.insert("serviceAccountName".into(), id::WORKER_NAME.into())),
            5 => drop(s.insert("serviceAccountName".into(), 7.into())),
            _ => {}
        }
        match self.automount {
            1 => drop(s.insert("automountServiceAccountToken".into(), true.into())),
            2 => drop(s.insert("automountServiceAccountToken".into(), false.into())),
            3 => drop(s.insert("automountServiceAccountToken".into(), Value::Null)),
            4 => drop(s.insert("automountServiceAccountToken".into(), "true".into())),
            _ => {}
        }
        let n = self.containers.len();
        let cs: Vec<Value> = (self.containers.iter().enumerate())
            .map(|(i, c)| self.container_json(c, i, &volumes))
            .collect();
        s.insert("containers".into(), cs.into());
        if !self.init.is_empty() {
            let cs: Vec<Value> = (self.init.iter().enumerate())
                .map(|(i, c)| self.container_json(c, n + i, &volumes))
                .collect();
            s.insert("initContainers".into(), cs.into());
        }
        if self.ephemeral {
            s.insert(
                "ephemeralContainers".into(),
                json!([{"name": "debug", "image": "registry.k8s.io/pause:3.10"}]),
            );
        }
        if !volumes.is_empty() {
            s.insert("volumes".into(), volumes.into());
        }
        let mut ann = Map::new();
        if !self.skip.is_empty() {
            let names: Vec<String> = self.skip.iter().map(|&i| Self::container_name(i)).collect();
            ann.insert(
                id::SKIP_CONTAINERS_ANNOTATION.into(),
                names.join(",").into(),
            );
        }
        (Value::Object(s), ann)
    }

    /// A hand-written record, or none.
    pub fn record(&self) -> Option<String> {
        let [(_, _), (source, _)] = id::env_vars();
        Some(match self.record? {
            0 => json!({"serviceAccountName": "app"}).to_string(),
            1 => json!({"automountServiceAccountToken": "true"}).to_string(),
            2 => json!({"env": {"c0": [source]}}).to_string(),
            _ => json!({"serviceAccountName": id::WORKER_NAME}).to_string(),
        })
    }

    /// A Deployment `name` selected for the identity (the pod template carries
    /// `nvcf.io/worker: "true"`), skip annotation on the workload.
    pub fn deployment(&self, name: &str, audience: &str) -> Value {
        let (spec, ann) = self.spec_json(audience);
        let mut meta = json!({"name": name});
        let mut ann = ann;
        if let Some(r) = self.record() {
            ann.insert(id::REPLACED_ANNOTATION.into(), r.into());
        }
        if !ann.is_empty() {
            meta["annotations"] = Value::Object(ann);
        }
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name, id::WORKER_LABEL: "true"}},
                    "spec": spec,
                },
            },
        })
    }
}
