//! YAML bytes to documents of `Node`s, decoding the way kubectl does.
//!
//! libyaml-safer (a safe port of libyaml) gives events with each scalar's text and
//! style; this module builds the tree from them without recursion, so hostile nesting
//! cannot overflow the stack, and enforces kubectl's strict decoding: duplicate keys
//! are errors, merge keys (`<<`, also tagged `!!merge`), aliases and `!!binary`
//! scalars are expanded (within a budget that stops "billion laughs") before any
//! decision is made. The expanded view follows go-yaml v2 inside sigs.k8s.io/yaml,
//! checked against kubectl's own decoder by `tests/differential.rs`.

use std::collections::HashMap;

use libyaml_safer::{EventData, MappingStyle, Parser, ScalarStyle, SequenceStyle};

use super::node::{Node, Props, Scalar, Span, Style, Value};

/// Deeper than any real manifest; keeps every recursive walk over a tree shallow.
pub const MAX_DEPTH: usize = 200;
/// Nodes that alias expansion may create beyond the document's own, per document.
pub const ALIAS_BUDGET: usize = 1_000_000;
/// Bytes the parser decodes at a time.
const READ_WINDOW: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum YamlError {
    #[error("invalid YAML: {problem} (line {line}, column {column})")]
    Syntax {
        problem: String,
        line: u32,
        column: u32,
    },
    #[error("duplicate key {key:?} (line {line}; first at line {first_line}); kubectl's strict decoding rejects it")]
    DuplicateKey {
        key: String,
        line: u32,
        first_line: u32,
    },
    #[error("nesting deeper than {MAX_DEPTH} levels (line {line})")]
    TooDeep { line: u32 },
    #[error("aliases expand to more than {ALIAS_BUDGET} nodes (line {line}): refusing a possible alias bomb")]
    AliasBomb { line: u32 },
    #[error("alias *{name} refers to no anchor defined before it (line {line})")]
    UnknownAnchor { name: String, line: u32 },
    #[error(
        "a mapping or list used as a mapping key (line {line}); kubectl accepts only scalar keys"
    )]
    ComplexKey { line: u32 },
    #[error("a null mapping key (`~`, `null` or empty) (line {line}); kubectl cannot turn it into a JSON string and refuses the document")]
    NullKey { line: u32 },
    #[error("merge key `<<` must merge a mapping or a list of mappings (line {line})")]
    BadMerge { line: u32 },
    #[error("key {key:?} (line {line}) is set before a merge key `<<` that sets it too; YAML decoders disagree on which wins, so it is refused")]
    AmbiguousMerge { key: String, line: u32 },
    #[error("{text:?} (line {line}) {why}")]
    Number {
        text: String,
        why: &'static str,
        line: u32,
    },
    #[error("!!binary scalar (line {line}) {problem}")]
    BadBinary { problem: &'static str, line: u32 },
}

impl YamlError {
    pub fn line(&self) -> u32 {
        match self {
            YamlError::Syntax { line, .. }
            | YamlError::DuplicateKey { line, .. }
            | YamlError::TooDeep { line }
            | YamlError::AliasBomb { line }
            | YamlError::UnknownAnchor { line, .. }
            | YamlError::BadMerge { line }
            | YamlError::ComplexKey { line }
            | YamlError::NullKey { line }
            | YamlError::AmbiguousMerge { line, .. }
            | YamlError::BadBinary { line, .. }
            | YamlError::Number { line, .. } => *line,
        }
    }
}

/// How a document was edited since it was read, which decides how it is written.
#[derive(Clone, Debug, Default)]
pub enum Edited {
    /// Untouched: written as its source bytes.
    #[default]
    No,
    /// Edited: the tree as read (as written, with its aliases) is kept to splice
    /// the differences into the source bytes, or, edited in its expanded form,
    /// to tell which list items changed (`refs::item_refs`).
    Spliced(Box<Node>),
    /// Made by this tool, or edited in its expanded form with no source: written anew.
    Rewritten,
    /// Edited and already written (`batch::freeze`); only its skeleton is left.
    Frozen(Frozen),
}

/// An edited document written ahead of the rest of its stream.
#[derive(Clone, Debug)]
pub enum Frozen {
    /// Spliced: the edits to its source text, applied when it is written (the
    /// text is held anyway), so it costs what was added, not a copy of itself.
    Edits(Vec<Edit>),
    /// Its bytes from its region's start (a new document's with its `---`).
    Bytes(Vec<u8>),
}

/// `(start, stop, with)`: the source's `text[start..stop]` replaced by `with`.
pub type Edit = (usize, usize, Box<[u8]>);

/// One YAML document of a stream.
#[derive(Clone, Debug)]
pub struct Document {
    /// The tree as written, with anchors and aliases: what is emitted when untouched.
    pub root: Node,
    /// The tree as kubectl reads it (aliases and merge keys expanded), when it differs.
    pub resolved: Option<Node>,
    pub explicit_start: bool,
    pub explicit_end: bool,
    /// 0-based position of the document in its stream, counting empty ones.
    pub index: usize,
    /// 1-based line of the document's start.
    pub line: u32,
    /// The stream's bytes, shared by its documents; none for documents this tool made.
    pub text: Option<std::sync::Arc<Vec<u8>>>,
    /// The document's bytes in `text`: `region` from the end of the previous document
    /// (the stream's start for the first) to the start of the next, `body` where its
    /// content or `---` starts (comments before it stay before inserted documents).
    pub region: (usize, usize),
    pub body: usize,
    pub edited: Edited,
    /// Whether its stream breaks lines with CRLF (judged once on the stream's first
    /// 64 KiB, by `attach_text`): lines spliced in are written the same way.
    pub crlf: bool,
    /// Its tree was dropped after reading, leaving each object's skeleton
    /// (`batch::skeleton`): nothing in it needs more, and it is written as read.
    pub evicted: bool,
    /// Dropped though a run edits it: read again from its bytes when its turn
    /// comes (`reread`), so a large stream's edited trees are not all held at once.
    pub reread: bool,
    /// `%YAML` or `%TAG` directives precede it: its bytes alone would not mean the
    /// same, so it is never read again on its own.
    pub directives: bool,
    /// How collections added to it are indented, when it was cut out of a larger
    /// document whose neighbours they must look like (an item of a ResourceList
    /// read alone); else as the document itself indents them.
    pub indents: Option<super::splice::Indents>,
    /// What a run decided of its object as soon as it read it (`batch::Need::Now`),
    /// when that depended on the object alone: it was edited then and is not read
    /// again.
    pub decided: Option<super::batch::Kept>,
}

impl Document {
    pub fn new(root: Node) -> Document {
        Document {
            root,
            resolved: None,
            explicit_start: true,
            explicit_end: false,
            index: 0,
            line: 0,
            text: None,
            region: (0, 0),
            body: 0,
            edited: Edited::No,
            crlf: false,
            evicted: false,
            reread: false,
            directives: false,
            indents: None,
            decided: None,
        }
    }

    /// The tree every decision reads: what kubectl would see.
    pub fn view(&self) -> &Node {
        self.resolved.as_ref().unwrap_or(&self.root)
    }

    /// The tree to edit. A document with aliases is edited in its expanded form, so
    /// changing one object never changes another that shared an anchored node; the
    /// tree as written is kept to write back what the edit left alone
    /// (`refs::item_refs`).
    pub fn edit(&mut self) -> &mut Node {
        if let Some(resolved) = self.resolved.take() {
            let written = std::mem::replace(&mut self.root, resolved);
            self.edited = match (&self.text, std::mem::take(&mut self.edited)) {
                (Some(_), Edited::No) => Edited::Spliced(Box::new(written)),
                (Some(_), spliced @ Edited::Spliced(_)) => spliced,
                _ => Edited::Rewritten,
            };
        }
        self.edit_as_written()
    }

    /// The tree as written, to edit where no alias or merge key is involved (adding
    /// a key the document does not have).
    pub fn edit_as_written(&mut self) -> &mut Node {
        // Editing a skeleton would write it over the document's text.
        assert!(!self.evicted, "an evicted document is never edited");
        if matches!(self.edited, Edited::No) {
            self.edited = if self.text.is_some() {
                Edited::Spliced(Box::new(self.root.clone()))
            } else {
                Edited::Rewritten
            };
        }
        &mut self.root
    }

    /// True for `---` with nothing after it, or a document of only comments.
    pub fn is_empty(&self) -> bool {
        self.view().is_null()
    }
}

/// A parse failure with the document it happened in.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub index: usize,
    pub error: YamlError,
}

fn line_of(mark: libyaml_safer::Mark) -> u32 {
    (mark.line + 1) as u32
}

fn syntax_error(err: &libyaml_safer::Error, input: &[u8]) -> YamlError {
    let (line, column) = match err.problem_mark() {
        Some(m) => (line_of(m), (m.column + 1) as u32),
        None => {
            // Reader errors (bad UTF-8) carry no mark; find the first bad byte.
            let offset = std::str::from_utf8(input)
                .err()
                .map_or(input.len(), |e| e.valid_up_to());
            let before = &input[..offset];
            let line = before.iter().filter(|&&b| b == b'\n').count() as u32 + 1;
            let column = (offset
                - before
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |p| p + 1)) as u32
                + 1;
            (line, column)
        }
    };
    let problem = match err.context() {
        Some(ctx) => format!("{}, {}", err.problem(), ctx),
        None => err.problem().to_string(),
    };
    YamlError::Syntax {
        problem,
        line,
        column,
    }
}

fn style_of(s: ScalarStyle) -> Style {
    match s {
        ScalarStyle::SingleQuoted => Style::SingleQuoted,
        ScalarStyle::DoubleQuoted => Style::DoubleQuoted,
        ScalarStyle::Literal => Style::Literal,
        ScalarStyle::Folded => Style::Folded,
        _ => Style::Plain,
    }
}

fn props(anchor: Option<String>, tag: Option<String>) -> Option<Box<Props>> {
    if anchor.is_none() && tag.is_none() {
        None
    } else {
        Some(Box::new(Props { anchor, tag }))
    }
}

struct Frame {
    node: Node,
    key: Option<Node>,
    /// Where this collection's children start on the shared scratch stack.
    start: usize,
}

/// Parses a whole stream. Empty documents are kept (callers skip them) so that
/// document indexes match what a reader of the file counts.
pub fn parse_stream(input: &[u8]) -> Result<Vec<Document>, ParseError> {
    // libyaml-safer 0.3 panics on a block scalar that ends the input without a line
    // break; parse with one added. kubectl reads such a scalar with its final line
    // break too (its stream reader ends every line with one), so the scalar keeps it.
    let padded: Vec<u8>;
    let mut slice = if input.is_empty() || input.ends_with(b"\n") || input.ends_with(b"\r") {
        input
    } else {
        padded = [input, b"\n"].concat();
        &padded[..]
    };
    let parsed_len = slice.len();
    let was_padded = parsed_len != input.len();
    let mut parser = Parser::new();
    // Fed the whole slice at once, libyaml-safer decodes all of it into a buffer of
    // chars (4 bytes each) before scanning; a small window keeps that buffer small.
    parser.set_input(std::io::BufReader::with_capacity(READ_WINDOW, &mut slice));
    let mut docs = Vec::new();
    let mut scratch_items: Vec<Node> = Vec::new();
    let mut scratch_entries: Vec<(Node, Node)> = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut root: Option<Node> = None;
    let mut doc_start = (false, 0u32, 0usize, false);
    let mut has_refs = false;
    let mut last_line = 1;
    // libyaml-safer's marks count bytes after a UTF-8 byte order mark.
    let bom = if input.starts_with(b"\xEF\xBB\xBF") {
        3
    } else {
        0
    };
    let at = |m: libyaml_safer::Mark| (m.index as usize + bom).min(input.len()) as u32;
    loop {
        let index = docs.len();
        let Some(event) = parse_event(&mut parser) else {
            return Err(ParseError {
                index,
                error: YamlError::Syntax {
                    problem: "unsupported YAML syntax (a tag directly followed by `,`?)".into(),
                    line: last_line,
                    column: 1,
                },
            });
        };
        let event = event.map_err(|e| {
            let mut error = syntax_error(&e, input);
            // An error at the added line break is at the end of the real input.
            if let (true, Some(m), YamlError::Syntax { line, column, .. }) =
                (was_padded, e.problem_mark(), &mut error)
            {
                if m.index as usize >= input.len() {
                    let last = input.rsplit(|&b| b == b'\n').next().unwrap_or(input);
                    *line = input.iter().filter(|&&b| b == b'\n').count() as u32 + 1;
                    *column = String::from_utf8_lossy(last).chars().count() as u32 + 1;
                }
            }
            ParseError { index, error }
        })?;
        let line = line_of(event.start_mark);
        last_line = line_of(event.end_mark);
        let span = Span {
            start: at(event.start_mark),
            end: at(event.end_mark),
        };
        let fail = |error| ParseError { index, error };
        let complete = match event.data {
            EventData::StreamStart { .. } => continue,
            EventData::StreamEnd => break,
            EventData::DocumentStart {
                implicit,
                version_directive,
                tag_directives,
            } => {
                let directives = version_directive.is_some() || !tag_directives.is_empty();
                doc_start = (!implicit, line, span.start as usize, directives);
                has_refs = false;
                continue;
            }
            EventData::DocumentEnd { implicit } => {
                let root = root
                    .take()
                    .unwrap_or_else(|| Node::scalar("", Style::Plain));
                let resolved = if has_refs {
                    Some(resolve_refs(&root).map_err(fail)?)
                } else {
                    None
                };
                docs.push(Document {
                    root,
                    resolved,
                    explicit_start: doc_start.0,
                    explicit_end: !implicit,
                    index,
                    line: doc_start.1,
                    text: None,
                    region: (doc_start.2, doc_start.2),
                    body: doc_start.2,
                    edited: Edited::No,
                    crlf: false,
                    evicted: false,
                    reread: false,
                    directives: doc_start.3,
                    indents: None,
                    decided: None,
                });
                continue;
            }
            EventData::Alias { anchor } => {
                has_refs = true;
                Node {
                    value: Value::Alias(anchor),
                    line,
                    props: None,
                    span,
                }
            }
            EventData::Scalar {
                anchor,
                tag,
                value,
                style,
                ..
            } => {
                if let Some(why) = scalar_problem(&value, style, tag.as_deref()) {
                    return Err(fail(YamlError::Number {
                        text: value,
                        why,
                        line,
                    }));
                }
                // A `!!binary` scalar or a tagged merge key means something other
                // than its text: the document needs its expanded view.
                has_refs |= tag
                    .as_deref()
                    .is_some_and(|t| is_tag(t, "binary") || is_tag(t, "merge"));
                Node {
                    value: Value::Scalar(Scalar {
                        text: value.into(),
                        style: style_of(style),
                    }),
                    line,
                    props: props(anchor, tag),
                    span,
                }
            }
            EventData::SequenceStart {
                anchor, tag, style, ..
            } => {
                if stack.len() >= MAX_DEPTH {
                    return Err(fail(YamlError::TooDeep { line }));
                }
                let flow = style == SequenceStyle::Flow;
                let node = Node {
                    value: Value::Seq {
                        items: Vec::new(),
                        flow,
                    },
                    line,
                    props: props(anchor, tag),
                    span,
                };
                let start = scratch_items.len();
                stack.push(Frame {
                    node,
                    key: None,
                    start,
                });
                continue;
            }
            EventData::MappingStart {
                anchor, tag, style, ..
            } => {
                if stack.len() >= MAX_DEPTH {
                    return Err(fail(YamlError::TooDeep { line }));
                }
                let flow = style == MappingStyle::Flow;
                let node = Node {
                    value: Value::Map {
                        entries: Vec::new(),
                        flow,
                    },
                    line,
                    props: props(anchor, tag),
                    span,
                };
                let start = scratch_entries.len();
                stack.push(Frame {
                    node,
                    key: None,
                    start,
                });
                continue;
            }
            // Children gather on shared scratch stacks and move into one allocation
            // of exact size when their collection ends: no growth by doubling (a
            // third of a large tree unused) and no reallocation per child.
            EventData::SequenceEnd => {
                let Frame {
                    mut node, start, ..
                } = stack.pop().expect("balanced events");
                *node.items_mut().expect("a sequence") = scratch_items.drain(start..).collect();
                node.span.end = match node.items().and_then(<[Node]>::last) {
                    _ if node.is_flow() => span.end,
                    Some(last) => last.span.end,
                    None => node.span.start,
                };
                node
            }
            EventData::MappingEnd => {
                let Frame {
                    mut node, start, ..
                } = stack.pop().expect("balanced events");
                *node.entries_mut().expect("a mapping") = scratch_entries.drain(start..).collect();
                node.span.end = match node.entries().and_then(<[(Node, Node)]>::last) {
                    _ if node.is_flow() => span.end,
                    Some((_, last)) => last.span.end,
                    None => node.span.start,
                };
                if let Some(entries) = node.entries() {
                    check_duplicate_keys(entries).map_err(fail)?;
                    has_refs |= entries.iter().any(|(k, _)| is_merge_key(k));
                }
                node
            }
        };
        match stack.last_mut() {
            // kubectl turns every key into a JSON string: a mapping or list as a key
            // (`a: {{template}}`) does not decode.
            Some(Frame {
                node, key: None, ..
            }) if node.is_map()
                && !matches!(complete.value, Value::Scalar(_) | Value::Alias(_)) =>
            {
                return Err(fail(YamlError::ComplexKey {
                    line: complete.line,
                }));
            }
            None => root = Some(complete),
            Some(frame) => match &mut frame.node.value {
                Value::Seq { .. } => scratch_items.push(complete),
                Value::Map { .. } => match frame.key.take() {
                    None if complete.is_null() => {
                        return Err(fail(YamlError::NullKey {
                            line: complete.line,
                        }))
                    }
                    None => frame.key = Some(complete),
                    Some(key) => {
                        let mut value = complete;
                        // An empty value (`key:`) is marked at the next token, maybe
                        // lines below: it lies where its key ends. One with a tag or
                        // an anchor (`key: !t`, maybe on the next line) is that text.
                        if value.props.is_none()
                            && matches!(&value.value, Value::Scalar(s) if s.text.is_empty() && s.style == Style::Plain)
                        {
                            value.span = Span {
                                start: key.span.end,
                                end: key.span.end,
                            };
                        }
                        scratch_entries.push((key, value))
                    }
                },
                _ => unreachable!("only collections are stacked"),
            },
        }
    }
    frame_documents(&mut docs, input.len());
    Ok(docs)
}

/// Where the items of one block list sit in a stream of one block-mapping
/// document, found by one pass over the parser's events (no tree is built):
/// `outline_list`.
#[derive(Debug, PartialEq)]
pub struct ListOutline {
    /// Byte offset where each item's content starts (its first key), in order.
    pub items: Vec<usize>,
    /// Byte offset of the top-level key after the list, if any.
    pub after: Option<usize>,
}

/// The outline of the block list under the top-level key `key`, or `None` when
/// the stream does not parse (its reader says why), is not one block mapping, has
/// directives, document markers, an anchor outside an item's content or an alias
/// to one outside its own item (across items), the list is not block style, or
/// an item is no mapping or carries a tag: its items cannot be read alone then.
/// Anchors, aliases, merge keys and tags within one item mean the same in it
/// read alone (a document's anchors are its own), so they do not stop it.
/// Memory holds one event at a time and an offset per item, whatever the input's
/// size. (libyaml-safer's marks count bytes, as `parse_stream` relies on; a byte
/// order mark is the caller's to refuse.)
pub fn outline_list(input: &[u8], key: &str) -> Option<ListOutline> {
    let mut slice = input;
    let mut parser = Parser::new();
    parser.set_input(std::io::BufReader::with_capacity(READ_WINDOW, &mut slice));
    let mut depth = 0usize;
    let mut docs = 0;
    // At depth 1 a key and a value alternate: whether the next node is a key.
    let mut at_key = true;
    let mut in_list = false;
    let mut after_list = false;
    let mut found = false;
    // The anchors of the item being read: an alias may name only them.
    let mut anchors: Vec<String> = Vec::new();
    let mut outline = ListOutline {
        items: Vec::new(),
        after: None,
    };
    loop {
        let event = parse_event(&mut parser)?.ok()?;
        let start = event.start_mark.index as usize;
        // Whether it opens a collection, and whether that is a block one untagged.
        let (opens, anchor, block) = match &event.data {
            EventData::StreamStart { .. } => continue,
            EventData::StreamEnd => break,
            EventData::DocumentStart {
                implicit,
                version_directive,
                tag_directives,
            } => {
                docs += 1;
                if !implicit || version_directive.is_some() || !tag_directives.is_empty() {
                    return None;
                }
                continue;
            }
            EventData::DocumentEnd { implicit: true } => continue,
            EventData::DocumentEnd { .. } => return None,
            EventData::Alias { anchor } if in_list && depth >= 3 && anchors.contains(anchor) => {
                continue
            }
            EventData::Alias { .. } => return None,
            EventData::Scalar { anchor, .. } => (false, anchor, false),
            EventData::SequenceStart {
                anchor, tag, style, ..
            } => (
                true,
                anchor,
                tag.is_none() && *style == SequenceStyle::Block,
            ),
            EventData::MappingStart {
                anchor, tag, style, ..
            } => (true, anchor, tag.is_none() && *style == MappingStyle::Block),
            EventData::SequenceEnd | EventData::MappingEnd => {
                depth -= 1;
                if depth == 1 {
                    // A value at depth 1 ends: the list's, if it was in it.
                    after_list |= in_list;
                    in_list = false;
                    at_key = true;
                }
                continue;
            }
        };
        let is_map = matches!(event.data, EventData::MappingStart { .. });
        let is_seq = matches!(event.data, EventData::SequenceStart { .. });
        // (Depth 0: the root; 1: its keys and values; 2: the list's items.)
        if depth == 0 && !(is_map && block) {
            return None;
        }
        // (An anchor on an item itself would be named from another item, if at all.)
        if anchor.is_some() && !(in_list && depth >= 3) {
            return None;
        }
        anchors.extend(anchor.clone());
        match depth {
            1 if at_key => {
                let EventData::Scalar { value, .. } = &event.data else {
                    return None;
                };
                if after_list && outline.after.is_none() {
                    outline.after = Some(start);
                }
                if value == key {
                    if found {
                        return None;
                    }
                    found = true;
                    in_list = true;
                }
                at_key = false;
            }
            1 => {
                if in_list && !(is_seq && block) {
                    return None;
                }
                at_key = !opens;
            }
            2 if in_list => {
                // (A flow mapping untagged reads alone too: kpt writes a JSON
                // file's objects so.)
                let untagged = matches!(&event.data, EventData::MappingStart { tag: None, .. });
                if !(is_map && untagged) {
                    return None;
                }
                outline.items.push(start);
                anchors.clear();
            }
            _ => {}
        }
        if opens {
            depth += 1;
            // (Deeper is refused by the tree's reader; stop reading here as it does.)
            if depth >= MAX_DEPTH {
                return None;
            }
        }
    }
    (docs == 1 && found).then_some(outline)
}

/// Gives each document its region of the stream: from the end of the one before (the
/// stream's start for the first) to the start of the next (the stream's end for the
/// last), so that the regions of all documents are the whole stream.
pub fn frame_documents(docs: &mut [Document], len: usize) {
    let starts: Vec<usize> = docs.iter().map(|d| d.body).collect();
    for (i, d) in docs.iter_mut().enumerate() {
        let start = if i == 0 { 0 } else { starts[i] };
        d.region = (start, starts.get(i + 1).copied().unwrap_or(len));
    }
}

/// Shares the stream's bytes with its documents, so they can be written as read.
pub fn attach_text(docs: &mut [Document], text: std::sync::Arc<Vec<u8>>) {
    let crlf = breaks_crlf(&text);
    for d in docs {
        d.text = Some(text.clone());
        d.crlf = crlf;
    }
}

/// Whether a stream breaks lines with CRLF, judged once on its first 64 KiB: lines
/// spliced in are then written the same way.
pub fn breaks_crlf(text: &[u8]) -> bool {
    text.get(..text.len().min(64 * 1024 + 1))
        .is_some_and(|head| head.windows(2).any(|w| w == b"\r\n"))
}

/// Moves the nodes of a piece of a stream, parsed on its own, to their lines and
/// byte offsets in the whole stream.
pub(super) fn shift_lines(n: &mut Node, by: u32, bytes: u32) {
    if n.line > 0 {
        n.line += by;
        n.span.start += bytes;
        n.span.end += bytes;
    }
    match &mut n.value {
        Value::Seq { items, .. } => items.iter_mut().for_each(|i| shift_lines(i, by, bytes)),
        Value::Map { entries, .. } => entries.iter_mut().for_each(|(k, v)| {
            shift_lines(k, by, bytes);
            shift_lines(v, by, bytes);
        }),
        Value::Scalar(_) | Value::Alias(_) => {}
    }
}

/// Whether a line break other than `\n` (or the `\r` of `\r\n`) starts at byte `i`
/// of `text`: a lone `\r`, NEL, LS or PS, which YAML 1.1 readers (libyaml, kubectl's
/// go-yaml) take as line breaks too.
pub(super) fn other_break_at(text: &[u8], i: usize) -> bool {
    match text[i] {
        b'\r' => text.get(i + 1) != Some(&b'\n'),
        0xC2 => text.get(i + 1) == Some(&0x85),
        0xE2 => text.get(i + 1) == Some(&0x80) && matches!(text.get(i + 2), Some(0xA8 | 0xA9)),
        _ => false,
    }
}

/// The line breaks in `text` as YAML 1.1 readers count lines: `\r\n` once, and
/// each `\n` and each of [`other_break_at`].
pub(super) fn line_breaks(text: &[u8]) -> u32 {
    (0..text.len())
        .filter(|&i| text[i] == b'\n' || other_break_at(text, i))
        .count() as u32
}

/// A document whose tree was dropped (`Document::reread`), parsed again from its
/// region of the stream: the tree it had when the stream was read. A region parses
/// alone as it did in the stream (the chunks of `parallel` rely on the same), unless
/// directives precede the document, and such a document is never dropped to be read
/// again. Its skeleton's root says where the object lies, which shifts the new tree
/// to the stream's lines without counting them.
pub fn reread(doc: &Document) -> Document {
    assert!(
        doc.reread && !doc.directives,
        "only a dropped document is read again"
    );
    let text = doc.text.as_ref().expect("a source document");
    let (from, end) = doc.region;
    let mark = &doc.root;
    let lines_before = mark.line - 1 - line_breaks(&text[from..mark.span.start as usize]);
    let mut docs = parse_stream(&text[from..end]).expect("a document read once reads again");
    assert_eq!(docs.len(), 1, "a document's region holds one document");
    let mut fresh = docs.pop().expect("one document");
    shift_lines(&mut fresh.root, lines_before, from as u32);
    if let Some(r) = &mut fresh.resolved {
        shift_lines(r, lines_before, from as u32);
    }
    let root = fresh.view();
    assert!(
        fresh.line + lines_before == doc.line
            && (root.line, root.span.start, root.span.end)
                == (mark.line, mark.span.start, mark.span.end),
        "a document read again lies where it was read"
    );
    Document {
        index: doc.index,
        line: doc.line,
        text: doc.text.clone(),
        region: doc.region,
        body: doc.body,
        crlf: doc.crlf,
        indents: doc.indents,
        ..fresh
    }
}

/// The next event. libyaml-safer 0.3 panics on a few inputs instead of failing
/// (`[!x,]`: a tag followed by `,` in a flow collection, scanner.rs "TODO: What is
/// expected here?"); such a panic is caught and becomes `None`, the input invalid
/// YAML. A face keeps its message quiet (`quiet_parser_panics`).
/// Wraps the process's panic hook so that it says nothing of the libyaml-safer
/// panics `parse_event` catches. For faces (`cli::main`, the fuzz targets) to call
/// once: the library itself sets no process-wide state.
pub fn quiet_parser_panics() {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_parser = info.location().is_some_and(|l| {
            l.file().contains("libyaml-safer") || l.file().contains("libyaml_safer")
        });
        if !in_parser {
            hook(info);
        }
    }));
}

fn parse_event<R: std::io::BufRead>(
    parser: &mut Parser<R>,
) -> Option<Result<libyaml_safer::Event, libyaml_safer::Error>> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| parser.parse())).ok()
}

/// Scalars kubectl cannot take: a tag its decoder refuses for the text, and the
/// numbers `.nan` and `.inf`, which do not convert to JSON (kubectl refuses the file;
/// the tool refuses them wherever they are).
fn scalar_problem(text: &str, style: ScalarStyle, tag: Option<&str>) -> Option<&'static str> {
    if let Some(t) = tag {
        if let Some(why) = tag_problem(text, t) {
            return Some(why);
        }
    }
    if style != ScalarStyle::Plain || tag.is_some_and(|t| !is_tag(t, "float")) {
        return None;
    }
    let body = text.trim_start_matches(['-', '+']);
    if body.starts_with('.') {
        let lower = body.to_ascii_lowercase();
        if lower == ".nan" || lower == ".inf" {
            return Some("is not a finite number; JSON cannot carry it and kubectl refuses it");
        }
    }
    None
}

/// An explicit `!!bool`, `!!int`, `!!float` or `!!timestamp` on text that does not
/// read as one: go-yaml v2 fails with "cannot decode !!str `...` as a !!bool", so
/// kubectl refuses the file (whatever the scalar's style).
fn tag_problem(text: &str, tag: &str) -> Option<&'static str> {
    use super::scalar::{resolve_plain, Resolved};
    let r = resolve_plain(text);
    let fits = if is_tag(tag, "bool") {
        matches!(r, Resolved::Bool(_))
    } else if is_tag(tag, "int") {
        matches!(r, Resolved::Int(_) | Resolved::UInt(_))
    } else if is_tag(tag, "float") {
        matches!(r, Resolved::Int(_) | Resolved::UInt(_) | Resolved::Float(_))
    } else if is_tag(tag, "timestamp") {
        matches!(r, Resolved::Timestamp)
    } else {
        true
    };
    (!fits).then_some("does not read as the type its explicit tag names; kubectl refuses it")
}

pub(super) fn is_tag(tag: &str, name: &str) -> bool {
    tag.strip_prefix("tag:yaml.org,2002:")
        .or_else(|| tag.strip_prefix("!!"))
        .is_some_and(|t| t == name)
}

/// A merge key as go-yaml v2 sees one: the scalar `<<`, plain and untagged or in any
/// style tagged `!!merge`. An alias whose anchor is `<<` is not one (an alias node).
pub(super) fn is_merge_key(k: &Node) -> bool {
    matches!(&k.value, Value::Scalar(s) if s.text == "<<"
    && match k.tag() {
        None => s.style == Style::Plain,
        Some(t) => is_tag(t, "merge"),
    })
}

/// The text of a `!!binary` scalar, decoded as go-yaml v2 does (standard base64,
/// line breaks ignored). Bytes that are not UTF-8 would reach JSON garbled, so they
/// are refused rather than guessed at.
fn decode_binary(text: &str, line: u32) -> Result<String, YamlError> {
    use base64::Engine;
    const GO_STD: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
    );
    let compact: String = text.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
    let bytes = GO_STD.decode(compact).map_err(|_| YamlError::BadBinary {
        problem: "is not valid base64",
        line,
    })?;
    String::from_utf8(bytes).map_err(|_| YamlError::BadBinary {
        problem: "decodes to bytes that are not UTF-8 text",
        line,
    })
}

/// Key identity as Kubernetes sees it: every key becomes a JSON string, after YAML 1.1
/// resolution (`yes` and `'true'` are the same key to kubectl).
fn key_text(k: &Node) -> Option<std::borrow::Cow<'_, str>> {
    k.as_scalar().map(|s| super::scalar::json_key(s, k.tag()))
}

fn check_duplicate_keys(entries: &[(Node, Node)]) -> Result<(), YamlError> {
    let dup = |k: &Node, first: &Node| YamlError::DuplicateKey {
        key: key_text(k).unwrap_or_default().into_owned(),
        line: k.line,
        first_line: first.line,
    };
    // Two merge keys are refused too: kubectl takes the last, kpt writes both back as
    // the first, so a function would judge what is not applied.
    let keyed = |k: &Node| key_text(k).is_some();
    if entries.len() <= 16 {
        for (i, (k, _)) in entries.iter().enumerate() {
            if !keyed(k) {
                continue;
            }
            if let Some((first, _)) = entries[..i]
                .iter()
                .find(|(f, _)| keyed(f) && key_text(f) == key_text(k))
            {
                return Err(dup(k, first));
            }
        }
    } else {
        let mut seen: HashMap<std::borrow::Cow<'_, str>, &Node> =
            HashMap::with_capacity(entries.len());
        for (k, _) in entries.iter().filter(|(k, _)| keyed(k)) {
            if let Some(first) = seen.insert(key_text(k).unwrap(), k) {
                return Err(dup(k, first));
            }
        }
    }
    Ok(())
}

/// Expands aliases and merge keys into a tree without references.
pub(super) fn resolve_refs(root: &Node) -> Result<Node, YamlError> {
    let mut anchors: HashMap<String, Node> = HashMap::new();
    let mut budget = ALIAS_BUDGET;
    expand(root, &mut anchors, &mut budget, 0)
}

fn count_nodes(n: &Node) -> usize {
    1 + match &n.value {
        Value::Seq { items, .. } => items.iter().map(count_nodes).sum(),
        Value::Map { entries, .. } => entries
            .iter()
            .map(|(k, v)| count_nodes(k) + count_nodes(v))
            .sum(),
        _ => 0,
    }
}

/// Levels of collections in an (already bounded) expanded tree.
fn height(n: &Node) -> usize {
    match &n.value {
        Value::Seq { items, .. } => 1 + items.iter().map(height).max().unwrap_or(0),
        Value::Map { entries, .. } => {
            1 + entries
                .iter()
                .map(|(k, v)| height(k).max(height(v)))
                .max()
                .unwrap_or(0)
        }
        _ => 0,
    }
}

fn expand(
    n: &Node,
    anchors: &mut HashMap<String, Node>,
    budget: &mut usize,
    depth: usize,
) -> Result<Node, YamlError> {
    if depth > MAX_DEPTH {
        return Err(YamlError::TooDeep { line: n.line });
    }
    let out = match &n.value {
        Value::Alias(name) => {
            let target = anchors.get(name).ok_or_else(|| YamlError::UnknownAnchor {
                name: name.clone(),
                line: n.line,
            })?;
            let size = count_nodes(target);
            *budget = budget
                .checked_sub(size)
                .ok_or(YamlError::AliasBomb { line: n.line })?;
            // Anchored trees nest inside each other through aliases: bound the depth
            // of the expanded tree too, or a chain of anchors overflows the stack.
            if depth + height(target) > MAX_DEPTH {
                return Err(YamlError::TooDeep { line: n.line });
            }
            let mut copy = target.clone();
            copy.line = n.line;
            return Ok(copy);
        }
        Value::Scalar(s) if n.tag().is_some_and(|t| is_tag(t, "binary")) => Node {
            value: Value::Scalar(Scalar {
                text: decode_binary(&s.text, n.line)?.into(),
                style: Style::DoubleQuoted,
            }),
            line: n.line,
            props: None,
            span: n.span,
        },
        Value::Scalar(s) => Node {
            value: Value::Scalar(s.clone()),
            line: n.line,
            props: strip_anchor(n),
            span: n.span,
        },
        Value::Seq { items, flow } => {
            let items = items
                .iter()
                .map(|i| expand(i, anchors, budget, depth + 1))
                .collect::<Result<_, _>>()?;
            Node {
                value: Value::Seq { items, flow: *flow },
                line: n.line,
                props: strip_anchor(n),
                span: n.span,
            }
        }
        Value::Map { entries, flow } => {
            // go-yaml v2 applies a mapping's entries in order, each overwriting what
            // came before: a later `<<` overrides an earlier one, explicit keys after a
            // merge override it; inside a list of merged maps the first one wins.
            let mut out: Vec<(Node, Node)> = Vec::with_capacity(entries.len());
            let mut explicit: Vec<usize> = Vec::new();
            // Keys are compared as kubectl's JSON keys; two keys written differently
            // that meet there (`yes` merged, `'true'` explicit) are different keys to
            // go-yaml, and which one kubectl sends is left to Go's map order: refused.
            let set = |out: &mut Vec<(Node, Node)>, k: Node, v: Node| match out
                .iter()
                .position(|(o, _)| key_text(o) == key_text(&k))
            {
                Some(i) if out[i].0.text() != k.text() => Err(YamlError::DuplicateKey {
                    key: key_text(&k).unwrap_or_default().into_owned(),
                    line: k.line,
                    first_line: out[i].0.line,
                }),
                Some(i) => {
                    out[i].1 = v;
                    Ok(i)
                }
                None => {
                    out.push((k, v));
                    Ok(out.len() - 1)
                }
            };
            for (k, v) in entries {
                if is_merge_key(k) {
                    let v = expand(v, anchors, budget, depth + 1)?;
                    let sources = match &v.value {
                        Value::Map { .. } => vec![v],
                        Value::Seq { items, .. } if items.iter().all(Node::is_map) => {
                            items.iter().rev().cloned().collect()
                        }
                        _ => return Err(YamlError::BadMerge { line: k.line }),
                    };
                    for src in sources {
                        for (mk, mv) in src.entries().unwrap_or(&[]) {
                            // An explicit key before the merge that sets it: YAML 1.2
                            // readers keep the explicit value, go-yaml v2 the merged one.
                            if let Some(&i) = explicit
                                .iter()
                                .find(|&&i| key_text(&out[i].0) == key_text(mk))
                            {
                                return Err(YamlError::AmbiguousMerge {
                                    key: out[i].0.text().unwrap_or("").into(),
                                    line: out[i].0.line,
                                });
                            }
                            set(&mut out, mk.clone(), mv.clone())?;
                        }
                    }
                } else {
                    // The key first: anchors count in document order.
                    let mut key = expand(k, anchors, budget, depth + 1)?;
                    // An alias of a mapping or list used as a key: kubectl cannot turn
                    // it into a JSON string and refuses the document, as it does the
                    // same key written out.
                    if !matches!(key.value, Value::Scalar(_)) {
                        return Err(YamlError::ComplexKey { line: k.line });
                    }
                    if key.is_null() {
                        return Err(YamlError::NullKey { line: k.line });
                    }
                    let v = expand(v, anchors, budget, depth + 1)?;
                    // An alias whose anchor is the scalar `<<` is an ordinary key;
                    // quoted, it stays one when an edited document is written out.
                    if matches!(k.value, Value::Alias(_)) && is_merge_key(&key) {
                        if let Value::Scalar(s) = &mut key.value {
                            s.style = Style::SingleQuoted;
                        }
                        key.props = None;
                    }
                    // Keys that differ as written may be equal once decoded (`!!binary`).
                    if let Some(&i) = explicit
                        .iter()
                        .find(|&&i| key_text(&out[i].0) == key_text(&key))
                    {
                        return Err(YamlError::DuplicateKey {
                            key: key_text(&key).unwrap_or_default().into_owned(),
                            line: key.line,
                            first_line: out[i].0.line,
                        });
                    }
                    let i = set(&mut out, key, v)?;
                    explicit.push(i);
                }
            }
            Node {
                value: Value::Map {
                    entries: out,
                    flow: *flow,
                },
                line: n.line,
                props: strip_anchor(n),
                span: n.span,
            }
        }
    };
    if let Some(anchor) = n.anchor() {
        anchors.insert(anchor.to_string(), out.clone());
    }
    Ok(out)
}

/// The expanded tree has no aliases, so anchors would only be noise.
fn strip_anchor(n: &Node) -> Option<Box<Props>> {
    n.props.as_ref().and_then(|p| p.tag.clone()).map(|tag| {
        Box::new(Props {
            anchor: None,
            tag: Some(tag),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(src: &str) -> Document {
        let mut docs = parse_stream(src.as_bytes()).unwrap();
        assert_eq!(docs.len(), 1);
        docs.remove(0)
    }

    #[test]
    fn keeps_text_style_and_lines() {
        let d = one("a: 0777\nb: \"yes\"\nc:\n- 1e3\n");
        let v = d.view();
        assert_eq!(v.get("a").unwrap().as_scalar().unwrap().text, "0777");
        assert_eq!(
            v.get("b").unwrap().as_scalar().unwrap().style,
            Style::DoubleQuoted
        );
        assert_eq!(v.get("c").unwrap().line, 4);
        assert!(d.resolved.is_none());
    }

    #[test]
    fn duplicate_keys_are_errors_with_both_lines() {
        let err = parse_stream(b"---\na: 1\n---\nx: 1\ny: 2\nx: 3\n").unwrap_err();
        assert_eq!(err.index, 1);
        assert_eq!(
            err.error,
            YamlError::DuplicateKey {
                key: "x".into(),
                line: 6,
                first_line: 4
            }
        );
    }

    #[test]
    fn merge_keys_expand_with_explicit_keys_winning() {
        let d = one("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  y: 3\n");
        let m = d.view().get("m").unwrap();
        assert_eq!(m.get("x").unwrap().text(), Some("1"));
        assert_eq!(m.get("y").unwrap().text(), Some("3"));
        assert!(m.get("<<").is_none());
        // The tree as written keeps the alias for faithful output.
        assert!(d.root.get("m").unwrap().get("<<").is_some());
    }

    #[test]
    fn explicit_key_before_merge_is_ambiguous() {
        let err = parse_stream(b"b: &b {y: 2}\nm:\n  y: 3\n  <<: *b\n").unwrap_err();
        assert!(
            matches!(err.error, YamlError::AmbiguousMerge { .. }),
            "{err:?}"
        );
    }

    #[test]
    /// Refused by its expansion budget, before the nodes exist: the bound is on
    /// work, not on a clock (a timed assertion fails on a loaded machine).
    fn alias_bomb_is_refused_by_its_expansion_budget() {
        let mut src = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let refs = vec![format!("*a{}", i - 1); 10].join(", ");
            src.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        let err = parse_stream(src.as_bytes()).unwrap_err();
        assert!(matches!(err.error, YamlError::AliasBomb { .. }), "{err:?}");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let src = "[".repeat(100_000);
        let err = parse_stream(src.as_bytes()).unwrap_err();
        assert!(matches!(err.error, YamlError::TooDeep { .. }), "{err:?}");
    }

    #[test]
    fn unknown_anchor_and_bad_utf8_give_positions() {
        assert!(matches!(
            parse_stream(b"a: *nope\n").unwrap_err().error,
            YamlError::UnknownAnchor { .. }
        ));
        let err = parse_stream(b"a: 1\nb: \xff\xfe\n").unwrap_err();
        match err.error {
            YamlError::Syntax { line, .. } => assert_eq!(line, 2),
            e => panic!("{e:?}"),
        }
    }
}
