//! The index's cost to apply a change, in a form that can be counted exactly: the same index as
//! `benches/index.rs` (10,000 records, 500 live watchers) applies a fixed series of changes,
//! each through a function of its own ([`update`], [`start_then_end`]), so that callgrind can
//! count the instructions (and simulated cache misses) spent in them and nothing else:
//! `tests/gates-cost.sh` does, with and without the maintenance gates' update compiled in, and
//! prints both. Timings on a shared machine spread by more than the difference measured; counts
//! of the same binary on the same input do not.
//!
//! Run on its own (`cargo bench --bench index_cost`), it prints the time per change instead.

use std::hint::black_box;
use std::time::Instant;

use ifo::index::{Handles, Index, OperationsWriter};
use ifo::track::Change;

mod fixture;
use fixture::{OPERATIONS, progressed, records};

/// The server's allocator (`src/main.rs`): what allocation costs here is what it costs there.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const WATCHERS: usize = 500;
/// Changes of each kind applied unless `--changes N` says otherwise (callgrind runs the binary
/// some 50 times slower than native).
const CHANGES: usize = 20_000;

/// An update that moves no gate: a running migration's new message.
#[inline(never)]
fn update(index: &OperationsWriter, changes: Vec<Change>) {
    black_box(index.apply(changes));
}

/// An operation starting and then ending: it enters and leaves its scopes.
#[inline(never)]
fn start_then_end(index: &OperationsWriter, start: Vec<Change>, end: Vec<Change>) {
    black_box(index.apply(start));
    black_box(index.apply(end));
}

fn main() {
    // Workloads by name (`update`, `start-end`; none: both), `--changes N`; other flags are
    // cargo's (`--bench`).
    let mut args = std::env::args().skip(1);
    let mut workloads = Vec::new();
    let mut changes = CHANGES;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--changes" => {
                changes = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("--changes takes a number")
            }
            flag if flag.starts_with("--") => {}
            workload => workloads.push(workload.to_owned()),
        }
    }
    let run = |name: &str| workloads.is_empty() || workloads.iter().any(|w| w == name);

    let Handles { writer, reader, .. } = Index::new(1, 1024, 1024).into_handles();
    writer.apply(records().into_iter().map(Change::Upsert).collect());
    let watchers: Vec<_> = (0..WATCHERS)
        .map(|_| reader.watch_from(reader.current_rv()).unwrap())
        .collect();
    let index = &writer;
    // Not counted: every record updated once and the event history filled, so that each update
    // counted frees the state it replaces (once out of the history) with the gates or without:
    // a gate entry keeps the state its operation entered in alive, which the first update of a
    // record would otherwise free only without them.
    index.apply(
        (0..OPERATIONS)
            .map(|i| Change::Upsert(progressed(i, 0)))
            .collect(),
    );

    // Every input is made before the first change is applied, so that only applying is counted.
    let mut i = 0;
    let mut next = || {
        i = (i + 7919) % OPERATIONS;
        i
    };
    if run("update") {
        let updates: Vec<_> = (0..changes)
            .map(|_| {
                let i = next();
                vec![Change::Upsert(progressed(i, i % 100))]
            })
            .collect();
        let began = Instant::now();
        for batch in updates {
            update(index, batch);
        }
        report("an update", changes, began);
    }
    if run("start-end") {
        let operations: Vec<_> = (0..changes)
            .map(|occurrence| fixture::start_then_end(next(), occurrence as u64))
            .collect();
        let began = Instant::now();
        for (start, end) in operations {
            start_then_end(index, start, end);
        }
        report("an operation starting, then ending", changes, began);
    }
    drop(watchers);
}

fn report(what: &str, changes: usize, began: Instant) {
    let per = began.elapsed() / changes.max(1) as u32;
    println!("index_cost: {what}: {per:.2?} each ({changes} of them)");
}
