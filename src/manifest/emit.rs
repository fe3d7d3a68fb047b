//! Documents back to YAML (each scalar in the text and style it came with) or JSON
//! (values as kubectl reads them).

use libyaml_safer::{Emitter, Encoding, Event, MappingStyle, ScalarStyle, SequenceStyle};

use super::node::{Node, Style, Value};
use super::parse::Document;
use super::scalar::{resolve, Resolved};

fn scalar_style(s: Style) -> ScalarStyle {
    match s {
        Style::Plain => ScalarStyle::Plain,
        Style::SingleQuoted => ScalarStyle::SingleQuoted,
        Style::DoubleQuoted => ScalarStyle::DoubleQuoted,
        Style::Literal => ScalarStyle::Literal,
        Style::Folded => ScalarStyle::Folded,
    }
}

/// Streams YAML documents into a byte buffer.
pub struct YamlWriter<'w> {
    emitter: Emitter<'w>,
    /// Flow collections open around the node being written.
    flow_depth: usize,
    /// The node being written is a mapping key.
    key: bool,
}

/// Emitter failures mean a tree this tool built is malformed: a bug, not bad input.
fn emitted(r: libyaml_safer::Result<()>) {
    if let Err(e) = r {
        panic!("YAML emitter rejected a tree: {e:?}");
    }
}

impl<'w> YamlWriter<'w> {
    pub fn new(out: &'w mut Vec<u8>) -> YamlWriter<'w> {
        let mut emitter = Emitter::new();
        emitter.set_output_string(out);
        // No line folding (it would rewrite long scalars) and no \u escapes.
        emitter.set_width(-1);
        emitter.set_unicode(true);
        emitted(emitter.emit(Event::stream_start(Encoding::Utf8)));
        YamlWriter {
            emitter,
            flow_depth: 0,
            key: false,
        }
    }

    pub fn document(&mut self, doc: &Document) {
        self.node_document(&doc.root, doc.explicit_start, doc.explicit_end);
    }

    pub fn node_document(&mut self, root: &Node, explicit_start: bool, explicit_end: bool) {
        emitted(
            self.emitter
                .emit(Event::document_start(None, &[], !explicit_start)),
        );
        self.node(root);
        emitted(self.emitter.emit(Event::document_end(!explicit_end)));
    }

    pub fn node(&mut self, n: &Node) {
        let anchor = n.anchor();
        let tag = n.tag();
        let is_key = std::mem::take(&mut self.key);
        let event = match &n.value {
            Value::Alias(name) => Event::alias(name),
            Value::Scalar(s) => {
                let implicit = tag.is_none();
                // libyaml cannot write an empty plain scalar inside a flow collection
                // and would quote it, turning a null (`{a: , b}`) into "": write `~`.
                // (Keys compare by text, so an empty key stays `''`.)
                let text = if s.text.is_empty()
                    && s.style == Style::Plain
                    && implicit
                    && self.flow_depth > 0
                    && !is_key
                {
                    "~"
                } else {
                    &s.text
                };
                // libyaml-safer's folded writer loses line breaks inside the text
                // (`x\ny` comes back `x y`, `x\n y` as `x\n\n y`): a folded scalar
                // with a line break before its end is written literal, text exact.
                let style = match s.style {
                    Style::Folded if s.text.trim_end_matches('\n').contains('\n') => Style::Literal,
                    style => style,
                };
                Event::scalar(anchor, tag, text, implicit, implicit, scalar_style(style))
            }
            Value::Seq { items, flow } => {
                let style = if *flow {
                    SequenceStyle::Flow
                } else {
                    SequenceStyle::Block
                };
                emitted(self.emitter.emit(Event::sequence_start(
                    anchor,
                    tag,
                    tag.is_none(),
                    style,
                )));
                self.flow_depth += usize::from(*flow);
                for item in items {
                    self.node(item);
                }
                self.flow_depth -= usize::from(*flow);
                Event::sequence_end()
            }
            Value::Map { entries, flow } => {
                let style = if *flow {
                    MappingStyle::Flow
                } else {
                    MappingStyle::Block
                };
                emitted(
                    self.emitter
                        .emit(Event::mapping_start(anchor, tag, tag.is_none(), style)),
                );
                self.flow_depth += usize::from(*flow);
                for (k, v) in entries {
                    self.key = true;
                    self.node(k);
                    self.node(v);
                }
                self.flow_depth -= usize::from(*flow);
                Event::mapping_end()
            }
        };
        emitted(self.emitter.emit(event));
    }

    pub fn finish(mut self) {
        emitted(self.emitter.emit(Event::stream_end()));
        emitted(self.emitter.flush());
    }
}

/// kubectl splits a stream at lines starting `---` and refuses one with anything but
/// a comment after the marker; libyaml writes a flow (or tagged, anchored) root on the
/// marker's line (`--- {a: 1}`). Such a marker line is split in two, meaning unchanged.
pub fn markers_on_their_own_line(out: &mut Vec<u8>) {
    let at_marker = |out: &[u8], i: usize| {
        (i == 0 || out[i - 1] == b'\n')
            && out[i..].starts_with(b"--- ")
            && matches!(
                out.get(i + 4),
                Some(b'{' | b'[' | b'&' | b'!' | b'\'' | b'"')
            )
    };
    if !(0..out.len()).any(|i| at_marker(out, i)) {
        return;
    }
    let mut fixed = Vec::with_capacity(out.len() + 16);
    let mut i = 0;
    while i < out.len() {
        if at_marker(out, i) {
            fixed.extend_from_slice(b"---\n");
            i += 4;
        } else {
            fixed.push(out[i]);
            i += 1;
        }
    }
    *out = fixed;
}

/// Documents as one YAML stream.
pub fn to_yaml<'a>(docs: impl IntoIterator<Item = &'a Document>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = YamlWriter::new(&mut out);
    for d in docs {
        w.document(d);
    }
    w.finish();
    markers_on_their_own_line(&mut out);
    out
}

/// A node as a single YAML document (for tests and small outputs).
pub fn node_to_yaml(n: &Node) -> String {
    let mut out = Vec::new();
    let mut w = YamlWriter::new(&mut out);
    w.node_document(n, false, false);
    w.finish();
    String::from_utf8(out).expect("emitter writes UTF-8")
}

/// The JSON value kubectl would decode from an (alias-free) tree.
pub fn to_json(n: &Node) -> serde_json::Value {
    use serde_json::Value as J;
    match &n.value {
        Value::Scalar(s) => match resolve(s, n.tag()) {
            Resolved::Null => J::Null,
            Resolved::Bool(b) => J::Bool(b),
            Resolved::Int(i) => J::from(i),
            Resolved::UInt(u) => J::from(u),
            // Go writes a whole float64 without a fraction, and apimachinery reads
            // it back as an int64: `1500.0` reaches the API server as 1500.
            Resolved::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => J::from(f as i64),
            Resolved::Float(f) => serde_json::Number::from_f64(f).map_or(J::Null, J::Number),
            Resolved::Timestamp | Resolved::Str => J::String(s.text.to_string()),
        },
        Value::Seq { items, .. } => J::Array(items.iter().map(to_json).collect()),
        Value::Map { entries, .. } => J::Object(
            entries
                .iter()
                .map(|(k, v)| (key_string(k), to_json(v)))
                .collect(),
        ),
        // Trees handed out for reading are resolved; an alias here is a caller bug.
        Value::Alias(name) => J::String(format!("*{name}")),
    }
}

pub(crate) fn key_string(k: &Node) -> String {
    match &k.value {
        Value::Scalar(s) => super::scalar::json_key(s, k.tag()).into_owned(),
        _ => String::new(),
    }
}

/// Builds a tree from a JSON value: strings this tool writes get safe quoting.
pub fn from_json(v: &serde_json::Value) -> Node {
    use serde_json::Value as J;
    match v {
        J::Null => Node::scalar("null", Style::Plain),
        J::Bool(b) => Node::scalar(b.to_string(), Style::Plain),
        J::Number(n) => Node::scalar(n.to_string(), Style::Plain),
        J::String(s) => Node::string(s.as_str()),
        J::Array(a) => Node::seq(a.iter().map(from_json).collect()),
        J::Object(o) => Node::map(
            o.iter()
                .map(|(k, v)| (Node::string(k.as_str()), from_json(v)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse::parse_stream;
    use super::*;

    fn round_trip(src: &str) -> String {
        String::from_utf8(to_yaml(&parse_stream(src.as_bytes()).unwrap())).unwrap()
    }

    #[test]
    fn untouched_scalars_keep_text_and_style() {
        let src = "a: 0777\nb: \"yes\"\nc: 1e3\nd: 'on'\ne: ~\nf: 0x1F\ng: 1_000\nh: .5\ni: 012\nj: \"true\"\nk: true\nl: 2001-12-14\nm: |\n  text\n  more\nn: [y, n, {o: off}]\n";
        assert_eq!(round_trip(src), src);
    }

    #[test]
    fn json_documents_stay_json_like() {
        let src = "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"x\": [1, true, null]}\n";
        assert_eq!(round_trip(src), src);
    }

    #[test]
    fn json_rendering_uses_yaml11_meaning() {
        let d = parse_stream(b"a: 0777\nb: \"yes\"\nc: yes\nd: ~\ne: 1.5\n").unwrap();
        assert_eq!(
            to_json(d[0].view()),
            serde_json::json!({"a": 511, "b": "yes", "c": true, "d": null, "e": 1.5})
        );
    }

    #[test]
    fn written_strings_are_quoted_when_ambiguous() {
        let n = from_json(&serde_json::json!({"a": "yes", "b": "0777", "c": "plain", "d": 900}));
        assert_eq!(
            node_to_yaml(&n),
            "a: \"yes\"\nb: \"0777\"\nc: plain\nd: 900\n"
        );
    }
}
