//! The third phase of building the server: what answers requests, made of the sources and the
//! pipeline. The API's state and its routes behind the access control that authenticates and
//! authorizes every request; the admission doors (with the maintenance guard, its Events writer
//! is a task of the server), whose routes are served on a listener of their own.

use std::sync::Arc;

use super::pipeline::Pipeline;
use super::sources::Sources;
use crate::access::{self, AccessControl};
use crate::admission;
use crate::admission::evictions::Evictions;
use crate::admission::node_events::NodeEvents;
use crate::admission::reach::Reach;
use crate::api::{self, ApiState};
use crate::auth::{Authenticator, Authorizer};
use crate::config::ServeArgs;
use crate::readiness::Readiness;
use crate::supervise::Tasks;

/// What answers requests.
pub(super) struct Serving {
    /// The API's state, which leadership turns serving on and off.
    pub(super) state: Arc<ApiState>,
    /// The API's routes (`SECURE_PORT`).
    pub(super) api: axum::Router,
    /// The admission doors' routes (`ADMISSION_PORT`).
    pub(super) doors: axum::Router,
}

impl Serving {
    /// Makes it; serving starts later (see `Server::run`).
    pub(super) fn build(
        args: &ServeArgs,
        sources: &Sources,
        pipeline: &Pipeline,
        readiness: &Readiness,
        tasks: &mut Tasks,
    ) -> anyhow::Result<Serving> {
        let limits = api::Limits {
            max_watches: args.max_watches,
            max_watches_per_user: args.max_watches_per_user,
            max_watch_bytes: args.max_watch_memory,
            max_watch_bytes_per_user: args.max_watch_memory_per_user,
        };
        let state = Arc::new(
            ApiState::new(pipeline.reader.clone(), readiness.clone(), limits)
                .with_detection(pipeline.targets.reader())
                .with_inventory(pipeline.inventory.clone())
                .with_schedules(pipeline.schedules.clone()),
        );
        // Who may call the admission doors, and the turns of those who have not proven it.
        let intake = Arc::new(admission::Intake::new(
            sources.callers.clone(),
            sources.trust.clone(),
            sources.certificates.as_ref().map_or_else(
                || tokio::sync::watch::channel(None).1,
                crate::certificates::Keeper::door_key,
            ),
        ));
        let evictions = match pipeline.pods.clone() {
            Some(pods) => {
                let instance = args
                    .pod_name
                    .clone()
                    .unwrap_or_else(|| "ifo-apiserver".to_owned());
                // Whether kube-apiserver reaches the door this replica stands behind.
                let reach = Reach::new(&instance, &args.leader_elect_resource_namespace)?;
                let (events, writer) = NodeEvents::new(
                    sources.client.clone(),
                    instance,
                    crate::client::api_timeout(args),
                );
                tasks.once("guard-events", writer);
                tracing::info!(
                    path = admission::EVICTIONS_PATH,
                    when_unknown = ?args.guard_when_unknown,
                    "the maintenance guard answers reviews of evictions"
                );
                let client = sources
                    .sending_once
                    .clone()
                    .unwrap_or_else(|| sources.client.clone());
                tasks.once(
                    "guard-reach-check",
                    admission::reach::check(
                        reach.clone(),
                        client,
                        state.clone(),
                        (
                            args.guard_reach_check_interval,
                            crate::client::api_timeout(args),
                        ),
                        tasks.stopping(),
                    ),
                );
                Some(Evictions {
                    gates: state.gates(),
                    inventory: pipeline.inventory.clone(),
                    pods,
                    when_unknown: args.guard_when_unknown,
                    events,
                    intake: intake.clone(),
                    reach,
                })
            }
            None => None,
        };
        let gates = state.clone();
        crate::metrics::serve_gates_from(move || gates.maintenance_gates());
        let access_control = Arc::new(AccessControl {
            authenticator: Authenticator::new(sources.trust.clone(), sources.client.clone()),
            authorizer: Authorizer::new(sources.client.clone()),
        });
        // Only the routes the server has are behind access control: any other path is a 404 for
        // everyone, and never costs a review or a cache entry.
        let api = api::router(state.clone())
            .route_layer(axum::middleware::from_fn_with_state(
                access_control,
                access::control,
            ))
            .merge(api::health_router(state.clone()));
        // The admission doors, on a listener of their own, without the API's authentication:
        // kube-apiserver calls webhooks without credentials unless it is configured to present a
        // certificate, and a door reveals nothing but whether the object it is sent compiles and
        // reads what its targets' schemas have, as any authenticated user reads them at
        // /openapi/v3 (see `admission`).
        let doors = admission::router(
            pipeline.engine.clone(),
            evictions,
            intake,
            Some(pipeline.schemas.clone()),
        );
        Ok(Serving { state, api, doors })
    }
}
