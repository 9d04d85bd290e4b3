//! What open watches cost the server, measured as its resident memory grows while a viewer
//! opens hundreds of them with the largest selectors the limits allow, and with larger ones: on
//! a cluster of its own, whose server nothing else makes grow meanwhile (on a shared one, other
//! tests' objects would be counted as the watches'). Each test prints the figure it measures.

use ifo_dev::User;
use ifo_test_support::{Env, rss_kib};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIVE: &str = "/apis/live.ifo.kubevirt.io/v1alpha1";

/// The cluster, its server given a per-user budget of watch memory this test can reach with
/// 300 watches, and the number of watches a user may hold at its default (the test
/// environment's is lower), so that the budget is what refuses them.
fn env() -> &'static Env {
    Env::builder()
        .settings(&[
            ("MAX_WATCH_MEMORY_PER_USER", "8Mi"),
            ("MAX_WATCHES_PER_USER", "1000"),
        ])
        .start()
}

/// `count` watches of `ns` by alice, each with the label selector `selector(i)`, multiplexed
/// over one HTTP/2 connection; each ends after `seconds`. Returns the curl process (stdout:
/// a `CODE <status>` line per watch, after its body).
fn watches(
    env: &Env,
    port: u16,
    ns: &str,
    count: usize,
    seconds: u32,
    selector: impl Fn(usize) -> String,
) -> std::process::Child {
    let config = env.cluster.dir().join(format!("watches-{ns}.curl"));
    let mut text = String::new();
    for i in 0..count {
        let url = format!(
            "https://127.0.0.1:{port}{LIVE}/namespaces/{ns}/inflightoperations?watch=true&labelSelector={}",
            selector(i).replace(' ', "%20")
        );
        let _ = writeln!(text, "url = \"{url}\"");
    }
    std::fs::write(&config, text).unwrap();
    Command::new("curl")
        .args(["-s", "--http2", "--parallel", "--parallel-max", "300"])
        .args(["--max-time", &seconds.to_string()])
        .args(["-w", "\nCODE %{http_code}\n", "--cacert"])
        .arg(env.cluster.dir().join("pki/serving-ca.crt"))
        .args(env.client_cert_args(User::Alice))
        .arg("-K")
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// `k notin (...)` with values of 10 characters, `bytes` long at least, unique to `i`.
fn notin(i: usize, bytes: usize) -> String {
    let mut s = String::from("example.com/k notin (");
    let mut j = 0;
    while s.len() < bytes {
        if j > 0 {
            s.push(',');
        }
        let _ = write!(s, "v{i:04}{j:05}");
        j += 1;
    }
    s.push(')');
    s
}

/// Opens 300 watches with `selector`, and returns the server's RSS growth while they are open,
/// how many were answered with each status, and what they printed.
fn rss_growth(
    env: &Env,
    ns: &str,
    selector: impl Fn(usize) -> String,
) -> (u64, BTreeMap<String, usize>, String) {
    let rss = || rss_kib(env.server_pid()) * 1024;
    let before = rss();
    let mut curl = watches(env, env.port, ns, 300, 25, selector);
    let mut peak = before;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_secs(1));
        peak = peak.max(rss());
    }
    let mut out = String::new();
    std::io::Read::read_to_string(curl.stdout.as_mut().unwrap(), &mut out).unwrap();
    curl.wait().unwrap();
    let mut codes = BTreeMap::new();
    for code in out.lines().filter_map(|l| l.strip_prefix("CODE ")) {
        *codes.entry(code.to_string()).or_insert(0) += 1;
    }
    (peak.saturating_sub(before), codes, out)
}

#[test]
fn big_selectors_cannot_grow_the_server_without_bound() {
    let env = env();
    let port = env.port;
    let ns = env.namespace("big-selectors");
    env.grant_alice_view(&ns);

    // 300 watches with selectors as big as the limits allow (250 values of 60 characters),
    // then 300 with ~55 KB selectors (what one viewer may try).
    let (largest, largest_codes, printed) = rss_growth(env, &ns, |i| {
        let values: Vec<String> = (0..250)
            .map(|j| format!("v{i:04}{j:03}{}", "x".repeat(52)))
            .collect();
        format!("example.com/k notin ({})", values.join(","))
    });
    println!(
        "300 watches with 15 KB selectors: RSS +{} MiB, answers {largest_codes:?}",
        largest >> 20
    );
    let (huge, huge_codes, _) = rss_growth(env, &ns, |i| notin(i, 55_000));
    println!(
        "300 watches with 55 KB selectors: RSS +{} MiB, answers {huge_codes:?}",
        huge >> 20
    );

    // A selector past the limits is refused with a message naming the limit.
    let cert = env.client_cert_args(User::Alice);
    let cert: Vec<&str> = cert.iter().map(String::as_str).collect();
    let path = format!(
        "{LIVE}/namespaces/{ns}/inflightoperations?labelSelector={}",
        notin(0, 55_000).replace(' ', "%20")
    );
    let (code, body) = env.direct_to(port, &path, &cert);
    assert_eq!(code, "400", "{body}");
    let status: Value = serde_json::from_str(&body).unwrap();
    let message = status["message"].as_str().unwrap();
    assert!(message.contains("the limit is 32768 bytes"), "{message}");
    assert_eq!(huge_codes.get("400"), Some(&300), "{huge_codes:?}");
    assert!(huge < 32 << 20, "RSS grew by {} MiB", huge >> 20);

    // The largest selectors allowed: alice's watches are charged what they hold, she gets 429
    // past her budget, and the server grows by about that budget at most.
    assert!(
        largest_codes.get("429").is_some_and(|n| *n > 0),
        "{largest_codes:?}"
    );
    assert!(
        printed.contains("past the limit per user of 8.0 MiB (MAX_WATCH_MEMORY_PER_USER)"),
        "the 429 Status says why"
    );
    assert!(
        largest_codes.get("200").is_some_and(|n| *n > 0),
        "{largest_codes:?}"
    );
    assert!(largest < 40 << 20, "RSS grew by {} MiB", largest >> 20);
    let (code, body) = env.direct_to(
        port,
        &format!("{LIVE}/namespaces/{ns}/inflightoperations?watch=true&timeoutSeconds=1"),
        &cert,
    );
    assert_eq!(code, "200", "a plain watch once the others ended: {body}");
}
