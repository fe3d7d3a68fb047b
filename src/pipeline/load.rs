//! The loader: files, directories, stdin and a ResourceList read into sources,
//! with the memory strategy the processor chose (`Evict`: what it will not need is
//! dropped as it is read). Knows how a package is laid out (kpt's local-config
//! objects, kustomize's build files, unrendered templates), nothing of NVCF.

use crate::error::{Error, Result};
use crate::manifest::batch::{is_list, Source, SourceKind};
use crate::manifest::read::{self, default_list_items, Evict, Input};
use crate::manifest::{attach_text, parse_stream, splice, Document, Node};
use crate::work::Workers;

/// kpt's mark for objects that configure tools and are never applied.
pub const LOCAL_CONFIG: &str = "config.kubernetes.io/local-config";

fn is_local_config(doc: &Document) -> bool {
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

/// A package read to be edited, and what was left out (each with why).
pub struct Package {
    pub sources: Vec<Source>,
    pub left_out: Vec<String>,
    /// Per source, the UTF-16 encoding its file was read in: it is written back in it.
    pub utf16: Vec<Option<read::Utf16>>,
}

/// Helm's chart file: a directory that holds one is a chart, to render first.
const CHART: &str = "Chart.yaml";

/// Walks `paths` as kpt reads a package (`.krmignore` honoured), hidden files
/// and folders left out, and refuses a directory whose files are not the objects
/// it stands for: a kustomization (its objects are what `kustomize build` makes)
/// or a Helm chart (templates). Returns the files and what was left out.
fn walk_package(
    paths: &[String],
    to_files: bool,
) -> Result<(Vec<Option<std::path::PathBuf>>, Vec<String>)> {
    let walked = read::expand_walked(paths)?;
    if to_files {
        if let Some((link, real)) = walked.outside.first() {
            return Err(Error::io(
                link.display().to_string(),
                std::io::Error::other(format!(
                    "a symlink to {}, outside {}: rewriting the package would rewrite a file outside it; name the file with -f, or copy it into the package",
                    real.display(),
                    paths.join(", ")
                )),
            ));
        }
    }
    let refuse = |file: &std::path::Path, message: String| Error::Invalid {
        file: file.display().to_string(),
        doc: 1,
        line: 1,
        message,
    };
    for file in walked.files.iter().flatten() {
        let dir = file
            .parent()
            .map_or(".".into(), |d| d.display().to_string());
        let dir = if dir.is_empty() { ".".to_string() } else { dir };
        if is_kustomization(file) {
            return Err(refuse(
                file,
                format!("{dir} is a kustomization: its objects are what kustomize builds, not its files; build it first (kustomize build {dir} | kubectl nvcf-worker inject -f -), run the tool as its transformer (README, \"kustomize\"), or point at the built output"),
            ));
        }
        if file.file_name().and_then(|n| n.to_str()) == Some(CHART) {
            return Err(refuse(
                file,
                format!("{dir} is a Helm chart: its templates are not objects until rendered; render it first (helm template RELEASE {dir} | kubectl nvcf-worker inject -f -), use the Helm post-renderer (README, \"Helm\"), or point at the rendered output"),
            ));
        }
    }
    let left_out: Vec<String> = walked
        .hidden
        .iter()
        .map(|p| {
            format!(
                "{}: hidden (kpt reads it, this tool does not; name it with -f to read it)",
                p.display()
            )
        })
        .collect();
    // What `.krmignore` names is left out silently, as kpt does: the package said so.
    if walked.files.is_empty() {
        let mut why: Vec<String> = left_out.clone();
        why.extend(
            walked
                .ignored
                .iter()
                .map(|p| format!("{}: in .krmignore", p.display())),
        );
        return Err(Error::Invalid {
            file: paths.join(", "),
            doc: 1,
            line: 1,
            message: if why.is_empty() {
                "no manifests (.yaml, .yml, .json files) in the input".into()
            } else {
                format!(
                    "no manifests (.yaml, .yml, .json files) in the input; left out: {}",
                    why.join("; ")
                )
            },
        });
    }
    Ok((walked.files, left_out))
}

/// Whether the path names a directory (read as a package), not a file or stdin.
fn is_dir(p: &str) -> bool {
    p != "-" && std::path::Path::new(p).is_dir()
}

/// The files one path names: a directory walked as a package (`walk_package`,
/// what it leaves out added to `left_out`), a file or `-` as it is.
fn expand_path(
    p: &str,
    to_files: bool,
    left_out: &mut Vec<String>,
) -> Result<Vec<Option<std::path::PathBuf>>> {
    if !is_dir(p) {
        return Ok(read::expand(&[p.to_string()])?);
    }
    let (files, out) = walk_package(&[p.to_string()], to_files)?;
    left_out.extend(out);
    Ok(files)
}

/// Reads a package to edit (`leave_out_local` is false when the files are
/// rewritten: then a symlink out of a directory is refused). In a directory, as kpt reads a package (see
/// `walk_package`), objects marked `config.kubernetes.io/local-config: "true"`
/// are left out with `leave_out_local` (the output feeds `kubectl apply`), each
/// named in `left_out`; a file named on its own, or stdin, is taken whole. The
/// first file that does not read or decode is the error.
pub fn package(
    paths: &[String],
    leave_out_local: bool,
    evict: Option<Evict>,
    workers: Workers,
) -> Result<Package> {
    let mut sources = Vec::new();
    let mut left_out = Vec::new();
    let mut utf16 = Vec::new();
    for p in paths {
        let in_dir = is_dir(p);
        let files = expand_path(p, !leave_out_local, &mut left_out)?;
        for file in files {
            let input = read::read_input(file)?;
            utf16.push(input.utf16);
            let hint = looks_like_template(&input.bytes);
            let mut source = read::load_with(input, evict, workers)
                .map_err(|e| with_template_hint(e.into(), hint))
                .map_err(|e| if in_dir { with_package_hint(e) } else { e })?;
            if in_dir && leave_out_local {
                for d in source.docs.iter().filter(|d| is_local_config(d)) {
                    left_out.push(format!(
                        "{}: document {} ({} {}): local config ({LOCAL_CONFIG}: \"true\"), never applied; name the file with -f to take it whole",
                        source.name,
                        d.index + 1,
                        d.view().str_at(&["kind"]).unwrap_or(""),
                        d.view().str_at(&["metadata", "name"]).unwrap_or(""),
                    ));
                }
                source.docs.retain(|d| !is_local_config(d));
            }
            sources.push(source);
        }
    }
    Ok(Package {
        sources,
        left_out,
        utf16,
    })
}

/// Whether input that failed to decode is probably a Go template (a Helm chart's
/// `templates/`): then the fix is to render it, not to edit it.
fn looks_like_template(bytes: &[u8]) -> bool {
    bytes.windows(2).any(|w| w == b"{{")
}

const TEMPLATE_HINT: &str = "this looks like an unrendered template ({{ ... }}): render it first (helm template CHART | kubectl nvcf-worker inject -f -), and check the rendered output";

fn with_template_hint(e: Error, hint: bool) -> Error {
    if hint {
        with_hint(e, TEMPLATE_HINT)
    } else {
        e
    }
}

/// A decoding error with `hint` added to its message (a YAML error becomes the
/// refusal it is, at its line); other errors as they are.
fn with_hint(e: Error, hint: &str) -> Error {
    match e {
        Error::Yaml { file, doc, source } => Error::Invalid {
            file,
            doc,
            line: source.line(),
            message: format!("{source}; {hint}"),
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
            message: format!("{message}; {hint}"),
        },
        e => e,
    }
}

/// A file of a directory that is YAML but no Kubernetes object (a tool's settings,
/// a CI workflow): kpt's `.krmignore` leaves such files out of a package.
fn with_package_hint(e: Error) -> Error {
    match &e {
        Error::Invalid { message, .. }
            if message.starts_with("missing ")
                || message.starts_with("document is not a mapping") =>
        {
            with_hint(e, PACKAGE_HINT)
        }
        _ => e,
    }
}

const PACKAGE_HINT: &str = "if this file is not a Kubernetes manifest, list it in the directory's .krmignore (as kpt does) or name the manifests with -f";

/// A file that does not decode, where: the checker reports it and goes on.
#[derive(Debug)]
pub struct Refusal {
    pub file: String,
    /// 0-based document index.
    pub index: usize,
    pub line: u32,
    pub message: String,
}

/// One file read to be checked: its source, nothing for YAML that holds no
/// Kubernetes object, or why it does not decode (boxed: the rare case).
pub type Checked = std::result::Result<Option<Source>, Box<Refusal>>;

/// Reads files to check, each on its own (a file that does not decode is a
/// refusal, and the others are still read), `evict` called on each valid document
/// as it is parsed. The work is split once: many files on the workers, or one
/// file's chunks on them. Results are in input order; a file that cannot be read
/// at all is the error (the first in order). Returns the results and the files'
/// names as findings name them (`<stdin>` for `-`).
pub fn files(
    paths: &[String],
    evict: Option<Evict>,
    workers: Workers,
) -> Result<(Vec<Checked>, Vec<String>)> {
    let mut files = Vec::new();
    for p in paths {
        files.extend(expand_path(p, false, &mut Vec::new())?);
    }
    let count = files.len();
    let names = files
        .iter()
        .map(|f| match f {
            Some(p) => p.display().to_string(),
            None => read::STDIN.to_string(),
        })
        .collect();
    let (outer, inner) = if count > 1 {
        (workers, Workers::serial())
    } else {
        (Workers::serial(), workers)
    };
    let loaded = outer.map(&files, |f| {
        read::read_input(f.clone()).map(|input| check_one(input, evict, inner))
    });
    let loaded = loaded
        .into_iter()
        .collect::<std::result::Result<_, _>>()
        .map_err(Error::from)?;
    Ok((loaded, names))
}

fn check_one(input: Input, evict: Option<Evict>, workers: Workers) -> Checked {
    let refusal = |line: u32, index: usize, message: String| {
        let message = if looks_like_template(&input.bytes) {
            format!("{message}; {TEMPLATE_HINT}")
        } else {
            message
        };
        Box::new(Refusal {
            file: input.name.clone(),
            index,
            line,
            message,
        })
    };
    let each = |d: &mut Document| {
        default_list_items(d, SourceKind::Stream);
        if d.is_empty() || is_list(d.view()) || read::doc_problem(d).is_some() {
            return;
        }
        if let Some(evict) = evict {
            evict(d);
        }
    };
    let docs = crate::manifest::parallel::parse_stream_each(&input.bytes, &each, workers).map_err(
        |e| match read::json_problem(&input.bytes) {
            // Not YAML, and kubectl reads it as JSON: say why it is not JSON.
            Some((index, line, message)) => refusal(line, index, message),
            None => refusal(e.error.line(), e.index, e.error.to_string()),
        },
    )?;
    // Nothing at all (an empty file, comments only): a source without documents,
    // so that a run given nothing but that can say so (`check`).
    if docs.iter().all(|d| d.is_empty()) {
        return Ok(Some(Source {
            name: input.name,
            kind: SourceKind::Stream,
            docs: Vec::new(),
        }));
    }
    // A list needs no apiVersion of its own: kubectl applies its items.
    let is_object =
        |n: &Node| n.get("kind").is_some() && (n.get("apiVersion").is_some() || is_list(n));
    if !docs.iter().any(|d| is_object(d.view())) {
        return Ok(None);
    }
    if let Some((index, line, message)) = read::json_problem(&input.bytes) {
        return Err(refusal(line, index, message));
    }
    // (A document dropped as read had no problem.)
    for d in docs.iter().filter(|d| !d.is_empty() && !d.evicted) {
        // Reported at the document's line, wherever in it the problem is.
        if let Some((_, problem)) = read::doc_problem(d) {
            let line = d.line.max(d.view().line);
            return Err(refusal(
                line,
                d.index,
                format!("document {}: {problem}", d.index + 1),
            ));
        }
    }
    Ok(Some(Source {
        name: input.name,
        kind: SourceKind::Stream,
        docs,
    }))
}

/// The KRM function's input: one ResourceList, its text kept so that the answer
/// is written as kpt wrote it. Input that is no ResourceList is the error.
pub fn resource_list(input: &[u8]) -> Result<Document> {
    let docs = parse_stream(input).map_err(|e| Error::Yaml {
        file: read::STDIN.into(),
        doc: e.index + 1,
        source: e.error,
    })?;
    let mut docs = docs;
    attach_text(&mut docs, std::sync::Arc::new(input.to_vec()));
    let mut docs: Vec<Document> = docs.into_iter().filter(|d| !d.is_empty()).collect();
    if docs.len() != 1 {
        return Err(Error::Usage(format!(
            "expected one ResourceList on stdin, found {} documents (kpt fn eval --exec, or a Kptfile pipeline, sends one){PLAIN_HINT}",
            docs.len()
        )));
    }
    let mut doc = docs.remove(0);
    default_list_items(&mut doc, SourceKind::ResourceList);
    let root = doc.view();
    let bad = |message: String| Error::Invalid {
        file: read::STDIN.into(),
        doc: 1,
        line: root.line,
        message,
    };
    if root.str_at(&["kind"]) != Some("ResourceList") {
        return Err(bad(format!(
            "kind is {:?}, expected ResourceList{PLAIN_HINT}",
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
    Ok(doc)
}

/// What a plain manifest piped with no subcommand was probably meant for.
const PLAIN_HINT: &str = "; to edit plain manifests from stdin, name the command: `kubectl nvcf-worker inject -f -` (or uninject, validate -)";

/// The ResourceList versions the function reads.
pub const API_VERSIONS: [&str; 2] = ["config.kubernetes.io/v1", "config.kubernetes.io/v1beta1"];

/// kustomize's legacy exec plugin's input: a plain YAML stream on stdin.
pub fn stream(input: Vec<u8>, workers: Workers) -> Result<Source> {
    let input = Input {
        name: read::STDIN.into(),
        bytes: input,
        utf16: None,
    };
    Ok(read::load_with(input, None, workers)?)
}

/// A ResourceList as kpt writes it, laid out to have its items read as a stream
/// (`resource_list_items`): block YAML, its items a block list at the left margin,
/// each a block mapping. Where the items are comes from the YAML parser
/// (`parse::outline_list`), not from the text's layout. Its items are then read
/// as `inject` reads a stream's documents (dropped as read, or edited then),
/// instead of the whole ResourceList being held as one tree.
pub struct Laid {
    /// The ResourceList without its items (`items:` left with no value): where
    /// `functionConfig` is read from and `results` are written into.
    pub shell: Document,
    /// Where the items start in the input (the first item's `- ` line) and in the shell.
    pub head: usize,
    /// Where the items end in the input.
    pub end: usize,
    /// Where each item starts in the input (its `- ` line), until cut.
    starts: Vec<usize>,
    /// Whether the input breaks lines with CRLF, as `attach_text` judges it.
    pub crlf: bool,
    /// The items as a stream (`Laid::cut_items`), once cut: with the shell and
    /// `short`, all of the input.
    pub items: Option<std::sync::Arc<Vec<u8>>>,
    /// The lines of an item that were less than `INDENT` spaces in, or only
    /// spaces (inside a quoted scalar, where kpt writes a closing quote at the
    /// margin, or a comment): (item, line of the item, spaces taken off), in order.
    short: Vec<(u32, u32, u8)>,
    /// The items in flow style (kpt writes a JSON file's objects so), in order:
    /// alone, each is a flow document, which inject edits in JSON's style.
    flow: Vec<u32>,
    /// The items read that have aliases or merge keys (`read_items`), in order:
    /// edited, each is written anew, expanded (`refs::rewrite_item`), as the tree
    /// path writes it in the whole ResourceList.
    pub refs: Vec<u32>,
    /// The items read that have anchors and no aliases, in order: where another
    /// item has refs, the tree path writes the whole ResourceList anew when one
    /// of them is edited (`refs::item_refs`).
    pub anchored: Vec<u32>,
}

/// How far an item's lines are indented past its `- ` at the margin.
const INDENT: usize = 2;

/// A byte order mark anywhere. libyaml-safer takes one at the start of a document
/// for a mark, not content: a line that starts with one once an item's indentation
/// is taken off would read alone otherwise than in the ResourceList (where, past
/// the indentation, it is content).
fn has_bom(input: &[u8]) -> bool {
    (input.split(|&b| b == 0xEF).skip(1)).any(|after| after.starts_with(b"\xBB\xBF"))
}

/// The input's lines, each with its line break.
fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split_inclusive(|&b| b == b'\n')
}

/// A line with nothing on it but its line break.
fn is_blank_line(line: &[u8]) -> bool {
    matches!(line, b"\n" | b"\r\n")
}

/// The start of the line of the `- ` at the margin of the item whose content
/// starts at `at`: its line, or one above with only comment and blank lines
/// between (kpt writes the comments heading a file as `- # comment`).
fn dash_line(input: &[u8], at: usize) -> Option<usize> {
    let line_start =
        |end: usize| (input[..end].iter().rposition(|&b| b == b'\n')).map_or(0, |i| i + 1);
    let mut from = line_start(at);
    if from + INDENT != at {
        return None;
    }
    if &input[from..at] == b"- " {
        return Some(from);
    }
    if input[from..at].iter().any(|&b| b != b' ') {
        return None;
    }
    while from > 0 {
        from = line_start(from - 1);
        let line = &input[from..];
        let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
        if line.starts_with(b"- #") {
            return Some(from);
        }
        let rest = line.trim_ascii();
        if !(rest.is_empty() || rest.starts_with(b"#")) {
            return None;
        }
    }
    None
}

/// Lays a ResourceList out to read its items as a stream, or `None` when its text
/// is not what that can write back byte for byte (flow or JSON, directives,
/// several documents, an alias across items or to the rest of the list, an
/// anchor or a tag on an item itself, a `results` already there), or does not
/// parse: it is then read as one tree (`resource_list`), which decides what is
/// wrong with it, if anything. (kpt never writes an alias across items: each
/// item was a document of its own, whose anchors are its own.)
pub fn lay_out_resource_list(input: &[u8]) -> Option<Laid> {
    // (Other line breaks: a document with them is written anew, here an item or
    // the shell, there the whole ResourceList.)
    if !input.ends_with(b"\n")
        || has_bom(input)
        || read::sniffs_json(input)
        || splice::other_line_breaks(input)
    {
        return None;
    }
    let outline = crate::manifest::parse::outline_list(input, "items")?;
    let starts: Vec<usize> = (outline.items.iter())
        .map(|&at| dash_line(input, at))
        .collect::<Option<_>>()?;
    let head = *starts.first()?;
    let end = outline.after.unwrap_or(input.len());
    // The next key at the margin; or the items last, not ending on a line of
    // only spaces or a comment, which the tree drops where it adds `results`.
    let last = input[..input.len() - 1]
        .rsplit(|&b| b == b'\n')
        .next()
        .unwrap_or(b"");
    let last = last.trim_ascii();
    let last_bare = last.is_empty() || last.starts_with(b"#");
    if (end > 0 && input[end - 1] != b'\n') || (outline.after.is_none() && last_bare) {
        return None;
    }
    let mut text = input[..head].to_vec();
    text.extend_from_slice(&input[end..]);
    let mut docs = parse_stream(&text).ok()?;
    attach_text(&mut docs, std::sync::Arc::new(text));
    docs.retain(|d| !d.is_empty());
    let [mut shell] = <[Document; 1]>::try_from(docs).ok()?;
    let crlf = crate::manifest::parse::breaks_crlf(input);
    shell.crlf = crlf;
    let root = shell.view();
    let plain = root.is_map()
        && !root.is_flow()
        && shell.resolved.is_none()
        && !shell.directives
        && root.get("items").is_some_and(Node::is_null)
        && root.get("results").is_none()
        && root.str_at(&["kind"]) == Some("ResourceList")
        && API_VERSIONS.contains(&root.str_at(&["apiVersion"]).unwrap_or(""));
    // Collections spliced into an item are indented as the whole ResourceList
    // indents them (`splice::Indents`): lists as its items (at the margin),
    // mappings as its first own block mapping does, here or in its first item
    // that has one (`resource_list_items`). Only kpt's two columns are taken: the
    // items' new neighbours are written as new documents are.
    let (seq, map) = splice::indents_of(shell.text.as_deref()?, &shell.root, true);
    let plain = plain && seq.is_none() && map.is_none_or(|m| m == 2);
    plain.then_some(Laid {
        shell,
        head,
        end,
        starts,
        crlf,
        items: None,
        short: Vec::new(),
        flow: Vec::new(),
        refs: Vec::new(),
        anchored: Vec::new(),
    })
}

/// The items of a ResourceList laid out by `lay_out_resource_list`, as the
/// documents of one stream: `Laid::cut_items`, then `read_items`.
pub fn resource_list_items(
    laid: &mut Laid,
    input: &[u8],
    evict: Option<Evict>,
    workers: Workers,
) -> Option<Source> {
    if !laid.cut_items(input) {
        return None;
    }
    read_items(laid, evict, workers)
}

/// The items cut out of a ResourceList (`Laid::cut_items`) read on the workers and
/// handed to `evict` as they are read, as `read::load_with` reads a stream. An
/// item with aliases or merge keys of its own (`parse::outline_list` let through
/// none to another item) is read alone as the tree path reads it, and noted
/// (`Laid::refs`); an item in error is read but kept whole, for `krm` to report.
/// `None` when that would not mean what the ResourceList says (an item that does
/// not parse alone, or is a typed list whose items take its type): then the
/// ResourceList is read as one tree (`Laid::input` gives its bytes back).
pub fn read_items(laid: &mut Laid, evict: Option<Evict>, workers: Workers) -> Option<Source> {
    let text = laid.items.clone().expect("items cut");
    let count = laid.count();
    let shell_map = splice::indents_of(laid.shell.text.as_deref()?, &laid.shell.root, true).1;
    let refused = std::sync::atomic::AtomicBool::new(false);
    // (index, whether it has refs) of the items with refs or anchors.
    let marked = std::sync::Mutex::new(Vec::new());
    let each = |d: &mut Document| {
        // With the indentation known before the items are read, an item is given
        // all it is written with as it is read, so it can be edited then
        // (`batch::Need::Now`); else only once all are read.
        if shell_map == Some(2) {
            d.text = Some(text.clone());
            d.crlf = laid.crlf;
            d.indents = Some(splice::Indents { seq: 0, map: 2 });
        } else if shell_map.is_none() {
            // Kept on the document until the first item that has one is known.
            d.indents = splice::indents_of(&text, &d.root, true)
                .1
                .map(|map| splice::Indents { seq: 0, map });
        }
        let resolved = d.resolved.is_some();
        if resolved || crate::manifest::refs::has_anchors(&d.root) {
            marked
                .lock()
                .expect("not poisoned")
                .push((d.index as u32, resolved));
        }
        let typed = default_list_items(d, SourceKind::Items);
        let root = d.view();
        if !root.is_map() || typed || d.directives {
            refused.store(true, std::sync::atomic::Ordering::Relaxed);
        } else if read::resource_list_item_problem(root).is_some() {
            // Kept whole: `krm` reports it as the tree path does.
        } else if let Some(evict) = evict {
            evict(d);
        }
    };
    let mut docs = crate::manifest::parallel::parse_stream_each(&text, &each, workers).ok()?;
    if refused.into_inner() || docs.len() != count {
        return None;
    }
    let map = shell_map.or_else(|| docs.iter().find_map(|d| d.indents.map(|i| i.map)));
    if map != Some(2) {
        return None;
    }
    attach_text(&mut docs, text);
    let mut marked = marked.into_inner().expect("not poisoned");
    marked.sort_unstable();
    let (refs, anchored): (Vec<_>, Vec<_>) = marked.into_iter().partition(|m| m.1);
    laid.refs = refs.into_iter().map(|m| m.0).collect();
    laid.anchored = anchored.into_iter().map(|m| m.0).collect();
    for d in &mut docs {
        d.crlf = laid.crlf;
        d.indents = Some(splice::Indents { seq: 0, map: 2 });
    }
    Some(Source {
        name: read::STDIN.into(),
        kind: SourceKind::Items,
        docs,
    })
}

impl Laid {
    /// How many items the ResourceList has.
    pub fn count(&self) -> usize {
        self.starts.len()
    }

    /// Cuts the items out of `input` as the documents of one stream, each item's
    /// lines with their indentation taken off (what a line has of it: `short`
    /// keeps how much), each after a `---` (`items`). With the shell that is all
    /// of the input, which can go then: what reads the items holds them once, not
    /// twice, and `input` gives the bytes back. False (nothing cut) when a line
    /// would read otherwise alone: a document marker, directive or tab at its
    /// start once the indentation is off.
    pub fn cut_items(&mut self, input: &[u8]) -> bool {
        let marker: &[u8] = if self.crlf { b"---\r\n" } else { b"---\n" };
        let mut text = Vec::with_capacity(self.end - self.head + marker.len() * self.count());
        let mut short = Vec::new();
        let mut flow = Vec::new();
        for (k, &from) in self.starts.iter().enumerate() {
            let to = self.starts.get(k + 1).copied().unwrap_or(self.end);
            text.extend_from_slice(marker);
            for (i, line) in lines(&input[from..to]).enumerate() {
                let spaces = line.iter().take(INDENT).take_while(|&&b| b == b' ').count();
                let kept = match i {
                    0 => &line[INDENT..],
                    _ if is_blank_line(line) => line,
                    _ => &line[spaces..],
                };
                if i > 0 && !is_blank_line(line) && (spaces < INDENT || is_blank_line(kept)) {
                    short.push((k as u32, i as u32, spaces as u8));
                }
                if i == 0 && kept.starts_with(b"{") {
                    flow.push(k as u32);
                }
                if [&b"---"[..], b"...", b"%", b"\t"]
                    .iter()
                    .any(|m| kept.starts_with(m))
                {
                    return false;
                }
                text.extend_from_slice(kept);
            }
        }
        self.items = Some(std::sync::Arc::new(text));
        self.short = short;
        self.flow = flow;
        true
    }

    /// The bytes before the items.
    pub fn head(&self) -> &[u8] {
        &self.shell.text.as_deref().expect("read")[..self.head]
    }

    /// Writes the items as they were read, byte for byte: each item of the
    /// stream's text (after its `---`) indented back.
    pub fn write_items_as_read(&self, out: &mut Vec<u8>) {
        let text = self.items.as_deref().expect("items cut");
        let marker: &[u8] = if self.crlf { b"---\r\n" } else { b"---\n" };
        let mut from = 0;
        let mut at = 0;
        let mut item = 0;
        for line in lines(text) {
            if line == marker && at > 0 {
                self.write_item(&text[from..at], Some(item), out);
                from = at;
                item += 1;
            }
            at += line.len();
        }
        if at > 0 {
            self.write_item(&text[from..at], Some(item), out);
        }
    }

    /// The input again, from the shell and the items cut (which hold all of it).
    pub fn input(&self) -> Vec<u8> {
        let shell = self.shell.text.as_deref().expect("read");
        let mut out = shell[..self.head].to_vec();
        self.write_items_as_read(&mut out);
        out.extend_from_slice(&shell[self.head..]);
        out
    }

    /// Whether the item read as document `item` of the stream, edited, would
    /// be written otherwise than the whole ResourceList's splice writes it: it
    /// has lines indented less than its others (`short`), or is in flow style.
    pub fn edits_elsewhere(&self, item: usize) -> bool {
        let at = self.short.partition_point(|s| (s.0 as usize) < item);
        self.short.get(at).is_some_and(|s| s.0 as usize == item)
            || self.flow.binary_search(&(item as u32)).is_ok()
    }

    /// Writes one document of the stream `resource_list_items` read (as
    /// `splice::render_doc` writes it) as the ResourceList item it stands for:
    /// its `---` line dropped, its first line after the `- `, the others indented
    /// two columns right of it (an item's `short` lines as they were), blank lines
    /// blank. The inverse of how the items were read, so an item written as read
    /// is its bytes in the input. `item`: which item it was read as, unedited.
    pub fn write_item(&self, doc: &[u8], item: Option<usize>, out: &mut Vec<u8>) {
        let body = [&b"---\r\n"[..], b"---\n"]
            .iter()
            .find_map(|m| doc.strip_prefix(*m))
            .unwrap_or(doc);
        let mut short: &[(u32, u32, u8)] = &[];
        if let Some(item) = item {
            let from = self.short.partition_point(|s| (s.0 as usize) < item);
            let to = from + self.short[from..].partition_point(|s| s.0 as usize == item);
            short = &self.short[from..to];
        }
        for (i, line) in lines(body).enumerate() {
            if i == 0 {
                out.extend_from_slice(b"- ");
            } else if let Some(&(_, _, spaces)) = short.first().filter(|s| s.1 as usize == i) {
                short = &short[1..];
                out.resize(out.len() + spaces as usize, b' ');
            } else if !is_blank_line(line) {
                out.resize(out.len() + INDENT, b' ');
            }
            out.extend_from_slice(line);
        }
    }
}
