//! Label key and value validation, as in apimachinery `pkg/util/validation`.
//!
//! Label selectors are validated by the server with exactly these rules, and the error strings
//! end up verbatim in `400 BadRequest` bodies that kubectl prints, so both the rules and the
//! wording follow `IsQualifiedName`, `IsValidLabelValue` and `IsDNS1123Subdomain`.
//! Each function returns the list of problems; an empty list means the input is valid.

/// Maximum length of the name part of a qualified name (label key without prefix).
pub const QUALIFIED_NAME_MAX_LENGTH: usize = 63;
/// Maximum length of a label value.
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;
/// Maximum length of a DNS-1123 subdomain (the optional label key prefix).
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// `IsQualifiedName`: an optional DNS-1123 subdomain prefix and `/`, then a name of at most 63
/// characters that starts and ends with an alphanumeric and contains only `[-A-Za-z0-9_.]`.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push(format!("prefix part {}", empty_error()));
            } else {
                errs.extend(
                    is_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_ERR_MSG,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push(format!("name part {}", empty_error()));
    } else if name.len() > QUALIFIED_NAME_MAX_LENGTH {
        errs.push(format!(
            "name part {}",
            max_len_error(QUALIFIED_NAME_MAX_LENGTH)
        ));
    }
    if !matches_qualified_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `IsValidLabelValue`: empty, or at most 63 characters that start and end with an
/// alphanumeric and contain only `[-A-Za-z0-9_.]`.
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LENGTH {
        errs.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !value.is_empty() && !matches_qualified_name(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `IsDNS1123Subdomain`: at most 253 characters of dot-separated lowercase RFC 1123 labels.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !matches_dns1123_subdomain(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
fn matches_qualified_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
fn matches_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let b = label.as_bytes();
        let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        match (b.first(), b.last()) {
            (Some(first), Some(last)) => {
                alnum(first) && alnum(last) && b.iter().all(|c| alnum(c) || *c == b'-')
            }
            _ => false,
        }
    })
}

fn empty_error() -> &'static str {
    "must be non-empty"
}

fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// `RegexError`: the message, examples and the regex, formatted exactly like apimachinery
/// (including its double space after each example's comma).
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(example);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(fmt);
    out.push_str("')");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        for ok in [
            "a",
            "A",
            "1",
            "app",
            "app.kubernetes.io/name",
            "ifo.kubevirt.io/subject-uid",
            "a_b.c-d",
            &"x".repeat(63),
            &format!("{}/a", "a".repeat(253)),
        ] {
            assert!(
                is_qualified_name(ok).is_empty(),
                "{ok}: {:?}",
                is_qualified_name(ok)
            );
        }
        for bad in [
            "",
            "-a",
            "a-",
            "a b",
            "a/b/c",
            "/a",
            "a/",
            "A.com/b",
            "app:monolith",
            &"x".repeat(64),
            "ä",
        ] {
            assert!(!is_qualified_name(bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn qualified_name_messages() {
        assert_eq!(
            is_qualified_name("app:monolith"),
            vec![
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
            ]
        );
        let empty = is_qualified_name("");
        assert_eq!(empty.len(), 2);
        assert_eq!(empty[0], "name part must be non-empty");
        assert_eq!(
            is_qualified_name(&"x".repeat(64)),
            vec!["name part must be no more than 63 characters"]
        );
        assert_eq!(
            is_qualified_name("app.kubernetes_io/name"),
            vec![
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ]
        );
        assert_eq!(
            is_qualified_name("/a"),
            vec!["prefix part must be non-empty"]
        );
        assert!(is_qualified_name("a/b/c")[0].starts_with("a qualified name must consist"));
        assert!(is_qualified_name("a/b/c")[0].ends_with(
            "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ));
    }

    #[test]
    fn label_values() {
        for ok in ["", "a", "v1.2_3-x", &"x".repeat(63)] {
            assert!(is_valid_label_value(ok).is_empty(), "{ok}");
        }
        for bad in ["-a", "a-", "a b", "a/b", "ä", &"x".repeat(64)] {
            assert!(!is_valid_label_value(bad).is_empty(), "{bad}");
        }
        assert_eq!(
            is_valid_label_value("a b"),
            vec![
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            ]
        );
        assert_eq!(
            is_valid_label_value(&format!("-{}", "x".repeat(63))).len(),
            2
        );
    }

    #[test]
    fn dns_subdomains() {
        for ok in ["a", "example.com", "a-b.c0", "0"] {
            assert!(is_dns1123_subdomain(ok).is_empty(), "{ok}");
        }
        for bad in ["", "A", "a..b", ".a", "a.", "-a", "a_b", &"a".repeat(254)] {
            assert!(!is_dns1123_subdomain(bad).is_empty(), "{bad}");
        }
    }
}
