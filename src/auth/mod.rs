//! Who is calling, and may they? A layer in front of the API: TLS with the aggregator's
//! front-proxy certificate, request-header and bearer-token authentication, and authorization by
//! SubjectAccessReview. Handlers only ever see a verified [`UserInfo`].

mod authn;
mod authz;
mod cache;
mod peer;
mod requestheader;
pub mod tls;

pub use authn::{AuthError, Authenticator};
pub use authz::{Attributes, Authorizer, Decision};
pub use cache::{ReviewCache, ReviewKey, review_key};
pub use peer::{PeerCertificates, PeerIdentity};
pub use requestheader::{RequestHeaderConfig, watch_request_header_config};

pub use crate::apimachinery::UserInfo;
