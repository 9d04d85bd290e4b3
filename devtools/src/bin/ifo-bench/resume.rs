//! One watch of a collection through kube-apiserver, as the benchmark's watchers run it after
//! each list: open from a resourceVersion, every event handed on, and where to go on from when
//! it ends.

use futures::TryStreamExt;
use kube::api::{WatchEvent, WatchParams};
use kube::core::Request;
use serde_json::Value;
use std::time::Duration;
use tokio::time::Instant;

/// Watches `request`'s collection (with `params`) from resourceVersion `from` until the watch
/// ends, handing every event to `event` with the instant it arrived; signals `ready` (and
/// empties it) once the watch is open. Returns the resourceVersion to resume from after a
/// timeout (the last one an object or a bookmark carried), or `None` when the collection must
/// be listed again: the watch could not open (after a short pause), said `410 Expired` or
/// another error, or broke.
pub(crate) async fn watch_from(
    client: &kube::Client,
    request: &Request,
    params: &WatchParams,
    from: String,
    ready: &mut Option<tokio::sync::mpsc::Sender<()>>,
    mut event: impl FnMut(WatchEvent<Value>, Instant),
) -> Option<String> {
    let stream = match request.watch(params, &from) {
        Ok(watch) => client
            .request_events::<Value>(watch)
            .await
            .map_err(anyhow::Error::from),
        Err(e) => Err(e.into()),
    };
    let stream = match stream {
        Ok(stream) => stream,
        Err(e) => {
            tracing::warn!(error = %e, url = %request.url_path, "watch failed; relisting");
            tokio::time::sleep(Duration::from_millis(200)).await;
            return None;
        }
    };
    if let Some(ready) = ready.take() {
        let _ = ready.send(()).await;
    }
    let mut stream = std::pin::pin!(stream);
    let mut rv = from;
    loop {
        match stream.try_next().await {
            Ok(Some(WatchEvent::Error(e))) => {
                tracing::warn!(code = e.code, error = %e.message, url = %request.url_path, "watch error; relisting");
                return None;
            }
            Ok(Some(e)) => {
                let at = Instant::now();
                match &e {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                        if let Some(v) = o["metadata"]["resourceVersion"].as_str() {
                            v.clone_into(&mut rv);
                        }
                    }
                    WatchEvent::Bookmark(b) => rv.clone_from(&b.metadata.resource_version),
                    WatchEvent::Error(_) => {}
                }
                event(e, at);
            }
            // The watch timed out: resume from the last resourceVersion seen.
            Ok(None) => return Some(rv),
            Err(e) => {
                tracing::warn!(error = %e, url = %request.url_path, "watch broke; relisting");
                return None;
            }
        }
    }
}
