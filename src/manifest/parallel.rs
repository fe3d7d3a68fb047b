//! Parsing a large stream on every core.
//!
//! Parsing is most of the cost of `inject` and `validate`. A stream splits cleanly at
//! document markers: a `---` at the start of a line always starts a document (YAML
//! forbids it inside a multi-line scalar at column 0). So the input is cut there into
//! chunks of about 256 KiB, the chunks are parsed in parallel (which also bounds the
//! parser's buffers, and the trees a thread holds before `each` drops them, to a
//! chunk each), and lines and document indexes are shifted back to positions in the
//! whole stream. Any error re-parses the whole stream in one piece, so errors are
//! exactly those of `parse_stream`.

use std::sync::Arc;

use crate::work::Workers;

use super::parse::{
    breaks_crlf, frame_documents, line_breaks, parse_stream, shift_lines, Document, ParseError,
    YamlError,
};

type Parsed = Result<Vec<Document>, ParseError>;

/// A chunk's tree is about five times its text: small chunks keep what a thread
/// holds at once small (peak memory at N=10000 fell from 2.9x to 2.6x the input
/// going from 1 MiB), large enough that splitting costs nothing measurable. Input
/// under two chunks is parsed in one piece.
const CHUNK: usize = 1 << 18;

/// Byte offsets where chunks start, with the number of lines before each.
fn chunk_starts(input: &[u8]) -> Vec<(usize, u32)> {
    let mut starts = vec![(0usize, 0u32)];
    let mut lines = 0u32;
    let mut counted_to = 0usize;
    let mut from = CHUNK;
    while from < input.len() {
        let Some(at) = next_marker(input, from) else {
            break;
        };
        lines += line_breaks(&input[counted_to..at]);
        counted_to = at;
        starts.push((at, lines));
        from = at + CHUNK;
    }
    starts
}

/// The next `---` that starts a line and is a marker (followed by a blank or the end).
fn next_marker(input: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 3 <= input.len() {
        let nl = input[i..].iter().position(|&c| c == b'\n')? + i;
        let at = nl + 1;
        if input[at..].starts_with(b"---")
            && matches!(input.get(at + 3), None | Some(b' ' | b'\t' | b'\r' | b'\n'))
        {
            return Some(at);
        }
        i = at;
    }
    None
}

/// `parse_stream`, on the workers' threads for large input; the same result either way.
pub fn parse_stream_parallel(input: &[u8], workers: Workers) -> Result<Vec<Document>, ParseError> {
    parse_stream_each(input, &|_| {}, workers)
}

/// `parse_stream_parallel`, calling `each` on every document as soon as its chunk
/// is parsed, on the thread that parsed it: what `each` drops of a tree (see
/// `batch::evict`) is never held for the whole stream at once.
pub fn parse_stream_each(
    input: &[u8],
    each: &(dyn Fn(&mut Document) + Sync),
    workers: Workers,
) -> Result<Vec<Document>, ParseError> {
    parse_each(input, None, each, workers)
}

/// `parse_stream_each` of a stream's whole bytes, each document handed to `each`
/// with them attached (`attach_text`) and its region framed, as the returned
/// documents have them: complete enough to be edited and written there.
pub fn parse_text_each(
    text: &Arc<Vec<u8>>,
    each: &(dyn Fn(&mut Document) + Sync),
    workers: Workers,
) -> Result<Vec<Document>, ParseError> {
    parse_each(text, Some(text), each, workers)
}

fn parse_each(
    input: &[u8],
    text: Option<&Arc<Vec<u8>>>,
    each: &(dyn Fn(&mut Document) + Sync),
    workers: Workers,
) -> Result<Vec<Document>, ParseError> {
    json_stream_problem(input)?;
    separator_problem(input)?;
    let crlf = text.is_some() && breaks_crlf(input);
    let attach = |d: &mut Document| {
        if let Some(text) = text {
            d.text = Some(text.clone());
            d.crlf = crlf;
        }
    };
    let whole = || {
        parse_stream(input).map(|mut docs| {
            for d in docs.iter_mut() {
                attach(d);
                each(d);
            }
            docs
        })
    };
    if workers.threads() < 2 || input.len() < 2 * CHUNK {
        return whole();
    }
    let starts = chunk_starts(input);
    if starts.len() < 2 {
        return whole();
    }
    let bounds: Vec<(usize, usize, u32)> = starts
        .iter()
        .enumerate()
        .map(|(i, &(start, lines))| (start, starts.get(i + 1).map_or(input.len(), |s| s.0), lines))
        .collect();
    let results: Vec<Parsed> = workers.map(&bounds, |&(start, end, lines)| {
        let mut parsed = parse_stream(&input[start..end]);
        if let Ok(docs) = &mut parsed {
            for d in docs.iter_mut() {
                if start > 0 {
                    d.line += lines;
                    d.body += start;
                    // A chunk starts at a `---`: its first document's region starts
                    // there, as in the whole stream, and its last ends at the next.
                    d.region.0 += start;
                    d.region.1 += start;
                    shift_lines(&mut d.root, lines, start as u32);
                    if let Some(r) = &mut d.resolved {
                        shift_lines(r, lines, start as u32);
                    }
                }
                attach(d);
                each(d);
            }
        }
        parsed
    });
    // Sized once: the documents of a large stream outlive the parse.
    let count = results.iter().map(|r| r.as_ref().map_or(0, Vec::len)).sum();
    let mut docs = Vec::with_capacity(count);
    for parsed in results {
        match parsed {
            Ok(chunk) => {
                let base = docs.len();
                docs.extend(chunk.into_iter().map(|mut d| {
                    d.index += base;
                    d
                }));
            }
            // Report exactly what a whole-stream parse reports.
            Err(_) => return whole(),
        }
    }
    frame_documents(&mut docs, input.len());
    Ok(docs)
}

/// kubectl cuts a YAML stream into documents line by line (apimachinery's
/// YAMLReader), before any YAML parser sees it: a line starting `---` followed by
/// anything but blanks or a comment (`--- {a: 1}`, `----`) is "invalid Yaml document
/// separator" there, however a YAML parser would read it. Refused the same way.
pub fn separator_problem(input: &[u8]) -> Result<(), ParseError> {
    let body = input.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(input);
    if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        return Ok(()); // read as JSON, not split
    }
    let (mut markers, mut content) = (0usize, false);
    for (n, line) in input.split(|&b| b == b'\n').enumerate() {
        let Some(rest) = line.strip_prefix(b"---") else {
            content |= !line.trim_ascii().is_empty();
            continue;
        };
        let rest = rest.trim_ascii();
        if !rest.is_empty() && rest[0] != b'#' {
            return Err(ParseError {
                index: markers,
                error: YamlError::Syntax {
                    problem: format!(
                        "invalid document separator `--- {}`: kubectl allows only a comment after `---`; put the content on the next line",
                        String::from_utf8_lossy(&rest[..rest.len().min(40)])
                    ),
                    line: n as u32 + 1,
                    column: 1,
                },
            });
        }
        markers += usize::from(content);
        content = false;
    }
    Ok(())
}

/// kubectl reads a file whose first character is `{` as JSON (apimachinery's
/// YAMLOrJSONDecoder; kubectl 1.32 refuses YAML-only syntax there, later releases
/// fall back to YAML), this tool as YAML: where the two readings give different
/// values, the file is refused.
pub fn json_stream_problem(input: &[u8]) -> Result<(), ParseError> {
    let body = input.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(input);
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Ok(());
    }
    // `1e3` is a number to JSON but a string to YAML 1.1, which this tool reads the
    // file as: refused rather than read differently.
    let mut in_string = false;
    let mut escaped = false;
    let mut token = String::new();
    let mut line = 1;
    for &b in body {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+') {
            token.push(b as char);
            continue;
        }
        let exponent_only = token.starts_with(|c: char| c.is_ascii_digit() || c == '-')
            && token.contains(['e', 'E'])
            && !token.contains('.');
        if exponent_only {
            return Err(ParseError {
                index: 0,
                error: YamlError::Syntax {
                    problem: format!("{token} is a number to JSON (kubectl) and a string to YAML 1.1; write it as a plain decimal"),
                    line,
                    column: 1,
                },
            });
        }
        token.clear();
        in_string = b == b'"';
        line += u32::from(b == b'\n');
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::to_yaml;

    fn big_stream() -> String {
        let mut s = String::new();
        for i in 0..40_000 {
            s.push_str(&format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\ndata:\n  a: |\n    ---\n    text {i}\n  b: \"x\"\n"));
        }
        s
    }

    #[test]
    fn same_documents_lines_and_indexes_as_one_thread() {
        let input = big_stream();
        assert!(input.len() > 4 * CHUNK);
        let one = parse_stream(input.as_bytes()).unwrap();
        let many = parse_stream_parallel(input.as_bytes(), Workers::new(2)).unwrap();
        assert_eq!(one.len(), many.len());
        for (a, b) in one.iter().zip(&many) {
            assert_eq!((a.index, a.line), (b.index, b.line));
            assert_eq!(a.root, b.root); // node lines included
        }
        assert_eq!(to_yaml(&one), to_yaml(&many));
    }

    /// A document reaches `each` framed as in the whole stream (what edits it there
    /// splices into its region), also the first and last of a chunk.
    #[test]
    fn each_document_is_handed_over_with_its_region_in_the_whole_stream() {
        let input = big_stream();
        let one = parse_stream(input.as_bytes()).unwrap();
        let seen = std::sync::Mutex::new(Vec::new());
        let record = |d: &mut Document| seen.lock().unwrap().push((d.body, d.region));
        parse_stream_each(input.as_bytes(), &record, Workers::new(2)).unwrap();
        let mut seen = seen.into_inner().unwrap();
        seen.sort();
        let whole: Vec<_> = one.iter().map(|d| (d.body, d.region)).collect();
        assert!(chunk_starts(input.as_bytes()).len() > 2);
        assert_eq!(seen, whole);
    }

    #[test]
    fn lines_after_other_line_breaks_are_those_of_one_thread() {
        // YAML 1.1 breaks lines at a lone `\r`, NEL, LS and PS too: a chunk's lines
        // count them as the parser does.
        for brk in ["\r", "\u{85}", "\u{2028}", "\u{2029}"] {
            let input = format!("# a{brk}# b{brk}\n{}", big_stream());
            let one = parse_stream(input.as_bytes()).unwrap();
            let many = parse_stream_parallel(input.as_bytes(), Workers::new(2)).unwrap();
            let lines =
                |d: &[Document]| d.iter().map(|d| (d.line, d.root.line)).collect::<Vec<_>>();
            assert_eq!(lines(&one), lines(&many), "{brk:?}");
        }
    }

    #[test]
    fn errors_are_those_of_a_whole_parse() {
        let mut input = big_stream();
        input.push_str("---\na: 1\na: 2\n");
        assert_eq!(
            parse_stream_parallel(input.as_bytes(), Workers::new(2)).unwrap_err(),
            parse_stream(input.as_bytes()).unwrap_err()
        );
    }

    #[test]
    fn markers_inside_indented_block_scalars_are_not_split_points() {
        let input = big_stream();
        for &(at, _) in &chunk_starts(input.as_bytes())[1..] {
            assert!(
                input[at..].starts_with("---\napiVersion"),
                "split inside a document at {at}"
            );
        }
    }
}
