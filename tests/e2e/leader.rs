//! Leader election: two replicas on one Lease, exactly one serving; a crash and a graceful stop
//! hand over to the other; a crash that kubelet reports hands over before the Lease expires, and
//! an end that does not prove the leader gone changes nothing; resourceVersions of the old leader
//! are refused by the new one.
//!
//! Each test has a Lease of its own (see `ifo_test_support::replicas`).

use std::time::{Duration, Instant};

use ifo_dev::User;
use serde_json::Value;

use ifo_test_support::replicas::{
    LEASE_DURATION, LIST, Replica, elected_pair, get, labelled, list_rv, marked, the_leader,
};
use ifo_test_support::{Env, env, eventually};

/// How long a new leader stays marked standby (docs/operating.md#high-availability).
const STANDBY_OVERLAP: Duration = Duration::from_secs(10);

fn lease_name(test: &str) -> String {
    format!("ifo-e2e-{test}-{}", std::process::id())
}

/// `field` of the Lease `lease` (a JSONPath, e.g. `.spec.holderIdentity`).
fn lease_field(env: &Env, lease: &str, field: &str) -> anyhow::Result<String> {
    env.kubectl(
        User::Admin,
        &[
            "-n",
            "ifo-system",
            "get",
            "lease",
            lease,
            "-o",
            &format!("jsonpath={{{field}}}"),
        ],
    )
}

/// Two replicas of the Lease of `test` ([`lease_name`]) with `settings`, once one leads: the
/// Lease, the replicas, and which of them leads and which stands by.
fn elected(
    env: &Env,
    test: &str,
    settings: &[(&str, &str)],
) -> (String, [Replica; 2], usize, usize) {
    let lease = lease_name(test);
    let (replicas, leader) = elected_pair(env, &lease, settings);
    (lease, replicas, leader, 1 - leader)
}

fn holder(env: &Env, lease: &str) -> String {
    lease_field(env, lease, ".spec.holderIdentity").unwrap_or_default()
}

#[test]
fn one_replica_serves_and_a_crash_hands_over_within_the_lease_duration() {
    let env = env();
    let (lease, replicas, first, _) = elected(env, "crash", &[]);
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
    assert_eq!(leading(first).as_deref(), Some("ifo_leader 1"));
    assert_eq!(leading(1 - first).as_deref(), Some("ifo_leader 0"));
    // The standby becomes ready all the same (a rollout waits for readiness: its initial sync
    // evaluates every target's list, the other tests' too), and never serves while the other
    // does. (A leader whose renewals kube-apiserver answers too late under the suite's load
    // steps down, as client-go's does, and the other may take over: that is no violation.)
    eventually(Duration::from_secs(60), "both replicas ready", || {
        replicas
            .iter()
            .all(|r| get(env, r.port, "/readyz").0 == "200")
            .then_some(())
    });
    for _ in 0..3 {
        let codes: Vec<String> = replicas.iter().map(|r| get(env, r.port, LIST).0).collect();
        assert!(
            codes.iter().filter(|c| *c == "200").count() <= 1,
            "both replicas serve: {codes:?}"
        );
        // curl's 000: no answer within its 10 s on a loaded machine, which proves nothing.
        for (replica, code) in replicas.iter().zip(&codes) {
            if code != "200" && code != "000" {
                assert_eq!(
                    code, "503",
                    "a replica that does not serve refuses with 503"
                );
                assert_eq!(get(env, replica.port, "/readyz").0, "200");
            }
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let leader = the_leader(env, &replicas);
    let standby = 1 - leader;
    eventually(Duration::from_secs(10), "the leader's pod labelled", || {
        labelled(env, &replicas[leader]).then_some(())
    });
    assert!(!labelled(env, &replicas[standby]));
    // The standby's pod is the maintenance guard's second door; the leader's is not, once its
    // first seconds are over.
    eventually(
        STANDBY_OVERLAP + Duration::from_secs(10),
        "the standby's pod marked standby, the leader's not",
        || {
            (marked(env, &replicas[standby], "standby")
                && !marked(env, &replicas[leader], "standby"))
            .then_some(())
        },
    );
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
    // The new leader stays the guard's second door for its first seconds (its pod joins the
    // leader's Service before it leaves the standbys'), then leaves it.
    eventually(
        STANDBY_OVERLAP + Duration::from_secs(10),
        "the new leader's standby mark gone after its first seconds",
        || (!marked(env, &replicas[standby], "standby")).then_some(()),
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

/// Waits for the `standby` to serve lists, and checks that it did within 5 s of `since`, when
/// the leader went (`what`): else `why`; and that it holds the Lease `lease`.
fn takes_over_at_once(
    env: &Env,
    lease: &str,
    standby: &Replica,
    since: Instant,
    what: &str,
    why: &str,
) {
    eventually(Duration::from_secs(20), "the standby serving", || {
        (get(env, standby.port, LIST).0 == "200").then_some(())
    });
    let took = since.elapsed();
    println!("{what}: {took:?}");
    assert!(
        took <= Duration::from_secs(5),
        "{what} took {took:?}: {why}"
    );
    let holder = holder(env, lease);
    assert!(
        holder.starts_with(&format!("{}_", standby.pod)),
        "{what}: the Lease is held by {holder:?}"
    );
}

#[test]
fn a_graceful_stop_releases_the_lease_and_hands_over_at_once() {
    let env = env();
    let (lease, replicas, leader, standby) = elected(env, "graceful", &[]);
    eventually(Duration::from_secs(10), "the leader's pod labelled", || {
        labelled(env, &replicas[leader]).then_some(())
    });
    let pid = i32::try_from(replicas[leader].process.pid()).unwrap();
    // SAFETY: sending a signal to a child process of ours.
    #[allow(unsafe_code)]
    let sent = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(sent, 0);
    let stopped = Instant::now();
    takes_over_at_once(
        env,
        &lease,
        &replicas[standby],
        stopped,
        "handover after SIGTERM",
        "the lease was not released",
    );
    replicas[leader].process.stop(Duration::from_secs(10));
    assert_eq!(get(env, replicas[standby].port, LIST).0, "200");
    // The Service follows: the old leader's pod lost its label, the new leader's has it.
    eventually(
        Duration::from_secs(10),
        "the new leader's pod labelled, the old one's not",
        || (labelled(env, &replicas[standby]) && !labelled(env, &replicas[leader])).then_some(()),
    );
}

/// Settings of replicas whose Lease lasts long (60 s), so that a handover before it expires
/// shows, and whose pods' server container is the test pod's `server`.
const LONG_LEASE: [(&str, &str); 2] = [
    ("LEADER_ELECT_LEASE_DURATION", "60s"),
    ("LEADER_ELECT_CONTAINER_NAME", "server"),
];

/// Writes the status of `pod`'s container `server` as kubelet would after it ended at
/// `finished` (the replicas' pods are never scheduled: the test reports for kubelet).
fn report_ended(env: &Env, pod: &str, finished: jiff::Timestamp) {
    let status = serde_json::json!({"status": {"containerStatuses": [{
        "name": "server", "image": "ifo-apiserver:test", "imageID": "", "ready": false,
        "restartCount": 1, "containerID": "containerd://b",
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {
            "exitCode": 137, "reason": "Error", "containerID": "containerd://a",
            "finishedAt": finished.round(jiff::Unit::Second).unwrap().to_string(),
        }},
    }]}});
    env.kubectl(
        User::Admin,
        &[
            "-n",
            "ifo-system",
            "patch",
            "pod",
            pod,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ],
    )
    .unwrap();
}

/// The Lease's `spec.acquireTime`.
fn acquired(env: &Env, lease: &str) -> jiff::Timestamp {
    lease_field(env, lease, ".spec.acquireTime")
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_crash_kubelet_reports_hands_over_without_waiting_for_the_lease_to_expire() {
    let env = env();
    let (lease, replicas, leader, standby) = elected(env, "reported-crash", &LONG_LEASE);
    // Past the second the leader took the Lease in (kubelet reports whole seconds).
    std::thread::sleep(Duration::from_millis(1100));

    replicas[leader].process.kill();
    let killed = Instant::now();
    report_ended(env, &replicas[leader].pod, jiff::Timestamp::now());
    takes_over_at_once(
        env,
        &lease,
        &replicas[standby],
        killed,
        "failover after a crash kubelet reported (lease duration 60s)",
        "the lease was waited for",
    );
}

#[test]
fn an_end_before_the_leader_took_the_lease_proves_nothing_and_it_keeps_leading() {
    let env = env();
    let (lease, replicas, leader, standby) = elected(env, "earlier-end", &LONG_LEASE);
    let old_holder = holder(env, &lease);
    // The leader's pod reports a container that ended before the leader took the Lease (its
    // predecessor in the pod): the leader is that pod's restarted container, alive.
    let before = acquired(env, &lease) - jiff::SignedDuration::from_secs(2);
    report_ended(env, &replicas[leader].pod, before);
    // The standby never serves (a request may fail outright on a loaded machine: no answer is
    // no second leader); the leader still holds the Lease and serves.
    for _ in 0..5 {
        std::thread::sleep(Duration::from_secs(1));
        assert_ne!(get(env, replicas[standby].port, LIST).0, "200");
    }
    assert_eq!(holder(env, &lease), old_holder);
    eventually(Duration::from_secs(10), "the leader serving", || {
        (get(env, replicas[leader].port, LIST).0 == "200").then_some(())
    });
}
