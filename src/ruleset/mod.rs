//! OperationRuleSets: their API types and their compilation. The controller that runs them is
//! `reconcile`.

mod compile;
mod types;

pub use compile::{CompiledRuleSet, InvalidRuleSet, RuleSetProblem, compile};
pub use types::{
    LabelExpression, OperationDurations, OperationRuleSet, Rule, RuleSetSpec, RuleSetStatus,
    Target, api_resource,
};
