//! The lifecycle after the first injection: a config change updates the
//! transformer's own output (and only its own), `uninject` takes it out and restores
//! what it replaced, and `prune` takes it out of workloads no longer selected.
//! Trio objects are found by kind and name, never by document order.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use kubectl_nvcf_worker::config::Config;
use kubectl_nvcf_worker::manifest::batch::Batch;
use kubectl_nvcf_worker::manifest::read::{load, Input};
use kubectl_nvcf_worker::pipeline::sink;
use kubectl_nvcf_worker::selector::Selector;
use kubectl_nvcf_worker::{inject, uninject};
use serde_json::{json, Value};
use support::*;

const TOKEN_VOLUME: &str = "nvcf-worker-token";

/// Editing keeps the untouched bytes of a file (issue 11), so `uninject(inject(x))`
/// must give back `x` byte for byte, not only in meaning.
const BYTE_FOR_BYTE: bool = true;

/// `after` means what `before` means (what kubectl sends for every object, by
/// kubectl's own decoder), and with `BYTE_FOR_BYTE` is the same text. The same bytes
/// mean the same to any decoder, so the oracle runs only when the bytes differ.
#[track_caller]
fn assert_gives_back(name: &str, before: &[u8], after: &[u8]) {
    if before == after {
        return;
    }
    let read = kubectl_objects_of(&[before, after]);
    let view = |i: usize| -> &Vec<Value> {
        read[i]
            .as_ref()
            .unwrap_or_else(|e| panic!("{name}: kubectl refuses it: {e}"))
    };
    assert_eq!(
        view(1),
        view(0),
        "{name}: uninject(inject(x)) differs from x\n--- x\n{}\n--- uninject(inject(x))\n{}",
        String::from_utf8_lossy(before),
        String::from_utf8_lossy(after)
    );
    if BYTE_FOR_BYTE {
        assert_eq!(
            String::from_utf8_lossy(after),
            String::from_utf8_lossy(before),
            "{name}"
        );
    }
}

/// `inject -f -` with `args`, and `--cluster-id c1` unless `args` name one.
fn inject(input: &str, args: &[&str]) -> Out {
    let mut all = vec!["inject", "-f", "-"];
    if !args.contains(&"--cluster-id") {
        all.extend(["--cluster-id", CLUSTER]);
    }
    all.extend_from_slice(args);
    run(&all, input)
}

fn uninject_cli(input: &str) -> Out {
    run(&["uninject", "-f", "-"], input)
}

const WEB: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: ns
  labels:
    nvcf.io/worker: "true"
  annotations:
    team: a
spec:
  template:
    metadata:
      labels:
        app: web
    spec:
      initContainers:
      - name: init
        image: busybox
      containers:
      - name: app
        image: nginx:1.27
      - name: side
        image: envoy
"#;

const API: &str = r#"apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: api
  namespace: ns
  labels:
    nvcf.io/worker: "true"
spec:
  template:
    spec:
      containers:
      - name: api
        image: api:1
"#;

fn token_of(objs: &[Value], kind: &str, name: &str) -> Value {
    let spec = at(find(objs, kind, name), pod_spec_path(kind));
    let vols = spec["volumes"].as_array().unwrap();
    let v = vols
        .iter()
        .find(|v| v["name"] == "nvcf-worker-token")
        .unwrap();
    v["projected"]["sources"][0]["serviceAccountToken"].clone()
}

fn container<'a>(objs: &'a [Value], list: &str, name: &str) -> &'a Value {
    at(find(objs, "Deployment", "web"), "spec.template.spec")[list]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap()
}

/// The workload runs as `account` with the token in `containers`, and the trio of
/// `account` is among the objects (wherever it is).
#[track_caller]
fn assert_identity(objs: &[Value], kind: &str, name: &str, account: &str, containers: &[&str]) {
    let spec = at(find(objs, kind, name), pod_spec_path(kind));
    assert_eq!(spec["serviceAccountName"], account);
    assert_eq!(spec["automountServiceAccountToken"], false);
    for c in spec["containers"].as_array().unwrap() {
        let want = containers.contains(&c["name"].as_str().unwrap());
        assert_eq!(container_has_identity(c), want, "{c}");
    }
    for k in ["ServiceAccount", "Role", "RoleBinding"] {
        assert!(has_object(objs, k, account), "no {k}/{account}");
    }
}

fn has_object(objs: &[Value], kind: &str, name: &str) -> bool {
    objs.iter()
        .any(|o| o["kind"] == kind && o["metadata"]["name"] == name)
}

/// Injects `input` with `first`, then runs `second` on the output: the second run
/// reports `updated` with `says`, its output passes the guard, and a third run
/// with `second` changes nothing.
#[track_caller]
fn reconciles(input: &str, first: &[&str], second: &[&str], says: &str) -> Vec<Value> {
    let one = inject(input, first);
    one.ok();
    let two = inject(&one.stdout, second);
    two.ok();
    assert!(
        two.stderr.contains(" updated: ") && two.stderr.contains(says),
        "{says}\n{two}"
    );
    assert!(!two.stderr.contains(" injected\n"), "{two}");
    let v = validate_stdin(&two.stdout);
    assert_eq!(v.code, 0, "updated output must validate clean\n{v}");
    assert!(v.stdout.contains("0 errors, 0 warnings"), "{v}");
    let three = inject(&two.stdout, second);
    three.ok();
    assert_eq!(three.stdout, two.stdout, "not idempotent after the update");
    assert!(!three.stderr.contains("updated"), "{three}");
    objects(&two.stdout)
}

#[test]
fn cluster_id_audience_and_expiry_changes_update_the_token() {
    let cases: [(&[&str], &str, &str, Value); 3] = [
        (
            &["--cluster-id", "other"],
            "audience nvcf-icms:c1 -> nvcf-icms:other",
            "audience",
            json!("nvcf-icms:other"),
        ),
        (
            &["--audience", "nvcf-icms:custom"],
            "audience nvcf-icms:c1 -> nvcf-icms:custom",
            "audience",
            json!("nvcf-icms:custom"),
        ),
        (
            &["--expiration-seconds", "3600"],
            "expirationSeconds 900 -> 3600",
            "expirationSeconds",
            json!(3600),
        ),
    ];
    let mut objs = Vec::new();
    for (args, says, field, want) in cases {
        objs = reconciles(WEB, &[], args, says);
        assert_eq!(
            token_of(&objs, "Deployment", "web")[field],
            want,
            "{args:?}"
        );
    }
    // The trio is the same objects as before.
    assert_eq!(kinds_names(&objs).len(), 4);
}

#[test]
fn init_containers_and_skipped_containers_follow_the_config() {
    let objs = reconciles(
        WEB,
        &[],
        &["--include-init-containers"],
        "token added to initContainers \"init\"",
    );
    assert!(container_has_identity(container(
        &objs,
        "initContainers",
        "init"
    )));
    let objs = reconciles(
        WEB,
        &["--include-init-containers"],
        &[],
        "token removed from initContainers \"init\" (init containers not included)",
    );
    assert!(container_untouched(container(
        &objs,
        "initContainers",
        "init"
    )));
    assert!(container_has_identity(container(
        &objs,
        "containers",
        "app"
    )));

    // A container newly skipped loses the token; one no longer skipped gets it.
    let first = inject(WEB, &[]);
    first.ok();
    let skipped = first.stdout.replace(
        "    team: a\n",
        "    team: a\n    nvcf.io/skip-containers: side\n",
    );
    assert_ne!(skipped, first.stdout);
    let two = inject(&skipped, &[]);
    two.ok();
    assert!(
        two.stderr
            .contains("updated: token removed from containers \"side\" (skipped)"),
        "{two}"
    );
    let objs = objects(&two.stdout);
    assert!(container_untouched(container(&objs, "containers", "side")));
    assert_eq!(validate_stdin(&two.stdout).code, 0);
    let three = inject(&two.stdout, &[]);
    assert_eq!(three.stdout, two.stdout);
    let unskipped = two
        .stdout
        .replace("    nvcf.io/skip-containers: side\n", "");
    let four = inject(&unskipped, &[]);
    four.ok();
    assert!(
        four.stderr
            .contains("updated: token added to containers \"side\""),
        "{four}"
    );
    assert!(container_has_identity(container(
        &objects(&four.stdout),
        "containers",
        "side"
    )));
}

#[test]
fn naming_mode_changes_move_to_the_new_identity_and_drop_the_unused_trio() {
    let input = format!("{WEB}---\n{API}");
    let objs = reconciles(
        &input,
        &["--naming", "per-workload"],
        &["--config", &naming_config("per-namespace")],
        "identity nvcf-worker-web -> nvcf-worker",
    );
    for old in ["nvcf-worker-web", "nvcf-worker-api"] {
        for kind in ["ServiceAccount", "Role", "RoleBinding"] {
            assert!(!has_object(&objs, kind, old), "{kind}/{old} left behind");
        }
    }
    for kind in ["ServiceAccount", "Role", "RoleBinding"] {
        let n = objs
            .iter()
            .filter(|o| o["kind"] == kind && o["metadata"]["name"] == "nvcf-worker")
            .count();
        assert_eq!(n, 1, "one {kind} nvcf-worker for the namespace");
    }
    let spec = at(find(&objs, "StatefulSet", "api"), "spec.template.spec");
    assert_eq!(spec["serviceAccountName"], "nvcf-worker");

    // And back: each workload its own identity again, the namespace's trio goes.
    let ns_out = inject(&input, &["--config", &naming_config("per-namespace")]);
    ns_out.ok();
    let back = inject_per_workload(&ns_out.stdout, &[]);
    back.ok();
    assert!(
        back.stderr
            .contains("identity nvcf-worker -> nvcf-worker-web"),
        "{back}"
    );
    assert!(
        back.stderr.contains("serviceaccount/nvcf-worker removed"),
        "{back}"
    );
    let objs = objects(&back.stdout);
    assert!(!has_object(&objs, "ServiceAccount", "nvcf-worker"));
    assert_identity(
        &objs,
        "Deployment",
        "web",
        "nvcf-worker-web",
        &["app", "side"],
    );
    assert_identity(&objs, "StatefulSet", "api", "nvcf-worker-api", &["api"]);
    assert_eq!(validate_stdin(&back.stdout).code, 0);
    assert_eq!(inject_per_workload(&back.stdout, &[]).stdout, back.stdout);
}

fn naming_config(naming: &str) -> String {
    let dir = std::env::temp_dir().join(format!("nvcf-reconcile-{}-{naming}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cfg.yaml");
    std::fs::write(
        &path,
        typed_config(&format!("clusterID: c1\nnaming: {naming}\n")),
    )
    .unwrap();
    path_str(&path)
}

#[test]
fn hand_written_look_alikes_stay_conflicts() {
    let injected = inject(WEB, &[]);
    injected.ok();
    // No marks on the trio: hand-written.
    let unmarked = injected.stdout.replace(
        "    app.kubernetes.io/managed-by: kubectl-nvcf-worker\n",
        "",
    );
    // What the API server adds to the token volume (defaultMode): still its output.
    let other = injected.stdout.replace(
        "              path: token\n",
        "              path: token\n          defaultMode: 420\n",
    );
    // Other content: a second projected source in the token volume.
    let two_sources = injected.stdout.replace(
        "              path: token\n",
        "              path: token\n          - configMap:\n              name: x\n",
    );
    let extra_env = injected.stdout.replacen(
        "          value: psat\n",
        "          value: psat\n        - name: NVCF_IDENTITY_SOURCE\n          value: other\n",
        1,
    );
    for (what, text) in [
        ("unmarked", &unmarked),
        ("duplicate env", &extra_env),
        ("two sources", &two_sources),
    ] {
        assert_ne!(text, &injected.stdout, "{what}");
        let out = inject(text, &["--cluster-id", "other"]);
        out.code(1);
        assert!(out.stdout.is_empty(), "{what}: {out}");
        assert!(!out.stderr.contains("updated"), "{what}: {out}");
        // uninject runs the guard on its input: a forged identity is refused,
        // nothing written.
        let u = uninject_cli(text);
        u.code(1);
        assert!(u.stdout.is_empty(), "{what}: {u}");
        assert!(u.stderr.contains("error NVW10"), "{what}: {u}");
    }
    // defaultMode is what the API server adds: still the transformer's output.
    let out = inject(&other, &["--cluster-id", "other"]);
    out.ok();
    assert!(out.stderr.contains("updated"), "{out}");
}

#[test]
fn replaced_account_and_automount_are_recorded_and_restored() {
    let cases = [
        (
            "serviceAccountName: app\nautomountServiceAccountToken: true\n",
            json!({"serviceAccountName": "app", "automountServiceAccountToken": true}),
        ),
        (
            "serviceAccount: legacy\n",
            json!({"serviceAccount": "legacy"}),
        ),
        (
            "serviceAccountName: app\nserviceAccount: app\n",
            json!({"serviceAccountName": "app", "serviceAccount": "app"}),
        ),
        // Already false: recorded so that uninject keeps it.
        (
            "automountServiceAccountToken: false\n",
            json!({"automountServiceAccountToken": false}),
        ),
        ("serviceAccount: null\n", Value::Null),
        ("", Value::Null),
    ];
    for (fields, recorded) in cases {
        let input = workload(
            "Deployment",
            "web",
            "ns",
            true,
            &format!("{fields}{SIMPLE_POD}"),
        );
        let out = inject(&input, &[]);
        out.ok();
        let objs = objects(&out.stdout);
        let annotation =
            &find(&objs, "Deployment", "web")["metadata"]["annotations"]["nvcf.io/replaced"];
        if recorded.is_null() {
            assert!(
                annotation.is_null(),
                "{fields:?}: nothing replaced, nothing recorded\n{out}"
            );
        } else {
            let got: Value = serde_json::from_str(annotation.as_str().unwrap()).unwrap();
            assert_eq!(got, recorded, "{fields:?}");
        }
        let back = uninject_cli(&out.stdout);
        back.ok();
        assert_gives_back(fields, input.as_bytes(), back.stdout.as_bytes());
        if fields.contains("app") {
            assert!(
                back.stderr.contains("restored serviceAccountName \"app\""),
                "{back}"
            );
        }
        // The annotation is the record: re-injecting the output keeps it as it is.
        let again = inject(&out.stdout, &[]);
        assert_eq!(again.stdout, out.stdout);
    }
}

/// The reverse path is guarded (issue 20): uninject, KRM `mode: uninject` and
/// prune judge the record and their input, and inject keeps no record it did not
/// write.
#[test]
fn uninject_restores_nothing_the_guard_refuses() {
    let input = workload(
        "Deployment",
        "web",
        "ns",
        true,
        &format!("serviceAccountName: app\n{SIMPLE_POD}"),
    );
    let injected = inject(&input, &[]);
    injected.ok();
    let forged = injected.stdout.replace(
        r#"{\"serviceAccountName\":\"app\"}"#,
        r#"{\"serviceAccountName\":\"nvcf-worker-victim\",\"automountServiceAccountToken\":true}"#,
    );
    assert_ne!(forged, injected.stdout);
    let u = uninject_cli(&forged);
    u.code(1);
    assert!(u.stdout.is_empty(), "{u}");
    assert!(u.stderr.contains("error NVW116"), "{u}");
    let v = run(&["validate", "-"], &forged);
    v.code(1);
    assert!(v.stdout.contains("NVW116"), "{v}");
    // The KRM function: the items come back as they went in, with the result.
    let rl_in = resource_list(&forged, &configmap_config(&[("mode", "uninject")]));
    let k = krm(&rl_in);
    k.code(1);
    assert!(k.stdout.starts_with(rl_in.trim_end()), "{k}");
    assert!(
        results(&rl(&k))
            .iter()
            .any(|r| r["tags"]["rule"] == "NVW116"),
        "{k}"
    );
    // Prune of a deselected workload reads the same record.
    let p = inject(&deselect(&forged), &["--prune"]);
    p.code(1);
    assert!(p.stderr.contains("NVW116"), "{p}");
    // The look-alike: inject's own record restores what it replaced.
    let back = uninject_cli(&injected.stdout);
    back.ok();
    assert_gives_back("own record", input.as_bytes(), back.stdout.as_bytes());
    // A record inject did not write is never kept: inject refuses it.
    let carried = input.replacen(
        "  labels:\n",
        "  annotations:\n    nvcf.io/replaced: '{\"serviceAccount\":\"nvcf-worker\"}'\n  labels:\n",
        1,
    );
    let out = inject(&carried, &[]);
    out.code(1);
    assert!(out.stderr.contains("NVW116"), "{out}");
    // A forged Pod and a binding to a worker account: uninject names both.
    let both = format!(
        "{}---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: widen\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- kind: ServiceAccount\n  name: nvcf-worker-x\n  namespace: ns\n",
        workload("Pod", "p", "ns", false, &format!("serviceAccountName: nvcf-worker-x\n{SIMPLE_POD}"))
    );
    let u = uninject_cli(&both);
    u.code(1);
    assert!(u.stdout.is_empty(), "{u}");
    assert!(
        u.stderr.contains("error NVW101") && u.stderr.contains("error NVW102"),
        "{u}"
    );
    // The look-alike: the same objects with an ordinary account pass through.
    let fine = both.replace("nvcf-worker-x", "worker-x");
    let u = uninject_cli(&fine);
    u.ok();
    assert_gives_back("ordinary", fine.as_bytes(), u.stdout.as_bytes());
}

/// Where the author set the contract's env themselves, inject records it and
/// uninject leaves it: `uninject(inject(x)) == x` byte for byte.
#[test]
fn the_authors_own_contract_env_survives_uninject() {
    for env in [
        "  env:\n  - name: NVCF_IDENTITY_SOURCE\n    value: psat\n",
        "  env:\n  - name: NVCF_TOKEN_FILE_PATH\n    value: /var/run/secrets/tokens/token\n  - name: OTHER\n    value: x\n",
    ] {
        let input = workload(
            "Deployment",
            "web",
            "ns",
            true,
            &format!("{SIMPLE_POD}{env}"),
        );
        let out = inject_per_workload(&input, &[]);
        out.ok();
        let objs = objects(&out.stdout);
        assert_contract(&objs, "Deployment", "web", "ns", &["app"]);
        let record: Value = serde_json::from_str(
            find(&objs, "Deployment", "web")["metadata"]["annotations"]["nvcf.io/replaced"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert!(record["env"]["app"].is_array(), "{record}");
        run(&["validate", "-"], &out.stdout).ok();
        let back = uninject_cli(&out.stdout);
        back.ok();
        assert_gives_back("author env", input.as_bytes(), back.stdout.as_bytes());
        // Injecting again is a no-op: the record is the transformer's own.
        assert_eq!(inject_per_workload(&out.stdout, &[]).stdout, out.stdout);
    }
}

/// `nvcf.io/worker: "true"` taken off a workload.
fn deselect(stream: &str) -> String {
    stream.replacen(
        "    nvcf.io/worker: \"true\"\n",
        "    nvcf.io/worker: \"false\"\n",
        1,
    )
}

#[test]
fn uninject_leaves_workloads_without_an_identity_untouched() {
    let plain = format!(
        "{}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: b\n",
        workload("Deployment", "plain", "ns", false, SIMPLE_POD)
    );
    let out = uninject_cli(&plain);
    out.ok();
    assert_gives_back("plain", plain.as_bytes(), out.stdout.as_bytes());
    assert!(
        out.stderr
            .contains("deployment/plain unchanged: no worker identity"),
        "{out}"
    );
    assert!(!out.stderr.contains("warning"), "{out}");
    // Empty of any identity, JSON in, JSON out.
    let json = run(&["uninject", "-f", "-", "-o", "json"], &plain);
    json.ok();
    let v: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(v["items"].as_array().unwrap().len(), 2);
}

#[test]
fn uninject_inside_lists_json_documents_and_per_namespace_identities() {
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n{}",
        indent(&format!("- {}", &indent(WEB, 2)[2..]), 0)
    );
    let json_doc = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "labels": {"nvcf.io/worker": "true"}}, "spec": {"serviceAccountName": "x", "containers": [{"name": "c", "image": "i"}]}}
"#;
    for (name, input) in [("list", list.as_str()), ("json", json_doc)] {
        for args in [
            vec![],
            vec!["--config".to_string(), naming_config("per-namespace")],
        ] {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = inject(input, &args);
            out.ok();
            let back = uninject_cli(&out.stdout);
            back.ok();
            assert_gives_back(name, input.as_bytes(), back.stdout.as_bytes());
            assert!(
                !back.stdout.contains("nvcf-worker"),
                "{name} {args:?}\n{back}"
            );
        }
    }
}

/// The stream with StatefulSet api no longer selected.
fn deselect_api(stream: &str) -> String {
    let out = stream.replacen(
        "  name: api\n  namespace: ns\n  labels:\n    nvcf.io/worker: \"true\"\n",
        "  name: api\n  namespace: ns\n  labels:\n    nvcf.io/worker: \"false\"\n",
        1,
    );
    assert_ne!(out, stream);
    out
}

#[test]
fn prune_takes_the_identity_out_of_workloads_no_longer_selected() {
    let input = format!("{WEB}---\n{API}");
    let both = inject_per_workload(&input, &[]);
    both.ok();
    // api is no longer selected.
    let deselected = deselect_api(&both.stdout);
    let kept = inject_per_workload(&deselected, &[]);
    kept.ok();
    assert!(
        kept.stderr.contains(
            "statefulset/api unchanged: not selected any more; keeps its worker identity"
        ),
        "{kept}"
    );
    assert_eq!(kept.stdout, deselected, "kept by default");
    assert_eq!(
        validate_stdin(&kept.stdout).code,
        0,
        "a kept identity validates clean"
    );

    let pruned = inject_per_workload(&deselected, &["--prune"]);
    pruned.ok();
    assert!(
        pruned.stderr.contains("statefulset/api uninjected"),
        "{pruned}"
    );
    assert!(
        pruned
            .stderr
            .contains("serviceaccount/nvcf-worker-api removed"),
        "{pruned}"
    );
    let objs = objects(&pruned.stdout);
    assert!(!has_object(&objs, "ServiceAccount", "nvcf-worker-api"));
    assert!(!has_object(&objs, "RoleBinding", "nvcf-worker-api"));
    assert_identity(
        &objs,
        "Deployment",
        "web",
        "nvcf-worker-web",
        &["app", "side"],
    );
    let api_back = API.replace("nvcf.io/worker: \"true\"", "nvcf.io/worker: \"false\"");
    let api = find(&objs, "StatefulSet", "api");
    assert_eq!(
        api,
        &objects(&api_back)[0],
        "api is as it was before inject"
    );
    assert_eq!(validate_stdin(&pruned.stdout).code, 0);
    assert_eq!(
        inject_per_workload(&pruned.stdout, &["--prune"]).stdout,
        pruned.stdout
    );

    // A per-namespace identity stays while another workload still uses it.
    let ns = inject(&input, &["--config", &naming_config("per-namespace")]);
    ns.ok();
    let deselected = deselect_api(&ns.stdout);
    let cfg = std::path::PathBuf::from(naming_config("per-namespace"));
    std::fs::write(
        &cfg,
        typed_config("clusterID: c1\nnaming: per-namespace\nprune: true\n"),
    )
    .unwrap();
    let pruned = inject(&deselected, &["--config", &path_str(&cfg)]);
    pruned.ok();
    let objs = objects(&pruned.stdout);
    assert!(
        has_object(&objs, "ServiceAccount", "nvcf-worker"),
        "still used by web"
    );
    assert_eq!(find(&objs, "StatefulSet", "api"), &objects(&api_back)[0]);
}

#[test]
fn krm_function_modes_uninject_and_prune() {
    let injected = inject(WEB, &[]);
    injected.ok();
    for config in [
        typed_config("mode: uninject\n"),
        configmap_config(&[("mode", "uninject")]),
    ] {
        let out = krm(&resource_list(&injected.stdout, &config));
        out.ok();
        let items = items(&rl(&out));
        assert_eq!(items.len(), 1, "{out}");
        assert_eq!(items[0], objects(WEB)[0]);
    }
    // A config change through KRM updates; prune: true through KRM prunes.
    let out = krm(&resource_list(
        &injected.stdout,
        &typed_config("clusterID: other\n"),
    ));
    out.ok();
    assert_eq!(
        token_of(&items(&rl(&out)), "Deployment", "web")["audience"],
        "nvcf-icms:other"
    );
    let said: Vec<Value> = results(&rl(&out));
    assert_eq!(said.len(), 1, "{out}");
    assert_eq!(said[0]["severity"], "info");
    assert_eq!(
        said[0]["message"],
        "deployment/web updated: audience nvcf-icms:c1 -> nvcf-icms:other"
    );
    assert_eq!(said[0]["resourceRef"]["name"], "web");
    let deselected = injected
        .stdout
        .replace("nvcf.io/worker: \"true\"", "nvcf.io/worker: \"no\"");
    // Without prune, a result says the workload keeps its identity.
    let out = krm(&resource_list(
        &deselected,
        &typed_config("clusterID: c1\n"),
    ));
    out.ok();
    let kept = results(&rl(&out));
    assert_eq!(kept.len(), 1, "{out}");
    assert_eq!(kept[0]["severity"], "info");
    assert!(
        kept[0]["message"]
            .as_str()
            .unwrap()
            .contains("keeps its worker identity"),
        "{out}"
    );
    let out = krm(&resource_list(
        &deselected,
        &typed_config("clusterID: c1\nprune: true\n"),
    ));
    out.ok();
    let items = items(&rl(&out));
    assert_eq!(
        items,
        objects(&WEB.replace("nvcf.io/worker: \"true\"", "nvcf.io/worker: \"no\""))
    );
}

#[test]
fn inject_refuses_an_uninject_config() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("u.yaml");
    std::fs::write(&cfg, typed_config("mode: uninject\n")).unwrap();
    let out = run(&["inject", "--config", &path_str(&cfg), "-f", "-"], WEB);
    out.code(2);
    assert!(out.stderr.contains("kubectl nvcf-worker uninject"), "{out}");
}

/// The real `kubectl kustomize` running the binary as a legacy exec plugin with
/// `mode: uninject`, and with a changed clusterID.
#[test]
fn kustomize_plugin_uninjects_and_updates() {
    let injected = inject(WEB, &[]);
    injected.ok();
    let sandbox = tempfile::tempdir().unwrap();
    let config_home = sandbox.path().join("config");
    let root = config_home.join("kustomize/plugin");
    let status = Command::new(BIN)
        .args(["install-kustomize-plugin", "--plugin-root"])
        .arg(&root)
        .status()
        .unwrap();
    assert!(status.success());
    let build = |name: &str, transformer: &str| -> String {
        let dir = sandbox.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("app.yaml"), &injected.stdout).unwrap();
        std::fs::write(dir.join("worker.yaml"), transformer).unwrap();
        std::fs::write(
            dir.join("kustomization.yaml"),
            "resources:\n- app.yaml\ntransformers:\n- worker.yaml\n",
        )
        .unwrap();
        kustomize(&dir, &config_home)
    };
    let out = build(
        "uninject",
        &typed_config("mode: uninject\n").replace("name: cfg", "name: worker"),
    );
    let objs = objects(&out);
    assert_eq!(objs.len(), 1, "{out}");
    assert_eq!(objs[0], objects(WEB)[0]);
    let out = build(
        "update",
        &typed_config("clusterID: other\n").replace("name: cfg", "name: worker"),
    );
    let objs = objects(&out);
    assert_eq!(
        token_of(&objs, "Deployment", "web")["audience"],
        "nvcf-icms:other"
    );
    assert_eq!(objs.len(), 4);
}

fn kustomize(dir: &Path, config_home: &Path) -> String {
    let out = Command::new("kubectl")
        .args(["kustomize", "--enable-alpha-plugins"])
        .arg(dir)
        .env("XDG_CONFIG_HOME", config_home)
        .env_remove("KUSTOMIZE_PLUGIN_HOME")
        .output()
        .expect("kubectl is on PATH");
    assert!(
        out.status.success(),
        "kubectl kustomize: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

// ---------------------------------------------------------------------------
// uninject(inject(x)) == x over real and example manifests, in process.

fn batch(name: &str, bytes: &[u8]) -> Batch {
    Batch::new(vec![load(Input {
        name: name.into(),
        bytes: bytes.to_vec(),
        utf16: None,
    })
    .unwrap()])
}

/// Injects every workload of `bytes` (all selected), then uninjects: Some(round
/// trip) when inject succeeds, None when inject reports a conflict.
fn round_trip(name: &str, bytes: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let cfg = Config {
        cluster_id: Some("c".into()),
        selector: Selector::parse("!nothing").unwrap(),
        ..Config::default()
    };
    let mut b = batch(name, bytes);
    let outcome = inject::inject(&mut b, &cfg);
    if outcome.has_errors() {
        return None;
    }
    let injected = sink::render_stream(&b);
    let mut u = batch(name, &injected);
    let outcome = uninject::uninject(&mut u);
    assert!(!outcome.has_errors(), "{name}: {:?}", outcome.findings);
    assert!(
        outcome.findings.is_empty(),
        "{name}: own output is never a look-alike: {:?}",
        outcome.findings
    );
    Some((injected, sink::render_stream(&u)))
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if !p.file_name().unwrap().to_string_lossy().starts_with('.') {
                files_under(&p, out);
            }
        } else if matches!(
            p.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            out.push(p);
        }
    }
}

#[test]
fn uninject_of_inject_gives_back_the_real_corpus_and_the_examples() {
    let corpus =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/real/kubernetes-examples");
    assert!(
        corpus.is_dir(),
        "the real corpus is missing: {}",
        corpus.display()
    );
    let mut files = Vec::new();
    files_under(&corpus, &mut files);
    assert_eq!(files.len(), 261);
    files_under(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples"),
        &mut files,
    );
    let (mut checked, mut injected_workloads, mut conflicts) = (0, 0, 0);
    let contents: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    let streams: Vec<&[u8]> = contents.iter().map(Vec::as_slice).collect();
    let kubectl = kubectl_objects_of(&streams);
    for ((f, bytes), kubectl) in files.iter().zip(contents.iter().cloned()).zip(kubectl) {
        let name = f.display().to_string();
        // Templates, files kubectl refuses and files without objects (inject
        // refuses those: "no Kubernetes objects in the input") are not inputs; nor
        // are files the tool refuses (`load`).
        if kubectl.map_or(true, |objects| objects.is_empty())
            || load(Input {
                name: name.clone(),
                bytes: bytes.clone(),
                utf16: None,
            })
            .is_err()
        {
            continue;
        }
        let Some((injected, back)) = round_trip(&name, &bytes) else {
            conflicts += 1;
            continue;
        };
        checked += 1;
        let has = |b: &[u8]| String::from_utf8_lossy(b).contains(TOKEN_VOLUME);
        injected_workloads += usize::from(has(&injected) && !has(&bytes));
        assert!(
            !has(&back),
            "{name}: the token volume is left after uninject"
        );
        assert_gives_back(&name, &bytes, &back);
    }
    eprintln!(
        "{} files: {checked} round trips equal byte for byte ({injected_workloads} with workloads injected), {conflicts} refused by inject",
        files.len()
    );
    assert!(checked >= 240, "checked {checked}, conflicts {conflicts}");
    assert!(
        injected_workloads >= 100,
        "{injected_workloads} files had workloads"
    );
}

/// The README's lifecycle example, run as written: the report lines it shows are
/// what the tool prints.
#[test]
fn readme_lifecycle_example_is_what_the_tool_prints() {
    let readme =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .unwrap();
    let start = readme
        .find("## Lifecycle")
        .expect("README has a lifecycle section");
    let section = &readme[start..];
    let app = workload(
        "Deployment",
        "web",
        "ns",
        true,
        &format!("serviceAccountName: app\n{SIMPLE_POD}"),
    )
    .replace("  namespace: ns\n", "");
    let injected = inject(&app, &["--cluster-id", "demo"]);
    injected.ok();
    let updated = inject(
        &injected.stdout,
        &["--cluster-id", "other", "--expiration-seconds", "3600"],
    );
    updated.ok();
    for line in updated.stderr.lines() {
        assert!(section.contains(line), "README lacks {line:?}");
    }
    for cmd in [
        "kubectl nvcf-worker inject -f app.yaml --cluster-id demo > injected.yaml",
        "kubectl nvcf-worker inject -f injected.yaml --cluster-id other --expiration-seconds 3600 > updated.yaml",
        "kubectl nvcf-worker uninject -f updated.yaml > app-again.yaml",
    ] {
        assert!(section.contains(cmd), "{cmd}");
    }
    let back = uninject_cli(&updated.stdout);
    back.ok();
    assert_gives_back("app.yaml", app.as_bytes(), back.stdout.as_bytes());
    let not_selected = "unchanged: not selected any more; keeps its worker identity";
    assert!(section.contains(not_selected));
    let deselected = updated
        .stdout
        .replace("nvcf.io/worker: \"true\"", "nvcf.io/worker: \"no\"");
    assert!(inject(&deselected, &[]).stderr.contains(not_selected));
}

/// Own output that needs no change is not edited at all: a document with anchors
/// and aliases comes out as it went in (editing would expand the aliases).
#[test]
fn own_output_without_changes_keeps_its_aliases() {
    let first = inject(WEB, &[]);
    first.ok();
    let with_alias =
        first
            .stdout
            .replacen("    team: a\n", "    team: &team a\n    owner: *team\n", 1);
    assert_ne!(with_alias, first.stdout);
    let again = inject(&with_alias, &[]);
    again.ok();
    assert!(again.stderr.contains("deployment/web unchanged"), "{again}");
    assert_eq!(again.stdout, with_alias);
}

/// The real kpt: `kpt fn eval --exec` injects a package, then with a changed
/// clusterID updates it, then with `mode=uninject` gives back the package's objects
/// (the trio removed from the files kpt writes back).
#[test]
fn kpt_eval_injects_updates_and_uninjects_a_package() {
    // Under both contracts: per-workload (each file its trio) and the default
    // per-namespace (one nvcf-worker trio for the package's namespace).
    for naming in [Some("naming=per-workload"), None] {
        let sandbox = tempfile::tempdir().unwrap();
        let pkg = sandbox.path().join("pkg");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("web.yaml"), WEB).unwrap();
        std::fs::write(pkg.join("api.yaml"), API).unwrap();
        let kpt = |args: &[&str]| {
            let out = Command::new("kpt")
                .args(["fn", "eval", "pkg", "--exec", BIN, "--"])
                .args(args)
                .args(naming)
                .current_dir(sandbox.path())
                .env("HOME", sandbox.path())
                .env("XDG_CONFIG_HOME", sandbox.path().join(".config"))
                .output()
                .expect("kpt is on PATH");
            assert!(
                out.status.success(),
                "kpt {args:?} {naming:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stderr).into_owned()
        };
        let read = |f: &str| std::fs::read_to_string(pkg.join(f)).unwrap();
        kpt(&["clusterID=c1"]);
        let all = || {
            let mut o = objects(&read("web.yaml"));
            o.extend(objects(&read("api.yaml")));
            o
        };
        if naming.is_some() {
            assert!(
                objects(&read("web.yaml")).len() == 4,
                "{}",
                read("web.yaml")
            );
        } else {
            let objs = all();
            assert_eq!(objs.len(), 2 + 3, "{objs:?}");
            assert!(
                has_object(&objs, "ServiceAccount", "nvcf-worker"),
                "{objs:?}"
            );
            for (kind, name) in [("Deployment", "web"), ("StatefulSet", "api")] {
                let spec = at(find(&objs, kind, name), "spec.template.spec");
                assert_eq!(spec["serviceAccountName"], "nvcf-worker", "{kind}/{name}");
            }
        }
        let said = kpt(&["clusterID=other"]);
        assert!(
            said.contains("updated: audience nvcf-icms:c1 -> nvcf-icms:other"),
            "{said}"
        );
        assert_eq!(
            token_of(&all(), "Deployment", "web")["audience"],
            "nvcf-icms:other"
        );
        kpt(&["mode=uninject"]);
        assert_gives_back("web.yaml", WEB.as_bytes(), read("web.yaml").as_bytes());
        assert_gives_back("api.yaml", API.as_bytes(), read("api.yaml").as_bytes());
    }
}
