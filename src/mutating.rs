//! In-cluster injection without a webhook: a MutatingAdmissionPolicy (and its
//! binding) that gives the pods it selects exactly the contract `inject` writes,
//! evaluated by the API server itself (`policy --mutating`).
//!
//! The account is the namespace's one worker account, `nvcf-worker`
//! (`naming: per-namespace`): admission cannot create a ServiceAccount, so the
//! namespace must hold it already; `namespace_kit` prints it (with its empty Role,
//! RoleBinding and the namespace's selecting label).
//!
//! What Kubernetes does before the policy runs: the built-in ServiceAccount
//! admission plugin is a mutating plugin ordered before admission policies. For a
//! pod that names no account it sets `serviceAccountName: default`, and unless
//! automount is off it adds a `kube-api-access-*` projected volume (the API
//! token) and mounts it into every container and init container. The mutation
//! takes exactly those out again (the volume, and the mounts naming it), so the
//! pod holds only the contract's token, as `inject` writes it. The plugin's
//! validating half runs after the policy and checks that the account the pod now
//! names (`nvcf-worker`) exists: a pod in a namespace without the kit is refused
//! there, never admitted without its identity.
//!
//! The mutation never half-mutates: a pod it cannot give the identity (another
//! account named, a volume, mount or env of the contract's already there, a second
//! token) does not match its `matchConditions` and is left as it is, for the
//! companion validation (same selection) to refuse. A pod already given the
//! identity names `nvcf-worker` and no longer matches: the mutation is idempotent.
//!
//! Every pod the mutation gives the identity is stamped
//! (`identity::ADMITTED_ANNOTATION`), and the policy sees every pod created in
//! the cluster (its binding selects nothing; the selection is decided in CEL):
//! from every pod it does not give the identity it takes a stamp off. So a
//! stamp that reaches validation was written by the mutation in that request,
//! and the guard's ValidatingAdmissionPolicy (`policy --trust-mutation`)
//! admits a worker pod carrying it with the contract's spec; a hand-written
//! copy of a mutated pod loses its stamp and is refused (NVW101).

use serde_json::{json, Value};

use crate::identity::{self as id, Marks, Owner, TokenSpec};
use crate::manifest::{from_json, YamlWriter};
use crate::recognize::{self, cel::*, Check};
use crate::rules;
use crate::selector::{Requirement, Selector};

/// The object name of the policy and its binding, unless `--name` says otherwise.
pub const DEFAULT_NAME: &str = "nvcf-worker-identity";
/// The companion ValidatingAdmissionPolicy's name is the policy's and this.
pub const CHECK_SUFFIX: &str = "-selected";

/// `admissionregistration.k8s.io/v1` (Kubernetes 1.36, GA) or `v1beta1`
/// (1.34 and 1.35, behind the `MutatingAdmissionPolicy` feature gate and the
/// `admissionregistration.k8s.io/v1beta1` API).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ApiVersion {
    #[default]
    V1,
    V1beta1,
}

impl ApiVersion {
    pub fn group_version(self) -> &'static str {
        match self {
            ApiVersion::V1 => "admissionregistration.k8s.io/v1",
            ApiVersion::V1beta1 => "admissionregistration.k8s.io/v1beta1",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    pub name: String,
    pub api_version: ApiVersion,
    /// The token's audience (`nvcf-icms:<cluster ID>`) and lifetime.
    pub token: TokenSpec,
    /// Also give init containers the mount and env (inject's `includeInitContainers`).
    pub include_init_containers: bool,
    /// Pods whose labels match (the binding's `objectSelector`).
    pub pods: Selector,
    /// Namespaces whose labels match (the binding's `namespaceSelector`).
    pub namespaces: Selector,
    pub failure_policy: String,
}

/// `nvcf.io/worker=true`, for pods and namespaces alike.
pub fn default_selector() -> Selector {
    crate::config::default_selector()
}

impl Options {
    pub fn new(cluster_id: &str) -> Options {
        Options {
            name: DEFAULT_NAME.into(),
            api_version: ApiVersion::V1,
            token: TokenSpec {
                audience: id::audience(cluster_id),
                expiration_seconds: id::DEFAULT_EXPIRATION_SECONDS,
            },
            include_init_containers: false,
            pods: default_selector(),
            namespaces: default_selector(),
            failure_policy: "Fail".into(),
        }
    }
}

/// A CEL object literal of type `ty` (`Object.spec.volumes`) for a JSON value:
/// the contract's objects from `identity`, spelled for the API server's typed
/// object construction.
fn typed(ty: &str, v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let fields: Vec<String> = m
                .iter()
                .map(|(k, x)| format!("{k}: {}", typed(&format!("{ty}.{k}"), x)))
                .collect();
            format!("{ty}{{{}}}", fields.join(", "))
        }
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(|x| typed(ty, x)).collect();
            format!("[{}]", items.join(", "))
        }
        Value::String(s) => lit(s),
        other => other.to_string(),
    }
}

/// The pod's accounts name none (the ServiceAccount plugin's `default` counts as
/// none: it is what it sets for a pod that names no account).
fn no_account_chosen() -> String {
    format!("{}.all(a, a in ['', 'default'])", accounts("object.spec"))
}

/// CEL: the labels of `meta` (`object.metadata`) match `sel`, as a label
/// selector matches (every requirement holds; an empty selector matches all).
fn selects(meta: &str, sel: &Selector) -> String {
    let has = |k: &str| format!("(has({meta}.labels) && {} in {meta}.labels)", lit(k));
    let value = |k: &str| label(meta, k);
    let parts: Vec<String> = sel
        .0
        .iter()
        .map(|r| match r {
            Requirement::Equals(k, v) => format!("({} && {} == {})", has(k), value(k), lit(v)),
            Requirement::NotEquals(k, v) => format!("(!{} || {} != {})", has(k), value(k), lit(v)),
            Requirement::In(k, vs) => format!("({} && {} in {})", has(k), value(k), list(vs)),
            Requirement::NotIn(k, vs) => {
                format!("(!{} || !({} in {}))", has(k), value(k), list(vs))
            }
            Requirement::Exists(k) => has(k).to_string(),
            Requirement::DoesNotExist(k) => format!("!{}", has(k)),
        })
        .collect();
    if parts.is_empty() {
        "true".into()
    } else {
        format!("({})", parts.join(" && "))
    }
}

/// What must hold for the mutation to give a selected pod the identity:
/// anything else is left as it is (never half-mutated).
fn eligible() -> String {
    let s = "object.spec";
    let untouched = container_untouched("c");
    let parts = [
        no_account_chosen(),
        format!(
            "!has({s}.volumes) || !{s}.volumes.exists(v, v.name == {})",
            lit(id::TOKEN_VOLUME)
        ),
        Check::NoOtherToken.cel("object", s),
        Check::NoEphemeral.cel("object", s),
        format!("{s}.containers.all(c, {untouched}) && (!has({s}.initContainers) || {s}.initContainers.all(c, {untouched}))"),
    ];
    let parts: Vec<String> = parts.iter().map(|p| format!("({p})")).collect();
    parts.join(" && ")
}

fn stamped() -> String {
    format!(
        "has(object.metadata.annotations) && {} in object.metadata.annotations",
        lit(id::ADMITTED_ANNOTATION)
    )
}

/// The pod, and its namespace, are selected.
fn selected(opts: &Options) -> String {
    format!(
        "{} && {}",
        selects("object.metadata", &opts.pods),
        selects("namespaceObject.metadata", &opts.namespaces)
    )
}

fn variables(opts: &Options) -> Vec<Value> {
    let s = "object.spec";
    vec![
        json!({"name": "selected", "expression": selected(opts)}),
        json!({"name": "eligible", "expression": eligible()}),
        // The API token volumes the ServiceAccount admission plugin added.
        json!({"name": "apiVolumes", "expression": format!(
            "has({s}.volumes) ? {s}.volumes.filter(v, v.name.startsWith({api}) && has(v.projected) && has(v.projected.sources) \
             && v.projected.sources.exists(x, has(x.serviceAccountToken))).map(v, v.name) : []",
            api = lit(recognize::API_ACCESS_PREFIX))}),
        json!({"name": "skip", "expression": format!(
            "{}.split(',').map(x, x.trim())", annotation("object.metadata", id::SKIP_CONTAINERS_ANNOTATION))}),
    ]
}

/// The patches of one container list: every container loses the plugin's API
/// token mounts; a selected one gains the token mount and the env, appended as
/// inject appends them.
fn container_patches(list: &str, included: bool) -> String {
    let ty = format!("Object.spec.{list}");
    let mount = typed(&format!("{ty}.volumeMounts"), &id::token_mount());
    let env: Vec<String> = id::env_vars()
        .iter()
        .map(|(n, v)| typed(&format!("{ty}.env"), &id::env_var(n, v)))
        .collect();
    let at = |field: &str| format!("'/spec/{list}/' + string(i) + '/{field}'");
    let kept =
        "(has(c.volumeMounts) ? c.volumeMounts.filter(m, !(m.name in variables.apiVolumes)) : [])";
    let strip = format!(
        "has(c.volumeMounts) && c.volumeMounts.exists(m, m.name in variables.apiVolumes) \
         ? [JSONPatch{{op: 'add', path: {p}, value: {kept}}}] : []",
        p = at("volumeMounts")
    );
    // Each contract object is appended alone (`.../-`): the API server 1.36
    // cannot convert a list whose only elements are typed object literals
    // (it panics in cel-go's list conversion), so the lists it writes hold
    // only the pod's own elements.
    let append = |field: &str, v: &str| {
        format!(
            "JSONPatch{{op: 'add', path: {} + '/-', value: {v}}}",
            at(field)
        )
    };
    let body = if included {
        let env: Vec<String> = env.iter().map(|e| append("env", e)).collect();
        format!(
            "!(c.name in variables.skip) ? [JSONPatch{{op: 'add', path: {pm}, value: {kept}}}, {mount}] \
             + (has(c.env) ? [] : [JSONPatch{{op: 'add', path: {pe}, value: []}}]) + [{env}] : ({strip})",
            pm = at("volumeMounts"),
            pe = at("env"),
            mount = append("volumeMounts", &mount),
            env = env.join(", ")
        )
    } else {
        strip
    };
    format!(
        "(has(object.spec.{list}) ? object.spec.{list}.transformList(i, c, {body}).flatten() : [])"
    )
}

/// The JSONPatch expression.
fn patch_expression(opts: &Options) -> String {
    let volume = typed("Object.spec.volumes", &id::token_volume(&opts.token));
    let worker = lit(id::WORKER_NAME);
    let mark = lit(id::ADMITTED_ANNOTATION);
    let name = lit(&opts.name);
    let give = format!(
        "[JSONPatch{{op: 'add', path: '/spec/serviceAccountName', value: {worker}}}, \
         JSONPatch{{op: 'add', path: '/spec/serviceAccount', value: {worker}}}, \
         JSONPatch{{op: 'add', path: '/spec/automountServiceAccountToken', value: false}}, \
         JSONPatch{{op: 'add', path: '/spec/volumes', value: has(object.spec.volumes) ? object.spec.volumes.filter(v, !(v.name in variables.apiVolumes)) : []}}, \
         JSONPatch{{op: 'add', path: '/spec/volumes/-', value: {volume}}}, \
         has(object.metadata.annotations) \
           ? JSONPatch{{op: 'add', path: '/metadata/annotations/' + jsonpatch.escapeKey({mark}), value: {name}}} \
           : JSONPatch{{op: 'add', path: '/metadata/annotations', value: {{{mark}: {name}}}}}] \
         + {containers} + {init}",
        containers = container_patches("containers", true),
        init = container_patches("initContainers", opts.include_init_containers),
    );
    format!(
        "variables.selected && variables.eligible ? {give} \
         : {stamped} ? [JSONPatch{{op: 'remove', path: '/metadata/annotations/' + jsonpatch.escapeKey({mark})}}] : []",
        stamped = stamped()
    )
}

fn meta(name: &str) -> Value {
    json!({"name": name, "labels": {id::MANAGED_BY_LABEL: id::MANAGED_BY}})
}

fn pod_rules() -> Value {
    json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}])
}

fn match_resources(opts: &Options) -> Value {
    let sel = crate::policy::label_selector;
    json!({"namespaceSelector": sel(&opts.namespaces), "objectSelector": sel(&opts.pods)})
}

/// The companion validation: a selected pod that was not given the identity
/// (it did not meet the mutation's conditions) is refused, not admitted without it.
fn companion(opts: &Options) -> [Value; 2] {
    let name = format!("{}{CHECK_SUFFIX}", opts.name);
    let rule = rules::POD_SPEC_ACCOUNT;
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": meta(&name),
        "spec": {
            "failurePolicy": opts.failure_policy,
            "matchConstraints": {"resourceRules": pod_rules()},
            "validations": [{
                "expression": format!("{}.exists(a, {})", accounts("object.spec"), reserved("a")),
                "message": format!(
                    "{rule}: selected for the worker identity by MutatingAdmissionPolicy {}, but not given it: the pod names another account, \
                     or already has a volume, mount or env of the contract's, another service account token or an ephemeral container; \
                     a pod the policy cannot give the whole identity is left unmutated: remove those, or take the pod out of the selection",
                    opts.name
                ),
                "reason": "Forbidden",
            }],
        },
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": meta(&name),
        "spec": {"policyName": name, "validationActions": ["Deny"], "matchResources": match_resources(opts)},
    });
    [policy, binding]
}

/// The MutatingAdmissionPolicy, its binding, and the companion validation and
/// its binding, as JSON objects.
pub fn objects(opts: &Options) -> [Value; 4] {
    let gv = opts.api_version.group_version();
    let policy = json!({
        "apiVersion": gv,
        "kind": "MutatingAdmissionPolicy",
        "metadata": meta(&opts.name),
        "spec": {
            "failurePolicy": opts.failure_policy,
            // Reinvoked, a mutated pod names nvcf-worker and matches no more.
            "reinvocationPolicy": "Never",
            "matchConstraints": {"resourceRules": pod_rules()},
            // Every pod is seen, so that a stamp the mutation did not write is
            // taken off; the selection is decided in CEL.
            // (`namespaceObject` is not there yet: the pod's labels alone.)
            "matchConditions": [{"name": "selected-or-stamped", "expression": format!("{} || ({})", selects("object.metadata", &opts.pods), stamped())}],
            "variables": variables(opts),
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": patch_expression(opts)}}],
        },
    });
    let binding = json!({
        "apiVersion": gv,
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": meta(&opts.name),
        "spec": {"policyName": opts.name},
    });
    let [check, check_binding] = companion(opts);
    [policy, binding, check, check_binding]
}

/// What a namespace needs for the mutating policy: the Namespace with the labels
/// `namespaces` requires (its `key=value` terms), and the namespace's worker
/// identity as inject declares it for `naming: per-namespace` (ServiceAccount,
/// empty Role, RoleBinding).
pub fn namespace_kit(names: &[String], namespaces: &Selector) -> Result<Vec<Value>, String> {
    let mut labels = serde_json::Map::new();
    for r in &namespaces.0 {
        match r {
            Requirement::Equals(k, v) => {
                labels.insert(k.clone(), v.clone().into());
            }
            Requirement::In(k, vs) if vs.len() == 1 => {
                labels.insert(k.clone(), vs[0].clone().into());
            }
            other => {
                return Err(format!(
                    "--namespace-kit labels the namespace to match --namespace-selector, which needs key=value terms only; {other:?} says no single label"
                ))
            }
        }
    }
    let mut out = Vec::new();
    for ns in names {
        if id::parse_service_account_user(&id::service_account_user(ns, id::WORKER_NAME)).is_none()
        {
            return Err(format!(
                "--namespace-kit takes a namespace name, not {ns:?}"
            ));
        }
        let mut namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        if !labels.is_empty() {
            namespace["metadata"]["labels"] = labels.clone().into();
        }
        out.push(namespace);
        let owner = Owner {
            marks: Marks::Namespace,
            namespace: Some(ns.clone()),
        };
        out.extend(id::trio(id::WORKER_NAME, &owner));
    }
    Ok(out)
}

/// Objects as one YAML stream.
pub fn yaml(objects: &[Value]) -> String {
    let mut out = Vec::new();
    let mut w = YamlWriter::new(&mut out);
    for (i, o) in objects.iter().enumerate() {
        w.node_document(&from_json(o), i > 0, false);
    }
    w.finish();
    String::from_utf8(out).expect("emitter writes UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_literals_spell_the_contract_volume_for_the_api_server() {
        let t = TokenSpec {
            audience: id::audience("c1"),
            expiration_seconds: 900,
        };
        let v = typed("Object.spec.volumes", &id::token_volume(&t));
        assert_eq!(
            v,
            "Object.spec.volumes{name: 'nvcf-worker-token', projected: Object.spec.volumes.projected{sources: [\
             Object.spec.volumes.projected.sources{serviceAccountToken: Object.spec.volumes.projected.sources.serviceAccountToken{\
             audience: 'nvcf-icms:c1', expirationSeconds: 900, path: 'token'}}]}}"
        );
    }

    #[test]
    fn the_policy_carries_the_options_and_selects_pods_and_namespaces() {
        let mut o = Options::new("prod-1");
        o.token.expiration_seconds = 3600;
        o.api_version = ApiVersion::V1beta1;
        o.pods = Selector::parse("app=web").unwrap();
        let [p, b, check, cb] = objects(&o);
        assert_eq!(p["apiVersion"], "admissionregistration.k8s.io/v1beta1");
        assert_eq!(b["kind"], "MutatingAdmissionPolicyBinding");
        assert_eq!(b["spec"]["policyName"], DEFAULT_NAME);
        // The binding sees every pod (to take forged stamps off); the selection
        // is in CEL, and the companion's binding selects.
        assert!(b["spec"].get("matchResources").is_none(), "{b}");
        let selected = p["spec"]["variables"][0]["expression"].as_str().unwrap();
        let label_is = |meta: &str, k: &str, v: &str| {
            format!(
                "((has({meta}.labels) && '{k}' in {meta}.labels) && {} == '{v}')",
                label(meta, k)
            )
        };
        assert_eq!(
            selected,
            format!(
                "({}) && ({})",
                label_is("object.metadata", "app", "web"),
                label_is("namespaceObject.metadata", id::WORKER_LABEL, "true")
            )
        );
        assert_eq!(
            cb["spec"]["matchResources"],
            json!({"objectSelector": {"matchLabels": {"app": "web"}},
                "namespaceSelector": {"matchLabels": {id::WORKER_LABEL: "true"}}})
        );
        let expr = p["spec"]["mutations"][0]["jsonPatch"]["expression"]
            .as_str()
            .unwrap();
        assert!(expr.contains("audience: 'nvcf-icms:prod-1', expirationSeconds: 3600"));
        // Without --include-init-containers init containers only lose the API token.
        let init = expr
            .split("object.spec.initContainers.transformList")
            .nth(1)
            .unwrap();
        assert!(!init.contains(id::ENV_TOKEN_FILE_PATH), "{init}");
        o.include_init_containers = true;
        let [p, ..] = objects(&o);
        let expr = p["spec"]["mutations"][0]["jsonPatch"]["expression"]
            .as_str()
            .unwrap();
        let init = expr
            .split("object.spec.initContainers.transformList")
            .nth(1)
            .unwrap();
        assert!(init.contains(id::ENV_TOKEN_FILE_PATH), "{init}");
        // The companion refuses, with the catalogue's rule, what was not mutated.
        assert_eq!(check["kind"], "ValidatingAdmissionPolicy");
        let msg = check["spec"]["validations"][0]["message"].as_str().unwrap();
        assert!(msg.starts_with(&format!("{}: ", rules::POD_SPEC_ACCOUNT)));
    }

    #[test]
    fn the_namespace_kit_is_the_per_namespace_identity_and_the_label() {
        let kit = namespace_kit(&["team-a".into()], &default_selector()).unwrap();
        assert_eq!(kit.len(), 4);
        assert_eq!(kit[0]["metadata"]["labels"][id::WORKER_LABEL], "true");
        let owner = Owner {
            marks: Marks::Namespace,
            namespace: Some("team-a".into()),
        };
        assert_eq!(kit[1..], id::trio(id::WORKER_NAME, &owner));
        assert!(namespace_kit(&["a".into()], &Selector::parse("x!=y").unwrap()).is_err());
        assert!(namespace_kit(&["Bad_NS".into()], &default_selector()).is_err());
    }
}
