//! `kubectl ifo plan` against the real cluster: the window the gate computes from the operations
//! in flight, no promise for an operation without an expected end, and none while the scope is
//! `Unknown`; CronJobs' next runs scheduled in their time zones, closing the window. Each test has
//! its own namespace and component.

use std::time::{Duration, Instant};

use ifo_dev::User;
use ifo_test_support::{
    Env, Rule, RuleSet, Run, create_gadget_crd, cronjob, cronjob_ruleset, env, eventually,
};
use jiff::Timestamp;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

/// `plan` with `args`, for 20 minutes unless they say `--for`.
fn plan(env: &Env, args: &[&str]) -> Run {
    let mut all = vec!["plan"];
    if !args.contains(&"--for") {
        all.extend(["--for", "20m"]);
    }
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
    env.copy_progressed(&ns, 10, Duration::from_secs(3));
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

/// A namespace of its own (named after `prefix`) whose CronJobs the shipped CronJob rule
/// (`rules/kubernetes/cronjob-rules.yaml`) watches, in a ruleset of its own: the namespace and the
/// ruleset's name.
fn cronjobs_watched(env: &Env, prefix: &str) -> (String, String) {
    let ns = env.namespace(prefix);
    let rs = format!("cronjobs-{ns}");
    env.apply(&cronjob_ruleset(&rs, &ns));
    env.wait_watching(&rs);
    (ns, rs)
}

/// The scheduled operations the gate `name` lists, once `done` says they are the ones awaited.
fn scheduled_until(env: &Env, name: &str, what: &str, done: impl Fn(&[Value]) -> bool) -> Value {
    eventually(WAIT, what, || {
        let gate = env.gate(name);
        let listed = gate["status"]["scheduled"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        done(&listed).then_some(gate)
    })
}

#[test]
fn a_cronjob_s_next_run_is_scheduled_in_its_time_zone_and_closes_the_window() {
    let env = env();
    let (ns, rs) = cronjobs_watched(env, "plan-cron");
    // A daily run about three hours ahead, written in Kolkata's time (UTC+05:30): its start is
    // that time of day there, whatever the machine's zone.
    let kolkata = jiff::tz::TimeZone::get("Asia/Kolkata").unwrap();
    let at = (Timestamp::now() + jiff::SignedDuration::from_hours(3)).to_zoned(kolkata.clone());
    let daily = format!("{} {} * * *", at.minute(), at.hour());
    let daily_start = at
        .with()
        .second(0)
        .subsec_nanosecond(0)
        .build()
        .unwrap()
        .timestamp();
    env.apply(&cronjob(&ns, "daily", &daily, Some("Asia/Kolkata")));
    let mut paused = cronjob(&ns, "paused", "* * * * *", None);
    paused = paused.replace("\"schedule\"", "\"suspend\":true,\"schedule\"");
    env.apply(&paused);

    let name = format!("namespace.{ns}");
    let gate = scheduled_until(env, &name, "the daily run scheduled", |s| !s.is_empty());
    let listed = gate["status"]["scheduled"].as_array().unwrap();
    // A suspended CronJob announces nothing; the daily one runs once within a day.
    assert_eq!(listed.len(), 1, "{gate:#}");
    let d = &listed[0];
    assert_eq!(d["subject"]["name"], "daily", "{gate:#}");
    assert_eq!(time(&d["expectedStart"]), Some(daily_start), "{gate:#}");
    assert_eq!(d["timeZone"], "Asia/Kolkata");
    assert_eq!(d["schedule"], daily.as_str());
    assert_eq!(d["operation"], "Running");
    assert_eq!(d["ruleSet"], rs.as_str());
    assert!(
        d["expectedEndP90"].is_null(),
        "nothing learned yet: {gate:#}"
    );
    let through = time(&gate["status"]["scheduledThrough"]).expect("scheduledThrough");
    assert!(through > daily_start, "listed a day ahead: {gate:#}");
    assert_eq!(
        time(&gate["status"]["nextWindow"]["end"]),
        Some(daily_start),
        "{gate:#}"
    );

    // Every two minutes in UTC: the soonest 50 runs, the first within two minutes, and the list
    // says it is complete only up to the last of them.
    env.apply(&cronjob(&ns, "every-2m", "*/2 * * * *", None));
    let gate = scheduled_until(env, &name, "the frequent runs", |s| {
        s.iter().any(|s| s["subject"]["name"] == "every-2m")
    });
    let listed = gate["status"]["scheduled"].as_array().unwrap();
    assert_eq!(listed.len(), 50, "{gate:#}");
    let runs: Vec<Timestamp> = listed
        .iter()
        .map(|s| time(&s["expectedStart"]).unwrap())
        .collect();
    assert!(
        listed.iter().all(|s| s["subject"]["name"] == "every-2m"),
        "{gate:#}"
    );
    assert_eq!(
        time(&gate["status"]["scheduledThrough"]),
        runs.last().copied(),
        "{gate:#}"
    );
    let now = Timestamp::now();
    assert!(
        runs[0] > now - jiff::SignedDuration::from_secs(5)
            && runs[0] <= now + jiff::SignedDuration::from_mins(2),
        "{runs:?}"
    );
    for pair in runs.windows(2) {
        assert_eq!(
            pair[1].duration_since(pair[0]),
            jiff::SignedDuration::from_mins(2)
        );
        assert_eq!(pair[0].as_second() % 120, 0);
    }
    // The window closes at the next run; nothing in flight, so it is open now.
    let window = &gate["status"]["nextWindow"];
    assert_eq!(window["reason"], "NothingInFlight", "{gate:#}");
    assert_eq!(time(&window["end"]), Some(runs[0]), "{gate:#}");
    // 20 minutes do not fit before the next run, and how long a run takes is not known yet.
    let run = plan_until(env, &["-n", &ns], "refusal", |r| r.code == 1);
    run.assert_stdout_has("No window of 20m can be promised in namespace");
    run.assert_stdout_has(&format!("scheduled CronJob {ns}/every-2m Running (at "));
    run.assert_stdout_has("its rule has not learned how long its operations take");

    // Suspended, it announces nothing: the window lasts until the daily run.
    env.kubectl(
        User::Admin,
        &[
            "patch",
            "cronjob",
            "every-2m",
            "-n",
            &ns,
            "--type=merge",
            "-p",
            r#"{"spec":{"suspend":true}}"#,
        ],
    )
    .unwrap();
    scheduled_until(env, &name, "only the daily run", |s| {
        s.len() == 1 && s[0]["subject"]["name"] == "daily"
    });
    let run = plan_until(env, &["-n", &ns, "-o", "json"], "window", |r| r.code == 0);
    let answer: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(time(&answer["end"]), Some(daily_start), "{answer:#}");
    assert_eq!(answer["reason"], "NothingInFlight", "{answer:#}");
    // The cluster's gate lists what every namespace schedules (the soonest 50).
    let cluster = env.gate("cluster");
    assert!(
        cluster["status"]["scheduledThrough"].is_string(),
        "{cluster:#}"
    );
    // Node gates list none: a run's node is not known before it starts.
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
    scheduled_until(env, &name, "nothing once the ruleset is gone", |s| {
        s.is_empty()
    });
}

/// An `@every` CronJob runs that long after its last scheduled run, or after its creation
/// before any, as kube-controller-manager counts: the gate lists its runs from there, and moves
/// them when the CronJob records a run. A schedule nothing can count from is not known.
#[test]
fn an_every_schedule_runs_that_long_after_the_last_run() {
    let env = env();
    let (ns, rs) = cronjobs_watched(env, "plan-every");
    env.apply(&cronjob(&ns, "refresh", "@every 7m", None));
    let created: Value = serde_json::from_str(
        &env.kubectl(
            User::Admin,
            &["get", "cronjob", "refresh", "-n", &ns, "-o", "json"],
        )
        .unwrap(),
    )
    .unwrap();
    let created = time(&created["metadata"]["creationTimestamp"]).expect("created");
    let every = jiff::SignedDuration::from_mins(7);
    let name = format!("namespace.{ns}");
    let starts = |gate: &Value| -> Vec<Timestamp> {
        gate["status"]["scheduled"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| time(&s["expectedStart"]).expect("a start"))
            .collect()
    };
    let gate = scheduled_until(env, &name, "the @every runs", |s| !s.is_empty());
    let first = starts(&gate);
    assert_eq!(first[0], created + every, "{gate:#}");
    assert!(
        first.windows(2).all(|p| p[1].duration_since(p[0]) == every),
        "{gate:#}"
    );
    assert_eq!(gate["status"]["scheduled"][0]["schedule"], "@every 7m");
    assert_eq!(time(&gate["status"]["nextWindow"]["end"]), Some(first[0]));

    // A run recorded a minute after the creation: the next is 7 minutes after it.
    let ran = created + jiff::SignedDuration::from_mins(1);
    env.set_status(
        "cronjob",
        &ns,
        "refresh",
        json!({"lastScheduleTime": ran.to_string()}),
    );
    let gate = scheduled_until(env, &name, "the runs after the recorded one", |s| {
        time(&s[0]["expectedStart"]) == Some(ran + every)
    });
    assert!(
        starts(&gate)
            .windows(2)
            .all(|p| p[1].duration_since(p[0]) == every),
        "{gate:#}"
    );

    // A rule that does not say when the last run was cannot know the next.
    let blind = format!("blind-{ns}");
    let mut manifest: Value = serde_json::from_str(&cronjob_ruleset(&blind, &ns)).unwrap();
    manifest["spec"]["component"] = json!(format!("blind-{ns}"));
    manifest["spec"]["rules"][0]["schedule"]
        .as_object_mut()
        .unwrap()
        .remove("from");
    env.apply(&manifest.to_string());
    let gate = scheduled_until(env, &name, "a run that is not known", |s| {
        s.iter()
            .any(|s| s["ruleSet"] == blind.as_str() && s["expectedStart"].is_null())
    });
    let unknown = gate["status"]["scheduled"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["ruleSet"] == blind.as_str())
        .unwrap();
    assert!(
        unknown["message"]
            .as_str()
            .is_some_and(|m| m.contains("@every 7m") && m.contains("schedule.from")),
        "{gate:#}"
    );
    assert_eq!(gate["status"]["nextWindow"]["reason"], "ScheduleUnknown");
    env.kubectl(User::Admin, &["delete", "ors", &rs, &blind])
        .unwrap();
}

#[test]
fn a_schedule_names_one_way_to_say_it() {
    let env = env();
    let ns = env.namespace("plan-cron-bad");
    let both = RuleSet::new(&format!("both-{ns}"))
        .target("batch", "v1", "cronjobs")
        .namespaces(&[&ns])
        .rule(Rule::new("Running", "false").set(
            "schedule",
            json!({"cron": "'* * * * *'", "at": "'2030-01-01T00:00:00Z'"}),
        ))
        .to_string();
    let both: Value = serde_json::from_str(&both).unwrap();
    let err = env.create_as(User::Admin, &both).unwrap_err();
    assert!(
        format!("{err:#}").contains("exactly one of cron and at"),
        "{err:#}"
    );
}

/// The window `plan` gives once a CronJob's runs have taught their rule how long they take:
/// the test runs the CronJob as its controller would (the test cluster has none), every 30 s
/// (`@every 30s`, which kube-controller-manager's cron reads as runs that far apart) for 12 s,
/// and after as many runs as a rule needs to learn from (`MIN_SAMPLES`, six) asks, two seconds
/// into the next, when the namespace can be had for 10 s.
/// The window it promises opens within 10 s of when the namespace's gate actually turns `Clear`
/// (the run's end plus the debounce grace), and closes at the next run. A last run that runs
/// 3 s late (within half again what its runs took, past which no end is promised) moves the
/// window later as it runs, and the window is still within 10 s.
#[test]
fn a_window_planned_among_runs_of_a_learned_length_opens_when_the_scope_clears() {
    let env = env();
    let (ns, rs) = cronjobs_watched(env, "plan-learned");
    env.apply(&cronjob(&ns, "often", "@every 30s", None));
    let every = jiff::SignedDuration::from_secs(30);
    let run_for = jiff::SignedDuration::from_secs(12);
    let sleep_until = |t: Timestamp| {
        let left = t.duration_since(Timestamp::now());
        if left.is_positive() {
            std::thread::sleep(left.unsigned_abs());
        }
    };
    let gate = format!("namespace.{ns}");
    // The window `plan` promises, for 10 s, while the run that started at `started` is in
    // flight.
    let planned = |started: Timestamp| {
        let run = plan_until(
            env,
            &["-n", &ns, "--for", "10s", "-o", "json"],
            "a window after the run in flight",
            |r| r.code == 0 && r.stdout.contains("\"ExpectedEnds\""),
        );
        let answer: Value = serde_json::from_str(&run.stdout).unwrap();
        // The run's next one closes it.
        assert_eq!(time(&answer["end"]), Some(started + every), "{answer:#}");
        time(&answer["start"]).expect("a start")
    };
    // Runs to learn from, one to plan in, and a last one that runs 3 s late; the first a whole
    // second ahead, each after it `every` later.
    let learn = i32::try_from(ifo::history::MIN_SAMPLES).unwrap();
    let late_run = learn + 1;
    let first = Timestamp::from_second(Timestamp::now().as_second() + 2).unwrap();
    for run in 0..=late_run {
        let started = first + every * run;
        sleep_until(started);
        let job = format!("often-{run}");
        env.set_status(
            "cronjob",
            &ns,
            "often",
            json!({"active": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "namespace": ns}],
                   "lastScheduleTime": started.to_string()}),
        );
        let late = if run == late_run {
            jiff::SignedDuration::from_secs(3)
        } else {
            jiff::SignedDuration::ZERO
        };
        let mut promised = None;
        if run >= learn {
            sleep_until(started + jiff::SignedDuration::from_secs(2));
            promised = Some(planned(started));
        }
        if run == late_run {
            // Past its expected end, the window moves with the run, later as it runs.
            sleep_until(started + run_for + late);
            let moved = planned(started);
            let first = promised.unwrap();
            assert!(
                moved > first && moved > Timestamp::now(),
                "the window planned from {first} stayed at {moved} while the run ran late"
            );
            promised = Some(moved);
        }
        sleep_until(started + run_for + late);
        env.set_status(
            "cronjob",
            &ns,
            "often",
            json!({"active": null, "lastScheduleTime": started.to_string(),
                   "lastSuccessfulTime": Timestamp::now().to_string()}),
        );
        if let Some(planned) = promised {
            env.wait_gate(&gate, "True", WAIT);
            let cleared = Timestamp::now();
            let off = planned.duration_since(cleared).abs();
            eprintln!(
                "run {run}: window planned from {planned}, the scope clear at {cleared}: {off:#} apart"
            );
            assert!(
                off <= jiff::SignedDuration::from_secs(10),
                "planned {planned}, clear at {cleared}"
            );
        }
    }
    // What the gate lists ahead now comes with the runs' learned lengths: the median of the
    // runs, and a p90 that took the late one in.
    let gate = env.gate(&gate);
    let next = &gate["status"]["scheduled"][0];
    let start = time(&next["expectedStart"]).expect("a start");
    let took = |end: &str| time(&next[end]).map(|e| e.duration_since(start));
    let (p50, p90) = (took("expectedEnd"), took("expectedEndP90"));
    let second = jiff::SignedDuration::from_secs(1);
    assert!(
        p50.is_some_and(|d| d >= run_for && d <= run_for + 3 * second)
            && p90.is_some_and(|d| p50.is_some_and(|m| d >= m) && d <= run_for + 9 * second),
        "{gate:#}"
    );
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

/// A rule's durations mix every object it detects: here, of one rule, a backup CronJob whose
/// runs take 6 s beside a cleanup CronJob whose runs take 1 s, twice as often; of another, a VM
/// whose migrations take 6 s beside one whose migrations take 1 s. Once the backup and the big
/// VM have 6 operations of their own, their next one is expected, from the moment it starts, to
/// take what their own took — not their rule's median, the short ones' (their gates would be
/// expected clear seconds too soon, and a window would open while they still run).
#[test]
fn an_operation_in_flight_is_expected_to_take_what_its_subjects_own_took() {
    let env = env();
    let (ns, rs) = cronjobs_watched(env, "plan-own");
    // Due in about 12 hours, listed ahead but not due while the test runs: the runs below are
    // the test's own.
    let hour = (Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC).hour() + 12) % 24;
    for name in ["backup", "cleanup"] {
        env.apply(&cronjob(&ns, name, &format!("0 {hour} * * *"), None));
    }
    let (vms, vm_rs) = env.vms_with_ruleset("plan-own-vm", &["big", "small"]);
    let run_starts = |name: &str, n: usize| {
        let started = Timestamp::now();
        env.set_status(
            "cronjob",
            &ns,
            name,
            json!({"active": [{"apiVersion": "batch/v1", "kind": "Job", "name": format!("{name}-{n}"), "namespace": ns}],
                   "lastScheduleTime": started.to_string()}),
        );
        started
    };
    let migration_starts = |name: &str| {
        env.set_vm_status(
            &vms,
            name,
            json!({"printableStatus": "Migrating", "migrationTarget": "node-2"}),
        );
    };
    // Each operation takes `took`, then the debounce grace (3 s) passes: one started within it
    // would be the same occurrence.
    let runs = |name: &str, times: usize, took: Duration| {
        for n in 0..times {
            let started = run_starts(name, n);
            std::thread::sleep(took);
            env.set_status(
                "cronjob",
                &ns,
                name,
                json!({"active": null, "lastScheduleTime": started.to_string(),
                       "lastSuccessfulTime": Timestamp::now().to_string()}),
            );
            std::thread::sleep(Duration::from_secs(4));
        }
    };
    let migrations = |name: &str, times: usize, took: Duration| {
        for _ in 0..times {
            migration_starts(name);
            std::thread::sleep(took);
            env.set_vm_status(&vms, name, json!({"printableStatus": "Running"}));
            std::thread::sleep(Duration::from_secs(4));
        }
    };
    let learn = usize::try_from(ifo::history::MIN_SAMPLES).unwrap();
    let (long, short) = (Duration::from_secs(6), Duration::from_secs(1));
    std::thread::scope(|s| {
        s.spawn(|| runs("backup", learn, long));
        s.spawn(|| runs("cleanup", 2 * learn, short));
        s.spawn(|| migrations("big", learn, long));
        s.spawn(|| migrations("small", 2 * learn, short));
    });
    // The backup's own runs are learned: its next run, listed ahead, is expected to take at
    // least what they took.
    let gate = format!("namespace.{ns}");
    scheduled_until(env, &gate, "the backup's own runs learned", |listed| {
        listed.iter().any(|s| {
            let took = time(&s["expectedEnd"])
                .zip(time(&s["expectedStart"]))
                .map(|(end, start)| end.duration_since(start));
            s["subject"]["name"] == "backup"
                && took.is_some_and(|d| d >= jiff::SignedDuration::from_secs(5))
        })
    });

    // Their next operations: what the server first shows of each, as it starts.
    let first_shown = |ns: &str, subject: &str, start: &dyn Fn()| {
        let ops = env.watch(&format!(
            "/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{ns}/inflightoperations?watch=true&fieldSelector=spec.subject.name%3D{subject}"
        ));
        // What the watch lists first: the subject's earlier, completed operations.
        let before: Vec<Value> = ops.during(Duration::from_secs(1));
        let earlier: Vec<&Value> = before
            .iter()
            .map(|e| &e["object"]["metadata"]["uid"])
            .collect();
        start();
        let events = ops.until(
            WAIT,
            &format!("{subject}'s next operation in flight"),
            |e| {
                e["object"]["status"]["phase"] == "Active"
                    && !earlier.contains(&&e["object"]["metadata"]["uid"])
            },
        );
        let op = events.last().unwrap()["object"].clone();
        let created = time(&op["metadata"]["creationTimestamp"]).unwrap();
        let expected = time(&op["status"]["expectedEnd"]).map(|end| end.duration_since(created));
        assert_eq!(op["status"]["estimate"], "History", "{op:#}");
        assert!(
            expected.is_some_and(|d| d >= jiff::SignedDuration::from_secs(4)
                && d <= jiff::SignedDuration::from_secs(9)),
            "{subject}'s operation is expected to take {expected:?}, its own took 6 s: {op:#}"
        );
        created
    };
    let created = first_shown(&ns, "backup", &|| {
        run_starts("backup", learn);
    });
    // So is its gate expected clear: not a second after the run started.
    let gate = env.gate_of(&gate, &[&ns]);
    let clear = time(&gate["status"]["expectedClearTime"]).map(|t| t.duration_since(created));
    assert!(
        clear.is_some_and(|d| d >= jiff::SignedDuration::from_secs(4)),
        "the gate expected clear {clear:?} after the run started: {gate:#}"
    );
    first_shown(&vms, "big", &|| migration_starts("big"));
    for rs in [rs, vm_rs] {
        env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
    }
}

/// A Velero Schedule's backups are Backup objects, each a subject of its own that never
/// repeats: the shipped `velero-backup-rules` keep their durations under their Schedule
/// (`durationsBy: velero.io/schedule-name`). Of one rule, a nightly Schedule's backups that took
/// a minute beside an hourly one's that took 5 s, twice as many: the nightly Schedule's next
/// backup, announced by the shipped `velero-schedule-rules`, is expected to take about a
/// minute (its own backups), not the rule's median (the hourly ones'), and so is its next backup
/// once in flight; the hourly one's, about 5 s.
#[test]
fn a_velero_schedule_s_backups_take_what_its_own_backups_took() {
    let env = env();
    let ns = env.namespace("plan-velero");
    let (backups, schedules) = (format!("backups-{ns}"), format!("schedules-{ns}"));
    let shipped = |file: &str, name: &str| {
        super::plugin::shipped_ruleset(&format!("rules/oadp/{file}"), name, &ns)
    };
    env.apply(&shipped("velero-backup-rules.yaml", &backups).to_string());
    let mut announcing = shipped("velero-schedule-rules.yaml", &schedules);
    announcing["spec"]["rules"][0]["schedule"]["durationsOf"]["ruleSet"] = json!(backups);
    env.apply(&announcing.to_string());
    env.wait_watching(&backups);
    env.wait_watching(&schedules);
    // Due in about 12 hours: listed ahead, not due while the test runs.
    let hour = (Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC).hour() + 12) % 24;
    for schedule in ["nightly", "hourly"] {
        env.apply(
            &json!({"apiVersion": "velero.io/v1", "kind": "Schedule",
                    "metadata": {"name": schedule, "namespace": ns},
                    "spec": {"schedule": format!("0 {hour} * * *")}})
            .to_string(),
        );
    }
    // A backup of `schedule`, as Velero makes it (labelled with its Schedule), in progress since
    // `ago` (its `status.startTimestamp`, which the rule takes as the operation's start).
    let started = |name: &str, schedule: &str, ago: jiff::SignedDuration| {
        env.apply(
            &json!({"apiVersion": "velero.io/v1", "kind": "Backup",
                    "metadata": {"name": name, "namespace": ns,
                                 "labels": {"velero.io/schedule-name": schedule}},
                    "spec": {}})
            .to_string(),
        );
        env.set_status(
            "backups.velero.io",
            &ns,
            name,
            json!({"phase": "InProgress", "startTimestamp": (Timestamp::now() - ago).to_string()}),
        );
    };
    let learn = usize::try_from(ifo::history::MIN_SAMPLES).unwrap();
    let (long, short) = (
        jiff::SignedDuration::from_mins(1),
        jiff::SignedDuration::from_secs(5),
    );
    let began = Instant::now();
    let mut names = Vec::new();
    for i in 0..learn {
        names.push(format!("nightly-{i}"));
        started(&format!("nightly-{i}"), "nightly", long);
    }
    for i in 0..2 * learn {
        names.push(format!("hourly-{i}"));
        started(&format!("hourly-{i}"), "hourly", short);
    }
    // Every one seen in flight before it completes.
    eventually(WAIT, "every backup in flight", || {
        let ops = env.get_json(User::Admin, &["get", "ifo", "-n", &ns]);
        let active = ops["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|o| o["status"]["phase"] == "Active")
            .count();
        (active == names.len()).then_some(())
    });
    for name in &names {
        env.set_status(
            "backups.velero.io",
            &ns,
            name,
            json!({"phase": "Completed"}),
        );
    }
    // Each backup took its `ago` and at most this more (created, seen in flight and completed
    // one after another), and its completion is seen a moment later.
    let slack = jiff::SignedDuration::try_from(began.elapsed()).unwrap()
        + jiff::SignedDuration::from_secs(10);

    // Once every backup completed, the Schedules' next backups are listed ahead with what
    // their own backups took.
    let gate = format!("namespace.{ns}");
    env.wait_gate(&gate, "True", WAIT);
    let took = |s: &Value| {
        time(&s["expectedEnd"])
            .zip(time(&s["expectedStart"]))
            .map(|(end, start)| end.duration_since(start))
    };
    let gate = scheduled_until(env, &gate, "the Schedules' own backups learned", |listed| {
        listed.len() == 2 && listed.iter().all(|s| took(s).is_some())
    });
    let of = |schedule: &str| {
        let listed = gate["status"]["scheduled"].as_array().unwrap();
        let s = listed
            .iter()
            .find(|s| s["subject"]["name"] == schedule)
            .unwrap_or_else(|| panic!("no run of {schedule} listed: {gate:#}"));
        took(s).unwrap()
    };
    let (nightly, hourly) = (of("nightly"), of("hourly"));
    assert!(
        nightly >= long && nightly <= long + slack,
        "the nightly Schedule's next backup is expected to take {nightly:#}, its own took a minute: {gate:#}"
    );
    assert!(
        hourly >= short && hourly <= short + slack,
        "the hourly Schedule's next backup is expected to take {hourly:#}, its own took 5 s: {gate:#}"
    );

    // A nightly backup in flight is expected to take what the nightly ones took.
    started("nightly-next", "nightly", jiff::SignedDuration::ZERO);
    let op = env.wait_ifo(&ns, "the next nightly backup in flight", |o| {
        o["spec"]["subject"]["name"] == "nightly-next" && o["status"]["estimate"] == "History"
    });
    let created = time(&op["metadata"]["creationTimestamp"]).unwrap();
    let expected = time(&op["status"]["expectedEnd"]).map(|end| end.duration_since(created));
    assert!(
        expected.is_some_and(|d| d >= long && d <= long + slack),
        "the next nightly backup is expected to take {expected:?}: {op:#}"
    );
    for rs in [backups, schedules] {
        env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
    }
}
