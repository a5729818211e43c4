//! One HPA pass as a pure function: the HPA, its target's scale, the target's pods and the
//! metrics in → the replica count to set, the status to write and the events to record.
//!
//! Split in two so a hook can sit in between: [`plan`] computes the built-in proposal (every
//! metric, the largest wins), [`decide`] takes the proposal (or the hook's answer) through
//! stabilization, rate limits and min/max. The order of checks is Kubernetes'
//! `reconcileAutoscaler`.

use std::time::Duration;

use bus_schemas::kinds::hpa::{
    ContainerResourceMetricStatus, CrossVersionObjectReference, ExternalMetricStatus,
    HorizontalPodAutoscaler, HorizontalPodAutoscalerStatus, MetricIdentifier, MetricSpec,
    MetricStatus, MetricTarget, MetricValueStatus, ObjectMetricStatus, PodsMetricStatus,
    ResourceMetricStatus, ACTIVATION_ANNOTATION,
};
use bus_schemas::meta::Condition;
use bus_schemas::quantity::Quantity;
use bus_schemas::Time;

use crate::calc::{self, PodInfo, Proposal, Sample, Tolerances};
use crate::normalize::History;

/// Where metric values come from (the bus in the actor, tables in tests).
pub trait MetricsView {
    /// A pod's usage of `resource`, summed over its containers or of one container.
    fn pod_usage(
        &self,
        namespace: &str,
        pod: &str,
        resource: &str,
        container: Option<&str>,
    ) -> Option<Sample>;
    /// A custom per-pod metric.
    fn pod_metric(&self, namespace: &str, pod: &str, metric: &MetricIdentifier) -> Option<Sample>;
    /// A metric describing one object.
    fn object_metric(
        &self,
        namespace: &str,
        object: &CrossVersionObjectReference,
        metric: &MetricIdentifier,
    ) -> Result<i64, String>;
    /// The sum of the external series the identifier's selector matches.
    fn external_metric(&self, namespace: &str, metric: &MetricIdentifier) -> Result<i64, String>;
}

/// What the target's scale subresource reports.
#[derive(Debug, Clone, Copy)]
pub struct TargetScale {
    pub spec_replicas: i32,
    pub status_replicas: i32,
}

impl TargetScale {
    /// The count decisions start from: the replicas the target is set to. (Kubernetes starts
    /// from the observed count, which trails the set one while pods are being created; with
    /// passes every couple of seconds instead of every 15 s, a workload still growing would
    /// look small and be "scaled up" again, spending the rate limit's budget twice.)
    pub fn base(&self) -> i32 {
        self.spec_replicas
    }
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub tolerances: Tolerances,
    /// The scale-down stabilization window when the HPA sets none (Kubernetes' 5 minutes).
    pub downscale_window: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            tolerances: Tolerances::default(),
            downscale_window: Duration::from_secs(300),
        }
    }
}

pub struct Input<'a> {
    pub hpa: &'a HorizontalPodAutoscaler,
    pub target: TargetScale,
    /// The pods the target's selector matches.
    pub pods: &'a [PodInfo],
    pub metrics: &'a dyn MetricsView,
    pub now: Time,
    pub settings: &'a Settings,
}

/// A condition to set: (type, status, reason, message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CondSpec {
    pub type_: &'static str,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

impl CondSpec {
    pub fn new(
        type_: &'static str,
        status: bool,
        reason: &str,
        message: impl Into<String>,
    ) -> Self {
        CondSpec {
            type_,
            status,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// An Event to record about the HPA: (Normal|Warning, reason, message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    pub warning: bool,
    pub reason: String,
    pub message: String,
}

fn warning(reason: &str, message: impl Into<String>) -> EventSpec {
    EventSpec {
        warning: true,
        reason: reason.into(),
        message: message.into(),
    }
}

pub const ABLE_TO_SCALE: &str = "AbleToScale";
pub const SCALING_ACTIVE: &str = "ScalingActive";
pub const SCALING_LIMITED: &str = "ScalingLimited";

/// The metrics' combined proposal.
#[derive(Debug, Clone)]
pub struct MetricsProposal {
    /// The largest valid proposal; `None` when the metrics cannot support a decision.
    pub replicas: Option<i32>,
    /// The metric that proposed it, as events name it.
    pub metric: String,
    /// One per metric spec, in order (a failed one has no current value).
    pub statuses: Vec<MetricStatus>,
    pub active: CondSpec,
    pub events: Vec<EventSpec>,
}

/// What the pass will do before any metric is looked at, or the metrics' proposal.
#[derive(Debug, Clone)]
pub enum Plan {
    /// The target is at zero and the HPA may not scale from there: autoscaling is off.
    Disabled,
    /// Outside min..=max: go straight to the bound.
    Bound {
        desired: i32,
        reason: &'static str,
    },
    Metrics(MetricsProposal),
}

/// Everything the pass decided.
#[derive(Debug, Clone)]
pub struct Decision {
    pub current_replicas: i32,
    pub desired_replicas: i32,
    pub rescale: bool,
    /// For the SuccessfulRescale event: `New size: N; reason: <this>`.
    pub rescale_reason: String,
    pub statuses: Vec<MetricStatus>,
    pub conditions: Vec<CondSpec>,
    pub events: Vec<EventSpec>,
    /// The metrics failed: status keeps its previous desiredReplicas and nothing is scaled.
    pub failed: bool,
}

pub fn plan(input: &Input<'_>) -> Plan {
    let hpa = input.hpa;
    let min = hpa.min_replicas();
    let max = hpa.spec.max_replicas;
    let current = input.target.base();
    if input.target.spec_replicas == 0 && min != 0 {
        return Plan::Disabled;
    }
    if current > max {
        return Plan::Bound {
            desired: max,
            reason: "Current number of replicas above Spec.MaxReplicas",
        };
    }
    if current < min {
        return Plan::Bound {
            desired: min,
            reason: "Current number of replicas below Spec.MinReplicas",
        };
    }
    let mut proposal = propose(input);
    if input.target.spec_replicas == 0 && !activated(input) {
        proposal.replicas = proposal.replicas.map(|_| 0);
    }
    Plan::Metrics(proposal)
}

/// Whether a target at zero may wake: some External or Object metric is above the HPA's
/// activation threshold. An unparsable threshold is refused by validation; here it is 0.
fn activated(input: &Input<'_>) -> bool {
    let Some(threshold) = input.hpa.metadata.annotations.get(ACTIVATION_ANNOTATION) else {
        return true;
    };
    let threshold_milli = threshold
        .parse::<Quantity>()
        .map(|q| q.milli_value())
        .unwrap_or(0);
    let ns = &input.hpa.metadata.namespace;
    input.hpa.spec.metrics.iter().any(|spec| {
        let value = match (spec.external.as_ref(), spec.object.as_ref()) {
            (Some(e), _) if spec.type_ == "External" => {
                input.metrics.external_metric(ns, &e.metric)
            }
            (_, Some(o)) if spec.type_ == "Object" => {
                input
                    .metrics
                    .object_metric(ns, &o.described_object, &o.metric)
            }
            _ => return false,
        };
        value.is_ok_and(|milli| i128::from(milli) > threshold_milli)
    })
}

/// Every metric's proposal; the largest wins. A failed metric blocks a scale-down (it might
/// have asked for more) but not a scale-up.
fn propose(input: &Input<'_>) -> MetricsProposal {
    let specs = &input.hpa.spec.metrics;
    let mut best: Option<(i32, String)> = None;
    let mut statuses = Vec::with_capacity(specs.len());
    let mut events = Vec::new();
    let mut first_failure: Option<(String, String)> = None;
    let mut failures = 0;
    for spec in specs {
        let name = metric_name(spec);
        match propose_one(input, spec) {
            Ok((proposal, status)) => {
                statuses.push(status);
                if best
                    .as_ref()
                    .is_none_or(|(r, _)| *r == 0 || proposal.replicas > *r)
                {
                    best = Some((proposal.replicas, name));
                }
            }
            Err(error) => {
                statuses.push(empty_status(spec));
                let reason = failure_reason(spec);
                events.push(warning(&reason, error.clone()));
                failures += 1;
                first_failure.get_or_insert((reason, error));
            }
        }
    }
    let spec_replicas = input.target.spec_replicas;
    let blocked = failures >= specs.len()
        || (failures > 0 && best.as_ref().is_some_and(|(r, _)| *r < spec_replicas));
    if blocked {
        let (reason, error) = first_failure.unwrap_or_else(|| {
            (
                "InvalidMetricSourceType".into(),
                "the HPA has no metrics".into(),
            )
        });
        let message = format!(
            "invalid metrics ({failures} invalid out of {}), first error is: {error}",
            specs.len()
        );
        events.push(warning("FailedComputeMetricsReplicas", message));
        return MetricsProposal {
            replicas: None,
            metric: String::new(),
            statuses,
            active: CondSpec::new(
                SCALING_ACTIVE,
                false,
                &reason,
                format!("the HPA was unable to compute the replica count: {error}"),
            ),
            events,
        };
    }
    let (replicas, metric) = best.unwrap_or_default();
    MetricsProposal {
        replicas: Some(replicas),
        active: CondSpec::new(
            SCALING_ACTIVE,
            true,
            "ValidMetricFound",
            format!("the HPA was able to successfully calculate a replica count from {metric}"),
        ),
        metric,
        statuses,
        events,
    }
}

/// Takes the plan (with the proposal possibly replaced by a hook's answer) to a decision.
pub fn decide(
    input: &Input<'_>,
    plan: Plan,
    chosen: Option<i32>,
    history: &mut History,
) -> Decision {
    let hpa = input.hpa;
    let current = input.target.base();
    let min = hpa.min_replicas();
    let max = hpa.spec.max_replicas;
    let mut decision = Decision {
        current_replicas: input.target.status_replicas,
        desired_replicas: current,
        rescale: false,
        rescale_reason: String::new(),
        statuses: Vec::new(),
        conditions: Vec::new(),
        events: Vec::new(),
        failed: false,
    };
    match plan {
        Plan::Disabled => {
            decision.desired_replicas = 0;
            decision.conditions.push(CondSpec::new(
                SCALING_ACTIVE,
                false,
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero",
            ));
        }
        Plan::Bound { desired, reason } => {
            decision.desired_replicas = desired;
            decision.rescale = desired != current;
            decision.rescale_reason = reason.into();
        }
        Plan::Metrics(proposal) => {
            decision.statuses = proposal.statuses;
            decision.events = proposal.events;
            decision.conditions.push(proposal.active);
            let Some(proposed) = proposal.replicas else {
                decision.failed = true;
                decision.desired_replicas = hpa.status.desired_replicas;
                return decision;
            };
            let desired = chosen.unwrap_or(proposed).max(0);
            decision.rescale_reason = if desired > current {
                format!("{} above target", proposal.metric)
            } else {
                "All metrics below target".into()
            };
            let outcome = match &hpa.spec.behavior {
                None => history.normalize_default(
                    current,
                    desired,
                    min..=max,
                    input.settings.downscale_window,
                    input.now,
                ),
                Some(behavior) => history.normalize_with_behavior(
                    behavior,
                    current,
                    desired,
                    min..=max,
                    input.settings.downscale_window,
                    input.now,
                ),
            };
            decision.conditions.push(CondSpec::new(
                ABLE_TO_SCALE,
                true,
                outcome.stabilized_reason,
                outcome.stabilized_message,
            ));
            decision.conditions.push(CondSpec::new(
                SCALING_LIMITED,
                outcome.limited,
                outcome.limit_reason,
                outcome.limit_message,
            ));
            decision.desired_replicas = outcome.replicas;
            decision.rescale = outcome.replicas != current;
        }
    }
    decision
}

/// The HPA's new status: `previous` with this pass's observations and conditions.
pub fn status_after(
    previous: &HorizontalPodAutoscalerStatus,
    decision: &Decision,
    extra: &[CondSpec],
    scaled: bool,
    now: Time,
) -> HorizontalPodAutoscalerStatus {
    let mut status = previous.clone();
    status.current_replicas = decision.current_replicas;
    status.desired_replicas = decision.desired_replicas;
    status.current_metrics = decision.statuses.clone();
    if scaled {
        status.last_scale_time = Some(now);
    }
    for spec in decision.conditions.iter().chain(extra) {
        set_condition(&mut status.conditions, spec, now);
    }
    let order = |t: &str| match t {
        ABLE_TO_SCALE => 0,
        SCALING_ACTIVE => 1,
        SCALING_LIMITED => 2,
        _ => 3,
    };
    status.conditions.sort_by_key(|c| order(&c.type_));
    status
}

/// Sets a condition, keeping its transition time when the status did not change.
pub fn set_condition(conditions: &mut Vec<Condition>, spec: &CondSpec, now: Time) {
    let status = if spec.status { "True" } else { "False" };
    match conditions.iter_mut().find(|c| c.type_ == spec.type_) {
        Some(existing) => {
            if existing.status != status {
                existing.last_transition_time = Some(now);
            }
            existing.status = status.into();
            existing.reason = spec.reason.clone();
            existing.message = spec.message.clone();
        }
        None => conditions.push(Condition {
            type_: spec.type_.into(),
            status: status.into(),
            last_transition_time: Some(now),
            reason: spec.reason.clone(),
            message: spec.message.clone(),
            ..Condition::default()
        }),
    }
}

/// How Kubernetes names a metric in events and conditions.
pub fn metric_name(spec: &MetricSpec) -> String {
    let utilization = |t: &MetricTarget| t.type_ == "Utilization";
    match spec.type_.as_str() {
        "Resource" => match &spec.resource {
            Some(r) if utilization(&r.target) => {
                format!("{} resource utilization (percentage of request)", r.name)
            }
            Some(r) => format!("{} resource", r.name),
            None => "resource metric".into(),
        },
        "ContainerResource" => match &spec.container_resource {
            Some(r) if utilization(&r.target) => {
                format!(
                    "{} container resource utilization (percentage of request)",
                    r.name
                )
            }
            Some(r) => format!("{} container resource", r.name),
            None => "container resource metric".into(),
        },
        "Pods" => format!(
            "pods metric {}",
            spec.pods
                .as_ref()
                .map(|p| p.metric.name.as_str())
                .unwrap_or("")
        ),
        "Object" => match &spec.object {
            Some(o) => format!("{} metric {}", o.described_object.kind, o.metric.name),
            None => "object metric".into(),
        },
        "External" => match &spec.external {
            Some(e) => match &e.metric.selector {
                Some(sel) => format!("external metric {}({})", e.metric.name, selector_text(sel)),
                None => format!("external metric {}", e.metric.name),
            },
            None => "external metric".into(),
        },
        other => format!("{other} metric"),
    }
}

fn selector_text(selector: &bus_schemas::selector::LabelSelector) -> String {
    selector
        .to_selector()
        .map(|s| s.to_string())
        .unwrap_or_default()
}

fn failure_reason(spec: &MetricSpec) -> String {
    match spec.type_.as_str() {
        "Resource" => "FailedGetResourceMetric",
        "ContainerResource" => "FailedGetContainerResourceMetric",
        "Pods" => "FailedGetPodsMetric",
        "Object" => "FailedGetObjectMetric",
        "External" => "FailedGetExternalMetric",
        _ => "InvalidMetricSourceType",
    }
    .into()
}

fn milli(q: &Option<Quantity>) -> Option<i64> {
    q.as_ref()
        .map(|q| q.milli_value().clamp(0, i128::from(i64::MAX)) as i64)
}

fn quantity(milli: i64) -> Option<Quantity> {
    Some(Quantity::from_milli(i128::from(milli)))
}

/// The status entry of a metric that could not be read: its identity, no current value.
fn empty_status(spec: &MetricSpec) -> MetricStatus {
    let mut status = MetricStatus {
        type_: spec.type_.clone(),
        ..MetricStatus::default()
    };
    fill_identity(&mut status, spec, MetricValueStatus::default());
    status
}

fn fill_identity(status: &mut MetricStatus, spec: &MetricSpec, current: MetricValueStatus) {
    if let Some(r) = &spec.resource {
        status.resource = Some(ResourceMetricStatus {
            name: r.name.clone(),
            current,
        });
    } else if let Some(r) = &spec.container_resource {
        status.container_resource = Some(ContainerResourceMetricStatus {
            name: r.name.clone(),
            container: r.container.clone(),
            current,
        });
    } else if let Some(p) = &spec.pods {
        status.pods = Some(PodsMetricStatus {
            metric: p.metric.clone(),
            current,
        });
    } else if let Some(o) = &spec.object {
        status.object = Some(ObjectMetricStatus {
            metric: o.metric.clone(),
            current,
            described_object: o.described_object.clone(),
        });
    } else if let Some(e) = &spec.external {
        status.external = Some(ExternalMetricStatus {
            metric: e.metric.clone(),
            current,
        });
    }
}

fn samples_for(
    input: &Input<'_>,
    lookup: impl Fn(&str) -> Option<Sample>,
) -> std::collections::BTreeMap<String, Sample> {
    input
        .pods
        .iter()
        .filter_map(|p| lookup(&p.name).map(|s| (p.name.clone(), s)))
        .collect()
}

fn propose_one(input: &Input<'_>, spec: &MetricSpec) -> Result<(Proposal, MetricStatus), String> {
    let ns = input.hpa.metadata.namespace.as_str();
    let current = input.target.base();
    let tol = &input.settings.tolerances;
    let now = input.now;
    let resource_like = match (&spec.resource, &spec.container_resource) {
        (Some(r), _) if spec.type_ == "Resource" => Some((r.name.as_str(), None, &r.target)),
        (_, Some(r)) if spec.type_ == "ContainerResource" => {
            Some((r.name.as_str(), Some(r.container.as_str()), &r.target))
        }
        _ => None,
    };
    let (proposal, current_value) = if let Some((resource, container, target)) = resource_like {
        let samples = samples_for(input, |pod| {
            input.metrics.pod_usage(ns, pod, resource, container)
        });
        if target.type_ == "Utilization" {
            let percent = target
                .average_utilization
                .ok_or("target averageUtilization is not set")?;
            let p = calc::utilization_replicas(
                current, percent, resource, container, input.pods, &samples, now, tol,
            )?;
            let value = MetricValueStatus {
                average_utilization: p.utilization,
                average_value: quantity(p.value_milli),
                ..Default::default()
            };
            (p, value)
        } else {
            let target = milli(&target.average_value).ok_or("target averageValue is not set")?;
            let p = calc::average_value_replicas(
                current,
                target,
                Some(resource),
                input.pods,
                &samples,
                now,
                tol,
            )?;
            let value = MetricValueStatus {
                average_value: quantity(p.value_milli),
                ..Default::default()
            };
            (p, value)
        }
    } else if let (Some(pods), "Pods") = (&spec.pods, spec.type_.as_str()) {
        let target = milli(&pods.target.average_value).ok_or("target averageValue is not set")?;
        let samples = samples_for(input, |pod| input.metrics.pod_metric(ns, pod, &pods.metric));
        let p =
            calc::average_value_replicas(current, target, None, input.pods, &samples, now, tol)?;
        let value = MetricValueStatus {
            average_value: quantity(p.value_milli),
            ..Default::default()
        };
        (p, value)
    } else if let (Some(object), "Object") = (&spec.object, spec.type_.as_str()) {
        let usage = input
            .metrics
            .object_metric(ns, &object.described_object, &object.metric)?;
        value_proposal(input, &object.target, usage)?
    } else if let (Some(external), "External") = (&spec.external, spec.type_.as_str()) {
        let usage = input.metrics.external_metric(ns, &external.metric)?;
        value_proposal(input, &external.target, usage)?
    } else {
        return Err(format!("unknown metric source type {:?}", spec.type_));
    };
    let mut status = MetricStatus {
        type_: spec.type_.clone(),
        ..MetricStatus::default()
    };
    fill_identity(&mut status, spec, current_value);
    Ok((proposal, status))
}

/// Object and External metrics: one value against Value or AverageValue.
fn value_proposal(
    input: &Input<'_>,
    target: &MetricTarget,
    usage: i64,
) -> Result<(Proposal, MetricValueStatus), String> {
    let current = input.target.base();
    let tol = &input.settings.tolerances;
    if target.type_ == "Value" {
        let target = milli(&target.value).ok_or("target value is not set")?;
        let p = calc::value_replicas(
            current,
            usage,
            target,
            || calc::ready_pod_count(input.pods),
            tol,
        )?;
        let value = MetricValueStatus {
            value: quantity(p.value_milli),
            ..Default::default()
        };
        Ok((p, value))
    } else {
        let target = milli(&target.average_value).ok_or("target averageValue is not set")?;
        let p = calc::average_of_value_replicas(current, usage, target, tol);
        let value = MetricValueStatus {
            average_value: quantity(p.value_milli),
            ..Default::default()
        };
        Ok((p, value))
    }
}
