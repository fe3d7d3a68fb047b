//! `validate -o sarif`: the guard's findings as a SARIF 2.1.0 log, the format code
//! scanning (GitHub, GitLab, Azure DevOps) shows in reviews.

use std::path::Path;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::guard;
use crate::report::{Finding, Severity};

pub const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";
const INFORMATION_URI: &str = "https://github.com/nvidia/kubectl-nvcf-worker";

/// One guard rule as code scanning shows it.
pub struct Rule {
    pub id: &'static str,
    /// PascalCase, as SARIF's `reportingDescriptor.name` suggests.
    pub name: &'static str,
    pub level: Severity,
    pub short: &'static str,
    pub full: &'static str,
    pub help: &'static str,
}

/// The rules `validate` applies, in id order.
pub const RULES: &[Rule] = &[
    Rule {
        id: guard::DECODE,
        name: "DecodesAsKubectlDecodes",
        level: Severity::Error,
        short: "Input does not decode the way kubectl decodes it",
        full: "Invalid YAML, duplicate keys, a key set both before and by a merge key, or a document that is not a Kubernetes object. kubectl's strict decoding rejects these, and lenient decoders resolve them differently, which can hide a value from review.",
        help: "Fix the YAML so that every document is one object with unique keys. A Helm chart's templates/ must be rendered first (helm template CHART), and the rendered output checked.",
    },
    Rule {
        id: guard::POD_SPEC_ACCOUNT,
        name: "ForgedWorkerServiceAccount",
        level: Severity::Error,
        short: "A pod spec runs as an NVCF worker account it does not own",
        full: "A pod spec (in any workload kind, List item or custom resource) sets serviceAccountName or serviceAccount to nvcf-worker-*. Worker accounts belong to the worker identity that NVCA or the transformer derives for one workload; another pod using one would act as that worker.",
        help: "Use another service account, or let `kubectl nvcf-worker inject` (or the KRM function) give the workload its own identity together with its ServiceAccount, Role and RoleBinding.",
    },
    Rule {
        id: guard::BINDING_TO_WORKER,
        name: "BindingToWorkerAccount",
        level: Severity::Error,
        short: "A RoleBinding or ClusterRoleBinding grants to an NVCF worker account",
        full: "Worker identities are deny-by-default: the only binding to a nvcf-worker-* ServiceAccount (or the user system:serviceaccount:<ns>:nvcf-worker-*) is the transformer's own binding to its empty Role.",
        help: "Remove the subject, or grant the permission to an account that is not a worker identity.",
    },
    Rule {
        id: guard::GROUP_INCLUDES_WORKERS,
        name: "BindingToGroupOfWorkers",
        level: Severity::Warning,
        short: "A binding grants to a group that contains every worker account",
        full: "system:serviceaccounts, system:serviceaccounts:<namespace> and system:authenticated contain the worker accounts too, so whatever the binding grants, every worker gets.",
        help: "Bind to the accounts that need the permission by name instead of to the group.",
    },
    Rule {
        id: guard::WORKER_ROLE_RULES,
        name: "WorkerRoleWithRules",
        level: Severity::Error,
        short: "An NVCF worker Role or ClusterRole has rules",
        full: "The Role of a worker identity is empty by contract (deny by default); rules or an aggregation rule on a nvcf-worker-* Role or ClusterRole widen every worker bound to it.",
        help: "Leave the worker Role with `rules: []`; give permissions to a different account.",
    },
    Rule {
        id: guard::TOKEN_MINT_OR_IMPERSONATE,
        name: "TokenMintOrImpersonate",
        level: Severity::Warning,
        short: "A rule can mint service-account tokens or impersonate",
        full: "create on serviceaccounts/token, or impersonate on serviceaccounts or users (wildcards included), lets the holder obtain a worker's token without being the worker.",
        help: "Narrow the rule with resourceNames to accounts that are not worker identities, or drop the verb.",
    },
    Rule {
        id: guard::WORKER_TOKEN_SECRET,
        name: "LongLivedWorkerToken",
        level: Severity::Error,
        short: "A long-lived token Secret for an NVCF worker account",
        full: "A kubernetes.io/service-account-token Secret for a nvcf-worker-* account holds a token that never expires; worker identities use projected tokens of at most a day.",
        help: "Delete the Secret; workers read their projected token from /var/run/secrets/tokens/token.",
    },
    Rule {
        id: guard::LOOKALIKE_KEY,
        name: "LookAlikeAccountKey",
        level: Severity::Error,
        short: "A key looks like serviceAccountName or serviceAccount but is not",
        full: "Spaces, a different case, zero-width or look-alike Unicode characters make a key that a reviewer reads as serviceAccountName while Kubernetes ignores or reads it differently.",
        help: "Write the key exactly as `serviceAccountName` (or remove it).",
    },
    Rule {
        id: guard::INFRA_ANNOTATION,
        name: "AgentInfraAnnotation",
        level: Severity::Error,
        short: "An object or pod template carries the NVCF agent's infra annotation",
        full: "The agent registers with ICMS only pods that carry nvca.nvcf.nvidia.io/nvca-infra-object and run as a worker account, and rejects workload objects that carry it: an object written with it claims to be the agent's.",
        help: "Remove the annotation; only the agent sets it on its own objects.",
    },
    Rule {
        id: guard::HAND_WRITTEN_IDENTITY,
        name: "HandWrittenWorkerIdentity",
        level: Severity::Error,
        short: "A ServiceAccount, Role or RoleBinding uses a reserved worker identity name",
        full: "nvcf-worker and nvcf-worker-* ServiceAccounts, Roles and RoleBindings are made by the NVCF agent, or by the transformer with its marks and exact shape; a hand-written one could stand in for a worker identity.",
        help: "Pick another name, or let `kubectl nvcf-worker inject` generate the identity.",
    },
    Rule {
        id: guard::ACCOUNT_REFERENCE,
        name: "WorkerAccountReference",
        level: Severity::Error,
        short: "A serviceAccountRef or serviceAccount mapping names an NVCF worker account",
        full: "Whatever reads such a reference (a chart, an operator, a secret store) would act as the worker.",
        help: "Reference another ServiceAccount.",
    },
    Rule {
        id: guard::ICMS_AUDIENCE,
        name: "IcmsAudienceForNonWorker",
        level: Severity::Warning,
        short: "An nvcf-icms: token is projected for an account that is not a worker",
        full: "ICMS accepts tokens only from worker identities the agent registered; a token with its audience for another account is either a mistake or an attempt.",
        help: "Drop the volume, or give the workload its worker identity with `kubectl nvcf-worker inject`.",
    },
    Rule {
        id: guard::RENAMED,
        name: "WorkerIdentityRenamed",
        level: Severity::Error,
        short: "A worker identity was renamed after the transformer ran",
        full: "A namePrefix or nameSuffix in a later kustomization renames the identity and its workload; ICMS does not accept a worker under the new name.",
        help: "Run the transformer in the overlay that sets the final names.",
    },
    Rule {
        id: guard::IDENTITY_COLLISION,
        name: "WorkerIdentityCollision",
        level: Severity::Error,
        short: "Two workloads' identities share one name in one namespace",
        full: "One ServiceAccount cannot be the identity of two workloads; names that differ only in kind, or a long name's shortened form, can derive the same identity.",
        help: "Rename one workload.",
    },
    Rule {
        id: guard::MINT_FOR_WORKER,
        name: "TokenForWorkerAccount",
        level: Severity::Error,
        short: "A rule mints tokens for, or impersonates, a named worker account",
        full: "create on serviceaccounts/token or impersonate with resourceNames naming a worker account lets the holder obtain that worker's token without being the worker.",
        help: "Drop the rule, or name accounts that are not worker identities.",
    },
];

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
fn column(text: &str, field: Option<&str>) -> u32 {
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
    let rules: Vec<Value> = RULES
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "name": r.name,
                "shortDescription": {"text": r.short},
                "fullDescription": {"text": r.full},
                "help": {"text": r.help, "markdown": r.help},
                "helpUri": format!("{INFORMATION_URI}#the-guard"),
                "defaultConfiguration": {"level": level(r.level)},
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
                if let Some(i) = RULES.iter().position(|r| r.id == rule) {
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
    fn every_guard_rule_has_an_entry() {
        let ids: Vec<&str> = RULES.iter().map(|r| r.id).collect();
        assert_eq!(
            ids,
            [
                "NVW001", "NVW101", "NVW102", "NVW103", "NVW104", "NVW105", "NVW106", "NVW107",
                "NVW108", "NVW109", "NVW110", "NVW111", "NVW112", "NVW113", "NVW114"
            ]
        );
    }
}
