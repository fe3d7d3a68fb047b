//! `describe POD`: whether ICMS would accept the pod's token, condition by
//! condition, and the WorkerAuth document the NVCF agent derives for it.
//!
//! What ICMS accepts is read in the agent's and ICMS's public code (`NVIDIA/nvcf`,
//! agent at `c9e7dbde`): the agent registers only pods it made
//! (`BuildWorkerAuth`, `nvca/pkg/miniservice/workerguard.go`: infra annotation,
//! `serviceAccountName: nvcf-worker`, a UID, in the namespace), and ICMS takes a
//! registration only for subject `system:serviceaccount:<ns>:nvcf-worker`, a
//! namespace, a UUID `saUid` and at most 64 `workerIdentifiers` (`WorkerAuth.java`,
//! `WorkerIdentifierService`), then accepts a token whose pod name and UID are
//! among them (`WorkerTokenVerificationService`). The token surface is the one
//! the agent injects (`injectWorkerTokenVolume`, `internal/miniservice/worker_identity.go`).
//!
//! WorkerAuth's fields are the newest agent type's (`WorkerAuth`, `nvca/pkg/types/types.go`
//! at `c9e7dbde`: `sub`, `namespace`, `saUid`, `workerIdentifiers` of `name` and `uid`).

use serde::Serialize;
use serde_json::Value;

use super::client::{Kube, Scope, PODS, SERVICE_ACCOUNTS};
use crate::error::{Error, Result};
use crate::identity::{self, INFRA_ANNOTATION, WORKER_NAME};
use crate::manifest::{from_json, Node};
use crate::workload;

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct WorkerIdentifier {
    pub name: String,
    pub uid: String,
}

/// The agent's WorkerAuth JSON; `saUid` is always sent by the newest agent.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WorkerAuth {
    pub sub: String,
    pub namespace: String,
    pub sa_uid: String,
    pub worker_identifiers: Vec<WorkerIdentifier>,
}

/// ICMS refuses a WorkerAuth with more identifiers (`WorkerAuth.MAX_WORKER_IDENTIFIERS`,
/// `@Size(max = 64)`): the whole registration, not only the extra pods.
pub const MAX_WORKER_IDENTIFIERS: usize = 64;

/// Whether the agent authored this object (`IsInfraOwnedObject`: a non-empty value).
fn is_infra(obj: &Value) -> bool {
    !meta(obj, "annotations", INFRA_ANNOTATION).is_empty()
}

fn meta<'a>(obj: &'a Value, map: &str, key: &str) -> &'a str {
    obj.pointer(&format!("/metadata/{map}"))
        .and_then(|m| m.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The pods the agent registers for the namespace's `nvcf-worker`, in list order.
pub fn miniservice_identifiers(pods: &[Value]) -> Vec<WorkerIdentifier> {
    pods.iter()
        .filter(|p| {
            text(p, "/spec/serviceAccountName") == WORKER_NAME
                && !text(p, "/metadata/uid").is_empty()
                && is_infra(p)
        })
        .map(|p| WorkerIdentifier {
            name: text(p, "/metadata/name").to_string(),
            uid: text(p, "/metadata/uid").to_string(),
        })
        .collect()
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// A named object and its UID, in `describe -o json|yaml`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ObjectRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// The contract a pod follows, told by its account's name.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Contract {
    /// One `nvcf-worker` per namespace: the MiniService agent's, the one the newest ICMS accepts.
    PerNamespace,
    /// `nvcf-worker-<pod>` (PR #846): what the agent calls its legacy per-instance prefix.
    PerPod,
}

impl Contract {
    pub fn of(account: &str) -> Contract {
        if account == WORKER_NAME {
            Contract::PerNamespace
        } else {
            Contract::PerPod
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Contract::PerNamespace => "per-namespace",
            Contract::PerPod => "per-pod",
        }
    }
}

/// The conditions, in the order they are reported.
pub const ACCOUNT: &str = "account";
pub const SERVICE_ACCOUNT: &str = "serviceAccount";
pub const POD_UID: &str = "podUID";
pub const AUDIENCE: &str = "audience";
pub const EXPIRY: &str = "expiry";
pub const TOKEN_PATH: &str = "tokenPath";
pub const ENV: &str = "env";
pub const AUTOMOUNT: &str = "automount";
pub const REGISTERED: &str = "registered";
pub const CONDITIONS: [&str; 9] = [
    ACCOUNT,
    SERVICE_ACCOUNT,
    POD_UID,
    AUDIENCE,
    EXPIRY,
    TOKEN_PATH,
    ENV,
    AUTOMOUNT,
    REGISTERED,
];

#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Fail,
}

/// One thing ICMS's acceptance depends on: whether it holds, why, and what to do.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Condition {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub status: Status,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn ok(kind: &'static str, reason: String) -> Condition {
    Condition {
        kind,
        status: Status::Ok,
        reason,
        fix: None,
    }
}

fn fail(kind: &'static str, reason: String, fix: String) -> Condition {
    Condition {
        kind,
        status: Status::Fail,
        reason,
        fix: Some(fix),
    }
}

/// What the verdict is drawn from, as read from the cluster.
pub struct Facts<'a> {
    pub namespace: &'a str,
    pub pod: &'a Value,
    /// The account the pod runs as (`serviceAccountName`, else `serviceAccount`).
    pub account: &'a str,
    pub service_account: Option<&'a Value>,
    /// The pods the agent would register with this one: the namespace's pods for
    /// `nvcf-worker`, the pod alone for a per-pod account.
    pub identifiers: &'a [WorkerIdentifier],
    pub cluster_id: Option<&'a str>,
}

/// `8-4-4-4-12` hex digits, as ICMS's `WorkerAuth.UUID_PATTERN` wants `saUid`.
pub fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The contract's projected token source: the `serviceAccountToken` of the
/// volume `nvcf-worker-token`.
fn token_source(spec: &Value) -> Option<&Value> {
    spec.get("volumes")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(identity::TOKEN_VOLUME))?
        .pointer("/projected/sources")?
        .as_array()?
        .iter()
        .find_map(|s| s.get("serviceAccountToken"))
}

/// The containers the agent injects the token into: every non-init container,
/// less those `nvcf.io/skip-containers` names.
fn worker_containers(pod: &Value) -> Vec<(String, Node)> {
    let skip: Vec<&str> = meta(pod, "annotations", identity::SKIP_CONTAINERS_ANNOTATION)
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| (text(c, "/name").to_string(), from_json(c)))
        .filter(|(name, _)| !skip.contains(&name.as_str()))
        .collect()
}

/// Every condition for the pod, in [`CONDITIONS`] order.
pub fn conditions(f: &Facts) -> Vec<Condition> {
    let ns = f.namespace;
    let pod_name = text(f.pod, "/metadata/name");
    let spec = f.pod.get("spec").unwrap_or(&Value::Null);
    let mut out = Vec::new();

    let subject = identity::service_account_user(ns, WORKER_NAME);
    out.push(match Contract::of(f.account) {
        Contract::PerNamespace => ok(
            ACCOUNT,
            format!("runs as {WORKER_NAME} in namespace {ns}: the subject {subject} ICMS expects"),
        ),
        Contract::PerPod => fail(
            ACCOUNT,
            format!(
                "runs as the per-pod account {} (PR #846's contract): the newest ICMS accepts only the subject {subject}",
                f.account
            ),
            format!(
                "run the worker as {WORKER_NAME} in its namespace (naming: per-namespace); the agent calls {} its legacy per-instance prefix",
                identity::PREFIX
            ),
        ),
    });

    out.push(match f.service_account {
        None => fail(
            SERVICE_ACCOUNT,
            format!(
                "runs as ServiceAccount {:?}, which does not exist (not yet provisioned, or already cleaned up): the agent registers nothing without its UID",
                f.account
            ),
            format!(
                "recreate ServiceAccount {ns}/{} (the agent makes {WORKER_NAME} in the namespaces it provisions), then recreate the pod",
                f.account
            ),
        ),
        Some(sa) => {
            let uid = text(sa, "/metadata/uid");
            if is_uuid(uid) {
                ok(
                    SERVICE_ACCOUNT,
                    format!("ServiceAccount {ns}/{} exists, UID {uid}", f.account),
                )
            } else {
                fail(
                    SERVICE_ACCOUNT,
                    format!(
                        "ServiceAccount {ns}/{} has UID {uid:?}, not a UUID: ICMS refuses the registration (saUid)",
                        f.account
                    ),
                    "recreate the ServiceAccount through the API server, which gives it a UUID"
                        .into(),
                )
            }
        }
    });

    let pod_uid = text(f.pod, "/metadata/uid");
    out.push(if pod_uid.is_empty() {
        fail(
            POD_UID,
            "the pod has no UID: the agent registers only pods with one".into(),
            "describe the pod as the API server stores it, not a manifest".into(),
        )
    } else {
        ok(
            POD_UID,
            format!(
                "pod UID {pod_uid}: ICMS matches it against the token's kubernetes.io pod claim"
            ),
        )
    });

    let source = token_source(spec);
    let no_token = || {
        fail(
            AUDIENCE,
            format!(
                "no volume {:?} projects a service account token",
                identity::TOKEN_VOLUME
            ),
            "inject the contract's token (kubectl nvcf-worker inject --cluster-id ID)".into(),
        )
    };
    let audience = source
        .and_then(|t| t.get("audience"))
        .and_then(Value::as_str)
        .unwrap_or("");
    out.push(match (source, f.cluster_id) {
        (None, _) => no_token(),
        (Some(_), Some(id)) if audience == identity::audience(id) => {
            ok(AUDIENCE, format!("audience {audience}"))
        }
        (Some(_), Some(id)) => fail(
            AUDIENCE,
            format!("audience {audience:?}, want {:?}", identity::audience(id)),
            format!("set the token's audience to {}", identity::audience(id)),
        ),
        (Some(_), None) => match audience.strip_prefix("nvcf-icms:") {
            Some(id) if !id.trim().is_empty() => ok(
                AUDIENCE,
                format!(
                    "audience {audience} (cluster {id}; --cluster-id checks it is this cluster's)"
                ),
            ),
            _ => fail(
                AUDIENCE,
                format!("audience {audience:?}, want nvcf-icms:<clusterID>"),
                "set the token's audience to nvcf-icms:<clusterID> (inject --cluster-id ID)".into(),
            ),
        },
    });

    let range = identity::MIN_EXPIRATION_SECONDS..=identity::MAX_EXPIRATION_SECONDS;
    let default = identity::DEFAULT_EXPIRATION_SECONDS;
    let expiry = source
        .and_then(|t| t.get("expirationSeconds"))
        .and_then(Value::as_i64);
    out.push(match (source, expiry) {
        (None, _) => fail(
            EXPIRY,
            no_token().reason,
            no_token().fix.unwrap_or_default(),
        ),
        (Some(_), Some(s)) if range.contains(&s) => ok(
            EXPIRY,
            if s == default {
                format!("expirationSeconds {s}, as the agent requests")
            } else {
                format!(
                    "expirationSeconds {s}, within {}..{} (the agent requests {default})",
                    range.start(),
                    range.end()
                )
            },
        ),
        (Some(_), other) => fail(
            EXPIRY,
            format!(
                "expirationSeconds {}, want {}..{} (the agent requests {default})",
                other.map_or("unset".into(), |s| s.to_string()),
                range.start(),
                range.end()
            ),
            format!("set expirationSeconds: {default}"),
        ),
    });

    let containers = worker_containers(f.pod);
    let checks: Vec<(&str, workload::ContainerCheck)> = containers
        .iter()
        .map(|(name, c)| (name.as_str(), workload::check_container(c)))
        .collect();
    let projected_path = source
        .and_then(|t| t.get("path"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let unmounted = checks.iter().find(|(_, c)| {
        !c.has_mount
            || c.problems
                .iter()
                .any(|p| p.field.starts_with("volumeMounts"))
    });
    out.push(match (source, unmounted) {
        (None, _) => fail(
            TOKEN_PATH,
            no_token().reason,
            no_token().fix.unwrap_or_default(),
        ),
        (Some(_), _) if projected_path != identity::TOKEN_PATH => fail(
            TOKEN_PATH,
            format!(
                "the token is projected at path {projected_path:?}, not {:?}: the worker reads {}",
                identity::TOKEN_PATH,
                identity::TOKEN_FILE_PATH
            ),
            format!("set the projection's path to {}", identity::TOKEN_PATH),
        ),
        (Some(_), Some((name, c))) => fail(
            TOKEN_PATH,
            match c
                .problems
                .iter()
                .find(|p| p.field.starts_with("volumeMounts"))
            {
                Some(p) => format!("container {name:?}: {}", p.message),
                None => format!(
                    "container {name:?} does not mount {:?} at {}",
                    identity::TOKEN_VOLUME,
                    identity::TOKEN_MOUNT_PATH
                ),
            },
            format!(
                "mount {:?} read-only at {} in container {name:?}, or name it in {}",
                identity::TOKEN_VOLUME,
                identity::TOKEN_MOUNT_PATH,
                identity::SKIP_CONTAINERS_ANNOTATION
            ),
        ),
        (Some(_), None) => ok(
            TOKEN_PATH,
            format!("{} in every worker container", identity::TOKEN_FILE_PATH),
        ),
    });

    let env_wrong = checks.iter().find_map(|(name, c)| {
        let problem = c.problems.iter().find(|p| p.field.starts_with("env"));
        match (c.missing_env.first(), problem) {
            (Some(var), _) => Some(format!("container {name:?} lacks env {var}")),
            (None, Some(p)) => Some(format!("container {name:?}: {}", p.message)),
            (None, None) => None,
        }
        .map(|reason| (*name, reason))
    });
    let [(path_var, path_value), (source_var, source_value)] = identity::env_vars();
    out.push(match env_wrong {
        Some((name, reason)) => fail(
            ENV,
            format!("{reason}: the worker library reads its token only with both"),
            format!(
                "set {path_var}={path_value} and {source_var}={source_value} in container {name:?}, or name it in {}",
                identity::SKIP_CONTAINERS_ANNOTATION
            ),
        ),
        None => ok(
            ENV,
            format!("{path_var}={path_value} and {source_var}={source_value} in every worker container"),
        ),
    });

    let on_pod = spec
        .get("automountServiceAccountToken")
        .and_then(Value::as_bool);
    let on_account = f
        .service_account
        .and_then(|sa| sa.get("automountServiceAccountToken"))
        .and_then(Value::as_bool);
    let automount_fix = "set automountServiceAccountToken: false on the pod".to_string();
    out.push(match (on_pod, on_account) {
        (Some(false), _) => ok(AUTOMOUNT, "the pod sets automountServiceAccountToken: false".into()),
        (None, Some(false)) => ok(
            AUTOMOUNT,
            "unset on the pod; its ServiceAccount sets automountServiceAccountToken: false".into(),
        ),
        (Some(true), _) => fail(
            AUTOMOUNT,
            "the pod sets automountServiceAccountToken: true: the legacy API token is mounted beside the audience-bound one".into(),
            automount_fix,
        ),
        (None, _) => fail(
            AUTOMOUNT,
            "unset on the pod and its ServiceAccount does not set it false: the legacy API token is mounted beside the audience-bound one".into(),
            automount_fix,
        ),
    });

    let registered = f
        .identifiers
        .iter()
        .any(|w| w.name == pod_name && w.uid == pod_uid && !pod_uid.is_empty());
    let never = "only the agent registers pods, and only those it makes (a MiniService's utils pod): deploy the worker through the agent; a pod you deploy yourself keeps its bootstrap token (NVCF_WORKER_TOKEN) and is not injected".to_string();
    out.push(if !is_infra(f.pod) {
        fail(
            REGISTERED,
            format!(
                "the pod lacks the agent's {INFRA_ANNOTATION} annotation: the agent did not make it and never registers it, so ICMS refuses its token (no worker identifiers registered)"
            ),
            never,
        )
    } else if text(f.pod, "/spec/serviceAccountName") != f.account {
        fail(
            REGISTERED,
            "the pod names its account only in the deprecated serviceAccount: the agent reads serviceAccountName".into(),
            format!("set serviceAccountName: {}", f.account),
        )
    } else if f.identifiers.len() > MAX_WORKER_IDENTIFIERS {
        fail(
            REGISTERED,
            format!(
                "the agent would register {} pods in namespace {ns}, more than ICMS's {MAX_WORKER_IDENTIFIERS}: ICMS refuses the whole registration",
                f.identifiers.len()
            ),
            format!("run at most {MAX_WORKER_IDENTIFIERS} agent-made worker pods in the namespace"),
        )
    } else if !registered {
        fail(
            REGISTERED,
            "the pod is not among the pods the agent would register (no UID, or not yet listed)".into(),
            never,
        )
    } else {
        let ms = meta(f.pod, "labels", identity::MINISERVICE_LABEL);
        ok(
            REGISTERED,
            format!(
                "the agent made the pod ({INFRA_ANNOTATION}{}) and registers it, one of {} worker identifiers",
                if ms.is_empty() { String::new() } else { format!(", MiniService {ms}") },
                f.identifiers.len()
            ),
        )
    });
    out
}

/// `describe -o json|yaml`: the verdict, the pod, the account it runs as, and the
/// agent's WorkerAuth for it, unchanged.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    pub pod: ObjectRef,
    pub service_account: ObjectRef,
    pub contract: Contract,
    /// The audience of the pod's token, as found.
    pub audience: Option<String>,
    /// Whether ICMS would accept the pod's token: every condition holds.
    pub accepted: bool,
    pub conditions: Vec<Condition>,
    pub worker_auth: WorkerAuth,
}

impl Verdict {
    pub fn failing(&self) -> impl Iterator<Item = &Condition> {
        self.conditions.iter().filter(|c| c.status == Status::Fail)
    }
}

pub async fn describe(
    kube: &Kube,
    namespace: &str,
    pod_name: &str,
    cluster_id: Option<&str>,
) -> Result<Verdict> {
    let pod = kube
        .get(&PODS, namespace, pod_name)
        .await?
        .ok_or_else(|| Error::Live(format!("pod {namespace}/{pod_name} not found")))?;
    let account = match text(&pod, "/spec/serviceAccountName") {
        "" => text(&pod, "/spec/serviceAccount"),
        a => a,
    };
    if !identity::is_reserved(account) {
        let shown = if account.is_empty() {
            "default"
        } else {
            account
        };
        return Err(Error::Live(format!(
            "pod {namespace}/{pod_name} has no worker identity: it runs as ServiceAccount {shown:?}, not {WORKER_NAME} or {}*", identity::PREFIX
        )));
    }
    let sa = kube.get(&SERVICE_ACCOUNTS, namespace, account).await?;
    let identifiers = match Contract::of(account) {
        Contract::PerNamespace => miniservice_identifiers(
            &kube
                .list(&PODS, &Scope::Namespace(namespace.to_string()), false, None)
                .await?,
        ),
        Contract::PerPod => vec![WorkerIdentifier {
            name: pod_name.to_string(),
            uid: text(&pod, "/metadata/uid").to_string(),
        }],
    };
    Ok(verdict(&Facts {
        namespace,
        pod: &pod,
        account,
        service_account: sa.as_ref(),
        identifiers: &identifiers,
        cluster_id,
    }))
}

/// The verdict and the WorkerAuth from what was read.
pub fn verdict(f: &Facts) -> Verdict {
    let conditions = conditions(f);
    let sa_uid = f
        .service_account
        .map(|sa| text(sa, "/metadata/uid"))
        .unwrap_or("")
        .to_string();
    Verdict {
        pod: ObjectRef {
            namespace: f.namespace.to_string(),
            name: text(f.pod, "/metadata/name").to_string(),
            uid: text(f.pod, "/metadata/uid").to_string(),
        },
        service_account: ObjectRef {
            namespace: f.namespace.to_string(),
            name: f.account.to_string(),
            uid: sa_uid.clone(),
        },
        contract: Contract::of(f.account),
        audience: f
            .pod
            .get("spec")
            .and_then(token_source)
            .and_then(|t| t.get("audience"))
            .and_then(Value::as_str)
            .map(str::to_string),
        accepted: conditions.iter().all(|c| c.status == Status::Ok),
        conditions,
        worker_auth: WorkerAuth {
            sub: identity::service_account_user(f.namespace, f.account),
            namespace: f.namespace.to_string(),
            sa_uid,
            worker_identifiers: f.identifiers.to_vec(),
        },
    }
}

/// The text form: a line per condition, the verdict, then the WorkerAuth JSON.
pub fn write_text(v: &Verdict, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(
        out,
        "pod {}/{} runs as {} ({} contract)",
        v.pod.namespace,
        v.pod.name,
        v.service_account.name,
        v.contract.name()
    )?;
    let width = CONDITIONS.iter().map(|c| c.len()).max().unwrap_or(0);
    for c in &v.conditions {
        match (&c.status, &c.fix) {
            (Status::Fail, Some(fix)) => {
                writeln!(out, "FAIL  {:width$}  {}; fix: {fix}", c.kind, c.reason)?
            }
            _ => writeln!(out, "ok    {:width$}  {}", c.kind, c.reason)?,
        }
    }
    let failing: Vec<&str> = v.failing().map(|c| c.kind).collect();
    if failing.is_empty() {
        writeln!(out, "verdict: ICMS would accept this pod's token")?;
    } else {
        writeln!(
            out,
            "verdict: ICMS would refuse this pod's token ({} failing)",
            failing.join(", ")
        )?;
    }
    serde_json::to_writer_pretty(&mut *out, &v.worker_auth)?;
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const POD_UID_1: &str = "8360f3cd-637c-4d4d-9ac9-86b3c2cf5c28";
    const SA_UID_1: &str = "da568e79-c448-4e99-8474-56feb7223ee0";

    /// A pod as the agent makes it (`injectWorkerTokenVolume`).
    fn agent_pod(account: &str) -> Value {
        json!({
            "metadata": {"name": "utils", "uid": POD_UID_1,
                "annotations": {INFRA_ANNOTATION: "true"}},
            "spec": {
                "serviceAccountName": account, "serviceAccount": account,
                "automountServiceAccountToken": false,
                "volumes": [identity::token_volume(&identity::TokenSpec {
                    audience: identity::audience("c1"), expiration_seconds: 900 })],
                "containers": [{"name": "app", "image": "x",
                    "volumeMounts": [identity::token_mount()],
                    "env": [identity::env_var(identity::ENV_TOKEN_FILE_PATH, identity::TOKEN_FILE_PATH),
                            identity::env_var(identity::ENV_IDENTITY_SOURCE, identity::IDENTITY_SOURCE_PSAT)]}],
            },
        })
    }

    fn sa() -> Value {
        json!({"metadata": {"name": WORKER_NAME, "uid": SA_UID_1}, "automountServiceAccountToken": false})
    }

    /// The conditions that fail, with their reasons.
    fn failing(
        pod: &Value,
        account: &str,
        sa: Option<&Value>,
        ids: &[WorkerIdentifier],
        cluster: Option<&str>,
    ) -> Vec<(&'static str, String)> {
        let v = verdict(&Facts {
            namespace: "n",
            pod,
            account,
            service_account: sa,
            identifiers: ids,
            cluster_id: cluster,
        });
        assert_eq!(
            v.conditions.iter().map(|c| c.kind).collect::<Vec<_>>(),
            CONDITIONS
        );
        assert_eq!(v.accepted, v.failing().next().is_none());
        for c in &v.conditions {
            assert_eq!(c.fix.is_some(), c.status == Status::Fail, "{c:?}");
        }
        v.failing().map(|c| (c.kind, c.reason.clone())).collect()
    }

    fn me() -> Vec<WorkerIdentifier> {
        vec![WorkerIdentifier {
            name: "utils".into(),
            uid: POD_UID_1.into(),
        }]
    }

    #[test]
    fn the_agents_own_pod_passes_every_condition() {
        let pod = agent_pod(WORKER_NAME);
        let s = sa();
        assert_eq!(failing(&pod, WORKER_NAME, Some(&s), &me(), Some("c1")), []);
        assert_eq!(failing(&pod, WORKER_NAME, Some(&s), &me(), None), []);
        // Automount unset on the pod: the ServiceAccount's false holds.
        let mut unset = pod.clone();
        unset["spec"]
            .as_object_mut()
            .unwrap()
            .remove("automountServiceAccountToken");
        assert_eq!(failing(&unset, WORKER_NAME, Some(&s), &me(), None), []);
        // A skipped container needs nothing of the contract.
        let mut skipped = pod.clone();
        skipped["metadata"]["annotations"][identity::SKIP_CONTAINERS_ANNOTATION] = json!("side");
        skipped["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "side", "image": "y"}));
        assert_eq!(failing(&skipped, WORKER_NAME, Some(&s), &me(), None), []);
    }

    #[test]
    fn each_condition_fails_alone_with_its_reason() {
        let s = sa();
        let only = |pod: &Value,
                    account: &str,
                    sa: Option<&Value>,
                    ids: &[WorkerIdentifier],
                    cluster: Option<&str>,
                    kind: &str,
                    needle: &str| {
            let f = failing(pod, account, sa, ids, cluster);
            assert_eq!(f.len(), 1, "{kind}: {f:?}");
            assert_eq!(f[0].0, kind);
            assert!(f[0].1.contains(needle), "{kind}: {}", f[0].1);
        };
        let base = agent_pod(WORKER_NAME);
        let legacy = agent_pod("nvcf-worker-utils");
        let legacy_sa = json!({"metadata": {"name": "nvcf-worker-utils", "uid": SA_UID_1}});
        only(
            &legacy,
            "nvcf-worker-utils",
            Some(&legacy_sa),
            &me(),
            None,
            ACCOUNT,
            "the newest ICMS accepts only the subject system:serviceaccount:n:nvcf-worker",
        );
        only(
            &base,
            WORKER_NAME,
            None,
            &me(),
            None,
            SERVICE_ACCOUNT,
            "which does not exist",
        );
        let mut bad_uid = sa();
        bad_uid["metadata"]["uid"] = json!("sa-uid");
        only(
            &base,
            WORKER_NAME,
            Some(&bad_uid),
            &me(),
            None,
            SERVICE_ACCOUNT,
            "not a UUID",
        );
        let mut no_uid = base.clone();
        no_uid["metadata"].as_object_mut().unwrap().remove("uid");
        let ids = [WorkerIdentifier {
            name: "utils".into(),
            uid: String::new(),
        }];
        let f = failing(&no_uid, WORKER_NAME, Some(&s), &ids, None);
        assert_eq!(
            f.iter().map(|f| f.0).collect::<Vec<_>>(),
            [POD_UID, REGISTERED]
        );
        only(
            &base,
            WORKER_NAME,
            Some(&s),
            &me(),
            Some("c2"),
            AUDIENCE,
            "want \"nvcf-icms:c2\"",
        );
        let mut aws = base.clone();
        aws["spec"]["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]["audience"] =
            json!("sts.amazonaws.com");
        only(
            &aws,
            WORKER_NAME,
            Some(&s),
            &me(),
            None,
            AUDIENCE,
            "want nvcf-icms:<clusterID>",
        );
        for (secs, needle) in [
            (json!(86_401), "expirationSeconds 86401, want 600..86400"),
            (json!(599), "expirationSeconds 599"),
        ] {
            let mut p = base.clone();
            p["spec"]["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]
                ["expirationSeconds"] = secs;
            only(&p, WORKER_NAME, Some(&s), &me(), None, EXPIRY, needle);
        }
        let mut path = base.clone();
        path["spec"]["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]["path"] =
            json!("jwt");
        only(
            &path,
            WORKER_NAME,
            Some(&s),
            &me(),
            None,
            TOKEN_PATH,
            "projected at path \"jwt\"",
        );
        let mut mount = base.clone();
        mount["spec"]["containers"][0]["volumeMounts"][0]["mountPath"] = json!("/tokens");
        only(
            &mount,
            WORKER_NAME,
            Some(&s),
            &me(),
            None,
            TOKEN_PATH,
            "container \"app\"",
        );
        let mut env = base.clone();
        env["spec"]["containers"][0]["env"]
            .as_array_mut()
            .unwrap()
            .pop();
        only(
            &env,
            WORKER_NAME,
            Some(&s),
            &me(),
            None,
            ENV,
            "lacks env NVCF_IDENTITY_SOURCE",
        );
        let mut env2 = base.clone();
        env2["spec"]["containers"][0]["env"][1]["value"] = json!("bootstrap");
        only(
            &env2,
            WORKER_NAME,
            Some(&s),
            &me(),
            None,
            ENV,
            "NVCF_IDENTITY_SOURCE",
        );
        let mut on = base.clone();
        on["spec"]["automountServiceAccountToken"] = json!(true);
        only(
            &on,
            WORKER_NAME,
            Some(&s),
            &me(),
            None,
            AUTOMOUNT,
            "sets automountServiceAccountToken: true",
        );
        let mut unset = base.clone();
        unset["spec"]
            .as_object_mut()
            .unwrap()
            .remove("automountServiceAccountToken");
        let open = json!({"metadata": {"name": WORKER_NAME, "uid": SA_UID_1}});
        only(
            &unset,
            WORKER_NAME,
            Some(&open),
            &me(),
            None,
            AUTOMOUNT,
            "unset on the pod",
        );
        let mut manifest = base.clone();
        manifest["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
        only(
            &manifest,
            WORKER_NAME,
            Some(&s),
            &[],
            None,
            REGISTERED,
            "lacks the agent's nvca.nvcf.nvidia.io/nvca-infra-object",
        );
        let mut deprecated = base.clone();
        deprecated["spec"]
            .as_object_mut()
            .unwrap()
            .remove("serviceAccountName");
        only(
            &deprecated,
            WORKER_NAME,
            Some(&s),
            &me(),
            None,
            REGISTERED,
            "deprecated serviceAccount",
        );
    }

    #[test]
    fn more_than_64_identifiers_refuse_the_whole_registration() {
        let pod = agent_pod(WORKER_NAME);
        let s = sa();
        let mut ids = me();
        let f = |ids: &[WorkerIdentifier]| failing(&pod, WORKER_NAME, Some(&s), ids, None);
        ids.extend((1..MAX_WORKER_IDENTIFIERS).map(|i| WorkerIdentifier {
            name: format!("p{i}"),
            uid: format!("u{i}"),
        }));
        assert_eq!(f(&ids), []);
        ids.push(WorkerIdentifier {
            name: "p64".into(),
            uid: "u64".into(),
        });
        let got = f(&ids);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, REGISTERED);
        assert!(got[0].1.contains("register 65 pods"), "{}", got[0].1);
    }

    #[test]
    fn uuids_are_icms_pattern() {
        assert!(is_uuid(SA_UID_1));
        assert!(is_uuid(&SA_UID_1.to_uppercase()));
        for s in [
            "",
            "sa-uid",
            "da568e79-c448-4e99-8474-56feb7223ee",
            "da568e79c448-4e99-8474-56feb7223ee0-",
            "g a568e79-c448-4e99-8474-56feb7223ee0",
        ] {
            assert!(!is_uuid(s), "{s}");
        }
    }

    #[test]
    fn text_lists_conditions_then_the_verdict_then_worker_auth() {
        let pod = agent_pod(WORKER_NAME);
        let mut on = pod.clone();
        on["spec"]["automountServiceAccountToken"] = json!(true);
        let s = sa();
        let v = verdict(&Facts {
            namespace: "n",
            pod: &on,
            account: WORKER_NAME,
            service_account: Some(&s),
            identifiers: &me(),
            cluster_id: None,
        });
        let mut out = Vec::new();
        write_text(&v, &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "pod n/utils runs as nvcf-worker (per-namespace contract)"
        );
        assert!(lines[1].starts_with("ok    account "), "{}", lines[1]);
        assert!(
            lines[8].starts_with("FAIL  automount ")
                && lines[8].contains("; fix: set automountServiceAccountToken: false"),
            "{}",
            lines[8]
        );
        assert_eq!(
            lines[10],
            "verdict: ICMS would refuse this pod's token (automount failing)"
        );
        let auth: Value = serde_json::from_str(&lines[11..].join("\n")).unwrap();
        assert_eq!(
            auth,
            json!({"sub": "system:serviceaccount:n:nvcf-worker", "namespace": "n", "saUid": SA_UID_1,
            "workerIdentifiers": [{"name": "utils", "uid": POD_UID_1}]})
        );
    }

    #[test]
    fn only_pods_the_agent_authored_are_registered() {
        let pod = |name: &str, account: &str, infra: Option<&str>| {
            let mut p = json!({"metadata": {"name": name, "uid": format!("u-{name}")},
                "spec": {"serviceAccountName": account}});
            if let Some(v) = infra {
                p["metadata"]["annotations"] = json!({INFRA_ANNOTATION: v});
            }
            p
        };
        let pods = [
            pod("a", "nvcf-worker", Some("true")),
            pod("forged", "nvcf-worker", None),
            pod("empty", "nvcf-worker", Some("")),
            pod("other", "nvcf-workers", Some("true")),
            pod("b", "nvcf-worker", Some("yes")),
        ];
        let ids: Vec<String> = miniservice_identifiers(&pods)
            .into_iter()
            .map(|w| w.name)
            .collect();
        assert_eq!(ids, ["a", "b"]);
        let auth = WorkerAuth {
            sub: "system:serviceaccount:n:nvcf-worker".into(),
            namespace: "n".into(),
            sa_uid: String::new(),
            worker_identifiers: vec![],
        };
        // The newest agent type always sends saUid.
        let text = serde_json::to_string(&auth).unwrap();
        assert_eq!(
            text,
            r#"{"sub":"system:serviceaccount:n:nvcf-worker","namespace":"n","saUid":"","workerIdentifiers":[]}"#
        );
    }
}
