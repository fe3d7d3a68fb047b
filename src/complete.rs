//! Completion, one engine for every shell: cobra's `__complete` protocol, which
//! kubectl's plugin completion speaks (kubectl 1.26+: `kubectl nvcf-worker <TAB>`
//! runs `kubectl_complete-nvcf_worker` with the words typed after the plugin
//! name, the last one being the word to complete) and which the bash, zsh and
//! fish scripts of `completion SHELL` speak too (`kubectl-nvcf-worker __complete
//! WORDS...`). The answer is one candidate a line (`value<TAB>description`), then
//! `:<directive>`.
//!
//! Values are completed where kubectl completes them: `--context`, `--cluster`
//! and `--user` from the kubeconfig (`--kubeconfig`, else $KUBECONFIG or
//! ~/.kube/config), `-n/--namespace` from the cluster the context selects,
//! falling back to the namespaces the kubeconfig's contexts name when the
//! cluster does not answer within [`NAMESPACE_TIMEOUT`].

use std::time::Duration;

use clap::{Arg, Command};

/// Cobra's directives, the subset kubectl's completion script acts on.
pub const DEFAULT: u32 = 0;
pub const NO_FILE_COMP: u32 = 4;

/// Flags whose value is a path: the shell completes files for them.
const PATH_FLAGS: [&str; 6] = [
    "filename",
    "config",
    "dir",
    "plugin-root",
    "kubeconfig",
    "certificate-authority",
];

/// How long `-n <TAB>` waits for the cluster's namespaces.
pub const NAMESPACE_TIMEOUT: Duration = Duration::from_secs(3);

/// What a flag's value is, for the flags whose values come from outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    Contexts,
    Clusters,
    Users,
    Namespaces,
}

impl Lookup {
    fn of(arg: &Arg) -> Option<Lookup> {
        match arg.get_long()? {
            "context" => Some(Lookup::Contexts),
            "cluster" => Some(Lookup::Clusters),
            "user" => Some(Lookup::Users),
            "namespace" => Some(Lookup::Namespaces),
            _ => None,
        }
    }
}

/// The connection flags already typed, which the lookups honour as kubectl does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Connection {
    pub kubeconfig: Option<String>,
    pub context: Option<String>,
}

/// The cobra `__complete` answer for `args` (the last one is being typed), with
/// values read from the kubeconfig and the cluster.
pub fn cobra_complete(cmd: &Command, args: &[String]) -> String {
    cobra_complete_with(cmd, args, &lookup)
}

/// [`cobra_complete`] with the outside values from `values`.
pub fn cobra_complete_with(
    cmd: &Command,
    args: &[String],
    values: &dyn Fn(Lookup, &Connection) -> Vec<String>,
) -> String {
    let (typed, done) = args
        .split_last()
        .map_or(("", &[][..]), |(l, r)| (l.as_str(), r));
    let mut cmd = cmd;
    let mut pending_value: Option<&Arg> = None;
    let mut conn = Connection::default();
    let note = |arg: &Arg, value: &str, conn: &mut Connection| match arg.get_long() {
        Some("kubeconfig") => conn.kubeconfig = Some(value.to_string()),
        Some("context") => conn.context = Some(value.to_string()),
        _ => {}
    };
    let mut after_dashes = false;
    for word in done {
        if let Some(arg) = pending_value.take() {
            note(arg, word, &mut conn);
            continue;
        }
        if after_dashes {
            continue;
        }
        if word == "--" {
            after_dashes = true;
        } else if let Some(flag) = word.strip_prefix('-') {
            match flag.split_once('=') {
                Some((name, value)) => {
                    if let Some(arg) = find_flag(cmd, name) {
                        note(arg, value, &mut conn);
                    }
                }
                None => pending_value = find_flag(cmd, flag).filter(|a| takes_next_word(a)),
            }
        } else if let Some(sub) = cmd.find_subcommand(word) {
            cmd = sub;
        }
    }
    let mut out = String::new();
    let mut line = |value: &str, help: Option<String>, typed: &str| {
        if value.starts_with(typed) {
            out.push_str(value);
            if let Some(h) = help.filter(|h| !h.is_empty()) {
                out.push('\t');
                out.push_str(&h);
            }
            out.push('\n');
        }
    };
    let help = |a: &Arg| a.get_help().map(|h| h.to_string());
    // `--flag=value` being typed: complete the value, keeping `--flag=`.
    let with_equals = (!after_dashes)
        .then(|| typed.strip_prefix("--"))
        .flatten()
        .and_then(|t| t.split_once('='))
        .and_then(|(name, value)| Some((find_flag(cmd, &format!("-{name}"))?, name, value)))
        .filter(|(a, ..)| a.get_action().takes_values());
    let value_of =
        |arg: &Arg, prefix: &str, typed: &str, line: &mut dyn FnMut(&str, Option<String>, &str)| {
            if arg.get_long().is_some_and(|l| PATH_FLAGS.contains(&l)) {
                return DEFAULT;
            }
            if let Some(what) = Lookup::of(arg) {
                for v in values(what, &conn) {
                    line(&format!("{prefix}{v}"), None, typed);
                }
                return NO_FILE_COMP;
            }
            let possible = arg.get_possible_values();
            for v in &possible {
                line(
                    &format!("{prefix}{}", v.get_name()),
                    v.get_help().map(ToString::to_string),
                    typed,
                );
            }
            NO_FILE_COMP
        };
    let directive = if let Some(arg) = pending_value {
        value_of(arg, "", typed, &mut line)
    } else if let Some((arg, name, _)) = with_equals {
        value_of(arg, &format!("--{name}="), typed, &mut line)
    } else if typed.starts_with('-') && !after_dashes {
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(long) = arg.get_long() {
                line(&format!("--{long}"), help(arg), typed);
            } else if let Some(short) = arg.get_short() {
                line(&format!("-{short}"), help(arg), typed);
            }
        }
        NO_FILE_COMP
    } else if cmd.has_subcommands() {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            line(
                sub.get_name(),
                sub.get_about().map(ToString::to_string),
                typed,
            );
        }
        NO_FILE_COMP
    } else {
        let values: Vec<_> = cmd
            .get_positionals()
            .flat_map(Arg::get_possible_values)
            .collect();
        for v in &values {
            line(v.get_name(), v.get_help().map(ToString::to_string), typed);
        }
        if values.is_empty() {
            DEFAULT
        } else {
            NO_FILE_COMP
        }
    };
    out.push_str(&format!(":{directive}\n"));
    out
}

/// Whether the flag's value is the next word (`--context NAME`), not only
/// `--flag=value` (`--insecure-skip-tls-verify[=BOOL]`).
fn takes_next_word(arg: &Arg) -> bool {
    arg.get_action().takes_values()
        && !arg.is_require_equals_set()
        && arg.get_num_args().is_none_or(|n| n.min_values() > 0)
}

/// The flag `-x` or `--name` (without its leading `-`) of `cmd`.
fn find_flag<'a>(cmd: &'a Command, flag: &str) -> Option<&'a Arg> {
    cmd.get_arguments().find(|a| match flag.strip_prefix('-') {
        Some(long) => a.get_long() == Some(long),
        None => flag.chars().count() == 1 && a.get_short() == flag.chars().next(),
    })
}

/// The values kubectl would offer: kubeconfig entries, and the cluster's
/// namespaces (the contexts' namespaces when the cluster does not answer).
pub fn lookup(what: Lookup, conn: &Connection) -> Vec<String> {
    let Some(k) = read_kubeconfig(conn) else {
        return Vec::new();
    };
    let mut names: Vec<String> = match what {
        Lookup::Contexts => k.contexts.iter().map(|c| c.name.clone()).collect(),
        Lookup::Clusters => k.clusters.iter().map(|c| c.name.clone()).collect(),
        Lookup::Users => k.auth_infos.iter().map(|u| u.name.clone()).collect(),
        Lookup::Namespaces => cluster_namespaces(k.clone(), conn).unwrap_or_else(|| {
            k.contexts
                .iter()
                .filter_map(|c| c.context.as_ref()?.namespace.clone())
                .collect()
        }),
    };
    names.sort();
    names.dedup();
    names
}

fn read_kubeconfig(conn: &Connection) -> Option<kube::config::Kubeconfig> {
    match &conn.kubeconfig {
        Some(path) => kube::config::Kubeconfig::read_from(path).ok(),
        None => kube::config::Kubeconfig::read().ok(),
    }
}

/// The namespaces the context's cluster lists, or None when it does not answer
/// (unreachable, refused, or slower than [`NAMESPACE_TIMEOUT`]).
fn cluster_namespaces(k: kube::config::Kubeconfig, conn: &Connection) -> Option<Vec<String>> {
    use k8s_openapi::api::core::v1::Namespace;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    runtime.block_on(async {
        let list = async {
            let options = kube::config::KubeConfigOptions {
                context: conn.context.clone(),
                ..Default::default()
            };
            let config = kube::Config::from_custom_kubeconfig(k, &options)
                .await
                .ok()?;
            let client = kube::Client::try_from(config).ok()?;
            let api: kube::Api<Namespace> = kube::Api::all(client);
            let list = api.list_metadata(&Default::default()).await.ok()?;
            Some(
                list.items
                    .into_iter()
                    .filter_map(|n| n.metadata.name)
                    .collect(),
            )
        };
        tokio::time::timeout(NAMESPACE_TIMEOUT, list)
            .await
            .ok()
            .flatten()
    })
}

/// The scripts of `completion bash|zsh|fish`: each TAB asks the binary the user
/// typed (`kubectl-nvcf-worker` or `kubectl-nvcf_worker`) for cobra's answer.
pub const BASH: &str = include_str!("complete/kubectl-nvcf-worker.bash");
pub const ZSH: &str = include_str!("complete/_kubectl-nvcf-worker");
pub const FISH: &str = include_str!("complete/kubectl-nvcf-worker.fish");
