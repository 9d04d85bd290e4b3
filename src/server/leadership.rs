//! Leader election as the server follows it: serving only while this replica leads, each term
//! starting a new epoch of the index (and, in persistence mode, taking the copies' identities
//! and running the writer).

use std::sync::Arc;

use super::persistence::CopyWriter;
use crate::api::ApiState;
use crate::index::Index;
use crate::lease;

/// Serves while this replica leads. Each term, the copies are read again and their identities
/// taken (persistence mode, see [`CopyWriter::take_over`]) and the index starts a new epoch
/// (RVs handed out by other replicas become too old) before requests are answered, and the
/// persistence writer runs; when the term ends, requests get 503, open watches end and the
/// writer stops.
pub(super) async fn follow_leadership(
    mut role: tokio::sync::watch::Receiver<lease::Role>,
    index: Arc<Index>,
    state: Arc<ApiState>,
    persistence: Option<CopyWriter>,
    term_ended: Arc<tokio::sync::Notify>,
) {
    // This term's writer, if any: aborted when the term ends, or when this task does.
    let mut writer = tokio::task::JoinSet::new();
    loop {
        let leading = *role.borrow_and_update() == lease::Role::Leading;
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
            let rv = index.begin_epoch(now);
            state.set_serving(true);
            tracing::info!(resource_version = rv, "serving as the leader");
            if let Some(p) = &persistence {
                let (p, reader) = (p.clone(), index.reader());
                let mut found = found;
                writer.spawn(crate::supervise::restarting(
                    "persistence-writer",
                    move || p.clone().run(found.take(), reader.clone()),
                ));
            }
        } else if !leading && state.is_serving() {
            tracing::info!("not serving: this replica does not lead");
            stand_down(&state, &mut writer);
            term_ended.notify_one();
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
