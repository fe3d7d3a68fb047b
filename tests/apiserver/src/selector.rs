//! Label and field selectors with the apiserver's grammar and per-type field
//! support, so a client's selector bugs surface here as they would for real.

use serde_json::{Map, Value};

use crate::resources::ResourceType;

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
    Gt(i64),
    Lt(i64),
}

/// A parsed `labelSelector`: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<(String, Op)>);

fn valid_label_key(key: &str) -> bool {
    let (prefix, name) = key.rsplit_once('/').unwrap_or(("", key));
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let prefix_ok = key.rsplit_once('/').is_none()
        || (!prefix.is_empty()
            && prefix.len() <= 253
            && prefix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.".contains(c)));
    name_ok && prefix_ok
}

fn valid_label_value(value: &str) -> bool {
    value.is_empty()
        || (value.len() <= 63
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric()))
}

/// Splits on commas outside parentheses: `a in (x,y),b` has two terms.
fn split_terms(s: &str) -> Vec<&str> {
    let (mut terms, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&s[start..]);
    terms
}

fn parse_requirement(term: &str) -> Result<(String, Op), String> {
    let bad = |why: &str| format!("unable to parse requirement: {why}: {term:?}");
    if let Some(key) = term.strip_prefix('!') {
        return Ok((key.trim().to_string(), Op::NotExists));
    }
    if let Some((head, rest)) = term.split_once('(') {
        let values = rest.strip_suffix(')').ok_or_else(|| bad("missing ')'"))?;
        let (key, op) = head
            .trim()
            .rsplit_once(char::is_whitespace)
            .ok_or_else(|| bad("expected 'in' or 'notin'"))?;
        let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
        if let Some(v) = values.iter().find(|v| !valid_label_value(v)) {
            return Err(bad(&format!("invalid label value {v:?}")));
        }
        let op = match op.trim() {
            "in" => Op::In(values),
            "notin" => Op::NotIn(values),
            other => return Err(bad(&format!("unknown operator {other:?}"))),
        };
        return Ok((key.trim().to_string(), op));
    }
    for (token, make) in [
        ("!=", Op::NotEq as fn(String) -> Op),
        ("==", Op::Eq),
        ("=", Op::Eq),
    ] {
        if let Some((key, value)) = term.split_once(token) {
            let value = value.trim();
            if !valid_label_value(value) {
                return Err(bad(&format!("invalid label value {value:?}")));
            }
            return Ok((key.trim().to_string(), make(value.to_string())));
        }
    }
    for (token, gt) in [(">", true), ("<", false)] {
        if let Some((key, value)) = term.split_once(token) {
            let n: i64 = value
                .trim()
                .parse()
                .map_err(|_| bad("value must be an integer"))?;
            return Ok((
                key.trim().to_string(),
                if gt { Op::Gt(n) } else { Op::Lt(n) },
            ));
        }
    }
    Ok((term.to_string(), Op::Exists))
}

impl LabelSelector {
    /// Parses `=`, `==`, `!=`, `in`, `notin`, `key`, `!key`, `>` and `<`
    /// requirements separated by commas.
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.trim().is_empty() {
            return Ok(Self::default());
        }
        let mut reqs = Vec::new();
        for term in split_terms(s) {
            let term = term.trim();
            let (key, op) = parse_requirement(term)?;
            if !valid_label_key(&key) {
                return Err(format!(
                    "unable to parse requirement: invalid label key {key:?}"
                ));
            }
            reqs.push((key, op));
        }
        Ok(Self(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.0.iter().all(|(key, op)| {
            let value = labels.and_then(|l| l.get(key)).and_then(Value::as_str);
            match op {
                Op::Eq(v) => value == Some(v.as_str()),
                Op::NotEq(v) => value != Some(v.as_str()),
                Op::In(vs) => value.is_some_and(|x| vs.iter().any(|v| v == x)),
                Op::NotIn(vs) => value.is_none_or(|x| vs.iter().all(|v| v != x)),
                Op::Exists => value.is_some(),
                Op::NotExists => value.is_none(),
                Op::Gt(n) => value
                    .and_then(|x| x.parse::<i64>().ok())
                    .is_some_and(|x| x > *n),
                Op::Lt(n) => value
                    .and_then(|x| x.parse::<i64>().ok())
                    .is_some_and(|x| x < *n),
            }
        })
    }

    /// Matches an object's `metadata.labels`.
    pub fn matches_object(&self, obj: &Value) -> bool {
        self.matches(obj.pointer("/metadata/labels").and_then(Value::as_object))
    }
}

/// Fields a type can be selected on beyond `metadata.name` and
/// `metadata.namespace`, as registered by the real server.
fn extra_fields(rt: &ResourceType) -> &'static [&'static str] {
    match (rt.group, rt.kind) {
        ("", "Pod") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "Secret") => &["type"],
        ("", "Namespace") => &["status.phase"],
        ("apps", "ReplicaSet") => &["status.replicas"],
        ("batch", "Job") => &["status.successful"],
        _ => &[],
    }
}

/// A parsed `fieldSelector`: conjunction of `field=value` / `field!=value`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    pub fn parse(s: &str, rt: &ResourceType) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                ));
            };
            let field = field.trim();
            if !matches!(field, "metadata.name" | "metadata.namespace")
                && !extra_fields(rt).contains(&field)
            {
                return Err(format!("field label not supported: {field}"));
            }
            reqs.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(Self(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Unset fields compare as the empty string, as on the real server
    /// (so `spec.nodeName=` selects unscheduled pods); booleans and numbers
    /// compare by their JSON text, defaulting like the typed fields do.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(field, equal, want)| {
            let pointer = format!("/{}", field.replace('.', "/"));
            let have = match obj.pointer(&pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => match field.as_str() {
                    "spec.hostNetwork" => "false".into(),
                    "status.replicas" | "status.successful" => "0".into(),
                    _ => String::new(),
                },
                Some(other) => other.to_string(),
            };
            (have == *want) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn label_operators() {
        let l = labels(json!({"env": "prod", "tier": "web", "n": "5"}));
        let yes = [
            "env=prod",
            "env==prod",
            "env!=dev",
            "env in (prod, dev)",
            "env notin (dev)",
            "tier",
            "!missing",
            "env=prod,tier=web",
            "n>4",
            "n<6",
            "missing!=x",
            "missing notin (x)",
        ];
        for s in yes {
            assert!(LabelSelector::parse(s).unwrap().matches(Some(&l)), "{s}");
        }
        let no = [
            "env=dev",
            "env in (dev)",
            "!env",
            "missing",
            "env=prod,tier=db",
            "n>5",
        ];
        for s in no {
            assert!(!LabelSelector::parse(s).unwrap().matches(Some(&l)), "{s}");
        }
        assert!(LabelSelector::parse("").unwrap().matches(None));
    }

    #[test]
    fn label_parse_errors() {
        for s in ["a=b=c", "env in (a", "env of (a)", "=x", "a b"] {
            assert!(LabelSelector::parse(s).is_err(), "{s}");
        }
    }

    #[test]
    fn field_support_depends_on_type() {
        let pods = crate::resources::find("v1", "pods").unwrap();
        let sa = crate::resources::find("v1", "sa").unwrap();
        assert!(FieldSelector::parse("status.phase=Running", pods).is_ok());
        assert_eq!(
            FieldSelector::parse("status.phase=Running", sa).unwrap_err(),
            "field label not supported: status.phase"
        );
        let pod = json!({"metadata": {"name": "p"}, "status": {"phase": "Running"}});
        let sel =
            FieldSelector::parse("metadata.name=p,status.phase!=Pending,spec.nodeName=", pods)
                .unwrap();
        assert!(sel.matches(&pod));
    }
}
