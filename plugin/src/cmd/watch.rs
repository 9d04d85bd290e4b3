//! `watch`: a live view of what is in flight (a table, or the tree), redrawn in place as
//! operations change, until interrupted.

use anyhow::{Result, bail};
use futures::StreamExt;
use jiff::Timestamp;

use super::Context;
use super::{emit, plural};
use crate::Exit;
use crate::client::{self, Scope};
use crate::colour::Colours;
use crate::filter::Filters;
use crate::format::{self, Output};
use crate::op::{Op, sort};
use crate::sanitize;
use crate::tree;
use crate::warnings::Warnings;
use crate::watched::WatchedOps;

/// `watch` of the operations `filters` selects: a table (`-o wide` too) or, with `tree`, the tree.
pub(crate) async fn run(cx: &Context<'_>, filters: &Filters, tree: bool) -> Result<Exit> {
    if !matches!(cx.output, Output::Table | Output::Wide) {
        bail!("watch draws a table or a tree (-o wide, or --tree); for a stream of objects use -w");
    }
    let view = View {
        scope: cx.scope,
        output: cx.output,
        tree,
        colours: cx.colours,
    };
    live(cx.client, cx.warnings, filters, &view).await
}

/// What `watch` draws.
struct View<'a> {
    scope: &'a Scope,
    output: Output,
    tree: bool,
    colours: Colours,
}

impl View<'_> {
    /// The whole screen: a status line, then the table or tree of what is in flight.
    fn draw(&self, ops: &[Op], now: Timestamp) -> String {
        let status = format!(
            "{} in flight {} at {} (Ctrl-C to stop)\n\n",
            plural(ops.len(), "operation"),
            self.scope.describe(),
            now.strftime("%H:%M:%S")
        );
        let body = if self.tree {
            let forest = tree::forest(ops);
            tree::render(&forest.iter().collect::<Vec<_>>(), now, self.colours)
        } else {
            format::render_list(
                ops,
                self.output,
                self.scope.namespace_column(),
                now,
                self.colours,
            )
        };
        status + &body
    }
}

/// `watch`: redraws the view in place (on a terminal: at most four times a second, and every
/// second for the ages) until interrupted; elsewhere prints each new state once.
async fn live(
    client: &kube::Client,
    warnings: &Warnings,
    filters: &Filters,
    view: &View<'_>,
) -> Result<Exit> {
    use std::io::IsTerminal as _;
    const CLEAR: &str = "\x1b[H\x1b[2J";
    let terminal = std::io::stdout().is_terminal();
    let mut watched = WatchedOps::new(view.scope.requests().len(), filters.clone());
    let server_side = Filters {
        active_only: false,
        ..filters.clone()
    };
    let mut events = std::pin::pin!(client::watch(client, view.scope, &server_side));
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(250));
    let (mut changed, mut ticks) = (false, 0u32);
    loop {
        tokio::select! {
            next = events.next() => match next {
                None => bail!("the watch ended unexpectedly"),
                Some((i, Ok(event))) => {
                    watched.apply(i, event);
                    changed = true;
                }
                Some((_, Err((message, true)))) => bail!(message),
                Some((_, Err((message, false)))) => eprintln!("warning: {} (retrying)", sanitize::text(&message)),
            },
            _ = tick.tick() => {
                ticks += 1;
                // Ages move on: redraw a terminal every second.
                changed |= terminal && ticks % 4 == 0;
                if changed && watched.synced() {
                    changed = false;
                    warnings.print_new();
                    let mut ops = watched.ops();
                    sort(&mut ops);
                    let screen = view.draw(&ops, Timestamp::now());
                    let text = if terminal { format!("{CLEAR}{screen}") } else { screen + "\n" };
                    if !emit(&text) {
                        return Ok(Exit::Done);
                    }
                }
            }
        }
    }
}
