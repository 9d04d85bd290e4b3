//! The durations of completed operations, per ruleset and operation, and how often the
//! estimates read from them came true.
//!
//! Each (ruleset, operation) keeps the durations of its last [`WINDOW`] operations that
//! succeeded (milliseconds, 800 bytes), the quantiles read from them, a count of all that
//! succeeded, a count per other outcome, and the judgements of its last ends against their
//! first estimates (`coverage`). A window rather than every duration since the start: when a
//! rule's operations become slower (a bigger VM, a slower network, a new version), its estimates
//! follow within a window's worth of operations instead of being outvoted by the past (see
//! docs/performance.md for how many). The number of them is bounded by the loaded rules (those
//! of removed rules and rulesets are dropped).

use parking_lot::Mutex;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, VecDeque};

use jiff::SignedDuration;

use super::coverage::{Coverage, Estimates, Figures};
use super::own::{OwnDurations, in_flight, named_key};
use super::quantiles::{Quantiles, quantiles_of};
use crate::operation::{InFlightOperation, Outcome};
use crate::ruleset::OperationDurations;

/// Successful durations a rule operation's quantiles are read from: the most recent ones.
pub const WINDOW: usize = 100;

/// Longest duration told apart; longer ones count as this long.
const HIGHEST_MS: u64 = 30 * 24 * 3600 * 1000;

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

/// How often one rule operation's estimates came true, with what names it in metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleCoverage {
    /// The ruleset.
    pub ruleset: String,
    /// The rule's operation.
    pub operation: String,
    /// Its last ends, judged.
    pub figures: Figures,
}

/// What is known of one (ruleset, operation).
struct Learned {
    /// The ruleset's component, as last seen.
    component: String,
    /// The durations (ms) of the last [`WINDOW`] that succeeded, oldest first.
    recent: VecDeque<u64>,
    /// How many succeeded, in all.
    succeeded: u64,
    /// Completions with another outcome, by outcome name.
    others: BTreeMap<String, u64>,
    /// The quantiles of `recent`, computed when it changes: they are read on every change of
    /// an active operation.
    quantiles: Quantiles,
    /// Its last ends, judged against their first estimates.
    coverage: Coverage,
}

impl Learned {
    fn new(component: &str) -> Learned {
        Learned {
            component: component.to_owned(),
            recent: VecDeque::with_capacity(WINDOW),
            succeeded: 0,
            others: BTreeMap::new(),
            quantiles: Quantiles {
                count: 0,
                p50: SignedDuration::ZERO,
                p90: SignedDuration::ZERO,
                p99: SignedDuration::ZERO,
            },
            coverage: Coverage::default(),
        }
    }

    /// Keeps `ms` among the recent durations (the oldest goes when the window is full).
    fn push(&mut self, ms: u64) {
        if self.recent.len() == WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(ms.clamp(1, HIGHEST_MS));
    }

    /// Keeps a success that took `duration`; the milliseconds it counts as.
    fn record(&mut self, duration: SignedDuration) -> u64 {
        let ms = u64::try_from(duration.as_millis())
            .unwrap_or(0)
            .clamp(1, HIGHEST_MS);
        self.push(ms);
        self.succeeded += 1;
        self.quantiles = self.compute_quantiles();
        ms
    }

    fn quantiles(&self) -> Quantiles {
        self.quantiles
    }

    /// The quantiles of the recent durations (see [`quantiles_of`]).
    fn compute_quantiles(&self) -> Quantiles {
        quantiles_of(self.recent.iter().copied())
    }

    /// Rebuilds a window with `published`'s quantiles: of as many durations as it held (its
    /// count, at most [`WINDOW`]), half at the median, up to the 90th percentile's rank at it,
    /// the rest at the 99th (at least one there when it differs), so that the quantiles read back
    /// are the ones published.
    fn seeded(component: &str, published: &OperationDurations) -> Learned {
        let mut learned = Learned::new(component);
        let n = published.count.min(WINDOW as u64);
        let ms = |seconds: f64| {
            // Saturating float to integer conversion; negative and NaN become 0.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let ms = (seconds * 1000.0).round() as u64;
            ms
        };
        // The ranks `quantiles_of` reads: the median's ⌈n/2⌉, the p90's ⌈0.9(n+1)⌉ (at most n).
        let at_p50 = n.div_ceil(2);
        let p90_rank = (9 * (n + 1)).div_ceil(10).min(n);
        let mut at_p90 = p90_rank.saturating_sub(at_p50);
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
            for _ in 0..count {
                learned.push(ms(seconds));
            }
        }
        learned.succeeded = published.count;
        learned.others = published.other_outcomes.clone();
        learned.quantiles = learned.compute_quantiles();
        if let Some(coverage) = &published.coverage {
            learned.coverage = Coverage::seeded(coverage);
        }
        learned
    }

    fn published(&self, operation: &str) -> OperationDurations {
        let q = self.quantiles();
        OperationDurations {
            operation: operation.to_owned(),
            count: self.succeeded,
            p50_seconds: seconds(q.p50),
            p90_seconds: seconds(q.p90),
            p99_seconds: seconds(q.p99),
            other_outcomes: self.others.clone(),
            coverage: self.coverage.published(),
        }
    }
}

/// A rule operation's estimates became unreliable (its p90 covered fewer than 80 % of its last
/// ends), or reliable again: rare, and what `kubectl ifo rules` would show.
fn log_reliability(op: &InFlightOperation, f: &Figures) {
    let now = if f.unreliable() {
        "became unreliable"
    } else {
        "are reliable again"
    };
    tracing::info!(
        ruleset = %op.ruleset,
        operation = %op.operation,
        p90_covered = f.p90,
        ends = f.ends,
        "the expected ends of a rule {now}"
    );
}

/// Seconds with millisecond precision, as published.
fn seconds(d: SignedDuration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// (ruleset, operation).
type Key = (String, String);

/// What is learned, and the estimates waiting to be judged, under one lock.
#[derive(Default)]
struct State {
    learned: HashMap<Key, Learned>,
    estimates: Estimates,
    /// What each subject's own operations took.
    own: OwnDurations,
    /// Per ruleset, per operation: the label of its rule's `durationsBy`.
    durations_by: HashMap<String, BTreeMap<String, String>>,
}

impl State {
    /// Whose own durations `op` counts toward and takes: the object its rule's `durationsBy`
    /// label names while that label is set, else its subject.
    fn own_key<'a>(&self, op: &'a InFlightOperation) -> Cow<'a, str> {
        let named = self
            .durations_by
            .get(&op.ruleset)
            .and_then(|by| by.get(&op.operation))
            .and_then(|label| op.labels.get(label))
            .filter(|name| !name.is_empty());
        match named {
            Some(name) => Cow::Owned(named_key(op.namespace.as_deref(), name)),
            None => Cow::Borrowed(&op.subject.uid),
        }
    }

    /// The quantiles of `operation` of `ruleset`, once one succeeded.
    fn rule_quantiles(&self, ruleset: &str, operation: &str) -> Option<Quantiles> {
        let q = self
            .learned
            .get(&(ruleset.to_owned(), operation.to_owned()))?
            .quantiles();
        (q.count > 0).then_some(q)
    }
}

/// The durations learned for every loaded rule operation, and how often the estimates read
/// from them came true. Shared (`Arc`) between the detector, which records the estimates it
/// publishes and the completions, and the ruleset controller, which publishes and seeds them.
#[derive(Default)]
pub struct Durations {
    state: Mutex<State>,
}

impl std::fmt::Debug for Durations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durations").finish_non_exhaustive()
    }
}

impl Durations {
    fn lock(&self) -> parking_lot::MappedMutexGuard<'_, HashMap<Key, Learned>> {
        parking_lot::MutexGuard::map(self.state.lock(), |s| &mut s.learned)
    }

    /// `op` (an active record) is published as it is: the first estimate from history it shows
    /// is kept, to be judged when it ends.
    pub fn shown(&self, op: &InFlightOperation) {
        if op.expectation.is_some() {
            self.state.lock().estimates.shown(op);
        }
    }

    /// `op` completed: its duration counts if it succeeded, its outcome otherwise; and its
    /// first estimate, if it had one, is judged against its end.
    pub fn completed(&self, op: &InFlightOperation) {
        let Some(outcome) = op.outcome else { return };
        let mut guard = self.state.lock();
        let state = &mut *guard;
        let judged = state.estimates.completed(op);
        let entry = state
            .learned
            .entry((op.ruleset.clone(), op.operation.clone()))
            .or_insert_with(|| Learned::new(&op.component));
        entry.component.clone_from(&op.component);
        if let Some(judged) = judged {
            let was = entry.coverage.figures().is_some_and(|f| f.unreliable());
            entry.coverage.record(judged);
            if let Some(f) = entry.coverage.figures()
                && f.unreliable() != was
            {
                log_reliability(op, &f);
            }
        }
        if outcome == Outcome::Succeeded {
            let end = op.completed.unwrap_or(op.last_detected);
            let ms = entry.record(end.duration_since(op.created));
            let key = state.own_key(op);
            state.own.record(&key, &op.ruleset, &op.operation, ms);
        } else {
            *entry.others.entry(outcome.as_str().to_owned()).or_default() += 1;
        }
    }

    /// Forgets the estimates of operations that are not active any more (`active` tells which
    /// are by uid): those removed without a completion.
    pub(crate) fn retain_estimates(&self, active: impl Fn(&str) -> bool) {
        self.state.lock().estimates.retain(active);
    }

    /// The quantiles of `operation` of `ruleset`, once one succeeded.
    pub(crate) fn quantiles(&self, ruleset: &str, operation: &str) -> Option<Quantiles> {
        self.state.lock().rule_quantiles(ruleset, operation)
    }

    /// What `op` (in flight) is expected to take: its subject's own durations once it has
    /// enough, else its rule's (see `own`).
    pub(crate) fn in_flight(&self, op: &InFlightOperation) -> Option<Quantiles> {
        let state = self.state.lock();
        let own = state
            .own
            .quantiles(&state.own_key(op), &op.ruleset, &op.operation);
        in_flight(own, || state.rule_quantiles(&op.ruleset, &op.operation))
    }

    /// What `operation` of `ruleset` took on the subject kept under `key` (its uid, or the
    /// [`named_key`] of the object a `durationsBy` label names), once it succeeded there.
    pub(crate) fn own(&self, key: &str, ruleset: &str, operation: &str) -> Option<Quantiles> {
        self.state.lock().own.quantiles(key, ruleset, operation)
    }

    /// The subject kept under `key` announces its next runs: what its own take is kept from its
    /// first success on (see `own`).
    pub(crate) fn announced(&self, key: &str) {
        self.state.lock().own.announced(key);
    }

    /// The subject of uid `uid` was deleted: what its own operations took goes.
    pub(crate) fn subject_deleted(&self, uid: &str) {
        self.state.lock().own.forget(uid);
    }

    /// How often the estimates of `operation` of `ruleset` came true, once one end was judged.
    pub fn coverage(&self, ruleset: &str, operation: &str) -> Option<Figures> {
        self.lock()
            .get(&(ruleset.to_owned(), operation.to_owned()))?
            .coverage
            .figures()
    }

    /// Every rule operation with an end judged, sorted.
    pub(crate) fn coverages(&self) -> Vec<RuleCoverage> {
        let learned = self.lock();
        let mut out: Vec<RuleCoverage> = learned
            .iter()
            .filter_map(|((ruleset, operation), l)| {
                Some(RuleCoverage {
                    ruleset: ruleset.clone(),
                    operation: operation.clone(),
                    figures: l.coverage.figures()?,
                })
            })
            .collect();
        out.sort_by(|a, b| (&a.ruleset, &a.operation).cmp(&(&b.ruleset, &b.operation)));
        out
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
        let mut state = self.state.lock();
        state
            .learned
            .retain(|(rs, op), _| rs != ruleset || operations.contains(op));
        state.own.retain(ruleset, operations);
    }

    /// `ruleset`'s rules with `durationsBy` now name these labels (by operation): its
    /// operations count toward the objects those name from now on.
    pub(crate) fn keyed_by(&self, ruleset: &str, labels: &BTreeMap<String, String>) {
        let mut state = self.state.lock();
        if labels.is_empty() {
            state.durations_by.remove(ruleset);
        } else {
            state
                .durations_by
                .insert(ruleset.to_owned(), labels.clone());
        }
    }

    /// Whether `operation` of `ruleset` counts its durations toward the objects a
    /// `durationsBy` label names (see [`named_key`]).
    pub(crate) fn keyed_by_label(&self, ruleset: &str, operation: &str) -> bool {
        self.state
            .lock()
            .durations_by
            .get(ruleset)
            .is_some_and(|by| by.contains_key(operation))
    }

    /// `ruleset` is gone: everything learned of it goes.
    pub(crate) fn forget(&self, ruleset: &str) {
        self.retain(ruleset, &[]);
        self.keyed_by(ruleset, &BTreeMap::new());
    }
}

#[cfg(test)]
mod tests;
