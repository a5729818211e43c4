//! The autoscaler actor: Kubernetes' HorizontalPodAutoscaler on metrics from the bus.
//!
//! # Layout
//! - [`calc`]: the replica calculator, one metric's observations → a proposal (pure).
//! - [`normalize`]: stabilization windows and scaling-rate limits over a per-HPA
//!   [`normalize::History`] (pure, clock injected).
//! - [`decide`]: one HPA pass: plan (every metric, the largest proposal), decide (normalize,
//!   clamp, conditions, events) and the status to write (pure).

pub mod calc;
pub mod decide;
pub mod normalize;
