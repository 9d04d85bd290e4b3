use super::*;

fn reason(r: &Readiness) -> String {
    match r.probe() {
        Probe::Ready => panic!("expected not ready"),
        Probe::NotReady(reason) => reason,
    }
}

#[test]
fn not_ready_until_the_rulesets_and_every_watcher_they_started_have_settled() {
    let (readiness, rulesets) = Readiness::new("OperationRuleSets");
    assert!(!readiness.is_ready());
    assert_eq!(
        reason(&readiness),
        "initial sync: waiting for OperationRuleSets"
    );

    // The ruleset list starts two watchers before it is done.
    let vms = readiness.pending("kubevirt.io/v1/virtualmachines");
    let pods = readiness.pending("v1/pods");
    rulesets.done();
    assert_eq!(
        reason(&readiness),
        "initial sync: waiting for kubevirt.io/v1/virtualmachines, v1/pods"
    );
    vms.done();
    assert_eq!(reason(&readiness), "initial sync: waiting for v1/pods");
    assert_eq!(readiness.unsynced(), ["v1/pods"]);
    pods.done();
    assert_eq!(readiness.probe(), Probe::Ready);
    assert!(readiness.unsynced().is_empty());
}

#[test]
fn no_rulesets_means_ready_once_they_are_listed() {
    let (readiness, rulesets) = Readiness::new("OperationRuleSets");
    rulesets.done();
    assert!(readiness.is_ready());
}

#[test]
fn a_replaced_watcher_hands_over_to_its_replacement() {
    let (readiness, rulesets) = Readiness::new("OperationRuleSets");
    let first = readiness.pending("v1/pods");
    rulesets.done();
    // Restarted because its rulesets changed: the new task registers, then the old one is aborted.
    let second = readiness.pending("v1/pods (restarted)");
    drop(first);
    assert_eq!(
        reason(&readiness),
        "initial sync: waiting for v1/pods (restarted)"
    );
    second.done();
    assert!(readiness.is_ready());
}

#[test]
fn readiness_is_latched_once_reached() {
    let (readiness, rulesets) = Readiness::new("OperationRuleSets");
    rulesets.done();
    let later = readiness.pending("a ruleset added later");
    assert!(readiness.is_ready());
    drop(later);
    assert!(readiness.is_ready());
}

#[test]
fn releasing_twice_or_out_of_order_is_harmless() {
    let (readiness, rulesets) = Readiness::new("OperationRuleSets");
    let a = readiness.pending("a");
    let b = readiness.pending("b");
    b.done();
    rulesets.done();
    assert_eq!(reason(&readiness), "initial sync: waiting for a");
    a.done();
    assert!(readiness.is_ready());
}

#[tokio::test]
async fn the_wait_is_bounded() {
    let (readiness, stuck) = Readiness::new("OperationRuleSets");
    let waiter = tokio::spawn({
        let r = readiness.clone();
        async move { r.wait().await }
    });
    readiness
        .clone()
        .give_up_after(Duration::from_millis(20))
        .await;
    assert!(readiness.is_ready());
    tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("waiters are woken")
        .unwrap();
    // Ready, but still not synced: what it waited for is still named until it is done, and
    // gates cannot say clear.
    assert_eq!(readiness.unsynced(), ["OperationRuleSets"]);
    assert!(!readiness.is_synced());
    let synced = tokio::spawn({
        let r = readiness.clone();
        async move { r.synced().await }
    });
    drop(stuck);
    assert!(readiness.unsynced().is_empty());
    assert!(readiness.is_synced());
    tokio::time::timeout(Duration::from_secs(5), synced)
        .await
        .expect("what waits for the sync is woken when the last first list is in")
        .unwrap();
}

#[tokio::test]
async fn the_bound_does_nothing_once_ready() {
    let (readiness, rulesets) = Readiness::new("OperationRuleSets");
    let bound = tokio::spawn(readiness.clone().give_up_after(Duration::from_secs(3600)));
    rulesets.done();
    tokio::time::timeout(Duration::from_secs(5), bound)
        .await
        .expect("the bound returns as soon as the server is ready")
        .unwrap();
    assert!(readiness.is_ready());
}

#[test]
fn shutting_down_is_not_ready_even_after_the_sync() {
    let (readiness, rulesets) = Readiness::new("OperationRuleSets");
    rulesets.done();
    assert!(readiness.is_ready());
    readiness.shut_down();
    assert!(!readiness.is_ready());
    assert_eq!(
        readiness.probe(),
        Probe::NotReady("shutting down".to_string())
    );
}
