//! `tree`: subjects as a forest. Operations on one subject are one node (one line); a subject hangs
//! under its owner when the owner has operations too (ownerReferences, any depth), and under the
//! root of its correlation group (`ifo.kubevirt.io/correlation-group` / `correlation-role`, per
//! namespace: an HCO upgrade above the KubeVirt and CDI rollouts it drives). Roots are grouped by
//! component, then namespace; columns are aligned by display width, so names in any script line
//! up.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use jiff::Timestamp;
use unicode_width::UnicodeWidthStr;

use super::colour::{Colours, TREE_OPERATION};
use super::format::age;
use super::op::Op;

/// Label of the group of cluster-scoped subjects.
pub const CLUSTER_SCOPE: &str = "(cluster-scoped)";
/// Label of operations without a component.
pub const NO_COMPONENT: &str = "(none)";
/// The label naming a subject's correlation group.
pub const GROUP_LABEL: &str = "ifo.kubevirt.io/correlation-group";
/// The label saying whether a subject is its group's `root` or a `child`.
pub const ROLE_LABEL: &str = "ifo.kubevirt.io/correlation-role";

/// One subject with its operations (oldest first) and what hangs under it.
#[derive(Debug, Clone, PartialEq)]
pub struct Node<'a> {
    /// The subject's operations, oldest first.
    pub ops: Vec<&'a Op>,
    /// Subjects owned by this one, or correlated to it as their root.
    pub children: Vec<Node<'a>>,
}

impl Node<'_> {
    fn first(&self) -> &Op {
        self.ops[0]
    }

    fn component(&self) -> &str {
        match self.first().spec.component.as_str() {
            "" => NO_COMPONENT,
            c => c,
        }
    }

    fn namespace(&self) -> &str {
        self.first()
            .spec
            .subject
            .namespace
            .as_deref()
            .unwrap_or(CLUSTER_SCOPE)
    }

    fn subject(&self) -> String {
        let s = &self.first().spec.subject;
        format!("{}/{}", s.kind, s.name)
    }

    fn sort_key(&self) -> (String, String, String) {
        let s = &self.first().spec.subject;
        (self.component().to_owned(), s.kind.clone(), s.name.clone())
    }

    fn oldest(&self) -> Option<Timestamp> {
        self.ops.iter().filter_map(|o| o.created).min()
    }

    /// This subject or one below it, by kind (any case) and name.
    fn find(&self, kind: &str, name: &str) -> Option<&Self> {
        let s = &self.first().spec.subject;
        if s.kind.eq_ignore_ascii_case(kind) && s.name == name {
            return Some(self);
        }
        self.children.iter().find_map(|c| c.find(kind, name))
    }
}

/// The identity of a subject: its uid, or (namespace, kind, name) when the uid is unknown.
fn subject_key(op: &Op) -> (String, String, String, String) {
    let s = &op.spec.subject;
    if s.uid.is_empty() {
        (
            String::new(),
            s.namespace.clone().unwrap_or_default(),
            s.kind.clone(),
            s.name.clone(),
        )
    } else {
        (s.uid.clone(), String::new(), String::new(), String::new())
    }
}

/// The forest of `ops`: roots sorted by (component, kind, name), and children likewise.
pub fn forest(ops: &[Op]) -> Vec<Node<'_>> {
    // One node per subject.
    let mut index: HashMap<(String, String, String, String), usize> = HashMap::new();
    let mut nodes: Vec<Vec<&Op>> = Vec::new();
    for op in ops {
        let i = *index.entry(subject_key(op)).or_insert_with(|| {
            nodes.push(Vec::new());
            nodes.len() - 1
        });
        nodes[i].push(op);
    }
    for node in &mut nodes {
        node.sort_by(|a, b| (a.created, &a.spec.operation).cmp(&(b.created, &b.spec.operation)));
    }
    let by_uid: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| !n[0].spec.subject.uid.is_empty())
        .map(|(i, n)| (n[0].spec.subject.uid.as_str(), i))
        .collect();

    // Owners first: the first owner that has operations too, unless that would make a cycle.
    let mut parent: Vec<Option<usize>> = vec![None; nodes.len()];
    for i in 0..nodes.len() {
        let owner = nodes[i][0]
            .spec
            .subject
            .owner_references
            .iter()
            .filter_map(|r| by_uid.get(r.uid.as_str()).copied())
            .find(|&p| p != i && !descends_from(&parent, p, i));
        parent[i] = owner;
    }

    // Then correlation, among the subjects no owner holds: per (group, namespace), the earliest
    // root takes every other member, other roots included. A group without a root stays apart.
    let mut groups: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for (i, node) in nodes.iter().enumerate() {
        if parent[i].is_some() {
            continue;
        }
        if let Some(group) = node.iter().find_map(|o| o.labels.get(GROUP_LABEL)) {
            let namespace = node[0].spec.subject.namespace.clone().unwrap_or_default();
            groups
                .entry((group.clone(), namespace))
                .or_default()
                .push(i);
        }
    }
    for members in groups.values() {
        let is_root = |i: &usize| {
            nodes[*i]
                .iter()
                .any(|o| o.labels.get(ROLE_LABEL).is_some_and(|r| r == "root"))
        };
        let root = members
            .iter()
            .filter(|i| is_root(i))
            .min_by_key(|&&i| (nodes[i].iter().filter_map(|o| o.created).min(), i));
        if let Some(&root) = root {
            for &m in members.iter().filter(|&&m| m != root) {
                parent[m] = Some(root);
            }
        }
    }

    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut roots = Vec::new();
    for (i, p) in parent.iter().enumerate() {
        match p {
            Some(p) => children[*p].push(i),
            None => roots.push(i),
        }
    }
    let mut forest: Vec<Node<'_>> = roots
        .into_iter()
        .map(|r| build(r, &nodes, &children))
        .collect();
    forest.sort_by_key(Node::sort_key);
    forest
}

/// Whether following parents from `node` reaches `ancestor`.
fn descends_from(parent: &[Option<usize>], node: usize, ancestor: usize) -> bool {
    let mut at = Some(node);
    let mut steps = 0;
    while let Some(i) = at {
        if i == ancestor {
            return true;
        }
        steps += 1;
        if steps > parent.len() {
            return true;
        }
        at = parent[i];
    }
    false
}

fn build<'a>(i: usize, nodes: &[Vec<&'a Op>], children: &[Vec<usize>]) -> Node<'a> {
    let mut kids: Vec<Node<'a>> = children[i]
        .iter()
        .map(|&c| build(c, nodes, children))
        .collect();
    kids.sort_by_key(Node::sort_key);
    Node {
        ops: nodes[i].clone(),
        children: kids,
    }
}

/// `tree --for Kind/name`: the subject (in any place of the forest) and what hangs under it.
/// `None` when no operation concerns it.
pub fn focus<'a>(forest: &'a [Node<'a>], target: &str) -> Result<Option<&'a Node<'a>>, String> {
    let (kind, name) = target
        .split_once('/')
        .filter(|(k, n)| !k.is_empty() && !n.is_empty())
        .ok_or_else(|| {
            format!("--for must be Kind/name (e.g. VirtualMachine/my-vm), not {target:?}")
        })?;
    Ok(forest.iter().find_map(|n| n.find(kind, name)))
}

/// A subject's operations on one line, plain and painted: active ones by name, others with
/// their phase.
fn operations(node: &Node<'_>, colours: Colours) -> (String, String) {
    let (mut plain, mut painted) = (Vec::new(), Vec::new());
    for o in &node.ops {
        let name = colours.operation(&o.spec.operation, TREE_OPERATION);
        if o.is_active() {
            plain.push(o.spec.operation.clone());
            painted.push(name);
        } else {
            plain.push(format!("{} ({})", o.spec.operation, o.status.phase));
            painted.push(format!("{name} ({})", colours.phase(&o.status.phase)));
        }
    }
    (plain.join(", "), painted.join(", "))
}

/// One printed line before alignment: the tree prefix and subject, the operations (plain, to
/// measure, and painted, to print), the age. Headings have no operations.
struct Line {
    subject: String,
    operations: String,
    painted: String,
    age: String,
}

impl Line {
    fn heading(text: String) -> Line {
        Line {
            subject: text,
            operations: String::new(),
            painted: String::new(),
            age: String::new(),
        }
    }
}

/// How the lines of a subject and those under it are drawn.
struct Draw {
    now: Timestamp,
    colours: Colours,
}

fn lines(node: &Node<'_>, lead: &str, branch: &str, rest: &str, draw: &Draw, out: &mut Vec<Line>) {
    let (operations, painted) = operations(node, draw.colours);
    out.push(Line {
        subject: format!("{lead}{branch}{}", node.subject()),
        operations,
        painted,
        age: age(draw.now, node.oldest()),
    });
    let count = node.children.len();
    for (i, child) in node.children.iter().enumerate() {
        let (b, r) = if i + 1 == count {
            ("└── ", "    ")
        } else {
            ("├── ", "│   ")
        };
        lines(child, &format!("{lead}{rest}"), b, r, draw, out);
    }
}

/// Component and namespace headings (`None`), and subject lines.
fn layout<'a>(roots: &[&'a Node<'a>], draw: &Draw) -> Vec<Line> {
    let mut grouped: BTreeMap<&str, BTreeMap<&str, Vec<&Node<'_>>>> = BTreeMap::new();
    for root in roots {
        grouped
            .entry(root.component())
            .or_default()
            .entry(root.namespace())
            .or_default()
            .push(root);
    }
    let mut out = Vec::new();
    for (component, namespaces) in grouped {
        out.push(Line::heading(draw.colours.bold(component)));
        for (namespace, roots) in namespaces {
            out.push(Line::heading(format!(
                "  {}",
                draw.colours.namespace(namespace)
            )));
            for root in roots {
                lines(root, "    ", "", "", draw, &mut out);
            }
        }
    }
    out
}

/// The forest as text: component, namespace, then each subject with its operations and the age
/// of its oldest one, the columns aligned across the whole output by display width.
pub fn render(roots: &[&Node<'_>], now: Timestamp, colours: Colours) -> String {
    let lines = layout(roots, &Draw { now, colours });
    let subject_width = lines
        .iter()
        .filter(|l| !l.operations.is_empty())
        .map(|l| l.subject.width())
        .max()
        .unwrap_or(0);
    let ops_width = lines
        .iter()
        .map(|l| l.operations.width())
        .max()
        .unwrap_or(0);
    let pad = |text: &str, width: usize| " ".repeat(width.saturating_sub(text.width()));
    let mut out = String::new();
    for line in lines {
        if line.operations.is_empty() {
            let _ = writeln!(out, "{}", line.subject);
            continue;
        }
        let _ = writeln!(
            out,
            "{}{}  {}{}  {}",
            line.subject,
            pad(&line.subject, subject_width),
            line.painted,
            pad(&line.operations, ops_width),
            colours.dim(&line.age)
        );
    }
    out
}

#[cfg(test)]
mod tests;
