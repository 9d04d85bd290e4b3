//! `tree`: the subjects as a tree (component → namespace → subject, subjects under their owners),
//! each with its operations; `--for` one subject and what hangs under it.

use anyhow::Result;

use super::Context;
use super::emit;
use crate::Exit;
use crate::client::{self};
use crate::filter::Filters;
use crate::format::{self, Output};
use crate::op::sort;
use crate::tree;

/// `tree` of the operations `filters` selects, focused on `for_` when given.
pub(crate) async fn run(cx: &Context<'_>, filters: &Filters, for_: Option<String>) -> Result<Exit> {
    let mut ops = client::list(cx.client, cx.scope, filters).await?;
    sort(&mut ops);
    let forest = tree::forest(&ops);
    let roots: Vec<&tree::Node<'_>> = match &for_ {
        Some(target) => tree::focus(&forest, target)
            .map_err(anyhow::Error::msg)?
            .into_iter()
            .collect(),
        None => forest.iter().collect(),
    };
    match cx.output {
        Output::Table | Output::Wide if roots.is_empty() => {
            let what = for_.map(|t| format!(" for {t}")).unwrap_or_default();
            eprintln!("No operations in flight{what} {}.", cx.scope.describe())
        }
        Output::Table | Output::Wide => {
            emit(&tree::render(&roots, cx.now, cx.colours));
        }
        other => {
            emit(&format::render_list(
                &ops,
                other,
                cx.scope.namespace_column(),
                cx.now,
                cx.colours,
            ));
        }
    }
    Ok(Exit::Done)
}
