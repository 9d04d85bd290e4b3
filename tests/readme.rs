//! The README's commands, run as written against the demo a reader starts first: `ifo-dev`,
//! what `deploy/local.sh` runs (a local real cluster, the server, the shipped rules and the
//! workload that moves VirtualMachines through their states), with the kubectl and the
//! `KUBECONFIG` it prints.
//!
//! Every shell line of the sections "Use it", "Is it safe to drain?", "kubectl ifo" and "Rules"
//! runs in `bash` from the repository's root with `kubectl`, `kubectl-ifo` and `ifo-apiserver`
//! on `PATH`, and must do what the README says of it:
//! - a watch (`-w`, `watch`) streams rows until stopped: it is stopped after a few seconds and
//!   must have printed some and no error;
//! - `kubectl ifo check` exits 0 (clear) or 1 (in flight), as documented; 2 (unknown, no such
//!   node) is a failure;
//! - anything else exits 0 (waits included: the demo's nodes clear between operations).
//!
//! A line that reads the moving workload (an operation that ends between two of its commands)
//! gets a second try. The other sections need what a demo does not have (a registry and a real
//! node, tested in `tests/node/`; the guard, `deploy/local.sh --guard`, tested in `tests/e2e/guard.rs`
//! and `tests/node/`; a browser, in `tests/e2e/ui.rs`).

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Parser, Tag, TagEnd};
use std::io::{BufRead, BufReader, Read as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The sections whose commands run against the demo.
const SECTIONS: &[&str] = &["Use it", "Is it safe to drain?", "kubectl ifo", "Rules"];

/// How long a watch streams before it is stopped.
const WATCH_FOR: Duration = Duration::from_secs(6);

/// Longest any other command may take (a wait for a node of the demo to clear included).
const COMMAND_LIMIT: Duration = Duration::from_secs(240);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The shell lines of the `sh` blocks under each of [`SECTIONS`] (a heading of any level), each
/// without its trailing comment.
fn commands(readme: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut heading: Option<String> = None;
    let mut section = String::new();
    let mut block: Option<String> = None;
    for event in Parser::new(readme) {
        match event {
            Event::Start(Tag::Heading { level, .. }) if level >= HeadingLevel::H2 => {
                heading = Some(String::new());
            }
            Event::End(TagEnd::Heading(_)) => section = heading.take().unwrap_or_default(),
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(lang))) if &*lang == "sh" => {
                block = Some(String::new());
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some(text) = block.take()
                    && SECTIONS.contains(&section.as_str())
                {
                    out.extend(
                        text.lines()
                            .map(without_comment)
                            .filter(|line| !line.is_empty())
                            .map(|line| (section.clone(), line.to_owned())),
                    );
                }
            }
            Event::Text(text) | Event::Code(text) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&text);
                } else if let Some(b) = block.as_mut() {
                    b.push_str(&text);
                }
            }
            _ => {}
        }
    }
    out
}

/// `line` without a comment that follows the command (`  # …`), trimmed.
fn without_comment(line: &str) -> &str {
    let line = line.trim();
    if line.starts_with('#') {
        return "";
    }
    match line.find(" #") {
        Some(at) => line[..at].trim_end(),
        None => line,
    }
}

/// What a line is expected to do.
#[derive(Debug, PartialEq)]
enum Kind {
    /// Streams until stopped.
    Watch,
    /// `kubectl ifo check`: 0 clear, 1 in flight.
    Check,
    /// Exits 0.
    Command,
}

fn kind(line: &str) -> Kind {
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.contains(&"-w") || words.windows(2).any(|w| w == ["ifo", "watch"]) {
        Kind::Watch
    } else if words.windows(2).any(|w| w == ["ifo", "check"]) {
        Kind::Check
    } else {
        Kind::Command
    }
}

#[test]
fn the_readme_is_read_as_the_commands_it_runs() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = commands(&readme);
    let sections: Vec<&str> = lines.iter().map(|(s, _)| s.as_str()).collect();
    for section in SECTIONS {
        assert!(
            sections.contains(section),
            "no commands read under {section:?}"
        );
    }
    assert!(
        lines
            .iter()
            .any(|(_, l)| l == "kubectl get ifos -A --field-selector status.phase=Active -w")
    );
    assert!(
        lines
            .iter()
            .any(|(_, l)| l == "ifo-apiserver rules test rules/")
    );
    assert_eq!(kind("kubectl ifo watch -A --tree"), Kind::Watch);
    assert_eq!(kind("kubectl ifo check --node node-1"), Kind::Check);
    assert_eq!(
        kind("kubectl wait --for=condition=Clear=True gate/node.node-1 --timeout=30m"),
        Kind::Command
    );
}

/// The demo, running: `ifo-dev` and what it printed.
struct Demo {
    child: Child,
    kubeconfig: String,
    kubectl: String,
    /// `ifo-dev`'s output, for a failure's message.
    output: mpsc::Receiver<String>,
}

impl Demo {
    fn start(binaries: &Path) -> Demo {
        let mut child = Command::new(binaries.join("ifo-dev"))
            .args(["--vms", "2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting ifo-dev");
        let (tx, output) = mpsc::channel();
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let (mut kubeconfig, mut kubectl) = (None, None);
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(180);
        while kubeconfig.is_none() || kubectl.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = output.recv_timeout(left) else {
                let _ = child.kill();
                panic!(
                    "ifo-dev printed no KUBECONFIG in 180 s:\n{}",
                    seen.join("\n")
                );
            };
            if let Some(v) = line.trim().strip_prefix("export KUBECONFIG=") {
                kubeconfig = Some(v.to_owned());
            }
            if let Some(v) = line.trim().strip_prefix("alias kubectl=") {
                kubectl = Some(v.to_owned());
            }
            seen.push(line);
        }
        Demo {
            child,
            kubeconfig: kubeconfig.unwrap(),
            kubectl: kubectl.unwrap(),
            output,
        }
    }

    fn output(&self) -> String {
        self.output.try_iter().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Demo {
    /// Ctrl-C, as the README says: ifo-dev stops the cluster and removes its files.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-s", "INT", "--", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a line did: its exit status (`None`: stopped, still running), its output.
struct Ran {
    status: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(line: &str, path: &str, kubeconfig: &str, limit: Duration) -> Ran {
    let mut child = Command::new("bash")
        .args(["-o", "pipefail", "-c", line])
        .current_dir(root())
        .env("PATH", path)
        .env("KUBECONFIG", kubeconfig)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that stopping it stops what it started.
        .process_group(0)
        .spawn()
        .expect("starting bash");
    let outputs: Vec<_> = [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ]
    .into_iter()
    .map(|mut stream| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stream.read_to_string(&mut text);
            text
        })
    })
    .collect();
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() >= deadline {
            // The process group the line runs in, of its own.
            let _ = Command::new("kill")
                .args(["-s", "TERM", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut texts = outputs.into_iter().map(|t| t.join().unwrap());
    Ran {
        status,
        stdout: texts.next().unwrap(),
        stderr: texts.next().unwrap(),
    }
}

/// Whether `ran` did what the README says `line` does, else why not.
fn judge(line: &str, ran: &Ran) -> Result<(), String> {
    match (kind(line), ran.status) {
        (Kind::Watch, None) if !ran.stdout.trim().is_empty() && !ran.stderr.contains("rror") => {
            Ok(())
        }
        (Kind::Watch, _) => Err("a watch that did not stream rows until stopped".into()),
        (Kind::Check, Some(0 | 1)) => Ok(()),
        (Kind::Command, Some(0)) => Ok(()),
        (_, None) => Err(format!("still running after {COMMAND_LIMIT:?}")),
        (_, Some(code)) => Err(format!("exit {code}")),
    }
}

#[test]
fn every_command_of_the_readme_works_against_the_demo_as_written() {
    let binaries = std::env::current_exe()
        .unwrap()
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf();
    for bin in ["ifo-dev", "ifo-apiserver", "kubectl-ifo"] {
        assert!(
            binaries.join(bin).exists(),
            "{} is missing: build the workspace first (cargo build --workspace, as tests/run.sh does)",
            binaries.join(bin).display()
        );
    }
    let demo = Demo::start(&binaries);
    // kubectl, kubectl-ifo and ifo-apiserver as a reader has them, on PATH.
    let bin = tempdir();
    let link = |name: &str, to: &Path| std::os::unix::fs::symlink(to, bin.join(name)).unwrap();
    link("kubectl", Path::new(&demo.kubectl));
    link("kubectl-ifo", &binaries.join("kubectl-ifo"));
    link("ifo-apiserver", &binaries.join("ifo-apiserver"));
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The workload has put operations in the demo's namespace (the README reads them).
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let ran = run(
            "kubectl get ifos -n demo -o name | grep -q .",
            &path,
            &demo.kubeconfig,
            Duration::from_secs(20),
        );
        if ran.status == Some(0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no operation in the demo's namespace after 120 s: {}\n{}",
            ran.stderr,
            demo.output()
        );
        std::thread::sleep(Duration::from_secs(1));
    }

    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let mut failures = Vec::new();
    for (section, line) in commands(&readme) {
        let limit = if kind(&line) == Kind::Watch {
            WATCH_FOR
        } else {
            COMMAND_LIMIT
        };
        let started = Instant::now();
        let mut ran = run(&line, &path, &demo.kubeconfig, limit);
        let mut verdict = judge(&line, &ran);
        if verdict.is_err() {
            std::thread::sleep(Duration::from_secs(2));
            ran = run(&line, &path, &demo.kubeconfig, limit);
            verdict = judge(&line, &ran);
        }
        eprintln!(
            "{section}: {line}: {} in {:.1}s",
            if verdict.is_ok() { "ok" } else { "FAILED" },
            started.elapsed().as_secs_f64()
        );
        if let Err(why) = verdict {
            failures.push(format!(
                "[{section}] {line}\n  {why}\n  stdout: {}\n  stderr: {}",
                ran.stdout.trim(),
                ran.stderr.trim()
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&bin);
    assert!(
        failures.is_empty(),
        "README commands that fail against the demo:\n{}\n\nifo-dev:\n{}",
        failures.join("\n"),
        demo.output()
    );
}

/// A fresh directory of this test's own.
fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ifo-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
