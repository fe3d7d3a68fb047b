//! The fn-config examples parse and do what they say, and the JSON Schema of the
//! typed kind agrees with the parser.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kubectl_nvcf_worker::config::{self, Config, ConfigError, Mode};
use kubectl_nvcf_worker::identity::Naming;
use kubectl_nvcf_worker::manifest::parse_stream;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-nvcf-worker");

const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    nvcf.io/worker: "true"
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      initContainers:
        - name: init
          image: busybox
      containers:
        - name: web
          image: nginx
"#;

fn fn_config(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fn-config")
        .join(name)
}

fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fn_config(""))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

fn yaml(path: &Path) -> serde_yaml::Value {
    serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    let docs = parse_stream(text.as_bytes()).unwrap();
    Config::from_node(Some(docs[0].view()))
}

/// A typed config with `spec` (JSON is YAML).
fn typed(spec: Value) -> Result<Config, ConfigError> {
    parse(
        &json!({"apiVersion": config::API_VERSION, "kind": config::KIND, "spec": spec}).to_string(),
    )
}

fn run(args: &[&str], stdin: &str) -> Output {
    support::pipe(Command::new(BIN).args(args), stdin.as_bytes())
}

#[test]
fn every_example_parses() {
    let files = examples();
    let names: Vec<_> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap())
        .collect();
    for want in ["configmap.yaml", "validate.yaml", "worker-identity.yaml"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        parse(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }
}

#[test]
fn inject_examples_inject_their_audience_and_expiration() {
    for (file, expiration) in [("worker-identity.yaml", 3600), ("configmap.yaml", 1800)] {
        let path = fn_config(file);
        let cfg = yaml(&path);
        let settings = cfg.get("spec").or(cfg.get("data")).unwrap();
        let audience = settings["audience"].as_str().unwrap();
        let out = run(
            &["inject", "--config", path.to_str().unwrap(), "-f", "-"],
            DEPLOYMENT,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{file}: {stderr}");
        let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_slice(&out.stdout)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect();
        assert_eq!(docs.len(), 4, "{file}: its trio, then the deployment");
        let pod = &docs[3]["spec"]["template"]["spec"];
        let token = &pod["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"];
        assert_eq!(token["audience"].as_str(), Some(audience), "{file}");
        assert_eq!(
            token["expirationSeconds"].as_i64(),
            Some(expiration),
            "{file}"
        );
        // Both examples say naming: per-namespace, the default.
        assert_eq!(settings["naming"].as_str(), Some("per-namespace"), "{file}");
        assert_eq!(
            pod["serviceAccountName"].as_str(),
            Some("nvcf-worker"),
            "{file}"
        );
        assert_eq!(
            docs[0]["metadata"]["name"].as_str(),
            Some("nvcf-worker"),
            "{file}"
        );
        // --naming overrides the file's naming, as every flag overrides its key.
        let out = run(
            &[
                "inject",
                "--config",
                path.to_str().unwrap(),
                "--naming",
                "per-workload",
                "-f",
                "-",
            ],
            DEPLOYMENT,
        );
        assert!(
            out.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let over: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_slice(&out.stdout)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect();
        assert_eq!(
            over[3]["spec"]["template"]["spec"]["serviceAccountName"].as_str(),
            Some("nvcf-worker-web"),
            "{file}"
        );
        // includeInitContainers: false in both examples
        assert!(pod["initContainers"][0].get("env").is_none(), "{file}");
        assert!(pod["containers"][0].get("env").is_some(), "{file}");
    }
}

#[test]
fn validate_example_guards_without_changing() {
    let guard = std::fs::read_to_string(fn_config("validate.yaml")).unwrap();
    assert_eq!(parse(&guard).unwrap().mode, Mode::Validate);
    let function_config: Value = serde_yaml::from_str(&guard).unwrap();
    let list = |deployment: &str| {
        let item: Value = serde_yaml::from_str(deployment).unwrap();
        json!({
            "apiVersion": "config.kubernetes.io/v1",
            "kind": "ResourceList",
            "items": [item],
            "functionConfig": function_config,
        })
    };
    let clean = list(DEPLOYMENT);
    let out = run(&[], &clean.to_string());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let echoed: Value = serde_yaml::from_slice(&out.stdout).unwrap();
    assert_eq!(echoed["items"], clean["items"], "validate changes nothing");

    let forged = DEPLOYMENT.replace(
        "      containers:",
        "      serviceAccountName: nvcf-worker-x\n      containers:",
    );
    let out = run(&[], &list(&forged).to_string());
    assert_eq!(out.status.code(), Some(1));
    let results: Value = serde_yaml::from_slice(&out.stdout).unwrap();
    let results = results["results"].as_array().unwrap();
    assert!(
        results.iter().any(|r| r["message"]
            .as_str()
            .is_some_and(|m| m.contains("NVW101") && m.contains("nvcf-worker-x"))),
        "{results:?}"
    );
}

fn schema() -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(fn_config("worker-identity.schema.json")).unwrap(),
    )
    .unwrap()
}

#[test]
fn schema_is_closed_and_names_the_kind() {
    let s = schema();
    assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(s["properties"]["apiVersion"]["const"], config::API_VERSION);
    assert_eq!(s["properties"]["kind"]["const"], config::KIND);
    for at in ["", "/$defs/spec", "/$defs/selector", "/$defs/requirement"] {
        assert_eq!(
            s.pointer(at).unwrap()["additionalProperties"],
            false,
            "{at}"
        );
    }
    // A top-level key other than the schema's is rejected by the parser too.
    let top: Vec<&str> = s["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(top, ["apiVersion", "kind", "metadata", "spec"]);
    let e = parse("apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nclusterID: c1\n");
    assert!(e.unwrap_err().0.contains("clusterID"));
    let e = parse("apiVersion: fn.nvcf.io/v1\nkind: WorkerIdentity\n");
    assert!(e.unwrap_err().0.contains("apiVersion"));
}

#[test]
fn schema_spec_properties_are_exactly_the_parser_keys() {
    let s = schema();
    let props = s["$defs"]["spec"]["properties"].as_object().unwrap();
    // The typed example sets every property; each alone parses, and a
    // differently-spelled key (what additionalProperties: false forbids) does not.
    let example = yaml(&fn_config("worker-identity.yaml"));
    let example: Value = serde_json::to_value(&example["spec"]).unwrap();
    let example = example.as_object().unwrap();
    assert_eq!(
        props.keys().collect::<Vec<_>>(),
        example.keys().collect::<Vec<_>>()
    );
    for (key, value) in example {
        typed(json!({ key: value })).unwrap_or_else(|e| panic!("{key}: {e}"));
        let wrong = key.to_lowercase() + "s";
        let e = typed(json!({ wrong.clone(): value })).unwrap_err();
        assert!(e.0.contains(&wrong), "{e}");
    }
    // Defaults in the schema are the parser's defaults.
    let d = Config::default();
    assert_eq!(props["expirationSeconds"]["default"], d.expiration_seconds);
    assert_eq!(props["tokenSource"]["default"], d.token_source.as_str());
    assert_eq!(
        props["includeInitContainers"]["default"],
        d.include_init_containers
    );
    assert_eq!(props["prune"]["default"], d.prune);
    assert_eq!(props["mode"]["default"], "inject");
    assert_eq!(d.mode, Mode::Inject);
    assert_eq!(props["naming"]["default"], d.naming.as_str());
    assert_eq!(d.naming, Naming::PerNamespace);
    // Types: a string where the schema says integer or boolean is rejected.
    assert!(typed(json!({"expirationSeconds": "3600"})).is_err());
    assert!(typed(json!({"includeInitContainers": "yes"})).is_err());
    assert!(typed(json!({"prune": "true"})).is_err());
    assert!(typed(json!({"clusterID": 7})).is_err());
}

#[test]
fn schema_bounds_and_enums_match_the_parser() {
    let s = schema();
    let exp = &s["$defs"]["spec"]["properties"]["expirationSeconds"];
    let (min, max) = (
        exp["minimum"].as_i64().unwrap(),
        exp["maximum"].as_i64().unwrap(),
    );
    assert_eq!((min, max), (600, 86400));
    for ok in [min, max] {
        assert_eq!(
            typed(json!({"expirationSeconds": ok}))
                .unwrap()
                .expiration_seconds,
            ok
        );
    }
    for bad in [min - 1, max + 1] {
        let e = typed(json!({"expirationSeconds": bad})).unwrap_err();
        assert!(e.0.contains("600..86400"), "{e}");
    }

    let modes = s["$defs"]["spec"]["properties"]["mode"]["enum"].clone();
    assert_eq!(modes, json!(["inject", "validate", "uninject"]));
    assert_eq!(
        typed(json!({"mode": "uninject"})).unwrap().mode,
        Mode::Uninject
    );
    assert_eq!(typed(json!({"mode": "inject"})).unwrap().mode, Mode::Inject);
    assert_eq!(
        typed(json!({"mode": "validate"})).unwrap().mode,
        Mode::Validate
    );
    assert!(typed(json!({"mode": "audit"})).is_err());

    // naming: the schema's enum is the parser's and the CLI's --naming values.
    let namings = s["$defs"]["spec"]["properties"]["naming"]["enum"].clone();
    let values: Vec<&str> = <Naming as clap::ValueEnum>::value_variants()
        .iter()
        .map(|n| n.as_str())
        .collect();
    assert_eq!(namings, json!(values));
    for n in <Naming as clap::ValueEnum>::value_variants() {
        assert_eq!(typed(json!({"naming": n.as_str()})).unwrap().naming, *n);
        let cli = clap::ValueEnum::to_possible_value(n).unwrap();
        assert_eq!(cli.get_name(), n.as_str());
    }
    assert!(typed(json!({"naming": "per-pod"})).is_err());

    let req = &s["$defs"]["requirement"];
    let ops = req["properties"]["operator"]["enum"].as_array().unwrap();
    let needs_values = &req["allOf"][0]["if"]["properties"]["operator"]["enum"];
    assert_eq!(*needs_values, json!(["In", "NotIn"]));
    let expr = |op: &str, values: Value| {
        typed(
            json!({"selector": {"matchExpressions": [{"key": "k", "operator": op, "values": values}]}}),
        )
    };
    assert_eq!(ops.len(), 4);
    for op in ops.iter().map(|o| o.as_str().unwrap()) {
        let with_values = needs_values.as_array().unwrap().contains(&json!(op));
        assert_eq!(expr(op, json!(["a"])).is_ok(), with_values, "{op} [a]");
        assert_eq!(expr(op, json!([])).is_ok(), !with_values, "{op} []");
    }
    assert!(expr("Equals", json!(["a"])).is_err());
    assert!(typed(json!({"selector": {"matchLabels": {"a": 1}}})).is_err());
    assert!(typed(json!({"selector": {"matchLabel": {"a": "b"}}})).is_err());
    assert!(typed(
        json!({"selector": {"matchExpressions": [{"key": "k", "operator": "Exists", "value": []}]}})
    )
    .is_err());
}
