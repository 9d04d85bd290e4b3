use super::*;
use serde_json::{Value, json};

fn now() -> Timestamp {
    "2026-11-22T10:00:00Z".parse().unwrap()
}

fn twenty_minutes() -> SignedDuration {
    SignedDuration::from_mins(20)
}

/// A gate `name` whose `Clear` is `clear`, with `active` operations and these windows.
fn gate(name: &str, clear: &str, active: u64, p90: Value, p50: Value) -> MaintenanceGate {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "status": {
            "conditions": [{"type": "Clear", "status": clear, "reason": "r", "message": "m",
                            "lastTransitionTime": "2026-11-22T09:50:00Z"}],
            "activeOperations": active,
            "nextWindow": p90,
            "nextWindowP50": p50,
        }
    }))
    .unwrap()
}

/// What `plan --for 20m` answers of `g` at `confidence`, now.
fn answered(g: &MaintenanceGate, confidence: Confidence) -> Answer {
    answer(g, twenty_minutes(), confidence, now()).unwrap()
}

/// [`gate`] whose two windows say the same.
fn gate_alike(
    name: &str,
    clear: &str,
    active: u64,
    start: Option<&str>,
    reason: &str,
    message: &str,
) -> MaintenanceGate {
    let p90 = window("p90", start, reason, message);
    let p50 = window("p50", start, reason, message);
    gate(name, clear, active, p90, p50)
}

fn window(confidence: &str, start: Option<&str>, reason: &str, message: &str) -> Value {
    let mut w = json!({"confidence": confidence, "reason": reason, "message": message});
    if let Some(s) = start {
        w["start"] = json!(s);
    }
    w
}

#[test]
fn a_window_at_the_expected_end_is_promised_at_the_confidence_asked() {
    let g = gate(
        "node.worker-1",
        "False",
        2,
        window(
            "p90",
            Some("2026-11-22T10:09:00Z"),
            "ExpectedEnds",
            "when the last of 2 operations in flight is expected to end, by its p90 end: VirtualMachine vms/web Migrating",
        ),
        window(
            "p50",
            Some("2026-11-22T10:04:00Z"),
            "ExpectedEnds",
            "by its median end",
        ),
    );
    let a = answered(&g, Confidence::P90);
    assert_eq!(a.promise, Promise::Window);
    assert_eq!(a.start, Some("2026-11-22T10:09:00Z".parse().unwrap()));
    assert_eq!(
        a.text,
        "Expected clear on node worker-1 for 20m from 2026-11-22T10:09:00Z (in 9m, p90): when the last of 2 operations in flight is expected to end, by its p90 end: VirtualMachine vms/web Migrating"
    );
    let a = answered(&g, Confidence::P50);
    assert_eq!(a.start, Some("2026-11-22T10:04:00Z".parse().unwrap()));
    assert!(a.text.contains("(in 4m, p50)"), "{}", a.text);
}

#[test]
fn a_clear_scope_is_clear_now() {
    let g = gate_alike(
        "component.kubevirt",
        "True",
        0,
        Some("2026-11-22T09:50:00Z"),
        "NothingInFlight",
        "nothing in flight",
    );
    let a = answered(&g, Confidence::P90);
    assert_eq!(a.promise, Promise::Window);
    assert_eq!(
        a.text,
        "Clear now for component kubevirt for 20m and on (p90): nothing in flight since 2026-11-22T09:50:00Z, and no operation is known to start"
    );
}

#[test]
fn no_promise_for_an_unknown_scope_an_operation_without_end_or_a_late_one() {
    let unknown = gate_alike(
        "cluster",
        "Unknown",
        0,
        None,
        "ScopeUnknown",
        "no window while the scope is Unknown (Stale)",
    );
    let a = answered(&unknown, Confidence::P90);
    assert_eq!((a.promise, a.start), (Promise::Unknown, None));
    assert!(
        a.text
            .starts_with("No window of 20m can be promised in the cluster (p90)"),
        "{}",
        a.text
    );

    let missing = gate(
        "namespace.vms",
        "False",
        1,
        window(
            "p90",
            None,
            "NoExpectedEnd",
            "no window can be promised: VirtualMachine vms/web Migrating has no expected end",
        ),
        window("p50", None, "NoExpectedEnd", "same"),
    );
    let a = answered(&missing, Confidence::P90);
    assert_eq!(
        (a.promise, a.reason.as_str()),
        (Promise::NoWindow, "NoExpectedEnd")
    );
    assert!(
        a.text.contains("in namespace vms") && a.text.contains("vms/web"),
        "{}",
        a.text
    );

    // A start that has passed while operations are in flight: running late, no promise.
    let passed = gate(
        "node.w1",
        "False",
        3,
        window("p90", Some("2026-11-22T09:59:00Z"), "ExpectedEnds", "m"),
        window("p50", Some("2026-11-22T09:58:00Z"), "ExpectedEnds", "m"),
    );
    let a = answered(&passed, Confidence::P90);
    assert_eq!(
        (a.promise, a.reason.as_str()),
        (Promise::NoWindow, "RunningLate")
    );
    assert!(
        a.text.contains("the last expected end (2026-11-22T09:59:00Z) has passed while 3 operations are still in flight"),
        "{}",
        a.text
    );
}

#[test]
fn a_server_without_windows_is_an_error_and_names_are_sanitised() {
    let mut old = gate("node.w1", "False", 1, Value::Null, Value::Null);
    old.status.next_window = None;
    assert!(answer(&old, twenty_minutes(), Confidence::P90, now()).is_err());
    let g = gate(
        "node.w1",
        "False",
        1,
        window(
            "p90",
            None,
            "NoExpectedEnd",
            "VirtualMachine vms/\u{1b}]0;pwned\u{7}web has no expected end",
        ),
        Value::Null,
    );
    let a = answered(&g, Confidence::P90);
    assert!(
        !a.text.contains('\u{1b}') && !a.text.contains('\u{7}'),
        "{:?}",
        a.text
    );
}

/// A clear cluster gate (since 09:50) whose windows the server found among `scheduled`.
fn with_scheduled(scheduled: Value) -> MaintenanceGate {
    let mut g = gate_alike(
        "cluster",
        "True",
        0,
        Some("2026-11-22T09:50:00Z"),
        "NothingInFlight",
        "nothing in flight: clear since the window started",
    );
    g.status.scheduled = serde_json::from_value(scheduled).unwrap();
    g.status.scheduled_through = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-11-23T10:00:00Z".parse().unwrap(),
    ));
    g
}

fn nightly(start: &str, end: Option<&str>, p90: Option<&str>) -> Value {
    let mut s = json!({
        "subject": {"kind": "CronJob", "name": "nightly", "namespace": "billing"},
        "operation": "Running", "component": "kubernetes", "ruleSet": "cronjob-rules",
        "expectedStart": start, "schedule": "*/30 * * * *", "timeZone": "UTC",
    });
    if let Some(e) = end {
        s["expectedEnd"] = json!(e);
    }
    if let Some(e) = p90 {
        s["expectedEndP90"] = json!(e);
    }
    s
}

#[test]
fn a_scheduled_run_closes_the_window_and_a_longer_one_waits_past_it() {
    let g = with_scheduled(json!([
        nightly(
            "2026-11-22T10:30:00Z",
            Some("2026-11-22T10:35:00Z"),
            Some("2026-11-22T10:40:00Z")
        ),
        nightly(
            "2026-11-22T11:00:00Z",
            Some("2026-11-22T11:05:00Z"),
            Some("2026-11-22T11:10:00Z")
        ),
    ]));
    // 20 minutes fit before 10:30, from now (10:00), not from when the cluster cleared.
    let a = answered(&g, Confidence::P90);
    assert_eq!(a.promise, Promise::Window);
    assert_eq!(a.start, Some(now()));
    assert_eq!(a.end, Some("2026-11-22T10:30:00Z".parse().unwrap()));
    assert_eq!(
        a.text,
        "Clear now in the cluster for 20m (p90): nothing in flight since 2026-11-22T09:50:00Z; until 2026-11-22T10:30:00Z (when scheduled CronJob billing/nightly Running (at 2026-11-22T10:30:00Z) starts)"
    );
    // An hour does not: after the last run's p90 end, with no end known.
    let a = answer(&g, SignedDuration::from_hours(1), Confidence::P90, now()).unwrap();
    assert_eq!(a.promise, Promise::Window);
    assert_eq!(a.reason, "AfterScheduled");
    assert_eq!(a.start, Some("2026-11-22T11:10:00Z".parse().unwrap()));
    assert_eq!(a.end, None);
    // At p50, after the last run's median end.
    let a = answer(&g, SignedDuration::from_hours(1), Confidence::P50, now()).unwrap();
    assert_eq!(a.start, Some("2026-11-22T11:05:00Z".parse().unwrap()));
    // 31 minutes fit in neither gap (30 minutes from now, 25 at p50).
    let a = answer(&g, SignedDuration::from_mins(31), Confidence::P50, now()).unwrap();
    assert_eq!(a.start, Some("2026-11-22T11:05:00Z".parse().unwrap()));
}

/// Clear since an hour ago, a run in 5 minutes: 20 minutes are not there now, whatever the
/// hour behind says; the window is after the run.
#[test]
fn time_already_gone_is_not_promised() {
    let mut g = with_scheduled(json!([nightly(
        "2026-11-22T10:05:00Z",
        Some("2026-11-22T10:10:00Z"),
        Some("2026-11-22T10:12:00Z")
    )]));
    g.status.next_window.as_mut().unwrap().start =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-11-22T09:00:00Z".parse().unwrap(),
        ));
    let a = answered(&g, Confidence::P90);
    assert_eq!(a.promise, Promise::Window);
    assert_eq!(a.reason, "AfterScheduled");
    assert_eq!(a.start, Some("2026-11-22T10:12:00Z".parse().unwrap()));
    // Five minutes do fit, now.
    let a = answer(&g, SignedDuration::from_mins(5), Confidence::P90, now()).unwrap();
    assert_eq!(a.start, Some(now()));
    assert_eq!(a.end, Some("2026-11-22T10:05:00Z".parse().unwrap()));
}

/// Past the end of the list the gate gives (`scheduledThrough`), a run may start that it does
/// not show: no window reaching past it is promised.
#[test]
fn a_window_past_the_listed_runs_is_not_promised() {
    let mut g = with_scheduled(json!([nightly(
        "2026-11-22T10:30:00Z",
        Some("2026-11-22T10:35:00Z"),
        Some("2026-11-22T10:40:00Z")
    )]));
    // A truncated list: the next run after 10:30 is not listed.
    g.status.scheduled_through = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-11-22T10:30:00Z".parse().unwrap(),
    ));
    let a = answer(&g, SignedDuration::from_hours(1), Confidence::P90, now()).unwrap();
    assert_eq!(a.promise, Promise::NoWindow);
    assert_eq!(a.reason, "NotListed");
    assert_eq!((a.start, a.end), (None, None));
    assert!(
        a.text.contains("would reach past 2026-11-22T10:30:00Z"),
        "{}",
        a.text
    );
    // One that closes before a listed run is promised as before.
    let a = answered(&g, Confidence::P90);
    assert_eq!(a.promise, Promise::Window);
    assert_eq!(a.end, Some("2026-11-22T10:30:00Z".parse().unwrap()));
}

#[test]
fn a_scheduled_run_of_unknown_length_in_the_way_promises_nothing() {
    let g = with_scheduled(json!([nightly("2026-11-22T10:05:00Z", None, None)]));
    let a = answered(&g, Confidence::P90);
    assert_eq!(a.promise, Promise::NoWindow);
    assert_eq!(a.reason, "NoExpectedEnd");
    assert!(
        a.text.contains("scheduled CronJob billing/nightly Running (at 2026-11-22T10:05:00Z) starts before a window of 20m opens"),
        "{}",
        a.text
    );
}

#[test]
fn a_window_longer_than_time_says_so_and_does_not_panic() {
    let g = with_scheduled(json!([nightly(
        "2026-11-22T10:30:00Z",
        Some("2026-11-22T10:35:00Z"),
        Some("2026-11-22T10:40:00Z")
    )]));
    // The largest `--for` takes: as many seconds as an i64 holds.
    let forever = SignedDuration::from_secs(i64::MAX);
    let a = answer(&g, forever, Confidence::P90, now()).unwrap();
    assert_eq!(a.promise, Promise::NoWindow);
    assert_eq!(a.reason, "NotListed");
    assert!(
        a.text
            .contains("a window from 2026-11-22T10:40:00Z would reach past 2026-11-23T10:00:00Z"),
        "{}",
        a.text
    );
}

/// A node's gate lists no announced operation: its answer does not claim that none is known to
/// start, but names those the cluster's gate announces, which may start on it.
#[test]
fn a_node_answer_names_the_clusters_announced_operations_it_cannot_place() {
    let node = gate_alike(
        "node.worker-1",
        "True",
        0,
        Some("2026-11-22T09:50:00Z"),
        "NothingInFlight",
        "nothing in flight",
    );
    let a = answered(&node, Confidence::P90);
    let cluster = with_scheduled(json!([
        nightly("2026-11-22T09:30:00Z", None, None),
        nightly("2026-11-22T10:30:00Z", None, None),
        nightly("2026-11-22T11:00:00Z", None, None),
    ]));
    let said = format!("{}{}", a.text, unplaced(Some(&cluster), now()));
    assert!(
        said.contains("and no operation is known to start on it; not counted")
            && said.ends_with(
            "; not counted: 2 operations announced in the cluster, whose node is not known until \
             it starts (next: CronJob billing/nightly Running (at 2026-11-22T10:30:00Z) and 1 \
             more; `kubectl ifo plan -A` counts them)"
        ),
        "{said}"
    );
    // A cluster that announces nothing adds nothing; one that cannot be read says so.
    assert_eq!(unplaced(Some(&with_scheduled(json!([]))), now()), "");
    assert!(unplaced(None, now()).contains("could not be read"));
}
