//! Compiling a ruleset: every expression parsed once, every problem reported with the rule it is
//! in. A ruleset with any error runs no rule at all (a half-valid ruleset would silently miss or
//! misreport operations).

use super::related::{RelatedPart, compile_parts, part_rulesets};
use super::types::{RuleSetSpec, Target};
use crate::evaluate::{CompileError, Engine, Expr, RuleExprs, RuleSetExprs};
use crate::operation::RuleSetInfo;
use std::sync::Arc;

/// A ruleset ready to evaluate.
pub struct CompiledRuleSet {
    /// Name, component, labels and generation: what every operation of the ruleset carries.
    pub info: RuleSetInfo,
    /// The resource type the rules watch.
    pub target: Target,
    /// Namespaces the rules apply to; empty means all.
    pub namespaces: Vec<String>,
    /// The compiled expressions, ready for [`crate::evaluate::evaluate`].
    pub exprs: RuleSetExprs,
    /// Operation names, parallel to `exprs.rules`.
    pub operations: Vec<String>,
    /// `metadata.generation` of the ruleset these rules were compiled from, so that status and
    /// health refer to the spec they describe.
    pub generation: Option<i64>,
    /// The rulesets of its related parts (`spec.related`), each for its related target (see
    /// `ruleset::related`); watched along with this one.
    pub related: Vec<Arc<CompiledRuleSet>>,
    /// Set on the ruleset of a related part: the ruleset and part it is. Its evaluations label
    /// that ruleset's operations; it has no rules and makes no operations of its own.
    pub part_of: Option<RelatedPart>,
}

impl CompiledRuleSet {
    /// Whether the rules run on objects in `namespace` (`None` for cluster-scoped objects, which
    /// only a ruleset without `namespaces` covers).
    pub fn applies_to(&self, namespace: Option<&str>) -> bool {
        self.namespaces.is_empty()
            || namespace.is_some_and(|ns| self.namespaces.iter().any(|n| n == ns))
    }

    /// The OperationRuleSet this is of: itself, or for a related part its ruleset. Its loaded
    /// generation decides whether this one's evaluations count (a part is never loaded by its
    /// own name), and its name is the one metrics count this one under.
    pub fn owner(&self) -> &RuleSetInfo {
        self.part_of.as_ref().map_or(&self.info, |p| &p.ruleset)
    }
}

/// One reason a ruleset does not compile.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RuleSetProblem {
    /// An expression does not compile; `place` names it (`rules[0] (Migrating).expression`).
    #[error("{place}: {error}")]
    Expression {
        /// Where the expression is.
        place: String,
        /// What the CEL compiler said.
        error: CompileError,
    },
    /// `rules` is empty.
    #[error("rules: at least one rule is required")]
    NoRules,
    /// `target` lacks its version or resource.
    #[error("target: version and resource are required")]
    NoTarget,
    /// `related[index].target` lacks its version or resource.
    #[error("related[{index}].target: version and resource are required")]
    NoRelatedTarget {
        /// The part.
        index: usize,
    },
    /// `related[index].target` is the ruleset's own target.
    #[error(
        "related[{index}].target: {target} is the ruleset's own target; a related object is of another resource type"
    )]
    RelatedIsOwnTarget {
        /// The part.
        index: usize,
        /// The target, as `group/version/resource`.
        target: String,
    },
    /// `related[index].match` is not one this server knows.
    #[error(
        "related[{index}].match: {value:?} is not a match this server knows; the only one is SameName"
    )]
    UnknownMatch {
        /// The part.
        index: usize,
        /// What the spec says.
        value: String,
    },
    /// `related[index].labelExpressions` is empty: the part would label nothing.
    #[error("related[{index}].labelExpressions: at least one label expression is required")]
    NoRelatedLabels {
        /// The part.
        index: usize,
    },
    /// A label key of a related part is not a valid label key (`place` names it).
    #[error("{place}: not a valid label key: {reason}")]
    InvalidLabelKey {
        /// Where the key is.
        place: String,
        /// Why not, as Kubernetes says it.
        reason: String,
    },
}

/// Why a ruleset does not compile: every problem at once, so that its author fixes them in one
/// go (shown on its `InvalidRule` condition, joined by `; `).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", self.problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct InvalidRuleSet {
    /// In the order of the spec.
    pub problems: Vec<RuleSetProblem>,
}

/// The ruleset compiled, or every problem in it.
pub fn compile(
    engine: &Engine,
    name: &str,
    generation: Option<i64>,
    spec: &RuleSetSpec,
) -> Result<CompiledRuleSet, InvalidRuleSet> {
    let mut errors = Vec::new();
    let mut compile_one = |place: String, source: &str| -> Option<Expr> {
        match engine.compile(source) {
            Ok(expr) => Some(expr),
            Err(error) => {
                errors.push(RuleSetProblem::Expression { place, error });
                None
            }
        }
    };
    let mut rules = Vec::new();
    for (i, rule) in spec.rules.iter().enumerate() {
        let at = |field: &str| format!("rules[{i}] ({}).{field}", rule.operation);
        let matches = compile_one(at("expression"), &rule.expression);
        let mut optional = |field: &str, source: &Option<String>| {
            source.as_deref().map(|s| compile_one(at(field), s))
        };
        let message = optional("message", &rule.message);
        let outcome = optional("outcome", &rule.outcome);
        let start_time = optional("startTime", &rule.start_time);
        let progress = optional("progress", &rule.progress);
        let stalled = optional("stalled", &rule.stalled);
        // `Some(None)`: absent; `None`: present but does not compile.
        let present = |e: Option<Option<Expr>>| e.map_or(Some(None), |e| e.map(Some));
        if let (
            Some(matches),
            Some(message),
            Some(outcome),
            Some(start_time),
            Some(progress),
            Some(stalled),
        ) = (
            matches,
            present(message),
            present(outcome),
            present(start_time),
            present(progress),
            present(stalled),
        ) {
            rules.push(RuleExprs {
                operation: rule.operation.clone(),
                matches,
                message,
                outcome,
                start_time,
                progress,
                stalled,
            });
        }
    }
    let mut label_expressions = Vec::new();
    for (i, le) in spec.label_expressions.iter().enumerate() {
        if let Some(expr) = compile_one(
            format!("labelExpressions[{i}] ({})", le.key),
            &le.expression,
        ) {
            label_expressions.push((le.key.clone(), expr));
        }
    }
    let parts = compile_parts(engine, &spec.related, &spec.target, &mut errors);
    if spec.rules.is_empty() {
        errors.push(RuleSetProblem::NoRules);
    }
    if spec.target.version.is_empty() || spec.target.resource.is_empty() {
        errors.push(RuleSetProblem::NoTarget);
    }
    if !errors.is_empty() {
        return Err(InvalidRuleSet { problems: errors });
    }
    let info = RuleSetInfo {
        name: name.to_string(),
        component: spec.component.clone(),
        labels: spec.labels.clone(),
        generation,
        exclusive: spec.exclusive,
    };
    Ok(CompiledRuleSet {
        related: part_rulesets(&info, &spec.namespaces, parts),
        part_of: None,
        info,
        target: spec.target.clone(),
        namespaces: spec.namespaces.clone(),
        operations: rules.iter().map(|r| r.operation.clone()).collect(),
        exprs: RuleSetExprs {
            rules,
            label_expressions,
        },
        generation,
    })
}
