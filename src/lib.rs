//! Live InFlightOperations: a Kubernetes aggregated API server that shows every operation in
//! flight in a cluster, detected by CEL rules in OperationRuleSets and served from memory.
//!
//! Pipeline: `ruleset` (types, compile) → `reconcile` (the controller) → `watch` (dynamic watchers) → `detect`
//! (`evaluate` → `track` (debounce) → `index`) → `api` (behind `auth`). The Kubernetes ports are the `ifo-apimachinery` crate, the API's names `ifo-model`;
//! the kubectl plugin (`kubectl-ifo`) and the local cluster (`ifo-dev`) are crates of their own.

mod access;
pub mod admission;
pub mod api;
mod auth;
mod backoff;
pub mod certificates;
mod client;
pub mod config;
mod detect;
pub mod evaluate;
mod gate;
pub mod history;
pub mod index;
mod inventory;
mod lease;
pub mod library;
pub mod metrics;
#[cfg(test)]
mod mock_apiserver;
pub mod operation;
mod persist;
pub mod readiness;
mod reconcile;
pub mod ruleset;
pub mod schedule;
pub mod server;
mod supervise;
pub mod track;
pub mod watch;
