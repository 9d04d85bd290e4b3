//! Server-side time of the maintenance guard's decision: an AdmissionReview of an eviction, as
//! kube-apiserver sends it, through the door's router (body read, review parsed, the pod's node
//! looked up, the node's gate computed, the answer written) to the last byte of the answer.
//! 10,000 operations on 1,000 nodes, 10 pods a node.
//!
//! Four figures: reviews paced at 100 a second for 10 s (a busy drain of many nodes at once), as
//! p50, p99 and max; reviews back to back, as a drain tool retrying in a tight loop would send
//! them, as reviews a second on one core; reviews of an Eviction padded with 70 KB of
//! annotations (which kube-apiserver sends whole), paced, as p50, p99 and max; and, the same way,
//! reviews of 128 KiB whose object holds the costliest JSON to skip (an array of small numbers),
//! the most a review parsed where it is read may cost a worker.
//!
//! `cargo bench --bench guard`

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use ifo::api::ApiState;
use serde_json::json;
use tower::ServiceExt;

mod fixture;
use fixture::{NODES, OPERATIONS, index_on_nodes};

/// Pods on each node.
const PODS_PER_NODE: usize = 10;

/// Annotations of a padded Eviction (the third figure): a review of about 72 KB, past what a
/// review's turn reads (64 KiB), so read in a large review's turn.
const PADDING: usize = 70 << 10;

fn review(pod: usize) -> Vec<u8> {
    padded_review(pod, 0)
}

/// The review of an eviction of `pod` whose Eviction carries `padding` bytes of annotations.
fn padded_review(pod: usize, padding: usize) -> Vec<u8> {
    let name = format!("pod-{pod:05}");
    let namespace = format!("ns-{:03}", pod % 100);
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": format!("00000000-0000-4000-8000-{pod:012}"),
            "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction",
            "requestKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "requestSubResource": "eviction",
            "name": name,
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:kured", "groups": ["system:serviceaccounts"]},
            "object": {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace,
                    "annotations": {"padding": "x".repeat(padding)}}},
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    }))
    .unwrap()
}

/// A review of 128 KiB (the most parsed where it is read) whose object carries an array of
/// zeros: the costliest JSON to skip per byte.
fn dense_review() -> Vec<u8> {
    const BYTES: usize = 128 << 10;
    let mut review: serde_json::Value = serde_json::from_slice(&review(0)).unwrap();
    let base = serde_json::to_vec(&review).unwrap().len() + r#","dense":[]"#.len();
    // n zeros take 2n - 1 bytes.
    review["request"]["object"]["dense"] = json!(vec![0u8; (BYTES - base).div_ceil(2)]);
    let body = serde_json::to_vec(&review).unwrap();
    assert!(body.len() <= BYTES && body.len() >= BYTES - 1);
    body
}

/// The reviews `body(i)` sent through the door 100 times a second for `seconds`: their times,
/// sorted, and how many were allowed.
fn paced(
    runtime: &tokio::runtime::Runtime,
    router: &Router,
    seconds: u64,
    body: impl Fn(u64) -> Vec<u8>,
) -> (Vec<Duration>, usize) {
    let mut times = Vec::new();
    let mut allowed = 0;
    let start = Instant::now();
    for i in 0..seconds * 100 {
        let due = start + Duration::from_millis(10 * i);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let body = body(i);
        let t = Instant::now();
        allowed += usize::from(runtime.block_on(decide(router.clone(), body)));
        times.push(t.elapsed());
    }
    times.sort();
    (times, allowed)
}

/// One review through the door; whether it was allowed.
async fn decide(router: Router, body: Vec<u8>) -> bool {
    let request = Request::post("/admission/evictions")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .unwrap();
    let response = router.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let answer: serde_json::Value = serde_json::from_slice(&body).unwrap();
    answer["response"]["allowed"] == true
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let (index, readiness) = index_on_nodes();
    let nodes: Vec<String> = (0..NODES).map(|n| format!("node-{n:04}")).collect();
    // Half the nodes' pods on nodes with nothing in flight: the operations are on node-0000 to
    // node-0999 with some on each, so add as many idle nodes.
    let all_nodes: Vec<String> = nodes
        .iter()
        .cloned()
        .chain((0..NODES).map(|n| format!("idle-{n:04}")))
        .collect();
    let pods: Vec<(String, String, String)> = (0..NODES * PODS_PER_NODE * 2)
        .map(|p| {
            (
                format!("ns-{:03}", p % 100),
                format!("pod-{p:05}"),
                all_nodes[p % all_nodes.len()].clone(),
            )
        })
        .collect();
    let router = ifo::admission::evictions_router(
        ApiState::new(index.reader.clone(), readiness, Default::default()),
        &all_nodes,
        &pods,
    );
    let reviews: Vec<Vec<u8>> = (0..pods.len()).map(review).collect();
    println!(
        "the guard: {OPERATIONS} operations on {NODES} nodes, {} nodes without, {} pods; a review is {} bytes",
        NODES,
        pods.len(),
        reviews[0].len()
    );

    // Paced: 100 reviews a second for 10 s.
    let (times, allowed) = paced(&runtime, &router, 10, |i| {
        reviews[(i as usize * 7919) % reviews.len()].clone()
    });
    let denied = times.len() - allowed;
    println!(
        "paced, 100 reviews/s for 10 s: p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs ({denied} held, {allowed} allowed)",
        percentile(&times, 0.5).as_secs_f64() * 1e6,
        percentile(&times, 0.99).as_secs_f64() * 1e6,
        times.last().unwrap().as_secs_f64() * 1e6,
    );

    // Back to back: one drain tool retrying the same eviction in a tight loop.
    let body = reviews[0].clone();
    let n = 20_000;
    let t = Instant::now();
    for _ in 0..n {
        runtime.block_on(decide(router.clone(), body.clone()));
    }
    let took = t.elapsed();
    println!(
        "back to back, one eviction retried {n} times: {:.0} reviews/s on one core ({:.1} µs each)",
        n as f64 / took.as_secs_f64(),
        took.as_secs_f64() * 1e6 / n as f64
    );

    // Padded: 70 KB of annotations; dense: 128 KiB of zeros; 100 reviews a second for 5 s each.
    for (what, body) in [
        ("padded", padded_review(0, PADDING)),
        ("dense", dense_review()),
    ] {
        let (times, _) = paced(&runtime, &router, 5, |_| body.clone());
        println!(
            "{what} ({} bytes), 100 reviews/s for 5 s: p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
            body.len(),
            percentile(&times, 0.5).as_secs_f64() * 1e6,
            percentile(&times, 0.99).as_secs_f64() * 1e6,
            times.last().unwrap().as_secs_f64() * 1e6,
        );
    }
}
