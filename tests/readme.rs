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
//! - `kubectl ifo check` exits 0 (clear) or 1 (in flight), and `kubectl ifo plan` 0 (a window)
//!   or 1 (none can be promised now), as documented; 2 (unknown, no such node) is a failure;
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
    /// `kubectl ifo check`: 0 clear, 1 in flight; `kubectl ifo plan`: 0 a window, 1 none can
    /// be promised now.
    Check,
    /// Exits 0.
    Command,
}

fn kind(line: &str) -> Kind {
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.contains(&"-w") || words.windows(2).any(|w| w == ["ifo", "watch"]) {
        Kind::Watch
    } else if words
        .windows(2)
        .any(|w| w == ["ifo", "check"] || w == ["ifo", "plan"])
    {
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
    assert_eq!(kind("kubectl ifo plan -n demo --for 1h"), Kind::Check);
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

    the_demo_reads_at_a_glance_in_the_browser(&demo, &binaries);
}

/// The page's size for its screenshot (the README's).
const SCREEN: (u32, u32) = (1600, 1000);

/// `kubectl ifo ui -A`, as the README runs it against the demo, in headless Chromium, on the
/// demo's own workload (not a fixture): the indicator green and no banner (the demo's answers
/// are complete), a migration under both of its nodes marked source and target, every label of
/// the timeline inside it with its whole text on hover, times in one form (relative, the
/// absolute time on hover: no ISO or 12-hour times on the page), an operation in its grace
/// "ending in". `IFO_UI_SCREENSHOTS=docs` writes the README's screenshot.
fn the_demo_reads_at_a_glance_in_the_browser(demo: &Demo, binaries: &Path) {
    use ifo_test_support::Running;
    use ifo_test_support::browser::{browser_sized, chromedriver, until};
    let mut ui = Command::new(binaries.join("kubectl-ifo"))
        .args(["ui", "-A", "--kubeconfig", &demo.kubeconfig])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting kubectl ifo ui");
    let mut line = String::new();
    BufReader::new(ui.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ui = Running(ui);
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:") && w.contains("/#token="))
        .unwrap_or_else(|| panic!("kubectl ifo ui printed no URL: {line:?}"))
        .to_owned();
    let (_driver, port) = chromedriver();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let page = browser_sized(port, SCREEN).await;
        page.goto(&url).await.unwrap();
        let minute = Duration::from_secs(60);
        until(
            &page,
            minute,
            "the indicator to read live",
            INDICATOR,
            vec![],
            |v| v[0] == "live" && v[1].as_str().is_some_and(|t| t.contains("Live")),
        )
        .await;
        let (_, _) = until(
            &page,
            minute * 2,
            "a migration under both its nodes",
            ROLES,
            vec![],
            |v| v.as_bool() == Some(true),
        )
        .await;
        until(
            &page,
            minute,
            "an operation ending in its grace",
            ENDING,
            vec![],
            |v| v.as_bool() == Some(true),
        )
        .await;
        let banner = page.execute(BANNER_SHOWN, vec![]).await.unwrap();
        assert_eq!(banner, false, "the demo's answers are complete: no banner");
        let texts = page.execute(TEXTS, vec![]).await.unwrap();
        let right = texts["right"].as_f64().unwrap();
        for t in texts["texts"].as_array().unwrap() {
            assert!(
                t["right"].as_f64().unwrap() <= right + 1.0,
                "{t} runs past the timeline's right edge ({right})"
            );
            if t["cls"] == "op-label" || t["cls"] == "subject" {
                assert!(t["title"].is_string(), "{t}: no whole text on hover");
            }
        }
        let shown = page.execute(PAGE_TEXT, vec![]).await.unwrap();
        let shown = shown.as_str().unwrap();
        assert!(
            !is_iso(shown),
            "an ISO time on the page (times are relative, absolute on hover):\n{shown}"
        );
        assert!(
            !shown.contains(" AM") && !shown.contains(" PM"),
            "a 12-hour time on the page:\n{shown}"
        );
        if let Some(dir) = std::env::var_os("IFO_UI_SCREENSHOTS") {
            page.execute("document.activeElement?.blur();", vec![])
                .await
                .unwrap();
            let shot = PathBuf::from(dir).join("ui.png");
            std::fs::write(&shot, page.screenshot().await.unwrap()).unwrap();
            eprintln!("screenshot: {}", shot.display());
        }
        page.close().await.unwrap();
    });
}

/// The indicator: its state and words.
const INDICATOR: &str = "const c = document.getElementById('connection');
  return [c.dataset.state, c.innerText];";
/// Whether one operation is drawn both as a source and as a target.
const ROLES: &str =
    "const keys = (r) => new Set([...document.querySelectorAll(`g.op[data-role=${r}]`)]
    .map(g => g.dataset.key));
  const target = keys('target');
  return [...keys('source')].some(k => target.has(k));";
/// Whether an operation says it is ending (its grace).
const ENDING: &str = "return [...document.querySelectorAll('g.op')]
  .some(g => (g.getAttribute('aria-label') ?? '').includes('ending in'));";
/// Whether the banner of what may be incomplete is shown.
const BANNER_SHOWN: &str = "return !document.getElementById('warnings').hidden;";
/// The timeline's texts: content, tooltip, right edge, class; and the timeline's right edge.
const TEXTS: &str = "const box = document.getElementById('timeline').getBoundingClientRect();
  return {right: box.right, texts: [...document.querySelectorAll('#timeline text')]
    .map(t => ({text: t.firstChild ? t.firstChild.textContent : t.textContent,
      title: t.querySelector('title')?.textContent ?? null, right: t.getBoundingClientRect().right,
      cls: t.getAttribute('class')}))};";
/// What the page shows in words.
const PAGE_TEXT: &str = "return document.body.innerText;";

/// Whether `text` holds a time such as `2026-11-24T23:28`.
fn is_iso(text: &str) -> bool {
    let b = text.as_bytes();
    (0..b.len().saturating_sub(12)).any(|i| {
        let digits = |r: std::ops::Range<usize>| r.into_iter().all(|j| b[i + j].is_ascii_digit());
        digits(0..4)
            && b[i + 4] == b'-'
            && digits(5..7)
            && b[i + 7] == b'-'
            && digits(8..10)
            && b[i + 10] == b'T'
            && digits(11..13)
    })
}

/// A fresh directory of this test's own.
fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ifo-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
