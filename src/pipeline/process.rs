//! Processors: inject, uninject and validate behind one interface, each turning a
//! batch into one `Outcome`. The one place a mode becomes a processor: the CLI, the
//! KRM function and the kustomize plugin all dispatch here.

use crate::config::{Config, Mode};
use crate::error::Result;
use crate::guard;
use crate::identity;
use crate::inject;
use crate::manifest::batch::{self, Batch, Need};
use crate::manifest::Document;
use crate::report::Outcome;
use crate::uninject;

use super::load::LOCAL_CONFIG;

#[derive(Clone, Copy, Debug)]
pub enum Processor<'a> {
    Inject(&'a Config),
    Uninject,
    Validate,
}

impl<'a> Processor<'a> {
    /// The processor a config's `mode` names.
    pub fn for_config(cfg: &'a Config) -> Processor<'a> {
        match cfg.mode {
            Mode::Inject => Processor::Inject(cfg),
            Mode::Uninject => Processor::Uninject,
            Mode::Validate => Processor::Validate,
        }
    }

    /// A mistake in the config that no input can make right (no cluster ID for a
    /// PSAT token): refused before anything is read, on every face alike.
    pub fn ready(&self) -> Result<()> {
        if let Processor::Inject(cfg) = self {
            if cfg.is_psat() {
                cfg.token_spec()?;
            }
        }
        Ok(())
    }

    /// The memory strategy: drops what the processor will not need of a document as
    /// soon as it is read (`batch::evict`). Uninject drops nothing: it judges its
    /// whole output.
    pub fn evict(&self, doc: &mut Document) {
        match self {
            Processor::Inject(cfg) => {
                let need = |o: &batch::Object| inject::need(o, cfg);
                let kept = [
                    inject::HELM_HOOK,
                    inject::HELM_POSTRENDER_FILENAME,
                    LOCAL_CONFIG,
                ];
                batch::evict(doc, &kept, need);
            }
            // The guard finds nothing in an object that is clean on its own whatever
            // else the batch holds (`guard::clean_alone`), so its tree goes, leaving
            // a skeleton; the kinds of a trio are matched against each other.
            Processor::Validate => {
                batch::evict(doc, &[], |o| {
                    if identity::TRIO_KINDS.contains(&o.kind()) || !guard::clean_alone(o) {
                        Need::Tree
                    } else {
                        Need::Skeleton
                    }
                });
            }
            Processor::Uninject => {}
        }
    }

    /// Whether `evict` drops anything.
    pub fn evicts(&self) -> bool {
        !matches!(self, Processor::Uninject)
    }

    pub fn process(&self, batch: &mut Batch) -> Outcome {
        match self {
            Processor::Inject(cfg) => inject::inject(batch, cfg),
            Processor::Uninject => uninject::uninject(batch),
            Processor::Validate => Outcome {
                findings: guard::check(
                    batch,
                    &guard::Allow {
                        self_refs: &Default::default(),
                    },
                ),
                reports: Vec::new(),
            },
        }
    }
}
