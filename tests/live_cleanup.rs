//! `cleanup` end to end through the built binary against the loopback API server:
//! every safety rule, the request budget, and the faults it must survive.

mod live_support;

use std::time::{Duration, Instant};

use live_support::*;
use loopback_apiserver::{Fault, FaultKind};
use serde_json::json;

#[test]
fn default_prints_the_plan_and_deletes_nothing() {
    let c = Cluster::start();
    c.seed_trio(NS, "nvcf-worker-gone", OLD);
    let out = ok(&c.run(&["cleanup"]));
    assert!(
        out.contains("plan: delete 1 identities (3 objects)"),
        "{out}"
    );
    assert!(
        out.contains(
            "delete team-a/nvcf-worker-gone (orphaned): RoleBinding, Role, ServiceAccount"
        ),
        "{out}"
    );
    assert!(out.contains("nothing deleted: rerun with --yes"), "{out}");
    assert!(c.deletes().is_empty());
    assert_eq!(c.members(NS, "nvcf-worker-gone"), 3);
}

#[test]
fn yes_deletes_orphans_rolebinding_role_serviceaccount_with_listed_uids() {
    let c = Cluster::start();
    c.seed_trio(NS, "nvcf-worker-gone", OLD);
    c.seed_trio(NS, "nvcf-worker-live", OLD);
    c.seed_pod(NS, "live", "nvcf-worker-live", "Running");
    let uids: Vec<String> = ["RoleBinding", "Role", "ServiceAccount"]
        .iter()
        .map(|k| {
            let v = if *k == "ServiceAccount" {
                "v1"
            } else {
                "rbac.authorization.k8s.io/v1"
            };
            c.server.get(v, k, Some(NS), "nvcf-worker-gone").unwrap()["metadata"]["uid"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let out = ok(&c.run(&["cleanup", "--yes"]));
    assert!(
        out.contains("deleted: 1 identities (3 objects); skipped: 0; failed: 0"),
        "{out}"
    );
    assert_eq!(c.members(NS, "nvcf-worker-gone"), 0);
    assert_eq!(c.members(NS, "nvcf-worker-live"), 3);
    let deletes = c.deletes();
    let paths: Vec<&str> = deletes
        .iter()
        .map(|r| r.path.rsplit('/').nth(1).unwrap())
        .collect();
    assert_eq!(paths, ["rolebindings", "roles", "serviceaccounts"]);
    for (r, uid) in deletes.iter().zip(&uids) {
        assert!(r.path.ends_with("/nvcf-worker-gone"), "{}", r.path);
        assert_eq!(r.body.as_ref().unwrap()["preconditions"]["uid"], json!(uid));
        assert_eq!(r.param("dryRun"), None);
    }
}

#[test]
fn server_dry_run_sends_every_delete_with_dry_run_all_and_deletes_nothing() {
    let c = Cluster::start();
    c.seed_trio(NS, "nvcf-worker-a", OLD);
    c.seed_trio(NS, "nvcf-worker-b", OLD);
    let out = ok(&c.run(&["cleanup", "--dry-run=server"]));
    assert!(
        out.contains("server dry run, would delete: 2 identities (6 objects)"),
        "{out}"
    );
    let deletes = c.deletes();
    assert_eq!(deletes.len(), 6);
    for r in &deletes {
        assert_eq!(r.param("dryRun"), Some("All"));
        assert_eq!(r.body.as_ref().unwrap()["dryRun"], json!(["All"]));
    }
    assert_eq!(
        c.members(NS, "nvcf-worker-a") + c.members(NS, "nvcf-worker-b"),
        6
    );
}

#[test]
fn identities_younger_than_min_age_are_never_taken() {
    let c = Cluster::start();
    c.seed_trio(NS, "nvcf-worker-new", Duration::from_secs(120));
    c.seed_trio(NS, "nvcf-worker-halfhour", Duration::from_secs(1800));
    // Default 10m: the 2-minute-old one stays.
    let out = ok(&c.run(&["cleanup", "--yes"]));
    assert!(out.contains("keep 1 (young: 1)"), "{out}");
    assert_eq!(c.members(NS, "nvcf-worker-new"), 3);
    assert_eq!(c.members(NS, "nvcf-worker-halfhour"), 0);
    // A longer minimum protects older ones too; a shorter one takes it.
    c.seed_trio(NS, "nvcf-worker-halfhour", Duration::from_secs(1800));
    ok(&c.run(&["cleanup", "--yes", "--min-age", "1h"]));
    assert_eq!(c.members(NS, "nvcf-worker-halfhour"), 3);
    ok(&c.run(&["cleanup", "--yes", "--min-age", "1m"]));
    assert_eq!(c.members(NS, "nvcf-worker-new"), 0);
}

#[test]
fn uid_precondition_conflict_is_reported_as_skipped() {
    let c = Cluster::start();
    c.seed_trio(NS, "nvcf-worker-reused", OLD);
    // Hold the RoleBinding delete long enough to replace the object under it, as
    // the agent does when a new pod reuses the name.
    c.server.add_fault(
        Fault::new(
            "/rolebindings/nvcf-worker-reused",
            FaultKind::Delay(Duration::from_secs(2)),
        )
        .method("DELETE"),
    );
    let run = {
        let kubeconfig = c.kubeconfig.clone();
        std::thread::spawn(move || {
            let mut cmd = std::process::Command::new(BIN);
            cmd.args(["cleanup", "--yes", "--kubeconfig"])
                .arg(kubeconfig);
            output_within(cmd, Duration::from_secs(60))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !c
        .deletes()
        .iter()
        .any(|r| r.path.contains("/rolebindings/"))
    {
        assert!(Instant::now() < deadline, "no RoleBinding delete arrived");
        std::thread::sleep(Duration::from_millis(10));
    }
    let rbac = "rbac.authorization.k8s.io/v1";
    let listed = c
        .server
        .get(rbac, "RoleBinding", Some(NS), "nvcf-worker-reused")
        .unwrap();
    c.server
        .delete(rbac, "RoleBinding", Some(NS), "nvcf-worker-reused");
    let mut fresh = listed.clone();
    fresh["metadata"] = json!({"name": "nvcf-worker-reused", "namespace": NS});
    let fresh = c.server.create(fresh);
    assert_ne!(fresh["metadata"]["uid"], listed["metadata"]["uid"]);
    let text = ok(&run.join().unwrap());
    assert!(
        text.contains("deleted: 0 identities (0 objects); skipped: 1; failed: 0"),
        "{text}"
    );
    assert!(
        text.contains("skipped team-a/nvcf-worker-reused: RoleBinding changed since it was listed (UID precondition failed"),
        "{text}"
    );
    // The new RoleBinding and everything after it in the order are untouched.
    assert_eq!(c.members(NS, "nvcf-worker-reused"), 3);
    assert_eq!(c.deletes().len(), 1);
}

#[test]
fn only_nvcf_worker_names_are_ever_deleted() {
    let c = Cluster::start();
    c.seed_trio(NS, "nvcf-worker-gone", OLD);
    for name in ["worker-gone", "nvcf-workerx", "my-nvcf-worker-gone"] {
        for obj in trio(NS, name, OLD, None) {
            c.server.create(obj);
        }
    }
    ok(&c.run(&["cleanup", "--yes"]));
    let deletes = c.deletes();
    assert_eq!(deletes.len(), 3);
    assert!(deletes.iter().all(|r| r
        .path
        .rsplit('/')
        .next()
        .unwrap()
        .starts_with("nvcf-worker-")));
    for name in ["worker-gone", "nvcf-workerx", "my-nvcf-worker-gone"] {
        assert_eq!(c.members(NS, name), 3, "{name}");
    }
}

#[test]
fn terminated_pods_count_as_gone_only_with_include_terminated() {
    let c = Cluster::start();
    c.seed_trio(NS, "nvcf-worker-done", OLD);
    c.seed_pod(NS, "done", "nvcf-worker-done", "Succeeded");
    c.seed_trio(NS, "nvcf-worker-crashed", OLD);
    c.seed_pod(NS, "crashed", "nvcf-worker-crashed", "Failed");
    let out = ok(&c.run(&["cleanup", "--yes"]));
    assert!(out.contains("delete 0 identities"), "{out}");
    assert!(c.deletes().is_empty());
    ok(&c.run(&["cleanup", "--yes", "--include-terminated"]));
    assert_eq!(
        c.members(NS, "nvcf-worker-done") + c.members(NS, "nvcf-worker-crashed"),
        0
    );
}

#[test]
fn manifest_identity_with_an_existing_workload_is_never_orphaned() {
    let c = Cluster::start();
    c.server.create(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "a", "image": "x"}]}}}}));
    c.server.create(json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": NS},
        "spec": {"schedule": "0 0 * * *", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "a", "image": "x"}]}}}}}}));
    c.seed_manifest_trio(NS, "nvcf-worker-web", ("apps/v1", "Deployment", "web"));
    c.seed_manifest_trio(
        NS,
        "nvcf-worker-nightly",
        ("batch/v1", "CronJob", "nightly"),
    );
    c.seed_manifest_trio(
        NS,
        "nvcf-worker-removed",
        ("batch/v1", "CronJob", "removed"),
    );
    let out = ok(&c.run(&["cleanup", "--yes"]));
    assert!(out.contains("keep 2 (active: 2)"), "{out}");
    assert_eq!(c.members(NS, "nvcf-worker-web"), 3);
    assert_eq!(c.members(NS, "nvcf-worker-nightly"), 3);
    assert_eq!(c.members(NS, "nvcf-worker-removed"), 0);
}

#[test]
fn requests_are_list_pages_plus_three_deletes_per_orphan_and_no_gets() {
    let c = Cluster::start();
    for i in 0..7 {
        c.seed_trio(NS, &format!("nvcf-worker-gone-{i}"), OLD);
    }
    for i in 0..3 {
        c.seed_trio(NS, &format!("nvcf-worker-live-{i}"), OLD);
        c.seed_pod(
            NS,
            &format!("live-{i}"),
            &format!("nvcf-worker-live-{i}"),
            "Running",
        );
    }
    c.server.clear_requests();
    ok(&c.run(&["cleanup", "--yes", "--chunk-size", "4"]));
    let requests = c.server.requests();
    // 10 objects per trio kind → 3 pages each; 3 pods → 1 page; one (empty) page
    // per built-in workload kind, whose pod templates may use an identity.
    let pages = 3 * 3 + 1 + 7;
    assert_eq!(list_requests(&requests), pages);
    assert_eq!(c.deletes().len(), 3 * 7);
    assert_eq!(
        requests.len(),
        pages + 3 * 7,
        "{:#?}",
        requests
            .iter()
            .map(|r| (&r.method, &r.path))
            .collect::<Vec<_>>()
    );
    // The trio lists asked for metadata only (pods and workloads in full: their
    // accounts are in the spec).
    let trio_kinds = ["/serviceaccounts", "/roles", "/rolebindings"];
    for r in requests
        .iter()
        .filter(|r| r.method == "GET" && trio_kinds.iter().any(|k| r.path.ends_with(k)))
    {
        assert!(
            r.accept
                .as_deref()
                .unwrap_or("")
                .contains("as=PartialObjectMetadataList"),
            "{r:?}"
        );
    }
}

#[test]
fn server_errors_and_throttling_are_retried_honouring_retry_after() {
    let c = Cluster::start();
    c.seed_trio(NS, "nvcf-worker-gone", OLD);
    c.server
        .add_fault(Fault::new("/serviceaccounts", FaultKind::Status(500)).method("GET"));
    c.server.add_fault(
        Fault::new(
            "/roles/nvcf-worker-gone",
            FaultKind::TooManyRequests {
                retry_after_secs: 2,
            },
        )
        .method("DELETE"),
    );
    let started = Instant::now();
    let out = ok(&c.run(&["cleanup", "--yes"]));
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "Retry-After was not honoured"
    );
    assert!(out.contains("deleted: 1 identities (3 objects)"), "{out}");
    assert!(c.server.pending_faults().is_empty());
    assert_eq!(c.members(NS, "nvcf-worker-gone"), 0);
}

#[test]
fn an_expired_continue_token_restarts_the_list() {
    let c = Cluster::start();
    for i in 0..5 {
        c.seed_trio(NS, &format!("nvcf-worker-gone-{i}"), OLD);
    }
    c.server
        .add_fault(Fault::new("/serviceaccounts", FaultKind::ExpireContinue));
    let out = ok(&c.run(&["cleanup", "--yes", "--chunk-size", "2"]));
    assert!(out.contains("deleted: 5 identities (15 objects)"), "{out}");
    assert!(
        c.server.pending_faults().is_empty(),
        "the fault never fired"
    );
    let sa_lists: Vec<_> = c
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.ends_with("/serviceaccounts"))
        .collect();
    // 3 pages, one of which failed and forced a restart from the first page.
    assert!(sa_lists.len() >= 4, "{}", sa_lists.len());
    assert_eq!(
        sa_lists
            .iter()
            .filter(|r| r.param("continue").is_none())
            .count(),
        2
    );
}

#[test]
fn forbidden_stops_with_the_missing_permission() {
    let c = Cluster::start();
    c.seed_trio(NS, "nvcf-worker-gone", OLD);
    c.server.add_fault(
        Fault::new("/rolebindings/", FaultKind::Forbidden)
            .method("DELETE")
            .times(10),
    );
    let out = c.run(&["cleanup", "--yes"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("forbidden: the account may not delete rolebindings.rbac.authorization.k8s.io in namespace \"team-a\""),
        "{err}"
    );
    assert_eq!(c.members(NS, "nvcf-worker-gone"), 3);
}

#[test]
fn an_interrupted_cleanup_can_be_rerun_and_finishes_the_job() {
    let c = Cluster::start();
    c.seed_trio(NS, "nvcf-worker-gone", OLD);
    c.server.add_fault(
        Fault::new("/serviceaccounts/nvcf-worker-gone", FaultKind::Status(503))
            .method("DELETE")
            .times(50),
    );
    let out = c.run(&["cleanup", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("failed: 1"), "{}", stdout(&out));
    assert!(
        stderr(&out).contains(
            "error: team-a/nvcf-worker-gone: delete serviceaccounts: gave up after 5 attempts"
        ),
        "{}",
        stderr(&out)
    );
    // RoleBinding and Role went; the ServiceAccount is a partial leftover.
    assert_eq!(c.members(NS, "nvcf-worker-gone"), 1);
    c.server.clear_faults();
    let out = ok(&c.run(&["cleanup", "--yes"]));
    assert!(
        out.contains("delete team-a/nvcf-worker-gone (partial): ServiceAccount"),
        "{out}"
    );
    assert_eq!(c.members(NS, "nvcf-worker-gone"), 0);
}

#[test]
fn all_namespaces_lists_each_kind_once_across_the_cluster() {
    let c = Cluster::start();
    c.seed_trio("team-a", "nvcf-worker-a", OLD);
    c.seed_trio("team-b", "nvcf-worker-b", OLD);
    c.server.clear_requests();
    let out = ok(&c.run(&["cleanup", "-A", "--yes"]));
    assert!(out.contains("deleted: 2 identities"), "{out}");
    let lists: Vec<String> = c
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET")
        .map(|r| r.path)
        .collect();
    // The trio, pods, and the seven built-in workload kinds.
    assert_eq!(lists.len(), 4 + 7, "{lists:?}");
    assert!(
        lists.iter().all(|p| !p.contains("/namespaces/")),
        "{lists:?}"
    );
    // -n scopes to one namespace.
    c.seed_trio("team-b", "nvcf-worker-b", OLD);
    c.seed_trio("team-c", "nvcf-worker-c", OLD);
    ok(&c.run(&["cleanup", "-n", "team-c", "--yes"]));
    assert_eq!(c.members("team-c", "nvcf-worker-c"), 0);
    assert_eq!(c.members("team-b", "nvcf-worker-b"), 3);
}
