//! `kubectl ifo ui`: a local web server for one person, serving a live timeline of the
//! operations in flight and the maintenance gates (the page: `plugin/ui/`, embedded).
//!
//! Like `kubectl proxy`, it reads through the user's kubeconfig, so RBAC applies exactly as for
//! `kubectl get`; unlike it, it forwards nothing but reads of the live API (`proxy`), and only
//! to the page a browser opened from the URL it printed (`access`: Host and Origin headers, the
//! per-run token the URL's fragment hands the page, sent back in a request header; no cookie).

mod access;
mod assets;
mod proxy;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::routing::get;
use kube::Client;

use access::PageAccess;

/// What the page asks for at start: which namespace it shows (`None`: every namespace and the
/// cluster-scoped operations).
#[derive(Debug, Clone, serde::Serialize)]
struct PageConfig {
    namespace: Option<String>,
}

/// Where to listen and for whom.
#[derive(Debug, Clone)]
pub struct Listen {
    /// `--address`: loopback unless `accept_remote`.
    pub address: IpAddr,
    /// `--port`; 0 picks a free one.
    pub port: u16,
    /// `--accept-remote`: allow a non-loopback address.
    pub accept_remote: bool,
}

/// Serves the page until Ctrl-C, reading through `client`; `namespace` is the page's scope
/// (`None`: all namespaces).
pub async fn serve(client: Client, namespace: Option<String>, listen: &Listen) -> Result<()> {
    if !listen.address.is_loopback() && !listen.accept_remote {
        bail!(
            "--address {} is not a loopback address: anyone who can reach it could read the \
             cluster as you; add --accept-remote if that is what you want",
            listen.address
        );
    }
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(listen.address, listen.port))
        .await
        .with_context(|| format!("cannot listen on {}:{}", listen.address, listen.port))?;
    let local = listener.local_addr()?;
    let access = Arc::new(PageAccess::new(local)?);
    let page = Arc::new(PageConfig { namespace });
    let app = Router::new()
        .route("/", get(assets::index))
        .route("/app.js", get(assets::script))
        .route("/app.css", get(assets::style))
        .route(
            "/config.json",
            get(move || {
                let page = page.clone();
                async move { axum::Json(page.as_ref().clone()) }
            }),
        )
        .route("/k8s/{*path}", get(proxy::forward))
        .with_state(Arc::new(proxy::Proxy::new(client)))
        .layer(axum::middleware::from_fn_with_state(
            access.clone(),
            access::check,
        ));
    let shown = match local.ip() {
        ip if ip.is_unspecified() => SocketAddr::new(IpAddr::from([127, 0, 0, 1]), local.port()),
        _ => local,
    };
    crate::emit(&format!(
        "Serving the live view of operations in flight on http://{shown}/#token={}\n\
         Open that URL in a browser (it holds this run's access token). Ctrl-C stops.\n",
        access.token()
    ));
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("the web server stopped")
}
