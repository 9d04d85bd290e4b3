//! The index: records by key, the RV counter, the event ring and the live fan-out.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tokio::sync::broadcast;

use super::active::{ActiveCounts, ActiveKey, RuleKey};
use super::error::WatchError;
use super::event::{Event, EventKind};
use super::gates::{GateCounts, GateEntry, GateMembers, GateScope, MAX_GATE_OPERATIONS};
use super::snapshot::Snapshot;
use super::stored::{ObjectKey, Stored, key_of};
use super::transitions::Transitions;
use crate::operation::InFlightOperation;
use crate::track::Change;

/// The least time between two `FeedsChanged` events ([`Index::feeds_change_due`]). Each one
/// is an event (and a resourceVersion) for every open gate watch: one object whose skip mark
/// flips every few hundred milliseconds (a tenant's costly object patched in a loop) multiplied
/// the gate watches' events threefold, while a gate that turns Unknown a second later tells its
/// readers nothing less. The first change after a quiet second goes out at once.
const FEEDS_MIN_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Where a watch's replay of the event history stands: the events after `after`, up to and
/// including `until` (the RV at which its live receiver took over). Read in chunks
/// ([`Index::replay`]), so that no watch ever copies the whole history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replay {
    after: u64,
    until: u64,
}

impl Replay {
    /// Nothing left to replay.
    pub(crate) fn is_done(&self) -> bool {
        self.after >= self.until
    }
}

/// The in-memory store. All methods take `&self`; it is used through its handles
/// ([`Index::into_handles`]), each of which may do one thing.
///
/// One lock guards records, counter and ring. Writers (`apply`) hold it while they broadcast,
/// and readers that subscribe hold it while they take their replay or snapshot, so a new
/// watcher's history and its live receiver meet exactly at one RV.
pub struct Index {
    state: RwLock<State>,
    tx: broadcast::Sender<Event>,
}

struct State {
    rv: u64,
    items: BTreeMap<ObjectKey, Held>,
    /// The most recent events, RVs `resumable_from + 1 ..= rv`, oldest first.
    /// Each with its weight ([`weight`]), reckoned once as it goes in.
    ring: VecDeque<(Event, usize)>,
    ring_capacity: usize,
    /// What the ring's events weigh together, and the most they may.
    ring_bytes: usize,
    ring_max_bytes: usize,
    /// Oldest RV a watch can resume from: every event after it is in the ring.
    resumable_from: u64,
    /// Active records by metric labels, changed with `items`.
    active: ActiveCounts,
    /// Active records by maintenance-gate scope, changed with `items`.
    gates: GateCounts,
    /// The RV of the latest [`Index::feeds_changed`].
    feeds_rv: u64,
    /// Whether every feed was current at the latest [`Index::feeds_changed`], and since when
    /// (`None`: since the start).
    feeds_current: bool,
    feeds_since: Option<jiff::Timestamp>,
    /// When the latest `FeedsChanged` was emitted, for [`Index::feeds_change_due`].
    feeds_at: Option<tokio::time::Instant>,
    /// The RV at which this replica last began to serve (see [`Index::begin_epoch`]).
    epoch: u64,
}

/// A record as the index holds it: as stored (and served), with what the maintenance gates
/// hold of it while it is in flight. The gates' entry is moved, not shared, from one state of a
/// record to the next, so an update that moves no gate never touches it.
struct Held {
    stored: Arc<Stored>,
    gate: Option<Arc<GateEntry>>,
}

impl Index {
    /// `base_rv`: the RV of the empty initial state (wall-clock microseconds at start).
    /// `ring_capacity`: events kept for resuming watches. `watch_buffer`: events a live watcher
    /// may fall behind before it lags (at least 1).
    pub fn new(base_rv: u64, ring_capacity: usize, watch_buffer: usize) -> Index {
        let (tx, _) = broadcast::channel(watch_buffer.max(1));
        Index {
            state: RwLock::new(State {
                rv: base_rv,
                items: BTreeMap::new(),
                ring: VecDeque::with_capacity(ring_capacity.min(1 << 16)),
                ring_capacity,
                ring_bytes: 0,
                ring_max_bytes: usize::MAX,
                resumable_from: base_rv,
                active: ActiveCounts::default(),
                gates: GateCounts::default(),
                feeds_rv: base_rv,
                feeds_current: false,
                feeds_since: None,
                feeds_at: None,
                epoch: base_rv,
            }),
            tx,
        }
    }

    /// Bounds the event history by size as well: at most `bytes` of records (and the JSON kept
    /// of them, as [`InFlightOperation::approx_bytes`] estimates). The oldest events go first,
    /// and watches resuming from before them are told to list again (410), as when the count
    /// bound is reached. Records that churn (operations starting and ending) would otherwise keep
    /// thousands of superseded states alive, each as large as a live one.
    pub fn with_history_bytes(mut self, bytes: usize) -> Index {
        self.state
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .ring_max_bytes = bytes;
        self
    }

    /// Applies changes in order; each resulting event takes the next RV.
    ///
    /// `Upsert` of an unknown key is ADDED, of a known key MODIFIED. If the stored record at
    /// that key has a different uid (another occurrence), it is DELETED first and the new one
    /// ADDED, so clients never see an object's uid change. `Remove` is DELETED with a new RV;
    /// it is ignored when the key is absent or holds a different occurrence (uid).
    ///
    /// Returns the operations this started serving and those it completed.
    pub(super) fn apply(&self, changes: Vec<Change>) -> Transitions {
        let mut transitions = Transitions::default();
        if changes.is_empty() {
            return transitions;
        }
        let mut st = self.write();
        for change in changes {
            match change {
                Change::Upsert(op) => {
                    let key = key_of(&op);
                    let (mut previous, held_gate) = match st.items.get_mut(&key) {
                        Some(held) => (Some(held.stored.clone()), held.gate.take()),
                        None => (None, None),
                    };
                    transitions.note(previous.as_ref().map(|p| &*p.op), &op);
                    st.active
                        .change(previous.as_ref().map(|p| &*p.op), Some(&op));
                    let before = previous.clone();
                    if let Some(prev) = previous.take_if(|p| p.op.uid != op.uid) {
                        st.items.remove(&key);
                        self.delete(&mut st, &prev.op);
                    }
                    let rv = st.rv + 1;
                    let gate = st.gates.change(
                        before.as_deref().map(|b| &*b.op),
                        held_gate,
                        Some(&op),
                        rv,
                    );
                    let object = Arc::new(Stored::new(rv, op));
                    st.items.insert(
                        key,
                        Held {
                            stored: object.clone(),
                            gate,
                        },
                    );
                    let kind = if previous.is_some() {
                        EventKind::Modified
                    } else {
                        EventKind::Added
                    };
                    self.emit(&mut st, kind, object, previous);
                }
                Change::Remove(op) => {
                    let key = key_of(&op);
                    if st
                        .items
                        .get(&key)
                        .is_some_and(|h| h.stored.op.uid == op.uid)
                        && let Some(prev) = st.items.remove(&key)
                    {
                        st.active.change(Some(&prev.stored.op), None);
                        let rv = st.rv + 1;
                        st.gates.change(Some(&prev.stored.op), prev.gate, None, rv);
                        self.delete(&mut st, &prev.stored.op);
                    }
                }
            }
        }
        transitions
    }

    /// Active records by the labels of `ifo_operations_active`, sorted; label sets without
    /// any are absent.
    pub(crate) fn active_counts(&self) -> Vec<(ActiveKey, u64)> {
        self.read().active.to_vec()
    }

    /// When the oldest active record of each rule started; rules without any are absent.
    pub(crate) fn oldest_active(&self) -> Vec<(RuleKey, jiff::Timestamp)> {
        self.read().active.oldest()
    }

    /// Whether the targets feeding the index are current changed (`all_current`: every one
    /// is now, and the initial sync is done): takes the next RV, so that what depends on it
    /// (maintenance gates) changes at one. Returns it.
    pub(super) fn feeds_changed(&self, all_current: bool) -> u64 {
        let mut st = self.write();
        self.emit_event(&mut st, EventKind::FeedsChanged, None, None);
        st.feeds_rv = st.rv;
        st.feeds_at = Some(tokio::time::Instant::now());
        if st.feeds_current != all_current {
            st.feeds_current = all_current;
            st.feeds_since = Some(jiff::Timestamp::now());
        }
        st.rv
    }

    /// Which gates exist may have changed (a node or namespace was created or deleted, or the
    /// server learnt or lost track of the cluster's names): takes the next RV as
    /// [`Index::feeds_changed`] does, so that the gates that appear, go or turn `Unknown` change
    /// at one, and leaves whether the feeds are current as it is. Returns it.
    pub(super) fn scopes_changed(&self) -> u64 {
        let mut st = self.write();
        self.emit_event(&mut st, EventKind::FeedsChanged, None, None);
        st.feeds_rv = st.rv;
        st.feeds_at = Some(tokio::time::Instant::now());
        st.rv
    }

    /// Resolves when a `FeedsChanged` ([`Index::feeds_changed`], [`Index::scopes_changed`]) may
    /// be emitted again: at once after a quiet [`FEEDS_MIN_INTERVAL`], else when it has passed
    /// since the latest. What their reporters wait for before they report what they gathered,
    /// so that whatever flaps, gate watches get at most about one such event a second.
    pub(super) async fn feeds_change_due(&self) {
        let latest = self.read().feeds_at;
        if let Some(latest) = latest {
            tokio::time::sleep_until(latest + FEEDS_MIN_INTERVAL).await;
        }
    }

    /// The operations in flight in `scope`, at the current RV (the gate's RV is that of the
    /// scope's latest change or of the latest [`Index::feeds_changed`], whichever is later).
    /// `cordoned`: since when a node is cordoned, for a cordoned one (see
    /// [`GateMembers::released`]).
    pub(crate) fn gate(
        &self,
        scope: &GateScope,
        cordoned: impl Fn(&str) -> Option<jiff::Timestamp>,
    ) -> (u64, GateMembers) {
        let st = self.read();
        let mut members = st
            .gates
            .members(scope, st.epoch, MAX_GATE_OPERATIONS, cordoned);
        Self::with_feeds(&st, &mut members);
        (st.rv, members)
    }

    /// Every scope with operations in flight, sorted, at the current RV (returned first), each
    /// with its `listed` oldest operations (a table needs a few, a list of objects all it shows).
    pub(crate) fn gates_in_flight(
        &self,
        listed: usize,
        cordoned: impl Fn(&str) -> Option<jiff::Timestamp>,
    ) -> (u64, Vec<GateMembers>) {
        let st = self.read();
        let mut all = st.gates.in_flight(listed, cordoned);
        for members in &mut all {
            Self::with_feeds(&st, members);
        }
        (st.rv, all)
    }

    fn with_feeds(st: &State, members: &mut GateMembers) {
        members.rv = members.rv.max(st.feeds_rv).max(st.epoch);
        members.feeds_since = st.feeds_since;
    }

    fn delete(&self, st: &mut State, last: &Arc<InFlightOperation>) {
        let object = Arc::new(Stored::new(st.rv + 1, last.clone()));
        self.emit(st, EventKind::Deleted, object, None);
    }

    fn emit(
        &self,
        st: &mut State,
        kind: EventKind,
        object: Arc<Stored>,
        previous: Option<Arc<Stored>>,
    ) {
        debug_assert_eq!(object.rv, st.rv + 1);
        self.emit_event(st, kind, Some(object), previous);
    }

    fn emit_event(
        &self,
        st: &mut State,
        kind: EventKind,
        object: Option<Arc<Stored>>,
        previous: Option<Arc<Stored>>,
    ) {
        st.rv += 1;
        let event = Event {
            rv: st.rv,
            kind,
            object,
            previous,
        };
        let weight = weight(&event);
        if st.ring_capacity == 0 || weight > st.ring_max_bytes {
            st.ring.clear();
            st.ring_bytes = 0;
            st.resumable_from = st.rv;
        } else {
            while st.ring.len() >= st.ring_capacity || st.ring_bytes + weight > st.ring_max_bytes {
                let Some((dropped, dropped_weight)) = st.ring.pop_front() else {
                    break;
                };
                st.ring_bytes -= dropped_weight;
                st.resumable_from = dropped.rv;
            }
            st.ring_bytes += weight;
            st.ring.push_back((event.clone(), weight));
        }
        // No receivers is fine: nobody is watching.
        let _ = self.tx.send(event);
    }

    /// Begins serving as the leader: the counter jumps to at least `at_least` (wall-clock
    /// microseconds) and the history starts again there.
    ///
    /// Replicas count resourceVersions in overlapping ranges, so an RV a client got from the
    /// previous leader could name a point in this replica's own history and replay the wrong
    /// events. After the jump, every RV handed out before it is "too old" (410: clients relist),
    /// and RVs stay increasing for clients across the failover. Returns the new RV.
    pub(super) fn begin_epoch(&self, at_least: u64) -> u64 {
        let mut st = self.write();
        st.rv = st.rv.max(at_least);
        st.ring.clear();
        st.ring_bytes = 0;
        st.resumable_from = st.rv;
        st.epoch = st.rv;
        st.rv
    }

    /// The RV of the latest [`Index::begin_epoch`] (the base RV before any): RVs older than it
    /// were not handed out by this replica as leader and must not be resolved.
    pub(crate) fn epoch(&self) -> u64 {
        self.read().epoch
    }

    /// The resourceVersion of the latest change (what a list at "now" reports).
    pub fn current_rv(&self) -> u64 {
        self.read().rv
    }

    /// How many records the index holds.
    pub(crate) fn len(&self) -> usize {
        self.read().items.len()
    }

    /// Every record at the current RV, sorted by (namespace, name).
    pub fn snapshot(&self) -> Snapshot {
        Self::snapshot_of(&self.read())
    }

    /// The records of one namespace at the current RV, sorted by name: what a list or watch of
    /// one namespace reads, without copying the rest of the index.
    pub(crate) fn snapshot_namespace(&self, namespace: &str) -> Snapshot {
        let st = self.read();
        let first: ObjectKey = (Some(namespace.to_owned()), String::new());
        Snapshot {
            rv: st.rv,
            items: st
                .items
                .range(first..)
                .take_while(|((ns, _), _)| ns.as_deref() == Some(namespace))
                .map(|(_, held)| held.stored.clone())
                .collect(),
        }
    }

    fn snapshot_of(st: &State) -> Snapshot {
        Snapshot {
            rv: st.rv,
            items: st.items.values().map(|h| h.stored.clone()).collect(),
        }
    }

    /// The record named `name` in `namespace` (`None` for cluster-scoped), at the current RV.
    pub(crate) fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<Stored>> {
        let key = (namespace.map(str::to_owned), name.to_owned());
        self.read().items.get(&key).map(|h| h.stored.clone())
    }

    /// A replay of the events after `rv` from the ring, plus a receiver for everything after
    /// them.
    ///
    /// `Expired` when events after `rv` have left the ring (or `rv` predates this process);
    /// `TooLarge` when `rv` is ahead of the current RV.
    pub fn watch_from(&self, rv: u64) -> Result<(Replay, broadcast::Receiver<Event>), WatchError> {
        let st = self.read();
        if rv > st.rv {
            return Err(WatchError::TooLarge {
                requested: rv,
                current: st.rv,
            });
        }
        if rv < st.resumable_from {
            return Err(WatchError::Expired {
                requested: rv,
                oldest: st.resumable_from,
            });
        }
        Ok((
            Replay {
                after: rv,
                until: st.rv,
            },
            self.tx.subscribe(),
        ))
    }

    /// The next events of `replay`, at most `max` of them; `Expired` when they have left the
    /// ring since the replay began (the watcher then lists again).
    pub(crate) fn replay(&self, replay: &mut Replay, max: usize) -> Result<Vec<Event>, WatchError> {
        let st = self.read();
        if replay.after < st.resumable_from {
            return Err(WatchError::Expired {
                requested: replay.after,
                oldest: st.resumable_from,
            });
        }
        // RVs are dense: the ring holds `resumable_from + 1 ..= rv`, so the event after
        // `replay.after` is at `replay.after - resumable_from`.
        let start = usize::try_from(replay.after - st.resumable_from).unwrap_or(usize::MAX);
        let left = usize::try_from(replay.until.saturating_sub(replay.after)).unwrap_or(usize::MAX);
        let end = start.saturating_add(left.min(max)).min(st.ring.len());
        let events: Vec<Event> = st
            .ring
            .range(start.min(end)..end)
            .map(|(event, _)| event.clone())
            .collect();
        replay.after += events.len() as u64;
        if events.is_empty() {
            // Nothing more can come from the ring: never loop on an empty chunk.
            replay.after = replay.until;
        }
        Ok(events)
    }

    /// The current records and a receiver for every event after them, atomically.
    pub(crate) fn subscribe_with_snapshot(&self) -> (Snapshot, broadcast::Receiver<Event>) {
        let st = self.read();
        (Self::snapshot_of(&st), self.tx.subscribe())
    }

    /// A receiver for every event from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Event> {
        let _st = self.read(); // no event is emitted while the receiver is made
        self.tx.subscribe()
    }

    // Nothing under the lock panics short of allocation failure; should it happen, serving the
    // state as it is beats failing every later request, so poisoning is ignored.
    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// What an event weighs in the history: its record's estimate, and that of the state before it
/// (of a `Modified`), which the event keeps alive after that state's own event has left the
/// history, often long after: an operation updated once a minute holds a minute-old record.
/// While both events are in the history the earlier state is counted twice, which errs on the
/// side of the bound.
fn weight(event: &Event) -> usize {
    [&event.object, &event.previous]
        .into_iter()
        .flatten()
        .map(|s| s.weight())
        .sum()
}

#[cfg(test)]
mod tests;
