//! The first phase of building the server: what it starts from, read before anything runs. The
//! leader election settings, the cluster, the aggregation layer's trust settings, who may call
//! the admission doors, the serving certificate (made here with SERVING_CERTIFICATE_SECRET), and
//! the TLS configuration made of them; any of them missing or invalid
//! stops the server before it serves.

use anyhow::{Context, Result};
use axum_server::tls_rustls::RustlsConfig;
use std::sync::Arc;
use tokio::sync::watch;

use crate::auth::{self, AdmissionCallers, RequestHeaderConfig, TrustWatch, tls};
use crate::certificates;
use crate::client::{kube_client, kube_client_sending_once};
use crate::config::ServeArgs;
use crate::lease;

/// What the server starts from.
pub(super) struct Sources {
    /// The leader election settings; none without leader election.
    pub(super) election: Option<lease::Settings>,
    pub(super) client: kube::Client,
    /// A client that sends each request once, for the guard's reach checks (with the guard):
    /// a webhook's `429` is an answer to read, not one to retry.
    pub(super) sending_once: Option<kube::Client>,
    /// The front-proxy trust settings, as [`Sources::trust_watch`] keeps them.
    pub(super) trust: watch::Receiver<Arc<RequestHeaderConfig>>,
    /// What keeps [`Sources::trust`] up to date (a task of the server).
    pub(super) trust_watch: TrustWatch,
    /// Who may call the admission doors.
    pub(super) callers: AdmissionCallers,
    pub(super) tls_config: RustlsConfig,
    /// What keeps [`Sources::tls_config`] up to date (a task of the server).
    pub(super) reloader: tls::Reloader,
    /// What makes and renews the serving certificate, when the server does (a task of the
    /// server).
    pub(super) certificates: Option<certificates::Keeper>,
}

impl Sources {
    /// Reads them, in that order.
    pub(super) async fn read(args: &ServeArgs) -> Result<Sources> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let election = args.leader_election()?;
        let client = kube_client(args).await?;
        let sending_once = if args.eviction_guard {
            Some(kube_client_sending_once(args).await?)
        } else {
            None
        };
        let (trust, trust_watch) = auth::read_request_header_config(client.clone()).await?;
        let callers = AdmissionCallers::from_settings(
            &args.admission_allowed_names,
            args.admission_client_ca_file.as_deref(),
        )?;
        let certificates = match &args.serving_certificate_secret {
            Some(secret) => Some(
                certificates::Keeper::start(
                    client.clone(),
                    certificates::Settings {
                        namespace: args.leader_elect_resource_namespace.clone(),
                        secret: secret.clone(),
                        ca_from: args.serving_certificate_ca_from.clone(),
                        names: args.serving_certificate_names.clone(),
                        lifetime: args.serving_certificate_lifetime,
                        trust: args.ca_bundle_targets.clone(),
                        cert_file: args.tls_cert_file.clone(),
                        key_file: args.tls_private_key_file.clone(),
                    },
                )
                .await
                .context("making the serving certificate (SERVING_CERTIFICATE_SECRET)")?,
            ),
            None => None,
        };
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
        Ok(Sources {
            election,
            client,
            sending_once,
            trust,
            trust_watch,
            callers,
            tls_config,
            reloader,
            certificates,
        })
    }
}
