//! `kubectl ifo ui` in a real browser: headless Chromium (Debian's `chromium` and
//! `chromium-driver`, driven over WebDriver) opens the page against the test cluster and sees
//! what a person would: operations appear as their subjects change, end in their outcome's
//! colour, the namespace's gate flips, the staleness warning shows when a target is not watched,
//! and a namespace viewer sees their namespace only. A gate that left the list (nothing in
//! flight) is still followed: it turns from Clear to Unknown on the page as on the server. The
//! access token stays with the page: another service on 127.0.0.1 the same browser visits gets
//! no cookie and no token, and the API refuses a request without the token's header. Under stale
//! data the page reads at a glance (one short banner, an amber or red indicator, operations as
//! last seen drawn so, names that fit, migrations under both nodes, relative times), and
//! thousands of operations stay quick to draw (the figures are printed; `IFO_UI_SCREENSHOTS=docs`
//! updates the README's screenshots).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fantoccini::Client;
use ifo_dev::User;
use serde_json::{Value, json};

use ifo_test_support::browser::{browser_sized, chromedriver, until};
use ifo_test_support::{
    Env, Rule, Running, Scope, create_gadget_crd, cronjob, cronjob_ruleset, env, eventually,
    grant_gadgets, node_vm_ruleset, plugin_binary,
};

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
    browser_sized(port, (1280, 800)).await
}

/// A browser on `url`, once the page is connected to the server.
async fn connected_page(port: u16, url: &str) -> Client {
    let page = browser(port).await;
    page.goto(url).await.unwrap();
    until(
        &page,
        LIVE * 5,
        "the page to connect",
        CONNECTION,
        vec![],
        connected,
    )
    .await;
    page
}

/// The runtime the browser's clients run on.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Waits until the card of gate `gate` says operations are in flight.
async fn shown_in_flight(page: &Client, gate: &str) {
    let what = format!("{gate} in flight on the page");
    until(page, END, &what, GATE, vec![json!(gate)], |v| {
        v == "blocked"
    })
    .await;
}

/// `data-<key>` of the card of gate `gate`.
async fn card_data(page: &Client, gate: &str, key: &str) -> Value {
    page.execute(
        "return document.querySelector(`li.gate[data-gate=\"${arguments[0]}\"]`).dataset[arguments[1]];",
        vec![json!(gate), json!(key)],
    )
    .await
    .unwrap()
}

/// The bars whose description mentions `needle`: `[state, fill colour]` each.
const BARS: &str = "return [...document.querySelectorAll('g.op')]
  .filter(g => g.getAttribute('aria-label').includes(arguments[0]))
  .map(g => [g.dataset.state, getComputedStyle(g.querySelector('rect.bar')).fill]);";
/// The watch behind a gate's verdict and its state (`gates: live` for the list's, `gate NAME:
/// connecting` for its own by name…), or null when the gate is not shown.
const GATE_WATCH: &str =
    "const li = document.querySelector(`li.gate[data-gate=\"${arguments[0]}\"]`);
  return li ? li.dataset.watch : null;";
/// A gate's verdict class (`clear`, `blocked`, `unknown`), or null when it is not shown.
const GATE: &str = "const li = document.querySelector(`li.gate[data-gate=\"${arguments[0]}\"]`);
  return li ? li.dataset.verdict : null;";
/// The warning banner's text, its collapsed details included, empty while hidden.
const WARNINGS: &str =
    "const w = document.getElementById('warnings'); return w.hidden ? '' : w.textContent;";
/// The connection indicator's state.
const CONNECTION: &str = "return document.getElementById('connection').dataset.state;";

/// The page is connected: every watch live (the answers complete or not: tests share the
/// cluster, and another test's stale target makes an answer of every namespace incomplete).
fn connected(v: &Value) -> bool {
    v == "live" || v == "incomplete"
}
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
    let stale = env.gadget_scope("ui-stale");
    let group = &stale.group;
    stale.watch(env, stale.busy_gadgets(), &[]);
    env.apply(&stale.gadget("g1", json!({"busy": true})));
    env.grant_alice_view(&ns);

    let (_driver, driver_port) = chromedriver();
    let (_admin_ui, admin_url) = start_ui(env, User::Admin, &["-A"]);
    let (_alice_ui, alice_url) = start_ui(env, User::Alice, &["-n", &ns]);
    let runtime = runtime();
    runtime.block_on(async {
        let page = connected_page(driver_port, &admin_url).await;

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
        open_detail(&page, &vm1).await;
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

        // A namespace viewer sees their namespace only, and is told they may not read gates.
        page.goto(&alice_url).await.unwrap();
        until(&page, LIVE * 5, "alice's page to connect", CONNECTION, vec![], connected).await;
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

    env.kubectl(User::Admin, &["delete", "ors", &rs, &stale.rs])
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
    let runtime = runtime();
    let cookies = runtime.block_on(async {
        let page = connected_page(driver_port, &url).await;
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
            connected,
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
    let scope = env.gadget_scope("ui-gate");
    let Scope { ns, group, .. } = &scope;
    let ruleset = scope.busy_gadgets().rule(Rule::new("Heavy", HEAVY_GADGET));
    scope.watch(env, ruleset, &[]);
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
            ns,
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
            ns,
        ],
    )
    .unwrap();
    let gadget = |busy: bool| env.apply(&scope.gadget("g1", json!({"busy": busy})));
    let gate = format!("namespace.{ns}");
    let (_driver, driver_port) = chromedriver();
    let (_ui, url) = start_ui(env, User::Admin, &["-n", ns]);
    let runtime = runtime();
    runtime.block_on(async {
        let page = connected_page(driver_port, &url).await;
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
        // Cleared, the gate left the list and the page watches it by name: once that watch is
        // live. Until then the page shows the verdict for its grace, then greys it out (on a
        // loaded machine the list and watch by name may take longer than the grace).
        until(&page, END, "the clear gate's watch by name live", GATE_WATCH, vec![json!(gate)], |v| {
            v == format!("gate {gate}: live").as_str()
        })
        .await;
        assert_eq!(card_data(&page, &gate, "watched").await, "true");
        let over_budget = json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget",
            "metadata": {"name": "g2", "namespace": ns,
                         "annotations": {"example.com/big": "x".repeat(64 * 1024)}},
            "spec": {"n": 60_000}});
        env.kubectl_as(&tenant, &["apply", "--server-side", "-f", "-"], Some(&over_budget.to_string()))
            .unwrap();
        // Not clear for the tenant's gadget: another test's new ruleset can leave every gate
        // Unknown for a moment before (its first list), which the page may show or not.
        let skipped = format!("object {ns}/g2 is skipped");
        let (events, changed) = server.until_timed(RECOVER, "the gate Unknown on the server for g2", |e| {
            clear_status(e).is_some_and(|s| s != "True")
                && e["object"]["status"]["staleTargets"]
                    .as_array()
                    .is_some_and(|targets| targets.iter().any(|t| t["reason"].as_str().is_some_and(|r| r.contains(&skipped))))
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
        assert_eq!(verdict, "unknown", "the watch behind it: {}", card_data(&page, &gate, "watch").await);
        assert_eq!(card_data(&page, &gate, "watched").await, "true");
        page.close().await.unwrap();
    });
    scope.delete_ruleset(env);
}

/// The size of the screenshots of the README.
const SCREEN: (u32, u32) = (1600, 1000);

/// Where the screenshots go: `IFO_UI_SCREENSHOTS` (a directory; `docs` updates the README's),
/// else the test cluster's directory.
fn screenshot_dir(env: &Env) -> std::path::PathBuf {
    std::env::var_os("IFO_UI_SCREENSHOTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env.cluster.dir().to_path_buf())
}

/// A screenshot of the page at [`SCREEN`] (the window grown by what the browser's frame takes).
async fn screenshot(page: &Client, env: &Env, name: &str) {
    let inner = page
        .execute("return [window.innerWidth, window.innerHeight];", vec![])
        .await
        .unwrap();
    let (w, h) = (
        inner[0].as_u64().unwrap() as u32,
        inner[1].as_u64().unwrap() as u32,
    );
    if (w, h) != SCREEN {
        page.set_window_size(2 * SCREEN.0 - w, 2 * SCREEN.1 - h)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    page.execute("document.activeElement?.blur();", vec![])
        .await
        .unwrap();
    let shot = screenshot_dir(env).join(name);
    std::fs::write(&shot, page.screenshot().await.unwrap()).unwrap();
    eprintln!("screenshot: {}", shot.display());
}

/// A ruleset of VirtualMachines in `ns` whose operations are on the VM's node and, migrating,
/// on its target node too (as the shipped KubeVirt rules label them).
fn vm_ruleset_on_nodes(name: &str, ns: &str) -> String {
    json!({"apiVersion": "ifo.kubevirt.io/v1alpha1", "kind": "OperationRuleSet", "metadata": {"name": name},
      "spec": {"component": "kubevirt", "target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachines"},
        "namespaces": [ns],
        "labelExpressions": [
          {"key": "ifo.kubevirt.io/node", "expression": "object.?status.?nodeName.orValue('')"},
          {"key": "ifo.kubevirt.io/target-node", "expression": "object.?status.?migrationTarget.orValue('')"}],
        "rules": [
          {"operation": "Migrating", "expression": "object.?status.?printableStatus.orValue('') == 'Migrating'",
           "message": "'to ' + object.?status.?migrationTarget.orValue('?')"},
          {"operation": "Starting", "expression": "object.?status.?printableStatus.orValue('') == 'Starting'"},
          {"operation": "Stopping", "expression": "object.?status.?printableStatus.orValue('') == 'Stopping'"}]}})
    .to_string()
}

/// `HEAVY`, for gadgets, which may have no spec: over the evaluation budget on a gadget with a
/// large `spec.n` and annotation.
const HEAVY_GADGET: &str = "lists.range(object.?spec.?n.orValue(0)).exists(i, \
                            object.metadata.annotations['example.com/big'].contains(string(i)))";

/// A ruleset of gadgets of `group` in `ns`, busy while `status.busy`, on the node `spec.node`;
/// and `Heavy`, over the evaluation budget on a gadget with a large `spec.n` (as `HEAVY`).
fn gadget_ruleset(name: &str, ns: &str, group: &str) -> String {
    json!({"apiVersion": "ifo.kubevirt.io/v1alpha1", "kind": "OperationRuleSet", "metadata": {"name": name},
      "spec": {"component": "gadgets", "target": {"group": group, "version": "v1", "resource": "gadgets"},
        "namespaces": [ns],
        "labelExpressions": [{"key": "ifo.kubevirt.io/node", "expression": "object.?spec.?node.orValue('')"}],
        "rules": [{"operation": "Busy", "expression": "object.?status.?busy.orValue(false)"},
                  {"operation": "Heavy", "expression": HEAVY_GADGET}]}})
    .to_string()
}

/// What a person sees of the timeline's texts: each text's content, its tooltip (`<title>`),
/// its right edge, and the right edges of the timeline and of the window.
const TEXTS: &str = "const box = document.getElementById('timeline').getBoundingClientRect();
  return {right: box.right, window: window.innerWidth, texts: [...document.querySelectorAll('#timeline text, #axis text')]
    .map(t => ({text: t.firstChild ? t.firstChild.textContent : t.textContent,
      title: t.querySelector('title')?.textContent ?? null, right: t.getBoundingClientRect().right,
      cls: t.getAttribute('class')}))};";
/// The operations drawn: `[group, role, seen, aria-label]` each.
const OPS: &str =
    "return [...document.querySelectorAll('g.op')].map(g => [g.closest('g.group').dataset.group,
  g.dataset.role ?? '', g.dataset.seen ?? '', g.getAttribute('aria-label'),
  g.closest('g.row').querySelector('text.op-label').firstChild.textContent]);";
/// The banner: each line shown (text, height), whether its details are open, their items.
const BANNER: &str = "const w = document.getElementById('warnings'); if (w.hidden) return null;
  const d = w.querySelector('details');
  return {lines: [...w.querySelectorAll(':scope > p')].map(p => [p.innerText, p.getBoundingClientRect().height]),
    summary: d.querySelector('summary').innerText, open: d.open, height: w.getBoundingClientRect().height,
    items: [...d.querySelectorAll('li')].map(li => li.textContent)};";
/// The connection indicator: state, words, background colour.
const INDICATOR: &str = "const c = document.getElementById('connection');
  return [c.dataset.state, c.innerText, getComputedStyle(c).backgroundColor,
    getComputedStyle(c).color];";
/// The detail panel's fields: `[term, text, time element's title or null]` each.
const DETAIL: &str = "const d = document.getElementById('detail'); if (d.hidden) return null;
  return [...d.querySelectorAll('dt')].map(dt => [dt.innerText, dt.nextElementSibling.innerText,
    dt.nextElementSibling.querySelector('time')?.title ?? null]);";

fn ops_of(v: &Value) -> Vec<(String, String, String, String, String)> {
    v.as_array()
        .map(|ops| {
            ops.iter()
                .map(|o| {
                    let s = |i: usize| o[i].as_str().unwrap_or_default().to_string();
                    (s(0), s(1), s(2), s(3), s(4))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Focuses the operation whose description has `needle` and opens its details (Enter).
async fn open_detail(page: &Client, needle: &str) {
    page.execute(
        "[...document.querySelectorAll('g.op')].find(g => g.getAttribute('aria-label').includes(arguments[0])).focus();",
        vec![json!(needle)],
    )
    .await
    .unwrap();
    page.active_element()
        .await
        .unwrap()
        .send_keys(&fantoccini::key::Key::Enter)
        .await
        .unwrap();
}

/// The page under stale data, as a new user first sees it: one short banner that groups the
/// stale targets by cause with the remedy (the rest in a collapsed `<details>`), "Live" in amber
/// while answers are incomplete and red once the connection is lost, operations known only as
/// last seen drawn and said so, names cut in the middle with the whole on hover and never past
/// the timeline's edge, a migration under both its nodes, times relative with the absolute one
/// on hover, and "ending in" during an operation's grace. Also the README's screenshot.
#[test]
fn the_page_reads_at_a_glance() {
    let env = env();
    let ns = env.namespace("ui-glance");
    let nodes: Vec<_> = ["worker-a", "worker-b", "worker-c"]
        .iter()
        .map(|n| env.node(&format!("{ns}-{n}")))
        .collect();
    let node = |i: usize| nodes[i].name().to_string();
    let rs = format!("vms-{ns}");
    env.apply(&vm_ruleset_on_nodes(&rs, &ns));
    let long = "analytics-warehouse-postgres-primary-0";
    for vm in [
        long,
        "web-frontend-1",
        "web-frontend-2",
        "cache-0",
        "batch-runner-7",
    ] {
        env.apply(&ifo_test_support::vm(vm, &ns));
    }
    env.wait_watching(&rs);
    // A target watched, then lost (its CRD deleted): its operation is known only as last seen.
    let group = format!("{ns}.ui.example.com");
    let gadgets = format!("gadgets-{ns}");
    create_gadget_crd(env, &group);
    grant_gadgets(env, &ns, &group);
    env.apply(&gadget_ruleset(&gadgets, &ns, &group));
    env.wait_watching(&gadgets);
    env.apply(&format!(
        r#"{{"apiVersion":"{group}/v1","kind":"Gadget","metadata":{{"name":"g1","namespace":"{ns}"}},"spec":{{"node":"{}"}},"status":{{"busy":true}}}}"#,
        node(2)
    ));
    // Each VM's state, on which node, and a migration's target node.
    for (vm, state, on, to) in [
        (long, "Migrating", 0, Some(1)),
        ("web-frontend-1", "Starting", 0, None),
        ("web-frontend-2", "Migrating", 1, Some(2)),
        ("cache-0", "Stopping", 2, None),
        ("batch-runner-7", "Starting", 1, None),
    ] {
        let mut status = json!({"printableStatus": state, "nodeName": node(on)});
        if let Some(to) = to {
            status["migrationTarget"] = json!(node(to));
        }
        patch_status(env, &ns, vm, status);
    }

    let (_driver, driver_port) = chromedriver();
    let (ui, url) = start_ui(env, User::Admin, &["-n", &ns]);
    let mut ui = Some(ui);
    let runtime = runtime();
    let forbidden: Vec<String> = (1..=4)
        .map(|i| format!("{ns}-f{i}.ui.example.com"))
        .collect();
    runtime.block_on(async {
        let page = browser_sized(driver_port, SCREEN).await;
        page.goto(&url).await.unwrap();
        // Green while every answer is complete (another test's stale target can make the
        // cluster's gate Unknown: then amber).
        let (c, _) = until(&page, LIVE * 5, "the page to connect", INDICATOR, vec![], |v| connected(&v[0])).await;
        if c[0] == "live" {
            assert_eq!(c[1], "● Live");
            assert_eq!(c[2], "rgba(0, 0, 0, 0)");
            // Read with the state, in one look: another test's stale target may turn the
            // indicator amber a moment later.
            assert_eq!(c[3], SUCCEEDED_FILL);
        }
        until(&page, END, "six operations", OPS, vec![], |v| ops_of(v).len() >= 7).await;
        // One ends: its grace says when, in the detail panel.
        patch_status(env, &ns, "batch-runner-7", json!({"printableStatus": "Running", "nodeName": node(1)}));
        open_detail(&page, "batch-runner-7").await;
        let (detail, _) = until(&page, END, "the detail panel saying ending in", DETAIL, vec![], |v| {
            v.as_array().is_some_and(|f| f.iter().any(|f| f[0] == "State" && f[1].as_str().unwrap_or("").starts_with("ending in ")))
        })
        .await;
        eprintln!("the detail panel in the grace: {detail}");
        until(&page, END, "the detail panel saying it ended", DETAIL, vec![], |v| {
            v.as_array().is_some_and(|f| f.iter().any(|f| f[0] == "Phase" && f[1] == "Completed"))
        })
        .await;
        page.execute("document.getElementById('detail-close').click();", vec![]).await.unwrap();

        // A migration is under both its nodes, marked source and target.
        let (ops, _) = until(&page, LIVE, "the migration under both nodes", OPS, vec![], |v| {
            ops_of(v).iter().filter(|o| o.3.contains(long)).count() == 2
        })
        .await;
        let migration: Vec<_> = ops_of(&ops).into_iter().filter(|o| o.3.contains(long)).collect();
        assert!(migration.iter().any(|o| o.0 == node(0) && o.1 == "source" && o.4.contains("Migrating (source)")), "{migration:?}");
        assert!(migration.iter().any(|o| o.0 == node(1) && o.1 == "target" && o.4.contains("Migrating (target)")), "{migration:?}");

        // Targets the server may not list, four of them: one reason, with its remedy.
        for (i, g) in forbidden.iter().enumerate() {
            create_gadget_crd(env, g);
            env.apply(&gadget_ruleset(&format!("forbidden-{i}-{ns}"), &ns, g));
        }
        // A gadget over the evaluation budget: the server cannot vouch for the gadgets here.
        let over_budget = json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget",
            "metadata": {"name": "g2", "namespace": ns, "annotations": {"example.com/big": "x".repeat(64 * 1024)}},
            "spec": {"n": 60_000}});
        env.cluster.kubectl_run(User::Admin, &["apply", "--server-side", "-f", "-"], Some(&over_budget.to_string())).unwrap();
        let lost = format!("gadgets.{group}/v1 object {ns}/g2 is skipped");
        let (banner, _) = until(&page, RECOVER, "the grouped warning and the lost target", BANNER, vec![], |v| {
            let text = v.to_string();
            text.contains("4 resource types are not being watched: the server is forbidden to list them") && text.contains(&lost)
        })
        .await;
        eprintln!("the banner: {banner:#}");
        let lines = banner["lines"].as_array().unwrap();
        assert!(lines.len() <= 2, "more than a head and a reason: {lines:?}");
        assert!(lines.iter().all(|l| l[1].as_f64().unwrap() < 24.0), "a line wraps: {lines:?}");
        assert!(banner["height"].as_f64().unwrap() < 90.0, "the banner is {} px tall", banner["height"]);
        assert!(lines[0][0].as_str().unwrap().starts_with("⚠ What is shown may be incomplete"), "{lines:?}");
        assert!(lines[1][0].as_str().unwrap().contains("4 resource types are not being watched"), "{lines:?}");
        assert!(lines[1][0].as_str().unwrap().contains("Remedy: grant the server read access"), "{lines:?}");
        assert_eq!(banner["open"], false);
        let items = banner["items"].as_array().unwrap();
        assert!(items.iter().any(|i| i.as_str().unwrap().starts_with(&lost)), "{items:?}");
        // Live, but amber: the answers are incomplete.
        let (c, _) = until(&page, FEW, "an amber Live", INDICATOR, vec![], |v| v[0] == "incomplete").await;
        assert_eq!(c[1], "● Live, answers incomplete");
        assert_eq!(c[2], "rgb(180, 83, 9)");
        // The gadget's operation is known only as last seen: hatched, dimmed, and in words.
        let (ops, _) = until(&page, RECOVER, "the gadget as last seen", OPS, vec![], |v| {
            ops_of(v).iter().any(|o| o.3.contains("Gadget") && o.2 == "last")
        })
        .await;
        let gadget = ops_of(&ops).into_iter().find(|o| o.3.contains("Gadget")).unwrap();
        assert!(gadget.3.contains("as last seen") && gadget.4.contains("as last seen"), "{gadget:?}");
        let hatched = page
            .execute("const g = [...document.querySelectorAll('g.op')].find(g => g.dataset.seen === 'last');
              return [g.querySelector('rect.seen').getAttribute('width'), getComputedStyle(g).opacity];", vec![])
            .await
            .unwrap();
        assert!(hatched[0].as_str().unwrap().parse::<f64>().unwrap() > 0.0 && hatched[1] == "0.6", "{hatched}");
        // The VMs' operations are current: not drawn as last seen.
        assert!(ops_of(&ops).iter().filter(|o| o.3.contains("VirtualMachine")).all(|o| o.2.is_empty()), "{ops}");

        // Names: whole on hover, cut in the middle if need be, never past the timeline's edge.
        let (texts, _) = until(&page, FEW, "the timeline's texts", TEXTS, vec![], |v| v["texts"].as_array().is_some_and(|t| !t.is_empty())).await;
        let right = texts["right"].as_f64().unwrap().min(texts["window"].as_f64().unwrap());
        let all = texts["texts"].as_array().unwrap();
        for t in all {
            assert!(t["right"].as_f64().unwrap() <= right + 1.0, "past the edge ({right}): {t}");
        }
        let subject = format!("VirtualMachine {ns}/{long}");
        let cut = all
            .iter()
            .find(|t| t["cls"] == "subject" && t["title"] == subject.as_str())
            .unwrap_or_else(|| panic!("no row of {subject}: {all:?}"));
        let shown = cut["text"].as_str().unwrap();
        assert!(shown.contains('…') && shown.starts_with("VirtualMachine") && shown.ends_with("-0"), "{shown}");
        for t in all.iter().filter(|t| t["cls"] == "op-label" || t["cls"] == "group-title") {
            assert!(t["title"].as_str().is_some_and(|full| !full.is_empty()), "no tooltip: {t}");
        }

        // One time format: relative, the absolute time (24-hour) on hover; clock ticks 24-hour.
        let ticks: Vec<String> = all.iter().filter(|t| t["cls"].is_null()).map(|t| t["text"].as_str().unwrap().to_string()).collect();
        assert!(!ticks.is_empty() && ticks.iter().all(|t| is_clock(t)), "{ticks:?}");
        open_detail(&page, &format!("Migrating (source) on {subject}")).await;
        let (detail, _) = until(&page, LIVE, "the migration's details", DETAIL, vec![], |v| v.is_array()).await;
        let field = |name: &str| detail.as_array().unwrap().iter().find(|f| f[0] == name).cloned().unwrap_or_else(|| panic!("no {name} in {detail}"));
        let started = field("Started");
        assert!(started[1].as_str().unwrap().ends_with(" ago"), "{started}");
        assert!(is_absolute(started[2].as_str().unwrap()), "{started}");
        assert_eq!(field("Nodes")[1], format!("{} (source), {} (target)", node(0), node(1)));
        let labels = field("Labels");
        assert!(labels[1].as_str().unwrap().contains(&format!("ifo.kubevirt.io/target-node={}", node(1))), "{labels}");
        let times = page
            .execute("return [...document.querySelectorAll('time')].map(t => [t.innerText, t.title]);", vec![])
            .await
            .unwrap();
        for t in times.as_array().unwrap() {
            assert!(is_relative(t[0].as_str().unwrap()) && is_absolute(t[1].as_str().unwrap()), "{t}");
        }
        let text = page.execute("return document.body.innerText;", vec![]).await.unwrap();
        let text = text.as_str().unwrap();
        for word in text.split_whitespace() {
            let twelve_hours = word.trim_end_matches(['.', ',', ')']) == "AM" || word.trim_end_matches(['.', ',', ')']) == "PM";
            let rfc3339 = word.contains('T') && word.contains(':') && word.ends_with('Z');
            assert!(!twelve_hours && !rfc3339, "another time format: {word} in {text}");
        }
        // Gate cards: a few words each (those of this test's nodes and namespace: the cluster
        // and its other gates are every test's).
        let gates = page
            .execute(
                "return [...document.querySelectorAll('li.gate')].filter(li => li.dataset.gate.includes(arguments[0]))
                   .map(li => [li.innerText, li.getBoundingClientRect().height]);",
                vec![json!(ns)],
            )
            .await
            .unwrap();
        assert!(gates.as_array().unwrap().len() >= 4, "the test's gates on the page: {gates}");
        for g in gates.as_array().unwrap() {
            assert!(g[1].as_f64().unwrap() <= 120.0, "a wordy gate card: {g}");
        }
        page.execute("document.getElementById('detail-close').click();", vec![]).await.unwrap();
        page.execute("document.getElementById('timeline').scrollTop = 0; window.scrollTo(0, 0);", vec![]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        screenshot(&page, env, "ui-stale.png").await;

        // The connection lost: red, and everything in flight is as last seen.
        drop(ui.take());
        let (c, _) = until(&page, RECOVER, "a red indicator", INDICATOR, vec![], |v| v[0] == "disconnected").await;
        assert!(c[1].as_str().unwrap().starts_with("✗ Connection lost"), "{c}");
        assert_eq!(c[2], FAILED_FILL);
        let (ops, _) = until(&page, FEW, "everything as last seen", OPS, vec![], |v| {
            ops_of(v).iter().filter(|o| o.3.contains("VirtualMachine") && o.3.contains("Migrating")).all(|o| o.2 == "last")
        })
        .await;
        eprintln!("{} operations drawn once the connection is lost", ops_of(&ops).len());
        page.close().await.unwrap();
    });
    let mut rulesets = vec![rs, gadgets];
    rulesets.extend((0..forbidden.len()).map(|i| format!("forbidden-{i}-{ns}")));
    let mut delete = vec!["delete", "ors"];
    delete.extend(rulesets.iter().map(String::as_str));
    env.kubectl(User::Admin, &delete).unwrap();
    for g in forbidden.iter().chain([&group]) {
        env.kubectl(
            User::Admin,
            &["delete", "crd", &format!("gadgets.{g}"), "--wait=false"],
        )
        .unwrap();
    }
}

/// `23:28` or `23:28:39`.
fn is_clock(t: &str) -> bool {
    let parts: Vec<&str> = t.split(':').collect();
    (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_digit()))
}

/// `2026-11-24 23:28:39`.
fn is_absolute(t: &str) -> bool {
    t.split_once(' ').is_some_and(|(date, clock)| {
        date.len() == 10 && date.split('-').count() == 3 && clock.len() == 8 && is_clock(clock)
    })
}

/// `now`, `in 40s`, `3m20s ago`.
fn is_relative(t: &str) -> bool {
    let duration = |d: &str| {
        !d.is_empty()
            && d.chars().next().unwrap().is_ascii_digit()
            && d.chars().all(|c| c.is_ascii_digit() || "smhd".contains(c))
    };
    t == "now"
        || t.strip_prefix("in ").is_some_and(duration)
        || t.strip_suffix(" ago").is_some_and(duration)
}

/// A CRD of `kind` (plural `<kind lower-cased>s`) in `group`, namespaced, its objects created
/// with their status (no status subresource), established.
fn create_kind(env: &Env, group: &str, kind: &str) -> String {
    let plural = format!("{}s", kind.to_lowercase());
    env.apply(&json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
      "metadata": {"name": format!("{plural}.{group}")},
      "spec": {"group": group, "scope": "Namespaced",
        "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
        "versions": [{"name": "v1", "served": true, "storage": true,
          "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})
    .to_string());
    env.kubectl(
        User::Admin,
        &[
            "wait",
            "--for=condition=Established",
            &format!("crd/{plural}.{group}"),
            "--timeout=30s",
        ],
    )
    .unwrap();
    plural
}

/// Migrations of a CRD of the test's own, in `ns`: `n` of them, running, on 20 nodes (each
/// from one node to the next).
fn create_migrations(env: &Env, ns: &str, group: &str, n: usize) {
    let items: Vec<Value> = (0..n)
        .map(|i| {
            json!({"apiVersion": format!("{group}/v1"), "kind": "VirtualMachineInstanceMigration",
              "metadata": {"name": format!("vm-{i:05}-migration"), "namespace": ns},
              "spec": {"node": format!("node-{:02}", 1 + i % 20), "targetNode": format!("node-{:02}", 1 + (i + 1) % 20)},
              "status": {"phase": "Running"}})
        })
        .collect();
    // A few kubectl at once, a few hundred objects each.
    std::thread::scope(|scope| {
        for chunk in items.chunks(items.len().div_ceil(4)) {
            scope.spawn(move || {
                for part in chunk.chunks(500) {
                    let list =
                        json!({"apiVersion": "v1", "kind": "List", "items": part}).to_string();
                    env.cluster
                        .kubectl_run(User::Admin, &["create", "-f", "-"], Some(&list))
                        .unwrap();
                }
            });
        }
    });
}

/// The durations (ms) of the page's draws with `n` operations (its User Timing measures).
const DRAWS: &str = "return performance.getEntriesByName('ifo-draw')
  .filter(m => m.detail && m.detail.operations === arguments[0]).map(m => [m.startTime, m.duration]);";

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Thousands of operations: how long the page takes to show them and to apply one change, and
/// that it stays responsive (a filter typed in applies at once). The figures are printed; the
/// screenshot at 1,000 goes next to the README's. `IFO_UI_SCALE` chooses the sizes: 1,000 in
/// the suite (which shares its cluster with every other test); the benchmark of
/// docs/performance.md runs `IFO_UI_SCALE=1000,10000`.
#[test]
fn thousands_of_operations_stay_responsive() {
    let env = env();
    let sizes: Vec<usize> = std::env::var("IFO_UI_SCALE")
        .unwrap_or_else(|_| "1000".into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("IFO_UI_SCALE: sizes separated by commas")
        })
        .collect();
    let (_driver, driver_port) = chromedriver();
    let runtime = runtime();
    let mut figures = Vec::new();
    for n in sizes {
        let ns = env.namespace("ui-scale");
        let group = format!("{ns}.ui.example.com");
        let plural = create_kind(env, &group, "VirtualMachineInstanceMigration");
        grant_read_of(env, &ns, &group, &plural);
        let rs = format!("migrations-{ns}");
        env.apply(&json!({"apiVersion": "ifo.kubevirt.io/v1alpha1", "kind": "OperationRuleSet", "metadata": {"name": rs},
          "spec": {"component": "kubevirt", "target": {"group": group, "version": "v1", "resource": plural},
            "namespaces": [ns],
            "labelExpressions": [
              {"key": "ifo.kubevirt.io/node", "expression": "object.?spec.?node.orValue('')"},
              {"key": "ifo.kubevirt.io/target-node", "expression": "object.?spec.?targetNode.orValue('')"}],
            "rules": [{"operation": "Migrating", "expression": "object.?status.?phase.orValue('') == 'Running'"}]}})
        .to_string());
        env.wait_watching(&rs);
        let created = Instant::now();
        create_migrations(env, &ns, &group, n);
        eprintln!("{n} objects created in {:?}", created.elapsed());
        // The server has them all first: the page's time is the page's.
        eventually(RECOVER * 2, "every operation on the server", || {
            Some(env.ifos(&ns).len()).filter(|&len| len == n)
        });
        let (_ui, url) = start_ui(env, User::Admin, &["-n", &ns]);
        let counts = format!("{n} of {n} operations shown");
        runtime.block_on(async {
            let page = browser_sized(driver_port, SCREEN).await;
            // The counts (and, should they not come, what the connection indicator says).
            let counted = "const c = document.getElementById('connection');
              return document.getElementById('counts').innerText + ' [' + c.innerText + ': ' + c.title + ']';";
            page.goto(&url).await.unwrap();
            until(&page, RECOVER * 2, "every operation on the page", counted, vec![], |v| {
                v.as_str().is_some_and(|t| t.starts_with(&counts))
            })
            .await;
            page.refresh().await.unwrap();
            let (_, shown) = until(&page, RECOVER, "every operation on the reloaded page", counted, vec![], |v| {
                v.as_str().is_some_and(|t| t.starts_with(&counts))
            })
            .await;
            tokio::time::sleep(Duration::from_secs(3)).await;
            let draws = page.execute(DRAWS, vec![json!(n)]).await.unwrap();
            let draws: Vec<(f64, f64)> = draws.as_array().unwrap().iter().map(|d| (d[0].as_f64().unwrap(), d[1].as_f64().unwrap())).collect();
            let first = draws.first().map(|d| d.1).unwrap_or(f64::NAN);
            let loaded = draws.first().map(|d| d.0 + d.1).unwrap_or(f64::NAN);
            let redraw = median(draws.iter().skip(1).map(|d| d.1).collect());

            // One change: an operation moves to a node of its own (first in the timeline).
            let before = page.execute(DRAWS, vec![json!(n)]).await.unwrap().as_array().unwrap().len();
            env.kubectl(User::Admin, &["patch", &format!("{plural}.{group}"), "vm-00000-migration", "-n", &ns, "--type=merge", "-p", r#"{"spec":{"node":"node-00"}}"#])
                .unwrap();
            let (_, update) = until(&page, FEW, "the moved operation", "return !!document.querySelector('g.group[data-group=\"node-00\"] g.op');", vec![], |v| v == true).await;
            let after = page.execute(DRAWS, vec![json!(n)]).await.unwrap();
            let update_draw = after.as_array().unwrap()[before..].iter().map(|d| d[1].as_f64().unwrap()).fold(0.0, f64::max);

            // Responsive: a filter typed in shows at once.
            let typed = Instant::now();
            page.find(fantoccini::Locator::Id("filter-text")).await.unwrap().send_keys("vm-00042").await.unwrap();
            let filtered = format!("2 of {n} operations shown");
            let _ = until(&page, FEW, "the filtered timeline", counted, vec![], |v| {
                v.as_str().is_some_and(|t| t.starts_with(&filtered) || t.starts_with(&format!("1 of {n}")))
            })
            .await;
            let filter = typed.elapsed();
            let rows = page.execute("return document.querySelectorAll('g.op').length;", vec![]).await.unwrap();
            eprintln!(
                "{n} operations: shown {shown:?} after a reload (page loaded and first drawn at {loaded:.0} ms, that draw {first:.1} ms), \
                 a redraw {redraw:.1} ms (median of {}), one change on the page {update:?} after its patch (its draw {update_draw:.1} ms), \
                 a filter typed in applied in {filter:?}; {rows} bars in the page after filtering",
                draws.len().saturating_sub(1)
            );
            figures.push((n, loaded, first, redraw, update, update_draw, filter));
            if n == 1000 {
                page.find(fantoccini::Locator::Id("filter-text")).await.unwrap().clear().await.unwrap();
                page.execute("const f = document.getElementById('filter-text'); f.value = ''; f.dispatchEvent(new Event('input', {bubbles: true}));", vec![]).await.unwrap();
                until(&page, FEW, "every operation again", counted, vec![], |v| v.as_str().is_some_and(|t| t.starts_with(&counts))).await;
                tokio::time::sleep(Duration::from_millis(500)).await;
                screenshot(&page, env, "ui-1000.png").await;
            }
            page.close().await.unwrap();
            // Responsive: a draw never holds the page for long.
            assert!(redraw < 200.0 && update_draw < 500.0, "{n} operations: a redraw takes {redraw} ms, an update {update_draw} ms");
        });
        env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
        env.kubectl(
            User::Admin,
            &[
                "delete",
                "crd",
                &format!("{plural}.{group}"),
                "--wait=false",
            ],
        )
        .unwrap();
    }
    for (n, loaded, first, redraw, update, update_draw, filter) in figures {
        eprintln!(
            "FIGURES {n} operations: loaded+drawn {loaded:.0} ms (draw {first:.1} ms), redraw {redraw:.1} ms, update {update:?} (draw {update_draw:.1} ms), filter {filter:?}"
        );
    }
}

/// Lets the server read `plural` of `group` in `ns`.
fn grant_read_of(env: &Env, ns: &str, group: &str, plural: &str) {
    env.apply(
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
      "metadata": {"name": "read-migrations", "namespace": ns},
      "rules": [{"apiGroups": [group], "resources": [plural], "verbs": ["get", "list", "watch"]}]})
        .to_string(),
    );
    env.apply(&json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
      "metadata": {"name": "read-migrations", "namespace": ns},
      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-migrations"},
      "subjects": [{"kind": "ServiceAccount", "name": "ifo-apiserver", "namespace": "ifo-system"}]}).to_string());
}

/// What a node's gate card says of the node's maintenance override, `[state, words]`
/// (`in-force` or `not-in-force`), or null without one.
const OVERRIDE: &str = "const li = document.querySelector(`li.gate[data-gate=\"${arguments[0]}\"]`);
  const o = li && li.querySelector('.gate-override');
  return li && li.dataset.overridden ? [li.dataset.overridden, o.hidden ? '' : o.textContent] : null;";

/// An admin's override of a node with an operation in flight shows on the node's gate card: the
/// guard let through, since when and until when; and, once its end cannot be read, that it is
/// not in force. Taking it off takes it off the card.
/// The override on `gate`'s card (`[state, words]`) once its state reads `state`.
async fn override_reads(page: &Client, gate: &str, state: &str) -> Value {
    let what = format!("the override {state} on the card");
    until(page, END, &what, OVERRIDE, vec![json!(gate)], |v| {
        v[0] == state
    })
    .await
    .0
}

#[test]
fn an_override_shows_on_its_nodes_gate_card() {
    let env = env();
    let node = env.node(&format!("ui-override-{}", std::process::id()));
    let node = node.name().to_owned();
    let (ns, rs) = env.vms_watched_by(
        "ui-override",
        "vm-node-rules",
        |name, ns| node_vm_ruleset(name, ns, "kubevirt"),
        &["vm1"],
    );
    env.set_status(
        "vm",
        &ns,
        "vm1",
        json!({"printableStatus": "Migrating", "nodeName": node}),
    );
    let gate = format!("node.{node}");
    let annotate = |args: &[&str]| {
        let mut all = vec!["annotate", "--overwrite", "node", node.as_str()];
        all.extend(args);
        env.kubectl(User::Admin, &all).unwrap();
    };
    let (_driver, driver_port) = chromedriver();
    let (_ui, url) = start_ui(env, User::Admin, &["-A"]);
    let runtime = runtime();
    runtime.block_on(async {
        let page = connected_page(driver_port, &url).await;
        shown_in_flight(&page, &gate).await;
        let in_two_hours =
            jiff::Timestamp::from_second(jiff::Timestamp::now().as_second() + 7200).unwrap();
        annotate(&[
            "ifo.kubevirt.io/maintenance-override=disk failing",
            &format!("ifo.kubevirt.io/maintenance-override-until={in_two_hours}"),
        ]);
        let card = override_reads(&page, &gate, "in-force").await;
        let words = card[1].as_str().unwrap();
        assert!(
            words.starts_with("⚠ guard overridden since")
                && words.contains(" until ")
                && words.ends_with("drains of this node do not wait"),
            "{words}"
        );
        annotate(&["ifo.kubevirt.io/maintenance-override-until=tomorrow"]);
        let card = override_reads(&page, &gate, "not-in-force").await;
        assert_eq!(
            card[1],
            "override not in force (its end cannot be read): the guard holds"
        );
        annotate(&[
            "ifo.kubevirt.io/maintenance-override-",
            "ifo.kubevirt.io/maintenance-override-until-",
        ]);
        until(
            &page,
            END,
            "the override gone from the card",
            OVERRIDE,
            vec![json!(gate)],
            |v| v.is_null(),
        )
        .await;
        page.close().await.unwrap();
    });
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

/// What the page draws ahead of now: the picked gate's name, its scheduled runs
/// (`[subject, start, learned]`) and its next window (`[start, end]`) in the timeline.
const AHEAD: &str = "const box = document.getElementById('ahead');
  const runs = [...box.querySelectorAll('g.ahead-row')].flatMap(g => [...g.querySelectorAll('rect.scheduled')]
    .map(r => [g.dataset.subject, r.dataset.start, r.dataset.learned]));
  const w = document.querySelector('#timeline rect.window');
  return {gate: box.dataset.gate, runs, window: w ? [w.dataset.start, w.dataset.end ?? null] : null,
          title: document.getElementById('ahead-title').textContent};";

/// The scheduled runs of a gate's scope ahead on the timeline, and its next window as a band
/// behind it: picked by clicking the gate's card (the cluster's until then).
#[test]
fn a_gates_scheduled_runs_and_next_window_are_drawn_ahead() {
    let env = env();
    // A copy in flight whose progress says when it ends: the window opens then.
    let (ns, rs, _) = env.copying_vm("ui-ahead");
    env.copy_progressed(&ns, 10, Duration::from_secs(3));
    // A CronJob of the namespace that runs on the hour, two hours from now (UTC).
    let cron_rs = format!("cronjobs-{ns}");
    env.apply(&cronjob_ruleset(&cron_rs, &ns));
    env.wait_watching(&cron_rs);
    let run = jiff::Timestamp::from_second((jiff::Timestamp::now().as_second() / 3600 + 2) * 3600)
        .unwrap();
    let hour = run.to_zoned(jiff::tz::TimeZone::UTC).hour();
    env.apply(&cronjob(&ns, "nightly", &format!("0 {hour} * * *"), None));
    let gate = format!("namespace.{ns}");
    let served = eventually(END, "the gate's window and scheduled run", || {
        let g = env.gate(&gate);
        let w = &g["status"]["nextWindow"];
        (w["start"].is_string() && w["end"].is_string()).then_some(g)
    });
    let window_start = served["status"]["nextWindow"]["start"]
        .as_str()
        .unwrap()
        .to_owned();
    let iso = |t: &str| {
        t.parse::<jiff::Timestamp>()
            .unwrap()
            .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
            .to_string()
    };

    let (_driver, driver_port) = chromedriver();
    let (_ui, url) = start_ui(env, User::Admin, &["-n", &ns]);
    let runtime = runtime();
    runtime.block_on(async {
        let page = connected_page(driver_port, &url).await;
        shown_in_flight(&page, &gate).await;
        // The cluster's gate is drawn until another is picked.
        until(
            &page,
            END,
            "the cluster's scope ahead",
            AHEAD,
            vec![],
            |v| v["gate"] == "cluster",
        )
        .await;
        page.execute(
            "document.querySelector(`li.gate[data-gate=\"${arguments[0]}\"]`).click();",
            vec![json!(gate)],
        )
        .await
        .unwrap();
        let (ahead, _) = until(
            &page,
            END,
            "the namespace's run and window ahead",
            AHEAD,
            vec![],
            |v| {
                v["gate"] == gate.as_str()
                    && !v["runs"].as_array().unwrap().is_empty()
                    && !v["window"].is_null()
            },
        )
        .await;
        let runs = ahead["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 1, "{ahead:#}");
        assert_eq!(
            runs[0][0],
            format!("CronJob {ns}/nightly Running"),
            "{ahead:#}"
        );
        assert_eq!(runs[0][1], iso(&run.to_string()), "{ahead:#}");
        assert_eq!(runs[0][2], "false", "nothing learned: {ahead:#}");
        assert_eq!(ahead["window"][0], iso(&window_start), "{ahead:#}");
        assert_eq!(ahead["window"][1], iso(&run.to_string()), "{ahead:#}");
        let title = ahead["title"].as_str().unwrap();
        assert!(
            title.starts_with(&format!("Scheduled in {gate}: 1 run ahead · window from "))
                && title.contains(" until "),
            "{title}"
        );
        assert_eq!(card_data(&page, &gate, "scope").await, "true");
        screenshot(&page, env, "ui-ahead").await;
        page.close().await.unwrap();
    });
    for name in [rs, cron_rs] {
        env.kubectl(User::Admin, &["delete", "ors", &name]).unwrap();
    }
}
