//! Kubernetes naming rules (apimachinery's validation), for label keys and values, annotation
//! keys, namespaces and object names. Each check returns why a text is not valid.

const LABEL_NAME_MAX: usize = 63;
const DNS_SUBDOMAIN_MAX: usize = 253;
const DNS_LABEL_MAX: usize = 63;

/// A qualified name: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// alphanumerics, `-`, `_` or `.`, starting and ending with an alphanumeric. Label keys and
/// annotation keys follow this rule.
pub(crate) fn check_qualified_name(text: &str) -> Result<(), String> {
    let (prefix, name) = match text.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, text),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Err("the prefix before '/' must not be empty".into());
        }
        check_dns_subdomain(prefix).map_err(|why| format!("prefix {prefix:?}: {why}"))?;
    }
    if name.is_empty() {
        return Err("the name part must not be empty".into());
    }
    if name.len() > LABEL_NAME_MAX {
        return Err(format!("the name part must be at most {LABEL_NAME_MAX} characters"));
    }
    if !is_label_name(name) {
        return Err("the name part must consist of alphanumerics, '-', '_' or '.', \
                    and start and end with an alphanumeric"
            .into());
    }
    Ok(())
}

/// A label value: empty, or at most 63 alphanumerics, `-`, `_` or `.`, starting and ending
/// with an alphanumeric.
pub(crate) fn check_label_value(text: &str) -> Result<(), String> {
    if text.len() > LABEL_NAME_MAX {
        return Err(format!("must be at most {LABEL_NAME_MAX} characters"));
    }
    if !text.is_empty() && !is_label_name(text) {
        return Err("must consist of alphanumerics, '-', '_' or '.', \
                    and start and end with an alphanumeric"
            .into());
    }
    Ok(())
}

/// An RFC 1123 label (namespace names): at most 63 lowercase alphanumerics or `-`, starting
/// and ending with an alphanumeric.
pub(crate) fn check_dns_label(text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err("must not be empty".into());
    }
    if text.len() > DNS_LABEL_MAX {
        return Err(format!("must be at most {DNS_LABEL_MAX} characters"));
    }
    if !is_dns_label(text) {
        return Err("must consist of lowercase alphanumerics or '-', \
                    and start and end with an alphanumeric"
            .into());
    }
    Ok(())
}

/// An RFC 1123 subdomain (most object names): at most 253 characters, dot-separated labels.
pub(crate) fn check_dns_subdomain(text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err("must not be empty".into());
    }
    if text.len() > DNS_SUBDOMAIN_MAX {
        return Err(format!("must be at most {DNS_SUBDOMAIN_MAX} characters"));
    }
    if !text.split('.').all(is_dns_label) {
        return Err("must consist of lowercase alphanumerics, '-' or '.', \
                    and start and end with an alphanumeric"
            .into());
    }
    Ok(())
}

fn is_label_name(text: &str) -> bool {
    let bytes = text.as_bytes();
    let inner_ok = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric() && last.is_ascii_alphanumeric() && bytes.iter().all(inner_ok)
        }
        _ => false,
    }
}

fn is_dns_label(text: &str) -> bool {
    let bytes = text.as_bytes();
    let end_ok = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            end_ok(first) && end_ok(last) && bytes.iter().all(|b| end_ok(b) || *b == b'-')
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        let valid = ["app", "a", "app.kubernetes.io/name", "A_b-c.D", "x/y", &"k".repeat(63)];
        for text in valid {
            assert_eq!(check_qualified_name(text), Ok(()), "{text}");
        }
        let invalid =
            ["", "/x", "x/", "-app", "app-", "a/b/c", "Example.com/x", "has space", "a*", &"k".repeat(64)];
        for text in invalid {
            assert!(check_qualified_name(text).is_err(), "{text}");
        }
    }

    #[test]
    fn label_values() {
        for text in ["", "v", "v1.2_3-x", &"v".repeat(63)] {
            assert_eq!(check_label_value(text), Ok(()), "{text}");
        }
        for text in ["-v", "v-", "*", "a b", "a/b", &"v".repeat(64)] {
            assert!(check_label_value(text).is_err(), "{text}");
        }
    }

    #[test]
    fn dns_names() {
        for text in ["default", "kube-system", "a1"] {
            assert_eq!(check_dns_label(text), Ok(()), "{text}");
        }
        for text in ["", "Default", "a.b", "-a", "a_b", &"n".repeat(64)] {
            assert!(check_dns_label(text).is_err(), "{text}");
        }
        for text in ["stakater-reloader-lock", "a.b.c", "x"] {
            assert_eq!(check_dns_subdomain(text), Ok(()), "{text}");
        }
        for text in ["", "a..b", ".a", "A.b", &"s".repeat(254)] {
            assert!(check_dns_subdomain(text).is_err(), "{text}");
        }
    }
}
