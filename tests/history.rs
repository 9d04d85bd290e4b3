//! Expected ends learned from history, against the real cluster: after six operations (what a
//! rule needs, `MIN_SAMPLES`) of about
//! N seconds, a new one is expected to end at its start + N (within 25 %), the ruleset's status
//! publishes what was learned, and after a restart the server still expects it, from what it
//! read back from that status; when that operation ends, the status and the metrics count the
//! end judged against the estimate.
//!
//! A test binary of its own (with its own cluster and server): it restarts the server.

use ifo_dev::User;
use ifo_test_support::{MIGRATING, Rule, RuleSet, Stop, env, eventually, vm};
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

/// How long each learned operation takes, in seconds.
const N: i64 = 8;

/// The operations learned from: as many as a rule needs before its history says anything.
const LEARNED: usize = ifo::history::MIN_SAMPLES as usize;

fn migrations(name: &str, namespace: &str) -> String {
    RuleSet::vms_of(name, "kubevirt", namespace)
        .rule(Rule::new("Migrating", MIGRATING).outcome("'Succeeded'"))
        .to_string()
}

fn time(v: &Value) -> Timestamp {
    v.as_str()
        .unwrap_or_else(|| panic!("not a time: {v}"))
        .parse()
        .unwrap()
}

/// The active operation on `vm` once it has an expected end.
fn expecting(namespace: &str, vm: &str) -> Value {
    eventually(
        WAIT,
        &format!("an expected end on {vm}'s migration"),
        || {
            env().ifos(namespace).into_iter().find(|o| {
                o["spec"]["subject"]["name"] == vm
                    && o["status"]["phase"] == "Active"
                    && o["status"]["expectedEnd"].is_string()
            })
        },
    )
}

/// Checks that `op` is expected to end at its start + N, within 25 %, from history.
fn expected_from_history(op: &Value) {
    let start = time(&op["metadata"]["creationTimestamp"]);
    let end = time(&op["status"]["expectedEnd"]);
    let expected = end.duration_since(start);
    let n = SignedDuration::from_secs(N);
    assert!(
        (expected - n).abs() <= n / 4,
        "expected to take {expected:?}, not about {n:?}: {op:#}"
    );
    assert_eq!(op["status"]["estimate"], "History", "{op:#}");
}

#[test]
fn expected_end_is_learned_from_history_and_survives_a_restart() {
    let env = env();
    let (ns, rs) = env.namespace_with_ruleset("history", "migrations", migrations);
    let learned: Vec<String> = (0..LEARNED).map(|i| format!("vm{i}")).collect();
    for name in learned.iter().map(String::as_str).chain(["vm-new"]) {
        env.apply(&vm(name, &ns));
    }
    env.wait_watching(&rs);

    // Six migrations of N seconds each: each ends N seconds after its own start, whatever the
    // patches one after the other take on a loaded machine.
    let mut began = Vec::new();
    for name in &learned {
        env.set_vm_status(&ns, name, json!({"printableStatus": "Migrating"}));
        began.push(std::time::Instant::now());
    }
    let ops = eventually(WAIT, "six migrations in flight", || {
        Some(env.ifos(&ns)).filter(|ops| ops.len() == LEARNED)
    });
    // Too few samples yet: no expectation.
    for op in &ops {
        assert!(op["status"].get("expectedEnd").is_none(), "{op:#}");
    }
    for (name, began) in learned.iter().zip(&began) {
        let end = *began + Duration::from_secs(N as u64);
        std::thread::sleep(end.saturating_duration_since(std::time::Instant::now()));
        env.set_vm_status(&ns, name, json!({"printableStatus": "Running"}));
    }

    // What was learned is published on the ruleset.
    let deadline = std::time::Instant::now() + WAIT;
    let durations = loop {
        let ors = env.get_json(User::Admin, &["get", "ors", &rs]);
        let learned = ors["status"]["operationDurations"]
            .as_array()
            .and_then(|d| d.first().cloned())
            .filter(|d| d["count"] == LEARNED);
        if let Some(learned) = learned {
            break learned;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no learned durations on the ruleset: {:#}\noperations: {:#}\nserver log:\n{}",
            ors["status"],
            json!(env.ifos(&ns)),
            env.server_log_tail(40)
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(durations["operation"], "Migrating", "{durations:#}");
    let p50 = durations["p50Seconds"].as_f64().unwrap();
    assert!(
        (p50 - N as f64).abs() <= N as f64 / 4.0,
        "p50 {p50} s, not about {N} s: {durations:#}"
    );
    assert!(durations["p99Seconds"].as_f64().unwrap() >= p50);

    // A new migration is expected to take as long, and the namespace's gate expects to clear
    // when it ends: the line people run as written.
    env.set_vm_status(&ns, "vm-new", json!({"printableStatus": "Migrating"}));
    let op = expecting(&ns, "vm-new");
    expected_from_history(&op);
    let gate = format!("namespace.{ns}");
    let clear_time = eventually(WAIT, "the gate's expected clear time", || {
        env.kubectl(
            User::Admin,
            &[
                "get",
                "gate",
                &gate,
                "-o",
                "jsonpath={.status.expectedClearTime}",
            ],
        )
        .ok()
        .filter(|t| !t.is_empty())
    });
    let op_end = time(&op["status"]["expectedEnd"]);
    let gap = time(&json!(clear_time.trim())).duration_since(op_end).abs();
    assert!(
        gap <= SignedDuration::from_secs(1),
        "gate expects to clear at {clear_time}, its one operation to end at {op_end}"
    );
    let listed = env.get_json(User::Admin, &["get", "gate", &gate]);
    assert_eq!(
        listed["status"]["operations"][0]["expectedEnd"], op["status"]["expectedEnd"],
        "{listed:#}"
    );

    // After a restart, the server has learned nothing itself: it reads the ruleset's status.
    env.stop_server(Stop::Term);
    env.restart_server().unwrap();
    env.wait_served();
    expected_from_history(&expecting(&ns, "vm-new"));
    let ors = env.get_json(User::Admin, &["get", "ors", &rs]);
    assert_eq!(
        ors["status"]["operationDurations"][0]["count"], LEARNED,
        "{:#}",
        ors["status"]
    );

    // The migration ends: it is judged against the estimate this server first showed it, and
    // the ruleset's status and the metrics count the end.
    env.set_vm_status(&ns, "vm-new", json!({"printableStatus": "Running"}));
    let deadline = std::time::Instant::now() + WAIT;
    let (learned, coverage) = loop {
        let ors = env.get_json(User::Admin, &["get", "ors", &rs]);
        let learned = ors["status"]["operationDurations"][0].clone();
        if learned["coverage"]["ends"] == 1 {
            break (learned.clone(), learned["coverage"].clone());
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no end judged on the ruleset: {:#}\nserver log:\n{}",
            ors["status"],
            env.server_log_tail(40)
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(learned["count"], LEARNED + 1, "{learned:#}");
    let (p50, p90) = (
        coverage["p50"].as_f64().unwrap(),
        coverage["p90"].as_f64().unwrap(),
    );
    assert!(
        [0.0, 1.0].contains(&p50) && [0.0, 1.0].contains(&p90) && p90 >= p50,
        "one end is covered or not, by the median only if by the p90: {coverage:#}"
    );
    let series = format!(r#"ifo_expectation_ends{{ruleset="{rs}",operation="Migrating"}}"#);
    assert_eq!(env.metric(&series), 1.0);
    let series = format!(
        r#"ifo_expectation_coverage{{ruleset="{rs}",operation="Migrating",quantile="0.9"}}"#
    );
    assert_eq!(env.metric(&series), p90);
}
