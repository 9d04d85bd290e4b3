//! The `Warning` headers the server sent with its answers. The live API sends one for each rule
//! target it is not watching (see the server's `api::freshness`): the answer may then be incomplete,
//! so `check` and `wait` must not say "nothing in flight" on it.

use std::sync::{Arc, Mutex};

use kube::client::DynBody;
use tower::util::MapResponseLayer;

use ifo_model::INCOMPLETE_WARNING as INCOMPLETE;

type Response = http::Response<Box<DynBody>>;

/// Warnings seen on any response of one client, in order, each once.
#[derive(Clone, Debug, Default)]
pub struct Warnings {
    seen: Arc<Mutex<Seen>>,
}

#[derive(Debug, Default)]
struct Seen {
    texts: Vec<String>,
    /// How many of `texts` [`Warnings::new_ones`] has handed out.
    shown: usize,
}

impl Warnings {
    /// A layer for the client's service stack that records every response's warnings.
    pub fn layer(&self) -> MapResponseLayer<impl Fn(Response) -> Response + Clone + use<>> {
        let warnings = self.clone();
        MapResponseLayer::new(move |response: Response| {
            for value in response.headers().get_all(http::header::WARNING) {
                if let Ok(value) = value.to_str() {
                    // Printed as they come: never with the control characters a quoted
                    // warning can spell out.
                    warnings.record(crate::sanitize::text(&parse(value)));
                }
            }
            response
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn record(&self, text: String) {
        let mut seen = self.lock();
        if !seen.texts.contains(&text) {
            seen.texts.push(text);
        }
    }

    /// Warnings not handed out before, to print as they come (`Warning: ...`, as kubectl does).
    pub fn new_ones(&self) -> Vec<String> {
        let mut seen = self.lock();
        let new = seen.texts[seen.shown..].to_vec();
        seen.shown = seen.texts.len();
        new
    }

    /// Every warning saying the answer may be incomplete.
    pub fn incomplete(&self) -> Vec<String> {
        self.lock()
            .texts
            .iter()
            .filter(|t| t.starts_with(INCOMPLETE))
            .cloned()
            .collect()
    }

    /// Prints the new warnings on stderr.
    pub fn print_new(&self) {
        for text in self.new_ones() {
            eprintln!("Warning: {text}");
        }
    }
}

/// The text of a warning value (`299 - "text"`, RFC 7234); anything else as it is.
fn parse(value: &str) -> String {
    let Some(quoted) = value.splitn(3, ' ').nth(2).filter(|q| q.starts_with('"')) else {
        return value.to_owned();
    };
    let mut text = String::new();
    let mut chars = quoted[1..].chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => text.extend(chars.next()),
            '"' => break,
            c => text.push(c),
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warning_values_are_unquoted() {
        assert_eq!(parse(r#"299 - "a \"b\" c\\d""#), r#"a "b" c\d"#);
        assert_eq!(
            parse(r#"299 - "text" "Wed, 21 Oct 2015 07:28:00 GMT""#),
            "text"
        );
        assert_eq!(parse("garbage"), "garbage");
    }

    #[test]
    fn incomplete_answers_are_told_apart_and_warnings_are_shown_once() {
        let w = Warnings::default();
        w.record("apps/v1 Deployment is deprecated".into());
        w.record(format!(
            "{INCOMPLETE}: things.example.com/v1 is not being watched: x"
        ));
        w.record("apps/v1 Deployment is deprecated".into());
        assert_eq!(w.new_ones().len(), 2);
        assert!(w.new_ones().is_empty());
        assert_eq!(
            w.incomplete(),
            [format!(
                "{INCOMPLETE}: things.example.com/v1 is not being watched: x"
            )]
        );
    }
}
