//! `cleanup` end to end under hostile conditions (issue "Hardening", live faults),
//! against the real control plane behind the fault-injecting proxy: runs killed at
//! random points, and a large cleanup against a server that fails, throttles,
//! stalls and drops connections at random. Every test is seeded (a tiny xorshift,
//! printed on failure) and asserts only final states, never timing. Both tests
//! run `cleanup -A`, so each has a control plane of its own: neither waits for, nor
//! holds up, the tests sharing one.

use crate::live_support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use live_support::*;
use serde_json::{json, Value};

/// xorshift64: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform enough in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// The test's seed, or `LIVE_FAULTS_SEED` (decimal or 0x-hex) to explore others.
fn seed_or_env(default: u64) -> u64 {
    match std::env::var("LIVE_FAULTS_SEED") {
        Ok(v) => v
            .strip_prefix("0x")
            .map_or_else(|| v.parse(), |h| u64::from_str_radix(h, 16))
            .expect("LIVE_FAULTS_SEED: a number"),
        Err(_) => default,
    }
}

/// (apiVersion, kind, namespace, name): how the store tells objects apart.
type Key = (String, String, String, String);

fn key_of(obj: &Value) -> Key {
    let text = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    (
        text("/apiVersion"),
        text("/kind"),
        text("/metadata/namespace"),
        text("/metadata/name"),
    )
}

/// The kinds seeded, and whether controllers may change an object of the kind
/// (then only its uid and spec are compared).
const KINDS: [(&str, &str, bool); 8] = [
    ("v1", "ServiceAccount", false),
    (RBAC, "Role", false),
    (RBAC, "RoleBinding", false),
    ("v1", "Secret", false),
    ("v1", "ConfigMap", false),
    ("v1", "Pod", true),
    ("apps/v1", "Deployment", true),
    ("batch/v1", "CronJob", true),
];

/// Every object of the seeded kinds in the test's namespaces, and the
/// cluster-scoped ones it made, minus what the controller-manager adds to every
/// namespace (`default` ServiceAccount, `kube-root-ca.crt`).
fn snapshot(c: &Cluster, namespaces: &[String]) -> BTreeMap<Key, Value> {
    let mut out = BTreeMap::new();
    for ns in namespaces {
        for (api_version, kind, _) in KINDS {
            for o in c.list(api_version, kind, Some(ns)) {
                let name = o["metadata"]["name"].as_str().unwrap_or("");
                if (kind == "ServiceAccount" && name == "default")
                    || (kind == "ConfigMap" && name == "kube-root-ca.crt")
                {
                    continue;
                }
                out.insert(key_of(&o), o);
            }
        }
    }
    for kind in ["ClusterRole", "ClusterRoleBinding"] {
        if let Some(mut o) = c.get(RBAC, kind, None, "nvcf-worker-cluster") {
            o["apiVersion"] = json!(RBAC);
            o["kind"] = json!(kind);
            out.insert(key_of(&o), o);
        }
    }
    out
}

/// What cleanup must not change: everything for objects no controller touches;
/// uid and spec for workloads and pods (controllers write their status).
fn comparable(obj: &Value) -> Value {
    let controlled = KINDS
        .iter()
        .any(|(_, k, controlled)| *controlled && obj["kind"] == *k);
    if controlled {
        json!({"uid": obj["metadata"]["uid"], "spec": obj["spec"]})
    } else {
        obj.clone()
    }
}

/// The key a DELETE request names, if it names one object.
fn key_of_delete(path: &str) -> Option<Key> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (api_version, rest) = match *parts.first()? {
        "api" => (parts.get(1)?.to_string(), &parts[2..]),
        "apis" => (format!("{}/{}", parts.get(1)?, parts.get(2)?), &parts[3..]),
        _ => return None,
    };
    let [ns_word, ns, plural, name] = rest else {
        return None;
    };
    if *ns_word != "namespaces" {
        return None;
    }
    let kind = match *plural {
        "serviceaccounts" => "ServiceAccount",
        "roles" => "Role",
        "rolebindings" => "RoleBinding",
        other => other,
    };
    Some((
        api_version,
        kind.to_string(),
        ns.to_string(),
        name.to_string(),
    ))
}

fn trio_keys(ns: &str, name: &str) -> [Key; 3] {
    let k = |v: &str, kind: &str| (v.to_string(), kind.to_string(), ns.into(), name.into());
    [
        k(RBAC, "RoleBinding"),
        k(RBAC, "Role"),
        k("v1", "ServiceAccount"),
    ]
}

/// What was seeded, and what cleanup must take.
#[derive(Default)]
struct Seeded {
    /// (namespace, name) of every removable identity (orphaned or partial).
    removable: BTreeSet<(String, String)>,
    /// The objects of the removable identities, all of which must go.
    doomed: BTreeSet<Key>,
    /// Identities cleanup must keep, counted as its plan line does.
    active: usize,
}

impl Seeded {
    fn doomed_left(&self, now: &BTreeMap<Key, Value>) -> usize {
        self.doomed.iter().filter(|k| now.contains_key(*k)).count()
    }

    /// Removable identities with at least one object left.
    fn removable_left(&self, now: &BTreeMap<Key, Value>) -> BTreeSet<(String, String)> {
        self.removable
            .iter()
            .filter(|(ns, name)| trio_keys(ns, name).iter().any(|k| now.contains_key(k)))
            .cloned()
            .collect()
    }
}

/// Seeds `count` identities over `namespaces` namespaces (this test's
/// `team-<n>-<id>`, returned), every even one removable and every odd one not,
/// each in a seeded variant of its class; plus objects that are no identity of
/// ours at all (other names, other kinds, cluster-scoped). Real servers stamp
/// creationTimestamp themselves, so no identity is young here (runs use
/// `--min-age 0s`; the age rule is covered by the plan's unit tests and
/// tests/live_cleanup.rs).
fn populate(c: &Cluster, rng: &mut Rng, count: usize, namespaces: usize) -> (Seeded, Vec<String>) {
    let mut seeded = Seeded::default();
    let nss: Vec<String> = (0..namespaces)
        .map(|n| c.ns_named(&format!("team-{n}")))
        .collect();
    let elsewhere = c.ns_named("elsewhere");
    // Objects first, pods after them: the ServiceAccount admission plugin refuses
    // a pod whose account does not exist yet.
    let (mut objects, mut pods) = (Vec::new(), Vec::new());
    for (n, ns) in nss.iter().enumerate() {
        // Unrelated RBAC and near-miss names: never planned, never deleted.
        objects.push(json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "builder", "namespace": ns}}));
        objects.push(json!({"apiVersion": RBAC, "kind": "Role",
            "metadata": {"name": "reader", "namespace": ns}, "rules": []}));
        objects.push(json!({"apiVersion": RBAC, "kind": "RoleBinding",
            "metadata": {"name": "reader", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "builder", "namespace": ns}]}));
        for name in [
            format!("nvcf-workerx-{n}"),
            format!("my-nvcf-worker-{n}"),
            format!("worker-{n}"),
            format!("nvcf-worker{n}"),
        ] {
            objects.extend(trio(ns, &name, None));
        }
        // Worker-named objects of kinds cleanup never touches.
        objects.push(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("nvcf-worker-token-{n}"), "namespace": ns}, "type": "Opaque"}));
        objects.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("nvcf-worker-config-{n}"), "namespace": ns}, "data": {}}));
    }
    objects.push(json!({"apiVersion": RBAC, "kind": "ClusterRole",
        "metadata": {"name": "nvcf-worker-cluster"}, "rules": []}));
    objects.push(json!({"apiVersion": RBAC, "kind": "ClusterRoleBinding",
        "metadata": {"name": "nvcf-worker-cluster"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "nvcf-worker-cluster"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": &nss[0]}]}));

    for i in 0..count {
        let ns = nss[i % namespaces].clone();
        let pod_name = format!("w{i:04}");
        let name = format!("nvcf-worker-{pod_name}");
        if i % 2 == 0 {
            // Removable.
            let variant = rng.below(6);
            let objs = match variant {
                // The agent's trio, pod long gone.
                0 => trio(&ns, &name, None),
                // A pod of that name exists, but in another namespace (running as
                // that namespace's default account).
                1 => {
                    let other = nss[(i + 1) % namespaces].clone();
                    let other = if other == ns {
                        elsewhere.clone()
                    } else {
                        other
                    };
                    pods.push(pod(&other, &pod_name, "default", "Running"));
                    // Also a workload named like the pod in this namespace, of no consequence.
                    objects.push(deployment(&ns, &format!("{pod_name}-unrelated")));
                    trio(&ns, &name, None)
                }
                // Manifest-declared; its Deployment or CronJob was removed.
                2 => trio(&ns, &name, Some(("apps/v1", "Deployment", &pod_name))),
                3 => trio(&ns, &name, Some(("batch/v1", "CronJob", &pod_name))),
                // A torn-down leftover: only part of the trio.
                _ => {
                    let mut t = trio(&ns, &name, None);
                    let keep = 1 + rng.below(2) as usize;
                    t.drain(..3 - keep);
                    t
                }
            };
            for o in &objs {
                seeded.doomed.insert(key_of(o));
            }
            seeded.removable.insert((ns.clone(), name.clone()));
            objects.extend(objs);
        } else {
            // Kept: active.
            match rng.below(6) {
                0 => {
                    pods.push(pod(&ns, &pod_name, &name, "Running"));
                    objects.extend(trio(&ns, &name, None));
                }
                // Terminated pods count as present without --include-terminated.
                1 => {
                    const PHASES: [&str; 3] = ["Succeeded", "Failed", "Pending"];
                    let phase = rng.pick(&PHASES).to_string();
                    pods.push(pod(&ns, &pod_name, &name, &phase));
                    objects.extend(trio(&ns, &name, None));
                }
                // A pod of another name still runs as the account.
                2 => {
                    pods.push(pod(&ns, &format!("{pod_name}-abcde"), &name, "Running"));
                    objects.extend(trio(&ns, &name, None));
                }
                // Manifest-declared, its workload exists (scaled to zero: no pods).
                3 => {
                    objects.push(deployment(&ns, &pod_name));
                    objects.extend(trio(&ns, &name, Some(("apps/v1", "Deployment", &pod_name))));
                }
                4 => {
                    objects.push(cron_job(&ns, &pod_name));
                    objects.extend(trio(&ns, &name, Some(("batch/v1", "CronJob", &pod_name))));
                }
                // An owner kind the tool does not list: never guessed gone.
                _ => {
                    objects.extend(trio(
                        &ns,
                        &name,
                        Some(("argoproj.io/v1alpha1", "Rollout", &pod_name)),
                    ));
                }
            }
            seeded.active += 1;
        }
    }
    let started = Instant::now();
    let total = objects.len() + pods.len();
    c.create_all(objects);
    for ns in nss.iter().chain([&elsewhere]) {
        c.wait_for_default_account(ns);
    }
    c.create_all(pods);
    eprintln!("seeded {total} objects in {:.1?}", started.elapsed());
    (seeded, nss.into_iter().chain([elsewhere]).collect())
}

/// The exact final state: every doomed object gone, every other object exactly as
/// it was seeded (same uid, same resourceVersion, same content), nothing new.
fn assert_exact_final_state(
    c: &Cluster,
    nss: &[String],
    before: &BTreeMap<Key, Value>,
    seeded: &Seeded,
    seed: u64,
) {
    let after = snapshot(c, nss);
    let left: Vec<&Key> = seeded
        .doomed
        .iter()
        .filter(|k| after.contains_key(*k))
        .collect();
    assert!(
        left.is_empty(),
        "seed {seed:#x}: {} orphaned objects survived, e.g. {:?}",
        left.len(),
        &left[..left.len().min(5)]
    );
    let lost: Vec<&Key> = before
        .keys()
        .filter(|k| !seeded.doomed.contains(*k) && !after.contains_key(*k))
        .collect();
    assert!(
        lost.is_empty(),
        "seed {seed:#x}: {} objects that must stay were deleted, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    let new: Vec<&Key> = after.keys().filter(|k| !before.contains_key(*k)).collect();
    assert!(new.is_empty(), "seed {seed:#x}: objects appeared: {new:?}");
    for (k, obj) in &after {
        assert_eq!(
            obj["metadata"]["uid"], before[k]["metadata"]["uid"],
            "seed {seed:#x}: {k:?} was replaced"
        );
        assert_eq!(
            comparable(obj),
            comparable(&before[k]),
            "seed {seed:#x}: {k:?} was changed"
        );
    }
}

/// Every DELETE ever sent named an object of a removable identity, with the uid it
/// was seeded with as precondition; and per complete trio the first RoleBinding
/// delete came before the first Role delete, and that before the first
/// ServiceAccount delete (a half-deleted identity never grants more than before).
fn assert_deletes_were_only_of_orphans(
    requests: &[Request],
    before: &BTreeMap<Key, Value>,
    seeded: &Seeded,
    seed: u64,
) -> usize {
    let mut first: BTreeMap<Key, usize> = BTreeMap::new();
    let mut deletes = 0;
    for (i, r) in requests
        .iter()
        .enumerate()
        .filter(|(_, r)| r.method == "DELETE")
    {
        deletes += 1;
        let key = key_of_delete(&r.path)
            .unwrap_or_else(|| panic!("seed {seed:#x}: DELETE of no single object: {}", r.path));
        assert!(
            key.3.starts_with("nvcf-worker-"),
            "seed {seed:#x}: DELETE of a non-worker name: {}",
            r.path
        );
        assert!(
            seeded.doomed.contains(&key),
            "seed {seed:#x}: DELETE of an object that is no orphan's: {}",
            r.path
        );
        assert_eq!(
            r.body
                .as_ref()
                .and_then(|b| b.pointer("/preconditions/uid")),
            Some(&before[&key]["metadata"]["uid"]),
            "seed {seed:#x}: DELETE {} without the listed uid as precondition",
            r.path
        );
        assert_eq!(r.param("dryRun"), None, "{}", r.path);
        first.entry(key).or_insert(i);
    }
    for (ns, name) in &seeded.removable {
        let [rb, role, sa] = trio_keys(ns, name);
        if !(before.contains_key(&rb) && before.contains_key(&role) && before.contains_key(&sa)) {
            continue;
        }
        let (rb, role, sa) = (first.get(&rb), first.get(&role), first.get(&sa));
        assert!(
            rb.is_some() && role.is_some() && sa.is_some() && rb < role && role < sa,
            "seed {seed:#x}: {ns}/{name}: first deletes out of order: RoleBinding {rb:?}, Role {role:?}, ServiceAccount {sa:?}"
        );
    }
    deletes
}

fn plugin(c: &Cluster) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["cleanup", "--yes", "-A", "--min-age", "0s", "--kubeconfig"])
        .arg(&c.kubeconfig)
        .env_remove("KUBECONFIG");
    cmd
}

/// The `deleted: N identities (M objects); skipped: S; failed: F` line, as numbers.
fn summary(out: &str) -> Option<(usize, usize, usize, usize)> {
    let line = out.lines().find(|l| l.starts_with("deleted: "))?;
    let nums: Vec<usize> = line
        .split(|ch: char| !ch.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    match nums[..] {
        [d, o, s, f] => Some((d, o, s, f)),
        _ => panic!("unexpected summary line {line:?}"),
    }
}

fn plan_line(removable: usize, objects: usize, seeded: &Seeded) -> String {
    format!(
        "plan: delete {removable} identities ({objects} objects); keep {} (active: {})",
        seeded.active, seeded.active
    )
}

#[test]
fn interrupted_cleanups_then_a_rerun_remove_exactly_the_orphans() {
    const ROUNDS: usize = 15;
    let seed = seed_or_env(0x5eed_0001_c1ea_0001);
    let started = Instant::now();
    let mut rng = Rng::new(seed);
    let c = Cluster::start_exclusive_on(Plane::Own("live_faults_interrupted"));
    let (seeded, nss) = populate(&c, &mut rng, 300, 5);
    let before = snapshot(&c, &nss);
    assert_eq!(seeded.removable.len(), 150);
    assert_eq!(seeded.active, 150);
    // Every delete is held a little: kills land while deletes are in flight, which
    // the server then completes for a client that is gone.
    c.add_fault(
        Fault::new("/namespaces/", FaultKind::Delay(Duration::from_millis(15)))
            .method("DELETE")
            .times(1_000_000),
    );
    let mut progress = Vec::new();
    for _ in 0..ROUNDS {
        // Listing takes a few hundred ms against the real server: kills land
        // before, during and after the deletes.
        let wait = Duration::from_millis(100 + rng.below(1001));
        let sent = c.deletes().len();
        let mut child = plugin(&c)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the plugin");
        std::thread::sleep(wait);
        // SIGKILL; an error means it had already exited, which is fine too.
        let _ = child.kill();
        let status = child.wait().expect("reap the plugin");
        progress.push((wait.as_millis(), c.deletes().len() - sent, status.code()));
    }
    let interrupted = snapshot(&c, &nss);
    eprintln!(
        "seed {seed:#x}: rounds (kill after ms, deletes sent, exit code): {progress:?}; \
         orphaned objects left after the kills: {} of {}; partial identities: {}",
        seeded.doomed_left(&interrupted),
        seeded.doomed.len(),
        seeded
            .removable
            .iter()
            .filter(|(ns, name)| {
                let n = trio_keys(ns, name)
                    .iter()
                    .filter(|k| interrupted.contains_key(*k))
                    .count();
                n > 0 && n < 3
            })
            .count()
    );
    // Whatever the kills left (complete, partial or untouched identities), a run
    // to completion takes exactly the rest.
    let out = ok(&c.run(&["cleanup", "--yes", "-A", "--min-age", "0s"]));
    let (_, _, skipped, failed) = summary(&out).expect("a summary line");
    assert_eq!((skipped, failed), (0, 0), "seed {seed:#x}: {out}");
    assert_exact_final_state(&c, &nss, &before, &seeded, seed);
    assert_deletes_were_only_of_orphans(&c.requests(), &before, &seeded, seed);
    // And once more: nothing left to do.
    let out = ok(&c.run(&["cleanup", "--yes", "-A", "--min-age", "0s"]));
    assert!(
        out.contains(&plan_line(0, 0, &seeded)),
        "seed {seed:#x}: {out}"
    );
    assert_exact_final_state(&c, &nss, &before, &seeded, seed);
    eprintln!("took {:?}", started.elapsed());
}

/// A seeded random fault on DELETE or list requests, with a small `times`.
fn random_fault(rng: &mut Rng, namespaces: &[String]) -> Fault {
    let kind = match rng.below(6) {
        0 => FaultKind::Status(*rng.pick(&[500, 502, 503, 504])),
        1 => FaultKind::Status(500),
        2 => FaultKind::TooManyRequests {
            retry_after_secs: rng.below(2),
        },
        // A connection that drops before the server sees the request (one dropped
        // after the server acted would make the summary's object count, which
        // this test checks exactly, undercount: tests/live_cleanup.rs covers it).
        3 => FaultKind::Drop,
        _ => FaultKind::Delay(Duration::from_millis(5 + rng.below(46))),
    };
    let times = 1 + rng.below(3) as usize;
    if rng.below(3) == 0 {
        let path = *rng.pick(&[
            "/serviceaccounts",
            "/roles",
            "/rolebindings",
            "/pods",
            "/deployments",
        ]);
        Fault::new(path, kind).method("GET").times(times)
    } else {
        let plural = *rng.pick(&["/serviceaccounts/", "/roles/", "/rolebindings/"]);
        let path = match rng.below(3) {
            0 => plural.to_string(),
            1 => format!("/namespaces/{}{plural}", rng.pick(namespaces)),
            // One identity's object (even indices are the removable ones).
            _ => format!("{plural}nvcf-worker-w{:04}", 2 * rng.below(500)),
        };
        Fault::new(&path, kind).method("DELETE").times(times)
    }
}

#[test]
fn random_server_faults_during_a_large_cleanup_leave_the_exact_state() {
    const FAULTS: usize = 60;
    let seed = seed_or_env(0x5eed_0002_fa17_0002);
    let started = Instant::now();
    let mut rng = Rng::new(seed);
    let c = Cluster::start_exclusive_on(Plane::Own("live_faults_random"));
    let (seeded, nss) = populate(&c, &mut rng, 1000, 10);
    let before = snapshot(&c, &nss);
    assert_eq!(seeded.removable.len(), 500);
    // Added first, so they fire first: two complete orphans whose Role, and
    // ServiceAccount, fail all 5 attempts in whichever run first tries them (that
    // run reports them failed; the next takes what is left of them), and one
    // expired continue token on a paged list.
    let complete: Vec<&(String, String)> = seeded
        .removable
        .iter()
        .filter(|(ns, name)| trio_keys(ns, name).iter().all(|k| before.contains_key(k)))
        .collect();
    let (giving_up_role, giving_up_account) = (&complete[0].1, &complete[1].1);
    c.add_fault(
        Fault::new(&format!("/roles/{giving_up_role}"), FaultKind::Status(503))
            .method("DELETE")
            .times(5),
    );
    c.add_fault(
        Fault::new(
            &format!("/serviceaccounts/{giving_up_account}"),
            FaultKind::TooManyRequests {
                retry_after_secs: 0,
            },
        )
        .method("DELETE")
        .times(5),
    );
    c.add_fault(Fault::new("/serviceaccounts", FaultKind::ExpireContinue).method("GET"));
    let mut firings = 11;
    for _ in 0..FAULTS {
        let f = random_fault(&mut rng, &nss[..10]);
        firings += f.times;
        c.add_fault(f);
    }
    // What cleanup guarantees: each run deletes some orphans and reports the rest as
    // failed (exit 1), never touching anything else; a rerun takes what is left. A
    // failing run uses up at least one request's 5 attempts, i.e. 5 fault firings,
    // so this many runs always suffice.
    let max_runs = firings / 5 + 2;
    let mut runs = 0;
    let mut deleted_total = 0;
    let mut failed_runs = 0;
    let last: Output = loop {
        runs += 1;
        assert!(
            runs <= max_runs,
            "seed {seed:#x}: no clean run after {max_runs} runs"
        );
        let start = snapshot(&c, &nss);
        let (left_ids, left_objects) = (seeded.removable_left(&start), seeded.doomed_left(&start));
        let out = c.run(&["cleanup", "--yes", "-A", "--min-age", "0s"]);
        let (text, err) = (stdout(&out), stderr(&out));
        let now = snapshot(&c, &nss);
        eprintln!(
            "seed {seed:#x}: run {runs}: exit {:?}: {}",
            out.status.code(),
            text.lines()
                .find(|l| l.starts_with("deleted: "))
                .unwrap_or(err.trim())
        );
        let Some((deleted, objects, skipped, failed)) = summary(&text) else {
            // A list gave up: the run stops before planning and deletes nothing.
            assert_eq!(out.status.code(), Some(1), "seed {seed:#x}: {text}\n{err}");
            assert!(
                err.contains("gave up after 5 attempts"),
                "seed {seed:#x}: {err}"
            );
            assert_eq!(
                seeded.doomed_left(&now),
                left_objects,
                "seed {seed:#x}: {err}"
            );
            continue;
        };
        // The plan took exactly what was left, and the summary tells what happened:
        // identities now gone were deleted, those with objects left failed.
        assert!(
            text.contains(&plan_line(left_ids.len(), left_objects, &seeded)),
            "seed {seed:#x}: run {runs}: {text}"
        );
        let still = seeded.removable_left(&now);
        assert_eq!(skipped, 0, "seed {seed:#x}: {text}");
        assert_eq!(failed, still.len(), "seed {seed:#x}: {text}\n{err}");
        assert_eq!(
            deleted,
            left_ids.len() - still.len(),
            "seed {seed:#x}: {text}"
        );
        // Failed identities are reported with what stopped them.
        let reported: BTreeSet<(String, String)> = err
            .lines()
            .filter_map(|l| l.strip_prefix("error: "))
            .filter_map(|l| l.split_once(": "))
            .filter_map(|(who, _)| who.split_once('/'))
            .map(|(ns, name)| (ns.to_string(), name.to_string()))
            .collect();
        assert_eq!(reported, still, "seed {seed:#x}: {err}");
        // Every object this run deleted counts, also those of identities that then
        // failed part-way.
        let expected_objects: usize = left_ids
            .iter()
            .flat_map(|(ns, name)| trio_keys(ns, name))
            .filter(|k| start.contains_key(k) && !now.contains_key(k))
            .count();
        assert_eq!(objects, expected_objects, "seed {seed:#x}: {text}");
        deleted_total += deleted;
        if out.status.success() {
            assert_eq!(failed, 0);
            // The last run's summary: exactly what was left when it started.
            assert_eq!(
                (deleted, objects),
                (left_ids.len(), left_objects),
                "seed {seed:#x}: {text}"
            );
            break out;
        }
        assert_eq!(out.status.code(), Some(1), "seed {seed:#x}: {text}\n{err}");
        assert!(failed > 0, "seed {seed:#x}: {text}");
        failed_runs += 1;
    };
    assert!(failed_runs >= 1, "seed {seed:#x}: no run reported failures");
    eprintln!(
        "seed {seed:#x}: {runs} run(s); identities deleted per summaries: {}; pending faults: {}",
        deleted_total,
        c.pending_faults().len()
    );
    assert!(
        stdout(&last).contains("skipped: 0; failed: 0"),
        "{}",
        stdout(&last)
    );
    assert_eq!(
        deleted_total, 500,
        "seed {seed:#x}: every orphan counted once"
    );
    assert_exact_final_state(&c, &nss, &before, &seeded, seed);
    let deletes = assert_deletes_were_only_of_orphans(&c.requests(), &before, &seeded, seed);
    // The faults forced retries, of deletes the server had not done.
    assert!(
        deletes > seeded.doomed.len(),
        "seed {seed:#x}: {deletes} deletes"
    );
    // Converged: another run (on a healthy server) finds nothing to do.
    c.clear_faults();
    let out = ok(&c.run(&["cleanup", "--yes", "-A", "--min-age", "0s"]));
    assert!(
        out.contains(&plan_line(0, 0, &seeded)),
        "seed {seed:#x}: {out}"
    );
    assert!(
        out.contains("deleted: 0 identities (0 objects); skipped: 0; failed: 0"),
        "{out}"
    );
    assert_exact_final_state(&c, &nss, &before, &seeded, seed);
    eprintln!("took {:?}", started.elapsed());
}
