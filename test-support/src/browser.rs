//! A real browser for the tests of `kubectl ifo ui`: headless Chromium driven over WebDriver
//! (Debian's `chromium` and `chromium-driver`; `IFO_CHROMEDRIVER` and `IFO_CHROMIUM` name
//! others), and the ways the tests read the page.

use crate::Running;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder};
use serde_json::{Value, json};

/// chromedriver on a free port.
pub fn chromedriver() -> (Running, u16) {
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

/// A headless Chromium session of the chromedriver on `port`, whose window is `size` (width,
/// height) pixels.
pub async fn browser_sized(port: u16, (width, height): (u32, u32)) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert("browserName".into(), json!("chrome"));
    let mut options = json!({"args": [
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        format!("--window-size={width},{height}"), "--lang=en-US"
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
pub async fn until(
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
