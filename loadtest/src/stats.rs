//! Percentiles and rates.

use std::time::Duration;

pub struct Summary {
    pub p50: Duration,
    pub p90: Duration,
    pub p99: Duration,
    pub max: Duration,
}

pub fn summarize(samples: &mut [Duration]) -> Summary {
    samples.sort_unstable();
    let at = |q: f64| {
        if samples.is_empty() {
            return Duration::ZERO;
        }
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i]
    };
    Summary {
        p50: at(0.50),
        p90: at(0.90),
        p99: at(0.99),
        max: samples.last().copied().unwrap_or_default(),
    }
}

/// The middle figure of a setting's runs (the mean of the two middle ones for an even
/// count); NaN for none.
#[allow(dead_code)] // used by the tracing benchmarks, which include this file by path
pub fn median(figures: &[f64]) -> f64 {
    let mut sorted = figures.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}
