//! The direct (non-HTTP) test API: defaulting, lookups and backdating.

use std::time::Duration;

use loopback_apiserver::{timestamp_ago, ApiServer};
use serde_json::json;

#[test]
fn create_defaults_like_post() {
    let server = ApiServer::start();
    let rv = server.resource_version();
    let sa = server.create(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                                  "metadata": {"name": "w", "namespace": "team"}}));
    let meta = &sa["metadata"];
    assert_eq!(meta["name"], "w");
    assert_eq!(meta["namespace"], "team");
    assert_eq!(meta["uid"].as_str().unwrap().len(), 36);
    assert!(meta["creationTimestamp"].as_str().unwrap().ends_with('Z'));
    // The missing namespace was created first, then the object.
    assert_eq!(meta["resourceVersion"], (rv + 2).to_string());
    let ns = server
        .get("v1", "Namespace", None, "team")
        .expect("namespace created");
    assert_eq!(ns["status"]["phase"], "Active");
    assert_eq!(
        ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "team"
    );

    // Direct creates keep what a controller would have set.
    let pod = server.create(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "uid": "fixed-uid"}, "status": {"phase": "Running"}}));
    assert_eq!(pod["metadata"]["namespace"], "default");
    assert_eq!(pod["metadata"]["uid"], "fixed-uid");
    assert_eq!(pod["status"]["phase"], "Running");
    let fresh =
        server.create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "q"}}));
    assert_eq!(fresh["status"]["phase"], "Pending");

    let deploy = server.create(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                                      "metadata": {"name": "d", "namespace": "team"}}));
    assert_eq!(deploy["metadata"]["generation"], 1);
    assert_eq!(deploy["status"], json!({}));
}

#[test]
#[should_panic(expected = "already exists")]
fn create_panics_on_duplicates() {
    let server = ApiServer::start();
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    server.create(obj.clone());
    server.create(obj);
}

#[test]
fn lookups_accept_kind_plural_singular_and_short_names() {
    let server = ApiServer::start();
    server.create(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "a"}}));
    server.create(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "e", "namespace": "b"}}));
    for kind in ["Deployment", "deployments", "deployment", "deploy"] {
        assert!(
            server.get("apps/v1", kind, Some("a"), "d").is_some(),
            "{kind}"
        );
    }
    assert!(server.get("apps/v1", "deploy", Some("b"), "d").is_none());
    assert_eq!(server.list("apps/v1", "deploy", None).len(), 2);
    assert_eq!(server.list("apps/v1", "deploy", Some("b")).len(), 1);

    server.create(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                         "metadata": {"name": "reader", "namespace": "ignored"}}),
    );
    let role = server
        .get(
            "rbac.authorization.k8s.io/v1",
            "clusterroles",
            None,
            "reader",
        )
        .unwrap();
    assert!(role["metadata"].get("namespace").is_none());

    let names: Vec<String> = server
        .objects()
        .iter()
        .filter(|o| o["kind"] == "Namespace")
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "a",
            "b",
            "default",
            "kube-node-lease",
            "kube-public",
            "kube-system"
        ]
    );

    let removed = server
        .delete("apps/v1", "Deployment", Some("a"), "d")
        .unwrap();
    assert_eq!(removed["metadata"]["name"], "d");
    assert!(server
        .delete("apps/v1", "Deployment", Some("a"), "d")
        .is_none());
}

#[test]
#[should_panic(expected = "is not served")]
fn unknown_types_fail_loudly() {
    ApiServer::start().get("v1", "Widget", None, "w");
}

#[test]
fn backdating_and_replacing() {
    let server = ApiServer::start();
    let created = server.create(json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "old", "creationTimestamp": "2021-06-01T00:00:00Z"}}));
    assert_eq!(
        created["metadata"]["creationTimestamp"],
        "2021-06-01T00:00:00Z"
    );

    let day_ago = timestamp_ago(Duration::from_secs(86_400));
    assert!(server.set_creation_timestamp("v1", "sa", Some("default"), "old", &day_ago));
    let sa = server.get("v1", "sa", Some("default"), "old").unwrap();
    assert_eq!(sa["metadata"]["creationTimestamp"], day_ago.as_str());
    assert_eq!(sa["metadata"]["uid"], created["metadata"]["uid"]);
    assert!(!server.set_creation_timestamp("v1", "sa", Some("default"), "missing", &day_ago));

    // Replacing with identical content is a no-op that keeps the version.
    let rv = sa["metadata"]["resourceVersion"].clone();
    assert_eq!(
        server.replace(sa.clone())["metadata"]["resourceVersion"],
        rv
    );
    let mut changed = sa;
    changed["automountServiceAccountToken"] = json!(false);
    assert_ne!(server.replace(changed)["metadata"]["resourceVersion"], rv);
}

#[test]
fn kubeconfig_points_at_the_server() {
    let server = ApiServer::start();
    let config = server.kubeconfig(Some("team"));
    assert!(config.contains(&format!("server: \"{}\"", server.url())));
    assert!(config.contains("namespace: \"team\""));
    assert!(config.contains("current-context: loopback"));
    assert!(!server.kubeconfig(None).contains("namespace:"));
    let dir = std::env::temp_dir().join(format!("loopback-kubeconfig-{}", std::process::id()));
    server.write_kubeconfig(&dir, None).unwrap();
    assert_eq!(
        std::fs::read_to_string(&dir).unwrap(),
        server.kubeconfig(None)
    );
    std::fs::remove_file(dir).unwrap();
}
