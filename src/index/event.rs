//! Watch events as produced by the index (before per-watcher filtering).

use std::sync::Arc;

use super::stored::Stored;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Added,
    Modified,
    Deleted,
}

impl EventKind {
    /// The watch event `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Added => "ADDED",
            EventKind::Modified => "MODIFIED",
            EventKind::Deleted => "DELETED",
        }
    }
}

/// One change, at resourceVersion `rv`.
#[derive(Debug, Clone)]
pub struct Event {
    pub rv: u64,
    pub kind: EventKind,
    /// The record at `rv`. For `Deleted`, the last state re-stamped with the deletion RV, as
    /// Kubernetes does, so a client resuming from it doesn't replay the deletion.
    pub object: Arc<Stored>,
    /// For `Modified`: the state before, so a watcher with a label or field selector can turn
    /// the event into ADDED (now matches, didn't before) or DELETED (matched, no longer does).
    /// `None` for `Added` and `Deleted`.
    pub previous: Option<Arc<Stored>>,
}
