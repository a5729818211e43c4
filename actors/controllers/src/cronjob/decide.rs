//! What a CronJob should do now, as a pure function of the CronJob, the Jobs it owns and the
//! time: which Job to start, which to delete, the status to write, when to look again.
//! Follows Kubernetes' CronJob controller (v2).

use std::cmp::Reverse;
use std::sync::Arc;

use bus_schemas::kinds::common::ObjectReference;
use bus_schemas::kinds::cronjob::{CronJobStatus, SCHEDULED_TIMESTAMP_ANNOTATION};
use bus_schemas::kinds::{CronJob, Job};
use bus_schemas::meta::{find_condition, Condition, Time};
use bus_schemas::Resource;

use crate::events::{NORMAL, WARNING};

/// Missed starts beyond this are reported: the controller was down, the clock jumped, or
/// the schedule is denser than the deadline allows (Kubernetes' limit).
pub const MAX_MISSED_STARTS: usize = 100;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct CronJobDecision {
    pub status: CronJobStatus,
    /// Start the Job for this scheduled time.
    pub start: Option<Time>,
    /// Running Jobs to delete first (concurrencyPolicy Replace).
    pub replace: Vec<String>,
    /// Finished Jobs beyond the history limits, oldest first.
    pub prune: Vec<String>,
    /// Events to record: (type, reason, message).
    pub events: Vec<(&'static str, &'static str, String)>,
    /// Look again at this time even if nothing changes.
    pub wake_at: Option<Time>,
}

/// The name of the Job for a scheduled time: stable, so a start repeated after a crash or a
/// stale cache finds the Job it already made instead of making a second.
pub fn job_name(cronjob: &str, scheduled: Time) -> String {
    format!("{cronjob}-{}", scheduled.timestamp().div_euclid(60))
}

/// Finished and how: `Some(true)` Complete, `Some(false)` Failed, `None` still running.
pub fn outcome(job: &Job) -> Option<bool> {
    let is = |t: &str| find_condition(&job.status.conditions, t).is_some_and(Condition::is_true);
    if is("Complete") {
        Some(true)
    } else if is("Failed") {
        Some(false)
    } else {
        None
    }
}

fn finished_at(job: &Job) -> Option<Time> {
    job.status
        .completion_time
        .or_else(|| {
            job.status
                .conditions
                .iter()
                .filter(|c| c.is_true())
                .filter_map(|c| c.last_transition_time)
                .max()
        })
        .or(job.status.start_time)
        .or(job.metadata.creation_timestamp)
}

fn reference(job: &Job) -> ObjectReference {
    ObjectReference {
        kind: Job::INFO.kind.into(),
        api_version: Job::INFO.api_version.into(),
        namespace: job.metadata.namespace.clone(),
        name: job.metadata.name.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        ..Default::default()
    }
}

/// Names of the finished Jobs beyond `limit`, oldest first.
fn beyond_limit(mut finished: Vec<&Job>, limit: Option<i32>) -> Vec<String> {
    let keep = usize::try_from(limit.unwrap_or(i32::MAX).max(0)).unwrap_or(usize::MAX);
    finished.sort_by_key(|j| Reverse((finished_at(j), j.metadata.name.clone())));
    finished
        .into_iter()
        .skip(keep)
        .rev()
        .map(|j| j.metadata.name.clone())
        .collect()
}

pub fn decide(cronjob: &CronJob, jobs: &[Arc<Job>], now: Time) -> CronJobDecision {
    let spec = &cronjob.spec;
    let mut d = CronJobDecision {
        status: cronjob.status.clone(),
        ..Default::default()
    };
    let live: Vec<&Job> = jobs
        .iter()
        .map(Arc::as_ref)
        .filter(|j| !j.metadata.is_deleting())
        .collect();
    let mut active: Vec<&Job> = live
        .iter()
        .copied()
        .filter(|j| outcome(j).is_none())
        .collect();
    active.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let succeeded: Vec<&Job> = live
        .iter()
        .copied()
        .filter(|j| outcome(j) == Some(true))
        .collect();
    let failed: Vec<&Job> = live
        .iter()
        .copied()
        .filter(|j| outcome(j) == Some(false))
        .collect();
    d.status.active = active.iter().map(|j| reference(j)).collect();
    if let Some(latest) = succeeded.iter().filter_map(|j| finished_at(j)).max() {
        let last = d.status.last_successful_time.get_or_insert(latest);
        *last = (*last).max(latest);
    }
    d.prune = beyond_limit(succeeded, spec.successful_jobs_history_limit);
    d.prune
        .extend(beyond_limit(failed, spec.failed_jobs_history_limit));
    if cronjob.metadata.is_deleting() || cronjob.is_suspended() {
        return d;
    }
    let schedule = match cronjob.schedule() {
        Ok(s) => s,
        Err(cause) => {
            d.events
                .push((WARNING, "UnparseableSchedule", cause.message));
            return d;
        }
    };
    let created = cronjob.metadata.creation_timestamp.unwrap_or(now);
    let mut earliest = cronjob.status.last_schedule_time.unwrap_or(created);
    if let Some(deadline) = spec.starting_deadline_seconds {
        earliest = earliest.max(now - chrono::Duration::seconds(deadline));
    }
    d.wake_at = schedule.next_after(now);
    let missed = schedule.count_between(earliest, now, MAX_MISSED_STARTS + 1);
    if missed == 0 {
        return d;
    }
    if missed > MAX_MISSED_STARTS {
        d.events.push((
            WARNING,
            "TooManyMissedTimes",
            "too many missed start times (> 100). Set or decrease .spec.startingDeadlineSeconds or check clock skew".into(),
        ));
    }
    let Some(scheduled) = schedule.latest_at_or_before(now) else {
        return d;
    };
    let name = job_name(&cronjob.metadata.name, scheduled);
    if jobs.iter().any(|j| j.metadata.name == name) {
        return d;
    }
    match spec.concurrency_policy.as_str() {
        "Forbid" if !active.is_empty() => {
            // Not recorded as scheduled: once the running Job ends, this start still runs
            // if its deadline allows, as in Kubernetes.
            d.events.push((
                NORMAL,
                "JobAlreadyActive",
                format!("Not starting job for {scheduled}: an earlier one is still running and concurrencyPolicy is Forbid"),
            ));
            return d;
        }
        "Replace" => d.replace = active.iter().map(|j| j.metadata.name.clone()).collect(),
        _ => {}
    }
    d.start = Some(scheduled);
    d.status.last_schedule_time = Some(scheduled);
    if !d.replace.is_empty() {
        d.status.active.clear();
    }
    d.status.active.push(ObjectReference {
        kind: Job::INFO.kind.into(),
        api_version: Job::INFO.api_version.into(),
        namespace: cronjob.metadata.namespace.clone(),
        name,
        ..Default::default()
    });
    d
}

/// The Job started for `scheduled`: the template's labels, annotations and spec, owned by
/// the CronJob.
pub fn job_for(cronjob: &CronJob, scheduled: Time) -> Job {
    let mut job = cronjob.job_from_template();
    job.metadata.name = job_name(&cronjob.metadata.name, scheduled);
    job.metadata.annotations.insert(
        SCHEDULED_TIMESTAMP_ANNOTATION.into(),
        scheduled.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    );
    job.metadata.owner_references = vec![crate::podutil::controller_ref(cronjob)];
    job
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Time {
        chrono::DateTime::parse_from_rfc3339(s)
            .unwrap()
            .with_timezone(&chrono::Utc)
    }

    fn cronjob(schedule: &str, policy: &str) -> CronJob {
        let mut cj: CronJob = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "tick", "namespace": "default", "uid": "cj-uid",
                         "creationTimestamp": "2026-12-01T10:00:30Z"},
            "spec": {"schedule": schedule, "concurrencyPolicy": policy,
                     "jobTemplate": {"spec": {"template": {"spec": {
                         "restartPolicy": "Never",
                         "containers": [{"name": "c", "image": "busybox"}]}}}}}
        }))
        .unwrap();
        cj.apply_defaults();
        cj
    }

    fn job(cj: &CronJob, minute: &str, result: Option<bool>) -> Arc<Job> {
        let scheduled = at(&format!("2026-12-01T10:{minute}:00Z"));
        let mut j = job_for(cj, scheduled);
        j.metadata.creation_timestamp = Some(scheduled);
        if let Some(ok) = result {
            j.status.conditions.push(Condition {
                type_: if ok { "Complete" } else { "Failed" }.into(),
                status: "True".into(),
                last_transition_time: Some(scheduled + chrono::Duration::seconds(30)),
                ..Default::default()
            });
            if ok {
                j.status.completion_time = Some(scheduled + chrono::Duration::seconds(30));
            }
        }
        Arc::new(j)
    }

    #[test]
    fn nothing_is_due_before_the_first_start() {
        let cj = cronjob("* * * * *", "Allow");
        let d = decide(&cj, &[], at("2026-12-01T10:00:50Z"));
        assert_eq!(d.start, None);
        assert_eq!(d.wake_at, Some(at("2026-12-01T10:01:00Z")));
    }

    #[test]
    fn a_due_start_makes_one_job_and_records_it() {
        let cj = cronjob("* * * * *", "Allow");
        let now = at("2026-12-01T10:01:05Z");
        let d = decide(&cj, &[], now);
        assert_eq!(d.start, Some(at("2026-12-01T10:01:00Z")));
        assert_eq!(d.status.last_schedule_time, d.start);
        assert_eq!(d.status.active.len(), 1);
        let j = job_for(&cj, d.start.unwrap());
        assert_eq!(d.status.active[0].name, j.metadata.name);
        assert_eq!(
            j.metadata.annotations[SCHEDULED_TIMESTAMP_ANNOTATION],
            "2026-12-01T10:01:00Z"
        );
        // The Job exists: the same start is not made twice.
        let mut again = cj.clone();
        again.status = d.status;
        let d = decide(&again, &[Arc::new(j)], now);
        assert_eq!(d.start, None);
    }

    #[test]
    fn only_the_latest_missed_start_runs() {
        let cj = cronjob("* * * * *", "Allow");
        let d = decide(&cj, &[], at("2026-12-01T10:07:10Z"));
        assert_eq!(d.start, Some(at("2026-12-01T10:07:00Z")));
        assert!(d.events.is_empty());
    }

    #[test]
    fn more_than_a_hundred_missed_starts_are_reported() {
        let cj = cronjob("* * * * *", "Allow");
        let d = decide(&cj, &[], at("2026-12-01T13:00:10Z"));
        assert!(d.events.iter().any(|e| e.1 == "TooManyMissedTimes"));
        assert_eq!(
            d.start,
            Some(at("2026-12-01T13:00:00Z")),
            "still starts the latest"
        );
    }

    #[test]
    fn the_starting_deadline_skips_late_starts() {
        let mut cj = cronjob("0 * * * *", "Allow");
        cj.spec.starting_deadline_seconds = Some(60);
        // 11:00 was missed by five minutes: too late.
        let d = decide(&cj, &[], at("2026-12-01T11:05:00Z"));
        assert_eq!(d.start, None);
        assert_eq!(d.wake_at, Some(at("2026-12-01T12:00:00Z")));
        let d = decide(&cj, &[], at("2026-12-01T11:00:40Z"));
        assert_eq!(d.start, Some(at("2026-12-01T11:00:00Z")));
        // With a deadline, a long outage is not "too many missed": only the window counts.
        cj.spec.schedule = "* * * * *".into();
        let d = decide(&cj, &[], at("2026-12-02T11:00:40Z"));
        assert!(d.events.is_empty());
    }

    #[test]
    fn forbid_waits_for_the_running_job() {
        let cj = cronjob("* * * * *", "Forbid");
        let running = job(&cj, "01", None);
        let d = decide(
            &cj,
            std::slice::from_ref(&running),
            at("2026-12-01T10:02:05Z"),
        );
        assert_eq!(d.start, None);
        assert_eq!(d.status.active.len(), 1);
        assert!(d.events.iter().any(|e| e.1 == "JobAlreadyActive"));
        let done = job(&cj, "01", Some(true));
        let d = decide(&cj, &[done], at("2026-12-01T10:02:05Z"));
        assert_eq!(d.start, Some(at("2026-12-01T10:02:00Z")));
    }

    #[test]
    fn allow_runs_alongside_and_replace_deletes_the_running_job() {
        let cj = cronjob("* * * * *", "Allow");
        let running = job(&cj, "01", None);
        let d = decide(
            &cj,
            std::slice::from_ref(&running),
            at("2026-12-01T10:02:05Z"),
        );
        assert!(d.start.is_some() && d.replace.is_empty());
        assert_eq!(d.status.active.len(), 2);
        let cj = cronjob("* * * * *", "Replace");
        let d = decide(
            &cj,
            std::slice::from_ref(&running),
            at("2026-12-01T10:02:05Z"),
        );
        assert!(d.start.is_some());
        assert_eq!(d.replace, vec![running.metadata.name.clone()]);
        assert_eq!(d.status.active.len(), 1);
    }

    #[test]
    fn history_limits_prune_the_oldest_finished_jobs() {
        let cj = cronjob("* * * * *", "Allow");
        let jobs: Vec<Arc<Job>> = vec![
            job(&cj, "01", Some(true)),
            job(&cj, "02", Some(false)),
            job(&cj, "03", Some(true)),
            job(&cj, "04", Some(true)),
            job(&cj, "05", Some(false)),
            job(&cj, "06", Some(true)),
            job(&cj, "07", None),
        ];
        let d = decide(&cj, &jobs, at("2026-12-01T10:07:30Z"));
        // 3 successful and 1 failed kept: the 01 success and the 02 failure go.
        assert_eq!(
            d.prune,
            vec![jobs[0].metadata.name.clone(), jobs[1].metadata.name.clone()]
        );
        assert_eq!(d.status.active.len(), 1);
        assert_eq!(
            d.status.last_successful_time,
            Some(at("2026-12-01T10:06:30Z"))
        );
    }

    #[test]
    fn suspended_cronjobs_start_nothing_but_keep_their_history_tidy() {
        let mut cj = cronjob("* * * * *", "Allow");
        cj.spec.suspend = Some(true);
        cj.spec.failed_jobs_history_limit = Some(0);
        let failed = job(&cj, "01", Some(false));
        let d = decide(
            &cj,
            std::slice::from_ref(&failed),
            at("2026-12-01T10:05:05Z"),
        );
        assert_eq!(d.start, None);
        assert_eq!(d.prune, vec![failed.metadata.name.clone()]);
    }

    #[test]
    fn the_schedule_is_read_in_its_time_zone() {
        let mut cj = cronjob("0 11 * * *", "Allow");
        cj.spec.time_zone = Some("Europe/Paris".into());
        // 11:00 in Paris is 10:00 UTC in December.
        let d = decide(&cj, &[], at("2026-12-01T10:00:30Z"));
        assert_eq!(d.start, None, "created at 10:00:30, after that start");
        let d = decide(&cj, &[], at("2026-12-02T10:00:10Z"));
        assert_eq!(d.start, Some(at("2026-12-02T10:00:00Z")));
    }
}
