//! The command line: kubectl's connection flags, filters and output flags (accepted before or
//! after the subcommand), and the subcommands. With no subcommand, `list` runs.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use jiff::SignedDuration;

use super::format::Output;

#[derive(Parser, Debug)]
#[command(
    name = "kubectl-ifo",
    bin_name = "kubectl ifo",
    version,
    about = "Operations in flight in the cluster (live InFlightOperations), and whether it is safe to do maintenance",
    after_help = "Exit status: 0 success; 1 operations in flight (check, wait --timeout), or no window can be promised (plan); 2 error, a node, component or namespace that does not exist (check, wait, plan), or the server cannot vouch for the answer (check, wait, plan)."
)]
/// The whole command line. `global` is flattened in (and each of its flags marked global) so that
/// kubectl's habit of putting flags after the subcommand works as well as before it.
pub struct Cli {
    /// Connection, filters and output, shared by every subcommand.
    #[command(flatten)]
    pub global: Global,
    /// What to do; `None` lists, as `kubectl ifo` with no subcommand does.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The flags every subcommand takes: which cluster, which operations, how to print them.
///
/// kubectl's conventions first (`-n`, `-A`, `-l`, `-o`, `-w` and the kubeconfig flags); the
/// original operator plugin's flags are accepted as hidden aliases where they do not clash
/// (`-c/--component`, `-k/--kind`, `-O`, `--all-phases`).
#[derive(Args, Debug, Clone)]
pub struct Global {
    /// Path to the kubeconfig file (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The kubeconfig cluster to use.
    #[arg(long, global = true, value_name = "NAME")]
    pub cluster: Option<String>,
    /// The kubeconfig user to use.
    #[arg(long, global = true, value_name = "NAME")]
    pub user: Option<String>,
    /// Username to impersonate for the request.
    #[arg(long = "as", global = true, value_name = "USER")]
    pub as_user: Option<String>,
    /// Group to impersonate for the request (repeat for several; needs --as).
    #[arg(
        long = "as-group",
        global = true,
        value_name = "GROUP",
        requires = "as_user"
    )]
    pub as_group: Vec<String>,
    /// How long to wait for a single request (0: no limit; 30s, 1m). Watches (`wait`, `-w`)
    /// only limit connecting.
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_timeout)]
    pub request_timeout: Option<SignedDuration>,
    /// Namespace of the subjects (default: the context's namespace).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// Every namespace, and operations on cluster-scoped subjects.
    #[arg(short = 'A', long, global = true)]
    pub all_namespaces: bool,
    /// Only operations on cluster-scoped subjects (InFlightClusterOperations).
    #[arg(long, global = true, conflicts_with = "namespace")]
    pub cluster_scoped: bool,
    /// Only this operation (e.g. Migrating).
    #[arg(long, global = true)]
    pub operation: Option<String>,
    /// Only this component (e.g. kubevirt). With check and wait: the whole component, in every
    /// namespace (as with -A; -n is refused); elsewhere a filter within the namespace listed.
    #[arg(long, short_alias = 'c', global = true)]
    pub component: Option<String>,
    /// Only subjects of this kind (e.g. VirtualMachine).
    #[arg(long, short_alias = 'k', global = true)]
    pub kind: Option<String>,
    /// Only the subject with this name.
    #[arg(long, global = true)]
    pub subject: Option<String>,
    /// Only operations concerning this node: the ifo.kubevirt.io/node label, or a live
    /// migration's ifo.kubevirt.io/target-node. With check and wait: the whole node, in every
    /// namespace (as with -A; -n/--namespace and --cluster-scoped are refused), which the
    /// node's maintenance gate answers. With list, tree, summary and watch: a filter within the
    /// namespace listed (-n, the context's, or -A for every one).
    #[arg(long, global = true, value_name = "NAME")]
    pub node: Option<String>,
    /// Label selector (e.g. ifo.kubevirt.io/vm=vm-1).
    #[arg(short = 'l', long, global = true)]
    pub selector: Option<String>,
    /// Include completed operations (default: active ones only).
    #[arg(long, alias = "all-phases", global = true)]
    pub all: bool,
    /// Output format.
    #[arg(short = 'o', short_alias = 'O', long, global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Colour the output even when it is not a terminal.
    #[arg(long, global = true)]
    pub color: bool,
    /// Never colour the output (also: the NO_COLOR environment variable).
    #[arg(long, global = true)]
    pub no_color: bool,
    /// After listing, print operations as they change (list only).
    #[arg(short = 'w', long, global = true)]
    pub watch: bool,
}

/// The subcommands.
#[derive(Subcommand, Debug, Clone)]
pub enum Command {
    /// List operations (the default).
    #[command(
        visible_alias = "ls",
        after_help = "Examples:
  kubectl ifo -A                                # what is in flight in the cluster
  kubectl ifo list -n vms --all -o wide         # completed operations too, with outcomes
  kubectl ifo -A --operation Migrating -w       # stream rows as migrations start and end
  kubectl ifo -A -l ifo.kubevirt.io/vm=vm-1     # everything concerning one VM"
    )]
    List,
    /// Details of one operation: subject, times, message, outcome, labels.
    #[command(after_help = "Examples:
  kubectl ifo get vm-1-migrating-1a2b3c4d -n vms
  kubectl ifo get vm-1-migrating-1a2b3c4d -A -o yaml")]
    Get {
        /// The operation's name (with -A: looked up in every namespace).
        name: String,
    },
    /// Subjects as a tree: component → namespace → subject, subjects under their owners and
    /// correlation roots, each with its operations on one line.
    #[command(after_help = "Examples:
  kubectl ifo tree -A                                   # everything, grouped
  kubectl ifo tree -n vms --for VirtualMachine/vm-1     # one VM and what hangs under it")]
    Tree {
        /// Only this subject and what hangs under it (Kind/name, e.g. VirtualMachine/vm-1).
        #[arg(long = "for", value_name = "KIND/NAME")]
        for_: Option<String>,
    },
    /// Counts by phase, component, operation and namespace (active and completed).
    #[command(after_help = "Examples:
  kubectl ifo summary -A
  kubectl ifo summary -A -o json")]
    Summary,
    /// A live view redrawn in place as operations change, until Ctrl-C (a table, or the tree).
    #[command(after_help = "Examples:
  kubectl ifo watch -A
  kubectl ifo watch -A --tree --component kubevirt")]
    Watch {
        /// Show the tree instead of the table.
        #[arg(long)]
        tree: bool,
    },
    /// Exit 0 if no active operation matches; otherwise print them and exit 1. --node and
    /// --component ask about the whole node or component, in every namespace (as -A does). With
    /// -A, --node or --component alone, or a namespace alone, the server's maintenance gate
    /// answers.
    #[command(
        visible_alias = "safe",
        after_help = "Exit status: 0 clear; 1 operations in flight; 2 error, a node, component or namespace \
that does not exist, or the server cannot vouch for the answer.

Examples:
  kubectl ifo check -A && echo safe             # nothing in flight anywhere
  kubectl ifo check --node worker-1             # nothing concerns worker-1, in any namespace"
    )]
    Check,
    /// Block until no active operation matches (watches; does not poll). --node and --component
    /// wait for the whole node or component, in every namespace (as -A does).
    #[command(
        after_help = "Exit status: 0 clear; 1 still in flight at --timeout; 2 error, a node, \
component or namespace that does not exist, or the server cannot vouch for the answer at \
--timeout (a gate it cannot vouch for is waited through, as kubectl wait does, saying why).

Examples:
  kubectl ifo wait --node worker-1 --timeout 30m && kubectl drain worker-1 --ignore-daemonsets
  kubectl ifo wait --component kubevirt --timeout 10m"
    )]
    Wait {
        /// Give up after this long and exit 1 with what is still in flight (30s, 5m, 1h30m;
        /// default: wait forever).
        #[arg(long, value_parser = parse_timeout)]
        timeout: Option<SignedDuration>,
    },
    /// The earliest time from which a node (--node), a component (--component), a namespace (-n)
    /// or the cluster (-A) is expected to be clear for --for, from the operations in flight
    /// there (their p90 ends, or their medians with --confidence p50) and those scheduled
    /// there, as its maintenance gate computes it; or why no window can be promised.
    #[command(
        after_help = "The window must fit between the operations the rules announce before they start \
(a CronJob's next run, a backup Schedule's, a migration's cutover: the gate's status.scheduled), \
each taking its rule's p90 (or median) duration; it says until when it lasts. Operations no rule \
announces may start at any time. A node's gate lists none: a scheduled run's node is not known.

Exit status: 0 a window is given; 1 none can be promised now (an operation in flight without \
an expected end, or running late; a scheduled one in the way of unknown length, or whose next \
start is not known; or the window would reach past the scheduled runs the gate lists, after \
which what starts is not known); 2 error, a node, component or namespace that does not \
exist, or the server cannot vouch for the scope (it is Unknown: no window is promised).

Examples:
  kubectl ifo plan --node worker-1 --for 20m    # when can I have worker-1 for 20 minutes?
  kubectl ifo plan --component kubevirt --for 1h --confidence p50
  kubectl ifo plan -A --for 30m -o json         # the whole cluster"
    )]
    Plan {
        /// How long the scope must stay clear (20m, 1h30m).
        #[arg(long = "for", value_name = "DURATION", value_parser = parse_timeout)]
        for_: SignedDuration,
        /// Read the window off the operations' p90 ends (default) or their median ends.
        #[arg(long, value_enum, default_value_t = Confidence::P90)]
        confidence: Confidence,
    },
    /// Let the evictions of a node's pods through the maintenance guard until a time, whatever
    /// its gate says (the admin's override: the node's annotations
    /// ifo.kubevirt.io/maintenance-override and -until, its end written as the time it falls,
    /// which no later write to the node moves), or take it off with --remove.
    #[command(
        after_help = "Needs the right to patch the node. The override shows on the node's gate \
(condition Overridden), in the guard's logs and Events, and in its metrics; it ends by itself at \
its end, after which the guard holds again.

Examples:
  kubectl ifo override worker-1 --for 2h --reason \"disk failing, INC-4711\"
  kubectl drain worker-1 --ignore-daemonsets
  kubectl ifo override worker-1 --remove"
    )]
    Override {
        /// The node.
        node: String,
        /// Why: shown on the gate, in the guard's logs and Events.
        #[arg(long, required_unless_present = "remove", conflicts_with = "remove")]
        reason: Option<String>,
        /// How long from now it lasts (30m, 2h); written as the time it ends.
        #[arg(long = "for", value_name = "DURATION", value_parser = parse_timeout,
              required_unless_present = "remove", conflicts_with = "remove")]
        for_: Option<SignedDuration>,
        /// Take the node's override off.
        #[arg(long)]
        remove: bool,
    },
    /// Maintenance gates: per scope (cluster, node.<node>, component.<component>,
    /// namespace.<namespace>) whether it is clear, what blocks it and until when.
    #[command(after_help = "Examples:
  kubectl ifo gates                             # the cluster and every gate with operations in flight
  kubectl ifo gates node.worker-1               # one node, in flight or not
  kubectl ifo gates -o json")]
    Gates {
        /// One gate, by name (default: the cluster's and every one with operations in flight).
        name: Option<String>,
    },
    /// What each rule learned of its operations' durations (from the rulesets' status), and
    /// how often the expected ends read from them came true: a rule whose p90 covered fewer
    /// than 80 % of at least 20 ends is marked "estimates unreliable".
    #[command(after_help = "Examples:
  kubectl ifo rules                             # every ruleset's learned operations
  kubectl ifo rules vm-lifecycle-rules -o json")]
    Rules {
        /// One ruleset, by name (default: every one).
        name: Option<String>,
    },
    /// A live timeline in the browser: operations in flight (grouped by node, component or
    /// namespace), the maintenance gates and their expected clear times. Serves a page on this
    /// machine that reads the cluster as you (your kubeconfig, as kubectl does).
    #[command(after_help = "Examples:
  kubectl ifo ui -A                             # every namespace; open the printed URL
  kubectl ifo ui -n vms --port 8001             # one namespace, on a fixed port")]
    Ui {
        /// The port to listen on (default: a free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// The address to listen on; anything but loopback needs --accept-remote.
        #[arg(long, default_value = "127.0.0.1")]
        address: std::net::IpAddr,
        /// Listen on a non-loopback address: anyone who can reach it and has the printed URL
        /// reads the cluster as you.
        #[arg(long)]
        accept_remote: bool,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish or powershell).
    #[command(after_help = "Examples:
  source <(kubectl-ifo completion bash)
  kubectl-ifo completion zsh > \"${fpath[1]}/_kubectl-ifo\"")]
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// How sure a window of `plan` is: read off the operations' p90 ends or their medians.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Confidence {
    /// Their p90 ends (the gate's `status.nextWindow`).
    P90,
    /// Their median ends (`status.nextWindowP50`): half such windows start later.
    P50,
}

impl Confidence {
    /// `p90`, `p50`.
    pub fn as_str(self) -> &'static str {
        match self {
            Confidence::P90 => "p90",
            Confidence::P50 => "p50",
        }
    }
}

/// The completion script for `shell`, for the `kubectl-ifo` executable.
pub fn completion(shell: clap_complete::Shell) -> String {
    use clap::CommandFactory as _;
    let mut command = Cli::command().bin_name("kubectl-ifo");
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "kubectl-ifo", &mut script);
    String::from_utf8_lossy(&script).into_owned()
}

fn parse_timeout(s: &str) -> Result<SignedDuration, String> {
    ifo_apimachinery::duration::parse_duration(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("kubectl-ifo").chain(args.iter().copied()))
    }

    #[test]
    fn flags_go_before_or_after_the_subcommand() {
        let cli = parse(&["-A", "-o", "wide"]).unwrap();
        assert!(cli.command.is_none());
        assert!(cli.global.all_namespaces);
        assert_eq!(cli.global.output, Output::Wide);
        let cli = parse(&["tree", "-n", "ns1", "--operation", "Migrating"]).unwrap();
        assert!(matches!(cli.command, Some(Command::Tree { .. })));
        assert_eq!(cli.global.namespace.as_deref(), Some("ns1"));
        let cli = parse(&["wait", "--timeout", "1m30s", "-A"]).unwrap();
        match cli.command {
            Some(Command::Wait { timeout }) => {
                assert_eq!(timeout, Some(SignedDuration::from_secs(90)))
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(&["safe"]).unwrap().command,
            Some(Command::Check)
        ));
        assert!(matches!(
            parse(&["ls"]).unwrap().command,
            Some(Command::List)
        ));
    }

    #[test]
    fn kubectl_flags_and_the_original_plugins_aliases() {
        let cli = parse(&[
            "check",
            "--cluster",
            "prod",
            "--user",
            "ops",
            "--as",
            "alice",
            "--as-group",
            "a",
            "--as-group",
            "b",
            "--request-timeout",
            "5s",
            "--node",
            "worker-1",
        ])
        .unwrap();
        let g = cli.global;
        assert_eq!(g.cluster.as_deref(), Some("prod"));
        assert_eq!(g.user.as_deref(), Some("ops"));
        assert_eq!(g.as_user.as_deref(), Some("alice"));
        assert_eq!(g.as_group, ["a", "b"]);
        assert_eq!(g.request_timeout, Some(SignedDuration::from_secs(5)));
        assert_eq!(g.node.as_deref(), Some("worker-1"));
        assert!(!g.cluster_scoped);
        let g = parse(&[
            "-c",
            "kubevirt",
            "-k",
            "VirtualMachine",
            "-O",
            "json",
            "--all-phases",
        ])
        .unwrap()
        .global;
        assert_eq!(g.component.as_deref(), Some("kubevirt"));
        assert_eq!(g.kind.as_deref(), Some("VirtualMachine"));
        assert_eq!(g.output, Output::Json);
        assert!(g.all);
        assert!(parse(&["--cluster-scoped"]).unwrap().global.cluster_scoped);
    }

    #[test]
    fn completion_scripts_know_the_commands_and_flags() {
        assert!(matches!(
            parse(&["completion", "zsh"]).unwrap().command,
            Some(Command::Completion { .. })
        ));
        assert!(parse(&["completion", "tcsh"]).is_err());
        let bash = completion(clap_complete::Shell::Bash);
        assert!(bash.contains("-o default kubectl-ifo"), "{bash}");
        for word in ["wait", "tree", "--node", "--for", "--cluster-scoped"] {
            assert!(bash.contains(word), "{word} missing");
        }
    }

    #[test]
    fn plan_takes_a_duration_and_a_confidence() {
        match parse(&["plan", "--node", "w1", "--for", "20m"])
            .unwrap()
            .command
        {
            Some(Command::Plan { for_, confidence }) => {
                assert_eq!(for_, SignedDuration::from_mins(20));
                assert_eq!(confidence, Confidence::P90);
            }
            other => panic!("{other:?}"),
        }
        match parse(&["plan", "-A", "--for", "1h", "--confidence", "p50"])
            .unwrap()
            .command
        {
            Some(Command::Plan { confidence, .. }) => assert_eq!(confidence, Confidence::P50),
            other => panic!("{other:?}"),
        }
        assert!(
            parse(&["plan", "--node", "w1"]).is_err(),
            "--for is required"
        );
        assert!(parse(&["plan", "--for", "20m", "--confidence", "p99"]).is_err());
        assert!(parse(&["plan", "--for", "soon"]).is_err());
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert!(parse(&["-o", "xml"]).is_err());
        assert!(parse(&["wait", "--timeout", "soon"]).is_err());
        assert!(parse(&["wait", "--timeout", "-5s"]).is_err());
        assert!(parse(&["get"]).is_err());
        assert!(parse(&["--cluster-scoped", "-n", "x"]).is_err());
        assert!(parse(&["--as-group", "g"]).is_err());
        assert!(parse(&["--request-timeout", "soon"]).is_err());
        assert!(parse(&["frobnicate"]).is_err());
    }
}
