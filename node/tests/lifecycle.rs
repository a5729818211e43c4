//! Container lifecycle on real kernels: exit codes, stop, re-adoption, errors.

mod common;

use common::*;
use shoal_node::{ContainerState, Error, ExitReason, LinuxRuntime, Runtime};
use std::time::{Duration, Instant};

#[test]
fn exit_codes_and_reasons() {
    let env = Env::new();
    let sb = env.sandbox("exits");
    let ok = env.run(&sb, "ok", &["/bin/true"]);
    let bad = env.run(&sb, "bad", &["sh", "-c", "exit 3"]);
    let st = env.wait_exit(&ok.id);
    assert_eq!(
        (st.exit_code(), st.reason()),
        (Some(0), Some(ExitReason::Completed))
    );
    let st = env.wait_exit(&bad.id);
    assert_eq!(
        (st.exit_code(), st.reason()),
        (Some(3), Some(ExitReason::Error))
    );
    // container_state (no waiting) agrees with wait_container.
    assert_eq!(
        env.rt.container_state(&bad.id).unwrap().exit_code(),
        Some(3)
    );
    env.rt.remove_container(&ok.id).unwrap();
    env.rt.remove_container(&ok.id).unwrap(); // idempotent
    assert!(env.rt.container_state(&ok.id).unwrap_err().is_not_found());
}

#[test]
fn isolation_pid_fs_caps_sys_hostname() {
    let env = Env::new();
    let sb = env.sandbox("iso-pod");
    let c = env.run(
        &sb,
        "iso",
        &[
            "sh",
            "-c",
            "echo $$ > /tmp/pid1; touch /rootfile; sleep 1000",
        ],
    );
    // ps sees only the container's processes, pid 1 is the workload.
    let ps = exec_ok(&env, &c.id, &["ps", "-o", "pid,comm"]);
    let pids: Vec<&str> = ps
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert!(pids.contains(&"1"), "{ps}");
    assert!(pids.len() <= 3, "only sh/sleep + ps itself expected: {ps}");
    // Only the container's own pids: sh, sleep, and the exec'd sh/ls/grep.
    let procs = exec_ok(&env, &c.id, &["sh", "-c", "ls /proc | grep -E '^[0-9]+$'"]);
    let procs: Vec<u32> = procs.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert!(
        procs.len() <= 6 && procs.iter().all(|p| *p < 50),
        "{procs:?}"
    );
    let pid1 = poll_until(Duration::from_secs(10), || {
        let r = env
            .rt
            .exec(
                &c.id,
                &shoal_node::ExecRequest::new(["cat", "/tmp/pid1"], Duration::from_secs(5)),
            )
            .ok()?;
        (r.exit_code == 0).then(|| String::from_utf8_lossy(&r.stdout).trim().to_string())
    });
    assert_eq!(pid1.as_deref(), Some("1"), "the workload is pid 1");
    // Writes to / land in the container's upper dir, not on the host.
    poll_until(Duration::from_secs(5), || {
        exec_ok(&env, &c.id, &["ls", "/rootfile"])
            .contains("rootfile")
            .then_some(())
    })
    .expect("file created");
    assert!(!std::path::Path::new("/rootfile").exists());
    let upper = env
        .state_dir()
        .join("containers")
        .join(&c.id)
        .join("upper/rootfile");
    assert!(upper.exists(), "{} missing", upper.display());
    // No CAP_SYS_ADMIN (bit 21) in the effective set.
    let status = exec_ok(&env, &c.id, &["grep", "CapEff", "/proc/self/status"]);
    let eff = u64::from_str_radix(status.split_whitespace().nth(1).unwrap(), 16).unwrap();
    assert_eq!(eff & (1 << 21), 0, "CAP_SYS_ADMIN present: {status}");
    assert_ne!(eff & (1 << 0), 0, "CAP_CHOWN expected: {status}");
    // /sys is read-only; masked paths are empty (/proc/kcore is absent on
    // some kernels, so check /proc/timer_list and /sys/firmware).
    let r = env
        .rt
        .exec(
            &c.id,
            &shoal_node::ExecRequest::new(["sh", "-c", "touch /sys/x"], Duration::from_secs(10)),
        )
        .unwrap();
    assert_ne!(r.exit_code, 0);
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("Read-only"),
        "{r:?}"
    );
    assert_eq!(
        exec_ok(&env, &c.id, &["sh", "-c", "wc -c < /proc/timer_list"]).trim(),
        "0"
    );
    assert_eq!(
        exec_ok(&env, &c.id, &["sh", "-c", "ls -A /sys/firmware | wc -l"]).trim(),
        "0"
    );
    let r = env
        .rt
        .exec(
            &c.id,
            &shoal_node::ExecRequest::new(
                ["sh", "-c", "echo 1 > /proc/sys/kernel/panic"],
                Duration::from_secs(10),
            ),
        )
        .unwrap();
    assert_ne!(r.exit_code, 0, "/proc/sys must be read-only");
    // Hostname is the pod name, /etc/hosts has the pod IP.
    assert_eq!(exec_ok(&env, &c.id, &["hostname"]).trim(), "iso-pod");
    assert!(exec_ok(&env, &c.id, &["cat", "/etc/hosts"]).contains(&format!("{}\tiso-pod", sb.ip)));
    assert!(exec_ok(&env, &c.id, &["cat", "/etc/resolv.conf"])
        .contains("search default.svc.cluster.local"));
    env.rt
        .stop_container(&c.id, Duration::from_secs(0))
        .unwrap();
}

#[test]
fn stop_grace_sigkill_vs_term_handler() {
    let env = Env::new();
    let sb = env.sandbox("stop");
    let stubborn = env.run(
        &sb,
        "stubborn",
        &["sh", "-c", "trap '' TERM; while true; do sleep 1; done"],
    );
    let polite = env.run(
        &sb,
        "polite",
        &[
            "sh",
            "-c",
            "trap 'exit 0' TERM; touch /tmp/ready; sleep 1000 & wait",
        ],
    );
    for id in [&stubborn.id, &polite.id] {
        assert!(env.rt.container_state(id).unwrap().is_running());
    }
    // A signal sent before the trap is installed would be dropped (pid 1 without
    // a handler), so wait for the shell to get there.
    poll_until(Duration::from_secs(10), || {
        let r = env
            .rt
            .exec(
                &polite.id,
                &shoal_node::ExecRequest::new(["test", "-f", "/tmp/ready"], Duration::from_secs(5)),
            )
            .ok()?;
        (r.exit_code == 0).then_some(())
    })
    .expect("trap installed");
    let t = Instant::now();
    let st = env
        .rt
        .stop_container(&polite.id, Duration::from_secs(10))
        .unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "TERM handler should exit promptly: {:?}",
        t.elapsed()
    );
    assert_eq!(st.exit_code(), Some(0), "{st:?}");
    let t = Instant::now();
    let grace = Duration::from_millis(500);
    let st = env.rt.stop_container(&stubborn.id, grace).unwrap();
    assert!(t.elapsed() >= grace, "must wait the grace period");
    assert!(
        matches!(
            st,
            ContainerState::Exited {
                signal: Some(9),
                exit_code: 137,
                ..
            }
        ),
        "{st:?}"
    );
    // Idempotent.
    assert_eq!(
        env.rt
            .stop_container(&stubborn.id, grace)
            .unwrap()
            .exit_code(),
        Some(137)
    );
}

#[test]
fn readoption_after_runtime_restart() {
    let env = Env::new();
    let sb = env.sandbox("readopt");
    let c = env.run(&sb, "sleeper", &["sleep", "1000"]);
    let cfg = env.rt.config().clone();
    // A second runtime object on the same state dir (what an agent restart does).
    let rt2 = LinuxRuntime::new(cfg).unwrap();
    let listed = rt2.list_containers().unwrap();
    let found = listed.iter().find(|x| x.id == c.id).expect("listed");
    assert_eq!(found.pid, c.pid);
    match rt2.container_state(&c.id).unwrap() {
        ContainerState::Running { pid, .. } => assert_eq!(pid, c.pid),
        s => panic!("not running: {s:?}"),
    }
    assert_eq!(
        rt2.list_sandboxes()
            .unwrap()
            .iter()
            .filter(|s| s.id == sb.id)
            .count(),
        1
    );
    let st = rt2
        .stop_container(&c.id, Duration::from_millis(200))
        .unwrap();
    assert!(st.is_exited());
    assert!(env.rt.container_state(&c.id).unwrap().is_exited());
}

#[test]
fn bad_specs_are_typed_errors_and_leave_nothing() {
    let env = Env::new();
    let sb = env.sandbox("bad");
    let before = driver(&env).children(&sb.cgroup).unwrap();
    let err = env
        .rt
        .start_container(&sb, &env.spec("noexe", &["/bin/does-not-exist"]))
        .unwrap_err();
    match &err {
        Error::Container { error, .. } => {
            assert_eq!(error.step, "exec");
            assert!(error.message.contains("not found"), "{error}");
        }
        e => panic!("wrong error {e:?}"),
    }
    assert_eq!(err.k8s_reason(), "RunContainerError");
    let err = env
        .rt
        .start_container(&sb, &env.spec("nopath", &["nosuchcmd"]))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("executable file not found in $PATH"),
        "{err}"
    );
    let mut spec = env.spec("nouser", &["/bin/true"]);
    spec.user = Some("ghost".into());
    let err = env.rt.start_container(&sb, &spec).unwrap_err();
    match &err {
        Error::Container { error, .. } => assert_eq!(error.step, "user", "{error}"),
        e => panic!("wrong error {e:?}"),
    }
    assert_eq!(err.k8s_reason(), "CreateContainerConfigError");
    let mut spec = env.spec("noimg", &["/bin/true"]);
    spec.image = "nope:latest".into();
    assert!(env
        .rt
        .start_container(&sb, &spec)
        .unwrap_err()
        .is_not_found());
    let mut spec = env.spec("hostpath", &["/bin/true"]);
    spec.mounts.push(shoal_node::MountSpec {
        source: shoal_node::container::MountSource::HostPath("/etc".into()),
        destination: "/host".into(),
        read_only: true,
    });
    assert!(matches!(
        env.rt.start_container(&sb, &spec),
        Err(Error::InvalidSpec(_))
    ));
    // Nothing left: no container cgroups, no container dirs, no extra mounts.
    assert_eq!(driver(&env).children(&sb.cgroup).unwrap(), before);
    assert!(env.rt.list_containers().unwrap().is_empty());
    let cdir = env.state_dir().join("containers");
    assert_eq!(std::fs::read_dir(&cdir).unwrap().count(), 0);
    let mounts = env.mounts_under_tmp();
    assert!(
        mounts.iter().all(|m| m.contains("/run/")),
        "unexpected mounts {mounts:?}"
    );
}

#[test]
fn exec_returns_output_and_exit_code() {
    let env = Env::new();
    let sb = env.sandbox("exec");
    let c = env.run(&sb, "target", &["sleep", "1000"]);
    let r = env
        .rt
        .exec(
            &c.id,
            &shoal_node::ExecRequest::new(
                ["sh", "-c", "echo hi; echo err >&2; exit 7"],
                Duration::from_secs(10),
            ),
        )
        .unwrap();
    assert_eq!(r.stdout, b"hi\n");
    assert_eq!(r.stderr, b"err\n");
    assert_eq!(r.exit_code, 7);
    assert!(!r.timed_out);
    let r = env
        .rt
        .exec(
            &c.id,
            &shoal_node::ExecRequest::new(["sleep", "100"], Duration::from_millis(300)),
        )
        .unwrap();
    assert!(r.timed_out);
    assert_eq!(r.exit_code, 137);
    // Exec probes ride on the same API.
    assert!(shoal_node::probe::exec(
        &env.rt,
        &c.id,
        &["true".to_string()],
        Duration::from_secs(5)
    )
    .is_success());
    assert!(!shoal_node::probe::exec(
        &env.rt,
        &c.id,
        &["false".to_string()],
        Duration::from_secs(5)
    )
    .is_success());
}

/// The pids in the cgroup (as the host sees it) of the process `pid`: its `pids`
/// controller's under cgroup v1, its unified group's under v2.
fn cgroup_members(pid: i32) -> Vec<i32> {
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let procs = own
        .lines()
        .find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let controllers: Vec<&str> = controllers.split(',').collect();
            controllers
                .contains(&"pids")
                .then(|| format!("/sys/fs/cgroup/pids{path}/cgroup.procs"))
        })
        .or_else(|| {
            let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
            Some(format!("/sys/fs/cgroup{path}/cgroup.procs"))
        })
        .expect("a pids or unified cgroup");
    std::fs::read_to_string(&procs)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

fn pid_namespace(pid: i32) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok()
}

/// The command an exec runs belongs to the container's cgroup, while the shim that reaps it
/// does not. A shim in there was killed with the container, before it reaped its command:
/// the command's zombie had no one to reap it, and the container's init could not finish
/// exiting, so a container killed during a preStop hook or an exec probe outlived its
/// SIGKILL (whether it did depended on which process the kill reached first).
#[test]
fn an_exec_shares_the_containers_cgroup_but_its_shim_does_not() {
    let env = Env::new();
    let sb = env.sandbox("killexec");
    let c = env.run(&sb, "target", &["sleep", "1000"]);
    let exec = |argv: &[&str], timeout: Duration| {
        let request = shoal_node::ExecRequest::new(argv.iter().copied(), timeout);
        env.rt.exec(&c.id, &request)
    };
    let init = env
        .rt
        .list_containers()
        .unwrap()
        .into_iter()
        .find(|info| info.id == c.id)
        .expect("the container is listed")
        .pid;
    std::thread::scope(|scope| {
        let hanging = scope.spawn(|| {
            exec(
                &["sh", "-c", "touch /tmp/in-exec; sleep 600"],
                Duration::from_secs(120),
            )
        });
        poll_until(Duration::from_secs(10), || {
            let r = exec(&["test", "-f", "/tmp/in-exec"], Duration::from_secs(5)).ok()?;
            (r.exit_code == 0).then_some(())
        })
        .expect("the exec is running");
        let members = cgroup_members(init);
        let container_ns = pid_namespace(init).unwrap();
        let strays: Vec<String> = members
            .iter()
            .filter(|&&pid| pid_namespace(pid).is_some_and(|ns| ns != container_ns))
            .map(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                format!(
                    "{pid} {}",
                    String::from_utf8_lossy(&cmdline).replace('\0', " ")
                )
            })
            .collect();
        let t = Instant::now();
        let st = env.rt.stop_container(&c.id, Duration::ZERO);
        assert!(
            matches!(
                st,
                Ok(ContainerState::Exited {
                    signal: Some(9),
                    ..
                })
            ),
            "{st:?} after {:?}",
            t.elapsed()
        );
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        let _ = hanging
            .join()
            .expect("the exec returns once its container is gone");
        // Judged after the stop, so a failure does not wait out the exec.
        assert!(
            members.iter().any(|&pid| pid != init),
            "the exec's command is not in its container's cgroup: {members:?} (init {init})"
        );
        assert!(
            strays.is_empty(),
            "in the container's cgroup but not its pid namespace: {strays:?}"
        );
    });
}
