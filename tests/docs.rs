//! The documentation as a reader follows it: every relative link of the READMEs and `docs/*.md`
//! leads to a file that exists, every `#anchor` to a heading (named as GitHub names headings),
//! and the settings table of `docs/operating.md` is the one `ifo-apiserver serve` has: produced
//! from the flags' own definitions, and listing exactly the flags `serve --help` prints.

use clap::{Args, Command};
use ifo::config::ServeArgs;
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `README.md`, the library's pointer `rules/README.md` and every page of `docs/`.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md"), root().join("rules/README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// What a page links to and the anchors its headings get.
struct Page {
    links: Vec<String>,
    anchors: BTreeSet<String>,
}

fn read_page(path: &Path) -> Page {
    let text = std::fs::read_to_string(path).unwrap();
    let mut links = Vec::new();
    let mut anchors = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(&text, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let slug = slug(&heading.take().unwrap_or_default());
                // GitHub numbers repeated headings: `a`, `a-1`, `a-2`.
                let n = seen.entry(slug.clone()).or_insert(0);
                anchors.insert(if *n == 0 {
                    slug.clone()
                } else {
                    format!("{slug}-{n}")
                });
                *n += 1;
            }
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                links.push(dest_url.into_string());
            }
            _ => {}
        }
    }
    Page { links, anchors }
}

/// A heading's anchor as GitHub makes it: lower case, spaces to hyphens, and every character
/// but letters, digits, `-` and `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn is_external(link: &str) -> bool {
    link.contains("://") || link.starts_with("mailto:")
}

#[test]
fn every_relative_link_and_anchor_of_the_docs_resolves() {
    let pages = pages();
    let mut read: BTreeMap<PathBuf, Page> = BTreeMap::new();
    let mut broken = Vec::new();
    for page in &pages {
        let links = read_page(page).links;
        for link in links.iter().filter(|l| !is_external(l)) {
            let (file, anchor) = match link.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (link.as_str(), None),
            };
            let target = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            let shown = target.strip_prefix(root()).unwrap_or(&target).to_owned();
            let from = page.strip_prefix(root()).unwrap_or(page);
            if !target.exists() {
                broken.push(format!(
                    "{}: `{link}`: {} does not exist",
                    from.display(),
                    shown.display()
                ));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if target.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let target = target.canonicalize().unwrap();
            let anchors = &read
                .entry(target.clone())
                .or_insert_with(|| read_page(&target))
                .anchors;
            if !anchors.contains(anchor) {
                broken.push(format!(
                    "{}: `{link}`: {} has no heading with anchor #{anchor}",
                    from.display(),
                    shown.display()
                ));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Every file of the workspace's sources, as a path relative to the root.
fn source_files() -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name == "target" || name.starts_with('.') {
                continue;
            }
            if path.is_dir() {
                walk(&path, root, out);
            } else {
                out.push(
                    path.strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    let mut files = Vec::new();
    let root = root();
    for dir in [
        "src",
        "model",
        "plugin",
        "devtools",
        "test-support",
        "apimachinery",
        "tests",
        "benches",
    ] {
        walk(&root.join(dir), &root, &mut files);
    }
    files
}

/// The architecture page names files and directories by a path that ends theirs (`gate/verdict.rs`,
/// `api/gate/`): each of them exists, so that the page leads a reader to the code it describes.
#[test]
fn every_source_path_the_architecture_page_names_exists() {
    let page = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let files = source_files();
    let named = regex::Regex::new(r"`([A-Za-z0-9_./-]+(?:\.rs|/))`").unwrap();
    let mut missing: BTreeSet<String> = BTreeSet::new();
    let mut checked = 0;
    for path in named.captures_iter(&page).map(|c| c[1].to_owned()) {
        if path.starts_with("http") || path.starts_with("../") || !path.contains(['.', '/']) {
            continue;
        }
        checked += 1;
        let found = root().join(&path).exists()
            || files.iter().any(|f| {
                let f = format!("/{f}");
                if let Some(dir) = path.strip_suffix('/') {
                    f.contains(&format!("/{dir}/"))
                } else {
                    f.ends_with(&format!("/{path}"))
                }
            });
        if !found {
            missing.insert(path);
        }
    }
    assert!(checked > 50, "only {checked} paths read from the page");
    assert!(
        missing.is_empty(),
        "docs/architecture.md names paths no source has: {missing:?}"
    );
}

/// The architecture page's "Long files" table lists exactly the files of `src/` over 500 lines
/// (tests apart): a file that grows past it is split by concept or said to be one thing there.
#[test]
fn the_long_files_the_architecture_page_lists_are_the_long_files() {
    let page = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let table = page
        .split("### Long files")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").nth(2))
        .expect("the Long files table");
    let listed: BTreeSet<String> = regex::Regex::new(r"`([a-z_/]+\.rs)`")
        .unwrap()
        .captures_iter(table)
        .map(|c| c[1].to_owned())
        .filter(|p| !p.ends_with("tests.rs"))
        .collect();
    let long: BTreeSet<String> = source_files()
        .into_iter()
        .filter_map(|f| f.strip_prefix("src/").map(str::to_owned))
        .filter(|f| f.ends_with(".rs") && !f.ends_with("tests.rs") && !f.contains("/tests/"))
        .filter(|f| {
            let text = std::fs::read_to_string(root().join("src").join(f)).unwrap();
            text.lines().count() > 500
        })
        .collect();
    assert_eq!(
        listed, long,
        "docs/architecture.md's Long files against src/"
    );
}

/// One word per concept, as the glossary of docs/architecture.md says: a type named after the
/// gate's verdict lives with the verdict (`gate/`) or the guard that reads it, and detection's
/// state is "current", never "freshness" (Kubernetes' discovery field of that name apart).
#[test]
fn the_glossary_words_mean_one_thing_in_the_sources() {
    let verdict_type = regex::Regex::new(r"\b(?:struct|enum|type)\s+(\w*Verdict\w*)").unwrap();
    let freshness = regex::Regex::new(r#"[^"\w](freshness)\b|\bFreshness"#).unwrap();
    let mut wrong = Vec::new();
    for file in source_files().iter().filter(|f| f.starts_with("src/")) {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        for c in verdict_type.captures_iter(&text) {
            let home = file.starts_with("src/gate/") || file == "src/admission/evictions.rs";
            if !home {
                wrong.push(format!(
                    "{file}: type {} (\"verdict\" is the gate's)",
                    &c[1]
                ));
            }
        }
        if freshness.is_match(&text) {
            wrong.push(format!(
                "{file}: \"freshness\" (detection is current or not)"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A condition's status is read through one type (`ifo_model::ConditionStatus`, and the gate's
/// `Verdict` on it): no source outside it compares a status with the wire's strings, so what
/// `Unknown` (or a status a later server adds) means is decided in one place. Tests apart.
#[test]
fn condition_statuses_are_read_through_one_type() {
    let compared =
        regex::Regex::new(r#"(?:==|!=)\s*"(?:True|False|Unknown)"|"(?:True|False)"\s*=>"#).unwrap();
    let mut wrong = Vec::new();
    let mut read = 0;
    for file in source_files().iter().filter(|f| {
        f.ends_with(".rs")
            && ["src/", "model/src/", "plugin/src/"]
                .iter()
                .any(|d| f.starts_with(d))
            && !f.ends_with("tests.rs")
            && !f.contains("/tests/")
            && *f != "model/src/condition.rs"
    }) {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        // Inline unit tests apart.
        let text = text.split("#[cfg(test)]\nmod tests {").next().unwrap();
        read += 1;
        for (n, line) in text.lines().enumerate() {
            if compared.is_match(line) {
                wrong.push(format!("{file}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(read > 100, "only {read} sources read");
    assert!(
        wrong.is_empty(),
        "condition statuses compared as strings (read them with ConditionStatus):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn anchors_are_named_as_github_names_them() {
    assert_eq!(slug("Is it safe to drain?"), "is-it-safe-to-drain");
    assert_eq!(slug("kubectl ifo"), "kubectl-ifo");
    assert_eq!(slug("Monitoring / metrics"), "monitoring--metrics");
    assert_eq!(slug("`PERSIST_QPS` and the API"), "persist_qps-and-the-api");
    assert_eq!(slug("Données"), "données");
}

#[test]
fn the_readme_stays_a_short_path_for_users() {
    let lines = std::fs::read_to_string(root().join("README.md"))
        .unwrap()
        .lines()
        .count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines: keep it to what a user needs to run, install and use the \
         product (at most 300), and move depth to docs/"
    );
}

const SETTINGS_BEGIN: &str = "<!-- settings: generated from the flags of `ifo-apiserver serve` -->";
const SETTINGS_END: &str = "<!-- end of settings -->";

/// `ifo-apiserver serve`'s arguments, as clap builds them for `--help`.
fn serve_command() -> Command {
    ServeArgs::augment_args(Command::new("serve"))
}

/// The settings table: one row per flag, from clap's own metadata.
fn settings_table() -> String {
    let cell = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace('|', "\\|")
    };
    let mut table =
        String::from("| flag | environment variable | default | meaning |\n|---|---|---|---|\n");
    for arg in serve_command().get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        let env = arg
            .get_env()
            .map(|e| format!("`{}`", e.to_string_lossy()))
            .unwrap_or_default();
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        let default = if !defaults.is_empty() {
            format!("`{}`", defaults.join(","))
        } else if arg.is_required_set() {
            "required".to_owned()
        } else {
            "—".to_owned()
        };
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| cell(&h.to_string()))
            .unwrap_or_default();
        writeln!(table, "| `--{long}` | {env} | {default} | {help} |").unwrap();
    }
    table
}

#[test]
fn the_settings_table_is_the_one_the_flags_give() {
    let path = root().join("docs/operating.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (before, rest) = doc
        .split_once(SETTINGS_BEGIN)
        .unwrap_or_else(|| panic!("docs/operating.md has no line {SETTINGS_BEGIN}"));
    let (documented, after) = rest
        .split_once(SETTINGS_END)
        .unwrap_or_else(|| panic!("docs/operating.md has no line {SETTINGS_END}"));
    let generated = format!("\n{}", settings_table());
    if documented == generated {
        return;
    }
    if std::env::var_os("IFO_UPDATE_DOCS").is_some() {
        std::fs::write(
            &path,
            format!("{before}{SETTINGS_BEGIN}{generated}{SETTINGS_END}{after}"),
        )
        .unwrap();
        return;
    }
    panic!(
        "the settings table of docs/operating.md is not what the flags of `ifo-apiserver serve` \
         say (src/config.rs). Regenerate it with\n\n    IFO_UPDATE_DOCS=1 cargo test --test docs \
         settings\n\nand commit the result.\n\n--- documented\n{documented}\n--- from the flags\n{generated}"
    );
}

#[test]
fn the_settings_table_lists_the_flags_serve_help_prints() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ifo-apiserver"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(output.status.success(), "serve --help failed: {output:?}");
    let help = String::from_utf8(output.stdout).unwrap();
    let flags = |text: &str| -> BTreeSet<String> {
        text.split(|c: char| c.is_whitespace() || c == '`' || c == ',' || c == '=')
            .filter(|w| {
                w.strip_prefix("--")
                    .is_some_and(|f| f.starts_with(|c: char| c.is_ascii_alphanumeric()))
            })
            .map(str::to_owned)
            .collect()
    };
    let mut printed = flags(&help);
    printed.remove("--help");
    let table = settings_table();
    let listed: BTreeSet<String> = table
        .lines()
        .filter_map(|l| l.split('|').nth(1))
        .flat_map(flags)
        .collect();
    assert_eq!(
        listed, printed,
        "the flags of the settings table vs those `ifo-apiserver serve --help` prints"
    );
    for arg in serve_command().get_arguments() {
        if let Some(env) = arg.get_env() {
            let env = env.to_string_lossy();
            assert!(
                help.contains(&format!("env: {env}")),
                "`serve --help` does not name {env}"
            );
        }
    }
}
