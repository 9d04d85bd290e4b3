//! The admission doors (see the `admission` module): the reviews kube-apiserver sent to each,
//! what each answered, and how long the answer took.
//!
//! Labels come from two fixed sets ([`Door`], [`Answer`]), so a caller of the
//! unauthenticated admission path cannot add series.

use super::{Histograms, Labels, register};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::time::Instant;
use strum::VariantArray as _;

/// Upper bounds of `ifo_admission_review_duration_seconds`: from an answer that compiles nothing
/// (a DELETE) to the compile of a large ruleset, up to the webhook's timeout (5 s), with one at
/// the guard's promise for kube-apiserver's reviews (2 ms at the 99th percentile).
const REVIEW_BUCKETS: [f64; 15] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    5.0,
];

fn review_histogram() -> Histogram {
    Histogram::new(REVIEW_BUCKETS)
}

pub(super) struct Admission {
    reviews: Family<Labels, Counter>,
    duration: Histograms,
    guard_decisions: Family<Labels, Counter>,
    guard_events_dropped: Counter,
    guard_reached: Gauge<f64, AtomicU64>,
    guard_reach_checks: Family<Labels, Counter>,
}

impl Admission {
    pub(super) fn register(r: &mut Registry) -> Admission {
        let admission = Admission {
            reviews: register(
                r,
                "admission_reviews",
                "AdmissionReviews answered, by door (rulesets, evictions, evictions_standby) and decision (allowed, denied; error: the review could not be read or answered, and kube-apiserver applies the webhook's failure policy)",
                Family::default(),
            ),
            duration: register(
                r,
                "admission_review_duration_seconds",
                "Time from a review's arrival to its answer, by door",
                Histograms::new_with_constructor(review_histogram),
            ),
            guard_decisions: register(
                r,
                "guard_decisions",
                "Evictions the maintenance guard decided on, by door (evictions: the leader's; evictions_standby: the standby's, asked for the same evictions), decision (allowed, denied, override: let through by the node's maintenance override; error: no decision, kube-apiserver's failure policy decides) and reason (clear, in_flight, unknown, override, unbound, mirror, node_gone, not_an_eviction; with error: unauthorized, too_large, malformed, timed_out, taken_back: its turn to be read went to a caller that held less, failed)",
                Family::default(),
            ),
            guard_events_dropped: register(
                r,
                "guard_events_dropped",
                "Events of the maintenance guard on nodes that were not written (their queue was full, or kube-apiserver refused or did not answer)",
                Counter::default(),
            ),
            guard_reached: register(
                r,
                "guard_reached",
                "Whether kube-apiserver reached the guard's door this replica stands behind (the leader's while it leads, else the standby's) at its last check, a dry-run eviction sent through kube-apiserver every GUARD_REACH_CHECK_INTERVAL: 1 reached, 0 not or the check failed, NaN before the first check (and without the guard)",
                Gauge::default(),
            ),
            guard_reach_checks: register(
                r,
                "guard_reach_checks",
                "Checks that kube-apiserver reaches this replica's guard door, by result (reached; unreached: kube-apiserver answered without calling it; failed: kube-apiserver refused or did not answer the check, which tells nothing of the door)",
                Family::default(),
            ),
        };
        // No check made yet (or ever, without the guard): not known, which no alert reads as 0.
        admission.guard_reached.set(f64::NAN);
        for &result in ReachResult::VARIANTS {
            drop(
                admission
                    .guard_reach_checks
                    .get_or_create(&vec![("result", result.as_str().to_owned())]),
            );
        }
        for door in [Door::Evictions, Door::EvictionsStandby] {
            for &reason in GuardReason::VARIANTS {
                for allowed in [true, false] {
                    drop(
                        admission
                            .guard_decisions
                            .get_or_create(&guard_labels(door, allowed, reason)),
                    );
                }
            }
            for kind in GUARD_ERRORS {
                drop(
                    admission
                        .guard_decisions
                        .get_or_create(&guard_error_labels(door, kind)),
                );
            }
        }
        // Every label set is known: all start at 0, so that "never happened" reads as 0.
        for &door in Door::VARIANTS {
            for &decision in Answer::VARIANTS {
                drop(admission.reviews.get_or_create(&labels(door, decision)));
            }
            drop(
                admission
                    .duration
                    .get_or_create(&vec![("door", door.as_str().to_owned())]),
            );
        }
        admission
    }
}

/// An admission door of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Door {
    /// `/admission/rulesets`: OperationRuleSets that do not compile are refused.
    #[strum(serialize = "rulesets")]
    RuleSets,

    /// `/admission/evictions`: the maintenance guard, through the leader's Service.
    Evictions,

    /// `/admission/evictions/standby`: the maintenance guard's second door, through the
    /// standbys' Service (its decisions are counted with `door="evictions_standby"`).
    EvictionsStandby,
}

impl Door {
    /// The metric's label value.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Why the maintenance guard decided as it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum GuardReason {
    /// The node's gate is `Clear=True`.
    Clear,
    /// Operations are in flight on the node.
    InFlight,
    /// The server cannot vouch for the node (or cannot tell the pod's node).
    Unknown,
    /// The node's maintenance override let it through.
    Override,
    /// The pod is not bound to a node.
    Unbound,
    /// A mirror pod.
    Mirror,
    /// The cluster no longer has the pod's node.
    NodeGone,
    /// Not an eviction: the guard is not configured for it.
    NotAnEviction,
}

impl GuardReason {
    /// The metric's label value.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

fn guard_labels(door: Door, allowed: bool, reason: GuardReason) -> Labels {
    let decision = match (allowed, reason) {
        (true, GuardReason::Override) => "override",
        (true, _) => "allowed",
        (false, _) => "denied",
    };
    vec![
        ("door", door.as_str().to_owned()),
        ("decision", decision.to_owned()),
        ("reason", reason.as_str().to_owned()),
    ]
}

/// The maintenance guard decided on an eviction at `door`.
pub fn guard_decision(door: Door, allowed: bool, reason: GuardReason) {
    super::metrics()
        .admission
        .guard_decisions
        .get_or_create(&guard_labels(door, allowed, reason))
        .inc();
}

/// The kinds of review the guard could not decide on (see `ReviewError::kind`).
const GUARD_ERRORS: [&str; 6] = [
    "unauthorized",
    "too_large",
    "malformed",
    "timed_out",
    "taken_back",
    "failed",
];

fn guard_error_labels(door: Door, kind: &str) -> Labels {
    vec![
        ("door", door.as_str().to_owned()),
        ("decision", "error".to_owned()),
        ("reason", kind.to_owned()),
    ]
}

/// The maintenance guard could not decide on a review at `door` (`kind`: why): kube-apiserver
/// gets an HTTP error, and its failure policy decides.
pub fn guard_error(door: Door, kind: &'static str) {
    super::metrics()
        .admission
        .guard_decisions
        .get_or_create(&guard_error_labels(door, kind))
        .inc();
}

/// What a check that kube-apiserver reaches a guard door found (see `admission::reach`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum ReachResult {
    /// kube-apiserver called the door.
    Reached,
    /// kube-apiserver answered the check without calling the door.
    Unreached,
    /// kube-apiserver refused or did not answer the check.
    Failed,
}

impl ReachResult {
    fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A check that kube-apiserver reaches this replica's guard door found `result`.
pub fn guard_reach_checked(result: ReachResult) {
    let admission = &super::metrics().admission;
    admission
        .guard_reach_checks
        .get_or_create(&vec![("result", result.as_str().to_owned())])
        .inc();
    admission.guard_reached.set(match result {
        ReachResult::Reached => 1.0,
        ReachResult::Unreached | ReachResult::Failed => 0.0,
    });
}

/// An Event of the maintenance guard was not written.
pub fn guard_event_dropped() {
    super::metrics().admission.guard_events_dropped.inc();
}

/// What a door answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Answer {
    /// The request may go on.
    Allowed,
    /// The request is refused.
    Denied,
    /// The review was malformed, too large, too slow or failed: no decision (HTTP error).
    Error,
}

impl Answer {
    fn as_str(self) -> &'static str {
        self.into()
    }
}

fn labels(door: Door, decision: Answer) -> Labels {
    vec![
        ("door", door.as_str().to_owned()),
        ("decision", decision.as_str().to_owned()),
    ]
}

/// Times one review from its arrival; [`ReviewTimer::finish`] counts it.
#[derive(Debug)]
pub struct ReviewTimer {
    door: Door,
    started: Instant,
}

impl ReviewTimer {
    /// Starts timing a review that just arrived at `door`.
    pub fn start(door: Door) -> ReviewTimer {
        ReviewTimer {
            door,
            started: Instant::now(),
        }
    }

    /// The review was answered with `decision`.
    pub fn finish(self, decision: Answer) {
        let admission = &super::metrics().admission;
        admission
            .reviews
            .get_or_create(&labels(self.door, decision))
            .inc();
        admission
            .duration
            .get_or_create(&vec![("door", self.door.as_str().to_owned())])
            .observe(self.started.elapsed().as_secs_f64());
    }
}
