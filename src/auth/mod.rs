//! Who is calling, and may they? A layer in front of the API: TLS with the aggregator's
//! front-proxy certificate, request-header and bearer-token authentication, and authorization by
//! SubjectAccessReview. Handlers only ever see a verified [`UserInfo`].

mod authn;
mod authz;
mod cache;
mod layer;
mod requestheader;
pub mod tls;

pub use authn::{AuthError, Authenticator};
pub use authz::{Attributes, Authorizer, Decision, write_verb};
pub use cache::ReviewCache;
pub use layer::{Guard, guard};
pub use requestheader::{RequestHeaderConfig, watch_request_header_config};

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
