//! `cleanup` end to end through the built binary against the real control plane
//! (requests pass the fault-injecting proxy, which records them): every safety
//! rule, the request budget, the faults it must survive, and the Events it records.

use crate::live_support;

use std::time::{Duration, Instant};

use kubectl_nvcf_worker::live::events::REPORTING_CONTROLLER;
use live_support::*;
use serde_json::{json, Value};

/// The pod-bearing kinds cleanup lists besides pods: Deployment, StatefulSet,
/// DaemonSet, ReplicaSet, Job, CronJob, ReplicationController and PodTemplate.
const KINDS: usize = 8;

/// Objects get real creationTimestamps, so cleanup runs with `--min-age 0s`
/// unless a test is about the age limit.
fn cleanup(c: &Cluster, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["cleanup", "--min-age", "0s"];
    args.extend_from_slice(extra);
    c.run(&args)
}

/// The Events cleanup recorded in `ns`, by the account they regard, each as
/// (regarded name, reason, action, type), sorted; and the Events themselves.
pub(crate) fn cleanup_events(
    c: &Cluster,
    ns: &str,
) -> (Vec<(String, String, String, String)>, Vec<Value>) {
    let events: Vec<Value> = c
        .list("events.k8s.io/v1", "Event", Some(ns))
        .into_iter()
        .filter(|e| e["reportingController"] == REPORTING_CONTROLLER)
        .collect();
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let mut short: Vec<_> = events
        .iter()
        .map(|e| {
            (
                s(&e["regarding"]["name"]),
                s(&e["reason"]),
                s(&e["action"]),
                s(&e["type"]),
            )
        })
        .collect();
    short.sort();
    (short, events)
}

fn outcome(name: &str, reason: &str, action: &str, kind: &str) -> (String, String, String, String) {
    (name.into(), reason.into(), action.into(), kind.into())
}

#[test]
fn default_prints_the_plan_and_deletes_nothing() {
    let c = Cluster::start();
    c.seed_trio(&c.ns, "nvcf-worker-gone");
    let out = ok(&cleanup(&c, &[]));
    assert!(
        out.contains("plan: delete 1 identities (3 objects)"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "delete {}/nvcf-worker-gone (orphaned): RoleBinding, Role, ServiceAccount",
            c.ns
        )),
        "{out}"
    );
    assert!(out.contains("nothing deleted: rerun with --yes"), "{out}");
    assert!(c.deletes().is_empty());
    assert_eq!(c.members(&c.ns, "nvcf-worker-gone"), 3);
}

#[test]
fn yes_deletes_orphans_rolebinding_role_serviceaccount_with_listed_uids() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-gone");
    c.seed_trio(&ns, "nvcf-worker-live");
    c.seed_pod(&ns, "live", "nvcf-worker-live", "Running");
    let uids: Vec<String> = ["RoleBinding", "Role", "ServiceAccount"]
        .iter()
        .map(|k| c.uid(k, &ns, "nvcf-worker-gone"))
        .collect();
    let out = ok(&cleanup(&c, &["--yes"]));
    assert!(
        out.contains("deleted: 1 identities (3 objects); skipped: 0; failed: 0"),
        "{out}"
    );
    assert_eq!(c.members(&ns, "nvcf-worker-gone"), 0);
    assert_eq!(c.members(&ns, "nvcf-worker-live"), 3);
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
fn each_identity_taken_gets_an_event_on_its_service_account_as_listed() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    let mut listed = Vec::new();
    for name in ["nvcf-worker-gone-a", "nvcf-worker-gone-b"] {
        listed.push(
            c.seed_trio(&ns, name)
                .into_iter()
                .find(|o| o["kind"] == "ServiceAccount")
                .unwrap(),
        );
    }
    // Kept by the plan (a pod runs as it): no Event, every run would repeat it.
    c.seed_trio(&ns, "nvcf-worker-live");
    c.seed_pod(&ns, "live", "nvcf-worker-live", "Running");
    // A partial leftover without its ServiceAccount: the Event regards its Role.
    let partial = c.seed_trio(&ns, "nvcf-worker-part");
    assert!(c.delete("v1", "ServiceAccount", Some(&ns), "nvcf-worker-part"));
    let out = ok(&cleanup(&c, &["--yes"]));
    assert!(
        out.contains("deleted: 3 identities (8 objects); skipped: 0; failed: 0"),
        "{out}"
    );
    let (events, full) = cleanup_events(&c, &ns);
    assert_eq!(
        events,
        [
            outcome("nvcf-worker-gone-a", "Deleted", "Delete", "Normal"),
            outcome("nvcf-worker-gone-b", "Deleted", "Delete", "Normal"),
            outcome("nvcf-worker-part", "Deleted", "Delete", "Normal"),
        ]
    );
    for sa in &listed {
        let name = &sa["metadata"]["name"];
        let e = full
            .iter()
            .find(|e| &e["regarding"]["name"] == name)
            .unwrap();
        assert_eq!(
            e["regarding"],
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "name": name, "namespace": ns,
                "uid": sa["metadata"]["uid"], "resourceVersion": sa["metadata"]["resourceVersion"]})
        );
        assert!(e["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{}.", name.as_str().unwrap())));
        assert!(e["reportingInstance"]
            .as_str()
            .unwrap()
            .starts_with("kubectl-nvcf-worker@"));
        assert!(!e["eventTime"].is_null(), "{e}");
        assert_eq!(
            e["note"],
            "cleanup deleted this orphaned identity (3 objects): nothing runs as it and its owner is gone"
        );
    }
    let role = partial.iter().find(|o| o["kind"] == "Role").unwrap();
    let e = full
        .iter()
        .find(|e| e["regarding"]["name"] == "nvcf-worker-part")
        .unwrap();
    assert_eq!(e["regarding"]["kind"], "Role");
    assert_eq!(e["regarding"]["uid"], role["metadata"]["uid"]);

    // A server dry run and --record-events=false record none.
    c.seed_trio(&ns, "nvcf-worker-gone-c");
    c.clear_requests();
    ok(&cleanup(&c, &["--dry-run=server"]));
    ok(&cleanup(&c, &["--yes", "--record-events=false"]));
    assert_eq!(c.members(&ns, "nvcf-worker-gone-c"), 0);
    assert!(c.requests().iter().all(|r| r.method != "POST"));
    assert_eq!(cleanup_events(&c, &ns).0.len(), 3);
}

#[test]
fn an_event_the_server_refuses_is_warned_of_once_and_cleanup_goes_on() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-gone-a");
    c.seed_trio(&ns, "nvcf-worker-gone-b");
    // As when the namespace went away under the run.
    c.add_fault(
        Fault::new(
            &format!("/apis/events.k8s.io/v1/namespaces/{ns}/events"),
            FaultKind::Status(404),
        )
        .method("POST")
        .times(2),
    );
    let out = cleanup(&c, &["--yes"]);
    let text = ok(&out);
    assert!(
        text.contains("deleted: 2 identities (6 objects); skipped: 0; failed: 0"),
        "{text}"
    );
    let err = stderr(&out);
    assert_eq!(err.matches("warning:").count(), 1, "{err}");
    assert!(
        err.contains(&format!("warning: 2 of 2 Events not recorded (cleanup went on without them); the first: create events.events.k8s.io in namespace {ns}: ")),
        "{err}"
    );
    assert_eq!(c.members(&ns, "nvcf-worker-gone-a"), 0);
    assert!(cleanup_events(&c, &ns).0.is_empty());
}

#[test]
fn server_dry_run_sends_every_delete_with_dry_run_all_and_changes_nothing() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    let seeded = [
        c.seed_trio(&ns, "nvcf-worker-a"),
        c.seed_trio(&ns, "nvcf-worker-b"),
    ]
    .concat();
    let out = ok(&cleanup(&c, &["--dry-run=server"]));
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
    // The real server checked each delete and changed nothing: same objects, same
    // resourceVersions.
    for obj in &seeded {
        let kind = obj["kind"].as_str().unwrap();
        let name = obj["metadata"]["name"].as_str().unwrap();
        let now = c
            .get(obj["apiVersion"].as_str().unwrap(), kind, Some(&ns), name)
            .unwrap_or_else(|| panic!("{kind} {name} was deleted by a dry run"));
        assert_eq!(now["metadata"]["uid"], obj["metadata"]["uid"]);
        assert_eq!(
            now["metadata"]["resourceVersion"],
            obj["metadata"]["resourceVersion"]
        );
        assert!(now["metadata"]["deletionTimestamp"].is_null());
    }
}

#[test]
fn identities_younger_than_min_age_are_never_taken() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-older");
    // Real ages: the first trio is at least 5 s old when the second is made.
    std::thread::sleep(Duration::from_secs(5));
    c.seed_trio(&ns, "nvcf-worker-new");
    let out = ok(&c.run(&["cleanup", "--yes", "--min-age", "3s"]));
    assert!(out.contains("keep 1 (young: 1)"), "{out}");
    assert_eq!(c.members(&ns, "nvcf-worker-new"), 3);
    assert_eq!(c.members(&ns, "nvcf-worker-older"), 0);
    // The default (10m) and a longer minimum protect it; 0s takes it.
    for args in [
        &["cleanup", "--yes"][..],
        &["cleanup", "--yes", "--min-age", "1h"],
    ] {
        let out = ok(&c.run(args));
        assert!(out.contains("keep 1 (young: 1)"), "{out}");
        assert_eq!(c.members(&ns, "nvcf-worker-new"), 3);
    }
    ok(&cleanup(&c, &["--yes"]));
    assert_eq!(c.members(&ns, "nvcf-worker-new"), 0);
}

#[test]
fn an_object_recreated_between_list_and_delete_is_left_alone() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-reused");
    // Hold the RoleBinding delete long enough to replace the object under it, as
    // the agent does when a new pod reuses the name.
    c.add_fault(
        Fault::new(
            "/rolebindings/nvcf-worker-reused",
            FaultKind::Delay(Duration::from_secs(3)),
        )
        .method("DELETE"),
    );
    let run = {
        let kubeconfig = c.kubeconfig.clone();
        std::thread::spawn(move || run_with(&kubeconfig, &["cleanup", "--yes", "--min-age", "0s"]))
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
    let listed = c
        .get(RBAC, "RoleBinding", Some(&ns), "nvcf-worker-reused")
        .unwrap();
    assert!(c.delete(RBAC, "RoleBinding", Some(&ns), "nvcf-worker-reused"));
    let mut fresh = listed.clone();
    fresh["metadata"] = json!({"name": "nvcf-worker-reused", "namespace": ns});
    let fresh = c.create(fresh);
    assert_ne!(fresh["metadata"]["uid"], listed["metadata"]["uid"]);
    let text = ok(&run.join().unwrap());
    assert!(
        text.contains("deleted: 0 identities (0 objects); skipped: 1; failed: 0"),
        "{text}"
    );
    // The real server's 409 for the UID precondition.
    assert!(
        text.contains(&format!("skipped {ns}/nvcf-worker-reused: RoleBinding changed since it was listed (UID precondition failed")),
        "{text}"
    );
    // The new RoleBinding and everything after it in the order are untouched.
    assert_eq!(c.members(&ns, "nvcf-worker-reused"), 3);
    assert_eq!(
        c.uid("RoleBinding", &ns, "nvcf-worker-reused"),
        fresh["metadata"]["uid"].as_str().unwrap()
    );
    assert_eq!(c.deletes().len(), 1);
    let (events, full) = cleanup_events(&c, &ns);
    assert_eq!(
        events,
        [outcome(
            "nvcf-worker-reused",
            "ObjectReplaced",
            "Skip",
            "Normal"
        )]
    );
    let note = full[0]["note"].as_str().unwrap();
    assert!(
        note.starts_with("cleanup stopped after 0 of its objects: RoleBinding changed")
            || note.starts_with("cleanup did not delete it: RoleBinding changed"),
        "{note}"
    );
}

/// Starts `cleanup --yes` with `gate` on the requests `fault` matches, waits until
/// the run is held there (the plan made), runs `meanwhile`, then lets it go on.
fn cleanup_paused(c: &Cluster, fault: Fault, gate: &Gate, meanwhile: impl FnOnce()) -> String {
    c.add_fault(fault);
    let run = {
        let kubeconfig = c.kubeconfig.clone();
        std::thread::spawn(move || run_with(&kubeconfig, &["cleanup", "--yes", "--min-age", "0s"]))
    };
    gate.wait_held(Duration::from_secs(30));
    meanwhile();
    gate.open();
    ok(&run.join().unwrap())
}

/// The plan called `name` orphaned; the run saw it come into use (`by`), skipped
/// it whole and deleted `nvcf-worker-gone` beside it.
fn kept_in_use_and_the_other_deleted(
    c: &Cluster,
    ns: &str,
    text: &str,
    (name, by, reason): (&str, &str, &str),
) {
    assert!(
        text.contains(&format!("delete {ns}/{name} (orphaned)")),
        "{text}"
    );
    assert!(
        text.contains("deleted: 1 identities (3 objects); skipped: 1; failed: 0"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "skipped {ns}/{name}: in use by {by} since the plan"
        )),
        "{text}"
    );
    assert_eq!(c.members(ns, name), 3);
    assert_eq!(c.members(ns, "nvcf-worker-gone"), 0);
    // Each recorded on its ServiceAccount: the skip with the re-check's reason.
    let (events, full) = cleanup_events(c, ns);
    assert_eq!(
        events,
        [
            outcome("nvcf-worker-gone", "Deleted", "Delete", "Normal"),
            outcome(name, reason, "Skip", "Normal"),
        ]
    );
    let skip = full
        .iter()
        .find(|e| e["regarding"]["name"] == name)
        .unwrap();
    assert_eq!(
        skip["note"],
        format!("cleanup did not delete it: in use by {by} since the plan")
    );
    assert_eq!(skip["regarding"]["uid"], c.uid("ServiceAccount", ns, name));
}

#[test]
fn a_pod_started_between_plan_and_delete_keeps_its_identity() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-late");
    c.seed_trio(&ns, "nvcf-worker-gone");
    // Held: the executor's pod list for the batch both identities are in (the
    // plan's came first), which their deletes wait for.
    let gate = Gate::new();
    let fault = Fault::new(
        &format!("/namespaces/{ns}/pods"),
        FaultKind::Gate(gate.clone()),
    )
    .method("GET")
    .skip(1);
    let text = cleanup_paused(&c, fault, &gate, || {
        assert!(c.deletes().is_empty(), "deleted before the re-check");
        c.seed_pod(&ns, "late", "nvcf-worker-late", "Running");
    });
    // The plan called it orphaned; the run saw the pod and left it.
    kept_in_use_and_the_other_deleted(
        &c,
        &ns,
        &text,
        ("nvcf-worker-late", "pod/late", "PodAppeared"),
    );
    assert!(c
        .deletes()
        .iter()
        .all(|r| !r.path.ends_with("/nvcf-worker-late")));
    assert!(c.pending_faults().is_empty(), "the gate never fired");
}

#[test]
fn a_deployment_created_between_plan_and_delete_keeps_its_identity() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-web");
    c.seed_trio(&ns, "nvcf-worker-gone");
    // Held: the executor's Deployment list (the plan's came first), which both
    // identities' deletes wait for.
    let gate = Gate::new();
    let fault = Fault::new(
        &format!("/namespaces/{ns}/deployments"),
        FaultKind::Gate(gate.clone()),
    )
    .method("GET")
    .skip(1);
    let text = cleanup_paused(&c, fault, &gate, || {
        assert!(c.deletes().is_empty(), "deleted before the re-check");
        // Scaled to zero: no pod ever runs as it, only the template names it.
        let mut web = deployment(&ns, "web");
        web["spec"]["template"]["spec"]["serviceAccountName"] = json!("nvcf-worker-web");
        c.create(web);
    });
    kept_in_use_and_the_other_deleted(
        &c,
        &ns,
        &text,
        ("nvcf-worker-web", "deployment/web", "TemplateAppeared"),
    );
    assert!(c.pending_faults().is_empty(), "the gate never fired");
}

/// The benchmark's core, small: its request budget (the plan's list pages, the
/// pods' and workload kinds' pages again per batch, three deletes per orphan)
/// must hold exactly, so it cannot go stale. Times are printed, not asserted.
#[test]
fn benchmark_small_run_keeps_its_request_budget() {
    let c = Cluster::start();
    // 300 identities in pages of 100: several pages per list; 150 pods are two
    // pages, so a batch covers 2 x 64 identities: two batches for 150 orphans.
    let report = bench::run(&c, 300, 100, true);
    report.print();
    assert_eq!(
        report.summary,
        "deleted: 150 identities (450 objects); skipped: 0; failed: 0"
    );
    // 301 ServiceAccounts (the namespace's `default` too), 300 Roles and RoleBindings.
    assert_eq!(report.budget.plan_pages, 4 + 3 + 3 + 2 + KINDS);
    assert_eq!(report.budget.batch, 128);
    // Per batch: 150 pods in pages of 100, and the (empty) pod-bearing kinds.
    assert_eq!(report.budget.batch_pages, 2 * (2 + KINDS));
    assert_eq!(report.budget.events, 150);
    assert_eq!(report.budget.total(), 490 + 150);
    assert_eq!(report.requests, report.budget.total());
    assert_eq!(report.left, 150);
}

#[test]
fn only_nvcf_worker_names_are_ever_deleted() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-gone");
    for name in ["worker-gone", "nvcf-workerx", "my-nvcf-worker-gone"] {
        c.seed_trio(&ns, name);
    }
    ok(&cleanup(&c, &["--yes"]));
    let deletes = c.deletes();
    assert_eq!(deletes.len(), 3);
    assert!(deletes.iter().all(|r| r
        .path
        .rsplit('/')
        .next()
        .unwrap()
        .starts_with("nvcf-worker-")));
    for name in ["worker-gone", "nvcf-workerx", "my-nvcf-worker-gone"] {
        assert_eq!(c.members(&ns, name), 3, "{name}");
    }
}

#[test]
fn terminated_pods_count_as_gone_only_with_include_terminated() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-done");
    c.seed_pod(&ns, "done", "nvcf-worker-done", "Succeeded");
    c.seed_trio(&ns, "nvcf-worker-crashed");
    c.seed_pod(&ns, "crashed", "nvcf-worker-crashed", "Failed");
    let out = ok(&cleanup(&c, &["--yes"]));
    assert!(out.contains("delete 0 identities"), "{out}");
    assert!(c.deletes().is_empty());
    ok(&cleanup(&c, &["--yes", "--include-terminated"]));
    assert_eq!(
        c.members(&ns, "nvcf-worker-done") + c.members(&ns, "nvcf-worker-crashed"),
        0
    );
}

#[test]
fn manifest_identity_with_an_existing_workload_is_never_orphaned() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.create(deployment(&ns, "web"));
    c.create(cron_job(&ns, "nightly"));
    c.seed_manifest_trio(&ns, "nvcf-worker-web", ("apps/v1", "Deployment", "web"));
    c.seed_manifest_trio(
        &ns,
        "nvcf-worker-nightly",
        ("batch/v1", "CronJob", "nightly"),
    );
    c.seed_manifest_trio(
        &ns,
        "nvcf-worker-removed",
        ("batch/v1", "CronJob", "removed"),
    );
    let out = ok(&cleanup(&c, &["--yes"]));
    assert!(out.contains("keep 2 (active: 2)"), "{out}");
    assert_eq!(c.members(&ns, "nvcf-worker-web"), 3);
    assert_eq!(c.members(&ns, "nvcf-worker-nightly"), 3);
    assert_eq!(c.members(&ns, "nvcf-worker-removed"), 0);
}

#[test]
fn requests_are_list_pages_plus_three_deletes_and_an_event_per_orphan_and_no_gets() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    for i in 0..7 {
        c.seed_trio(&ns, &format!("nvcf-worker-gone-{i}"));
    }
    for i in 0..3 {
        c.seed_trio(&ns, &format!("nvcf-worker-live-{i}"));
        c.seed_pod(
            &ns,
            &format!("live-{i}"),
            &format!("nvcf-worker-live-{i}"),
            "Running",
        );
    }
    // The controller-manager adds the namespace's `default` ServiceAccount: 11
    // accounts, still 3 pages of 4.
    c.wait_for_default_account(&ns);
    c.clear_requests();
    ok(&cleanup(&c, &["--yes", "--chunk-size", "4"]));
    let requests = c.requests();
    // 10 or 11 objects per trio kind → 3 pages each; 3 pods → 1 page; one (empty)
    // page per built-in workload kind, whose pod templates may use an identity.
    let pages = 3 * 3 + 1 + KINDS;
    // The re-check before deleting: the pods and the workload kinds once for the
    // batch (7 identities, one batch, one namespace), folded to the batch's
    // accounts; no request per identity.
    let recheck = 1 + KINDS;
    assert_eq!(list_requests(&requests), pages + recheck);
    assert_eq!(c.deletes().len(), 3 * 7);
    // One Event per identity taken, posted as it ends.
    let posts = requests.iter().filter(|r| r.method == "POST").count();
    assert_eq!(posts, 7);
    assert!(requests
        .iter()
        .filter(|r| r.method == "POST")
        .all(|r| r.path == format!("/apis/events.k8s.io/v1/namespaces/{ns}/events")));
    assert_eq!(
        requests.len(),
        pages + recheck + 3 * 7 + 7,
        "{:#?}",
        requests
            .iter()
            .map(|r| (&r.method, &r.path))
            .collect::<Vec<_>>()
    );
    // The batch's lists all come after the plan's and before its first delete.
    let lists: Vec<usize> = requests
        .iter()
        .enumerate()
        .filter(|(_, r)| r.method == "GET")
        .map(|(i, _)| i)
        .collect();
    let first_delete = requests.iter().position(|r| r.method == "DELETE").unwrap();
    assert_eq!(lists.len(), pages + recheck);
    assert!(
        lists.iter().all(|&i| i < first_delete),
        "a list after a delete: {lists:?}, first delete {first_delete}"
    );
    let pod_lists = requests
        .iter()
        .filter(|r| r.method == "GET" && r.path == format!("/api/v1/namespaces/{ns}/pods"))
        .count();
    assert_eq!(pod_lists, 2, "the plan's and the batch's");
    // The batch's pods in protobuf (what the server encodes fastest), the plan's
    // as JSON.
    let accepts: Vec<&str> = requests
        .iter()
        .filter(|r| r.method == "GET" && r.path == format!("/api/v1/namespaces/{ns}/pods"))
        .map(|r| r.accept.as_deref().unwrap_or(""))
        .collect();
    assert!(!accepts[0].contains("protobuf"), "{accepts:?}");
    assert_eq!(accepts[1], kubectl_nvcf_worker::live::wire::ACCEPT_PROTOBUF);
    assert!(requests.iter().all(|r| r.param("fieldSelector").is_none()));
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
    c.seed_trio(&c.ns, "nvcf-worker-gone");
    c.add_fault(Fault::new("/serviceaccounts", FaultKind::Status(500)).method("GET"));
    c.add_fault(
        Fault::new(
            "/roles/nvcf-worker-gone",
            FaultKind::TooManyRequests {
                retry_after_secs: 2,
            },
        )
        .method("DELETE"),
    );
    let started = Instant::now();
    let out = ok(&cleanup(&c, &["--yes"]));
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "Retry-After was not honoured"
    );
    assert!(out.contains("deleted: 1 identities (3 objects)"), "{out}");
    assert!(c.pending_faults().is_empty());
    assert_eq!(c.members(&c.ns, "nvcf-worker-gone"), 0);
}

#[test]
fn an_expired_continue_token_restarts_the_list() {
    let c = Cluster::start();
    for i in 0..5 {
        c.seed_trio(&c.ns, &format!("nvcf-worker-gone-{i}"));
    }
    c.add_fault(Fault::new("/serviceaccounts", FaultKind::ExpireContinue));
    let out = ok(&cleanup(&c, &["--yes", "--chunk-size", "2"]));
    assert!(out.contains("deleted: 5 identities (15 objects)"), "{out}");
    assert!(c.pending_faults().is_empty(), "the fault never fired");
    let sa_lists: Vec<_> = c
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
fn dropped_connections_are_retried_and_a_delete_the_server_did_counts_as_done() {
    let c = Cluster::start();
    c.seed_trio(&c.ns, "nvcf-worker-gone");
    // A list whose connection drops before the server sees it, and a delete the
    // server performs while the client loses the answer (its retry gets 404).
    c.add_fault(Fault::new("/rolebindings", FaultKind::Drop).method("GET"));
    c.add_fault(
        Fault::new("/roles/nvcf-worker-gone", FaultKind::DropAfterForward).method("DELETE"),
    );
    let out = ok(&cleanup(&c, &["--yes"]));
    // The Role whose answer was lost counts as done (its retry found it gone) but
    // not as deleted by this run: the client cannot tell who deleted it.
    assert!(
        out.contains("deleted: 1 identities (2 objects); skipped: 0; failed: 0"),
        "{out}"
    );
    assert!(c.pending_faults().is_empty());
    assert_eq!(c.members(&c.ns, "nvcf-worker-gone"), 0);
    let role_deletes = c
        .deletes()
        .iter()
        .filter(|r| r.path.contains("/roles/"))
        .count();
    assert_eq!(role_deletes, 2);
}

#[test]
fn forbidden_stops_with_the_missing_permission() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-gone");
    // A real user whose Role allows everything cleanup does except deleting
    // RoleBindings.
    let user = format!("restricted-{}", c.id);
    c.create(json!({"apiVersion": RBAC, "kind": "Role",
        "metadata": {"name": "cleanup-but-rolebindings", "namespace": ns},
        "rules": [
            {"apiGroups": [""], "resources": ["serviceaccounts", "pods", "replicationcontrollers", "podtemplates"], "verbs": ["list"]},
            {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "daemonsets", "replicasets"], "verbs": ["list"]},
            {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["list"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["list"]},
            {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["delete"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["delete"]}]}));
    c.create(json!({"apiVersion": RBAC, "kind": "RoleBinding",
        "metadata": {"name": "cleanup-but-rolebindings", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cleanup-but-rolebindings"},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]}));
    let kubeconfig = c.cp.user_kubeconfig(&user, &[], Some(&ns));
    let out = run_with(&kubeconfig, &["cleanup", "--yes", "--min-age", "0s"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("forbidden: the account may not delete rolebindings.rbac.authorization.k8s.io in namespace \"{ns}\"")),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "User \"{user}\" cannot delete resource \"rolebindings\""
        )),
        "{err}"
    );
    assert_eq!(c.members(&ns, "nvcf-worker-gone"), 3);
}

#[test]
fn an_interrupted_cleanup_can_be_rerun_and_finishes_the_job() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-gone");
    c.add_fault(
        Fault::new("/serviceaccounts/nvcf-worker-gone", FaultKind::Status(503))
            .method("DELETE")
            .times(50),
    );
    let out = cleanup(&c, &["--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("failed: 1"), "{}", stdout(&out));
    assert!(
        stderr(&out).contains(&format!(
            "error: {ns}/nvcf-worker-gone: delete serviceaccounts: gave up after 5 attempts"
        )),
        "{}",
        stderr(&out)
    );
    // RoleBinding and Role went; the ServiceAccount is a partial leftover.
    assert_eq!(c.members(&ns, "nvcf-worker-gone"), 1);
    c.clear_faults();
    let out = ok(&cleanup(&c, &["--yes"]));
    assert!(
        out.contains(&format!(
            "delete {ns}/nvcf-worker-gone (partial): ServiceAccount"
        )),
        "{out}"
    );
    assert_eq!(c.members(&ns, "nvcf-worker-gone"), 0);
}

#[test]
fn all_namespaces_lists_each_kind_once_across_the_cluster() {
    let c = Cluster::start_exclusive();
    let (a, b) = (c.ns.clone(), c.ns_named("team-b"));
    c.seed_trio(&a, "nvcf-worker-a");
    c.seed_trio(&b, "nvcf-worker-b");
    c.clear_requests();
    let out = ok(&cleanup(&c, &["-A", "--yes"]));
    assert!(out.contains("deleted: 2 identities"), "{out}");
    let lists: Vec<String> = c
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET")
        .map(|r| r.path)
        .collect();
    // The plan: the trio, pods, and the pod-bearing kinds, each once across the
    // cluster.
    let (plan, recheck) = lists.split_at(4 + KINDS);
    assert!(
        plan.iter().all(|p| !p.contains("/namespaces/")),
        "{lists:?}"
    );
    // The re-check, in each namespace the batch touches: a pod list per identity
    // and the pod-bearing kinds per namespace.
    assert_eq!(recheck.len(), 2 + 2 * KINDS, "{lists:?}");
    for ns in [&a, &b] {
        let here = recheck
            .iter()
            .filter(|p| p.contains(&format!("/namespaces/{ns}/")))
            .count();
        assert_eq!(here, 1 + KINDS, "{ns}: {lists:?}");
    }
    // -n scopes to one namespace.
    let cc = c.ns_named("team-c");
    c.seed_trio(&b, "nvcf-worker-b");
    c.seed_trio(&cc, "nvcf-worker-c");
    ok(&cleanup(&c, &["-n", &cc, "--yes"]));
    assert_eq!(c.members(&cc, "nvcf-worker-c"), 0);
    assert_eq!(c.members(&b, "nvcf-worker-b"), 3);
}

// ---- the re-check's protobuf pods ----

/// xorshift64*: the generated pods are a seed (`NVW_WIRE_SEED` to replay).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n as u64) as usize
    }
}

/// A generated pod: its account in `serviceAccountName`, in the deprecated
/// `serviceAccount` only, or none; labels, annotations (values long enough for
/// 1-, 2- and 3-byte length prefixes) and containers of random sizes; any
/// phase, or no status at all.
fn generated_pod(ns: &str, i: usize, rng: &mut Rng) -> serde_json::Value {
    let account = format!("nvcf-worker-gen-{}", rng.below(5));
    let mut spec = json!({"containers": (0..1 + rng.below(3))
        .map(|c| {
            let args = vec!["x"; 4 * rng.below(4)];
            json!({"name": format!("c{c}"), "image": "busybox", "args": args})
        })
        .collect::<Vec<_>>()});
    match rng.below(3) {
        0 => spec["serviceAccountName"] = json!(account),
        1 => spec["serviceAccount"] = json!(account),
        _ => {}
    }
    let labels: serde_json::Map<String, serde_json::Value> = (0..rng.below(12))
        .map(|l| (format!("l{l}"), json!("v".repeat(rng.below(63)))))
        .collect();
    let note = "n".repeat([0, 100, 200, 20_000][rng.below(4)]);
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("gen-{}{i}", "x".repeat(rng.below(40))), "namespace": ns,
            "labels": labels, "annotations": {"note": note}},
        "spec": spec});
    let phases = ["Pending", "Running", "Succeeded", "Failed", "Unknown"];
    if let Some(phase) = phases.get(rng.below(phases.len() + 1)) {
        pod["status"] = json!({ "phase": phase });
    }
    pod
}

fn query_escaped(token: &str) -> String {
    token
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn the_rechecks_protobuf_pods_read_as_the_servers_json_of_the_same_pages() {
    use kubectl_nvcf_worker::live::wire;
    let c = Cluster::start();
    let ns = c.ns.clone();
    let seed = std::env::var("NVW_WIRE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::process::id() as u64 * 0x9E37_79B9);
    println!("NVW_WIRE_SEED={seed}");
    let mut rng = Rng(seed | 1);
    // Admission looks every pod's account up: they exist.
    for i in 0..5 {
        c.seed_trio(&ns, &format!("nvcf-worker-gen-{i}"));
    }
    c.wait_for_default_account(&ns);
    c.create_all((0..40).map(|i| generated_pod(&ns, i, &mut rng)).collect());
    let path = format!("/api/v1/namespaces/{ns}/pods");
    let mut seen = Vec::new();
    for limit in [1, 7, 500] {
        let (mut json_token, mut proto_token) = (String::new(), String::new());
        loop {
            let page = |token: &str, accept: &str| {
                let url = format!("{path}?limit={limit}&continue={}", query_escaped(token));
                let (code, content_type, body) = c.admin.get_bytes(&url, accept);
                assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
                (content_type, body)
            };
            let (json_type, json_body) = page(&json_token, "application/json");
            let (proto_type, proto_body) = page(&proto_token, wire::ACCEPT_PROTOBUF);
            assert_eq!(json_type, "application/json");
            assert_eq!(proto_type, "application/vnd.kubernetes.protobuf");
            let listed: serde_json::Value = serde_json::from_slice(&json_body).unwrap();
            let expected: Vec<wire::Pod> = serde_json::from_value(listed["items"].clone()).unwrap();
            let raw = wire::envelope(&proto_body)
                .expect("a protobuf body")
                .unwrap();
            let (pods, token) = wire::pod_list(raw).unwrap();
            assert_eq!(pods, expected, "limit {limit}, after {json_token:?}");
            let json_next = listed["metadata"]["continue"].as_str().unwrap_or("");
            assert_eq!(token.is_some(), !json_next.is_empty(), "limit {limit}");
            seen.extend(pods);
            match token {
                Some(t) => (json_token, proto_token) = (json_next.to_string(), t),
                None => break,
            }
        }
    }
    // Every pod three times, and the cases the decoder must tell apart were made.
    assert_eq!(seen.len(), 3 * 40);
    let account = |p: &wire::Pod| p.spec.service_account_name.clone().unwrap_or_default();
    assert!(seen
        .iter()
        .any(|p| account(p).starts_with("nvcf-worker-gen-")));
    assert!(seen.iter().any(|p| account(p) == "default"));
    // The server sets both account fields (from either) and Pending when no
    // status was set: the decoder reads what it sends.
    assert!(seen.iter().any(|p| p.spec.service_account.is_some()));
    assert!(seen
        .iter()
        .any(|p| p.status.phase.as_deref() == Some("Pending")));
    assert!(seen
        .iter()
        .any(|p| p.status.phase.as_deref() == Some("Failed")));
    // A failure in protobuf gives the message its JSON gives.
    let missing = format!("{path}/no-such-pod");
    let (code, _, proto) = c.admin.get_bytes(&missing, wire::ACCEPT_PROTOBUF);
    let (_, _, json_body) = c.admin.get_bytes(&missing, "application/json");
    assert_eq!(code, 404);
    assert!(proto.starts_with(wire::MAGIC));
    let message: serde_json::Value = serde_json::from_slice(&json_body).unwrap();
    assert_eq!(
        wire::status_message(&proto).as_deref(),
        message["message"].as_str()
    );
}
