//! The read side of the index: what the API, the gates and the metrics hold.

use std::sync::Arc;

use tokio::sync::broadcast;

use super::active::{ActiveKey, RuleKey};
use super::error::WatchError;
use super::event::Event;
use super::gates::{GateMembers, GateScope};
use super::snapshot::Snapshot;
use super::store::{Index, Replay};
use super::stored::Stored;

/// A read-only handle on the [`Index`]: what the API serves from. Readers can list, get and
/// watch, never change anything (see `writers.rs` for who writes).
#[derive(Clone)]
pub struct IndexReader(Arc<Index>);

impl IndexReader {
    /// A reader of `index`.
    pub(super) fn of(index: Arc<Index>) -> IndexReader {
        IndexReader(index)
    }

    /// How many records the index holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// See [`Index::epoch`].
    pub(crate) fn epoch(&self) -> u64 {
        self.0.epoch()
    }

    /// See [`Index::current_rv`].
    pub fn current_rv(&self) -> u64 {
        self.0.current_rv()
    }

    /// See [`Index::active_counts`].
    pub(crate) fn active_counts(&self) -> Vec<(ActiveKey, u64)> {
        self.0.active_counts()
    }

    /// See [`Index::oldest_active`].
    pub(crate) fn oldest_active(&self) -> Vec<(RuleKey, jiff::Timestamp)> {
        self.0.oldest_active()
    }

    /// See [`Index::gate`].
    pub(crate) fn gate(
        &self,
        scope: &GateScope,
        cordoned: impl Fn(&str) -> Option<jiff::Timestamp>,
    ) -> (u64, GateMembers) {
        self.0.gate(scope, cordoned)
    }

    /// See [`Index::gates_in_flight`].
    pub(crate) fn gates_in_flight(
        &self,
        listed: usize,
        cordoned: impl Fn(&str) -> Option<jiff::Timestamp>,
    ) -> (u64, Vec<GateMembers>) {
        self.0.gates_in_flight(listed, cordoned)
    }

    /// See [`Index::snapshot`].
    pub fn snapshot(&self) -> Snapshot {
        self.0.snapshot()
    }

    /// See [`Index::snapshot_namespace`].
    pub(crate) fn snapshot_namespace(&self, namespace: &str) -> Snapshot {
        self.0.snapshot_namespace(namespace)
    }

    /// See [`Index::get`].
    pub(crate) fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<Stored>> {
        self.0.get(namespace, name)
    }

    /// See [`Index::watch_from`].
    pub fn watch_from(&self, rv: u64) -> Result<(Replay, broadcast::Receiver<Event>), WatchError> {
        self.0.watch_from(rv)
    }

    /// See [`Index::replay`].
    pub(crate) fn replay(&self, replay: &mut Replay, max: usize) -> Result<Vec<Event>, WatchError> {
        self.0.replay(replay, max)
    }

    /// See [`Index::subscribe`].
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.0.subscribe()
    }

    /// See [`Index::subscribe_with_snapshot`].
    pub(crate) fn subscribe_with_snapshot(&self) -> (Snapshot, broadcast::Receiver<Event>) {
        self.0.subscribe_with_snapshot()
    }
}
