//! The maintenance guard as managed control planes (EKS, GKE, AKS) run it: kube-apiserver
//! presents no client certificate to the webhooks, so the server cannot tell kube-apiserver's
//! connections and reviews from anyone's, and the doors answer anyone. The attacks come from
//! loopback addresses other than kube-apiserver's (127.0.0.1), standing in for pods; each keeps
//! its pressure up for as long as evictions of a held node's pod are sent through
//! kube-apiserver, and is judged by what kube-apiserver saw: every eviction refused by the guard
//! (429), none let through by a door that failed (its `apiserver_admission_webhook_fail_open_count`
//! unchanged), and `/livez` answered throughout, as the kubelet's probe would need.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ifo_dev::User;
use ifo_test_support::{Attacker, Env, apiserver_metric, evict, evict_with, held_node, wait_held};
use serde_json::json;

/// Anonymous connections the server takes at once (`MAX_ANONYMOUS_CONNECTIONS`): small, so an
/// attack that holds them all is cheap to run.
const ANONYMOUS_CONNECTIONS: usize = 128;

/// The guard's two doors, as kube-apiserver names them in its metrics.
const DOORS: [&str; 2] = [
    "ifo-maintenance-guard.ifo.kubevirt.io",
    "ifo-maintenance-guard-standby.ifo.kubevirt.io",
];

/// One attack at a time: each measures the server under its own pressure only.
static ATTACKS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn env() -> &'static Env {
    let anonymous = ANONYMOUS_CONNECTIONS.to_string();
    Env::builder()
        .webhook_client_certificate(false)
        .settings(&[("MAX_ANONYMOUS_CONNECTIONS", &anonymous)])
        .start()
}

/// kube-apiserver's count of evictions the guard's doors let through by failing.
fn failed_open(env: &Env) -> f64 {
    DOORS
        .iter()
        .map(|door| apiserver_metric(env, "apiserver_admission_webhook_fail_open_count", door))
        .sum()
}

/// Evictions of `ns`'s held pod through kube-apiserver, each sent with `eviction` (or the plain
/// one), while the attackers run: each must be refused by the guard, and `/livez` answer.
fn evictions_held_under(
    env: &Env,
    ns: &str,
    attackers: Vec<Attacker>,
    eviction: Option<&serde_json::Value>,
) {
    let before = failed_open(env);
    let stop = Arc::new(AtomicBool::new(false));
    let attacks: Vec<_> = attackers.into_iter().map(|a| a.run(stop.clone())).collect();
    // Let the attack take hold.
    std::thread::sleep(Duration::from_secs(3));
    let mut refused = 0;
    for _ in 0..6 {
        let started = Instant::now();
        let e = match eviction {
            Some(body) => evict_with(env, User::Admin, ns, "app", body),
            None => evict(env, User::Admin, ns, "app"),
        };
        assert!(!e.ok, "an eviction of a pod on a held node went through");
        println!(
            "eviction answered in {:?}: {}",
            started.elapsed(),
            e.stderr.lines().next().unwrap_or("")
        );
        refused += usize::from(e.stderr.contains("TooManyRequests"));
        assert_eq!(env.direct_to(env.port, "/livez", &[]).0, "200", "/livez");
    }
    stop.store(true, Ordering::SeqCst);
    let opened: usize = attacks.into_iter().map(|t| t.join().unwrap()).sum();
    let failed = failed_open(env) - before;
    // The standby door's reviews are kube-apiserver's only (the attacks call the other).
    for line in env.metrics().lines().filter(|l| {
        l.starts_with("ifo_admission_review_duration_seconds_bucket")
            && l.contains("evictions_standby")
    }) {
        println!("{line}");
    }
    println!(
        "refused by the guard: {refused} of 6; failed open: {failed}; attack connections opened: {opened}"
    );
    assert!(opened > ANONYMOUS_CONNECTIONS, "the attack itself failed");
    assert_eq!(failed, 0.0, "kube-apiserver let evictions through");
    assert_eq!(refused, 6, "every eviction refused by the guard");
}

/// One address keeps more connections than the server takes busy, each with a review whose
/// body never comes: kube-apiserver's connections (anonymous here, as the attacker's) and the
/// probes still get in, taking the attacker's places, and every eviction is judged.
#[test]
fn one_address_holding_every_connection_busy_opens_nothing() {
    let env = env();
    let _one = ATTACKS.lock().unwrap_or_else(|p| p.into_inner());
    let (ns, _node) = held_node(env, "mg-busy", 0);
    wait_held(env, &ns);
    let attacker = Attacker::new(
        env,
        Ipv4Addr::new(127, 0, 0, 2),
        env.port,
        ANONYMOUS_CONNECTIONS + 72,
        &Attacker::unfinished_post("/admission/evictions", 4096),
    );
    evictions_held_under(env, &ns, vec![attacker], None);
}

/// Four addresses keep every turn to parse a large review busy (bodies over 64 KiB that never
/// come, twice what the turns are): an Eviction padded to 70 KB, whose review kube-apiserver
/// sends whole, gets the next turn given back (its address holds none), and is judged.
#[test]
fn padded_evictions_are_judged_while_others_hold_the_large_review_turns() {
    let env = env();
    let _one = ATTACKS.lock().unwrap_or_else(|p| p.into_inner());
    let (ns, _node) = held_node(env, "mg-padded", 0);
    wait_held(env, &ns);
    let attackers = (3..7)
        .map(|last| {
            Attacker::new(
                env,
                Ipv4Addr::new(127, 0, 0, last),
                env.port,
                40,
                &Attacker::unfinished_post("/admission/evictions", 1 << 20),
            )
        })
        .collect();
    let eviction = json!({
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "app", "namespace": ns,
            "annotations": {"padding": "x".repeat(70 << 10)}},
    });
    evictions_held_under(env, &ns, attackers, Some(&eviction));
}
