//! Runtime security on real containers: seccomp profiles (RuntimeDefault, Unconfined,
//! Localhost), run-as user, runAsNonRoot, read-only root filesystem, no_new_privs, and the
//! hostPath prefixes.

mod common;

use common::*;
use shoal_node::container::MountSource;
use shoal_node::seccomp::SeccompProfile;
use shoal_node::{ContainerSpec, Error, ExecRequest, ExecResult, MountSpec, Runtime};
use std::time::Duration;

fn exec(env: &Env, id: &str, argv: &[&str]) -> ExecResult {
    env.rt
        .exec(
            id,
            &ExecRequest::new(argv.iter().copied(), Duration::from_secs(20)),
        )
        .expect("exec")
}

fn sleeper(env: &Env, name: &str) -> ContainerSpec {
    env.spec(name, &["sleep", "1000"])
}

fn status_field(env: &Env, id: &str, field: &str) -> String {
    let status = exec_ok(env, id, &["cat", "/proc/self/status"]);
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {status}"))
        .trim()
        .to_string()
}

#[test]
fn runtime_default_blocks_unshare_with_eperm_and_unconfined_allows_it() {
    let env = Env::new();
    let sb = env.sandbox("seccomp");
    // The container's init: creating a user namespace needs no capability, so only the
    // filter can refuse it. (The image links only some applets: call busybox by name.)
    let confined = env.run(&sb, "confined-init", &["busybox", "unshare", "-U", "true"]);
    assert_eq!(env.wait_exit(&confined.id).exit_code(), Some(1));
    let mut spec = env.spec("unconfined-init", &["busybox", "unshare", "-U", "true"]);
    spec.seccomp = SeccompProfile::Unconfined;
    let free = env.rt.start_container(&sb, &spec).unwrap();
    assert_eq!(env.wait_exit(&free.id).exit_code(), Some(0));

    // Processes exec'd into a container are held to its profile too.
    let c = env
        .rt
        .start_container(&sb, &sleeper(&env, "confined"))
        .unwrap();
    let r = exec(&env, &c.id, &["busybox", "unshare", "-U", "true"]);
    assert_ne!(r.exit_code, 0);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(stderr.contains("Operation not permitted"), "{stderr}");
    assert_eq!(status_field(&env, &c.id, "Seccomp"), "2", "filter mode");
    let mut spec = sleeper(&env, "unconfined");
    spec.seccomp = SeccompProfile::Unconfined;
    let u = env.rt.start_container(&sb, &spec).unwrap();
    exec_ok(&env, &u.id, &["busybox", "unshare", "-U", "true"]);
    assert_eq!(status_field(&env, &u.id, "Seccomp"), "0");
    // Ordinary work goes on under the filter: fork, pipes, files.
    let out = exec_ok(
        &env,
        &c.id,
        &["sh", "-c", "echo hi > /tmp/f && cat /tmp/f | wc -c"],
    );
    assert_eq!(out.trim(), "3");
    for id in [&c.id, &u.id] {
        env.rt.stop_container(id, Duration::ZERO).unwrap();
    }
}

#[test]
fn a_localhost_profile_denies_what_it_names_and_a_missing_one_fails_the_start() {
    let profiles = tempfile::tempdir().unwrap();
    let root = profiles.path().to_path_buf();
    std::fs::create_dir(root.join("team")).unwrap();
    // EACCES, which root never gets from mkdir in its own /tmp: only the profile says it.
    std::fs::write(
        root.join("team/no-mkdir.json"),
        r#"{"defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13}]}"#,
    )
    .unwrap();
    std::fs::write(root.join("broken.json"), "{\"defaultAction\": 3}").unwrap();
    let env = Env::with(|c| c.seccomp_profile_root = root.clone());
    let sb = env.sandbox("localhost");
    let mut spec = sleeper(&env, "no-mkdir");
    spec.seccomp = SeccompProfile::Localhost("team/no-mkdir.json".into());
    let c = env.rt.start_container(&sb, &spec).unwrap();
    let r = exec(&env, &c.id, &["mkdir", "/tmp/d"]);
    assert_ne!(r.exit_code, 0);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(stderr.contains("Permission denied"), "{stderr}");
    exec_ok(&env, &c.id, &["touch", "/tmp/other-calls-still-work"]);
    env.rt.stop_container(&c.id, Duration::ZERO).unwrap();

    for (name, expect) in [
        ("team/missing.json", "missing.json"),
        ("broken.json", "broken.json"),
        ("../escape.json", "must be a relative path"),
    ] {
        let mut spec = sleeper(&env, "bad-profile");
        spec.seccomp = SeccompProfile::Localhost(name.into());
        match env.rt.start_container(&sb, &spec) {
            Err(e @ Error::InvalidSpec(_)) => {
                assert!(e.to_string().contains(expect), "{name}: {e}");
                assert_eq!(e.k8s_reason(), "CreateContainerConfigError");
            }
            other => panic!("{name}: expected a refusal, got {other:?}"),
        }
    }
}

#[test]
fn users_non_root_read_only_root_and_no_new_privs() {
    let env = Env::new();
    let sb = env.sandbox("users");

    let mut spec = sleeper(&env, "as-1000");
    spec.user = Some("1000:2000".into());
    spec.no_new_privs = true;
    spec.run_as_non_root = true;
    let c = env.rt.start_container(&sb, &spec).unwrap();
    assert_eq!(exec_ok(&env, &c.id, &["id", "-u"]).trim(), "1000");
    assert_eq!(exec_ok(&env, &c.id, &["id", "-g"]).trim(), "2000");
    let init = exec_ok(&env, &c.id, &["grep", "^Uid:", "/proc/1/status"]);
    assert!(init.split_whitespace().nth(1) == Some("1000"), "{init}");
    assert_eq!(status_field(&env, &c.id, "NoNewPrivs"), "1");

    // Left to their defaults, privilege escalation is allowed, as in Kubernetes.
    let d = env
        .rt
        .start_container(&sb, &sleeper(&env, "default"))
        .unwrap();
    assert_eq!(status_field(&env, &d.id, "NoNewPrivs"), "0");
    assert_eq!(exec_ok(&env, &d.id, &["id", "-u"]).trim(), "0");

    // The busybox image runs as root.
    let mut spec = sleeper(&env, "non-root");
    spec.run_as_non_root = true;
    match env.rt.start_container(&sb, &spec) {
        Err(e @ Error::InvalidSpec(_)) => {
            assert!(
                e.to_string()
                    .contains("container has runAsNonRoot and image will run as root"),
                "{e}"
            );
            assert_eq!(e.k8s_reason(), "CreateContainerConfigError");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }

    let mut spec = sleeper(&env, "read-only");
    spec.read_only_rootfs = true;
    spec.mounts.push(MountSpec {
        source: MountSource::EmptyDir("scratch".into()),
        destination: "/scratch".into(),
        read_only: false,
    });
    let ro = env.rt.start_container(&sb, &spec).unwrap();
    let r = exec(&env, &ro.id, &["touch", "/x"]);
    assert_ne!(r.exit_code, 0);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    exec_ok(&env, &ro.id, &["touch", "/scratch/x"]);
    assert!(sb.volume_dir("scratch").join("x").exists());
    for id in [&c.id, &d.id, &ro.id] {
        env.rt.stop_container(id, Duration::ZERO).unwrap();
    }
}

#[test]
fn host_paths_mount_only_under_an_allowed_prefix() {
    let shared = tempfile::tempdir().unwrap();
    let allowed = shared.path().join("allowed");
    let other = shared.path().join("allowed-not");
    for d in [&allowed, &other] {
        std::fs::create_dir(d).unwrap();
        std::fs::write(d.join("f"), "host\n").unwrap();
    }
    let env = Env::with(|c| c.allow_host_path = vec![allowed.clone()]);
    let sb = env.sandbox("hostpath");
    let with_mount = |name: &str, dir: &std::path::Path| {
        let mut spec = sleeper(&env, name);
        spec.mounts.push(MountSpec {
            source: MountSource::HostPath(dir.to_path_buf()),
            destination: "/host".into(),
            read_only: true,
        });
        spec
    };
    let c = env
        .rt
        .start_container(&sb, &with_mount("in", &allowed))
        .unwrap();
    assert_eq!(exec_ok(&env, &c.id, &["cat", "/host/f"]), "host\n");
    env.rt.stop_container(&c.id, Duration::ZERO).unwrap();
    // A sibling sharing the prefix's spelling is not under it.
    for dir in [other.clone(), allowed.join("../allowed-not")] {
        match env.rt.start_container(&sb, &with_mount("out", &dir)) {
            Err(e @ Error::InvalidSpec(_)) => {
                assert!(e.to_string().contains("--allow-host-path"), "{e}")
            }
            other => panic!("{}: expected a refusal, got {other:?}", dir.display()),
        }
    }
}
