//! Live InFlightOperations: a Kubernetes aggregated API server that shows every operation in
//! flight in a cluster, detected by CEL rules in OperationRuleSets and served from memory.
//!
//! Pipeline: `ruleset` (compile) → `watch` (dynamic watchers) → `evaluate` → `track` (debounce)
//! → `index` → `api` (behind `auth`). `dev` is the local real cluster used by the demo and tests.

pub mod api;
pub mod apimachinery;
pub mod auth;
pub mod client;
pub mod config;
pub mod dev;
pub mod evaluate;
pub mod index;
pub mod metrics;
pub mod operation;
pub mod plugin;
pub mod readiness;
pub mod rules;
pub mod ruleset;
pub mod server;
pub mod track;
pub mod watch;
