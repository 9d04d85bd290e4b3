//! Field selectors (`?fieldSelector=`), a port of apimachinery `fields.ParseSelector` plus the
//! apiserver's field-label check.
//!
//! Syntax: comma-separated terms `field=value`, `field==value` or `field!=value` (AND). In a
//! value, `\,` `\=` and `\\` stand for the literal character; any other backslash sequence and
//! any bare `,` or `=` inside a value is an error. Nothing is trimmed: `a = b` names the field
//! `"a "`. The field name must be one the resource supports, otherwise the request fails with
//! `field label not supported: <field>` like kube-apiserver's answer for a CRD.
//!
//! Matching follows apimachinery: a field that has no value compares as the empty string.

use std::fmt;

use super::selector::{self, ALLOCATION_OVERHEAD, SelectorError};

/// Field selector operator. `=` and `==` are the same operator in apimachinery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldOperator {
    /// `field=value` or `field==value`: the field's value (empty when it has none) is `value`.
    Equals,
    /// `field!=value`: the field's value is anything but `value`, including empty.
    NotEquals,
}

/// One term of a [`FieldSelector`]; `value` is unescaped.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldRequirement {
    /// The dotted field path (`metadata.name`), one the resource allows.
    pub field: String,
    /// How `value` is compared.
    pub operator: FieldOperator,
    /// The value to compare with, escapes already resolved.
    pub value: String,
}

impl FieldRequirement {
    fn matches_value(&self, actual: &str) -> bool {
        match self.operator {
            FieldOperator::Equals => actual == self.value,
            FieldOperator::NotEquals => actual != self.value,
        }
    }
}

/// A parsed field selector: the AND of its terms. The empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct FieldSelector {
    terms: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// The selector that matches every object.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Parses `selector` and checks every field against `supported` (exact, case-sensitive
    /// names such as `metadata.name`). Syntax errors are reported before unsupported fields,
    /// as in kube-apiserver, where parsing precedes the field-label conversion.
    pub fn parse(selector: &str, supported: &[&str]) -> Result<Self, SelectorError> {
        let parsed = Self::parse_any_field(selector)?;
        if let Some(t) = parsed
            .terms
            .iter()
            .find(|t| !supported.contains(&t.field.as_str()))
        {
            return Err(SelectorError::new(format!(
                "field label not supported: {}",
                t.field
            )));
        }
        Ok(parsed)
    }

    /// Parses `selector` without checking its fields, as kube-apiserver's RequestInfo does to
    /// find the name a list or watch is authorized with (apimachinery `fields.ParseSelector`).
    pub fn parse_any_field(selector: &str) -> Result<Self, SelectorError> {
        selector::check_bytes("field", selector)?;
        let mut parts = split_terms(selector);
        selector::check_requirements("field", parts.iter().filter(|p| !p.is_empty()).count())?;
        // apimachinery sorts the raw terms, which fixes both term order and which error wins.
        parts.sort_unstable();
        let mut terms = Vec::new();
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((field, operator, raw_value)) = split_term(part) else {
                return Err(SelectorError::new(format!(
                    "invalid selector: '{selector}'; can't understand '{part}'"
                )));
            };
            terms.push(FieldRequirement {
                field: field.to_owned(),
                operator,
                value: unescape_value(raw_value)?,
            });
        }
        Ok(Self { terms })
    }

    /// True when the selector does not restrict anything.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Roughly the heap bytes the parsed selector holds: what a watch keeps for its life.
    pub fn heap_bytes(&self) -> usize {
        self.terms.capacity() * std::mem::size_of::<FieldRequirement>()
            + self
                .terms
                .iter()
                .map(|t| t.field.capacity() + t.value.capacity() + 2 * ALLOCATION_OVERHEAD)
                .sum::<usize>()
    }

    /// The terms in the order written: all must hold. For callers that look at what a selector
    /// asks rather than only match with it (whether a `metadata.name` term names one object).
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.terms
    }

    /// Whether an object matches, looking field values up through `get`; `None` compares as
    /// the empty string (apimachinery `fields.Set.Get`).
    pub fn matches<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.terms
            .iter()
            .all(|t| t.matches_value(get(&t.field).unwrap_or("")))
    }

    /// The value `field` must equal for an object to match (the first `=`/`==` term on it), as
    /// apimachinery `RequiresExactMatch`. `metadata.name` here turns a list or watch into a
    /// single-object request (and is the `name` kube-apiserver authorizes with).
    pub fn exact(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.operator == FieldOperator::Equals && t.field == field)
            .map(|t| t.value.as_str())
    }
}

impl fmt::Display for FieldSelector {
    /// apimachinery's canonical form, with values escaped again.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = match t.operator {
                FieldOperator::Equals => "=",
                FieldOperator::NotEquals => "!=",
            };
            write!(f, "{}{op}{}", t.field, escape_value(&t.value))?;
        }
        Ok(())
    }
}

/// Escapes `\`, `,` and `=` so the value survives [`FieldSelector::parse`]
/// (apimachinery `fields.EscapeValue`).
pub fn escape_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Splits on commas that are not escaped; escapes stay in the terms.
fn split_terms(selector: &str) -> Vec<&str> {
    if selector.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in selector.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&selector[start..i]);
            start = i + 1;
        }
    }
    terms.push(&selector[start..]);
    terms
}

/// Splits a term at the first operator, trying `!=`, then `==`, then `=` at each position.
/// The field part is taken literally (no escapes).
fn split_term(term: &str) -> Option<(&str, FieldOperator, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        if let Some(v) = rest.strip_prefix("!=") {
            return Some((&term[..i], FieldOperator::NotEquals, v));
        }
        if let Some(v) = rest.strip_prefix("==") {
            return Some((&term[..i], FieldOperator::Equals, v));
        }
        if let Some(v) = rest.strip_prefix('=') {
            return Some((&term[..i], FieldOperator::Equals, v));
        }
    }
    None
}

/// apimachinery `fields.UnescapeValue`, with its error messages (note that an unescaped
/// character is reported by its code point, e.g. `61` for `=`).
fn unescape_value(s: &str) -> Result<String, SelectorError> {
    if !s.contains(['\\', ',', '=']) {
        return Ok(s.to_owned());
    }
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            if matches!(c, '\\' | ',' | '=') {
                out.push(c);
            } else {
                return Err(SelectorError::new(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                )));
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => {
                return Err(SelectorError::new(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                )));
            }
            c => out.push(c),
        }
    }
    if in_slash {
        return Err(SelectorError::new(
            "invalid field selector: invalid escape sequence: \\",
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const SUPPORTED: &[&str] = &[
        "metadata.name",
        "metadata.namespace",
        "spec.operation",
        "status.phase",
        "a",
        "b",
    ];

    fn parse_ok(s: &str) -> FieldSelector {
        FieldSelector::parse(s, SUPPORTED).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    fn parse_err(s: &str) -> String {
        match FieldSelector::parse(s, SUPPORTED) {
            Ok(f) => panic!("{s:?} should fail, got {f}"),
            Err(e) => e.message().to_owned(),
        }
    }

    #[test]
    fn limits_are_errors_that_name_them() {
        let long = format!("a={}", "x".repeat(40_000));
        assert_eq!(
            parse_err(&long),
            "field selector is 40002 bytes long: the limit is 32768 bytes"
        );
        let many = vec!["a=x"; 65].join(",");
        assert_eq!(
            parse_err(&many),
            "field selector has 65 requirements: the limit is 64"
        );
        assert!(parse_ok(&vec!["a=x"; 64].join(",")).heap_bytes() > 64 * 2);
    }

    fn term(field: &str, operator: FieldOperator, value: &str) -> FieldRequirement {
        FieldRequirement {
            field: field.into(),
            operator,
            value: value.into(),
        }
    }

    #[test]
    fn parses_terms() {
        use FieldOperator::{Equals, NotEquals};
        // The terms of each selector: `(field, operator, value)`.
        type Terms = &'static [(&'static str, FieldOperator, &'static str)];
        let cases: &[(&str, Terms)] = &[
            ("", &[]),
            (",", &[]),
            ("status.phase=Active", &[("status.phase", Equals, "Active")]),
            (
                "status.phase==Active",
                &[("status.phase", Equals, "Active")],
            ),
            (
                "status.phase!=Active",
                &[("status.phase", NotEquals, "Active")],
            ),
            ("metadata.name=", &[("metadata.name", Equals, "")]),
            // Terms come out sorted, as apimachinery sorts the raw terms.
            (
                "status.phase=Active,metadata.namespace!=kube-system",
                &[
                    ("metadata.namespace", NotEquals, "kube-system"),
                    ("status.phase", Equals, "Active"),
                ],
            ),
            // `a=!b`: `=` comes first, so the value is `!b`.
            ("a=!b", &[("a", Equals, "!b")]),
            // Escaped separators and backslashes are part of the value.
            (r"a=x\,y", &[("a", Equals, "x,y")]),
            (r"a=x\=y,b=\\", &[("a", Equals, "x=y"), ("b", Equals, r"\")]),
            (r"a==\=\=", &[("a", Equals, "==")]),
        ];
        for (selector, want) in cases {
            let want: Vec<FieldRequirement> = want
                .iter()
                .map(|&(field, operator, value)| term(field, operator, value))
                .collect();
            assert_eq!(parse_ok(selector).requirements(), want, "{selector:?}");
        }
    }

    #[test]
    fn escapes() {
        assert_eq!(
            parse_err(r"a=x\y"),
            r"invalid field selector: invalid escape sequence: \y"
        );
        assert_eq!(
            parse_err(r"a=x\"),
            r"invalid field selector: invalid escape sequence: \"
        );
        assert_eq!(
            parse_err("a=x=y"),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(
            parse_err("a===x"),
            "invalid field selector: unescaped character in value: 61"
        );
        let sel = parse_ok(r"a=x\,y\=z\\w");
        assert_eq!(sel.to_string(), r"a=x\,y\=z\\w");
        assert_eq!(parse_ok(&sel.to_string()), sel);
        assert_eq!(escape_value(r"a,b=c\d"), r"a\,b\=c\\d");
    }

    #[test]
    fn syntax_errors() {
        assert_eq!(
            parse_err("status.phase"),
            "invalid selector: 'status.phase'; can't understand 'status.phase'"
        );
        assert_eq!(
            parse_err("a=b,xyz"),
            "invalid selector: 'a=b,xyz'; can't understand 'xyz'"
        );
        // A syntax error wins over an unsupported field.
        assert_eq!(
            parse_err("spec.foo=1,xyz"),
            "invalid selector: 'spec.foo=1,xyz'; can't understand 'xyz'"
        );
    }

    #[test]
    fn unsupported_fields() {
        assert_eq!(
            parse_err("spec.foo=bar"),
            "field label not supported: spec.foo"
        );
        assert_eq!(
            parse_err("status.phase = Active"),
            "field label not supported: status.phase "
        );
        assert_eq!(parse_err("=x"), "field label not supported: ");
        assert_eq!(
            FieldSelector::parse("metadata.name=x", &[])
                .unwrap_err()
                .message(),
            "field label not supported: metadata.name"
        );
        // Sorted terms: the first unsupported one in sorted order is reported.
        assert_eq!(parse_err("z.z=1,y.y=2"), "field label not supported: y.y");
    }

    #[test]
    fn matching() {
        let obj: BTreeMap<&str, &str> = [
            ("metadata.name", "vm-a-migrating"),
            ("metadata.namespace", "ns1"),
            ("status.phase", "Active"),
        ]
        .into_iter()
        .collect();
        let m = |s: &str| parse_ok(s).matches(|f| obj.get(f).copied());
        assert!(m(""));
        assert!(m("status.phase=Active"));
        assert!(!m("status.phase=Completed"));
        assert!(m("status.phase!=Completed"));
        assert!(m("status.phase=Active,metadata.namespace=ns1"));
        assert!(!m("status.phase=Active,metadata.namespace=ns2"));
        // An absent field compares as "".
        assert!(m("spec.operation="));
        assert!(m("spec.operation!=x"));
        assert!(!m("spec.operation=x"));
    }

    #[test]
    fn exact_names_the_required_value() {
        let s = parse_ok("metadata.name=foo,status.phase!=Completed");
        assert_eq!(s.exact("metadata.name"), Some("foo"));
        assert_eq!(s.exact("status.phase"), None);
        assert_eq!(s.exact("metadata.namespace"), None);
        assert!(FieldSelector::everything().is_empty());
    }

    #[test]
    fn non_ascii_is_literal() {
        assert_eq!(
            parse_ok("a=ä,b!=日本").requirements(),
            &[
                term("a", FieldOperator::Equals, "ä"),
                term("b", FieldOperator::NotEquals, "日本"),
            ]
        );
    }
}
