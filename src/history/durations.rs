//! The durations of completed operations, per ruleset and operation.
//!
//! Each (ruleset, operation) keeps an HDR histogram of the durations of the operations that
//! succeeded (the `hdrhistogram` crate: constant memory whatever the count, O(1) to record,
//! quantiles within 1 % of the true value), and a count per other outcome. A histogram covers
//! 1 ms to 30 days with two significant digits: about 13 KiB, fixed, per rule operation; the
//! number of them is bounded by the loaded rules (those of removed rules and rulesets are
//! dropped).

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};

use hdrhistogram::Histogram;
use jiff::SignedDuration;

use crate::operation::{InFlightOperation, Outcome};
use crate::ruleset::OperationDurations;

/// Longest duration told apart; longer ones count as this long.
const HIGHEST_MS: u64 = 30 * 24 * 3600 * 1000;
/// Significant digits of the recorded durations: quantiles within 1 %.
const SIGNIFICANT_DIGITS: u8 = 2;

/// The quantiles of one rule operation's successful durations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Quantiles {
    /// How many succeeded.
    pub count: u64,
    /// Median.
    pub p50: SignedDuration,
    /// 90th percentile.
    pub p90: SignedDuration,
    /// 99th percentile.
    pub p99: SignedDuration,
}

/// The quantiles of one rule operation, with what names it in metrics.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LearnedRule {
    /// The ruleset.
    pub ruleset: String,
    /// The ruleset's component.
    pub component: String,
    /// The rule's operation.
    pub operation: String,
    /// What its successful operations took.
    pub quantiles: Quantiles,
}

/// What is known of one (ruleset, operation).
struct Learned {
    /// The ruleset's component, as last seen.
    component: String,
    succeeded: Histogram<u32>,
    /// Completions with another outcome, by outcome name.
    others: BTreeMap<String, u64>,
    /// The quantiles of `succeeded`, computed when it changes: reading them walks the
    /// histogram's buckets, and they are read on every change of an active operation.
    quantiles: Quantiles,
}

impl Learned {
    fn new(component: &str) -> Learned {
        Learned {
            component: component.to_owned(),
            succeeded: Histogram::new_with_bounds(1, HIGHEST_MS, SIGNIFICANT_DIGITS)
                .expect("the bounds are valid"),
            others: BTreeMap::new(),
            quantiles: Quantiles {
                count: 0,
                p50: SignedDuration::ZERO,
                p90: SignedDuration::ZERO,
                p99: SignedDuration::ZERO,
            },
        }
    }

    fn record(&mut self, duration: SignedDuration) {
        let ms = u64::try_from(duration.as_millis()).unwrap_or(0);
        self.succeeded.saturating_record(ms.clamp(1, HIGHEST_MS));
        self.quantiles = self.compute_quantiles();
    }

    fn quantiles(&self) -> Quantiles {
        self.quantiles
    }

    fn compute_quantiles(&self) -> Quantiles {
        let at = |q: f64| {
            let ms = self.succeeded.value_at_quantile(q);
            SignedDuration::from_millis(i64::try_from(ms).unwrap_or(i64::MAX))
        };
        Quantiles {
            count: self.succeeded.len(),
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
        }
    }

    /// Rebuilds a distribution with `published`'s count and quantiles: half the samples at the
    /// median, up to 90 % at the 90th percentile, the rest at the 99th (at least one there
    /// when it differs), so that the quantiles read back are the ones published.
    fn seeded(component: &str, published: &OperationDurations) -> Learned {
        let mut learned = Learned::new(component);
        let n = published.count;
        let ms = |seconds: f64| {
            // Saturating float to integer conversion; negative and NaN become 0.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let ms = (seconds * 1000.0).round() as u64;
            ms.clamp(1, HIGHEST_MS)
        };
        let at_p50 = n.div_ceil(2);
        let mut at_p90 = (n * 9).div_ceil(10).saturating_sub(at_p50);
        let mut at_p99 = n - at_p50 - at_p90;
        if at_p99 == 0 && at_p90 > 1 && published.p99_seconds > published.p90_seconds {
            at_p90 -= 1;
            at_p99 = 1;
        }
        for (seconds, count) in [
            (published.p50_seconds, at_p50),
            (published.p90_seconds, at_p90),
            (published.p99_seconds, at_p99),
        ] {
            if count > 0 {
                let count = u32::try_from(count).unwrap_or(u32::MAX);
                let _ = learned.succeeded.record_n(ms(seconds), count);
            }
        }
        learned.others = published.other_outcomes.clone();
        learned.quantiles = learned.compute_quantiles();
        learned
    }

    fn published(&self, operation: &str) -> OperationDurations {
        let q = self.quantiles();
        OperationDurations {
            operation: operation.to_owned(),
            count: q.count,
            p50_seconds: seconds(q.p50),
            p90_seconds: seconds(q.p90),
            p99_seconds: seconds(q.p99),
            other_outcomes: self.others.clone(),
        }
    }
}

/// Seconds with millisecond precision, as published.
fn seconds(d: SignedDuration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// (ruleset, operation).
type Key = (String, String);

/// The durations learned for every loaded rule operation. Shared (`Arc`) between the detector,
/// which records completions, and the ruleset controller, which publishes and seeds them.
#[derive(Default)]
pub struct Durations {
    learned: Mutex<HashMap<Key, Learned>>,
}

impl std::fmt::Debug for Durations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durations").finish_non_exhaustive()
    }
}

impl Durations {
    fn lock(&self) -> parking_lot::MutexGuard<'_, HashMap<Key, Learned>> {
        self.learned.lock()
    }

    /// `op` completed: its duration counts if it succeeded, its outcome otherwise.
    pub fn completed(&self, op: &InFlightOperation) {
        let Some(outcome) = op.outcome else { return };
        let mut learned = self.lock();
        let entry = learned
            .entry((op.ruleset.clone(), op.operation.clone()))
            .or_insert_with(|| Learned::new(&op.component));
        entry.component.clone_from(&op.component);
        if outcome == Outcome::Succeeded {
            let end = op.completed.unwrap_or(op.last_detected);
            entry.record(end.duration_since(op.created));
        } else {
            *entry.others.entry(outcome.as_str().to_owned()).or_default() += 1;
        }
    }

    /// The quantiles of `operation` of `ruleset`, once one succeeded.
    pub(crate) fn quantiles(&self, ruleset: &str, operation: &str) -> Option<Quantiles> {
        let learned = self.lock();
        let q = learned
            .get(&(ruleset.to_owned(), operation.to_owned()))?
            .quantiles();
        (q.count > 0).then_some(q)
    }

    /// What `status.operationDurations` of `ruleset` shows, by operation.
    pub(crate) fn published(&self, ruleset: &str) -> Vec<OperationDurations> {
        let learned = self.lock();
        let mut out: Vec<OperationDurations> = learned
            .iter()
            .filter(|((rs, _), _)| rs == ruleset)
            .map(|((_, op), l)| l.published(op))
            .collect();
        out.sort_by(|a, b| a.operation.cmp(&b.operation));
        out
    }

    /// Takes what a ruleset's status says was learned before (by this server before a restart,
    /// or by the previous leader), for the operations nothing was learned of yet here.
    pub(crate) fn seed(&self, ruleset: &str, component: &str, published: &[OperationDurations]) {
        let mut learned = self.lock();
        for p in published {
            learned
                .entry((ruleset.to_owned(), p.operation.clone()))
                .or_insert_with(|| Learned::seeded(component, p));
        }
    }

    /// Every rule operation with at least `min_samples` successes, sorted.
    pub(crate) fn learned(&self, min_samples: u64) -> Vec<LearnedRule> {
        let learned = self.lock();
        let mut out: Vec<LearnedRule> = learned
            .iter()
            .map(|((ruleset, operation), l)| (ruleset, operation, l, l.quantiles()))
            .filter(|(.., q)| q.count >= min_samples)
            .map(|(ruleset, operation, l, quantiles)| LearnedRule {
                ruleset: ruleset.clone(),
                component: l.component.clone(),
                operation: operation.clone(),
                quantiles,
            })
            .collect();
        out.sort_by(|a, b| (&a.ruleset, &a.operation).cmp(&(&b.ruleset, &b.operation)));
        out
    }

    /// `ruleset` now has rules for `operations` only: what was learned of the others goes.
    pub(crate) fn retain(&self, ruleset: &str, operations: &[String]) {
        self.lock()
            .retain(|(rs, op), _| rs != ruleset || operations.contains(op));
    }

    /// `ruleset` is gone: everything learned of it goes.
    pub(crate) fn forget(&self, ruleset: &str) {
        self.retain(ruleset, &[]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::Phase;

    fn completed(operation: &str, seconds: i64, outcome: Outcome) -> InFlightOperation {
        let mut op = (*crate::operation::test_record("t")).clone();
        op.operation = operation.to_owned();
        op.phase = Phase::Completed;
        op.outcome = Some(outcome);
        op.completed = Some(op.created + SignedDuration::from_secs(seconds));
        op
    }

    #[test]
    fn quantiles_of_successes_and_counts_of_the_rest() {
        let d = Durations::default();
        for s in 1..=100 {
            d.completed(&completed("Importing", s, Outcome::Succeeded));
        }
        d.completed(&completed("Importing", 5000, Outcome::Failed));
        d.completed(&completed("Importing", 7, Outcome::SubjectDeleted));
        let q = d.quantiles("rs", "Importing").unwrap();
        assert_eq!(q.count, 100);
        let near = |d: SignedDuration, s: f64| (d.as_secs_f64() - s).abs() <= s * 0.01;
        assert!(near(q.p50, 50.0), "{q:?}");
        assert!(near(q.p90, 90.0), "{q:?}");
        assert!(near(q.p99, 99.0), "{q:?}");
        let published = d.published("rs");
        assert_eq!(published.len(), 1);
        assert_eq!(published[0].other_outcomes["Failed"], 1);
        assert_eq!(published[0].other_outcomes["SubjectDeleted"], 1);
        assert!(d.quantiles("rs", "Other").is_none());
    }

    #[test]
    fn what_is_published_seeds_the_same_quantiles() {
        let d = Durations::default();
        for s in [10, 11, 12, 13, 40] {
            d.completed(&completed("Cloning", s, Outcome::Succeeded));
        }
        d.completed(&completed("Cloning", 3, Outcome::Canceled));
        let published = d.published("rs");
        let restarted = Durations::default();
        restarted.seed("rs", "c", &published);
        assert_eq!(restarted.published("rs"), published);
        // Seeding never overwrites what was learned here.
        let before = d.published("rs");
        d.seed(
            "rs",
            "c",
            &[OperationDurations {
                operation: "Cloning".into(),
                count: 1000,
                p50_seconds: 1.0,
                p90_seconds: 1.0,
                p99_seconds: 1.0,
                other_outcomes: BTreeMap::new(),
            }],
        );
        assert_eq!(d.published("rs"), before);
        d.retain("rs", &[]);
        assert!(d.published("rs").is_empty());
    }

    #[test]
    fn seeding_a_large_count_keeps_the_quantiles() {
        let published = OperationDurations {
            operation: "Backup".into(),
            count: 1234,
            p50_seconds: 60.0,
            p90_seconds: 300.0,
            p99_seconds: 1800.0,
            other_outcomes: BTreeMap::new(),
        };
        let d = Durations::default();
        d.seed("rs", "c", std::slice::from_ref(&published));
        let q = d.quantiles("rs", "Backup").unwrap();
        assert_eq!(q.count, 1234);
        let near = |d: SignedDuration, s: f64| (d.as_secs_f64() - s).abs() <= s * 0.01;
        assert!(
            near(q.p50, 60.0) && near(q.p90, 300.0) && near(q.p99, 1800.0),
            "{q:?}"
        );
    }
}
