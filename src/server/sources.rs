//! The first phase of building the server: what it starts from, read before anything runs. The
//! leader election settings, the cluster, the aggregation layer's trust settings, who may call
//! the admission doors, and the TLS configuration made of them; any of them missing or invalid
//! stops the server before it serves.

use anyhow::Result;
use axum_server::tls_rustls::RustlsConfig;
use std::sync::Arc;
use tokio::sync::watch;

use crate::auth::{self, AdmissionCallers, RequestHeaderConfig, TrustWatch, tls};
use crate::client::kube_client;
use crate::config::ServeArgs;
use crate::lease;

/// What the server starts from.
pub(super) struct Sources {
    /// The leader election settings; none without leader election.
    pub(super) election: Option<lease::Settings>,
    pub(super) client: kube::Client,
    /// The front-proxy trust settings, as [`Sources::trust_watch`] keeps them.
    pub(super) trust: watch::Receiver<Arc<RequestHeaderConfig>>,
    /// What keeps [`Sources::trust`] up to date (a task of the server).
    pub(super) trust_watch: TrustWatch,
    /// Who may call the admission doors.
    pub(super) callers: AdmissionCallers,
    pub(super) tls_config: RustlsConfig,
    /// What keeps [`Sources::tls_config`] up to date (a task of the server).
    pub(super) reloader: tls::Reloader,
}

impl Sources {
    /// Reads them, in that order.
    pub(super) async fn read(args: &ServeArgs) -> Result<Sources> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let election = args.leader_election()?;
        let client = kube_client(args).await?;
        let (trust, trust_watch) = auth::read_request_header_config(client.clone()).await?;
        let callers = AdmissionCallers::from_settings(
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
        Ok(Sources {
            election,
            client,
            trust,
            trust_watch,
            callers,
            tls_config,
            reloader,
        })
    }
}
