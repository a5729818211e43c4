//! Sampling from the standard `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` variables.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use opentelemetry::trace::{
    Link, SamplingDecision, SamplingResult, SpanKind, TraceContextExt, TraceId, TraceState,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, Sampler, ShouldSample};

/// Whether this process follows a remote parent's decision (the default): then work in a
/// trace decided against needs no spans at all ([`crate::work`]).
static PARENT_DECIDES: AtomicBool = AtomicBool::new(true);

/// Makes `sampling` the settings [`crate::work`] decides by: they must be the SDK sampler's.
pub(crate) fn follow(sampling: Sampling) {
    PARENT_DECIDES.store(sampling.parent_based, Ordering::Relaxed);
    ROOT_RATIO.store(sampling.ratio.to_bits(), Ordering::Relaxed);
}

pub fn parent_decides() -> bool {
    PARENT_DECIDES.load(Ordering::Relaxed)
}

/// The ratio of new root traces kept, as `f64` bits (1.0 until a sampler is installed).
static ROOT_RATIO: AtomicU64 = AtomicU64::new(0x3FF0_0000_0000_0000);

/// Decides a new root trace before any span of it exists: its trace id, and whether it is
/// kept, by the same rule the standard ratio sampler applies to a trace id. [`crate::work`]
/// makes a dropped root no span at all, only a context that carries the decision on.
pub fn decide_root() -> (TraceId, bool) {
    let trace_id = RandomIdGenerator::default().new_trace_id();
    let ratio = f64::from_bits(ROOT_RATIO.load(Ordering::Relaxed));
    let keep = Sampler::TraceIdRatioBased(ratio)
        .should_sample(None, trace_id, "", &SpanKind::Internal, &[], &[])
        .decision
        == SamplingDecision::RecordAndSample;
    (trace_id, keep)
}

/// Marks the (span-less) parent context of a new root that [`decide_root`] kept, so the
/// SDK's sampler records it instead of drawing again (a dropped root makes no span at all).
#[derive(Debug, Clone, Copy)]
pub struct KeptRoot;

/// The SDK sampler of Shoal's processes: a root kept up front is recorded; every other span
/// is sampled as the standard variables ask.
#[derive(Debug, Clone)]
pub struct ShoalSampler {
    standard: Sampler,
}

impl ShouldSample for ShoalSampler {
    fn should_sample(
        &self,
        parent_context: Option<&Context>,
        trace_id: TraceId,
        name: &str,
        span_kind: &SpanKind,
        attributes: &[KeyValue],
        links: &[Link],
    ) -> SamplingResult {
        let kept = parent_context
            .is_some_and(|cx| !cx.has_active_span() && cx.get::<KeptRoot>().is_some());
        if kept {
            return SamplingResult {
                decision: SamplingDecision::RecordAndSample,
                attributes: Vec::new(),
                trace_state: TraceState::default(),
            };
        }
        self.standard
            .should_sample(parent_context, trace_id, name, span_kind, attributes, links)
    }
}

/// What the variables ask for: a ratio of new root traces, and whether a remote parent's
/// decision is followed (it is by default, so a trace is kept whole or not at all).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    pub parent_based: bool,
    pub ratio: f64,
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling {
            parent_based: true,
            ratio: 1.0,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SamplingError {
    #[error("OTEL_TRACES_SAMPLER={0:?} is not one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio")]
    UnknownSampler(String),
    #[error("OTEL_TRACES_SAMPLER_ARG={0:?} is not a ratio between 0 and 1")]
    BadRatio(String),
}

impl Sampling {
    /// Reads the two variables through `var` (the environment, or a map in tests).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Sampling, SamplingError> {
        let ratio = match var("OTEL_TRACES_SAMPLER_ARG") {
            None => 1.0,
            Some(arg) => match arg.trim().parse::<f64>() {
                Ok(r) if (0.0..=1.0).contains(&r) => r,
                _ => return Err(SamplingError::BadRatio(arg)),
            },
        };
        let name = var("OTEL_TRACES_SAMPLER").unwrap_or_else(|| "parentbased_traceidratio".into());
        let (parent_based, ratio) = match name.trim() {
            "always_on" => (false, 1.0),
            "always_off" => (false, 0.0),
            "traceidratio" => (false, ratio),
            "parentbased_always_on" => (true, 1.0),
            "parentbased_always_off" => (true, 0.0),
            "parentbased_traceidratio" => (true, ratio),
            _ => return Err(SamplingError::UnknownSampler(name)),
        };
        Ok(Sampling {
            parent_based,
            ratio,
        })
    }

    pub fn from_env() -> Result<Sampling, SamplingError> {
        Sampling::from_vars(|k| std::env::var(k).ok())
    }

    /// The SDK sampler for these settings.
    pub fn sampler(self) -> ShoalSampler {
        ShoalSampler {
            standard: self.standard_sampler(),
        }
    }

    fn standard_sampler(self) -> Sampler {
        let root = if self.ratio >= 1.0 {
            Sampler::AlwaysOn
        } else if self.ratio <= 0.0 {
            Sampler::AlwaysOff
        } else {
            Sampler::TraceIdRatioBased(self.ratio)
        };
        if self.parent_based {
            Sampler::ParentBased(Box::new(root))
        } else {
            root
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn parent_based_everything_by_default() {
        assert_eq!(Sampling::from_vars(vars(&[])), Ok(Sampling::default()));
    }

    #[test]
    fn ratio_and_sampler_come_from_the_standard_variables() {
        let s = Sampling::from_vars(vars(&[
            ("OTEL_TRACES_SAMPLER", "traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.01"),
        ]))
        .unwrap();
        assert_eq!(
            s,
            Sampling {
                parent_based: false,
                ratio: 0.01
            }
        );
        let off = Sampling::from_vars(vars(&[("OTEL_TRACES_SAMPLER", "always_off")])).unwrap();
        assert_eq!(off.ratio, 0.0);
    }

    #[test]
    fn bad_values_are_named() {
        assert_eq!(
            Sampling::from_vars(vars(&[("OTEL_TRACES_SAMPLER", "sometimes")])),
            Err(SamplingError::UnknownSampler("sometimes".into()))
        );
        assert_eq!(
            Sampling::from_vars(vars(&[("OTEL_TRACES_SAMPLER_ARG", "2")])),
            Err(SamplingError::BadRatio("2".into()))
        );
    }
}
