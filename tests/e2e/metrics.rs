//! `/metrics` as Prometheus reads it while operations start and end: the maintenance gate
//! (`ifo_operations_active` by node), completions by outcome and their durations, and the
//! API's own series. Other tests run against the same server at the same time, so every
//! assertion is on series of this test's own component and namespace.

use ifo_dev::User;
use ifo_test_support::{Env, Scope, env, eventually, vm};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// One sample line: name, labels, value.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The samples of a text exposition (label values here hold no quotes, commas or braces).
fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            let labels = labels
                .split(',')
                .filter(|p| !p.is_empty())
                .filter_map(|p| {
                    let (k, v) = p.split_once('=')?;
                    Some((k.to_string(), v.trim_matches('"').to_string()))
                })
                .collect();
            Some(Sample {
                name: name.to_string(),
                labels,
                value: value.parse().ok()?,
            })
        })
        .collect()
}

/// `/metrics` of the server, read directly as the cluster's admin (client certificate).
fn scrape(env: &Env) -> Vec<Sample> {
    parse(&env.metrics())
}

/// The samples of `name` whose labels include every pair of `with`.
fn select<'a>(samples: &'a [Sample], name: &str, with: &[(&str, &str)]) -> Vec<&'a Sample> {
    samples
        .iter()
        .filter(|s| {
            s.name == name
                && with
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect()
}

/// `sum(name{with})`, 0 when no series matches (PromQL's `or vector(0)`).
fn sum(samples: &[Sample], name: &str, with: &[(&str, &str)]) -> f64 {
    select(samples, name, with).iter().map(|s| s.value).sum()
}

/// A ruleset of component `component` for the VMs of `namespace`, setting the node label from
/// `status.nodeName`, as the shipped KubeVirt rules do.
fn ruleset(name: &str, component: &str, namespace: &str) -> String {
    json!({
        "apiVersion": "ifo.kubevirt.io/v1alpha1",
        "kind": "OperationRuleSet",
        "metadata": {"name": name},
        "spec": {
            "component": component,
            "target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachines"},
            "namespaces": [namespace],
            "labelExpressions": [
                {"key": "ifo.kubevirt.io/node", "expression": "object.?status.?nodeName.orValue('')"}
            ],
            "rules": [
                {
                    "operation": "Migrating",
                    "expression": "object.?status.?printableStatus.orValue('') == 'Migrating'",
                    "outcome": "object.?status.?lastMigration.orValue('') == 'Failed' ? 'Failed' : 'Succeeded'"
                },
                {
                    "operation": "Starting",
                    "expression": "object.?status.?printableStatus.orValue('') == 'Starting'"
                }
            ]
        }
    })
    .to_string()
}

#[test]
fn metrics_follow_operations_as_they_start_and_end() {
    let env = env();
    let scope = env.scope("metrics");
    let ruleset = ruleset(&scope.rs, &scope.component, &scope.ns);
    scope.watch(env, ruleset, &["vm1", "vm2", "vm3"]);
    let Scope {
        ns, component, rs, ..
    } = scope;
    let mine = [("component", component.as_str())];
    let active = "ifo_operations_active";

    // Nothing in flight: no series at all, and the gate's sum is 0.
    let before = scrape(env);
    assert!(select(&before, active, &mine).is_empty());
    assert!(select(&before, "ifo_operations_completed_total", &mine).is_empty());

    // Two migrations on worker-a, a start on worker-b.
    for (vm, status) in [
        (
            "vm1",
            json!({"printableStatus": "Migrating", "nodeName": "worker-a"}),
        ),
        (
            "vm2",
            json!({"printableStatus": "Migrating", "nodeName": "worker-a"}),
        ),
        (
            "vm3",
            json!({"printableStatus": "Starting", "nodeName": "worker-b"}),
        ),
    ] {
        env.set_vm_status(&ns, vm, status);
    }
    let during = eventually(WAIT, "three operations in the gauge", || {
        let s = scrape(env);
        (sum(&s, active, &mine) == 3.0).then_some(s)
    });
    let migrating = select(
        &during,
        active,
        &[("component", &component), ("operation", "Migrating")],
    );
    assert_eq!(migrating.len(), 1, "{migrating:?}");
    assert_eq!(
        migrating[0].labels,
        BTreeMap::from(
            [
                ("component", component.as_str()),
                ("operation", "Migrating"),
                ("kind", "VirtualMachine"),
                ("namespace", ns.as_str()),
                ("node", "worker-a"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        )
    );
    assert_eq!(migrating[0].value, 2.0);
    // What the API serves agrees.
    assert_eq!(env.ifos(&ns).len(), 3);
    // The gate for each node.
    assert_eq!(
        sum(
            &during,
            active,
            &[("component", &component), ("node", "worker-a")]
        ),
        2.0
    );
    assert_eq!(
        sum(
            &during,
            active,
            &[("component", &component), ("node", "worker-b")]
        ),
        1.0
    );
    assert_eq!(
        sum(
            &during,
            active,
            &[("component", &component), ("node", "worker-c")]
        ),
        0.0
    );
    // The oldest of each rule started a moment ago.
    let oldest = select(
        &during,
        "ifo_operations_oldest_active_start_timestamp_seconds",
        &mine,
    );
    assert_eq!(oldest.len(), 2, "{oldest:?}");
    let now = jiff::Timestamp::now().as_second() as f64;
    for s in oldest {
        assert!(
            (now - 120.0..=now + 5.0).contains(&s.value),
            "{s:?} now {now}"
        );
    }
    assert!(select(&during, "ifo_operations_completed_total", &mine).is_empty());

    // vm1's migration succeeds, vm2's fails, vm3 has started (no outcome expression: Unknown).
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Running"}));
    env.set_vm_status(
        &ns,
        "vm2",
        json!({"printableStatus": "Running", "lastMigration": "Failed"}),
    );
    env.set_vm_status(&ns, "vm3", json!({"printableStatus": "Running"}));
    // Still active during the debounce (3 s in these tests), then gone from the gauge.
    let after = eventually(WAIT, "the gauge back to nothing", || {
        let s = scrape(env);
        (select(&s, active, &mine).is_empty()
            && sum(&s, "ifo_operations_completed_total", &mine) == 3.0)
            .then_some(s)
    });
    assert!(env.ifos(&ns).is_empty());
    let completed = |operation: &str, outcome: &str| {
        sum(
            &after,
            "ifo_operations_completed_total",
            &[
                ("component", &component),
                ("operation", operation),
                ("kind", "VirtualMachine"),
                ("outcome", outcome),
            ],
        )
    };
    assert_eq!(completed("Migrating", "Succeeded"), 1.0);
    assert_eq!(completed("Migrating", "Failed"), 1.0);
    assert_eq!(completed("Starting", "Unknown"), 1.0);
    assert_eq!(
        select(&after, "ifo_operations_completed_total", &mine).len(),
        3
    );
    let duration = |suffix: &str, extra: &[(&str, &str)]| {
        let mut with = vec![
            ("component", component.as_str()),
            ("operation", "Migrating"),
            ("outcome", "Succeeded"),
        ];
        with.extend_from_slice(extra);
        sum(
            &after,
            &format!("ifo_operation_duration_seconds{suffix}"),
            &with,
        )
    };
    assert_eq!(duration("_count", &[]), 1.0);
    assert_eq!(duration("_bucket", &[("le", "+Inf")]), 1.0);
    assert_eq!(duration("_bucket", &[("le", "86400.0")]), 1.0);
    // From the start to when the rule stopped matching: this test's own few seconds.
    let seconds = duration("_sum", &[]);
    assert!((0.0..60.0).contains(&seconds), "{seconds}");
    assert_eq!(duration("_bucket", &[("le", "60.0")]), 1.0);
    assert!(
        select(
            &after,
            "ifo_operations_oldest_active_start_timestamp_seconds",
            &mine
        )
        .is_empty()
    );

    // The evaluations of the ruleset were timed; the API counted this test's own scrapes.
    assert!(
        sum(
            &after,
            "ifo_evaluation_duration_seconds_count",
            &[("ruleset", &rs)]
        ) >= 6.0
    );
    assert!(
        sum(
            &after,
            "ifo_api_requests_total",
            &[("verb", "get"), ("resource", ""), ("code", "200")]
        ) >= 3.0
    );
    assert!(
        sum(
            &after,
            "ifo_api_requests_total",
            &[("resource", "inflightoperations"), ("verb", "list")]
        ) >= 1.0
    );
    assert!(sum(&after, "process_resident_memory_bytes", &[]) > 0.0);
    // The shared server started before this test and synced: both stages are reported, the
    // sync no sooner than readiness.
    let ready = sum(&after, "ifo_initial_sync_seconds", &[("stage", "ready")]);
    let complete = sum(&after, "ifo_initial_sync_seconds", &[("stage", "complete")]);
    assert!(
        ready > 0.0 && complete >= ready,
        "initial sync: ready {ready} s, complete {complete} s"
    );

    // The log names the ruleset, subject and operation of each: starts and completions at
    // debug (these tests log `ifo=debug`), the failure at warn.
    let log = std::fs::read_to_string(env.cluster.dir().join("ifo-apiserver.log")).unwrap();
    let about = |vm: &str, what: &str| {
        let subject = format!("subject={ns}/{vm}");
        let ruleset = format!("ruleset={rs}");
        log.lines()
            .find(|l| l.contains(what) && l.contains(&subject) && l.contains(&ruleset))
            .unwrap_or_else(|| panic!("no {what:?} line for {vm}"))
            .to_string()
    };
    // Plain text in a file: no terminal colour codes around the fields.
    assert!(!log.contains('\u{1b}'), "escape codes in the log");
    let started = about("vm1", "operation started");
    assert!(
        started.contains("DEBUG") && started.contains("operation=Migrating"),
        "{started}"
    );
    let completed = about("vm1", "operation completed");
    assert!(completed.contains("outcome=Succeeded"), "{completed}");
    let failed = about("vm2", "operation failed");
    assert!(
        failed.contains("WARN")
            && failed.contains("operation=Migrating")
            && failed.contains("outcome=Failed"),
        "{failed}"
    );

    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

/// A busy ruleset's status is written at most about once per `RULESET_STATUS_INTERVAL` (5 s for
/// these tests, a minute by default) while its operations churn, not at every change (it was
/// written at every 2 s tick: 20 writes in the demo's 120 s).
#[test]
fn a_busy_rulesets_status_is_written_at_its_interval_not_at_every_change() {
    let env = env();
    let (ns, rs) = env.namespace_with_ruleset("writes", "writes", ifo_test_support::vm_ruleset);
    env.wait_watching(&rs);
    // What a new ruleset writes at once (Ready, the first counts) is done.
    std::thread::sleep(Duration::from_secs(6));
    let writes = || {
        sum(
            &scrape(env),
            "ifo_ruleset_status_writes_total",
            &[("ruleset", rs.as_str())],
        )
    };
    let before = writes();
    let started = std::time::Instant::now();
    // A VM more starting about every second: the ruleset's count of active operations changes
    // as often.
    let mut started_vms = 0;
    while started.elapsed() < Duration::from_secs(20) {
        let name = format!("vm-{started_vms}");
        env.apply(&vm(&name, &ns));
        env.set_vm_status(&ns, &name, json!({"printableStatus": "Starting"}));
        started_vms += 1;
        std::thread::sleep(Duration::from_millis(500));
    }
    let written = writes() - before;
    let window = started.elapsed();
    println!("{started_vms} VMs starting in {window:?}: {written} status writes of ruleset {rs}");
    assert!(started_vms >= 10, "only {started_vms} VMs started");
    let status = env.get_json(User::Admin, &["get", "ors", &rs]);
    assert!(
        status["status"]["activeOperations"].as_u64() > Some(1),
        "the status never showed the churn: {status}"
    );
    // One at the first change after the quiet while, then one an interval.
    let most = (window.as_secs_f64() / 5.0).ceil() + 1.0;
    assert!(
        written <= most,
        "{written} status writes in {window:?} (at most {most})"
    );
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}
