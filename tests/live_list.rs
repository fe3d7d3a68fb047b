//! `list` end to end against the real control plane: states and owners, the
//! versioned JSON/YAML document, and both plugin names through the real kubectl's
//! plugin dispatch.

use crate::live_support;

use std::time::Duration;

use live_support::*;
use serde_json::{json, Value};

/// The real server stamps creationTimestamp itself, so ages are real: commands
/// run with `--min-age 0s` unless a test makes an identity young on purpose.
const ANY_AGE: [&str; 2] = ["--min-age", "0s"];

fn seeded() -> Cluster {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-runner");
    c.seed_pod(&ns, "runner", "nvcf-worker-runner", "Running");
    c.seed_trio(&ns, "nvcf-worker-gone");
    c.seed_trio(&ns, "nvcf-worker-half");
    c.delete(RBAC, "RoleBinding", Some(&ns), "nvcf-worker-half");
    c.create(deployment(&ns, "web"));
    c.seed_manifest_trio(&ns, "nvcf-worker-web", ("apps/v1", "Deployment", "web"));
    c
}

fn args<'a>(a: &[&'a str]) -> Vec<&'a str> {
    a.iter().copied().chain(ANY_AGE).collect()
}

#[test]
fn table_shows_one_row_per_identity_with_owner_and_state() {
    let c = seeded();
    // Everything above is at least 4 s old; this one is younger than --min-age 3s.
    std::thread::sleep(Duration::from_secs(4));
    c.seed_trio(&c.ns, "nvcf-worker-fresh");
    let out = ok(&c.run(&["list", "--min-age", "3s"]));
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("NAMESPACE   NAME"), "{out}");
    assert_eq!(lines.len(), 6, "{out}");
    let row = |name: &str| -> Vec<&str> {
        lines
            .iter()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_else(|| panic!("no row {name}: {out}"))
            .split_whitespace()
            .collect()
    };
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        [
            "NAMESPACE",
            "NAME",
            "ORIGIN",
            "MADE-BY",
            "OWNER",
            "OWNER-STATUS",
            "TRIO",
            "AGE",
            "STATE",
            "NOTE"
        ],
        "{out}"
    );
    // An empty NOTE leaves no trailing blanks.
    assert!(lines.iter().all(|l| !l.ends_with(' ')), "{out:?}");
    let runner = row("nvcf-worker-runner");
    assert_eq!(
        [&runner[..7], &runner[8..]].concat(),
        [
            c.ns.as_str(),
            "nvcf-worker-runner",
            "pod",
            "agent",
            "pod/runner",
            "Running",
            "complete",
            "active"
        ]
    );
    assert!(runner[7].ends_with('s'), "age {}", runner[7]);
    assert_eq!(row("nvcf-worker-gone")[5..7], ["gone", "complete"]);
    assert_eq!(row("nvcf-worker-gone")[8], "orphaned");
    assert_eq!(row("nvcf-worker-fresh")[8], "young");
    assert_eq!(row("nvcf-worker-half")[6..8], ["no", "RoleBinding"]);
    assert_eq!(row("nvcf-worker-half")[9], "partial");
    // Declared in a namespace the agent does not provision: no note.
    let web = row("nvcf-worker-web");
    assert_eq!(
        web[2..6],
        ["manifest", "manifest", "deployment/web", "exists"]
    );
    assert_eq!(web[8..], ["active"]);
    println!("{out}");
}

#[test]
fn json_and_yaml_are_a_versioned_worker_identity_list() {
    let c = seeded();
    let doc: Value = serde_json::from_str(&ok(&c.run(&args(&["list", "-o", "json"])))).unwrap();
    assert_eq!(doc["apiVersion"], "report.nvcf.io/v1alpha1");
    assert_eq!(doc["kind"], "WorkerIdentityList");
    let items = doc["items"].as_array().unwrap();
    assert_eq!(items.len(), 4);
    let web = items
        .iter()
        .find(|i| i["name"] == "nvcf-worker-web")
        .unwrap();
    assert_eq!(web["origin"], "manifest");
    assert_eq!(web["madeBy"], "manifest");
    assert_eq!(web["conflict"], false);
    assert!(web.get("note").is_none(), "{web}");
    assert_eq!(
        web["owner"],
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "exists": true, "checked": true})
    );
    assert_eq!(web["complete"], true);
    assert_eq!(web["state"], "active");
    let sa = c
        .get("v1", "ServiceAccount", Some(&c.ns), "nvcf-worker-web")
        .unwrap();
    assert_eq!(
        web["members"]["serviceAccount"]["uid"],
        sa["metadata"]["uid"]
    );
    assert_eq!(
        web["members"]["serviceAccount"]["createdAt"],
        sa["metadata"]["creationTimestamp"]
    );
    let half = items
        .iter()
        .find(|i| i["name"] == "nvcf-worker-half")
        .unwrap();
    assert_eq!(half["members"]["roleBinding"], Value::Null);
    assert_eq!(half["state"], "partial");
    assert_eq!(half["madeBy"], "agent");
    // Only a manifest-declared identity can conflict with the agent.
    assert!(half.get("conflict").is_none(), "{half}");

    let yaml = ok(&c.run(&args(&["list", "-o", "yaml"])));
    let mut from_yaml: Value = serde_yaml::from_str(&yaml).unwrap();
    // Ages move between the two runs; everything else must match.
    let mut doc = doc;
    for d in [&mut doc, &mut from_yaml] {
        for item in d["items"].as_array_mut().unwrap() {
            item.as_object_mut().unwrap().remove("ageSeconds");
        }
    }
    assert_eq!(from_yaml, doc);
    println!("{yaml}");
}

#[test]
fn kubectl_runs_both_plugin_names() {
    let c = seeded();
    // kubectl-nvcf_worker → `kubectl nvcf-worker`, straight to the real server.
    let dir = plugin_dir("kubectl-nvcf_worker");
    let out = ok(&kubectl(
        dir.path(),
        &c.admin_kubeconfig,
        &["nvcf-worker", "list", "--min-age", "0s"],
    ));
    assert!(
        out.contains("nvcf-worker-runner") && out.contains("orphaned"),
        "{out}"
    );
    // kubectl-nvcf-worker → `kubectl nvcf worker`.
    let dir = plugin_dir("kubectl-nvcf-worker");
    let out = ok(&kubectl(
        dir.path(),
        &c.admin_kubeconfig,
        &["nvcf", "worker", "list", "-o", "json"],
    ));
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["items"].as_array().unwrap().len(), 4);
    // Help names the command the way users type it, with an example.
    let help = ok(&kubectl(
        dir.path(),
        &c.admin_kubeconfig,
        &["nvcf", "worker", "cleanup", "--help"],
    ));
    assert!(
        help.contains("kubectl nvcf-worker cleanup -A --dry-run=server"),
        "{help}"
    );
}

#[test]
fn context_namespace_is_the_default_and_all_namespaces_spans_them() {
    // -A sees every namespace: no other test may have objects meanwhile.
    let c = Cluster::start_exclusive();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-runner");
    c.seed_pod(&ns, "runner", "nvcf-worker-runner", "Running");
    c.seed_trio(&ns, "nvcf-worker-gone");
    let team_b = c.ns_named("team-b");
    c.seed_trio(&team_b, "nvcf-worker-elsewhere");
    let out = ok(&c.run(&args(&["list"])));
    assert!(!out.contains("nvcf-worker-elsewhere"), "{out}");
    let out = ok(&c.run(&args(&["list", "-n", &team_b])));
    assert!(
        out.lines().any(|l| l
            .split_whitespace()
            .take(2)
            .eq([team_b.as_str(), "nvcf-worker-elsewhere"])),
        "{out}"
    );
    let out = ok(&c.run(&args(&["list", "-A"])));
    assert_eq!(out.lines().count(), 4, "{out}");
    assert!(
        out.contains("nvcf-worker-elsewhere") && out.contains("nvcf-worker-runner"),
        "{out}"
    );
}

#[test]
fn an_empty_namespace_says_so() {
    let c = Cluster::start();
    let empty = c.ns_named("nothing-here");
    let out = ok(&c.run(&["list", "-n", &empty]));
    assert_eq!(out.trim(), "No worker identities found.");
}

#[test]
fn a_bad_context_is_a_clear_error() {
    let c = Cluster::start();
    let out = c.run(&["list", "--context", "missing"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("kubeconfig:") && stderr(&out).contains("missing"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn request_timeout_cuts_a_stalled_request_and_the_retry_succeeds() {
    let c = seeded();
    c.add_fault(
        Fault::new("/serviceaccounts", FaultKind::Delay(Duration::from_secs(5))).method("GET"),
    );
    let started = std::time::Instant::now();
    let out = ok(&c.run(&args(&["list", "--request-timeout", "1s"])));
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert!(out.contains("nvcf-worker-runner"), "{out}");
    let sa_lists = c
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/serviceaccounts"))
        .count();
    assert_eq!(sa_lists, 2);
}

fn row_of<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find(|l| l.split_whitespace().nth(1) == Some(name))
        .unwrap_or_else(|| panic!("no row {name}: {out}"))
}

#[test]
fn a_manifest_identity_where_the_agent_provisions_is_flagged_and_its_look_alikes_are_not() {
    // -A lists every namespace: no other test may have objects meanwhile.
    let c = Cluster::start_exclusive();
    let [agent, pod_spec, plain] = c.agent_namespaces();

    let out = ok(&c.run(&["list", "-n", &agent, "--min-age", "0s"]));
    let web = row_of(&out, "nvcf-worker-web");
    assert!(
        web.ends_with("active   conflict: the agent provisions this namespace (audit NVW205)"),
        "{out}"
    );
    assert_eq!(web.split_whitespace().nth(3), Some("manifest"), "{out}");
    // The agent's own identity in its namespace: made by the agent, no note.
    let own: Vec<&str> = row_of(&out, "nvcf-worker").split_whitespace().collect();
    assert_eq!(own[2..4], ["namespace", "agent"], "{out}");
    assert_eq!(own[4], format!("namespace/{agent}"), "{out}");
    assert_eq!(own.last(), Some(&"active"), "{out}");
    // The same identity with the agent's other value, or no label: quiet.
    for ns in [&pod_spec, &plain] {
        let out = ok(&c.run(&["list", "-n", ns, "--min-age", "0s"]));
        let web = row_of(&out, "nvcf-worker-web");
        assert!(web.ends_with("   active"), "{ns}: {out}");
    }

    // Across namespaces: one list of namespaces, the same verdicts in the document.
    c.clear_requests();
    let doc: Value = serde_json::from_str(&ok(&c.run(&[
        "list",
        "-A",
        "--min-age",
        "0s",
        "-o",
        "json",
    ])))
    .unwrap();
    let namespace_reads: Vec<String> = c
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/api/v1/namespaces") && !r.path.contains("/namespaces/"))
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(namespace_reads.len(), 1, "{namespace_reads:?}");
    let namespace_gets = c
        .requests()
        .iter()
        .filter(|r| {
            r.path
                .strip_prefix("/api/v1/namespaces/")
                .is_some_and(|rest| !rest.contains('/'))
        })
        .count();
    assert_eq!(namespace_gets, 0);
    let item = |ns: &str, name: &str| -> Value {
        doc["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["namespace"] == ns && i["name"] == name)
            .unwrap_or_else(|| panic!("no {ns}/{name} in {doc:#}"))
            .clone()
    };
    let flagged = item(&agent, "nvcf-worker-web");
    assert_eq!(flagged["madeBy"], "manifest");
    assert_eq!(flagged["conflict"], true);
    let note = flagged["note"].as_str().unwrap();
    assert!(
        note.contains(&format!("declared in a manifest in namespace {agent}, which the agent provisions itself ({INSTANCE_TYPE}=miniservice)"))
            && note.contains("remove this ServiceAccount, Role and RoleBinding and let the agent provision"),
        "{note}"
    );
    let own = item(&agent, "nvcf-worker");
    assert_eq!(own["madeBy"], "agent");
    assert!(
        own.get("conflict").is_none() && own.get("note").is_none(),
        "{own}"
    );
    for ns in [&pod_spec, &plain] {
        let quiet = item(ns, "nvcf-worker-web");
        assert_eq!(quiet["madeBy"], "manifest");
        assert_eq!(quiet["conflict"], false, "{quiet}");
        assert!(quiet.get("note").is_none(), "{quiet}");
    }
}

#[test]
fn namespaces_that_cannot_be_read_are_unknown_never_guessed() {
    let c = Cluster::start();
    let [agent, ..] = c.agent_namespaces();
    // A real user who may list everything list reads in the namespace, but not
    // get the namespace itself.
    let user = format!("no-namespaces-{}", c.id);
    let rules = json!([
        {"apiGroups": [""], "resources": ["serviceaccounts", "pods", "replicationcontrollers", "podtemplates"], "verbs": ["list"]},
        {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "daemonsets", "replicasets"], "verbs": ["list"]},
        {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["list"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["list"]}]);
    c.create(json!({"apiVersion": RBAC, "kind": "Role",
        "metadata": {"name": "list-only", "namespace": agent}, "rules": rules}));
    c.create(json!({"apiVersion": RBAC, "kind": "RoleBinding",
        "metadata": {"name": "list-only", "namespace": agent},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "list-only"},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]}));
    let kubeconfig = c.cp.user_kubeconfig(&user, &[], Some(&agent));
    let out = ok(&run_with(&kubeconfig, &["list", "--min-age", "0s"]));
    let web = row_of(&out, "nvcf-worker-web");
    assert!(
        web.ends_with("active   agent namespace unknown: namespaces unreadable"),
        "{out}"
    );
    assert!(!out.contains("conflict"), "{out}");
    let doc: Value = serde_json::from_str(&ok(&run_with(
        &kubeconfig,
        &["list", "--min-age", "0s", "-o", "json"],
    )))
    .unwrap();
    let web = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "nvcf-worker-web")
        .unwrap();
    assert_eq!(web["conflict"], Value::Null, "{web}");
    assert!(web.as_object().unwrap().contains_key("conflict"), "{web}");
    let note = web["note"].as_str().unwrap();
    assert!(
        note.contains(&format!("cannot get namespace \"{agent}\""))
            && note.contains("forbidden")
            && note.contains(&format!(
                "User \"{user}\" cannot get resource \"namespaces\""
            ))
            && note.contains("grant get on namespaces"),
        "{note}"
    );
    // The grant the note asks for, in the namespace itself, is enough.
    c.create(json!({"apiVersion": RBAC, "kind": "Role",
        "metadata": {"name": "read-namespace", "namespace": agent},
        "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}]}));
    c.create(json!({"apiVersion": RBAC, "kind": "RoleBinding",
        "metadata": {"name": "read-namespace", "namespace": agent},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-namespace"},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]}));
    // The authorizer sees new RBAC objects through its informers: bounded wait.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let out = ok(&run_with(&kubeconfig, &["list", "--min-age", "0s"]));
        if row_of(&out, "nvcf-worker-web")
            .ends_with("conflict: the agent provisions this namespace (audit NVW205)")
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still not flagged with get namespaces granted: {out}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn instance_type_label_is_the_agents() {
    assert_eq!(
        kubectl_nvcf_worker::identity::WORKLOAD_INSTANCE_TYPE_LABEL,
        INSTANCE_TYPE
    );
    assert_eq!(
        kubectl_nvcf_worker::identity::WORKLOAD_INSTANCE_TYPE_MINISERVICE,
        "miniservice"
    );
}
