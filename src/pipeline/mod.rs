//! One pipeline for every face: a loader reads sources (files, directories, stdin,
//! a ResourceList) with the processor's memory strategy, a processor (inject,
//! uninject, validate) turns the batch into an outcome, and sinks write what came
//! out (a stream in YAML or JSON, a diff, the files in place, a report, SARIF, a
//! ResourceList with results). The faces (the CLI, the KRM function, kustomize's
//! exec plugin) only choose the three, as kyaml's `framework.Execute(processor,
//! readerWriter)` keeps I/O apart from processing.

pub mod load;
pub mod process;
pub mod sink;

use std::io::Write;

use crate::error::{Error, Result};
use crate::manifest::batch::Batch;
use crate::manifest::read::{self, Evict};
use crate::report::{Finding, Location};
use crate::work::Workers;

pub use process::Processor;
pub use sink::{StreamFormat, ValidateFormat, WriteArgs};

/// The loader's memory strategy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Memory {
    /// Drop what the processor will not need as soon as it is read, and write
    /// edited documents as they are done.
    #[default]
    Evict,
    /// Hold every tree to the end: the plain form `tests/streaming.rs` compares
    /// the default with.
    Hold,
}

/// What a face decides once for the whole run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Run {
    pub workers: Workers,
    pub memory: Memory,
    /// The process exits right after the run: the trees of a large input are left
    /// to the exit instead of being freed node by node (a tenth of the run time on
    /// big streams). Library callers keep `false`.
    pub exits_after: bool,
}

impl Run {
    /// What the binary runs with: every core, trees left to the exit.
    pub fn binary() -> Run {
        Run {
            workers: Workers::per_core(),
            memory: Memory::Evict,
            exits_after: true,
        }
    }

    /// Drops `value`, or leaves it to the process exit when the run allows it.
    pub fn release<T>(&self, value: T) {
        if self.exits_after {
            std::mem::forget(value);
        }
    }
}

/// Where an edit goes: the stream in a format, or the files (diff, in place).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Output {
    pub format: StreamFormat,
    pub write: WriteArgs,
}

/// Edits manifests (inject, uninject): reads `paths`, runs `processor`, and writes
/// the stream, a diff or the files, with the per-object report on stderr. On any
/// error only the findings are written (to stderr) and nothing to stdout, so
/// `inject | kubectl apply -f -` applies nothing rather than half of it.
pub fn edit(
    run: &Run,
    paths: &[String],
    processor: &Processor,
    output: Output,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<()> {
    let Output { format, write } = output;
    write.check(paths, format)?;
    processor.ready()?;
    let evict = |d: &mut crate::manifest::Document| processor.evict(d);
    // `-o json` writes every object from its tree.
    let evict: Option<Evict> =
        (format == StreamFormat::Yaml && run.memory == Memory::Evict && processor.evicts())
            .then_some(&evict);
    let package = load::package(paths, !write.to_files(), evict, run.workers)?;
    if package
        .sources
        .iter()
        .all(|s| s.docs.iter().all(|d| d.is_empty()))
    {
        // Bad input, not bad usage: exit 1 like any other input problem. Never an
        // empty output: Helm 4 refuses it, and `kubectl apply` would apply nothing.
        return Err(no_objects(paths));
    }
    let mut batch = Batch::new(package.sources);
    batch.workers = run.workers;
    // Written from the documents' text: edited documents may be written as they go.
    batch.freeze = evict.is_some();
    let originals = sink::originals(&batch);
    let outcome = processor.process(&mut batch);
    for f in &outcome.findings {
        writeln!(stderr, "{}", f.to_text()).map_err(sink::write_err)?;
    }
    if outcome.has_errors() {
        return Err(Error::reported(&outcome.findings));
    }
    // One write: stderr is unbuffered, and a line per object is thousands of calls.
    if !write.quiet {
        stderr
            .write_all(sink::object_report(&outcome.reports, &package.left_out).as_bytes())
            .map_err(sink::write_err)?;
    }
    let mut changes_shown = false;
    match format {
        StreamFormat::Yaml => {
            let changed = sink::write_edited(&batch, &originals, &package.utf16, write, stdout)?;
            changes_shown = write.diff && changed > 0;
            if write.in_place && !write.quiet {
                writeln!(
                    stderr,
                    "{changed} {} rewritten",
                    if changed == 1 { "file" } else { "files" }
                )
                .map_err(sink::write_err)?;
            }
        }
        StreamFormat::Json => stdout
            .write_all(&sink::render_json(&batch))
            .map_err(sink::write_err)?,
    }
    run.release(batch);
    stdout.flush().map_err(sink::write_err)?;
    if changes_shown {
        // `kubectl diff`'s convention: 1 when there are differences, 0 when none.
        return Err(Error::Answered(crate::error::Exit::Problem));
    }
    Ok(())
}

/// Input with nothing in it, named by its paths: an input problem (exit 1), as
/// `kubectl apply` refuses it ("no objects passed to apply").
fn no_objects(paths: &[String]) -> Error {
    let names: Vec<&str> = paths
        .iter()
        .map(|p| if p == "-" { read::STDIN } else { p })
        .collect();
    Error::Invalid {
        file: names.join(", "),
        doc: 1,
        line: 1,
        message: "no Kubernetes objects in the input".into(),
    }
}

/// Checks manifests (validate): every file read on its own and all checked as one
/// batch, so an identity's trio counts wherever in the change it is declared. A
/// file that does not decode is a finding and the others are still checked.
pub fn check(
    run: &Run,
    paths: &[String],
    format: ValidateFormat,
    fail_on_warn: bool,
    stdout: &mut dyn Write,
) -> Result<()> {
    let processor = Processor::Validate;
    let evict = |d: &mut crate::manifest::Document| processor.evict(d);
    let evict: Option<Evict> = (run.memory == Memory::Evict).then_some(&evict);
    let (loaded, files) = load::files(paths, evict, run.workers)?;
    // Every input empty (an upstream `helm template | validate -` that printed
    // nothing, an empty file): refused. Files of other YAML than Kubernetes
    // objects (a CI workflow a pre-commit run passes) are skipped, not empty.
    if loaded
        .iter()
        .all(|r| matches!(r, Ok(Some(s)) if s.docs.is_empty()))
    {
        return Err(no_objects(paths));
    }
    let mut findings = Vec::new();
    let mut sources = Vec::new();
    for r in loaded {
        match r {
            Ok(Some(s)) => sources.push(s),
            Ok(None) => {}
            Err(refusal) => findings.push(refused(*refusal)),
        }
    }
    let mut batch = Batch::new(sources);
    batch.workers = run.workers;
    findings.extend(processor.process(&mut batch).findings);
    run.release(batch);
    sink::findings(&findings, &files, format, fail_on_warn, stdout)?;
    if findings.iter().any(|f| crate::ci::fails(f, fail_on_warn)) {
        return Err(Error::reported(&findings));
    }
    Ok(())
}

/// A file that does not decode, as the finding that reports it.
fn refused(r: load::Refusal) -> Finding {
    Finding::error(r.message)
        .rule(crate::guard::DECODE)
        .at(Location {
            file: Some(r.file),
            index: Some(r.index),
            line: Some(r.line),
        })
}
