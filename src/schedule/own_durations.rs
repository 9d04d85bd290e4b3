//! What an announcing object's own runs took, for the durations its next runs are expected to
//! take: a rule's durations mix every object it detects, so a 3-hour nightly backup CronJob
//! beside a 5-second every-minute cleanup would be expected to take the cleanup's 5 seconds,
//! and a window would open right after the backup starts.
//!
//! Each announced operation whose durations are its own rule's (no `durationsOf`) keeps the
//! durations of the last [`OWN_WINDOW`] of its object's operations that succeeded (from the
//! index's completions), for as long as the object announces it; a new announcement of the same
//! object keeps them. Its runs are then expected to take its own quantiles once there are
//! [`MIN_SAMPLES`] of them, and before that its rule's, never less than its own runs took so
//! far. An announcement whose durations are another rule's (a Velero Schedule's backups are
//! Backup objects) takes that rule's.

use std::collections::VecDeque;

use jiff::SignedDuration;
use parking_lot::Mutex;

use crate::history::{MIN_SAMPLES, Quantiles, quantiles_of};

/// Successful runs of one object an announcement keeps: the most recent ones.
pub(super) const OWN_WINDOW: usize = 20;

/// The durations (ms) of an object's last [`OWN_WINDOW`] successful runs, oldest first.
#[derive(Debug, Default)]
pub(super) struct OwnDurations {
    recent: Mutex<VecDeque<u64>>,
}

impl OwnDurations {
    /// One of its runs succeeded after `took`.
    pub(super) fn record(&self, took: SignedDuration) {
        let mut recent = self.recent.lock();
        if recent.len() == OWN_WINDOW {
            recent.pop_front();
        }
        recent.push_back(u64::try_from(took.as_millis()).unwrap_or(0).max(1));
    }

    /// Their quantiles, once one succeeded.
    pub(super) fn quantiles(&self) -> Option<Quantiles> {
        let recent = self.recent.lock();
        (!recent.is_empty()).then(|| quantiles_of(recent.iter().copied()))
    }
}

/// The median and 90th percentile a run is expected to take, from its object's `own` runs and
/// its `rule`'s (see the [module](self)); `None` while neither has [`MIN_SAMPLES`].
pub(super) fn expected(
    own: Option<Quantiles>,
    rule: Option<Quantiles>,
) -> (Option<SignedDuration>, Option<SignedDuration>) {
    let learned = |q: &Quantiles| q.count >= MIN_SAMPLES;
    match (own, rule) {
        (Some(own), _) if learned(&own) => (Some(own.p50), Some(own.p90)),
        (own, Some(rule)) if learned(&rule) => {
            let at_least = |rule: SignedDuration, own: Option<SignedDuration>| {
                Some(own.map_or(rule, |own| own.max(rule)))
            };
            (
                at_least(rule.p50, own.map(|q| q.p50)),
                at_least(rule.p90, own.map(|q| q.p90)),
            )
        }
        _ => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(seconds: &[i64]) -> OwnDurations {
        let own = OwnDurations::default();
        for &s in seconds {
            own.record(SignedDuration::from_secs(s));
        }
        own
    }

    fn secs(s: i64) -> Option<SignedDuration> {
        Some(SignedDuration::from_secs(s))
    }

    #[test]
    fn an_objects_own_runs_decide_once_there_are_enough_and_bound_the_rules_before() {
        // The rule: a hundred 5-second cleanups.
        let rule = runs(&[5; 100]).quantiles();
        // A nightly backup with six runs of its own: three hours, whatever the rule says.
        let nightly = runs(&[10_800, 10_700, 10_900, 10_800, 10_800, 10_800]).quantiles();
        assert_eq!(expected(nightly, rule), (secs(10_800), secs(10_900)));
        // With two: not its own yet, but never less than they took.
        let young = runs(&[10_800, 10_900]).quantiles();
        assert_eq!(expected(young, rule), (secs(10_800), secs(10_900)));
        // A cleanup of its own: its own.
        let cleanup = runs(&[4, 5, 6, 5, 5, 5]).quantiles();
        assert_eq!(expected(cleanup, rule), (secs(5), secs(6)));
        // Nothing of its own: the rule's; nothing learned: nothing.
        assert_eq!(expected(None, rule), (secs(5), secs(5)));
        assert_eq!(expected(young, runs(&[5; 4]).quantiles()), (None, None));
        assert_eq!(expected(None, None), (None, None));
    }

    #[test]
    fn the_window_keeps_the_latest_runs() {
        let own = runs(&[1; OWN_WINDOW]);
        for _ in 0..OWN_WINDOW {
            own.record(SignedDuration::from_secs(60));
        }
        let q = own.quantiles().unwrap();
        assert_eq!(
            (q.count, q.p50),
            (OWN_WINDOW as u64, SignedDuration::from_secs(60))
        );
    }
}
