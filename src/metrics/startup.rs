//! How long the server took to start: from the start of its build to ready (`/readyz`
//! succeeds) and to its initial sync being complete (the rulesets listed and every target's
//! first list evaluated). The two differ only when readiness gave up waiting
//! (`--initial-sync-timeout`). A rollout or a new leader is as slow as the second figure.

use super::{Labels, register};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

pub(super) struct Startup {
    seconds: Family<Labels, Gauge<f64, AtomicU64>>,
}

impl Startup {
    pub(super) fn register(r: &mut Registry) -> Startup {
        Startup {
            seconds: register(
                r,
                "initial_sync_seconds",
                "Seconds from the server's start to ready (stage=\"ready\") and to every first list of the initial sync evaluated (stage=\"complete\"); absent until then",
                Family::default(),
            ),
        }
    }
}

/// A stage of the start.
#[derive(Clone, Copy, Debug)]
pub enum StartStage {
    /// `/readyz` succeeds.
    Ready,
    /// Every first list of the initial sync is in and evaluated.
    Complete,
}

/// The server reached `stage` `after` its start.
pub fn started(stage: StartStage, after: Duration) {
    let stage = match stage {
        StartStage::Ready => "ready",
        StartStage::Complete => "complete",
    };
    super::metrics()
        .startup
        .seconds
        .get_or_create(&vec![("stage", stage.to_string())])
        .set(after.as_secs_f64());
}
