//! `kubectl nvcf-worker policy` offline: the example in deploy/policy is the
//! command's output, the output passes the tool's own `validate`, the options end
//! up where the API server reads them, and bad subjects are usage errors. What the
//! policy does is proved against the real API server in tests/live_policy.rs.

use crate::support;

use serde_json::json;
use support::{objects, run};

const EXAMPLE_ARGS: [&str; 4] = [
    "policy",
    "--agent",
    "system:serviceaccount:nvca-system:nvca",
    "--audit-only",
];

fn example_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/policy/policy.yaml")
}

#[test]
fn the_example_is_the_commands_output_and_passes_validate() {
    let out = run(&EXAMPLE_ARGS, "");
    out.ok();
    let example = std::fs::read_to_string(example_path()).unwrap();
    assert_eq!(
        out.stdout,
        example,
        "deploy/policy/policy.yaml is stale: regenerate it with `kubectl-nvcf-worker {}`",
        EXAMPLE_ARGS.join(" ")
    );
    let path = example_path();
    let checked = run(&["validate", path.to_str().unwrap()], "");
    checked.ok();
    assert!(checked.stdout.contains("0 errors, 0 warnings"), "{checked}");
}

#[test]
fn options_land_where_the_api_server_reads_them() {
    let out = run(
        &[
            "policy",
            "--agent",
            "system:serviceaccount:nvca-system:nvca",
            "--agent",
            "system:serviceaccount:nvca-system:nvca-2",
            "--allow-applier",
            "system:serviceaccount:flux-system:kustomize-controller",
            "--failure-policy",
            "ignore",
            "--namespace-selector",
            "team=a,env!=dev,tier in (x,y),!legacy",
            "--name",
            "guard",
        ],
        "",
    );
    out.ok();
    let objs = objects(&out.stdout);
    let [policy, binding] = objs.as_slice() else {
        panic!("expected a policy and a binding:\n{out}")
    };
    assert_eq!(policy["kind"], "ValidatingAdmissionPolicy");
    assert_eq!(policy["metadata"]["name"], "guard");
    assert_eq!(policy["spec"]["failurePolicy"], "Ignore");
    let agent = &policy["spec"]["matchConditions"][0]["expression"];
    assert_eq!(
        agent,
        "!(request.userInfo.username in ['system:serviceaccount:nvca-system:nvca', 'system:serviceaccount:nvca-system:nvca-2'])"
    );
    assert_eq!(
        policy["spec"]["variables"][0],
        json!({"name": "fromApplier", "expression": "request.userInfo.username in ['system:serviceaccount:flux-system:kustomize-controller']"})
    );
    // Every rule's message starts with its guard id.
    let ids: Vec<&str> = policy["spec"]["validations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["message"].as_str().unwrap().split(':').next().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "NVW115", "NVW117", "NVW101", "NVW108", "NVW104", "NVW109", "NVW102", "NVW114",
            "NVW106", "NVW114"
        ]
    );
    assert_eq!(binding["kind"], "ValidatingAdmissionPolicyBinding");
    assert_eq!(binding["spec"]["policyName"], "guard");
    assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
    assert_eq!(
        binding["spec"]["matchResources"]["namespaceSelector"],
        json!({"matchLabels": {"team": "a"}, "matchExpressions": [
            {"key": "env", "operator": "NotIn", "values": ["dev"]},
            {"key": "tier", "operator": "In", "values": ["x", "y"]},
            {"key": "legacy", "operator": "DoesNotExist"}]})
    );

    let audit = run(&["policy", "--audit-only"], "");
    audit.ok();
    let objs = objects(&audit.stdout);
    assert_eq!(
        objs[1]["spec"]["validationActions"],
        json!(["Audit", "Warn"])
    );
    // No --agent: the agent's documented account, and the controllers making
    // owned objects.
    assert_eq!(
        objs[0]["spec"]["matchConditions"].as_array().unwrap().len(),
        2
    );
}

#[test]
fn blank_subjects_and_bad_selectors_are_usage_errors() {
    for args in [
        &["policy", "--agent", ""][..],
        &["policy", "--allow-applier", " system:serviceaccount:a:b"][..],
        &["policy", "--namespace-selector", "a in (b"][..],
    ] {
        let out = run(args, "");
        out.code(2);
        assert!(out.stdout.is_empty(), "{out}");
        assert!(out.stderr.starts_with("error: "), "{out}");
    }
}

/// The agent by default (issue 23): its documented account, another system
/// namespace by `--agent-namespace`, and an `--agent` that is not a
/// ServiceAccount's username is a usage error, not a policy that refuses the
/// agent's own identities.
#[test]
fn the_agent_is_exempt_by_default_and_a_bad_agent_is_a_usage_error() {
    let agent_condition = |args: &[&str]| {
        let out = run(args, "");
        out.ok();
        let objs = objects(&out.stdout);
        objs[0]["spec"]["matchConditions"][0].clone()
    };
    assert_eq!(
        agent_condition(&["policy"]),
        json!({"name": "not-the-agent", "expression": "!(request.userInfo.username in ['system:serviceaccount:nvca-system:nvca'])"})
    );
    assert_eq!(
        agent_condition(&["policy", "--agent-namespace", "nvca-prod"])["expression"],
        "!(request.userInfo.username in ['system:serviceaccount:nvca-prod:nvca'])"
    );
    for bad in [
        vec!["policy", "--agent", "nvca"],
        vec!["policy", "--agent", "system:serviceaccount:nvca-system"],
        vec!["policy", "--agent", "system:serviceaccount:NVCA:nvca"],
        vec!["policy", "--agent-namespace", "a b"],
        vec![
            "policy",
            "--agent",
            "system:serviceaccount:a:b",
            "--agent-namespace",
            "c",
        ],
    ] {
        let out = run(&bad, "");
        out.code(2);
        assert!(out.stdout.is_empty(), "{bad:?}: {out}");
    }
}

/// `policy --mutating` (issue 24): deploy/policy/mutating.yaml is the command's
/// output and passes `validate`; the options that are inject's land in the
/// mutation; a missing cluster ID, an expiry out of range, mutating options
/// without --mutating and the guard's options with it are usage errors.
#[test]
fn the_mutating_policy_example_is_the_commands_output_and_its_options_are_checked() {
    let args = ["policy", "--mutating", "--cluster-id", "prod-1"];
    let out = run(&args, "");
    out.ok();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/policy/mutating.yaml");
    assert_eq!(
        out.stdout,
        std::fs::read_to_string(&path).unwrap(),
        "deploy/policy/mutating.yaml is stale: regenerate it with `kubectl-nvcf-worker {}`",
        args.join(" ")
    );
    let checked = run(&["validate", path.to_str().unwrap()], "");
    checked.ok();
    assert!(checked.stdout.contains("0 errors, 0 warnings"), "{checked}");
    let kinds: Vec<String> = objects(&out.stdout)
        .iter()
        .map(|o| {
            format!(
                "{} {}",
                o["apiVersion"].as_str().unwrap(),
                o["kind"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "admissionregistration.k8s.io/v1 MutatingAdmissionPolicy",
            "admissionregistration.k8s.io/v1 MutatingAdmissionPolicyBinding",
            "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy",
            "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding",
        ]
    );

    let out = run(
        &[
            "policy",
            "--mutating",
            "--cluster-id",
            "c9",
            "--expiration-seconds",
            "3600",
            "--api-version",
            "v1beta1",
            "--name",
            "m",
            "-l",
            "team=a",
        ],
        "",
    );
    out.ok();
    let objs = objects(&out.stdout);
    assert_eq!(
        objs[0]["apiVersion"],
        "admissionregistration.k8s.io/v1beta1"
    );
    assert_eq!(objs[1]["spec"]["policyName"], "m");
    let expr = objs[0]["spec"]["mutations"][0]["jsonPatch"]["expression"]
        .as_str()
        .unwrap();
    assert!(
        expr.contains("audience: 'nvcf-icms:c9', expirationSeconds: 3600"),
        "{expr}"
    );
    assert_eq!(
        objs[3]["spec"]["matchResources"]["objectSelector"],
        json!({"matchLabels": {"team": "a"}})
    );

    for bad in [
        &["policy", "--mutating"][..],
        &["policy", "--mutating", "--cluster-id", " "][..],
        &[
            "policy",
            "--mutating",
            "--cluster-id",
            "c",
            "--expiration-seconds",
            "60",
        ][..],
        &["policy", "--cluster-id", "c"][..],
        &[
            "policy",
            "--mutating",
            "--cluster-id",
            "c",
            "--allow-applier",
            "system:serviceaccount:a:b",
        ][..],
        &[
            "policy",
            "--namespace-kit",
            "a",
            "--namespace-selector",
            "x!=y",
        ][..],
    ] {
        let out = run(bad, "");
        out.code(2);
        assert!(out.stdout.is_empty(), "{bad:?}: {out}");
    }
}

/// The namespace kit passes `validate`: the Namespace and the per-namespace trio.
#[test]
fn the_namespace_kit_passes_validate() {
    let out = run(
        &[
            "policy",
            "--namespace-kit",
            "team-a",
            "--namespace-kit",
            "team-b",
        ],
        "",
    );
    out.ok();
    let objs = objects(&out.stdout);
    assert_eq!(objs.len(), 8);
    assert_eq!(objs[4]["metadata"]["name"], "team-b");
    let checked = run(&["validate", "-"], &out.stdout);
    checked.ok();
    assert!(checked.stdout.contains("0 errors, 0 warnings"), "{checked}");
}
