//! Job controller: pods that run to completion, retried with back-off up to a limit.
//!
//! Finalizer-free tracking: the Job counts the terminal pods it owns (and never lowers the
//! counts it already reported); terminal pods are kept until the Job finishes, then go with
//! it (ttlSecondsAfterFinished deletes the Job, GC its pods). Pods with restartPolicy
//! OnFailure are restarted by their node; only a pod that ends Failed counts as a failure.
//!
//! [`decide`] is pure; [`reconcile`] performs its decision.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bus_schemas::kinds::container::EnvVar;
use bus_schemas::kinds::job::JobStatus;
use bus_schemas::kinds::{Job, Pod};
use bus_schemas::meta::{set_condition, Condition, Time};
use shoal_bus::controller::Action;
use shoal_bus::informer::INDEX_OWNER;

use crate::context::Ctx;
use crate::error::ReconcileError;
use crate::events::{NORMAL, WARNING};
use crate::podutil::{self, is_active, is_owned_by};
use crate::{owner_key, spawn};
use shoal_bus::controller;
use shoal_bus::shutdown::Shutdown;
use shoal_bus::workqueue::WorkQueue;
use tokio::task::JoinHandle;

pub const NAME: &str = "job";
pub const INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";
pub const INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

#[derive(Debug, Clone, PartialEq)]
pub struct JobDecision {
    /// Pods to create: the completion index of each (None for NonIndexed).
    pub create: Vec<Option<i32>>,
    pub delete: Vec<String>,
    pub status: JobStatus,
    /// The condition that finishes the Job now, with its event: (type, reason, message).
    pub finished: Option<(String, String, String)>,
    /// Delete the Job itself (its TTL after finishing passed).
    pub delete_job: bool,
    pub requeue_after: Option<Duration>,
}

/// Parses `1,3-5` into {1,3,4,5}; malformed parts are skipped.
pub fn parse_indexes(s: &str) -> BTreeSet<i32> {
    let mut out = BTreeSet::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
                    out.extend(a..=b.min(a.saturating_add(1_000_000)));
                }
            }
            None => {
                if let Ok(i) = part.parse() {
                    out.insert(i);
                }
            }
        }
    }
    out
}

/// Renders indexes as ranges: {0,1,2,4} → `0-2,4`.
pub fn format_indexes(set: &BTreeSet<i32>) -> String {
    let mut parts = Vec::new();
    let mut iter = set.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end += 1;
            iter.next();
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    parts.join(",")
}

pub fn index_of(pod: &Pod) -> Option<i32> {
    pod.metadata.annotations.get(INDEX_ANNOTATION)?.parse().ok()
}

/// When a terminal pod finished: its containers' finish time, else its last condition
/// change, else its creation.
fn finished_at(pod: &Pod) -> Option<Time> {
    let containers = pod.status.container_statuses.iter();
    containers
        .filter_map(|c| c.state.terminated.as_ref().and_then(|t| t.finished_at))
        .max()
        .or_else(|| {
            pod.status
                .conditions
                .iter()
                .filter_map(|c| c.last_transition_time)
                .max()
        })
        .or(pod.metadata.creation_timestamp)
}

/// Back-off after `failures` failed pods: base · 2^(failures-1), capped.
pub fn backoff(failures: i32, base: Duration, max: Duration) -> Duration {
    if failures <= 0 {
        return Duration::ZERO;
    }
    let earlier = u32::try_from(failures - 1).unwrap_or(0);
    shoal_bus::backoff::Backoff::new(base, max).delay(earlier)
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

pub fn decide(
    job: &Job,
    pods: &[Arc<Pod>],
    now: Time,
    backoff_base: Duration,
    backoff_max: Duration,
) -> JobDecision {
    let spec = &job.spec;
    let mut status = job.status.clone();
    let mut d = JobDecision {
        create: Vec::new(),
        delete: Vec::new(),
        status: status.clone(),
        finished: None,
        delete_job: false,
        requeue_after: None,
    };
    if job.metadata.is_deleting() {
        return d;
    }
    // Finished: only the TTL is left to watch.
    if job.is_finished() {
        if let Some(ttl) = spec.ttl_seconds_after_finished {
            let done_at = job
                .status
                .conditions
                .iter()
                .filter(|c| c.is_true() && (c.type_ == "Complete" || c.type_ == "Failed"))
                .filter_map(|c| c.last_transition_time)
                .max()
                .or(job.status.completion_time)
                .unwrap_or(now);
            let expire = done_at + chrono::Duration::seconds(i64::from(ttl));
            if expire <= now {
                d.delete_job = true;
            } else {
                d.requeue_after = Some(podutil::until(expire, now));
            }
        }
        return d;
    }
    let indexed = spec.completion_mode == "Indexed";
    let completions = spec.completions;
    let parallelism = spec.parallelism.unwrap_or(1).max(0);
    let active: Vec<&Pod> = pods
        .iter()
        .map(|p| p.as_ref())
        .filter(|p| is_active(p))
        .collect();
    let succeeded: Vec<&Pod> = pods
        .iter()
        .map(|p| p.as_ref())
        .filter(|p| p.status.phase == "Succeeded")
        .collect();
    let failed: Vec<&Pod> = pods
        .iter()
        .map(|p| p.as_ref())
        .filter(|p| p.status.phase == "Failed")
        .collect();

    let mut done_indexes = parse_indexes(&status.completed_indexes);
    if indexed {
        let limit = completions.unwrap_or(0);
        done_indexes.extend(
            succeeded
                .iter()
                .filter_map(|p| index_of(p))
                .filter(|i| *i >= 0 && *i < limit),
        );
        status.completed_indexes = format_indexes(&done_indexes);
        status.succeeded = count(done_indexes.len());
    } else {
        status.succeeded = status.succeeded.max(count(succeeded.len()));
    }
    status.failed = status.failed.max(count(failed.len()));
    status.active = count(active.len());
    status.ready = Some(count(active.iter().filter(|p| p.is_ready()).count()));
    if status.start_time.is_none() && !job.is_suspended() {
        status.start_time = Some(now);
    }

    let all_active: Vec<String> = active.iter().map(|p| p.metadata.name.clone()).collect();
    let finish = |type_: &str, reason: &str, message: String| {
        Some((type_.to_string(), reason.to_string(), message))
    };
    let backoff_limit = spec.backoff_limit.unwrap_or(6);
    let deadline = match (spec.active_deadline_seconds, status.start_time) {
        (Some(s), Some(start)) => Some(start + chrono::Duration::seconds(s)),
        _ => None,
    };
    let complete = match completions {
        Some(c) if indexed => count(done_indexes.len()) >= c,
        Some(c) => status.succeeded >= c,
        None => status.succeeded > 0 && active.is_empty(),
    };
    if status.failed > backoff_limit {
        d.finished = finish(
            "Failed",
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit".into(),
        );
        d.delete = all_active;
    } else if deadline.is_some_and(|t| t <= now) {
        d.finished = finish(
            "Failed",
            "DeadlineExceeded",
            "Job was active longer than specified deadline".into(),
        );
        d.delete = all_active;
    } else if complete {
        d.finished = finish("Complete", "Completed", "Job completed".into());
        status.completion_time = Some(now);
        d.delete = all_active;
    } else if job.is_suspended() {
        d.delete = all_active;
    } else {
        let want = match completions {
            Some(c) if indexed => parallelism.min(c - count(done_indexes.len())),
            Some(c) => parallelism.min(c - status.succeeded),
            None if status.succeeded > 0 => 0,
            None => parallelism,
        }
        .max(0);
        let have = count(active.len());
        if have < want {
            let last_failure = failed.iter().filter_map(|p| finished_at(p)).max();
            let delay =
                chrono::Duration::from_std(backoff(status.failed, backoff_base, backoff_max))
                    .unwrap_or_default();
            match last_failure.map(|t| t + delay).filter(|t| *t > now) {
                Some(retry_at) => {
                    d.requeue_after =
                        Some(podutil::until(retry_at, now) + Duration::from_millis(20))
                }
                None => {
                    let n = usize::try_from(want - have).unwrap_or(0);
                    if indexed {
                        let held: BTreeSet<i32> =
                            active.iter().filter_map(|p| index_of(p)).collect();
                        let free = (0..completions.unwrap_or(0))
                            .filter(|i| !done_indexes.contains(i) && !held.contains(i));
                        d.create = free.take(n).map(Some).collect();
                    } else {
                        d.create = vec![None; n];
                    }
                }
            }
        } else if have > want {
            let order = crate::replicaset::deletion_order(active.clone());
            d.delete = order
                .iter()
                .take(usize::try_from(have - want).unwrap_or(0))
                .map(|p| p.metadata.name.clone())
                .collect();
        }
        if let Some(t) = deadline {
            let until = podutil::until(t, now) + Duration::from_millis(20);
            d.requeue_after = Some(d.requeue_after.map_or(until, |r| r.min(until)));
        }
    }
    if let Some((type_, reason, message)) = &d.finished {
        let cond = Condition {
            type_: type_.clone(),
            status: "True".into(),
            reason: reason.clone(),
            message: message.clone(),
            last_probe_time: Some(now),
            ..Default::default()
        };
        set_condition(&mut status.conditions, cond, now);
        if let Some(ttl) = spec.ttl_seconds_after_finished {
            d.requeue_after = Some(
                Duration::from_secs(u64::try_from(ttl.max(0)).unwrap_or(0))
                    + Duration::from_millis(20),
            );
        }
    }
    d.status = status;
    d
}

/// A pod for the Job, with its completion index wired in for Indexed Jobs.
pub fn job_pod(job: &Job, index: Option<i32>) -> Pod {
    let generate = match index {
        Some(i) => format!("{}-{i}-", job.metadata.name),
        None => format!("{}-", job.metadata.name),
    };
    let mut pod = podutil::pod_from_template(
        &job.spec.template,
        &job.metadata.namespace,
        &generate,
        podutil::controller_ref(job),
    );
    if let Some(i) = index {
        pod.metadata
            .annotations
            .insert(INDEX_ANNOTATION.into(), i.to_string());
        pod.metadata
            .labels
            .insert(INDEX_ANNOTATION.into(), i.to_string());
        if pod.spec.hostname.is_empty() {
            pod.spec.hostname = format!("{}-{i}", job.metadata.name);
        }
        for c in pod
            .spec
            .init_containers
            .iter_mut()
            .chain(pod.spec.containers.iter_mut())
        {
            c.env.retain(|e| e.name != INDEX_ENV);
            c.env.push(EnvVar {
                name: INDEX_ENV.into(),
                value: i.to_string(),
                value_from: None,
            });
        }
    }
    pod
}

pub async fn reconcile(job: Arc<Job>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let uid = job.metadata.uid.clone();
    let key = format!("{}/{}", job.metadata.namespace, job.metadata.name);
    ctx.expectations.wait(&uid, &ctx.pods).await;
    let pods: Vec<Arc<Pod>> = ctx
        .pods
        .by_index(INDEX_OWNER, &uid)
        .into_iter()
        .filter(|p| is_owned_by(&p.metadata, &uid))
        .collect();
    let now = podutil::now();
    let t = &ctx.tunables;
    let d = decide(&job, &pods, now, t.job_backoff_base, t.job_backoff_max);
    if d.delete_job {
        crate::gc::delete_any(
            &ctx,
            "Job",
            &job.metadata.namespace,
            &job.metadata.name,
            Some("Background"),
            None,
        )
        .await?;
        return Ok(Action::AwaitChange);
    }
    for name in &d.delete {
        crate::replicaset::delete_pod(&ctx, job.as_ref(), &job.metadata.namespace, name).await?;
    }
    let pods: Vec<Pod> = d.create.iter().map(|index| job_pod(&job, *index)).collect();
    crate::create::create_pods(&ctx, job.as_ref(), pods)
        .await
        .map_err(|e| ReconcileError::api("create", "Pod", key.clone(), e))?;
    if let Some((type_, reason, message)) = &d.finished {
        let kind = if type_ == "Failed" { WARNING } else { NORMAL };
        ctx.events
            .record(job.as_ref(), kind, reason, message.clone());
    }
    if d.status != job.status {
        let mut next = (*job).clone();
        next.status = d.status;
        ctx.api
            .update_status(&next)
            .await
            .map_err(|e| ReconcileError::api("update-status", "Job", key, e))?;
    }
    Ok(match d.requeue_after {
        Some(after) => Action::RequeueAfter(after),
        None => Action::AwaitChange,
    })
}

/// Triggers: the Job's pods.
pub fn start(ctx: &Arc<Ctx>, sd: &Shutdown) -> JoinHandle<()> {
    let queue = WorkQueue::new(Default::default());
    controller::feed_mapped(&ctx.pods, queue.clone(), |_, pod: &Pod| {
        owner_key::<Job>(&pod.metadata)
    });
    spawn(NAME, ctx.jobs.clone(), queue, ctx, reconcile, sd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(completions: Option<i32>, parallelism: i32, indexed: bool) -> Job {
        let mut j = Job::default();
        j.metadata.name = "batch".into();
        j.metadata.namespace = "default".into();
        j.metadata.uid = "job-uid".into();
        j.spec.completions = completions;
        j.spec.parallelism = Some(parallelism);
        j.spec.backoff_limit = Some(2);
        j.spec.completion_mode = if indexed {
            "Indexed".into()
        } else {
            "NonIndexed".into()
        };
        j.spec
            .template
            .spec
            .containers
            .push(bus_schemas::kinds::Container {
                name: "c".into(),
                ..Default::default()
            });
        j
    }

    fn pod(name: &str, phase: &str, index: Option<i32>, age_s: i64) -> Arc<Pod> {
        let mut p = job_pod(&job(Some(1), 1, index.is_some()), index);
        p.metadata.name = name.into();
        p.status.phase = phase.into();
        p.metadata.creation_timestamp = Some(podutil::now() - chrono::Duration::seconds(age_s));
        Arc::new(p)
    }

    const B: Duration = Duration::from_secs(10);
    const M: Duration = Duration::from_secs(360);

    #[test]
    fn index_ranges_round_trip() {
        let s: BTreeSet<i32> = [0, 1, 2, 4, 6, 7].into_iter().collect();
        assert_eq!(format_indexes(&s), "0-2,4,6-7");
        assert_eq!(parse_indexes("0-2,4,6-7"), s);
        assert_eq!(parse_indexes("x,3"), [3].into_iter().collect());
    }

    #[test]
    fn runs_parallelism_pods_until_completions() {
        let j = job(Some(4), 2, false);
        let d = decide(&j, &[], podutil::now(), B, M);
        assert_eq!(d.create, vec![None, None]);
        let pods = [
            pod("a", "Succeeded", None, 5),
            pod("b", "Succeeded", None, 5),
            pod("c", "Succeeded", None, 5),
            pod("d", "Running", None, 1),
        ];
        let d = decide(&j, &pods, podutil::now(), B, M);
        assert!(
            d.create.is_empty(),
            "only one completion left and one pod runs"
        );
        assert_eq!(d.status.succeeded, 3);
        let pods = [
            pod("a", "Succeeded", None, 5),
            pod("b", "Succeeded", None, 5),
            pod("c", "Succeeded", None, 5),
            pod("d", "Succeeded", None, 1),
        ];
        let d = decide(&j, &pods, podutil::now(), B, M);
        assert_eq!(d.finished.as_ref().map(|f| f.0.as_str()), Some("Complete"));
        assert!(d.status.completion_time.is_some());
    }

    #[test]
    fn indexed_jobs_fill_free_indexes() {
        let j = job(Some(4), 2, true);
        let pods = [
            pod("a", "Succeeded", Some(0), 5),
            pod("b", "Running", Some(1), 5),
        ];
        let d = decide(&j, &pods, podutil::now(), B, M);
        assert_eq!(d.create, vec![Some(2)]);
        assert_eq!(d.status.completed_indexes, "0");
        let p = job_pod(&j, Some(3));
        assert_eq!(p.metadata.annotations[INDEX_ANNOTATION], "3");
        assert!(p.spec.containers[0]
            .env
            .iter()
            .any(|e| e.name == INDEX_ENV && e.value == "3"));
    }

    #[test]
    fn failures_back_off_then_exceed_the_limit() {
        let j = job(Some(1), 1, false);
        let d = decide(&j, &[pod("a", "Failed", None, 1)], podutil::now(), B, M);
        assert!(d.create.is_empty(), "backing off");
        assert!(d.requeue_after.is_some());
        let d = decide(&j, &[pod("a", "Failed", None, 100)], podutil::now(), B, M);
        assert_eq!(d.create, vec![None], "back-off over");
        let pods = [
            pod("a", "Failed", None, 100),
            pod("b", "Failed", None, 100),
            pod("c", "Failed", None, 100),
            pod("d", "Running", None, 1),
        ];
        let d = decide(&j, &pods, podutil::now(), B, M);
        assert_eq!(
            d.finished.as_ref().map(|f| f.1.as_str()),
            Some("BackoffLimitExceeded")
        );
        assert_eq!(d.delete, vec!["d".to_string()]);
        assert_eq!(backoff(3, B, M), Duration::from_secs(40));
        assert_eq!(backoff(30, B, M), M);
    }

    #[test]
    fn deadline_fails_the_job() {
        let mut j = job(Some(1), 1, false);
        j.spec.active_deadline_seconds = Some(5);
        j.status.start_time = Some(podutil::now() - chrono::Duration::seconds(10));
        let d = decide(&j, &[pod("a", "Running", None, 10)], podutil::now(), B, M);
        assert_eq!(
            d.finished.as_ref().map(|f| f.1.as_str()),
            Some("DeadlineExceeded")
        );
        assert_eq!(d.delete, vec!["a".to_string()]);
    }

    #[test]
    fn ttl_deletes_finished_jobs() {
        let mut j = job(Some(1), 1, false);
        j.spec.ttl_seconds_after_finished = Some(0);
        let d = decide(&j, &[pod("a", "Succeeded", None, 1)], podutil::now(), B, M);
        j.status = d.status;
        let d = decide(&j, &[], podutil::now(), B, M);
        assert!(d.delete_job);
    }
}
