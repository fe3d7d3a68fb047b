//! Completion for kubectl's plugin completion (kubectl 1.26+): `kubectl nvcf-worker
//! <TAB>` runs `kubectl_complete-nvcf_worker` with the words typed after the plugin
//! name, the last one being the word to complete, and reads cobra's `__complete`
//! answer: one candidate a line (`value<TAB>description`), then `:<directive>`.

use clap::{Arg, Command};

/// Cobra's directives, the subset kubectl's completion script acts on.
const DEFAULT: u32 = 0;
const NO_FILE_COMP: u32 = 4;

/// Flags whose value is a path: the shell completes files for them.
const PATH_FLAGS: [&str; 4] = ["filename", "config", "dir", "plugin-root"];

/// The cobra `__complete` answer for `args` (the last one is being typed).
pub fn cobra_complete(cmd: &Command, args: &[String]) -> String {
    let (typed, done) = args
        .split_last()
        .map_or(("", &[][..]), |(l, r)| (l.as_str(), r));
    let mut cmd = cmd;
    let mut pending_value: Option<&Arg> = None;
    for word in done {
        if pending_value.take().is_some() {
            continue;
        }
        if let Some(flag) = word.strip_prefix('-') {
            if !word.contains('=') {
                pending_value = find_flag(cmd, flag).filter(|a| a.get_action().takes_values());
            }
        } else if let Some(sub) = cmd.find_subcommand(word) {
            cmd = sub;
        }
    }
    let mut out = String::new();
    let mut line = |value: &str, help: Option<String>| {
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
    let directive = if let Some(arg) = pending_value {
        if arg.get_long().is_some_and(|l| PATH_FLAGS.contains(&l)) {
            DEFAULT
        } else {
            for v in arg.get_possible_values() {
                line(v.get_name(), v.get_help().map(ToString::to_string));
            }
            NO_FILE_COMP
        }
    } else if typed.starts_with('-') {
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(long) = arg.get_long() {
                line(&format!("--{long}"), help(arg));
            } else if let Some(short) = arg.get_short() {
                line(&format!("-{short}"), help(arg));
            }
        }
        NO_FILE_COMP
    } else if cmd.has_subcommands() {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            line(sub.get_name(), sub.get_about().map(ToString::to_string));
        }
        NO_FILE_COMP
    } else {
        let values: Vec<_> = cmd
            .get_positionals()
            .flat_map(Arg::get_possible_values)
            .collect();
        for v in &values {
            line(v.get_name(), v.get_help().map(ToString::to_string));
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

/// The flag `-x` or `--name` (without its leading `-`) of `cmd`.
fn find_flag<'a>(cmd: &'a Command, flag: &str) -> Option<&'a Arg> {
    cmd.get_arguments().find(|a| match flag.strip_prefix('-') {
        Some(long) => a.get_long() == Some(long),
        None => flag.chars().count() == 1 && a.get_short() == flag.chars().next(),
    })
}
