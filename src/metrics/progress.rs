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
//! - `ifo_expectation_coverage{ruleset,operation,quantile}` and
//!   `ifo_expectation_ends{ruleset,operation}`: of the last ends of each rule operation judged
//!   against their first estimate (at most 100), the share that came by the expected end
//!   (`0.5`) and by the band's far edge (`0.9`), and how many were judged; read at scrape time.

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
        )?;
        let coverage = self
            .0
            .learned
            .read()
            .as_ref()
            .map(|d| d.coverages())
            .unwrap_or_default();
        encode_gauges(
            &mut encoder,
            "expectation_coverage",
            "Of the last ends of each rule judged against the first estimate of their operation (at most 100), the share that ended by the expected end (quantile 0.5) and by the p90 end (quantile 0.9)",
            coverage.iter().flat_map(|c| {
                [("0.5", c.figures.p50), ("0.9", c.figures.p90)].map(|(quantile, share)| {
                    let labels = [
                        ("ruleset", c.ruleset.as_str()),
                        ("operation", c.operation.as_str()),
                        ("quantile", quantile),
                    ];
                    (labels, share)
                })
            }),
        )?;
        encode_gauges(
            &mut encoder,
            "expectation_ends",
            "Ends of each rule judged against the first estimate of their operation, of the last 100 at most: what ifo_expectation_coverage is a share of",
            coverage.iter().map(|c| {
                let labels = [
                    ("ruleset", c.ruleset.as_str()),
                    ("operation", c.operation.as_str()),
                ];
                (labels, i64::try_from(c.figures.ends).unwrap_or(i64::MAX))
            }),
        )
    }
}

/// The stalled operations now (replaces the previous counts).
pub fn set_stalled(counts: StalledCounts) {
    *super::metrics().progress.0.stalled.write() = counts;
}

/// `ifo_operation_learned_duration_seconds`, `ifo_expectation_coverage` and
/// `ifo_expectation_ends` read `durations` from now on.
pub fn serve_learned_from(durations: Arc<Durations>) {
    *super::metrics().progress.0.learned.write() = Some(durations);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::{InFlightOperation, Outcome, Phase};
    use jiff::SignedDuration;
    use prometheus_client::registry::Registry;

    /// An operation of the test ruleset `rs` that took `seconds`, completed.
    fn ended(uid: &str, seconds: i64) -> InFlightOperation {
        let mut op = (*crate::operation::test_record(uid)).clone();
        op.uid = uid.to_owned();
        op.phase = Phase::Completed;
        op.outcome = Some(Outcome::Succeeded);
        op.completed = Some(op.created + SignedDuration::from_secs(seconds));
        op
    }

    #[test]
    fn coverage_is_exposed_per_rule_once_an_end_is_judged() {
        let durations = Arc::new(Durations::default());
        let progress = Progress::default();
        *progress.0.learned.write() = Some(durations.clone());
        let mut registry = Registry::default();
        registry
            .sub_registry_with_prefix("ifo")
            .register_collector(Box::new(progress));
        let render = |registry: &Registry| {
            let mut out = String::new();
            prometheus_client::encoding::text::encode(&mut out, registry).unwrap();
            out
        };
        for i in 0..MIN_SAMPLES {
            durations.completed(&ended(&format!("learned-{i}"), 10));
        }
        assert!(!render(&registry).contains("ifo_expectation_coverage{"));
        // Two estimated at the start (10 s, p90 10 s): one ends in 5 s, one in 20 s.
        for (uid, seconds) in [("a", 5), ("b", 20)] {
            let mut op = ended(uid, seconds);
            op.phase = Phase::Active;
            let shown = crate::history::refreshed(&Arc::new(op.clone()), &durations, op.created)
                .expect("an estimate from history");
            durations.shown(&shown);
            durations.completed(&op);
        }
        let text = render(&registry);
        for line in [
            r#"ifo_expectation_coverage{ruleset="rs",operation="Op",quantile="0.5"} 0.5"#,
            r#"ifo_expectation_coverage{ruleset="rs",operation="Op",quantile="0.9"} 0.5"#,
            r#"ifo_expectation_ends{ruleset="rs",operation="Op"} 2"#,
        ] {
            assert!(text.contains(line), "no {line} in:\n{text}");
        }
        assert!(
            text.contains("# TYPE ifo_expectation_coverage gauge"),
            "{text}"
        );
    }
}
