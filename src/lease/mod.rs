//! Leader election over a `coordination.k8s.io/v1` Lease, as Kubernetes components do it
//! (`--leader-elect`, lease duration 15s, renew deadline 10s, retry period 2s).
//!
//! Every replica watches, evaluates and keeps its index all the time; only the leader answers
//! the API (and, with persistence, writes the copies). `decide` is the pure rule for one look at
//! the Lease; `elector` runs it against kube-apiserver and publishes the [`Role`]; `label` marks
//! the leader's pod for the Service. A crashed leader is replaced before its Lease expires when
//! kubelet proves its process gone: `proof` is the rule, `holder_pod` watches the holder's pod.
//!
//! Expiry is judged by this replica's own clock from when it last saw the Lease change (the
//! holder's renewals), never by comparing the holder's timestamps with ours, so clock skew
//! between nodes cannot hand the lease to two replicas.

mod decide;
mod elector;
mod holder_pod;
mod label;
mod proof;
mod successor;

pub(crate) use elector::{Elector, Settings};
pub(crate) use label::LeaderLabel;
pub(crate) use successor::watch as watch_successor;

/// What this replica does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// It holds the lease: it serves.
    Leading,
    /// Another replica holds it (or nobody has it yet): it keeps its index warm and waits.
    Following,
    /// It led and is shutting down: it serves no more and has released the Lease (or is
    /// releasing it), but its pod keeps the leader's mark until the next leader takes the mark
    /// from it, so that the Service is never without an endpoint while the lead changes hands.
    HandingOver,
}

/// Why a look at the Lease failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// kube-apiserver answered with an error, or not at all.
    #[error("the lease {name}: {source}")]
    Api {
        /// `namespace/name` of the Lease.
        name: String,
        /// What the client reported.
        #[source]
        source: kube::Error,
    },
    /// The call did not return within the time left to renew.
    #[error("the lease {0}: no answer in time")]
    Timeout(String),
}
