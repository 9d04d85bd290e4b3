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

use super::types::SAME_NAME;
use crate::operation::RuleSetInfo;
use std::fmt;

/// How a subject finds its related object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// The object of the related target with the subject's namespace and name.
    SameName,
}

impl Match {
    /// The `match` of a spec, if this server knows it.
    pub(super) fn parse(text: &str) -> Option<Match> {
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
