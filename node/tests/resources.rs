//! cgroup limits on real containers: OOM kill, pids limit, cpu/memory files, stats.

mod common;

use common::*;
use shoal_node::cgroups::CgroupVersion;
use shoal_node::container::Resources;
use shoal_node::{ExitReason, Runtime};
use std::time::Duration;

#[test]
fn memory_limit_oom_kill_is_reported() {
    let env = Env::new();
    let sb = env.sandbox("oom");
    let mut spec = env.spec("hog", &["sh", "-c", "tail /dev/zero; echo survived"]);
    spec.resources.memory_limit_bytes = Some(20 << 20);
    let c = env.rt.start_container(&sb, &spec).unwrap();
    let st = env.wait_exit(&c.id);
    assert_eq!(st.reason(), Some(ExitReason::OOMKilled), "{st:?}");
    assert_eq!(
        driver(&env)
            .oom_kill_count(&format!("{}/{}", sb.cgroup, c.id))
            .unwrap(),
        1
    );
    env.rt.remove_container(&c.id).unwrap();
}

#[test]
fn fork_bomb_is_contained_by_pids_limit() {
    let env = Env::new();
    let sb = env.sandbox("bomb");
    let mut spec = env.spec("bomb", &["sh", "-c", "f() { f | f & }; f; sleep 1000"]);
    spec.resources.pids_limit = Some(64);
    let c = env.rt.start_container(&sb, &spec).unwrap();
    let mut max_seen = 0;
    let reached = poll_until(Duration::from_secs(20), || {
        let s = env.rt.container_stats(&c.id).ok()?;
        max_seen = max_seen.max(s.pids_current);
        (s.pids_current >= 32).then_some(())
    });
    assert!(
        reached.is_some(),
        "fork bomb never ramped up (max {max_seen})"
    );
    for _ in 0..20 {
        let s = env.rt.container_stats(&c.id).unwrap();
        assert!(
            s.pids_current <= 64,
            "pids limit exceeded: {}",
            s.pids_current
        );
    }
    let st = env.rt.stop_container(&c.id, Duration::ZERO).unwrap();
    assert!(st.is_exited());
    env.rt.remove_container(&c.id).unwrap();
    assert!(!driver(&env).exists(&format!("{}/{}", sb.cgroup, c.id)));
    // The node still works: host processes and new containers start.
    assert!(std::process::Command::new("true")
        .status()
        .unwrap()
        .success());
    let after = env.run(&sb, "after", &["/bin/true"]);
    assert_eq!(env.wait_exit(&after.id).exit_code(), Some(0));
}

#[test]
fn limits_written_and_stats_read() {
    let env = Env::new();
    let sb = env.sandbox("stats");
    let mut spec = env.spec(
        "busy",
        &[
            "sh",
            "-c",
            "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; touch /tmp/done; sleep 1000",
        ],
    );
    spec.resources = Resources {
        cpu_request_milli: Some(250),
        cpu_limit_milli: Some(500),
        memory_limit_bytes: Some(64 << 20),
        pids_limit: None,
    };
    let c = env.rt.start_container(&sb, &spec).unwrap();
    let cg = format!("{}/{}", sb.cgroup, c.id);
    if driver(&env).version() == CgroupVersion::V1 {
        let read = |ctl: &str, f: &str| {
            std::fs::read_to_string(format!("/sys/fs/cgroup/{ctl}/{cg}/{f}"))
                .unwrap()
                .trim()
                .to_string()
        };
        assert_eq!(read("cpu", "cpu.shares"), "256");
        assert_eq!(read("cpu", "cpu.cfs_quota_us"), "50000");
        assert_eq!(read("cpu", "cpu.cfs_period_us"), "100000");
        assert_eq!(
            read("memory", "memory.limit_in_bytes"),
            (64u64 << 20).to_string()
        );
        assert_eq!(read("pids", "pids.max"), "1024", "default pids limit");
    }
    poll_until(Duration::from_secs(30), || {
        let r = env
            .rt
            .exec(
                &c.id,
                &shoal_node::ExecRequest::new(["test", "-f", "/tmp/done"], Duration::from_secs(5)),
            )
            .ok()?;
        (r.exit_code == 0).then_some(())
    })
    .expect("busy loop finished");
    let s = env.rt.container_stats(&c.id).unwrap();
    assert!(s.cpu_usage_ns > 1_000_000, "{s:?}");
    assert!(
        s.memory_usage_bytes > 0 && s.memory_working_set_bytes <= s.memory_usage_bytes,
        "{s:?}"
    );
    assert!(s.pids_current >= 1, "{s:?}");
    let pod = env.rt.sandbox_stats(&sb.id).unwrap();
    assert!(
        pod.cpu_usage_ns >= s.cpu_usage_ns && pod.pids_current >= s.pids_current,
        "{pod:?} vs {s:?}"
    );
}
