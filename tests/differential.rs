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

#[path = "support/oracle.rs"]
mod oracle;

use std::path::Path;
use std::time::{Duration, Instant};

use oracle::{compare, manifest_files, oracles, report, Tally};

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
