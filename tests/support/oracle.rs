//! kubectl's own decoder as the judge, shared by the differential, hostile-input and
//! property tests: `scripts/build-oracle.sh` builds `tests/go/oracle` (k8s.io/cli-runtime's
//! resource builder in local mode, as `kubectl apply -f` uses it) for kubectl 1.32's
//! modules and a current release; [`compare`] runs many inputs through both in one call
//! each and tallies every object against `read::decode_like_kubectl`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kubectl_nvcf_worker::manifest::read::decode_like_kubectl;
use serde_json::Value;

/// The refusals of input kubectl takes ("stricter"), pinned per input with a reason in
/// `tests/fixtures/differential/stricter.txt` (see its header); [`report`] fails on a
/// stricter refusal that no pin names and on a pin that no longer holds.
pub const PINS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/differential/stricter.txt"
);

/// Which input a pin names.
#[derive(Clone, Debug)]
pub enum PinInput {
    /// A file, by its path relative to the crate root (inputs named by their path).
    File(String),
    /// A `CLASSES` input of tests/differential.rs (named `class: <name>`).
    Class(String),
    /// The input's bytes, written in the pin (generated inputs, whose names say
    /// nothing stable).
    Bytes(Vec<u8>),
}

#[derive(Clone, Debug)]
pub struct Pin {
    pub line: usize,
    pub input: PinInput,
    /// What the tool's error says (its message contains this).
    pub refusal: String,
    pub reason: String,
}

impl Pin {
    /// Whether this pin names the input `name` with `bytes`.
    pub fn names(&self, name: &str, bytes: &[u8]) -> bool {
        match &self.input {
            PinInput::File(rel) => relative_name(name) == Some(rel.as_str()),
            PinInput::Class(c) => name.strip_prefix("class: ") == Some(c.as_str()),
            PinInput::Bytes(b) => b == bytes,
        }
    }
}

/// An input name that is a path under the crate root, relative to it.
fn relative_name(name: &str) -> Option<&str> {
    name.strip_prefix(env!("CARGO_MANIFEST_DIR"))?
        .strip_prefix('/')
}

/// The pins, read once per test process.
pub fn pins() -> &'static [Pin] {
    static PINNED: OnceLock<Vec<Pin>> = OnceLock::new();
    PINNED.get_or_init(|| {
        let text = std::fs::read_to_string(PINS).unwrap_or_else(|e| panic!("{PINS}: {e}"));
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
            .map(|(i, l)| {
                let bad = |why: &str| -> ! {
                    panic!(
                        "{PINS}:{}: {why} (input<TAB>refusal<TAB>reason): {l}",
                        i + 1
                    )
                };
                let mut parts = l.splitn(3, '\t');
                let (input, refusal, reason) = match (parts.next(), parts.next(), parts.next()) {
                    (Some(i), Some(r), Some(why)) => (i, r, why),
                    _ => bad("three fields"),
                };
                if refusal.trim().is_empty() || reason.trim().is_empty() {
                    bad("a refusal and a reason");
                }
                let input = if let Some(p) = input.strip_prefix("file:") {
                    PinInput::File(p.to_string())
                } else if let Some(c) = input.strip_prefix("class:") {
                    PinInput::Class(c.to_string())
                } else if let Some(j) = input.strip_prefix("yaml:") {
                    let text: String = serde_json::from_str(j)
                        .unwrap_or_else(|e| bad(&format!("yaml: takes a JSON string: {e}")));
                    PinInput::Bytes(text.into_bytes())
                } else if let Some(b) = input.strip_prefix("base64:") {
                    use base64::Engine;
                    PinInput::Bytes(
                        base64::engine::general_purpose::STANDARD
                            .decode(b)
                            .unwrap_or_else(|e| bad(&format!("base64: {e}"))),
                    )
                } else {
                    bad("the input is file:, class:, yaml: or base64:")
                };
                Pin {
                    line: i + 1,
                    input,
                    refusal: refusal.to_string(),
                    reason: reason.to_string(),
                }
            })
            .collect()
    })
}

/// How a new pin for an input would start (input and refusal; the reason is the
/// reviewer's to write).
fn pin_line(name: &str, bytes: &[u8], message: &str) -> String {
    let input = if let Some(rel) = relative_name(name) {
        format!("file:{rel}")
    } else if let Some(c) = name.strip_prefix("class: ") {
        format!("class:{c}")
    } else if let Ok(text) = std::str::from_utf8(bytes) {
        format!("yaml:{}", serde_json::to_string(text).unwrap())
    } else {
        use base64::Engine;
        format!(
            "base64:{}",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        )
    };
    format!("{input}\t{message}\t<why the tool refuses what kubectl takes>")
}

/// The kind of a refusal: its message without document numbers, line positions,
/// quoted text (the keys and values it names) and the numbers it names.
pub fn refusal_shape(message: &str) -> String {
    let mut out = String::new();
    let mut rest = message;
    while let Some(c) = rest.chars().next() {
        if c == '"' {
            out.push_str("\"…\"");
            rest = rest[1..].find('"').map_or("", |end| &rest[end + 2..]);
        } else if let Some(inner) = rest.strip_prefix(" (line") {
            rest = inner.find(')').map_or("", |end| &inner[end + 1..]);
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    // A number it names (`1e3 is a number to JSON`, `deeper than 64`) is no kind.
    let out: Vec<&str> = out
        .split(' ')
        .map(|w| {
            if w.contains(|c: char| c.is_ascii_digit()) {
                "#"
            } else {
                w
            }
        })
        .collect();
    let out = out.join(" ");
    let mut shape = out.as_str();
    while let Some(after) = shape.strip_prefix("document # ") {
        shape = after;
    }
    while let Some(after) = shape.strip_prefix("document ") {
        let digits = after.chars().take_while(char::is_ascii_digit).count();
        match after[digits..].strip_prefix(": ") {
            Some(r) if digits > 0 => shape = r,
            _ => break,
        }
    }
    shape.to_string()
}

/// One input the tool refuses while every kubectl release takes it.
#[derive(Clone, Debug)]
pub struct Stricter {
    pub name: String,
    pub bytes: Vec<u8>,
    /// The tool's error, without the input's name.
    pub message: String,
}

/// Both oracle binaries, built (or found in the cache) once per test process.
pub fn oracles() -> Vec<PathBuf> {
    static BUILT: OnceLock<Vec<PathBuf>> = OnceLock::new();
    BUILT.get_or_init(build).clone()
}

fn build() -> Vec<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-oracle.sh");
    let out = Command::new(&script)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "the kubectl oracle did not build ({}):\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    vec![dir.join("oracle-1.32"), dir.join("oracle-current")]
}

#[derive(Default)]
pub struct Tally {
    pub inputs: usize,
    pub objects: usize,
    pub kubectl_errors: usize,
    pub stricter: usize,
    pub version_dependent: usize,
    /// Refused by the tool and by one kubectl release (another takes it).
    pub release_refuses: usize,
    pub divergences: Vec<String>,
    /// Each input refused only by the tool, once (every release takes it).
    pub stricter_inputs: Vec<Stricter>,
    /// Every input compared, by name and bytes, for the pins that name one.
    pub compared: Vec<(String, Vec<u8>)>,
}

/// kubectl's objects (and error) per input file, from one oracle process.
pub fn run_oracle(oracle: &Path, dir: &Path, n: usize) -> Vec<(Vec<Value>, Option<String>)> {
    let out = Command::new(oracle)
        .arg("-dir")
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", oracle.display()));
    assert!(
        out.status.success(),
        "{} failed: {}",
        oracle.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut per = vec![(Vec::new(), None); n];
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let file = v["file"].as_str().unwrap();
        let i: usize = Path::new(file).file_stem().unwrap().to_str().unwrap()[1..]
            .parse()
            .unwrap();
        match v.get("error") {
            Some(e) => per[i].1 = Some(e.as_str().unwrap().to_string()),
            None => per[i].0.push(v["object"].clone()),
        }
    }
    per
}

/// Compares a batch of named inputs with every oracle (many inputs per call).
pub fn compare(oracles: &[PathBuf], inputs: &[(String, Vec<u8>)], tally: &mut Tally) {
    let dir = tempfile::tempdir().unwrap();
    if let Ok(keep) = std::env::var("NVW_DIFF_KEEP") {
        for (i, (_, bytes)) in inputs.iter().enumerate() {
            std::fs::create_dir_all(&keep).unwrap();
            std::fs::write(Path::new(&keep).join(format!("f{i:06}.yaml")), bytes).unwrap();
        }
    }
    for (i, (_, bytes)) in inputs.iter().enumerate() {
        std::fs::write(dir.path().join(format!("f{i:06}.yaml")), bytes).unwrap();
    }
    let ours: Vec<_> = inputs
        .iter()
        .map(|(name, bytes)| decode_like_kubectl(name, bytes))
        .collect();
    tally.compared.extend(inputs.iter().cloned());
    let all: Vec<_> = oracles
        .iter()
        .map(|o| run_oracle(o, dir.path(), inputs.len()))
        .collect();
    // Versions may differ; refusing what one of them refuses is no divergence.
    let refused_by_some: Vec<bool> = (0..inputs.len())
        .map(|i| all.iter().any(|per| per[i].1.is_some()))
        .collect();
    // Objects a release sends without error, to accept another release's refusal.
    let accepted_by_some: Vec<Option<Vec<Value>>> = (0..inputs.len())
        .map(|i| {
            all.iter()
                .find(|per| per[i].1.is_none())
                .map(|per| per[i].0.iter().map(drop_null_metadata).collect())
        })
        .collect();
    // Refused by the tool, taken by every release: a pin must name it (`report`).
    for (i, ((name, bytes), ours)) in inputs.iter().zip(&ours).enumerate() {
        if let (Err(e), false) = (ours, refused_by_some[i]) {
            let message = e.to_string();
            let message = message
                .strip_prefix(&format!("{name}: "))
                .unwrap_or(&message)
                .to_string();
            tally.stricter_inputs.push(Stricter {
                name: name.clone(),
                bytes: bytes.clone(),
                message,
            });
        }
    }
    for (oracle, theirs) in oracles.iter().zip(all) {
        let which = oracle.file_name().unwrap().to_string_lossy();
        for (i, ((((name, bytes), ours), (objects, error)), refused_by_some)) in inputs
            .iter()
            .zip(&ours)
            .zip(theirs)
            .zip(&refused_by_some)
            .enumerate()
        {
            tally.inputs += 1;
            let show = || String::from_utf8_lossy(&bytes[..bytes.len().min(600)]).into_owned();
            match (ours, error) {
                (Err(_), Some(_)) => tally.kubectl_errors += 1,
                // Another release takes it, and sends exactly what the tool reads.
                (Ok(got), Some(_))
                    if accepted_by_some[i].as_ref().is_some_and(|want| {
                        got.iter().map(|d| drop_null_metadata(&d.object)).eq(want.iter().cloned())
                    }) =>
                {
                    tally.version_dependent += 1
                }
                (Ok(got), Some(e)) => tally.divergences.push(format!(
                    "{name} ({which}): kubectl refuses it ({e}) but the tool accepts {} objects\n{}",
                    got.len(),
                    show()
                )),
                // Another release refuses it too: the tool agrees with that one.
                (Err(_), None) if *refused_by_some => tally.release_refuses += 1,
                // Every release takes it: pinned or not, `report` decides.
                (Err(_), None) => tally.stricter += 1,
                (Ok(got), None) => {
                    tally.objects += objects.len();
                    // kubectl drops null metadata fields, and a list item's namespace
                    // that is empty or not a string; the tool reads these as absent.
                    let got: Vec<Value> = got.iter().map(|d| drop_null_metadata(&d.object)).collect();
                    let got: Vec<&Value> = got.iter().collect();
                    let want: Vec<Value> = objects.iter().map(drop_null_metadata).collect();
                    let want: Vec<&Value> = want.iter().collect();
                    if got != want {
                        let at = got.iter().zip(&want).position(|(a, b)| a != b);
                        tally.divergences.push(format!(
                            "{name} ({which}): objects differ (tool {}, kubectl {}; first difference at object {:?})\n tool:    {}\n kubectl: {}\n{}",
                            got.len(),
                            want.len(),
                            at,
                            at.map_or(String::new(), |i| got[i].to_string()),
                            at.map_or(String::new(), |i| want[i].to_string()),
                            show()
                        ));
                    }
                }
            }
        }
    }
}

pub fn drop_null_metadata(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|k, x| {
            !x.is_null() && (k != "namespace" || x.as_str().is_some_and(|s| !s.is_empty()))
        });
    }
    v
}

pub fn manifest_files(root: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    let mut entries: Vec<_> = std::fs::read_dir(root).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            manifest_files(&p, out);
        } else if matches!(
            p.extension().and_then(|x| x.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
        }
    }
}

/// How [`report_as`] judges the inputs only the tool refuses.
#[derive(Clone, Copy, PartialEq)]
pub enum Judge {
    /// Each must be named by a pin, with its refusal (fixed input sets).
    PerInput,
    /// Each must be named by a pin, or be refused just as a pinned input is
    /// ([`refusal_shape`]): for a fuzz, whose inputs are new on every run, each
    /// kind of stricter refusal it meets is one a pin shows and gives a reason for.
    Shape,
}

pub fn report(what: &str, t: &Tally) {
    report_as(what, t, Judge::PerInput)
}

pub fn report_as(what: &str, t: &Tally, judge: Judge) {
    let pins = pins();
    let holds =
        |p: &Pin, s: &Stricter| p.names(&s.name, &s.bytes) && s.message.contains(&p.refusal);
    let mut unpinned = Vec::new();
    let (mut pinned, mut by_shape) = (0, 0);
    for s in &t.stricter_inputs {
        if pins.iter().any(|p| holds(p, s)) {
            pinned += 1;
        } else if judge == Judge::Shape
            && pins
                .iter()
                .any(|p| refusal_shape(&p.refusal) == refusal_shape(&s.message))
        {
            by_shape += 1;
        } else {
            unpinned.push(format!(
                "{}: {}\n{}",
                s.name,
                s.message,
                pin_line(&s.name, &s.bytes, &s.message)
            ));
        }
    }
    // A pin that names an input compared here must still hold for it.
    let mut stale = Vec::new();
    for p in pins {
        if let Some((name, _)) = t.compared.iter().find(|(n, b)| p.names(n, b)) {
            if !t.stricter_inputs.iter().any(|s| holds(p, s)) {
                let now = t
                    .stricter_inputs
                    .iter()
                    .find(|s| p.names(&s.name, &s.bytes))
                    .map_or("not refused only by the tool".to_string(), |s| {
                        format!("refused as: {}", s.message)
                    });
                stale.push(format!(
                    "{PINS}:{} ({name}): pinned as \"{}\", {now}",
                    p.line, p.refusal
                ));
            }
        }
    }
    eprintln!(
        "differential {what}: {} input comparisons, {} objects equal, {} refused by both, {} refused by the tool and one kubectl release, {} refused only by the tool ({} inputs: {pinned} pinned, {by_shape} refused as a pinned input is, {} unpinned), {} accepted by the tool and one kubectl release only, {} divergences",
        t.inputs,
        t.objects,
        t.kubectl_errors,
        t.release_refuses,
        t.stricter,
        t.stricter_inputs.len(),
        unpinned.len(),
        t.version_dependent,
        t.divergences.len()
    );
    assert!(
        t.divergences.is_empty(),
        "{} divergences from kubectl:\n\n{}",
        t.divergences.len(),
        t.divergences.join("\n\n")
    );
    let shown = unpinned.len().min(20);
    assert!(
        unpinned.is_empty() && stale.is_empty(),
        "{} inputs the tool refuses while kubectl takes them, not pinned in {PINS} (first {shown}; each line below starts a pin):\n\n{}\n\npins that no longer hold:\n{}",
        unpinned.len(),
        unpinned[..shown].join("\n\n"),
        stale.join("\n")
    );
}
