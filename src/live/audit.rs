//! `audit`: the guard's rules over live objects, plus checks that only make sense
//! on running pods that carry a worker identity (token audience and lifetime,
//! automount, the two env vars).
//!
//! Pods, ReplicaSets and Jobs with a controller are left to the guard's view of
//! their controller: their names are generated, so the guard's derived-name rule
//! only holds for the workload that declared the identity. The pod checks still
//! run on every pod.

use std::io::Write;

use serde_json::Value;

use super::client::{self, Kube, Resource, Scope};
use crate::commands::ReportFormat;
use crate::error::{Error, Result};
use crate::guard;
use crate::identity::{self, PREFIX};
use crate::manifest::batch::{Batch, Source, SourceKind};
use crate::manifest::{from_json, Document};
use crate::report::{Finding, Location, ResourceRef, Severity};

pub const TOKEN_AUDIENCE: &str = "NVW201";
pub const TOKEN_EXPIRATION: &str = "NVW202";
pub const AUTOMOUNT: &str = "NVW203";
pub const WORKER_ENV: &str = "NVW204";

/// What audit reads, in report order.
const AUDITED: [Resource; 12] = [
    client::PODS,
    client::DEPLOYMENTS,
    client::STATEFUL_SETS,
    client::DAEMON_SETS,
    client::REPLICA_SETS,
    client::JOBS,
    client::CRON_JOBS,
    client::SERVICE_ACCOUNTS,
    client::ROLES,
    client::ROLE_BINDINGS,
    client::CLUSTER_ROLES,
    client::CLUSTER_ROLE_BINDINGS,
];

const TOKEN_SECRET_TYPE: &str = "kubernetes.io/service-account-token";

fn has_controller(item: &Value) -> bool {
    item.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter()
                .any(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        })
}

fn resource_ref(item: &Value) -> ResourceRef {
    let text = |p: &str| item.pointer(p).and_then(Value::as_str).unwrap_or("");
    ResourceRef {
        api_version: text("/apiVersion").into(),
        kind: text("/kind").into(),
        name: text("/metadata/name").into(),
        namespace: Some(text("/metadata/namespace"))
            .filter(|n| !n.is_empty())
            .map(str::to_string),
    }
}

/// The checks on a pod running as a worker account. `accounts` resolves the
/// ServiceAccount's own automount setting (None when it is not listed).
pub fn check_pod(
    pod: &Value,
    cluster_id: Option<&str>,
    account_automount: impl Fn(&str, &str) -> Option<bool>,
) -> Vec<Finding> {
    let spec = pod.get("spec").cloned().unwrap_or(Value::Null);
    let account = spec
        .get("serviceAccountName")
        .or_else(|| spec.get("serviceAccount"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if !account.starts_with(PREFIX) {
        return Vec::new();
    }
    let at = resource_ref(pod);
    let mut out = Vec::new();
    let mut push = |f: Finding, field: &str| out.push(f.resource(Some(at.clone())).field(field));

    let tokens: Vec<(usize, &Value)> = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .flat_map(|(i, v)| {
            v.pointer("/projected/sources")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(move |s| s.get("serviceAccountToken").map(|t| (i, t)))
        })
        .collect();
    if tokens.is_empty() {
        push(
            Finding::error(format!("pod runs as worker account {account:?} but has no projected service account token volume")).rule(TOKEN_AUDIENCE),
            "spec.volumes",
        );
    }
    for (i, token) in &tokens {
        let field = format!("spec.volumes[{i}].projected");
        let audience = token.get("audience").and_then(Value::as_str).unwrap_or("");
        if let Some(id) = cluster_id {
            let want = identity::audience(id);
            if audience != want {
                push(
                    Finding::error(format!(
                        "projected token audience is {audience:?}, want {want:?}"
                    ))
                    .rule(TOKEN_AUDIENCE),
                    &field,
                );
            }
        } else if !audience.starts_with("nvcf-icms:") {
            push(
                Finding::error(format!(
                    "projected token audience is {audience:?}, want nvcf-icms:<cluster-id>"
                ))
                .rule(TOKEN_AUDIENCE),
                &field,
            );
        }
        let range = identity::MIN_EXPIRATION_SECONDS..=identity::MAX_EXPIRATION_SECONDS;
        match token.get("expirationSeconds").and_then(Value::as_i64) {
            Some(s) if range.contains(&s) => {}
            other => push(
                Finding::error(format!(
                    "projected token expirationSeconds is {}, want {}..{} (default {})",
                    other.map_or("unset".into(), |s| s.to_string()),
                    range.start(),
                    range.end(),
                    identity::DEFAULT_EXPIRATION_SECONDS
                ))
                .rule(TOKEN_EXPIRATION),
                &field,
            ),
        }
    }

    let ns = at.namespace.as_deref().unwrap_or("");
    let automount = spec
        .get("automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or_else(|| account_automount(ns, account))
        .unwrap_or(true);
    if automount {
        push(
            Finding::error("the legacy service account token is automounted beside the projected one; set automountServiceAccountToken: false").rule(AUTOMOUNT),
            "spec.automountServiceAccountToken",
        );
    }

    let skipped: Vec<&str> = pod
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(identity::SKIP_CONTAINERS_ANNOTATION))
        .and_then(Value::as_str)
        .map(|s| s.split(',').map(str::trim).collect())
        .unwrap_or_default();
    for (i, c) in spec
        .get("containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = c.get("name").and_then(Value::as_str).unwrap_or("");
        if skipped.contains(&name) {
            continue;
        }
        let env = c.get("env").and_then(Value::as_array);
        for (key, want) in identity::env_vars() {
            let value = env
                .into_iter()
                .flatten()
                .find(|e| e.get("name").and_then(Value::as_str) == Some(key))
                .map(|e| e.get("value").and_then(Value::as_str).unwrap_or(""));
            if value != Some(want) {
                push(
                    Finding::error(format!(
                        "container {name:?}: env {key} is {}, want {want:?}",
                        value.map_or("missing".into(), |v| format!("{v:?}"))
                    ))
                    .rule(WORKER_ENV),
                    &format!("spec.containers[{i}].env"),
                );
            }
        }
    }
    out
}

pub async fn run(
    kube: &Kube,
    scope: &Scope,
    cluster_id: Option<&str>,
    format: ReportFormat,
    stdout: &mut dyn Write,
) -> Result<()> {
    let mut lists =
        futures::future::try_join_all(AUDITED.iter().map(|r| kube.list(r, scope, false, None)))
            .await?;
    let secrets = kube
        .list(
            &client::SECRETS,
            scope,
            false,
            Some(&format!("type={TOKEN_SECRET_TYPE}")),
        )
        .await?
        .into_iter()
        .filter(|s| s.get("type").and_then(Value::as_str) == Some(TOKEN_SECRET_TYPE));
    let service_accounts = &lists[AUDITED
        .iter()
        .position(|r| *r == client::SERVICE_ACCOUNTS)
        .expect("listed")];
    let automount = |ns: &str, name: &str| {
        service_accounts
            .iter()
            .find(|sa| {
                sa.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns)
                    && sa.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
            })
            .and_then(|sa| {
                sa.get("automountServiceAccountToken")
                    .and_then(Value::as_bool)
            })
    };
    let mut findings = Vec::new();
    for pod in &lists[0] {
        findings.extend(check_pod(pod, cluster_id, automount));
    }

    let mut objects = 0;
    let mut docs = Vec::new();
    for (resource, items) in AUDITED.iter().zip(lists.iter_mut()) {
        for item in items.drain(..) {
            objects += 1;
            let generated =
                matches!(resource.kind, "Pod" | "ReplicaSet" | "Job") && has_controller(&item);
            if !generated {
                docs.push(Document::new(from_json(&item)));
            }
        }
    }
    for secret in secrets {
        objects += 1;
        docs.push(Document::new(from_json(&secret)));
    }
    let batch = Batch::new(vec![Source {
        name: "cluster".into(),
        kind: SourceKind::Stream,
        docs,
    }]);
    let guard_findings = guard::check(
        &batch,
        &guard::Allow {
            self_refs: &Default::default(),
        },
    );
    // Files and lines mean nothing for live objects: the resource says where.
    findings.extend(
        guard_findings
            .into_iter()
            .map(|f| f.at(Location::default())),
    );

    let errors = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    let warnings = findings
        .iter()
        .filter(|f| f.severity == Severity::Warning)
        .count();
    let write_err = |e: std::io::Error| Error::io("<stdout>", e);
    match format {
        ReportFormat::Text => {
            for f in &findings {
                writeln!(stdout, "{}", f.to_text()).map_err(write_err)?;
            }
            let plural = |n: usize, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
            writeln!(
                stdout,
                "{}, {} in {}",
                plural(errors, "error"),
                plural(warnings, "warning"),
                plural(objects, "object")
            )
            .map_err(write_err)?;
        }
        ReportFormat::Json => {
            let doc = serde_json::json!({
                "apiVersion": "nvcf.io/v1alpha1",
                "kind": "AuditReport",
                "objects": objects,
                "errors": errors,
                "warnings": warnings,
                "findings": findings,
            });
            serde_json::to_writer_pretty(&mut *stdout, &doc).map_err(|e| write_err(e.into()))?;
            writeln!(stdout).map_err(write_err)?;
        }
    }
    if errors > 0 {
        return Err(Error::Reported { errors });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn worker_pod() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"},
            "spec": {"serviceAccountName": "nvcf-worker-p", "automountServiceAccountToken": false,
                "containers": [{"name": "app", "env": [
                    {"name": "NVCF_TOKEN_FILE_PATH", "value": "/var/run/secrets/tokens/token"},
                    {"name": "NVCF_IDENTITY_SOURCE", "value": "psat"}]}],
                "volumes": [{"name": "nvcf-worker-token", "projected": {"sources": [{"serviceAccountToken":
                    {"audience": "nvcf-icms:c1", "expirationSeconds": 900, "path": "token"}}]}}]}})
    }

    fn rules(f: &[Finding]) -> Vec<&str> {
        f.iter().filter_map(|f| f.rule).collect()
    }

    #[test]
    fn a_well_formed_worker_pod_passes() {
        assert!(check_pod(&worker_pod(), Some("c1"), |_, _| None).is_empty());
    }

    #[test]
    fn each_pod_rule_fires_on_its_own_defect() {
        assert_eq!(
            rules(&check_pod(&worker_pod(), Some("c2"), |_, _| None)),
            [TOKEN_AUDIENCE]
        );
        let mut p = worker_pod();
        p["spec"]["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]
            .as_object_mut()
            .unwrap()
            .remove("expirationSeconds");
        assert_eq!(
            rules(&check_pod(&p, Some("c1"), |_, _| None)),
            [TOKEN_EXPIRATION]
        );
        let mut p = worker_pod();
        p["spec"]
            .as_object_mut()
            .unwrap()
            .remove("automountServiceAccountToken");
        assert_eq!(rules(&check_pod(&p, None, |_, _| None)), [AUTOMOUNT]);
        assert!(check_pod(&p, None, |_, _| Some(false)).is_empty());
        let mut p = worker_pod();
        p["spec"]["containers"][0]["env"][1]["value"] = json!("static");
        assert_eq!(rules(&check_pod(&p, None, |_, _| None)), [WORKER_ENV]);
        p["metadata"]["annotations"] = json!({"nvcf.io/skip-containers": "app"});
        assert!(check_pod(&p, None, |_, _| None).is_empty());
    }

    #[test]
    fn pods_without_a_worker_account_are_not_checked() {
        let mut p = worker_pod();
        p["spec"]["serviceAccountName"] = json!("default");
        p["spec"]["volumes"] = json!([]);
        assert!(check_pod(&p, Some("c1"), |_, _| None).is_empty());
    }
}
