//! Text from the cluster made safe to print on a terminal. Object data (messages, owner kinds
//! and names, labels) and server messages can carry escape sequences that move the cursor,
//! clear lines or retitle the window: printed raw, they could make a list say what it does not,
//! in front of the person deciding whether to drain a node. Every human output prints only
//! what is left after [`text`]; `-o json` and `-o yaml` print the object as it is.

use serde_json::Value;

/// `s` without escape sequences (CSI, OSC, DCS and the others, introduced by ESC or by their
/// C1 form) and without control characters but newline and tab: C0, DEL and C1 are dropped.
pub fn text(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_owned();
    }
    // C1 controls as their 7-bit ESC forms (CSI U+009B is ESC [), so that the parser drops
    // the sequences they start as well.
    let mut seven_bit = String::with_capacity(s.len());
    for c in s.chars() {
        match u32::from(c) {
            c1 @ 0x80..=0x9f => {
                seven_bit.push('\u{1b}');
                seven_bit.push(char::from((c1 - 0x40) as u8));
            }
            _ => seven_bit.push(c),
        }
    }
    anstream::adapter::strip_str(&seven_bit)
        .to_string()
        .chars()
        // C0 (but newline and tab), DEL and C1 left outside of sequences.
        .filter(|c| !c.is_control() || matches!(c, '\n' | '\t'))
        .collect()
}

/// [`text`] on one line: newlines and tabs become spaces (for names, kinds, labels: what
/// tables and trees print in a cell).
pub fn line(s: &str) -> String {
    text(s).replace(['\n', '\t'], " ")
}

/// `v` with [`line`] applied to every string in it, keys included: what the human outputs read.
pub fn value(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(line(s)),
        Value::Array(items) => Value::Array(items.iter().map(value).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (line(k), value(v))).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_and_controls_are_dropped_whole() {
        for (raw, clean) in [
            ("plain text, ünïcödé ✓", "plain text, ünïcödé ✓"),
            ("line one\nline two\tcell", "line one\nline two\tcell"),
            ("\u{1b}[2J\u{1b}[Hcleared", "cleared"),
            ("red \u{1b}[31mRED\u{1b}[0m", "red RED"),
            ("\u{1b}]0;window title\u{7}after", "after"),
            ("\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\", "link"),
            ("\u{9b}31mC1 CSI", "C1 CSI"),
            ("\u{9d}0;title\u{9c}C1 OSC", "C1 OSC"),
            ("over\rwrite\u{8}\u{7f}\u{0}\u{85}\u{c}!", "overwrite!"),
            ("\u{1b}Pdevice control\u{1b}\\ok", "ok"),
            ("\u{1b}7saved\u{1b}8", "saved"),
        ] {
            assert_eq!(text(raw), clean, "{raw:?}");
        }
    }

    #[test]
    fn every_string_of_an_object_is_cleaned_keys_included() {
        let v = serde_json::json!({"a\u{1b}[1m": ["x\u{7}", 1, {"m": "\u{9b}2Jy\nz"}], "n": null});
        assert_eq!(
            value(&v),
            serde_json::json!({"a": ["x", 1, {"m": "y z"}], "n": null})
        );
    }
}
