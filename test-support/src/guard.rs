//! The maintenance guard through the real Eviction API: evictions as `kubectl drain` sends them,
//! pods bound to a test's own Node objects, a node held by an operation in flight, and
//! kube-apiserver's own count of what its webhooks let through.

use crate::{Env, eventually, node_vm_ruleset, vm};
use ifo_dev::User;
use openssl::ssl::{SslConnector, SslMethod, SslStream, SslVerifyMode};
use serde_json::json;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a held node's setting up may take.
const WAIT: Duration = Duration::from_secs(30);

/// What an eviction answered: kubectl's exit code and stderr.
pub struct Evicted {
    /// Whether the eviction went through.
    pub ok: bool,
    /// What kubectl printed of the answer.
    pub stderr: String,
}

/// `POST /api/v1/namespaces/<ns>/pods/<pod>/eviction` as `user`, as kubectl drain sends it
/// (with no grace: no kubelet would end the pod).
pub fn evict(env: &Env, user: User, ns: &str, pod: &str) -> Evicted {
    let eviction = json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": ns},
        "deleteOptions": {"gracePeriodSeconds": 0},
    });
    evict_with(env, user, ns, pod, &eviction)
}

/// The eviction of `pod` in `ns` as `user`, its body `eviction`.
pub fn evict_with(
    env: &Env,
    user: User,
    ns: &str,
    pod: &str,
    eviction: &serde_json::Value,
) -> Evicted {
    let file = env.cluster.dir().join(format!(
        "eviction-{ns}-{pod}-{:?}.json",
        std::thread::current().id()
    ));
    std::fs::write(&file, eviction.to_string()).unwrap();
    let out = env
        .cluster
        .kubectl(user)
        .args([
            "create",
            "--raw",
            &format!("/api/v1/namespaces/{ns}/pods/{pod}/eviction"),
            "-f",
            &file.display().to_string(),
        ])
        .output()
        .unwrap();
    Evicted {
        ok: out.status.success(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The HTTP status of a review POSTed to `url` as anyone on the network may (no client
/// certificate, no token), from `from` if given, the server's certificate verified against the
/// CA file `ca`; the body is curl's `--data-binary` argument (`@file`, or the text itself).
pub fn posted(ca: &std::path::Path, url: &str, body: &str, from: Option<Ipv4Addr>) -> String {
    let mut curl = std::process::Command::new("curl");
    curl.args([
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--max-time",
        "15",
    ]);
    if let Some(from) = from {
        curl.args(["--interface", &from.to_string()]);
    }
    let out = curl
        .arg("--cacert")
        .arg(ca)
        .args([
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            body,
            url,
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A pod bound to `node` (no kubelet runs it).
pub fn pod_on(env: &Env, ns: &str, name: &str, node: &str) {
    env.apply(
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
        })
        .to_string(),
    );
}

/// A namespace with a node of its own (its name padded to `node_len` characters when longer
/// than the usual) on which a VM migrates: the node's gate reads `Clear=False`, and a pod `app`
/// of the namespace is bound to it. Returns (namespace, node).
pub fn held_node(env: &'static Env, prefix: &str, node_len: usize) -> (String, String) {
    let ns = env.namespace(prefix);
    let mut node = format!("{prefix}-{}", ns.rsplit('-').next().unwrap_or("0"));
    if node_len > node.len() + 1 {
        node.push('-');
        node.push_str(&"n".repeat(node_len - node.len()));
    }
    // The node stays for the rest of the run (other tests' nodes do not see it).
    std::mem::forget(env.node(&node));
    let rs = format!("rs-{ns}");
    env.apply(&node_vm_ruleset(&rs, &ns, &format!("c-{ns}")));
    env.apply(&vm("busy", &ns));
    env.wait_watching(&rs);
    env.set_vm_status(
        &ns,
        "busy",
        json!({"nodeName": node, "printableStatus": "Migrating"}),
    );
    env.wait_gate(&format!("node.{node}"), "False", WAIT);
    pod_on(env, &ns, "app", &node);
    (ns, node)
}

/// Waits until the eviction of `ns`'s pod `app` is held because its node is not clear.
pub fn wait_held(env: &Env, ns: &str) {
    eventually(WAIT, "the guard to hold the pod", || {
        let e = evict(env, User::Admin, ns, "app");
        (!e.ok && e.stderr.contains("not clear")).then_some(())
    });
}

/// A series of kube-apiserver's own `/metrics` for the webhook `webhook`, summed over its
/// other labels (0 when it has none yet): `apiserver_admission_webhook_fail_open_count` counts
/// every eviction a door let through by failing (an error, a timeout, a refused connection).
pub fn apiserver_metric(env: &Env, metric: &str, webhook: &str) -> f64 {
    let text = env
        .kubectl(User::Admin, &["get", "--raw", "/metrics"])
        .unwrap();
    crate::attacks::metric_sum(&text, metric, &[&format!("name=\"{webhook}\"")])
}

/// A TCP connection to `port` on 127.0.0.1 from the loopback address `from` (another than
/// kube-apiserver's 127.0.0.1: it stands for a pod); `None` when it cannot be made.
pub fn tcp_from(from: Ipv4Addr, port: u16) -> Option<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    socket.bind(&SocketAddr::from((from, 0)).into()).ok()?;
    socket
        .connect_timeout(
            &SocketAddr::from((Ipv4Addr::LOCALHOST, port)).into(),
            Duration::from_secs(2),
        )
        .ok()?;
    let tcp = TcpStream::from(socket);
    tcp.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    Some(tcp)
}

/// The TLS client of the server's certificate (trusting the serving CA), without a client
/// certificate.
pub fn tls_client(env: &Env) -> SslConnector {
    let mut tls = SslConnector::builder(SslMethod::tls_client()).unwrap();
    tls.cert_store_mut()
        .add_cert(openssl::x509::X509::from_pem(&env.cluster.serving.ca_pem).unwrap())
        .unwrap();
    tls.build()
}

/// A TLS connection to `port` from `from` ([`tcp_from`]), its handshake done by `tls`
/// ([`tls_client`]); `None` when it cannot be made (refused, or closed in its handshake).
pub fn tls_from(tls: &SslConnector, from: Ipv4Addr, port: u16) -> Option<SslStream<TcpStream>> {
    tls.connect("localhost", tcp_from(from, port)?).ok()
}

/// Connections to the server's `port` from one address (or spread over several:
/// [`Attacker::spread_over`]), each opened with a request's first bytes (`head`: a request whose
/// body never comes, say, or one with a bearer token) and replaced by a new one every `renew`
/// (3 s), so that each stays busy, or in the pool it was given, for as long as the attack runs
/// ([`Attacker::run`]). An attacker does not check whose certificate the server presents: it
/// reaches the server in any setup, whatever CA signed it.
pub struct Attacker {
    /// Connection `i` comes from `from[i % from.len()]`.
    from: Vec<Ipv4Addr>,
    port: u16,
    /// `None`: plain TCP (the probes' listener).
    tls: Option<SslConnector>,
    head: Vec<u8>,
    connections: Vec<Option<(Box<dyn Write + Send>, Instant)>>,
    renew: Duration,
}

/// A TLS client that takes any certificate, offering `alpn` (wire format) if given.
fn unverifying(alpn: Option<&[u8]>) -> SslConnector {
    let mut tls = SslConnector::builder(SslMethod::tls_client()).unwrap();
    tls.set_verify(SslVerifyMode::NONE);
    if let Some(alpn) = alpn {
        tls.set_alpn_protos(alpn).unwrap();
    }
    tls.build()
}

impl Attacker {
    /// `connections` to `port` from `from`, each opened with `head`.
    pub fn new(from: Ipv4Addr, port: u16, connections: usize, head: &str) -> Attacker {
        Attacker {
            from: vec![from],
            port,
            tls: Some(unverifying(None)),
            head: head.as_bytes().to_vec(),
            connections: (0..connections).map(|_| None).collect(),
            renew: Duration::from_secs(3),
        }
    }

    /// `connections` to the plain-TCP `port` (the probes') from `from` that send nothing.
    pub fn silent(from: Ipv4Addr, port: u16, connections: usize) -> Attacker {
        Attacker {
            tls: None,
            ..Attacker::new(from, port, connections, "")
        }
    }

    /// The same connections, each replaced every `every` rather than every 3 s.
    pub fn renewed_every(mut self, every: Duration) -> Attacker {
        self.renew = every;
        self
    }

    /// The same connections, the `i`th from `addresses[i % addresses.len()]`.
    pub fn spread_over(mut self, addresses: Vec<Ipv4Addr>) -> Attacker {
        assert!(!addresses.is_empty());
        self.from = addresses;
        self
    }

    /// `connections` HTTP/2 connections to `port` from `from`, each opened with `streams`
    /// requests to `path` whose bodies, `length` bytes long, never come: the streams of one
    /// connection wait for turns as so many requests would.
    pub fn http2(
        from: Ipv4Addr,
        port: u16,
        connections: usize,
        streams: u32,
        path: &str,
        length: usize,
    ) -> Attacker {
        Attacker {
            from: vec![from],
            port,
            tls: Some(unverifying(Some(b"\x02h2"))),
            head: unfinished_http2_posts(path, length, streams),
            connections: (0..connections).map(|_| None).collect(),
            renew: Duration::from_secs(3),
        }
    }

    /// A request whose body, `length` bytes long, never comes but for its first few: what a
    /// door waits for until its deadline.
    pub fn unfinished_post(path: &str, length: usize) -> String {
        format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
             Content-Length: {length}\r\n\r\n{{\"apiVersion\":"
        )
    }

    fn connect(&self, i: usize) -> Option<Box<dyn Write + Send>> {
        let tcp = tcp_from(self.from[i % self.from.len()], self.port)?;
        let mut stream: Box<dyn Write + Send> = match &self.tls {
            None => Box::new(tcp),
            Some(tls) => Box::new(
                tls.configure()
                    .ok()?
                    .verify_hostname(false)
                    .connect("localhost", tcp)
                    .ok()?,
            ),
        };
        stream.write_all(&self.head).ok()?;
        Some(stream)
    }

    /// Opens what is missing and replaces what is due; returns how many it opened.
    fn sweep(&mut self) -> usize {
        let mut opened = 0;
        for i in 0..self.connections.len() {
            let due = self.connections[i]
                .as_ref()
                .is_none_or(|(_, at)| at.elapsed() >= self.renew);
            if due {
                // The old one closes first, giving its place back before the new one asks.
                self.connections[i] = None;
                self.connections[i] = self.connect(i).map(|s| (s, Instant::now()));
                opened += usize::from(self.connections[i].is_some());
            }
        }
        opened
    }

    /// Runs the attack on a thread of its own until `stop`; the thread returns how many
    /// connections it opened. With `IFO_ATTACKER_NICENESS` (19 in `tests/guard-bench.sh
    /// --under-attack`), the thread runs at that niceness: the attackers' own work (their half of
    /// each TLS handshake) then takes from the server and kube-apiserver only the CPU they leave,
    /// as it would on the other nodes it runs on in a cluster, while what the server does for the
    /// attack is unchanged.
    pub fn run(mut self, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<usize> {
        std::thread::spawn(move || {
            if let Some(niceness) = env_number("IFO_ATTACKER_NICENESS") {
                // On Linux a thread's niceness is its own: the tests' other threads keep theirs.
                rustix::process::setpriority_process(Some(rustix::thread::gettid()), niceness)
                    .expect("IFO_ATTACKER_NICENESS: setting the attack thread's niceness");
            }
            let mut opened = 0;
            while !stop.load(Ordering::SeqCst) {
                opened += self.sweep();
                std::thread::sleep(Duration::from_millis(100));
            }
            opened
        })
    }
}

/// An HTTP/2 connection's first bytes (the preface, empty settings) and `streams` requests, each
/// a `POST` of `path` announcing a body of `length` bytes that never comes: HEADERS frames whose
/// header block is literal HPACK (static-table names, no Huffman), none ending its stream.
fn unfinished_http2_posts(path: &str, length: usize, streams: u32) -> Vec<u8> {
    fn literal(out: &mut Vec<u8>, index: u8, value: &str) {
        // Literal header field without indexing, name from the static table (4-bit prefix).
        if index < 15 {
            out.push(index);
        } else {
            out.extend([15, index - 15]);
        }
        assert!(value.len() < 127, "a short value: {value}");
        out.push(value.len() as u8);
        out.extend(value.as_bytes());
    }
    let mut block = vec![0x83, 0x87]; // :method POST, :scheme https
    literal(&mut block, 4, path); // :path
    literal(&mut block, 1, "localhost"); // :authority
    literal(&mut block, 31, "application/json"); // content-type
    literal(&mut block, 28, &length.to_string()); // content-length
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend([0, 0, 0, 0x4, 0, 0, 0, 0, 0]); // SETTINGS, empty
    for n in 0..streams {
        let id = 2 * n + 1;
        let len = block.len() as u32;
        out.extend(&len.to_be_bytes()[1..]);
        out.extend([0x1, 0x4]); // HEADERS, END_HEADERS (not END_STREAM)
        out.extend(id.to_be_bytes());
        out.extend(&block);
    }
    out
}

/// The number in the environment variable `name`, if set (a panic naming it if it is not a
/// number).
fn env_number<T: std::str::FromStr>(name: &str) -> Option<T> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value}: not a number")),
    )
}

/// The HTTP status of `path` on the server's probes' port (`HEALTH_PORT`) as the kubelet probes
/// it (plain HTTP, a connection of its own, within the 2 s `deploy/`'s probes give), or what curl
/// said of why there is none.
pub fn probed(health_port: u16, path: &str) -> String {
    let out = std::process::Command::new("curl")
        .args([
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "2",
        ])
        .arg(format!("http://127.0.0.1:{health_port}{path}"))
        .output()
        .unwrap();
    let code = String::from_utf8_lossy(&out.stdout).into_owned();
    if code == "000" {
        return format!("000: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    code
}

/// What kube-apiserver saw of the evictions sent while an attack ran ([`evictions_under`]).
pub struct UnderAttack {
    /// Evictions sent.
    pub sent: usize,
    /// Of those, refused by the guard (429).
    pub refused: usize,
    /// Evictions the `doors` let through by failing, by kube-apiserver's count.
    pub failed_open: f64,
    /// Connections the attackers opened.
    pub opened: usize,
}

/// Six evictions (`IFO_ATTACK_EVICTIONS` if set: more for a p99 that tells something) of `ns`'s
/// pod `app` (held) through kube-apiserver, each with `eviction` (the plain one if `None`), while
/// `attackers` run, the first after 3 s for the attack to take hold. Each must not go through,
/// and the server whose probes listen on `health_port` must answer `/livez` after each
/// ([`probed`]). `doors` are the guard's webhooks, as kube-apiserver names them in its metrics.
/// Prints what it measured.
pub fn evictions_under(
    env: &Env,
    ns: &str,
    doors: &[&str],
    health_port: u16,
    attackers: Vec<Attacker>,
    eviction: Option<&serde_json::Value>,
) -> UnderAttack {
    let failed_open = || -> f64 {
        doors
            .iter()
            .map(|door| apiserver_metric(env, "apiserver_admission_webhook_fail_open_count", door))
            .sum()
    };
    let before = failed_open();
    let stop = Arc::new(AtomicBool::new(false));
    let attacks: Vec<_> = attackers.into_iter().map(|a| a.run(stop.clone())).collect();
    std::thread::sleep(Duration::from_secs(3));
    let sent = env_number("IFO_ATTACK_EVICTIONS").unwrap_or(6);
    let mut refused = 0;
    for _ in 0..sent {
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
        assert_eq!(probed(health_port, "/livez"), "200", "/livez");
    }
    stop.store(true, Ordering::SeqCst);
    let opened = attacks.into_iter().map(|t| t.join().unwrap()).sum();
    let failed_open = failed_open() - before;
    println!(
        "refused by the guard: {refused} of {sent}; failed open: {failed_open}; attack \
         connections opened: {opened}"
    );
    UnderAttack {
        sent,
        refused,
        failed_open,
        opened,
    }
}
