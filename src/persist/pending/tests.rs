use super::*;
use crate::operation::Outcome;
use crate::operation::test_record;

const INTERVAL: Duration = Duration::from_secs(5);

fn record(subject: &str) -> Arc<InFlightOperation> {
    test_record(subject)
}

fn completed(r: &Arc<InFlightOperation>) -> Arc<InFlightOperation> {
    let mut c = (**r).clone();
    c.phase = Phase::Completed;
    c.outcome = Some(Outcome::Succeeded);
    Arc::new(c)
}

/// A record changed to say `message`.
fn with_message(r: &Arc<InFlightOperation>, message: &str) -> Arc<InFlightOperation> {
    let mut m = (**r).clone();
    m.message = Some(message.into());
    Arc::new(m)
}

/// Writes that want a new record present, from the instant returned.
fn wanting_a_record() -> (Pending, Arc<InFlightOperation>, Instant) {
    let t0 = Instant::now();
    let mut p = Pending::new(INTERVAL);
    let r = record("vm");
    p.want(&r.name, Desired::Present(r.clone()), t0);
    (p, r, t0)
}

fn copy_of(r: &Arc<InFlightOperation>, rv: &str) -> Copy {
    Copy {
        record: Some(r.clone()),
        uid: format!("cr-{}", r.name),
        resource_version: rv.into(),
    }
}

/// Takes every due write, answering each as the cluster would with nothing in the way.
fn drain(p: &mut Pending, now: Instant) -> Vec<Write> {
    let mut writes = Vec::new();
    while let Some(w) = p.take(now) {
        let result = match &w {
            Write::Create(r) => Written::Stored(copy_of(r, "1")),
            Write::Replace(r, c) => Written::Stored(Copy {
                resource_version: format!("{}+", c.resource_version),
                ..copy_of(r, "")
            }),
            Write::Delete { .. } => Written::Deleted,
        };
        p.done(w.name(), result, now);
        writes.push(w);
    }
    writes
}

fn verbs(writes: &[Write]) -> Vec<&'static str> {
    writes.iter().map(Write::verb).collect()
}

#[test]
fn a_lifecycle_is_three_writes_each_an_interval_apart() {
    let (mut p, r, t0) = wanting_a_record();
    assert_eq!(verbs(&drain(&mut p, t0)), ["create"]);
    // Completed and removed at once (no retention): the completion is written, then the delete.
    let done = completed(&r);
    p.want(&r.name, Desired::Present(done.clone()), t0);
    p.want(&r.name, Desired::Absent(Some(done.clone())), t0);
    assert!(
        drain(&mut p, t0 + INTERVAL / 2).is_empty(),
        "an interval between writes"
    );
    let writes = drain(&mut p, t0 + INTERVAL);
    assert_eq!(verbs(&writes), ["update"]);
    assert!(
        matches!(&writes[0], Write::Replace(w, c) if w.phase == Phase::Completed && c.resource_version == "1")
    );
    assert!(drain(&mut p, t0 + INTERVAL + INTERVAL / 2).is_empty());
    assert_eq!(verbs(&drain(&mut p, t0 + 2 * INTERVAL)), ["delete"]);
    assert!(p.is_empty());
    assert!(drain(&mut p, t0 + 10 * INTERVAL).is_empty());
}

#[test]
fn changes_within_an_interval_coalesce_into_the_latest() {
    let (mut p, r, t0) = wanting_a_record();
    drain(&mut p, t0);
    let mut latest = r.clone();
    for i in 0..100 {
        latest = with_message(&r, &format!("step {i}"));
        p.want(&r.name, Desired::Present(latest.clone()), t0);
    }
    assert_eq!(p.len(), 1, "one entry per operation, not per change");
    let writes = drain(&mut p, t0 + INTERVAL);
    assert_eq!(writes, vec![Write::Replace(latest, copy_of(&r, "1"))]);
}

#[test]
fn an_operation_that_ends_before_it_was_written_is_never_written() {
    let (mut p, r, t0) = wanting_a_record();
    p.want(&r.name, Desired::Absent(Some(completed(&r))), t0);
    assert!(drain(&mut p, t0).is_empty());
    assert!(p.is_empty());
}

#[test]
fn failures_back_off_and_the_latest_state_is_written_when_it_works_again() {
    let (mut p, r, t0) = wanting_a_record();
    let mut now = t0;
    let mut waits = Vec::new();
    for _ in 0..8 {
        let w = p.take(now).expect("due");
        assert_eq!(w.verb(), "create");
        p.done(&r.name, Written::Failed, now);
        let due = p.next_due().unwrap();
        waits.push(due - now);
        now = due;
    }
    assert!(waits[0] >= Duration::from_millis(400) && waits[0] <= Duration::from_millis(600));
    assert!(waits.windows(2).take(5).all(|w| w[1] > w[0]), "{waits:?}");
    // At most the longest wait, 30 s, and its jitter.
    let longest = Duration::from_secs(30);
    assert!(
        waits.iter().all(|w| *w <= longest + longest / 5),
        "{waits:?}"
    );
    assert_eq!(p.oldest(now), Some(now - t0));
    // Meanwhile it completed: when kube-apiserver answers again, nothing was ever written, and
    // nothing needs to be.
    p.want(&r.name, Desired::Absent(Some(completed(&r))), now);
    assert!(drain(&mut p, now).is_empty());
    assert!(p.is_empty());
}

#[test]
fn a_conflict_is_resolved_by_reading_again() {
    let t0 = Instant::now();
    let mut p = Pending::new(INTERVAL);
    let r = record("vm");
    p.found(r.name.clone(), copy_of(&r, "7"));
    let m = with_message(&r, "new");
    p.want(&r.name, Desired::Present(m.clone()), t0);
    let w = p.take(t0).unwrap();
    assert!(matches!(&w, Write::Replace(_, c) if c.resource_version == "7"));
    // Someone changed it meanwhile: the copy read again is at 9.
    p.done(&r.name, Written::Reread(Some(copy_of(&r, "9"))), t0);
    let later = t0 + Duration::from_secs(1);
    let w = p.take(later).unwrap();
    assert_eq!(w, Write::Replace(m.clone(), copy_of(&r, "9")));
    // Gone meanwhile: created again.
    p.done(&r.name, Written::Reread(None), later);
    let w = p.take(later + Duration::from_secs(1)).unwrap();
    assert_eq!(w, Write::Create(m));
}

#[test]
fn names_held_by_others_are_left_alone_while_the_operation_lasts() {
    let (mut p, r, t0) = wanting_a_record();
    let w = p.take(t0).unwrap();
    p.done(w.name(), Written::Foreign, t0);
    p.want(&r.name, Desired::Present(completed(&r)), t0);
    assert!(drain(&mut p, t0 + 10 * INTERVAL).is_empty());
    p.want(&r.name, Desired::Absent(None), t0);
    assert!(
        drain(&mut p, t0 + 10 * INTERVAL).is_empty(),
        "theirs is never deleted"
    );
    // A later occurrence under the same name is written again.
    p.want(&r.name, Desired::Present(r.clone()), t0);
    assert_eq!(verbs(&drain(&mut p, t0)), ["create"]);
}

#[test]
fn a_resync_writes_what_is_missing_and_deletes_what_is_left_over() {
    let t0 = Instant::now();
    let mut p = Pending::new(INTERVAL);
    let (kept, stale, missing) = (record("kept"), record("stale"), record("missing"));
    p.found(kept.name.clone(), copy_of(&kept, "1"));
    p.found(stale.name.clone(), copy_of(&stale, "1"));
    p.found(
        "broken".into(),
        Copy {
            record: None,
            uid: "cr-broken".into(),
            resource_version: "1".into(),
        },
    );
    let wall: jiff::Timestamp = "2026-11-23T06:00:00Z".parse().unwrap();
    p.resync(&[kept.clone(), missing.clone()], t0, wall);
    let first = drain(&mut p, t0);
    let mut writes: Vec<(String, &str)> = first
        .iter()
        .map(|w| (w.name().to_owned(), w.verb()))
        .collect();
    writes.sort();
    let mut expected = vec![
        ("broken".to_owned(), "delete"),
        (missing.name.clone(), "create"),
        (stale.name.clone(), "update"),
    ];
    expected.sort();
    assert_eq!(writes, expected, "the copy that matches is not written");
    // The active copy of what the index no longer has shows it ended (how is unknown)…
    let ended = first
        .iter()
        .find_map(|w| match w {
            Write::Replace(r, _) if r.name == stale.name => Some(r.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(ended.phase, Phase::Completed);
    assert_eq!(ended.outcome, Some(Outcome::Unknown));
    assert_eq!(ended.completed, Some(wall));
    // …then goes, an interval later.
    let later = t0 + INTERVAL;
    assert_eq!(verbs(&drain(&mut p, later)), ["delete"]);
}
