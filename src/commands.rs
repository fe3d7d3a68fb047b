//! `inject` and `validate` over files and stdin.

use std::io::Write;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::guard;
use crate::inject;
use crate::manifest::batch::{Batch, Source, SourceKind};
use crate::manifest::read::{self, object_problem, Input};
use crate::manifest::{to_json, Node, YamlWriter};
use crate::report::{self, Finding, Location, Severity};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StreamFormat {
    Yaml,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    Text,
    Json,
}

fn write_err(e: std::io::Error) -> Error {
    Error::io("<stdout>", e)
}

/// Set by the binary: the process exits right after the command, so the trees of a
/// large input need not be freed node by node (a tenth of the run time on big
/// streams). Library callers keep the default and free as usual.
static EXIT_AFTER_COMMAND: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

pub fn exit_after_command() {
    EXIT_AFTER_COMMAND.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Drops `value`, or leaves it to the process exit when the binary allows it.
pub fn release<T>(value: T) {
    if EXIT_AFTER_COMMAND.load(std::sync::atomic::Ordering::Relaxed) {
        std::mem::forget(value);
    }
}

/// Every non-empty document of the batch as one YAML stream.
pub fn render_stream(batch: &Batch) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = YamlWriter::new(&mut out);
    for source in &batch.sources {
        for doc in source.docs.iter().filter(|d| !d.is_empty()) {
            w.node_document(&doc.root, true, doc.explicit_end);
        }
    }
    w.finish();
    out
}

/// The objects as JSON, with kubectl's values: one object alone, several in a v1 List.
pub fn render_json(batch: &Batch) -> Vec<u8> {
    let mut objects: Vec<serde_json::Value> = Vec::new();
    for source in &batch.sources {
        for doc in source.docs.iter().filter(|d| !d.is_empty()) {
            objects.push(to_json(doc.view()));
        }
    }
    let value = if objects.len() == 1 {
        objects.remove(0)
    } else {
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects})
    };
    let mut out = serde_json::to_vec_pretty(&value).expect("JSON values serialize");
    out.push(b'\n');
    out
}

/// `inject`: transformed stream on stdout, a line per resource on stderr. On any
/// error nothing is written to stdout, so `inject | kubectl apply -f -` applies
/// nothing rather than half of it.
pub fn inject(
    paths: &[String],
    cfg: &Config,
    format: StreamFormat,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<()> {
    let cfg_token = cfg.token_spec();
    if cfg.is_psat() {
        cfg_token?;
    }
    let sources = read::gather(paths)?
        .into_iter()
        .map(read::load)
        .collect::<Result<Vec<_>>>()?;
    if sources.iter().all(|s| s.docs.iter().all(|d| d.is_empty())) {
        // Bad input, not bad usage: exit 1 like any other input problem.
        return Err(Error::Invalid {
            file: paths.join(", "),
            doc: 1,
            line: 1,
            message: "no Kubernetes objects in the input".into(),
        });
    }
    let mut batch = Batch::new(sources);
    let outcome = inject::inject(&mut batch, cfg);
    for f in &outcome.findings {
        writeln!(stderr, "{}", f.to_text()).map_err(write_err)?;
    }
    if outcome.has_errors() {
        let errors = outcome
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count();
        return Err(Error::Reported { errors });
    }
    // One write: stderr is unbuffered, and a line per object is thousands of calls.
    let report: String = outcome.reports.iter().map(|r| r.to_text() + "\n").collect();
    stderr.write_all(report.as_bytes()).map_err(write_err)?;
    let bytes = match format {
        StreamFormat::Yaml => render_stream(&batch),
        StreamFormat::Json => render_json(&batch),
    };
    release(batch);
    stdout.write_all(&bytes).map_err(write_err)?;
    stdout.flush().map_err(write_err)
}

/// Parses one file for `validate`: Ok(None) for YAML that holds no Kubernetes
/// object, Err(finding) for input that does not decode.
fn load_for_validate(input: Input) -> std::result::Result<Option<Source>, Finding> {
    let at = |line: u32, index: usize| Location {
        file: Some(input.name.clone()),
        index: Some(index),
        line: Some(line),
    };
    let docs = match crate::manifest::parallel::parse_stream_parallel(&input.bytes) {
        Ok(d) => d,
        Err(e) => {
            return Err(Finding::error(e.error.to_string())
                .rule(guard::DECODE)
                .at(at(e.error.line(), e.index)))
        }
    };
    let is_object = |n: &Node| n.get("apiVersion").is_some() && n.get("kind").is_some();
    if !docs.iter().any(|d| is_object(d.view())) {
        return Ok(None);
    }
    for d in docs.iter().filter(|d| !d.is_empty()) {
        if let Some(problem) = object_problem(d.view()) {
            return Err(
                Finding::error(format!("document {}: {problem}", d.index + 1))
                    .rule(guard::DECODE)
                    .at(at(d.line.max(d.view().line), d.index)),
            );
        }
    }
    Ok(Some(Source {
        name: input.name,
        kind: SourceKind::Stream,
        docs,
    }))
}

/// Parses inputs on every core: the cost of `validate` is almost all parsing.
fn load_parallel(inputs: Vec<Input>) -> Vec<std::result::Result<Option<Source>, Finding>> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(inputs.len().max(1));
    if workers <= 1 {
        return inputs.into_iter().map(load_for_validate).collect();
    }
    let mut slots: Vec<Option<Input>> = inputs.into_iter().map(Some).collect();
    let chunk = slots.len().div_ceil(workers);
    std::thread::scope(|s| {
        let handles: Vec<_> = slots
            .chunks_mut(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter_mut()
                        .map(|i| load_for_validate(i.take().expect("each input once")))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("parser thread"))
            .collect()
    })
}

/// `validate`: the guard over files, for pre-commit and CI. All files are checked as
/// one batch, so an identity's trio counts wherever in the change it is declared.
pub fn validate(paths: &[String], format: ReportFormat, stdout: &mut dyn Write) -> Result<()> {
    let inputs = read::gather(paths)?;
    let files = inputs.len();
    let mut findings = Vec::new();
    let mut sources = Vec::new();
    for r in load_parallel(inputs) {
        match r {
            Ok(Some(s)) => sources.push(s),
            Ok(None) => {}
            Err(f) => findings.push(f),
        }
    }
    let batch = Batch::new(sources);
    findings.extend(guard::check(
        &batch,
        &guard::Allow {
            self_refs: &Default::default(),
        },
    ));
    release(batch);
    match format {
        ReportFormat::Text => {
            for f in &findings {
                writeln!(stdout, "{}", f.to_text()).map_err(write_err)?;
            }
            writeln!(stdout, "{}", report::summary(&findings, files)).map_err(write_err)?;
        }
        ReportFormat::Json => {
            let doc = serde_json::json!({
                "apiVersion": "fn.nvcf.io/v1alpha1",
                "kind": "ValidationReport",
                "files": files,
                "errors": findings.iter().filter(|f| f.severity == Severity::Error).count(),
                "warnings": findings.iter().filter(|f| f.severity == Severity::Warning).count(),
                "findings": findings,
            });
            serde_json::to_writer_pretty(&mut *stdout, &doc).map_err(|e| write_err(e.into()))?;
            writeln!(stdout).map_err(write_err)?;
        }
    }
    stdout.flush().map_err(write_err)?;
    let errors = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    if errors > 0 {
        return Err(Error::Reported { errors });
    }
    Ok(())
}
