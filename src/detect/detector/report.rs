//! What an evaluation of an object tells beyond its operations: over the budget (remembered
//! for the object, logged, counted, and suspending the ruleset when it keeps happening), the
//! errors of its rules, and the failures that leave its detection unknown.

use std::collections::BTreeSet;

use super::{Detector, NODE_KEYS};
use crate::evaluate::{Bound, EvalError, Evaluation, RuleResult, evaluate_within};
use crate::operation::Subject;
use crate::ruleset::CompiledRuleSet;

/// An object's `resourceVersion`, where it has one.
fn resource_version(object: &serde_json::Value) -> Option<&str> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(serde_json::Value::as_str)
        .filter(|v| !v.is_empty())
}

impl Detector {
    /// `rs`'s evaluation of `object` (`uid`), and whether it is one made before: an object that
    /// went over the budget and has not changed since is not evaluated again (see
    /// [`super::over_budget`]).
    pub(super) fn evaluate(
        &self,
        rs: &CompiledRuleSet,
        uid: &str,
        object: &serde_json::Value,
        bound: &Bound<'_>,
    ) -> (Evaluation, bool) {
        // The version is read only while something is remembered: every evaluation asks.
        if !self.over_budget.is_empty()
            && let Some(version) = resource_version(object)
            && let Some(evaluation) = self.over_budget.recall(
                (&rs.info.name, rs.generation),
                uid,
                version,
                std::time::Instant::now(),
            )
        {
            return (evaluation, true);
        }
        (
            evaluate_within(&rs.exprs, bound, &self.limits.budget),
            false,
        )
    }

    /// Remembers `evaluation` of `object` (`uid`), which went over the budget. Called under the
    /// tracker's lock once the evaluation counts (`rs`'s generation is the one loaded): a
    /// reload or removal of the ruleset, which forgets its evaluations after taking that lock,
    /// comes after, so nothing of a generation no longer loaded is kept.
    pub(super) fn remember_over_budget(
        &self,
        rs: &CompiledRuleSet,
        uid: &str,
        object: &serde_json::Value,
        evaluation: &Evaluation,
    ) {
        if let Some(version) = resource_version(object) {
            self.over_budget.remember(
                (&rs.info.name, rs.generation),
                uid,
                version,
                evaluation,
                std::time::Instant::now(),
            );
        }
    }

    /// Logs, counts and records an over-budget evaluation: the object is skipped (its result is
    /// unknown) and named on the ruleset, and the ruleset is suspended when it keeps happening
    /// on different objects. `recalled`: the evaluation was made before, of the same object
    /// (listed again), and is neither logged nor counted again.
    pub(super) fn report_over_budget(
        &self,
        rs: &CompiledRuleSet,
        (subject, nodes): (&Subject, Option<BTreeSet<String>>),
        over: &crate::evaluate::OverBudget,
        recalled: bool,
    ) {
        let name = &rs.info.name;
        if !recalled {
            tracing::warn!(
                ruleset = %name,
                target = %rs.target,
                subject = %subject.reference(),
                kind = %subject.kind,
                rule = %over.place,
                error = %over.exceeded,
                "evaluation over budget; its result is unknown"
            );
            crate::metrics::cost_exceeded(&rs.owner().name);
        }
        if self
            .health
            .over_budget(rs, (subject, nodes), over, recalled, &self.limits.suspend)
        {
            tracing::warn!(
                ruleset = %name,
                after = self.limits.suspend.after,
                window = ?self.limits.suspend.window,
                "ruleset suspended: it keeps going over its evaluation budget; its rules do not run until its spec changes"
            );
            crate::metrics::ruleset_suspended(&rs.owner().name);
        }
    }

    pub(super) fn report_errors(
        &self,
        rs: &CompiledRuleSet,
        subject: &Subject,
        ev: &crate::evaluate::Evaluation,
    ) {
        let report = |what: String, e: &EvalError| {
            let message = format!("{what}: {e}");
            // Repeats on every event of the subject until the ruleset is fixed, so not at warn:
            // it is counted and shown on the ruleset's RuleErrors condition.
            tracing::debug!(
                ruleset = %rs.info.name,
                target = %rs.target,
                subject = %subject.reference(),
                kind = %subject.kind,
                error = %message,
                "rule evaluation failed"
            );
            crate::metrics::rule_error(&rs.owner().name);
            self.health.record_error(
                &rs.info.name,
                format!("{message} (object {}/{})", subject.kind, subject.name),
            );
        };
        for (op, result) in rs.operations.iter().zip(&ev.rules) {
            for (part, e) in result.errors() {
                match part {
                    None => report(format!("rule {op}"), e),
                    Some(part) => report(format!("rule {op} {part}"), e),
                }
            }
        }
        for (op, start) in rs.operations.iter().zip(&ev.starts) {
            if let Some(Err(e)) = start {
                report(format!("rule {op} schedule"), e);
            }
        }
        for (key, value) in &ev.labels {
            if let Err(e) = value {
                report(format!("label {key}"), e);
            }
        }
    }
}

/// The first failure of `rs` on an object that leaves its detection unknown: a rule that
/// errors (its operation may or may not be in flight) or a node label expression that fails
/// (which node gates it belongs to is unknown). A failing message, progress or outcome leaves
/// the gates' verdicts known and is only reported.
pub(super) fn blinding_error(rs: &CompiledRuleSet, evaluation: &Evaluation) -> Option<String> {
    let rule = rs
        .operations
        .iter()
        .zip(&evaluation.rules)
        .find_map(|(op, result)| match result {
            RuleResult::Error(e) => Some(format!("rule {op}: {e}")),
            _ => None,
        });
    rule.or_else(|| {
        evaluation
            .labels
            .iter()
            .find_map(|(key, value)| match value {
                Err(e) if NODE_KEYS.contains(&key.as_str()) => Some(format!("label {key}: {e}")),
                _ => None,
            })
    })
}
