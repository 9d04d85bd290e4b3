//! `ifo-apiserver serve`: wires the pipeline together and serves it. Wiring only.

use crate::api::{self, ApiState};
use crate::auth::{self, Authenticator, Authorizer, tls};
use crate::client::kube_client;
use crate::config::ServeArgs;
use crate::evaluate::Engine;
use crate::guard::{self, Guard};
use crate::index::Index;
use crate::persist;
use crate::readiness::Readiness;
use crate::reconcile;
use crate::track::{Settings as TrackSettings, Tracker};
use crate::watch::{Detector, Health, Liveness, TargetHealth, Watches};
use anyhow::{Context, Result};
use axum_server::tls_rustls::RustlsConfig;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Serves until SIGTERM or Ctrl-C.
pub async fn serve(args: ServeArgs) -> Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
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
    if args.persist {
        restore_and_persist(&args, &client, &detector, &index, &readiness).await?;
    }
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
    tokio::spawn(reconcile::run(
        client.clone(),
        Engine::new(),
        watches,
        detector,
        rulesets_listed,
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
    let app = api::router(state.clone())
        .route_layer(axum::middleware::from_fn_with_state(gate, guard::guard))
        .merge(api::health_router(state.clone()));

    let addr = SocketAddr::new(args.bind_address, args.secure_port);
    let handle = axum_server::Handle::new();
    let shutdown = handle.clone();
    let delay = args.shutdown_delay.unsigned_abs();
    let stopping = state.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        // Fail /readyz first and keep serving meanwhile, so endpoints and the aggregator move
        // away before streams end; then end every watch cleanly (its stream closes, and
        // clients resume with their last resourceVersion).
        tracing::info!(delay = ?delay, "shutting down: not ready any more");
        readiness.shut_down();
        tokio::time::sleep(delay).await;
        tracing::info!("shutting down: ending open watches and requests");
        stopping.end_watches();
        shutdown.graceful_shutdown(Some(Duration::from_secs(5)));
    });
    tracing::info!(%addr, "serving live.ifo.kubevirt.io");
    let mut server = axum_server::bind(addr)
        .acceptor(tls::PeerCertAcceptor::new(tls_config, args.max_connections))
        .handle(handle);
    front_door(server.http_builder());
    server
        .serve(app.into_make_service())
        .await
        .with_context(|| format!("serving on {addr}"))
}

/// Persistence mode: reads the copies back into the pipeline before anything is evaluated,
/// then starts the writer. Restored operations that nothing confirmed by a debounce threshold
/// after the initial sync ended while the server was down, and complete then.
async fn restore_and_persist(
    args: &ServeArgs,
    client: &kube::Client,
    detector: &Arc<Detector>,
    index: &Arc<Index>,
    readiness: &Readiness,
) -> Result<()> {
    let api = persist::api(client.clone());
    let deadline = tokio::time::Instant::now() + args.initial_sync_timeout.unsigned_abs();
    let found = loop {
        match persist::read_back(&api).await {
            Ok(found) => break found,
            Err(e @ (persist::Error::NotInstalled(_) | persist::Error::Forbidden(_))) => {
                return Err(e.into());
            }
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::warn!(error = %e, "retrying in 2s");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            Err(e) => return Err(e.into()),
        }
    };
    let refused = detector.restore(found.records.clone());
    tracing::info!(
        copies = found.copies.len(),
        restored = found.records.len() - refused.len(),
        "persisted operations read back"
    );
    tokio::spawn(persist::Writer::new(api, args.persist_settings(), found).run(index.reader()));
    let (detector, readiness) = (detector.clone(), readiness.clone());
    let grace = args.debounce_threshold.unsigned_abs();
    tokio::spawn(async move {
        readiness.wait().await;
        tokio::time::sleep(grace).await;
        detector.sweep_restored();
    });
    Ok(())
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
