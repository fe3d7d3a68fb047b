//! Cleanup at scale against the real control plane (tests/live_support: etcd,
//! kube-apiserver and kube-controller-manager built by
//! scripts/build-control-plane.sh): 10 000 worker identities, half of them
//! orphaned. The core is `tests/live_support/bench.rs`, which `cargo test --test
//! live live_cleanup` runs small; this prints the full-size figures: the request count
//! against the budget, cleanup's wall time, and its ratio to bare deletes of as
//! many trios in the same run at the same concurrency; once with an Event
//! recorded per identity taken (the default) and once with `--record-events=false`,
//! each in a namespace of its own with its own baselines.
//!
//! cargo run --release --example live_bench [-- IDENTITIES [PAGE]]

#[path = "../tests/live_support/mod.rs"]
mod live_support;

use std::time::Instant;

use live_support::*;

fn main() {
    let mut args = std::env::args().skip(1);
    let identities: usize = args
        .next()
        .map_or(10_000, |n| n.parse().expect("IDENTITIES is a number"));
    let page: usize = args
        .next()
        .map_or(500, |n| n.parse().expect("PAGE is a number"));
    let started = Instant::now();
    for events in [true, false] {
        let c = Cluster::start();
        println!(
            "control plane: ready in {:.1} s (first use in this process: {:.1} s)",
            c.cp.startup.as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
        println!("--record-events={events}");
        let report = bench::run(&c, identities, page, events);
        report.print();
        assert_eq!(report.requests, report.budget.total(), "request budget");
        assert_eq!(report.left, identities - report.orphans, "accounts left");
    }
}
