//! deploy/: the CronJob manifests pass our own guard, and their ClusterRole allows
//! every request a real `cleanup -A --yes` makes and nothing beyond list + delete.

mod live_support;

use std::collections::BTreeSet;
use std::path::Path;

use live_support::*;
use serde_json::Value;

fn deploy_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy"))
}

fn cluster_role() -> Value {
    let text = std::fs::read_to_string(deploy_dir().join("rbac.yaml")).unwrap();
    let role = serde_yaml::Deserializer::from_str(&text)
        .map(|d| <Value as serde::Deserialize>::deserialize(d).unwrap())
        .find(|d| d["kind"] == "ClusterRole")
        .expect("a ClusterRole in deploy/rbac.yaml");
    role
}

/// (group, resource, verb) the role grants.
fn grants(role: &Value) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().unwrap() {
        assert!(rule.get("resourceNames").is_none() && rule.get("nonResourceURLs").is_none());
        for g in rule["apiGroups"].as_array().unwrap() {
            for r in rule["resources"].as_array().unwrap() {
                for v in rule["verbs"].as_array().unwrap() {
                    let s = |x: &Value| x.as_str().unwrap().to_string();
                    out.insert((s(g), s(r), s(v)));
                }
            }
        }
    }
    out
}

#[test]
fn deploy_manifests_pass_validate() {
    let out = std::process::Command::new(BIN)
        .args(["validate"])
        .arg(deploy_dir())
        .output()
        .unwrap();
    let text = ok(&out);
    // Every manifest under deploy/ (the CronJob set and the Argo CD and Helm plugins).
    let files = walk_manifests(deploy_dir());
    assert!(
        text.starts_with(&format!("0 errors, 0 warnings in {files} files")),
        "{text}"
    );
}

fn walk_manifests(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            if p.is_dir() {
                walk_manifests(&p)
            } else {
                usize::from(matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("yaml" | "yml" | "json")
                ))
            }
        })
        .sum()
}

#[test]
fn cluster_role_is_list_and_delete_only_on_what_cleanup_needs() {
    let grants = grants(&cluster_role());
    for (_, resource, verb) in &grants {
        assert!(verb == "list" || verb == "delete", "{verb}");
        if verb == "delete" {
            assert!(
                ["serviceaccounts", "roles", "rolebindings"].contains(&resource.as_str()),
                "{resource}"
            );
        }
        assert!(
            !resource.contains('*') && resource != "secrets",
            "{resource}"
        );
    }
}

#[test]
fn cluster_role_covers_every_request_of_a_cleanup_run() {
    let c = Cluster::start();
    c.seed_trio(NS, "nvcf-worker-gone", OLD);
    for (v, k, n) in [
        ("apps/v1", "Deployment", "d"),
        ("apps/v1", "StatefulSet", "s"),
        ("apps/v1", "DaemonSet", "ds"),
        ("apps/v1", "ReplicaSet", "rs"),
        ("batch/v1", "Job", "j"),
        ("batch/v1", "CronJob", "cj"),
    ] {
        c.seed_manifest_trio(NS, &format!("nvcf-worker-{n}"), (v, k, n));
    }
    c.server.clear_requests();
    ok(&c.run(&["cleanup", "-A", "--yes"]));
    let grants = grants(&cluster_role());
    let mut used = BTreeSet::new();
    for r in c.server.requests() {
        let parts: Vec<&str> = r.path.trim_start_matches('/').split('/').collect();
        let (group, rest) = match parts[0] {
            "api" => ("", &parts[2..]),
            _ => (parts[1], &parts[3..]),
        };
        let rest = if rest.first() == Some(&"namespaces") {
            &rest[2..]
        } else {
            rest
        };
        let verb = match (r.method.as_str(), rest.len()) {
            ("GET", 1) => "list",
            ("DELETE", 2) => "delete",
            other => panic!("unexpected request {other:?} {}", r.path),
        };
        let key = (group.to_string(), rest[0].to_string(), verb.to_string());
        assert!(grants.contains(&key), "deploy/rbac.yaml lacks {key:?}");
        used.insert(key);
    }
    // The run exercised the workload lists the role exists for.
    for resource in ["deployments", "statefulsets", "daemonsets", "replicasets"] {
        assert!(
            used.contains(&("apps".into(), resource.into(), "list".into())),
            "{used:?}"
        );
    }
    assert!(used.contains(&("".into(), "serviceaccounts".into(), "delete".into())));
}
