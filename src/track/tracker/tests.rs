use std::collections::HashSet;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

use super::*;
use crate::evaluate::{EvalError, Evaluation, RuleResult};
use crate::operation::warned_keys;
use crate::operation::{
    InFlightOperation, LabelSource, Outcome, Phase, RuleSetInfo, Subject, test_ruleset,
};
use crate::track::Change;

const T0: &str = "2026-11-22T10:00:00Z";

fn t(secs: i64) -> Timestamp {
    T0.parse::<Timestamp>().unwrap() + SignedDuration::from_secs(secs)
}

fn settings(debounce: i64, retain: bool) -> Settings {
    Settings {
        debounce: SignedDuration::from_secs(debounce),
        retain_completed: retain,
        completed_retention: SignedDuration::from_mins(15),
        max_completed: 100,
    }
}

fn subject(uid: &str) -> Subject {
    Subject {
        api_version: "kubevirt.io/v1".into(),
        kind: "VirtualMachineInstance".into(),
        name: format!("vm-{uid}"),
        namespace: Some("ns1".into()),
        uid: uid.into(),
        generation: Some(1),
        owner_references: vec![],
    }
}

/// Rulesets the tests evaluate, loaded at no generation (as an object without one would be).
const LOADED: [&str; 5] = ["rs", "keep", "other", "a", "b"];

fn tracker(settings: Settings) -> Tracker {
    let mut tr = Tracker::new(settings);
    for name in LOADED {
        tr.ruleset_loaded(name, None);
    }
    tr
}

fn ruleset(name: &str) -> RuleSetInfo {
    test_ruleset(name, "virt")
}

fn err() -> EvalError {
    EvalError::Execution("no such key".into())
}

fn ops() -> Vec<String> {
    vec!["Migrating".into()]
}

fn eval(rule: RuleResult) -> Evaluation {
    rules(vec![rule])
}

/// An evaluation of `rules` on an object, without labels.
fn rules(rules: Vec<RuleResult>) -> Evaluation {
    Evaluation {
        rules,
        labels: vec![],
        starts: vec![],
        over_budget: None,
    }
}

/// A rule that matches, with no message, start time, progress or stall.
fn on() -> RuleResult {
    RuleResult::active(None, None)
}

fn active(message: Option<&str>) -> Evaluation {
    eval(RuleResult::active(message.map(|m| Ok(m.to_owned())), None))
}

fn inactive(outcome: Option<&str>) -> Evaluation {
    eval(RuleResult::Inactive {
        outcome: outcome.map(|o| Ok(o.to_owned())),
    })
}

fn error() -> Evaluation {
    eval(RuleResult::Error(err()))
}

/// Observes `e` for subject `uid` in ruleset "rs" and returns the changes.
fn see(tr: &mut Tracker, uid: &str, e: Evaluation, now: Timestamp) -> Vec<Change> {
    tr.observe(&ruleset("rs"), &ops(), &subject(uid), &e, now)
        .changes
}

/// What a watcher would see of one change: (U|R, name, phase, outcome).
type Row = (char, String, Phase, Option<Outcome>);

/// U for an upsert, R for a removal.
fn kind(change: &Change) -> char {
    if matches!(change, Change::Upsert(_)) {
        'U'
    } else {
        'R'
    }
}

/// What a watcher would see.
fn summary(changes: &[Change]) -> Vec<Row> {
    changes
        .iter()
        .map(|c| {
            let r = c.record();
            (kind(c), r.name.clone(), r.phase, r.outcome)
        })
        .collect()
}

fn row(kind: char, name: &str, phase: Phase, outcome: Option<Outcome>) -> Row {
    (kind, name.to_owned(), phase, outcome)
}

/// A completed operation's row.
fn finished(kind: char, name: &str, outcome: Outcome) -> Row {
    row(kind, name, Phase::Completed, Some(outcome))
}

/// A completion that is not retained: shown completed with `outcome`, then removed.
fn shown_then_removed(name: &str, outcome: Outcome) -> Vec<Row> {
    vec![finished('U', name, outcome), finished('R', name, outcome)]
}

fn only_upsert(changes: &[Change]) -> Arc<InFlightOperation> {
    match changes {
        [Change::Upsert(r)] => r.clone(),
        other => panic!("expected one Upsert, got {:?}", summary(other)),
    }
}

#[test]
fn completes_after_the_grace_with_its_outcome() {
    let mut tr = tracker(settings(30, false));
    let rec = only_upsert(&see(&mut tr, "u1", active(Some("copying")), t(0)));
    assert_eq!(rec.phase, Phase::Active);
    assert_eq!(rec.created, t(0));
    assert_eq!(rec.message.as_deref(), Some("copying"));
    assert_eq!(tr.active_count("rs"), 1);

    // Stops matching: still Active, but shown as ending, once; nothing else changes during
    // the grace.
    let ending = only_upsert(&see(&mut tr, "u1", inactive(Some("Succeeded")), t(5)));
    assert_eq!(ending.phase, Phase::Active);
    assert_eq!(
        ending.ending,
        Some(Ending {
            since: t(5),
            at: t(35)
        })
    );
    assert_eq!(ending.ending_at(), Some(t(35)));
    assert_eq!(ending.uid, rec.uid);
    assert!(see(&mut tr, "u1", inactive(Some("Succeeded")), t(6)).is_empty());
    assert_eq!(tr.next_deadline(), Some(t(35)));
    assert!(tr.tick(t(34)).is_empty());
    assert_eq!(tr.active_count("rs"), 1);

    let changes = tr.tick(t(35));
    assert_eq!(
        summary(&changes),
        shown_then_removed(&rec.name, Outcome::Succeeded)
    );
    let done = changes[0].record();
    assert_eq!(done.uid, rec.uid);
    assert_eq!(
        done.completed,
        Some(t(5)),
        "completed when it stopped matching"
    );
    assert_eq!(done.last_detected, t(0));
    assert_eq!(done.message.as_deref(), Some("copying"));
    assert_eq!(
        done.ending, None,
        "a completed operation is no longer ending"
    );
    assert_eq!(tr.active_count("rs"), 0);
    assert_eq!(tr.next_deadline(), None);
    assert!(tr.tick(t(10_000)).is_empty());
}

#[test]
fn flapping_within_the_grace_is_one_occurrence() {
    let mut tr = tracker(settings(30, false));
    let rec = only_upsert(&see(&mut tr, "u1", active(None), t(0)));
    let ending = only_upsert(&see(&mut tr, "u1", inactive(None), t(5)));
    assert_eq!(ending.ending_at(), Some(t(35)));
    // Detected again: the same occurrence, no longer ending.
    let back = only_upsert(&see(&mut tr, "u1", active(None), t(10)));
    assert_eq!((back.uid.as_str(), back.ending), (rec.uid.as_str(), None));
    assert_eq!(tr.next_deadline(), None, "grace cancelled");
    assert!(tr.tick(t(100)).is_empty());
    assert_eq!(
        only_upsert(&see(&mut tr, "u1", inactive(None), t(50))).ending_at(),
        Some(t(80))
    );
    let changes = tr.tick(t(80));
    assert_eq!(changes.len(), 2);
    let done = changes[0].record();
    assert_eq!(done.uid, rec.uid);
    assert_eq!(done.created, t(0));
    assert_eq!(done.completed, Some(t(50)));
    assert_eq!(
        done.outcome,
        Some(Outcome::Unknown),
        "no outcome expression"
    );
    assert_eq!(done.last_detected, t(10));
}

#[test]
fn matching_again_drops_the_pending_outcome() {
    let mut tr = tracker(settings(30, false));
    see(&mut tr, "u1", active(None), t(0));
    see(&mut tr, "u1", inactive(Some("Failed")), t(5));
    see(&mut tr, "u1", active(None), t(10));
    // A new stop: its own outcome, not the one of the stop that did not last.
    see(&mut tr, "u1", inactive(Some("Succeeded")), t(20));
    let changes = tr.tick(t(50));
    assert_eq!(changes[0].record().outcome, Some(Outcome::Succeeded));
    assert_eq!(changes[0].record().completed, Some(t(20)));

    // Without an outcome at the new stop, it is unknown: the earlier one is gone too.
    let mut tr = tracker(settings(30, false));
    see(&mut tr, "u1", active(None), t(0));
    see(&mut tr, "u1", inactive(Some("Failed")), t(5));
    see(&mut tr, "u1", active(None), t(10));
    see(&mut tr, "u1", inactive(None), t(20));
    assert_eq!(tr.tick(t(50))[0].record().outcome, Some(Outcome::Unknown));
}

#[test]
fn redetection_after_completion_is_a_new_occurrence() {
    // Retaining: the retained record goes (old uid) before the new one comes.
    let mut tr = tracker(settings(30, true));
    let first = only_upsert(&see(&mut tr, "u1", active(None), t(0)));
    see(&mut tr, "u1", inactive(Some("Failed")), t(1));
    let changes = tr.tick(t(31));
    let completed = only_upsert(&changes);
    assert_eq!(completed.phase, Phase::Completed);
    assert_eq!(tr.retained_count(), 1);

    let changes = see(&mut tr, "u1", active(None), t(40));
    assert_eq!(
        summary(&changes),
        [
            finished('R', &first.name, Outcome::Failed),
            row('U', &first.name, Phase::Active, None),
        ]
    );
    let second = changes[1].record();
    assert_eq!(changes[0].record().uid, first.uid);
    assert_ne!(second.uid, first.uid);
    assert_eq!(second.created, t(40));
    assert_eq!(tr.retained_count(), 0);
    assert_eq!(tr.active_count("rs"), 1);

    // Not retaining: the old record is already gone, the new one just appears.
    let mut tr = tracker(settings(30, false));
    let first = only_upsert(&see(&mut tr, "u1", active(None), t(0)));
    see(&mut tr, "u1", inactive(None), t(1));
    assert_eq!(tr.tick(t(31)).len(), 2);
    let second = only_upsert(&see(&mut tr, "u1", active(None), t(40)));
    assert_eq!(second.name, first.name);
    assert_ne!(second.uid, first.uid);
}

#[test]
fn errors_neither_complete_nor_touch_a_grace() {
    let mut tr = tracker(settings(30, false));
    only_upsert(&see(&mut tr, "u1", active(None), t(0)));
    for s in 1..5 {
        assert!(see(&mut tr, "u1", error(), t(s * 100)).is_empty());
    }
    assert_eq!(tr.active_count("rs"), 1);
    assert_eq!(tr.next_deadline(), None, "an error does not start a grace");

    only_upsert(&see(&mut tr, "u1", inactive(Some("Succeeded")), t(1000)));
    assert!(see(&mut tr, "u1", error(), t(1010)).is_empty());
    assert_eq!(
        tr.next_deadline(),
        Some(t(1030)),
        "an error does not cancel a grace"
    );
    let changes = tr.tick(t(1030));
    assert_eq!(changes[0].record().completed, Some(t(1000)));
    assert_eq!(changes[0].record().outcome, Some(Outcome::Succeeded));

    // An error on a subject with no operation creates nothing.
    assert!(see(&mut tr, "u2", error(), t(2000)).is_empty());
    assert!(see(&mut tr, "u2", inactive(None), t(2000)).is_empty());
}

#[test]
fn the_outcome_is_the_one_at_the_moment_it_stopped_matching() {
    // Outcome expression results at the stop and after it, during the grace (None: no
    // expression, FAILED: it failed).
    type Given<'a> = Option<Result<&'a str, ()>>;
    type Events<'a> = &'a [Given<'a>];
    const FAILED: Given = Some(Err(()));
    let ok = |outcome| Some(Ok(outcome));
    let cases: [(&str, Events, Outcome); 8] = [
        (
            "what the subject does next does not rewrite the result",
            &[ok("Succeeded"), ok("Canceled"), ok("Unknown")],
            Outcome::Succeeded,
        ),
        (
            "a failure stays a failure",
            &[ok("Failed"), ok("Succeeded")],
            Outcome::Failed,
        ),
        (
            "an unknown result is replaced by the first determinate one",
            &[ok("Unknown"), ok("Succeeded"), ok("Failed")],
            Outcome::Succeeded,
        ),
        (
            "no result yet: the first one after the stop",
            &[None, ok("Canceled"), ok("Succeeded")],
            Outcome::Canceled,
        ),
        (
            "a failed expression is no result",
            &[FAILED, ok("Succeeded")],
            Outcome::Succeeded,
        ),
        (
            "an invalid name is no result",
            &[ok("not-an-outcome"), ok("Canceled")],
            Outcome::Canceled,
        ),
        (
            "a later failed expression keeps the result",
            &[ok("Succeeded"), FAILED],
            Outcome::Succeeded,
        ),
        ("never a result", &[FAILED, None], Outcome::Unknown),
    ];
    for (why, events, expected) in cases {
        let mut tr = tracker(settings(30, false));
        see(&mut tr, "u1", active(None), t(0));
        for (i, o) in events.iter().enumerate() {
            let outcome = o.map(|r| r.map(str::to_owned).map_err(|_| err()));
            see(
                &mut tr,
                "u1",
                eval(RuleResult::Inactive { outcome }),
                t(1 + i as i64),
            );
        }
        let changes = tr.tick(t(100));
        assert_eq!(changes[0].record().outcome, Some(expected), "{why}");
        assert_eq!(changes[0].record().completed, Some(t(1)), "{why}");
    }
}

#[test]
fn zero_debounce_completes_at_once() {
    let mut tr = tracker(settings(0, false));
    let rec = only_upsert(&see(&mut tr, "u1", active(None), t(0)));
    let changes = see(&mut tr, "u1", inactive(Some("Superseded")), t(3));
    assert_eq!(
        summary(&changes),
        shown_then_removed(&rec.name, Outcome::Superseded)
    );
    assert_eq!(tr.next_deadline(), None);
}

#[test]
fn retained_records_expire_and_are_bounded() {
    let mut tr = tracker(Settings {
        max_completed: 2,
        ..settings(0, true)
    });
    let mut names = Vec::new();
    for (i, uid) in ["a", "b", "c"].iter().enumerate() {
        names.push(
            only_upsert(&see(&mut tr, uid, active(None), t(0)))
                .name
                .clone(),
        );
        let changes = see(&mut tr, uid, inactive(None), t(10 * i as i64));
        if i < 2 {
            assert_eq!(
                summary(&changes)[..],
                [finished('U', &names[i], Outcome::Unknown)]
            );
        } else {
            // The third retained record pushes out the oldest completion.
            assert_eq!(
                summary(&changes),
                [
                    finished('U', &names[2], Outcome::Unknown),
                    finished('R', &names[0], Outcome::Unknown),
                ]
            );
        }
    }
    assert_eq!(tr.retained_count(), 2);
    // b completed at t(10): retained for 15 minutes from then.
    assert_eq!(tr.next_deadline(), Some(t(10 + 900)));
    assert!(tr.tick(t(909)).is_empty());
    assert_eq!(
        summary(&tr.tick(t(910))),
        [finished('R', &names[1], Outcome::Unknown)]
    );
    assert_eq!(
        summary(&tr.tick(t(2000))),
        [finished('R', &names[2], Outcome::Unknown)]
    );
    assert_eq!(tr.retained_count(), 0);
    assert_eq!(tr.next_deadline(), None);
}

#[test]
fn not_retaining_shows_completed_once_then_deletes() {
    let mut tr = tracker(settings(30, false));
    see(&mut tr, "u1", active(None), t(0));
    see(&mut tr, "u1", inactive(None), t(1));
    let changes = tr.tick(t(31));
    assert!(
        matches!(changes.as_slice(), [Change::Upsert(a), Change::Remove(b)] if Arc::ptr_eq(a, b))
    );
    assert_eq!(tr.retained_count(), 0);
}

/// Two operations of ruleset "rs".
fn two_ops() -> Vec<String> {
    vec!["Migrating".into(), "Restarting".into()]
}

/// A tracker that has detected both of `two_ops` on subject `uid` at 0.
fn both_detected(uid: &str) -> Tracker {
    let mut tr = tracker(settings(30, false));
    let both = rules(vec![on(), on()]);
    let changes = tr.observe(&ruleset("rs"), &two_ops(), &subject(uid), &both, t(0));
    assert_eq!(changes.changes.len(), 2);
    tr
}

#[test]
fn subject_deletion_completes_at_once() {
    let mut tr = both_detected("u1");
    let rs = ruleset("rs");
    see(&mut tr, "u2", active(None), t(0));
    tr.observe(
        &ruleset("other"),
        &ops(),
        &subject("u1"),
        &active(None),
        t(0),
    );
    // One of u1's operations is in its grace, the other still matches.
    let mixed = rules(vec![
        RuleResult::Inactive {
            outcome: Some(Ok("Succeeded".into())),
        },
        on(),
    ]);
    tr.observe(&rs, &two_ops(), &subject("u1"), &mixed, t(5));

    let changes = tr.subject_deleted("rs", "u1", t(10));
    let completed: Vec<_> = changes
        .iter()
        .filter(|c| matches!(c, Change::Upsert(_)))
        .map(|c| {
            (
                c.record().operation.clone(),
                c.record().outcome,
                c.record().completed,
            )
        })
        .collect();
    assert_eq!(
        completed,
        [
            (
                "Migrating".to_owned(),
                Some(Outcome::SubjectDeleted),
                Some(t(10))
            ),
            (
                "Restarting".to_owned(),
                Some(Outcome::SubjectDeleted),
                Some(t(10))
            ),
        ]
    );
    assert_eq!(changes.len(), 4);
    assert_eq!(tr.active_count("rs"), 1, "u2 untouched");
    assert_eq!(tr.active_count("other"), 1, "other ruleset untouched");
    assert_eq!(tr.next_deadline(), None, "the grace went with it");
    assert!(tr.subject_deleted("rs", "u1", t(11)).is_empty());
}

#[test]
fn resync_treats_missing_subjects_as_deleted() {
    let mut tr = tracker(settings(30, false));
    for uid in ["a", "b", "c"] {
        see(&mut tr, uid, active(None), t(0));
    }
    let present: HashSet<String> = ["b".to_owned()].into();
    let changes = tr.resync("rs", None, &present, t(60));
    let gone: Vec<_> = changes
        .iter()
        .filter(|c| matches!(c, Change::Remove(_)))
        .map(|c| (c.record().subject.uid.clone(), c.record().outcome))
        .collect();
    assert_eq!(
        gone,
        [
            ("a".to_owned(), Some(Outcome::SubjectDeleted)),
            ("c".to_owned(), Some(Outcome::SubjectDeleted)),
        ]
    );
    assert_eq!(tr.active_count("rs"), 1);
}

#[test]
fn ruleset_removal_completes_its_operations() {
    let mut tr = tracker(settings(30, true));
    see(&mut tr, "a", active(None), t(0));
    see(&mut tr, "b", active(None), t(0));
    see(&mut tr, "b", inactive(Some("Succeeded")), t(1));
    tr.observe(&ruleset("keep"), &ops(), &subject("a"), &active(None), t(0));
    let changes = tr.ruleset_removed("rs", t(20));
    assert_eq!(changes.len(), 2, "retained, so no Remove");
    for c in &changes {
        assert!(matches!(c, Change::Upsert(_)));
        assert_eq!(c.record().outcome, Some(Outcome::RuleSetRemoved));
        assert_eq!(c.record().completed, Some(t(20)));
    }
    assert_eq!(tr.active_count("rs"), 0);
    assert_eq!(tr.active_count("keep"), 1);
    assert_eq!(tr.retained_count(), 2);
}

#[test]
fn operations_dropped_from_a_ruleset_complete() {
    let mut tr = both_detected("a");
    let changes = tr.retain_operations("rs", &["Migrating".to_owned()], t(5));
    assert_eq!(changes.len(), 2);
    assert_eq!(changes[0].record().operation, "Restarting");
    assert_eq!(changes[0].record().outcome, Some(Outcome::RuleSetRemoved));
    assert_eq!(tr.active_count("rs"), 1);
}

#[test]
fn start_time_comes_from_the_expression() {
    let mut tr = tracker(settings(30, false));
    let an_hour_ago = || eval(RuleResult::active(None, Some(Ok(t(-3600)))));
    let rec = only_upsert(&see(&mut tr, "u1", an_hour_ago(), t(0)));
    assert_eq!(rec.created, t(-3600));
    assert_eq!(rec.last_detected, t(0));
    assert_eq!(
        rec.uid,
        crate::operation::occurrence_uid("u1", "rs", "Migrating", t(-3600))
    );
    // Another replica, seeing the same object later, derives the same identity.
    let mut other = tracker(settings(30, false));
    let rec2 = only_upsert(&see(&mut other, "u1", an_hour_ago(), t(500)));
    assert_eq!(
        (rec2.name.clone(), rec2.uid.clone(), rec2.created),
        (rec.name.clone(), rec.uid.clone(), rec.created)
    );

    let failing = eval(RuleResult::active(None, Some(Err(err()))));
    let rec = only_upsert(&see(&mut tr, "u2", failing, t(7)));
    assert_eq!(rec.created, t(7));
}

#[test]
fn only_visible_changes_are_emitted() {
    let mut tr = tracker(settings(30, false));
    let rec = only_upsert(&see(&mut tr, "u1", active(Some("10%")), t(0)));
    // Same state, later: nothing (lastDetected alone is not worth a MODIFIED).
    assert!(see(&mut tr, "u1", active(Some("10%")), t(5)).is_empty());
    // A failing message expression keeps the last message.
    let failing = eval(RuleResult::active(Some(Err(err())), None));
    assert!(see(&mut tr, "u1", failing, t(6)).is_empty());
    // Message changes: MODIFIED, same occurrence, lastDetected refreshed.
    let upd = only_upsert(&see(&mut tr, "u1", active(Some("50%")), t(10)));
    assert_eq!(upd.message.as_deref(), Some("50%"));
    assert_eq!(
        (upd.uid.clone(), upd.created, upd.last_detected),
        (rec.uid.clone(), rec.created, t(10))
    );
    // Subject generation changes: MODIFIED.
    let mut s = subject("u1");
    s.generation = Some(2);
    let changes = tr
        .observe(&ruleset("rs"), &ops(), &s, &active(Some("50%")), t(20))
        .changes;
    assert_eq!(only_upsert(&changes).subject_generation, Some(2));
    // Message expression removed: MODIFIED without a message.
    assert_eq!(
        only_upsert(&see(&mut tr, "u1", active(None), t(21))).message,
        None
    );
}

#[test]
fn dynamic_labels_update_and_survive_errors() {
    let mut tr = tracker(settings(30, false));
    let rs = ruleset("rs");
    let with_label = |v: Result<&str, EvalError>| Evaluation {
        rules: vec![on()],
        labels: vec![("example.com/node".to_owned(), v.map(str::to_owned))],
        starts: vec![],
        over_budget: None,
    };
    let s = subject("u1");
    let rec = only_upsert(
        &tr.observe(&rs, &ops(), &s, &with_label(Ok("node-a")), t(0))
            .changes,
    );
    assert_eq!(&rec.labels["example.com/node"], "node-a");
    assert!(
        tr.observe(&rs, &ops(), &s, &with_label(Err(err())), t(1))
            .changes
            .is_empty()
    );
    let rec = only_upsert(
        &tr.observe(&rs, &ops(), &s, &with_label(Ok("node/b")), t(2))
            .changes,
    );
    assert_eq!(&rec.labels["example.com/node"], "node-b");
    // A new occurrence whose label expression fails has no such label.
    let rec = only_upsert(
        &tr.observe(&rs, &ops(), &subject("u2"), &with_label(Err(err())), t(3))
            .changes,
    );
    assert!(!rec.labels.contains_key("example.com/node"));
}

#[test]
fn invalid_label_keys_are_reported() {
    let mut tr = tracker(settings(30, false));
    let mut rs = ruleset("rs");
    rs.labels.insert("not a key".into(), "v".into());
    let e = Evaluation {
        rules: vec![on()],
        labels: vec![("bad/key/x".to_owned(), Ok("v".to_owned()))],
        starts: vec![],
        over_budget: None,
    };
    let observed = tr.observe(&rs, &ops(), &subject("u1"), &e, t(0));
    assert_eq!(observed.changes.len(), 1);
    assert_eq!(
        warned_keys(&observed.warnings),
        [
            ("bad/key/x", LabelSource::Expression),
            ("not a key", LabelSource::Static)
        ]
    );
    // Still reported on later events, even when nothing visible changes.
    let observed = tr.observe(&rs, &ops(), &subject("u1"), &e, t(1));
    assert!(observed.changes.is_empty());
    assert_eq!(observed.warnings.len(), 2);
}

#[test]
fn rules_sharing_an_operation() {
    let mut tr = tracker(settings(30, false));
    let rs = ruleset("rs");
    let two: Vec<String> = vec!["Migrating".into(), "Migrating".into()];
    let ev = |a: RuleResult, b: RuleResult| rules(vec![a, b]);
    let off = || RuleResult::Inactive { outcome: None };
    let s = subject("u1");
    assert_eq!(
        tr.observe(&rs, &two, &s, &ev(off(), on()), t(0))
            .changes
            .len(),
        1
    );
    // One rule still matches: no grace.
    tr.observe(&rs, &two, &s, &ev(on(), off()), t(1));
    assert_eq!(tr.next_deadline(), None);
    // One errors and none matches: unknown, no grace.
    tr.observe(&rs, &two, &s, &ev(RuleResult::Error(err()), off()), t(2));
    assert_eq!(tr.next_deadline(), None);
    tr.observe(&rs, &two, &s, &ev(off(), off()), t(3));
    assert_eq!(tr.next_deadline(), Some(t(33)));
}

#[test]
fn one_record_per_ruleset_and_operation() {
    let mut tr = tracker(settings(30, false));
    let s = subject("u1");
    let a = only_upsert(
        &tr.observe(&ruleset("a"), &ops(), &s, &active(None), t(0))
            .changes,
    );
    let b = only_upsert(
        &tr.observe(&ruleset("b"), &ops(), &s, &active(None), t(0))
            .changes,
    );
    assert_ne!(a.name, b.name);
    assert_ne!(a.uid, b.uid);
    assert_eq!(a.detected_by, ["a"]);
    assert_eq!(b.detected_by, ["b"]);
}

#[test]
fn results_do_not_depend_on_tick_timing() {
    // The caller ticks late: a re-detection after the grace ran out is still a new occurrence.
    let mut tr = tracker(settings(30, false));
    let first = only_upsert(&see(&mut tr, "u1", active(None), t(0)));
    see(&mut tr, "u1", inactive(Some("Succeeded")), t(1));
    let changes = see(&mut tr, "u1", active(None), t(40));
    assert_eq!(
        summary(&changes),
        [
            shown_then_removed(&first.name, Outcome::Succeeded),
            vec![row('U', &first.name, Phase::Active, None)],
        ]
        .concat()
    );
    assert_ne!(changes[2].record().uid, first.uid);
}

fn at_generation(name: &str, generation: i64) -> RuleSetInfo {
    ruleset(name).at_generation(generation)
}

#[test]
fn evaluations_by_a_ruleset_that_is_not_loaded_change_nothing() {
    let mut tr = Tracker::new(settings(30, false));
    let observed = tr.observe(&ruleset("rs"), &ops(), &subject("u1"), &active(None), t(0));
    assert!(observed.changes.is_empty());
    assert_eq!(tr.active_count("rs"), 0);
}

#[test]
fn a_removed_ruleset_cannot_bring_its_operations_back() {
    // A watcher still evaluating a deleted ruleset's rules must not restart what the deletion
    // ended: the operation would stay Active for good (nothing evaluates it any more).
    let mut tr = tracker(settings(30, false));
    assert_eq!(see(&mut tr, "u1", active(None), t(0)).len(), 1);
    let removed = tr.ruleset_removed("rs", t(1));
    assert!(
        matches!(&removed[..], [Change::Upsert(c), Change::Remove(_)] if c.outcome == Some(Outcome::RuleSetRemoved))
    );
    assert!(see(&mut tr, "u1", active(None), t(2)).is_empty());
    assert!(tr.subject_deleted("rs", "u1", t(2)).is_empty());
    assert_eq!(tr.active_count("rs"), 0);
    // Loaded again (re-created), it detects as before.
    tr.ruleset_loaded("rs", None);
    assert_eq!(see(&mut tr, "u1", active(None), t(3)).len(), 1);
    assert_eq!(tr.active_count("rs"), 1);
}

#[test]
fn evaluations_by_an_older_generation_change_nothing() {
    let mut tr = Tracker::new(settings(30, false));
    tr.ruleset_loaded("rs", Some(2));
    let mut observe = |generation: i64, e: Evaluation, at: Timestamp| {
        tr.observe(
            &at_generation("rs", generation),
            &ops(),
            &subject("u1"),
            &e,
            at,
        )
        .changes
    };
    assert!(observe(1, active(None), t(0)).is_empty());
    assert_eq!(observe(2, active(None), t(0)).len(), 1);
    // The old generation cannot end it either.
    assert!(observe(1, inactive(None), t(1)).is_empty());
    assert!(!tr.accepts(&at_generation("rs", 1)));
    assert_eq!(tr.next_deadline(), None);
    assert_eq!(tr.active_count("rs"), 1);
}

#[test]
fn a_namespace_relist_only_judges_subjects_of_that_namespace() {
    // One namespace stream relisted; subjects in the others are not in its list, and must not
    // be taken for deleted.
    let mut tr = tracker(settings(30, false));
    let in_ns2 = Subject {
        namespace: Some("ns2".into()),
        ..subject("other-ns")
    };
    see(&mut tr, "a", active(None), t(0));
    see(&mut tr, "b", active(None), t(0));
    tr.observe(&ruleset("rs"), &ops(), &in_ns2, &active(None), t(0));
    let present: HashSet<String> = ["a".to_owned()].into();
    let changes = tr.resync("rs", Some("ns1"), &present, t(10));
    let gone: Vec<_> = changes
        .iter()
        .filter(|c| matches!(c, Change::Remove(_)))
        .map(|c| c.record().subject.uid.clone())
        .collect();
    assert_eq!(gone, ["b"]);
    assert_eq!(tr.active_count("rs"), 2);
    // The whole target relisted (one stream for every namespace): everything is judged.
    let changes = tr.resync("rs", None, &present, t(11));
    assert_eq!(changes.len(), 2, "other-ns completes and goes");
    assert_eq!(tr.active_count("rs"), 1);
}

/// The record a first detection at `at` makes, as a persisted copy would hold it.
fn persisted(uid: &str, at: Timestamp) -> Arc<InFlightOperation> {
    let mut tr = tracker(settings(30, false));
    let changes = see(&mut tr, uid, active(Some("copying")), at);
    changes[0].record().clone()
}

#[test]
fn a_restored_operation_that_still_matches_keeps_its_identity() {
    let before = persisted("a", t(0));
    let mut tr = tracker(settings(30, false));
    assert!(tr.restore(before.clone()));
    assert_eq!(tr.active_count("rs"), 1);
    // Evaluated again after the restart, still migrating, with a new message.
    let changes = see(&mut tr, "a", active(Some("almost done")), t(100));
    let after = changes[0].record();
    assert_eq!(
        (&after.name, &after.uid, after.created),
        (&before.name, &before.uid, before.created)
    );
    assert_eq!(after.message.as_deref(), Some("almost done"));
    // Confirmed: the sweep leaves it alone, and it ends through the grace as usual.
    assert!(tr.sweep_restored(t(101)).is_empty());
    assert_eq!(
        only_upsert(&see(&mut tr, "a", inactive(None), t(110))).ending_at(),
        Some(t(140))
    );
    let ended = summary(&tr.tick(t(140)));
    assert_eq!(ended[0].2, Phase::Completed);
}

#[test]
fn a_restored_operation_that_ended_while_down_completes_at_once() {
    let mut tr = tracker(settings(30, false));
    assert!(tr.restore(persisted("a", t(0))));
    let changes = see(&mut tr, "a", inactive(None), t(100));
    assert_eq!(
        summary(&changes),
        shown_then_removed(&changes[0].record().name, Outcome::Unknown)
    );
    assert_eq!(changes[0].record().completed, Some(t(100)));
    // With an outcome the object reports, that outcome.
    let mut tr = tracker(settings(30, false));
    assert!(tr.restore(persisted("b", t(0))));
    let changes = see(&mut tr, "b", inactive(Some("Failed")), t(100));
    assert_eq!(changes[0].record().outcome, Some(Outcome::Failed));
    assert_eq!(tr.active_count("rs"), 0);
}

#[test]
fn restored_operations_nobody_confirmed_are_swept_and_duplicates_refused() {
    let mut tr = tracker(settings(30, false));
    let record = persisted("a", t(0));
    assert!(tr.restore(record.clone()));
    assert!(
        !tr.restore(record.clone()),
        "a second copy of one operation"
    );
    let mut orphan = (*persisted("b", t(0))).clone();
    orphan.ruleset = "deleted-meanwhile".into();
    orphan.name = "orphan".into();
    assert!(tr.restore(Arc::new(orphan)));
    let swept = tr.sweep_restored(t(100));
    assert_eq!(
        summary(&swept),
        [
            shown_then_removed("orphan", Outcome::RuleSetRemoved),
            shown_then_removed(&record.name, Outcome::Unknown),
        ]
        .concat()
    );
    assert_eq!(tr.active_count("rs"), 0);
}

#[test]
fn a_new_leader_adopts_the_identity_its_predecessor_persisted() {
    // The previous leader saw the operation start at 0, this replica at 1.
    let copy = persisted("a", t(0));
    let mut tr = tracker(settings(30, false));
    let own = only_upsert(&see(&mut tr, "a", active(Some("copying")), t(1)));
    assert_eq!(own.name, copy.name);
    assert_ne!(own.uid, copy.uid);
    let adopted = tr.adopt(&copy).expect("the identity changes");
    let adopted = adopted.record();
    assert_eq!(
        (&adopted.name, &adopted.uid, adopted.created),
        (&copy.name, &copy.uid, copy.created)
    );
    assert_eq!(adopted.last_detected, own.last_detected);
    assert!(tr.adopt(&copy).is_none(), "already the same");
    // It goes on as that occurrence: the next evaluation keeps it, the grace completes it.
    let next = only_upsert(&see(&mut tr, "a", active(Some("almost")), t(2)));
    assert_eq!((&next.uid, next.created), (&copy.uid, copy.created));
    see(&mut tr, "a", inactive(None), t(3));
    let ended = tr.tick(t(33));
    assert_eq!(ended[0].record().uid, copy.uid);
    assert_eq!(ended[0].record().phase, Phase::Completed);

    // Nothing to adopt: a completed copy, or a slot with no active operation here.
    let mut tr = tracker(settings(30, false));
    assert!(tr.adopt(&copy).is_none());
    see(&mut tr, "a", active(None), t(1));
    let mut completed = (*copy).clone();
    completed.phase = Phase::Completed;
    assert!(tr.adopt(&completed).is_none());
}

#[test]
fn restored_completed_operations_are_retained_only_when_retention_is_on() {
    let mut completed = (*persisted("a", t(0))).clone();
    completed.phase = Phase::Completed;
    completed.outcome = Some(Outcome::Succeeded);
    completed.completed = Some(t(10));
    let completed = Arc::new(completed);
    let mut tr = tracker(settings(30, false));
    assert!(!tr.restore(completed.clone()));
    let mut tr = tracker(settings(30, true));
    assert!(tr.restore(completed.clone()));
    assert_eq!(tr.retained_count(), 1);
    assert!(tr.sweep_restored(t(20)).is_empty());
    // Gone when its retention (15 minutes from its completion) ends.
    let gone = tr.tick(t(10 + 15 * 60));
    assert_eq!(
        summary(&gone),
        vec![finished('R', &completed.name, Outcome::Succeeded)]
    );
}

#[test]
fn progress_and_stall_follow_the_rule_and_survive_its_errors() {
    let mut tr = tracker(settings(30, false));
    let live = |progress: Option<Result<Option<f64>, EvalError>>,
                stalled: Option<Result<Option<String>, EvalError>>| {
        eval(RuleResult::Active {
            message: None,
            start_time: None,
            progress,
            stalled,
        })
    };
    let record = |changes: Vec<Change>| changes.last().unwrap().record().clone();
    let first = record(see(
        &mut tr,
        "u1",
        live(Some(Ok(Some(10.0))), Some(Ok(None))),
        t(0),
    ));
    assert_eq!((first.progress(), first.stall()), (Some(10.0), None));

    let stalled = live(Some(Ok(Some(20.0))), Some(Ok(Some("ImportFailed".into()))));
    let second = record(see(&mut tr, "u1", stalled.clone(), t(5)));
    assert_eq!(second.progress(), Some(20.0));
    let stall = second.stall().unwrap();
    assert_eq!((stall.reason.as_str(), stall.since), ("ImportFailed", t(5)));
    // The same verdict later changes nothing: the stall keeps its start.
    assert!(see(&mut tr, "u1", stalled, t(9)).is_empty());

    // Failing expressions: the last known values stay, nothing changes.
    assert!(
        see(
            &mut tr,
            "u1",
            live(Some(Err(err())), Some(Err(err()))),
            t(12)
        )
        .is_empty()
    );

    // Not stalled, and no progress reported any more.
    let third = record(see(
        &mut tr,
        "u1",
        live(Some(Ok(None)), Some(Ok(None))),
        t(15),
    ));
    assert_eq!((third.progress(), third.stall()), (None, None));
}

/// The operations of a VM ruleset that follows `printableStatus`, in rule order.
const VM_OPS: [&str; 3] = ["Starting", "Migrating", "Stopping"];

/// An evaluation of a VM whose `printableStatus` is `status`, by rules like the shipped ones:
/// `Starting` reports `Succeeded` once running and `Canceled` once stopping, `Stopping` reports
/// `Succeeded` once stopped, `Migrating` has no outcome expression.
fn vm(status: &str) -> Evaluation {
    let outcome = |op: &str| match (op, status) {
        ("Starting", "Running") | ("Stopping", "Stopped") => Some(Ok("Succeeded".to_owned())),
        ("Starting", "Stopping" | "Stopped") => Some(Ok("Canceled".to_owned())),
        ("Starting" | "Stopping", _) => Some(Ok("Unknown".to_owned())),
        _ => None,
    };
    Evaluation {
        rules: VM_OPS
            .iter()
            .map(|op| {
                if *op == status {
                    on()
                } else {
                    RuleResult::Inactive {
                        outcome: outcome(op),
                    }
                }
            })
            .collect(),
        labels: vec![],
        starts: vec![],
        over_budget: None,
    }
}

fn vm_ruleset(exclusive: bool) -> RuleSetInfo {
    ruleset("rs").exclusive(exclusive)
}

/// Moves the VM to `status` at `at`; returns what a watcher sees: (U|R, operation, phase,
/// outcome, ending).
fn move_vm(
    tr: &mut Tracker,
    exclusive: bool,
    status: &str,
    at: Timestamp,
) -> Vec<(char, String, Phase, Option<Outcome>, bool)> {
    let ops: Vec<String> = VM_OPS.iter().map(|s| s.to_string()).collect();
    let changes = tr
        .observe(
            &vm_ruleset(exclusive),
            &ops,
            &subject("u1"),
            &vm(status),
            at,
        )
        .changes;
    operations(&changes)
}

fn operations(changes: &[Change]) -> Vec<(char, String, Phase, Option<Outcome>, bool)> {
    changes
        .iter()
        .map(|c| {
            let r = c.record();
            (
                kind(c),
                r.operation.clone(),
                r.phase,
                r.outcome,
                r.ending.is_some(),
            )
        })
        .collect()
}

fn op(
    kind: char,
    operation: &str,
    phase: Phase,
    outcome: Option<Outcome>,
    ending: bool,
) -> (char, String, Phase, Option<Outcome>, bool) {
    (kind, operation.to_owned(), phase, outcome, ending)
}

#[test]
fn a_subject_moving_on_during_the_grace_keeps_each_outcome() {
    use Phase::Active;
    let mut tr = tracker(settings(30, false));
    // Starting → Running → Migrating → Running → Stopping → Stopped, all within one grace.
    move_vm(&mut tr, false, "Starting", t(0));
    assert_eq!(
        move_vm(&mut tr, false, "Running", t(5)),
        [op('U', "Starting", Active, None, true)]
    );
    move_vm(&mut tr, false, "Migrating", t(10));
    move_vm(&mut tr, false, "Running", t(20));
    move_vm(&mut tr, false, "Stopping", t(25));
    move_vm(&mut tr, false, "Stopped", t(30));
    let mut completed: Vec<_> = [35, 50, 60]
        .into_iter()
        .flat_map(|at| tr.tick(t(at)))
        .filter(|c| matches!(c, Change::Upsert(_)))
        .map(|c| {
            let r = c.record().clone();
            (r.operation.clone(), r.outcome, r.completed)
        })
        .collect();
    completed.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        completed,
        [
            ("Migrating".to_owned(), Some(Outcome::Unknown), Some(t(20))),
            ("Starting".to_owned(), Some(Outcome::Succeeded), Some(t(5))),
            ("Stopping".to_owned(), Some(Outcome::Succeeded), Some(t(30))),
        ]
    );
}

#[test]
fn in_an_exclusive_ruleset_the_next_operation_ends_the_previous_at_once() {
    use Outcome::{Succeeded, Superseded, Unknown};
    use Phase::{Active, Completed};
    let mut tr = tracker(settings(30, false));
    assert_eq!(
        move_vm(&mut tr, true, "Starting", t(0)),
        [op('U', "Starting", Active, None, false)]
    );
    // Running matches no rule: Starting is ending, with the outcome of this moment.
    assert_eq!(
        move_vm(&mut tr, true, "Running", t(5)),
        [op('U', "Starting", Active, None, true)]
    );
    // Migrating starts: Starting completes now, as it ended (Succeeded, at 5), before the new
    // operation is shown.
    let changes = tr
        .observe(
            &vm_ruleset(true),
            &VM_OPS.map(String::from),
            &subject("u1"),
            &vm("Migrating"),
            t(10),
        )
        .changes;
    assert_eq!(
        operations(&changes),
        [
            op('U', "Starting", Completed, Some(Succeeded), false),
            op('R', "Starting", Completed, Some(Succeeded), false),
            op('U', "Migrating", Active, None, false),
        ]
    );
    assert_eq!(changes[0].record().completed, Some(t(5)));
    // Straight from Migrating to Stopping: Migrating completes at once, with no grace shown,
    // cut short by the stop (its outcome expression does not say): Superseded.
    assert_eq!(
        move_vm(&mut tr, true, "Stopping", t(20)),
        [
            op('U', "Migrating", Completed, Some(Superseded), false),
            op('R', "Migrating", Completed, Some(Superseded), false),
            op('U', "Stopping", Active, None, false),
        ]
    );
    assert_eq!(tr.active_count("rs"), 1);
    // Stopping again while still stopping changes nothing.
    assert!(move_vm(&mut tr, true, "Stopping", t(21)).is_empty());
    // Stopping → Starting without a stop in between: Stopping is superseded (its outcome
    // expression says Unknown on a starting VM).
    assert_eq!(
        move_vm(&mut tr, true, "Starting", t(22)),
        [
            op('U', "Stopping", Completed, Some(Superseded), false),
            op('R', "Stopping", Completed, Some(Superseded), false),
            op('U', "Starting", Active, None, false),
        ]
    );
    assert_eq!(tr.next_deadline(), None, "no grace left running");
    // Starting stops matching, its outcome unknown, and only later does Migrating start: it had
    // ended before the next began, so it is not superseded.
    assert_eq!(
        move_vm(&mut tr, true, "Paused", t(40)),
        [op('U', "Starting", Active, None, true)]
    );
    assert_eq!(
        move_vm(&mut tr, true, "Migrating", t(45)),
        [
            op('U', "Starting", Completed, Some(Unknown), false),
            op('R', "Starting", Completed, Some(Unknown), false),
            op('U', "Migrating", Active, None, false),
        ]
    );

    // Without exclusive, the previous operation keeps its grace.
    let mut tr = tracker(settings(30, false));
    move_vm(&mut tr, false, "Starting", t(0));
    assert_eq!(
        move_vm(&mut tr, false, "Stopping", t(5)),
        [
            op('U', "Starting", Active, None, true),
            op('U', "Stopping", Active, None, false),
        ]
    );
    assert_eq!(tr.active_count("rs"), 2);
}

#[test]
fn in_an_exclusive_ruleset_overlapping_rules_and_errors() {
    let ops: Vec<String> = VM_OPS.iter().map(|s| s.to_string()).collect();
    let off = || RuleResult::Inactive { outcome: None };
    let rs = vm_ruleset(true);
    let mut tr = tracker(settings(30, false));
    let observe = |tr: &mut Tracker, uid: &str, results: Vec<RuleResult>, at: Timestamp| {
        tr.observe(&rs, &ops, &subject(uid), &rules(results), at)
            .changes
    };
    observe(&mut tr, "u1", vec![on(), off(), off()], t(0));
    // Two rules match at once: the one still matching is not ended (it would only start
    // again at the next event).
    let changes = observe(&mut tr, "u1", vec![on(), on(), off()], t(1));
    assert_eq!(summary(&changes).len(), 1);
    assert_eq!(changes[0].record().operation, "Migrating");
    assert_eq!(tr.active_count("rs"), 2);
    // A rule that fails to evaluate as another starts: its operation ends, Unknown.
    let changes = observe(
        &mut tr,
        "u1",
        vec![RuleResult::Error(err()), off(), on()],
        t(2),
    );
    let ended: Vec<_> = changes
        .iter()
        .filter(|c| c.record().phase == Phase::Completed && matches!(c, Change::Upsert(_)))
        .map(|c| (c.record().operation.clone(), c.record().outcome))
        .collect();
    // Migrating stopped matching at this same event (its outcome unknown) and ends too, cut
    // short by the next: Superseded.
    assert_eq!(
        ended,
        [
            ("Migrating".to_owned(), Some(Outcome::Superseded)),
            ("Starting".to_owned(), Some(Outcome::Unknown))
        ]
    );
    assert_eq!(tr.active_count("rs"), 1);
    // Another subject is not affected.
    observe(&mut tr, "u2", vec![on(), off(), off()], t(3));
    observe(&mut tr, "u1", vec![on(), off(), off()], t(4));
    assert_eq!(tr.active_count("rs"), 2);
}
