//! The maintenance guard as managed control planes (EKS, GKE, AKS) run it: kube-apiserver
//! presents no client certificate to the webhooks, so the server cannot tell kube-apiserver's
//! connections and reviews from anyone's, and the doors answer anyone. The attacks come from
//! loopback addresses other than kube-apiserver's (127.0.0.1), standing in for pods
//! ([`attacks`], run in the default setup too, by `tests/certificates.rs`).
//!
//! The rulesets' door checks what rulesets read there too: the schemas it checks against are
//! the server's own (CRDs from its watch, built-in types from `/openapi/v3`), whoever calls.

use ifo_test_support::attacks::{self, Setup, metric_sum};
use ifo_test_support::{
    Env, accepted, closed_gadget_crd, denied_by, door_open, establish_gadget_crd, eventually,
    job_ruleset, refused, ruleset, ruleset_over, said_all,
};
use serde_json::json;

/// Anonymous connections the server takes at once (`MAX_ANONYMOUS_CONNECTIONS`): small, so an
/// attack that holds them all is cheap to run.
const ANONYMOUS_CONNECTIONS: usize = 128;

/// One attack at a time: each measures the server under its own pressure only.
static ATTACKS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn env() -> &'static Env {
    let anonymous = ANONYMOUS_CONNECTIONS.to_string();
    Env::builder()
        .webhook_client_certificate(false)
        .settings(&[("MAX_ANONYMOUS_CONNECTIONS", &anonymous)])
        .start()
}

/// The setup attacked, one attack at a time.
fn attacked() -> (Setup, std::sync::MutexGuard<'static, ()>) {
    let setup = Setup {
        env: env(),
        anonymous: ANONYMOUS_CONNECTIONS,
        metrics: Env::metrics,
    };
    (setup, ATTACKS.lock().unwrap_or_else(|p| p.into_inner()))
}

/// One address keeps more connections than the server takes busy, each with a review whose
/// body never comes: kube-apiserver's connections (anonymous here, as the attacker's) and the
/// probes still get in, taking the attacker's places, and every eviction is judged.
#[test]
fn one_address_holding_every_connection_busy_opens_nothing() {
    let (setup, _one) = attacked();
    attacks::one_address_holding_every_connection_busy(&setup, "mg-busy");
}

/// Four addresses keep every byte of the turns to read a review busy (bodies of 1 MiB that
/// never come, 16 MiB an address): an Eviction padded to 70 KB, whose review kube-apiserver
/// sends whole, takes its turn from an address that holds more (its holds none), is read at
/// once and judged.
#[test]
fn padded_evictions_are_judged_while_others_hold_the_large_review_turns() {
    let (setup, _one) = attacked();
    attacks::padded_evictions_while_others_hold_the_large_review_turns(&setup, "mg-padded");
}

/// A hundred addresses, each with one HTTP/2 connection holding 20 reviews whose bodies of
/// 64 KiB never come (2,000 streams, twice the bytes the turns hold): the streams of a
/// connection take turns as its address's, so kube-apiserver's review, from an address that
/// holds less, takes a turn of theirs at once, and every eviction is judged.
#[test]
fn a_hundred_addresses_holding_http2_streams_open_nothing() {
    let (setup, _one) = attacked();
    attacks::a_hundred_addresses_holding_http2_streams(&setup, "mg-h2");
    // The attack held the turns: the server counted reviews whose body never came (timed out,
    // or their turn taken back).
    let unanswered = metric_sum(
        &setup.env.metrics(),
        "ifo_admission_reviews_total",
        &["error"],
    );
    println!("reviews answered with an error (the attack's): {unanswered}");
    assert!(
        unanswered >= 100.0,
        "the attack's streams were not read as reviews"
    );
}

/// Token holders fill the API's port from more addresses than it has places, each busy with a
/// watch, and the doors' port from one address: the doors have a listener of their own, and
/// every eviction is judged.
#[test]
fn token_holders_on_both_ports_open_nothing() {
    let (setup, _one) = attacked();
    attacks::token_holders_on_both_ports(&setup, "mg-tokens");
}

/// The probes' listener is flooded from one address and from more addresses than it takes:
/// `/livez` is answered throughout and every eviction is judged.
#[test]
fn a_flooded_probes_listener_still_answers_the_probes() {
    let (setup, _one) = attacked();
    attacks::the_probes_listener_flooded(&setup, "mg-probes");
}

/// `kubectl apply` of a ruleset that reads a field its target's closed schema does not have is
/// refused with the field it meant, for a CRD target and a built-in one (a Job's
/// `status.succeded`), though the server cannot know its caller; a read where the schema is
/// open applies, with kubectl's warning that it was not checked.
#[test]
fn rulesets_are_checked_against_their_targets_schemas_at_apply() {
    let env = env();
    // Not under another test's attack.
    let _one = ATTACKS.lock().unwrap_or_else(|p| p.into_inner());
    let ns = door_open(env, "mg-schemas");
    let group = "managed-schemas.ifo.test";
    establish_gadget_crd(env, group, &closed_gadget_crd(group));
    let typo = ruleset_over(
        &format!("gadget-typo-{ns}"),
        &ns,
        json!({"group": group, "version": "v1", "resource": "gadgets"}),
        json!([{"operation": "Assembling", "expression": "object.?status.?phsae.orValue('') == 'Assembling'"}]),
    );
    // The server holds the CRD once its watch of CRDs brings it, moments after it is created.
    let stderr = eventually(
        std::time::Duration::from_secs(10),
        "the CRD's schema held by the server",
        || {
            let stderr = refused(env, &typo);
            stderr.contains("did you mean").then_some(stderr)
        },
    );
    println!("the CRD typo: {stderr}");
    said_all(
        &stderr,
        &[
            denied_by().as_str(),
            "object.?status.?phsae: the schema of object.status has no field phsae; did you mean \
             phase?",
        ],
    );

    let job = job_ruleset(
        &format!("job-typo-{ns}"),
        &ns,
        "object.?status.?succeded.orValue(0) == 0",
    );
    let stderr = refused(env, &job);
    println!("the Job typo: {stderr}");
    said_all(
        &stderr,
        &[
            denied_by().as_str(),
            "object.?status.?succeded: the schema of object.status has no field succeded; did you \
             mean succeeded?",
        ],
    );

    // The test cluster's VirtualMachine CRD takes any field.
    let open = ruleset(
        &format!("vm-open-{ns}"),
        &ns,
        json!([{"operation": "Migrating", "expression": "object.?status.?printableStatsu.orValue('') == 'Migrating'"}]),
    );
    let stderr = accepted(env, &open, &["--dry-run=server"]);
    println!("the open schema: {stderr}");
    said_all(
        &stderr,
        &["Warning: kubevirt.io/v1/virtualmachines: the schema takes any field in object"],
    );
}
