//! Cleanup at scale against the loopback API server: 10 000 worker identities, half
//! of them orphaned. Prints the request count against the budget (list pages plus
//! three deletes per orphan) and the wall time.
//!
//! cargo run --release --example live_bench [-- IDENTITIES]

use std::time::{Duration, Instant};

use clap::Parser;
use kubectl_nvcf_worker::cli::{run, Cli};
use loopback_apiserver::{timestamp_ago, ApiServer};
use serde_json::json;

const NS: &str = "bench";
const PAGE: usize = 500;

fn main() {
    let identities: usize = std::env::args()
        .nth(1)
        .map_or(10_000, |n| n.parse().expect("IDENTITIES is a number"));
    let orphans = identities / 2;
    let server = ApiServer::start();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig, Some(NS)).unwrap();

    let seeding = Instant::now();
    let created = timestamp_ago(Duration::from_secs(3600));
    for i in 0..identities {
        let name = format!("nvcf-worker-pod-{i:05}");
        let meta = json!({"name": name, "namespace": NS, "creationTimestamp": created});
        server.create(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta, "automountServiceAccountToken": false}));
        server.create(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": []}));
        server.create(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NS}]}));
        if i >= orphans {
            server.create(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("pod-{i:05}"), "namespace": NS, "creationTimestamp": created},
                "spec": {"serviceAccountName": name, "containers": [{"name": "a", "image": "x"}]},
                "status": {"phase": "Running"}}));
        }
    }
    println!(
        "seeded {identities} identities ({orphans} orphaned) in {:.1?}",
        seeding.elapsed()
    );
    server.clear_requests();

    let cli = Cli::parse_from([
        "kubectl-nvcf-worker".as_ref(),
        "cleanup".as_ref(),
        "--yes".as_ref(),
        "--kubeconfig".as_ref(),
        kubeconfig.as_os_str(),
    ]);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let started = Instant::now();
    let result = run(cli, &mut out, &mut err);
    let elapsed = started.elapsed();
    let summary = String::from_utf8_lossy(&out);
    let summary = summary
        .lines()
        .find(|l| l.starts_with("deleted:"))
        .unwrap_or("");
    assert!(
        result.is_ok(),
        "cleanup failed: {}",
        String::from_utf8_lossy(&err)
    );

    let requests = server.requests();
    let pods = identities - orphans;
    let pages = 3 * identities.div_ceil(PAGE) + pods.div_ceil(PAGE).max(1);
    let expected = pages + 3 * orphans;
    let left = server.list("v1", "ServiceAccount", Some(NS)).len();
    println!("{summary}");
    println!(
        "requests: {} (expected {expected} = {pages} list pages + 3 x {orphans} deletes)",
        requests.len()
    );
    println!("service accounts left: {left} (expected {pods})");
    println!(
        "wall time: {elapsed:.2?} ({:.0} deletes/s)",
        (3 * orphans) as f64 / elapsed.as_secs_f64()
    );
    assert_eq!(requests.len(), expected);
    assert_eq!(left, pods);
}
