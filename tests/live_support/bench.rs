//! The cleanup benchmark's core, shared by `examples/live_bench.rs` (10 000
//! identities) and a small run in `tests/live_cleanup.rs`, so the budget it checks
//! cannot drift from what cleanup does without a test failing. It seeds worker
//! identities in one namespace (half orphaned, half with a running pod), runs
//! `cleanup --yes` in process through the recording proxy, and deletes as many
//! orphaned trios with a bare client at the same concurrency as the baseline of the
//! same run. Times are reported, never asserted; the request count is.

use std::time::{Duration, Instant};

use clap::Parser;
use futures::StreamExt;
use kubectl_nvcf_worker::cli::{run as run_cli, Cli};
use kubectl_nvcf_worker::live::executor::{batch_size, CONCURRENCY};

use super::*;

/// The requests a cleanup of one namespace must make, from what is in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// The plan's lists: ServiceAccounts, Roles, RoleBindings, pods and every
    /// pod-bearing kind, page by page.
    pub plan_pages: usize,
    /// The re-check: the pods' and the workload kinds' pages again, once per
    /// batch (all in the one namespace here).
    pub batch_pages: usize,
    /// Identities per batch: `executor::batch_size` of the namespace's pods.
    pub batch: usize,
    /// Three per orphaned trio.
    pub deletes: usize,
    /// One Event per orphan, when they are recorded.
    pub events: usize,
}

impl Budget {
    pub fn total(&self) -> usize {
        self.plan_pages + self.batch_pages + self.deletes + self.events
    }

    /// What was there before the item 1 re-check: list pages and deletes.
    pub fn without_recheck(&self) -> usize {
        self.plan_pages + self.deletes
    }

    /// Computed from the objects in `ns` now (before the run), the trios that
    /// are orphaned, and whether Events are recorded.
    pub fn of(c: &Cluster, ns: &str, page: usize, orphans: usize, events: bool) -> Budget {
        let pages = |api_version: &str, kind: &str| {
            c.list(api_version, kind, Some(ns))
                .len()
                .div_ceil(page)
                .max(1)
        };
        let trio = pages("v1", "ServiceAccount") + pages(RBAC, "Role") + pages(RBAC, "RoleBinding");
        // Every pod-bearing kind but pods, from the one definition cleanup lists.
        let pods = c.list("v1", "Pod", Some(ns)).len();
        let batch = batch_size(pods, page);
        let owner_pages = pages("v1", "Pod")
            + kubectl_nvcf_worker::live::client::workloads()
                .map(|r| pages(r.api_version, r.kind))
                .sum::<usize>();
        Budget {
            plan_pages: trio + owner_pages,
            batch_pages: orphans.div_ceil(batch) * owner_pages,
            batch,
            deletes: 3 * orphans,
            events: if events { orphans } else { 0 },
        }
    }
}

pub struct Report {
    pub identities: usize,
    pub orphans: usize,
    pub page: usize,
    pub budget: Budget,
    pub requests: usize,
    /// Worker ServiceAccounts left after the run.
    pub left: usize,
    /// The plugin's summary line.
    pub summary: String,
    pub seeding: Duration,
    pub cleanup: Duration,
    /// Bare deletes through the same proxy, [`CONCURRENCY`] identities at a time.
    pub baseline: Duration,
    /// The same, straight to the server.
    pub baseline_direct: Duration,
    /// CPU seconds the control plane's processes used during the cleanup and
    /// during the bare deletes through the proxy: what the re-check costs the
    /// server. Less moved by other loads than wall time, not immune: under load
    /// average 8-19 one build's ratio of these moved from 1.18 to 1.69.
    pub server_cpu: (f64, f64),
    /// The same for this process (plugin, proxy and harness).
    pub own_cpu: (f64, f64),
    /// Peak resident memory of this process during the cleanup, if readable...
    pub peak_rss_kib: Option<u64>,
    /// ...and what it was as the cleanup started (the harness's seeding, the
    /// allocator's free lists).
    pub start_rss_kib: Option<u64>,
}

impl Report {
    pub fn print(&self) {
        let b = &self.budget;
        println!(
            "seeded {} identities ({} orphaned, {} pods) in {:.1} s",
            self.identities,
            self.orphans,
            self.identities - self.orphans,
            self.seeding.as_secs_f64()
        );
        println!("{}", self.summary);
        println!(
            "requests: {} (budget {} = {} list pages + {} pod and workload pages for {} batches of {} + {} deletes + {} Events; without the re-check {})",
            self.requests,
            b.total(),
            b.plan_pages,
            b.batch_pages,
            self.orphans.div_ceil(b.batch),
            b.batch,
            b.deletes,
            b.events,
            b.without_recheck()
        );
        println!(
            "worker service accounts left: {} (expected {})",
            self.left,
            self.identities - self.orphans
        );
        let rate = |d: Duration| self.orphans as f64 / d.as_secs_f64();
        println!(
            "cleanup: {:.2} s ({:.0} identities/s)",
            self.cleanup.as_secs_f64(),
            rate(self.cleanup)
        );
        println!(
            "baseline, bare deletes through the proxy ({CONCURRENCY} identities at a time): {:.2} s ({:.0} identities/s)",
            self.baseline.as_secs_f64(),
            rate(self.baseline)
        );
        println!(
            "baseline, bare deletes straight to the server: {:.2} s ({:.0} identities/s)",
            self.baseline_direct.as_secs_f64(),
            rate(self.baseline_direct)
        );
        println!(
            "cleanup / baseline: {:.2} (through the proxy), {:.2} (straight to the server)",
            self.cleanup.as_secs_f64() / self.baseline.as_secs_f64(),
            self.cleanup.as_secs_f64() / self.baseline_direct.as_secs_f64()
        );
        let ((sc, sb), (oc, ob)) = (self.server_cpu, self.own_cpu);
        println!(
            "CPU seconds, control plane: cleanup {sc:.1}, bare deletes through the proxy {sb:.1} ({:.2}); this process: {oc:.1}, {ob:.1} ({:.2})",
            sc / sb,
            oc / ob
        );
        if let (Some(peak), Some(start)) = (self.peak_rss_kib, self.start_rss_kib) {
            println!(
                "peak RSS of the process during cleanup (plugin, proxy and harness): {:.1} MiB, {:.1} MiB above its {:.1} MiB at the start",
                peak as f64 / 1024.0,
                peak.saturating_sub(start) as f64 / 1024.0,
                start as f64 / 1024.0
            );
        }
    }
}

/// Resets the kernel's peak-RSS mark (`/proc/self/clear_refs`, 5).
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// A `/proc/self/status` figure in KiB: `VmHWM` (peak) or `VmRSS` (now).
fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// CPU seconds (user and system) used so far by the processes whose command
/// line names `dir` (the control plane's etcd, kube-apiserver and
/// controller-manager), and by this process.
fn cpu_seconds(dir: &std::path::Path) -> (f64, f64) {
    // SAFETY: sysconf reads a constant of the system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let of = |stat: &str| -> f64 {
        // After "pid (comm) ": state is field 3; utime and stime 14 and 15.
        let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let tick = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        };
        (tick(11) + tick(12)) as f64 / ticks
    };
    let dir = dir.to_string_lossy().into_owned();
    let mut server = 0.0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let path = entry.path();
        let cmdline = std::fs::read(path.join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&dir) {
            server += of(&std::fs::read_to_string(path.join("stat")).unwrap_or_default());
        }
    }
    let own = of(&std::fs::read_to_string("/proc/self/stat").unwrap_or_default());
    (server, own)
}

/// The CPU seconds of [`cpu_seconds`] used between two readings.
fn cpu_used(before: (f64, f64), after: (f64, f64)) -> (f64, f64) {
    (after.0 - before.0, after.1 - before.1)
}

/// Bare deletes of `orphans` seeded trios in a namespace of their own through
/// `admin`, [`CONCURRENCY`] identities at a time, each trio in cleanup's order.
/// Its time, and the CPU seconds ([`cpu_used`]) it took.
fn bare_deletes(c: &Cluster, admin: &Admin, base: &str, orphans: usize) -> (Duration, (f64, f64)) {
    let ns = c.ns_named(base);
    let names: Vec<String> = (0..orphans)
        .map(|i| format!("nvcf-worker-base-{i:05}"))
        .collect();
    c.create_all(names.iter().flat_map(|n| trio(&ns, n, None)).collect());
    let cpu_before = cpu_seconds(&c.cp.dir);
    let timer = Instant::now();
    client::runtime().block_on(
        futures::stream::iter(&names)
            .map(|name| {
                let ns = ns.clone();
                async move {
                    for path in [
                        format!("/apis/{RBAC}/namespaces/{ns}/rolebindings/{name}"),
                        format!("/apis/{RBAC}/namespaces/{ns}/roles/{name}"),
                        format!("/api/v1/namespaces/{ns}/serviceaccounts/{name}"),
                    ] {
                        admin
                            .send("DELETE", &path, None)
                            .await
                            .expect("baseline delete");
                    }
                }
            })
            .buffer_unordered(CONCURRENCY)
            .collect::<Vec<()>>(),
    );
    (
        timer.elapsed(),
        cpu_used(cpu_before, cpu_seconds(&c.cp.dir)),
    )
}

/// Seeds, runs cleanup with `--chunk-size page` (and `--record-events=false`
/// unless `events`), then the baselines.
pub fn run(c: &Cluster, identities: usize, page: usize, events: bool) -> Report {
    let orphans = identities / 2;
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
    let seeding = seeding.elapsed();
    let budget = Budget::of(c, &ns, page, orphans, events);
    c.clear_requests();

    // The plugin, in process, through the recording proxy.
    let page_text = page.to_string();
    let cli = Cli::parse_from([
        "kubectl-nvcf-worker".as_ref(),
        "cleanup".as_ref(),
        "--yes".as_ref(),
        "--min-age".as_ref(),
        "0s".as_ref(),
        "--chunk-size".as_ref(),
        page_text.as_ref(),
        "--kubeconfig".as_ref(),
        c.kubeconfig.as_os_str(),
        if events {
            "--record-events=true"
        } else {
            "--record-events=false"
        }
        .as_ref(),
    ]);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let measured_rss = reset_peak_rss();
    let start_rss_kib = status_kib("VmRSS:").filter(|_| measured_rss);
    let cpu_before = cpu_seconds(&c.cp.dir);
    let timer = Instant::now();
    let result = run_cli(cli, &mut out, &mut err);
    let cleanup = timer.elapsed();
    let cpu_cleanup = cpu_used(cpu_before, cpu_seconds(&c.cp.dir));
    let peak_rss_kib = status_kib("VmHWM:").filter(|_| measured_rss);
    assert!(
        result.is_ok(),
        "cleanup failed: {}",
        String::from_utf8_lossy(&err)
    );
    let text = String::from_utf8_lossy(&out);
    let summary = text
        .lines()
        .find(|l| l.starts_with("deleted:"))
        .unwrap_or("")
        .to_string();
    let requests = c.requests().len();
    let left = c
        .list("v1", "ServiceAccount", Some(&ns))
        .iter()
        .filter(|sa| sa["metadata"]["name"] != "default")
        .count();

    let via_proxy = Admin::new(&c.kubeconfig);
    let (baseline, cpu_baseline) = bare_deletes(c, &via_proxy, "baseline", orphans);
    let (baseline_direct, _) = bare_deletes(c, &c.admin, "direct", orphans);
    Report {
        identities,
        orphans,
        page,
        budget,
        requests,
        left,
        summary,
        seeding,
        cleanup,
        baseline,
        baseline_direct,
        server_cpu: (cpu_cleanup.0, cpu_baseline.0),
        own_cpu: (cpu_cleanup.1, cpu_baseline.1),
        peak_rss_kib,
        start_rss_kib,
    }
}
