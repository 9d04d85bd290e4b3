//! What the metrics cost: a scrape of `/metrics` with many operations in flight (the gauges of
//! what is in flight are read from the index then), and the index applying one change, which
//! now also keeps the counts of `ifo_operations_active` (the event path).

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use ifo::index::{Handles, Index};
use ifo::operation::{InFlightOperation, RuleSetInfo, Subject};
use ifo::track::Change;

const NAMESPACES: usize = 1_000;
const NODES: usize = 50;
const OPERATIONS: [&str; 3] = ["Migrating", "Starting", "Stopping"];

/// Operation `i` in flight: one of three operations, in one of 1,000 namespaces, on one of 50
/// nodes.
fn operation(i: usize, node: usize) -> Arc<InFlightOperation> {
    let start: jiff::Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
    let at = start + jiff::SignedDuration::from_secs(i as i64);
    let subject = Subject {
        api_version: "kubevirt.io/v1".into(),
        kind: "VirtualMachine".into(),
        name: format!("vm-{i:05}"),
        namespace: Some(format!("ns-{:04}", i % NAMESPACES)),
        uid: format!("6f1c2a4e-0000-4000-8000-{i:012}"),
        ..Default::default()
    };
    let ruleset = RuleSetInfo {
        name: "kubevirt-vm-lifecycle".into(),
        component: "kubevirt".into(),
        ..Default::default()
    };
    let node = format!("worker-{node}");
    let (record, _) = InFlightOperation::new_active(
        &ruleset,
        OPERATIONS[i % OPERATIONS.len()],
        &subject,
        at,
        at,
        Some("migrating".into()),
        [("ifo.kubevirt.io/node", node.as_str())],
    );
    Arc::new(record)
}

fn index_with(operations: usize) -> Handles {
    let index = Index::new(1, 10_000, 1_000).into_handles();
    index.writer.apply(
        (0..operations)
            .map(|i| Change::Upsert(operation(i, i % NODES)))
            .collect(),
    );
    index
}

fn scrape(c: &mut Criterion) {
    let mut group = c.benchmark_group("scrape");
    for operations in [10_000, 50_000] {
        let index = index_with(operations);
        ifo::metrics::serve_active_from(index.reader.clone());
        let lines = ifo::metrics::render().lines().count();
        println!("{operations} operations in flight: {lines} lines of exposition");
        group.bench_function(format!("{operations} operations in flight"), |b| {
            b.iter(|| black_box(ifo::metrics::render()));
        });
    }
    group.finish();
}

fn apply(c: &mut Criterion) {
    let index = index_with(10_000);
    let mut group = c.benchmark_group("index apply, 10,000 operations held");
    // A message change: same occurrence, same labels (most changes).
    group.bench_function("update of an active operation", |b| {
        b.iter_batched(
            || {
                let mut next = (*operation(42, 42 % NODES)).clone();
                next.message = Some(format!("{}", fastrand::u32(..)));
                vec![Change::Upsert(Arc::new(next))]
            },
            |changes| index.writer.apply(changes),
            BatchSize::SmallInput,
        );
    });
    // The migration moves the operation to another node: counted elsewhere.
    group.bench_function("node label change", |b| {
        b.iter_batched(
            || vec![Change::Upsert(operation(7, fastrand::usize(..NODES)))],
            |changes| index.writer.apply(changes),
            BatchSize::SmallInput,
        );
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3));
    targets = scrape, apply
}
criterion_main!(benches);
