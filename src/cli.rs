//! Command-line parsing and dispatch. Parsing builds `Cli`; `run` turns it into
//! the library calls; `main` maps the result to an exit code.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;

use clap::{CommandFactory, Parser, Subcommand};

use crate::config::Config;
use crate::error::{Error, Exit, Result};
use crate::identity;
use crate::krm;
use crate::manifest::parse_stream;
use crate::pipeline::{self, Output, Processor, Run, StreamFormat, ValidateFormat, WriteArgs};
use crate::selector::Selector;

/// The name kustomize runs the legacy exec plugin by.
pub const LEGACY_PLUGIN_NAME: &str = "WorkerIdentity";
/// The name kubectl runs for `kubectl nvcf-worker <TAB>`.
pub const COMPLETE_NAME: &str = "kubectl_complete-nvcf_worker";

#[derive(Parser, Debug)]
#[command(
    name = "kubectl nvcf-worker",
    bin_name = "kubectl nvcf-worker",
    version,
    about = "NVCF worker identity for Kubernetes manifests and clusters",
    long_about = "NVCF worker identity for Kubernetes manifests and clusters.\n\n\
        With no subcommand and a ResourceList on stdin it runs as a KRM function \
        (kpt fn eval --exec, kpt fn render --allow-exec).",
    after_help = "Examples:\n  kpt fn eval --exec kubectl-nvcf-worker . -- clusterID=prod-1\n  \
        kubectl nvcf-worker inject -f deploy.yaml --cluster-id prod-1 | kubectl apply -f -\n  \
        kubectl nvcf-worker validate manifests/"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Add the worker identity to selected workloads in files or stdin.
    #[command(
        after_help = "Examples:\n  kubectl nvcf-worker inject -f deploy.yaml --cluster-id prod-1\n  \
        cat app.yaml | kubectl nvcf-worker inject -f - --config fn-config/worker-identity.yaml"
    )]
    Inject(InjectArgs),
    /// Take out what inject added and restore what it replaced.
    #[command(
        after_help = "Examples:\n  kubectl nvcf-worker uninject -f deploy.yaml | kubectl apply -f -\n  \
        kubectl nvcf-worker inject -f app.yaml --cluster-id c1 | kubectl nvcf-worker uninject -f -"
    )]
    Uninject(UninjectArgs),
    /// Check manifests for forged or widened worker identities (pre-commit, CI).
    #[command(
        after_help = "Examples:\n  kubectl nvcf-worker validate manifests/\n  kubectl nvcf-worker validate -o json a.yaml b.yaml"
    )]
    Validate(ValidateArgs),
    /// Install the kustomize legacy exec plugin link (for kubectl kustomize --enable-alpha-plugins).
    #[command(
        after_help = "Example:\n  kubectl nvcf-worker install-kustomize-plugin && kubectl kustomize --enable-alpha-plugins overlay/"
    )]
    InstallKustomizePlugin(InstallPluginArgs),
    /// List worker identities (ServiceAccount, Role, RoleBinding nvcf-worker-*) and their owners.
    #[command(
        after_help = "Examples:\n  kubectl nvcf-worker list -n team-a\n  kubectl nvcf-worker list -A -o yaml"
    )]
    List(crate::live::ListArgs),
    /// Delete orphaned and partial worker identities (prints the plan unless --yes).
    #[command(
        after_help = "Examples:\n  kubectl nvcf-worker cleanup -A\n  kubectl nvcf-worker cleanup -A --dry-run=server\n  \
        kubectl nvcf-worker cleanup -n team-a --min-age 1h --yes"
    )]
    Cleanup(crate::live::CleanupArgs),
    /// Apply the guard's rules to live objects and check worker pods' tokens and env.
    #[command(
        after_help = "Examples:\n  kubectl nvcf-worker audit -A --cluster-id prod-1\n  kubectl nvcf-worker audit -n team-a -o json"
    )]
    Audit(crate::live::AuditArgs),
    /// Say whether ICMS would accept a pod's token, condition by condition (who checks each, and
    /// what the cluster cannot show), and print the WorkerAuth the NVCF agent derives for it.
    #[command(after_help = "Example:\n  kubectl nvcf-worker describe my-pod-0 -n team-a")]
    Describe(crate::live::DescribeArgs),
    /// Print a ValidatingAdmissionPolicy and its binding that enforce the guard in the cluster
    /// (--mutating: a MutatingAdmissionPolicy that gives selected pods their identity).
    #[command(
        after_help = "Examples:\n  kubectl nvcf-worker policy --agent system:serviceaccount:nvca-system:nvca --audit-only | kubectl apply -f -\n  \
        kubectl nvcf-worker policy --agent system:serviceaccount:nvca-system:nvca \\\n    --allow-applier system:serviceaccount:flux-system:kustomize-controller | kubectl apply -f -\n  \
        kubectl nvcf-worker policy --mutating --cluster-id prod-1 | kubectl apply -f -\n  \
        kubectl nvcf-worker policy --namespace-kit team-a | kubectl apply -f -"
    )]
    Policy(PolicyArgs),
    /// Print a shell completion script, or (kubectl) link kubectl_complete-nvcf_worker for `kubectl nvcf-worker <TAB>`.
    #[command(
        after_help = "Examples:\n  source <(kubectl-nvcf-worker completion bash)\n  \
        kubectl-nvcf-worker completion fish > ~/.config/fish/completions/kubectl-nvcf-worker.fish\n  \
        kubectl nvcf-worker completion kubectl    # after krew install: links the helper kubectl runs"
    )]
    Completion(CompletionArgs),
    /// Print the tool's version (as --version does; -o json or yaml for scripts).
    #[command(
        after_help = "Examples:\n  kubectl nvcf-worker version\n  kubectl nvcf-worker version -o json"
    )]
    Version {
        /// Output format: the plain line, or an object with the version.
        #[arg(short = 'o', long = "output", value_enum)]
        output: Option<VersionFormat>,
    },
    /// Print the man page (roff), or write it and one page per subcommand into a directory.
    #[command(
        after_help = "Examples:\n  kubectl-nvcf-worker man > kubectl-nvcf-worker.1\n  kubectl-nvcf-worker man --dir ~/.local/share/man/man1"
    )]
    Man {
        /// Write kubectl-nvcf-worker.1 and kubectl-nvcf-worker-<command>.1 for every subcommand here.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum VersionFormat {
    Json,
    Yaml,
}

#[derive(clap::Args, Debug)]
pub struct CompletionArgs {
    /// bash, zsh and fish ask the binary on each TAB (values too: contexts, namespaces);
    /// elvish and powershell get clap's static script; kubectl links the plugin completion helper.
    #[arg(value_enum)]
    pub shell: CompletionShell,
    /// kubectl: the directory to link kubectl_complete-nvcf_worker in (default: where kubectl-nvcf_worker is on PATH).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
    Elvish,
    Powershell,
    /// Link kubectl_complete-nvcf_worker beside kubectl-nvcf_worker (krew links only the plugin).
    Kubectl,
}

#[derive(clap::Args, Debug)]
pub struct InjectArgs {
    /// File, directory (recursive: .yaml, .yml, .json) or - for stdin; repeatable.
    #[arg(short = 'f', long = "filename", value_name = "PATH")]
    pub files: Vec<String>,
    /// More paths, as with -f.
    #[arg(value_name = "PATH")]
    pub paths: Vec<String>,
    /// A function config file (fn.nvcf.io/v1alpha1 WorkerIdentity or a ConfigMap); flags given too override its keys.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The NVCF cluster ID; the token audience is nvcf-icms:<ID>.
    #[arg(long = "cluster-id", value_name = "ID")]
    pub cluster_id: Option<String>,
    /// Token audience (default nvcf-icms:<cluster-id>).
    #[arg(long)]
    pub audience: Option<String>,
    /// Token lifetime, 600..86400.
    #[arg(long = "expiration-seconds", value_name = "N")]
    pub expiration_seconds: Option<i64>,
    /// Label selector for workloads (default nvcf.io/worker=true).
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Identity source; anything but psat injects nothing.
    #[arg(long = "token-source")]
    pub token_source: Option<String>,
    /// Also give init containers the token mount and env.
    #[arg(long = "include-init-containers")]
    pub include_init_containers: bool,
    /// Take the identity out of workloads that carry it but are no longer selected.
    #[arg(long)]
    pub prune: bool,
    /// The contract the identities follow: one nvcf-worker per namespace (what the newest
    /// agent and ICMS accept), or one nvcf-worker-<name> per workload (PR #846's) [default: per-namespace, or the config's naming].
    #[arg(long, value_enum, value_name = "NAMING")]
    pub naming: Option<crate::identity::Naming>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    pub output: StreamFormat,
    #[command(flatten)]
    pub write: WriteArgs,
}

#[derive(clap::Args, Debug)]
pub struct UninjectArgs {
    /// File, directory (recursive: .yaml, .yml, .json) or - for stdin; repeatable.
    #[arg(short = 'f', long = "filename", value_name = "PATH")]
    pub files: Vec<String>,
    /// More paths, as with -f.
    #[arg(value_name = "PATH")]
    pub paths: Vec<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    pub output: StreamFormat,
    #[command(flatten)]
    pub write: WriteArgs,
}

#[derive(clap::Args, Debug)]
pub struct ValidateArgs {
    /// Files or directories; - for stdin.
    #[arg(value_name = "PATH")]
    pub paths: Vec<String>,
    /// More paths.
    #[arg(short = 'f', long = "filename", value_name = "PATH")]
    pub files: Vec<String>,
    /// Output format: text lines, a report.nvcf.io/v1alpha1 ValidationReport in JSON or YAML, a SARIF 2.1.0 log for code scanning, JUnit XML (a testcase per file) or GitHub Actions annotations.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: ValidateFormat,
    /// Exit 1 on warnings too, as on errors (conftest's name); JUnit reports them as failures.
    #[arg(long = "fail-on-warn")]
    pub fail_on_warn: bool,
}

#[derive(clap::Args, Debug)]
pub struct PolicyArgs {
    /// The agents the policy does not evaluate: every plane's, by --agent or
    /// --agent-namespace (each repeatable) [default: system:serviceaccount:nvca-system:nvca].
    #[command(flatten)]
    pub planes: crate::controlplane::PlaneArgs,
    /// A user (a GitOps controller) from whom the transformer's exact output is admitted; repeatable.
    #[arg(long = "allow-applier", value_name = "SUBJECT")]
    pub appliers: Vec<String>,
    /// What the API server does when the policy cannot be evaluated.
    #[arg(long = "failure-policy", value_enum, default_value = "fail")]
    pub failure_policy: FailurePolicy,
    /// Warn and record audit annotations instead of refusing (validationActions [Audit, Warn]): roll out with this first.
    #[arg(long = "audit-only")]
    pub audit_only: bool,
    /// Only namespaces whose labels match (kubectl's selector syntax); cluster-scoped objects are always covered.
    #[arg(long = "namespace-selector", value_name = "SELECTOR")]
    pub namespace_selector: Option<String>,
    /// Admit worker pods that `policy --mutating` gave their identity (they carry its stamp,
    /// which that policy takes off every other pod): only with that policy installed.
    #[arg(long = "trust-mutation")]
    pub trust_mutation: bool,
    /// Name of the policy and of its binding [default: nvcf-worker-guard; with --mutating nvcf-worker-identity].
    #[arg(long)]
    pub name: Option<String>,
    /// Print instead a MutatingAdmissionPolicy (and binding) that gives selected pods the
    /// worker identity in the cluster (account nvcf-worker of their namespace), and a
    /// validation refusing a selected pod it could not give it.
    #[arg(long, conflicts_with_all = ["agents", "agent_namespaces", "control_plane", "appliers", "audit_only", "namespace_kit", "trust_mutation"])]
    pub mutating: bool,
    /// Print what a namespace needs for --mutating: the Namespace labelled to match
    /// --namespace-selector and its nvcf-worker ServiceAccount, empty Role and RoleBinding; repeatable.
    #[arg(long = "namespace-kit", value_name = "NAMESPACE", conflicts_with_all = ["agents", "agent_namespaces", "control_plane", "appliers", "audit_only", "trust_mutation"])]
    pub namespace_kit: Vec<String>,
    /// With --mutating: the NVCF cluster ID; the token audience is nvcf-icms:<ID>.
    #[arg(long = "cluster-id", value_name = "ID", requires = "mutating")]
    pub cluster_id: Option<String>,
    /// With --mutating: token lifetime, 600..86400 [default: 900].
    #[arg(long = "expiration-seconds", value_name = "N", requires = "mutating")]
    pub expiration_seconds: Option<i64>,
    /// With --mutating: the pods to give the identity, by their own labels [default: nvcf.io/worker=true].
    #[arg(short = 'l', long, requires = "mutating")]
    pub selector: Option<String>,
    /// With --mutating: also give init containers the token mount and env.
    #[arg(long = "include-init-containers", requires = "mutating")]
    pub include_init_containers: bool,
    /// With --mutating: the API version to print, v1 (Kubernetes 1.36+) or v1beta1 (1.34, 1.35 with the feature gate).
    #[arg(
        long = "api-version",
        value_enum,
        default_value = "v1",
        requires = "mutating"
    )]
    pub api_version: MutatingApiVersion,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum MutatingApiVersion {
    V1,
    V1beta1,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum FailurePolicy {
    Fail,
    Ignore,
}

#[derive(clap::Args, Debug)]
pub struct InstallPluginArgs {
    /// kustomize's plugin root (default $KUSTOMIZE_PLUGIN_HOME, else $XDG_CONFIG_HOME/kustomize/plugin, else ~/.config/kustomize/plugin).
    #[arg(long, value_name = "DIR")]
    pub plugin_root: Option<PathBuf>,
}

impl InjectArgs {
    /// The config file's settings (or the defaults), then each flag given on top:
    /// flags win, as kubectl's flags win over its kubeconfig.
    fn config(&self) -> Result<Config> {
        let mut cfg = match &self.config {
            Some(path) => {
                let name = path.display().to_string();
                let bytes = std::fs::read(path).map_err(|e| Error::io(&name, e))?;
                let docs = parse_stream(&bytes).map_err(|e| Error::Yaml {
                    file: name.clone(),
                    doc: e.index + 1,
                    source: e.error,
                })?;
                Config::from_node(docs.iter().find(|d| !d.is_empty()).map(|d| d.view()))
                    .map_err(|e| crate::config::ConfigError(format!("{name}: {}", e.0)))?
            }
            None => Config::default(),
        };
        if let Some(c) = &self.cluster_id {
            cfg.cluster_id = Some(c.clone());
        }
        if let Some(a) = &self.audience {
            cfg.audience = Some(a.clone()).filter(|a| !a.is_empty());
        }
        if let Some(e) = self.expiration_seconds {
            cfg.expiration_seconds = e;
        }
        if let Some(s) = &self.selector {
            cfg.selector = Selector::parse(s).map_err(Error::Usage)?;
        }
        if let Some(t) = &self.token_source {
            cfg.token_source = if t.is_empty() {
                crate::identity::IDENTITY_SOURCE_PSAT.into()
            } else {
                t.clone()
            };
        }
        if self.include_init_containers {
            cfg.include_init_containers = true;
        }
        if self.prune {
            cfg.prune = true;
        }
        if let Some(n) = self.naming {
            cfg.naming = n;
        }
        if cfg.mode == crate::config::Mode::Uninject {
            return Err(Error::Usage(
                "the config has mode: uninject; run `kubectl nvcf-worker uninject`".into(),
            ));
        }
        let range =
            crate::identity::MIN_EXPIRATION_SECONDS..=crate::identity::MAX_EXPIRATION_SECONDS;
        if !range.contains(&cfg.expiration_seconds) {
            return Err(Error::Usage(format!(
                "--expiration-seconds {} is outside 600..86400 (Kubernetes rejects projected tokens shorter than 10 minutes)",
                cfg.expiration_seconds
            )));
        }
        if cfg.is_psat()
            && cfg
                .cluster_id
                .as_deref()
                .is_none_or(|c| c.trim().is_empty())
        {
            // Exit 1 like every other config problem; the message names the flag.
            let or = match &self.config {
                Some(path) => format!("or set spec.clusterID in {}", path.display()),
                None => "or give a --config FILE that sets it".into(),
            };
            return Err(crate::config::ConfigError(format!(
                "clusterID is required to inject a worker identity: pass --cluster-id ID (the token audience is nvcf-icms:<ID>), {or}"
            ))
            .into());
        }
        Ok(cfg)
    }
}

/// The paths to read; stdin when none is named, unless stdin is a terminal: then
/// nobody is about to type a manifest, and waiting silently would look like a hang.
fn paths_or_stdin(mut a: Vec<String>, b: &[String], command: &str) -> Result<Vec<String>> {
    a.extend_from_slice(b);
    if a.is_empty() {
        if std::io::stdin().is_terminal() {
            return Err(Error::Usage(format!(
                "no input: name files or directories (kubectl nvcf-worker {command} -f PATH), or pipe manifests to stdin"
            )));
        }
        a.push("-".into());
    }
    Ok(a)
}

/// kustomize's plugin root, in kustomize's own order: `KUSTOMIZE_PLUGIN_HOME`, then
/// `$XDG_CONFIG_HOME/kustomize/plugin`, then `~/.config/kustomize/plugin`.
fn kustomize_plugin_home() -> Result<PathBuf> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(home) = var("KUSTOMIZE_PLUGIN_HOME") {
        return Ok(PathBuf::from(home));
    }
    if let Some(x) = var("XDG_CONFIG_HOME") {
        return Ok(PathBuf::from(x).join("kustomize/plugin"));
    }
    match var("HOME") {
        Some(h) => Ok(PathBuf::from(h).join(".config/kustomize/plugin")),
        None => Err(Error::Usage(
            "none of KUSTOMIZE_PLUGIN_HOME, XDG_CONFIG_HOME and HOME is set; pass --plugin-root"
                .into(),
        )),
    }
}

/// Where kustomize looks for `fn.nvcf.io/v1alpha1 WorkerIdentity`.
pub fn legacy_plugin_path(root: Option<PathBuf>) -> Result<PathBuf> {
    let root = match root {
        Some(r) => r,
        None => kustomize_plugin_home()?,
    };
    Ok(root
        .join("fn.nvcf.io/v1alpha1/workeridentity")
        .join(LEGACY_PLUGIN_NAME))
}

fn install_plugin(args: InstallPluginArgs, stdout: &mut dyn Write) -> Result<()> {
    let target = legacy_plugin_path(args.plugin_root)?;
    let exe = std::env::current_exe().map_err(|e| Error::io("current executable", e))?;
    let dir = target.parent().expect("plugin path has a parent");
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
    match std::fs::remove_file(&target) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(target.display().to_string(), e)),
    }
    #[cfg(unix)]
    std::os::unix::fs::symlink(&exe, &target)
        .map_err(|e| Error::io(target.display().to_string(), e))?;
    #[cfg(not(unix))]
    std::fs::copy(&exe, &target).map_err(|e| Error::io(target.display().to_string(), e))?;
    writeln!(
        stdout,
        "installed {} -> {}",
        target.display(),
        exe.display()
    )
    .map_err(|e| Error::io("<stdout>", e))
}

/// Runs the tool with explicit streams, as a library caller would (serial, trees
/// freed): see `run_with`.
pub fn run(cli: Cli, stdout: &mut dyn Write, stderr: &mut dyn Write) -> Result<()> {
    run_with(&Run::default(), cli, stdout, stderr)
}

/// Runs the tool with explicit streams and the face's run settings.
pub fn run_with(run: &Run, cli: Cli, stdout: &mut dyn Write, stderr: &mut dyn Write) -> Result<()> {
    match cli.command {
        None => {
            let stdin = std::io::stdin();
            if stdin.is_terminal() {
                Cli::command()
                    .write_help(&mut &mut *stdout)
                    .map_err(|e| Error::io("<stdout>", e))?;
                return Ok(());
            }
            let mut input = Vec::new();
            stdin
                .lock()
                .read_to_end(&mut input)
                .map_err(|e| Error::io("<stdin>", e))?;
            if input.iter().all(u8::is_ascii_whitespace) {
                return Err(Error::Invalid {
                    file: "<stdin>".into(),
                    doc: 1,
                    line: 1,
                    message:
                        "empty input: expected a ResourceList on stdin (or a subcommand; see --help)"
                            .into(),
                });
            }
            let exit = krm::run_resource_list_to(run, input, stdout)?;
            stdout.flush().map_err(|e| Error::io("<stdout>", e))?;
            if exit != crate::error::Exit::Success {
                return Err(Error::Answered(exit));
            }
            Ok(())
        }
        Some(Command::Inject(args)) => {
            let cfg = args.config()?;
            if cfg.mode == crate::config::Mode::Validate {
                return Err(Error::Usage(
                    "the config has mode: validate; run `kubectl nvcf-worker validate`, or use it as a kpt or kustomize validator".into(),
                ));
            }
            let paths = paths_or_stdin(args.files.clone(), &args.paths, "inject")?;
            let output = Output {
                format: args.output,
                write: args.write,
            };
            pipeline::edit(
                run,
                &paths,
                &Processor::Inject(&cfg),
                output,
                stdout,
                stderr,
            )
        }
        Some(Command::Uninject(args)) => {
            let paths = paths_or_stdin(args.files, &args.paths, "uninject")?;
            let output = Output {
                format: args.output,
                write: args.write,
            };
            pipeline::edit(run, &paths, &Processor::Uninject, output, stdout, stderr)
        }
        Some(Command::Validate(args)) => pipeline::check(
            run,
            &paths_or_stdin(args.paths, &args.files, "validate")?,
            args.output,
            args.fail_on_warn,
            stdout,
        ),
        Some(Command::InstallKustomizePlugin(args)) => install_plugin(args, stdout),
        Some(Command::List(args)) => crate::live::run_list(args, stdout),
        Some(Command::Cleanup(args)) => crate::live::run_cleanup(args, stdout, stderr),
        Some(Command::Audit(args)) => crate::live::run_audit(args, stdout),
        Some(Command::Describe(args)) => crate::live::run_describe(args, stdout),
        Some(Command::Policy(args)) if args.mutating || !args.namespace_kit.is_empty() => {
            mutating_policy(args, stdout)
        }
        Some(Command::Policy(args)) => {
            if let Some(plane) = &args.planes.control_plane {
                return Err(Error::Usage(format!(
                    "policy prints one policy for every control plane and does not read the cluster: exempt each plane's agent with --agent-namespace NS (repeatable) instead of --control-plane {plane} (`kubectl get serviceaccounts -A --field-selector metadata.name={} -L {}` shows them)",
                    identity::AGENT_ACCOUNT,
                    crate::controlplane::OWNER_LABEL
                )));
            }
            let mut agents = args.planes.named_agents().map_err(Error::Usage)?;
            if agents.is_empty() {
                agents.push(crate::controlplane::agent_user(identity::AGENT_NAMESPACE));
            }
            let subjects = agents.iter().chain(&args.appliers);
            if let Some(bad) = subjects
                .into_iter()
                .find(|s| s.trim().is_empty() || s.trim() != s.as_str())
            {
                return Err(Error::Usage(format!(
                    "--agent and --allow-applier take a username as the API server sees it (system:serviceaccount:NAMESPACE:NAME), not {bad:?}"
                )));
            }
            let opts = crate::policy::Options {
                name: args
                    .name
                    .unwrap_or_else(|| crate::policy::DEFAULT_NAME.into()),
                agents,
                appliers: args.appliers,
                failure_policy: match args.failure_policy {
                    FailurePolicy::Fail => "Fail",
                    FailurePolicy::Ignore => "Ignore",
                }
                .into(),
                audit_only: args.audit_only,
                trust_mutation: args.trust_mutation,
                namespaces: args
                    .namespace_selector
                    .map(|s| Selector::parse(&s).map_err(Error::Usage))
                    .transpose()?,
            };
            stdout
                .write_all(crate::policy::yaml(&opts).as_bytes())
                .map_err(|e| Error::io("<stdout>", e))
        }
        Some(Command::Completion(args)) => completion(args, stdout),
        Some(Command::Version { output }) => {
            let version = env!("CARGO_PKG_VERSION");
            let text = match output {
                None => format!("kubectl-nvcf-worker {version}\n"),
                Some(VersionFormat::Json) => format!("{{\n  \"version\": \"{version}\"\n}}\n"),
                Some(VersionFormat::Yaml) => format!("version: {version}\n"),
            };
            stdout
                .write_all(text.as_bytes())
                .map_err(|e| Error::io("<stdout>", e))
        }
        Some(Command::Man { dir: None }) => {
            write_man_page(stdout).map_err(|e| Error::io("<stdout>", e))
        }
        Some(Command::Man { dir: Some(dir) }) => {
            std::fs::create_dir_all(&dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
            write_man_pages(&dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
            writeln!(stdout, "wrote man pages to {}", dir.display())
                .map_err(|e| Error::io("<stdout>", e))
        }
    }
}

/// `completion SHELL`: the script, or the kubectl helper's link.
fn completion(args: CompletionArgs, stdout: &mut dyn Write) -> Result<()> {
    use clap_complete::Shell;
    let write = |stdout: &mut dyn Write, text: &[u8]| {
        stdout.write_all(text).map_err(|e| Error::io("<stdout>", e))
    };
    if args.dir.is_some() && args.shell != CompletionShell::Kubectl {
        return Err(Error::Usage(
            "--dir is for `completion kubectl` only".into(),
        ));
    }
    let static_script = |shell: Shell| {
        // clap's generator names its states after the command's bin_name: give it
        // the one the script registers, or its states and its branches disagree.
        let mut cmd = Cli::command()
            .name("kubectl-nvcf-worker")
            .bin_name("kubectl-nvcf-worker")
            .display_name("kubectl-nvcf-worker");
        // Generated into memory: clap_complete panics on a failed write.
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut cmd, "kubectl-nvcf-worker", &mut script);
        script
    };
    match args.shell {
        CompletionShell::Bash => write(stdout, crate::complete::BASH.as_bytes()),
        CompletionShell::Zsh => write(stdout, crate::complete::ZSH.as_bytes()),
        CompletionShell::Fish => write(stdout, crate::complete::FISH.as_bytes()),
        CompletionShell::Elvish => write(stdout, &static_script(Shell::Elvish)),
        CompletionShell::Powershell => write(stdout, &static_script(Shell::PowerShell)),
        CompletionShell::Kubectl => {
            let link = link_complete_helper(args.dir)?;
            writeln!(
                stdout,
                "linked {} -> {PLUGIN_NAME}: `kubectl nvcf-worker <TAB>` completes now",
                link.display()
            )
            .map_err(|e| Error::io("<stdout>", e))
        }
    }
}

/// The name kubectl runs for `kubectl nvcf-worker`.
pub const PLUGIN_NAME: &str = "kubectl-nvcf_worker";

/// Links `kubectl_complete-nvcf_worker` to `kubectl-nvcf_worker` in `dir`, or in
/// the PATH directory kubectl finds the plugin in (for krew, $KREW_ROOT/bin,
/// where krew links only the plugin). The link is relative and names the
/// plugin's link, so it follows `krew upgrade`.
fn link_complete_helper(dir: Option<PathBuf>) -> Result<PathBuf> {
    let dir = match dir {
        Some(d) => d,
        None => std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .find(|d| d.join(PLUGIN_NAME).is_file())
            .ok_or_else(|| {
                Error::Usage(format!(
                    "{PLUGIN_NAME} is not on PATH (krew: add ${{KREW_ROOT:-$HOME/.krew}}/bin to PATH); pass --dir DIR"
                ))
            })?,
    };
    if !dir.join(PLUGIN_NAME).is_file() {
        return Err(Error::Usage(format!(
            "{} holds no {PLUGIN_NAME}: the helper links to it",
            dir.display()
        )));
    }
    let link = dir.join(COMPLETE_NAME);
    match std::fs::symlink_metadata(&link) {
        Ok(m) if m.file_type().is_symlink() || m.is_file() => {
            std::fs::remove_file(&link).map_err(|e| Error::io(link.display().to_string(), e))?
        }
        Ok(_) => {
            return Err(Error::Usage(format!(
                "{} exists and is not a file or link",
                link.display()
            )))
        }
        Err(_) => {}
    }
    #[cfg(unix)]
    std::os::unix::fs::symlink(PLUGIN_NAME, &link)
        .map_err(|e| Error::io(link.display().to_string(), e))?;
    #[cfg(not(unix))]
    std::fs::copy(dir.join(PLUGIN_NAME), &link)
        .map_err(|e| Error::io(link.display().to_string(), e))?;
    Ok(link)
}

/// `policy --mutating` and `policy --namespace-kit`.
fn mutating_policy(args: PolicyArgs, stdout: &mut dyn Write) -> Result<()> {
    use crate::mutating;
    let namespaces = match &args.namespace_selector {
        Some(s) => Selector::parse(s).map_err(Error::Usage)?,
        None => mutating::default_selector(),
    };
    let mut objects = Vec::new();
    if args.mutating {
        let cluster_id = args
            .cluster_id
            .as_deref()
            .filter(|c| !c.trim().is_empty())
            .ok_or_else(|| {
                Error::Usage(
                    "--mutating needs --cluster-id ID: the token audience is nvcf-icms:<ID>".into(),
                )
            })?;
        let mut opts = mutating::Options::new(cluster_id);
        if let Some(e) = args.expiration_seconds {
            let range = identity::MIN_EXPIRATION_SECONDS..=identity::MAX_EXPIRATION_SECONDS;
            if !range.contains(&e) {
                return Err(Error::Usage(format!(
                    "--expiration-seconds {e} is outside 600..86400 (Kubernetes rejects projected tokens shorter than 10 minutes)"
                )));
            }
            opts.token.expiration_seconds = e;
        }
        if let Some(s) = &args.selector {
            opts.pods = Selector::parse(s).map_err(Error::Usage)?;
        }
        if let Some(n) = args.name {
            opts.name = n;
        }
        opts.include_init_containers = args.include_init_containers;
        opts.api_version = match args.api_version {
            MutatingApiVersion::V1 => mutating::ApiVersion::V1,
            MutatingApiVersion::V1beta1 => mutating::ApiVersion::V1beta1,
        };
        opts.failure_policy = match args.failure_policy {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        }
        .into();
        opts.namespaces = namespaces.clone();
        objects.extend(mutating::objects(&opts));
    }
    objects
        .extend(mutating::namespace_kit(&args.namespace_kit, &namespaces).map_err(Error::Usage)?);
    stdout
        .write_all(mutating::yaml(&objects).as_bytes())
        .map_err(|e| Error::io("<stdout>", e))
}

/// Text for roff: backslashes and hyphens escaped, a leading control character defused.
fn roff(s: &str) -> String {
    let s = s.replace('\\', "\\e").replace('-', "\\-");
    if s.starts_with(['.', '\'']) {
        format!("\\&{s}")
    } else {
        s
    }
}

/// A SYNOPSIS that names each option's value (`[--cluster-id ID]`) and marks what
/// repeats: clap_mangen 0.2 writes `[--cluster-id]`, as if every option were a flag.
fn write_synopsis(cmd: &clap::Command, out: &mut dyn Write) -> std::io::Result<()> {
    use clap::ArgAction;
    let bold = |s: &str| format!("\\fB{}\\fR", roff(s));
    let italic = |s: &str| format!("\\fI{}\\fR", roff(s));
    let mut line = vec![bold(cmd.get_bin_name().unwrap_or(cmd.get_name()))];
    let value = |arg: &clap::Arg| match arg.get_value_names() {
        Some(names) => names
            .iter()
            .map(|n| italic(n))
            .collect::<Vec<_>>()
            .join(" "),
        None => italic(&arg.get_id().as_str().to_uppercase()),
    };
    let repeats =
        |arg: &clap::Arg| matches!(arg.get_action(), ArgAction::Append | ArgAction::Count);
    let bracket = |arg: &clap::Arg, text: String| {
        let text = if repeats(arg) {
            format!("{text}...")
        } else {
            text
        };
        if arg.is_required_set() {
            text
        } else {
            format!("[{text}]")
        }
    };
    for arg in cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
    {
        let mut names = Vec::new();
        if let Some(short) = arg.get_short() {
            names.push(bold(&format!("-{short}")));
        }
        if let Some(long) = arg.get_long() {
            names.push(bold(&format!("--{long}")));
        }
        let mut text = names.join("|");
        if arg.get_action().takes_values() {
            text.push(' ');
            text.push_str(&value(arg));
        }
        line.push(bracket(arg, text));
    }
    for arg in cmd.get_positionals().filter(|a| !a.is_hide_set()) {
        line.push(bracket(arg, value(arg)));
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        line.push(format!("[{}]", italic("COMMAND")));
    }
    writeln!(out, ".SH SYNOPSIS\n{}", line.join(" "))
}

/// A section a page writes itself.
type Section<'a> = dyn Fn(&mut dyn Write) -> std::io::Result<()> + 'a;

/// One page as clap_mangen renders it, with `write_synopsis`'s synopsis; the main
/// page's subcommand list is `subcommands` when given.
fn write_page(
    cmd: &clap::Command,
    out: &mut dyn Write,
    subcommands: Option<&Section<'_>>,
) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    write_synopsis(cmd, out)?;
    man.render_description_section(out)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(out)?;
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        match subcommands {
            Some(list) => list(out)?,
            None => man.render_subcommands_section(out)?,
        }
    }
    if cmd.get_after_long_help().is_some() || cmd.get_after_help().is_some() {
        man.render_extra_section(out)?;
    }
    if cmd.get_version().or(cmd.get_long_version()).is_some() {
        man.render_version_section(out)?;
    }
    Ok(())
}

/// The main man page alone. Its subcommand list names the commands themselves,
/// not `kubectl-nvcf-worker-inject(1)` pages that a single page on stdout does not
/// bring along (`man --dir` writes those and the references that go with them).
fn write_man_page(out: &mut dyn Write) -> std::io::Result<()> {
    let mut cmd = Cli::command()
        .name("kubectl-nvcf-worker")
        .disable_help_subcommand(true);
    cmd.build();
    let list = |out: &mut dyn Write| -> std::io::Result<()> {
        writeln!(out, ".SH SUBCOMMANDS")?;
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            writeln!(out, ".TP\n\\fB{}\\fR", roff(sub.get_name()))?;
            if let Some(about) = sub.get_about() {
                writeln!(out, "{}", roff(&about.to_string()))?;
            }
        }
        writeln!(
            out,
            ".PP\nEach command's options: \\fBkubectl nvcf\\-worker COMMAND \\-\\-help\\fR, or the pages that \\fBkubectl\\-nvcf\\-worker man \\-\\-dir DIR\\fR writes."
        )
    };
    write_page(&cmd, out, Some(&list))
}

/// `man --dir`: the main page and one per subcommand, named as clap_mangen names
/// them (`kubectl-nvcf-worker-inject.1`), each with `write_synopsis`'s synopsis.
fn write_man_pages(dir: &std::path::Path) -> std::io::Result<()> {
    fn each(cmd: &clap::Command, dir: &std::path::Path) -> std::io::Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            each(sub, dir)?;
        }
        let name = cmd.get_display_name().unwrap_or(cmd.get_name());
        let mut page = Vec::new();
        write_page(cmd, &mut page, None)?;
        std::fs::write(dir.join(format!("{name}.1")), page)
    }
    let mut cmd = Cli::command()
        .name("kubectl-nvcf-worker")
        .disable_help_subcommand(true);
    cmd.build();
    each(&cmd, dir)
}

/// How a run ends: the one place an error becomes an exit code (and its message,
/// cause by cause, unless the output already said it).
fn finish(result: Result<()>, stderr: &mut dyn Write) -> Exit {
    let Err(e) = result else {
        return Exit::Success;
    };
    if let Error::Io { source, .. } = &e {
        if source.kind() == std::io::ErrorKind::BrokenPipe {
            return Exit::Success; // the reader went away (`| head`): not our failure
        }
    }
    if !matches!(e, Error::Reported { .. } | Error::Answered(_)) {
        let mut msg = format!("error: {e}");
        let mut cause = std::error::Error::source(&e);
        while let Some(c) = cause {
            if !msg.contains(&c.to_string()) {
                msg.push_str(&format!(": {c}"));
            }
            cause = c.source();
        }
        let _ = writeln!(stderr, "{msg}");
    }
    e.exit()
}

/// The entry point of `kubectl_complete-nvcf_worker`: cobra's `__complete` answer
/// for the words after `kubectl nvcf-worker`.
pub fn complete_main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let answer = crate::complete::cobra_complete(&Cli::command(), &args);
    // A closed stdout is the shell's choice, not a failure.
    let _ = std::io::stdout().lock().write_all(answer.as_bytes());
    0
}

/// The process entry point shared by both binary names. A panic is contained here,
/// once: reported as a bug on stderr, exit 101, never half an output (stdout is
/// written only at the end of a run).
pub fn main() -> i32 {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("error: internal error (a bug: please report it with the input): {info}");
    }));
    // libyaml-safer 0.3 panics on a few inputs; the parser catches those and
    // reports the input as invalid YAML: nothing to say.
    crate::manifest::parse::quiet_parser_panics();
    match std::panic::catch_unwind(face) {
        Ok(exit) => exit.code(),
        Err(_) => Exit::Internal.code(),
    }
}

/// Which face the process is, by the name it was invoked as, and its run.
fn face() -> Exit {
    let run = Run::binary();
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr().lock();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let invoked_as = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("");
    // A link named for kubectl's plugin completion (release archives ship one binary).
    if invoked_as == COMPLETE_NAME {
        complete_main();
        return Exit::Success;
    }
    // The shell scripts of `completion bash|zsh|fish` ask `__complete WORDS...`,
    // as cobra programs answer them (kubectl's own completion does the same).
    if args.get(1).is_some_and(|a| a == "__complete") {
        let words: Vec<String> = args[2..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let answer = crate::complete::cobra_complete(&Cli::command(), &words);
        let _ = stdout.write_all(answer.as_bytes());
        return Exit::Success;
    }
    if invoked_as == LEGACY_PLUGIN_NAME {
        let result = (|| {
            let config = args.get(1).and_then(|a| a.to_str()).ok_or_else(|| {
                Error::Usage(
                    "kustomize plugin: expected the config file path as the first argument".into(),
                )
            })?;
            let mut input = Vec::new();
            std::io::stdin()
                .read_to_end(&mut input)
                .map_err(|e| Error::io("<stdin>", e))?;
            let out = krm::run_legacy_plugin(&run, config, input, &mut stderr)?;
            stdout
                .write_all(&out.stdout)
                .map_err(|e| Error::io("<stdout>", e))
        })();
        return finish(result, &mut stderr);
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                Exit::Usage
            } else {
                Exit::Success // --help, --version
            };
        }
    };
    let result = run_with(&run, cli, &mut stdout, &mut stderr);
    finish(result, &mut stderr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::complete::cobra_complete;

    fn complete(words: &[&str]) -> String {
        let args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        cobra_complete(&Cli::command(), &args)
    }

    #[test]
    fn completes_subcommands_flags_and_values() {
        let top = complete(&[""]);
        assert!(top.starts_with("inject\t"), "{top}");
        assert!(
            top.contains("\ncleanup\t") && top.ends_with(":4\n"),
            "{top}"
        );
        assert_eq!(complete(&["val"]), "validate\tCheck manifests for forged or widened worker identities (pre-commit, CI)\n:4\n");
        let flags = complete(&["inject", "--cl"]);
        assert!(flags.starts_with("--cluster-id\t"), "{flags}");
        assert_eq!(complete(&["inject", "-o", ""]), "yaml\njson\n:4\n");
        assert_eq!(complete(&["inject", "-f", ""]), ":0\n", "files for -f");
        assert_eq!(complete(&["inject", "--cluster-id", "x", ""]), ":0\n");
        assert!(complete(&["completion", "b"]).starts_with("bash\n"));
        assert!(complete(&["completion", ""]).contains("\nkubectl\t"));
    }

    #[test]
    fn completes_kubectl_values_with_the_connection_flags_typed() {
        use crate::complete::{cobra_complete_with, Connection, Lookup};
        let asked = std::cell::RefCell::new(Vec::new());
        let values = |what: Lookup, conn: &Connection| {
            asked.borrow_mut().push((what, conn.clone()));
            vec!["a".to_string(), "b:c".to_string()]
        };
        let ask = |words: &[&str]| {
            let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
            cobra_complete_with(&Cli::command(), &words, &values)
        };
        assert_eq!(
            ask(&["audit", "--kubeconfig", "k", "--context=x", "-n", ""]),
            "a\nb:c\n:4\n"
        );
        let want = Connection {
            kubeconfig: Some("k".into()),
            context: Some("x".into()),
        };
        assert_eq!(asked.borrow().last(), Some(&(Lookup::Namespaces, want)));
        assert_eq!(ask(&["list", "--context=b"]), "--context=b:c\n:4\n");
        assert_eq!(ask(&["list", "--user", ""]), "a\nb:c\n:4\n");
        assert_eq!(asked.borrow().last().unwrap().0, Lookup::Users);
        // Paths complete files; a flag whose value needs `=` takes no next word.
        assert_eq!(ask(&["list", "--kubeconfig", ""]), ":0\n");
        assert!(ask(&["list", "--insecure-skip-tls-verify", "--cont"]).starts_with("--context\t"));
        assert!(ask(&["cleanup", "--dry-run=s"]).starts_with("--dry-run=server\t"));
        // After `--`, words are paths.
        assert_eq!(ask(&["validate", "--", "--o"]), ":0\n");
    }
}
