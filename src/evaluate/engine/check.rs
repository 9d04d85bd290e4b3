//! What compiling checks beyond the parser: that an expression reads no variable but
//! `object` (and the variables of its comprehensions), and that its estimated worst case is
//! within the limits; each problem reported at its line and column, as syntax errors are.

use std::sync::Arc;

use cel::common::ast::{Expr as Node, IdedExpr, SourceInfo};
use cel::{ParseError, ParseErrors, Program};

use super::super::estimate::{Estimate, estimate};
use super::{CompileError, Engine, FUNCTION_NAMESPACES, OBJECT};

impl Engine {
    /// Reports every identifier that is neither `object`, nor a comprehension variable in scope,
    /// nor a type name (`type(x) == int`), in the same format as syntax errors.
    pub(super) fn check_variables(
        &self,
        program: &Program,
        source: &str,
    ) -> Result<(), CompileError> {
        let mut undeclared = Vec::new();
        let mut scope = Vec::new();
        self.walk(program.expression(), &mut scope, &mut undeclared);
        if undeclared.is_empty() {
            return Ok(());
        }
        let found = undeclared.into_iter().map(|(id, name)| {
            (
                id,
                format!("undeclared reference to '{name}' (only '{OBJECT}' is declared)"),
            )
        });
        Err(located(program, source, found))
    }

    fn is_type_name(&self, name: &str) -> bool {
        self.env.types().find_type(name).is_some()
    }

    fn walk<'e>(
        &self,
        expr: &'e IdedExpr,
        scope: &mut Vec<&'e str>,
        undeclared: &mut Vec<(u64, String)>,
    ) {
        match &expr.expr {
            Node::Ident(name) => {
                let name = name.as_str();
                if name != OBJECT
                    && !name.starts_with('@')
                    && !scope.contains(&name)
                    && !self.is_type_name(name)
                    && !undeclared.iter().any(|(_, n)| n == name)
                {
                    undeclared.push((expr.id, name.to_owned()));
                }
            }
            Node::Select(select) => {
                // A dotted type name such as `google.protobuf.Timestamp` parses as selects.
                if !select.test
                    && let Some(name) = qualified_name(expr)
                    && self.is_type_name(&name)
                {
                    return;
                }
                self.walk(&select.operand, scope, undeclared);
            }
            Node::Call(call) => {
                if let Some(target) = &call.target {
                    let namespaced = qualified_name(target).is_some_and(|name| {
                        let root = name.split('.').next().unwrap_or_default();
                        FUNCTION_NAMESPACES.contains(&root) && !scope.contains(&root)
                    });
                    if !namespaced {
                        self.walk(target, scope, undeclared);
                    }
                }
                for arg in &call.args {
                    self.walk(arg, scope, undeclared);
                }
            }
            Node::Comprehension(c) => {
                self.walk(&c.iter_range, scope, undeclared);
                self.walk(&c.accu_init, scope, undeclared);
                let depth = scope.len();
                scope.push(&c.iter_var);
                if let Some(v) = &c.iter_var2 {
                    scope.push(v);
                }
                scope.push(&c.accu_var);
                self.walk(&c.loop_cond, scope, undeclared);
                self.walk(&c.loop_step, scope, undeclared);
                self.walk(&c.result, scope, undeclared);
                scope.truncate(depth);
            }
            Node::List(list) => {
                for e in &list.elements {
                    self.walk(e, scope, undeclared);
                }
            }
            // Map and message literals hold the same kind of entries.
            Node::Map(cel::common::ast::MapExpr { entries, .. })
            | Node::Struct(cel::common::ast::StructExpr { entries, .. }) => {
                for entry in entries {
                    match &entry.expr {
                        cel::common::ast::EntryExpr::MapEntry(e) => {
                            self.walk(&e.key, scope, undeclared);
                            self.walk(&e.value, scope, undeclared);
                        }
                        cel::common::ast::EntryExpr::StructField(f) => {
                            self.walk(&f.value, scope, undeclared);
                        }
                    }
                }
            }
            Node::Literal(_) | Node::Unspecified => {}
        }
    }
}

/// Rejects an expression whose estimated worst case exceeds a limit, at the node concerned.
pub(super) fn check_cost(program: &Program, source: &str) -> Result<Estimate, CompileError> {
    let estimate = estimate(program.expression());
    if estimate.violations.is_empty() {
        return Ok(estimate);
    }
    let found = estimate.violations.into_iter().map(|v| (v.id, v.message));
    Err(located(program, source, found))
}

/// A compile error listing `found` (node id, message), each at its line and column, in the
/// format of syntax errors.
fn located(
    program: &Program,
    source: &str,
    found: impl IntoIterator<Item = (u64, String)>,
) -> CompileError {
    let mut source_info = SourceInfo::default();
    source.clone_into(&mut source_info.source);
    let source_info = Arc::new(source_info);
    let errors = found
        .into_iter()
        .map(|(id, msg)| ParseError {
            source: None,
            pos: position(program.source_info(), source, id),
            msg,
            expr_id: id,
            source_info: Some(Arc::clone(&source_info)),
        })
        .collect();
    CompileError {
        message: ParseErrors { errors }.to_string(),
    }
}

/// `a.b.c` for an identifier or a chain of field selections on one, else `None`.
fn qualified_name(expr: &IdedExpr) -> Option<String> {
    match &expr.expr {
        Node::Ident(name) => Some(name.clone()),
        Node::Select(s) if !s.test => {
            qualified_name(&s.operand).map(|op| format!("{op}.{}", s.field))
        }
        _ => None,
    }
}

/// 1-based (line, column) of node `id`, in characters, for cel-go style messages.
fn position(info: &SourceInfo, source: &str, id: u64) -> (isize, isize) {
    let Some((start, _)) = info.offset_for(id) else {
        return (1, 1);
    };
    let start = start as usize;
    let (mut line, mut col) = (1isize, 1isize);
    for (i, ch) in source.chars().enumerate() {
        if i >= start {
            break;
        }
        if ch == '\n' {
            line += 1;
            col = 1;
        } else {
            col += 1;
        }
    }
    (line, col)
}
