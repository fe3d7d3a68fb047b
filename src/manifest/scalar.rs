//! What a scalar means to Kubernetes, and when a string must be quoted.
//!
//! kubectl and the API server decode YAML through sigs.k8s.io/yaml, a fork of
//! go-yaml v2: YAML 1.1 resolution (`yes`, `on`, `0777` octal, `~`, timestamps).
//! Rust YAML crates resolve with YAML 1.2, so this module is the one place that says
//! what a scalar means, transcribed from go-yaml v2's `resolve`.

use compact_str::CompactString;

/// How a scalar was (or must be) written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    Literal,
    Folded,
}

/// A scalar as written: its text after YAML unescaping, and its style. Most
/// scalars in manifests are short, so the text is stored inline when it fits (no
/// heap allocation per scalar: the tree of a large stream stays small and fast).
#[derive(Clone, Debug, PartialEq)]
pub struct Scalar {
    pub text: CompactString,
    pub style: Style,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Resolved {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    /// A plain date or date-time; sigs.k8s.io/yaml turns it into an RFC 3339 string.
    Timestamp,
    Str,
}

const TAG_PREFIX: &str = "tag:yaml.org,2002:";

/// The meaning of a scalar with its (optional) explicit tag.
pub fn resolve(s: &Scalar, tag: Option<&str>) -> Resolved {
    match tag.map(|t| {
        t.strip_prefix(TAG_PREFIX)
            .or_else(|| t.strip_prefix("!!"))
            .unwrap_or(t)
    }) {
        None => {
            if s.style == Style::Plain {
                resolve_plain(&s.text)
            } else {
                Resolved::Str
            }
        }
        Some("str") | Some("binary") => Resolved::Str,
        Some("null") | Some("bool") | Some("int") | Some("float") | Some("timestamp") => {
            match resolve_plain(&s.text) {
                Resolved::Str => Resolved::Str,
                r => r,
            }
        }
        // go-yaml keeps a scalar with an unknown tag as its text.
        Some(_) => Resolved::Str,
    }
}

/// A mapping key as sigs.k8s.io/yaml turns it into a JSON key: YAML 1.1 resolution
/// first (`on` is the bool true, `0777` the int 511), then the value's string form.
/// Keys written differently may so become equal (`yes` and `'true'`).
pub fn json_key<'a>(s: &'a Scalar, tag: Option<&str>) -> std::borrow::Cow<'a, str> {
    use std::borrow::Cow;
    match resolve(s, tag) {
        Resolved::Bool(b) => Cow::Owned(b.to_string()),
        Resolved::Int(i) => Cow::Owned(i.to_string()),
        Resolved::UInt(u) => Cow::Owned(u.to_string()),
        Resolved::Float(f) => Cow::Owned(go_float_key(f)),
        _ => Cow::Borrowed(s.text.as_str()),
    }
}

/// `strconv.FormatFloat(f, 'g', -1, 32)` with YAML's names for the infinities, as
/// sigs.k8s.io/yaml writes a float key: float32 precision, so `685230.15` becomes
/// `685230.1`, and `1e7` stays `1e+07`.
fn go_float_key(f: f64) -> String {
    if f.is_nan() {
        return ".nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { ".inf" } else { "-.inf" }.into();
    }
    let x = f as f32;
    if x.is_infinite() {
        return if x > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Rust's `{:e}` gives the shortest digits that read back as the same f32.
    let e = format!("{:e}", x.abs());
    let (mantissa, exp) = e.split_once('e').expect("exponent form");
    let exp: i32 = exp.parse().expect("an exponent");
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if x < 0.0 { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() { "" } else { "." };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{dot}{rest}e{esign}{:02}", exp.abs());
    }
    let point = exp + 1; // digits before the decimal point
    let out = if point <= 0 {
        format!("0.{}{digits}", "0".repeat((-point) as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        let (a, b) = digits.split_at(point as usize);
        format!("{a}.{b}")
    };
    format!("{sign}{out}")
}

#[cfg(test)]
mod go_float_tests {
    use super::go_float_key;

    /// Expected strings from Go's strconv.FormatFloat(f, 'g', -1, 32).
    #[test]
    fn float_keys_are_written_as_go_writes_them() {
        for (f, want) in [
            (1000.0, "1000"),
            (1000.5, "1000.5"),
            (685230.15, "685230.1"),
            (1e7, "1e+07"),
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (0.5, "0.5"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5, "-2.5"),
            (1.0, "1"),
            (0.1, "0.1"),
            (f64::INFINITY, ".inf"),
            (f64::NEG_INFINITY, "-.inf"),
            (1e300, "+Inf"),
        ] {
            assert_eq!(go_float_key(f), want, "{f}");
        }
    }
}

/// go-yaml v2's resolution of an untagged plain scalar.
pub fn resolve_plain(text: &str) -> Resolved {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Resolved::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Resolved::Bool(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Resolved::Bool(false)
        }
        ".nan" | ".NaN" | ".NAN" => return Resolved::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Resolved::Float(f64::INFINITY)
        }
        "-.inf" | "-.Inf" | "-.INF" => return Resolved::Float(f64::NEG_INFINITY),
        _ => {}
    }
    let first = text.as_bytes()[0];
    match first {
        b'.' => match text.parse::<f64>() {
            Ok(f) if is_go_float_syntax(text) => Resolved::Float(f),
            _ => Resolved::Str,
        },
        b'0'..=b'9' | b'+' | b'-' => {
            if is_timestamp(text) {
                return Resolved::Timestamp;
            }
            let plain: String = text.chars().filter(|&c| c != '_').collect();
            if let Some(r) = go_parse_int(&plain) {
                return r;
            }
            if is_yaml_style_float(&plain) {
                if let Ok(f) = plain.parse::<f64>() {
                    if f.is_finite() {
                        return Resolved::Float(f);
                    }
                }
            }
            Resolved::Str
        }
        _ => Resolved::Str,
    }
}

/// Go's `strconv.ParseInt(s, 0, 64)` then `ParseUint(s, 0, 64)`: sign, then a
/// `0x`/`0o`/`0b` prefix or a leading `0` for octal.
fn go_parse_int(s: &str) -> Option<Resolved> {
    let (neg, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let (radix, digits) =
        if let Some(d) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
            (16, d)
        } else if let Some(d) = body.strip_prefix("0o").or_else(|| body.strip_prefix("0O")) {
            (8, d)
        } else if let Some(d) = body.strip_prefix("0b").or_else(|| body.strip_prefix("0B")) {
            (2, d)
        } else if body.len() > 1 && body.starts_with('0') {
            (8, &body[1..])
        } else {
            (10, body)
        };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u128::from_str_radix(digits, radix).ok()?;
    if neg {
        if magnitude <= i64::MAX as u128 + 1 {
            return Some(Resolved::Int((-(magnitude as i128)) as i64));
        }
        return None;
    }
    if magnitude <= i64::MAX as u128 {
        Some(Resolved::Int(magnitude as i64))
    } else if magnitude <= u64::MAX as u128 && !s.starts_with('+') {
        Some(Resolved::UInt(magnitude as u64))
    } else {
        None
    }
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`, go-yaml v2.4's float syntax.
fn is_yaml_style_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if i < b.len() && b[i] == b'.' {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            digits(&mut i);
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// Go's ParseFloat on a scalar that starts with '.': only decimal syntax can start so.
fn is_go_float_syntax(s: &str) -> bool {
    is_yaml_style_float(&s.replace('_', "")) && !s.contains('_')
}

/// go-yaml v2's timestamp test: four digits, '-', then a date or date-time.
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 8 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return false;
    }
    // 2006-1-2, then optionally [Tt ]15:4:5(.frac)?(Z|±hh:mm)?
    let rest = &s[5..];
    let (date, time) = match rest.find(['T', 't', ' ']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let mut parts = date.split('-');
    let (Some(m), Some(d), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let small = |p: &str, max: u32| {
        (1..=2).contains(&p.len())
            && p.bytes().all(|c| c.is_ascii_digit())
            && p.parse::<u32>().is_ok_and(|v| (1..=max).contains(&v))
    };
    if !small(m, 12) || !small(d, 31) {
        return false;
    }
    match time {
        None => true,
        Some(t) => {
            let t = t.trim_end_matches('Z');
            let clock = t.split(['+', '-']).next().unwrap_or("");
            let clock = clock.split('.').next().unwrap_or("");
            let mut hms = clock.split(':');
            let ok = |p: Option<&str>| {
                p.is_some_and(|p| {
                    (1..=2).contains(&p.len()) && p.bytes().all(|c| c.is_ascii_digit())
                })
            };
            ok(hms.next()) && ok(hms.next()) && ok(hms.next()) && hms.next().is_none()
        }
    }
}

/// Whether a string this tool writes must be quoted so that every YAML reader
/// (1.1 or 1.2, go-yaml, libyaml, PyYAML) reads it back as the same string.
/// Deliberately conservative: plain only for text made of name-like characters that
/// cannot start a number, a date or a keyword.
pub fn needs_quotes(text: &str) -> bool {
    let Some(first) = text.chars().next() else {
        return true;
    };
    if !(first.is_ascii_alphabetic() || first == '/') {
        return true;
    }
    if !matches!(resolve_plain(text), Resolved::Str) {
        return true;
    }
    const WORDS: [&str; 11] = [
        "y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf",
    ];
    if WORDS.iter().any(|w| text.eq_ignore_ascii_case(w)) {
        return true;
    }
    let bytes = text.as_bytes();
    bytes.iter().enumerate().any(|(i, &c)| match c {
        b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'_' | b'/' | b'-' => false,
        // "a:b" is plain; "a: b" and a trailing ':' are not.
        b':' => i + 1 == bytes.len() || bytes[i + 1] == b' ',
        _ => true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(t: &str) -> Resolved {
        resolve_plain(t)
    }

    #[test]
    fn yaml11_vectors_resolve_as_go_yaml_v2() {
        assert_eq!(plain("0777"), Resolved::Int(511));
        assert_eq!(plain("012"), Resolved::Int(10));
        assert_eq!(plain("0x1F"), Resolved::Int(31));
        assert_eq!(plain("1_000"), Resolved::Int(1000));
        assert_eq!(plain("-12"), Resolved::Int(-12));
        assert_eq!(plain(".5"), Resolved::Float(0.5));
        assert_eq!(plain("1e+3"), Resolved::Float(1000.0));
        assert_eq!(plain("1.5"), Resolved::Float(1.5));
        for t in ["yes", "Yes", "on", "ON", "y", "Y", "true", "True"] {
            assert_eq!(plain(t), Resolved::Bool(true), "{t}");
        }
        for t in ["no", "off", "n", "N", "false", "FALSE", "Off"] {
            assert_eq!(plain(t), Resolved::Bool(false), "{t}");
        }
        for t in ["~", "null", "Null", "NULL", ""] {
            assert_eq!(plain(t), Resolved::Null, "{t}");
        }
        assert_eq!(plain("2001-12-14"), Resolved::Timestamp);
        assert_eq!(plain("2001-12-14T21:59:43.10-05:00"), Resolved::Timestamp);
        // go-yaml v2.4 reads a decimal-looking non-octal as a float.
        assert_eq!(plain("0778"), Resolved::Float(778.0));
        for t in [
            "yEs",
            "1.2.3",
            "0x",
            "abc",
            "1e",
            "v1",
            "12abc",
            "2001-13-01",
            "nvcf-worker-x",
        ] {
            assert_eq!(plain(t), Resolved::Str, "{t}");
        }
    }

    #[test]
    fn quoted_and_tagged_scalars() {
        let s = |text: &str, style| Scalar {
            text: text.into(),
            style,
        };
        assert_eq!(resolve(&s("yes", Style::DoubleQuoted), None), Resolved::Str);
        assert_eq!(
            resolve(&s("0777", Style::SingleQuoted), None),
            Resolved::Str
        );
        assert_eq!(
            resolve(&s("12", Style::Plain), Some("tag:yaml.org,2002:str")),
            Resolved::Str
        );
        assert_eq!(
            resolve(&s("12", Style::Plain), Some("!custom")),
            Resolved::Str
        );
        assert_eq!(
            resolve(&s("12", Style::DoubleQuoted), Some("tag:yaml.org,2002:int")),
            Resolved::Int(12)
        );
    }

    #[test]
    fn strings_that_any_reader_could_misread_are_quoted() {
        for t in [
            "",
            "yes",
            "YES",
            "on",
            "off",
            "y",
            "n",
            "~",
            "true",
            "null",
            "0777",
            "0x1F",
            "1_000",
            ".5",
            "012",
            "1e3",
            "2001-12-14",
            "1:30",
            "-",
            "a b",
            "a: b",
            "a:",
            "#x",
            "&a",
            "*a",
            "!t",
            "@x",
            "`x",
            "x#y",
            "ü",
            "<<",
            "=",
            "Null",
            "NaN",
            ".inf",
            "-1",
        ] {
            assert!(needs_quotes(t), "{t:?} must be quoted");
        }
        for t in [
            "psat",
            "nvcf-worker-web",
            "/var/run/secrets/tokens/token",
            "nvcf-icms:abc",
            "token",
            "NVCF_TOKEN_FILE_PATH",
            "v1",
        ] {
            assert!(!needs_quotes(t), "{t:?} can stay plain");
        }
    }
}
