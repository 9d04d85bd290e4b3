//! Child processes of the local control plane. Each one is stopped when its handle drops, and the
//! kernel kills it if the thread that started it dies (PR_SET_PDEATHSIG), so a crashed or
//! interrupted test run leaves nothing behind.

use anyhow::{Context, Result};
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A running child process and its log file. Stopped (terminated, then killed) when dropped.
pub struct Process {
    name: String,
    child: Mutex<Child>,
    log: PathBuf,
    /// How it was started, to start it again (see [`Process::restart`]).
    spec: Spec,
}

/// A command's program, arguments, environment and directory (a `Command` cannot be cloned).
struct Spec {
    program: std::ffi::OsString,
    args: Vec<std::ffi::OsString>,
    envs: Vec<(std::ffi::OsString, Option<std::ffi::OsString>)>,
    dir: Option<PathBuf>,
}

impl Spec {
    fn of(cmd: &Command) -> Spec {
        Spec {
            program: cmd.get_program().to_owned(),
            args: cmd.get_args().map(ToOwned::to_owned).collect(),
            envs: cmd
                .get_envs()
                .map(|(k, v)| (k.to_owned(), v.map(ToOwned::to_owned)))
                .collect(),
            dir: cmd.get_current_dir().map(Path::to_path_buf),
        }
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args);
        for (key, value) in &self.envs {
            match value {
                Some(value) => cmd.env(key, value),
                None => cmd.env_remove(key),
            };
        }
        if let Some(dir) = &self.dir {
            cmd.current_dir(dir);
        }
        cmd
    }
}

/// Starts `cmd` with its output appended to `out`, tied to the calling thread's life.
fn start(name: &str, mut cmd: Command, out: File) -> Result<Child> {
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.spawn()
        .with_context(|| format!("starting {name} ({})", cmd.get_program().display()))
}

impl Process {
    /// Starts `cmd`, sending its output to `log`.
    pub fn spawn(name: &str, cmd: Command, log: &Path) -> Result<Process> {
        let out = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let spec = Spec::of(&cmd);
        let child = start(name, cmd, out)?;
        Ok(Process {
            name: name.to_string(),
            child: Mutex::new(child),
            log: log.to_path_buf(),
            spec,
        })
    }

    /// Stops it (SIGTERM, then SIGKILL after `grace`) and starts the same command again, its
    /// output appended to the same log; the new process is tied to the calling thread's life.
    pub fn restart(&self, grace: Duration) -> Result<()> {
        self.stop(grace);
        let out = File::options()
            .append(true)
            .open(&self.log)
            .with_context(|| format!("opening {}", self.log.display()))?;
        let child = start(&self.name, self.spec.command(), out)?;
        *self.child() = child;
        Ok(())
    }

    fn child(&self) -> std::sync::MutexGuard<'_, Child> {
        self.child.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The process id, for signals the tests send (stop, continue) to simulate a frozen or crashed
    /// server.
    pub fn pid(&self) -> u32 {
        self.child().id()
    }

    /// An error if the process has exited, with the end of its log.
    pub fn check_running(&self) -> Result<()> {
        let status = self.child().try_wait()?;
        if let Some(status) = status {
            anyhow::bail!(
                "{} exited ({status}); last lines of {}:\n{}",
                self.name,
                self.log.display(),
                self.log_tail(40)
            );
        }
        Ok(())
    }

    /// The last `lines` lines of its log, to explain a failure.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`.
    pub fn stop(&self, grace: Duration) {
        let mut child = self.child();
        if child.try_wait().ok().flatten().is_some() {
            return;
        }
        // SAFETY: sending a signal to our own child's pid.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// SIGKILL (no chance to clean up), and waits for it to be gone.
    pub fn kill(&self) {
        let mut child = self.child();
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

/// The stdout of a command that ran to completion, or an error naming it (`program` and `args`)
/// with its stderr.
pub(crate) fn stdout_of(out: std::process::Output, program: &str, args: &[&str]) -> Result<String> {
    if !out.status.success() {
        anyhow::bail!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
