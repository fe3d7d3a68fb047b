//! How client-go prints a node's values: maps and lists as Go's encoding/json
//! writes them (keys sorted, `<`, `>`, `&` escaped), everything else as Go's
//! fmt.Fprint does, values separated by one space.

use serde_json::Value;

use super::V;

/// PrintResults: one node's values into `out`.
pub fn results(values: &[V], out: &mut String) -> Result<(), String> {
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&text(v));
    }
    Ok(())
}

/// One value as kubectl prints it.
pub fn text(v: &V) -> String {
    match v {
        V::Invalid => "<no value>".into(),
        V::Json(Value::Null) => "null".into(),
        V::Json(Value::Bool(b)) | V::Bool(b) => b.to_string(),
        V::Json(Value::Number(n)) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => go_float(n.as_f64().unwrap_or_default()),
        },
        V::Json(Value::String(s)) | V::Str(s) => s.clone(),
        V::Json(v @ (Value::Array(_) | Value::Object(_))) => {
            let mut s = String::new();
            go_json(v, &mut s);
            s
        }
        V::Int(i) => i.to_string(),
        V::Float(f) => go_float(*f),
        V::Byte(b) => b.to_string(),
    }
}

/// fmt's `%v` of a float64: strconv's shortest `%g`, an exponent from 1e6 up
/// or below 1e-4, written `e+06`/`e-05`.
pub fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("integer exponent");
    if (-4..6).contains(&exp) {
        return format!("{f}");
    }
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

/// encoding/json's float64: fixed notation from 1e-6 to 1e21, else `1e+21`, `1e-7`.
fn json_float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let sci = format!("{f:e}");
        let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
        let sign = if exp.starts_with('-') { "" } else { "+" };
        return format!("{mantissa}e{sign}{exp}");
    }
    format!("{f}")
}

/// Go's json.Marshal of a decoded document.
pub fn go_json(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(&b.to_string()),
        Value::Number(n) => match n.as_i64() {
            Some(i) => out.push_str(&i.to_string()),
            None => out.push_str(&json_float(n.as_f64().unwrap_or_default())),
        },
        Value::String(s) => go_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json(item, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_string(k, out);
                out.push(':');
                go_json(&m[k], out);
            }
            out.push('}');
        }
    }
}

fn go_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Go's fmt.Sprint of a value, as custom-columns prints each: maps as
/// `map[k:v]` with sorted keys, lists as `[a b]`, null as `<nil>`.
pub fn go_sprint(v: &V) -> String {
    match v {
        V::Json(j) => sprint_json(j),
        other => text(other),
    }
}

fn sprint_json(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(sprint_json).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let pairs: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", sprint_json(&m[k])))
                .collect();
            format!("map[{}]", pairs.join(" "))
        }
        other => text(&V::Json(other)),
    }
}
