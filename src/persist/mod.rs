//! Persistence mode (`--persist`): every live operation also gets a real cluster-scoped
//! `ifo.kubevirt.io/v1alpha1` `InFlightOperation` custom resource, in the schema of the
//! InFlightOperations operator, so that what reads the operator's objects (dashboards,
//! scripts, its `kubectl-ifo`) keeps working while `kubectl get ifos` stays the live API.
//!
//! The writer follows the index's change stream and never sits on the path of the live API,
//! of evaluation or of the debounce table: a slow or unreachable kube-apiserver delays only
//! the copies. Its pending work is one entry per operation (the latest state wins), each copy
//! is written at most once per `PERSIST_INTERVAL`, failures back off with jitter, and all
//! writes share one rate limit (`PERSIST_QPS`, `PERSIST_BURST`).
//!
//! Copies are created with their status (the CRD has no `/status` subresource: only this
//! server writes them, so a lifecycle costs three writes — create, completion, delete — not
//! four), replaced conditionally on their resourceVersion and deleted conditionally on their
//! uid. Objects without our label are never changed or deleted.
//!
//! At start the copies are read back before anything is evaluated (see [`read_back`]), so an
//! operation still in flight keeps its name, uid and start time across a restart.

mod object;
mod pending;
mod restore;
mod writer;

pub(crate) use restore::{ReadBack, api, read_back};
pub(crate) use writer::{Settings, Writer};

/// What can go wrong in persistence mode.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The CRD of the persisted kind is not installed.
    #[error(
        "the CRD inflightoperations.ifo.kubevirt.io is not installed (kubectl apply -k deploy/persist/): {0}"
    )]
    NotInstalled(#[source] kube::Error),
    /// The server may not list (or write) the persisted kind.
    #[error(
        "the server may not list inflightoperations.ifo.kubevirt.io (its ClusterRole is in deploy/persist/rbac.yaml): {0}"
    )]
    Forbidden(#[source] kube::Error),
    /// Reading the copies back failed (kube-apiserver unreachable, refused, late).
    #[error("reading the persisted InFlightOperations back: {0}")]
    ReadBack(#[source] kube::Error),
    /// A copy of ours that does not hold a record (edited by hand, or from another version).
    #[error("persisted InFlightOperation {name} cannot be read: {why}")]
    InvalidCopy {
        /// Its name.
        name: String,
        /// What is wrong with it.
        why: String,
    },
}
