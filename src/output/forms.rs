//! kubectl's output forms for the live commands: `-o name|wide|json|yaml|
//! jsonpath=…|jsonpath-file=…|custom-columns=…|custom-columns-file=…`,
//! `--no-headers` and `--sort-by`, read and printed as kubectl reads and prints
//! them. A command hands over its document and its rows (the items a table,
//! custom-columns and `--sort-by` walk); each command keeps its own text form.

use std::io::Write;

use serde_json::Value;

use super::jsonpath::Template;
use super::{write as write_document, Format};
use crate::error::{Error, Result};

/// What `-o` asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum Form {
    Json,
    Yaml,
    Name,
    Wide,
    JsonPath(Template),
    CustomColumns(Vec<Column>),
    /// `audit`'s findings as policy reports (`live::reports`): audit's alone.
    PolicyReport,
}

/// One custom column: its header and the value's path.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    pub header: String,
    pub path: Template,
}

/// Every form `-o` knows, in kubectl's order for its error message.
const ALL: [&str; 9] = [
    "custom-columns",
    "custom-columns-file",
    "json",
    "jsonpath",
    "jsonpath-file",
    "name",
    "policyreport",
    "wide",
    "yaml",
];

impl Form {
    /// kubectl's `-o` values; a file form reads its file here.
    pub fn parse(text: &str) -> std::result::Result<Form, String> {
        let (name, arg) = text.split_once('=').unwrap_or((text, ""));
        let file = |what: &str| {
            std::fs::read_to_string(arg).map_err(|e| format!("error reading {what} {arg}: {e}"))
        };
        Ok(match (name, text.contains('=')) {
            ("json", false) => Form::Json,
            ("yaml", false) => Form::Yaml,
            ("name", false) => Form::Name,
            ("wide", false) => Form::Wide,
            ("policyreport", false) => Form::PolicyReport,
            ("jsonpath", _) => Form::JsonPath(jsonpath(arg)?),
            ("jsonpath-file", _) => Form::JsonPath(jsonpath(&file("template")?)?),
            ("custom-columns", _) => Form::CustomColumns(columns_spec(arg)?),
            ("custom-columns-file", _) => Form::CustomColumns(columns_file(&file("custom-columns file")?)?),
            _ => {
                return Err(format!(
                    "unable to match a printer suitable for the output format {text:?}, allowed formats are: {}",
                    ALL.join(",")
                ))
            }
        })
    }

    fn name(&self) -> &'static str {
        match self {
            Form::Json => "json",
            Form::Yaml => "yaml",
            Form::Name => "name",
            Form::Wide => "wide",
            Form::PolicyReport => "policyreport",
            Form::JsonPath(_) => "jsonpath",
            Form::CustomColumns(_) => "custom-columns",
        }
    }

    /// kubectl's refusal of a form a command has no printer for (`wide` where
    /// there is no table), naming the forms it has.
    pub fn check(&self, command: &str, without: &[&str]) -> Result<()> {
        let refused = |n: &str| without.iter().any(|w| n.starts_with(w));
        if !refused(self.name()) {
            return Ok(());
        }
        let allowed: Vec<&str> = ALL.into_iter().filter(|n| !refused(n)).collect();
        Err(Error::Usage(format!(
            "{command}: unable to match a printer suitable for the output format {:?}, allowed formats are: {}",
            self.name(),
            allowed.join(",")
        )))
    }

    /// The document form, when this is one.
    pub fn document(&self) -> Option<Format> {
        match self {
            Form::Json => Some(Format::Json),
            Form::Yaml => Some(Format::Yaml),
            _ => None,
        }
    }
}

fn jsonpath(template: &str) -> std::result::Result<Template, String> {
    if template.is_empty() {
        return Err("template format specified but no template given".into());
    }
    Template::parse(template).map_err(|e| format!("error parsing jsonpath {template}, {e}"))
}

/// `HEADER:PATH,...`, as kubectl splits it.
fn columns_spec(spec: &str) -> std::result::Result<Vec<Column>, String> {
    if spec.is_empty() {
        return Err("custom-columns format specified but no custom columns given".into());
    }
    spec.split(',')
        .map(|part| match part.split_once(':') {
            Some((header, path)) => column(header, path),
            None => Err(format!(
                "unexpected custom-columns spec: {part}, expected <header>:<json-path-expr>"
            )),
        })
        .collect()
}

/// A custom-columns file: a line of headers, then a line of paths.
fn columns_file(text: &str) -> std::result::Result<Vec<Column>, String> {
    let mut lines = text.lines();
    let expected = "Expected format is one line of space separated headers, one line of space separated column specs.";
    let headers: Vec<&str> = lines
        .next()
        .ok_or(format!("invalid template, missing header line. {expected}"))?
        .split_whitespace()
        .collect();
    let specs: Vec<&str> = lines
        .next()
        .ok_or(format!("invalid template, missing spec line. {expected}"))?
        .split_whitespace()
        .collect();
    if headers.len() != specs.len() {
        return Err(format!(
            "number of headers ({}) and field specifications ({}) don't match",
            headers.len(),
            specs.len()
        ));
    }
    headers
        .iter()
        .zip(&specs)
        .map(|(h, p)| column(h, p))
        .collect()
}

fn column(header: &str, path: &str) -> std::result::Result<Column, String> {
    Ok(Column {
        header: header.to_string(),
        path: Template::parse_relaxed(path)?,
    })
}

/// `--sort-by`: the order of `rows` by the value at `path` in each, as kubectl
/// sorts: rows without the value first, numbers by value, strings bytewise; an
/// error when no row has it or the values cannot be compared. Stable, where
/// kubectl's sort is not, so equal keys keep the command's order.
pub fn sort_order(path: &str, rows: &[Value]) -> Result<Vec<usize>> {
    let usage = |e: String| Error::Usage(format!("--sort-by {path:?}: {e}"));
    let template = Template::parse_relaxed(path).map_err(usage)?;
    let keys: Vec<Option<Value>> = rows
        .iter()
        .map(|row| {
            let results = template.results(row).map_err(usage)?;
            Ok(match results.first().and_then(|r| r.first()) {
                Some(super::jsonpath::V::Json(v)) => Some((*v).clone()),
                Some(other) => Some(Value::String(super::jsonpath::text(other))),
                None => None,
            })
        })
        .collect::<Result<_>>()?;
    if !rows.is_empty() && keys.iter().all(Option::is_none) {
        return Err(usage(format!(
            "couldn't find any field with path {:?} in the list of objects",
            super::jsonpath::relaxed(path).unwrap_or_default()
        )));
    }
    let mut failure = None;
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|&a, &b| match (&keys[a], &keys[b]) {
        (None, None) => std::cmp::Ordering::Equal,
        (None, Some(_)) => std::cmp::Ordering::Less,
        (Some(_), None) => std::cmp::Ordering::Greater,
        (Some(x), Some(y)) => compare(x, y).unwrap_or_else(|e| {
            failure.get_or_insert(e);
            std::cmp::Ordering::Equal
        }),
    });
    match failure {
        Some(e) => Err(usage(e)),
        None => Ok(order),
    }
}

/// kubectl's isLess on two decoded values: same-typed numbers or strings only.
fn compare(a: &Value, b: &Value) -> std::result::Result<std::cmp::Ordering, String> {
    match (a, b) {
        (Value::Null, Value::Null) => Ok(std::cmp::Ordering::Equal),
        (Value::Null, _) => Ok(std::cmp::Ordering::Less),
        (_, Value::Null) => Ok(std::cmp::Ordering::Greater),
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => Ok(x.cmp(&y)),
            (None, None) => x
                .as_f64()
                .partial_cmp(&y.as_f64())
                .ok_or_else(|| "unsortable number".to_string()),
            _ => Err("unsortable interface: an integer and a float".into()),
        },
        (Value::String(x), Value::String(y)) => Ok(x.cmp(y)),
        (x, _) => Err(format!("unsortable type: {}", kind(x))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "bool",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
        Value::Number(_) | Value::String(_) => "mixed types",
        Value::Null => "nil",
    }
}

/// Applies `order` (from `sort_order`) to `items`.
pub fn reorder<T>(items: Vec<T>, order: &[usize]) -> Vec<T> {
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    order.iter().filter_map(|&i| slots[i].take()).collect()
}

fn write_err(e: std::io::Error) -> Error {
    Error::io("<stdout>", e)
}

/// A command's output in a form that is not its own text: the document
/// (`json`, `yaml`, `jsonpath`), one name a line (`name`), or custom columns
/// over `rows`. `wide` is the command's own table and never gets here.
pub fn write(
    form: &Form,
    kind: &str,
    fields: Value,
    rows: &[Value],
    names: &[String],
    no_headers: bool,
    out: &mut dyn Write,
) -> Result<()> {
    match form {
        Form::Json | Form::Yaml => {
            write_document(kind, fields, form.document().expect("document form"), out)
        }
        Form::Name => names
            .iter()
            .try_for_each(|n| writeln!(out, "{n}").map_err(write_err)),
        Form::JsonPath(t) => {
            let doc = super::document(kind, fields);
            let text = t
                .render(&doc)
                .map_err(|e| Error::Usage(format!("error executing jsonpath: {e}")))?;
            out.write_all(text.as_bytes()).map_err(write_err)
        }
        Form::CustomColumns(columns) => custom_columns(columns, rows, no_headers, out),
        Form::Wide => unreachable!("the command prints its own wide table"),
        Form::PolicyReport => unreachable!("audit prints its own policy reports"),
    }
}

fn custom_columns(
    columns: &[Column],
    rows: &[Value],
    no_headers: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let mut lines = Vec::new();
    if !no_headers {
        lines.push(columns.iter().map(|c| c.header.clone()).collect());
    }
    for row in rows {
        let mut cells = Vec::new();
        for c in columns {
            let results = c
                .path
                .results(row)
                .map_err(|e| Error::Usage(format!("custom-columns {}: {e}", c.header)))?;
            let values: Vec<String> = results
                .iter()
                .flatten()
                .map(|v| escape_terminal(&super::jsonpath::go_sprint(v)))
                .collect();
            let first_empty = results.first().is_none_or(Vec::is_empty);
            cells.push(if first_empty && values.is_empty() {
                "<none>".to_string()
            } else if first_empty {
                format!("<none>,{}", values.join(","))
            } else {
                values.join(",")
            });
        }
        lines.push(cells);
    }
    tabwriter(&lines, out)
}

/// kubectl's EscapeTerminal: a value cannot move the cursor or start an
/// escape sequence in the user's terminal.
fn escape_terminal(s: &str) -> String {
    s.replace('\x1b', "^[").replace('\r', "\\r")
}

/// Go's tabwriter as kubectl sets it up (minimum width 6, padding 3, spaces):
/// every cell but a line's last padded to its column's width.
pub fn tabwriter(lines: &[Vec<String>], out: &mut dyn Write) -> Result<()> {
    let mut widths: Vec<usize> = Vec::new();
    for line in lines {
        for (i, cell) in line.iter().enumerate().take(line.len().saturating_sub(1)) {
            let w = (cell.chars().count() + 3).max(6);
            match widths.get_mut(i) {
                Some(x) => *x = (*x).max(w),
                None => widths.push(w),
            }
        }
    }
    for line in lines {
        let mut s = String::new();
        for (i, cell) in line.iter().enumerate() {
            if i + 1 == line.len() {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}", w = widths[i]));
            }
        }
        writeln!(out, "{s}").map_err(write_err)?;
    }
    Ok(())
}

/// kubectl's `-o name` of an object: `KIND.GROUP/NAME` (`KIND/NAME` for the core group).
pub fn object_name(api_version: &str, kind: &str, name: &str) -> String {
    let kind = kind.to_ascii_lowercase();
    match api_version.rsplit_once('/') {
        Some((group, _)) => format!("{kind}.{group}/{name}"),
        None => format!("{kind}/{name}"),
    }
}

#[cfg(test)]
mod tests;

/// kubectl's printing flags, as every live command takes them.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PrintArgs {
    /// Output format: json, yaml, name, wide, jsonpath=TEMPLATE, jsonpath-file=FILE, custom-columns=HEADER:PATH,..., custom-columns-file=FILE (kubectl's forms; see docs/live.md).
    #[arg(short = 'o', long = "output", value_name = "FORMAT", value_parser = FormParser)]
    pub output: Option<Form>,
    /// Print tables and custom columns without their header line.
    #[arg(long = "no-headers")]
    pub no_headers: bool,
    /// Sort the rows (identities, findings, plan entries) by the value at this JSONPath in each row's JSON, as kubectl's --sort-by.
    #[arg(long = "sort-by", value_name = "JSONPATH")]
    pub sort_by: Option<String>,
}

impl PrintArgs {
    /// The order `--sort-by` gives `rows` (their own order without it).
    pub fn order(&self, rows: &[Value]) -> Result<Vec<usize>> {
        match &self.sort_by {
            Some(path) => sort_order(path, rows),
            None => Ok((0..rows.len()).collect()),
        }
    }
}

/// `Form::parse` for clap, naming the forms for help and completion.
#[derive(Clone)]
struct FormParser;

impl clap::builder::TypedValueParser for FormParser {
    type Value = Form;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> std::result::Result<Form, clap::Error> {
        let text = value.to_string_lossy();
        Form::parse(&text).map_err(|e| {
            clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{e}\n")).with_cmd(cmd)
        })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        const SHOWN: [&str; 9] = [
            "json",
            "yaml",
            "name",
            "wide",
            "policyreport",
            "jsonpath=",
            "jsonpath-file=",
            "custom-columns=",
            "custom-columns-file=",
        ];
        Some(Box::new(
            SHOWN.into_iter().map(clap::builder::PossibleValue::new),
        ))
    }
}
