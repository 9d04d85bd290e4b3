//! Commands a test runs to the end or reads as they go: kubectl with this build's `kubectl-ifo`
//! on its PATH (so `kubectl ifo` finds it), the plugin run directly, the lines a running
//! command prints, and how much memory a process holds.

use crate::Env;
use ifo_dev::User;
use std::io::BufRead;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;

/// How a command ended: its exit code (-1 when a signal ended it) and what it printed.
#[derive(Debug)]
pub struct Run {
    /// The exit code.
    pub code: i32,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Run {
    /// Runs `cmd` to the end.
    pub fn of(cmd: &mut Command) -> Run {
        cmd.output().expect("running a command").into()
    }

    /// Panics, showing what it printed, unless it exited with 0 (`what` names the command).
    #[track_caller]
    pub fn assert_success(&self, what: &str) {
        assert_eq!(
            self.code, 0,
            "{what} failed:\n{}{}",
            self.stdout, self.stderr
        );
    }

    /// Panics, showing what it printed, unless its standard output contains `text`.
    #[track_caller]
    pub fn assert_stdout_has(&self, text: &str) {
        assert_has("output", &self.stdout, text);
    }

    /// Panics, showing what it printed, unless its standard error contains `text`.
    #[track_caller]
    pub fn assert_stderr_has(&self, text: &str) {
        assert_has("error output", &self.stderr, text);
    }
}

#[track_caller]
fn assert_has(stream: &str, printed: &str, text: &str) {
    assert!(
        printed.contains(text),
        "{text:?} not in its {stream}:\n{printed}"
    );
}

impl From<Output> for Run {
    fn from(out: Output) -> Self {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Env {
    /// kubectl as `user` with `args`, not started, with the plugin's directory first on PATH
    /// (for `kubectl ifo`) and no stdin.
    pub fn kubectl_cmd(&self, user: User, args: &[&str]) -> Command {
        let plugin = crate::plugin_binary();
        let path = format!(
            "{}:{}",
            plugin.parent().expect("the plugin's directory").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = self.cluster.kubectl(user);
        cmd.env("PATH", path).args(args).stdin(Stdio::null());
        cmd
    }

    /// [`Env::kubectl_cmd`], run to the end, whatever its exit code.
    pub fn run_kubectl(&self, user: User, args: &[&str]) -> Run {
        self.kubectl_cmd(user, args)
            .output()
            .expect("running kubectl")
            .into()
    }

    /// The `kubectl-ifo` binary run directly as `user` (its kubeconfig), not started, no stdin.
    pub fn plugin_cmd(&self, user: User, args: &[&str]) -> Command {
        let mut cmd = Command::new(crate::plugin_binary());
        cmd.env("KUBECONFIG", self.cluster.kubeconfig(user))
            .args(args)
            .stdin(Stdio::null());
        cmd
    }
}

/// Starts `cmd` in the background with its stdout and stderr captured, for
/// [`Child::wait_with_output`] (then [`Run::from`]) or [`lines_of`].
pub fn start(mut cmd: Command) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting a command")
}

/// A child process killed when dropped.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `cmd` and reads the lines it prints as they come ([`lines_of`]; what it prints on
/// stderr is dropped). It runs until the guard drops.
pub fn follow(mut cmd: Command) -> (Running, mpsc::Receiver<String>) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting a command");
    let lines = lines_of(&mut child);
    (Running(child), lines)
}

/// The lines a running command prints on its (piped) stdout, as they come; the channel closes
/// when it exits.
pub fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().expect("the child's stdout is piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The resident memory of process `pid` (`VmRSS` of `/proc/<pid>/status`), in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("reading the status of process {pid}: {e}"));
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS for process {pid}"))
}
