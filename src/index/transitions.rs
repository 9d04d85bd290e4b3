//! What an [`Index::apply`](super::Index::apply) changed in the lifecycle of operations: the
//! occurrences it started serving and the ones it saw complete, for the caller to count and log.

use std::sync::Arc;

use crate::operation::{InFlightOperation, Phase};

/// Lifecycle transitions of one `apply`, in order. Empty (and not allocated) for the common
/// change that only updates an active record.
#[derive(Debug, Default)]
pub struct Transitions {
    /// Active records whose occurrence was not served before (new, or read back at start).
    pub started: Vec<Arc<InFlightOperation>>,
    /// Records served as `Active` before this change and `Completed` by it.
    pub completed: Vec<Arc<InFlightOperation>>,
}

impl Transitions {
    /// Notes the record at one key going from `before` to `after`.
    pub(super) fn note(
        &mut self,
        before: Option<&InFlightOperation>,
        after: &Arc<InFlightOperation>,
    ) {
        let same = before.filter(|b| b.uid == after.uid);
        match (same.map(|b| b.phase), after.phase) {
            (None, Phase::Active) => self.started.push(after.clone()),
            (Some(Phase::Active), Phase::Completed) => self.completed.push(after.clone()),
            _ => {}
        }
    }

    /// Nothing started or completed.
    pub fn is_empty(&self) -> bool {
        self.started.is_empty() && self.completed.is_empty()
    }
}
