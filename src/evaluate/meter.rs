//! The runtime cost limit. cel 0.15 counts nothing and cannot be interrupted, so the limit is
//! built from what it does call back: functions registered on the `Env`.
//!
//! Each compiled expression is evaluated from an *instrumented* copy of its AST ([`instrument`]):
//! * the range of every comprehension goes through `@cost_range(range, per_element)`, which
//!   charges `size(range) × per_element` (the flat cost of the body, see `estimate::flat_cost`)
//!   before the first element is iterated, and passes the range through untouched. Nested
//!   comprehensions charge again on every evaluation of their range, so the total charged is what
//!   the iterations cost, whatever the sizes at run time;
//! * `lists.range(n)` becomes `@lists_range(n)`, which charges `n` before it allocates;
//! * `s.replace(from, to[, n])` becomes `s.@replace(...)`, which refuses a result larger than
//!   [`MAX_STRING_BYTES`] before it allocates (chained replaces grow a string exponentially).
//!
//! Names starting with `@` cannot be written in CEL source, so rules cannot call or shadow them.
//! A charge fails once the expression's [`Budget::cost_limit`] is used up or the evaluation has
//! used its [`Budget::timeout`] of CPU time; the meter remembers that it tripped, so an error
//! absorbed by `||`/`&&`/`exists` still makes the result [`Exceeded`] rather than a value.
//!
//! The time limit counts the work the evaluation did (its thread's CPU time), not the time it
//! waited for a CPU: on a busy node an evaluation may take far longer than its budget by the
//! clock without having done more work, and such an object is not over budget. Reading a
//! thread's CPU time costs a system call, so the clock is read first (CPU time never runs
//! ahead of it) and the CPU time only once the clock is past the limit.
//!
//! What cannot be interrupted — a single function call on a large value — is bounded by the
//! caps above and by the size of the object, and is caught afterwards: an evaluation that ends
//! past its deadline is over budget too (see `evaluate`).
//!
//! The meter is thread-local: an evaluation runs on one thread from start to end.

use std::cell::Cell;
use std::time::{Duration, Instant};

use cel::common::ast::{CallExpr, Expr as Node, IdedExpr, LiteralValue};
use cel::common::types::{CelInt, CelList, CelString, DYN_TYPE, INT_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use super::estimate::flat_cost;

/// Default of [`Budget::cost_limit`]: about 10 to 100 ms of evaluation, a thousand times what the
/// costliest shipped rule uses on a large object.
pub(crate) const DEFAULT_COST_LIMIT: u64 = 1_000_000;

/// Default of [`Budget::timeout`].
pub(super) const DEFAULT_TIMEOUT: Duration = Duration::from_millis(100);

/// Largest string `replace` may produce.
pub(super) const MAX_STRING_BYTES: usize = 1 << 20;

const COST_RANGE: &str = "@cost_range";
const LISTS_RANGE: &str = "@lists_range";
const REPLACE: &str = "@replace";

/// What one evaluation may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    /// Cost units one expression may be charged (elements iterated × body size, elements
    /// created by `lists.range`).
    pub cost_limit: u64,
    /// CPU time one ruleset's evaluation against one object may use.
    pub timeout: Duration,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            cost_limit: DEFAULT_COST_LIMIT,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// Which limit an evaluation hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Exceeded {
    /// The runtime cost went over the limit (the limit).
    #[error("runtime cost limit of {0} exceeded")]
    Cost(u64),
    /// The evaluation used more CPU time than its limit (the limit).
    #[error("evaluation CPU time limit of {0:?} exceeded")]
    Time(Duration),
    /// A string would have grown past the limit (the limit, in bytes).
    #[error("a string of more than {0} bytes would be created")]
    Size(usize),
}

#[derive(Debug, Clone, Copy)]
struct State {
    budget: Budget,
    /// When the evaluation started, by the clock and in its thread's CPU time.
    started: Instant,
    cpu_started: Duration,
    /// Units left to the current expression.
    remaining: u64,
    exceeded: Option<Exceeded>,
}

thread_local! {
    static METER: Cell<Option<State>> = const { Cell::new(None) };
}

fn with_state<T>(f: impl FnOnce(&mut Option<State>) -> T) -> T {
    METER.with(|cell| {
        let mut state = cell.get();
        let out = f(&mut state);
        cell.set(state);
        out
    })
}

/// Runs one ruleset's evaluation with `budget`: its time starts now. Restores whatever meter
/// was there before, so it nests.
pub(crate) fn within<T>(budget: &Budget, f: impl FnOnce() -> T) -> T {
    let previous = METER.with(|cell| {
        cell.replace(Some(State {
            budget: *budget,
            started: Instant::now(),
            cpu_started: thread_cpu_time(),
            remaining: budget.cost_limit,
            exceeded: None,
        }))
    });
    struct Restore(Option<State>);
    impl Drop for Restore {
        fn drop(&mut self) {
            METER.with(|cell| cell.set(self.0));
        }
    }
    let _restore = Restore(previous);
    f()
}

/// Runs one expression with a fresh cost allowance (under the evaluation's deadline), and says
/// whether it went over budget. Outside [`within`], the default budget applies to it alone.
pub(crate) fn expression<T>(f: impl FnOnce() -> T) -> (T, Option<Exceeded>) {
    let active = with_state(|state| match state {
        Some(s) => {
            s.remaining = s.budget.cost_limit;
            s.exceeded = None;
            true
        }
        None => false,
    });
    if !active {
        return within(&Budget::default(), || expression(f));
    }
    let out = f();
    (out, with_state(|state| state.and_then(|s| s.exceeded)))
}

/// Whether the current evaluation is past its deadline (then its remaining expressions are not
/// run at all).
pub(crate) fn past_deadline() -> Option<Exceeded> {
    with_state(|state| {
        state.and_then(|s| s.out_of_time().then_some(Exceeded::Time(s.budget.timeout)))
    })
}

/// The CPU time the calling thread has used.
fn thread_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

impl State {
    /// Whether the evaluation has used more than its time: the clock first, which costs
    /// nothing, then, once the clock is past the limit, the CPU time its thread really used.
    fn out_of_time(&self) -> bool {
        self.started.elapsed() > self.budget.timeout
            && thread_cpu_time().saturating_sub(self.cpu_started) > self.budget.timeout
    }
}

/// Marks the current expression over budget and gives the error that stops it.
fn trip(state: &mut State, exceeded: Exceeded) -> ExecutionError {
    state.exceeded.get_or_insert(exceeded);
    ExecutionError::function_error("cost", exceeded.to_string())
}

/// Takes `units` from the current expression's allowance, or fails when it or the deadline is
/// used up.
fn charge(units: u64) -> Result<(), ExecutionError> {
    with_state(|state| {
        let Some(s) = state else { return Ok(()) };
        if let Some(e) = s.exceeded {
            return Err(trip(s, e));
        }
        if units > s.remaining {
            s.remaining = 0;
            return Err(trip(s, Exceeded::Cost(s.budget.cost_limit)));
        }
        s.remaining -= units;
        if s.out_of_time() {
            return Err(trip(s, Exceeded::Time(s.budget.timeout)));
        }
        Ok(())
    })
}

fn refuse(exceeded: Exceeded) -> ExecutionError {
    with_state(|state| match state {
        Some(s) => trip(s, exceeded),
        None => ExecutionError::function_error("cost", exceeded.to_string()),
    })
}

/// Registers the metering functions on `env`.
pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(
        COST_RANGE,
        "@cost_range(dyn,int)",
        vec![DYN_TYPE, INT_TYPE],
        cost_range,
    )?;
    env.add_overload(
        LISTS_RANGE,
        "@lists_range(int)",
        vec![INT_TYPE],
        lists_range,
    )?;
    env.add_member_overload(
        REPLACE,
        "string.@replace(string,string)",
        STRING_TYPE,
        vec![STRING_TYPE, STRING_TYPE],
        replace,
    )?;
    env.add_member_overload(
        REPLACE,
        "string.@replace(string,string,int)",
        STRING_TYPE,
        vec![STRING_TYPE, STRING_TYPE, INT_TYPE],
        replace,
    )?;
    Ok(())
}

fn int_arg(function: &str, v: &CowVal<'_, '_>) -> Result<i64, ExecutionError> {
    v.downcast_ref::<CelInt>()
        .map(|i| *i.inner())
        .ok_or_else(|| ExecutionError::no_such_overload(function, vec![v.get_type().name().into()]))
}

fn str_arg<'b>(function: &str, v: &'b CowVal<'_, '_>) -> Result<&'b str, ExecutionError> {
    v.downcast_ref::<CelString>()
        .map(|s| s.inner())
        .ok_or_else(|| ExecutionError::no_such_overload(function, vec![v.get_type().name().into()]))
}

/// `@cost_range(range, per_element)`: charges the iterations of a comprehension, returns `range`.
fn cost_range<'b, 'v>(mut args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let per_element = args.pop().map_or(Ok(1), |a| int_arg(COST_RANGE, &a))?;
    let range = args
        .pop()
        .ok_or_else(|| ExecutionError::invalid_argument_count(2, 0))?;
    if let Some(sizer) = range.as_sizer() {
        let size = u64::try_from(*sizer.size().inner()).unwrap_or(0);
        charge(size.saturating_mul(per_element.max(1) as u64))?;
    }
    Ok(range)
}

/// `lists.range(n)`: `[0, 1, ..., n-1]`, charged before it is built.
fn lists_range<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let n = args.first().map_or(Ok(0), |a| int_arg("lists.range", a))?;
    if n < 0 {
        return Err(ExecutionError::function_error(
            "lists.range",
            format!("size must be non-negative, got {n}"),
        ));
    }
    charge(n as u64)?;
    let list: Vec<Box<dyn Val + 'v>> = (0..n)
        .map(|i| Box::new(CelInt::from(i)) as Box<dyn Val + 'v>)
        .collect();
    Ok(CowVal::owned(CelList::from(list)))
}

/// `s.replace(from, to[, n])` (strings extension semantics: all occurrences, or the first `n`
/// when `n` is not negative), refused when the result would exceed [`MAX_STRING_BYTES`].
fn replace<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (s, from, to) = match args.as_slice() {
        [s, from, to] | [s, from, to, _] => (
            str_arg("replace", s)?,
            str_arg("replace", from)?,
            str_arg("replace", to)?,
        ),
        _ => return Err(ExecutionError::invalid_argument_count(3, args.len())),
    };
    let limit = match args.get(3) {
        Some(n) => usize::try_from(int_arg("replace", n)?).ok(),
        None => None,
    };
    let occurrences = if from.is_empty() {
        s.chars().count() + 1
    } else {
        s.matches(from).count()
    };
    let replaced = limit.map_or(occurrences, |n| n.min(occurrences));
    let size = (s.len() - replaced * from.len()).saturating_add(replaced.saturating_mul(to.len()));
    if size > MAX_STRING_BYTES {
        return Err(refuse(Exceeded::Size(MAX_STRING_BYTES)));
    }
    charge(replaced as u64)?;
    let out = match limit {
        Some(n) => s.replacen(from, to, n),
        None => s.replace(from, to),
    };
    Ok(CowVal::owned(CelString::from(out)))
}

/// The copy of `expr` that is evaluated: metered comprehensions, capped functions.
pub(crate) fn instrument(expr: &IdedExpr) -> IdedExpr {
    let id = expr.id;
    let node = match &expr.expr {
        Node::Comprehension(c) => {
            let mut c = c.clone();
            let per_element = flat_cost(&c.loop_cond).saturating_add(flat_cost(&c.loop_step));
            let range = instrument(&c.iter_range);
            c.iter_range = call(
                range.id,
                COST_RANGE,
                None,
                vec![
                    range,
                    IdedExpr {
                        id,
                        expr: Node::Literal(LiteralValue::Int(CelInt::from(
                            i64::try_from(per_element).unwrap_or(i64::MAX),
                        ))),
                    },
                ],
            );
            c.accu_init = instrument(&c.accu_init);
            c.loop_cond = instrument(&c.loop_cond);
            c.loop_step = instrument(&c.loop_step);
            c.result = instrument(&c.result);
            Node::Comprehension(c)
        }
        Node::Call(c) => {
            let args: Vec<IdedExpr> = c.args.iter().map(instrument).collect();
            let is_lists = c
                .target
                .as_deref()
                .is_some_and(|t| matches!(&t.expr, Node::Ident(n) if n == "lists"));
            match (c.func_name.as_str(), args.len()) {
                ("range", 1) if is_lists => return call(id, LISTS_RANGE, None, args),
                ("replace", 2 | 3) if c.target.is_some() => {
                    let target = c.target.as_deref().map(instrument);
                    return call(id, REPLACE, target, args);
                }
                _ => Node::Call(CallExpr {
                    func_name: c.func_name.clone(),
                    target: c.target.as_deref().map(|t| Box::new(instrument(t))),
                    args,
                }),
            }
        }
        Node::Select(s) => {
            let mut s = s.clone();
            s.operand = Box::new(instrument(&s.operand));
            Node::Select(s)
        }
        Node::List(l) => {
            let mut l = l.clone();
            l.elements = l.elements.iter().map(instrument).collect();
            Node::List(l)
        }
        Node::Map(m) => {
            let mut m = m.clone();
            for entry in &mut m.entries {
                instrument_entry(entry);
            }
            Node::Map(m)
        }
        Node::Struct(s) => {
            let mut s = s.clone();
            for entry in &mut s.entries {
                instrument_entry(entry);
            }
            Node::Struct(s)
        }
        Node::Literal(_) | Node::Ident(_) | Node::Unspecified => expr.expr.clone(),
    };
    IdedExpr { id, expr: node }
}

fn instrument_entry(entry: &mut cel::common::ast::IdedEntryExpr) {
    match &mut entry.expr {
        cel::common::ast::EntryExpr::MapEntry(e) => {
            e.key = instrument(&e.key);
            e.value = instrument(&e.value);
        }
        cel::common::ast::EntryExpr::StructField(f) => f.value = instrument(&f.value),
    }
}

fn call(id: u64, function: &str, target: Option<IdedExpr>, args: Vec<IdedExpr>) -> IdedExpr {
    IdedExpr {
        id,
        expr: Node::Call(CallExpr {
            func_name: function.to_owned(),
            target: target.map(Box::new),
            args,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(ms: u64) -> Budget {
        Budget {
            cost_limit: DEFAULT_COST_LIMIT,
            timeout: Duration::from_millis(ms),
        }
    }

    /// An evaluation whose thread waits (for a busy CPU, here asleep) for longer than its limit
    /// has not used it: it goes on.
    #[test]
    fn waiting_is_not_counted() {
        let exceeded = within(&limit(20), || {
            std::thread::sleep(Duration::from_millis(60));
            (past_deadline(), charge(1))
        });
        assert_eq!(exceeded.0, None);
        assert!(exceeded.1.is_ok(), "{:?}", exceeded.1);
    }

    /// One that works for longer than its limit is stopped, at its next charge.
    #[test]
    fn work_past_the_limit_is_over_budget() {
        let exceeded = within(&limit(20), || {
            let start = thread_cpu_time();
            while thread_cpu_time().saturating_sub(start) < Duration::from_millis(25) {
                std::hint::black_box(start);
            }
            (past_deadline(), charge(1).is_err())
        });
        assert_eq!(
            exceeded,
            (Some(Exceeded::Time(Duration::from_millis(20))), true)
        );
    }
}
