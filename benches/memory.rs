//! Bytes of memory held per active operation, counted by the allocator (DHAT's): the record,
//! its place in the maps (records, metric counts, maintenance gates), its event in the history
//! ring, and the wire forms a list or watch serialises once and keeps. Prints its figures; the
//! server's whole resident memory at scale is `ifo-bench --scale`'s.

use ifo::index::Index;
use ifo::track::Change;

mod fixture;

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

/// Bytes allocated and not freed now.
fn live() -> isize {
    dhat::HeapStats::get().curr_bytes as isize
}

/// Active operations, as at `ifo-bench --scale` with 100,000 subjects.
const ACTIVE: usize = 20_000;
/// The server's defaults (`EVENT_HISTORY`, `WATCH_BUFFER`).
const EVENT_HISTORY: usize = 10_000;
const WATCH_BUFFER: usize = 1_000;

fn per_operation(bytes: isize) -> f64 {
    bytes as f64 / ACTIVE as f64
}

fn main() {
    // `cargo bench` passes `--bench`: there is nothing to choose. Counting only: DHAT's full
    // profile (`dh_view`) is not written.
    let _profiler = dhat::Profiler::builder().testing().build();
    let base = live();
    let records: Vec<_> = (0..ACTIVE)
        .map(|i| std::sync::Arc::new(fixture::active(i)))
        .collect();
    let made = live() - base;
    let before = live();
    let index = Index::new(1, EVENT_HISTORY, WATCH_BUFFER).into_handles();
    index
        .writer
        .apply(records.iter().cloned().map(Change::Upsert).collect());
    let kept = live() - before;
    // What a list does: every record's wire form, serialised once and kept with it.
    let snapshot = index.reader.snapshot();
    let before = live();
    for stored in &snapshot.items {
        std::hint::black_box(stored.object());
    }
    let object = live() - before;
    let before = live();
    for stored in &snapshot.items {
        std::hint::black_box(stored.metadata());
    }
    let metadata = live() - before;
    println!("memory per active operation ({ACTIVE} active, a history of {EVENT_HISTORY} events):");
    let row = |what: &str, bytes: isize| println!("  {what:<58} {:>6.0} B", per_operation(bytes));
    row("the record (InFlightOperation)", made);
    row(
        "the index's share (maps, counts, gates, history, fan-out)",
        kept,
    );
    row("its JSON, once listed or watched", object);
    row("its metadata, once listed as a Table", metadata);
    row("in all", made + kept + object + metadata);
    // What the event history counts for it (`EVENT_HISTORY_MIB`): the record and its JSON.
    let estimate: usize = snapshot.items.iter().map(|s| s.op.approx_bytes()).sum();
    row(
        "the history's estimate of the record and its JSON",
        estimate as isize,
    );
    drop((snapshot, index, records));
}
