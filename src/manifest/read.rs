//! Gathering input: files, directories (recursively: .yaml, .yml, .json) and stdin,
//! parsed into sources whose documents are checked to be Kubernetes objects.

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::batch::{is_list, list_items, Source, SourceKind};
use super::node::Node;
use super::parse::Document;
use super::parse::YamlError;
use crate::work::Workers;

/// Why input could not be read as manifests. The crate's error converts from it;
/// it lives here so that reading depends on nothing above `manifest`.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{file}: document {doc}: {source}")]
    Yaml {
        file: String,
        /// 1-based, as people count documents.
        doc: usize,
        #[source]
        source: YamlError,
    },
    #[error("{file}: document {doc} (line {line}): {message}")]
    Invalid {
        file: String,
        doc: usize,
        line: u32,
        message: String,
    },
    #[error("{file}: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
}

impl ReadError {
    pub fn io(file: impl Into<String>, source: std::io::Error) -> ReadError {
        ReadError::Io {
            file: file.into(),
            source,
        }
    }
}

type Result<T, E = ReadError> = std::result::Result<T, E>;

pub const STDIN: &str = "<stdin>";

pub struct Input {
    pub name: String,
    /// UTF-8: a UTF-16 file is decoded as it is read.
    pub bytes: Vec<u8>,
    /// The encoding the file was read in when it was UTF-16, to write it back in.
    pub utf16: Option<Utf16>,
}

fn is_manifest(p: &Path) -> bool {
    matches!(
        p.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

/// Expands paths (`-` is stdin, `None` here; directories are walked in name order,
/// following symlinks but never twice into the same directory, as `walk` reads
/// them).
pub fn expand(paths: &[String]) -> Result<Vec<Option<PathBuf>>> {
    Ok(expand_walked(paths)?.files)
}

/// What walking the paths found: the files to read, and what a directory holds
/// that is left out.
#[derive(Debug, Default)]
pub struct Walked {
    pub files: Vec<Option<PathBuf>>,
    /// Hidden files and folders (names that start with `.`) under a directory
    /// named: kpt 1.0 reads them, this tool does not (`.github/`, `.expected/`).
    pub hidden: Vec<PathBuf>,
    /// Paths a `.krmignore` leaves out, as kpt does.
    pub ignored: Vec<PathBuf>,
    /// Files reached through a symlink that leaves the directory named: (the
    /// path as walked, the real file).
    pub outside: Vec<(PathBuf, PathBuf)>,
}

/// `expand`, with what was left out.
pub fn expand_walked(paths: &[String]) -> Result<Walked> {
    let mut walked = Walked::default();
    let mut seen_dirs = HashSet::new();
    for p in paths {
        if p == "-" {
            walked.files.push(None);
            continue;
        }
        let path = PathBuf::from(p);
        let meta = std::fs::metadata(&path).map_err(|e| ReadError::io(p, e))?;
        if meta.is_dir() {
            let root = std::fs::canonicalize(&path).map_err(|e| ReadError::io(p, e))?;
            let mut seen_files = HashSet::new();
            let mut at = Walk {
                root: &root,
                walked: &mut walked,
                seen: &mut seen_dirs,
                seen_files: &mut seen_files,
            };
            walk(&path, &[], false, &mut at)?;
        } else {
            walked.files.push(Some(path));
        }
    }
    Ok(walked)
}

/// The file kpt reads, in a package's directory, for the paths to leave out.
pub const KRMIGNORE: &str = ".krmignore";

/// One `.krmignore` line (gitignore syntax, as kpt reads it with go-gitignore):
/// relative to the directory that holds the file.
#[derive(Debug, Clone)]
struct Ignore {
    base: PathBuf,
    pattern: String,
    negate: bool,
    dir_only: bool,
    /// Matched against the whole path under `base` (the pattern has a `/`), or
    /// against any trailing part of it.
    anchored: bool,
}

fn read_krmignore(dir: &Path) -> Result<Vec<Ignore>> {
    let file = dir.join(KRMIGNORE);
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ReadError::io(file.display().to_string(), e)),
    };
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (negate, line) = match line.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, line),
        };
        let (dir_only, line) = match line.strip_suffix('/') {
            Some(rest) => (true, rest),
            None => (false, line),
        };
        let anchored = line.contains('/');
        let pattern = line.trim_start_matches('/').to_string();
        if pattern.is_empty() {
            continue;
        }
        out.push(Ignore {
            base: dir.to_path_buf(),
            pattern,
            negate,
            dir_only,
            anchored,
        });
    }
    Ok(out)
}

/// Whether the last `.krmignore` line that matches `path` leaves it out.
fn ignored(rules: &[Ignore], path: &Path, is_dir: bool) -> bool {
    let mut out = false;
    for r in rules {
        if r.dir_only && !is_dir {
            continue;
        }
        let Ok(rel) = path.strip_prefix(&r.base) else {
            continue;
        };
        let rel: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let hit = if r.anchored {
            glob_match(&r.pattern, &rel.join("/"))
        } else {
            rel.last().is_some_and(|name| glob_match(&r.pattern, name))
        };
        if hit {
            out = !r.negate;
        }
    }
    out
}

/// gitignore's globs: `*` and `?` within one path segment, `**` across them,
/// `[...]` a class, `\\` an escape.
fn glob_match(pattern: &str, text: &str) -> bool {
    fn go(p: &[char], t: &[char]) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some('*') if p.get(1) == Some(&'*') => {
                // `**/` matches no segment too.
                let rest = if p.get(2) == Some(&'/') {
                    &p[3..]
                } else {
                    &p[2..]
                };
                (0..=t.len()).any(|i| go(rest, &t[i..]))
                    || (p.get(2) == Some(&'/') && go(&p[2..], t))
            }
            Some('*') => {
                for i in 0..=t.len() {
                    if go(&p[1..], &t[i..]) {
                        return true;
                    }
                    if i < t.len() && t[i] == '/' {
                        return false;
                    }
                }
                false
            }
            Some('?') => t.first().is_some_and(|&c| c != '/') && go(&p[1..], &t[1..]),
            Some('[') => {
                let Some(close) = p.iter().skip(1).position(|&c| c == ']').map(|i| i + 1) else {
                    return t.first() == Some(&'[') && go(&p[1..], &t[1..]);
                };
                let Some(&c) = t.first() else { return false };
                let class = &p[1..close];
                let (negated, class) = match class.first() {
                    Some('!' | '^') => (true, &class[1..]),
                    _ => (false, class),
                };
                let mut hit = false;
                let mut i = 0;
                while i < class.len() {
                    if i + 2 < class.len() && class[i + 1] == '-' {
                        hit |= class[i] <= c && c <= class[i + 2];
                        i += 3;
                    } else {
                        hit |= class[i] == c;
                        i += 1;
                    }
                }
                hit != negated && c != '/' && go(&p[close + 1..], &t[1..])
            }
            Some('\\') if p.len() > 1 => t.first() == Some(&p[1]) && go(&p[2..], &t[1..]),
            Some(&c) => t.first() == Some(&c) && go(&p[1..], &t[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    go(&p, &t)
}

fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.'))
}

/// How much of a stream kubectl looks at to tell JSON from YAML
/// (apimachinery's `YAMLOrJSONDecoder` buffer).
const SNIFF: usize = 4096;

/// Whether kubectl reads `bytes` as JSON: its first 4096 bytes, after white space,
/// start with `{` (apimachinery's `GuessJSONStream`). kubectl 1.32 then reads the
/// whole stream as JSON values and refuses anything else (`---`, a comment, an
/// unquoted key).
pub fn sniffs_json(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(SNIFF)];
    // A character cut at the buffer's end is not white space: Go stops there too.
    let text = match std::str::from_utf8(head) {
        Ok(t) => t,
        Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).expect("valid prefix"),
    };
    text.trim_start().starts_with('{')
}

/// Why a stream kubectl reads as JSON is not one JSON object, if it is not:
/// (0-based document, line, message). The tool reads one JSON object (or List)
/// per file; kubectl 1.32 also reads several objects one after the other, which
/// the tool refuses with what to do instead.
pub fn json_problem(bytes: &[u8]) -> Option<(usize, u32, String)> {
    if !sniffs_json(bytes) {
        return None;
    }
    let line_at =
        |offset: usize| 1 + bytes[..offset].iter().filter(|&&b| b == b'\n').count() as u32;
    let mut values =
        serde_json::Deserializer::from_slice(bytes).into_iter::<serde::de::IgnoredAny>();
    let mut index = 0;
    loop {
        let at = values.byte_offset();
        let rest = &bytes[at..];
        let skip = rest
            .iter()
            .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            .unwrap_or(rest.len());
        if skip == rest.len() {
            return None;
        }
        match values.next() {
            // serde_json's nesting limit is not kubectl's: the YAML reader's own
            // limit stands.
            Some(Err(e)) if e.to_string().starts_with("recursion limit exceeded") => return None,
            Some(Err(e)) => {
                return Some((
                    index,
                    e.line() as u32,
                    format!(
                        "not JSON ({e}): kubectl 1.32 reads a file that starts with `{{` as JSON and refuses YAML in it (`---`, comments, unquoted keys or strings); write it all as JSON, or start the file with `---` to make it YAML"
                    ),
                ));
            }
            Some(Ok(_)) if index > 0 => {
                return Some((
                    index,
                    line_at(at + skip),
                    "a second JSON value after the first object: kubectl 1.32 reads a file that starts with `{` as JSON, and this tool reads one JSON object (or a List) per file; put the objects in a List (\"kind\": \"List\", \"items\": [...]) or write YAML".into(),
                ));
            }
            Some(Ok(_)) => index += 1,
            None => return None,
        }
    }
}

/// Reads one expanded path (`None` is stdin).
pub fn read_input(file: Option<PathBuf>) -> Result<Input> {
    match file {
        None => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .map_err(|e| ReadError::io(STDIN, e))?;
            let utf16 = Utf16::of(&bytes);
            let bytes = from_utf16(&bytes)
                .map_err(|message| ReadError::io(STDIN, std::io::Error::other(message)))?
                .unwrap_or(bytes);
            Ok(Input {
                name: STDIN.into(),
                bytes,
                utf16,
            })
        }
        Some(path) => {
            let name = path.display().to_string();
            let bytes = std::fs::read(&path).map_err(|e| ReadError::io(&name, e))?;
            let utf16 = Utf16::of(&bytes);
            let bytes = from_utf16(&bytes)
                .map_err(|message| ReadError::io(&name, std::io::Error::other(message)))?
                .unwrap_or(bytes);
            Ok(Input { name, bytes, utf16 })
        }
    }
}

/// A UTF-16 byte order mark, and so the encoding of what follows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Utf16 {
    Le,
    Be,
}

impl Utf16 {
    /// The encoding `bytes` announce by their byte order mark, if UTF-16.
    pub fn of(bytes: &[u8]) -> Option<Utf16> {
        match bytes {
            [0xFF, 0xFE, ..] => Some(Utf16::Le),
            [0xFE, 0xFF, ..] => Some(Utf16::Be),
            _ => None,
        }
    }

    /// `text` in this encoding, behind its byte order mark: a file read as UTF-16
    /// is written back as it was encoded.
    pub fn encode(self, text: &[u8]) -> Vec<u8> {
        let text = String::from_utf8_lossy(text);
        let mut out = match self {
            Utf16::Le => vec![0xFF, 0xFE],
            Utf16::Be => vec![0xFE, 0xFF],
        };
        for unit in text.encode_utf16() {
            out.extend(match self {
                Utf16::Le => unit.to_le_bytes(),
                Utf16::Be => unit.to_be_bytes(),
            });
        }
        out
    }
}

/// A file behind a UTF-16 byte order mark, as UTF-8 without it: kubectl reads such
/// files (cli-runtime's file visitor decodes them, as Windows editors write them).
/// `None` when the bytes are no UTF-16; an error when they claim to be and are not.
pub fn from_utf16(bytes: &[u8]) -> std::result::Result<Option<Vec<u8>>, String> {
    let Some(enc) = Utf16::of(bytes) else {
        return Ok(None);
    };
    let body = &bytes[2..];
    if !body.len().is_multiple_of(2) {
        return Err("starts with a UTF-16 byte order mark but has an odd number of bytes".into());
    }
    let units = body.chunks_exact(2).map(|c| match enc {
        Utf16::Le => u16::from_le_bytes([c[0], c[1]]),
        Utf16::Be => u16::from_be_bytes([c[0], c[1]]),
    });
    char::decode_utf16(units)
        .collect::<std::result::Result<String, _>>()
        .map(|s| Some(s.into_bytes()))
        .map_err(|e| format!("starts with a UTF-16 byte order mark but is not UTF-16: {e}"))
}

/// One directory walk's state: the named directory (real path), what was found,
/// the directories entered and the files taken (device, inode).
struct Walk<'w> {
    root: &'w Path,
    walked: &'w mut Walked,
    seen: &'w mut HashSet<PathBuf>,
    seen_files: &'w mut HashSet<(u64, u64)>,
}

fn walk(dir: &Path, inherited: &[Ignore], via_link: bool, at: &mut Walk) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let io = |p: &Path, e| ReadError::io(p.display().to_string(), e);
    let real = std::fs::canonicalize(dir).map_err(|e| io(dir, e))?;
    if !at.seen.insert(real) {
        return Ok(()); // a symlink loop, or the same directory twice
    }
    let mut rules = inherited.to_vec();
    rules.extend(read_krmignore(dir)?);
    let mut entries: Vec<(PathBuf, std::fs::FileType)> = std::fs::read_dir(dir)
        .map_err(|e| io(dir, e))?
        .map(|e| e.and_then(|e| Ok((e.path(), e.file_type()?))))
        .collect::<std::io::Result<_>>()
        .map_err(|e| io(dir, e))?;
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, file_type) in entries {
        // The entry's own type needs no extra system call; only symlinks are followed.
        let is_dir = if file_type.is_symlink() {
            match std::fs::metadata(&path) {
                Ok(meta) => meta.is_dir(),
                // A dangling link that would not be read anyway is no error.
                Err(_) if !is_manifest(&path) => continue,
                Err(e) => return Err(io(&path, e)),
            }
        } else {
            file_type.is_dir()
        };
        // kustomize's `Kustomization` (no extension) is walked too, so that the
        // loader can say the directory is a kustomization.
        let kustomization = path.file_name().is_some_and(|n| n == "Kustomization");
        if !is_dir && !is_manifest(&path) && !kustomization {
            continue;
        }
        if ignored(&rules, &path, is_dir) {
            at.walked.ignored.push(path);
            continue;
        }
        if is_hidden(&path) {
            at.walked.hidden.push(path);
            continue;
        }
        let linked = via_link || file_type.is_symlink();
        if is_dir {
            walk(&path, &rules, linked, at)?;
            continue;
        }
        // Read once, and only a regular file: a FIFO named `x.yaml` would block
        // the run, and a second hard link is the same file again.
        let meta = std::fs::metadata(&path).map_err(|e| io(&path, e))?;
        let t = meta.file_type();
        if !t.is_file() {
            let what = special_file(&t).unwrap_or("a device");
            return Err(io(
                &path,
                std::io::Error::other(format!(
                    "{what}, not a regular file: a directory's manifests are read from regular files only; name it with -f to read it"
                )),
            ));
        }
        if !at.seen_files.insert((meta.dev(), meta.ino())) {
            continue; // a hard link (or symlink) to a file already taken
        }
        if linked {
            let real = std::fs::canonicalize(&path).map_err(|e| io(&path, e))?;
            if !real.starts_with(at.root) {
                at.walked.outside.push((path.clone(), real));
            }
        }
        at.walked.files.push(Some(path));
    }
    Ok(())
}

/// The items of a List or ResourceList that are not objects: (line, `items[i]: why`).
/// An item of a ResourceList may itself be a List (kpt passes them unexpanded);
/// an item of a List may not (kubectl flattens one level and refuses the rest).
pub fn item_problems(list: &Node, kind: SourceKind) -> impl Iterator<Item = (u32, String)> + '_ {
    list_items(list)
        .iter()
        .enumerate()
        .filter_map(move |(i, item)| {
            let problem = match kind {
                SourceKind::Stream => item_problem(item).map(|p| (item.line, p)),
                SourceKind::ResourceList | SourceKind::Items => resource_list_item_problem(item),
            };
            problem.map(|(line, p)| (line, format!("items[{i}]: {p}")))
        })
}

/// Why an item of a ResourceList is not an object (or a List of objects), with
/// its line; `item_problems` says which item.
pub fn resource_list_item_problem(item: &Node) -> Option<(u32, String)> {
    match object_problem(item) {
        Some(p) => Some((item.line, p)),
        None if is_list(item) => list_items(item)
            .iter()
            .enumerate()
            .find_map(|(j, sub)| item_problem(sub).map(|p| (sub.line, format!("items[{j}]: {p}")))),
        None => None,
    }
}

/// Why an item of a list cannot be applied (items are not decoded into typed
/// metadata, so only their type is checked).
fn item_problem(n: &Node) -> Option<String> {
    if n.get("items").and_then(Node::items).is_some() {
        return Some("a list inside a list; kubectl refuses it".into());
    }
    type_problem(n)
}

/// Why a list cannot be decoded: apimachinery needs `items` to be a sequence (or
/// null).
fn list_problem(n: &Node) -> Option<(u32, String)> {
    let items = n.get("items")?;
    (!items.is_null() && items.items().is_none())
        .then(|| (items.line, "items is not a list".to_string()))
}

/// Why a document cannot be treated as a Kubernetes object (or a list of them), if
/// it cannot. A list needs a `kind`, its items need both.
pub fn object_problem(n: &Node) -> Option<String> {
    if !n.is_map() {
        return Some("document is not a mapping (a Kubernetes object)".into());
    }
    if is_list(n) {
        if let Some((_, problem)) = list_problem(n) {
            return Some(problem);
        }
        let typed = |k| n.get(k).is_none_or(|v| v.is_null() || v.as_str().is_some());
        return match n.str_at(&["kind"]) {
            _ if !typed("apiVersion") => Some("apiVersion is not a string".into()),
            Some(k) if !k.is_empty() => metadata_problem(n),
            _ => Some("missing kind".into()),
        };
    }
    type_problem(n).or_else(|| metadata_problem(n))
}

fn type_problem(n: &Node) -> Option<String> {
    if !n.is_map() {
        return Some("document is not a mapping (a Kubernetes object)".into());
    }
    match (n.str_at(&["apiVersion"]), n.str_at(&["kind"])) {
        (Some(a), Some(k)) if !a.is_empty() && !k.is_empty() => None,
        (None, _) | (Some(""), _) => Some("missing apiVersion".into()),
        _ => Some("missing kind".into()),
    }
}

/// apimachinery reads an object's name and namespace into typed metadata while
/// decoding: other types there make kubectl refuse the object.
fn metadata_problem(n: &Node) -> Option<String> {
    let meta = n.get("metadata").filter(|m| !m.is_null())?;
    if !meta.is_map() {
        return Some("metadata is not a mapping; kubectl refuses it".into());
    }
    let strings = ["name", "namespace", "generateName"].iter().find_map(|k| {
        let v = meta.get(k).filter(|v| !v.is_null())?;
        v.as_str()
            .is_none()
            .then(|| format!("metadata.{k} is not a string; kubectl refuses it"))
    });
    strings.or_else(|| {
        ["labels", "annotations"].iter().find_map(|k| {
            let m = meta.get(k).filter(|v| !v.is_null())?;
            let bad = match m.entries() {
                None => true,
                Some(e) => e.iter().any(|(_, v)| !v.is_null() && v.as_str().is_none()),
            };
            bad.then(|| format!("metadata.{k} is not a map of strings; kubectl refuses it"))
        })
    })
}

/// Gives the items of a typed list (`kind: RoleBindingList`) that carry neither
/// `kind` nor `apiVersion` the list's kind without `List` and its apiVersion, as
/// apimachinery's unstructured decoder does. The document's view gets the defaults;
/// the tree as written keeps its text until an edit writes the document anew.
/// Whether it gave any.
pub fn default_list_items(doc: &mut Document, kind: SourceKind) -> bool {
    let needs = |list: &Node| is_list(list) && list_items(list).iter().any(needs_type);
    let view = doc.view();
    let any = match kind {
        SourceKind::Stream | SourceKind::Items => needs(view),
        SourceKind::ResourceList => list_items(view).iter().any(needs),
    };
    if !any {
        return false;
    }
    let mut tree = view.clone();
    match kind {
        SourceKind::Stream | SourceKind::Items => default_items(&mut tree),
        SourceKind::ResourceList => {
            if let Some(items) = tree.get_mut("items").and_then(Node::items_mut) {
                items.iter_mut().for_each(default_items);
            }
        }
    }
    doc.resolved = Some(tree);
    true
}

/// An item apimachinery types from its list: `kind` and `apiVersion` both empty
/// (absent, or not strings).
fn needs_type(item: &Node) -> bool {
    let unset = |k| item.str_at(&[k]).is_none_or(str::is_empty);
    (item.is_map() && unset("kind") && unset("apiVersion")) || item.is_null()
}

fn default_items(list: &mut Node) {
    if !is_list(list) {
        return;
    }
    let api = list.str_at(&["apiVersion"]).unwrap_or("").to_string();
    let kind = list.str_at(&["kind"]).unwrap_or("");
    let kind = kind.strip_suffix("List").unwrap_or(kind).to_string();
    let Some(items) = list.get_mut("items").and_then(Node::items_mut) else {
        return;
    };
    for item in items.iter_mut() {
        // A null item decodes as an empty object, typed like the others.
        if item.is_null() {
            *item = Node::map(Vec::new());
        }
        if !needs_type(item) {
            continue;
        }
        item.set("kind", Node::string(kind.clone()));
        item.set("apiVersion", Node::string(api.clone()));
    }
}

/// What `load` still needs of its input once the bytes went to the documents.
struct Named {
    name: String,
}

/// Parses one input into a stream source, checking every document (and every item
/// of a List) is an object.
pub fn load(input: Input) -> Result<Source> {
    load_with(input, None, Workers::serial())
}

/// What may drop a valid document's tree as soon as it is read (`batch::evict`).
pub type Evict<'a> = &'a (dyn Fn(&mut Document) + Sync);

/// `load` on the workers' threads, handing every valid, non-empty document to
/// `evict` on the thread that parsed it.
pub fn load_with(input: Input, evict: Option<Evict>, workers: Workers) -> Result<Source> {
    let each = |d: &mut Document| {
        default_list_items(d, SourceKind::Stream);
        if let Some(evict) = evict.filter(|_| !d.is_empty() && doc_problem(d).is_none()) {
            evict(d);
        }
    };
    let bytes = std::sync::Arc::new(input.bytes);
    let docs = super::parallel::parse_text_each(&bytes, &each, workers).map_err(|e| {
        // Not YAML, and kubectl reads it as JSON: say why it is not JSON.
        match json_problem(&bytes) {
            Some((doc, line, message)) => ReadError::Invalid {
                file: input.name.clone(),
                doc: doc + 1,
                line,
                message,
            },
            None => ReadError::Yaml {
                file: input.name.clone(),
                doc: e.index + 1,
                source: e.error,
            },
        }
    })?;
    if let Some((doc, line, message)) = json_problem(&bytes) {
        return Err(ReadError::Invalid {
            file: input.name,
            doc: doc + 1,
            line,
            message,
        });
    }
    let name = input.name;
    let input = Named { name };
    // An evicted document had no problem.
    for d in docs.iter().filter(|d| !d.is_empty() && !d.evicted) {
        if let Some((line, message)) = doc_problem(d) {
            return Err(ReadError::Invalid {
                file: input.name.clone(),
                doc: d.index + 1,
                line,
                message,
            });
        }
    }
    Ok(Source {
        name: input.name,
        kind: SourceKind::Stream,
        docs,
    })
}

/// Why a stream document is not an object (or a List of objects), with its line.
pub fn doc_problem(d: &Document) -> Option<(u32, String)> {
    let root = d.view();
    if let Some(problem) = object_problem(root) {
        return Some((d.line.max(root.line), problem));
    }
    if is_list(root) {
        return item_problems(root, SourceKind::Stream).next();
    }
    None
}

/// One object as kubectl would send it: the JSON the guard examines, after tags,
/// anchors, merge keys and List flattening, with the document it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// 0-based document index in the stream.
    pub doc: usize,
    pub object: serde_json::Value,
}

/// Every object of a stream in the order `kubectl apply -f` sends them, or the
/// error the tool reports (NVW001) for input it does not decode. This is the view
/// `tests/differential.rs` compares with kubectl's own decoder.
pub fn decode_like_kubectl(name: &str, bytes: &[u8]) -> Result<Vec<Decoded>> {
    let source = load(Input {
        name: name.into(),
        bytes: bytes.to_vec(),
        utf16: None,
    })?;
    let batch = super::batch::Batch::new(vec![source]);
    let objects = batch.objects();
    Ok(objects
        .iter()
        .map(|o| Decoded {
            doc: o.addr.doc,
            object: super::emit::to_json(o.node),
        })
        .collect())
}

/// What a file that is not a regular file is, for a message: a FIFO, a socket, a
/// device (`None` for anything else).
pub fn special_file(t: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_block_device() || t.is_char_device() {
        Some("a device")
    } else {
        None
    }
}
