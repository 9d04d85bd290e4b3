//! Label selectors (`?labelSelector=`), a port of apimachinery `labels.Parse`.
//!
//! kubectl sends `-l` verbatim and does no client-side filtering, so the server must accept
//! exactly the grammar kube-apiserver accepts, reject what it rejects (with the same messages),
//! and match with the same semantics — including the less obvious ones: `!=` and `notin` match
//! objects without the key, `k in ()` means "k is the empty string", and `>`/`<` never match a
//! label whose value is not an integer.
//!
//! Grammar (comma = AND):
//!
//! ```text
//! <selector>    ::= <requirement> | <requirement> "," <selector>
//! <requirement> ::= [!] KEY [ <set-based> | <exact> | <ordinal> ]
//! <set-based>   ::= ("in" | "notin") "(" VALUE { "," VALUE } ")"
//! <exact>       ::= ("=" | "==" | "!=") VALUE
//! <ordinal>     ::= (">" | "<") INTEGER
//! ```

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use super::goquote::go_quote;
use super::selector::{self, ALLOCATION_OVERHEAD, SelectorError};
use super::validation::{is_qualified_name, is_valid_label_value};

/// A label selector operator, with apimachinery's `selection.Operator` spelling from
/// [`Operator::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `k=v`
    Equals,
    /// `k==v`
    DoubleEquals,
    /// `k!=v` (also matches when `k` is absent)
    NotEquals,
    /// `k in (a,b)`
    In,
    /// `k notin (a,b)` (also matches when `k` is absent)
    NotIn,
    /// `k`
    Exists,
    /// `!k`
    DoesNotExist,
    /// `k>N`
    GreaterThan,
    /// `k<N`
    LessThan,
}

impl Operator {
    /// apimachinery's string for the operator (`selection.Operator`).
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => "in",
            Operator::NotIn => "notin",
            Operator::Exists => "exists",
            Operator::DoesNotExist => "!",
            Operator::GreaterThan => "gt",
            Operator::LessThan => "lt",
        }
    }
}

/// The values of a [`Requirement`]: a hash set, so that `in` and `notin` test a label in
/// constant time however many values the selector lists (matching runs for every watch on
/// every event). Iterated, printed and hashed in sorted order, as apimachinery keeps them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Values(HashSet<String>);

impl Values {
    fn contains(&self, value: &str) -> bool {
        self.0.contains(value)
    }

    /// The values, sorted.
    pub fn sorted(&self) -> Vec<&str> {
        let mut values: Vec<&str> = self.0.iter().map(String::as_str).collect();
        values.sort_unstable();
        values
    }

    /// The only value, when there is exactly one.
    fn single(&self) -> Option<&str> {
        match self.0.len() {
            1 => self.0.iter().next().map(String::as_str),
            _ => None,
        }
    }

    /// Roughly the heap bytes the set holds.
    fn heap_bytes(&self) -> usize {
        self.0.capacity() * (std::mem::size_of::<String>() + 1)
            + ALLOCATION_OVERHEAD
            + self
                .0
                .iter()
                .map(|v| v.capacity() + ALLOCATION_OVERHEAD)
                .sum::<usize>()
    }
}

impl Hash for Values {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.sorted().hash(state);
    }
}

impl FromIterator<String> for Values {
    fn from_iter<I: IntoIterator<Item = String>>(iter: I) -> Self {
        Values(iter.into_iter().collect())
    }
}

/// One requirement of a [`LabelSelector`]. `values` are unique, as apimachinery stores them;
/// empty for `Exists`/`DoesNotExist`, exactly one for the other non-set operators.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Values,
}

impl Requirement {
    /// The label key the requirement tests.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// How the key's value is tested.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values to test against: sorted and unique.
    pub fn values(&self) -> Vec<&str> {
        self.values.sorted()
    }

    /// Whether the labels, looked up through `get`, satisfy this requirement
    /// (apimachinery `Requirement.Matches`).
    pub fn matches_with<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        let has_value = |v: &str| self.values.contains(v);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                get(&self.key).is_some_and(has_value)
            }
            Operator::NotIn | Operator::NotEquals => get(&self.key).is_none_or(|v| !has_value(v)),
            Operator::Exists => get(&self.key).is_some(),
            Operator::DoesNotExist => get(&self.key).is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(label) = get(&self.key).and_then(|v| v.parse::<i64>().ok()) else {
                    return false;
                };
                let Some(bound) = self.values.single() else {
                    return false;
                };
                let Ok(bound) = bound.parse::<i64>() else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    label > bound
                } else {
                    label < bound
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    /// apimachinery's canonical form (`Requirement.String`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let op = match self.operator {
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => " in ",
            Operator::NotIn => " notin ",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
        };
        f.write_str(op)?;
        let set = matches!(self.operator, Operator::In | Operator::NotIn);
        if set {
            f.write_str("(")?;
        }
        f.write_str(&self.values.sorted().join(","))?;
        if set {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// A parsed label selector: the AND of its requirements, sorted by key. The empty selector
/// matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// The selector that matches every object.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Parses a selector with the full `labels.Parse` grammar and validation. Empty (or
    /// whitespace-only) input gives the selector that matches everything. A selector beyond
    /// the [limits](selector::MAX_BYTES) is an error that names the limit.
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        selector::check_bytes("label", selector)?;
        let mut parser = Parser::new(selector);
        let mut requirements = parser.parse().map_err(SelectorError::new)?;
        selector::check_requirements("label", requirements.len())?;
        if let Some(r) = requirements
            .iter()
            .find(|r| r.values.0.len() > selector::MAX_VALUES)
        {
            return Err(SelectorError::new(format!(
                "label selector requirement on {:?} has {} values: the limit is {}",
                r.key,
                r.values.0.len(),
                selector::MAX_VALUES
            )));
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self { requirements })
    }

    /// Roughly the heap bytes the parsed selector holds: what a watch keeps for its life.
    pub fn heap_bytes(&self) -> usize {
        self.requirements.capacity() * std::mem::size_of::<Requirement>()
            + self
                .requirements
                .iter()
                .map(|r| r.key.capacity() + 2 * ALLOCATION_OVERHEAD + r.values.heap_bytes())
                .sum::<usize>()
    }

    /// True when the selector does not restrict anything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, sorted by key as apimachinery keeps them: all must hold. For callers
    /// that look at what a selector asks rather than only match with it.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether an object with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_with(|k| labels.get(k).map(String::as_str))
    }

    /// Whether an object is selected, looking its labels up through `get`.
    pub fn matches_with<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| r.matches_with(&get))
    }

    /// The single value `key` must have for an object to match (`=`, `==`, or `in` with one
    /// value), as apimachinery `RequiresExactMatch`; useful to narrow an index lookup.
    pub fn requires_exact_match(&self, key: &str) -> Option<&str> {
        let r = self.requirements.iter().find(|r| r.key == key)?;
        match r.operator {
            Operator::Equals | Operator::DoubleEquals | Operator::In => r.values.single(),
            _ => None,
        }
    }
}

impl fmt::Display for LabelSelector {
    /// apimachinery's canonical form: requirements joined by `,`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

// ---------------------------------------------------------------------------------------------
// Lexer: a byte-level port of apimachinery's, so that token boundaries (and therefore error
// messages) are identical for any input.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn literal_token(s: &[u8]) -> Option<Token> {
    Some(match s {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"in" => Token::In,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"notin" => Token::NotIn,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(ch: u8) -> bool {
    matches!(ch, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special_symbol(ch: u8) -> bool {
    matches!(ch, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

fn bytes_to_string(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    /// Returns the next byte, or 0 at the end (a NUL byte also reads as 0, as in Go).
    fn read(&mut self) -> u8 {
        if self.pos < self.s.len() {
            let b = self.s[self.pos];
            self.pos += 1;
            b
        } else {
            0
        }
    }

    fn unread(&mut self) {
        self.pos -= 1;
    }

    fn scan_id_or_keyword(&mut self) -> (Token, String) {
        let mut buffer = Vec::new();
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if is_special_symbol(ch) || is_whitespace(ch) {
                self.unread();
                break;
            }
            buffer.push(ch);
        }
        match literal_token(&buffer) {
            Some(tok) => (tok, bytes_to_string(&buffer)),
            None => (Token::Identifier, bytes_to_string(&buffer)),
        }
    }

    /// Longest run of special symbols that still forms a known operator (`!=`, `==`, ...).
    fn scan_special_symbol(&mut self) -> (Token, String) {
        let mut last: Option<(Token, usize)> = None;
        let mut buffer = Vec::new();
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if !is_special_symbol(ch) {
                self.unread();
                break;
            }
            buffer.push(ch);
            if let Some(tok) = literal_token(&buffer) {
                last = Some((tok, buffer.len()));
            } else if last.is_some() {
                self.unread();
                break;
            }
        }
        match last {
            Some((tok, len)) => (tok, bytes_to_string(&buffer[..len])),
            None => (
                Token::Error,
                format!(
                    "error expected: keyword found '{}'",
                    bytes_to_string(&buffer)
                ),
            ),
        }
    }

    fn lex(&mut self) -> (Token, String) {
        let mut ch = self.read();
        while is_whitespace(ch) {
            ch = self.read();
        }
        if ch == 0 {
            (Token::EndOfString, String::new())
        } else if is_special_symbol(ch) {
            self.unread();
            self.scan_special_symbol()
        } else {
            self.unread();
            self.scan_id_or_keyword()
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parser: recursive descent over the scanned tokens, as apimachinery's `Parser`.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    /// `in`/`notin` read as plain identifiers (so `in in (in)` is a valid selector).
    Values,
}

struct Parser {
    items: Vec<(Token, String)>,
    position: usize,
}

const BINARY_OPERATORS: &str = "in, notin, =, ==, !=, gt, lt";

impl Parser {
    fn new(selector: &str) -> Self {
        let mut lexer = Lexer {
            s: selector.as_bytes(),
            pos: 0,
        };
        let mut items = Vec::new();
        loop {
            let (tok, lit) = lexer.lex();
            items.push((tok, lit));
            if tok == Token::EndOfString {
                break;
            }
        }
        Self { items, position: 0 }
    }

    fn in_context(tok: Token, ctx: Context) -> Token {
        match (ctx, tok) {
            (Context::Values, Token::In | Token::NotIn) => Token::Identifier,
            _ => tok,
        }
    }

    fn lookahead(&self, ctx: Context) -> (Token, &str) {
        let (tok, lit) = &self.items[self.position.min(self.items.len() - 1)];
        (Self::in_context(*tok, ctx), lit)
    }

    fn consume(&mut self, ctx: Context) -> (Token, String) {
        let idx = self.position.min(self.items.len() - 1);
        self.position += 1;
        let (tok, lit) = &self.items[idx];
        (Self::in_context(*tok, ctx), lit.clone())
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(r);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => {
                            return Err(format!("found '{l}', expected: ',' or 'end of string'"));
                        }
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, operator) = self.parse_key_and_infer_operator()?;
        if let Some(op @ (Operator::Exists | Operator::DoesNotExist)) = operator {
            return new_requirement(key, op, Vec::new());
        }
        let operator = self.parse_operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        new_requirement(key, operator, values)
    }

    /// Reads `[!] KEY` and infers `Exists` when nothing but `,` or the end follows.
    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let mut operator = None;
        let (mut tok, mut literal) = self.consume(Context::Values);
        if tok == Token::DoesNotExist {
            operator = Some(Operator::DoesNotExist);
            (tok, literal) = self.consume(Context::Values);
        }
        if tok != Token::Identifier {
            return Err(format!("found '{literal}', expected: identifier"));
        }
        let errs = is_qualified_name(&literal);
        if !errs.is_empty() {
            // apimachinery validates the key with a nil field path, hence "<nil>".
            return Err(invalid_value("<nil>", &literal, &errs.join("; ")));
        }
        let (next, _) = self.lookahead(Context::Values);
        if (next == Token::EndOfString || next == Token::Comma) && operator.is_none() {
            operator = Some(Operator::Exists);
        }
        Ok((literal, operator))
    }

    fn parse_operator(&mut self) -> Result<Operator, String> {
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        Ok(match tok {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => return Err(format!("found '{lit}', expected: {BINARY_OPERATORS}")),
        })
    }

    /// `( v1, v2, ... )`; `()` is the set holding only the empty string.
    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        let lit = lit.to_owned();
        match tok {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                let (tok, _) = self.consume(Context::Values);
                if tok != Token::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    /// A comma-separated list of possibly empty identifiers, up to (not including) `)`.
    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, String> {
        let mut set = std::collections::BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Token::Identifier => {
                    set.insert(lit);
                    let (tok2, lit2) = self.lookahead(Context::Values);
                    match tok2 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(set.into_iter().collect()),
                        _ => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if set.is_empty() {
                        set.insert(String::new()); // "(,"
                    }
                    let (tok2, _) = self.lookahead(Context::Values);
                    if tok2 == Token::ClosedPar {
                        set.insert(String::new()); // ",)"
                        return Ok(set.into_iter().collect());
                    }
                    if tok2 == Token::Comma {
                        self.consume(Context::Values);
                        set.insert(String::new()); // ",,"
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    /// The value after `=`, `==`, `!=`, `>` or `<`; missing means the empty string.
    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.lookahead(Context::Values);
        if tok == Token::EndOfString || tok == Token::Comma {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Context::Values);
        if tok == Token::Identifier {
            Ok(vec![lit])
        } else {
            Err(format!("found '{lit}', expected: identifier"))
        }
    }
}

/// apimachinery `NewRequirement` validation of the values (the key was already validated):
/// `>`/`<` need an integer, and every value must be a valid label value. Several problems are
/// reported together as an aggregate `[a, b]`, as `field.ErrorList.ToAggregate` does.
fn new_requirement(
    key: String,
    operator: Operator,
    values: Vec<String>,
) -> Result<Requirement, String> {
    let mut errs: Vec<String> = Vec::new();
    // The parser always yields exactly one value for `>`/`<` and at least one for sets, so
    // apimachinery's value-count checks cannot fail here.
    if matches!(operator, Operator::GreaterThan | Operator::LessThan) {
        for (i, v) in values.iter().enumerate() {
            if v.parse::<i64>().is_err() {
                errs.push(invalid_value(
                    &format!("values[{i}]"),
                    v,
                    "for 'Gt', 'Lt' operators, the value must be an integer",
                ));
            }
        }
    }
    for (i, v) in values.iter().enumerate() {
        let value_errs = is_valid_label_value(v);
        if !value_errs.is_empty() {
            errs.push(invalid_value(
                &format!("values[{i}][{key}]"),
                v,
                &value_errs.join("; "),
            ));
        }
    }
    if !errs.is_empty() {
        return Err(aggregate(errs));
    }
    Ok(Requirement {
        key,
        operator,
        values: values.into_iter().collect(),
    })
}

/// `field.Invalid(path, value, detail).Error()`.
fn invalid_value(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {}: {detail}", go_quote(value))
}

/// `utilerrors.Aggregate.Error()`: one message as is, several deduplicated inside `[...]`.
fn aggregate(errs: Vec<String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errs {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    if seen.len() == 1 {
        seen.remove(0)
    } else {
        format!("[{}]", seen.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn parse_ok(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    fn parse_err(s: &str) -> String {
        match LabelSelector::parse(s) {
            Ok(sel) => panic!("{s:?} should fail, parsed as {sel}"),
            Err(e) => e.message().to_owned(),
        }
    }

    fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
        Requirement {
            key: key.into(),
            operator: op,
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn limits_are_errors_that_name_them() {
        let long = format!("k in ({})", vec!["v"; 20_000].join(","));
        assert_eq!(
            parse_err(&long),
            "label selector is 40006 bytes long: the limit is 32768 bytes"
        );
        let many: Vec<String> = (0..65).map(|i| format!("k{i}")).collect();
        assert_eq!(
            parse_err(&many.join(",")),
            "label selector has 65 requirements: the limit is 64"
        );
        let values: Vec<String> = (0..257).map(|i| format!("v{i}")).collect();
        assert_eq!(
            parse_err(&format!("k notin ({})", values.join(","))),
            "label selector requirement on \"k\" has 257 values: the limit is 256"
        );
        let values: Vec<String> = (0..256).map(|i| format!("v{i}")).collect();
        let at_limit = parse_ok(&format!("k notin ({})", values.join(",")));
        assert!(
            at_limit.heap_bytes() > 256 * 24,
            "{}",
            at_limit.heap_bytes()
        );
        assert!(!at_limit.matches(&labels(&[("k", "v255")])));
        assert!(at_limit.matches(&labels(&[("k", "v256")])));
    }

    #[test]
    fn good_strings() {
        for s in [
            "x=a,y=b,z=c",
            "",
            "   ",
            "x!=a,y=b",
            "x=",
            "x= ",
            "x=,z= ",
            "x= ,z= ",
            "!x",
            "x>1",
            "x>1,z<5",
            "x in (a)",
            "x in ()",
            "x notin ( )",
            "in",
            "in in (in)",
            "notin=in",
            "in=notin",
            "a.b/c=d",
            "app.kubernetes.io/name in (web, db)",
            "ifo.kubevirt.io/operation==Migrating",
        ] {
            parse_ok(s);
        }
    }

    #[test]
    fn bad_strings() {
        for s in [
            "x=a||y=b",
            "x==a==b",
            "!x=a",
            "x<a",
            "x>1.1",
            "x>1,z<5.5",
            "x>-1", // "-1" is an integer but not a valid label value
            "x<+7",
            "!x=",
            "x,,y",
            ",x,y",
            "x nott in (y)",
            "a in (xyz),",
            "a in (xyz)b notin ()",
            "a in (xyz abc)",
            "a notin(",
            "a (",
            "(",
            "x in (",
            "x in (a",
            "x in (a,",
            "x in",
            "x ~ a",
            "=a",
            "!",
            "x=a b",
            "-x",
            "x=a,",
        ] {
            parse_err(s);
        }
    }

    #[test]
    fn set_selector_parser_cases() {
        let cases: Vec<(&str, Vec<Requirement>)> = vec![
            ("\rx", vec![req("x", Operator::Exists, &[])]),
            (
                "this-is-a-dns.domain.com/key-with-dash",
                vec![req(
                    "this-is-a-dns.domain.com/key-with-dash",
                    Operator::Exists,
                    &[],
                )],
            ),
            (
                "this-is-another-dns.domain.com/key-with-dash in (so,what)",
                vec![req(
                    "this-is-another-dns.domain.com/key-with-dash",
                    Operator::In,
                    &["so", "what"],
                )],
            ),
            (
                "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
                vec![req(
                    "0.1.2.domain/99",
                    Operator::NotIn,
                    &["10.10.100.1", "tick.tack.clock"],
                )],
            ),
            ("foo  in\t (abc)", vec![req("foo", Operator::In, &["abc"])]),
            ("x notin\n (abc)", vec![req("x", Operator::NotIn, &["abc"])]),
            (
                "x  notin\t\t(abc,def)",
                vec![req("x", Operator::NotIn, &["abc", "def"])],
            ),
            ("x in (abc,)", vec![req("x", Operator::In, &["", "abc"])]),
            ("x in ()", vec![req("x", Operator::In, &[""])]),
            (
                "x notin (abc,,def),bar,z in (),w",
                vec![
                    req("bar", Operator::Exists, &[]),
                    req("w", Operator::Exists, &[]),
                    req("x", Operator::NotIn, &["", "abc", "def"]),
                    req("z", Operator::In, &[""]),
                ],
            ),
            (
                "x,y in (a)",
                vec![
                    req("x", Operator::Exists, &[]),
                    req("y", Operator::In, &["a"]),
                ],
            ),
            ("x=a", vec![req("x", Operator::Equals, &["a"])]),
            ("x==a", vec![req("x", Operator::DoubleEquals, &["a"])]),
            ("x>1", vec![req("x", Operator::GreaterThan, &["1"])]),
            ("x<7", vec![req("x", Operator::LessThan, &["7"])]),
            (
                "x=a,y!=b",
                vec![
                    req("x", Operator::Equals, &["a"]),
                    req("y", Operator::NotEquals, &["b"]),
                ],
            ),
            ("x notin ( )", vec![req("x", Operator::NotIn, &[""])]),
            ("x notin (, a)", vec![req("x", Operator::NotIn, &["", "a"])]),
            ("a ", vec![req("a", Operator::Exists, &[])]),
            (
                "a in (x,y,notin, z,in)",
                vec![req("a", Operator::In, &["in", "notin", "x", "y", "z"])],
            ),
            ("x=", vec![req("x", Operator::Equals, &[""])]),
            ("!x", vec![req("x", Operator::DoesNotExist, &[])]),
            ("in in (in)", vec![req("in", Operator::In, &["in"])]),
            ("x in (b,a,b)", vec![req("x", Operator::In, &["a", "b"])]),
        ];
        for (input, want) in cases {
            assert_eq!(parse_ok(input).requirements(), want.as_slice(), "{input:?}");
        }
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            parse_err("x ~ a"),
            "unable to parse requirement: found '~', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(
            parse_err("app:monolith"),
            "unable to parse requirement: <nil>: Invalid value: \"app:monolith\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        );
        assert_eq!(
            parse_err("app.kubernetes_io/name=vault"),
            "unable to parse requirement: <nil>: Invalid value: \"app.kubernetes_io/name\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        );
        assert_eq!(
            parse_err("env=a|b"),
            "unable to parse requirement: values[0][env]: Invalid value: \"a|b\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        );
        assert_eq!(
            parse_err("x<a"),
            "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
        let both = parse_err("x in (-a,-b)");
        assert!(
            both.starts_with("unable to parse requirement: [values[0][x]: Invalid value: \"-a\": "),
            "{both}"
        );
        assert!(
            both.contains(", values[1][x]: Invalid value: \"-b\": "),
            "{both}"
        );
        assert!(both.ends_with(']'), "{both}");
        // Not a requirement error: the requirement `!x` parsed, then `=` was unexpected.
        assert_eq!(
            parse_err("!x=a"),
            "found '=', expected: ',' or 'end of string'"
        );
        assert_eq!(
            parse_err("x,,y"),
            "found ',', expected: identifier after ','"
        );
        assert_eq!(
            parse_err("x=a,"),
            "found '', expected: identifier after ','"
        );
        assert_eq!(
            parse_err("("),
            "found '(', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            parse_err("a in (xyz)b notin ()"),
            "found 'b', expected: ',' or 'end of string'"
        );
        assert_eq!(
            parse_err("x in (a"),
            "unable to parse requirement: found '', expected: ',' or ')'"
        );
        assert_eq!(
            parse_err("a in (xyz abc)"),
            "unable to parse requirement: found 'abc', expected: ',' or ')'"
        );
        assert_eq!(
            parse_err("x in ("),
            "unable to parse requirement: found '', expected: ',', ')' or identifier"
        );
        assert_eq!(
            parse_err("x in"),
            "unable to parse requirement: found '' expected: '('"
        );
        assert_eq!(
            parse_err("x in (a,="),
            "unable to parse requirement: found '=', expected: ',', or identifier"
        );
        assert_eq!(
            parse_err("x=(a)"),
            "unable to parse requirement: found '(', expected: identifier"
        );
        assert_eq!(
            parse_err("!"),
            "unable to parse requirement: found '', expected: identifier"
        );
    }

    #[test]
    fn empty_value_forms() {
        // `x==` is `x == ""`, not an error: a missing value is the empty string.
        assert_eq!(
            parse_ok("x==").requirements(),
            &[req("x", Operator::DoubleEquals, &[""])]
        );
        assert!(parse_ok("").is_empty());
        assert!(parse_ok(" \t\r\n").is_empty());
        assert!(!parse_ok("x").is_empty());
    }

    #[test]
    fn lexer_splits_operators_like_apimachinery() {
        // What the parser reads, without the end of the string it always ends with.
        let tokens = |s: &str| {
            let mut items = Parser::new(s).items;
            assert_eq!(
                items.pop().map(|(token, _)| token),
                Some(Token::EndOfString)
            );
            items
        };
        // Each token as `Kind(literal)`, in the order the lexer yields them.
        let cases = [
            (
                "x==a==b",
                "Identifier(x) DoubleEquals(==) Identifier(a) DoubleEquals(==) Identifier(b)",
            ),
            ("!=!=", "NotEquals(!=) NotEquals(!=)"),
            (
                "===,(!",
                "DoubleEquals(==) Equals(=) Comma(,) OpenPar(() DoesNotExist(!)",
            ),
            (
                "x in (a) notin",
                "Identifier(x) In(in) OpenPar(() Identifier(a) ClosedPar()) NotIn(notin)",
            ),
        ];
        for (input, want) in cases {
            let got: Vec<String> = tokens(input)
                .into_iter()
                .map(|(token, literal)| format!("{token:?}({literal})"))
                .collect();
            assert_eq!(got.join(" "), want, "tokens of {input:?}");
        }
    }

    #[test]
    fn matching() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5"), ("s", "five")]);
        let m = |s: &str| parse_ok(s).matches(&l);
        assert!(m(""));
        assert!(m("app=web"));
        assert!(m("app==web"));
        assert!(!m("app=db"));
        assert!(m("app!=db"));
        assert!(!m("app!=web"));
        assert!(m("missing!=x"), "!= matches when the key is absent");
        assert!(!m("missing=x"));
        assert!(m("app in (db,web)"));
        assert!(!m("app in (db)"));
        assert!(!m("missing in (x)"));
        assert!(m("app notin (db)"));
        assert!(!m("app notin (web)"));
        assert!(
            m("missing notin (x)"),
            "notin matches when the key is absent"
        );
        assert!(m("app"));
        assert!(!m("missing"));
        assert!(m("!missing"));
        assert!(!m("!app"));
        assert!(m("n>4"));
        assert!(!m("n>5"));
        assert!(m("n<6"));
        assert!(!m("n<5"));
        assert!(!m("s>1"), "non-integer label value never matches >");
        assert!(!m("s<1"), "non-integer label value never matches <");
        assert!(!m("missing>1"));
        assert!(!m("missing<1"));
        assert!(m("app=web,tier=front"));
        assert!(!m("app=web,tier=back"));
        assert!(m("app=web,!missing,n>1"));
        // `in ()` selects objects whose label is present and empty.
        let e = labels(&[("x", "")]);
        assert!(parse_ok("x in ()").matches(&e));
        assert!(!parse_ok("x in ()").matches(&l));
        assert!(parse_ok("x=").matches(&e));
        assert!(parse_ok("x").matches(&e));
    }

    #[test]
    fn matching_with_lookup() {
        let sel = parse_ok("a=1,!b");
        assert!(sel.matches_with(|k| (k == "a").then_some("1")));
        assert!(!sel.matches_with(|k| Some(if k == "a" { "1" } else { "x" })));
    }

    #[test]
    fn display_is_canonical() {
        assert_eq!(
            parse_ok("z in (b,a),  !y, x==1, w!=2, v>3, u<4, t, s notin (q)").to_string(),
            "s notin (q),t,u<4,v>3,w!=2,x==1,!y,z in (a,b)"
        );
        assert_eq!(parse_ok("x in ()").to_string(), "x in ()");
        assert_eq!(parse_ok("").to_string(), "");
        let s = parse_ok("b=1,a in (x,y)");
        assert_eq!(parse_ok(&s.to_string()), s);
    }

    #[test]
    fn exact_match() {
        let s = parse_ok("a=1,b in (2),c in (3,4),d!=5,e");
        assert_eq!(s.requires_exact_match("a"), Some("1"));
        assert_eq!(s.requires_exact_match("b"), Some("2"));
        assert_eq!(s.requires_exact_match("c"), None);
        assert_eq!(s.requires_exact_match("d"), None);
        assert_eq!(s.requires_exact_match("e"), None);
        assert_eq!(s.requires_exact_match("f"), None);
    }

    #[test]
    fn operator_strings() {
        assert_eq!(Operator::GreaterThan.as_str(), "gt");
        assert_eq!(Operator::DoesNotExist.as_str(), "!");
    }

    #[test]
    fn from_str_and_everything() {
        let s: LabelSelector = "a=b".parse().unwrap();
        assert_eq!(s.requirements().len(), 1);
        assert!(LabelSelector::everything().is_empty());
        assert!(LabelSelector::everything().matches(&BTreeMap::new()));
    }
}
