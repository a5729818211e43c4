//! The container's init process, between fork and exec: cgroup, mount
//! namespace, rootfs, pivot_root, then [`super::confine`] (user, capabilities,
//! no_new_privs, seccomp) and exec.
//! Each failure is a [`StepError`] naming its step.

use super::namespaces;
use super::{confine, mounts, user, RunSpec};
use crate::error::StepError;
use nix::mount::{mount, MsFlags};
use nix::sched::CloneFlags;
use std::convert::Infallible;
use std::ffi::CString;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::Path;

pub(super) fn run(spec: &RunSpec, out_w: OwnedFd, err_w: OwnedFd) -> StepError {
    match setup(spec, out_w, err_w) {
        Ok(never) => match never {},
        Err(e) => e,
    }
}

fn cstrings(v: &[String], what: &str) -> Result<Vec<CString>, StepError> {
    v.iter()
        .map(|s| {
            CString::new(s.as_str())
                .map_err(|_| StepError::new("config", format!("{what} contains a NUL byte")))
        })
        .collect()
}

fn setup(spec: &RunSpec, out_w: OwnedFd, err_w: OwnedFd) -> Result<Infallible, StepError> {
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    let null = File::options()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(|e| StepError::io("stdio", &e, "/dev/null"))?;
    nix::unistd::dup2_stdin(&null).map_err(|e| StepError::sys("stdio", e, "dup2 stdin"))?;
    nix::unistd::dup2_stdout(&out_w).map_err(|e| StepError::sys("stdio", e, "dup2 stdout"))?;
    nix::unistd::dup2_stderr(&err_w).map_err(|e| StepError::sys("stdio", e, "dup2 stderr"))?;
    drop((null, out_w, err_w));

    // Join the container cgroup before anything allocates memory on its behalf.
    for f in crate::cgroups::driver_from(&spec.cgroup).procs_files(&spec.cgroup_path) {
        std::fs::write(&f, "0")
            .map_err(|e| StepError::io("cgroup", &e, f.display().to_string()))?;
    }

    namespaces::unshare(
        CloneFlags::CLONE_NEWNS,
        "unshare mount",
        "unshare(CLONE_NEWNS)",
    )?;
    // rslave: host mount events still propagate in (e.g. a sandbox's ns files
    // being unmounted), nothing we mount leaks out, and pivot_root accepts it.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None::<&str>,
    )
    .map_err(|e| StepError::sys("mount propagation", e, "make / rslave"))?;
    spec.rootfs
        .mount()
        .map_err(|e| StepError::new("mount rootfs", e.to_string()))?;
    mounts::setup(spec)?;
    mounts::pivot(&spec.rootfs.merged)?;
    if spec.read_only_rootfs {
        mounts::remount_root_ro()?;
    }

    let ids = user::resolve(
        spec.user.as_deref(),
        Path::new("/etc/passwd"),
        Path::new("/etc/group"),
    )?;
    let mut env = spec.env.clone();
    if !env.iter().any(|e| e.starts_with("HOME=")) {
        env.push(format!(
            "HOME={}",
            ids.home.clone().unwrap_or_else(|| "/".into())
        ));
    }
    let path_env = env
        .iter()
        .find_map(|e| e.strip_prefix("PATH="))
        .map(str::to_string);

    let cwd = if spec.cwd.is_empty() {
        "/"
    } else {
        spec.cwd.as_str()
    };
    std::fs::create_dir_all(cwd).map_err(|e| StepError::io("workdir", &e, cwd))?;
    nix::unistd::chdir(cwd).map_err(|e| StepError::sys("workdir", e, cwd))?;

    let argv0 = spec
        .argv
        .first()
        .ok_or_else(|| StepError::new("exec", "no command specified"))?;
    let exe = user::lookup_executable(argv0, path_env.as_deref())?;
    let exe_c = CString::new(exe.as_os_str().as_encoded_bytes())
        .map_err(|_| StepError::new("exec", "NUL in path"))?;
    let argv = cstrings(&spec.argv, "argv")?;
    let envp = cstrings(&env, "env")?;

    confine::finish(&spec.caps, &ids, &spec.confinement)?;

    let e = nix::unistd::execve(&exe_c, &argv, &envp).unwrap_err();
    Err(StepError::sys("exec", e, format!("exec {}", exe.display())))
}
