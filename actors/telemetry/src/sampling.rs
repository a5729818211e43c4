//! Sampling from the standard `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` variables.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry_sdk::trace::Sampler;

/// Whether this process follows a remote parent's decision (the default): then work in a
/// trace decided against needs no spans at all ([`crate::work`]).
static PARENT_DECIDES: AtomicBool = AtomicBool::new(true);

pub fn set_parent_decides(parent_based: bool) {
    PARENT_DECIDES.store(parent_based, Ordering::Relaxed);
}

pub fn parent_decides() -> bool {
    PARENT_DECIDES.load(Ordering::Relaxed)
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

    pub fn sampler(self) -> Sampler {
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
