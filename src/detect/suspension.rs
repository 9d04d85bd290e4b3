//! When a ruleset that keeps going over its evaluation budget is suspended.
//!
//! One over-budget evaluation costs at most the budget, but a ruleset that exceeds it on every
//! event would spend the budget on every event forever. After going over it on `after` different
//! objects within `window`, its rules stop running until a new generation of it is loaded (the
//! controller resets its health then). Its operations stay as they are: nothing completes them
//! falsely, and the ruleset's status says why they no longer move.
//!
//! Strikes are counted per namespace (and for cluster-scoped subjects apart), and a ruleset is
//! suspended only where they add up: one tenant's costly objects never stop detection for
//! another tenant's namespace.
//!
//! Strikes count objects, not evaluations: a rule that is cheap on every object but one (whose
//! data makes it costly: a tenant's 400,000-element list) is charged to that object, which is
//! skipped and reported, while the ruleset goes on for every other subject. Suspension is for
//! rules that are costly on every object.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Defaults of [`SuspendPolicy`].
pub(crate) const DEFAULT_SUSPEND_AFTER: u32 = 5;
pub(super) const DEFAULT_SUSPEND_WINDOW: Duration = Duration::from_secs(600);

/// How many over-budget evaluations, within what time, suspend a ruleset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SuspendPolicy {
    /// 0 never suspends.
    pub after: u32,
    pub window: Duration,
}

impl Default for SuspendPolicy {
    fn default() -> Self {
        SuspendPolicy {
            after: DEFAULT_SUSPEND_AFTER,
            window: DEFAULT_SUSPEND_WINDOW,
        }
    }
}

/// The objects one ruleset recently went over its budget on, by their last such evaluation.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Strikes {
    recent: VecDeque<(Instant, String)>,
}

impl Strikes {
    /// When the latest strike was, if any is remembered.
    pub(crate) fn latest(&self) -> Option<Instant> {
        self.recent.back().map(|(at, _)| *at)
    }

    /// Records an over-budget evaluation of object `uid` at `at`; true when that makes
    /// `policy.after` different objects within `policy.window` (the moment to suspend).
    pub(crate) fn strike(&mut self, at: Instant, uid: &str, policy: &SuspendPolicy) -> bool {
        if policy.after == 0 {
            return false;
        }
        while self
            .recent
            .front()
            .is_some_and(|(t, _)| at.saturating_duration_since(*t) > policy.window)
        {
            self.recent.pop_front();
        }
        self.recent.retain(|(_, u)| u != uid);
        self.recent.push_back((at, uid.to_owned()));
        while self.recent.len() > policy.after as usize {
            self.recent.pop_front();
        }
        self.recent.len() >= policy.after as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(after: u32, window_s: u64) -> SuspendPolicy {
        SuspendPolicy {
            after,
            window: Duration::from_secs(window_s),
        }
    }

    /// Strikes each `(time after the first, object)` in turn under `policy`; whether each
    /// suspended.
    fn suspends(policy: SuspendPolicy, strikes: &[(Duration, &str)]) -> Vec<bool> {
        let t0 = Instant::now();
        let mut s = Strikes::default();
        strikes
            .iter()
            .map(|(after, object)| s.strike(t0 + *after, object, &policy))
            .collect()
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn suspends_on_the_nth_strike_within_the_window() {
        let strikes = [(secs(0), "a"), (secs(10), "b"), (secs(20), "c")];
        assert_eq!(suspends(policy(3, 60), &strikes), [false, false, true]);
    }

    #[test]
    fn one_costly_object_never_suspends() {
        let strikes: Vec<_> = (0..100)
            .map(|i| (Duration::from_millis(i), "tenant-object"))
            .chain([(secs(1), "other"), (secs(2), "third")])
            .collect();
        let mut expected = vec![false; 101];
        expected.push(true);
        assert_eq!(suspends(policy(3, 60), &strikes), expected);
    }

    #[test]
    fn strikes_older_than_the_window_are_forgotten() {
        // The first is 70 s old at the third: two within the window.
        let strikes = [
            (secs(0), "a"),
            (secs(50), "b"),
            (secs(70), "c"),
            (secs(80), "d"),
        ];
        let expected = [false, false, false, true];
        assert_eq!(suspends(policy(3, 60), &strikes), expected);
    }

    #[test]
    fn zero_never_suspends() {
        let names: Vec<String> = (0..100).map(|i| i.to_string()).collect();
        let strikes: Vec<_> = names
            .iter()
            .enumerate()
            .map(|(i, name)| (Duration::from_millis(i as u64), name.as_str()))
            .collect();
        assert_eq!(suspends(policy(0, 60), &strikes), [false; 100]);
    }
}
