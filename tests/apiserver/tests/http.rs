//! HTTP semantics, checked over real sockets against the wire format and
//! wording of a real kube-apiserver.

mod common;

use std::io::BufReader;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{call, get, post, receive, send};
use loopback_apiserver::{ApiServer, Fault, FaultKind, FORBIDDEN_USER};
use serde_json::{json, Value};

const METADATA_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const METADATA: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,\
application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

fn sa(ns: &str, name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ServiceAccount",
           "metadata": {"name": name, "namespace": ns, "labels": labels}})
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn discovery_documents() {
    let server = ApiServer::start();
    let addr = server.addr();

    let version = get(addr, "/version").json();
    assert_eq!(version["gitVersion"], "v1.33.0");
    assert_eq!(
        (version["major"].as_str(), version["minor"].as_str()),
        (Some("1"), Some("33"))
    );

    let api = get(addr, "/api");
    assert_eq!(api.header("Content-Type"), Some("application/json"));
    assert_eq!(api.json()["kind"], "APIVersions");
    assert_eq!(api.json()["versions"], json!(["v1"]));

    let core = get(addr, "/api/v1").json();
    assert_eq!(core["kind"], "APIResourceList");
    let find = |list: &Value, name: &str| {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not in {list}"))
    };
    let sa = find(&core, "serviceaccounts");
    assert_eq!(sa["shortNames"], json!(["sa"]));
    assert_eq!(sa["singularName"], "serviceaccount");
    assert_eq!(sa["kind"], "ServiceAccount");
    assert_eq!(sa["namespaced"], true);
    assert!(sa["verbs"]
        .as_array()
        .unwrap()
        .contains(&json!("deletecollection")));
    assert_eq!(find(&core, "pods")["shortNames"], json!(["po"]));
    assert_eq!(find(&core, "namespaces")["namespaced"], false);
    assert_eq!(
        find(&core, "pods/status")["verbs"],
        json!(["get", "patch", "update"])
    );

    let groups = get(addr, "/apis").json();
    assert_eq!(groups["kind"], "APIGroupList");
    let group_names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(group_names, ["apps", "batch", "rbac.authorization.k8s.io"]);
    let apps = get(addr, "/apis/apps/v1").json();
    assert_eq!(apps["groupVersion"], "apps/v1");
    assert_eq!(find(&apps, "deployments")["shortNames"], json!(["deploy"]));
    let rbac = get(addr, "/apis/rbac.authorization.k8s.io/v1").json();
    assert_eq!(find(&rbac, "clusterroles")["namespaced"], false);
    assert_eq!(
        get(addr, "/apis/batch").json()["preferredVersion"]["groupVersion"],
        "batch/v1"
    );

    // Aggregated discovery is recognised by its content type.
    let agg = call(addr, "GET", "/apis", &[("Accept", AGGREGATED)], "");
    assert_eq!(
        agg.header("Content-Type"),
        Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
    );
    let agg = agg.json();
    assert_eq!(agg["kind"], "APIGroupDiscoveryList");
    let deploy = &agg["items"][0]["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "deployments")
        .cloned()
        .unwrap();
    assert_eq!(deploy["scope"], "Namespaced");
    assert_eq!(deploy["responseKind"]["kind"], "Deployment");
    server.set_aggregated_discovery(false);
    let legacy = call(addr, "GET", "/apis", &[("Accept", AGGREGATED)], "");
    assert_eq!(legacy.header("Content-Type"), Some("application/json"));
    assert_eq!(legacy.json()["kind"], "APIGroupList");

    for path in [
        "/nope",
        "/api/v2",
        "/api/v1/widgets",
        "/apis/apps/v1/pods",
        "/api/v1/namespaces/a/namespaces/b",
    ] {
        let r = get(addr, path);
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(r.header("Content-Type"), Some("application/json"));
        assert_eq!(r.json()["reason"], "NotFound", "{path}");
        assert_eq!(r.json()["kind"], "Status");
    }
}

#[test]
fn create_get_and_error_bodies() {
    let server = ApiServer::start();
    let addr = server.addr();

    let created = post(
        addr,
        "/api/v1/namespaces/default/serviceaccounts",
        &sa("default", "worker", json!({})),
    );
    assert_eq!(created.status, 201);
    let created = created.json();
    let meta = &created["metadata"];
    let uid = meta["uid"].as_str().unwrap();
    assert_eq!(uid.len(), 36);
    assert_eq!(uid.matches('-').count(), 4);
    assert!(meta["resourceVersion"]
        .as_str()
        .unwrap()
        .parse::<u64>()
        .is_ok());
    assert!(meta["creationTimestamp"].as_str().unwrap().ends_with('Z'));
    assert_eq!(meta["namespace"], "default");

    let fetched = get(addr, "/api/v1/namespaces/default/serviceaccounts/worker");
    assert_eq!(fetched.status, 200);
    assert_eq!(fetched.json(), created);
    assert_eq!(
        server.get("v1", "ServiceAccount", Some("default"), "worker"),
        Some(created.clone())
    );

    let missing = get(addr, "/api/v1/namespaces/default/serviceaccounts/x");
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "serviceaccounts \"x\" not found", "reason": "NotFound",
               "details": {"name": "x", "kind": "serviceaccounts"}, "code": 404})
    );
    let missing = get(addr, "/apis/apps/v1/namespaces/default/deployments/web").json();
    assert_eq!(missing["message"], "deployments.apps \"web\" not found");
    assert_eq!(
        missing["details"],
        json!({"name": "web", "group": "apps", "kind": "deployments"})
    );

    let again = post(
        addr,
        "/api/v1/namespaces/default/serviceaccounts",
        &sa("default", "worker", json!({})),
    );
    assert_eq!(again.status, 409);
    assert_eq!(
        again.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "serviceaccounts \"worker\" already exists", "reason": "AlreadyExists",
               "details": {"name": "worker", "kind": "serviceaccounts"}, "code": 409})
    );

    // The NamespaceLifecycle admission plugin's answer.
    let no_ns = post(
        addr,
        "/api/v1/namespaces/ghost/serviceaccounts",
        &sa("ghost", "w", json!({})),
    );
    assert_eq!(no_ns.status, 404);
    assert_eq!(no_ns.json()["message"], "namespaces \"ghost\" not found");

    let malformed = call(
        addr,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts",
        &[("Content-Type", "application/json")],
        "{not json",
    );
    assert_eq!(malformed.status, 400);
    assert_eq!(malformed.json()["reason"], "BadRequest");
    assert_eq!(malformed.json()["code"], 400);

    let wrong_ns = post(
        addr,
        "/api/v1/namespaces/default/serviceaccounts",
        &sa("other", "w", json!({})),
    );
    assert_eq!(wrong_ns.status, 400);
    assert_eq!(
        wrong_ns.json()["message"],
        "the namespace of the provided object does not match the namespace sent on the request"
    );

    let bad_name = post(
        addr,
        "/api/v1/namespaces/default/serviceaccounts",
        &sa("default", "Bad_Name", json!({})),
    );
    assert_eq!(bad_name.status, 422);
    assert_eq!(bad_name.json()["reason"], "Invalid");
    assert!(bad_name.json()["message"]
        .as_str()
        .unwrap()
        .starts_with("ServiceAccount \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"));

    let wrong_kind = post(
        addr,
        "/api/v1/namespaces/default/serviceaccounts",
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
    );
    assert_eq!(wrong_kind.status, 400);

    let protobuf = call(
        addr,
        "POST",
        "/api/v1/namespaces",
        &[("Content-Type", "application/vnd.kubernetes.protobuf")],
        "k8s\0",
    );
    assert_eq!(protobuf.status, 415);

    // A given creationTimestamp survives, so tests can post old objects.
    let mut old = sa("default", "old", json!({}));
    old["metadata"]["creationTimestamp"] = json!("2020-01-02T03:04:05Z");
    let old = post(addr, "/api/v1/namespaces/default/serviceaccounts", &old).json();
    assert_eq!(old["metadata"]["creationTimestamp"], "2020-01-02T03:04:05Z");

    let generated = post(
        addr,
        "/api/v1/namespaces/default/configmaps",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "cm-"}}),
    )
    .json();
    let name = generated["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("cm-") && name.len() == 8, "{name}");

    // The API resets status on create; pods start Pending.
    let pod = post(
        addr,
        "/api/v1/namespaces/default/pods",
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                "status": {"phase": "Running"}}),
    )
    .json();
    assert_eq!(pod["status"], json!({"phase": "Pending"}));
    assert_eq!(pod["spec"]["serviceAccountName"], "default");

    let secret = post(
        addr,
        "/api/v1/namespaces/default/secrets",
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "hi"}}),
    )
    .json();
    assert_eq!(secret["data"], json!({"k": "aGk="}));
    assert_eq!(secret["type"], "Opaque");
    assert!(secret.get("stringData").is_none());

    let cluster_role = post(
        addr,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "system:reader"}, "rules": []}),
    );
    assert_eq!(cluster_role.status, 201);
    assert!(cluster_role.json()["metadata"].get("namespace").is_none());
}

#[test]
fn dry_run_create_stores_nothing() {
    let server = ApiServer::start();
    let before = server.resource_version();
    let r = post(
        server.addr(),
        "/api/v1/namespaces/default/serviceaccounts?dryRun=All",
        &sa("default", "dry", json!({})),
    );
    assert_eq!(r.status, 201);
    assert!(r.json()["metadata"]["uid"].is_string());
    assert!(r.json()["metadata"].get("resourceVersion").is_none());
    assert_eq!(server.get("v1", "sa", Some("default"), "dry"), None);
    assert_eq!(server.resource_version(), before);
}

#[test]
fn pagination_and_expired_continue() {
    let server = ApiServer::start();
    let addr = server.addr();
    for (ns, name) in [
        ("b", "x"),
        ("a", "z"),
        ("a", "y"),
        ("b", "w"),
        ("c", "v"),
        ("a", "u"),
        ("c", "t"),
    ] {
        server.create(sa(ns, name, json!({})));
    }
    let mut target = "/api/v1/serviceaccounts?limit=3".to_string();
    let mut pages = Vec::new();
    loop {
        let page = get(addr, &target).json();
        assert_eq!(page["kind"], "ServiceAccountList");
        assert_eq!(page["apiVersion"], "v1");
        assert_eq!(
            page["metadata"]["resourceVersion"],
            server.resource_version().to_string()
        );
        pages.push(names(&page));
        match page["metadata"]["continue"].as_str() {
            Some(token) => {
                assert!(page["metadata"]["remainingItemCount"].as_u64().unwrap() > 0);
                target = format!("/api/v1/serviceaccounts?limit=3&continue={token}");
            }
            None => break,
        }
    }
    // Namespace/name order across pages.
    assert_eq!(pages, [vec!["u", "y", "z"], vec!["w", "x", "t"], vec!["v"]]);

    let first = get(addr, "/api/v1/namespaces/a/serviceaccounts?limit=2").json();
    assert_eq!(names(&first), ["u", "y"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 1);
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    let next = format!("/api/v1/namespaces/a/serviceaccounts?limit=2&continue={token}");

    // A plain list does not trip the fault; the continued one does, once.
    server.add_fault(Fault::new("/serviceaccounts", FaultKind::ExpireContinue));
    assert_eq!(
        get(addr, "/api/v1/namespaces/a/serviceaccounts?limit=2").status,
        200
    );
    let expired = get(addr, &next);
    assert_eq!(expired.status, 410);
    let status = expired.json();
    assert_eq!(status["reason"], "Expired");
    assert_eq!(status["code"], 410);
    assert!(status["message"].as_str().unwrap().starts_with(
        "The provided continue parameter is too old to display a consistent list result."
    ));
    assert!(status["metadata"]["continue"].is_string());
    assert!(server.pending_faults().is_empty());
    assert_eq!(names(&get(addr, &next).json()), ["z"]);

    let bad = get(addr, "/api/v1/serviceaccounts?limit=1&continue=garbage");
    assert_eq!(bad.status, 400);
    assert!(bad.json()["message"]
        .as_str()
        .unwrap()
        .starts_with("continue key is not valid"));
}

#[test]
fn label_and_field_selectors() {
    let server = ApiServer::start();
    let addr = server.addr();
    server.create(sa("a", "one", json!({"app": "web", "tier": "front"})));
    server.create(sa("a", "two", json!({"app": "db"})));
    server.create(sa("b", "three", json!({"app": "web"})));
    server.create(sa("b", "four", json!({})));
    let select = |q: &str| {
        let r = get(addr, &format!("/api/v1/serviceaccounts?{q}"));
        assert_eq!(r.status, 200, "{q}: {}", r.text);
        names(&r.json())
    };
    assert_eq!(select("labelSelector=app%3Dweb"), ["one", "three"]);
    assert_eq!(select("labelSelector=app%3D%3Dweb"), ["one", "three"]);
    assert_eq!(select("labelSelector=app!%3Dweb"), ["two", "four"]);
    assert_eq!(
        select("labelSelector=app+in+(db,web)"),
        ["one", "two", "three"]
    );
    assert_eq!(select("labelSelector=app%20notin%20(web)"), ["two", "four"]);
    assert_eq!(select("labelSelector=tier"), ["one"]);
    assert_eq!(select("labelSelector=!app"), ["four"]);
    assert_eq!(select("labelSelector=app%3Dweb,!tier"), ["three"]);
    assert_eq!(select("fieldSelector=metadata.name%3Dtwo"), ["two"]);
    assert_eq!(
        select("fieldSelector=metadata.namespace%3D%3Db"),
        ["four", "three"]
    );
    assert_eq!(
        select("fieldSelector=metadata.namespace!%3Db&labelSelector=app"),
        ["one", "two"]
    );

    let bad = get(
        addr,
        "/api/v1/serviceaccounts?fieldSelector=status.phase%3DRunning",
    );
    assert_eq!(bad.status, 400);
    assert_eq!(
        bad.json()["message"],
        "field label not supported: status.phase"
    );
    assert_eq!(
        get(addr, "/api/v1/serviceaccounts?labelSelector=a%3Db%3Dc").status,
        400
    );

    for (name, phase) in [
        ("run", "Running"),
        ("done", "Succeeded"),
        ("new", "Pending"),
    ] {
        server.create(json!({"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": name, "namespace": "a"},
                             "status": {"phase": phase}}));
    }
    let pods = |q: &str| names(&get(addr, &format!("/api/v1/namespaces/a/pods?{q}")).json());
    assert_eq!(pods("fieldSelector=status.phase%3DRunning"), ["run"]);
    assert_eq!(
        pods("fieldSelector=status.phase!%3DRunning,status.phase!%3DPending"),
        ["done"]
    );
}

#[test]
fn metadata_only_responses() {
    let server = ApiServer::start();
    let addr = server.addr();
    let stored = server.create(sa("ns", "w", json!({"a": "b"})));
    let list = call(
        addr,
        "GET",
        "/api/v1/namespaces/ns/serviceaccounts",
        &[("Accept", METADATA_LIST)],
        "",
    );
    assert_eq!(list.status, 200);
    assert_eq!(list.header("Content-Type"), Some("application/json"));
    let list = list.json();
    assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert!(list["metadata"]["resourceVersion"].is_string());
    assert_eq!(
        list["items"],
        json!([{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": stored["metadata"]}])
    );

    let one = call(
        addr,
        "GET",
        "/api/v1/namespaces/ns/serviceaccounts/w",
        &[("Accept", METADATA)],
        "",
    )
    .json();
    assert_eq!(
        one,
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": stored["metadata"]})
    );

    // Plain list items carry no type fields, as on a real server.
    let full = get(addr, "/api/v1/namespaces/ns/serviceaccounts").json();
    assert!(full["items"][0].get("kind").is_none());
    assert_eq!(full["items"][0]["metadata"], stored["metadata"]);

    // kubectl asks for a Table first; JSON is the fallback it accepts.
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    let r = call(
        addr,
        "GET",
        "/api/v1/namespaces/ns/serviceaccounts",
        &[("Accept", table)],
        "",
    );
    assert_eq!(r.json()["kind"], "ServiceAccountList");
    let r = call(
        addr,
        "GET",
        "/api/v1/namespaces/ns/serviceaccounts",
        &[("Accept", "application/vnd.kubernetes.protobuf")],
        "",
    );
    assert_eq!(r.status, 406);
    assert_eq!(r.json()["reason"], "NotAcceptable");
}

#[test]
fn update_patch_and_status() {
    let server = ApiServer::start();
    let addr = server.addr();
    let path = "/apis/apps/v1/namespaces/ns/deployments/web";
    let created = server.create(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns"}, "spec": {"replicas": 1},
        "status": {"replicas": 1}}));
    assert_eq!(created["metadata"]["generation"], 1);
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();

    let mut stale = created.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    let r = call(
        addr,
        "PUT",
        path,
        &[("Content-Type", "application/json")],
        &stale.to_string(),
    );
    assert_eq!(r.status, 409);
    assert_eq!(
        r.json()["message"],
        "Operation cannot be fulfilled on deployments.apps \"web\": the object has been modified; \
         please apply your changes to the latest version and try again"
    );
    assert_eq!(r.json()["reason"], "Conflict");

    // The main resource ignores status and keeps system metadata.
    let mut update = created.clone();
    update["spec"]["replicas"] = json!(3);
    update["status"] = json!({"replicas": 99});
    update["metadata"]["uid"] = json!("forged");
    let r = call(
        addr,
        "PUT",
        path,
        &[("Content-Type", "application/json")],
        &update.to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let updated = r.json();
    assert_eq!(updated["spec"]["replicas"], 3);
    assert_eq!(updated["status"]["replicas"], 1);
    assert_eq!(updated["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(updated["metadata"]["generation"], 2);
    assert_ne!(updated["metadata"]["resourceVersion"].as_str().unwrap(), rv);

    // A no-op update keeps the resourceVersion.
    let r = call(
        addr,
        "PUT",
        path,
        &[("Content-Type", "application/json")],
        &updated.to_string(),
    );
    assert_eq!(
        r.json()["metadata"]["resourceVersion"],
        updated["metadata"]["resourceVersion"]
    );

    let status = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                        "spec": {"replicas": 7}, "status": {"replicas": 3}});
    let r = call(
        addr,
        "PUT",
        &format!("{path}/status"),
        &[("Content-Type", "application/json")],
        &status.to_string(),
    )
    .json();
    assert_eq!(
        (
            r["spec"]["replicas"].as_i64(),
            r["status"]["replicas"].as_i64()
        ),
        (Some(3), Some(3))
    );

    let patch = |ct: &str, body: &str| call(addr, "PATCH", path, &[("Content-Type", ct)], body);
    let r = patch(
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"a":"1"}}}"#,
    );
    assert_eq!(r.json()["metadata"]["labels"], json!({"a": "1"}));
    let r = patch(
        "application/strategic-merge-patch+json",
        r#"{"metadata":{"labels":{"b":"2","a":null}}}"#,
    );
    assert_eq!(r.json()["metadata"]["labels"], json!({"b": "2"}));
    let r = patch(
        "application/json-patch+json",
        r#"[{"op":"replace","path":"/spec/replicas","value":5}]"#,
    );
    assert_eq!(r.json()["spec"]["replicas"], 5);
    let r = patch(
        "application/merge-patch+json",
        r#"{"metadata":{"resourceVersion":"1","labels":{"c":"3"}}}"#,
    );
    assert_eq!(r.status, 409);
    let r = patch("application/json", "{}");
    assert_eq!(r.status, 415);
    let r = patch("application/merge-patch+json", "{oops");
    assert_eq!(r.status, 400);
    let r = call(
        addr,
        "PATCH",
        "/apis/apps/v1/namespaces/ns/deployments/nope",
        &[("Content-Type", "application/merge-patch+json")],
        "{}",
    );
    assert_eq!(r.status, 404);

    // Server-side apply creates, then merges.
    let apply = |body: Value| {
        call(
            addr,
            "PATCH",
            "/api/v1/namespaces/ns/configmaps/cfg?fieldManager=test",
            &[("Content-Type", "application/apply-patch+yaml")],
            &body.to_string(),
        )
    };
    let r = apply(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1"}}),
    );
    assert_eq!(r.status, 201);
    let r = apply(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"b": "2"}}),
    );
    assert_eq!(r.json()["data"], json!({"a": "1", "b": "2"}));
}

#[test]
fn delete_preconditions_dry_run_and_responses() {
    let server = ApiServer::start();
    let addr = server.addr();
    let stored = server.create(sa("ns", "w", json!({})));
    let uid = stored["metadata"]["uid"].as_str().unwrap();
    let path = "/api/v1/namespaces/ns/serviceaccounts/w";
    let delete = |body: &str| {
        call(
            addr,
            "DELETE",
            path,
            &[("Content-Type", "application/json")],
            body,
        )
    };

    let r = delete(r#"{"preconditions":{"uid":"other-uid"}}"#);
    assert_eq!(r.status, 409);
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": format!("Operation cannot be fulfilled on serviceaccounts \"w\": Precondition failed: UID in precondition: other-uid, UID in object meta: {uid}"),
               "reason": "Conflict", "details": {"name": "w", "kind": "serviceaccounts"}, "code": 409})
    );
    let r = delete(r#"{"preconditions":{"resourceVersion":"1"}}"#);
    assert_eq!(r.status, 409);
    assert!(r.json()["message"]
        .as_str()
        .unwrap()
        .contains("Precondition failed: ResourceVersion in precondition: 1"));

    let r = delete(r#"{"dryRun":["All"]}"#);
    assert_eq!(r.status, 200);
    assert!(server.get("v1", "sa", Some("ns"), "w").is_some());
    let r = call(addr, "DELETE", &format!("{path}?dryRun=All"), &[], "");
    assert_eq!(r.status, 200);
    assert!(server.get("v1", "sa", Some("ns"), "w").is_some());

    assert_eq!(delete("{broken").status, 400);
    assert_eq!(delete(r#"{"propagationPolicy":"Sideways"}"#).status, 422);

    let r = delete(
        &json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background",
                           "preconditions": {"uid": uid}})
        .to_string(),
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
               "details": {"name": "w", "kind": "serviceaccounts", "uid": uid}})
    );
    assert!(server.get("v1", "sa", Some("ns"), "w").is_none());
    assert_eq!(delete("").status, 404);

    // Pods answer with the deleted object, like the real pod registry.
    server.create(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}),
    );
    let r = call(addr, "DELETE", "/api/v1/namespaces/ns/pods/p", &[], "").json();
    assert_eq!(
        (r["kind"].as_str(), r["metadata"]["name"].as_str()),
        (Some("Pod"), Some("p"))
    );
}

#[test]
fn finalizers_hold_deletion() {
    let server = ApiServer::start();
    let addr = server.addr();
    let mut obj = sa("ns", "held", json!({}));
    obj["metadata"]["finalizers"] = json!(["example.com/hold"]);
    server.create(obj);
    let path = "/api/v1/namespaces/ns/serviceaccounts/held";
    let r = call(addr, "DELETE", path, &[], "").json();
    assert_eq!(r["kind"], "ServiceAccount");
    assert!(r["metadata"]["deletionTimestamp"].is_string());
    assert!(server.get("v1", "sa", Some("ns"), "held").is_some());
    let r = call(
        addr,
        "PATCH",
        path,
        &[("Content-Type", "application/merge-patch+json")],
        r#"{"metadata":{"finalizers":null}}"#,
    );
    assert_eq!(r.status, 200);
    assert!(server.get("v1", "sa", Some("ns"), "held").is_none());
}

#[test]
fn garbage_collection_and_namespace_deletion() {
    let server = ApiServer::start();
    let addr = server.addr();
    let owner = |o: &Value| {
        json!([{"apiVersion": o["apiVersion"], "kind": o["kind"],
        "name": o["metadata"]["name"], "uid": o["metadata"]["uid"], "controller": true}])
    };
    let deploy = server.create(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ns"}}));
    let rs = server.create(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "d-1", "namespace": "ns", "ownerReferences": owner(&deploy)}}));
    server.create(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "d-1-a", "namespace": "ns", "ownerReferences": owner(&rs)}}));
    let job = server.create(json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns"}}));
    server.create(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "j-a", "namespace": "ns", "ownerReferences": owner(&job)}}));

    let r = call(
        addr,
        "DELETE",
        "/apis/apps/v1/namespaces/ns/deployments/d",
        &[],
        r#"{"propagationPolicy":"Foreground"}"#,
    );
    assert_eq!(r.json()["status"], "Success");
    assert!(server.get("apps/v1", "rs", Some("ns"), "d-1").is_none());
    assert!(server.get("v1", "pod", Some("ns"), "d-1-a").is_none());

    call(
        addr,
        "DELETE",
        "/apis/batch/v1/namespaces/ns/jobs/j",
        &[],
        r#"{"propagationPolicy":"Orphan"}"#,
    );
    let orphan = server
        .get("v1", "pod", Some("ns"), "j-a")
        .expect("orphaned pod survives");
    assert!(orphan["metadata"].get("ownerReferences").is_none());

    let r = call(addr, "DELETE", "/api/v1/namespaces/ns", &[], "").json();
    assert_eq!(r["kind"], "Namespace");
    assert_eq!(r["status"]["phase"], "Terminating");
    assert!(server.list("v1", "pods", Some("ns")).is_empty());
    assert!(server.get("v1", "ns", None, "ns").is_none());
}

#[test]
fn delete_collection() {
    let server = ApiServer::start();
    for (name, app) in [("a", "x"), ("b", "y"), ("c", "x")] {
        server.create(sa("ns", name, json!({"app": app})));
    }
    let r = call(
        server.addr(),
        "DELETE",
        "/api/v1/namespaces/ns/serviceaccounts?labelSelector=app%3Dx",
        &[],
        "",
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["kind"], "ServiceAccountList");
    assert_eq!(names(&r.json()), ["a", "c"]);
    let left: Vec<Value> = server.list("v1", "ServiceAccount", Some("ns"));
    assert_eq!(left.len(), 1);
}

#[test]
fn faults_fire_as_often_as_asked() {
    let server = ApiServer::start();
    let addr = server.addr();
    server.create(sa("ns", "w", json!({})));
    let path = "/api/v1/namespaces/ns/serviceaccounts/w";

    server.add_fault(
        Fault::new("/serviceaccounts/w", FaultKind::Status(500))
            .times(2)
            .method("get"),
    );
    let codes: Vec<u16> = (0..3).map(|_| get(addr, path).status).collect();
    assert_eq!(codes, [500, 500, 200]);
    let internal = {
        server.add_fault(Fault::new("", FaultKind::Status(503)));
        get(addr, "/version")
    };
    assert_eq!(internal.json()["reason"], "ServiceUnavailable");

    server.add_fault(Fault::new(
        "/serviceaccounts",
        FaultKind::TooManyRequests {
            retry_after_secs: 7,
        },
    ));
    let r = get(addr, path);
    assert_eq!(r.status, 429);
    assert_eq!(r.header("Retry-After"), Some("7"));
    assert_eq!(r.json()["reason"], "TooManyRequests");
    assert_eq!(r.json()["details"]["retryAfterSeconds"], 7);

    // Method filters: a DELETE fault leaves GETs alone.
    server.add_fault(Fault::new("/serviceaccounts/w", FaultKind::Forbidden).method("DELETE"));
    assert_eq!(get(addr, path).status, 200);
    let r = call(addr, "DELETE", path, &[], "");
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": format!("serviceaccounts \"w\" is forbidden: User \"{FORBIDDEN_USER}\" cannot delete resource \"serviceaccounts\" in API group \"\" in the namespace \"ns\""),
               "reason": "Forbidden", "details": {"name": "w", "kind": "serviceaccounts"}, "code": 403})
    );
    assert!(server.get("v1", "sa", Some("ns"), "w").is_some());
    server.add_fault(Fault::new("/clusterroles", FaultKind::Forbidden));
    assert_eq!(
        get(addr, "/apis/rbac.authorization.k8s.io/v1/clusterroles").json()["message"],
        format!("clusterroles.rbac.authorization.k8s.io is forbidden: User \"{FORBIDDEN_USER}\" cannot list resource \"clusterroles\" in API group \"rbac.authorization.k8s.io\" at the cluster scope")
    );

    server.add_fault(Fault::new(
        "/serviceaccounts",
        FaultKind::Delay(Duration::from_millis(300)),
    ));
    let start = Instant::now();
    assert_eq!(get(addr, path).status, 200);
    assert!(start.elapsed() >= Duration::from_millis(300));
    assert!(server.pending_faults().is_empty());

    server.add_fault(Fault::new("/never", FaultKind::Status(500)).times(3));
    assert_eq!(server.pending_faults()[0].times, 3);
    server.clear_faults();
    assert!(server.pending_faults().is_empty());
}

#[test]
fn request_log_records_requests() {
    let server = ApiServer::start();
    let addr = server.addr();
    post(
        addr,
        "/api/v1/namespaces/default/serviceaccounts?fieldManager=t",
        &sa("default", "w", json!({})),
    );
    call(
        addr,
        "GET",
        "/api/v1/serviceaccounts?labelSelector=a%3Db&limit=5",
        &[("Accept", METADATA_LIST)],
        "",
    );
    let log = server.requests();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].method, "POST");
    assert_eq!(log[0].path, "/api/v1/namespaces/default/serviceaccounts");
    assert_eq!(log[0].param("fieldManager"), Some("t"));
    assert_eq!(log[0].body.as_ref().unwrap()["metadata"]["name"], "w");
    assert_eq!(log[0].content_type.as_deref(), Some("application/json"));
    assert_eq!(log[1].method, "GET");
    assert_eq!(
        log[1].query,
        [
            ("labelSelector".to_string(), "a=b".to_string()),
            ("limit".into(), "5".into())
        ]
    );
    assert_eq!(log[1].accept.as_deref(), Some(METADATA_LIST));
    assert_eq!(log[1].body, None);
    server.clear_requests();
    assert!(server.requests().is_empty());
}

#[test]
fn keep_alive_and_concurrent_requests() {
    let server = ApiServer::start();
    let addr = server.addr();
    // Many keep-alive connections held open at once, each reused, as a
    // client's connection pool does: every request must be answered.
    let mut connections: Vec<(TcpStream, BufReader<TcpStream>)> = (0..12)
        .map(|_| {
            let stream = TcpStream::connect(addr).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let reader = BufReader::new(stream.try_clone().unwrap());
            (stream, reader)
        })
        .collect();
    for _ in 0..3 {
        for (stream, reader) in &mut connections {
            send(stream, "GET", "/version", &[], "", false);
            assert_eq!(receive(reader).status, 200);
        }
    }
    // Chunked request bodies are accepted too.
    let (stream, reader) = &mut connections[0];
    let body = sa("default", "chunked", json!({})).to_string();
    let request = format!(
        "POST /api/v1/namespaces/default/serviceaccounts HTTP/1.1\r\nHost: x\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n\
         {:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    );
    std::io::Write::write_all(stream, request.as_bytes()).unwrap();
    assert_eq!(receive(reader).status, 201);
    drop(connections);

    // Sixteen slow requests at once finish in about one delay, not sixteen.
    for i in 0..16 {
        server.create(sa("ns", &format!("sa-{i}"), json!({})));
    }
    server.add_fault(
        Fault::new(
            "/serviceaccounts/",
            FaultKind::Delay(Duration::from_millis(400)),
        )
        .times(16),
    );
    let start = Instant::now();
    let handles: Vec<_> = (0..16)
        .map(|i| {
            std::thread::spawn(move || {
                call(
                    addr,
                    "DELETE",
                    &format!("/api/v1/namespaces/ns/serviceaccounts/sa-{i}"),
                    &[],
                    "{}",
                )
                .status
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), 200);
    }
    assert!(
        start.elapsed() < Duration::from_millis(400 * 8),
        "{:?}",
        start.elapsed()
    );
    assert!(server.list("v1", "sa", Some("ns")).is_empty());
}

/// Reads newline-delimited watch events until `n` arrived.
fn read_events(reader: &mut BufReader<TcpStream>, n: usize) -> Vec<Value> {
    use std::io::BufRead;
    let mut events = Vec::new();
    let mut line = String::new();
    while events.len() < n {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "stream ended early"
        );
        // Chunk-size lines and blank separators are not JSON.
        if let Ok(v) = serde_json::from_str::<Value>(line.trim()) {
            if v.is_object() {
                events.push(v);
            }
        }
    }
    events
}

#[test]
fn watch_streams_changes() {
    let server = ApiServer::start();
    let addr = server.addr();
    server.create(sa("ns", "before", json!({"app": "web"})));
    let rv = server.resource_version();

    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    send(&mut stream, "GET",
         &format!("/api/v1/namespaces/ns/serviceaccounts?watch=true&resourceVersion={rv}&labelSelector=app%3Dweb&timeoutSeconds=5"),
         &[], "", false);
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    std::io::BufRead::read_line(&mut reader, &mut head).unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

    server.create(sa("ns", "w", json!({"app": "web"})));
    server.create(sa("ns", "ignored", json!({"app": "db"})));
    let mut w = server.get("v1", "sa", Some("ns"), "w").unwrap();
    w["metadata"]["labels"] = json!({"app": "db"});
    server.replace(w);
    let events = read_events(&mut reader, 2);
    let kinds: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap(),
                e["object"]["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    // Leaving the selection reads as a deletion.
    assert_eq!(kinds, [("ADDED", "w"), ("DELETED", "w")]);
    assert_eq!(events[0]["object"]["kind"], "ServiceAccount");

    // Without a resourceVersion the watch starts with synthetic ADDED events.
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    send(
        &mut stream,
        "GET",
        "/api/v1/namespaces/ns/serviceaccounts?watch=1&timeoutSeconds=1",
        &[("Accept", METADATA)],
        "",
        true,
    );
    let r = receive(&mut BufReader::new(stream));
    let events: Vec<Value> = r
        .text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 3);
    assert!(events
        .iter()
        .all(|e| e["type"] == "ADDED" && e["object"]["kind"] == "PartialObjectMetadata"));
}

#[test]
fn watch_from_a_compacted_version_is_expired() {
    let server = ApiServer::start();
    let mut obj = server.create(sa("ns", "busy", json!({})));
    // Outrun the event history so resourceVersion 1 is compacted away.
    for i in 0..10_050 {
        obj["metadata"]["labels"] = json!({"n": i.to_string()});
        obj = server.replace(obj);
    }
    let r = get(
        server.addr(),
        "/api/v1/namespaces/ns/serviceaccounts?watch=true&resourceVersion=1",
    );
    assert_eq!(r.status, 200);
    let event: Value = serde_json::from_str(r.text.trim()).unwrap();
    assert_eq!(event["type"], "ERROR");
    assert_eq!(event["object"]["code"], 410);
    assert_eq!(event["object"]["reason"], "Expired");
    assert!(event["object"]["message"]
        .as_str()
        .unwrap()
        .starts_with("too old resource version: 1 ("));
}
