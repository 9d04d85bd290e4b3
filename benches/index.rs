//! What the index's map costs, and what the alternatives would: the same 10,000 records under
//! the three maps the index could use.
//!
//! - `btree`: what the index is, a `BTreeMap` under one lock. A consistent snapshot copies the
//!   record pointers (one `Arc` clone each), already sorted.
//! - `dashmap`: a sharded concurrent hash map. Writers do not block each other, but a
//!   consistent snapshot still needs every writer stopped (one lock again), and it must be
//!   sorted for `continue` tokens.
//! - `ordmap`: a persistent ordered map (`imbl::OrdMap`). A snapshot is an O(1) clone that shares
//!   structure with the live map; each write copies a path of the tree instead.
//!
//! Each is measured for what the index does per change (replace one record) and per list
//! (take a snapshot, then read it through), with 500 live watchers subscribed to the real index
//! for its write: the fan-out is the same whichever map holds the records.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BatchSize, BenchmarkGroup, Criterion, criterion_group, criterion_main};
use dashmap::DashMap;
use ifo::history::{self, Durations};
use ifo::index::{Index, ObjectKey, Stored};
use ifo::track::Change;

mod fixture;

/// The server's allocator (`src/main.rs`): what allocation costs here is what it costs there.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
use fixture::{OPERATIONS, progressed, records, start_then_end};

const WATCHERS: usize = 500;

fn key(stored: &Stored) -> ObjectKey {
    stored.key()
}

fn stored_records() -> Vec<Arc<Stored>> {
    records()
        .into_iter()
        .enumerate()
        .map(|(i, op)| Arc::new(Stored::new(i as u64 + 1, op)))
        .collect()
}

/// The record replacing another at each step: a stride over the records, so that successive
/// writes land far apart.
fn next(i: &mut usize) -> (ObjectKey, Arc<Stored>) {
    *i = (*i + 7919) % OPERATIONS;
    let record = Arc::new(Stored::new(0, progressed(*i, *i % 100)));
    (key(&record), record)
}

/// What replacing one record costs in the map `name` that `insert` writes to.
fn replace_one(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    i: &mut usize,
    mut insert: impl FnMut(ObjectKey, Arc<Stored>) -> Option<Arc<Stored>>,
) {
    group.bench_function(format!("{name}: replace one record"), |b| {
        b.iter_batched(
            || next(i),
            |(k, v)| black_box(insert(k, v)),
            BatchSize::SmallInput,
        )
    });
}

fn maps(c: &mut Criterion) {
    let stored = stored_records();
    let btree: std::collections::BTreeMap<ObjectKey, Arc<Stored>> =
        stored.iter().map(|s| (key(s), s.clone())).collect();
    let dashmap: DashMap<ObjectKey, Arc<Stored>> =
        stored.iter().map(|s| (key(s), s.clone())).collect();
    let ordmap: imbl::OrdMap<ObjectKey, Arc<Stored>> =
        stored.iter().map(|s| (key(s), s.clone())).collect();

    let mut group = c.benchmark_group("index 10k");
    group.measurement_time(Duration::from_secs(4));

    let mut i = 0;
    let mut map = btree.clone();
    replace_one(&mut group, "btree", &mut i, |k, v| map.insert(k, v));
    let map = dashmap.clone();
    replace_one(&mut group, "dashmap", &mut i, |k, v| map.insert(k, v));
    let mut map = ordmap.clone();
    replace_one(&mut group, "ordmap", &mut i, |k, v| map.insert(k, v));

    group.bench_function("btree: consistent sorted snapshot", |b| {
        b.iter(|| black_box(btree.values().cloned().collect::<Vec<_>>()))
    });
    group.bench_function("dashmap: consistent sorted snapshot", |b| {
        b.iter(|| {
            let mut items: Vec<_> = dashmap.iter().map(|e| e.value().clone()).collect();
            items.sort_unstable_by(|a, b| {
                (a.op.namespace.as_deref(), a.op.name.as_str())
                    .cmp(&(b.op.namespace.as_deref(), b.op.name.as_str()))
            });
            black_box(items)
        })
    });
    group.bench_function("ordmap: consistent sorted snapshot", |b| {
        b.iter(|| black_box(ordmap.clone()))
    });

    let snapshot: Vec<_> = btree.values().cloned().collect();
    group.bench_function("btree: read a snapshot through", |b| {
        b.iter(|| snapshot.iter().map(|s| black_box(s.rv)).sum::<u64>())
    });
    group.bench_function("ordmap: read a snapshot through", |b| {
        b.iter(|| ordmap.values().map(|s| black_box(s.rv)).sum::<u64>())
    });
    group.finish();

    // The index as it is: the write each change makes, with 500 watchers subscribed.
    let index = Index::new(1, 1024, 1024).into_handles();
    index
        .writer
        .apply(records().into_iter().map(Change::Upsert).collect());
    let reader = index.reader.clone();
    let watchers: Vec<_> = (0..WATCHERS)
        .map(|_| reader.watch_from(reader.current_rv()).unwrap())
        .collect();
    let mut group = c.benchmark_group("index 10k, 500 watchers");
    group.measurement_time(Duration::from_secs(4));
    group.bench_function("apply one change", |b| {
        b.iter_batched(
            || {
                i = (i + 7919) % OPERATIONS;
                vec![Change::Upsert(progressed(i, i % 100))]
            },
            |changes| index.writer.apply(changes),
            BatchSize::SmallInput,
        )
    });
    // An operation starting and then ending: it enters and leaves its scopes (the counts of
    // `ifo_operations_active` and of the maintenance gates).
    let mut occurrence = 0u64;
    group.bench_function("apply an operation starting, then ending", |b| {
        b.iter_batched(
            || {
                i = (i + 7919) % OPERATIONS;
                occurrence += 1;
                start_then_end(i, occurrence)
            },
            |(start, end)| (index.writer.apply(start), index.writer.apply(end)),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("snapshot", |b| b.iter(|| black_box(reader.snapshot())));
    // What the detector adds to each change it publishes: the record's expectation from the
    // durations learned for its rule (here with history for every operation), then the write.
    let durations = Durations::default();
    for record in records().iter().filter(|r| r.completed.is_some()) {
        durations.completed(record);
    }
    let now = jiff::Timestamp::now();
    group.bench_function("expectation of one change", |b| {
        b.iter_batched(
            || {
                i = (i + 7919) % OPERATIONS;
                progressed(i, i % 100)
            },
            |op| black_box(history::refreshed(&op, &durations, now)),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("apply one change with its expectation", |b| {
        b.iter_batched(
            || {
                i = (i + 7919) % OPERATIONS;
                progressed(i, i % 100)
            },
            |op| {
                let op = history::refreshed(&op, &durations, now).unwrap_or(op);
                index.writer.apply(vec![Change::Upsert(op)])
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
    drop(watchers);
}

criterion_group!(benches, maps);
criterion_main!(benches);
