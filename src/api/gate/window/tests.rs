use super::*;
use crate::operation::assert_says;
use crate::operation::{EstimateBasis, Expectation, InFlightOperation, OVERDUE_BY_HISTORY, Stall};

fn at(s: &str) -> Timestamp {
    format!("2026-11-22T{s}Z").parse().unwrap()
}

/// A verdict as its `Clear` condition's status and reason say, since `since`.
fn clear(status: &str, reason: &str, since: &str) -> Since {
    let verdict = match (status, reason) {
        ("True", _) => Verdict::Clear,
        ("False", _) => Verdict::InFlight,
        (_, "ExistenceUnknown") => Verdict::Unknown(crate::gate::Unknown::Existence),
        _ => Verdict::Unknown(crate::gate::Unknown::Stale),
    };
    Since {
        verdict,
        since: Time(at(since)),
    }
}

fn in_flight() -> Since {
    clear("False", "OperationsInFlight", "10:00:00")
}

/// A VM migration in `demo` expected to end at `end` (p90 `p90`) by `basis`.
/// An operation whose ends come from history: its median end and p90 end (times of the day),
/// and whether it runs past them.
fn from_history(subject: &str, p50: &str, p90: &str, overdue: bool) -> Arc<GateEntry> {
    op(
        subject,
        Some((p50, Some(p90), EstimateBasis::History)),
        overdue,
    )
}

fn op(
    name: &str,
    end: Option<(&str, Option<&str>, EstimateBasis)>,
    overdue: bool,
) -> Arc<GateEntry> {
    let mut op: InFlightOperation = (*crate::operation::test_record(name)).clone();
    op.subject.kind = "VirtualMachine".into();
    op.subject.namespace = Some("demo".into());
    op.operation = "Migrating".into();
    op.expectation = end.map(|(end, p90, basis)| Expectation {
        end: at(end),
        basis,
        p90_end: p90.map(at),
        overdue: overdue.then(|| Stall {
            reason: OVERDUE_BY_HISTORY.into(),
            message: "in flight longer than 1.5 × the 99th percentile (2m)".into(),
            since: at("10:03:00"),
        }),
    });
    Arc::new(GateEntry::new(Arc::new(op)))
}

/// The window the gate serves of `ops` at each confidence, as the index reads their ends.
fn served(condition: &Since, ops: &[Arc<GateEntry>]) -> (GateWindow, GateWindow) {
    let ends = crate::index::ScopeEnds::of_entries(ops);
    windows(condition, ops.len(), &ends, &[])
}

fn start(w: &GateWindow) -> Option<String> {
    w.start.as_ref().map(|t| t.0.to_string())
}

#[test]
fn a_clear_scope_has_its_window_open_since_it_cleared() {
    let (p90, p50) = served(&clear("True", "NothingInFlight", "09:58:00"), &[]);
    for (w, confidence) in [(&p90, "p90"), (&p50, "p50")] {
        assert_eq!(w.confidence, confidence);
        assert_eq!(w.reason, "NothingInFlight");
        assert_eq!(start(w).as_deref(), Some("2026-11-22T09:58:00Z"));
    }
}

#[test]
fn an_unknown_scope_has_no_window_whatever_is_in_flight() {
    for ops in [
        vec![],
        vec![from_history("vm-a", "10:04:00", "10:06:00", false)],
    ] {
        let (p90, p50) = served(&clear("Unknown", "Stale", "10:00:00"), &ops);
        for w in [&p90, &p50] {
            assert_eq!(
                (w.reason.as_str(), w.start.as_ref()),
                ("ScopeUnknown", None)
            );
            assert!(w.message.contains("Unknown (Stale)"), "{}", w.message);
        }
    }
}

#[test]
fn the_window_starts_at_the_latest_end_at_each_confidence() {
    let ops = [
        // Ends last by its median, rounded up to the second.
        from_history("vm-a", "10:05:00.2", "10:06:00", false),
        // Ends last by its p90.
        from_history("vm-b", "10:04:00", "10:09:00", false),
    ];
    let (p90, p50) = served(&in_flight(), &ops);
    assert_eq!(p90.reason, "ExpectedEnds");
    assert_eq!(start(&p90).as_deref(), Some("2026-11-22T10:09:00Z"));
    assert_eq!(
        p90.message,
        "when the last of 2 operations in flight is expected to end, by its p90 end: VirtualMachine demo/vm-b Migrating"
    );
    assert_eq!(start(&p50).as_deref(), Some("2026-11-22T10:05:01Z"));
    assert_says(&p50.message, &["median end: VirtualMachine demo/vm-a"]);
}

#[test]
fn ends_from_progress_or_a_grace_count_at_both_confidences() {
    let ops = [
        op(
            "vm-a",
            Some(("10:07:00", None, EstimateBasis::Progress)),
            false,
        ),
        from_history("vm-b", "10:04:00", "10:05:00", false),
    ];
    let (p90, p50) = served(&in_flight(), &ops);
    assert_eq!(start(&p90).as_deref(), Some("2026-11-22T10:07:00Z"));
    assert_eq!(start(&p50).as_deref(), Some("2026-11-22T10:07:00Z"));
    let mut ending: InFlightOperation = (*op("vm-c", None, false)).clone();
    ending.ending = Some(crate::operation::Ending {
        since: at("10:07:30"),
        at: at("10:08:00"),
    });
    let (p90, _) = served(&in_flight(), &[Arc::new(GateEntry::new(Arc::new(ending)))]);
    assert_eq!(start(&p90).as_deref(), Some("2026-11-22T10:08:00Z"));
}

#[test]
fn an_operation_without_an_end_means_no_promise_and_is_named() {
    let ops = [
        from_history("vm-a", "10:05:00", "10:06:00", false),
        op("vm-new", None, false),
    ];
    let (p90, p50) = served(&in_flight(), &ops);
    for w in [&p90, &p50] {
        assert_eq!(
            (w.reason.as_str(), w.start.as_ref()),
            ("NoExpectedEnd", None)
        );
        assert!(
            w.message
                .contains("VirtualMachine demo/vm-new Migrating has no expected end"),
            "{}",
            w.message
        );
    }
    // A median end without a p90 end: a window at p50 only.
    let ops = [op(
        "vm-a",
        Some(("10:05:00", None, EstimateBasis::History)),
        false,
    )];
    let (p90, p50) = served(&in_flight(), &ops);
    assert_eq!(
        (p90.reason.as_str(), p90.start.as_ref()),
        ("NoExpectedEnd", None)
    );
    assert!(p90.message.contains("no p90 end"), "{}", p90.message);
    assert_eq!(start(&p50).as_deref(), Some("2026-11-22T10:05:00Z"));
}

#[test]
fn an_overdue_operation_means_no_promise_at_either_confidence() {
    let ops = [
        from_history("vm-a", "10:05:00", "10:06:00", false),
        from_history("vm-late", "10:03:00", "10:03:00", true),
    ];
    let (p90, p50) = served(&in_flight(), &ops);
    for w in [&p90, &p50] {
        assert_eq!((w.reason.as_str(), w.start.as_ref()), ("RunningLate", None));
        assert_says(
            &w.message,
            &[
                "VirtualMachine demo/vm-late Migrating runs past",
                "99th percentile",
            ],
        );
    }
}

#[test]
fn ends_round_up_to_the_second() {
    assert_eq!(round_up(at("10:00:00")), at("10:00:00"));
    assert_eq!(round_up(at("10:00:00.001")), at("10:00:01"));
}

/// A CronJob run scheduled at `start` (a time of the day), its rule's median and p90 ends after
/// it when learned.
fn scheduled(start: &str, p50: Option<&str>, p90: Option<&str>) -> GateScheduled {
    GateScheduled {
        subject: ifo_model::GateSubject {
            kind: "CronJob".into(),
            name: "nightly".into(),
            namespace: Some("billing".into()),
        },
        operation: "Running".into(),
        expected_start: Some(Time(at(start))),
        expected_end: p50.map(|t| Time(at(t))),
        expected_end_p90: p90.map(|t| Time(at(t))),
        ..GateScheduled::default()
    }
}

#[test]
fn the_next_scheduled_run_closes_the_window_and_one_in_its_way_pushes_it() {
    // Clear since 09:58, a run at 10:30: open until then.
    let runs = [scheduled("10:30:00", Some("10:35:00"), Some("10:40:00"))];
    let ends = crate::index::ScopeEnds::of_entries(&[]);
    let clear = clear("True", "NothingInFlight", "09:58:00");
    let (p90, _) = windows(&clear, 0, &ends, &runs);
    assert_eq!(p90.reason, "NothingInFlight");
    assert_eq!(start(&p90).as_deref(), Some("2026-11-22T09:58:00Z"));
    assert_eq!(p90.end.as_ref().map(|t| t.0), Some(at("10:30:00")));
    // In flight until 10:31 (p90) or 10:29 (p50): at p90 the run started before, the window
    // opens at its p90 end; at p50 it closes at the run.
    let ops = [from_history("vm-a", "10:29:00", "10:31:00", false)];
    let (p90, p50) = served_among(&in_flight(), &ops, &runs);
    assert_eq!(p90.reason, "AfterScheduled");
    assert_eq!(start(&p90).as_deref(), Some("2026-11-22T10:40:00Z"));
    assert_eq!(p90.end, None);
    assert_says(
        &p90.message,
        &[
            "scheduled CronJob billing/nightly Running (scheduled at 2026-11-22T10:30:00Z)",
            "p90",
        ],
    );
    assert_eq!(p50.reason, "ExpectedEnds");
    assert_eq!(start(&p50).as_deref(), Some("2026-11-22T10:29:00Z"));
    assert_eq!(p50.end.as_ref().map(|t| t.0), Some(at("10:30:00")));
}

#[test]
fn a_scheduled_run_of_unknown_length_in_the_way_promises_nothing() {
    let runs = [scheduled("10:30:00", None, None)];
    let ops = [from_history("vm-a", "10:35:00", "10:40:00", false)];
    let (p90, p50) = served_among(&in_flight(), &ops, &runs);
    for w in [p90, p50] {
        assert_eq!(w.reason, "NoExpectedEnd");
        assert_eq!(w.start, None);
        assert_says(
            &w.message,
            &["no window can be promised", "has not learned how long"],
        );
    }
    // One whose next start is not known: no window at all, though nothing is in flight.
    let unreadable = GateScheduled {
        message: "when it next starts is not known: \"0 25 * * *\" is not a cron schedule".into(),
        expected_start: None,
        ..scheduled("10:30:00", None, None)
    };
    let cleared = clear("True", "NothingInFlight", "09:58:00");
    let ends = crate::index::ScopeEnds::of_entries(&[]);
    let (p90, _) = windows(&cleared, 0, &ends, &[unreadable]);
    assert_eq!(
        (p90.reason.as_str(), p90.start.as_ref()),
        ("ScheduleUnknown", None)
    );
    assert_says(
        &p90.message,
        &[
            "CronJob billing/nightly Running may start at any time",
            "0 25",
        ],
    );
    // Not while the scope is Unknown, whatever is scheduled.
    let unknown = clear("Unknown", "Stale", "09:00:00");
    let ends = crate::index::ScopeEnds::of_entries(&[]);
    let (p90, _) = windows(&unknown, 0, &ends, &runs);
    assert_eq!(p90.reason, "ScopeUnknown");
}

/// [`served`], among `runs`.
fn served_among(
    condition: &Since,
    ops: &[Arc<GateEntry>],
    runs: &[GateScheduled],
) -> (GateWindow, GateWindow) {
    let ends = crate::index::ScopeEnds::of_entries(ops);
    windows(condition, ops.len(), &ends, runs)
}
