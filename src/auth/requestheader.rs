//! The aggregation layer's trust settings, published by kube-apiserver in the ConfigMap
//! `kube-system/extension-apiserver-authentication`: the front-proxy CA and how to read identity
//! headers, and the cluster's client CA (`client-ca-file`), whose certificates authenticate
//! their holder directly, as they do with kube-apiserver. Watched, so a rotated CA or changed
//! allowed names take effect without a restart.

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

const NAMESPACE: &str = "kube-system";
const NAME: &str = "extension-apiserver-authentication";

/// How to recognise and read a request forwarded by the aggregator.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RequestHeaderConfig {
    /// CAs that sign the front-proxy client certificate (never the cluster CA).
    pub client_ca: Vec<CertificateDer<'static>>,
    /// The cluster's client CAs (`client-ca-file`): a certificate they signed authenticates its
    /// holder as its common name, in the groups of its organizations. Empty when kube-apiserver
    /// publishes none.
    pub cluster_client_ca: Vec<CertificateDer<'static>>,
    /// Accepted certificate common names; empty means any certificate the CA signed.
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub uid_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_prefixes: Vec<String>,
}

/// Values are PEM, or JSON arrays of strings.
fn strings(cm: &ConfigMap, key: &str) -> Result<Vec<String>> {
    match cm.data.as_ref().and_then(|d| d.get(key)) {
        None => Ok(Vec::new()),
        Some(v) if v.trim().is_empty() => Ok(Vec::new()),
        Some(v) => serde_json::from_str(v).with_context(|| format!("{key} is not a JSON list")),
    }
}

impl RequestHeaderConfig {
    pub(crate) fn from_config_map(cm: &ConfigMap) -> Result<RequestHeaderConfig> {
        let pem = cm
            .data
            .as_ref()
            .and_then(|d| d.get("requestheader-client-ca-file"))
            .context("requestheader-client-ca-file is missing: kube-apiserver runs without --requestheader-client-ca-file, so the aggregation layer cannot be trusted")?;
        let client_ca = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .context("requestheader-client-ca-file is not valid PEM")?;
        if client_ca.is_empty() {
            bail!("requestheader-client-ca-file holds no certificate");
        }
        let cluster_client_ca = match cm.data.as_ref().and_then(|d| d.get("client-ca-file")) {
            None => Vec::new(),
            Some(pem) => CertificateDer::pem_slice_iter(pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .context("client-ca-file is not valid PEM")?,
        };
        Ok(RequestHeaderConfig {
            client_ca,
            cluster_client_ca,
            allowed_names: strings(cm, "requestheader-allowed-names")?,
            username_headers: strings(cm, "requestheader-username-headers")?,
            uid_headers: strings(cm, "requestheader-uid-headers")?,
            group_headers: strings(cm, "requestheader-group-headers")?,
            extra_prefixes: strings(cm, "requestheader-extra-headers-prefix")?,
        })
    }
}

/// Reads the ConfigMap once (an error if it can't: serving without it would trust nobody or
/// everybody): the trust settings, and the [`TrustWatch`] that keeps them up to date, to run
/// under the server's tasks.
pub(crate) async fn read_request_header_config(
    client: Client,
) -> Result<(watch::Receiver<Arc<RequestHeaderConfig>>, TrustWatch)> {
    let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
    let cm = api
        .get(NAME)
        .await
        .with_context(|| format!("reading ConfigMap {NAMESPACE}/{NAME}"))?;
    let initial = RequestHeaderConfig::from_config_map(&cm)?;
    let (tx, rx) = watch::channel(Arc::new(initial));
    Ok((
        rx,
        TrustWatch {
            api,
            tx: Arc::new(tx),
        },
    ))
}

/// Follows the ConfigMap's changes into the trust settings it was read into. A run started
/// again (after it ended or panicked) lists the ConfigMap afresh, so it misses nothing.
#[derive(Clone)]
pub(crate) struct TrustWatch {
    api: Api<ConfigMap>,
    tx: Arc<watch::Sender<Arc<RequestHeaderConfig>>>,
}

impl TrustWatch {
    /// Publishes every valid change of the ConfigMap for as long as it runs; an invalid one is
    /// logged and ignored (the previous settings stay).
    pub(crate) async fn follow(self) {
        let config = watcher::Config::default().fields(&format!("metadata.name={NAME}"));
        let mut events = std::pin::pin!(watcher::watcher(self.api, config).default_backoff());
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) => {
                    match RequestHeaderConfig::from_config_map(&cm) {
                        Ok(new) if **self.tx.borrow() != new => {
                            tracing::info!(configmap = NAME, "front-proxy trust settings changed");
                            self.tx.send_replace(Arc::new(new));
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::error!(configmap = NAME, error = %e, "ignoring an invalid update; keeping the previous trust settings")
                        }
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(configmap = NAME, error = %e, "watch failed; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
