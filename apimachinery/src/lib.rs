//! Faithful ports of the Kubernetes apimachinery and apiserver pieces the API needs: reading a
//! request (`RequestInfo`, first-value query semantics), label and field selectors, name and label
//! validation, Go quoting and `HumanDuration`. Pure functions and types, no I/O: both `auth` and
//! `api` build on this layer, and neither reaches into the other.

pub mod duration;
pub mod fields;
pub mod goquote;
pub mod labels;
pub mod query;
pub mod request_info;
pub mod selector;
pub mod user;
pub mod validation;

pub use query::Query;
pub use request_info::{RequestInfo, RequestInfoError, ResourceInfo};
pub use user::UserInfo;
