//! What the shared flags mean for a command: where it looks (`-n`, `-A`, `--cluster-scoped`, and
//! `check`/`wait` with `--node`/`--component` asking about every namespace), what it filters, how
//! it connects, and the combinations refused before connecting.

use anyhow::{Result, bail};

use crate::cli::{Command, Global};
use crate::client::{self, Scope};
use crate::filter::Filters;
use crate::format::Output;

/// The flag that makes `command` ask about a whole node or component (a maintenance gate, which
/// is cluster-wide): `--node` or `--component` given to `check` or `wait`. Listing commands take
/// them as filters within the namespace they list.
fn whole_gate_flag(global: &Global, command: &Command) -> Option<&'static str> {
    let set = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.is_empty());
    if !matches!(
        command,
        Command::Check | Command::Wait { .. } | Command::Plan { .. }
    ) {
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
pub(crate) fn refuse_narrowing(global: &Global, command: &Command) -> Result<()> {
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
pub(crate) fn refuse_for_ui(global: &Global) -> Result<()> {
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
pub(crate) fn scope(global: &Global, command: &Command, default_namespace: &str) -> Scope {
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

/// The filters the flags give; `active_only` drops completed operations.
pub(crate) fn filters(global: &Global, active_only: bool) -> Filters {
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

/// How `command` connects: the kubeconfig flags, and whether it watches.
pub(crate) fn connection(g: &Global, command: &Command) -> client::Connection {
    client::Connection {
        kubeconfig: g.kubeconfig.clone(),
        entries: kube::config::KubeConfigOptions {
            context: g.context.clone(),
            cluster: g.cluster.clone(),
            user: g.user.clone(),
        },
        as_user: g.as_user.clone(),
        as_groups: g.as_group.clone(),
        request_timeout: g
            .request_timeout
            .and_then(|t| std::time::Duration::try_from(t).ok()),
        watches: g.watch || matches!(command, Command::Wait { .. } | Command::Ui { .. }),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cli::Cli;
    use crate::gate;

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
    fn plan_asks_about_the_same_gates_as_check() {
        assert_eq!(
            ask(&["plan", "--for", "20m", "--node", "w1", "-n", "default"]),
            Err(
                "--node asks about the whole node, across every namespace: drop -n/--namespace (or use -A)"
                    .into()
            )
        );
        let gate_of = |args: &[&str]| ask(args).unwrap().1;
        assert_eq!(
            gate_of(&["plan", "--for", "20m", "--node", "w1"]).as_deref(),
            Some("node.w1")
        );
        assert_eq!(
            gate_of(&["plan", "--for", "20m", "--component", "kubevirt"]).as_deref(),
            Some("component.kubevirt")
        );
        assert_eq!(
            gate_of(&["plan", "--for", "20m", "-A"]).as_deref(),
            Some("cluster")
        );
        assert_eq!(
            gate_of(&["plan", "--for", "20m", "-n", "vms"]).as_deref(),
            Some("namespace.vms")
        );
        assert_eq!(
            gate_of(&["plan", "--for", "20m", "-A", "--operation", "x"]),
            None
        );
    }
}
