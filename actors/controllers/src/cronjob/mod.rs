//! CronJob controller: starts a CronJob's Jobs on its schedule, keeps its history within
//! the limits and its status (active, lastScheduleTime, lastSuccessfulTime) current.
//!
//! [`decide`] is pure (CronJob, its Jobs, now); [`reconcile`] performs its decision. Time
//! comes from the injected [`crate::clock::Clock`]: on the system clock a CronJob is
//! requeued for its next start; on a manual clock every CronJob is looked at again
//! whenever the clock is set.

pub mod decide;

use std::sync::Arc;
use std::time::Duration;

use bus_schemas::kinds::{CronJob, Job};
use bus_schemas::Resource;
use shoal_bus::controller::{self, Action};
use shoal_bus::informer::INDEX_OWNER;
use shoal_bus::shutdown::Shutdown;
use shoal_bus::workqueue::WorkQueue;
use tokio::task::JoinHandle;

use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::podutil::{self, is_owned_by};
use crate::{owner_key, spawn};
pub use decide::{decide, job_for, job_name, CronJobDecision};

pub const NAME: &str = "cronjob";

pub async fn reconcile(cronjob: Arc<CronJob>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let uid = &cronjob.metadata.uid;
    let ns = &cronjob.metadata.namespace;
    let key = format!("{ns}/{}", cronjob.metadata.name);
    let jobs: Vec<Arc<Job>> = ctx
        .jobs
        .by_index(INDEX_OWNER, uid)
        .into_iter()
        .filter(|j| is_owned_by(&j.metadata, uid))
        .collect();
    let now = ctx.tunables.clock.now();
    let d = decide(&cronjob, &jobs, now);
    for name in d.prune.iter().chain(&d.replace) {
        crate::gc::delete_any(&ctx, "Job", ns, name, Some("Background"), None).await?;
    }
    if let Some(scheduled) = d.start {
        let job = job_for(&cronjob, scheduled);
        match ctx.api.create(&job).await {
            Ok(_) => ctx.events.record(
                cronjob.as_ref(),
                crate::events::NORMAL,
                "SuccessfulCreate",
                format!("Created job {}", job.metadata.name),
            ),
            Err(e) if e.is_already_exists() => {}
            Err(e) => return Err(ReconcileError::api("create", "Job", key, e)),
        }
    }
    for name in &d.replace {
        ctx.events.record(
            cronjob.as_ref(),
            crate::events::NORMAL,
            "SuccessfulDelete",
            format!("Deleted job {name}"),
        );
    }
    for (type_, reason, message) in &d.events {
        ctx.events
            .record(cronjob.as_ref(), type_, reason, message.clone());
    }
    if d.status != cronjob.status {
        let mut next = (*cronjob).clone();
        next.status = d.status;
        ctx.api
            .update_status(&next)
            .await
            .map_err(|e| ReconcileError::api("update-status", "CronJob", key, e))?;
    }
    Ok(match (d.wake_at, &ctx.tunables.clock) {
        // A manual clock wakes every CronJob when it is set.
        (_, crate::clock::Clock::Manual(_)) | (None, _) => Action::AwaitChange,
        (Some(at), _) => Action::RequeueAfter(podutil::until(at, now) + Duration::from_millis(50)),
    })
}

/// Triggers: the CronJob's Jobs, and every setting of a manual clock.
pub fn start(ctx: &Arc<Ctx>, sd: &Shutdown) -> JoinHandle<()> {
    let queue = WorkQueue::new(Default::default());
    controller::feed_mapped(&ctx.jobs, queue.clone(), |_, job: &Job| {
        owner_key::<CronJob>(&job.metadata)
    });
    if let Some(mut changes) = ctx.tunables.clock.changes() {
        let (informer, queue, sd) = (ctx.cronjobs.clone(), queue.clone(), sd.clone());
        tokio::spawn(async move {
            let stop = sd.wait();
            tokio::pin!(stop);
            loop {
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return },
                    _ = &mut stop => return,
                }
                for key in informer.keys() {
                    queue.add(key);
                }
            }
        });
    }
    spawn(NAME, ctx.cronjobs.clone(), queue, ctx, reconcile, sd)
}

/// The Job `shoal create job NAME --from=cronjob/CJ` makes: the CronJob's template, owned
/// by it (so its history and GC include it), marked as started by hand.
pub fn manual_job(cronjob: &CronJob, name: &str) -> Job {
    let mut job = cronjob.job_from_template();
    job.metadata.name = name.to_string();
    job.metadata
        .annotations
        .insert("cronjob.kubernetes.io/instantiate".into(), "manual".into());
    job.metadata.owner_references = vec![podutil::controller_ref(cronjob)];
    job.set_type_meta();
    job
}
