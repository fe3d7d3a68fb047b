//! `audit`'s findings as policy reports, the objects Kyverno writes and Policy
//! Reporter, kubescape and trivy-operator adapters read: `wgpolicyk8s.io/v1alpha2`
//! PolicyReport / ClusterPolicyReport by default, `openreports.io/v1alpha1`
//! Report / ClusterReport on request. One report per namespace with findings,
//! one cluster-scoped report for the rest (always applied: it says the audit
//! ran), all named [`NAME`] (per control plane with `--control-plane`) and
//! labelled as this tool's. Applying them replaces each report whole and deletes
//! our reports in namespaces whose findings are gone; a report not named and
//! labelled as ours is never read, changed or deleted.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use futures::{StreamExt, TryStreamExt};
use serde_json::{json, Value};

use super::client::{self, DeleteOutcome, Kube, Resource, Scope};
use crate::controlplane::OWNER_LABEL;
use crate::error::{Error, Result};
use crate::identity::{MANAGED_BY, MANAGED_BY_LABEL};
use crate::manifest::{from_json, node_to_yaml, ResourceRef};
use crate::report::{Finding, Severity};
use crate::rules;

/// The reports' name (suffixed `-<plane>` for an audit of one control plane).
pub const NAME: &str = "nvcf-worker-audit";
/// Every result's `policy`: the catalogue is one policy, its rules the ids.
pub const POLICY: &str = "nvcf-worker";
/// Every result's `category`, as Policy Reporter groups them.
pub const CATEGORY: &str = "NVCF worker identity";

/// `--report-api`: which report API the reports are written in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportApi {
    /// wgpolicyk8s.io/v1alpha2 PolicyReport and ClusterPolicyReport (Kyverno before 1.15, Policy Reporter).
    #[default]
    Wgpolicyk8s,
    /// openreports.io/v1alpha1 Report and ClusterReport (Kyverno 1.15 and later with openreports enabled).
    Openreports,
}

impl ReportApi {
    /// (namespaced, cluster-scoped) report types.
    pub fn resources(self) -> (Resource, Resource) {
        match self {
            ReportApi::Wgpolicyk8s => (
                client::res(
                    "wgpolicyk8s.io/v1alpha2",
                    "PolicyReport",
                    "policyreports",
                    true,
                ),
                client::res(
                    "wgpolicyk8s.io/v1alpha2",
                    "ClusterPolicyReport",
                    "clusterpolicyreports",
                    false,
                ),
            ),
            ReportApi::Openreports => (
                client::res("openreports.io/v1alpha1", "Report", "reports", true),
                client::res(
                    "openreports.io/v1alpha1",
                    "ClusterReport",
                    "clusterreports",
                    false,
                ),
            ),
        }
    }
}

/// What `audit` does with reports: the API, and the run's time (every result's
/// timestamp).
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub api: ReportApi,
    pub apply: bool,
    pub at: SystemTime,
}

/// The reports' name: one set per control plane, so that audits of two planes
/// never replace or delete each other's reports.
pub fn name(plane: Option<&str>) -> String {
    plane.map_or(NAME.to_string(), |p| format!("{NAME}-{p}"))
}

/// A result's `result` and `severity`: an error fails, a warning warns (high and
/// medium); audit gives no info findings, which would warn at severity info.
pub fn result_and_severity(s: Severity) -> (&'static str, &'static str) {
    match s {
        Severity::Error => ("fail", "high"),
        Severity::Warning => ("warn", "medium"),
        Severity::Info => ("warn", "info"),
    }
}

/// One result: the rule, its catalogue message (the finding's own text and
/// field go in `properties`), the object with its UID, the run's time.
fn result(f: &Finding, uid: &impl Fn(&ResourceRef) -> Option<String>, at: SystemTime) -> Value {
    let (outcome, severity) = result_and_severity(f.severity);
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut out = json!({
        "policy": POLICY,
        "category": CATEGORY,
        "result": outcome,
        "severity": severity,
        "source": MANAGED_BY,
        "timestamp": {"seconds": since.as_secs(), "nanos": since.subsec_nanos()},
        "message": f.rule.map_or(f.message.as_str(), |id| rules::get(id).short),
    });
    let mut properties = BTreeMap::new();
    if let Some(id) = f.rule {
        out["rule"] = json!(id);
        properties.insert("detail", f.message.clone());
    }
    if let Some(field) = &f.field {
        properties.insert("field", field.clone());
    }
    if !properties.is_empty() {
        out["properties"] = json!(properties);
    }
    if let Some(r) = &f.resource {
        let mut reference = json!({"apiVersion": r.api_version, "kind": r.kind, "name": r.name});
        if let Some(ns) = &r.namespace {
            reference["namespace"] = json!(ns);
        }
        if let Some(u) = uid(r) {
            reference["uid"] = json!(u);
        }
        out["resources"] = json!([reference]);
    }
    out
}

fn summary(results: &[Value]) -> Value {
    let count = |r: &str| results.iter().filter(|x| x["result"] == r).count();
    json!({"pass": count("pass"), "fail": count("fail"), "warn": count("warn"),
        "error": count("error"), "skip": count("skip")})
}

/// The reports for `findings`: the cluster-scoped one first, then one per
/// namespace with findings, by name. A finding on a namespaced object goes to
/// its namespace's report; the others (cluster-scoped objects, none) to the
/// cluster's.
pub fn build(
    findings: &[Finding],
    uid: impl Fn(&ResourceRef) -> Option<String>,
    options: &Options,
    plane: Option<&str>,
) -> Vec<Value> {
    let mut by_namespace: BTreeMap<Option<&str>, Vec<Value>> = BTreeMap::new();
    by_namespace.insert(None, Vec::new());
    for f in findings {
        let ns = f.resource.as_ref().and_then(|r| r.namespace.as_deref());
        by_namespace
            .entry(ns)
            .or_default()
            .push(result(f, &uid, options.at));
    }
    let (namespaced, cluster) = options.api.resources();
    let mut labels = json!({MANAGED_BY_LABEL: MANAGED_BY});
    if let Some(p) = plane {
        labels[OWNER_LABEL] = json!(p);
    }
    by_namespace
        .into_iter()
        .map(|(ns, results)| {
            let resource = if ns.is_some() { namespaced } else { cluster };
            let mut metadata = json!({"name": name(plane), "labels": labels});
            if let Some(ns) = ns {
                metadata["namespace"] = json!(ns);
            }
            let mut report = json!({"apiVersion": resource.api_version, "kind": resource.kind,
                "metadata": metadata, "summary": summary(&results), "results": results});
            if options.api == ReportApi::Openreports {
                // openreports has a report-level source too; wgpolicyk8s does not.
                report["source"] = json!(MANAGED_BY);
            }
            report
        })
        .collect()
}

/// `-o policyreport`: the reports as a YAML stream, as `kubectl apply -f -` takes it.
pub fn write(reports: &[Value], out: &mut dyn Write) -> Result<()> {
    let text: Vec<String> = reports
        .iter()
        .map(|r| node_to_yaml(&from_json(r)))
        .collect();
    out.write_all(text.join("---\n").as_bytes())
        .map_err(|e| Error::io("<stdout>", e))
}

/// What applying the reports did, for the text output.
#[derive(Debug, Default)]
pub struct Applied {
    /// `Kind namespace/name: N results`, in the order applied.
    pub applied: Vec<String>,
    /// `Kind namespace/name`, reports of ours whose namespace has no finding left.
    pub deleted: Vec<String>,
    /// `Kind namespace/name`, not applied: a report of that name is someone else's.
    pub refused: Vec<String>,
}

impl Applied {
    pub fn write(&self, out: &mut dyn Write) -> Result<()> {
        let write_err = |e| Error::io("<stdout>", e);
        for a in &self.applied {
            writeln!(out, "applied {a}").map_err(write_err)?;
        }
        for d in &self.deleted {
            writeln!(out, "deleted {d}: no findings left").map_err(write_err)?;
        }
        Ok(())
    }

    /// The run fails when a report could not be applied for someone else's.
    pub fn check(&self) -> Result<()> {
        if self.refused.is_empty() {
            return Ok(());
        }
        Err(Error::Live(format!(
            "{} not applied: a report of that name exists and is not this tool's (no label {MANAGED_BY_LABEL}={MANAGED_BY}); rename or remove it",
            self.refused.join(", ")
        )))
    }
}

fn display(report: &Value) -> String {
    let text = |p: &str| report.pointer(p).and_then(Value::as_str).unwrap_or("");
    match text("/metadata/namespace") {
        "" => format!("{} {}", text("/kind"), text("/metadata/name")),
        ns => format!("{} {ns}/{}", text("/kind"), text("/metadata/name")),
    }
}

/// Applies `reports` (server-side, 8 at a time) and deletes the reports of ours
/// in `scope` that were not applied, each only if it still has the UID it was
/// listed with. Ours are named as ours and labelled as ours: a namespace whose
/// report of that name is someone else's keeps it untouched, and the run fails
/// naming it once the others are applied.
pub async fn apply(
    kube: &Kube,
    scope: &Scope,
    api: ReportApi,
    reports: &[Value],
) -> Result<Applied> {
    let (namespaced, cluster) = api.resources();
    let name = reports
        .first()
        .and_then(|r| r.pointer("/metadata/name"))
        .and_then(Value::as_str)
        .unwrap_or(NAME);
    let Some(listed) = kube.list_named_if_served(&namespaced, scope, name).await? else {
        return Err(Error::Live(format!(
            "the server does not serve {} {}: install the policy report CRDs (Kyverno installs them), or pick the other API with --report-api",
            namespaced.api_version, namespaced.plural
        )));
    };
    let (ours, foreign): (Vec<Value>, Vec<Value>) = listed.into_iter().partition(|item| {
        client::labels(item)
            .get(MANAGED_BY_LABEL)
            .map(String::as_str)
            == Some(MANAGED_BY)
    });
    let foreign: BTreeSet<&str> = foreign
        .iter()
        .map(|i| client::text(i, "/metadata/namespace"))
        .collect();
    let (refused, to_apply): (Vec<&Value>, Vec<&Value>) = reports.iter().partition(|r| {
        r.pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .is_some_and(|ns| foreign.contains(ns))
    });
    let applied: Vec<String> = futures::stream::iter(to_apply)
        .map(|r| async move {
            let ns = r.pointer("/metadata/namespace").and_then(Value::as_str);
            let resource = if ns.is_some() { &namespaced } else { &cluster };
            kube.apply(resource, ns, name, r).await?;
            let n = r["results"].as_array().map_or(0, Vec::len);
            Ok::<_, Error>(format!(
                "{}: {n} result{}",
                display(r),
                if n == 1 { "" } else { "s" }
            ))
        })
        .buffered(8)
        .try_collect()
        .await?;
    let mut deleted = Vec::new();
    for item in &ours {
        let ns = client::text(item, "/metadata/namespace");
        if reports
            .iter()
            .any(|r| client::text(r, "/metadata/namespace") == ns)
        {
            continue;
        }
        let uid = client::text(item, "/metadata/uid");
        if kube.delete(&namespaced, ns, name, uid, false).await? == DeleteOutcome::Deleted {
            deleted.push(format!("{} {ns}/{name}", namespaced.kind));
        }
    }
    let refused = refused.iter().map(|r| display(r)).collect();
    Ok(Applied {
        applied,
        deleted,
        refused,
    })
}

/// UIDs of the listed objects by (kind, namespace, name), for results' references.
pub fn uids<'a>(
    items: impl Iterator<Item = &'a Value>,
) -> HashMap<(String, String, String), String> {
    items
        .filter_map(|i| {
            let uid = i.pointer("/metadata/uid")?.as_str()?;
            Some((
                (
                    client::text(i, "/kind").to_string(),
                    client::text(i, "/metadata/namespace").to_string(),
                    client::text(i, "/metadata/name").to_string(),
                ),
                uid.to_string(),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(severity: Severity, rule: Option<&'static str>, ns: Option<&str>) -> Finding {
        let mut f = Finding::new(severity, "the finding's own text").field("spec.x");
        f.rule = rule;
        f.resource(Some(ResourceRef {
            api_version: "v1".into(),
            kind: if ns.is_some() { "Pod" } else { "ClusterRole" }.into(),
            name: "p".into(),
            namespace: ns.map(str::to_string),
        }))
    }

    fn options(api: ReportApi) -> Options {
        Options {
            api,
            apply: false,
            at: UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 5),
        }
    }

    #[test]
    fn one_report_per_namespace_with_findings_and_always_the_clusters() {
        let findings = [
            finding(Severity::Error, Some(rules::TOKEN_AUDIENCE), Some("b")),
            finding(Severity::Warning, Some(rules::GROUP_INCLUDES_WORKERS), None),
            finding(Severity::Error, Some(rules::AUTOMOUNT), Some("a")),
            finding(Severity::Error, Some(rules::AUTOMOUNT), Some("b")),
        ];
        let uid = |r: &ResourceRef| (r.kind == "Pod").then(|| "u-1".to_string());
        let reports = build(&findings, uid, &options(ReportApi::Wgpolicyk8s), None);
        let at: Vec<String> = reports.iter().map(display).collect();
        assert_eq!(
            at,
            [
                "ClusterPolicyReport nvcf-worker-audit",
                "PolicyReport a/nvcf-worker-audit",
                "PolicyReport b/nvcf-worker-audit"
            ]
        );
        assert_eq!(
            reports[2]["summary"],
            json!({"pass": 0, "fail": 2, "warn": 0, "error": 0, "skip": 0})
        );
        assert_eq!(reports[0]["summary"]["warn"], 1);
        let r = &reports[2]["results"][0];
        assert_eq!(r["rule"], "NVW201");
        assert_eq!(r["message"], rules::get("NVW201").short);
        assert_eq!(
            r["properties"],
            json!({"detail": "the finding's own text", "field": "spec.x"})
        );
        assert_eq!(r["severity"], "high");
        assert_eq!(r["result"], "fail");
        assert_eq!(
            r["timestamp"],
            json!({"seconds": 1_700_000_000u64, "nanos": 5})
        );
        assert_eq!(
            r["resources"],
            json!([{"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "b", "uid": "u-1"}])
        );
        assert_eq!(reports[0]["results"][0]["resources"][0].get("uid"), None);
        assert!(reports.iter().all(|r| r.get("source").is_none()));
        assert_eq!(
            reports[1]["metadata"]["labels"],
            json!({MANAGED_BY_LABEL: MANAGED_BY})
        );
    }

    #[test]
    fn no_findings_still_give_the_cluster_report_empty() {
        let reports = build(&[], |_| None, &options(ReportApi::Openreports), Some("p1"));
        assert_eq!(reports.len(), 1);
        assert_eq!(reports[0]["kind"], "ClusterReport");
        assert_eq!(reports[0]["apiVersion"], "openreports.io/v1alpha1");
        assert_eq!(reports[0]["metadata"]["name"], "nvcf-worker-audit-p1");
        assert_eq!(reports[0]["metadata"]["labels"][OWNER_LABEL], "p1");
        assert_eq!(reports[0]["source"], MANAGED_BY);
        assert_eq!(reports[0]["results"], json!([]));
    }

    #[test]
    fn a_finding_without_a_rule_keeps_its_own_message() {
        let f = finding(Severity::Warning, None, None);
        let reports = build(&[f], |_| None, &options(ReportApi::Wgpolicyk8s), None);
        let r = &reports[0]["results"][0];
        assert_eq!(r["message"], "the finding's own text");
        assert_eq!(r.get("rule"), None);
        assert_eq!(r["properties"], json!({"field": "spec.x"}));
    }

    #[test]
    fn every_catalogue_severity_maps_into_the_crd_enums() {
        for rule in rules::RULES {
            let (result, severity) = result_and_severity(rule.severity);
            assert!(["pass", "fail", "warn", "error", "skip"].contains(&result));
            assert!(["critical", "high", "medium", "low", "info"].contains(&severity));
        }
    }
}
