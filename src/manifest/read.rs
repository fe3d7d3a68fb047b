//! Gathering input: files, directories (recursively: .yaml, .yml, .json) and stdin,
//! parsed into sources whose documents are checked to be Kubernetes objects.

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::batch::{is_list, Source, SourceKind};
use super::node::Node;
use crate::error::{Error, Result};

pub const STDIN: &str = "<stdin>";

pub struct Input {
    pub name: String,
    pub bytes: Vec<u8>,
}

fn is_manifest(p: &Path) -> bool {
    matches!(
        p.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

/// Expands paths (`-` is stdin, `None` here; directories are walked in name order,
/// following symlinks but never twice into the same directory).
pub fn expand(paths: &[String]) -> Result<Vec<Option<PathBuf>>> {
    let mut files = Vec::new();
    let mut seen_dirs = HashSet::new();
    for p in paths {
        if p == "-" {
            files.push(None);
            continue;
        }
        let path = PathBuf::from(p);
        let meta = std::fs::metadata(&path).map_err(|e| Error::io(p, e))?;
        if meta.is_dir() {
            walk(&path, &mut files, &mut seen_dirs)?;
        } else {
            files.push(Some(path));
        }
    }
    Ok(files)
}

/// Reads one expanded path (`None` is stdin).
pub fn read_input(file: Option<PathBuf>) -> Result<Input> {
    match file {
        None => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .map_err(|e| Error::io(STDIN, e))?;
            Ok(Input {
                name: STDIN.into(),
                bytes,
            })
        }
        Some(path) => {
            let name = path.display().to_string();
            let bytes = std::fs::read(&path).map_err(|e| Error::io(&name, e))?;
            Ok(Input { name, bytes })
        }
    }
}

/// Expands paths and reads every file.
pub fn gather(paths: &[String]) -> Result<Vec<Input>> {
    expand(paths)?.into_iter().map(read_input).collect()
}

fn walk(dir: &Path, files: &mut Vec<Option<PathBuf>>, seen: &mut HashSet<PathBuf>) -> Result<()> {
    let io = |p: &Path, e| Error::io(p.display().to_string(), e);
    let real = std::fs::canonicalize(dir).map_err(|e| io(dir, e))?;
    if !seen.insert(real) {
        return Ok(()); // a symlink loop, or the same directory twice
    }
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
        if is_dir {
            walk(&path, files, seen)?;
        } else if is_manifest(&path) {
            files.push(Some(path));
        }
    }
    Ok(())
}

/// The items of a List or ResourceList that are not objects: (line, `items[i]: why`).
pub fn item_problems(list: &Node) -> impl Iterator<Item = (u32, String)> + '_ {
    let items = list.get("items").and_then(Node::items).unwrap_or(&[]);
    items.iter().enumerate().filter_map(|(i, item)| {
        object_problem(item).map(|problem| (item.line, format!("items[{i}]: {problem}")))
    })
}

/// Why a document cannot be treated as a Kubernetes object, if it cannot.
pub fn object_problem(n: &Node) -> Option<String> {
    if !n.is_map() {
        return Some("document is not a mapping (a Kubernetes object)".into());
    }
    if is_list(n) && n.get("items").and_then(Node::items).is_none() {
        return Some("List has no items list".into());
    }
    match (n.str_at(&["apiVersion"]), n.str_at(&["kind"])) {
        (Some(a), Some(k)) if !a.is_empty() && !k.is_empty() => None,
        (None, _) | (Some(""), _) => Some("missing apiVersion".into()),
        _ => Some("missing kind".into()),
    }
}

/// Parses one input into a stream source, checking every document (and every item
/// of a List) is an object.
pub fn load(input: Input) -> Result<Source> {
    let docs = super::parallel::parse_stream_parallel(&input.bytes).map_err(|e| Error::Yaml {
        file: input.name.clone(),
        doc: e.index + 1,
        source: e.error,
    })?;
    for d in docs.iter().filter(|d| !d.is_empty()) {
        let invalid = |line, message| Error::Invalid {
            file: input.name.clone(),
            doc: d.index + 1,
            line,
            message,
        };
        let root = d.view();
        if let Some(problem) = object_problem(root) {
            return Err(invalid(d.line.max(root.line), problem));
        }
        if is_list(root) {
            if let Some((line, problem)) = item_problems(root).next() {
                return Err(invalid(line, problem));
            }
        }
    }
    Ok(Source {
        name: input.name,
        kind: SourceKind::Stream,
        docs,
    })
}
