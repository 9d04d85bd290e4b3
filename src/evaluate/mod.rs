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
//!
//! Semantics follow cel-go as Kubernetes uses it over unstructured JSON: selecting a missing
//! field is an error (`has()` tests presence, and errors itself when an intermediate field is
//! missing), `&&`/`||`/`exists` absorb errors when the other side decides, JSON integers are
//! `int`, and numbers compare across int/uint/double.

mod bind;
mod engine;
mod functions;

#[cfg(test)]
mod tests;

pub use bind::Bound;
pub use engine::{CompileError, Engine, EvalError, Expr, MAX_SOURCE_LEN};

use engine::BoundContext;

/// The compiled expressions of one ruleset.
#[derive(Debug, Clone)]
pub struct RuleSetExprs {
    pub rules: Vec<RuleExprs>,
    pub label_expressions: Vec<(String, Expr)>,
}

/// The compiled expressions of one rule.
#[derive(Debug, Clone)]
pub struct RuleExprs {
    pub operation: String,
    /// Must return bool.
    pub matches: Expr,
    /// String, evaluated while the rule matches.
    pub message: Option<Expr>,
    /// String (an outcome name), evaluated when the rule does NOT match.
    pub outcome: Option<Expr>,
    /// Timestamp, evaluated while the rule matches.
    pub start_time: Option<Expr>,
}

/// The results of one ruleset on one object.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// Same order as `RuleSetExprs::rules`.
    pub rules: Vec<RuleResult>,
    /// Same order as `RuleSetExprs::label_expressions`.
    pub labels: Vec<(String, Result<String, EvalError>)>,
}

/// The verdict of one rule.
#[derive(Debug, Clone, PartialEq)]
pub enum RuleResult {
    /// The rule matched.
    Active {
        message: Option<Result<String, EvalError>>,
        start_time: Option<Result<jiff::Timestamp, EvalError>>,
    },
    /// The rule evaluated to false.
    Inactive {
        outcome: Option<Result<String, EvalError>>,
    },
    /// The rule errored or returned a non-bool: "unknown", never "not detected".
    Error(EvalError),
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

/// Evaluate every rule and label expression of one ruleset against one object. Never panics.
pub fn evaluate(exprs: &RuleSetExprs, object: &Bound<'_>) -> Evaluation {
    let mut contexts = Contexts {
        object,
        current: None,
    };
    let rules = exprs
        .rules
        .iter()
        .map(|rule| {
            let matched = rule.matches.eval_bool_in(contexts.for_expr(&rule.matches));
            match matched {
                Ok(true) => RuleResult::Active {
                    message: rule
                        .message
                        .as_ref()
                        .map(|e| e.eval_string_in(contexts.for_expr(e))),
                    // An empty string means the object carries no start time.
                    start_time: rule
                        .start_time
                        .as_ref()
                        .and_then(|e| e.eval_start_time_in(contexts.for_expr(e))),
                },
                Ok(false) => RuleResult::Inactive {
                    outcome: rule
                        .outcome
                        .as_ref()
                        .map(|e| e.eval_string_in(contexts.for_expr(e))),
                },
                Err(e) => RuleResult::Error(e),
            }
        })
        .collect();
    let labels = exprs
        .label_expressions
        .iter()
        .map(|(key, e)| (key.clone(), e.eval_string_in(contexts.for_expr(e))))
        .collect();
    Evaluation { rules, labels }
}
