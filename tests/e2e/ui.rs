//! `kubectl ifo ui` in a real browser: headless Chromium (Debian's `chromium` and
//! `chromium-driver`, driven over WebDriver) opens the page against the test cluster and sees
//! what a person would: operations appear as their subjects change, end in their outcome's
//! colour, the namespace's gate flips, the staleness warning shows when a target is not watched,
//! and a namespace viewer sees their namespace only. A gate that left the list (nothing in
//! flight) is still followed: it turns from Clear to Unknown on the page as on the server. The
//! access token stays with the page: another service on 127.0.0.1 the same browser visits gets
//! no cookie and no token, and the API refuses a request without the token's header.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
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
/// The longest a gate's verdict on the page may lag the server's.
const FEW: Duration = Duration::from_secs(5);
/// The request header the page sends the token in.
const TOKEN_HEADER: &str = "X-IFO-UI-Token";

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
        .find(|w| w.starts_with("http://127.0.0.1:") && w.contains("/#token="))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    (Running(child), url)
}

/// The URL's parts: `http://127.0.0.1:PORT` and the token in its fragment.
fn split_url(url: &str) -> (String, String) {
    let (base, token) = url.split_once("/#token=").expect("a URL with the token");
    (base.to_string(), token.to_string())
}

/// A tiny HTTP server on another 127.0.0.1 port, standing for any other local service: it
/// answers every request with a page and keeps each request's head (request line and headers).
struct Bystander {
    port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Bystander {
    fn start() -> Bystander {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let kept = heads.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 64 * 1024 {
                    match stream.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => break,
                    }
                }
                if head.is_empty() {
                    continue;
                }
                kept.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&head).into_owned());
                let body = "<!doctype html><title>another local service</title><p>hello</p>";
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Bystander { port, heads }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
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
    let (base, token) = split_url(&url);
    let port = base.rsplit(':').next().unwrap().to_string();
    // The status code, the body and the response headers (lower-cased).
    let curl = |path: &str, extra: &[&str]| -> (String, String, String) {
        let out = Command::new("curl")
            .args(["-s", "-D", "-", "--max-time", "10", "-w", "\n%{http_code}"])
            .args(extra)
            .arg(format!("{base}{path}"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (response, code) = text.rsplit_once('\n').unwrap_or(("", ""));
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((response, ""));
        (
            code.to_string(),
            body.to_string(),
            head.to_ascii_lowercase(),
        )
    };
    let header = format!("{TOKEN_HEADER}: {token}");
    let with_token = ["-H", header.as_str()];
    let ops = format!("/k8s/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{ns}/inflightoperations");
    // The page itself needs no token (it holds nothing of the cluster's); no answer sets a
    // cookie.
    let (code, body, head) = curl("/", &[]);
    assert_eq!(code, "200");
    assert!(body.contains("<script src=\"/app.js\">"), "{body}");
    assert!(!head.contains("set-cookie"), "{head}");
    assert_eq!(curl("/app.js", &[]).0, "200");
    // Without the token's header: no data, whatever else the request carries.
    assert_eq!(curl(&ops, &[]).0, "401");
    assert_eq!(curl("/config.json", &[]).0, "401");
    let cookie = format!("ifo-ui-{port}={token}");
    assert_eq!(curl(&ops, &["-b", cookie.as_str()]).0, "401");
    assert_eq!(curl(&format!("{ops}?token={token}"), &[]).0, "401");
    let (code, _, head) = curl(&format!("/?token={token}"), &[]);
    assert_eq!(code, "200");
    assert!(!head.contains("set-cookie"), "{head}");
    let wrong = format!("{TOKEN_HEADER}: {}", "0".repeat(token.len()));
    assert_eq!(curl(&ops, &["-H", wrong.as_str()]).0, "401");
    // With it: the user's reads, as the user (RBAC applies).
    let (code, body, head) = curl(&ops, &with_token);
    assert_eq!(code, "200", "{body}");
    assert!(!head.contains("set-cookie"), "{head}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["kind"],
        "InFlightOperationList"
    );
    let (code, body, _) = curl("/config.json", &with_token);
    assert_eq!(code, "200", "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["namespace"],
        ns
    );
    let other = "/k8s/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/kube-system/inflightoperations";
    assert_eq!(curl(other, &with_token).0, "403");
    // Nothing but the live API, and no writes.
    assert_eq!(
        curl(&format!("/k8s/api/v1/namespaces/{ns}/secrets"), &with_token).0,
        "403"
    );
    assert_eq!(
        curl(&ops, &["-H", header.as_str(), "-X", "DELETE"]).0,
        "405"
    );
    // A page of another site (or a DNS-rebound name) cannot use it, nor get a CORS preflight
    // for the header through.
    let rebound = format!("Host: rebound.example:{port}");
    assert_eq!(
        curl(&ops, &["-H", header.as_str(), "-H", rebound.as_str()]).0,
        "421"
    );
    assert_eq!(
        curl(
            &ops,
            &["-H", header.as_str(), "-H", "Origin: http://evil.example"]
        )
        .0,
        "403"
    );
    let (code, _, head) = curl(
        &ops,
        &[
            "-X",
            "OPTIONS",
            "-H",
            "Origin: http://127.0.0.1:1",
            "-H",
            "Access-Control-Request-Method: GET",
            "-H",
            "Access-Control-Request-Headers: x-ifo-ui-token",
        ],
    );
    assert_eq!(code, "403");
    assert!(!head.contains("access-control-"), "{head}");
}

/// The token stays with the page that opened it: another service on 127.0.0.1 (another port)
/// the same browser visits next gets no cookie and no token in any header or URL. Cookies are
/// not told apart by port: the cookie the token used to be exchanged for went everywhere.
#[test]
fn the_token_never_leaves_the_page() {
    let env = env();
    let ns = env.namespace("ui-token");
    let (_driver, driver_port) = chromedriver();
    let (_ui, url) = start_ui(env, User::Admin, &["-n", &ns]);
    let (base, token) = split_url(&url);
    let bystander = Bystander::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cookies = runtime.block_on(async {
        let page = browser(driver_port).await;
        page.goto(&url).await.unwrap();
        until(
            &page,
            LIVE * 5,
            "the page to connect",
            CONNECTION,
            vec![],
            |v| v == "live",
        )
        .await;
        // The token is gone from the address bar.
        let shown = page.current_url().await.unwrap().to_string();
        assert_eq!(shown, format!("{base}/"), "the address bar keeps the token");
        // A reload keeps working (sessionStorage, this origin's only).
        page.refresh().await.unwrap();
        until(
            &page,
            LIVE * 5,
            "the reloaded page to connect",
            CONNECTION,
            vec![],
            |v| v == "live",
        )
        .await;

        // The same browser visits another local service, by both of its names (127.0.0.1
        // last: the UI's).
        for host in ["localhost", "127.0.0.1"] {
            let other = format!("http://{host}:{}/some/page", bystander.port);
            page.goto(&other).await.unwrap();
            until(
                &page,
                LIVE * 5,
                "the other service's page",
                "return document.title;",
                vec![],
                |v| v == "another local service",
            )
            .await;
        }
        // The browser holds no cookie for 127.0.0.1, which every port there would be sent.
        let cookies: Vec<String> = page
            .get_all_cookies()
            .await
            .unwrap()
            .iter()
            .map(|c| c.to_string())
            .collect();
        page.close().await.unwrap();
        cookies
    });
    let heads = bystander.heads();
    assert!(heads.len() >= 2, "the other service saw {heads:?}");
    for head in &heads {
        assert!(
            !head.contains(&token),
            "the other service received the token: {head}"
        );
        assert!(
            !head.to_ascii_lowercase().contains("\r\ncookie:"),
            "the other service received a cookie: {head}"
        );
        assert!(
            !head.to_ascii_lowercase().contains("x-ifo-ui-token"),
            "the other service received the token's header: {head}"
        );
    }
    assert!(cookies.is_empty(), "cookies for 127.0.0.1: {cookies:?}");
}

/// The status of the Clear condition of the gate in a watch event.
fn clear_status(event: &Value) -> Option<&str> {
    event["object"]["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Clear")?["status"]
        .as_str()
}

/// A gate that left the list (nothing in flight in its scope) can still change: here a tenant of
/// the namespace (she edits gadgets there, nothing else) creates a gadget over the ruleset's
/// evaluation budget after the page showed the gate Clear, so the server cannot vouch for the
/// namespace any more and the gate turns Unknown with nothing in flight. The page shows it
/// within a few seconds of the server, never a stale Clear.
#[test]
fn a_gate_shown_clear_follows_the_server() {
    let env = env();
    let ns = env.namespace("ui-gate");
    let group = format!("{ns}.ui.example.com");
    let rs = format!("gadgets-{ns}");
    create_crd(env, &group);
    grant_read(env, &ns, &group);
    env.apply(&format!(
        r#"{{"apiVersion":"ifo.kubevirt.io/v1alpha1","kind":"OperationRuleSet","metadata":{{"name":"{rs}"}},
"spec":{{"component":"gadgets","target":{{"group":"{group}","version":"v1","resource":"gadgets"}},"namespaces":["{ns}"],
 "rules":[{{"operation":"Busy","expression":"object.?status.?busy.orValue(false)"}},
          {{"operation":"Heavy","expression":"{heavy}"}}]}}}}"#,
        // As `HEAVY`, for gadgets, which may have no spec.
        heavy = "lists.range(object.?spec.?n.orValue(0)).exists(i, \
                 object.metadata.annotations['example.com/big'].contains(string(i)))"
    ));
    env.wait_watching(&rs);
    let tenant = format!("tenant-{ns}");
    let verbs = "--verb=get,list,watch,create,update,patch,delete";
    let resource = format!("--resource=gadgets.{group}");
    env.kubectl(
        User::Admin,
        &[
            "create",
            "role",
            "gadget-editor",
            verbs,
            &resource,
            "-n",
            &ns,
        ],
    )
    .unwrap();
    let user = format!("--user={tenant}");
    env.kubectl(
        User::Admin,
        &[
            "create",
            "rolebinding",
            "gadget-editor",
            "--role=gadget-editor",
            &user,
            "-n",
            &ns,
        ],
    )
    .unwrap();
    let gadget = |busy: bool| {
        env.apply(&format!(
            r#"{{"apiVersion":"{group}/v1","kind":"Gadget","metadata":{{"name":"g1","namespace":"{ns}"}},"status":{{"busy":{busy}}}}}"#
        ))
    };
    let gate = format!("namespace.{ns}");
    let (_driver, driver_port) = chromedriver();
    let (_ui, url) = start_ui(env, User::Admin, &["-n", &ns]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let page = browser(driver_port).await;
        page.goto(&url).await.unwrap();
        until(&page, LIVE * 5, "the page to connect", CONNECTION, vec![], |v| {
            v == "live"
        })
        .await;
        // In flight, then clear: the gate leaves the list, and the page shows it Clear.
        gadget(true);
        until(&page, END, "the gate in flight", GATE, vec![json!(gate)], |v| v == "blocked").await;
        gadget(false);
        until(&page, END, "the gate clear", GATE, vec![json!(gate)], |v| v == "clear").await;

        // The server's gate, as a client watching it by name sees it.
        let server = env.watch(&format!(
            "/apis/live.ifo.kubevirt.io/v1alpha1/maintenancegates?watch=1&fieldSelector=metadata.name%3D{gate}"
        ));
        server.until(END, "the gate clear on the server", |e| clear_status(e) == Some("True"));
        let over_budget = json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget",
            "metadata": {"name": "g2", "namespace": ns,
                         "annotations": {"example.com/big": "x".repeat(64 * 1024)}},
            "spec": {"n": 60_000}});
        env.kubectl_as(&tenant, &["apply", "--server-side", "-f", "-"], Some(&over_budget.to_string()))
            .unwrap();
        let (events, changed) = server.until_timed(RECOVER, "the gate not clear on the server", |e| {
            clear_status(e).is_some_and(|s| s != "True")
        });
        eprintln!("the server's gate: {}", events.last().unwrap()["object"]["status"]);
        let (verdict, _) = until(&page, FEW, "the page's gate not clear", GATE, vec![json!(gate)], |v| {
            v != "clear"
        })
        .await;
        let late = changed.elapsed();
        eprintln!("the page showed {verdict} {late:?} after the server");
        assert!(late <= FEW, "the page showed the change {late:?} after the server");
        // Still watched: the server's verdict, not a greyed-out one.
        assert_eq!(verdict, "unknown");
        let watched = page
            .execute(
                "return document.querySelector(`li.gate[data-gate=\"${arguments[0]}\"]`).dataset.watched;",
                vec![json!(gate)],
            )
            .await
            .unwrap();
        assert_eq!(watched, "true");
        page.close().await.unwrap();
    });
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}
