//! kube-apiserver hangs: every review the server makes has a deadline, so a request fails with a
//! clear 500 in about `K8S_API_TIMEOUT` instead of hanging, nothing of the failure is cached, and
//! the same request succeeds once kube-apiserver answers again; and a leader that cannot renew
//! its Lease stops serving.
//!
//! A test binary of its own (with its own cluster and server): freezing kube-apiserver would
//! disturb every other test.

use ifo_dev::User;
use ifo_test_support::{env, eventually, replicas};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Each test freezes the one kube-apiserver: one at a time.
static FROZEN: Mutex<()> = Mutex::new(());

/// The server's default `K8S_API_TIMEOUT`.
const DEADLINE: Duration = Duration::from_secs(10);

#[test]
fn reviews_fail_within_their_deadline_while_kube_apiserver_hangs() {
    let _one_at_a_time = FROZEN.lock().unwrap_or_else(|p| p.into_inner());
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
    let (code, body) = eventually(Duration::from_secs(60), "kube-apiserver back", || {
        let (code, body) = env.direct(path, &alice);
        (code != "500").then_some((code, body))
    });
    assert_eq!(code, "403", "{body}");
    assert!(body.contains(User::Alice.name()), "{body}");
}

/// A leader that cannot renew its Lease within the renew deadline stops serving: for a
/// maintenance gate, answers from a replica that may no longer lead are worse than none.
#[test]
fn a_leader_that_cannot_renew_stops_serving_and_serves_again_once_it_leads() {
    let _one_at_a_time = FROZEN.lock().unwrap_or_else(|p| p.into_inner());
    let env = env();
    let lease = format!("ifo-outage-{}", std::process::id());
    let leader = replicas::replica(env, &lease, 0);
    eventually(Duration::from_secs(60), "the replica leading", || {
        (replicas::get(env, leader.port, replicas::LIST).0 == "200").then_some(())
    });
    let before = replicas::list_rv(env, leader.port);
    // A client on one kept-alive HTTP/2 connection, as kube-apiserver's proxy is: two requests a
    // second for 15 s, each reporting whether it had to connect.
    let client = env.keep_alive_client(leader.port, replicas::LIST, 30, 2);
    // The admin's authorization is cached for 10 s: requests reach the leadership check while
    // kube-apiserver hangs.
    env.cluster.freeze_apiserver(true).unwrap();
    let frozen = Instant::now();
    let mut refused = None;
    while frozen.elapsed() < Duration::from_secs(9) {
        std::thread::sleep(Duration::from_millis(500));
        let (code, body) = replicas::get(env, leader.port, replicas::LIST);
        if code == "503" {
            refused = Some((frozen.elapsed(), body));
            break;
        }
    }
    env.cluster.freeze_apiserver(false).unwrap();
    let (after, body) = refused.expect("the leader kept serving without its lease");
    println!("leader stopped serving {after:?} after kube-apiserver froze (renew deadline 4s)");
    assert!(body.contains("not the leader"), "{body}");
    assert!(
        after >= Duration::from_secs(3),
        "stopped after {after:?}, before its deadline"
    );
    // Once kube-apiserver answers, it takes the lease again and serves, in a new epoch.
    eventually(Duration::from_secs(60), "the replica leading again", || {
        (replicas::get(env, leader.port, replicas::LIST).0 == "200").then_some(())
    });
    assert!(replicas::list_rv(env, leader.port) > before);
    // Stepping down closed the connection (else a proxy would keep sending to a replica that
    // does not lead): the client connected again.
    let connects = client.connects();
    assert_eq!(connects.first(), Some(&1), "{connects:?}");
    assert!(
        connects.iter().skip(1).any(|&c| c > 0),
        "the connection outlived the term: {connects:?}"
    );
}
