//! The integration tests against real control planes (etcd, kube-apiserver,
//! kube-controller-manager built by `scripts/build-control-plane.sh`): the kubectl
//! plugin's commands, the admission policies, and every face of the guard held to
//! one verdict.

// One crate: the support code is compiled and linked once, the suites share one
// control plane (the policy suites each have their own, `live_support::Plane`),
// and libtest runs their tests side by side instead of one binary after another.

#[path = "../live_support/mod.rs"]
mod live_support;
#[path = "../support/mod.rs"]
mod support;

#[path = "../faces.rs"]
mod faces;
#[path = "../live_audit.rs"]
mod live_audit;
#[path = "../live_cleanup.rs"]
mod live_cleanup;
#[path = "../live_contract.rs"]
mod live_contract;
#[path = "../live_deploy.rs"]
mod live_deploy;
#[path = "../live_describe.rs"]
mod live_describe;
#[path = "../live_faults.rs"]
mod live_faults;
#[path = "../live_flags.rs"]
mod live_flags;
#[path = "../live_forms.rs"]
mod live_forms;
#[path = "../live_in_use.rs"]
mod live_in_use;
#[path = "../live_list.rs"]
mod live_list;
#[path = "../live_mutating.rs"]
mod live_mutating;
#[path = "../live_planes.rs"]
mod live_planes;
#[path = "../live_policy.rs"]
mod live_policy;
#[path = "../live_properties.rs"]
mod live_properties;
#[path = "../live_reports.rs"]
mod live_reports;
#[path = "../live_surface.rs"]
mod live_surface;
