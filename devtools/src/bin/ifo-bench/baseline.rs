//! How fast kube-apiserver delivers the subjects' own watch events: the floor under the
//! operations' latency, since the server learns of a transition through the same kind of watch.

use crate::ledger::{Key, Ledger};
use futures::TryStreamExt;
use kube::api::{Api, DynamicObject, WatchEvent, WatchParams};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Default)]
pub(crate) struct Baseline {
    latencies: Mutex<Vec<Duration>>,
}

impl Baseline {
    /// Watches the subjects until aborted, timing each status write to its watch event.
    pub(crate) async fn run(self: Arc<Self>, api: Api<DynamicObject>, ledger: Arc<Ledger>) {
        let mut matched: HashMap<Key, Instant> = HashMap::new();
        loop {
            let rv = match api.list_metadata(&Default::default()).await {
                Ok(list) => list.metadata.resource_version.unwrap_or_default(),
                Err(e) => {
                    tracing::warn!(error = %e, "listing subjects failed; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let Ok(stream) = api.watch(&WatchParams::default().timeout(290), &rv).await else {
                continue;
            };
            let mut stream = std::pin::pin!(stream);
            while let Ok(Some(event)) = stream.try_next().await {
                let WatchEvent::Modified(vm) = event else {
                    continue;
                };
                let now = Instant::now();
                let Some(state) = vm.data["status"]["printableStatus"].as_str() else {
                    continue;
                };
                let key = (vm.metadata.name.unwrap_or_default(), state.to_string());
                if let Some(sent) = ledger.state_written_at(&key)
                    && matched.get(&key) != Some(&sent)
                {
                    matched.insert(key, sent);
                    self.latencies.lock().unwrap().push(now - sent);
                }
            }
        }
    }

    pub(crate) fn take(&self) -> Vec<Duration> {
        std::mem::take(&mut self.latencies.lock().unwrap())
    }
}
