//! `audit --apply-reports` and `-o policyreport` on the real control plane, with
//! each report API's CRDs as its project publishes them (scripts/fetch-report-crds.sh:
//! Kyverno's wgpolicyk8s.io copy, openreports' reports-api): the reports are
//! accepted by the CRD schema (which is shown to refuse what it should), read back
//! with the real kubectl, replaced on the next run, removed when the finding is
//! gone; reports that are not ours are never touched.

use crate::live_support;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use live_support::*;
use serde_json::{json, Value};

/// One report API as the tests name it.
pub struct Api {
    pub flag: &'static str,
    pub api_version: &'static str,
    pub kind: &'static str,
    pub cluster_kind: &'static str,
    /// As `kubectl get` names the namespaced kind unambiguously.
    pub kubectl_resource: &'static str,
}

pub const WGPOLICY: Api = Api {
    flag: "wgpolicyk8s",
    api_version: "wgpolicyk8s.io/v1alpha2",
    kind: "PolicyReport",
    cluster_kind: "ClusterPolicyReport",
    kubectl_resource: "policyreports",
};

pub const OPENREPORTS: Api = Api {
    flag: "openreports",
    api_version: "openreports.io/v1alpha1",
    kind: "Report",
    cluster_kind: "ClusterReport",
    kubectl_resource: "reports.openreports.io",
};

fn crd_dir() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fetch-report-crds.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .output()
        .expect("run fetch-report-crds.sh");
    PathBuf::from(ok(&out).trim())
}

/// Installs the four report CRDs on the shared control plane once per run (kept:
/// other tests on the plane never read them) and waits until both APIs serve.
pub fn install_report_crds(c: &Cluster) {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let bin = tempfile::tempdir().unwrap();
        let dir = crd_dir();
        ok(&kubectl(
            bin.path(),
            &c.admin_kubeconfig,
            &["apply", "--server-side", "-f", dir.to_str().unwrap()],
        ));
        let deadline = Instant::now() + Duration::from_secs(60);
        for path in [
            "/apis/wgpolicyk8s.io/v1alpha2/policyreports",
            "/apis/wgpolicyk8s.io/v1alpha2/clusterpolicyreports",
            "/apis/openreports.io/v1alpha1/reports",
            "/apis/openreports.io/v1alpha1/clusterreports",
        ] {
            while c.admin.call("GET", path, None).is_err() {
                assert!(Instant::now() < deadline, "{path} never served");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    });
}

fn worker_pod(ns: &str, name: &str, audience: &str, expiration: u32) -> Value {
    let token = json!({"audience": audience, "path": "token", "expirationSeconds": expiration});
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": {"serviceAccountName": format!("nvcf-worker-{name}"), "automountServiceAccountToken": false,
            "containers": [{"name": "app", "image": "x", "env": [
                {"name": "NVCF_TOKEN_FILE_PATH", "value": "/var/run/secrets/tokens/token"},
                {"name": "NVCF_IDENTITY_SOURCE", "value": "psat"}],
                "volumeMounts": [{"name": "nvcf-worker-token", "mountPath": "/var/run/secrets/tokens", "readOnly": true}]}],
            "volumes": [{"name": "nvcf-worker-token", "projected": {"sources": [{"serviceAccountToken": token}]}}]},
        "status": {"phase": "Running"}})
}

/// A report another tool wrote: `name` in `ns`, labelled as that tool's.
fn foreign_report(api: &Api, ns: &str, name: &str) -> Value {
    json!({"apiVersion": api.api_version, "kind": api.kind,
        "metadata": {"name": name, "namespace": ns, "labels": {"app.kubernetes.io/managed-by": "kyverno"}},
        "results": [{"policy": "require-labels", "rule": "check", "result": "fail", "source": "kyverno"}]})
}

/// The namespaced reports in `ns`, as the real kubectl reads them.
fn kubectl_reports(c: &Cluster, api: &Api, ns: &str) -> Vec<Value> {
    let bin = tempfile::tempdir().unwrap();
    let out = ok(&kubectl(
        bin.path(),
        &c.admin_kubeconfig,
        &["get", api.kubectl_resource, "-n", ns, "-o", "json"],
    ));
    let list: Value = serde_json::from_str(&out).unwrap();
    list["items"].as_array().unwrap().clone()
}

fn ours(reports: &[Value]) -> Option<&Value> {
    reports
        .iter()
        .find(|r| r["metadata"]["name"] == "nvcf-worker-audit")
}

fn rules_of(report: &Value) -> Vec<String> {
    let mut out: Vec<String> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rule"].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

/// The schema is live: a result the CRD refuses is refused, and an unknown
/// field under strict validation too (what the plugin's apply uses).
fn schema_refuses_bad_reports(c: &Cluster, api: &Api, ns: &str) {
    let mut bad = foreign_report(api, ns, "bad-result");
    bad["results"][0]["result"] = json!("failed");
    let err = c.admin.create(&bad).expect_err("result outside the enum");
    assert_eq!(err.code, 422, "{}", err.body);
    assert!(err.body.contains("results[0].result"), "{}", err.body);
    let mut unknown = foreign_report(api, ns, "bad-field");
    unknown["results"][0]["ruleId"] = json!("x");
    let path = format!(
        "{}?fieldValidation=Strict",
        client::collection(api.api_version, api.kind, Some(ns))
    );
    let err = c
        .admin
        .call("POST", &path, Some(&unknown))
        .expect_err("unknown field");
    assert!(err.body.contains("unknown field"), "{}", err.body);
}

fn lifecycle(api: &Api) {
    let c = Cluster::start();
    install_report_crds(&c);
    let ns = c.ns.clone();
    let other = c.ns_named("quiet");
    schema_refuses_bad_reports(&c, api, &ns);
    let neighbour = c.create(foreign_report(api, &ns, "kyverno-pol"));
    // In a namespace without findings, someone else's report of our name: kept.
    let namesake = c.create(foreign_report(api, &other, "nvcf-worker-audit"));

    c.seed_trio(&ns, "nvcf-worker-one");
    let one = c.create(worker_pod(&ns, "one", "nvcf-icms:other", 900));
    let audit = |ns: &str, extra: &[&str]| {
        let mut args = vec![
            "audit",
            "-n",
            ns,
            "--cluster-id",
            "prod-1",
            "--report-api",
            api.flag,
        ];
        args.extend_from_slice(extra);
        c.run(&args)
    };
    let first = ok(&audit(&ns, &["--apply-reports"]));
    assert!(
        first.contains(&format!(
            "applied {} {ns}/nvcf-worker-audit: 1 result\n",
            api.kind
        )),
        "{first}"
    );
    assert!(
        first.contains(&format!("applied {} nvcf-worker-audit: ", api.cluster_kind)),
        "{first}"
    );
    let reports = kubectl_reports(&c, api, &ns);
    let report = ours(&reports).expect("our report").clone();
    assert_eq!(rules_of(&report), ["NVW201"]);
    let result = &report["results"][0];
    assert_eq!(result["result"], "fail");
    assert_eq!(result["severity"], "high");
    assert_eq!(result["policy"], "nvcf-worker");
    assert_eq!(result["source"], "kubectl-nvcf-worker");
    assert_eq!(
        result["message"],
        kubectl_nvcf_worker::rules::get("NVW201").short
    );
    assert_eq!(
        result["resources"],
        json!([{"apiVersion": "v1", "kind": "Pod", "name": "one", "namespace": ns,
            "uid": one["metadata"]["uid"]}])
    );
    assert_eq!(report["summary"]["fail"], 1);
    assert_eq!(
        report["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "kubectl-nvcf-worker"
    );
    let first_time = result["timestamp"]["seconds"].as_i64().unwrap();

    // -o policyreport prints what --apply-reports applies, in a form kubectl
    // apply takes (checked by the server, not persisted).
    let printed = audit(&ns, &["-o", "policyreport"]);
    assert_eq!(printed.status.code(), Some(1), "{}", stderr(&printed));
    let yaml = stdout(&printed);
    let file = c.dir.path().join("reports.yaml");
    std::fs::write(&file, &yaml).unwrap();
    let bin = tempfile::tempdir().unwrap();
    let dry = ok(&kubectl(
        bin.path(),
        &c.admin_kubeconfig,
        &[
            "apply",
            "--server-side",
            "--field-manager=kubectl-nvcf-worker",
            "--dry-run=server",
            "-f",
            file.to_str().unwrap(),
        ],
    ));
    assert!(
        dry.contains("nvcf-worker-audit serverside-applied (server dry run)"),
        "{dry}"
    );

    // A second defect: the next run replaces the results, in the same object.
    std::thread::sleep(Duration::from_millis(1100));
    c.seed_trio(&ns, "nvcf-worker-two");
    // Longer than a day: NVW202 (the server accepts up to 2^32 seconds).
    c.create(worker_pod(&ns, "two", "nvcf-icms:prod-1", 172_800));
    // And a warning: a binding to the group of every account in the namespace
    // (NVW103), whose warn/medium the schema must take too.
    c.create(json!({"apiVersion": RBAC, "kind": "RoleBinding",
        "metadata": {"name": "everyone", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "Group", "name": format!("system:serviceaccounts:{ns}"),
            "apiGroup": "rbac.authorization.k8s.io"}]}));
    let second = ok(&audit(&ns, &["--apply-reports"]));
    assert!(second.contains("nvcf-worker-audit: 3 results"), "{second}");
    let again = ours(&kubectl_reports(&c, api, &ns)).unwrap().clone();
    assert_eq!(rules_of(&again), ["NVW103", "NVW201", "NVW202"]);
    let warning = again["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"] == "NVW103")
        .unwrap();
    assert_eq!(
        (&warning["result"], &warning["severity"]),
        (&json!("warn"), &json!("medium"))
    );
    assert_eq!(again["summary"]["warn"], 1);
    assert_eq!(again["summary"]["fail"], 2);
    assert_eq!(again["metadata"]["uid"], report["metadata"]["uid"]);
    assert!(
        again["results"][0]["timestamp"]["seconds"]
            .as_i64()
            .unwrap()
            > first_time
    );

    // Fixed: the report goes; the neighbour stays as it was.
    c.delete("v1", "Pod", Some(&ns), "one");
    c.delete("v1", "Pod", Some(&ns), "two");
    c.delete(RBAC, "RoleBinding", Some(&ns), "everyone");
    let third = ok(&audit(&ns, &["--apply-reports"]));
    assert!(
        third.contains(&format!(
            "deleted {} {ns}/nvcf-worker-audit: no findings left",
            api.kind
        )),
        "{third}"
    );
    let left = kubectl_reports(&c, api, &ns);
    assert!(ours(&left).is_none(), "{left:?}");
    assert_eq!(left.len(), 1);
    assert_eq!(
        left[0]["metadata"]["resourceVersion"],
        neighbour["metadata"]["resourceVersion"]
    );

    // Someone else's report of our name, in a namespace audited without findings:
    // neither deleted nor changed.
    let quiet = ok(&audit(&other, &["--apply-reports"]));
    assert!(!quiet.contains("deleted"), "{quiet}");
    let kept = ours(&kubectl_reports(&c, api, &other)).unwrap().clone();
    assert_eq!(
        kept["metadata"]["resourceVersion"],
        namesake["metadata"]["resourceVersion"]
    );
    // ... and with a finding there, it is not taken over: the run fails naming it.
    c.seed_trio(&other, "nvcf-worker-three");
    c.create(worker_pod(&other, "three", "nvcf-icms:other", 900));
    let refused = audit(&other, &["--apply-reports"]);
    assert_ne!(refused.status.code(), Some(0));
    assert!(
        stderr(&refused).contains(&format!(
            "{} {other}/nvcf-worker-audit not applied: a report of that name exists and is not this tool's",
            api.kind
        )),
        "{}",
        stderr(&refused)
    );
    let kept = ours(&kubectl_reports(&c, api, &other)).unwrap().clone();
    assert_eq!(
        kept["metadata"]["resourceVersion"],
        namesake["metadata"]["resourceVersion"]
    );
    c.adopt_cluster_scoped(api.api_version, api.cluster_kind, "nvcf-worker-audit");
}

#[test]
fn wgpolicyk8s_reports_are_applied_replaced_and_removed() {
    lifecycle(&WGPOLICY);
}

#[test]
fn openreports_reports_are_applied_replaced_and_removed() {
    lifecycle(&OPENREPORTS);
}

#[test]
fn a_cluster_without_the_crds_gets_a_clear_error_and_no_write() {
    // The server's own 404 for an API it does not serve, as a cluster without
    // the CRDs answers: installed here, so the proxy gives it.
    let c = Cluster::start();
    install_report_crds(&c);
    c.add_fault(
        Fault::new("/apis/wgpolicyk8s.io/v1alpha2/", FaultKind::Status(404)).times(usize::MAX),
    );
    c.clear_requests();
    let out = c.run(&["audit", "--apply-reports"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("the server does not serve wgpolicyk8s.io/v1alpha2 policyreports: install the policy report CRDs"),
        "{}",
        stderr(&out)
    );
    assert!(
        c.requests().iter().all(|r| r.method == "GET"),
        "{:?}",
        c.requests()
    );
}
