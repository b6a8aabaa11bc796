//! The query strings of the profile endpoints, read as Go's net/http/pprof reads them.

use std::time::Duration;

/// A CPU profile's duration when `seconds` is absent, not a number or not positive (as Go).
pub(crate) const DEFAULT_CPU_SECONDS: u64 = 30;
/// The longest CPU profile served: the sampler is process-wide and one runs at a time.
pub(crate) const MAX_CPU_SECONDS: u64 = 300;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum QueryError {
    #[error("profile duration {0}s exceeds the maximum of {MAX_CPU_SECONDS}s\n")]
    TooLong(u64),
    #[error("only the protobuf format (debug=0) is served; read it with go tool pprof\n")]
    TextFormat,
    #[error(
        "delta heap profiles (seconds=N) are not served; take two and compare them with go tool pprof -base\n"
    )]
    DeltaHeap,
}

/// `/debug/pprof/profile?seconds=N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProfileQuery {
    pub(crate) duration: Duration,
}

impl ProfileQuery {
    pub(crate) fn parse(query: Option<&str>) -> Result<Self, QueryError> {
        let seconds = match param(query, "seconds").and_then(|text| text.parse::<i64>().ok()) {
            Some(seconds) if seconds > 0 => seconds.unsigned_abs(),
            _ => DEFAULT_CPU_SECONDS,
        };
        if seconds > MAX_CPU_SECONDS {
            return Err(QueryError::TooLong(seconds));
        }
        Ok(Self { duration: Duration::from_secs(seconds) })
    }
}

/// `/debug/pprof/heap`: only the protobuf profile of the memory in use. Go's `gc=1` is
/// accepted (there is no garbage collector to run first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeapQuery;

impl HeapQuery {
    pub(crate) fn parse(query: Option<&str>) -> Result<Self, QueryError> {
        if param(query, "debug").and_then(|text| text.parse::<i64>().ok()).is_some_and(|debug| debug != 0) {
            return Err(QueryError::TextFormat);
        }
        if param(query, "seconds").is_some_and(|text| !text.is_empty()) {
            return Err(QueryError::DeltaHeap);
        }
        Ok(Self)
    }
}

/// The first value of `name` in a query string, as Go's `r.FormValue` (values here are numbers,
/// so no percent-decoding is needed).
fn param<'q>(query: Option<&'q str>, name: &str) -> Option<&'q str> {
    query?.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key == name).then_some(value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_profile_seconds() {
        let cases: [(Option<&str>, Result<u64, QueryError>); 11] = [
            (None, Ok(DEFAULT_CPU_SECONDS)),
            (Some(""), Ok(DEFAULT_CPU_SECONDS)),
            (Some("seconds=2"), Ok(2)),
            (Some("debug=0&seconds=5"), Ok(5)),
            (Some("seconds=5&seconds=7"), Ok(5)),
            (Some("seconds=0"), Ok(DEFAULT_CPU_SECONDS)),
            (Some("seconds=-3"), Ok(DEFAULT_CPU_SECONDS)),
            (Some("seconds=abc"), Ok(DEFAULT_CPU_SECONDS)),
            (Some("seconds"), Ok(DEFAULT_CPU_SECONDS)),
            (Some("seconds=300"), Ok(MAX_CPU_SECONDS)),
            (Some("seconds=301"), Err(QueryError::TooLong(301))),
        ];
        for (query, expected) in cases {
            let parsed = ProfileQuery::parse(query).map(|q| q.duration.as_secs());
            assert_eq!(parsed, expected, "{query:?}");
        }
    }

    #[test]
    fn heap_profile_options() {
        let cases = [
            (None, Ok(HeapQuery)),
            (Some("gc=1"), Ok(HeapQuery)),
            (Some("debug=0"), Ok(HeapQuery)),
            (Some("debug=1"), Err(QueryError::TextFormat)),
            (Some("debug=2&gc=1"), Err(QueryError::TextFormat)),
            (Some("seconds=10"), Err(QueryError::DeltaHeap)),
            (Some("seconds="), Ok(HeapQuery)),
        ];
        for (query, expected) in cases {
            assert_eq!(HeapQuery::parse(query), expected, "{query:?}");
        }
    }
}
