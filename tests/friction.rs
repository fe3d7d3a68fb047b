//! What a new user runs into first, each with the real program involved: a closed
//! stdout, kubectl's plugin completion, kustomize's plugin home, missing or
//! conflicting settings, a terminal on stdin, directories that hold kustomize and
//! local-config files, config type errors, the inject report and templates.

use crate::helm_support;
use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};

use helm_support::{bin_dir, path_of};
use support::{objects, run, run_in, temp_tree, BIN};

const DEPLOYMENT: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: team-a}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web, nvcf.io/worker: \"true\"}}
    spec:
      containers: [{name: app, image: nginx}]
";

/// Runs the binary with a stdout whose reader is already gone.
fn with_closed_stdout(args: &[&str], stdin: &str) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let _ = std::io::Write::write_all(&mut input, stdin.as_bytes());
    drop(input);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_closed_stdout_is_success_everywhere() {
    let file = temp_tree(&[("d.yaml", DEPLOYMENT)]);
    let d = file.path().join("d.yaml");
    let d = d.to_str().unwrap();
    for args in [
        &["completion", "bash"][..],
        &["completion", "zsh"],
        &["man"],
        &["--help"],
        &["inject", "--help"],
        &["validate", d],
        &["validate", "-o", "sarif", d],
        &["inject", "-f", d, "--cluster-id", "c1"],
        &["inject", "-f", d, "--cluster-id", "c1", "-o", "json"],
    ] {
        let (code, stderr) = with_closed_stdout(args, "");
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    // As typed in a shell.
    let out = Command::new("sh")
        .args(["-c", &format!("'{BIN}' completion bash | head -1")])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn kubectl_completes_the_plugin() {
    let path = path_of(&[&bin_dir()]);
    let complete = |words: &[&str]| {
        let out = Command::new("kubectl")
            .arg("__complete")
            .arg("nvcf-worker")
            .args(words)
            .env("PATH", &path)
            .output()
            .expect("run kubectl");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let top = complete(&[""]);
    for sub in ["inject", "validate", "list", "cleanup", "audit", "describe"] {
        assert!(
            top.lines().any(|l| l.starts_with(&format!("{sub}\t"))),
            "{top}"
        );
    }
    assert!(
        top.ends_with(":4\n"),
        "no file completion among commands: {top}"
    );
    let flags = complete(&["inject", "--clu"]);
    assert!(flags.starts_with("--cluster-id\t"), "{flags}");
    let formats = complete(&["validate", "-o", ""]);
    assert!(formats.contains("sarif"), "{formats}");

    // A release archive's single binary, linked under the completion name.
    let links = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(BIN, links.path().join("kubectl_complete-nvcf_worker")).unwrap();
    std::os::unix::fs::symlink(BIN, links.path().join("kubectl-nvcf_worker")).unwrap();
    let out = Command::new("kubectl")
        .args(["__complete", "nvcf-worker", "inj"])
        .env("PATH", path_of(&[links.path()]))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("inject\t") && text.contains(":4"),
        "{text}"
    );
}

#[test]
fn install_kustomize_plugin_honours_kustomize_plugin_home() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("plugins");
    let xdg = tmp.path().join("xdg");
    let out = Command::new(BIN)
        .arg("install-kustomize-plugin")
        .env("KUSTOMIZE_PLUGIN_HOME", &home)
        .env("XDG_CONFIG_HOME", &xdg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let link = home.join("fn.nvcf.io/v1alpha1/workeridentity/WorkerIdentity");
    assert!(link.exists(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(!xdg.exists(), "wrote under XDG_CONFIG_HOME too");

    // Real kustomize finds it there.
    let overlay = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/kustomize-overlay/overlay");
    let built = Command::new("kubectl")
        .args(["kustomize", "--enable-alpha-plugins"])
        .arg(&overlay)
        .env("KUSTOMIZE_PLUGIN_HOME", &home)
        .env("XDG_CONFIG_HOME", &xdg)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    assert!(String::from_utf8_lossy(&built.stdout).contains("kind: ServiceAccount"));
}

#[test]
fn inject_names_cluster_id_and_flags_override_config() {
    let tmp = temp_tree(&[
        ("d.yaml", DEPLOYMENT),
        (
            "cfg.yaml",
            "apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nspec: {clusterID: from-file, expirationSeconds: 3600}\n",
        ),
        ("empty.yaml", "apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nspec: {}\n"),
        (
            "typed.yaml",
            "apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nspec: {clusterID: a, expirationSeconds: \"3600\"}\n",
        ),
    ]);
    let dir = Some(tmp.path());
    let out = run_in(dir, &["inject", "-f", "d.yaml"], b"");
    out.code(2);
    assert!(out.stderr.contains("--cluster-id"), "{out}");
    let out = run_in(
        dir,
        &["inject", "-f", "d.yaml", "--config", "empty.yaml"],
        b"",
    );
    out.code(2);
    assert!(
        out.stderr.contains("--cluster-id") && out.stderr.contains("empty.yaml"),
        "{out}"
    );

    let out = run_in(
        dir,
        &[
            "inject",
            "-f",
            "d.yaml",
            "--config",
            "cfg.yaml",
            "--cluster-id",
            "from-flag",
        ],
        b"",
    );
    out.ok();
    // The trio comes first, the Deployment last.
    let token = &objects(&out.stdout)[3]["spec"]["template"]["spec"]["volumes"][0]["projected"]
        ["sources"][0]["serviceAccountToken"];
    assert_eq!(token["audience"], "nvcf-icms:from-flag", "the flag wins");
    assert_eq!(
        token["expirationSeconds"], 3600,
        "the file's other keys stay"
    );

    // Type errors in the user's terms, naming the key.
    let out = run_in(
        dir,
        &["inject", "-f", "d.yaml", "--config", "typed.yaml"],
        b"",
    );
    out.code(2);
    assert!(
        out.stderr.contains("spec.expirationSeconds") && out.stderr.contains("whole number"),
        "{out}"
    );
    assert!(!out.stderr.contains("i64"), "{out}");
}

#[test]
fn no_path_on_a_terminal_is_a_usage_error() {
    // `script` gives the command a terminal as stdin; `timeout` turns a wait into
    // a failure instead of a hung test.
    for cmd in ["inject --cluster-id c1", "validate"] {
        let out = Command::new("timeout")
            .args([
                "20",
                "script",
                "-qec",
                &format!("'{BIN}' {cmd}"),
                "/dev/null",
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {text}");
        assert!(
            text.contains("no input") && text.contains("-f"),
            "{cmd}: {text}"
        );
    }
}

#[test]
fn inject_dir_leaves_hidden_and_local_config_out_and_reports_briefly() {
    let mut files = vec![
        ("app/deployment.yaml", DEPLOYMENT.to_string()),
        (".github/workflows/ci.yml", "on: push\njobs: {}\n".to_string()),
        (
            "app/fn-config.yaml",
            "apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nmetadata:\n  name: cfg\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\nspec: {clusterID: x}\n".to_string(),
        ),
        (
            "app/job.yaml",
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: once}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: a, image: busybox}]\n".to_string(),
        ),
    ];
    for i in 0..20 {
        files.push((
            Box::leak(format!("app/cm-{i:02}.yaml").into_boxed_str()),
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-{i}}}\n"),
        ));
    }
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let tmp = temp_tree(&refs);
    let out = run_in(
        Some(tmp.path()),
        &["inject", "-f", ".", "--cluster-id", "c1"],
        b"",
    );
    out.ok();
    let kinds = support::kinds_names(&objects(&out.stdout));
    assert!(
        !kinds.iter().any(|k| k.starts_with("WorkerIdentity")),
        "{kinds:?}"
    );
    assert_eq!(kinds.len(), 1 + 3 + 1 + 20, "{kinds:?}");
    assert_eq!(
        out.stderr,
        "deployment/web injected\n\
         serviceaccount/nvcf-worker generated\n\
         role/nvcf-worker generated\n\
         rolebinding/nvcf-worker generated\n\
         job/once skipped: not selected\n\
         2 workloads: 1 injected, 0 unchanged, 1 skipped; 3 objects generated; 20 other objects passed through unchanged; 2 files or objects left out\n\
         left out: ./.github: hidden (kpt reads it, this tool does not; name it with -f to read it)\n\
         left out: ./app/fn-config.yaml: document 1 (WorkerIdentity cfg): local config (config.kubernetes.io/local-config: \"true\"), never applied; name the file with -f to take it whole\n\
         note: ICMS accepts a worker token only for pods the NVCF agent registers (pods it makes itself); see README, \"When ICMS accepts the token\"\n",
    );
    // A file named on its own is taken whole.
    let out = run_in(
        Some(tmp.path()),
        &[
            "inject",
            "-f",
            "app/fn-config.yaml",
            "-f",
            "app/deployment.yaml",
            "--cluster-id",
            "c1",
        ],
        b"",
    );
    out.ok();
    assert!(out.stdout.contains("kind: WorkerIdentity"), "{out}");
}

#[test]
fn templates_are_told_to_render_first() {
    let template = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name }}\n";
    let out = run(&["inject", "-f", "-", "--cluster-id", "c1"], template);
    out.code(1);
    assert!(
        out.stderr.contains("render it first") && out.stderr.contains("helm template"),
        "{out}"
    );
    assert!(out.stdout.is_empty());
    let out = run(&["validate", "-"], template);
    out.code(1);
    assert!(
        out.stdout.contains("NVW001") && out.stdout.contains("render it first"),
        "{out}"
    );
    // Valid YAML that merely mentions braces in a value is no template problem.
    let fine = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {t: \"{{ x }}\"}\n";
    run(&["validate", "-"], fine).ok();
}

/// `docs/guarantees.md`'s table is `error::Exit`, and each kind of mistake exits
/// with the same code on every face: a usage or configuration mistake is 2 from a
/// flag, a `--config` file, a KRM functionConfig or the kustomize plugin's config
/// alike; a finding or input that cannot be read is 1.
#[test]
fn exit_codes_are_named_once_and_the_same_on_every_face() {
    use kubectl_nvcf_worker::error::Exit;
    let named = |e: Exit| match e {
        // Exhaustive: a new exit must be named here and in the table.
        Exit::Success => "Success",
        Exit::Problem => "Problem",
        Exit::Usage => "Usage",
        Exit::Internal => "Internal",
    };
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/guarantees.md"))
        .unwrap();
    let table: Vec<(i32, String)> = doc
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells.len() == 5)
                .then(|| cells[1].parse().ok().map(|c| (c, cells[2].to_string())))
                .flatten()
        })
        .collect();
    let want: Vec<(i32, String)> = Exit::ALL
        .iter()
        .map(|&e| (e.code(), named(e).to_string()))
        .collect();
    assert_eq!(
        table, want,
        "docs/guarantees.md's exit codes are error::Exit's"
    );

    let forged = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec:\n  serviceAccountName: nvcf-worker-x\n  containers: [{name: a, image: i}]\n";
    let cfg = |spec: &str| {
        format!("apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nspec: {spec}\n")
    };
    let tmp = temp_tree(&[
        ("d.yaml", DEPLOYMENT),
        ("forged.yaml", forged),
        ("no-cluster.yaml", &cfg("{}")),
        ("short.yaml", &cfg("{clusterID: c1, expirationSeconds: 60}")),
        ("ok.yaml", &cfg("{clusterID: c1}")),
        ("validator.yaml", &cfg("{mode: validate}")),
    ]);
    let dir = Some(tmp.path());
    let plugin = tmp.path().join("WorkerIdentity");
    std::os::unix::fs::symlink(BIN, &plugin).unwrap();
    let legacy = |config: &str, stdin: &str| {
        let out = support::pipe(
            Command::new(&plugin).arg(tmp.path().join(config)),
            stdin.as_bytes(),
        );
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let krm_with = |spec: &str, stream: &str| {
        let list = support::resource_list(stream, &cfg(spec));
        support::krm(&list)
    };
    let usage = Exit::Usage.code();
    let problem = Exit::Problem.code();
    // (face, what, exit, stderr or results)
    let cases: Vec<(&str, &str, Option<i32>, String)> = vec![
        {
            let o = run_in(dir, &["inject", "-f", "d.yaml"], b"");
            ("cli", "no cluster ID (flags)", Some(o.code), o.stderr)
        },
        {
            let o = run_in(
                dir,
                &["inject", "-f", "d.yaml", "--config", "no-cluster.yaml"],
                b"",
            );
            ("cli", "no cluster ID (--config)", Some(o.code), o.stderr)
        },
        {
            let o = run_in(
                dir,
                &[
                    "inject",
                    "-f",
                    "d.yaml",
                    "--cluster-id",
                    "c1",
                    "--expiration-seconds",
                    "60",
                ],
                b"",
            );
            (
                "cli",
                "token lifetime out of range (flag)",
                Some(o.code),
                o.stderr,
            )
        },
        {
            let o = run_in(
                dir,
                &["inject", "-f", "d.yaml", "--config", "short.yaml"],
                b"",
            );
            (
                "cli",
                "token lifetime out of range (--config)",
                Some(o.code),
                o.stderr,
            )
        },
        {
            let o = krm_with("{}", DEPLOYMENT);
            (
                "krm",
                "no cluster ID (functionConfig)",
                Some(o.code),
                o.stdout,
            )
        },
        {
            let o = krm_with("{clusterID: c1, expirationSeconds: 60}", DEPLOYMENT);
            (
                "krm",
                "token lifetime out of range (functionConfig)",
                Some(o.code),
                o.stdout,
            )
        },
        {
            let (code, err) = legacy("no-cluster.yaml", DEPLOYMENT);
            (
                "kustomize plugin",
                "no cluster ID (plugin config)",
                code,
                err,
            )
        },
        {
            let (code, err) = legacy("short.yaml", DEPLOYMENT);
            (
                "kustomize plugin",
                "token lifetime out of range (plugin config)",
                code,
                err,
            )
        },
    ];
    for (face, what, code, said) in &cases {
        assert_eq!(
            *code,
            Some(usage),
            "{face}: {what} is a usage mistake: {said}"
        );
        assert!(
            said.contains("clusterID")
                || said.contains("expirationSeconds")
                || said.contains("--expiration-seconds"),
            "{face}: {what}: names the setting: {said}"
        );
    }
    let problems: Vec<(&str, &str, Option<i32>, String)> = vec![
        {
            let o = run_in(dir, &["validate", "forged.yaml"], b"");
            ("cli", "a finding (validate)", Some(o.code), o.stdout)
        },
        {
            let o = run_in(
                dir,
                &["inject", "--cluster-id", "c1", "-f", "forged.yaml"],
                b"",
            );
            ("cli", "a finding (inject)", Some(o.code), o.stderr)
        },
        {
            let o = run_in(dir, &["validate", "gone.yaml"], b"");
            (
                "cli",
                "an unreadable file (validate)",
                Some(o.code),
                o.stderr,
            )
        },
        {
            let o = run_in(
                dir,
                &["inject", "--cluster-id", "c1", "-f", "gone.yaml"],
                b"",
            );
            ("cli", "an unreadable file (inject)", Some(o.code), o.stderr)
        },
        {
            let o = krm_with("{clusterID: c1}", forged);
            ("krm", "a finding", Some(o.code), o.stdout)
        },
        {
            let (code, err) = legacy("ok.yaml", forged);
            ("kustomize plugin", "a finding (transformer)", code, err)
        },
        {
            let (code, err) = legacy("validator.yaml", forged);
            ("kustomize plugin", "a finding (validator)", code, err)
        },
    ];
    for (face, what, code, said) in &problems {
        assert_eq!(*code, Some(problem), "{face}: {what}: {said}");
        assert!(
            said.contains("NVW") || said.contains("gone.yaml"),
            "{face}: {what}: says why: {said}"
        );
    }
    let clean = krm_with("{clusterID: c1}", DEPLOYMENT);
    assert_eq!(clean.code, Exit::Success.code(), "{clean}");
}
