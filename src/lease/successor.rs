//! The replica a leader hands the lead over to during a rollout: a standby of the same Lease
//! whose pod is of another template (its `pod-template-hash`), created after the leader's pod,
//! Ready and not terminating. A rollout starts such a pod before it stops an old one (with
//! `minReadySeconds`, some seconds after it is Ready); the leader hands over to it while the
//! leader's own pod still runs, so that the Service that selects the leader always has a Ready
//! endpoint (a terminating pod is never Ready, and the aggregator marks the APIService
//! unavailable, answering 503 itself, while its Service has no Ready endpoint).

use std::collections::BTreeMap;

use futures::StreamExt as _;
use ifo_model::ConditionStatus;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio::sync::watch;

use super::label::{LEASE_LABEL, STANDBY_LABEL};

/// The label a Deployment gives each pod of one template.
const TEMPLATE_LABEL: &str = "pod-template-hash";

/// What a pod is, for the choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Replica {
    pub template: Option<String>,
    pub created: Option<Time>,
    pub ready: bool,
    pub terminating: bool,
}

impl Replica {
    pub(super) fn of(pod: &Pod) -> Replica {
        let ready = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Ready" && ConditionStatus::holds(&c.status))
            });
        Replica {
            template: pod
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(TEMPLATE_LABEL))
                .cloned(),
            created: pod.metadata.creation_timestamp.clone(),
            ready,
            terminating: pod.metadata.deletion_timestamp.is_some(),
        }
    }
}

/// Among `standbys` (by pod name), the one to hand over to from `own`: Ready, not terminating,
/// of another template than `own`'s, created after `own`; the newest of those. None when `own`
/// has no template (not a Deployment's pod).
pub(super) fn choose<'a>(
    own: &Replica,
    standbys: &'a BTreeMap<String, Replica>,
) -> Option<&'a str> {
    let own_template = own.template.as_ref()?;
    standbys
        .iter()
        .filter(|(_, r)| {
            r.ready
                && !r.terminating
                && r.template.as_ref().is_some_and(|t| t != own_template)
                && r.created.as_ref().map(|c| c.0) > own.created.as_ref().map(|c| c.0)
        })
        .max_by_key(|(_, r)| r.created.as_ref().map(|c| c.0))
        .map(|(name, _)| name.as_str())
}

/// Publishes in `successor` the pod this replica (`own`, its pod's name) should hand the lead
/// over to (see [`choose`]), watching the standbys of the Lease `lease`; `None` while there is
/// none. Best effort: while the watch fails, nothing is handed over (a rollout then stops the
/// leader's pod, and the next leader takes over as on any shutdown).
pub(crate) async fn watch(
    pods: Api<Pod>,
    own: String,
    lease: String,
    successor: watch::Sender<Option<String>>,
) {
    let own_replica = loop {
        match pods.get_opt(&own).await {
            Ok(Some(pod)) => break Replica::of(&pod),
            Ok(None) => {
                tracing::debug!(pod = %own, "this replica's pod is not found: it hands the lead over to nobody");
                return std::future::pending().await;
            }
            Err(e) => {
                tracing::warn!(pod = %own, error = %e, "reading this replica's pod failed; retrying");
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            }
        }
    };
    if own_replica.template.is_none() {
        // Not a Deployment's pod: no rollout to hand over in.
        return std::future::pending().await;
    }
    let config =
        watcher::Config::default().labels(&format!("{STANDBY_LABEL}=true,{LEASE_LABEL}={lease}"));
    let mut events = std::pin::pin!(watcher::watcher(pods, config).default_backoff());
    let mut standbys: BTreeMap<String, Replica> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, Replica>> = None;
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Init) => listing = Some(BTreeMap::new()),
            Ok(watcher::Event::InitApply(pod)) => {
                if let (Some(list), Some(name)) = (listing.as_mut(), pod.metadata.name.clone()) {
                    list.insert(name, Replica::of(&pod));
                }
            }
            Ok(watcher::Event::InitDone) => standbys = listing.take().unwrap_or_default(),
            Ok(watcher::Event::Apply(pod)) => {
                if let Some(name) = pod.metadata.name.clone() {
                    standbys.insert(name, Replica::of(&pod));
                }
            }
            Ok(watcher::Event::Delete(pod)) => {
                if let Some(name) = &pod.metadata.name {
                    standbys.remove(name);
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "watching the standbys failed; retrying");
                continue;
            }
        }
        if listing.is_some() {
            continue;
        }
        let chosen = choose(&own_replica, &standbys).map(str::to_owned);
        successor.send_if_modified(|current| {
            let changed = *current != chosen;
            if changed {
                if let Some(pod) = &chosen {
                    tracing::info!(%pod, "a newer replica is Ready: the lead goes to it");
                }
                current.clone_from(&chosen);
            }
            changed
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Option<Time> {
        Some(Time(jiff::Timestamp::from_second(seconds).unwrap()))
    }

    fn replica(template: &str, created: i64, ready: bool, terminating: bool) -> Replica {
        Replica {
            template: Some(template.into()),
            created: at(created),
            ready,
            terminating,
        }
    }

    #[test]
    fn the_lead_goes_to_the_newest_ready_replica_of_another_template() {
        let own = replica("old", 100, true, false);
        let mut standbys = BTreeMap::new();
        // The other old replica: same template, never chosen.
        standbys.insert("old-b".to_owned(), replica("old", 101, true, false));
        assert_eq!(choose(&own, &standbys), None);
        // A new one not Ready yet, then Ready.
        standbys.insert("new-a".to_owned(), replica("new", 200, false, false));
        assert_eq!(choose(&own, &standbys), None);
        standbys.insert("new-a".to_owned(), replica("new", 200, true, false));
        assert_eq!(choose(&own, &standbys), Some("new-a"));
        // A newer one still: it.
        standbys.insert("new-b".to_owned(), replica("new", 210, true, false));
        assert_eq!(choose(&own, &standbys), Some("new-b"));
        // Terminating: never.
        standbys.insert("new-b".to_owned(), replica("new", 210, true, true));
        assert_eq!(choose(&own, &standbys), Some("new-a"));
        // Of another template but older than the leader (a rollback's leader on the new
        // template): not handed back.
        let mut older = BTreeMap::new();
        older.insert("old-c".to_owned(), replica("other", 50, true, false));
        assert_eq!(choose(&own, &older), None);
        // A leader that is not a Deployment's pod hands over to nobody.
        let bare = Replica {
            template: None,
            ..own
        };
        assert_eq!(choose(&bare, &standbys), None);
    }
}
