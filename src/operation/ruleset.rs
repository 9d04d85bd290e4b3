//! What a record needs to know about the `OperationRuleSet` that detected it.

use std::collections::BTreeMap;

/// The parts of an `OperationRuleSet` that end up in its operations' records.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuleSetInfo {
    /// `metadata.name` of the ruleset (`spec.ruleSet`, the `ruleset` label, `detectedBy`).
    pub name: String,
    /// `spec.component`; may be empty.
    pub component: String,
    /// Static `spec.labels`, copied onto every record (below the built-in labels).
    pub labels: BTreeMap<String, String>,
    /// `metadata.generation` of the ruleset these rules were compiled from: evaluations by a
    /// generation older than the one loaded (a watcher not stopped yet) are ignored.
    pub generation: Option<i64>,
    /// `spec.exclusive`: a subject is in at most one of the ruleset's operations at a time, so
    /// when one starts the others complete at once instead of after their grace.
    pub exclusive: bool,
}
