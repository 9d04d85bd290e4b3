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
//! Each lane's queue is bounded ([`LANE_CAPACITY`]). The objects of a list wait for room: a list
//! is read no faster than its slowest lane evaluates it. A lane that falls that far behind on
//! watch events (a ruleset near its budget on a busy target, until it is suspended) drops the
//! events that do not fit, counts them (`ifo_evaluation_events_dropped_total`) and reports it
//! on the ruleset, rather than holding memory in proportion to the target's event rate. What a
//! dropped event said must not stay lost: the first drop marks the target not current for that
//! ruleset (its answers carry a `Warning`) and asks the watcher to list the target again, with
//! fresh lanes. The other lanes' unevaluated work is discarded with them, so their rulesets are
//! marked the same way; so is a lane whose evaluation panicked.
//!
//! Within a lane, events keep their order (an object's update is never evaluated after its
//! deletion). A lane ends when its watcher does: the watcher's [`Lanes`] going away closes the
//! lanes, and work still queued is dropped (the restarted watcher lists everything again).

use super::detector::Detector;
use crate::ruleset::{CompiledRuleSet, Target};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

/// Most events a lane evaluates in one trip to the blocking pool.
const BATCH: usize = 64;

/// Events waiting in one lane, at most.
const LANE_CAPACITY: usize = 4096;

/// Objects of a list a lane holds unevaluated, at most: a list is read only this far ahead of
/// its slowest lane, so that what is buffered of a large list (decoded objects, several KB
/// each) stays small while kube-apiserver streams it faster than it is evaluated.
const LIST_AHEAD: usize = 1024;

/// One unit of work for a ruleset, in the order the watcher saw it.
enum Work {
    Apply(Arc<serde_json::Value>),
    /// An object of a list, holding its place among the [`LIST_AHEAD`] until evaluated.
    Listed(Arc<serde_json::Value>, OwnedSemaphorePermit),
    Delete(Arc<str>),
    /// A namespace's (or, for `None`, the whole target's) relist saw these subjects.
    Resync(Option<String>, Arc<HashSet<String>>),
    /// Everything sent before has been evaluated (see [`Lanes::evaluated`]).
    Flush(oneshot::Sender<()>),
}

struct Lane {
    ruleset: Arc<CompiledRuleSet>,
    queue: mpsc::Sender<Work>,
    /// Work sent and not yet done: queued, or in the batch being evaluated.
    pending: Arc<AtomicUsize>,
    /// Places for the objects of a list ([`LIST_AHEAD`]).
    list_ahead: Arc<Semaphore>,
}

/// What the lanes of one watcher do when evaluation cannot keep up, or loses work.
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
}

/// The lanes of one watcher.
pub(crate) struct Lanes {
    lanes: Vec<Lane>,
    closed: Arc<AtomicBool>,
    behind: Arc<Behind>,
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
        let lanes = rulesets
            .iter()
            .map(|rs| {
                let (queue, work) = mpsc::channel(LANE_CAPACITY);
                let pending = Arc::new(AtomicUsize::new(0));
                tokio::spawn(run(
                    rs.clone(),
                    pending.clone(),
                    behind.clone(),
                    work,
                    closed.clone(),
                ));
                Lane {
                    ruleset: rs.clone(),
                    queue,
                    pending,
                    list_ahead: Arc::new(Semaphore::new(LIST_AHEAD)),
                }
            })
            .collect();
        Lanes {
            lanes,
            closed,
            behind,
        }
    }

    /// Whether any lane lost work since they started.
    pub(crate) fn dropped(&self) -> bool {
        self.behind.dropped.load(Ordering::Acquire)
    }

    fn send(&self, lane: &Lane, work: Work) {
        // A lane only stops after `closed` is set, when nobody sends any more.
        lane.pending.fetch_add(1, Ordering::AcqRel);
        if let Err(mpsc::error::TrySendError::Full(_)) = lane.queue.try_send(work) {
            lane.pending.fetch_sub(1, Ordering::AcqRel);
            self.behind.lost(
                &lane.ruleset,
                &format!("evaluation fell {LANE_CAPACITY} events behind; events were dropped"),
            );
        }
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
    /// namespace; a full lane drops it (see the module's documentation).
    pub(crate) fn apply(&self, object: serde_json::Value) {
        let (object, lanes) = self.lanes_for(object);
        for lane in lanes {
            self.send(lane, Work::Apply(object.clone()));
        }
    }

    /// An object of a list: like [`Lanes::apply`], but a lane that holds [`LIST_AHEAD`] of the
    /// list unevaluated is waited for rather than dropped from. A list is read no faster than
    /// its slowest lane evaluates (the API server holds the rest, and a streamed list is sent
    /// as fast as it is read): dropping would only list the whole target again, as fast, and
    /// drop again. The target is not current until the list is evaluated anyway.
    pub(crate) async fn apply_listed(&self, object: serde_json::Value) {
        let (object, lanes) = self.lanes_for(object);
        for lane in lanes {
            // Never closed: the semaphore lives as long as the lane.
            let Ok(place) = lane.list_ahead.clone().acquire_owned().await else {
                continue;
            };
            Self::send_listed(lane, Work::Listed(object.clone(), place)).await;
        }
    }

    /// `work` of a list, to `lane`, once it has room.
    async fn send_listed(lane: &Lane, work: Work) {
        lane.pending.fetch_add(1, Ordering::AcqRel);
        if lane.queue.send(work).await.is_err() {
            // The lane ended with its watcher: nothing evaluates it any more.
            lane.pending.fetch_sub(1, Ordering::AcqRel);
        }
    }

    pub(crate) fn delete(&self, uid: &str) {
        let uid: Arc<str> = uid.into();
        for lane in &self.lanes {
            self.send(lane, Work::Delete(uid.clone()));
        }
    }

    /// The end of a list: the subjects it saw, so that those it did not are ended. Like the
    /// list's objects, it waits for room.
    pub(crate) async fn resync(&self, namespace: Option<String>, present: HashSet<String>) {
        let present = Arc::new(present);
        for lane in &self.lanes {
            Self::send_listed(lane, Work::Resync(namespace.clone(), present.clone())).await;
        }
    }

    /// Resolves once every lane has evaluated what was sent to it before: a list is what the
    /// index shows only then. A lane that ended does not hold this up.
    ///
    /// What it returns borrows nothing: the watcher goes on routing events while it waits (the
    /// request waits for room in a full lane, behind them), so a slow ruleset's lane does not
    /// hold back the others'.
    pub(crate) fn evaluated(&self) -> impl Future<Output = ()> + Send + 'static {
        let queues: Vec<mpsc::Sender<Work>> =
            self.lanes.iter().map(|lane| lane.queue.clone()).collect();
        async move {
            let mut acks = Vec::with_capacity(queues.len());
            for queue in queues {
                let (tx, rx) = oneshot::channel();
                if queue.send(Work::Flush(tx)).await.is_ok() {
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
            if lane.pending.load(Ordering::Acquire) > 0 {
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
    }
}

/// Runs one lane until its watcher goes away. An evaluation that panics loses the rest of its
/// batch: that is reported like dropped events, and the target is listed again.
async fn run(
    ruleset: Arc<CompiledRuleSet>,
    pending: Arc<AtomicUsize>,
    behind: Arc<Behind>,
    mut work: mpsc::Receiver<Work>,
    closed: Arc<AtomicBool>,
) {
    let timer = crate::metrics::EvaluationTimer::new(&ruleset.owner().name);
    let mut batch = Vec::with_capacity(BATCH);
    while work.recv_many(&mut batch, BATCH).await > 0 {
        let items = std::mem::take(&mut batch);
        let done = tokio::task::spawn_blocking({
            let detector = behind.detector.clone();
            let (ruleset, pending, closed) = (ruleset.clone(), pending.clone(), closed.clone());
            let timer = timer.clone();
            move || {
                for item in items {
                    if closed.load(Ordering::Acquire) {
                        return;
                    }
                    do_work(&detector, &ruleset, &timer, item);
                    pending.fetch_sub(1, Ordering::AcqRel);
                }
            }
        })
        .await;
        if closed.load(Ordering::Acquire) {
            return;
        }
        if let Err(e) = done {
            tracing::error!(ruleset = %ruleset.info.name, error = %e, "evaluation lane failed");
            behind.lost(
                &ruleset,
                "evaluation failed: events of the batch being evaluated were lost",
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
        let spec = serde_json::from_value(json!({
            "component": "test",
            "target": {"group": "example.com", "version": "v1", "resource": "things"},
            "rules": [{"operation": "Busy", "expression": expression}],
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
        for _ in 0..LANE_CAPACITY {
            lanes.apply(json!({}));
        }
        assert!(!lanes.dropped());
        assert!(coverage.stale(None).is_empty());
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
        for _ in 0..=LANE_CAPACITY {
            lanes.send(&lanes.lanes[0], Work::Apply(Arc::new(json!({}))));
        }
        lanes.send(&lanes.lanes[1], Work::Apply(Arc::new(json!({}))));
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
    /// is read (and its skip marks cleared) while that evaluation is still queued on the lane.
    /// What the evaluation finds of an object already deleted is ignored, and the lane's own
    /// deletion clears what it marked however the two interleave: nothing stays skipped (the
    /// gates of its namespace stayed Unknown until the ruleset changed).
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
}
