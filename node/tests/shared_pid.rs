//! `shareProcessNamespace`: containers of a pod share one pid namespace held by
//! a pause process; without it each container has its own.

mod common;

use common::*;
use shoal_node::{LinuxRuntime, Runtime, SandboxSpec};
use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

fn sandbox(env: &Env, name: &str, share: bool) -> shoal_node::SandboxInfo {
    let mut spec = SandboxSpec::new(format!("{name}-{}", rand_hex(6)), name, "default");
    spec.share_process_namespace = share;
    env.rt.create_sandbox(&spec).expect("create sandbox")
}

/// Runs container A (`sleep 1000`) and container B (`ps`) in a new sandbox;
/// returns the sandbox and B's output.
fn ps_from_other_container(env: &Env, share: bool) -> (shoal_node::SandboxInfo, String) {
    let sb = sandbox(env, if share { "shared" } else { "private" }, share);
    let a = env.run(&sb, "a", &["sleep", "1000"]);
    let b = env.run(&sb, "b", &["ps", "-o", "pid,args"]);
    let st = env.wait_exit(&b.id);
    assert_eq!(st.exit_code(), Some(0), "{st:?}");
    let out: Vec<String> = env
        .rt
        .logs(&b.id)
        .unwrap()
        .read_tail(100)
        .unwrap()
        .into_iter()
        .map(|l| l.content)
        .collect();
    // A is still running (B's exit did not take it down).
    assert!(!env.rt.container_state(&a.id).unwrap().is_exited());
    (sb, out.join("\n"))
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

#[test]
fn shared_pid_namespace_sees_other_containers() {
    let env = Env::new();
    let (sb, ps) = ps_from_other_container(&env, true);
    assert!(ps.contains("sleep 1000"), "B should see A's sleep:\n{ps}");
    // PID 1 is the pause process, not a container's init.
    let pid1 = ps
        .lines()
        .find(|l| l.split_whitespace().next() == Some("1"))
        .unwrap_or("");
    assert!(
        pid1.contains("pause"),
        "pid 1 should be the pause process:\n{ps}"
    );
    let pause = sb.pause.expect("pause process recorded");
    assert!(alive(pause.pid));
    let ns = sb.pid_ns_path.clone().expect("pid ns path");
    assert!(env.mounts_under_tmp().iter().any(|m| Path::new(m) == ns));
    // A restarted runtime (same state dir) finds the pod's namespace: a new
    // container joins it, and removing the sandbox kills the pause process.
    let rt2 = LinuxRuntime::new(env.rt.config().clone()).unwrap();
    let sb2 = rt2
        .list_sandboxes()
        .unwrap()
        .into_iter()
        .find(|s| s.id == sb.id)
        .unwrap();
    assert_eq!(sb2.pause, Some(pause));
    let c = rt2
        .start_container(&sb2, &env.spec("c", &["sleep", "1000"]))
        .unwrap();
    let ps = exec_ok(&env, &c.id, &["ps", "-o", "pid,args"]);
    assert!(ps.contains("sleep 1000") && ps.contains("pause"), "{ps}");

    rt2.remove_sandbox(&sb.id).unwrap();
    env.rt.remove_sandbox(&sb.id).unwrap(); // idempotent
    assert!(!alive(pause.pid), "pause process survived remove_sandbox");
    assert!(
        env.mounts_under_tmp().is_empty(),
        "{:?}",
        env.mounts_under_tmp()
    );
    assert!(env.rt.list_containers().unwrap().is_empty());
}

#[test]
fn private_pid_namespace_by_default() {
    let env = Env::new();
    let (sb, ps) = ps_from_other_container(&env, false);
    assert!(!ps.contains("sleep"), "B must not see A's sleep:\n{ps}");
    assert!(sb.pause.is_none() && sb.pid_ns_path.is_none());
    env.rt.remove_sandbox(&sb.id).unwrap();
    assert!(env.mounts_under_tmp().is_empty());
}

#[test]
fn exec_and_leftovers_in_shared_namespace() {
    let env = Env::new();
    let sb = sandbox(&env, "shared-exec", true);
    let a = env.run(&sb, "a", &["sleep", "1000"]);
    // A container whose init exits while a background child keeps its stdout
    // open: the child is killed, so the container exits promptly.
    let b = env.run(&sb, "b", &["sh", "-c", "sleep 2000 & echo bye"]);
    let st = env.wait_exit(&b.id);
    assert_eq!(st.exit_code(), Some(0), "{st:?}");
    // exec in A sees the pause process as pid 1 and A's sleep, not B's.
    let ps = exec_ok(&env, &a.id, &["ps", "-o", "pid,args"]);
    assert!(
        ps.contains("sleep 1000") && !ps.contains("sleep 2000"),
        "{ps}"
    );
    let pause = sb.pause.expect("pause");
    // cleanup_orphans removes the sandbox and its pause process too.
    let report = env.rt.cleanup_orphans(&HashSet::new()).unwrap();
    assert_eq!(report.sandboxes, vec![sb.id.clone()]);
    assert!(poll_until(Duration::from_secs(5), || (!alive(pause.pid)).then_some(())).is_some());
    assert!(env.mounts_under_tmp().is_empty());
}
