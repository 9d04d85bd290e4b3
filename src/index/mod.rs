//! The in-memory store served by the API: current records, the resourceVersion counter, a
//! ring of recent events for resumable watches, and a broadcast channel for live watchers.
//!
//! resourceVersions are one `u64` counter. Every applied change takes the next value, so RVs
//! are dense: the ring holds exactly the events after [`Index::watch_from`]'s oldest resumable
//! RV, and a watch resumes from any RV in that window without gaps or duplicates. The counter
//! starts at a caller-supplied base (wall-clock microseconds at start) so RVs keep rising across
//! restarts and failovers, and an RV from an earlier process is never mistaken for a current one
//! (it is older than the base, hence `Expired`).
//!
//! Slow watchers: live events are fanned out through a bounded `tokio::sync::broadcast`
//! channel. A receiver that falls more than `watch_buffer` events behind gets
//! `RecvError::Lagged` — it has lost events and can't recover them in order. The API layer must
//! end that watch with an in-stream `410 Expired` error so the client relists, rather than
//! buffering without bound or silently skipping events.
//!
//! This module knows nothing of HTTP: it hands out records, events and JSON values.

mod active;
mod error;
mod event;
mod gate_entry;
mod gate_scope;
mod gates;
mod reader;
mod scope_ends;
mod scope_members;
mod snapshot;
mod store;
mod stored;
mod transitions;
mod writers;

pub(crate) use error::WatchError;
pub(crate) use event::{Event, EventKind};
pub(crate) use gates::{
    GateEntry, GateMembers, GateNameError, GateScope, LatestEnd, MAX_GATE_OPERATIONS, ScopeEnds,
};
pub use reader::IndexReader;
pub(crate) use snapshot::Snapshot;
pub use store::Index;
pub(crate) use store::Replay;
pub use stored::{ObjectKey, Stored};
pub(crate) use transitions::Transitions;
pub use writers::{Epochs, FeedsClock, Handles, OperationsWriter, ScopesClock};

#[cfg(test)]
use std::sync::Arc;

/// A stored record for the tests of the layers above the index.
#[cfg(test)]
pub(crate) fn test_stored() -> Arc<Stored> {
    Arc::new(Stored::new(1, crate::operation::test_record("subject")))
}
