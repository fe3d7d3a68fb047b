//! What only a real control plane can prove (issue 10, part 4), besides the UID
//! precondition, server dry run and deploy/ RBAC checks in tests/live_cleanup.rs
//! and tests/live_deploy.rs: the worker token contract against the real
//! TokenRequest and TokenReview APIs, and `inject` output that the real server
//! accepts under strict field validation with no warnings.

use crate::live_support;

use std::path::Path;
use std::process::Command;

use live_support::*;
use serde_json::{json, Value};

/// The real TokenReview verdict on `token` for `audiences`.
fn review(c: &Cluster, token: &str, audiences: &[&str]) -> Value {
    c.admin
        .call(
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            Some(
                &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "spec": {"token": token, "audiences": audiences}}),
            ),
        )
        .expect("TokenReview")["status"]
        .clone()
}

#[test]
fn a_worker_token_passes_token_review_for_its_audience_until_cleanup_deletes_the_account() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-tok");
    let audience = "nvcf-icms:prod-1";
    // What the projected volume asks the kubelet for: audience and 900 s.
    let token = c.token(&ns, "nvcf-worker-tok", &[audience], 900);

    let ok_review = review(&c, &token, &[audience]);
    assert_eq!(ok_review["authenticated"], true, "{ok_review}");
    assert_eq!(
        ok_review["user"]["username"],
        format!("system:serviceaccount:{ns}:nvcf-worker-tok")
    );
    assert_eq!(
        ok_review["user"]["uid"],
        c.uid("ServiceAccount", &ns, "nvcf-worker-tok")
    );
    assert_eq!(ok_review["audiences"], json!([audience]));
    // Look-alikes: another cluster's audience, and the API server's own.
    for other in [&["nvcf-icms:prod-2"][..], &[controlplane::ISSUER]] {
        let r = review(&c, &token, other);
        assert_ne!(r["authenticated"], true, "{other:?}: {r}");
    }

    let out = ok(&c.run(&["cleanup", "--yes", "--min-age", "0s"]));
    assert!(out.contains("deleted: 1 identities (3 objects)"), "{out}");
    // kube-apiserver caches a successful token authentication for 10 s
    // (--authentication-token-cache-ttl's default), then looks the account up again.
    let deleted = std::time::Instant::now();
    let gone = loop {
        let r = review(&c, &token, &[audience]);
        if r["authenticated"] != true {
            break r;
        }
        assert!(
            deleted.elapsed() < std::time::Duration::from_secs(30),
            "the token of a deleted account still passes after 30 s: {r}"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    };
    println!(
        "token refused {:.1?} after cleanup: {gone}",
        deleted.elapsed()
    );
    assert!(
        gone["error"]
            .as_str()
            .unwrap_or("")
            .contains("nvcf-worker-tok"),
        "{gone}"
    );
}

/// Runs `inject` on files and returns its stdout.
fn inject(files: &[&Path], stdin: Option<&str>) -> String {
    inject_as(files, stdin, &[])
}

/// `inject` with `extra` arguments (`--naming per-workload`).
fn inject_as(files: &[&Path], stdin: Option<&str>, extra: &[&str]) -> String {
    let mut cmd = Command::new(BIN);
    cmd.args(["inject", "--cluster-id", "prod-1"]).args(extra);
    for f in files {
        cmd.arg("-f").arg(f);
    }
    let out = match stdin {
        None => output_within(cmd, std::time::Duration::from_secs(60)),
        Some(text) => {
            use std::io::Write;
            cmd.args(["-f", "-"]).stdin(std::process::Stdio::piped());
            cmd.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let mut child = cmd.spawn().unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
            child.wait_with_output().unwrap()
        }
    };
    ok(&out)
}

/// `kubectl apply --dry-run=server --validate=strict`: must pass without a warning.
fn server_accepts(c: &Cluster, what: &str, yaml: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("objects.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = kubectl(
        dir.path(),
        &c.admin_kubeconfig,
        &[
            "apply",
            "--dry-run=server",
            "--validate=strict",
            "-f",
            file.to_str().unwrap(),
        ],
    );
    let (text, err) = (stdout(&out), stderr(&out));
    assert!(
        out.status.success(),
        "{what}: kubectl apply refused it:\n{err}\n{text}"
    );
    assert!(
        !err.to_lowercase().contains("warning"),
        "{what}: the server warned:\n{err}"
    );
    assert!(text.contains("(server dry run)"), "{what}: {text}");
    println!("{what}:\n{text}");
}

fn example(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(path)
}

#[test]
fn inject_output_of_every_example_passes_strict_server_validation() {
    let c = Cluster::start();
    // The examples name their namespaces; this test owns them on this control plane.
    for ns in ["nvcf-backend", "nvcf-staging"] {
        c.namespace(ns);
    }
    let cases: [(&str, Vec<&str>); 2] = [
        (
            "inject-deployment",
            vec!["deployment.yaml", "frontend.yaml"],
        ),
        ("cronjob", vec!["cronjob.yaml"]),
    ];
    for (name, files) in cases {
        let paths: Vec<_> = files.iter().map(|f| example(name).join(f)).collect();
        let refs: Vec<&Path> = paths.iter().map(|p| p.as_path()).collect();
        let output = inject(&refs, None);
        assert!(
            output.contains("nvcf-worker-"),
            "{name}: nothing injected\n{output}"
        );
        server_accepts(&c, name, &output);
    }
    // The overlay rendered by kustomize through the plugin (tests/examples.rs
    // checks this file against a fresh render).
    let rendered =
        std::fs::read_to_string(example("kustomize-overlay/.expected/kustomize.yaml")).unwrap();
    server_accepts(&c, "kustomize-overlay", &rendered);
}

#[test]
fn inject_output_for_every_built_in_pod_bearing_kind_passes_strict_server_validation() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    let template = |labels: &str| {
        format!(
            "metadata:\n  labels: {{{labels}}}\nspec:\n  containers:\n  - name: app\n    image: registry.example/app:1\n"
        )
    };
    let indent = |text: &str, n: usize| {
        text.lines()
            .map(|l| format!("{}{l}\n", " ".repeat(n)))
            .collect::<String>()
    };
    let pod_template = indent(&template("app: w, nvcf.io/worker: \"true\""), 4);
    let selector = "  selector:\n    matchLabels: {app: w}\n";
    let mut manifests = String::new();
    for kind in ["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"] {
        manifests.push_str(&format!(
            "---\napiVersion: apps/v1\nkind: {kind}\nmetadata:\n  name: w-{l}\n  namespace: {ns}\nspec:\n{selector}  template:\n{pod_template}",
            l = kind.to_lowercase()
        ));
    }
    manifests.push_str(&format!(
        "---\napiVersion: v1\nkind: ReplicationController\nmetadata:\n  name: w-rc\n  namespace: {ns}\nspec:\n  selector: {{app: w}}\n  template:\n{pod_template}"
    ));
    let job_template = indent(
        &template("nvcf.io/worker: \"true\"").replace("spec:\n", "spec:\n  restartPolicy: Never\n"),
        4,
    );
    manifests.push_str(&format!(
        "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: w-job\n  namespace: {ns}\nspec:\n  template:\n{job_template}"
    ));
    manifests.push_str(&format!(
        "---\napiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: w-cron\n  namespace: {ns}\nspec:\n  schedule: \"0 * * * *\"\n  suspend: true\n  jobTemplate:\n    spec:\n      template:\n{}",
        indent(&job_template, 4)
    ));
    manifests.push_str(&format!(
        "---\napiVersion: v1\nkind: PodTemplate\nmetadata:\n  name: w-podtemplate\n  namespace: {ns}\ntemplate:\n{}",
        indent(&template("nvcf.io/worker: \"true\""), 2)
    ));
    manifests.push_str(&format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: w-pod\n  namespace: {ns}\n{}",
        template("nvcf.io/worker: \"true\"").replacen("metadata:\n", "", 1)
    ));
    // Under both contracts: each workload its own trio (nine), or the namespace's
    // one nvcf-worker trio (the default).
    for (naming, pod_account, accounts) in [
        ("per-workload", "nvcf-worker-w-pod", 9),
        ("per-namespace", "nvcf-worker", 1),
    ] {
        let output = inject_as(&[], Some(&manifests), &["--naming", naming]);
        // A bare Pod is admitted only once its ServiceAccount exists (the
        // ServiceAccount admission plugin), which a dry run never creates: the
        // account is made for real first, from the output itself.
        let account = output
            .split("\n---\n")
            .find(|d| {
                d.contains("kind: ServiceAccount") && d.contains(&format!("name: {pod_account}\n"))
            })
            .expect("the Pod's ServiceAccount in the output");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("account.yaml");
        std::fs::write(&file, account).unwrap();
        ok(&kubectl(
            dir.path(),
            &c.admin_kubeconfig,
            &["apply", "-f", file.to_str().unwrap()],
        ));
        assert_eq!(
            output.matches("\nkind: ServiceAccount").count(),
            accounts,
            "{naming}: {output}"
        );
        server_accepts(&c, &format!("every pod-bearing kind, {naming}"), &output);
    }
}
