//! `ifo-apiserver serve`: wires the pipeline together and serves it ([`Server::build`], then
//! [`Server::run`]). Wiring only: every background task is owned by a [`Tasks`] set (see
//! [`crate::supervise`]), and there is one shutdown sequence.

mod leadership;
mod persistence;

use crate::admission;
use crate::admission::evictions::Evictions;
use crate::admission::node_events::NodeEvents;
use crate::api::{self, ApiState};
use crate::auth::{self, Authenticator, Authorizer, tls};
use crate::client::kube_client;
use crate::config::ServeArgs;
use crate::detect::{Detector, Health};
use crate::evaluate::Engine;
use crate::guard::{self, Guard};
use crate::index::Index;
use crate::inventory::pods::Pods;
use crate::inventory::{Inventory, Kind};
use crate::lease;
use crate::readiness::Readiness;
use crate::reconcile;
use crate::supervise::Tasks;
use crate::track::{Settings as TrackSettings, Tracker};
use crate::watch::{InitialList, Liveness, Watches};
use anyhow::{Context, Result};
use axum_server::tls_rustls::RustlsConfig;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use leadership::{follow_leadership, follow_role};
use persistence::restore;

/// How often active operations' expected ends and overdue stalls are brought up to date.
const EXPECTATIONS_INTERVAL: Duration = Duration::from_secs(5);

/// Serves until SIGTERM or Ctrl-C.
pub async fn serve(args: ServeArgs) -> Result<()> {
    Server::build(args).await?.run(shutdown_signal()).await
}

/// The server, built: its pipeline running under [`Tasks`], its API ready to be served.
pub(crate) struct Server {
    args: ServeArgs,
    tasks: Tasks,
    state: Arc<ApiState>,
    readiness: Readiness,
    app: axum::Router,
    tls_config: RustlsConfig,
    /// With leader election: how to stop the elector, and when it has stopped.
    elector: Option<Elector>,
    /// Notified when a term as leader ends.
    term_ended: Arc<tokio::sync::Notify>,
}

/// The running leader elector, as the shutdown sequence needs it.
struct Elector {
    stop: tokio::sync::oneshot::Sender<()>,
    stopped: tokio::sync::oneshot::Receiver<()>,
}

impl Server {
    /// Connects to the cluster, reads the persisted copies back (persistence mode) and starts
    /// the pipeline (rulesets → watchers → evaluator → debounce table → index) and, with
    /// leader election, the elector. Serving starts with [`Server::run`].
    pub async fn build(args: ServeArgs) -> Result<Server> {
        let start = std::time::Instant::now();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let election = args.leader_election()?;
        let client = kube_client(&args).await?;
        let (trust, trust_watch) = auth::read_request_header_config(client.clone()).await?;
        let callers = auth::AdmissionCallers::from_settings(
            &args.admission_allowed_names,
            args.admission_client_ca_file.as_deref(),
        )?;
        let tls_config = RustlsConfig::from_config(tls::server_config(
            &args.tls_cert_file,
            &args.tls_private_key_file,
            &trust.borrow(),
            &callers,
        )?);
        let reloader = tls::Reloader::new(
            tls_config.clone(),
            args.tls_cert_file.clone(),
            args.tls_private_key_file.clone(),
            trust.clone(),
            callers.clone(),
        );

        let (readiness, rulesets_listed) = Readiness::new("the list of OperationRuleSets");
        let mut tasks = Tasks::new(readiness.clone());
        // What authenticates callers follows its sources: the front-proxy trust settings their
        // ConfigMap, the TLS configuration those settings and the certificate files.
        tasks.restarting("trust-settings", move || trust_watch.clone().follow());
        tasks.restarting("tls-reloader", move || reloader.clone().run());
        let sync_timeout = args.initial_sync_timeout;
        tasks.once(
            "initial-sync-timeout",
            readiness.clone().give_up_after(sync_timeout),
        );
        tasks.once("initial-sync-report", {
            let readiness = readiness.clone();
            async move {
                readiness.wait().await;
                crate::metrics::started(crate::metrics::StartStage::Ready, start.elapsed());
                readiness.synced().await;
                tracing::info!(after = ?start.elapsed(), "initial sync complete");
                crate::metrics::started(crate::metrics::StartStage::Complete, start.elapsed());
            }
        });
        let base_rv = jiff::Timestamp::now().as_microsecond().max(1) as u64;
        let index = Arc::new(
            Index::new(base_rv, args.event_history, args.watch_buffer)
                .with_history_bytes(args.event_history_mib.saturating_mul(1 << 20)),
        );
        crate::metrics::serve_active_from(index.reader());
        let tracker = Tracker::new(TrackSettings {
            debounce: args.debounce_threshold,
            retain_completed: args.retain_completed_ifos,
            completed_retention: args.completed_retention,
            max_completed: args.max_completed_ifos,
        });
        // What detection knows of itself (where it is not current, what each ruleset hit):
        // written by the watchers and the detector, read by the API (and gates) and the
        // rulesets' status.
        let targets = Arc::new(Health::default());
        tasks.restarting("feed-freshness-reporter", {
            let (targets, index, readiness) = (targets.reader(), index.clone(), readiness.clone());
            move || targets.clone().report_to(index.clone(), readiness.clone())
        });
        let detector = Arc::new(Detector::new(
            tracker,
            index.clone(),
            targets.clone(),
            args.evaluation_limits(),
        ));
        tasks.restarting("operation-deadlines", {
            let detector = detector.clone();
            move || detector.clone().run_deadlines()
        });
        tasks.restarting("operation-expectations", {
            let detector = detector.clone();
            move || detector.clone().run_expectations(EXPECTATIONS_INTERVAL)
        });
        crate::metrics::serve_learned_from(detector.durations.clone());
        let persistence = if args.persist {
            Some(restore(&args, &client, &detector, &readiness, &mut tasks).await?)
        } else {
            None
        };
        let retry = Duration::from_secs(args.requeue_interval.as_secs().max(1));
        let probe_interval = args.watch_probe_interval.max(Duration::from_secs(1));
        let liveness = Liveness {
            probe_interval,
            probe_timeout: crate::client::api_timeout(&args),
        };
        let initial_list = if args.streaming_lists {
            InitialList::Streaming
        } else {
            InitialList::Paged
        };
        let watches = Arc::new(Watches::new(
            client.clone(),
            detector.clone(),
            targets.clone(),
            retry,
            initial_list,
            liveness,
            readiness.clone(),
        ));
        // Ruleset statuses are written by the leader only: replicas learn durations each on its
        // own, and two writers would overwrite each other's.
        let (leading_tx, leading) = tokio::sync::watch::channel(election.is_none());
        // One CEL environment for the controller and the admission door, so that a ruleset the
        // door lets through is one the controller compiles.
        let engine = Engine::new();
        let status_interval = args.ruleset_status_interval.max(Duration::from_secs(1));
        tasks.restarting("ruleset-controller", {
            let (client, detector, engine) = (client.clone(), detector.clone(), engine.clone());
            // The first run releases readiness once the rulesets are listed; a later one (after a
            // failure) lists them again while the server serves.
            let mut listed = Some(rulesets_listed);
            move || {
                reconcile::run(
                    client.clone(),
                    engine.clone(),
                    watches.clone(),
                    detector.clone(),
                    listed.take(),
                    leading.clone(),
                    status_interval,
                )
            }
        });

        // The names of the cluster's nodes and namespaces: the gates of those it does not have
        // do not exist.
        let inventory = Arc::new(Inventory::default());
        for kind in [Kind::Node, Kind::Namespace] {
            let (inventory, client) = (inventory.clone(), client.clone());
            tasks.restarting(kind.task(), move || {
                inventory.clone().follow(client.clone(), kind)
            });
        }
        tasks.restarting("gate-existence-reporter", {
            let (inventory, index) = (inventory.clone(), index.clone());
            move || inventory.clone().report_to(index.clone())
        });

        // The maintenance guard's facts besides the gates: where each pod runs.
        let pods = args.eviction_guard.then(|| {
            let pods = Arc::new(Pods::default());
            let (pods_, client) = (pods.clone(), client.clone());
            tasks.restarting("pod-nodes", move || pods_.clone().follow(client.clone()));
            pods
        });

        let limits = api::Limits {
            max_watches: args.max_watches,
            max_watches_per_user: args.max_watches_per_user,
            max_watch_bytes: args.max_watch_memory,
            max_watch_bytes_per_user: args.max_watch_memory_per_user,
        };
        let state = Arc::new(
            ApiState::new(index.reader(), readiness.clone(), limits)
                .with_freshness(targets.reader())
                .with_inventory(inventory.clone()),
        );
        // Who may call the admission doors, and the turns of those who have not proven it.
        let intake = Arc::new(admission::Intake::new(callers, trust.clone()));
        let evictions = match pods {
            Some(pods) => {
                let instance = args
                    .pod_name
                    .clone()
                    .unwrap_or_else(|| "ifo-apiserver".to_owned());
                let (events, writer) =
                    NodeEvents::new(client.clone(), instance, crate::client::api_timeout(&args));
                tasks.once("guard-events", writer);
                tracing::info!(
                    path = admission::EVICTIONS_PATH,
                    when_unknown = ?args.guard_when_unknown,
                    "the maintenance guard answers reviews of evictions"
                );
                Some(Evictions {
                    api: state.clone(),
                    inventory: inventory.clone(),
                    pods,
                    when_unknown: args.guard_when_unknown,
                    events,
                    intake: intake.clone(),
                })
            }
            None => None,
        };
        let gates = state.clone();
        crate::metrics::serve_gates_from(move || gates.maintenance_gates());
        let gate = Arc::new(Guard {
            authenticator: Authenticator::new(trust.clone(), client.clone()),
            authorizer: Authorizer::new(client.clone()),
        });
        let term_ended = Arc::new(tokio::sync::Notify::new());
        let elector = match election {
            None => {
                state.set_serving(true);
                if let Some(persistence) = persistence {
                    let reader = index.reader();
                    // The copies read at start the first time; read again after a failure.
                    let mut found = Some(persistence.found);
                    let writer = persistence.writer;
                    tasks.restarting("persistence-writer", move || {
                        writer.clone().run(found.take(), reader.clone())
                    });
                }
                None
            }
            Some(settings) => {
                state.set_serving(false);
                let (namespace, lease_name) = (settings.namespace.clone(), settings.name.clone());
                let (elector, role) = lease::Elector::new(client.clone(), settings);
                tasks.once("leader-role", follow_role(role.clone(), leading_tx));
                if let Some(pod) = &args.pod_name {
                    let label =
                        lease::LeaderLabel::new(client.clone(), &namespace, pod, &lease_name);
                    let role = role.clone();
                    tasks.restarting("leader-label", move || label.clone().follow(role.clone()));
                }
                let (stop, stop_asked) = tokio::sync::oneshot::channel();
                let (stopped_tx, stopped) = tokio::sync::oneshot::channel();
                // A replica whose elector is gone must not go on as if it led: essential.
                tasks.essential("leader-elector", async move {
                    elector.run(stop_asked).await;
                    let _ = stopped_tx.send(());
                });
                tasks.essential(
                    "leadership",
                    follow_leadership(
                        role,
                        index.clone(),
                        state.clone(),
                        persistence.map(|p| p.writer),
                        term_ended.clone(),
                    ),
                );
                Some(Elector { stop, stopped })
            }
        };
        // Only the routes the server has are guarded: any other path is a 404 for everyone, and
        // never costs a review or a cache entry. The admission doors are not: kube-apiserver
        // calls webhooks without credentials, and a door reveals nothing but whether the object
        // it is sent compiles (see `admission`).
        let app = api::router(state.clone())
            .route_layer(axum::middleware::from_fn_with_state(gate, guard::guard))
            .merge(api::health_router(state.clone()))
            .merge(admission::router(engine, evictions, intake));
        Ok(Server {
            args,
            tasks,
            state,
            readiness,
            app,
            tls_config,
            elector,
            term_ended,
        })
    }

    /// Serves until `shutdown` resolves, then shuts down in one sequence: hand the Lease over,
    /// fail `/readyz`, end open watches and connections, stop every background task.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        let listener = Arc::new(Listener::default());
        // The shutdown sequence waits for the signal beside the listener it closes; it ends
        // the server, so nothing outlives it to own it.
        #[allow(clippy::disallowed_methods)]
        tokio::spawn(shut_down(
            shutdown,
            ShutdownSequence {
                state: self.state.clone(),
                readiness: self.readiness,
                listener: listener.clone(),
                elector: self.elector,
                delay: self.args.shutdown_delay,
                stopping: self.tasks.stopping(),
            },
        ));
        let served = accept(
            &self.args,
            self.app,
            self.tls_config,
            &listener,
            &self.term_ended,
        )
        .await;
        self.tasks.shutdown().await;
        served
    }
}

/// What the shutdown sequence acts on.
struct ShutdownSequence {
    state: Arc<ApiState>,
    readiness: Readiness,
    listener: Arc<Listener>,
    elector: Option<Elector>,
    /// How long `/readyz` fails before connections close (without leader election).
    delay: Duration,
    /// Cancelled when the sequence begins: essential tasks that end after it were asked to.
    stopping: tokio_util::sync::CancellationToken,
}

/// Waits for `signal`, then shuts the server down in order.
async fn shut_down(signal: impl Future<Output = ()>, s: ShutdownSequence) {
    signal.await;
    s.stopping.cancel();
    s.listener.stopping.store(true, Ordering::SeqCst);
    let delay = match s.elector {
        Some(Elector { stop, stopped }) => {
            let was_leading = s.state.is_serving();
            // Stop serving, release the Lease and wait for the next leader, so that it
            // starts at once.
            let _ = stop.send(());
            let _ = tokio::time::timeout(Duration::from_secs(10), stopped).await;
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
        None => s.delay,
    };
    // Fail /readyz first and keep serving meanwhile, so endpoints and the aggregator move
    // away before streams end; then end every watch cleanly (its stream closes, and
    // clients resume with their last resourceVersion).
    tracing::info!(delay = ?delay, "shutting down: not ready any more");
    s.readiness.shut_down();
    tokio::time::sleep(delay).await;
    tracing::info!("shutting down: ending open watches and requests");
    s.state.end_watches();
    s.listener.close(Duration::from_secs(5));
}

/// Accepts connections until the shutdown sequence closed the listener; listens again after a
/// term as leader ends (its connections closed).
async fn accept(
    args: &ServeArgs,
    app: axum::Router,
    tls_config: RustlsConfig,
    listener: &Listener,
    term_ended: &tokio::sync::Notify,
) -> Result<()> {
    let addr = SocketAddr::new(args.bind_address, args.secure_port);
    let deadlines = auth::connection::Deadlines {
        first_request: args.request_header_timeout,
        idle: auth::connection::IDLE_TIMEOUT,
    };
    let limits = auth::budget::Limits {
        proven: args.max_connections,
        anonymous: args.max_anonymous_connections,
    };
    let acceptor = tls::PeerCertAcceptor::new(tls_config, limits, deadlines);
    loop {
        let handle = axum_server::Handle::new();
        *listener.handle.lock() = handle.clone();
        if listener.stopping.load(Ordering::SeqCst) {
            return Ok(());
        }
        tracing::info!(%addr, "serving live.ifo.kubevirt.io");
        let mut server = axum_server::bind(addr)
            .acceptor(acceptor.clone())
            .handle(handle.clone());
        front_door(server.http_builder(), deadlines.first_request);
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
    handle: parking_lot::Mutex<axum_server::Handle<SocketAddr>>,
    stopping: AtomicBool,
}

impl Listener {
    /// Closes the current listener and its connections, waiting up to `grace` for requests.
    fn close(&self, grace: Duration) {
        self.handle.lock().graceful_shutdown(Some(grace));
    }
}

/// HTTP limits in front of everything, as kube-apiserver sets them: a client gets
/// `header_timeout` to send its request headers (and an idle HTTP/1 connection closes after as
/// long; the connection's own deadlines are in [`crate::auth::connection`]), headers up to
/// 1 MiB (HTTP/1 and HTTP/2 alike: requests the aggregator forwards carry long selectors and
/// identity headers), and HTTP/2 connections are pinged so that dead peers are noticed.
fn front_door(
    http: &mut hyper_util::server::conn::auto::Builder<hyper_util::rt::TokioExecutor>,
    header_timeout: Duration,
) {
    const MAX_HEADER_BYTES: usize = 1 << 20;
    http.http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout)
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
