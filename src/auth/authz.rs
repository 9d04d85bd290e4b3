//! Authorization by SubjectAccessReview, with the attributes kube-apiserver's RequestInfo would
//! give the same request, so `kubectl auth can-i` and our answers agree. Reviews are cached for
//! 10 s (allow and deny alike) and identical concurrent reviews are made once.

use super::UserInfo;
use super::cache::{ReviewCache, ask, review_key};
use crate::metrics::Review;
use ifo_apimachinery::RequestInfo;
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use std::sync::Arc;
use std::time::Duration;

/// What a request asks to do.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Attributes {
    Resource {
        verb: String,
        group: String,
        version: String,
        resource: String,
        subresource: Option<String>,
        namespace: Option<String>,
        name: Option<String>,
    },
    /// Discovery, OpenAPI, health and other paths outside any resource.
    NonResource { verb: String, path: String },
}

impl Attributes {
    /// The attributes of a parsed request: the same [`RequestInfo`] the handlers serve.
    pub(crate) fn of(info: &RequestInfo) -> Attributes {
        match &info.resource {
            Some(r) => Attributes::Resource {
                verb: info.verb.clone(),
                group: r.group.clone(),
                version: r.version.clone(),
                resource: r.resource.clone(),
                subresource: r.subresource.clone(),
                namespace: r.namespace.clone(),
                name: r.name.clone(),
            },
            None => Attributes::NonResource {
                verb: info.verb.clone(),
                path: info.path.clone(),
            },
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Authorization {
    Allow,
    /// Denied, with the authorizer's reason (may be empty).
    Deny(String),
}

/// Why a request could not be authorized (kube-apiserver answers 500 then, not 403).
#[derive(Clone, Debug, thiserror::Error)]
pub(crate) enum AuthzError {
    /// The SubjectAccessReview could not be made or was refused. Its message ends with its
    /// cause's, as kube's errors do; shared, so that the review cache can hand it to every
    /// request that waited for the review.
    #[error("SubjectAccessReview failed: {0}")]
    Review(#[source] Arc<kube::Error>),
}

pub(crate) struct Authorizer {
    client: Client,
    cache: ReviewCache<Authorization>,
}

const MASTERS: &str = "system:masters";

/// How long an answer is cached, allow and deny alike.
const CACHE_TTL: Duration = Duration::from_secs(10);

impl Authorizer {
    /// An authorizer reviewing with `client` (whose requests have a deadline: see
    /// [`crate::client`]).
    pub(crate) fn new(client: Client) -> Self {
        Authorizer::caching_for(client, CACHE_TTL)
    }

    /// [`Authorizer::new`] with answers cached for `ttl` (the tests' is short: the cache's
    /// clock is the system's, which a test cannot advance).
    fn caching_for(client: Client, ttl: Duration) -> Self {
        Authorizer {
            client,
            // About 16k entries at most.
            cache: ReviewCache::new(Review::Access, ttl, 4 << 20, |d| match d {
                Authorization::Allow => 0,
                Authorization::Deny(reason) => reason.len(),
            }),
        }
    }

    /// `Err` when the review itself failed.
    pub(crate) async fn authorize(
        &self,
        user: &UserInfo,
        attrs: &Attributes,
    ) -> Result<Authorization, AuthzError> {
        if user.in_group(MASTERS) {
            return Ok(Authorization::Allow);
        }
        // Discovery and OpenAPI are reviewed too: clusters grant them to every authenticated
        // user through `system:discovery`, and an administrator may narrow that; `/metrics`
        // needs what kube-apiserver's does (`system:monitoring`).
        let (resource_attributes, non_resource_attributes) = match attrs {
            Attributes::Resource {
                verb,
                group,
                version,
                resource,
                subresource,
                namespace,
                name,
            } => (
                Some(ResourceAttributes {
                    verb: Some(verb.clone()),
                    group: Some(group.clone()),
                    version: Some(version.clone()),
                    resource: Some(resource.clone()),
                    subresource: subresource.clone(),
                    namespace: namespace.clone(),
                    name: name.clone(),
                    ..Default::default()
                }),
                None,
            ),
            Attributes::NonResource { verb, path } => (
                None,
                Some(NonResourceAttributes {
                    verb: Some(verb.clone()),
                    path: Some(path.clone()),
                }),
            ),
        };
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: user.uid.clone(),
                groups: Some(user.groups.clone()),
                extra: (!user.extra.is_empty()).then(|| user.extra.clone().into_iter().collect()),
                resource_attributes,
                non_resource_attributes,
            },
            ..Default::default()
        };
        let client = self.client.clone();
        let key = review_key([
            format!("{user:?}").as_bytes(),
            format!("{attrs:?}").as_bytes(),
        ]);
        self.cache
            .get_or_fetch(key, async move {
                let answer = ask(client, &review, Review::Access)
                    .await
                    .map_err(|e| AuthzError::Review(Arc::new(e)))?;
                let status = answer.status.unwrap_or_default();
                let allowed = status.allowed && status.denied != Some(true);
                crate::metrics::review(Review::Access, Some(allowed));
                Ok(if allowed {
                    Authorization::Allow
                } else {
                    Authorization::Deny(status.reason.unwrap_or_default())
                })
            })
            .await
    }
}

#[cfg(test)]
mod tests;
