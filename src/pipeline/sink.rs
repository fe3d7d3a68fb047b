//! Sinks: where a processed batch goes. The stream in YAML (edits spliced into the
//! text as read) or JSON, a unified diff, the files in place (all or none), the
//! per-object report, the findings as text, JSON or SARIF, and a ResourceList with
//! its `results`.

use std::io::Write;

use crate::error::{Error, Result};
use crate::manifest::batch::{is_list, list_items, Batch};
use crate::manifest::read;
use crate::manifest::{from_json, splice, to_json, Document, Node, YamlWriter};
use crate::output;
use crate::report::{self, Finding, ObjectReport, Severity, Status};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StreamFormat {
    Yaml,
    Json,
}

/// `validate`'s formats: the report's, and SARIF for code scanning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ValidateFormat {
    Text,
    /// A report.nvcf.io/v1alpha1 ValidationReport, as the live commands' reports.
    Json,
    Yaml,
    /// SARIF 2.1.0, for code scanning (GitHub, GitLab, Azure DevOps).
    Sarif,
    /// JUnit XML (GitLab, Jenkins, Azure DevOps test reports): a testcase per file.
    Junit,
    /// GitHub Actions workflow annotations, a `::error`/`::warning` line per finding.
    Github,
}

pub(crate) fn write_err(e: std::io::Error) -> Error {
    Error::io("<stdout>", e)
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

fn emit_chunk(docs: &[&Document], last_chunk: bool) -> Vec<u8> {
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
    let json = batch.sources.iter().filter(|s| has_text(s)).all(is_json);
    if json && batch.sources.iter().any(has_text) {
        // JSON in, JSON out: one object, or a List of all.
        let docs: Vec<&Document> = batch.sources.iter().flat_map(|s| &s.docs).collect();
        return out.write_all(&json_docs(&docs));
    }
    if batch.sources.first().is_some_and(is_json) {
        // kubectl reads a stream that starts with `{` as JSON: YAML follows, so
        // the stream must start as YAML.
        out.write_all(b"---\n")?;
    }
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

/// One source's documents as its new file content: JSON stays JSON (one object,
/// or a List of all).
pub fn render_source(docs: &[Document]) -> Vec<u8> {
    if read_as_json(docs) {
        return json_docs(&docs.iter().collect::<Vec<_>>());
    }
    let mut out = Vec::new();
    splice::write_docs(docs, &mut out);
    out
}

fn has_text(s: &crate::manifest::batch::Source) -> bool {
    s.docs.iter().any(|d| d.text.is_some())
}

/// Whether kubectl reads the source as JSON (it starts with `{`).
fn is_json(s: &crate::manifest::batch::Source) -> bool {
    read_as_json(&s.docs)
}

/// Whether the text these documents were read from is one kubectl reads as JSON.
fn read_as_json(docs: &[Document]) -> bool {
    docs.iter()
        .find_map(|d| d.text.as_deref())
        .is_some_and(|t| read::sniffs_json(t))
}

/// Documents read from JSON (edited in place, as JSON) and new ones as one JSON
/// value kubectl reads: the one object as written, or a v1 List of all of them,
/// a List's items taken into it (kubectl refuses a List inside a List).
fn json_docs(docs: &[&Document]) -> Vec<u8> {
    let texts: Vec<Vec<u8>> = docs
        .iter()
        .filter(|d| !d.is_empty())
        .map(|d| {
            let bytes = splice::render_doc(d);
            let bytes = bytes.strip_prefix(b"---\n").unwrap_or(&bytes);
            let bytes = bytes.strip_suffix(b"...\n").unwrap_or(bytes);
            bytes.trim_ascii().to_vec()
        })
        .collect();
    let mut out = Vec::new();
    if texts.len() == 1 {
        let edited = docs
            .iter()
            .any(|d| !d.is_empty() && !matches!(d.edited, crate::manifest::Edited::No));
        match unwrapped(&texts[0]).filter(|_| edited) {
            Some(object) => out.extend_from_slice(&object),
            None => out.extend_from_slice(&texts[0]),
        }
        out.push(b'\n');
        return out;
    }
    let values: Vec<serde_json::Value> = texts
        .iter()
        .map(|t| serde_json::from_slice(t).expect("a JSON document is written as JSON"))
        .collect();
    let is_list = |v: &serde_json::Value| v.get("items").is_some();
    if !values.iter().any(is_list) {
        // Each object as it was written, indented into the List's items.
        out.extend_from_slice(WRAP_HEAD);
        for (i, text) in texts.iter().enumerate() {
            for (j, line) in text.split(|&b| b == b'\n').enumerate() {
                if j > 0 {
                    out.push(b'\n');
                }
                // (JSON has no multi-line token: indenting every line is safe.)
                if !line.is_empty() {
                    out.extend_from_slice(b"    ");
                }
                out.extend_from_slice(line);
            }
            out.extend_from_slice(if i + 1 < texts.len() { b",\n" } else { b"\n" });
        }
        out.extend_from_slice(WRAP_TAIL);
        out.push(b'\n');
        return out;
    }
    let mut items = Vec::new();
    for v in values {
        match v {
            serde_json::Value::Object(mut m) if m.contains_key("items") => {
                if let Some(serde_json::Value::Array(a)) = m.remove("items") {
                    items.extend(a);
                }
            }
            v => items.push(v),
        }
    }
    json_list(items)
}

/// How `json_docs` wraps objects written as they were into a List.
const WRAP_HEAD: &[u8] = b"{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": [\n";
const WRAP_TAIL: &[u8] = b"  ]\n}";

/// The one object of a List `json_docs` wrapped, as it was written before,
/// once an edit (uninject taking the trio out) left it alone: so that uninject
/// gives back the file inject was given. `None` for any other List.
fn unwrapped(text: &[u8]) -> Option<Vec<u8>> {
    let inner = text.strip_prefix(WRAP_HEAD)?.strip_suffix(WRAP_TAIL)?;
    let inner = inner.strip_suffix(b"\n").unwrap_or(inner);
    let value: serde_json::Value = serde_json::from_slice(text).ok()?;
    if value.as_object()?.len() != 3 || value["items"].as_array()?.len() != 1 {
        return None;
    }
    let mut out = Vec::new();
    for (i, line) in inner.split(|&b| b == b'\n').enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        if !line.is_empty() {
            out.extend_from_slice(line.strip_prefix(b"    ")?);
        }
    }
    // The object alone, and nothing else (no trailing comma).
    serde_json::from_slice::<serde_json::Value>(&out).ok()?;
    Some(out)
}

/// A v1 List of `items`, pretty-printed.
fn json_list(items: Vec<serde_json::Value>) -> Vec<u8> {
    let value = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    let mut out = serde_json::to_vec_pretty(&value).expect("JSON values serialize");
    out.push(b'\n');
    out
}

/// Writes every non-empty document of a batch built in memory (no source text)
/// anew. Large batches are emitted on the batch's workers, chunk by chunk, and
/// written in order as chunks finish, so the output is never held whole in memory.
fn emit_stream(batch: &Batch, out: &mut dyn Write) -> std::io::Result<()> {
    let docs: Vec<&Document> = batch
        .sources
        .iter()
        .flat_map(|s| s.docs.iter().filter(|d| !d.is_empty()))
        .collect();
    let count = docs.len().div_ceil(DOCS_PER_CHUNK);
    // (chunk, whether it is the last)
    let chunks: Vec<(&[&Document], bool)> = docs
        .chunks(DOCS_PER_CHUNK)
        .enumerate()
        .map(|(i, chunk)| (chunk, i + 1 == count))
        .collect();
    batch.workers.map_in_order(
        &chunks,
        |&(chunk, last)| emit_chunk(chunk, last),
        |bytes| out.write_all(&bytes),
    )
}

/// The objects as JSON, with kubectl's values: one object alone, several in a v1 List.
pub fn render_json(batch: &Batch) -> Vec<u8> {
    let mut objects: Vec<serde_json::Value> = Vec::new();
    let mut lists = 0;
    for source in &batch.sources {
        for doc in source.docs.iter().filter(|d| !d.is_empty()) {
            let view = doc.view();
            if is_list(view) {
                // kubectl refuses a List inside a List: its items join the output.
                lists += 1;
                objects.extend(list_items(view).iter().map(to_json));
            } else {
                objects.push(to_json(view));
            }
        }
    }
    if objects.len() == 1 && lists == 0 {
        let mut out = serde_json::to_vec_pretty(&objects[0]).expect("JSON values serialize");
        out.push(b'\n');
        return out;
    }
    json_list(objects)
}

/// Where a transformed stream goes; shared by the commands that edit manifests.
#[derive(clap::Args, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteArgs {
    /// Rewrite the input files instead of printing them: all files or none (each is
    /// written beside and renamed over, permissions kept); stdin cannot be rewritten.
    #[arg(short = 'i', long = "in-place", conflicts_with = "diff")]
    pub in_place: bool,
    /// Print a unified diff of what would change instead of the stream; exits 1 when
    /// there are changes, as `kubectl diff` and `diff` do.
    #[arg(long)]
    pub diff: bool,
    /// Print no line per object and no summary on stderr: only warnings and errors.
    #[arg(short = 'q', long)]
    pub quiet: bool,
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
/// (from `originals`, taken before editing), `utf16` the encodings files were read
/// in (`load::Package`). Returns how many files changed.
pub fn write_edited(
    batch: &Batch,
    originals: &[Option<std::sync::Arc<Vec<u8>>>],
    utf16: &[Option<crate::manifest::read::Utf16>],
    write: WriteArgs,
    stdout: &mut dyn Write,
) -> Result<usize> {
    if !write.to_files() {
        write_stream(batch, stdout).map_err(write_err)?;
        return Ok(0);
    }
    let mut changed = Vec::new();
    for (i, (source, original)) in batch.sources.iter().zip(originals).enumerate() {
        let Some(original) = original else { continue };
        let bytes = render_source(&source.docs);
        if bytes != **original {
            let encoding = utf16.get(i).copied().flatten();
            changed.push((source.name.as_str(), original.as_slice(), bytes, encoding));
        }
    }
    if write.diff {
        for (name, old, new, _) in &changed {
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
        // A file read as UTF-16 is written back in its own encoding.
        for (_, _, bytes, encoding) in &mut changed {
            if let Some(enc) = encoding {
                *bytes = enc.encode(bytes);
            }
        }
        let files: Vec<(&str, &[u8])> = changed.iter().map(|(n, _, b, _)| (*n, &b[..])).collect();
        replace_files(&files, batch.workers)?;
    }
    Ok(changed.len())
}

/// Replaces every file or none (`files`: names and the bytes that go to disk):
/// each new content is written to a temporary file beside its target (same
/// directory, so the rename cannot cross file systems), with the target's owner,
/// group and mode, and only when all are written are they renamed over their
/// targets. On a failure before the renames, or SIGINT or SIGTERM, the temporary
/// files are removed and no file has changed (a signal then ends the process as it
/// would have). A target that is not a regular file, or has other hard links (a
/// rename would split them), is refused first. Each target is held open until
/// renamed over, so that freeing it is not the rename's work (`Held`).
pub fn replace_files(files: &[(&str, &[u8])], workers: crate::work::Workers) -> Result<()> {
    // Each target is looked up once: what is refused, where its real file is and
    // its owner, mode and file system all come from that one look.
    let targets = files
        .iter()
        .map(|(name, _)| Target::find(name))
        .collect::<Result<Vec<_>>>()?;
    let mut held = Held::open(&targets);
    let guard = signals::Guard::install();
    let mut temps: Vec<std::path::PathBuf> = Vec::new();
    let cleanup = |temps: &[std::path::PathBuf]| {
        for temp in temps {
            let _ = std::fs::remove_file(temp);
        }
    };
    // Written on the run's workers: per file a create, a write, an owner and mode
    // and a name, each a system call that waits (unnamed files are created side by
    // side, see `open_temp`); a file still to write after a signal is not.
    let pid = std::process::id();
    let jobs: Vec<(&Target, &[u8])> = targets.iter().zip(files).map(|(t, f)| (t, f.1)).collect();
    let written = workers.map(&jobs, |(target, bytes)| {
        (!guard.caught()).then(|| write_beside(target, bytes, pid))
    });
    let mut failed = None;
    for w in written {
        match w {
            Some(Ok(temp)) => temps.push(temp),
            Some(Err(e)) => failed = failed.or(Some(e)),
            None => {}
        }
    }
    if guard.caught() {
        cleanup(&temps);
        guard.reraise();
    }
    if let Some(e) = failed {
        cleanup(&temps);
        return Err(e);
    }
    // Every file was written: the temporaries are the targets', in order.
    debug_assert_eq!(temps.len(), targets.len());
    if let Err(e) = sync_written(&targets, &temps) {
        cleanup(&temps);
        return Err(e);
    }
    // Each replaced file is let go behind its rename, freed on other threads
    // while the renames go on (`Held`).
    workers.drop_behind(|later| {
        for (i, (temp, target)) in temps.iter().zip(&targets).enumerate() {
            if let Err(e) = std::fs::rename(temp, &target.path) {
                cleanup(&temps[i..]);
                let done: Vec<String> = files[..i].iter().map(|(n, _)| n.to_string()).collect();
                let name = target.path.display().to_string();
                return Err(if done.is_empty() {
                    Error::io(name, e)
                } else {
                    Error::io(format!("{name} (already replaced: {})", done.join(", ")), e)
                });
            }
            if let Some(fd) = held.release(i) {
                later(fd);
            }
        }
        Ok(())
    })?;
    // A signal during the renames ends the process once they are all done.
    if guard.caught() {
        guard.reraise();
    }
    Ok(())
}

/// Puts the temporary files' contents on disk before any rename makes them the
/// files (a crash then leaves each file old or new, never empty): on Linux one
/// `syncfs` per file system they are on (each beside its target, so on the
/// target's), elsewhere each was synced as written.
fn sync_written(targets: &[Target], temps: &[std::path::PathBuf]) -> Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        use std::os::unix::io::AsRawFd;
        let mut synced = std::collections::HashSet::new();
        for (target, temp) in targets.iter().zip(temps) {
            if synced.insert(target.meta.dev()) {
                let name = temp.display().to_string();
                let f = std::fs::File::open(temp).map_err(|e| Error::io(&name, e))?;
                // SAFETY: a valid, open file descriptor for the call's duration.
                if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
                    return Err(Error::io(name, std::io::Error::last_os_error()));
                }
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (targets, temps);
    Ok(())
}

/// The files the renames will replace, held open (`O_PATH`: no access needed)
/// from before the temporaries are written until each is renamed over.
///
/// Why: the rename that replaces a file drops its last link, and the file system
/// then frees it inside `rename`, under the directory's lock, one file after the
/// other. On ext4 without a journal, mounted with `discard`, each free waits for
/// a discard on the device: renames were 145-185 ms of an in-place run on 2000
/// files. Held, a file is freed at its last close, which `replace_files` leaves to
/// other threads while the renames go on: 18 ms of renames, the frees beside them.
/// Only where that was measured, ext4 and tmpfs: NFS and FUSE keep a replaced file
/// that is still open under a hidden name (`.nfsXXXX`, `.fuse_hidden*`), which a
/// crash would leave behind.
///
/// Taken on the calling thread before any worker starts, so that the descriptor
/// table grows without waiting for other threads. If they would not fit under the
/// soft limit on open files, it is raised toward the hard one (as Go raises it at
/// start) and put back once they are let go; past the limit, files are replaced
/// without a hold.
struct Held {
    fds: Vec<Option<std::fs::File>>,
    #[cfg(target_os = "linux")]
    limit: Option<libc::rlimit>,
}

impl Held {
    /// Descriptors left free for the rest of the run (the standard streams, a
    /// temporary file per worker, the `syncfs`).
    #[cfg(target_os = "linux")]
    const SPARE: u64 = 256;

    #[cfg(target_os = "linux")]
    fn open(targets: &[Target]) -> Held {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let mut by_dev = std::collections::HashMap::new();
        let wanted: Vec<bool> = targets
            .iter()
            .map(|t| {
                *by_dev
                    .entry(t.meta.dev())
                    .or_insert_with(|| frees_in_rename(&t.path))
            })
            .collect();
        let count = wanted.iter().filter(|w| **w).count() as u64;
        let mut held = Held {
            fds: Vec::with_capacity(targets.len()),
            limit: None,
        };
        if count == 0 {
            return held;
        }
        // SAFETY: getrlimit and setrlimit only fill or read the struct given.
        let mut budget = unsafe {
            let mut limit = std::mem::zeroed::<libc::rlimit>();
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                return held;
            }
            let want = count + Self::SPARE;
            if limit.rlim_cur < want && limit.rlim_max > limit.rlim_cur {
                let raised = libc::rlimit {
                    rlim_cur: want.min(limit.rlim_max),
                    rlim_max: limit.rlim_max,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                    held.limit = Some(limit);
                    limit.rlim_cur = raised.rlim_cur;
                }
            }
            limit.rlim_cur.saturating_sub(Self::SPARE)
        };
        for (target, wanted) in targets.iter().zip(wanted) {
            // A file that cannot be held is replaced without: nothing is lost.
            let hold = (wanted && budget > 0)
                .then(|| {
                    std::fs::OpenOptions::new()
                        .read(true)
                        .custom_flags(libc::O_PATH)
                        .open(&target.path)
                        .ok()
                })
                .flatten();
            budget -= hold.is_some() as u64;
            held.fds.push(hold);
        }
        held
    }

    #[cfg(not(target_os = "linux"))]
    fn open(_: &[Target]) -> Held {
        Held { fds: Vec::new() }
    }

    /// Target `i`'s hold, to let go once it is renamed over.
    fn release(&mut self, i: usize) -> Option<std::fs::File> {
        self.fds.get_mut(i).and_then(Option::take)
    }
}

#[cfg(target_os = "linux")]
impl Drop for Held {
    fn drop(&mut self) {
        // Holds still here close right after (their files were not replaced, so
        // nothing is freed); until then the limit may be below them, which Linux
        // allows.
        if let Some(limit) = self.limit {
            // SAFETY: only reads the struct given.
            unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
        }
    }
}

/// Whether `path` is on a file system that frees a replaced file inside `rename`
/// and keeps one held open as an orphan, nothing more (see `Held`): ext4 (or ext2
/// or ext3, which share its magic number) and tmpfs.
#[cfg(target_os = "linux")]
fn frees_in_rename(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path and a struct for statfs to fill.
    let fs = unsafe {
        let mut fs = std::mem::zeroed::<libc::statfs>();
        if libc::statfs(path.as_ptr(), &mut fs) != 0 {
            return false;
        }
        fs
    };
    [libc::EXT4_SUPER_MAGIC, libc::TMPFS_MAGIC]
        .iter()
        .any(|m| fs.f_type as u64 == *m as u64)
}

/// A file to replace: its name as given, its real file (a symlink is followed, so
/// the link stays a link) and that file's metadata.
struct Target<'a> {
    name: &'a str,
    path: std::path::PathBuf,
    meta: std::fs::Metadata,
}

impl<'a> Target<'a> {
    /// Finds `name`'s real file, refusing one a rename would not replace
    /// faithfully: not a regular file (a FIFO, a device), or a file with other
    /// hard links.
    fn find(name: &'a str) -> Result<Target<'a>> {
        use std::os::unix::fs::MetadataExt;
        let io = |e| Error::io(name, e);
        // Only a link needs resolving (its file is the one replaced); a file is
        // replaced where it is named, which spares a lookup per path component.
        let link = std::fs::symlink_metadata(name).map_err(io)?;
        let (path, meta) = match link.file_type().is_symlink() {
            true => {
                let path = std::fs::canonicalize(name).map_err(io)?;
                let meta = std::fs::metadata(&path).map_err(io)?;
                (path, meta)
            }
            false => (std::path::PathBuf::from(name), link),
        };
        let t = meta.file_type();
        if !t.is_file() {
            let what = crate::manifest::read::special_file(&t).unwrap_or("not a regular file");
            return Err(refused(
                name,
                format!("{what}: --in-place rewrites regular files only; print the stream instead"),
            ));
        }
        if meta.nlink() > 1 {
            return Err(refused(
                name,
                format!(
                    "has {} hard links; rewriting it in place would split them (the others would keep the old text): print the stream, or make it a file of its own (cp) first",
                    meta.nlink()
                ),
            ));
        }
        Ok(Target { name, path, meta })
    }
}

/// A file the tool will not rewrite: an input problem (exit 1), naming it.
fn refused(name: &str, message: String) -> Error {
    Error::io(name, std::io::Error::other(message))
}

/// Writes `bytes` to a new temporary file beside `target`'s real file, with its
/// owner, group and mode, and names it only then (`open_temp`), returning its name.
fn write_beside(target: &Target, bytes: &[u8], pid: u32) -> Result<std::path::PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let meta = &target.meta;
    let file_name = target
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = target
        .path
        .with_file_name(format!(".{file_name}.nvcf-worker-{pid}.tmp"));
    // Whether `temp` names the file yet: only then is there anything to remove.
    let mut named = false;
    let written = (|| {
        let mut f;
        (f, named) = open_temp(&target.path, &temp)?;
        f.write_all(bytes)?;
        // Owner first: changing it clears the setuid and setgid bits, which the
        // mode then sets again.
        let mine = f.metadata()?;
        if meta.uid() != mine.uid() || meta.gid() != mine.gid() {
            std::os::unix::fs::fchown(&f, Some(meta.uid()), Some(meta.gid()))?;
        }
        f.set_permissions(meta.permissions())?;
        // Linux: one syncfs per file system before the renames (`sync_written`)
        // instead of an fsync per file, which was most of an in-place run's time.
        #[cfg(not(target_os = "linux"))]
        f.sync_all()?;
        if !named {
            name_temp(&f, &temp)?;
            named = true;
        }
        Ok(())
    })();
    match written {
        Ok(()) => Ok(temp),
        Err(e) => {
            if named {
                let _ = std::fs::remove_file(&temp);
            }
            Err(Error::io(target.name, e))
        }
    }
}

/// Opens a new temporary file for `target`'s new content: on Linux an unnamed one
/// in its directory (`O_TMPFILE`, named `temp` once written, see `name_temp`),
/// else, or where the file system has no unnamed files, one created as `temp`.
/// Returns the file and whether it is named `temp` already.
///
/// Why unnamed: creating a named file holds its directory's lock while the file
/// system finds a free inode, and ext4 without a journal walks past every inode
/// deleted in the last minutes to find one, so the workers queued behind each
/// other (one spinning on the lock) and the walk ran on one thread. An unnamed file
/// takes no directory lock; naming it afterwards is a short directory update.
fn open_temp(
    target: &std::path::Path,
    temp: &std::path::Path,
) -> std::io::Result<(std::fs::File, bool)> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => std::path::Path::new("."),
        };
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .mode(0o600)
            .open(dir)
        {
            Ok(f) => return Ok((f, false)),
            // The file system (or kernel) has no unnamed files: name it at once.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
                ) => {}
            Err(e) => return Err(e),
        }
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(temp)?;
    Ok((f, true))
}

/// Gives an unnamed temporary file (`open_temp`) its name `temp`, failing as a
/// named create would if the name is taken. Through `/proc/self/fd` (a link
/// needs no privilege there); without `/proc`, `AT_EMPTY_PATH`, which needs
/// CAP_DAC_READ_SEARCH.
#[cfg(target_os = "linux")]
fn name_temp(f: &std::fs::File, temp: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::AsRawFd;
    let c = |b: &[u8]| std::ffi::CString::new(b).map_err(std::io::Error::other);
    let to = c(temp.as_os_str().as_bytes())?;
    let proc = c(format!("/proc/self/fd/{}", f.as_raw_fd()).as_bytes())?;
    // SAFETY: NUL-terminated paths and a valid descriptor for the calls' duration.
    let linked = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            proc.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if linked == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::ENOENT) {
        return Err(e);
    }
    let empty = c(b"")?;
    // SAFETY: as above.
    match unsafe {
        libc::linkat(
            f.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

#[cfg(not(target_os = "linux"))]
fn name_temp(_: &std::fs::File, _: &std::path::Path) -> std::io::Result<()> {
    unreachable!("only Linux opens unnamed temporary files")
}

/// SIGINT and SIGTERM while files are replaced: caught, so that the temporary
/// files are removed, then raised again with the handlers there were before.
mod signals {
    use std::sync::atomic::{AtomicI32, Ordering};

    /// The signal caught while a guard is installed (0: none). Process-wide, as
    /// signal dispositions are; a handler may only store an atomic.
    static CAUGHT: AtomicI32 = AtomicI32::new(0);

    const SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

    extern "C" fn record(sig: libc::c_int) {
        CAUGHT.store(sig, Ordering::SeqCst);
    }

    pub struct Guard {
        previous: Vec<(libc::c_int, libc::sigaction)>,
    }

    impl Guard {
        pub fn install() -> Guard {
            CAUGHT.store(0, Ordering::SeqCst);
            let mut previous = Vec::new();
            for sig in SIGNALS {
                // SAFETY: a handler that only stores an atomic; the old action is
                // kept and restored on drop.
                unsafe {
                    let mut old: libc::sigaction = std::mem::zeroed();
                    // A signal the caller ignores (`nohup`, a shell's background
                    // job) stays ignored: it was never going to end the run.
                    if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                        || old.sa_sigaction == libc::SIG_IGN
                    {
                        continue;
                    }
                    let mut action: libc::sigaction = std::mem::zeroed();
                    action.sa_sigaction = record as extern "C" fn(libc::c_int) as usize;
                    libc::sigemptyset(&mut action.sa_mask);
                    if libc::sigaction(sig, &action, &mut old) == 0 {
                        previous.push((sig, old));
                    }
                }
            }
            Guard { previous }
        }

        pub fn caught(&self) -> bool {
            CAUGHT.load(Ordering::SeqCst) != 0
        }

        /// Restores the handlers and raises the caught signal again: the process
        /// ends as the signal would have ended it.
        pub fn reraise(self) -> ! {
            let sig = CAUGHT.load(Ordering::SeqCst);
            drop(self);
            // SAFETY: raising a signal with its previous (usually default) action.
            unsafe {
                libc::raise(sig);
            }
            // A handler that did not end the process: exit as a shell would report it.
            std::process::exit(128 + sig);
        }
    }

    impl Drop for Guard {
        fn drop(&mut self) {
            for (sig, old) in &self.previous {
                // SAFETY: restoring the action saved by `install`.
                unsafe {
                    libc::sigaction(*sig, old, std::ptr::null_mut());
                }
            }
        }
    }
}

/// The report on stderr: a line per workload (injected, unchanged, skipped and why)
/// and per generated object, then one line counting everything else, so that the
/// lines that matter are not lost among a line per ConfigMap.
pub fn object_report(reports: &[ObjectReport], left_out: &[String]) -> String {
    let mut out = String::new();
    let (mut injected, mut unchanged, mut skipped, mut generated, mut others) = (0, 0, 0, 0, 0);
    let (mut updated, mut uninjected, mut removed) = (0, 0, 0);
    for r in reports {
        let is_workload =
            crate::workload::pod_spec_path(&r.resource.api_version, &r.resource.kind).is_some();
        match r.status {
            Status::Generated => generated += 1,
            Status::Removed => removed += 1,
            _ if !is_workload => {
                others += 1;
                continue;
            }
            Status::Injected => injected += 1,
            Status::Updated(_) => updated += 1,
            Status::Uninjected(_) => uninjected += 1,
            Status::Unchanged(_) => unchanged += 1,
            Status::Skipped(_) => skipped += 1,
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
    if !left_out.is_empty() {
        out.push_str(&format!(
            "; {} left out",
            n(left_out.len(), "file or object", "files or objects")
        ));
    }
    out.push('\n');
    for l in left_out {
        out.push_str(&format!("left out: {l}\n"));
    }
    if injected + updated > 0 {
        out.push_str(REGISTRATION_NOTE);
        out.push('\n');
    }
    out
}

/// Said once per run that gave a workload the identity: the token is only as good
/// as the agent's registration of the pod (README, "When ICMS accepts the token").
pub const REGISTRATION_NOTE: &str = "note: ICMS accepts a worker token only for pods the NVCF agent registers (pods it makes itself); see README, \"When ICMS accepts the token\"";

/// The findings of a check of `files` as `format` says, then flushed; with
/// `fail_on_warn`, JUnit reports warnings as failures too.
pub fn findings(
    findings: &[Finding],
    names: &[String],
    format: ValidateFormat,
    fail_on_warn: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let files = names.len();
    match format {
        ValidateFormat::Junit => out
            .write_all(crate::ci::junit(findings, names, fail_on_warn).as_bytes())
            .map_err(write_err)?,
        ValidateFormat::Github => out
            .write_all(crate::ci::github(findings, &mut line_reader()).as_bytes())
            .map_err(write_err)?,
        ValidateFormat::Text => {
            for f in findings {
                writeln!(out, "{}", f.to_text()).map_err(write_err)?;
            }
            writeln!(out, "{}", report::summary(findings, files)).map_err(write_err)?;
        }
        ValidateFormat::Json | ValidateFormat::Yaml => {
            let fields = serde_json::json!({
                "files": files,
                "errors": findings.iter().filter(|f| f.severity == Severity::Error).count(),
                "warnings": findings.iter().filter(|f| f.severity == Severity::Warning).count(),
                "findings": findings,
            });
            let format = match format {
                ValidateFormat::Yaml => output::Format::Yaml,
                _ => output::Format::Json,
            };
            output::write(output::VALIDATION_REPORT, fields, format, out)?;
        }
        ValidateFormat::Sarif => {
            let cwd = std::env::current_dir().map_err(|e| Error::io("current directory", e))?;
            let log = crate::sarif::log(findings, &cwd, &mut line_reader());
            serde_json::to_writer_pretty(&mut *out, &log).map_err(|e| write_err(e.into()))?;
            writeln!(out).map_err(write_err)?;
        }
    }
    out.flush().map_err(write_err)
}

/// A file's line's text by number (each file read once), for the formats that
/// give a finding's column; None for stdin or a file gone since.
fn line_reader() -> impl FnMut(&str, u32) -> Option<String> {
    let mut lines: std::collections::HashMap<String, Option<String>> = Default::default();
    move |file: &str, line: u32| {
        let text = lines
            .entry(file.to_string())
            .or_insert_with(|| std::fs::read_to_string(file).ok());
        text.as_deref()?
            .lines()
            .nth(line as usize - 1)
            .map(str::to_string)
    }
}

/// The ResourceList `doc` with `findings` added to its `results`, as kpt wrote it
/// with the edits spliced in: items change only where they are edited.
pub fn resource_list(doc: Document, findings: &[Finding]) -> (Vec<u8>, Document) {
    let doc = with_results(doc, findings);
    let bytes = render_source(std::slice::from_ref(&doc));
    (bytes, doc)
}

/// The ResourceList with the findings added to its `results`.
fn with_results(mut doc: Document, findings: &[Finding]) -> Document {
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
    doc
}

/// Whether every item read as a document (`load::resource_list_items`) and edited
/// is written as the whole ResourceList's splice writes it: its edits spliced
/// into its text, or, for an item with aliases or merge keys (`refs`, in
/// order), written anew; each is written ahead (`Edited::Frozen`) to find out,
/// its tree as read dropped.
pub fn items_spliced(items: &mut crate::manifest::batch::Source, refs: &[u32]) -> bool {
    use crate::manifest::parse::{Edited, Frozen};
    for d in items.docs.iter_mut().filter(|d| d.text.is_some()) {
        if matches!(d.edited, Edited::Spliced(_)) {
            d.edited = Edited::Frozen(splice::frozen(d));
        }
        // (Its region starts at its `---`: bytes only when spliced it was not.)
        let anew = matches!(d.edited, Edited::Frozen(Frozen::Bytes(_)));
        let has_refs = refs.binary_search(&(d.index as u32)).is_ok();
        if matches!(d.edited, Edited::Rewritten) || (anew && !has_refs) {
            return false;
        }
    }
    true
}

/// Writes a ResourceList whose items were read as a stream
/// (`load::resource_list_items`) to `out` as `resource_list` writes it whole: the
/// bytes before its items, each item written as the document it was read as
/// (`items`; `None` writes them as they came), the rest of the ResourceList with
/// the findings in its `results`. The items go out about a MiB at a time, so the
/// output is never held whole.
pub fn resource_list_items(
    laid: &crate::pipeline::load::Laid,
    items: Option<&crate::manifest::batch::Source>,
    findings: &[Finding],
    out: &mut dyn Write,
) -> Result<()> {
    let head = laid.head();
    let shell = {
        let shell = with_results(laid.shell.clone(), findings);
        render_source(std::slice::from_ref(&shell))
    };
    // `results` are added at the end of the ResourceList, after its items.
    if !shell.starts_with(head) {
        return Err(Error::io(
            "<stdout>",
            std::io::Error::other("results written before the items: a bug"),
        ));
    }
    out.write_all(head).map_err(write_err)?;
    let mut buf = Vec::new();
    match items {
        None => laid.write_items_as_read(&mut buf),
        Some(items) => {
            for doc in &items.docs {
                let mut bytes = splice::render_doc(doc);
                if doc.text.is_none() && laid.crlf {
                    // Spliced into a ResourceList that breaks lines so, as items.
                    bytes = String::from_utf8_lossy(&bytes)
                        .replace('\n', "\r\n")
                        .into_bytes();
                }
                // (An edited item has no short lines: `krm::run_items`.)
                let item = (doc.text.is_some()).then_some(doc.index);
                laid.write_item(&bytes, item, &mut buf);
                if buf.len() >= SPILL {
                    out.write_all(&buf).map_err(write_err)?;
                    buf.clear();
                }
            }
        }
    }
    out.write_all(&buf).map_err(write_err)?;
    out.write_all(&shell[head.len()..]).map_err(write_err)?;
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

    /// On Linux a temporary file has no name while it is written (so a crash then
    /// leaves nothing behind, and creating it takes no directory lock), and gets its
    /// name only through `name_temp`, which never replaces a file already there.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_temporary_file_is_unnamed_until_written() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("web.yaml");
        let temp = dir.path().join(".web.yaml.tmp");
        let listed = || {
            let mut names: Vec<String> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        let (mut f, named) = open_temp(&target, &temp).unwrap();
        assert!(!named, "this file system has O_TMPFILE");
        f.write_all(b"new\n").unwrap();
        assert_eq!(listed(), Vec::<String>::new());
        name_temp(&f, &temp).unwrap();
        drop(f);
        assert_eq!(listed(), vec![".web.yaml.tmp".to_string()]);
        assert_eq!(std::fs::read(&temp).unwrap(), b"new\n");

        // A name already taken stays as it was.
        let (mut g, _) = open_temp(&target, &temp).unwrap();
        g.write_all(b"other\n").unwrap();
        let e = name_temp(&g, &temp).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EEXIST), "{e}");
        drop(g);
        assert_eq!(std::fs::read(&temp).unwrap(), b"new\n");
        assert_eq!(listed(), vec![".web.yaml.tmp".to_string()]);
    }

    /// A file renamed over while held stays, unlinked, until its hold is let go:
    /// freeing it is the release's work, not the rename's.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_replaced_file_is_held_past_its_rename_until_released() {
        let mut provoked = Vec::new();
        for base in [std::env::temp_dir(), std::path::PathBuf::from("/dev/shm")] {
            if !base.is_dir() || !frees_in_rename(&base) {
                continue;
            }
            let dir = tempfile::tempdir_in(&base).unwrap();
            let names: Vec<String> = (0..3)
                .map(|i| dir.path().join(format!("w{i}.yaml")).display().to_string())
                .collect();
            for n in &names {
                std::fs::write(n, b"old\n").unwrap();
            }
            let targets: Vec<Target> = names.iter().map(|n| Target::find(n).unwrap()).collect();
            let mut held = Held::open(&targets);
            assert!(
                held.fds.iter().all(Option::is_some),
                "{base:?}: every file held"
            );
            let new = dir.path().join("new");
            std::fs::write(&new, b"new\n").unwrap();
            std::fs::rename(&new, &names[0]).unwrap();
            let hold = held.release(0).expect("the first file's hold");
            let links = std::os::unix::fs::MetadataExt::nlink(&hold.metadata().unwrap());
            assert_eq!(links, 0, "{base:?}: replaced, still held");
            assert!(held.release(0).is_none(), "a hold is let go once");
            assert_eq!(std::fs::read(&names[0]).unwrap(), b"new\n");
            provoked.push(base);
        }
        assert!(
            !provoked.is_empty(),
            "neither the temp dir nor /dev/shm is ext4 or tmpfs"
        );
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
        let mut batch = Batch::new(vec![Source {
            name: "t".into(),
            kind: SourceKind::Stream,
            docs,
        }]);
        batch.workers = crate::work::Workers::new(2);
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
