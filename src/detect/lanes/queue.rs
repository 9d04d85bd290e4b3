//! A lane's queue ([`Queue`]): work in the order the watcher saw it, one place per object (a
//! change replaces the object's change waiting), at most [`LANE_CAPACITY`]; and the queue as the
//! watcher, the lane's task and the look at its lag share it ([`Shared`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{Notify, OwnedSemaphorePermit, oneshot};
use tokio::time::Instant;

/// Work waiting in one lane, at most: distinct objects (an object's changes share one place),
/// deletions, and the ends of lists.
pub(super) const LANE_CAPACITY: usize = 4096;

/// One unit of work for a ruleset, in the order the watcher saw it.
pub(super) enum Work {
    /// An object's latest state: a later change of it, while this waits, replaces it here.
    Apply(Arc<serde_json::Value>),
    /// An object of a list, holding its place among the [`super::LIST_AHEAD`] until evaluated.
    Listed(Arc<serde_json::Value>, OwnedSemaphorePermit),
    Delete(Arc<str>),
    /// A namespace's (or, for `None`, the whole target's) relist saw these subjects.
    Resync(Option<String>, Arc<HashSet<String>>),
    /// Everything sent before has been evaluated (see [`super::Lanes::evaluated`]).
    Flush(oneshot::Sender<()>),
}

/// The object's uid, by which its changes share a place in a lane.
pub(super) fn uid(object: &serde_json::Value) -> Option<&str> {
    object.pointer("/metadata/uid").and_then(|u| u.as_str())
}

/// Work in a lane's queue.
pub(super) struct Queued {
    /// `None`: superseded (an object's change, by its deletion or by a list), not to be done.
    work: Option<Work>,
    /// When the oldest event it stands for was queued.
    since: Instant,
}

/// Why work was not queued.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refused {
    /// The lane holds [`LANE_CAPACITY`].
    Full,
    /// The lane ended with its watcher.
    Closed,
}

/// What became of an object's change sent to a lane.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Sent {
    /// Queued at the back.
    Queued,
    /// It replaced the object's change already waiting.
    Replaced,
}

/// A lane's queue: work in order, an object's changes in one place.
#[derive(Default)]
pub(super) struct Queue {
    pub(super) items: VecDeque<Queued>,
    /// The position of `items[0]`: every item queued since the lane started has one.
    head: u64,
    /// The position of each object's change waiting, by uid, for its next change to replace.
    pub(super) waiting: HashMap<Arc<str>, u64>,
    /// Items not superseded.
    pub(super) live: usize,
    /// When the oldest event of the work being evaluated was queued.
    pub(super) evaluating: Option<Instant>,
    pub(super) closed: bool,
}

impl Queue {
    pub(super) fn has_room(&self) -> bool {
        self.live < LANE_CAPACITY
    }

    /// Whether work is queued or being evaluated.
    pub(super) fn unevaluated(&self) -> bool {
        self.live > 0 || self.evaluating.is_some()
    }

    /// When the oldest event not yet evaluated was queued: that of the work being evaluated,
    /// else of the first queued (items are queued in the order of their oldest event).
    pub(super) fn oldest(&self) -> Option<Instant> {
        self.evaluating
            .or_else(|| self.items.front().map(|q| q.since))
    }

    /// Queues `work` at the back; the caller checked there is room. Returns its position.
    pub(super) fn push(&mut self, work: Work, since: Instant) -> u64 {
        let position = self.head + self.items.len() as u64;
        self.items.push_back(Queued {
            work: Some(work),
            since,
        });
        self.live += 1;
        position
    }

    /// Drops superseded items from the front, so that the front is the oldest work to do.
    pub(super) fn trim(&mut self) {
        while self.items.front().is_some_and(|q| q.work.is_none()) {
            self.items.pop_front();
            self.head += 1;
        }
    }

    /// Object `object` (`uid`) changed: the change replaces the object's change waiting, if
    /// any; else it is queued, if there is room.
    pub(super) fn apply(
        &mut self,
        object: &Arc<serde_json::Value>,
        uid: Option<&str>,
        now: Instant,
    ) -> Result<Sent, Refused> {
        if self.closed {
            return Err(Refused::Closed);
        }
        if let Some(&position) = uid.and_then(|u| self.waiting.get(u))
            && let Some(Queued {
                work: Some(work @ Work::Apply(_)),
                ..
            }) = self.items.get_mut((position - self.head) as usize)
        {
            *work = Work::Apply(object.clone());
            return Ok(Sent::Replaced);
        }
        if !self.has_room() {
            return Err(Refused::Full);
        }
        let position = self.push(Work::Apply(object.clone()), now);
        if let Some(uid) = uid {
            self.waiting.insert(uid.into(), position);
        }
        Ok(Sent::Queued)
    }

    /// The change of object `uid` waiting, if any, is superseded (by its deletion, or by a
    /// newer state of it from a list): it is not evaluated.
    pub(super) fn supersede(&mut self, uid: &str) {
        let Some(position) = self.waiting.remove(uid) else {
            return;
        };
        if let Some(q) = self.items.get_mut((position - self.head) as usize)
            && q.work.take().is_some()
        {
            self.live -= 1;
        }
        self.trim();
    }

    /// Object `uid` was deleted: its change waiting is superseded, and the deletion queued.
    pub(super) fn delete(&mut self, uid: &Arc<str>, now: Instant) -> Result<(), Refused> {
        if self.closed {
            return Err(Refused::Closed);
        }
        self.supersede(uid);
        if !self.has_room() {
            return Err(Refused::Full);
        }
        self.push(Work::Delete(uid.clone()), now);
        Ok(())
    }

    /// The next work to evaluate; from then until the next, it counts as being evaluated.
    pub(super) fn pop(&mut self) -> Option<Work> {
        self.evaluating = None;
        while let Some(q) = self.items.pop_front() {
            let position = self.head;
            self.head += 1;
            let Some(work) = q.work else { continue };
            self.live -= 1;
            if let Work::Apply(object) = &work
                && let Some(uid) = uid(object)
                && self.waiting.get(uid) == Some(&position)
            {
                self.waiting.remove(uid);
            }
            self.evaluating = Some(q.since);
            self.trim();
            return Some(work);
        }
        None
    }

    /// The lane ended: what it holds is dropped (a list waiting for it is told so).
    pub(super) fn close(&mut self) {
        self.closed = true;
        self.items.clear();
        self.waiting.clear();
        self.live = 0;
    }
}

/// A lane's queue, shared by the watcher that fills it, the task that empties it, and the look
/// at its lag.
#[derive(Default)]
pub(super) struct Shared {
    pub(super) queue: Mutex<Queue>,
    /// Work was queued, or the lane closed.
    pub(super) work: Notify,
    /// Room was made, or the lane closed.
    pub(super) room: Notify,
}

impl Shared {
    /// Queues `work` once the lane has room, after `before` (under the same lock); false when
    /// the lane ended meanwhile.
    pub(super) async fn send_when_room(&self, work: Work, before: impl FnOnce(&mut Queue)) -> bool {
        loop {
            let room = self.room.notified();
            tokio::pin!(room);
            // Registered before the queue is looked at, so that no room made after is missed.
            room.as_mut().enable();
            {
                let mut queue = self.queue.lock();
                if queue.closed {
                    return false;
                }
                if queue.has_room() {
                    before(&mut queue);
                    queue.push(work, Instant::now());
                    drop(queue);
                    self.work.notify_one();
                    return true;
                }
            }
            room.await;
        }
    }

    /// How long the oldest event not yet evaluated has waited, at `now`.
    pub(super) fn lag(&self, now: Instant) -> Duration {
        self.queue
            .lock()
            .oldest()
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since))
    }

    pub(super) fn close(&self) {
        self.queue.lock().close();
        self.work.notify_one();
        self.room.notify_waiters();
    }
}
