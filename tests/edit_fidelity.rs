//! Edits that keep the file: untouched input comes out byte for byte, edited
//! documents differ from their input only at the edit, and `inject --in-place`
//! rewrites all files or none (issue 11).

use crate::support;

use std::path::Path;

use kubectl_nvcf_worker::manifest::batch::{Source, SourceKind};
use kubectl_nvcf_worker::manifest::{attach_text, parse_stream, Node};
use kubectl_nvcf_worker::pipeline::sink::render_source;
use support::*;

/// A source as `inject` reads it, with any YAML (not only objects).
fn source(text: &str) -> Source {
    let mut docs = parse_stream(text.as_bytes()).unwrap();
    attach_text(&mut docs, std::sync::Arc::new(text.as_bytes().to_vec()));
    Source {
        name: "t.yaml".into(),
        kind: SourceKind::Stream,
        docs,
    }
}

fn render(source: &Source) -> String {
    String::from_utf8(render_source(&source.docs)).unwrap()
}

/// The lines of `before` missing from `after` and the lines of `after` missing from
/// `before`, as a line diff sees them.
fn changed_lines(before: &str, after: &str) -> (Vec<String>, Vec<String>) {
    let diff = similar::TextDiff::from_lines(before, after);
    let (mut removed, mut added) = (Vec::new(), Vec::new());
    for c in diff.iter_all_changes() {
        match c.tag() {
            similar::ChangeTag::Delete => removed.push(c.value().to_string()),
            similar::ChangeTag::Insert => added.push(c.value().to_string()),
            similar::ChangeTag::Equal => {}
        }
    }
    (removed, added)
}

#[test]
fn untouched_real_files_come_out_byte_identical() {
    let mut same = 0;
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
        if out.code != 0 {
            continue; // templates, duplicate keys, files without objects (tests/corpus.rs)
        }
        let input = std::fs::read_to_string(&f).unwrap();
        assert!(out.stdout == input, "{p}: output differs from the input");
        same += 1;
    }
    assert!(same >= 240, "only {same} files compared");
}

#[test]
fn selected_real_files_change_only_at_the_edit() {
    let mut edited = 0;
    for f in corpus_files() {
        let p = path_str(&f);
        let args = [
            "inject",
            "--selector",
            "!nothing",
            "--cluster-id",
            "c",
            "-f",
            &p,
        ];
        let out = run(&args, "");
        if out.code != 0 {
            continue;
        }
        let input = std::fs::read_to_string(&f).unwrap();
        // The YAML written means what the edited tree means.
        let json = run(&[&args[..], &["-o", "json"]].concat(), "");
        json.ok();
        let reread = inject_raw(
            &out.stdout,
            &[
                "--selector",
                "nothing=here",
                "--cluster-id",
                "c",
                "-o",
                "json",
            ],
        );
        reread.ok();
        assert_eq!(
            reread.stdout, json.stdout,
            "{p}: the written YAML means something else"
        );
        if out.stdout == input {
            continue;
        }
        edited += 1;
        let is_json = p.ends_with(".json");
        // JSON stays one JSON value: an object that gains its identity objects
        // becomes an item of a v1 List, as written but indented four spaces
        // (`tests/json_io.rs`); the comparison is with the object so indented.
        let list_start = "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": [\n";
        let input =
            if is_json && out.stdout.starts_with(list_start) && !input.starts_with(list_start) {
                let mut indented: String = input
                    .split_inclusive('\n')
                    .map(|l| {
                        if l.trim().is_empty() {
                            l.to_string()
                        } else {
                            format!("    {l}")
                        }
                    })
                    .collect();
                if !indented.ends_with('\n') {
                    indented.push('\n');
                }
                indented
            } else {
                input
            };
        let (removed, added) = changed_lines(&input, &out.stdout);
        for line in &removed {
            let t = line.trim_end();
            let replaced_key = [
                "serviceAccountName:",
                "serviceAccount:",
                "automountServiceAccountToken:",
            ]
            .iter()
            .any(|k| t.trim_start().starts_with(k));
            // A file's last line without a line break gets one; a JSON value gets
            // the comma before the entries added after it.
            let last_line = !line.ends_with('\n') && added.iter().any(|a| a.trim_end() == t);
            let comma = is_json && added.iter().any(|a| a.trim_end() == format!("{t},"));
            assert!(
                replaced_key || last_line || comma,
                "{p}: line removed: {line:?}"
            );
        }
        // Every comment survives.
        for c in input.lines().filter(|l| l.trim_start().starts_with('#')) {
            assert!(out.stdout.contains(c), "{p}: comment lost: {c}");
        }
    }
    assert!(edited >= 100, "only {edited} files edited");
}

#[test]
fn inserted_entries_follow_the_list_style_and_comments_stay() {
    let input = "\
# header comment
apiVersion: apps/v1   # trailing
kind: Deployment
metadata:
  name: web
  labels:
    nvcf.io/worker: \"true\"
spec:
  template:
    spec:
      # the containers
      containers:
        - name: app   # main
          image: 'nginx'
          args: [a, \"b\"]
      restartPolicy: Always
";
    let out = inject_per_workload(input, &[]);
    out.ok();
    let (removed, added) = changed_lines(input, &out.stdout);
    assert!(removed.is_empty(), "{removed:?}\n{}", out.stdout);
    // Items join the indented list style of `containers`, keys its mapping.
    assert!(
        added.contains(&"          volumeMounts:\n".to_string())
            && added.contains(&"            - name: nvcf-worker-token\n".to_string())
            && added.contains(&"      serviceAccountName: nvcf-worker-web\n".to_string())
            && added.contains(&"        - name: nvcf-worker-token\n".to_string()),
        "{added:?}"
    );
    // The header comment stays on top, the trio comes before the workload; the
    // file started without `---`, and still does.
    assert!(
        out.stdout
            .starts_with("# header comment\napiVersion: v1\nkind: ServiceAccount\n"),
        "{}",
        out.stdout
    );
    let kinds: Vec<String> = objects(&out.stdout)
        .iter()
        .map(|o| o["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        ["ServiceAccount", "Role", "RoleBinding", "Deployment"]
    );
}

/// A list item may start on the line after its `-`, with comments between: the
/// item is found there, so an edit inside it is spliced (it was written anew with
/// the whole document, every comment of it dropped), and `uninject` gives the
/// input back. A look-alike: a comment line at the items' own column between two
/// items stays where it is.
#[test]
fn list_items_headed_by_comments_are_spliced() {
    let input = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web # the web
  labels:
    nvcf.io/worker: \"true\"
spec:
  template:
    spec:
      containers:
      - # the app
        # more about it

        name: app
        image: nginx
      # between the two
      -
        name: side # sidecar
        image: busybox
";
    for crlf in [false, true] {
        let input = match crlf {
            true => input.replace('\n', "\r\n"),
            false => input.to_string(),
        };
        let out = inject(&input, &[]);
        out.ok();
        let (removed, _) = changed_lines(&input, &out.stdout);
        assert!(
            removed.is_empty(),
            "crlf {crlf}: {removed:?}\n{}",
            out.stdout
        );
        let objs = objects(&out.stdout);
        let kinds: Vec<&str> = objs.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            ["ServiceAccount", "Role", "RoleBinding", "Deployment"]
        );
        let containers = &objs[3]["spec"]["template"]["spec"]["containers"];
        for c in containers.as_array().unwrap() {
            assert_eq!(c["volumeMounts"][0]["name"], "nvcf-worker-token", "{c}");
        }
        let back = run(&["uninject", "-f", "-"], &out.stdout);
        back.ok();
        assert_eq!(back.stdout, input, "crlf {crlf}");
    }
}

#[test]
fn replaced_keys_keep_their_line_and_crlf_and_bom_stay() {
    let input = "\u{feff}apiVersion: v1\r\nkind: Pod\r\nmetadata:\r\n  name: p\r\n  labels: {nvcf.io/worker: \"true\"}\r\nspec:\r\n  serviceAccountName: other # was\r\n  automountServiceAccountToken: true\r\n  containers:\r\n  - name: c\r\n    image: x\r\n";
    let out = inject_per_workload(input, &[]);
    out.ok();
    let body = &out.stdout[out.stdout.rfind("---\n").unwrap() + 4..];
    assert!(out.stdout.starts_with('\u{feff}'), "{:?}", out.stdout);
    assert!(
        // The replaced value's comment went with it (issue 25 item 9).
        body.contains("  serviceAccountName: nvcf-worker-p\r\n"),
        "{body:?}"
    );
    assert!(
        body.contains("  automountServiceAccountToken: false\r\n"),
        "{body:?}"
    );
    assert!(
        body.contains("    volumeMounts:\r\n    - name: nvcf-worker-token\r\n"),
        "{body:?}"
    );
    assert!(
        !body.replace("\r\n", "").contains('\n'),
        "a bare line break: {body:?}"
    );
}

#[test]
fn untouched_documents_beside_an_edited_one_stay_byte_identical() {
    let input = "\
apiVersion: v1
kind: ConfigMap
metadata: {name: a}
data:
  k: |
    text\twith tab   
  m: >-
    folded
    lines
---
# only a comment

...
---
apiVersion: v1
kind: Pod
metadata:
  name: p
  labels:
    nvcf.io/worker: \"true\"
spec:
  containers:
  - name: c
    image: x
...
";
    let out = inject(input, &[]);
    out.ok();
    let (removed, _) = changed_lines(input, &out.stdout);
    assert!(removed.is_empty(), "{removed:?}");
    assert!(out
        .stdout
        .starts_with(&input[..input.find("---\napiVersion: v1\nkind: Pod").unwrap()]));
}

/// Builds a batch from `text`, edits its first document with `edit`, and returns
/// the written text.
fn edited(text: &str, edit: impl FnOnce(&mut Node)) -> String {
    let mut src = source(text);
    edit(src.docs[0].edit());
    render(&src)
}

#[test]
fn removed_entries_and_items_lose_only_their_lines() {
    let input = "\
kind: Pod # k
spec:
  serviceAccountName: x   # remove me
  containers:
  - name: a
    env:
    - name: KEEP
      value: \"1\"
    - name: DROP
      value: \"2\"
  # trailing comment
  volumes:
  - name: v
";
    let out = edited(input, |root| {
        let spec = root.get_mut("spec").unwrap();
        spec.entries_mut()
            .unwrap()
            .retain(|(k, _)| k.text() != Some("serviceAccountName"));
        let c = &mut spec.get_mut("containers").unwrap().items_mut().unwrap()[0];
        c.get_mut("env").unwrap().items_mut().unwrap().remove(1);
    });
    let (removed, added) = changed_lines(input, &out);
    assert!(added.is_empty(), "{added:?}");
    assert_eq!(
        removed,
        [
            "  serviceAccountName: x   # remove me\n",
            "    - name: DROP\n",
            "      value: \"2\"\n"
        ]
    );
    // The first entry of a list item: the next key takes its place after `- `.
    let out = edited(input, |root| {
        let c = &mut root
            .path_mut(&["spec", "containers"])
            .unwrap()
            .items_mut()
            .unwrap()[0];
        c.entries_mut().unwrap().remove(0);
    });
    assert!(
        out.contains("  containers:\n  - env:\n    - name: KEEP\n"),
        "{out}"
    );
    // Re-inserted where it was removed.
    let out = edited(input, |root| {
        let spec = root.get_mut("spec").unwrap();
        let entries = spec.entries_mut().unwrap();
        let at = entries
            .iter()
            .position(|(k, _)| k.text() == Some("serviceAccountName"))
            .unwrap();
        entries.remove(at);
        entries.insert(
            at,
            (Node::string("serviceAccountName"), Node::string("other")),
        );
    });
    let (removed, added) = changed_lines(input, &out);
    assert_eq!(removed, ["  serviceAccountName: x   # remove me\n"]);
    assert_eq!(added, ["  serviceAccountName: other\n"]);
    // Everything removed from a list: it becomes `[]`.
    let out = edited(input, |root| {
        root.path_mut(&["spec", "volumes"])
            .unwrap()
            .items_mut()
            .unwrap()
            .clear();
    });
    assert!(
        out.ends_with("  # trailing comment\n  volumes: []\n"),
        "{out}"
    );
}

#[test]
fn removed_documents_take_their_separator() {
    let input = "# top\napiVersion: v1\nkind: A\n---\n# about b\napiVersion: v1\nkind: B\n---\napiVersion: v1\nkind: C\n";
    let mut src = source(input);
    src.docs.remove(1);
    assert_eq!(
        render(&src),
        "# top\napiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: C\n"
    );
    // The first document removed: the file's head (its comments, no `---` since it
    // had none) stays on top, the separator of the removed document goes.
    let mut src = source(input);
    src.docs.remove(0);
    assert_eq!(
        render(&src),
        "# top\n# about b\napiVersion: v1\nkind: B\n---\napiVersion: v1\nkind: C\n"
    );
    // After a leading `---` the comments are the removed document's own.
    let marked = format!("---\n{input}");
    let mut src = source(&marked);
    src.docs.remove(0);
    assert_eq!(
        render(&src),
        "---\n# about b\napiVersion: v1\nkind: B\n---\napiVersion: v1\nkind: C\n"
    );
    let mut src = source(input);
    src.docs.remove(2);
    assert_eq!(
        render(&src),
        "# top\napiVersion: v1\nkind: A\n---\n# about b\napiVersion: v1\nkind: B\n"
    );
}

#[test]
fn a_flow_collection_that_grows_is_extended_in_place() {
    let input = "a: {x: 1, y: [1, 2]}   # c\nb:\n  c: 1\n";
    let out = edited(input, |root| {
        root.get_mut("a").unwrap().set("z", Node::string("new"));
        root.path_mut(&["a", "y"])
            .unwrap()
            .items_mut()
            .unwrap()
            .push(Node::string("3"));
    });
    assert_eq!(
        out,
        "a: {x: 1, y: [1, 2, \"3\"], z: new}   # c\nb:\n  c: 1\n"
    );
    // A flow mapping that loses an entry is written anew, that node only.
    let out = edited(input, |root| {
        root.get_mut("a").unwrap().entries_mut().unwrap().remove(0);
    });
    assert_eq!(out, "a: {y: [1, 2]}   # c\nb:\n  c: 1\n");
}

#[test]
fn documents_with_aliases_edited_in_their_expanded_form_are_written_anew() {
    let input = "# keep\nbase: &b {x: 1}\nm:\n  <<: *b\n  w: 2\n";
    let out = edited(input, |root| {
        root.get_mut("m").unwrap().set("z", Node::string("3"));
    });
    let reread = kubectl_nvcf_worker::manifest::parse_stream(out.as_bytes()).unwrap();
    assert_eq!(
        kubectl_nvcf_worker::manifest::to_json(reread[0].view()),
        serde_json::json!({"base": {"x": 1}, "m": {"x": 1, "w": 2, "z": "3"}})
    );
}

#[test]
fn krm_items_change_only_where_edited() {
    let input = "\
apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
# a comment kpt kept
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: cm
    annotations:
      config.kubernetes.io/index: '0'
      internal.config.kubernetes.io/path: 'cm.yaml'
  data: {a: '1'}
- apiVersion: v1
  kind: Pod
  metadata:
    name: p
    labels:
      nvcf.io/worker: \"true\"
    annotations:
      config.kubernetes.io/index: '0'
      internal.config.kubernetes.io/path: 'p.yaml'
  spec:
    containers:
    - name: c
      image: x
functionConfig:
  apiVersion: v1
  kind: ConfigMap
  metadata:
    name: f
  data:
    clusterID: c
";
    let out = krm(input);
    out.ok();
    let (removed, added) = changed_lines(input, &out.stdout);
    assert!(removed.is_empty(), "{removed:?}\n{}", out.stdout);
    let its = items(&rl(&out));
    let kinds: Vec<&str> = its.iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["ConfigMap", "ServiceAccount", "Role", "RoleBinding", "Pod"]
    );
    assert!(added.iter().any(|l| l == "- apiVersion: v1\n"), "{added:?}");
}

/// kpt writes the comments heading a file after its item's `-`: an edit beside
/// such an item keeps them, and every comment of the ResourceList (it was written
/// anew whole, comments dropped, while the item's dash was looked for only on the
/// line of its first key). Uninjecting the answer gives the input back.
#[test]
fn krm_items_headed_by_comments_keep_them() {
    let input = "\
apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- # head of cm.yaml
  # more of it

  apiVersion: v1
  kind: ConfigMap
  metadata:
    name: cm # the map
    annotations:
      config.kubernetes.io/index: '0'
      internal.config.kubernetes.io/path: 'cm.yaml'
  data: {a: '1'}
- # head of p.yaml
  apiVersion: v1
  kind: Pod
  metadata:
    name: p
    labels:
      nvcf.io/worker: \"true\"
    annotations:
      config.kubernetes.io/index: '0'
      internal.config.kubernetes.io/path: 'p.yaml'
  spec:
    containers:
    - name: c # the app
      image: x
functionConfig:
  apiVersion: v1
  kind: ConfigMap
  metadata:
    name: f
  data:
    clusterID: c
";
    for crlf in [false, true] {
        let input = match crlf {
            true => input.replace('\n', "\r\n"),
            false => input.to_string(),
        };
        let out = krm(&input);
        out.ok();
        let (removed, _) = changed_lines(&input, &out.stdout);
        assert!(
            removed.is_empty(),
            "crlf {crlf}: {removed:?}\n{}",
            out.stdout
        );
        let kinds: Vec<String> = items(&rl(&out))
            .iter()
            .map(|i| i["kind"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            kinds,
            ["ConfigMap", "ServiceAccount", "Role", "RoleBinding", "Pod"]
        );
        // The answer as kpt hands it on, asked to take the identity out again.
        let answer = out.stdout.split("results:").next().unwrap();
        let nl = if crlf { "\r\n" } else { "\n" };
        let again = krm(&answer.replace(
            &format!("    clusterID: c{nl}"),
            &format!("    clusterID: c{nl}    mode: uninject{nl}"),
        ));
        again.ok();
        let back = again.stdout.split("results:").next().unwrap();
        let back = back.replace(&format!("    mode: uninject{nl}"), "");
        assert_eq!(back, input, "crlf {crlf}");
    }
}

fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    temp_tree(files)
}

fn listing(dir: &Path) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap_or_default(),
            )
        })
        .collect();
    out.sort();
    out
}

const SELECTED: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels:\n    nvcf.io/worker: \"true\"\nspec:\n  containers:\n  - name: c\n    image: x\n";

#[test]
fn in_place_rewrites_files_keeps_permissions_and_is_idempotent() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tree(&[
        ("a.yaml", SELECTED),
        (
            "b.yaml",
            "# untouched\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
        ),
    ]);
    let a = dir.path().join("a.yaml");
    std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o640)).unwrap();
    let before_b = std::fs::metadata(dir.path().join("b.yaml"))
        .unwrap()
        .modified()
        .unwrap();
    let d = path_str(dir.path());
    let diff = run(
        &[
            "inject",
            "--naming",
            "per-workload",
            "--cluster-id",
            "c",
            "--diff",
            "-f",
            &d,
        ],
        "",
    );
    assert_eq!(
        diff.code, 1,
        "--diff exits 1 when there are changes, as kubectl diff does: {diff}"
    );
    assert!(diff.stderr.contains("1 injected"), "{diff}");
    assert!(
        diff.stdout
            .contains("+  serviceAccountName: nvcf-worker-p\n"),
        "{diff}"
    );
    assert!(!diff.stdout.contains("b.yaml"), "{diff}");
    assert_eq!(
        std::fs::read_to_string(&a).unwrap(),
        SELECTED,
        "--diff writes nothing"
    );
    let quiet = run(
        &[
            "inject",
            "--naming",
            "per-workload",
            "--cluster-id",
            "c",
            "--diff",
            "-q",
            "-f",
            &d,
        ],
        "",
    );
    assert_eq!(quiet.code, 1, "{quiet}");
    assert!(quiet.stderr.is_empty(), "--quiet prints no report: {quiet}");
    assert_eq!(
        quiet.stdout, diff.stdout,
        "--quiet leaves the diff as it was"
    );
    let out = run(
        &[
            "inject",
            "--naming",
            "per-workload",
            "--cluster-id",
            "c",
            "-i",
            "-f",
            &d,
        ],
        "",
    );
    out.ok();
    assert!(out.stdout.is_empty(), "{out}");
    let again = run(
        &[
            "inject",
            "--naming",
            "per-workload",
            "--cluster-id",
            "c",
            "--diff",
            "-f",
            &d,
        ],
        "",
    );
    again.ok();
    assert!(
        again.stdout.is_empty(),
        "no changes left: no diff, exit 0: {again}"
    );
    let written = std::fs::read_to_string(&a).unwrap();
    assert_eq!(kinds_names(&objects(&written)).len(), 4, "{written}");
    assert!(
        written.contains("\n  serviceAccountName: nvcf-worker-p\n"),
        "{written}"
    );
    assert_eq!(
        std::fs::metadata(&a).unwrap().permissions().mode() & 0o777,
        0o640
    );
    assert_eq!(
        std::fs::metadata(dir.path().join("b.yaml"))
            .unwrap()
            .modified()
            .unwrap(),
        before_b,
        "an unchanged file is not rewritten"
    );
    let files = listing(dir.path());
    let again = run(
        &[
            "inject",
            "--naming",
            "per-workload",
            "--cluster-id",
            "c",
            "-i",
            "-f",
            &d,
        ],
        "",
    );
    again.ok();
    assert_eq!(listing(dir.path()), files, "idempotent");
    assert_eq!(files.len(), 2, "no temporary file left: {files:?}");
}

#[test]
fn in_place_changes_no_file_when_one_is_forged() {
    let forged = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: q\nspec:\n  serviceAccountName: nvcf-worker-other\n  containers:\n  - name: c\n    image: x\n";
    let dir = tree(&[
        ("a.yaml", SELECTED),
        ("b.yaml", SELECTED.replace("name: p", "name: r").as_str()),
        ("z.yaml", forged),
    ]);
    let files = listing(dir.path());
    let out = run(
        &[
            "inject",
            "--cluster-id",
            "c",
            "-i",
            "-f",
            &path_str(dir.path()),
        ],
        "",
    );
    assert_ne!(out.code, 0, "{out}");
    assert_eq!(
        listing(dir.path()),
        files,
        "no file changed, no temporary file"
    );
    // Stdin cannot be rewritten; -o json is not a file format.
    run(&["inject", "--cluster-id", "c", "-i", "-f", "-"], SELECTED).code(2);
    run(
        &[
            "inject",
            "--cluster-id",
            "c",
            "-i",
            "-o",
            "json",
            "-f",
            &path_str(dir.path()),
        ],
        "",
    )
    .code(2);
}

/// A write that fails for root too: the file size limit (RLIMIT_FSIZE, `ulimit -f`)
/// binds every user, and with SIGXFSZ ignored a write past it fails with EFBIG. The
/// first file's new text fits under the limit, the second's does not, so the failure
/// comes after a temporary file was written: nothing may be replaced, nothing left.
#[test]
fn in_place_leaves_no_temporary_file_when_a_write_fails() {
    let small = SELECTED;
    // A comment the rewrite keeps makes the second file's new text far larger than
    // the limit below (64 blocks: 32 KiB for sh, 64 KiB for bash).
    let big = format!(
        "# {}\n{}",
        "x".repeat(512 * 1024),
        SELECTED.replace("name: p", "name: r")
    );
    let dir = tree(&[("a.yaml", small)]);
    let other = tree(&[("b.yaml", &big)]);
    let (a_dir, b_dir) = (path_str(dir.path()), path_str(other.path()));
    let before = (listing(dir.path()), listing(other.path()));
    let args = [
        "inject",
        "--cluster-id",
        "c",
        "-i",
        "-f",
        a_dir.as_str(),
        "-f",
        b_dir.as_str(),
    ];
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"trap '' XFSZ; ulimit -f 64 && exec "$0" "$@""#)
        .arg(support::BIN)
        .args(args)
        .output()
        .expect("run sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Output that cannot be written is a problem of the run, not of its usage.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let b = path_str(&other.path().join("b.yaml"));
    assert!(
        stderr.contains(&b) && stderr.contains("too large"),
        "the error names the file that could not be written and why: {stderr}"
    );
    assert_eq!(
        (listing(dir.path()), listing(other.path())),
        before,
        "all or nothing: no file replaced, no temporary file left"
    );
    // The same run without the limit rewrites both: the failure above was the
    // limit's, on files that had something to write.
    run(&args, "").ok();
    let after = (listing(dir.path()), listing(other.path()));
    assert_eq!(after.0.len(), 1);
    assert_eq!(after.1.len(), 1);
    assert_ne!(after.0[0].1, small);
    assert_ne!(after.1[0].1, big);
    assert!(
        after.1[0].1.starts_with(&big[..1000]),
        "the comment is kept"
    );
}

#[test]
fn replace_files_is_all_or_nothing() {
    // The second target's directory does not exist: the first is not replaced.
    let dir = tree(&[("a.yaml", "a: 1\n")]);
    let a = path_str(&dir.path().join("a.yaml"));
    let missing = path_str(&dir.path().join("nope/b.yaml"));
    // Serial and on two workers (the files are written in parallel): either way
    // no file changes and no temporary file is left.
    for workers in [1, 2] {
        let err = kubectl_nvcf_worker::pipeline::sink::replace_files(
            &[(&a, b"a: 2\n"), (&missing, b"b: 2\n")],
            kubectl_nvcf_worker::work::Workers::new(workers),
        );
        assert!(err.is_err());
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "a: 1\n");
        assert_eq!(listing(dir.path()).len(), 1);
    }
}

/// fuzz `resource_list` crash-f62a82b7: after a byte order mark, the first line's
/// keys are at column 0, and what is added to the root (here `results`) is too.
#[test]
fn a_byte_order_mark_does_not_indent_what_is_added_to_the_root() {
    let input = "\u{feff}apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n";
    let out = run(&[], input);
    assert!(out.stdout.contains("\nresults:\n"), "{}", out.stdout);
    let docs = kubectl_nvcf_worker::manifest::parse_stream(out.stdout.as_bytes())
        .unwrap_or_else(|e| panic!("{e:?}\n{}", out.stdout));
    assert_eq!(docs.len(), 1);
    assert!(out.stdout.starts_with(input), "items stay as written");
}

/// fuzz `resource_list` crash-2f0db6f5: a plain scalar ending in `...` (`b:...`)
/// keeps its dots when its node is written anew; only a `...` line ends a document.
#[test]
fn a_scalar_ending_in_three_dots_keeps_them_when_written_anew() {
    let input =
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- - p:\n      b:...\n";
    let out = run(&[], input);
    assert!(out.stdout.contains("b:..."), "{}", out.stdout);
    kubectl_nvcf_worker::manifest::parse_stream(out.stdout.as_bytes())
        .unwrap_or_else(|e| panic!("{e:?}\n{}", out.stdout));
}

/// Issue 25 item 9: an empty flow collection that stays empty keeps its text and
/// line (`{ }`, `[ ]`, `{}` on the line after its key, as Helm renders
/// `resources:`) though its document is edited around it.
#[test]
fn empty_flow_collections_in_an_edited_document_stay_as_written() {
    let input = "\
spec:
  nodeSelector:
    {}
  tolerations: [ ]
  resources: { }
  affinity: {}
  name: x
";
    let out = edited(input, |root| {
        let spec = root.get_mut("spec").unwrap();
        spec.set("name", Node::string("web2"));
        spec.set("added", Node::string("z"));
    });
    assert_eq!(
        out,
        "\
spec:
  nodeSelector:
    {}
  tolerations: [ ]
  resources: { }
  affinity: {}
  name: web2
  added: z
"
    );
    // A collection that gains an entry is written anew, in flow style.
    let out = edited(input, |root| {
        root.path_mut(&["spec", "resources"])
            .unwrap()
            .set("limits", Node::string("1"));
    });
    assert!(out.contains("  resources: {limits: \"1\"}\n"), "{out}");
    assert!(
        out.contains("  nodeSelector:\n    {}\n  tolerations: [ ]\n"),
        "{out}"
    );
}

/// Issue 25 item 9: a comment after a replaced value on its line goes with it; a
/// comment on a line of its own, or after a value kept, stays.
#[test]
fn a_replaced_values_comment_goes_with_it() {
    let input = "\
spec:
  serviceAccountName: old-account   # old account\r
  # about the image
  image: nginx # kept
  plain: a#not-a-comment
";
    let out = edited(input, |root| {
        let spec = root.get_mut("spec").unwrap();
        spec.set("serviceAccountName", Node::string("nvcf-worker-web"));
        spec.set("plain", Node::string("b"));
    });
    assert_eq!(
        out,
        "\
spec:
  serviceAccountName: nvcf-worker-web\r
  # about the image
  image: nginx # kept
  plain: b
"
    );
}
