//! Compiling a ruleset: every expression parsed once, every problem reported with the rule it is
//! in. A ruleset with any error runs no rule at all (a half-valid ruleset would silently miss or
//! misreport operations).

use super::related::{Match, RelatedPart, part_name};
use super::types::{Related, RuleSchedule, RuleSetSpec, Target};
use crate::evaluate::{CompileError, Engine, Expr, RuleExprs, RuleSetExprs, ScheduleExprs};
use crate::operation::RuleSetInfo;
use std::collections::BTreeMap;
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
    /// Parallel to `exprs.rules`: whose learned durations (ruleset, operation) the operations
    /// a rule's `schedule` announces are expected to take.
    pub durations_of: Vec<(String, String)>,
    /// Per operation, the label of its rule's `durationsBy`: whose durations the operation
    /// counts toward (see `history::named_key`).
    pub durations_by: BTreeMap<String, String>,
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
    /// The operations of its rules with a `schedule`: those whose next starts it announces.
    pub fn scheduled_operations(&self) -> Vec<String> {
        let rules = self.exprs.rules.iter();
        rules
            .filter(|r| r.schedule.is_some())
            .map(|r| r.operation.clone())
            .collect()
    }

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
    /// A rule's `schedule` has neither or both of its forms (`place` names it).
    #[error("{place}: {reason}")]
    Schedule {
        /// Where the schedule is.
        place: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A rule's `durationsBy` names a label no label expression of the ruleset sets.
    #[error(
        "{place}: no labelExpressions (of the ruleset or of its related parts) set the label {key:?}; durationsBy names one that does"
    )]
    DurationsBy {
        /// Where it is.
        place: String,
        /// The label it names.
        key: String,
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

/// A rule's `schedule`, compiled; `None` when it does not (an expression's problem is pushed
/// through `compile_one`, a shape's onto `shapes`): exactly one of `cron` and `at`, `timeZone`
/// and `from` only with `cron`.
fn compile_schedule(
    schedule: &RuleSchedule,
    place: &str,
    compile_one: &mut impl FnMut(String, &str) -> Option<Expr>,
    shapes: &mut Vec<RuleSetProblem>,
) -> Option<ScheduleExprs> {
    let field = |name: &str| format!("{place}.{name}");
    let mut shape = |reason: &str| {
        shapes.push(RuleSetProblem::Schedule {
            place: place.to_owned(),
            reason: reason.to_owned(),
        });
        None
    };
    let with_cron_only = schedule.time_zone.is_some() || schedule.from.is_some();
    match (&schedule.cron, &schedule.at) {
        (Some(cron), None) => {
            let cron = compile_one(field("cron"), cron);
            let mut optional = |name: &str, source: &Option<String>| match source {
                Some(source) => compile_one(field(name), source).map(Some),
                None => Some(None),
            };
            let time_zone = optional("timeZone", &schedule.time_zone);
            let from = optional("from", &schedule.from);
            Some(ScheduleExprs::Cron {
                schedule: cron?,
                time_zone: time_zone?,
                from: from?,
            })
        }
        (None, Some(at)) if !with_cron_only => compile_one(field("at"), at).map(ScheduleExprs::At),
        (None, Some(_)) => shape("timeZone and from are read with cron only; at is a time"),
        (Some(_), Some(_)) => shape("cron and at are two ways to say it: give one"),
        (None, None) => shape("either cron or at is required"),
    }
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
    let mut shapes = Vec::new();
    let mut durations = Vec::new();
    let mut durations_by = BTreeMap::new();
    let labelled = |key: &str| {
        let own = spec.label_expressions.iter();
        let related = spec.related.iter().flat_map(|r| &r.label_expressions);
        own.chain(related).any(|le| le.key == key)
    };
    for (i, rule) in spec.rules.iter().enumerate() {
        let at = |field: &str| format!("rules[{i}] ({}).{field}", rule.operation);
        if let Some(key) = &rule.durations_by {
            if labelled(key) {
                durations_by.insert(rule.operation.clone(), key.clone());
            } else {
                shapes.push(RuleSetProblem::DurationsBy {
                    place: at("durationsBy"),
                    key: key.clone(),
                });
            }
        }
        let matches = compile_one(at("expression"), &rule.expression);
        let mut optional = |field: &str, source: &Option<String>| {
            source.as_deref().map(|s| compile_one(at(field), s))
        };
        let message = optional("message", &rule.message);
        let outcome = optional("outcome", &rule.outcome);
        let start_time = optional("startTime", &rule.start_time);
        let progress = optional("progress", &rule.progress);
        let stalled = optional("stalled", &rule.stalled);
        let schedule = rule
            .schedule
            .as_ref()
            .map(|s| compile_schedule(s, &at("schedule"), &mut compile_one, &mut shapes));
        // `Some(None)`: absent; `None`: present but does not compile.
        fn present<T>(e: Option<Option<T>>) -> Option<Option<T>> {
            e.map_or(Some(None), |e| e.map(Some))
        }
        if let (
            Some(matches),
            Some(message),
            Some(outcome),
            Some(start_time),
            Some(progress),
            Some(stalled),
            Some(schedule),
        ) = (
            matches,
            present(message),
            present(outcome),
            present(start_time),
            present(progress),
            present(stalled),
            present(schedule),
        ) {
            let durations_of = rule.schedule.as_ref().and_then(|s| s.durations_of.as_ref());
            durations.push(durations_of.map_or_else(
                || (name.to_owned(), rule.operation.clone()),
                |d| (d.rule_set.clone(), d.operation.clone()),
            ));
            rules.push(RuleExprs {
                operation: rule.operation.clone(),
                matches,
                message,
                outcome,
                start_time,
                progress,
                stalled,
                schedule,
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
    errors.append(&mut shapes);
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
        durations_of: durations,
        durations_by,
        exprs: RuleSetExprs {
            rules,
            label_expressions,
        },
        generation,
    })
}

/// One part, compiled but not yet tied to its ruleset's info.
pub(super) struct CompiledPart {
    target: Target,
    matching: Match,
    label_expressions: Vec<(String, Expr)>,
}

/// Checks and compiles `related`, pushing every problem to `errors` in the order of the spec.
/// `own`: the ruleset's target.
pub(super) fn compile_parts(
    engine: &Engine,
    related: &[Related],
    own: &Target,
    errors: &mut Vec<RuleSetProblem>,
) -> Vec<CompiledPart> {
    let mut parts = Vec::new();
    for (index, part) in related.iter().enumerate() {
        let mut valid = true;
        let mut problem = |p: RuleSetProblem| {
            errors.push(p);
            valid = false;
        };
        if part.target.version.is_empty() || part.target.resource.is_empty() {
            problem(RuleSetProblem::NoRelatedTarget { index });
        } else if part.target == *own {
            problem(RuleSetProblem::RelatedIsOwnTarget {
                index,
                target: part.target.to_string(),
            });
        }
        let matching = Match::parse(&part.matching);
        if matching.is_none() {
            problem(RuleSetProblem::UnknownMatch {
                index,
                value: part.matching.clone(),
            });
        }
        if part.label_expressions.is_empty() {
            problem(RuleSetProblem::NoRelatedLabels { index });
        }
        let mut label_expressions = Vec::new();
        for (i, le) in part.label_expressions.iter().enumerate() {
            let place = format!("related[{index}].labelExpressions[{i}] ({})", le.key);
            let reasons = ifo_apimachinery::validation::is_qualified_name(&le.key);
            if !reasons.is_empty() {
                problem(RuleSetProblem::InvalidLabelKey {
                    place: place.clone(),
                    reason: reasons.join("; "),
                });
            }
            match engine.compile(&le.expression) {
                Ok(expr) => label_expressions.push((le.key.clone(), expr)),
                Err(error) => problem(RuleSetProblem::Expression { place, error }),
            }
        }
        if let (true, Some(matching)) = (valid, matching) {
            parts.push(CompiledPart {
                target: part.target.clone(),
                matching,
                label_expressions,
            });
        }
    }
    parts
}

/// The rulesets of `parts`, for the ruleset of `info` covering `namespaces`: each watches its
/// target in the same namespaces, under [`part_name`].
pub(super) fn part_rulesets(
    info: &RuleSetInfo,
    namespaces: &[String],
    parts: Vec<CompiledPart>,
) -> Vec<Arc<CompiledRuleSet>> {
    parts
        .into_iter()
        .enumerate()
        .map(|(index, part)| {
            Arc::new(CompiledRuleSet {
                info: RuleSetInfo {
                    name: part_name(&info.name, index),
                    component: info.component.clone(),
                    labels: Default::default(),
                    generation: info.generation,
                    exclusive: false,
                },
                target: part.target,
                namespaces: namespaces.to_vec(),
                exprs: RuleSetExprs {
                    rules: Vec::new(),
                    label_expressions: part.label_expressions,
                },
                operations: Vec::new(),
                durations_of: Vec::new(),
                durations_by: BTreeMap::new(),
                generation: info.generation,
                related: Vec::new(),
                part_of: Some(RelatedPart {
                    ruleset: info.clone(),
                    index,
                    matching: part.matching,
                }),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
