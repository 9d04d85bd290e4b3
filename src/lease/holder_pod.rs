//! Watches the pod of the Lease's current holder and publishes the latest end of its server
//! container that kubelet reports, so that a follower can take the Lease as soon as that end
//! proves the holder gone (see `proof`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use tokio::sync::{Notify, watch};

use super::proof::{ContainerEnd, last_end};

/// Watches the pod named by `holder` (one pod, by a field selector; none while `holder` is
/// `None`), publishes in `ends` the latest end of its container `container`, and wakes the
/// elector through `changed` when a later end is reported. Ends when `holder`'s sender is
/// dropped. Best effort: while the watch fails, the Lease's expiry is the rule all the same.
pub(super) async fn watch(
    api: Api<Pod>,
    container: String,
    mut holder: watch::Receiver<Option<String>>,
    ends: watch::Sender<Option<ContainerEnd>>,
    changed: Arc<Notify>,
) {
    use futures::StreamExt as _;
    use kube::runtime::{WatchStreamExt as _, watcher};
    loop {
        let pod = holder.borrow_and_update().clone();
        ends.send_replace(None);
        let Some(pod) = pod else {
            if holder.changed().await.is_err() {
                return;
            }
            continue;
        };
        let config = watcher::Config::default().fields(&format!("metadata.name={pod}"));
        let mut events = std::pin::pin!(watcher::watcher(api.clone(), config).default_backoff());
        loop {
            tokio::select! {
                event = events.next() => match event {
                    Some(Ok(
                        watcher::Event::Apply(p)
                        | watcher::Event::InitApply(p)
                        | watcher::Event::Delete(p),
                    )) => {
                        let Some(end) = last_end(&p, &container) else { continue };
                        let later = ends.send_if_modified(|latest| {
                            let later = latest.as_ref().is_none_or(|l| end.finished_at > l.finished_at);
                            if later {
                                *latest = Some(end.clone());
                            }
                            later
                        });
                        if later {
                            tracing::info!(
                                pod = %end.pod,
                                container = %container,
                                container_id = %end.container_id,
                                finished_at = %end.finished_at,
                                restarts = end.restart_count,
                                "kubelet reports the lease holder's container ended"
                            );
                            changed.notify_one();
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        tracing::warn!(pod = %pod, error = %e, "watching the lease holder's pod failed; retrying (the lease's expiry applies meanwhile)");
                    }
                    None => break,
                },
                changed = holder.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    break;
                }
            }
        }
    }
}
