//! Leader election: two replicas on one Lease, exactly one serving; a crash and a graceful stop
//! hand over to the other; resourceVersions of the old leader are refused by the new one.
//!
//! Each test has a Lease of its own (see `replicas`).

use std::time::{Duration, Instant};

use ifo_dev::User;
use serde_json::Value;

use super::harness::{Env, env, eventually};
use super::replicas::{LEASE_DURATION, LIST, get, labelled, list_rv, replica, the_leader};

fn lease_name(test: &str) -> String {
    format!("ifo-e2e-{test}-{}", std::process::id())
}

fn holder(env: &Env, lease: &str) -> String {
    env.kubectl(
        User::Admin,
        &[
            "-n",
            "ifo-system",
            "get",
            "lease",
            lease,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
    )
    .unwrap_or_default()
}

#[test]
fn one_replica_serves_and_a_crash_hands_over_within_the_lease_duration() {
    let env = env();
    let lease = lease_name("crash");
    let replicas = vec![replica(env, &lease, 0), replica(env, &lease, 1)];
    let leader = the_leader(env, &replicas);
    let standby = 1 - leader;
    assert!(
        !holder(env, &lease).is_empty(),
        "the Lease names its holder"
    );
    let leading = |i: usize| {
        let (_, metrics) = get(env, replicas[i].port, "/metrics");
        metrics
            .lines()
            .find(|l| l.starts_with("ifo_leader "))
            .map(str::to_owned)
    };
    assert_eq!(leading(leader).as_deref(), Some("ifo_leader 1"));
    assert_eq!(leading(standby).as_deref(), Some("ifo_leader 0"));
    // The standby is ready all the same (a rollout waits for readiness), and stays a standby.
    for _ in 0..3 {
        assert_eq!(get(env, replicas[standby].port, "/readyz").0, "200");
        assert_eq!(get(env, replicas[standby].port, LIST).0, "503");
        assert_eq!(get(env, replicas[leader].port, LIST).0, "200");
        std::thread::sleep(Duration::from_secs(1));
    }
    eventually(Duration::from_secs(10), "the leader's pod labelled", || {
        labelled(env, &replicas[leader]).then_some(())
    });
    assert!(!labelled(env, &replicas[standby]));
    let old_rv = list_rv(env, replicas[leader].port);
    let old_holder = holder(env, &lease);

    replicas[leader].process.kill();
    let killed = Instant::now();
    eventually(
        LEASE_DURATION + Duration::from_secs(10),
        "the standby serving",
        || (get(env, replicas[standby].port, LIST).0 == "200").then_some(()),
    );
    let failover = killed.elapsed();
    println!("failover after kill -9: {failover:?} (lease duration {LEASE_DURATION:?})");
    assert!(
        failover <= LEASE_DURATION + Duration::from_secs(5),
        "failover took {failover:?}"
    );
    assert_ne!(holder(env, &lease), old_holder);
    // The crashed leader could not remove its label: the new leader does.
    eventually(
        Duration::from_secs(10),
        "the new leader's pod labelled, the crashed one's not",
        || (labelled(env, &replicas[standby]) && !labelled(env, &replicas[leader])).then_some(()),
    );

    // RVs keep rising for clients, and the old leader's RVs are not resolved here.
    let new = replicas[standby].port;
    let new_rv = list_rv(env, new);
    assert!(new_rv > old_rv, "{new_rv} after {old_rv}");
    let (code, body) = get(
        env,
        new,
        &format!("{LIST}?resourceVersion={old_rv}&resourceVersionMatch=Exact"),
    );
    assert_eq!(code, "410", "{body}");
    let (code, body) = get(
        env,
        new,
        &format!("{LIST}?watch=1&resourceVersion={old_rv}&timeoutSeconds=2"),
    );
    assert_eq!(
        code, "200",
        "a watch answers, then reports the error in its stream"
    );
    let event: Value = serde_json::from_str(body.lines().next().unwrap()).unwrap();
    assert_eq!(event["type"], "ERROR", "{body}");
    assert_eq!(event["object"]["code"], 410, "{body}");
}

#[test]
fn a_graceful_stop_releases_the_lease_and_hands_over_at_once() {
    let env = env();
    let lease = lease_name("graceful");
    let replicas = vec![replica(env, &lease, 0), replica(env, &lease, 1)];
    let leader = the_leader(env, &replicas);
    let standby = 1 - leader;
    eventually(Duration::from_secs(10), "the leader's pod labelled", || {
        labelled(env, &replicas[leader]).then_some(())
    });
    let pid = i32::try_from(replicas[leader].process.pid()).unwrap();
    // SAFETY: sending a signal to a child process of ours.
    #[allow(unsafe_code)]
    let sent = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(sent, 0);
    let stopped = Instant::now();
    eventually(Duration::from_secs(15), "the standby serving", || {
        (get(env, replicas[standby].port, LIST).0 == "200").then_some(())
    });
    let handover = stopped.elapsed();
    println!("handover after SIGTERM: {handover:?}");
    assert!(
        handover <= Duration::from_secs(5),
        "handover took {handover:?}: the lease was not released"
    );
    let released_to = holder(env, &lease);
    assert!(!released_to.is_empty());
    replicas[leader].process.stop(Duration::from_secs(10));
    assert_eq!(get(env, replicas[standby].port, LIST).0, "200");
    // The Service follows: the old leader's pod lost its label, the new leader's has it.
    eventually(
        Duration::from_secs(10),
        "the new leader's pod labelled, the old one's not",
        || (labelled(env, &replicas[standby]) && !labelled(env, &replicas[leader])).then_some(()),
    );
}
