//! A connection's deadlines while no request is being served. A new connection has
//! `REQUEST_HEADER_TIMEOUT` from its accept to finish the TLS handshake, let the server tell
//! HTTP/1 from HTTP/2 and send the headers of its first request; a connection that served
//! requests is closed after [`IDLE_TIMEOUT`] without one in flight (HTTP/1 connections sooner,
//! by hyper's header timeout). Without this, a client that connects and sends nothing keeps
//! its place for ever. A connection is also closed when it is displaced to make room for
//! another (see `budget`: it then has no request in flight).
//!
//! The deadline is enforced below TLS, on the socket: the stream fails with `TimedOut` when
//! it passes (`ConnectionAborted` once displaced), whichever stage the connection is in.

use axum::body::Body;
use http_body_util::BodyExt;
use parking_lot::Mutex;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// How long a connection that served requests may stay without one in flight: longer than the
/// idle timeout of Go's HTTP clients (90 s; kube-apiserver's proxy is one), so that clients
/// normally close idle connections themselves, before the server does.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// The address a connection comes from, for each of its requests.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PeerAddress(pub std::net::IpAddr);

/// The deadlines of connections.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadlines {
    /// From accept to the first request's headers.
    pub first_request: Duration,
    /// From the end of the last request to the next one's headers.
    pub idle: Duration,
}

/// What a connection is doing, shared by its socket and its requests.
#[derive(Default)]
pub(crate) struct Activity {
    state: Mutex<State>,
}

struct State {
    in_flight: usize,
    /// When the connection was accepted, or its last request ended.
    since: Instant,
    served: bool,
    /// Closed to make room for another (see `budget`): its reads fail from now on.
    displaced: bool,
    /// The task reading the socket, woken when the last request in flight ends so that it
    /// starts the idle deadline.
    reader: Option<Waker>,
}

impl Default for State {
    fn default() -> Self {
        State {
            in_flight: 0,
            since: Instant::now(),
            served: false,
            displaced: false,
            reader: None,
        }
    }
}

impl Activity {
    fn state(&self) -> parking_lot::MutexGuard<'_, State> {
        self.state.lock()
    }

    /// The deadline now (none while a request is in flight), remembering `reader` to wake;
    /// `Err` once the connection is displaced.
    fn deadline(&self, reader: &Waker, deadlines: Deadlines) -> Result<Option<Instant>, ()> {
        let mut state = self.state();
        if state.displaced {
            return Err(());
        }
        if !state.reader.as_ref().is_some_and(|w| w.will_wake(reader)) {
            state.reader = Some(reader.clone());
        }
        Ok((state.in_flight == 0).then(|| {
            let allowed = if state.served {
                deadlines.idle
            } else {
                deadlines.first_request
            };
            state.since + allowed
        }))
    }

    /// With no request in flight: whether it ever served one, and since when it is idle (from
    /// its accept, or the end of its last request); so that the smallest is the first to
    /// displace.
    pub(crate) fn idle_since(&self) -> Option<(bool, Instant)> {
        let state = self.state();
        (state.in_flight == 0).then_some((state.served, state.since))
    }

    /// Closes the connection to make room for another: its next read fails.
    pub(crate) fn displace(&self) {
        let mut state = self.state();
        state.displaced = true;
        if let Some(reader) = state.reader.take() {
            reader.wake();
        }
    }

    /// Whether the connection was displaced.
    #[cfg(test)]
    pub(crate) fn is_displaced(&self) -> bool {
        self.state().displaced
    }

    /// A request starts; it is in flight until the returned guard is dropped (with its response
    /// body, for a watch when the watch ends).
    pub(crate) fn begin(self: &Arc<Self>) -> InFlight {
        let mut state = self.state();
        state.in_flight += 1;
        state.served = true;
        InFlight(self.clone())
    }
}

/// One request in flight on a connection.
pub(crate) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.0.state();
        state.in_flight = state.in_flight.saturating_sub(1);
        if state.in_flight == 0 {
            state.since = Instant::now();
            if let Some(reader) = state.reader.take() {
                reader.wake();
            }
        }
    }
}

/// A socket that fails with `TimedOut` once its connection's deadline passes.
pub(crate) struct DeadlineStream<S> {
    inner: S,
    activity: Arc<Activity>,
    deadlines: Deadlines,
    timer: Pin<Box<Sleep>>,
}

impl<S> DeadlineStream<S> {
    pub(crate) fn new(inner: S, activity: Arc<Activity>, deadlines: Deadlines) -> Self {
        DeadlineStream {
            inner,
            activity,
            deadlines,
            timer: Box::pin(tokio::time::sleep(deadlines.first_request)),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for DeadlineStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let Ok(deadline) = this.activity.deadline(cx.waker(), this.deadlines) else {
            tracing::debug!("closing an idle connection to make room for another");
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "closed to make room for another connection",
            )));
        };
        if let Some(deadline) = deadline {
            if this.timer.deadline() != deadline {
                this.timer.as_mut().reset(deadline);
            }
            if this.timer.as_mut().poll(cx).is_ready() {
                tracing::debug!("closing a connection that sent no request in time");
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no request before the connection's deadline",
                )));
            }
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for DeadlineStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// A connection's service: each request is in flight from its headers to the end of its
/// response body.
#[derive(Clone)]
pub(crate) struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Tracked<S> {
    pub(crate) fn new(inner: S, activity: Arc<Activity>) -> Self {
        Tracked { inner, activity }
    }
}

impl<S, B> tower::Service<http::Request<B>> for Tracked<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let in_flight = self.activity.begin();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| {
                Body::new(body.map_frame(move |frame| {
                    let _in_flight = &in_flight;
                    frame
                }))
            }))
        })
    }
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    reason = "a test's tasks end with the test's runtime"
)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    const DEADLINES: Deadlines = Deadlines {
        first_request: Duration::from_secs(10),
        idle: Duration::from_secs(120),
    };

    #[tokio::test(start_paused = true)]
    async fn a_silent_connection_times_out_and_a_busy_one_does_not() {
        let activity = Arc::new(Activity::default());
        let (client, server) = tokio::io::duplex(64);
        let mut stream = DeadlineStream::new(server, activity.clone(), DEADLINES);
        let started = Instant::now();
        let mut buf = [0u8; 8];
        let err = stream.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), DEADLINES.first_request);

        // A request in flight (a watch) keeps the connection however long it lasts; the idle
        // deadline starts when it ends.
        let activity = Arc::new(Activity::default());
        let mut stream = DeadlineStream::new(client, activity.clone(), DEADLINES);
        let request = activity.begin();
        let reading = tokio::spawn(async move {
            let started = Instant::now();
            let mut buf = [0u8; 8];
            let err = stream.read(&mut buf).await.unwrap_err();
            (err.kind(), started.elapsed())
        });
        tokio::time::sleep(Duration::from_secs(600)).await;
        drop(request);
        let (kind, elapsed) = reading.await.unwrap();
        assert_eq!(kind, io::ErrorKind::TimedOut);
        assert_eq!(elapsed, Duration::from_secs(600) + DEADLINES.idle);
    }
}
