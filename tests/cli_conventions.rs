//! The conventions of the tools next to it (issue 25 item 10): `--diff` exits as
//! `kubectl diff` does, `--quiet`, a `version` command, a man page whose synopsis
//! names the values, a hint for a plain manifest piped with no command, UTF-16
//! files read (and written back) as kubectl's decoder reads them, and no secret or
//! panic from a bad token or kubeconfig.

use crate::support;

use support::{at, find, kubectl_objects_of, objects, run, run_in, temp_tree};

const WORKER: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    metadata: {labels: {nvcf.io/worker: \"true\"}}
    spec: {containers: [{name: app, image: nginx}]}
";

#[test]
fn quiet_drops_the_report_and_keeps_warnings_and_errors() {
    let out = run(&["inject", "-q", "--cluster-id", "c1", "-f", "-"], WORKER);
    out.ok();
    // The default contract: the namespace's one nvcf-worker.
    let objs = objects(&out.stdout);
    assert_eq!(
        at(find(&objs, "Deployment", "web"), "spec.template.spec")["serviceAccountName"],
        "nvcf-worker",
        "{out}"
    );
    assert_eq!(out.stderr, "", "{out}");
    let loud = run(&["inject", "--cluster-id", "c1", "-f", "-"], WORKER);
    assert!(loud.stderr.contains("deployment/web injected"), "{loud}");
    assert_eq!(loud.stdout, out.stdout, "--quiet changes stderr only");
    // An error still speaks.
    let forged = WORKER.replace(
        "spec: {containers",
        "spec: {serviceAccountName: nvcf-worker-x, containers",
    );
    let bad = run(&["inject", "-q", "--cluster-id", "c1", "-f", "-"], &forged);
    bad.code(1);
    assert!(bad.stderr.contains("NVW10"), "{bad}");
    assert_eq!(bad.stdout, "", "{bad}");
}

#[test]
fn version_prints_the_package_version_in_each_format() {
    let want = env!("CARGO_PKG_VERSION");
    let plain = run(&["version"], "");
    plain.ok();
    assert_eq!(plain.stdout, format!("kubectl-nvcf-worker {want}\n"));
    let flag = run(&["--version"], "");
    assert!(flag.stdout.contains(want), "{flag}");
    let json: serde_json::Value =
        serde_json::from_str(&run(&["version", "-o", "json"], "").stdout).unwrap();
    assert_eq!(json, serde_json::json!({ "version": want }));
    let yaml = run(&["version", "-o", "yaml"], "");
    assert_eq!(
        support::docs(&yaml.stdout),
        vec![serde_json::json!({ "version": want })]
    );
}

/// Every `--flag <VALUE>` the help names appears in the man page's synopsis with
/// its value, on the main page and on each page `man --dir` writes.
#[test]
fn man_synopsis_names_every_value() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    run(&["man", "--dir", d], "").ok();
    let roff = |s: &str| s.replace('-', "\\-");
    let mut checked = 0;
    for command in [
        "inject", "uninject", "validate", "list", "cleanup", "audit", "policy", "version",
    ] {
        let page =
            std::fs::read_to_string(dir.path().join(format!("kubectl-nvcf-worker-{command}.1")))
                .unwrap_or_else(|e| panic!("no page for {command}: {e}"));
        let synopsis = page
            .split(".SH SYNOPSIS\n")
            .nth(1)
            .and_then(|s| s.lines().next())
            .unwrap_or_else(|| panic!("{command}: no synopsis\n{page}"));
        let help = run(&[command, "--help"], "").stdout;
        for line in help.lines() {
            // `  -f, --filename <PATH>  ...` or `      --cluster-id <ID>  ...`
            let line = line.trim_start();
            let Some(rest) = line.split(", ").last().filter(|_| line.starts_with('-')) else {
                continue;
            };
            let mut words = rest.split_whitespace();
            let (Some(long), Some(value)) = (words.next(), words.next()) else {
                continue;
            };
            if !(long.starts_with("--") && value.starts_with('<') && value.ends_with('>')) {
                continue;
            }
            let value = value.trim_matches(['<', '>']);
            let want = format!("\\fB{}\\fR \\fI{}\\fR", roff(long), roff(value));
            assert!(
                synopsis.contains(&want),
                "{command}: {want} not in\n{synopsis}"
            );
            checked += 1;
        }
    }
    assert!(checked > 30, "only {checked} options with values seen");
    let main = run(&["man"], "").stdout;
    assert!(
        main.contains(".SH SYNOPSIS\n\\fBkubectl nvcf\\-worker\\fR"),
        "{main}"
    );
}

#[test]
fn a_plain_manifest_with_no_command_is_told_which_command_to_run() {
    let out = run(&[], WORKER);
    out.code(1);
    assert!(out.stderr.contains("expected ResourceList"), "{out}");
    assert!(
        out.stderr.contains("kubectl nvcf-worker inject -f -"),
        "{out}"
    );
    let two = run(&[], &format!("{WORKER}---\n{WORKER}"));
    assert!(
        two.stderr.contains("kubectl nvcf-worker inject -f -"),
        "{two}"
    );
    // A ResourceList gets no hint: it is what the function reads.
    let rl = support::resource_list(WORKER, "apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nmetadata: {name: x}\nspec: {clusterID: c1}\n");
    let fine = support::krm(&rl);
    fine.ok();
    assert!(!fine.stderr.contains("inject -f -"), "{fine}");
}

fn utf16(text: &str, le: bool) -> Vec<u8> {
    let mut out = if le {
        vec![0xFF, 0xFE]
    } else {
        vec![0xFE, 0xFF]
    };
    for u in text.encode_utf16() {
        out.extend(if le { u.to_le_bytes() } else { u.to_be_bytes() });
    }
    out
}

/// kubectl's decoder (cli-runtime's file visitor) reads a file behind a UTF-16
/// byte order mark; so does the tool, and a file rewritten in place keeps its
/// encoding, which kubectl then reads as the stream the tool printed.
#[test]
fn utf16_files_read_as_kubectl_reads_them_and_stay_utf16() {
    for le in [true, false] {
        let bytes = utf16(WORKER, le);
        let kubectl = kubectl_objects_of(&[&bytes]).pop().unwrap();
        let kubectl = kubectl.unwrap_or_else(|e| panic!("kubectl refuses UTF-16 (le {le}): {e}"));
        assert_eq!(kubectl[0]["metadata"]["name"], "web");
        let tmp = temp_tree(&[]);
        let file = tmp.path().join("web.yaml");
        std::fs::write(&file, &bytes).unwrap();
        let name = file.to_str().unwrap();
        run(&["validate", name], "").ok();
        let printed = run(&["inject", "-q", "--cluster-id", "c1", "-f", name], "");
        printed.ok();
        run(
            &["inject", "-q", "-i", "--cluster-id", "c1", "-f", name],
            "",
        )
        .ok();
        let written = std::fs::read(&file).unwrap();
        assert_eq!(&written[..2], &bytes[..2], "the byte order mark stays");
        assert_eq!(
            written,
            utf16(&printed.stdout, le),
            "in place = printed, in UTF-16"
        );
        let read = kubectl_objects_of(&[&written, printed.stdout.as_bytes()]);
        assert_eq!(read[0], read[1]);
        assert_eq!(read[0].as_ref().unwrap().len(), 4);
        run(&["validate", name], "").ok();
    }
    // Not UTF-16 behind the mark: refused, naming the file.
    let tmp = temp_tree(&[]);
    let file = tmp.path().join("odd.yaml");
    std::fs::write(&file, [0xFF, 0xFE, b'a']).unwrap();
    let out = run(&["validate", file.to_str().unwrap()], "");
    out.code(1);
    assert!(
        out.stderr.contains("odd.yaml") && out.stderr.contains("UTF-16"),
        "{out}"
    );
}

#[test]
fn a_token_with_a_line_break_is_refused_without_a_panic_or_the_token() {
    let out = run(
        &[
            "list",
            "--token",
            "abc\nSECRETPART",
            "--server",
            "https://127.0.0.1:1",
        ],
        "",
    );
    out.code(2);
    assert!(
        out.stderr.contains("--token") && out.stderr.contains("line break"),
        "{out}"
    );
    assert!(
        !out.stderr.contains("SECRETPART") && !out.stderr.contains("panicked"),
        "{out}"
    );
    // The same token in a kubeconfig: the file's problem, exit 1.
    let tmp = temp_tree(&[(
        "kubeconfig",
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n\
         users: [{name: u, user: {token: \"abc\\nSECRETPART\"}}]\n\
         contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
    )]);
    let out = run_in(
        Some(tmp.path()),
        &["list", "--kubeconfig", "kubeconfig"],
        b"",
    );
    out.code(1);
    assert!(out.stderr.contains("kubeconfig user \"u\""), "{out}");
    assert!(
        !out.stderr.contains("SECRETPART") && !out.stderr.contains("panicked"),
        "{out}"
    );
}

/// kube's YAML errors quote the lines around the fault; a kubeconfig's lines are
/// tokens and keys. The message keeps the position and drops the quote.
#[test]
fn a_bad_kubeconfig_is_named_by_line_without_quoting_its_secrets() {
    let tmp = temp_tree(&[(
        "kubeconfig",
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n    insecure-skip-tls-verify: notabool\n\
         users:\n- name: u\n  user:\n    token: SECRET-TOKEN-abc\n    client-key-data: S0VZLURBVEE=\n\
         contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n",
    )]);
    let out = run_in(
        Some(tmp.path()),
        &["list", "--kubeconfig", "kubeconfig"],
        b"",
    );
    out.code(1);
    assert!(
        out.stderr.contains("kubeconfig") && out.stderr.contains("line 7"),
        "{out}"
    );
    for secret in ["SECRET-TOKEN-abc", "S0VZLURBVEE=", "users:", "server:"] {
        assert!(!out.stderr.contains(secret), "{secret} quoted:\n{out}");
    }
}

/// Nothing to read is refused on every command, as `kubectl apply` refuses it: an
/// empty stdin (an upstream `helm template` that printed nothing) and files with
/// no document. Other YAML (a CI workflow in a pre-commit run) is skipped by
/// validate, and an empty file beside a manifest is no problem.
#[test]
fn empty_input_is_refused_by_validate_too() {
    for input in ["", "\n\n", "# only a comment\n---\n"] {
        let out = run(&["validate", "-"], input);
        out.code(1);
        assert!(
            out.stderr.contains("<stdin>") && out.stderr.contains("no Kubernetes objects"),
            "{input:?}: {out}"
        );
        let inject = run(&["inject", "--cluster-id", "c1", "-f", "-"], input);
        inject.code(1);
        assert!(inject.stderr.contains("no Kubernetes objects"), "{inject}");
    }
    let tmp = temp_tree(&[
        ("empty.yaml", ""),
        ("web.yaml", WORKER),
        (
            "ci.yaml",
            "on: [push]\njobs: {test: {runs-on: ubuntu-latest}}\n",
        ),
    ]);
    let out = run_in(Some(tmp.path()), &["validate", "empty.yaml"], b"");
    out.code(1);
    assert!(
        out.stderr.contains("empty.yaml") && out.stderr.contains("no Kubernetes objects"),
        "{out}"
    );
    run_in(
        Some(tmp.path()),
        &["validate", "empty.yaml", "web.yaml"],
        b"",
    )
    .ok();
    run_in(Some(tmp.path()), &["validate", "ci.yaml"], b"").ok();
}

/// YAML that is no Kubernetes object, in a directory given to inject: the error
/// names the file and says how kpt would leave it out (`.krmignore`), which works.
#[test]
fn other_yaml_in_a_directory_is_told_to_be_left_out() {
    let tmp = temp_tree(&[
        ("pkg/settings.yaml", "name: my-app\nversion: 2\n"),
        ("pkg/web.yaml", WORKER),
    ]);
    let out = run_in(
        Some(tmp.path()),
        &["inject", "--cluster-id", "c1", "-f", "pkg"],
        b"",
    );
    out.code(1);
    assert!(
        out.stderr.contains("pkg/settings.yaml")
            && out.stderr.contains("missing apiVersion")
            && out.stderr.contains(".krmignore"),
        "{out}"
    );
    std::fs::write(tmp.path().join("pkg/.krmignore"), "settings.yaml\n").unwrap();
    let out = run_in(
        Some(tmp.path()),
        &["inject", "-q", "--cluster-id", "c1", "-f", "pkg"],
        b"",
    );
    out.ok();
    let deployment = support::objects(&out.stdout)
        .into_iter()
        .find(|o| o["kind"] == "Deployment")
        .unwrap();
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"], "nvcf-worker",
        "{out}"
    );
    // Named on its own, the file is the user's choice: no hint about packages.
    let out = run_in(
        Some(tmp.path()),
        &["inject", "--cluster-id", "c1", "-f", "pkg/settings.yaml"],
        b"",
    );
    out.code(1);
    assert!(!out.stderr.contains(".krmignore"), "{out}");
}
