//! `kubectl ifo`: the kubectl plugin for live InFlightOperations. It reads them through
//! kube-apiserver with the user's kubeconfig (so RBAC applies per namespace) and lists, explains,
//! groups and counts them, and answers "is it safe to do maintenance now?" (`check`, `wait`).
//!
//! `cli` parses, `client` talks to the cluster, `watched` keeps watch state, `gate` reads the
//! server's maintenance verdicts; `op`, `filter`, `format`, `tree` and `summary` are pure.

pub mod cli;
pub mod client;
pub mod colour;
pub mod filter;
pub mod format;
pub mod gate;
pub mod op;
pub mod sanitize;
pub mod summary;
pub mod tree;
pub mod ui;
pub mod warnings;
pub mod watched;

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Parser;
use futures::StreamExt;
use jiff::Timestamp;

use cli::{Cli, Command, Global};
use client::{Resource, Scope};
use colour::Colours;
use filter::Filters;
use format::{Columns, Output, Table};
use op::{Op, sort};
use warnings::Warnings;
use watched::{Change, WatchedOps};

/// How a successful run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Nothing (or nothing left) in flight, or a command that does not judge (list, get, …).
    Done,
    /// `check` found, or `wait` timed out with, operations in flight.
    InFlight,
}

/// The plugin's `main`: parses, runs, prints errors; exit 0, 1 (in flight) or 2 (error).
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(Exit::Done) => ExitCode::SUCCESS,
        Ok(Exit::InFlight) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {}", sanitize::text(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

/// Writes to stdout; false once stdout is closed (e.g. piped into `head`).
fn emit(text: &str) -> bool {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).is_ok() && out.flush().is_ok()
}

fn scope(global: &Global, default_namespace: &str) -> Scope {
    if global.all_namespaces {
        Scope::All
    } else if global.cluster_scoped {
        Scope::Cluster
    } else {
        Scope::Namespace(
            global
                .namespace
                .clone()
                .unwrap_or_else(|| default_namespace.to_owned()),
        )
    }
}

fn filters(global: &Global, active_only: bool) -> Filters {
    let non_empty = |v: &Option<String>| v.clone().filter(|s| !s.is_empty());
    Filters {
        name: None,
        operation: non_empty(&global.operation),
        component: non_empty(&global.component),
        kind: non_empty(&global.kind),
        subject: non_empty(&global.subject),
        node: non_empty(&global.node),
        selector: non_empty(&global.selector),
        active_only,
    }
}

fn connection(g: &Global, command: &Command) -> client::Connection {
    client::Connection {
        kubeconfig: g.kubeconfig.clone(),
        context: g.context.clone(),
        cluster: g.cluster.clone(),
        user: g.user.clone(),
        as_user: g.as_user.clone(),
        as_groups: g.as_group.clone(),
        request_timeout: g
            .request_timeout
            .and_then(|t| std::time::Duration::try_from(t).ok()),
        watches: g.watch || matches!(command, Command::Wait { .. } | Command::Ui { .. }),
    }
}

/// Runs a parsed command line against the cluster: what [`main`] does once it has a runtime.
pub async fn run(cli: Cli) -> Result<Exit> {
    let g = cli.global;
    let command = cli.command.unwrap_or(Command::List);
    if let Command::Completion { shell } = command {
        emit(&cli::completion(shell));
        return Ok(Exit::Done);
    }
    if g.watch && !matches!(command, Command::List) {
        bail!("-w/--watch applies to list only (to block until operations end, use wait)");
    }
    let (client, default_namespace, warnings) = client::connect(&connection(&g, &command)).await?;
    let scope = scope(&g, &default_namespace);
    let now = Timestamp::now();
    let colours = Colours::for_stdout(g.color, g.no_color);
    match command {
        Command::List if g.watch => {
            watch_list(
                &client,
                &warnings,
                &scope,
                &filters(&g, !g.all),
                g.output,
                colours,
            )
            .await
        }
        Command::List => {
            let mut ops = client::list(&client, &scope, &filters(&g, !g.all)).await?;
            warnings.print_new();
            sort(&mut ops);
            if ops.is_empty() && matches!(g.output, Output::Table | Output::Wide) {
                let what = if g.all {
                    "operations"
                } else {
                    "operations in flight"
                };
                eprintln!("No {what} {}.", scope.describe());
            } else {
                emit(&format::render_list(
                    &ops,
                    g.output,
                    scope.namespace_column(),
                    now,
                    colours,
                ));
            }
            Ok(Exit::Done)
        }
        Command::Get { name } => get(&client, &scope, &name, g.output, now, colours).await,
        Command::Tree { for_ } => {
            let mut ops = client::list(&client, &scope, &filters(&g, !g.all)).await?;
            sort(&mut ops);
            let forest = tree::forest(&ops);
            let roots: Vec<&tree::Node<'_>> = match &for_ {
                Some(target) => tree::focus(&forest, target)
                    .map_err(anyhow::Error::msg)?
                    .into_iter()
                    .collect(),
                None => forest.iter().collect(),
            };
            match g.output {
                Output::Table | Output::Wide if roots.is_empty() => {
                    let what = for_.map(|t| format!(" for {t}")).unwrap_or_default();
                    eprintln!("No operations in flight{what} {}.", scope.describe())
                }
                Output::Table | Output::Wide => {
                    emit(&tree::render(&roots, now, colours));
                }
                other => {
                    emit(&format::render_list(
                        &ops,
                        other,
                        scope.namespace_column(),
                        now,
                        colours,
                    ));
                }
            }
            Ok(Exit::Done)
        }
        Command::Summary => {
            let ops = client::list(&client, &scope, &filters(&g, false)).await?;
            let s = summary::summarize(&ops);
            match g.output {
                Output::Json | Output::Yaml => {
                    let v = summary::to_json(&s);
                    emit(&if g.output == Output::Json {
                        format::to_json(&v)
                    } else {
                        format::to_yaml(&v)
                    });
                }
                _ if ops.is_empty() => eprintln!("No operations {}.", scope.describe()),
                _ => {
                    emit(&summary::render(&s, colours));
                }
            }
            Ok(Exit::Done)
        }
        Command::Check => {
            if let Some(name) = gate::name_for(&g, &scope)
                && let Some(gate) = gate_or_fallback(&client, &name).await?
            {
                return gate_check(&gate, &scope, g.output, now);
            }
            let f = filters(&g, true);
            let mut ops = client::list(&client, &scope, &f).await?;
            ensure_complete(&warnings)?;
            sort(&mut ops);
            report_in_flight(&ops, &scope, &f, g.output, now, colours);
            Ok(if ops.is_empty() {
                Exit::Done
            } else {
                Exit::InFlight
            })
        }
        Command::Watch { tree } => {
            if !matches!(g.output, Output::Table | Output::Wide) {
                bail!(
                    "watch draws a table or a tree (-o wide, or --tree); for a stream of objects use -w"
                );
            }
            let view = View {
                scope: &scope,
                output: g.output,
                tree,
                colours,
            };
            live(&client, &warnings, &filters(&g, !g.all), &view).await
        }
        Command::Completion { .. } => Ok(Exit::Done),
        Command::Ui {
            port,
            address,
            accept_remote,
        } => {
            let namespace = match scope {
                Scope::Namespace(ns) => Some(ns),
                Scope::All | Scope::Cluster => None,
            };
            let listen = ui::Listen {
                address,
                port,
                accept_remote,
            };
            ui::serve(client, namespace, &listen).await?;
            Ok(Exit::Done)
        }
        Command::Gates { name } => gates(&client, name.as_deref(), g.output, now, colours).await,
        Command::Wait { timeout } => {
            if let Some(name) = gate::name_for(&g, &scope)
                && gate_or_fallback(&client, &name).await?.is_some()
            {
                return gate_wait(&client, &name, &scope, g.output, timeout).await;
            }
            let f = filters(&g, true);
            wait(&client, &warnings, &scope, &f, g.output, timeout, colours).await
        }
    }
}

/// The gate `name`, or `None` when the caller may not read gates (or the server has none):
/// `check` and `wait` then answer from the operations the caller may read.
async fn gate_or_fallback(
    client: &kube::Client,
    name: &str,
) -> Result<Option<ifo_model::MaintenanceGate>> {
    match gate::get(client, name).await {
        Ok(gate) => Ok(Some(gate)),
        Err(kube::Error::Api(s)) if s.code == 403 || s.code == 404 => Ok(None),
        Err(e) => Err(gate::explain(&e, "get")),
    }
}

/// `check`'s answer from a gate: exit 0 clear, 1 in flight (with the operations), or an error
/// (exit 2) when the server cannot vouch for the scope.
fn gate_check(
    gate: &ifo_model::MaintenanceGate,
    scope: &Scope,
    output: Output,
    now: Timestamp,
) -> Result<Exit> {
    let verdict = gate::verdict(gate);
    if verdict == gate::Verdict::Unknown {
        return Err(gate::unknown_error(gate));
    }
    match output {
        Output::Json | Output::Yaml => {
            let v = serde_json::to_value(gate).unwrap_or_default();
            emit(&if output == Output::Json {
                format::to_json(&v)
            } else {
                format::to_yaml(&v)
            });
        }
        _ if verdict == gate::Verdict::Clear => {
            emit(&format!(
                "No operations in flight {}.\n",
                gate_place(gate, scope)
            ));
        }
        _ => {
            eprintln!("{}", gate::summary(gate, now));
            emit(&gate::operations(gate, now));
        }
    }
    Ok(if verdict == gate::Verdict::Clear {
        Exit::Done
    } else {
        Exit::InFlight
    })
}

/// `on node worker-1`, `of component kubevirt`, … for messages about a gate.
fn gate_place(gate: &ifo_model::MaintenanceGate, scope: &Scope) -> String {
    let name = gate.metadata.name.as_deref().unwrap_or_default();
    match name.split_once('.') {
        Some(("node", n)) => format!("on node {n}"),
        Some(("component", c)) => format!("of component {c}"),
        _ => scope.describe(),
    }
}

/// `wait` on a gate: watches it (as `kubectl wait` does) until it is clear (exit 0), the
/// timeout (exit 1, with what is still in flight), or the server cannot vouch for it (exit 2).
async fn gate_wait(
    client: &kube::Client,
    name: &str,
    scope: &Scope,
    output: Output,
    timeout: Option<jiff::SignedDuration>,
) -> Result<Exit> {
    let mut events = std::pin::pin!(gate::watch(client, name));
    let deadline = timeout
        .and_then(|t| std::time::Duration::try_from(t).ok())
        .map(|t| tokio::time::Instant::now() + t);
    let mut last: Option<ifo_model::MaintenanceGate> = None;
    loop {
        let next = match deadline {
            Some(d) => match tokio::time::timeout_at(d, events.next()).await {
                Ok(next) => next,
                Err(_) => {
                    let waited = timeout.map(|t| format!("{t:#}")).unwrap_or_default();
                    eprintln!("timed out after {waited}");
                    match &last {
                        Some(gate) => {
                            eprintln!("{}", gate::summary(gate, Timestamp::now()));
                            emit(&gate::operations(gate, Timestamp::now()));
                        }
                        None => eprintln!("(the gate could not be read in time)"),
                    }
                    return Ok(Exit::InFlight);
                }
            },
            None => events.next().await,
        };
        let gate = match next {
            Some(Ok(gate)) => gate,
            Some(Err(e)) => return Err(e),
            None => bail!("the watch ended unexpectedly"),
        };
        match gate::verdict(&gate) {
            gate::Verdict::Clear => return gate_check(&gate, scope, output, Timestamp::now()),
            gate::Verdict::Unknown => return Err(gate::unknown_error(&gate)),
            gate::Verdict::InFlight => {}
        }
        let status = |g: &ifo_model::MaintenanceGate| {
            (
                g.status.active_operations,
                g.status.expected_clear_time.clone(),
                g.status.clear().map(|c| c.message.clone()),
            )
        };
        if last.as_ref().map(status) != Some(status(&gate)) {
            let summary = gate::summary(&gate, Timestamp::now());
            let expected = summary
                .split_once(" (")
                .map(|(_, e)| format!(" ({e}"))
                .unwrap_or_default();
            eprintln!(
                "waiting for {} to complete{expected}: {}",
                plural(gate.status.active_operations as usize, "operation"),
                gate.status.clear().map_or("", |c| c.message.as_str())
            );
        }
        last = Some(gate);
    }
}

/// `gates`: the table (coloured), or the objects.
async fn gates(
    client: &kube::Client,
    name: Option<&str>,
    output: Output,
    now: Timestamp,
    colours: Colours,
) -> Result<Exit> {
    let gates = match name {
        Some(name) => vec![
            gate::get(client, name)
                .await
                .map_err(|e| gate::explain(&e, "get"))?,
        ],
        None => gate::list(client).await?,
    };
    match output {
        Output::Table | Output::Wide => {
            emit(&gate::table(&gates, now, colours));
        }
        Output::Name => {
            for g in &gates {
                let name = g.metadata.name.as_deref().unwrap_or_default();
                emit(&format!("maintenancegate/{name}\n"));
            }
        }
        Output::Json | Output::Yaml => {
            let v = serde_json::to_value(&gates).unwrap_or_default();
            emit(&if output == Output::Json {
                format::to_json(&v)
            } else {
                format::to_yaml(&v)
            });
        }
    }
    Ok(Exit::Done)
}

/// `check` and `wait` answer whether anything is in flight. When the server said its answer may
/// be incomplete (a rule target it is not watching), "nothing" cannot be trusted, nor can the
/// list: they fail (exit 2) with the server's reasons instead.
fn ensure_complete(warnings: &Warnings) -> Result<()> {
    let incomplete = warnings.incomplete();
    if incomplete.is_empty() {
        warnings.print_new();
        return Ok(());
    }
    bail!(
        "cannot tell what is in flight, the server's answer may be incomplete:\n  {}",
        incomplete.join("\n  ")
    )
}

/// `check`'s and `wait`'s answer: the operations in flight (stdout), or that there are none.
fn report_in_flight(
    ops: &[Op],
    scope: &Scope,
    filters: &Filters,
    output: Output,
    now: Timestamp,
    colours: Colours,
) {
    let matching = match filters.describe() {
        d if d.is_empty() => String::new(),
        d => format!(" matching {d}"),
    };
    match output {
        Output::Table | Output::Wide if ops.is_empty() => {
            emit(&format!(
                "No operations in flight {}{matching}.\n",
                scope.describe()
            ));
        }
        Output::Table | Output::Wide => {
            eprintln!(
                "{} in flight {}{matching}:",
                plural(ops.len(), "operation"),
                scope.describe()
            );
            emit(&format::render_list(
                ops,
                output,
                scope.namespace_column(),
                now,
                colours,
            ));
        }
        other => {
            emit(&format::render_list(
                ops,
                other,
                scope.namespace_column(),
                now,
                colours,
            ));
        }
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

async fn get(
    client: &kube::Client,
    scope: &Scope,
    name: &str,
    output: Output,
    now: Timestamp,
    colours: Colours,
) -> Result<Exit> {
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

/// `list -w`: the current operations, then a row for every change.
async fn watch_list(
    client: &kube::Client,
    warnings: &Warnings,
    scope: &Scope,
    filters: &Filters,
    output: Output,
    colours: Colours,
) -> Result<Exit> {
    let cols = Columns {
        namespace: scope.namespace_column(),
        wide: output == Output::Wide,
    };
    let mut watched = WatchedOps::new(scope.requests().len(), filters.clone());
    let mut table = Table::new(&format::header(cols), colours);
    // The phase is filtered here, not by the server: a watcher whose selector an object leaves
    // gets a DELETED event with the object as it was before (still Active), while the row to
    // print is the one that says Completed.
    let server_side = Filters {
        active_only: false,
        ..filters.clone()
    };
    let mut events = std::pin::pin!(client::watch(client, scope, &server_side));
    while let Some((i, event)) = events.next().await {
        warnings.print_new();
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
            match output {
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
            match output {
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

/// `wait`: watches until nothing matches (exit 0), or until the timeout (exit 1, with what is
/// still in flight).
async fn wait(
    client: &kube::Client,
    warnings: &Warnings,
    scope: &Scope,
    filters: &Filters,
    output: Output,
    timeout: Option<jiff::SignedDuration>,
    colours: Colours,
) -> Result<Exit> {
    let mut watched = WatchedOps::new(scope.requests().len(), filters.clone());
    let mut events = std::pin::pin!(client::watch(client, scope, filters));
    let deadline = timeout
        .and_then(|t| std::time::Duration::try_from(t).ok())
        .map(|t| tokio::time::Instant::now() + t);
    let mut reported: Option<usize> = None;
    loop {
        let next = match deadline {
            Some(d) => match tokio::time::timeout_at(d, events.next()).await {
                Ok(next) => next,
                Err(_) => {
                    let waited = timeout.map(|t| format!("{t:#}")).unwrap_or_default();
                    eprintln!("timed out after {waited}");
                    if watched.synced() {
                        report_in_flight(
                            &watched.ops(),
                            scope,
                            filters,
                            output,
                            Timestamp::now(),
                            colours,
                        );
                    } else {
                        eprintln!("(the operations could not be listed in time)");
                    }
                    return Ok(Exit::InFlight);
                }
            },
            None => events.next().await,
        };
        let Some((i, event)) = next else {
            bail!("the watch ended unexpectedly");
        };
        match event {
            Ok(ev) => {
                watched.apply(i, ev);
            }
            Err((message, true)) => bail!(message),
            Err((message, false)) => {
                eprintln!("warning: {} (retrying)", sanitize::text(&message));
                continue;
            }
        }
        if !watched.synced() {
            continue;
        }
        ensure_complete(warnings)?;
        if watched.is_empty() {
            // The watch's warnings are as old as the watch: ask once more before saying "none".
            let listed = client::list(client, scope, filters).await?;
            ensure_complete(warnings)?;
            if !listed.is_empty() {
                continue;
            }
            report_in_flight(&[], scope, filters, output, Timestamp::now(), colours);
            return Ok(Exit::Done);
        }
        if reported != Some(watched.len()) {
            reported = Some(watched.len());
            let ops = watched.ops();
            let names: Vec<String> = ops
                .iter()
                .take(5)
                .map(|o| match &o.namespace {
                    Some(ns) => format!("{ns}/{} {}", o.subject_ref(), o.spec.operation),
                    None => format!("{} {}", o.subject_ref(), o.spec.operation),
                })
                .collect();
            let more = if ops.len() > 5 { ", …" } else { "" };
            eprintln!(
                "waiting for {} to complete: {}{more}",
                plural(ops.len(), "operation"),
                names.join(", ")
            );
        }
    }
}
