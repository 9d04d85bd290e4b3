//! Each replica's mark on its own pod, which Services select: the leader's label
//! `ifo.kubevirt.io/leader=true` (the Service `ifo-apiserver`: kube-apiserver's requests reach the
//! leader only while every replica stays Ready, as a rollout with `maxUnavailable: 0` needs), and
//! a standby's `ifo.kubevirt.io/standby=true` (the Service `ifo-guard`: the maintenance guard's
//! second door, so that a crashed leader, whose address refuses connections until kubelet
//! reports it, never leaves evictions without an answer).
//!
//! A new leader keeps its standby mark for [`STANDBY_OVERLAP`] after it takes the lead: its pod
//! joins the leader's Service before it leaves the standby's, so that neither door is empty
//! while the endpoints change (the replaced leader's restarted container marks itself standby
//! once it runs).

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};

use std::time::Duration;

use tokio::sync::watch;

use super::{Error, Role};

/// The label the Service selects.
pub(super) const LEADER_LABEL: &str = "ifo.kubevirt.io/leader";

/// The label a standby's pod carries (the guard's second Service selects it).
pub(super) const STANDBY_LABEL: &str = "ifo.kubevirt.io/standby";

/// How long a new leader keeps its standby mark: longer than the endpoints of both Services
/// take to follow a label (a second or two), shorter than a restarted replica takes to be Ready.
pub(super) const STANDBY_OVERLAP: Duration = Duration::from_secs(10);

/// Names the Lease a marked pod leads or stands by for, so that a new leader removes the mark of
/// its own election's previous leader only, and a leader hands over to a standby of its own
/// election only (several elections may share a namespace).
pub(super) const LEASE_LABEL: &str = "ifo.kubevirt.io/leader-lease";

/// This replica's pod, to mark while it leads.
#[derive(Clone)]
pub(crate) struct LeaderLabel {
    api: Api<Pod>,
    pod: String,
    lease: String,
}

impl LeaderLabel {
    /// The pod `pod` in `namespace` (from the downward API: `POD_NAME`, `POD_NAMESPACE`),
    /// leading by the Lease `lease`.
    pub(crate) fn new(
        client: kube::Client,
        namespace: &str,
        pod: &str,
        lease: &str,
    ) -> LeaderLabel {
        LeaderLabel {
            api: Api::namespaced(client, namespace),
            pod: pod.to_owned(),
            lease: lease.to_owned(),
        }
    }

    /// The merge patch of a pod's marks: its labels set or removed, nothing else.
    fn patch(&self, mark: Mark) -> serde_json::Value {
        let (leader, lease, standby) = match mark {
            Mark::Leader => (Some("true"), Some(self.lease.as_str()), None),
            Mark::Both => (Some("true"), Some(self.lease.as_str()), Some("true")),
            Mark::Standby => (None, Some(self.lease.as_str()), Some("true")),
            Mark::None => (None, None, None),
        };
        serde_json::json!({"metadata": {"labels": {
            LEADER_LABEL: leader, LEASE_LABEL: lease, STANDBY_LABEL: standby}}})
    }

    /// The merge patch that takes a previous leader's mark from its pod (its standby mark is
    /// its own: a restarted container sets it).
    fn unmark_leader(&self) -> serde_json::Value {
        serde_json::json!({"metadata": {"labels": {LEADER_LABEL: null, LEASE_LABEL: null}}})
    }

    /// Marks the pod. A JSON merge patch of the labels: nothing else of the pod is touched, and
    /// removing an absent label is no error.
    async fn set(&self, mark: Mark) -> Result<(), Error> {
        self.api
            .patch(
                &self.pod,
                &PatchParams::default(),
                &Patch::Merge(&self.patch(mark)),
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
        let patch = self.unmark_leader();
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

    /// Keeps the marks equal to the role, one patch at a time (so an older patch can never land
    /// after a newer one): standby at start (a restarted container may carry its predecessor's
    /// leader mark), both for [`STANDBY_OVERLAP`] once leading (and then the leader mark taken
    /// from any previous leader's pod), then leader only; standby again on stepping down, none
    /// when the election stops. A leader handing over on shutdown keeps its marks, also when the
    /// election stops: the next leader takes the leader's mark from its pod once it carries its
    /// own, so the Service always has an endpoint (the terminating pod, which kube-proxy routes
    /// to while no other is ready, answers 503 with `Retry-After` until the next leader's pod
    /// takes over).
    pub(crate) async fn follow(self, mut role: watch::Receiver<Role>) {
        let mut marked: Option<Mark> = None;
        // While marked both (and only then): when the standby mark goes.
        let mut overlap_ends: Option<tokio::time::Instant> = None;
        loop {
            let now_role = *role.borrow_and_update();
            let leading = now_role == Role::Leading;
            let now = tokio::time::Instant::now();
            let want = match (now_role, marked) {
                (Role::HandingOver, Some(mark)) => {
                    overlap_ends = None;
                    mark
                }
                (Role::HandingOver | Role::Following, _) => Mark::Standby,
                (Role::Leading, Some(Mark::Leader)) => Mark::Leader,
                (Role::Leading, Some(Mark::Both)) if overlap_ends.is_some_and(|end| now >= end) => {
                    Mark::Leader
                }
                (Role::Leading, _) => Mark::Both,
            };
            if marked != Some(want) {
                let result = match self.set(want).await {
                    Ok(()) if want == Mark::Both => self.unmark_others().await,
                    other => other,
                };
                match result {
                    Ok(()) => {
                        tracing::info!(pod = %self.pod, leading, mark = ?want, "marks of the pod updated");
                        overlap_ends = (want == Mark::Both).then(|| now + STANDBY_OVERLAP);
                        marked = Some(want);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, leading, "updating the marks of the pod failed; retrying in 1s");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                }
            }
            let changed = match overlap_ends {
                Some(end) => tokio::select! {
                    changed = role.changed() => changed,
                    () = tokio::time::sleep_until(end) => Ok(()),
                },
                None => role.changed().await,
            };
            if changed.is_err() {
                if *role.borrow() == Role::HandingOver {
                    tracing::info!(pod = %self.pod, mark = ?marked, "handed over: the marks stay for the next leader to take");
                } else if marked != Some(Mark::None)
                    && let Err(e) = self.set(Mark::None).await
                {
                    tracing::warn!(error = %e, "removing the marks of the pod failed");
                }
                return;
            }
        }
    }
}

/// What a pod is marked as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mark {
    /// The leader's Service selects it.
    Leader,
    /// Both Services: a new leader's, for [`STANDBY_OVERLAP`].
    Both,
    /// The standby's Service selects it.
    Standby,
    /// Neither (the election stopped).
    None,
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    reason = "a test's tasks end with the test's runtime"
)]
mod tests;
