//! The durations' unit tests.

use super::*;
use crate::operation::Phase;

fn completed(operation: &str, seconds: i64, outcome: Outcome) -> InFlightOperation {
    let mut op = (*crate::operation::test_record("t")).clone();
    op.operation = operation.to_owned();
    op.phase = Phase::Completed;
    op.outcome = Some(outcome);
    op.completed = Some(op.created + SignedDuration::from_secs(seconds));
    op
}

#[test]
fn quantiles_of_successes_and_counts_of_the_rest() {
    let d = Durations::default();
    for s in 1..=100 {
        d.completed(&completed("Importing", s, Outcome::Succeeded));
    }
    d.completed(&completed("Importing", 5000, Outcome::Failed));
    d.completed(&completed("Importing", 7, Outcome::SubjectDeleted));
    let q = d.quantiles("rs", "Importing").unwrap();
    assert_eq!(q.count, 100);
    let near = |d: SignedDuration, s: f64| (d.as_secs_f64() - s).abs() <= s * 0.01;
    // The median the 50th of 1..=100 s; the bounds the ⌈q·101⌉-th: the 91st and the 100th.
    assert!(near(q.p50, 50.0), "{q:?}");
    assert!(near(q.p90, 91.0), "{q:?}");
    assert!(near(q.p99, 100.0), "{q:?}");
    let published = d.published("rs");
    assert_eq!(published.len(), 1);
    assert_eq!(published[0].other_outcomes["Failed"], 1);
    assert_eq!(published[0].other_outcomes["SubjectDeleted"], 1);
    assert!(d.quantiles("rs", "Other").is_none());
}

#[test]
fn what_is_published_seeds_the_same_quantiles() {
    let d = Durations::default();
    for s in [10, 11, 12, 13, 40] {
        d.completed(&completed("Cloning", s, Outcome::Succeeded));
    }
    d.completed(&completed("Cloning", 3, Outcome::Canceled));
    let published = d.published("rs");
    let restarted = Durations::default();
    restarted.seed("rs", "c", &published);
    assert_eq!(restarted.published("rs"), published);
    // Seeding never overwrites what was learned here.
    let before = d.published("rs");
    d.seed(
        "rs",
        "c",
        &[OperationDurations {
            operation: "Cloning".into(),
            count: 1000,
            p50_seconds: 1.0,
            p90_seconds: 1.0,
            p99_seconds: 1.0,
            other_outcomes: BTreeMap::new(),
            coverage: None,
        }],
    );
    assert_eq!(d.published("rs"), before);
    d.retain("rs", &[]);
    assert!(d.published("rs").is_empty());
}

#[test]
fn seeding_a_large_count_keeps_the_quantiles() {
    let published = OperationDurations {
        operation: "Backup".into(),
        count: 1234,
        p50_seconds: 60.0,
        p90_seconds: 300.0,
        p99_seconds: 1800.0,
        other_outcomes: BTreeMap::new(),
        coverage: None,
    };
    let d = Durations::default();
    d.seed("rs", "c", std::slice::from_ref(&published));
    let q = d.quantiles("rs", "Backup").unwrap();
    assert_eq!(q.count, WINDOW as u64);
    assert_eq!(d.published("rs")[0].count, 1234);
    let near = |d: SignedDuration, s: f64| (d.as_secs_f64() - s).abs() <= s * 0.01;
    assert!(
        near(q.p50, 60.0) && near(q.p90, 300.0) && near(q.p99, 1800.0),
        "{q:?}"
    );
}

/// The quantiles are of the last hundred that succeeded: a rule whose operations became
/// twice as slow has the new median once half the window is new, and nothing of the old
/// ones a window later; the count is of all.
#[test]
fn the_quantiles_follow_the_last_hundred() {
    let secs = SignedDuration::from_secs;
    let d = Durations::default();
    for _ in 0..1000 {
        d.completed(&completed("Cloning", 10, Outcome::Succeeded));
    }
    for _ in 0..50 {
        d.completed(&completed("Cloning", 20, Outcome::Succeeded));
    }
    let q = d.quantiles("rs", "Cloning").unwrap();
    assert_eq!((q.count, q.p50, q.p90), (100, secs(10), secs(20)));
    for _ in 0..50 {
        d.completed(&completed("Cloning", 20, Outcome::Succeeded));
    }
    let q = d.quantiles("rs", "Cloning").unwrap();
    assert_eq!((q.p50, q.p99), (secs(20), secs(20)));
    assert_eq!(d.published("rs")[0].count, 1100);
}

/// An end is judged against the first estimate from history its operation showed, and the
/// figures are published with the durations, read back at start.
#[test]
fn ends_are_judged_against_their_first_estimate_and_published() {
    let d = Durations::default();
    for _ in 0..crate::history::MIN_SAMPLES {
        d.completed(&completed("Cloning", 10, Outcome::Succeeded));
    }
    assert_eq!(d.coverage("rs", "Cloning"), None);
    let mut op = completed("Cloning", 15, Outcome::Succeeded);
    op.phase = Phase::Active;
    op.outcome = None;
    op.completed = None;
    let shown = crate::history::refreshed(&std::sync::Arc::new(op.clone()), &d, op.created)
        .expect("an estimate from history");
    d.shown(&shown);
    d.completed(&completed("Cloning", 15, Outcome::Succeeded));
    let f = d.coverage("rs", "Cloning").unwrap();
    assert_eq!((f.ends, f.p50, f.p90), (1, 0.0, 0.0));
    let published = d.published("rs");
    assert_eq!(
        published[0].coverage,
        Some(crate::ruleset::ObservedCoverage {
            ends: 1,
            p50: 0.0,
            p90: 0.0
        })
    );
    let restarted = Durations::default();
    restarted.seed("rs", "c", &published);
    assert_eq!(restarted.published("rs"), published);
    assert_eq!(d.coverages().len(), 1);
}

/// A Backup of `schedule` (its `velero.io/schedule-name` label, as a label expression sets
/// it) that took `seconds`, in namespace `velero`.
fn backup(name: &str, schedule: &str, seconds: i64) -> InFlightOperation {
    use crate::operation::{test_active, test_subject};
    let subject = test_subject("velero.io/v1", "Backup", Some("velero"), name);
    let mut op = test_active(
        &subject,
        ("velero-backup-rules", "oadp"),
        "InProgress",
        &[("velero.io/schedule-name", schedule)],
    );
    op.phase = Phase::Completed;
    op.outcome = Some(Outcome::Succeeded);
    op.completed = Some(op.created + SignedDuration::from_secs(seconds));
    op
}

#[test]
fn durations_by_a_label_are_kept_under_the_object_it_names() {
    let d = Durations::default();
    let by = BTreeMap::from([(
        "InProgress".to_owned(),
        "velero.io/schedule-name".to_owned(),
    )]);
    d.keyed_by("velero-backup-rules", &by);
    // Each backup is a subject of its own that never repeats; its Schedule does.
    for i in 0..6 {
        d.completed(&backup(&format!("nightly-{i}"), "nightly", 3 * 3600));
        d.completed(&backup(&format!("cleanup-{i}"), "cleanup", 5));
        d.completed(&backup(&format!("cleanup-{i}-again"), "cleanup", 5));
    }
    let p50 = |key: &str| {
        d.own(key, "velero-backup-rules", "InProgress")
            .map(|q| q.p50.as_secs())
    };
    assert_eq!(p50("velero/nightly"), Some(3 * 3600));
    assert_eq!(p50("velero/cleanup"), Some(5));
    // Not under the backups' own uids.
    assert_eq!(p50("uid-nightly-0"), None);
    // A backup in flight takes its Schedule's.
    let mut running = backup("nightly-6", "nightly", 0);
    running.phase = Phase::Active;
    running.outcome = None;
    running.completed = None;
    let expected = d.in_flight(&running).expect("an expectation");
    assert_eq!(expected.p50.as_secs(), 3 * 3600);
    // One of no Schedule (the label empty) is its own subject again, taking the rule's mix.
    let mut alone = running.clone();
    alone.labels.insert("velero.io/schedule-name", "");
    assert!(d.in_flight(&alone).unwrap().p50.as_secs() < 3 * 3600);

    // Once the ruleset's rule no longer has durationsBy, backups are their own subjects again.
    d.keyed_by("velero-backup-rules", &BTreeMap::new());
    d.completed(&backup("nightly-7", "nightly", 60));
    assert_eq!(p50("velero/nightly"), Some(3 * 3600));
    assert!(
        d.own("uid-nightly-7", "velero-backup-rules", "InProgress")
            .is_some()
    );
}
