//! Helpers shared by the rule and corpus tests: run the real binary, build KRM
//! ResourceLists, and read output back: what kubectl will see by kubectl's own
//! decoder ([`objects`], the oracle of `tests/go/oracle`), the structure of a stream
//! as written ([`docs`], [`rl`]) by the crate's own parser.
#![allow(dead_code)]

pub mod cases;
pub mod krm_diff;
#[path = "oracle.rs"]
pub mod oracle;
pub mod surface;
pub mod tricks;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use kubectl_nvcf_worker::manifest::{parse_stream, to_json};
use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_kubectl-nvcf-worker");
pub const CLUSTER: &str = "c1";
pub const AUDIENCE: &str = "nvcf-icms:c1";

/// What one run of the binary produced.
#[derive(Debug)]
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    #[track_caller]
    pub fn ok(&self) -> &Out {
        assert_eq!(self.code, 0, "expected exit 0\n{self}");
        self
    }
    #[track_caller]
    pub fn code(&self, code: i32) -> &Out {
        assert_eq!(self.code, code, "expected exit {code}\n{self}");
        self
    }
}

impl std::fmt::Display for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `cmd` with `stdin` on a pipe (written from a thread, so a large input
/// cannot deadlock against a full stdout pipe) and collects its output.
pub fn pipe(cmd: &mut Command, stdin: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the command");
    let mut pipe = child.stdin.take().expect("stdin");
    let input = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
    });
    let out = child.wait_with_output().expect("wait for the command");
    writer.join().expect("stdin writer");
    out
}

/// Runs the binary with `args` and `stdin`, in `dir` when given.
pub fn run_in(dir: Option<&Path>, args: &[&str], stdin: &[u8]) -> Out {
    let mut cmd = Command::new(BIN);
    cmd.args(args).env("RUST_BACKTRACE", "0");
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let out = pipe(&mut cmd, stdin);
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    }
}

pub fn run(args: &[&str], stdin: &str) -> Out {
    run_in(None, args, stdin.as_bytes())
}

/// `inject -f - --cluster-id c1 <extra>` on `input`.
pub fn inject(input: &str, extra: &[&str]) -> Out {
    let mut args = vec!["inject", "-f", "-", "--cluster-id", CLUSTER];
    args.extend_from_slice(extra);
    run(&args, input)
}

/// `inject -f - --cluster-id c1 --naming per-workload <extra>`: the PR #846
/// contract, one `nvcf-worker-<name>` per workload, for tests of its specifics.
pub fn inject_per_workload(input: &str, extra: &[&str]) -> Out {
    let mut args = vec!["--naming", "per-workload"];
    args.extend_from_slice(extra);
    inject(input, &args)
}

/// `inject` with only the given arguments (no cluster id added).
pub fn inject_raw(input: &str, args: &[&str]) -> Out {
    let mut a = vec!["inject", "-f", "-"];
    a.extend_from_slice(args);
    run(&a, input)
}

/// `validate -` on `input`.
pub fn validate_stdin(input: &str) -> Out {
    run(&["validate", "-"], input)
}

/// The KRM function (no subcommand) on a ResourceList.
pub fn krm(resource_list: &str) -> Out {
    run(&[], resource_list)
}

/// Indents every line of `text` by `n` spaces.
pub fn indent(text: &str, n: usize) -> String {
    let pad = " ".repeat(n);
    text.lines()
        .map(|l| {
            if l.is_empty() {
                String::new()
            } else {
                format!("{pad}{l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// A ResourceList of the documents of `stream` (block YAML) with `config` (a block
/// YAML object, or "" for none) as functionConfig.
pub fn resource_list(stream: &str, config: &str) -> String {
    let mut out = String::from("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n");
    for doc in split_docs(stream) {
        let body = indent(doc.trim_end(), 2);
        out.push_str("- ");
        out.push_str(&body[2..]);
    }
    if !config.trim().is_empty() {
        out.push_str("functionConfig:\n");
        out.push_str(&indent(config.trim_end(), 2));
    }
    out
}

/// Splits a block YAML stream on `---` lines (test inputs only).
pub fn split_docs(stream: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in stream.lines() {
        if line.trim_end() == "---" {
            docs.push(String::new());
        } else {
            let d = docs.last_mut().unwrap();
            d.push_str(line);
            d.push('\n');
        }
    }
    docs.into_iter().filter(|d| !d.trim().is_empty()).collect()
}

/// The typed function config.
pub fn typed_config(spec: &str) -> String {
    format!(
        "apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nmetadata:\n  name: cfg\nspec:\n{}",
        indent(spec.trim_end(), 2)
    )
}

/// The ConfigMap function config (`kpt fn eval -- k=v`).
pub fn configmap_config(data: &[(&str, &str)]) -> String {
    let mut s = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n");
    for (k, v) in data {
        s.push_str(&format!("  {k}: {}\n", serde_json::to_string(v).unwrap()));
    }
    s
}

/// Structural only: every non-empty document of a stream as written (a List stays
/// one document, a ResourceList stays itself), read by the crate's own parser. For
/// the KRM protocol (a ResourceList is kpt's, not kubectl's) and for the shape of
/// the text; what kubectl will see is [`objects`].
#[track_caller]
pub fn docs(yaml: &str) -> Vec<Value> {
    parse_stream(yaml.as_bytes())
        .unwrap_or_else(|e| panic!("output does not parse: {e:?}\n{yaml}"))
        .iter()
        .filter(|d| !d.is_empty())
        .map(|d| to_json(d.view()))
        .collect()
}

/// The objects `kubectl apply -f` sends for a stream, decoded by kubectl's own code
/// (the oracle, `tests/go/oracle`: Lists flattened), at kubectl 1.32 and a current
/// release, which must agree. Fails when kubectl cannot decode the stream.
#[track_caller]
pub fn objects(yaml: &str) -> Vec<Value> {
    kubectl_objects_of(&[yaml.as_bytes()])
        .pop()
        .unwrap()
        .unwrap_or_else(|e| panic!("kubectl does not decode the stream: {e}\n{yaml}"))
}

/// [`objects`] of many streams, in one oracle process per release; an `Err` is
/// kubectl's error for that stream.
#[track_caller]
pub fn kubectl_objects_of(streams: &[&[u8]]) -> Vec<Reading> {
    let runs = kubectl_by_release(streams);
    (0..streams.len())
        .map(|i| {
            let per: Vec<&Reading> = runs.iter().map(|(_, r)| &r[i]).collect();
            let agree = match (per[0], per[1]) {
                (Ok(a), Ok(b)) => a == b,
                (Err(_), Err(_)) => true,
                _ => false,
            };
            assert!(
                agree,
                "kubectl releases read the stream differently ({}: {:?}; {}: {:?}):\n{}",
                runs[0].0,
                per[0],
                runs[1].0,
                per[1],
                String::from_utf8_lossy(streams[i])
            );
            per[0].clone()
        })
        .collect()
}

/// What kubectl reads from one stream: its objects, or its error.
pub type Reading = Result<Vec<Value>, String>;

/// What each kubectl release of the oracle (`oracle-1.32`, `oracle-current`) reads
/// from each stream.
pub fn kubectl_by_release(streams: &[&[u8]]) -> Vec<(String, Vec<Reading>)> {
    let dir = tempfile::tempdir().expect("temp dir");
    for (i, bytes) in streams.iter().enumerate() {
        std::fs::write(dir.path().join(format!("f{i:06}.yaml")), bytes).unwrap();
    }
    let oracles = oracle::oracles();
    std::thread::scope(|s| {
        let handles: Vec<_> = oracles
            .iter()
            .map(|o| s.spawn(|| oracle::run_oracle(o, dir.path(), streams.len())))
            .collect();
        oracles
            .iter()
            .zip(handles)
            .map(|(o, h)| {
                let per = h
                    .join()
                    .unwrap()
                    .into_iter()
                    .map(|(objects, error)| match error {
                        Some(e) => Err(e),
                        None => Ok(objects),
                    })
                    .collect();
                (o.file_name().unwrap().to_string_lossy().into_owned(), per)
            })
            .collect()
    })
}

/// Structural only: the single ResourceList of a KRM run, by the crate's parser
/// (kpt reads it, not kubectl: kubectl would flatten its items).
#[track_caller]
pub fn rl(out: &Out) -> Value {
    let d = docs(&out.stdout);
    assert_eq!(d.len(), 1, "one ResourceList on stdout\n{out}");
    assert_eq!(d[0]["kind"], "ResourceList", "{out}");
    d.into_iter().next().unwrap()
}

pub fn items(rl: &Value) -> Vec<Value> {
    rl["items"].as_array().cloned().unwrap_or_default()
}

/// Whether a KRM run reported a result of `rule`.
pub fn has_result(out: &Out, rule: &str) -> bool {
    results(&rl(out)).iter().any(|r| r["tags"]["rule"] == rule)
}

pub fn results(rl: &Value) -> Vec<Value> {
    rl["results"].as_array().cloned().unwrap_or_default()
}

/// `Kind/name` of each object, in order.
pub fn kinds_names(objs: &[Value]) -> Vec<String> {
    objs.iter()
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap_or("?"),
                o["metadata"]["name"].as_str().unwrap_or("?")
            )
        })
        .collect()
}

#[track_caller]
pub fn find<'a>(objs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objs.iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind}/{name} in {:#?}", kinds_names(objs)))
}

/// The value at a dotted path (`spec.template.spec`).
#[track_caller]
pub fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.')
        .filter(|p| !p.is_empty())
        .fold(v, |v, k| &v[k])
}

/// The pod spec path of each handled kind.
pub fn pod_spec_path(kind: &str) -> &'static str {
    match kind {
        "Pod" => "spec",
        "PodTemplate" => "template.spec",
        "CronJob" => "spec.jobTemplate.spec.template.spec",
        _ => "spec.template.spec",
    }
}

pub fn api_version(kind: &str) -> &'static str {
    match kind {
        "Pod" | "PodTemplate" | "ReplicationController" => "v1",
        "Job" | "CronJob" => "batch/v1",
        _ => "apps/v1",
    }
}

pub const KINDS: [&str; 9] = [
    "Pod",
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "ReplicationController",
    "Job",
    "CronJob",
    "PodTemplate",
];

/// A workload of `kind` named `name` in namespace `ns` with the given pod spec body
/// (block YAML at pod-spec level), labelled for selection when `selected`.
pub fn workload(kind: &str, name: &str, ns: &str, selected: bool, pod_spec: &str) -> String {
    let labels = if selected {
        "  labels:\n    nvcf.io/worker: \"true\"\n"
    } else {
        "  labels:\n    app: plain\n"
    };
    let mut s = format!(
        "apiVersion: {}\nkind: {kind}\nmetadata:\n  name: {name}\n  namespace: {ns}\n{labels}",
        api_version(kind)
    );
    // What the API server requires beside the pod spec, so that every case is
    // an object a cluster would store (tests/faces.rs sends them to one).
    let spec = match kind {
        "Job" | "CronJob" => format!("restartPolicy: Never\n{}", pod_spec.trim_end()),
        _ => pod_spec.trim_end().to_string(),
    };
    let (prefix, depth) = match kind {
        "Pod" => ("spec:\n", 1),
        "PodTemplate" => ("template:\n  metadata:\n    labels:\n      app: x\n  spec:\n", 2),
        "CronJob" => (
            "spec:\n  schedule: \"*/5 * * * *\"\n  jobTemplate:\n    spec:\n      template:\n        metadata:\n          labels:\n            app: x\n        spec:\n",
            5,
        ),
        "Job" => (
            "spec:\n  template:\n    metadata:\n      labels:\n        app: x\n    spec:\n",
            3,
        ),
        "ReplicationController" => (
            "spec:\n  selector:\n    app: x\n  template:\n    metadata:\n      labels:\n        app: x\n    spec:\n",
            3,
        ),
        _ => (
            "spec:\n  selector:\n    matchLabels:\n      app: x\n  template:\n    metadata:\n      labels:\n        app: x\n    spec:\n",
            3,
        ),
    };
    s.push_str(prefix);
    s.push_str(&indent(&spec, depth * 2));
    s
}

pub const SIMPLE_POD: &str = "containers:\n- name: app\n  image: nginx:1.27\n";

/// Asserts the whole per-workload contract (`naming: per-workload`, account
/// `nvcf-worker-<name>`) for the workload `kind/name` in `ns` among `objs` (the
/// objects of an output), and that its trio directly precedes it.
#[track_caller]
pub fn assert_contract(objs: &[Value], kind: &str, name: &str, ns: &str, containers: &[&str]) {
    assert_contract_as(
        objs,
        kind,
        name,
        ns,
        containers,
        &format!("nvcf-worker-{name}"),
    );
}

/// The whole contract with the identity `sa_name` (`nvcf-worker` for the default
/// `naming: per-namespace`, `nvcf-worker-<name>` per workload), its trio directly
/// before the workload (the first of its namespace, per namespace).
#[track_caller]
pub fn assert_contract_as(
    objs: &[Value],
    kind: &str,
    name: &str,
    ns: &str,
    containers: &[&str],
    sa_name: &str,
) {
    let sa_name = sa_name.to_string();
    let pos = objs
        .iter()
        .position(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind}/{name} in {:?}", kinds_names(objs)));
    let names = kinds_names(objs);
    // The trio comes directly before its workload, so `kubectl apply` creates the
    // account before a Pod that needs it.
    assert!(pos >= 3, "the trio precedes {kind}/{name}: {names:?}");
    assert_eq!(
        names[pos - 3..pos],
        [
            format!("ServiceAccount/{sa_name}"),
            format!("Role/{sa_name}"),
            format!("RoleBinding/{sa_name}")
        ],
        "the trio precedes {kind}/{name} directly: {names:?}"
    );
    let w = &objs[pos];
    let (sa, role, rb) = (&objs[pos - 3], &objs[pos - 2], &objs[pos - 1]);
    for o in [sa, role, rb] {
        assert_eq!(o["metadata"]["namespace"], ns, "{o}");
    }
    assert_eq!(sa["apiVersion"], "v1");
    assert_eq!(sa["automountServiceAccountToken"], false, "{sa}");
    assert_eq!(role["apiVersion"], "rbac.authorization.k8s.io/v1");
    assert_eq!(role["rules"], serde_json::json!([]), "{role}");
    assert_eq!(
        rb["roleRef"],
        serde_json::json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": sa_name})
    );
    assert_eq!(
        rb["subjects"],
        serde_json::json!([{"kind": "ServiceAccount", "name": sa_name, "namespace": ns}])
    );
    let spec = at(w, pod_spec_path(kind));
    assert_eq!(spec["serviceAccountName"], sa_name.as_str(), "{spec}");
    assert_eq!(spec["automountServiceAccountToken"], false, "{spec}");
    let vols: Vec<&Value> = spec["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .filter(|v| v["name"] == "nvcf-worker-token")
        .collect();
    assert_eq!(vols.len(), 1, "{spec}");
    assert_eq!(
        vols[0]["projected"]["sources"],
        serde_json::json!([{"serviceAccountToken": {"audience": AUDIENCE, "expirationSeconds": 900, "path": "token"}}]),
        "{spec}"
    );
    let cs = spec["containers"].as_array().expect("containers");
    assert!(!cs.is_empty());
    for c in cs {
        let cname = c["name"].as_str().unwrap();
        let has = container_has_identity(c);
        assert_eq!(
            has,
            containers.contains(&cname),
            "container {cname} identity presence in {kind}/{name}: {c}"
        );
    }
}

/// Whether a container has the read-only token mount and both env vars.
pub fn container_has_identity(c: &Value) -> bool {
    let mount = c["volumeMounts"].as_array().is_some_and(|ms| {
        ms.iter().any(|m| {
            m["name"] == "nvcf-worker-token"
                && m["mountPath"] == "/var/run/secrets/tokens"
                && m["readOnly"] == true
        })
    });
    let env = |n: &str, v: &str| {
        c["env"]
            .as_array()
            .is_some_and(|es| es.iter().any(|e| e["name"] == n && e["value"] == v))
    };
    mount
        && env("NVCF_TOKEN_FILE_PATH", "/var/run/secrets/tokens/token")
        && env("NVCF_IDENTITY_SOURCE", "psat")
}

/// True when no container mentions the token (nothing injected into it).
pub fn container_untouched(c: &Value) -> bool {
    !c.to_string().contains("nvcf-worker-token") && !c.to_string().contains("NVCF_")
}

/// A fresh temporary directory with `files` (relative path, contents) written.
pub fn temp_tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (rel, text) in files {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
    }
    dir
}

pub fn path_str(p: &Path) -> String {
    p.display().to_string()
}

pub fn join(dir: &Path, rel: &str) -> PathBuf {
    dir.join(rel)
}

/// The finding lines of `validate` text output (every line but the summary).
pub fn finding_lines(out: &Out) -> Vec<String> {
    let lines: Vec<String> = out.stdout.lines().map(str::to_string).collect();
    assert!(!lines.is_empty(), "validate prints a summary\n{out}");
    lines[..lines.len() - 1].to_vec()
}

/// The summary line of `validate` text output.
#[track_caller]
pub fn summary(out: &Out) -> String {
    out.stdout
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no summary\n{out}"))
        .to_string()
}

/// `../shared/corpus/gen-manifests.py N --yaml [extra...]`: the benchmark corpus of
/// N workloads.
pub fn generated_corpus(n: usize, extra: &[&str]) -> String {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/gen-manifests.py");
    assert!(script.is_file(), "missing {}", script.display());
    let gen = Command::new("python3")
        .arg(&script)
        .args([n.to_string().as_str(), "--yaml"])
        .args(extra)
        .output()
        .expect("run python3");
    assert!(
        gen.status.success(),
        "{}",
        String::from_utf8_lossy(&gen.stderr)
    );
    String::from_utf8(gen.stdout).expect("UTF-8 corpus")
}

/// The real corpus (`../shared/corpus/real/kubernetes-examples`): 261 manifest files
/// written by others, read in place.
pub fn corpus_dir() -> PathBuf {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/real/kubernetes-examples");
    assert!(
        dir.is_dir(),
        "the real corpus is missing: {} (it ships beside the project in ../shared/corpus)",
        dir.display()
    );
    dir
}

/// The real corpus's files, sorted.
pub fn corpus_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("read corpus dir")
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert_eq!(files.len(), 261, "the corpus has 261 files");
    files
}
