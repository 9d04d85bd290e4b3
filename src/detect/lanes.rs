//! One evaluation lane per ruleset of a watcher, off the async runtime.
//!
//! Evaluation is synchronous and, however well bounded, one ruleset's evaluation can take up to
//! its budget. Evaluated inline in the watcher task, it would hold back every other ruleset of the
//! same target (a heavy ruleset on one namespace delayed another namespace's detections by
//! seconds) and occupy one of the runtime's few worker threads. So the watcher only hands each
//! event to the lanes of the rulesets it concerns; each lane evaluates its events in order on the
//! blocking pool. An over-budget ruleset delays only itself: the others' lanes run on other
//! threads, and the OS shares the cores between them.
//!
//! **One object, one place in the queue.** A lane queues work per object, not per event: a
//! change of an object whose previous change is still waiting replaces that change where it
//! waits, and is evaluated once, in its latest state. An object changed a thousand times while
//! its ruleset is busy costs one evaluation, not a thousand, and the other objects queued behind
//! it are not held back by its events: one tenant patching her object in a loop held back every
//! other namespace's detections on the target by minutes. Order is kept: the deletion of an
//! object supersedes its change still waiting (never evaluated after it), and is queued in
//! order; an object of a list, newer than the change of it still waiting, supersedes it the
//! same way; and nothing queued after the end of a list joins what was queued before it.
//!
//! Each lane's queue is bounded ([`LANE_CAPACITY`] distinct objects and other work). The objects
//! of a list wait for room: a list is read no faster than its slowest lane evaluates it. A lane
//! that falls that far behind on watch events (a ruleset near its budget on a busy target with
//! that many objects changing, until it is suspended) drops the events that do not fit (never
//! the change of an object already queued: that one takes its place), counts them
//! (`ifo_evaluation_events_dropped_total`) and reports it on the ruleset, rather than holding
//! memory in proportion to the target's event rate. What a dropped event said must not stay
//! lost: the first drop marks the target not current for that ruleset (its answers carry a
//! `Warning`) and asks the watcher to list the target again, with fresh lanes. The other lanes'
//! unevaluated work is discarded with them, so their rulesets are marked the same way; so is a
//! lane whose evaluation panicked.
//!
//! **Lag.** A lane that drops nothing may still run late: its **lag** is how long the oldest event
//! it holds (queued, or being evaluated) has waited. A periodic look at every lane of the watcher,
//! outside the lanes (so it sees a lane busy in a long evaluation as well), sets
//! `ifo_evaluation_lag_seconds` and, while a lane's lag is over the bound (`EVALUATION_LAG_BOUND`,
//! 5 s), marks the target not current for its ruleset, naming the lag: answers carry a
//! `Warning` and the gates the ruleset reaches are Unknown, since what changed since is not seen
//! yet. Nothing was lost, so no list is needed: the mark goes once the lag is back under the
//! bound.
//!
//! A lane ends when its watcher does: the watcher's [`Lanes`] going away closes the lanes, and
//! work still queued is dropped (the restarted watcher lists everything again); its lag marks go
//! with it.

use super::detector::Detector;
use crate::ruleset::{CompiledRuleSet, Target};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Most work a lane evaluates in one trip to the blocking pool.
const BATCH: usize = 64;

/// Work waiting in one lane, at most: distinct objects (an object's changes share one place),
/// deletions, and the ends of lists.
const LANE_CAPACITY: usize = 4096;

/// Objects of a list a lane holds unevaluated, at most: a list is read only this far ahead of
/// its slowest lane, so that what is buffered of a large list (decoded objects, several KB
/// each) stays small while kube-apiserver streams it faster than it is evaluated.
const LIST_AHEAD: usize = 1024;

/// How often the lanes' lag is looked at: a quarter of the bound, within these.
const LAG_TICK_MIN: Duration = Duration::from_millis(50);
const LAG_TICK_MAX: Duration = Duration::from_secs(1);

/// One unit of work for a ruleset, in the order the watcher saw it.
enum Work {
    /// An object's latest state: a later change of it, while this waits, replaces it here.
    Apply(Arc<serde_json::Value>),
    /// An object of a list, holding its place among the [`LIST_AHEAD`] until evaluated.
    Listed(Arc<serde_json::Value>, OwnedSemaphorePermit),
    Delete(Arc<str>),
    /// A namespace's (or, for `None`, the whole target's) relist saw these subjects.
    Resync(Option<String>, Arc<HashSet<String>>),
    /// Everything sent before has been evaluated (see [`Lanes::evaluated`]).
    Flush(oneshot::Sender<()>),
}

/// The object's uid, by which its changes share a place in a lane.
fn uid(object: &serde_json::Value) -> Option<&str> {
    object.pointer("/metadata/uid").and_then(|u| u.as_str())
}

/// Work in a lane's queue.
struct Queued {
    /// `None`: superseded (an object's change, by its deletion or by a list), not to be done.
    work: Option<Work>,
    /// When the oldest event it stands for was queued.
    since: Instant,
}

/// Why work was not queued.
#[derive(Debug, PartialEq, Eq)]
enum Refused {
    /// The lane holds [`LANE_CAPACITY`].
    Full,
    /// The lane ended with its watcher.
    Closed,
}

/// What became of an object's change sent to a lane.
#[derive(Debug, PartialEq, Eq)]
enum Sent {
    /// Queued at the back.
    Queued,
    /// It replaced the object's change already waiting.
    Replaced,
}

/// A lane's queue: work in order, an object's changes in one place.
#[derive(Default)]
struct Queue {
    items: VecDeque<Queued>,
    /// The position of `items[0]`: every item queued since the lane started has one.
    head: u64,
    /// The position of each object's change waiting, by uid, for its next change to replace.
    waiting: HashMap<Arc<str>, u64>,
    /// Items not superseded.
    live: usize,
    /// When the oldest event of the work being evaluated was queued.
    evaluating: Option<Instant>,
    closed: bool,
}

impl Queue {
    fn has_room(&self) -> bool {
        self.live < LANE_CAPACITY
    }

    /// Whether work is queued or being evaluated.
    fn unevaluated(&self) -> bool {
        self.live > 0 || self.evaluating.is_some()
    }

    /// When the oldest event not yet evaluated was queued: that of the work being evaluated,
    /// else of the first queued (items are queued in the order of their oldest event).
    fn oldest(&self) -> Option<Instant> {
        self.evaluating
            .or_else(|| self.items.front().map(|q| q.since))
    }

    /// Queues `work` at the back; the caller checked there is room. Returns its position.
    fn push(&mut self, work: Work, since: Instant) -> u64 {
        let position = self.head + self.items.len() as u64;
        self.items.push_back(Queued {
            work: Some(work),
            since,
        });
        self.live += 1;
        position
    }

    /// Drops superseded items from the front, so that the front is the oldest work to do.
    fn trim(&mut self) {
        while self.items.front().is_some_and(|q| q.work.is_none()) {
            self.items.pop_front();
            self.head += 1;
        }
    }

    /// Object `object` (`uid`) changed: the change replaces the object's change waiting, if
    /// any; else it is queued, if there is room.
    fn apply(
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
    fn supersede(&mut self, uid: &str) {
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
    fn delete(&mut self, uid: &Arc<str>, now: Instant) -> Result<(), Refused> {
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
    fn pop(&mut self) -> Option<Work> {
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
    fn close(&mut self) {
        self.closed = true;
        self.items.clear();
        self.waiting.clear();
        self.live = 0;
    }
}

/// A lane's queue, shared by the watcher that fills it, the task that empties it, and the look
/// at its lag.
#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    /// Work was queued, or the lane closed.
    work: Notify,
    /// Room was made, or the lane closed.
    room: Notify,
}

impl Shared {
    /// Queues `work` once the lane has room, after `before` (under the same lock); false when
    /// the lane ended meanwhile.
    async fn send_when_room(&self, work: Work, before: impl FnOnce(&mut Queue)) -> bool {
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
    fn lag(&self, now: Instant) -> Duration {
        self.queue
            .lock()
            .oldest()
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since))
    }

    fn close(&self) {
        self.queue.lock().close();
        self.work.notify_one();
        self.room.notify_waiters();
    }
}

struct Lane {
    ruleset: Arc<CompiledRuleSet>,
    shared: Arc<Shared>,
    /// Places for the objects of a list ([`LIST_AHEAD`]).
    list_ahead: Arc<Semaphore>,
    lag: crate::metrics::EvaluationLag,
}

/// What the lanes of one watcher do when evaluation cannot keep up, loses work, or lags.
struct Behind {
    detector: Arc<Detector>,
    target: Target,
    /// Notified at the first loss: the watcher lists the target again.
    relist: Arc<Notify>,
    /// Whether any lane lost work.
    dropped: AtomicBool,
}

impl Behind {
    /// `ruleset` lost work (`what`): its detection on the target is not current (answers carry
    /// a `Warning`, gates are Unknown) until the target is listed again, which this asks for.
    fn lost(&self, ruleset: &CompiledRuleSet, what: &str) {
        let name = &ruleset.info.name;
        crate::metrics::evaluation_event_dropped(&ruleset.owner().name);
        tracing::warn!(ruleset = %name, target = %self.target, "{what}");
        self.detector
            .health()
            .dropped_events(&self.target, ruleset, what.to_owned());
        if !self.dropped.swap(true, Ordering::AcqRel) {
            self.relist.notify_one();
        }
    }

    /// `ruleset`'s lane lags by `lag`, over `bound` (`Some((lag, bound))`), or no longer does
    /// (`None`): its detection on the target is not current meanwhile. Nothing is lost.
    fn lagging(&self, ruleset: &CompiledRuleSet, lag: Option<(Duration, Duration)>) {
        let name = &ruleset.info.name;
        match lag {
            Some((lag, bound)) => tracing::warn!(
                ruleset = %name,
                target = %self.target,
                lag = ?lag,
                bound = ?bound,
                "evaluation lags: its detection is not current until it catches up"
            ),
            None => tracing::info!(ruleset = %name, target = %self.target, "evaluation caught up"),
        }
        self.detector.health().lagging(&self.target, ruleset, lag);
    }
}

/// The lag each lane of a watcher was last said to have (`None`: within the bound), by lane.
struct LagMarks {
    /// The lanes ended: nothing is marked any more.
    closed: bool,
    said: Vec<Option<Duration>>,
}

/// The lanes of one watcher.
pub(crate) struct Lanes {
    lanes: Vec<Lane>,
    closed: Arc<AtomicBool>,
    behind: Arc<Behind>,
    marks: Arc<Mutex<LagMarks>>,
    /// Looks at the lanes' lag ([`watch_lag`]).
    lag_watch: JoinHandle<()>,
}

impl Lanes {
    /// Starts one lane per ruleset of `target` (on the current tokio runtime); `relist` is
    /// notified when one loses work.
    pub(crate) fn start(
        detector: &Arc<Detector>,
        rulesets: &[Arc<CompiledRuleSet>],
        target: &Target,
        relist: Arc<Notify>,
    ) -> Lanes {
        let closed = Arc::new(AtomicBool::new(false));
        let behind = Arc::new(Behind {
            detector: detector.clone(),
            target: target.clone(),
            relist,
            dropped: AtomicBool::new(false),
        });
        let lanes: Vec<Lane> = rulesets
            .iter()
            .map(|rs| {
                let shared = Arc::new(Shared::default());
                tokio::spawn(run(
                    rs.clone(),
                    shared.clone(),
                    behind.clone(),
                    closed.clone(),
                ));
                Lane {
                    ruleset: rs.clone(),
                    shared,
                    list_ahead: Arc::new(Semaphore::new(LIST_AHEAD)),
                    lag: crate::metrics::EvaluationLag::new(&rs.info.name),
                }
            })
            .collect();
        let marks = Arc::new(Mutex::new(LagMarks {
            closed: false,
            said: vec![None; lanes.len()],
        }));
        let lag_watch = tokio::spawn(watch_lag(
            lanes
                .iter()
                .map(|l| (l.ruleset.clone(), l.shared.clone(), l.lag.clone()))
                .collect(),
            behind.clone(),
            marks.clone(),
            detector.lag_bound(),
        ));
        Lanes {
            lanes,
            closed,
            behind,
            marks,
            lag_watch,
        }
    }

    /// Whether any lane lost work since they started.
    pub(crate) fn dropped(&self) -> bool {
        self.behind.dropped.load(Ordering::Acquire)
    }

    /// `object` (`uid`), changed, to `lane`: it takes the place of its change waiting there, or
    /// is queued; a full lane drops it.
    fn send(&self, lane: &Lane, object: &Arc<serde_json::Value>, uid: Option<&str>) {
        let sent = lane.shared.queue.lock().apply(object, uid, Instant::now());
        match sent {
            Ok(Sent::Queued) => lane.shared.work.notify_one(),
            Ok(Sent::Replaced) | Err(Refused::Closed) => {}
            Err(Refused::Full) => self.full(lane),
        }
    }

    fn full(&self, lane: &Lane) {
        self.behind.lost(
            &lane.ruleset,
            &format!("evaluation fell {LANE_CAPACITY} objects behind; events were dropped"),
        );
    }

    /// `object`, to send, and the lanes of the rulesets that apply to its namespace.
    fn lanes_for(
        &self,
        object: serde_json::Value,
    ) -> (Arc<serde_json::Value>, impl Iterator<Item = &Lane>) {
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(|n| n.as_str())
            .map(str::to_owned);
        let lanes = self
            .lanes
            .iter()
            .filter(move |lane| lane.ruleset.applies_to(namespace.as_deref()));
        (Arc::new(object), lanes)
    }

    /// An object was added or modified: to the lanes of the rulesets that apply to its
    /// namespace, where it replaces its change still waiting; a full lane drops it (see the
    /// module's documentation).
    pub(crate) fn apply(&self, object: serde_json::Value) {
        let (object, lanes) = self.lanes_for(object);
        let uid = uid(&object);
        for lane in lanes {
            self.send(lane, &object, uid);
        }
    }

    /// An object of a list: like [`Lanes::apply`], but a lane that holds [`LIST_AHEAD`] of the
    /// list unevaluated is waited for rather than dropped from. A list is read no faster than
    /// its slowest lane evaluates (the API server holds the rest, and a streamed list is sent
    /// as fast as it is read): dropping would only list the whole target again, as fast, and
    /// drop again. The target is not current until the list is evaluated anyway. The object's
    /// change still waiting, if any (read before the list), is superseded by this newer state.
    pub(crate) async fn apply_listed(&self, object: serde_json::Value) {
        let (object, lanes) = self.lanes_for(object);
        let uid = uid(&object);
        for lane in lanes {
            // Never closed: the semaphore lives as long as the lane.
            let Ok(place) = lane.list_ahead.clone().acquire_owned().await else {
                continue;
            };
            lane.shared
                .send_when_room(Work::Listed(object.clone(), place), |queue| {
                    if let Some(uid) = uid {
                        queue.supersede(uid);
                    }
                })
                .await;
        }
    }

    pub(crate) fn delete(&self, uid: &str) {
        let uid: Arc<str> = uid.into();
        for lane in &self.lanes {
            let deleted = lane.shared.queue.lock().delete(&uid, Instant::now());
            match deleted {
                Ok(()) => lane.shared.work.notify_one(),
                Err(Refused::Closed) => {}
                Err(Refused::Full) => self.full(lane),
            }
        }
    }

    /// The end of a list: the subjects it saw, so that those it did not are ended. Like the
    /// list's objects, it waits for room. Changes queued after it do not join those before it.
    pub(crate) async fn resync(&self, namespace: Option<String>, present: HashSet<String>) {
        let present = Arc::new(present);
        for lane in &self.lanes {
            lane.shared
                .send_when_room(Work::Resync(namespace.clone(), present.clone()), |queue| {
                    queue.waiting.clear()
                })
                .await;
        }
    }

    /// Resolves once every lane has evaluated what was sent to it before: a list is what the
    /// index shows only then. A lane that ended does not hold this up.
    ///
    /// What it returns borrows nothing: the watcher goes on routing events while it waits (the
    /// request waits for room in a full lane, behind them), so a slow ruleset's lane does not
    /// hold back the others'.
    pub(crate) fn evaluated(&self) -> impl Future<Output = ()> + Send + 'static {
        let lanes: Vec<Arc<Shared>> = self.lanes.iter().map(|lane| lane.shared.clone()).collect();
        async move {
            let mut acks = Vec::with_capacity(lanes.len());
            for lane in lanes {
                let (tx, rx) = oneshot::channel();
                if lane.send_when_room(Work::Flush(tx), |_| {}).await {
                    acks.push(rx);
                }
            }
            for ack in acks {
                let _ = ack.await;
            }
        }
    }

    /// The lanes stop for a new list of the target, after one of them lost work: what the
    /// others had not evaluated yet is discarded, so their detection is not current either
    /// until that list is done.
    pub(crate) fn stop_for_relist(self) {
        for lane in &self.lanes {
            if lane.shared.queue.lock().unevaluated() {
                self.behind.lost(
                    &lane.ruleset,
                    "events not yet evaluated were discarded: the target is listed again after \
                     evaluation fell behind",
                );
            }
        }
    }
}

impl Drop for Lanes {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::Release);
        self.lag_watch.abort();
        // Under the marks' lock, so that the look at the lag, if under way, marks nothing after.
        let mut marks = self.marks.lock();
        marks.closed = true;
        for (lane, said) in self.lanes.iter().zip(marks.said.iter_mut()) {
            lane.shared.close();
            lane.lag.set(Duration::ZERO);
            if said.take().is_some() {
                self.behind.lagging(&lane.ruleset, None);
            }
        }
    }
}

/// What to say of a lane's lag `lag` after `said` (`None`: nothing, within the bound): nothing
/// within `bound`; over it, the lag in whole seconds (at least the bound), said again only once
/// it has doubled or fallen, so that what gates and warnings say does not change at every look.
fn lag_to_say(said: Option<Duration>, lag: Duration, bound: Duration) -> Option<Duration> {
    if lag <= bound {
        return None;
    }
    match said {
        Some(said) if lag >= said && lag < said * 2 => Some(said),
        _ => Some(Duration::from_secs(lag.as_secs()).max(bound)),
    }
}

/// Looks at the lag of `lanes` (each with its ruleset and gauge) every quarter of `bound` (at
/// most every second), from outside the lanes: a lane busy in a long evaluation does not hold
/// this up. Runs until the lanes end (see [`Lanes`]'s `Drop`).
async fn watch_lag(
    lanes: Vec<(
        Arc<CompiledRuleSet>,
        Arc<Shared>,
        crate::metrics::EvaluationLag,
    )>,
    behind: Arc<Behind>,
    marks: Arc<Mutex<LagMarks>>,
    bound: Duration,
) {
    let mut tick = tokio::time::interval((bound / 4).clamp(LAG_TICK_MIN, LAG_TICK_MAX));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = Instant::now();
        let mut marks = marks.lock();
        if marks.closed {
            return;
        }
        for ((ruleset, shared, gauge), said) in lanes.iter().zip(marks.said.iter_mut()) {
            let lag = shared.lag(now);
            gauge.set(lag);
            let say = lag_to_say(*said, lag, bound);
            if say != *said {
                *said = say;
                behind.lagging(ruleset, say.map(|lag| (lag, bound)));
            }
        }
    }
}

/// Runs one lane until its watcher goes away. An evaluation that panics loses the work being
/// evaluated: that is reported like dropped events, and the target is listed again.
async fn run(
    ruleset: Arc<CompiledRuleSet>,
    shared: Arc<Shared>,
    behind: Arc<Behind>,
    closed: Arc<AtomicBool>,
) {
    let timer = crate::metrics::EvaluationTimer::new(&ruleset.owner().name);
    loop {
        let empty = {
            let queue = shared.queue.lock();
            if queue.closed {
                return;
            }
            queue.items.is_empty()
        };
        if empty {
            shared.work.notified().await;
            continue;
        }
        let done = tokio::task::spawn_blocking({
            let detector = behind.detector.clone();
            let (ruleset, shared, closed) = (ruleset.clone(), shared.clone(), closed.clone());
            let timer = timer.clone();
            move || {
                for _ in 0..BATCH {
                    if closed.load(Ordering::Acquire) {
                        return;
                    }
                    let Some(work) = shared.queue.lock().pop() else {
                        break;
                    };
                    shared.room.notify_waiters();
                    do_work(&detector, &ruleset, &timer, work);
                }
            }
        })
        .await;
        // Done, or lost: nothing of the lane is being evaluated.
        shared.queue.lock().evaluating = None;
        if closed.load(Ordering::Acquire) {
            return;
        }
        if let Err(e) = done {
            tracing::error!(ruleset = %ruleset.info.name, error = %e, "evaluation lane failed");
            behind.lost(
                &ruleset,
                "evaluation failed: the event being evaluated was lost",
            );
        }
    }
}

fn do_work(
    detector: &Detector,
    ruleset: &Arc<CompiledRuleSet>,
    timer: &crate::metrics::EvaluationTimer,
    work: Work,
) {
    match work {
        Work::Apply(object) => timer.time(|| detector.apply(ruleset, &object)),
        Work::Listed(object, place) => {
            timer.time(|| detector.apply(ruleset, &object));
            // Evaluated: the list may send one more.
            drop(place);
        }
        Work::Delete(uid) => detector.delete(std::slice::from_ref(ruleset), &uid),
        Work::Resync(namespace, present) => detector.resync(
            std::slice::from_ref(ruleset),
            namespace.as_deref(),
            &present,
        ),
        Work::Flush(done) => {
            let _ = done.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::{Blind, Health, Limits};
    use crate::evaluate::Engine;
    use crate::index::Index;
    use crate::track::{Settings, Tracker};
    use serde_json::json;
    use std::time::Duration;

    /// A ruleset `name` of one rule on `things.example.com/v1`.
    fn ruleset(name: &str, expression: &str) -> Arc<CompiledRuleSet> {
        ruleset_of(name, json!({"operation": "Busy", "expression": expression}))
    }

    /// A ruleset `name` of one `rule` on `things.example.com/v1`.
    fn ruleset_of(name: &str, rule: serde_json::Value) -> Arc<CompiledRuleSet> {
        let spec = serde_json::from_value(json!({
            "component": "test",
            "target": {"group": "example.com", "version": "v1", "resource": "things"},
            "rules": [rule],
        }))
        .unwrap();
        Arc::new(crate::ruleset::compile(&Engine::new(), name, Some(1), &spec).unwrap())
    }

    /// A detector that completes at once, publishing into `index`.
    fn detector(index: Arc<Index>, health: Arc<Health>) -> Arc<Detector> {
        detector_within(index, health, Limits::default())
    }

    /// [`detector`] under `limits`.
    fn detector_within(index: Arc<Index>, health: Arc<Health>, limits: Limits) -> Arc<Detector> {
        Arc::new(Detector::new(
            Tracker::new(Settings {
                debounce: jiff::SignedDuration::ZERO,
                retain_completed: false,
                completed_retention: jiff::SignedDuration::ZERO,
                max_completed: 0,
            }),
            index,
            health,
            limits,
        ))
    }

    /// `health` with `target`'s one stream listed: current.
    fn listed(health: &Health, target: &Target) {
        health.watching(target, None);
        health.resolved(target, true, &[None]);
        health.listed(target, &None, jiff::Timestamp::UNIX_EPOCH);
    }

    /// The lanes of one ruleset, `busy`, evaluating into the returned index.
    fn busy_lanes() -> (Arc<Index>, Lanes) {
        let rs = ruleset("busy", "object.?status.?busy.orValue(false)");
        let index = Arc::new(Index::new(1, 16, 16));
        let detector = detector(index.clone(), Arc::new(Health::default()));
        detector.ruleset_loaded("busy", Some(1));
        let lanes = Lanes::start(
            &detector,
            std::slice::from_ref(&rs),
            &rs.target,
            Arc::new(Notify::new()),
        );
        (index, lanes)
    }

    /// A busy thing, the `i`th.
    fn busy_thing(i: usize) -> serde_json::Value {
        json!({
            "apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": format!("t{i}"), "namespace": "a", "uid": format!("u{i}")},
            "status": {"busy": true},
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_list_is_evaluated_before_it_is_reported_evaluated() {
        let (index, lanes) = busy_lanes();
        let listed = 2000;
        for i in 0..listed {
            lanes.apply(busy_thing(i));
        }
        lanes.evaluated().await;
        assert_eq!(index.len(), listed);
    }

    /// A list of more objects than a lane holds (streamed as fast as it is read) is evaluated
    /// whole: the list waits for room, where a watch event would be dropped.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_list_longer_than_a_lane_waits_for_room_and_loses_nothing() {
        let (index, lanes) = busy_lanes();
        let listed = 3 * LANE_CAPACITY;
        for i in 0..listed {
            lanes.apply_listed(busy_thing(i)).await;
        }
        lanes.evaluated().await;
        assert!(!lanes.dropped());
        assert_eq!(index.len(), listed);
    }

    #[tokio::test]
    async fn a_full_lane_marks_its_target_not_current_and_asks_for_a_new_list() {
        let rs = ruleset("busy", "object.?status.?busy.orValue(false)");
        let health = Arc::new(Health::default());
        listed(&health, &rs.target);
        let coverage = health.reader();
        let detector = detector(Arc::new(Index::new(1, 16, 16)), health.clone());
        let relist = Arc::new(Notify::new());
        let lanes = Lanes::start(
            &detector,
            std::slice::from_ref(&rs),
            &rs.target,
            relist.clone(),
        );
        // The lane's task has not run yet (this runtime has one thread, and nothing yielded).
        for _ in 1..LANE_CAPACITY {
            lanes.apply(json!({}));
        }
        lanes.apply(busy_thing(0));
        assert!(!lanes.dropped());
        assert!(coverage.stale(None).is_empty());
        // Full: a change of an object already queued still takes its place; another does not.
        lanes.apply(busy_thing(0));
        assert!(!lanes.dropped());
        lanes.apply(json!({}));
        assert!(lanes.dropped());
        let reasons: Vec<Blind> = coverage.stale(None).into_iter().map(|s| s.reason).collect();
        assert_eq!(
            reasons,
            [Blind::DroppedEvents {
                ruleset: "busy".into()
            }]
        );
        let busy = coverage.ruleset("busy");
        assert_eq!(busy.evaluation_errors, 1, "and on the ruleset's status");
        tokio::time::timeout(Duration::from_secs(1), relist.notified())
            .await
            .expect("a new list asked for");
    }

    #[tokio::test]
    async fn a_relist_marks_every_ruleset_whose_work_it_discards() {
        let (full, other, idle) = (
            ruleset("full", "true"),
            ruleset("other", "true"),
            ruleset("idle", "true"),
        );
        let health = Arc::new(Health::default());
        listed(&health, &full.target);
        let coverage = health.reader();
        let detector = detector(Arc::new(Index::new(1, 16, 16)), health.clone());
        let rulesets = [full.clone(), other.clone(), idle.clone()];
        let lanes = Lanes::start(&detector, &rulesets, &full.target, Arc::new(Notify::new()));
        // Nothing has run yet (one thread, nothing yielded): `full` overflows, `other` has one
        // event queued, `idle` none.
        let thing = Arc::new(json!({}));
        for _ in 0..=LANE_CAPACITY {
            lanes.send(&lanes.lanes[0], &thing, None);
        }
        lanes.send(&lanes.lanes[1], &thing, None);
        lanes.stop_for_relist();
        let mut marked: Vec<String> = coverage
            .stale(None)
            .into_iter()
            .map(|s| match s.reason {
                Blind::DroppedEvents { ruleset } => ruleset,
                other => panic!("{other:?}"),
            })
            .collect();
        marked.sort();
        assert_eq!(marked, ["full", "other"]);
        assert_eq!(coverage.ruleset("idle").evaluation_errors, 0);
    }

    /// A ruleset over whose budget a thing goes (`spec.n` large), never suspended, with lanes
    /// on its target, and the health they report to (the target current).
    fn costly_lanes() -> (Arc<Health>, Arc<Detector>, Arc<CompiledRuleSet>, Lanes) {
        let rs = ruleset(
            "costly",
            "lists.range(object.spec.?n.orValue(0)).exists(i, i < 0)",
        );
        let health = Arc::new(Health::default());
        listed(&health, &rs.target);
        let limits = Limits {
            budget: crate::evaluate::Budget {
                cost_limit: 1_000,
                timeout: Duration::from_secs(30),
            },
            suspend: crate::detect::SuspendPolicy {
                after: 0,
                window: Duration::from_secs(60),
            },
            ..Limits::default()
        };
        let detector = detector_within(Arc::new(Index::new(1, 16, 16)), health.clone(), limits);
        detector.ruleset_loaded("costly", Some(1));
        let lanes = Lanes::start(
            &detector,
            std::slice::from_ref(&rs),
            &rs.target,
            Arc::new(Notify::new()),
        );
        (health, detector, rs, lanes)
    }

    /// A thing in team-a over the costly ruleset's budget.
    fn costly_thing(name: &str) -> serde_json::Value {
        json!({
            "apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": name, "namespace": "team-a", "uid": format!("uid-{name}")},
            "spec": {"n": 100_000},
        })
    }

    /// An object over budget, patched and deleted before the patch is evaluated: its deletion
    /// is read (and its skip marks cleared) while that change is still queued on the lane
    /// (where the deletion supersedes it) or being evaluated. What an evaluation finds of an
    /// object already deleted is ignored, and the lane's own deletion clears what it marked
    /// however the two interleave: nothing stays skipped (the gates of its namespace stayed
    /// Unknown until the ruleset changed).
    #[tokio::test]
    async fn an_object_deleted_while_its_evaluation_is_queued_is_not_skipped_after() {
        let (health, _, rs, lanes) = costly_lanes();
        let reader = health.reader();
        lanes.apply(costly_thing("slow"));
        lanes.evaluated().await;
        assert_eq!(
            reader.stale(Some("team-a")).len(),
            1,
            "over budget: skipped"
        );
        assert_eq!(reader.ruleset("costly").skipped.len(), 1);

        // Patched, then deleted: the watcher reads both before the lane evaluates the patch
        // (this runtime has one thread, and nothing yields in between).
        lanes.apply(costly_thing("slow"));
        health.object_gone(&rs.target, "uid-slow");
        lanes.delete("uid-slow");
        lanes.evaluated().await;
        assert!(reader.stale(None).is_empty(), "{:?}", reader.stale(None));
        assert!(reader.ruleset("costly").skipped.is_empty());

        // However late the lane's deletion comes after the evaluation (the watcher's
        // tombstone long forgotten), it takes the object's marks with it.
        lanes.apply(costly_thing("later"));
        lanes.delete("uid-later");
        lanes.evaluated().await;
        assert!(reader.stale(None).is_empty(), "{:?}", reader.stale(None));
        assert!(reader.ruleset("costly").skipped.is_empty());
    }

    /// A lane of a generation no longer loaded (its watcher being stopped after the ruleset
    /// changed or was deleted) still finishes what it evaluates: nothing it finds is recorded
    /// against the ruleset.
    #[tokio::test]
    async fn an_older_generation_marks_nothing() {
        let (health, detector, _, lanes) = costly_lanes();
        let reader = health.reader();
        detector.ruleset_loaded("costly", Some(2));
        lanes.apply(costly_thing("slow"));
        lanes.evaluated().await;
        assert!(reader.stale(None).is_empty(), "{:?}", reader.stale(None));
        assert_eq!(reader.ruleset("costly"), Default::default());
    }

    /// What `ruleset` evaluated so far (objects; `ifo_evaluation_duration_seconds`' count).
    fn evaluations(ruleset: &str) -> u64 {
        let line = format!("ifo_evaluation_duration_seconds_count{{ruleset=\"{ruleset}\"}} ");
        crate::metrics::render()
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .map_or(0, |n| n.trim().parse().unwrap())
    }

    /// `ruleset`'s lag as `ifo_evaluation_lag_seconds` says it.
    fn lag_metric(ruleset: &str) -> f64 {
        let line = format!("ifo_evaluation_lag_seconds{{ruleset=\"{ruleset}\"}} ");
        crate::metrics::render()
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .map_or(0.0, |n| n.trim().parse().unwrap())
    }

    /// `detector`'s evaluations held back (each waits, as in a long evaluation) until dropped.
    struct Held {
        release: Option<std::sync::mpsc::Sender<()>>,
        holder: Option<std::thread::JoinHandle<()>>,
    }

    impl Held {
        fn new(detector: &Arc<Detector>) -> Held {
            let (held_tx, held) = std::sync::mpsc::channel();
            let (release, released) = std::sync::mpsc::channel::<()>();
            let detector = detector.clone();
            let holder = std::thread::spawn(move || {
                let _held = detector.hold_evaluations();
                held_tx.send(()).unwrap();
                // Until the sender goes.
                let _ = released.recv();
            });
            held.recv().unwrap();
            Held {
                release: Some(release),
                holder: Some(holder),
            }
        }
    }

    impl Drop for Held {
        fn drop(&mut self) {
            drop(self.release.take());
            if let Some(holder) = self.holder.take() {
                holder.join().unwrap();
            }
        }
    }

    /// Waits until `lanes`' only lane is evaluating something.
    async fn busy(lanes: &Lanes) {
        tokio::time::timeout(Duration::from_secs(10), async {
            while lanes.lanes[0].shared.queue.lock().evaluating.is_none() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await
        .expect("the lane takes the first object");
    }

    /// A thing in namespace `a` whose change `round` is in `spec`.
    fn thing(name: &str, round: usize) -> serde_json::Value {
        json!({
            "apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": name, "namespace": "a", "uid": format!("uid-{name}")},
            "spec": {"round": round},
            "status": {"busy": true},
        })
    }

    /// The lanes of one ruleset `name` whose operation's message is the thing's round,
    /// evaluating into the returned index, with the detector (for holding evaluations) and the
    /// health they report to (the target current).
    fn round_lanes(name: &str, limits: Limits) -> (Arc<Index>, Arc<Health>, Arc<Detector>, Lanes) {
        let rs = ruleset_of(
            name,
            json!({
                "operation": "Busy",
                "expression": "object.?status.?busy.orValue(false)",
                "message": "'round ' + string(object.spec.round)",
            }),
        );
        let index = Arc::new(Index::new(1, 64, 64));
        let health = Arc::new(Health::default());
        listed(&health, &rs.target);
        let detector = detector_within(index.clone(), health.clone(), limits);
        detector.ruleset_loaded(name, Some(1));
        let lanes = Lanes::start(
            &detector,
            std::slice::from_ref(&rs),
            &rs.target,
            Arc::new(Notify::new()),
        );
        (index, health, detector, lanes)
    }

    /// The message of `subject`'s operation in `index`, if it has one.
    fn message_of(index: &Index, subject: &str) -> Option<String> {
        index.snapshot().items.iter().find_map(|stored| {
            let op = stored.to_json();
            (op["spec"]["subject"]["name"] == subject).then(|| {
                op["status"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
        })
    }

    /// One object changed a thousand times while its ruleset is busy in another evaluation (a
    /// tenant patching it in a loop): its changes share one place in the lane, and it is
    /// evaluated once, in its latest state; the object queued behind it is not held back by them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_objects_changes_while_its_lane_is_busy_are_evaluated_once_in_their_latest_state() {
        let (index, _, detector, lanes) = round_lanes("coalesced", Limits::default());
        let held = Held::new(&detector);
        lanes.apply(thing("first", 0));
        busy(&lanes).await;
        let changes = 1000;
        for round in 1..=changes {
            lanes.apply(thing("flood", round));
        }
        lanes.apply(thing("behind", 0));
        assert_eq!(
            lanes.lanes[0].shared.queue.lock().live,
            2,
            "the flooded object and the one behind it"
        );
        drop(held);
        lanes.evaluated().await;
        let evaluated = evaluations("coalesced");
        println!(
            "{changes} changes of one object while its lane is busy: {evaluated} evaluations in \
             all (the one under way, the object once, the one behind it)"
        );
        assert_eq!(evaluated, 3, "first, flood (once), behind");
        assert_eq!(
            message_of(&index, "flood").as_deref(),
            Some(format!("round {changes}").as_str())
        );
        assert_eq!(message_of(&index, "behind").as_deref(), Some("round 0"));
        assert!(!lanes.dropped());
    }

    /// An object changed, then deleted, while its lane is busy: its changes waiting are
    /// superseded by the deletion, so nothing evaluates the object after it (nor before: the
    /// deletion is its latest state). What was queued after the deletion is evaluated.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deletion_supersedes_the_objects_changes_waiting_and_is_never_followed_by_one() {
        let (index, _, detector, lanes) = round_lanes("superseded", Limits::default());
        let mut events = index.subscribe();
        let held = Held::new(&detector);
        lanes.apply(thing("first", 0));
        busy(&lanes).await;
        for round in 1..=10 {
            lanes.apply(thing("gone", round));
        }
        lanes.delete("uid-gone");
        lanes.apply(thing("after", 0));
        drop(held);
        lanes.evaluated().await;
        assert_eq!(evaluations("superseded"), 2, "first and after");
        assert_eq!(message_of(&index, "gone"), None);
        assert_eq!(message_of(&index, "after").as_deref(), Some("round 0"));
        while let Ok(event) = events.try_recv() {
            assert!(
                !format!("{event:?}").contains("uid-gone"),
                "the deleted object was evaluated: {event:?}"
            );
        }
    }

    /// The queue on its own: an object's changes share its place; a deletion or a list's
    /// object supersedes its change waiting and is queued in order; what comes after the end of
    /// a list does not join what came before it.
    #[test]
    fn a_queue_keeps_one_place_per_object_and_the_order_of_deletions_and_lists() {
        let now = Instant::now();
        let object = |uid: &str, round: u64| {
            Arc::new(json!({"metadata": {"uid": uid}, "spec": {"round": round}}))
        };
        let mut q = Queue::default();
        let apply = |q: &mut Queue, uid: &str, round| q.apply(&object(uid, round), Some(uid), now);
        assert_eq!(apply(&mut q, "a", 1), Ok(Sent::Queued));
        assert_eq!(apply(&mut q, "b", 1), Ok(Sent::Queued));
        assert_eq!(apply(&mut q, "a", 2), Ok(Sent::Replaced));
        assert_eq!(apply(&mut q, "c", 1), Ok(Sent::Queued));
        q.delete(&Arc::from("c"), now).unwrap();
        // The end of a list: later changes of `b` take a place of their own, after it.
        q.push(Work::Resync(None, Arc::default()), now);
        q.waiting.clear();
        assert_eq!(apply(&mut q, "b", 2), Ok(Sent::Queued));
        assert_eq!(apply(&mut q, "b", 3), Ok(Sent::Replaced));
        assert_eq!(apply(&mut q, "d", 1), Ok(Sent::Queued));
        // A list's object supersedes the change of it waiting.
        q.supersede("d");
        let semaphore = Arc::new(Semaphore::new(1));
        let place = semaphore.try_acquire_owned().unwrap();
        q.push(Work::Listed(object("d", 2), place), now);
        assert_eq!(q.live, 6);

        let mut order = Vec::new();
        for _ in 0..6 {
            order.push(match q.pop().unwrap() {
                Work::Apply(o) => format!("apply {}@{}", o["metadata"]["uid"], o["spec"]["round"]),
                Work::Listed(o, _) => {
                    format!("listed {}@{}", o["metadata"]["uid"], o["spec"]["round"])
                }
                Work::Delete(uid) => format!("delete {uid}"),
                Work::Resync(..) => "resync".into(),
                Work::Flush(_) => "flush".into(),
            });
        }
        assert_eq!(
            order,
            [
                "apply \"a\"@2",
                "apply \"b\"@1",
                "delete c",
                "resync",
                "apply \"b\"@3",
                "listed \"d\"@2",
            ]
        );
        assert_eq!((q.live, q.waiting.len(), q.items.len()), (0, 0, 0));
        assert!(q.unevaluated(), "the last is being evaluated");
        assert!(q.pop().is_none());
        assert!(!q.unevaluated());
    }

    /// A lane busy in one evaluation for longer than the bound, with more queued behind it:
    /// its ruleset is not current (a `Warning` on answers, Unknown gates), naming the lag, and
    /// `ifo_evaluation_lag_seconds` says how late; once it catches up, it is current again,
    /// without a new list (nothing was lost).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lane_lagging_past_the_bound_is_not_current_until_it_catches_up() {
        let limits = Limits {
            lag_bound: Duration::from_secs(1),
            ..Limits::default()
        };
        let (index, health, detector, lanes) = round_lanes("late", limits);
        let reader = health.reader();
        let lagging = || {
            reader
                .stale_for_gate(&crate::index::GateScope::Namespace("b".into()))
                .into_iter()
                .find(|s| matches!(&s.reason, Blind::Lagging { ruleset, .. } if ruleset == "late"))
        };
        let held = Held::new(&detector);
        lanes.apply(thing("slow", 0));
        busy(&lanes).await;
        lanes.apply(thing("waiting", 0));
        // Within the bound: current.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(reader.stale(None).is_empty(), "{:?}", reader.stale(None));

        let stale = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if let Some(stale) = lagging() {
                    return stale;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("marked while the lane is busy");
        let said = stale.reason.to_string();
        println!("{said}");
        assert!(said.contains("ruleset late"), "{said}");
        assert!(said.contains("(EVALUATION_LAG_BOUND: 1s)"), "{said}");
        assert_eq!(reader.stale(Some("a")).len(), 1, "a warning on answers");
        assert!(lag_metric("late") >= 1.0, "{}", lag_metric("late"));

        drop(held);
        lanes.evaluated().await;
        tokio::time::timeout(Duration::from_secs(5), async {
            while !reader.stale(None).is_empty() || lag_metric("late") > 0.0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("current again once caught up");
        assert!(!lanes.dropped(), "nothing was lost: no new list");
        assert_eq!(message_of(&index, "waiting").as_deref(), Some("round 0"));

        // Its mark goes with the lanes too.
        let held = Held::new(&detector);
        lanes.apply(thing("slow", 1));
        busy(&lanes).await;
        tokio::time::timeout(Duration::from_secs(5), async {
            while lagging().is_none() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("marked again");
        drop(lanes);
        assert!(reader.stale(None).is_empty(), "{:?}", reader.stale(None));
        drop(held);
    }

    #[test]
    fn a_lag_is_said_again_only_once_it_doubled_or_fell() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        let bound = s(5);
        assert_eq!(lag_to_say(None, s(5), bound), None);
        assert_eq!(lag_to_say(None, ms(5_300), bound), Some(s(5)));
        assert_eq!(lag_to_say(Some(s(5)), ms(9_900), bound), Some(s(5)));
        assert_eq!(lag_to_say(Some(s(5)), ms(10_200), bound), Some(s(10)));
        assert_eq!(lag_to_say(Some(s(10)), ms(7_500), bound), Some(s(7)));
        assert_eq!(lag_to_say(Some(s(7)), ms(4_000), bound), None);
        assert_eq!(lag_to_say(None, ms(300), ms(200)), Some(ms(200)));
    }
}
