//! deploy/: the CronJob manifests pass our own guard and the real server's strict
//! validation, and their ClusterRole is exactly what `cleanup -A --yes` needs: run
//! as the deploy/ ServiceAccount (with a TokenRequest token, and by impersonation)
//! against the real RBAC authorizer it succeeds and its Events show in `kubectl
//! get events`, and with any one permission removed it stops with a message naming
//! that permission (without `create` events it warns once and goes on). The same
//! for the audit CronJob, which keeps its findings as PolicyReports
//! (tests/live_reports.rs).

use crate::live_support;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use live_support::*;
use serde_json::{json, Value};

fn deploy_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy"))
}

fn cluster_role(name: &str) -> Value {
    let text = std::fs::read_to_string(deploy_dir().join("rbac.yaml")).unwrap();
    let role = serde_yaml::Deserializer::from_str(&text)
        .map(|d| <Value as serde::Deserialize>::deserialize(d).unwrap())
        .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("ClusterRole {name} in deploy/rbac.yaml"));
    role
}

/// The container args of a CronJob in deploy/: what the tests run is what the
/// CronJob runs.
fn cron_args(file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(deploy_dir().join(file)).unwrap();
    let job: Value = serde_yaml::from_str(&text).unwrap();
    job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

/// (group, resource, verb) the role grants.
fn grants(role: &Value) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().unwrap() {
        assert!(rule.get("resourceNames").is_none() && rule.get("nonResourceURLs").is_none());
        for g in rule["apiGroups"].as_array().unwrap() {
            for r in rule["resources"].as_array().unwrap() {
                for v in rule["verbs"].as_array().unwrap() {
                    let s = |x: &Value| x.as_str().unwrap().to_string();
                    out.insert((s(g), s(r), s(v)));
                }
            }
        }
    }
    out
}

#[test]
fn deploy_manifests_pass_validate() {
    // Every manifest under deploy/ (the CronJob set and the Argo CD and Helm
    // plugins), named file by file: deploy/ itself is a kustomization, which
    // `validate deploy/` refuses (its objects are what kustomize builds).
    let mut files = Vec::new();
    manifest_paths(deploy_dir(), &mut files);
    files.sort();
    let out = std::process::Command::new(BIN)
        .arg("validate")
        .args(&files)
        .output()
        .unwrap();
    let text = ok(&out);
    assert_eq!(files.len(), walk_manifests(deploy_dir()));
    assert!(
        text.starts_with(&format!("0 errors, 0 warnings in {} files", files.len())),
        "{text}"
    );
    // What kustomize builds of it passes too.
    let built = std::process::Command::new("kubectl")
        .arg("kustomize")
        .arg(deploy_dir())
        .output()
        .unwrap();
    let built = ok(&built);
    let mut child = std::process::Command::new(BIN)
        .args(["validate", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), built.as_bytes()).unwrap();
    let text = ok(&child.wait_with_output().unwrap());
    assert!(text.starts_with("0 errors, 0 warnings in 1 file"), "{text}");
}

fn manifest_paths(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for p in std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
        if p.is_dir() {
            manifest_paths(&p, out);
        } else if matches!(
            p.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            out.push(p);
        }
    }
}

fn walk_manifests(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            if p.is_dir() {
                walk_manifests(&p)
            } else {
                usize::from(matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("yaml" | "yml" | "json")
                ))
            }
        })
        .sum()
}

#[test]
fn cluster_role_is_list_and_delete_only_on_what_cleanup_needs() {
    let grants = grants(&cluster_role("nvcf-identity-cleanup"));
    for (group, resource, verb) in &grants {
        if verb == "create" {
            assert_eq!(
                (group.as_str(), resource.as_str()),
                ("events.k8s.io", "events")
            );
            continue;
        }
        assert!(verb == "list" || verb == "delete", "{verb}");
        if verb == "delete" {
            assert!(
                ["serviceaccounts", "roles", "rolebindings"].contains(&resource.as_str()),
                "{resource}"
            );
        }
        assert!(
            !resource.contains('*') && resource != "secrets",
            "{resource}"
        );
    }
}

const DEPLOY_NS: &str = "nvcf-identity-cleanup";
const JANITOR: &str = "system:serviceaccount:nvcf-identity-cleanup:identity-janitor";
const AUDITOR: &str = "system:serviceaccount:nvcf-identity-cleanup:identity-auditor";

/// Whether the real authorizer lets `user` `verb` `resource` in all namespaces.
fn may(c: &Cluster, user: &str, group: &str, resource: &str, verb: &str) -> bool {
    let review = c
        .admin
        .call(
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            Some(&json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": user,
                    "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{DEPLOY_NS}"), "system:authenticated"],
                    "resourceAttributes": {"group": group, "resource": resource, "verb": verb}}})),
        )
        .expect("SubjectAccessReview");
    review["status"]["allowed"] == json!(true)
}

/// Waits (bounded) until the authorizer's cache agrees with the ClusterRole.
fn wait_for_authorizer(c: &Cluster, user: &str, grant: &(String, String, String), allowed: bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while may(c, user, &grant.0, &grant.1, &grant.2) != allowed {
        assert!(
            Instant::now() < deadline,
            "RBAC never reflected {grant:?} = {allowed}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Identities that make a cleanup run list every kind and delete every member:
/// one orphan, and manifest identities naming each pod-bearing kind (all gone).
fn seed_everything(c: &Cluster, round: usize) {
    c.seed_trio(&c.ns, &format!("nvcf-worker-gone-{round}"));
    for (v, k, n) in [
        ("apps/v1", "Deployment", "d"),
        ("apps/v1", "StatefulSet", "s"),
        ("apps/v1", "DaemonSet", "ds"),
        ("apps/v1", "ReplicaSet", "rs"),
        ("batch/v1", "Job", "j"),
        ("batch/v1", "CronJob", "cj"),
        ("v1", "ReplicationController", "rc"),
        ("v1", "PodTemplate", "pt"),
    ] {
        c.seed_manifest_trio(
            &c.ns,
            &format!("nvcf-worker-{n}-{round}"),
            (v, k, &format!("{n}-{round}")),
        );
    }
}

/// `policy --mutating` selecting this test's namespace, its namespace kit, and a
/// labelled Deployment at 0 replicas there, applied by the admin; the policy's
/// name as the plan names it.
fn mutating_kit(c: &Cluster, bin: &Path) -> String {
    let name = format!("nvcf-worker-identity-{}", c.id);
    let selector = format!("nvcf-deploy-test={}", c.id);
    let plugin = |args: &[&str]| ok(&std::process::Command::new(BIN).args(args).output().unwrap());
    let mut yaml = plugin(&[
        "policy",
        "--mutating",
        "--cluster-id",
        "c1",
        "--name",
        &name,
        "--namespace-selector",
        &selector,
    ]);
    yaml.push_str("---\n");
    yaml.push_str(&plugin(&[
        "policy",
        "--namespace-kit",
        &c.ns,
        "--namespace-selector",
        &selector,
    ]));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kit.yaml");
    std::fs::write(&file, yaml).unwrap();
    ok(&kubectl(
        bin,
        &c.admin_kubeconfig,
        &["apply", "-f", file.to_str().unwrap()],
    ));
    const ADMISSION: &str = "admissionregistration.k8s.io/v1";
    for kind in ["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"] {
        c.adopt_cluster_scoped(ADMISSION, kind, &name);
    }
    for kind in [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ] {
        c.adopt_cluster_scoped(ADMISSION, kind, &format!("{name}-selected"));
    }
    let mut web = deployment(&c.ns, "web");
    web["spec"]["template"]["metadata"]["labels"]["nvcf.io/worker"] = json!("true");
    c.create(web);
    format!("MutatingAdmissionPolicy {name}")
}

/// Applies deploy/ with `kubectl apply -k` as the admin, after a server dry run
/// under strict field validation that must create every object without a warning.
fn apply_kit(c: &Cluster, bin: &Path) {
    // First what the server thinks of it, under strict field validation (a server
    // dry run cannot create the namespace its objects go into, so it exists first).
    ok(&kubectl(
        bin,
        &c.admin_kubeconfig,
        &[
            "apply",
            "-f",
            deploy_dir().join("namespace.yaml").to_str().unwrap(),
        ],
    ));
    c.adopt_namespace(DEPLOY_NS);
    let dry = kubectl(
        bin,
        &c.admin_kubeconfig,
        &[
            "apply",
            "-k",
            deploy_dir().to_str().unwrap(),
            "--dry-run=server",
            "--validate=strict",
        ],
    );
    let text = ok(&dry);
    assert_eq!(
        text.matches("created (server dry run)").count(),
        8,
        "{text}"
    );
    assert_eq!(text.matches(" (server dry run)").count(), 9, "{text}");
    assert!(
        !stderr(&dry).to_lowercase().contains("warning"),
        "{}",
        stderr(&dry)
    );
    let applied = ok(&kubectl(
        bin,
        &c.admin_kubeconfig,
        &[
            "apply",
            "-k",
            deploy_dir().to_str().unwrap(),
            "--validate=strict",
        ],
    ));
    assert!(
        applied.contains("clusterrole.rbac.authorization.k8s.io/nvcf-identity-cleanup created"),
        "{applied}"
    );
    c.adopt_cluster_scoped(RBAC, "ClusterRole", "nvcf-identity-cleanup");
    c.adopt_cluster_scoped(RBAC, "ClusterRoleBinding", "nvcf-identity-cleanup");
    c.adopt_cluster_scoped(RBAC, "ClusterRole", "nvcf-identity-audit");
    c.adopt_cluster_scoped(RBAC, "ClusterRoleBinding", "nvcf-identity-audit");
    // Both jobs run the image kustomization.yaml's `images:` names: the one you
    // build and push (no image of this tool is published).
    let want = format!(
        "YOUR-REGISTRY/kubectl-nvcf-worker:v{}",
        env!("CARGO_PKG_VERSION")
    );
    for job in ["nvcf-identity-cleanup", "nvcf-identity-audit"] {
        let job = c.get("batch/v1", "CronJob", Some(DEPLOY_NS), job).unwrap();
        let image =
            &job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"];
        assert_eq!(image, &json!(want));
    }
}

#[test]
fn cleanup_as_the_deploy_service_account_has_exactly_the_permissions_it_needs() {
    // -A: the control plane to itself.
    let c = Cluster::start_exclusive();
    let bin = tempfile::tempdir().unwrap();
    apply_kit(&c, bin.path());

    // The namespace kit of `policy --mutating`, which a labelled Deployment at 0
    // replicas will be given by the policy: the cron's command keeps it.
    let kept = mutating_kit(&c, bin.path());

    // With the deploy/ permissions, as the account's own token: everything goes.
    let token = c.token(DEPLOY_NS, "identity-janitor", &[], 3600);
    let as_token = c.cp.token_kubeconfig("janitor", &token, None);
    let as_impersonated = c.cp.impersonating_kubeconfig("janitor", JANITOR, None);
    seed_everything(&c, 0);
    let args = ["cleanup", "-A", "--yes", "--min-age", "0s"];
    let out = ok(&run_with(&as_token, &args));
    assert!(
        out.contains("deleted: 9 identities (27 objects); skipped: 0; failed: 0"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "{kept} gives it to new pods in namespace {}",
            c.ns
        )),
        "{out}"
    );
    assert_eq!(c.members(&c.ns, "nvcf-worker"), 3);
    // Each deletion recorded as an Event on its ServiceAccount, as real kubectl
    // shows them; the kit the plan keeps gets none.
    let events = ok(&kubectl(
        bin.path(),
        &c.admin_kubeconfig,
        &[
            "get",
            "events",
            "-n",
            &c.ns,
            "-o",
            "wide",
            "--sort-by",
            ".metadata.name",
        ],
    ));
    println!("kubectl get events -n {} -o wide:\n{events}", c.ns);
    let ours: Vec<&str> = events
        .lines()
        .filter(|l| l.contains("nvcf.nvidia.com/kubectl-nvcf-worker"))
        .collect();
    assert_eq!(ours.len(), 9, "{events}");
    for line in &ours {
        assert!(
            line.contains(" Normal ") && line.contains(" Deleted "),
            "{line}"
        );
        assert!(line.contains("serviceaccount/nvcf-worker-"), "{line}");
        assert!(line.contains("-0 ") || line.contains("-0\t"), "{line}");
    }
    assert!(!events.contains("serviceaccount/nvcf-worker "), "{events}");

    // One control plane's (issue 45): its agent and its namespaces are read with
    // the same grants; the other namespaces' orphans stay.
    let plane = format!("plane-{}", c.id);
    let owner = "nvcf.nvidia.com/control-plane-owner";
    let sys = c.ns_labelled("plane-sys", json!({owner: plane}));
    c.create(json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "nvca", "namespace": sys, "labels": {owner: plane}}}));
    let mine = c.ns_labelled("plane-ws", json!({owner: plane}));
    c.seed_trio(&mine, "nvcf-worker-gone");
    c.seed_trio(&c.ns, "nvcf-worker-other");
    let one_plane = [
        "cleanup",
        "-A",
        "--yes",
        "--min-age",
        "0s",
        "--control-plane",
        &plane,
    ];
    let out = ok(&run_with(&as_token, &one_plane));
    assert!(out.contains("deleted: 1 identities (3 objects)"), "{out}");
    assert_eq!(c.members(&mine, "nvcf-worker-gone"), 0);
    assert_eq!(c.members(&c.ns, "nvcf-worker-other"), 3);
    c.delete(RBAC, "RoleBinding", Some(&c.ns), "nvcf-worker-other");
    c.delete(RBAC, "Role", Some(&c.ns), "nvcf-worker-other");
    c.delete("v1", "ServiceAccount", Some(&c.ns), "nvcf-worker-other");

    // Without any one of them: a clear stop naming it, for each in turn.
    let role = c
        .get(RBAC, "ClusterRole", None, "nvcf-identity-cleanup")
        .unwrap();
    let all = grants(&role);
    for (round, missing) in all.iter().enumerate() {
        let (group, resource, verb) = missing;
        let mut narrowed = role.clone();
        narrowed["metadata"] = json!({"name": "nvcf-identity-cleanup"});
        narrowed["rules"] = all
            .iter()
            .filter(|g| *g != missing)
            .map(|(g, r, v)| json!({"apiGroups": [g], "resources": [r], "verbs": [v]}))
            .collect();
        c.admin
            .call(
                "PUT",
                "/apis/rbac.authorization.k8s.io/v1/clusterroles/nvcf-identity-cleanup",
                Some(&narrowed),
            )
            .expect("narrow the ClusterRole");
        wait_for_authorizer(&c, JANITOR, missing, false);
        seed_everything(&c, round + 1);
        // Alternate the two ways an operator runs as the account.
        let kubeconfig = if round % 2 == 0 {
            &as_token
        } else {
            &as_impersonated
        };
        let out = run_with(kubeconfig, &args);
        let err = stderr(&out);
        let named = if group.is_empty() {
            resource.clone()
        } else {
            format!("{resource}.{group}")
        };
        let recorded = |round: usize| {
            c.list("events.k8s.io/v1", "Event", Some(&c.ns))
                .iter()
                .filter(|e| {
                    e["regarding"]["name"]
                        .as_str()
                        .is_some_and(|n| n.ends_with(&format!("-{round}")))
                })
                .count()
        };
        if resource == "events" {
            // Events are a record, not the job: refused, they are warned of once.
            // (The rounds before left their identities: all are deleted now.)
            let text = ok(&out);
            let deleted: usize = text
                .split("deleted: ")
                .nth(1)
                .and_then(|t| t.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{text}"));
            assert!(deleted >= 9, "{text}");
            assert!(text.contains("skipped: 0; failed: 0"), "{text}");
            assert_eq!(err.matches("warning:").count(), 1, "{err}");
            assert!(
                err.contains(&format!("warning: {deleted} of {deleted} Events not recorded (cleanup went on without them); the first: forbidden: the account may not create events.events.k8s.io")),
                "{err}"
            );
            assert_eq!(recorded(round + 1), 0);
        } else if group == "admissionregistration.k8s.io" || resource == "namespaces" {
            // What the mutating policy gives cannot be told: the kit is kept,
            // and the plan names the permission; the rest goes.
            let text = ok(&out);
            assert!(
                text.contains(&format!(
                    "keep {}/nvcf-worker (active): kept: a mutating admission policy of this tool may give it to a new pod, and cannot {verb} {named} to tell",
                    c.ns
                )),
                "without {missing:?}: {text}"
            );
            assert!(text.contains("skipped: 0; failed: 0"), "{text}");
        } else {
            assert_eq!(
                out.status.code(),
                Some(1),
                "without {missing:?}: {}\n{err}",
                stdout(&out)
            );
            assert!(
                err.contains(&format!("forbidden: the account may not {verb} {named}")),
                "without {missing:?}: {err}"
            );
        }
        c.admin
            .call(
                "PUT",
                "/apis/rbac.authorization.k8s.io/v1/clusterroles/nvcf-identity-cleanup",
                Some(&{
                    let mut r = role.clone();
                    r["metadata"] = json!({"name": "nvcf-identity-cleanup"});
                    r
                }),
            )
            .expect("restore the ClusterRole");
        wait_for_authorizer(&c, JANITOR, missing, true);
    }
    // Restored: the next run finishes what the refused ones left, and keeps the kit.
    let out = ok(&run_with(&as_impersonated, &args));
    assert!(out.contains("skipped: 0; failed: 0"), "{out}");
    assert_eq!(c.members(&c.ns, "nvcf-worker"), 3, "{out}");
    assert_eq!(
        c.list("v1", "ServiceAccount", Some(&c.ns))
            .iter()
            .filter(|s| s["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("nvcf-worker-"))
            .count(),
        0
    );
}

const REPORTS: &str = "wgpolicyk8s.io/v1alpha2";

/// One round of the audit test: a namespace with a finding (its report must be
/// created), a namespace holding a report of ours with no finding left (it must
/// be deleted), and no cluster report yet (it must be created).
fn audit_round(c: &Cluster, round: usize) -> (String, String) {
    let found = c.ns_named(&format!("audited-{round}"));
    c.seed_trio(&found, "nvcf-worker-borrowed");
    c.create(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "borrower", "namespace": found},
        "spec": {"serviceAccountName": "nvcf-worker-borrowed", "automountServiceAccountToken": false,
            "containers": [{"name": "a", "image": "x"}]}}));
    let stale = c.ns_named(&format!("stale-{round}"));
    c.create(json!({"apiVersion": REPORTS, "kind": "PolicyReport",
        "metadata": {"name": "nvcf-worker-audit", "namespace": stale,
            "labels": {"app.kubernetes.io/managed-by": "kubectl-nvcf-worker"}},
        "results": [{"policy": "nvcf-worker", "rule": "NVW101", "result": "fail"}]}));
    c.delete(REPORTS, "ClusterPolicyReport", None, "nvcf-worker-audit");
    (found, stale)
}

#[test]
fn audit_as_the_deploy_service_account_keeps_the_reports_with_exactly_its_permissions() {
    // -A: the control plane to itself.
    let c = Cluster::start_exclusive();
    let bin = tempfile::tempdir().unwrap();
    apply_kit(&c, bin.path());
    crate::live_reports::install_report_crds(&c);
    c.adopt_cluster_scoped(REPORTS, "ClusterPolicyReport", "nvcf-worker-audit");
    // A manifest-declared identity, so that audit reads the namespaces' labels.
    c.seed_manifest_trio(&c.ns, "nvcf-worker-web", ("apps/v1", "Deployment", "web"));
    let args = cron_args("audit-cronjob.yaml");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert!(args.contains(&"--apply-reports"), "{args:?}");
    let token = c.token(DEPLOY_NS, "identity-auditor", &[], 3600);
    let as_token = c.cp.token_kubeconfig("auditor", &token, None);
    let as_impersonated = c.cp.impersonating_kubeconfig("auditor", AUDITOR, None);

    let (found, stale) = audit_round(&c, 0);
    let out = ok(&run_with(&as_token, &args));
    assert!(
        out.contains(&format!("applied PolicyReport {found}/nvcf-worker-audit: ")),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "deleted PolicyReport {stale}/nvcf-worker-audit: no findings left"
        )),
        "{out}"
    );
    let report = c
        .get(REPORTS, "PolicyReport", Some(&found), "nvcf-worker-audit")
        .unwrap();
    assert!(
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["rule"] == "NVW101" && r["resources"][0]["name"] == "borrower"),
        "{report}"
    );
    assert!(c
        .get(REPORTS, "ClusterPolicyReport", None, "nvcf-worker-audit")
        .is_some());

    // Without any one permission: a clear stop naming it, for each in turn.
    let role = c
        .get(RBAC, "ClusterRole", None, "nvcf-identity-audit")
        .unwrap();
    let all = grants(&role);
    let put = |rules: Value| {
        let body = json!({"apiVersion": RBAC, "kind": "ClusterRole",
            "metadata": {"name": "nvcf-identity-audit"}, "rules": rules});
        c.admin
            .call(
                "PUT",
                "/apis/rbac.authorization.k8s.io/v1/clusterroles/nvcf-identity-audit",
                Some(&body),
            )
            .expect("replace the ClusterRole");
    };
    for (round, missing) in all.iter().enumerate() {
        let (group, resource, verb) = missing;
        put(all
            .iter()
            .filter(|g| *g != missing)
            .map(|(g, r, v)| json!({"apiGroups": [g], "resources": [r], "verbs": [v]}))
            .collect());
        wait_for_authorizer(&c, AUDITOR, missing, false);
        let (_, stale) = audit_round(&c, round + 1);
        let kubeconfig = if round % 2 == 0 {
            &as_token
        } else {
            &as_impersonated
        };
        let out = run_with(kubeconfig, &args);
        if resource == "namespaces" {
            // The agent's namespaces cannot be told: the run still reports, and
            // the cluster report says what was not checked and why.
            ok(&out);
            let cluster = c
                .get(REPORTS, "ClusterPolicyReport", None, "nvcf-worker-audit")
                .unwrap();
            assert!(
                cluster["results"]
                    .to_string()
                    .contains("cannot list namespaces"),
                "{cluster}"
            );
        } else {
            let named = if group.is_empty() {
                resource.clone()
            } else {
                format!("{resource}.{group}")
            };
            assert_eq!(
                out.status.code(),
                Some(1),
                "without {missing:?}: {}",
                stdout(&out)
            );
            assert!(
                stderr(&out).contains(&format!("forbidden: the account may not {verb} {named}")),
                "without {missing:?}: {}",
                stderr(&out)
            );
        }
        put(role["rules"].clone());
        wait_for_authorizer(&c, AUDITOR, missing, true);
        // What the refused run left is finished by the next.
        ok(&run_with(&as_token, &args));
        assert!(c
            .get(REPORTS, "PolicyReport", Some(&stale), "nvcf-worker-audit")
            .is_none());
    }
}
