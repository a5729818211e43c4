//! The CronJob controller against a real cluster (nats-server, API, every controller), on a
//! clock the test sets: minutes pass when the test says so, never by sleeping. No node
//! agent: the test finishes the Jobs' pods itself, only to drive the controllers.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bus_schemas::kinds::{CronJob, Event, Job, Pod};
use bus_schemas::selector::Selector;
use common::*;
use shoal_controllers::clock::Clock;

const T: Duration = Duration::from_secs(30);

fn cronjob(name: &str, policy: &str) -> CronJob {
    from_json(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedule": "* * * * *",
            "concurrencyPolicy": policy,
            "successfulJobsHistoryLimit": 2,
            "failedJobsHistoryLimit": 1,
            "jobTemplate": {"spec": {"template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "busybox:1"}]}
            }}}
        }
    }))
}

/// The Jobs of the CronJob `name` that are not being deleted, oldest first.
fn jobs(env: &Env, name: &str) -> Vec<Arc<Job>> {
    let mut jobs: Vec<Arc<Job>> = env
        .cluster
        .informers
        .get::<Job>()
        .list(Some("default"), &Selector::everything())
        .into_iter()
        .filter(|j| {
            !j.metadata.is_deleting() && j.metadata.controller_ref().is_some_and(|r| r.name == name)
        })
        .collect();
    jobs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    jobs
}

fn running_pod(env: &Env, job: &str) -> Option<Arc<Pod>> {
    env.cluster
        .informers
        .get::<Pod>()
        .list(Some("default"), &Selector::everything())
        .into_iter()
        .find(|p| {
            !p.is_terminal()
                && !p.metadata.is_deleting()
                && p.metadata.controller_ref().is_some_and(|r| r.name == job)
        })
}

fn completed(job: &Job) -> bool {
    job.status
        .conditions
        .iter()
        .any(|c| c.type_ == "Complete" && c.is_true())
}

/// Plays the node for one Job: its pod succeeds; waits until the Job is Complete.
async fn complete(env: &Env, job: &str) {
    eventually("the job's pod", T, || async {
        running_pod(env, job).is_some()
    })
    .await;
    let pod = running_pod(env, job).expect("the job's pod");
    finish(&env.api, &pod, "Succeeded").await;
    eventually("the job completes", T, || async {
        env.api
            .get::<Job>("default", job)
            .await
            .is_ok_and(|j| completed(&j))
    })
    .await;
}

fn events(env: &Env, name: &str, reason: &str) -> usize {
    env.cluster
        .informers
        .get::<Event>()
        .list(Some("default"), &Selector::everything())
        .iter()
        .filter(|e| e.reason == reason && e.involved_object.name == name)
        .count()
}

#[actix::test]
async fn an_every_minute_cronjob_runs_respects_forbid_and_keeps_its_history() {
    let cluster = shoal_api::local::LocalCluster::start().await.unwrap();
    let clock = Clock::manual(chrono::Utc::now());
    let mut tunables = tunables();
    tunables.clock = clock.clone();
    let _controllers = start_controllers_tuned(&cluster, tunables).await;
    let env = Env {
        api: cluster.api(),
        cluster,
    };
    env.api.create(&cronjob("tick", "Forbid")).await.unwrap();
    let start = clock.now();
    let at_minute = |n: i64| start + chrono::Duration::minutes(n) + chrono::Duration::seconds(1);

    // Nothing before the first minute turns, however long the test takes.
    clock.set(start + chrono::Duration::seconds(1));
    let cj = env.api.get::<CronJob>("default", "tick").await.unwrap();
    assert!(jobs(&env, "tick").is_empty());
    assert!(cj.status.last_schedule_time.is_none());

    clock.set(at_minute(1));
    eventually("the first job", T, || async {
        jobs(&env, "tick").len() == 1
    })
    .await;
    let first = jobs(&env, "tick")[0].metadata.name.clone();
    eventually("status.active names it", T, || async {
        env.api
            .get::<CronJob>("default", "tick")
            .await
            .is_ok_and(|c| {
                c.status.active.iter().any(|r| r.name == first)
                    && c.status.last_schedule_time.is_some()
            })
    })
    .await;

    // Forbid: the next minute passes while the first Job runs, and starts nothing.
    clock.set(at_minute(2));
    eventually("the Forbid decision", T, || async {
        events(&env, "tick", "JobAlreadyActive") > 0
    })
    .await;
    assert_eq!(jobs(&env, "tick").len(), 1, "Forbid started a second job");

    // Once it ends, the held-back start runs (no deadline set), then one per minute.
    complete(&env, &first).await;
    eventually("the held-back start", T, || async {
        jobs(&env, "tick").len() == 2
    })
    .await;
    for n in 3..=5 {
        let last = jobs(&env, "tick").last().unwrap().metadata.name.clone();
        complete(&env, &last).await;
        clock.set(at_minute(n));
        eventually("the next minute's job", T, || async {
            jobs(&env, "tick").iter().any(|j| !completed(j))
        })
        .await;
    }
    let last = jobs(&env, "tick").last().unwrap().metadata.name.clone();
    complete(&env, &last).await;

    // Five Jobs ran; two successful ones are kept.
    eventually("history trimmed to 2", T, || async {
        jobs(&env, "tick").len() == 2
    })
    .await;
    let kept: Vec<String> = jobs(&env, "tick")
        .iter()
        .map(|j| j.metadata.name.clone())
        .collect();
    assert!(kept.contains(&last), "the newest is kept: {kept:?}");
    eventually(
        "status: nothing active, last success recorded",
        T,
        || async {
            env.api
                .get::<CronJob>("default", "tick")
                .await
                .is_ok_and(|c| {
                    c.status.active.is_empty() && c.status.last_successful_time.is_some()
                })
        },
    )
    .await;
}

#[actix::test]
async fn replace_deletes_the_running_job_for_the_new_one() {
    let cluster = shoal_api::local::LocalCluster::start().await.unwrap();
    let clock = Clock::manual(chrono::Utc::now());
    let mut tunables = tunables();
    tunables.clock = clock.clone();
    let _controllers = start_controllers_tuned(&cluster, tunables).await;
    let env = Env {
        api: cluster.api(),
        cluster,
    };
    env.api.create(&cronjob("swap", "Replace")).await.unwrap();
    let start = clock.now();
    clock.set(start + chrono::Duration::seconds(61));
    eventually("the first job", T, || async {
        jobs(&env, "swap").len() == 1
    })
    .await;
    let first = jobs(&env, "swap")[0].metadata.name.clone();
    clock.set(start + chrono::Duration::seconds(121));
    eventually("the first replaced by the second", T, || async {
        let now = jobs(&env, "swap");
        now.len() == 1 && now[0].metadata.name != first
    })
    .await;
}

#[actix::test]
async fn bad_schedules_are_refused_with_the_field_and_nothing_is_written() {
    let cluster = shoal_api::local::LocalCluster::start().await.unwrap();
    let api = cluster.api();
    for (schedule, zone, field) in [
        ("61 * * * *", None, "spec.schedule"),
        ("every minute", None, "spec.schedule"),
        ("* * * *", None, "spec.schedule"),
        ("@fortnightly", None, "spec.schedule"),
        ("* * * * *", Some("Mars/Olympus_Mons"), "spec.timeZone"),
    ] {
        let mut cj = cronjob("bad", "Allow");
        cj.spec.schedule = schedule.into();
        cj.spec.time_zone = zone.map(str::to_string);
        match api.create(&cj).await {
            Err(shoal_bus::ApiError::Status(s)) => assert!(
                s.causes().iter().any(|c| c.field == field),
                "{schedule}: {s:?}"
            ),
            other => panic!("{schedule} accepted: {other:?}"),
        }
        assert!(api
            .get::<CronJob>("default", "bad")
            .await
            .unwrap_err()
            .is_not_found());
    }
    let mut cj = cronjob("bad", "Sometimes");
    cj.spec.schedule = "@hourly".into();
    let err = api.create(&cj).await.unwrap_err();
    assert!(err.to_string().contains("spec.concurrencyPolicy"), "{err}");
}
