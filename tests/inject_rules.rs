//! The transformer's rules, through the `inject` CLI and through the KRM function
//! (both faces share one code path; each rule is exercised on both).

use crate::support;

use serde_json::{json, Value};
use support::*;

fn cm_cfg() -> String {
    configmap_config(&[("clusterID", CLUSTER)])
}

/// The ConfigMap config with `naming` given.
fn cm_cfg_as(naming: &str) -> String {
    configmap_config(&[("clusterID", CLUSTER), ("naming", naming)])
}

/// Runs the same stream through `inject --naming NAMING` and the KRM function
/// (ConfigMap config, `naming: NAMING`); returns the objects of each output.
fn both_ways_as(naming: &str, stream: &str) -> (Vec<Value>, Vec<Value>) {
    let cli = inject(stream, &["--naming", naming]);
    cli.ok();
    let k = krm(&resource_list(stream, &cm_cfg_as(naming)));
    k.ok();
    let rl = rl(&k);
    assert!(results(&rl).iter().all(|r| r["severity"] != "error"), "{k}");
    (objects(&cli.stdout), items(&rl))
}

#[test]
fn every_kind_gets_the_whole_contract_through_cli_and_krm() {
    for (naming, account) in [
        ("per-workload", "nvcf-worker-web"),
        ("per-namespace", "nvcf-worker"),
    ] {
        for kind in KINDS {
            let stream = workload(kind, "web", "team-a", true, SIMPLE_POD);
            let (cli, fnout) = both_ways_as(naming, &stream);
            for objs in [&cli, &fnout] {
                assert_eq!(objs.len(), 4, "{naming} {kind}: {:?}", kinds_names(objs));
                assert_contract_as(objs, kind, "web", "team-a", &["app"], account);
            }
        }
    }
}

/// The default contract is the one the newest agent and ICMS accept: one
/// `nvcf-worker` per namespace. `--naming` picks the other; flags win over the
/// config file's `naming`, as every flag does; the KRM function takes `naming` in
/// both config forms, and no naming there means the default too.
#[test]
fn naming_defaults_to_per_namespace_and_the_flag_overrides_the_config() {
    let stream = format!(
        "{}---\n{}",
        workload("Deployment", "web", "ns", true, SIMPLE_POD),
        workload("StatefulSet", "api", "ns", true, SIMPLE_POD)
    );
    let default = inject(&stream, &[]);
    default.ok();
    let objs = objects(&default.stdout);
    assert_eq!(
        kinds_names(&objs),
        [
            "ServiceAccount/nvcf-worker",
            "Role/nvcf-worker",
            "RoleBinding/nvcf-worker",
            "Deployment/web",
            "StatefulSet/api"
        ],
        "{default}"
    );
    assert_contract_as(&objs, "Deployment", "web", "ns", &["app"], "nvcf-worker");
    let api = at(find(&objs, "StatefulSet", "api"), "spec.template.spec");
    assert_eq!(api["serviceAccountName"], "nvcf-worker");
    let sa = find(&objs, "ServiceAccount", "nvcf-worker");
    assert_eq!(
        sa["metadata"]["annotations"]["nvcf.io/identity-scope"],
        "namespace"
    );
    assert_eq!(validate_stdin(&default.stdout).code, 0);
    // Explicitly per-namespace is the same output, byte for byte.
    let explicit = inject(&stream, &["--naming", "per-namespace"]);
    assert_eq!(explicit.stdout, default.stdout);

    let per_workload = inject(&stream, &["--naming", "per-workload"]);
    per_workload.ok();
    let objs = objects(&per_workload.stdout);
    assert_contract(&objs, "Deployment", "web", "ns", &["app"]);
    assert_contract(&objs, "StatefulSet", "api", "ns", &["app"]);
    assert!(!has_named(&objs, "nvcf-worker"), "{per_workload}");

    // The flag overrides the config file's naming, both ways.
    let dir = tempfile::tempdir().unwrap();
    for (config, flag, account) in [
        ("per-namespace", "per-workload", "nvcf-worker-web"),
        ("per-workload", "per-namespace", "nvcf-worker"),
    ] {
        let p = dir.path().join(format!("{config}.yaml"));
        std::fs::write(
            &p,
            typed_config(&format!("clusterID: c1\nnaming: {config}\n")),
        )
        .unwrap();
        let p = path_str(&p);
        let from_file = run(&["inject", "-f", "-", "--config", &p], &stream);
        from_file.ok();
        let want = if config == "per-namespace" {
            "nvcf-worker"
        } else {
            "nvcf-worker-web"
        };
        assert_contract_as(
            &objects(&from_file.stdout),
            "Deployment",
            "web",
            "ns",
            &["app"],
            want,
        );
        let over = run(
            &["inject", "-f", "-", "--config", &p, "--naming", flag],
            &stream,
        );
        over.ok();
        assert_contract_as(
            &objects(&over.stdout),
            "Deployment",
            "web",
            "ns",
            &["app"],
            account,
        );
    }

    // The KRM function: no naming is the default; both forms take either value.
    for (cfg, account) in [
        (cm_cfg(), "nvcf-worker"),
        (typed_config("clusterID: c1\n"), "nvcf-worker"),
        (cm_cfg_as("per-workload"), "nvcf-worker-web"),
        (cm_cfg_as("per-namespace"), "nvcf-worker"),
        (
            typed_config("clusterID: c1\nnaming: per-workload\n"),
            "nvcf-worker-web",
        ),
        (
            typed_config("clusterID: c1\nnaming: per-namespace\n"),
            "nvcf-worker",
        ),
    ] {
        let k = krm(&resource_list(&stream, &cfg));
        k.ok();
        assert_contract_as(
            &items(&rl(&k)),
            "Deployment",
            "web",
            "ns",
            &["app"],
            account,
        );
    }

    // Anything else is a usage error naming the values.
    let bad = inject(&stream, &["--naming", "per-pod"]);
    assert_eq!(bad.code, 2, "{bad}");
    assert!(
        bad.stderr.contains("per-workload") && bad.stderr.contains("per-namespace"),
        "{bad}"
    );
}

fn has_named(objs: &[Value], name: &str) -> bool {
    objs.iter().any(|o| o["metadata"]["name"] == name)
}

#[test]
fn default_selector_uses_workload_or_pod_template_labels() {
    // Selected through the pod template's labels only.
    let stream = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: tpl\n  namespace: ns\nspec:\n  template:\n    metadata:\n      labels:\n        nvcf.io/worker: \"true\"\n    spec:\n      containers:\n      - name: app\n        image: x\n";
    let (cli, fnout) = both_ways_as("per-workload", stream);
    assert_contract(&cli, "Deployment", "tpl", "ns", &["app"]);
    assert_contract(&fnout, "Deployment", "tpl", "ns", &["app"]);
    // Not selected: a label with another value, or none at all.
    let plain = workload("Deployment", "plain", "ns", false, SIMPLE_POD);
    let other = plain.replace("app: plain", "nvcf.io/worker: \"false\"");
    for s in [plain, other] {
        let out = inject_per_workload(&s, &[]);
        out.ok();
        assert_eq!(objects(&out.stdout), objects(&s), "{out}");
        assert!(out.stderr.contains("skipped: not selected"), "{out}");
    }
}

#[test]
fn v1_list_items_are_injected_in_place() {
    let dep = workload("Deployment", "web", "ns", true, SIMPLE_POD);
    let svc = "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc\n  namespace: ns\n";
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n- {}- {}",
        &indent(&dep, 2)[2..],
        &indent(svc, 2)[2..]
    );
    let out = inject_per_workload(&list, &[]);
    out.ok();
    // Structural: the List stays one document in the text (kubectl flattens it).
    let d = docs(&out.stdout);
    assert_eq!(d.len(), 1, "the List stays one document\n{out}");
    assert_eq!(d[0]["kind"], "List");
    let its = d[0]["items"].as_array().unwrap().clone();
    assert_eq!(
        kinds_names(&its),
        [
            "ServiceAccount/nvcf-worker-web",
            "Role/nvcf-worker-web",
            "RoleBinding/nvcf-worker-web",
            "Deployment/web",
            "Service/svc"
        ]
    );
    assert_contract(&its, "Deployment", "web", "ns", &["app"]);
    assert_eq!(objects(&out.stdout), its, "kubectl sends the List's items");
    // The same List as one ResourceList item-free stream document through `-o json`.
    let j = inject_per_workload(&list, &["-o", "json"]);
    j.ok();
    let v: Value = serde_json::from_str(&j.stdout).expect("-o json is JSON");
    assert_eq!(v["kind"], "List");
    assert_contract(
        v["items"].as_array().unwrap(),
        "Deployment",
        "web",
        "ns",
        &["app"],
    );
}

#[test]
fn trio_precedes_its_workload_and_input_order_is_kept() {
    let svc = "apiVersion: v1\nkind: Service\nmetadata:\n  name: a-svc\n  namespace: ns\n";
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b-cm\n  namespace: ns\ndata:\n  k: v\n";
    let stream = [
        svc.to_string(),
        workload("StatefulSet", "zeta", "ns", true, SIMPLE_POD),
        cm.to_string(),
        workload("Deployment", "plain", "ns", false, SIMPLE_POD),
        workload("Pod", "alpha", "ns", true, SIMPLE_POD),
    ]
    .join("---\n");
    let (cli, fnout) = both_ways_as("per-workload", &stream);
    let want = [
        "Service/a-svc",
        "ServiceAccount/nvcf-worker-zeta",
        "Role/nvcf-worker-zeta",
        "RoleBinding/nvcf-worker-zeta",
        "StatefulSet/zeta",
        "ConfigMap/b-cm",
        "Deployment/plain",
        "ServiceAccount/nvcf-worker-alpha",
        "Role/nvcf-worker-alpha",
        "RoleBinding/nvcf-worker-alpha",
        "Pod/alpha",
    ];
    assert_eq!(kinds_names(&cli), want);
    assert_eq!(kinds_names(&fnout), want);
    let plain = find(&cli, "Deployment", "plain");
    assert!(container_untouched(
        &at(plain, "spec.template.spec.containers")[0]
    ));
    assert!(at(plain, "spec.template.spec")
        .get("serviceAccountName")
        .is_none());
}

#[test]
fn inject_is_idempotent_byte_for_byte() {
    let stream = [
        workload("Deployment", "web", "ns", true, SIMPLE_POD),
        workload("CronJob", "cron", "ns", true, SIMPLE_POD),
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n".to_string(),
        "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"jp\", \"labels\": {\"nvcf.io/worker\": \"true\"}}, \"spec\": {\"containers\": [{\"name\": \"a\", \"image\": \"x\"}]}}\n".to_string(),
    ]
    .join("---\n");
    let once = inject_per_workload(&stream, &[]);
    once.ok();
    let twice = inject_per_workload(&once.stdout, &[]);
    twice.ok();
    assert_eq!(once.stdout, twice.stdout, "inject twice changes nothing");
    assert!(
        twice
            .stderr
            .contains("deployment/web unchanged: already has its identity"),
        "{twice}"
    );
    // The KRM function: its own output, run again, is the same bytes.
    let first = krm(&resource_list(&stream, &cm_cfg_as("per-workload")));
    first.ok();
    let second = krm(&first.stdout);
    second.ok();
    assert_eq!(first.stdout, second.stdout);
    assert_eq!(items(&rl(&first)).len(), 13);
}

fn assert_conflict(stream: &str, needle: &str) {
    assert_conflict_as("per-namespace", stream, needle);
}

/// A conflict under `naming` (the identity-name collisions are per-workload's).
fn assert_conflict_as(naming: &str, stream: &str, needle: &str) {
    let out = inject(stream, &["--naming", naming]);
    out.code(1);
    assert!(out.stdout.is_empty(), "nothing on stdout on error\n{out}");
    assert!(
        out.stderr.contains(needle),
        "stderr names {needle:?}\n{out}"
    );
    assert!(out.stderr.contains("error"), "{out}");
    // KRM: items unchanged, an error result, exit 1.
    let input = resource_list(stream, &cm_cfg_as(naming));
    let k = krm(&input);
    k.code(1);
    let r = rl(&k);
    assert_eq!(items(&r), items(&docs(&input)[0]), "items unchanged\n{k}");
    assert!(
        results(&r)
            .iter()
            .any(|x| x["severity"] == "error" && x["message"].as_str().unwrap().contains(needle)),
        "an error result naming {needle:?}\n{k}"
    );
}

#[test]
fn conflicts_are_errors_and_nothing_is_written() {
    let vol = "containers:\n- name: app\n  image: x\nvolumes:\n- name: nvcf-worker-token\n  emptyDir: {}\n";
    assert_conflict(
        &workload("Deployment", "web", "ns", true, vol),
        "volume \"nvcf-worker-token\" exists with other content",
    );
    // The right volume but for another audience is "other content" too.
    let other_aud = "containers:\n- name: app\n  image: x\nvolumes:\n- name: nvcf-worker-token\n  projected:\n    sources:\n    - serviceAccountToken:\n        audience: nvcf-icms:other\n        expirationSeconds: 900\n        path: token\n";
    assert_conflict(
        &workload("Job", "web", "ns", true, other_aud),
        "exists with other content",
    );
    let mount = "containers:\n- name: app\n  image: x\n  volumeMounts:\n  - name: certs\n    mountPath: /var/run/secrets/tokens/\nvolumes:\n- name: certs\n  emptyDir: {}\n";
    assert_conflict(
        &workload("Deployment", "web", "ns", true, mount),
        "volume \"certs\" is mounted at \"/var/run/secrets/tokens/\", at or under /var/run/secrets/tokens",
    );
    for (var, value) in [
        ("NVCF_TOKEN_FILE_PATH", "/elsewhere"),
        ("NVCF_IDENTITY_SOURCE", "spire"),
    ] {
        let env = format!(
            "containers:\n- name: app\n  image: x\n  env:\n  - name: {var}\n    value: {value}\n"
        );
        assert_conflict(
            &workload("DaemonSet", "web", "ns", true, &env),
            &format!("env {var} is already set to something else"),
        );
    }
    // Two selected workloads in one namespace deriving one name.
    let two = [
        workload("Deployment", "web", "ns", true, SIMPLE_POD),
        workload("StatefulSet", "web", "ns", true, SIMPLE_POD),
    ]
    .join("---\n");
    assert_conflict_as(
        "per-workload",
        &two,
        "would get identity \"nvcf-worker-web\", which is already",
    );
    // The same names in two namespaces are fine.
    let apart = [
        workload("Deployment", "web", "ns1", true, SIMPLE_POD),
        workload("StatefulSet", "web", "ns2", true, SIMPLE_POD),
    ]
    .join("---\n");
    let out = inject_per_workload(&apart, &[]);
    out.ok();
    let objs = objects(&out.stdout);
    assert_contract(&objs, "Deployment", "web", "ns1", &["app"]);
    assert_contract(&objs, "StatefulSet", "web", "ns2", &["app"]);
}

#[test]
fn a_bootstrap_token_is_named_in_a_warning_and_the_registration_note_is_said_once() {
    const NOTE: &str = "note: ICMS accepts a worker token only for pods the NVCF agent registers";
    for var in ["NVCF_WORKER_TOKEN", "NVCT_WORKER_TOKEN"] {
        let spec = format!(
            "containers:\n- name: app\n  image: x\n  env:\n  - name: OTHER\n    value: a\n  - name: {var}\n    valueFrom:\n      secretKeyRef: {{name: s, key: t}}\n"
        );
        let stream = [
            workload("Deployment", "web", "ns", true, &spec),
            workload("Deployment", "api", "ns", true, SIMPLE_POD),
        ]
        .join("---\n");
        let out = inject(&stream, &[]);
        out.ok();
        let warnings: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.contains("warning:"))
            .collect();
        assert_eq!(warnings.len(), 1, "{out}");
        assert!(
            warnings[0].contains(&format!(
                "warning: {var} is this container's bootstrap token"
            )) && warnings[0].contains("spec.template.spec.containers[0].env[1]"),
            "{out}"
        );
        // Once per run, however many workloads were given the identity.
        assert_eq!(out.stderr.matches(NOTE).count(), 1, "{out}");
        // The token's env stays as written: the warning changes nothing.
        assert!(out.stdout.contains(&format!("name: {var}")), "{out}");
        // KRM: the same warning as a result on the workload's env entry.
        let k = krm(&resource_list(&stream, &cm_cfg()));
        k.ok();
        let r = rl(&k);
        let w: Vec<Value> = results(&r)
            .into_iter()
            .filter(|x| x["severity"] == "warning")
            .collect();
        assert_eq!(w.len(), 1, "{k}");
        assert_eq!(
            w[0]["field"]["path"],
            "spec.template.spec.containers[0].env[1]"
        );
        assert_eq!(w[0]["resourceRef"]["name"], "web");
    }
    // Look-alikes stay quiet: a longer name, a skipped container, an unselected
    // workload; and a run that injects nothing says no note.
    let spec = "containers:\n- name: app\n  image: x\n  env:\n  - name: NVCF_WORKER_TOKEN_PATH\n    value: /x\n- name: side\n  image: y\n  env:\n  - name: NVCF_WORKER_TOKEN\n    value: t\n";
    let stream = workload("Deployment", "web", "ns", true, spec).replacen(
        "metadata:\n",
        "metadata:\n  annotations:\n    nvcf.io/skip-containers: side\n",
        1,
    );
    assert!(stream.contains("skip-containers"), "{stream}");
    let out = inject(&stream, &[]);
    out.ok();
    assert!(!out.stderr.contains("warning"), "{out}");
    assert_eq!(out.stderr.matches(NOTE).count(), 1, "{out}");
    let unselected = workload(
        "Deployment",
        "web",
        "ns",
        false,
        "containers:\n- name: app\n  image: x\n  env:\n  - name: NVCF_WORKER_TOKEN\n    value: t\n",
    );
    let out = inject(&unselected, &[]);
    out.ok();
    assert!(!out.stderr.contains("warning"), "{out}");
    assert!(!out.stderr.contains(NOTE), "{out}");
}

#[test]
fn other_service_account_is_replaced_with_a_warning_naming_it() {
    for key in ["serviceAccountName", "serviceAccount"] {
        let spec = format!("{key}: build-bot\n{SIMPLE_POD}");
        let stream = workload("Deployment", "web", "ns", true, &spec);
        let out = inject_per_workload(&stream, &[]);
        out.ok();
        assert!(
            out.stderr.contains(&format!(
                "warning: {key} \"build-bot\" is replaced by the worker account \"nvcf-worker-web\""
            )),
            "{out}"
        );
        // The warning points at the line of the replaced value (line 17).
        assert!(out.stderr.contains("<stdin>:17: warning"), "{out}");
        let objs = objects(&out.stdout);
        assert_contract(&objs, "Deployment", "web", "ns", &["app"]);
        let spec = at(&objs[3], "spec.template.spec");
        assert_eq!(spec[key], "nvcf-worker-web");
        // The replaced account is only recorded, for uninject, on the workload.
        assert_eq!(out.stdout.matches("build-bot").count(), 1, "{out}");
        let recorded: Value = serde_json::from_str(
            objs[3]["metadata"]["annotations"]["nvcf.io/replaced"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(recorded, json!({ key: "build-bot" }));
        // KRM: a warning result with resourceRef and field path, exit 0.
        let k = krm(&resource_list(&stream, &cm_cfg_as("per-workload")));
        k.ok();
        let r = rl(&k);
        let w = results(&r)
            .into_iter()
            .find(|x| x["severity"] == "warning")
            .unwrap_or_else(|| panic!("{k}"));
        assert!(w["message"].as_str().unwrap().contains("build-bot"));
        assert_eq!(w["field"]["path"], format!("spec.template.spec.{key}"));
        assert_eq!(w["resourceRef"]["name"], "web");
        assert_eq!(w["resourceRef"]["kind"], "Deployment");
    }
}

#[test]
fn krm_is_atomic_and_results_carry_every_field() {
    let good = workload("Deployment", "good", "ns", true, SIMPLE_POD);
    let bad = workload(
        "Deployment",
        "bad",
        "ns",
        true,
        "containers:\n- name: app\n  image: x\n  env:\n  - name: NVCF_IDENTITY_SOURCE\n    value: spire\n",
    );
    let ann = |s: &str, i: usize| {
        s.replacen(
            "  labels:\n",
            &format!("  annotations:\n    config.kubernetes.io/path: apps/x.yaml\n    config.kubernetes.io/index: \"{i}\"\n  labels:\n"),
            1,
        )
    };
    let stream = [ann(&good, 0), ann(&bad, 1)].join("---\n");
    let input = resource_list(&stream, &cm_cfg());
    let k = krm(&input);
    k.code(1);
    // Unchanged items, byte for byte: the output starts with the input unchanged.
    assert!(
        k.stdout.starts_with(input.trim_end()),
        "items and config come out as they went in\n{k}"
    );
    let r = rl(&k);
    assert_eq!(items(&r), items(&docs(&input)[0]));
    let res = results(&r);
    let e = res
        .iter()
        .find(|x| x["severity"] == "error")
        .unwrap_or_else(|| panic!("{k}"));
    assert!(e["message"]
        .as_str()
        .unwrap()
        .contains("env NVCF_IDENTITY_SOURCE"));
    assert_eq!(
        e["resourceRef"],
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "bad", "namespace": "ns"})
    );
    assert_eq!(
        e["field"]["path"],
        "spec.template.spec.containers[0].env[0]"
    );
    assert_eq!(e["file"], json!({"path": "apps/x.yaml", "index": 1}));
    // The good workload was not injected either.
    assert!(!k.stdout.contains("nvcf-worker-good"), "{k}");
}

#[test]
fn skip_containers_annotation_leaves_named_containers_alone() {
    let spec =
        "containers:\n- name: app\n  image: x\n- name: a\n  image: x\n- name: b\n  image: x\n";
    let stream = workload("Deployment", "web", "ns", true, spec).replacen(
        "  labels:\n",
        "  annotations:\n    nvcf.io/skip-containers: \"a,b\"\n  labels:\n",
        1,
    );
    let (cli, fnout) = both_ways_as("per-workload", &stream);
    for objs in [&cli, &fnout] {
        assert_contract(objs, "Deployment", "web", "ns", &["app"]);
        let cs = at(&objs[3], "spec.template.spec.containers")
            .as_array()
            .unwrap();
        assert!(container_untouched(&cs[1]) && container_untouched(&cs[2]));
    }
}

/// inject never writes what its guard refuses (issue 44): a container it leaves
/// out (skipped, or an init container when init containers are not included)
/// that carries the contract's env or a mount where the token goes is refused,
/// naming the field; so is an account or automount the API server would refuse.
#[test]
fn a_left_out_container_with_the_contract_and_ill_typed_fields_are_refused() {
    let sidecar = "containers:\n- name: app\n  image: x\n- name: side\n  image: x\n  env:\n  - name: NVCF_IDENTITY_SOURCE\n    value: psat\n";
    let skipped = workload("Deployment", "web", "ns", true, sidecar).replacen(
        "  labels:\n",
        "  annotations:\n    nvcf.io/skip-containers: side\n  labels:\n",
        1,
    );
    assert_conflict(
        &skipped,
        "container \"side\" is skipped (nvcf.io/skip-containers), but it sets NVCF_IDENTITY_SOURCE itself",
    );
    let out = inject(&skipped, &[]);
    assert!(
        out.stderr
            .contains("spec.template.spec.containers[1].env[0]"),
        "{out}"
    );
    let init = "initContainers:\n- name: init\n  image: x\n  volumeMounts:\n  - name: d\n    mountPath: var/run/secrets/tokens\ncontainers:\n- name: app\n  image: x\nvolumes:\n- name: d\n  emptyDir: {}\n";
    assert_conflict(
        &workload("Deployment", "web", "ns", true, init),
        "container \"init\" is an init container and init containers are not included",
    );
    // Included, the same init container is a conflict of its own (a relative
    // path over the token directory), not a skipped one's.
    let out = inject(
        &workload("Deployment", "web", "ns", true, init),
        &["--include-init-containers"],
    );
    out.code(1);
    assert!(
        out.stderr
            .contains("is mounted at \"var/run/secrets/tokens\", at or under"),
        "{out}"
    );
    for (field, value, says) in [
        ("automountServiceAccountToken", "\"true\"", "automountServiceAccountToken is \"true\", which the API server refuses: it takes true or false"),
        ("serviceAccountName", "7", "serviceAccountName is 7, which the API server refuses: it takes a string"),
    ] {
        let spec = format!("{field}: {value}\ncontainers:\n- name: app\n  image: x\n");
        assert_conflict(&workload("Deployment", "web", "ns", true, &spec), says);
    }
    // `null` is unset to the API server: recorded as written, given back.
    let spec = "automountServiceAccountToken: null\ncontainers:\n- name: app\n  image: x\n";
    let input = workload("Deployment", "web", "ns", true, spec);
    let out = inject(&input, &[]);
    out.ok();
    run(&["validate", "-"], &out.stdout).ok();
    let back = run(&["uninject", "-f", "-"], &out.stdout);
    back.ok();
    assert_eq!(back.stdout, input);
}

/// A '..' segment: `/data/..cache` is an ordinary name; `/data/../x` may be
/// anywhere, so inject refuses it as possibly the token directory, as the
/// policies' CEL must.
#[test]
fn mount_paths_with_dot_dot_segments_are_refused_and_look_alikes_pass() {
    let spec = |path: &str| {
        format!("containers:\n- name: app\n  image: x\n  volumeMounts:\n  - name: d\n    mountPath: {path}\nvolumes:\n- name: d\n  emptyDir: {{}}\n")
    };
    let out = inject(
        &workload("Deployment", "web", "ns", true, &spec("/data/..cache")),
        &[],
    );
    out.ok();
    run(&["validate", "-"], &out.stdout).ok();
    assert_conflict(
        &workload("Deployment", "web", "ns", true, &spec("/data/../cache")),
        "with a '..' segment the admission policies cannot resolve",
    );
}

#[test]
fn init_containers_only_when_asked() {
    let spec = "initContainers:\n- name: init\n  image: x\ncontainers:\n- name: app\n  image: x\n";
    let stream = workload("Deployment", "web", "ns", true, spec);
    let init = |objs: &[Value]| at(&objs[3], "spec.template.spec.initContainers")[0].clone();
    let (cli, fnout) = both_ways_as("per-workload", &stream);
    assert!(container_untouched(&init(&cli)));
    assert!(container_untouched(&init(&fnout)));
    let out = inject_per_workload(&stream, &["--include-init-containers"]);
    out.ok();
    let objs = objects(&out.stdout);
    assert_contract(&objs, "Deployment", "web", "ns", &["app"]);
    assert!(container_has_identity(&init(&objs)));
    let k = krm(&resource_list(
        &stream,
        &typed_config("naming: per-workload\nclusterID: c1\nincludeInitContainers: true\n"),
    ));
    k.ok();
    let its = items(&rl(&k));
    assert!(container_has_identity(&init(&its)));
    let k = krm(&resource_list(
        &stream,
        &configmap_config(&[
            ("naming", "per-workload"),
            ("clusterID", "c1"),
            ("includeInitContainers", "true"),
        ]),
    ));
    k.ok();
    assert!(container_has_identity(&init(&items(&rl(&k)))));
}

#[test]
fn token_source_other_than_psat_injects_nothing_with_an_info() {
    let stream = workload("Deployment", "web", "ns", true, SIMPLE_POD);
    let out = inject(&stream, &["--token-source", "spire"]);
    out.ok();
    assert_eq!(objects(&out.stdout), objects(&stream), "{out}");
    assert!(out.stderr.contains("info"), "{out}");
    assert!(out.stderr.contains("spire"), "{out}");
    for cfg in [
        typed_config("clusterID: c1\ntokenSource: spire\n"),
        configmap_config(&[("clusterID", "c1"), ("tokenSource", "spire")]),
    ] {
        let input = resource_list(&stream, &cfg);
        let k = krm(&input);
        k.ok();
        let r = rl(&k);
        assert_eq!(items(&r), items(&docs(&input)[0]));
        let res = results(&r);
        assert_eq!(res.len(), 1, "{k}");
        assert_eq!(res[0]["severity"], "info");
        assert!(res[0]["message"].as_str().unwrap().contains("spire"));
    }
}

#[test]
fn empty_token_source_means_psat() {
    let stream = workload("Deployment", "web", "ns", true, SIMPLE_POD);
    let out = inject_per_workload(&stream, &["--token-source", ""]);
    out.ok();
    assert_contract(&objects(&out.stdout), "Deployment", "web", "ns", &["app"]);
    for cfg in [
        typed_config("naming: per-workload\nclusterID: c1\ntokenSource: \"\"\n"),
        configmap_config(&[
            ("naming", "per-workload"),
            ("clusterID", "c1"),
            ("tokenSource", ""),
        ]),
    ] {
        let k = krm(&resource_list(&stream, &cfg));
        k.ok();
        assert_contract(&items(&rl(&k)), "Deployment", "web", "ns", &["app"]);
    }
}

#[test]
fn missing_or_empty_cluster_id_is_an_error() {
    let stream = workload("Deployment", "web", "ns", true, SIMPLE_POD);
    for args in [vec![], vec!["--cluster-id", ""], vec!["--cluster-id", "  "]] {
        let out = inject_raw(&stream, &args);
        out.code(2); // a configuration mistake: usage
        assert!(out.stdout.is_empty(), "{out}");
        assert!(out.stderr.contains("clusterID is required"), "{out}");
    }
    for cfg in [
        typed_config("tokenSource: psat\n"),
        typed_config("clusterID: \"\"\n"),
        configmap_config(&[("clusterID", "")]),
        String::new(),
    ] {
        let input = resource_list(&stream, &cfg);
        let k = krm(&input);
        k.code(2); // the functionConfig's mistake: usage, as from a flag
        let r = rl(&k);
        assert_eq!(items(&r), items(&docs(&input)[0]));
        assert!(
            results(&r).iter().any(|x| x["severity"] == "error"
                && x["message"]
                    .as_str()
                    .unwrap()
                    .contains("clusterID is required")),
            "{k}"
        );
    }
}

#[test]
fn expiration_seconds_outside_range_is_an_error_saying_so() {
    let stream = workload("Deployment", "web", "ns", true, SIMPLE_POD);
    for bad in ["599", "86401", "0", "-5"] {
        let out = inject(&stream, &[&format!("--expiration-seconds={bad}")]);
        out.code(2);
        assert!(out.stdout.is_empty());
        assert!(out.stderr.contains("outside 600..86400"), "{out}");
        for cfg in [
            typed_config(&format!("clusterID: c1\nexpirationSeconds: {bad}\n")),
            configmap_config(&[("clusterID", "c1"), ("expirationSeconds", bad)]),
        ] {
            let k = krm(&resource_list(&stream, &cfg));
            k.code(2); // the functionConfig's mistake: usage, as from a flag
            let r = rl(&k);
            assert!(
                results(&r).iter().any(|x| x["severity"] == "error"
                    && x["message"]
                        .as_str()
                        .unwrap()
                        .contains("outside 600..86400")),
                "{k}"
            );
            assert!(!k.stdout.contains("nvcf-worker-web"));
        }
    }
    for ok in ["600", "86400"] {
        let out = inject(&stream, &["--expiration-seconds", ok]);
        out.ok();
        let objs = objects(&out.stdout);
        let vol = &at(&objs[3], "spec.template.spec.volumes")[0];
        assert_eq!(
            vol["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
            ok.parse::<i64>().unwrap()
        );
    }
}

#[test]
fn names_longer_than_253_are_shortened() {
    let long = "w".repeat(250);
    let stream = workload("Deployment", &long, "ns", true, SIMPLE_POD);
    let out = inject_per_workload(&stream, &[]);
    out.ok();
    let objs = objects(&out.stdout);
    let sa_name = at(&objs[3], "spec.template.spec.serviceAccountName")
        .as_str()
        .unwrap()
        .to_string();
    assert!(sa_name.len() <= 253, "{}", sa_name.len());
    assert!(sa_name.starts_with("nvcf-worker-www"));
    assert_ne!(sa_name, format!("nvcf-worker-{long}"));
    for (i, kind) in ["ServiceAccount", "Role", "RoleBinding"].iter().enumerate() {
        assert_eq!(objs[i]["kind"], *kind);
        assert_eq!(objs[i]["metadata"]["name"], sa_name.as_str());
    }
    assert_eq!(objs[2]["subjects"][0]["name"], sa_name.as_str());
    assert_eq!(objs[2]["roleRef"]["name"], sa_name.as_str());
    // Another long name with the same prefix gets a different identity.
    let other = format!("{}x", "w".repeat(249));
    let o2 = inject_per_workload(&workload("Deployment", &other, "ns", true, SIMPLE_POD), &[]);
    o2.ok();
    let n2 = at(
        &objects(&o2.stdout)[0],
        "spec.template.spec.serviceAccountName",
    )
    .clone();
    assert_ne!(n2, sa_name.as_str());
    // And the guard accepts the shortened identity.
    validate_stdin(&out.stdout).ok();
}

/// Lines whose text and style must survive untouched, in an unselected object and
/// inside the selected workload.
const FIDELITY_LINES: [&str; 28] = [
    "    mode: 0777",
    "    quoted-yes: \"yes\"",
    "    sci: 1e3",
    "    bare-on: on",
    "    bare-off: off",
    "    yy: y",
    "    nn: n",
    "    tilde: ~",
    "    hex: 0x1F",
    "    under: 1_000",
    "    dot: .5",
    "    oct: 012",
    "    t-quoted: \"true\"",
    "    t-bare: true",
    "    single: 'on'",
    "    date: 2001-12-14",
    "    stamp: 2001-12-14t21:59:43.10-05:00",
    "    block: |",
    "      line one",
    "      line two",
    "    folded: >-",
    "      folded text",
    "    flow: {a: 0777, b: \"yes\", c: [on, off, y, n, ~]}",
    "    \"yes\": quoted key",
    "    on: bare key",
    "    0777: octal key",
    "    seq:",
    "    - 0x1F",
];

#[test]
fn untouched_scalars_keep_text_and_style() {
    let data = FIDELITY_LINES.join("\n") + "\n    - \"012\"\n    - 1e3\n    - off\n";
    let cm = format!(
        "apiVersion: v1\nkind: Fake\nmetadata:\n  name: fid\n  namespace: ns\ndata:\n{}",
        data.lines()
            .map(|l| format!("{}\n", &l[2..]))
            .collect::<String>()
    );
    // Same lines inside the selected workload, under an unknown field of its pod spec.
    let w = workload(
        "Deployment",
        "web",
        "ns",
        true,
        &format!(
            "{SIMPLE_POD}extra:\n{}",
            data.lines()
                .map(|l| format!("{}\n", &l[2..]))
                .collect::<String>()
        ),
    );
    let stream = format!("{cm}---\n{w}");
    let out = inject(&stream, &[]);
    out.ok();
    for line in FIDELITY_LINES
        .iter()
        .chain(["    - \"012\"", "    - 1e3", "    - off"].iter())
    {
        let top = &line[2..];
        assert!(
            out.stdout.lines().any(|l| l == top),
            "unselected object keeps {top:?}\n{}",
            out.stdout
        );
        let deep = format!("{}{}", " ".repeat(6), top);
        assert!(
            out.stdout.lines().any(|l| l == deep),
            "selected workload keeps {deep:?}\n{}",
            out.stdout
        );
    }
    // The values are read the YAML 1.1 way, as kubectl does.
    let objs = objects(&out.stdout);
    let d = &objs[0]["data"];
    assert_eq!(d["mode"], 511);
    assert_eq!(d["quoted-yes"], "yes");
    assert_eq!(d["bare-on"], true);
    assert_eq!(d["yy"], true);
    assert_eq!(d["nn"], false);
    assert_eq!(d["511"], "octal key", "`0777` as a key is the int 511");
    assert_eq!(d["tilde"], Value::Null);
    assert_eq!(d["hex"], 31);
    assert_eq!(d["under"], 1000);
    assert_eq!(d["oct"], 10);
    assert_eq!(d["t-quoted"], "true");
    assert_eq!(d["true"], "bare key", "`on` as a key is the boolean true");
    // The KRM function keeps them too.
    let k = krm(&resource_list(&stream, &cm_cfg()));
    k.ok();
    for line in FIDELITY_LINES.iter() {
        let in_item = format!("  {}", &line[2..]);
        assert!(
            k.stdout.lines().any(|l| l == in_item),
            "KRM keeps {in_item:?}\n{}",
            k.stdout
        );
    }
}

#[test]
fn json_input_gives_json_compatible_output() {
    let pod = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "jp", "namespace": "ns", "labels": {"nvcf.io/worker": "true"}}, "spec": {"containers": [{"name": "a", "image": "x", "env": [{"name": "A", "value": "0777"}]}]}}"#;
    let svc = r#"{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "ns"}, "spec": {"ports": [{"port": 80}]}}"#;
    // A YAML stream of JSON documents: it starts with `---`, as kubectl 1.32 reads
    // a stream that starts with `{` as JSON only (`tests/json_io.rs`).
    let stream = format!("---\n{pod}\n---\n{svc}\n");
    let out = inject_per_workload(&stream, &[]);
    out.ok();
    // Every document of the output is one line of JSON: the input's lines as they
    // were (the pod's grown by its new entries), generated ones after a `---` line
    // of its own (kubectl refuses anything but a comment after `---` on its line).
    let mut parsed = Vec::new();
    for body in out.stdout.lines().filter(|l| *l != "---") {
        assert!(
            !body.starts_with("---"),
            "content on a marker line: {body}\n{out}"
        );
        parsed.push(
            serde_json::from_str::<Value>(body)
                .unwrap_or_else(|e| panic!("document is JSON ({e}): {body}")),
        );
    }
    assert_eq!(parsed.len(), 5);
    // What kubectl reads of it, both releases: the documents as written (the
    // stream starts with `---`, so kubectl 1.32 reads it as YAML, not as JSON).
    let read = kubectl_by_release(&[out.stdout.as_bytes()]);
    assert_eq!(read.len(), 2, "both oracles ran");
    for (release, per) in &read {
        assert_eq!(
            per[0],
            Ok(parsed.clone()),
            "{release}: JSON and kubectl's readings agree"
        );
    }
    assert_contract(&parsed, "Pod", "jp", "ns", &["a"]);
    assert_eq!(parsed[4], serde_json::from_str::<Value>(svc).unwrap());
    assert!(out.stdout.ends_with(&format!("---\n{svc}\n")), "{out}");
    assert_eq!(
        parsed[3]["spec"]["containers"][0]["env"][0]["value"],
        "0777"
    );
    // Injecting the output again changes nothing.
    let again = inject_per_workload(&out.stdout, &[]);
    again.ok();
    assert_eq!(again.stdout, out.stdout);
}

#[test]
fn output_json_flag() {
    let one = workload("Pod", "p", "ns", false, SIMPLE_POD);
    let out = inject_per_workload(&one, &["-o", "json"]);
    out.ok();
    let v: Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(v, objects(&one)[0], "one object alone is that object");
    let sel = workload("Deployment", "web", "ns", true, SIMPLE_POD);
    let out = inject_per_workload(&sel, &["-o", "json"]);
    out.ok();
    let v: Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(v["apiVersion"], "v1");
    assert_eq!(v["kind"], "List");
    assert_contract(
        v["items"].as_array().unwrap(),
        "Deployment",
        "web",
        "ns",
        &["app"],
    );
}

#[test]
fn bad_input_errors_name_file_document_and_line() {
    let dir = temp_tree(&[
        (
            "syntax.yaml",
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: [a\n",
        ),
        (
            "scalar.yaml",
            "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\n- just\n- a list\n",
        ),
        ("noapi.yaml", "kind: Service\nmetadata: {name: s}\n"),
        (
            "nokind.yaml",
            "---\n---\napiVersion: v1\nmetadata: {name: s}\n",
        ),
        (
            "dup.yaml",
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  name: t\n",
        ),
        ("empty.yaml", ""),
        ("comments.yaml", "# nothing here\n---\n"),
    ]);
    let cases: [(&str, &[&str]); 7] = [
        ("syntax.yaml", &["document 1", "invalid YAML", "line 5"]),
        ("scalar.yaml", &["document 2", "line 5", "not a mapping"]),
        (
            "noapi.yaml",
            &["document 1", "line 1", "missing apiVersion"],
        ),
        ("nokind.yaml", &["document 2", "line 3", "missing kind"]),
        (
            "dup.yaml",
            &[
                "document 1",
                "duplicate key \"name\"",
                "line 5",
                "first at line 4",
            ],
        ),
        ("empty.yaml", &["no Kubernetes objects"]),
        ("comments.yaml", &["no Kubernetes objects"]),
    ];
    for (file, needles) in cases {
        let p = path_str(&dir.path().join(file));
        let out = run(&["inject", "--cluster-id", "c1", "-f", &p], "");
        out.code(1);
        assert!(out.stdout.is_empty(), "{out}");
        assert!(out.stderr.contains(&p), "names the file {p}\n{out}");
        for n in needles {
            assert!(out.stderr.contains(n), "{file}: {n:?}\n{out}");
        }
    }
    // The same through stdin names <stdin>.
    let out = inject("apiVersion: v1\nkind: Service\nkind: Pod\n", &[]);
    out.code(1);
    assert!(out.stderr.contains("<stdin>: document 1"), "{out}");
    // A bad document anywhere stops everything: nothing on stdout.
    let mixed = format!(
        "{}---\napiVersion: v1\n",
        workload("Deployment", "web", "ns", true, SIMPLE_POD)
    );
    let out = inject(&mixed, &[]);
    out.code(1);
    assert!(out.stdout.is_empty(), "{out}");
    assert!(out.stderr.contains("document 2"), "{out}");
}

#[test]
fn bad_resource_lists_are_errors() {
    let cases: [(&str, &str); 4] = [
        ("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n", "ResourceList has no items list"),
        ("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: {a: 1}\n", "ResourceList has no items list"),
        ("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: [\n", "invalid YAML"),
        ("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nkind: ResourceList\nitems: []\n", "duplicate key"),
    ];
    for (input, needle) in cases {
        let out = krm(input);
        out.code(1);
        assert!(out.stderr.contains("<stdin>"), "{out}");
        assert!(out.stderr.contains("document 1"), "{out}");
        assert!(out.stderr.contains("line"), "{out}");
        assert!(out.stderr.contains(needle), "{needle}\n{out}");
    }
    let out = krm("");
    out.code(1);
    assert!(out.stderr.contains("empty input"), "{out}");
    assert!(out.stdout.is_empty());
    // An item that is not an object: answered with the list unchanged and a result.
    let input = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  metadata: {name: x}\nfunctionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  data: {clusterID: c1}\n";
    let out = krm(input);
    out.code(1);
    let r = rl(&out);
    assert_eq!(items(&r), items(&docs(input)[0]));
    let res = results(&r);
    assert!(
        res.iter().any(|x| x["severity"] == "error"
            && x["message"]
                .as_str()
                .unwrap()
                .contains("items[0]: missing kind")
            && x["tags"]["rule"] == "NVW001"),
        "{out}"
    );
}

#[test]
fn merge_keys_are_expanded_before_selection() {
    let stream = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: merged\n  namespace: ns\n  labels:\n    <<: {nvcf.io/worker: \"true\"}\n    app: web\nspec:\n  template:\n    metadata:\n      labels: &tpl\n        app: web\n    spec:\n      containers:\n      - &c\n        name: app\n        image: x\n      - <<: *c\n        name: side\n";
    let (cli, fnout) = both_ways_as("per-workload", stream);
    for objs in [&cli, &fnout] {
        assert_contract(objs, "Deployment", "merged", "ns", &["app", "side"]);
        assert_eq!(objs[3]["metadata"]["labels"]["nvcf.io/worker"], "true");
        assert_eq!(objs[3]["metadata"]["labels"]["app"], "web");
    }
    // Through an alias of a label mapping defined in the same document.
    let aliased = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: ns\n  annotations: &sel\n    nvcf.io/worker: \"true\"\n  labels:\n    <<: *sel\nspec:\n  containers:\n  - name: app\n    image: x\n";
    let out = inject_per_workload(aliased, &[]);
    out.ok();
    assert_contract(&objects(&out.stdout), "Pod", "p", "ns", &["app"]);
}

#[test]
fn unknown_fields_status_crds_and_tool_annotations_survive() {
    let annotations = "    config.kubernetes.io/path: apps/web.yaml\n    config.kubernetes.io/index: \"0\"\n    internal.config.kubernetes.io/path: apps/web.yaml\n    internal.config.kubernetes.io/index: \"0\"\n    internal.config.kubernetes.io/seqindent: compact\n    config.k8s.io/id: \"1\"\n    kustomize.config.k8s.io/id: |\n      kind: Deployment\n      name: web\n";
    let w = workload(
        "Deployment",
        "web",
        "ns",
        true,
        "futureField: {x: 1}\ncontainers:\n- name: app\n  image: x\n  newThing: [1, 2]\n",
    )
    .replacen("  labels:\n", &format!("  annotations:\n{annotations}  labels:\n"), 1)
        + "  unknownSpecField: keep\nstatus:\n  replicas: 3\n  conditions:\n  - type: Available\n    status: \"True\"\n";
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  names: {kind: Widget, plural: widgets}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n";
    let cr = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: ns\n  annotations:\n    config.kubernetes.io/path: apps/w.yaml\nspec:\n  anything: [on, 0777]\nstatus: {phase: Ready}\n";
    let stream = format!("{w}---\n{crd}---\n{cr}");
    let input = objects(&stream);
    let out = inject(&stream, &[]);
    out.ok();
    let objs = objects(&out.stdout);
    assert_eq!(objs[4], input[1], "the CRD is untouched");
    assert_eq!(objs[5], input[2], "the CR is untouched");
    let dep = &objs[3];
    assert_eq!(
        dep["metadata"]["annotations"],
        input[0]["metadata"]["annotations"]
    );
    assert_eq!(dep["status"], input[0]["status"]);
    assert_eq!(dep["spec"]["unknownSpecField"], "keep");
    assert_eq!(at(dep, "spec.template.spec.futureField"), &json!({"x": 1}));
    assert_eq!(
        at(dep, "spec.template.spec.containers")[0]["newThing"],
        json!([1, 2])
    );
    // Apart from the injected pod-spec fields, the workload is what it was.
    let strip = |mut v: Value| {
        let spec = v["spec"]["template"]["spec"].as_object_mut().unwrap();
        for k in [
            "serviceAccountName",
            "automountServiceAccountToken",
            "volumes",
        ] {
            spec.remove(k);
        }
        let c = spec["containers"][0].as_object_mut().unwrap();
        c.remove("volumeMounts");
        c.remove("env");
        v
    };
    assert_eq!(strip(dep.clone()), input[0]);
    // The trio does not copy the workload's kpt or kustomize annotations in a stream.
    for o in &objs[0..3] {
        let a = o["metadata"]["annotations"].as_object().unwrap();
        assert!(a.keys().all(|k| k.starts_with("nvcf.io/")), "{o}");
    }
    // And through KRM the same objects survive.
    let k = krm(&resource_list(&stream, &cm_cfg()));
    k.ok();
    let its = items(&rl(&k));
    assert_eq!(its[4], input[1]);
    assert_eq!(its[5], input[2]);
    assert_eq!(
        its[3]["metadata"]["annotations"],
        input[0]["metadata"]["annotations"]
    );
    assert_eq!(its[3]["status"], input[0]["status"]);
}

#[test]
fn krm_generated_objects_get_the_workload_path_and_fresh_indexes() {
    let ann = |path: &str, i: usize| {
        format!("  annotations:\n    config.kubernetes.io/path: {path}\n    config.kubernetes.io/index: \"{i}\"\n    internal.config.kubernetes.io/path: {path}\n    internal.config.kubernetes.io/index: \"{i}\"\n")
    };
    let with = |s: String, a: String| s.replacen("  labels:\n", &format!("{a}  labels:\n"), 1);
    let svc = |name: &str, a: String| {
        format!("apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: ns\n{a}")
    };
    let stream = [
        with(
            workload("Deployment", "a", "ns", true, SIMPLE_POD),
            ann("apps/a.yaml", 0),
        ),
        svc("a-svc", ann("apps/a.yaml", 1)),
        svc("b-svc", ann("apps/b.yaml", 0)),
        with(
            workload("Job", "b", "ns", true, SIMPLE_POD),
            ann("apps/b.yaml", 3),
        ),
        with(
            workload("Pod", "c", "ns", true, SIMPLE_POD),
            ann("apps/a.yaml", 2),
        ),
    ]
    .join("---\n");
    let k = krm(&resource_list(&stream, &cm_cfg_as("per-workload")));
    k.ok();
    let its = items(&rl(&k));
    assert_eq!(its.len(), 14);
    let mut seen = std::collections::HashSet::new();
    for it in &its {
        let a = &it["metadata"]["annotations"];
        let path = a["config.kubernetes.io/path"].as_str().unwrap().to_string();
        let index = a["config.kubernetes.io/index"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(a["internal.config.kubernetes.io/path"], path.as_str());
        assert_eq!(a["internal.config.kubernetes.io/index"], index.as_str());
        assert!(
            seen.insert((path, index.clone())),
            "index {index} reused: {it}"
        );
    }
    for (w, path) in [
        ("a", "apps/a.yaml"),
        ("b", "apps/b.yaml"),
        ("c", "apps/a.yaml"),
    ] {
        for kind in ["ServiceAccount", "Role", "RoleBinding"] {
            let o = find(&its, kind, &format!("nvcf-worker-{w}"));
            assert_eq!(
                o["metadata"]["annotations"]["config.kubernetes.io/path"],
                path
            );
        }
    }
    // Fresh indexes come after every existing one of the same file.
    let sa_b = find(&its, "ServiceAccount", "nvcf-worker-b");
    let ib: usize = sa_b["metadata"]["annotations"]["config.kubernetes.io/index"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(ib > 3, "{sa_b}");
    // Running the function again keeps everything (idempotent, no new items).
    let again = krm(&k.stdout);
    again.ok();
    assert_eq!(again.stdout, k.stdout);
}

#[test]
fn config_file_and_typed_selector() {
    let stream = [
        workload("Deployment", "a", "ns", true, SIMPLE_POD)
            .replace("nvcf.io/worker: \"true\"", "team: ml"),
        workload("Deployment", "b", "ns", true, SIMPLE_POD),
    ]
    .join("---\n");
    let cfg = typed_config(
        "naming: per-workload\nclusterID: c1\nselector:\n  matchLabels:\n    team: ml\n",
    );
    let dir = temp_tree(&[("cfg.yaml", &cfg)]);
    let p = path_str(&dir.path().join("cfg.yaml"));
    let out = run(
        &[
            "inject",
            "--naming",
            "per-workload",
            "-f",
            "-",
            "--config",
            &p,
        ],
        &stream,
    );
    out.ok();
    let objs = objects(&out.stdout);
    assert_contract(&objs, "Deployment", "a", "ns", &["app"]);
    assert!(!out.stdout.contains("nvcf-worker-b"), "{out}");
    let k = krm(&resource_list(&stream, &cfg));
    k.ok();
    assert_eq!(kinds_names(&items(&rl(&k))), kinds_names(&objs));
}

#[test]
fn block_scalar_at_end_of_input_without_line_break() {
    // libyaml-safer panicked here (a real corpus file ends this way). kubectl reads
    // the value with its final line break (checked with tests/go/oracle).
    for (indicator, want) in [
        ("|", "a\nb\n"),
        ("|+", "a\nb\n"),
        ("|-", "a\nb"),
        (">", "a b\n"),
    ] {
        let input = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  x: {indicator}\n    a\n    b"
        );
        let out = inject(&input, &[]);
        out.ok();
        assert_eq!(
            objects(&out.stdout)[0]["data"]["x"],
            want,
            "{indicator}\n{out}"
        );
        let v = validate_stdin(&input);
        v.ok();
    }
    // With the final line break the clip and keep values end in one.
    let input = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  x: |\n    a\n";
    let out = inject(input, &[]);
    out.ok();
    assert_eq!(objects(&out.stdout)[0]["data"]["x"], "a\n");
    // Errors at the very end of such input keep their real position.
    let out = inject("apiVersion: v1\nkind: ConfigMap\ndata: \"open", &[]);
    out.code(1);
    assert!(out.stderr.contains("(line 3, column 12)"), "{out}");
}

#[test]
fn templates_with_a_mapping_as_key_are_refused() {
    let input =
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n  config: {{config_data}}\n";
    let out = inject(input, &[]);
    out.code(1);
    assert!(out.stdout.is_empty());
    assert!(out.stderr.contains("<stdin>: document 1"), "{out}");
    assert!(
        out.stderr
            .contains("mapping or list used as a mapping key (line 6)"),
        "{out}"
    );
    let v = validate_stdin(input);
    v.code(1);
    assert!(v.stdout.starts_with("<stdin>:6: error NVW001: "), "{v}");
}

#[test]
fn conflicts_are_resolved_as_kubernetes_resolves_them() {
    // Kubernetes takes the last of duplicate env names: a right-looking first entry
    // cannot hide a second.
    let dup = "containers:\n- name: app\n  image: x\n  env:\n  - name: NVCF_IDENTITY_SOURCE\n    value: psat\n  - name: NVCF_IDENTITY_SOURCE\n    value: spire\n";
    assert_conflict(
        &workload("Deployment", "web", "ns", true, dup),
        "env NVCF_IDENTITY_SOURCE is set 2 times",
    );
    // A fake token file by subPath, a mount under the token directory, paths
    // that resolve to it (relative ones against `/`), and `..` anywhere (which
    // CEL cannot resolve: possibly there, for every face).
    for (path, sub, why) in [
        (
            "/var/run/secrets/tokens/token",
            "\n    subPath: token",
            "at or under",
        ),
        ("/var/run/secrets/tokens/extra", "", "at or under"),
        ("/var/run/secrets//tokens", "", "at or under"),
        ("/var/run/secrets/./tokens/", "", "at or under"),
        ("var/run/secrets/tokens", "", "at or under"),
        (
            "/var/run/secrets/x/../tokens",
            "",
            "with a '..' segment the admission policies cannot resolve, so possibly at or under",
        ),
        (
            "/data/../elsewhere",
            "",
            "with a '..' segment the admission policies cannot resolve, so possibly at or under",
        ),
    ] {
        let spec = format!("containers:\n- name: app\n  image: x\n  volumeMounts:\n  - name: fake\n    mountPath: {path}{sub}\nvolumes:\n- name: fake\n  configMap: {{name: fake}}\n");
        assert_conflict(
            &workload("Deployment", "web", "ns", true, &spec),
            &format!("volume \"fake\" is mounted at {path:?}, {why} /var/run/secrets/tokens"),
        );
    }
    // Look-alikes pass: another env name, a mount beside the directory.
    let fine = "containers:\n- name: app\n  image: x\n  env:\n  - name: NVCF_IDENTITY_SOURCES\n    value: x\n  - name: NVCF_IDENTITY_SOURCES\n    value: y\n  volumeMounts:\n  - name: other\n    mountPath: /var/run/secrets/tokens2\nvolumes:\n- name: other\n  emptyDir: {}\n";
    let out = inject_per_workload(&workload("Deployment", "web", "ns", true, fine), &[]);
    out.ok();
    assert_contract(&objects(&out.stdout), "Deployment", "web", "ns", &["app"]);
    // A Deployment without a namespace and a StatefulSet in `default`: the apply
    // may put both in one namespace.
    let omitted =
        workload("Deployment", "web", "", true, SIMPLE_POD).replace("  namespace: \n", "");
    assert!(!omitted.contains("namespace"), "{omitted}");
    let two = format!(
        "{omitted}---\n{}",
        workload("StatefulSet", "web", "default", true, SIMPLE_POD)
    );
    assert_conflict_as(
        "per-workload",
        &two,
        "would get identity \"nvcf-worker-web\"",
    );
    // An existing trio marked for another workload is not reused.
    let trio = inject_per_workload(&workload("Deployment", "web", "ns", true, SIMPLE_POD), &[]);
    trio.ok();
    let trio_only: Vec<String> = split_docs(&trio.stdout)
        .into_iter()
        .filter(|d| !d.contains("kind: Deployment"))
        .collect();
    let stream = format!(
        "{}---\n{}",
        workload("StatefulSet", "web", "ns", true, SIMPLE_POD),
        trio_only.join("---\n")
    );
    assert_conflict_as(
        "per-workload",
        &stream,
        "which is already Deployment/web (by ServiceAccount/ns/nvcf-worker-web)'s",
    );
}

#[test]
fn the_guard_runs_before_every_inject_whatever_the_token_source() {
    let thief = workload(
        "Pod",
        "thief",
        "ns",
        false,
        &format!("serviceAccountName: nvcf-worker\n{SIMPLE_POD}"),
    );
    let stream = format!(
        "{}---\n{thief}",
        workload("Deployment", "web", "ns", true, SIMPLE_POD)
    );
    for cfg in [
        typed_config("clusterID: c1\ntokenSource: spire\n"),
        configmap_config(&[("clusterID", "c1"), ("tokenSource", "spire")]),
    ] {
        let k = krm(&resource_list(&stream, &cfg));
        k.code(1);
        assert!(has_result(&k, "NVW101"), "{k}");
        // Without the forgery: nothing injected, exit 0.
        let k = krm(&resource_list(
            &workload("Deployment", "web", "ns", true, SIMPLE_POD),
            &cfg,
        ));
        k.ok();
    }
}

#[test]
fn per_namespace_naming_gives_one_nvcf_worker_per_namespace() {
    let stream = [
        workload("Deployment", "web", "a", true, SIMPLE_POD),
        workload("StatefulSet", "db", "a", true, SIMPLE_POD),
        workload("Job", "batch", "b", true, SIMPLE_POD),
    ]
    .join("---\n");
    for cfg in [
        typed_config("clusterID: c1\nnaming: per-namespace\n"),
        configmap_config(&[("clusterID", "c1"), ("naming", "per-namespace")]),
    ] {
        let k = krm(&resource_list(&stream, &cfg));
        k.ok();
        let objs = items(&rl(&k));
        let sas: Vec<(String, String)> = objs
            .iter()
            .filter(|o| o["kind"] == "ServiceAccount")
            .map(|o| {
                (
                    o["metadata"]["namespace"].as_str().unwrap().to_string(),
                    o["metadata"]["name"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            sas,
            [
                ("a".to_string(), "nvcf-worker".to_string()),
                ("b".into(), "nvcf-worker".into())
            ]
        );
        for o in &objs {
            if o["kind"] == "ServiceAccount" {
                assert_eq!(o["automountServiceAccountToken"], false);
                assert_eq!(
                    o["metadata"]["annotations"]["nvcf.io/identity-scope"],
                    "namespace"
                );
            }
            let text = o.to_string();
            assert!(
                !text.contains("nvca-infra-object"),
                "never the agent's annotation: {text}"
            );
            if let Some(spec) = ["Deployment", "StatefulSet", "Job"]
                .contains(&o["kind"].as_str().unwrap())
                .then(|| at(o, "spec.template.spec"))
            {
                assert_eq!(spec["serviceAccountName"], "nvcf-worker");
                assert_eq!(spec["automountServiceAccountToken"], false);
            }
        }
        // Its output validates clean and injects again unchanged.
        let yaml: String = objs
            .iter()
            .map(|o| "---\n".to_string() + &serde_json::to_string(o).unwrap())
            .collect::<Vec<_>>()
            .join("\n");
        validate_stdin(&yaml).ok();
        let again = krm(&resource_list(&yaml, &cfg));
        again.ok();
        assert_eq!(items(&rl(&again)), objs);
    }
    // Per-workload (the default) never writes the agent's annotation either, and
    // its ServiceAccount does not automount.
    let out = inject(&stream, &[]);
    out.ok();
    assert!(!out.stdout.contains("nvca-infra-object"));
    for o in objects(&out.stdout)
        .iter()
        .filter(|o| o["kind"] == "ServiceAccount")
    {
        assert_eq!(o["automountServiceAccountToken"], false);
    }
}

/// A namespace's `nvcf-worker` declared by an earlier run further down the
/// stream, and a bare Pod injected above it now: kubectl apply would create the
/// Pod first, which the API server refuses, so inject warns (CLI and KRM) and
/// says what to move. Look-alikes stay quiet: the trio above the Pod, and a
/// Deployment above the trio (its pods are retried and wait for the account).
#[test]
fn a_pod_above_its_existing_account_is_warned_about() {
    let pod = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ns1, labels: {{nvcf.io/worker: \"true\"}}}}\nspec:\n  containers: [{{name: c, image: nginx}}]\n"
        )
    };
    let first = inject(&pod("b"), &["-q"]);
    first.ok();
    // The first run's output (trio, then Pod b) with Pod a added at the top.
    let later = format!("{}---\n{}", pod("a"), first.stdout);
    let out = inject(&later, &[]);
    out.ok();
    let warned = |text: &str| text.contains("this Pod comes before ServiceAccount \"nvcf-worker\"");
    assert!(
        warned(&out.stderr) && out.stderr.contains("Pod/ns1/a spec.serviceAccountName"),
        "{out}"
    );
    assert_eq!(
        out.stderr.matches("comes before ServiceAccount").count(),
        1,
        "only Pod a: {out}"
    );
    let k = krm(&resource_list(&later, &cm_cfg()));
    k.ok();
    assert!(
        results(&rl(&k)).iter().any(|r| r["severity"] == "warning"
            && r["message"].as_str().is_some_and(warned)
            && r["resourceRef"]["name"] == "a"),
        "{k}"
    );
    // Look-alikes: the trio above the Pod; a Deployment above the trio.
    let below = format!("{}---\n{}", first.stdout, pod("a"));
    let quiet = inject(&below, &[]);
    quiet.ok();
    assert!(
        !quiet.stderr.contains("comes before ServiceAccount"),
        "{quiet}"
    );
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: ns1}\nspec:\n  template:\n    metadata: {labels: {nvcf.io/worker: \"true\"}}\n    spec: {containers: [{name: c, image: nginx}]}\n";
    let quiet = inject(&format!("{deployment}---\n{}", first.stdout), &[]);
    quiet.ok();
    assert!(
        !quiet.stderr.contains("comes before ServiceAccount"),
        "{quiet}"
    );
}
