//! `kubectl ifo ui` in a real browser: headless Chromium (Debian's `chromium` and
//! `chromium-driver`, driven over WebDriver) opens the page against the test cluster and sees
//! what a person would: operations appear as their subjects change, end in their outcome's
//! colour, the namespace's gate flips, the staleness warning shows when a target is not watched,
//! and a namespace viewer sees their namespace only.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder};
use ifo_dev::User;
use serde_json::{Value, json};

use crate::staleness::{create_crd, grant_read};
use ifo_test_support::{Env, env, plugin_binary};

/// What the issue promises: the page shows a change within 2 s of the subject changing.
const LIVE: Duration = Duration::from_secs(2);
/// Operations end after the server's debounce grace (3 s in the tests).
const END: Duration = Duration::from_secs(20);
/// A failed watch is retried with a fresh list after a backoff (at once on a CRD change).
const RECOVER: Duration = Duration::from_secs(90);

/// The bar colours of the style sheet (`--succeeded`, `--failed`), as the browser computes them.
const SUCCEEDED_FILL: &str = "rgb(27, 127, 59)";
const FAILED_FILL: &str = "rgb(179, 38, 30)";

/// A child process killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// chromedriver on a free port (Debian's `chromium-driver`, or `IFO_CHROMEDRIVER`).
fn chromedriver() -> (Running, u16) {
    let binary = std::env::var("IFO_CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".into());
    let port = ifo_dev::free_port().unwrap();
    let child = Command::new(&binary)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {binary} ({e}): the browser test needs Chromium and its WebDriver \
                 (bash tests/run.sh installs them; Debian: apt-get install chromium chromium-driver)"
            )
        });
    let running = Running(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "chromedriver did not listen");
        std::thread::sleep(Duration::from_millis(100));
    }
    (running, port)
}

/// `kubectl ifo ui` as `user` with `args`; its process and the URL it printed.
fn start_ui(env: &Env, user: User, args: &[&str]) -> (Running, String) {
    let mut child = Command::new(plugin_binary())
        .arg("ui")
        .arg("--kubeconfig")
        .arg(env.cluster.kubeconfig(user))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:") && w.contains("/?token="))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    (Running(child), url)
}

async fn browser(port: u16) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert("browserName".into(), json!("chrome"));
    let mut options = json!({"args": [
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--window-size=1280,800", "--lang=en-US"
    ]});
    if let Ok(chromium) = std::env::var("IFO_CHROMIUM") {
        options["binary"] = json!(chromium);
    }
    caps.insert("goog:chromeOptions".into(), options);
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("a headless Chromium session")
}

/// Runs `script` (with `args`) in the page until `pred` holds of its result; the result and how
/// long it took. Panics with the last result after `timeout`.
async fn until(
    page: &Client,
    timeout: Duration,
    what: &str,
    script: &str,
    args: Vec<Value>,
    pred: impl Fn(&Value) -> bool,
) -> (Value, Duration) {
    let start = Instant::now();
    loop {
        let value = page.execute(script, args.clone()).await.unwrap();
        if pred(&value) {
            return (value, start.elapsed());
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}; last: {value}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The bars whose description mentions `needle`: `[state, fill colour]` each.
const BARS: &str = "return [...document.querySelectorAll('g.op')]
  .filter(g => g.getAttribute('aria-label').includes(arguments[0]))
  .map(g => [g.dataset.state, getComputedStyle(g.querySelector('rect.bar')).fill]);";
/// A gate's verdict class (`clear`, `blocked`, `unknown`), or null when it is not shown.
const GATE: &str = "const li = document.querySelector(`li.gate[data-gate=\"${arguments[0]}\"]`);
  return li ? li.dataset.verdict : null;";
/// The warning banner's text, empty while hidden.
const WARNINGS: &str =
    "const w = document.getElementById('warnings'); return w.hidden ? '' : w.innerText;";
/// The connection indicator's state.
const CONNECTION: &str = "return document.getElementById('connection').dataset.state;";
/// The namespaces of every operation drawn.
const NAMESPACES: &str = "return [...new Set([...document.querySelectorAll('g.op')]
  .map(g => g.dataset.name.split('/')[0]))];";

fn state_is(state: &'static str) -> impl Fn(&Value) -> bool {
    move |v| {
        v.as_array()
            .is_some_and(|bars| bars.iter().any(|b| b[0] == state))
    }
}

fn fill_of(bars: &Value, state: &str) -> String {
    bars.as_array()
        .and_then(|b| b.iter().find(|b| b[0] == state))
        .and_then(|b| b[1].as_str())
        .unwrap_or_default()
        .to_string()
}

fn patch_status(env: &Env, ns: &str, vm: &str, status: Value) {
    env.set_status("vm", ns, vm, status);
}

#[test]
fn the_live_view_in_a_browser() {
    let env = env();
    let (ns, rs) = env.vms_with_ruleset("ui", &["vm1", "vm2"]);
    // A target that stops being watched, in a namespace of its own.
    let stale_ns = env.namespace("ui-stale");
    let group = format!("{stale_ns}.ui.example.com");
    let stale_rs = format!("gadgets-{stale_ns}");
    create_crd(env, &group);
    grant_read(env, &stale_ns, &group);
    env.apply(&format!(
        r#"{{"apiVersion":"ifo.kubevirt.io/v1alpha1","kind":"OperationRuleSet","metadata":{{"name":"{stale_rs}"}},
"spec":{{"component":"gadgets","target":{{"group":"{group}","version":"v1","resource":"gadgets"}},"namespaces":["{stale_ns}"],
 "rules":[{{"operation":"Busy","expression":"object.?status.?busy.orValue(false)"}}]}}}}"#
    ));
    env.wait_watching(&stale_rs);
    env.apply(&format!(
        r#"{{"apiVersion":"{group}/v1","kind":"Gadget","metadata":{{"name":"g1","namespace":"{stale_ns}"}},"status":{{"busy":true}}}}"#
    ));
    env.grant_alice_view(&ns);

    let (_driver, driver_port) = chromedriver();
    let (_admin_ui, admin_url) = start_ui(env, User::Admin, &["-A"]);
    let (_alice_ui, alice_url) = start_ui(env, User::Alice, &["-n", &ns]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let page = browser(driver_port).await;
        page.goto(&admin_url).await.unwrap();
        until(&page, LIVE * 5, "the page to connect", CONNECTION, vec![], |v| {
            v == "live"
        })
        .await;

        // Operations appear within 2 s of their subjects changing (`until` starts its clock once
        // the patch is applied).
        let vm1 = format!("Migrating on VirtualMachine {ns}/vm1");
        let vm2 = format!("Migrating on VirtualMachine {ns}/vm2");
        patch_status(
            env,
            &ns,
            "vm1",
            json!({"printableStatus": "Migrating", "migrationTarget": "node-2"}),
        );
        until(&page, LIVE, "vm1's migration", BARS, vec![json!(vm1)], state_is("active")).await;
        patch_status(env, &ns, "vm2", json!({"printableStatus": "Migrating"}));
        until(&page, LIVE, "vm2's migration", BARS, vec![json!(vm2)], state_is("active")).await;
        let gate = format!("namespace.{ns}");
        until(&page, LIVE, "the namespace's gate in flight", GATE, vec![json!(gate)], |v| {
            v == "blocked"
        })
        .await;

        // They end in their outcome's colour, and the gate flips to clear.
        patch_status(env, &ns, "vm1", json!({"printableStatus": "Running"}));
        patch_status(
            env,
            &ns,
            "vm2",
            json!({"printableStatus": "Running", "lastMigration": "Failed"}),
        );
        let (bars, _) = until(&page, END, "vm1 to succeed", BARS, vec![json!(vm1)], state_is("succeeded")).await;
        assert_eq!(fill_of(&bars, "succeeded"), SUCCEEDED_FILL);
        let (bars, _) = until(&page, END, "vm2 to fail", BARS, vec![json!(vm2)], state_is("failed")).await;
        assert_eq!(fill_of(&bars, "failed"), FAILED_FILL);
        until(&page, LIVE, "the namespace's gate clear", GATE, vec![json!(gate)], |v| v == "clear").await;

        // The detail panel, from the keyboard: everything about one operation.
        page.execute(
            "[...document.querySelectorAll('g.op')].find(g => g.getAttribute('aria-label').includes(arguments[0])).focus();",
            vec![json!(vm1)],
        )
        .await
        .unwrap();
        page.active_element()
            .await
            .unwrap()
            .send_keys(&fantoccini::key::Key::Enter)
            .await
            .unwrap();
        let (detail, _) = until(
            &page,
            LIVE,
            "the detail panel",
            "const d = document.getElementById('detail'); return d.hidden ? '' : d.innerText;",
            vec![],
            |v| v.as_str().is_some_and(|t| !t.is_empty()),
        )
        .await;
        let detail = detail.as_str().unwrap();
        for expected in ["Succeeded", "kubevirt", &format!("VirtualMachine {ns}/vm1"), "to node-2"] {
            assert!(detail.contains(expected), "{expected} missing in {detail}");
        }
        page.execute("document.getElementById('detail-close').click();", vec![])
            .await
            .unwrap();

        // The screenshot of the README: a busy page, with the staleness warning to come.
        patch_status(env, &ns, "vm1", json!({"printableStatus": "Migrating", "migrationTarget": "node-3"}));
        patch_status(env, &ns, "vm2", json!({"printableStatus": "Starting"}));
        until(&page, LIVE, "vm1 migrating again", BARS, vec![json!(vm1)], state_is("active")).await;

        // A target that is not watched any more: the warning shows, prominently.
        env.kubectl(User::Admin, &["delete", "crd", &format!("gadgets.{group}"), "--wait=true"])
            .unwrap();
        let warning = format!("gadgets.{group}/v1 is not being watched");
        until(&page, RECOVER, "the staleness warning", WARNINGS, vec![], |v| {
            v.as_str().is_some_and(|t| t.contains(&warning))
        })
        .await;
        let png = page.screenshot().await.unwrap();
        let shot = std::env::var("IFO_UI_SCREENSHOT")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|_| env.cluster.dir().join("ui.png"));
        std::fs::write(&shot, png).unwrap();
        eprintln!("screenshot of the live view: {}", shot.display());

        // A namespace viewer sees their namespace only, and is told they may not read gates.
        page.goto(&alice_url).await.unwrap();
        until(&page, LIVE * 5, "alice's page to connect", CONNECTION, vec![], |v| v == "live").await;
        until(&page, LIVE, "vm1 on alice's page", BARS, vec![json!(vm1)], state_is("active")).await;
        let (namespaces, _) = until(&page, LIVE, "alice's operations", NAMESPACES, vec![], |v| {
            v.as_array().is_some_and(|a| !a.is_empty())
        })
        .await;
        assert_eq!(namespaces, json!([ns]), "alice sees other namespaces");
        let note = page
            .execute("const n = document.getElementById('gates-note'); return n.hidden ? '' : n.innerText;", vec![])
            .await
            .unwrap();
        assert!(note.as_str().unwrap().contains("You may not read maintenance gates"), "{note}");
        page.close().await.unwrap();
    });

    env.kubectl(User::Admin, &["delete", "ors", &rs, &stale_rs])
        .unwrap();
}

#[test]
fn the_ui_server_forwards_reads_of_the_live_api_only() {
    let env = env();
    let ns = env.namespace("ui-guard");
    env.grant_alice_view(&ns);
    let (_ui, url) = start_ui(env, User::Alice, &["-n", &ns]);
    let base = url.split("/?token=").next().unwrap().to_string();
    let token = url.split("/?token=").nth(1).unwrap().to_string();
    let port = base.rsplit(':').next().unwrap().to_string();
    let curl = |path: &str, extra: &[&str]| -> (String, String) {
        let out = Command::new("curl")
            .args(["-s", "--max-time", "10", "-w", "\n%{http_code}"])
            .args(extra)
            .arg(format!("{base}{path}"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", ""));
        (code.to_string(), body.to_string())
    };
    let cookie = format!("ifo-ui-{port}={token}");
    let with_cookie = ["-b", cookie.as_str()];
    let ops = format!("/k8s/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{ns}/inflightoperations");
    // Without the token: nothing, not even the page.
    assert_eq!(curl("/", &[]).0, "401");
    assert_eq!(curl(&ops, &[]).0, "401");
    // The token in the URL is exchanged for the cookie.
    let (code, _) = curl(&format!("/?token={token}"), &[]);
    assert_eq!(code, "303");
    // With it: the user's reads, as the user (RBAC applies).
    let (code, body) = curl(&ops, &with_cookie);
    assert_eq!(code, "200", "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["kind"],
        "InFlightOperationList"
    );
    let other = "/k8s/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/kube-system/inflightoperations";
    assert_eq!(curl(other, &with_cookie).0, "403");
    // Nothing but the live API, and no writes.
    assert_eq!(
        curl(
            &format!("/k8s/api/v1/namespaces/{ns}/secrets"),
            &with_cookie
        )
        .0,
        "403"
    );
    assert_eq!(
        curl(&ops, &["-b", cookie.as_str(), "-X", "DELETE"]).0,
        "405"
    );
    // A page of another site (or a DNS-rebound name) cannot use it.
    assert_eq!(
        curl(
            &ops,
            &[
                "-b",
                cookie.as_str(),
                "-H",
                &format!("Host: rebound.example:{port}")
            ]
        )
        .0,
        "421"
    );
    assert_eq!(
        curl(
            &ops,
            &["-b", cookie.as_str(), "-H", "Origin: http://evil.example"]
        )
        .0,
        "403"
    );
}
