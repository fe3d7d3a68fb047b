//! `describe POD`: the WorkerAuth document the NVCF agent derives for a pod, from
//! the pod and its ServiceAccount, so it can be compared with what the agent sent.

use serde::Serialize;
use serde_json::Value;

use super::client::{Kube, PODS, SERVICE_ACCOUNTS};
use crate::error::{Error, Result};
use crate::identity::PREFIX;

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
    pub sa_uid: String,
    pub worker_identifiers: Vec<WorkerIdentifier>,
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

pub async fn worker_auth(kube: &Kube, namespace: &str, pod_name: &str) -> Result<WorkerAuth> {
    let pod = kube
        .get(&PODS, namespace, pod_name)
        .await?
        .ok_or_else(|| Error::Live(format!("pod {namespace}/{pod_name} not found")))?;
    let account = match text(&pod, "/spec/serviceAccountName") {
        "" => text(&pod, "/spec/serviceAccount"),
        a => a,
    };
    if !account.starts_with(PREFIX) {
        let shown = if account.is_empty() {
            "default"
        } else {
            account
        };
        return Err(Error::Live(format!(
            "pod {namespace}/{pod_name} has no worker identity: it runs as ServiceAccount {shown:?}, not {PREFIX}*"
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
    Ok(WorkerAuth {
        sub: format!("system:serviceaccount:{namespace}:{account}"),
        sa_uid: text(&sa, "/metadata/uid").to_string(),
        worker_identifiers: vec![WorkerIdentifier {
            name: pod_name.to_string(),
            uid: text(&pod, "/metadata/uid").to_string(),
        }],
    })
}
