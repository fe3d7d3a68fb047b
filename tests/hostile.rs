//! Hostile and odd input, through the binary: every case ends with a clear error or
//! correct output, the documented exit code (0 success, 1 input problem, 2 usage or
//! I/O), in bounded time and memory, and never with a panic or a stack overflow.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kubectl_nvcf_worker::manifest::scalar::{resolve_plain, Resolved};
use kubectl_nvcf_worker::manifest::{parse_stream, to_json, Document, Node, Style, Value};
use serde_json::json;

#[allow(unused)]
use crate::support;
use support::{oracle, tricks};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-nvcf-worker");

/// Every input a hostile test feeds the binary is also decoded by kubectl's own
/// decoder (once per distinct input): the tool must read it as kubectl does, or
/// refuse it, before any face of the tool is judged on it.
fn agrees_with_kubectl(input: &[u8]) {
    use std::collections::hash_map::DefaultHasher;
    use std::hash::{Hash, Hasher};
    static SEEN: std::sync::Mutex<std::collections::BTreeSet<u64>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut h = DefaultHasher::new();
    input.hash(&mut h);
    if !SEEN.lock().unwrap().insert(h.finish()) {
        return;
    }
    let mut tally = oracle::Tally::default();
    let inputs = [("hostile input".to_string(), input.to_vec())];
    oracle::compare(&oracle::oracles(), &inputs, &mut tally);
    oracle::report("hostile input", &tally);
}

struct Run {
    code: i32,
    stdout: Vec<u8>,
    stderr: String,
    elapsed: Duration,
    /// Peak resident memory (VmHWM) seen while the process ran, in KiB.
    peak_kib: u64,
}

impl Run {
    fn out(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    /// No panic, no overflow, no abort: whatever the outcome, it was a clean one.
    fn assert_clean(&self) {
        for bad in [
            "panicked",
            "overflow",
            "RUST_BACKTRACE",
            "fatal runtime error",
        ] {
            assert!(
                !self.stderr.contains(bad),
                "stderr has {bad:?}:\n{}",
                self.stderr
            );
        }
        assert!(self.code >= 0, "killed by signal {}", -self.code);
    }
    fn assert_fast(&self) {
        assert!(
            self.elapsed < Duration::from_secs(5),
            "took {:?}",
            self.elapsed
        );
    }
}

fn vm_hwm(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs the binary with `stdin`, collecting everything and the peak memory.
fn run_in(dir: Option<&std::path::Path>, args: &[&str], stdin: &[u8]) -> Run {
    if !stdin.is_empty() {
        agrees_with_kubectl(stdin);
    }
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn the binary");
    let pid = child.id();
    let mut sin = child.stdin.take().unwrap();
    let input = stdin.to_vec();
    // The tool may stop reading early (an error): a failed write is fine.
    let writer = std::thread::spawn(move || {
        let _ = sin.write_all(&input);
    });
    let mut sout = child.stdout.take().unwrap();
    let mut serr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        sout.read_to_end(&mut v).unwrap();
        v
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        serr.read_to_end(&mut v).unwrap();
        v
    });
    let mut peak = 0;
    let status = loop {
        if let Some(kib) = vm_hwm(pid) {
            peak = peak.max(kib);
        }
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let elapsed = start.elapsed();
    writer.join().unwrap();
    let stdout = out.join().unwrap();
    let stderr = String::from_utf8_lossy(&err.join().unwrap()).into_owned();
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .unwrap_or_else(|| -status.signal().unwrap_or(1));
    Run {
        code,
        stdout,
        stderr,
        elapsed,
        peak_kib: peak,
    }
}

fn run(args: &[&str], stdin: &[u8]) -> Run {
    run_in(None, args, stdin)
}

const INJECT: &[&str] = &["inject", "-f", "-", "--cluster-id", "c1"];
/// For tests that count or name per-workload identities (`nvcf-worker-<name>`, a trio each).
const INJECT_PER_WORKLOAD: &[&str] = &[
    "inject",
    "--naming",
    "per-workload",
    "-f",
    "-",
    "--cluster-id",
    "c1",
];
const VALIDATE: &[&str] = &["validate", "-"];
const KRM: &[&str] = &[];

/// `obj` (block YAML of one object, unindented) as the only item of a ResourceList.
fn resource_list(obj: &str) -> String {
    let mut s = String::from(
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nfunctionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  data: {clusterID: c1}\nitems:\n",
    );
    for (i, line) in obj.lines().enumerate() {
        s.push_str(if i == 0 { "- " } else { "  " });
        s.push_str(line);
        s.push('\n');
    }
    s
}

/// Runs one hostile object through inject, validate and the KRM function: each must
/// fail with exit 1, say `expect`, stay fast and write no objects.
fn refused_everywhere(obj: &str, expect: &str) {
    for (face, args, input) in [
        ("inject", INJECT, obj.to_string()),
        ("validate", VALIDATE, obj.to_string()),
        ("krm", KRM, resource_list(obj)),
    ] {
        let r = run(args, input.as_bytes());
        r.assert_clean();
        r.assert_fast();
        assert_eq!(r.code, 1, "{face}: {}\n{}", r.stderr, r.out());
        let said = format!("{}{}", r.stderr, r.out());
        assert!(
            said.contains(expect),
            "{face} should say {expect:?}: {said}"
        );
        if face == "inject" {
            assert!(r.stdout.is_empty(), "inject wrote output on error");
        }
        assert!(
            r.peak_kib < 512 * 1024,
            "{face}: {} KiB resident",
            r.peak_kib
        );
    }
}

// ---------------------------------------------------------------------------
// Alias bombs and nesting.

fn billion_laughs() -> String {
    let mut s = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lol\ndata:\n");
    s.push_str("  a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        s.push_str(&format!("  a{i}: &a{i} [{refs}]\n"));
    }
    s
}

#[test]
fn billion_laughs_is_refused_fast_by_inject_validate_and_krm() {
    refused_everywhere(&billion_laughs(), "alias");
}

#[test]
fn one_large_anchor_aliased_many_times_is_refused() {
    // No exponential growth: a 20 000-node anchor used 100 times (2 million nodes).
    let items = vec!["x"; 20_000].join(", ");
    let mut s = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: wide\ndata:\n  big: &big [{items}]\n  refs:\n"
    );
    for _ in 0..100 {
        s.push_str("  - *big\n");
    }
    refused_everywhere(&s, "alias");
}

#[test]
fn deep_flow_nesting_is_refused_without_stack_overflow() {
    for opener in ["[", "{a: ", "{\"a\": ["] {
        let obj = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata:\n  a: {}\n",
            opener.repeat(100_000)
        );
        refused_everywhere(&obj, "nesting deeper");
    }
}

#[test]
fn deep_block_nesting_is_refused_without_stack_overflow() {
    // `- - - - x`: 50 000 nested block sequences on one line.
    let obj = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata:\n  a:\n    {}x\n",
        "- ".repeat(50_000)
    );
    refused_everywhere(&obj, "nesting deeper");
}

/// Regression (found writing these tests): each anchor below is 190 levels deep and
/// holds an alias to the previous one, so the expanded tree was 19 000 levels deep
/// and the binary died of a stack overflow (SIGABRT). Expansion now bounds depth too.
#[test]
fn nesting_through_chained_aliases_is_bounded() {
    let mut obj =
        String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: chain\ndata:\n");
    for i in 0..100 {
        let inner = if i == 0 {
            "x".to_string()
        } else {
            format!("*a{}", i - 1)
        };
        obj.push_str(&format!(
            "  k{i}: &a{i} {}{inner}{}\n",
            "[".repeat(190),
            "]".repeat(190)
        ));
    }
    refused_everywhere(&obj, "nesting deeper");
    // A shallow alias of a shallow anchor is still fine.
    let ok = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\ndata:\n  a: &a [[[x]]]\n  b: [[*a]]\n";
    let docs = parse_stream(ok.as_bytes()).unwrap();
    assert_eq!(to_json(docs[0].view())["data"]["b"], json!([[[[["x"]]]]]));
}

// ---------------------------------------------------------------------------
// Size.

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn generate_corpus(n: usize) -> Vec<u8> {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/corpus/gen-manifests.py"
    );
    let out = Command::new("python3")
        .arg(script)
        .arg(n.to_string())
        .output()
        .expect("python3 runs ../shared/corpus/gen-manifests.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// 20 MB in the debug build of the test run; docs/guarantees.md has the 100 MB
/// figures measured with the release binary.
#[test]
fn twenty_megabytes_are_injected_in_bounded_time_and_memory() {
    let input = generate_corpus(6_700);
    assert!(input.len() > 19_000_000, "{} bytes", input.len());
    // The generator writes one JSON document per line, each after a `---`.
    let text = std::str::from_utf8(&input).unwrap();
    let in_count = text.lines().filter(|l| *l == "---").count();
    let workloads = text
        .lines()
        .filter(|l| l.contains("\"containers\""))
        .count();
    assert!(
        in_count > 6_700 && workloads == 6_700,
        "{in_count} {workloads}"
    );

    let r = run(INJECT_PER_WORKLOAD, &input);
    r.assert_clean();
    assert_eq!(r.code, 0, "{}", r.stderr);
    let injected = r
        .stderr
        .lines()
        .filter(|l| l.ends_with(" injected"))
        .count();
    let generated = r
        .stderr
        .lines()
        .filter(|l| l.ends_with(" generated"))
        .count();
    assert_eq!(
        injected,
        workloads.div_ceil(3),
        "every third workload is selected"
    );
    assert_eq!(generated, 3 * injected);
    let out_count = r
        .stdout
        .split(|&b| b == b'\n')
        .filter(|l| l.starts_with(b"---"))
        .count();
    assert_eq!(out_count, in_count + generated);
    // Spot-check that the output parses: its last documents are the last trio.
    let tail_at = r.stdout.len() - 4096;
    let cut = tail_at + find(&r.stdout[tail_at..], b"\n---").unwrap() + 1;
    let tail = objects(&r.stdout[cut..]);
    assert!(!tail.is_empty() && tail.iter().all(|o| o["kind"].is_string()));
    assert!(r.elapsed < Duration::from_secs(180), "took {:?}", r.elapsed);
    // Measured ~320 MiB for 20 MB in a debug build; well above it means a leak or a copy too many.
    assert!(r.peak_kib < 1024 * 1024, "{} KiB resident", r.peak_kib);

    let v = run(&["validate", "-o", "json", "-"], &input);
    v.assert_clean();
    assert_eq!(v.code, 0, "{}", v.out());
    let report: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(report["errors"], 0);
    assert!(v.peak_kib < 1024 * 1024, "{} KiB resident", v.peak_kib);
}

// ---------------------------------------------------------------------------
// Encodings and stream syntax.

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {nvcf.io/worker: \"true\"}\nspec:\n  containers:\n  - name: c\n    image: i\n";
const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  script: |\n    line1\n    line2\n  flow: {a: 1, b: [x, y]}\n  quoted: \"q\\tq\"\n";

fn cm_json() -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"},
           "data": {"script": "line1\nline2\n", "flow": {"a": 1, "b": ["x", true]}, "quoted": "q\tq"}})
}

/// Structural only: the documents of an output as written (a List stays one
/// document, a ResourceList itself), by the crate's own parser.
fn docs(yaml: &[u8]) -> Vec<serde_json::Value> {
    parse_stream(yaml)
        .expect("output parses")
        .iter()
        .filter(|d| !d.is_empty())
        .map(|d| to_json(d.view()))
        .collect()
}

/// The objects kubectl sends for the output of `input`, by kubectl's own decoder:
/// every release of the oracle that takes the input takes the output, and those
/// that do agree (a release may refuse an input the tool takes, as kubectl 1.32
/// refuses a stream that starts with `{` and is not JSON to its end).
#[track_caller]
fn objects_of_output(input: &[u8], output: &[u8]) -> Vec<serde_json::Value> {
    let read = support::kubectl_by_release(&[input, output]);
    let mut agreed: Option<Vec<serde_json::Value>> = None;
    for (release, per) in &read {
        if per[0].is_err() {
            continue;
        }
        let got = per[1].as_ref().unwrap_or_else(|e| {
            panic!(
                "{release} takes the input but not the output: {e}\n{}",
                String::from_utf8_lossy(output)
            )
        });
        if let Some(a) = &agreed {
            assert_eq!(a, got, "kubectl releases read the output differently");
        }
        agreed = Some(got.clone());
    }
    agreed.unwrap_or_else(|| panic!("no kubectl release takes the input: {read:?}"))
}

/// The objects kubectl sends for an output, by kubectl's own decoder (both
/// releases of the oracle, which must agree).
#[track_caller]
fn objects(yaml: &[u8]) -> Vec<serde_json::Value> {
    support::kubectl_objects_of(&[yaml])
        .pop()
        .unwrap()
        .unwrap_or_else(|e| {
            panic!(
                "kubectl does not decode the output: {e}\n{}",
                String::from_utf8_lossy(yaml)
            )
        })
}

/// Each variant holds the ConfigMap and the selected Pod; inject must read both,
/// keep the ConfigMap's values and inject the Pod.
#[test]
fn bom_crlf_tabs_empty_documents_and_document_ends_are_read_like_kubectl() {
    let crlf = |s: &str| s.replace('\n', "\r\n");
    let cases: Vec<(&str, String)> = vec![
        ("utf-8 BOM", format!("\u{feff}{CM}---\n{POD}")),
        ("CRLF line ends", crlf(&format!("{CM}---\n{POD}"))),
        ("BOM and CRLF", format!("\u{feff}{}", crlf(&format!("{CM}---\n{POD}")))),
        (
            "tabs in flow style",
            // After `---`: kubectl 1.32 reads a stream that starts with `{` as JSON
            // (the plain `x` and the `---` refused), so this one is YAML from the start.
            format!(
                "---\n{{\"apiVersion\":\t\"v1\",\t\"kind\": \"ConfigMap\",\t\"metadata\":\t{{\"name\":\t\"cm\"}},\n\t\"data\": {{\"script\":\t\"line1\\nline2\\n\",\t\"flow\": {{\"a\":\t1, \"b\":\t[x,\ty]}}, \"quoted\": \"q\\tq\"}}}}\n---\n{POD}"
            ),
        ),
        ("--- with no document", format!("---\n---\n{CM}---\n---\n{POD}---\n")),
        ("trailing ...", format!("{CM}...\n---\n{POD}...\n")),
        (
            "documents of only comments",
            format!("# head\n---\n# only a comment\n---\n{CM}---\n# another\n# more\n---\n{POD}---\n# tail\n"),
        ),
        ("... then comments", format!("{CM}...\n# after the end\n---\n{POD}...\n# trailing\n")),
    ];
    for (name, input) in cases {
        let r = run(INJECT_PER_WORKLOAD, input.as_bytes());
        r.assert_clean();
        assert_eq!(r.code, 0, "{name}: {}", r.stderr);
        let objs = objects_of_output(input.as_bytes(), &r.stdout);
        assert_eq!(
            objs.len(),
            5,
            "{name}: ConfigMap, Pod and its trio:\n{}",
            r.out()
        );
        assert_eq!(objs[0], cm_json(), "{name}");
        // The trio comes before the workload it serves.
        assert_eq!(
            objs[4]["spec"]["serviceAccountName"], "nvcf-worker-p",
            "{name}"
        );
        assert_eq!(objs[4]["spec"]["containers"][0]["image"], "i", "{name}");
        let kinds: Vec<&str> = objs[1..4]
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["ServiceAccount", "Role", "RoleBinding"], "{name}");
        // And validate agrees the input is fine.
        let v = run(VALIDATE, input.as_bytes());
        assert_eq!(v.code, 0, "{name}: {}", v.out());
    }
}

#[test]
fn input_with_no_objects_is_a_clear_error_not_empty_output() {
    for input in ["", "# only a comment\n", "---\n---\n", "---\n# c\n...\n"] {
        let r = run(INJECT, input.as_bytes());
        r.assert_clean();
        assert_eq!(r.code, 1, "{input:?}: {}", r.stderr);
        assert!(r.stderr.contains("no Kubernetes objects"), "{}", r.stderr);
        assert!(r.stdout.is_empty());
        // Nor does validate pass it (issue 25: an empty input is an error on
        // every command, as `kubectl apply` says "no objects passed to apply").
        let v = run(VALIDATE, input.as_bytes());
        v.assert_clean();
        assert_eq!(v.code, 1, "{input:?}: {}", v.out());
        assert!(v.stderr.contains("no Kubernetes objects"), "{}", v.out());
        assert!(v.stdout.is_empty(), "{}", v.out());
    }
    let k = run(KRM, b"\n");
    k.assert_clean();
    assert_eq!(k.code, 1);
    assert!(k.stderr.contains("empty input"), "{}", k.stderr);
}

#[test]
fn non_utf8_bytes_are_an_error_with_their_position() {
    let input =
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: ok\n  b: \xff\xfe\n";
    let r = run(INJECT, input);
    r.assert_clean();
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("invalid UTF-8"), "{}", r.stderr);
    assert!(r.stderr.contains("line 7, column 6"), "{}", r.stderr);
    assert!(r.stdout.is_empty());
    let v = run(VALIDATE, input);
    assert_eq!(v.code, 1);
    assert!(
        v.out().contains("NVW001") && v.out().contains("line 7"),
        "{}",
        v.out()
    );
    let k = run(
        KRM,
        resource_list(std::str::from_utf8(&input[..input.len() - 4]).unwrap()).as_bytes(),
    );
    assert_eq!(k.code, 0, "the prefix is fine: {}", k.stderr);
    let mut bad =
        resource_list("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}").into_bytes();
    bad.extend_from_slice(b"  data: {a: \xc3\x28}\n");
    let k = run(KRM, &bad);
    k.assert_clean();
    assert_eq!(k.code, 1);
    assert!(
        k.stderr.contains("invalid UTF-8") && k.stderr.contains("line 11"),
        "{}",
        k.stderr
    );
}

// ---------------------------------------------------------------------------
// YAML 1.1 / 1.2 scalars: text, style and value survive in every position.

/// Scalars YAML 1.1 (Kubernetes) and 1.2 (most other tools) read differently, and
/// a few that are the same everywhere, for contrast.
const SCALARS: &[&str] = &[
    "y",
    "Y",
    "yes",
    "Yes",
    "YES",
    "n",
    "N",
    "no",
    "No",
    "NO",
    "on",
    "On",
    "ON",
    "off",
    "Off",
    "OFF",
    "true",
    "True",
    "TRUE",
    "false",
    "False",
    "~",
    "null",
    "Null",
    "NULL",
    "0777",
    "0o777",
    "012",
    "08",
    "0x1F",
    "0X1f",
    "0b1010",
    "-0b1010",
    "+0x1F",
    "1_000",
    "1_000.5",
    "1e3",
    "1E3",
    "1.5e+3",
    "6.8523015e+5",
    "685.230_15e+03",
    ".5",
    "+.5",
    "0.",
    "-0",
    "+0",
    "00",
    "0009",
    // `.inf` and `.nan` are refused (kubectl cannot turn them into JSON):
    // `non_finite_numbers_are_refused_like_kubectl`.
    "1.0",
    "190:20:30",
    "-190:20:30",
    "190:20:30.15",
    "2001-12-14",
    "2001-12-14t21:59:43.10-05:00",
    "2001-12-14 21:59:43.10 -5",
    "=",
    "plain text",
    "abc",
];

fn styled(s: &str, style: Style) -> String {
    match style {
        Style::Plain => s.to_string(),
        Style::SingleQuoted => format!("'{s}'"),
        _ => format!("\"{s}\""),
    }
}

const STYLES: [Style; 3] = [Style::Plain, Style::SingleQuoted, Style::DoubleQuoted];

/// The corpus in every position, indented by `pad`.
fn corpus(pad: &str) -> String {
    let mut s = String::new();
    for (si, style) in STYLES.iter().enumerate() {
        let all: Vec<String> = SCALARS.iter().map(|x| styled(x, *style)).collect();
        // A null key (`~`, `null`) does not decode in kubectl; it has its own test.
        let keys: Vec<&String> = SCALARS
            .iter()
            .zip(&all)
            .filter(|(x, _)| *style != Style::Plain || resolve_plain(x) != Resolved::Null)
            .map(|(_, k)| k)
            .collect();
        s.push_str(&format!("{pad}block-keys-{si}:\n"));
        for x in &keys {
            s.push_str(&format!("{pad}- {x}: {x}\n"));
        }
        s.push_str(&format!("{pad}flow-keys-{si}:\n"));
        for x in &keys {
            s.push_str(&format!("{pad}- {{{x}: {x}}}\n"));
        }
        s.push_str(&format!("{pad}block-seq-{si}:\n"));
        for x in &all {
            s.push_str(&format!("{pad}- {x}\n"));
        }
        s.push_str(&format!("{pad}flow-seq-{si}: [{}]\n", all.join(", ")));
        s.push_str(&format!("{pad}block-values-{si}:\n"));
        for (i, x) in all.iter().enumerate() {
            s.push_str(&format!("{pad}  k{i}: {x}\n"));
        }
        let flow: Vec<String> = all
            .iter()
            .enumerate()
            .map(|(i, x)| format!("k{i}: {x}"))
            .collect();
        s.push_str(&format!("{pad}flow-values-{si}: {{{}}}\n", flow.join(", ")));
    }
    // Tags, block scalars and chomping.
    s.push_str(&format!(
        "{pad}tagged: {{a: !!str 0777, b: !!int 12, c: !custom yes, d: !!bool true, e: !!float 1}}\n\
         {pad}literal-keep: |+\n{pad}  kept\n\n{pad}literal-strip: |-\n{pad}  stripped\n\
         {pad}folded: >\n{pad}  folded\n{pad}  text\n"
    ));
    s
}

/// Scalar (style, text, tag) in document order, from a subtree.
fn scalars(n: &Node, in_flow: bool, out: &mut Vec<(Style, String, Option<String>, bool)>) {
    match &n.value {
        Value::Scalar(s) => out.push((
            s.style,
            s.text.to_string(),
            n.tag().map(String::from),
            in_flow,
        )),
        Value::Seq { items, flow } => items.iter().for_each(|i| scalars(i, *flow || in_flow, out)),
        Value::Map { entries, flow } => entries.iter().for_each(|(k, v)| {
            scalars(k, *flow || in_flow, out);
            scalars(v, *flow || in_flow, out);
        }),
        Value::Alias(_) => panic!("no aliases here"),
    }
}

fn corpus_of(doc: &Document, path: &[&str]) -> Node {
    let mut n = doc.view();
    for p in path {
        n = match p.parse::<usize>() {
            Ok(i) => &n.items().unwrap()[i],
            Err(_) => n.get(p).unwrap_or_else(|| panic!("{path:?}")),
        };
    }
    n.clone()
}

#[test]
fn yaml11_and_yaml12_ambiguous_scalars_keep_text_style_and_value() {
    let cm = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\nx-corpus:\n{}",
        corpus("  ")
    );
    let deploy = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  labels: {{nvcf.io/worker: \"true\"}}\nspec:\n  template:\n    spec:\n      x-corpus:\n{}      containers:\n      - name: c\n        image: i\n        x-corpus:\n{}",
        corpus("        "),
        corpus("          ")
    );
    let input = format!("{cm}---\n{deploy}");
    let in_docs = parse_stream(input.as_bytes()).unwrap();
    let r = run(INJECT_PER_WORKLOAD, input.as_bytes());
    r.assert_clean();
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The Deployment's trio comes before it: documents 1 to 3 of the output.
    let out_docs = parse_stream(&r.stdout).unwrap();
    let out_docs = [out_docs[0].clone(), out_docs[4].clone()];
    let out_deploy = to_json(out_docs[1].view());
    assert_eq!(
        out_deploy["spec"]["template"]["spec"]["serviceAccountName"],
        "nvcf-worker-d"
    );

    let mut checked = 0;
    let mut flow_colons = 0;
    for (doc, path) in [
        (0, &["x-corpus"][..]),
        (1, &["spec", "template", "spec", "x-corpus"][..]),
        (
            1,
            &["spec", "template", "spec", "containers", "0", "x-corpus"][..],
        ),
    ] {
        let before = corpus_of(&in_docs[doc], path);
        let after = corpus_of(&out_docs[doc], path);
        assert_eq!(
            to_json(&before),
            to_json(&after),
            "{path:?}: values changed"
        );
        let (mut b, mut a) = (Vec::new(), Vec::new());
        scalars(&before, false, &mut b);
        scalars(&after, false, &mut a);
        assert_eq!(a.len(), b.len());
        for (x, y) in b.iter().zip(&a) {
            checked += 1;
            assert_eq!(x.1, y.1, "text changed");
            assert_eq!(x.2, y.2, "tag changed on {:?}", x.1);
            // Edits are spliced into the source: even a plain scalar with `:`
            // inside a flow collection, which libyaml's emitter would quote, keeps
            // its style.
            if x.3 && x.0 == Style::Plain && x.1.contains(':') {
                flow_colons += 1;
            }
            assert_eq!(x.0, y.0, "style of {:?} changed", x.1);
        }
    }
    assert!(checked > 3 * 6 * 3 * SCALARS.len(), "{checked}");
    assert!(flow_colons > 0);
    // The unselected ConfigMap comes out as it went in, value for value.
    assert_eq!(to_json(in_docs[0].view()), to_json(out_docs[0].view()));
    // And kubectl reads the same values before and after, in the ConfigMap and
    // where the Deployment carries them (the checks above are the crate's reading).
    let (sent_before, sent) = (objects(input.as_bytes()), objects(&r.stdout));
    assert_eq!(
        sent[0], sent_before[0],
        "kubectl sends the ConfigMap as before"
    );
    let spec = |o: &serde_json::Value| o["spec"]["template"]["spec"].clone();
    assert_eq!(
        spec(&sent[4])["x-corpus"],
        spec(&sent_before[1])["x-corpus"]
    );
    assert_eq!(
        spec(&sent[4])["containers"][0]["x-corpus"],
        spec(&sent_before[1])["containers"][0]["x-corpus"]
    );
    assert_eq!(spec(&sent[4])["serviceAccountName"], "nvcf-worker-d");
}

// ---------------------------------------------------------------------------
// Anchors shared between objects.

const SHARED_LIST: &str = r#"apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: selected, labels: {nvcf.io/worker: "true"}}
  spec:
    template: &tpl
      metadata: {labels: {app: x}}
      spec: &podspec
        containers: &cs
        - name: c
          image: i
          env: &env [{name: A, value: "1"}]
        volumes: &vols [{name: data, emptyDir: {}}]
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: same-template}
  spec:
    template: *tpl
- apiVersion: batch/v1
  kind: Job
  metadata: {name: merged}
  spec:
    template:
      spec:
        <<: *podspec
        restartPolicy: Never
- apiVersion: v1
  kind: Pod
  metadata: {name: parts}
  spec:
    containers: *cs
    volumes: *vols
- apiVersion: v1
  kind: Pod
  metadata: {name: selected-too, labels: {nvcf.io/worker: "true"}}
  spec:
    containers: [{name: d, image: j, env: *env}]
"#;

/// The unselected objects' values, from the input as kubectl reads it.
fn unselected_values(src: &str, list_path: &[&str]) -> Vec<serde_json::Value> {
    let docs = parse_stream(src.as_bytes()).unwrap();
    let items = docs[0].view().path(list_path).unwrap().items().unwrap();
    items
        .iter()
        .map(to_json)
        .filter(|o| {
            !o["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("selected")
        })
        .collect()
}

fn check_shared_anchor_output(items: &[serde_json::Value], before: &[serde_json::Value]) {
    let by_name = |n: &str| {
        items
            .iter()
            .find(|o| {
                o["metadata"]["name"] == n
                    && o["kind"] != "ServiceAccount"
                    && o["kind"] != "Role"
                    && o["kind"] != "RoleBinding"
            })
            .unwrap_or_else(|| panic!("{n} missing"))
    };
    for b in before {
        let a = by_name(b["metadata"]["name"].as_str().unwrap());
        assert_eq!(
            a, b,
            "an object sharing an anchored node with a selected one changed"
        );
    }
    let sel = by_name("selected");
    let spec = &sel["spec"]["template"]["spec"];
    assert_eq!(spec["serviceAccountName"], "nvcf-worker-selected");
    assert_eq!(spec["volumes"].as_array().unwrap().len(), 2);
    assert_eq!(spec["containers"][0]["env"].as_array().unwrap().len(), 3);
    let sel2 = by_name("selected-too");
    assert_eq!(
        sel2["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        sel2["spec"]["serviceAccountName"],
        "nvcf-worker-selected-too"
    );
}

#[test]
fn injecting_one_object_never_changes_another_that_shared_its_node_in_a_list() {
    let r = run(INJECT_PER_WORKLOAD, SHARED_LIST.as_bytes());
    r.assert_clean();
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = docs(&r.stdout);
    assert_eq!(out.len(), 1, "still one List");
    let items = out[0]["items"].as_array().unwrap();
    assert_eq!(items.len(), 5 + 6);
    check_shared_anchor_output(items, &unselected_values(SHARED_LIST, &["items"]));
    // What kubectl sends: the List's items, and the objects no one selected as kubectl
    // reads them in the input.
    let sent = objects(&r.stdout);
    assert_eq!(&sent, items, "kubectl sends the List's items");
    let unselected = |objs: Vec<serde_json::Value>| -> Vec<serde_json::Value> {
        objs.into_iter()
            .filter(|o| {
                !o["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .starts_with("selected")
            })
            .collect()
    };
    check_shared_anchor_output(&sent, &unselected(objects(SHARED_LIST.as_bytes())));
    // The output is stable: a second run changes nothing.
    let again = run(INJECT_PER_WORKLOAD, &r.stdout);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.stdout, r.stdout);
}

#[test]
fn injecting_one_object_never_changes_another_that_shared_its_node_in_a_resource_list() {
    let body: String = SHARED_LIST
        .lines()
        .skip(3)
        .map(|l| format!("{l}\n"))
        .collect();
    let rl = format!(
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nfunctionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  data: {{clusterID: c1, naming: per-workload}}\nitems:\n{body}"
    );
    let r = run(KRM, rl.as_bytes());
    r.assert_clean();
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.out());
    // Structural: a ResourceList is kpt's (kubectl would flatten its items).
    let out = docs(&r.stdout);
    let items = out[0]["items"].as_array().unwrap();
    assert_eq!(items.len(), 5 + 6);
    check_shared_anchor_output(items, &unselected_values(&rl, &["items"]));
}

// ---------------------------------------------------------------------------
// The guard against decoding tricks.

#[test]
fn look_alike_keys_and_decoding_tricks_do_not_slip_past_the_guard() {
    let cases = tricks::DECODING_TRICKS;
    let rules = ["NVW101", "NVW107", "NVW001"];
    for (name, lines) in cases {
        for selected in [false, true] {
            let doc = tricks::pod_with(lines, selected);
            let v = run(VALIDATE, doc.as_bytes());
            v.assert_clean();
            assert_eq!(
                v.code,
                1,
                "{name} (selected {selected}) slipped past validate:\n{doc}\n{}",
                v.out()
            );
            assert!(
                rules.iter().any(|r| v.out().contains(r)),
                "{name}: {}",
                v.out()
            );
            let i = run(INJECT, doc.as_bytes());
            i.assert_clean();
            assert_eq!(
                i.code, 1,
                "{name} (selected {selected}) slipped past inject:\n{doc}\n{}",
                i.stderr
            );
            assert!(i.stdout.is_empty(), "{name}: inject wrote output");
            let k = run(KRM, resource_list(&doc).as_bytes());
            k.assert_clean();
            assert_eq!(
                k.code, 1,
                "{name} (selected {selected}) slipped past the KRM function"
            );
        }
    }
    // Contrast: the real key with an ordinary account passes.
    let ok = tricks::pod_with("  serviceAccountName: app\n", false);
    assert_eq!(run(VALIDATE, ok.as_bytes()).code, 0);
}

// ---------------------------------------------------------------------------
// Pipes and files.

#[test]
fn stdin_closed_early_gives_a_clear_error() {
    // The writer goes away mid-document.
    let partial = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata: {a: [1, 2";
    let r = run(INJECT, partial);
    r.assert_clean();
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("invalid YAML") && r.stderr.contains("line 5"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty());
    let k = run(
        KRM,
        &resource_list(std::str::from_utf8(partial).unwrap()).as_bytes()[..200],
    );
    k.assert_clean();
    assert_eq!(k.code, 1, "{}", k.stderr);
    // Cut in the middle of a multi-byte character.
    let cut = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata: {a: ü}\n".as_bytes();
    let r = run(INJECT, &cut[..cut.len() - 3]);
    r.assert_clean();
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("line 5"), "{}", r.stderr);
}

/// `tool | head -0`: the reader is gone before the first write. Exit 0, no panic.
#[test]
fn stdout_closed_early_exits_zero_without_a_panic_message() {
    let input = generate_corpus(60);
    let rl = {
        let mut s = String::from(
            "{\"apiVersion\": \"config.kubernetes.io/v1\", \"kind\": \"ResourceList\", \"functionConfig\": {\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"data\": {\"clusterID\": \"c1\"}}, \"items\": [",
        );
        let docs: Vec<String> = objects(&input).iter().map(|o| o.to_string()).collect();
        s.push_str(&docs.join(", "));
        s.push_str("]}\n");
        s.into_bytes()
    };
    let faces: Vec<(&str, Vec<&str>, &[u8])> = vec![
        ("inject yaml", INJECT.to_vec(), &input),
        ("inject json", [INJECT, &["-o", "json"]].concat(), &input),
        ("validate", vec!["validate", "-o", "json", "-"], &input),
        ("krm", vec![], &rl),
        ("man", vec!["man"], b""),
    ];
    for (name, args, stdin) in faces {
        let mut child = Command::new(BIN)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader closes before anything is written
        let mut sin = child.stdin.take().unwrap();
        let data = stdin.to_vec();
        let writer = std::thread::spawn(move || {
            let _ = sin.write_all(&data);
        });
        let start = Instant::now();
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{name}: {stderr}");
        assert!(
            !stderr.contains("panicked") && !stderr.contains("error"),
            "{name}: {stderr}"
        );
        assert!(start.elapsed() < Duration::from_secs(30));
    }
}

#[test]
fn unreadable_paths_exit_1_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::os::unix::fs::symlink(d.join("nowhere.yaml"), d.join("dangling.yaml")).unwrap();
    // Tests run as root, where chmod 000 blocks nothing; /proc/self/mem cannot be
    // read from offset 0 by anyone.
    std::os::unix::fs::symlink("/proc/self/mem", d.join("mem.yaml")).unwrap();
    for path in ["dangling.yaml", "mem.yaml"] {
        for args in [
            vec!["validate", path],
            vec!["inject", "--cluster-id", "c1", "-f", path],
        ] {
            let r = run_in(Some(d), &args, b"");
            r.assert_clean();
            assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
            assert!(r.stderr.contains(path), "{args:?}: {}", r.stderr);
        }
    }
    // Inside a directory walk, too.
    let sub = d.join("tree");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("a.yaml"), CM).unwrap();
    std::os::unix::fs::symlink(sub.join("gone"), sub.join("b.yaml")).unwrap();
    let r = run_in(Some(d), &["validate", "tree"], b"");
    r.assert_clean();
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("b.yaml"), "{}", r.stderr);
    // A directory named like a manifest is a directory: walked, not an error.
    let named = d.join("dir.yaml");
    std::fs::create_dir(&named).unwrap();
    std::fs::write(named.join("pod.yaml"), POD).unwrap();
    let r = run_in(
        Some(d),
        &["inject", "--cluster-id", "c1", "-f", "dir.yaml"],
        b"",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(objects(&r.stdout).len(), 4);
}

#[test]
fn a_directory_with_symlink_loops_terminates_without_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("m");
    std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
    std::fs::write(root.join("a.yaml"), CM).unwrap();
    std::fs::write(root.join("sub/deeper/pod.yaml"), POD).unwrap();
    std::os::unix::fs::symlink("..", root.join("sub/up")).unwrap();
    std::os::unix::fs::symlink(".", root.join("sub/deeper/self")).unwrap();
    std::os::unix::fs::symlink(&root, root.join("sub/deeper/root")).unwrap();
    let r = run_in(Some(dir.path()), &["validate", "m"], b"");
    r.assert_clean();
    r.assert_fast();
    assert_eq!(r.code, 0, "{}", r.out());
    assert!(r.out().contains("in 2 files"), "{}", r.out());
    let r = run_in(
        Some(dir.path()),
        &[
            "inject",
            "--naming",
            "per-workload",
            "--cluster-id",
            "c1",
            "m",
        ],
        b"",
    );
    r.assert_clean();
    r.assert_fast();
    assert_eq!(r.code, 0, "{}", r.stderr);
    let names: Vec<String> = objects(&r.stdout)
        .iter()
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            "ConfigMap/cm",
            "ServiceAccount/nvcf-worker-p",
            "Role/nvcf-worker-p",
            "RoleBinding/nvcf-worker-p",
            "Pod/p"
        ]
    );
}

// ---------------------------------------------------------------------------
// Regressions found by fuzzing (fuzz/, see docs/guarantees.md).

/// Round trip through the emitter: the values of every document are kept.
fn assert_round_trip_keeps_values(input: &[u8]) {
    agrees_with_kubectl(input);
    let docs = parse_stream(input).unwrap();
    let out = kubectl_nvcf_worker::manifest::to_yaml(&docs);
    let again = parse_stream(&out).unwrap_or_else(|e| {
        panic!("{e:?}:\n{}", String::from_utf8_lossy(&out));
    });
    let values = |d: &[Document]| -> Vec<serde_json::Value> {
        d.iter()
            .filter(|d| !d.is_empty())
            .map(|d| to_json(d.view()))
            .collect()
    };
    assert_eq!(
        values(&docs),
        values(&again),
        "{}",
        String::from_utf8_lossy(&out)
    );
}

/// fuzz `stream` crash-8877f2d1: a flow mapping key without a value (`{"k", ...}`)
/// is a null; the emitter wrote it as `''`, an empty string.
#[test]
fn fuzz_empty_values_in_flow_collections_stay_null() {
    let crash = b"{\n\"kiPolicy\",\n\"apiVersion\" : \"v1\",\n\"extenders\" : [\n\t{\n        \"urlPrefix\": \"http://127.0.0.1:12346/scheduler\",\n  er\",\n        \"filterVerb\": \"filter\",\n        \"bindVerb\": \"bind\",\n        \"ble\": false\n\t}\n    ]\n}\n";
    assert_round_trip_keeps_values(crash);
    assert_round_trip_keeps_values(b"a: {b: , c, d: 1}\ne: [f, {g: }]\nh:\n");
    // crash-3c220962 (a later run): an empty key in a flow mapping is a null key,
    // which kubectl cannot turn into a JSON string: refused, as kubectl refuses it.
    for input in [
        &b"hostPath: {&ath: /etc/ssl/certs}\n"[..],
        b"x: [{&b : 1}]\n",
    ] {
        agrees_with_kubectl(input);
        let e = parse_stream(input).unwrap_err();
        assert!(e.error.to_string().contains("null mapping key"), "{e:?}");
    }
    // Through the tool: the null stays a null in the YAML output.
    let cm =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  a:\n  b: {c: , d: 1, e}\n";
    let r = run(INJECT, cm.as_bytes());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        objects(&r.stdout)[0]["data"],
        json!({"a": null, "b": {"c": null, "d": 1, "e": null}})
    );
    assert!(
        r.out().contains("  a:\n"),
        "block nulls keep their text: {}",
        r.out()
    );
}

/// fuzz `stream` crash-deed9f31 and crash-8c328f19 (mutated kubernetes/examples
/// vitess manifests): libyaml-safer's folded writer loses line breaks. A folded
/// scalar with a more-indented line (`x\n y`) came back `x\n\n y`, and paragraphs
/// (`x\n# y`, written `>` with a blank line) came back joined (`x # y`). Folded
/// scalars with an inner line break are now written literal.
#[test]
fn fuzz_folded_scalars_with_more_indented_lines_keep_their_text() {
    let src = concat!(
        "a: >-\n  x\n   y\nb: >\n  x\n\n   y\n  z\nc: >+\n  x\n   y\n\nd: >\n  plain\n  folded\n",
        "e: >-\n  x\n\n  # y\nf: >\n  p1\n\n  p2\n\n\n  p3\ng: >+\n  x\n\n\nh: >-\n  x\n\n",
    );
    assert_round_trip_keeps_values(src.as_bytes());
    let docs = parse_stream(src.as_bytes()).unwrap();
    let out = String::from_utf8(kubectl_nvcf_worker::manifest::to_yaml(&docs)).unwrap();
    assert!(
        out.contains("d: >\n"),
        "ordinary folded text stays folded: {out}"
    );
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  script: >-\n    while true; do\n      sleep 1\n    done\n".to_string();
    let r = run(INJECT, cm.as_bytes());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        objects(&r.stdout)[0]["data"]["script"],
        "while true; do\n  sleep 1\ndone"
    );
}

/// fuzz `stream` crash-f29c3749: 82 lone `\r` before a document. A document dropped
/// as read (as inject drops a selected workload's) is read again from its region and
/// moved to its lines in the stream; the lines before it were counted by `\n` alone,
/// though YAML 1.1 (libyaml, kubectl's go-yaml) breaks lines at a lone `\r`, NEL, LS
/// and PS too, and the reread panicked ("a document read again lies where it was
/// read"). Read again, each document has the tree, lines and spans it had.
#[test]
fn fuzz_a_dropped_document_after_other_line_breaks_reads_again_where_it_was() {
    use kubectl_nvcf_worker::manifest::batch::{evict, Batch, Need};
    use kubectl_nvcf_worker::manifest::read;
    let doc = "kind: StorageClass{b}apiVersion: storage.k8s.io/v1{b}parameters:{b}    diskformat: thin{b}";
    for brk in ["\r", "\r\n", "\n", "\u{85}", "\u{2028}", "\u{2029}"] {
        let one = doc.replace("{b}", brk);
        let text = format!("{}{one}---{brk}{brk}{one}", brk.repeat(82));
        let input = || read::Input {
            name: "t".into(),
            bytes: text.clone().into_bytes(),
            utf16: None,
        };
        let held = read::load(input()).unwrap();
        let drop_all = |d: &mut Document| evict(d, &[], |_| Need::Later);
        let dropped = read::load_with(input(), Some(&drop_all), Default::default()).unwrap();
        let again = Batch::new(vec![dropped]).with_rereads(|r| r.collect::<Vec<_>>());
        assert_eq!(again.len(), 2, "{brk:?}");
        for d in again {
            let was = &held.docs[d.index];
            assert_eq!(
                format!("{:?}", d.root),
                format!("{:?}", was.root),
                "{brk:?}"
            );
            assert_eq!((d.line, d.region, d.body), (was.line, was.region, was.body));
        }
        assert_eq!(held.docs[0].root.line, 83, "{brk:?}");
    }
}

/// fuzz `resource_list` crash-06b41f2d (CI's crash-d403cb2f the same): a value that
/// is only a tag or an anchor (`key:` with `!t` on the next line) was placed where
/// its key ends, as an empty `key:` is, so lines added after the entry went between
/// the key and its tag: kpt got a ResourceList it could not parse. Lines added after
/// such an entry (the function's `results`, the fields inject adds to a pod spec) go
/// after its tag, and kubectl reads the value as it was.
#[test]
fn fuzz_lines_added_after_a_value_that_is_only_a_tag_go_after_it() {
    let config = "apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nmetadata: {name: x}\nspec: {clusterID: c1}\n";
    let forged = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  serviceAccountName: nvcf-worker\n  containers: [{name: c, image: i}]\n";
    for (value, read) in [
        ("\n  !!str", json!("")),
        ("\n  !!str # a comment", json!("")),
        ("\n  &a", json!(null)),
        (" !!str", json!("")),
        ("\n &a !!str\n\n# after a blank line", json!("")),
    ] {
        // The function's answer: `results` after the last entry of the root.
        let rl = format!("{}x:{value}\n", support::resource_list(forged, config));
        let out = support::krm(&rl);
        let answer = support::rl(&out);
        assert_eq!(answer["x"], read, "{out}");
        assert!(!support::results(&answer).is_empty(), "{out}");
        // inject: the fields it adds after the pod spec's last entry.
        let worker = format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  template:\n    metadata:\n      labels: {{nvcf.io/worker: \"true\"}}\n    spec:\n      containers:\n      - {{name: app, image: nginx}}\n      x:{}\n", value.replace('\n', "\n      "));
        agrees_with_kubectl(worker.as_bytes());
        let out = support::inject(&worker, &["-q"]);
        out.ok();
        let objects = support::objects(&out.stdout);
        let web = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
        let spec = &web["spec"]["template"]["spec"];
        assert_eq!(spec["x"], read, "{out}");
        assert!(spec["serviceAccountName"].is_string(), "{out}");
    }
}

/// fuzz `resource_list` crash-12b89b9f (kubernetes/examples' guestbook with a byte
/// order mark after an item's indentation): the ResourceList does not parse (the
/// mark is content where a key should be), but the item alone, its indentation
/// taken off, starts a line with the mark, which libyaml-safer skips: the function
/// streamed the items and gave the ResourceList back as an answer kpt cannot read.
/// A ResourceList with a mark anywhere is read as one tree, and refused.
#[test]
fn fuzz_a_byte_order_mark_after_an_items_indentation_is_not_skipped() {
    let rl = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nfunctionConfig:\n  apiVersion: fn.nvcf.io/v1alpha1\n  kind: WorkerIdentity\n  spec: {clusterID: c1}\nitems:\n- apiVersion: apps/v1\n  kind: Deployment\n  metadata:\n    name: d\n  spec:\n    template:\n      metadata:\n  \u{feff}      labels:\n          app: x\n      spec:\n        containers:\n        - name: c\n          image: x\n";
    assert!(parse_stream(rl.as_bytes()).is_err());
    let answer = kubectl_nvcf_worker::krm::run_resource_list(rl.as_bytes());
    assert!(
        answer.is_err(),
        "{:?}",
        answer.map(|o| String::from_utf8(o.stdout))
    );
}

/// fuzz `stream` crash-f4723397 (minimized to `{!,`): libyaml-safer 0.3 panics
/// ("TODO: What is expected here?") on a tag followed by `,` in a flow collection.
/// The panic is caught in parse_stream and reported as invalid YAML, quietly.
#[test]
fn fuzz_tag_followed_by_comma_is_invalid_yaml_not_a_panic() {
    for src in [&b"{!,"[..], b"{!,u", b"{!p,TRUEu", b"[!x, b]\n"] {
        let err = parse_stream(src).unwrap_err();
        assert!(
            err.error.to_string().contains("unsupported YAML syntax"),
            "{err:?}"
        );
    }
    let obj = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: [!x, b]}\n";
    refused_everywhere(obj, "unsupported YAML syntax");
}

// ---------------------------------------------------------------------------
// Decoding classes found by the differential test against kubectl's own decoder
// (tests/differential.rs): each was a way past the guard before.

const KRM_VALIDATE: &[&str] = &[];

fn resource_list_validate(obj: &str) -> String {
    resource_list(obj).replace("data: {clusterID: c1}", "data: {mode: validate}")
}

/// Refused by inject, validate, the KRM function and the KRM validator.
fn refused_on_every_face(obj: &str, expect: &str) {
    refused_everywhere(obj, expect);
    let r = run(KRM_VALIDATE, resource_list_validate(obj).as_bytes());
    assert_eq!(r.code, 1, "krm validate: {}\n{}", r.stderr, r.out());
    assert!(
        r.out().contains(expect),
        "krm validate should say {expect:?}: {}",
        r.out()
    );
}

const PLAIN_POD: &str =
    "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: x}]\n";

#[test]
fn binary_scalars_are_decoded_as_kubectl_decodes_them() {
    refused_on_every_face(
        &format!("{PLAIN_POD}  serviceAccountName: !!binary bnZjZi13b3JrZXItdmljdGlt\n"),
        "NVW101",
    );
    refused_on_every_face(
        &format!("{PLAIN_POD}  !!binary c2VydmljZUFjY291bnROYW1l: nvcf-worker-victim\n"),
        "NVW101",
    );
    // Look-alike: a !!binary that decodes to a harmless name passes.
    let ok = format!("{PLAIN_POD}  serviceAccountName: !!binary YXBw\n");
    assert_eq!(run(VALIDATE, ok.as_bytes()).code, 0);
}

#[test]
fn tagged_and_repeated_merge_keys_merge_as_in_kubectl() {
    for key in [
        "!!merge <<",
        "!<tag:yaml.org,2002:merge> <<",
        "!!merge '<<'",
    ] {
        refused_on_every_face(
            &format!("{PLAIN_POD}  {key}: {{serviceAccountName: nvcf-worker-a}}\n"),
            "NVW101",
        );
    }
    // Two merge keys in one mapping: kubectl takes the last, but kpt writes both back
    // as the first (found by the kpt view of the differential test), so what a
    // function judged is not what is applied. Refused, in either order.
    for (first, second) in [("app", "nvcf-worker-b"), ("nvcf-worker-b", "app")] {
        let obj = format!(
            "{PLAIN_POD}  <<: {{serviceAccountName: {first}}}\n  !!merge <<: {{serviceAccountName: {second}}}\n"
        );
        refused_everywhere(&obj, "duplicate key \"<<\"");
        let r = run(KRM_VALIDATE, resource_list_validate(&obj).as_bytes());
        assert_eq!(r.code, 1, "krm validate: {}", r.stderr);
        assert!(r.stderr.contains("duplicate key"), "{}", r.stderr);
    }
    // Look-alike: an explicit key after a merge wins.
    let ok = format!(
        "{PLAIN_POD}  <<: {{serviceAccountName: nvcf-worker-b}}\n  serviceAccountName: app\n"
    );
    let r = run(VALIDATE, ok.as_bytes());
    assert!(!r.out().contains("NVW101"), "{ok}\n{}", r.out());
}

#[test]
fn lists_are_flattened_as_kubectl_flattens_them() {
    // A typed list's items without kind take the list's kind minus `List`.
    refused_on_every_face(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBindingList\nitems:\n- metadata: {name: b, namespace: d}\n  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n  subjects: [{kind: ServiceAccount, name: nvcf-worker-x, namespace: d}]\n",
        "NVW102",
    );
    // kubectl applies the items of any object with an `items` list.
    refused_on_every_face(
        "apiVersion: example.com/v1\nkind: Whatever\nmetadata: {name: w}\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: q}\n  spec: {serviceAccountName: nvcf-worker-y}\n",
        "NVW101",
    );
    // A document that is only a merge key is an object.
    let r = run(
        VALIDATE,
        b"<<: {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {serviceAccountName: nvcf-worker-r}}\n",
    );
    assert_eq!(r.code, 1, "{}", r.out());
    assert!(r.out().contains("NVW101"), "{}", r.out());
    // A list inside a list: kubectl refuses it.
    refused_everywhere(
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items: [{apiVersion: v1, kind: ConfigMap, metadata: {name: n}}]\n",
        "a list inside a list",
    );
}

#[test]
fn a_null_api_group_is_the_core_group() {
    let role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r}\nrules:\n- apiGroups: [~]\n  resources: [serviceaccounts/token]\n  verbs: [create]\n";
    let r = run(VALIDATE, role.as_bytes());
    assert!(r.out().contains("NVW105"), "{}", r.out());
    let look_alike = role.replace("[~]", "[apps]");
    assert!(!run(VALIDATE, look_alike.as_bytes())
        .out()
        .contains("NVW105"));
}

#[test]
fn an_alias_key_whose_text_is_a_merge_key_stays_a_plain_key_after_an_edit() {
    let pod = "a: &m <<\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {nvcf.io/worker: \"true\"}\nspec:\n  containers: [{name: c, image: x}]\n  *m : {automountServiceAccountToken: true}\n";
    let r = run(INJECT, pod.as_bytes());
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = objects(&r.stdout);
    let pod = out.iter().find(|o| o["kind"] == "Pod").unwrap();
    assert_eq!(
        pod["spec"]["automountServiceAccountToken"],
        false,
        "{}",
        r.out()
    );
    assert_eq!(pod["spec"]["<<"]["automountServiceAccountToken"], true);
}

/// The form kpt hands a function: it writes merge keys as `!!merge <<`.
#[test]
fn real_kpt_validator_sees_merge_keys() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("role.yaml"),
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: nvcf-worker-w\n  namespace: d\nbase: &r {rules: [{apiGroups: [''], resources: [secrets], verbs: [get]}]}\n<<: *r\n",
    )
    .unwrap();
    let out = Command::new("kpt")
        .args(["fn", "eval"])
        .arg(dir.path())
        .args([
            "--exec",
            env!("CARGO_BIN_EXE_kubectl-nvcf-worker"),
            "--",
            "mode=validate",
        ])
        .output()
        .expect("kpt is part of the machine image");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("NVW104"), "{said}");
}

#[test]
fn non_finite_numbers_are_refused_like_kubectl() {
    for n in [".inf", "-.Inf", "+.INF", ".NaN"] {
        refused_everywhere(
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\nx: {n}\n"),
            "not a finite number",
        );
    }
    // Look-alike: quoted, it is a string.
    let ok = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {x: '.inf'}\n";
    assert_eq!(run(VALIDATE, ok.as_bytes()).code, 0);
}

/// Found by feeding these inputs to kubectl's decoder: go-yaml v2 reads a key by YAML
/// 1.1 and sigs.k8s.io/yaml turns it into a JSON string, so a null key does not decode
/// and `yes` and `'true'` are one key (which value wins is left to Go's map order).
#[test]
fn null_keys_and_keys_equal_once_decoded_are_refused_as_kubectl_refuses_them() {
    // YAML errors: no ResourceList can be echoed, so the KRM faces say it on stderr.
    for (obj, expect) in [
        (
            format!("{PLAIN_POD}  ~: nvcf-worker-victim\n"),
            "null mapping key",
        ),
        (format!("{PLAIN_POD}  ? \n  : x\n"), "null mapping key"),
        (
            format!("{PLAIN_POD}  nodeSelector: {{yes: a, 'true': b}}\n"),
            "duplicate key",
        ),
        (
            format!("{PLAIN_POD}  nodeSelector: {{<<: {{yes: a}}, 'true': b}}\n"),
            "duplicate key",
        ),
    ] {
        refused_everywhere(&obj, expect);
        let r = run(KRM_VALIDATE, resource_list_validate(&obj).as_bytes());
        assert_eq!(r.code, 1, "krm validate: {}", r.stderr);
        assert!(r.stderr.contains(expect), "{}", r.stderr);
    }
    // Look-alikes: a quoted `~` is a string key; `yes` alone is the key "true".
    let ok = format!("{PLAIN_POD}  nodeSelector: {{'~': a, yes: b}}\n");
    assert_eq!(run(VALIDATE, ok.as_bytes()).code, 0);
    let r = run(INJECT, ok.as_bytes());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        objects(&r.stdout)[0]["spec"]["nodeSelector"],
        json!({"~": "a", "true": "b"})
    );
}

/// YAML 1.1 breaks lines at a lone `\r`, NEL, LS and PS too, and kubectl reads them
/// so. An edit of a document broken that way comes out as kubectl reads the same
/// document broken by `\n`, on the command line and in a ResourceList (the bounded
/// fuzz met a lone `\r`: the splicer, finding lines by `\n`, put the edit inside a
/// line and kpt got a ResourceList it could not parse).
#[test]
fn every_yaml_line_break_is_a_line_break_for_edits_too() {
    const WORKER: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    metadata:\n      labels: {nvcf.io/worker: \"true\"}\n    spec:\n      containers:\n      - {name: app, image: nginx}\n";
    let plain = support::inject(WORKER, &["-q"]);
    plain.ok();
    let mut streams: Vec<Vec<u8>> = vec![plain.stdout.clone().into_bytes()];
    let config = "apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nmetadata: {name: x}\nspec: {clusterID: c1}\n";
    let items = |out: &support::Out| support::items(&support::rl(out));
    let plain_items = items(&support::krm(&support::resource_list(WORKER, config)));
    let mut cases = 0;
    for brk in ["\r", "\u{85}", "\u{2028}", "\u{2029}"] {
        // Each line break but the last, in turn.
        for (at, _) in WORKER
            .match_indices('\n')
            .filter(|(i, _)| *i + 1 < WORKER.len())
        {
            let odd = format!("{}{brk}{}", &WORKER[..at], &WORKER[at + 1..]);
            agrees_with_kubectl(odd.as_bytes());
            let out = support::inject(&odd, &["-q"]);
            out.ok();
            streams.push(out.stdout.into_bytes());
            cases += 1;
        }
        // The same in a ResourceList: each line break inside its item, in turn.
        let rl = support::resource_list(WORKER, config);
        let (from, to) = (
            rl.find("items:\n").unwrap() + 7,
            rl.find("functionConfig:").unwrap() - 1,
        );
        for (at, _) in rl
            .match_indices('\n')
            .filter(|(i, _)| (from..to).contains(i))
        {
            let odd = format!("{}{brk}{}", &rl[..at], &rl[at + 1..]);
            let krm = support::krm(&odd);
            krm.ok();
            assert_eq!(items(&krm), plain_items, "{brk:?} at {at}:\n{}", krm.stdout);
            cases += 1;
        }
    }
    let refs: Vec<&[u8]> = streams.iter().map(|s| &s[..]).collect();
    let read = support::kubectl_objects_of(&refs);
    let want = read[0].as_ref().expect("kubectl reads the plain injection");
    assert_eq!(want.len(), 4);
    for (i, r) in read.iter().enumerate().skip(1) {
        assert_eq!(
            r.as_ref().ok(),
            Some(want),
            "case {i}:\n{}",
            String::from_utf8_lossy(&streams[i])
        );
    }
    assert_eq!(cases, 4 * (9 + 9));
}
