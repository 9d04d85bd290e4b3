//! What the watchers and the evaluator learned about each ruleset, for its status conditions and
//! for metrics: whether its watch is running, and the errors its rules hit.

use dashmap::DashMap;

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
}

impl Default for RuleSetHealth {
    fn default() -> Self {
        RuleSetHealth {
            watch: WatchState::Starting,
            evaluation_errors: 0,
            last_error: None,
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
