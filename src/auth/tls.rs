//! TLS for the API: our serving certificate, and optional client certificates verified against
//! the front-proxy CA and the cluster's client CA. A client without a certificate (a probe, a
//! bearer-token caller) is accepted and authenticated by other means; a certificate from any
//! other CA fails the handshake, as it does with kube-apiserver. Which of the two CAs a
//! certificate chains to, and so what it proves, is decided in [`super::peer`].

use super::budget::{Budget, ConnectionSeat, Limits, Port};
use super::connection::{Activity, DeadlineStream, Deadlines, PeerAddress, Tracked};
use super::peer::PeerCertificates;
use super::{AdmissionCallers, RequestHeaderConfig};
use anyhow::{Context, Result};
use axum::middleware::AddExtension;
use axum_server::accept::{Accept, DefaultAcceptor};
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use futures::future::BoxFuture;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_rustls::server::TlsStream;
use tower::Layer;

/// Builds the rustls configuration for the current trust settings.
pub(crate) fn server_config(
    cert_file: &Path,
    key_file: &Path,
    trust: &RequestHeaderConfig,
    callers: &AdmissionCallers,
) -> Result<Arc<ServerConfig>> {
    let certs = CertificateDer::pem_file_iter(cert_file)
        .with_context(|| format!("reading {}", cert_file.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("parsing {}", cert_file.display()))?;
    let key = PrivateKeyDer::from_pem_file(key_file)
        .with_context(|| format!("reading {}", key_file.display()))?;
    let mut roots = RootCertStore::empty();
    for ca in &trust.client_ca {
        roots
            .add(ca.clone())
            .context("adding a front-proxy CA certificate")?;
    }
    for ca in &trust.cluster_client_ca {
        roots
            .add(ca.clone())
            .context("adding a client CA certificate")?;
    }
    for ca in &callers.ca {
        roots
            .add(ca.clone())
            .context("adding a CA certificate of ADMISSION_CLIENT_CA_FILE")?;
    }
    let verifier = WebPkiClientVerifier::builder(Arc::new(roots))
        .allow_unauthenticated()
        .build()
        .context("building the client certificate verifier")?;
    let mut config = ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .context("loading the serving certificate")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The modification times of the serving certificate and key files.
type Stamp = (Option<SystemTime>, Option<SystemTime>);

fn stamp(cert_file: &Path, key_file: &Path) -> Stamp {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    (modified(cert_file), modified(key_file))
}

/// Rebuilds the TLS configuration when the trust settings change or the serving certificate
/// files are replaced (checked every few seconds), so rotations need no restart. Runs under the
/// server's tasks: a run started again goes on from what the last one loaded (the files' times),
/// and reloads at once if the trust settings changed since the server started.
#[derive(Clone)]
pub(crate) struct Reloader {
    tls: RustlsConfig,
    cert_file: PathBuf,
    key_file: PathBuf,
    /// Never marked seen itself: each run follows a clone of it.
    trust: watch::Receiver<Arc<RequestHeaderConfig>>,
    callers: AdmissionCallers,
    /// The files' times when they were last loaded.
    loaded: Arc<parking_lot::Mutex<Stamp>>,
}

impl Reloader {
    /// Reloads `tls`, loaded just now from these files and settings.
    pub(crate) fn new(
        tls: RustlsConfig,
        cert_file: PathBuf,
        key_file: PathBuf,
        trust: watch::Receiver<Arc<RequestHeaderConfig>>,
        callers: AdmissionCallers,
    ) -> Reloader {
        let loaded = Arc::new(parking_lot::Mutex::new(stamp(&cert_file, &key_file)));
        Reloader {
            tls,
            cert_file,
            key_file,
            trust,
            callers,
            loaded,
        }
    }

    /// Reloads on every change until the trust settings are gone (the server stops).
    pub(crate) async fn run(self) {
        let mut trust = self.trust.clone();
        loop {
            let trust_changed = tokio::select! {
                changed = trust.changed() => { if changed.is_err() { return; } true }
                _ = tokio::time::sleep(Duration::from_secs(5)) => false,
            };
            let now = stamp(&self.cert_file, &self.key_file);
            if !trust_changed && now == *self.loaded.lock() {
                continue;
            }
            *self.loaded.lock() = now;
            let current = trust.borrow_and_update().clone();
            match server_config(&self.cert_file, &self.key_file, &current, &self.callers) {
                Ok(config) => {
                    self.tls.reload_from_config(config);
                    tracing::info!(cert = %self.cert_file.display(), "TLS configuration reloaded");
                }
                Err(e) => tracing::error!(
                    error = format!("{e:#}"),
                    "keeping the previous TLS configuration"
                ),
            }
        }
    }
}

/// What a client certificate verified in the TLS handshake proves, and so whether its connection
/// takes a place in the proven pool (see `budget`).
#[derive(Clone)]
pub(crate) enum HandshakeProof {
    /// Any certificate of a CA the server trusts: the API's callers (the aggregator's front
    /// proxy, cluster users).
    AnyTrusted,
    /// Only the certificate kube-apiserver presents to the admission doors
    /// (`ADMISSION_ALLOWED_NAMES`): no other client, a user's or a kubelet's certificate of the
    /// cluster's CA included, takes a place there that kube-apiserver's connections need.
    AdmissionCaller {
        callers: AdmissionCallers,
        trust: watch::Receiver<Arc<RequestHeaderConfig>>,
    },
}

impl HandshakeProof {
    fn proves(&self, certificates: &PeerCertificates) -> bool {
        match self {
            HandshakeProof::AnyTrusted => !certificates.is_empty(),
            HandshakeProof::AdmissionCaller { callers, trust } => {
                callers.required() && certificates.is_admission_caller(callers, &trust.borrow())
            }
        }
    }
}

/// Accepts TLS connections to one of the server's ports within its [`Budget`] (see `budget`:
/// anonymous ones displaceable, proven ones in a pool of their own), each with its
/// [`Deadlines`], and hands each request the client's verified certificates.
#[derive(Clone)]
pub(crate) struct PeerCertAcceptor {
    inner: RustlsAcceptor<DefaultAcceptor>,
    budget: Arc<Budget>,
    proof: HandshakeProof,
    deadlines: Deadlines,
}

impl PeerCertAcceptor {
    pub(crate) fn new(
        config: RustlsConfig,
        port: Port,
        limits: Limits,
        proof: HandshakeProof,
        deadlines: Deadlines,
    ) -> Self {
        PeerCertAcceptor {
            inner: RustlsAcceptor::new(config).handshake_timeout(deadlines.first_request),
            budget: Budget::new(limits, port),
            proof,
            deadlines,
        }
    }

    /// The port it accepts for.
    pub(crate) fn port(&self) -> Port {
        self.budget.port()
    }
}

impl<S: Send + 'static> Accept<TcpStream, S> for PeerCertAcceptor {
    type Stream = TlsStream<DeadlineStream<TcpStream>>;
    type Service = Tracked<
        AddExtension<AddExtension<AddExtension<S, PeerCertificates>, PeerAddress>, ConnectionSeat>,
    >;
    type Future = BoxFuture<'static, std::io::Result<(Self::Stream, Self::Service)>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        // Watch events are small writes that must leave at once; Nagle's algorithm would hold
        // each one until the previous one is acknowledged (tens of milliseconds with delayed ACKs).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
        let activity = Arc::new(Activity::default());
        let peer = match stream.peer_addr() {
            Ok(addr) => addr.ip(),
            Err(e) => return Box::pin(async { Err(e) }),
        };
        let port = self.port().as_str();
        let seat = match self.budget.admit(peer, activity.clone()) {
            Ok(seat) => seat,
            Err(refused) => {
                crate::metrics::connection_refused(port, refused.as_str());
                return Box::pin(async { Err(std::io::Error::other("too many connections")) });
            }
        };
        let stream = DeadlineStream::new(stream, activity.clone(), self.deadlines);
        let handshake = self.inner.accept(stream, service);
        let proof = self.proof.clone();
        // The seat is held by the handshake, then by the connection's service: given back when
        // either ends.
        Box::pin(async move {
            let (stream, service) = handshake.await?;
            let certs: Vec<_> = stream
                .get_ref()
                .1
                .peer_certificates()
                .map(|c| c.iter().map(|c| c.clone().into_owned()).collect())
                .unwrap_or_default();
            // The handshake verified the chain against the CAs the server trusts: proven, if
            // that is what proves a connection on this port.
            let certs = PeerCertificates::new(certs);
            if proof.proves(&certs)
                && let Err(refused) = seat.prove()
            {
                crate::metrics::connection_refused(port, refused.as_str());
                return Err(std::io::Error::other("too many connections"));
            }
            let service = axum::Extension(certs).layer(service);
            let service = axum::Extension(PeerAddress(peer)).layer(service);
            let service = axum::Extension(ConnectionSeat::new(seat)).layer(service);
            Ok((stream, Tracked::new(service, activity)))
        })
    }
}

#[cfg(test)]
mod tests;
