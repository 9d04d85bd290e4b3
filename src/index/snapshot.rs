//! What a list reads: every record at one resourceVersion.

use std::sync::Arc;

use super::stored::Stored;

/// A consistent view of every record at one resourceVersion.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The RV the view is at: list `metadata.resourceVersion`, and where a watch continues.
    pub rv: u64,
    /// Sorted by (namespace, name), cluster-scoped records first.
    pub items: Vec<Arc<Stored>>,
}
