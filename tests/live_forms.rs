//! kubectl's output forms on the live commands against the real control plane:
//! `-o name` and `-o custom-columns` held to what the real kubectl prints for
//! the same objects, `jsonpath` to the command's own JSON document, and
//! `--no-headers`, `--sort-by`, `audit -l` and the refusals.

use crate::live_support;

use live_support::*;
use serde_json::{json, Value};

const ANY_AGE: [&str; 2] = ["--min-age", "0s"];
const ANY_AGE_CLEANUP: [&str; 3] = ["cleanup", "--min-age", "0s"];

fn seeded() -> Cluster {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-runner");
    c.seed_pod(&ns, "runner", "nvcf-worker-runner", "Running");
    c.seed_trio(&ns, "nvcf-worker-gone");
    c.seed_trio(&ns, "nvcf-worker-a-much-longer-name");
    c
}

/// kubectl's own output for `args` in the cluster's namespace, without the
/// namespace's `default` ServiceAccount (not a worker identity).
fn kubectl_lines(c: &Cluster, args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = ok(&kubectl(
        dir.path(),
        &c.admin_kubeconfig,
        &[args, &["-n", &c.ns]].concat(),
    ));
    out.lines()
        .filter(|l| !l.starts_with("default ") && *l != "serviceaccount/default" && *l != "default")
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn name_and_custom_columns_print_as_kubectl_prints_the_same_accounts() {
    let c = seeded();
    let ours = ok(&c.run(&[&["list", "-o", "name", "--sort-by", ".name"][..], &ANY_AGE].concat()));
    let theirs = kubectl_lines(
        &c,
        &[
            "get",
            "serviceaccounts",
            "-o",
            "name",
            "--sort-by",
            ".metadata.name",
        ],
    );
    assert_eq!(ours, theirs);
    assert_eq!(ours.lines().count(), 3, "{ours}");

    let ours = ok(&c.run(
        &[
            &[
                "list",
                "-o",
                "custom-columns=NAME:.name,NAMESPACE:.namespace,MISSING:.nothing",
                "--sort-by",
                "{.name}",
            ][..],
            &ANY_AGE,
        ]
        .concat(),
    ));
    let theirs = kubectl_lines(
        &c,
        &[
            "get",
            "serviceaccounts",
            "-o",
            "custom-columns=NAME:.metadata.name,NAMESPACE:.metadata.namespace,MISSING:.nothing",
            "--sort-by",
            "{.metadata.name}",
        ],
    );
    assert_eq!(ours, theirs);
    assert!(ours.contains("<none>"), "{ours}");

    let ours = ok(&c.run(
        &[
            &[
                "list",
                "-o",
                "custom-columns=N:.name",
                "--no-headers",
                "--sort-by",
                ".name",
            ][..],
            &ANY_AGE,
        ]
        .concat(),
    ));
    let theirs = kubectl_lines(
        &c,
        &[
            "get",
            "serviceaccounts",
            "-o",
            "custom-columns=N:.metadata.name",
            "--no-headers",
            "--sort-by",
            ".metadata.name",
        ],
    );
    assert_eq!(ours, theirs);
    println!("{ours}");
}

#[test]
fn jsonpath_reads_the_document_and_sort_by_orders_every_form() {
    let c = seeded();
    let doc: Value = serde_json::from_str(&ok(
        &c.run(&[&["list", "-o", "json"][..], &ANY_AGE].concat())
    ))
    .unwrap();
    let mut names: Vec<String> = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    let out = ok(&c.run(
        &[
            &[
                "list",
                "-o",
                "jsonpath={range .items[*]}{.name}{\"\\n\"}{end}",
                "--sort-by",
                ".name",
            ][..],
            &ANY_AGE,
        ]
        .concat(),
    ));
    assert_eq!(
        out,
        names.iter().map(|n| format!("{n}\n")).collect::<String>()
    );
    let out = ok(&c.run(
        &[
            &[
                "list",
                "-o",
                "jsonpath={.kind} {.items[?(@.state==\"orphaned\")].name}",
            ][..],
            &ANY_AGE,
        ]
        .concat(),
    ));
    assert_eq!(
        out,
        "WorkerIdentityList nvcf-worker-a-much-longer-name nvcf-worker-gone".replace(
            "nvcf-worker-a-much-longer-name nvcf-worker-gone",
            &doc["items"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|i| i["state"] == "orphaned")
                .map(|i| i["name"].as_str().unwrap())
                .collect::<Vec<_>>()
                .join(" ")
        )
    );

    // The table: --no-headers drops the header, --sort-by orders the rows.
    let out = ok(&c.run(
        &[
            &["list", "--no-headers", "--sort-by", ".name"][..],
            &ANY_AGE,
        ]
        .concat(),
    ));
    let rows: Vec<&str> = out
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    assert_eq!(rows, names);
    let out = ok(&c.run(&[&["list", "-o", "wide", "--sort-by", ".name"][..], &ANY_AGE].concat()));
    assert!(
        out.starts_with("NAMESPACE   NAME") && out.contains("PLANE"),
        "{out}"
    );

    let bad = c.run(&[&["list", "--sort-by", ".nothing"][..], &ANY_AGE].concat());
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("couldn't find any field with path"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn audit_selects_objects_by_label_and_names_them() {
    let c = Cluster::start();
    let ns = c.ns.clone();
    c.seed_trio(&ns, "nvcf-worker-good");
    for team in ["a", "b"] {
        // Each Deployment borrows a worker account it does not own (NVW101).
        c.create(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": format!("thief-{team}"), "namespace": ns, "labels": {"team": team}},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "t"}},
                "template": {"metadata": {"labels": {"app": "t"}}, "spec": {"serviceAccountName": "nvcf-worker-good", "containers": [{"name": "a", "image": "x"}]}}}}));
    }
    let all = c.run(&["audit", "-n", &ns, "-o", "name"]);
    let all = stdout(&all);
    assert!(
        all.contains("deployment.apps/thief-a\n") && all.contains("deployment.apps/thief-b\n"),
        "{all}"
    );
    let out = c.run(&["audit", "-n", &ns, "-l", "team=a", "-o", "name"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stdout(&out), "deployment.apps/thief-a\n");
    let out = c.run(&["audit", "-n", &ns, "-l", "team=a", "-o", "json"]);
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["objects"], 1, "{doc}");
    let out = c.run(&[
        "audit",
        "-n",
        &ns,
        "-l",
        "team in (a,b)",
        "--sort-by",
        ".resource.name",
        "--no-headers",
        "-o",
        "custom-columns=RULE:.rule,NAME:.resource.name",
    ]);
    let text = stdout(&out);
    let names: Vec<&str> = text
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    assert!(
        names.windows(2).all(|w| w[0] <= w[1]) && names.contains(&"thief-b"),
        "{names:?}"
    );
    let out = c.run(&["audit", "-n", &ns, "-l", "team=nobody"]);
    assert!(
        stdout(&out).ends_with("0 errors, 0 warnings in 0 objects\n"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn cleanup_plan_and_describe_take_the_forms_that_fit() {
    let c = seeded();
    let out = ok(&c.run(&[&["cleanup", "-o", "name"][..], &ANY_AGE].concat()));
    let mut theirs: Vec<String> = kubectl_lines(
        &c,
        &["get", "serviceaccounts,roles,rolebindings", "-o", "name"],
    )
    .lines()
    .filter(|l| l.ends_with("/nvcf-worker-gone") || l.ends_with("/nvcf-worker-a-much-longer-name"))
    .map(String::from)
    .collect();
    let mut ours: Vec<String> = out.lines().map(String::from).collect();
    ours.sort();
    theirs.sort();
    assert_eq!(ours, theirs);
    assert_eq!(ours.len(), 6, "{out}");
    let out = ok(&c.run(
        &[
            &[
                "cleanup",
                "--sort-by",
                ".name",
                "-o",
                "custom-columns=NAME:.name,STATE:.state",
            ][..],
            &ANY_AGE,
        ]
        .concat(),
    ));
    let header = format!("{:<33}STATE", "NAME");
    assert_eq!(out.lines().next(), Some(header.as_str()), "{out}");
    let refused = c.run(&[&["cleanup", "--yes", "-o", "name"][..], &ANY_AGE].concat());
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(c.exists("ServiceAccount", &c.ns, "nvcf-worker-gone"));

    let out = c.run(&["describe", "runner", "-o", "name"]);
    assert_eq!(stdout(&out), "pod/runner\n");
    let out = c.run(&["describe", "runner", "-o", "jsonpath={.kind}"]);
    assert_eq!(stdout(&out), "WorkerVerdict");
    // Each command names the forms it has: `policyreport` is audit's alone.
    const KUBECTL_FORMS: &str =
        "custom-columns,custom-columns-file,json,jsonpath,jsonpath-file,name";
    for (command, form, allowed) in [
        (
            &["describe", "runner"][..],
            "wide",
            format!("{KUBECTL_FORMS},yaml"),
        ),
        (
            &["audit"][..],
            "wide",
            format!("{KUBECTL_FORMS},policyreport,yaml"),
        ),
        (
            &["describe", "runner"][..],
            "policyreport",
            format!("{KUBECTL_FORMS},yaml"),
        ),
        (
            &["list"][..],
            "policyreport",
            format!("{KUBECTL_FORMS},wide,yaml"),
        ),
        (
            &ANY_AGE_CLEANUP[..],
            "policyreport",
            format!("{KUBECTL_FORMS},yaml"),
        ),
    ] {
        let out = c.run(&[command, &["-o", form]].concat());
        assert_eq!(out.status.code(), Some(2), "{command:?} -o {form}");
        let want = format!("unable to match a printer suitable for the output format \"{form}\", allowed formats are: {allowed}\n");
        assert!(
            stderr(&out).ends_with(&want),
            "{command:?}: {}",
            stderr(&out)
        );
    }
    // Applying reports replaces every namespace's: a selection is refused.
    let out = c.run(&["audit", "-l", "team=a", "--apply-reports"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("cannot be used with -l"),
        "{}",
        stderr(&out)
    );
    let out = c.run(&["list", "-o", "xml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unable to match a printer suitable for the output format \"xml\""),
        "{}",
        stderr(&out)
    );
}
