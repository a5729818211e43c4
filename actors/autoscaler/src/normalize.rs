//! From a raw proposal to the replica count actually set: stabilization windows and scaling
//! rate limits, as Kubernetes' HPA controller applies them.
//!
//! Two paths, as in Kubernetes: an HPA without `behavior` gets the controller's original rules
//! (a scale-down stabilization window, and at most max(2 × current, 4) replicas per step); one
//! with `behavior` gets its policies, evaluated over the scale events of each policy's period.
//! The memory both need (recent recommendations and scale events) is a [`History`] per HPA.

use std::ops::RangeInclusive;
use std::time::Duration;

use bus_schemas::kinds::hpa::{HorizontalPodAutoscalerBehavior, HpaScalingRules};
use bus_schemas::Time;

/// Recommendations and scale events of one HPA, as far back as its windows reach.
#[derive(Debug, Clone, Default)]
pub struct History {
    recommendations: Vec<(i32, Time)>,
    scale_up_events: Vec<(i32, Time)>,
    scale_down_events: Vec<(i32, Time)>,
}

/// Why the normalized count differs (or not) from the proposal: a condition to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub replicas: i32,
    /// AbleToScale (status True): `ScaleUpStabilized`, `ScaleDownStabilized` or
    /// `ReadyForNewScale`.
    pub stabilized_reason: &'static str,
    pub stabilized_message: &'static str,
    /// ScalingLimited is True when the limit changed the stabilized count.
    pub limited: bool,
    pub limit_reason: &'static str,
    pub limit_message: &'static str,
}

const READY: (&str, &str) = ("ReadyForNewScale", "recommended size matches current size");
const DOWN_STABILIZED: (&str, &str) = (
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, applying the highest recent recommendation",
);
const UP_STABILIZED: (&str, &str) = (
    "ScaleUpStabilized",
    "recent recommendations were lower than current one, applying the lowest recent recommendation",
);
const WITHIN_RANGE: (&str, &str) = (
    "DesiredWithinRange",
    "the desired count is within the acceptable range",
);
const SCALE_UP_LIMIT: (&str, &str) = (
    "ScaleUpLimit",
    "the desired replica count is increasing faster than the maximum scale rate",
);
const SCALE_DOWN_LIMIT: (&str, &str) = (
    "ScaleDownLimit",
    "the desired replica count is decreasing faster than the maximum scale rate",
);
const TOO_MANY: (&str, &str) = (
    "TooManyReplicas",
    "the desired replica count is more than the maximum replica count",
);
const TOO_FEW: (&str, &str) = (
    "TooFewReplicas",
    "the desired replica count is less than the minimum replica count",
);

fn ago(now: Time, seconds: i64) -> Time {
    now - chrono::Duration::seconds(seconds)
}

fn outcome(
    replicas: i32,
    stabilized: (&'static str, &'static str),
    limit: (i32, (&'static str, &'static str)),
) -> Outcome {
    let (limited_to, (limit_reason, limit_message)) = limit;
    Outcome {
        replicas: limited_to,
        stabilized_reason: stabilized.0,
        stabilized_message: stabilized.1,
        limited: limited_to != replicas,
        limit_reason,
        limit_message,
    }
}

impl History {
    /// Starts from what the HPA's status says was last decided, so a process taking over (a
    /// new leader, a restart) does not scale down at once what its predecessor had just
    /// decided to keep: the full stabilization window applies again.
    pub fn resumed(last_desired: i32, now: Time) -> History {
        History {
            recommendations: vec![(last_desired, now)],
            ..History::default()
        }
    }

    /// Without `behavior`: the highest recommendation of the downscale window, then at most
    /// max(2 × current, 4) and within min..=max.
    pub fn normalize_default(
        &mut self,
        current: i32,
        proposed: i32,
        bounds: RangeInclusive<i32>,
        downscale_window: Duration,
        now: Time,
    ) -> Outcome {
        let (min, max) = bounds.into_inner();
        let cutoff = ago(now, downscale_window.as_secs() as i64);
        let mut stabilized = proposed;
        let mut old = None;
        for (i, (rec, at)) in self.recommendations.iter().enumerate() {
            if *at < cutoff {
                old = Some(i);
            } else if *rec > stabilized {
                stabilized = *rec;
            }
        }
        self.remember(old, proposed, now);
        let reason = if stabilized != proposed {
            DOWN_STABILIZED
        } else {
            READY
        };
        let scale_up_limit = (2.0 * f64::from(current)).max(4.0) as i32;
        let (max_allowed, max_reason) = if max > scale_up_limit {
            (scale_up_limit, SCALE_UP_LIMIT)
        } else {
            (max, TOO_MANY)
        };
        let limit = if stabilized < min {
            (min, TOO_FEW)
        } else if stabilized > max_allowed {
            (max_allowed, max_reason)
        } else {
            (stabilized, WITHIN_RANGE)
        };
        outcome(stabilized, reason, limit)
    }

    /// With `behavior` (defaults already filled in by the API, except an unset scale-down
    /// window, which is `downscale_window`).
    pub fn normalize_with_behavior(
        &mut self,
        behavior: &HorizontalPodAutoscalerBehavior,
        current: i32,
        proposed: i32,
        bounds: RangeInclusive<i32>,
        downscale_window: Duration,
        now: Time,
    ) -> Outcome {
        let (min, max) = bounds.into_inner();
        let up = behavior.scale_up.clone().unwrap_or_default();
        let down = behavior.scale_down.clone().unwrap_or_default();
        let up_window = i64::from(up.stabilization_window_seconds.unwrap_or(0));
        let down_window = down
            .stabilization_window_seconds
            .map(i64::from)
            .unwrap_or(downscale_window.as_secs() as i64);
        let (up_cutoff, down_cutoff) = (ago(now, up_window), ago(now, down_window));
        let (mut up_rec, mut down_rec) = (proposed, proposed);
        let mut old = None;
        for (i, (rec, at)) in self.recommendations.iter().enumerate() {
            if *at > up_cutoff {
                up_rec = up_rec.min(*rec);
            }
            if *at > down_cutoff {
                down_rec = down_rec.max(*rec);
            }
            if *at < up_cutoff && *at < down_cutoff {
                old = Some(i);
            }
        }
        let stabilized = current.max(up_rec).min(down_rec);
        self.remember(old, proposed, now);
        let reason = if stabilized == proposed {
            READY
        } else if proposed >= current {
            UP_STABILIZED
        } else {
            DOWN_STABILIZED
        };

        let limit = if stabilized > current {
            let scale_up_limit = self.scale_up_limit(current, &up, now).max(current);
            let (max_allowed, why) = if max > scale_up_limit {
                (scale_up_limit, SCALE_UP_LIMIT)
            } else {
                (max, TOO_MANY)
            };
            if stabilized > max_allowed {
                (max_allowed, why)
            } else {
                (stabilized, WITHIN_RANGE)
            }
        } else if stabilized < current {
            let scale_down_limit = self.scale_down_limit(current, &down, now).min(current);
            let (min_allowed, why) = if min < scale_down_limit {
                (scale_down_limit, SCALE_DOWN_LIMIT)
            } else {
                (min, TOO_FEW)
            };
            if stabilized < min_allowed {
                (min_allowed, why)
            } else {
                (stabilized, WITHIN_RANGE)
            }
        } else {
            (stabilized, WITHIN_RANGE)
        };
        outcome(stabilized, reason, limit)
    }

    /// Records a change the API accepted; the rate limits look back on these.
    pub fn record_scale(
        &mut self,
        behavior: Option<&HorizontalPodAutoscalerBehavior>,
        previous: i32,
        new: i32,
        now: Time,
    ) {
        let Some(behavior) = behavior else {
            return;
        };
        let (events, rules, change) = if new > previous {
            (
                &mut self.scale_up_events,
                &behavior.scale_up,
                new - previous,
            )
        } else {
            (
                &mut self.scale_down_events,
                &behavior.scale_down,
                previous - new,
            )
        };
        let longest = rules
            .as_ref()
            .and_then(|r| r.policies.iter().map(|p| p.period_seconds).max())
            .unwrap_or(0);
        let cutoff = ago(now, i64::from(longest));
        events.retain(|(_, at)| *at >= cutoff);
        events.push((change, now));
    }

    fn remember(&mut self, old: Option<usize>, recommendation: i32, now: Time) {
        match old {
            Some(i) => self.recommendations[i] = (recommendation, now),
            None => self.recommendations.push((recommendation, now)),
        }
    }

    fn change_in_period(events: &[(i32, Time)], period_seconds: i32, now: Time) -> i32 {
        let cutoff = ago(now, i64::from(period_seconds));
        events
            .iter()
            .filter(|(_, at)| *at > cutoff)
            .map(|(change, _)| change)
            .sum()
    }

    fn period_start(&self, current: i32, period_seconds: i32, now: Time) -> i32 {
        current - Self::change_in_period(&self.scale_up_events, period_seconds, now)
            + Self::change_in_period(&self.scale_down_events, period_seconds, now)
    }

    fn scale_up_limit(&self, current: i32, rules: &HpaScalingRules, now: Time) -> i32 {
        let (mut result, pick): (i32, fn(i32, i32) -> i32) = match rules.select_policy.as_str() {
            "Disabled" => return current,
            "Min" => (i32::MAX, i32::min),
            _ => (i32::MIN, i32::max),
        };
        for policy in &rules.policies {
            let start = self.period_start(current, policy.period_seconds, now);
            let proposed = match policy.type_.as_str() {
                "Pods" => start + policy.value,
                // Rounded up, or a small workload could never grow by a percentage.
                _ => (f64::from(start) * (1.0 + f64::from(policy.value) / 100.0)).ceil() as i32,
            };
            result = pick(result, proposed);
        }
        result
    }

    fn scale_down_limit(&self, current: i32, rules: &HpaScalingRules, now: Time) -> i32 {
        let (mut result, pick): (i32, fn(i32, i32) -> i32) = match rules.select_policy.as_str() {
            "Disabled" => return current,
            "Min" => (i32::MIN, i32::max),
            _ => (i32::MAX, i32::min),
        };
        for policy in &rules.policies {
            let start = self.period_start(current, policy.period_seconds, now);
            let proposed = match policy.type_.as_str() {
                "Pods" => start - policy.value,
                _ => (f64::from(start) * (1.0 - f64::from(policy.value) / 100.0)) as i32,
            };
            result = pick(result, proposed);
        }
        result
    }
}
