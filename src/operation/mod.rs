//! The `InFlightOperation` record and its wire form.
//!
//! A record is built once per visible state and then shared immutably (`Arc`): the debounce
//! table produces new records, the index stores them and serialises each one at most once per
//! resourceVersion. Everything here is pure: names, uids and labels are functions of their
//! inputs, so every replica (and every restart) derives the same identity for an operation.

mod hash;
mod label_set;
mod labels;
#[cfg(test)]
mod model_tests;
mod name;
mod phase;
mod progress;
mod record;
mod ruleset;
mod subject;
#[cfg(test)]
mod testing;
mod time;
mod wire;

pub use label_set::{LabelKey, Labels, NodeKey};
#[cfg(test)]
pub(crate) use labels::LabelSource;
#[cfg(test)]
pub(crate) use labels::warned_keys;
pub(crate) use labels::{LabelWarning, build_labels, gate_node};
pub use name::object_name;
#[cfg(test)]
pub(crate) use name::occurrence_uid;
pub use phase::{Outcome, Phase};
pub(crate) use progress::{EstimateBasis, Expectation, OVERDUE_BY_HISTORY, Stall};
pub use record::InFlightOperation;
pub(crate) use record::{Ending, SELECTABLE_FIELDS};
pub use ruleset::RuleSetInfo;
pub use subject::Subject;
#[cfg(test)]
pub(crate) use testing::{assert_says, test_active, test_record, test_ruleset, test_subject};
#[cfg(test)]
pub(crate) use time::format_time;
