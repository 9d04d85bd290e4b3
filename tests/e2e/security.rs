//! Hostile and unlucky input against the real server, through kube-apiserver and directly, as
//! users with the least rights: what is authorized is what is served, limits hold, and the
//! server neither panics nor keeps what a caller sends.

use ifo_dev::User;
use ifo_test_support::{
    Env, MAX_WATCHES_PER_USER, env, eventually, heavy_ruleset, heavy_vm, populated,
    populated_for_alice,
};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);
const LIVE: &str = "/apis/live.ifo.kubevirt.io/v1alpha1";

/// The names of the operations in `ns`, sorted.
fn names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

/// Grants `user` the verbs on inflightoperations in `ns`, limited to `names` when given.
fn grant(env: &Env, ns: &str, user: User, role: &str, verbs: &[&str], names: &[&str]) {
    let mut rule = json!({"apiGroups": ["live.ifo.kubevirt.io"],
                          "resources": ["inflightoperations"], "verbs": verbs});
    if !names.is_empty() {
        rule["resourceNames"] = json!(names);
    }
    env.apply(
        &json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": role, "namespace": ns}, "rules": [rule]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": role, "namespace": ns},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user.name()}]},
        ]})
        .to_string(),
    );
}

/// `kubectl get --raw path` as `user`, through kube-apiserver.
fn raw(env: &Env, user: User, path: &str) -> anyhow::Result<String> {
    env.kubectl(user, &["get", "--raw", path, "--request-timeout=15s"])
}

fn bearer(user: User) -> [String; 2] {
    [
        "-H".to_string(),
        format!("Authorization: Bearer {}", user.token().unwrap()),
    ]
}

/// Calls our server directly as `user` (bearer token): (status, body).
fn direct(env: &Env, user: User, path: &str) -> (String, String) {
    let args = bearer(user);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    env.direct(path, &args)
}

/// A [`populated`] namespace alice may view, once she may list its operations straight from
/// the server. Returns the namespace and the path of its operations.
fn listed_by_alice(env: &Env, prefix: &str) -> (String, String) {
    let (ns, _) = populated_for_alice(env, prefix);
    let base = format!("{LIVE}/namespaces/{ns}/inflightoperations");
    eventually(WAIT, "alice may list", || {
        (direct(env, User::Alice, &base).0 == "200").then_some(())
    });
    (ns, base)
}

#[test]
fn a_repeated_parameter_is_served_as_kube_apiserver_authorized_it() {
    let env = env();
    let (ns, _) = populated(env, "dup");
    let all = names(&env.get_json(User::Admin, &["get", "ifos", "-n", &ns]));
    let one = all[0].clone();
    // alice may get and list that one operation by name; bob may list, not watch.
    grant(env, &ns, User::Alice, "one-op", &["get", "list"], &[&one]);
    grant(env, &ns, User::Bob, "list-only", &["list"], &[]);
    let ops = format!("{LIVE}/namespaces/{ns}/inflightoperations");
    let named = format!("{ops}?fieldSelector=metadata.name%3D{one}");
    eventually(WAIT, "alice may list her operation", || {
        raw(env, User::Alice, &named).ok()
    });

    // The first value counts: the one operation, never the namespace.
    let list: Value =
        serde_json::from_str(&raw(env, User::Alice, &format!("{named}&fieldSelector=")).unwrap())
            .unwrap();
    assert_eq!(names(&list), vec![one.clone()], "{list}");
    let everything = raw(
        env,
        User::Alice,
        &format!("{ops}?fieldSelector=&fieldSelector=metadata.name%3D{one}"),
    )
    .unwrap_err();
    assert!(
        format!("{everything:#}").contains("Forbidden"),
        "{everything:#}"
    );

    // watch=false first: a list, answered at once, not a stream.
    eventually(WAIT, "bob may list", || raw(env, User::Bob, &ops).ok());
    let started = Instant::now();
    let answer = raw(env, User::Bob, &format!("{ops}?watch=false&watch=true")).unwrap();
    let list: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(list["kind"], "InFlightOperationList", "{answer}");
    assert_eq!(names(&list), all);
    assert!(started.elapsed() < Duration::from_secs(10));
    let refused = raw(env, User::Bob, &format!("{ops}?watch=true&watch=false")).unwrap_err();
    assert!(format!("{refused:#}").contains("Forbidden"), "{refused:#}");
}

#[test]
fn path_oddities_are_authorized_as_they_are_served() {
    let env = env();
    let (ns, base) = listed_by_alice(env, "paths");
    let (other, _) = populated(env, "paths-other");
    let mine = names(&serde_json::from_str(&direct(env, User::Alice, &base).1).unwrap());
    assert_eq!(mine.len(), 2);

    // Decoded before it is split, like kube-apiserver: an encoded slash is a slash.
    let (code, body) = direct(
        env,
        User::Alice,
        &format!("{LIVE}/namespaces/{ns}%2Finflightoperations"),
    );
    assert_eq!(code, "200", "{body}");
    assert_eq!(names(&serde_json::from_str(&body).unwrap()), mine);
    let (code, body) = direct(
        env,
        User::Alice,
        &format!("{LIVE}/namespaces/n%73-x/inflightoperations"),
    );
    assert_eq!(
        code, "403",
        "another namespace, spelled with an escape: {body}"
    );
    for path in [
        // An empty namespace is every namespace, which alice may not list.
        format!("{LIVE}/namespaces//inflightoperations"),
        // `..` is not resolved: this asks for namespace `{other}`.
        format!("{LIVE}/namespaces/{other}/..%2F..%2Fnamespaces%2F{ns}/inflightoperations"),
        format!("{LIVE}/namespaces/{other}/inflightoperations"),
        format!("{LIVE}//namespaces/{ns}/inflightoperations"),
    ] {
        let (code, body) = direct(env, User::Alice, &path);
        assert!(code == "403" || code == "404", "{path}: {code} {body}");
        assert!(
            !body.contains("\"items\""),
            "{path} listed something: {body}"
        );
    }
    // A subresource is not the object.
    let (code, _) = direct(env, User::Alice, &format!("{base}/{}/status", mine[0]));
    assert!(code == "403" || code == "404", "{code}");
    // Invalid UTF-8 once decoded: a clear 400.
    let (code, body) = direct(
        env,
        User::Alice,
        &format!("{LIVE}/namespaces/%ff/inflightoperations"),
    );
    assert_eq!(code, "400", "{body}");
}

#[test]
fn a_huge_watch_timeout_neither_panics_nor_outlives_the_server_maximum() {
    let env = env();
    let (_, base) = listed_by_alice(env, "timeout");
    for t in ["9223372036854775807", "18446744073709551615", "0"] {
        // curl gives up after 2 s; the stream was open (200) until then.
        let mut args = bearer(User::Alice).to_vec();
        args.extend(["--max-time".into(), "2".into()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, body) = env.direct(&format!("{base}?watch=true&timeoutSeconds={t}"), &args);
        assert_eq!(code, "200", "timeoutSeconds={t}: {body}");
        assert!(body.contains("\"ADDED\""), "{body}");
    }
    let (code, body) = direct(
        env,
        User::Alice,
        &format!("{base}?watch=true&timeoutSeconds=-1"),
    );
    assert_eq!(code, "400", "{body}");
    assert_eq!(direct(env, User::Alice, &base).0, "200");
    assert!(!env.server_log_tail(2000).contains("panicked"));
}

#[test]
fn one_user_cannot_hold_more_watches_than_the_limit() {
    let env = env();
    let (ns, _) = populated(env, "watchcap");
    grant(env, &ns, User::Bob, "watch", &["list", "watch"], &[]);
    let base = format!("{LIVE}/namespaces/{ns}/inflightoperations");
    eventually(WAIT, "bob may list", || {
        (direct(env, User::Bob, &base).0 == "200").then_some(())
    });
    let url = format!("https://127.0.0.1:{}{base}?watch=true", env.port);
    let ca = env.cluster.dir().join("pki/serving-ca.crt");
    let spawn_watch = || {
        Command::new("curl")
            .args(["-sN", "--max-time", "60", "--cacert"])
            .arg(&ca)
            .args(bearer(User::Bob))
            .arg(&url)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut watches: Vec<_> = (0..MAX_WATCHES_PER_USER).map(|_| spawn_watch()).collect();
    // Each watch is open once its first event arrived.
    for w in &mut watches {
        let mut first = [0u8; 1];
        w.stdout.as_mut().unwrap().read_exact(&mut first).unwrap();
    }
    let (code, body) = direct(env, User::Bob, &format!("{base}?watch=true"));
    assert_eq!(code, "429", "{body}");
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["reason"], "TooManyRequests", "{body}");
    // Other users are not affected.
    env.grant_alice_view(&ns);
    let mut args = bearer(User::Alice).to_vec();
    args.extend(["--max-time".into(), "2".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    eventually(WAIT, "alice may watch", || {
        (env.direct(&format!("{base}?watch=true"), &args).0 == "200").then_some(())
    });
    // A watch that ends gives its place back.
    let mut ended = watches.pop().unwrap();
    ended.kill().unwrap();
    ended.wait().unwrap();
    let mut args = bearer(User::Bob).to_vec();
    args.extend(["--max-time".into(), "2".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    eventually(WAIT, "bob's place given back", || {
        (env.direct(&format!("{base}?watch=true"), &args).0 == "200").then_some(())
    });
    for mut w in watches {
        let _ = w.kill();
        let _ = w.wait();
    }
}

/// A TLS connection to the server that trusts its CA.
fn tls_connect(env: &Env) -> rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(&env.cluster.serving.ca_pem) {
        roots.add(ca.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = "ifo-apiserver.ifo-system.svc".try_into().unwrap();
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let tcp = std::net::TcpStream::connect(("127.0.0.1", env.port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    rustls::StreamOwned::new(conn, tcp)
}

#[test]
fn a_client_that_never_finishes_its_headers_is_disconnected() {
    let env = env();
    let mut tls = tls_connect(env);
    tls.write_all(b"GET /apis HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .unwrap();
    let started = Instant::now();
    let mut rest = Vec::new();
    // The server closes the connection (EOF, or a reset) instead of waiting for ever.
    let _ = tls.read_to_end(&mut rest);
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(20),
        "the connection stayed open {waited:?}"
    );
    assert!(waited >= Duration::from_secs(5), "closed after {waited:?}");
}

#[test]
fn long_selectors_pass_through_kube_apiserver() {
    let env = env();
    let (ns, _) = populated(env, "longsel");
    // About 24 KiB of label selector (within the server's selector limits), beyond HTTP/2's
    // default 16 KiB header list.
    let selector = (0..4)
        .map(|k| {
            let values: Vec<String> = (0..100)
                .map(|i| format!("v{k}{i:03}{}", "x".repeat(54)))
                .collect();
            format!("example.com/k{k}+notin+({})", values.join(","))
        })
        .chain(["example.com/team+in+(nobody)".to_string()])
        .collect::<Vec<_>>()
        .join(",");
    let list: Value = serde_json::from_str(
        &raw(
            env,
            User::Admin,
            &format!("{LIVE}/namespaces/{ns}/inflightoperations?labelSelector={selector}"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 0, "{list}");
}

#[test]
fn client_certificates_of_the_cluster_ca_authenticate_their_user() {
    let env = env();
    let (ns, _) = populated_for_alice(env, "clientcert");
    let (other, _) = populated(env, "clientcert-other");
    let alice = env.client_cert_args(User::Alice);
    let alice: Vec<&str> = alice.iter().map(String::as_str).collect();
    let path = |n: &str| format!("{LIVE}/namespaces/{n}/inflightoperations");
    let (code, body) = eventually(WAIT, "alice's certificate lists her namespace", || {
        Some(env.direct(&path(&ns), &alice)).filter(|(c, _)| c == "200")
    });
    assert_eq!(
        names(&serde_json::from_str(&body).unwrap()).len(),
        2,
        "{code} {body}"
    );
    let (code, body) = env.direct(&path(&other), &alice);
    assert_eq!(code, "403", "{body}");
    assert!(body.contains("User \\\"alice\\\""), "{body}");
    // The admin certificate (group system:masters) may read /metrics.
    let admin = env.client_cert_args(User::Admin);
    let admin: Vec<&str> = admin.iter().map(String::as_str).collect();
    let (code, body) = env.direct("/metrics", &admin);
    assert_eq!(code, "200", "{body}");
    // Identity headers beside a client certificate are not read.
    let mut forged = alice.clone();
    forged.extend([
        "-H",
        "X-Remote-User: admin",
        "-H",
        "X-Remote-Group: system:masters",
    ]);
    assert_eq!(env.direct(&path(&other), &forged).0, "403");
    // A certificate of another CA fails the handshake.
    let dir = env.cluster.dir().join("foreign-client");
    std::fs::create_dir_all(&dir).unwrap();
    let ca = ifo_dev::pki::KeyPair::new_ca("someone-else").unwrap();
    let cert = ca
        .issue("admin", &["system:masters"], ifo_dev::pki::Usage::Client)
        .unwrap();
    std::fs::write(dir.join("c.crt"), &cert.cert_pem).unwrap();
    std::fs::write(dir.join("c.key"), &cert.key_pem).unwrap();
    let (c, k) = (dir.join("c.crt"), dir.join("c.key"));
    let (code, _) = env.direct(
        &path(&ns),
        &["--cert", c.to_str().unwrap(), "--key", k.to_str().unwrap()],
    );
    assert_eq!(
        code, "000",
        "a foreign certificate must not get an HTTP answer"
    );
}

#[test]
fn an_unprivileged_caller_cannot_pin_memory_with_large_requests() {
    let env = env();
    let dir = env.cluster.dir().join("large-requests");
    std::fs::create_dir_all(&dir).unwrap();
    // 1,000 distinct requests with 60 KB paths, over one kept-alive connection, by bob, who
    // may do nothing: half of them to our resources (reviewed, refused), half elsewhere.
    let mut config = String::new();
    for i in 0..1_000 {
        let filler = format!("{i}-{}", "x".repeat(60_000));
        let path = if i % 2 == 0 {
            format!("{LIVE}/namespaces/{filler}/inflightoperations")
        } else {
            format!("/{filler}")
        };
        let _ = writeln!(
            config,
            "url = \"https://127.0.0.1:{}{path}\"\noutput = \"/dev/null\"",
            env.port
        );
    }
    std::fs::write(dir.join("curl.conf"), config).unwrap();
    let run = || {
        let out = Command::new("curl")
            .args(["-s", "-w", "%{http_code}\n", "--cacert"])
            .arg(env.cluster.dir().join("pki/serving-ca.crt"))
            .args(bearer(User::Bob))
            .arg("-K")
            .arg(dir.join("curl.conf"))
            .output()
            .unwrap();
        let codes = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            codes
                .lines()
                .all(|c| c == "403" || c == "404" || c == "431"),
            "{}",
            &codes[..codes.len().min(400)]
        );
        assert_eq!(codes.lines().count(), 1_000);
    };
    run(); // warm: allocator arenas, connection buffers
    let before = ifo_test_support::rss_kib(env.server_pid());
    run();
    run();
    let after = ifo_test_support::rss_kib(env.server_pid());
    let grown = after.saturating_sub(before);
    println!("server RSS {before} KiB → {after} KiB after 2,000 large requests (+{grown} KiB)");
    assert!(grown < 16 * 1024, "RSS grew by {grown} KiB");
}

/// `kubectl` as `user` through kube-apiserver: (exit code, stderr), where kubectl prints the
/// answer's `Warning`s.
fn kubectl_warnings(env: &Env, user: User, args: &[&str]) -> (i32, String) {
    let out = env
        .cluster
        .kubectl(user)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// bob may list cluster-scoped operations and nothing of any namespace: while an object of
/// another tenant's namespace is skipped (over its ruleset's budget), his answer says that it
/// may be incomplete, without naming the object (its name can be a secret) nor its
/// namespace. A read of that namespace, and one across every namespace, name it.
#[test]
fn a_read_of_cluster_scoped_operations_names_no_object_of_a_namespace() {
    let env = env();
    let ns = env.namespace("payroll");
    let secret = "secret-project-payroll-export";
    let rs = format!("heavy-{ns}");
    env.apply(&heavy_ruleset(&rs, &ns).to_string());
    env.wait_watching(&rs);
    env.apply(&heavy_vm(secret, &ns));
    let named = format!("object {ns}/{secret} is skipped");
    eventually(WAIT, "a read of the namespace naming the object", || {
        let (code, stderr) = kubectl_warnings(env, User::Admin, &["get", "ifos", "-n", &ns]);
        (code == 0 && stderr.contains(&named)).then_some(())
    });

    let role = format!("cluster-ops-{ns}");
    env.apply(
        &json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": role},
             "rules": [{"apiGroups": ["live.ifo.kubevirt.io"],
                        "resources": ["inflightclusteroperations"],
                        "verbs": ["get", "list", "watch"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": role},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]},
        ]})
        .to_string(),
    );
    let bob = eventually(WAIT, "bob may list cluster-scoped operations", || {
        let (code, stderr) = kubectl_warnings(env, User::Bob, &["get", "ifcos"]);
        (code == 0).then_some(stderr)
    });
    // Still skipped: a read of the namespace names it.
    let (_, admin) = kubectl_warnings(env, User::Admin, &["get", "ifos", "-n", &ns]);
    assert!(admin.contains(&named), "{admin}");
    println!("bob's warnings:\n{}", bob.trim());
    assert!(!bob.contains(secret), "{bob}");
    assert!(!bob.contains(&ns), "{bob}");
    assert!(
        bob.contains(
            "Warning: operations may be incomplete: detection is not current in some namespaces"
        ),
        "{bob}"
    );
    // Across every namespace: authorized for all of them.
    let (_, all) = kubectl_warnings(env, User::Admin, &["get", "ifos", "-A"]);
    assert!(all.contains("operations may be incomplete"), "{all}");

    env.kubectl(
        User::Admin,
        &["delete", "clusterrolebinding,clusterrole", &role],
    )
    .unwrap();
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}
