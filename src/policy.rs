//! The guard inside the cluster: a ValidatingAdmissionPolicy and its binding
//! (`admissionregistration.k8s.io/v1`) whose CEL refuses what the guard refuses
//! in manifests, for the built-in kinds the API server serves.
//!
//! The rule ids, the reserved names, the agent's annotation, the transformer's
//! marks and the contract's token volume, mounts and env all come from `guard`,
//! `identity`, `recognize` and `rules`; only their spelling in CEL lives here.
//!
//! What CEL cannot do, and the guard does: look at other objects (the trio of a
//! workload, identity collisions, renamed identities), hash (the shortened name
//! of an identity longer than 253 characters), walk custom resources of any
//! shape. Those stay with `validate` and `audit`.
//!
//! Exemptions, decided in `matchConditions` so an exempt request is not evaluated:
//! - `--agent` users: the NVCF agent writes worker identities and their pods.
//! - The kube-controller-manager's controllers creating or updating an object that
//!   has a controller owner reference: a Deployment's ReplicaSet, a ReplicaSet's
//!   Pod, a CronJob's Job. The owner was itself admitted by this policy (or is
//!   older than it), so its template is.
//!
//! `--allow-applier` users (a GitOps controller) are evaluated, but each rule lets
//! them through with the transformer's exact output, object by object.
//!
//! An update that leaves what a rule looks at unchanged passes that rule: the
//! policy refuses new forgeries; objects older than the policy are audit's.

use serde_json::{json, Value};

use crate::guard;
use crate::identity as id;
use crate::manifest::{from_json, YamlWriter};
use crate::recognize::{self, cel::*, Check};
use crate::rules;
use crate::selector::{Requirement, Selector};

/// The object name of both the policy and its binding, unless `--name` says otherwise.
pub const DEFAULT_NAME: &str = "nvcf-worker-guard";

/// Who the kube-controller-manager acts as: one user when it runs with its own
/// credentials, one ServiceAccount per controller with
/// `--use-service-account-credentials` (kubeadm's default). Only those that
/// create pod-bearing objects from a template.
pub const CONTROLLERS: [&str; 8] = [
    "system:kube-controller-manager",
    "system:serviceaccount:kube-system:deployment-controller",
    "system:serviceaccount:kube-system:replicaset-controller",
    "system:serviceaccount:kube-system:replication-controller",
    "system:serviceaccount:kube-system:statefulset-controller",
    "system:serviceaccount:kube-system:daemon-set-controller",
    "system:serviceaccount:kube-system:job-controller",
    "system:serviceaccount:kube-system:cronjob-controller",
];

/// What the command prints.
#[derive(Clone, Debug)]
pub struct Options {
    pub name: String,
    /// Users whose requests are not evaluated (the agent's ServiceAccount).
    pub agents: Vec<String>,
    /// Users from whom the transformer's exact output is admitted.
    pub appliers: Vec<String>,
    /// `Fail` (a request is refused when the policy cannot be evaluated) or `Ignore`.
    pub failure_policy: String,
    /// `[Audit, Warn]` instead of `[Deny]`: for rolling out.
    pub audit_only: bool,
    /// Namespaces the binding covers (cluster-scoped objects are always covered).
    pub namespaces: Option<Selector>,
    /// Admit a worker pod carrying the mutating policy's stamp: only where that
    /// policy (`policy --mutating`), which strips forged stamps, is installed.
    pub trust_mutation: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            name: DEFAULT_NAME.into(),
            agents: Vec::new(),
            appliers: Vec::new(),
            failure_policy: "Fail".into(),
            audit_only: false,
            namespaces: None,
            trust_mutation: false,
        }
    }
}

/// The username of a worker ServiceAccount in any namespace.
fn worker_user_regex() -> String {
    format!(
        "^system:serviceaccount:[^:]+:({}|{}.*)$",
        regex_escape(id::WORKER_NAME),
        regex_escape(id::PREFIX)
    )
}

/// The pod template (metadata and spec) of a pod-bearing object `o`, or null.
fn template(o: &str) -> String {
    let kinds: Vec<&str> = crate::workload::POD_BEARING
        .iter()
        .map(|k| k.kind)
        .filter(|k| !matches!(*k, "Pod" | "PodTemplate" | "CronJob"))
        .collect();
    format!(
        "{o} == null ? null : {o}.kind == 'Pod' ? {o} \
         : {o}.kind == 'PodTemplate' ? (has({o}.template) ? {o}.template : null) \
         : {o}.kind == 'CronJob' ? (has({o}.spec.jobTemplate.spec) && has({o}.spec.jobTemplate.spec.template) ? {o}.spec.jobTemplate.spec.template : null) \
         : {o}.kind in {} ? (has({o}.spec.template) ? {o}.spec.template : null) \
         : null",
        list(&kinds)
    )
}

/// The pod spec of a template variable, or null.
fn spec(t: &str) -> String {
    format!("{t} == null || !has({t}.spec) ? null : {t}.spec")
}

/// The pod spec `s` of object `o` is the transformer's output for the identity
/// of its own name or namespace: NVW101's exemption, from `recognize::CHECKS`.
fn contract(o: &str, s: &str) -> String {
    recognize::cel_exempt(o, s)
}

/// `o` is a pod the mutating policy (`policy --mutating`) gave the namespace's
/// worker identity in this very request: it carries the mutation's stamp, which
/// the same policy takes off every pod it does not give the identity to (so a
/// hand-written stamp never arrives here), and its spec is the contract.
fn mutated(o: &str, s: &str) -> String {
    format!(
        "{o}.kind == 'Pod' && request.operation == 'CREATE' && has({o}.metadata.annotations) && {mark} in {o}.metadata.annotations \
         && {accts}.all(a, a == '' || a == {worker}) && {contract}",
        mark = lit(id::ADMITTED_ANNOTATION),
        accts = accounts(s),
        worker = lit(id::WORKER_NAME),
        contract = contract(o, s)
    )
}

/// `o` carries the transformer's marks for the identity named as it is
/// (`identity::Marks::read`, `Marks::identity_name`).
fn marked(o: &str) -> String {
    let meta = format!("{o}.metadata");
    let workload = annotation(&meta, id::WORKLOAD_ANNOTATION);
    format!(
        "({managed} == {managed_by} && {origin} == {manifest} \
         && ({scope} == {ns_scope} && {o}.metadata.name == {worker} \
             || {workload}.indexOf('/') > 0 && {api} != '' && {o}.metadata.name == {prefix} + {workload}.substring({workload}.indexOf('/') + 1)))",
        managed = label(&meta, id::MANAGED_BY_LABEL),
        managed_by = lit(id::MANAGED_BY),
        origin = label(&meta, id::ORIGIN_LABEL),
        manifest = lit(id::ORIGIN_MANIFEST),
        scope = annotation(&meta, id::SCOPE_ANNOTATION),
        ns_scope = lit(id::SCOPE_NAMESPACE),
        worker = lit(id::WORKER_NAME),
        api = annotation(&meta, id::WORKLOAD_API_VERSION_ANNOTATION),
        prefix = lit(id::PREFIX),
    )
}

/// `o` is a member of the transformer's trio (`guard::member_problem`).
fn trio_member(o: &str) -> String {
    let binding = format!(
        "{o}.roleRef.apiGroup == 'rbac.authorization.k8s.io' && {o}.roleRef.kind == 'Role' && {o}.roleRef.name == {o}.metadata.name \
         && has({o}.subjects) && size({o}.subjects) == 1 && {o}.subjects.all(x, x.kind == 'ServiceAccount' && x.name == {o}.metadata.name \
         && (!has(x.namespace) || x.namespace == {o}.metadata.namespace) && (!has(x.apiGroup) || x.apiGroup == ''))"
    );
    format!(
        "({marked} && ({o}.kind == 'ServiceAccount' && has({o}.automountServiceAccountToken) && {o}.automountServiceAccountToken == false \
         || {o}.kind == 'Role' && (!has({o}.rules) || size({o}.rules) == 0) \
         || {o}.kind == 'RoleBinding' && {binding}))",
        marked = marked(o)
    )
}

/// One rule of the policy: when `object` (with template variable `tpl`) breaks
/// it, and what of the object it looks at (an update leaving that unchanged passes).
struct Rule {
    id: &'static str,
    /// The violation, with `{o}` the object and `{t}` its template variable.
    violation: fn(&str, &str, &str) -> String,
    /// What the rule reads, with the same placeholders (compared part by part:
    /// CEL lists hold one type).
    subject: fn(&str, &str, &str) -> Vec<String>,
    /// What the policy says after the rule's summary.
    detail: &'static str,
}

const APPLIER: &str = "variables.fromApplier";

fn rules() -> Vec<Rule> {
    vec![
        // The rules of a worker pod's token surface first: the API server reports
        // the first validation that fails, and these say more than NVW101.
        Rule {
            id: rules::EXTRA_TOKEN,
            violation: |o, _t, s| {
                format!(
                    "{s} != null && {accts}.exists(a, {r}) && !({ok})",
                    accts = accounts(s),
                    r = reserved("a"),
                    ok = Check::NoOtherToken.cel(o, s)
                )
            },
            subject: |_o, _t, s| vec![format!("{s} != null && has({s}.volumes) ? {s}.volumes : []")],
            detail: "a worker pod holds only the contract's token: remove the other serviceAccountToken projection",
        },
        Rule {
            id: rules::EPHEMERAL_CONTAINER,
            violation: |o, _t, s| {
                format!(
                    "{s} != null && {accts}.exists(a, {r}) && !({ok})",
                    accts = accounts(s),
                    r = reserved("a"),
                    ok = Check::NoEphemeral.cel(o, s)
                )
            },
            subject: |_o, _t, s| {
                vec![format!("{s} != null && has({s}.ephemeralContainers) ? {s}.ephemeralContainers : []")]
            },
            detail: "an ephemeral container in a worker pod can read the worker's token; debug a copy of the pod under another account",
        },
        Rule {
            id: guard::POD_SPEC_ACCOUNT,
            violation: |o, _t, s| {
                format!(
                    "{s} != null && {accts}.exists(a, {r}) && !({APPLIER} && {contract}) && !(variables.trustMutation && {mutated})",
                    accts = accounts(s),
                    r = reserved("a"),
                    contract = contract(o, s),
                    mutated = mutated(o, s)
                )
            },
            subject: |_o, _t, s| vec![s.to_string()],
            detail: "nvcf-worker and nvcf-worker-* are reserved: only the NVCF agent, the transformer's exact output applied by an allowed applier, or a pod the mutating policy gave its identity in the same request may run as one",
        },
        Rule {
            id: guard::INFRA_ANNOTATION,
            violation: |o, t, _s| {
                let key = lit(id::INFRA_ANNOTATION);
                format!(
                    "(has({o}.metadata.annotations) && {key} in {o}.metadata.annotations) \
                     || ({t} != null && has({t}.metadata) && has({t}.metadata.annotations) && {key} in {t}.metadata.annotations) \
                     || ({job})",
                    job = job_template_annotated(o)
                )
            },
            subject: |o, t, _s| {
                let key = lit(id::INFRA_ANNOTATION);
                vec![
                    format!("has({o}.metadata.annotations) && {key} in {o}.metadata.annotations"),
                    format!("{t} != null && has({t}.metadata) && has({t}.metadata.annotations) && {key} in {t}.metadata.annotations"),
                    job_template_annotated(o),
                ]
            },
            detail: "the annotation nvca.nvcf.nvidia.io/nvca-infra-object is the NVCF agent's own mark; only the agent may set it",
        },
        // Before NVW109: a worker Role with rules is refused for its rules by the
        // guard whoever wrote it, and the API server reports the first failing validation.
        Rule {
            id: guard::WORKER_ROLE_RULES,
            violation: |o, _t, _s| {
                format!(
                    "{o}.kind in ['Role', 'ClusterRole'] && {r} && (has({o}.rules) && size({o}.rules) > 0 || has({o}.aggregationRule))",
                    r = reserved(&format!("{o}.metadata.name"))
                )
            },
            subject: |o, _t, _s| {
                vec![
                    format!("has({o}.rules) ? {o}.rules : []"),
                    format!("has({o}.aggregationRule)"),
                ]
            },
            detail: "a worker Role is deny-by-default: rules: []",
        },
        Rule {
            id: guard::HAND_WRITTEN_IDENTITY,
            violation: |o, _t, _s| {
                format!(
                    "{o}.kind in {kinds} && {r} && !({APPLIER} && {member})",
                    kinds = list(&id::TRIO_KINDS),
                    r = reserved(&format!("{o}.metadata.name")),
                    member = trio_member(o)
                )
            },
            // The name cannot change; whether the account automounts a token can.
            subject: |o, _t, _s| {
                vec![
                    format!("{o}.metadata.name"),
                    format!("has({o}.automountServiceAccountToken) ? {o}.automountServiceAccountToken : true"),
                ]
            },
            detail: "ServiceAccounts, Roles and RoleBindings named nvcf-worker or nvcf-worker-* belong to the NVCF agent or the transformer",
        },
        Rule {
            id: guard::BINDING_TO_WORKER,
            violation: |o, _t, _s| {
                format!(
                    "{o}.kind in ['RoleBinding', 'ClusterRoleBinding'] && has({o}.subjects) \
                     && {o}.subjects.exists(x, x.kind == 'ServiceAccount' && {r} || x.kind == 'User' && x.name.matches({re})) \
                     && !({APPLIER} && {o}.kind == 'RoleBinding' && {member})",
                    r = reserved("x.name"),
                    re = lit(&worker_user_regex()),
                    member = trio_member(o)
                )
            },
            subject: |o, _t, _s| vec![format!("has({o}.subjects) ? {o}.subjects : []")],
            detail: "a worker identity keeps only its own empty Role; bind another ServiceAccount",
        },
        Rule {
            id: guard::MINT_FOR_WORKER,
            violation: |o, _t, _s| {
                let any = |field: &str, values: &[&str]| {
                    format!(
                        "has(x.{field}) && x.{field}.exists(v, v in {})",
                        list(values)
                    )
                };
                format!(
                    "{o}.kind in ['Role', 'ClusterRole'] && has({o}.rules) && {o}.rules.exists(x, ({core}) \
                     && (({create} && {token}) || ({imp} && {who})) \
                     && has(x.resourceNames) && x.resourceNames.exists(n, {r} || n.matches({re})))",
                    core = any("apiGroups", &["", "*"]),
                    create = any("verbs", &["create", "*"]),
                    token = any(
                        "resources",
                        &[
                            "*",
                            "serviceaccounts/token",
                            "serviceaccounts/*",
                            "*/token"
                        ]
                    ),
                    imp = any("verbs", &["impersonate", "*"]),
                    who = any("resources", &["*", "serviceaccounts", "users"]),
                    r = reserved("n"),
                    re = lit(&worker_user_regex()),
                )
            },
            subject: |o, _t, _s| vec![format!("has({o}.rules) ? {o}.rules : []")],
            detail: "minting tokens for, or impersonating, a worker account obtains its token without being the worker",
        },
        Rule {
            id: guard::WORKER_TOKEN_SECRET,
            violation: |o, _t, _s| {
                let sa = annotation(&format!("{o}.metadata"), "kubernetes.io/service-account.name");
                format!(
                    "{o}.kind == 'Secret' && has({o}.type) && {o}.type == 'kubernetes.io/service-account-token' && {}",
                    reserved(&sa)
                )
            },
            subject: |o, _t, _s| {
                vec![
                    format!("has({o}.type) ? {o}.type : ''"),
                    annotation(&format!("{o}.metadata"), "kubernetes.io/service-account.name"),
                ]
            },
            detail: "worker identities use projected tokens of at most a day; delete the Secret",
        },
        Rule {
            id: rules::MINT_FOR_WORKER,
            // A TokenRequest (`serviceaccounts/token`) names its account in the
            // request. The kubelet asks for the tokens of the pods bound to its
            // node (the node authorizer holds it to them): those are the pods' own.
            violation: |o, _t, _s| {
                format!(
                    "has(request.subResource) && request.subResource == 'token' && {r} \
                     && !(has(request.userInfo.groups) && 'system:nodes' in request.userInfo.groups && has({o}.spec.boundObjectRef) && {o}.spec.boundObjectRef.kind == 'Pod')",
                    r = reserved("request.name")
                )
            },
            subject: |o, _t, _s| vec![format!("{o}.kind")],
            detail: "a TokenRequest for a worker account from anyone but the agent (or the kubelet for a pod bound to its node) mints a real worker token",
        },
    ]
}

/// The summary `validate` and SARIF give the rule.
fn summary(rule: &str) -> &'static str {
    rules::get(rule).short
}

/// `o` is a CronJob whose `jobTemplate.metadata` carries the agent's annotation:
/// the Job made from it would be the controller's, and exempt.
fn job_template_annotated(o: &str) -> String {
    format!(
        "{o}.kind == 'CronJob' && has({o}.spec) && has({o}.spec.jobTemplate) && has({o}.spec.jobTemplate.metadata) \
         && has({o}.spec.jobTemplate.metadata.annotations) && {k} in {o}.spec.jobTemplate.metadata.annotations",
        k = lit(id::INFRA_ANNOTATION)
    )
}

fn resource_rules() -> Value {
    let rule = |groups: &[&str], resources: &[&str]| json!({"apiGroups": groups, "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": resources});
    let sub = |operation: &str, resource: &str| json!({"apiGroups": [""], "apiVersions": ["*"], "operations": [operation], "resources": [resource]});
    json!([
        // Subresources that change a pod's containers or mint an account's token.
        sub("UPDATE", "pods/ephemeralcontainers"),
        sub("CREATE", "serviceaccounts/token"),
        rule(
            &[""],
            &[
                "pods",
                "podtemplates",
                "replicationcontrollers",
                "serviceaccounts",
                "secrets"
            ]
        ),
        rule(
            &["apps"],
            &["deployments", "replicasets", "statefulsets", "daemonsets"]
        ),
        rule(&["batch"], &["jobs", "cronjobs"]),
        rule(
            &["rbac.authorization.k8s.io"],
            &[
                "roles",
                "rolebindings",
                "clusterroles",
                "clusterrolebindings"
            ]
        ),
    ])
}

pub(crate) fn label_selector(s: &Selector) -> Value {
    let mut labels = serde_json::Map::new();
    let mut exprs = Vec::new();
    for r in &s.0 {
        match r {
            Requirement::Equals(k, v) => {
                labels.insert(k.clone(), v.clone().into());
            }
            Requirement::NotEquals(k, v) => {
                exprs.push(json!({"key": k, "operator": "NotIn", "values": [v]}))
            }
            Requirement::In(k, vs) => exprs.push(json!({"key": k, "operator": "In", "values": vs})),
            Requirement::NotIn(k, vs) => {
                exprs.push(json!({"key": k, "operator": "NotIn", "values": vs}))
            }
            Requirement::Exists(k) => exprs.push(json!({"key": k, "operator": "Exists"})),
            Requirement::DoesNotExist(k) => {
                exprs.push(json!({"key": k, "operator": "DoesNotExist"}))
            }
        }
    }
    let mut out = serde_json::Map::new();
    if !labels.is_empty() {
        out.insert("matchLabels".into(), labels.into());
    }
    if !exprs.is_empty() {
        out.insert("matchExpressions".into(), exprs.into());
    }
    out.into()
}

/// The ValidatingAdmissionPolicy and its binding, as JSON objects.
pub fn objects(opts: &Options) -> [Value; 2] {
    let meta = |name: &str| json!({"name": name, "labels": {id::MANAGED_BY_LABEL: id::MANAGED_BY}});
    let mut conditions = Vec::new();
    if !opts.agents.is_empty() {
        conditions.push(json!({
            "name": "not-the-agent",
            "expression": format!("!(request.userInfo.username in {})", list(&opts.agents)),
        }));
    }
    conditions.push(json!({
        "name": "not-a-controller-making-an-owned-object",
        "expression": format!(
            "!(request.userInfo.username in {} && has(object.metadata.ownerReferences) \
             && object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller))",
            list(&CONTROLLERS)
        ),
    }));
    let validations: Vec<Value> = rules()
        .iter()
        .map(|r| {
            let new = (r.violation)("object", "variables.template", "variables.spec");
            let unchanged: Vec<String> =
                (r.subject)("object", "variables.template", "variables.spec")
                    .iter()
                    .zip((r.subject)(
                        "oldObject",
                        "variables.oldTemplate",
                        "variables.oldSpec",
                    ))
                    .map(|(a, b)| format!("({a}) == ({b})"))
                    .collect();
            json!({
                "expression": format!(
                    "!({new}) || (request.operation == 'UPDATE' && {})",
                    unchanged.join(" && ")
                ),
                "message": format!("{}: {}: {}", r.id, summary(r.id), r.detail),
                "reason": "Forbidden",
            })
        })
        .collect();
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": meta(&opts.name),
        "spec": {
            "failurePolicy": opts.failure_policy,
            "matchConstraints": {"resourceRules": resource_rules()},
            "matchConditions": conditions,
            "variables": [
                {"name": "fromApplier", "expression": format!("request.userInfo.username in {}", list(&opts.appliers))},
                {"name": "trustMutation", "expression": opts.trust_mutation.to_string()},
                {"name": "template", "expression": template("object")},
                {"name": "spec", "expression": spec("variables.template")},
                {"name": "oldTemplate", "expression": template("oldObject")},
                {"name": "oldSpec", "expression": spec("variables.oldTemplate")},
            ],
            "validations": validations,
        },
    });
    let actions = if opts.audit_only {
        json!(["Audit", "Warn"])
    } else {
        json!(["Deny"])
    };
    let mut spec = json!({"policyName": opts.name, "validationActions": actions});
    if let Some(sel) = &opts.namespaces {
        spec["matchResources"] = json!({"namespaceSelector": label_selector(sel)});
    }
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": meta(&opts.name),
        "spec": spec,
    });
    [policy, binding]
}

/// Both objects as one YAML stream.
pub fn yaml(opts: &Options) -> String {
    let mut out = Vec::new();
    let mut w = YamlWriter::new(&mut out);
    for (i, o) in objects(opts).iter().enumerate() {
        w.node_document(&from_json(o), i > 0, false);
    }
    w.finish();
    String::from_utf8(out).expect("emitter writes UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_escape_quotes_and_backslashes() {
        assert_eq!(lit(r"a'b\c"), r"'a\'b\\c'");
    }

    #[test]
    fn the_policy_enforces_exactly_the_catalogues_admission_rules_in_its_words() {
        let [policy, _] = objects(&Options::default());
        let messages: Vec<&str> = policy["spec"]["validations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["message"].as_str().unwrap())
            .collect();
        let mut ids: Vec<&str> = messages.iter().map(|m| &m[..6]).collect();
        for (m, id) in messages.iter().zip(&ids) {
            let head = format!("{id}: {}: ", rules::get(id).short);
            assert!(m.starts_with(&head), "{m:?} must start with {head:?}");
        }
        ids.sort();
        ids.dedup();
        let want: Vec<&str> = rules::ids_at(rules::Where::Admission, true).collect();
        assert_eq!(ids, want);
    }
}
