//! Carrying a change's trace with its work: the context captured where work is queued, made the
//! parent (or a link) of the span that later does the work, and sent on as a W3C `traceparent`
//! header with the notifications. Span names and attribute keys are listed in docs/tracing.md.
//!
//! Without trace export every context is empty, and all of this does nothing.

use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The trace context of the current span, to travel with queued work.
pub(crate) fn current_context() -> opentelemetry::Context {
    tracing::Span::current().context()
}

/// Makes `span` a child of `parent` (captured where the work was queued). Call before the span
/// is first entered.
pub(crate) fn set_parent(span: &tracing::Span, parent: &opentelemetry::Context) {
    if parent.has_active_span() {
        // Only fails for a span already started: the callers set parents at creation.
        let _ = span.set_parent(parent.clone());
    }
}

/// Records on `span` a link to the span of `other`: a change merged into work another change
/// started.
pub(crate) fn add_link(span: &tracing::Span, other: &opentelemetry::Context) {
    let linked = other.span().span_context().clone();
    if linked.is_valid() {
        span.add_link(linked);
    }
}

/// Adds the W3C `traceparent` (and `tracestate`) of the current span to `headers`.
pub(crate) fn inject_traceparent(headers: &mut http::HeaderMap) {
    let context = current_context();
    TraceContextPropagator::new().inject_context(&context, &mut opentelemetry_http::HeaderInjector(headers));
}
