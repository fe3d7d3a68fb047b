//! The Helm post-renderer with the real `helm` (3 and 4, built from the Helm Go
//! modules by scripts/build-helm.sh) on the chart in tests/fixtures/helm:
//! `helm template --post-renderer` gives the selected workload its identity,
//! leaves hooks and everything else as rendered, is idempotent, and under Helm 4
//! (a `postrenderer/v1` plugin, deploy/helm-plugin/nvcf-worker) puts the generated trio in the
//! workload's file.

use crate::helm_support;
use crate::support;

use std::path::Path;
use std::process::{Command, Output};

use helm_support::{bin_dir, fixture_chart, helm3, helm4, path_of};
use serde_json::Value;
use support::{assert_contract, find, kinds_names, objects, CLUSTER};

/// A helm command with its own, empty home: no user plugins, repositories or cache.
/// (Plugins live in `$HELM_DATA_HOME/plugins`; Helm 4.3 installs there even when
/// HELM_PLUGINS says otherwise, so it is left at that default.)
fn helm(bin: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .env_clear()
        .env("PATH", path_of(&[&bin_dir()]))
        .env("HOME", home)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .expect("run helm")
}

#[track_caller]
fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// What the post-renderer must produce, checked on `helm template`'s output.
#[track_caller]
fn assert_rendered(out: &str) {
    // Helm prints objects in its own order (by file, or by kind); the contract
    // check wants each trio right before its workload, as inject writes it.
    let mut objs = objects(out);
    let trio: Vec<Value> = ["ServiceAccount", "Role", "RoleBinding"]
        .iter()
        .map(|k| find(&objs, k, "nvcf-worker-rel-worker").clone())
        .collect();
    objs.retain(|o| !trio.contains(o));
    let at = objs.iter().position(|o| o["kind"] == "Deployment").unwrap();
    objs.splice(at..at, trio);
    assert_contract(&objs, "Deployment", "rel-worker", "team-a", &["app"]);
    let sa = find(&objs, "ServiceAccount", "nvcf-worker-rel-worker");
    // Helm's own bookkeeping never reaches the cluster: Helm 4 removes it.
    assert!(!sa.to_string().contains("postrender-filename"), "{sa:#}");
    // Untouched: scalar meaning as kubectl reads it, other objects as rendered.
    let cm = find(&objs, "ConfigMap", "rel-config");
    assert_eq!(cm["data"]["mode"], "0777");
    assert_eq!(cm["data"]["enabled"], "yes");
    let env = &find(&objs, "Deployment", "rel-worker")["spec"]["template"]["spec"]["containers"][0]
        ["env"][0];
    assert_eq!(env["value"], "0777");
    // The hook keeps no identity: Helm runs it apart from the release.
    let hook = find(&objs, "Job", "rel-migrate");
    assert!(
        hook["spec"]["template"]["spec"]["serviceAccountName"].is_null(),
        "{hook:#}"
    );
    assert!(!out.contains("nvcf-worker-rel-migrate"), "{out}");
    assert!(
        !out.contains("runs with its NVCF worker identity"),
        "NOTES are not manifests"
    );
}

/// Running inject again over the post-rendered objects changes none of them.
#[track_caller]
fn assert_idempotent(out: &str) {
    let again = support::inject(out, &[]);
    again.ok();
    let (first, second): (Vec<Value>, Vec<Value>) = (objects(out), objects(&again.stdout));
    assert_eq!(kinds_names(&first), kinds_names(&second));
    assert_eq!(first, second, "a second inject changed the output");
}

#[test]
fn helm3_post_renderer_executable() {
    let home = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_kubectl-nvcf-worker");
    let chart = fixture_chart();
    let cluster = format!("--cluster-id={CLUSTER}");
    let version = ok(
        helm(&helm3(), home.path(), &["version", "--short"]),
        "helm version",
    );
    assert!(version.starts_with("v3."), "{version}");
    let out = ok(
        helm(
            &helm3(),
            home.path(),
            &[
                "template",
                "rel",
                chart.to_str().unwrap(),
                "--namespace",
                "team-a",
                "--post-renderer",
                bin,
                "--post-renderer-args",
                "inject",
                "--post-renderer-args",
                &cluster,
            ],
        ),
        "helm 3 template --post-renderer",
    );
    assert_rendered(&out);
    assert_idempotent(&out);

    // The same as rendering first and injecting after.
    let plain = ok(
        helm(
            &helm3(),
            home.path(),
            &[
                "template",
                "rel",
                chart.to_str().unwrap(),
                "--namespace",
                "team-a",
            ],
        ),
        "helm 3 template",
    );
    let piped = support::inject(&plain, &[]);
    piped.ok();
    assert_eq!(objects(&piped.stdout), objects(&out));
}

/// Installs deploy/helm-plugin into a fresh Helm 4 home.
fn install_plugin(home: &Path) {
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/helm-plugin/nvcf-worker");
    let installed = ok(
        helm(
            &helm4(),
            home,
            &["plugin", "install", plugin.to_str().unwrap()],
        ),
        "helm 4 plugin install deploy/helm-plugin/nvcf-worker",
    );
    assert!(installed.contains("nvcf-worker"), "{installed}");
    let list = ok(
        helm(&helm4(), home, &["plugin", "list"]),
        "helm plugin list",
    );
    assert!(
        list.contains("nvcf-worker") && list.contains("postrenderer/v1"),
        "{list}"
    );
}

#[test]
fn helm4_post_renderer_plugin() {
    let home = tempfile::tempdir().unwrap();
    let version = ok(
        helm(&helm4(), home.path(), &["version", "--short"]),
        "helm version",
    );
    assert!(version.starts_with("v4."), "{version}");
    install_plugin(home.path());
    let chart = fixture_chart();
    let cluster = format!("--cluster-id={CLUSTER}");
    let template = |extra: &[&str]| {
        let mut args = vec![
            "template",
            "rel",
            chart.to_str().unwrap(),
            "--namespace",
            "team-a",
            "--post-renderer",
            "nvcf-worker",
            "--post-renderer-args",
            &cluster,
        ];
        args.extend_from_slice(extra);
        helm(&helm4(), home.path(), &args)
    };
    let out = ok(template(&[]), "helm 4 template --post-renderer nvcf-worker");
    assert_rendered(&out);
    assert_idempotent(&out);

    // Helm 4 files documents by their postrender-filename annotation: the trio is
    // in the workload's file, none is renamed generated-by-postrender-N.yaml.
    assert!(!out.contains("generated-by-postrender"), "{out}");
    let files = tempfile::tempdir().unwrap();
    ok(
        template(&["--output-dir", files.path().to_str().unwrap()]),
        "helm 4 template --output-dir",
    );
    let deployment_file =
        std::fs::read_to_string(files.path().join("worker-app/templates/deployment.yaml")).unwrap();
    let mut in_file = kinds_names(&objects(&deployment_file));
    in_file.sort();
    assert_eq!(
        in_file,
        [
            "Deployment/rel-worker",
            "Role/nvcf-worker-rel-worker",
            "RoleBinding/nvcf-worker-rel-worker",
            "ServiceAccount/nvcf-worker-rel-worker"
        ],
        "{deployment_file}"
    );
}

#[test]
fn an_empty_render_fails_instead_of_printing_nothing() {
    let home = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_kubectl-nvcf-worker");
    let chart = fixture_chart();
    let cluster = format!("--cluster-id={CLUSTER}");
    let out = helm(
        &helm3(),
        home.path(),
        &[
            "template",
            "rel",
            chart.to_str().unwrap(),
            "--namespace",
            "team-a",
            "--set",
            "render=false",
            "--post-renderer",
            bin,
            "--post-renderer-args",
            "inject",
            "--post-renderer-args",
            &cluster,
        ],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no Kubernetes objects"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("kind:"));

    install_plugin(home.path());
    let out = helm(
        &helm4(),
        home.path(),
        &[
            "template",
            "rel",
            chart.to_str().unwrap(),
            "--namespace",
            "team-a",
            "--set",
            "render=false",
            "--post-renderer",
            "nvcf-worker",
            "--post-renderer-args",
            &cluster,
        ],
    );
    // Helm 4.3 does not pass a post-renderer plugin's stderr on.
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("plugin \"nvcf-worker\" exited with error"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("kind:"));
}
