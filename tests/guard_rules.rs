//! The guard: for every rule a manifest that must be rejected and a close look-alike
//! that must pass, through `validate`, the KRM function in validate mode (typed and
//! ConfigMap config) and `inject` (a forged reference blocks injection).

mod support;

use serde_json::Value;
use support::*;

struct Case {
    what: &'static str,
    rule: &'static str,
    /// "error" or "warning".
    severity: &'static str,
    bad: String,
    /// `Kind/namespace/name field.path` the finding must end with.
    context: String,
    good: String,
}

fn rbac(kind: &str, name: &str, ns: Option<&str>, body: &str) -> String {
    let ns = ns.map_or(String::new(), |n| format!("  namespace: {n}\n"));
    format!("apiVersion: rbac.authorization.k8s.io/v1\nkind: {kind}\nmetadata:\n  name: {name}\n{ns}{body}")
}

fn binding(kind: &str, subject: &str) -> String {
    let (ns, role_kind) = if kind == "RoleBinding" {
        (Some("ns"), "Role")
    } else {
        (None, "ClusterRole")
    };
    rbac(
        kind,
        "grant",
        ns,
        &format!("roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: {role_kind}\n  name: edit\nsubjects:\n- {subject}\n"),
    )
}

fn role_with(kind: &str, name: &str, rules: &str) -> String {
    let ns = (kind == "Role").then_some("ns");
    let sep = if rules.starts_with('[') { " " } else { "\n" };
    rbac(kind, name, ns, &format!("rules:{sep}{rules}"))
}

/// The transformer's marks for `Deployment/<workload>` as metadata lines.
fn marks(workload: &str) -> String {
    format!("  labels:\n    app.kubernetes.io/managed-by: kubectl-nvcf-worker\n    nvcf.io/identity-origin: manifest\n  annotations:\n    nvcf.io/workload: Deployment/{workload}\n    nvcf.io/workload-api-version: apps/v1\n")
}

fn service_account(name: &str, meta: &str) -> String {
    format!("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {name}\n  namespace: ns\n{meta}automountServiceAccountToken: false\n")
}

/// The trio `inject` writes for a selected workload, without the workload.
fn injected_trio(kind: &str, name: &str, ns: Option<&str>) -> String {
    let w = workload(kind, name, ns.unwrap_or(""), true, SIMPLE_POD);
    let w = if ns.is_none() {
        w.replace("  namespace: \n", "")
    } else {
        w
    };
    let out = inject(&w, &[]);
    out.ok();
    split_docs(&out.stdout)
        .into_iter()
        .filter(|d| {
            ["ServiceAccount", "Role", "RoleBinding"]
                .iter()
                .any(|k| d.contains(&format!("\nkind: {k}\n")))
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

fn token_secret(sa: &str, ty: &str) -> String {
    format!("apiVersion: v1\nkind: Secret\nmetadata:\n  name: tok\n  namespace: ns\n  annotations:\n    kubernetes.io/service-account.name: {sa}\ntype: {ty}\n")
}

fn pod_with(spec_head: &str) -> String {
    workload("Pod", "p", "ns", false, &format!("{spec_head}{SIMPLE_POD}"))
}

fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    // NVW101 in every handled kind, with the deprecated key too.
    for kind in KINDS {
        for key in ["serviceAccountName", "serviceAccount"] {
            v.push(Case {
                what: "pod spec names a worker account",
                rule: "NVW101",
                severity: "error",
                bad: workload(
                    kind,
                    "app",
                    "ns",
                    false,
                    &format!("{key}: nvcf-worker-other\n{SIMPLE_POD}"),
                ),
                context: format!("{kind}/ns/app {}.{key})", pod_spec_path(kind)),
                good: workload(
                    kind,
                    "app",
                    "ns",
                    false,
                    &format!("{key}: nvcf-workers\n{SIMPLE_POD}"),
                ),
            });
            // `nvcf-worker` itself is the MiniService account: reserved too.
            v.push(Case {
                what: "pod spec names the namespace's worker account",
                rule: "NVW101",
                severity: "error",
                bad: workload(
                    kind,
                    "app",
                    "ns",
                    false,
                    &format!("{key}: nvcf-worker\n{SIMPLE_POD}"),
                ),
                context: format!("{kind}/ns/app {}.{key})", pod_spec_path(kind)),
                good: workload(
                    kind,
                    "app",
                    "ns",
                    false,
                    &format!("{key}: nvcf-worker2\n{SIMPLE_POD}"),
                ),
            });
        }
    }
    // Custom resources found by shape.
    let rollout = |sa: &str| {
        format!("apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata:\n  name: ro\n  namespace: ns\nspec:\n  strategy:\n    canary: {{}}\n  template:\n    metadata:\n      labels: {{app: ro}}\n    spec:\n      serviceAccountName: {sa}\n      containers:\n      - name: app\n        image: x\n")
    };
    v.push(Case {
        what: "Argo Rollout",
        rule: "NVW101",
        severity: "error",
        bad: rollout("nvcf-worker-ro"),
        context: "Rollout/ns/ro spec.template.spec.serviceAccountName)".into(),
        good: rollout("ro-runner"),
    });
    let knative = |sa: &str| {
        format!("apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata:\n  name: kn\n  namespace: ns\nspec:\n  template:\n    spec:\n      serviceAccountName: {sa}\n      containers:\n      - image: x\n")
    };
    v.push(Case {
        what: "Knative Service",
        rule: "NVW101",
        severity: "error",
        bad: knative("nvcf-worker-kn"),
        context: "Service/ns/kn spec.template.spec.serviceAccountName)".into(),
        good: knative("worker-kn"),
    });
    // A merge key bringing the account in.
    v.push(Case {
        what: "merge key hides the account",
        rule: "NVW101",
        severity: "error",
        bad: pod_with("<<: {serviceAccountName: nvcf-worker-x}\n"),
        context: "Pod/ns/p spec.serviceAccountName)".into(),
        good: pod_with("<<: {serviceAccountName: runner-x}\n"),
    });
    // NVW102: bindings to worker accounts.
    for kind in ["RoleBinding", "ClusterRoleBinding"] {
        v.push(Case {
            what: "binding to a worker ServiceAccount",
            rule: "NVW102",
            severity: "error",
            bad: binding(
                kind,
                "kind: ServiceAccount\n  name: nvcf-worker-x\n  namespace: ns",
            ),
            context: format!(
                "{kind}/{}grant subjects[0])",
                if kind == "RoleBinding" { "ns/" } else { "" }
            ),
            good: binding(
                kind,
                "kind: ServiceAccount\n  name: worker-x\n  namespace: ns",
            ),
        });
        v.push(Case {
            what: "binding to a worker account as a User",
            rule: "NVW102",
            severity: "error",
            bad: binding(kind, "kind: User\n  name: system:serviceaccount:ns:nvcf-worker-x\n  apiGroup: rbac.authorization.k8s.io"),
            context: format!(
                "{kind}/{}grant subjects[0])",
                if kind == "RoleBinding" { "ns/" } else { "" }
            ),
            good: binding(kind, "kind: User\n  name: system:serviceaccount:ns:worker-x\n  apiGroup: rbac.authorization.k8s.io"),
        });
    }
    // NVW103: groups holding every worker account.
    for group in [
        "system:serviceaccounts",
        "system:serviceaccounts:ns",
        "system:authenticated",
    ] {
        v.push(Case {
            what: "binding to a group of all accounts",
            rule: "NVW103",
            severity: "warning",
            bad: binding("ClusterRoleBinding", &format!("kind: Group\n  name: {group}\n  apiGroup: rbac.authorization.k8s.io")),
            context: "ClusterRoleBinding/grant subjects[0])".into(),
            good: binding("ClusterRoleBinding", "kind: Group\n  name: system:serviceaccounts-readers\n  apiGroup: rbac.authorization.k8s.io"),
        });
    }
    // NVW104: worker roles with rules.
    let rule = "- apiGroups: [\"\"]\n  resources: [pods]\n  verbs: [get]\n";
    for kind in ["Role", "ClusterRole"] {
        // A Role carries the transformer's marks (else NVW109 fires too).
        let role_with = |kind: &str, name: &str, rules: &str| {
            let r = role_with(kind, name, rules);
            if kind == "Role" {
                r.replacen(
                    "  namespace: ns\n",
                    &format!("  namespace: ns\n{}", marks("x")),
                    1,
                )
            } else {
                r
            }
        };
        v.push(Case {
            what: "worker role with rules",
            rule: "NVW104",
            severity: "error",
            bad: role_with(kind, "nvcf-worker-x", rule),
            context: format!(
                "{kind}/{}nvcf-worker-x rules)",
                if kind == "Role" { "ns/" } else { "" }
            ),
            good: role_with(kind, "nvcf-worker-x", "[]\n"),
        });
    }
    v.push(Case {
        what: "worker ClusterRole that aggregates",
        rule: "NVW104",
        severity: "error",
        bad: rbac(
            "ClusterRole",
            "nvcf-worker-agg",
            None,
            "aggregationRule:\n  clusterRoleSelectors:\n  - matchLabels: {x: y}\nrules: []\n",
        ),
        context: "ClusterRole/nvcf-worker-agg rules)".into(),
        good: rbac(
            "ClusterRole",
            "worker-agg",
            None,
            "aggregationRule:\n  clusterRoleSelectors:\n  - matchLabels: {x: y}\nrules: []\n",
        ),
    });
    // NVW105: minting and impersonation, wildcards included.
    let mint_rules = [
        "- apiGroups: [\"\"]\n  resources: [serviceaccounts/token]\n  verbs: [create]\n",
        "- apiGroups: [\"\"]\n  resources: [serviceaccounts]\n  verbs: [impersonate]\n",
        "- apiGroups: [\"\"]\n  resources: [users]\n  verbs: [impersonate]\n",
        "- apiGroups: [\"*\"]\n  resources: [\"*\"]\n  verbs: [\"*\"]\n",
        "- apiGroups: [\"\"]\n  resources: [\"serviceaccounts/*\"]\n  verbs: [create]\n",
        "- apiGroups: [\"\"]\n  resources: [\"*/token\"]\n  verbs: [\"*\"]\n",
    ];
    for (i, r) in mint_rules.iter().enumerate() {
        let kind = if i % 2 == 0 { "ClusterRole" } else { "Role" };
        v.push(Case {
            what: "token minting or impersonation",
            rule: "NVW105",
            severity: "warning",
            bad: role_with(kind, "ops", r),
            context: format!("{kind}/{}ops rules[0])", if kind == "Role" { "ns/" } else { "" }),
            good: role_with(
                kind,
                "ops",
                "- apiGroups: [\"\"]\n  resources: [serviceaccounts]\n  verbs: [get, list, create]\n",
            ),
        });
    }
    // NVW114: minting for or impersonating a named worker account; narrowed to
    // other accounts passes (and no longer warns).
    for (kind, r, good) in [
        ("Role", "- apiGroups: [\"\"]\n  resources: [serviceaccounts/token]\n  verbs: [create]\n  resourceNames: [builder, nvcf-worker-x]\n", "- apiGroups: [\"\"]\n  resources: [serviceaccounts/token]\n  verbs: [create]\n  resourceNames: [builder]\n"),
        ("ClusterRole", "- apiGroups: [\"\"]\n  resources: [users]\n  verbs: [impersonate]\n  resourceNames: [\"system:serviceaccount:ns:nvcf-worker\"]\n", "- apiGroups: [\"\"]\n  resources: [users]\n  verbs: [impersonate]\n  resourceNames: [\"system:serviceaccount:ns:nvcf-workers\"]\n"),
        ("Role", "- apiGroups: [\"\"]\n  resources: [serviceaccounts]\n  verbs: [impersonate]\n  resourceNames: [nvcf-worker]\n", "- apiGroups: [\"\"]\n  resources: [serviceaccounts]\n  verbs: [impersonate]\n  resourceNames: [ci-bot]\n"),
    ] {
        v.push(Case {
            what: "mint or impersonate a named worker account",
            rule: "NVW114",
            severity: "error",
            bad: role_with(kind, "ops", r),
            context: format!("{kind}/{}ops rules[0])", if kind == "Role" { "ns/" } else { "" }),
            good: role_with(kind, "ops", good),
        });
    }
    // NVW108: the agent's infra annotation, on the object or its pod template.
    let annotated = |object: &str, template: &str| {
        format!("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  namespace: ns\n  annotations:\n    {object}: \"true\"\nspec:\n  selector:\n    matchLabels: {{app: app}}\n  template:\n    metadata:\n      labels: {{app: app}}\n      annotations:\n        {template}: \"true\"\n    spec:\n      containers:\n      - name: app\n        image: x\n")
    };
    v.push(Case {
        what: "infra annotation on a workload",
        rule: "NVW108",
        severity: "error",
        bad: annotated("nvca.nvcf.nvidia.io/nvca-infra-object", "example.com/x"),
        context: "Deployment/ns/app metadata.annotations.nvca.nvcf.nvidia.io/nvca-infra-object)"
            .into(),
        good: annotated("nvca.nvcf.nvidia.io/miniservice-name", "example.com/x"),
    });
    v.push(Case {
        what: "infra annotation on a pod template",
        rule: "NVW108",
        severity: "error",
        bad: annotated("example.com/x", "nvca.nvcf.nvidia.io/nvca-infra-object"),
        context: "Deployment/ns/app spec.template.metadata.annotations.nvca.nvcf.nvidia.io/nvca-infra-object)".into(),
        good: annotated("example.com/x", "nvca.nvcf.nvidia.io/function-id"),
    });
    // NVW109: identity objects with reserved names written by hand.
    v.push(Case {
        what: "hand-written worker ServiceAccount",
        rule: "NVW109",
        severity: "error",
        bad: service_account("nvcf-worker", ""),
        context: "ServiceAccount/ns/nvcf-worker metadata.name)".into(),
        good: service_account("nvcf-workers", ""),
    });
    v.push(Case {
        what: "hand-written worker Role",
        rule: "NVW109",
        severity: "error",
        bad: rbac("Role", "nvcf-worker-x", Some("ns"), "rules: []\n"),
        context: "Role/ns/nvcf-worker-x metadata.name)".into(),
        good: rbac("Role", "nvcf-workerx", Some("ns"), "rules: []\n"),
    });
    let view_default = "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: view\nsubjects:\n- kind: ServiceAccount\n  name: default\n  namespace: ns\n";
    v.push(Case {
        what: "hand-written worker RoleBinding",
        rule: "NVW109",
        severity: "error",
        bad: rbac("RoleBinding", "nvcf-worker", Some("ns"), view_default),
        context: "RoleBinding/ns/nvcf-worker metadata.name)".into(),
        good: rbac("RoleBinding", "view-default", Some("ns"), view_default),
    });
    v.push(Case {
        what: "marked worker ServiceAccount that automounts",
        rule: "NVW109",
        severity: "error",
        bad: service_account("nvcf-worker-x", &marks("x")).replace(
            "automountServiceAccountToken: false",
            "automountServiceAccountToken: true",
        ),
        context: "ServiceAccount/ns/nvcf-worker-x metadata.name)".into(),
        good: service_account("nvcf-worker-x", &marks("x")),
    });
    // NVW110: a reserved account named outside a pod spec.
    let helm = |sa: &str| {
        format!("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: hr\n  namespace: ns\nspec:\n  chart:\n    spec: {{chart: app}}\n  values:\n    serviceAccount:\n      create: false\n      name: {sa}\n")
    };
    let helm_key = |sa: &str| {
        format!("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: hr\n  namespace: ns\nspec:\n  chart:\n    spec: {{chart: app}}\n  values:\n    serviceAccountName: {sa}\n")
    };
    v.push(Case {
        what: "Helm values name a worker account by key",
        rule: "NVW101",
        severity: "error",
        bad: helm_key("nvcf-worker"),
        context: "HelmRelease/ns/hr spec.values.serviceAccountName)".into(),
        good: helm_key("nvcf-workers"),
    });
    v.push(Case {
        what: "Helm values name a worker account",
        rule: "NVW110",
        severity: "error",
        bad: helm("nvcf-worker"),
        context: "HelmRelease/ns/hr spec.values.serviceAccount.name)".into(),
        good: helm("nvcf-workers"),
    });
    let eso = |sa: &str| {
        format!("apiVersion: external-secrets.io/v1beta1\nkind: SecretStore\nmetadata:\n  name: vault\n  namespace: ns\nspec:\n  provider:\n    vault:\n      auth:\n        kubernetes:\n          serviceAccountRef:\n            name: {sa}\n            audiences: [vault]\n")
    };
    v.push(Case {
        what: "External Secrets serviceAccountRef names a worker account",
        rule: "NVW110",
        severity: "error",
        bad: eso("nvcf-worker-x"),
        context: "SecretStore/ns/vault spec.provider.vault.auth.kubernetes.serviceAccountRef.name)"
            .into(),
        good: eso("eso-reader"),
    });
    // NVW111: an ICMS token projected for an ordinary account.
    let projected = |audience: &str| {
        pod_with(&format!("serviceAccountName: runner\nvolumes:\n- name: tok\n  projected:\n    sources:\n    - serviceAccountToken: {{audience: \"{audience}\", expirationSeconds: 900, path: token}}\n"))
    };
    v.push(Case {
        what: "nvcf-icms token for a non-worker account",
        rule: "NVW111",
        severity: "warning",
        bad: projected("nvcf-icms:c1"),
        context: "Pod/ns/p spec.volumes[0])".into(),
        good: projected("vault"),
    });
    // NVW112: renamed after the transformer ran.
    let renamed_workload = |volume: &str| {
        workload("Deployment", "prod-web", "ns", false, &format!("serviceAccountName: prod-nvcf-worker-web\nautomountServiceAccountToken: false\ncontainers:\n- name: app\n  image: x\n  env:\n  - name: NVCF_TOKEN_FILE_PATH\n    value: /var/run/secrets/tokens/token\nvolumes:\n- name: {volume}\n  emptyDir: {{}}\n"))
    };
    v.push(Case {
        what: "workload carries the worker token under another account",
        rule: "NVW112",
        severity: "error",
        bad: renamed_workload("nvcf-worker-token"),
        context: "Deployment/ns/prod-web spec.template.spec.serviceAccountName)".into(),
        good: renamed_workload("nvcf-worker-token-cache"),
    });
    v.push(Case {
        what: "trio member renamed",
        rule: "NVW112",
        severity: "error",
        bad: service_account("prod-nvcf-worker-web", &marks("web")),
        context: "ServiceAccount/ns/prod-nvcf-worker-web metadata.name)".into(),
        good: service_account("prod-nvcf-worker-web", ""),
    });
    // NVW113: one identity name for two workloads (an omitted namespace collides).
    v.push(Case {
        what: "identity name collision",
        rule: "NVW113",
        severity: "error",
        bad: format!(
            "{}---\n{}",
            injected_trio("Deployment", "web", None),
            injected_trio("StatefulSet", "web", Some("ns"))
        ),
        context: "ServiceAccount/ns/nvcf-worker-web metadata.name)".into(),
        good: format!(
            "{}---\n{}",
            injected_trio("Deployment", "web", Some("other")),
            injected_trio("StatefulSet", "web", Some("ns2"))
        ),
    });
    // NVW106: token Secret for a worker account.
    v.push(Case {
        what: "token Secret for a worker",
        rule: "NVW106",
        severity: "error",
        bad: token_secret("nvcf-worker-x", "kubernetes.io/service-account-token"),
        context: "Secret/ns/tok metadata.annotations.kubernetes.io/service-account.name)".into(),
        good: token_secret("worker-x", "kubernetes.io/service-account-token"),
    });
    v.push(Case {
        what: "token Secret for a worker (not a token type passes)",
        rule: "NVW106",
        severity: "error",
        bad: token_secret("nvcf-worker-y", "kubernetes.io/service-account-token"),
        context: "Secret/ns/tok metadata.annotations.kubernetes.io/service-account.name)".into(),
        good: token_secret("nvcf-worker-y", "Opaque"),
    });
    // NVW107: look-alike keys.
    for key in [
        "\"serviceAccountName \"",
        "\"s\u{0435}rviceAccountName\"",
        "\"service\u{0410}ccountName\"",
        "\"service\u{200b}AccountName\"",
        "\"ServiceAccountName\"",
        "\"serviceAccount\u{00a0}\"",
    ] {
        let shown: String = serde_json::from_str(key).unwrap();
        v.push(Case {
            what: "look-alike key",
            rule: "NVW107",
            severity: "error",
            bad: pod_with(&format!("{key}: nvcf-worker-x\n")),
            context: format!("Pod/ns/p spec.{shown})"),
            good: pod_with("serviceAccountName: default\nautomountServiceAccountToken: false\n"),
        });
    }
    v.extend(token_surface_cases());
    v
}

/// inject's exact output of `kind/name` (selected) with `pod_spec`.
fn injected(kind: &str, name: &str, pod_spec: &str) -> String {
    let out = inject(&workload(kind, name, "ns", true, pod_spec), &[]);
    out.ok();
    out.stdout
}

/// NVW115-NVW117: the rest of a worker pod's token surface, and the record.
fn token_surface_cases() -> Vec<Case> {
    let mut v = Vec::new();
    // A second token for the worker account beside the contract's, long-lived or
    // of the API's audience; a projected volume of a ConfigMap passes.
    let with_cfg = format!(
        "serviceAccountName: app\nvolumes:\n- name: cfg\n  projected:\n    sources:\n    - configMap:\n        name: settings\n{SIMPLE_POD}"
    );
    let good = injected("Deployment", "app", &with_cfg);
    for token in [
        "serviceAccountToken:\n              audience: nvcf-icms:c1\n              expirationSeconds: 4294967296\n              path: t",
        "serviceAccountToken:\n              audience: https://kubernetes.default.svc\n              expirationSeconds: 3600\n              path: t",
    ] {
        let bad = good.replace("configMap:\n              name: settings", token);
        assert_ne!(bad, good);
        v.push(Case {
            what: "a second token in the transformer's exact output",
            rule: "NVW115",
            severity: "error",
            bad,
            context: "Deployment/ns/app spec.template.spec.volumes[0].projected.sources[0])".into(),
            good: good.clone(),
        });
    }
    // The record of what inject replaced, edited to restore a worker account and
    // the API token; inject's own record passes.
    let bad = good.replace(
        r#"{\"serviceAccountName\":\"app\"}"#,
        r#"{\"serviceAccountName\":\"nvcf-worker-victim\",\"automountServiceAccountToken\":true}"#,
    );
    assert_ne!(bad, good, "inject records the account it replaced:\n{good}");
    v.push(Case {
        what: "a forged record of what inject replaced",
        rule: "NVW116",
        severity: "error",
        bad,
        context: "Deployment/ns/app metadata.annotations.nvcf.io/replaced)".into(),
        good: good.clone(),
    });
    // A record on a workload the transformer did not write; a look-alike key passes.
    let plain = |key: &str| {
        workload("Deployment", "app", "ns", false, SIMPLE_POD).replacen(
            "  labels:\n",
            &format!(
                "  annotations:\n    {key}: '{{\"serviceAccountName\":\"app\"}}'\n  labels:\n"
            ),
            1,
        )
    };
    v.push(Case {
        what: "a record on a workload inject did not write",
        rule: "NVW116",
        severity: "error",
        bad: plain("nvcf.io/replaced"),
        context: "Deployment/ns/app metadata.annotations.nvcf.io/replaced)".into(),
        good: plain("example.com/replaced"),
    });
    // An ephemeral container in a worker pod; in any other pod it passes.
    let pod = injected("Pod", "p", SIMPLE_POD);
    let debug = "  ephemeralContainers:\n  - name: dbg\n    image: busybox\n";
    let bad = pod.replace("  containers:\n", &format!("{debug}  containers:\n"));
    assert_ne!(bad, pod);
    v.push(Case {
        what: "an ephemeral container in a worker pod",
        rule: "NVW117",
        severity: "error",
        bad,
        context: "Pod/ns/p spec.ephemeralContainers)".into(),
        good: workload(
            "Pod",
            "p",
            "ns",
            false,
            &format!("ephemeralContainers:\n- name: dbg\n  image: busybox\n{SIMPLE_POD}"),
        ),
    });
    v
}

fn write(name: &str, text: &str) -> (tempfile::TempDir, String) {
    let dir = temp_tree(&[(name, text)]);
    let p = path_str(&dir.path().join(name));
    (dir, p)
}

/// Checks one finding line: `path:line: severity rule-id: message (context)`.
#[track_caller]
fn assert_finding_line(line: &str, path: &str, severity: &str, rule: &str, context: &str) {
    let rest = line
        .strip_prefix(&format!("{path}:"))
        .unwrap_or_else(|| panic!("starts with {path}: {line}"));
    let (num, rest) = rest.split_once(": ").expect("line number");
    assert!(
        num.parse::<u32>().is_ok_and(|n| n > 0),
        "line number in {line}"
    );
    assert!(
        rest.starts_with(&format!("{severity} {rule}: ")),
        "{severity} {rule} in {line}"
    );
    assert!(rest.ends_with(context), "ends with {context:?}: {line}");
    assert!(rest.contains(" ("), "{line}");
}

fn validate_cfgs() -> [String; 2] {
    [
        typed_config("mode: validate\n"),
        configmap_config(&[("mode", "validate")]),
    ]
}

#[test]
fn every_rule_rejects_the_bad_and_passes_the_look_alike() {
    let cases = cases();
    for rule in [
        "NVW101", "NVW102", "NVW103", "NVW104", "NVW105", "NVW106", "NVW107", "NVW108", "NVW109",
        "NVW110", "NVW111", "NVW112", "NVW113", "NVW114", "NVW115", "NVW116", "NVW117",
    ] {
        assert!(cases.iter().any(|c| c.rule == rule), "a case for {rule}");
    }
    for c in &cases {
        let ctx = format!("[{} {}]", c.rule, c.what);
        // validate: the bad one.
        let (_d, p) = write("bad.yaml", &c.bad);
        let out = run(&["validate", &p], "");
        out.code(if c.severity == "error" { 1 } else { 0 });
        let lines = finding_lines(&out);
        assert_eq!(lines.len(), 1, "{ctx} one finding\n{out}\n{}", c.bad);
        assert_finding_line(&lines[0], &p, c.severity, c.rule, &c.context);
        let (e, w) = if c.severity == "error" {
            (1, 0)
        } else {
            (0, 1)
        };
        assert_eq!(
            summary(&out),
            format!(
                "{e} error{}, {w} warning{} in 1 file",
                if e == 1 { "" } else { "s" },
                if w == 1 { "" } else { "s" }
            ),
            "{ctx}"
        );
        // validate: the look-alike.
        let (_d2, p2) = write("good.yaml", &c.good);
        let out = run(&["validate", &p2], "");
        out.ok();
        assert_eq!(
            out.stdout, "0 errors, 0 warnings in 1 file\n",
            "{ctx}\n{}",
            c.good
        );
        // KRM validate mode, both config forms.
        for cfg in validate_cfgs() {
            let input = resource_list(&c.bad, &cfg);
            let k = krm(&input);
            k.code(if c.severity == "error" { 1 } else { 0 });
            assert!(
                k.stdout.starts_with(input.trim_end()),
                "{ctx} items pass through unchanged\n{k}"
            );
            let r = rl(&k);
            assert_eq!(items(&r), items(&docs(&input)[0]));
            let res = results(&r);
            assert_eq!(res.len(), 1, "{ctx}\n{k}");
            assert_eq!(res[0]["severity"], c.severity);
            assert_eq!(res[0]["tags"]["rule"], c.rule);
            assert!(res[0]["message"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{}: ", c.rule)));
            assert!(res[0]["resourceRef"]["kind"].is_string());
            assert!(res[0]["field"]["path"].is_string());
            let good = resource_list(&c.good, &cfg);
            let k = krm(&good);
            k.ok();
            assert_eq!(k.stdout, good, "{ctx} a clean list comes out as it went in");
        }
        // inject: an error blocks injection of an unrelated selected workload.
        let sel = workload("Deployment", "web", "ns", true, SIMPLE_POD);
        let stream = format!("{sel}---\n{}", c.bad);
        let out = inject(&stream, &[]);
        assert!(out.stderr.contains(c.rule), "{ctx}\n{out}");
        if c.severity == "error" {
            out.code(1);
            assert!(out.stdout.is_empty(), "{ctx}\n{out}");
        } else {
            out.ok();
            assert_contract(&objects(&out.stdout), "Deployment", "web", "ns", &["app"]);
        }
        let out = inject(&format!("{sel}---\n{}", c.good), &[]);
        out.ok();
        assert!(!out.stderr.contains("NVW"), "{ctx}\n{out}");
    }
}

#[test]
fn forged_reference_blocks_injection_atomically() {
    // Another object claims the identity inject is about to create.
    let sel = workload("Deployment", "web", "ns", true, SIMPLE_POD);
    let thief = workload(
        "Pod",
        "thief",
        "ns",
        false,
        &format!("serviceAccountName: nvcf-worker-web\n{SIMPLE_POD}"),
    );
    let stream = format!("{sel}---\n{thief}");
    let out = inject(&stream, &[]);
    out.code(1);
    assert!(out.stdout.is_empty(), "{out}");
    assert!(out.stderr.contains("error NVW101"), "{out}");
    assert!(
        out.stderr.contains("Pod/ns/thief spec.serviceAccountName"),
        "{out}"
    );
    let input = resource_list(&stream, &configmap_config(&[("clusterID", CLUSTER)]));
    let k = krm(&input);
    k.code(1);
    assert!(k.stdout.starts_with(input.trim_end()), "{k}");
    let r = rl(&k);
    assert_eq!(items(&r), items(&docs(&input)[0]));
    assert!(results(&r)
        .iter()
        .any(|x| x["tags"]["rule"] == "NVW101" && x["resourceRef"]["name"] == "thief"));
    // The selected workload naming its own derived account is what inject produces.
    let own = workload(
        "Deployment",
        "web",
        "ns",
        true,
        &format!("serviceAccountName: nvcf-worker-web\n{SIMPLE_POD}"),
    );
    let out = inject(&own, &[]);
    out.ok();
    assert_contract(&objects(&out.stdout), "Deployment", "web", "ns", &["app"]);
}

#[test]
fn the_transformer_output_is_the_exception() {
    let stream = KINDS
        .iter()
        .map(|k| {
            workload(
                k,
                &format!("w-{}", k.to_lowercase()),
                "ns",
                true,
                SIMPLE_POD,
            )
        })
        .collect::<Vec<_>>()
        .join("---\n");
    let out = inject(&stream, &[]);
    out.ok();
    let v = validate_stdin(&out.stdout);
    v.ok();
    assert_eq!(v.stdout, "0 errors, 0 warnings in 1 file\n");
    for cfg in validate_cfgs() {
        let k = krm(&resource_list(&out.stdout, &cfg));
        k.ok();
        assert!(results(&rl(&k)).is_empty(), "{k}");
    }
    // The trio may sit in another file of the same run.
    let docs_out = split_docs(&out.stdout);
    let (workloads, trios): (Vec<_>, Vec<_>) = docs_out.iter().partition(|d| {
        !d.contains("\nkind: ServiceAccount\n")
            && !d.contains("\nkind: Role\n")
            && !d.contains("\nkind: RoleBinding\n")
    });
    let w = workloads
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join("---\n");
    let t = trios
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join("---\n");
    let dir = temp_tree(&[("apps/workloads.yaml", &w), ("rbac/identity.yaml", &t)]);
    let v = run(&["validate", &path_str(dir.path())], "");
    v.ok();
    assert_eq!(v.stdout, "0 errors, 0 warnings in 2 files\n");
    // The same workloads without their trio: each is rejected.
    let v = run(
        &[
            "validate",
            &path_str(&dir.path().join("apps/workloads.yaml")),
        ],
        "",
    );
    v.code(1);
    let lines = finding_lines(&v);
    assert_eq!(lines.len(), KINDS.len(), "{v}");
    assert!(lines.iter().all(|l| l.contains("error NVW101")), "{v}");
    // With a Role that has rules: the Role and the workload are rejected.
    let one = inject(&workload("Deployment", "web", "ns", true, SIMPLE_POD), &[]);
    one.ok();
    let widened = one.stdout.replace(
        "rules: []",
        "rules:\n- apiGroups: [\"\"]\n  resources: [secrets]\n  verbs: [get]",
    );
    assert_ne!(widened, one.stdout);
    let v = validate_stdin(&widened);
    v.code(1);
    assert!(v.stdout.contains("error NVW104"), "{v}");
    assert!(v.stdout.contains("error NVW101"), "{v}");
    // An SA that automounts, or a binding that grants more, also breaks the exception.
    let automount = one.stdout.replacen(
        "automountServiceAccountToken: false\n---\napiVersion: rbac",
        "automountServiceAccountToken: true\n---\napiVersion: rbac",
        1,
    );
    assert_ne!(automount, one.stdout);
    let v = validate_stdin(&automount);
    v.code(1);
    assert!(v.stdout.contains("error NVW101"), "{v}");
    // The RoleBinding is the last document before the workload's.
    let rb_end = one.stdout.rfind("---\n").unwrap();
    let extra_subject = format!(
        "{}- kind: ServiceAccount\n  name: ci\n  namespace: ns\n{}",
        &one.stdout[..rb_end],
        &one.stdout[rb_end..]
    );
    let v = validate_stdin(&extra_subject);
    v.code(1);
    assert!(v.stdout.contains("error NVW101"), "{v}");
    assert!(v.stdout.contains("error NVW102"), "{v}");
    // A pod spec elsewhere in the object may not borrow the identity.
    let borrowed = one.stdout.replacen(
        "spec:\n  selector:",
        "spec:\n  sidecarTemplate:\n    serviceAccountName: nvcf-worker-web\n    containers: [{name: s, image: x}]\n  selector:",
        1,
    );
    assert_ne!(borrowed, one.stdout);
    let v = validate_stdin(&borrowed);
    v.code(1);
    assert!(
        v.stdout.contains("NVW101") && v.stdout.contains("spec.sidecarTemplate.serviceAccountName"),
        "{v}"
    );
}

#[test]
fn transformer_binding_passes_and_a_copy_elsewhere_does_not() {
    let one = inject(&workload("Deployment", "web", "ns", true, SIMPLE_POD), &[]);
    one.ok();
    let rb = split_docs(&one.stdout)
        .into_iter()
        .find(|d| d.contains("kind: RoleBinding"))
        .unwrap();
    validate_stdin(&rb).ok();
    // The same subjects under another binding name, or bound to another role.
    let renamed = rb.replacen("  name: nvcf-worker-web\n", "  name: sneaky\n", 1);
    assert_ne!(renamed, rb);
    let v = validate_stdin(&renamed);
    v.code(1);
    assert!(v.stdout.contains("error NVW102"), "{v}");
    let admin = rb.replacen(
        "kind: Role\n  name: nvcf-worker-web",
        "kind: ClusterRole\n  name: admin",
        1,
    );
    assert_ne!(admin, rb);
    let v = validate_stdin(&admin);
    v.code(1);
    assert!(v.stdout.contains("error NVW102"), "{v}");
}

#[test]
fn duplicate_keys_and_unparsable_files_are_reported_with_position() {
    let dir = temp_tree(&[
        ("dup.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  serviceAccountName: default\n  containers: []\n  serviceAccountName: nvcf-worker-x\n"),
        ("broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [p\n"),
        ("notmap.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\n- a\n"),
        ("nokind.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\napiVersion: v1\nmetadata: {name: q}\n"),
    ]);
    let p = |f: &str| path_str(&dir.path().join(f));
    let out = run(&["validate", &path_str(dir.path())], "");
    out.code(1);
    let lines = finding_lines(&out);
    assert_eq!(lines.len(), 4, "{out}");
    let line_for = |f: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(&format!("{}:", p(f))))
            .unwrap_or_else(|| panic!("{f}\n{out}"))
            .clone()
    };
    let dup = line_for("dup.yaml");
    assert!(
        dup.starts_with(&format!(
            "{}:8: error NVW001: duplicate key \"serviceAccountName\"",
            p("dup.yaml")
        )),
        "{dup}"
    );
    assert!(dup.contains("first at line 6"), "{dup}");
    let broken = line_for("broken.yaml");
    assert!(
        broken.starts_with(&format!(
            "{}:5: error NVW001: invalid YAML",
            p("broken.yaml")
        )),
        "{broken}"
    );
    assert!(broken.contains("(line 5, column 1)"), "{broken}");
    assert!(
        line_for("notmap.yaml").contains(":5: error NVW001: document 2: document is not a mapping"),
        "{out}"
    );
    assert!(
        line_for("nokind.yaml").contains(":5: error NVW001: document 2: missing kind"),
        "{out}"
    );
    assert_eq!(summary(&out), "4 errors, 0 warnings in 4 files");
    // KRM: an item that is not an object is an NVW001 result.
    for cfg in validate_cfgs() {
        let input = format!("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {{name: p}}\n- just a string\nfunctionConfig:\n{}", indent(&cfg, 2));
        let k = krm(&input);
        k.code(1);
        let r = rl(&k);
        assert_eq!(items(&r), items(&docs(&input)[0]));
        let res = results(&r);
        assert_eq!(res.len(), 1, "{k}");
        assert_eq!(res[0]["tags"]["rule"], "NVW001");
        assert!(res[0]["message"].as_str().unwrap().contains("items[1]"));
    }
}

#[test]
fn json_documents_are_accepted() {
    let good = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": {"serviceAccountName": "runner", "containers": [{"name": "a", "image": "x"}]}}"#;
    let bad = good.replace("\"runner\"", "\"nvcf-worker-p\"");
    let dir = temp_tree(&[("good.json", good), ("bad.json", &bad)]);
    let out = run(&["validate", &path_str(&dir.path().join("good.json"))], "");
    out.ok();
    assert_eq!(out.stdout, "0 errors, 0 warnings in 1 file\n");
    let bp = path_str(&dir.path().join("bad.json"));
    let out = run(&["validate", &bp], "");
    out.code(1);
    let lines = finding_lines(&out);
    assert_eq!(lines.len(), 1);
    assert_finding_line(
        &lines[0],
        &bp,
        "error",
        "NVW101",
        "Pod/ns/p spec.serviceAccountName)",
    );
    // A JSON duplicate key is as bad as a YAML one.
    let dup = good.replace(
        "\"kind\": \"Pod\",",
        "\"kind\": \"Pod\", \"kind\": \"Pod\",",
    );
    let out = validate_stdin(&dup);
    out.code(1);
    assert!(
        out.stdout
            .contains("<stdin>:1: error NVW001: duplicate key \"kind\""),
        "{out}"
    );
}

#[test]
fn many_files_directories_and_yaml_that_is_not_kubernetes() {
    let forged = workload(
        "Deployment",
        "d",
        "ns",
        false,
        &format!("serviceAccountName: nvcf-worker-z\n{SIMPLE_POD}"),
    );
    let clean = workload("Deployment", "c", "ns", false, SIMPLE_POD);
    let dir = temp_tree(&[
        ("a/clean.yaml", &clean),
        ("a/b/c/deep.yml", &forged),
        ("a/b/values.yaml", "replicas: 3\nimage:\n  tag: v1\n"),
        ("a/b/list.yaml", "- one\n- two\n"),
        ("a/notes.txt", "serviceAccountName: nvcf-worker-x\n"),
        ("a/b/warn.json", "{\"apiVersion\": \"rbac.authorization.k8s.io/v1\", \"kind\": \"ClusterRoleBinding\", \"metadata\": {\"name\": \"g\"}, \"roleRef\": {\"apiGroup\": \"rbac.authorization.k8s.io\", \"kind\": \"ClusterRole\", \"name\": \"view\"}, \"subjects\": [{\"kind\": \"Group\", \"name\": \"system:serviceaccounts\", \"apiGroup\": \"rbac.authorization.k8s.io\"}]}\n"),
        ("other.yaml", &token_secret("nvcf-worker-z", "kubernetes.io/service-account-token")),
    ]);
    let root = dir.path();
    let out = run(
        &[
            "validate",
            &path_str(&root.join("a")),
            &path_str(&root.join("other.yaml")),
        ],
        "",
    );
    out.code(1);
    let lines = finding_lines(&out);
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines.iter().any(|l| l
            .starts_with(&format!("{}:", path_str(&root.join("a/b/c/deep.yml"))))
            && l.contains("error NVW101")),
        "{out}"
    );
    assert!(
        lines.iter().any(
            |l| l.starts_with(&format!("{}:", path_str(&root.join("other.yaml"))))
                && l.contains("error NVW106")
        ),
        "{out}"
    );
    assert!(
        lines.iter().any(
            |l| l.starts_with(&format!("{}:", path_str(&root.join("a/b/warn.json"))))
                && l.contains("warning NVW103")
        ),
        "{out}"
    );
    assert!(
        !out.stdout.contains("notes.txt")
            && !out.stdout.contains("values.yaml")
            && !out.stdout.contains("list.yaml"),
        "{out}"
    );
    assert_eq!(summary(&out), "2 errors, 1 warning in 6 files");
    // Warnings only: exit 0.
    let out = run(
        &[
            "validate",
            &path_str(&root.join("a/b/warn.json")),
            &path_str(&root.join("a/clean.yaml")),
        ],
        "",
    );
    out.ok();
    assert_eq!(summary(&out), "0 errors, 1 warning in 2 files");
    // Only non-Kubernetes YAML: quietly clean.
    let out = run(
        &[
            "validate",
            &path_str(&root.join("a/b/values.yaml")),
            &path_str(&root.join("a/b/list.yaml")),
        ],
        "",
    );
    out.ok();
    assert_eq!(out.stdout, "0 errors, 0 warnings in 2 files\n");
}

#[test]
fn output_json_report() {
    let forged = workload(
        "Deployment",
        "d",
        "ns",
        false,
        &format!("serviceAccountName: nvcf-worker-z\n{SIMPLE_POD}"),
    );
    let grp = binding(
        "ClusterRoleBinding",
        "kind: Group\n  name: system:serviceaccounts\n  apiGroup: rbac.authorization.k8s.io",
    );
    let dir = temp_tree(&[("x.yaml", &format!("{forged}---\n{grp}"))]);
    let p = path_str(&dir.path().join("x.yaml"));
    let out = run(&["validate", "-o", "json", &p], "");
    out.code(1);
    let v: Value = serde_json::from_str(&out.stdout).expect("JSON report");
    assert_eq!(v["apiVersion"], "fn.nvcf.io/v1alpha1");
    assert_eq!(v["kind"], "ValidationReport");
    assert_eq!(v["files"], 1);
    assert_eq!(v["errors"], 1);
    assert_eq!(v["warnings"], 1);
    let f = v["findings"].as_array().unwrap();
    assert_eq!(f.len(), 2);
    assert_eq!(f[0]["severity"], "error");
    assert_eq!(f[0]["rule"], "NVW101");
    assert_eq!(f[0]["file"], p.as_str());
    assert_eq!(f[0]["index"], 0);
    assert_eq!(f[0]["line"], 17);
    assert_eq!(f[0]["field"], "spec.template.spec.serviceAccountName");
    assert_eq!(f[0]["resource"]["name"], "d");
    assert_eq!(f[1]["severity"], "warning");
    assert_eq!(f[1]["rule"], "NVW103");
    assert_eq!(f[1]["index"], 1);
    // Clean: exit 0, empty findings.
    let out = run(
        &["validate", "-o", "json", "-"],
        &SIMPLE_POD.replace("containers", "x"),
    );
    out.ok();
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["errors"], 0);
    assert_eq!(v["findings"], serde_json::json!([]));
}

#[test]
fn usage_and_unreadable_files_exit_2() {
    let out = run(&["validate", "--no-such-flag", "x.yaml"], "");
    out.code(2);
    let out = run(&["validate", "/definitely/not/here.yaml"], "");
    out.code(2);
    assert!(out.stderr.contains("/definitely/not/here.yaml"), "{out}");
    let out = run(&["validate", "-o", "xml", "-"], "");
    out.code(2);
}

#[test]
fn only_the_exact_transformer_output_is_exempt() {
    let one = inject(&workload("Deployment", "web", "ns", true, SIMPLE_POD), &[]);
    one.ok();
    validate_stdin(&one.stdout).ok();
    let rejected = |stream: &str, needle: &str| {
        let v = validate_stdin(stream);
        v.code(1);
        assert!(v.stdout.contains("error NVW101"), "{v}");
        assert!(v.stdout.contains(needle), "{needle}\n{v}");
        for cfg in validate_cfgs() {
            let k = krm(&resource_list(stream, &cfg));
            k.code(1);
            assert!(has_result(&k, "NVW101"), "{k}");
        }
    };
    // A StatefulSet of the same name borrowing the Deployment's identity.
    let trio = injected_trio("Deployment", "web", Some("ns"));
    let borrowed = one
        .stdout
        .replacen("kind: Deployment", "kind: StatefulSet", 1);
    rejected(
        &borrowed,
        "marked for apps/v1 Deployment/web, not this StatefulSet",
    );
    // A 136-year token, another path, or a token volume without its mount.
    let long = one
        .stdout
        .replace("expirationSeconds: 900", "expirationSeconds: 4294967296");
    assert_ne!(long, one.stdout);
    rejected(&long, "not the contract's projected token");
    let path = one.stdout.replace("path: token", "path: tok");
    assert_ne!(path, one.stdout);
    rejected(&path, "not the contract's projected token");
    let unmounted = one.stdout.replace(
        "          mountPath: /var/run/secrets/tokens\n",
        "          mountPath: /data\n",
    );
    assert_ne!(unmounted, one.stdout);
    rejected(&unmounted, "mounted otherwise");
    // A pod with a hand-written trio (no marks) and the right-looking spec.
    let unmarked = one.stdout.replace(
        "    app.kubernetes.io/managed-by: kubectl-nvcf-worker\n",
        "",
    );
    assert_ne!(unmarked, one.stdout);
    let v = validate_stdin(&unmarked);
    v.code(1);
    assert!(
        v.stdout.contains("error NVW101") && v.stdout.contains("error NVW109"),
        "{v}"
    );
    // The same trio declared in another file of the run is still exact.
    let dir = temp_tree(&[("a.yaml", &split_docs(&one.stdout)[0]), ("b.yaml", &trio)]);
    run(&["validate", &path_str(dir.path())], "").ok();
}

#[test]
fn a_long_names_hashed_identity_cannot_be_taken_by_a_short_name() {
    let long = "a".repeat(250);
    let hashed = {
        let out = inject(&workload("Deployment", &long, "ns", true, SIMPLE_POD), &[]);
        out.ok();
        objects(&out.stdout)
            .iter()
            .find(|o| o["kind"] == "ServiceAccount")
            .unwrap()["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let short = hashed.strip_prefix("nvcf-worker-").unwrap();
    let stream = [
        workload("Deployment", &long, "ns", true, SIMPLE_POD),
        workload("Job", short, "ns", true, SIMPLE_POD),
    ]
    .join("---\n");
    let out = inject(&stream, &[]);
    out.code(1);
    assert!(out.stdout.is_empty());
    assert!(out.stderr.contains("error NVW113"), "{out}");
    // Each injected on its own, then validated together: the trios collide.
    let a = inject(&workload("Deployment", &long, "ns", true, SIMPLE_POD), &[]);
    let b = inject(&workload("Job", short, "ns", true, SIMPLE_POD), &[]);
    let v = validate_stdin(&format!("{}---\n{}", a.stdout, b.stdout));
    v.code(1);
    assert!(v.stdout.contains("error NVW113"), "{v}");
}
