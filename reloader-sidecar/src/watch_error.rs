//! A watch error as it may be logged: never the body of a response. A Secret that failed to
//! decode would otherwise be quoted by serde's message (`invalid type: string "…"`), so such
//! errors are named, not shown. Used by the sidecar and by the controller's watches.

use kube::runtime::watcher;

/// The error without response bodies: a body that failed to decode could hold Secret data.
pub fn describe(error: &watcher::Error) -> String {
    let client_error = |e: &kube::Error| match e {
        kube::Error::Api(status) => format!("{} (HTTP {})", status.message, status.code),
        kube::Error::SerdeError(_) | kube::Error::FromUtf8(_) => {
            "the API response could not be decoded".to_owned()
        }
        other => other.to_string(),
    };
    match error {
        watcher::Error::InitialListFailed(e) => format!("list failed: {}", client_error(e)),
        watcher::Error::WatchStartFailed(e) => format!("watch failed to start: {}", client_error(e)),
        watcher::Error::WatchFailed(e) => format!("watch broke: {}", client_error(e)),
        watcher::Error::WatchError(status) => {
            format!("watch error: {} (HTTP {})", status.message, status.code)
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    const SECRET: &str = "hunter2-s3cret";

    /// What serde says about a Secret's value it could not decode: it quotes the value.
    fn undecodable() -> kube::Error {
        let body = format!(r#"{{"data": {{"password": 7}}, "stringData": "{SECRET}"}}"#);
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code, reason = "only decoding matters")]
        struct Strict {
            #[serde(rename = "stringData")]
            string_data: u64,
        }
        kube::Error::SerdeError(serde_json::from_str::<Strict>(&body).unwrap_err())
    }

    fn status(code: u16, message: &str) -> Box<Status> {
        Box::new(Status::failure(message, "Expired").with_code(code))
    }

    #[test]
    fn no_response_body_reaches_the_description() {
        assert!(undecodable().to_string().contains(SECRET), "the table must start from a leaking error");
        let rows: [(watcher::Error, &str); 6] = [
            (
                watcher::Error::InitialListFailed(undecodable()),
                "list failed: the API response could not be decoded",
            ),
            (
                watcher::Error::WatchStartFailed(undecodable()),
                "watch failed to start: the API response could not be decoded",
            ),
            (
                watcher::Error::WatchFailed(undecodable()),
                "watch broke: the API response could not be decoded",
            ),
            (
                watcher::Error::WatchFailed(kube::Error::Api(status(403, "secrets is forbidden"))),
                "watch broke: secrets is forbidden (HTTP 403)",
            ),
            (
                watcher::Error::WatchError(status(410, "too old resource version")),
                "watch error: too old resource version (HTTP 410)",
            ),
            (watcher::Error::NoResourceVersion, &watcher::Error::NoResourceVersion.to_string()),
        ];
        for (error, expected) in rows {
            let described = describe(&error);
            assert_eq!(described, expected);
            assert!(!described.contains(SECRET), "{described}");
        }
    }
}
