//! kube-apiserver hangs: every review the server makes has a deadline, so a request fails with a
//! clear 500 in about `K8S_API_TIMEOUT` instead of hanging, nothing of the failure is cached, and
//! the same request succeeds once kube-apiserver answers again.
//!
//! A test binary of its own (with its own cluster and server): freezing kube-apiserver would
//! disturb every other test.

#[path = "e2e/harness.rs"]
#[allow(dead_code)] // shared with the e2e binary; this one uses part of it
mod harness;

use harness::env;
use ifo_dev::User;
use std::time::{Duration, Instant};

/// The server's default `K8S_API_TIMEOUT`.
const DEADLINE: Duration = Duration::from_secs(10);

#[test]
fn reviews_fail_within_their_deadline_while_kube_apiserver_hangs() {
    let env = env();
    let path = "/apis/live.ifo.kubevirt.io/v1alpha1/inflightoperations";
    let alice = [
        "-H",
        "Authorization: Bearer alice-token",
        "--max-time",
        "60",
    ];
    env.cluster.freeze_apiserver(true).unwrap();
    let started = Instant::now();
    let (code, body) = env.direct(path, &alice);
    let took = started.elapsed();
    env.cluster.freeze_apiserver(false).unwrap();
    println!("TokenReview against a frozen kube-apiserver: {code} after {took:?}");
    assert_eq!(code, "500", "{body}");
    assert!(body.contains("TokenReview"), "{body}");
    assert!(
        took >= DEADLINE - Duration::from_secs(1),
        "failed after {took:?}"
    );
    assert!(
        took < DEADLINE + Duration::from_secs(5),
        "failed only after {took:?}"
    );

    // Not cached: the same token is reviewed again, and alice (no rights) is refused by RBAC.
    let (code, body) = harness::eventually(Duration::from_secs(60), "kube-apiserver back", || {
        let (code, body) = env.direct(path, &alice);
        (code != "500").then_some((code, body))
    });
    assert_eq!(code, "403", "{body}");
    assert!(body.contains(User::Alice.name()), "{body}");
}
