//! The KRM function face: a ResourceList on stdin, a ResourceList on stdout
//! (KRM Functions Specification), and kustomize's legacy exec-plugin contract.
//! Both only pick the pipeline's loader, processor and sink.

use std::io::Write;

use crate::config::{Config, Mode};
use crate::error::{Error, Exit, Result};
use crate::guard;
use crate::manifest::batch::{Batch, Source, SourceKind};
use crate::manifest::read::item_problems;
use crate::manifest::{parse_stream, Document};
use crate::pipeline::{load, sink, Processor, Run};
use crate::report::{self, Finding, Location};

pub use crate::pipeline::load::API_VERSIONS;

/// What a function run produced: bytes for stdout and how it exits.
pub struct FnOutput {
    pub stdout: Vec<u8>,
    pub exit: Exit,
}

/// Runs the function on a ResourceList (with a library caller's run: see
/// `run_resource_list_with`).
pub fn run_resource_list(input: &[u8]) -> Result<FnOutput> {
    run_resource_list_with(&Run::default(), input)
}

/// Runs the function on a ResourceList. Input so broken that no ResourceList can be
/// echoed is an `Err`; everything else is answered with a ResourceList carrying
/// `results`, items unchanged on error. Exits 2 for a mistake in the
/// functionConfig, 1 for any other error result.
pub fn run_resource_list_with(run: &Run, input: &[u8]) -> Result<FnOutput> {
    let doc = load::resource_list(input)?;
    let root = doc.view();
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
        name: crate::manifest::read::STDIN.into(),
        kind: SourceKind::ResourceList,
        docs: vec![doc],
    }]);
    batch.workers = run.workers;
    let mut exit = Exit::Success;
    let ready = config.map_err(Error::from).and_then(|cfg| {
        Processor::for_config(&cfg).ready()?;
        Ok(cfg)
    });
    match ready {
        Err(e) => {
            findings.push(Finding::error(e.to_string()));
            exit = e.exit();
        }
        Ok(_) if report::has_errors(&findings) => {}
        Ok(cfg) => findings.extend(
            Processor::for_config(&cfg)
                .process(&mut batch)
                .krm_results(),
        ),
    }
    if exit == Exit::Success && report::has_errors(&findings) {
        exit = Exit::Problem;
    }
    // Lines here count inside the ResourceList kpt built, not in the user's file:
    // the file, index and field path locate a result; a wrong line would mislead.
    for f in &mut findings {
        f.location.line = None;
    }
    let mut doc = batch.sources.remove(0).docs.remove(0);
    if let (Some(as_read), Exit::Problem) = (as_read, exit) {
        doc = as_read;
    }
    let (stdout, doc) = sink::resource_list(doc, &findings);
    run.release(doc);
    Ok(FnOutput { stdout, exit })
}

/// kustomize's legacy exec plugin: config file path as argv[1], a plain YAML stream
/// on stdin. As a transformer it writes the transformed stream; as a validator it
/// prints nothing on success (kustomize refuses any output from a validator, even
/// its input echoed) and its findings on stderr.
pub fn run_legacy_plugin(
    run: &Run,
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
    let processor = Processor::for_config(&cfg);
    processor.ready()?;
    let mut batch = Batch::new(vec![load::stream(input, run.workers)?]);
    batch.workers = run.workers;
    let findings = processor.process(&mut batch).findings;
    for f in &findings {
        writeln!(stderr, "{}", f.to_text()).map_err(|e| Error::io("<stderr>", e))?;
    }
    if report::has_errors(&findings) {
        return Err(Error::reported(&findings));
    }
    let stdout = match cfg.mode {
        Mode::Validate => Vec::new(),
        Mode::Inject | Mode::Uninject => sink::render_stream(&batch),
    };
    run.release(batch);
    Ok(FnOutput {
        stdout,
        exit: Exit::Success,
    })
}
