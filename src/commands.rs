//! `inject` and `validate` over files and stdin.

use std::io::Write;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::guard;
use crate::identity;
use crate::inject;
use crate::manifest::batch::is_list;
use crate::manifest::batch::{Batch, Need, Source, SourceKind};
use crate::manifest::read::{self, default_list_items, Input};
use crate::manifest::{splice, to_json, Node, YamlWriter};
use crate::report::{self, Finding, Location, Severity};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StreamFormat {
    Yaml,
    Json,
}

pub use crate::report::ReportFormat;

/// `validate`'s formats: the report's, and SARIF for code scanning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ValidateFormat {
    Text,
    Json,
    /// SARIF 2.1.0, for code scanning (GitHub, GitLab, Azure DevOps).
    Sarif,
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
    write_stream(batch, &mut out).expect("writing to memory cannot fail");
    out
}

/// Documents per emitted chunk: large enough to amortise a thread hand-off, small
/// enough that only a few chunks are ever held in memory.
const DOCS_PER_CHUNK: usize = 256;

fn emit_chunk(docs: &[&crate::manifest::Document], last_chunk: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = YamlWriter::new(&mut out);
    for doc in docs {
        // Every document starts with `---`, so chunks emitted apart concatenate
        // into the same stream one emitter would write...
        w.node_document(&doc.root, true, doc.explicit_end);
    }
    w.finish();
    crate::manifest::emit::markers_on_their_own_line(&mut out);
    // ...except that libyaml ends a stream whose last scalar is open-ended (`|+`)
    // with `...`, which one emitter writes only at the very end of the output.
    if !last_chunk && docs.last().is_some_and(|d| !d.explicit_end) && out.ends_with(b"\n...\n") {
        out.truncate(out.len() - 4);
    }
    out
}

/// Writes the batch as one YAML stream: each source's documents as read, with edits
/// spliced in (see `manifest::splice`); sources one after the other, separated by
/// `---` where the next one does not start with it.
pub fn write_stream(batch: &Batch, out: &mut dyn Write) -> std::io::Result<()> {
    if batch
        .sources
        .iter()
        .all(|s| s.docs.iter().all(|d| d.text.is_none()))
    {
        return emit_stream(batch, out);
    }
    let mut ends_line = true;
    let mut any = false;
    for source in &batch.sources {
        // Written a chunk at a time, so the output is never held whole; what goes
        // between two sources is known once the second has a first byte.
        let mut started = false;
        let begin = |out: &mut dyn Write, any: bool, ends_line: bool| {
            if any {
                if !ends_line {
                    out.write_all(b"\n")?;
                }
                if !splice::starts_explicitly(&source.docs) {
                    out.write_all(b"---\n")?;
                }
            }
            Ok::<(), std::io::Error>(())
        };
        let mut bytes = Vec::new();
        splice::write_docs_with(&source.docs, &mut bytes, &mut |buf| {
            if buf.len() < SPILL {
                return Ok(());
            }
            if !started {
                begin(out, any, ends_line)?;
                started = true;
            }
            // The last byte stays: the writer asks whether the output ends a line.
            let keep = buf.len() - 1;
            out.write_all(&buf[..keep])?;
            buf.drain(..keep);
            Ok(())
        })?;
        if bytes.is_empty() && !started {
            continue;
        }
        if !started {
            begin(out, any, ends_line)?;
        }
        out.write_all(&bytes)?;
        ends_line = bytes.ends_with(b"\n");
        any = true;
    }
    Ok(())
}

/// How much output `write_stream` gathers before writing it.
const SPILL: usize = 1 << 20;

/// One source's documents as its new file content.
pub fn render_source(docs: &[crate::manifest::Document]) -> Vec<u8> {
    let mut out = Vec::new();
    splice::write_docs(docs, &mut out);
    out
}

/// Writes every non-empty document of a batch built in memory (no source text)
/// anew. Large batches are emitted on every core, chunk by chunk, and written in
/// order as chunks finish, so the output is never held whole in memory.
fn emit_stream(batch: &Batch, out: &mut dyn Write) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let docs: Vec<&crate::manifest::Document> = batch
        .sources
        .iter()
        .flat_map(|s| s.docs.iter().filter(|d| !d.is_empty()))
        .collect();
    let chunks: Vec<&[&crate::manifest::Document]> = docs.chunks(DOCS_PER_CHUNK).collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(chunks.len());
    if threads < 2 {
        return out.write_all(&emit_chunk(&docs, true));
    }
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, Vec<u8>)>(threads * 2);
        for _ in 0..threads {
            let (tx, next, chunks) = (tx.clone(), &next, &chunks);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(chunk) = chunks.get(i) else { break };
                // A failed send means the writer stopped (a closed pipe): stop too.
                if tx
                    .send((i, emit_chunk(chunk, i + 1 == chunks.len())))
                    .is_err()
                {
                    break;
                }
            });
        }
        drop(tx);
        let mut pending = std::collections::BTreeMap::new();
        let mut want = 0;
        for (i, bytes) in rx {
            pending.insert(i, bytes);
            while let Some(bytes) = pending.remove(&want) {
                out.write_all(&bytes)?;
                want += 1;
            }
        }
        Ok(())
    })
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

/// Where a transformed stream goes; shared by the commands that edit manifests.
#[derive(clap::Args, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteArgs {
    /// Rewrite the input files instead of printing them: all files or none (each is
    /// written beside and renamed over, permissions kept); stdin cannot be rewritten.
    #[arg(short = 'i', long = "in-place", conflicts_with = "diff")]
    pub in_place: bool,
    /// Print a unified diff of what would change instead of the stream.
    #[arg(long)]
    pub diff: bool,
}

impl WriteArgs {
    /// Whether the output is the files themselves (all their documents kept).
    pub fn to_files(&self) -> bool {
        self.in_place || self.diff
    }

    /// Refuses combinations that cannot work, before anything is read.
    pub fn check(&self, paths: &[String], format: StreamFormat) -> Result<()> {
        if self.to_files() && format == StreamFormat::Json {
            return Err(Error::Usage(
                "-o json prints objects; --in-place and --diff keep the files as YAML: drop -o json".into(),
            ));
        }
        if self.in_place && paths.iter().any(|p| p == "-") {
            return Err(Error::Usage(
                "--in-place rewrites files; stdin has none: name files or directories, or print the stream".into(),
            ));
        }
        Ok(())
    }
}

/// The bytes each source was read from, to compare the edited files with.
pub fn originals(batch: &Batch) -> Vec<Option<std::sync::Arc<Vec<u8>>>> {
    batch
        .sources
        .iter()
        .map(|s| s.docs.iter().find_map(|d| d.text.clone()))
        .collect()
}

/// Writes an edited batch where `write` says: the stream on stdout, a unified diff
/// on stdout, or back into the files. `originals` are the sources' bytes as read
/// (from `originals`, taken before editing). Returns how many files changed.
pub fn write_edited(
    batch: &Batch,
    originals: &[Option<std::sync::Arc<Vec<u8>>>],
    write: WriteArgs,
    stdout: &mut dyn Write,
) -> Result<usize> {
    if !write.to_files() {
        write_stream(batch, stdout).map_err(write_err)?;
        return Ok(0);
    }
    let mut changed = Vec::new();
    for (source, original) in batch.sources.iter().zip(originals) {
        let Some(original) = original else { continue };
        let bytes = render_source(&source.docs);
        if bytes != **original {
            changed.push((source.name.as_str(), original.as_slice(), bytes));
        }
    }
    if write.diff {
        for (name, old, new) in &changed {
            let (old, new) = (String::from_utf8_lossy(old), String::from_utf8_lossy(new));
            let diff = similar::TextDiff::from_lines(old.as_ref(), new.as_ref());
            let text = diff
                .unified_diff()
                .context_radius(3)
                .header(&format!("a/{name}"), &format!("b/{name}"))
                .to_string();
            stdout.write_all(text.as_bytes()).map_err(write_err)?;
        }
    } else {
        let files: Vec<(&str, &[u8])> = changed.iter().map(|(n, _, b)| (*n, &b[..])).collect();
        replace_files(&files)?;
    }
    Ok(changed.len())
}

/// Replaces every file or none: each new content is written to a temporary file
/// beside its target (same directory, so the rename cannot cross file systems),
/// with the target's permissions, and only when all are written are they renamed
/// over their targets. On a failure before the renames, the temporary files are
/// removed and no file has changed.
pub fn replace_files(files: &[(&str, &[u8])]) -> Result<()> {
    let mut temps: Vec<(std::path::PathBuf, std::path::PathBuf)> = Vec::new();
    let cleanup = |temps: &[(std::path::PathBuf, std::path::PathBuf)]| {
        for (temp, _) in temps {
            let _ = std::fs::remove_file(temp);
        }
    };
    for (name, bytes) in files {
        match write_beside(name, bytes) {
            Ok(pair) => temps.push(pair),
            Err(e) => {
                cleanup(&temps);
                return Err(e);
            }
        }
    }
    for (i, (temp, target)) in temps.iter().enumerate() {
        if let Err(e) = std::fs::rename(temp, target) {
            cleanup(&temps[i..]);
            let done: Vec<String> = files[..i].iter().map(|(n, _)| n.to_string()).collect();
            let name = target.display().to_string();
            return Err(if done.is_empty() {
                Error::io(name, e)
            } else {
                Error::io(format!("{name} (already replaced: {})", done.join(", ")), e)
            });
        }
    }
    Ok(())
}

/// Writes `bytes` to a new temporary file beside `name`'s real file (a symlink is
/// followed, so the link stays a link), returning (temporary, target).
fn write_beside(name: &str, bytes: &[u8]) -> Result<(std::path::PathBuf, std::path::PathBuf)> {
    let io = |e| Error::io(name, e);
    let target = std::fs::canonicalize(name).map_err(io)?;
    let permissions = std::fs::metadata(&target).map_err(io)?.permissions();
    let file_name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = target.with_file_name(format!(
        ".{file_name}.nvcf-worker-{}.tmp",
        std::process::id()
    ));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        f.write_all(bytes)?;
        f.set_permissions(permissions)?;
        f.sync_all()
    })();
    match written {
        Ok(()) => Ok((temp, target)),
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(io(e))
        }
    }
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
    inject_to(paths, cfg, format, WriteArgs::default(), stdout, stderr)
}

/// `inject` writing where `write` says (see `write_edited`); with --in-place or
/// --diff, no file is left out (a kpt local-config object stays in its file).
pub fn inject_to(
    paths: &[String],
    cfg: &Config,
    format: StreamFormat,
    write: WriteArgs,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<()> {
    inject_with(paths, cfg, format, write, false, stdout, stderr)
}

/// `inject` to stdout holding every document's tree to the end, as it did before
/// trees were dropped as read (`batch::evict`) and edited documents written as they
/// go (`Batch::freeze`): the plain form `tests/streaming.rs` compares `inject` with.
pub fn inject_holding_trees(
    paths: &[String],
    cfg: &Config,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<()> {
    let (format, write) = (StreamFormat::Yaml, WriteArgs::default());
    inject_with(paths, cfg, format, write, true, stdout, stderr)
}

fn inject_with(
    paths: &[String],
    cfg: &Config,
    format: StreamFormat,
    write: WriteArgs,
    hold_trees: bool,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<()> {
    write.check(paths, format)?;
    let cfg_token = cfg.token_spec();
    if cfg.is_psat() {
        cfg_token?;
    }
    // What inject will not touch is dropped as it is read; `-o json` writes every
    // object from its tree.
    let evict = |d: &mut crate::manifest::Document| {
        let need = |o: &crate::manifest::batch::Object| inject::need(o, cfg);
        crate::manifest::batch::evict(d, &[inject::HELM_HOOK, LOCAL_CONFIG], need)
    };
    let evict: Option<read::Evict> =
        (format == StreamFormat::Yaml && !hold_trees).then_some(&evict);
    transform(paths, format, write, evict, stdout, stderr, |batch| {
        inject::inject(batch, cfg)
    })
}

/// `uninject`: the same inputs and outputs as `inject` (--in-place and --diff too);
/// takes out what inject added.
pub fn uninject(
    paths: &[String],
    format: StreamFormat,
    write: WriteArgs,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<()> {
    write.check(paths, format)?;
    transform(
        paths,
        format,
        write,
        None,
        stdout,
        stderr,
        crate::uninject::uninject,
    )
}

/// Reads the inputs, transforms them, and writes the stream (or the files, or a
/// diff) and the report, or on any error only the findings.
fn transform(
    paths: &[String],
    format: StreamFormat,
    write: WriteArgs,
    evict: Option<read::Evict>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
    op: impl FnOnce(&mut Batch) -> inject::Outcome,
) -> Result<()> {
    let (sources, left_out) = gather_for_inject(paths, !write.to_files(), evict)?;
    if sources.iter().all(|s| s.docs.iter().all(|d| d.is_empty())) {
        // Bad input, not bad usage: exit 1 like any other input problem. Never an
        // empty output: Helm 4 refuses it, and `kubectl apply` would apply nothing.
        let names: Vec<&str> = paths
            .iter()
            .map(|p| if p == "-" { read::STDIN } else { p })
            .collect();
        return Err(Error::Invalid {
            file: names.join(", "),
            doc: 1,
            line: 1,
            message: "no Kubernetes objects in the input".into(),
        });
    }
    let mut batch = Batch::new(sources);
    // Written from the documents' text: edited documents may be written as they go.
    batch.freeze = evict.is_some();
    let originals = originals(&batch);
    let outcome = op(&mut batch);
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
    stderr
        .write_all(inject_report(&outcome.reports, left_out).as_bytes())
        .map_err(write_err)?;
    match format {
        StreamFormat::Yaml => {
            let changed = write_edited(&batch, &originals, write, stdout)?;
            if write.in_place {
                writeln!(
                    stderr,
                    "{changed} {} rewritten",
                    if changed == 1 { "file" } else { "files" }
                )
                .map_err(write_err)?;
            }
        }
        StreamFormat::Json => stdout.write_all(&render_json(&batch)).map_err(write_err)?,
    }
    release(batch);
    stdout.flush().map_err(write_err)
}

/// The report on stderr: a line per workload (injected, unchanged, skipped and why)
/// and per generated object, then one line counting everything else, so that the
/// lines that matter are not lost among a line per ConfigMap.
pub fn inject_report(reports: &[inject::ObjectReport], left_out: usize) -> String {
    let mut out = String::new();
    let (mut injected, mut unchanged, mut skipped, mut generated, mut others) = (0, 0, 0, 0, 0);
    let (mut updated, mut uninjected, mut removed) = (0, 0, 0);
    for r in reports {
        let is_workload =
            crate::workload::pod_spec_path(&r.resource.api_version, &r.resource.kind).is_some();
        match r.status {
            inject::Status::Generated => generated += 1,
            inject::Status::Removed => removed += 1,
            _ if !is_workload => {
                others += 1;
                continue;
            }
            inject::Status::Injected => injected += 1,
            inject::Status::Updated(_) => updated += 1,
            inject::Status::Uninjected(_) => uninjected += 1,
            inject::Status::Unchanged(_) => unchanged += 1,
            inject::Status::Skipped(_) => skipped += 1,
        }
        out.push_str(&r.to_text());
        out.push('\n');
    }
    let n = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    // `updated`, `uninjected` and `removed` only when they happened: the line of a
    // first injection stays as it always was.
    let some = |count: usize, what: &str| {
        if count > 0 {
            format!("{count} {what}, ")
        } else {
            String::new()
        }
    };
    out.push_str(&format!(
        "{}: {injected} injected, {}{}{unchanged} unchanged, {skipped} skipped; {} generated; {}{} passed through unchanged",
        n(injected + updated + uninjected + unchanged + skipped, "workload", "workloads"),
        some(updated, "updated"),
        some(uninjected, "uninjected"),
        n(generated, "object", "objects"),
        if removed > 0 { format!("{} removed; ", n(removed, "object", "objects")) } else { String::new() },
        n(others, "other object", "other objects"),
    ));
    if left_out > 0 {
        out.push_str(&format!(
            "; {} left out (kustomization or local-config)",
            n(left_out, "file or object", "files or objects")
        ));
    }
    out.push('\n');
    if injected + updated > 0 {
        out.push_str(REGISTRATION_NOTE);
        out.push('\n');
    }
    out
}

/// Said once per run that gave a workload the identity: the token is only as good
/// as the agent's registration of the pod (README, "When ICMS accepts the token").
pub const REGISTRATION_NOTE: &str = "note: ICMS accepts a worker token only for pods the NVCF agent registers (pods it makes itself); see README, \"When ICMS accepts the token\"";

/// kpt's mark for objects that configure tools and are never applied.
const LOCAL_CONFIG: &str = "config.kubernetes.io/local-config";

fn is_local_config(doc: &crate::manifest::Document) -> bool {
    doc.view()
        .path(&["metadata", "annotations", LOCAL_CONFIG])
        .and_then(Node::as_str)
        .is_some_and(|v| v == "true")
}

/// kustomize's own file names: a directory's build instructions, not objects.
fn is_kustomization(path: &std::path::Path) -> bool {
    matches!(
        path.file_name().and_then(|n| n.to_str()),
        Some("kustomization.yaml" | "kustomization.yml" | "Kustomization")
    )
}

/// Reads `inject`'s input. In a directory, as kpt reads a package, kustomization
/// files and objects marked `config.kubernetes.io/local-config: "true"` are left
/// out (the output feeds `kubectl apply`); a file named on its own, or stdin, is
/// taken whole. Returns the sources and how many files and objects were left out.
fn gather_for_inject(
    paths: &[String],
    leave_out_local: bool,
    evict: Option<read::Evict>,
) -> Result<(Vec<Source>, usize)> {
    let mut sources = Vec::new();
    let mut left_out = 0;
    for p in paths {
        let in_dir = p != "-" && std::path::Path::new(p).is_dir();
        for file in read::expand(std::slice::from_ref(p))? {
            if in_dir && file.as_deref().is_some_and(is_kustomization) {
                left_out += 1;
                continue;
            }
            let input = read::read_input(file)?;
            let hint = looks_like_template(&input.bytes);
            let mut source =
                read::load_with(input, evict).map_err(|e| with_template_hint(e, hint))?;
            if in_dir && leave_out_local {
                let before = source.docs.len();
                source.docs.retain(|d| !is_local_config(d));
                left_out += before - source.docs.len();
            }
            sources.push(source);
        }
    }
    Ok((sources, left_out))
}

/// Whether input that failed to decode is probably a Go template (a Helm chart's
/// `templates/`): then the fix is to render it, not to edit it.
fn looks_like_template(bytes: &[u8]) -> bool {
    bytes.windows(2).any(|w| w == b"{{")
}

const TEMPLATE_HINT: &str = "this looks like an unrendered template ({{ ... }}): render it first (helm template CHART | kubectl nvcf-worker inject -f -), and check the rendered output";

fn with_template_hint(e: Error, hint: bool) -> Error {
    if !hint {
        return e;
    }
    match e {
        Error::Yaml { file, doc, source } => Error::Invalid {
            file,
            doc,
            line: source.line(),
            message: format!("{source}; {TEMPLATE_HINT}"),
        },
        Error::Invalid {
            file,
            doc,
            line,
            message,
        } => Error::Invalid {
            file,
            doc,
            line,
            message: format!("{message}; {TEMPLATE_HINT}"),
        },
        e => e,
    }
}

/// Parses one file for `validate`: Ok(None) for YAML that holds no Kubernetes
/// object, Err(finding) for input that does not decode.
fn load_for_validate(input: Input, hold_trees: bool) -> Loaded {
    let at = |line: u32, index: usize| Location {
        file: Some(input.name.clone()),
        index: Some(index),
        line: Some(line),
    };
    let hint = |message: String| {
        if looks_like_template(&input.bytes) {
            format!("{message}; {TEMPLATE_HINT}")
        } else {
            message
        }
    };
    // The guard finds nothing in an object that is clean on its own whatever else
    // the batch holds (`guard::clean_alone`), so its tree goes as soon as it is
    // read, leaving a skeleton; the kinds of a trio are matched against each other.
    let drop_clean = |d: &mut crate::manifest::Document| {
        default_list_items(d, SourceKind::Stream);
        if hold_trees || d.is_empty() || is_list(d.view()) || read::doc_problem(d).is_some() {
            return;
        }
        crate::manifest::batch::evict(d, &[], |o| {
            if identity::TRIO_KINDS.contains(&o.kind()) || !guard::clean_alone(o) {
                Need::Tree
            } else {
                Need::Skeleton
            }
        })
    };
    let docs = match crate::manifest::parallel::parse_stream_each(&input.bytes, &drop_clean) {
        Ok(d) => d,
        Err(e) => {
            return Err(Box::new(
                Finding::error(hint(e.error.to_string()))
                    .rule(guard::DECODE)
                    .at(at(e.error.line(), e.index)),
            ))
        }
    };
    // A list needs no apiVersion of its own: kubectl applies its items.
    let is_object =
        |n: &Node| n.get("kind").is_some() && (n.get("apiVersion").is_some() || is_list(n));
    if !docs.iter().any(|d| is_object(d.view())) {
        return Ok(None);
    }
    // (A document dropped as read had no problem.)
    for d in docs.iter().filter(|d| !d.is_empty() && !d.evicted) {
        // Reported at the document's line, wherever in it the problem is.
        if let Some((_, problem)) = read::doc_problem(d) {
            return Err(Box::new(
                Finding::error(hint(format!("document {}: {problem}", d.index + 1)))
                    .rule(guard::DECODE)
                    .at(at(d.line.max(d.view().line), d.index)),
            ));
        }
    }
    Ok(Some(Source {
        name: input.name,
        kind: SourceKind::Stream,
        docs,
    }))
}

/// A parsed file, nothing for YAML that holds no object, or the finding that it
/// does not decode (boxed: it is the rare case).
type Loaded = std::result::Result<Option<Source>, Box<Finding>>;
/// A file to load, then its result.
type Slot = std::sync::Mutex<(Option<Option<std::path::PathBuf>>, Option<Result<Loaded>>)>;

/// Reads and parses files on every core: the cost of `validate` is almost all
/// reading and parsing. Results come back in input order; an unreadable file is an
/// I/O error (exit 2), reported for the first such file in order.
fn load_parallel(files: Vec<Option<std::path::PathBuf>>, hold_trees: bool) -> Result<Vec<Loaded>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let load = |f| read::read_input(f).map(|i| load_for_validate(i, hold_trees));
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len());
    if workers <= 1 {
        return files.into_iter().map(load).collect();
    }
    let slots: Vec<Slot> = files
        .into_iter()
        .map(|f| std::sync::Mutex::new((Some(f), None)))
        .collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(slot) = slots.get(i) else { break };
                let file = slot
                    .lock()
                    .expect("no poisoned slot")
                    .0
                    .take()
                    .expect("each file once");
                let loaded = load(file);
                slot.lock().expect("no poisoned slot").1 = Some(loaded);
            });
        }
    });
    slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .expect("no poisoned slot")
                .1
                .expect("every file loaded")
        })
        .collect()
}

/// `validate`: the guard over files, for pre-commit and CI. All files are checked as
/// one batch, so an identity's trio counts wherever in the change it is declared.
pub fn validate(paths: &[String], format: ValidateFormat, stdout: &mut dyn Write) -> Result<()> {
    validate_with(paths, format, false, stdout)
}

/// `validate` holding every document's tree to the end, as it did before trees
/// the guard has nothing to say about were dropped as read: the plain form
/// `tests/streaming.rs` compares `validate` with.
pub fn validate_holding_trees(
    paths: &[String],
    format: ValidateFormat,
    stdout: &mut dyn Write,
) -> Result<()> {
    validate_with(paths, format, true, stdout)
}

fn validate_with(
    paths: &[String],
    format: ValidateFormat,
    hold_trees: bool,
    stdout: &mut dyn Write,
) -> Result<()> {
    let inputs = read::expand(paths)?;
    let files = inputs.len();
    let mut findings = Vec::new();
    let mut sources = Vec::new();
    for r in load_parallel(inputs, hold_trees)? {
        match r {
            Ok(Some(s)) => sources.push(s),
            Ok(None) => {}
            Err(f) => findings.push(*f),
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
        ValidateFormat::Text => {
            for f in &findings {
                writeln!(stdout, "{}", f.to_text()).map_err(write_err)?;
            }
            writeln!(stdout, "{}", report::summary(&findings, files)).map_err(write_err)?;
        }
        ValidateFormat::Json => {
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
        ValidateFormat::Sarif => {
            let cwd = std::env::current_dir().map_err(|e| Error::io("current directory", e))?;
            let mut lines: std::collections::HashMap<String, Option<String>> = Default::default();
            let mut read_line = |file: &str, line: u32| {
                let text = lines
                    .entry(file.to_string())
                    .or_insert_with(|| std::fs::read_to_string(file).ok());
                text.as_deref()?
                    .lines()
                    .nth(line as usize - 1)
                    .map(str::to_string)
            };
            let log = crate::sarif::log(&findings, &cwd, &mut read_line);
            serde_json::to_writer_pretty(&mut *stdout, &log).map_err(|e| write_err(e.into()))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::batch::{Batch, Source, SourceKind};
    use crate::manifest::parse_stream;

    fn single_emitter(batch: &Batch) -> Vec<u8> {
        let docs: Vec<_> = batch
            .sources
            .iter()
            .flat_map(|s| s.docs.iter().filter(|d| !d.is_empty()))
            .collect();
        emit_chunk(&docs, true)
    }

    #[test]
    fn chunked_emission_equals_one_emitter() {
        // Open-ended scalars (`|+`, a plain multi-line root) make libyaml write `...`
        // between documents: chunk seams must not change that.
        let mut input = String::new();
        for i in 0..(DOCS_PER_CHUNK * 3 + 7) {
            match i % 3 {
                0 => input.push_str(&format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}}}\ndata:\n  k: |+\n    kept\n\n")),
                1 => input.push_str(&format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d{i}\ndata: {{a: \"0777\", b: yes}}\n...\n")),
                _ => input.push_str(&format!("---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s{i}\nstringData:\n  x: >-\n    folded\n    text\n")),
            }
        }
        let docs = parse_stream(input.as_bytes()).unwrap();
        let batch = Batch::new(vec![Source {
            name: "t".into(),
            kind: SourceKind::Stream,
            docs,
        }]);
        let (parallel, single) = (render_stream(&batch), single_emitter(&batch));
        let first_difference = parallel
            .iter()
            .zip(&single)
            .position(|(a, b)| a != b)
            .unwrap_or(parallel.len().min(single.len()));
        let around = |b: &[u8]| {
            String::from_utf8_lossy(
                &b[first_difference.saturating_sub(60)..(first_difference + 60).min(b.len())],
            )
            .into_owned()
        };
        assert!(
            parallel == single,
            "differ at byte {first_difference}: {:?} vs {:?}",
            around(&parallel),
            around(&single)
        );
    }
}
