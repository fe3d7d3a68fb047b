//! The binary as kustomize's legacy exec plugin under the real
//! `kubectl kustomize --enable-alpha-plugins`, installed by `install-kustomize-plugin`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_yaml::Value;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-nvcf-worker");

const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
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
        - name: web
          image: nginx:1.27
"#;

const SERVICE: &str = r#"apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector:
    app: web
  ports:
    - port: 80
"#;

const WORKER: &str = "apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nmetadata:\n  name: worker\nspec:\n  clusterID: c1\n  expirationSeconds: 3600\n";
/// The transformer with the per-workload contract (`nvcf-worker-<name>`, marked for its workload).
const WORKER_PER_WORKLOAD: &str = "apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nmetadata:\n  name: worker\nspec:\n  clusterID: c1\n  expirationSeconds: 3600\n  naming: per-workload\n";
const GUARD: &str = "apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nmetadata:\n  name: guard\nspec:\n  mode: validate\n";

/// A scratch directory whose XDG_CONFIG_HOME holds the installed plugin.
struct Sandbox(TempDir);

impl Sandbox {
    fn new() -> Sandbox {
        let s = Sandbox(tempfile::tempdir().unwrap());
        let root = s.config_home().join("kustomize/plugin");
        let out = Command::new(BIN)
            .args(["install-kustomize-plugin", "--plugin-root"])
            .arg(&root)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let link = root.join("fn.nvcf.io/v1alpha1/workeridentity/WorkerIdentity");
        assert_eq!(
            std::fs::canonicalize(link).unwrap(),
            std::fs::canonicalize(BIN).unwrap()
        );
        s
    }

    fn config_home(&self) -> PathBuf {
        self.0.path().join("home/.config")
    }

    /// A kustomization directory with `files` (name, content).
    fn dir(&self, name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = self.0.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        for (f, content) in files {
            std::fs::write(dir.join(f), content).unwrap();
        }
        dir
    }

    fn build(&self, dir: &Path) -> Output {
        Command::new("kubectl")
            .args(["kustomize", "--enable-alpha-plugins"])
            .arg(dir)
            .env("HOME", self.0.path().join("home"))
            .env("XDG_CONFIG_HOME", self.config_home())
            .output()
            .unwrap()
    }

    /// Builds `dir`, expecting success; the objects by `Kind/name`.
    fn objects(&self, dir: &Path) -> Vec<(String, Value)> {
        let out = self.build(dir);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_yaml::Deserializer::from_slice(&out.stdout)
            .map(|d| {
                let v: Value = serde::Deserialize::deserialize(d).unwrap();
                let id = format!(
                    "{}/{}",
                    v["kind"].as_str().unwrap(),
                    v["metadata"]["name"].as_str().unwrap()
                );
                (id, v)
            })
            .collect()
    }
}

fn get<'a>(objects: &'a [(String, Value)], id: &str) -> &'a Value {
    &objects
        .iter()
        .find(|(i, _)| i == id)
        .unwrap_or_else(|| panic!("{id} not in the build"))
        .1
}

fn app(kustomization: &str) -> Vec<(&'static str, String)> {
    vec![
        ("deploy.yaml", DEPLOYMENT.to_string()),
        ("service.yaml", SERVICE.to_string()),
        ("worker.yaml", WORKER.to_string()),
        ("guard.yaml", GUARD.to_string()),
        ("kustomization.yaml", kustomization.to_string()),
    ]
}

fn files<'a>(v: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    v.iter().map(|(n, c)| (*n, c.as_str())).collect()
}

/// The default contract's trio: the namespace's one nvcf-worker.
const TRIO: [&str; 3] = [
    "ServiceAccount/nvcf-worker",
    "Role/nvcf-worker",
    "RoleBinding/nvcf-worker",
];

#[test]
fn transformer_injects_and_adds_the_trio() {
    let s = Sandbox::new();
    let a = app("resources: [deploy.yaml, service.yaml]\ntransformers: [worker.yaml]\n");
    let dir = s.dir("app", &files(&a));
    let objects = s.objects(&dir);
    let mut ids: Vec<_> = objects.iter().map(|(i, _)| i.as_str()).collect();
    ids.sort();
    let mut want = vec!["Deployment/web", "Service/web"];
    want.extend(TRIO);
    want.sort();
    assert_eq!(ids, want);

    let pod = &get(&objects, "Deployment/web")["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"].as_str(), Some("nvcf-worker"));
    assert_eq!(pod["automountServiceAccountToken"].as_bool(), Some(false));
    let token = &pod["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"];
    assert_eq!(token["audience"].as_str(), Some("nvcf-icms:c1"));
    assert_eq!(token["expirationSeconds"].as_i64(), Some(3600));
    assert_eq!(
        pod["containers"][0]["volumeMounts"][0]["mountPath"].as_str(),
        Some("/var/run/secrets/tokens")
    );
    let service: Value = serde_yaml::from_str(SERVICE).unwrap();
    assert_eq!(get(&objects, "Service/web"), &service);
    let sa = get(&objects, "ServiceAccount/nvcf-worker");
    assert_eq!(sa["automountServiceAccountToken"].as_bool(), Some(false));
    assert_eq!(
        get(&objects, "Role/nvcf-worker")["rules"],
        Value::Sequence(vec![])
    );
}

#[test]
fn kustomization_namespace_reaches_the_trio_and_the_binding_subject() {
    let s = Sandbox::new();
    // kustomize runs its namespace transformer before `transformers:`, so the plugin
    // already sees the namespace and generates the trio in it.
    let a = app(
        "namespace: prod\nresources: [deploy.yaml, service.yaml]\ntransformers: [worker.yaml]\n",
    );
    let same = s.dir("same", &files(&a));
    // An overlay setting the namespace over a base that injected in ns1: kustomize
    // moves the trio and rewrites the subject namespace too.
    let mut b = app("resources: [deploy.yaml, service.yaml]\ntransformers: [worker.yaml]\n");
    b[0].1 = DEPLOYMENT.replace(
        "  name: web\n  labels:",
        "  name: web\n  namespace: ns1\n  labels:",
    );
    let base = s.dir("base", &files(&b));
    let overlay = s.dir(
        "overlay",
        &[(
            "kustomization.yaml",
            "resources: [../base]\nnamespace: prod\n",
        )],
    );
    let base_objects = s.objects(&base);
    assert_eq!(
        get(&base_objects, "RoleBinding/nvcf-worker")["subjects"][0]["namespace"].as_str(),
        Some("ns1")
    );
    for dir in [same, overlay] {
        let objects = s.objects(&dir);
        assert_eq!(objects.len(), 5);
        for (id, o) in &objects {
            assert_eq!(o["metadata"]["namespace"].as_str(), Some("prod"), "{id}");
        }
        let binding = get(&objects, "RoleBinding/nvcf-worker");
        assert_eq!(
            binding["subjects"],
            serde_yaml::from_str::<Value>(
                "[{kind: ServiceAccount, name: nvcf-worker, namespace: prod}]"
            )
            .unwrap(),
            "{}",
            dir.display()
        );
    }
}

#[test]
fn validator_passes_clean_and_injected_and_fails_forged() {
    let s = Sandbox::new();
    let clean = app("resources: [deploy.yaml, service.yaml]\nvalidators: [guard.yaml]\n");
    let objects = s.objects(&s.dir("clean", &files(&clean)));
    let deployment: Value = serde_yaml::from_str(DEPLOYMENT).unwrap();
    assert_eq!(get(&objects, "Deployment/web"), &deployment);
    assert_eq!(objects.len(), 2);

    let injected = app(
        "resources: [deploy.yaml, service.yaml]\ntransformers: [worker.yaml]\nvalidators: [guard.yaml]\n",
    );
    assert_eq!(s.objects(&s.dir("injected", &files(&injected))).len(), 5);

    let mut forged = clean.clone();
    forged[0].1 = DEPLOYMENT.replace(
        "      containers:",
        "      serviceAccountName: nvcf-worker-x\n      containers:",
    );
    let out = s.build(&s.dir("forged", &files(&forged)));
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("NVW101") && err.contains("\"nvcf-worker-x\""),
        "{err}"
    );
}

/// The transformer in a base and `namePrefix` in an overlay: kustomize renames the
/// identity and the account, the trio still names `Deployment/web`. ICMS would not
/// accept the pod; validate and the validator say so and how to fix it. The
/// transformer in the overlay that sets the final names passes.
#[test]
fn renamed_by_a_later_kustomization_is_an_error_with_the_fix() {
    let s = Sandbox::new();
    let mut base = app("resources: [deploy.yaml, service.yaml]\ntransformers: [worker.yaml]\n");
    // Per workload: the trio is marked for Deployment/web, the name a rename breaks.
    base[2].1 = WORKER_PER_WORKLOAD.to_string();
    s.dir("base", &files(&base));
    let overlay = s.dir(
        "overlay",
        &[(
            "kustomization.yaml",
            "resources: [../base]\nnamePrefix: prod-\n",
        )],
    );
    let objects = s.objects(&overlay);
    let pod = &get(&objects, "Deployment/prod-web")["spec"]["template"]["spec"];
    assert_eq!(
        pod["serviceAccountName"].as_str(),
        Some("prod-nvcf-worker-web")
    );
    let sa = get(&objects, "ServiceAccount/prod-nvcf-worker-web");
    assert_eq!(
        sa["metadata"]["annotations"]["nvcf.io/workload"].as_str(),
        Some("Deployment/web")
    );
    // validate on the build.
    let built = s.build(&overlay);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("built.yaml");
    std::fs::write(&file, &built.stdout).unwrap();
    let v = Command::new(BIN)
        .arg("validate")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(v.status.code(), Some(1), "{v:?}");
    let report = String::from_utf8_lossy(&v.stdout);
    let renamed: Vec<&str> = report
        .lines()
        .filter(|l| l.contains("error NVW112"))
        .collect();
    assert_eq!(
        renamed.len(),
        4,
        "the workload and the three trio objects\n{report}"
    );
    assert!(
        report.contains("Deployment/prod-web spec.template.spec.serviceAccountName"),
        "{report}"
    );
    assert!(
        report.contains(
            "is marked as the identity of Deployment/web, which is named \"nvcf-worker-web\""
        ),
        "{report}"
    );
    assert!(
        report.contains("run the transformer in the overlay that sets the final names"),
        "{report}"
    );
    // The guard as the overlay's validator refuses the build.
    let guarded = s.dir(
        "guarded",
        &[
            (
                "kustomization.yaml",
                "resources: [../base]\nnamePrefix: prod-\nvalidators: [guard.yaml]\n",
            ),
            ("guard.yaml", GUARD),
        ],
    );
    let out = s.build(&guarded);
    assert!(!out.status.success());
    // What the validator reports is what validate reports on the final build:
    // the four NVW112, with resource and field, and no echo of kustomize's rename
    // in progress (a pod or binding still naming the account by its old name is
    // not in the output) nor a line of kustomize's temporary stream (issue 25).
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said = |text: &str| -> Vec<String> {
        let mut v: Vec<String> = text
            .lines()
            .filter_map(|l| {
                l.split_once("error NVW")
                    .map(|(_, rest)| format!("NVW{rest}"))
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        said(&stderr),
        said(&report),
        "validator:\n{stderr}\nvalidate:\n{report}"
    );
    assert!(
        !stderr.contains("NVW101") && !stderr.contains("NVW102"),
        "{stderr}"
    );
    assert!(!stderr.contains("<stdin>"), "{stderr}");
    // Look-alikes under the same layout: a forged account the rename does not
    // explain is still refused; a renamed build with no identity passes.
    let forged = app("resources: [deploy.yaml, service.yaml]\n");
    let mut forged = forged;
    forged[0].1 = DEPLOYMENT.replace(
        "      containers:",
        "      serviceAccountName: nvcf-worker-x\n      containers:",
    );
    s.dir("forged-base", &files(&forged));
    let out = s.build(&s.dir(
        "forged-guarded",
        &[
            (
                "kustomization.yaml",
                "resources: [../forged-base]\nnamePrefix: prod-\nvalidators: [guard.yaml]\n",
            ),
            ("guard.yaml", GUARD),
        ],
    ));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("NVW101") && stderr.contains("\"nvcf-worker-x\""),
        "{stderr}"
    );
    let clean = app("resources: [deploy.yaml, service.yaml]\n");
    s.dir("clean-base", &files(&clean));
    let out = s.build(&s.dir(
        "clean-guarded",
        &[
            (
                "kustomization.yaml",
                "resources: [../clean-base]\nnamePrefix: prod-\nvalidators: [guard.yaml]\n",
            ),
            ("guard.yaml", GUARD),
        ],
    ));
    assert!(out.status.success(), "{out:?}");
    // The right layout: the base without the transformer, the overlay renames and
    // then injects (kustomize runs namePrefix before `transformers:`).
    let plain = app("resources: [deploy.yaml, service.yaml]\n");
    s.dir("plain", &files(&plain));
    let right = s.dir(
        "right",
        &[
            (
                "kustomization.yaml",
                "resources: [../plain]\nnamePrefix: prod-\ntransformers: [worker.yaml]\nvalidators: [guard.yaml]\n",
            ),
            ("worker.yaml", WORKER_PER_WORKLOAD),
            ("guard.yaml", GUARD),
        ],
    );
    let objects = s.objects(&right);
    let pod = &get(&objects, "Deployment/prod-web")["spec"]["template"]["spec"];
    assert_eq!(
        pod["serviceAccountName"].as_str(),
        Some("nvcf-worker-prod-web")
    );
    get(&objects, "ServiceAccount/nvcf-worker-prod-web");
    let built = s.build(&right);
    std::fs::write(&file, &built.stdout).unwrap();
    let v = Command::new(BIN)
        .arg("validate")
        .arg(&file)
        .output()
        .unwrap();
    assert!(v.status.success(), "{v:?}");
}
