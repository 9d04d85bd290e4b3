//! Server-side time of a list: the request through the API router (no authentication layer)
//! to the last byte of the body, serialisation included. 10,000 operations in 100 namespaces,
//! built the way the debounce table builds them.
//!
//! `warm`: the objects' JSON is already built (each record is serialised once per
//! resourceVersion and shared by every later list and watch), the steady state.
//! `cold`: a fresh index, so the list also builds every object's JSON, as the first list after
//! a resync does.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use ifo::api::{self, ApiState};
use ifo::index::{Handles, Index};
use ifo::operation::InFlightOperation;
use ifo::readiness::Readiness;
use ifo::track::Change;
use tower::ServiceExt;

mod fixture;
use fixture::{TABLE, get, records};

const ALL: &str = "/apis/live.ifo.kubevirt.io/v1alpha1/inflightoperations";
const ONE_NAMESPACE: &str =
    "/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/ns-042/inflightoperations";

/// The router, and its index (so a benchmark can drop the index outside the timed part).
fn router(records: &[Arc<InFlightOperation>]) -> (Router, Handles) {
    let index = Index::new(1, 1024, 1024).into_handles();
    index
        .writer
        .apply(records.iter().cloned().map(Change::Upsert).collect());
    let (readiness, synced) = Readiness::new("the benchmark's records");
    synced.done();
    let state = Arc::new(ApiState::new(
        index.reader.clone(),
        readiness,
        Default::default(),
    ));
    (api::router(state), index)
}

/// What paging needs of a list body; the items are skipped, not parsed into values.
#[derive(serde::Deserialize)]
struct Page {
    metadata: PageMeta,
}

#[derive(serde::Deserialize)]
struct PageMeta {
    #[serde(rename = "continue")]
    continue_token: Option<String>,
}

/// Follows `continue` tokens until the last page; returns the number of pages.
async fn all_pages(router: &Router, limit: usize) -> usize {
    let mut pages = 0;
    let mut next = None::<String>;
    loop {
        let uri = match &next {
            Some(token) => format!("{ALL}?limit={limit}&continue={token}"),
            None => format!("{ALL}?limit={limit}"),
        };
        let request = Request::get(uri).body(Body::empty()).unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        pages += 1;
        let page: Page = serde_json::from_slice(&body).unwrap();
        match page.metadata.continue_token {
            Some(token) => next = Some(token),
            None => return pages,
        }
    }
}

fn lists(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let records = records();
    let (warm, _index) = router(&records);
    runtime.block_on(get(warm.clone(), ALL, "application/json"));

    let mut group = c.benchmark_group("list 10k");
    group.measurement_time(Duration::from_secs(8));
    group.sample_size(30);
    let cases = [
        ("table, all namespaces", ALL, TABLE),
        ("json, all namespaces", ALL, "application/json"),
        ("table, one namespace of 100", ONE_NAMESPACE, TABLE),
        (
            "json, one namespace of 100",
            ONE_NAMESPACE,
            "application/json",
        ),
    ];
    for (name, uri, accept) in cases {
        group.bench_function(format!("warm {name}"), |b| {
            b.iter(|| black_box(runtime.block_on(get(warm.clone(), uri, accept))))
        });
    }
    let first_page = format!("{ALL}?limit=500");
    group.bench_function("warm json, limit=500 first page", |b| {
        b.iter(|| black_box(runtime.block_on(get(warm.clone(), &first_page, "application/json"))))
    });
    group.bench_function("warm json, limit=500 all 20 pages", |b| {
        b.iter(|| black_box(runtime.block_on(all_pages(&warm, 500))))
    });
    for (name, uri, accept) in &cases[..2] {
        group.bench_function(format!("cold {name}"), |b| {
            b.iter_batched(
                || router(&records),
                // The index is returned so that it is dropped after the measurement.
                |(fresh, index)| (black_box(runtime.block_on(get(fresh, uri, accept))), index),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, lists);
criterion_main!(benches);
