//! Rendering for `list` (table, and the versioned `WorkerIdentityList` document)
//! and for cleanup's plan and summary (text, `CleanupPlan` and `CleanupResult`).

use std::io::Write;

use serde::Serialize;

use super::cleanup::{KeptIdentity, Plan, PlannedIdentity};
use super::executor::Summary;
use super::inventory::{human_age, MadeBy, Member, Origin, OwnerStatus, State, StateOptions};
use super::namespaces::AgentNamespaces;
use super::output::forms::{self, Form, PrintArgs};
use super::output::{self, Format};
use super::Inventory;
use crate::controlplane;
use crate::error::{Error, Result};

#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OwnerRef {
    pub api_version: String,
    pub kind: String,
    /// Empty when a manifest-declared identity does not say.
    pub name: String,
    /// false when gone; true when it exists or cannot be checked (see `checked`).
    pub exists: bool,
    /// false when the owner's kind is not one this tool lists.
    pub checked: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MemberRef {
    pub uid: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Members {
    pub service_account: Option<MemberRef>,
    pub role: Option<MemberRef>,
    pub role_binding: Option<MemberRef>,
}

/// One row of `list`: one identity.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub namespace: String,
    pub name: String,
    /// `pod` (provisioned by the agent per pod), `manifest` (declared with inject)
    /// or `namespace` (`nvcf-worker`, the agent's MiniService identity or declared
    /// with `naming: per-namespace`).
    pub origin: &'static str,
    /// `agent`, `manifest` or `unknown`: who made the identity, by its marks.
    pub made_by: MadeBy,
    /// Manifest-declared identities only: true when their namespace is one the
    /// agent provisions itself, false when not, null when that cannot be told
    /// (the namespaces could not be read). Absent for the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflict: Option<Option<bool>>,
    /// When `conflict` is true, what is wrong and what to do; when null, why it
    /// cannot be told.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The control plane owning the identity's namespace (its
    /// `nvcf.nvidia.com/control-plane-owner` label; `default` when unlabelled).
    /// Absent when the namespace was not read or could not be, or no plane owns it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<String>,
    /// Whether the namespace's labels were read (PLANE says `<unknown>` if not).
    #[serde(skip)]
    pub planes_read: bool,
    pub owner: OwnerRef,
    pub members: Members,
    pub complete: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub age_seconds: Option<i64>,
    pub state: State,
}

fn timestamp(secs: i64) -> Option<String> {
    k8s_openapi::jiff::Timestamp::from_second(secs)
        .ok()
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}

/// What `conflict` says of a manifest-declared identity in a namespace `plane`'s
/// agent provisions; the legacy plane's as before there were several.
pub fn conflict_note(namespace: &str, plane: &str) -> String {
    let (who, owner) = if plane == controlplane::DEFAULT_OWNER {
        ("the agent".to_string(), String::new())
    } else {
        (
            format!("control plane {plane}'s agent"),
            format!(", {}={plane}", controlplane::OWNER_LABEL),
        )
    };
    format!(
        "declared in a manifest in namespace {namespace}, which {who} provisions itself ({}={}{owner}): its reconciler owns the worker identity there and registers only its own pods; remove this ServiceAccount, Role and RoleBinding and let the agent provision the namespace's identity",
        crate::identity::WORKLOAD_INSTANCE_TYPE_LABEL,
        crate::identity::WORKLOAD_INSTANCE_TYPE_MINISERVICE
    )
}

pub fn rows(
    inventory: &Inventory,
    namespaces: &AgentNamespaces,
    now: i64,
    options: &StateOptions,
) -> Vec<Row> {
    inventory
        .identities
        .iter()
        .map(|id| {
            let status = id.owner_status(&inventory.owners);
            let (origin, api_version, kind, name) = match id.origin() {
                Origin::Pod { pod } => ("pod", "v1".into(), "Pod".into(), pod),
                Origin::Manifest {
                    api_version,
                    kind,
                    name,
                } => ("manifest", api_version, kind, name),
                Origin::ManifestUnknownOwner => {
                    ("manifest", String::new(), String::new(), String::new())
                }
                // The namespace's one identity: its owner is the namespace.
                Origin::Namespace { .. } => (
                    "namespace",
                    "v1".into(),
                    "Namespace".into(),
                    id.namespace.clone(),
                ),
            };
            let member = |m: Member| {
                id.member(m).map(|o| MemberRef {
                    uid: o.uid.clone(),
                    created_at: o.created.and_then(timestamp),
                })
            };
            let made_by = id.made_by();
            let planes = namespaces.planes(&id.namespace);
            let (conflict, note) = match made_by {
                MadeBy::Manifest => match planes.as_ref().map(|p| p.provisioned_by.as_deref()) {
                    Some(Some(plane)) => {
                        (Some(Some(true)), Some(conflict_note(&id.namespace, plane)))
                    }
                    Some(None) => (Some(Some(false)), None),
                    None => (Some(None), namespaces.why_unknown().map(str::to_string)),
                },
                MadeBy::Agent | MadeBy::Unknown => (None, None),
            };
            Row {
                namespace: id.namespace.clone(),
                name: id.name.clone(),
                origin,
                made_by,
                conflict,
                note,
                planes_read: planes.is_some(),
                control_plane: planes.and_then(|p| p.plane),
                owner: OwnerRef {
                    api_version,
                    kind,
                    name,
                    exists: status != OwnerStatus::Gone,
                    checked: status != OwnerStatus::Unknown,
                    phase: match &status {
                        OwnerStatus::Pod { phase } => Some(phase.clone()),
                        _ => None,
                    },
                },
                members: Members {
                    service_account: member(Member::ServiceAccount),
                    role: member(Member::Role),
                    role_binding: member(Member::RoleBinding),
                },
                complete: id.is_complete(),
                age_seconds: id.created().map(|c| now - c),
                state: id.state(&inventory.owners, now, options),
            }
        })
        .collect()
}

fn write_err(e: std::io::Error) -> Error {
    Error::io("<stdout>", e)
}

fn owner_cell(o: &OwnerRef) -> String {
    if o.kind.is_empty() {
        return "?".into();
    }
    format!("{}/{}", o.kind.to_ascii_lowercase(), o.name)
}

fn owner_status_cell(o: &OwnerRef) -> String {
    match (&o.phase, o.exists, o.checked) {
        (Some(phase), _, _) => phase.clone(),
        (None, _, false) => "unknown".into(),
        (None, true, true) => "exists".into(),
        (None, false, _) => "gone".into(),
    }
}

/// The NOTE column: empty unless a manifest-declared identity is in a namespace
/// the agent provisions (`conflict`), or that cannot be told (`unknown`).
fn note_cell(r: &Row) -> String {
    match r.conflict {
        Some(Some(true)) => format!(
            "conflict: the agent provisions this namespace (audit {})",
            crate::rules::MANIFEST_IDENTITY_IN_AGENT_NAMESPACE
        ),
        Some(None) => "agent namespace unknown: namespaces unreadable".into(),
        Some(Some(false)) | None => String::new(),
    }
}

fn trio_cell(m: &Members) -> String {
    let missing: Vec<&str> = [
        (m.service_account.is_none(), "ServiceAccount"),
        (m.role.is_none(), "Role"),
        (m.role_binding.is_none(), "RoleBinding"),
    ]
    .into_iter()
    .filter_map(|(missing, k)| missing.then_some(k))
    .collect();
    if missing.is_empty() {
        "complete".into()
    } else {
        format!("no {}", missing.join(","))
    }
}

/// Left-aligned columns separated by three spaces, as kubectl prints them.
fn write_table(
    header: &[&str],
    rows: &[Vec<String>],
    no_headers: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    // An empty last column (NOTE, mostly) leaves no trailing blanks.
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}   "));
            }
        }
        s.trim_end().to_string()
    };
    if !no_headers {
        writeln!(out, "{}", line(header.to_vec())).map_err(write_err)?;
    }
    for r in rows {
        writeln!(out, "{}", line(r.iter().map(String::as_str).collect())).map_err(write_err)?;
    }
    Ok(())
}

/// Whether the output shows planes, so every identity's namespace is read:
/// every form but the plain table does (the document carries each `controlPlane`).
pub fn shows_planes(print: &PrintArgs) -> bool {
    print.output.is_some()
}

/// The PLANE cell: `<unknown>` when the namespace was not or could not be read,
/// `<none>` when no plane owns it.
fn plane_cell(r: &Row) -> String {
    match (&r.control_plane, r.planes_read) {
        (Some(p), _) => p.clone(),
        (None, false) => "<unknown>".into(),
        (None, true) => "<none>".into(),
    }
}

fn table_cells(r: &Row, wide: bool) -> Vec<String> {
    let mut cells = vec![
        r.namespace.clone(),
        r.name.clone(),
        r.origin.to_string(),
        r.made_by.as_str().to_string(),
        owner_cell(&r.owner),
        owner_status_cell(&r.owner),
        trio_cell(&r.members),
        r.age_seconds.map_or("<unknown>".into(), human_age),
        r.state.as_str().to_string(),
    ];
    if wide {
        cells.push(plane_cell(r));
    }
    cells.push(note_cell(r));
    cells
}

/// The table (`wide`: with PLANE) or another of kubectl's forms; the document
/// names the plane `--control-plane` kept to. `-o name` gives each identity's
/// ServiceAccount (`serviceaccount/NAME`), the object its pods run as.
pub fn render(
    rows: Vec<Row>,
    print: &PrintArgs,
    plane: Option<&super::planes::Selected>,
    out: &mut dyn Write,
) -> Result<()> {
    let json: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| serde_json::to_value(r).expect("plain struct"))
        .collect();
    let order = print.order(&json)?;
    let (rows, json) = (forms::reorder(rows, &order), forms::reorder(json, &order));
    let wide = match &print.output {
        None => false,
        Some(Form::Wide) => true,
        Some(form) => {
            let mut doc = serde_json::json!({ "items": json });
            if let Some(p) = plane {
                doc["controlPlane"] = serde_json::to_value(p).expect("plain struct");
            }
            let names: Vec<String> = rows
                .iter()
                .map(|r| forms::object_name("v1", "ServiceAccount", &r.name))
                .collect();
            let items = doc["items"].as_array().cloned().unwrap_or_default();
            return forms::write(
                form,
                output::WORKER_IDENTITY_LIST,
                doc,
                &items,
                &names,
                print.no_headers,
                out,
            );
        }
    };
    if rows.is_empty() {
        return writeln!(out, "No worker identities found.").map_err(write_err);
    }
    let cells: Vec<Vec<String>> = rows.iter().map(|r| table_cells(r, wide)).collect();
    let mut header = vec![
        "NAMESPACE",
        "NAME",
        "ORIGIN",
        "MADE-BY",
        "OWNER",
        "OWNER-STATUS",
        "TRIO",
        "AGE",
        "STATE",
    ];
    if wide {
        header.push("PLANE");
    }
    header.push("NOTE");
    write_table(&header, &cells, print.no_headers, out)
}

pub fn write_plan(plan: &Plan, out: &mut dyn Write) -> Result<()> {
    let kept: Vec<String> = plan
        .kept
        .iter()
        .map(|(state, n)| format!("{}: {n}", state.as_str()))
        .collect();
    writeln!(
        out,
        "plan: delete {} identities ({} objects); keep {}{}",
        plan.delete.len(),
        plan.objects(),
        plan.kept.values().sum::<usize>(),
        if kept.is_empty() {
            String::new()
        } else {
            format!(" ({})", kept.join(", "))
        }
    )
    .map_err(write_err)?;
    for p in &plan.delete {
        let kinds: Vec<&str> = p.deletions.iter().map(|d| d.member.kind()).collect();
        writeln!(
            out,
            "  delete {}/{} ({}): {}; {}",
            p.namespace,
            p.name,
            p.state.as_str(),
            kinds.join(", "),
            p.reason
        )
        .map_err(write_err)?;
    }
    for k in &plan.keep {
        writeln!(
            out,
            "  keep {}/{} ({}): {}",
            k.namespace,
            k.name,
            k.state.as_str(),
            k.reason
        )
        .map_err(write_err)?;
    }
    Ok(())
}

pub fn write_summary(summary: &Summary, dry_run: bool, out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "{}: {} identities ({} objects); skipped: {}; failed: {}",
        if dry_run {
            "server dry run, would delete"
        } else {
            "deleted"
        },
        summary.deleted,
        summary.objects,
        summary.skipped.len(),
        summary.failed.len()
    )
    .map_err(write_err)?;
    for (who, why) in &summary.skipped {
        writeln!(out, "  skipped {who}: {why}").map_err(write_err)?;
    }
    for (who, _) in &summary.failed {
        writeln!(out, "  failed {who}").map_err(write_err)?;
    }
    Ok(())
}

fn planned_json(p: &PlannedIdentity) -> serde_json::Value {
    serde_json::json!({
        "namespace": p.namespace,
        "name": p.name,
        "state": p.state,
        "reason": p.reason,
        "objects": p.deletions.iter().map(|d| serde_json::json!({
            "apiVersion": d.member.resource().api_version,
            "kind": d.member.kind(),
            "uid": d.uid,
        })).collect::<Vec<_>>(),
    })
}

fn plan_json(plan: &Plan) -> serde_json::Value {
    serde_json::json!({
        "delete": plan.delete.iter().map(planned_json).collect::<Vec<_>>(),
        "keep": plan.keep.iter().map(kept_json).collect::<Vec<_>>(),
    })
}

fn who_json(entries: &[(String, String)], field: &str) -> Vec<serde_json::Value> {
    entries
        .iter()
        .map(|(who, why)| {
            let (namespace, name) = who.split_once('/').unwrap_or(("", who));
            serde_json::json!({ "namespace": namespace, "name": name, field: why })
        })
        .collect()
}

fn kept_json(k: &KeptIdentity) -> serde_json::Value {
    serde_json::json!({
        "namespace": k.namespace,
        "name": k.name,
        "state": k.state,
        "reason": k.reason,
    })
}

/// `--sort-by`: the plan's deletions and kept identities, each list in the
/// order of the value at the path in its entry's JSON (as the document shows it).
pub fn sort_plan(plan: &mut Plan, print: &PrintArgs) -> Result<()> {
    if print.sort_by.is_none() {
        return Ok(());
    }
    let rows: Vec<_> = plan.delete.iter().map(planned_json).collect();
    let order = print.order(&rows)?;
    plan.delete = forms::reorder(std::mem::take(&mut plan.delete), &order);
    let rows: Vec<_> = plan.keep.iter().map(kept_json).collect();
    let order = print.order(&rows)?;
    plan.keep = forms::reorder(std::mem::take(&mut plan.keep), &order);
    Ok(())
}

/// The plan in a form of `-o`: `CleanupPlan` (what `--yes` would delete, each
/// object with the UID its delete will carry as a precondition, and what it
/// keeps, each with its reason); `name`, each object `--yes` would delete as
/// `kubectl delete -o name` prints it; custom-columns, one row per entry of
/// `delete`, then of `keep`.
pub fn write_plan_form(
    plan: &Plan,
    form: &Form,
    no_headers: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let doc = plan_json(plan);
    let rows: Vec<serde_json::Value> = ["delete", "keep"]
        .iter()
        .flat_map(|k| doc[k].as_array().cloned().unwrap_or_default())
        .collect();
    let names: Vec<String> = plan
        .delete
        .iter()
        .flat_map(|p| {
            p.deletions.iter().map(|d| {
                forms::object_name(d.member.resource().api_version, d.member.kind(), &p.name)
            })
        })
        .collect();
    forms::write(
        form,
        output::CLEANUP_PLAN,
        doc,
        &rows,
        &names,
        no_headers,
        out,
    )
}

/// `CleanupResult`: the plan, then the counts and every skipped or failed identity.
pub fn write_result_document(
    plan: &Plan,
    summary: &Summary,
    dry_run: bool,
    format: Format,
    out: &mut dyn Write,
) -> Result<()> {
    let fields = serde_json::json!({
        "dryRun": if dry_run { "server" } else { "none" },
        "plan": plan_json(plan),
        "deleted": summary.deleted,
        "objects": summary.objects,
        "skipped": who_json(&summary.skipped, "reason"),
        "failed": who_json(&summary.failed, "error"),
    });
    output::write(output::CLEANUP_RESULT, fields, format, out)
}
