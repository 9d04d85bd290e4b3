use std::collections::HashSet;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::*;
use crate::evaluate::{Bound, Engine, evaluate};
use crate::history::Durations;
use crate::operation::Subject;
use crate::ruleset::{CompiledRuleSet, OperationDurations, RuleSetSpec, compile};

/// The CronJob rule of the library (`rules/kubernetes/cronjob-rules.yaml`), as ruleset `name`
/// of `component`, its durations those of `durations_of` when given.
fn cronjob_rules(name: &str, component: &str, durations_of: Option<Value>) -> CompiledRuleSet {
    let mut schedule = json!({
        "cron": "object.?spec.?suspend.orValue(false) ? '' : object.?spec.?schedule.orValue('')",
        "timeZone": "object.?spec.?timeZone.orValue('')",
        "from": "object.?status.?lastScheduleTime.orValue(object.?metadata.?creationTimestamp.orValue(''))",
    });
    if let Some(d) = durations_of {
        schedule["durationsOf"] = d;
    }
    let spec: RuleSetSpec = serde_json::from_value(json!({
        "component": component,
        "target": {"group": "batch", "version": "v1", "resource": "cronjobs"},
        "rules": [
            {"operation": "Running", "expression": "object.?status.?active.orValue([]).size() > 0",
             "schedule": schedule},
            {"operation": "Other", "expression": "false"},
        ],
    }))
    .unwrap();
    compile(&Engine::new(), name, Some(1), &spec).unwrap()
}

fn cronjob(namespace: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{namespace}-{name}")},
        "spec": spec,
    })
}

/// The CronJob `name` of `namespace` on `schedule`, evaluated by `rs`: it announces its runs.
fn announce(s: &Schedules, rs: &CompiledRuleSet, (namespace, name): (&str, &str), schedule: &str) {
    let unreadable = observe(
        s,
        rs,
        &cronjob(namespace, name, json!({"schedule": schedule})),
    );
    assert!(unreadable.is_empty(), "{unreadable:?}");
}

/// Evaluates `rs` on `object` and records what it announces.
fn observe(s: &Schedules, rs: &CompiledRuleSet, object: &Value) -> Vec<String> {
    let subject = Subject::from_object(object).unwrap();
    let ev = evaluate(&rs.exprs, &Bound::new(object));
    s.observe(rs, &subject, &ev.starts)
        .into_iter()
        .map(|(op, e)| format!("{op}: {e}"))
        .collect()
}

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn starts(u: &Upcomings) -> Vec<String> {
    u.listed
        .iter()
        .map(|u| format!("{} {}", u.subject().name, u.start))
        .collect()
}

fn learned(operation: &str, p50: f64, p90: f64, count: u64) -> OperationDurations {
    OperationDurations {
        operation: operation.into(),
        count,
        p50_seconds: p50,
        p90_seconds: p90,
        p99_seconds: p90,
        ..OperationDurations::default()
    }
}

#[test]
fn runs_of_every_schedule_soonest_first_in_their_time_zones() {
    let s = Schedules::default();
    let rs = cronjob_rules("cron", "batch", None);
    let now = t("2026-11-26T08:00:30Z");
    announce(&s, &rs, ("a", "hourly"), "@hourly");
    observe(
        &s,
        &rs,
        &cronjob(
            "b",
            "kolkata",
            json!({"schedule": "0 14 * * *", "timeZone": "Asia/Kolkata"}),
        ),
    );
    observe(
        &s,
        &rs,
        &cronjob(
            "a",
            "suspended",
            json!({"schedule": "* * * * *", "suspend": true}),
        ),
    );
    let u = s.upcoming(now, |_, _| true);
    // 14:00 in Kolkata is 08:30 UTC; the hourly one runs 24 times within the day.
    assert_eq!(
        starts(&u)[..3],
        [
            "kolkata 2026-11-26T08:30:00Z".to_owned(),
            "hourly 2026-11-26T09:00:00Z".to_owned(),
            "hourly 2026-11-26T10:00:00Z".to_owned(),
        ]
    );
    assert_eq!(u.listed.len(), 25);
    assert_eq!(u.through, now + HORIZON);
    assert_eq!(u.listed[0].schedule(), Some(("0 14 * * *", "Asia/Kolkata")));
    assert_eq!(u.listed[1].schedule(), Some(("@hourly", "UTC")));
    // A namespace's scope, a component's.
    assert_eq!(s.upcoming(now, |ns, _| ns == Some("b")).listed.len(), 1);
    assert!(s.upcoming(now, |_, c| c == "other").listed.is_empty());
}

#[test]
fn past_fifty_starts_the_list_says_up_to_when_it_is_complete() {
    let s = Schedules::default();
    let rs = cronjob_rules("cron", "batch", None);
    announce(&s, &rs, ("a", "minutely"), "* * * * *");
    announce(&s, &rs, ("a", "daily"), "0 20 * * *");
    let now = t("2026-11-26T08:00:00Z");
    let u = s.upcoming(now, |_, _| true);
    assert_eq!(u.listed.len(), MAX_LISTED);
    assert!(u.listed.iter().all(|u| u.subject().name == "minutely"));
    assert_eq!(u.through, t("2026-11-26T08:50:00Z"));
    assert_eq!(u.listed[0].start, t("2026-11-26T08:01:00Z"));
}

#[test]
fn an_announced_run_takes_what_its_rule_learned_once_it_has_enough() {
    let durations = Arc::new(Durations::default());
    let s = Schedules::new(durations.clone());
    let own = cronjob_rules("cron", "batch", None);
    let borrowed = cronjob_rules(
        "velero",
        "oadp",
        Some(json!({"ruleSet": "backups", "operation": "InProgress"})),
    );
    announce(&s, &own, ("a", "own"), "0 9 * * *");
    announce(&s, &borrowed, ("a", "borrowed"), "0 10 * * *");
    let now = t("2026-11-26T08:00:00Z");
    let durations_of = |u: &Upcomings, name: &str| {
        let u = u.listed.iter().find(|u| u.subject().name == name).unwrap();
        (u.p50, u.p90)
    };
    let u = s.upcoming(now, |_, _| true);
    assert_eq!(durations_of(&u, "own"), (None, None));
    // Five samples are not enough; six are.
    durations.seed("cron", "batch", &[learned("Running", 60.0, 90.0, 5)]);
    durations.seed("backups", "oadp", &[learned("InProgress", 600.0, 900.0, 6)]);
    let u = s.upcoming(now, |_, _| true);
    assert_eq!(durations_of(&u, "own"), (None, None));
    assert_eq!(
        durations_of(&u, "borrowed"),
        (
            Some(SignedDuration::from_mins(10)),
            Some(SignedDuration::from_mins(15))
        )
    );
}

/// A run of the CronJob `name` of `namespace` (by ruleset `cron`'s `Running`) that succeeded
/// after `took`.
fn run_of(
    namespace: &str,
    name: &str,
    took: SignedDuration,
) -> crate::operation::InFlightOperation {
    let mut subject = crate::operation::test_subject("batch/v1", "CronJob", Some(namespace), name);
    subject.uid = format!("uid-{namespace}-{name}");
    let op = crate::operation::test_active(&subject, ("cron", "batch"), "Running", &[]);
    succeeded(op, took)
}

/// `op` completed as `Succeeded`, `took` after it started.
fn succeeded(
    mut op: crate::operation::InFlightOperation,
    took: SignedDuration,
) -> crate::operation::InFlightOperation {
    op.phase = crate::operation::Phase::Completed;
    op.outcome = Some(crate::operation::Outcome::Succeeded);
    op.completed = Some(op.created + took);
    op
}

/// Two CronJobs of one rule: a nightly backup that runs three hours and an hourly cleanup
/// of seconds, the rule's durations the cleanup's. The backup's next run is expected to take its
/// own three hours once it has six runs, and at least what its runs took before; the cleanup's
/// its own seconds; a CronJob with no runs of its own, the rule's.
#[test]
fn an_announced_run_takes_what_its_own_object_took_not_its_rules_mix() {
    let durations = Arc::new(Durations::default());
    let s = Schedules::new(durations.clone());
    let rs = cronjob_rules("cron", "batch", None);
    announce(&s, &rs, ("a", "nightly"), "0 2 * * *");
    announce(&s, &rs, ("a", "cleanup"), "0 * * * *");
    announce(&s, &rs, ("a", "new"), "0 3 * * *");
    durations.seed("cron", "batch", &[learned("Running", 5.0, 6.0, 100)]);
    let hours = |h: i64| SignedDuration::from_hours(h);
    let now = t("2026-11-26T08:00:00Z");
    let expected = |name: &str| {
        let u = s.upcoming(now, |_, _| true);
        let u = u
            .listed
            .iter()
            .find(|u| u.subject().name == name)
            .unwrap()
            .clone();
        (u.p50, u.p90)
    };
    assert_eq!(
        expected("nightly"),
        (
            Some(SignedDuration::from_secs(5)),
            Some(SignedDuration::from_secs(6))
        )
    );
    // Two runs of its own: never less than they took.
    for _ in 0..2 {
        durations.completed(&run_of("a", "nightly", hours(3)));
    }
    assert_eq!(expected("nightly"), (Some(hours(3)), Some(hours(3))));
    // Its own, once six; a run announced again keeps them.
    announce(&s, &rs, ("a", "nightly"), "30 2 * * *");
    for m in [170, 175, 180, 185] {
        durations.completed(&run_of("a", "nightly", SignedDuration::from_mins(m)));
    }
    assert_eq!(
        expected("nightly"),
        (Some(hours(3)), Some(SignedDuration::from_mins(185)))
    );
    for _ in 0..crate::history::MIN_SAMPLES {
        durations.completed(&run_of("a", "cleanup", SignedDuration::from_secs(2)));
    }
    assert_eq!(
        expected("cleanup"),
        (
            Some(SignedDuration::from_secs(2)),
            Some(SignedDuration::from_secs(2))
        )
    );
    // No runs of its own: the rule's (whose window now holds the others' runs too).
    let rule = || {
        let q = durations.quantiles("cron", "Running").unwrap();
        (Some(q.p50), Some(q.p90))
    };
    assert_eq!(expected("new"), rule());
    // A run that failed counts for nothing; the object gone, its runs go with it.
    let mut failed = run_of("a", "new", hours(9));
    failed.outcome = Some(crate::operation::Outcome::Failed);
    durations.completed(&failed);
    assert_eq!(expected("new"), rule());
    // (As the detector does when the object is deleted.)
    s.subject_deleted("cron", "uid-a-nightly");
    durations.subject_deleted("uid-a-nightly");
    announce(&s, &rs, ("a", "nightly"), "0 2 * * *");
    assert_eq!(expected("nightly"), rule());
}

#[test]
fn what_goes_away_announces_nothing_and_what_cannot_be_read_says_why() {
    let s = Schedules::default();
    let rs = cronjob_rules("cron", "batch", None);
    let now = t("2026-11-26T08:00:00Z");
    let one = cronjob("a", "one", json!({"schedule": "0 9 * * *"}));
    let two = cronjob("b", "two", json!({"schedule": "0 9 * * *"}));
    observe(&s, &rs, &one);
    observe(&s, &rs, &two);
    let names = |s: &Schedules| {
        let mut n: Vec<String> = s
            .upcoming(now, |_, _| true)
            .listed
            .iter()
            .map(|u| u.subject().name.clone())
            .collect();
        n.sort();
        n
    };
    assert_eq!(names(&s), ["one", "two"]);
    // Suspended: nothing.
    observe(
        &s,
        &rs,
        &cronjob(
            "a",
            "one",
            json!({"schedule": "0 9 * * *", "suspend": true}),
        ),
    );
    assert_eq!(names(&s), ["two"]);
    // A schedule the server cannot read is reported, and announces nothing.
    let bad = observe(
        &s,
        &rs,
        &cronjob("b", "two", json!({"schedule": "0 25 * * *"})),
    );
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(
        bad[0].starts_with("Running: \"0 25 * * *\" is not a cron schedule"),
        "{bad:?}"
    );
    // Not known, rather than nothing: its scopes promise no window meanwhile.
    assert!(names(&s).is_empty());
    let u = s.upcoming(now, |_, _| true);
    assert_eq!(u.unknown.len(), 1);
    assert_eq!(u.unknown[0].subject().name, "two");
    assert!(
        u.unknown[0].why().contains("is not a cron schedule"),
        "{}",
        u.unknown[0].why()
    );
    let tz = observe(
        &s,
        &rs,
        &cronjob(
            "b",
            "two",
            json!({"schedule": "0 9 * * *", "timeZone": "Nowhere/Atlantis"}),
        ),
    );
    assert!(
        tz[0].contains("\"Nowhere/Atlantis\" is not a time zone"),
        "{tz:?}"
    );
    // Deleted, relisted without it, its ruleset changed or removed.
    observe(&s, &rs, &one);
    observe(&s, &rs, &two);
    s.subject_deleted("cron", "uid-a-one");
    assert_eq!(names(&s), ["two"]);
    observe(&s, &rs, &one);
    s.resync("cron", Some("b"), &HashSet::new());
    assert_eq!(names(&s), ["one"]);
    // Reloaded: its rules keep their schedules, then lose them (an evaluation of a rule
    // without one touches nothing: the reload drops what it announced).
    s.retain_operations("cron", &rs.scheduled_operations());
    assert_eq!(names(&s), ["one"]);
    let spec: RuleSetSpec = serde_json::from_value(json!({
        "component": "batch",
        "target": {"group": "batch", "version": "v1", "resource": "cronjobs"},
        "rules": [{"operation": "Running", "expression": "false"}],
    }))
    .unwrap();
    let unscheduled = compile(&Engine::new(), "cron", Some(2), &spec).unwrap();
    observe(&s, &unscheduled, &one);
    assert_eq!(names(&s), ["one"]);
    s.retain_operations("cron", &unscheduled.scheduled_operations());
    assert!(names(&s).is_empty());
    observe(&s, &rs, &one);
    s.ruleset_removed("cron");
    assert!(names(&s).is_empty());
}

#[test]
fn an_every_schedule_counts_from_the_last_run_the_object_records() {
    let s = Schedules::default();
    let rs = cronjob_rules("cron", "batch", None);
    let mut refresh = cronjob("a", "refresh", json!({"schedule": "@every 90m"}));
    refresh["metadata"]["creationTimestamp"] = json!("2026-11-26T07:00:00Z");
    assert!(observe(&s, &rs, &refresh).is_empty());
    let now = t("2026-11-26T08:00:00Z");
    let first = starts(&s.upcoming(now, |_, _| true));
    assert_eq!(
        first[..2],
        [
            "refresh 2026-11-26T08:30:00Z",
            "refresh 2026-11-26T10:00:00Z"
        ]
    );
    // A run recorded: the runs move with it.
    refresh["status"] = json!({"lastScheduleTime": "2026-11-26T07:45:00Z"});
    observe(&s, &rs, &refresh);
    assert_eq!(
        starts(&s.upcoming(now, |_, _| true))[0],
        "refresh 2026-11-26T09:15:00Z"
    );
    // Nothing to count from: not known, and said why.
    refresh["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("creationTimestamp");
    refresh["status"] = json!({});
    let unreadable = observe(&s, &rs, &refresh);
    assert!(
        unreadable[0].contains("\"@every 90m\" runs that long after the last run"),
        "{unreadable:?}"
    );
    assert_eq!(s.upcoming(now, |_, _| true).unknown.len(), 1);
}

#[test]
fn from_is_read_for_an_every_schedule_only_and_with_cron_only() {
    let rules = |schedule: Value| -> RuleSetSpec {
        serde_json::from_value(json!({
            "component": "batch",
            "target": {"group": "batch", "version": "v1", "resource": "cronjobs"},
            "rules": [{"operation": "Running", "expression": "false", "schedule": schedule}],
        }))
        .unwrap()
    };
    // A `from` that fails on this object does not touch a schedule of fields.
    let strict = rules(json!({
        "cron": "object.spec.schedule",
        "from": "object.status.lastScheduleTime",
    }));
    let rs = compile(&Engine::new(), "cron", Some(1), &strict).unwrap();
    let s = Schedules::default();
    announce(&s, &rs, ("a", "daily"), "0 9 * * *");
    assert_eq!(
        starts(&s.upcoming(t("2026-11-26T08:00:00Z"), |_, _| true)),
        ["daily 2026-11-26T09:00:00Z"]
    );
    let at =
        rules(json!({"at": "object.spec.cutover", "from": "object.metadata.creationTimestamp"}));
    let Err(refused) = compile(&Engine::new(), "cron", Some(1), &at) else {
        panic!("at with from compiled");
    };
    assert!(
        refused
            .to_string()
            .contains("timeZone and from are read with cron only"),
        "{refused}"
    );
}

#[test]
fn a_time_announces_one_start_and_only_while_it_is_ahead() {
    let spec: RuleSetSpec = serde_json::from_value(json!({
        "component": "forklift",
        "target": {"group": "forklift.konveyor.io", "version": "v1beta1", "resource": "migrations"},
        "rules": [{"operation": "Cutover", "expression": "false",
                   "schedule": {"at": "object.?spec.?cutover.orValue('')"}}],
    }))
    .unwrap();
    let rs = compile(&Engine::new(), "migrations", Some(1), &spec).unwrap();
    let s = Schedules::default();
    let migration = json!({
        "apiVersion": "forklift.konveyor.io/v1beta1", "kind": "Migration",
        "metadata": {"name": "m", "namespace": "mtv", "uid": "u"},
        "spec": {"cutover": "2026-11-26T12:00:00Z"},
    });
    observe(&s, &rs, &migration);
    let ahead = s.upcoming(t("2026-11-26T08:00:00Z"), |_, _| true);
    assert_eq!(starts(&ahead), ["m 2026-11-26T12:00:00Z"]);
    assert_eq!(ahead.listed[0].schedule(), None);
    assert!(
        s.upcoming(t("2026-11-26T12:00:00Z"), |_, _| true)
            .listed
            .is_empty()
    );
}

/// A backup of the Schedule `schedule` of `namespace` (ruleset `backups`' `InProgress`, which
/// keys its durations by `velero.io/schedule-name`) that succeeded after `took`.
fn backup_of(
    namespace: &str,
    schedule: &str,
    took: SignedDuration,
) -> crate::operation::InFlightOperation {
    let subject = crate::operation::test_subject(
        "velero.io/v1",
        "Backup",
        Some(namespace),
        &format!("{schedule}-{}", took.as_secs()),
    );
    let op = crate::operation::test_active(
        &subject,
        ("backups", "oadp"),
        "InProgress",
        &[("velero.io/schedule-name", schedule)],
    );
    succeeded(op, took)
}

/// Schedules whose runs another ruleset detects (`durationsOf`), which keeps their durations
/// under the Schedule a label names (`durationsBy`): each Schedule's announced runs take its own
/// backups', never those of a Schedule of the same name in another namespace; a deleted
/// Schedule's go with it; without `durationsBy` the rule's.
#[test]
fn an_announced_run_takes_what_the_runs_kept_under_its_name_took() {
    let durations = Arc::new(Durations::default());
    let s = Schedules::new(durations.clone());
    let schedules = cronjob_rules(
        "velero",
        "oadp",
        Some(json!({"ruleSet": "backups", "operation": "InProgress"})),
    );
    let now = t("2026-11-26T08:00:00Z");
    let p50 = |name: &str, namespace: &str| {
        s.upcoming(now, |_, _| true)
            .listed
            .iter()
            .find(|u| {
                u.subject().name == name && u.subject().namespace.as_deref() == Some(namespace)
            })
            .and_then(|u| u.p50)
    };
    let hours = SignedDuration::from_hours(3);
    let seconds = SignedDuration::from_secs(5);
    // Six backups of each namespace's nightly Schedule: three hours in `a`, seconds in `b`.
    let backups = || {
        for took in 1..=6 {
            let took = SignedDuration::from_secs(took);
            durations.completed(&backup_of("a", "nightly", hours + took));
            durations.completed(&backup_of("b", "nightly", seconds + took));
        }
    };
    backups();
    // Not keyed by a label (yet): every Schedule takes the rule's mix.
    announce(&s, &schedules, ("a", "nightly"), "0 9 * * *");
    announce(&s, &schedules, ("b", "nightly"), "0 9 * * *");
    let mix = p50("nightly", "a");
    assert!(mix.is_some_and(|d| d < hours), "{mix:?}");
    assert_eq!(p50("nightly", "b"), mix);

    durations.keyed_by(
        "backups",
        &std::collections::BTreeMap::from([(
            "InProgress".to_owned(),
            "velero.io/schedule-name".to_owned(),
        )]),
    );
    backups();
    let (a, b) = (p50("nightly", "a").unwrap(), p50("nightly", "b").unwrap());
    assert!(
        a > hours && a < hours + SignedDuration::from_secs(10),
        "{a}"
    );
    assert!(
        b > seconds && b < seconds + SignedDuration::from_secs(10),
        "{b}"
    );

    // Schedule a/nightly deleted: what its backups took goes with it.
    s.subject_deleted("velero", "uid-a-nightly");
    assert!(
        durations
            .own("a/nightly", "backups", "InProgress")
            .is_none()
    );
    assert!(
        durations
            .own("b/nightly", "backups", "InProgress")
            .is_some()
    );
}
