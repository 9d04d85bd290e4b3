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
//! **One line per namespace.** Within a lane, each namespace's work waits in a line of its own,
//! and the lines take turns (`queue.rs`): a namespace's change waits behind at most one
//! evaluation of each other namespace with work queued, not behind everything queued before it.
//! Objects that are slow to evaluate (yet within the budget) changed in a loop by one tenant
//! make her line late, and no one else's.
//!
//! **Lag.** A lane that drops nothing may still run late: its **lag** in a namespace is how long
//! the oldest event of that namespace it holds (queued, or being evaluated) has waited. A
//! periodic look at every lane of the watcher, outside the lanes (so it sees a lane busy in a
//! long evaluation as well), sets `ifo_evaluation_lag_seconds` (the lane's largest) and, while a
//! namespace's lag is over the bound (`EVALUATION_LAG_BOUND`, 5 s), marks the target not
//! current for its ruleset in that namespace, naming the lag: that namespace's answers carry a
//! `Warning`, and its gate, the cluster's, the ruleset's component's and those of the nodes the
//! late changes are on (the ruleset's node labels, evaluated on them) are Unknown, since what
//! changed since is not seen yet. Other namespaces, and other nodes, stay current. Nothing was
//! lost, so no list is needed: the mark goes once the lag is back under the bound.
//!
//! A lane ends when its watcher does: the watcher's [`Lanes`] going away closes the lanes, and
//! work still queued is dropped (the restarted watcher lists everything again); its lag marks go
//! with it.
//!
//! This file starts, feeds and runs the lanes; a lane's queue is `queue.rs`, and what the lanes
//! do when they fall behind or lag, `behind.rs`.

mod behind;
mod queue;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{Notify, Semaphore, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::detector::Detector;
use crate::ruleset::{CompiledRuleSet, Target};
use behind::{Behind, LagMarks, watch_lag};
use queue::{LANE_CAPACITY, Place, Refused, Sent, Shared, Work, uid};

/// Most work a lane evaluates in one trip to the blocking pool.
const BATCH: usize = 64;

/// Objects of a list a lane holds unevaluated, at most: a list is read only this far ahead of
/// its slowest lane, so that what is buffered of a large list (decoded objects, several KB
/// each) stays small while kube-apiserver streams it faster than it is evaluated.
const LIST_AHEAD: usize = 1024;

/// One ruleset's lane: its queue, and what it holds of a list.
struct Lane {
    ruleset: Arc<CompiledRuleSet>,
    shared: Arc<Shared>,
    /// Places for the objects of a list ([`LIST_AHEAD`]).
    list_ahead: Arc<Semaphore>,
    lag: crate::metrics::EvaluationLag,
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
                // Owned by these lanes: it ends when they close (dropped with their watcher).
                #[allow(clippy::disallowed_methods)]
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
            said: vec![HashMap::new(); lanes.len()],
        }));
        // Owned by these lanes: aborted when they are dropped.
        #[allow(clippy::disallowed_methods)]
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

    /// Object `uid`, in `namespace`, was deleted: in each lane, its change waiting is
    /// superseded and the deletion queued in order.
    pub(crate) fn delete(&self, uid: &str, namespace: Option<&str>) {
        let uid: Arc<str> = uid.into();
        let place: Place = namespace.map(Arc::from);
        for lane in &self.lanes {
            let deleted = lane
                .shared
                .queue
                .lock()
                .delete(&uid, place.clone(), Instant::now());
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
                    queue.list_ended(namespace.as_deref())
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
            for (place, _) in said.drain() {
                self.behind.lagging(&lane.ruleset, &place, None);
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
            queue.is_empty()
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
        Work::Delete(uid, _) => detector.delete(std::slice::from_ref(ruleset), &uid),
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
