//! Findings and results: one type for inject, the guard, validate and audit, rendered
//! as KRM `results`, as `path:line: severity rule: message` text, or as JSON.

use serde::Serialize;

/// How findings are printed: text lines or one JSON document.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        })
    }
}

pub use crate::manifest::{Location, ResourceRef};

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub severity: Severity,
    /// Stable rule id for guard findings (`NVW101`...), None for plain results.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<&'static str>,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceRef>,
    /// Field path inside the resource, `spec.template.spec.serviceAccountName`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    #[serde(flatten)]
    pub location: Location,
}

impl Finding {
    pub fn new(severity: Severity, message: impl Into<String>) -> Finding {
        Finding {
            severity,
            rule: None,
            message: message.into(),
            resource: None,
            field: None,
            location: Location::default(),
        }
    }
    pub fn error(message: impl Into<String>) -> Finding {
        Finding::new(Severity::Error, message)
    }
    pub fn warning(message: impl Into<String>) -> Finding {
        Finding::new(Severity::Warning, message)
    }
    pub fn info(message: impl Into<String>) -> Finding {
        Finding::new(Severity::Info, message)
    }
    pub fn rule(mut self, rule: &'static str) -> Finding {
        self.rule = Some(rule);
        self
    }
    pub fn resource(mut self, r: Option<ResourceRef>) -> Finding {
        self.resource = r;
        self
    }
    pub fn field(mut self, f: impl Into<String>) -> Finding {
        self.field = Some(f.into());
        self
    }
    pub fn at(mut self, loc: Location) -> Finding {
        self.location = loc;
        self
    }
    pub fn line(mut self, line: u32) -> Finding {
        if line > 0 {
            self.location.line = Some(line);
        }
        self
    }

    /// `path:line: severity rule-id: message (kind/namespace/name field.path)`.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        if let Some(file) = &self.location.file {
            s.push_str(file);
            if let Some(line) = self.location.line {
                s.push_str(&format!(":{line}"));
            }
            s.push_str(": ");
        }
        s.push_str(&self.severity.to_string());
        match self.rule {
            Some(_) => s.push(' '),
            None => s.push_str(": "),
        }
        s.push_str(&self.detail());
        s
    }

    /// `rule-id: message (kind/namespace/name field.path)`: the finding without its
    /// place and severity, for formats that carry those apart (GitHub annotations).
    pub fn detail(&self) -> String {
        let mut s = String::new();
        if let Some(rule) = self.rule {
            s.push_str(rule);
            s.push_str(": ");
        }
        s.push_str(&self.message);
        let mut ctx = Vec::new();
        if let Some(r) = &self.resource {
            ctx.push(r.display());
        }
        if let Some(f) = &self.field {
            ctx.push(f.clone());
        }
        if !ctx.is_empty() {
            s.push_str(&format!(" ({})", ctx.join(" ")));
        }
        s
    }

    /// A KRM function result (`config.kubernetes.io/v1` ResourceList `results` item).
    pub fn to_krm_result(&self) -> serde_json::Value {
        let mut r = serde_json::Map::new();
        let message = match self.rule {
            Some(rule) => format!("{rule}: {}", self.message),
            None => self.message.clone(),
        };
        r.insert("message".into(), message.into());
        r.insert("severity".into(), self.severity.to_string().into());
        if let Some(res) = &self.resource {
            r.insert(
                "resourceRef".into(),
                serde_json::to_value(res).expect("plain struct"),
            );
        }
        if let Some(f) = &self.field {
            r.insert("field".into(), serde_json::json!({ "path": f }));
        }
        if let Some(file) = &self.location.file {
            let mut fm = serde_json::Map::new();
            fm.insert("path".into(), file.clone().into());
            if let Some(i) = self.location.index {
                fm.insert("index".into(), i.into());
            }
            r.insert("file".into(), fm.into());
        }
        let mut tags = serde_json::Map::new();
        if let Some(rule) = self.rule {
            tags.insert("rule".into(), rule.into());
        }
        if let Some(line) = self.location.line {
            tags.insert("line".into(), line.to_string().into());
        }
        if !tags.is_empty() {
            r.insert("tags".into(), tags.into());
        }
        r.into()
    }
}

pub fn has_errors(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.severity == Severity::Error)
}

/// `N errors, N warnings in N files`.
pub fn summary(findings: &[Finding], files: usize) -> String {
    let count = |s| findings.iter().filter(|f| f.severity == s).count();
    let plural = |n: usize, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
    format!(
        "{}, {} in {}",
        plural(count(Severity::Error), "error"),
        plural(count(Severity::Warning), "warning"),
        plural(files, "file")
    )
}

// What the processors (inject, uninject, validate) return: one outcome type for
// every face, beside the findings it carries.

/// What happened to one input object (the per-resource report on stderr).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Injected,
    /// The transformer's own output brought to the current config: what changed.
    Updated(Vec<String>),
    /// The identity taken out (uninject, prune): what was restored.
    Uninjected(Vec<String>),
    Unchanged(&'static str),
    Skipped(&'static str),
    /// A ServiceAccount, Role or RoleBinding this run added.
    Generated,
    /// A ServiceAccount, Role or RoleBinding of an identity no workload uses any more.
    Removed,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectReport {
    pub resource: ResourceRef,
    pub status: Status,
}

impl ObjectReport {
    pub fn to_text(&self) -> String {
        let r = self.resource.short();
        match &self.status {
            Status::Injected => format!("{r} injected"),
            Status::Generated => format!("{r} generated"),
            Status::Unchanged(why) => format!("{r} unchanged: {why}"),
            Status::Skipped(why) => format!("{r} skipped: {why}"),
            Status::Updated(what) => format!("{r} updated: {}", what.join("; ")),
            Status::Uninjected(what) if what.is_empty() => format!("{r} uninjected"),
            Status::Uninjected(what) => format!("{r} uninjected: {}", what.join("; ")),
            Status::Removed => format!("{r} removed"),
        }
    }
}

#[derive(Debug, Default)]
pub struct Outcome {
    pub findings: Vec<Finding>,
    pub reports: Vec<ObjectReport>,
}

impl Outcome {
    pub fn has_errors(&self) -> bool {
        has_errors(&self.findings)
    }

    /// The findings, and for a KRM function (whose only report is `results`) an
    /// info result for each workload updated, uninjected or kept though no longer
    /// selected, and each object removed: what changed beyond a first injection.
    pub fn krm_results(self) -> Vec<Finding> {
        if self.has_errors() {
            return self.findings; // nothing changed
        }
        let mut out = self.findings;
        for r in self.reports {
            let says = match &r.status {
                // A first injection says so too, not only a later update: kpt
                // shows results, and "nothing reported" must mean nothing done.
                Status::Injected | Status::Updated(_) | Status::Uninjected(_) | Status::Removed => {
                    true
                }
                Status::Unchanged(why) => *why == KEPT_NOT_SELECTED,
                _ => false,
            };
            if says {
                out.push(Finding::info(r.to_text()).resource(Some(r.resource)));
            }
        }
        out
    }
}

/// Why a workload no longer selected still carries its identity.
pub const KEPT_NOT_SELECTED: &str =
    "not selected any more; keeps its worker identity (prune: true or --prune takes it out)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_line_has_every_part() {
        let f = Finding::error("use another account")
            .rule("NVW101")
            .resource(Some(ResourceRef {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name: "web".into(),
                namespace: Some("ns".into()),
            }))
            .field("spec.template.spec.serviceAccountName")
            .at(Location {
                file: Some("a.yaml".into()),
                index: Some(0),
                line: Some(7),
            });
        assert_eq!(f.to_text(), "a.yaml:7: error NVW101: use another account (Deployment/ns/web spec.template.spec.serviceAccountName)");
        let r = f.to_krm_result();
        assert_eq!(r["severity"], "error");
        assert_eq!(r["resourceRef"]["namespace"], "ns");
        assert_eq!(r["field"]["path"], "spec.template.spec.serviceAccountName");
        assert_eq!(r["file"]["index"], 0);
        assert_eq!(r["tags"]["rule"], "NVW101");
    }
}
