//! `cleanup` never deletes an identity anything will use (issue 43), on the real
//! control plane with its controllers: the namespace kit the mutating policy
//! gives (a labelled Deployment at 0, a suspended CronJob), a PodTemplate's
//! identity as `inject` writes it, and generated histories checked after every
//! cleanup run by asking the API server to admit the pods the remaining objects
//! would make (dry run, through admission: the mutating policy and the
//! ServiceAccount plugin), and that whatever nothing can use any more is gone.
//!
//! Pods made while a cleanup runs (each object's next pod, for real) are
//! checked the same way.
//!
//! Its own control plane, one test at a time: a mutating policy sees every pod
//! of the cluster, and cleanup reads every policy of the tool.

use crate::live_support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use kubectl_nvcf_worker::identity as id;
use live_support::policy::kubectl_as;
use live_support::*;
use serde_json::{json, Value};

const PLANE: Plane = Plane::Own("live_in_use");
/// The namespace label this test's mutating policy selects (value: the test id).
const SELECT: &str = "nvcf-in-use-test";
const ADMISSION: &str = "/apis/admissionregistration.k8s.io/v1";

fn plugin(args: &[&str]) -> String {
    ok(&Command::new(BIN).args(args).output().unwrap())
}

/// The test's mutating policy (`policy --mutating`), its binding and companion.
struct Policy<'a> {
    c: &'a Cluster,
    name: String,
}

impl Policy<'_> {
    fn selector(c: &Cluster) -> String {
        format!("{SELECT}={}", c.id)
    }

    fn install(c: &Cluster) -> Policy<'_> {
        let name = format!("nvcf-worker-identity-{}", c.id);
        let yaml = plugin(&[
            "policy",
            "--mutating",
            "--cluster-id",
            "c1",
            "--name",
            &name,
            "--namespace-selector",
            &Self::selector(c),
        ]);
        ok(&kubectl_as(&c.admin_kubeconfig, &["apply"], Some(&yaml)));
        Policy { c, name }
    }

    fn paths(&self) -> Vec<String> {
        let check = format!("{}-selected", self.name);
        vec![
            format!("{ADMISSION}/mutatingadmissionpolicybindings/{}", self.name),
            format!("{ADMISSION}/mutatingadmissionpolicies/{}", self.name),
            format!("{ADMISSION}/validatingadmissionpolicybindings/{check}"),
            format!("{ADMISSION}/validatingadmissionpolicies/{check}"),
        ]
    }
}

impl Drop for Policy<'_> {
    fn drop(&mut self) {
        for path in self.paths() {
            let _ = self.c.admin.call("DELETE", &path, None);
        }
    }
}

/// The namespace kit as printed (its Namespace labels `ns` selected).
fn apply_kit(c: &Cluster, ns: &str) {
    c.namespace(ns);
    let yaml = plugin(&[
        "policy",
        "--namespace-kit",
        ns,
        "--namespace-selector",
        &Policy::selector(c),
    ]);
    ok(&kubectl_as(&c.admin_kubeconfig, &["apply"], Some(&yaml)));
}

fn set_label(c: &Cluster, ns: &str, value: Option<String>) {
    let (code, text) = client::runtime()
        .block_on(c.admin.send_raw(
            "PATCH",
            &format!("/api/v1/namespaces/{ns}"),
            Some(&json!({"metadata": {"labels": {SELECT: value}}})),
            "application/merge-patch+json",
        ))
        .unwrap();
    assert_eq!(code, 200, "label namespace {ns}: {text}");
}

/// How the API server answers a pod made from `template` in `ns` (dry run).
#[derive(Debug, PartialEq)]
enum Admitted {
    /// Admitted, running as this account.
    As(String),
    /// Refused: the account it names (or was given) does not exist.
    MissingAccount(String),
    Refused(String),
}

fn try_pod(c: &Cluster, ns: &str, template: &Value) -> Admitted {
    pod_from(c, ns, template, true)
}

/// A pod made from `template` in `ns` (dry run, or for real as a controller's
/// next pod), and how the API server answered.
fn pod_from(c: &Cluster, ns: &str, template: &Value, dry_run: bool) -> Admitted {
    let mut meta = template["metadata"].clone();
    if meta.is_null() {
        meta = json!({});
    }
    meta["generateName"] = json!(if dry_run { "probe-" } else { "next-" });
    let mut spec = template["spec"].clone();
    spec["restartPolicy"] = json!("Never");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec});
    let query = if dry_run { "?dryRun=All" } else { "" };
    match c.admin.call(
        "POST",
        &format!("/api/v1/namespaces/{ns}/pods{query}"),
        Some(&pod),
    ) {
        Ok(p) => Admitted::As(
            p["spec"]["serviceAccountName"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        ),
        Err(e) => {
            let message = serde_json::from_str::<Value>(&e.body)
                .ok()
                .and_then(|v| v["message"].as_str().map(str::to_string))
                .unwrap_or_else(|| e.to_string());
            let missing = message
                .contains("error looking up service account")
                .then(|| message.split("serviceaccount \"").nth(1))
                .flatten()
                .and_then(|rest| rest.split('"').next());
            match missing {
                Some(account) => Admitted::MissingAccount(account.to_string()),
                None => Admitted::Refused(message),
            }
        }
    }
}

/// A pod template selected by the mutating policy: labelled, naming no account.
fn selected_template(app: &str) -> Value {
    json!({"metadata": {"labels": {"app": app, id::WORKER_LABEL: "true"}},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]}})
}

/// Waits (bounded) until the mutation's verdict for a new selected pod in `ns`
/// is `given`: policies and namespace labels reach admission through informers.
fn wait_for_mutation(c: &Cluster, ns: &str, given: bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = match try_pod(c, ns, &selected_template("probe")) {
            Admitted::As(a) | Admitted::MissingAccount(a) => a == id::WORKER_NAME,
            Admitted::Refused(_) => false,
        };
        if now == given {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the mutation never became {given} in {ns}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn cleanup(c: &Cluster, ns: &str) -> String {
    ok(&c.run(&["cleanup", "-n", ns, "--min-age", "0s", "--yes"]))
}

/// The pod template of a stored pod-bearing object.
fn template_of(obj: &Value) -> Value {
    match obj["kind"].as_str().unwrap() {
        "PodTemplate" => obj["template"].clone(),
        "CronJob" => obj["spec"]["jobTemplate"]["spec"]["template"].clone(),
        _ => obj["spec"]["template"].clone(),
    }
}

#[test]
fn the_kit_the_mutating_policy_gives_is_kept_while_its_namespace_is_selected() {
    let c = Cluster::start_exclusive_on(PLANE);
    let ns = c.ns.clone();
    let _policy = Policy::install(&c);
    apply_kit(&c, &ns);
    wait_for_mutation(&c, &ns, true);
    // A labelled Deployment scaled to 0 and a labelled CronJob between runs
    // (suspended): no pod, and no template names nvcf-worker.
    let mut web = deployment(&ns, "web");
    web["spec"]["template"] = selected_template("web");
    let mut nightly = cron_job(&ns, "nightly");
    nightly["spec"]["suspend"] = json!(true);
    let mut t = selected_template("nightly");
    t["spec"]["restartPolicy"] = json!("Never");
    nightly["spec"]["jobTemplate"]["spec"]["template"] = t;
    let workloads = c.create_all(vec![web, nightly]);

    let out = cleanup(&c, &ns);
    assert!(
        out.contains(&format!(
            "keep {ns}/nvcf-worker (active): in use: MutatingAdmissionPolicy nvcf-worker-identity-{} gives it to new pods in namespace {ns}",
            c.id
        )),
        "{out}"
    );
    assert_eq!(c.members(&ns, id::WORKER_NAME), 3, "{out}");
    for w in &workloads {
        assert_eq!(
            try_pod(&c, &ns, &template_of(w)),
            Admitted::As(id::WORKER_NAME.into()),
            "{}",
            w["kind"]
        );
    }

    // Out of the selection, nothing gives it any more: the next run takes it,
    // and the workloads' pods run as the namespace's default account.
    set_label(&c, &ns, None);
    wait_for_mutation(&c, &ns, false);
    let out = cleanup(&c, &ns);
    assert!(
        out.contains(&format!("delete {ns}/nvcf-worker (orphaned)")),
        "{out}"
    );
    assert_eq!(c.members(&ns, id::WORKER_NAME), 0);
    c.wait_for_default_account(&ns);
    for w in &workloads {
        assert_eq!(
            try_pod(&c, &ns, &template_of(w)),
            Admitted::As("default".into())
        );
    }
}

/// `inject`'s output (per-namespace naming) for `objs`, as JSON objects.
fn inject(objs: &[Value]) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.json");
    std::fs::write(
        &file,
        json!({"apiVersion": "v1", "kind": "List", "items": objs}).to_string(),
    )
    .unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "apiVersion: fn.nvcf.io/v1alpha1\nkind: WorkerIdentity\nspec:\n  clusterID: c1\n  naming: per-namespace\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["inject", "-o", "json", "--config"])
        .arg(&config)
        .arg("-f")
        .arg(&file)
        .output()
        .unwrap();
    serde_json::Deserializer::from_str(&ok(&out))
        .into_iter::<Value>()
        .map(|v| v.unwrap())
        .flat_map(|v| match v["items"].as_array() {
            Some(items) if v["kind"] == "List" => items.clone(),
            _ => vec![v],
        })
        .collect()
}

#[test]
fn a_pod_template_keeps_the_identity_inject_gave_it() {
    let c = Cluster::start_exclusive_on(PLANE);
    let ns = c.ns.clone();
    let template = json!({"apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": "worker", "namespace": ns, "labels": {id::WORKER_LABEL: "true"}},
        "template": {"metadata": {"labels": {"app": "worker"}},
            "spec": {"containers": [{"name": "app", "image": "busybox"}]}}});
    let objs = inject(&[template]);
    let kinds: BTreeSet<&str> = objs.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["PodTemplate", "Role", "RoleBinding", "ServiceAccount"]
            .into_iter()
            .collect()
    );
    let created = c.create_all(objs);
    let stored = created.iter().find(|o| o["kind"] == "PodTemplate").unwrap();
    assert_eq!(
        stored["template"]["spec"]["serviceAccountName"],
        id::WORKER_NAME
    );

    let out = cleanup(&c, &ns);
    assert!(
        out.contains(&format!(
            "keep {ns}/nvcf-worker (active): in use: PodTemplate/worker's pod template runs as it"
        )),
        "{out}"
    );
    assert_eq!(
        try_pod(&c, &ns, &template_of(stored)),
        Admitted::As(id::WORKER_NAME.into())
    );
    // The PodTemplate gone, nothing names it: taken.
    assert!(c.delete("v1", "PodTemplate", Some(&ns), "worker"));
    let out = cleanup(&c, &ns);
    assert!(
        out.contains(&format!("delete {ns}/nvcf-worker (orphaned)")),
        "{out}"
    );
    assert_eq!(c.members(&ns, id::WORKER_NAME), 0);
}

// ---- generated histories ----

/// A small deterministic generator (xorshift64*): a history is its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// What the histories exercised, printed at the end.
#[derive(Default, Debug)]
struct Tally {
    runs: usize,
    deleted: usize,
    pods_admitted: usize,
    pods_refused: usize,
}

thread_local! {
    static TALLY: std::cell::RefCell<Tally> = std::cell::RefCell::new(Tally::default());
}

/// Seeds that once failed, run first every time. Each of these lost an
/// identity in use before the model of `in_use`: a PodTemplate's `nvcf-worker`
/// (1796660751476139164, 1796660762093882240, 1796660764748318009), and the
/// `nvcf-worker` the mutating policy gives a selected Job (1796660770057189547);
/// one left a deleted PodTemplate's declared identity for ever, its owner's
/// kind never listed (1796660754130574933).
const REGRESSIONS: &[u64] = &[
    1796660751476139164,
    1796660754130574933,
    1796660762093882240,
    1796660764748318009,
    1796660770057189547,
];

/// Histories `cargo test` runs (more with `NVW_HISTORIES=N`).
const DEFAULT_HISTORIES: usize = 2;
const STEPS: usize = 12;

const KINDS: [&str; 5] = ["Deployment", "StatefulSet", "CronJob", "Job", "PodTemplate"];

/// One pod-bearing object the history made: what its template names (None: the
/// mutating policy's selection gives it at admission).
#[derive(Clone, Debug)]
struct Obj {
    ns: usize,
    kind: &'static str,
    name: String,
    account: Option<String>,
}

/// What the history did, in the test's own terms: the oracle of "in use".
#[derive(Default, Debug)]
struct World {
    namespaces: Vec<String>,
    policy: bool,
    labelled: Vec<bool>,
    objects: Vec<Obj>,
    /// Bare pods the agent made, with the account each runs as.
    agent_pods: Vec<(usize, String)>,
    next: usize,
}

impl World {
    /// Whether anything could run as `ns/name` now or later: a pod, a template
    /// naming it, or the mutating policy's selection (for `nvcf-worker`).
    fn usable(&self, ns: usize, name: &str) -> bool {
        self.objects
            .iter()
            .any(|o| o.ns == ns && o.account.as_deref() == Some(name))
            || self.agent_pods.iter().any(|(n, a)| *n == ns && a == name)
            || (name == id::WORKER_NAME && self.policy && self.labelled[ns])
    }
}

fn body(kind: &str, ns: &str, name: &str, account: Option<&str>) -> Value {
    let mut template = match account {
        Some(a) => json!({"metadata": {"labels": {"app": name}},
            "spec": {"serviceAccountName": a, "containers": [{"name": "app", "image": "busybox"}]}}),
        None => selected_template(name),
    };
    let meta = json!({"name": name, "namespace": ns});
    let selector = json!({"matchLabels": {"app": name}});
    match kind {
        "Deployment" => json!({"apiVersion": "apps/v1", "kind": kind, "metadata": meta,
            "spec": {"replicas": 0, "selector": selector, "template": template}}),
        "StatefulSet" => json!({"apiVersion": "apps/v1", "kind": kind, "metadata": meta,
            "spec": {"replicas": 0, "serviceName": name, "selector": selector, "template": template}}),
        "CronJob" => {
            template["spec"]["restartPolicy"] = json!("Never");
            json!({"apiVersion": "batch/v1", "kind": kind, "metadata": meta,
                "spec": {"schedule": "0 3 * * *", "suspend": true, "jobTemplate": {"spec": {"template": template}}}})
        }
        "Job" => {
            // Suspended: its controller makes no pod, the template stays.
            template["spec"]["restartPolicy"] = json!("Never");
            json!({"apiVersion": "batch/v1", "kind": kind, "metadata": meta,
                "spec": {"suspend": true, "template": template}})
        }
        "PodTemplate" => {
            json!({"apiVersion": "v1", "kind": kind, "metadata": meta, "template": template})
        }
        other => panic!("{other}"),
    }
}

fn api_version(kind: &str) -> &'static str {
    match kind {
        "Deployment" | "StatefulSet" => "apps/v1",
        "CronJob" | "Job" => "batch/v1",
        _ => "v1",
    }
}

fn patch(c: &Cluster, obj: &Obj, ns: &str, body: Value) {
    let path = format!(
        "{}/{}",
        client::collection(api_version(obj.kind), obj.kind, Some(ns)),
        obj.name
    );
    let (code, text) = client::runtime()
        .block_on(
            c.admin
                .send_raw("PATCH", &path, Some(&body), "application/merge-patch+json"),
        )
        .unwrap();
    assert_eq!(code, 200, "patch {path}: {text}");
}

/// One random step; its description for the printed history.
fn step(c: &Cluster, w: &mut World, rng: &mut Rng) -> String {
    let ns = rng.below(w.namespaces.len());
    let nsn = w.namespaces[ns].clone();
    w.next += 1;
    let n = w.next;
    let scalable: Vec<Obj> = w
        .objects
        .iter()
        .filter(|o| matches!(o.kind, "Deployment" | "StatefulSet" | "CronJob"))
        .cloned()
        .collect();
    // Only steps that change something.
    let action = loop {
        let a = rng.below(10);
        let possible = match a {
            4 => !w.objects.is_empty(),
            5 => !scalable.is_empty(),
            9 => !w.agent_pods.is_empty(),
            _ => true,
        };
        if possible {
            break a;
        }
    };
    match action {
        // A workload naming its own declared identity, as inject declares it.
        0 | 1 => {
            let kind = KINDS[rng.below(KINDS.len())];
            let name = format!("w{n}");
            let account = format!("{}{name}", id::PREFIX);
            let mut objs = trio(&nsn, &account, Some((api_version(kind), kind, &name)));
            objs.push(body(kind, &nsn, &name, Some(&account)));
            c.create_all(objs);
            w.objects.push(Obj {
                ns,
                kind,
                name: name.clone(),
                account: Some(account),
            });
            format!("create {kind} {nsn}/{name} naming its identity")
        }
        // A workload on the namespace's identity: named (per-namespace inject),
        // or given by the mutating policy (labelled, naming none).
        2 | 3 => {
            let kind = KINDS[rng.below(KINDS.len())];
            let name = format!("s{n}");
            let named = rng.below(2) == 0;
            if c.members(&nsn, id::WORKER_NAME) < 3 {
                apply_kit(c, &nsn);
                set_label(c, &nsn, w.labelled[ns].then(|| c.id.to_string()));
            }
            let account = named.then(|| id::WORKER_NAME.to_string());
            c.create(body(kind, &nsn, &name, account.as_deref()));
            w.objects.push(Obj {
                ns,
                kind,
                name: name.clone(),
                account,
            });
            format!(
                "create {kind} {nsn}/{name} {}",
                if named {
                    "naming nvcf-worker"
                } else {
                    "selected (no account)"
                }
            )
        }
        4 => {
            let i = rng.below(w.objects.len());
            let o = w.objects.remove(i);
            let on = w.namespaces[o.ns].clone();
            let path = format!(
                "{}/{}?propagationPolicy=Background",
                client::collection(api_version(o.kind), o.kind, Some(&on)),
                o.name
            );
            c.admin.call("DELETE", &path, None).expect("delete");
            format!("delete {} {on}/{}", o.kind, o.name)
        }
        5 => {
            let o = scalable[rng.below(scalable.len())].clone();
            let on = w.namespaces[o.ns].clone();
            match o.kind {
                "Deployment" | "StatefulSet" => {
                    let replicas = rng.below(2);
                    patch(c, &o, &on, json!({"spec": {"replicas": replicas}}));
                    format!("scale {} {on}/{} to {replicas}", o.kind, o.name)
                }
                "CronJob" => {
                    let suspend = rng.below(2) == 0;
                    patch(c, &o, &on, json!({"spec": {"suspend": suspend}}));
                    format!("set suspend={suspend} on CronJob {on}/{}", o.name)
                }
                other => unreachable!("{other}"),
            }
        }
        6 => {
            w.policy = !w.policy;
            format!(
                "{} the mutating policy",
                if w.policy { "install" } else { "remove" }
            )
        }
        7 => {
            w.labelled[ns] = !w.labelled[ns];
            set_label(c, &nsn, w.labelled[ns].then(|| c.id.to_string()));
            format!(
                "{} namespace {nsn}",
                if w.labelled[ns] { "label" } else { "unlabel" }
            )
        }
        8 => {
            let pod = format!("p{n}");
            let account = format!("{}{pod}", id::PREFIX);
            c.seed_trio(&nsn, &account);
            c.seed_pod(&nsn, &pod, &account, "Running");
            w.agent_pods.push((ns, account));
            format!("agent pod {nsn}/{pod}")
        }
        _ => {
            let (ns, account) = w.agent_pods.remove(rng.below(w.agent_pods.len()));
            let on = w.namespaces[ns].clone();
            let pod = account.strip_prefix(id::PREFIX).unwrap().to_string();
            assert!(c.delete("v1", "Pod", Some(&on), &pod));
            format!("delete agent pod {on}/{pod}")
        }
    }
}

/// The identities (trio members present) in the history's namespaces.
fn identities(c: &Cluster, w: &World) -> BTreeSet<(usize, String)> {
    let mut out = BTreeSet::new();
    for (i, ns) in w.namespaces.iter().enumerate() {
        for (v, k) in [
            ("v1", "ServiceAccount"),
            (RBAC, "Role"),
            (RBAC, "RoleBinding"),
        ] {
            for o in c.list(v, k, Some(ns)) {
                let name = o["metadata"]["name"].as_str().unwrap();
                if id::is_reserved(name) {
                    out.insert((i, name.to_string()));
                }
            }
        }
    }
    out
}

/// What the cluster's own objects still use: pods, and the ReplicaSets and
/// Jobs the controllers made (until the garbage collector takes them after
/// their owner went).
fn cluster_accounts(c: &Cluster, w: &World) -> BTreeSet<(usize, String)> {
    let mut out = BTreeSet::new();
    for (i, ns) in w.namespaces.iter().enumerate() {
        for (v, k, spec) in [
            ("v1", "Pod", "/spec"),
            ("apps/v1", "ReplicaSet", "/spec/template/spec"),
            ("batch/v1", "Job", "/spec/template/spec"),
        ] {
            for o in c.list(v, k, Some(ns)) {
                if let Some(a) = o
                    .pointer(&format!("{spec}/serviceAccountName"))
                    .and_then(Value::as_str)
                {
                    out.insert((i, a.to_string()));
                }
            }
        }
    }
    out
}

/// The identities left that nothing can use: not the world's (`World::usable`)
/// nor any object's in the cluster.
fn unusable(c: &Cluster, w: &World) -> Vec<(usize, String)> {
    let used = cluster_accounts(c, w);
    identities(c, w)
        .into_iter()
        .filter(|(ns, name)| !w.usable(*ns, name) && !used.contains(&(*ns, name.clone())))
        .collect()
}

/// Waits (bounded) until the cluster's objects use nothing the world does not:
/// the garbage collector has taken what deleted workloads left.
fn settle_garbage(c: &Cluster, w: &World) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let stale = cluster_accounts(c, w)
            .into_iter()
            .any(|(ns, a)| id::is_reserved(&a) && !w.usable(ns, &a));
        if !stale {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs cleanup twice in every namespace of the history (the second with each
/// object's next pod made beside it), checking after each that every object's
/// next pod is admitted unless it names an account cleanup never deleted, and
/// after the second that what nothing can use is gone. Err: what failed.
fn cleanup_and_check(c: &Cluster, w: &World) -> Result<(), String> {
    settle_garbage(c, w);
    let before = identities(c, w);
    let mut outs = String::new();
    for run in 0..2 {
        // While the second run goes on, each object makes its next pod for
        // real, as its controller (or the agent) would: none may be refused for
        // an account it names or is given. (The first run has none beside it:
        // such a pod keeps what it names in use and would hide a lost one.)
        let kubeconfig = &c.kubeconfig;
        let (runs, made) = std::thread::scope(|s| {
            let runs = s.spawn(|| {
                w.namespaces
                    .iter()
                    .map(|ns| {
                        run_with(
                            kubeconfig,
                            &["cleanup", "-n", ns, "--min-age", "0s", "--yes"],
                        )
                    })
                    .collect::<Vec<_>>()
            });
            let made: Vec<(usize, String, Admitted)> = if run == 1 {
                w.objects
                    .iter()
                    .filter_map(|o| {
                        let ns = &w.namespaces[o.ns];
                        let stored = c.get(api_version(o.kind), o.kind, Some(ns), &o.name)?;
                        let who = format!("{} {ns}/{}", o.kind, o.name);
                        Some((o.ns, who, pod_from(c, ns, &template_of(&stored), false)))
                    })
                    .collect()
            } else {
                Vec::new()
            };
            (runs.join().unwrap(), made)
        });
        for out in runs {
            if !out.status.success() {
                return Err(format!("cleanup failed: {}{}", stdout(&out), stderr(&out)));
            }
            outs.push_str(&stdout(&out));
        }
        // Those pods go again: they were a controller's next pod, not the world's.
        for ns in &w.namespaces {
            for p in c.list("v1", "Pod", Some(ns)) {
                let name = p["metadata"]["name"].as_str().unwrap_or("");
                if name.starts_with("next-") {
                    c.delete("v1", "Pod", Some(ns), name);
                }
            }
        }
        let left = identities(c, w);
        let deleted: BTreeSet<_> = before.difference(&left).cloned().collect();
        for (ns, who, verdict) in made {
            if let Admitted::MissingAccount(a) = verdict {
                if deleted.contains(&(ns, a.clone())) {
                    return Err(format!(
                        "{who}'s pod made while cleanup ran was refused: cleanup deleted {a}\n{outs}"
                    ));
                }
            }
        }
        TALLY.with(|t| {
            let mut t = t.borrow_mut();
            t.runs += 1;
            t.deleted += deleted.len();
        });
        for o in &w.objects {
            let ns = &w.namespaces[o.ns];
            let stored = c
                .get(api_version(o.kind), o.kind, Some(ns), &o.name)
                .ok_or_else(|| format!("{} {ns}/{} is gone", o.kind, o.name))?;
            let verdict = try_pod(c, ns, &template_of(&stored));
            TALLY.with(|t| match verdict {
                Admitted::As(_) => t.borrow_mut().pods_admitted += 1,
                _ => t.borrow_mut().pods_refused += 1,
            });
            if let Admitted::MissingAccount(a) = verdict {
                if deleted.contains(&(o.ns, a.clone())) {
                    return Err(format!(
                        "{} {ns}/{}'s next pod is refused: cleanup deleted {a}\n{outs}",
                        o.kind, o.name
                    ));
                }
            }
        }
        for (ns, account) in &w.agent_pods {
            if deleted.contains(&(*ns, account.clone())) {
                return Err(format!(
                    "cleanup deleted {account}, which a pod runs as\n{outs}"
                ));
            }
        }
        if run == 0 {
            settle_garbage(c, w);
            continue;
        }
        let unusable = unusable(c, w);
        if !unusable.is_empty() {
            return Err(format!(
                "left after two runs though nothing can use them: {unusable:?}\nthe world: {w:?}\n{outs}"
            ));
        }
    }
    Ok(())
}

/// Brings the cluster's policy in line with the world and waits until
/// admission agrees in every namespace.
fn settle_policy<'a>(c: &'a Cluster, w: &World, installed: &mut Option<Policy<'a>>) {
    match (w.policy, installed.is_some()) {
        (true, false) => *installed = Some(Policy::install(c)),
        (false, true) => *installed = None,
        _ => {}
    }
    for (i, ns) in w.namespaces.iter().enumerate() {
        wait_for_mutation(c, ns, w.policy && w.labelled[i]);
    }
}

fn history(c: &Cluster, seed: u64) -> Result<(), (Vec<String>, String)> {
    let mut rng = Rng(seed | 1);
    let namespaces: Vec<String> = (0..2)
        .map(|i| c.ns_named(&format!("h{seed:x}-{i}")))
        .collect();
    for ns in &namespaces {
        c.wait_for_default_account(ns);
    }
    // Half the histories start with the policy, each namespace half the time selected.
    let mut w = World {
        labelled: namespaces.iter().map(|_| rng.below(2) == 0).collect(),
        policy: rng.below(2) == 0,
        namespaces,
        ..Default::default()
    };
    let mut log = vec![format!(
        "start: policy {}, namespaces {:?} selected {:?}",
        w.policy, w.namespaces, w.labelled
    )];
    for (i, ns) in w.namespaces.iter().enumerate() {
        set_label(c, ns, w.labelled[i].then(|| c.id.to_string()));
    }
    let mut installed: Option<Policy> = None;
    settle_policy(c, &w, &mut installed);
    for i in 0..STEPS {
        log.push(step(c, &mut w, &mut rng));
        settle_policy(c, &w, &mut installed);
        if i % 3 == 2 || i + 1 == STEPS {
            log.push("cleanup".into());
            cleanup_and_check(c, &w).map_err(|e| (log.clone(), e))?;
        }
    }
    for ns in &w.namespaces {
        c.delete("v1", "Namespace", None, ns);
    }
    Ok(())
}

#[test]
fn generated_histories_never_lose_an_identity_in_use_and_leave_no_orphan() {
    let c = Cluster::start_exclusive_on(PLANE);
    let count = std::env::var("NVW_HISTORIES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(DEFAULT_HISTORIES);
    let base: u64 = std::env::var("NVW_HISTORY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let seeds: Vec<u64> = REGRESSIONS
        .iter()
        .copied()
        .chain((0..count as u64).map(|i| base.wrapping_add(i.wrapping_mul(0x9E37_79B9))))
        .collect();
    eprintln!("histories: seeds {seeds:?} (replay one: NVW_HISTORIES=1 NVW_HISTORY_SEED=SEED)");
    let started = Instant::now();
    let mut failed = BTreeMap::new();
    for seed in &seeds {
        if let Err((log, why)) = history(&c, *seed) {
            eprintln!("history {seed} failed:\n  {}\n{why}", log.join("\n  "));
            failed.insert(*seed, why);
        }
    }
    eprintln!(
        "{} histories ({} steps each) in {:.1} s: {:?}",
        seeds.len(),
        STEPS,
        started.elapsed().as_secs_f64(),
        TALLY.with(|t| std::mem::take(&mut *t.borrow_mut()))
    );
    assert!(
        failed.is_empty(),
        "failing seeds (add them to REGRESSIONS): {:?}",
        failed.keys().collect::<Vec<_>>()
    );
}
