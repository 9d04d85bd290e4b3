//! `ifo-apiserver serve`: wires the pipeline together and serves it ([`Server::build`], then
//! [`Server::run`]). Wiring only: every background task is owned by a [`Tasks`] set (see
//! [`crate::supervise`]), and there is one shutdown sequence.

mod health;
mod leadership;
mod persistence;
mod pipeline;
mod serving;
mod sources;

use crate::api::ApiState;
use crate::auth::budget::Port;
use crate::auth::{self, tls};
use crate::config::ServeArgs;
use crate::readiness::Readiness;
use crate::supervise::Tasks;
use anyhow::{Context, Result};
use axum_server::tls_rustls::RustlsConfig;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use leadership::{Elector, Leadership, lead};
use pipeline::Pipeline;
use serving::Serving;
use sources::Sources;

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
    /// The API's routes and the admission doors' (see [`Serving`]).
    routes: (axum::Router, axum::Router),
    tls_config: RustlsConfig,
    /// What proves a connection to the doors' port in its handshake.
    doors_proof: tls::HandshakeProof,
    /// With leader election: how to stop the elector, and when it has stopped.
    elector: Option<Elector>,
    /// Changes when a term as leader ends.
    term_ended: tokio::sync::watch::Receiver<u64>,
}

impl Server {
    /// Builds the server in phases, each one's tasks running under [`Tasks`] from then on:
    /// reads what it starts from ([`Sources`]), starts the pipeline (rulesets → watchers →
    /// evaluator → debounce table → index, with the persisted copies read back first in
    /// persistence mode: [`Pipeline`]), makes what answers requests ([`Serving`]) and decides
    /// who serves (with leader election, the elector: [`lead`]). Serving starts with
    /// [`Server::run`], which ends with the shutdown sequence.
    pub(crate) async fn build(args: ServeArgs) -> Result<Server> {
        let start = std::time::Instant::now();
        let ports = [args.secure_port, args.admission_port, args.health_port];
        anyhow::ensure!(
            ports[0] != ports[1] && ports[1] != ports[2] && ports[0] != ports[2],
            "SECURE_PORT ({}), ADMISSION_PORT ({}) and HEALTH_PORT ({}) must differ: each is a \
             listener of its own",
            ports[0],
            ports[1],
            ports[2]
        );
        let sources = Sources::read(&args).await?;
        let (readiness, rulesets_listed) = Readiness::new("the list of OperationRuleSets");
        let mut tasks = Tasks::new(readiness.clone());
        // What authenticates callers follows its sources: the front-proxy trust settings their
        // ConfigMap, the TLS configuration those settings and the certificate files.
        let (trust_watch, reloader) = (sources.trust_watch.clone(), sources.reloader.clone());
        tasks.restarting("trust-settings", move || trust_watch.clone().follow());
        tasks.restarting("tls-reloader", move || reloader.clone().run());
        if let Some(keeper) = sources.certificates.clone() {
            tasks.restarting("serving-certificate", move || keeper.clone().run());
        }
        report_start(&mut tasks, &readiness, args.initial_sync_timeout, start);
        // Ruleset statuses are written by the leader only: replicas learn durations each on its
        // own, and two writers would overwrite each other's.
        let (leading_tx, leading) = tokio::sync::watch::channel(sources.election.is_none());
        let mut pipeline = Pipeline::start(
            &args,
            &sources.client,
            &readiness,
            rulesets_listed,
            leading,
            &mut tasks,
        )
        .await?;
        let serving = Serving::build(&args, &sources, &pipeline, &readiness, &mut tasks)?;
        let probes =
            health::HealthListener::bind(SocketAddr::new(args.bind_address, args.health_port))
                .await?;
        let routes = crate::api::health_router(serving.state.clone());
        tasks.essential("probe-listener", probes.serve(routes));
        let Leadership {
            elector,
            term_ended,
        } = lead(
            &args,
            sources.election,
            &sources.client,
            &mut pipeline,
            &serving.state,
            leading_tx,
            &mut tasks,
        );
        Ok(Server {
            args,
            tasks,
            state: serving.state,
            readiness,
            routes: (serving.api, serving.doors),
            tls_config: sources.tls_config,
            doors_proof: tls::HandshakeProof::AdmissionCaller {
                callers: sources.callers,
                trust: sources.trust,
            },
            elector,
            term_ended,
        })
    }

    /// Serves until `shutdown` resolves, then shuts down in one sequence: hand the Lease over,
    /// fail `/readyz`, end open watches and connections, stop every background task.
    pub(crate) async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
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
        let args = &self.args;
        let deadlines = auth::connection::Deadlines {
            first_request: args.request_header_timeout,
            idle: auth::connection::IDLE_TIMEOUT,
        };
        let limits = auth::budget::Limits {
            proven: args.max_connections,
            anonymous: args.max_anonymous_connections,
        };
        let (api, doors) = self.routes;
        // The API and the admission doors on listeners of their own, each with its own pools:
        // what one port's callers hold takes nothing from the other's.
        let api = Endpoint {
            addr: SocketAddr::new(args.bind_address, args.secure_port),
            routes: api,
            acceptor: tls::PeerCertAcceptor::new(
                self.tls_config.clone(),
                Port::Api,
                limits,
                tls::HandshakeProof::AnyTrusted,
                deadlines,
            ),
        };
        let doors = Endpoint {
            addr: SocketAddr::new(args.bind_address, args.admission_port),
            routes: doors,
            acceptor: tls::PeerCertAcceptor::new(
                self.tls_config,
                Port::Admission,
                limits,
                self.doors_proof,
                deadlines,
            ),
        };
        let served = tokio::try_join!(
            accept(api, &listener, self.term_ended.clone(), deadlines),
            accept(doors, &listener, self.term_ended, deadlines),
        );
        self.tasks.shutdown().await;
        served.map(|_| ())
    }
}

/// Bounds the wait for the initial sync (`INITIAL_SYNC_TIMEOUT`), and reports how long the
/// server took to be ready and to be synced, counted from `start`.
fn report_start(
    tasks: &mut Tasks,
    readiness: &Readiness,
    sync_timeout: Duration,
    start: std::time::Instant,
) {
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

/// One of the server's TLS listeners: where, what it serves, who it lets in (and for which of
/// the server's ports: its acceptor's).
struct Endpoint {
    addr: SocketAddr,
    routes: axum::Router,
    acceptor: tls::PeerCertAcceptor,
}

/// Accepts connections on `endpoint` until the shutdown sequence closed the listener; listens
/// again after a term as leader ends (its connections closed).
async fn accept(
    endpoint: Endpoint,
    listener: &Listener,
    mut term_ended: tokio::sync::watch::Receiver<u64>,
    deadlines: auth::connection::Deadlines,
) -> Result<()> {
    let Endpoint {
        addr,
        routes,
        acceptor,
    } = endpoint;
    let port = acceptor.port();
    loop {
        let handle = axum_server::Handle::new();
        *listener.handle(port).lock() = handle.clone();
        if listener.stopping.load(Ordering::SeqCst) {
            return Ok(());
        }
        match port {
            Port::Api => tracing::info!(%addr, "serving live.ifo.kubevirt.io"),
            Port::Admission => tracing::info!(%addr, "serving the admission doors"),
        }
        let mut server = axum_server::bind(addr)
            .acceptor(acceptor.clone())
            .handle(handle.clone());
        front_door(server.http_builder(), deadlines.first_request);
        let serving = server.serve(routes.clone().into_make_service());
        tokio::pin!(serving);
        tokio::select! {
            served = &mut serving => {
                return served.with_context(|| format!("serving on {addr}"));
            }
            () = next_term_end(&mut term_ended) => {
                if listener.stopping.load(Ordering::SeqCst) {
                    // Shutting down: the shutdown task closes the connections, after handing
                    // the Lease over.
                    return serving.await.with_context(|| format!("serving on {addr}"));
                }
                // A leader that stopped leading: clients that reached it through the Service
                // would keep their connections (an HTTP/2 connection carries every request of
                // kube-apiserver's proxy, and every review of a webhook) and get 503 for ever.
                // Close them, so that they reconnect and reach the new leader; then listen
                // again.
                tracing::info!(%addr, "the term ended: closing every connection");
                handle.graceful_shutdown(Some(Duration::from_secs(2)));
                serving.await.with_context(|| format!("serving on {addr}"))?;
            }
        }
    }
}

/// Waits for the next end of a term as leader; for ever without leader election.
async fn next_term_end(term_ended: &mut tokio::sync::watch::Receiver<u64>) {
    if term_ended.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// How long a leader that handed over on SIGTERM keeps its connections open before it closes
/// them: kube-proxy rewrites its rules at most once a second (its default minimum sync
/// period), so after this clients that reconnect reach the new leader.
const HANDOVER_GRACE: Duration = Duration::from_secs(2);

/// The listeners of the moment: each replaced when a term ends (its connections closed), all
/// closed for good on shutdown.
#[derive(Default)]
struct Listener {
    api: parking_lot::Mutex<axum_server::Handle<SocketAddr>>,
    admission: parking_lot::Mutex<axum_server::Handle<SocketAddr>>,
    stopping: AtomicBool,
}

impl Listener {
    fn handle(&self, port: Port) -> &parking_lot::Mutex<axum_server::Handle<SocketAddr>> {
        match port {
            Port::Api => &self.api,
            Port::Admission => &self.admission,
        }
    }

    /// Closes the current listeners and their connections, waiting up to `grace` for requests.
    fn close(&self, grace: Duration) {
        for port in [Port::Api, Port::Admission] {
            self.handle(port).lock().graceful_shutdown(Some(grace));
        }
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
