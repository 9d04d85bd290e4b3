//! A record as stored at one resourceVersion.

use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::operation::InFlightOperation;

/// `(namespace, name)`; `None` namespace for cluster-scoped records. Sorts cluster-scoped
/// records first, then by namespace and name (the list order).
pub type ObjectKey = (Option<String>, String);

/// A record at a resourceVersion, shared by the store, the event ring and every watcher.
#[derive(Debug)]
pub struct Stored {
    pub rv: u64,
    pub op: Arc<InFlightOperation>,
    /// The wire form, built on first use: once per RV however many watchers serialise it.
    json: OnceLock<Arc<Value>>,
}

impl Stored {
    pub fn new(rv: u64, op: Arc<InFlightOperation>) -> Stored {
        Stored {
            rv,
            op,
            json: OnceLock::new(),
        }
    }

    /// The full API object with `metadata.resourceVersion` = `self.rv`.
    pub fn json(&self) -> Arc<Value> {
        self.json_ref().clone()
    }

    /// The same, borrowed: for serialising many records without touching reference counts.
    pub fn json_ref(&self) -> &Arc<Value> {
        self.json.get_or_init(|| Arc::new(self.op.to_json(self.rv)))
    }

    pub fn key(&self) -> ObjectKey {
        key_of(&self.op)
    }
}

pub(super) fn key_of(op: &InFlightOperation) -> ObjectKey {
    (op.namespace.clone(), op.name.clone())
}
