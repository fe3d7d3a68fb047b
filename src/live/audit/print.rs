//! How `audit` prints its findings: text lines and counts, or a form of `-o`.

use std::io::Write;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::live::output;
use crate::live::output::forms::{self, PrintArgs};
use crate::live::planes::Selected;
use crate::report::{Finding, Severity};

/// The findings, in `--sort-by`'s order, as text lines and counts or in a form
/// of `-o`: the `AuditReport` document, custom columns over its findings, or
/// `name`, each object with a finding once (`pod/NAME`, `role.rbac.authorization.k8s.io/NAME`).
pub fn write_report(
    findings: Vec<Finding>,
    objects: usize,
    plane: Option<&Selected>,
    print: &PrintArgs,
    stdout: &mut dyn Write,
) -> Result<()> {
    let rows: Vec<Value> = findings
        .iter()
        .map(|f| serde_json::to_value(f).expect("plain struct"))
        .collect();
    let order = print.order(&rows)?;
    let (findings, rows) = (
        forms::reorder(findings, &order),
        forms::reorder(rows, &order),
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
    match &print.output {
        None => {
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
        Some(form) => {
            let mut doc = serde_json::json!({
                "objects": objects,
                "errors": errors,
                "warnings": warnings,
                "findings": rows,
            });
            if let Some(p) = plane {
                doc["controlPlane"] = serde_json::to_value(p).expect("plain struct");
            }
            let mut names: Vec<String> = Vec::new();
            for r in findings.iter().filter_map(|f| f.resource.as_ref()) {
                let name = forms::object_name(&r.api_version, &r.kind, &r.name);
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            let rows = doc["findings"].as_array().cloned().unwrap_or_default();
            forms::write(
                form,
                output::AUDIT_REPORT,
                doc,
                &rows,
                &names,
                print.no_headers,
                stdout,
            )?
        }
    }
    if errors > 0 {
        return Err(Error::Reported { errors });
    }
    Ok(())
}
