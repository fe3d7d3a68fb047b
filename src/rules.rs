//! The rule catalogue: every rule the tool enforces, once. The guard, KRM
//! results, SARIF, `audit`, the admission policy and README's rule table all draw
//! their ids, severities, texts and where each rule is enforced from here; tests
//! hold the copies that must exist (README, the policy's messages) to it.

use crate::report::Severity;

pub const DECODE: &str = "NVW001";
pub const POD_SPEC_ACCOUNT: &str = "NVW101";
pub const BINDING_TO_WORKER: &str = "NVW102";
pub const GROUP_INCLUDES_WORKERS: &str = "NVW103";
pub const WORKER_ROLE_RULES: &str = "NVW104";
pub const TOKEN_MINT_OR_IMPERSONATE: &str = "NVW105";
pub const WORKER_TOKEN_SECRET: &str = "NVW106";
pub const LOOKALIKE_KEY: &str = "NVW107";
pub const INFRA_ANNOTATION: &str = "NVW108";
pub const HAND_WRITTEN_IDENTITY: &str = "NVW109";
pub const ACCOUNT_REFERENCE: &str = "NVW110";
pub const ICMS_AUDIENCE: &str = "NVW111";
pub const RENAMED: &str = "NVW112";
pub const IDENTITY_COLLISION: &str = "NVW113";
pub const MINT_FOR_WORKER: &str = "NVW114";
pub const EXTRA_TOKEN: &str = "NVW115";
pub const REPLACED_RECORD: &str = "NVW116";
pub const EPHEMERAL_CONTAINER: &str = "NVW117";
pub const TOKEN_AUDIENCE: &str = "NVW201";
pub const TOKEN_EXPIRATION: &str = "NVW202";
pub const AUTOMOUNT: &str = "NVW203";
pub const WORKER_ENV: &str = "NVW204";
pub const MANIFEST_IDENTITY_IN_AGENT_NAMESPACE: &str = "NVW205";

/// Where a rule can be enforced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Where {
    /// Offline, on manifests: `validate`, the KRM validator, the check inside
    /// `inject`, `uninject` and prune, the kustomize plugin.
    Manifest,
    /// In the cluster: the ValidatingAdmissionPolicy `policy` prints.
    Admission,
    /// On live objects: `audit`.
    Audit,
}

pub const EVERYWHERE: [Where; 3] = [Where::Manifest, Where::Admission, Where::Audit];

impl Where {
    pub fn name(self) -> &'static str {
        match self {
            Where::Manifest => "manifest",
            Where::Admission => "admission",
            Where::Audit => "audit",
        }
    }
}

/// One rule.
pub struct Rule {
    pub id: &'static str,
    /// PascalCase, as SARIF's `reportingDescriptor.name` suggests.
    pub name: &'static str,
    pub severity: Severity,
    /// One line: what the rule refuses.
    pub short: &'static str,
    pub full: &'static str,
    /// What to do instead.
    pub help: &'static str,
    /// What of an object the rule reads.
    pub reads: &'static str,
    /// Where it is enforced.
    pub at: &'static [Where],
    /// Where it is not, and why (every `Where` is in `at` or here, once).
    pub not_at: &'static [(Where, &'static str)],
}

impl Rule {
    pub fn enforced(&self, w: Where) -> bool {
        self.at.contains(&w)
    }
}

/// The rule of `id`. Panics on an id not in the catalogue: ids are constants.
pub fn get(id: &str) -> &'static Rule {
    RULES
        .iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("rule {id} is not in the catalogue"))
}

/// The ids of the rules enforced (or not) at `w`.
pub fn ids_at(w: Where, enforced: bool) -> impl Iterator<Item = &'static str> {
    RULES
        .iter()
        .filter(move |r| r.enforced(w) == enforced)
        .map(|r| r.id)
}

/// Every rule, in id order.
pub const RULES: &[Rule] = &[
    Rule {
        id: DECODE,
        name: "DecodesAsKubectlDecodes",
        severity: Severity::Error,
        short: "Input does not decode the way kubectl decodes it",
        full: "Invalid YAML, duplicate keys, a key set both before and by a merge key, or a document that is not a Kubernetes object. kubectl's strict decoding rejects these, and lenient decoders resolve them differently, which can hide a value from review.",
        help: "Fix the YAML so that every document is one object with unique keys. A Helm chart's templates/ must be rendered first (helm template CHART), and the rendered output checked.",
        reads: "not a rule of objects: the file or document",
        at: &[Where::Manifest],
        not_at: &[(Where::Admission, "the API server decodes a request before admission: input it cannot decode never reaches a policy"), (Where::Audit, "live objects were decoded by the API server")],
    },
    Rule {
        id: POD_SPEC_ACCOUNT,
        name: "ForgedWorkerServiceAccount",
        severity: Severity::Error,
        short: "A pod spec runs as an NVCF worker account it does not own",
        full: "A pod spec (in any workload kind, List item or custom resource) sets serviceAccountName or serviceAccount to nvcf-worker-*. Worker accounts belong to the worker identity that NVCA or the transformer derives for one workload; another pod using one would act as that worker. In the exemption, mount paths are read as the kubelet resolves them (relative against /, empty and . segments dropped); a path with a .. segment counts as possibly the token directory and never as the token's own mount, because the admission policies' CEL cannot resolve .., and every face must give the same verdict.",
        help: "Use another service account, or let `kubectl nvcf-worker inject` (or the KRM function) give the workload its own identity together with its ServiceAccount, Role and RoleBinding.",
        reads: "pod specs: serviceAccountName, serviceAccount; the exemption reads the trio and the token surface",
        at: &[Where::Manifest, Where::Admission, Where::Audit],
        not_at: &[],
    },
    Rule {
        id: BINDING_TO_WORKER,
        name: "BindingToWorkerAccount",
        severity: Severity::Error,
        short: "A RoleBinding or ClusterRoleBinding grants to an NVCF worker account",
        full: "Worker identities are deny-by-default: the only binding to a nvcf-worker-* ServiceAccount (or the user system:serviceaccount:<ns>:nvcf-worker-*) is the transformer's own binding to its empty Role.",
        help: "Remove the subject, or grant the permission to an account that is not a worker identity.",
        reads: "RoleBinding and ClusterRoleBinding subjects",
        at: &[Where::Manifest, Where::Admission, Where::Audit],
        not_at: &[],
    },
    Rule {
        id: GROUP_INCLUDES_WORKERS,
        name: "BindingToGroupOfWorkers",
        severity: Severity::Warning,
        short: "A binding grants to a group that contains every worker account",
        full: "system:serviceaccounts, system:serviceaccounts:<namespace> and system:authenticated contain the worker accounts too, so whatever the binding grants, every worker gets.",
        help: "Bind to the accounts that need the permission by name instead of to the group.",
        reads: "RoleBinding and ClusterRoleBinding subjects",
        at: &[Where::Manifest, Where::Audit],
        not_at: &[(Where::Admission, "a warning: a policy validation refuses or admits, it has no per-rule warning")],
    },
    Rule {
        id: WORKER_ROLE_RULES,
        name: "WorkerRoleWithRules",
        severity: Severity::Error,
        short: "An NVCF worker Role or ClusterRole has rules",
        full: "The Role of a worker identity is empty by contract (deny by default); rules or an aggregation rule on a nvcf-worker-* Role or ClusterRole widen every worker bound to it.",
        help: "Leave the worker Role with `rules: []`; give permissions to a different account.",
        reads: "Role and ClusterRole rules and aggregationRule",
        at: &[Where::Manifest, Where::Admission, Where::Audit],
        not_at: &[],
    },
    Rule {
        id: TOKEN_MINT_OR_IMPERSONATE,
        name: "TokenMintOrImpersonate",
        severity: Severity::Warning,
        short: "A rule can mint service-account tokens or impersonate",
        full: "create on serviceaccounts/token, or impersonate on serviceaccounts or users (wildcards included), lets the holder obtain a worker's token without being the worker.",
        help: "Narrow the rule with resourceNames to accounts that are not worker identities, or drop the verb.",
        reads: "Role and ClusterRole rules",
        at: &[Where::Manifest, Where::Audit],
        not_at: &[(Where::Admission, "a warning: a policy validation refuses or admits, it has no per-rule warning")],
    },
    Rule {
        id: WORKER_TOKEN_SECRET,
        name: "LongLivedWorkerToken",
        severity: Severity::Error,
        short: "A long-lived token Secret for an NVCF worker account",
        full: "A kubernetes.io/service-account-token Secret for a nvcf-worker-* account holds a token that never expires; worker identities use projected tokens of at most a day.",
        help: "Delete the Secret; workers read their projected token from /var/run/secrets/tokens/token.",
        reads: "Secret type and kubernetes.io/service-account.name",
        at: &[Where::Manifest, Where::Admission, Where::Audit],
        not_at: &[],
    },
    Rule {
        id: LOOKALIKE_KEY,
        name: "LookAlikeAccountKey",
        severity: Severity::Error,
        short: "A key looks like serviceAccountName or serviceAccount but is not",
        full: "Spaces, a different case, zero-width or look-alike Unicode characters make a key that a reviewer reads as serviceAccountName while Kubernetes ignores or reads it differently.",
        help: "Write the key exactly as `serviceAccountName` (or remove it).",
        reads: "keys of pod specs",
        at: &[Where::Manifest],
        not_at: &[(Where::Admission, "the API server drops or refuses unknown keys before admission: there is no look-alike key left to see"), (Where::Audit, "the API server dropped or refused unknown keys when it stored the object")],
    },
    Rule {
        id: INFRA_ANNOTATION,
        name: "AgentInfraAnnotation",
        severity: Severity::Error,
        short: "An object or pod template carries the NVCF agent's infra annotation",
        full: "The agent registers with ICMS only pods that carry nvca.nvcf.nvidia.io/nvca-infra-object and run as a worker account, and rejects workload objects that carry it: an object written with it claims to be the agent's.",
        help: "Remove the annotation; only the agent sets it on its own objects.",
        reads: "metadata.annotations of objects and pod templates",
        at: &[Where::Manifest, Where::Admission],
        not_at: &[(Where::Audit, "live, the agent writes its annotation on its own objects")],
    },
    Rule {
        id: HAND_WRITTEN_IDENTITY,
        name: "HandWrittenWorkerIdentity",
        severity: Severity::Error,
        short: "A ServiceAccount, Role or RoleBinding uses a reserved worker identity name",
        full: "nvcf-worker and nvcf-worker-* ServiceAccounts, Roles and RoleBindings are made by the NVCF agent, or by the transformer with its marks and exact shape; a hand-written one could stand in for a worker identity.",
        help: "Pick another name, or let `kubectl nvcf-worker inject` generate the identity.",
        reads: "ServiceAccount, Role, RoleBinding names, marks and shape",
        at: &[Where::Manifest, Where::Admission],
        not_at: &[(Where::Audit, "live, the agent writes its own identity objects without the transformer's marks")],
    },
    Rule {
        id: ACCOUNT_REFERENCE,
        name: "WorkerAccountReference",
        severity: Severity::Error,
        short: "A serviceAccountRef or serviceAccount mapping names an NVCF worker account",
        full: "Whatever reads such a reference (a chart, an operator, a secret store) would act as the worker.",
        help: "Reference another ServiceAccount.",
        reads: "serviceAccountRef and serviceAccount mappings anywhere",
        at: &[Where::Manifest, Where::Audit],
        not_at: &[(Where::Admission, "it walks custom resources of any shape; the policy matches only built-in kinds, none of which has such a reference")],
    },
    Rule {
        id: ICMS_AUDIENCE,
        name: "IcmsAudienceForNonWorker",
        severity: Severity::Warning,
        short: "An nvcf-icms: token is projected for an account that is not a worker",
        full: "ICMS accepts tokens only from worker identities the agent registered; a token with its audience for another account is either a mistake or an attempt.",
        help: "Drop the volume, or give the workload its worker identity with `kubectl nvcf-worker inject`.",
        reads: "projected token audiences of pod specs",
        at: &[Where::Manifest, Where::Audit],
        not_at: &[(Where::Admission, "a warning: a policy validation refuses or admits, it has no per-rule warning")],
    },
    Rule {
        id: RENAMED,
        name: "WorkerIdentityRenamed",
        severity: Severity::Error,
        short: "A worker identity was renamed after the transformer ran",
        full: "A namePrefix or nameSuffix in a later kustomization renames the identity and its workload; ICMS does not accept a worker under the new name.",
        help: "Run the transformer in the overlay that sets the final names.",
        reads: "the trio's marks against its names; pod specs with the token but another account",
        at: &[Where::Manifest, Where::Audit],
        not_at: &[(Where::Admission, "it compares an object with its trio: a policy sees one object at a time")],
    },
    Rule {
        id: IDENTITY_COLLISION,
        name: "WorkerIdentityCollision",
        severity: Severity::Error,
        short: "Two workloads' identities share one name in one namespace",
        full: "One ServiceAccount cannot be the identity of two workloads; names that differ only in kind, or a long name's shortened form, can derive the same identity.",
        help: "Rename one workload.",
        reads: "ServiceAccounts across the input",
        at: &[Where::Manifest, Where::Audit],
        not_at: &[(Where::Admission, "it compares objects with each other: a policy sees one object at a time")],
    },
    Rule {
        id: MINT_FOR_WORKER,
        name: "TokenForWorkerAccount",
        severity: Severity::Error,
        short: "A rule mints tokens for, or impersonates, a named worker account",
        full: "create on serviceaccounts/token or impersonate with resourceNames naming a worker account lets the holder obtain that worker's token without being the worker.",
        help: "Drop the rule, or name accounts that are not worker identities.",
        reads: "Role and ClusterRole rules; at admission also TokenRequests (serviceaccounts/token)",
        at: &[Where::Manifest, Where::Admission, Where::Audit],
        not_at: &[],
    },
    Rule {
        id: EXTRA_TOKEN,
        name: "ExtraWorkerTokenSource",
        severity: Severity::Error,
        short: "A worker pod spec gets a token for its account beyond the contract's one",
        full: "A pod running as a worker account may hold exactly one token for it: the contract's projected volume (audience nvcf-icms:<cluster>, 600..86400 s, path token). Another projected serviceAccountToken source (a long-lived nvcf-icms: token, or an API-audience token) hands the worker pod a second credential the contract does not allow.",
        help: "Remove the other serviceAccountToken projection; the worker reads its token from /var/run/secrets/tokens/token.",
        reads: "every volume's projected serviceAccountToken sources in a pod spec that runs as a worker account",
        at: &[Where::Manifest, Where::Admission, Where::Audit],
        not_at: &[],
    },
    Rule {
        id: REPLACED_RECORD,
        name: "ReplacedRecordNotTheTransformers",
        severity: Severity::Error,
        short: "The nvcf.io/replaced record is not one inject writes",
        full: "uninject and prune restore what nvcf.io/replaced records. A record with other keys, a reserved account, a non-boolean automount, or on a workload that is not the transformer's exact output would make uninject write a forged identity.",
        help: "Remove the annotation (inject writes its own), or restore the workload by hand.",
        reads: "the nvcf.io/replaced annotation of any object, and whether its workload is the transformer's exact output",
        at: &[Where::Manifest],
        not_at: &[
            (Where::Admission, "only uninject and prune read the record, offline; the cluster never acts on it"),
            (Where::Audit, "only uninject and prune read the record, offline; the cluster never acts on it"),
        ],
    },
    Rule {
        id: EPHEMERAL_CONTAINER,
        name: "EphemeralContainerInWorkerPod",
        severity: Severity::Error,
        short: "An ephemeral container in a pod that runs as an NVCF worker account",
        full: "An ephemeral (debug) container joins the pod's volumes and account: added to a worker pod it can read the worker's token. The transformer and the agent never add one.",
        help: "Debug a copy of the pod under another account (kubectl debug --copy-to), not the worker pod itself.",
        reads: "spec.ephemeralContainers of pods that run as a worker account; at admission the pods/ephemeralcontainers subresource",
        at: &[Where::Manifest, Where::Admission, Where::Audit],
        not_at: &[],
    },
    Rule {
        id: TOKEN_AUDIENCE,
        name: "WorkerTokenAudience",
        severity: Severity::Error,
        short: "A running worker pod has no projected token of the ICMS audience",
        full: "A pod that runs as a worker account must project a service account token with audience nvcf-icms:<cluster-id>.",
        help: "Give the workload its identity with `kubectl nvcf-worker inject`, with the cluster's ID.",
        reads: "a live pod's projected serviceAccountToken audiences",
        at: &[Where::Audit],
        not_at: LIVE_ONLY,
    },
    Rule {
        id: TOKEN_EXPIRATION,
        name: "WorkerTokenExpiration",
        severity: Severity::Error,
        short: "A running worker pod's token lifetime is outside 600..86400 s",
        full: "The projected token's expirationSeconds must be set and within the range Kubernetes and the agent accept.",
        help: "Set expirationSeconds within 600..86400 (default 900).",
        reads: "a live pod's projected serviceAccountToken expirationSeconds",
        at: &[Where::Audit],
        not_at: LIVE_ONLY,
    },
    Rule {
        id: AUTOMOUNT,
        name: "WorkerTokenAutomounted",
        severity: Severity::Error,
        short: "A running worker pod automounts the legacy service account token",
        full: "automountServiceAccountToken must be false on the pod (or unset there and false on its ServiceAccount): the worker holds only its projected token.",
        help: "Set automountServiceAccountToken: false.",
        reads: "a live pod's and its ServiceAccount's automountServiceAccountToken",
        at: &[Where::Audit],
        not_at: LIVE_ONLY,
    },
    Rule {
        id: WORKER_ENV,
        name: "WorkerEnv",
        severity: Severity::Error,
        short: "A running worker pod's container lacks the contract's env",
        full: "Every container not named in nvcf.io/skip-containers needs NVCF_TOKEN_FILE_PATH=/var/run/secrets/tokens/token and NVCF_IDENTITY_SOURCE=psat.",
        help: "Give the workload its identity with `kubectl nvcf-worker inject`.",
        reads: "a live pod's container env",
        at: &[Where::Audit],
        not_at: LIVE_ONLY,
    },
    Rule {
        id: MANIFEST_IDENTITY_IN_AGENT_NAMESPACE,
        name: "ManifestIdentityInAgentNamespace",
        severity: Severity::Error,
        short: "A manifest-declared worker identity in a namespace the agent provisions itself",
        full: "A namespace whose workload-instance-type label the agent set to miniservice is a MiniService's, made by the agent: its reconciler creates the worker ServiceAccount and resets the worker Role and RoleBinding, its webhook rejects reserved names in the charts it applies, and it registers with ICMS only the pods it made. An identity declared there with `inject` fights the reconciler and gets no token ICMS accepts. With several NVCF control planes the namespace is the agent's of the plane its nvcf.nvidia.com/control-plane-owner label names (none: the legacy plane), and the finding names that plane.",
        help: "Remove the manifest-declared ServiceAccount, Role and RoleBinding (uninject the workload) and let the agent provision the namespace's nvcf-worker.",
        reads: "the trio's origin label and its live Namespace's labels",
        at: &[Where::Audit],
        not_at: &[
            (Where::Manifest, "a manifest does not say which namespaces the agent provisions: the label is on the live Namespace, which the agent makes"),
            (Where::Admission, "the agent's own webhook already rejects reserved names in the charts it applies to these namespaces; audit finds identities that reached one by other means"),
        ],
    },
];

/// Why the checks of a running worker pod are audit's alone.
const LIVE_ONLY: &[(Where, &str)] = &[
    (Where::Manifest, "in a manifest these are part of NVW101's exemption: a pod spec is the transformer's exact output or refused"),
    (Where::Admission, "at admission these are part of NVW101's exemption, as in a manifest"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_says_for_every_face_whether_and_why_not() {
        let mut ids: Vec<&str> = RULES.iter().map(|r| r.id).collect();
        let sorted = {
            let mut s = ids.clone();
            s.sort();
            s
        };
        assert_eq!(ids, sorted, "RULES in id order");
        ids.dedup();
        assert_eq!(ids.len(), RULES.len(), "unique ids");
        for r in RULES {
            for w in EVERYWHERE {
                let why = r.not_at.iter().filter(|(x, _)| *x == w).count();
                assert_eq!(
                    usize::from(r.enforced(w)) + why,
                    1,
                    "{} must be enforced at {} or say why not, once",
                    r.id,
                    w.name()
                );
            }
            assert!(r.not_at.iter().all(|(_, why)| !why.is_empty()));
            assert!(!r.short.is_empty() && !r.help.is_empty() && !r.reads.is_empty());
        }
    }

    #[test]
    fn readmes_rule_table_is_the_catalogue() {
        let readme = include_str!("../README.md");
        let rows: Vec<(String, String, String)> = readme
            .lines()
            .skip_while(|l| !l.starts_with("| rule | severity | enforced in |"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                let cells: Vec<&str> = l.split(" | ").collect();
                (
                    cells[0].trim_start_matches("| ").to_string(),
                    cells[1].to_string(),
                    cells[2].to_string(),
                )
            })
            .collect();
        let want: Vec<(String, String, String)> = RULES
            .iter()
            .map(|r| {
                let at: Vec<&str> = r.at.iter().map(|w| w.name()).collect();
                (r.id.to_string(), r.severity.to_string(), at.join(", "))
            })
            .collect();
        assert_eq!(
            rows, want,
            "README's table (id, severity, enforced in) must be the catalogue's"
        );
    }
}
