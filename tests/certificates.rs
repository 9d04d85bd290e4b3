//! The serving certificate made and renewed by the server itself (`SERVING_CERTIFICATE_SECRET`,
//! the chart's `certificates.source=server`): no manifest holds a key or a CA, the server keeps
//! both in a Secret, serves the certificate, and writes its CA where kube-apiserver trusts it
//! (the APIService and the webhooks), as the install's own RBAC (`deploy/certificates/`) lets
//! it. Judged through kube-apiserver: the aggregated API and the admission door work with the
//! CA the server made (the test cluster calls the webhooks at `localhost`, so the certificate is
//! for that name too), a certificate near its end is renewed and served without a restart, and
//! a `caBundle` written back by someone else (a GitOps sync) is put right. The cluster is one
//! whose kube-apiserver presents no client certificate to webhooks, as managed control planes:
//! the doors' key in the webhooks' paths, which the server makes and writes, is what proves its
//! reviews, and a review at any other path is refused. A CA kept by the chart's own
//! certificates (`ifo-apiserver-ca`, as an install of earlier charts left it) is there before
//! the server starts: the server takes it over, so kube-apiserver goes on trusting it.
//!
//! The attacks on the doors that the install which cannot prove kube-apiserver withstands
//! (`tests/managed.rs`) are run here too ([`attacks`]): in this setup, the default, a review
//! without the key is refused before its body is read, and kube-apiserver's connection, once it
//! sent a review at the key's path, is out of the pool the attackers share.

use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use base64::Engine as _;
use ifo_dev::{RULESET_WEBHOOK, SERVICE_NAMESPACE, User};
use ifo_test_support::attacks::{self, Setup, metric_sum};
use ifo_test_support::{Env, door_open, eventually, held_node, wait_held};
use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode};
use openssl::x509::X509;
use openssl::x509::store::X509StoreBuilder;
use serde_json::Value;

/// Where the server keeps its certificate.
const SECRET: &str = "ifo-apiserver-tls";

/// The APIService of the live API.
const API_SERVICE: &str = "v1alpha1.live.ifo.kubevirt.io";

/// Short, so that a renewal (a third of it left) comes within a test: after 80 s.
const LIFETIME: &str = "2m";

/// One test at a time: each changes or waits on what the others read.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn env() -> &'static Env {
    let trust = format!(
        "apiservice/{API_SERVICE},validatingwebhookconfiguration/{RULESET_WEBHOOK},\
         validatingwebhookconfiguration/{}",
        ifo_dev::GUARD_WEBHOOK
    );
    Env::builder()
        .webhook_client_certificate(false)
        .manifests(&["deploy/certificates/rbac.yaml", kept_ca()])
        .settings(&[
            ("SERVING_CERTIFICATE_SECRET", SECRET),
            ("SERVING_CERTIFICATE_CA_FROM", KEPT_CA),
            (
                "SERVING_CERTIFICATE_NAMES",
                "ifo-apiserver.ifo-system.svc,ifo-apiserver.ifo-system.svc.cluster.local,localhost,127.0.0.1",
            ),
            ("SERVING_CERTIFICATE_LIFETIME", LIFETIME),
            ("CA_BUNDLE_TARGETS", &trust),
            ("MAX_ANONYMOUS_CONNECTIONS", &ANONYMOUS_CONNECTIONS.to_string()),
        ])
        .start()
}

/// Anonymous connections the server takes at once (`MAX_ANONYMOUS_CONNECTIONS`): small, so an
/// attack that holds them all is cheap to run.
const ANONYMOUS_CONNECTIONS: usize = 128;

/// Where the chart's own certificates kept their CA.
const KEPT_CA: &str = "ifo-apiserver-ca";

/// The manifest of a CA as the chart's own certificates keep it (the Secret [`KEPT_CA`]:
/// `tls.crt`, and `tls.key` an RSA key in PKCS #1, as Helm's `genCA` makes it), made once: its
/// path.
fn kept_ca() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let ca = ifo_dev::KeyPair::new_rsa_ca(KEPT_CA).unwrap();
        let b64 = |pem: &[u8]| base64::engine::general_purpose::STANDARD.encode(pem);
        let secret = serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": KEPT_CA, "namespace": SERVICE_NAMESPACE},
            "data": {"tls.crt": b64(&ca.cert_pem), "tls.key": b64(&ca.rsa_key_pem().unwrap())},
        });
        let path = std::env::temp_dir().join(format!("ifo-kept-ca-{}.json", std::process::id()));
        std::fs::write(&path, secret.to_string()).unwrap();
        path.display().to_string()
    })
}

fn admin_json(env: &Env, args: &[&str]) -> Value {
    serde_json::from_str(&env.kubectl(User::Admin, args).unwrap()).unwrap()
}

/// The Secret the server keeps its certificate in.
fn secret(env: &Env) -> Value {
    admin_json(
        env,
        &[
            "-n",
            SERVICE_NAMESPACE,
            "get",
            "secret",
            SECRET,
            "-o",
            "json",
        ],
    )
}

/// The Secret's `key`, decoded.
fn secret_data(env: &Env, key: &str) -> String {
    let secret = secret(env);
    let b64 = secret["data"][key].as_str().unwrap_or_default();
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap(),
    )
    .unwrap()
}

/// Every `caBundle` kube-apiserver trusts the server with: the APIService's and each webhook's.
fn ca_bundles(env: &Env) -> Vec<(String, String)> {
    let mut bundles = Vec::new();
    let api = admin_json(env, &["get", "apiservice", API_SERVICE, "-o", "json"]);
    bundles.push((
        API_SERVICE.to_owned(),
        api["spec"]["caBundle"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    ));
    for name in [RULESET_WEBHOOK, ifo_dev::GUARD_WEBHOOK] {
        let configuration = admin_json(
            env,
            &["get", "validatingwebhookconfiguration", name, "-o", "json"],
        );
        for webhook in configuration["webhooks"].as_array().unwrap() {
            bundles.push((
                webhook["name"].as_str().unwrap().to_owned(),
                webhook["clientConfig"]["caBundle"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            ));
        }
    }
    bundles
}

/// The certificate the server serves now, verified against `ca_bundle` (PEM) as kube-apiserver
/// verifies it; PEM.
fn served(env: &Env, ca_bundle: &str) -> String {
    let mut store = X509StoreBuilder::new().unwrap();
    for ca in X509::stack_from_pem(ca_bundle.as_bytes()).unwrap() {
        store.add_cert(ca).unwrap();
    }
    let mut connector = SslConnector::builder(SslMethod::tls_client()).unwrap();
    connector.set_verify_cert_store(store.build()).unwrap();
    connector.set_verify(SslVerifyMode::PEER);
    let connector = connector.build();
    let stream = TcpStream::connect(("127.0.0.1", env.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let tls = connector
        .connect("ifo-apiserver.ifo-system.svc", stream)
        .expect("the served certificate verifies against the Secret's CA");
    let cert = tls.ssl().peer_certificate().unwrap();
    String::from_utf8(cert.to_pem().unwrap()).unwrap()
}

/// The server's `/metrics`, read straight from it as admin, its certificate verified against
/// `ca_bundle`.
fn metrics(env: &Env, ca_bundle: &str) -> String {
    let ca = std::env::temp_dir().join(format!("ifo-certificates-ca-{}.pem", std::process::id()));
    std::fs::write(&ca, ca_bundle).unwrap();
    let out = std::process::Command::new("curl")
        .args(["-sf", "--max-time", "10", "--cacert"])
        .arg(&ca)
        .args(env.client_cert_args(User::Admin))
        .arg(format!("https://127.0.0.1:{}/metrics", env.port))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The value of the unlabelled series `name` in `metrics`.
fn value(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
        .trim()
        .parse()
        .unwrap()
}

/// The path and URL of every webhook of the server's configurations.
fn webhook_urls(env: &Env) -> Vec<String> {
    [RULESET_WEBHOOK, ifo_dev::GUARD_WEBHOOK]
        .iter()
        .flat_map(|name| {
            let configuration = admin_json(
                env,
                &["get", "validatingwebhookconfiguration", name, "-o", "json"],
            );
            configuration["webhooks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| {
                    w["clientConfig"]["url"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The HTTP status of `review` posted straight to the server's doors at `path`, on a connection
/// of its own, as anyone on the network may, its certificate verified against `ca_bundle`: no client
/// certificate, no token.
fn posted(env: &Env, ca_bundle: &str, path: &str, review: &str) -> String {
    let ca = std::env::temp_dir().join(format!("ifo-doors-ca-{}.pem", std::process::id()));
    std::fs::write(&ca, ca_bundle).unwrap();
    ifo_test_support::posted(
        &ca,
        &format!("https://127.0.0.1:{}{path}", env.admission_port),
        review,
        None,
    )
}

/// The live API answers through the aggregation layer.
fn api_answers(env: &Env) {
    env.kubectl(User::Admin, &["get", "ifos", "-A"])
        .unwrap_or_else(|e| panic!("the live API does not answer: {e:#}"));
}

#[test]
fn the_server_makes_its_certificate_and_kube_apiserver_trusts_its_ca() {
    let env = env();
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let secret = secret(env);
    assert_eq!(secret["type"], "kubernetes.io/tls");
    assert_eq!(
        secret["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "ifo-apiserver"
    );
    let ca = secret_data(env, "ca.crt");
    // The CA kept before is taken over: kube-apiserver, which trusted it, still does (the server
    // signs with it, or with a CA of its own beside it where it cannot use it).
    let kept: Value = admin_json(
        env,
        &[
            "-n",
            SERVICE_NAMESPACE,
            "get",
            "secret",
            KEPT_CA,
            "-o",
            "json",
        ],
    );
    let kept = base64::engine::general_purpose::STANDARD
        .decode(kept["data"]["tls.crt"].as_str().unwrap())
        .unwrap();
    let kept = String::from_utf8(kept).unwrap();
    assert!(ca.contains(kept.trim()), "the kept CA is not in {ca}");
    let encoded = base64::engine::general_purpose::STANDARD.encode(&ca);
    // Every registration trusts it (the launcher's own CA is gone from them).
    eventually(
        Duration::from_secs(30),
        "every caBundle the server's CA",
        || {
            ca_bundles(env)
                .iter()
                .all(|(_, bundle)| *bundle == encoded)
                .then_some(())
        },
    );
    let cert = secret_data(env, "tls.crt");
    assert_eq!(served(env, &ca).trim(), cert.trim());
    api_answers(env);
    // The admission door, called by kube-apiserver over TLS verified with that CA, answers:
    // at the doors' key's path, which kube-apiserver was given, proven by nothing else.
    let key = secret_data(env, "door.key");
    assert_eq!(key.len(), 60, "{key}");
    eventually(
        Duration::from_secs(30),
        "every webhook called with the key",
        || {
            let urls = webhook_urls(env);
            urls.iter()
                .all(|u| u.contains(&format!("/admission/{key}/")))
                .then_some(())
        },
    );
    door_open(env, "certificates");
    // Anyone else: refused before the body is read, at a door's own path or another key's;
    // the key's path reads the review (this one malformed).
    let other = "0".repeat(60);
    for path in [
        "/admission/rulesets".to_owned(),
        "/admission/evictions".to_owned(),
        "/admission/evictions/standby".to_owned(),
        format!("/admission/{other}/rulesets"),
    ] {
        assert_eq!(posted(env, &ca, &path, "{}"), "401", "{path}");
    }
    assert_eq!(
        posted(env, &ca, &format!("/admission/{key}/rulesets"), "{}"),
        "400"
    );
}

#[test]
fn a_certificate_near_its_end_is_renewed_and_served_without_a_restart() {
    let env = env();
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let first = secret_data(env, "tls.crt");
    let ca = secret_data(env, "ca.crt");
    assert_eq!(served(env, &ca).trim(), first.trim());
    let started = value(&metrics(env, &ca), "process_start_time_seconds");
    // Renewed once a third of its 2 minutes is left (checked every 10 s), and served once the
    // TLS configuration reloads (within 5 s of the files' change).
    let renewed = eventually(Duration::from_secs(150), "a renewed certificate", || {
        let now = secret_data(env, "tls.crt");
        (now != first).then_some(now)
    });
    eventually(
        Duration::from_secs(30),
        "the renewed certificate served",
        || (served(env, &ca).trim() == renewed.trim()).then_some(()),
    );
    assert_eq!(
        secret_data(env, "ca.crt"),
        ca,
        "the CA changed with the certificate"
    );
    api_answers(env);
    let after = metrics(env, &ca);
    assert_eq!(
        value(&after, "process_start_time_seconds"),
        started,
        "the server was restarted"
    );
    let end = value(
        &after,
        "ifo_serving_certificate_not_after_timestamp_seconds",
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        end > now + 40.0,
        "the certificate exported ends at {end} (now {now})"
    );
}

#[test]
fn a_ca_bundle_written_back_by_someone_else_is_put_right() {
    let env = env();
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let ca = secret_data(env, "ca.crt");
    let encoded = base64::engine::general_purpose::STANDARD.encode(&ca);
    // As a GitOps sync would, with a bundle of its manifests.
    let foreign = base64::engine::general_purpose::STANDARD
        .encode("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
    env.kubectl(
        User::Admin,
        &[
            "patch",
            "apiservice",
            API_SERVICE,
            "--type=merge",
            "-p",
            &format!(r#"{{"spec":{{"caBundle":"{foreign}"}}}}"#),
        ],
    )
    .unwrap();
    eventually(Duration::from_secs(30), "the caBundle put right", || {
        let api = admin_json(env, &["get", "apiservice", API_SERVICE, "-o", "json"]);
        (api["spec"]["caBundle"] == encoded.as_str()).then_some(())
    });
    api_answers(env);
    // A webhook's path written back without the key: put right too, and the door answers.
    let key = secret_data(env, "door.key");
    let plain = format!(
        "https://localhost:{}/admission/rulesets",
        env.admission_port
    );
    env.kubectl(
        User::Admin,
        &[
            "patch",
            "validatingwebhookconfiguration",
            RULESET_WEBHOOK,
            "--type=json",
            "-p",
            &format!(
                r#"[{{"op":"replace","path":"/webhooks/0/clientConfig/url","value":"{plain}"}}]"#
            ),
        ],
    )
    .unwrap();
    eventually(Duration::from_secs(30), "the key written back", || {
        webhook_urls(env)
            .iter()
            .all(|u| u.contains(&format!("/admission/{key}/")))
            .then_some(())
    });
    door_open(env, "certificates-back");
}

/// The maintenance guard, called by kube-apiserver at the doors' key's path (its webhooks were
/// given it), holds the drain of a node that is not clear: both doors answer, neither fails open.
#[test]
fn the_guard_answers_kube_apiserver_at_the_keys_path() {
    let env = env();
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    wait_keyed(env);
    let (ns, _node) = held_node(env, "certs-guard", 0);
    wait_held(env, &ns);
}

/// Waits until kube-apiserver calls every webhook at the doors' key's path.
fn wait_keyed(env: &Env) {
    let key = secret_data(env, "door.key");
    eventually(
        Duration::from_secs(30),
        "every webhook called with the key",
        || {
            webhook_urls(env)
                .iter()
                .all(|u| u.contains(&format!("/admission/{key}/")))
                .then_some(())
        },
    );
}

/// The setup attacked, its doors called by kube-apiserver at the key's path.
fn attacked() -> Setup {
    let env = env();
    wait_keyed(env);
    Setup {
        env,
        anonymous: ANONYMOUS_CONNECTIONS,
        metrics: |env| metrics(env, &secret_data(env, "ca.crt")),
    }
}

/// Reviews the guard refused as not kube-apiserver's (no key, no certificate), by its metrics.
fn refused_reviews(env: &Env) -> f64 {
    metric_sum(
        &metrics(env, &secret_data(env, "ca.crt")),
        "ifo_guard_decisions_total",
        &["decision=\"error\"", "reason=\"unauthorized\""],
    )
}

/// In the default setup, one address keeps more connections than the server takes busy, each
/// with a review whose body never comes, and every eviction is judged.
#[test]
fn one_address_holding_every_connection_busy_opens_nothing() {
    let setup = attacked();
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    attacks::one_address_holding_every_connection_busy(&setup, "certs-busy");
}

/// In the default setup, four addresses post reviews over 64 KiB whose bodies never come: an
/// Eviction padded to 70 KB is judged.
#[test]
fn padded_evictions_are_judged_while_others_post_large_reviews() {
    let setup = attacked();
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    attacks::padded_evictions_while_others_hold_the_large_review_turns(&setup, "certs-padded");
}

/// In the default setup, a hundred addresses each hold an HTTP/2 connection with 20 reviews
/// whose bodies never come: every eviction is judged, and the attack's reviews are refused
/// (401) without a turn, their bodies never parsed.
#[test]
fn a_hundred_addresses_holding_http2_streams_open_nothing() {
    let setup = attacked();
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let before = refused_reviews(setup.env);
    attacks::a_hundred_addresses_holding_http2_streams(&setup, "certs-h2");
    let refused = refused_reviews(setup.env) - before;
    println!("reviews refused as not kube-apiserver's (the attack's): {refused}");
    assert!(refused >= 100.0, "the attack's streams were not refused");
}

/// In the default setup, token holders fill the API's port from more addresses than it has
/// places, each busy with a watch, and the doors' port from one address: every eviction is
/// judged.
#[test]
fn token_holders_on_both_ports_open_nothing() {
    let setup = attacked();
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    attacks::token_holders_on_both_ports(&setup, "certs-tokens");
}

/// In the default setup, twice as many addresses as the server has anonymous places each hold
/// one connection busy with a review whose body never comes, replaced every half second: the
/// probes are answered on their own port, every eviction is judged, and a review sent as
/// kube-apiserver sends one on a new connection (at the key's path, before any review has proven
/// that connection) is answered every time.
#[test]
fn more_addresses_than_places_open_nothing() {
    let setup = attacked();
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let (ca, key) = (
        secret_data(setup.env, "ca.crt"),
        secret_data(setup.env, "door.key"),
    );
    let path = format!("/admission/{key}/evictions");
    let review = serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "fresh", "operation": "CREATE", "name": "app",
            "namespace": "certs-many-fresh",
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction", "userInfo": {"username": "system:admin"}}})
    .to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let fresh = {
        let (stop, env) = (stop.clone(), setup.env);
        std::thread::spawn(move || {
            let mut answers = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                // curl makes a new connection each time.
                answers.push(posted(env, &ca, &path, &review));
                std::thread::sleep(Duration::from_millis(200));
            }
            answers
        })
    };
    attacks::more_addresses_than_places(&setup, "certs-many");
    stop.store(true, Ordering::SeqCst);
    let answers = fresh.join().unwrap();
    let answered = answers.iter().filter(|a| *a == "200").count();
    println!(
        "reviews sent on new connections at the key's path during the attack: {answered} of {} \
         answered (the others: {:?})",
        answers.len(),
        answers.iter().filter(|a| *a != "200").collect::<Vec<_>>()
    );
    assert!(
        answers.len() >= 10,
        "too few reviews sent: {}",
        answers.len()
    );
    assert_eq!(
        answered,
        answers.len(),
        "a new connection of kube-apiserver's was kept out"
    );
}

/// In the default setup, the probes' listener is flooded from one address and from more
/// addresses than it takes: `/livez` is answered throughout and every eviction is judged.
#[test]
fn a_flooded_probes_listener_still_answers_the_probes() {
    let setup = attacked();
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    attacks::the_probes_listener_flooded(&setup, "certs-probes");
}
