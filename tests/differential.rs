//! The tool's view of manifests against kubectl's own decoder.
//!
//! `scripts/build-oracle.sh` builds `tests/oracle` (k8s.io/cli-runtime's resource
//! builder in local mode, as `kubectl apply -f` uses it) for kubectl 1.32's modules and
//! a current release. For every input, the objects the guard examines
//! (`read::decode_like_kubectl`) must equal the oracle's, object by object; where
//! kubectl reports an error the tool must refuse the input (NVW001). The tool may also
//! refuse, deliberately, input kubectl would take in a way that hides a value
//! (duplicate keys, a key set both before and by a merge key), never accept it
//! differently. There is no skip: without the oracle the test fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kubectl_nvcf_worker::manifest::read::decode_like_kubectl;
use serde_json::Value;

/// Errors of the tool that refuse what kubectl would take: stricter, never different.
/// (Without a server the oracle skips REST mapping; `kubectl apply` refuses an object
/// without apiVersion when it maps it, so "missing apiVersion" is no divergence.)
const DELIBERATE: [&str; 8] = [
    "is not a finite number",
    "missing apiVersion",
    "decodes to bytes that are not UTF-8 text",
    "is a number to JSON (kubectl) and a string to YAML 1.1",
    "duplicate key",
    "set before a merge key",
    "nesting deeper than",
    "aliases expand to more than",
];

fn oracles() -> Vec<PathBuf> {
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
struct Tally {
    inputs: usize,
    objects: usize,
    kubectl_errors: usize,
    stricter: usize,
    version_dependent: usize,
    divergences: Vec<String>,
}

/// kubectl's objects (and error) per input file, from one oracle process.
fn run_oracle(oracle: &Path, dir: &Path, n: usize) -> Vec<(Vec<Value>, Option<String>)> {
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
fn compare(oracles: &[PathBuf], inputs: &[(String, Vec<u8>)], tally: &mut Tally) {
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

fn drop_null_metadata(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|k, x| {
            !x.is_null() && (k != "namespace" || x.as_str().is_some_and(|s| !s.is_empty()))
        });
    }
    v
}

fn manifest_files(root: &Path, out: &mut Vec<(String, Vec<u8>)>) {
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

fn report(what: &str, t: &Tally) {
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

/// Each class of divergence found (and fixed) by this test, as a small input.
pub const CLASSES: &[(&str, &str)] = &[
    // Found by the differential fuzz in CI (seed 11400714819323198485): an alias of a
    // mapping used as a key; kubectl refuses the document, the tool took it.
    ("alias of a mapping as a key", "x: &a {serviceAccountName: nvcf-worker-z}\na: &m <<\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n*a : 1\nspec:\n  *m : {automountServiceAccountToken: true}\n"),
    ("alias of a list as a key", "x: &l [nvcf-worker-z]\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n*l : 1\n"),
    ("bool tag on text that is no bool", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: p}\ndata:\n  a: !!bool yes\n    bnZjZi13b3Jr\n"),
    ("int tag on a float", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: p}\nx: !!int 1.5\n"),
    ("float tag on an int", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: p}\nx: !!float 2\n"),
    ("binary value", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  serviceAccountName: !!binary bnZjZi13b3JrZXItdmljdGlt\n"),
    ("binary key", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  !!binary c2VydmljZUFjY291bnROYW1l: nvcf-worker-x\n"),
    ("binary key equal to another key", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  serviceAccountName: a\n  !!binary c2VydmljZUFjY291bnROYW1l: nvcf-worker-x\n"),
    ("binary not base64", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  serviceAccountName: !!binary '%%%'\n"),
    ("binary block", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: p}\ndata:\n  a: !!binary |\n    bnZjZi13b3Jr\n    ZXItdmljdGlt\n"),
    ("tagged merge", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  !!merge <<: {serviceAccountName: nvcf-worker-a}\n"),
    ("verbatim merge tag", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  !<tag:yaml.org,2002:merge> <<: {serviceAccountName: nvcf-worker-a}\n"),
    ("quoted tagged merge", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  !!merge '<<': {serviceAccountName: nvcf-worker-a}\n"),
    ("quoted merge text is a key", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  '<<': {serviceAccountName: nvcf-worker-a}\n"),
    ("two merge keys", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  <<: {serviceAccountName: a}\n  <<: {serviceAccountName: nvcf-worker-b}\n"),
    ("merge list, first wins", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  <<: [{serviceAccountName: a}, {serviceAccountName: nvcf-worker-b}]\n"),
    ("explicit after merge wins", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  <<: {serviceAccountName: nvcf-worker-b}\n  serviceAccountName: a\n"),
    ("typed list without item kind", "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBindingList\nitems:\n- metadata: {name: b}\n  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n  subjects: [{kind: ServiceAccount, name: nvcf-worker-x, namespace: d}]\n"),
    ("items of any object", "apiVersion: example.com/v1\nkind: Whatever\nmetadata: {name: w}\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: q}\n  spec: {serviceAccountName: nvcf-worker-y}\n"),
    ("items null", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nitems: null\n"),
    ("items not a list", "apiVersion: v1\nkind: List\nitems: {}\n"),
    ("list without apiVersion", "kind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: e}}\n"),
    ("list in a list", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items:\n  - {apiVersion: v1, kind: ConfigMap, metadata: {name: n}}\n"),
    ("item with only kind", "apiVersion: v1\nkind: ConfigMapList\nitems:\n- {kind: Secret, metadata: {name: c}}\n"),
    ("merge-only root", "<<: {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {serviceAccountName: nvcf-worker-r}}\n"),
    ("alias key with text <<", "a: &m <<\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  *m : {automountServiceAccountToken: true}\n"),
    ("null apiGroup", "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r}\nrules:\n- apiGroups: [~]\n  resources: [serviceaccounts/token]\n  verbs: [create]\n"),
];

fn class_inputs() -> Vec<(String, Vec<u8>)> {
    CLASSES
        .iter()
        .map(|(n, s)| (format!("class: {n}"), s.as_bytes().to_vec()))
        .collect()
}

#[test]
fn fixtures_real_manifests_and_known_classes_decode_as_kubectl_decodes_them() {
    let oracles = oracles();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut inputs = class_inputs();
    manifest_files(&root.join("examples"), &mut inputs);
    manifest_files(&root.join("tests"), &mut inputs);
    manifest_files(&root.join("../shared/corpus/real"), &mut inputs);
    assert!(inputs.len() > 261, "../shared/corpus/real is missing");
    let mut tally = Tally::default();
    compare(&oracles, &inputs, &mut tally);
    report("fixtures+real+classes", &tally);
}

/// A small seeded generator (xorshift), so a failing run is reproduced by its seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[(self.next() % xs.len() as u64) as usize]
    }
}

const SCALARS: &[&str] = &[
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "True",
    "FALSE",
    "~",
    "null",
    "Null",
    "0777",
    "0o17",
    "0x1F",
    "0b101",
    "1_000",
    "+12",
    "-0",
    "012",
    "1e3",
    "1.5e+3",
    ".5",
    ".inf",
    "-.Inf",
    ".nan",
    "2001-12-14",
    "2001-12-14t21:59:43.10-05:00",
    "190:20:30",
    "'yes'",
    "\"0777\"",
    "!!str 0777",
    "!!int 0777",
    "!!bool yes",
    "!!float 1",
    "!!null ''",
    "!!binary eWVz",
    "!!binary bnZjZi13b3JrZXItYQ==",
    "!!binary '%'",
    "!!binary /w==",
    "!!timestamp 2001-12-14",
    "nvcf-worker-a",
    "\"\"",
    "[]",
    "{}",
    "*a",
    "&a x",
    "!custom x",
];

const LINES: &[&str] = &[
    "<<: {serviceAccountName: nvcf-worker-m}",
    "!!merge <<: {serviceAccountName: nvcf-worker-m}",
    "!<tag:yaml.org,2002:merge> <<: {x: 1}",
    "<<: [{a: 1}, {a: 2}]",
    "<<: *a",
    "<<: 5",
    "!!merge x: 1",
    "'<<': {a: 1}",
    "!!binary c2VydmljZUFjY291bnROYW1l: nvcf-worker-k",
    "items: []",
    "items: null",
    "items: [{metadata: {name: i}}]",
    "items: [{apiVersion: v1, kind: List, items: []}]",
    "kind: SecretList",
    "apiVersion: v1",
    "apiGroups: [~, '']",
    "x: &a {serviceAccountName: nvcf-worker-z}",
    "? &k <<\n: {a: 1}",
    "*a : 1",
];

/// One mutation of a seed, aimed at where YAML 1.1 and 1.2 readers and Lists differ.
fn mutate(rng: &mut Rng, seed: &str) -> String {
    let mut lines: Vec<String> = seed.lines().map(str::to_string).collect();
    for _ in 0..1 + rng.next() % 3 {
        if lines.is_empty() {
            lines.push(String::new());
        }
        let i = (rng.next() % lines.len() as u64) as usize;
        let indent: String = lines[i].chars().take_while(|c| *c == ' ').collect();
        match rng.next() % 6 {
            // Replace a value with an ambiguous scalar.
            0 | 1 => {
                if let Some(colon) = lines[i].find(": ") {
                    let s = rng.pick(SCALARS);
                    lines[i] = format!("{}: {s}", &lines[i][..colon]);
                }
            }
            // Insert a tricky line at the same indentation.
            2 | 3 => {
                let l = rng.pick(LINES).replace('\n', &format!("\n{indent}"));
                lines.insert(i, format!("{indent}{l}"));
            }
            // Duplicate a line (duplicate keys) or anchor its value.
            4 => {
                let l = lines[i].clone();
                if rng.next().is_multiple_of(2) {
                    lines.insert(i, l);
                } else if let Some(colon) = l.find(": ") {
                    lines[i] = format!("{}: &a {}", &l[..colon], &l[colon + 2..]);
                }
            }
            // Wrap the document into a List or a typed List.
            _ => {
                let kind = *rng.pick(&["List", "PodList", "Thing"]);
                let body: Vec<String> = lines
                    .iter()
                    .enumerate()
                    .map(|(j, l)| format!("{}{l}", if j == 0 { "- " } else { "  " }))
                    .collect();
                lines = vec![
                    format!("apiVersion: v1"),
                    format!("kind: {kind}"),
                    "items:".into(),
                ];
                lines.extend(body);
            }
        }
    }
    lines.join("\n") + "\n"
}

#[test]
fn mutated_inputs_decode_as_kubectl_decodes_them_bounded_fuzz() {
    let oracles = oracles();
    let secs: u64 = std::env::var("NVW_DIFF_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let seed: u64 = std::env::var("NVW_DIFF_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15);
    let mut seeds: Vec<String> = CLASSES.iter().map(|(_, s)| s.to_string()).collect();
    let mut real = Vec::new();
    manifest_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/real"),
        &mut real,
    );
    seeds.extend(
        real.into_iter()
            .filter(|(_, b)| b.len() < 2000)
            .filter_map(|(_, b)| String::from_utf8(b).ok()),
    );
    let mut rng = Rng(seed);
    let start = Instant::now();
    let mut tally = Tally::default();
    let mut executions = 0;
    let mut round = 0;
    while start.elapsed() < Duration::from_secs(secs) {
        let inputs: Vec<(String, Vec<u8>)> = (0..400)
            .map(|i| {
                let s = rng.pick(&seeds).clone();
                (
                    format!("fuzz seed {seed} round {round} input {i}"),
                    mutate(&mut rng, &s).into_bytes(),
                )
            })
            .collect();
        executions += inputs.len();
        compare(&oracles, &inputs, &mut tally);
        round += 1;
        if !tally.divergences.is_empty() {
            break;
        }
    }
    eprintln!("differential fuzz: seed {seed}, {executions} mutated inputs in {round} rounds of 400, {:?}", start.elapsed());
    tally.divergences.truncate(5);
    report("fuzz", &tally);
}
