//! The live commands: `list`, `cleanup`, `audit` and `describe` against a cluster.
//! kubectl hands plugin flags through untouched, so the usual connection flags
//! (`--kubeconfig`, `--context`, `-n`, `-A`, `--request-timeout`) are parsed here.

pub mod audit;
pub mod cleanup;
pub mod client;
pub mod describe;
pub mod inventory;
pub mod list;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::error::{Error, Result};
use client::{Kube, Scope};
use inventory::{Identity, ListedObject, Owners, StateOptions};

/// kubectl's connection flags.
#[derive(clap::Args, Debug, Clone)]
pub struct ConnectionArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Namespace (default: the context's namespace).
    #[arg(short = 'n', long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Every namespace (one list per kind across the cluster).
    #[arg(short = 'A', long = "all-namespaces")]
    pub all_namespaces: bool,
    /// Time limit for each request: 30s, 1m, or plain seconds; 0 waits forever.
    #[arg(long = "request-timeout", value_name = "DURATION", default_value = "0", value_parser = cleanup::parse_duration)]
    pub request_timeout: Duration,
    /// Objects per list page (the API's `limit`).
    #[arg(long = "chunk-size", value_name = "N", default_value_t = 500)]
    pub chunk_size: u32,
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
    pub state: StateArgs,
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: list::ListFormat,
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
    pub state: StateArgs,
    /// Delete. Without it the plan is printed and nothing is deleted.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// `server`: send the deletes with dryRun=All; `client`: print the plan only.
    #[arg(long = "dry-run", value_enum, value_name = "MODE", default_value = "none", num_args = 0..=1, default_missing_value = "client", require_equals = true)]
    pub dry_run: DryRun,
}

#[derive(clap::Args, Debug)]
pub struct AuditArgs {
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// The NVCF cluster ID: token audiences must be nvcf-icms:<ID>.
    #[arg(long = "cluster-id", value_name = "ID")]
    pub cluster_id: Option<String>,
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: crate::report::ReportFormat,
}

#[derive(clap::Args, Debug)]
pub struct DescribeArgs {
    /// The pod whose worker identity to show.
    #[arg(value_name = "POD")]
    pub pod: String,
    #[command(flatten)]
    pub connection: ConnectionArgs,
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

fn config_err(e: impl std::fmt::Display) -> Error {
    Error::Live(format!("kubeconfig: {e}"))
}

/// A client for the kubeconfig (or in-cluster) the flags select.
async fn connect(args: &ConnectionArgs) -> Result<Kube> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let mut config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(config_err)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(config_err)?
        }
        None if args.context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(config_err)?,
        None => kube::Config::infer().await.map_err(config_err)?,
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
    let client = kube::Client::try_from(config).map_err(config_err)?;
    let mut kube = Kube::new(client, default_namespace, timeout);
    kube.page_size = args.chunk_size.max(1);
    Ok(kube)
}

fn scope(args: &ConnectionArgs, kube: &Kube) -> Scope {
    if args.all_namespaces {
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
    let (service_accounts, roles, role_bindings, pods) = futures::try_join!(
        kube.list(&client::SERVICE_ACCOUNTS, scope, true, None),
        kube.list(&client::ROLES, scope, true, None),
        kube.list(&client::ROLE_BINDINGS, scope, true, None),
        kube.list(&client::PODS, scope, false, None),
    )?;
    let objects = service_accounts
        .iter()
        .chain(&roles)
        .chain(&role_bindings)
        .filter_map(ListedObject::from_item);
    let identities = inventory::identities(objects);
    let mut owners = Owners::default();
    for pod in &pods {
        owners.add_pod(pod);
    }
    // Every built-in workload kind, in full: a pod template naming an identity keeps
    // it in use between runs (a CronJob, a Deployment scaled to zero).
    let lists = futures::future::try_join_all(
        client::WORKLOADS
            .iter()
            .map(|r| kube.list(r, scope, false, None)),
    )
    .await?;
    for (resource, items) in client::WORKLOADS.iter().zip(lists) {
        owners
            .listed_kinds
            .insert((resource.api_version.to_string(), resource.kind.to_string()));
        for item in &items {
            owners.add_workload(item);
        }
    }
    Ok(Inventory { identities, owners })
}

fn write_err(e: std::io::Error) -> Error {
    Error::io("<stdout>", e)
}

pub fn run_list(args: ListArgs, stdout: &mut dyn Write) -> Result<()> {
    block_on(async {
        let kube = connect(&args.connection).await?;
        let scope = scope(&args.connection, &kube);
        let inventory = gather(&kube, &scope).await?;
        let rows = list::rows(&inventory, now(), &args.state.options());
        list::render(&rows, args.output, stdout)
    })
}

pub fn run_cleanup(
    args: CleanupArgs,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<()> {
    let execute = match args.dry_run {
        DryRun::Server => Some(true),
        DryRun::Client => None,
        DryRun::None => args.yes.then_some(false),
    };
    block_on(async {
        let kube = connect(&args.connection).await?;
        let scope = scope(&args.connection, &kube);
        let inventory = gather(&kube, &scope).await?;
        let plan = cleanup::plan(
            &inventory.identities,
            &inventory.owners,
            now(),
            &args.state.options(),
        );
        list::write_plan(&plan, stdout)?;
        let Some(dry_run) = execute else {
            if !plan.delete.is_empty() {
                writeln!(
                    stdout,
                    "nothing deleted: rerun with --yes to delete, or --dry-run=server to have the server check the deletes"
                )
                .map_err(write_err)?;
            }
            return Ok(());
        };
        let bar = if std::io::stderr().is_terminal() {
            indicatif::ProgressBar::new(plan.delete.len() as u64)
        } else {
            indicatif::ProgressBar::hidden()
        };
        let summary = cleanup::execute(&kube, &plan, dry_run, &|| bar.inc(1)).await;
        bar.finish_and_clear();
        let summary = summary?;
        list::write_summary(&summary, dry_run, stdout)?;
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
    block_on(async {
        let kube = connect(&args.connection).await?;
        let scope = scope(&args.connection, &kube);
        audit::run(
            &kube,
            &scope,
            args.cluster_id.as_deref(),
            args.output,
            stdout,
        )
        .await
    })
}

pub fn run_describe(args: DescribeArgs, stdout: &mut dyn Write) -> Result<()> {
    block_on(async {
        let kube = connect(&args.connection).await?;
        let namespace = args
            .connection
            .namespace
            .clone()
            .unwrap_or_else(|| kube.default_namespace.clone());
        let auth = describe::worker_auth(&kube, &namespace, &args.pod).await?;
        serde_json::to_writer_pretty(&mut *stdout, &auth).map_err(|e| write_err(e.into()))?;
        writeln!(stdout).map_err(write_err)
    })
}
