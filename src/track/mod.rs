//! The debounce table: when an operation occurrence starts, stays the same occurrence, and ends.
//!
//! The evaluator says, per subject event, which rules match. This module turns that stream of
//! snapshots into occurrences with a stable identity:
//! - an operation is active while any of its rules matches;
//! - when it stops matching it stays `Active` for a grace period (the debounce), and matching
//!   again within it continues the same occurrence (same uid, same creation time);
//! - after the grace it becomes `Completed` with the outcome its outcome expression reported;
//! - a rule evaluation error is "unknown" and changes nothing.
//!
//! It is pure and synchronous: time is always passed in, and the result of every call is the
//! list of record changes the index must apply, in order.
//!
//! It also keeps the labels related objects give subjects (`related_values`, from a
//! ruleset's `spec.related`), and labels a subject's active operations again when they change.

mod change;
mod related_values;
mod settings;
mod signal;
mod tracker;

pub use change::Change;
pub(crate) use related_values::RelatedObject;
pub(crate) use settings::Settings;
pub(crate) use tracker::Tracker;
