//! The floors under a cold start: how long kube-apiserver takes to hand a resource's objects
//! to a client that only reads them through, without decoding them. A server's own first list
//! decodes and evaluates the same objects as well, so it cannot be faster.

use anyhow::{Context, Result};
use futures::{AsyncBufReadExt, StreamExt};
use kube::api::{Api, DynamicObject};
use std::time::Duration;
use tokio::time::Instant;

/// Streamed as the server's watchers get them (across all namespaces: a watch with
/// `sendInitialEvents`, up to the bookmark that ends them), from kube-apiserver's cache
/// (`resourceVersion=0`, as kube's watcher asks): how long, and the bytes of its events.
pub(crate) async fn streamed(everywhere: &Api<DynamicObject>) -> Result<(Duration, u64)> {
    let client = everywhere.clone().into_client();
    let params = kube::api::WatchParams::streaming_lists().timeout(290);
    let request = kube::core::Request::new(everywhere.resource_url()).watch(&params, "0")?;
    let started = Instant::now();
    let mut lines = client.request_stream(request).await?.lines();
    let mut bytes = 0;
    while let Some(line) = lines.next().await {
        let line = line?;
        if line.contains("\"k8s.io/initial-events-end\"") {
            return Ok((started.elapsed(), bytes));
        }
        bytes += line.len() as u64 + 1;
    }
    anyhow::bail!("the streamed list ended without its closing bookmark")
}

/// Listed in pages of 500: the floor of an API server that does not stream lists.
pub(crate) async fn paged(everywhere: &Api<DynamicObject>) -> Result<Duration> {
    #[derive(serde::Deserialize)]
    struct Page {
        metadata: kube::api::ListMeta,
    }
    let client = everywhere.clone().into_client();
    let started = Instant::now();
    let mut token: Option<String> = None;
    loop {
        let mut params = kube::api::ListParams::default().limit(500);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let request = kube::core::Request::new(everywhere.resource_url()).list(&params)?;
        let text = client.request_text(request).await?;
        let page: Page = serde_json::from_str(&text).context("a page of the list")?;
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            return Ok(started.elapsed());
        }
    }
}
