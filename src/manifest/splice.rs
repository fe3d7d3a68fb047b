//! Writing documents back as they were read: an untouched document is its source
//! bytes; an edited one is its source bytes with each edit spliced in at the marks
//! the parser left on the nodes, so comments, blank lines, quoting, indentation and
//! line endings elsewhere stay exactly as written.
//!
//! An edited document is compared with the tree as it was read: nodes that came
//! from the source keep their byte span, nodes this tool made have none. Replaced
//! values are rewritten in place, added entries and items are written as new lines
//! in the indentation of the collection they join, removed ones lose their lines. A
//! flow collection that gains or loses children is written anew (that node only);
//! what cannot be spliced safely (reordered entries, a document edited in its
//! alias-expanded form) is written anew as a whole document.

use super::emit::{node_to_yaml, YamlWriter};
use super::node::{Node, Style, Value};
use super::parse::{Document, Edit, Edited, Frozen};
use super::refs;

/// Writes the documents of one stream: source documents as their (spliced) bytes,
/// documents this tool made as new `---` documents where they stand. Comments
/// before a stream's first document stay at the top.
pub fn write_docs(docs: &[Document], out: &mut Vec<u8>) {
    write_docs_with(docs, out, &mut |_| Ok(())).expect("spilling nothing cannot fail");
}

/// `write_docs`, handing `out` to `spill` after each document or run of new ones
/// (which may write some of it out and drain it, keeping at least its last byte).
pub fn write_docs_with(
    docs: &[Document],
    out: &mut Vec<u8>,
    spill: &mut dyn FnMut(&mut Vec<u8>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut i = 0;
    while i < docs.len() {
        if i == 0 && docs[0].text.is_some() && docs[0].region.0 > 0 {
            write_after_removed_head(&docs[0], out);
            i += 1;
            spill(out)?;
            continue;
        }
        if docs[i].text.is_some() {
            write_source_doc(&docs[i], out, false);
            i += 1;
            spill(out)?;
            continue;
        }
        let run_end = docs[i..]
            .iter()
            .position(|d| d.text.is_some())
            .map_or(docs.len(), |p| i + p);
        let next = docs.get(run_end);
        if let Some(next) = next {
            // The comments heading a file stay above documents put before its first.
            out.extend_from_slice(
                &next.text.as_ref().expect("a source document")[next.region.0..next.body],
            );
        }
        // At a stream's start the first new document has a `---` only if the
        // document it precedes had one: the file's start stays as it was, so that
        // taking the new documents out again gives back the same bytes.
        for (k, fresh) in docs[i..run_end]
            .iter()
            .filter(|d| !d.is_empty())
            .enumerate()
        {
            ensure_newline(out);
            let marker = i > 0 || k > 0 || next.is_none_or(|n| n.explicit_start);
            write_emitted(fresh, marker, out);
        }
        if let Some(next) = next {
            ensure_newline(out);
            if !next.explicit_start {
                // On a line of its own: kubectl's line splitter refuses a `---`
                // followed by content (`--- {...}`).
                out.extend_from_slice(b"---\n");
            }
            write_source_doc(next, out, true);
        }
        i = run_end + 1;
        spill(out)?;
    }
    Ok(())
}

/// The first document left after the documents before it were removed: the file's
/// head (comments, and a `---` only if the file started with one) stays at the top,
/// and the `---` that separated this document from the removed ones goes.
fn write_after_removed_head(doc: &Document, out: &mut Vec<u8>) {
    let text = doc.text.as_ref().expect("a source document");
    let head = head_end(text);
    out.extend_from_slice(&text[..head]);
    let file_had_marker = text[head..].starts_with(b"---");
    let mut doc_text: Vec<u8> = Vec::new();
    write_source_doc(doc, &mut doc_text, false);
    // What preceded the document's body in its region (the removed document's
    // trailing lines) went with the removed document.
    let from_body = doc.body.saturating_sub(doc.region.0).min(doc_text.len());
    let mut rest = &doc_text[from_body..];
    if !file_had_marker && doc.explicit_start {
        for bare in [&b"---\n"[..], b"---\r\n"] {
            if let Some(r) = rest.strip_prefix(bare) {
                rest = r;
                break;
            }
        }
    }
    out.extend_from_slice(rest);
}

/// Where a stream's head ends: its byte order mark, blank and comment lines, and
/// `%` directives, before the first `---` or content.
fn head_end(text: &[u8]) -> usize {
    let mut at = if text.starts_with(b"\xEF\xBB\xBF") {
        3
    } else {
        0
    };
    while at < text.len() {
        let end = text[at..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(text.len(), |p| at + p + 1);
        let line = text[at..end].trim_ascii();
        if !(line.is_empty() || line.starts_with(b"#") || line.starts_with(b"%")) {
            break;
        }
        at = end;
    }
    at
}

/// Ends the output so far with a line break, so a document can follow.
pub fn ensure_newline(out: &mut Vec<u8>) {
    if out.last().is_some_and(|&b| b != b'\n') {
        out.push(b'\n');
    }
}

/// Whether a stream written by `write_docs` starts with a `---` or other marker that
/// separates it from a stream written before it.
pub fn starts_explicitly(docs: &[Document]) -> bool {
    match docs.first() {
        None => true,
        // New documents at the start follow the file's first (see `write_docs`).
        Some(d) if d.text.is_none() => docs
            .iter()
            .find(|d| d.text.is_some())
            .is_none_or(|n| n.explicit_start),
        // The documents before it were removed: the file's head stays.
        Some(d) if d.region.0 > 0 => {
            let text = d.text.as_ref().expect("a source document");
            text[head_end(text)..].starts_with(b"---")
        }
        Some(d) => d.explicit_start,
    }
}

fn write_emitted(doc: &Document, explicit_start: bool, out: &mut Vec<u8>) {
    if let Edited::Frozen(frozen) = &doc.edited {
        let Frozen::Bytes(bytes) = frozen else {
            unreachable!("a new document has no source to edit");
        };
        // Frozen with its `---` (`render_doc`), which goes where the document
        // starts a stream without one; the rest is the same either way, as the
        // emitter writes the marker on a line of its own.
        let bytes = match explicit_start {
            true => &bytes[..],
            false => bytes
                .strip_prefix(b"---\n")
                .expect("a new document is written with its `---` on a line of its own"),
        };
        out.extend_from_slice(bytes);
        return;
    }
    // The emitter's buffer starts empty.
    let mut bytes = Vec::new();
    let mut w = YamlWriter::new(&mut bytes);
    w.node_document(&doc.root, explicit_start, doc.explicit_end);
    w.finish();
    super::emit::markers_on_their_own_line(&mut bytes);
    out.extend_from_slice(&bytes);
}

/// One document of a source: from its region's start (or its body's, when what
/// comes before the body was already written).
fn write_source_doc(doc: &Document, out: &mut Vec<u8>, from_body: bool) {
    let text = doc.text.as_ref().expect("a source document");
    let (start, end) = doc.region;
    let from = if from_body { doc.body } else { start };
    match &doc.edited {
        Edited::No => out.extend_from_slice(&text[from..end]),
        Edited::Spliced(old) => {
            match splice(text, old, &doc.root, (from, end), doc.crlf, doc.indents) {
                Some(edits) => apply_edits(text, from, end, &edits, doc.crlf, out),
                None => match refs::rewrite_item(doc, old, text, from) {
                    Some(bytes) => out.extend_from_slice(&bytes),
                    None => rewrite(doc, text, from, out),
                },
            }
        }
        Edited::Rewritten => rewrite(doc, text, from, out),
        Edited::Frozen(Frozen::Edits(edits)) => apply_edits(text, from, end, edits, doc.crlf, out),
        Edited::Frozen(Frozen::Bytes(bytes)) => out.extend_from_slice(&bytes[from - start..]),
    }
}

/// A document's bytes as `write_docs` writes it: a source document from its
/// region's start, a new one with its `---`.
pub fn render_doc(doc: &Document) -> Vec<u8> {
    let mut out = Vec::new();
    if doc.text.is_some() {
        write_source_doc(doc, &mut out, false);
    } else {
        write_emitted(doc, true, &mut out);
    }
    out
}

/// A document written anew, after what preceded its body in the source.
fn rewrite(doc: &Document, text: &[u8], from: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(&text[from..doc.body]);
    if super::read::sniffs_json(text) {
        // JSON stays JSON: kubectl reads a source that starts with `{` as JSON.
        let value = super::emit::to_json(&doc.root);
        out.extend_from_slice(&serde_json::to_vec_pretty(&value).expect("JSON values serialize"));
        out.push(b'\n');
        return;
    }
    write_emitted(doc, doc.explicit_start, out);
}

/// Whether `text` breaks lines with anything but `\n` or `\r\n`: a lone `\r`, or
/// NEL, LS or PS, which YAML 1.1 readers (libyaml, kubectl's go-yaml) take as line
/// breaks too. The splicer finds lines by `\n`; such a document is written anew.
pub fn other_line_breaks(text: &[u8]) -> bool {
    (0..text.len()).any(|i| super::parse::other_break_at(text, i))
}

/// The edits that turn `text` into the bytes of `new`, the tree `old` (read from
/// it) edited, or `None` when they cannot be spliced faithfully. Sorted, apart, and
/// within `text[from..end]`: `apply_edits` cannot fail.
fn splice(
    text: &[u8],
    old: &Node,
    new: &Node,
    (from, end): (usize, usize),
    crlf: bool,
    indents: Option<Indents>,
) -> Option<Vec<Edit>> {
    if !same_node(old, new) || other_line_breaks(&text[from..end]) {
        return None;
    }
    // Edited in its expanded form: only a list's items can be, each apart (an
    // item cut out of its list is written anew whole, as its list writes it).
    let items = match refs::has_refs(old) {
        true if indents.is_some() => return None,
        true => refs::item_refs(old, new)?,
        false => refs::ItemRefs::default(),
    };
    let mut s = Splicer::new(text, old, indents);
    s.items = items;
    s.json = super::read::sniffs_json(text) || written_as_json(old);
    s.node(old, new).ok()?;
    let mut edits = s.edits;
    // An insertion goes before a removal or replacement starting at the same place.
    edits.sort_by_key(|e| (e.0, e.1));
    let mut at = from;
    for &(start, stop, _) in &edits {
        if start < at || stop > end {
            return None;
        }
        at = stop;
    }
    let lines = |t: String| match crlf {
        true => t.replace('\n', "\r\n"),
        false => t,
    };
    Some(
        edits
            .into_iter()
            .map(|(start, stop, t)| (start, stop, lines(t).into_bytes().into_boxed_slice()))
            .collect(),
    )
}

/// The bytes `text[from..end]` with `edits` (from `splice`) spliced in, appended to
/// `out`.
fn apply_edits(
    text: &[u8],
    from: usize,
    end: usize,
    edits: &[Edit],
    crlf: bool,
    out: &mut Vec<u8>,
) {
    let base = out.len();
    let nl: &[u8] = if crlf { b"\r\n" } else { b"\n" };
    let mut at = from;
    for (start, stop, chunk) in edits {
        let (start, stop) = (*start, *stop);
        out.extend_from_slice(&text[at..start]);
        // A file that ends without a line break still does after the edit (and so
        // taking the added lines out again gives back the same bytes): lines added
        // at its end go after a line break, without one of their own...
        let mine = &out[base..];
        if start == text.len() && mine.last().is_some_and(|&b| b != b'\n') && chunk.ends_with(b"\n")
        {
            out.extend_from_slice(nl);
            out.extend_from_slice(&chunk[..chunk.len() - nl.len()]);
        } else {
            out.extend_from_slice(chunk);
        }
        // ...and removing its last lines takes the line break before them.
        if stop == text.len() && stop > start && chunk.is_empty() && !text.ends_with(b"\n") {
            let mine = &out[base..];
            if mine.ends_with(b"\r\n") {
                out.truncate(out.len() - 2);
            } else if mine.ends_with(b"\n") {
                out.pop();
            }
        }
        at = stop;
    }
    out.extend_from_slice(&text[at..end]);
}

/// What `batch::freeze` keeps of an edited or new document to write it later: a
/// spliced source document's edits, else its bytes (`render_doc`).
pub fn frozen(doc: &Document) -> Frozen {
    if let (Some(text), Edited::Spliced(old)) = (&doc.text, &doc.edited) {
        let (from, end) = doc.region;
        // Edits within its body apply as well when it is written from there.
        match splice(text, old, &doc.root, (from, end), doc.crlf, doc.indents) {
            Some(edits) if edits.first().is_none_or(|e| e.0 >= doc.body) => {
                return Frozen::Edits(edits)
            }
            _ => {}
        }
    }
    Frozen::Bytes(render_doc(doc))
}

/// `Some(k)` when a flow collection kept its first `k` children in place (k > 0) and
/// lost all the others, which came after them (`matched`: for each new child, the
/// old one it is).
fn tail_removed(matched: &[Option<usize>], old_len: usize) -> Option<usize> {
    let k = matched.len();
    let in_place = matched.iter().enumerate().all(|(i, m)| *m == Some(i));
    (k > 0 && k < old_len && in_place).then_some(k)
}

/// The node in the edited tree is the one read from the source at the same place.
fn same_node(old: &Node, new: &Node) -> bool {
    old.is_sourced() && new.is_sourced() && old.span.start == new.span.start
}

/// A change that cannot be spliced into the collection at hand: its parent writes
/// the collection anew instead.
struct Rewrite;

type Spliced = Result<(), Rewrite>;

struct Splicer<'t> {
    text: &'t [u8],
    /// `(start, end, text)`: replace `text[start..end]`.
    edits: Vec<(usize, usize, String)>,
    /// How far the document indents a block list under its key, and a mapping
    /// under its key, so added collections look like their neighbours.
    seq_indent: usize,
    map_indent: usize,
    /// List items of a document edited in its expanded form, kept or written anew.
    items: refs::ItemRefs,
    /// The source is JSON (kubectl reads it as JSON): what is written into it is
    /// JSON too, keys and strings quoted.
    json: bool,
}

/// How far a document indents a block list, and a block mapping, under its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Indents {
    pub seq: usize,
    pub map: usize,
}

/// How far the document `root` (read from `text`) indents a block list and a block
/// mapping under their keys, as found for splicing (the first of each, breadth
/// first), where it has one; with `shallow`, among the root's own entries only.
pub fn indents_of(text: &[u8], root: &Node, shallow: bool) -> (Option<usize>, Option<usize>) {
    let s = Splicer::new(text, root, Some(Indents { seq: 0, map: 0 }));
    (
        s.find_indent(root, true, shallow),
        s.find_indent(root, false, shallow),
    )
}

impl<'t> Splicer<'t> {
    fn new(text: &'t [u8], root: &Node, given: Option<Indents>) -> Splicer<'t> {
        let mut s = Splicer {
            text,
            edits: Vec::new(),
            seq_indent: 0,
            map_indent: 2,
            items: refs::ItemRefs::default(),
            json: false,
        };
        if let Some(given) = given {
            s.seq_indent = given.seq;
            s.map_indent = given.map;
            return s;
        }
        if let Some(i) = s.find_indent(root, true, false) {
            s.seq_indent = i;
        }
        if let Some(i) = s.find_indent(root, false, false) {
            s.map_indent = i;
        }
        s
    }

    /// A node written on one line inside a flow collection: JSON in a JSON source.
    fn flow_text(&self, n: &Node) -> String {
        match self.json {
            true => json_line(n),
            false => flow_text(n),
        }
    }

    /// A mapping key on one line: a JSON string in a JSON source.
    fn inline(&self, k: &Node) -> String {
        match self.json {
            true => json_text(&serde_json::Value::String(super::emit::key_string(k))),
            false => inline(k),
        }
    }

    /// The indentation of the first block list (or mapping) under a key, relative
    /// to the key, breadth first.
    fn find_indent(&self, root: &Node, seq: bool, shallow: bool) -> Option<usize> {
        let mut queue = std::collections::VecDeque::from([root]);
        while let Some(n) = queue.pop_front() {
            if shallow && !std::ptr::eq(n, root) {
                return None;
            }
            match &n.value {
                Value::Map {
                    entries,
                    flow: false,
                } => {
                    for (k, v) in entries {
                        let block_child = match &v.value {
                            Value::Seq { items, flow: false } if seq => !items.is_empty(),
                            Value::Map {
                                entries,
                                flow: false,
                            } if !seq => !entries.is_empty(),
                            _ => false,
                        };
                        if block_child && k.is_sourced() && v.is_sourced() {
                            let child = if seq {
                                self.dash_of(v.items()?[0].span.start)?
                            } else {
                                v.span.start as usize
                            };
                            return self.col(child).checked_sub(self.col(k.span.start as usize));
                        }
                        queue.push_back(v);
                    }
                }
                Value::Seq { items, flow: false } => queue.extend(items.iter()),
                _ => {}
            }
        }
        None
    }

    fn line_start(&self, pos: usize) -> usize {
        self.text[..pos]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1)
    }

    fn col(&self, pos: usize) -> usize {
        let start = self.line_start(pos);
        // A byte order mark opens the first line without indenting it.
        let bom = if start == 0 && self.text.starts_with(b"\xEF\xBB\xBF") {
            3
        } else {
            0
        };
        (pos - start).saturating_sub(bom)
    }

    /// Only indentation before `pos` on its line.
    fn first_on_line(&self, pos: usize) -> bool {
        let line = &self.text[self.line_start(pos)..pos];
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        line.iter().all(|&b| b == b' ' || b == b'\t')
    }

    /// The start of the line after the one `pos` ends on (past a trailing comment),
    /// or `pos` itself when a block scalar ended there at a line's start.
    fn line_after(&self, pos: usize) -> usize {
        refs::line_after(self.text, pos)
    }

    /// The `-` of a block list item whose content starts at `start`: on its line,
    /// or on a line above it with only blank and comment lines between (kpt writes
    /// the comments heading a file as `- # comment` above the item's first key).
    fn dash_of(&self, start: u32) -> Option<usize> {
        let blank = |b: &u8| matches!(b, b' ' | b'\t');
        let mut p = start as usize;
        loop {
            while p > 0 && blank(&self.text[p - 1]) {
                p -= 1;
            }
            if p > 0 && self.text[p - 1] == b'-' {
                return Some(p - 1);
            }
            if p == 0 || self.text[p - 1] != b'\n' {
                return None;
            }
            // The line above: the dash's (`-`, maybe a comment after it), or a
            // blank or comment line between the dash and the content.
            let above = self.line_start(p - 1);
            let line = &self.text[above..p - 1];
            let lead = line.iter().take_while(|b| blank(b)).count();
            match line[lead..].trim_ascii_end() {
                [] | [b'#', ..] => p = above,
                [b'-'] => return Some(above + lead),
                [b'-', sep, rest @ ..]
                    if blank(sep) && rest.trim_ascii_start().starts_with(b"#") =>
                {
                    return Some(above + lead)
                }
                _ => return None,
            }
        }
    }

    /// The `:` after a key ending at `end`.
    fn colon_after(&self, end: u32) -> Option<usize> {
        let p = end as usize;
        let skip = self.text[p..]
            .iter()
            .position(|&b| !matches!(b, b' ' | b'\t'))?;
        (self.text[p + skip] == b':').then_some(p + skip)
    }

    /// Inserts `s` at `pos`, on a line of its own when `pos` ends the text without one.
    /// (At the end of a text without a final line break, `splice` adds one first.)
    fn insert_lines(&mut self, pos: usize, s: String) {
        self.edits.push((pos, pos, s));
    }

    /// Splices the differences of a node read from the source, or leaves no edit
    /// behind when it cannot (its parent then writes it anew).
    fn try_node(&mut self, old: &Node, new: &Node) -> bool {
        let mark = self.edits.len();
        let ok = same_node(old, new) && self.node(old, new).is_ok();
        if !ok {
            self.edits.truncate(mark);
        }
        ok
    }

    fn node(&mut self, old: &Node, new: &Node) -> Spliced {
        if old.props != new.props {
            return Err(Rewrite);
        }
        match (&old.value, &new.value) {
            (Value::Scalar(a), Value::Scalar(b)) if a == b => Ok(()),
            (Value::Alias(a), Value::Alias(b)) if a == b => Ok(()),
            (
                Value::Map {
                    entries: oe,
                    flow: of,
                },
                Value::Map {
                    entries: ne,
                    flow: nf,
                },
            ) if of == nf => self.map(oe, ne, *of),
            (
                Value::Seq {
                    items: oi,
                    flow: of,
                },
                Value::Seq {
                    items: ni,
                    flow: nf,
                },
            ) if of == nf => self.seq(oi, ni, *of),
            _ => Err(Rewrite),
        }
    }

    /// A child of a flow collection: spliced, or written anew in flow style.
    fn flow_child(&mut self, old: &Node, new: &Node) {
        if self.try_node(old, new) {
            return;
        }
        self.edits.push((
            old.span.start as usize,
            old.span.end as usize,
            self.flow_text(new),
        ));
    }

    /// A flow mapping that only gained entries at its end gets them after its last
    /// entry, each on a line of its own when the mapping spans lines (JSON as
    /// people format it): only that entry's line changes, by a comma. Any other
    /// change of its keys writes it anew.
    fn flow_map(
        &mut self,
        old: &[(Node, Node)],
        new: &[(Node, Node)],
        matched: &[Option<usize>],
    ) -> Spliced {
        // Entries removed at its end only (what inject appended, taken out again):
        // cut from the end of the last kept entry to the end of the last entry.
        if let Some(k) = tail_removed(matched, old.len()) {
            for ((ok, ov), (nk, nv)) in old[..k].iter().zip(new) {
                if ok != nk {
                    return Err(Rewrite);
                }
                self.flow_child(ov, nv);
            }
            let last = &old[old.len() - 1];
            let from = entry_end(&old[k - 1].0, &old[k - 1].1);
            self.edits
                .push((from, entry_end(&last.0, &last.1), String::new()));
            return Ok(());
        }
        if old.is_empty() && new.is_empty() {
            return Ok(()); // `{}` or `{ }` that stays empty stays as written
        }
        let kept = matched.iter().flatten().count();
        if kept != old.len() || kept == 0 || matched[..kept].iter().any(Option::is_none) {
            return Err(Rewrite);
        }
        for ((ok, ov), (nk, nv)) in old.iter().zip(new) {
            if ok != nk {
                return Err(Rewrite);
            }
            self.flow_child(ov, nv);
        }
        if new.len() > kept {
            let (first, last) = (&old[0].0, &old[kept - 1]);
            let open = self.open_bracket(first, b'{')?;
            let sep = self.flow_separator(open, first.span.start as usize);
            let text: String = new[kept..]
                .iter()
                .map(|(k, v)| format!(",{sep}{}: {}", self.inline(k), self.flow_text(v)))
                .collect();
            let end = entry_end(&last.0, &last.1);
            self.edits.push((end, end, text));
        }
        Ok(())
    }

    /// A flow list that only gained items at its end gets them after its last item,
    /// as a flow mapping gets entries.
    fn flow_seq(&mut self, old: &[Node], new: &[Node], matched: &[Option<usize>]) -> Spliced {
        if old.is_empty() && new.is_empty() {
            return Ok(()); // `[]` or `[ ]` that stays empty stays as written
        }
        // Old items kept in order, new ones inserted and old ones removed anywhere
        // (the trio before its workload in a List, and taken out again): each gap
        // is spliced where it is; the kept items keep their text.
        match self.flow_seq_gaps(old, new, matched)? {
            Some(edits) => {
                self.edits.extend(edits);
                Ok(())
            }
            None => Err(Rewrite),
        }
    }

    /// The edits for a flow list whose kept items stay in order, or `None` when
    /// none of the old items is kept (written anew then).
    #[allow(clippy::type_complexity)]
    fn flow_seq_gaps(
        &mut self,
        old: &[Node],
        new: &[Node],
        matched: &[Option<usize>],
    ) -> Result<Option<Vec<(usize, usize, String)>>, Rewrite> {
        let kept: Vec<(usize, usize)> = matched
            .iter()
            .enumerate()
            .filter_map(|(j, m)| m.map(|i| (i, j)))
            .collect();
        if kept.is_empty() {
            return Ok(None);
        }
        for &(i, j) in &kept {
            self.flow_child(&old[i], &new[j]);
        }
        let open = self.open_bracket(&old[0], b'[')?;
        let sep = self.flow_separator(open, old[0].span.start as usize);
        let mut edits = Vec::new();
        // Removed runs: up to the next kept item, or (at the end) from the last kept.
        let is_kept = |i: usize| kept.iter().any(|&(k, _)| k == i);
        let mut i = 0;
        while i < old.len() {
            if is_kept(i) {
                i += 1;
                continue;
            }
            let run = i;
            while i < old.len() && !is_kept(i) {
                i += 1;
            }
            let cut = if i < old.len() {
                (old[run].span.start as usize, old[i].span.start as usize)
            } else {
                let prev = (0..run).rev().find(|&p| is_kept(p)).expect("a kept item");
                (old[prev].span.end as usize, old[i - 1].span.end as usize)
            };
            edits.push((cut.0, cut.1, String::new()));
        }
        // Inserted runs: before the next kept item, or after the last one.
        let mut j = 0;
        while j < new.len() {
            if matched[j].is_some() {
                j += 1;
                continue;
            }
            let run = j;
            while j < new.len() && matched[j].is_none() {
                j += 1;
            }
            let items = &new[run..j];
            if let Some(Some(next)) = matched.get(j) {
                let at = old[*next].span.start as usize;
                let text: String = items
                    .iter()
                    .map(|n| format!("{},{sep}", self.flow_text(n)))
                    .collect();
                edits.push((at, at, text));
            } else {
                let last = kept.last().expect("a kept item").0;
                let at = old[last].span.end as usize;
                let text: String = items
                    .iter()
                    .map(|n| format!(",{sep}{}", self.flow_text(n)))
                    .collect();
                edits.push((at, at, text));
            }
        }
        Ok(Some(edits))
    }

    /// The `{` or `[` before a flow collection's first child.
    fn open_bracket(&self, first: &Node, bracket: u8) -> Result<usize, Rewrite> {
        let p = self.text[..first.span.start as usize]
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .ok_or(Rewrite)?;
        if self.text[p] == bracket {
            Ok(p)
        } else {
            Err(Rewrite)
        }
    }

    /// Between a flow collection's children: a line break and the first child's
    /// indentation when it is on a line of its own, else a space.
    fn flow_separator(&self, open: usize, first: usize) -> String {
        if self.text[open..first].contains(&b'\n') {
            format!("\n{}", " ".repeat(self.col(first)))
        } else {
            " ".to_string()
        }
    }

    fn map(&mut self, old: &[(Node, Node)], new: &[(Node, Node)], flow: bool) -> Spliced {
        let matched = match_up(old.iter().map(|e| &e.0), new.iter().map(|e| &e.0))?;
        if flow {
            return self.flow_map(old, new, &matched);
        }
        let kept: Vec<usize> = matched.iter().flatten().copied().collect();
        let Some(&first_kept) = kept.first() else {
            return Err(Rewrite);
        };
        // Removed entries lose their lines; the first entry of a list item (on the
        // `- ` line) is cut up to the next kept key, which takes its place.
        let mut i = 0;
        while i < old.len() {
            if kept.contains(&i) {
                i += 1;
                continue;
            }
            let (k, v) = &old[i];
            let key = k.span.start as usize;
            if self.first_on_line(key) {
                let stop = self.line_after(entry_end(k, v));
                self.edits.push((self.line_start(key), stop, String::new()));
                i += 1;
            } else {
                let Some(&next) = kept.iter().find(|&&j| j > i) else {
                    return Err(Rewrite);
                };
                self.edits
                    .push((key, old[next].0.span.start as usize, String::new()));
                i = next;
            }
        }
        let indent = self.col(old[first_kept].0.span.start as usize);
        let mut fresh: Vec<&(Node, Node)> = Vec::new();
        let mut before: Option<usize> = None;
        for (entry, m) in new.iter().zip(&matched) {
            let Some(oi) = *m else {
                fresh.push(entry);
                continue;
            };
            self.insert_entries(&mut fresh, before, old, oi, indent)?;
            let (ok, ov) = &old[oi];
            if ok != &entry.0 {
                return Err(Rewrite);
            }
            let nv = &entry.1;
            if !self.try_node(ov, nv) {
                self.replace_value(ok, ov, nv, indent)?;
            }
            before = Some(oi);
        }
        let last = *kept.last().expect("a kept entry");
        self.insert_entries(&mut fresh, before, old, last + 1, indent)
    }

    /// Writes `fresh` entries after old entry `after` (or before old entry `next`
    /// when none came before them).
    fn insert_entries(
        &mut self,
        fresh: &mut Vec<&(Node, Node)>,
        after: Option<usize>,
        old: &[(Node, Node)],
        next: usize,
        indent: usize,
    ) -> Spliced {
        if fresh.is_empty() {
            return Ok(());
        }
        let mut lines = String::new();
        for (k, v) in fresh.drain(..) {
            self.entry(k, v, indent, &mut lines);
        }
        match after {
            Some(a) => {
                let pos = self.line_after(entry_end(&old[a].0, &old[a].1));
                self.insert_lines(pos, lines);
            }
            None => {
                let key = old[next].0.span.start as usize;
                if self.first_on_line(key) {
                    self.insert_lines(self.line_start(key), lines);
                } else {
                    // After `- `: the new entries open the item, the old first
                    // entry moves to a line of its own.
                    let text = format!("{}{}", lines.trim_start(), " ".repeat(indent));
                    self.edits.push((key, key, text));
                }
            }
        }
        Ok(())
    }

    /// Replaces the value of a block mapping entry, from after its `:`.
    fn replace_value(&mut self, key: &Node, old: &Node, new: &Node, indent: usize) -> Spliced {
        let colon = self.colon_after(key.span.end).ok_or(Rewrite)?;
        let old_block = is_block(old);
        let stop = if old_block {
            self.line_after(old.span.end as usize)
        } else {
            (old.span.end as usize).max(colon + 1)
        };
        // A comment after a replaced value on its line was about that value: it
        // goes with it (`serviceAccountName: old   # old account`).
        // (A collection written anew is the same value changed: its comment stays.)
        let stop = match old.value {
            Value::Scalar(_) | Value::Alias(_) if !old_block => {
                self.comment_after(stop).unwrap_or(stop)
            }
            _ => stop,
        };
        let mut text = String::new();
        self.value(new, indent, &mut text);
        if !old_block {
            text.truncate(text.trim_end_matches('\n').len());
        }
        self.edits.push((colon + 1, stop, text));
        Ok(())
    }

    /// Where the comment that ends the line at `pos` ends (before the line break),
    /// when only blanks stand between `pos` and its `#`.
    fn comment_after(&self, pos: usize) -> Option<usize> {
        let rest = &self.text[pos..];
        let blanks = rest
            .iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
        if blanks == 0 || rest.get(blanks) != Some(&b'#') {
            return None;
        }
        let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        let end = if end > 0 && rest[end - 1] == b'\r' {
            end - 1
        } else {
            end
        };
        Some(pos + end)
    }

    fn seq(&mut self, old: &[Node], new: &[Node], flow: bool) -> Spliced {
        let matched = match_up(old.iter(), new.iter())?;
        if flow {
            return self.flow_seq(old, new, &matched);
        }
        let kept: Vec<usize> = matched.iter().flatten().copied().collect();
        let Some(&first_kept) = kept.first() else {
            return Err(Rewrite);
        };
        let dashes: Vec<usize> = old
            .iter()
            .map(|o| {
                self.dash_of(o.span.start)
                    .filter(|&d| self.first_on_line(d))
            })
            .collect::<Option<_>>()
            .ok_or(Rewrite)?;
        for (i, o) in old.iter().enumerate() {
            if !kept.contains(&i) {
                let stop = self.line_after(o.span.end as usize);
                self.edits
                    .push((self.line_start(dashes[i]), stop, String::new()));
            }
        }
        let dash_col = self.col(dashes[first_kept]);
        let content = self
            .col(old[first_kept].span.start as usize)
            .saturating_sub(dash_col)
            .clamp(2, 4);
        let mut fresh: Vec<&Node> = Vec::new();
        let mut before: Option<usize> = None;
        let flush = |s: &mut Self, fresh: &mut Vec<&Node>, before: Option<usize>, next: usize| {
            if fresh.is_empty() {
                return;
            }
            let mut lines = String::new();
            for n in fresh.drain(..) {
                s.item(n, dash_col, content, &mut lines);
            }
            let pos = match before {
                Some(b) => s.line_after(old[b].span.end as usize),
                None => s.line_start(dashes[next]),
            };
            s.insert_lines(pos, lines);
        };
        for (n, m) in new.iter().zip(&matched) {
            let Some(oi) = *m else {
                fresh.push(n);
                continue;
            };
            flush(self, &mut fresh, before, oi);
            let o = &old[oi];
            let at = o.span.start;
            if self.items.anew.binary_search(&at).is_ok() {
                let lines = refs::emitted_item(n, dash_col, content);
                let stop = self.line_after(o.span.end as usize);
                self.edits.push((self.line_start(dashes[oi]), stop, lines));
            } else if self.items.kept.binary_search(&at).is_err() && !self.try_node(o, n) {
                let mut lines = String::new();
                self.item(n, dash_col, content, &mut lines);
                let stop = self.line_after(o.span.end as usize);
                self.edits.push((self.line_start(dashes[oi]), stop, lines));
            }
            before = Some(oi);
        }
        flush(self, &mut fresh, before, 0);
        Ok(())
    }

    /// `key: value` lines at `indent`.
    fn entry(&self, k: &Node, v: &Node, indent: usize, out: &mut String) {
        out.push_str(&" ".repeat(indent));
        out.push_str(&inline(k));
        out.push(':');
        self.value(v, indent, out);
    }

    /// What follows a key's `:` (or a list item's `-`): ` scalar\n`, or a line break
    /// and the collection's lines indented under `indent`.
    fn value(&self, v: &Node, indent: usize, out: &mut String) {
        match &v.value {
            Value::Map { entries, .. } if is_block(v) => {
                out.push('\n');
                for (k, val) in entries {
                    self.entry(k, val, indent + self.map_indent, out);
                }
            }
            Value::Seq { items, .. } if is_block(v) => {
                out.push('\n');
                let dash = indent + self.seq_indent;
                for item in items {
                    self.item(item, dash, 2, out);
                }
            }
            _ => {
                out.push(' ');
                out.push_str(&inline(v));
                out.push('\n');
            }
        }
    }

    /// A list item's lines: `-` at `dash`, its content `content` columns further.
    fn item(&self, n: &Node, dash: usize, content: usize, out: &mut String) {
        let lead = format!("{}-{}", " ".repeat(dash), " ".repeat(content - 1));
        match &n.value {
            Value::Map { entries, .. } if is_block(n) => {
                for (i, (k, v)) in entries.iter().enumerate() {
                    let mut lines = String::new();
                    self.entry(k, v, dash + content, &mut lines);
                    if i == 0 {
                        out.push_str(&lead);
                        out.push_str(&lines[dash + content..]);
                    } else {
                        out.push_str(&lines);
                    }
                }
            }
            Value::Seq { items, .. } if is_block(n) => {
                out.push_str(&" ".repeat(dash));
                out.push_str("-\n");
                for item in items {
                    self.item(item, dash + content, 2, out);
                }
            }
            _ => {
                out.push_str(&" ".repeat(dash));
                out.push('-');
                self.value(n, dash, out);
            }
        }
    }
}

/// Where an entry's text ends: its value's end, or its key's for an empty value.
fn entry_end(k: &Node, v: &Node) -> usize {
    k.span.end.max(v.span.end) as usize
}

/// A block collection with children, or a block scalar: text spanning lines.
fn is_block(n: &Node) -> bool {
    match &n.value {
        Value::Map { entries, flow } => !flow && !entries.is_empty(),
        Value::Seq { items, flow } => !flow && !items.is_empty(),
        Value::Scalar(s) => matches!(s.style, Style::Literal | Style::Folded) && n.is_sourced(),
        Value::Alias(_) => false,
    }
}

/// For each new child, the index of the old child it is (same place in the source),
/// or `None` for a child this tool added. Old children must keep their order, so
/// each is looked for after the one matched before it (then, to tell a reordered
/// child from a new one, before it).
fn match_up<'n>(
    old: impl ExactSizeIterator<Item = &'n Node> + Clone,
    new: impl Iterator<Item = &'n Node>,
) -> Result<Vec<Option<usize>>, Rewrite> {
    let is = |n: &Node, o: &Node| o.is_sourced() && o.span.start == n.span.start;
    let mut next = 0;
    let mut out = Vec::with_capacity(old.len());
    for n in new {
        let m = match n.is_sourced() {
            false => None,
            true => match old.clone().skip(next).position(|o| is(n, o)) {
                Some(ahead) => Some(next + ahead),
                None if old.clone().take(next).any(|o| is(n, o)) => return Err(Rewrite),
                None => None,
            },
        };
        if let Some(i) = m {
            next = i + 1;
        }
        out.push(m);
    }
    Ok(out)
}

/// A node on one line: a scalar as the emitter quotes it (a block scalar, which
/// needs lines of its own, double-quoted), an alias, or a collection in flow style.
fn inline(n: &Node) -> String {
    match &n.value {
        Value::Alias(name) => format!("*{name}"),
        Value::Scalar(s) if matches!(s.style, Style::Literal | Style::Folded) => {
            let mut n = n.clone();
            if let Value::Scalar(s) = &mut n.value {
                s.style = Style::DoubleQuoted;
            }
            emitted_line(&n)
        }
        Value::Scalar(_) => emitted_line(n),
        _ => flow_text(n),
    }
}

/// Whether a document is written as JSON: its root a flow collection, every
/// collection in it flow style, every key and string double-quoted (a YAML flow
/// mapping, `{a: b}`, keeps YAML's style for what is added to it).
fn written_as_json(root: &Node) -> bool {
    fn json(n: &Node) -> bool {
        match &n.value {
            Value::Map { entries, flow } => {
                *flow
                    && entries.iter().all(|(k, v)| {
                        matches!(&k.value, Value::Scalar(s) if s.style == Style::DoubleQuoted)
                            && json(v)
                    })
            }
            Value::Seq { items, flow } => *flow && items.iter().all(json),
            Value::Scalar(s) => match s.style {
                Style::DoubleQuoted => true,
                Style::Plain => !matches!(
                    super::scalar::resolve_plain(&s.text),
                    super::scalar::Resolved::Str
                ),
                _ => false,
            },
            Value::Alias(_) => false,
        }
    }
    root.is_flow() && json(root)
}

/// A node as JSON on one line, `{"a": 1, "b": [2, 3]}`, its values as kubectl
/// reads them (a key is always a string).
pub fn json_line(n: &Node) -> String {
    json_text(&super::emit::to_json(n))
}

fn json_text(value: &serde_json::Value) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, SpacedJson);
    serde::Serialize::serialize(value, &mut ser).expect("JSON values serialize");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// `, ` before every item or entry but the first.
fn comma_space<W: ?Sized + std::io::Write>(w: &mut W, first: bool) -> std::io::Result<()> {
    if first {
        Ok(())
    } else {
        w.write_all(b", ")
    }
}

/// serde_json's compact form with a space after `:` and `,`, as JSON written by
/// hand on one line usually is.
struct SpacedJson;

impl serde_json::ser::Formatter for SpacedJson {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        comma_space(w, first)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        comma_space(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

/// A node written in flow style on one line.
fn flow_text(n: &Node) -> String {
    let mut n = n.clone();
    force_flow(&mut n);
    emitted_line(&n)
}

/// What the emitter writes for a scalar it writes as it is given: plain, single- or
/// double-quoted, of ASCII letters, digits and `-._/`, starting with a letter, a
/// digit or `/`, without tag or anchor. Nothing in such a text makes libyaml quote
/// it otherwise or escape anything; names, paths and numbers, which is most of
/// what inject adds to every workload, skip setting up an emitter.
fn simple_scalar(n: &Node) -> Option<String> {
    let Value::Scalar(s) = &n.value else {
        return None;
    };
    let t = s.text.as_bytes();
    let simple = n.props.is_none()
        && t.first()
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'/')
        && t.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'/'));
    match s.style {
        _ if !simple => None,
        Style::Plain => Some(s.text.to_string()),
        Style::SingleQuoted => Some(format!("'{}'", s.text)),
        Style::DoubleQuoted => Some(format!("\"{}\"", s.text)),
        Style::Literal | Style::Folded => None,
    }
}

fn force_flow(n: &mut Node) {
    match &mut n.value {
        Value::Seq { items, flow } => {
            *flow = true;
            items.iter_mut().for_each(force_flow);
        }
        Value::Map { entries, flow } => {
            *flow = true;
            entries.iter_mut().for_each(|(_, v)| force_flow(v));
        }
        Value::Scalar(s) if matches!(s.style, Style::Literal | Style::Folded) => {
            s.style = Style::DoubleQuoted;
        }
        _ => {}
    }
}

/// The emitter's text for a node alone, without the stream's line breaks and `...`.
fn emitted_line(n: &Node) -> String {
    simple_scalar(n).unwrap_or_else(|| emitter_line(n))
}

/// `emitted_line` by the emitter.
fn emitter_line(n: &Node) -> String {
    let text = node_to_yaml(n);
    // Only a `...` line of its own ends the document: `b:...` is a scalar's text.
    let text = text.strip_suffix("\n...\n").unwrap_or(&text);
    text.trim_end_matches('\n').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shortcut past the emitter writes what the emitter writes, for every text
    /// of up to three characters over letters, digits and the punctuation the
    /// shortcut takes or stops at, and for the texts inject adds.
    #[test]
    fn simple_scalars_are_written_as_the_emitter_writes_them() {
        let alphabet = [
            "a", "Z", "y", "n", "e", "0", "9", "-", ".", "_", "/", ":", " ", "~", "#",
        ];
        let mut texts: Vec<String> = [
            "nvcf-worker-token",
            "/var/run/secrets/tokens/token",
            "NVCF_TOKEN_FILE_PATH",
            "nvcf-icms:bench",
            "0777",
            "1e3",
            "1.5",
            "---x",
            "...",
            "yes",
            "null",
        ]
        .map(String::from)
        .to_vec();
        for a in alphabet {
            texts.push(a.to_string());
            for b in alphabet {
                texts.push(format!("{a}{b}"));
                for c in alphabet {
                    texts.push(format!("{a}{b}{c}"));
                }
            }
        }
        let mut taken = 0;
        for text in &texts {
            for style in [
                Style::Plain,
                Style::SingleQuoted,
                Style::DoubleQuoted,
                Style::Literal,
            ] {
                let n = Node::scalar(text.as_str(), style);
                if let Some(fast) = simple_scalar(&n) {
                    assert_eq!(fast, emitter_line(&n), "{text:?} {style:?}");
                    taken += 1;
                }
            }
        }
        assert!(taken > 1000, "{taken}");
        let tagged = Node {
            props: Some(Box::new(crate::manifest::node::Props {
                anchor: None,
                tag: Some("!!str".into()),
            })),
            ..Node::scalar("a", Style::Plain)
        };
        assert_eq!(simple_scalar(&tagged), None);
    }
}
