//! `describe POD`: the WorkerAuth document the NVCF agent derives for a pod, from
//! the pod and its ServiceAccount, so it can be compared with what the agent sent.
//!
//! Field names and order are the agent's (`WorkerAuth` in `nvca/pkg/types`: `sub`,
//! `saUid`, `workerIdentifiers` of `name` and `uid`; `namespace` from
//! `BuildWorkerAuth` in `nvca/pkg/miniservice/workerguard.go`). For `nvcf-worker`
//! the agent lists every pod of the namespace it authored (annotated
//! `nvca.nvcf.nvidia.io/nvca-infra-object`, `serviceAccountName: nvcf-worker`); a
//! per-pod identity lists its one pod.

use serde::Serialize;
use serde_json::Value;

use super::client::{Kube, Scope, PODS, SERVICE_ACCOUNTS};
use crate::error::{Error, Result};
use crate::identity::{self, INFRA_ANNOTATION, WORKER_NAME};

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct WorkerIdentifier {
    pub name: String,
    pub uid: String,
}

/// The agent's WorkerAuth JSON.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WorkerAuth {
    pub sub: String,
    pub namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub sa_uid: String,
    pub worker_identifiers: Vec<WorkerIdentifier>,
}

/// Whether the agent authored this pod (`IsInfraOwnedObject`: a non-empty value).
fn is_infra(pod: &Value) -> bool {
    pod.pointer("/metadata/annotations")
        .and_then(|a| a.get(INFRA_ANNOTATION))
        .and_then(Value::as_str)
        .is_some_and(|v| !v.is_empty())
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

/// `describe -o json|yaml`: the pod, the account it runs as, and the agent's
/// WorkerAuth for it, unchanged.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Description {
    pub pod: ObjectRef,
    pub service_account: ObjectRef,
    pub worker_auth: WorkerAuth,
}

pub async fn describe(kube: &Kube, namespace: &str, pod_name: &str) -> Result<Description> {
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
    let sa = kube
        .get(&SERVICE_ACCOUNTS, namespace, account)
        .await?
        .ok_or_else(|| {
            Error::Live(format!(
                "pod {namespace}/{pod_name} runs as ServiceAccount {account:?}, which does not exist (not yet provisioned, or already cleaned up)"
            ))
        })?;
    let worker_identifiers = if account == WORKER_NAME {
        if !is_infra(&pod) || text(&pod, "/spec/serviceAccountName") != WORKER_NAME {
            return Err(Error::Live(format!(
                "pod {namespace}/{pod_name} runs as {WORKER_NAME} but the agent did not author it (no {INFRA_ANNOTATION} annotation, or the account only under the deprecated serviceAccount): the agent does not register it with ICMS, so ICMS will not accept its token"
            )));
        }
        let pods = kube
            .list(&PODS, &Scope::Namespace(namespace.to_string()), false, None)
            .await?;
        miniservice_identifiers(&pods)
    } else {
        vec![WorkerIdentifier {
            name: pod_name.to_string(),
            uid: text(&pod, "/metadata/uid").to_string(),
        }]
    };
    Ok(Description {
        pod: ObjectRef {
            namespace: namespace.to_string(),
            name: pod_name.to_string(),
            uid: text(&pod, "/metadata/uid").to_string(),
        },
        service_account: ObjectRef {
            namespace: namespace.to_string(),
            name: account.to_string(),
            uid: text(&sa, "/metadata/uid").to_string(),
        },
        worker_auth: WorkerAuth {
            sub: format!("system:serviceaccount:{namespace}:{account}"),
            namespace: namespace.to_string(),
            sa_uid: text(&sa, "/metadata/uid").to_string(),
            worker_identifiers,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
            sa_uid: "s".into(),
            worker_identifiers: vec![],
        };
        let text = serde_json::to_string(&auth).unwrap();
        assert_eq!(
            text,
            r#"{"sub":"system:serviceaccount:n:nvcf-worker","namespace":"n","saUid":"s","workerIdentifiers":[]}"#
        );
    }
}
