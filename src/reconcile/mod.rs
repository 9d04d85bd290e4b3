//! The OperationRuleSet controller: turns the set of rulesets into running watchers (compiling
//! each generation once) and reports each one's state in its status. It drives `watch` and
//! reads what the watchers learned; the ruleset types and their compilation (`ruleset`) know
//! nothing of it.

mod controller;
mod schema;
mod status;

pub(crate) use controller::{Checks, run};
