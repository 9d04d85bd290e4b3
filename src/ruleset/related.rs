//! Related objects (`spec.related`): label a ruleset's operations from an object of another
//! resource type, such as a VirtualMachine's node from its VirtualMachineInstance.
//!
//! Each related part compiles into a ruleset of its own for the related target (no rules, only
//! the part's label expressions), named [`part_name`] and marked [`RelatedPart`]. It runs where
//! every ruleset runs: the watchers watch its target, its evaluation lane evaluates every object
//! within the budget, and detection's health reports its blind spots (a watch that is not
//! current, an expression that fails on an object) for the gates its node labels reach. Only
//! the detector tells it apart: what it evaluates goes into the related values of its ruleset's
//! subjects (`track::RelatedValues`), never into operations of its own.

use super::compile::{CompiledRuleSet, RuleSetProblem};
use super::types::{Related, SAME_NAME, Target};
use crate::evaluate::{Engine, Expr, RuleSetExprs};
use crate::operation::RuleSetInfo;
use std::fmt;
use std::sync::Arc;

/// How a subject finds its related object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// The object of the related target with the subject's namespace and name.
    SameName,
}

impl Match {
    /// The `match` of a spec, if this server knows it.
    fn parse(text: &str) -> Option<Match> {
        (text == SAME_NAME).then_some(Match::SameName)
    }
}

impl fmt::Display for Match {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Match::SameName => f.write_str(SAME_NAME),
        }
    }
}

/// What a related part is part of: the compiled ruleset of one `spec.related[index]`, whose
/// evaluations label the operations of `ruleset` instead of making operations of their own.
#[derive(Debug, Clone)]
pub struct RelatedPart {
    /// The ruleset the part belongs to, as its operations carry it (its name, generation and
    /// static labels).
    pub ruleset: RuleSetInfo,
    /// Its place in `spec.related`.
    pub index: usize,
    /// How a subject finds its related object.
    pub matching: Match,
}

/// The name a related part goes by wherever a ruleset is named (health, the status of its
/// ruleset, logs, metrics): `<ruleset>/related[<index>]`. An object name never holds `/`, so it
/// is never the name of a ruleset, and it is never an operation's ruleset.
pub fn part_name(ruleset: &str, index: usize) -> String {
    format!("{ruleset}/related[{index}]")
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
            let reasons = crate::apimachinery::validation::is_qualified_name(&le.key);
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
mod tests {
    use crate::evaluate::Engine;
    use crate::ruleset::{RuleSetSpec, compile};
    use serde_json::json;

    fn spec(related: serde_json::Value) -> RuleSetSpec {
        serde_json::from_value(json!({
            "component": "kubevirt",
            "target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachines"},
            "namespaces": ["vms"],
            "labelExpressions": [{"key": "ifo.kubevirt.io/vm", "expression": "object.metadata.name"}],
            "rules": [{"operation": "Stopping", "expression": "true"}],
            "related": related,
        }))
        .unwrap()
    }

    fn vmi(labels: serde_json::Value) -> serde_json::Value {
        json!([{
            "target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachineinstances"},
            "labelExpressions": labels,
        }])
    }

    /// Every problem of the ruleset, one line each.
    fn problems(spec: &RuleSetSpec) -> Vec<String> {
        match compile(&Engine::new(), "vm-rules", Some(3), spec) {
            Ok(_) => Vec::new(),
            Err(invalid) => invalid.problems.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn a_related_part_compiles_into_a_ruleset_of_its_own_for_its_target() {
        let rs = compile(
            &Engine::new(),
            "vm-rules",
            Some(3),
            &spec(vmi(json!([
                {"key": "ifo.kubevirt.io/node", "expression": "object.?status.?nodeName.orValue('')"},
            ]))),
        )
        .unwrap();
        assert!(rs.part_of.is_none());
        let [part] = rs.related.as_slice() else {
            panic!("one part: {}", rs.related.len())
        };
        assert_eq!(part.info.name, "vm-rules/related[0]");
        assert_eq!(part.target.resource, "virtualmachineinstances");
        assert_eq!(part.namespaces, ["vms"], "watched where its ruleset is");
        assert_eq!(part.generation, Some(3));
        assert!(part.operations.is_empty() && part.exprs.rules.is_empty());
        assert_eq!(part.exprs.label_expressions[0].0, "ifo.kubevirt.io/node");
        let of = part.part_of.as_ref().unwrap();
        assert_eq!(
            (of.ruleset.name.as_str(), of.index, of.matching),
            ("vm-rules", 0, super::Match::SameName)
        );
        assert!(part.related.is_empty());
    }

    #[test]
    fn match_defaults_to_same_name() {
        let spec = spec(vmi(json!([{"key": "a.io/b", "expression": "'x'"}])));
        assert_eq!(spec.related[0].matching, "SameName");
    }

    #[test]
    fn the_ruleset_s_own_target_an_unknown_match_and_a_bad_key_are_invalid_rules() {
        let own = spec(json!([{
            "target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachines"},
            "labelExpressions": [{"key": "a.io/b", "expression": "'x'"}],
        }]));
        assert_eq!(
            problems(&own),
            [
                "related[0].target: kubevirt.io/v1/virtualmachines is the ruleset's own target; \
                 a related object is of another resource type"
            ]
        );

        let mut unknown = spec(vmi(json!([{"key": "a.io/b", "expression": "'x'"}])));
        unknown.related[0].matching = "OwnerReference".into();
        assert_eq!(
            problems(&unknown),
            [
                "related[0].match: \"OwnerReference\" is not a match this server knows; the \
                 only one is SameName"
            ]
        );

        let bad_key = spec(vmi(json!([{"key": "not a key", "expression": "'x'"}])));
        let found = problems(&bad_key);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0]
                .starts_with("related[0].labelExpressions[0] (not a key): not a valid label key: "),
            "{found:?}"
        );

        let none = spec(vmi(json!([])));
        assert_eq!(
            problems(&none),
            ["related[0].labelExpressions: at least one label expression is required"]
        );

        let no_target = spec(json!([{
            "target": {"group": "kubevirt.io", "version": "", "resource": ""},
            "labelExpressions": [{"key": "a.io/b", "expression": "'x'"}],
        }]));
        assert_eq!(
            problems(&no_target),
            ["related[0].target: version and resource are required"]
        );

        let bad_cel = spec(vmi(
            json!([{"key": "a.io/b", "expression": "object.status =="}]),
        ));
        let found = problems(&bad_cel);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("related[0].labelExpressions[0] (a.io/b): "),
            "{found:?}"
        );
    }
}
