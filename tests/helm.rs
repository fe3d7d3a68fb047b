//! The Helm post-renderer with the real `helm` (3 and 4, built from the Helm Go
//! modules by scripts/build-helm.sh) on the chart in tests/fixtures/helm:
//! `helm template --post-renderer` gives the selected workload its identity,
//! leaves hooks and everything else as rendered, is idempotent, and under Helm 4
//! (a `postrenderer/v1` plugin, deploy/helm-plugin/nvcf-worker) puts the generated trio in the
//! workload's file; a failing inject shows its cause under both; and README's
//! and docs/install.md's Helm commands run as written, Helm 3 beside Helm 4.

use crate::helm_support;
use crate::support;

use std::path::Path;
use std::process::{Command, Output};

use helm_support::{bin_dir, fixture_chart, helm3, helm4, path_of};
use serde_json::Value;
use support::{assert_contract_as, find, kinds_names, objects, CLUSTER};

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
        .map(|k| find(&objs, k, "nvcf-worker").clone())
        .collect();
    objs.retain(|o| !trio.contains(o));
    let at = objs.iter().position(|o| o["kind"] == "Deployment").unwrap();
    objs.splice(at..at, trio);
    // The default contract: the namespace's one nvcf-worker.
    assert_contract_as(
        &objs,
        "Deployment",
        "rel-worker",
        "team-a",
        &["app"],
        "nvcf-worker",
    );
    let sa = find(&objs, "ServiceAccount", "nvcf-worker");
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
        !hook.to_string().contains("nvcf-worker"),
        "the hook runs as no worker account: {hook:#}"
    );
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
            "Role/nvcf-worker",
            "RoleBinding/nvcf-worker",
            "ServiceAccount/nvcf-worker"
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
    // Helm 4.3 drops a failing plugin's stderr; post-render.sh hands the cause
    // over in the output, which Helm 4 quotes.
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid document separator: --- kubectl-nvcf-worker inject failed")
            && stderr.contains("no Kubernetes objects"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("kind:"));
}

/// The cause of a failed inject that the user must see: no cluster ID given.
const NO_CLUSTER_ID: &str = "clusterID is required to inject a worker identity";

/// Helm 3 prints a failing post-renderer's stderr; Helm 4 drops it and prints
/// only `plugin "nvcf-worker" exited with error`, so the plugin's post-render.sh
/// puts the message where Helm 4 shows it (an invalid document separator it
/// quotes). Under both, the user reads inject's own message and no manifests.
#[test]
fn a_missing_cluster_id_fails_with_its_cause_under_helm_3_and_4() {
    let home = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_kubectl-nvcf-worker");
    let chart = fixture_chart();
    let chart = chart.to_str().unwrap();
    let base = ["template", "rel", chart, "--namespace", "team-a"];

    let mut args = base.to_vec();
    args.extend(["--post-renderer", bin, "--post-renderer-args", "inject"]);
    let out = helm(&helm3(), home.path(), &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("error output:") && stderr.contains(NO_CLUSTER_ID),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("kind:"));

    install_plugin(home.path());
    let mut args = base.to_vec();
    args.extend(["--post-renderer", "nvcf-worker"]);
    for extra in [&[][..], &["--debug"][..]] {
        let mut args = args.clone();
        args.extend_from_slice(extra);
        let out = helm(&helm4(), home.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?}: {stderr}");
        let error = stderr
            .lines()
            .find(|l| l.starts_with("Error: "))
            .unwrap_or_else(|| panic!("{extra:?}: no error line\n{stderr}"));
        assert!(
            error.contains(&format!(
                "invalid document separator: --- kubectl-nvcf-worker inject failed (exit 2): error: function config: {NO_CLUSTER_ID}"
            )),
            "{extra:?}: {stderr}"
        );
        assert!(!String::from_utf8_lossy(&out.stdout).contains("kind:"));
    }
}

/// A ```shell block of a doc's Helm section: its label (the first line, a
/// comment naming the Helm it is for) and its commands, continuations joined.
struct Block {
    doc: &'static str,
    label: String,
    commands: Vec<String>,
}

/// The shell blocks of `doc`'s `## Helm` section.
fn helm_blocks(doc: &'static str) -> Vec<Block> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(doc)).unwrap();
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with("Helm\n"))
        .unwrap_or_else(|| panic!("{doc}: no ## Helm section"));
    let mut blocks = Vec::new();
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "```shell" {
            continue;
        }
        let mut block = Block {
            doc,
            label: String::new(),
            commands: Vec::new(),
        };
        let mut pending = String::new();
        for line in lines.by_ref() {
            let line = line.trim();
            if line == "```" {
                break;
            }
            if block.label.is_empty() {
                block.label = line
                    .strip_prefix("# ")
                    .unwrap_or_else(|| {
                        panic!("{doc}: a Helm block starts `# Helm N`, not `{line}`")
                    })
                    .to_string();
                continue;
            }
            match line.strip_suffix('\\') {
                Some(part) => pending.push_str(part),
                None => {
                    pending.push_str(line);
                    block.commands.push(std::mem::take(&mut pending));
                }
            }
        }
        assert!(
            pending.is_empty() && !block.commands.is_empty(),
            "{doc}: {}",
            block.label
        );
        blocks.push(block);
    }
    blocks
}

/// Runs one documented line with `sh -c`, as a user would: `helm` is `helm_bin`,
/// the built binaries are on PATH, HOME is `home` and no HELM_* is set.
fn run_line(line: &str, helm_bin: &Path, checkout: &Path, home: &Path) -> Output {
    let helm_dir = home.join(format!(
        "bin-{}",
        helm_bin
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
    ));
    std::fs::create_dir_all(&helm_dir).unwrap();
    let link = helm_dir.join("helm");
    if !link.exists() {
        std::os::unix::fs::symlink(helm_bin, &link).unwrap();
    }
    Command::new("sh")
        .args(["-c", line])
        .current_dir(checkout)
        .env_clear()
        .env("PATH", path_of(&[&helm_dir, &bin_dir()]))
        .env("HOME", home)
        .output()
        .expect("run sh")
}

/// Runs a documented block: every line as written, except that a `helm install`
/// line (no cluster here) must have a `helm template` twin in the block with
/// the same arguments; and every `helm template` line once more without the
/// cluster ID, which must fail with inject's message. Helm must never report a
/// plugin it cannot load.
fn run_block(block: &Block, helm_bin: &Path, checkout: &Path, home: &Path) -> usize {
    let what = format!("{} `# {}`", block.doc, block.label);
    let mut ran = 0;
    for line in &block.commands {
        assert!(
            line.contains("helm "),
            "{what}: `{line}` is not a helm command"
        );
        if line.contains("helm install ") {
            let twin = line.replacen("helm install ", "helm template ", 1);
            assert!(
                block.commands.contains(&twin),
                "{what}: `{line}` has no `{twin}` to test it by"
            );
            continue;
        }
        let out = run_line(line, helm_bin, checkout, home);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !stderr.contains("failed to load plugin"),
            "{what}: `{line}`: exit {:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
            out.status.code()
        );
        ran += 1;
        if !line.contains("helm template ") {
            continue;
        }
        // The release is `web`; the docs' cluster is prod-1.
        let objs = objects(&stdout);
        find(&objs, "ServiceAccount", "nvcf-worker");
        let spec = &find(&objs, "Deployment", "web-worker")["spec"]["template"]["spec"];
        assert_eq!(
            spec["serviceAccountName"], "nvcf-worker",
            "{what}: {spec:#}"
        );
        assert!(
            spec.to_string()
                .contains("\"audience\":\"nvcf-icms:prod-1\""),
            "{what}: {spec:#}"
        );
        assert!(
            !stdout.contains("nvcf-worker-web-migrate"),
            "{what}: a hook got an identity"
        );
        let hooks: Vec<&Value> = objs.iter().filter(|o| o["kind"] == "Job").collect();
        assert!(
            hooks.iter().all(|h| !h
                .to_string()
                .contains("\"serviceAccountName\":\"nvcf-worker")),
            "{what}: a hook got an identity"
        );

        let without = line
            .replace(" --post-renderer-args=--cluster-id=prod-1", "")
            .replace(" --post-renderer-args --cluster-id=prod-1", "");
        assert_ne!(
            &without, line,
            "{what}: `{line}` passes no --cluster-id=prod-1"
        );
        let out = run_line(&without, helm_bin, checkout, home);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(NO_CLUSTER_ID),
            "{what}: `{without}`: exit {:?}\n{stderr}",
            out.status.code()
        );
        assert!(!String::from_utf8_lossy(&out.stdout).contains("kind:"));
        ran += 1;
    }
    ran
}

/// README's and docs/install.md's Helm commands, as written, from a checkout
/// with the fixture chart as `./chart`: Helm 4 alone in its default plugins
/// directory; Helm 4 beside Helm 3, with its own data directory, and Helm 3's
/// commands (`helm version`, its plugins, its post-renderer) still working
/// there. And why the docs keep them apart: Helm 3 beside a Helm 4 plugin in the
/// shared directory loads no plugin, until Helm 4 uninstalls it.
#[test]
fn the_documented_helm_commands_run_as_written() {
    let blocks: Vec<Block> = ["README.md", "docs/install.md"]
        .into_iter()
        .flat_map(helm_blocks)
        .collect();
    let labels: Vec<&str> = blocks.iter().map(|b| b.label.as_str()).collect();
    for label in &labels {
        assert!(
            ["Helm 3", "Helm 4", "Helm 4 alone", "Helm 4 beside Helm 3"].contains(label),
            "unknown Helm block label `# {label}`"
        );
    }
    for needed in ["Helm 3", "Helm 4 alone", "Helm 4 beside Helm 3"] {
        assert!(
            labels.contains(&needed),
            "no `# {needed}` block: {labels:?}"
        );
    }

    let checkout = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    helm_support::copy_tree(
        &root.join("deploy/helm-plugin"),
        &checkout.path().join("deploy/helm-plugin"),
    );
    helm_support::copy_tree(&fixture_chart(), &checkout.path().join("chart"));
    let of = |label: &str| {
        blocks
            .iter()
            .filter(move |b| b.label == label)
            .collect::<Vec<_>>()
    };
    let mut ran = 0;

    // Helm 4 beside Helm 3, one home: Helm 4's blocks, then Helm 3's after them.
    let shared = tempfile::tempdir().unwrap();
    for block in of("Helm 4 beside Helm 3") {
        ran += run_block(block, &helm4(), checkout.path(), shared.path());
    }
    for block in of("Helm 3") {
        ran += run_block(block, &helm3(), checkout.path(), shared.path());
    }

    // Helm 4 alone, in its default plugins directory: a home for each block,
    // since each installs the plugin.
    let mut alone = None;
    for block in of("Helm 4 alone").into_iter().chain(of("Helm 4")) {
        let home = tempfile::tempdir().unwrap();
        ran += run_block(block, &helm4(), checkout.path(), home.path());
        alone = Some(home);
    }
    let alone = alone.unwrap();
    // There Helm 3 loads no plugin, which is why the docs keep them apart ...
    let out = run_line("helm version", &helm3(), checkout.path(), alone.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("failed to load plugins")
            && stderr.contains("unknown field \"apiVersion\""),
        "{stderr}"
    );
    // ... until Helm 4 uninstalls it (docs/install.md).
    let out = run_line(
        "helm plugin uninstall nvcf-worker",
        &helm4(),
        checkout.path(),
        alone.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run_line("helm version", &helm3(), checkout.path(), alone.path());
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    assert!(ran >= 10, "ran {ran} documented commands");
}
