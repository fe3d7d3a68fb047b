//! Every face of the guard held to one verdict (issue 20, item 5). One case set (the
//! guard's reject and look-alike cases, the decoding tricks, the transformer's own
//! output, generated streams and the reproducers) goes through `validate`,
//! the KRM validator, inject's and uninject's checks, `audit` of the same objects
//! created in a real cluster, and the admission policy on the real kube-apiserver as
//! a restricted user, as the allowed applier and as the agent.
//!
//! What a face must find is derived, never written down: `validate`'s findings,
//! kept to the rules the catalogue enforces at that face (`rules::Rule::enforced`;
//! a rule's `not_at` says why it is not). The agent is exempt from the policy, so
//! every object it sends must be admitted. Every other difference is listed with its
//! reason in `tests/fixtures/faces/exceptions.txt`; the test fails when a case moves
//! in or out of that list.

use crate::live_support;
use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use kubectl_nvcf_worker::report::Severity;
use kubectl_nvcf_worker::rules::{self, Where};
use live_support::policy::{callers, cover, install, wait_until_enforced};
use live_support::{client, Admin, Cluster, Plane};
use serde_json::{json, Value};
use support::cases::{cases, injected};
use support::{generated_corpus, inject, krm, resource_list, rl, run, typed_config, workload};
use support::{KINDS, SIMPLE_POD};

/// Its own control plane: its admission policies judge every cluster-scoped
/// object, so they must not meet the shared plane's tests.
const PLANE: Plane = Plane::Own("faces");

/// One finding: the object (`Kind/ns/name`, `Kind/name` without a namespace, `-`
/// for none), the rule and its severity.
type Finding = (String, String, String);

struct Case {
    name: String,
    text: String,
}

/// The case set, each named uniquely and stably (exceptions refer to the names).
fn case_set() -> Vec<Case> {
    let mut v = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for c in cases() {
        let base = format!("{} {}", c.rule, c.what);
        let n = seen.entry(base.clone()).or_default();
        *n += 1;
        for (side, text) in [("bad", &c.bad), ("good", &c.good)] {
            v.push(Case {
                name: format!("{base} #{n} {side}"),
                text: text.clone(),
            });
        }
    }
    for (what, lines) in support::tricks::DECODING_TRICKS {
        v.push(Case {
            name: format!("trick {what}"),
            text: support::tricks::pod_with(lines, false).replacen(
                "  name: p\n",
                "  name: p\n  namespace: ns\n",
                1,
            ),
        });
    }
    for kind in KINDS {
        v.push(Case {
            name: format!("transformer output {kind}"),
            text: injected(kind, "app", SIMPLE_POD),
        });
    }
    // The author's own contract env survives inject (issue 20's reproducer).
    v.push(Case {
        name: "transformer output with the author's NVCF env".into(),
        text: injected(
            "Deployment",
            "own-env",
            "containers:\n- name: app\n  image: x\n  env:\n  - name: NVCF_IDENTITY_SOURCE\n    value: psat\n",
        ),
    });
    // Issue 20's uninject reproducer: a forged Pod beside a cluster-admin binding
    // to a worker account.
    v.push(Case {
        name: "forged Pod and a cluster-admin grant to a worker account".into(),
        text: format!(
            "{}---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: worker-admin\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- kind: ServiceAccount\n  name: nvcf-worker-p\n  namespace: ns\n",
            workload("Pod", "p", "ns", false, &format!("serviceAccountName: nvcf-worker-p\n{SIMPLE_POD}"))
        ),
    });
    let corpus = generated_corpus(12, &[]);
    let out = inject(&corpus, &[]);
    out.ok();
    v.push(Case {
        name: "generated stream (12 workloads)".into(),
        text: corpus,
    });
    v.push(Case {
        name: "generated stream (12 workloads) injected".into(),
        text: out.stdout.clone(),
    });
    let names: BTreeSet<&str> = v.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names.len(), v.len(), "case names are unique");
    v
}

fn key(kind: &str, ns: Option<&str>, name: &str) -> String {
    match ns {
        Some(ns) if !ns.is_empty() => format!("{kind}/{ns}/{name}"),
        _ => format!("{kind}/{name}"),
    }
}

fn object_key(o: &Value) -> String {
    key(
        o["kind"].as_str().unwrap_or("?"),
        o["metadata"]["namespace"].as_str(),
        o["metadata"]["name"].as_str().unwrap_or("?"),
    )
}

/// Findings of `validate -o json` (the reference) or of a KRM run's results.
fn json_findings(list: &[Value], resource: &str, rule: &[&str]) -> BTreeSet<Finding> {
    list.iter()
        .map(|f| {
            let r = &f[resource];
            let k = if r.is_object() {
                key(
                    r["kind"].as_str().unwrap_or("?"),
                    r["namespace"].as_str(),
                    r["name"].as_str().unwrap_or("?"),
                )
            } else {
                "-".into()
            };
            let mut id = f;
            for step in rule {
                id = &id[*step];
            }
            (
                k,
                id.as_str().unwrap().to_string(),
                f["severity"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Findings in the text form inject and uninject print on stderr:
/// `file:line: severity RULE: message (Kind/ns/name field)`.
fn text_findings(stderr: &str) -> BTreeSet<Finding> {
    let mut out = BTreeSet::new();
    for line in stderr.lines() {
        // Input the reader refuses is an input error naming the document: the
        // decoding rule's verdict.
        if line.starts_with("error: ") && line.contains(": document ") && !line.contains(" NVW") {
            out.insert(("-".into(), rules::DECODE.into(), "error".into()));
            continue;
        }
        for sev in ["error", "warning"] {
            let Some(at) = line.find(&format!(" {sev} NVW")) else {
                continue;
            };
            let rest = &line[at + sev.len() + 2..];
            let rule = &rest[..6];
            let k = match line.rfind(" (") {
                Some(i) if line.ends_with(')') && i > at => line[i + 2..line.len() - 1]
                    .split(' ')
                    .next()
                    .unwrap()
                    .to_string(),
                _ => "-".into(),
            };
            out.insert((k, rule.to_string(), sev.to_string()));
        }
    }
    out
}

fn enforced_at(f: &Finding, w: Where) -> bool {
    rules::get(&f.1).enforced(w)
}

/// What a face reported for one case, against what it should have.
#[derive(Default)]
struct Tally {
    compared: usize,
    agreed: usize,
    not_sent: usize,
    live_only: usize,
    /// (face, case) -> what differed.
    differences: BTreeMap<(String, String), String>,
}

impl Tally {
    fn judge(&mut self, face: &str, case: &str, difference: Option<String>) {
        self.compared += 1;
        match difference {
            None => self.agreed += 1,
            Some(d) => {
                self.differences
                    .insert((face.to_string(), case.to_string()), d);
            }
        }
    }
}

fn diff(expected: &BTreeSet<Finding>, got: &BTreeSet<Finding>) -> Option<String> {
    (expected != got).then(|| {
        format!(
            "missing {:?}, extra {:?}",
            expected.difference(got).collect::<Vec<_>>(),
            got.difference(expected).collect::<Vec<_>>()
        )
    })
}

/// The manifest faces, one case at a time; returns the reference findings.
fn manifest_faces(cases: &[Case], tally: &mut Tally) -> Vec<BTreeSet<Finding>> {
    let dir = tempfile::tempdir().unwrap();
    let cfg = typed_config("mode: validate\n");
    let mut reference = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let file = dir.path().join(format!("c{i}.yaml"));
        std::fs::write(&file, &c.text).unwrap();
        let f = file.to_str().unwrap();
        let v = run(&["validate", "-o", "json", f], "");
        let report: Value = serde_json::from_str(&v.stdout)
            .unwrap_or_else(|e| panic!("{}: validate -o json: {e}\n{v}", c.name));
        let want = json_findings(
            report["findings"].as_array().unwrap(),
            "resource",
            &["rule"],
        );
        let errors = want.iter().any(|f| f.2 == "error");
        assert_eq!(v.code, i32::from(errors), "{}: validate exit\n{v}", c.name);

        let k = krm(&resource_list(&c.text, &cfg));
        // A ResourceList the function cannot read gets no ResourceList back, only
        // an error naming the document: the decoding rule's verdict.
        let got = if k.code == 1 && k.stdout.is_empty() && k.stderr.starts_with("error: ") {
            BTreeSet::from([("-".into(), rules::DECODE.into(), "error".into())])
        } else {
            json_findings(&support::results(&rl(&k)), "resourceRef", &["tags", "rule"])
        };
        tally.judge("krm", &c.name, diff(&want, &got));

        for (face, args) in [
            (
                "inject",
                vec!["inject", "-f", f, "--cluster-id", support::CLUSTER],
            ),
            ("uninject", vec!["uninject", "-f", f]),
        ] {
            let out = run(&args, "");
            let got = text_findings(&out.stderr);
            let mut d = diff(&want, &got);
            if d.is_none() && (out.code == 1) != errors {
                d = Some(format!("exit {} with findings {got:?}", out.code));
            }
            if d.is_none() && errors && !out.stdout.is_empty() {
                d = Some("wrote output despite an error".into());
            }
            tally.judge(face, &c.name, d);
        }
        reference.push(want);
    }
    reference
}

/// kubectl's objects for each case (its own decoder, the oracle), or its error.
fn decoded(cases: &[Case]) -> Vec<Result<Vec<Value>, String>> {
    let oracle = &support_oracle::oracles()[0];
    let dir = tempfile::tempdir().unwrap();
    for (i, c) in cases.iter().enumerate() {
        std::fs::write(dir.path().join(format!("c{i}.yaml")), &c.text).unwrap();
    }
    support_oracle::run_oracle(oracle, dir.path(), cases.len())
        .into_iter()
        .map(|(objs, err)| match err {
            Some(e) => Err(e),
            None => Ok(objs
                .iter()
                .map(support_oracle::drop_null_metadata)
                .collect()),
        })
        .collect()
}

use support::oracle as support_oracle;

const CLUSTER_SCOPED: [&str; 3] = ["ClusterRole", "ClusterRoleBinding", "Namespace"];

/// `obj` moved into the cluster's namespaces: `ns(orig)` for each namespace it
/// names (its own, subjects', `system:serviceaccount:NS:` user names) and
/// `suffix` on cluster-scoped names the case defines (and references to them).
fn placed(obj: &Value, ns: &dyn Fn(&str) -> String, own: &BTreeSet<String>, suffix: &str) -> Value {
    fn walk(v: &mut Value, ns: &dyn Fn(&str) -> String) {
        match v {
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    match (k.as_str(), &*x) {
                        ("namespace", Value::String(s)) => *x = Value::String(ns(s)),
                        _ => walk(x, ns),
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, ns)),
            Value::String(s) => {
                for prefix in ["system:serviceaccount:", "system:serviceaccounts:"] {
                    if let Some(rest) = s.strip_prefix(prefix) {
                        let (n, tail) = rest.split_once(':').unwrap_or((rest, ""));
                        let sep = if rest.contains(':') { ":" } else { "" };
                        *s = format!("{prefix}{}{sep}{tail}", ns(n));
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    let mut o = obj.clone();
    walk(&mut o, ns);
    let kind = o["kind"].as_str().unwrap_or("").to_string();
    if CLUSTER_SCOPED.contains(&kind.as_str()) {
        let name = o["metadata"]["name"].as_str().unwrap_or("").to_string();
        o["metadata"]["name"] = json!(format!("{name}{suffix}"));
    } else if o["metadata"]["namespace"].is_null() {
        o["metadata"]["namespace"] = json!(ns(""));
    }
    if o["roleRef"]["kind"] == "ClusterRole" {
        if let Some(n) = o["roleRef"]["name"].as_str() {
            if own.contains(n) {
                o["roleRef"]["name"] = json!(format!("{n}{suffix}"));
            }
        }
    }
    o
}

/// Accounts a bare Pod names: the ServiceAccount admission plugin refuses a pod
/// whose account does not exist, before any policy sees it.
fn pod_accounts(objs: &[Value]) -> BTreeSet<String> {
    objs.iter()
        .filter(|o| o["kind"] == "Pod")
        .map(|o| {
            let s = &o["spec"];
            s["serviceAccountName"]
                .as_str()
                .or(s["serviceAccount"].as_str())
                .unwrap_or("default")
                .to_string()
        })
        .collect()
}

/// Creates `obj` as the admin; Err with the server's reason when it refuses.
fn create(admin: &Admin, obj: &Value) -> Result<(), String> {
    match admin.create(obj) {
        Ok(_) => Ok(()),
        Err(e) => Err(format!("HTTP {}: {}", e.code, status_message(&e.body))),
    }
}

fn status_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| body.to_string())
}

/// A policy face's verdict on one object.
#[derive(Debug, PartialEq)]
enum Verdict {
    Admitted,
    Denied(String),
    /// The server refused it before or beside the policy (an unserved kind, an invalid object).
    Refused(String),
}

fn policy_verdict(caller: &Admin, obj: &Value) -> Verdict {
    let path = format!("{}?dryRun=All", client::collection_of(obj));
    let r =
        client::runtime().block_on(caller.send_raw("POST", &path, Some(obj), "application/json"));
    let (code, body) = match r {
        Ok(x) => x,
        Err(e) => return Verdict::Refused(e.to_string()),
    };
    let message = status_message(&body);
    match code {
        200..=299 | 409 => Verdict::Admitted,
        _ => match message.split_once("denied request: ") {
            Some((_, rest)) if rest.starts_with("NVW") => Verdict::Denied(rest[..6].to_string()),
            _ => Verdict::Refused(format!("HTTP {code}: {message}")),
        },
    }
}

/// One pinned difference: a face (or `policy:*`) and a case name (or a prefix
/// ending in `*`), with its reason.
struct Exception {
    face: String,
    case: String,
    reason: String,
}

fn matches(pattern: &str, s: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => s.starts_with(prefix),
        None => pattern == s,
    }
}

fn exceptions() -> Vec<Exception> {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/faces/exceptions.txt");
    let text = std::fs::read_to_string(&file).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut parts = l.splitn(3, '\t');
            let (face, case, reason) = (parts.next(), parts.next(), parts.next());
            let reason = reason
                .unwrap_or_else(|| panic!("{}: face<TAB>case<TAB>reason: {l}", file.display()));
            assert!(!reason.trim().is_empty(), "a reason for {l}");
            Exception {
                face: face.unwrap().into(),
                case: case.unwrap().into(),
                reason: reason.into(),
            }
        })
        .collect()
}

#[test]
fn every_face_gives_the_guards_verdict_on_one_case_set() {
    let cases = case_set();
    let mut tally = Tally::default();
    let reference = manifest_faces(&cases, &mut tally);
    let objects = decoded(&cases);

    let c = Cluster::start_on(PLANE);
    let who = callers(&c);

    // Audit: each case's objects in namespaces of its own, created as the admin
    // before any policy exists (cluster-scoped objects are seen by every binding),
    // then one `audit -A`.
    let mut created: BTreeMap<String, (usize, String)> = BTreeMap::new();
    let mut copies: BTreeMap<(usize, String), Value> = BTreeMap::new();
    let mut refused: BTreeMap<(usize, String), String> = BTreeMap::new();
    let mut audit_ns: BTreeSet<String> = BTreeSet::new();
    for (i, objs) in objects.iter().enumerate() {
        let Ok(objs) = objs else { continue };
        let suffix = format!("-f{i}");
        let ns = |o: &str| {
            let o = if o.is_empty() { "none" } else { o };
            format!("f{i}-{o}-{}", c.id)
        };
        let own: BTreeSet<String> = objs
            .iter()
            .filter(|o| o["kind"] == "ClusterRole")
            .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        let mut placed_objs: Vec<(String, Value)> = objs
            .iter()
            .map(|o| (object_key(o), placed(o, &ns, &own, &suffix)))
            .collect();
        // Accounts first, so the pods that name them are admitted.
        placed_objs.sort_by_key(|(_, o)| o["kind"] != "ServiceAccount");
        for (_, o) in &placed_objs {
            if let Some(n) = o["metadata"]["namespace"].as_str() {
                if audit_ns.insert(n.to_string()) {
                    c.namespace(n);
                }
            }
        }
        let defined: BTreeSet<(String, String)> = placed_objs
            .iter()
            .filter(|(_, o)| o["kind"] == "ServiceAccount")
            .map(|(_, o)| {
                (
                    o["metadata"]["namespace"].as_str().unwrap().to_string(),
                    o["metadata"]["name"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        for (_, o) in &placed_objs {
            let pod_ns = o["metadata"]["namespace"]
                .as_str()
                .unwrap_or("")
                .to_string();
            for account in pod_accounts(std::slice::from_ref(o)) {
                if !defined.contains(&(pod_ns.clone(), account.clone())) {
                    // A support object, not the case's: audit findings on it are not compared.
                    let _ = c
                        .admin
                        .create(&json!({"apiVersion": "v1", "kind": "ServiceAccount",
                        "metadata": {"name": account, "namespace": pod_ns}}));
                }
            }
        }
        for (orig, o) in &placed_objs {
            if CLUSTER_SCOPED.contains(&o["kind"].as_str().unwrap_or("")) {
                c.adopt_cluster_scoped(
                    o["apiVersion"].as_str().unwrap(),
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap(),
                );
            }
            match create(&c.admin, o) {
                Ok(()) => {
                    created.insert(object_key(o), (i, orig.clone()));
                    copies.insert((i, orig.clone()), o.clone());
                }
                Err(e) => {
                    refused.insert((i, orig.clone()), e);
                }
            }
        }
    }
    let out = c.run(&[
        "audit",
        "-A",
        "--cluster-id",
        support::CLUSTER,
        "-o",
        "json",
    ]);
    let report: Value = serde_json::from_str(&live_support::stdout(&out))
        .unwrap_or_else(|e| panic!("audit -o json: {e}\n{}", live_support::stderr(&out)));
    let mut audited: Vec<BTreeSet<Finding>> = vec![BTreeSet::new(); cases.len()];
    for f in json_findings(
        report["findings"].as_array().unwrap(),
        "resource",
        &["rule"],
    ) {
        let Some((i, orig)) = created.get(&f.0) else {
            continue;
        };
        if !rules::get(&f.1).enforced(Where::Manifest) {
            tally.live_only += 1;
            continue;
        }
        audited[*i].insert((orig.clone(), f.1, f.2));
    }
    for (i, case) in cases.iter().enumerate() {
        if objects[i].is_err() {
            tally.not_sent += 1;
            continue;
        }
        let want: BTreeSet<Finding> = reference[i]
            .iter()
            .filter(|f| enforced_at(f, Where::Audit))
            .cloned()
            .collect();
        let mut d = diff(&want, &audited[i]);
        // An object a controller removed before audit listed it (the token
        // controller deletes a token Secret whose account does not exist).
        for (k, _, _) in want.difference(&audited[i]) {
            if let Some(o) = copies.get(&(i, k.clone())) {
                let gone = c
                    .admin
                    .get(
                        o["apiVersion"].as_str().unwrap(),
                        o["kind"].as_str().unwrap(),
                        o["metadata"]["namespace"].as_str(),
                        o["metadata"]["name"].as_str().unwrap(),
                    )
                    .is_none();
                if gone {
                    d = Some(format!(
                        "{k} deleted by a controller before audit; {}",
                        d.unwrap_or_default()
                    ));
                }
            }
        }
        let not_created: Vec<String> = refused
            .iter()
            .filter(|((j, _), _)| *j == i)
            .map(|((_, k), e)| format!("{k} not created: {e}"))
            .collect();
        if !not_created.is_empty() {
            d = Some(format!(
                "{}; {}",
                not_created.join("; "),
                d.unwrap_or_default()
            ));
        }
        tally.judge("audit", &case.name, d);
    }

    // The policy: every object of every case, as each caller, dry-run, in
    // namespaces this test's binding covers.
    let pol_ns = |o: &str| {
        let o = if o.is_empty() { "none" } else { o };
        format!("p-{o}-{}", c.id)
    };
    let mut all_ns = BTreeSet::new();
    let mut accounts = BTreeSet::new();
    let placed_cases: Vec<Option<Vec<(String, Value)>>> = objects
        .iter()
        .map(|objs| {
            let objs = objs.as_ref().ok()?;
            let placed_objs: Vec<(String, Value)> = objs
                .iter()
                .map(|o| (object_key(o), placed(o, &pol_ns, &BTreeSet::new(), "")))
                .collect();
            for (_, o) in &placed_objs {
                if let Some(n) = o["metadata"]["namespace"].as_str() {
                    all_ns.insert(n.to_string());
                    for a in pod_accounts(std::slice::from_ref(o)) {
                        accounts.insert((n.to_string(), a));
                    }
                }
            }
            Some(placed_objs)
        })
        .collect();
    for n in &all_ns {
        c.namespace(n);
    }
    for (n, a) in &accounts {
        let _ = c
            .admin
            .create(&json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": a, "namespace": n}}));
    }
    let _policy = install(&c, &[]);
    for n in &all_ns {
        cover(&c, n);
    }
    wait_until_enforced(&c, all_ns.iter().next().unwrap(), false);
    let as_caller = [
        ("policy:user", Admin::new(&who.user)),
        ("policy:applier", Admin::new(&who.applier)),
        ("policy:agent", Admin::new(&who.agent)),
    ];
    for (i, case) in cases.iter().enumerate() {
        let Some(placed_objs) = &placed_cases[i] else {
            continue;
        };
        for (face, caller) in &as_caller {
            let mut wrong = Vec::new();
            for (orig, o) in placed_objs {
                let refusing: BTreeSet<&str> = reference[i]
                    .iter()
                    .filter(|f| &f.0 == orig && f.2 == "error" && enforced_at(f, Where::Admission))
                    .map(|f| f.1.as_str())
                    .collect();
                let got = policy_verdict(caller, o);
                let agrees = match &got {
                    Verdict::Admitted => refusing.is_empty() || *face == "policy:agent",
                    Verdict::Denied(r) => *face != "policy:agent" && refusing.contains(r.as_str()),
                    Verdict::Refused(_) => false,
                };
                if !agrees {
                    let want = if *face == "policy:agent" {
                        "admitted".to_string()
                    } else {
                        format!("refused with one of {refusing:?}")
                    };
                    wrong.push(format!("{orig}: want {want}, got {got:?}"));
                }
            }
            tally.judge(
                face,
                &case.name,
                (!wrong.is_empty()).then(|| wrong.join("; ")),
            );
        }
    }

    // Every difference is pinned, and every pin still differs.
    let pins = exceptions();
    let mut unpinned = Vec::new();
    for ((face, case), what) in &tally.differences {
        if !pins
            .iter()
            .any(|p| matches(&p.face, face) && matches(&p.case, case))
        {
            unpinned.push(format!("{face}\t{case}\t{what}"));
        }
    }
    let mut stale = Vec::new();
    let all_faces = [
        "krm",
        "inject",
        "uninject",
        "audit",
        "policy:user",
        "policy:applier",
        "policy:agent",
    ];
    for p in &pins {
        let mut hit = 0;
        for case in &cases {
            for face in all_faces {
                if !(matches(&p.face, face) && matches(&p.case, &case.name)) {
                    continue;
                }
                let compared_here = !(face.starts_with("policy") || face == "audit")
                    || objects[cases.iter().position(|c| c.name == case.name).unwrap()].is_ok();
                if !compared_here {
                    continue;
                }
                if tally
                    .differences
                    .contains_key(&(face.to_string(), case.name.clone()))
                {
                    hit += 1;
                } else {
                    stale.push(format!(
                        "{face}\t{}\tagrees now (pinned: {})",
                        case.name, p.reason
                    ));
                }
            }
        }
        if hit == 0 {
            stale.push(format!("{}\t{}\tmatches no difference", p.face, p.case));
        }
    }
    let pinned = tally.differences.len() - unpinned.len();
    eprintln!(
        "faces: {} cases, {} faces beside validate, {} verdicts compared, {} agree, {} pinned differences ({} exceptions listed), {} cases kubectl cannot decode (not sent to the cluster), {} live-only findings not compared",
        cases.len(),
        all_faces.len(),
        tally.compared,
        tally.agreed,
        pinned,
        pins.len(),
        tally.not_sent,
        tally.live_only
    );
    assert!(
        unpinned.is_empty() && stale.is_empty(),
        "differences not in tests/fixtures/faces/exceptions.txt:\n{}\n\npins that no longer hold:\n{}",
        unpinned.join("\n"),
        stale.join("\n")
    );
    // The catalogue's Severity is what the faces were compared on.
    assert!(
        rules::ids_at(Where::Admission, true).all(|id| rules::get(id).severity == Severity::Error)
    );
}
