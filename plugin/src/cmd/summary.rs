//! `summary`: counts by phase, component, operation and namespace, active and completed.

use anyhow::Result;

use super::Context;
use super::emit;
use crate::Exit;
use crate::client::{self};
use crate::filter::Filters;
use crate::format::{self, Output};
use crate::summary;

/// `summary` of the operations `filters` selects.
pub(crate) async fn run(cx: &Context<'_>, filters: &Filters) -> Result<Exit> {
    let ops = client::list(cx.client, cx.scope, filters).await?;
    let s = summary::summarize(&ops);
    match cx.output {
        Output::Json | Output::Yaml => {
            let v = summary::to_json(&s);
            emit(&if cx.output == Output::Json {
                format::to_json(&v)
            } else {
                format::to_yaml(&v)
            });
        }
        _ if ops.is_empty() => eprintln!("No operations {}.", cx.scope.describe()),
        _ => {
            emit(&summary::render(&s, cx.colours));
        }
    }
    Ok(Exit::Done)
}
