//! The admission doors (see the `admission` module): the reviews kube-apiserver sent to each,
//! what each answered, and how long the answer took.
//!
//! Labels come from two fixed sets ([`Door`], [`Decision`]), so a caller of the
//! unauthenticated admission path cannot add series.

use super::{Histograms, Labels, register};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::time::Instant;

/// Upper bounds of `ifo_admission_review_duration_seconds`: from an answer that compiles nothing
/// (a DELETE) to the compile of a large ruleset, up to the webhook's timeout (5 s).
const REVIEW_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

fn review_histogram() -> Histogram {
    Histogram::new(REVIEW_BUCKETS)
}

pub(super) struct Admission {
    reviews: Family<Labels, Counter>,
    duration: Histograms,
}

impl Admission {
    pub(super) fn register(r: &mut Registry) -> Admission {
        let admission = Admission {
            reviews: register(
                r,
                "admission_reviews",
                "AdmissionReviews answered, by door (rulesets) and decision (allowed, denied; error: the review could not be read or answered, and kube-apiserver applies the webhook's failure policy)",
                Family::default(),
            ),
            duration: register(
                r,
                "admission_review_duration_seconds",
                "Time from a review's arrival to its answer, by door",
                Histograms::new_with_constructor(review_histogram),
            ),
        };
        // Every label set is known: all start at 0, so that "never happened" reads as 0.
        for door in Door::ALL {
            for decision in Decision::ALL {
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    /// `/admission/rulesets`: OperationRuleSets that do not compile are refused.
    RuleSets,
}

impl Door {
    const ALL: [Door; 1] = [Door::RuleSets];

    fn as_str(self) -> &'static str {
        match self {
            Door::RuleSets => "rulesets",
        }
    }
}

/// What a door answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The request may go on.
    Allowed,
    /// The request is refused.
    Denied,
    /// The review was malformed, too large, too slow or failed: no decision (HTTP error).
    Error,
}

impl Decision {
    const ALL: [Decision; 3] = [Decision::Allowed, Decision::Denied, Decision::Error];

    fn as_str(self) -> &'static str {
        match self {
            Decision::Allowed => "allowed",
            Decision::Denied => "denied",
            Decision::Error => "error",
        }
    }
}

fn labels(door: Door, decision: Decision) -> Labels {
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
    pub fn finish(self, decision: Decision) {
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
