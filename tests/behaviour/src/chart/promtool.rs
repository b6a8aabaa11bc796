//! The pinned `promtool` (`hack/build promtool`, Prometheus's own parser): rules files are checked
//! by the real thing, not by our reading of PromQL.

use std::path::PathBuf;
use std::process::Command;

use super::helm::pinned_binary;
use reloader_harness::PlaneError;

/// `promtool` from the dev cache, as hack/lint-release builds it.
#[derive(Debug, Clone)]
pub struct Promtool {
    binary: PathBuf,
}

impl Promtool {
    /// The pinned promtool in the cache; an error naming `hack/build promtool` when it is missing.
    pub fn locate() -> Result<Self, PlaneError> {
        Ok(Self { binary: pinned_binary("PROMETHEUS_VERSION", "promtool")? })
    }

    /// `promtool check rules` on a rules file (`{"groups": [...]}`; JSON is YAML); its report, or
    /// an error carrying what promtool found wrong.
    pub fn check_rules(&self, rules: &serde_json::Value) -> Result<String, PlaneError> {
        let io_error = |source| PlaneError::Io { context: "writing a rules file".into(), source };
        let file = tempfile::Builder::new().prefix("rules-").suffix(".yaml").tempfile().map_err(io_error)?;
        std::fs::write(file.path(), rules.to_string()).map_err(io_error)?;
        let output =
            Command::new(&self.binary).args(["check", "rules"]).arg(file.path()).output().map_err(
                |source| PlaneError::Io { context: "running promtool check rules".into(), source },
            )?;
        let report = format!(
            "{}\n{}",
            String::from_utf8_lossy(&output.stdout).trim(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
        if output.status.success() {
            Ok(report)
        } else {
            Err(PlaneError::Command { command: "promtool check rules".into(), detail: report })
        }
    }
}
