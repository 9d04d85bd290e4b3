//! The server's modules depend on each other only as the module graph of `docs/architecture.md`
//! says: the graph read from the sources (every `crate::<module>` a module's files name) is
//! exactly the one the page lists, and it has no cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut files = Vec::new();
    let mut dirs = vec![path.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                files.push(p);
            }
        }
    }
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
