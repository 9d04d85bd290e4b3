//! Loopback ports for the servers the cluster and the tests start.
//!
//! A port the kernel picks for `bind(0)` comes from its ephemeral range
//! (`net.ipv4.ip_local_port_range`), the range every outgoing connection also takes its local port
//! from: between the check that a port is free and the server's own bind, any process's outgoing
//! connection may take it, and the server fails with `bind: address already in use` (test
//! binaries run beside each other, each with a cluster and thousands of connections). A port
//! below that range (and below the NodePorts a real node serves) is taken by nothing but another
//! server's bind; each process starts at a random place there and never hands out a port twice.

use anyhow::{Context, Result};
use std::net::{Ipv4Addr, TcpListener};
use std::sync::Mutex;

/// The lowest port handed out: well above the ports of well-known services.
const LOWEST: u16 = 20_000;

/// The end of the ports handed out: where Kubernetes' NodePorts begin (a real node's kube-proxy
/// serves them), below Linux's default ephemeral range.
const HIGHEST: u16 = 30_000;

/// The next port to try, once the first call has placed it.
static NEXT: Mutex<Option<u16>> = Mutex::new(None);

/// A free loopback port, below the kernel's ephemeral range and the NodePorts where it can (at
/// the kernel's pick otherwise).
pub fn free_port() -> Result<u16> {
    let end = end();
    if end <= LOWEST {
        return kernels_pick();
    }
    let span = end - LOWEST;
    let mut next = NEXT.lock().unwrap_or_else(|p| p.into_inner());
    let mut port = next.unwrap_or_else(|| LOWEST + fastrand::u16(..span));
    for _ in 0..span {
        let candidate = port;
        port = if port + 1 >= end { LOWEST } else { port + 1 };
        if TcpListener::bind((Ipv4Addr::LOCALHOST, candidate)).is_ok() {
            *next = Some(port);
            return Ok(candidate);
        }
    }
    kernels_pick()
}

/// The end (excluded) of the ports handed out: the NodePorts' start, or the kernel's ephemeral
/// range's if it starts lower.
fn end() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .map_or(HIGHEST, |ephemeral: u16| ephemeral.min(HIGHEST))
}

/// A port the kernel picks: free now, in its ephemeral range.
fn kernels_pick() -> Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .context("binding a loopback port")?
        .port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_below_the_ephemeral_range_and_the_node_ports_and_never_repeat() {
        let end = end();
        let ports: Vec<u16> = (0..200).map(|_| free_port().unwrap()).collect();
        let distinct: std::collections::HashSet<_> = ports.iter().collect();
        assert_eq!(
            distinct.len(),
            ports.len(),
            "a port handed out twice: {ports:?}"
        );
        if end > LOWEST {
            assert!(
                ports.iter().all(|&p| (LOWEST..end).contains(&p)),
                "{ports:?}"
            );
        }
        for port in ports {
            TcpListener::bind((Ipv4Addr::LOCALHOST, port)).unwrap();
        }
    }
}
