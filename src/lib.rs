//! kubectl-nvcf-worker: NVCF worker identity for Kubernetes manifests and clusters.

pub mod cli;
pub mod complete;
pub mod config;
pub mod error;
pub mod guard;
pub mod identity;
pub mod inject;
pub mod krm;
pub mod live;
pub mod manifest;
pub mod mutating;
pub mod pipeline;
pub mod policy;
pub mod recognize;
pub mod report;
pub mod rules;
pub mod sarif;
pub mod selector;
pub mod uninject;
pub mod work;
pub mod workload;
