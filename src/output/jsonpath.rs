//! kubectl's JSONPath templates (k8s.io/client-go/util/jsonpath, as kubectl
//! 1.32 runs them for `-o jsonpath`, `-o custom-columns` and `--sort-by`):
//! the same grammar, the same quirks (a `{range}` that walks the template's
//! later nodes, `..` that yields containers and non-empty strings, strings
//! indexed as bytes by `*`), missing keys allowed as kubectl allows them. Maps
//! are walked in document order where Go's is random. tests/jsonpath_kubectl.rs
//! holds it to real kubectl on generated templates and objects.

mod parse;
mod print;

use serde_json::Value;

pub use parse::{parse, Node, Param};
pub use print::{go_sprint, text};

/// A parsed template, ready to run on any number of documents.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    root: Vec<Node>,
}

impl Template {
    /// kubectl's `-o jsonpath=` form: text with `{…}` actions.
    pub fn parse(text: &str) -> Result<Template, String> {
        parse(text).map(|root| Template { root })
    }

    /// kubectl's relaxed form for custom-columns and `--sort-by`: `.a.b`,
    /// `a.b` or `{.a.b}` all mean one action (RelaxedJSONPathExpression).
    pub fn parse_relaxed(text: &str) -> Result<Template, String> {
        Template::parse(&relaxed(text)?)
    }

    /// The template's output on `data`, as kubectl prints it.
    pub fn render(&self, data: &Value) -> Result<String, String> {
        let mut out = String::new();
        for results in self.results(data)? {
            print::results(&results, &mut out)?;
        }
        Ok(out)
    }

    /// Each top-level node's values (kubectl's FindResults).
    pub fn results<'a>(&self, data: &'a Value) -> Result<Vec<Vec<V<'a>>>, String> {
        let mut state = Range::default();
        find(&self.root, 0, V::Json(data), &mut state)
    }
}

/// kubectl's RelaxedJSONPathExpression (`^\{\.?([^{}]+)\}$|^\.?([^{}]+)$`):
/// the one action of a column or sort key.
pub fn relaxed(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Ok(String::new());
    }
    let field = |t: &str| {
        let t = t.strip_prefix('.').unwrap_or(t);
        (!t.is_empty() && !t.contains(['{', '}'])).then(|| t.to_string())
    };
    let braced = text
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .and_then(field);
    match braced.or_else(|| field(text)) {
        Some(f) => Ok(format!("{{.{f}}}")),
        None => Err(format!(
            "unexpected path string, expected a 'name1.name2' or '.name1.name2' or '{{name1.name2}}' or '{{.name1.name2}}': {text:?}"
        )),
    }
}

/// A value as client-go's reflection sees it: a JSON node, or what a template
/// node makes (text, numbers, booleans), or one byte of an indexed string.
#[derive(Clone, Debug, PartialEq)]
pub enum V<'a> {
    /// `reflect.ValueOf(nil)`: a range's body run over nothing.
    Invalid,
    Json(&'a Value),
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Byte(u8),
}

/// The range state client-go keeps on the JSONPath between nodes.
#[derive(Default)]
struct Range {
    begin: usize,
    inside: usize,
    end: usize,
    last_end: Option<usize>,
}

/// FindResults over `root[start..]`: a `{range}` runs the nodes after it once
/// per value, up to the `{end}` that closes it, then skips to that `{end}`.
fn find<'a>(
    root: &[Node],
    start: usize,
    data: V<'a>,
    st: &mut Range,
) -> Result<Vec<Vec<V<'a>>>, String> {
    let mut full = Vec::new();
    let mut i = start;
    while i < root.len() {
        let results = walk(vec![data.clone()], &root[i], st)?;
        if st.end > 0 && st.end <= st.inside {
            st.end -= 1;
            st.last_end = Some(i);
            break;
        }
        if st.begin > 0 {
            st.begin -= 1;
            st.inside += 1;
            if results.is_empty() {
                find(root, i + 1, V::Invalid, st)?;
            }
            for value in results {
                // The body runs on `value.Interface()`: a JSON null is no value.
                let value = match value {
                    V::Json(Value::Null) => V::Invalid,
                    v => v,
                };
                full.extend(find(root, i + 1, value, st)?);
            }
            st.inside -= 1;
            if let Some(k) = (i + 1..root.len()).find(|k| Some(*k) == st.last_end) {
                i = k;
            }
            i += 1;
            continue;
        }
        full.push(results);
        i += 1;
    }
    Ok(full)
}

/// `v` through Go's Indirect: None for a JSON null (a nil interface).
fn indirect<'a, 'b>(v: &'b V<'a>) -> Option<&'b V<'a>> {
    match v {
        V::Json(Value::Null) => None,
        v => Some(v),
    }
}

/// The elements `*` and `..` step into: a map's values, a list's items, a string's bytes.
fn children<'a>(v: &V<'a>) -> Vec<V<'a>> {
    match v {
        V::Json(Value::Object(m)) => m.values().map(V::Json).collect(),
        V::Json(Value::Array(a)) => a.iter().map(V::Json).collect(),
        V::Json(Value::String(s)) => s.bytes().map(V::Byte).collect(),
        V::Str(s) => s.bytes().map(V::Byte).collect(),
        _ => Vec::new(),
    }
}

fn walk<'a>(input: Vec<V<'a>>, node: &Node, st: &mut Range) -> Result<Vec<V<'a>>, String> {
    Ok(match node {
        Node::List(nodes) => {
            let mut cur = input;
            for n in nodes {
                cur = walk(cur, n, st)?;
            }
            cur
        }
        Node::Text(t) => vec![V::Str(t.clone())],
        Node::Field(name) => input
            .iter()
            .filter_map(|v| match indirect(v) {
                Some(V::Json(Value::Object(m))) => m.get(name).map(V::Json),
                _ => None,
            })
            .collect(),
        Node::Array(params) => array(input, params)?,
        Node::Filter { left, right, op } => filter(input, left, right, op, st)?,
        Node::Int(n) => input.iter().map(|_| V::Int(*n)).collect(),
        Node::Float(f) => input.iter().map(|_| V::Float(*f)).collect(),
        Node::Bool(b) => input.iter().map(|_| V::Bool(*b)).collect(),
        Node::Wildcard => input
            .iter()
            .filter_map(indirect)
            .flat_map(children)
            .collect(),
        Node::Recursive => {
            let mut out = Vec::new();
            recursive(&input, &mut out);
            out
        }
        Node::Union(lists) => {
            let mut out = Vec::new();
            for l in lists {
                out.extend(walk(input.clone(), &Node::List(l.clone()), st)?);
            }
            out
        }
        Node::Identifier(name) => match name.as_str() {
            "range" => {
                st.begin += 1;
                input
            }
            "end" if st.inside > 0 => {
                st.end += 1;
                Vec::new()
            }
            "end" => return Err("not in range, nothing to end".into()),
            other => return Err(format!("unrecognized identifier {other}")),
        },
    })
}

fn recursive<'a>(input: &[V<'a>], out: &mut Vec<V<'a>>) {
    for v in input.iter().filter_map(indirect) {
        let kids = children(v);
        if !kids.is_empty() {
            out.push(v.clone());
            recursive(&kids, out);
        }
    }
}

fn type_name(v: &V) -> &'static str {
    match v {
        V::Invalid => "<invalid reflect.Value>",
        V::Json(Value::Null) => "<nil>",
        V::Json(Value::Bool(_)) | V::Bool(_) => "bool",
        V::Json(Value::Number(n)) if n.is_f64() => "float64",
        V::Json(Value::Number(_)) | V::Int(_) => "int64",
        V::Json(Value::String(_)) | V::Str(_) => "string",
        V::Json(Value::Array(_)) => "[]interface {}",
        V::Json(Value::Object(_)) => "map[string]interface {}",
        V::Float(_) => "float64",
        V::Byte(_) => "uint8",
    }
}

/// `[n]`, `[a:b]`, `[a:b:step]`, `[*]`: client-go's bounds and their errors.
fn array<'a>(input: Vec<V<'a>>, params: &[Param; 3]) -> Result<Vec<V<'a>>, String> {
    let mut out = Vec::new();
    for v in &input {
        let Some(v) = indirect(v) else { continue };
        let V::Json(Value::Array(items)) = v else {
            return Err(format!("{} is not array or slice", type_name(v)));
        };
        let len = items.len() as i64;
        let mut p = *params;
        if !p[0].known {
            p[0].value = 0;
        }
        if p[0].value < 0 {
            p[0].value = p[0].value.wrapping_add(len);
        }
        if !p[1].known {
            p[1].value = len;
        }
        if p[1].value < 0 || (p[1].value == 0 && p[1].derived) {
            p[1].value = p[1].value.wrapping_add(len);
        }
        if p[1].value == p[0].value {
            return Ok(out);
        }
        if p[0].value >= len || p[0].value < 0 {
            return Err(format!(
                "array index out of bounds: index {}, length {len}",
                p[0].value
            ));
        }
        if p[1].value > len || p[1].value < 0 {
            return Err(format!(
                "array index out of bounds: index {}, length {len}",
                p[1].value - 1
            ));
        }
        if p[0].value > p[1].value {
            return Err(format!(
                "starting index {} is greater than ending index {}",
                p[0].value, p[1].value
            ));
        }
        let step = match p[2] {
            Param {
                known: true, value, ..
            } if value <= 0 => return Err("step must be > 0".into()),
            Param {
                known: true, value, ..
            } => value as usize,
            _ => 1,
        };
        let slice = &items[p[0].value as usize..p[1].value as usize];
        out.extend(slice.iter().step_by(step).map(V::Json));
    }
    Ok(out)
}

/// `[?(@.x OP y)]` and `[?(@.x)]`: each element kept when the comparison holds.
fn filter<'a>(
    input: Vec<V<'a>>,
    left: &[Node],
    right: &[Node],
    op: &str,
    st: &mut Range,
) -> Result<Vec<V<'a>>, String> {
    let mut out = Vec::new();
    for v in &input {
        let V::Json(Value::Array(items)) = v else {
            return Err(format!(
                "{} is not array or slice and cannot be filtered",
                type_name(v)
            ));
        };
        for item in items {
            let lefts = walk(vec![V::Json(item)], &Node::List(left.to_vec()), st);
            if op == "exists" {
                if lefts.is_ok_and(|l| !l.is_empty()) {
                    out.push(V::Json(item));
                }
                continue;
            }
            let Some(l) = one(lefts?)? else { continue };
            let rights = walk(vec![V::Json(item)], &Node::List(right.to_vec()), st)?;
            let Some(r) = one(rights)? else { continue };
            if compare(&l, &r, op)? {
                out.push(V::Json(item));
            }
        }
    }
    Ok(out)
}

fn one<'a>(mut values: Vec<V<'a>>) -> Result<Option<V<'a>>, String> {
    match values.len() {
        0 => Ok(None),
        1 => Ok(values.pop()),
        _ => Err("can only compare one element at a time".into()),
    }
}

/// Go template's basic kinds, as its comparison functions see them.
#[derive(Clone, Debug, PartialEq, PartialOrd)]
enum Basic {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
}

fn basic(v: &V) -> Result<Basic, String> {
    Ok(match v {
        V::Json(Value::Bool(b)) | V::Bool(b) => Basic::Bool(*b),
        V::Json(Value::Number(n)) => match n.as_i64() {
            Some(i) => Basic::Int(i),
            None => Basic::Float(n.as_f64().unwrap_or_default()),
        },
        V::Json(Value::String(s)) => Basic::Str(s.clone()),
        V::Str(s) => Basic::Str(s.clone()),
        V::Int(i) => Basic::Int(*i),
        V::Float(f) => Basic::Float(*f),
        V::Byte(b) => Basic::Uint(u64::from(*b)),
        _ => return Err("invalid type for comparison".into()),
    })
}

fn less(a: &Basic, b: &Basic) -> Result<bool, String> {
    Ok(match (a, b) {
        (Basic::Int(x), Basic::Uint(y)) => *x < 0 || (*x as u64) < *y,
        (Basic::Uint(x), Basic::Int(y)) => *y >= 0 && *x < *y as u64,
        (Basic::Bool(_), Basic::Bool(_)) => return Err("invalid type for comparison".into()),
        (Basic::Int(x), Basic::Int(y)) => x < y,
        (Basic::Uint(x), Basic::Uint(y)) => x < y,
        (Basic::Float(x), Basic::Float(y)) => x < y,
        (Basic::Str(x), Basic::Str(y)) => x < y,
        _ => return Err("incompatible types for comparison".into()),
    })
}

fn equal(a: &Basic, b: &Basic) -> Result<bool, String> {
    Ok(match (a, b) {
        (Basic::Int(x), Basic::Uint(y)) | (Basic::Uint(y), Basic::Int(x)) => {
            *x >= 0 && *x as u64 == *y
        }
        (Basic::Bool(_), Basic::Bool(_))
        | (Basic::Int(_), Basic::Int(_))
        | (Basic::Uint(_), Basic::Uint(_))
        | (Basic::Float(_), Basic::Float(_))
        | (Basic::Str(_), Basic::Str(_)) => a == b,
        _ => return Err("incompatible types for comparison".into()),
    })
}

/// Go template's Less, Equal and the rest, composed as client-go composes them.
fn compare(l: &V, r: &V, op: &str) -> Result<bool, String> {
    let (a, b) = (basic(l)?, basic(r)?);
    match op {
        "<" => less(&a, &b),
        ">" => Ok(!(less(&a, &b)? || equal(&a, &b)?)),
        "==" => equal(&a, &b),
        "!=" => equal(&a, &b).map(|e| !e),
        "<=" => Ok(less(&a, &b)? || equal(&a, &b)?),
        ">=" => less(&a, &b).map(|l| !l),
        other => Err(format!("unrecognized filter operator {other}")),
    }
}

#[cfg(test)]
mod tests;
