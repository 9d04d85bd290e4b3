//! OperationRuleSets: their API types and their compilation. The controller that runs them is
//! `reconcile`.

mod compile;
mod related;
pub mod schema_check;
mod types;

pub use compile::{CompiledRuleSet, InvalidRuleSet, RuleSetProblem, compile};
pub use related::{Match, RelatedPart, part_name};
pub(crate) use types::{
    ObservedCoverage, OperationDurations, OperationRuleSet, RuleSetStatus, api_resource,
};
pub use types::{Related, RuleSetSpec, Target};
