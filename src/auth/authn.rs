//! Authentication, as k8s.io/apiserver does it for an aggregated server: identity headers from
//! the verified front-proxy certificate (whose CN is allowed), else a certificate of the
//! cluster's client CA, else a bearer token checked by TokenReview, else 401. Identity headers
//! from anyone else are removed, never read.

use super::cache::{ReviewCache, ask, review_key};
use super::peer::{PeerCertificates, PeerIdentity};
use super::{RequestHeaderConfig, UserInfo, with_authenticated};
use crate::metrics::Review;
use http::HeaderMap;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::Client;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Why a request is not authenticated.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum AuthError {
    /// No credentials, or none that prove who the caller is (401).
    #[error("Unauthorized")]
    Unauthorized,
    /// The TokenReview could not be made or was refused (kube-apiserver answers 500 then). Its
    /// message ends with its cause's, as kube's errors do; shared, so that the review cache
    /// can hand it to every request that waited for the review.
    #[error("authentication failed: TokenReview: {0}")]
    TokenReview(#[source] Arc<kube::Error>),
}

pub(crate) struct Authenticator {
    trust: watch::Receiver<Arc<RequestHeaderConfig>>,
    client: Client,
    tokens: ReviewCache<Option<UserInfo>>,
}

fn header_values<'a>(headers: &'a HeaderMap, name: &str) -> impl Iterator<Item = &'a str> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
}

/// `%`-decoding of extra keys: the aggregator escapes them so any key fits in a header name.
fn unescape(key: &str) -> String {
    percent_encoding::percent_decode_str(key)
        .decode_utf8_lossy()
        .into_owned()
}

/// Roughly the bytes a cached user takes.
fn user_size(user: &Option<UserInfo>) -> usize {
    user.as_ref().map_or(0, |u| {
        u.name.len()
            + u.uid.as_ref().map_or(0, String::len)
            + u.groups.iter().map(String::len).sum::<usize>()
            + u.extra
                .iter()
                .map(|(k, v)| k.len() + v.iter().map(String::len).sum::<usize>())
                .sum::<usize>()
    })
}

/// The token of an `Authorization: Bearer <token>` header, as k8s.io/apiserver reads it: the
/// scheme in any case, the token up to the next space.
fn bearer_token(header: &str) -> Option<&str> {
    let mut parts = header.trim().splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Identity from request headers, or `None` if the request does not carry a user name.
fn from_headers(headers: &HeaderMap, trust: &RequestHeaderConfig) -> Option<UserInfo> {
    let name = trust
        .username_headers
        .iter()
        .find_map(|h| header_values(headers, h).next())?
        .to_string();
    let uid = trust
        .uid_headers
        .iter()
        .find_map(|h| header_values(headers, h).next())
        .map(str::to_string);
    let groups = trust
        .group_headers
        .iter()
        .flat_map(|h| header_values(headers, h).map(str::to_string))
        .collect();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (hname, value) in headers {
        let lower = hname.as_str();
        for prefix in &trust.extra_prefixes {
            let prefix = prefix.to_ascii_lowercase();
            if let (Some(rest), Ok(v)) = (lower.strip_prefix(&prefix), value.to_str()) {
                extra.entry(unescape(rest)).or_default().push(v.to_string());
            }
        }
    }
    Some(UserInfo {
        name,
        uid,
        groups: with_authenticated(groups),
        extra,
    })
}

/// Removes every identity header, so nothing downstream can read an untrusted one.
fn strip(headers: &mut HeaderMap, trust: &RequestHeaderConfig) {
    let fixed = ["x-remote-user", "x-remote-uid", "x-remote-group"];
    let configured = trust
        .username_headers
        .iter()
        .chain(&trust.uid_headers)
        .chain(&trust.group_headers)
        .map(|h| h.to_ascii_lowercase());
    for h in fixed.iter().map(|s| s.to_string()).chain(configured) {
        headers.remove(h.as_str());
    }
    let prefixes: Vec<String> = trust
        .extra_prefixes
        .iter()
        .map(|p| p.to_ascii_lowercase())
        .chain(["x-remote-extra-".to_string()])
        .collect();
    let doomed: Vec<_> = headers
        .keys()
        .filter(|k| prefixes.iter().any(|p| k.as_str().starts_with(p.as_str())))
        .cloned()
        .collect();
    for k in doomed {
        headers.remove(k);
    }
}

impl Authenticator {
    /// An authenticator reviewing tokens with `client` (whose requests have a deadline: see
    /// [`crate::client`]).
    pub(crate) fn new(trust: watch::Receiver<Arc<RequestHeaderConfig>>, client: Client) -> Self {
        Authenticator {
            trust,
            client,
            // Answers (users and rejections alike) for 10 s; a few MiB at most.
            tokens: ReviewCache::new(Review::Token, Duration::from_secs(10), 4 << 20, user_size),
        }
    }

    /// Authenticates a request and strips its identity headers.
    pub(crate) async fn authenticate(
        &self,
        headers: &mut HeaderMap,
        peer: &PeerCertificates,
    ) -> Result<UserInfo, AuthError> {
        let trust = self.trust.borrow().clone();
        let identity = peer.identity(&trust);
        let from_proxy = if identity == PeerIdentity::FrontProxy {
            from_headers(headers, &trust)
        } else {
            None
        };
        strip(headers, &trust);
        if let Some(user) = from_proxy {
            return Ok(user);
        }
        if let PeerIdentity::User(user) = identity {
            return Ok(user);
        }
        let token = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token)
            .map(str::to_string);
        headers.remove(http::header::AUTHORIZATION);
        match token {
            Some(token) => self
                .review_token(token)
                .await?
                .ok_or(AuthError::Unauthorized),
            None => Err(AuthError::Unauthorized),
        }
    }

    async fn review_token(&self, token: String) -> Result<Option<UserInfo>, AuthError> {
        let key = review_key([token.as_bytes()]);
        let client = self.client.clone();
        self.tokens
            .get_or_fetch(key, async move {
                let review = TokenReview {
                    spec: TokenReviewSpec {
                        token,
                        audiences: None,
                    },
                    ..Default::default()
                };
                let answer = ask(client, &review, Review::Token)
                    .await
                    .map_err(|e| AuthError::TokenReview(Arc::new(e)))?;
                let status = answer.status.unwrap_or_default();
                let authenticated = status.authenticated == Some(true);
                crate::metrics::review(Review::Token, Some(authenticated));
                if !authenticated {
                    return Ok(None);
                }
                let user = status.user.unwrap_or_default();
                Ok(Some(UserInfo {
                    name: user.username.unwrap_or_default(),
                    uid: user.uid,
                    groups: with_authenticated(user.groups.unwrap_or_default()),
                    extra: user.extra.unwrap_or_default().into_iter().collect(),
                }))
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::AUTHENTICATED;

    /// A failed TokenReview keeps kube's error as its cause, and says it as it always did.
    #[test]
    fn a_failed_token_review_keeps_its_cause() {
        let status =
            kube::core::Status::failure("the server is shutting down", "ServiceUnavailable")
                .with_code(503)
                .boxed();
        let e = AuthError::TokenReview(Arc::new(kube::Error::Api(status.clone())));
        assert_eq!(
            e.to_string(),
            format!(
                "authentication failed: TokenReview: {}",
                kube::Error::Api(status)
            )
        );
        // The cause is kube's error, shared.
        let cause = std::error::Error::source(&e).expect("a cause");
        assert!(
            matches!(
                cause.downcast_ref::<Arc<kube::Error>>().map(|e| &**e),
                Some(kube::Error::Api(s)) if s.code == 503
            ),
            "{cause:?}"
        );
    }

    fn trust() -> RequestHeaderConfig {
        RequestHeaderConfig {
            client_ca: vec![],
            cluster_client_ca: vec![],
            allowed_names: vec!["front-proxy-client".into()],
            username_headers: vec!["X-Remote-User".into()],
            uid_headers: vec![],
            group_headers: vec!["X-Remote-Group".into()],
            extra_prefixes: vec!["X-Remote-Extra-".into()],
        }
    }

    #[test]
    fn headers_give_all_groups_decoded_extras_and_system_authenticated() {
        let mut h = HeaderMap::new();
        h.insert("x-remote-user", "alice".parse().unwrap());
        h.append("x-remote-group", "team-a".parse().unwrap());
        h.append("x-remote-group", "a,b".parse().unwrap());
        h.append(
            "x-remote-extra-scopes.example.com%2fkey",
            "v1".parse().unwrap(),
        );
        let u = from_headers(&h, &trust()).unwrap();
        assert_eq!(u.name, "alice");
        assert_eq!(u.groups, vec!["team-a", "a,b", AUTHENTICATED]);
        assert_eq!(u.extra["scopes.example.com/key"], vec!["v1"]);
        strip(&mut h, &trust());
        assert!(h.is_empty(), "identity headers must be removed: {h:?}");
    }

    #[test]
    fn bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer abc"), Some("abc"));
        assert_eq!(bearer_token("BEARER abc extra"), Some("abc"));
        assert_eq!(bearer_token("  Bearer abc  "), Some("abc"));
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearer"), None);
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(
            bearer_token("Bearer  abc"),
            None,
            "an empty token is no token"
        );
    }

    #[test]
    fn no_user_header_means_not_authenticated_by_headers() {
        let mut h = HeaderMap::new();
        h.insert("x-remote-group", "system:masters".parse().unwrap());
        assert!(from_headers(&h, &trust()).is_none());
    }
}
