//! Never two leaders, from each replica's own log of its terms: a term begins at its
//! `serving as the leader` line and ends at its `not serving` line, or when the process ended
//! (a crash writes nothing). The terms of every replica, sorted by start, must not overlap.

use anyhow::{Context, Result, bail};
use ifo_dev::User;
use ifo_dev::install::NAMESPACE;
use jiff::Timestamp;
use std::process::{Child, Stdio};

use super::Ctx;

/// One replica's time serving, by the node's clock.
#[derive(Debug, Clone)]
pub(crate) struct Term {
    pub replica: String,
    pub start: Timestamp,
    pub end: Timestamp,
}

/// The terms in one replica's log (`kubectl logs --timestamps`); a term still open at the end of
/// the log lasts until `ended` (when the process ended, or now for a live one).
pub(crate) fn terms(replica: &str, log: &str, ended: Timestamp) -> Vec<Term> {
    let mut terms = Vec::new();
    let mut open: Option<Timestamp> = None;
    for line in log.lines() {
        let Some((at, text)) = line.split_once(' ') else {
            continue;
        };
        let Ok(at) = at.parse::<Timestamp>() else {
            continue;
        };
        if text.contains("serving as the leader") {
            open.get_or_insert(at);
        } else if text.contains("not serving")
            && let Some(start) = open.take()
        {
            terms.push(Term {
                replica: replica.to_owned(),
                start,
                end: at,
            });
        }
    }
    if let Some(start) = open {
        terms.push(Term {
            replica: replica.to_owned(),
            start,
            end: ended,
        });
    }
    terms
}

/// Fails when two replicas' terms overlap; returns how many terms were checked.
pub(crate) fn at_most_one_leader(mut all: Vec<Term>) -> Result<usize> {
    all.sort_by_key(|t| t.start);
    for (i, later) in all.iter().enumerate() {
        if let Some(earlier) = all[..i]
            .iter()
            .find(|t| t.replica != later.replica && t.end > later.start)
        {
            bail!("two leaders at once: {earlier:?} and {later:?}");
        }
    }
    Ok(all.len())
}

/// `kubectl logs -f --timestamps` of a pod's current container, from its start until it ends
/// (or until [`Follow::stop`]): the log of a replica about to be lost.
pub(crate) struct Follow {
    child: Child,
    read: std::thread::JoinHandle<String>,
}

impl Follow {
    /// Follows `pod`'s log; returns once kubectl printed its first line, so that the container
    /// followed is the current one, not its successor.
    pub(crate) fn start(ctx: &Ctx, pod: &str) -> Result<Follow> {
        use std::io::BufRead as _;
        use std::sync::atomic::Ordering;
        let mut child = ctx
            .cluster
            .kubectl(User::Admin)
            .args(["-n", NAMESPACE, "logs", "-f", "--timestamps", pod])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting kubectl logs -f")?;
        let stdout = child.stdout.take().context("kubectl's stdout")?;
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = seen.clone();
        let read = std::thread::spawn(move || {
            let mut text = String::new();
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                text.push_str(&line);
                text.push('\n');
                flag.store(true, Ordering::SeqCst);
            }
            text
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !seen.load(Ordering::SeqCst) {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                bail!("kubectl logs -f {pod} printed nothing in 10s");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Ok(Follow { child, read })
    }

    /// What it printed.
    pub(crate) fn stop(mut self) -> Result<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.read
            .join()
            .map_err(|_| anyhow::anyhow!("reading kubectl logs -f failed"))
    }
}

/// `kubectl logs --timestamps` of a pod's current container.
pub(crate) fn log(ctx: &Ctx, pod: &str) -> Result<String> {
    ctx.cluster.kubectl_run(
        User::Admin,
        &["-n", NAMESPACE, "logs", "--timestamps", pod],
        None,
    )
}
