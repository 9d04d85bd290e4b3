//! Evaluating the CEL expressions of `OperationRuleSet`s against Kubernetes objects.
//!
//! Pure: no I/O, no Kubernetes client, no async. Everything here is synchronous and CPU-bound;
//! callers evaluate a whole event without awaiting in between.
//!
//! * [`Engine`]: the shared CEL environment; [`Engine::compile`] gives an [`Expr`].
//! * [`Bound`]: one object made ready for evaluation, in O(1) (see `bind`).
//! * [`evaluate`]: every rule and label expression of one ruleset against one object, with the
//!   semantics the rest of the system relies on: a rule that errors or yields a non-bool is
//!   [`RuleResult::Error`] ("unknown"), never "not detected".
//! * Cost: expressions whose estimated worst case is too high do not compile (`estimate`), and
//!   every evaluation runs under a [`Budget`] (`meter`); one that goes over it is "unknown" too,
//!   and says so in [`Evaluation::over_budget`].
//!
//! Semantics follow cel-go as Kubernetes uses it over unstructured JSON: selecting a missing
//! field is an error (`has()` tests presence, and errors itself when an intermediate field is
//! missing), `&&`/`||`/`exists` absorb errors when the other side decides, JSON integers are
//! `int`, and numbers compare across int/uint/double.

mod bind;
mod bounded;
mod engine;
pub mod estimate;
mod functions;
mod meter;
mod runtime_error;

#[cfg(test)]
mod cost_tests;
#[cfg(test)]
mod tests;

pub use bind::Bound;
pub(crate) use bounded::{MAX_MESSAGE_CHARS, truncated};
#[cfg(test)]
use engine::MAX_SOURCE_LEN;
pub use engine::{CompileError, Engine, EvalError, Expr};
#[cfg(test)]
use meter::MAX_STRING_BYTES;
pub(crate) use meter::{Budget, DEFAULT_COST_LIMIT, Exceeded};
pub use runtime_error::RuntimeError;

use engine::BoundContext;

/// The compiled expressions of one ruleset.
#[derive(Debug, Clone)]
pub struct RuleSetExprs {
    /// The rules, in the ruleset's order.
    pub rules: Vec<RuleExprs>,
    /// `labelExpressions`: each label key with the expression that computes its value.
    pub label_expressions: Vec<(String, Expr)>,
}

/// The compiled expressions of one rule.
#[derive(Debug, Clone)]
pub struct RuleExprs {
    /// The operation the rule detects (`Migrating`).
    pub operation: String,
    /// Must return bool.
    pub matches: Expr,
    /// String, evaluated while the rule matches.
    pub message: Option<Expr>,
    /// String (an outcome name), evaluated when the rule does NOT match.
    pub outcome: Option<Expr>,
    /// Timestamp, evaluated while the rule matches.
    pub start_time: Option<Expr>,
    /// Number 0-100 or a percentage string, evaluated while the rule matches.
    pub progress: Option<Expr>,
    /// Bool or a reason string, evaluated while the rule matches.
    pub stalled: Option<Expr>,
    /// When the rule's next operation starts, evaluated whether or not the rule matches.
    pub schedule: Option<ScheduleExprs>,
}

/// The compiled `schedule` of one rule: exactly one of its two forms.
#[derive(Debug, Clone)]
pub enum ScheduleExprs {
    /// `cron` (a string), `timeZone` (a string; absent: UTC) and `from` (a timestamp).
    Cron {
        /// The schedule.
        schedule: Expr,
        /// Its time zone.
        time_zone: Option<Expr>,
        /// When its last run was, for an `@every` schedule.
        from: Option<Expr>,
    },
    /// `at` (a timestamp or RFC 3339 string).
    At(Expr),
}

impl ScheduleExprs {
    /// Each expression, with the field of `schedule` it comes from (`cron`, `timeZone`,
    /// `from`, `at`).
    pub fn fields(&self) -> Vec<(&'static str, &Expr)> {
        match self {
            ScheduleExprs::Cron {
                schedule,
                time_zone,
                from,
            } => std::iter::once(("cron", schedule))
                .chain(time_zone.iter().map(|e| ("timeZone", e)))
                .chain(from.iter().map(|e| ("from", e)))
                .collect(),
            ScheduleExprs::At(at) => vec![("at", at)],
        }
    }
}

/// What a rule's `schedule` says of its next operation, as the object gives it.
#[derive(Debug, Clone, PartialEq)]
pub enum NextStart {
    /// Nothing is announced (an empty string: a suspended CronJob, no cutover set).
    Nothing,
    /// A cron schedule and its time zone (empty: UTC), not yet parsed.
    Cron {
        /// The schedule.
        schedule: String,
        /// Its time zone.
        time_zone: String,
        /// When its last run was, if the rule says (read for an `@every` schedule only).
        from: Option<jiff::Timestamp>,
    },
    /// A time.
    At(jiff::Timestamp),
}

/// The results of one ruleset on one object.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// Same order as `RuleSetExprs::rules`.
    pub rules: Vec<RuleResult>,
    /// Same order as `RuleSetExprs::label_expressions`.
    pub labels: Vec<(String, Result<String, EvalError>)>,
    /// Same order as `RuleSetExprs::rules`: each rule's next start, `None` for a rule without a
    /// schedule.
    pub starts: Vec<Option<Result<NextStart, EvalError>>>,
    /// The first expression that went over the budget, if any (its result is
    /// `EvalError::CostExceeded`, as is every expression after the deadline).
    pub over_budget: Option<OverBudget>,
}

/// Where and how an evaluation went over its budget.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{place}: {exceeded}")]
pub struct OverBudget {
    /// `rule <operation>`, `rule <operation> message`, `label <key>`, ...
    pub place: String,
    /// Which limit it hit.
    pub exceeded: Exceeded,
}

/// The result of one rule.
#[derive(Debug, Clone, PartialEq)]
pub enum RuleResult {
    /// The rule matched.
    Active {
        /// The message expression's result, if the rule has one.
        message: Option<Result<String, EvalError>>,
        /// The start-time expression's result, if the rule has one.
        start_time: Option<Result<jiff::Timestamp, EvalError>>,
        /// The progress expression's result (percent, 0 to 100; `None` when it gave `''`: the
        /// object does not say), if the rule has one.
        progress: Option<Result<Option<f64>, EvalError>>,
        /// The stalled expression's result, if the rule has one: `None` not stalled,
        /// `Some(reason)` stalled (an empty reason when the expression said `true`).
        stalled: Option<Result<Option<String>, EvalError>>,
    },
    /// The rule evaluated to false.
    Inactive {
        /// The outcome expression's result, if the rule has one.
        outcome: Option<Result<String, EvalError>>,
    },
    /// The rule errored or returned a non-bool: "unknown", never "not detected".
    Error(EvalError),
}

#[cfg(test)]
impl RuleResult {
    /// A match with what its message and start time expressions gave, and no progress or
    /// stall.
    pub(crate) fn active(
        message: Option<Result<String, EvalError>>,
        start_time: Option<Result<jiff::Timestamp, EvalError>>,
    ) -> Self {
        RuleResult::Active {
            message,
            start_time,
            progress: None,
            stalled: None,
        }
    }
}

impl RuleResult {
    /// Each expression of the rule that failed on the object, with which it is (`None`: the
    /// rule's own expression; else `message`, `startTime`, `progress`, `stalled` or
    /// `outcome`, as a ruleset names them): what detection reports on the ruleset and the
    /// library's cases report as failures.
    pub fn errors(&self) -> impl Iterator<Item = (Option<&'static str>, &EvalError)> {
        fn err<T>(r: &Option<Result<T, EvalError>>) -> Option<&EvalError> {
            r.as_ref()?.as_ref().err()
        }
        let parts: [(Option<&'static str>, Option<&EvalError>); 4] = match self {
            RuleResult::Error(e) => [(None, Some(e)), (None, None), (None, None), (None, None)],
            RuleResult::Active {
                message,
                start_time,
                progress,
                stalled,
            } => [
                (Some("message"), err(message)),
                (Some("startTime"), err(start_time)),
                (Some("progress"), err(progress)),
                (Some("stalled"), err(stalled)),
            ],
            RuleResult::Inactive { outcome } => [
                (Some("outcome"), err(outcome)),
                (None, None),
                (None, None),
                (None, None),
            ],
        };
        parts
            .into_iter()
            .filter_map(|(part, error)| Some((part, error?)))
    }
}

/// Hands out one evaluation context per engine: every expression of a ruleset normally comes
/// from the same engine, so one context serves the whole ruleset.
struct Contexts<'v> {
    object: &'v Bound<'v>,
    current: Option<BoundContext<'v>>,
}

impl<'v> Contexts<'v> {
    fn for_expr(&mut self, expr: &Expr) -> &BoundContext<'v> {
        let reusable = self.current.as_ref().is_some_and(|c| c.is_for(expr.env()));
        if !reusable {
            self.current = Some(BoundContext::new(expr.env(), self.object));
        }
        self.current.as_ref().expect("context was just set")
    }
}

/// Evaluate every rule and label expression of one ruleset against one object, under the
/// default [`Budget`]. Never panics.
pub fn evaluate(exprs: &RuleSetExprs, object: &Bound<'_>) -> Evaluation {
    evaluate_within(exprs, object, &Budget::default())
}

/// Records the first expression that went over budget.
#[derive(Default)]
struct Overrun {
    first: Option<OverBudget>,
    /// Set once the evaluation is past its deadline: the remaining expressions do not run.
    late: Option<Exceeded>,
}

impl Overrun {
    /// `run`s the expression at `place` and turns its result into `CostExceeded` when it went
    /// over budget, ran past the evaluation's deadline (work that cannot be interrupted is
    /// caught here, late), or comes after that deadline (then it does not run at all).
    fn check<T>(
        &mut self,
        place: impl FnOnce() -> String,
        run: impl FnOnce() -> Result<T, EvalError>,
    ) -> Result<T, EvalError> {
        if let Some(exceeded) = self.late {
            return Err(EvalError::CostExceeded(exceeded));
        }
        let mut result = run();
        if let Some(exceeded) = meter::past_deadline() {
            self.late = Some(exceeded);
            if !matches!(result, Err(EvalError::CostExceeded(_))) {
                result = Err(EvalError::CostExceeded(exceeded));
            }
        }
        if let Err(EvalError::CostExceeded(exceeded)) = &result
            && self.first.is_none()
        {
            self.first = Some(OverBudget {
                place: place(),
                exceeded: *exceeded,
            });
        }
        result
    }
}

/// Evaluate every rule and label expression of one ruleset against one object: each expression
/// may use `budget.cost_limit`, the whole evaluation `budget.timeout`. Never panics.
pub(crate) fn evaluate_within(
    exprs: &RuleSetExprs,
    object: &Bound<'_>,
    budget: &Budget,
) -> Evaluation {
    meter::within(budget, || evaluate_metered(exprs, object))
}

/// Only the label expressions of `exprs` whose key is one of `keys`, under `budget`: what a
/// suspended ruleset still evaluates of an object (its node labels, cheap by design), so that
/// the gates know which nodes a change they cannot judge is on. Never panics.
pub(crate) fn evaluate_labels_within(
    exprs: &RuleSetExprs,
    object: &Bound<'_>,
    budget: &Budget,
    keys: &[&str],
) -> Vec<(String, Result<String, EvalError>)> {
    meter::within(budget, || {
        let mut contexts = Contexts {
            object,
            current: None,
        };
        let mut overrun = Overrun::default();
        exprs
            .label_expressions
            .iter()
            .filter(|(key, _)| keys.contains(&key.as_str()))
            .map(|(key, e)| {
                let value = overrun.check(
                    || format!("label {key}"),
                    || e.eval_string_in(contexts.for_expr(e)),
                );
                (key.clone(), value)
            })
            .collect()
    })
}

fn evaluate_metered(exprs: &RuleSetExprs, object: &Bound<'_>) -> Evaluation {
    let mut contexts = Contexts {
        object,
        current: None,
    };
    let mut overrun = Overrun::default();
    // Labels first: they say which node an object is on, which the gates need most when the
    // rules after them cannot be evaluated (over the budget, or failing).
    let labels = exprs
        .label_expressions
        .iter()
        .map(|(key, e)| {
            let value = overrun.check(
                || format!("label {key}"),
                || e.eval_string_in(contexts.for_expr(e)),
            );
            (key.clone(), value)
        })
        .collect();
    let rules = exprs
        .rules
        .iter()
        .map(|rule| {
            let op = &rule.operation;
            let matched = overrun.check(
                || format!("rule {op}"),
                || rule.matches.eval_bool_in(contexts.for_expr(&rule.matches)),
            );
            match matched {
                Ok(true) => RuleResult::Active {
                    message: rule.message.as_ref().map(|e| {
                        overrun.check(
                            || format!("rule {op} message"),
                            || e.eval_string_in(contexts.for_expr(e)),
                        )
                    }),
                    // An empty string means the object carries no start time.
                    start_time: rule.start_time.as_ref().and_then(|e| {
                        overrun
                            .check(
                                || format!("rule {op} startTime"),
                                || e.eval_start_time_in(contexts.for_expr(e)).transpose(),
                            )
                            .transpose()
                    }),
                    progress: rule.progress.as_ref().map(|e| {
                        overrun.check(
                            || format!("rule {op} progress"),
                            || e.eval_progress_in(contexts.for_expr(e)),
                        )
                    }),
                    stalled: rule.stalled.as_ref().map(|e| {
                        overrun.check(
                            || format!("rule {op} stalled"),
                            || e.eval_stalled_in(contexts.for_expr(e)),
                        )
                    }),
                },
                Ok(false) => RuleResult::Inactive {
                    outcome: rule.outcome.as_ref().map(|e| {
                        overrun.check(
                            || format!("rule {op} outcome"),
                            || e.eval_string_in(contexts.for_expr(e)),
                        )
                    }),
                },
                Err(e) => RuleResult::Error(e),
            }
        })
        .collect();
    let starts = exprs
        .rules
        .iter()
        .map(|rule| {
            let schedule = rule.schedule.as_ref()?;
            let op = &rule.operation;
            Some(overrun.check(
                || format!("rule {op} schedule"),
                || next_start(schedule, &mut contexts),
            ))
        })
        .collect();
    Evaluation {
        rules,
        labels,
        starts,
        over_budget: overrun.first,
    }
}

/// What `schedule` says of the object: an empty string is [`NextStart::Nothing`].
fn next_start(
    schedule: &ScheduleExprs,
    contexts: &mut Contexts<'_>,
) -> Result<NextStart, EvalError> {
    match schedule {
        ScheduleExprs::Cron {
            schedule,
            time_zone,
            from,
        } => {
            let text = schedule.eval_string_in(contexts.for_expr(schedule))?;
            if text.trim().is_empty() {
                return Ok(NextStart::Nothing);
            }
            let time_zone = match time_zone {
                Some(e) => e.eval_string_in(contexts.for_expr(e))?,
                None => String::new(),
            };
            // Only an `@every` schedule reads it: no other fails on it.
            let from = match from {
                Some(e) if text.contains("@every") => {
                    e.eval_start_time_in(contexts.for_expr(e)).transpose()?
                }
                _ => None,
            };
            Ok(NextStart::Cron {
                schedule: text,
                time_zone,
                from,
            })
        }
        ScheduleExprs::At(e) => Ok(e
            .eval_start_time_in(contexts.for_expr(e))
            .transpose()?
            .map_or(NextStart::Nothing, NextStart::At)),
    }
}
