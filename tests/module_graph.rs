//! The server's modules depend on each other only as the module graph of `docs/architecture.md`
//! says: the graph read from the sources (every `crate::<module>` a module's files name) is
//! exactly the one the page lists, and it has no cycle. Nor do the files within the modules: no
//! file of `src/` reaches itself through the files it uses.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut files = ifo_test_support::files_under(path, |_| true);
    files.retain(|p| p.extension().is_some_and(|e| e == "rs"));
    files
}

/// Top-level modules of `src/` and the other top-level modules each one names.
fn graph_from_sources() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut modules = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if name == "lib" || name == "main" {
            continue;
        }
        modules.insert(name, path);
    }
    let names: BTreeSet<String> = modules.keys().cloned().collect();
    let mut graph = Graph::new();
    for (name, path) in &modules {
        let mut uses = BTreeSet::new();
        for file in rust_files(path) {
            let text = std::fs::read_to_string(&file).unwrap();
            for (i, _) in text.match_indices("crate::") {
                let rest = &text[i + "crate::".len()..];
                let target: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                if &target != name && names.contains(&target) {
                    uses.insert(target);
                }
            }
        }
        graph.insert(name.clone(), uses);
    }
    graph
}

/// The graph as `docs/architecture.md` lists it: lines `` - `module` → `a`, `b` `` under
/// "### Module graph".
fn graph_from_docs() -> Graph {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
            .unwrap();
    let section = page
        .split("\n### Module graph\n")
        .nth(1)
        .expect("docs/architecture.md has a \"### Module graph\" section")
        .split("\n#")
        .next()
        .unwrap();
    let names = |s: &str| -> BTreeSet<String> {
        s.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    };
    section
        .lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .map(|l| {
            let (module, rest) = l.split_once('`').unwrap();
            let uses = rest
                .split_once('→')
                .map(|(_, targets)| names(targets))
                .unwrap_or_default();
            (module.to_string(), uses)
        })
        .collect()
}

fn cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        graph: &Graph,
        node: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(graph, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(graph, n, &mut Vec::new(), &mut done))
}

/// A file's module path (`src/api/gate/mod.rs`: `api::gate`) and the file, for every file of the
/// library (`src/main.rs` is a crate of its own).
type Files = BTreeMap<Vec<String>, String>;

fn library_files() -> Files {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Files::new();
    for file in rust_files(&src) {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel == "main.rs" {
            continue;
        }
        let mut module: Vec<String> = rel
            .trim_end_matches(".rs")
            .split('/')
            .map(str::to_string)
            .collect();
        if module.last().is_some_and(|m| m == "mod") || rel == "lib.rs" {
            module.pop();
        }
        files.insert(module, rel);
    }
    files
}

/// The paths a use tree or path names, from its start: `a::b::{c, d::{e, f}}` gives `a::b::c`,
/// `a::b::d::e` and `a::b::d::f`. Returns the text after it.
fn use_tree<'t>(mut text: &'t str, prefix: &[String], out: &mut Vec<Vec<String>>) -> &'t str {
    let mut path = prefix.to_vec();
    loop {
        text = text.trim_start();
        if let Some(mut rest) = text.strip_prefix('{') {
            loop {
                rest = use_tree(rest, &path, out).trim_start();
                match rest.strip_prefix(',') {
                    Some(r) => rest = r,
                    None => return rest.strip_prefix('}').unwrap_or(rest),
                }
            }
        }
        let len = text
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(text.len());
        if len == 0 {
            break;
        }
        path.push(text[..len].to_string());
        text = &text[len..];
        match text.strip_prefix("::") {
            Some(rest) => text = rest,
            None => break,
        }
    }
    out.push(path);
    text
}

/// `text` with its comments, strings and character literals blanked out.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut code = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let at = |s: &str| chars[i..].iter().take(s.len()).copied().eq(s.chars());
        let after_ident = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        // Where the literal or comment starting here ends (exclusive).
        let end = if at("//") {
            chars[i..]
                .iter()
                .position(|&c| c == '\n')
                .map_or(chars.len(), |p| i + p)
        } else if at("/*") {
            (i + 2..chars.len())
                .find(|&j| chars[j - 1] == '*' && chars[j] == '/')
                .map_or(chars.len(), |j| j + 1)
        } else if chars[i] == 'r' && !after_ident && matches!(chars.get(i + 1), Some('"' | '#')) {
            let hashes = chars[i + 1..].iter().take_while(|&&c| c == '#').count();
            let close: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let open = i + 1 + hashes + 1;
            let body: String = chars[open..].iter().collect();
            body.find(&close).map_or(chars.len(), |p| {
                open + body[..p].chars().count() + close.chars().count()
            })
        } else if chars[i] == '"' {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            j + 1
        } else if chars[i] == '\'' && chars.get(i + 1) == Some(&'\\') {
            (i + 3..chars.len())
                .find(|&j| chars[j] == '\'')
                .map_or(chars.len(), |j| j + 1)
        } else if chars[i] == '\'' && chars.get(i + 2) == Some(&'\'') {
            i + 3
        } else {
            code.push(chars[i]);
            i += 1;
            continue;
        };
        let end = end.min(chars.len());
        code.extend(chars[i..end].iter().map(|&c| blank(c)));
        i = end;
    }
    code
}

/// The other files of `files` that the file of `module` uses: every `crate::…` and `super::…`
/// path in its code (use trees and paths in expressions alike, comments aside) names the file of
/// the longest module it starts with, and so does a path through a module such a path brought in
/// by name (`use super::m;` then `m::a::f()`). `mod` declarations and a file's uses of its own submodules
/// (a module using its parts) do not count; `super` in an inline `mod … { }` is that module's.
fn file_uses(module: &[String], text: &str, files: &Files) -> BTreeSet<String> {
    let code = code_only(text);
    let mut uses = BTreeSet::new();
    // Modules named whole (`use super::m;`, `use crate::m::{self}`), to follow `m::…` paths.
    let mut imported: Vec<Vec<String>> = Vec::new();
    // The inline modules around the current point, with the brace depth each one opened at.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    for (i, c) in code.char_indices() {
        match c {
            '{' => {
                depth += 1;
                let before = code[..i].trim_end();
                let name_start = before.rfind(|c: char| !ident(c)).map_or(0, |p| p + 1);
                if before[..name_start].trim_end().ends_with("mod")
                    && !before[..name_start].trim_end().ends_with("_mod")
                {
                    inline.push((before[name_start..].to_string(), depth));
                }
            }
            '}' => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.checked_sub(1).expect("balanced braces");
            }
            _ => {}
        }
        let rest = &code[i..];
        let starts_path = rest.starts_with("crate::") || rest.starts_with("super::");
        if !starts_path || code[..i].ends_with(|c: char| ident(c) || c == ':') {
            continue;
        }
        let mut paths = Vec::new();
        use_tree(rest, &[], &mut paths);
        let mut here: Vec<String> = module.to_vec();
        here.extend(inline.iter().map(|(name, _)| name.clone()));
        for path in paths {
            let mut segments = path.iter().map(String::as_str).peekable();
            let mut target = if segments.peek() == Some(&"crate") {
                segments.next();
                Vec::new()
            } else {
                let mut base = here.clone();
                while segments.peek() == Some(&"super") {
                    segments.next();
                    base.pop();
                }
                base
            };
            target.extend(segments.map(str::to_string));
            if target.last().is_some_and(|s| s == "self") {
                target.pop();
            }
            if !target.is_empty() && files.contains_key(&target) {
                // A module brought in by name: its paths below are followed too.
                imported.push(target.clone());
            }
            while !target.is_empty() && !files.contains_key(&target) {
                target.pop();
            }
            if !target.starts_with(module) {
                uses.insert(files[&target].clone());
            }
        }
    }
    // `m::a::b` after `use crate::x::m;`: the file of the longest module of `x::m::a::b`.
    for alias in imported {
        let name = alias.last().expect("a named module").as_str();
        for (i, _) in code.match_indices(&format!("{name}::")) {
            if code[..i].ends_with(|c: char| ident(c) || c == ':') {
                continue;
            }
            let mut paths = Vec::new();
            use_tree(&code[i..], &[], &mut paths);
            for path in paths {
                let mut target = alias.clone();
                target.extend(path.into_iter().skip(1));
                while !target.is_empty() && !files.contains_key(&target) {
                    target.pop();
                }
                if !target.starts_with(module) {
                    uses.insert(files[&target].clone());
                }
            }
        }
    }
    assert_eq!(
        depth,
        0,
        "unbalanced braces in the file of `{}`",
        module.join("::")
    );
    uses
}

/// Every file of the library and the other files it uses.
fn file_graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = library_files();
    files
        .iter()
        .map(|(module, file)| {
            let text = std::fs::read_to_string(src.join(file)).unwrap();
            (file.clone(), file_uses(module, &text, &files))
        })
        .collect()
}

#[test]
fn the_sources_depend_on_each_other_as_the_architecture_page_says_and_without_cycles() {
    let actual = graph_from_sources();
    assert_eq!(cycle(&actual), None, "an import cycle");
    let documented = graph_from_docs();
    for (module, uses) in &actual {
        assert_eq!(
            documented.get(module),
            Some(uses),
            "the module graph of docs/architecture.md is out of date for `{module}`: the sources use {uses:?}"
        );
    }
    assert_eq!(
        documented.keys().collect::<Vec<_>>(),
        actual.keys().collect::<Vec<_>>()
    );
}

/// `lib.rs` is the front door and nothing else: it declares the modules and imports or re-exports
/// nothing, so no module reaches another through it (an arrow from a module up to the crate's
/// root, and from there to anything), and what is public is what its modules make public.
#[test]
fn lib_rs_declares_the_modules_and_nothing_reaches_through_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = code_only(&std::fs::read_to_string(root.join("src/lib.rs")).unwrap());
    let not_a_module: Vec<&str> = lib
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("#[") && !l.starts_with("#!["))
        .filter(|l| {
            !(l.starts_with("mod ")
                || l.starts_with("pub mod ")
                || l.starts_with("pub(crate) mod "))
        })
        .collect();
    assert!(
        not_a_module.is_empty(),
        "src/lib.rs holds more than module declarations: {not_a_module:?}"
    );
    let modules: BTreeSet<String> = graph_from_sources().into_keys().collect();
    let mut through_root = Vec::new();
    for file in rust_files(&root.join("src")) {
        let text = code_only(&std::fs::read_to_string(&file).unwrap());
        for (i, _) in text.match_indices("crate::") {
            if i > 0 && text[..i].ends_with('_') {
                continue;
            }
            let name: String = text[i + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && !modules.contains(&name) {
                through_root.push(format!("{}: crate::{name}", file.display()));
            }
        }
    }
    assert!(
        through_root.is_empty(),
        "names reached through the crate's root rather than their module: {through_root:?}"
    );
}

#[test]
fn a_cycle_is_found() {
    let g: Graph = [("a", "b"), ("b", "c"), ("c", "a")]
        .into_iter()
        .map(|(a, b)| (a.to_string(), BTreeSet::from([b.to_string()])))
        .collect();
    assert_eq!(
        cycle(&g),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}

#[test]
fn no_file_reaches_itself_through_the_files_it_uses() {
    if let Some(ring) = cycle(&file_graph()) {
        panic!(
            "files of src/ use each other in a circle: {}",
            ring.join(" → ")
        );
    }
}

#[test]
fn the_files_a_file_uses_are_read_from_its_paths() {
    let files: Files = ["", "a", "a::b", "a::b::c", "a::d", "e"]
        .into_iter()
        .map(|m| {
            let module: Vec<String> = m
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            (module, format!("{m}.rs"))
        })
        .collect();
    let b = ["a".to_string(), "b".to_string()];
    let uses = |text: &str| file_uses(&b, text, &files).into_iter().collect::<Vec<_>>();
    assert_eq!(uses("use super::{Item, d::{X, Y}};"), ["a.rs", "a::d.rs"]);
    assert_eq!(uses("let x = crate::e::f(1) + c::g();"), ["e.rs"]);
    assert_eq!(uses("fn f<'a>(x: &'a str) { crate::e::g(x) }"), ["e.rs"]);
    assert_eq!(
        uses("use super::super::e; use self::c; use crate::a::b::c::Z;"),
        ["e.rs"]
    );
    assert_eq!(
        uses("// crate::e::f\nmod c; let s = \"{ crate::e }\"; let c = '{'; let d = '\\u{7d}';"),
        Vec::<String>::new()
    );
    assert_eq!(
        uses("#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::d;\n}"),
        ["a::d.rs"]
    );
    assert_eq!(
        uses("use crate::a::{self, e}; fn f() { a::b::c::g(); a::d::h(); }"),
        ["a.rs", "a::d.rs"]
    );
}
