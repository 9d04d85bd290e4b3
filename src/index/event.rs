//! Watch events as produced by the index (before per-watcher filtering).

use std::sync::Arc;

use super::stored::Stored;

/// What a change did to the record it carries, as a watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "UPPERCASE")]
pub enum EventKind {
    /// The record is new.
    Added,
    /// The record replaced an earlier state of itself.
    Modified,
    /// The record is gone.
    Deleted,
    /// No record changed: whether the targets feeding the index are current did (a watch
    /// failed or recovered, the initial sync ended), or which maintenance gates exist (a node
    /// or namespace came or went). Takes a resourceVersion so that the verdicts that depend on
    /// it (maintenance gates) change at one, like everything else.
    // Only the resourceVersion moves for the records: what a bookmark says.
    #[strum(serialize = "BOOKMARK")]
    FeedsChanged,
}

impl EventKind {
    /// The watch event `type`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One change, at resourceVersion `rv`.
#[derive(Debug, Clone)]
pub struct Event {
    /// The resourceVersion this change produced.
    pub rv: u64,
    /// What the change did.
    pub kind: EventKind,
    /// The record at `rv`. For `Deleted`, the last state re-stamped with the deletion RV, as
    /// Kubernetes does, so a client resuming from it doesn't replay the deletion. `None` for
    /// `FeedsChanged` only.
    pub object: Option<Arc<Stored>>,
    /// For `Modified`: the state before, so a watcher with a label or field selector can turn
    /// the event into ADDED (now matches, didn't before) or DELETED (matched, no longer does).
    /// `None` for `Added` and `Deleted`.
    pub previous: Option<Arc<Stored>>,
}
