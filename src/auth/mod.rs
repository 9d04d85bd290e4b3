//! Who is calling, and may they? A layer in front of the API: TLS with the aggregator's
//! front-proxy certificate, request-header and bearer-token authentication, and authorization by
//! SubjectAccessReview. Handlers only ever see a verified [`UserInfo`].

mod authn;
mod authz;
pub(crate) mod budget;
mod cache;
pub(crate) mod connection;
mod peer;
mod requestheader;
pub(crate) mod tls;

pub(crate) use authn::{AuthError, Authenticator};
pub(crate) use authz::{Attributes, Authorization, Authorizer};
pub(crate) use peer::{AdmissionCallers, PeerCertificates};
pub(crate) use requestheader::{RequestHeaderConfig, TrustWatch, read_request_header_config};

pub(crate) use ifo_apimachinery::UserInfo;

/// The group every authenticated user is in, however it was authenticated.
const AUTHENTICATED: &str = "system:authenticated";

/// `groups` and [`AUTHENTICATED`], once.
fn with_authenticated(mut groups: Vec<String>) -> Vec<String> {
    if !groups.iter().any(|g| g == AUTHENTICATED) {
        groups.push(AUTHENTICATED.to_string());
    }
    groups
}
