//! The leader's mark on its own pod: the label `ifo.kubevirt.io/leader=true`, which the Service
//! selects, so kube-apiserver's requests reach the leader only while every replica stays Ready
//! (a rollout with `maxUnavailable: 0` needs the new pod Ready while the old one still leads).

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};

use std::time::Duration;

use tokio::sync::watch;

use super::{Error, Role};

/// The label the Service selects.
pub const LEADER_LABEL: &str = "ifo.kubevirt.io/leader";

/// This replica's pod, to mark while it leads.
#[derive(Clone)]
pub struct LeaderLabel {
    api: Api<Pod>,
    pod: String,
}

impl LeaderLabel {
    /// The pod `pod` in `namespace` (from the downward API: `POD_NAME`, `POD_NAMESPACE`).
    pub fn new(client: kube::Client, namespace: &str, pod: &str) -> LeaderLabel {
        LeaderLabel {
            api: Api::namespaced(client, namespace),
            pod: pod.to_owned(),
        }
    }

    /// Marks the pod (`leading`) or removes the mark. A JSON merge patch of the one label:
    /// nothing else of the pod is touched, and removing an absent label is no error.
    pub async fn set(&self, leading: bool) -> Result<(), Error> {
        let value = if leading {
            serde_json::Value::from("true")
        } else {
            serde_json::Value::Null
        };
        let patch = serde_json::json!({"metadata": {"labels": {LEADER_LABEL: value}}});
        self.api
            .patch(&self.pod, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|source| Error::Api {
                name: format!("pod {}", self.pod),
                source,
            })
    }

    /// Keeps the mark equal to the role, one patch at a time (so an older patch can never land
    /// after a newer one): removed at start (a restarted container may carry its predecessor's
    /// mark), set while leading, removed on stepping down and when the election stops.
    pub async fn follow(self, mut role: watch::Receiver<Role>) {
        let mut marked: Option<bool> = None;
        loop {
            let leading = *role.borrow_and_update() == Role::Leading;
            if marked != Some(leading) {
                match self.set(leading).await {
                    Ok(()) => {
                        tracing::info!(pod = %self.pod, leading, "leader label of the pod updated");
                        marked = Some(leading);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, leading, "updating the leader label of the pod failed; retrying in 1s");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                }
            }
            if role.changed().await.is_err() {
                if marked != Some(false)
                    && let Err(e) = self.set(false).await
                {
                    tracing::warn!(error = %e, "removing the leader label of the pod failed");
                }
                return;
            }
        }
    }
}
