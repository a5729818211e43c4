//! One VerticalPodAutoscaler against the cluster: its recommendation written to its status
//! (only through the API), and in Recreate mode the next pod outside its bounds evicted,
//! with Events saying why. Never fails: what goes wrong is logged and retried next pass.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bus_schemas::api::{DeleteOptions, Preconditions};
use bus_schemas::kinds::vpa::{
    RecommendedPodResources, VerticalPodAutoscaler, VerticalPodAutoscalerStatus,
    RECOMMENDATION_PROVIDED,
};
use bus_schemas::kinds::Pod;
use bus_schemas::meta::{set_condition, Condition};
use bus_schemas::Time;
use shoal_bus::{ApiClient, Informer, InformerFactory};
use shoal_controllers::events::{EventRecorder, NORMAL, WARNING};

use super::recommend::recommend;
use super::recreate::{self, Decision};
use super::Recommender;

/// What every VPA pass shares.
pub struct Ctx {
    pub api: ApiClient,
    pub informers: InformerFactory,
    pub vpas: Informer<VerticalPodAutoscaler>,
    pub pods: Informer<Pod>,
    pub recommender: Recommender,
    pub recommender_events: EventRecorder,
    pub updater_events: EventRecorder,
    /// An unchanged target is written again after this long, so the bounds (which narrow
    /// as history grows) stay current without a write every pass (upstream: 1 minute).
    pub status_period: Duration,
    /// Per VPA uid: when its status was last written.
    written: Mutex<HashMap<String, Instant>>,
}

impl Ctx {
    pub fn new(
        api: ApiClient,
        informers: InformerFactory,
        recommender: Recommender,
        status_period: Duration,
    ) -> Ctx {
        Ctx {
            recommender_events: EventRecorder::new(api.clone(), "vpa-recommender"),
            updater_events: EventRecorder::new(api.clone(), "vpa-updater"),
            vpas: informers.get(),
            pods: informers.get(),
            api,
            informers,
            recommender,
            status_period,
            written: Mutex::default(),
        }
    }
}

/// Every VPA once.
pub async fn all(ctx: &Ctx) {
    let vpas = ctx
        .vpas
        .list(None, &bus_schemas::selector::Selector::everything());
    ctx.written
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|uid, _| vpas.iter().any(|v| &v.metadata.uid == uid));
    for vpa in vpas {
        reconcile(ctx, vpa).await;
    }
}

/// The status the recommender would write now (pure): the recommendation for every
/// container with usage, and `RecommendationProvided`.
pub fn status(
    vpa: &VerticalPodAutoscaler,
    estimates: &std::collections::BTreeMap<String, super::recommend::Estimate>,
    now: Time,
) -> VerticalPodAutoscalerStatus {
    let containers: Vec<_> = estimates
        .iter()
        .filter_map(|(c, e)| recommend(vpa, c, e))
        .collect();
    let mut status = vpa.status.clone();
    let condition = if containers.is_empty() {
        Condition {
            type_: RECOMMENDATION_PROVIDED.into(),
            status: "False".into(),
            reason: "NoUsageSamples".into(),
            message: "no usage samples of the target's pods yet".into(),
            ..Default::default()
        }
    } else {
        status.recommendation = Some(RecommendedPodResources {
            container_recommendations: containers,
        });
        Condition {
            type_: RECOMMENDATION_PROVIDED.into(),
            status: "True".into(),
            ..Default::default()
        }
    };
    set_condition(&mut status.conditions, condition, now);
    status
}

pub async fn reconcile(ctx: &Ctx, vpa: Arc<VerticalPodAutoscaler>) {
    let now: Time = chrono::Utc::now();
    let ns = vpa.metadata.namespace.clone();
    let estimates = ctx.recommender.estimates(&ns, &vpa.metadata.name);
    let status = status(&vpa, &estimates, now);
    let mut current = (*vpa).clone();
    let due = {
        let written = ctx.written.lock().unwrap_or_else(|e| e.into_inner());
        written
            .get(&vpa.metadata.uid)
            .is_none_or(|at| at.elapsed() >= ctx.status_period)
    };
    let targets_changed =
        targets(&status) != targets(&vpa.status) || status.conditions != vpa.status.conditions;
    if status != vpa.status && (targets_changed || due) {
        current.status = status;
        match ctx.api.update_status(&current).await {
            Ok(updated) => {
                if vpa.status.recommendation.is_none() && updated.status.recommendation.is_some() {
                    ctx.recommender_events.record(
                        &updated,
                        NORMAL,
                        "RecommendationProvided",
                        "first recommendation written from the pods' usage",
                    );
                }
                ctx.written
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(vpa.metadata.uid.clone(), Instant::now());
                current = updated;
            }
            Err(e) => {
                tracing::debug!(vpa = %vpa.metadata.name, error = %e, "VPA status not written");
                return;
            }
        }
    }
    if current.recreates() {
        evict_next(ctx, &current).await;
    }
}

fn targets(status: &VerticalPodAutoscalerStatus) -> Vec<(String, Vec<(String, i128)>)> {
    status
        .recommendation
        .iter()
        .flat_map(|r| &r.container_recommendations)
        .map(|c| {
            let target = c.target.iter().map(|(k, q)| (k.clone(), q.milli_value()));
            (c.container_name.clone(), target.collect())
        })
        .collect()
}

async fn evict_next(ctx: &Ctx, vpa: &VerticalPodAutoscaler) {
    let Some(target) = &vpa.spec.target_ref else {
        return;
    };
    let ns = &vpa.metadata.namespace;
    let workload = match shoal_bus::workloads::workload(
        &ctx.informers,
        ns,
        &target.kind,
        &target.name,
    )
    .await
    {
        Ok(Some(w)) => w,
        _ => return,
    };
    let Some(selector) = super::usable(&workload.selector) else {
        return;
    };
    let pods = ctx.pods.list(Some(ns), &selector);
    let refs: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
    match recreate::next(vpa, &refs, workload.replicas) {
        Decision::Evict(eviction) => {
            let options = DeleteOptions {
                namespace: ns.clone(),
                name: eviction.pod.clone(),
                preconditions: Some(Preconditions {
                    uid: Some(eviction.uid.clone()),
                    resource_version: None,
                }),
                ..Default::default()
            };
            let pod = pods.iter().find(|p| p.metadata.name == eviction.pod);
            match ctx.api.delete::<Pod>(&options).await {
                Ok(_) => {
                    let message = format!(
                        "Pod was evicted by VPA Updater to apply resource recommendation: {}",
                        eviction.reason
                    );
                    tracing::info!(vpa = %vpa.metadata.name, pod = %eviction.pod, %message, "evicted");
                    if let Some(pod) = pod {
                        ctx.updater_events.record(
                            pod.as_ref(),
                            NORMAL,
                            "EvictedByVPA",
                            message.clone(),
                        );
                    }
                    ctx.updater_events.record(
                        vpa,
                        NORMAL,
                        "EvictedPod",
                        format!(
                            "VPA Updater evicted pod {}: {}",
                            eviction.pod, eviction.reason
                        ),
                    );
                }
                Err(e) => {
                    ctx.updater_events.record(
                        vpa,
                        WARNING,
                        "EvictionFailed",
                        format!("evicting pod {}: {e}", eviction.pod),
                    );
                }
            }
        }
        Decision::Wait(why) => {
            tracing::debug!(vpa = %vpa.metadata.name, %why, "pods to replace, waiting");
        }
        Decision::Nothing => {}
    }
}
