//! The compile-time cost estimate of an expression, as Kubernetes estimates CEL rules before it
//! accepts them: a rule whose worst case is too expensive is rejected when it is loaded, not
//! discovered when it stalls an evaluation.
//!
//! The unit is one AST node evaluated. A comprehension (`all`, `exists`, `map`, `filter`, ...)
//! costs its body once per element of its range; the size of a range is known for list literals
//! and `lists.range(<literal>)`, and otherwise assumed to be [`ASSUMED_LIST_SIZE`] (objects carry
//! no schema here to bound their lists, as `maxItems` does for Kubernetes).
//!
//! The same walk gives the *flat* cost of a comprehension body (its nodes, nested comprehensions
//! counted once): the runtime meter charges that per element actually iterated (see `meter`).

use cel::common::ast::{EntryExpr, Expr as Node, IdedExpr, LiteralValue};

/// Most estimated cost of one expression: Kubernetes' limit for the estimated cost of a CRD
/// validation rule. The costliest shipped expression (a filter over a migration plan's
/// cancellations nested with an `exists` over its VMs) estimates at 364,745, 27 times less;
/// `lists.range(5000)` nested in another, or three comprehensions nested over lists of the
/// object, go over it.
pub const MAX_ESTIMATED_COST: u64 = 10_000_000;

/// Most comprehensions nested in one another. Shipped rules nest at most 2.
pub const MAX_COMPREHENSION_DEPTH: usize = 3;

/// Largest literal size of `lists.range(n)`; the runtime cap applies to computed sizes.
pub const MAX_LITERAL_RANGE: i64 = 10_000;

/// Elements assumed in a list whose size is not known before evaluation (a list of the object,
/// or one computed at run time). Lists in Kubernetes objects (conditions, volumes, the VMs of a
/// migration plan) are rarely longer; longer ones are still bounded by the runtime meter.
pub const ASSUMED_LIST_SIZE: u64 = 100;

/// What the estimate found wrong, with the id of the node it is about (for its position).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation {
    pub id: u64,
    pub message: String,
}

/// The worst-case cost of an expression, and what exceeds a limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Estimate {
    pub cost: u64,
    pub depth: usize,
    pub violations: Vec<Violation>,
}

/// Estimates `expr` and checks it against the limits above.
pub(crate) fn estimate(expr: &IdedExpr) -> Estimate {
    let mut walk = Walk::default();
    let cost = walk.cost(expr, 0);
    if cost > MAX_ESTIMATED_COST {
        walk.violations.push(Violation {
            id: expr.id,
            message: format!(
                "estimated worst-case cost {cost} exceeds the limit of {MAX_ESTIMATED_COST} \
                 (each comprehension over a list of unknown size counts {ASSUMED_LIST_SIZE} elements)"
            ),
        });
    }
    Estimate {
        cost,
        depth: walk.max_depth,
        violations: walk.violations,
    }
}

/// The cost of one evaluation of `expr` where nested comprehensions count as if their range had
/// one element: what the runtime meter charges per element of the enclosing comprehension.
pub fn flat_cost(expr: &IdedExpr) -> u64 {
    let mut walk = Walk {
        flat: true,
        ..Walk::default()
    };
    walk.cost(expr, 0)
}

#[derive(Default)]
struct Walk {
    /// Count every comprehension as one element (see [`flat_cost`]).
    flat: bool,
    max_depth: usize,
    violations: Vec<Violation>,
}

impl Walk {
    fn cost(&mut self, expr: &IdedExpr, depth: usize) -> u64 {
        match &expr.expr {
            Node::Literal(_) | Node::Ident(_) | Node::Unspecified => 1,
            Node::Select(s) => 1 + self.cost(&s.operand, depth),
            Node::Call(call) => {
                if let Some(n) = literal_range(expr) {
                    if n > MAX_LITERAL_RANGE {
                        self.violations.push(Violation {
                            id: expr.id,
                            message: format!(
                                "lists.range({n}) creates more than {MAX_LITERAL_RANGE} elements"
                            ),
                        });
                    }
                    return 1 + n.max(0) as u64;
                }
                let target = call.target.as_deref().map_or(0, |t| self.cost(t, depth));
                call.args
                    .iter()
                    .fold(1 + target, |sum, a| sum.saturating_add(self.cost(a, depth)))
            }
            Node::List(list) => list
                .elements
                .iter()
                .fold(1, |sum, e| sum.saturating_add(self.cost(e, depth))),
            Node::Map(cel::common::ast::MapExpr { entries, .. })
            | Node::Struct(cel::common::ast::StructExpr { entries, .. }) => {
                entries.iter().fold(1, |sum, entry| {
                    let c = match &entry.expr {
                        EntryExpr::MapEntry(e) => self
                            .cost(&e.key, depth)
                            .saturating_add(self.cost(&e.value, depth)),
                        EntryExpr::StructField(f) => self.cost(&f.value, depth),
                    };
                    sum.saturating_add(c)
                })
            }
            Node::Comprehension(c) => {
                let depth = depth + 1;
                if depth > self.max_depth {
                    self.max_depth = depth;
                    if depth == MAX_COMPREHENSION_DEPTH + 1 {
                        self.violations.push(Violation {
                            id: expr.id,
                            message: format!(
                                "comprehensions nested more than {MAX_COMPREHENSION_DEPTH} deep"
                            ),
                        });
                    }
                }
                let elements = if self.flat {
                    1
                } else {
                    range_size(&c.iter_range)
                };
                let body = self
                    .cost(&c.loop_cond, depth)
                    .saturating_add(self.cost(&c.loop_step, depth));
                self.cost(&c.iter_range, depth - 1)
                    .saturating_add(self.cost(&c.accu_init, depth - 1))
                    .saturating_add(elements.saturating_mul(body))
                    .saturating_add(self.cost(&c.result, depth))
            }
        }
    }
}

/// `n` of `lists.range(n)` written as a literal.
fn literal_range(expr: &IdedExpr) -> Option<i64> {
    let Node::Call(call) = &expr.expr else {
        return None;
    };
    let is_lists = call
        .target
        .as_deref()
        .is_some_and(|t| matches!(&t.expr, Node::Ident(n) if n == "lists"));
    match (is_lists, call.func_name.as_str(), call.args.as_slice()) {
        (true, "range", [arg]) => match &arg.expr {
            Node::Literal(LiteralValue::Int(n)) => Some(*n.inner()),
            _ => None,
        },
        _ => None,
    }
}

/// Elements a comprehension's range has, known or assumed.
fn range_size(expr: &IdedExpr) -> u64 {
    if let Some(n) = literal_range(expr) {
        return n.max(0) as u64;
    }
    match &expr.expr {
        Node::List(list) => list.elements.len() as u64,
        Node::Map(map) => map.entries.len() as u64,
        _ => ASSUMED_LIST_SIZE,
    }
}
