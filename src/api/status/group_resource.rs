//! Which resource an error names: `schema.GroupResource`, displayed as Kubernetes does.

use std::fmt;

/// A group and resource (`inflightoperations` in `live.ifo.kubevirt.io`), displayed as
/// `resource.group` (just `resource` for the core group), as `schema.GroupResource`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct GroupResource {
    /// The API group; empty for the core group.
    pub group: String,
    /// The resource's plural.
    pub resource: String,
}

impl GroupResource {
    /// `resource` in `group`.
    pub(crate) fn new(group: impl Into<String>, resource: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            resource: resource.into(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.group.is_empty() && self.resource.is_empty()
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}
