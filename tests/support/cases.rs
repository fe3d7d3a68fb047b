//! The guard's cases: for every rule a manifest that must be rejected and a close
//! look-alike that must pass. `tests/guard_rules.rs` runs them through the manifest
//! faces one by one; `tests/faces.rs` holds every face, the cluster's included, to
//! the same verdict on them.

use super::*;

pub struct Case {
    pub what: &'static str,
    pub rule: &'static str,
    /// "error" or "warning".
    pub severity: &'static str,
    pub bad: String,
    /// `Kind/namespace/name field.path` the finding must end with.
    pub context: String,
    pub good: String,
}

pub fn rbac(kind: &str, name: &str, ns: Option<&str>, body: &str) -> String {
    let ns = ns.map_or(String::new(), |n| format!("  namespace: {n}\n"));
    format!("apiVersion: rbac.authorization.k8s.io/v1\nkind: {kind}\nmetadata:\n  name: {name}\n{ns}{body}")
}

pub fn binding(kind: &str, subject: &str) -> String {
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

pub fn role_with(kind: &str, name: &str, rules: &str) -> String {
    let ns = (kind == "Role").then_some("ns");
    let sep = if rules.starts_with('[') { " " } else { "\n" };
    rbac(kind, name, ns, &format!("rules:{sep}{rules}"))
}

/// The transformer's marks for `Deployment/<workload>` as metadata lines.
pub fn marks(workload: &str) -> String {
    format!("  labels:\n    app.kubernetes.io/managed-by: kubectl-nvcf-worker\n    nvcf.io/identity-origin: manifest\n  annotations:\n    nvcf.io/workload: Deployment/{workload}\n    nvcf.io/workload-api-version: apps/v1\n")
}

pub fn service_account(name: &str, meta: &str) -> String {
    format!("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {name}\n  namespace: ns\n{meta}automountServiceAccountToken: false\n")
}

/// The trio `inject --naming per-workload` writes for a selected workload
/// (`nvcf-worker-<name>`, marked for it), without the workload.
pub fn injected_trio(kind: &str, name: &str, ns: Option<&str>) -> String {
    let w = workload(kind, name, ns.unwrap_or(""), true, SIMPLE_POD);
    let w = if ns.is_none() {
        w.replace("  namespace: \n", "")
    } else {
        w
    };
    let out = inject_per_workload(&w, &[]);
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

pub fn token_secret(sa: &str, ty: &str) -> String {
    format!("apiVersion: v1\nkind: Secret\nmetadata:\n  name: tok\n  namespace: ns\n  annotations:\n    kubernetes.io/service-account.name: {sa}\ntype: {ty}\n")
}

pub fn pod_with(spec_head: &str) -> String {
    workload("Pod", "p", "ns", false, &format!("{spec_head}{SIMPLE_POD}"))
}

pub fn cases() -> Vec<Case> {
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
            "aggregationRule:\n  clusterRoleSelectors:\n  - matchLabels: {x: z}\nrules: []\n",
        ),
        context: "ClusterRole/nvcf-worker-agg rules)".into(),
        good: rbac(
            "ClusterRole",
            "worker-agg",
            None,
            "aggregationRule:\n  clusterRoleSelectors:\n  - matchLabels: {x: z}\nrules: []\n",
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
    // The Job a CronJob's controller makes carries jobTemplate.metadata, and a
    // controller-made Job is exempt in the cluster: the claim is judged on the CronJob.
    let cron = |key: &str| {
        format!("apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: nightly\n  namespace: ns\nspec:\n  schedule: \"0 3 * * *\"\n  jobTemplate:\n    metadata:\n      annotations:\n        {key}: \"true\"\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers:\n          - name: app\n            image: x\n")
    };
    v.push(Case {
        what: "infra annotation on a CronJob's job template",
        rule: "NVW108",
        severity: "error",
        bad: cron("nvca.nvcf.nvidia.io/nvca-infra-object"),
        context: "CronJob/ns/nightly spec.jobTemplate.metadata.annotations.nvca.nvcf.nvidia.io/nvca-infra-object)".into(),
        good: cron("nvca.nvcf.nvidia.io/function-id"),
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
pub fn injected(kind: &str, name: &str, pod_spec: &str) -> String {
    let out = inject(&workload(kind, name, "ns", true, pod_spec), &[]);
    out.ok();
    out.stdout
}

/// NVW115-NVW117: the rest of a worker pod's token surface, and the record.
pub fn token_surface_cases() -> Vec<Case> {
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
