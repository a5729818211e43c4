//! CronJobs end to end on a one-machine cluster with real containers: `shoal up` (with the
//! controllers' clock set over the bus, `SHOAL_TEST_CLOCK=bus`, so minutes pass when the
//! test says), the busybox image, Jobs whose pods run until the test lets them finish.

mod up_cluster;

use up_cluster::Cluster;

const CRONJOB: &str = r#"
apiVersion: batch/v1
kind: CronJob
metadata: {name: tick}
spec:
  schedule: "* * * * *"
  concurrencyPolicy: Forbid
  successfulJobsHistoryLimit: 2
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          terminationGracePeriodSeconds: 1
          containers:
          - name: work
            image: shoal/busybox:1.35
            command: ["sh", "-c", "echo tick; while [ ! -f /tmp/done ]; do sleep 0.2; done"]
"#;

#[test]
fn an_every_minute_cronjob_runs_real_jobs_respects_forbid_and_keeps_its_history() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), &[("SHOAL_TEST_CLOCK", "bus")]);
    cluster.apply(dir.path(), "cj.yaml", CRONJOB);
    let start = chrono::Utc::now();
    let minute = |n: i64| start + chrono::Duration::minutes(n) + chrono::Duration::seconds(1);

    cluster.set_clock(minute(1));
    cluster.wait("the first job", |c| c.jobs().len() == 1);
    let first = cluster.jobs()[0].0.clone();
    // Forbid: another minute passes while the first runs.
    cluster.set_clock(minute(2));
    cluster.wait("the Forbid decision in describe", |c| {
        c.run(&["describe", "cj", "tick"])
            .1
            .contains("JobAlreadyActive")
    });
    assert_eq!(cluster.jobs().len(), 1, "Forbid started a second job");
    let (_, table, _) = cluster.run(&["get", "cj", "tick"]);
    let row = table.lines().nth(1).unwrap_or_default().to_string();
    assert!(
        row.starts_with("tick") && row.contains("* * * * *"),
        "{table}"
    );

    // The held-back start runs once the first ends, then one per minute.
    cluster.release(&first);
    cluster.wait("the second job", |c| c.jobs().len() == 2);
    for n in 3..=4 {
        let running = cluster
            .jobs()
            .into_iter()
            .find(|(_, status)| status == "Running")
            .expect("a running job")
            .0;
        cluster.release(&running);
        cluster.set_clock(minute(n));
        cluster.wait("the next minute's job", |c| {
            c.jobs().iter().any(|(_, status)| status == "Running")
        });
    }
    let running = cluster
        .jobs()
        .into_iter()
        .find(|(_, s)| s == "Running")
        .unwrap()
        .0;
    cluster.release(&running);
    // Four ran and succeeded; two are kept.
    cluster.wait("history trimmed to 2", |c| {
        let jobs = c.jobs();
        jobs.len() == 2 && jobs.iter().all(|(_, s)| s == "Complete")
    });

    // Run one now, by hand.
    let (ok, out, err) = cluster.run(&["create", "job", "by-hand", "--from=cronjob/tick"]);
    assert!(ok, "{err}");
    assert!(out.contains("job.batch/by-hand created"), "{out}");
    cluster.release("by-hand");
}
