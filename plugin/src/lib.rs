//! `kubectl ifo`: the kubectl plugin for live InFlightOperations. It reads them through
//! kube-apiserver with the user's kubeconfig (so RBAC applies per namespace) and lists, explains,
//! groups and counts them, and answers "is it safe to do maintenance now?" (`check`, `wait`).
//!
//! `cli` parses, `cmd` runs each command (this file only picks which), `client` talks to the
//! cluster, `watched` keeps watch state, `gate` reads the server's maintenance verdicts, `rules`
//! what the rulesets learned of their operations' durations; `op`,
//! `filter`, `format`, `tree`, `summary` and `holds` are pure.

pub mod cli;
pub mod client;
mod cmd;
pub mod colour;
pub mod filter;
pub mod format;
pub mod gate;
pub mod holds;
pub mod op;
pub mod rules;
pub mod sanitize;
pub mod summary;
pub mod tree;
pub mod ui;
pub mod warnings;
pub mod watched;

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Parser;
use jiff::Timestamp;

use cli::{Cli, Command};
use client::Scope;
use cmd::args::{connection, filters, refuse_for_ui, refuse_narrowing, scope};
use cmd::emit;
use colour::Colours;

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
    let cx = cmd::Context {
        client: &client,
        warnings: &warnings,
        scope: &scope,
        output: g.output,
        now,
        colours,
    };
    match command {
        Command::List if g.watch => cmd::list::watch(&cx, &filters(&g, !g.all)).await,
        Command::List => cmd::list::run(&cx, &filters(&g, !g.all)).await,
        Command::Get { name } => cmd::get::run(&cx, &name).await,
        Command::Tree { for_ } => cmd::tree::run(&cx, &filters(&g, !g.all), for_).await,
        Command::Summary => cmd::summary::run(&cx, &filters(&g, false)).await,
        Command::Check => {
            let gate = gate::name_for(&g, &scope);
            cmd::check::run(&cx, gate, &filters(&g, true)).await
        }
        Command::Watch { tree } => cmd::watch::run(&cx, &filters(&g, !g.all), tree).await,
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
        Command::Plan { for_, confidence } => {
            let Some(gate) = gate::name_for(&g, &scope) else {
                bail!(
                    "plan answers for a whole node (--node), component (--component), namespace (-n) or the cluster (-A): drop --operation, --kind, --subject, -l and --cluster-scoped"
                );
            };
            cmd::plan::run(&cx, &gate, for_, confidence).await
        }
        Command::Gates { name } => cmd::gates::run(&cx, name.as_deref()).await,
        Command::Override {
            node,
            reason,
            for_,
            remove,
        } => {
            let change = match (remove, reason, for_) {
                (true, _, _) => cmd::overrides::Change::Remove,
                (false, Some(reason), Some(for_)) => cmd::overrides::Change::Set { reason, for_ },
                _ => bail!("override needs --reason and --for, or --remove"),
            };
            cmd::overrides::run(&cx, &node, change).await
        }
        Command::Rules { name } => cmd::rules::run(&cx, name.as_deref()).await,
        Command::Wait { timeout } => {
            let gate = gate::name_for(&g, &scope);
            cmd::wait::run(&cx, gate, &filters(&g, true), timeout).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
