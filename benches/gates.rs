//! Server-side time of reading maintenance gates: the request through the API router (no
//! authentication layer) to the last byte of the body. 10,000 operations on 1,000 nodes (each
//! migration also counts on its target node), in 100 namespaces, one component: a list holds
//! the cluster, the component, 100 namespaces and 1,000 nodes. Lists are measured as they
//! repeat (each operation's gate form is rendered once per record) and as the first list after
//! every operation changed. With 1,000 CronJobs besides, their next runs announced (every 5 to
//! 120 minutes, in four time zones, 10 per namespace), the gates that list them: the cluster's
//! (its soonest 50 runs) and a namespace's (its runs within a day).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use ifo::api::{self, ApiState};
use ifo::evaluate::{Bound, Engine, evaluate};
use ifo::history::Durations;
use ifo::operation::Subject;
use ifo::ruleset::{RuleSetSpec, compile};
use ifo::schedule::Schedules;
use ifo::track::Change;
use serde_json::json;

mod fixture;
use fixture::{NAMESPACES, OPERATIONS, TABLE, get, index_on_nodes, on_nodes};

/// CronJobs announcing their next runs.
const CRONJOBS: usize = 1_000;

/// The next runs of [`CRONJOBS`] CronJobs, as the library's CronJob rule announces them.
fn scheduled() -> Schedules {
    let spec: RuleSetSpec = serde_json::from_value(json!({
        "component": "kubernetes",
        "target": {"group": "batch", "version": "v1", "resource": "cronjobs"},
        "rules": [{"operation": "Running", "expression": "object.?status.?active.orValue([]).size() > 0",
                   "schedule": {"cron": "object.spec.schedule", "timeZone": "object.?spec.?timeZone.orValue('')"}}],
    }))
    .unwrap();
    let rs = compile(&Engine::new(), "cronjob-rules", Some(1), &spec).unwrap();
    let schedules = Schedules::new(Arc::new(Durations::default()));
    let zones = ["", "Europe/Berlin", "America/New_York", "Asia/Kolkata"];
    for i in 0..CRONJOBS {
        let every = [5, 10, 15, 30, 60, 120][i % 6];
        let schedule = if every < 60 {
            format!("{}/{every} * * * *", i % every)
        } else {
            format!("{} */{} * * *", i % 60, every / 60)
        };
        let object = json!({
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": format!("cron-{i}"), "namespace": format!("ns-{}", i % NAMESPACES),
                         "uid": format!("cron-uid-{i}")},
            "spec": {"schedule": schedule, "timeZone": zones[i % zones.len()]},
        });
        let subject = Subject::from_object(&object).unwrap();
        let ev = evaluate(&rs.exprs, &Bound::new(&object));
        assert!(schedules.observe(&rs, &subject, &ev.starts).is_empty());
    }
    schedules
}

const GATES: &str = "/apis/live.ifo.kubevirt.io/v1alpha1/maintenancegates";

fn gates(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (index, readiness) = index_on_nodes();
    let router = api::router(Arc::new(ApiState::new(
        index.reader.clone(),
        readiness.clone(),
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

    let router = api::router(Arc::new(
        ApiState::new(index.reader.clone(), readiness.clone(), Default::default())
            .with_schedules(scheduled()),
    ));
    let mut group = c.benchmark_group("gates, 10k operations and 1,000 scheduled CronJobs");
    group.measurement_time(Duration::from_secs(8));
    group.sample_size(30);
    for (name, uri) in [
        ("get the cluster's gate", format!("{GATES}/cluster")),
        ("get a namespace's gate", format!("{GATES}/namespace.ns-7")),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| black_box(runtime.block_on(get(router.clone(), &uri, "application/json"))))
        });
    }
    // The first read: every CronJob's next run found (later reads take them from where the
    // last read left them, until they pass).
    group.bench_function("get the cluster's gate, every next run found", |b| {
        b.iter_batched(
            || {
                api::router(Arc::new(
                    ApiState::new(index.reader.clone(), readiness.clone(), Default::default())
                        .with_schedules(scheduled()),
                ))
            },
            |router| {
                black_box(runtime.block_on(get(
                    router,
                    &format!("{GATES}/cluster"),
                    "application/json",
                )))
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, gates);
criterion_main!(benches);
