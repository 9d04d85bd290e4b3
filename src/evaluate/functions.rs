//! Functions registered on the shared `Env` beyond the CEL standard library and the `strings` and
//! `lists` extensions: a cached `matches`, and the parts of the Kubernetes CEL libraries that rules
//! can reasonably use (regex `find`/`findAll`, list `indexOf`/`lastIndexOf`/`isSorted`/`sum`/
//! `min`/`max`).
//!
//! They are `Env` overloads (plain `fn` pointers, dispatched on runtime argument types) rather
//! than per-`Context` closures, so evaluating costs nothing to set up. Every list function takes
//! any value of type `list` through the `Iterable` capability, so it works on bound JSON arrays
//! as well as on list literals and comprehension results.

use parking_lot::RwLock;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::LazyLock;

use cel::common::types::{
    CelBool, CelInt, CelList, CelString, INT_TYPE, Kind, LIST_TYPE, STRING_TYPE,
};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};
use regex::Regex;

/// How many compiled patterns the process keeps. Rules use a handful of literal patterns; the
/// bound only matters when patterns come from object data.
const REGEX_CACHE_CAPACITY: usize = 1024;

/// Compiled-program size limit for one pattern, so a hostile pattern cannot take much memory.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Compiled regexes by pattern, bounded. The stock `matches` compiles its pattern on every call
/// (about 20 µs, forty times the cost of a typical rule), so patterns are compiled once and
/// shared by all threads. `Regex` is cheap to clone (reference counted).
pub(crate) struct RegexCache {
    capacity: usize,
    map: RwLock<HashMap<String, Regex>>,
}

impl RegexCache {
    pub(crate) fn new(capacity: usize) -> Self {
        RegexCache {
            capacity,
            map: RwLock::new(HashMap::new()),
        }
    }

    /// The compiled form of `pattern`, from the cache when possible. An invalid pattern is a
    /// runtime error naming `function`, worded as the stock `matches` words it.
    pub(crate) fn get(&self, function: &str, pattern: &str) -> Result<Regex, ExecutionError> {
        if let Some(re) = self.read().get(pattern) {
            return Ok(re.clone());
        }
        let re = regex::RegexBuilder::new(pattern)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|err| {
                ExecutionError::function_error(
                    function,
                    format!("'{pattern}' not a valid regex:\n{err}"),
                )
            })?;
        let mut map = self.map.write();
        if map.len() >= self.capacity && !map.contains_key(pattern) {
            // Simple eviction: drop an arbitrary entry. A full cache means patterns come from
            // data, where no entry is more valuable than another.
            if let Some(victim) = map.keys().next().cloned() {
                map.remove(&victim);
            }
        }
        map.insert(pattern.to_owned(), re.clone());
        Ok(re)
    }

    fn read(&self) -> parking_lot::RwLockReadGuard<'_, HashMap<String, Regex>> {
        // A panic while holding the lock cannot leave the map inconsistent (single insert or
        // remove), so a poisoned lock is still usable.
        self.map.read()
    }

    #[cfg(test)]
    pub(crate) fn contains(&self, pattern: &str) -> bool {
        self.read().contains_key(pattern)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.read().len()
    }
}

/// The process-wide cache used by `matches`, `find` and `findAll`.
pub(crate) static REGEX_CACHE: LazyLock<RegexCache> =
    LazyLock::new(|| RegexCache::new(REGEX_CACHE_CAPACITY));

fn cached_regex(function: &str, pattern: &str) -> Result<Regex, ExecutionError> {
    REGEX_CACHE.get(function, pattern)
}

/// Registers every function of this module on `env`.
pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let strings = || vec![STRING_TYPE];
    env.add_member_overload(
        "matches",
        "string.matches(string)",
        STRING_TYPE,
        strings(),
        matches,
    )?;
    env.add_overload(
        "matches",
        "matches(string,string)",
        vec![STRING_TYPE, STRING_TYPE],
        matches,
    )?;
    env.add_member_overload("find", "string.find(string)", STRING_TYPE, strings(), find)?;
    env.add_member_overload(
        "findAll",
        "string.findAll(string)",
        STRING_TYPE,
        strings(),
        find_all,
    )?;
    env.add_member_overload(
        "findAll",
        "string.findAll(string,int)",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all_n,
    )?;

    let any = || vec![cel::common::types::DYN_TYPE];
    env.add_member_overload("indexOf", "list.indexOf(dyn)", LIST_TYPE, any(), index_of)?;
    env.add_member_overload(
        "lastIndexOf",
        "list.lastIndexOf(dyn)",
        LIST_TYPE,
        any(),
        last_index_of,
    )?;
    env.add_member_overload("isSorted", "list.isSorted()", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list.sum()", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list.min()", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list.max()", LIST_TYPE, vec![], max)?;
    Ok(())
}

/// The `N` arguments of an overload, receiver first.
fn take<'b, 'v, const N: usize>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<[CowVal<'b, 'v>; N], ExecutionError> {
    args.try_into()
        .map_err(|args: Vec<_>| ExecutionError::invalid_argument_count(N, args.len()))
}

fn string_arg<'b>(function: &str, v: &'b CowVal<'_, '_>) -> Result<&'b str, ExecutionError> {
    v.downcast_ref::<CelString>()
        .map(|s| s.inner())
        .ok_or_else(|| ExecutionError::no_such_overload(function, vec![v.get_type().name().into()]))
}

/// `s.matches(re)` and `matches(s, re)`: RE2 semantics (the `regex` crate), unanchored search.
fn matches<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s, re] = take(args)?;
    let re = cached_regex("matches", string_arg("matches", &re)?)?;
    Ok(CowVal::owned(CelBool::from(
        re.is_match(string_arg("matches", &s)?),
    )))
}

/// Kubernetes `s.find(re)`: the first match, or `''`.
fn find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s, re] = take(args)?;
    let re = cached_regex("find", string_arg("find", &re)?)?;
    let found = re
        .find(string_arg("find", &s)?)
        .map_or("", |m| m.as_str())
        .to_owned();
    Ok(CowVal::owned(CelString::from(found)))
}

fn find_all_limited<'b, 'v>(
    s: &CowVal<'_, '_>,
    re: &CowVal<'_, '_>,
    limit: Option<usize>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let re = cached_regex("findAll", string_arg("findAll", re)?)?;
    let s = string_arg("findAll", s)?;
    let found: Vec<Box<dyn Val + 'v>> = re
        .find_iter(s)
        .take(limit.unwrap_or(usize::MAX))
        .map(|m| Box::new(CelString::from(m.as_str().to_owned())) as Box<dyn Val + 'v>)
        .collect();
    Ok(CowVal::owned(CelList::from(found)))
}

/// Kubernetes `s.findAll(re)`: every non-overlapping match.
fn find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s, re] = take(args)?;
    find_all_limited(&s, &re, None)
}

/// Kubernetes `s.findAll(re, n)`: at most `n` matches; a negative `n` means all of them.
fn find_all_n<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s, re, n] = take(args)?;
    let n = *n
        .downcast_ref::<CelInt>()
        .ok_or_else(|| {
            ExecutionError::no_such_overload("findAll", vec![n.get_type().name().into()])
        })?
        .inner();
    find_all_limited(&s, &re, usize::try_from(n).ok())
}

/// The elements of a list argument, lent out (nothing is copied).
fn for_each<'b, 'v>(
    function: &str,
    list: &'b CowVal<'_, 'v>,
    mut f: impl FnMut(&'b (dyn Val + 'v)) -> Result<bool, ExecutionError>,
) -> Result<(), ExecutionError> {
    let iterable = list.as_iterable().ok_or_else(|| {
        ExecutionError::no_such_overload(function, vec![list.get_type().name().into()])
    })?;
    let mut it = iterable.iter();
    while let Some(item) = it.next() {
        if !f(item)? {
            break;
        }
    }
    Ok(())
}

/// Kubernetes `list.indexOf(x)`: the first position of an element equal to `x`, or -1.
fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position("indexOf", args, Found::First)
}

/// Kubernetes `list.lastIndexOf(x)`: the last position of an element equal to `x`, or -1.
fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position("lastIndexOf", args, Found::Last)
}

/// Which of the equal elements [`position`] tells.
#[derive(Clone, Copy, PartialEq)]
enum Found {
    First,
    Last,
}

/// The position of the `which` element of a list equal to `x` (`function(list, x)`), or -1.
fn position<'b, 'v>(
    function: &str,
    args: Vec<CowVal<'b, 'v>>,
    which: Found,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list, x] = take(args)?;
    let (mut i, mut found) = (0i64, -1i64);
    for_each(function, &list, |item| {
        if item.equals(x.as_ref()) {
            found = i;
            if which == Found::First {
                return Ok(false);
            }
        }
        i += 1;
        Ok(true)
    })?;
    Ok(CowVal::owned(CelInt::from(found)))
}

/// Orders two elements; elements without an ordering (maps, lists, mixed kinds) are an error.
fn compare(function: &str, a: &dyn Val, b: &dyn Val) -> Result<Ordering, ExecutionError> {
    let unordered = || {
        ExecutionError::function_error(
            function,
            format!(
                "cannot compare {} and {}",
                a.get_type().name(),
                b.get_type().name()
            ),
        )
    };
    a.as_comparer()
        .ok_or_else(unordered)?
        .compare(b)
        .map_err(|_| unordered())
}

/// Kubernetes `list.isSorted()`: whether the elements are in ascending order.
fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list] = take(args)?;
    let mut prev: Option<&dyn Val> = None;
    let mut sorted = true;
    for_each("isSorted", &list, |item| {
        if let Some(p) = prev
            && compare("isSorted", p, item)? == Ordering::Greater
        {
            sorted = false;
            return Ok(false);
        }
        prev = Some(item);
        Ok(true)
    })?;
    Ok(CowVal::owned(CelBool::from(sorted)))
}

/// Kubernetes `list.sum()`: the sum of numbers (or durations) of one type; `0` for an empty list.
fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list] = take(args)?;
    let mut total: Option<Box<dyn Val + 'v>> = None;
    for_each("sum", &list, |item| {
        if !matches!(
            item.get_type().kind(),
            Kind::Int | Kind::UInt | Kind::Double | Kind::Duration
        ) {
            return Err(ExecutionError::function_error(
                "sum",
                format!("cannot sum a list of {}", item.get_type().name()),
            ));
        }
        total = Some(match total.take() {
            None => item.clone_as_boxed(),
            Some(acc) => acc
                .as_adder()
                .ok_or_else(|| ExecutionError::function_error("sum", "not summable"))?
                .add(item)?
                .into_owned(),
        });
        Ok(true)
    })?;
    Ok(CowVal::Owned(
        total.unwrap_or_else(|| Box::new(CelInt::from(0))),
    ))
}

fn extreme<'b, 'v>(
    function: &'static str,
    args: Vec<CowVal<'b, 'v>>,
    keep_new: Ordering,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list] = take(args)?;
    let mut best: Option<&dyn Val> = None;
    for_each(function, &list, |item| {
        match best {
            Some(b) if compare(function, item, b)? != keep_new => {}
            _ => best = Some(item),
        }
        Ok(true)
    })?;
    match best {
        Some(b) => Ok(CowVal::Owned(b.clone_as_boxed())),
        None => Err(ExecutionError::function_error(
            function,
            format!("{function}() called on an empty list"),
        )),
    }
}

/// Kubernetes `list.min()`: the smallest element; an empty list is an error.
fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme("min", args, Ordering::Less)
}

/// Kubernetes `list.max()`: the largest element; an empty list is an error.
fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme("max", args, Ordering::Greater)
}
