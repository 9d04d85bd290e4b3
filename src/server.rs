//! `ifo-apiserver serve`: wires the pipeline together and serves it. Wiring only.

use crate::api::{self, ApiState};
use crate::auth::{self, Authenticator, Authorizer, tls};
use crate::client::kube_client;
use crate::config::ServeArgs;
use crate::evaluate::Engine;
use crate::guard::{self, Guard};
use crate::index::Index;
use crate::lease;
use crate::persist;
use crate::readiness::Readiness;
use crate::reconcile;
use crate::track::{Settings as TrackSettings, Tracker};
use crate::watch::{Detector, Health, Liveness, TargetHealth, Watches};
use anyhow::{Context, Result};
use axum_server::tls_rustls::RustlsConfig;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

/// How often active operations' expected ends and overdue stalls are brought up to date.
const EXPECTATIONS_INTERVAL: Duration = Duration::from_secs(5);

/// Serves until SIGTERM or Ctrl-C.
pub async fn serve(args: ServeArgs) -> Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let election = args.leader_election().map_err(anyhow::Error::msg)?;
    let client = kube_client(&args).await?;
    let trust = auth::watch_request_header_config(client.clone()).await?;
    let tls_config = RustlsConfig::from_config(tls::server_config(
        &args.tls_cert_file,
        &args.tls_private_key_file,
        &trust.borrow(),
    )?);
    tls::spawn_reloader(
        tls_config.clone(),
        args.tls_cert_file.clone(),
        args.tls_private_key_file.clone(),
        trust.clone(),
    );

    // The pipeline: rulesets → watchers → evaluator → debounce table → index.
    let (readiness, rulesets_listed) = Readiness::new("the list of OperationRuleSets");
    let sync_timeout = args.initial_sync_timeout.unsigned_abs();
    tokio::spawn(readiness.clone().give_up_after(sync_timeout));
    let base_rv = jiff::Timestamp::now().as_microsecond().max(1) as u64;
    let index = Arc::new(Index::new(base_rv, args.event_history, args.watch_buffer));
    crate::metrics::serve_active_from(index.reader());
    let tracker = Tracker::new(TrackSettings {
        debounce: args.debounce_threshold,
        retain_completed: args.retain_completed_ifos,
        completed_retention: args.completed_retention,
        max_completed: args.max_completed_ifos,
    });
    let detector = Arc::new(Detector::new(
        tracker,
        index.clone(),
        Arc::new(Health::default()),
        args.evaluation_limits(),
    ));
    tokio::spawn(detector.clone().run_deadlines());
    tokio::spawn(detector.clone().run_expectations(EXPECTATIONS_INTERVAL));
    crate::metrics::serve_learned_from(detector.durations.clone());
    let persistence = if args.persist {
        Some(restore(&args, &client, &detector, &readiness).await?)
    } else {
        None
    };
    let retry = Duration::from_secs(args.requeue_interval.as_secs().max(1) as u64);
    let targets = Arc::new(TargetHealth::default());
    let probe_interval = args
        .watch_probe_interval
        .unsigned_abs()
        .max(Duration::from_secs(1));
    let liveness = Liveness {
        probe_interval,
        probe_timeout: crate::client::api_timeout(&args),
    };
    let watches = Arc::new(Watches::new(
        client.clone(),
        detector.clone(),
        targets.clone(),
        retry,
        liveness,
        readiness.clone(),
    ));
    // Ruleset statuses are written by the leader only: replicas learn durations each on its
    // own, and two writers would overwrite each other's.
    let (leading_tx, leading) = tokio::sync::watch::channel(election.is_none());
    tokio::spawn(reconcile::run(
        client.clone(),
        Engine::new(),
        watches,
        detector,
        rulesets_listed,
        leading,
    ));

    let limits = api::Limits {
        max_watches: args.max_watches,
        max_watches_per_user: args.max_watches_per_user,
    };
    let state =
        Arc::new(ApiState::new(index.reader(), readiness.clone(), limits).with_freshness(targets));
    let gate = Arc::new(Guard {
        authenticator: Authenticator::new(trust, client.clone()),
        authorizer: Authorizer::new(client.clone()),
    });
    // Only the routes the server has are guarded: any other path is a 404 for everyone, and
    // never costs a review or a cache entry.
    let term_ended = Arc::new(tokio::sync::Notify::new());
    let elector = match election {
        None => {
            state.set_serving(true);
            if let Some(persistence) = persistence {
                tokio::spawn(persistence.run(index.reader()));
            }
            None
        }
        Some(settings) => {
            state.set_serving(false);
            let (namespace, lease_name) = (settings.namespace.clone(), settings.name.clone());
            let (elector, role) = lease::Elector::new(client.clone(), settings);
            tokio::spawn(follow_role(role.clone(), leading_tx));
            if let Some(pod) = &args.pod_name {
                let label = lease::LeaderLabel::new(client.clone(), &namespace, pod, &lease_name);
                tokio::spawn(label.follow(role.clone()));
            }
            let (stop, stopped) = tokio::sync::oneshot::channel();
            let task = tokio::spawn(elector.run(stopped));
            tokio::spawn(follow_leadership(
                role,
                index.clone(),
                state.clone(),
                persistence,
                term_ended.clone(),
            ));
            Some((stop, task))
        }
    };
    let app = api::router(state.clone())
        .route_layer(axum::middleware::from_fn_with_state(gate, guard::guard))
        .merge(api::health_router(state.clone()));

    let addr = SocketAddr::new(args.bind_address, args.secure_port);
    let listener = Arc::new(Listener::default());
    let delay = args.shutdown_delay.unsigned_abs();
    let (stopping, closing) = (state.clone(), listener.clone());
    tokio::spawn(async move {
        shutdown_signal().await;
        closing.stopping.store(true, Ordering::SeqCst);
        let delay = match elector {
            Some((stop, task)) => {
                let was_leading = stopping.is_serving();
                // Stop serving, release the Lease and wait for the next leader, so that it
                // starts at once.
                let _ = stop.send(());
                let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
                // The Service stopped routing new connections here when the pod began
                // terminating; what is left are connections made before, which would stay
                // with this replica. Give proxies a moment to route to the new leader, then
                // close them so that clients reconnect there.
                if was_leading {
                    HANDOVER_GRACE
                } else {
                    Duration::ZERO
                }
            }
            None => delay,
        };
        // Fail /readyz first and keep serving meanwhile, so endpoints and the aggregator move
        // away before streams end; then end every watch cleanly (its stream closes, and
        // clients resume with their last resourceVersion).
        tracing::info!(delay = ?delay, "shutting down: not ready any more");
        readiness.shut_down();
        tokio::time::sleep(delay).await;
        tracing::info!("shutting down: ending open watches and requests");
        stopping.end_watches();
        closing.close(Duration::from_secs(5));
    });
    let acceptor = tls::PeerCertAcceptor::new(tls_config, args.max_connections);
    loop {
        let handle = axum_server::Handle::new();
        *listener
            .handle
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = handle.clone();
        if listener.stopping.load(Ordering::SeqCst) {
            return Ok(());
        }
        tracing::info!(%addr, "serving live.ifo.kubevirt.io");
        let mut server = axum_server::bind(addr)
            .acceptor(acceptor.clone())
            .handle(handle.clone());
        front_door(server.http_builder());
        let serving = server.serve(app.clone().into_make_service());
        tokio::pin!(serving);
        tokio::select! {
            served = &mut serving => {
                return served.with_context(|| format!("serving on {addr}"));
            }
            () = term_ended.notified() => {
                if listener.stopping.load(Ordering::SeqCst) {
                    // Shutting down: the shutdown task closes the connections, after handing
                    // the Lease over.
                    return serving.await.with_context(|| format!("serving on {addr}"));
                }
                // A leader that stopped leading: clients that reached it through the Service
                // would keep their connections (an HTTP/2 connection carries every request of
                // kube-apiserver's proxy) and get 503 for ever. Close them, so that they
                // reconnect and reach the new leader; then listen again for probes and scrapes.
                tracing::info!("the term ended: closing every connection");
                handle.graceful_shutdown(Some(Duration::from_secs(2)));
                serving.await.with_context(|| format!("serving on {addr}"))?;
            }
        }
    }
}

/// How long a leader that handed over on SIGTERM keeps its connections open before it closes
/// them: kube-proxy rewrites its rules at most once a second (its default minimum sync
/// period), so after this clients that reconnect reach the new leader.
const HANDOVER_GRACE: Duration = Duration::from_secs(2);

/// The listener of the moment: replaced when a term ends (its connections closed), closed for
/// good on shutdown.
#[derive(Default)]
struct Listener {
    handle: std::sync::Mutex<axum_server::Handle<SocketAddr>>,
    stopping: AtomicBool,
}

impl Listener {
    /// Closes the current listener and its connections, waiting up to `grace` for requests.
    fn close(&self, grace: Duration) {
        self.handle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .graceful_shutdown(Some(grace));
    }
}

/// Persistence mode: reads the copies back into the pipeline before anything is evaluated, so
/// operations keep their identities; the writer starts later (at once, or with each term as
/// leader). Restored operations that nothing confirmed by a debounce threshold after the
/// initial sync ended while the server was down, and complete then.
async fn restore(
    args: &ServeArgs,
    client: &kube::Client,
    detector: &Arc<Detector>,
    readiness: &Readiness,
) -> Result<Persistence> {
    let api = persist::api(client.clone());
    let timeout = args.initial_sync_timeout.unsigned_abs();
    let found = read_back(&api, timeout).await?;
    let refused = detector.restore(found.records.clone());
    tracing::info!(
        copies = found.copies.len(),
        restored = found.records.len() - refused.len(),
        "persisted operations read back"
    );
    let (detector, readiness) = (detector.clone(), readiness.clone());
    let grace = args.debounce_threshold.unsigned_abs();
    tokio::spawn(async move {
        readiness.wait().await;
        tokio::time::sleep(grace).await;
        detector.sweep_restored();
    });
    Ok(Persistence {
        api,
        settings: args.persist_settings(),
        found: Some(found),
        timeout,
    })
}

/// The copies in the cluster. A missing CRD or a 403 fails at once (they need an admin);
/// anything else is retried for `timeout`.
async fn read_back(
    api: &kube::Api<kube::api::DynamicObject>,
    timeout: Duration,
) -> Result<persist::ReadBack> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match persist::read_back(api).await {
            Ok(found) => return Ok(found),
            Err(e @ (persist::Error::NotInstalled(_) | persist::Error::Forbidden(_))) => {
                return Err(e.into());
            }
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::warn!(error = %e, "retrying in 2s");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// What the persistence writer starts from.
struct Persistence {
    api: kube::Api<kube::api::DynamicObject>,
    settings: persist::Settings,
    /// The copies read at start. A later term as leader reads them again: the previous leader
    /// wrote meanwhile.
    found: Option<persist::ReadBack>,
    timeout: Duration,
}

impl Persistence {
    /// This term's writer: the copies read at start the first time, read again after.
    fn term(&mut self) -> Persistence {
        Persistence {
            api: self.api.clone(),
            settings: self.settings,
            found: self.found.take(),
            timeout: self.timeout,
        }
    }

    /// Writes copies until the index is gone (or the task is aborted).
    async fn run(self, index: crate::index::IndexReader) {
        let found = match self.found {
            Some(found) => found,
            None => match read_back(&self.api, self.timeout).await {
                Ok(found) => found,
                Err(e) => {
                    tracing::error!(error = %e, "cannot read the persisted copies back; not writing them this term");
                    return;
                }
            },
        };
        persist::Writer::new(self.api, self.settings, found)
            .run(index)
            .await;
    }
}

/// Serves while this replica leads. Each term, the index starts a new epoch (RVs handed out
/// by other replicas become too old) before requests are answered, and the persistence writer
/// runs; when the term ends, requests get 503, open watches end and the writer stops.
async fn follow_leadership(
    mut role: tokio::sync::watch::Receiver<lease::Role>,
    index: Arc<Index>,
    state: Arc<ApiState>,
    mut persistence: Option<Persistence>,
    term_ended: Arc<tokio::sync::Notify>,
) {
    let mut writer: Option<tokio::task::JoinHandle<()>> = None;
    loop {
        let leading = *role.borrow_and_update() == lease::Role::Leading;
        if leading && !state.is_serving() {
            let now = u64::try_from(jiff::Timestamp::now().as_microsecond()).unwrap_or(0);
            let rv = index.begin_epoch(now);
            state.set_serving(true);
            tracing::info!(resource_version = rv, "serving as the leader");
            if let Some(p) = persistence.as_mut() {
                writer = Some(tokio::spawn(p.term().run(index.reader())));
            }
        } else if !leading && state.is_serving() {
            tracing::info!("not serving: this replica does not lead");
            stand_down(&state, &mut writer);
            term_ended.notify_one();
        }
        if role.changed().await.is_err() {
            // The elector stopped (shutdown): it stopped leading first.
            stand_down(&state, &mut writer);
            return;
        }
    }
}

/// Tells `leading` whether this replica leads, until the elector stops.
async fn follow_role(
    mut role: tokio::sync::watch::Receiver<lease::Role>,
    leading: tokio::sync::watch::Sender<bool>,
) {
    loop {
        let _ = leading.send(*role.borrow_and_update() == lease::Role::Leading);
        if role.changed().await.is_err() {
            let _ = leading.send(false);
            return;
        }
    }
}

/// Ends a term: requests get 503, open watches end, the persistence writer stops.
fn stand_down(state: &ApiState, writer: &mut Option<tokio::task::JoinHandle<()>>) {
    state.set_serving(false);
    if let Some(w) = writer.take() {
        w.abort();
    }
}

/// HTTP limits in front of everything, as kube-apiserver sets them: a client gets 10 s to send
/// its request headers (and an idle HTTP/1 connection closes after as long), headers up to
/// 1 MiB (HTTP/1 and HTTP/2 alike: requests the aggregator forwards carry long selectors and
/// identity headers), and HTTP/2 connections are pinged so that dead peers are noticed.
fn front_door(http: &mut hyper_util::server::conn::auto::Builder<hyper_util::rt::TokioExecutor>) {
    const MAX_HEADER_BYTES: usize = 1 << 20;
    http.http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(Duration::from_secs(10))
        .max_buf_size(MAX_HEADER_BYTES + 8 * 1024);
    http.http2()
        .timer(hyper_util::rt::TokioTimer::new())
        .max_header_list_size(MAX_HEADER_BYTES as u32)
        .max_concurrent_streams(1000)
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(20));
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
