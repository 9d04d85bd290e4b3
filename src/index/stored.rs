//! A record as stored at one resourceVersion.

use std::sync::{Arc, OnceLock};

use serde_json::Value;
use serde_json::value::RawValue;

use crate::operation::InFlightOperation;

/// `(namespace, name)`; `None` namespace for cluster-scoped records. Sorts cluster-scoped
/// records first, then by namespace and name (the list order).
pub type ObjectKey = (Option<String>, String);

/// A record at a resourceVersion, shared by the store, the event ring and every watcher.
///
/// The wire forms are kept serialised: built once per RV however many watchers and lists send
/// them, written out as they are, and about a sixth of the memory of a `serde_json::Value`
/// (whose maps cost hundreds of bytes each) — which matters because the event ring holds
/// thousands of records.
#[derive(Debug)]
pub struct Stored {
    /// The resourceVersion at which the record took this state.
    pub rv: u64,
    /// The record itself, shared with the tracker that made it.
    pub op: Arc<InFlightOperation>,
    object: OnceLock<Box<RawValue>>,
    metadata: OnceLock<Box<RawValue>>,
    /// What it weighs in the event history ([`InFlightOperation::approx_bytes`]), reckoned
    /// once: an event counts its record and the state before it, which was itself an event's.
    weight: usize,
}

impl Stored {
    /// The record `op` at `rv`; its wire forms are serialised on first use.
    pub fn new(rv: u64, op: Arc<InFlightOperation>) -> Stored {
        Stored {
            rv,
            weight: op.approx_bytes(),
            op,
            object: OnceLock::new(),
            metadata: OnceLock::new(),
        }
    }

    /// The full API object with `metadata.resourceVersion` = `self.rv`, serialised.
    pub fn object(&self) -> &RawValue {
        self.object.get_or_init(|| raw(&self.op.wire(self.rv)))
    }

    /// Its `metadata` alone, serialised: for metadata-only clients and Table rows.
    pub fn metadata(&self) -> &RawValue {
        self.metadata
            .get_or_init(|| raw(&self.op.wire_metadata(self.rv)))
    }

    /// The full API object as a value, built anew: for inspection, not for serving.
    pub fn to_json(&self) -> Value {
        self.op.to_json(self.rv)
    }

    /// What it weighs in the event history: see [`InFlightOperation::approx_bytes`].
    pub(crate) fn weight(&self) -> usize {
        self.weight
    }

    /// Where the record sits in the index: (namespace, name).
    pub fn key(&self) -> ObjectKey {
        key_of(&self.op)
    }
}

fn raw(wire: &impl serde::Serialize) -> Box<RawValue> {
    serde_json::value::to_raw_value(wire).expect("the wire form has string keys only")
}

pub(super) fn key_of(op: &InFlightOperation) -> ObjectKey {
    (op.namespace.clone(), op.name.clone())
}
