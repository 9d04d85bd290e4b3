//! The body of each `kubectl ifo` command, one file each (`check` and `wait` share the choice
//! between a gate and the operations, `fallback`), and what they share: the meaning of the
//! shared flags (`args`) and writing to stdout.

pub(crate) mod args;
pub(crate) mod check;
mod deadline;
mod fallback;
pub(crate) mod gates;
pub(crate) mod get;
pub(crate) mod list;
pub(crate) mod overrides;
pub(crate) mod plan;
pub(crate) mod rules;
pub(crate) mod summary;
pub(crate) mod tree;
pub(crate) mod wait;
pub(crate) mod watch;

use std::io::Write;

use jiff::Timestamp;

use crate::client::Scope;
use crate::colour::Colours;
use crate::format::Output;
use crate::warnings::Warnings;

/// What every command runs with: the cluster and what it warned of, where the command looks, and
/// how it prints.
#[derive(Clone, Copy)]
pub(crate) struct Context<'a> {
    pub(crate) client: &'a kube::Client,
    pub(crate) warnings: &'a Warnings,
    pub(crate) scope: &'a Scope,
    pub(crate) output: Output,
    /// When the command started, for the ages it prints once.
    pub(crate) now: Timestamp,
    pub(crate) colours: Colours,
}

/// Writes to stdout; false once stdout is closed (e.g. piped into `head`).
pub(crate) fn emit(text: &str) -> bool {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).is_ok() && out.flush().is_ok()
}

/// `1 operation`, `2 operations`.
fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}
