//! The server's background tasks never vanish silently: a task made to fail (a failpoint, in test
//! builds only) is logged, counted and started again, and the server goes on detecting; a task
//! it cannot do without fails `/livez` and `/readyz`.

use std::time::Duration;

use ifo_dev::User;
use serde_json::{Value, json};

use ifo_test_support::replicas::{get, replica_with};
use ifo_test_support::{env, eventually, vm_ruleset};

const WAIT: Duration = Duration::from_secs(60);

fn counter(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

#[test]
fn a_failed_ruleset_controller_is_restarted_and_detection_goes_on() {
    let env = env();
    let lease = format!("ifo-e2e-supervision-{}", std::process::id());
    // The controller panics on its first event.
    let replica = replica_with(
        env,
        &lease,
        0,
        &[("FAILPOINTS", "ruleset-controller-event=1*panic")],
    );
    let series = "ifo_task_failures_total{task=\"ruleset-controller\"}";
    let metrics = eventually(WAIT, "the failure counted", || {
        let (code, body) = get(env, replica.port, "/metrics");
        (code == "200" && counter(&body, series).is_some()).then_some(body)
    });
    assert_eq!(counter(&metrics, series), Some(1.0));
    let log = replica.process.log_tail(400);
    assert!(
        log.contains("background task failed; starting it again")
            && log.contains("ruleset-controller"),
        "{log}"
    );
    // Started again: rulesets created now are followed, and their operations served.
    let (ns, rs) = env.namespace_with_ruleset("supervised", "vm-rules", vm_ruleset);
    env.apply(&ifo_test_support::vm("vm1", &ns));
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Migrating"}));
    let path = format!("/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{ns}/inflightoperations");
    eventually(WAIT, "the replica serving vm1's operation", || {
        let (code, body) = get(env, replica.port, &path);
        let list: Value = serde_json::from_str(&body).ok()?;
        (code == "200"
            && list["items"]
                .as_array()?
                .iter()
                .any(|o| o["spec"]["operation"] == "Migrating"))
        .then_some(())
    });
    assert_eq!(get(env, replica.port, "/livez").0, "200");
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

#[test]
fn a_failed_leader_elector_fails_liveness_and_readiness() {
    let env = env();
    let lease = format!("ifo-e2e-elector-{}", std::process::id());
    let replica = replica_with(env, &lease, 0, &[("FAILPOINTS", "leader-elector=1*panic")]);
    let (code, body) = eventually(WAIT, "/livez failing", || {
        Some(get(env, replica.port, "/livez")).filter(|(code, _)| code == "503")
    });
    assert!(body.contains("leader-elector"), "{code} {body}");
    assert_eq!(get(env, replica.port, "/readyz").0, "503");
    let (_, metrics) = get(env, replica.port, "/metrics");
    assert_eq!(
        counter(&metrics, "ifo_task_failures_total{task=\"leader-elector\"}"),
        Some(1.0)
    );
    // It does not serve as a leader any more.
    assert_eq!(
        get(env, replica.port, ifo_test_support::replicas::LIST).0,
        "503",
        "a replica without an elector serves"
    );
}
