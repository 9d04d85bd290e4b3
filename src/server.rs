//! `ifo-apiserver serve`: wires the pipeline together and serves it. Wiring only.

use crate::api::{self, ApiState};
use crate::auth::{self, Authenticator, Authorizer, Guard, tls};
use crate::config::ServeArgs;
use crate::evaluate::Engine;
use crate::index::Index;
use crate::readiness::Readiness;
use crate::ruleset;
use crate::track::{Settings as TrackSettings, Tracker};
use crate::watch::{Detector, Health, Watches};
use anyhow::{Context, Result};
use axum_server::tls_rustls::RustlsConfig;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// A kube client for the server's own identity.
pub async fn kube_client(args: &ServeArgs) -> Result<kube::Client> {
    let mut config = match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?
        }
        None => kube::Config::infer()
            .await
            .context("no in-cluster config and no usable $KUBECONFIG")?,
    };
    let timeout = Duration::from_secs(args.k8s_api_timeout.as_secs().max(1) as u64);
    config.connect_timeout = Some(timeout);
    config.read_timeout = None; // watches are long; per-call deadlines are set where needed
    config.write_timeout = Some(timeout);
    Ok(kube::Client::try_from(config)?)
}

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
    let retry = Duration::from_secs(args.requeue_interval.as_secs().max(1) as u64);
    let watches = Arc::new(Watches::new(
        client.clone(),
        detector.clone(),
        retry,
        readiness.clone(),
    ));
    tokio::spawn(ruleset::run(
        client.clone(),
        Engine::new(),
        watches,
        detector,
        rulesets_listed,
    ));

    let state = Arc::new(ApiState::new(index, readiness));
    let guard = Arc::new(Guard {
        authenticator: Authenticator::new(trust, client.clone()),
        authorizer: Authorizer::new(client.clone()),
    });
    let app = api::router(state.clone())
        .layer(axum::middleware::from_fn_with_state(guard, auth::guard))
        .merge(api::health_router(state));

    let addr = SocketAddr::new(args.bind_address, args.secure_port);
    let handle = axum_server::Handle::new();
    let shutdown = handle.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down");
        shutdown.graceful_shutdown(Some(Duration::from_secs(5)));
    });
    tracing::info!(%addr, "serving live.ifo.kubevirt.io");
    axum_server::bind(addr)
        .acceptor(tls::PeerCertAcceptor::new(tls_config))
        .handle(handle)
        .serve(app.into_make_service())
        .await
        .with_context(|| format!("serving on {addr}"))
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
