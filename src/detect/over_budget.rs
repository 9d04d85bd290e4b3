//! Over-budget evaluations remembered, so that the budget is not spent again on the same object
//! by the same rules.
//!
//! A ruleset's evaluation of an object depends on the object and the ruleset's rules only: the
//! same `resourceVersion` under the same generation goes over the budget again, at the full
//! cost of the budget each time. A watch lists its target afresh whenever a ruleset of that
//! target changes (and after every failure), so without this a few costly objects cost their
//! budget again on every such list, for every ruleset — and where another tenant's rulesets
//! change often, a list starts over before it reaches the costly objects at its end, and the
//! costly ruleset is never suspended.
//!
//! What is remembered is the evaluation itself, used as it was; a changed object, a new
//! generation of the ruleset, or [`RECALL_FOR`] later, it is evaluated again (a result that was
//! only unlucky gets another chance, at most once per object per [`RECALL_FOR`]). Bounded:
//! [`MAX_REMEMBERED`] evaluations, the oldest forgotten first.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::evaluate::Evaluation;

/// Most over-budget evaluations remembered (across rulesets).
pub(super) const MAX_REMEMBERED: usize = 4096;

/// How long an over-budget evaluation is used again for an unchanged object.
pub(super) const RECALL_FOR: Duration = Duration::from_secs(600);

/// What an evaluation was of: the ruleset's generation and the object's `resourceVersion`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Of {
    generation: Option<i64>,
    resource_version: String,
}

#[derive(Debug)]
struct Remembered {
    of: Of,
    at: Instant,
    evaluation: Evaluation,
}

/// The over-budget evaluations of unchanged objects, by ruleset and object uid.
#[derive(Debug, Default)]
pub(super) struct OverBudgetEvaluations {
    by_ruleset: Mutex<HashMap<String, HashMap<String, Remembered>>>,
    /// How many are remembered: every evaluation asks, and almost always none is.
    count: AtomicUsize,
}

impl OverBudgetEvaluations {
    /// The over-budget evaluation of `uid` at `resource_version` by `ruleset` at `generation`,
    /// if one was made less than [`RECALL_FOR`] before `now`.
    pub(super) fn recall(
        &self,
        (ruleset, generation): (&str, Option<i64>),
        uid: &str,
        resource_version: &str,
        now: Instant,
    ) -> Option<Evaluation> {
        if self.is_empty() {
            return None;
        }
        let by_ruleset = self.by_ruleset.lock();
        let r = by_ruleset.get(ruleset)?.get(uid)?;
        let current = r.of.generation == generation
            && r.of.resource_version == resource_version
            && now.saturating_duration_since(r.at) < RECALL_FOR;
        current.then(|| r.evaluation.clone())
    }

    /// Remembers `evaluation`, which went over the budget, of `uid` at `resource_version` by
    /// `ruleset` at `generation`.
    pub(super) fn remember(
        &self,
        (ruleset, generation): (&str, Option<i64>),
        uid: &str,
        resource_version: &str,
        evaluation: &Evaluation,
        now: Instant,
    ) {
        let mut by_ruleset = self.by_ruleset.lock();
        let known = by_ruleset
            .get(ruleset)
            .is_some_and(|objects| objects.contains_key(uid));
        if !known && self.count.load(Ordering::Relaxed) >= MAX_REMEMBERED {
            // Rare (thousands of costly objects at once): a scan is cheaper than an order kept
            // on every insertion.
            let oldest = by_ruleset
                .iter()
                .flat_map(|(rs, objects)| objects.iter().map(move |(uid, r)| (rs, uid, r.at)))
                .min_by_key(|(_, _, at)| *at)
                .map(|(rs, uid, _)| (rs.clone(), uid.clone()));
            if let Some((rs, uid)) = oldest {
                self.remove(&mut by_ruleset, &rs, &uid);
            }
        }
        let remembered = Remembered {
            of: Of {
                generation,
                resource_version: resource_version.to_owned(),
            },
            at: now,
            evaluation: evaluation.clone(),
        };
        let objects = by_ruleset.entry(ruleset.to_owned()).or_default();
        if objects.insert(uid.to_owned(), remembered).is_none() {
            self.count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `uid` is gone: its evaluations by `rulesets` are forgotten.
    pub(super) fn forget_object<'a>(&self, rulesets: impl IntoIterator<Item = &'a str>, uid: &str) {
        if self.is_empty() {
            return;
        }
        let mut by_ruleset = self.by_ruleset.lock();
        for ruleset in rulesets {
            self.remove(&mut by_ruleset, ruleset, uid);
        }
    }

    /// `ruleset` changed or is gone: its evaluations are forgotten.
    pub(super) fn forget_ruleset(&self, ruleset: &str) {
        if let Some(objects) = self.by_ruleset.lock().remove(ruleset) {
            self.count.fetch_sub(objects.len(), Ordering::Relaxed);
        }
    }

    fn remove(
        &self,
        by_ruleset: &mut HashMap<String, HashMap<String, Remembered>>,
        ruleset: &str,
        uid: &str,
    ) {
        let Some(objects) = by_ruleset.get_mut(ruleset) else {
            return;
        };
        if objects.remove(uid).is_some() {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
        if objects.is_empty() {
            by_ruleset.remove(ruleset);
        }
    }

    /// Whether none is remembered (almost always): one atomic load.
    pub(super) fn is_empty(&self) -> bool {
        self.count.load(Ordering::Relaxed) == 0
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluate::{Exceeded, OverBudget};

    fn over() -> Evaluation {
        Evaluation {
            rules: Vec::new(),
            labels: Vec::new(),
            starts: Vec::new(),
            over_budget: Some(OverBudget {
                place: "rule Busy".into(),
                exceeded: Exceeded::Time(Duration::from_millis(100)),
            }),
        }
    }

    #[test]
    fn an_unchanged_object_under_the_same_generation_is_recalled_and_nothing_else() {
        let spent = OverBudgetEvaluations::default();
        let t0 = Instant::now();
        spent.remember(("rs", Some(1)), "u1", "10", &over(), t0);
        assert_eq!(spent.recall(("rs", Some(1)), "u1", "10", t0), Some(over()));
        // The object changed, the ruleset changed, another ruleset, another object.
        assert_eq!(spent.recall(("rs", Some(1)), "u1", "11", t0), None);
        assert_eq!(spent.recall(("rs", Some(2)), "u1", "10", t0), None);
        assert_eq!(spent.recall(("other", Some(1)), "u1", "10", t0), None);
        assert_eq!(spent.recall(("rs", Some(1)), "u2", "10", t0), None);
        // Evaluated again once it is old.
        assert_eq!(
            spent.recall(("rs", Some(1)), "u1", "10", t0 + RECALL_FOR),
            None
        );
    }

    #[test]
    fn forgotten_with_its_object_or_its_ruleset() {
        let spent = OverBudgetEvaluations::default();
        let t0 = Instant::now();
        spent.remember(("rs", Some(1)), "u1", "10", &over(), t0);
        spent.remember(("rs", Some(1)), "u2", "10", &over(), t0);
        spent.remember(("other", Some(1)), "u1", "10", &over(), t0);
        spent.forget_object(["rs"], "u1");
        assert_eq!(spent.recall(("rs", Some(1)), "u1", "10", t0), None);
        assert!(spent.recall(("other", Some(1)), "u1", "10", t0).is_some());
        spent.forget_ruleset("rs");
        assert_eq!(spent.recall(("rs", Some(1)), "u2", "10", t0), None);
        assert_eq!(spent.len(), 1);
    }

    #[test]
    fn bounded_forgetting_the_oldest_first() {
        let spent = OverBudgetEvaluations::default();
        let t0 = Instant::now();
        for i in 0..=MAX_REMEMBERED {
            let at = t0 + Duration::from_millis(i as u64);
            spent.remember(("rs", Some(1)), &format!("u{i}"), "1", &over(), at);
        }
        assert_eq!(spent.len(), MAX_REMEMBERED);
        let late = t0 + Duration::from_secs(1);
        assert_eq!(spent.recall(("rs", Some(1)), "u0", "1", late), None);
        assert!(spent.recall(("rs", Some(1)), "u1", "1", late).is_some());
        let last = format!("u{MAX_REMEMBERED}");
        assert!(spent.recall(("rs", Some(1)), &last, "1", late).is_some());
    }
}
