//! What the watchers and the evaluator learned about each ruleset, for its status conditions and
//! for metrics: whether its watch is running, the errors its rules hit, and whether it went over
//! its evaluation budget so often that it is suspended. Written only through the one health store
//! ([`super::Health`]), which keeps it in step with what it knows per target.

use super::suspension::{Strikes, SuspendPolicy};
use dashmap::DashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// Most skipped objects a ruleset names (its status says how many there are).
const MAX_SKIPPED: usize = 100;

/// Most namespaces whose recent strikes a ruleset keeps: beyond, the namespace with the oldest
/// latest strike is forgotten (a namespace is suspended after a handful of strikes in minutes,
/// so only a ruleset over budget in more namespaces than this at once loses count of some).
const MAX_STRIKE_SCOPES: usize = 1024;

/// Where a ruleset is suspended: a namespace, or `None` for cluster-scoped subjects.
pub(super) type Place = Option<String>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum WatchState {
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
pub(crate) struct RuleSetHealth {
    pub watch: WatchState,
    /// Rule, message, outcome, start-time and label expression errors since the ruleset was loaded.
    pub evaluation_errors: u64,
    pub last_error: Option<String>,
    /// Evaluations that went over the cost budget since the ruleset was loaded.
    pub over_budget: u64,
    pub last_over_budget: Option<String>,
    /// Where the ruleset went over budget too often (namespaces; `None`: cluster-scoped
    /// subjects): its rules no longer run there. Empty: it runs everywhere it applies.
    pub suspended: BTreeSet<Place>,
    /// Objects whose operations this ruleset does not know now, by uid: `namespace/name: why`
    /// (they cannot be decoded, or evaluating them went over the budget). At most
    /// [`MAX_SKIPPED`]; `skipped_more` counts the others.
    pub skipped: BTreeMap<String, String>,
    /// Skipped objects beyond those named in `skipped`.
    pub skipped_more: u64,
    /// Recent over-budget evaluations per namespace, for the suspension policy: one tenant's
    /// costly objects never suspend the ruleset for another's.
    pub(crate) strikes: BTreeMap<Place, Strikes>,
}

impl Default for RuleSetHealth {
    fn default() -> Self {
        RuleSetHealth {
            watch: WatchState::Starting,
            evaluation_errors: 0,
            last_error: None,
            over_budget: 0,
            last_over_budget: None,
            suspended: BTreeSet::new(),
            skipped: BTreeMap::new(),
            skipped_more: 0,
            strikes: BTreeMap::new(),
        }
    }
}

/// Per-ruleset health: the ruleset side of [`super::Health`].
#[derive(Debug, Default)]
pub(super) struct RuleSets {
    by_ruleset: DashMap<String, RuleSetHealth>,
}

impl RuleSets {
    pub(super) fn set_watch(&self, ruleset: &str, state: WatchState) {
        self.by_ruleset
            .entry(ruleset.to_string())
            .or_default()
            .watch = state;
    }

    pub(super) fn record_error(&self, ruleset: &str, error: String) {
        let mut h = self.by_ruleset.entry(ruleset.to_string()).or_default();
        h.evaluation_errors += 1;
        h.last_error = Some(error);
    }

    /// Records an evaluation of object `uid` in `place` that went over budget (`recalled`: made
    /// before, of the same object, and not counted again); true when that suspends the ruleset
    /// there (once).
    pub(super) fn record_over_budget(
        &self,
        ruleset: &str,
        (uid, place): (&str, &Place),
        (what, recalled): (String, bool),
        policy: &SuspendPolicy,
    ) -> bool {
        let now = Instant::now();
        let mut h = self.by_ruleset.entry(ruleset.to_string()).or_default();
        if !recalled {
            h.over_budget += 1;
            h.last_over_budget = Some(what);
        }
        if !h.strikes.contains_key(place) && h.strikes.len() >= MAX_STRIKE_SCOPES {
            let oldest = h
                .strikes
                .iter()
                .min_by_key(|(_, s)| s.latest())
                .map(|(p, _)| p.clone());
            if let Some(oldest) = oldest {
                h.strikes.remove(&oldest);
            }
        }
        let struck = h
            .strikes
            .entry(place.clone())
            .or_default()
            .strike(now, uid, policy);
        struck && h.suspended.insert(place.clone())
    }

    /// Object `uid` is skipped by the ruleset: `what` says which and why.
    pub(super) fn record_skipped(&self, ruleset: &str, uid: &str, what: String) {
        let mut h = self.by_ruleset.entry(ruleset.to_string()).or_default();
        if h.skipped.len() < MAX_SKIPPED || h.skipped.contains_key(uid) {
            h.skipped.insert(uid.to_owned(), what);
        } else {
            h.skipped_more += 1;
        }
    }

    /// Object `uid` is evaluated by the ruleset again (or gone).
    pub(super) fn clear_skipped(&self, ruleset: &str, uid: &str) {
        // A read first: this runs on every evaluation.
        if !self
            .by_ruleset
            .get(ruleset)
            .is_some_and(|h| h.skipped.contains_key(uid))
        {
            return;
        }
        if let Some(mut h) = self.by_ruleset.get_mut(ruleset)
            && h.skipped.remove(uid).is_some()
            && h.skipped.is_empty()
        {
            h.skipped_more = 0;
        }
    }

    /// Whether the ruleset's rules are suspended in `place` (until it is reset by a new
    /// generation).
    pub(super) fn is_suspended(&self, ruleset: &str, place: &Place) -> bool {
        self.by_ruleset
            .get(ruleset)
            .is_some_and(|h| h.suspended.contains(place))
    }

    pub(super) fn get(&self, ruleset: &str) -> RuleSetHealth {
        self.by_ruleset
            .get(ruleset)
            .map(|h| h.clone())
            .unwrap_or_default()
    }

    /// Forgets a ruleset (deleted, or reloaded with a new generation).
    pub(super) fn reset(&self, ruleset: &str) {
        self.by_ruleset.remove(ruleset);
    }
}
