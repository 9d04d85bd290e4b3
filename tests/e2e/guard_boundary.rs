//! The maintenance guard's trust boundary, tried against the real thing: nobody but the admin
//! opens it. Callers without credentials, an Eviction padded past any size, silent connections
//! by the thousand and floods of forged reviews never let a drain through a node that is not
//! clear, and what a forged review can do to the audit trail is nothing.
//!
//! kube-apiserver's own view is the judge: its `apiserver_admission_webhook_fail_open_count`
//! for a door counts every eviction that door let through by failing (an error, a timeout, a
//! refused connection). Each test prints the figures it measures.

use std::io::Write;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use ifo_dev::{Process, User};
use ifo_test_support::{
    Attacker, Env, apiserver_metric, attacks, env, eventually, evictions_under, held_node, probed,
    replicas, tcp_from, tls_client, tls_from, wait_held,
};
use openssl::ssl::SslConnector;
use serde_json::json;

use crate::guard::{self, evict};

const WAIT: Duration = Duration::from_secs(30);

/// The address the attacks come from: loopback, but not kube-apiserver's (127.0.0.1).
const ATTACKER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// The Events in `default` about `node` (`selector`: more field selectors, e.g. a reason).
fn node_events(env: &Env, node: &str, selector: &str) -> usize {
    guard::node_events(env, node, selector, "name").map_or(0, |out| out.lines().count())
}

/// A connection to `port` from [`ATTACKER`] that sends nothing: a TCP connection, or with
/// `tls` a TLS one (its handshake done, trusting the serving CA).
fn silent(tls: Option<&SslConnector>, port: u16) -> Option<Box<dyn std::any::Any>> {
    match tls {
        None => Some(Box::new(tcp_from(ATTACKER, port)?)),
        Some(tls) => Some(Box::new(tls_from(tls, ATTACKER, port)?)),
    }
}

/// POSTs `body` to `path` of `port` from [`ATTACKER`] without credentials; the HTTP status.
fn forged(env: &Env, port: u16, path: &str, body: &Path) -> String {
    ifo_test_support::posted(
        &env.cluster.dir().join("pki/serving-ca.crt"),
        &format!("https://localhost:{port}{path}"),
        &format!("@{}", body.display()),
        Some(ATTACKER),
    )
}

/// The guard of a server of its own, as a default install runs it (the doors do not
/// authenticate their callers: they answer anyone), registered for the namespace `ns` only.
/// kube-apiserver presents its webhook client certificate to it all the same (this cluster
/// gives it to every webhook host), so kube-apiserver's connections are proven ones; its server
/// has more `settings`.
fn own_guard_with(env: &Env, ns: &str, settings: &[(&str, &str)]) -> OwnGuard {
    own_guard_at(env, ns, settings, "evictions")
}

/// A server of a test's own and its guard's webhook ([`own_guard_with`]).
struct OwnGuard {
    /// Stopped when dropped.
    process: Process,
    /// Its API's and doors' ports.
    ports: ifo_dev::Ports,
    /// Its probes' port (`HEALTH_PORT`).
    probes: u16,
    /// Its webhook's name, as kube-apiserver's metrics name it.
    webhook: String,
}

/// [`own_guard_with`], kube-apiserver calling its door at `/admission/<door>` (`evictions`, or
/// `evictions/standby`, which answers the same).
fn own_guard_at(env: &Env, ns: &str, settings: &[(&str, &str)], door: &str) -> OwnGuard {
    let (ports, probes) = (
        ifo_dev::Ports::free().unwrap(),
        ifo_dev::free_port().unwrap(),
    );
    let probes_setting = probes.to_string();
    let mut all = vec![
        ("EVICTION_GUARD", "true"),
        ("LOG_LEVEL", "info"),
        ("HEALTH_PORT", probes_setting.as_str()),
    ];
    all.extend_from_slice(settings);
    let process = ifo_dev::spawn_server(
        &env.cluster,
        Path::new(env!("CARGO_BIN_EXE_ifo-apiserver")),
        ports,
        &all,
        &format!("ifo-apiserver-{ns}.log"),
    )
    .unwrap();
    eventually(Duration::from_secs(60), "its own server ready", || {
        (env.direct_to(ports.api, "/readyz", &[]).0 == "200").then_some(())
    });
    let ca = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(&env.cluster.serving.ca_pem)
    };
    let webhook = eviction_webhook(
        env,
        &format!("guard-{ns}"),
        ns,
        json!({"url": format!("https://localhost:{}/admission/{door}", ports.admission), "caBundle": ca}),
        "Ignore",
    );
    OwnGuard {
        process,
        ports,
        probes,
        webhook,
    }
}

/// Registers the ValidatingWebhookConfiguration `name`: the evictions of namespace `ns` sent to
/// `client` (its `clientConfig`) with `failure_policy`. Returns the webhook's name.
fn eviction_webhook(
    env: &Env,
    name: &str,
    ns: &str,
    client: serde_json::Value,
    failure_policy: &str,
) -> String {
    let webhook = format!("guard.{ns}.ifo.kubevirt.io");
    env.apply(
        &json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{
                "name": webhook,
                "admissionReviewVersions": ["v1"],
                "clientConfig": client,
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                    "resources": ["pods/eviction"], "scope": "Namespaced"}],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "matchPolicy": "Equivalent", "failurePolicy": failure_policy,
                "sideEffects": "NoneOnDryRun", "timeoutSeconds": 3,
            }],
        })
        .to_string(),
    );
    webhook
}

/// Removes the webhook of [`own_guard_with`] for `ns`: kube-apiserver no longer calls its server.
fn unregister_own_guard(env: &Env, ns: &str) {
    env.kubectl(
        User::Admin,
        &[
            "delete",
            "validatingwebhookconfiguration",
            &format!("guard-{ns}"),
        ],
    )
    .unwrap();
}

/// Peak resident memory of process `pid` (VmHWM), in MiB.
fn peak_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap()
        / 1024
}

/// Where kube-apiserver cannot present a certificate, everyone may call the door: 1,200
/// silent connections and a flood of 3 MB forged reviews from one address neither make the
/// door fail (every eviction of a held node's pod through kube-apiserver is refused, none let
/// through by failing open), nor keep kube-apiserver's reviews waiting (they are sent to the
/// standby door, which the forged ones do not call, to be told apart), nor grow the server past a
/// bounded budget, nor stop `/livez`.
#[test]
fn silent_connections_and_forged_floods_cannot_open_the_guard() {
    let env = env();
    let (ns, node) = held_node(env, "gb-flood", 0);
    let own = own_guard_at(env, &ns, &[], "evictions/standby");
    let (port, webhook) = (own.ports.admission, &own.webhook);
    wait_held(env, &ns);
    let reviews_before = replicas::get(env, own.ports.api, "/metrics").1;
    let fail_open = apiserver_metric(env, "apiserver_admission_webhook_fail_open_count", webhook);
    let before_mib = peak_mib(own.process.pid());

    // 1,200 connections from one address that send nothing, kept open: 200 of them after a TLS
    // handshake (what costs the server most), 1,000 before it.
    let opened = Instant::now();
    let tls = tls_client(env);
    let connections: Vec<_> = (0..1200)
        .filter_map(|i| silent((i % 6 == 0).then_some(&tls), port))
        .collect();
    println!(
        "silent connections opened from {ATTACKER}: {} in {:?}",
        connections.len(),
        opened.elapsed()
    );
    assert!(connections.len() > 100, "the attack itself failed");
    // Forged 3 MB reviews (garbage, and an AdmissionReview of 3 MB of groups), from four
    // threads, for as long as the evictions below take.
    let garbage = env.cluster.dir().join(format!("garbage-{ns}.json"));
    std::fs::write(&garbage, vec![b'['; 3 << 20]).unwrap();
    let padded = env.cluster.dir().join(format!("padded-{ns}.json"));
    std::fs::write(
        &padded,
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "x", "operation": "CREATE", "name": "app", "namespace": ns,
                "userInfo": {"username": "mallory", "groups": vec!["g".repeat(100); 30_000]}}})
        .to_string(),
    )
    .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood: Vec<_> = (0..4)
        .map(|i| {
            let (stop, body, env) = (
                stop.clone(),
                if i % 2 == 0 {
                    garbage.clone()
                } else {
                    padded.clone()
                },
                env,
            );
            std::thread::spawn(move || {
                let mut sent = 0;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) && sent < 200 {
                    forged(env, port, "/admission/evictions", &body);
                    forged(env, port, "/admission/rulesets", &body);
                    sent += 2;
                }
                sent
            })
        })
        .collect();

    // Meanwhile, ten evictions through kube-apiserver: each refused by the door (429).
    let mut refused = 0;
    for _ in 0..10 {
        let e = evict(env, User::Admin, &ns, "app");
        assert!(!e.ok, "an eviction of a pod on a held node went through");
        if e.stderr.contains("TooManyRequests") {
            refused += 1;
        }
        assert_eq!(probed(own.probes, "/livez"), "200", "/livez");
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let forged_sent: usize = flood.into_iter().map(|t| t.join().unwrap()).sum();
    let peak = peak_mib(own.process.pid());
    let failed_open =
        apiserver_metric(env, "apiserver_admission_webhook_fail_open_count", webhook) - fail_open;
    println!(
        "evictions refused: {refused} of 10; failed open: {failed_open}; forged reviews sent: \
         {forged_sent}; server peak memory {before_mib} MiB before, {peak} MiB after"
    );
    assert_eq!(refused, 10);
    assert_eq!(failed_open, 0.0, "kube-apiserver let evictions through");
    let reviews_after = replicas::get(env, own.ports.api, "/metrics").1;
    attacks::reviews_did_not_wait(&reviews_before, &reviews_after, "evictions_standby");
    assert!(
        peak < before_mib + 96,
        "the server grew from {before_mib} to {peak} MiB"
    );
    let displaced = env.direct_to(own.ports.api, "/metrics", &[]).1;
    drop(connections);
    // Still serving, and the gate still says why.
    assert_eq!(env.direct_to(own.ports.api, "/readyz", &[]).0, "200");
    println!(
        "node {node} held throughout; /metrics without credentials: {}",
        displaced.lines().next().unwrap_or("")
    );
    unregister_own_guard(env, &ns);
}

/// A bearer token proves a request, not its connection: a hundred connections from one address,
/// each authenticated with the token of a user who has no rights at all (any pod's
/// ServiceAccount token would do) and kept so, take nothing from the connections that
/// kube-apiserver proves with its certificate (a pool of 16 here, so the attack is cheap): every
/// eviction of a held node's pod through kube-apiserver, its first connection to the door made
/// while they are held, is refused, none let through by failing, none kept waiting.
#[test]
fn a_token_holders_connections_take_no_place_of_kube_apiservers() {
    let env = env();
    let (ns, _node) = held_node(env, "gb-tokens", 0);
    let own = own_guard_with(env, &ns, &[("MAX_CONNECTIONS", "16")]);
    let token = User::Bob.token().unwrap();
    let attacker = Attacker::new(
        ATTACKER,
        own.ports.admission,
        100,
        &format!(
            "GET /apis/live.ifo.kubevirt.io/v1alpha1 HTTP/1.1\r\nHost: localhost\r\n\
             Authorization: Bearer {token}\r\n\r\n"
        ),
    );
    // Every connection is made and its request authenticated before kube-apiserver's first.
    let before = replicas::get(env, own.ports.api, "/metrics").1;
    let seen = evictions_under(env, &ns, &[&own.webhook], own.probes, vec![attacker], None);
    let after = replicas::get(env, own.ports.api, "/metrics").1;
    // Its requests are not reviews (the doors answer them 404): the door's are kube-apiserver's.
    attacks::reviews_did_not_wait(&before, &after, "evictions");
    assert!(seen.opened >= 100, "the attack itself failed");
    assert_eq!(
        seen.failed_open, 0.0,
        "kube-apiserver let evictions through"
    );
    assert_eq!(seen.refused, seen.sent);
    unregister_own_guard(env, &ns);
}

/// An Eviction padded with a large annotation makes a review larger than any the door used
/// to read; it is judged all the same (held, 429), at both doors.
#[test]
fn a_padded_eviction_is_judged_whatever_its_size() {
    let env = env();
    let (ns, node) = held_node(env, "gb-padded", 0);
    for size in [70 << 10, 1 << 20] {
        let eviction = json!({
            "apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": "app", "namespace": ns,
                "annotations": {"padding": "x".repeat(size)}},
        });
        let e = crate::guard::evict_with(env, User::Admin, &ns, "app", &eviction);
        let stderr = e.stderr;
        println!(
            "a {size}-byte annotation: {}",
            stderr.lines().next().unwrap_or("")
        );
        assert!(!e.ok, "the padded eviction went through");
        // Held (the node not clear, or not known to be while the machine is loaded): judged.
        assert!(
            stderr.contains("TooManyRequests")
                && stderr.contains(&format!("node {node} is not"))
                && stderr.contains("clear for maintenance"),
            "not refused by the guard: {stderr}"
        );
    }
    env.kubectl(User::Admin, &["get", "pod", "app", "-n", &ns])
        .unwrap();
}

/// The doors answer kube-apiserver only (the local cluster's kube-apiserver presents the
/// webhook client certificate): a caller without it, or with another certificate of the same
/// CA, gets 401 before its body is read, learns nothing of where a pod runs, and writes no
/// Event and no log line; the certificate's holder is answered.
#[test]
fn only_kube_apiserver_may_call_the_doors() {
    let env = env();
    let (ns, node) = held_node(env, "gb-forged", 0);
    wait_held(env, &ns);
    let events = || node_events(env, &node, "");
    let events_before = events();
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "forged", "operation": "CREATE", "name": "app", "namespace": ns,
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction", "userInfo": {"username": "mallory"}}})
    .to_string();
    let unauthorized = || {
        env.metric("ifo_guard_decisions_total{door=\"evictions\",decision=\"error\",reason=\"unauthorized\"}")
    };
    let before = unauthorized();
    let alice = env.client_cert_args(User::Alice);
    let alice: Vec<&str> = alice.iter().map(String::as_str).collect();
    for path in [
        "/admission/evictions",
        "/admission/evictions/standby",
        "/admission/rulesets",
    ] {
        for credentials in [&[][..], &alice[..]] {
            let mut args = vec![
                "-X",
                "POST",
                "-H",
                "Content-Type: application/json",
                "--data",
                &review,
            ];
            args.extend(credentials);
            let (code, body) = env.direct_to(env.admission_port, path, &args);
            assert_eq!(code, "401", "{path}: {body}");
            assert!(
                !body.contains(&node),
                "{path} told where the pod runs: {body}"
            );
        }
    }
    assert!(unauthorized() >= before + 2.0);
    // No Event came of the forged reviews (the held evictions before them wrote at most one a
    // minute): counted before kube-apiserver's own review below, which may write one (under
    // load, the node's gate may read Unknown there, another reason than before).
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        events() <= events_before.max(1),
        "forged reviews wrote Events"
    );
    // kube-apiserver's certificate is answered.
    let pki = env.cluster.dir().join("pki");
    let (cert, key) = (
        pki.join("webhook-client.crt"),
        pki.join("webhook-client.key"),
    );
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    let (code, body) = env.direct_to(
        env.admission_port,
        "/admission/evictions",
        &[
            "-X", "POST", "--cert", &cert, "--key", &key, "--data", &review,
        ],
    );
    assert_eq!(code, "200", "{body}");
    assert!(body.contains("\"allowed\":false"), "{body}");
    let log = env.server_log_tail(400);
    assert!(!log.contains("mallory"), "a forged review reached the log");
    let _ = Write::flush(&mut std::io::stdout());
}

/// A node whose name is as long as its gate's name allows (`node.` and 248 characters) has its
/// gate, and gets the Event that says why its drain waits: its name and a unique suffix would
/// not fit in an Event's name.
#[test]
fn a_node_with_a_long_name_gets_its_event() {
    let env = env();
    let (ns, node) = held_node(env, "gb-long", 248);
    assert_eq!(node.len(), 248);
    wait_held(env, &ns);
    eventually(WAIT, "the MaintenanceHeld Event on the node", || {
        (node_events(env, &node, ",reason=MaintenanceHeld") > 0).then_some(())
    });
}

/// With `failurePolicy: Fail`, a guard that cannot be reached holds every drain it covers, and
/// the way out is the admin's alone, as docs/operating.md ("When the guard is down") says: the
/// webhook's failure policy set to `Ignore`, which a tenant (`edit` in the namespace) and a user
/// with no rights are refused, and after which the drain goes through.
#[test]
fn with_fail_a_guard_that_cannot_be_reached_holds_drains_until_the_admin_opens_it() {
    let env = env();
    let ns = env.namespace("guard-fail");
    env.tenant("alice", &ns);
    let node = env.node(&format!("{ns}-n1"));
    guard::pod_on(env, &ns, "app", node.name());
    // A door no one answers: a port that was free a moment ago.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let name = format!("guard-fail-{ns}");
    eviction_webhook(
        env,
        &name,
        &ns,
        json!({"url": format!("https://localhost:{port}/admission/evictions")}),
        "Fail",
    );
    let refused = eventually(WAIT, "the drain held by the door no one answers", || {
        let e = evict(env, User::Admin, &ns, "app");
        assert!(!e.ok, "let through by a guard that is down with Fail");
        e.stderr
            .contains("failed calling webhook")
            .then_some(e.stderr)
    });
    println!("as kubectl drain sees it: {}", refused.trim());
    // Neither a tenant nor a user with no rights may open it.
    let open = r#"[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]"#;
    let patch = [
        "patch",
        "validatingwebhookconfiguration",
        &name,
        "--type=json",
        "-p",
        open,
    ];
    for user in [User::Alice, User::Bob] {
        let tried = env.kubectl(user, &patch);
        let said = format!("{tried:?}");
        assert!(
            tried.is_err() && said.contains("forbidden"),
            "{user:?} opened the guard: {said}"
        );
    }
    let e = evict(env, User::Admin, &ns, "app");
    assert!(!e.ok, "still held: {}", e.stderr);
    // The admin opens it: the drain goes through (kube-apiserver reads the change within a
    // moment).
    env.kubectl(User::Admin, &patch).unwrap();
    eventually(
        WAIT,
        "the drain let through once the admin opened it",
        || evict(env, User::Admin, &ns, "app").ok.then_some(()),
    );
    env.kubectl(
        User::Admin,
        &["delete", "validatingwebhookconfiguration", &name],
    )
    .unwrap();
}

/// `ifo_guard_reached` of the server whose API listens on `port`: `None` before its first check.
fn reached(env: &Env, port: u16) -> Option<f64> {
    let (_, metrics) = ifo_test_support::replicas::get(env, port, "/metrics");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("ifo_guard_reached "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| !v.is_nan())
}

/// The guard says whether kube-apiserver reaches its door, by asking kube-apiserver for a dry-run
/// eviction that only its own door can answer as its own: a server whose webhook covers its
/// namespace reads `ifo_guard_reached` 1; one whose checks kube-apiserver sends to other doors
/// only (its webhook does not cover its namespace, as a NetworkPolicy or a firewall in the way
/// would have it) reads 0 and says so in its log, and nothing the checks did was counted as
/// a decision.
#[test]
fn the_guard_says_whether_kube_apiserver_reaches_its_door() {
    let env = env();
    // The shared server, in ifo-system (deploy/guard/rbac.yaml's Role), is reached.
    eventually(WAIT, "the shared server's door reached", || {
        (reached(env, env.port) == Some(1.0)).then_some(())
    });
    let ns = env.namespace("gb-reach");
    // The server's Role in its namespace, as deploy/guard/rbac.yaml grants it in ifo-system.
    for args in [
        vec![
            "create",
            "role",
            "reach-check",
            "--verb=create",
            "--resource=pods/eviction",
            "--resource-name=ifo-guard-check",
        ],
        vec![
            "create",
            "rolebinding",
            "reach-check",
            "--role=reach-check",
            "--serviceaccount=ifo-system:ifo-apiserver",
        ],
    ] {
        let mut args = args;
        args.extend(["-n", &ns]);
        env.kubectl(User::Admin, &args).unwrap();
    }
    let checking = [("GUARD_REACH_CHECK_INTERVAL", "1s"), ("POD_NAMESPACE", &ns)];
    let own = own_guard_with(env, &ns, &checking);
    eventually(WAIT, "the door reached", || {
        (reached(env, own.ports.api) == Some(1.0)).then_some(())
    });
    let (_, metrics) = ifo_test_support::replicas::get(env, own.ports.api, "/metrics");
    assert!(
        metrics
            .lines()
            .filter(|l| l.starts_with("ifo_guard_decisions_total{"))
            .all(|l| l.ends_with(" 0")),
        "the checks were counted as decisions:\n{metrics}"
    );
    drop(own);
    unregister_own_guard(env, &ns);

    // Its checks go to ifo-system, which its webhook does not cover: the shared server's doors
    // answer them, as their own.
    let pod = format!("own-{ns}");
    let own = own_guard_with(
        env,
        &ns,
        &[("GUARD_REACH_CHECK_INTERVAL", "1s"), ("POD_NAME", &pod)],
    );
    let log = env.cluster.dir().join(format!("ifo-apiserver-{ns}.log"));
    let said = eventually(WAIT, "the door found unreached, and said so", || {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        (reached(env, own.ports.api) == Some(0.0)
            && said.contains("kube-apiserver did not call this replica's guard door"))
        .then_some(said)
    });
    // kube-apiserver called the doors it was given: the shared server's, which answered as
    // their own.
    let line = said
        .lines()
        .find(|l| l.contains("did not call this replica's guard door"))
        .unwrap();
    assert!(
        line.contains("door evictions of ifo-apiserver/") && !line.contains(&pod),
        "the shared server's answer, and only its, is not in: {line}"
    );
    drop(own);
    unregister_own_guard(env, &ns);
}
