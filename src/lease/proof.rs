//! Proof that the Lease's holder is gone, from what kubelet reports of its pod.
//!
//! A crashed leader renews no more, yet others would wait a whole lease duration before taking
//! its Lease. kubelet reports the end of a container within a second or two; when that report
//! proves the holder's process is gone, a follower takes the Lease at once. Only a proof counts:
//! a pod that is merely NotReady, Unknown, on a lost node or behind a partition proves nothing,
//! and the Lease's expiry stays the rule.
//!
//! The holder's identity is `<pod>_<random>` (a restarted container is a new candidate with a new
//! identity), so its pod is known, but not which of the pod's successive containers runs it: the
//! container kubelet reports ended may be the holder's, or the one before it, the holder being
//! the restarted one. Time tells them apart. The holder wrote `acquireTime` when it took the
//! Lease, by the clock of its node; kubelet reports `finishedAt` of the container by the same
//! clock. A pod's containers of one name run one after the other, so a container that ended
//! *after* the holder took the Lease is the holder's own or a later one: either way the holder's
//! process had ended. One that ended before may be the predecessor of the holder's: no proof.
//! A restart count or a container ID that changed proves nothing more on its own.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerState, Pod};

/// The pod a holder identity names: the identity up to its last `_`.
pub(super) fn holder_pod(identity: &str) -> Option<&str> {
    identity
        .rsplit_once('_')
        .map(|(pod, _)| pod)
        .filter(|p| !p.is_empty())
}

/// The latest end of a pod's server container that kubelet reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ContainerEnd {
    /// The pod's name.
    pub pod: String,
    /// The container runtime's ID of the container that ended.
    pub container_id: String,
    /// When it ended, by the clock of its node (kubelet reports whole seconds).
    pub finished_at: Timestamp,
    /// The pod's restart count of the container when this was reported.
    pub restart_count: i32,
}

/// The latest end of the container `container` that `pod`'s status reports: its current state
/// if terminated, else its last state (the one before a restart). `None` while it never ended
/// (or no status says so: a pod deleted while still reported running, as a force deletion or a
/// lost node leaves it, proves nothing).
pub(super) fn last_end(pod: &Pod, container: &str) -> Option<ContainerEnd> {
    let status = pod
        .status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|s| s.name == container)?;
    let terminated = |state: Option<&ContainerState>| {
        state
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| Some((t.finished_at.as_ref()?.0, t.container_id.clone())))
    };
    let (finished_at, id) = terminated(status.state.as_ref())
        .map(|(at, id)| (at, id.or_else(|| status.container_id.clone())))
        .or_else(|| terminated(status.last_state.as_ref()))?;
    Some(ContainerEnd {
        pod: pod.metadata.name.clone()?,
        container_id: id.unwrap_or_default(),
        finished_at,
        restart_count: status.restart_count,
    })
}

/// Whether `end` proves that the holder `identity`, which took the Lease at `acquired` (the
/// Lease's `acquireTime`, written by the holder), is gone: the end is of the holder's pod and
/// came after `acquired`. `finished_at` has whole seconds, the real end came at or after it:
/// strictly later than `acquired` is the proof.
pub(super) fn proves_gone(identity: &str, acquired: Timestamp, end: &ContainerEnd) -> bool {
    holder_pod(identity) == Some(end.pod.as_str()) && end.finished_at > acquired
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTAINER: &str = "ifo-apiserver";
    const HOLDER: &str = "ifo-apiserver-7d9f-abcde_00000000deadbeef";

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    /// A pod as kubelet reports it: `name`, and the status of its containers.
    fn pod(name: &str, statuses: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ifo-system", "uid": "u1"},
            "status": {"phase": "Running", "containerStatuses": statuses},
        }))
        .unwrap()
    }

    fn running(id: &str, restarts: i32, last: serde_json::Value) -> serde_json::Value {
        serde_json::json!([{
            "name": CONTAINER, "image": "i", "imageID": "", "ready": true,
            "restartCount": restarts, "containerID": id,
            "state": {"running": {"startedAt": "2026-01-01T10:00:00Z"}},
            "lastState": last,
        }])
    }

    fn terminated(id: &str, finished: &str) -> serde_json::Value {
        serde_json::json!({"terminated": {
            "exitCode": 137, "reason": "Error", "containerID": id, "finishedAt": finished,
        }})
    }

    /// The holder's pod (the pod named in [`HOLDER`]) with `statuses`.
    fn holders(statuses: serde_json::Value) -> Pod {
        pod("ifo-apiserver-7d9f-abcde", statuses)
    }

    /// The server's container, not started again since it terminated at 10:05:00.
    fn terminated_container() -> serde_json::Value {
        serde_json::json!([{
            "name": CONTAINER, "image": "i", "imageID": "", "ready": false,
            "restartCount": 0, "containerID": "containerd://a",
            "state": terminated("containerd://a", "2026-01-01T10:05:00Z"),
        }])
    }

    /// The server's container restarted `restarts` times, the last one ending at 10:05:00.
    fn restarted(restarts: i32) -> serde_json::Value {
        let last = terminated("containerd://a", "2026-01-01T10:05:00Z");
        running("containerd://b", restarts, last)
    }

    /// The server's container `id`, running since it first started.
    fn never_ended(id: &str) -> serde_json::Value {
        running(id, 0, serde_json::json!({}))
    }

    fn proof(identity: &str, acquired: &str, pod: &Pod) -> bool {
        last_end(pod, CONTAINER).is_some_and(|e| proves_gone(identity, at(acquired), &e))
    }

    #[test]
    fn the_holders_pod_is_its_identity_up_to_the_last_underscore() {
        assert_eq!(holder_pod(HOLDER), Some("ifo-apiserver-7d9f-abcde"));
        assert_eq!(holder_pod("host"), None);
        assert_eq!(holder_pod("_1234"), None);
    }

    #[test]
    fn a_running_container_that_never_ended_proves_nothing() {
        let p = holders(never_ended("containerd://a"));
        assert_eq!(last_end(&p, CONTAINER), None);
        assert!(!proof(HOLDER, "2026-01-01T10:00:05Z", &p));
    }

    #[test]
    fn the_holders_container_terminated_after_it_took_the_lease_is_proof() {
        let p = holders(terminated_container());
        let end = last_end(&p, CONTAINER).unwrap();
        assert_eq!(end.container_id, "containerd://a");
        assert!(proof(HOLDER, "2026-01-01T10:00:05Z", &p));
        // Ended in the same second as the holder took the Lease: it may have been the previous
        // container, ended just before.
        assert!(!proof(HOLDER, "2026-01-01T10:05:00.400Z", &p));
    }

    #[test]
    fn a_restart_is_proof_when_the_replaced_container_ended_after_the_holder_took_the_lease() {
        // kubelet restarted the container: a new ID, the restart count up, the old one's end in
        // lastState.
        let p = holders(restarted(1));
        let end = last_end(&p, CONTAINER).unwrap();
        assert_eq!(
            (end.container_id.as_str(), end.restart_count),
            ("containerd://a", 1)
        );
        assert!(proof(HOLDER, "2026-01-01T10:00:05Z", &p));
    }

    #[test]
    fn a_restart_before_the_holder_took_the_lease_proves_nothing() {
        // The holder is the restarted container: it took the Lease after its predecessor ended.
        let p = holders(restarted(3));
        assert!(!proof(HOLDER, "2026-01-01T10:05:02Z", &p));
    }

    #[test]
    fn another_pod_or_another_container_proves_nothing() {
        let other = pod("ifo-apiserver-7d9f-zzzzz", restarted(1));
        assert!(!proof(HOLDER, "2026-01-01T10:00:05Z", &other));
        // A sidecar of the holder's pod ended: the server runs on.
        let sidecar = holders(serde_json::json!([{
            "name": "proxy", "image": "i", "imageID": "", "ready": true,
            "restartCount": 1, "containerID": "containerd://s2",
            "state": {"running": {}},
            "lastState": terminated("containerd://s1", "2026-01-01T10:05:00Z"),
        }]));
        assert_eq!(last_end(&sidecar, CONTAINER), None);
        // A holder outside any pod (identity without a pod name).
        assert!(!proof("myhost", "2026-01-01T10:00:05Z", &other));
    }

    #[test]
    fn a_deleted_pod_proves_the_end_its_last_status_reports_and_nothing_more() {
        // Deleted gracefully: kubelet reported the container terminated before the pod went.
        let ended = holders(terminated_container());
        assert!(proof(HOLDER, "2026-01-01T10:00:05Z", &ended));
        // Force-deleted while still reported running (a lost node): the process may live on.
        let forced = holders(never_ended("containerd://a"));
        assert!(!proof(HOLDER, "2026-01-01T10:00:05Z", &forced));
    }

    #[test]
    fn a_pod_replaced_under_the_same_name_proves_only_what_its_status_reports() {
        // A new pod (new uid) of the same name, its container never ended: the holder may be
        // this pod's process.
        let mut replaced = holders(never_ended("containerd://c"));
        replaced.metadata.uid = Some("u2".into());
        assert!(!proof(HOLDER, "2026-01-01T10:00:05Z", &replaced));
    }

    #[test]
    fn a_pod_without_status_or_a_waiting_container_proves_nothing() {
        let pending = holders(serde_json::json!([]));
        assert_eq!(last_end(&pending, CONTAINER), None);
        let waiting = holders(serde_json::json!([{
            "name": CONTAINER, "image": "i", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}},
        }]));
        assert_eq!(last_end(&waiting, CONTAINER), None);
    }
}
