//! Env-var marker names: `STAKATER_<NAME>_CONFIGMAP|SECRET|SECRETPROVIDERCLASS` (docs/compatibility.md §5).

use crate::model::ResourceKind;

/// Stakater's name conversion: uppercase; keep `A-Z0-9`; a run of other characters becomes one
/// `_`, but only after a kept character (leading junk is dropped, a trailing `_` is kept).
pub fn convert_to_env_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut pending_separator = false;
    for ch in name.chars().map(go_to_upper) {
        if ch.is_ascii_uppercase() || ch.is_ascii_digit() {
            if pending_separator {
                out.push('_');
                pending_separator = false;
            }
            out.push(ch);
        } else if !out.is_empty() {
            pending_separator = true;
        }
    }
    if pending_separator {
        out.push('_');
    }
    out
}

/// Go's `unicode.ToUpper`: one character to one character. Where the full Unicode mapping gives
/// several (`ß` → `SS`, `ﬁ` → `FI`), Go keeps the character, so it is a separator, not letters.
fn go_to_upper(ch: char) -> char {
    let mut upper = ch.to_uppercase();
    match (upper.next(), upper.next()) {
        (Some(single), None) => single,
        _ => ch,
    }
}

pub fn env_var_name(kind: ResourceKind, name: &str) -> String {
    format!("STAKATER_{}_{}", convert_to_env_name(name), kind.marker_type())
}

#[cfg(test)]
mod props;
#[cfg(test)]
mod tests {
    use super::*;

    /// Names and the env var Stakater gives them (also the seeds of the property tests).
    pub(super) const NAMES: &[(ResourceKind, &str, &str)] = &[
        (ResourceKind::ConfigMap, "my-cm", "STAKATER_MY_CM_CONFIGMAP"),
        (ResourceKind::ConfigMap, "www.stakater.com", "STAKATER_WWW_STAKATER_COM_CONFIGMAP"),
        (ResourceKind::Secret, "db-credentials", "STAKATER_DB_CREDENTIALS_SECRET"),
        (ResourceKind::SecretProviderClass, "vault-db", "STAKATER_VAULT_DB_SECRETPROVIDERCLASS"),
        (ResourceKind::ConfigMap, "a--b..c", "STAKATER_A_B_C_CONFIGMAP"),
        (ResourceKind::ConfigMap, "-leading", "STAKATER_LEADING_CONFIGMAP"),
        (ResourceKind::ConfigMap, "trailing-", "STAKATER_TRAILING__CONFIGMAP"),
        (ResourceKind::ConfigMap, "app1.conf", "STAKATER_APP1_CONF_CONFIGMAP"),
        // Go uppercases one character to one: `ß` stays itself, a separator.
        (ResourceKind::ConfigMap, "straße", "STAKATER_STRA_E_CONFIGMAP"),
        (ResourceKind::Secret, "\u{fb01}le", "STAKATER_LE_SECRET"),
        // The two non-ASCII letters whose uppercase is ASCII.
        (ResourceKind::ConfigMap, "\u{131}d-\u{17f}", "STAKATER_ID_S_CONFIGMAP"),
    ];

    #[test]
    fn names() {
        for &(kind, name, want) in NAMES {
            assert_eq!(env_var_name(kind, name), want, "{name}");
        }
        assert_eq!(convert_to_env_name("www.stakater.com"), "WWW_STAKATER_COM");
    }

    #[test]
    fn colliding_names_map_to_one_env_var() {
        assert_eq!(convert_to_env_name("my-cm"), convert_to_env_name("my.cm"));
    }
}
