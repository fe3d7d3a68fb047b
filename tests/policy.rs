//! `kubectl nvcf-worker policy` offline: the example in deploy/policy is the
//! command's output, the output passes the tool's own `validate`, the options end
//! up where the API server reads them, and bad subjects are usage errors. What the
//! policy does is proved against the real API server in tests/live_policy.rs.

mod support;

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
