//! The binary as an exec KRM function under the real kpt (`kpt fn eval --exec`,
//! `kpt fn render --allow-exec`).

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-nvcf-worker");

const KPTFILE: &str = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\n";

const DEPLOYMENT: &str = r#"# The worker deployment
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: ns1
  labels:
    nvcf.io/worker: "true"
spec:
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: web # main container
          image: nginx:1.27
"#;

const SERVICE: &str = r#"apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: ns1
spec:
  # route to the pods
  selector:
    app: web
  ports:
    - port: 80
"#;

/// A scratch directory with an isolated HOME for kpt.
struct Sandbox(TempDir);

impl Sandbox {
    fn new() -> Sandbox {
        let s = Sandbox(tempfile::tempdir().unwrap());
        std::fs::create_dir_all(s.home().join(".config")).unwrap();
        s
    }

    fn home(&self) -> PathBuf {
        self.0.path().join("home")
    }

    /// A package: Kptfile (plus `pipeline`), the worker Deployment and a Service.
    fn package(&self, name: &str, pipeline: &str, forged: bool) -> PathBuf {
        let dir = self.0.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("Kptfile"), format!("{KPTFILE}{pipeline}")).unwrap();
        let deployment = if forged {
            DEPLOYMENT.replace(
                "      containers:",
                "      serviceAccountName: nvcf-worker-x\n      containers:",
            )
        } else {
            DEPLOYMENT.to_string()
        };
        std::fs::write(dir.join("deploy.yaml"), deployment).unwrap();
        std::fs::write(dir.join("service.yaml"), SERVICE).unwrap();
        dir
    }

    fn kpt(&self, args: &[&str]) -> Output {
        Command::new("kpt")
            .args(args)
            .current_dir(self.0.path())
            .env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.home().join(".config"))
            .output()
            .unwrap()
    }
}

fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(snapshot(&p));
        } else {
            out.insert(p.clone(), std::fs::read(&p).unwrap());
        }
    }
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(o: &Output) {
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
}

/// What kubectl sends for a file kpt wrote (kubectl's own decoder, the oracle).
fn docs(yaml: &str) -> Vec<serde_json::Value> {
    support::objects(yaml)
}

/// The package holds the injected Deployment with its trio in deploy.yaml, comments
/// kept, the Service untouched and no file added.
fn assert_injected(pkg: &Path) {
    let names: Vec<_> = std::fs::read_dir(pkg)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(
        std::fs::read_to_string(pkg.join("service.yaml")).unwrap(),
        SERVICE
    );
    let deploy = std::fs::read_to_string(pkg.join("deploy.yaml")).unwrap();
    assert!(deploy.starts_with("# The worker deployment\n"), "{deploy}");
    assert!(
        deploy.contains("- name: web # main container\n"),
        "{deploy}"
    );
    assert!(!deploy.contains("config.kubernetes.io"), "{deploy}");
    let d = docs(&deploy);
    let kinds: Vec<_> = d
        .iter()
        .map(|o| {
            (
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap(),
                o["metadata"]["namespace"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("Deployment", "web", "ns1"),
            ("ServiceAccount", "nvcf-worker", "ns1"),
            ("Role", "nvcf-worker", "ns1"),
            ("RoleBinding", "nvcf-worker", "ns1"),
        ]
    );
    let pod = &d[0]["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"].as_str(), Some("nvcf-worker"));
    assert_eq!(pod["automountServiceAccountToken"].as_bool(), Some(false));
    let token = &pod["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"];
    assert_eq!(token["audience"].as_str(), Some("nvcf-icms:c1"));
    assert_eq!(token["expirationSeconds"].as_i64(), Some(900));
    assert_eq!(
        pod["containers"][0]["env"][0]["name"].as_str(),
        Some("NVCF_TOKEN_FILE_PATH")
    );
}

#[test]
fn eval_injects_beside_the_workload_keeps_comments_and_is_idempotent() {
    let s = Sandbox::new();
    let pkg = s.package("pkg", "", false);
    let results = s.0.path().join("results");
    let r = results.to_str().unwrap();
    let out = s.kpt(&[
        "fn",
        "eval",
        "pkg",
        "--exec",
        BIN,
        "--results-dir",
        r,
        "--",
        "clusterID=c1",
    ]);
    ok(&out);
    assert_injected(&pkg);
    // The first injection is a result of its own (issue 25: only updates were),
    // which kpt shows and writes to its results file.
    let said = |results: &Path| -> Vec<serde_json::Value> {
        let file = std::fs::read_to_string(results.join("results.yaml")).unwrap();
        let rl: serde_json::Value = serde_yaml::from_str(&file).unwrap();
        rl["items"][0]["results"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let first_results = said(&results);
    assert!(
        first_results
            .iter()
            .any(|r| r["message"] == "deployment/web injected"
                && r["severity"] == "info"
                && r["resourceRef"]["name"] == "web"),
        "{first_results:?}"
    );
    assert!(
        text(&out.stderr).contains("deployment/web injected"),
        "{}",
        text(&out.stderr)
    );
    let first = snapshot(&pkg);
    std::fs::remove_dir_all(&results).unwrap();
    ok(&s.kpt(&[
        "fn",
        "eval",
        "pkg",
        "--exec",
        BIN,
        "--results-dir",
        r,
        "--",
        "clusterID=c1",
    ]));
    assert_eq!(snapshot(&pkg), first, "second run changed the package");
    assert!(
        !said(&results).iter().any(|r| r["message"]
            .as_str()
            .is_some_and(|m| m.contains("injected"))),
        "nothing injected the second time: {:?}",
        said(&results)
    );
}

#[test]
fn render_pipeline_mutator_gives_the_same_package() {
    let s = Sandbox::new();
    let pipeline = format!(
        "pipeline:\n  mutators:\n    - exec: {BIN}\n      configMap:\n        clusterID: c1\n"
    );
    let pkg = s.package("pkg", &pipeline, false);
    let before = snapshot(&pkg);
    let out = s.kpt(&["fn", "render", "pkg"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--allow-exec"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(snapshot(&pkg), before);

    ok(&s.kpt(&["fn", "render", "pkg", "--allow-exec"]));
    assert_injected(&pkg);
    let evaluated = s.package("evaluated", "", false);
    ok(&s.kpt(&[
        "fn",
        "eval",
        "evaluated",
        "--exec",
        BIN,
        "--",
        "clusterID=c1",
    ]));
    for f in ["deploy.yaml", "service.yaml"] {
        assert_eq!(
            std::fs::read(pkg.join(f)).unwrap(),
            std::fs::read(evaluated.join(f)).unwrap(),
            "{f}"
        );
    }
    let first = snapshot(&pkg);
    ok(&s.kpt(&["fn", "render", "pkg", "--allow-exec"]));
    assert_eq!(snapshot(&pkg), first, "second render changed the package");
}

#[test]
fn missing_cluster_id_fails_and_changes_nothing() {
    let s = Sandbox::new();
    let pkg = s.package("pkg", "", false);
    let before = snapshot(&pkg);
    let out = s.kpt(&["fn", "eval", "pkg", "--exec", BIN]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("clusterID is required"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(snapshot(&pkg), before);
}

#[test]
fn eval_validate_fails_on_forged_and_passes_clean_and_injected() {
    let s = Sandbox::new();
    let forged = s.package("forged", "", true);
    let before = snapshot(&forged);
    let out = s.kpt(&["fn", "eval", "forged", "--exec", BIN, "--", "mode=validate"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("NVW101") && err.contains("nvcf-worker-x"),
        "{err}"
    );
    assert_eq!(snapshot(&forged), before);

    let clean = s.package("clean", "", false);
    let before = snapshot(&clean);
    ok(&s.kpt(&["fn", "eval", "clean", "--exec", BIN, "--", "mode=validate"]));
    assert_eq!(snapshot(&clean), before);

    // What inject produced passes the guard.
    ok(&s.kpt(&["fn", "eval", "clean", "--exec", BIN, "--", "clusterID=c1"]));
    let injected = snapshot(&clean);
    assert_ne!(injected, before);
    ok(&s.kpt(&["fn", "eval", "clean", "--exec", BIN, "--", "mode=validate"]));
    assert_eq!(snapshot(&clean), injected);
}

#[test]
fn render_pipeline_validator_fails_on_forged_and_passes_clean() {
    let s = Sandbox::new();
    let pipeline = format!(
        "pipeline:\n  validators:\n    - exec: {BIN}\n      configMap:\n        mode: validate\n"
    );
    let forged = s.package("forged", &pipeline, true);
    let before = snapshot(&forged);
    let out = s.kpt(&["fn", "render", "forged", "--allow-exec"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("NVW101") && err.contains("nvcf-worker-x"),
        "{err}"
    );
    assert_eq!(snapshot(&forged), before);

    let clean = s.package("clean", &pipeline, false);
    let before = snapshot(&clean);
    ok(&s.kpt(&["fn", "render", "clean", "--allow-exec"]));
    assert_eq!(snapshot(&clean), before);
}

#[test]
fn eval_with_the_typed_example_config() {
    let s = Sandbox::new();
    let pkg = s.package("pkg", "", false);
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("fn-config/worker-identity.yaml");
    ok(&s.kpt(&[
        "fn",
        "eval",
        "pkg",
        "--exec",
        BIN,
        "--fn-config",
        config.to_str().unwrap(),
    ]));
    let d = docs(&std::fs::read_to_string(pkg.join("deploy.yaml")).unwrap());
    let token = &d[0]["spec"]["template"]["spec"]["volumes"][0]["projected"]["sources"][0]
        ["serviceAccountToken"];
    assert_eq!(token["audience"].as_str(), Some("nvcf-icms:prod-1"));
    assert_eq!(token["expirationSeconds"].as_i64(), Some(3600));
    assert_eq!(d.len(), 4);
}

#[test]
fn v1beta1_resource_list_is_answered_in_v1beta1() {
    let input = format!(
        "apiVersion: config.kubernetes.io/v1beta1\nkind: ResourceList\nitems:\n{}functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: fn\n  data:\n    clusterID: c1\n",
        DEPLOYMENT
            .lines()
            .skip(1)
            .enumerate()
            .map(|(i, l)| format!("{}{l}\n", if i == 0 { "- " } else { "  " }))
            .collect::<String>()
    );
    let out = support::pipe(&mut Command::new(BIN), input.as_bytes());
    ok(&out);
    let list: serde_yaml::Value = serde_yaml::from_slice(&out.stdout).unwrap();
    assert_eq!(
        list["apiVersion"].as_str(),
        Some("config.kubernetes.io/v1beta1")
    );
    assert_eq!(list["kind"].as_str(), Some("ResourceList"));
    let kinds: Vec<_> = list["items"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["ServiceAccount", "Role", "RoleBinding", "Deployment"]
    );
    assert_eq!(
        list["items"][3]["spec"]["template"]["spec"]["serviceAccountName"].as_str(),
        Some("nvcf-worker")
    );
}
