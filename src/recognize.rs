//! The one recognizer of the transformer's own output in a pod spec, and of the
//! record (`nvcf.io/replaced`) it leaves for `uninject`.
//!
//! A worker pod spec's whole token surface is judged here: its accounts, automount,
//! the contract's token volume, every other `serviceAccountToken` projection,
//! ephemeral containers, and the token mount and env of every container and init
//! container. Each check is one `Check` with two renderings side by side: Rust over
//! a parsed manifest (the guard, inject, uninject and prune, audit) and CEL over an
//! admission request (the policy). The differential test holds them together.

use std::collections::BTreeMap;

use crate::identity;
use crate::manifest::{to_json, Node};
use crate::rules;
use crate::workload::{self, TokenWant};

/// What the transformer's output may look like in the caller's eyes.
pub struct Surface<'a> {
    /// What the token volume must be.
    pub token: TokenWant<'a>,
    /// Containers `nvcf.io/skip-containers` leaves without the token.
    pub skip: &'a [&'a str],
    /// Any container may be left without the token (uninject: an earlier config
    /// may have skipped it), not only skipped ones and init containers.
    pub any_untouched: bool,
}

/// Something in a pod spec that is not the transformer's output, with the rule
/// that refuses it where the spec runs as a worker account.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub rule: &'static str,
    /// Relative to the pod spec: `volumes[1]`, `containers[0]`.
    pub field: String,
    pub line: u32,
    pub message: String,
}

/// The checks of a worker pod spec, in the order they are reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// `serviceAccountName` and `serviceAccount`, where set, are the identity.
    Accounts,
    /// `automountServiceAccountToken: false`: no legacy API token.
    Automount,
    /// Exactly one volume `nvcf-worker-token`, the contract's projected token.
    TokenVolume,
    /// No other volume projects a service account token (NVW115).
    NoOtherToken,
    /// No ephemeral container (NVW117).
    NoEphemeral,
    /// Every container carries exactly the mount and env, or (init, skipped)
    /// nothing of them.
    Containers,
}

pub const CHECKS: [Check; 6] = [
    Check::Accounts,
    Check::Automount,
    Check::TokenVolume,
    Check::NoOtherToken,
    Check::NoEphemeral,
    Check::Containers,
];

impl Check {
    /// The rule that refuses a worker pod spec failing this check.
    pub fn rule(self) -> &'static str {
        match self {
            Check::NoOtherToken => rules::EXTRA_TOKEN,
            Check::NoEphemeral => rules::EPHEMERAL_CONTAINER,
            _ => rules::POD_SPEC_ACCOUNT,
        }
    }

    /// Whether the check is part of NVW101's exemption, rather than a rule of its
    /// own that holds for every worker pod spec, exempt or not.
    pub fn exempts(self) -> bool {
        self.rule() == rules::POD_SPEC_ACCOUNT
    }

    /// The Rust rendering: why `spec` fails the check.
    pub fn problem(self, spec: &Node, account: &str, s: &Surface) -> Option<Problem> {
        let p = |field: String, line: u32, message: String| {
            Some(Problem {
                rule: self.rule(),
                field,
                line,
                message,
            })
        };
        match self {
            Check::Accounts => {
                for key in ["serviceAccountName", "serviceAccount"] {
                    if let Some(v) = spec.get(key).filter(|v| !v.is_null()) {
                        if v.as_str() != Some(account) {
                            return p(key.into(), v.line, format!("{key} is not {account:?}"));
                        }
                    }
                }
                None
            }
            Check::Automount => {
                let v = spec.get("automountServiceAccountToken");
                (v.map(to_json) != Some(serde_json::Value::Bool(false)))
                    .then(|| Problem {
                        rule: self.rule(),
                        field: "automountServiceAccountToken".into(),
                        line: v.map_or(spec.line, |v| v.line),
                        message: "automountServiceAccountToken is not false".into(),
                    })
            }
            Check::TokenVolume => {
                let volumes = spec.get("volumes").and_then(Node::items).unwrap_or(&[]);
                let ours: Vec<(usize, &Node)> = volumes
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| v.str_at(&["name"]) == Some(identity::TOKEN_VOLUME))
                    .collect();
                match ours.as_slice() {
                    [(_, v)] if workload::is_token_volume(v, &s.token) => None,
                    [(i, v)] => p(
                        format!("volumes[{i}]"),
                        v.line,
                        format!(
                            "volume {:?} is not the contract's projected token (audience nvcf-icms:<cluster>, expirationSeconds {}..{}, path token)",
                            identity::TOKEN_VOLUME,
                            identity::MIN_EXPIRATION_SECONDS,
                            identity::MAX_EXPIRATION_SECONDS
                        ),
                    ),
                    [] => p(
                        "volumes".into(),
                        spec.line,
                        format!("it has no volume {:?}", identity::TOKEN_VOLUME),
                    ),
                    [_, (i, v), ..] => p(
                        format!("volumes[{i}]"),
                        v.line,
                        format!("volume {:?} is declared more than once", identity::TOKEN_VOLUME),
                    ),
                }
            }
            Check::NoOtherToken => other_token(spec).map(|(field, line, audience)| Problem {
                rule: self.rule(),
                field,
                line,
                message: format!(
                    "a second service account token (audience {audience:?}) is projected for the worker account beside the contract's {:?}: a worker holds only the contract's token; remove it",
                    identity::TOKEN_VOLUME
                ),
            }),
            Check::NoEphemeral => {
                let e = spec.get("ephemeralContainers")?;
                if e.items().is_some_and(<[_]>::is_empty) || e.is_null() {
                    return None;
                }
                p(
                    "ephemeralContainers".into(),
                    e.line,
                    "an ephemeral container in a worker pod can read the worker's token; debug a copy of the pod under another account".into(),
                )
            }
            Check::Containers => {
                for list in ["containers", "initContainers"] {
                    for (i, c) in spec.get(list).and_then(Node::items).unwrap_or(&[]).iter().enumerate() {
                        let name = c.str_at(&["name"]).unwrap_or("");
                        let check = workload::check_container(c);
                        let optional =
                            s.any_untouched || list == "initContainers" || s.skip.contains(&name);
                        if check.exact() || optional && untouched(&check) {
                            continue;
                        }
                        let (field, line, message) = match check.problems.first() {
                            Some(pr) => (
                                format!("{list}[{i}].{}", pr.field),
                                pr.line,
                                format!("{list} {name:?}: {}", pr.message),
                            ),
                            None => (
                                format!("{list}[{i}]"),
                                c.line,
                                format!("{list} {name:?} lacks the token mount or env"),
                            ),
                        };
                        return p(field, line, message);
                    }
                }
                None
            }
        }
    }

    /// The CEL rendering: `s` is a pod spec, `o` the object (for its annotations).
    /// True when the spec passes.
    pub fn cel(self, o: &str, s: &str) -> String {
        use cel::*;
        match self {
            Check::Accounts => format!(
                "{accts}.all(a, a == '' || (size({prefix} + {o}.metadata.name) <= {max} && a == {prefix} + {o}.metadata.name) || a == {name}) && {accts}.exists(a, a != '')",
                accts = accounts(s),
                prefix = lit(identity::PREFIX),
                max = identity::MAX_NAME_LEN,
                name = lit(identity::WORKER_NAME)
            ),
            Check::Automount => format!(
                "has({s}.automountServiceAccountToken) && {s}.automountServiceAccountToken == false"
            ),
            Check::TokenVolume => format!(
                "has({s}.volumes) && {s}.volumes.filter(v, v.name == {tv}).size() == 1 && {s}.volumes.exists(v, v.name == {tv} && {vol})",
                tv = lit(identity::TOKEN_VOLUME),
                vol = token_volume("v")
            ),
            Check::NoOtherToken => format!(
                "!has({s}.volumes) || !{s}.volumes.exists(v, v.name != {tv} && has(v.projected) && has(v.projected.sources) && v.projected.sources.exists(x, has(x.serviceAccountToken)) \
                 && !(v.name.startsWith({api}) && !({automount_off})))",
                tv = lit(identity::TOKEN_VOLUME),
                api = lit(API_ACCESS_PREFIX),
                automount_off = Check::Automount.cel(o, s)
            ),
            Check::NoEphemeral => format!(
                "!has({s}.ephemeralContainers) || size({s}.ephemeralContainers) == 0"
            ),
            Check::Containers => {
                let skip = format!(
                    "{}.split(',').map(x, x.trim())",
                    annotation(&format!("{o}.metadata"), identity::SKIP_CONTAINERS_ANNOTATION)
                );
                format!(
                    "{s}.containers.all(c, {exact} || c.name in {skip} && {untouched}) \
                     && (!has({s}.initContainers) || {s}.initContainers.all(c, {exact} || {untouched}))",
                    exact = container_exact("c"),
                    untouched = container_untouched("c"),
                )
            }
        }
    }
}

/// Nothing of the contract in a container: no token mount, no mount that may
/// land in the token directory, none of the contract's env. The record's author
/// env does not count: inject refuses to leave a container it set that env in
/// without the token, so no face needs to read the record to judge a container
/// (CEL cannot parse it).
pub fn untouched(check: &workload::ContainerCheck) -> bool {
    !check.has_mount
        && check.problems.is_empty()
        && check.missing_env.len() == identity::env_vars().len()
}

/// The volume the ServiceAccount admission plugin adds, before any admission
/// policy runs, to a pod that does not turn automount off: the API token is
/// then the automount check's (NVW101; live NVW203), not a second token.
pub const API_ACCESS_PREFIX: &str = "kube-api-access-";

/// A service account token projected by a volume other than the contract's:
/// its field, line and audience.
pub fn other_token(spec: &Node) -> Option<(String, u32, String)> {
    let automount_off = spec.get("automountServiceAccountToken").map(to_json)
        == Some(serde_json::Value::Bool(false));
    other_token_with(spec, automount_off)
}

/// `other_token` of the spec once automount is `automount_off` (inject turns
/// it off: an API token volume the author wrote is then a second token).
pub fn other_token_with(spec: &Node, automount_off: bool) -> Option<(String, u32, String)> {
    let volumes = spec.get("volumes").and_then(Node::items).unwrap_or(&[]);
    volumes.iter().enumerate().find_map(|(i, v)| {
        let name = v.str_at(&["name"]).unwrap_or("");
        if name == identity::TOKEN_VOLUME || name.starts_with(API_ACCESS_PREFIX) && !automount_off {
            return None;
        }
        let sources = v.path(&["projected", "sources"]).and_then(Node::items)?;
        sources.iter().enumerate().find_map(|(j, src)| {
            let t = src.get("serviceAccountToken")?;
            Some((
                format!("volumes[{i}].projected.sources[{j}]"),
                src.line,
                t.str_at(&["audience"]).unwrap_or("").to_string(),
            ))
        })
    })
}

/// Every problem of a pod spec that runs as the worker `account`: the first of
/// the exemption's checks (NVW101), and each rule of its own that fails.
pub fn problems(spec: &Node, account: &str, s: &Surface) -> Vec<Problem> {
    let mut out: Vec<Problem> = Vec::new();
    for c in CHECKS {
        if c.exempts() && out.iter().any(|p| p.rule == rules::POD_SPEC_ACCOUNT) {
            continue;
        }
        out.extend(c.problem(spec, account, s));
    }
    out
}

/// The CEL of the checks that make NVW101's exemption.
pub fn cel_exempt(o: &str, s: &str) -> String {
    let parts: Vec<String> = CHECKS
        .iter()
        .filter(|c| c.exempts())
        .map(|c| format!("({})", c.cel(o, s)))
        .collect();
    format!("({})", parts.join(" && "))
}

/// The record inject leaves on a workload of what it replaced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Record {
    /// Pod spec keys (`identity::REPLACED_KEYS`) and their values before inject.
    pub values: serde_json::Map<String, serde_json::Value>,
    /// Per container: the contract env its author had set before inject.
    pub env: BTreeMap<String, Vec<String>>,
}

impl Record {
    pub fn is_empty(&self) -> bool {
        self.values.is_empty() && self.env.is_empty()
    }

    /// The record of a workload's root, judged: only the contract's keys, only
    /// values the guard accepts (never a reserved account, automount a boolean;
    /// null where the key was written unset).
    /// None when there is none.
    pub fn of(root: &Node) -> Result<Option<Record>, String> {
        let Some(v) = root.path(&["metadata", "annotations", identity::REPLACED_ANNOTATION]) else {
            return Ok(None);
        };
        let text = v.as_str().ok_or_else(|| {
            format!(
                "annotation {} is not a string",
                identity::REPLACED_ANNOTATION
            )
        })?;
        Record::parse(text).map(Some)
    }

    pub fn parse(text: &str) -> Result<Record, String> {
        let bad = |why: String| {
            Err(format!(
                "annotation {} {why}: inject writes a JSON object of {} and {:?} (container: [contract env names])",
                identity::REPLACED_ANNOTATION,
                identity::REPLACED_KEYS.join(", "),
                identity::REPLACED_ENV_KEY
            ))
        };
        let Ok(serde_json::Value::Object(m)) = serde_json::from_str::<serde_json::Value>(text)
        else {
            return bad("is not a JSON object".into());
        };
        let mut record = Record::default();
        for (k, v) in m {
            match k.as_str() {
                "serviceAccountName" | "serviceAccount" => match v.as_str() {
                    Some(a) if identity::is_reserved(a.trim()) => {
                        return bad(format!(
                            "would restore {k} {a:?}, a reserved worker account"
                        ))
                    }
                    Some(_) => {}
                    None if v.is_null() => {}
                    None => return bad(format!("has a {k} that is not a string")),
                },
                // null: written unset (`automountServiceAccountToken: null`).
                "automountServiceAccountToken" if v.is_boolean() || v.is_null() => {}
                "automountServiceAccountToken" => {
                    return bad(
                        "has an automountServiceAccountToken that is not true or false".into(),
                    )
                }
                k if k == identity::REPLACED_ENV_KEY => {
                    let names: Vec<&str> = identity::env_vars().iter().map(|(n, _)| *n).collect();
                    let Some(per) = v.as_object() else {
                        return bad(format!("has an {k:?} that is not an object"));
                    };
                    for (c, vars) in per {
                        let vars: Option<Vec<String>> = vars.as_array().and_then(|a| {
                            a.iter()
                                .map(|x| {
                                    x.as_str().filter(|x| names.contains(x)).map(str::to_string)
                                })
                                .collect()
                        });
                        match vars {
                            Some(vars) if !vars.is_empty() => {
                                record.env.insert(c.clone(), vars);
                            }
                            _ => {
                                return bad(format!(
                                "lists for container {c:?} something other than contract env names"
                            ))
                            }
                        }
                    }
                    continue;
                }
                other => return bad(format!("has the key {other:?}")),
            }
            record.values.insert(k, v);
        }
        Ok(record)
    }

    /// The annotation's JSON text.
    pub fn to_json(&self) -> String {
        let mut m = self.values.clone();
        if !self.env.is_empty() {
            m.insert(
                identity::REPLACED_ENV_KEY.into(),
                serde_json::to_value(&self.env).expect("strings serialize"),
            );
        }
        serde_json::to_string(&m).expect("JSON values serialize")
    }
}

/// CEL spellings shared by the recognizer and the policy.
pub mod cel {
    use crate::identity as id;
    use crate::workload::TokenDir;

    /// A CEL string literal.
    pub fn lit(s: &str) -> String {
        format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
    }

    pub fn list(items: &[impl AsRef<str>]) -> String {
        let items: Vec<String> = items.iter().map(|s| lit(s.as_ref())).collect();
        format!("[{}]", items.join(", "))
    }

    /// `x` is a reserved worker account (`identity::is_reserved`).
    pub fn reserved(x: &str) -> String {
        format!(
            "({x} == {} || {x}.startsWith({}))",
            lit(id::WORKER_NAME),
            lit(id::PREFIX)
        )
    }

    pub use crate::workload::regex_escape;

    pub fn annotation(meta: &str, key: &str) -> String {
        format!(
            "(has({meta}.annotations) && {k} in {meta}.annotations ? {meta}.annotations[{k}] : '')",
            k = lit(key)
        )
    }

    pub fn label(meta: &str, key: &str) -> String {
        format!(
            "(has({meta}.labels) && {k} in {meta}.labels ? {meta}.labels[{k}] : '')",
            k = lit(key)
        )
    }

    /// The accounts a pod spec `s` names, `''` for none.
    pub fn accounts(s: &str) -> String {
        format!(
            "[has({s}.serviceAccountName) ? {s}.serviceAccountName : '', has({s}.serviceAccount) ? {s}.serviceAccount : '']"
        )
    }

    /// A mount path that may land at or under the token directory: at or under
    /// it, or with a `..` segment (`workload::TokenDir`, `workload::in_token_dir`).
    pub fn in_token_dir(p: &str) -> String {
        format!(
            "({p}.matches({}) || {p}.matches({}))",
            lit(&TokenDir::at_or_under()),
            lit(TokenDir::DOT_DOT)
        )
    }

    /// `p` is the token directory itself, with no `..` segment
    /// (`workload::TokenDir::reach` is `Reach::Exact`).
    fn token_dir_exact(p: &str) -> String {
        format!(
            "({p}.matches({}) && !{p}.matches({}))",
            lit(&TokenDir::exact()),
            lit(TokenDir::DOT_DOT)
        )
    }

    /// A container `c` carries exactly the contract's token mount and env
    /// (`workload::check_container`).
    pub fn container_exact(c: &str) -> String {
        let tv = lit(id::TOKEN_VOLUME);
        let mut parts = vec![
            format!("has({c}.volumeMounts)"),
            format!("{c}.volumeMounts.filter(m, m.name == {tv}).size() == 1"),
            format!(
                "{c}.volumeMounts.exists(m, m.name == {tv} && {} && has(m.readOnly) && m.readOnly == true && !(has(m.subPath) && m.subPath != '') && !(has(m.subPathExpr) && m.subPathExpr != ''))",
                token_dir_exact("m.mountPath")
            ),
            format!(
                "!{c}.volumeMounts.exists(m, m.name != {tv} && {})",
                in_token_dir("m.mountPath")
            ),
            format!("has({c}.env)"),
        ];
        for (name, value) in id::env_vars() {
            parts.push(format!(
                "{c}.env.filter(e, e.name == {n}).size() == 1 && {c}.env.exists(e, e.name == {n} && has(e.value) && e.value == {v} && !has(e.valueFrom))",
                n = lit(name),
                v = lit(value)
            ));
        }
        format!("({})", parts.join(" && "))
    }

    /// A container `c` carries nothing of the contract.
    pub fn container_untouched(c: &str) -> String {
        let names: Vec<&str> = id::env_vars().iter().map(|(n, _)| *n).collect();
        format!(
            "((!has({c}.volumeMounts) || !{c}.volumeMounts.exists(m, m.name == {tv} || {dir})) && (!has({c}.env) || !{c}.env.exists(e, e.name in {env})))",
            tv = lit(id::TOKEN_VOLUME),
            dir = in_token_dir("m.mountPath"),
            env = list(&names)
        )
    }

    /// The projected token volume of the contract: any `nvcf-icms:<cluster>`
    /// audience, a lifetime the agent accepts, no other fields
    /// (`workload::is_token_volume` with `TokenWant::Contract`).
    pub fn token_volume(v: &str) -> String {
        let t = format!("{v}.projected.sources[0].serviceAccountToken");
        format!(
            "({v}.all(k, k in ['name', 'projected']) && has({v}.projected) && {v}.projected.all(k, k in ['sources', 'defaultMode']) \
             && has({v}.projected.sources) && size({v}.projected.sources) == 1 && {v}.projected.sources[0].all(k, k == 'serviceAccountToken') \
             && has({t}) && {t}.all(k, k in ['audience', 'expirationSeconds', 'path']) \
             && has({t}.audience) && {t}.audience.startsWith('nvcf-icms:') && {t}.audience.substring(10).trim() != '' \
             && has({t}.expirationSeconds) && {t}.expirationSeconds >= {min} && {t}.expirationSeconds <= {max} \
             && {t}.path == {path})",
            min = id::MIN_EXPIRATION_SECONDS,
            max = id::MAX_EXPIRATION_SECONDS,
            path = lit(id::TOKEN_PATH)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_inject_writes_reads_back_and_forged_ones_are_refused() {
        let mut r = Record::default();
        r.values.insert("serviceAccountName".into(), "app".into());
        r.values
            .insert("automountServiceAccountToken".into(), true.into());
        r.env
            .insert("app".into(), vec![identity::ENV_IDENTITY_SOURCE.into()]);
        assert_eq!(Record::parse(&r.to_json()).unwrap(), r);
        for forged in [
            r#"{"serviceAccountName":"nvcf-worker-victim"}"#,
            r#"{"serviceAccount":" nvcf-worker"}"#,
            r#"{"automountServiceAccountToken":"true"}"#,
            r#"{"serviceAccountName":"app","extra":1}"#,
            r#"{"env":{"app":["PATH"]}}"#,
            r#"{"env":{"app":[]}}"#,
            r#"["serviceAccountName"]"#,
            "not json",
        ] {
            assert!(Record::parse(forged).is_err(), "{forged}");
        }
        // Look-alikes of the forgeries pass.
        for fine in [
            r#"{"serviceAccountName":"nvcf-workers"}"#,
            r#"{"automountServiceAccountToken":false}"#,
            r#"{"automountServiceAccountToken":null,"serviceAccountName":null}"#,
            r#"{}"#,
        ] {
            assert!(Record::parse(fine).is_ok(), "{fine}");
        }
    }

    #[test]
    fn exemption_checks_are_nvw101_and_the_others_rules_of_their_own() {
        let own: Vec<&str> = CHECKS
            .iter()
            .filter(|c| !c.exempts())
            .map(|c| c.rule())
            .collect();
        assert_eq!(own, [rules::EXTRA_TOKEN, rules::EPHEMERAL_CONTAINER]);
    }
}
