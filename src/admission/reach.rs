//! Whether kube-apiserver reaches the guard's doors. A door kube-apiserver cannot call (a
//! NetworkPolicy naming the wrong addresses, a firewall between a managed control plane and the
//! nodes, a webhook configuration that points elsewhere) lets every eviction through under
//! `failurePolicy: Ignore`, and nothing else would say so before a drain ran through an
//! operation in flight. So each replica checks, every `GUARD_REACH_CHECK_INTERVAL`, that it is
//! reached, as kube-apiserver itself would reach it:
//!
//! - it asks kube-apiserver for a **dry-run** eviction of the pod [`CHECK_POD`] of the server's
//!   namespace, which does not exist (the server's Role allows evicting that name only).
//!   kube-apiserver calls the validating webhooks before it looks the pod up, so the review goes
//!   to the doors, and then the eviction ends `404`: nothing is evicted or written;
//! - a door that receives such a review (any replica's) answers it allowed, with a warning naming
//!   the door and the replica that answered (its pod and a random name per process), and nothing
//!   else: no decision counted, no log line, no Event. kube-apiserver returns the webhooks'
//!   warnings with its answer, whatever its status;
//! - the replica reads them: while it leads, its check must have been answered at the leader's
//!   door by itself (the Service `ifo-apiserver` selects the leader alone); else at the
//!   standby's door, by whichever standby the Service `ifo-guard` chose (with more than one
//!   standby, a standby's check tells that the standbys' door is reached, not that it is).
//!
//! The result is `ifo_guard_reached` (1 reached, 0 not or not known) and a count of the checks
//! by result; a change is logged, a door not reached as a warning naming what to look at. A check
//! that no webhook saw (kube-apiserver refused it before admission, a missing `create
//! pods/eviction` say, or did not answer) tells nothing of the doors: `failed`, logged with the
//! cause. The checks stop when the server begins to shut down: a check its own closing doors
//! could not answer would read as a door not reached.

use crate::api::ApiState;
use crate::metrics::{AdmissionDoor, ReachResult};
use kube::core::DynamicObject;
use kube::core::admission::AdmissionRequest;
use std::sync::Arc;
use std::time::Duration;

/// The pod the checks ask to evict, in the server's namespace (none exists).
pub(crate) const CHECK_POD: &str = "ifo-guard-check";

/// How a door's answer to a check begins.
const ANSWER_PREFIX: &str = "ifo-guard-check: ";

/// A replica's part in the checks (see the [module](self)).
#[derive(Clone, Debug)]
pub(crate) struct Reach {
    /// Names this replica in its doors' answers: its pod and a random name, one per process.
    instance: Arc<str>,
    /// The server's namespace, where the checks are sent (its Role allows them there only).
    namespace: Arc<str>,
}

impl Reach {
    /// The part of replica `pod` in the server's `namespace`.
    pub(crate) fn new(pod: &str, namespace: &str) -> anyhow::Result<Reach> {
        let random = crate::certificates::random_hex(6)?;
        Ok(Reach {
            instance: format!("{pod}/{random}").into(),
            namespace: namespace.into(),
        })
    }

    /// Whether `request` is a check, any replica's: a dry-run eviction of [`CHECK_POD`] of the
    /// server's namespace. A real eviction of a pod so named is judged as any.
    pub(crate) fn is_check(&self, request: &AdmissionRequest<DynamicObject>) -> bool {
        request.dry_run
            && request.name == CHECK_POD
            && request.namespace.as_deref() == Some(&*self.namespace)
            && super::review::is_eviction(request)
    }

    /// What `door` answers a check with: a warning that kube-apiserver returns to the checker.
    pub(crate) fn answer(&self, door: AdmissionDoor) -> String {
        format!(
            "{ANSWER_PREFIX}door {} of {} answered",
            door.as_str(),
            self.instance
        )
    }

    /// Whether the warnings of a check's answer say that it reached `door`: answered by this
    /// replica at the leader's, by any at the standby's.
    fn reached(&self, door: AdmissionDoor, warnings: &[String]) -> bool {
        let expected = match door {
            AdmissionDoor::EvictionsStandby => format!("{ANSWER_PREFIX}door {} of ", door.as_str()),
            _ => self.answer(door),
        };
        warnings.iter().any(|w| w.contains(&expected))
    }
}

/// What one check found.
#[derive(Debug)]
enum Found {
    /// kube-apiserver called the door: the warnings of its answer.
    Answered(Vec<String>),
    /// The check tells nothing of the doors.
    Failed(anyhow::Error),
}

/// Sends one check: the dry-run eviction of [`CHECK_POD`], within `deadline`.
async fn send(reach: &Reach, client: &kube::Client, deadline: Duration) -> Found {
    let (namespace, pod) = (&reach.namespace, CHECK_POD);
    let eviction = serde_json::json!({
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": pod, "namespace": &**namespace},
    });
    let request = http::Request::post(format!(
        "/api/v1/namespaces/{namespace}/pods/{pod}/eviction?dryRun=All"
    ))
    .header(http::header::CONTENT_TYPE, "application/json")
    .body(kube::client::Body::from(eviction.to_string().into_bytes()));
    let request = match request {
        Ok(request) => request,
        Err(e) => return Found::Failed(anyhow::Error::new(e).context("building the check")),
    };
    let response = match tokio::time::timeout(deadline, client.send(request)).await {
        Err(_) => return Found::Failed(anyhow::anyhow!("no answer within {deadline:?}")),
        Ok(Err(e)) => return Found::Failed(anyhow::Error::new(e).context("sending the check")),
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    let warnings: Vec<String> = response
        .headers()
        .get_all(http::header::WARNING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_owned)
        .collect();
    // A door answered: the webhooks were called, whatever kube-apiserver made of it then.
    // Else 404 (the webhooks were called, then the pod was looked up: there is none), 429 or a
    // success (a webhook refused it, or a pod so named exists), or a 500 of a webhook that
    // failed under `failurePolicy: Fail`: the doors were asked, and none of ours answered. Any
    // other answer (403: no right to evict in the namespace; 400: a webhook that cannot take a
    // dry run) came before the webhooks, or tells nothing of them.
    let failed_webhook = status == http::StatusCode::INTERNAL_SERVER_ERROR;
    if warnings.iter().any(|w| w.contains(ANSWER_PREFIX))
        || status == http::StatusCode::NOT_FOUND
        || status == http::StatusCode::TOO_MANY_REQUESTS
        || status.is_success()
    {
        return Found::Answered(warnings);
    }
    let said = {
        use http_body_util::BodyExt as _;
        let body = http_body_util::Limited::new(response.into_body(), 4096);
        match tokio::time::timeout(deadline, body.collect()).await {
            Ok(Ok(body)) => String::from_utf8_lossy(&body.to_bytes()).into_owned(),
            _ => String::new(),
        }
    };
    if failed_webhook && said.contains("failed calling webhook") {
        return Found::Answered(warnings);
    }
    Found::Failed(anyhow::anyhow!(
        "kube-apiserver answered {status} to a dry-run eviction in namespace {namespace}: {said}"
    ))
}

/// Checks every `interval` (at least a second) that kube-apiserver reaches the door this
/// replica stands behind (the leader's while `state` serves, else the standby's), each check
/// within `deadline`, until `stopping`.
pub(crate) async fn check(
    reach: Reach,
    client: kube::Client,
    state: Arc<ApiState>,
    (interval, deadline): (Duration, Duration),
    stopping: tokio_util::sync::CancellationToken,
) {
    let interval = interval.max(Duration::from_secs(1));
    let mut last: Option<(AdmissionDoor, ReachResult)> = None;
    loop {
        tokio::select! {
            () = stopping.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        let door = if state.is_serving() {
            AdmissionDoor::Evictions
        } else {
            AdmissionDoor::EvictionsStandby
        };
        let found = send(&reach, &client, deadline).await;
        let result = match &found {
            Found::Answered(warnings) if reach.reached(door, warnings) => ReachResult::Reached,
            Found::Answered(_) => ReachResult::Unreached,
            Found::Failed(_) => ReachResult::Failed,
        };
        crate::metrics::guard_reach_checked(result);
        if last == Some((door, result)) {
            continue;
        }
        last = Some((door, result));
        let door_name = door.as_str();
        match found {
            Found::Failed(e) => tracing::warn!(
                door = door_name,
                error = format!("{e:#}"),
                "could not check that kube-apiserver reaches this replica's guard door"
            ),
            Found::Answered(_) if result == ReachResult::Reached => {
                tracing::info!(
                    door = door_name,
                    "kube-apiserver reaches this replica's guard door"
                );
            }
            Found::Answered(warnings) => tracing::warn!(
                door = door_name,
                answered = ?warnings,
                "kube-apiserver did not call this replica's guard door: evictions are not guarded \
                 here (failurePolicy Ignore lets them through). Look at the webhook configuration \
                 ifo-maintenance-guard, the Services' endpoints, a NetworkPolicy or firewall \
                 between kube-apiserver and the pods' port 9443"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn review(name: &str, namespace: &str, dry_run: bool) -> AdmissionRequest<DynamicObject> {
        serde_json::from_value(json!({
            "uid": "u", "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction", "name": name, "namespace": namespace,
            "operation": "CREATE", "userInfo": {}, "dryRun": dry_run,
        }))
        .unwrap()
    }

    #[test]
    fn a_check_is_a_dry_run_eviction_of_the_check_pod_in_the_servers_namespace() {
        let reach = Reach::new("ifo-apiserver-0", "ifo-system").unwrap();
        assert!(reach.is_check(&review(CHECK_POD, "ifo-system", true)));
        // A real eviction, another namespace, another pod: judged as any.
        assert!(!reach.is_check(&review(CHECK_POD, "ifo-system", false)));
        assert!(!reach.is_check(&review(CHECK_POD, "team-a", true)));
        assert!(!reach.is_check(&review("app", "ifo-system", true)));
    }

    #[test]
    fn the_leaders_door_is_reached_when_it_answered_itself() {
        // Two processes of one pod (a restarted container) are told apart.
        let (one, other) = (
            Reach::new("ifo-apiserver-0", "ifo-system").unwrap(),
            Reach::new("ifo-apiserver-0", "ifo-system").unwrap(),
        );
        let header = |s: String| format!("299 - \"{s}\"");
        let leaders = header(one.answer(AdmissionDoor::Evictions));
        let standbys = header(other.answer(AdmissionDoor::EvictionsStandby));
        assert!(one.reached(
            AdmissionDoor::Evictions,
            &[leaders.clone(), standbys.clone()]
        ));
        // Answered at the leader's door by another server: not this one's door.
        let others = header(other.answer(AdmissionDoor::Evictions));
        assert!(!one.reached(AdmissionDoor::Evictions, &[others, standbys.clone()]));
        // A standby: reached when any standby answered at the standby's door.
        assert!(one.reached(
            AdmissionDoor::EvictionsStandby,
            &[leaders.clone(), standbys]
        ));
        assert!(!one.reached(AdmissionDoor::EvictionsStandby, &[leaders]));
        assert!(!one.reached(AdmissionDoor::Evictions, &[]));
    }
}
