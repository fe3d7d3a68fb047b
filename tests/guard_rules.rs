//! The guard: for every rule a manifest that must be rejected and a close look-alike
//! that must pass, through `validate`, the KRM function in validate mode (typed and
//! ConfigMap config) and `inject` (a forged reference blocks injection).

use crate::support;

use serde_json::Value;
use support::cases::*;
use support::*;

fn write(name: &str, text: &str) -> (tempfile::TempDir, String) {
    let dir = temp_tree(&[(name, text)]);
    let p = path_str(&dir.path().join(name));
    (dir, p)
}

/// Checks one finding line: `path:line: severity rule-id: message (context)`.
#[track_caller]
fn assert_finding_line(line: &str, path: &str, severity: &str, rule: &str, context: &str) {
    let rest = line
        .strip_prefix(&format!("{path}:"))
        .unwrap_or_else(|| panic!("starts with {path}: {line}"));
    let (num, rest) = rest.split_once(": ").expect("line number");
    assert!(
        num.parse::<u32>().is_ok_and(|n| n > 0),
        "line number in {line}"
    );
    assert!(
        rest.starts_with(&format!("{severity} {rule}: ")),
        "{severity} {rule} in {line}"
    );
    assert!(rest.ends_with(context), "ends with {context:?}: {line}");
    assert!(rest.contains(" ("), "{line}");
}

fn validate_cfgs() -> [String; 2] {
    [
        typed_config("mode: validate\n"),
        configmap_config(&[("mode", "validate")]),
    ]
}

#[test]
fn every_rule_rejects_the_bad_and_passes_the_look_alike() {
    let cases = cases();
    for rule in [
        "NVW101", "NVW102", "NVW103", "NVW104", "NVW105", "NVW106", "NVW107", "NVW108", "NVW109",
        "NVW110", "NVW111", "NVW112", "NVW113", "NVW114", "NVW115", "NVW116", "NVW117",
    ] {
        assert!(cases.iter().any(|c| c.rule == rule), "a case for {rule}");
    }
    for c in &cases {
        let ctx = format!("[{} {}]", c.rule, c.what);
        // validate: the bad one.
        let (_d, p) = write("bad.yaml", &c.bad);
        let out = run(&["validate", &p], "");
        out.code(if c.severity == "error" { 1 } else { 0 });
        let lines = finding_lines(&out);
        assert_eq!(lines.len(), 1, "{ctx} one finding\n{out}\n{}", c.bad);
        assert_finding_line(&lines[0], &p, c.severity, c.rule, &c.context);
        let (e, w) = if c.severity == "error" {
            (1, 0)
        } else {
            (0, 1)
        };
        assert_eq!(
            summary(&out),
            format!(
                "{e} error{}, {w} warning{} in 1 file",
                if e == 1 { "" } else { "s" },
                if w == 1 { "" } else { "s" }
            ),
            "{ctx}"
        );
        // validate: the look-alike.
        let (_d2, p2) = write("good.yaml", &c.good);
        let out = run(&["validate", &p2], "");
        out.ok();
        assert_eq!(
            out.stdout, "0 errors, 0 warnings in 1 file\n",
            "{ctx}\n{}",
            c.good
        );
        // KRM validate mode, both config forms.
        for cfg in validate_cfgs() {
            let input = resource_list(&c.bad, &cfg);
            let k = krm(&input);
            k.code(if c.severity == "error" { 1 } else { 0 });
            assert!(
                k.stdout.starts_with(input.trim_end()),
                "{ctx} items pass through unchanged\n{k}"
            );
            let r = rl(&k);
            assert_eq!(items(&r), items(&docs(&input)[0]));
            let res = results(&r);
            assert_eq!(res.len(), 1, "{ctx}\n{k}");
            assert_eq!(res[0]["severity"], c.severity);
            assert_eq!(res[0]["tags"]["rule"], c.rule);
            assert!(res[0]["message"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{}: ", c.rule)));
            assert!(res[0]["resourceRef"]["kind"].is_string());
            assert!(res[0]["field"]["path"].is_string());
            let good = resource_list(&c.good, &cfg);
            let k = krm(&good);
            k.ok();
            assert_eq!(k.stdout, good, "{ctx} a clean list comes out as it went in");
        }
        // inject: an error blocks injection of an unrelated selected workload.
        let sel = workload("Deployment", "web", "ns", true, SIMPLE_POD);
        let stream = format!("{sel}---\n{}", c.bad);
        let out = inject_per_workload(&stream, &[]);
        assert!(out.stderr.contains(c.rule), "{ctx}\n{out}");
        if c.severity == "error" {
            out.code(1);
            assert!(out.stdout.is_empty(), "{ctx}\n{out}");
        } else {
            out.ok();
            assert_contract(&objects(&out.stdout), "Deployment", "web", "ns", &["app"]);
        }
        let out = inject_per_workload(&format!("{sel}---\n{}", c.good), &[]);
        out.ok();
        assert!(!out.stderr.contains("NVW"), "{ctx}\n{out}");
    }
}

#[test]
fn forged_reference_blocks_injection_atomically() {
    // Another object claims the identity inject is about to create.
    let sel = workload("Deployment", "web", "ns", true, SIMPLE_POD);
    let thief = workload(
        "Pod",
        "thief",
        "ns",
        false,
        &format!("serviceAccountName: nvcf-worker-web\n{SIMPLE_POD}"),
    );
    let stream = format!("{sel}---\n{thief}");
    let out = inject_per_workload(&stream, &[]);
    out.code(1);
    assert!(out.stdout.is_empty(), "{out}");
    assert!(out.stderr.contains("error NVW101"), "{out}");
    assert!(
        out.stderr.contains("Pod/ns/thief spec.serviceAccountName"),
        "{out}"
    );
    let input = resource_list(
        &stream,
        &configmap_config(&[("naming", "per-workload"), ("clusterID", CLUSTER)]),
    );
    let k = krm(&input);
    k.code(1);
    assert!(k.stdout.starts_with(input.trim_end()), "{k}");
    let r = rl(&k);
    assert_eq!(items(&r), items(&docs(&input)[0]));
    assert!(results(&r)
        .iter()
        .any(|x| x["tags"]["rule"] == "NVW101" && x["resourceRef"]["name"] == "thief"));
    // The selected workload naming its own derived account is what inject produces.
    let own = workload(
        "Deployment",
        "web",
        "ns",
        true,
        &format!("serviceAccountName: nvcf-worker-web\n{SIMPLE_POD}"),
    );
    let out = inject_per_workload(&own, &[]);
    out.ok();
    assert_contract(&objects(&out.stdout), "Deployment", "web", "ns", &["app"]);
}

#[test]
fn the_transformer_output_is_the_exception() {
    let stream = KINDS
        .iter()
        .map(|k| {
            workload(
                k,
                &format!("w-{}", k.to_lowercase()),
                "ns",
                true,
                SIMPLE_POD,
            )
        })
        .collect::<Vec<_>>()
        .join("---\n");
    let out = inject(&stream, &[]);
    out.ok();
    let v = validate_stdin(&out.stdout);
    v.ok();
    assert_eq!(v.stdout, "0 errors, 0 warnings in 1 file\n");
    for cfg in validate_cfgs() {
        let k = krm(&resource_list(&out.stdout, &cfg));
        k.ok();
        assert!(results(&rl(&k)).is_empty(), "{k}");
    }
    // The trio may sit in another file of the same run.
    let docs_out = split_docs(&out.stdout);
    let (workloads, trios): (Vec<_>, Vec<_>) = docs_out.iter().partition(|d| {
        !d.contains("\nkind: ServiceAccount\n")
            && !d.contains("\nkind: Role\n")
            && !d.contains("\nkind: RoleBinding\n")
    });
    let w = workloads
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join("---\n");
    let t = trios
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join("---\n");
    let dir = temp_tree(&[("apps/workloads.yaml", &w), ("rbac/identity.yaml", &t)]);
    let v = run(&["validate", &path_str(dir.path())], "");
    v.ok();
    assert_eq!(v.stdout, "0 errors, 0 warnings in 2 files\n");
    // The same workloads without their trio: each is rejected.
    let v = run(
        &[
            "validate",
            &path_str(&dir.path().join("apps/workloads.yaml")),
        ],
        "",
    );
    v.code(1);
    let lines = finding_lines(&v);
    assert_eq!(lines.len(), KINDS.len(), "{v}");
    assert!(lines.iter().all(|l| l.contains("error NVW101")), "{v}");
    // With a Role that has rules: the Role and the workload are rejected.
    let one = inject(&workload("Deployment", "web", "ns", true, SIMPLE_POD), &[]);
    one.ok();
    let widened = one.stdout.replace(
        "rules: []",
        "rules:\n- apiGroups: [\"\"]\n  resources: [secrets]\n  verbs: [get]",
    );
    assert_ne!(widened, one.stdout);
    let v = validate_stdin(&widened);
    v.code(1);
    assert!(v.stdout.contains("error NVW104"), "{v}");
    assert!(v.stdout.contains("error NVW101"), "{v}");
    // An SA that automounts, or a binding that grants more, also breaks the exception.
    let automount = one.stdout.replacen(
        "automountServiceAccountToken: false\n---\napiVersion: rbac",
        "automountServiceAccountToken: true\n---\napiVersion: rbac",
        1,
    );
    assert_ne!(automount, one.stdout);
    let v = validate_stdin(&automount);
    v.code(1);
    assert!(v.stdout.contains("error NVW101"), "{v}");
    // The RoleBinding is the last document before the workload's.
    let rb_end = one.stdout.rfind("---\n").unwrap();
    let extra_subject = format!(
        "{}- kind: ServiceAccount\n  name: ci\n  namespace: ns\n{}",
        &one.stdout[..rb_end],
        &one.stdout[rb_end..]
    );
    let v = validate_stdin(&extra_subject);
    v.code(1);
    assert!(v.stdout.contains("error NVW101"), "{v}");
    assert!(v.stdout.contains("error NVW102"), "{v}");
    // A pod spec elsewhere in the object may not borrow the identity.
    let borrowed = one.stdout.replacen(
        "spec:\n  selector:",
        "spec:\n  sidecarTemplate:\n    serviceAccountName: nvcf-worker-web\n    containers: [{name: s, image: x}]\n  selector:",
        1,
    );
    assert_ne!(borrowed, one.stdout);
    let v = validate_stdin(&borrowed);
    v.code(1);
    assert!(
        v.stdout.contains("NVW101") && v.stdout.contains("spec.sidecarTemplate.serviceAccountName"),
        "{v}"
    );
}

#[test]
fn transformer_binding_passes_and_a_copy_elsewhere_does_not() {
    let one = inject_per_workload(&workload("Deployment", "web", "ns", true, SIMPLE_POD), &[]);
    one.ok();
    let rb = split_docs(&one.stdout)
        .into_iter()
        .find(|d| d.contains("kind: RoleBinding"))
        .unwrap();
    validate_stdin(&rb).ok();
    // The same subjects under another binding name, or bound to another role.
    let renamed = rb.replacen("  name: nvcf-worker-web\n", "  name: sneaky\n", 1);
    assert_ne!(renamed, rb);
    let v = validate_stdin(&renamed);
    v.code(1);
    assert!(v.stdout.contains("error NVW102"), "{v}");
    let admin = rb.replacen(
        "kind: Role\n  name: nvcf-worker-web",
        "kind: ClusterRole\n  name: admin",
        1,
    );
    assert_ne!(admin, rb);
    let v = validate_stdin(&admin);
    v.code(1);
    assert!(v.stdout.contains("error NVW102"), "{v}");
    // A subject without a namespace is the binding's namespace's account (as RBAC
    // reads it): still the transformer's binding; a subject in another namespace is not.
    let subject = "  kind: ServiceAccount\n  namespace: ns\n";
    assert!(one.stdout.contains(subject), "{one}");
    let bare = one.stdout.replacen(subject, "  kind: ServiceAccount\n", 1);
    validate_stdin(&bare).ok();
    let elsewhere = one
        .stdout
        .replacen(subject, "  kind: ServiceAccount\n  namespace: other\n", 1);
    let v = validate_stdin(&elsewhere);
    v.code(1);
    assert!(v.stdout.contains("error NVW102"), "{v}");
}

#[test]
fn duplicate_keys_and_unparsable_files_are_reported_with_position() {
    let dir = temp_tree(&[
        ("dup.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  serviceAccountName: default\n  containers: []\n  serviceAccountName: nvcf-worker-x\n"),
        ("broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [p\n"),
        ("notmap.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\n- a\n"),
        ("nokind.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\napiVersion: v1\nmetadata: {name: q}\n"),
    ]);
    let p = |f: &str| path_str(&dir.path().join(f));
    let out = run(&["validate", &path_str(dir.path())], "");
    out.code(1);
    let lines = finding_lines(&out);
    assert_eq!(lines.len(), 4, "{out}");
    let line_for = |f: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(&format!("{}:", p(f))))
            .unwrap_or_else(|| panic!("{f}\n{out}"))
            .clone()
    };
    let dup = line_for("dup.yaml");
    assert!(
        dup.starts_with(&format!(
            "{}:8: error NVW001: duplicate key \"serviceAccountName\"",
            p("dup.yaml")
        )),
        "{dup}"
    );
    assert!(dup.contains("first at line 6"), "{dup}");
    let broken = line_for("broken.yaml");
    assert!(
        broken.starts_with(&format!(
            "{}:5: error NVW001: invalid YAML",
            p("broken.yaml")
        )),
        "{broken}"
    );
    assert!(broken.contains("(line 5, column 1)"), "{broken}");
    assert!(
        line_for("notmap.yaml").contains(":5: error NVW001: document 2: document is not a mapping"),
        "{out}"
    );
    assert!(
        line_for("nokind.yaml").contains(":5: error NVW001: document 2: missing kind"),
        "{out}"
    );
    assert_eq!(summary(&out), "4 errors, 0 warnings in 4 files");
    // KRM: an item that is not an object is an NVW001 result.
    for cfg in validate_cfgs() {
        let input = format!("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {{name: p}}\n- just a string\nfunctionConfig:\n{}", indent(&cfg, 2));
        let k = krm(&input);
        k.code(1);
        let r = rl(&k);
        assert_eq!(items(&r), items(&docs(&input)[0]));
        let res = results(&r);
        assert_eq!(res.len(), 1, "{k}");
        assert_eq!(res[0]["tags"]["rule"], "NVW001");
        assert!(res[0]["message"].as_str().unwrap().contains("items[1]"));
    }
}

#[test]
fn json_documents_are_accepted() {
    let good = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": {"serviceAccountName": "runner", "containers": [{"name": "a", "image": "x"}]}}"#;
    let bad = good.replace("\"runner\"", "\"nvcf-worker-p\"");
    let dir = temp_tree(&[("good.json", good), ("bad.json", &bad)]);
    let out = run(&["validate", &path_str(&dir.path().join("good.json"))], "");
    out.ok();
    assert_eq!(out.stdout, "0 errors, 0 warnings in 1 file\n");
    let bp = path_str(&dir.path().join("bad.json"));
    let out = run(&["validate", &bp], "");
    out.code(1);
    let lines = finding_lines(&out);
    assert_eq!(lines.len(), 1);
    assert_finding_line(
        &lines[0],
        &bp,
        "error",
        "NVW101",
        "Pod/ns/p spec.serviceAccountName)",
    );
    // A JSON duplicate key is as bad as a YAML one.
    let dup = good.replace(
        "\"kind\": \"Pod\",",
        "\"kind\": \"Pod\", \"kind\": \"Pod\",",
    );
    let out = validate_stdin(&dup);
    out.code(1);
    assert!(
        out.stdout
            .contains("<stdin>:1: error NVW001: duplicate key \"kind\""),
        "{out}"
    );
}

#[test]
fn many_files_directories_and_yaml_that_is_not_kubernetes() {
    let forged = workload(
        "Deployment",
        "d",
        "ns",
        false,
        &format!("serviceAccountName: nvcf-worker-z\n{SIMPLE_POD}"),
    );
    let clean = workload("Deployment", "c", "ns", false, SIMPLE_POD);
    let dir = temp_tree(&[
        ("a/clean.yaml", &clean),
        ("a/b/c/deep.yml", &forged),
        ("a/b/values.yaml", "replicas: 3\nimage:\n  tag: v1\n"),
        ("a/b/list.yaml", "- one\n- two\n"),
        ("a/notes.txt", "serviceAccountName: nvcf-worker-x\n"),
        ("a/b/warn.json", "{\"apiVersion\": \"rbac.authorization.k8s.io/v1\", \"kind\": \"ClusterRoleBinding\", \"metadata\": {\"name\": \"g\"}, \"roleRef\": {\"apiGroup\": \"rbac.authorization.k8s.io\", \"kind\": \"ClusterRole\", \"name\": \"view\"}, \"subjects\": [{\"kind\": \"Group\", \"name\": \"system:serviceaccounts\", \"apiGroup\": \"rbac.authorization.k8s.io\"}]}\n"),
        ("other.yaml", &token_secret("nvcf-worker-z", "kubernetes.io/service-account-token")),
    ]);
    let root = dir.path();
    let out = run(
        &[
            "validate",
            &path_str(&root.join("a")),
            &path_str(&root.join("other.yaml")),
        ],
        "",
    );
    out.code(1);
    let lines = finding_lines(&out);
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines.iter().any(|l| l
            .starts_with(&format!("{}:", path_str(&root.join("a/b/c/deep.yml"))))
            && l.contains("error NVW101")),
        "{out}"
    );
    assert!(
        lines.iter().any(
            |l| l.starts_with(&format!("{}:", path_str(&root.join("other.yaml"))))
                && l.contains("error NVW106")
        ),
        "{out}"
    );
    assert!(
        lines.iter().any(
            |l| l.starts_with(&format!("{}:", path_str(&root.join("a/b/warn.json"))))
                && l.contains("warning NVW103")
        ),
        "{out}"
    );
    assert!(
        !out.stdout.contains("notes.txt")
            && !out.stdout.contains("values.yaml")
            && !out.stdout.contains("list.yaml"),
        "{out}"
    );
    assert_eq!(summary(&out), "2 errors, 1 warning in 6 files");
    // Warnings only: exit 0.
    let out = run(
        &[
            "validate",
            &path_str(&root.join("a/b/warn.json")),
            &path_str(&root.join("a/clean.yaml")),
        ],
        "",
    );
    out.ok();
    assert_eq!(summary(&out), "0 errors, 1 warning in 2 files");
    // Only non-Kubernetes YAML: quietly clean.
    let out = run(
        &[
            "validate",
            &path_str(&root.join("a/b/values.yaml")),
            &path_str(&root.join("a/b/list.yaml")),
        ],
        "",
    );
    out.ok();
    assert_eq!(out.stdout, "0 errors, 0 warnings in 2 files\n");
}

#[test]
fn output_json_report() {
    let forged = workload(
        "Deployment",
        "d",
        "ns",
        false,
        &format!("serviceAccountName: nvcf-worker-z\n{SIMPLE_POD}"),
    );
    let grp = binding(
        "ClusterRoleBinding",
        "kind: Group\n  name: system:serviceaccounts\n  apiGroup: rbac.authorization.k8s.io",
    );
    let dir = temp_tree(&[("x.yaml", &format!("{forged}---\n{grp}"))]);
    let p = path_str(&dir.path().join("x.yaml"));
    let out = run(&["validate", "-o", "json", &p], "");
    out.code(1);
    let v: Value = serde_json::from_str(&out.stdout).expect("JSON report");
    assert_eq!(
        v["apiVersion"], "report.nvcf.io/v1alpha1",
        "the live reports' group"
    );
    assert_eq!(v["kind"], "ValidationReport");
    // -o yaml is the same report.
    let yaml = run(&["validate", "-o", "yaml", &p], "");
    yaml.code(1);
    assert_eq!(support::docs(&yaml.stdout), vec![v.clone()]);
    assert_eq!(v["files"], 1);
    assert_eq!(v["errors"], 1);
    assert_eq!(v["warnings"], 1);
    let f = v["findings"].as_array().unwrap();
    assert_eq!(f.len(), 2);
    assert_eq!(f[0]["severity"], "error");
    assert_eq!(f[0]["rule"], "NVW101");
    assert_eq!(f[0]["file"], p.as_str());
    assert_eq!(f[0]["index"], 0);
    assert_eq!(f[0]["line"], 17);
    assert_eq!(f[0]["field"], "spec.template.spec.serviceAccountName");
    assert_eq!(f[0]["resource"]["name"], "d");
    assert_eq!(f[1]["severity"], "warning");
    assert_eq!(f[1]["rule"], "NVW103");
    assert_eq!(f[1]["index"], 1);
    // Clean: exit 0, empty findings.
    let out = run(
        &["validate", "-o", "json", "-"],
        &SIMPLE_POD.replace("containers", "x"),
    );
    out.ok();
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["errors"], 0);
    assert_eq!(v["findings"], serde_json::json!([]));
}

#[test]
fn usage_exits_2_and_an_unreadable_file_1() {
    let out = run(&["validate", "--no-such-flag", "x.yaml"], "");
    out.code(2);
    let out = run(&["validate", "/definitely/not/here.yaml"], "");
    out.code(1);
    assert!(out.stderr.contains("/definitely/not/here.yaml"), "{out}");
    let out = run(&["validate", "-o", "xml", "-"], "");
    out.code(2);
}

#[test]
fn only_the_exact_transformer_output_is_exempt() {
    let one = inject_per_workload(&workload("Deployment", "web", "ns", true, SIMPLE_POD), &[]);
    one.ok();
    validate_stdin(&one.stdout).ok();
    let rejected = |stream: &str, needle: &str| {
        let v = validate_stdin(stream);
        v.code(1);
        assert!(v.stdout.contains("error NVW101"), "{v}");
        assert!(v.stdout.contains(needle), "{needle}\n{v}");
        for cfg in validate_cfgs() {
            let k = krm(&resource_list(stream, &cfg));
            k.code(1);
            assert!(has_result(&k, "NVW101"), "{k}");
        }
    };
    // A StatefulSet of the same name borrowing the Deployment's identity.
    let trio = injected_trio("Deployment", "web", Some("ns"));
    let borrowed = one
        .stdout
        .replacen("kind: Deployment", "kind: StatefulSet", 1);
    rejected(
        &borrowed,
        "marked for apps/v1 Deployment/web, not this StatefulSet",
    );
    // A 136-year token, another path, or a token volume without its mount.
    let long = one
        .stdout
        .replace("expirationSeconds: 900", "expirationSeconds: 4294967296");
    assert_ne!(long, one.stdout);
    rejected(&long, "not the contract's projected token");
    let path = one.stdout.replace("path: token", "path: tok");
    assert_ne!(path, one.stdout);
    rejected(&path, "not the contract's projected token");
    let unmounted = one.stdout.replace(
        "          mountPath: /var/run/secrets/tokens\n",
        "          mountPath: /data\n",
    );
    assert_ne!(unmounted, one.stdout);
    rejected(&unmounted, "mounted otherwise");
    // A pod with a hand-written trio (no marks) and the right-looking spec.
    let unmarked = one.stdout.replace(
        "    app.kubernetes.io/managed-by: kubectl-nvcf-worker\n",
        "",
    );
    assert_ne!(unmarked, one.stdout);
    let v = validate_stdin(&unmarked);
    v.code(1);
    assert!(
        v.stdout.contains("error NVW101") && v.stdout.contains("error NVW109"),
        "{v}"
    );
    // The same trio declared in another file of the run is still exact.
    let dir = temp_tree(&[("a.yaml", &split_docs(&one.stdout)[0]), ("b.yaml", &trio)]);
    run(&["validate", &path_str(dir.path())], "").ok();
}

#[test]
fn a_long_names_hashed_identity_cannot_be_taken_by_a_short_name() {
    let long = "a".repeat(250);
    let hashed = {
        let out = inject_per_workload(&workload("Deployment", &long, "ns", true, SIMPLE_POD), &[]);
        out.ok();
        objects(&out.stdout)
            .iter()
            .find(|o| o["kind"] == "ServiceAccount")
            .unwrap()["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let short = hashed.strip_prefix("nvcf-worker-").unwrap();
    let stream = [
        workload("Deployment", &long, "ns", true, SIMPLE_POD),
        workload("Job", short, "ns", true, SIMPLE_POD),
    ]
    .join("---\n");
    let out = inject_per_workload(&stream, &[]);
    out.code(1);
    assert!(out.stdout.is_empty());
    assert!(out.stderr.contains("error NVW113"), "{out}");
    // Each injected on its own, then validated together: the trios collide.
    let a = inject_per_workload(&workload("Deployment", &long, "ns", true, SIMPLE_POD), &[]);
    let b = inject_per_workload(&workload("Job", short, "ns", true, SIMPLE_POD), &[]);
    let v = validate_stdin(&format!("{}---\n{}", a.stdout, b.stdout));
    v.code(1);
    assert!(v.stdout.contains("error NVW113"), "{v}");
}
