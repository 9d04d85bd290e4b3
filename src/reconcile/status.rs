//! A ruleset's status: standard conditions from what compiling and watching it found.

use super::schema::SchemaCheck;
use crate::detect::{RuleSetHealth, WatchState};
use crate::evaluate::{MAX_MESSAGE_CHARS, truncated};
use crate::ruleset::{InvalidRuleSet, OperationDurations, RuleSetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// What is known about one ruleset right now.
pub(super) struct Observed<'a> {
    pub generation: Option<i64>,
    /// Why the ruleset does not compile, if it does not.
    pub invalid: Option<&'a InvalidRuleSet>,
    pub health: RuleSetHealth,
    pub active_operations: usize,
    /// What the ruleset's operations took, learned so far.
    pub operation_durations: Vec<OperationDurations>,
    /// What its fields were checked against (none while it does not compile).
    pub schema: Option<&'a SchemaCheck>,
}

fn condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: reason.to_string(),
        // Kubernetes' limit; messages quote errors and object names.
        message: truncated(message, MAX_MESSAGE_CHARS),
        observed_generation: generation,
        last_transition_time: Time(jiff::Timestamp::now()),
    }
}

/// A condition that is True while there is a problem (`message` says what), else False;
/// `reasons` are its reason for each: `[when True, when False]`.
fn problem(
    type_: &str,
    message: Option<String>,
    [when_true, when_false]: [&str; 2],
    generation: Option<i64>,
) -> Condition {
    let reason = if message.is_some() {
        when_true
    } else {
        when_false
    };
    condition(
        type_,
        message.is_some(),
        reason,
        message.unwrap_or_default(),
        generation,
    )
}

/// The desired status; `previous` keeps transition times of conditions whose status did not change.
pub(super) fn desired(observed: &Observed, previous: Option<&RuleSetStatus>) -> RuleSetStatus {
    let g = observed.generation;
    let invalid_rule = observed.invalid.is_some();
    let (invalid_target, watch_failed, active) = match &observed.health.watch {
        WatchState::InvalidTarget(m) => (Some(m.clone()), None, false),
        WatchState::Failed(m) => (None, Some(m.clone()), false),
        WatchState::Active => (
            None,
            None,
            !invalid_rule && observed.health.suspended.is_empty(),
        ),
        WatchState::Starting => (None, None, false),
    };
    let (ready_reason, ready_message) = if invalid_rule {
        (
            "InvalidRule",
            "a rule does not compile; no rule of this ruleset runs".to_string(),
        )
    } else if let Some(m) = &invalid_target {
        ("InvalidTarget", m.clone())
    } else if let Some(m) = &watch_failed {
        ("WatchFailed", m.clone())
    } else if !observed.health.suspended.is_empty() {
        (
            "Suspended",
            format!(
                "the ruleset kept going over its evaluation budget {}; its rules do not run there until its spec changes, and run elsewhere (see CostExceeded)",
                places(&observed.health.suspended)
            ),
        )
    } else if active {
        (
            "WatchActive",
            "rules are evaluated on every event of the target".to_string(),
        )
    } else {
        (
            "WatchStarting",
            "waiting for the first list of the target".to_string(),
        )
    };
    let mut conditions = vec![
        condition("Ready", active, ready_reason, ready_message, g),
        problem(
            "InvalidRule",
            observed.invalid.map(ToString::to_string),
            ["InvalidExpression", "Compiled"],
            g,
        ),
        problem("InvalidTarget", invalid_target, ["GVRNotFound", "Found"], g),
        problem(
            "WatchFailed",
            watch_failed,
            ["WatchSetupFailed", "NoError"],
            g,
        ),
        problem(
            "RuleErrors",
            (observed.health.evaluation_errors > 0).then(|| {
                observed
                    .health
                    .last_error
                    .as_ref()
                    .map_or_else(String::new, |e| {
                        format!(
                            "{} evaluation errors; last: {e}",
                            observed.health.evaluation_errors
                        )
                    })
            }),
            ["EvaluationFailed", "NoError"],
            g,
        ),
        cost_exceeded(&observed.health, g),
        objects_skipped(&observed.health, g),
    ];
    if let Some(check) = observed.schema {
        conditions.push(super::schema::condition(check, g));
    }
    if let Some(prev) = previous {
        for c in &mut conditions {
            if let Some(old) = prev
                .conditions
                .iter()
                .find(|o| o.type_ == c.type_ && o.status == c.status)
            {
                c.last_transition_time = old.last_transition_time.clone();
            }
        }
    }
    RuleSetStatus {
        observed_generation: g,
        watch_active: active,
        active_operations: observed.active_operations as i64,
        last_evaluation_time: previous.and_then(|p| p.last_evaluation_time.clone()),
        conditions,
        operation_durations: observed.operation_durations.clone(),
    }
}

/// Where a ruleset is suspended, for its messages: `in namespaces a, b`, `for cluster-scoped
/// objects`.
fn places(suspended: &std::collections::BTreeSet<Option<String>>) -> String {
    let namespaces: Vec<&str> = suspended.iter().flatten().map(String::as_str).collect();
    let mut out = Vec::new();
    match namespaces.as_slice() {
        [] => {}
        [one] => out.push(format!("in namespace {one}")),
        many => out.push(format!("in namespaces {}", many.join(", "))),
    }
    if suspended.contains(&None) {
        out.push("for cluster-scoped objects".to_owned());
    }
    out.join(" and ")
}

/// `CostExceeded`: True once an evaluation went over budget (reason `CostExceeded`), with reason
/// `Suspended` once that happened so often that the rules stopped running.
fn cost_exceeded(health: &RuleSetHealth, generation: Option<i64>) -> Condition {
    let last = health.last_over_budget.as_deref().unwrap_or_default();
    let (reason, message) = if !health.suspended.is_empty() {
        (
            "Suspended",
            format!(
                "suspended {} after {} evaluations over the cost budget; none of its rules run \
                 there until the ruleset's spec changes, and its operations there stay as they \
                 were; last: {last}",
                places(&health.suspended),
                health.over_budget
            ),
        )
    } else if health.over_budget > 0 {
        (
            "CostExceeded",
            format!(
                "{} evaluations over the cost budget (their result is unknown); last: {last}",
                health.over_budget
            ),
        )
    } else {
        ("WithinBudget", String::new())
    };
    condition(
        "CostExceeded",
        health.over_budget > 0,
        reason,
        message,
        generation,
    )
}

/// `ObjectsSkipped`: True while some objects are not evaluated (they cannot be decoded, or
/// evaluating them went over the budget), each named with why.
fn objects_skipped(health: &RuleSetHealth, generation: Option<i64>) -> Condition {
    let count = health.skipped.len() as u64 + health.skipped_more;
    let message = if count == 0 {
        String::new()
    } else {
        let named: Vec<&str> = health.skipped.values().map(String::as_str).collect();
        let more = match health.skipped_more {
            0 => String::new(),
            n => format!("; and {n} more"),
        };
        format!(
            "{count} objects are skipped (their operations are unknown): {}{more}",
            named.join("; ")
        )
    };
    condition(
        "ObjectsSkipped",
        count > 0,
        if count > 0 {
            "ObjectsSkipped"
        } else {
            "NoneSkipped"
        },
        message,
        generation,
    )
}

/// Equal for the purpose of deciding whether to write (ignores transition times).
pub(super) fn same(a: &RuleSetStatus, b: &RuleSetStatus) -> bool {
    let strip = |s: &RuleSetStatus| {
        let mut s = s.clone();
        for c in &mut s.conditions {
            c.last_transition_time = Time(jiff::Timestamp::UNIX_EPOCH);
        }
        s
    };
    strip(a) == strip(b)
}

/// Whether `b` differs from `a` in what users wait on, to be written at once: the generation
/// observed, whether the target is watched, `Ready` (its status, reason and message: what is
/// wrong, and where the ruleset is suspended), whether a rule does not compile
/// (`InvalidRule`), whether the ruleset is suspended (`CostExceeded` `Suspended`), and whether
/// the fields it reads are in its target's schema (`SchemaChecked`'s status). The rest
/// (the other conditions, counts, learned durations) is written on a slower cadence (see
/// `controller::write_statuses`).
pub(super) fn awaited_change(a: &RuleSetStatus, b: &RuleSetStatus) -> bool {
    type Awaited<'a> = (
        Option<i64>,
        bool,
        Option<(&'a str, &'a str, &'a str)>,
        Option<&'a str>,
        bool,
        Option<&'a str>,
    );
    fn awaited(s: &RuleSetStatus) -> Awaited<'_> {
        let condition = |type_: &str| s.conditions.iter().find(|c| c.type_ == type_);
        (
            s.observed_generation,
            s.watch_active,
            condition("Ready").map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str())),
            condition("InvalidRule").map(|c| c.status.as_str()),
            condition("CostExceeded").is_some_and(|c| c.reason == "Suspended"),
            condition(super::schema::SCHEMA_CHECKED).map(|c| c.status.as_str()),
        )
    }
    awaited(a) != awaited(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::RuleSetHealth;

    fn status(active_operations: usize, health: RuleSetHealth) -> RuleSetStatus {
        desired(
            &Observed {
                generation: Some(1),
                invalid: None,
                health,
                active_operations,
                operation_durations: Vec::new(),
                schema: None,
            },
            None,
        )
    }

    #[test]
    fn what_users_wait_on_is_told_apart_from_counts_and_other_conditions() {
        let active = || RuleSetHealth {
            watch: WatchState::Active,
            ..Default::default()
        };
        let a = status(3, active());
        assert!(!awaited_change(&a, &status(40, active())));
        assert!(!same(&a, &status(40, active())));
        let skipping = RuleSetHealth {
            skipped: [("u1".to_string(), "a/x: over".to_string())].into(),
            ..active()
        };
        let b = status(3, skipping);
        assert_ne!(
            condition_of(&a, "ObjectsSkipped").status,
            condition_of(&b, "ObjectsSkipped").status
        );
        assert!(!awaited_change(&a, &b), "another condition");
        let failed = RuleSetHealth {
            watch: WatchState::Failed("forbidden".into()),
            ..Default::default()
        };
        assert!(awaited_change(&a, &status(3, failed)), "Ready");
    }

    fn condition_of<'a>(s: &'a RuleSetStatus, type_: &str) -> &'a Condition {
        s.conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    #[test]
    fn a_suspended_ruleset_is_not_ready_and_says_why() {
        let within = status(
            0,
            RuleSetHealth {
                watch: WatchState::Active,
                ..Default::default()
            },
        );
        assert_eq!(condition_of(&within, "CostExceeded").status, "False");
        assert_eq!(condition_of(&within, "CostExceeded").reason, "WithinBudget");

        let mut health = RuleSetHealth {
            watch: WatchState::Active,
            over_budget: 2,
            last_over_budget: Some("rule Heavy: runtime cost limit of 10 exceeded".into()),
            ..Default::default()
        };
        let over = status(0, health.clone());
        let c = condition_of(&over, "CostExceeded");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "CostExceeded")
        );
        assert!(c.message.contains("rule Heavy"), "{}", c.message);
        assert_eq!(condition_of(&over, "Ready").status, "True");

        health.suspended = [Some("team-a".to_string())].into();
        let suspended = status(0, health);
        let c = condition_of(&suspended, "CostExceeded");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "Suspended")
        );
        let ready = condition_of(&suspended, "Ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "Suspended")
        );
        assert!(!suspended.watch_active);
        assert!(awaited_change(&over, &suspended));
    }
}
