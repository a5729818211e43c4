//! Manifests. PLACEHOLDER.
