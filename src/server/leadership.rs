//! Leader election as the server follows it: serving only while this replica leads, each term
//! starting a new epoch of the index (and, in persistence mode, taking the copies' identities
//! and running the writer).

use std::sync::Arc;

use super::persistence::CopyWriter;
use super::pipeline::Pipeline;
use crate::api::ApiState;
use crate::config::ServeArgs;
use crate::index::{Epochs, IndexReader};
use crate::lease;
use crate::supervise::Tasks;

/// The running leader elector, as the shutdown sequence needs it.
pub(super) struct Elector {
    /// Asks the elector to hand the Lease over and stop.
    pub(super) stop: tokio::sync::oneshot::Sender<()>,
    /// Resolves when it has.
    pub(super) stopped: tokio::sync::oneshot::Receiver<()>,
}

/// Who serves, and how the server hears that a term ended.
pub(super) struct Leadership {
    /// The elector, for the shutdown sequence; none without leader election.
    pub(super) elector: Option<Elector>,
    /// Counts the terms as leader that ended: each listener closes its connections on a change.
    pub(super) term_ended: tokio::sync::watch::Receiver<u64>,
}

/// The fourth phase of building the server: who serves. Without leader election (`election`
/// none) this replica serves at once, and in persistence mode its copy writer runs; with it,
/// the elector and what follows its role run under `tasks` (the elector and leadership as
/// essential tasks: a replica that cannot follow its role must not serve), and `leading` says
/// whether this replica leads.
pub(super) fn lead(
    args: &ServeArgs,
    election: Option<lease::Settings>,
    client: &kube::Client,
    pipeline: &mut Pipeline,
    state: &Arc<ApiState>,
    leading: tokio::sync::watch::Sender<bool>,
    tasks: &mut Tasks,
) -> Leadership {
    let (ended, term_ended) = tokio::sync::watch::channel(0_u64);
    let (reader, persistence) = (&pipeline.reader, pipeline.persistence.take());
    let elector = match election {
        None => {
            state.set_serving(true);
            if let Some(persistence) = persistence {
                let reader = reader.clone();
                // The copies read at start the first time; read again after a failure.
                let mut found = Some(persistence.found);
                let writer = persistence.writer;
                tasks.restarting("persistence-writer", move || {
                    writer.clone().run(found.take(), reader.clone())
                });
            }
            None
        }
        Some(settings) => {
            state.set_serving(false);
            let (namespace, lease_name) = (settings.namespace.clone(), settings.name.clone());
            let (mut elector, role) = lease::Elector::new(client.clone(), settings);
            tasks.once("leader-role", follow_role(role.clone(), leading));
            if let Some(pod) = &args.pod_name {
                let label = lease::LeaderLabel::new(client.clone(), &namespace, pod, &lease_name);
                let role = role.clone();
                tasks.restarting("leader-label", move || label.clone().follow(role.clone()));
                // A rollout's newer replica, Ready: the leader hands over to it while its own
                // pod still runs.
                let (successor, named) = tokio::sync::watch::channel(None);
                elector = elector.hand_over_to(named);
                let pods = kube::Api::namespaced(client.clone(), &namespace);
                let (own, lease) = (pod.clone(), lease_name.clone());
                tasks.once(
                    "successor",
                    lease::watch_successor(pods, own, lease, successor),
                );
            }
            let (stop, stop_asked) = tokio::sync::oneshot::channel();
            let (stopped_tx, stopped) = tokio::sync::oneshot::channel();
            // A replica whose elector is gone must not go on as if it led: essential.
            tasks.essential("leader-elector", async move {
                elector.run(stop_asked).await;
                let _ = stopped_tx.send(());
            });
            tasks.essential(
                "leadership",
                follow_leadership(
                    role,
                    (
                        pipeline
                            .epochs
                            .take()
                            .expect("leadership begins the epochs"),
                        reader.clone(),
                    ),
                    state.clone(),
                    persistence.map(|p| p.writer),
                    ended,
                ),
            );
            Some(Elector { stop, stopped })
        }
    };
    Leadership {
        elector,
        term_ended,
    }
}

/// Serves while this replica leads. Each term, the copies are read again and their identities
/// taken (persistence mode, see [`CopyWriter::take_over`]) and the index starts a new epoch
/// (RVs handed out by other replicas become too old) before requests are answered, and the
/// persistence writer runs; when the term ends, requests get 503, open watches end and the
/// writer stops.
pub(super) async fn follow_leadership(
    mut role: tokio::sync::watch::Receiver<lease::Role>,
    (epochs, reader): (Epochs, IndexReader),
    state: Arc<ApiState>,
    persistence: Option<CopyWriter>,
    term_ended: tokio::sync::watch::Sender<u64>,
) {
    // This term's writer, if any: aborted when the term ends, or when this task does.
    let mut writer = tokio::task::JoinSet::new();
    // This replica is handing, or handed, the lead over to a newer one (see below).
    let mut handed_over = false;
    loop {
        let now = *role.borrow_and_update();
        let leading = now == lease::Role::Leading;
        if leading && !state.is_serving() {
            let found = match &persistence {
                Some(p) => p.take_over().await,
                None => None,
            };
            if *role.borrow() != lease::Role::Leading {
                // The term ended while the copies were read.
                continue;
            }
            let now = u64::try_from(jiff::Timestamp::now().as_microsecond()).unwrap_or(0);
            let rv = epochs.begin(now);
            state.set_serving(true);
            tracing::info!(resource_version = rv, "serving as the leader");
            if let Some(p) = &persistence {
                let (p, reader) = (p.clone(), reader.clone());
                let mut found = found;
                writer.spawn(crate::supervise::restarting(
                    "persistence-writer",
                    move || p.clone().run(found.take(), reader.clone()),
                ));
            }
        } else if now == lease::Role::HandingOver && state.is_serving() {
            // Handing the lead over: one leader at a time, so it stops answering (503 with
            // Retry-After, which clients retry) but keeps its connections, and its pod keeps
            // the leader's mark, until the next leader serves and the Service routes there.
            tracing::info!("not serving: handing the lead over");
            stand_down(&state, &mut writer);
            handed_over = true;
        } else if !leading && state.is_serving() {
            tracing::info!("not serving: this replica does not lead");
            stand_down(&state, &mut writer);
            term_ended.send_modify(|n| *n += 1);
        } else if handed_over && now == lease::Role::Following {
            // The next leader holds the Lease and marks its pod; kube-proxy routes the Service
            // there within a moment: then the connections made here are closed (clients
            // reconnect to the next leader), and once more a little later for any made while
            // kube-proxy still routed here.
            handed_over = false;
            tokio::time::sleep(super::HANDOVER_GRACE).await;
            tracing::info!("handed over: closing the connections made to this replica");
            term_ended.send_modify(|n| *n += 1);
            tokio::time::sleep(super::HANDOVER_GRACE).await;
            term_ended.send_modify(|n| *n += 1);
        }
        if role.changed().await.is_err() {
            // The elector stopped (shutdown, or it failed): it stopped leading first.
            if state.is_serving() {
                tracing::info!("not serving: the elector stopped");
            }
            stand_down(&state, &mut writer);
            // Nothing is left to follow. The elector's own task says why it stopped: were this
            // one to end too, whichever of the two ended first would be the failure `/livez`
            // names, often this one ("leadership"), not the cause. It waits for the shutdown.
            std::future::pending::<()>().await;
        }
    }
}

/// Tells `leading` whether this replica leads, until the elector stops.
pub(super) async fn follow_role(
    mut role: tokio::sync::watch::Receiver<lease::Role>,
    leading: tokio::sync::watch::Sender<bool>,
) {
    loop {
        let _ = leading.send(*role.borrow_and_update() == lease::Role::Leading);
        if role.changed().await.is_err() {
            let _ = leading.send(false);
            return;
        }
    }
}

/// Ends a term: requests get 503, open watches end, the persistence writer stops.
fn stand_down(state: &ApiState, writer: &mut tokio::task::JoinSet<()>) {
    state.set_serving(false);
    writer.abort_all();
}
