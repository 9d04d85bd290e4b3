//! The authenticated user, as apiserver's `user.Info`.

use std::collections::BTreeMap;

/// An authenticated user, as Kubernetes sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UserInfo {
    /// The username authorization decides on (`system:serviceaccount:ns:sa`, `alice`).
    pub name: String,
    /// The user's uid, when the authenticator knows one; passed on to SubjectAccessReviews so that
    /// a deleted and recreated user of the same name is not confused with the old one.
    pub uid: Option<String>,
    /// The groups the user belongs to (`system:authenticated`, …): RBAC grants to groups as well as
    /// users.
    pub groups: Vec<String>,
    /// Authenticator-specific attributes (`X-Remote-Extra-*`), passed on to SubjectAccessReviews
    /// because webhooks may authorize on them.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// Whether the user belongs to `group`; what decides, for instance, that `system:masters` needs
    /// no review.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}
