//! The KRM function face: a ResourceList on stdin, a ResourceList on stdout
//! (KRM Functions Specification), and kustomize's legacy exec-plugin contract.

use std::io::Write;

use crate::config::{Config, Mode};
use crate::error::{Error, Result};
use crate::guard;
use crate::inject;
use crate::manifest::batch::{Batch, Source, SourceKind};
use crate::manifest::read::{default_list_items, item_problems};
use crate::manifest::{from_json, parse_stream, Document, Node};
use crate::report::{self, Finding, Location};

pub const API_VERSIONS: [&str; 2] = ["config.kubernetes.io/v1", "config.kubernetes.io/v1beta1"];

/// What a function run produced: bytes for stdout and the exit code.
pub struct FnOutput {
    pub stdout: Vec<u8>,
    pub exit_code: i32,
}

/// Runs the function on a ResourceList. Input so broken that no ResourceList can be
/// echoed is an `Err`; everything else is answered with a ResourceList carrying
/// `results` (exit 1 when any is an error), items unchanged on error.
pub fn run_resource_list(input: &[u8]) -> Result<FnOutput> {
    let docs = parse_stream(input).map_err(|e| Error::Yaml {
        file: "<stdin>".into(),
        doc: e.index + 1,
        source: e.error,
    })?;
    let mut docs = docs;
    crate::manifest::attach_text(&mut docs, std::sync::Arc::new(input.to_vec()));
    let mut docs: Vec<Document> = docs.into_iter().filter(|d| !d.is_empty()).collect();
    if docs.len() != 1 {
        return Err(Error::Usage(format!(
            "expected one ResourceList on stdin, found {} documents (kpt fn eval --exec, or a Kptfile pipeline, sends one)",
            docs.len()
        )));
    }
    let mut doc = docs.remove(0);
    default_list_items(&mut doc, SourceKind::ResourceList);
    let root = doc.view();
    let bad = |message: String| Error::Invalid {
        file: "<stdin>".into(),
        doc: 1,
        line: root.line,
        message,
    };
    if root.str_at(&["kind"]) != Some("ResourceList") {
        return Err(bad(format!(
            "kind is {:?}, expected ResourceList",
            root.str_at(&["kind"]).unwrap_or("")
        )));
    }
    let api = root.str_at(&["apiVersion"]).unwrap_or("");
    if !API_VERSIONS.contains(&api) {
        return Err(bad(format!(
            "apiVersion {api:?} is not one of {}",
            API_VERSIONS.join(", ")
        )));
    }
    if root.get("items").and_then(Node::items).is_none() {
        return Err(bad("ResourceList has no items list".into()));
    }
    let mut findings: Vec<Finding> = item_problems(root, SourceKind::ResourceList)
        .map(|(line, problem)| {
            Finding::error(problem).rule(guard::DECODE).at(Location {
                file: None,
                index: None,
                line: Some(line),
            })
        })
        .collect();
    let config = Config::from_node(root.get("functionConfig"));
    // Uninject edits as it goes and judges its output after: on a finding the
    // items go back as they came (inject plans first and edits nothing then).
    let as_read = matches!(&config, Ok(c) if c.mode == Mode::Uninject).then(|| doc.clone());
    let mut batch = Batch::new(vec![Source {
        name: "<stdin>".into(),
        kind: SourceKind::ResourceList,
        docs: vec![doc],
    }]);
    match config {
        Err(e) => findings.push(Finding::error(e.to_string())),
        Ok(_) if report::has_errors(&findings) => {}
        Ok(cfg) => match cfg.mode {
            Mode::Validate => findings.extend(guard::check(
                &batch,
                &guard::Allow {
                    self_refs: &Default::default(),
                },
            )),
            Mode::Inject => findings.extend(inject::inject(&mut batch, &cfg).krm_results()),
            Mode::Uninject => findings.extend(crate::uninject::uninject(&mut batch).krm_results()),
        },
    }
    let exit_code = if report::has_errors(&findings) { 1 } else { 0 };
    // Lines here count inside the ResourceList kpt built, not in the user's file:
    // the file, index and field path locate a result; a wrong line would mislead.
    for f in &mut findings {
        f.location.line = None;
    }
    let mut doc = batch.sources.remove(0).docs.remove(0);
    if let (Some(as_read), 1) = (as_read, exit_code) {
        doc = as_read;
    }
    if !findings.is_empty() {
        let json_style = doc.view().is_flow();
        let results: Vec<Node> = findings
            .iter()
            .map(|f| {
                let n = from_json(&f.to_krm_result());
                if json_style {
                    n.into_json_style()
                } else {
                    n
                }
            })
            .collect();
        // Adding `results` touches no item: keep the items as written (anchors and
        // merge keys too) unless `results` itself is an alias that must be expanded.
        let results_alias = doc
            .root
            .get("results")
            .is_some_and(|r| matches!(r.value, crate::manifest::Value::Alias(_)));
        let root = if results_alias {
            doc.edit()
        } else {
            doc.edit_as_written()
        };
        let existing = root.get_or_insert("results", || Node::seq(vec![]));
        if let Some(items) = existing.items_mut() {
            items.extend(results);
        }
    }
    // The ResourceList as kpt wrote it, edits spliced in: items change only where
    // they are edited.
    let stdout = crate::commands::render_source(std::slice::from_ref(&doc));
    crate::commands::release(doc);
    Ok(FnOutput { stdout, exit_code })
}

/// kustomize's legacy exec plugin: config file path as argv[1], a plain YAML stream
/// on stdin. As a transformer it writes the transformed stream; as a validator it
/// prints nothing on success (kustomize refuses any output from a validator, even
/// its input echoed) and its findings on stderr.
pub fn run_legacy_plugin(
    config_path: &str,
    input: Vec<u8>,
    stderr: &mut dyn Write,
) -> Result<FnOutput> {
    let config_bytes = std::fs::read(config_path).map_err(|e| Error::io(config_path, e))?;
    let config_docs = parse_stream(&config_bytes).map_err(|e| Error::Yaml {
        file: config_path.into(),
        doc: e.index + 1,
        source: e.error,
    })?;
    let cfg = Config::from_node(
        config_docs
            .iter()
            .find(|d| !d.is_empty())
            .map(Document::view),
    )?;
    let source = crate::manifest::read::load(crate::manifest::read::Input {
        name: "<stdin>".into(),
        bytes: input,
    })?;
    let mut batch = Batch::new(vec![source]);
    let findings = match cfg.mode {
        Mode::Validate => guard::check(
            &batch,
            &guard::Allow {
                self_refs: &Default::default(),
            },
        ),
        Mode::Inject => inject::inject(&mut batch, &cfg).findings,
        Mode::Uninject => crate::uninject::uninject(&mut batch).findings,
    };
    for f in &findings {
        writeln!(stderr, "{}", f.to_text()).map_err(|e| Error::io("<stderr>", e))?;
    }
    if report::has_errors(&findings) {
        return Err(Error::Reported {
            errors: findings
                .iter()
                .filter(|f| f.severity == report::Severity::Error)
                .count(),
        });
    }
    let stdout = match cfg.mode {
        Mode::Validate => Vec::new(),
        Mode::Inject | Mode::Uninject => crate::commands::render_stream(&batch),
    };
    Ok(FnOutput {
        stdout,
        exit_code: 0,
    })
}
