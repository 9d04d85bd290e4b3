//! The index's writers, each a handle that may do one thing, given to the one part of the server
//! it belongs to ([`Index::into_handles`]): no part holds the index itself, so what can change it
//! is what these types allow. As kube-runtime's reflector `Writer` is not `Clone`, the one writer
//! of operations is not either: a second writer would break the order of the events the
//! debounce table makes.
//!
//! | handle | held by | may |
//! |---|---|---|
//! | [`OperationsWriter`] | the detector | apply changes of operations (and read back) |
//! | [`FeedsClock`] | detection's health reporter | tell that whether detection is current changed |
//! | [`ScopesClock`] | the inventory's reporter | tell that which gates exist (or an override) changed |
//! | [`Epochs`] | leadership | begin a new epoch when this replica starts to serve |
//! | [`IndexReader`] | the API, metrics, persistence, … (cloned freely) | list, get, watch |

use std::sync::Arc;

use super::reader::IndexReader;
use super::snapshot::Snapshot;
use super::store::Index;
use super::transitions::Transitions;
use crate::track::Change;

/// Every handle of one index, to hand out.
pub struct Handles {
    /// The detector's.
    pub writer: OperationsWriter,
    /// Detection's health reporter's.
    pub feeds: FeedsClock,
    /// The inventory's reporter's.
    pub scopes: ScopesClock,
    /// Leadership's.
    pub epochs: Epochs,
    /// For every reader.
    pub reader: IndexReader,
}

impl Index {
    /// This index's handles: the only ways to change it from now on.
    pub fn into_handles(self) -> Handles {
        let index = Arc::new(self);
        Handles {
            writer: OperationsWriter(index.clone()),
            feeds: FeedsClock(index.clone()),
            scopes: ScopesClock(index.clone()),
            epochs: Epochs(index.clone()),
            reader: IndexReader::of(index),
        }
    }
}

/// The one writer of operations (see the module's documentation). Not `Clone`.
pub struct OperationsWriter(Arc<Index>);

impl OperationsWriter {
    /// See [`Index::apply`].
    pub fn apply(&self, changes: Vec<Change>) -> Transitions {
        self.0.apply(changes)
    }

    /// How many records the index holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the index holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every record, at the current RV.
    pub fn snapshot(&self) -> Snapshot {
        self.0.snapshot()
    }

    /// A reader of what this writes.
    pub fn reader(&self) -> IndexReader {
        IndexReader::of(self.0.clone())
    }
}

/// Tells the index that whether detection is current changed ([`Index::feeds_changed`]).
#[derive(Clone)]
pub struct FeedsClock(Arc<Index>);

impl FeedsClock {
    /// See [`Index::feeds_changed`].
    pub fn feeds_changed(&self, all_current: bool) -> u64 {
        self.0.feeds_changed(all_current)
    }

    /// See [`Index::feeds_change_due`].
    pub async fn change_due(&self) {
        self.0.feeds_change_due().await
    }
}

/// Tells the index that which gates exist may have changed ([`Index::scopes_changed`]).
#[derive(Clone)]
pub struct ScopesClock(Arc<Index>);

impl ScopesClock {
    /// See [`Index::scopes_changed`].
    pub fn scopes_changed(&self) -> u64 {
        self.0.scopes_changed()
    }

    /// See [`Index::feeds_change_due`].
    pub async fn change_due(&self) {
        self.0.feeds_change_due().await
    }
}

/// Begins the index's epochs, as this replica starts to serve ([`Index::begin_epoch`]).
pub struct Epochs(Arc<Index>);

impl Epochs {
    /// See [`Index::begin_epoch`].
    pub fn begin(&self, at_least: u64) -> u64 {
        self.0.begin_epoch(at_least)
    }
}
