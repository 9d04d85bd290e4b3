//! `list` (the default): the operations as a table or as objects, once; with `-w`, the current
//! ones and then a row for every change, as `kubectl get -w` prints them.

use anyhow::{Result, bail};
use futures::StreamExt;
use jiff::Timestamp;

use super::Context;
use super::emit;
use crate::Exit;
use crate::client::{self};
use crate::filter::Filters;
use crate::format::{self, Columns, Output, Table};
use crate::op::{Op, sort};
use crate::sanitize;
use crate::watched::{Change, WatchedOps};

/// `list` once: the operations `filters` selects (completed ones too unless `active_only`), or
/// that there are none.
pub(crate) async fn run(cx: &Context<'_>, filters: &Filters) -> Result<Exit> {
    let mut ops = client::list(cx.client, cx.scope, filters).await?;
    cx.warnings.print_new();
    sort(&mut ops);
    if ops.is_empty() && matches!(cx.output, Output::Table | Output::Wide) {
        let what = if !filters.active_only {
            "operations"
        } else {
            "operations in flight"
        };
        eprintln!("No {what} {}.", cx.scope.describe());
    } else {
        emit(&format::render_list(
            &ops,
            cx.output,
            cx.scope.namespace_column(),
            cx.now,
            cx.colours,
        ));
    }
    Ok(Exit::Done)
}

/// `list -w`: the current operations, then a row for every change.
pub(crate) async fn watch(cx: &Context<'_>, filters: &Filters) -> Result<Exit> {
    let cols = Columns {
        namespace: cx.scope.namespace_column(),
        wide: cx.output == Output::Wide,
    };
    let mut watched = WatchedOps::new(cx.scope.requests().len(), filters.clone());
    let mut table = Table::new(&format::header(cols), cx.colours);
    // The phase is filtered here, not by the server: a watcher whose selector an object leaves
    // gets a DELETED event with the object as it was before (still Active), while the row to
    // print is the one that says Completed.
    let server_side = Filters {
        active_only: false,
        ..filters.clone()
    };
    let mut events = std::pin::pin!(client::watch(cx.client, cx.scope, &server_side));
    while let Some((i, event)) = events.next().await {
        cx.warnings.print_new();
        let event = match event {
            Ok(ev) => ev,
            Err((message, true)) => bail!(message),
            Err((message, false)) => {
                eprintln!("warning: {} (retrying)", sanitize::text(&message));
                continue;
            }
        };
        let was_synced = watched.synced();
        let changes = watched.apply(i, event);
        let now = Timestamp::now();
        let text = if !was_synced && watched.synced() {
            let ops = watched.ops();
            match cx.output {
                Output::Table | Output::Wide => {
                    let mut rows = vec![format::header(cols)];
                    rows.extend(ops.iter().map(|o| format::row(o, cols, now)));
                    table.fit(&rows);
                    rows.iter().map(|r| table.line(r) + "\n").collect()
                }
                other => stream_objects(&ops, other),
            }
        } else if was_synced {
            let ops: Vec<Op> = changes
                .into_iter()
                .map(|c| match c {
                    Change::Upsert(op) | Change::Gone(op) => op,
                })
                .collect();
            match cx.output {
                Output::Table | Output::Wide => {
                    let rows: Vec<_> = ops.iter().map(|o| format::row(o, cols, now)).collect();
                    table.fit(&rows);
                    rows.iter().map(|r| table.line(r) + "\n").collect()
                }
                other => stream_objects(&ops, other),
            }
        } else {
            String::new()
        };
        if !text.is_empty() && !emit(&text) {
            break;
        }
    }
    Ok(Exit::Done)
}

/// Objects one after another, as `kubectl get -w -o json|yaml|name` prints them.
fn stream_objects(ops: &[Op], output: Output) -> String {
    ops.iter()
        .map(|op| match output {
            Output::Json => format::to_json(&op.raw),
            Output::Yaml => format!("---\n{}", format::to_yaml(&op.raw)),
            _ => op.qualified_name() + "\n",
        })
        .collect()
}
