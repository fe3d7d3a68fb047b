//! The Argo CD config management plugin (deploy/argocd/plugin.yaml): its generate
//! command run as Argo CD's sidecar runs it — `command` + `args` exactly as
//! written, in the application's source directory, with Argo CD's build
//! environment (ARGOCD_APP_*, KUBE_VERSION, KUBE_API_VERSIONS) and the
//! Application's plugin env as ARGOCD_ENV_* — over a kustomize app, Helm charts
//! (real helm 3 and 4: values files, a dependency, capabilities) and plain
//! manifests; and the sidecar patch (deploy/argocd/repo-server-patch.yaml) merged
//! into an argocd-repo-server Deployment by kubectl and kustomize.

use crate::helm_support;
use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use helm_support::{bin_dir, copy_tree, fixture_chart, helm3, helm4, path_of};
use kubectl_nvcf_worker::manifest::{parse_stream, to_json};
use serde_json::Value;
use support::{assert_contract_as, find, kinds_names, objects, temp_tree, AUDIENCE, CLUSTER};

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The first document of a YAML file of the repository, as JSON.
fn yaml_file(rel: &str) -> Value {
    let docs = parse_stream(&std::fs::read(repo_file(rel)).unwrap()).unwrap();
    to_json(docs[0].view())
}

/// `spec.generate.command` followed by `spec.generate.args`, as kubectl reads the file.
fn generate_command() -> Vec<String> {
    let plugin = yaml_file("deploy/argocd/plugin.yaml");
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

/// The directory holding `tool` on the test's own PATH.
fn dir_of(tool: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).find(|d| d.join(tool).is_file()))
        .unwrap_or_else(|| panic!("{tool} is not on PATH"))
}

/// Argo CD's build environment for a destination cluster at Kubernetes 1.32:
/// KUBE_API_VERSIONS is its API versions and kinds, comma-separated, as the
/// repo-server joins them.
const BUILD_ENV: &[(&str, &str)] = &[
    ("KUBE_VERSION", "1.32.4"),
    (
        "KUBE_API_VERSIONS",
        "v1,apps/v1,apps/v1/Deployment,batch/v1,rbac.authorization.k8s.io/v1",
    ),
];

/// Runs the generate command in `app` the way the sidecar does, with `helm`,
/// Argo CD's build environment ([`BUILD_ENV`], each entry replaced by one of
/// `build_env` with its name) and the Application's plugin `env`.
fn generate_with(
    app: &Path,
    helm: &Path,
    build_env: &[(&str, &str)],
    env: &[(&str, &str)],
) -> Output {
    generate_by(None, app, helm, build_env, env)
}

/// [`generate`] with `shell` in place of the command's `sh` (images differ in
/// what `sh` is: dash here, bash or busybox elsewhere).
fn generate_in(shell: &str, app: &Path, env: &[(&str, &str)]) -> Output {
    generate_by(Some(shell), app, &helm3(), &[], env)
}

fn generate_by(
    shell: Option<&str>,
    app: &Path,
    helm: &Path,
    build_env: &[(&str, &str)],
    env: &[(&str, &str)],
) -> Output {
    let mut argv = generate_command();
    assert_eq!(argv[..2], ["sh", "-c"]);
    if let Some(shell) = shell {
        argv[0] = shell.to_string();
    }
    let helm_dir = helm.parent().unwrap().to_path_buf();
    // The sidecar's HOME is not the application; Helm's directories are where
    // repo-server-patch.yaml puts them, on a writable volume of their own.
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(app)
        .env_clear()
        .env(
            "PATH",
            [&bin_dir(), &helm_dir]
                .into_iter()
                .map(|d| d.display().to_string())
                .chain(std::iter::once(path_of(&[])))
                .chain(["realpath", "grep", &argv[0]].map(|t| dir_of(t).display().to_string()))
                .collect::<Vec<_>>()
                .join(":"),
        )
        .env("HOME", home.path())
        .env("HELM_CACHE_HOME", home.path().join("helm/cache"))
        .env("HELM_CONFIG_HOME", home.path().join("helm/config"))
        .env("HELM_DATA_HOME", home.path().join("helm/data"))
        .env("ARGOCD_APP_NAME", "shop")
        .env("ARGOCD_APP_NAMESPACE", "team-a")
        .env("ARGOCD_APP_PROJECT_NAME", "default")
        .env("ARGOCD_APP_REVISION", "0123456789abcdef")
        .env("ARGOCD_APP_SOURCE_PATH", "apps/shop")
        .env(
            "ARGOCD_APP_SOURCE_REPO_URL",
            "https://git.example.com/apps.git",
        )
        .env("ARGOCD_APP_SOURCE_TARGET_REVISION", "main");
    for (k, v) in BUILD_ENV.iter().chain(build_env) {
        cmd.env(k, v);
    }
    for (k, v) in env {
        cmd.env(format!("ARGOCD_ENV_{k}"), v);
    }
    cmd.output().expect("run the generate command")
}

/// [`generate_with`] with helm 3 and Argo CD's usual build environment.
fn generate(app: &Path, env: &[(&str, &str)]) -> Output {
    generate_with(app, &helm3(), &[], env)
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
    assert_contract_as(
        &objs,
        "Deployment",
        "web",
        "team-a",
        &["app"],
        "nvcf-worker",
    );
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
    assert_contract_as(
        &objs,
        "Deployment",
        "shop-worker",
        "team-a",
        &["app"],
        "nvcf-worker",
    );
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
            // The per-workload contract, by name.
            ("NVCF_NAMING", "per-workload"),
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

/// The generate command failed and printed no manifests; its stderr.
#[track_caller]
fn refused(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "expected a failure\n--- stdout\n{}\n--- stderr\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        out.stdout.is_empty(),
        "a failed generate printed manifests:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

/// A repository checkout as the sidecar receives it: the fixture chart at
/// `apps/shop` (the application directory), returned with the checkout.
fn repo_with_chart() -> (tempfile::TempDir, PathBuf) {
    let repo = tempfile::tempdir().unwrap();
    let app = repo.path().join("apps/shop");
    copy_tree(&fixture_chart(), &app);
    (repo, app)
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A small dependency chart: one ConfigMap named after the release.
fn write_common_chart(dir: &Path) {
    write(
        &dir.join("Chart.yaml"),
        "apiVersion: v2\nname: common\nversion: 0.1.0\n",
    );
    write(
        &dir.join("templates/settings.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-common\ndata:\n  from: common\n",
    );
}

/// Adds the `common` dependency, fetched from `repository`, to the chart in `app`.
fn declare_common(app: &Path, repository: &str) {
    let chart = app.join("Chart.yaml");
    let mut text = std::fs::read_to_string(&chart).unwrap();
    text.push_str(&format!(
        "dependencies:\n  - name: common\n    version: 0.1.0\n    repository: {repository}\n"
    ));
    std::fs::write(&chart, text).unwrap();
}

#[test]
fn helm_chart_dependency_is_built_when_charts_lacks_it() {
    for helm in [helm3(), helm4()] {
        // A local dependency elsewhere in the repository: no network.
        let (repo, app) = repo_with_chart();
        write_common_chart(&repo.path().join("charts/common"));
        declare_common(&app, "file://../../charts/common");
        assert!(!app.join("charts").exists());

        let out = generate_with(&app, &helm, &[], &[("NVCF_CLUSTER_ID", CLUSTER)]);
        let objs = manifests(&out);
        assert_eq!(
            find(&objs, "ConfigMap", "shop-common")["data"]["from"],
            "common",
            "{}",
            helm.display()
        );
        assert_contract_as(
            &objs,
            "Deployment",
            "shop-worker",
            "team-a",
            &["app"],
            "nvcf-worker",
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("helm dependency build"), "{stderr}");
        assert!(app.join("charts/common-0.1.0.tgz").is_file());
    }
}

#[test]
fn helm_chart_vendored_dependency_is_used_as_it_is() {
    for helm in [helm3(), helm4()] {
        // charts/ already holds the dependency; its repository is gone, so a
        // `helm dependency build` would fail the render.
        let (_repo, app) = repo_with_chart();
        write_common_chart(&app.join("charts/common"));
        declare_common(&app, "file://../../charts/gone");
        let probe = tempfile::tempdir().unwrap();
        copy_tree(&app, probe.path());
        let home = tempfile::tempdir().unwrap();
        let build = Command::new(&helm)
            .args(["dependency", "build", "."])
            .current_dir(probe.path())
            .env_clear()
            .env("HOME", home.path())
            .output()
            .unwrap();
        assert!(
            !build.status.success(),
            "helm dependency build should fail here: {}",
            String::from_utf8_lossy(&build.stdout)
        );

        let out = generate_with(&app, &helm, &[], &[("NVCF_CLUSTER_ID", CLUSTER)]);
        let objs = manifests(&out);
        assert_eq!(
            find(&objs, "ConfigMap", "shop-common")["data"]["from"],
            "common"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("helm dependency build"), "{stderr}");
        assert!(!app.join("charts/common-0.1.0.tgz").exists());
    }
}

/// A template that prints what the chart sees of the destination cluster.
const CAPABILITIES: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-capabilities
data:
  kubeVersion: {{ .Capabilities.KubeVersion.Version | quote }}
  widgets: {{ .Capabilities.APIVersions.Has \"widgets.example.com/v1\" | quote }}
  gadget: {{ .Capabilities.APIVersions.Has \"gadgets.example.com/v1beta2/Gadget\" | quote }}
  absent: {{ .Capabilities.APIVersions.Has \"absent.example.com/v1\" | quote }}
";

#[test]
fn helm_chart_sees_the_destination_cluster_versions() {
    for helm in [helm3(), helm4()] {
        let (_repo, app) = repo_with_chart();
        write(&app.join("templates/capabilities.yaml"), CAPABILITIES);
        let caps = |build_env: &[(&str, &str)]| -> Value {
            let out = generate_with(&app, &helm, build_env, &[("NVCF_CLUSTER_ID", CLUSTER)]);
            find(&manifests(&out), "ConfigMap", "shop-capabilities")["data"].clone()
        };

        // KUBE_VERSION as Argo CD sets it (no leading v), KUBE_API_VERSIONS
        // comma-separated, with a kind-qualified entry and an empty one.
        let data = caps(&[
            ("KUBE_VERSION", "1.29.7"),
            (
                "KUBE_API_VERSIONS",
                "v1,apps/v1,widgets.example.com/v1,,gadgets.example.com/v1beta2/Gadget",
            ),
        ]);
        assert_eq!(data["kubeVersion"], "v1.29.7", "{}", helm.display());
        assert_eq!(
            (&data["widgets"], &data["gadget"], &data["absent"]),
            (&"true".into(), &"true".into(), &"false".into())
        );

        // Another cluster, another render: the values come from the environment.
        let data = caps(&[("KUBE_VERSION", "1.31.0"), ("KUBE_API_VERSIONS", "v1")]);
        assert_eq!(data["kubeVersion"], "v1.31.0");
        assert_eq!(data["widgets"], "false");

        // Empty (Argo CD leaves empty entries out of the environment): helm's defaults,
        // no empty flag.
        let data = caps(&[("KUBE_VERSION", ""), ("KUBE_API_VERSIONS", "")]);
        assert_ne!(data["kubeVersion"], "v1.29.7");
        assert_eq!(data["widgets"], "false");

        // A chart's kubeVersion constraint is judged against the destination.
        let (_repo, strict) = repo_with_chart();
        let chart = strict.join("Chart.yaml");
        let text = std::fs::read_to_string(&chart).unwrap() + "kubeVersion: \">=1.30.0-0\"\n";
        std::fs::write(&chart, text).unwrap();
        let old = generate_with(
            &strict,
            &helm,
            &[("KUBE_VERSION", "1.29.7")],
            &[("NVCF_CLUSTER_ID", CLUSTER)],
        );
        assert!(refused(&old).contains("1.29.7"));
        manifests(&generate_with(
            &strict,
            &helm,
            &[("KUBE_VERSION", "1.30.2")],
            &[("NVCF_CLUSTER_ID", CLUSTER)],
        ));
    }
}

/// The chart at `apps/shop` with values files inside and around it; each file
/// sets its own replica count, so the render tells which one helm read.
fn repo_with_values() -> (tempfile::TempDir, PathBuf) {
    let (repo, app) = repo_with_chart();
    for (rel, replicas) in [
        ("prod.yaml", 5),
        ("values/prod.yaml", 3),
        ("odd..name.yaml", 4),
        ("v1.yaml", 11),
        ("v[1].yaml", 7),
        ("secret-a.yaml", 9),
        ("my values.yaml", 8),
    ] {
        write(&app.join(rel), &format!("replicas: {replicas}\n"));
    }
    // Another application's values, in the same checkout.
    write(&repo.path().join("apps/x/values.yaml"), "replicas: 666\n");
    std::os::unix::fs::symlink("values/prod.yaml", app.join("inside-link.yaml")).unwrap();
    std::os::unix::fs::symlink("../x/values.yaml", app.join("outside-link.yaml")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", app.join("host-link.yaml")).unwrap();
    std::os::unix::fs::symlink("../x", app.join("linked-dir")).unwrap();
    (repo, app)
}

#[test]
fn helm_values_outside_the_application_are_refused() {
    let (repo, app) = repo_with_values();
    let sibling = repo.path().join("apps/x/values.yaml");
    let sibling_abs = sibling.display().to_string();
    // Each names a file that exists: only the plugin's rule keeps helm from it.
    assert!(sibling.is_file() && app.join("secret-a.yaml").is_file());
    let outside = "outside the application directory";
    let absolute = "is an absolute path";
    let not_a_file = "is not a file";
    // (HELM_VALUES, the entry the message names, why)
    let cases: &[(&str, &str, &str)] = &[
        ("../x/values.yaml", "../x/values.yaml", outside),
        (
            "values/../../x/values.yaml",
            "values/../../x/values.yaml",
            outside,
        ),
        ("/etc/hostname", "/etc/hostname", absolute),
        (&sibling_abs, &sibling_abs, absolute),
        ("outside-link.yaml", "outside-link.yaml", outside),
        ("host-link.yaml", "host-link.yaml", outside),
        ("linked-dir/values.yaml", "linked-dir/values.yaml", outside),
        // Globs are not expanded: the pattern itself names no file.
        ("secret-*.yaml", "secret-*.yaml", not_a_file),
        ("*.yaml", "*.yaml", not_a_file),
        (
            "https://example.com/v.yaml",
            "https://example.com/v.yaml",
            "is a URL",
        ),
        ("values", "values", not_a_file),
        // One bad entry fails the render, whatever comes before it.
        ("prod.yaml ../x/values.yaml", "../x/values.yaml", outside),
        // The separator is a space: a name holding one is two entries.
        ("my values.yaml", "my", not_a_file),
    ];
    for shell in ["sh", "bash"] {
        for (setting, entry, why) in cases {
            let out = generate_in(
                shell,
                &app,
                &[("NVCF_CLUSTER_ID", CLUSTER), ("HELM_VALUES", setting)],
            );
            let stderr = refused(&out);
            assert!(
                stderr.contains(&format!("HELM_VALUES entry \"{entry}\" ")) && stderr.contains(why),
                "{shell}, HELM_VALUES={setting:?}: {stderr}"
            );
        }
    }
}

#[test]
fn helm_values_inside_the_application_are_read() {
    let (_repo, app) = repo_with_values();
    let cases: &[(&str, i64)] = &[
        ("values/prod.yaml", 3),
        ("./prod.yaml", 5),
        ("values/../prod.yaml", 5),
        ("inside-link.yaml", 3),
        ("odd..name.yaml", 4),
        // Read literally: a glob would have matched v1.yaml.
        ("v[1].yaml", 7),
        // In order, the last one winning; runs of spaces are one separator.
        ("  prod.yaml   values/prod.yaml ", 3),
        ("values/prod.yaml prod.yaml", 5),
    ];
    for shell in ["sh", "bash"] {
        for (setting, replicas) in cases {
            let out = generate_in(
                shell,
                &app,
                &[("NVCF_CLUSTER_ID", CLUSTER), ("HELM_VALUES", setting)],
            );
            let objs = manifests(&out);
            assert_eq!(
                find(&objs, "Deployment", "shop-worker")["spec"]["replicas"],
                *replicas,
                "{shell}, HELM_VALUES={setting:?}"
            );
            assert_contract_as(
                &objs,
                "Deployment",
                "shop-worker",
                "team-a",
                &["app"],
                "nvcf-worker",
            );
        }
    }
}

/// argocd-repo-server as Argo CD's install manifests lay it out, cut to what
/// the sidecar patch meets: the copyutil init container filling var-files, the
/// repo-server container with its own tmp and the plugins socket directory.
const REPO_SERVER: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: argocd-repo-server
  labels: {app.kubernetes.io/name: argocd-repo-server}
spec:
  selector:
    matchLabels: {app.kubernetes.io/name: argocd-repo-server}
  template:
    metadata:
      labels: {app.kubernetes.io/name: argocd-repo-server}
    spec:
      serviceAccountName: argocd-repo-server
      initContainers:
        - name: copyutil
          image: quay.io/argoproj/argocd:v3.1.0
          command: [sh, -c]
          args: [cp /usr/local/bin/argocd /var/run/argocd/argocd && ln -s /var/run/argocd/argocd /var/run/argocd/argocd-cmp-server]
          volumeMounts:
            - {name: var-files, mountPath: /var/run/argocd}
      containers:
        - name: argocd-repo-server
          image: quay.io/argoproj/argocd:v3.1.0
          args: [/usr/local/bin/argocd-repo-server]
          volumeMounts:
            - {name: tmp, mountPath: /tmp}
            - {name: helm-working-dir, mountPath: /helm-working-dir}
            - {name: plugins, mountPath: /home/argocd/cmp-server/plugins}
      volumes:
        - {name: tmp, emptyDir: {}}
        - {name: helm-working-dir, emptyDir: {}}
        - {name: var-files, emptyDir: {}}
        - {name: plugins, emptyDir: {}}
";

fn named<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {list:#}"))
}

/// Every volumeMount of every container names a volume the pod spec declares,
/// volumes are declared once, and the pod spec holds only fields Kubernetes
/// knows (k8s-openapi's PodSpec keeps all of it).
#[track_caller]
fn assert_pod_spec_complete(spec: &Value) {
    let volumes: Vec<&str> = spec["volumes"]
        .as_array()
        .expect("the pod spec declares volumes")
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    let mut unique = volumes.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        volumes.len(),
        "a volume declared twice: {volumes:?}"
    );
    for list in ["initContainers", "containers"] {
        for c in spec[list].as_array().into_iter().flatten() {
            for m in c["volumeMounts"].as_array().into_iter().flatten() {
                let name = m["name"].as_str().unwrap();
                assert!(
                    volumes.contains(&name),
                    "container {} mounts {name}, which no volume declares ({volumes:?})",
                    c["name"]
                );
            }
        }
    }
    let typed: k8s_openapi::api::core::v1::PodSpec =
        serde_json::from_value(spec.clone()).expect("a Kubernetes PodSpec");
    assert_eq!(
        &serde_json::to_value(&typed).unwrap(),
        spec,
        "fields Kubernetes does not know"
    );
}

/// The ```yaml blocks of a Markdown text, each without the indentation it has
/// there (a block inside a list item).
fn yaml_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut block: Option<(usize, String)> = None;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match &mut block {
            None if trimmed == "```yaml" => block = Some((indent, String::new())),
            Some(_) if trimmed == "```" => blocks.push(block.take().unwrap().1),
            Some((at, text)) => {
                text.push_str(line.get(*at..).unwrap_or(""));
                text.push('\n');
            }
            None => {}
        }
    }
    blocks
}

/// kubectl with no cluster and no kubeconfig.
fn kubectl_offline(dir: &Path, args: &[&str]) -> Value {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new("kubectl")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", path_of(&[]))
        .env("HOME", home.path())
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs = parse_stream(&out.stdout).unwrap();
    assert_eq!(docs.len(), 1, "{}", String::from_utf8_lossy(&out.stdout));
    to_json(docs[0].view())
}

#[test]
fn sidecar_patch_is_complete() {
    let patch = yaml_file("deploy/argocd/repo-server-patch.yaml");
    assert_eq!(
        (
            &patch["apiVersion"],
            &patch["kind"],
            &patch["metadata"]["name"]
        ),
        (
            &"apps/v1".into(),
            &"Deployment".into(),
            &"argocd-repo-server".into()
        )
    );
    let spec = &patch["spec"]["template"]["spec"];
    assert_pod_spec_complete(spec);

    // Argo CD's sidecar layout: its CMP server as entrypoint, user 999, the
    // shared var-files and plugins volumes, the plugin config at its fixed path
    // from a ConfigMap, and a tmp of its own.
    let sidecar = named(&spec["containers"], "nvcf-worker");
    assert_eq!(
        sidecar["command"],
        serde_json::json!(["/var/run/argocd/argocd-cmp-server"])
    );
    assert_eq!(sidecar["securityContext"]["runAsNonRoot"], true);
    assert_eq!(sidecar["securityContext"]["runAsUser"], 999);
    let mount = |path: &str| -> &Value {
        sidecar["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["mountPath"] == path)
            .unwrap_or_else(|| panic!("nothing mounted at {path}"))
    };
    assert_eq!(mount("/var/run/argocd")["name"], "var-files");
    assert_eq!(mount("/home/argocd/cmp-server/plugins")["name"], "plugins");
    let config = mount("/home/argocd/cmp-server/config/plugin.yaml");
    assert_eq!(config["subPath"], "plugin.yaml");
    let config_volume = named(&spec["volumes"], config["name"].as_str().unwrap());
    let configmap = config_volume["configMap"]["name"].as_str().unwrap();
    let tmp = mount("/tmp");
    assert_ne!(tmp["name"], "tmp", "repo-server's own tmp volume");
    assert!(named(&spec["volumes"], tmp["name"].as_str().unwrap())["emptyDir"].is_object());

    // The README's configmap command, run as written (offline), makes the
    // ConfigMap the volume names, holding plugin.yaml under the mounted key.
    let readme = std::fs::read_to_string(repo_file("deploy/argocd/README.md")).unwrap();
    let create = readme
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("kubectl -n argocd create configmap"))
        .expect("README creates the ConfigMap");
    let mut args: Vec<&str> = create.split_whitespace().skip(1).collect();
    args.extend(["--dry-run=client", "-o", "yaml"]);
    let cm = kubectl_offline(Path::new(env!("CARGO_MANIFEST_DIR")), &args);
    assert_eq!(cm["metadata"]["name"], configmap);
    assert_eq!(
        cm["data"]["plugin.yaml"],
        std::fs::read_to_string(repo_file("deploy/argocd/plugin.yaml")).unwrap()
    );

    // The README shows the patch as the file holds it (below its header comment).
    let text = std::fs::read_to_string(repo_file("deploy/argocd/repo-server-patch.yaml")).unwrap();
    let body = &text[text.find("apiVersion:").unwrap()..];
    assert!(
        yaml_blocks(&readme).iter().any(|b| b == body),
        "README's patch differs from the file"
    );

    // Merged into argocd-repo-server, by kubectl patch (strategic merge, what
    // README runs, here --local) and by a kustomization's patches.
    let dir = temp_tree(&[
        ("repo-server.yaml", REPO_SERVER),
        ("repo-server-patch.yaml", &text),
        (
            "kustomization.yaml",
            "resources: [repo-server.yaml]\npatches:\n  - path: repo-server-patch.yaml\n",
        ),
    ]);
    let base = objects(REPO_SERVER).remove(0);
    let patched = kubectl_offline(
        dir.path(),
        &[
            "patch",
            "--local",
            "-f",
            "repo-server.yaml",
            "--type",
            "strategic",
            "--patch-file",
            "repo-server-patch.yaml",
            "-o",
            "yaml",
        ],
    );
    let kustomized = kubectl_offline(dir.path(), &["kustomize", "."]);
    for merged in [&patched, &kustomized] {
        let merged_spec = &merged["spec"]["template"]["spec"];
        assert_pod_spec_complete(merged_spec);
        assert_eq!(named(&merged_spec["containers"], "nvcf-worker"), sidecar);
        let base_spec = &base["spec"]["template"]["spec"];
        assert_eq!(
            named(&merged_spec["containers"], "argocd-repo-server"),
            named(&base_spec["containers"], "argocd-repo-server")
        );
        assert_eq!(merged_spec["initContainers"], base_spec["initContainers"]);
        for v in base_spec["volumes"].as_array().unwrap() {
            assert_eq!(
                named(&merged_spec["volumes"], v["name"].as_str().unwrap()),
                v
            );
        }
    }
}
