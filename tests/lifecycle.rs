//! How operations end, with the grace of a real install (30 s): a VirtualMachine moved through
//! its states while earlier operations are still in their grace keeps, for each operation, the
//! outcome of the moment its rule stopped matching; operations in their grace show as ending in
//! `kubectl get -o wide` and `kubectl ifo`; in an `exclusive` ruleset the next operation ends the
//! previous one at once.
//!
//! A test binary of its own: its server runs with a 30 s grace, which would slow down the tests
//! that share the one in `e2e`.

use ifo_dev::User;
use ifo_test_support::{Env, Rule, RuleSet, WatchStream, plugin_binary, vm};
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const GRACE: &str = "30s";
const WAIT: Duration = Duration::from_secs(30);

/// This binary's environment. Its server lists targets in pages (`STREAMING_LISTS=false`)
/// where the other binaries' servers stream them: both ways of reading a target are tested.
fn lifecycle_env() -> &'static Env {
    Env::builder()
        .debounce(GRACE)
        .settings(&[("STREAMING_LISTS", "false")])
        .start()
}

/// VM rules in the shape of the shipped `vm-lifecycle-rules`, each reading `printableStatus`,
/// with outcomes that tell the states the VM moves on to apart.
fn ruleset(name: &str, namespace: &str, exclusive: bool) -> String {
    let status = "object.?status.?printableStatus.orValue('')";
    RuleSet::vms_of(name, "kubevirt", namespace)
        .spec("exclusive", exclusive)
        .rule(
            Rule::new("Starting", &format!("{status} == 'Starting'"))
                .message("'starting'")
                .outcome(&format!(
                    "{status} in ['Running', 'Migrating'] ? 'Succeeded' \
                     : ({status} in ['Stopping', 'Stopped'] ? 'Canceled' : 'Unknown')"
                )),
        )
        .rule(
            Rule::new("Migrating", &format!("{status} == 'Migrating'")).outcome(&format!(
                "{status} == 'Running' ? 'Succeeded' \
                 : ({status} in ['Stopping', 'Stopped'] ? 'Canceled' : 'Unknown')"
            )),
        )
        .rule(
            Rule::new("Stopping", &format!("{status} == 'Stopping'"))
                .outcome(&format!("{status} == 'Stopped' ? 'Succeeded' : 'Unknown'")),
        )
        .to_string()
}

/// Watch events of one namespace's operations, each with when it arrived; and the moves of its
/// vm1 that make them.
struct Events {
    env: &'static Env,
    ns: String,
    stream: WatchStream,
    seen: Vec<(Instant, Value)>,
}

impl Events {
    fn watch(env: &'static Env, namespace: &str) -> Events {
        Events {
            env,
            ns: namespace.to_owned(),
            stream: env.watch(&format!(
                "/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{namespace}/inflightoperations?watch=1"
            )),
            seen: Vec::new(),
        }
    }

    /// Moves vm1 into `state` and, once its operation started, out of it into `next`. Returns
    /// when it left `state`, when its operation was then seen ending (its completion time must
    /// fall between the two), and the event that showed it ending.
    fn through(&mut self, state: &str, next: &str) -> (Timestamp, Timestamp, Value) {
        set(self.env, &self.ns, state);
        self.added(state);
        let stopped = set(self.env, &self.ns, next);
        let (_, ending) = self.ending(state);
        (stopped, Timestamp::now(), ending)
    }

    /// The first event (already seen or to come within `timeout`) for which `pred` holds.
    fn find(
        &mut self,
        timeout: Duration,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> (Instant, Value) {
        if let Some(found) = self.seen.iter().find(|(_, e)| pred(e)) {
            return found.clone();
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stream.next(left) {
                Ok(event) => {
                    self.seen.push(event.clone());
                    if pred(&event.1) {
                        return event;
                    }
                }
                Err(e) => panic!(
                    "{e} while waiting for {what}; events seen: {:#?}",
                    self.seen.iter().map(|(_, e)| e).collect::<Vec<_>>()
                ),
            }
        }
    }

    /// The event in which `operation` turned `Completed`.
    fn completed(&mut self, operation: &str, timeout: Duration) -> (Instant, Value) {
        self.find(timeout, &format!("{operation} to complete"), |e| {
            e["type"] == "MODIFIED"
                && e["object"]["spec"]["operation"] == operation
                && e["object"]["status"]["phase"] == "Completed"
        })
    }

    /// The event in which `operation` appeared.
    fn added(&mut self, operation: &str) -> (Instant, Value) {
        self.find(WAIT, &format!("{operation} to start"), |e| {
            e["type"] == "ADDED" && e["object"]["spec"]["operation"] == operation
        })
    }

    /// The event in which `operation` started its grace.
    fn ending(&mut self, operation: &str) -> (Instant, Value) {
        self.find(WAIT, &format!("{operation} to be ending"), |e| {
            e["type"] == "MODIFIED"
                && e["object"]["spec"]["operation"] == operation
                && e["object"]["status"]["phase"] == "Active"
                && e["object"]["status"]["gracePeriodEnd"].is_string()
        })
    }
}

fn time(v: &Value) -> Timestamp {
    v.as_str()
        .unwrap_or_else(|| panic!("not a time: {v}"))
        .parse()
        .unwrap()
}

/// `t` is within the whole second (as served) of the span `[from, to]`.
fn within(t: Timestamp, from: Timestamp, to: Timestamp) -> bool {
    let second = SignedDuration::from_secs(1);
    from - second <= t && t <= to + second
}

/// A namespace with VM `name` and a ruleset for it, watching.
fn setup(env: &'static Env, prefix: &str, exclusive: bool) -> (String, Events) {
    let (ns, rs) =
        env.namespace_with_ruleset(prefix, "lifecycle", |rs, ns| ruleset(rs, ns, exclusive));
    env.apply(&vm("vm1", &ns));
    env.wait_watching(&rs);
    let events = Events::watch(env, &ns);
    (ns, events)
}

/// Sets vm1's `printableStatus`; returns when it was set (before the patch).
fn set(env: &Env, ns: &str, status: &str) -> Timestamp {
    let before = Timestamp::now();
    env.set_vm_status(ns, "vm1", json!({"printableStatus": status}));
    before
}

/// The row of the operation `Starting` in `table`, which is printed.
fn starting_row(table: &str) -> &str {
    println!("{table}");
    table
        .lines()
        .find(|l| l.contains("Starting"))
        .unwrap_or_else(|| panic!("no Starting in:\n{table}"))
}

/// How far apart `a` and `b` are.
fn apart(a: Instant, b: Instant) -> Duration {
    a.max(b) - a.min(b)
}

#[test]
fn a_vm_moved_through_its_states_during_the_grace() {
    let env = lifecycle_env();
    let (ns, mut events) = setup(env, "lifecycle", false);

    let (starting_stopped, starting_seen, ending) = events.through("Starting", "Running");
    let status = &ending["object"]["status"];
    let detected = &status["conditions"][0];
    assert_eq!(
        (&detected["type"], &detected["status"], &detected["reason"]),
        (&json!("Detected"), &json!("False"), &json!("GracePeriod")),
        "{status:#}"
    );
    let since = time(&detected["lastTransitionTime"]);
    assert!(within(since, starting_stopped, starting_seen), "{status:#}");
    let end = time(&status["gracePeriodEnd"]);
    assert_eq!(end.duration_since(since).as_secs(), 30, "{status:#}");

    // Shown as ending where users look: `kubectl get -o wide` and `kubectl ifo`.
    let wide = env
        .kubectl(User::Admin, &["get", "ifos", "-n", &ns, "-o", "wide"])
        .unwrap();
    let header = wide.lines().next().unwrap();
    assert!(
        header
            .split_whitespace()
            .collect::<Vec<_>>()
            .ends_with(&["PROGRESS", "EXPECTED", "STALLED"]),
        "{wide}"
    );
    let row = starting_row(&wide);
    assert!(row.contains("Active"), "{wide}");
    assert!(
        row.contains("ending in 2") || row.contains("ending in 3"),
        "{wide}"
    );
    // Its expected end is the grace's end: never "overdue" while it ends.
    assert!(!row.contains("overdue"), "{wide}");
    let plugin = std::process::Command::new(plugin_binary())
        .env("KUBECONFIG", env.cluster.kubeconfig(User::Admin))
        .args(["-n", &ns, "--color"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&plugin.stdout);
    assert!(plugin.status.success(), "{shown}");
    let row = starting_row(&shown);
    // Dimmed (SGR 2), with the time left.
    assert!(row.contains("\u{1b}[2mending in "), "{row:?}");

    // The VM moves on while Starting is in its grace: Migrating starts and stops, Stopping
    // starts and stops. Each state is waited for, so the server sees every one.
    let (migrating_stopped, migrating_seen, _) = events.through("Migrating", "Running");
    let (stopping_stopped, stopping_seen, _) = events.through("Stopping", "Stopped");
    assert!(
        Timestamp::now().duration_since(starting_stopped) < SignedDuration::from_secs(25),
        "the moves took longer than the grace: the test proves nothing"
    );

    // Each completes after its grace with the outcome of the moment it stopped matching,
    // whatever the VM did after.
    let grace = Duration::from_secs(30);
    for (operation, outcome, from, to) in [
        ("Starting", "Succeeded", starting_stopped, starting_seen),
        ("Migrating", "Succeeded", migrating_stopped, migrating_seen),
        ("Stopping", "Succeeded", stopping_stopped, stopping_seen),
    ] {
        let (_, done) = events.completed(operation, grace + WAIT);
        let status = &done["object"]["status"];
        assert_eq!(status["outcome"], outcome, "{operation}: {status:#}");
        assert!(
            within(time(&status["completed"]), from, to),
            "{operation} completed when it stopped matching ({from}..{to}): {status:#}"
        );
        assert!(status.get("gracePeriodEnd").is_none(), "{status:#}");
        assert_eq!(status["conditions"], json!([]), "{status:#}");
    }
}

#[test]
fn in_an_exclusive_ruleset_the_next_operation_ends_the_previous_at_once() {
    let env = lifecycle_env();
    let (ns, mut events) = setup(env, "exclusive", true);

    // Starting → Running → Migrating: Starting, in its grace, completes as Migrating starts,
    // with the outcome of when it stopped matching.
    let (starting_stopped, starting_seen, _) = events.through("Starting", "Running");
    let asked = Instant::now();
    set(env, &ns, "Migrating");
    let (started, _) = events.added("Migrating");
    let (ended, starting) = events.completed("Starting", WAIT);
    let gap = apart(ended, started);
    println!(
        "Starting completed {gap:?} from Migrating's start, {:?} after the patch",
        ended - asked
    );
    assert!(gap < Duration::from_secs(1), "{gap:?} apart");
    assert!(
        ended - asked < Duration::from_secs(10),
        "completed at once, not after the 30 s grace"
    );
    let status = &starting["object"]["status"];
    assert_eq!(status["outcome"], "Succeeded", "{status:#}");
    assert!(
        within(time(&status["completed"]), starting_stopped, starting_seen),
        "{status:#}"
    );

    // Migrating → Stopping directly: Migrating completes at once, Canceled (what its outcome
    // expression says of a stopping VM), never shown as ending.
    let stopping_asked = set(env, &ns, "Stopping");
    let (started, _) = events.added("Stopping");
    let (ended, migrated) = events.completed("Migrating", WAIT);
    let gap = apart(ended, started);
    assert!(gap < Duration::from_secs(1), "{gap:?} apart");
    let status = &migrated["object"]["status"];
    assert_eq!(status["outcome"], "Canceled", "{status:#}");
    assert!(
        within(time(&status["completed"]), stopping_asked, Timestamp::now()),
        "{status:#}"
    );
    assert!(
        !events.seen.iter().any(|(_, e)| {
            e["object"]["spec"]["operation"] == "Migrating"
                && e["object"]["status"]["gracePeriodEnd"].is_string()
        }),
        "Migrating was shown as ending"
    );
}
