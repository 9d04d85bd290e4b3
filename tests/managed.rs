//! The maintenance guard as managed control planes (EKS, GKE, AKS) run it: kube-apiserver
//! presents no client certificate to the webhooks, so the server cannot tell kube-apiserver's
//! connections and reviews from anyone's, and the doors answer anyone. The attacks come from
//! loopback addresses other than kube-apiserver's (127.0.0.1), standing in for pods; each keeps
//! its pressure up for as long as evictions of a held node's pod are sent through
//! kube-apiserver, and is judged by what kube-apiserver saw: every eviction refused by the guard
//! (429), none let through by a door that failed (its `apiserver_admission_webhook_fail_open_count`
//! unchanged), and `/livez` answered throughout, as the kubelet's probe would need.

use std::net::Ipv4Addr;

use ifo_test_support::{Attacker, Env, evictions_under, held_node, wait_held};
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

/// Evictions of `ns`'s held pod through kube-apiserver, each sent with `eviction` (or the plain
/// one), while the attackers run: each refused by the guard, none let through by a door that
/// failed, and `/livez` answered after each.
fn evictions_held_under(
    env: &Env,
    ns: &str,
    attackers: Vec<Attacker>,
    eviction: Option<&serde_json::Value>,
) {
    let seen = evictions_under(env, ns, &DOORS, env.port, attackers, eviction);
    // The standby door's reviews are kube-apiserver's only (the attacks call the other).
    for line in env.metrics().lines().filter(|l| {
        l.starts_with("ifo_admission_review_duration_seconds_bucket")
            && l.contains("evictions_standby")
    }) {
        println!("{line}");
    }
    assert!(
        seen.opened > ANONYMOUS_CONNECTIONS,
        "the attack itself failed"
    );
    assert_eq!(
        seen.failed_open, 0.0,
        "kube-apiserver let evictions through"
    );
    assert_eq!(
        seen.refused, seen.sent,
        "every eviction refused by the guard"
    );
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
