//! What the debounce table tells the index to do.

use std::sync::Arc;

use crate::operation::{InFlightOperation, LabelWarning};

/// One change to the set of visible records, to be applied in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Create or replace the record with this name (a watcher sees ADDED or MODIFIED).
    Upsert(Arc<InFlightOperation>),
    /// Delete this record (a watcher sees DELETED with its last state).
    Remove(Arc<InFlightOperation>),
}

impl Change {
    /// The record the change writes or removes.
    pub fn record(&self) -> &Arc<InFlightOperation> {
        match self {
            Change::Upsert(r) | Change::Remove(r) => r,
        }
    }
}

/// Result of observing one subject event.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Observed {
    /// Record changes, in the order the index must apply them.
    pub changes: Vec<Change>,
    /// Labels that could not be set on the records involved (invalid keys), for the caller to
    /// report; they repeat on every event until the ruleset is fixed.
    pub warnings: Vec<LabelWarning>,
}
