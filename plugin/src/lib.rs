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

/// The flag that makes `command` ask about a whole node or component (a maintenance gate, which
/// is cluster-wide): `--node` or `--component` given to `check` or `wait`. Listing commands take
/// them as filters within the namespace they list.
fn whole_gate_flag(global: &Global, command: &Command) -> Option<&'static str> {
    let set = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.is_empty());
    if !matches!(command, Command::Check | Command::Wait { .. }) {
        None
    } else if set(&global.node) {
        Some("--node")
    } else if set(&global.component) {
        Some("--component")
    } else {
        None
    }
}

/// Refuses what would narrow a question about a whole node or component to part of it: `-n` or
/// `--cluster-scoped` (without `-A`) with `check`/`wait` `--node`/`--component`. An answer "clear"
/// for one namespace would read as the node's, and a drain after it would not wait for the rest.
fn refuse_narrowing(global: &Global, command: &Command) -> Result<()> {
    let Some(flag) = whole_gate_flag(global, command) else {
        return Ok(());
    };
    if global.all_namespaces {
        return Ok(());
    }
    let what = flag.trim_start_matches('-');
    let narrowing = if global.namespace.is_some() {
        "-n/--namespace"
    } else if global.cluster_scoped {
        "--cluster-scoped"
    } else {
        return Ok(());
    };
    bail!(
        "{flag} asks about the whole {what}, across every namespace: drop {narrowing} (or use -A)"
    )
}

/// `ui` takes the connection flags and the namespace (`-n`, `-A`) of the shared ones: the page
/// has its own views and filters, so any other flag is refused rather than silently ignored.
fn refuse_for_ui(global: &Global) -> Result<()> {
    let given: Vec<&str> = [
        (global.output != Output::Table, "-o/--output"),
        (global.all, "--all"),
        (global.color, "--color"),
        (global.no_color, "--no-color"),
        (global.cluster_scoped, "--cluster-scoped"),
        (global.operation.is_some(), "--operation"),
        (global.component.is_some(), "--component"),
        (global.kind.is_some(), "--kind"),
        (global.subject.is_some(), "--subject"),
        (global.node.is_some(), "--node"),
        (global.selector.is_some(), "-l/--selector"),
    ]
    .into_iter()
    .filter_map(|(set, flag)| set.then_some(flag))
    .collect();
    if given.is_empty() {
        return Ok(());
    }
    bail!(
        "ui takes only the connection flags and -n/-A (the page has its own views and filters): drop {}",
        given.join(", ")
    )
}

/// Where `command` looks: `-A`; `check`/`wait` with `--node`/`--component` (every namespace, as
/// the node's or component's gate does); `--cluster-scoped`; else one namespace (`-n`, or the
/// context's).
fn scope(global: &Global, command: &Command, default_namespace: &str) -> Scope {
    if global.all_namespaces || whole_gate_flag(global, command).is_some() {
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
    refuse_narrowing(&g, &command)?;
    if matches!(command, Command::Ui { .. }) {
        refuse_for_ui(&g)?;
    }
    let (client, default_namespace, warnings) = client::connect(&connection(&g, &command)).await?;
    let scope = scope(&g, &command, &default_namespace);
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
            let mut fallback = None;
            if let Some(name) = gate::name_for(&g, &scope) {
                match gate_or_fallback(&client, &name).await? {
                    Gated::Gate(gate) => return gate_check(&gate, &scope, g.output, now),
                    Gated::Fallback(why) => fallback = Some(why),
                }
            }
            let f = filters(&g, true);
            let mut ops = client::list(&client, &scope, &f)
                .await
                .map_err(|e| instead(fallback.as_deref(), e))?;
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
            let mut fallback = None;
            if let Some(name) = gate::name_for(&g, &scope) {
                match gate_or_fallback(&client, &name).await? {
                    Gated::Gate(_) => {
                        return gate_wait(&client, &name, &scope, g.output, timeout).await;
                    }
                    Gated::Fallback(why) => fallback = Some(why),
                }
            }
            let f = filters(&g, true);
            wait(&client, &warnings, &scope, &f, g.output, timeout, colours)
                .await
                .map_err(|e| instead(fallback.as_deref(), e))
        }
    }
}

/// What answers a `check` or `wait` that a gate could.
#[derive(Debug)]
enum Gated {
    /// The gate.
    Gate(Box<ifo_model::MaintenanceGate>),
    /// The operations the caller may read, because the gate could not be read (why).
    Fallback(String),
}

/// The gate `name`, or a fallback to the operations when the caller may not read gates (403) or
/// the server serves none (a 404 that names nothing). A 404 about the gate itself (its node,
/// namespace or component does not exist) is an error (exit 2): the operations would answer
/// "nothing in flight" for a mistyped node.
async fn gate_or_fallback(client: &kube::Client, name: &str) -> Result<Gated> {
    match gate::get(client, name).await {
        Ok(gate) => Ok(Gated::Gate(Box::new(gate))),
        Err(kube::Error::Api(s)) => match fallback(name, &s) {
            Some(why) => Ok(Gated::Fallback(why)),
            None if s.code == 404 => Err(gate::missing_error(name, &s)),
            None => Err(gate::explain(&kube::Error::Api(s), "get")),
        },
        Err(e) => Err(gate::explain(&e, "get")),
    }
}

/// Why `check`/`wait` answer from the operations instead of the gate `name` that answered
/// `status`; `None` when they may not (the gate does not exist, or another error).
fn fallback(name: &str, status: &kube::core::Status) -> Option<String> {
    match (status.code, gate::not_found(status)) {
        (403, _) => Some(format!(
            "you may not get the gate {name} (reading gates needs a cluster-wide role such as ifo-maintenancegate-reader)"
        )),
        (_, Some(gate::NotFound::Resource)) => {
            Some(format!("the server serves no gates (such as {name})"))
        }
        _ => None,
    }
}

/// An error of answering from the operations instead of a gate (`why`: why instead), saying so.
/// The list's hint to use `-n` does not apply: the question was about every namespace.
fn instead(why: Option<&str>, e: anyhow::Error) -> anyhow::Error {
    match why {
        None => e,
        Some(why) => {
            let inner = format!("{e:#}").replace(client::ALL_NAMESPACES_HINT, "");
            anyhow::anyhow!("{why}, and answering from the operations instead failed: {inner}")
        }
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

/// `wait` on a gate: watches it (as `kubectl wait` does) until it is clear (exit 0) or the
/// timeout: exit 1 with what is still in flight, or exit 2 with why when the server could not
/// vouch for the gate then. An `Unknown` gate is waited through, as `kubectl wait` does (a new
/// ruleset's first list makes every node's gate Unknown for a moment), saying why once.
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
                        Some(gate) if gate::verdict(gate) == gate::Verdict::Unknown => {
                            return Err(gate::unknown_error(gate));
                        }
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
        let verdict = gate::verdict(&gate);
        if verdict == gate::Verdict::Clear {
            return gate_check(&gate, scope, output, Timestamp::now());
        }
        let status = |g: &ifo_model::MaintenanceGate| {
            (
                g.status.active_operations,
                g.status.expected_clear_time.clone(),
                g.status.clear().map(|c| c.message.clone()),
            )
        };
        if verdict == gate::Verdict::Unknown {
            if last.as_ref().map(gate::verdict) != Some(gate::Verdict::Unknown) {
                eprintln!(
                    "waiting: the server cannot vouch for {name} now:\n  {}",
                    gate::unknown_reasons(&gate).join("\n  ")
                );
            }
        } else if last.as_ref().map(status) != Some(status(&gate)) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> (Global, Command) {
        let cli = Cli::try_parse_from(std::iter::once("kubectl-ifo").chain(args.iter().copied()))
            .unwrap();
        (cli.global, cli.command.unwrap_or(Command::List))
    }

    /// The scope and the gate a command line asks about, in a context whose namespace is
    /// `default`; or the refusal.
    fn ask(args: &[&str]) -> Result<(Scope, Option<String>), String> {
        let (g, command) = parse(args);
        refuse_narrowing(&g, &command).map_err(|e| format!("{e:#}"))?;
        let scope = scope(&g, &command, "default");
        let gate = gate::name_for(&g, &scope);
        Ok((scope, gate))
    }

    #[test]
    fn ui_refuses_the_flags_it_would_ignore() {
        let refused = |args: &[&str]| {
            let (g, _) = parse(args);
            refuse_for_ui(&g).map_err(|e| format!("{e:#}"))
        };
        assert_eq!(refused(&["ui", "-A", "--port", "8001"]), Ok(()));
        assert_eq!(refused(&["-n", "vms", "ui", "--context", "prod"]), Ok(()));
        assert_eq!(
            refused(&["ui", "-o", "json", "--all", "--color"]),
            Err(
                "ui takes only the connection flags and -n/-A (the page has its own views and \
                 filters): drop -o/--output, --all, --color"
                    .into()
            )
        );
        assert!(
            refused(&["ui", "--node", "w1"])
                .unwrap_err()
                .ends_with("drop --node")
        );
    }

    #[test]
    fn node_and_component_make_check_and_wait_ask_about_every_namespace() {
        let default = Scope::Namespace("default".into());
        for args in [
            &["check", "--node", "w1"][..],
            &["safe", "--node", "w1"],
            &["wait", "--node", "w1", "--timeout", "3s"],
            &["check", "-A", "--node", "w1"],
            // -A wins over -n, as in kubectl.
            &["check", "-A", "-n", "vms", "--node", "w1"],
        ] {
            assert_eq!(
                ask(args),
                Ok((Scope::All, Some("node.w1".into()))),
                "{args:?}"
            );
        }
        assert_eq!(
            ask(&["wait", "--component", "kubevirt"]),
            Ok((Scope::All, Some("component.kubevirt".into())))
        );
        // Other filters: every namespace still, answered from the operations.
        assert_eq!(
            ask(&["check", "--node", "w1", "--operation", "Migrating"]),
            Ok((Scope::All, None))
        );
        assert_eq!(
            ask(&["check", "--node", "w1", "--component", "kubevirt"]),
            Ok((Scope::All, None))
        );
        // Without --node or --component: the namespace's gate, as before.
        assert_eq!(
            ask(&["check"]),
            Ok((default.clone(), Some("namespace.default".into())))
        );
        assert_eq!(
            ask(&["wait", "-n", "vms"]),
            Ok((Scope::Namespace("vms".into()), Some("namespace.vms".into())))
        );
        assert_eq!(
            ask(&["check", "-A"]),
            Ok((Scope::All, Some("cluster".into())))
        );
        // An empty --node filters nothing, and asks about nothing.
        assert_eq!(
            ask(&["check", "--node", ""]),
            Ok((default.clone(), Some("namespace.default".into())))
        );
    }

    #[test]
    fn listing_commands_keep_node_and_component_as_filters_in_the_namespace() {
        let default = Scope::Namespace("default".into());
        for args in [
            &["--node", "w1"][..],
            &["list", "--node", "w1"],
            &["tree", "--node", "w1"],
            &["summary", "--component", "kubevirt"],
            &["watch", "--node", "w1"],
        ] {
            assert_eq!(ask(args).map(|(s, _)| s), Ok(default.clone()), "{args:?}");
        }
        assert_eq!(
            ask(&["list", "-n", "vms", "--node", "w1"]).map(|(s, _)| s),
            Ok(Scope::Namespace("vms".into()))
        );
    }

    #[test]
    fn a_namespace_with_node_or_component_is_refused_by_check_and_wait() {
        assert_eq!(
            ask(&["check", "--node", "w1", "-n", "default"]),
            Err(
                "--node asks about the whole node, across every namespace: drop -n/--namespace (or use -A)"
                    .into()
            )
        );
        assert_eq!(
            ask(&["wait", "--namespace", "vms", "--component", "kubevirt"]),
            Err(
                "--component asks about the whole component, across every namespace: drop -n/--namespace (or use -A)"
                    .into()
            )
        );
        assert_eq!(
            ask(&["check", "--node", "w1", "--cluster-scoped"]),
            Err(
                "--node asks about the whole node, across every namespace: drop --cluster-scoped (or use -A)"
                    .into()
            )
        );
    }

    #[test]
    fn the_refusal_comes_before_connecting() {
        let cli = Cli::try_parse_from([
            "kubectl-ifo",
            "--kubeconfig",
            "/nonexistent/config",
            "check",
            "-n",
            "default",
            "--node",
            "w1",
        ])
        .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let err = rt.block_on(run(cli)).unwrap_err();
        assert!(
            format!("{err:#}").starts_with("--node asks about the whole node"),
            "{err:#}"
        );
    }

    fn status(code: u16, message: &str, details: Option<serde_json::Value>) -> kube::core::Status {
        kube::core::Status {
            code,
            message: message.into(),
            reason: if code == 404 { "NotFound" } else { "Forbidden" }.into(),
            details: details.map(|d| serde_json::from_value(d).unwrap()),
            ..Default::default()
        }
    }

    #[test]
    fn a_missing_gate_is_an_error_and_only_a_missing_resource_or_forbidden_falls_back() {
        let missing = status(
            404,
            "maintenancegates \"node.nosuch\" not found: the cluster has no node nosuch",
            Some(serde_json::json!({"name": "node.nosuch", "kind": "maintenancegates"})),
        );
        assert_eq!(fallback("node.nosuch", &missing), None);
        // Of the gates resource, even without a name.
        let of_gates = status(
            404,
            "not found",
            Some(serde_json::json!({"kind": "maintenancegates"})),
        );
        assert_eq!(fallback("node.nosuch", &of_gates), None);
        // kube-apiserver: the resource itself is not served.
        let not_served = status(
            404,
            "the server could not find the requested resource",
            Some(serde_json::json!({})),
        );
        let why = fallback("node.w1", &not_served).unwrap();
        assert!(why.contains("serves no gates"), "{why}");
        assert!(
            fallback(
                "node.w1",
                &status(
                    404,
                    "the server could not find the requested resource",
                    None
                )
            )
            .is_some()
        );
        let forbidden = status(403, "User \"alice\" cannot get ...", None);
        let why = fallback("node.w1", &forbidden).unwrap();
        assert!(why.contains("ifo-maintenancegate-reader"), "{why}");
        assert_eq!(fallback("node.w1", &status(500, "boom", None)), None);
    }

    #[test]
    fn a_failed_fallback_says_why_it_fell_back_without_suggesting_a_namespace() {
        let list = anyhow::anyhow!(
            "forbidden: you may not list inflightoperations.live.ifo.kubevirt.io in all namespaces{}\n  (no)",
            client::ALL_NAMESPACES_HINT
        );
        let text = format!(
            "{:#}",
            instead(Some("you may not get the gate node.w1 (…)"), list)
        );
        assert_eq!(
            text,
            "you may not get the gate node.w1 (…), and answering from the operations instead failed: forbidden: you may not list inflightoperations.live.ifo.kubevirt.io in all namespaces\n  (no)"
        );
        let text = format!("{:#}", instead(None, anyhow::anyhow!("as is")));
        assert_eq!(text, "as is");
    }
}
