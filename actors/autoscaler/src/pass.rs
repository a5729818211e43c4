//! One HPA's pass against the cluster: read the target's scale through the API, gather its
//! pods and metrics from the caches, decide (asking the hook if there is one), write the
//! new scale and the HPA's status through the API, record Events, publish the decision.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bus_schemas::api::Scale;
use bus_schemas::autoscaling::{self, HookRequest, HookTarget};
use bus_schemas::kinds::{Deployment, HorizontalPodAutoscaler, Pod, ReplicaSet};
use bus_schemas::meta::find_condition;
use bus_schemas::selector::Selector;
use bus_schemas::{codec, subjects, Time};
use shoal_bus::{ApiClient, ApiError, Informer};
use shoal_controllers::events::{EventRecorder, NORMAL, WARNING};

use crate::calc::{ContainerRequests, PodInfo, Readiness};
use crate::decide::{self, CondSpec, Decision, Input, Plan, Settings, TargetScale, ABLE_TO_SCALE};
use crate::hook::{self, HOOK_ANNOTATION};
use crate::metrics::MetricStore;
use crate::normalize::History;

/// The condition a hook's health is reported in.
pub const HOOK_CONDITION: &str = "HookAnswered";

/// What every pass shares.
pub struct Ctx {
    pub api: ApiClient,
    pub nats: async_nats::Client,
    pub hpas: Informer<HorizontalPodAutoscaler>,
    pub pods: Informer<Pod>,
    pub metrics: MetricStore,
    pub events: EventRecorder,
    pub settings: Settings,
    pub hook_timeout: Duration,
    /// Per HPA uid: recommendations and scale events.
    histories: Mutex<HashMap<String, History>>,
    /// Per HPA uid: consecutive failures to reach the target, and when to try again.
    backoff: Mutex<HashMap<String, (u32, Instant)>>,
}

/// The longest wait between attempts on a target that cannot be scaled.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

impl Ctx {
    pub fn new(
        api: ApiClient,
        nats: async_nats::Client,
        hpas: Informer<HorizontalPodAutoscaler>,
        pods: Informer<Pod>,
        metrics: MetricStore,
        settings: Settings,
        hook_timeout: Duration,
    ) -> Ctx {
        Ctx {
            events: EventRecorder::new(api.clone(), "horizontal-pod-autoscaler"),
            api,
            nats,
            hpas,
            pods,
            metrics,
            settings,
            hook_timeout,
            histories: Mutex::default(),
            backoff: Mutex::default(),
        }
    }

    /// Whether this HPA is waiting out a back-off.
    pub fn backing_off(&self, uid: &str) -> bool {
        self.backoff
            .lock()
            .expect("backoff lock")
            .get(uid)
            .is_some_and(|(_, next)| Instant::now() < *next)
    }

    fn failed(&self, uid: &str) {
        let mut backoff = self.backoff.lock().expect("backoff lock");
        let entry = backoff
            .entry(uid.to_string())
            .or_insert((0, Instant::now()));
        entry.0 += 1;
        let wait = Duration::from_secs(1)
            .saturating_mul(1 << entry.0.min(9))
            .min(MAX_BACKOFF);
        entry.1 = Instant::now() + wait;
    }

    fn succeeded(&self, uid: &str) {
        self.backoff.lock().expect("backoff lock").remove(uid);
    }

    /// Forgets HPAs that are gone.
    pub fn retain(&self, live: &std::collections::HashSet<String>) {
        self.histories
            .lock()
            .expect("history lock")
            .retain(|uid, _| live.contains(uid));
        self.backoff
            .lock()
            .expect("backoff lock")
            .retain(|uid, _| live.contains(uid));
    }
}

async fn get_scale(api: &ApiClient, kind: &str, ns: &str, name: &str) -> Result<Scale, String> {
    let result = match kind {
        "Deployment" => api.get_scale::<Deployment>(ns, name).await,
        "ReplicaSet" => api.get_scale::<ReplicaSet>(ns, name).await,
        other => return Err(format!("{other} has no scale subresource")),
    };
    result.map_err(|e| e.to_string())
}

async fn update_scale(api: &ApiClient, kind: &str, scale: &Scale) -> Result<Scale, ApiError> {
    match kind {
        "ReplicaSet" => api.update_scale::<ReplicaSet>(scale).await,
        _ => api.update_scale::<Deployment>(scale).await,
    }
}

/// Attempts at setting replicas while only the workload's status moves under us.
const SCALE_ATTEMPTS: usize = 4;

/// Sets `replicas` on the scale read as `read`. The write carries the resourceVersion read,
/// so a pass that raced another is refused instead of scaling twice. A conflict caused only
/// by a status write (controllers report often) is retried as long as nobody else changed
/// the replica count; if somebody did, the decision was made on a stale view and is dropped.
async fn set_replicas(
    api: &ApiClient,
    kind: &str,
    read: &Scale,
    replicas: i32,
) -> Result<Scale, ApiError> {
    let mut wanted = read.clone();
    wanted.spec.replicas = replicas;
    let mut attempt = 0;
    loop {
        attempt += 1;
        match update_scale(api, kind, &wanted).await {
            Err(e) if e.is_conflict() && attempt < SCALE_ATTEMPTS => {
                let ns = &read.metadata.namespace;
                let now = get_scale(api, kind, ns, &read.metadata.name)
                    .await
                    .map_err(|_| e)?;
                if now.spec.replicas != read.spec.replicas {
                    return Err(ApiError::Status(bus_schemas::Status::conflict(
                        kind,
                        ns,
                        &read.metadata.name,
                        "replicas changed since the decision: deciding again",
                    )));
                }
                wanted.metadata.resource_version = now.metadata.resource_version;
            }
            other => return other,
        }
    }
}

/// A pod as the calculator sees it.
pub fn pod_info(pod: &Pod) -> PodInfo {
    let ready = find_condition(&pod.status.conditions, "Ready").map(|c| Readiness {
        ready: c.is_true(),
        last_transition: c
            .last_transition_time
            .or(pod.status.start_time)
            .unwrap_or_else(chrono::Utc::now),
    });
    PodInfo {
        name: pod.metadata.name.clone(),
        phase: pod.status.phase.clone(),
        deleting: pod.metadata.deletion_timestamp.is_some(),
        ready,
        start_time: pod.status.start_time,
        container_requests: pod
            .spec
            .containers
            .iter()
            .map(|c| ContainerRequests {
                name: c.name.clone(),
                requests: c
                    .resources
                    .requests
                    .iter()
                    .map(|(r, q)| (r.clone(), q.milli_value().clamp(0, i64::MAX as i128) as i64))
                    .collect(),
            })
            .collect(),
    }
}

/// One HPA's evaluation inside a pass; [`reconcile`] fills in what it decided. It names its
/// actor, as the pass does: it ends first and may be exported in a batch without the pass.
pub fn reconcile_span(pass: &tracing::Span, hpa: &HorizontalPodAutoscaler) -> tracing::Span {
    tracing::info_span!(
        parent: pass,
        "autoscaler.reconcile",
        shoal.actor = "autoscaler",
        kind = "HorizontalPodAutoscaler",
        namespace = %hpa.metadata.namespace,
        name = %hpa.metadata.name,
        target = %hpa.spec.scale_target_ref.name,
        current_replicas = tracing::field::Empty,
        proposal = tracing::field::Empty,
        desired_replicas = tracing::field::Empty,
        outcome = tracing::field::Empty,
    )
}

/// Records the pass's outcome on its span and in the decisions counter.
fn count_outcome(outcome: &'static str) {
    tracing::Span::current().record("outcome", outcome);
    shoal_telemetry::metrics()
        .autoscaler
        .decisions
        .get_or_create(&[shoal_telemetry::metrics::label("outcome", outcome)])
        .inc();
}

/// Runs one pass for `hpa`. Never fails: what goes wrong becomes conditions and Events.
pub async fn reconcile(ctx: &Ctx, hpa: Arc<HorizontalPodAutoscaler>) {
    let now: Time = chrono::Utc::now();
    let uid = hpa.metadata.uid.clone();
    let ns = hpa.metadata.namespace.clone();
    let target_ref = &hpa.spec.scale_target_ref;
    let scale = match get_scale(&ctx.api, &target_ref.kind, &ns, &target_ref.name).await {
        Ok(scale) => scale,
        Err(error) => {
            let message =
                format!("the HPA controller was unable to get the target's current scale: {error}");
            ctx.events
                .record(hpa.as_ref(), WARNING, "FailedGetScale", error);
            let mut status = hpa.status.clone();
            decide::set_condition(
                &mut status.conditions,
                &CondSpec::new(ABLE_TO_SCALE, false, "FailedGetScale", message),
                now,
            );
            write_status(ctx, &hpa, status).await;
            ctx.failed(&uid);
            count_outcome("failed");
            return;
        }
    };
    ctx.succeeded(&uid);
    let selector = match Selector::parse(&scale.status.selector) {
        Ok(s) if !scale.status.selector.is_empty() => s,
        _ => {
            let mut status = hpa.status.clone();
            let message = format!(
                "the HPA target's scale is missing a usable selector: {:?}",
                scale.status.selector
            );
            decide::set_condition(
                &mut status.conditions,
                &CondSpec::new(
                    decide::SCALING_ACTIVE,
                    false,
                    "InvalidSelector",
                    message.clone(),
                ),
                now,
            );
            ctx.events
                .record(hpa.as_ref(), WARNING, "InvalidSelector", message);
            write_status(ctx, &hpa, status).await;
            count_outcome("failed");
            return;
        }
    };
    let pods: Vec<PodInfo> = ctx
        .pods
        .list(Some(&ns), &selector)
        .iter()
        .map(|p| pod_info(p))
        .collect();
    let target = TargetScale {
        spec_replicas: scale.spec.replicas,
        status_replicas: scale.status.replicas,
    };
    let input = Input {
        hpa: &hpa,
        target,
        pods: &pods,
        metrics: &ctx.metrics,
        now,
        settings: &ctx.settings,
    };
    let plan = decide::plan(&input);
    let hook_target = HookTarget {
        kind: target_ref.kind.clone(),
        name: target_ref.name.clone(),
        spec_replicas: scale.spec.replicas,
        selector: scale.status.selector.clone(),
    };
    let (proposal, hook_answer, hook_condition) =
        consult_hook(ctx, &hpa, &plan, &hook_target).await;
    let mut decision = {
        let mut histories = ctx.histories.lock().expect("history lock");
        let history = histories
            .entry(uid.clone())
            .or_insert_with(|| History::resumed(hpa.status.desired_replicas, now));
        decide::decide(&input, plan, hook_answer, history)
    };
    let mut extra = Vec::new();
    extra.extend(hook_condition);
    let mut scaled = false;
    if decision.rescale {
        if let Some(reason) = hook_answer.and(hook_reason(&hpa)) {
            decision.rescale_reason = reason;
        }
        match set_replicas(
            &ctx.api,
            &target_ref.kind,
            &scale,
            decision.desired_replicas,
        )
        .await
        {
            Ok(_) => {
                scaled = true;
                ctx.histories
                    .lock()
                    .expect("history lock")
                    .entry(uid.clone())
                    .or_default()
                    .record_scale(
                        hpa.spec.behavior.as_ref(),
                        scale.spec.replicas,
                        decision.desired_replicas,
                        now,
                    );
                extra.push(CondSpec::new(
                    ABLE_TO_SCALE,
                    true,
                    "SucceededRescale",
                    format!(
                        "the HPA controller was able to update the target scale to {}",
                        decision.desired_replicas
                    ),
                ));
                ctx.events.record(
                    hpa.as_ref(),
                    NORMAL,
                    "SuccessfulRescale",
                    format!(
                        "New size: {}; reason: {}",
                        decision.desired_replicas, decision.rescale_reason
                    ),
                );
            }
            Err(e) => {
                extra.push(CondSpec::new(
                    ABLE_TO_SCALE,
                    false,
                    "FailedUpdateScale",
                    format!("the HPA controller was unable to update the target scale: {e}"),
                ));
                ctx.events.record(
                    hpa.as_ref(),
                    WARNING,
                    "FailedRescale",
                    format!(
                        "New size: {}; reason: {}; error: {e}",
                        decision.desired_replicas, decision.rescale_reason
                    ),
                );
                decision.desired_replicas = hpa.status.desired_replicas;
            }
        }
    }
    for event in &decision.events {
        let type_ = if event.warning { WARNING } else { NORMAL };
        ctx.events
            .record(hpa.as_ref(), type_, &event.reason, event.message.clone());
    }
    let span = tracing::Span::current();
    span.record("current_replicas", scale.spec.replicas);
    span.record("proposal", proposal);
    span.record("desired_replicas", decision.desired_replicas);
    count_outcome(match (scaled, decision.failed) {
        (true, _) if decision.desired_replicas > scale.spec.replicas => "scaled_up",
        (true, _) => "scaled_down",
        (false, true) => "failed",
        (false, false) if decision.rescale => "failed",
        (false, false) => "unchanged",
    });
    let status = decide::status_after(&hpa.status, &decision, &extra, scaled, now);
    write_status(ctx, &hpa, status).await;
    publish_decision(
        ctx,
        &hpa,
        hook_target,
        proposal,
        hook_answer,
        &decision,
        scaled,
        now,
    )
    .await;
}

fn hook_reason(hpa: &HorizontalPodAutoscaler) -> Option<String> {
    hpa.metadata
        .annotations
        .get(HOOK_ANNOTATION)
        .map(|name| format!("autoscaling hook {name}"))
}

/// The built-in proposal, the hook's answer (if it was asked and answered) and the hook
/// condition to set (if the HPA has a hook).
async fn consult_hook(
    ctx: &Ctx,
    hpa: &HorizontalPodAutoscaler,
    plan: &Plan,
    target: &HookTarget,
) -> (i32, Option<i32>, Option<CondSpec>) {
    let Plan::Metrics(proposal) = plan else {
        return (target.spec_replicas, None, None);
    };
    let Some(replicas) = proposal.replicas else {
        return (target.spec_replicas, None, None);
    };
    let Some(name) = hpa.metadata.annotations.get(HOOK_ANNOTATION) else {
        return (replicas, None, None);
    };
    let request = HookRequest {
        hpa: hpa.clone(),
        target: target.clone(),
        current_replicas: hpa.status.current_replicas,
        metrics: proposal.statuses.clone(),
        proposal: replicas,
    };
    match hook::ask(&ctx.nats, name, &request, ctx.hook_timeout).await {
        Ok(reply) => (
            replicas,
            Some(reply.desired_replicas),
            Some(CondSpec::new(
                HOOK_CONDITION,
                true,
                "HookAnswered",
                format!(
                    "hook {name} asked for {} replicas{}",
                    reply.desired_replicas,
                    if reply.reason.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", reply.reason)
                    }
                ),
            )),
        ),
        Err(e) => {
            let message = format!("{e}; using the built-in proposal of {replicas}");
            ctx.events
                .record(hpa, WARNING, "HookFailed", message.clone());
            (
                replicas,
                None,
                Some(CondSpec::new(HOOK_CONDITION, false, "HookFailed", message)),
            )
        }
    }
}

async fn write_status(
    ctx: &Ctx,
    hpa: &HorizontalPodAutoscaler,
    status: bus_schemas::kinds::hpa::HorizontalPodAutoscalerStatus,
) {
    if status == hpa.status {
        return;
    }
    let mut updated = hpa.clone();
    updated.status = status;
    updated.status.observed_generation = Some(hpa.metadata.generation);
    if let Err(e) = ctx.api.update_status(&updated).await {
        // The next pass writes it again from fresher state.
        tracing::debug!(hpa = %hpa.metadata.name, error = %e, "HPA status not written");
    }
}

#[allow(clippy::too_many_arguments)]
async fn publish_decision(
    ctx: &Ctx,
    hpa: &HorizontalPodAutoscaler,
    target: HookTarget,
    proposal: i32,
    hook_replicas: Option<i32>,
    decision: &Decision,
    rescaled: bool,
    now: Time,
) {
    let record = autoscaling::Decision {
        namespace: hpa.metadata.namespace.clone(),
        hpa: hpa.metadata.name.clone(),
        target,
        current_replicas: decision.current_replicas,
        proposal,
        hook_replicas,
        desired_replicas: decision.desired_replicas,
        rescaled,
        reason: decision.rescale_reason.clone(),
        time: now,
    };
    if let Ok(body) = codec::to_msgpack(&record) {
        let subject = subjects::autoscaler_decision(&hpa.metadata.namespace, &hpa.metadata.name);
        let _ = ctx.nats.publish(subject, body.into()).await;
    }
}

#[cfg(test)]
mod tests {
    use shoal_telemetry::span_actors::span_actors;

    use super::*;

    #[test]
    fn an_hpas_evaluation_names_the_autoscaler_as_its_actor() {
        let spans = span_actors(|| {
            let pass = tracing::info_span!("autoscaler.pass", shoal.actor = "autoscaler");
            let _evaluation = reconcile_span(&pass, &HorizontalPodAutoscaler::default());
        });
        assert_eq!(
            spans.last(),
            Some(&("autoscaler.reconcile", Some("autoscaler".to_string())))
        );
    }
}
