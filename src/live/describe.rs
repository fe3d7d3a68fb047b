//! `describe POD`: whether ICMS would accept the pod's token, condition by
//! condition, and the WorkerAuth document the NVCF agent derives for it.
//!
//! Each condition is a named check in [`CHECKS`] that says who checks it (ICMS, the
//! worker library, the agent, or this tool) and whether the cluster shows it. The
//! verdict "ICMS would accept" is drawn from ICMS's conditions alone; the others
//! are warnings that the worker may not use, or may break on, the token; ICMS's
//! conditions the cluster cannot show are reported as not visible, never as ok.
//! What each is read from (`NVIDIA/nvcf`, paths and commits, unmerged upstream
//! work that may change) is listed in docs/live.md, "What describe checks".
//!
//! WorkerAuth's fields are the newest agent type's (`WorkerAuth`, `nvca/pkg/types/types.go`
//! at `c9e7dbde`: `sub`, `namespace`, `saUid`, `workerIdentifiers` of `name` and `uid`).

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use super::client::{Kube, Scope, PODS, SERVICE_ACCOUNTS};
use crate::error::{Error, Result};
use crate::identity::{self, INFRA_ANNOTATION, WORKER_NAME};
use crate::manifest::from_json;
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
/// `@Size(max = 64)`): the whole status update, not only the extra pods.
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

/// The pods the agent registers for the namespace's `nvcf-worker` (`BuildWorkerAuth`).
fn registered_pods(pods: &[Value]) -> impl Iterator<Item = &Value> {
    pods.iter().filter(|p| {
        text(p, "/spec/serviceAccountName") == WORKER_NAME
            && !text(p, "/metadata/uid").is_empty()
            && is_infra(p)
    })
}

/// The pods the agent registers for the namespace's `nvcf-worker`, in list order.
pub fn miniservice_identifiers(pods: &[Value]) -> Vec<WorkerIdentifier> {
    registered_pods(pods)
        .map(|p| WorkerIdentifier {
            name: text(p, "/metadata/name").to_string(),
            uid: text(p, "/metadata/uid").to_string(),
        })
        .collect()
}

/// The MiniService instances whose agent-made pods run as the namespace's
/// `nvcf-worker`: each registers the same ServiceAccount UID.
pub fn registering_instances(pods: &[Value]) -> BTreeSet<String> {
    registered_pods(pods)
        .map(|p| meta(p, "labels", identity::MINISERVICE_LABEL).to_string())
        .filter(|m| !m.is_empty())
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

/// Who checks a condition: only ICMS's decide the verdict.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Checker {
    Icms,
    WorkerLibrary,
    Agent,
    /// This tool's own contract (its guard and policy), not a condition of NVCF's.
    Tool,
}

impl Checker {
    pub fn name(self) -> &'static str {
        match self {
            Checker::Icms => "icms",
            Checker::WorkerLibrary => "worker-library",
            Checker::Agent => "agent",
            Checker::Tool => "tool",
        }
    }
}

/// How much of a condition the cluster shows.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Visibility {
    /// Read off the pod, its ServiceAccount and the namespace.
    Cluster,
    /// Replayed from the cluster (what the agent would register), not read from ICMS.
    Inferred,
    /// ICMS's own state or configuration: reported, never checked.
    NotVisible,
}

#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// An ICMS condition that does not hold: ICMS refuses the token.
    Fail,
    /// Another checker's condition that does not hold: the worker may not use,
    /// or may break on, the token.
    Warn,
    /// Not visible from the cluster, or not decidable from it.
    Unknown,
}

/// One thing the token's use depends on: who checks it, whether it holds, why,
/// and what to do.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Condition {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub checker: Checker,
    pub visibility: Visibility,
    pub status: Status,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// What one check found.
enum Outcome {
    Holds(String),
    /// Why not, and what to do.
    Breaks(String, String),
    Unseen(String),
}

use Outcome::{Breaks, Holds, Unseen};

/// One named condition: who checks it, what the cluster shows of it, the check.
pub struct Check {
    pub kind: &'static str,
    pub checker: Checker,
    pub visibility: Visibility,
    run: fn(&Facts) -> Outcome,
}

const fn check(
    kind: &'static str,
    checker: Checker,
    visibility: Visibility,
    run: fn(&Facts) -> Outcome,
) -> Check {
    Check {
        kind,
        checker,
        visibility,
        run,
    }
}

use Checker::{Agent, Icms, Tool, WorkerLibrary};
use Visibility::{Cluster, Inferred, NotVisible};

/// Every condition, in the order reported: ICMS's that the cluster shows, ICMS's
/// it does not, then the worker library's, the agent's and this tool's.
pub const CHECKS: [Check; 16] = [
    check("account", Icms, Cluster, account),
    check("serviceAccount", Icms, Cluster, service_account),
    check("podUID", Icms, Cluster, pod_uid),
    check("audience", Icms, Cluster, audience),
    check("registered", Icms, Inferred, registered),
    check("sharedIdentity", Icms, Inferred, shared_identity),
    check("accountRecreated", Icms, Inferred, account_recreated),
    check("featureSwitches", Icms, NotVisible, feature_switches),
    check("clusterKeys", Icms, NotVisible, cluster_keys),
    check("registrationLive", Icms, NotVisible, registration_live),
    check("instanceBinding", Icms, NotVisible, instance_binding),
    check("tokenPath", WorkerLibrary, Cluster, token_path),
    check("env", WorkerLibrary, Cluster, env),
    check("httpsEndpoint", WorkerLibrary, NotVisible, https_endpoint),
    check("automount", Agent, Cluster, automount),
    check("expiry", Tool, Cluster, expiry),
];

/// Every condition's name, in report order.
pub fn condition_kinds() -> impl Iterator<Item = &'static str> {
    CHECKS.iter().map(|c| c.kind)
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
    /// The MiniService instances that would register the same account.
    pub instances: &'a BTreeSet<String>,
    pub cluster_id: Option<&'a str>,
}

impl Facts<'_> {
    fn spec(&self) -> &Value {
        self.pod.get("spec").unwrap_or(&Value::Null)
    }

    fn source(&self) -> Option<&Value> {
        token_source(self.spec())
    }
}

/// `8-4-4-4-12` hex digits, as ICMS's `UUID_PATTERN` wants `saUid` and pod UIDs.
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

/// The containers the token is for: every non-init container, less those
/// `nvcf.io/skip-containers` names.
fn worker_containers(pod: &Value) -> Vec<(String, &Value)> {
    let skip: Vec<&str> = meta(pod, "annotations", identity::SKIP_CONTAINERS_ANNOTATION)
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| (text(c, "/name").to_string(), c))
        .filter(|(name, _)| !skip.contains(&name.as_str()))
        .collect()
}

fn no_token() -> Outcome {
    Breaks(
        format!(
            "no volume {:?} projects a service account token",
            identity::TOKEN_VOLUME
        ),
        "inject the contract's token (kubectl nvcf-worker inject --cluster-id ID)".into(),
    )
}

fn account(f: &Facts) -> Outcome {
    let (ns, subject) = (
        f.namespace,
        identity::service_account_user(f.namespace, WORKER_NAME),
    );
    match Contract::of(f.account) {
        Contract::PerNamespace => Holds(format!(
            "runs as {WORKER_NAME} in namespace {ns}: the subject {subject} ICMS expects"
        )),
        Contract::PerPod => Breaks(
            format!(
                "runs as the per-pod account {} (PR #846's contract): the newest ICMS accepts only the subject {subject}",
                f.account
            ),
            format!(
                "run the worker as {WORKER_NAME} in its namespace (naming: per-namespace); the agent calls {} its legacy per-instance prefix",
                identity::PREFIX
            ),
        ),
    }
}

fn service_account(f: &Facts) -> Outcome {
    let (ns, account) = (f.namespace, f.account);
    let Some(sa) = f.service_account else {
        return Breaks(
            format!(
                "runs as ServiceAccount {account:?}, which does not exist (not yet provisioned, or already cleaned up): the agent registers nothing without its UID"
            ),
            format!(
                "recreate ServiceAccount {ns}/{account} (the agent makes {WORKER_NAME} in the namespaces it provisions), then recreate the pod"
            ),
        );
    };
    match text(sa, "/metadata/uid") {
        uid if is_uuid(uid) => Holds(format!("ServiceAccount {ns}/{account} exists, UID {uid}")),
        uid => Breaks(
            format!(
                "ServiceAccount {ns}/{account} has UID {uid:?}, not a UUID: ICMS refuses the agent's whole status update (saUid)"
            ),
            "recreate the ServiceAccount through the API server, which gives it a UUID".into(),
        ),
    }
}

fn pod_uid(f: &Facts) -> Outcome {
    match text(f.pod, "/metadata/uid") {
        "" => Breaks(
            "the pod has no UID: the agent registers only pods with one".into(),
            "describe the pod as the API server stores it, not a manifest".into(),
        ),
        uid if !is_uuid(uid) => Breaks(
            format!("pod UID {uid:?} is not a UUID: ICMS refuses the agent's whole status update (workerIdentifiers[].uid)"),
            "recreate the pod through the API server, which gives it a UUID".into(),
        ),
        uid => Holds(format!(
            "pod UID {uid}, a UUID: ICMS matches it against the token's kubernetes.io pod claim (names stay under ICMS's 2048 characters: Kubernetes allows 253)"
        )),
    }
}

fn audience(f: &Facts) -> Outcome {
    let Some(source) = f.source() else {
        return no_token();
    };
    let audience = text(source, "/audience");
    match f.cluster_id {
        Some(id) if audience == identity::audience(id) => Holds(format!("audience {audience}")),
        Some(id) => Breaks(
            format!("audience {audience:?}, want {:?}", identity::audience(id)),
            format!("set the token's audience to {}", identity::audience(id)),
        ),
        None => match audience.strip_prefix("nvcf-icms:") {
            Some(id) if !id.trim().is_empty() => Holds(format!(
                "audience {audience} (cluster {id}; --cluster-id checks it is this cluster's)"
            )),
            _ => Breaks(
                format!("audience {audience:?}, want nvcf-icms:<clusterID>"),
                "set the token's audience to nvcf-icms:<clusterID> (inject --cluster-id ID)".into(),
            ),
        },
    }
}

fn registered(f: &Facts) -> Outcome {
    let (ns, pod_name, pod_uid) = (
        f.namespace,
        text(f.pod, "/metadata/name"),
        text(f.pod, "/metadata/uid"),
    );
    let never = "only the agent registers pods, and only those it makes (a MiniService's utils pod): deploy the worker through the agent; a pod you deploy yourself keeps its bootstrap token (NVCF_WORKER_TOKEN) and is not injected".to_string();
    if !is_infra(f.pod) {
        return Breaks(
            format!(
                "the pod lacks the agent's {INFRA_ANNOTATION} annotation: the agent did not make it and never registers it, so ICMS refuses its token (no worker identifiers registered)"
            ),
            never,
        );
    }
    if text(f.pod, "/spec/serviceAccountName") != f.account {
        return Breaks(
            "the pod names its account only in the deprecated serviceAccount: the agent reads serviceAccountName".into(),
            format!("set serviceAccountName: {}", f.account),
        );
    }
    if f.identifiers.len() > MAX_WORKER_IDENTIFIERS {
        return Breaks(
            format!(
                "the agent would register {} pods in namespace {ns}, more than ICMS's {MAX_WORKER_IDENTIFIERS}: ICMS refuses the whole status update",
                f.identifiers.len()
            ),
            format!("run at most {MAX_WORKER_IDENTIFIERS} agent-made worker pods in the namespace"),
        );
    }
    let listed = |w: &WorkerIdentifier| w.name == pod_name && w.uid == pod_uid;
    if pod_uid.is_empty() || !f.identifiers.iter().any(listed) {
        return Breaks(
            "the pod is not among the pods the agent would register (no UID, or not yet listed)"
                .into(),
            never,
        );
    }
    let ms = meta(f.pod, "labels", identity::MINISERVICE_LABEL);
    Holds(format!(
        "the agent made the pod ({INFRA_ANNOTATION}{}) and registers it, one of {} worker identifiers",
        if ms.is_empty() { String::new() } else { format!(", MiniService {ms}") },
        f.identifiers.len()
    ))
}

fn shared_identity(f: &Facts) -> Outcome {
    let ns = f.namespace;
    match f.instances.len() {
        0 | 1 if Contract::of(f.account) == Contract::PerPod => Holds(format!(
            "the per-pod account {} is registered by its pod's instance alone",
            f.account
        )),
        0 | 1 => Holds(format!(
            "at most one MiniService instance ({}) registers {ns}/{WORKER_NAME}'s UID",
            f.instances.iter().next().map_or("none labelled", String::as_str)
        )),
        n => Breaks(
            format!(
                "{n} MiniService instances ({}) run agent-made pods as {ns}/{WORKER_NAME}: each registers the same ServiceAccount UID, and ICMS refuses a UID registered more than once as ambiguous",
                f.instances.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
            "run one instance per namespace: the per-namespace identity is shared by every pod of the namespace".into(),
        ),
    }
}

fn account_recreated(f: &Facts) -> Outcome {
    let created = |v: &Value| text(v, "/metadata/creationTimestamp").to_string();
    let (pod, sa) = (created(f.pod), f.service_account.map(created));
    match sa {
        // RFC 3339 in UTC, as the API server writes it: compared as text.
        Some(sa) if !sa.is_empty() && !pod.is_empty() && sa > pod => Unseen(format!(
            "ServiceAccount {}/{} (created {sa}) is newer than the pod (created {pod}): the pod's tokens carry the new UID, which ICMS accepts only once the agent has registered it again, and when it last did is not visible",
            f.namespace, f.account
        )),
        Some(_) => Holds(
            "the ServiceAccount is not newer than the pod: the token's UID claim is the UID the agent registers".into(),
        ),
        None => Unseen("no ServiceAccount to compare (see serviceAccount)".into()),
    }
}

fn feature_switches(_: &Facts) -> Outcome {
    Unseen("ICMS's cluster identity (icms.nvca.oidcClusterIdentityEnabled, off by default) and the relying service's delegated token (nvcf.worker.delegated-token.enabled, NVCT's alike) must be on: not visible from the cluster".into())
}

fn cluster_keys(_: &Facts) -> Outcome {
    Unseen("ICMS must know the audience's cluster with the JWKS the agent pushed, and the token be signed RS or ES 256/384/512 under those keys: not visible from the cluster".into())
}

fn registration_live(_: &Facts) -> Outcome {
    Unseen("ICMS stores the registration from an accepted status update of an OPEN or ACTIVE request and drops it 24 h after the last one: not visible from the cluster".into())
}

fn instance_binding(_: &Facts) -> Outcome {
    Unseen("the registered instance must exist in the zone of the audience's cluster, for a request with a function or task ID: not visible from the cluster".into())
}

fn token_path(f: &Facts) -> Outcome {
    let Some(source) = f.source() else {
        return no_token();
    };
    let projected = text(source, "/path");
    if projected != identity::TOKEN_PATH {
        return Breaks(
            format!(
                "the token is projected at path {projected:?}, not {:?}: the worker library reads {}",
                identity::TOKEN_PATH,
                identity::TOKEN_FILE_PATH
            ),
            format!("set the projection's path to {}", identity::TOKEN_PATH),
        );
    }
    let mount_problem = |c: &workload::ContainerCheck| {
        let p = c
            .problems
            .iter()
            .find(|p| p.field.starts_with("volumeMounts"));
        (!c.has_mount || p.is_some()).then(|| p.map(|p| p.message.clone()))
    };
    for (name, c) in worker_containers(f.pod) {
        if let Some(problem) = mount_problem(&workload::check_container(&from_json(c))) {
            let reason = problem.unwrap_or_else(|| {
                format!(
                    "does not mount {:?} at {}",
                    identity::TOKEN_VOLUME,
                    identity::TOKEN_MOUNT_PATH
                )
            });
            return Breaks(
                format!("container {name:?}: {reason}: the worker library finds no token there, or another file"),
                format!(
                    "mount {:?} read-only at {} in container {name:?}, or name it in {}",
                    identity::TOKEN_VOLUME,
                    identity::TOKEN_MOUNT_PATH,
                    identity::SKIP_CONTAINERS_ANNOTATION
                ),
            );
        }
    }
    Holds(format!(
        "{} in every worker container",
        identity::TOKEN_FILE_PATH
    ))
}

/// The last entry of `name` in a container's env (the one Kubernetes uses).
fn last_env<'a>(c: &'a Value, name: &str) -> Option<&'a Value> {
    c.get("env")?
        .as_array()?
        .iter()
        .rev()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
}

fn env(f: &Facts) -> Outcome {
    let (var, want) = (identity::ENV_TOKEN_FILE_PATH, identity::TOKEN_FILE_PATH);
    let fix = |name: &str| {
        format!(
            "set {var}={want} in container {name:?}, or name it in {}",
            identity::SKIP_CONTAINERS_ANNOTATION
        )
    };
    for (name, c) in worker_containers(f.pod) {
        match last_env(c, var) {
            None => return Breaks(
                format!("container {name:?} lacks env {var}: the newest worker library falls back to {want}, older ones read no mounted token without it"),
                fix(&name),
            ),
            Some(e) if e.get("value").and_then(Value::as_str) != Some(want) => return Breaks(
                format!("container {name:?} sets {var} to something other than {want:?}: the worker library reads that file, or (outside {}/) its bootstrap token", identity::TOKEN_MOUNT_PATH),
                fix(&name),
            ),
            Some(_) => {}
        }
    }
    Holds(format!(
        "{var}={want} in every worker container (the worker library reads no other identity env)"
    ))
}

fn https_endpoint(_: &Facts) -> Outcome {
    Unseen("the worker library uses a mounted token only over an https API endpoint, and fails rather than fall back when the token file cannot be read: the endpoint is the worker's configuration, not visible from the cluster".into())
}

fn automount(f: &Facts) -> Outcome {
    let on_pod = text_bool(f.spec(), "automountServiceAccountToken");
    let on_account = f
        .service_account
        .and_then(|sa| text_bool(sa, "automountServiceAccountToken"));
    let fix = "set automountServiceAccountToken: false on the pod".to_string();
    let beside =
        "the legacy API token is mounted beside the audience-bound one (the agent turns it off)";
    match (on_pod, on_account) {
        (Some(false), _) => Holds("the pod sets automountServiceAccountToken: false".into()),
        (None, Some(false)) => Holds(
            "unset on the pod; its ServiceAccount sets automountServiceAccountToken: false".into(),
        ),
        (Some(true), _) => Breaks(
            format!("the pod sets automountServiceAccountToken: true: {beside}"),
            fix,
        ),
        (None, _) => Breaks(
            format!("unset on the pod and its ServiceAccount does not set it false: {beside}"),
            fix,
        ),
    }
}

fn text_bool(v: &Value, key: &str) -> Option<bool> {
    v.get(key).and_then(Value::as_bool)
}

fn expiry(f: &Facts) -> Outcome {
    let range = identity::MIN_EXPIRATION_SECONDS..=identity::MAX_EXPIRATION_SECONDS;
    let default = identity::DEFAULT_EXPIRATION_SECONDS;
    let Some(source) = f.source() else {
        return no_token();
    };
    match source.get("expirationSeconds").and_then(Value::as_i64) {
        Some(s) if s == default => Holds(format!("expirationSeconds {s}, as the agent requests")),
        Some(s) if range.contains(&s) => Holds(format!(
            "expirationSeconds {s}, within this tool's {}..{} (the agent requests {default}; ICMS wants only an unexpired exp)",
            range.start(),
            range.end()
        )),
        other => Breaks(
            format!(
                "expirationSeconds {}, outside this tool's {}..{} (the agent requests {default}; ICMS wants only an unexpired exp)",
                other.map_or("unset".into(), |s| s.to_string()),
                range.start(),
                range.end()
            ),
            format!("set expirationSeconds: {default}"),
        ),
    }
}

/// Every condition for the pod, in report order: an ICMS condition that breaks
/// fails, another checker's warns.
pub fn conditions(f: &Facts) -> Vec<Condition> {
    CHECKS
        .iter()
        .map(|c| {
            let (status, reason, fix) = match (c.run)(f) {
                Holds(r) => (Status::Ok, r, None),
                Breaks(r, fix) if c.checker == Icms => (Status::Fail, r, Some(fix)),
                Breaks(r, fix) => (Status::Warn, r, Some(fix)),
                Unseen(r) => (Status::Unknown, r, None),
            };
            Condition {
                kind: c.kind,
                checker: c.checker,
                visibility: c.visibility,
                status,
                reason,
                fix,
            }
        })
        .collect()
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
    /// Whether ICMS would accept the pod's token as far as the cluster shows: no
    /// ICMS condition fails (those not visible are `unknown`, listed apart).
    pub accepted: bool,
    pub conditions: Vec<Condition>,
    pub worker_auth: WorkerAuth,
}

impl Verdict {
    /// ICMS's conditions that do not hold.
    pub fn failing(&self) -> impl Iterator<Item = &Condition> {
        self.with(Status::Fail)
    }

    pub fn with(&self, status: Status) -> impl Iterator<Item = &Condition> {
        self.conditions.iter().filter(move |c| c.status == status)
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
    let (identifiers, instances) = match Contract::of(account) {
        Contract::PerNamespace => {
            let scope = Scope::Namespace(namespace.to_string());
            let pods = kube.list(&PODS, &scope, false, None).await?;
            (miniservice_identifiers(&pods), registering_instances(&pods))
        }
        Contract::PerPod => (
            vec![WorkerIdentifier {
                name: pod_name.to_string(),
                uid: text(&pod, "/metadata/uid").to_string(),
            }],
            BTreeSet::new(),
        ),
    };
    Ok(verdict(&Facts {
        namespace,
        pod: &pod,
        account,
        service_account: sa.as_ref(),
        identifiers: &identifiers,
        instances: &instances,
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
        audience: f.source().map(|t| text(t, "/audience").to_string()),
        accepted: conditions.iter().all(|c| c.status != Status::Fail),
        conditions,
        worker_auth: WorkerAuth {
            sub: identity::service_account_user(f.namespace, f.account),
            namespace: f.namespace.to_string(),
            sa_uid,
            worker_identifiers: f.identifiers.to_vec(),
        },
    }
}

/// The verdict line: refused by the failing ICMS conditions, or accepted as far
/// as the cluster shows, naming what it does not show and the warnings.
pub fn verdict_line(v: &Verdict) -> String {
    let kinds = |s: Status| v.with(s).map(|c| c.kind).collect::<Vec<_>>().join(", ");
    if !v.accepted {
        return format!(
            "verdict: ICMS would refuse this pod's token ({} failing)",
            kinds(Status::Fail)
        );
    }
    let mut line = format!(
        "verdict: ICMS would accept this pod's token as far as the cluster shows (not shown: {})",
        kinds(Status::Unknown)
    );
    if v.with(Status::Warn).next().is_some() {
        line.push_str(&format!("; warnings: {}", kinds(Status::Warn)));
    }
    line
}

/// The text form: a line per condition (status, checker, type, reason), the
/// verdict, then the WorkerAuth JSON.
pub fn write_text(v: &Verdict, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(
        out,
        "pod {}/{} runs as {} ({} contract)",
        v.pod.namespace,
        v.pod.name,
        v.service_account.name,
        v.contract.name()
    )?;
    let width = condition_kinds().map(str::len).max().unwrap_or(0);
    for c in &v.conditions {
        let status = match c.status {
            Status::Ok => "ok",
            Status::Fail => "FAIL",
            Status::Warn => "warn",
            Status::Unknown => "?",
        };
        write!(
            out,
            "{status:<6}{:<16}{:width$}  {}",
            c.checker.name(),
            c.kind,
            c.reason
        )?;
        match &c.fix {
            Some(fix) => writeln!(out, "; fix: {fix}")?,
            None => writeln!(out)?,
        }
    }
    writeln!(out, "{}", verdict_line(v))?;
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
                "creationTimestamp": "2026-12-07T10:00:00Z",
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
        json!({"metadata": {"name": WORKER_NAME, "uid": SA_UID_1,
            "creationTimestamp": "2026-12-07T09:00:00Z"}, "automountServiceAccountToken": false})
    }

    /// Everything a pod's verdict is drawn from, changed field by field in tests.
    struct Case {
        pod: Value,
        account: &'static str,
        sa: Option<Value>,
        ids: Vec<WorkerIdentifier>,
        instances: BTreeSet<String>,
        cluster: Option<&'static str>,
    }

    fn base() -> Case {
        Case {
            pod: agent_pod(WORKER_NAME),
            account: WORKER_NAME,
            sa: Some(sa()),
            ids: me(),
            instances: BTreeSet::from(["ms-a".to_string()]),
            cluster: None,
        }
    }

    impl Case {
        fn verdict(&self) -> Verdict {
            verdict(&Facts {
                namespace: "n",
                pod: &self.pod,
                account: self.account,
                service_account: self.sa.as_ref(),
                identifiers: &self.ids,
                instances: &self.instances,
                cluster_id: self.cluster,
            })
        }

        /// The conditions that do not hold (fail or warn), with their reasons.
        fn broken(&self) -> Vec<(&'static str, Status, String)> {
            let v = self.verdict();
            assert_eq!(
                v.conditions.iter().map(|c| c.kind).collect::<Vec<_>>(),
                condition_kinds().collect::<Vec<_>>()
            );
            assert_eq!(v.accepted, v.failing().next().is_none());
            for c in &v.conditions {
                let broken = matches!(c.status, Status::Fail | Status::Warn);
                assert_eq!(c.fix.is_some(), broken, "{c:?}");
                assert_eq!(
                    c.status == Status::Fail,
                    broken && c.checker == Checker::Icms
                );
            }
            v.conditions
                .iter()
                .filter(|c| matches!(c.status, Status::Fail | Status::Warn))
                .map(|c| (c.kind, c.status, c.reason.clone()))
                .collect()
        }

        /// Exactly `kind` does not hold, with `needle` in its reason.
        fn only(&self, kind: &str, status: Status, needle: &str) {
            let b = self.broken();
            assert_eq!(b.len(), 1, "{kind}: {b:?}");
            assert_eq!((b[0].0, b[0].1), (kind, status), "{b:?}");
            assert!(b[0].2.contains(needle), "{kind}: {}", b[0].2);
        }
    }

    fn me() -> Vec<WorkerIdentifier> {
        vec![WorkerIdentifier {
            name: "utils".into(),
            uid: POD_UID_1.into(),
        }]
    }

    fn token(p: &mut Value) -> &mut Value {
        &mut p["spec"]["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]
    }

    #[test]
    fn the_agents_own_pod_passes_every_condition_it_can_see() {
        let mut c = base();
        assert_eq!(c.broken(), []);
        let v = c.verdict();
        let unknown: Vec<&str> = v.with(Status::Unknown).map(|c| c.kind).collect();
        assert_eq!(
            unknown,
            [
                "featureSwitches",
                "clusterKeys",
                "registrationLive",
                "instanceBinding",
                "httpsEndpoint"
            ]
        );
        c.cluster = Some("c1");
        assert_eq!(c.broken(), []);
        // Automount unset on the pod: the ServiceAccount's false holds.
        c.pod["spec"]
            .as_object_mut()
            .unwrap()
            .remove("automountServiceAccountToken");
        assert_eq!(c.broken(), []);
        // A skipped container needs nothing of the contract.
        c.pod["metadata"]["annotations"][identity::SKIP_CONTAINERS_ANNOTATION] = json!("side");
        c.pod["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "side", "image": "y"}));
        assert_eq!(c.broken(), []);
        // The worker library reads no NVCF_IDENTITY_SOURCE.
        c.pod["spec"]["containers"][0]["env"]
            .as_array_mut()
            .unwrap()
            .pop();
        assert_eq!(c.broken(), []);
    }

    #[test]
    fn each_icms_condition_fails_alone_and_refuses() {
        let mut c = base();
        c.pod = agent_pod("nvcf-worker-utils");
        c.account = "nvcf-worker-utils";
        c.instances.clear();
        c.only(
            "account",
            Status::Fail,
            "the newest ICMS accepts only the subject system:serviceaccount:n:nvcf-worker",
        );

        let mut c = base();
        c.sa = None;
        let b = c.broken();
        assert_eq!(
            b.iter().map(|b| b.0).collect::<Vec<_>>(),
            ["serviceAccount"]
        );
        assert!(b[0].2.contains("which does not exist"));

        let mut c = base();
        c.sa.as_mut().unwrap()["metadata"]["uid"] = json!("sa-uid");
        c.only("serviceAccount", Status::Fail, "not a UUID");

        let mut c = base();
        c.pod["metadata"]["uid"] = json!("u-1");
        c.ids = vec![WorkerIdentifier {
            name: "utils".into(),
            uid: "u-1".into(),
        }];
        c.only("podUID", Status::Fail, "\"u-1\" is not a UUID");

        let mut c = base();
        c.pod["metadata"].as_object_mut().unwrap().remove("uid");
        c.ids = vec![WorkerIdentifier {
            name: "utils".into(),
            uid: String::new(),
        }];
        let b = c.broken();
        assert_eq!(
            b.iter().map(|b| b.0).collect::<Vec<_>>(),
            ["podUID", "registered"]
        );

        let mut c = base();
        c.cluster = Some("c2");
        c.only("audience", Status::Fail, "want \"nvcf-icms:c2\"");
        let mut c = base();
        token(&mut c.pod)["audience"] = json!("sts.amazonaws.com");
        c.only("audience", Status::Fail, "want nvcf-icms:<clusterID>");

        let mut c = base();
        c.pod["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
        c.ids.clear();
        c.only(
            "registered",
            Status::Fail,
            "lacks the agent's nvca.nvcf.nvidia.io/nvca-infra-object",
        );
        let mut c = base();
        c.pod["spec"]
            .as_object_mut()
            .unwrap()
            .remove("serviceAccountName");
        c.only("registered", Status::Fail, "deprecated serviceAccount");

        let mut c = base();
        c.instances.insert("ms-b".into());
        c.only(
            "sharedIdentity",
            Status::Fail,
            "2 MiniService instances (ms-a, ms-b)",
        );
    }

    #[test]
    fn a_recreated_account_is_not_shown_as_ok() {
        let mut c = base();
        c.sa.as_mut().unwrap()["metadata"]["creationTimestamp"] = json!("2026-12-07T11:00:00Z");
        assert_eq!(c.broken(), []);
        let v = c.verdict();
        let cond = v
            .conditions
            .iter()
            .find(|c| c.kind == "accountRecreated")
            .unwrap();
        assert_eq!(cond.status, Status::Unknown);
        assert!(
            cond.reason.contains("is newer than the pod"),
            "{}",
            cond.reason
        );
        // Created at the same second: not newer.
        c.sa.as_mut().unwrap()["metadata"]["creationTimestamp"] = json!("2026-12-07T10:00:00Z");
        let v = c.verdict();
        let cond = v
            .conditions
            .iter()
            .find(|c| c.kind == "accountRecreated")
            .unwrap();
        assert_eq!(cond.status, Status::Ok);
    }

    #[test]
    fn other_checkers_conditions_warn_and_leave_the_verdict_to_icms() {
        for (secs, needle) in [
            (
                json!(86_401),
                "expirationSeconds 86401, outside this tool's 600..86400",
            ),
            (json!(599), "expirationSeconds 599"),
        ] {
            let mut c = base();
            token(&mut c.pod)["expirationSeconds"] = secs;
            c.only("expiry", Status::Warn, needle);
            assert!(c.verdict().accepted);
        }
        let mut c = base();
        token(&mut c.pod)["path"] = json!("jwt");
        c.only("tokenPath", Status::Warn, "projected at path \"jwt\"");
        let mut c = base();
        c.pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"] = json!("/tokens");
        c.only("tokenPath", Status::Warn, "container \"app\"");
        let mut c = base();
        c.pod["spec"]["containers"][0]["env"]
            .as_array_mut()
            .unwrap()
            .remove(0);
        c.only("env", Status::Warn, "lacks env NVCF_TOKEN_FILE_PATH");
        let mut c = base();
        c.pod["spec"]["containers"][0]["env"][0]["value"] = json!("/etc/jwt");
        c.only("env", Status::Warn, "something other than");
        // Kubernetes uses the last of two entries.
        let mut c = base();
        let env = c.pod["spec"]["containers"][0]["env"]
            .as_array_mut()
            .unwrap();
        env.push(identity::env_var(identity::ENV_TOKEN_FILE_PATH, "/x"));
        c.only("env", Status::Warn, "something other than");
        let mut c = base();
        c.pod["spec"]["automountServiceAccountToken"] = json!(true);
        c.only(
            "automount",
            Status::Warn,
            "sets automountServiceAccountToken: true",
        );
        let mut c = base();
        c.pod["spec"]
            .as_object_mut()
            .unwrap()
            .remove("automountServiceAccountToken");
        c.sa.as_mut()
            .unwrap()
            .as_object_mut()
            .unwrap()
            .remove("automountServiceAccountToken");
        c.only("automount", Status::Warn, "unset on the pod");
        assert!(c.verdict().accepted);
    }

    #[test]
    fn more_than_64_identifiers_refuse_the_whole_registration() {
        let mut c = base();
        c.ids
            .extend((1..MAX_WORKER_IDENTIFIERS).map(|i| WorkerIdentifier {
                name: format!("p{i}"),
                uid: format!("u{i}"),
            }));
        assert_eq!(c.broken(), []);
        c.ids.push(WorkerIdentifier {
            name: "p64".into(),
            uid: "u64".into(),
        });
        c.only("registered", Status::Fail, "register 65 pods");
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
        let mut c = base();
        c.pod["spec"]["automountServiceAccountToken"] = json!(true);
        let render = |c: &Case| {
            let mut out = Vec::new();
            write_text(&c.verdict(), &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let out = render(&c);
        let lines: Vec<&str> = out.lines().collect();
        let n = condition_kinds().count();
        assert_eq!(
            lines[0],
            "pod n/utils runs as nvcf-worker (per-namespace contract)"
        );
        assert!(
            lines[1].starts_with("ok    icms            account "),
            "{}",
            lines[1]
        );
        assert!(
            lines[8].starts_with("?     icms            featureSwitches "),
            "{}",
            lines[8]
        );
        assert!(
            lines[15].starts_with("warn  agent           automount ")
                && lines[15].contains("; fix: set automountServiceAccountToken: false"),
            "{}",
            lines[15]
        );
        assert_eq!(
            lines[n + 1],
            "verdict: ICMS would accept this pod's token as far as the cluster shows (not shown: featureSwitches, clusterKeys, registrationLive, instanceBinding, httpsEndpoint); warnings: automount"
        );
        let auth: Value = serde_json::from_str(&lines[n + 2..].join("\n")).unwrap();
        assert_eq!(
            auth,
            json!({"sub": "system:serviceaccount:n:nvcf-worker", "namespace": "n", "saUid": SA_UID_1,
            "workerIdentifiers": [{"name": "utils", "uid": POD_UID_1}]})
        );
        c.instances.insert("ms-b".into());
        let out = render(&c);
        assert!(
            out.contains("\nFAIL  icms            sharedIdentity "),
            "{out}"
        );
        assert!(
            out.contains(
                "\nverdict: ICMS would refuse this pod's token (sharedIdentity failing)\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn only_pods_the_agent_authored_are_registered_and_their_instances_counted() {
        let pod = |name: &str, account: &str, infra: Option<&str>, ms: &str| {
            let mut p = json!({"metadata": {"name": name, "uid": format!("u-{name}"),
                "labels": {identity::MINISERVICE_LABEL: ms}},
                "spec": {"serviceAccountName": account}});
            if let Some(v) = infra {
                p["metadata"]["annotations"] = json!({INFRA_ANNOTATION: v});
            }
            p
        };
        let pods = [
            pod("a", "nvcf-worker", Some("true"), "ms-a"),
            pod("forged", "nvcf-worker", None, "ms-x"),
            pod("empty", "nvcf-worker", Some(""), "ms-y"),
            pod("other", "nvcf-workers", Some("true"), "ms-z"),
            pod("b", "nvcf-worker", Some("yes"), "ms-a"),
            pod("c", "nvcf-worker", Some("yes"), ""),
        ];
        let ids: Vec<String> = miniservice_identifiers(&pods)
            .into_iter()
            .map(|w| w.name)
            .collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(
            registering_instances(&pods),
            BTreeSet::from(["ms-a".to_string()])
        );
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

    #[test]
    fn the_json_report_carries_checker_and_visibility() {
        let v = base().verdict();
        let doc = serde_json::to_value(&v).unwrap();
        let conds = doc["conditions"].as_array().unwrap();
        assert_eq!(
            conds[0],
            json!({"type": "account", "checker": "icms", "visibility": "cluster", "status": "ok",
                "reason": "runs as nvcf-worker in namespace n: the subject system:serviceaccount:n:nvcf-worker ICMS expects"})
        );
        let by = |k: &str| conds.iter().find(|c| c["type"] == k).unwrap();
        assert_eq!(
            (
                by("registered")["checker"].as_str(),
                by("registered")["visibility"].as_str()
            ),
            (Some("icms"), Some("inferred"))
        );
        assert_eq!(by("clusterKeys")["visibility"], "not-visible");
        assert_eq!(by("clusterKeys")["status"], "unknown");
        assert_eq!(by("tokenPath")["checker"], "worker-library");
        assert_eq!(by("automount")["checker"], "agent");
        assert_eq!(by("expiry")["checker"], "tool");
    }
}
