//! Loopback ports for the servers the cluster and the tests start.
//!
//! A port the kernel picks for `bind(0)` comes from its ephemeral range
//! (`net.ipv4.ip_local_port_range`), the range every outgoing connection also takes its local port
//! from: between the check that a port is free and the server's own bind, any process's outgoing
//! connection may take it, and the server fails with `bind: address already in use` (test
//! binaries run beside each other, each with a cluster and thousands of connections). A port
//! below that range (and below the NodePorts a real node serves) is taken by nothing but another
//! server's bind; each process starts at a random place there and never hands out a port twice.
//! Processes of the project also take turns for a port by a lock file of its own
//! (`<temp dir>/ifo-ports/<port>`), held until the process exits: two test binaries that check
//! the same free port a moment apart do not both hand it out.

use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::net::{Ipv4Addr, TcpListener};
use std::sync::Mutex;

/// The lowest port handed out: well above the ports of well-known services.
const LOWEST: u16 = 20_000;

/// The end of the ports handed out: where Kubernetes' NodePorts begin (a real node's kube-proxy
/// serves them), below Linux's default ephemeral range.
const HIGHEST: u16 = 30_000;

/// The next port to try, once the first call has placed it.
static NEXT: Mutex<Option<u16>> = Mutex::new(None);

/// The lock files of the ports this process handed out, held as long as it lives.
static CLAIMS: Mutex<Vec<File>> = Mutex::new(Vec::new());

/// A free loopback port, below the kernel's ephemeral range and the NodePorts where it can (at
/// the kernel's pick otherwise).
pub fn free_port() -> Result<u16> {
    let end = end();
    if end <= LOWEST {
        return kernels_pick();
    }
    let span = end - LOWEST;
    let mut next = NEXT.lock().unwrap_or_else(|p| p.into_inner());
    let mut port = next
        .filter(|&port| port < end)
        .unwrap_or_else(|| LOWEST + fastrand::u16(..span));
    for _ in 0..span {
        let candidate = port;
        port = if port + 1 >= end { LOWEST } else { port + 1 };
        if claim(candidate) && TcpListener::bind((Ipv4Addr::LOCALHOST, candidate)).is_ok() {
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

/// Takes `port`'s lock file for this process, or says another process holds it. Without a
/// directory for the lock files every port counts as claimed by no one (the bind check stays).
fn claim(port: u16) -> bool {
    let dir = std::env::temp_dir().join("ifo-ports");
    if std::fs::create_dir_all(&dir).is_err() {
        return true;
    }
    let Ok(file) = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(port.to_string()))
    else {
        return true;
    };
    if file.try_lock().is_err() {
        return false;
    }
    CLAIMS.lock().unwrap_or_else(|p| p.into_inner()).push(file);
    true
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
    }

    #[test]
    fn a_port_another_process_claimed_is_not_handed_out() {
        // A claim held elsewhere: a lock this process's own claims do not share.
        let port = free_port().unwrap();
        let dir = std::env::temp_dir().join("ifo-ports");
        let other = File::open(dir.join(port.to_string())).unwrap();
        assert!(other.try_lock().is_err(), "the claim of {port} is not held");
        assert!(!claim(port), "{port} claimed twice");
    }
}
