//! Documents with aliases, merge keys or `!!binary` scalars ("refs": what makes a
//! document's meaning differ from its tree as written) edited in their expanded
//! form. Such a document is written anew, unless it is a list of items (`items`
//! under its root) whose refs each stay within one item: then only the items the
//! edit changed are written anew, expanded, and every other item keeps its bytes.
//! An item written anew is the emitter's document indented as a block list item,
//! so an item cut out of the list, read alone and written anew is the same bytes.

use super::emit::{markers_on_their_own_line, YamlWriter};
use super::node::{Node, Value};
use super::parse::{is_merge_key, is_tag, resolve_refs, Document};

/// Whether `n` has what the reader expands (`parse_stream` gives its document a
/// `resolved` view then): an alias, a merge key, a `!!binary` or `!!merge` scalar.
pub fn has_refs(n: &Node) -> bool {
    match &n.value {
        Value::Alias(_) => true,
        Value::Scalar(_) => n
            .tag()
            .is_some_and(|t| is_tag(t, "binary") || is_tag(t, "merge")),
        Value::Seq { items, .. } => items.iter().any(has_refs),
        Value::Map { entries, .. } => entries
            .iter()
            .any(|(k, v)| is_merge_key(k) || has_refs(k) || has_refs(v)),
    }
}

/// Whether `n` has an anchor anywhere (which its expanded form drops).
pub fn has_anchors(n: &Node) -> bool {
    n.anchor().is_some()
        || match &n.value {
            Value::Seq { items, .. } => items.iter().any(has_anchors),
            Value::Map { entries, .. } => entries
                .iter()
                .any(|(k, v)| has_anchors(k) || has_anchors(v)),
            _ => false,
        }
}

/// What splicing the list items of a document edited in its expanded form does
/// with them, by where each item starts in the source (`Span::start`), in order.
#[derive(Debug, Default)]
pub struct ItemRefs {
    /// Unchanged but expanded: written as they were read.
    pub kept: Vec<u32>,
    /// Changed, with refs of their own: written anew from the expanded tree.
    pub anew: Vec<u32>,
}

/// How to splice `new`, the tree `old` (as written, with refs) expanded and
/// edited, or `None` when it must be written anew as a whole: refs outside the
/// root's `items` or across its items (an item does not expand alone), or a
/// changed item that has anchors but no refs (splicing would write its anchored
/// nodes anew without their anchors, where the item read alone keeps them).
pub fn item_refs(old: &Node, new: &Node) -> Option<ItemRefs> {
    let (Some(old_entries), Some(new_items)) = (old.entries(), new.get("items")?.items()) else {
        return None;
    };
    // The rest of the document as written is its expanded form (anchors too:
    // expanding drops them).
    let mut old_items: Option<&[Node]> = None;
    for (k, v) in old_entries {
        match (k.as_str(), v.items()) {
            (Some("items"), Some(items)) if v.anchor().is_none() => old_items = Some(items),
            _ if is_merge_key(k) || has_refs(k) || has_refs(v) => return None,
            _ if has_anchors(k) || has_anchors(v) => return None,
            _ => {}
        }
    }
    let old_items = old_items?;
    let mut found = ItemRefs::default();
    let mut at = 0;
    for n in new_items.iter().filter(|n| n.line > 0) {
        // Items keep their order: each is looked for after the one found before.
        let Some(i) = old_items[at..]
            .iter()
            .position(|o| o.span.start == n.span.start)
        else {
            continue;
        };
        at += i + 1;
        let o = &old_items[at - 1];
        let refs = has_refs(o);
        if n == o || !(refs || has_anchors(o)) {
            continue;
        }
        if *n == resolve_refs(o).ok()? {
            found.kept.push(o.span.start);
        } else if refs {
            found.anew.push(o.span.start);
        } else {
            return None;
        }
    }
    // An item the edit removed or left unexpanded still must expand alone.
    // (Both lists are in source order: the splicer looks items up in them.)
    let found_at =
        |at: u32| found.kept.binary_search(&at).is_ok() || found.anew.binary_search(&at).is_ok();
    for o in old_items
        .iter()
        .filter(|o| has_refs(o) && !found_at(o.span.start))
    {
        resolve_refs(o).ok()?;
    }
    Some(found)
}

/// `n` written as the emitter writes a document (`---` on a line of its own), as
/// `splice` writes a document anew.
pub fn emitted(n: &Node, explicit_start: bool, explicit_end: bool) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut w = YamlWriter::new(&mut bytes);
    w.node_document(n, explicit_start, explicit_end);
    w.finish();
    markers_on_their_own_line(&mut bytes);
    bytes
}

/// `n` written anew as the item of a block list: the emitter's document, its
/// first line after a `-` at column `dash`, the others `content` columns right of
/// the dash, blank lines blank (as `load::Laid::write_item` puts an item read
/// alone back).
pub fn emitted_item(n: &Node, dash: usize, content: usize) -> String {
    let bytes = emitted(n, true, false);
    let body = bytes.strip_prefix(b"---\n").unwrap_or(&bytes);
    let body = String::from_utf8_lossy(body);
    let mut out = String::with_capacity(body.len() * 5 / 4);
    for (i, line) in body.split_inclusive('\n').enumerate() {
        if i == 0 {
            out.push_str(&" ".repeat(dash));
            out.push('-');
            out.push_str(&" ".repeat(content - 1));
        } else if line != "\n" {
            out.push_str(&" ".repeat(dash + content));
        }
        out.push_str(line);
    }
    out
}

/// A document cut out of a block list (`Document::indents`), edited in its
/// expanded form, written anew as the whole list's splice writes its item
/// (`ItemRefs::anew`): what precedes its body, its content anew, and the lines
/// after its content (comments before the next item) as they were. `None` when
/// it was not edited so.
pub fn rewrite_item(doc: &Document, old: &Node, text: &[u8], from: usize) -> Option<Vec<u8>> {
    if doc.indents.is_none() || !old.is_map() || old.is_flow() || !has_refs(old) {
        return None;
    }
    let end = doc.region.1;
    let tail = line_after(text, old.span.end as usize).min(end);
    let mut out = text[from..doc.body].to_vec();
    let anew = emitted(&doc.root, doc.explicit_start, false);
    match doc.crlf {
        true => out.extend_from_slice(
            String::from_utf8_lossy(&anew)
                .replace('\n', "\r\n")
                .as_bytes(),
        ),
        false => out.extend_from_slice(&anew),
    }
    out.extend_from_slice(&text[tail..end]);
    Some(out)
}

/// Where the line after the one `pos` is on starts (`pos` itself when only
/// blanks precede it on a line: a block collection's end lies there).
pub fn line_after(text: &[u8], pos: usize) -> usize {
    let mut p = pos;
    while p > 0 && matches!(text[p - 1], b' ' | b'\t') {
        p -= 1;
    }
    if p > 0 && text[p - 1] == b'\n' {
        return p;
    }
    text[pos..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(text.len(), |i| pos + i + 1)
}
