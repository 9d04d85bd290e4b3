//! The probes' own listener (`HEALTH_PORT`): `/livez`, `/readyz` and `/healthz` in plain
//! HTTP/1, on a port of their own, so that no request budget of the API and the admission doors
//! (`MAX_ANONYMOUS_CONNECTIONS`, the review turns), which callers on the pod network can fill,
//! ever stands between the kubelet and the answer that keeps the pod alive.
//!
//! A probe is one short request on a connection of its own (the kubelet's prober keeps none
//! alive), so this listener keeps nothing either: one request per connection, answered at once,
//! and at most [`PROBE_DEADLINE`] from accept to the end of the answer. At most
//! [`MAX_PROBE_CONNECTIONS`] are open at once; a newcomer that finds them all open closes the
//! oldest connection of the address that holds the most. The kubelet's address holds one; so
//! however many connections others open, from one address or from more addresses than there are
//! places, a probe is closed only if more than that many connections arrive while its one request
//! is read and answered, which takes microseconds.

use anyhow::{Context, Result};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::{AbortHandle, JoinSet};

/// Connections open at once on the probes' listener.
pub(crate) const MAX_PROBE_CONNECTIONS: usize = 256;

/// From a connection's accept to the end of its answer: what the kubelet gives a probe by
/// default (`timeoutSeconds: 1`) several times over.
pub(crate) const PROBE_DEADLINE: Duration = Duration::from_secs(5);

/// The probes' listener, bound: binding fails at start (a port in use is a setting to fix), not
/// in the background.
pub(super) struct HealthListener {
    listener: TcpListener,
    addr: SocketAddr,
}

impl HealthListener {
    pub(super) async fn bind(addr: SocketAddr) -> Result<HealthListener> {
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("listening for probes on {addr} (HEALTH_PORT)"))?;
        Ok(HealthListener { listener, addr })
    }

    /// Answers probes with `routes` until dropped; every connection's task ends with it.
    pub(super) async fn serve(self, routes: axum::Router) {
        tracing::info!(addr = %self.addr, "serving the probes");
        let mut http = auto::Builder::new(TokioExecutor::new()).http1_only();
        http.http1()
            .timer(TokioTimer::new())
            .keep_alive(false)
            .header_read_timeout(PROBE_DEADLINE)
            .max_buf_size(16 * 1024);
        let mut connections = JoinSet::new();
        let mut open = Open::default();
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: the next accept may succeed.
                    tracing::warn!(error = %e, "accepting a probe's connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            while connections.try_join_next().is_some() {}
            open.make_room();
            let (http, service) = (http.clone(), TowerToHyperService::new(routes.clone()));
            let task = connections.spawn(async move {
                let served = http.serve_connection(TokioIo::new(stream), service);
                if let Ok(Err(e)) = tokio::time::timeout(PROBE_DEADLINE, served).await {
                    tracing::debug!(error = %e, %peer, "a probe's connection");
                }
            });
            open.add(peer.ip(), task);
        }
    }
}

/// The connections open, the oldest first (see the [module](self)).
#[derive(Default)]
struct Open {
    held: VecDeque<(IpAddr, AbortHandle)>,
}

impl Open {
    fn add(&mut self, peer: IpAddr, task: AbortHandle) {
        self.held.push_back((peer, task));
    }

    /// Forgets the connections that ended; when [`MAX_PROBE_CONNECTIONS`] are still open,
    /// closes the oldest of the address that holds the most.
    fn make_room(&mut self) {
        self.held.retain(|(_, task)| !task.is_finished());
        if self.held.len() < MAX_PROBE_CONNECTIONS {
            return;
        }
        let mut held: HashMap<IpAddr, usize> = HashMap::new();
        for (peer, _) in &self.held {
            *held.entry(*peer).or_default() += 1;
        }
        let most = held.values().copied().max().unwrap_or_default();
        let victim = self.held.iter().position(|(peer, _)| held[peer] == most);
        if let Some((_, task)) = victim.and_then(|i| self.held.remove(i)) {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn address(n: usize) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + u32::try_from(n).unwrap()))
    }

    /// Lets the runtime end the tasks aborted.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    /// A task that runs until aborted.
    fn held(tasks: &mut JoinSet<()>) -> AbortHandle {
        tasks.spawn(std::future::pending())
    }

    #[tokio::test]
    async fn a_newcomer_closes_the_oldest_of_the_address_that_holds_the_most() {
        // The crowd is not the oldest: one address's connection came first.
        let mut tasks = JoinSet::new();
        let mut open = Open::default();
        let kubelet = address(200);
        open.add(kubelet, held(&mut tasks));
        let crowd: Vec<AbortHandle> = (1..MAX_PROBE_CONNECTIONS)
            .map(|_| held(&mut tasks))
            .collect();
        for task in &crowd {
            open.add(address(1), task.clone());
        }
        open.make_room();
        assert_eq!(open.held.len(), MAX_PROBE_CONNECTIONS - 1);
        assert_eq!(
            open.held[0].0, kubelet,
            "the lone address keeps its connection"
        );
        settle().await;
        assert!(crowd[0].is_finished(), "the crowd's oldest is closed");
        assert!(!crowd[1].is_finished());
    }

    #[tokio::test]
    async fn with_an_address_for_each_place_the_oldest_closes() {
        let mut tasks = JoinSet::new();
        let mut open = Open::default();
        let handles: Vec<AbortHandle> = (0..MAX_PROBE_CONNECTIONS)
            .map(|i| {
                let task = held(&mut tasks);
                open.add(address(i), task.clone());
                task
            })
            .collect();
        open.make_room();
        settle().await;
        assert_eq!(open.held.len(), MAX_PROBE_CONNECTIONS - 1);
        assert_eq!(
            open.held[0].0,
            address(1),
            "the first one to come is closed"
        );
        assert!(handles[0].is_finished());
        assert!(handles[1..].iter().all(|t| !t.is_finished()));
    }

    #[tokio::test]
    async fn ended_connections_make_room_without_closing_any() {
        let mut tasks = JoinSet::new();
        let mut open = Open::default();
        let done = tasks.spawn(async {});
        open.add(address(1), done);
        for _ in 1..MAX_PROBE_CONNECTIONS {
            open.add(address(2), held(&mut tasks));
        }
        while tasks.try_join_next().is_none() {
            tokio::task::yield_now().await;
        }
        open.make_room();
        assert_eq!(open.held.len(), MAX_PROBE_CONNECTIONS - 1);
        assert!(open.held.iter().all(|(_, t)| !t.is_finished()));
    }
}
