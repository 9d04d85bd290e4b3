//! `kubectl ifo plan` against the real cluster: the window the gate computes from the operations
//! in flight, no promise for an operation without an expected end, and none while the scope is
//! `Unknown`. Each test has its own namespace and component.

use std::time::{Duration, Instant};

use ifo_dev::User;
use ifo_test_support::{Env, Run, create_gadget_crd, env};
use jiff::Timestamp;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

fn plan(env: &Env, args: &[&str]) -> Run {
    let mut all = vec!["plan", "--for", "20m"];
    all.extend_from_slice(args);
    env.plugin_cmd(User::Admin, &all).output().unwrap().into()
}

/// `plan` until `done` says its answer is the one awaited (for up to [`WAIT`]): the server's
/// view settles (the tracker brings expected ends up to date every 5 s, and another test's new
/// ruleset can leave a gate `Unknown` for a moment).
fn plan_until(env: &Env, args: &[&str], what: &str, done: impl Fn(&Run) -> bool) -> Run {
    let deadline = Instant::now() + WAIT;
    loop {
        let run = plan(env, args);
        if done(&run) {
            return run;
        }
        assert!(
            Instant::now() < deadline,
            "no {what}: exit {}\n{}{}",
            run.code,
            run.stdout,
            run.stderr
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn time(v: &Value) -> Option<Timestamp> {
    v.as_str()?.parse().ok()
}

#[test]
fn plan_promises_a_window_at_the_expected_end_and_none_without_one() {
    let env = env();
    let (ns, rs, _) = env.copying_vm("plan");

    // Nothing learned and no progress: no expected end, so no window (exit 1), naming it.
    let run = plan_until(env, &["-n", &ns], "refusal without an end", |r| r.code == 1);
    run.assert_stdout_has("No window of 20m can be promised in namespace");
    run.assert_stdout_has("VirtualMachine");
    run.assert_stdout_has("vm-0 Copying has no expected end");

    // 10 % after 3 s: its progress says it ends about 30 s after it started.
    std::thread::sleep(Duration::from_secs(3));
    env.set_vm_status(
        &ns,
        "vm-0",
        json!({"printableStatus": "Copying", "pct": 10}),
    );
    let op = env.wait_ifo(&ns, "an end from progress", |o| {
        o["status"]["estimate"] == "Progress"
    });
    let end = time(&op["status"]["expectedEnd"]).expect("an expected end");
    let run = plan_until(env, &["-n", &ns, "-o", "json"], "window", |r| r.code == 0);
    let answer: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(answer["gate"], format!("namespace.{ns}"), "{answer:#}");
    assert_eq!(answer["confidence"], "p90");
    assert_eq!(answer["forSeconds"], 1200);
    assert_eq!(answer["reason"], "ExpectedEnds", "{answer:#}");
    let start = time(&answer["start"]).expect("a start");
    // The served end is in whole seconds, the window's start rounded up to one.
    assert!(
        start >= end && start.duration_since(end) <= jiff::SignedDuration::from_secs(1),
        "window {start}, expected end {end}"
    );
    // The gate says the same, at both confidences (an end from progress has no band).
    let gate = env.gate(&format!("namespace.{ns}"));
    assert_eq!(
        time(&gate["status"]["nextWindow"]["start"]),
        Some(start),
        "{gate:#}"
    );
    assert_eq!(
        time(&gate["status"]["nextWindowP50"]["start"]),
        Some(start),
        "{gate:#}"
    );
    let run = plan_until(env, &["-n", &ns, "--confidence", "p50"], "text", |r| {
        r.code == 0
    });
    run.assert_stdout_has(&format!(
        "Expected clear in namespace {ns} for 20m from {start}"
    ));
    run.assert_stdout_has("p50): when the last of 1 operation in flight is expected to end");
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

#[test]
fn plan_refuses_to_promise_while_the_scope_is_unknown() {
    let env = env();
    let scope = env.scope("plan-stale");
    create_gadget_crd(env, &scope.group);
    // The server may not read gadgets (nothing grants it): its watch fails, and the
    // component's gate is Unknown.
    env.apply(&scope.busy_gadgets().to_string());
    let gate = format!("component.{}", scope.component);
    let json = env.wait_gate(&gate, "Unknown", WAIT);
    assert_eq!(
        json["status"]["nextWindow"]["reason"], "ScopeUnknown",
        "{json:#}"
    );
    assert!(json["status"]["nextWindow"]["start"].is_null(), "{json:#}");
    let run = plan(env, &["--component", &scope.component]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    run.assert_stderr_has("No window of 20m can be promised for component");
    run.assert_stderr_has("is not being watched");
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    scope.delete_gadgets(env);
}
