//! How tests talk to the environment: kubectl through kube-apiserver (the aggregation layer) or
//! straight to the server, curl to the server (one request, or many over one kept-alive
//! connection), raw watch streams.

use crate::Env;
use anyhow::{Context, Result};
use ifo_dev::User;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

impl Env {
    /// kubectl as `user`, through kube-apiserver: its stdout.
    pub fn kubectl(&self, user: User, args: &[&str]) -> Result<String> {
        self.cluster.kubectl_run(user, args, None)
    }

    /// kubectl talking to our server directly (not through kube-apiserver), authenticated by
    /// `user`'s bearer token, which the server checks with a TokenReview.
    pub fn kubectl_direct(&self, user: User, args: &[&str]) -> Result<String> {
        use base64::Engine;
        let token = user
            .token()
            .with_context(|| format!("{} has no bearer token", user.name()))?;
        let config = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "ifo", "cluster": {
                "server": format!("https://127.0.0.1:{}", self.port),
                "certificate-authority-data":
                    base64::engine::general_purpose::STANDARD.encode(&self.cluster.serving.ca_pem),
            }}],
            "users": [{"name": user.name(), "user": {"token": token}}],
            "contexts": [{"name": "ifo", "context": {"cluster": "ifo", "user": user.name()}}],
            "current-context": "ifo",
        });
        let path = self
            .cluster
            .dir()
            .join(format!("kubeconfig-direct-{}.json", user.name()));
        std::fs::write(&path, serde_json::to_vec(&config)?)?;
        let out = self
            .cluster
            .kubectl(user)
            .env("KUBECONFIG", &path)
            .args(args)
            .stdin(Stdio::null())
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "kubectl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// kubectl as `user`, a name of the test's own (impersonated by the admin: only the rights
    /// the test grants it, e.g. with [`Env::tenant`]), with `stdin`: its stdout.
    pub fn kubectl_as(&self, user: &str, args: &[&str], stdin: Option<&str>) -> Result<String> {
        let mut all = vec!["--as", user];
        all.extend_from_slice(args);
        self.cluster.kubectl_run(User::Admin, &all, stdin)
    }

    /// Makes `user` a tenant of `namespace`: it may edit what the namespace holds (the `edit`
    /// role, which also reads its operations), its VirtualMachines included, and nothing else.
    pub fn tenant(&self, user: &str, namespace: &str) {
        let user_flag = format!("--user={user}");
        for args in [
            &[
                "create",
                "rolebinding",
                "tenant-edit",
                "--clusterrole=edit",
                &user_flag,
            ][..],
            &[
                "create",
                "role",
                "vm-editor",
                "--verb=get,list,watch,create,update,patch,delete",
                "--resource=virtualmachines.kubevirt.io",
            ],
            &[
                "create",
                "rolebinding",
                "vm-editor",
                "--role=vm-editor",
                &user_flag,
            ],
        ] {
            let mut args = args.to_vec();
            args.extend(["-n", namespace]);
            self.kubectl(User::Admin, &args).unwrap();
        }
    }

    /// The server's `/metrics`, read straight from it as admin.
    pub fn metrics(&self) -> String {
        let certs = self.client_cert_args(User::Admin);
        let args: Vec<&str> = certs.iter().map(String::as_str).collect();
        let (code, body) = self.direct("/metrics", &args);
        assert_eq!(code, "200", "{body}");
        body
    }

    /// The value of one series of the server's `/metrics`, named with its labels as the text
    /// exposition writes them (`ifo_x_total{a="b"}`); panics when the server has no such series.
    pub fn metric(&self, series: &str) -> f64 {
        let prefix = format!("{series} ");
        self.metrics()
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in /metrics"))
    }

    /// `kubectl create` of `object` as `user`: for an object too large for a client-side apply
    /// (which keeps a copy of it in an annotation), or a user who may create but not patch.
    pub fn create_as(&self, user: User, object: &serde_json::Value) -> Result<String> {
        self.cluster
            .kubectl_run(user, &["create", "-f", "-"], Some(&object.to_string()))
    }

    /// Applies `manifest` (YAML or JSON) as admin.
    pub fn apply(&self, manifest: &str) {
        self.cluster.apply(manifest).unwrap();
    }

    /// `kubectl <args> -o json` as `user`, parsed.
    pub fn get_json(&self, user: User, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.kubectl(user, &all).unwrap()).unwrap()
    }

    /// The live operations in `namespace`, as kubectl reads them through the aggregation layer.
    pub fn ifos(&self, namespace: &str) -> Vec<serde_json::Value> {
        let list = self.get_json(User::Admin, &["get", "ifos", "-n", namespace]);
        list["items"].as_array().cloned().unwrap_or_default()
    }

    /// Waits until an operation in `namespace` satisfies `pred`, and returns it; panics naming
    /// `what` after 30 s.
    pub fn wait_ifo(
        &self,
        namespace: &str,
        what: &str,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        crate::eventually(Duration::from_secs(30), what, || {
            self.ifos(namespace).into_iter().find(|o| pred(o))
        })
    }

    /// Patches a subject's status subresource (what a controller would do).
    pub fn set_status(&self, kind: &str, namespace: &str, name: &str, status: serde_json::Value) {
        let patch = serde_json::json!({"status": status}).to_string();
        self.kubectl(
            User::Admin,
            &[
                "patch",
                kind,
                name,
                "-n",
                namespace,
                "--subresource=status",
                "--type=merge",
                "-p",
                &patch,
            ],
        )
        .unwrap();
    }

    /// Binds pod `namespace/name` to `node` as the scheduler does (its `binding` subresource),
    /// for a cluster that runs no scheduler: `spec.nodeName` is then set without being recorded
    /// as written by any client in the pod's `managedFields`.
    pub fn bind(&self, namespace: &str, name: &str, node: &str) {
        let binding = serde_json::json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        });
        self.cluster
            .kubectl_run(
                User::Admin,
                &[
                    "create",
                    "--raw",
                    &format!("/api/v1/namespaces/{namespace}/pods/{name}/binding"),
                    "-f",
                    "-",
                ],
                Some(&binding.to_string()),
            )
            .unwrap_or_else(|e| panic!("could not bind pod {namespace}/{name} to {node}: {e:#}"));
    }

    /// A fresh namespace for one test.
    pub fn namespace(&self, prefix: &str) -> String {
        static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let name = format!("{prefix}-{}-{n}", std::process::id() % 10_000);
        self.kubectl(User::Admin, &["create", "namespace", &name])
            .unwrap();
        name
    }

    /// Gives alice the `view` role in `namespace` (and with it, read access to its operations).
    pub fn grant_alice_view(&self, namespace: &str) {
        self.kubectl(
            User::Admin,
            &[
                "create",
                "rolebinding",
                "alice-view",
                "--clusterrole=view",
                "--user=alice",
                "-n",
                namespace,
            ],
        )
        .unwrap();
    }

    /// Waits until OperationRuleSet `ruleset` watches its target (a minute: after an outage
    /// of kube-apiserver, the ruleset watch may be in its longest backoff, 30 s).
    pub fn wait_watching(&self, ruleset: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ors = self.get_json(User::Admin, &["get", "ors", ruleset]);
            if ors["status"]["watchActive"] == true {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "ruleset {ruleset} not watching after 60s: {:#}\nserver log:\n{}",
                ors["status"],
                self.server_log_tail(30)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Streams the watch events of the operations in `namespace` after `resource_version`.
    pub fn watch_ifos(&self, namespace: &str, resource_version: &str) -> WatchStream {
        self.watch(&format!(
            "/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{namespace}/inflightoperations\
             ?watch=true&resourceVersion={resource_version}"
        ))
    }

    /// Streams raw watch events of a path through kube-apiserver.
    pub fn watch(&self, path: &str) -> WatchStream {
        let mut child = self
            .cluster
            .kubectl(User::Admin)
            .args(["get", "--raw", path, "--request-timeout=0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line)
                    && tx.send((Instant::now(), v)).is_err()
                {
                    break;
                }
            }
        });
        WatchStream { child, rx }
    }

    /// curl arguments that present `user`'s client certificate (from its kubeconfig), issued by
    /// the cluster's client CA.
    pub fn client_cert_args(&self, user: User) -> Vec<String> {
        use base64::Engine;
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(self.cluster.kubeconfig(user)).unwrap()).unwrap();
        let creds = &config["users"][0]["user"];
        let mut args = Vec::new();
        for (field, flag, ext) in [
            ("client-certificate-data", "--cert", "crt"),
            ("client-key-data", "--key", "key"),
        ] {
            let pem = base64::engine::general_purpose::STANDARD
                .decode(creds[field].as_str().unwrap())
                .unwrap();
            let path = self
                .cluster
                .dir()
                .join(format!("client-{}.{ext}", user.name()));
            std::fs::write(&path, pem).unwrap();
            args.push(flag.to_string());
            args.push(path.display().to_string());
        }
        args
    }

    /// Calls our server directly, bypassing kube-apiserver: `(HTTP status, body)`. `extra` are
    /// more curl arguments (headers).
    pub fn direct(&self, path: &str, extra: &[&str]) -> (String, String) {
        self.direct_to(self.port, path, extra)
    }

    /// Calls our server's admission doors directly (their port, `ADMISSION_PORT`), as anyone on
    /// the network may: `(HTTP status, body)`. `extra` are more curl arguments.
    pub fn door(&self, path: &str, extra: &[&str]) -> (String, String) {
        self.direct_to(self.admission_port, path, extra)
    }

    /// [`Env::direct_to`] with the response's `Warning` headers: `(HTTP status, warnings,
    /// body)`; status `000` when nothing answered. `extra`: more curl arguments (a client
    /// certificate, from [`Env::client_cert_args`]).
    pub fn direct_warned(
        &self,
        port: u16,
        path: &str,
        extra: &[&str],
    ) -> (String, Vec<String>, String) {
        let headers = self.cluster.dir().join(format!(
            "headers-{}-{:?}.txt",
            std::process::id(),
            std::thread::current().id()
        ));
        let mut args = vec!["-D", headers.to_str().unwrap()];
        args.extend(extra);
        let (code, body) = self.direct_to(port, path, &args);
        let warnings = std::fs::read_to_string(&headers)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("warning")
                    .then(|| value.trim().to_owned())
            })
            .collect();
        (code, warnings, body)
    }

    /// [`Env::direct`] to another server of this cluster, listening on `port`.
    pub fn direct_to(&self, port: u16, path: &str, extra: &[&str]) -> (String, String) {
        let out = Command::new("curl")
            .args(["-s", "--max-time", "10", "-w", "\n%{http_code}", "--cacert"])
            .arg(&self.serving_ca)
            .args(extra)
            .arg(format!("https://127.0.0.1:{port}{path}"))
            .output()
            .expect("curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", ""));
        (code.to_string(), body.to_string())
    }

    /// Starts a [`KeepAliveClient`] against the server on `port`, as admin.
    pub fn keep_alive_client(
        &self,
        port: u16,
        path: &str,
        count: usize,
        per_second: u32,
    ) -> KeepAliveClient {
        let url = format!("https://127.0.0.1:{port}{path}");
        let child = Command::new("curl")
            .args(["-s", "--http2", "--max-time", "60", "--rate"])
            .arg(format!("{per_second}/s"))
            .args(["-w", "\nCONNECTS %{num_connects}\n", "--cacert"])
            .arg(&self.serving_ca)
            .args(self.client_cert_args(User::Admin))
            .args(std::iter::repeat_n(url, count))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("curl");
        KeepAliveClient(child)
    }
}

/// `curl` sending `count` requests at `per_second` over one kept-alive HTTP/2 connection (curl
/// reuses it while the server keeps it open).
pub struct KeepAliveClient(Child);

impl KeepAliveClient {
    /// Waits for the requests to finish; for each, how many connections it had to open.
    pub fn connects(self) -> Vec<u32> {
        let out = self.0.wait_with_output().expect("curl");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_prefix("CONNECTS ")?.trim().parse().ok())
            .collect()
    }
}

/// The status of the operation that the `MODIFIED` event among `events` (of a watch of
/// operations) completed: its phase `Completed`, when in `completed`; panics with the events if
/// none did.
pub fn completion(events: &[serde_json::Value]) -> &serde_json::Value {
    let completed = events
        .iter()
        .find(|e| e["type"] == "MODIFIED" && e["object"]["status"]["phase"] == "Completed")
        .unwrap_or_else(|| panic!("no Completed event: {events:#?}"));
    let status = &completed["object"]["status"];
    assert!(status["completed"].is_string(), "{completed:#}");
    status
}

/// The events of a raw watch ([`Env::watch`]), one JSON object each, with when each arrived;
/// the watch ends on drop.
pub struct WatchStream {
    child: Child,
    rx: mpsc::Receiver<(Instant, serde_json::Value)>,
}

impl WatchStream {
    /// Events until one satisfies `pred` (returned last), or panics after `timeout`.
    pub fn until(
        &self,
        timeout: Duration,
        what: &str,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> Vec<serde_json::Value> {
        self.until_timed(timeout, what, pred).0
    }

    /// Every event that arrived since the last read of this stream, and those that arrive
    /// within `window` from now.
    pub fn during(&self, window: Duration) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + window;
        let mut seen = Vec::new();
        while let Ok((_, ev)) = self
            .rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            seen.push(ev);
        }
        seen
    }

    /// The next event and when it arrived, waiting at most `timeout` for it.
    pub fn next(
        &self,
        timeout: Duration,
    ) -> Result<(Instant, serde_json::Value), mpsc::RecvTimeoutError> {
        self.rx.recv_timeout(timeout)
    }

    /// [`WatchStream::until`], with when the last event arrived (read off the stream, however
    /// late the caller asks): the time to compare two watches' views of one change.
    pub fn until_timed(
        &self,
        timeout: Duration,
        what: &str,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> (Vec<serde_json::Value>, Instant) {
        let deadline = Instant::now() + timeout;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok((arrived, ev)) => {
                    let done = pred(&ev);
                    seen.push(ev);
                    if done {
                        return (seen, arrived);
                    }
                }
                Err(e) => panic!("{e} while waiting for {what}; events seen: {seen:#?}"),
            }
        }
    }
}

impl Drop for WatchStream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
