//! `validate -o sarif`: the guard's findings as a SARIF 2.1.0 log, the format code
//! scanning (GitHub, GitLab, Azure DevOps) shows in reviews.

use std::path::Path;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::report::{Finding, Severity};
use crate::rules::{self, Where};

pub const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";
const INFORMATION_URI: &str = "https://github.com/nvidia/kubectl-nvcf-worker";

/// The rules `validate` applies, in id order: the catalogue's manifest rules.
pub fn manifest_rules() -> impl Iterator<Item = &'static rules::Rule> {
    rules::RULES.iter().filter(|r| r.enforced(Where::Manifest))
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// A path as a URI reference relative to `cwd` (percent-encoded, `/`-separated);
/// None for stdin, which has no location to show.
fn relative_uri(file: &str, cwd: &Path) -> Option<String> {
    if file == crate::manifest::read::STDIN {
        return None;
    }
    let path = Path::new(file);
    let rel = path.strip_prefix(cwd).unwrap_or(path);
    let mut parts = Vec::new();
    for c in rel.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::RootDir => parts.push(String::new()),
            c => parts.push(percent_encode(&c.as_os_str().to_string_lossy())),
        }
    }
    Some(parts.join("/"))
}

fn percent_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The 1-based column (in Unicode code points) where the offending field starts
/// on `line`: its key when the field path ends in one, else the line's first
/// character that is not indentation.
pub(crate) fn column(text: &str, field: Option<&str>) -> u32 {
    let start = text.len() - text.trim_start().len();
    let key = field
        .and_then(|f| f.rsplit('.').next())
        .filter(|k| !k.ends_with(']'))
        .map(|k| k.split('[').next().unwrap_or(k));
    let at = key
        .filter(|k| !k.is_empty())
        .and_then(|k| {
            // The key itself, plain or quoted, followed by its colon.
            let mut from = 0;
            while let Some(i) = text[from..].find(k) {
                let i = from + i;
                let before = text[..i].chars().last();
                let after = text[i + k.len()..].trim_start_matches(['"', '\'']);
                if !before.is_some_and(|c| c.is_alphanumeric())
                    && after.trim_start().starts_with(':')
                {
                    let quoted = matches!(before, Some('"' | '\''));
                    return Some(if quoted { i - 1 } else { i });
                }
                from = i + k.len();
            }
            None
        })
        .unwrap_or(start);
    text[..at].chars().count() as u32 + 1
}

/// Stable across runs and unrelated edits: what was found and where in which
/// object, not the line it is on.
fn fingerprint(f: &Finding, uri: Option<&str>) -> String {
    let mut h = Sha256::new();
    for part in [
        f.rule.unwrap_or(""),
        uri.unwrap_or(""),
        &f.resource.as_ref().map(|r| r.display()).unwrap_or_default(),
        f.field.as_deref().unwrap_or(""),
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The SARIF 2.1.0 log of one `validate` run. `read_line` gives a file's line
/// text (for the column); `cwd` is what URIs are relative to.
pub fn log(
    findings: &[Finding],
    cwd: &Path,
    read_line: &mut dyn FnMut(&str, u32) -> Option<String>,
) -> Value {
    let rules: Vec<Value> = manifest_rules()
        .map(|r| {
            json!({
                "id": r.id,
                "name": r.name,
                "shortDescription": {"text": r.short},
                "fullDescription": {"text": r.full},
                "help": {"text": r.help, "markdown": r.help},
                "helpUri": format!("{INFORMATION_URI}#the-guard"),
                "defaultConfiguration": {"level": level(r.severity)},
            })
        })
        .collect();
    let results: Vec<Value> = findings
        .iter()
        .map(|f| {
            let uri = f
                .location
                .file
                .as_deref()
                .and_then(|file| relative_uri(file, cwd));
            let mut message = f.message.clone();
            if let Some(r) = &f.resource {
                message.push_str(&format!(" ({}", r.display()));
                if let Some(field) = &f.field {
                    message.push_str(&format!(" {field}"));
                }
                message.push(')');
            }
            let mut result = json!({
                "level": level(f.severity),
                "message": {"text": message},
                "partialFingerprints": {"nvcfWorkerFinding/v1": fingerprint(f, uri.as_deref())},
            });
            if let Some(rule) = f.rule {
                result["ruleId"] = rule.into();
                if let Some(i) = manifest_rules().position(|r| r.id == rule) {
                    result["ruleIndex"] = i.into();
                }
            }
            if let Some(uri) = &uri {
                let mut physical = json!({
                    "artifactLocation": {"uri": uri, "uriBaseId": "%SRCROOT%"},
                });
                if let Some(line) = f.location.line.filter(|l| *l > 0) {
                    let mut region = json!({"startLine": line});
                    let file = f.location.file.as_deref().unwrap_or_default();
                    if let Some(text) = read_line(file, line) {
                        region["startColumn"] = column(&text, f.field.as_deref()).into();
                    }
                    physical["region"] = region;
                }
                result["locations"] = json!([{"physicalLocation": physical}]);
            }
            result
        })
        .collect();
    let mut root = cwd.to_string_lossy().replace('\\', "/");
    if !root.ends_with('/') {
        root.push('/');
    }
    let root_uri: String = format!(
        "file://{}",
        root.split('/')
            .map(percent_encode)
            .collect::<Vec<_>>()
            .join("/")
    );
    json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "kubectl-nvcf-worker",
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "informationUri": INFORMATION_URI,
                "rules": rules,
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": root_uri}},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_point_at_the_key() {
        let f = Some("spec.template.spec.serviceAccountName");
        assert_eq!(column("      serviceAccountName: nvcf-worker-x", f), 7);
        assert_eq!(column("      \"serviceAccountName\": \"x\",", f), 7);
        // Another key containing the name is not it.
        assert_eq!(column("  xserviceAccountName: a", f), 3);
        assert_eq!(column("  - name: a", Some("subjects[0]")), 3);
        assert_eq!(column("  über: a", Some("metadata.über")), 3);
    }

    #[test]
    fn uris_are_relative_and_encoded() {
        let cwd = Path::new("/repo");
        assert_eq!(
            relative_uri("/repo/a b/x.yaml", cwd).unwrap(),
            "a%20b/x.yaml"
        );
        assert_eq!(relative_uri("./k8s/x.yaml", cwd).unwrap(), "k8s/x.yaml");
        assert_eq!(relative_uri("<stdin>", cwd), None);
    }

    #[test]
    fn the_driver_lists_the_catalogues_manifest_rules() {
        let ids: Vec<&str> = manifest_rules().map(|r| r.id).collect();
        assert_eq!(
            ids,
            [
                "NVW001", "NVW101", "NVW102", "NVW103", "NVW104", "NVW105", "NVW106", "NVW107",
                "NVW108", "NVW109", "NVW110", "NVW111", "NVW112", "NVW113", "NVW114", "NVW115",
                "NVW116", "NVW117"
            ]
        );
    }
}
