//! The Argo CD config management plugin (deploy/argocd/plugin.yaml): its generate
//! command run as Argo CD's sidecar runs it — `command` + `args` exactly as
//! written, in the application's source directory, with Argo CD's build
//! environment (ARGOCD_APP_*) and the Application's plugin env as ARGOCD_ENV_* —
//! over a kustomize app, a Helm chart (real helm 3) and plain manifests.

use crate::helm_support;
use crate::support;

use std::path::Path;
use std::process::{Command, Output};

use helm_support::{bin_dir, copy_tree, fixture_chart, helm3, path_of};
use kubectl_nvcf_worker::manifest::{parse_stream, to_json};
use serde_json::Value;
use support::{assert_contract, find, kinds_names, objects, temp_tree, AUDIENCE, CLUSTER};

/// `spec.generate.command` followed by `spec.generate.args`, as kubectl reads the file.
fn generate_command() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/argocd/plugin.yaml");
    let docs = parse_stream(&std::fs::read(&path).unwrap()).unwrap();
    let plugin = to_json(docs[0].view());
    assert_eq!(plugin["apiVersion"], "argoproj.io/v1alpha1");
    assert_eq!(plugin["kind"], "ConfigManagementPlugin");
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap_or(&vec![])
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let mut cmd = strings(&plugin["spec"]["generate"]["command"]);
    cmd.extend(strings(&plugin["spec"]["generate"]["args"]));
    cmd
}

/// Runs the generate command in `app` the way the sidecar does.
fn generate(app: &Path, env: &[(&str, &str)]) -> Output {
    let argv = generate_command();
    let helm_dir = helm3().parent().unwrap().to_path_buf();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(app)
        .env_clear()
        .env("PATH", path_of(&[&bin_dir(), &helm_dir]))
        .env("HOME", app)
        .env("ARGOCD_APP_NAME", "shop")
        .env("ARGOCD_APP_NAMESPACE", "team-a")
        .env("ARGOCD_APP_REVISION", "0123456789abcdef")
        .env("ARGOCD_APP_SOURCE_PATH", "apps/shop")
        .env(
            "ARGOCD_APP_SOURCE_REPO_URL",
            "https://git.example.com/apps.git",
        )
        .env("ARGOCD_APP_SOURCE_TARGET_REVISION", "main")
        .env("KUBE_VERSION", "1.32.4");
    for (k, v) in env {
        cmd.env(format!("ARGOCD_ENV_{k}"), v);
    }
    cmd.output().expect("run the generate command")
}

#[track_caller]
fn manifests(out: &Output) -> Vec<Value> {
    assert!(
        out.status.success(),
        "exit {:?}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    objects(&String::from_utf8(out.stdout.clone()).unwrap())
}

const DEPLOYMENT: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web, nvcf.io/worker: \"true\"}
    spec:
      containers: [{name: app, image: nginx}]
";

#[test]
fn kustomize_app() {
    let app = temp_tree(&[
        ("deployment.yaml", DEPLOYMENT),
        (
            "kustomization.yaml",
            "namespace: team-a\nresources: [deployment.yaml]\n",
        ),
    ]);
    let objs = manifests(&generate(app.path(), &[("NVCF_CLUSTER_ID", CLUSTER)]));
    assert_contract(&objs, "Deployment", "web", "team-a", &["app"]);
}

#[test]
fn helm_chart_with_values_and_settings() {
    let app = tempfile::tempdir().unwrap();
    copy_tree(&fixture_chart(), app.path());
    std::fs::write(app.path().join("prod.yaml"), "replicas: 5\n").unwrap();
    let objs = manifests(&generate(
        app.path(),
        &[("NVCF_CLUSTER_ID", CLUSTER), ("HELM_VALUES", "prod.yaml")],
    ));
    // Release name and namespace come from the Application.
    assert_contract(&objs, "Deployment", "shop-worker", "team-a", &["app"]);
    let d = find(&objs, "Deployment", "shop-worker");
    assert_eq!(d["spec"]["replicas"], 5);
    let hook = find(&objs, "Job", "shop-migrate");
    assert!(hook["spec"]["template"]["spec"]["serviceAccountName"].is_null());
}

#[test]
fn plain_manifests_leave_local_config_out() {
    let app = temp_tree(&[
        ("deployment.yaml", DEPLOYMENT),
        (
            "fn-config.yaml",
            "apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nmetadata:\n  name: cfg\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\nspec: {clusterID: x}\n",
        ),
    ]);
    let objs = manifests(&generate(
        app.path(),
        &[
            ("NVCF_CLUSTER_ID", CLUSTER),
            ("NVCF_SELECTOR", "app=web"),
            ("NVCF_EXPIRATION_SECONDS", "3600"),
        ],
    ));
    let token = &find(&objs, "Deployment", "web")["spec"]["template"]["spec"]["volumes"][0]
        ["projected"]["sources"][0]["serviceAccountToken"];
    assert_eq!(
        (&token["audience"], &token["expirationSeconds"]),
        (&AUDIENCE.into(), &3600.into())
    );
    assert_eq!(
        kinds_names(&objs),
        [
            "ServiceAccount/nvcf-worker-web",
            "Role/nvcf-worker-web",
            "RoleBinding/nvcf-worker-web",
            "Deployment/web"
        ]
    );
}

#[test]
fn failures_print_no_manifests() {
    // No cluster ID: the message names the setting to add to the Application.
    let app = temp_tree(&[("deployment.yaml", DEPLOYMENT)]);
    let out = generate(app.path(), &[]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("NVCF_CLUSTER_ID"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A failed render fails the sync instead of feeding inject a partial stream.
    let broken = temp_tree(&[("kustomization.yaml", "resources: [missing.yaml]\n")]);
    let out = generate(broken.path(), &[("NVCF_CLUSTER_ID", "prod-1")]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let leftovers: Vec<_> = std::fs::read_dir(broken.path()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "the render left files behind");
}
