//! The leader's mark on its own pod: the label `ifo.kubevirt.io/leader=true`, which the Service
//! selects, so kube-apiserver's requests reach the leader only while every replica stays Ready
//! (a rollout with `maxUnavailable: 0` needs the new pod Ready while the old one still leads).

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};

use std::time::Duration;

use tokio::sync::watch;

use super::{Error, Role};

/// The label the Service selects.
pub const LEADER_LABEL: &str = "ifo.kubevirt.io/leader";

/// Names the Lease a marked pod leads by, so that a new leader removes the mark of its own
/// election's previous leader only (several elections may share a namespace).
pub const LEASE_LABEL: &str = "ifo.kubevirt.io/leader-lease";

/// This replica's pod, to mark while it leads.
#[derive(Clone)]
pub struct LeaderLabel {
    api: Api<Pod>,
    pod: String,
    lease: String,
}

impl LeaderLabel {
    /// The pod `pod` in `namespace` (from the downward API: `POD_NAME`, `POD_NAMESPACE`),
    /// leading by the Lease `lease`.
    pub fn new(client: kube::Client, namespace: &str, pod: &str, lease: &str) -> LeaderLabel {
        LeaderLabel {
            api: Api::namespaced(client, namespace),
            pod: pod.to_owned(),
            lease: lease.to_owned(),
        }
    }

    /// The merge patch that marks a pod (with the Lease's name) or removes both labels.
    fn patch(&self, leading: bool) -> serde_json::Value {
        if leading {
            serde_json::json!({"metadata": {"labels": {LEADER_LABEL: "true", LEASE_LABEL: self.lease}}})
        } else {
            serde_json::json!({"metadata": {"labels": {LEADER_LABEL: null, LEASE_LABEL: null}}})
        }
    }

    /// Marks the pod (`leading`) or removes the mark. A JSON merge patch of the one label:
    /// nothing else of the pod is touched, and removing an absent label is no error.
    pub async fn set(&self, leading: bool) -> Result<(), Error> {
        self.api
            .patch(
                &self.pod,
                &PatchParams::default(),
                &Patch::Merge(&self.patch(leading)),
            )
            .await
            .map(|_| ())
            .map_err(|source| Error::Api {
                name: format!("pod {}", self.pod),
                source,
            })
    }

    /// Removes the mark from every other pod of this election that carries it: a predecessor
    /// that crashed could not remove its own (it is not Ready, so the Service skips it, but the
    /// mark would mislead whoever reads the labels).
    async fn unmark_others(&self) -> Result<(), Error> {
        let marked = self
            .api
            .list(
                &ListParams::default()
                    .labels(&format!("{LEADER_LABEL}=true,{LEASE_LABEL}={}", self.lease)),
            )
            .await
            .map_err(|source| Error::Api {
                name: "pods".into(),
                source,
            })?;
        let patch = self.patch(false);
        for pod in marked.items {
            let Some(name) = pod.metadata.name.filter(|n| *n != self.pod) else {
                continue;
            };
            match self
                .api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    tracing::info!(pod = %name, "removed the leader label of a previous leader")
                }
                // Gone already: nothing to remove.
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(source) => {
                    return Err(Error::Api {
                        name: format!("pod {name}"),
                        source,
                    });
                }
            }
        }
        Ok(())
    }

    /// Keeps the mark equal to the role, one patch at a time (so an older patch can never land
    /// after a newer one): removed at start (a restarted container may carry its predecessor's
    /// mark), set while leading (and then taken from any previous leader's pod), removed on
    /// stepping down and when the election stops.
    pub async fn follow(self, mut role: watch::Receiver<Role>) {
        let mut marked: Option<bool> = None;
        loop {
            let leading = *role.borrow_and_update() == Role::Leading;
            if marked != Some(leading) {
                let result = match self.set(leading).await {
                    Ok(()) if leading => self.unmark_others().await,
                    other => other,
                };
                match result {
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
