//! The trace and span ids of the span a JSON log line was written in, as `trace_id` and
//! `span_id` fields, so a log backend can link the line to its trace.

use std::fmt::Write as _;

use opentelemetry::trace::TraceContextExt as _;
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Wraps a JSON event format: its object gets the ids of the active OpenTelemetry span (the
/// tracing span entered around the event; the OpenTelemetry layer activates its context on
/// entry). Outside any exported span the line is left as it is.
pub(super) struct WithTraceIds<F>(pub(super) F);

impl<S, N, F> FormatEvent<S, N> for WithTraceIds<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let context = opentelemetry::Context::current();
        let span = context.span();
        let ids = span.span_context();
        if !ids.is_valid() {
            return self.0.format_event(ctx, writer, event);
        }
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        writer.write_str(&with_ids(&line, &ids.trace_id().to_string(), &ids.span_id().to_string()))
    }
}

/// `line` (one JSON object and a newline) with the two id fields added at the end of the object.
fn with_ids(line: &str, trace_id: &str, span_id: &str) -> String {
    let Some(close) = line.rfind('}') else { return line.to_owned() };
    let mut out = String::with_capacity(line.len() + 64);
    out.push_str(&line[..close]);
    let separator = if line[..close].trim_end().ends_with('{') { "" } else { "," };
    let _ = write!(out, r#"{separator}"trace_id":"{trace_id}","span_id":"{span_id}""#);
    out.push_str(&line[close..]);
    out
}

#[cfg(test)]
mod tests {
    use super::with_ids;

    #[test]
    fn ids_go_inside_the_json_object() {
        let cases = [
            (
                "{\"level\":\"INFO\",\"message\":\"reloaded\"}\n",
                "{\"level\":\"INFO\",\"message\":\"reloaded\",\"trace_id\":\"t\",\"span_id\":\"s\"}\n",
            ),
            ("{}\n", "{\"trace_id\":\"t\",\"span_id\":\"s\"}\n"),
            ("not json\n", "not json\n"),
        ];
        for (line, expected) in cases {
            let out = with_ids(line, "t", "s");
            assert_eq!(out, expected, "{line:?}");
            if line.starts_with('{') {
                serde_json::from_str::<serde_json::Value>(&out).expect("still one JSON object");
            }
        }
    }
}
