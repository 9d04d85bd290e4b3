//! Go's `%q` string quoting.
//!
//! apimachinery builds many client-visible messages with `%q` (`"x" not found`,
//! `Invalid value: "a b"`, `User "bob" cannot list ...`). Reproducing its escaping keeps those
//! messages identical to what kube-apiserver sends for the same input.

use std::fmt::Write as _;

/// Quotes `s` the way Go's `strconv.Quote` does: double quotes, backslash escapes for `"` and
/// `\`, the short C escapes, `\xNN` for other ASCII control bytes and `\uNNNN`/`\UNNNNNNNN` for
/// other non-printable characters; printable Unicode is kept as is.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() || c == '\u{feff}' => {
                if (c as u32) < 0x10000 {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                } else {
                    let _ = write!(out, "\\U{:08x}", c as u32);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::go_quote;

    #[test]
    fn quotes_like_go() {
        assert_eq!(go_quote("foo"), r#""foo""#);
        assert_eq!(go_quote(""), r#""""#);
        assert_eq!(go_quote(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(go_quote("a\nb\tc"), r#""a\nb\tc""#);
        assert_eq!(go_quote("\u{0}\u{1b}\u{7f}"), r#""\x00\x1b\x7f""#);
        assert_eq!(go_quote("\u{85}"), r#""\u0085""#);
        assert_eq!(go_quote("ä日本"), "\"ä日本\"");
    }
}
