//! The KRM function's two ways through a ResourceList compared: its items read
//! as the documents of a stream (`Memory::Evict`) and the whole read as one tree
//! (`Memory::Hold`) must answer alike, byte for byte.

use kubectl_nvcf_worker::error::Exit;
use kubectl_nvcf_worker::krm;
use kubectl_nvcf_worker::pipeline::{self, load, Memory};
use kubectl_nvcf_worker::work::Workers;

pub fn on(memory: Memory) -> pipeline::Run {
    pipeline::Run {
        workers: Workers::new(2),
        memory,
        exits_after: false,
    }
}

/// The function's answer: stdout and exit, or the error.
pub fn answer(input: &str, memory: Memory) -> Result<(String, Exit), String> {
    krm::run_resource_list_with(&on(memory), input.as_bytes())
        .map(|o| (String::from_utf8(o.stdout).expect("UTF-8 output"), o.exit))
        .map_err(|e| e.to_string())
}

/// Whether the ResourceList's items are read as a stream (else as one tree); the
/// stream and the rest of the ResourceList then hold all of its bytes.
#[track_caller]
pub fn streams(input: &str) -> bool {
    let bytes = input.as_bytes();
    let Some(mut laid) = load::lay_out_resource_list(bytes) else {
        return false;
    };
    if load::resource_list_items(&mut laid, bytes, None, Workers::serial()).is_none() {
        return false;
    }
    assert!(
        laid.input() == bytes,
        "read as a stream, given back:\n{input}"
    );
    true
}

/// Runs both ways and compares; returns the streaming run's answer.
#[track_caller]
pub fn same(input: &str, what: &str) -> Result<(String, Exit), String> {
    let held = answer(input, Memory::Hold);
    let streamed = answer(input, Memory::Evict);
    match (&streamed, &held) {
        (Ok((s, se)), Ok((h, he))) => {
            assert_eq!(se, he, "{what}: exit");
            let at = s
                .bytes()
                .zip(h.bytes())
                .position(|(a, b)| a != b)
                .unwrap_or(s.len().min(h.len()));
            if s != h {
                std::fs::write("/tmp/krm-streamed.yaml", s).unwrap();
                std::fs::write("/tmp/krm-held.yaml", h).unwrap();
                std::fs::write("/tmp/krm-input.yaml", input).unwrap();
            }
            let line = s[..at].matches('\n').count();
            let around = |t: &str| {
                let lines: Vec<&str> = t.lines().collect();
                lines[line.saturating_sub(8)..(line + 8).min(lines.len())].join("\n")
            };
            assert!(
                s == h,
                "{what}: output differs at byte {at}, line {}:\n{}\n--- held ---\n{}",
                line + 1,
                around(s),
                around(h)
            );
        }
        _ => assert_eq!(streamed, held, "{what}: verdict"),
    }
    streamed
}

/// Kinds of document `anchored_doc` writes: how each uses anchors, aliases,
/// merge keys and tags, or fails to be an object.
pub const ANCHORED_KINDS: u8 = 8;

/// A document numbered `i` of one of `ANCHORED_KINDS` kinds: 0 a plain selected
/// pod; 1 a selected Deployment whose labels are an anchor its selector and
/// template alias; 2 a pod whose second container merges the first (kpt writes
/// the key `!!merge <<`); 3 a ConfigMap with tags (`!!str`, `!!map`, `!custom`)
/// and an alias to a tagged anchor; 4 a ConfigMap aliasing an anchor of its own
/// named as kind 1's is (`labels`); 5 an item in error (no apiVersion) with an
/// alias; 6 a selected Deployment whose pod template merges its labels (`<<:
/// *labels`) and its second container the first (`<<: *c`), as written by hand;
/// 7 a ConfigMap aliasing `labels` with no anchor of its own (read alone, it does
/// not parse; in a ResourceList it names an earlier item's).
pub fn anchored_doc(i: usize, kind: u8) -> String {
    let meta = |kind: &str, api: &str| format!("{api}kind: {kind}\nmetadata:\n  name: x{i}\n");
    match kind % ANCHORED_KINDS {
        0 => format!("{}  labels:\n    nvcf.io/worker: \"true\"\nspec:\n  containers:\n  - name: c\n    image: x\n", meta("Pod", "apiVersion: v1\n")),
        1 => format!("{}  labels: &labels\n    app: a{i}\n    nvcf.io/worker: \"true\"\nspec:\n  selector:\n    matchLabels: *labels\n  template:\n    metadata:\n      labels: *labels\n    spec:\n      containers:\n      - name: c\n        image: x\n", meta("Deployment", "apiVersion: apps/v1\n")),
        2 => format!("{}  labels:\n    nvcf.io/worker: \"true\"\nspec:\n  containers:\n  - &c\n    name: c\n    image: x\n    env: &env\n    - name: A\n      value: \"1\"\n  - !!merge <<: *c\n    name: side\n    env: *env\n", meta("Pod", "apiVersion: v1\n")),
        3 => format!("{}  labels: !!map\n    base: &b !!str x{i}\ndata:\n  a: !!str 1\n  b: *b\n  c: !custom y\n", meta("ConfigMap", "apiVersion: v1\n")),
        4 => format!("{}  labels: &labels\n    app: own\ndata: *labels\n", meta("ConfigMap", "apiVersion: v1\n")),
        5 => format!("{}  labels: &l\n    a: b\n  annotations: *l\n", meta("ConfigMap", "")),
        6 => format!("{}  labels: &labels\n    nvcf.io/worker: \"true\"\nspec:\n  selector:\n    matchLabels:\n      app: a{i}\n  template:\n    metadata:\n      labels:\n        <<: *labels\n        app: a{i}\n    spec:\n      containers:\n      - &c\n        name: c\n        image: x # the image\n      - <<: *c\n        name: side\n", meta("Deployment", "apiVersion: apps/v1\n")),
        _ => format!("{}  labels: *labels\n", meta("ConfigMap", "apiVersion: v1\n")),
    }
}
