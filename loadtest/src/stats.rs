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

pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}
