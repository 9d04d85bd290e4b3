//! Colour on terminals, as the operator's plugin coloured its output: bold titles and components,
//! the active phase green and others dim, outcomes by how they ended, failing operations red and
//! degraded ones yellow. On when stdout is a terminal, unless `NO_COLOR` is set; `--color` and
//! `--no-color` decide otherwise (`--no-color` wins). Callers align text by its plain width and
//! paint it afterwards, so escape codes never shift a column.

use std::io::IsTerminal as _;

use anstyle::{AnsiColor, Effects, Style};
use ifo_model::Verdict;

/// Operation names that say something failed.
const FAILING: [&str; 4] = ["Failed", "Failing", "BuildFailed", "Lost"];
/// Operation names that say something is degraded.
const DEGRADED: [&str; 6] = [
    "Degraded",
    "UpdatingDegraded",
    "ReconcilingDegraded",
    "NodeDegraded",
    "RenderDegraded",
    "NotUpgradeable",
];

/// Whether to colour, and how each kind of text looks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Colours {
    on: bool,
}

impl Colours {
    /// No colour: pipes, files, tests.
    pub const OFF: Colours = Colours { on: false };
    /// Colour.
    pub const ON: Colours = Colours { on: true };

    /// The choice for these flags, this `NO_COLOR` value and this kind of stdout.
    pub fn choose(
        color: bool,
        no_color: bool,
        no_color_env: Option<&std::ffi::OsStr>,
        terminal: bool,
    ) -> Colours {
        let on = if no_color {
            false
        } else if color {
            true
        } else {
            terminal && no_color_env.is_none_or(|v| v.is_empty())
        };
        Colours { on }
    }

    /// [`Colours::choose`] for this process.
    pub fn for_stdout(color: bool, no_color: bool) -> Colours {
        Colours::choose(
            color,
            no_color,
            std::env::var_os("NO_COLOR").as_deref(),
            std::io::stdout().is_terminal(),
        )
    }

    fn paint(self, style: Style, text: &str) -> String {
        if self.on && !text.is_empty() && style != Style::new() {
            format!("{style}{text}{style:#}")
        } else {
            text.to_owned()
        }
    }

    /// Column titles, components and totals.
    pub fn bold(self, text: &str) -> String {
        self.paint(Style::new().effects(Effects::BOLD), text)
    }

    /// Less important text: ages in the tree.
    pub fn dim(self, text: &str) -> String {
        self.paint(Style::new().effects(Effects::DIMMED), text)
    }

    /// Namespace headings of the tree.
    pub fn namespace(self, text: &str) -> String {
        self.paint(AnsiColor::BrightYellow.on_default(), text)
    }

    /// A phase: `Active` green, any other dim.
    pub fn phase(self, phase: &str) -> String {
        match phase {
            "Active" => self.paint(AnsiColor::Green.on_default(), phase),
            "<none>" | "" => phase.to_owned(),
            _ => self.dim(phase),
        }
    }

    /// An outcome: succeeded green, failed red, canceled or unknown yellow.
    pub fn outcome(self, outcome: &str) -> String {
        let style = match outcome {
            "Succeeded" => AnsiColor::Green.on_default(),
            "Failed" => AnsiColor::Red.on_default(),
            "Canceled" | "Unknown" => AnsiColor::Yellow.on_default(),
            _ => Style::new(),
        };
        self.paint(style, outcome)
    }

    /// An operation: failing ones red, degraded ones yellow, others as `otherwise`.
    pub fn operation(self, operation: &str, otherwise: Style) -> String {
        let style = if FAILING.contains(&operation) {
            AnsiColor::Red.on_default()
        } else if DEGRADED.contains(&operation) {
            AnsiColor::Yellow.on_default()
        } else {
            otherwise
        };
        self.paint(style, operation)
    }

    /// A gate's verdict: clear green, not clear yellow, unknown red.
    pub fn verdict(self, clear: &str) -> String {
        let style = match Verdict::of_status(clear) {
            Verdict::Clear => AnsiColor::Green.on_default(),
            Verdict::InFlight => AnsiColor::Yellow.on_default(),
            Verdict::Unknown => AnsiColor::Red.on_default(),
        };
        self.paint(style, clear)
    }

    /// A table cell, by the title of its column.
    pub fn cell(self, title: &str, text: &str) -> String {
        match title {
            "PHASE" => self.phase(text),
            "CLEAR" => self.verdict(text),
            "OUTCOME" => self.outcome(text),
            "OPERATION" => self.operation(text, Style::new()),
            _ => text.to_owned(),
        }
    }
}

/// How the tree shows operations that neither fail nor degrade.
pub const TREE_OPERATION: Style = AnsiColor::Green.on_default();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_then_no_color_then_the_terminal_decide() {
        let set = Some(std::ffi::OsStr::new("1"));
        let empty = Some(std::ffi::OsStr::new(""));
        assert_eq!(Colours::choose(false, false, None, true), Colours::ON);
        assert_eq!(Colours::choose(false, false, None, false), Colours::OFF);
        assert_eq!(Colours::choose(false, false, set, true), Colours::OFF);
        assert_eq!(Colours::choose(false, false, empty, true), Colours::ON);
        assert_eq!(Colours::choose(true, false, set, false), Colours::ON);
        assert_eq!(Colours::choose(true, true, None, true), Colours::OFF);
    }

    #[test]
    fn paints_only_when_on() {
        assert_eq!(Colours::OFF.phase("Active"), "Active");
        assert_eq!(Colours::ON.phase("Active"), "\u{1b}[32mActive\u{1b}[0m");
        assert_eq!(
            Colours::ON.phase("Completed"),
            "\u{1b}[2mCompleted\u{1b}[0m"
        );
        assert_eq!(Colours::ON.outcome("Failed"), "\u{1b}[31mFailed\u{1b}[0m");
        assert_eq!(Colours::ON.cell("OPERATION", "Migrating"), "Migrating");
        assert_eq!(
            Colours::ON.cell("OPERATION", "Degraded"),
            "\u{1b}[33mDegraded\u{1b}[0m"
        );
        assert_eq!(Colours::ON.cell("NAME", "x"), "x");
    }
}
