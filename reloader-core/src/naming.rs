//! Env-var marker names: `STAKATER_<NAME>_CONFIGMAP|SECRET|SECRETPROVIDERCLASS` (docs/compatibility.md §5).

use crate::model::ResourceKind;

/// Stakater's name conversion: uppercase; keep `A-Z0-9`; a run of other characters becomes one
/// `_`, but only after a kept character (leading junk is dropped, a trailing `_` is kept).
pub fn convert_to_env_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut pending_separator = false;
    for ch in name.chars().flat_map(char::to_uppercase) {
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

pub fn env_var_name(kind: ResourceKind, name: &str) -> String {
    format!("STAKATER_{}_{}", convert_to_env_name(name), kind.marker_type())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let cases = [
            (ResourceKind::ConfigMap, "my-cm", "STAKATER_MY_CM_CONFIGMAP"),
            (ResourceKind::ConfigMap, "www.stakater.com", "STAKATER_WWW_STAKATER_COM_CONFIGMAP"),
            (ResourceKind::Secret, "db-credentials", "STAKATER_DB_CREDENTIALS_SECRET"),
            (ResourceKind::SecretProviderClass, "vault-db", "STAKATER_VAULT_DB_SECRETPROVIDERCLASS"),
            (ResourceKind::ConfigMap, "a--b..c", "STAKATER_A_B_C_CONFIGMAP"),
            (ResourceKind::ConfigMap, "-leading", "STAKATER_LEADING_CONFIGMAP"),
            (ResourceKind::ConfigMap, "trailing-", "STAKATER_TRAILING__CONFIGMAP"),
            (ResourceKind::ConfigMap, "app1.conf", "STAKATER_APP1_CONF_CONFIGMAP"),
        ];
        for (kind, name, want) in cases {
            assert_eq!(env_var_name(kind, name), want, "{name}");
        }
        assert_eq!(convert_to_env_name("www.stakater.com"), "WWW_STAKATER_COM");
    }

    #[test]
    fn colliding_names_map_to_one_env_var() {
        assert_eq!(convert_to_env_name("my-cm"), convert_to_env_name("my.cm"));
    }
}
