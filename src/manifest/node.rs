//! An untyped YAML tree that remembers how each scalar was written.
//!
//! Kubernetes decodes YAML with YAML 1.1 rules while Rust YAML crates follow 1.2, so
//! this tree never interprets a scalar on the way through: it keeps the scalar's exact
//! text and style, and the emitter writes them back as they came.

use compact_str::CompactString;

// Scalars are a leaf of the tree: what they are and what they mean live in
// `scalar`, which knows nothing of nodes.
pub use super::scalar::{Scalar, Style};

/// Anchor and explicit tag: rare, so kept out of line to keep nodes small.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Props {
    pub anchor: Option<String>,
    pub tag: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Scalar(Scalar),
    Seq {
        items: Vec<Node>,
        flow: bool,
    },
    Map {
        entries: Vec<(Node, Node)>,
        flow: bool,
    },
    /// A reference to an anchored node; only present in trees as parsed.
    Alias(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub value: Value,
    /// 1-based line where the node starts in its source; 0 for nodes this tool made.
    pub line: u32,
    pub props: Option<Box<Props>>,
    /// Where the node's text lies in its source, so an edit can splice the source
    /// instead of writing the document anew (meaningful only when `line > 0`).
    pub span: Span,
}

/// Byte offsets `[start, end)` of a node's text in its source. A block collection
/// ends where its last child ends (libyaml's end marks lie past trailing comments).
#[derive(Clone, Copy, Debug, Default, Eq)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

/// Where a node was written is not what it is: equal trees from different files
/// (or a node and its edited copy) compare equal.
impl PartialEq for Span {
    fn eq(&self, _: &Span) -> bool {
        true
    }
}

/// A key to add to a mapping: double-quoted like its siblings when every key is
/// (a JSON object stays JSON), else as `Node::string` writes it.
fn new_key(entries: &[(Node, Node)], key: &str) -> Node {
    let quoted = |k: &Node| matches!(&k.value, Value::Scalar(s) if s.style == Style::DoubleQuoted);
    if !entries.is_empty() && entries.iter().all(|(k, _)| quoted(k)) {
        Node::scalar(key, Style::DoubleQuoted)
    } else {
        Node::string(key)
    }
}

impl Node {
    pub fn new(value: Value) -> Node {
        Node {
            value,
            line: 0,
            props: None,
            span: Span::default(),
        }
    }

    pub fn scalar(text: impl Into<String>, style: Style) -> Node {
        Node::new(Value::Scalar(Scalar {
            text: CompactString::from(text.into()),
            style,
        }))
    }

    /// A string this tool writes: plain when every YAML reader agrees it is a
    /// string, double-quoted otherwise (see `scalar::needs_quotes`).
    pub fn string(text: impl Into<String>) -> Node {
        let text = text.into();
        let style = if super::scalar::needs_quotes(&text) {
            Style::DoubleQuoted
        } else {
            Style::Plain
        };
        Node::scalar(text, style)
    }

    pub fn map(entries: Vec<(Node, Node)>) -> Node {
        Node::new(Value::Map {
            entries,
            flow: false,
        })
    }

    pub fn seq(items: Vec<Node>) -> Node {
        Node::new(Value::Seq { items, flow: false })
    }

    /// Whether the node was read from a source (not made or replaced by this tool).
    pub fn is_sourced(&self) -> bool {
        self.line > 0
    }

    pub fn tag(&self) -> Option<&str> {
        self.props.as_ref().and_then(|p| p.tag.as_deref())
    }

    pub fn anchor(&self) -> Option<&str> {
        self.props.as_ref().and_then(|p| p.anchor.as_deref())
    }

    pub fn as_scalar(&self) -> Option<&Scalar> {
        match &self.value {
            Value::Scalar(s) => Some(s),
            _ => None,
        }
    }

    /// The text of a scalar that Kubernetes reads as a string (any quoted scalar, or a
    /// plain one that YAML 1.1 resolves to a string or a timestamp). `name: true` is not
    /// a string.
    pub fn as_str(&self) -> Option<&str> {
        let s = self.as_scalar()?;
        // sigs.k8s.io/yaml hands a timestamp on as its text.
        match super::scalar::resolve(s, self.tag()) {
            super::scalar::Resolved::Str | super::scalar::Resolved::Timestamp => Some(&s.text),
            _ => None,
        }
    }

    /// The scalar text whatever it resolves to; for messages and loose comparisons.
    pub fn text(&self) -> Option<&str> {
        self.as_scalar().map(|s| s.text.as_str())
    }

    pub fn is_null(&self) -> bool {
        matches!(
            self.as_scalar()
                .map(|s| super::scalar::resolve(s, self.tag())),
            Some(super::scalar::Resolved::Null)
        )
    }

    pub fn entries(&self) -> Option<&[(Node, Node)]> {
        match &self.value {
            Value::Map { entries, .. } => Some(entries),
            _ => None,
        }
    }

    pub fn entries_mut(&mut self) -> Option<&mut Vec<(Node, Node)>> {
        match &mut self.value {
            Value::Map { entries, .. } => Some(entries),
            _ => None,
        }
    }

    pub fn items(&self) -> Option<&[Node]> {
        match &self.value {
            Value::Seq { items, .. } => Some(items),
            _ => None,
        }
    }

    pub fn items_mut(&mut self) -> Option<&mut Vec<Node>> {
        match &mut self.value {
            Value::Seq { items, .. } => Some(items),
            _ => None,
        }
    }

    pub fn is_map(&self) -> bool {
        matches!(self.value, Value::Map { .. })
    }

    pub fn is_flow(&self) -> bool {
        matches!(
            self.value,
            Value::Map { flow: true, .. } | Value::Seq { flow: true, .. }
        )
    }

    /// The value under `key` in a mapping. Keys compare by text, as Kubernetes turns
    /// every key into a JSON string.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entries()?
            .iter()
            .find(|(k, _)| k.text() == Some(key))
            .map(|(_, v)| v)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        self.entries_mut()?
            .iter_mut()
            .find(|(k, _)| k.text() == Some(key))
            .map(|(_, v)| v)
    }

    /// The entry for `key` with its key node (for line numbers).
    pub fn entry(&self, key: &str) -> Option<&(Node, Node)> {
        self.entries()?.iter().find(|(k, _)| k.text() == Some(key))
    }

    pub fn path(&self, keys: &[&str]) -> Option<&Node> {
        keys.iter().try_fold(self, |n, k| n.get(k))
    }

    pub fn path_mut(&mut self, keys: &[&str]) -> Option<&mut Node> {
        let mut node = self;
        for k in keys {
            node = node.get_mut(k)?;
        }
        Some(node)
    }

    /// A string field, or None when absent, null or not a string.
    pub fn str_at(&self, keys: &[&str]) -> Option<&str> {
        self.path(keys).and_then(Node::as_str)
    }

    /// Sets `key` in a mapping: replaces the value in place (keeping the key's
    /// position) or appends a new entry. Returns false on a non-mapping.
    pub fn set(&mut self, key: &str, value: Node) -> bool {
        let Some(entries) = self.entries_mut() else {
            return false;
        };
        match entries.iter_mut().find(|(k, _)| k.text() == Some(key)) {
            Some((_, v)) => *v = value,
            None => {
                let k = new_key(entries, key);
                entries.push((k, value))
            }
        }
        true
    }

    /// Removes `key` from a mapping, returning its value (None when absent or not a
    /// mapping). Removal, like `set`, is an edit the emitter renders.
    pub fn remove(&mut self, key: &str) -> Option<Node> {
        let entries = self.entries_mut()?;
        let i = entries.iter().position(|(k, _)| k.text() == Some(key))?;
        Some(entries.remove(i).1)
    }

    /// The value under `key`, created with `make` when absent or null.
    pub fn get_or_insert(&mut self, key: &str, make: impl FnOnce() -> Node) -> &mut Node {
        let entries = self.entries_mut().expect("get_or_insert on a mapping");
        let pos = match entries.iter().position(|(k, _)| k.text() == Some(key)) {
            Some(i) => {
                if entries[i].1.is_null() {
                    entries[i].1 = make();
                }
                i
            }
            None => {
                let k = new_key(entries, key);
                entries.push((k, make()));
                entries.len() - 1
            }
        };
        &mut entries[pos].1
    }

    /// Renders every scalar string this tool wrote in double quotes and every
    /// collection in flow style, so a generated node sits well inside a JSON document.
    pub fn into_json_style(mut self) -> Node {
        self.set_json_style();
        self
    }

    fn set_json_style(&mut self) {
        match &mut self.value {
            Value::Scalar(s) => {
                if s.style == Style::Plain
                    && matches!(
                        super::scalar::resolve_plain(&s.text),
                        super::scalar::Resolved::Str
                    )
                {
                    s.style = Style::DoubleQuoted;
                }
            }
            Value::Seq { items, flow } => {
                *flow = true;
                items.iter_mut().for_each(Node::set_json_style);
            }
            Value::Map { entries, flow } => {
                *flow = true;
                for (k, v) in entries {
                    if let Value::Scalar(s) = &mut k.value {
                        s.style = Style::DoubleQuoted;
                    }
                    v.set_json_style();
                }
            }
            Value::Alias(_) => {}
        }
    }
}

#[cfg(test)]
mod size_tests {
    #[test]
    fn node_stays_small() {
        // A large stream is mostly nodes: eight machine words today (value, line,
        // props, and the span that lets edits splice the source instead of writing
        // it anew); growing them grows every tree, so that takes a deliberate change here.
        assert!(
            std::mem::size_of::<super::Node>() <= 64,
            "{}",
            std::mem::size_of::<super::Node>()
        );
    }
}
