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
pub const DEFAULT_SUSPEND_AFTER: u32 = 5;
pub const DEFAULT_SUSPEND_WINDOW: Duration = Duration::from_secs(600);

/// How many over-budget evaluations, within what time, suspend a ruleset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuspendPolicy {
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
pub struct Strikes {
    recent: VecDeque<(Instant, String)>,
}

impl Strikes {
    /// When the latest strike was, if any is remembered.
    pub fn latest(&self) -> Option<Instant> {
        self.recent.back().map(|(at, _)| *at)
    }

    /// Records an over-budget evaluation of object `uid` at `at`; true when that makes
    /// `policy.after` different objects within `policy.window` (the moment to suspend).
    pub fn strike(&mut self, at: Instant, uid: &str, policy: &SuspendPolicy) -> bool {
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

    #[test]
    fn suspends_on_the_nth_strike_within_the_window() {
        let t0 = Instant::now();
        let p = policy(3, 60);
        let mut s = Strikes::default();
        assert!(!s.strike(t0, "a", &p));
        assert!(!s.strike(t0 + Duration::from_secs(10), "b", &p));
        assert!(s.strike(t0 + Duration::from_secs(20), "c", &p));
    }

    #[test]
    fn one_costly_object_never_suspends() {
        let t0 = Instant::now();
        let p = policy(3, 60);
        let mut s = Strikes::default();
        for i in 0..100 {
            assert!(!s.strike(t0 + Duration::from_millis(i), "tenant-object", &p));
        }
        assert!(!s.strike(t0 + Duration::from_secs(1), "other", &p));
        assert!(s.strike(t0 + Duration::from_secs(2), "third", &p));
    }

    #[test]
    fn strikes_older_than_the_window_are_forgotten() {
        let t0 = Instant::now();
        let p = policy(3, 60);
        let mut s = Strikes::default();
        assert!(!s.strike(t0, "a", &p));
        assert!(!s.strike(t0 + Duration::from_secs(50), "b", &p));
        // The first is 70 s old by now: two within the window.
        assert!(!s.strike(t0 + Duration::from_secs(70), "c", &p));
        assert!(s.strike(t0 + Duration::from_secs(80), "d", &p));
    }

    #[test]
    fn zero_never_suspends() {
        let t0 = Instant::now();
        let mut s = Strikes::default();
        for i in 0..100 {
            assert!(!s.strike(
                t0 + Duration::from_millis(i),
                &i.to_string(),
                &policy(0, 60)
            ));
        }
    }
}
