//! kubectl's own decoder as the judge, shared by the differential, hostile-input and
//! property tests: `scripts/build-oracle.sh` builds `tests/oracle` (k8s.io/cli-runtime's
//! resource builder in local mode, as `kubectl apply -f` uses it) for kubectl 1.32's
//! modules and a current release; [`compare`] runs many inputs through both in one call
//! each and tallies every object against `read::decode_like_kubectl`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kubectl_nvcf_worker::manifest::read::decode_like_kubectl;
use serde_json::Value;

/// Errors of the tool that refuse what kubectl would take: stricter, never different.
/// (Without a server the oracle skips REST mapping; `kubectl apply` refuses an object
/// without apiVersion when it maps it, so "missing apiVersion" is no divergence.)
pub const DELIBERATE: [&str; 12] = [
    // go-yaml v2 passes invalid UTF-8 on (replaced); the tool names the byte instead.
    "invalid UTF-8",
    // `[!x, b]`: go-yaml v2 reads the tag `!x,`; refused rather than guessed.
    "a tag directly followed by `,`",
    // A null or complex key kubectl refuses too, unless a later duplicate of an
    // enclosing key replaces the mapping that holds it (go-yaml v2 keeps the last):
    // the tool refuses the duplicate key anyway, and reports the first problem.
    "null mapping key",
    "used as a mapping key",
    "is not a finite number",
    "missing apiVersion",
    "decodes to bytes that are not UTF-8 text",
    "is a number to JSON (kubectl) and a string to YAML 1.1",
    "duplicate key",
    "set before a merge key",
    "nesting deeper than",
    "aliases expand to more than",
];

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
    pub divergences: Vec<String>,
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
                (Err(e), None)
                    if *refused_by_some || DELIBERATE.iter().any(|d| e.to_string().contains(d)) =>
                {
                    tally.stricter += 1
                }
                (Err(e), None) => tally.divergences.push(format!(
                    "{name} ({which}): the tool refuses it ({e}) but kubectl sends {} objects\n{}",
                    objects.len(),
                    show()
                )),
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

pub fn report(what: &str, t: &Tally) {
    eprintln!(
        "differential {what}: {} input comparisons, {} objects equal, {} refused by both, {} refused only by the tool (deliberately stricter), {} refused by one kubectl release only, {} divergences",
        t.inputs,
        t.objects,
        t.kubectl_errors,
        t.stricter,
        t.version_dependent,
        t.divergences.len()
    );
    assert!(
        t.divergences.is_empty(),
        "{} divergences from kubectl:\n\n{}",
        t.divergences.len(),
        t.divergences.join("\n\n")
    );
}
