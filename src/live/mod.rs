//! The live commands: `list`, `cleanup`, `audit` and `describe` against a cluster.
//! kubectl hands plugin flags through untouched, so the usual connection flags
//! (`--kubeconfig`, `--context`, `-n`, `-A`, `--request-timeout`) are parsed here.

pub mod audit;
pub mod cleanup;
pub mod client;
pub mod describe;
pub mod events;
pub mod executor;
pub mod in_use;
pub mod inventory;
pub mod list;
pub mod namespaces;
pub mod planes;
pub mod reports;
pub mod wire;
pub use crate::output;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::error::{Error, Result};
use crate::selector::Selector;
use client::{Kube, Scope};
use inventory::{Identity, ListedObject, Owners, StateOptions};

/// kubectl's connection flags, with kubectl's names and meanings: the kubeconfig
/// (or in-cluster config) is read first and each flag given overrides its part.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ConnectionArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The kubeconfig cluster to use.
    #[arg(long, value_name = "NAME")]
    pub cluster: Option<String>,
    /// The kubeconfig user to use.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// The address of the Kubernetes API server.
    #[arg(short = 's', long, value_name = "URL")]
    pub server: Option<String>,
    /// Bearer token for the API server; replaces the kubeconfig user's token (a client certificate still wins at the server, as with kubectl).
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME).
    #[arg(long = "as", value_name = "USER")]
    pub as_user: Option<String>,
    /// Group to impersonate; repeatable.
    #[arg(long = "as-group", value_name = "GROUP")]
    pub as_group: Vec<String>,
    /// Path to a CA certificate file for the API server's certificate.
    #[arg(long = "certificate-authority", value_name = "FILE")]
    pub certificate_authority: Option<PathBuf>,
    /// Do not check the server's certificate (insecure).
    #[arg(long = "insecure-skip-tls-verify", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", require_equals = true, default_value = "false")]
    pub insecure_skip_tls_verify: bool,
    /// Namespace (default: the context's namespace).
    #[arg(short = 'n', long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Time limit for each request: 30s, 1m, or plain seconds; 0 waits forever.
    #[arg(long = "request-timeout", value_name = "DURATION", default_value = "0", value_parser = cleanup::parse_duration)]
    pub request_timeout: Duration,
    /// Objects per list page (the API's `limit`).
    #[arg(long = "chunk-size", value_name = "N", default_value_t = 500)]
    pub chunk_size: u32,
}

/// `-A`: for the commands that can span namespaces (not `describe`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ScopeArgs {
    /// Every namespace (one list per kind across the cluster).
    #[arg(short = 'A', long = "all-namespaces")]
    pub all_namespaces: bool,
}

/// What decides an identity's state; shared by list (to preview) and cleanup.
#[derive(clap::Args, Debug, Clone)]
pub struct StateArgs {
    /// Identities with any object younger than this are never taken (the agent may be mid-provisioning).
    #[arg(long = "min-age", value_name = "DURATION", default_value = "10m", value_parser = cleanup::parse_duration)]
    pub min_age: Duration,
    /// Count pods in phase Succeeded or Failed as gone.
    #[arg(long = "include-terminated")]
    pub include_terminated: bool,
}

impl StateArgs {
    pub fn options(&self) -> StateOptions {
        StateOptions {
            min_age: self.min_age,
            include_terminated: self.include_terminated,
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    pub connection: ConnectionArgs,
    #[command(flatten)]
    pub scope: ScopeArgs,
    #[command(flatten)]
    pub planes: crate::controlplane::PlaneArgs,
    /// Only identities with a ServiceAccount, Role or RoleBinding whose labels match (`key=value,key!=value,key in (a,b),key,!key`).
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
    #[command(flatten)]
    pub state: StateArgs,
    #[command(flatten)]
    pub print: output::forms::PrintArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DryRun {
    /// Delete for real (still only with --yes).
    None,
    /// Print the plan only (the default without --yes).
    Client,
    /// Send every delete with dryRun=All: the server checks, nothing is deleted.
    Server,
}

#[derive(clap::Args, Debug)]
pub struct CleanupArgs {
    #[command(flatten)]
    pub connection: ConnectionArgs,
    #[command(flatten)]
    pub scope: ScopeArgs,
    #[command(flatten)]
    pub planes: crate::controlplane::PlaneArgs,
    /// Only identities with a ServiceAccount, Role or RoleBinding whose labels match; the others are neither deleted nor reported.
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
    #[command(flatten)]
    pub state: StateArgs,
    /// Delete. Without it the plan is printed and nothing is deleted.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// `server`: send the deletes with dryRun=All; `client`: print the plan only.
    #[arg(long = "dry-run", value_enum, value_name = "MODE", default_value = "none", num_args = 0..=1, default_missing_value = "client", require_equals = true)]
    pub dry_run: DryRun,
    /// `-o json|yaml`: a versioned report.nvcf.io/v1alpha1 CleanupPlan (nothing deleted) or CleanupResult; the plan also prints as name, jsonpath and custom-columns.
    #[command(flatten)]
    pub print: output::forms::PrintArgs,
    /// Record an events.k8s.io Event on each identity's ServiceAccount for what was deleted or skipped and why (never with --dry-run); =false to record none.
    #[arg(long = "record-events", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", require_equals = true, default_value = "true", action = clap::ArgAction::Set)]
    pub record_events: bool,
}

#[derive(clap::Args, Debug)]
pub struct AuditArgs {
    #[command(flatten)]
    pub connection: ConnectionArgs,
    #[command(flatten)]
    pub scope: ScopeArgs,
    #[command(flatten)]
    pub planes: crate::controlplane::PlaneArgs,
    /// The NVCF cluster ID: token audiences must be nvcf-icms:<ID>.
    #[arg(long = "cluster-id", value_name = "ID")]
    pub cluster_id: Option<String>,
    /// Only the objects whose labels match (`key=value,key!=value,key in (a,b),key,!key`): the others are read, as context, but neither counted nor reported.
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// `-o json|yaml`: a versioned report.nvcf.io/v1alpha1 AuditReport instead of text lines; `-o policyreport`: the findings as policy reports.
    #[command(flatten)]
    pub print: output::forms::PrintArgs,
    /// Server-side apply the findings as policy reports (one per namespace with findings, one cluster-scoped), delete ours whose findings are gone; exits 0 once applied.
    #[arg(long = "apply-reports")]
    pub apply_reports: bool,
    /// The policy report API: wgpolicyk8s.io/v1alpha2 PolicyReport, or openreports.io/v1alpha1 Report.
    #[arg(
        long = "report-api",
        value_enum,
        value_name = "API",
        default_value = "wgpolicyk8s"
    )]
    pub report_api: reports::ReportApi,
}

#[derive(clap::Args, Debug)]
pub struct DescribeArgs {
    /// The pod whose worker identity to show: NAME or pod/NAME.
    #[arg(value_name = "POD", value_parser = parse_pod_name)]
    pub pod: String,
    #[command(flatten)]
    pub connection: ConnectionArgs,
    #[command(flatten)]
    pub planes: crate::controlplane::PlaneArgs,
    /// The NVCF cluster ID: the token's audience must be nvcf-icms:<ID> (without it, the audience found is reported).
    #[arg(long = "cluster-id", value_name = "ID")]
    pub cluster_id: Option<String>,
    /// `-o json|yaml`: a versioned report.nvcf.io/v1alpha1 WorkerVerdict instead of the condition lines and the agent's WorkerAuth JSON.
    #[command(flatten)]
    pub print: output::forms::PrintArgs,
}

/// `NAME`, or kubectl's `TYPE/NAME` for a pod (`pod/`, `pods/`, `po/`, `pods.v1/`...).
fn parse_pod_name(text: &str) -> std::result::Result<String, String> {
    let name = match text.split_once('/') {
        None => text,
        Some((kind, name)) => {
            let resource = kind.split('.').next().unwrap_or(kind);
            let rest: Vec<&str> = kind.split('.').skip(1).collect();
            let core = rest.is_empty() || rest == ["v1"] || rest == ["v1", ""];
            if !(matches!(
                resource.to_ascii_lowercase().as_str(),
                "pod" | "pods" | "po"
            ) && core)
            {
                return Err(format!(
                    "{text:?}: describe shows a pod's worker identity; give NAME or pod/NAME, not {kind}"
                ));
            }
            name
        }
    };
    if name.is_empty() || name.contains('/') {
        return Err(format!("{text:?}: expected NAME or pod/NAME"));
    }
    Ok(name.to_string())
}

/// Runs a live command on its own runtime: only these commands need one.
fn block_on<T>(work: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::io("tokio runtime", e))?
        .block_on(work)
}

/// A kubeconfig problem, by its first line only: kube's YAML errors go on to quote
/// the lines around the fault, and a kubeconfig's lines hold tokens and keys.
fn config_err(e: impl std::fmt::Display) -> Error {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    Error::Live(format!("kubeconfig: {first}"))
}

/// The name the flags' cluster, user and context take in a kubeconfig made from
/// `--server` alone (no kubeconfig file and not in a cluster).
const FLAGS_ENTRY: &str = "command-line";

impl ConnectionArgs {
    fn names_kubeconfig_parts(&self) -> bool {
        self.context.is_some() || self.cluster.is_some() || self.user.is_some()
    }

    /// kubectl's overrides on the entries the context selects: `--cluster` and
    /// `--user` pick other entries, then `--server`, `--certificate-authority`,
    /// `--insecure-skip-tls-verify`, `--token`, `--as` and `--as-group` replace
    /// their fields. Editing the kubeconfig, not kube's Config, lets kube read
    /// the CA file and the credentials as it reads any kubeconfig.
    fn apply(&self, mut k: Kubeconfig) -> Result<(Kubeconfig, String)> {
        let context_name = match self.context.clone().or_else(|| k.current_context.clone()) {
            Some(c) => c,
            None if self.server.is_some() => {
                k.contexts.push(kube::config::NamedContext {
                    name: FLAGS_ENTRY.into(),
                    context: Some(Default::default()),
                    other: Default::default(),
                });
                FLAGS_ENTRY.into()
            }
            None => {
                return Err(config_err(
                    "no current-context is set: pass --context NAME, or --server URL",
                ))
            }
        };
        let context = k
            .contexts
            .iter_mut()
            .find(|c| c.name == context_name)
            .ok_or_else(|| {
                config_err(format!("context {context_name:?} is not in the kubeconfig"))
            })?
            .context
            .get_or_insert_with(Default::default);
        if let Some(cluster) = &self.cluster {
            context.cluster = cluster.clone();
        }
        if let Some(user) = &self.user {
            context.user = Some(user.clone());
        }
        if context.cluster.is_empty() {
            context.cluster = FLAGS_ENTRY.into();
        }
        let (cluster_name, user_name) = (
            context.cluster.clone(),
            context.user.clone().unwrap_or_else(|| FLAGS_ENTRY.into()),
        );
        context.user = Some(user_name.clone());

        let exists = k.clusters.iter().any(|c| c.name == cluster_name);
        if !exists && self.server.is_none() {
            return Err(config_err(format!(
                "cluster {cluster_name:?} is not in the kubeconfig (pass --server URL to name the server)"
            )));
        }
        if !exists {
            k.clusters.push(kube::config::NamedCluster {
                name: cluster_name.clone(),
                cluster: Some(Default::default()),
                other: Default::default(),
            });
        }
        let cluster = k
            .clusters
            .iter_mut()
            .find(|c| c.name == cluster_name)
            .expect("present")
            .cluster
            .get_or_insert_with(Default::default);
        if let Some(server) = &self.server {
            cluster.server = Some(server.clone());
        }
        if let Some(ca) = &self.certificate_authority {
            check_ca(ca)?;
            cluster.certificate_authority = Some(ca.display().to_string());
            cluster.certificate_authority_data = None;
            cluster.insecure_skip_tls_verify = None;
        }
        if self.insecure_skip_tls_verify {
            // As kubectl: the flag drops the kubeconfig's CA, which would contradict it.
            cluster.insecure_skip_tls_verify = Some(true);
            cluster.certificate_authority = None;
            cluster.certificate_authority_data = None;
        }

        if self.user.is_some() && !k.auth_infos.iter().any(|u| u.name == user_name) {
            return Err(config_err(format!(
                "user {user_name:?} is not in the kubeconfig"
            )));
        }
        if !k.auth_infos.iter().any(|u| u.name == user_name) {
            k.auth_infos.push(kube::config::NamedAuthInfo {
                name: user_name.clone(),
                auth_info: Some(Default::default()),
                other: Default::default(),
            });
        }
        let auth = k
            .auth_infos
            .iter_mut()
            .find(|u| u.name == user_name)
            .expect("present")
            .auth_info
            .get_or_insert_with(Default::default);
        if let Some(token) = &self.token {
            // As kubectl: the token replaces the user's other bearer sources; a
            // client certificate stays and, as with kubectl, the API server
            // authenticates the certificate first.
            let with_token = token_only(token)?;
            auth.token = with_token.token;
            auth.token_file = None;
            auth.username = None;
            auth.password = None;
            auth.exec = None;
            auth.auth_provider = None;
        }
        check_user_token(auth, &user_name)?;
        self.impersonate(&mut auth.impersonate, &mut auth.impersonate_groups);
        Ok((k, context_name))
    }

    fn impersonate(&self, user: &mut Option<String>, groups: &mut Option<Vec<String>>) {
        if let Some(as_user) = &self.as_user {
            *user = Some(as_user.clone());
        }
        if !self.as_group.is_empty() {
            *groups = Some(self.as_group.clone());
        }
    }

    /// The same overrides on an in-cluster config (no kubeconfig file; `--server`
    /// never gets here: with it the flags make a kubeconfig of their own).
    fn apply_in_cluster(&self, config: &mut kube::Config) -> Result<()> {
        if let Some(token) = &self.token {
            let with_token = token_only(token)?;
            config.auth_info.token = with_token.token;
            config.auth_info.token_file = None;
        }
        if let Some(ca) = &self.certificate_authority {
            check_ca(ca)?;
            config.root_cert_file = Some(ca.clone());
        }
        if self.insecure_skip_tls_verify {
            config.accept_invalid_certs = true;
        }
        self.impersonate(
            &mut config.auth_info.impersonate,
            &mut config.auth_info.impersonate_groups,
        );
        Ok(())
    }
}

/// An AuthInfo holding just `token`: kube keeps tokens in a secret type that
/// only its own deserializer builds.
fn token_only(token: &str) -> Result<kube::config::AuthInfo> {
    check_token(token, "--token")?;
    serde_json::from_value(serde_json::json!({ "token": token })).map_err(config_err)
}

/// A bearer token goes into an HTTP header: one that cannot (a line break, a
/// control character) is refused here, by where it came from, never quoted.
fn check_token(token: &str, from: &str) -> Result<()> {
    if http::HeaderValue::from_str(&format!("Bearer {token}")).is_ok() {
        return Ok(());
    }
    let problem = format!(
        "{from}: the token holds a line break or another character an HTTP header cannot carry; a bearer token is one line"
    );
    // The flag is the caller's usage; the file's token a configuration problem.
    Err(if from.starts_with("--") {
        Error::Usage(problem)
    } else {
        config_err(problem)
    })
}

/// The kubeconfig user's token, checked as `check_token` checks the flag's (kube
/// keeps it secret: its serializer is the one way to read it).
fn check_user_token(auth: &kube::config::AuthInfo, user: &str) -> Result<()> {
    let json = serde_json::to_value(auth).map_err(config_err)?;
    match json.get("token").and_then(|t| t.as_str()) {
        Some(token) => check_token(token, &format!("kubeconfig user {user:?}")),
        None => Ok(()),
    }
}

/// A CA file that cannot be read is the flag's error, not a TLS failure later.
fn check_ca(ca: &std::path::Path) -> Result<()> {
    std::fs::metadata(ca)
        .map(|_| ())
        .map_err(|e| config_err(format!("--certificate-authority {}: {e}", ca.display())))
}

/// A client for the kubeconfig (or in-cluster config) the flags select.
async fn connect(args: &ConnectionArgs) -> Result<Kube> {
    if args.as_user.is_none() && !args.as_group.is_empty() {
        return Err(Error::Usage(
            "--as-group needs --as: the API server impersonates groups only with a user".into(),
        ));
    }
    if args.insecure_skip_tls_verify && args.certificate_authority.is_some() {
        return Err(Error::Usage(
            "--certificate-authority and --insecure-skip-tls-verify contradict each other: give one".into(),
        ));
    }
    let kubeconfig = match &args.kubeconfig {
        Some(path) => Some(
            Kubeconfig::read_from(path)
                .map_err(|e| config_err(format!("{}: {e}", path.display())))?,
        ),
        None => match Kubeconfig::read() {
            Ok(k) => Some(k),
            Err(_) if args.server.is_some() => Some(Kubeconfig::default()),
            Err(e) if args.names_kubeconfig_parts() => return Err(config_err(e)),
            Err(_) => None,
        },
    };
    let mut config = match kubeconfig {
        Some(k) => {
            let (k, context) = args.apply(k)?;
            let options = KubeConfigOptions {
                context: Some(context),
                ..Default::default()
            };
            kube::Config::from_custom_kubeconfig(k, &options)
                .await
                .map_err(config_err)?
        }
        None => {
            let mut config = kube::Config::incluster().map_err(|e| {
                config_err(format!(
                    "no kubeconfig ($KUBECONFIG, ~/.kube/config) and not in a cluster ({e}): pass --kubeconfig FILE or --server URL"
                ))
            })?;
            args.apply_in_cluster(&mut config)?;
            config
        }
    };
    // Retries are ours (bounded, honouring Retry-After, 5xx included): kube's own
    // layer would multiply them and hide the status codes.
    config.default_retry = false;
    let timeout = Some(args.request_timeout).filter(|t| !t.is_zero());
    if timeout.is_some() {
        config.connect_timeout = timeout;
        config.read_timeout = timeout;
        config.write_timeout = timeout;
    }
    let default_namespace = config.default_namespace.clone();
    let server = config.cluster_url.to_string();
    let client = kube::Client::try_from(config).map_err(config_err)?;
    let mut kube = Kube::new(client, default_namespace, timeout);
    kube.server = server.trim_end_matches('/').to_string();
    kube.page_size = args.chunk_size.max(1);
    Ok(kube)
}

fn scope(args: &ConnectionArgs, all: &ScopeArgs, kube: &Kube) -> Scope {
    if all.all_namespaces {
        Scope::AllNamespaces
    } else {
        Scope::Namespace(
            args.namespace
                .clone()
                .unwrap_or_else(|| kube.default_namespace.clone()),
        )
    }
}

pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Identities and their owners in scope. Metadata-only lists for the trio and the
/// workloads; pods in full, as their phase and account are not metadata.
pub struct Inventory {
    pub identities: Vec<Identity>,
    pub owners: Owners,
}

pub async fn gather(kube: &Kube, scope: &Scope) -> Result<Inventory> {
    // Each list is folded page by page: only worker trio members and what the
    // owners need are kept, never a whole list.
    let trio = |r: &'static client::Resource| {
        kube.list_fold(r, scope, true, None, |acc: &mut Vec<ListedObject>, item| {
            acc.extend(ListedObject::from_item(&item))
        })
    };
    let (service_accounts, roles, role_bindings, pods) = futures::try_join!(
        trio(&client::SERVICE_ACCOUNTS),
        trio(&client::ROLES),
        trio(&client::ROLE_BINDINGS),
        kube.list_fold(&client::PODS, scope, false, None, |o: &mut Owners, pod| {
            o.add_pod(&pod)
        }),
    )?;
    let identities = inventory::identities(
        service_accounts
            .into_iter()
            .chain(roles)
            .chain(role_bindings),
    );
    let mut owners = pods;
    // Every pod-bearing kind, in full: a pod template naming an identity keeps it
    // in use between runs (a CronJob, a Deployment scaled to zero, a PodTemplate).
    let workloads: Vec<client::Resource> = client::workloads().collect();
    let lists = futures::future::try_join_all(workloads.iter().map(|r| {
        kube.list_fold(r, scope, false, None, |o: &mut Owners, item| {
            o.add_workload(&item)
        })
    }))
    .await?;
    for (resource, listed) in workloads.iter().zip(lists) {
        owners
            .listed_kinds
            .insert((resource.api_version.to_string(), resource.kind.to_string()));
        owners.merge(listed);
    }
    // The per-namespace `nvcf-worker` may be given at admission, by no template.
    let needed = in_use::admission_namespaces(
        identities
            .iter()
            .map(|id| (id.namespace.as_str(), id.name.as_str())),
    );
    owners.uses.admission =
        in_use::read_admission(kube, *scope == Scope::AllNamespaces, &needed).await?;
    Ok(Inventory { identities, owners })
}

fn write_err(e: std::io::Error) -> Error {
    Error::io("<stdout>", e)
}

/// `-l`: keeps the identities whose labels match. An identity's labels are its
/// members' together (the ServiceAccount's first, then the Role's, then the
/// RoleBinding's for keys not yet seen), and whole identities are filtered after
/// listing, not the lists: an identity whose RoleBinding lacks the label is
/// neither split nor mistaken for a partial one and deleted.
fn select(inventory: &mut Inventory, selector: Option<&Selector>) {
    let Some(selector) = selector else {
        return;
    };
    inventory.identities.retain(|id| {
        let mut labels = std::collections::BTreeMap::new();
        for member in [
            inventory::Member::ServiceAccount,
            inventory::Member::Role,
            inventory::Member::RoleBinding,
        ] {
            for (k, v) in id.member(member).map(|o| &o.labels).into_iter().flatten() {
                labels.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        selector.matches(&labels)
    });
}

/// The namespaces of the manifest-declared identities: the ones whose labels
/// `list` and `audit` read, to flag those the agent provisions itself.
pub fn declared_namespaces(identities: &[Identity]) -> std::collections::BTreeSet<String> {
    identities
        .iter()
        .filter(|id| id.made_by() == inventory::MadeBy::Manifest)
        .map(|id| id.namespace.clone())
        .collect()
}

/// Parsed before any request: a typo in `-l` is the user's, not the server's.
fn parse_selector(text: Option<&str>) -> Result<Option<Selector>> {
    text.map(|t| Selector::parse(t).map_err(|e| Error::Usage(format!("-l/--selector {t:?}: {e}"))))
        .transpose()
}

pub fn run_list(args: ListArgs, stdout: &mut dyn Write) -> Result<()> {
    let selector = parse_selector(args.selector.as_deref())?;
    if let Some(form) = &args.print.output {
        form.check("list", &["policyreport"])?;
    }
    block_on(async {
        let kube = connect(&args.connection).await?;
        let scope = scope(&args.connection, &args.scope, &kube);
        let plane = planes::resolve(&kube, &args.planes).await?;
        let mut inventory = gather(&kube, &scope).await?;
        select(&mut inventory, selector.as_ref());
        let agent_namespaces = match &plane {
            Some(p) => planes::keep_plane(&kube, &scope, &mut inventory.identities, &p.id).await?,
            None => {
                let needed = if list::shows_planes(&args.print) {
                    inventory
                        .identities
                        .iter()
                        .map(|i| i.namespace.clone())
                        .collect()
                } else {
                    declared_namespaces(&inventory.identities)
                };
                namespaces::read(&kube, &scope, &needed).await?
            }
        };
        let rows = list::rows(&inventory, &agent_namespaces, now(), &args.state.options());
        list::render(rows, &args.print, plane.as_ref(), stdout)
    })
}

pub fn run_cleanup(
    args: CleanupArgs,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<()> {
    let selector = parse_selector(args.selector.as_deref())?;
    let execute = match args.dry_run {
        DryRun::Server => Some(true),
        DryRun::Client => None,
        DryRun::None => args.yes.then_some(false),
    };
    let form = args.print.output.as_ref();
    if let Some(form) = form {
        // What was deleted is a document; the plan is rows too.
        let tables: &[&str] = if execute.is_some() {
            &["custom-columns", "jsonpath", "name", "policyreport", "wide"]
        } else {
            &["policyreport", "wide"]
        };
        form.check("cleanup", tables)?;
    }
    block_on(async {
        let kube = connect(&args.connection).await?;
        let scope = scope(&args.connection, &args.scope, &kube);
        let plane = planes::resolve(&kube, &args.planes).await?;
        let mut inventory = gather(&kube, &scope).await?;
        select(&mut inventory, selector.as_ref());
        if let Some(p) = &plane {
            planes::keep_plane(&kube, &scope, &mut inventory.identities, &p.id).await?;
        }
        let mut plan = cleanup::plan(
            &inventory.identities,
            &inventory.owners,
            now(),
            &args.state.options(),
        );
        list::sort_plan(&mut plan, &args.print)?;
        let Some(dry_run) = execute else {
            if let Some(form) = form {
                return list::write_plan_form(&plan, form, args.print.no_headers, stdout);
            }
            list::write_plan(&plan, stdout)?;
            if !plan.delete.is_empty() {
                writeln!(
                    stdout,
                    "nothing deleted: rerun with --yes to delete, or --dry-run=server to have the server check the deletes"
                )
                .map_err(write_err)?;
            }
            return Ok(());
        };
        // The plan first, so a run cut short still shows what it set out to do;
        // the machine-readable document comes once, whole, at the end.
        if form.is_none() {
            list::write_plan(&plan, stdout)?;
        }
        let bar = if std::io::stderr().is_terminal() {
            indicatif::ProgressBar::new(plan.delete.len() as u64)
        } else {
            indicatif::ProgressBar::hidden()
        };
        let options = executor::Options {
            dry_run,
            include_terminated: args.state.include_terminated,
            all_namespaces: scope == Scope::AllNamespaces,
            record_events: args.record_events,
        };
        let summary = executor::execute(&kube, &plan, options, &|| bar.inc(1)).await;
        bar.finish_and_clear();
        let summary = summary?;
        match form.and_then(output::forms::Form::document) {
            Some(format) => list::write_result_document(&plan, &summary, dry_run, format, stdout)?,
            None => list::write_summary(&summary, dry_run, stdout)?,
        }
        if let Some(warning) = summary.events.warning() {
            writeln!(stderr, "{warning}").map_err(|e| Error::io("<stderr>", e))?;
        }
        for (who, error) in &summary.failed {
            writeln!(stderr, "error: {who}: {error}").map_err(|e| Error::io("<stderr>", e))?;
        }
        if !summary.failed.is_empty() {
            return Err(Error::Reported {
                errors: summary.failed.len(),
            });
        }
        Ok(())
    })
}

pub fn run_audit(args: AuditArgs, stdout: &mut dyn Write) -> Result<()> {
    let selector = parse_selector(args.selector.as_deref())?;
    if let Some(form) = &args.print.output {
        form.check("audit", &["wide"])?;
    }
    if args.apply_reports && selector.is_some() {
        // Applying replaces every namespace's report: a selection would erase the rest.
        return Err(Error::Usage(
            "audit: --apply-reports reports every audited object; it cannot be used with -l".into(),
        ));
    }
    block_on(async {
        let kube = connect(&args.connection).await?;
        let scope = scope(&args.connection, &args.scope, &kube);
        let plane = planes::resolve(&kube, &args.planes).await?;
        audit::run(
            &kube,
            &scope,
            args.cluster_id.as_deref(),
            plane.as_ref(),
            selector.as_ref(),
            &args.print,
            &reports::Options {
                api: args.report_api,
                apply: args.apply_reports,
                at: SystemTime::now(),
            },
            stdout,
        )
        .await
    })
}

/// `describe --control-plane ID` of a pod in another plane's namespace is an error.
async fn check_pod_plane(kube: &Kube, namespace: &str, pod: &str, plane: &str) -> Result<()> {
    let scope = Scope::Namespace(namespace.to_string());
    let needed = std::collections::BTreeSet::from([namespace.to_string()]);
    let read = planes::read_for_plane(kube, &scope, &needed, plane).await?;
    if planes::owns(&read, namespace, plane) {
        return Ok(());
    }
    let owner = read
        .planes(namespace)
        .and_then(|p| p.plane)
        .map_or("no plane".to_string(), |p| format!("control plane {p}"));
    Err(Error::Live(format!(
        "pod {namespace}/{pod}: namespace {namespace} belongs to {owner}, not control plane {plane}"
    )))
}

/// A refused verdict exits 1, as `kubectl auth can-i` does for "no": the report
/// is on stdout either way, and one line on stderr names the failing conditions.
pub fn run_describe(args: DescribeArgs, stdout: &mut dyn Write) -> Result<()> {
    if let Some(form) = &args.print.output {
        form.check("describe", &["policyreport", "wide"])?;
    }
    block_on(async {
        let kube = connect(&args.connection).await?;
        let namespace = args
            .connection
            .namespace
            .clone()
            .unwrap_or_else(|| kube.default_namespace.clone());
        let plane = planes::resolve(&kube, &args.planes).await?;
        if let Some(p) = &plane {
            check_pod_plane(&kube, &namespace, &args.pod, &p.id).await?;
        }
        let verdict =
            describe::describe(&kube, &namespace, &args.pod, args.cluster_id.as_deref()).await?;
        match &args.print.output {
            Some(form) => {
                let mut doc = serde_json::to_value(&verdict).expect("plain struct");
                if let Some(p) = &plane {
                    doc["controlPlane"] = serde_json::to_value(p).expect("plain struct");
                }
                // One object: custom-columns print one row of the whole document.
                let row = output::document(output::WORKER_VERDICT, doc.clone());
                args.print.order(std::slice::from_ref(&row))?;
                let name = output::forms::object_name("v1", "Pod", &args.pod);
                output::forms::write(
                    form,
                    output::WORKER_VERDICT,
                    doc,
                    &[row],
                    &[name],
                    args.print.no_headers,
                    stdout,
                )?
            }
            None => {
                describe::write_text(&verdict, stdout).map_err(write_err)?;
                if let Some(p) = &plane {
                    writeln!(
                        stdout,
                        "control plane {}: its agent is {} ({})",
                        p.id,
                        p.agent,
                        if p.agent_from == "flags" {
                            "named by the flags"
                        } else {
                            "read from the cluster"
                        }
                    )
                    .map_err(write_err)?;
                }
            }
        }
        let failing: Vec<String> = verdict
            .failing()
            .map(|c| format!("{}: {}", c.kind, c.reason))
            .collect();
        if failing.is_empty() {
            Ok(())
        } else {
            Err(Error::Live(format!(
                "pod {namespace}/{}: ICMS would refuse its token ({})",
                args.pod,
                failing.join("; ")
            )))
        }
    })
}
