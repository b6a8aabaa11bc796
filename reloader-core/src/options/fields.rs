//! Parsers for single flags, each returning the typed value or a [`ConfigError`] naming the flag.

use std::collections::BTreeSet;

use std::time::Duration;

use super::values::{is_http_url, redact_url};
use super::{
    ConfigError, IgnoredResources, ListenAddr, LogFormat, SensitiveString, parse_listen_addr, split_flag_list,
};
use crate::annotations::parse_go_bool;
use crate::duration;
use crate::model::WorkloadKind;
use crate::selector::{LabelSelector, check_dns_label};

pub(super) fn invalid(
    flag: &'static str,
    value: impl Into<String>,
    reason: impl Into<String>,
) -> ConfigError {
    ConfigError::InvalidValue { flag, value: value.into(), reason: reason.into() }
}

/// The trimmed value of an optional setting, `None` when absent or blank.
pub(super) fn non_blank(value: Option<&str>) -> Option<String> {
    value.map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned)
}

pub(super) fn log_format(value: &str, warnings: &mut Vec<String>) -> LogFormat {
    match value {
        "" => LogFormat::Text,
        json if json.eq_ignore_ascii_case("json") => LogFormat::Json,
        other => {
            warnings.push(format!("unsupported --log-format {other:?}; logging as text"));
            LogFormat::Text
        }
    }
}

/// Stakater compares these string flags to exactly `"true"`; we do too, and say so when the
/// value looks like it meant something else.
pub(super) fn stakater_true(flag: &str, value: &str, warnings: &mut Vec<String>) -> bool {
    if !matches!(value, "true" | "false" | "") {
        warnings.push(format!("{flag}={value:?} counts as false: only exactly \"true\" enables it"));
    }
    value == "true"
}

pub(super) fn openshift(value: &str) -> Result<Option<bool>, ConfigError> {
    if value.is_empty() {
        return Ok(None);
    }
    parse_go_bool(value)
        .map(Some)
        .ok_or_else(|| invalid("--is-openshift", value, "expected true, false, or empty to detect"))
}

pub(super) fn webhook_url(value: &SensitiveString) -> Result<Option<SensitiveString>, ConfigError> {
    let url = value.expose().trim();
    if url.is_empty() {
        return Ok(None);
    }
    if !is_http_url(url) {
        return Err(invalid("--webhook-url", redact_url(url), "expected an http:// or https:// URL"));
    }
    Ok(Some(SensitiveString::new(url)))
}

/// All entries of a repeatable, comma-separated flag.
pub(super) fn list(flag: &'static str, values: &[String]) -> Result<Vec<String>, ConfigError> {
    let mut entries = Vec::new();
    for value in values {
        entries.extend(split_flag_list(value).map_err(|why| invalid(flag, value, why))?);
    }
    Ok(entries)
}

pub(super) fn ignored_resources(values: &[String]) -> Result<IgnoredResources, ConfigError> {
    const FLAG: &str = "--resources-to-ignore";
    let mut ignored = IgnoredResources::None;
    for entry in list(FLAG, values)? {
        let kind = match entry.to_ascii_lowercase().as_str() {
            "configmaps" => IgnoredResources::ConfigMaps,
            "secrets" => IgnoredResources::Secrets,
            _ => return Err(invalid(FLAG, entry, "expected configmaps or secrets")),
        };
        if ignored != IgnoredResources::None && ignored != kind {
            return Err(invalid(FLAG, values.join(","), "configmaps and secrets cannot both be ignored"));
        }
        ignored = kind;
    }
    Ok(ignored)
}

pub(super) fn ignored_workloads(values: &[String]) -> Result<BTreeSet<WorkloadKind>, ConfigError> {
    const FLAG: &str = "--ignored-workload-types";
    list(FLAG, values)?
        .into_iter()
        .map(|entry| match entry.to_ascii_lowercase().as_str() {
            "jobs" => Ok(WorkloadKind::Job),
            "cronjobs" => Ok(WorkloadKind::CronJob),
            _ => Err(invalid(FLAG, entry, "expected jobs, cronjobs, or both")),
        })
        .collect()
}

/// Namespace names, deduplicated in first-seen order.
pub(super) fn namespace_names(flag: &'static str, values: &[String]) -> Result<Vec<String>, ConfigError> {
    let mut names: Vec<String> = Vec::new();
    for name in list(flag, values)? {
        check_dns_label(&name).map_err(|why| invalid(flag, &name, format!("not a namespace name: {why}")))?;
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Ok(names)
}

pub(super) fn selector(flag: &'static str, values: &[String]) -> Result<Option<LabelSelector>, ConfigError> {
    let entries = list(flag, values)?;
    let selector = LabelSelector::from_entries(entries.iter().map(String::as_str))
        .map_err(|error| invalid(flag, values.join(","), error.problem))?;
    Ok((!selector.is_empty()).then_some(selector))
}

pub(super) fn listen_addr(flag: &'static str, value: &str) -> Result<ListenAddr, ConfigError> {
    parse_listen_addr(value).map_err(|why| invalid(flag, value, why))
}

pub(super) fn parse_duration(flag: &'static str, value: &str) -> Result<Duration, ConfigError> {
    duration::parse_go_duration(value).map_err(|error| invalid(flag, value, error.to_string()))
}

pub(super) fn positive_duration(flag: &'static str, value: &str) -> Result<Duration, ConfigError> {
    match parse_duration(flag, value)? {
        Duration::ZERO => Err(invalid(flag, value, "must be greater than 0")),
        positive => Ok(positive),
    }
}
