//! A lane's queue ([`Queue`]): work in one line per namespace, the lines taking turns, each in
//! the order the watcher saw it, one place per object (a change replaces the object's change
//! waiting), at most [`LANE_CAPACITY`]; and the queue as the watcher, the lane's task and the
//! look at its lag share it ([`Shared`]).

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
    /// An object's deletion: its uid, and its namespace.
    Delete(Arc<str>, Place),
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
    /// Its order among all the lane's work.
    seq: u64,
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

/// Where work waits its turn: the namespace of the object it concerns (`None`: a cluster-scoped
/// object).
pub(super) type Place = Option<Arc<str>>;

/// The namespace of `object`, as a [`Place`].
fn place_of(object: &serde_json::Value) -> Place {
    object
        .pointer("/metadata/namespace")
        .and_then(|n| n.as_str())
        .map(Arc::from)
}

impl Work {
    /// The line it waits in (`None`: it waits for every line's work queued before it, and all
    /// work queued after waits for it).
    fn line(&self) -> Option<Place> {
        match self {
            Work::Apply(object) | Work::Listed(object, _) => Some(place_of(object)),
            Work::Delete(_, place) => Some(place.clone()),
            Work::Resync(Some(namespace), _) => Some(Some(namespace.as_str().into())),
            Work::Resync(None, _) | Work::Flush(_) => None,
        }
    }
}

/// One place's work, in the order queued.
#[derive(Default)]
struct Line {
    items: VecDeque<Queued>,
    /// The position of `items[0]` in the line: every item queued in it has one.
    head: u64,
}

impl Line {
    /// Drops superseded items from the front, so that the front is the oldest work to do.
    fn trim(&mut self) {
        while self.items.front().is_some_and(|q| q.work.is_none()) {
            self.items.pop_front();
            self.head += 1;
        }
    }
}

/// What the lane is evaluating.
pub(super) struct Evaluating {
    /// Its place; `None` for work that waits for every line (see [`Work::line`]).
    pub(super) place: Option<Place>,
    /// When the oldest event it stands for was queued.
    pub(super) since: Instant,
    /// The object, for an object's change.
    object: Option<Arc<serde_json::Value>>,
}

/// A lane's queue: work in one line per namespace, the lines taking turns, an object's changes
/// in one place.
///
/// **Fair between namespaces.** Each namespace's work waits in a line of its own, and the lines
/// take turns, one piece of work each (as API Priority and Fairness shares kube-apiserver
/// between flows): work of a namespace waits behind at most one evaluation of every other
/// namespace with work queued, never behind all of it. One tenant's objects that are slow to
/// evaluate, changed in a loop, make her own line late, not everyone's: her lag is hers
/// ([`Queue::lags`]). Order is kept where it matters: within a namespace, as queued; and the
/// end of a list of the whole target, or a flush, waits for all work queued before it in every
/// line, and all work queued after it waits for it.
#[derive(Default)]
pub(super) struct Queue {
    lines: HashMap<Place, Line>,
    /// The places with a line, each once, in the order of their turns.
    turns: VecDeque<Place>,
    /// Work that waits for every line (see [`Work::line`]), in order.
    barriers: VecDeque<Queued>,
    /// The sequence number of the next work queued.
    next: u64,
    /// The place and position of each object's change waiting, by uid, for its next change to
    /// replace.
    pub(super) waiting: HashMap<Arc<str>, (Place, u64)>,
    /// Items not superseded.
    pub(super) live: usize,
    /// What is being evaluated.
    pub(super) evaluating: Option<Evaluating>,
    pub(super) closed: bool,
}

impl Queue {
    pub(super) fn has_room(&self) -> bool {
        self.live < LANE_CAPACITY
    }

    /// Whether nothing is queued.
    pub(super) fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Whether work is queued or being evaluated.
    pub(super) fn unevaluated(&self) -> bool {
        self.live > 0 || self.evaluating.is_some()
    }

    /// How long the oldest event not yet evaluated of each place has waited, at `now`: that
    /// of the work being evaluated there, else of the first in its line (a line is in the
    /// order of its oldest events). Places with nothing waiting are left out.
    pub(super) fn lags(&self, now: Instant) -> HashMap<Place, Duration> {
        let mut lags: HashMap<Place, Duration> = HashMap::new();
        let mut note = |place: &Place, since: Instant| {
            let lag = now.saturating_duration_since(since);
            let at = lags.entry(place.clone()).or_default();
            *at = (*at).max(lag);
        };
        for (place, line) in &self.lines {
            if let Some(front) = line.items.front() {
                note(place, front.since);
            }
        }
        if let Some(Evaluating {
            place: Some(place),
            since,
            ..
        }) = &self.evaluating
        {
            note(place, *since);
        }
        lags
    }

    /// The objects whose changes wait in the line of `place`, and the one being evaluated
    /// there: what is not seen yet of that place.
    pub(super) fn unseen(&self, place: &Place) -> Vec<Arc<serde_json::Value>> {
        let queued = self.lines.get(place).into_iter().flat_map(|line| {
            line.items.iter().filter_map(|q| match &q.work {
                Some(Work::Apply(object) | Work::Listed(object, _)) => Some(object.clone()),
                _ => None,
            })
        });
        let evaluating = self
            .evaluating
            .as_ref()
            .filter(|e| e.place.as_ref() == Some(place))
            .and_then(|e| e.object.clone());
        queued.chain(evaluating).collect()
    }

    /// Queues `work` at the back of its line (or of the barriers); the caller checked there is
    /// room. Returns its place and position in its line (`None` for a barrier).
    pub(super) fn push(&mut self, work: Work, since: Instant) -> Option<(Place, u64)> {
        let seq = self.next;
        self.next += 1;
        self.live += 1;
        let line = work.line();
        let queued = Queued {
            seq,
            work: Some(work),
            since,
        };
        let Some(place) = line else {
            self.barriers.push_back(queued);
            return None;
        };
        let line = self.lines.entry(place.clone()).or_insert_with(|| {
            self.turns.push_back(place.clone());
            Line::default()
        });
        let position = line.head + line.items.len() as u64;
        line.items.push_back(queued);
        Some((place, position))
    }

    /// The queued item at `position` of the line of `place`, if still there.
    fn item(&mut self, (place, position): &(Place, u64)) -> Option<&mut Queued> {
        let line = self.lines.get_mut(place)?;
        let index = position.checked_sub(line.head)?;
        line.items.get_mut(usize::try_from(index).ok()?)
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
        if let Some(at) = uid.and_then(|u| self.waiting.get(u)).cloned()
            && let Some(Queued {
                work: Some(work @ Work::Apply(_)),
                ..
            }) = self.item(&at)
        {
            *work = Work::Apply(object.clone());
            return Ok(Sent::Replaced);
        }
        if !self.has_room() {
            return Err(Refused::Full);
        }
        let at = self.push(Work::Apply(object.clone()), now);
        if let (Some(uid), Some(at)) = (uid, at) {
            self.waiting.insert(uid.into(), at);
        }
        Ok(Sent::Queued)
    }

    /// The change of object `uid` waiting, if any, is superseded (by its deletion, or by a
    /// newer state of it from a list): it is not evaluated.
    pub(super) fn supersede(&mut self, uid: &str) {
        let Some(at) = self.waiting.remove(uid) else {
            return;
        };
        if let Some(q) = self.item(&at)
            && q.work.take().is_some()
        {
            self.live -= 1;
        }
        if let Some(line) = self.lines.get_mut(&at.0) {
            line.trim();
        }
    }

    /// Object `uid`, in `place`, was deleted: its change waiting is superseded, and the
    /// deletion queued.
    pub(super) fn delete(
        &mut self,
        uid: &Arc<str>,
        place: Place,
        now: Instant,
    ) -> Result<(), Refused> {
        if self.closed {
            return Err(Refused::Closed);
        }
        self.supersede(uid);
        if !self.has_room() {
            return Err(Refused::Full);
        }
        self.push(Work::Delete(uid.clone(), place), now);
        Ok(())
    }

    /// A list of `namespace` (`None`: of the whole target) ended: changes queued after it do
    /// not join those before it.
    pub(super) fn list_ended(&mut self, namespace: Option<&str>) {
        match namespace {
            None => self.waiting.clear(),
            Some(ns) => self
                .waiting
                .retain(|_, (place, _)| place.as_deref() != Some(ns)),
        }
    }

    /// The next work to evaluate: the next line's turn, among those whose first work was
    /// queued before the first barrier; else that barrier. From then until the next, it counts
    /// as being evaluated.
    pub(super) fn pop(&mut self) -> Option<Work> {
        self.evaluating = None;
        let barrier = self.barriers.front().map(|b| b.seq);
        for _ in 0..self.turns.len() {
            let place = self.turns.pop_front()?;
            let Some(line) = self.lines.get_mut(&place) else {
                continue;
            };
            line.trim();
            let Some(front) = line.items.front() else {
                self.lines.remove(&place);
                continue;
            };
            if barrier.is_some_and(|b| front.seq > b) {
                self.turns.push_back(place);
                continue;
            }
            let position = line.head;
            let q = line.items.pop_front()?;
            line.head += 1;
            line.trim();
            if line.items.is_empty() {
                self.lines.remove(&place);
            } else {
                self.turns.push_back(place.clone());
            }
            // Live: the line's front after a trim.
            let work = q.work?;
            self.live -= 1;
            let object = match &work {
                Work::Apply(object) => {
                    if let Some(uid) = uid(object)
                        && self.waiting.get(uid) == Some(&(place.clone(), position))
                    {
                        self.waiting.remove(uid);
                    }
                    Some(object.clone())
                }
                Work::Listed(object, _) => Some(object.clone()),
                _ => None,
            };
            self.evaluating = Some(Evaluating {
                place: Some(place),
                since: q.since,
                object,
            });
            return Some(work);
        }
        let q = self.barriers.pop_front()?;
        self.live -= 1;
        self.evaluating = Some(Evaluating {
            place: None,
            since: q.since,
            object: None,
        });
        q.work
    }

    /// The lane ended: what it holds is dropped (a list waiting for it is told so).
    pub(super) fn close(&mut self) {
        self.closed = true;
        self.lines.clear();
        self.turns.clear();
        self.barriers.clear();
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

    pub(super) fn close(&self) {
        self.queue.lock().close();
        self.work.notify_one();
        self.room.notify_waiters();
    }
}
