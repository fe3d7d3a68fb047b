//! The integration tests that run real tools beside the plugin: kubectl, kpt,
//! kustomize, helm 3 and 4, shells, the release archive.

// One crate: the support code is compiled and linked once, and libtest runs
// the files' tests side by side instead of one binary after another.

#[path = "../helm_support/mod.rs"]
mod helm_support;
#[path = "../support/mod.rs"]
mod support;

#[path = "../argocd.rs"]
mod argocd;
#[path = "../distribution.rs"]
mod distribution;
#[path = "../e2e_kpt.rs"]
mod e2e_kpt;
#[path = "../e2e_kustomize.rs"]
mod e2e_kustomize;
#[path = "../examples.rs"]
mod examples;
#[path = "../friction.rs"]
mod friction;
#[path = "../helm.rs"]
mod helm;
#[path = "../json_io.rs"]
mod json_io;
#[path = "../krm_kpt.rs"]
mod krm_kpt;
#[path = "../package_dirs.rs"]
mod package_dirs;
#[path = "../readme_commands.rs"]
mod readme_commands;
