//! What the watchers and the evaluator learned about each ruleset, for its status conditions and
//! for metrics: whether its watch is running, the errors its rules hit, and whether it went over
//! its evaluation budget so often that it is suspended.

use super::suspension::{Strikes, SuspendPolicy};
use dashmap::DashMap;
use std::time::Instant;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchState {
    /// Waiting for the first complete list.
    Starting,
    /// The initial list succeeded; events are flowing.
    Active,
    /// The target resource type does not exist (yet).
    InvalidTarget(String),
    /// Listing or watching failed (RBAC included), with the API server's message.
    Failed(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct RuleSetHealth {
    pub watch: WatchState,
    /// Rule, message, outcome, start-time and label expression errors since the ruleset was loaded.
    pub evaluation_errors: u64,
    pub last_error: Option<String>,
    /// Evaluations that went over the cost budget since the ruleset was loaded.
    pub over_budget: u64,
    pub last_over_budget: Option<String>,
    /// Set when the ruleset went over budget too often: its rules no longer run.
    pub suspended: bool,
    /// Recent over-budget evaluations, for the suspension policy.
    pub(crate) strikes: Strikes,
}

impl Default for RuleSetHealth {
    fn default() -> Self {
        RuleSetHealth {
            watch: WatchState::Starting,
            evaluation_errors: 0,
            last_error: None,
            over_budget: 0,
            last_over_budget: None,
            suspended: false,
            strikes: Strikes::default(),
        }
    }
}

/// Per-ruleset health, written by watchers, read by the ruleset status writer.
#[derive(Default)]
pub struct Health {
    by_ruleset: DashMap<String, RuleSetHealth>,
}

impl Health {
    pub fn set_watch(&self, ruleset: &str, state: WatchState) {
        self.by_ruleset
            .entry(ruleset.to_string())
            .or_default()
            .watch = state;
    }

    pub fn record_error(&self, ruleset: &str, error: String) {
        let mut h = self.by_ruleset.entry(ruleset.to_string()).or_default();
        h.evaluation_errors += 1;
        h.last_error = Some(error);
    }

    /// Records an evaluation that went over budget; true when that suspends the ruleset (once).
    pub fn record_over_budget(&self, ruleset: &str, what: String, policy: &SuspendPolicy) -> bool {
        let mut h = self.by_ruleset.entry(ruleset.to_string()).or_default();
        h.over_budget += 1;
        h.last_over_budget = Some(what);
        let suspend = h.strikes.strike(Instant::now(), policy) && !h.suspended;
        if suspend {
            h.suspended = true;
        }
        suspend
    }

    /// Whether the ruleset's rules are suspended (until it is reset by a new generation).
    pub fn is_suspended(&self, ruleset: &str) -> bool {
        self.by_ruleset.get(ruleset).is_some_and(|h| h.suspended)
    }

    pub fn get(&self, ruleset: &str) -> RuleSetHealth {
        self.by_ruleset
            .get(ruleset)
            .map(|h| h.clone())
            .unwrap_or_default()
    }

    /// Forgets a ruleset (deleted, or reloaded with a new generation).
    pub fn reset(&self, ruleset: &str) {
        self.by_ruleset.remove(ruleset);
    }
}
