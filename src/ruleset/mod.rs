//! OperationRuleSets: their API types, compilation, and the controller that turns the set of
//! rulesets into running watchers and reports each one's state in its status.

mod compile;
mod controller;
mod status;
mod types;

pub use compile::{CompiledRuleSet, compile};
pub use controller::run;
pub use types::{
    LabelExpression, OperationRuleSet, Rule, RuleSetSpec, RuleSetStatus, Target, api_resource,
};
