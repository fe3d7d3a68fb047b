//! Cleanup at scale against the real control plane (tests/live_support: etcd,
//! kube-apiserver and kube-controller-manager built by
//! scripts/build-control-plane.sh): 10 000 worker identities, half of them
//! orphaned. Prints the request count against the budget (list pages plus three
//! deletes per orphan), the wall time, and the ratio to a baseline measured in the
//! same run on the same server: the same number of orphaned trios deleted by a
//! bare client (no listing, no plan, 8 identities at a time, like cleanup).
//!
//! cargo run --release --example live_bench [-- IDENTITIES]

#[path = "../tests/live_support/mod.rs"]
mod live_support;

use std::time::Instant;

use clap::Parser;
use futures::StreamExt;
use kubectl_nvcf_worker::cli::{run, Cli};
use live_support::*;

const PAGE: usize = 500;

fn main() {
    let identities: usize = std::env::args()
        .nth(1)
        .map_or(10_000, |n| n.parse().expect("IDENTITIES is a number"));
    let orphans = identities / 2;
    let started = Instant::now();
    let c = Cluster::start();
    println!(
        "control plane: ready in {:.1} s (first use in this process: {:.1} s)",
        c.cp.startup.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    let ns = c.ns.clone();

    let seeding = Instant::now();
    let mut objects = Vec::new();
    let mut pods = Vec::new();
    for i in 0..identities {
        let name = format!("nvcf-worker-pod-{i:05}");
        objects.extend(trio(&ns, &name, None));
        if i >= orphans {
            pods.push(pod(&ns, &format!("pod-{i:05}"), &name, "Running"));
        }
    }
    c.create_all(objects);
    c.create_all(pods);
    c.wait_for_default_account(&ns);
    println!(
        "seeded {identities} identities ({orphans} orphaned, {} pods) in {:.1} s",
        identities - orphans,
        seeding.elapsed().as_secs_f64()
    );
    c.clear_requests();

    // The plugin, in process, through the recording proxy.
    let cli = Cli::parse_from([
        "kubectl-nvcf-worker".as_ref(),
        "cleanup".as_ref(),
        "--yes".as_ref(),
        "--min-age".as_ref(),
        "0s".as_ref(),
        "--kubeconfig".as_ref(),
        c.kubeconfig.as_os_str(),
    ]);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let timer = Instant::now();
    let result = run(cli, &mut out, &mut err);
    let plugin = timer.elapsed();
    let text = String::from_utf8_lossy(&out);
    let summary = text
        .lines()
        .find(|l| l.starts_with("deleted:"))
        .unwrap_or("");
    assert!(
        result.is_ok(),
        "cleanup failed: {}",
        String::from_utf8_lossy(&err)
    );

    let requests = c.requests();
    let pods = identities - orphans;
    // The namespace's `default` ServiceAccount is listed too.
    let pages = (identities + 1).div_ceil(PAGE)
        + 2 * identities.div_ceil(PAGE)
        + pods.div_ceil(PAGE).max(1);
    let expected = pages + 3 * orphans;
    let left = c.list("v1", "ServiceAccount", Some(&ns)).len() - 1;
    println!("{summary}");
    println!(
        "requests: {} (budget {expected} = {pages} list pages + 3 x {orphans} deletes)",
        requests.len()
    );
    println!("worker service accounts left: {left} (expected {pods})");
    println!(
        "cleanup wall time: {:.2} s ({:.0} deletes/s)",
        plugin.as_secs_f64(),
        (3 * orphans) as f64 / plugin.as_secs_f64()
    );

    // Baseline: the same deletes by a bare client, straight to the server.
    let base_ns = c.ns_named("baseline");
    let names: Vec<String> = (0..orphans)
        .map(|i| format!("nvcf-worker-base-{i:05}"))
        .collect();
    c.create_all(names.iter().flat_map(|n| trio(&base_ns, n, None)).collect());
    let timer = Instant::now();
    let admin = &c.admin;
    client::runtime().block_on(
        futures::stream::iter(&names)
            .map(|name| {
                let base_ns = base_ns.clone();
                async move {
                    for plural in [
                        "rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
                        "rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
                    ] {
                        let path = format!("/apis/{}/{name}", plural.replace("{ns}", &base_ns));
                        admin
                            .send("DELETE", &path, None)
                            .await
                            .expect("baseline delete");
                    }
                    let path = format!("/api/v1/namespaces/{base_ns}/serviceaccounts/{name}");
                    admin
                        .send("DELETE", &path, None)
                        .await
                        .expect("baseline delete");
                }
            })
            .buffer_unordered(8)
            .collect::<Vec<()>>(),
    );
    let baseline = timer.elapsed();
    println!(
        "baseline (bare deletes, 8 identities at a time): {:.2} s ({:.0} deletes/s)",
        baseline.as_secs_f64(),
        (3 * orphans) as f64 / baseline.as_secs_f64()
    );
    println!(
        "cleanup / baseline: {:.2}",
        plugin.as_secs_f64() / baseline.as_secs_f64()
    );
    assert_eq!(requests.len(), expected);
    assert_eq!(left, pods);
}
