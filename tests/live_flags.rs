//! kubectl's connection flags, `-l`, `describe pod/NAME` and the versioned
//! `-o json|yaml` documents of every live command, end to end against the real
//! control plane; identity flags through the real kubectl's plugin dispatch.

use crate::live_support;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use live_support::*;
use serde_json::{json, Value};

const API_VERSION: &str = "report.nvcf.io/v1alpha1";

/// `kubectl nvcf-worker ARGS` through kubectl's plugin lookup, with the admin's
/// kubeconfig straight to the server (kubectl hands every flag to the plugin).
fn via_kubectl(c: &Cluster, args: &[&str]) -> Output {
    let dir = plugin_dir("kubectl-nvcf_worker");
    let mut all = vec!["nvcf-worker"];
    all.extend_from_slice(args);
    kubectl(dir.path(), &c.admin_kubeconfig, &all)
}

/// The plugin with no kubeconfig anywhere and not in a cluster: only the flags.
fn run_bare(args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("HOME", home.path())
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT");
    output_within(cmd, Duration::from_secs(120))
}

fn failed(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(1),
        "stdout:\n{}\nstderr:\n{}",
        stdout(o),
        stderr(o)
    );
    stderr(o)
}

/// A ServiceAccount `name` in the test namespace, bound to the built-in `admin`
/// ClusterRole there when `admin` is set; returns a TokenRequest token for it.
fn account(c: &Cluster, name: &str, admin: bool) -> String {
    let ns = &c.ns;
    c.create(json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": ns}}));
    if admin {
        grant_admin(
            c,
            &format!("{name}-admin"),
            json!({"kind": "ServiceAccount", "name": name, "namespace": ns}),
        );
    }
    c.token(ns, name, &[], 3600)
}

/// The built-in `admin` in the namespace, and `list podtemplates`, which it
/// lacks and `list` and `cleanup` read (a PodTemplate's account is in use).
fn grant_admin(c: &Cluster, binding: &str, subject: Value) {
    c.create(json!({"apiVersion": RBAC, "kind": "RoleBinding",
        "metadata": {"name": binding, "namespace": c.ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
        "subjects": [subject.clone()]}));
    let role = format!("{binding}-podtemplates");
    c.create(json!({"apiVersion": RBAC, "kind": "Role",
        "metadata": {"name": role, "namespace": c.ns},
        "rules": [{"apiGroups": [""], "resources": ["podtemplates"], "verbs": ["list"]}]}));
    c.create(json!({"apiVersion": RBAC, "kind": "RoleBinding",
        "metadata": {"name": role, "namespace": c.ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
        "subjects": [subject]}));
}

/// A loopback port nothing listens on.
fn dead_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    port
}

#[test]
fn an_unreachable_server_is_named_in_the_error() {
    let c = Cluster::start();
    let server = format!("https://127.0.0.1:{}", dead_port());
    // The kubeconfig's own server, unreachable, is named the same way.
    let kubeconfig = c.dir.path().join("dead.kubeconfig");
    std::fs::write(
        &kubeconfig,
        std::fs::read_to_string(&c.admin_kubeconfig)
            .unwrap()
            .replace(&c.cp.url, &server),
    )
    .unwrap();
    // Each command spends its retries' backoff (about 3 s) on the refused
    // connection: they run side by side.
    std::thread::scope(|s| {
        let by_flag: Vec<_> = [
            &["list"][..],
            &["audit"],
            &["cleanup"],
            &["describe", "pod/p"],
        ]
        .into_iter()
        .map(|command| {
            let (c, server) = (&c, &server);
            s.spawn(move || {
                let mut args = command.to_vec();
                args.extend(["--server", server]);
                (command, failed(&via_kubectl(c, &args)))
            })
        })
        .collect();
        let by_kubeconfig = s.spawn(|| failed(&run_with(&kubeconfig, &["list"])));
        for handle in by_flag {
            let (command, err) = handle.join().unwrap();
            assert!(
                err.contains(&format!("cannot reach the server {server}"))
                    && err.contains("Connection refused"),
                "{command:?}: {err}"
            );
        }
        let err = by_kubeconfig.join().unwrap();
        assert!(
            err.contains(&format!("cannot reach the server {server}")),
            "{err}"
        );
    });
}

#[test]
fn as_impersonates_a_user_and_the_denial_names_the_permission() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-gone");
    let user = format!("alice-{}", c.id);
    // The admin certificate, impersonating a user with no grants: the real RBAC denial.
    let err = failed(&via_kubectl(&c, &["list", "--as", &user]));
    assert!(
        err.contains("forbidden: the account may not list")
            && err.contains(&format!("in namespace \"{ns}\""))
            && err.contains(&format!("User \"{user}\" cannot list resource")),
        "{err}"
    );
    // --as-group adds a group that is granted admin in the namespace.
    let group = format!("janitors-{}", c.id);
    grant_admin(
        &c,
        "janitors",
        json!({"kind": "Group", "name": group, "apiGroup": "rbac.authorization.k8s.io"}),
    );
    let out = ok(&via_kubectl(
        &c,
        &[
            "list",
            "--min-age",
            "0s",
            "--as",
            &user,
            "--as-group",
            &group,
        ],
    ));
    assert!(
        out.contains("nvcf-worker-gone") && out.contains("orphaned"),
        "{out}"
    );
    // A group alone impersonates nobody: the API server would refuse it, so do we.
    let out = via_kubectl(&c, &["list", "--as-group", &group]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--as-group needs --as"),
        "{}",
        stderr(&out)
    );
}

/// Who kubectl itself is with this kubeconfig and these flags.
fn kubectl_whoami(kubeconfig: &std::path::Path, flags: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ][..],
        flags,
    ]
    .concat();
    ok(&kubectl(dir.path(), kubeconfig, &args))
}

#[test]
fn token_replaces_the_kubeconfig_token_as_kubectl_does() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-gone");
    let nobody = account(&c, "nobody", false);
    let janitor = account(&c, "janitor", true);
    let as_nobody =
        c.cp.token_kubeconfig(&format!("nobody-{}", c.id), &nobody, Some(&ns));
    let as_janitor =
        c.cp.token_kubeconfig(&format!("janitor-{}", c.id), &janitor, Some(&ns));
    let sa = |name: &str| format!("system:serviceaccount:{ns}:{name}");
    // The kubeconfig's token, replaced by the flag's: kubectl and the plugin agree.
    assert_eq!(
        kubectl_whoami(&as_janitor, &["--token", &nobody]),
        sa("nobody")
    );
    let err = failed(&run_with(&as_janitor, &["cleanup", "--token", &nobody]));
    assert!(err.contains(&sa("nobody")), "{err}");
    assert_eq!(
        kubectl_whoami(&as_nobody, &["--token", &janitor]),
        sa("janitor")
    );
    let dir = plugin_dir("kubectl-nvcf_worker");
    let out = ok(&kubectl(
        dir.path(),
        &as_nobody,
        &[
            "nvcf-worker",
            "cleanup",
            "--min-age",
            "0s",
            "--yes",
            "--token",
            &janitor,
        ],
    ));
    assert!(out.contains("deleted: 1 identities (3 objects)"), "{out}");
    assert_eq!(c.members(&ns, "nvcf-worker-gone"), 0);
    // Over a client certificate kubectl stays the certificate's user (the server
    // authenticates it first); so does the plugin.
    assert_eq!(
        kubectl_whoami(&c.admin_kubeconfig, &["--token", &nobody]),
        "admin"
    );
    ok(&via_kubectl(&c, &["list", "--token", &nobody]));
}

#[test]
fn server_token_and_certificate_authority_work_without_a_kubeconfig() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-gone");
    let token = account(&c, "janitor", true);
    let ca = c.cp.ca();
    let ca = ca.to_str().unwrap();
    let server = c.cp.url.as_str();
    let base = [
        "list",
        "--min-age",
        "0s",
        "-n",
        &ns,
        "--server",
        server,
        "--token",
        &token,
    ];
    let out = ok(&run_bare(
        &[&base[..], &["--certificate-authority", ca]].concat(),
    ));
    assert!(out.contains("nvcf-worker-gone"), "{out}");
    // Without a CA the server's certificate is not trusted, and the error says where.
    let err = failed(&run_bare(&base));
    assert!(
        err.contains(&format!("cannot reach the server {server}")),
        "{err}"
    );
    let out = ok(&run_bare(
        &[&base[..], &["--insecure-skip-tls-verify"]].concat(),
    ));
    assert!(out.contains("nvcf-worker-gone"), "{out}");
    let out = ok(&run_bare(
        &[&base[..], &["--insecure-skip-tls-verify=true"]].concat(),
    ));
    assert!(out.contains("nvcf-worker-gone"), "{out}");
    let out = run_bare(
        &[
            &base[..],
            &["--insecure-skip-tls-verify", "--certificate-authority", ca],
        ]
        .concat(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // A CA that is not there is named.
    let err = failed(&run_bare(
        &[
            &base[..],
            &["--certificate-authority", "/nonexistent/ca.crt"],
        ]
        .concat(),
    ));
    assert!(err.contains("/nonexistent/ca.crt"), "{err}");
    // No kubeconfig and no --server: say what to pass.
    let err = failed(&run_bare(&["list"]));
    assert!(
        err.contains("--kubeconfig") && err.contains("--server"),
        "{err}"
    );
}

/// A kubeconfig whose current context points at a dead server as a user with no
/// grants; `other` is the admin straight to the real server.
fn two_context_kubeconfig(c: &Cluster, nobody_token: &str) -> PathBuf {
    let ca = c.cp.ca();
    let dir = &c.cp.dir;
    let path = c.dir.path().join("two.kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n\
         - name: dead\n  cluster:\n    server: https://127.0.0.1:{dead}\n    certificate-authority: {ca}\n\
         - name: live\n  cluster:\n    server: {url}\n    certificate-authority: {ca}\n\
         users:\n\
         - name: admin\n  user:\n    client-certificate: {crt}\n    client-key: {key}\n\
         - name: nobody\n  user:\n    token: {nobody_token}\n\
         contexts:\n\
         - name: main\n  context:\n    cluster: dead\n    user: nobody\n    namespace: {ns}\n\
         - name: other\n  context:\n    cluster: live\n    user: admin\n    namespace: {ns}\n\
         current-context: main\n",
        dead = dead_port(),
        ca = ca.display(),
        url = c.cp.url,
        crt = dir.join("admin.crt").display(),
        key = dir.join("admin.key").display(),
        ns = c.ns,
    );
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn context_cluster_and_user_pick_kubeconfig_entries() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-gone");
    let nobody = account(&c, "nobody", false);
    let kubeconfig = two_context_kubeconfig(&c, &nobody);
    let run = |extra: &[&str]| {
        run_with(
            &kubeconfig,
            &[&["list", "--min-age", "0s"][..], extra].concat(),
        )
    };
    let err = failed(&run(&[]));
    assert!(
        err.contains("cannot reach the server https://127.0.0.1:"),
        "{err}"
    );
    assert!(ok(&run(&["--context", "other"])).contains("nvcf-worker-gone"));
    // The current context's cluster replaced: the real server, as its user (nobody).
    let err = failed(&run(&["--cluster", "live"]));
    assert!(
        err.contains(&format!("system:serviceaccount:{ns}:nobody")),
        "{err}"
    );
    // ...and its user too.
    assert!(ok(&run(&["--cluster", "live", "--user", "admin"])).contains("nvcf-worker-gone"));
    // --server overrides the context's cluster's address, keeping its CA.
    assert!(ok(&run(&["--server", &c.cp.url, "--user", "admin"])).contains("nvcf-worker-gone"));
    for (flag, name) in [
        ("--cluster", "nosuch"),
        ("--user", "nosuch"),
        ("--context", "nosuch"),
    ] {
        let err = failed(&run(&[flag, name]));
        assert!(
            err.contains("kubeconfig:") && err.contains("\"nosuch\""),
            "{flag}: {err}"
        );
    }
}

fn labelled_trio(c: &Cluster, name: &str, labels: Value) {
    let mut objs = trio(&c.ns, name, None);
    // Only the ServiceAccount carries the label: the identity is still one.
    objs[0]["metadata"]["labels"] = labels;
    c.create_all(objs);
}

#[test]
fn selector_filters_whole_identities_in_list_and_cleanup() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    labelled_trio(&c, "nvcf-worker-blue", json!({"team": "blue"}));
    labelled_trio(&c, "nvcf-worker-red", json!({"team": "red"}));
    c.seed_trio(&ns, "nvcf-worker-plain");
    let names = |args: &[&str]| -> Vec<String> {
        let doc: Value = serde_json::from_str(&ok(
            &c.run(&[&["list", "--min-age", "0s", "-o", "json"][..], args].concat())
        ))
        .unwrap();
        doc["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&["-l", "team=blue"]), ["nvcf-worker-blue"]);
    assert_eq!(
        names(&["--selector", "team in (blue,red)"]),
        ["nvcf-worker-blue", "nvcf-worker-red"]
    );
    assert_eq!(names(&["-l", "!team"]), ["nvcf-worker-plain"]);
    assert_eq!(names(&[]).len(), 3);
    c.clear_requests();
    let out = c.run(&["list", "-l", "team in (blue"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("-l/--selector"), "{}", stderr(&out));
    assert!(c.requests().is_empty(), "a bad selector sent requests");

    let out = ok(&c.run(&["cleanup", "--min-age", "0s", "--yes", "-l", "team=blue"]));
    assert!(out.contains("deleted: 1 identities (3 objects)"), "{out}");
    // The unlabelled Role and RoleBinding of the selected identity went with it.
    assert_eq!(c.members(&ns, "nvcf-worker-blue"), 0);
    assert_eq!(c.members(&ns, "nvcf-worker-red"), 3);
    assert_eq!(c.members(&ns, "nvcf-worker-plain"), 3);
}

#[test]
fn every_live_command_prints_a_versioned_document() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-gone");
    c.seed_trio(&ns, "nvcf-worker-runner");
    let pod = c.seed_pod(&ns, "runner", "nvcf-worker-runner", "Running");
    let yaml = |o: &Output| -> Value { serde_yaml::from_str(&stdout(o)).unwrap() };
    let json = |o: &Output| -> Value { serde_json::from_str(&stdout(o)).unwrap() };

    // cleanup's plan: what --yes would delete, with the UIDs its preconditions carry.
    for format in ["json", "yaml"] {
        let out = ok_out(c.run(&["cleanup", "--min-age", "0s", "-o", format]));
        let plan = if format == "json" {
            json(&out)
        } else {
            yaml(&out)
        };
        assert_eq!(plan["apiVersion"], API_VERSION);
        assert_eq!(plan["kind"], "CleanupPlan");
        assert_eq!(plan["delete"][0]["name"], "nvcf-worker-gone");
        assert_eq!(plan["delete"][0]["state"], "orphaned");
        let objects = plan["delete"][0]["objects"].as_array().unwrap();
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["RoleBinding", "Role", "ServiceAccount"]);
        assert_eq!(
            objects[2]["uid"],
            c.uid("ServiceAccount", &ns, "nvcf-worker-gone")
        );
        assert_eq!(plan["keep"][0]["name"], "nvcf-worker-runner");
        assert_eq!(plan["keep"][0]["state"], "active");
    }
    assert!(c.deletes().is_empty());
    // --dry-run=server and --yes: one CleanupResult, nothing else on stdout.
    for (args, dry_run) in [(&["--dry-run=server"][..], "server"), (&["--yes"], "none")] {
        let out = ok(&c.run(&[&["cleanup", "--min-age", "0s", "-o", "json"][..], args].concat()));
        let result: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        assert_eq!(result["apiVersion"], API_VERSION);
        assert_eq!(result["kind"], "CleanupResult");
        assert_eq!(result["dryRun"], dry_run);
        assert_eq!(result["deleted"], 1);
        assert_eq!(result["objects"], 3);
        assert_eq!(result["plan"]["delete"][0]["name"], "nvcf-worker-gone");
        assert_eq!(result["skipped"], json!([]));
        assert_eq!(result["failed"], json!([]));
    }
    assert_eq!(c.members(&ns, "nvcf-worker-gone"), 0);

    let audit = yaml(&c.run(&["audit", "-o", "yaml"]));
    assert_eq!(audit["apiVersion"], API_VERSION);
    assert_eq!(audit["kind"], "AuditReport");
    assert!(audit["findings"].is_array());

    let list = yaml(&ok_out(c.run(&["list", "-o", "yaml"])));
    assert_eq!(list["kind"], "WorkerIdentityList");

    // describe: NAME and pod/NAME alike; a per-pod account is refused (exit 1)
    // with the report on stdout, and the document wraps the agent's WorkerAuth.
    let plain = c.run(&["describe", "runner"]);
    assert_eq!(plain.status.code(), Some(1));
    let text = String::from_utf8(plain.stdout).unwrap();
    let plain: Value = serde_json::from_str(&text[text.find("\n{").unwrap() + 1..]).unwrap();
    for target in ["pod/runner", "pods/runner", "po/runner"] {
        let out = c.run(&["describe", target, "-o", "json"]);
        assert_eq!(out.status.code(), Some(1));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["apiVersion"], API_VERSION);
        assert_eq!(doc["kind"], "WorkerVerdict");
        assert_eq!(doc["workerAuth"], plain);
        assert_eq!(
            doc["pod"],
            json!({"namespace": ns, "name": "runner", "uid": pod["metadata"]["uid"]})
        );
        assert_eq!(doc["serviceAccount"]["name"], "nvcf-worker-runner");
    }
    let out = c.run(&["describe", "deployment/runner"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("give NAME or pod/NAME"),
        "{}",
        stderr(&out)
    );
    // describe reads one namespace: -A would do nothing, so it is not offered.
    let out = c.run(&["describe", "runner", "-A"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

fn ok_out(o: Output) -> Output {
    ok(&o);
    o
}
