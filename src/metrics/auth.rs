//! Authentication and authorization: the reviews asked of kube-apiserver and how often their
//! cache answered instead.

use super::{Labels, register};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

pub(super) struct Auth {
    reviews: Family<Labels, Counter>,
    cache: Family<Labels, Counter>,
}

impl Auth {
    pub(super) fn register(r: &mut Registry) -> Auth {
        let auth = Auth {
            reviews: register(
                r,
                "auth_reviews",
                "TokenReviews and SubjectAccessReviews sent to kube-apiserver, by review (token, access) and result (allowed, denied, error)",
                Family::default(),
            ),
            cache: register(
                r,
                "auth_cache_lookups",
                "Lookups in the review cache, by review (token, access) and result (hit: answered from the cache or by a review already under way; miss: a review was sent)",
                Family::default(),
            ),
        };
        // Every label set is known: all start at 0.
        for review in [Review::Token, Review::Access] {
            for result in ["allowed", "denied", "error"] {
                drop(auth.reviews.get_or_create(&labels(review, result)));
            }
            for result in ["hit", "miss"] {
                drop(auth.cache.get_or_create(&labels(review, result)));
            }
        }
        auth
    }
}

/// Which review.
#[derive(Debug, Clone, Copy, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub enum Review {
    /// TokenReview (a bearer token).
    Token,
    /// SubjectAccessReview.
    Access,
}

impl Review {
    fn as_str(self) -> &'static str {
        self.into()
    }
}

fn labels(review: Review, result: &str) -> Labels {
    vec![
        ("review", review.as_str().to_owned()),
        ("result", result.to_owned()),
    ]
}

/// How the cache answered a lookup.
#[derive(Debug, Clone, Copy, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub enum CacheLookup {
    /// Answered from the cache, or by an identical review already under way.
    Hit,
    /// A review was sent.
    Miss,
}

/// A review was answered: `Some(true)` allowed (or authenticated), `Some(false)` denied, `None`
/// failed.
pub fn review(review: Review, allowed: Option<bool>) {
    let result = match allowed {
        Some(true) => "allowed",
        Some(false) => "denied",
        None => "error",
    };
    super::metrics()
        .auth
        .reviews
        .get_or_create(&labels(review, result))
        .inc();
}

/// A lookup in the review cache of `review` was answered as `lookup` says.
pub fn cache_lookup(review: Review, lookup: CacheLookup) {
    let result: &str = lookup.into();
    super::metrics()
        .auth
        .cache
        .get_or_create(&labels(review, result))
        .inc();
}
