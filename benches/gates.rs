//! Server-side time of reading maintenance gates: the request through the API router (no
//! authentication layer) to the last byte of the body. 10,000 operations on 1,000 nodes (each
//! migration also counts on its target node), in 100 namespaces, one component: a list holds
//! the cluster, the component, 100 namespaces and 1,000 nodes. Lists are measured as they
//! repeat (each operation's gate form is rendered once per record) and as the first list after
//! every operation changed.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use ifo::api::{self, ApiState};
use ifo::track::Change;

mod fixture;
use fixture::{OPERATIONS, TABLE, get, index_on_nodes, on_nodes};

const GATES: &str = "/apis/live.ifo.kubevirt.io/v1alpha1/maintenancegates";

fn gates(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (index, readiness) = index_on_nodes();
    let router = api::router(Arc::new(ApiState::new(
        index.reader.clone(),
        readiness,
        Default::default(),
    )));
    let listed = runtime.block_on(get(router.clone(), GATES, "application/json"));
    println!("a list of gates: {listed} bytes");

    let mut group = c.benchmark_group("gates, 10k operations on 1,000 nodes");
    group.measurement_time(Duration::from_secs(8));
    group.sample_size(30);
    let one_node = format!("{GATES}/node-0042");
    let one_node = one_node.replace("/node-", "/node.node-");
    for (name, uri, accept) in [
        ("list gates, table", GATES, TABLE),
        ("list gates, json", GATES, "application/json"),
        ("get one node's gate", one_node.as_str(), "application/json"),
        (
            "get the cluster's gate",
            &format!("{GATES}/cluster"),
            "application/json",
        ),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| black_box(runtime.block_on(get(router.clone(), uri, accept))))
        });
    }
    // The first list after every operation changed in a way the gates show (its progress):
    // nothing rendered for an earlier list serves.
    let mut round = 0.0;
    group.bench_function(
        "list gates, json, first after every operation changed",
        |b| {
            b.iter_batched(
                || {
                    round += 1.0;
                    let changed = (0..OPERATIONS).map(|i| {
                        let mut op = (*on_nodes(i)).clone();
                        op.progress = Some(round % 100.0);
                        Change::Upsert(Arc::new(op))
                    });
                    index.writer.apply(changed.collect());
                },
                |()| black_box(runtime.block_on(get(router.clone(), GATES, "application/json"))),
                BatchSize::PerIteration,
            )
        },
    );
    group.finish();
}

criterion_group!(benches, gates);
criterion_main!(benches);
