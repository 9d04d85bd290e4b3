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
    let Context {
        client,
        scope,
        output,
        now,
        colours,
        ..
    } = *cx;
    let found: Vec<Op> = match scope {
        Scope::Namespace(ns) => client::get(client, Resource::Namespaced, Some(ns), name)
            .await?
            .into_iter()
            .collect(),
        Scope::Cluster => client::get(client, Resource::Cluster, None, name)
            .await?
            .into_iter()
            .collect(),
        Scope::All => {
            let by_name = Filters {
                name: Some(name.to_owned()),
                ..Default::default()
            };
            client::list(client, scope, &by_name).await?
        }
    };
    if found.is_empty() {
        let hint = match scope {
            Scope::Namespace(_) => {
                " (cluster-scoped subjects: --cluster-scoped; every namespace: -A)"
            }
            _ => "",
        };
        bail!("operation {name:?} not found {}{hint}", scope.describe());
    }
    let text = match output {
        Output::Json | Output::Yaml if found.len() == 1 => {
            if output == Output::Json {
                format::to_json(&found[0].raw)
            } else {
                format::to_yaml(&found[0].raw)
            }
        }
        Output::Json | Output::Yaml | Output::Name => {
            format::render_list(&found, output, scope.namespace_column(), now, colours)
        }
        Output::Table | Output::Wide => found
            .iter()
            .map(|op| format::describe(op, now))
            .collect::<Vec<_>>()
            .join("\n"),
    };
    emit(&text);
    Ok(Exit::Done)
}
