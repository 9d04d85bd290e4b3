//! OperationRuleSets: their API types and their compilation. The controller that runs them is
//! `reconcile`.

mod compile;
mod types;

pub use compile::{CompiledRuleSet, InvalidRuleSet, RuleSetProblem, compile};
pub(crate) use types::{OperationDurations, OperationRuleSet, RuleSetStatus, api_resource};
pub use types::{RuleSetSpec, Target};
