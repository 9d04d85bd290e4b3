//! The set of matching operations kept from watch events, for `list -w` and `wait`: one state
//! per watched resource, complete once each has listed, kept consistent across relists.

use std::collections::BTreeMap;

use super::client::Event;
use super::filter::Filters;
use super::op::{Op, sort};

type Key = (String, String);

#[derive(Debug, Default)]
struct Stream {
    current: BTreeMap<Key, Op>,
    /// Objects of a (re)list in progress.
    relist: Option<BTreeMap<Key, Op>>,
    synced: bool,
}

/// What an event changed.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Added or modified, and still matching.
    Upsert(Op),
    /// Deleted, or no longer matching the filters (the object as last seen).
    Gone(Op),
}

/// The matching operations of one or more watches (one per resource in scope), kept from their
/// events. A watch's first list is the starting set and reports no change; a relist replaces the
/// watch's set as a whole and reports the difference, so an object deleted while the watch was
/// down is reported gone.
#[derive(Debug)]
pub struct WatchedOps {
    streams: Vec<Stream>,
    filters: Filters,
}

impl WatchedOps {
    /// A tracker for `streams` watches, keeping what matches `filters`.
    pub fn new(streams: usize, filters: Filters) -> WatchedOps {
        WatchedOps {
            streams: (0..streams).map(|_| Stream::default()).collect(),
            filters,
        }
    }

    /// Whether every stream has listed at least once.
    pub fn synced(&self) -> bool {
        self.streams.iter().all(|s| s.synced)
    }

    /// The matching operations, sorted for printing.
    pub fn ops(&self) -> Vec<Op> {
        let mut ops: Vec<Op> = self
            .streams
            .iter()
            .flat_map(|s| s.current.values().cloned())
            .collect();
        sort(&mut ops);
        ops
    }

    /// How many operations match now.
    pub fn len(&self) -> usize {
        self.streams.iter().map(|s| s.current.len()).sum()
    }

    /// Whether nothing matches now: what `wait` waits for.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Applies one event of stream `i`; the changes to report once synced.
    pub fn apply(&mut self, i: usize, event: Event) -> Vec<Change> {
        let Some(stream) = self.streams.get_mut(i) else {
            return Vec::new();
        };
        match event {
            Event::Init => {
                stream.relist = Some(BTreeMap::new());
                Vec::new()
            }
            Event::InitApply(op) => {
                if self.filters.matches(&op) {
                    stream
                        .relist
                        .get_or_insert_with(BTreeMap::new)
                        .insert(op.key(), op);
                }
                Vec::new()
            }
            Event::InitDone => {
                let new = stream.relist.take().unwrap_or_default();
                let first = !stream.synced;
                stream.synced = true;
                let old = std::mem::replace(&mut stream.current, new);
                if first {
                    return Vec::new();
                }
                let mut changes: Vec<Change> = old
                    .iter()
                    .filter(|(k, _)| !stream.current.contains_key(*k))
                    .map(|(_, op)| Change::Gone(op.clone()))
                    .collect();
                changes.extend(
                    stream
                        .current
                        .iter()
                        .filter(|(k, op)| old.get(*k) != Some(op))
                        .map(|(_, op)| Change::Upsert(op.clone())),
                );
                changes
            }
            Event::Apply(op) => {
                if self.filters.matches(&op) {
                    stream.current.insert(op.key(), op.clone());
                    vec![Change::Upsert(op)]
                } else if stream.current.remove(&op.key()).is_some() {
                    vec![Change::Gone(op)]
                } else {
                    Vec::new()
                }
            }
            Event::Delete(op) => match stream.current.remove(&op.key()) {
                Some(_) => vec![Change::Gone(op)],
                None => Vec::new(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::tests::op;

    fn active() -> Filters {
        Filters {
            active_only: true,
            ..Default::default()
        }
    }

    #[test]
    fn synced_once_every_stream_listed() {
        let mut t = WatchedOps::new(2, active());
        let a = op(Some("ns"), "VirtualMachine", "vm1", "Migrating", "Active");
        assert!(t.apply(0, Event::Init).is_empty());
        assert!(t.apply(0, Event::InitApply(a.clone())).is_empty());
        assert!(t.apply(0, Event::InitDone).is_empty());
        assert!(!t.synced());
        t.apply(1, Event::Init);
        t.apply(1, Event::InitDone);
        assert!(t.synced());
        assert_eq!(t.ops(), vec![a]);
    }

    #[test]
    fn completion_and_deletion_remove_operations() {
        let mut t = WatchedOps::new(1, active());
        let a = op(Some("ns"), "VirtualMachine", "vm1", "Migrating", "Active");
        let b = op(Some("ns"), "VirtualMachine", "vm2", "Starting", "Active");
        t.apply(0, Event::Init);
        t.apply(0, Event::InitApply(a.clone()));
        t.apply(0, Event::InitDone);
        assert_eq!(
            t.apply(0, Event::Apply(b.clone())),
            vec![Change::Upsert(b.clone())]
        );
        assert_eq!(t.len(), 2);
        let mut done = a.clone();
        done.status.phase = "Completed".into();
        assert_eq!(
            t.apply(0, Event::Apply(done.clone())),
            vec![Change::Gone(done)]
        );
        assert_eq!(
            t.apply(0, Event::Delete(b.clone())),
            vec![Change::Gone(b.clone())]
        );
        assert!(t.is_empty());
        // What was already gone is not reported again (a completed operation's removal).
        assert!(t.apply(0, Event::Delete(b)).is_empty());
        let mut done_again = a;
        done_again.status.phase = "Completed".into();
        assert!(t.apply(0, Event::Apply(done_again)).is_empty());
        assert!(t.apply(7, Event::Init).is_empty());
    }

    #[test]
    fn a_relist_reports_what_changed_meanwhile() {
        let mut t = WatchedOps::new(1, active());
        let a = op(Some("ns"), "VirtualMachine", "vm1", "Migrating", "Active");
        let b = op(Some("ns"), "VirtualMachine", "vm2", "Starting", "Active");
        let c = op(Some("ns"), "VirtualMachine", "vm3", "Starting", "Active");
        t.apply(0, Event::Init);
        t.apply(0, Event::InitApply(a.clone()));
        t.apply(0, Event::InitApply(b.clone()));
        t.apply(0, Event::InitDone);
        let mut b2 = b.clone();
        b2.status.message = Some("later".into());
        t.apply(0, Event::Init);
        t.apply(0, Event::InitApply(b2.clone()));
        t.apply(0, Event::InitApply(c.clone()));
        let changes = t.apply(0, Event::InitDone);
        assert_eq!(
            changes,
            vec![
                Change::Gone(a),
                Change::Upsert(b2.clone()),
                Change::Upsert(c.clone())
            ]
        );
        assert_eq!(t.ops(), vec![b2, c]);
    }
}
