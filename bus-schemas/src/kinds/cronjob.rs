//! CronJob (batch/v1): a Job template started on a cron schedule.
//!
//! The schedule is standard 5-field cron (ranges, steps, lists, month and weekday names, the
//! `@hourly`-style nicknames) parsed by `croner` with Vixie cron's rule that a restricted
//! day-of-month and a restricted day-of-week match when either does. It is read in
//! `timeZone` (an IANA name) or, when unset, in UTC: a cluster has no "controller-manager
//! local time" worth depending on.

use std::str::FromStr;

use chrono::TimeZone;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use serde::{Deserialize, Serialize};

use super::common::{invalid_value, non_negative, not_supported, required_msg, ObjectReference};
use super::job::{Job, JobSpec};
use crate::meta::{ObjectMeta, Time};
use crate::resource::{KindInfo, Resource};
use crate::status::Cause;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronJob {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: CronJobSpec,
    #[serde(default)]
    pub status: CronJobStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronJobSpec {
    #[serde(default)]
    pub schedule: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// A start missed by more than this many seconds is skipped instead of run late.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_deadline_seconds: Option<i64>,
    /// `Allow`, `Forbid` or `Replace`: what a due start does while an earlier Job runs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub concurrency_policy: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    #[serde(default)]
    pub job_template: JobTemplateSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successful_jobs_history_limit: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_jobs_history_limit: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobTemplateSpec {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: JobSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronJobStatus {
    /// The Jobs this CronJob started that have not finished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<ObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_time: Option<Time>,
}

crate::spec_status_resource!(
    CronJob,
    KindInfo {
        kind: "CronJob",
        api_version: "batch/v1",
        plural: "cronjobs",
        short_names: &["cj"],
        namespaced: true,
        has_status: true,
    }
);

pub const CONCURRENCY_POLICIES: &[&str] = &["Allow", "Forbid", "Replace"];
/// On each Job a CronJob starts: the schedule time it stands for (RFC 3339).
pub const SCHEDULED_TIMESTAMP_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// Kubernetes' limit: a CronJob name leaves room for the `-<minutes>` suffix of its Jobs.
const MAX_NAME_LENGTH: usize = 52;

/// A parsed schedule with the zone it is read in.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: Cron,
    zone: chrono_tz::Tz,
}

impl Schedule {
    /// Parses `schedule` in `time_zone` (UTC when `None`); the error says what is wrong and
    /// names the field at fault.
    pub fn new(schedule: &str, time_zone: Option<&str>) -> Result<Schedule, Cause> {
        let zone = match time_zone {
            None => chrono_tz::UTC,
            Some(name) => parse_zone(name)?,
        };
        Ok(Schedule {
            cron: parse_schedule(schedule)?,
            zone,
        })
    }

    /// The first start strictly after `after`.
    pub fn next_after(&self, after: Time) -> Option<Time> {
        let local = after.with_timezone(&self.zone);
        let next = self.cron.find_next_occurrence(&local, false).ok()?;
        Some(next.with_timezone(&chrono::Utc))
    }

    /// The latest start at or before `at`.
    pub fn latest_at_or_before(&self, at: Time) -> Option<Time> {
        let local = at.with_timezone(&self.zone);
        let previous = self.cron.find_previous_occurrence(&local, true).ok()?;
        Some(previous.with_timezone(&chrono::Utc))
    }

    /// Starts in `(after, until]`, counted up to `cap` (so a long outage costs `cap` steps).
    pub fn count_between(&self, after: Time, until: Time, cap: usize) -> usize {
        let mut n = 0;
        let mut cursor = after;
        while n < cap {
            match self.next_after(cursor) {
                Some(t) if t <= until => {
                    n += 1;
                    cursor = t;
                }
                _ => break,
            }
        }
        n
    }
}

fn parse_zone(name: &str) -> Result<chrono_tz::Tz, Cause> {
    if name.is_empty() || name.eq_ignore_ascii_case("local") {
        return Err(invalid_value(
            "spec.timeZone",
            name,
            "unknown time zone: must be an IANA name such as Europe/Paris",
        ));
    }
    chrono_tz::Tz::from_str(name).map_err(|_| {
        invalid_value(
            "spec.timeZone",
            name,
            "unknown time zone: must be an IANA name such as Europe/Paris",
        )
    })
}

fn parse_schedule(schedule: &str) -> Result<Cron, Cause> {
    let at = "spec.schedule";
    let trimmed = schedule.trim();
    if trimmed.is_empty() {
        return Err(required_msg(at, "a cron schedule such as \"*/5 * * * *\""));
    }
    if trimmed.contains("TZ=") {
        return Err(invalid_value(
            at,
            schedule,
            "cannot use TZ or CRON_TZ in schedule, use the timeZone field instead",
        ));
    }
    // croner accepts a seconds and a year field and Quartz's `?`; a Kubernetes schedule has
    // exactly five fields (or a nickname), so anything else is refused here.
    let fields = trimmed.split_whitespace().count();
    if !trimmed.starts_with('@') && fields != 5 {
        return Err(invalid_value(
            at,
            schedule,
            &format!("expected exactly 5 fields (minute hour day-of-month month day-of-week), found {fields}"),
        ));
    }
    if trimmed.contains('?') {
        return Err(invalid_value(
            at,
            schedule,
            "`?` is not standard cron syntax",
        ));
    }
    let parser = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build();
    parser
        .parse(trimmed)
        .map_err(|e| invalid_value(at, schedule, &format!("unparseable cron schedule: {e}")))
}

impl CronJob {
    pub fn is_suspended(&self) -> bool {
        self.spec.suspend == Some(true)
    }

    pub fn schedule(&self) -> Result<Schedule, Cause> {
        Schedule::new(&self.spec.schedule, self.spec.time_zone.as_deref())
    }

    /// The Job this CronJob would start, before naming and ownership: its template's labels,
    /// annotations and spec.
    pub fn job_from_template(&self) -> Job {
        let template = &self.spec.job_template;
        let mut job = Job {
            spec: template.spec.clone(),
            ..Default::default()
        };
        job.metadata.namespace = self.metadata.namespace.clone();
        job.metadata.labels = template.metadata.labels.clone();
        job.metadata.annotations = template.metadata.annotations.clone();
        job.set_type_meta();
        job
    }

    fn validate_fields(&self) -> Vec<Cause> {
        let spec = &self.spec;
        let mut causes = Vec::new();
        if self.metadata.name.len() > MAX_NAME_LENGTH {
            causes.push(invalid_value(
                "metadata.name",
                &self.metadata.name,
                "must be no more than 52 characters",
            ));
        }
        if let Err(cause) = parse_schedule(&spec.schedule) {
            causes.push(cause);
        }
        if let Some(zone) = &spec.time_zone {
            causes.extend(parse_zone(zone).err());
        }
        if !spec.concurrency_policy.is_empty() {
            causes.extend(not_supported(
                "spec.concurrencyPolicy",
                &spec.concurrency_policy,
                CONCURRENCY_POLICIES,
            ));
        }
        if let Some(deadline) = spec.starting_deadline_seconds {
            causes.extend(non_negative(deadline, "spec.startingDeadlineSeconds"));
        }
        for (at, limit) in [
            (
                "spec.successfulJobsHistoryLimit",
                spec.successful_jobs_history_limit,
            ),
            (
                "spec.failedJobsHistoryLimit",
                spec.failed_jobs_history_limit,
            ),
        ] {
            causes.extend(limit.and_then(|v| non_negative(v, at)));
        }
        // The template is checked as the Job it becomes, its paths moved under jobTemplate.
        let mut job = self.job_from_template();
        job.metadata.name = "template".into();
        for mut cause in job.validate_kind() {
            if let Some(rest) = cause.field.strip_prefix("spec.") {
                cause.field = format!("spec.jobTemplate.spec.{rest}");
            }
            causes.push(cause);
        }
        causes
    }

    fn validate_update_fields(&self, _old: &Self) -> Vec<Cause> {
        Vec::new()
    }

    fn default_fields(&mut self) {
        let spec = &mut self.spec;
        if spec.concurrency_policy.is_empty() {
            spec.concurrency_policy = "Allow".into();
        }
        spec.suspend.get_or_insert(false);
        spec.successful_jobs_history_limit.get_or_insert(3);
        spec.failed_jobs_history_limit.get_or_insert(1);
        spec.job_template.spec.template.apply_defaults();
    }

    fn kind_field_value(&self, _field: &str) -> Option<String> {
        None
    }
}

/// The zone-aware time of `t` rendered in UTC: what status fields carry.
pub fn utc(t: chrono::DateTime<chrono_tz::Tz>) -> Time {
    chrono::Utc.from_utc_datetime(&t.naive_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Time {
        chrono::DateTime::parse_from_rfc3339(s)
            .unwrap()
            .with_timezone(&chrono::Utc)
    }

    #[test]
    fn standard_syntax_parses() {
        for ok in [
            "* * * * *",
            "*/15 0-6,22,23 * * mon-fri",
            "0 12 1 jan,jul *",
            "@hourly",
            "@daily",
            "@weekly",
            "30 4 1-7/2 * SUN",
        ] {
            assert!(Schedule::new(ok, None).is_ok(), "{ok}");
        }
    }

    #[test]
    fn bad_schedules_name_the_field() {
        for bad in [
            "",
            "* * * *",
            "0 * * * * *",
            "61 * * * *",
            "* * 32 * *",
            "TZ=UTC * * * * *",
            "@fortnightly",
            "* * ? * *",
        ] {
            let err = Schedule::new(bad, None).unwrap_err();
            assert_eq!(err.field, "spec.schedule", "{bad}: {err:?}");
        }
        let err = Schedule::new("* * * * *", Some("Mars/Olympus")).unwrap_err();
        assert_eq!(err.field, "spec.timeZone");
    }

    #[test]
    fn day_of_month_or_day_of_week() {
        // Vixie cron: both restricted means either matches. 2026-12-01 is a Tuesday; the
        // next 13th is a Sunday, and the next Friday (the 4th) comes first.
        let s = Schedule::new("0 0 13 * fri", None).unwrap();
        assert_eq!(
            s.next_after(at("2026-12-01T10:00:00Z")),
            Some(at("2026-12-04T00:00:00Z"))
        );
        assert_eq!(
            s.next_after(at("2026-12-12T10:00:00Z")),
            Some(at("2026-12-13T00:00:00Z"))
        );
    }

    #[test]
    fn time_zones_shift_the_schedule() {
        let s = Schedule::new("0 9 * * *", Some("Europe/Paris")).unwrap();
        // Paris is UTC+1 in December.
        assert_eq!(
            s.next_after(at("2026-12-01T00:00:00Z")),
            Some(at("2026-12-01T08:00:00Z"))
        );
        assert_eq!(
            s.latest_at_or_before(at("2026-12-01T08:00:00Z")),
            Some(at("2026-12-01T08:00:00Z"))
        );
    }

    #[test]
    fn missed_starts_are_counted_up_to_a_cap() {
        let s = Schedule::new("* * * * *", None).unwrap();
        let from = at("2026-12-01T00:00:00Z");
        assert_eq!(s.count_between(from, at("2026-12-01T00:05:30Z"), 1000), 5);
        assert_eq!(s.count_between(from, at("2026-12-02T00:00:00Z"), 101), 101);
    }
}
