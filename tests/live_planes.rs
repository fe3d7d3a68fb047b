//! Several NVCF control planes on one cluster (issue 45, item 3), on the real
//! control plane: two named planes' objects side by side with the legacy plane's,
//! each plane's agent `nvca` in its own system namespace, agent-made and
//! manifest-declared identities in each, and the look-alikes (an owner label
//! without the workload type, the `shared` owner). Plane IDs carry the test's id,
//! so `-A --control-plane` never meets another test's objects.

use crate::live_support;

use std::process::Command;

use live_support::policy::*;
use live_support::*;
use serde_json::{json, Value};

const OWNER: &str = "nvcf.nvidia.com/control-plane-owner";

struct Planes {
    c: Cluster,
    a: String,
    b: String,
    /// Plane -> its system namespace.
    sys_a: String,
    sys_b: String,
    /// MiniService namespaces of plane a, plane b and the legacy plane.
    ms_a: String,
    ms_b: String,
    ms_legacy: String,
    /// Look-alikes: owner a without the workload type; the shared owner.
    own_a: String,
    shared: String,
}

/// Each plane's system namespace and agent; in each MiniService namespace the
/// agent's `nvcf-worker`, an orphaned per-pod identity and a declared identity
/// of a Deployment; in the look-alikes the same declared and orphaned ones.
fn seeded(c: Cluster) -> Planes {
    let (a, b) = (format!("pa-{}", c.id), format!("pb-{}", c.id));
    let system = |plane: &str| {
        let ns = c.ns_labelled(&format!("{plane}-sys"), json!({OWNER: plane}));
        let mut sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "nvca", "namespace": ns, "labels": {OWNER: plane}}});
        sa["automountServiceAccountToken"] = json!(false);
        c.create(sa);
        ns
    };
    let (sys_a, sys_b) = (system(&a), system(&b));
    let ms = |base: &str, labels: Value| c.ns_labelled(base, labels);
    let ms_a = ms("ms-a", json!({INSTANCE_TYPE: "miniservice", OWNER: a}));
    let ms_b = ms("ms-b", json!({INSTANCE_TYPE: "miniservice", OWNER: b}));
    let ms_legacy = ms("ms-legacy", json!({INSTANCE_TYPE: "miniservice"}));
    let own_a = ms("own-a", json!({OWNER: a}));
    let shared = ms(
        "shared",
        json!({INSTANCE_TYPE: "miniservice", OWNER: "shared"}),
    );
    for ns in [&ms_a, &ms_b, &ms_legacy, &own_a, &shared] {
        c.create(deployment(ns, "web"));
        c.seed_manifest_trio(ns, "nvcf-worker-web", ("apps/v1", "Deployment", "web"));
        c.seed_trio(ns, "nvcf-worker-gone");
    }
    for ns in [&ms_a, &ms_b] {
        c.seed_agent_worker(ns, "ms-1");
    }
    Planes {
        c,
        a,
        b,
        sys_a,
        sys_b,
        ms_a,
        ms_b,
        ms_legacy,
        own_a,
        shared,
    }
}

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_str(&stdout(out)).unwrap_or_else(|e| panic!("{e}: {}", stdout(out)))
}

fn items(doc: &Value) -> Vec<Value> {
    doc["items"].as_array().unwrap().clone()
}

#[test]
fn list_tells_the_planes_apart_and_keeps_to_one() {
    let p = seeded(Cluster::start());
    let c = &p.c;
    let doc = json_of(&c.run(&[
        "list",
        "-A",
        "--control-plane",
        &p.a,
        "--min-age",
        "0s",
        "-o",
        "json",
    ]));
    assert_eq!(
        doc["controlPlane"],
        json!({"id": p.a, "agent": format!("system:serviceaccount:{}:nvca", p.sys_a), "agentFrom": "cluster"}),
        "{doc:#}"
    );
    let mut seen: Vec<(String, String)> = items(&doc)
        .iter()
        .map(|i| {
            assert_eq!(i["controlPlane"], json!(p.a), "{i}");
            (
                i["namespace"].as_str().unwrap().into(),
                i["name"].as_str().unwrap().into(),
            )
        })
        .collect();
    seen.sort();
    let mut want = vec![];
    for ns in [&p.ms_a, &p.own_a] {
        want.push((ns.clone(), "nvcf-worker-gone".to_string()));
        want.push((ns.clone(), "nvcf-worker-web".to_string()));
    }
    want.push((p.ms_a.clone(), "nvcf-worker".to_string()));
    want.sort();
    assert_eq!(seen, want, "{doc:#}");
    let item = |ns: &str, name: &str| {
        items(&doc)
            .into_iter()
            .find(|i| i["namespace"] == ns && i["name"] == name)
            .unwrap()
    };
    let web = item(&p.ms_a, "nvcf-worker-web");
    assert_eq!(web["conflict"], true);
    let note = web["note"].as_str().unwrap();
    assert!(
        note.contains(&format!("which control plane {}'s agent provisions itself ({INSTANCE_TYPE}=miniservice, {OWNER}={})", p.a, p.a)),
        "{note}"
    );
    assert_eq!(item(&p.own_a, "nvcf-worker-web")["conflict"], false);
    assert_eq!(item(&p.ms_a, "nvcf-worker")["madeBy"], "agent");

    // Without --control-plane: every plane, each row with its plane in -o wide.
    let out = ok(&c.run(&["list", "-A", "--min-age", "0s", "-o", "wide"]));
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header[9..], ["PLANE", "NOTE"], "{out}");
    let plane_of = |ns: &str, name: &str| -> String {
        let row = out
            .lines()
            .find(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.first() == Some(&ns) && w.get(1) == Some(&name)
            })
            .unwrap_or_else(|| panic!("no {ns}/{name}: {out}"));
        row.split_whitespace().nth(9).unwrap().to_string()
    };
    assert_eq!(plane_of(&p.ms_a, "nvcf-worker"), p.a);
    assert_eq!(plane_of(&p.ms_b, "nvcf-worker"), p.b);
    assert_eq!(plane_of(&p.ms_legacy, "nvcf-worker-web"), "default");
    assert_eq!(plane_of(&p.own_a, "nvcf-worker-web"), p.a);
    assert_eq!(plane_of(&p.shared, "nvcf-worker-web"), "<none>");
    // The plain table is as before: no PLANE column.
    let plain = ok(&c.run(&["list", "-n", &p.ms_b, "--min-age", "0s"]));
    assert!(!plain.lines().next().unwrap().contains("PLANE"), "{plain}");
    // Plane b, scoped to namespace a's: nothing of a's, nothing of b's outside -n.
    let none = ok(&c.run(&["list", "-n", &p.ms_a, "--control-plane", &p.b]));
    assert_eq!(none.trim(), "No worker identities found.");
}

#[test]
fn audit_names_the_plane_that_provisions_the_namespace() {
    let p = seeded(Cluster::start());
    let c = &p.c;
    let nvw205 = |doc: &Value| -> Vec<(String, String)> {
        doc["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["rule"] == "NVW205")
            .map(|f| {
                (
                    f["resource"]["namespace"].as_str().unwrap().to_string(),
                    f["message"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let doc = json_of(&c.run(&["audit", "-A", "--control-plane", &p.b, "-o", "json"]));
    assert_eq!(doc["controlPlane"]["id"], json!(p.b));
    let found = nvw205(&doc);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, p.ms_b);
    assert!(
        found[0]
            .1
            .contains(&format!("control plane {}'s agent provisions itself", p.b)),
        "{}",
        found[0].1
    );
    // No finding of the audit is on another plane's namespace.
    for f in doc["findings"].as_array().unwrap() {
        if let Some(ns) = f["resource"]["namespace"].as_str() {
            assert!(ns == p.ms_b || ns == p.sys_b, "{f}");
        }
    }
    // Namespace by namespace, without a plane: each names its own; the legacy
    // plane's wording is unchanged; the look-alikes are quiet.
    for (ns, says) in [
        (&p.ms_a, format!("control plane {}'s agent", p.a)),
        (
            &p.ms_legacy,
            "which the agent provisions itself".to_string(),
        ),
    ] {
        let found = nvw205(&json_of(&c.run(&["audit", "-n", ns, "-o", "json"])));
        assert_eq!(found.len(), 1, "{ns}: {found:?}");
        assert!(found[0].1.contains(&says), "{}", found[0].1);
    }
    for ns in [&p.own_a, &p.shared] {
        let found = nvw205(&json_of(&c.run(&["audit", "-n", ns, "-o", "json"])));
        assert!(found.is_empty(), "{ns}: {found:?}");
    }
}

#[test]
fn cleanup_of_one_plane_never_touches_another() {
    let p = seeded(Cluster::start());
    let c = &p.c;
    let yes = ["--min-age", "0s", "--yes"];
    // Plane a asked about b's namespace: nothing to do there.
    let mut args = vec!["cleanup", "-n", &p.ms_b, "--control-plane", &p.a];
    args.extend(yes);
    let out = ok(&c.run(&args));
    assert!(out.starts_with("plan: delete 0 identities"), "{out}");
    assert_eq!(c.members(&p.ms_b, "nvcf-worker-gone"), 3);

    let mut args = vec!["cleanup", "-A", "--control-plane", &p.a];
    args.extend(yes);
    let out = ok(&c.run(&args));
    assert!(out.contains("deleted: 2 identities (6 objects)"), "{out}");
    for ns in [&p.ms_a, &p.own_a] {
        assert_eq!(c.members(ns, "nvcf-worker-gone"), 0, "{ns}");
        assert_eq!(c.members(ns, "nvcf-worker-web"), 3, "{ns}");
    }
    // The agent's own stays; plane b's, the legacy plane's and the shared
    // namespace's orphans are untouched.
    assert_eq!(c.members(&p.ms_a, "nvcf-worker"), 3);
    for ns in [&p.ms_b, &p.ms_legacy, &p.shared] {
        assert_eq!(c.members(ns, "nvcf-worker-gone"), 3, "{ns}");
    }
    // Without --control-plane, as before: the namespace's orphan goes, the
    // agent's MiniService identity stays.
    let mut args = vec!["cleanup", "-n", &p.ms_b];
    args.extend(yes);
    let out = ok(&c.run(&args));
    assert!(out.contains("deleted: 1 identities (3 objects)"), "{out}");
    assert_eq!(c.members(&p.ms_b, "nvcf-worker"), 3);
}

#[test]
fn a_plane_is_named_exactly_or_the_command_stops() {
    let p = seeded(Cluster::start());
    let c = &p.c;
    // Unknown plane: no agent of that ID anywhere; never an empty answer.
    let ghost = format!("ghost-{}", c.id);
    let out = c.run(&["list", "-A", "--control-plane", &ghost]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("no ServiceAccount nvca labelled {OWNER}={ghost}")),
        "{}",
        stderr(&out)
    );
    // Usage errors: a reserved or malformed ID, an agent without its plane, two agents.
    for bad in [
        vec!["list", "--control-plane", "shared"],
        vec!["list", "--control-plane", "Plane-A"],
        vec!["audit", "--agent-namespace", "x"],
        vec![
            "cleanup",
            "--control-plane",
            "p",
            "--agent-namespace",
            "x",
            "--agent-namespace",
            "y",
        ],
    ] {
        let out = c.run(&bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{bad:?}");
    }
    // The agent named by the flags is taken as given.
    let doc = json_of(&c.run(&[
        "list",
        "-n",
        &p.ms_a,
        "--control-plane",
        &p.a,
        "--agent-namespace",
        &p.sys_a,
        "-o",
        "json",
    ]));
    assert_eq!(doc["controlPlane"]["agentFrom"], "flags");
    assert_eq!(items(&doc).len(), 3);
}

/// A user who may list in one namespace only: the plane's agent cannot be read
/// (no cluster-wide list of ServiceAccounts), nor, with the agent named, the
/// namespace's owner; each stops with what to grant or give, never a guess.
#[test]
fn what_cannot_be_read_stops_the_command_and_says_why() {
    let p = seeded(Cluster::start());
    let c = &p.c;
    let user = format!("one-namespace-{}", c.id);
    let rules = json!([
        {"apiGroups": [""], "resources": ["serviceaccounts", "pods", "replicationcontrollers", "podtemplates"], "verbs": ["list"]},
        {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "daemonsets", "replicasets"], "verbs": ["list"]},
        {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["list"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["list"]}]);
    c.create(json!({"apiVersion": RBAC, "kind": "Role",
        "metadata": {"name": "list-only", "namespace": p.ms_a}, "rules": rules}));
    c.create(json!({"apiVersion": RBAC, "kind": "RoleBinding",
        "metadata": {"name": "list-only", "namespace": p.ms_a},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "list-only"},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]}));
    let kubeconfig = c.cp.user_kubeconfig(&user, &[], Some(&p.ms_a));
    // The grant takes effect when the authorizer's informers see it: bounded wait.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !run_with(&kubeconfig, &["list"]).status.success() {
        assert!(std::time::Instant::now() < deadline, "the grant never took");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let out = run_with(&kubeconfig, &["cleanup", "--control-plane", &p.a, "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "cannot list serviceaccounts across namespaces to find control plane {}'s agent",
            p.a
        )) && err.contains("forbidden")
            && err.contains("--agent-namespace NS"),
        "{err}"
    );
    let args = [
        "cleanup",
        "--control-plane",
        &p.a,
        "--agent-namespace",
        &p.sys_a,
        "--yes",
        "--min-age",
        "0s",
    ];
    let out = run_with(&kubeconfig, &args);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("--control-plane {}: the namespaces' owners cannot be told: cannot get namespace \"{}\"", p.a, p.ms_a))
            && err.contains("grant get on namespaces"),
        "{err}"
    );
    // Nothing was deleted on either stop.
    assert_eq!(c.members(&p.ms_a, "nvcf-worker-gone"), 3);
}

#[test]
fn describe_checks_the_pods_plane() {
    let p = seeded(Cluster::start());
    let c = &p.c;
    c.seed_pod(&p.ms_a, "utils", "nvcf-worker", "Running");
    let out = c.run(&["describe", "utils", "-n", &p.ms_a, "--control-plane", &p.b]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!(
            "namespace {} belongs to control plane {}, not control plane {}",
            p.ms_a, p.a, p.b
        )),
        "{}",
        stderr(&out)
    );
    let out = c.run(&[
        "describe",
        "utils",
        "-n",
        &p.ms_a,
        "--control-plane",
        &p.a,
        "-o",
        "json",
    ]);
    let doc = json_of(&out);
    assert_eq!(doc["controlPlane"]["id"], json!(p.a), "{doc:#}");
    assert_eq!(doc["pod"]["namespace"], json!(p.ms_a), "{doc:#}");
}

/// One policy for every plane: each plane's agent is exempt (named by its system
/// namespace), an ordinary user is refused, and the YAML passes a server dry run.
#[test]
fn one_policy_admits_every_planes_agent_and_refuses_a_user() {
    let c = Cluster::start_on(Plane::Own("live_policy"));
    let who = callers(&c);
    let mut agents = vec![];
    for plane in ["pa", "pb"] {
        let plane = format!("{plane}-{}", c.id);
        let ns = c.ns_labelled(&format!("{plane}-sys"), json!({OWNER: plane}));
        c.create(json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "nvca", "namespace": ns, "labels": {OWNER: plane}}}));
        let binding = format!("{ns}-nvca");
        c.create(json!({"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": binding},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "nvca", "namespace": ns}]}));
        c.adopt_cluster_scoped(RBAC, "ClusterRoleBinding", &binding);
        let token = c.token(&ns, "nvca", &[], 3600);
        agents.push((ns.clone(), c.cp.token_kubeconfig(&plane, &token, None)));
    }
    let ws = c.ns_labelled("ws", json!({POLICY_LABEL: c.id.to_string()}));
    let name = format!("nvcf-worker-guard-{}", c.id);
    let selector = format!("{POLICY_LABEL}={}", c.id);
    // The shared tests' agent too: cluster-scoped objects meet every binding.
    let mut args = vec!["policy", "--name", &name, "--namespace-selector", &selector];
    for ns in [AGENT_NS, &agents[0].0, &agents[1].0] {
        args.extend(["--agent-namespace", ns]);
    }
    args.extend(["--allow-applier", APPLIER]);
    let yaml = ok(&Command::new(BIN).args(&args).output().unwrap());
    for ns in [AGENT_NS, &agents[0].0, &agents[1].0] {
        assert!(
            yaml.contains(&format!("system:serviceaccount:{ns}:nvca")),
            "{yaml}"
        );
    }
    ok(&kubectl_as(
        &c.admin_kubeconfig,
        &["apply", "--dry-run=server"],
        Some(&yaml),
    ));
    let _installed = Installed(&c, name.clone());
    ok(&kubectl_as(&c.admin_kubeconfig, &["apply"], Some(&yaml)));
    wait_until_enforced(&c, &ws, false);
    for (i, (_, agent)) in agents.iter().enumerate() {
        let objs = trio(&ws, &format!("nvcf-worker-p{i}"), None);
        ok(&try_create(agent, &objs, false));
    }
    let out = try_create(&who.user, &trio(&ws, "nvcf-worker-p9", None), true);
    assert!(!out.status.success(), "the user was admitted");
    assert!(stderr(&out).contains("NVW109"), "{}", stderr(&out));
    // --control-plane is the live commands': policy says how to name each agent.
    let out = Command::new(BIN)
        .args(["policy", "--control-plane", "pa"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--agent-namespace NS (repeatable)"),
        "{}",
        stderr(&out)
    );
}
