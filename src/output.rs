//! The documents `-o json|yaml` prints for every report (validate's and the live
//! commands'): one API group, one version, a kind per command, so scripts can
//! check what they parse.

pub mod forms;
pub mod jsonpath;

use std::io::Write;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::manifest::{from_json, node_to_yaml};

/// The group and version of every report document; fields are only added within it.
pub const API_VERSION: &str = "report.nvcf.io/v1alpha1";

/// `validate`: counts and findings of a check of manifests.
pub const VALIDATION_REPORT: &str = "ValidationReport";
/// `list`: one item per identity.
pub const WORKER_IDENTITY_LIST: &str = "WorkerIdentityList";
/// `audit`: counts and findings.
pub const AUDIT_REPORT: &str = "AuditReport";
/// `describe`: whether ICMS would accept the pod's token, condition by condition,
/// with the pod, its account and the agent's WorkerAuth.
pub const WORKER_VERDICT: &str = "WorkerVerdict";
/// `cleanup` without `--yes` (or with `--dry-run=client`): what would be deleted and kept.
pub const CLEANUP_PLAN: &str = "CleanupPlan";
/// `cleanup --yes` or `--dry-run=server`: the plan and what came of it.
pub const CLEANUP_RESULT: &str = "CleanupResult";

/// `-o`: the machine-readable forms; without it each command prints for people.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Json,
    Yaml,
}

/// `{apiVersion, kind, ...fields}`: the document every form but the text prints.
pub fn document(kind: &str, fields: Value) -> Value {
    let mut doc = Map::new();
    doc.insert("apiVersion".into(), API_VERSION.into());
    doc.insert("kind".into(), kind.into());
    if let Value::Object(fields) = fields {
        doc.extend(fields);
    }
    Value::Object(doc)
}

/// Writes `{apiVersion, kind, ...fields}` as indented JSON or as YAML.
pub fn write(kind: &str, fields: Value, format: Format, out: &mut dyn Write) -> Result<()> {
    let doc = document(kind, fields);
    let write_err = |e: std::io::Error| Error::io("<stdout>", e);
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, &doc).map_err(|e| write_err(e.into()))?;
            writeln!(out).map_err(write_err)
        }
        Format::Yaml => out
            .write_all(node_to_yaml(&from_json(&doc)).as_bytes())
            .map_err(write_err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_formats_carry_the_version_and_kind_first() {
        let mut json = Vec::new();
        write(
            AUDIT_REPORT,
            serde_json::json!({"errors": 0}),
            Format::Json,
            &mut json,
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["apiVersion"], API_VERSION);
        assert_eq!(v["kind"], AUDIT_REPORT);
        assert_eq!(v["errors"], 0);
        let mut yaml = Vec::new();
        write(
            AUDIT_REPORT,
            serde_json::json!({"errors": 0}),
            Format::Yaml,
            &mut yaml,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(yaml).unwrap(),
            "apiVersion: report.nvcf.io/v1alpha1\nkind: AuditReport\nerrors: 0\n"
        );
    }
}
