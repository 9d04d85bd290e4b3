//! What a pod, a tenant, an object or a local user could do to the server, its users or the
//! local cluster, tried against the real thing: silent connections, escape sequences in object
//! data, readable keys, expired certificates on kept-alive connections (huge selectors:
//! `tests/watch_memory.rs`, on a cluster of its own).
//! Each test prints the figure it measures.

use ifo_dev::{Process, User};
use ifo_test_support::{Env, env, eventually, vm, vm_ruleset};
use serde_json::{Value, json};
use std::io::Write;
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIVE: &str = "/apis/live.ifo.kubevirt.io/v1alpha1";

/// A server of its own on the shared cluster (called directly, never through kube-apiserver),
/// started with `settings`; ready when returned. It stops when the returned process is dropped.
fn own_server(env: &Env, name: &str, settings: &[(&str, &str)]) -> (Process, u16) {
    let ports = ifo_dev::Ports::free().unwrap();
    let port = ports.api;
    let process = ifo_dev::spawn_server(
        &env.cluster,
        Path::new(env!("CARGO_BIN_EXE_ifo-apiserver")),
        ports,
        settings,
        &format!("ifo-apiserver-{name}.log"),
    )
    .unwrap();
    eventually(Duration::from_secs(60), "its own server ready", || {
        (env.direct_to(port, "/readyz", &[]).0 == "200").then_some(())
    });
    (process, port)
}

/// Server-side TCP connections of `port` that are established (from /proc/net/tcp).
fn established(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let local = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() > 3 && fields[1].ends_with(&local) && fields[3] == "01"
        })
        .count()
}

/// A TLS connection to `port` offering `alpn` (wire format), trusting the serving CA.
fn tls(env: &Env, port: u16, alpn: &[u8]) -> openssl::ssl::SslStream<TcpStream> {
    use openssl::ssl::{SslConnector, SslMethod};
    let mut builder = SslConnector::builder(SslMethod::tls_client()).unwrap();
    builder
        .cert_store_mut()
        .add_cert(openssl::x509::X509::from_pem(&env.cluster.serving.ca_pem).unwrap())
        .unwrap();
    builder.set_alpn_protos(alpn).unwrap();
    let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    builder.build().connect("localhost", tcp).unwrap()
}

#[test]
fn silent_connections_are_closed_before_they_send_a_request() {
    let env = env();
    let (_server, port) = own_server(env, "silent-connections", &[]);
    let opened = Instant::now();
    // 50 that finish the handshake and send nothing, 50 that send the HTTP/2 preface and
    // SETTINGS and nothing more, 50 that never start TLS.
    let silent: Vec<_> = (0..50).map(|_| tls(env, port, b"\x08http/1.1")).collect();
    let preface: Vec<_> = (0..50)
        .map(|_| {
            let mut s = tls(env, port, b"\x02h2");
            s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
                .unwrap();
            s.flush().unwrap();
            s
        })
        .collect();
    let plain: Vec<TcpStream> = (0..50)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let all_open = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    let at_first = established(port);
    println!(
        "connections open once the 150 were made ({:?} after the first): {at_first}",
        all_open.duration_since(opened)
    );
    assert!(at_first >= 50, "{at_first} connections established");
    // Meanwhile, the server serves.
    assert_eq!(env.direct_to(port, "/readyz", &[]).0, "200");

    // The deadline (REQUEST_HEADER_TIMEOUT, 10 s) has passed for every one of them.
    std::thread::sleep(Duration::from_secs(13).saturating_sub(all_open.elapsed()));
    let left = established(port);
    println!(
        "connections that sent no request, still open 13 s after the last was made: {left} of 150"
    );
    assert_eq!(
        left, 0,
        "the server keeps connections that never send a request"
    );
    // The server still serves new clients.
    assert_eq!(env.direct_to(port, "/readyz", &[]).0, "200");
    drop((plain, silent, preface));
}

/// The bytes a terminal would act on: C0 controls but newline and tab, DEL, C1 controls
/// (ESC starts every escape sequence; C1 CSI and OSC start others).
fn control_characters(output: &str) -> Vec<char> {
    output
        .chars()
        .filter(|c| {
            let c = *c as u32;
            (c < 0x20 && c != u32::from(b'\n') && c != u32::from(b'\t'))
                || c == 0x7f
                || (0x80..0xa0).contains(&c)
        })
        .collect()
}

#[test]
fn kubectl_ifo_prints_no_control_characters_from_the_cluster() {
    let env = env();
    let (ns, rs) = env.namespace_with_ruleset("spoof", "vm-rules", vm_ruleset);
    // An owner whose kind and name carry escape sequences (kube-apiserver does not check them).
    let mut owned: Value = serde_json::from_str(&vm("vm1", &ns)).unwrap();
    owned["metadata"]["ownerReferences"][0]["kind"] = json!("Pool\u{1b}[2J\u{1b}[H");
    owned["metadata"]["ownerReferences"][0]["name"] = json!("pool\u{1b}]0;title\u{7}-1\u{9b}31m");
    env.apply(&owned.to_string());
    env.wait_watching(&rs);
    // The message copies migrationTarget: a line that rewrites the terminal.
    let target = "node-9\r\u{1b}[1A\u{1b}[2K\u{1b}[32mSAFE\u{1b}[0m\u{7f}\u{0}\u{8}";
    env.set_vm_status(
        &ns,
        "vm1",
        json!({"printableStatus": "Migrating", "migrationTarget": target}),
    );
    eventually(Duration::from_secs(30), "the operation", || {
        (env.ifos(&ns).len() == 1).then_some(())
    });
    let name = env.ifos(&ns)[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_owned();

    let plugin = |args: &[&str]| -> (i32, String, String) {
        let out = Command::new(ifo_test_support::plugin_binary())
            .env("KUBECONFIG", env.cluster.kubeconfig(User::Admin))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let mut found = Vec::new();
    for args in [
        vec!["list", "-n", &ns],
        vec!["list", "-n", &ns, "-o", "wide"],
        vec!["list", "-A"],
        vec!["get", &name, "-n", &ns],
        vec!["tree", "-n", &ns],
        vec!["summary", "-n", &ns],
        vec!["check", "-n", &ns],
        vec!["wait", "-n", &ns, "--timeout", "1s"],
    ] {
        let (_, stdout, stderr) = plugin(&args);
        for (stream, text) in [("stdout", &stdout), ("stderr", &stderr)] {
            let controls = control_characters(text);
            if !controls.is_empty() {
                found.push(format!(
                    "kubectl ifo {} printed {controls:?} on {stream}:\n{text:?}",
                    args.join(" ")
                ));
            }
        }
        if args[0] == "get" {
            assert!(stdout.contains("node-9"), "{stdout}");
        }
    }
    println!(
        "outputs of kubectl ifo (stdout and stderr of 8 commands) with control characters: {}",
        found.len()
    );
    assert!(found.is_empty(), "{}", found.join("\n"));

    // watch prints the same rows.
    let mut child = Command::new(ifo_test_support::plugin_binary())
        .env("KUBECONFIG", env.cluster.kubeconfig(User::Admin))
        .args(["watch", "-n", &ns])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("node-9"), "{text:?}");
    assert_eq!(control_characters(&text), Vec::<char>::new(), "{text:?}");

    // JSON and YAML stay exact.
    let (code, stdout, stderr) = plugin(&["get", &name, "-n", &ns, "-o", "json"]);
    assert_eq!(code, 0, "{stderr}");
    let obj: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(obj["status"]["message"], format!("to {target}"));
    let (code, stdout, stderr) = plugin(&["list", "-n", &ns, "-o", "yaml"]);
    assert_eq!(code, 0, "{stderr}");
    let list: Value = serde_saphyr::from_str(&stdout).unwrap();
    assert_eq!(
        list["items"][0]["status"]["message"],
        format!("to {target}")
    );

    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

#[test]
fn the_local_clusters_keys_are_private() {
    let env = env();
    let dir = env.cluster.dir();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let mut secrets: Vec<PathBuf> = ["apiserver.key", "front-proxy-client.key"]
        .iter()
        .chain(&["kubelet-client.key", "sa.key", "serving.key", "tokens.csv"])
        .map(|f| dir.join("pki").join(f))
        .collect();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        if file.starts_with("kubeconfig-") && !file.starts_with("kubeconfig-direct") {
            secrets.push(path);
        }
    }
    let mut open = Vec::new();
    for path in &secrets {
        if mode(path) & 0o077 != 0 {
            open.push(format!("{} {:o}", path.display(), mode(path)));
        }
    }
    for d in [dir.to_path_buf(), dir.join("pki")] {
        if mode(&d) & 0o077 != 0 {
            open.push(format!("{} {:o}", d.display(), mode(&d)));
        }
    }
    println!(
        "key, token and kubeconfig files or their directories readable by others: {} of {}",
        open.len(),
        secrets.len() + 2
    );
    assert!(open.is_empty(), "readable by others: {open:#?}");
}

/// Sends `GET path` on a kept-alive HTTP/1.1 connection and reads the whole answer: its status.
fn get(stream: &mut openssl::ssl::SslStream<TcpStream>, path: &str) -> u16 {
    use std::io::Read;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\n\r\n"
    )
    .unwrap();
    stream.flush().unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let header_end = loop {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the connection closed");
        answer.extend_from_slice(&buf[..n]);
        if let Some(i) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&answer[..header_end]).to_lowercase();
    let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
    let complete = |body: &[u8]| match head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
    {
        Some(len) => body.len() >= len.trim().parse::<usize>().unwrap(),
        None => body.ends_with(b"0\r\n\r\n"),
    };
    while !complete(&answer[header_end..]) {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the connection closed mid-answer");
        answer.extend_from_slice(&buf[..n]);
    }
    status
}

#[test]
fn an_expired_client_certificate_stops_working_on_a_kept_alive_connection() {
    let env = env();
    // system:masters: allowed everything while the certificate holds.
    let expires = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(4);
    let cert = env
        .cluster
        .issue_client_cert("short-lived", &["system:masters"], expires)
        .unwrap();
    let mut builder =
        openssl::ssl::SslConnector::builder(openssl::ssl::SslMethod::tls_client()).unwrap();
    builder
        .cert_store_mut()
        .add_cert(openssl::x509::X509::from_pem(&env.cluster.serving.ca_pem).unwrap())
        .unwrap();
    builder
        .set_certificate(&openssl::x509::X509::from_pem(&cert.cert_pem).unwrap())
        .unwrap();
    builder
        .set_private_key(&openssl::pkey::PKey::private_key_from_pem(&cert.key_pem).unwrap())
        .unwrap();
    let tcp = TcpStream::connect(("127.0.0.1", env.port)).unwrap();
    let mut stream = builder.build().connect("localhost", tcp).unwrap();
    // Two requests on one connection, the certificate expiring in between.
    let path = format!("{LIVE}/inflightoperations");
    let before = get(&mut stream, &path);
    std::thread::sleep(Duration::from_secs(6));
    let after = get(&mut stream, &path);
    println!(
        "a certificate that expired on its kept-alive connection: {before} before, {after} after"
    );
    assert_eq!(before, 200);
    assert_eq!(
        after, 401,
        "an expired certificate still works on its connection"
    );
}
