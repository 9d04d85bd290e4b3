//! The rulesets running on each object event: events by target, evaluation time, lag and errors
//! by ruleset, and the writes of their status. Ruleset series are bounded by the rulesets loaded
//! during the process's life.

use super::{Histograms, Labels, register};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

/// Upper bounds of `ifo_evaluation_duration_seconds`: a few rules take microseconds; the
/// default budget (`CEL_EVALUATION_TIMEOUT`) is 100 ms.
const EVALUATION_BUCKETS: [f64; 11] = [
    0.000_01, 0.000_05, 0.000_1, 0.000_5, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0,
];

fn evaluation_histogram() -> Histogram {
    Histogram::new(EVALUATION_BUCKETS)
}

pub(super) struct Evaluation {
    rule_errors: Family<Labels, Counter>,
    cost_exceeded: Family<Labels, Counter>,
    suspensions: Family<Labels, Counter>,
    object_events: Family<Labels, Counter>,
    events_dropped: Family<Labels, Counter>,
    lag: Family<Labels, Gauge<f64, AtomicU64>>,
    status_writes: Family<Labels, Counter>,
    duration: Histograms,
}

impl Evaluation {
    pub(super) fn register(r: &mut Registry) -> Evaluation {
        Evaluation {
            rule_errors: register(
                r,
                "rule_evaluation_errors",
                "Rule, message, outcome, start-time and label expression errors",
                Family::default(),
            ),
            cost_exceeded: register(
                r,
                "evaluation_cost_exceeded",
                "Evaluations of a ruleset on an object stopped (or ended late) for going over the cost budget",
                Family::default(),
            ),
            suspensions: register(
                r,
                "ruleset_suspensions",
                "Rulesets suspended for going over the evaluation budget too often",
                Family::default(),
            ),
            events_dropped: register(
                r,
                "evaluation_events_dropped",
                "Object events a ruleset's evaluation lane dropped because it was full (the ruleset fell far behind)",
                Family::default(),
            ),
            lag: register(
                r,
                "evaluation_lag_seconds",
                "How long the oldest event a ruleset's evaluation lane holds has waited to be evaluated (0: none waits)",
                Family::default(),
            ),
            status_writes: register(
                r,
                "ruleset_status_writes",
                "Writes of a ruleset's status to kube-apiserver (by the leader)",
                Family::default(),
            ),
            object_events: register(
                r,
                "object_events",
                "Object events evaluated, by target resource",
                Family::default(),
            ),
            duration: register(
                r,
                "evaluation_duration_seconds",
                "Time a ruleset took to evaluate one object event and publish what changed",
                Histograms::new_with_constructor(evaluation_histogram),
            ),
        }
    }
}

fn evaluation() -> &'static Evaluation {
    &super::metrics().evaluation
}

fn ruleset_labels(ruleset: &str) -> Labels {
    vec![("ruleset", ruleset.to_string())]
}

/// Counts one for `ruleset` in `family`.
fn count_for(family: &Family<Labels, Counter>, ruleset: &str) {
    family.get_or_create(&ruleset_labels(ruleset)).inc();
}

/// A rule, message, outcome, start-time or label expression of `ruleset` failed.
pub fn rule_error(ruleset: &str) {
    count_for(&evaluation().rule_errors, ruleset);
}

/// An evaluation of `ruleset` went over the cost budget.
pub fn cost_exceeded(ruleset: &str) {
    count_for(&evaluation().cost_exceeded, ruleset);
}

/// `ruleset` was suspended for going over the budget too often.
pub fn ruleset_suspended(ruleset: &str) {
    count_for(&evaluation().suspensions, ruleset);
}

/// An object event for `ruleset` was dropped because its evaluation lane was full.
pub fn evaluation_event_dropped(ruleset: &str) {
    count_for(&evaluation().events_dropped, ruleset);
}

/// `ruleset`'s status was written.
pub fn ruleset_status_written(ruleset: &str) {
    count_for(&evaluation().status_writes, ruleset);
}

/// A watch event of `target` (a resource) reached evaluation.
pub fn object_event(target: &str) {
    evaluation()
        .object_events
        .get_or_create(&vec![("target", target.to_string())])
        .inc();
}

/// Times the evaluations of one ruleset. Made once per evaluation lane, so that an event costs
/// two clock reads and an atomic update, not a lookup of the ruleset's series.
#[derive(Clone)]
pub struct EvaluationTimer(Histogram);

impl EvaluationTimer {
    /// The timer of `ruleset`'s evaluations.
    pub fn new(ruleset: &str) -> EvaluationTimer {
        EvaluationTimer(
            evaluation()
                .duration
                .get_or_create(&ruleset_labels(ruleset))
                .clone(),
        )
    }

    /// Runs `f`, counting how long it took.
    pub fn time<T>(&self, f: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let out = f();
        self.0.observe(started.elapsed().as_secs_f64());
        out
    }
}

/// The lag of one ruleset's evaluation lane (`ifo_evaluation_lag_seconds`). Made once per lane.
#[derive(Clone)]
pub struct EvaluationLag(Gauge<f64, AtomicU64>);

impl EvaluationLag {
    /// The lag of `ruleset`'s lane.
    pub fn new(ruleset: &str) -> EvaluationLag {
        EvaluationLag(
            evaluation()
                .lag
                .get_or_create(&ruleset_labels(ruleset))
                .clone(),
        )
    }

    /// The oldest event of the lane has waited `lag` (zero: none waits).
    pub fn set(&self, lag: Duration) {
        self.0.set(lag.as_secs_f64());
    }
}
