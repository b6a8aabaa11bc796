//! Kubernetes label selectors with Stakater's legacy rewrites.
