//! Label selectors: kubectl's string form (`a=b,c in (x,y),!d`) and the typed
//! `matchLabels`/`matchExpressions` form, matched against a label map.

use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// All requirements must hold; an empty selector matches everything.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Selector(pub Vec<Requirement>);

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

impl Selector {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| r.matches(labels))
    }

    /// Parses kubectl's selector syntax.
    pub fn parse(s: &str) -> Result<Selector, String> {
        let mut reqs = Vec::new();
        for term in split_terms(s)? {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            reqs.push(parse_term(term)?);
        }
        Ok(Selector(reqs))
    }

    /// `matchLabels` and `matchExpressions` as JSON (the typed config's form).
    pub fn from_json(v: &serde_json::Value) -> Result<Selector, String> {
        let obj = v.as_object().ok_or("selector must be a mapping")?;
        let mut reqs = Vec::new();
        for (key, val) in obj {
            match key.as_str() {
                "matchLabels" => {
                    for (k, v) in val
                        .as_object()
                        .ok_or("selector.matchLabels must be a mapping")?
                    {
                        let v = v
                            .as_str()
                            .ok_or_else(|| format!("selector.matchLabels.{k} must be a string"))?;
                        reqs.push(Requirement::Equals(k.clone(), v.to_string()));
                    }
                }
                "matchExpressions" => {
                    for (i, e) in val
                        .as_array()
                        .ok_or("selector.matchExpressions must be a list")?
                        .iter()
                        .enumerate()
                    {
                        reqs.push(expression(i, e)?);
                    }
                }
                other => {
                    return Err(format!(
                        "unknown key selector.{other} (expected matchLabels or matchExpressions)"
                    ))
                }
            }
        }
        Ok(Selector(reqs))
    }
}

fn expression(i: usize, e: &serde_json::Value) -> Result<Requirement, String> {
    let at = format!("selector.matchExpressions[{i}]");
    let obj = e
        .as_object()
        .ok_or_else(|| format!("{at} must be a mapping"))?;
    if let Some(k) = obj
        .keys()
        .find(|k| !["key", "operator", "values"].contains(&k.as_str()))
    {
        return Err(format!("unknown key {at}.{k}"));
    }
    let key = obj
        .get("key")
        .and_then(|k| k.as_str())
        .ok_or_else(|| format!("{at}.key is required"))?
        .to_string();
    let values: Vec<String> = match obj.get("values") {
        None => vec![],
        Some(v) => v
            .as_array()
            .ok_or_else(|| format!("{at}.values must be a list"))?
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("{at}.values must be strings"))
            })
            .collect::<Result<_, _>>()?,
    };
    let op = obj
        .get("operator")
        .and_then(|o| o.as_str())
        .ok_or_else(|| format!("{at}.operator is required"))?;
    let need_values = |r: Requirement| {
        if values.is_empty() {
            Err(format!("{at}: operator {op} needs values"))
        } else {
            Ok(r)
        }
    };
    let no_values = |r: Requirement| {
        if values.is_empty() {
            Ok(r)
        } else {
            Err(format!("{at}: operator {op} takes no values"))
        }
    };
    match op {
        "In" => need_values(Requirement::In(key, values.clone())),
        "NotIn" => need_values(Requirement::NotIn(key, values.clone())),
        "Exists" => no_values(Requirement::Exists(key)),
        "DoesNotExist" => no_values(Requirement::DoesNotExist(key)),
        other => Err(format!(
            "{at}.operator {other:?} is not In, NotIn, Exists or DoesNotExist"
        )),
    }
}

/// Splits on commas outside parentheses.
fn split_terms(s: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(format!("unbalanced ')' in selector {s:?}"));
                }
            }
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced '(' in selector {s:?}"));
    }
    out.push(&s[start..]);
    Ok(out)
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

fn valid_value(v: &str) -> bool {
    v.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

fn parse_term(t: &str) -> Result<Requirement, String> {
    let bad = |why: &str| Err(format!("invalid selector term {t:?}: {why}"));
    if let Some(k) = t.strip_prefix('!') {
        let k = k.trim();
        return if valid_key(k) {
            Ok(Requirement::DoesNotExist(k.into()))
        } else {
            bad("bad key")
        };
    }
    for (op, neg) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((k, v)) = t.split_once(op) {
            let (k, v) = (k.trim(), v.trim());
            if !valid_key(k) || !valid_value(v) {
                return bad("bad key or value");
            }
            return Ok(if neg {
                Requirement::NotEquals(k.into(), v.into())
            } else {
                Requirement::Equals(k.into(), v.into())
            });
        }
    }
    let words: Vec<&str> = t.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let (k, rest) = (words[0], words[1].trim());
        let (neg, list) = if let Some(r) = rest.strip_prefix("notin") {
            (true, r)
        } else if let Some(r) = rest.strip_prefix("in") {
            (false, r)
        } else {
            return bad("expected =, ==, !=, in or notin");
        };
        let list = list.trim();
        let Some(inner) = list.strip_prefix('(').and_then(|l| l.strip_suffix(')')) else {
            return bad("values must be in parentheses");
        };
        let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
        if !valid_key(k) || values.iter().any(|v| v.is_empty() || !valid_value(v)) {
            return bad("bad key or value");
        }
        return Ok(if neg {
            Requirement::NotIn(k.into(), values)
        } else {
            Requirement::In(k.into(), values)
        });
    }
    if valid_key(t) {
        Ok(Requirement::Exists(t.into()))
    } else {
        bad("bad key")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn kubectl_syntax() {
        let s = Selector::parse("a=b, c in (x, y),!d,e!=f,g,h notin (z)").unwrap();
        assert_eq!(s.0.len(), 6);
        assert!(s.matches(&labels(&[("a", "b"), ("c", "y"), ("g", "1")])));
        assert!(!s.matches(&labels(&[("a", "b"), ("c", "y"), ("g", "1"), ("d", "")])));
        assert!(!s.matches(&labels(&[("a", "b"), ("c", "q"), ("g", "1")])));
        assert!(!s.matches(&labels(&[("a", "b"), ("c", "x"), ("g", "1"), ("h", "z")])));
        assert!(!s.matches(&labels(&[("a", "b"), ("c", "x"), ("g", "1"), ("e", "f")])));
        for bad in ["a=b=c d", "c in x", "(", "a in ()", "a b c", "k=v v"] {
            assert!(Selector::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn typed_form() {
        let s = Selector::from_json(&serde_json::json!({
            "matchLabels": {"team": "ml"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}, {"key": "off", "operator": "DoesNotExist"}]
        }))
        .unwrap();
        assert!(s.matches(&labels(&[("team", "ml"), ("tier", "gpu")])));
        assert!(!s.matches(&labels(&[("team", "ml"), ("tier", "gpu"), ("off", "1")])));
        assert!(Selector::from_json(&serde_json::json!({"matchLabel": {}}))
            .unwrap_err()
            .contains("matchLabel"));
        assert!(Selector::from_json(&serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]})).is_err());
    }
}
