//! The machine-wide state a real node changes, saved before it starts and put back when it stops:
//! kernel settings (kubelet sets `kernel.panic`, `vm.overcommit_memory`; the bridge turns on IP
//! forwarding), every iptables table, and the node's bridge. The saved state is written to
//! `/run/ifo-node/`, so a run that was killed is cleaned up by the next one; a lock there keeps to
//! one cluster with nodes per machine (kubelet's ports and the bridge are machine-wide; a second
//! node of the same cluster shares the bridge, see `node`).

use super::process::stdout_of;
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write as _;
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where the lock and the saved state live: on tmpfs, gone after a reboot like what it describes.
const STATE_DIR: &str = "/run/ifo-node";

/// The bridge pods are attached to; it carries the node's address.
pub(crate) const BRIDGE: &str = "ifo0";

/// Every path of a node's files contains this, so leftovers of a killed run can be recognised.
pub(crate) const NODE_DIR_MARK: &str = "/ifo-node/";

/// The cgroup a second node's kubelet puts its pods under (the first's are under the root).
pub(crate) const SECOND_CGROUP_ROOT: &str = "/ifo-node2";

/// Kernel settings the node's components change.
const SYSCTLS: [&str; 8] = [
    "kernel/panic",
    "kernel/panic_on_oops",
    "vm/overcommit_memory",
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/route_localnet",
    "net/bridge/bridge-nf-call-iptables",
    "net/netfilter/nf_conntrack_max",
    "net/netfilter/nf_conntrack_tcp_timeout_established",
];

/// The iptables tables a node may add chains to.
const TABLES: [&str; 5] = ["filter", "nat", "mangle", "raw", "security"];

#[derive(Serialize, Deserialize)]
struct Saved {
    sysctls: BTreeMap<String, String>,
    iptables: String,
    ip6tables: String,
}

/// The machine as it was before the node started; dropping it puts it back.
pub(crate) struct Host {
    saved: Saved,
    _lock: File,
}

fn state_file() -> PathBuf {
    Path::new(STATE_DIR).join("saved.json")
}

fn output(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {program}"))?;
    stdout_of(out, program, args)
}

/// Runs a command whose failure only means there was nothing to undo.
fn quietly(program: &str, args: &[&str]) {
    let _ = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Takes the machine's node lock (one cluster with nodes per machine), held as long as the file
/// is open.
fn lock() -> Result<File> {
    std::fs::create_dir_all(STATE_DIR).with_context(|| format!("creating {STATE_DIR}"))?;
    let lock = File::create(Path::new(STATE_DIR).join("lock"))?;
    // SAFETY: flock on a file descriptor we own; the lock goes with the descriptor.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        bail!(
            "another real node runs on this machine (lock {STATE_DIR}/lock is held): one cluster \
             with nodes per machine, since kubelet's ports and the node's bridge are machine-wide"
        );
    }
    Ok(lock)
}

/// Under the lock: puts the machine back as a node that was killed found it, from the state it
/// saved, if one was.
fn undo_killed() -> Result<()> {
    if let Ok(text) = std::fs::read_to_string(state_file()) {
        let stale: Saved = serde_json::from_str(&text).with_context(|| {
            format!(
                "{} is unreadable; remove it once the machine is clean",
                state_file().display()
            )
        })?;
        tracing::warn!("a previous node did not stop cleanly; removing what it left");
        undo(&stale);
    }
    Ok(())
}

/// Puts the machine back as it was before a node that was killed (before it could put it back
/// itself) started, so that the machine can be read as it is before a new node starts.
pub fn put_back_after_a_killed_node() -> Result<()> {
    let _lock = lock()?;
    undo_killed()
}

impl Host {
    /// Takes the machine's node lock, cleans up after a run that was killed (from the state it
    /// saved), and saves the current state.
    pub(crate) fn save() -> Result<Host> {
        let lock = lock()?;
        undo_killed()?;
        Host::save_locked(lock)
    }

    fn save_locked(lock: File) -> Result<Host> {
        let mut sysctls = BTreeMap::new();
        for key in SYSCTLS {
            if let Ok(value) = std::fs::read_to_string(Path::new("/proc/sys").join(key)) {
                sysctls.insert(key.to_string(), value.trim().to_string());
            }
        }
        let saved = Saved {
            sysctls,
            iptables: output("iptables-save", &[])?,
            ip6tables: output("ip6tables-save", &[]).unwrap_or_default(),
        };
        let mut file = File::create(state_file())?;
        file.write_all(&serde_json::to_vec(&saved)?)?;
        Ok(Host { saved, _lock: lock })
    }

    /// Creates the node's bridge with its address, up, before anything binds to that address,
    /// and routes its cluster's Services' addresses (`services`) to it: a connection to a
    /// Service that kube-proxy has not rewritten yet (its rules come a moment after its
    /// endpoints) then goes nowhere and is tried again, as on a cluster's node, instead of out
    /// through the machine's default route, where whatever answers (a proxy of the machine's
    /// network) would keep it, and kube-apiserver's aggregator with it, talking to the wrong
    /// server. The route goes with the bridge.
    pub(crate) fn create_bridge(&self, cidr: &str, services: &str) -> Result<()> {
        quietly("ip", &["link", "del", BRIDGE]);
        output("ip", &["link", "add", BRIDGE, "type", "bridge"])?;
        output("ip", &["addr", "add", cidr, "dev", BRIDGE])?;
        output("ip", &["link", "set", BRIDGE, "up"])?;
        output("ip", &["route", "replace", services, "dev", BRIDGE])?;
        Ok(())
    }
}

/// Adds `cidr` to the bridge (a second node's address): it goes with the bridge.
pub(crate) fn add_address(cidr: &str) -> Result<()> {
    output("ip", &["addr", "replace", cidr, "dev", BRIDGE]).map(|_| ())
}

/// Creates the cgroup `root` in every v1 hierarchy, its CPUs and memory nodes those of the whole
/// machine (a cpuset cgroup takes no process until it has both); removed when the node stops.
pub(crate) fn create_cgroup_root(root: &str) -> Result<()> {
    let hierarchies = std::fs::read_dir("/sys/fs/cgroup").context("reading /sys/fs/cgroup")?;
    for hierarchy in hierarchies.flatten() {
        let top = hierarchy.path();
        let dir = top.join(root.trim_start_matches('/'));
        if !top.is_dir() || dir.is_dir() {
            continue;
        }
        std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for file in ["cpuset.cpus", "cpuset.mems"] {
            if let Ok(value) = std::fs::read_to_string(top.join(file)) {
                std::fs::write(dir.join(file), value.trim())
                    .with_context(|| format!("writing {}", dir.join(file).display()))?;
            }
        }
    }
    Ok(())
}

impl Drop for Host {
    fn drop(&mut self) {
        undo(&self.saved);
    }
}

/// Stops what the node left running, removes its mounts, network namespaces, bridge and cgroups,
/// and puts back iptables and the kernel settings. Best effort: every step runs even when one
/// fails, and failures are logged.
fn undo(saved: &Saved) {
    kill_leftovers();
    unmount_leftovers();
    quietly("ip", &["link", "del", BRIDGE]);
    for (save, restore, tables) in [
        ("iptables-save", "iptables-restore", &saved.iptables),
        ("ip6tables-save", "ip6tables-restore", &saved.ip6tables),
    ] {
        restore_tables(save, restore, tables);
    }
    for (key, value) in &saved.sysctls {
        let path = Path::new("/proc/sys").join(key);
        if let Err(e) = std::fs::write(&path, value) {
            tracing::warn!(setting = %key, error = %e, "restoring a kernel setting failed");
        }
    }
    remove_cgroups();
    let _ = std::fs::remove_file(state_file());
}

/// Puts back the saved rules of the tables that existed, and empties the tables the node added.
fn restore_tables(save: &str, restore: &str, saved: &str) {
    let Ok(now) = output(save, &[]) else { return };
    if now == *saved {
        return;
    }
    let program = save.trim_end_matches("-save");
    for table in TABLES {
        let header = format!("*{table}\n");
        if now.contains(&header) && !saved.contains(&header) {
            quietly(program, &["-t", table, "-F"]);
            quietly(program, &["-t", table, "-X"]);
        }
    }
    let child = Command::new(restore)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let result = child.and_then(|mut child| {
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(saved.as_bytes())?;
        }
        child.wait_with_output()
    });
    match result {
        Ok(out) if out.status.success() => {}
        Ok(out) => tracing::warn!(
            error = %String::from_utf8_lossy(&out.stderr).trim(),
            "{restore} failed"
        ),
        Err(e) => tracing::warn!(error = %e, "{restore} failed"),
    }
}

/// Processes that outlive the node's components: containers (in the `kubepods` cgroups) and the
/// containerd shims serving the node's sockets. Killed, and waited for, for up to 10 s.
fn kill_leftovers() {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pids = leftover_pids();
        if pids.is_empty() || Instant::now() > deadline {
            if !pids.is_empty() {
                tracing::warn!(?pids, "processes of the node would not die");
            }
            return;
        }
        for pid in pids {
            // SAFETY: signalling a process that belongs to the node we ran.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn leftover_pids() -> Vec<i32> {
    let own = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid.unsigned_abs() != own)
        .filter(|pid| {
            let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline);
            cgroup.contains("/kubepods")
                || (cmdline.contains("containerd-shim") && cmdline.contains(NODE_DIR_MARK))
        })
        .collect()
}

/// Mounts under a node directory (pod volumes, container root filesystems, containerd's) and the
/// sandboxes' network namespaces, innermost first.
fn unmount_leftovers() {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<&str> = mounts
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .filter(|p| p.contains(NODE_DIR_MARK) || p.starts_with("/run/netns/cni-"))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for point in points {
        let Ok(path) = std::ffi::CString::new(point.replace("\\040", " ")) else {
            continue;
        };
        // SAFETY: unmounting a path the node mounted; MNT_DETACH never blocks.
        unsafe {
            libc::umount2(path.as_ptr(), libc::MNT_DETACH);
        }
    }
    if let Ok(entries) = std::fs::read_dir("/run/netns") {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with("cni-") {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// The `kubepods` cgroups the kubelets made in every v1 hierarchy (a second node's under its
/// root), deepest first (they are empty once their processes are gone).
fn remove_cgroups() {
    let Ok(controllers) = std::fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    for controller in controllers.flatten() {
        for root in ["kubepods", SECOND_CGROUP_ROOT.trim_start_matches('/')] {
            let root = controller.path().join(root);
            if root.is_dir() {
                remove_tree(&root);
            }
        }
    }
}

fn remove_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&entry.path());
            }
        }
    }
    if let Err(e) = std::fs::remove_dir(dir) {
        tracing::debug!(cgroup = %dir.display(), error = %e, "cgroup not removed");
    }
}
