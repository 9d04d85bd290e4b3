//! The kube client of the server's own identity. Every request it sends that is not a watch has
//! a deadline (`K8S_API_TIMEOUT`): a TokenReview, a SubjectAccessReview, a status write, a
//! discovery call or a page of a list never hangs on an unresponsive kube-apiserver, it fails
//! and is retried or answered as an error. Watches are bounded by their own `timeoutSeconds`.

use crate::config::ServeArgs;
use anyhow::{Context, Result};
use futures::future::BoxFuture;
use ifo_apimachinery::Query;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;
use tower::{Layer, Service};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request that got no answer in time.
#[derive(Debug, thiserror::Error)]
#[error("kube-apiserver did not answer {method} {path} within {timeout:?}")]
pub(crate) struct DeadlineExceeded {
    method: http::Method,
    path: String,
    timeout: Duration,
}

/// Puts a deadline on every request but watches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeadlineLayer {
    /// How long a request may take, answer included.
    pub timeout: Duration,
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline {
            inner,
            timeout: self.timeout,
        }
    }
}

/// The service [`DeadlineLayer`] wraps the client's stack in: fails a request that has not been
/// answered within the timeout, so that a stuck kube-apiserver cannot hang its caller, and lets
/// watches run.
#[derive(Clone, Debug)]
pub(crate) struct Deadline<S> {
    inner: S,
    timeout: Duration,
}

/// Whether a request opens a watch (its answer is a stream with its own end).
fn is_watch(uri: &http::Uri) -> bool {
    Query::parse(uri.query()).flag("watch")
}

impl<S, B> Service<http::Request<B>> for Deadline<S>
where
    S: Service<http::Request<B>>,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<S::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let watch = is_watch(request.uri());
        let exceeded = DeadlineExceeded {
            method: request.method().clone(),
            path: request.uri().path().to_string(),
            timeout: self.timeout,
        };
        let timeout = self.timeout;
        let answer = self.inner.call(request);
        Box::pin(async move {
            if watch {
                return answer.await.map_err(Into::into);
            }
            match tokio::time::timeout(timeout, answer).await {
                Ok(answer) => answer.map_err(Into::into),
                Err(_) => Err(Box::new(exceeded) as BoxError),
            }
        })
    }
}

/// The deadline of each call to kube-apiserver that is not a watch.
pub(crate) fn api_timeout(args: &ServeArgs) -> Duration {
    args.k8s_api_timeout.max(Duration::from_secs(1))
}

/// A kube client for the server's own identity, from `--kubeconfig` or the environment. Requests
/// kube-apiserver answers `429`, `503` or `504` are sent again, with a backoff, within their
/// deadline.
pub(crate) async fn kube_client(args: &ServeArgs) -> Result<kube::Client> {
    client(args, true).await
}

/// [`kube_client`] that sends each request once: what kube-apiserver answered is what the
/// caller reads (a `429` of a webhook, say).
pub(crate) async fn kube_client_sending_once(args: &ServeArgs) -> Result<kube::Client> {
    client(args, false).await
}

async fn client(args: &ServeArgs, retries: bool) -> Result<kube::Client> {
    let mut config = match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?
        }
        None => kube::Config::infer().await.context(
            "no usable $KUBECONFIG or ~/.kube/config, and no in-cluster service account",
        )?,
    };
    let timeout = api_timeout(args);
    config.connect_timeout = Some(timeout);
    config.read_timeout = None; // watches are long: the deadline is per request, below
    config.write_timeout = Some(timeout);
    config.default_retry = retries;
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&DeadlineLayer { timeout })
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    #[test]
    fn watches_are_told_apart_by_their_first_watch_value() {
        for (uri, watch) in [
            ("/api/v1/pods?watch=true&resourceVersion=1", true),
            ("/api/v1/pods?watch=1", true),
            ("/api/v1/pods?limit=500", false),
            ("/apis/authorization.k8s.io/v1/subjectaccessreviews", false),
            ("/api/v1/pods?watch=false&watch=true", false),
        ] {
            assert_eq!(is_watch(&uri.parse().unwrap()), watch, "{uri}");
        }
    }

    /// A service that answers after `delay`.
    #[derive(Clone)]
    struct Slow(Duration);

    impl Service<http::Request<()>> for Slow {
        type Response = ();
        type Error = Infallible;
        type Future = BoxFuture<'static, Result<(), Infallible>>;

        fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            let delay = self.0;
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                Ok(())
            })
        }
    }

    fn request(uri: &str) -> http::Request<()> {
        http::Request::get(uri).body(()).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_answer_is_an_error_but_a_watch_may_take_its_time() {
        let layer = DeadlineLayer {
            timeout: Duration::from_secs(10),
        };
        let mut slow = layer.layer(Slow(Duration::from_secs(60)));
        let err = slow
            .call(request(
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            ))
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains(
                "did not answer GET /apis/authorization.k8s.io/v1/subjectaccessreviews within 10s"
            ),
            "{err}"
        );
        slow.call(request("/api/v1/pods?watch=true")).await.unwrap();
        let mut quick = layer.layer(Slow(Duration::from_secs(1)));
        quick.call(request("/api/v1/pods")).await.unwrap();
    }
}
