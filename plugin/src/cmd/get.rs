//! `get`: one operation by name, described (or as an object), looked up in every namespace with
//! `-A`.

use anyhow::{Result, bail};

use super::Context;
use super::emit;
use crate::Exit;
use crate::client::{self, Resource, Scope};
use crate::filter::Filters;
use crate::format::{self, Output};
use crate::op::Op;

/// `get name`: the operation described, or an error naming where it was looked for.
pub(crate) async fn run(cx: &Context<'_>, name: &str) -> Result<Exit> {
    let found: Vec<Op> = match cx.scope {
        Scope::Namespace(ns) => client::get(cx.client, Resource::Namespaced, Some(ns), name)
            .await?
            .into_iter()
            .collect(),
        Scope::Cluster => client::get(cx.client, Resource::Cluster, None, name)
            .await?
            .into_iter()
            .collect(),
        Scope::All => {
            let by_name = Filters {
                name: Some(name.to_owned()),
                ..Default::default()
            };
            client::list(cx.client, cx.scope, &by_name).await?
        }
    };
    if found.is_empty() {
        let hint = match cx.scope {
            Scope::Namespace(_) => {
                " (cluster-scoped subjects: --cluster-scoped; every namespace: -A)"
            }
            _ => "",
        };
        bail!("operation {name:?} not found {}{hint}", cx.scope.describe());
    }
    let text = match cx.output {
        Output::Json | Output::Yaml if found.len() == 1 => {
            if cx.output == Output::Json {
                format::to_json(&found[0].raw)
            } else {
                format::to_yaml(&found[0].raw)
            }
        }
        Output::Json | Output::Yaml | Output::Name => format::render_list(
            &found,
            cx.output,
            cx.scope.namespace_column(),
            cx.now,
            cx.colours,
        ),
        Output::Table | Output::Wide => found
            .iter()
            .map(|op| format::describe(op, cx.now))
            .collect::<Vec<_>>()
            .join("\n"),
    };
    emit(&text);
    Ok(Exit::Done)
}
