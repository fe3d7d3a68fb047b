//! One verdict on generated pods (issue 44): pod specs generated around the
//! token surface (`support::surface`) go through `validate` (the guard, offline),
//! inject, and the real kube-apiserver 1.36's admission: the guard's validating
//! policy by server-side dry-run as the agent, the allowed applier and a
//! restricted user, and the mutating policy in a selected namespace. The faces
//! must agree:
//! - a worker Deployment (the spec made to run as its workload's identity, with
//!   its trio): the applier is admitted exactly when the guard finds no rule
//!   enforced at admission, and refused with one of the rules the guard found;
//!   the restricted user is refused, the agent admitted; stored (by the agent),
//!   `audit` finds on it exactly the guard's rules enforced in audit;
//! - whatever inject accepts, its output is admitted from the applier;
//! - a selected bare Pod is either mutated, then admitted and clean under the
//!   guard, or left unmutated and refused with a rule id; it is mutated when
//!   inject would give it the identity without replacing anything, and only
//!   when inject accepts it.
//!
//! `NVCF_SURFACE_LIVE_CASES` sets the number of fresh specs (default 48, in
//! batches of 16), `NVCF_SURFACE_SEED` their seed (else the clock's). A
//! disagreement prints the spec whole, with the seed of its batch, which is kept
//! in `tests/fixtures/surface/live-seeds.txt` and replayed first on every run.

use crate::live_support;
use crate::support;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Output};

use kubectl_nvcf_worker::config::Config;
use kubectl_nvcf_worker::guard;
use kubectl_nvcf_worker::identity::{self as id, Marks, Naming, Owner};
use kubectl_nvcf_worker::inject;
use kubectl_nvcf_worker::manifest::batch::Batch;
use kubectl_nvcf_worker::manifest::read::{load, Input};
use kubectl_nvcf_worker::pipeline::sink::render_json;
use kubectl_nvcf_worker::report::Severity;
use kubectl_nvcf_worker::rules::{self, Where};
use live_support::policy::*;
use live_support::*;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config as RunnerConfig, RngAlgorithm, TestRng, TestRunner};
use serde_json::{json, Value};
use support::surface::{pod_spec, PodSpec, ENV};

/// Its own control plane: its admission policies see every pod of the cluster.
const PLANE: Plane = Plane::Own("live_surface");
const CLUSTER_ID: &str = "prod-1";
const MUTATING_LABEL: &str = "nvcf-surface-mutating";
const ADMISSION: &str = "/apis/admissionregistration.k8s.io/v1";
/// Seeds (`NVCF_SURFACE_SEED`) whose specs disagreed once, replayed first:
/// `<seed> <count> <what it found>`, the seed and count a failure prints.
const SEEDS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/surface/live-seeds.txt"
);

fn batch_of(objs: &[Value]) -> Batch {
    let text = json!({"apiVersion": "v1", "kind": "List", "items": objs}).to_string();
    let source = load(Input {
        name: "gen.json".into(),
        bytes: text.into_bytes(),
        utf16: None,
    })
    .expect("generated JSON loads");
    Batch::new(vec![source])
}

/// The rules the guard refuses `objs` with that admission enforces too.
fn guard_rules(objs: &[Value]) -> BTreeSet<String> {
    guard_rules_at(objs, Where::Admission)
}

/// The rules the guard refuses `objs` with that `at` enforces too.
fn guard_rules_at(objs: &[Value], at: Where) -> BTreeSet<String> {
    let allow = guard::Allow {
        self_refs: &Default::default(),
    };
    let admission: BTreeSet<&str> = rules::ids_at(at, true).collect();
    guard::check(&batch_of(objs), &allow)
        .into_iter()
        .filter(|f| f.severity == Severity::Error)
        .filter_map(|f| f.rule.map(str::to_string))
        .filter(|r| admission.contains(r.as_str()))
        .collect()
}

/// inject's output objects, or None when it refuses.
fn injected(objs: &[Value], naming: Naming, include_init: bool) -> Option<Vec<Value>> {
    let mut b = batch_of(objs);
    let cfg = Config {
        cluster_id: Some(CLUSTER_ID.into()),
        include_init_containers: include_init,
        naming,
        ..Config::default()
    };
    if inject::inject(&mut b, &cfg).has_errors() {
        return None;
    }
    let v: Value = serde_json::from_slice(&render_json(&b)).unwrap();
    Some(match v["kind"].as_str() {
        Some("List") => v["items"].as_array().unwrap().clone(),
        _ => vec![v],
    })
}

/// What a caller's batch came to, per object name: None admitted, Some(rule or
/// the whole error) refused.
fn verdicts(out: &Output, names: &[String]) -> Vec<Option<String>> {
    let err = stderr(out);
    names
        .iter()
        .map(|n| {
            let line = err.lines().find(|l| {
                l.contains(&format!("\"{n}\" is forbidden"))
                    || l.contains(&format!("\"{n}\" is invalid"))
            })?;
            Some(
                line.split("denied request: ")
                    .nth(1)
                    .map(|r| r[..6].to_string())
                    .unwrap_or_else(|| line.to_string()),
            )
        })
        .collect()
}

/// A generated spec the API server decodes: no ill-typed account or automount,
/// no ephemeral container on create (it refuses those before admission).
fn servable(mut s: PodSpec) -> PodSpec {
    if s.account == 5 {
        s.account = 1;
    }
    if s.automount == 4 {
        s.automount = 1;
    }
    s.ephemeral = false;
    if s.record == Some(1) {
        s.record = None;
    }
    s
}

/// The spec made to run as its workload's identity, near the contract: every
/// container carries the contract unless the spec says otherwise, automount off
/// unless the spec keeps it.
fn worker(mut s: PodSpec) -> PodSpec {
    if s.account != 1 {
        for c in &mut s.containers {
            c.contract = true;
        }
    }
    if s.automount != 1 {
        s.automount = 2;
    }
    s
}

fn deployment(s: &PodSpec, ns: &str, name: &str) -> Value {
    let mut d = s.deployment(name, &id::audience(CLUSTER_ID));
    d["metadata"]["namespace"] = json!(ns);
    d
}

/// The worker Deployment with its identity and trio.
fn worker_objects(s: &PodSpec, ns: &str, name: &str) -> Vec<Value> {
    let mut d = deployment(&worker(s.clone()), ns, name);
    let owner = Owner {
        marks: Marks::Workload {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: name.into(),
        },
        namespace: Some(ns.into()),
    };
    let account = owner.marks.identity_name();
    d["spec"]["template"]["spec"]["serviceAccountName"] = json!(account);
    let mut objs: Vec<Value> = id::trio(&account, &owner).into();
    objs.push(d);
    objs
}

fn bare_pod(s: &PodSpec, ns: &str, name: &str) -> Value {
    let d = deployment(s, ns, name);
    let mut meta = d["spec"]["template"]["metadata"].clone();
    meta["name"] = json!(name);
    meta["namespace"] = json!(ns);
    if let Some(a) = d["metadata"].get("annotations") {
        meta["annotations"] = a.clone();
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": d["spec"]["template"]["spec"]})
}

fn plugin(args: &[&str]) -> String {
    ok(&Command::new(BIN).args(args).output().unwrap())
}

/// Deletes the mutating policy when the test ends.
struct Mutating<'a>(&'a Cluster, String);

impl Drop for Mutating<'_> {
    fn drop(&mut self) {
        let check = format!("{}-selected", self.1);
        for path in [
            format!("{ADMISSION}/mutatingadmissionpolicybindings/{}", self.1),
            format!("{ADMISSION}/mutatingadmissionpolicies/{}", self.1),
            format!("{ADMISSION}/validatingadmissionpolicybindings/{check}"),
            format!("{ADMISSION}/validatingadmissionpolicies/{check}"),
        ] {
            let _ = self.0.admin.call("DELETE", &path, None);
        }
    }
}

fn cases() -> usize {
    std::env::var("NVCF_SURFACE_LIVE_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(48)
}

/// Generated specs, from a seed printed with every failure.
fn specs(seed: u64, n: usize) -> Vec<PodSpec> {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        RunnerConfig::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    );
    (0..n)
        .map(|_| servable(pod_spec().new_tree(&mut runner).unwrap().current()))
        .collect()
}

/// Waits until the mutating policy gives a plain selected pod the identity.
fn wait_until_mutating(user: &PathBuf, ns: &str) {
    let probe = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "probe", "namespace": ns, "labels": {id::WORKER_LABEL: "true"}},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}});
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let out = kubectl_as(
            user,
            &["create", "-o", "json", "--dry-run=server"],
            Some(&probe.to_string()),
        );
        if out.status.success() && stdout(&out).contains(id::ADMITTED_ANNOTATION) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the mutation did not take effect: {}",
            stderr(&out)
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

#[test]
fn generated_pod_specs_get_one_verdict_from_the_guard_inject_and_both_policies() {
    let c = Cluster::start_on(PLANE);
    let who = callers(&c);
    let g = c.ns.clone();
    cover(&c, &g);
    let _guard = install(&c, &["--trust-mutation"]);
    wait_until_enforced(&c, &g, false);
    // The mutating namespace: covered by the guard's policy too (it admits the
    // mutated pods), with the namespace kit applied by the applier.
    let m = c.ns_named("surface-mutating");
    cover(&c, &m);
    let name = format!("nvcf-worker-identity-{}", c.id);
    let selector = format!("{MUTATING_LABEL}={}", c.id);
    let yaml = plugin(&[
        "policy",
        "--mutating",
        "--cluster-id",
        CLUSTER_ID,
        "--name",
        &name,
        "--namespace-selector",
        &selector,
    ]);
    let _mutating = Mutating(&c, name);
    ok(&kubectl_as(&c.admin_kubeconfig, &["apply"], Some(&yaml)));
    let kit_yaml = plugin(&[
        "policy",
        "--namespace-kit",
        &m,
        "--namespace-selector",
        &selector,
    ]);
    ok(&kubectl_as(&who.applier, &["apply"], Some(&kit_yaml)));
    // The kit relabels the namespace: cover it again for the guard's policy.
    cover(&c, &m);
    // The accounts the generated pods name must exist, or the ServiceAccount
    // admission plugin refuses the pods before the policies decide.
    let app = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "app", "namespace": m}});
    c.admin
        .create(&app)
        .unwrap_or_else(|e| panic!("create {app}: {e}"));
    c.wait_for_default_account(&m);
    let kit: Vec<Value> = id::trio(
        id::WORKER_NAME,
        &Owner {
            marks: Marks::Namespace,
            namespace: Some(m.clone()),
        },
    )
    .into();
    wait_until_mutating(&who.user, &m);

    let seed: u64 = std::env::var("NVCF_SURFACE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
        });
    // The seeds of earlier disagreements run first, a batch each.
    let mut kept: Vec<(u64, usize)> = std::fs::read_to_string(SEEDS)
        .unwrap_or_else(|e| panic!("{SEEDS}: {e}"))
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut w = l.split_whitespace().map(str::parse::<u64>);
            match (w.next(), w.next()) {
                (Some(Ok(seed)), Some(Ok(count))) => (seed, count as usize),
                _ => panic!("{SEEDS}: not '<seed> <count> <what>': {l}"),
            }
        })
        .collect();
    kept.push((seed, cases()));
    // Each spec with the seed and count that make it.
    let all: Vec<(String, PodSpec)> = kept
        .iter()
        .flat_map(|&(k, count)| {
            specs(k, count)
                .into_iter()
                .map(move |s| (format!("{k} {count}"), s))
        })
        .collect();
    let n = all.len();
    let started = std::time::Instant::now();
    let mut failures: Vec<String> = Vec::new();
    let (mut compared, mut admitted, mut mutated) = (0, 0, 0);
    let mut audit_want: Vec<(String, BTreeSet<String>)> = Vec::new();
    for (b, chunk) in all.chunks(16).enumerate() {
        let origin: Vec<&String> = chunk.iter().map(|(o, _)| o).collect();
        let chunk: Vec<&PodSpec> = chunk.iter().map(|(_, s)| s).collect();
        // Worker Deployments: guard vs agent, applier, user.
        let mut objs = Vec::new();
        let mut names = Vec::new();
        let mut want = Vec::new();
        for (i, s) in chunk.iter().enumerate() {
            let name = format!("w{b}-{i}");
            let w = worker_objects(s, &g, &name);
            want.push(guard_rules(&w));
            objs.extend(w);
            names.push(name);
        }
        // inject's accepted outputs, from the applier.
        let mut outputs = Vec::new();
        let mut out_names = Vec::new();
        for (i, s) in chunk.iter().enumerate() {
            let name = format!("i{b}-{i}");
            if let Some(o) = injected(
                &[deployment(s, &g, &name)],
                Naming::PerWorkload,
                s.include_init,
            ) {
                outputs.extend(o);
                out_names.push(name);
            }
        }
        let applier_out = try_create(&who.applier, &objs, true);
        let applier = verdicts(&applier_out, &names);
        let errors = stderr(&applier_out)
            .lines()
            .filter(|l| l.starts_with("Error"))
            .count();
        if errors != applier.iter().flatten().count() {
            failures.push(format!(
                "applier: objects other than the workloads refused (seed {seed}):\n{}",
                stderr(&applier_out)
            ));
        }
        let user = verdicts(&try_create(&who.user, &objs, true), &names);
        let agent = verdicts(&try_create(&who.agent, &objs, true), &names);
        // Stored by the agent (exempt), without replicas, for audit below.
        let stored: Vec<Value> = objs
            .iter()
            .map(|o| {
                let mut o = o.clone();
                if o["kind"] == "Deployment" {
                    o["spec"]["replicas"] = json!(0);
                    let name = o["metadata"]["name"].as_str().unwrap().to_string();
                    let spec = chunk[names.iter().position(|n| *n == name).unwrap()];
                    audit_want.push((
                        name,
                        guard_rules_at(
                            &worker_objects(spec, &g, o["metadata"]["name"].as_str().unwrap()),
                            Where::Audit,
                        ),
                    ));
                }
                o
            })
            .collect();
        ok(&try_create(&who.agent, &stored, false));
        for (i, s) in chunk.iter().enumerate() {
            compared += 3;
            let spec = || {
                format!("seed and count {}, spec {i}: {s:?}", origin[i])
                    + &format!(
                        "\n{}",
                        serde_json::to_string(&worker_objects(s, &g, &names[i]).last().unwrap())
                            .unwrap()
                    )
            };
            let agree = match (&applier[i], want[i].is_empty()) {
                (None, true) => true,
                (Some(r), false) => want[i].contains(r),
                _ => false,
            };
            admitted += applier[i].is_none() as usize;
            if !agree {
                failures.push(format!(
                    "applier: policy {:?}, guard {:?}; {}",
                    applier[i],
                    want[i],
                    spec()
                ));
            }
            if user[i].as_deref().is_none_or(|r| !r.starts_with("NVW")) {
                failures.push(format!(
                    "user: not refused with a rule: {:?}; {}",
                    user[i],
                    spec()
                ));
            }
            if agent[i].is_some() {
                failures.push(format!("agent: refused {:?}; {}", agent[i], spec()));
            }
        }
        if !outputs.is_empty() {
            let out = verdicts(&try_create(&who.applier, &outputs, true), &out_names);
            for (n, v) in out_names.iter().zip(out) {
                compared += 1;
                if let Some(v) = v {
                    failures.push(format!(
                        "inject's output {n} refused from the applier: {v} (seed {seed})"
                    ));
                }
            }
        }
        // Selected bare pods through the mutating policy, as the user.
        let pods: Vec<Value> = chunk
            .iter()
            .enumerate()
            .map(|(i, s)| bare_pod(s, &m, &format!("p{b}-{i}")))
            .collect();
        let pod_names: Vec<String> = (0..chunk.len()).map(|i| format!("p{b}-{i}")).collect();
        let out = kubectl_as(
            &who.user,
            &["create", "-o", "json", "--dry-run=server"],
            Some(&json!({"apiVersion": "v1", "kind": "List", "items": pods}).to_string()),
        );
        let refused = verdicts(&out, &pod_names);
        // One JSON object per created pod, or a List of them.
        let items: Vec<Value> = serde_json::Deserializer::from_str(&stdout(&out))
            .into_iter::<Value>()
            .map(|v| v.unwrap_or_else(|e| panic!("kubectl printed no JSON: {e}\n{}", stdout(&out))))
            .flat_map(|v| match v["kind"].as_str() {
                Some("List") => v["items"].as_array().unwrap().clone(),
                _ => vec![v],
            })
            .collect();
        for (i, s) in chunk.iter().enumerate() {
            compared += 1;
            let spec = || format!("seed and count {}, pod {i}: {s:?}\n{}", origin[i], pods[i]);
            let got = items
                .iter()
                .find(|p| p["metadata"]["name"] == pod_names[i].as_str());
            let inject_accepts =
                injected(std::slice::from_ref(&pods[i]), Naming::PerNamespace, false).is_some();
            match (&refused[i], got) {
                (None, Some(p)) => {
                    let stamped = p["metadata"]["annotations"]
                        .get(id::ADMITTED_ANNOTATION)
                        .is_some();
                    if !stamped {
                        failures.push(format!("mutating: admitted unmutated; {}", spec()));
                        continue;
                    }
                    mutated += 1;
                    let mut objs = kit.clone();
                    objs.push(p.clone());
                    let rules = guard_rules(&objs);
                    if !rules.is_empty() {
                        failures.push(format!("mutating: mutated and admitted, but the guard refuses {rules:?}; {}\n{p}", spec()));
                    }
                    // inject refuses a hand-written record (NVW116, manifests only)
                    // and an API token volume the author wrote (automount off, it
                    // is a second token); admission cannot tell that volume from
                    // the one the ServiceAccount plugin adds, and takes it out.
                    if !inject_accepts && s.record.is_none() && !s.volumes.contains(&5) {
                        failures.push(format!(
                            "mutating: mutated, but inject refuses the pod; {}",
                            spec()
                        ));
                    }
                }
                (Some(r), _) if r.starts_with("NVW") => {
                    // What the mutation leaves alone by design (then refused by
                    // its companion): another account, the contract's volume,
                    // mount or env already there (inject takes the author's env).
                    let plain = matches!(s.account, 0 | 2 | 3)
                        && !s.volumes.iter().any(|&v| v == 2 || v == 3)
                        && !s
                            .containers
                            .iter()
                            .chain(&s.init)
                            .any(|c| c.contract || c.env.iter().any(|&e| e < ENV - 1));
                    if inject_accepts && plain {
                        failures.push(format!("mutating: refused {r}, but inject gives it the identity replacing nothing; {}", spec()));
                    }
                }
                other => failures.push(format!("mutating: {other:?}; {}", spec())),
            }
        }
    }
    // audit of the stored worker Deployments: the guard's rules enforced there.
    let out = c.run(&["audit", "--cluster-id", CLUSTER_ID, "-o", "json"]);
    let report: Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("audit -o json: {e}\n{}", stderr(&out)));
    for (name, want) in &audit_want {
        compared += 1;
        let got: BTreeSet<String> = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| {
                f["severity"] == "error"
                    && f["resource"]["kind"] == "Deployment"
                    && f["resource"]["name"] == name.as_str()
            })
            .map(|f| f["rule"].as_str().unwrap().to_string())
            .collect();
        if &got != want {
            failures.push(format!(
                "audit of Deployment {name}: {got:?}, guard {want:?} (seed {seed})"
            ));
        }
    }
    eprintln!(
        "token surface on the real API server: {n} specs (seed {seed}), {compared} verdicts compared, {admitted} worker Deployments admitted from the applier, {mutated} pods mutated, in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(
        audit_want.iter().any(|(_, w)| w.is_empty())
            && audit_want.iter().any(|(_, w)| !w.is_empty()),
        "audit compared on clean and refused Deployments both"
    );
    assert!(
        admitted > 0 && admitted < n,
        "both verdicts drawn: {admitted} of {n} admitted"
    );
}
