//! Whether operations progress: the series "stuck" alerts read.
//!
//! - `ifo_operations_stalled{component,operation,kind,cause}`: active operations that are
//!   stalled, by cause (`rule`: the rule's `stalled` expression says so; `history`: running
//!   past 1.5 × the 99th percentile of what the rule's operations took). Counted by the
//!   detector's periodic pass over the active operations (see
//!   `Detector::refresh_expectations`), so it lags by at most that period; label sets that
//!   count nothing are absent.
//! - `ifo_operation_learned_duration_seconds{ruleset,component,operation,quantile}`: the
//!   learned durations (0.5, 0.9, 0.99) of each rule operation that has enough history to
//!   judge by (see `history`), read at scrape time. Alerts with fixed thresholds apply to
//!   operations without it.

use super::encode_gauges;
use crate::history::{Durations, MIN_SAMPLES};
use parking_lot::RwLock;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Stalled active operations by (component, operation, kind, cause).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct StalledCounts(BTreeMap<(String, String, String, &'static str), u64>);

impl StalledCounts {
    /// One more stalled operation.
    pub fn add(&mut self, component: &str, operation: &str, kind: &str, cause: &'static str) {
        *self
            .0
            .entry((
                component.to_owned(),
                operation.to_owned(),
                kind.to_owned(),
                cause,
            ))
            .or_default() += 1;
    }
}

/// The source of both families; clones share it (one is registered, one kept to update).
#[derive(Default, Clone)]
pub(super) struct Progress(Arc<State>);

#[derive(Default)]
struct State {
    stalled: RwLock<StalledCounts>,
    learned: RwLock<Option<Arc<Durations>>>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress")
    }
}

impl Collector for Progress {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stalled = self.0.stalled.read().clone();
        encode_gauges(
            &mut encoder,
            "operations_stalled",
            "Operations in flight that are stalled, by component, operation, subject kind and cause (rule: the rule says so; history: running past 1.5 x the 99th percentile of what its rule's operations took)",
            stalled
                .0
                .iter()
                .map(|((component, operation, kind, cause), n)| {
                    let labels = [
                        ("component", component.as_str()),
                        ("operation", operation.as_str()),
                        ("kind", kind.as_str()),
                        ("cause", *cause),
                    ];
                    (labels, i64::try_from(*n).unwrap_or(i64::MAX))
                }),
        )?;
        let learned = self
            .0
            .learned
            .read()
            .as_ref()
            .map(|d| d.learned(MIN_SAMPLES))
            .unwrap_or_default();
        encode_gauges(
            &mut encoder,
            "operation_learned_duration_seconds",
            "Quantiles of how long the operations of each rule took when they succeeded, once it has enough of them to judge by",
            learned.iter().flat_map(|l| {
                [
                    ("0.5", l.quantiles.p50),
                    ("0.9", l.quantiles.p90),
                    ("0.99", l.quantiles.p99),
                ]
                .map(|(quantile, seconds)| {
                    let labels = [
                        ("ruleset", l.ruleset.as_str()),
                        ("component", l.component.as_str()),
                        ("operation", l.operation.as_str()),
                        ("quantile", quantile),
                    ];
                    (labels, seconds.as_secs_f64())
                })
            }),
        )
    }
}

/// The stalled operations now (replaces the previous counts).
pub fn set_stalled(counts: StalledCounts) {
    *super::metrics().progress.0.stalled.write() = counts;
}

/// `ifo_operation_learned_duration_seconds` reads `durations` from now on.
pub fn serve_learned_from(durations: Arc<Durations>) {
    *super::metrics().progress.0.learned.write() = Some(durations);
}
