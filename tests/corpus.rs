//! Real manifests written by others (kubernetes/examples) and the generated corpus:
//! the guard's verdict on them, fidelity of untouched objects, and that everything
//! the transformer writes passes the guard.

use crate::support;

use std::collections::BTreeSet;

use kubectl_nvcf_worker::manifest::parse_stream;
use kubectl_nvcf_worker::manifest::read::object_problem;
use support::*;

fn name(p: &std::path::Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

/// Templates that are not YAML: `{{x}}` in a value is a flow mapping used as a key,
/// which sigs.k8s.io/yaml (kubectl) refuses.
const TEMPLATES: [&str; 5] = [
    "_archived_newrelic-infrastructure_newrelic-config-template.yaml",
    "_archived_newrelic_newrelic-config-template.yaml",
    "_archived_storage_vitess_etcd-controller-template.yaml",
    "_archived_storage_vitess_etcd-service-template.yaml",
    "_archived_storage_vitess_vtgate-controller-template.yaml",
];

/// Files with a duplicate mapping key, and the key.
const DUPLICATES: [(&str, &str); 5] = [
    (
        "_archived_openshift-origin_etcd-controller.yaml",
        "selector",
    ),
    (
        "_archived_openshift-origin_etcd-discovery-controller.yaml",
        "selector",
    ),
    (
        "_archived_openshift-origin_openshift-controller.yaml",
        "selector",
    ),
    (
        "_archived_persistent-volume-provisioning_quobyte_quobyte-admin-secret.yaml",
        "type",
    ),
    ("_archived_volumes_scaleio_sc-pvc.yaml", "storageClassName"),
];

/// The two remaining `{{...}}` templates keep their placeholders inside strings, and
/// the tab-indented JSON file is valid JSON (kubectl reads `{`-led input with its JSON
/// decoder; PyYAML alone refuses the tabs): all three are well-formed.
const WELL_FORMED_LOOKALIKES: [&str; 3] = [
    "_archived_storage_vitess_vtctld-controller-template.yaml",
    "_archived_storage_vitess_vttablet-pod-template.yaml",
    "_archived_scheduler-policy_scheduler-policy-config-with-extender.json",
];

fn rejected() -> BTreeSet<String> {
    TEMPLATES
        .iter()
        .copied()
        .chain(DUPLICATES.iter().map(|(f, _)| *f))
        .map(String::from)
        .collect()
}

#[test]
fn validate_rejects_exactly_the_templates_and_duplicate_keys() {
    let dir = corpus_dir();
    let out = run(&["validate", &path_str(&dir)], "");
    out.code(1);
    let lines = finding_lines(&out);
    let mut errored = BTreeSet::new();
    for l in &lines {
        if !l.contains(": error ") {
            continue;
        }
        let (path, _) = l.split_once(':').unwrap();
        let file = name(std::path::Path::new(path));
        assert!(l.contains("error NVW001: "), "only decode errors: {l}");
        assert!(errored.insert(file.clone()), "one error per file: {l}");
        // Position: `path:line:` and the message's own `line N`.
        let line_no: u32 = l[path.len() + 1..]
            .split(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(line_no > 0, "{l}");
        assert!(l.contains(&format!("line {line_no}")), "{l}");
        if let Some((_, key)) = DUPLICATES.iter().find(|(f, _)| *f == file) {
            assert!(l.contains(&format!("duplicate key \"{key}\"")), "{l}");
        } else {
            assert!(TEMPLATES.contains(&file.as_str()), "unexpected error: {l}");
            assert!(l.contains("mapping key"), "{l}");
        }
    }
    assert_eq!(errored, rejected(), "the files with errors\n{out}");
    for f in WELL_FORMED_LOOKALIKES {
        assert!(!out.stdout.contains(f), "{f} is well-formed\n{out}");
    }
    assert!(
        summary(&out).starts_with("10 errors, ") && summary(&out).ends_with(" in 261 files"),
        "{}",
        summary(&out)
    );
}

/// What a file holds, as the tool will treat it.
enum Holds {
    Rejected,
    /// No document is a Kubernetes object (empty, comments only, other YAML).
    NoObjects,
    Objects(Vec<serde_json::Value>),
}

fn holds(path: &std::path::Path) -> Holds {
    let bytes = std::fs::read(path).unwrap();
    let Ok(docs) = parse_stream(&bytes) else {
        return Holds::Rejected;
    };
    let docs: Vec<_> = docs.into_iter().filter(|d| !d.is_empty()).collect();
    if docs.is_empty() || docs.iter().any(|d| object_problem(d.view()).is_some()) {
        return Holds::NoObjects;
    }
    Holds::Objects(
        docs.iter()
            .map(|d| kubectl_nvcf_worker::manifest::to_json(d.view()))
            .collect(),
    )
}

#[test]
fn objects_that_are_not_selected_come_out_as_they_went_in() {
    let rejected = rejected();
    let mut compared = 0;
    let mut outputs = Vec::new();
    for f in corpus_files() {
        let p = path_str(&f);
        let out = run(
            &[
                "inject",
                "--selector",
                "nothing=here",
                "--cluster-id",
                "c",
                "-f",
                &p,
            ],
            "",
        );
        match holds(&f) {
            Holds::Rejected => {
                assert!(rejected.contains(&name(&f)), "{p} does not parse");
                out.code(1);
                assert!(out.stdout.is_empty(), "{out}");
                assert!(out.stderr.contains(&p), "{out}");
            }
            Holds::NoObjects => {
                out.code(1);
                assert!(out.stdout.is_empty(), "{out}");
            }
            Holds::Objects(_) => {
                assert!(!rejected.contains(&name(&f)), "{p}");
                out.ok();
                assert!(!out.stdout.contains("nvcf-worker"), "{p}");
                let input = std::fs::read(&f).unwrap();
                outputs.push((p, input, out.stdout));
            }
        }
    }
    // What kubectl sends is what it would have sent for the file (both read by
    // kubectl's decoder, all files in one oracle run).
    let mut streams: Vec<&[u8]> = Vec::new();
    for (_, input, output) in &outputs {
        streams.push(input);
        streams.push(output.as_bytes());
    }
    let read = kubectl_objects_of(&streams);
    for ((p, _, output), pair) in outputs.iter().zip(read.chunks(2)) {
        let want = pair[0]
            .as_ref()
            .unwrap_or_else(|e| panic!("{p}: kubectl refuses the file: {e}"));
        let got = pair[1]
            .as_ref()
            .unwrap_or_else(|e| panic!("{p}: kubectl refuses the output: {e}\n{output}"));
        assert_eq!(got, want, "{p}: objects changed");
        compared += 1;
    }
    assert!(compared >= 240, "compared {compared} files");
    // The tab-indented JSON file reads as JSON does.
    let f = corpus_dir().join(WELL_FORMED_LOOKALIKES[2]);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
    match holds(&f) {
        Holds::Objects(v) => assert_eq!(v, vec![json]),
        _ => panic!("{} holds an object", f.display()),
    }
}

#[test]
fn everything_selected_output_passes_the_guard() {
    let mut injected = 0;
    let mut conflicts = Vec::new();
    let mut candidates = 0;
    for f in corpus_files() {
        let Holds::Objects(_) = holds(&f) else {
            continue;
        };
        candidates += 1;
        let p = path_str(&f);
        let out = run(
            &[
                "inject",
                "--selector",
                "!nothing",
                "--cluster-id",
                "c",
                "-f",
                &p,
            ],
            "",
        );
        if out.code != 0 {
            // A conflict in a real file is acceptable only as a reported error.
            out.code(1);
            assert!(out.stdout.is_empty(), "{out}");
            assert!(out.stderr.contains(": error"), "{p}\n{out}");
            conflicts.push(name(&f));
            continue;
        }
        injected += 1;
        let v = validate_stdin(&out.stdout);
        assert_eq!(v.code, 0, "{p}: inject output must pass the guard\n{v}");
        assert!(!v.stdout.contains(": error "), "{p}\n{v}");
        // Idempotent on real files too.
        let again = run(
            &[
                "inject",
                "--selector",
                "!nothing",
                "--cluster-id",
                "c",
                "-f",
                "-",
            ],
            &out.stdout,
        );
        again.ok();
        assert_eq!(
            again.stdout, out.stdout,
            "{p}: second inject changes the output"
        );
    }
    assert!(
        injected * 10 >= candidates * 9,
        "inject succeeds on most files: {injected} of {candidates}; conflicts: {conflicts:?}"
    );
    assert!(injected >= 200, "{injected}");
}

#[test]
fn generated_corpus_injects_cleanly_and_idempotently() {
    let stream = generated_corpus(300, &[]);
    let input = objects(&stream);
    let selected = input
        .iter()
        .filter(|o| {
            o["metadata"]["labels"]["nvcf.io/worker"] == "true"
                || o.to_string().contains("\"nvcf.io/worker\":\"true\"")
        })
        .count();
    assert!(
        selected >= 100,
        "every third workload is selected: {selected}"
    );
    let out = inject_per_workload(&stream, &[]);
    out.ok();
    let objs = objects(&out.stdout);
    assert_eq!(
        objs.len(),
        input.len() + 3 * selected,
        "a trio per selected workload"
    );
    let generated = objs
        .iter()
        .filter(|o| o["kind"] == "ServiceAccount")
        .count();
    assert_eq!(generated, selected);
    let v = validate_stdin(&out.stdout);
    v.ok();
    assert_eq!(v.stdout, "0 errors, 0 warnings in 1 file\n");
    let again = inject_per_workload(&out.stdout, &[]);
    again.ok();
    assert_eq!(again.stdout, out.stdout, "idempotent");
    // Through the KRM function too.
    let list = generated_corpus(60, &["--resource-list"]);
    let with_cfg = format!(
        "{}functionConfig:\n{}",
        list.trim_end().to_string() + "\n",
        indent(
            &configmap_config(&[("naming", "per-workload"), ("clusterID", "c")]),
            2
        )
    );
    let k = krm(&with_cfg);
    k.ok();
    let again = krm(&k.stdout);
    again.ok();
    assert_eq!(again.stdout, k.stdout);
    let its = items(&rl(&k));
    // Each item as a JSON document of a YAML stream: it starts with `---`, as
    // kubectl 1.32 reads a stream that starts with `{` as JSON only.
    let v = validate_stdin(
        &its.iter()
            .map(|i| "---\n".to_string() + &serde_json::to_string(i).unwrap() + "\n")
            .collect::<String>(),
    );
    v.ok();
    assert!(v.stdout.starts_with("0 errors"), "{v}");
}
