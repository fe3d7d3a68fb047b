//! `audit`: the guard's rules over live objects, plus checks that only make sense
//! on running pods that carry a worker identity (token audience and lifetime,
//! automount, the two env vars).
//!
//! A pod (or ReplicaSet, Job) running as a reserved account is exempt from NVW101
//! only when the account is its own agent identity (`nvcf-worker-<pod>`), when it
//! is the agent's MiniService worker (`nvcf-worker`, annotated by the agent, the
//! account the agent's), or when its controller chain, verified by UIDs against
//! objects that exist, leads to the workload the manifest-declared identity names
//! (that workload's template is then checked by the guard). Objects with a
//! controller and an ordinary account are left to their controller's template.
//! The pod checks still run on every pod.

use std::collections::{BTreeSet, HashMap};
use std::io::Write;

use serde_json::Value;

use super::client::{self, Kube, Resource, Scope};
use super::inventory::{self, Identity, ListedObject, MadeBy, Member};
use super::namespaces::{self, AgentNamespaces};
use super::output::forms::{Form, PrintArgs};
use super::planes::{self, Selected};
use super::reports;
use crate::error::{Error, Result};
use crate::guard;
use crate::identity::{self, Marks};
use crate::manifest::batch::{Batch, Source, SourceKind};
use crate::manifest::{from_json, Document};
use crate::report::{Finding, Location, ResourceRef, Severity};
use crate::rules;
use crate::selector::Selector;

mod print;

pub use crate::rules::{AUTOMOUNT, TOKEN_AUDIENCE, TOKEN_EXPIRATION, WORKER_ENV};

/// What audit reads, in report order.
const AUDITED: [Resource; 14] = [
    client::PODS,
    client::POD_TEMPLATES,
    client::REPLICATION_CONTROLLERS,
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

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn controller_ref(item: &Value) -> Option<&Value> {
    item.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
}

/// The account a pod, or a workload's pod template, runs as (as `in_use` reads it).
pub fn account_of(item: &Value) -> &str {
    super::in_use::template_account(item).unwrap_or("")
}

/// Listed objects by (namespace, kind, name), to walk controller chains.
#[derive(Default)]
pub struct Listed<'a> {
    objects: HashMap<(&'a str, &'a str, &'a str), &'a Value>,
}

impl<'a> Listed<'a> {
    pub fn add(&mut self, item: &'a Value) {
        self.objects.insert(
            (
                text(item, "/metadata/namespace"),
                text(item, "/kind"),
                text(item, "/metadata/name"),
            ),
            item,
        );
    }

    fn get(&self, ns: &str, kind: &str, name: &str) -> Option<&'a Value> {
        self.objects.get(&(ns, kind, name)).copied()
    }

    /// The top of `item`'s controller chain, each link checked against an object
    /// that exists with the referenced apiVersion, kind, name and UID. None when
    /// the item has no controller or a link does not verify.
    pub fn verified_top(&self, item: &'a Value) -> Option<&'a Value> {
        let ns = text(item, "/metadata/namespace");
        let mut current = item;
        // Pod -> ReplicaSet -> Deployment is the longest built-in chain.
        for _ in 0..4 {
            let Some(r) = controller_ref(current) else {
                return (!std::ptr::eq(current, item)).then_some(current);
            };
            let next = self.get(ns, text(r, "/kind"), text(r, "/name"))?;
            let uid = text(r, "/uid");
            if uid.is_empty()
                || text(next, "/metadata/uid") != uid
                || text(next, "/apiVersion") != text(r, "/apiVersion")
            {
                return None;
            }
            current = next;
        }
        None
    }
}

/// Whether NVW101 does not apply to a listed pod, ReplicaSet or Job that runs as
/// the reserved `account`, and why.
pub fn exemption(item: &Value, account: &str, listed: &Listed) -> Option<String> {
    let ns = text(item, "/metadata/namespace");
    let name = text(item, "/metadata/name");
    let kind = text(item, "/kind");
    if kind == "Pod" && account == format!("{}{name}", identity::PREFIX) {
        return Some("the agent's identity for this pod".into());
    }
    let sa = listed.get(ns, "ServiceAccount", account)?;
    let sa_text = |group: &'static str| {
        move |key: &str| {
            sa.pointer(&format!("/metadata/{group}"))
                .and_then(|m| m.get(key))
                .and_then(Value::as_str)
                .map(str::to_string)
        }
    };
    let miniservice = sa_text("labels")(identity::MINISERVICE_LABEL);
    if kind == "Pod"
        && account == identity::WORKER_NAME
        && miniservice.is_some()
        && sa_text("annotations")(identity::INFRA_ANNOTATION).is_some_and(|v| !v.is_empty())
        && !text(
            item,
            &format!(
                "/metadata/annotations/{}",
                identity::INFRA_ANNOTATION.replace('/', "~1")
            ),
        )
        .is_empty()
        && item
            .pointer(&format!(
                "/metadata/labels/{}",
                identity::MINISERVICE_LABEL.replace('/', "~1")
            ))
            .and_then(Value::as_str)
            == miniservice.as_deref()
    {
        return Some("the agent's MiniService worker".into());
    }
    let top = listed.verified_top(item)?;
    crate::workload::pod_spec_path(text(top, "/apiVersion"), text(top, "/kind"))?;
    if account_of(top) != account {
        return None;
    }
    match Marks::read(sa_text("labels"), sa_text("annotations"))? {
        Marks::Workload {
            api_version,
            kind,
            name,
        } if api_version == text(top, "/apiVersion")
            && kind == text(top, "/kind")
            && name == text(top, "/metadata/name") =>
        {
            Some(format!("controlled by {kind}/{name}, whose identity it is"))
        }
        Marks::Namespace if account == identity::WORKER_NAME => Some(format!(
            "controlled by {}/{}, which runs as its namespace's identity",
            text(top, "/kind"),
            text(top, "/metadata/name")
        )),
        _ => None,
    }
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
    if !identity::is_reserved(account) {
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

    // A worker holds one token for its account (NVW115). The API token the
    // ServiceAccount admission adds when automount is on is NVW203's, below.
    let automount_volume = |i: usize| {
        spec.pointer(&format!("/volumes/{i}/name"))
            .and_then(Value::as_str)
            .is_some_and(|n| n.starts_with(crate::recognize::API_ACCESS_PREFIX))
    };
    let ns = at.namespace.as_deref().unwrap_or("");
    let automounted = spec
        .get("automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or_else(|| account_automount(ns, account))
        .unwrap_or(true);
    let counted: Vec<usize> = tokens
        .iter()
        .map(|(i, _)| *i)
        .filter(|i| !(automounted && automount_volume(*i)))
        .collect();
    if let [_, second, ..] = counted.as_slice() {
        push(
            Finding::error(format!(
                "pod runs as worker account {account:?} with {} service account tokens projected: a worker holds only the contract's one; remove the others",
                counted.len()
            ))
            .rule(rules::EXTRA_TOKEN),
            &format!("spec.volumes[{second}].projected"),
        );
    }
    if spec
        .get("ephemeralContainers")
        .and_then(Value::as_array)
        .is_some_and(|e| !e.is_empty())
    {
        push(
            Finding::error("an ephemeral container runs in a worker pod and can read the worker's token; remove the pod (debug a copy under another account)").rule(rules::EPHEMERAL_CONTAINER),
            "spec.ephemeralContainers",
        );
    }
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

/// NVW205 for each manifest-declared identity in a namespace the agent provisions
/// itself, on its ServiceAccount (else its Role, else its RoleBinding). When the
/// namespaces could not be read, one warning says so and names the identities
/// left unchecked: never a guess either way.
pub fn agent_namespace_findings(
    identities: &[Identity],
    namespaces: &AgentNamespaces,
) -> Vec<Finding> {
    let declared: Vec<&Identity> = identities
        .iter()
        .filter(|id| id.made_by() == MadeBy::Manifest)
        .collect();
    let mut out = Vec::new();
    let mut unchecked = Vec::new();
    for id in &declared {
        match namespaces.planes(&id.namespace).map(|p| p.provisioned_by) {
            Some(Some(plane)) => {
                let member = [Member::ServiceAccount, Member::Role, Member::RoleBinding]
                    .into_iter()
                    .find_map(|m| id.member(m))
                    .expect("an identity has a member");
                let resource = member.member.resource();
                out.push(
                    Finding::error(format!(
                        "worker identity {:?} is {}",
                        id.name,
                        super::list::conflict_note(&id.namespace, &plane)
                    ))
                    .rule(rules::MANIFEST_IDENTITY_IN_AGENT_NAMESPACE)
                    .resource(Some(ResourceRef {
                        api_version: resource.api_version.into(),
                        kind: resource.kind.into(),
                        name: id.name.clone(),
                        namespace: Some(id.namespace.clone()),
                    }))
                    .field(format!("metadata.labels.{}", identity::ORIGIN_LABEL)),
                );
            }
            Some(None) => {}
            None => unchecked.push(format!("{}/{}", id.namespace, id.name)),
        }
    }
    if !unchecked.is_empty() {
        out.push(Finding::warning(format!(
            "{} not checked for {}: {}",
            rules::MANIFEST_IDENTITY_IN_AGENT_NAMESPACE,
            unchecked.join(", "),
            namespaces.why_unknown().unwrap_or("unknown")
        )));
    }
    out
}

/// With `--control-plane`: keeps the findings on the plane's namespaces, and those
/// on cluster-scoped objects or on none (they concern every plane); returns the
/// namespaces read (the findings' and the identities'), which must be readable.
async fn keep_plane(
    kube: &Kube,
    scope: &Scope,
    findings: &mut Vec<Finding>,
    identities: &[Identity],
    plane: &str,
) -> Result<AgentNamespaces> {
    let needed: BTreeSet<String> = findings
        .iter()
        .filter_map(|f| f.resource.as_ref()?.namespace.clone())
        .chain(identities.iter().map(|i| i.namespace.clone()))
        .collect();
    let read = planes::read_for_plane(kube, scope, &needed, plane).await?;
    findings.retain(|f| in_plane(f, &read, plane));
    Ok(read)
}

fn in_plane(f: &Finding, read: &AgentNamespaces, plane: &str) -> bool {
    match f.resource.as_ref().and_then(|r| r.namespace.as_deref()) {
        None => true,
        Some(ns) => planes::owns(read, ns, plane),
    }
}

/// The label kube-apiserver puts on the RBAC objects it creates at start.
const BOOTSTRAP_LABEL: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");

fn is_bootstrap_rbac(item: &Value) -> bool {
    item.pointer("/metadata/labels")
        .and_then(|l| l.get(BOOTSTRAP_LABEL.0))
        .and_then(Value::as_str)
        == Some(BOOTSTRAP_LABEL.1)
}

fn object_key(kind: &str, namespace: &str, name: &str) -> (String, String, String) {
    (kind.to_string(), namespace.to_string(), name.to_string())
}

/// The API server copies `serviceAccountName` into the deprecated `serviceAccount`
/// of every pod spec it stores, so one borrowed account would be reported twice:
/// a finding on `...serviceAccount` goes when the same rule fired on the same
/// object's `...serviceAccountName` with the same account.
pub fn without_mirrored_account(findings: Vec<Finding>) -> Vec<Finding> {
    let named: std::collections::HashSet<(Option<&str>, Option<String>, String, String)> = findings
        .iter()
        .filter_map(|f| {
            let field = f.field.as_deref()?.strip_suffix("Name")?;
            field.ends_with("serviceAccount").then(|| {
                (
                    f.rule,
                    f.resource.as_ref().map(ResourceRef::display),
                    field.to_string(),
                    f.message
                        .replacen("serviceAccountName", "serviceAccount", 1),
                )
            })
        })
        .collect();
    let mirrored: Vec<bool> = findings
        .iter()
        .map(|f| {
            f.field.as_deref().is_some_and(|field| {
                field.ends_with("serviceAccount")
                    && named.contains(&(
                        f.rule,
                        f.resource.as_ref().map(ResourceRef::display),
                        field.to_string(),
                        f.message.clone(),
                    ))
            })
        })
        .collect();
    findings
        .into_iter()
        .zip(mirrored)
        .filter_map(|(f, m)| (!m).then_some(f))
        .collect()
}

pub async fn run(
    kube: &Kube,
    scope: &Scope,
    cluster_id: Option<&str>,
    plane: Option<&Selected>,
    selector: Option<&Selector>,
    print: &PrintArgs,
    report_options: &reports::Options,
    stdout: &mut dyn Write,
) -> Result<()> {
    let lists =
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
        .filter(|s| s.get("type").and_then(Value::as_str) == Some(TOKEN_SECRET_TYPE))
        .collect::<Vec<_>>();
    let uids = reports::uids(lists.iter().flatten().chain(&secrets));
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

    let mut listed = Listed::default();
    for item in lists.iter().flatten() {
        listed.add(item);
    }
    let selected = selector.map(|sel| selected_objects(&lists, &secrets, sel));
    let mut objects = 0;
    let mut docs = Vec::new();
    let mut bootstrap = std::collections::HashSet::new();
    for (resource, items) in AUDITED.iter().zip(lists.iter()) {
        for item in items {
            objects += 1;
            if resource.group() == "rbac.authorization.k8s.io" && is_bootstrap_rbac(item) {
                bootstrap.insert(object_key(
                    resource.kind,
                    text(item, "/metadata/namespace"),
                    text(item, "/metadata/name"),
                ));
            }
            let account = account_of(item);
            let skip = if identity::is_reserved(account) {
                exemption(item, account, &listed).is_some()
            } else {
                // An ordinary account under a controller: its template is checked there.
                matches!(resource.kind, "Pod" | "ReplicaSet" | "Job")
                    && controller_ref(item).is_some()
            };
            if !skip {
                docs.push(Document::new(from_json(item)));
            }
        }
    }
    for secret in &secrets {
        objects += 1;
        docs.push(Document::new(from_json(secret)));
    }
    if let Some(selected) = &selected {
        objects = selected.len();
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
    let guard_findings: Vec<Finding> = guard_findings
        .into_iter()
        .filter(|f| {
            f.rule
                .is_none_or(|r| rules::get(r).enforced(rules::Where::Audit))
        })
        .filter(|f| {
            // Every cluster's built-in roles draw these warnings; the label can be
            // forged, so it only ever hides warnings, never an error.
            f.severity != Severity::Warning
                || !f.resource.as_ref().is_some_and(|r| {
                    bootstrap.contains(&object_key(
                        &r.kind,
                        r.namespace.as_deref().unwrap_or(""),
                        &r.name,
                    ))
                })
        })
        .map(|f| f.at(Location::default()))
        .collect();
    findings.extend(without_mirrored_account(guard_findings));

    // Manifest-declared identities in namespaces the agent provisions itself.
    let trio_members = [
        client::SERVICE_ACCOUNTS,
        client::ROLES,
        client::ROLE_BINDINGS,
    ]
    .iter()
    .filter_map(|r| AUDITED.iter().position(|a| a == r))
    .flat_map(|i| lists[i].iter())
    .filter_map(ListedObject::from_item);
    let identities = inventory::identities(trio_members);
    let agent_namespaces = match plane {
        None => namespaces::read(kube, scope, &super::declared_namespaces(&identities)).await?,
        Some(p) => keep_plane(kube, scope, &mut findings, &identities, &p.id).await?,
    };
    let mut nvw205 = agent_namespace_findings(&identities, &agent_namespaces);
    if let Some(p) = plane {
        nvw205.retain(|f| in_plane(f, &agent_namespaces, &p.id));
    }
    findings.extend(nvw205);

    if let Some(selected) = &selected {
        findings.retain(|f| {
            f.resource.as_ref().is_some_and(|r| {
                selected.contains(&object_key(
                    &r.kind,
                    r.namespace.as_deref().unwrap_or(""),
                    &r.name,
                ))
            })
        });
    }
    let report_objects = (report_options.apply || matches!(print.output, Some(Form::PolicyReport)))
        .then(|| {
            let uid = |r: &ResourceRef| {
                let ns = r.namespace.clone().unwrap_or_default();
                uids.get(&(r.kind.clone(), ns, r.name.clone())).cloned()
            };
            reports::build(&findings, uid, report_options, plane.map(|p| p.id.as_str()))
        })
        .unwrap_or_default();
    let errors = (findings.iter())
        .filter(|f| f.severity == Severity::Error)
        .count();
    let printed = match print.output {
        Some(Form::PolicyReport) => reports::write(&report_objects, stdout),
        _ => print::write_report(findings, objects, plane, print, stdout),
    };
    match printed {
        Ok(()) | Err(Error::Reported { .. }) => {}
        Err(e) => return Err(e),
    }
    if report_options.apply {
        // The findings now live in the cluster: a run that applied them succeeded.
        let applied = reports::apply(kube, scope, report_options.api, &report_objects).await?;
        if print.output.is_none() {
            applied.write(stdout)?;
        }
        return applied.check();
    }
    match errors {
        0 => Ok(()),
        errors => Err(Error::Reported { errors }),
    }
}

/// `-l`: the keys of the audited objects whose labels match. Everything is
/// still read: an account, a controller or a namespace outside the selection
/// is context a selected pod's checks need.
fn selected_objects(
    lists: &[Vec<Value>],
    secrets: &[Value],
    selector: &Selector,
) -> BTreeSet<(String, String, String)> {
    AUDITED
        .iter()
        .zip(lists)
        .flat_map(|(r, items)| items.iter().map(move |item| (r.kind, item)))
        .chain(secrets.iter().map(|s| (client::SECRETS.kind, s)))
        .filter(|(_, item)| {
            let labels = item
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                        .collect()
                })
                .unwrap_or_default();
            selector.matches(&labels)
        })
        .map(|(kind, item)| {
            object_key(
                kind,
                text(item, "/metadata/namespace"),
                text(item, "/metadata/name"),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn audit_reads_every_pod_bearing_kind_pods_first() {
        assert_eq!(AUDITED[0], client::PODS);
        for k in &crate::workload::POD_BEARING {
            assert!(AUDITED.contains(&client::bearing(k)), "{k:?}");
        }
    }

    #[test]
    fn the_servers_copy_of_the_account_is_not_a_second_finding() {
        let at = |field: &str, account: &str, name: &str| {
            let key = field.rsplit('.').next().unwrap();
            Finding::error(format!(
                "{key} {account:?} is a reserved NVCF worker account"
            ))
            .rule("NVW101")
            .resource(Some(ResourceRef {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: name.into(),
                namespace: Some("n".into()),
            }))
            .field(field)
        };
        let kept = without_mirrored_account(vec![
            at("spec.serviceAccountName", "nvcf-worker-a", "p"),
            at("spec.serviceAccount", "nvcf-worker-a", "p"),
            // Different accounts in the two fields: both are reported.
            at("spec.serviceAccountName", "nvcf-worker-a", "q"),
            at("spec.serviceAccount", "nvcf-worker-b", "q"),
            // Only the deprecated field set: reported.
            at("spec.serviceAccount", "nvcf-worker-a", "r"),
        ]);
        let fields: Vec<String> = kept
            .iter()
            .map(|f| {
                format!(
                    "{} {}",
                    f.resource.as_ref().unwrap().name,
                    f.field.as_deref().unwrap()
                )
            })
            .collect();
        assert_eq!(
            fields,
            [
                "p spec.serviceAccountName",
                "q spec.serviceAccountName",
                "q spec.serviceAccount",
                "r spec.serviceAccount"
            ]
        );
    }

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

    fn obj(api_version: &str, kind: &str, name: &str, uid: &str, owner: Option<&Value>) -> Value {
        let mut o = json!({"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": "n", "uid": uid}});
        if let Some(owner) = owner {
            o["metadata"]["ownerReferences"] = json!([{"apiVersion": owner["apiVersion"],
                "kind": owner["kind"], "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"], "controller": true}]);
        }
        o
    }

    #[test]
    fn exemption_follows_only_verified_chains_to_the_identitys_workload() {
        let mut sa = obj("v1", "ServiceAccount", "nvcf-worker-web", "s", None);
        sa["metadata"]["labels"] = json!({"app.kubernetes.io/managed-by": "kubectl-nvcf-worker", "nvcf.io/identity-origin": "manifest"});
        sa["metadata"]["annotations"] = json!({"nvcf.io/workload": "Deployment/web", "nvcf.io/workload-api-version": "apps/v1"});
        let mut deploy = obj("apps/v1", "Deployment", "web", "d", None);
        deploy["spec"] = json!({"template": {"spec": {"serviceAccountName": "nvcf-worker-web"}}});
        let rs = obj("apps/v1", "ReplicaSet", "web-1", "r", Some(&deploy));
        let pod = obj("v1", "Pod", "web-1-a", "p", Some(&rs));
        let mut stale = rs.clone();
        stale["metadata"]["uid"] = json!("other");
        let orphan = obj("v1", "Pod", "web-1-b", "p2", Some(&stale));
        let cm = obj("v1", "ConfigMap", "web", "c", None);
        let by_cm = obj("v1", "Pod", "web-x", "p3", Some(&cm));
        let mut job = obj("batch/v1", "Job", "web", "j", None);
        job["spec"] = json!({"template": {"spec": {"serviceAccountName": "nvcf-worker-web"}}});
        let by_job = obj("v1", "Pod", "web-j", "p4", Some(&job));
        let own = obj("v1", "Pod", "runner", "p5", None);
        let mut listed = Listed::default();
        for o in [&sa, &deploy, &rs, &cm, &job] {
            listed.add(o);
        }
        let account = "nvcf-worker-web";
        assert!(exemption(&pod, account, &listed).is_some());
        assert!(exemption(&rs, account, &listed).is_some());
        assert!(exemption(&orphan, account, &listed).is_none(), "stale UID");
        assert!(
            exemption(&by_cm, account, &listed).is_none(),
            "unrelated kind"
        );
        assert!(
            exemption(&by_job, account, &listed).is_none(),
            "another workload"
        );
        assert!(
            exemption(&deploy, account, &listed).is_none(),
            "no controller: the guard decides"
        );
        assert!(exemption(&own, "nvcf-worker-runner", &listed).is_some());
        assert!(exemption(&own, "nvcf-worker-other", &listed).is_none());
    }

    #[test]
    fn nvw205_flags_declared_identities_in_agent_namespaces_only() {
        use crate::live::inventory::tests::{manifest_trio, trio};
        let objects = [
            manifest_trio("agent", "nvcf-worker-web", "Deployment/web", "apps/v1"),
            manifest_trio("plain", "nvcf-worker-web", "Deployment/web", "apps/v1"),
            trio("agent", "nvcf-worker-p", 3600),
        ]
        .concat();
        let ids = inventory::identities(objects);
        let read = crate::live::namespaces::tests::read_of(&[("agent", true), ("plain", false)]);
        let found = agent_namespace_findings(&ids, &read);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            found[0].rule,
            Some(rules::MANIFEST_IDENTITY_IN_AGENT_NAMESPACE)
        );
        assert_eq!(found[0].severity, Severity::Error);
        let at = found[0].resource.as_ref().unwrap();
        assert_eq!(
            (at.kind.as_str(), at.name.as_str(), at.namespace.as_deref()),
            ("ServiceAccount", "nvcf-worker-web", Some("agent"))
        );
        assert!(
            found[0]
                .message
                .contains("remove this ServiceAccount, Role and RoleBinding"),
            "{}",
            found[0].message
        );
        let denied =
            agent_namespace_findings(&ids, &AgentNamespaces::Unreadable("forbidden".into()));
        assert_eq!(denied.len(), 1);
        assert_eq!(denied[0].severity, Severity::Warning);
        assert!(
            denied[0]
                .message
                .contains("agent/nvcf-worker-web, plain/nvcf-worker-web: forbidden"),
            "{}",
            denied[0].message
        );
    }

    #[test]
    fn pods_without_a_worker_account_are_not_checked() {
        let mut p = worker_pod();
        p["spec"]["serviceAccountName"] = json!("default");
        p["spec"]["volumes"] = json!([]);
        assert!(check_pod(&p, Some("c1"), |_, _| None).is_empty());
    }
}
