//! Decaying histograms with exponentially growing buckets, as the upstream VPA recommender
//! keeps them: small values are told apart finely and large ones coarsely (a fixed 5 % of
//! relative error), and old samples fade by a half-life, so the recommendation follows a
//! workload whose usage changed without forgetting a daily peak at once.

/// Bucket boundaries: bucket `n` starts at `first * (ratio^n - 1) / (ratio - 1)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Buckets {
    /// The width of the first bucket.
    pub first: f64,
    /// Each bucket is this much wider than the previous one.
    pub ratio: f64,
    pub count: usize,
}

impl Buckets {
    /// Buckets up to `max`.
    pub fn up_to(first: f64, ratio: f64, max: f64) -> Buckets {
        let count = ((max * (ratio - 1.0) / first + 1.0).ln() / ratio.ln()).ceil() as usize + 1;
        Buckets {
            first,
            ratio,
            count,
        }
    }

    /// Upstream's CPU buckets, in cores: 10 millicores first, up to 1000 cores.
    pub fn cpu() -> Buckets {
        Buckets::up_to(0.01, 1.05, 1000.0)
    }

    /// Upstream's memory buckets, in bytes: 10 MB first, up to 1 TB.
    pub fn memory() -> Buckets {
        Buckets::up_to(1e7, 1.05, 1e12)
    }

    pub fn start(&self, bucket: usize) -> f64 {
        self.first * (self.ratio.powi(bucket as i32) - 1.0) / (self.ratio - 1.0)
    }

    pub fn of(&self, value: f64) -> usize {
        if value <= 0.0 || !value.is_finite() {
            return 0;
        }
        let n = ((value * (self.ratio - 1.0) / self.first + 1.0).ln() / self.ratio.ln()).floor();
        (n.max(0.0) as usize).min(self.count - 1)
    }
}

/// Weights stay finite: past this exponent every weight is rescaled to a later reference.
const MAX_EXPONENT: f64 = 100.0;
/// Below this total the histogram counts as empty (everything decayed away).
const EPSILON: f64 = 1e-10;

/// A histogram whose samples weigh `2^((t - reference) / half_life)`: recent ones count
/// double those one half-life older. Times are seconds on any fixed scale.
#[derive(Debug, Clone)]
pub struct DecayingHistogram {
    buckets: Buckets,
    weights: Vec<f64>,
    total: f64,
    half_life: f64,
    reference: f64,
}

impl DecayingHistogram {
    pub fn new(buckets: Buckets, half_life_seconds: f64) -> Self {
        DecayingHistogram {
            buckets,
            weights: vec![0.0; buckets.count],
            total: 0.0,
            half_life: half_life_seconds.max(f64::MIN_POSITIVE),
            reference: 0.0,
        }
    }

    fn decay_factor(&mut self, at: f64) -> f64 {
        if self.total < EPSILON {
            self.reference = at;
        }
        let exponent = (at - self.reference) / self.half_life;
        if exponent > MAX_EXPONENT {
            // Moving the reference divides every stored weight by the same factor, so the
            // shape (and every percentile) is unchanged.
            let shift = 2f64.powf(-exponent);
            for w in &mut self.weights {
                *w *= shift;
            }
            self.total *= shift;
            self.reference = at;
            return 1.0;
        }
        2f64.powf(exponent)
    }

    pub fn add(&mut self, value: f64, weight: f64, at: f64) {
        let w = weight * self.decay_factor(at);
        self.weights[self.buckets.of(value)] += w;
        self.total += w;
    }

    /// Takes back a sample added with the same value, weight and time (a memory peak that
    /// was superseded by a higher one in the same interval).
    pub fn subtract(&mut self, value: f64, weight: f64, at: f64) {
        let w = weight * 2f64.powf((at - self.reference) / self.half_life);
        let bucket = self.buckets.of(value);
        self.weights[bucket] = (self.weights[bucket] - w).max(0.0);
        self.total = (self.total - w).max(0.0);
    }

    pub fn is_empty(&self) -> bool {
        self.total < EPSILON
    }

    /// The smallest bucket end below which a `p` fraction of the weight lies (upstream
    /// answers with the end of the bucket, erring towards more), or 0 when empty.
    pub fn percentile(&self, p: f64) -> f64 {
        if self.is_empty() {
            return 0.0;
        }
        let threshold = p.clamp(0.0, 1.0) * self.total;
        let mut sum = 0.0;
        for (bucket, w) in self.weights.iter().enumerate() {
            sum += w;
            if sum >= threshold && *w > 0.0 {
                return self.buckets.start((bucket + 1).min(self.buckets.count - 1));
            }
        }
        self.buckets.start(self.buckets.count - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_grow_by_the_ratio_and_values_land_in_theirs() {
        let b = Buckets::cpu();
        assert_eq!(b.start(0), 0.0);
        assert!((b.start(1) - 0.01).abs() < 1e-12);
        assert!((b.start(2) - 0.0205).abs() < 1e-12);
        for v in [0.001, 0.25, 1.0, 7.3, 999.0] {
            let n = b.of(v);
            assert!(b.start(n) <= v && v < b.start(n + 1), "{v} in bucket {n}");
        }
        assert_eq!(
            b.of(1e9),
            b.count - 1,
            "beyond the last bucket is the last bucket"
        );
        assert!(b.start(b.count - 1) >= 1000.0);
    }

    #[test]
    fn percentiles_answer_with_the_end_of_the_bucket() {
        let mut h = DecayingHistogram::new(Buckets::cpu(), 3600.0);
        assert_eq!(h.percentile(0.9), 0.0);
        for i in 0..100 {
            // 90 samples (all at once, so no decay tilts the count) at 0.1 core, 10 at 1 core.
            h.add(if i < 90 { 0.1 } else { 1.0 }, 1.0, 0.0);
        }
        let b = Buckets::cpu();
        assert_eq!(h.percentile(0.5), b.start(b.of(0.1) + 1));
        assert_eq!(h.percentile(0.9), b.start(b.of(0.1) + 1));
        assert_eq!(h.percentile(0.95), b.start(b.of(1.0) + 1));
    }

    #[test]
    fn older_samples_weigh_half_per_half_life() {
        let mut h = DecayingHistogram::new(Buckets::cpu(), 60.0);
        // Equal counts, but the 2-core samples are two half-lives newer: they weigh 4×,
        // so the median is theirs.
        for _ in 0..10 {
            h.add(0.5, 1.0, 0.0);
        }
        for _ in 0..10 {
            h.add(2.0, 1.0, 120.0);
        }
        let b = Buckets::cpu();
        assert_eq!(h.percentile(0.5), b.start(b.of(2.0) + 1));
        assert_eq!(h.percentile(0.1), b.start(b.of(0.5) + 1));
    }

    #[test]
    fn weights_are_rescaled_before_they_overflow_and_percentiles_survive() {
        let mut h = DecayingHistogram::new(Buckets::memory(), 1.0);
        h.add(1e8, 1.0, 0.0);
        h.add(5e8, 1.0, 0.0);
        // 1000 half-lives later: 2^1000 would overflow without the shift.
        h.add(5e8, 1.0, 1000.0);
        assert!(h.percentile(0.5).is_finite());
        let b = Buckets::memory();
        assert_eq!(h.percentile(0.5), b.start(b.of(5e8) + 1));
    }

    #[test]
    fn a_subtracted_sample_is_gone() {
        let mut h = DecayingHistogram::new(Buckets::memory(), 3600.0);
        h.add(1e8, 1.0, 10.0);
        h.add(9e8, 1.0, 10.0);
        h.subtract(9e8, 1.0, 10.0);
        let b = Buckets::memory();
        assert_eq!(h.percentile(0.99), b.start(b.of(1e8) + 1));
    }
}
