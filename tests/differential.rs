//! The tool's view of manifests against kubectl's own decoder.
//!
//! `scripts/build-oracle.sh` builds `tests/go/oracle` (k8s.io/cli-runtime's resource
//! builder in local mode, as `kubectl apply -f` uses it) for kubectl 1.32's modules and
//! a current release. For every input, the objects the guard examines
//! (`read::decode_like_kubectl`) must equal the oracle's, object by object; where
//! kubectl reports an error the tool must refuse the input (NVW001). The tool may also
//! refuse, deliberately, input kubectl would take in a way that hides a value
//! (duplicate keys, a key set both before and by a merge key), never accept it
//! differently; each such input is pinned, with its refusal and a reason, in
//! `tests/fixtures/differential/stricter.txt`. There is no skip: without the oracle
//! the test fails.

use crate::support::oracle;

use std::path::Path;
use std::time::{Duration, Instant};

use std::path::PathBuf;
use std::process::Command;

use kubectl_nvcf_worker::manifest::read::decode_like_kubectl;
use oracle::{compare, manifest_files, oracles, report, report_as, Judge, PinInput, Tally};
use serde_json::Value;

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
    // Found by feeding the hostile inputs to the oracle: go-yaml v2 decodes a key by
    // YAML 1.1 (bool, int, float, null) and sigs.k8s.io/yaml formats it as a string;
    // a null key does not decode.
    ("null key", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  ~: a\n"),
    ("Null key", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  Null: a\n"),
    ("empty key", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  ? \n  : a\n"),
    ("YAML 1.1 keys", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  yes: a\n  0777: b\n  1.50: c\n  0x1F: d\n  2001-12-14: e\n  1e3: g\n  -0: h\n  +12: i\n  0b101: j\n  'no': m\n"),
    ("keys equal once decoded", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  1e3: a\n  1_000: b\n"),
    ("merged key equal once decoded", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  <<: {yes: a}\n  'true': b\n"),
    ("inf key", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  .inf: f\n"),
    ("bool key equal to a string key", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  yes: a\n  'true': b\n"),
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
        match rng.next() % 7 {
            // Replace a key with an ambiguous scalar (keys are read by YAML 1.1 too).
            6 => {
                let l = lines[i].clone();
                let body = l.trim_start_matches(' ').trim_start_matches("- ");
                if let Some(colon) = body.find(": ") {
                    let lead = &l[..l.len() - body.len()];
                    lines[i] = format!("{lead}{}: {}", rng.pick(SCALARS), &body[colon + 2..]);
                }
            }
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
    report_as("fuzz", &tally, Judge::Shape);
}

/// Every pin of `tests/fixtures/differential/stricter.txt` still holds: its input is
/// taken by every kubectl release and refused by the tool as pinned (so a pin whose
/// input no test feeds any more is checked too), and no two pins name one input.
#[test]
fn every_stricter_pin_still_holds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pins = oracle::pins();
    assert!(!pins.is_empty(), "{}", oracle::PINS);
    let inputs: Vec<(String, Vec<u8>)> = pins
        .iter()
        .map(|p| match &p.input {
            PinInput::File(rel) => {
                let path = root.join(rel);
                let bytes = std::fs::read(&path).unwrap_or_else(|e| {
                    panic!("{}:{}: {}: {e}", oracle::PINS, p.line, path.display())
                });
                (path.display().to_string(), bytes)
            }
            PinInput::Class(c) => {
                let (_, text) = CLASSES
                    .iter()
                    .find(|(n, _)| n == c)
                    .unwrap_or_else(|| panic!("{}:{}: no class {c:?}", oracle::PINS, p.line));
                (format!("class: {c}"), text.as_bytes().to_vec())
            }
            PinInput::Bytes(b) => (format!("pin at line {}", p.line), b.clone()),
        })
        .collect();
    for (i, p) in pins.iter().enumerate() {
        let same: Vec<usize> = pins[..i]
            .iter()
            .filter(|q| q.names(&inputs[i].0, &inputs[i].1))
            .map(|q| q.line)
            .collect();
        assert!(
            same.is_empty(),
            "{}:{}: the input of the pin(s) at {same:?} again",
            oracle::PINS,
            p.line
        );
    }
    let mut tally = Tally::default();
    compare(&oracles(), &inputs, &mut tally);
    assert_eq!(
        tally.stricter_inputs.len(),
        pins.len(),
        "every pinned input is refused only by the tool"
    );
    report("stricter pins", &tally);
}

/// A no-op exec function that keeps what kpt hands it.
fn capture_script(dir: &Path, capture: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("capture.sh");
    std::fs::write(&script, format!("#!/bin/sh\ntee '{}'\n", capture.display())).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// kpt's own annotations on what it hands a function (not in the user's files).
fn drop_kpt_annotations(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        if let Some(ann) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            ann.retain(|k, _| {
                !k.starts_with("internal.config.kubernetes.io/")
                    && k != "config.k8s.io/id"
                    && !matches!(
                        k.strip_prefix("config.kubernetes.io/"),
                        Some(
                            "path"
                                | "index"
                                | "id"
                                | "seqindent"
                                | "annotations-migration-resource-id"
                        )
                    )
            });
            if ann.is_empty() {
                meta.remove("annotations");
            }
        }
        // kpt adds `metadata` to hold its annotations where a file had none.
        if meta.is_empty() {
            v.as_object_mut().unwrap().remove("metadata");
        }
    }
    v
}

/// The items of a ResourceList as the KRM function reads them (validator and
/// transformer alike): the view the guard judges under kpt.
fn krm_view(bytes: &[u8]) -> Vec<(String, Value)> {
    use kubectl_nvcf_worker::manifest::batch::{Batch, Source, SourceKind};
    use kubectl_nvcf_worker::manifest::read::default_list_items;
    let mut docs = kubectl_nvcf_worker::manifest::parse_stream(bytes)
        .unwrap_or_else(|e| panic!("the ResourceList kpt built does not parse: {e:?}"));
    for d in docs.iter_mut() {
        default_list_items(d, SourceKind::ResourceList);
    }
    let batch = Batch::new(vec![Source {
        name: "<stdin>".into(),
        kind: SourceKind::ResourceList,
        docs,
    }]);
    batch
        .objects()
        .iter()
        .map(|o| {
            // Objects inside an item (its `items`) belong to the item's file.
            let item = o.addr.item.and_then(|i| {
                batch.sources[0].docs[0]
                    .view()
                    .get("items")?
                    .items()?
                    .get(i)
            });
            let path = item
                .and_then(|i| {
                    i.str_at(&[
                        "metadata",
                        "annotations",
                        "internal.config.kubernetes.io/path",
                    ])
                })
                .unwrap_or_default()
                .to_string();
            (path, kubectl_nvcf_worker::manifest::to_json(o.node))
        })
        .collect()
}

/// What kpt hands a function (real `kpt fn eval --exec`, kyaml's reading and
/// writing, merge keys as `!!merge <<`) is read by the KRM function exactly as
/// kubectl reads those items once kpt writes them back; and where kpt's round trip
/// changes what kubectl would read from the original files, the test says so.
#[test]
fn what_kpt_hands_a_function_is_read_as_kubectl_reads_it() {
    let oracles = oracles();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut inputs = class_inputs();
    manifest_files(&root.join("examples"), &mut inputs);
    manifest_files(&root.join("tests/fixtures"), &mut inputs);
    manifest_files(&root.join("../shared/corpus/real"), &mut inputs);
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("pkg");
    std::fs::create_dir(&pkg).unwrap();
    // Files the tool refuses (as kubectl does, or deliberately) cannot be applied
    // through it either way; the rest go to kpt.
    let mut names = Vec::new();
    let mut refused_by_tool = 0;
    for (i, (name, bytes)) in inputs.iter().enumerate() {
        let ext = if name.ends_with(".json") {
            "json"
        } else {
            "yaml"
        };
        let file = format!("f{i:06}.{ext}");
        if decode_like_kubectl(name, bytes).is_ok() {
            std::fs::write(pkg.join(&file), bytes).unwrap();
        } else {
            refused_by_tool += 1;
        }
        names.push(file);
    }
    let capture = tmp.path().join("captured.yaml");
    let script = capture_script(tmp.path(), &capture);
    // kpt refuses a package with a file it cannot read as KRM resources, naming
    // it (or not: then each file is tried alone): such files never reach a
    // function; leave them out.
    let kpt = |dir: &Path| {
        let _ = std::fs::remove_file(&capture);
        let out = Command::new("kpt")
            .args(["fn", "eval"])
            .arg(dir)
            .arg("--exec")
            .arg(&script)
            .output()
            .expect("kpt is on PATH (the image has kpt 1.0)");
        if out.status.success() && capture.exists() {
            return Ok(());
        }
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    };
    let mut refused_by_kpt = Vec::new();
    let alone = tmp.path().join("alone");
    while let Err(said) = kpt(&pkg) {
        let named = names
            .iter()
            .find(|n| said.contains(n.as_str()) && pkg.join(n).exists())
            .cloned();
        eprintln!("kpt refuses the package: {said}");
        let bad: Vec<String> = match named {
            Some(n) => vec![n],
            None => names
                .iter()
                .filter(|n| pkg.join(n).exists())
                .filter(|n| {
                    let _ = std::fs::remove_dir_all(&alone);
                    std::fs::create_dir(&alone).unwrap();
                    std::fs::copy(pkg.join(n), alone.join(n)).unwrap();
                    kpt(&alone).is_err()
                })
                .cloned()
                .collect(),
        };
        assert!(!bad.is_empty(), "kpt fails, but on no file alone:\n{said}");
        for n in bad {
            std::fs::remove_file(pkg.join(&n)).unwrap();
            refused_by_kpt.push(n);
        }
        assert!(refused_by_kpt.len() < 100, "kpt refuses too much: {said}");
    }
    let captured = std::fs::read(&capture).unwrap();
    let ours: Vec<(String, Value)> = krm_view(&captured);
    let handed = |name: &str| -> Vec<Value> {
        ours.iter()
            .filter(|(path, _)| path == name)
            .map(|(_, o)| oracle::drop_null_metadata(&drop_kpt_annotations(o)))
            .collect()
    };
    // kpt writes the function's output back into the files, and kubectl applies
    // those: the function must read each item as kubectl reads it there.
    let mut tally = Tally::default();
    for o in &oracles {
        let written = oracle::run_oracle(o, &pkg, names.len());
        for (i, name) in names.iter().enumerate() {
            if !pkg.join(name).exists() {
                continue;
            }
            tally.inputs += 1;
            let (theirs, error) = &written[i];
            if let Some(e) = error {
                tally.divergences.push(format!(
                    "{} ({name}, {}): kubectl refuses the file kpt wrote back ({e}); the function read {} items",
                    inputs[i].0,
                    o.display(),
                    handed(name).len()
                ));
                continue;
            }
            let theirs: Vec<Value> = theirs.iter().map(oracle::drop_null_metadata).collect();
            tally.objects += theirs.len();
            let got = handed(name);
            if got != theirs {
                let at = got.iter().zip(&theirs).position(|(a, b)| a != b);
                tally.divergences.push(format!(
                    "{} ({name}, {}): the KRM function reads {} items, kubectl {} from the file kpt wrote; first difference at {at:?}\n tool:    {}\n kubectl: {}",
                    inputs[i].0,
                    o.display(),
                    got.len(),
                    theirs.len(),
                    at.map_or(String::new(), |i| got[i].to_string()),
                    at.map_or(String::new(), |i| theirs[i].to_string()),
                ));
            }
        }
    }
    // Where kpt's round trip changes what kubectl reads from the original file.
    let originals = oracle::run_oracle(
        &oracles[0],
        &pkg_originals(&inputs, &names, tmp.path()),
        names.len(),
    );
    let mut kpt_changes = Vec::new();
    for (i, name) in names.iter().enumerate() {
        if !pkg.join(name).exists() || originals[i].1.is_some() {
            continue;
        }
        let file: Vec<Value> = originals[i]
            .0
            .iter()
            .map(oracle::drop_null_metadata)
            .collect();
        if handed(name) != file {
            kpt_changes.push(format!("{} ({})", inputs[i].0, name));
        }
    }
    eprintln!(
        "kpt view: {} files, {} refused by the tool, {} refused by kpt, {} items handed to the function, {} file comparisons with kubectl's reading of what kpt wrote back, {} objects equal; kpt's round trip changes kubectl's reading of {} original files: {:?}",
        names.len(),
        refused_by_tool,
        refused_by_kpt.len(),
        ours.len(),
        tally.inputs,
        tally.objects,
        kpt_changes.len(),
        kpt_changes
    );
    report("kpt view", &tally);
}

/// The original files, untouched by kpt (which rewrites the package it evaluates).
fn pkg_originals(inputs: &[(String, Vec<u8>)], names: &[String], tmp: &Path) -> PathBuf {
    let dir = tmp.join("originals");
    std::fs::create_dir_all(&dir).unwrap();
    for ((_, bytes), name) in inputs.iter().zip(names) {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    dir
}

/// The kind of a refusal, as the fuzz matches it against the pins.
#[test]
fn a_refusal_shape_leaves_out_documents_positions_and_names() {
    use oracle::refusal_shape;
    assert_eq!(
        refusal_shape("document 2 (line 7): missing apiVersion"),
        "missing apiVersion"
    );
    assert_eq!(
        refusal_shape(
            "document 1: duplicate key \"selector\" (line 12; first at line 6); kubectl's strict decoding rejects it"
        ),
        refusal_shape(
            "document 3: duplicate key \"<<\" (line 7; first at line 6); kubectl's strict decoding rejects it"
        )
    );
    assert_eq!(
        refusal_shape("document 1: \".inf\" (line 5) is not a finite number"),
        "\"…\" is not a finite number"
    );
    assert_eq!(
        refusal_shape("document 1: invalid YAML: 1e3 is a number to JSON (kubectl) and a string to YAML 1.1; write it as a plain decimal (line 14, column 1)"),
        refusal_shape("document 2: invalid YAML: 1.5e+3 is a number to JSON (kubectl) and a string to YAML 1.1; write it as a plain decimal (line 1, column 9)"),
    );
    assert_ne!(
        refusal_shape("document 1: duplicate key \"a\" (line 2; first at line 1)"),
        refusal_shape("document 1: key \"a\" (line 2) is set before a merge key")
    );
}

/// An item with aliases or merge keys edited by the KRM function is written
/// anew, expanded, beside items kept as written: kubectl decodes the answer as
/// the tool reads it, the merged and aliased values are still there in the
/// edited items, and the items not edited decode as they did.
#[test]
fn krm_items_written_anew_beside_aliased_ones_decode_as_kubectl_decodes_them() {
    use crate::support::krm_diff::anchored_doc;
    let oracles = oracles();
    let item = |d: &str| {
        let body: Vec<String> = (d.lines().enumerate())
            .map(|(i, l)| format!("{}{l}\n", if i == 0 { "- " } else { "  " }))
            .collect();
        body.concat()
    };
    let mut inputs = Vec::new();
    for kinds in [&[6u8, 4, 1][..], &[1, 2, 6, 3], &[4, 6, 6, 0]] {
        let items: String = (kinds.iter().enumerate())
            .map(|(i, &k)| item(&anchored_doc(i, k)))
            .collect();
        let input = format!("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n{items}functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: fn\n  data:\n    clusterID: c1\n    selector: \"\"\n");
        let out = kubectl_nvcf_worker::krm::run_resource_list(input.as_bytes()).unwrap();
        assert_eq!(out.exit, kubectl_nvcf_worker::error::Exit::Success);
        inputs.push((format!("in {kinds:?}"), input.into_bytes()));
        inputs.push((format!("out {kinds:?}"), out.stdout));
    }
    let mut tally = Tally::default();
    compare(&oracles, &inputs, &mut tally);
    report("krm items written anew", &tally);
    let dir = tempfile::tempdir().unwrap();
    for (i, (_, bytes)) in inputs.iter().enumerate() {
        std::fs::write(dir.path().join(format!("f{i:06}.yaml")), bytes).unwrap();
    }
    let decoded = oracle::run_oracle(&oracles[1], dir.path(), inputs.len());
    for pair in decoded.chunks(2) {
        // (kubectl takes a kind ending in `List` for a list: its items.)
        let (before, after) = (&pair[0].0, &pair[1].0);
        assert!(before.len() >= 3 && pair[0].1.is_none() && pair[1].1.is_none());
        for b in before {
            let same = |a: &&Value| {
                a["kind"] == b["kind"] && a["metadata"]["name"] == b["metadata"]["name"]
            };
            let a = after.iter().find(same).expect("every item comes out");
            if b["kind"] == "ConfigMap" {
                assert_eq!(b, a, "an item not edited decodes as it did");
                continue;
            }
            let pod = a.pointer("/spec/template/spec").unwrap_or(&a["spec"]);
            let containers = pod["containers"].as_array().unwrap();
            let side = containers.iter().find(|c| c["name"] == "side");
            assert!(side.is_none_or(|c| c["image"] == "x"), "{a}");
            let labels = a.pointer("/spec/template/metadata/labels");
            assert!(labels.is_none_or(|l| l["nvcf.io/worker"] == "true"), "{a}");
            assert_ne!(b, a, "edited");
        }
    }
}
