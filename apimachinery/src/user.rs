//! The authenticated user, as apiserver's `user.Info`.

use std::collections::BTreeMap;

/// An authenticated user, as Kubernetes sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UserInfo {
    pub name: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}
