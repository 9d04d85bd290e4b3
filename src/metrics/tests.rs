//! The exposition as Prometheus reads it, and the bounds on its series.

use super::operations::Operations;
use crate::index::{Handles, Index};
use crate::operation::{InFlightOperation, Outcome, Phase, test_active, test_subject};
use crate::track::Change;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use std::sync::Arc;

/// An active operation `operation` on VM `name` in `namespace`, on `node`.
fn active(namespace: &str, name: &str, operation: &str, node: &str) -> Arc<InFlightOperation> {
    let mut subject = test_subject("kubevirt.io/v1", "VirtualMachine", Some(namespace), name);
    subject.uid = format!("uid-{namespace}-{name}");
    let labels = [("ifo.kubevirt.io/node", node)];
    Arc::new(test_active(
        &subject,
        ("vm-rules", "kubevirt"),
        operation,
        &labels,
    ))
}

fn completed(
    op: &InFlightOperation,
    outcome: Outcome,
    after_seconds: i64,
) -> Arc<InFlightOperation> {
    Arc::new(InFlightOperation {
        phase: Phase::Completed,
        outcome: Some(outcome),
        completed: Some(op.created + jiff::SignedDuration::from_secs(after_seconds)),
        ..op.clone()
    })
}

/// A registry with the operation series over `index`; completions counted as the detector does.
fn exposition(index: &Handles, changes: Vec<Change>, ops: &Operations) -> String {
    for op in index.writer.apply(changes).completed {
        ops.completed(&op);
    }
    String::new()
}

/// A registry with the operation series (prefixed `ifo`) over a new index.
fn operations_over_an_index() -> (Registry, Operations, Handles) {
    let mut root = Registry::default();
    let ops = Operations::register(root.sub_registry_with_prefix("ifo"));
    let index = Index::new(1, 100, 10).into_handles();
    ops.source().set(index.reader.clone());
    (root, ops, index)
}

fn render(registry: &Registry) -> String {
    let mut out = String::new();
    encode(&mut out, registry).unwrap();
    out
}

/// Series lines of `family` (samples, not comments).
fn series<'a>(text: &'a str, family: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| !l.starts_with('#') && l.split(['{', ' ']).next() == Some(family))
        .collect()
}

#[test]
fn active_gauge_follows_the_index_and_completions_are_counted_with_their_duration() {
    let (root, ops, index) = operations_over_an_index();

    let a = active("ns1", "vm-a", "Migrating", "worker-1");
    let b = active("ns1", "vm-b", "Migrating", "worker-1");
    let c = active("ns2", "vm-c", "Starting", "");
    exposition(
        &index,
        vec![
            Change::Upsert(a.clone()),
            Change::Upsert(b.clone()),
            Change::Upsert(c.clone()),
        ],
        &ops,
    );
    let text = render(&root);
    assert_eq!(
        series(&text, "ifo_operations_active"),
        [
            r#"ifo_operations_active{component="kubevirt",operation="Migrating",kind="VirtualMachine",namespace="ns1",node="worker-1"} 2"#,
            r#"ifo_operations_active{component="kubevirt",operation="Starting",kind="VirtualMachine",namespace="ns2",node=""} 1"#,
        ]
    );

    assert_eq!(
        series(
            &text,
            "ifo_operations_oldest_active_start_timestamp_seconds"
        ),
        [
            r#"ifo_operations_oldest_active_start_timestamp_seconds{component="kubevirt",operation="Migrating",kind="VirtualMachine"} 1795341600.0"#,
            r#"ifo_operations_oldest_active_start_timestamp_seconds{component="kubevirt",operation="Starting",kind="VirtualMachine"} 1795341600.0"#,
        ]
    );

    // a migrates to worker-2 (the label changes): counted there, no longer on worker-1.
    let mut moved = (*a).clone();
    moved.labels.insert("ifo.kubevirt.io/node", "worker-2");
    let moved = Arc::new(moved);
    exposition(&index, vec![Change::Upsert(moved.clone())], &ops);
    // b completes after 90 s (and is removed, as without retention); c after 2 s, failed.
    exposition(
        &index,
        vec![
            Change::Upsert(completed(&b, Outcome::Succeeded, 90)),
            Change::Remove(completed(&b, Outcome::Succeeded, 90)),
            Change::Upsert(completed(&c, Outcome::Failed, 2)),
        ],
        &ops,
    );
    let text = render(&root);
    assert_eq!(
        series(&text, "ifo_operations_active"),
        [
            r#"ifo_operations_active{component="kubevirt",operation="Migrating",kind="VirtualMachine",namespace="ns1",node="worker-2"} 1"#,
        ],
        "series at zero are gone:\n{text}"
    );
    let counted = series(&text, "ifo_operations_completed_total");
    assert!(counted.contains(&r#"ifo_operations_completed_total{component="kubevirt",operation="Migrating",kind="VirtualMachine",outcome="Succeeded"} 1"#), "{text}");
    assert!(counted.contains(&r#"ifo_operations_completed_total{component="kubevirt",operation="Starting",kind="VirtualMachine",outcome="Failed"} 1"#), "{text}");
    let buckets = series(&text, "ifo_operation_duration_seconds_bucket");
    let migrating = |le: &str| {
        format!(
            r#"ifo_operation_duration_seconds_bucket{{le="{le}",component="kubevirt",operation="Migrating",kind="VirtualMachine",outcome="Succeeded"}}"#
        )
    };
    assert!(
        buckets.contains(&format!("{} 0", migrating("60.0")).as_str()),
        "{text}"
    );
    assert!(
        buckets.contains(&format!("{} 1", migrating("120.0")).as_str()),
        "{text}"
    );
    assert!(text.contains(r#"ifo_operation_duration_seconds_sum{component="kubevirt",operation="Migrating",kind="VirtualMachine",outcome="Succeeded"} 90.0"#), "{text}");

    // The retained completed c goes later: nothing is counted twice.
    exposition(
        &index,
        vec![Change::Remove(completed(&c, Outcome::Failed, 2))],
        &ops,
    );
    let again = render(&root);
    assert_eq!(
        series(&again, "ifo_operations_completed_total"),
        series(&text, "ifo_operations_completed_total")
    );
}

/// 1,000 namespaces with two operations each on ten nodes: the gauge has one series per label
/// set in use, the completion series do not grow with namespaces at all.
#[test]
fn cardinality_with_a_thousand_namespaces() {
    let (root, ops, index) = operations_over_an_index();
    let mut records = Vec::new();
    for n in 0..1000 {
        let ns = format!("ns-{n}");
        let node = format!("worker-{}", n % 10);
        records.push(active(&ns, "vm-a", "Migrating", &node));
        records.push(active(&ns, "vm-b", "Starting", &node));
    }
    exposition(
        &index,
        records.iter().cloned().map(Change::Upsert).collect(),
        &ops,
    );
    let during = render(&root);
    let active_series = series(&during, "ifo_operations_active").len();
    assert_eq!(active_series, 2000);

    let outcomes = [Outcome::Succeeded, Outcome::Failed];
    let changes = records
        .iter()
        .enumerate()
        .flat_map(|(i, r)| {
            let done = completed(r, outcomes[(i / 2) % 2], 30);
            [Change::Upsert(done.clone()), Change::Remove(done)]
        })
        .collect();
    exposition(&index, changes, &ops);
    let after = render(&root);
    let total: usize = after.lines().filter(|l| !l.starts_with('#')).count();
    let active_after = series(&after, "ifo_operations_active").len();
    let completed_series = series(&after, "ifo_operations_completed_total").len();
    let histogram_series = after
        .lines()
        .filter(|l| l.starts_with("ifo_operation_duration_seconds"))
        .count();
    println!(
        "1,000 namespaces, 2,000 operations on 10 nodes: {active_series} ifo_operations_active series while active; \
         after completion {active_after} active, {completed_series} completed_total, {histogram_series} duration lines, {total} samples in all"
    );
    assert_eq!(active_after, 0, "no stale series:\n{after}");
    // 2 operations × 2 outcomes.
    assert_eq!(completed_series, 4);
    // (14 buckets + +Inf + sum + count) per series.
    assert_eq!(histogram_series, 4 * 17);
}

#[test]
fn the_process_series_describe_this_process() {
    // Some CPU time to count: the clock ticks every 10 ms.
    let spin = std::time::Instant::now();
    while spin.elapsed() < std::time::Duration::from_millis(50) {
        std::hint::black_box(spin.elapsed());
    }
    let text = super::render();
    let value = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("{name} in {text}"))
            .parse()
            .unwrap()
    };
    #[allow(clippy::cast_precision_loss)]
    let now = jiff::Timestamp::now().as_second() as f64;
    let started = value("process_start_time_seconds");
    assert!(
        started <= now + 1.0 && started > now - 86_400.0,
        "started {started}, now {now}"
    );
    assert!(value("process_cpu_seconds_total") > 0.0);
    assert!(value("process_resident_memory_bytes") > 1_000_000.0);
    assert!(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
    let open = value("process_open_fds");
    assert!(
        open >= 3.0 && open <= value("process_max_fds"),
        "{open} open"
    );
}

#[test]
fn the_global_exposition_has_the_process_series_unprefixed() {
    let text = super::render();
    for wanted in [
        "# TYPE process_resident_memory_bytes gauge",
        "process_cpu_seconds_total ",
        "# TYPE ifo_operations_active gauge",
    ] {
        assert!(text.contains(wanted), "{wanted:?} in {text}");
    }
}

#[test]
fn gate_series_say_each_listed_gate_verdict_and_expected_end() {
    let gate = |name: &str, status: &str, active: u64, expected: Option<&str>| super::GateSeries {
        gate: name.to_owned(),
        clear: status.to_owned(),
        active,
        expected_clear: expected.map(|t: &str| t.parse::<jiff::Timestamp>().unwrap().as_second()),
    };
    let source = super::gates::GateSource::default();
    source.serve_from(move || {
        vec![
            gate("cluster", "Unknown", 1, None),
            gate("node.w1", "False", 1, Some("2026-11-22T10:04:00Z")),
        ]
    });
    let mut registry = Registry::default();
    registry
        .sub_registry_with_prefix("ifo")
        .register_collector(Box::new(source));
    let mut out = String::new();
    encode(&mut out, &registry).unwrap();
    for line in [
        r#"ifo_maintenance_gate_status{gate="cluster",status="Unknown"} 1"#,
        r#"ifo_maintenance_gate_status{gate="cluster",status="True"} 0"#,
        r#"ifo_maintenance_gate_status{gate="node.w1",status="False"} 1"#,
        r#"ifo_maintenance_gate_active_operations{gate="node.w1"} 1"#,
        r#"ifo_maintenance_gate_expected_clear_timestamp_seconds{gate="node.w1"} 1795341840.0"#,
    ] {
        assert!(
            out.lines().any(|l| l == line),
            "{line} missing from:\n{out}"
        );
    }
    assert!(
        !out.contains(r#"expected_clear_timestamp_seconds{gate="cluster"}"#),
        "{out}"
    );
}

#[test]
fn override_series_say_each_node_whose_override_is_in_force_with_its_start_and_end() {
    let source = super::overrides::OverrideSource::default();
    let mut registry = Registry::default();
    registry
        .sub_registry_with_prefix("ifo")
        .register_collector(Box::new(source));
    // Before the inventory is installed: the families, with no series.
    let out = render(&registry);
    assert!(
        out.contains("# TYPE ifo_guard_override_active gauge"),
        "{out}"
    );
    assert!(series(&out, "ifo_guard_override_active").is_empty());

    let source = super::overrides::OverrideSource::default();
    source.serve_from(|| {
        vec![
            super::OverrideSeries {
                node: "w1".into(),
                since: 1_795_341_600,
                end: None,
            },
            super::OverrideSeries {
                node: "w2".into(),
                since: 1_795_341_000,
                end: Some(1_795_345_200),
            },
        ]
    });
    let mut registry = Registry::default();
    registry
        .sub_registry_with_prefix("ifo")
        .register_collector(Box::new(source));
    let out = render(&registry);
    for line in [
        r#"ifo_guard_override_active{node="w1"} 1"#,
        r#"ifo_guard_override_active{node="w2"} 1"#,
        r#"ifo_guard_override_start_timestamp_seconds{node="w1"} 1795341600"#,
        r#"ifo_guard_override_start_timestamp_seconds{node="w2"} 1795341000"#,
        r#"ifo_guard_override_end_timestamp_seconds{node="w2"} 1795345200"#,
    ] {
        assert!(
            out.lines().any(|l| l == line),
            "{line} missing from:\n{out}"
        );
    }
    assert_eq!(
        series(&out, "ifo_guard_override_end_timestamp_seconds").len(),
        1
    );
}
