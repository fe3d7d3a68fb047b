//! JSON stays JSON (issue 25, item 1): JSON input gives JSON output kubectl reads,
//! one object or a v1 List of all (never a List inside a List), on stdout and in the
//! files; what is written into JSON is quoted; `validate` refuses what kubectl 1.32
//! refuses to read. Every output is read by kubectl's own decoder (the oracle, both
//! releases), by the real `kubectl` (`kubectl label --local -f FILE -o name`, which
//! decodes files as `kubectl apply` does, without a cluster) and by serde_json, a
//! strict JSON parser.

use crate::support;
use crate::support::oracle;

use std::path::Path;
use std::process::Command;

use kubectl_nvcf_worker::manifest::read::decode_like_kubectl;
use oracle::{drop_null_metadata, oracles, run_oracle};
use serde_json::Value;
use support::run;

const APP: &str = r#"{
  "apiVersion": "apps/v1",
  "kind": "Deployment",
  "metadata": {"name": "app"},
  "spec": {
    "selector": {"matchLabels": {"app": "a"}},
    "template": {
      "metadata": {"labels": {"app": "a", "nvcf.io/worker": "true"}},
      "spec": {"serviceAccountName": "old", "containers": [{"name": "c", "image": "nginx"}]}
    }
  }
}
"#;

fn list_of(items: &[&str]) -> String {
    let items: Vec<String> = items
        .iter()
        .map(|i| i.trim_end().replace('\n', "\n  "))
        .collect();
    format!(
        "{{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n  {}\n]}}\n",
        items.join(",\n  ")
    )
}

const CONFIG_MAP: &str = r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"k": "v"}}"#;

/// The objects kubectl 1.32 and the current release read from `bytes`, each
/// release's error if it refuses them.
fn kubectl_reads(bytes: &[u8]) -> Vec<(String, Vec<Value>, Option<String>)> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f000000.yaml"), bytes).unwrap();
    oracles()
        .iter()
        .map(|o| {
            let mut per = run_oracle(o, dir.path(), 1);
            let (objects, error) = per.remove(0);
            (
                o.file_name().unwrap().to_string_lossy().into_owned(),
                objects.iter().map(drop_null_metadata).collect(),
                error,
            )
        })
        .collect()
}

/// `kubectl label --local -f FILE -o name`: the real kubectl decodes the file as
/// `kubectl apply -f` does and names every object, or fails.
fn kubectl_names(file: &Path) -> Result<Vec<String>, String> {
    let out = Command::new("kubectl")
        .args(["label", "--local", "-o", "name", "nvcf-test=1", "-f"])
        .arg(file)
        .output()
        .expect("kubectl (1.32) is installed");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect())
}

/// Output that must be read as JSON by everything: strict JSON, one value; both
/// kubectl releases read exactly the objects the tool reads, with no error; the
/// real kubectl names `names`; `validate` calls it clean.
#[track_caller]
fn assert_kubectl_json(what: &str, bytes: &[u8], names: &[&str]) {
    let text = String::from_utf8_lossy(bytes);
    let value: Value = serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("{what}: not one strict JSON value ({e}):\n{text}"));
    if let Some(items) = value.get("items").and_then(Value::as_array) {
        for (i, item) in items.iter().enumerate() {
            assert!(
                item.get("items").is_none(),
                "{what}: items[{i}] is a List inside a List:\n{text}"
            );
        }
    }
    let ours: Vec<Value> = decode_like_kubectl(what, bytes)
        .unwrap_or_else(|e| panic!("{what}: the tool does not read its own output: {e}\n{text}"))
        .iter()
        .map(|d| drop_null_metadata(&d.object))
        .collect();
    for (release, objects, error) in kubectl_reads(bytes) {
        assert_eq!(
            error, None,
            "{what}: kubectl ({release}) refuses it:\n{text}"
        );
        assert_eq!(
            objects, ours,
            "{what}: kubectl ({release}) reads other objects"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.json");
    std::fs::write(&file, bytes).unwrap();
    let got = kubectl_names(&file).unwrap_or_else(|e| panic!("{what}: kubectl: {e}\n{text}"));
    assert_eq!(got, names, "{what}: kubectl's objects");
    run(&["validate", file.to_str().unwrap()], "").ok();
}

const INJECTED: [&str; 4] = [
    "serviceaccount/nvcf-worker",
    "role.rbac.authorization.k8s.io/nvcf-worker",
    "rolebinding.rbac.authorization.k8s.io/nvcf-worker",
    "deployment.apps/app",
];

fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    support::temp_tree(files)
}

fn path(dir: &tempfile::TempDir, name: &str) -> String {
    dir.path().join(name).to_str().unwrap().to_string()
}

#[test]
fn one_json_object_injected_is_a_list_kubectl_reads_on_stdout_and_in_place() {
    let dir = tree(&[("app.json", APP)]);
    let app = path(&dir, "app.json");
    let out = run(&["inject", "-f", &app, "--cluster-id", "c1"], "");
    out.ok();
    assert_kubectl_json("inject -f app.json", out.stdout.as_bytes(), &INJECTED);
    // The workload is the object as written, edits in JSON: the new keys quoted.
    assert!(
        out.stdout
            .contains(r#"      "metadata": {"name": "app", "annotations": {"nvcf.io/replaced": "#),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(r#""nvcf.io/replaced": "#),
        "{}",
        out.stdout
    );

    run(&["inject", "-i", "-f", &app, "--cluster-id", "c1"], "").ok();
    let written = std::fs::read(&app).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&written),
        out.stdout,
        "-i writes what stdout shows"
    );
    assert_kubectl_json("inject -i app.json", &written, &INJECTED);

    // uninject takes it out again: the file as it was, the List inject made gone.
    let back = run(&["uninject", "-f", &app], "");
    back.ok();
    assert_eq!(back.stdout, APP);
    assert_kubectl_json(
        "uninject of the List",
        back.stdout.as_bytes(),
        &["deployment.apps/app"],
    );
    // A List the user wrote with one object stays a List.
    let one = format!(
        "{{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": [\n{}  ]\n}}\n",
        APP.lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    );
    std::fs::write(&app, &one).unwrap();
    let out = run(&["uninject", "-f", &app], "");
    out.ok();
    assert_eq!(out.stdout, one);
}

#[test]
fn a_json_object_left_alone_stays_byte_for_byte() {
    let dir = tree(&[("cm.json", CONFIG_MAP)]);
    let out = run(
        &["inject", "-f", &path(&dir, "cm.json"), "--cluster-id", "c1"],
        "",
    );
    out.ok();
    assert_eq!(out.stdout, format!("{CONFIG_MAP}\n"));
    assert_kubectl_json(
        "a ConfigMap",
        out.stdout.as_bytes(),
        &["configmap/settings"],
    );
}

#[test]
fn a_json_list_gains_quoted_keys_and_its_items() {
    let list = list_of(&[CONFIG_MAP, APP]);
    let dir = tree(&[("list.json", &list)]);
    let file = path(&dir, "list.json");
    let out = run(&["inject", "-f", &file, "--cluster-id", "c1"], "");
    out.ok();
    let mut names = vec!["configmap/settings"];
    names.extend(INJECTED);
    assert_kubectl_json("inject of a List", out.stdout.as_bytes(), &names);
    assert!(
        out.stdout.contains(r#""nvcf.io/replaced": "#),
        "{}",
        out.stdout
    );
    run(&["inject", "-i", "-f", &file, "--cluster-id", "c1"], "").ok();
    let written = std::fs::read(&file).unwrap();
    assert_kubectl_json("inject -i of a List", &written, &names);
    // Taken out again, the List is the List as written.
    let back = run(&["uninject", "-f", &file], "");
    back.ok();
    assert_eq!(back.stdout, list);
}

#[test]
fn a_list_and_another_file_are_one_list_never_a_list_inside_a_list() {
    let list = list_of(&[CONFIG_MAP]);
    let dir = tree(&[("list.json", &list), ("app.json", APP)]);
    let mut names = vec!["configmap/settings"];
    names.extend(INJECTED);
    for format in ["yaml", "json"] {
        let out = run(
            &[
                "inject",
                "-o",
                format,
                "-f",
                &path(&dir, "list.json"),
                "-f",
                &path(&dir, "app.json"),
                "--cluster-id",
                "c1",
            ],
            "",
        );
        out.ok();
        assert_kubectl_json(
            &format!("-o {format}: a List and an object"),
            out.stdout.as_bytes(),
            &names,
        );
    }
    // Two objects in two files: a List of both, each as written.
    let dir = tree(&[("a.json", CONFIG_MAP), ("b.json", APP)]);
    let out = run(
        &[
            "inject",
            "-f",
            &path(&dir, "a.json"),
            "-f",
            &path(&dir, "b.json"),
            "--cluster-id",
            "c1",
        ],
        "",
    );
    out.ok();
    let mut names = vec!["configmap/settings"];
    names.extend(INJECTED);
    assert_kubectl_json("two JSON files", out.stdout.as_bytes(), &names);
    assert!(
        out.stdout.contains(&format!("    {CONFIG_MAP},\n")),
        "{}",
        out.stdout
    );
}

#[test]
fn json_then_yaml_is_a_yaml_stream_kubectl_reads() {
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n";
    let dir = tree(&[("a.json", CONFIG_MAP), ("b.yaml", yaml)]);
    let out = run(
        &[
            "inject",
            "-f",
            &path(&dir, "a.json"),
            "-f",
            &path(&dir, "b.yaml"),
            "--cluster-id",
            "c1",
        ],
        "",
    );
    out.ok();
    assert!(out.stdout.starts_with("---\n"), "{}", out.stdout);
    let file = dir.path().join("out.yaml");
    std::fs::write(&file, &out.stdout).unwrap();
    assert_eq!(
        kubectl_names(&file).unwrap(),
        ["configmap/settings", "configmap/plain"]
    );
    for (release, objects, error) in kubectl_reads(out.stdout.as_bytes()) {
        assert_eq!(error, None, "{release}");
        assert_eq!(objects.len(), 2, "{release}");
    }
    // The YAML file's bytes are untouched.
    assert!(
        out.stdout.ends_with(&format!("---\n{yaml}")),
        "{}",
        out.stdout
    );
}

/// What the tool wrote before: kubectl 1.32 refuses each, and so must `validate`,
/// naming the file, the line and why.
#[test]
fn validate_refuses_what_kubectl_refuses_to_read_as_json() {
    let unquoted = list_of(&[&APP.replace(
        "\"metadata\": {\"name\": \"app\"}",
        "\"metadata\": {\"name\": \"app\", \"annotations\": {nvcf.io/replaced: \"x\"}}",
    )]);
    let cases: [(&str, String, u32, &str); 5] = [
        (
            "stream.json",
            format!("{CONFIG_MAP}\n---\n{APP}"),
            2,
            "not JSON",
        ),
        ("unquoted.json", unquoted, 5, "not JSON"),
        (
            "comment.json",
            format!("{CONFIG_MAP} # settings\n"),
            1,
            "not JSON",
        ),
        (
            "nested.json",
            list_of(&[&list_of(&[CONFIG_MAP])]),
            1,
            "a list inside a list",
        ),
        (
            "two.json",
            format!("{CONFIG_MAP}\n{CONFIG_MAP}\n"),
            2,
            "a second JSON value",
        ),
    ];
    for (name, text, line, why) in &cases {
        let reads = kubectl_reads(text.as_bytes());
        let (_, _, error) = &reads[0];
        // kubectl 1.32 reads two objects one after the other; the tool refuses them
        // (deliberately: it writes one object or one List per file).
        if *name != "two.json" {
            assert!(error.is_some(), "{name}: kubectl 1.32 reads it: {reads:?}");
        }
        let dir = tree(&[(name, text)]);
        let file = path(&dir, name);
        let out = run(&["validate", &file], "");
        out.code(1);
        let want = format!("{file}:{line}: error NVW001: ");
        assert!(
            out.stdout.starts_with(&want) && out.stdout.contains(why),
            "{name}: want {want}…{why}\n{out}"
        );
        // inject refuses it as well, and writes nothing.
        let out = run(&["inject", "-f", &file, "--cluster-id", "c1"], "");
        out.code(1);
        assert_eq!(out.stdout, "", "{name}");
        assert!(
            out.stderr.contains(name) && out.stderr.contains(why),
            "{name}: {out}"
        );
    }
    // A file that starts `---` is YAML to kubectl: JSON-looking YAML stays valid.
    let dir = tree(&[(
        "yaml.json",
        "---\n{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n",
    )]);
    run(&["validate", &path(&dir, "yaml.json")], "").ok();
}
