//! The lanes as a watcher drives them: lists waited for, full lanes dropping and asking for a
//! relist, one place per object, deletions in order, lag marked and cleared.

use super::behind::lag_to_say;
use super::queue::{Queue, Sent, Work};
use super::*;
use crate::detect::{Blind, Health, Limits};
use crate::evaluate::Engine;
use crate::index::{Handles, Index, IndexReader, OperationsWriter};
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
fn detector(index: OperationsWriter, health: Arc<Health>) -> Arc<Detector> {
    detector_within(index, health, Limits::default())
}

/// [`detector`] under `limits`.
fn detector_within(index: OperationsWriter, health: Arc<Health>, limits: Limits) -> Arc<Detector> {
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

/// Loads `rs`, named `name`, at generation 1 into `detector` and starts lanes for it alone.
fn load_and_start(detector: &Arc<Detector>, name: &str, rs: &Arc<CompiledRuleSet>) -> Lanes {
    detector.ruleset_loaded(name, Some(1));
    let rulesets = std::slice::from_ref(rs);
    Lanes::start(detector, rulesets, &rs.target, Arc::new(Notify::new()))
}

/// The lanes of one ruleset, `busy`, evaluating into the returned index.
fn busy_lanes() -> (IndexReader, Lanes) {
    let rs = ruleset("busy", "object.?status.?busy.orValue(false)");
    let index = Index::new(1, 16, 16).into_handles();
    let detector = detector(index.writer, Arc::new(Health::default()));
    let lanes = load_and_start(&detector, "busy", &rs);
    (index.reader, lanes)
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
    let detector = detector(Index::new(1, 16, 16).into_handles().writer, health.clone());
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
    let detector = detector(Index::new(1, 16, 16).into_handles().writer, health.clone());
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
    let detector = detector_within(
        Index::new(1, 16, 16).into_handles().writer,
        health.clone(),
        limits,
    );
    let lanes = load_and_start(&detector, "costly", &rs);
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
    lanes.delete("uid-slow", Some("team-a"));
    lanes.evaluated().await;
    assert!(reader.stale(None).is_empty(), "{:?}", reader.stale(None));
    assert!(reader.ruleset("costly").skipped.is_empty());

    // However late the lane's deletion comes after the evaluation (the watcher's
    // tombstone long forgotten), it takes the object's marks with it.
    lanes.apply(costly_thing("later"));
    lanes.delete("uid-later", Some("team-a"));
    lanes.evaluated().await;
    assert!(reader.stale(None).is_empty(), "{:?}", reader.stale(None));
    assert!(reader.ruleset("costly").skipped.is_empty());
}

/// An object over the budget, listed again unchanged (a watch lists its target afresh whenever
/// a ruleset of it changes): not evaluated again, and still skipped; changed, it is evaluated
/// again.
#[tokio::test]
async fn an_object_over_budget_listed_again_unchanged_costs_nothing_more() {
    let (health, _, _, lanes) = costly_lanes();
    let reader = health.reader();
    let at = |version: &str| {
        let mut thing = costly_thing("slow");
        thing["metadata"]["resourceVersion"] = json!(version);
        thing
    };
    lanes.apply_listed(at("7")).await;
    lanes.evaluated().await;
    assert_eq!(reader.ruleset("costly").over_budget, 1);
    for _ in 0..3 {
        lanes.apply_listed(at("7")).await;
    }
    lanes.evaluated().await;
    let costly = reader.ruleset("costly");
    assert_eq!(costly.over_budget, 1, "evaluated again: {costly:?}");
    assert_eq!(costly.skipped.len(), 1);
    assert_eq!(reader.stale(Some("team-a")).len(), 1, "still skipped");

    lanes.apply(at("8"));
    lanes.evaluated().await;
    assert_eq!(
        reader.ruleset("costly").over_budget,
        2,
        "a change is evaluated"
    );
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

/// The value of `ruleset`'s series of `metric`, 0 when it has none.
fn metric_of<T: std::str::FromStr + Default>(metric: &str, ruleset: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    let line = format!("{metric}{{ruleset=\"{ruleset}\"}} ");
    crate::metrics::render()
        .lines()
        .find_map(|l| l.strip_prefix(&line))
        .map_or(T::default(), |n| n.trim().parse().unwrap())
}

/// What `ruleset` evaluated so far (objects; `ifo_evaluation_duration_seconds`' count).
fn evaluations(ruleset: &str) -> u64 {
    metric_of("ifo_evaluation_duration_seconds_count", ruleset)
}

/// `ruleset`'s lag as `ifo_evaluation_lag_seconds` says it.
fn lag_metric(ruleset: &str) -> f64 {
    metric_of("ifo_evaluation_lag_seconds", ruleset)
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
fn round_lanes(name: &str, limits: Limits) -> (IndexReader, Arc<Health>, Arc<Detector>, Lanes) {
    let rs = ruleset_of(
        name,
        json!({
            "operation": "Busy",
            "expression": "object.?status.?busy.orValue(false)",
            "message": "'round ' + string(object.spec.round)",
        }),
    );
    let index = Index::new(1, 64, 64).into_handles();
    let health = Arc::new(Health::default());
    listed(&health, &rs.target);
    let detector = detector_within(index.writer, health.clone(), limits);
    let lanes = load_and_start(&detector, name, &rs);
    (index.reader, health, detector, lanes)
}

/// The message of `subject`'s operation in `index`, if it has one.
fn message_of(index: &IndexReader, subject: &str) -> Option<String> {
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
    lanes.delete("uid-gone", Some("a"));
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

/// What `q` gives next, in words: `apply ns/uid@round`, `listed …`, `delete uid`, `resync`,
/// `flush`.
fn next_of(q: &mut Queue) -> Option<String> {
    let said = |o: &serde_json::Value| {
        format!(
            "{}/{}@{}",
            o["metadata"]["namespace"].as_str().unwrap_or("-"),
            o["metadata"]["uid"].as_str().unwrap_or("-"),
            o["spec"]["round"]
        )
    };
    Some(match q.pop()? {
        Work::Apply(o) => format!("apply {}", said(&o)),
        Work::Listed(o, _) => format!("listed {}", said(&o)),
        Work::Delete(uid, _) => format!("delete {uid}"),
        Work::Resync(..) => "resync".into(),
        Work::Flush(_) => "flush".into(),
    })
}

/// An object `uid` of namespace `ns`, at change `round`.
fn object_in(ns: &str, uid: &str, round: u64) -> Arc<serde_json::Value> {
    Arc::new(json!({"metadata": {"uid": uid, "namespace": ns}, "spec": {"round": round}}))
}

/// The queue on its own: an object's changes share its place; a deletion or a list's
/// object supersedes its change waiting and is queued in order; what comes after the end of
/// a list does not join what came before it.
#[test]
fn a_queue_keeps_one_place_per_object_and_the_order_of_deletions_and_lists() {
    let now = Instant::now();
    let mut q = Queue::default();
    let apply =
        |q: &mut Queue, uid: &str, round| q.apply(&object_in("a", uid, round), Some(uid), now);
    assert_eq!(apply(&mut q, "a", 1), Ok(Sent::Queued));
    assert_eq!(apply(&mut q, "b", 1), Ok(Sent::Queued));
    assert_eq!(apply(&mut q, "a", 2), Ok(Sent::Replaced));
    assert_eq!(apply(&mut q, "c", 1), Ok(Sent::Queued));
    q.delete(&Arc::from("c"), Some("a".into()), now).unwrap();
    // The end of a list: later changes of `b` take a place of their own, after it.
    q.push(Work::Resync(None, Arc::default()), now);
    q.list_ended(None);
    assert_eq!(apply(&mut q, "b", 2), Ok(Sent::Queued));
    assert_eq!(apply(&mut q, "b", 3), Ok(Sent::Replaced));
    assert_eq!(apply(&mut q, "d", 1), Ok(Sent::Queued));
    // A list's object supersedes the change of it waiting.
    q.supersede("d");
    let semaphore = Arc::new(Semaphore::new(1));
    let place = semaphore.try_acquire_owned().unwrap();
    q.push(Work::Listed(object_in("a", "d", 2), place), now);
    assert_eq!(q.live, 6);

    let order: Vec<String> = (0..6).filter_map(|_| next_of(&mut q)).collect();
    assert_eq!(
        order,
        [
            "apply a/a@2",
            "apply a/b@1",
            "delete c",
            "resync",
            "apply a/b@3",
            "listed a/d@2",
        ]
    );
    assert_eq!((q.live, q.waiting.len()), (0, 0));
    assert!(q.unevaluated(), "the last is being evaluated");
    assert!(q.pop().is_none());
    assert!(!q.unevaluated());
}

/// Namespaces take turns: a namespace's change waits behind one of every other namespace with
/// work, not behind all of it; order within a namespace is kept, and the end of a list of the
/// whole target (or a flush) still comes after everything queued before it and before
/// everything queued after it. Each namespace's lag is its own.
#[test]
fn namespaces_take_turns_in_a_lane_and_each_lags_on_its_own() {
    let start = Instant::now();
    let mut q = Queue::default();
    let apply = |q: &mut Queue, ns: &str, uid: &str, round, at: Instant| {
        q.apply(&object_in(ns, uid, round), Some(uid), at)
    };
    // A tenant's hundred objects, then another namespace's one, a second later.
    for i in 0..100 {
        apply(&mut q, "tenant", &format!("t{i}"), 0, start).unwrap();
    }
    let later = start + Duration::from_secs(1);
    apply(&mut q, "other", "o1", 0, later).unwrap();
    q.delete(&Arc::from("t5"), Some("tenant".into()), later)
        .unwrap();
    let lags = q.lags(start + Duration::from_secs(3));
    assert_eq!(lags[&Some("tenant".into())], Duration::from_secs(3));
    assert_eq!(lags[&Some("other".into())], Duration::from_secs(2));

    let first: Vec<String> = (0..3).filter_map(|_| next_of(&mut q)).collect();
    assert_eq!(
        first,
        ["apply tenant/t0@0", "apply other/o1@0", "apply tenant/t1@0"],
        "the other namespace's change waits behind one of the tenant's, not a hundred"
    );
    let lags = q.lags(start + Duration::from_secs(3));
    assert_eq!(lags.len(), 1, "only the tenant still has work: {lags:?}");
    // The tenant's own order: her deleted object's change was superseded, the deletion comes
    // after her changes queued before it.
    let rest: Vec<String> = std::iter::from_fn(|| next_of(&mut q)).collect();
    assert_eq!(rest.len(), 98, "97 changes and a deletion: {rest:?}");
    assert!(!rest.iter().any(|r| r.contains("t5@")));
    assert_eq!(rest.last().map(String::as_str), Some("delete t5"));

    // A barrier: work queued before it in any namespace goes first, work after it waits.
    apply(&mut q, "tenant", "t1", 1, start).unwrap();
    apply(&mut q, "tenant", "t2", 1, start).unwrap();
    q.push(Work::Resync(None, Arc::default()), start);
    q.list_ended(None);
    apply(&mut q, "other", "o1", 1, start).unwrap();
    apply(&mut q, "tenant", "t1", 2, start).unwrap();
    apply(&mut q, "other", "o2", 1, start).unwrap();
    let order: Vec<String> = std::iter::from_fn(|| next_of(&mut q)).collect();
    assert_eq!(
        order,
        [
            "apply tenant/t1@1",
            "apply tenant/t2@1",
            "resync",
            "apply other/o1@1",
            "apply tenant/t1@2",
            "apply other/o2@1",
        ]
    );
    // A namespace's own end of list keeps to its line, and ends only its own coalescing.
    apply(&mut q, "tenant", "t1", 3, start).unwrap();
    apply(&mut q, "other", "o1", 2, start).unwrap();
    q.push(Work::Resync(Some("tenant".into()), Arc::default()), start);
    q.list_ended(Some("tenant"));
    assert_eq!(apply(&mut q, "tenant", "t1", 4, start), Ok(Sent::Queued));
    assert_eq!(apply(&mut q, "other", "o1", 3, start), Ok(Sent::Replaced));
    let order: Vec<String> = std::iter::from_fn(|| next_of(&mut q)).collect();
    assert_eq!(
        order,
        [
            "apply tenant/t1@3",
            "apply other/o1@3",
            "resync",
            "apply tenant/t1@4"
        ]
    );
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
            .stale_for_gate(&crate::index::GateScope::Namespace("a".into()))
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
    assert!(said.contains("ruleset late in namespace a"), "{said}");
    assert!(said.contains("(EVALUATION_LAG_BOUND: 1s)"), "{said}");
    assert_eq!(reader.stale(Some("a")).len(), 1, "a warning on answers");
    assert!(
        reader.stale(Some("b")).is_empty(),
        "a namespace with nothing late: {:?}",
        reader.stale(Some("b"))
    );
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

/// A thing of namespace `ns` on node `node`, `n` iterations slow to evaluate, at change `round`.
fn slow_thing(ns: &str, name: &str, node: &str, n: u64, round: usize) -> serde_json::Value {
    json!({
        "apiVersion": "example.com/v1", "kind": "Thing",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{ns}-{name}")},
        "spec": {"n": n, "round": round, "node": node},
        "status": {"busy": true},
    })
}

/// The lag attack, in one lane: a tenant's objects, slow to evaluate (within the budget), all
/// on one node, changed in a loop. Her namespace's gate and her node's read Unknown, naming
/// the lag; another namespace's change queued behind all of hers is evaluated within a few of
/// her evaluations, and its namespace's gate and the other nodes' stay current throughout.
/// Before, one lane in arrival order: the other namespace's change waited behind all of hers,
/// and every gate the ruleset reaches read Unknown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_slow_objects_make_only_her_namespace_and_her_nodes_late() {
    use crate::index::GateScope;
    // Her objects are slow, never over the budget: a busy machine would otherwise skip them
    // (another blind spot, tested elsewhere) rather than run late.
    let limits = Limits {
        lag_bound: Duration::from_millis(500),
        budget: crate::evaluate::Budget {
            timeout: Duration::from_secs(30),
            ..crate::evaluate::Budget::default()
        },
        ..Limits::default()
    };
    let mut spec: serde_json::Value = json!({
        "component": "test",
        "target": {"group": "example.com", "version": "v1", "resource": "things"},
        "labelExpressions": [{"key": ifo_model::NODE_LABEL, "expression": "object.spec.node"}],
        "rules": [{
            "operation": "Busy",
            "expression": "!lists.range(object.spec.n).exists(i, i < 0) && object.status.busy",
        }],
    });
    let rs = Arc::new(
        crate::ruleset::compile(
            &Engine::new(),
            "shared",
            Some(1),
            &serde_json::from_value(spec.take()).unwrap(),
        )
        .unwrap(),
    );
    let Handles {
        writer,
        reader: index,
        ..
    } = Index::new(1, 1024, 1024).into_handles();
    let health = Arc::new(Health::default());
    listed(&health, &rs.target);
    let reader = health.reader();
    let detector = detector_within(writer, health.clone(), limits);
    let lanes = load_and_start(&detector, "shared", &rs);
    let late_in = |scope: GateScope| {
        reader
            .stale_for_gate(&scope)
            .into_iter()
            .map(|s| s.reason.to_string())
            .collect::<Vec<_>>()
    };

    // Her objects: each some milliseconds to evaluate; a round of all of them, well over the
    // bound.
    let slow = 20_000;
    let hers = 100;
    let started = Instant::now();
    let mut round = 0;
    let mut theirs_seen = None;
    let mut her_node_late = false;
    while started.elapsed() < Duration::from_secs(8) {
        for i in 0..hers {
            lanes.apply(slow_thing("tenant", &format!("t{i}"), "n1", slow, round));
        }
        if round == 1 {
            lanes.apply(slow_thing("other", "theirs", "n2", 0, 0));
        }
        if theirs_seen.is_none() && message_of(&index, "theirs").is_some() {
            theirs_seen = Some(started.elapsed());
        }
        her_node_late |= !late_in(GateScope::Node("n1".into())).is_empty();
        for scope in [
            GateScope::Namespace("other".into()),
            GateScope::Node("n2".into()),
        ] {
            let late = late_in(scope.clone());
            assert!(late.is_empty(), "gate {scope} is late: {late:?}");
        }
        round += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
        if theirs_seen.is_some() && her_node_late {
            break;
        }
    }
    let tenant = late_in(GateScope::Namespace("tenant".into()));
    println!(
        "{round} rounds of {hers} slow changes; the other namespace's change seen after {:?}; \
         her namespace: {tenant:?}",
        theirs_seen
    );
    assert!(
        theirs_seen.is_some(),
        "the other namespace's change is evaluated"
    );
    assert!(
        her_node_late,
        "her node's gate is Unknown while her changes are late"
    );
    assert!(
        tenant
            .iter()
            .any(|t| t.contains("evaluated late by ruleset shared in namespace tenant")),
        "{tenant:?}"
    );
    assert!(
        !late_in(GateScope::Cluster).is_empty(),
        "the cluster's gate holds everything"
    );
}
