//! Whether the expected ends come true: per rule operation, how many of its recent ends came by
//! the estimate first published for them.
//!
//! When an active operation first shows an expected end from history (`status.estimate:
//! History`, with `status.expectedEndP90`), that estimate is kept ([`Estimates`], by the
//! occurrence's uid) until the operation completes. When it ends, it is judged at its completion
//! time: did it end by the expected end (the median) and by the band's far edge (p90)? Every end
//! counts, whatever its outcome (succeeded, failed, canceled, its subject deleted, unknown): a
//! window promises when the scope is free, not that the work succeeded, and an operation that
//! overran and then failed kept its scope busy past the estimate all the same. Only a
//! completion that is no end of the work drops the estimate unjudged: superseded (a newer
//! operation took over) or its ruleset removed (it stopped being watched). The durations are
//! still learned from the operations that succeeded.
//!
//! The judgements are kept as a window of the last [`ENDS_WINDOW`] ends per rule operation
//! ([`Coverage`]), not a count since the start or a decayed one: "the p90 covered 88 of the last
//! 100 ends" reads as what it is, forgets a bad period after exactly `ENDS_WINDOW` ends, and costs
//! 100 bytes. A window of 100 gives the share within about ±3 points (one standard deviation at
//! 90 %); a smaller one would flag good rules, a larger one would take longer to show a
//! recovery.

use std::collections::{HashMap, VecDeque};

use jiff::Timestamp;

use crate::operation::{EstimateBasis, InFlightOperation, Outcome};
use crate::ruleset::ObservedCoverage;

/// Ends judged per rule operation: the most recent ones.
pub const ENDS_WINDOW: usize = 100;

/// Ends judged before a rule's coverage says anything: with fewer, a p90 band right nine times
/// in ten covers under 80 % of them too often (with 20, 4 % of the time).
pub const MIN_ENDS: u64 = 20;

/// The share of ends its p90 band must cover for a rule's estimates to count as reliable.
pub const RELIABLE_P90: f64 = 0.8;

/// Estimates kept at most: one per active operation that shows an estimate from history. Past
/// it (more operations in flight at once), the newer ones are not judged.
const MAX_ESTIMATES: usize = 65_536;

/// One operation's first estimate from history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Estimate {
    /// `status.expectedEnd`: start + the median.
    end: Timestamp,
    /// `status.expectedEndP90`: start + the 90th percentile.
    p90_end: Timestamp,
}

/// The first estimate from history of each active operation, by occurrence uid, bounded.
#[derive(Debug, Default)]
pub(super) struct Estimates(HashMap<String, Estimate>);

impl Estimates {
    /// `op` is published as it is: keeps its estimate if it is the first from history.
    pub(super) fn shown(&mut self, op: &InFlightOperation) {
        let Some(e) = &op.expectation else { return };
        let (EstimateBasis::History, Some(p90_end)) = (e.basis, e.p90_end) else {
            return;
        };
        if self.0.len() >= MAX_ESTIMATES || self.0.contains_key(&op.uid) {
            return;
        }
        self.0.insert(
            op.uid.clone(),
            Estimate {
                end: e.end,
                p90_end,
            },
        );
    }

    /// `op` completed: its first estimate, if it had one, judged against its end, whatever its
    /// outcome but a takeover or its ruleset's removal (see the [module](self)).
    pub(super) fn completed(&mut self, op: &InFlightOperation) -> Option<Judged> {
        let estimate = self.0.remove(&op.uid)?;
        if matches!(
            op.outcome,
            Some(Outcome::Superseded | Outcome::RuleSetRemoved) | None
        ) {
            return None;
        }
        let end = op.completed.unwrap_or(op.last_detected);
        Some(Judged {
            by_p50: end <= estimate.end,
            by_p90: end <= estimate.p90_end,
        })
    }

    /// Forgets the estimates of operations no longer active (`active` says which are), such as
    /// those dropped without a completion.
    pub(super) fn retain(&mut self, active: impl Fn(&str) -> bool) {
        self.0.retain(|uid, _| active(uid));
    }

    /// How many are kept.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}

/// One end, judged against the first estimate of its operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Judged {
    /// Ended by `status.expectedEnd`.
    pub by_p50: bool,
    /// Ended by `status.expectedEndP90`.
    pub by_p90: bool,
}

/// How often a rule operation's estimates came true, over its last [`ENDS_WINDOW`] ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    /// Ends judged (at most [`ENDS_WINDOW`]).
    pub ends: u64,
    /// Share of them that ended by their expected end (the median), 0 to 1.
    pub p50: f64,
    /// Share of them that ended by the band's far edge (p90), 0 to 1.
    pub p90: f64,
}

impl Figures {
    /// Whether the p90 band covered fewer than [`RELIABLE_P90`] of at least [`MIN_ENDS`] ends.
    pub fn unreliable(&self) -> bool {
        self.ends >= MIN_ENDS && self.p90 < RELIABLE_P90
    }
}

/// The last [`ENDS_WINDOW`] ends of one rule operation, judged.
#[derive(Debug, Clone, Default)]
pub(super) struct Coverage(VecDeque<Judged>);

impl Coverage {
    pub(super) fn record(&mut self, judged: Judged) {
        if self.0.len() == ENDS_WINDOW {
            self.0.pop_front();
        }
        self.0.push_back(judged);
    }

    /// The figures, once an end was judged.
    pub(super) fn figures(&self) -> Option<Figures> {
        let ends = self.0.len();
        if ends == 0 {
            return None;
        }
        let share = |n: usize| n as f64 / ends as f64;
        Some(Figures {
            ends: ends as u64,
            p50: share(self.0.iter().filter(|j| j.by_p50).count()),
            p90: share(self.0.iter().filter(|j| j.by_p90).count()),
        })
    }

    /// As published on the ruleset's status: shares to three decimals.
    pub(super) fn published(&self) -> Option<ObservedCoverage> {
        let f = self.figures()?;
        let round = |x: f64| (x * 1000.0).round() / 1000.0;
        Some(ObservedCoverage {
            ends: f.ends,
            p50: round(f.p50),
            p90: round(f.p90),
        })
    }

    /// Rebuilds a window with `published`'s figures (the order of the ends is lost: the misses
    /// come first, so they leave the window first).
    pub(super) fn seeded(published: &ObservedCoverage) -> Coverage {
        let ends = usize::try_from(published.ends)
            .unwrap_or(ENDS_WINDOW)
            .min(ENDS_WINDOW);
        let count = |share: f64| {
            // A share of at most ENDS_WINDOW ends: in range once clamped.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let n = (share.clamp(0.0, 1.0) * ends as f64).round() as usize;
            n
        };
        let (p50, p90) = (count(published.p50), count(published.p90));
        let mut coverage = Coverage::default();
        for i in 0..ends {
            // The last `p50` (`p90`) of them came by the median (p90).
            coverage.record(Judged {
                by_p50: i >= ends - p50,
                by_p90: i >= ends - p90,
            });
        }
        coverage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(by_p50: bool, by_p90: bool) -> Judged {
        Judged { by_p50, by_p90 }
    }
    use crate::operation::{Expectation, Phase};
    use jiff::SignedDuration;

    fn at(s: i64) -> Timestamp {
        Timestamp::UNIX_EPOCH + SignedDuration::from_secs(s)
    }

    fn shown(uid: &str, basis: EstimateBasis, end: i64, p90: Option<i64>) -> InFlightOperation {
        let mut op = (*crate::operation::test_record("t")).clone();
        op.uid = uid.to_owned();
        op.created = at(0);
        op.expectation = Some(Expectation {
            end: at(end),
            basis,
            p90_end: p90.map(at),
            overdue: None,
        });
        op
    }

    fn ended(uid: &str, at_s: i64, outcome: Outcome) -> InFlightOperation {
        let mut op = (*crate::operation::test_record("t")).clone();
        op.uid = uid.to_owned();
        op.created = at(0);
        op.phase = Phase::Completed;
        op.outcome = Some(outcome);
        op.completed = Some(at(at_s));
        op
    }

    #[test]
    fn the_first_estimate_from_history_is_judged_at_its_end_whatever_its_outcome() {
        let mut e = Estimates::default();
        // Progress-based estimates have no band: not kept.
        e.shown(&shown("a", EstimateBasis::Progress, 5, None));
        assert_eq!(e.len(), 0);
        e.shown(&shown("a", EstimateBasis::History, 10, Some(20)));
        // A later, longer estimate does not replace the first.
        e.shown(&shown("a", EstimateBasis::History, 30, Some(40)));
        assert_eq!(
            e.completed(&ended("a", 15, Outcome::Succeeded)),
            Some(judged(false, true))
        );
        assert_eq!(e.len(), 0);
        // Ending exactly at the estimate counts as by it.
        e.shown(&shown("b", EstimateBasis::History, 10, Some(20)));
        assert_eq!(
            e.completed(&ended("b", 10, Outcome::Succeeded)),
            Some(judged(true, true))
        );
        // An operation that overran and failed kept its scope busy past the band: a miss.
        e.shown(&shown("c", EstimateBasis::History, 10, Some(20)));
        assert_eq!(
            e.completed(&ended("c", 50, Outcome::Failed)),
            Some(judged(false, false))
        );
        for outcome in [Outcome::Canceled, Outcome::SubjectDeleted, Outcome::Unknown] {
            e.shown(&shown("c", EstimateBasis::History, 10, Some(20)));
            assert_eq!(
                e.completed(&ended("c", 5, outcome)),
                Some(judged(true, true))
            );
        }
        // A takeover or a ruleset removed is no end of the work: dropped unjudged.
        for outcome in [Outcome::Superseded, Outcome::RuleSetRemoved] {
            e.shown(&shown("c", EstimateBasis::History, 10, Some(20)));
            assert_eq!(e.completed(&ended("c", 50, outcome)), None);
        }
        assert_eq!(e.len(), 0);
        // Without an estimate: nothing to judge.
        assert_eq!(e.completed(&ended("d", 1, Outcome::Succeeded)), None);
    }

    #[test]
    fn estimates_of_operations_gone_are_forgotten() {
        let mut e = Estimates::default();
        e.shown(&shown("a", EstimateBasis::History, 10, Some(20)));
        e.shown(&shown("b", EstimateBasis::History, 10, Some(20)));
        e.retain(|uid| uid == "b");
        assert_eq!(e.len(), 1);
        assert_eq!(e.completed(&ended("a", 1, Outcome::Succeeded)), None);
    }

    #[test]
    fn the_window_keeps_the_last_hundred_ends() {
        let mut c = Coverage::default();
        assert_eq!(c.figures(), None);
        for _ in 0..ENDS_WINDOW {
            c.record(judged(false, false));
        }
        for i in 0..ENDS_WINDOW {
            c.record(judged(i % 2 == 0, i % 10 != 0));
        }
        let f = c.figures().unwrap();
        assert_eq!((f.ends, f.p50, f.p90), (100, 0.5, 0.9));
        assert!(!f.unreliable());
    }

    #[test]
    fn unreliable_needs_enough_ends() {
        let few = Figures {
            ends: MIN_ENDS - 1,
            p50: 0.1,
            p90: 0.2,
        };
        assert!(!few.unreliable());
        let enough = Figures {
            ends: MIN_ENDS,
            ..few
        };
        assert!(enough.unreliable());
        let fine = Figures { p90: 0.8, ..enough };
        assert!(!fine.unreliable());
    }

    #[test]
    fn what_is_published_seeds_the_same_figures() {
        let mut c = Coverage::default();
        for i in 0..40 {
            c.record(judged(i % 3 == 0, i % 8 != 0));
        }
        let published = c.published().unwrap();
        assert_eq!(published.ends, 40);
        assert_eq!(Coverage::seeded(&published).published(), Some(published));
    }
}
