//! Pods that start holding their node, on random nodes whose gate is clear, and how long each
//! took to show: in kube-apiserver's own watch of those pods (the floor, since the server learns
//! of a pod through the same kind of watch), and on the node's MaintenanceGate, watched through
//! kube-apiserver (the aggregation layer) as `kubectl wait` watches it.
//!
//! A node is flipped again only once its gate has been seen clear after the last flip ended
//! (the operation's debounce grace passed): each flip is a fresh operation on a clear gate.

use crate::pace::paced;
use crate::pods::{FLIP_LABEL, Kind, Layout, PROTECT, pending_status, running_status};
use crate::resume::watch_from;
use crate::stats::Summary;
use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use kube::core::Request;
use serde::Serialize;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The maintenance gates, through kube-apiserver.
pub(crate) const GATES: &str = "/apis/live.ifo.kubevirt.io/v1alpha1/maintenancegates";

/// Where a node is in its flips.
enum NodeState {
    /// Its gate was last seen clear (or it was never flipped).
    Clear,
    /// Its flipping pod holds it, since the write that made it so was sent.
    Holding(Flip),
    /// Its pod stopped holding it at this instant; it is clear again once its gate says so.
    Releasing(Instant),
}

/// One flip's times.
#[derive(Clone, Copy)]
struct Flip {
    sent: Instant,
    pod_event: Option<Instant>,
    on_gate: Option<Instant>,
    /// The latencies of this flip are recorded.
    recorded: bool,
}

/// What the flips and the watches saw since the last report (see [`Report`]).
#[derive(Default)]
struct Books {
    flips: u64,
    failed: u64,
    no_clear_node: u64,
    write_to_pod_event: Vec<Duration>,
    pod_event_to_gate: Vec<Duration>,
    write_to_gate: Vec<Duration>,
    release_to_clear: Vec<Duration>,
    gate_events: u64,
    unknown_gate_events: u64,
    first_unknown: Option<String>,
    relists: u64,
}

/// What the flips of a phase showed.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Report {
    pub rate_requested: f64,
    pub rate_achieved: f64,
    /// Flips made (a pod started holding its node).
    pub flips: u64,
    /// Writes that failed (no flip happened).
    pub failed: u64,
    /// Ticks that found every node busy with a flip (none made).
    pub no_clear_node: u64,
    /// Flips seen on their node's gate before the phase's end.
    pub seen_on_gate: u64,
    /// The write that made the pod hold → kube-apiserver's watch event of the pod.
    pub write_to_pod_event: Summary,
    /// The pod's own watch event → the node's gate not clear, naming it: the detection latency.
    pub pod_event_to_gate: Summary,
    /// The write → the node's gate not clear.
    pub write_to_gate: Summary,
    /// The write that made the pod stop holding → the node's gate clear again (the debounce
    /// grace included).
    pub release_to_clear: Summary,
    /// Node gate events the gate watch received, and of them those that read `Unknown`.
    pub gate_events: u64,
    pub unknown_gate_events: u64,
    /// Why the first node gate event that read `Unknown` did (its message).
    pub first_unknown: Option<String>,
    /// Times a watch (pods or gates) listed again.
    pub relists: u64,
}

/// The flips of a run: where each node is in them, and what was seen of them.
pub(crate) struct Flips {
    client: kube::Client,
    layout: Layout,
    hold: Duration,
    nodes: Mutex<Vec<NodeState>>,
    books: Mutex<Books>,
}

impl Flips {
    pub(crate) fn new(client: kube::Client, layout: Layout, hold: Duration) -> Arc<Flips> {
        Arc::new(Flips {
            client,
            layout,
            hold,
            nodes: Mutex::new((0..layout.nodes).map(|_| NodeState::Clear).collect()),
            books: Mutex::default(),
        })
    }

    /// Starts the two watches (the flipping pods, the gates) in `tasks`, and returns once both
    /// are open.
    pub(crate) async fn watch(self: &Arc<Self>, tasks: &mut JoinSet<()>) -> Result<()> {
        let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel(2);
        let flips = self.clone();
        let pods = Request::new(Api::<Pod>::all(self.client.clone()).resource_url());
        let selector = format!("{FLIP_LABEL}=true");
        tasks.spawn(follow(
            self.client.clone(),
            pods,
            Some(selector),
            ready_tx.clone(),
            self.clone(),
            move |event, at| flips.pod_event(event, at),
        ));
        let flips = self.clone();
        tasks.spawn(follow(
            self.client.clone(),
            Request::new(GATES),
            None,
            ready_tx,
            self.clone(),
            move |event, at| flips.gate_event(event, at),
        ));
        for _ in 0..2 {
            tokio::time::timeout(Duration::from_secs(60), ready_rx.recv())
                .await
                .ok()
                .flatten()
                .context("could not watch the flipping pods and the gates within 60 s")?;
        }
        Ok(())
    }

    /// Flips node `n` once and waits (at most `timeout`) until its gate has shown the flip and
    /// has been seen clear again; returns when the flip showed, or `None` (saying why) when it
    /// did not show within `timeout`. The books are emptied after it: it warms up, and proves
    /// the server has caught up with what came before.
    pub(crate) async fn first(
        self: &Arc<Self>,
        n: usize,
        timeout: Duration,
    ) -> Result<Option<Instant>> {
        let sent = Instant::now();
        self.nodes.lock().unwrap()[n] = NodeState::Holding(Flip::new(sent));
        let held = tokio::spawn(self.clone().hold_and_release(n));
        let shown = loop {
            if let NodeState::Holding(Flip {
                on_gate: Some(at), ..
            }) = self.nodes.lock().unwrap()[n]
            {
                break Some(at);
            }
            if sent.elapsed() > timeout {
                eprintln!(
                    "warning: the gate of {} did not show its pod holding it within {timeout:?}{}",
                    self.layout.node(n),
                    self.unknown_note()
                );
                break None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        held.await?;
        let released = Instant::now();
        while shown.is_some() && !self.clear(n) {
            if released.elapsed() > timeout {
                eprintln!(
                    "warning: the gate of {} was not clear again within {timeout:?}{}",
                    self.layout.node(n),
                    self.unknown_note()
                );
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        *self.books.lock().unwrap() = Books::default();
        Ok(shown)
    }

    /// `: a gate read Unknown: <why>` when one did since the books were emptied.
    fn unknown_note(&self) -> String {
        self.books
            .lock()
            .unwrap()
            .first_unknown
            .as_ref()
            .map_or(String::new(), |why| format!(": a gate read Unknown: {why}"))
    }

    fn clear(&self, n: usize) -> bool {
        matches!(self.nodes.lock().unwrap()[n], NodeState::Clear)
    }

    /// Flips random clear nodes `rate` times a second for `duration`; returns once every
    /// flipped pod has stopped holding its node, with the rate achieved.
    pub(crate) async fn drive(self: &Arc<Self>, rate: f64, duration: Duration) -> f64 {
        let mut holders = JoinSet::new();
        let achieved = paced(rate, duration, |_| {
            if let Some(n) = self.pick() {
                holders.spawn(self.clone().hold_and_release(n));
            } else {
                self.books.lock().unwrap().no_clear_node += 1;
            }
            std::future::ready(())
        })
        .await;
        holders.join_all().await;
        achieved
    }

    /// Waits (at most `settle`) until every node flipped has been seen clear again, and
    /// reports the flips since the last report (made at `rate`, `achieved`).
    pub(crate) async fn report(&self, rate: f64, achieved: f64, settle: Duration) -> Report {
        let deadline = Instant::now() + settle;
        while Instant::now() < deadline
            && self
                .nodes
                .lock()
                .unwrap()
                .iter()
                .any(|s| !matches!(s, NodeState::Clear))
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let books = std::mem::take(&mut *self.books.lock().unwrap());
        Report {
            rate_requested: rate,
            rate_achieved: achieved,
            flips: books.flips,
            failed: books.failed,
            no_clear_node: books.no_clear_node,
            seen_on_gate: books.write_to_gate.len() as u64,
            write_to_pod_event: Summary::of(books.write_to_pod_event),
            pod_event_to_gate: Summary::of(books.pod_event_to_gate),
            write_to_gate: Summary::of(books.write_to_gate),
            release_to_clear: Summary::of(books.release_to_clear),
            gate_events: books.gate_events,
            unknown_gate_events: books.unknown_gate_events,
            first_unknown: books.first_unknown,
            relists: books.relists,
        }
    }

    /// A random clear node, marked as holding from now on.
    fn pick(&self) -> Option<usize> {
        let mut nodes = self.nodes.lock().unwrap();
        let eligible = self.layout.flipped_nodes();
        let start = fastrand::usize(..eligible);
        let n = (start..eligible)
            .chain(0..start)
            .find(|&n| matches!(nodes[n], NodeState::Clear))?;
        nodes[n] = NodeState::Holding(Flip::new(Instant::now()));
        Some(n)
    }

    /// Makes node `n`'s flipping pod hold it (its state already `Holding` since the write's
    /// send time), and after `hold` makes it stop.
    async fn hold_and_release(self: Arc<Self>, n: usize) {
        let (namespace, name) = self.layout.flipping_pod(n);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let kind = self.layout.kind(n);
        if let Err(e) = write(&api, &name, kind, true).await {
            tracing::warn!(pod = %name, error = %format!("{e:#}"), "a flip failed");
            self.books.lock().unwrap().failed += 1;
            self.nodes.lock().unwrap()[n] = NodeState::Clear;
            return;
        }
        self.books.lock().unwrap().flips += 1;
        tokio::time::sleep(self.hold).await;
        self.nodes.lock().unwrap()[n] = NodeState::Releasing(Instant::now());
        if let Err(e) = write(&api, &name, kind, false).await {
            tracing::warn!(pod = %name, error = %format!("{e:#}"), "ending a flip failed");
        }
    }

    /// An event of kube-apiserver's watch of the flipping pods.
    fn pod_event(&self, event: WatchEvent<Value>, at: Instant) {
        let (WatchEvent::Added(pod) | WatchEvent::Modified(pod)) = event else {
            return;
        };
        let Some(n) = pod["spec"]["nodeName"]
            .as_str()
            .and_then(|node| self.layout.node_index(node))
        else {
            return;
        };
        let running = pod["status"]["phase"] == "Running";
        let holds = match self.layout.kind(n) {
            Kind::Job => running,
            Kind::Protected => running && pod["metadata"]["labels"][PROTECT] == "true",
        };
        let mut nodes = self.nodes.lock().unwrap();
        if let NodeState::Holding(flip) = &mut nodes[n]
            && holds
            && flip.pod_event.is_none()
        {
            flip.pod_event = Some(at);
            self.record(flip);
        }
    }

    /// An event of the gate watch.
    fn gate_event(&self, event: WatchEvent<Value>, at: Instant) {
        let (gate, (clear, why)) = match &event {
            WatchEvent::Added(g) | WatchEvent::Modified(g) => (g, clear_condition(g)),
            WatchEvent::Deleted(g) => (g, ("True", "")),
            _ => return,
        };
        let Some(n) = gate["metadata"]["name"]
            .as_str()
            .and_then(|name| name.strip_prefix("node."))
            .and_then(|node| self.layout.node_index(node))
        else {
            return;
        };
        let mut books = self.books.lock().unwrap();
        books.gate_events += 1;
        if clear == "Unknown" {
            books.unknown_gate_events += 1;
            books.first_unknown.get_or_insert_with(|| why.to_string());
        }
        drop(books);
        let mut nodes = self.nodes.lock().unwrap();
        match (&mut nodes[n], clear) {
            (NodeState::Holding(flip), "False") if flip.on_gate.is_none() => {
                flip.on_gate = Some(at);
                self.record(flip);
            }
            (NodeState::Releasing(since), "True") => {
                self.books
                    .lock()
                    .unwrap()
                    .release_to_clear
                    .push(at - *since);
                nodes[n] = NodeState::Clear;
            }
            _ => {}
        }
    }

    /// Records a flip's latencies once both its events are in.
    fn record(&self, flip: &mut Flip) {
        let (Some(pod_event), Some(on_gate)) = (flip.pod_event, flip.on_gate) else {
            return;
        };
        if std::mem::replace(&mut flip.recorded, true) {
            return;
        }
        let mut books = self.books.lock().unwrap();
        books.write_to_pod_event.push(pod_event - flip.sent);
        books
            .pod_event_to_gate
            .push(on_gate.saturating_duration_since(pod_event));
        books.write_to_gate.push(on_gate - flip.sent);
    }

    fn relisted(&self) {
        self.books.lock().unwrap().relists += 1;
    }
}

impl Flip {
    fn new(sent: Instant) -> Flip {
        Flip {
            sent,
            pod_event: None,
            on_gate: None,
            recorded: false,
        }
    }
}

/// The status and message of a gate's `Clear` condition (empty without one).
pub(crate) fn clear_condition(gate: &Value) -> (&str, &str) {
    let condition = gate["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Clear");
    let field = |name: &str| condition.and_then(|c| c[name].as_str()).unwrap_or("");
    (field("status"), field("message"))
}

/// Makes the pod `name` hold its node (`on`) or stop: a Job's pod starts, or goes back to
/// waiting for its container; a protected pod gets the protect label, or loses it.
async fn write(api: &Api<Pod>, name: &str, kind: Kind, on: bool) -> Result<()> {
    let params = PatchParams::default();
    match (kind, on) {
        (Kind::Job, on) => {
            let status = if on {
                running_status()
            } else {
                pending_status()
            };
            api.patch_status(name, &params, &Patch::Merge(&status))
                .await
        }
        (Kind::Protected, on) => {
            let value = if on { json!("true") } else { Value::Null };
            let patch = json!({"metadata": {"labels": {PROTECT: value}}});
            api.patch(name, &params, &Patch::Merge(&patch)).await
        }
    }
    .with_context(|| format!("flipping pod {name}"))?;
    Ok(())
}

/// Lists `request`'s collection (with the label `selector`) and watches it from the list's
/// resourceVersion until aborted: resumes after each timeout from the last resourceVersion
/// seen, lists again after `410 Expired` or a failure (told to `flips`). Hands every event to
/// `event` with the instant it arrived; signals `ready` once the first watch is open.
async fn follow(
    client: kube::Client,
    request: Request,
    selector: Option<String>,
    ready: tokio::sync::mpsc::Sender<()>,
    flips: Arc<Flips>,
    mut event: impl FnMut(WatchEvent<Value>, Instant) + Send,
) {
    let (mut list, mut watch) = (ListParams::default(), WatchParams::default().timeout(290));
    if let Some(s) = &selector {
        list = list.labels(s);
        watch = watch.labels(s);
    }
    let mut ready = Some(ready);
    let mut rv: Option<String> = None;
    loop {
        let from = match rv.take() {
            Some(rv) => rv,
            None => {
                let listed = match request.list(&list) {
                    Ok(list) => client
                        .request::<Value>(list)
                        .await
                        .map_err(anyhow::Error::from),
                    Err(e) => Err(e.into()),
                };
                match listed {
                    Ok(list) => {
                        if ready.is_none() {
                            flips.relisted();
                        }
                        list["metadata"]["resourceVersion"]
                            .as_str()
                            .unwrap_or("0")
                            .to_string()
                    }
                    Err(e) => {
                        tracing::warn!(error = %format!("{e:#}"), url = %request.url_path, "list failed; retrying");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        continue;
                    }
                }
            }
        };
        rv = watch_from(&client, &request, &watch, from, &mut ready, &mut event).await;
    }
}
