//! The container's mount namespace: /proc, a minimal /dev, read-only /sys, bind
//! mounts, masked and read-only kernel paths, then pivot_root.

use super::RunSpec;
use crate::error::StepError;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sys::stat::{makedev, mknod, Mode, SFlag};
use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

/// runc's default masked paths: hidden behind /dev/null (files) or an empty
/// read-only tmpfs (directories).
const MASKED: &[&str] = &[
    "proc/acpi",
    "proc/asound",
    "proc/kcore",
    "proc/keys",
    "proc/latency_stats",
    "proc/timer_list",
    "proc/timer_stats",
    "proc/sched_debug",
    "proc/scsi",
    "sys/firmware",
    "sys/devices/virtual/powercap",
];

const READONLY: &[&str] = &[
    "proc/bus",
    "proc/fs",
    "proc/irq",
    "proc/sys",
    "proc/sysrq-trigger",
];

const DEVICES: &[(&str, u64, u64)] = &[
    ("null", 1, 3),
    ("zero", 1, 5),
    ("full", 1, 7),
    ("random", 1, 8),
    ("urandom", 1, 9),
    ("tty", 5, 0),
];

fn err(step: &str, e: nix::Error, what: impl std::fmt::Display) -> StepError {
    StepError::sys(step, e, what.to_string())
}

fn ioerr(step: &str, e: std::io::Error, what: impl std::fmt::Display) -> StepError {
    StepError::io(step, &e, what.to_string())
}

/// Resolve `path` inside `root` the way the container would see it: symlinks
/// (absolute or relative) are followed but can never climb above `root`.
/// Needed because bind-mount targets are set up before pivot_root, on an image
/// whose symlinks are untrusted.
pub(super) fn secure_join(root: &Path, path: &str) -> Result<PathBuf, StepError> {
    let to_parts = |p: &Path| -> VecDeque<OsString> {
        p.components()
            .filter_map(|c| match c {
                Component::Normal(s) => Some(s.to_os_string()),
                Component::ParentDir => Some(OsString::from("..")),
                _ => None,
            })
            .collect()
    };
    let mut pending = to_parts(Path::new(path));
    let mut cur: Vec<OsString> = Vec::new();
    let mut links = 0;
    while let Some(c) = pending.pop_front() {
        if c == ".." {
            cur.pop();
            continue;
        }
        cur.push(c);
        let full = root.join(cur.iter().collect::<PathBuf>());
        if let Ok(m) = fs::symlink_metadata(&full) {
            if m.file_type().is_symlink() {
                links += 1;
                if links > 40 {
                    return Err(StepError::new(
                        "mounts",
                        format!("too many symlinks resolving {path}"),
                    ));
                }
                let target =
                    fs::read_link(&full).map_err(|e| ioerr("mounts", e, full.display()))?;
                cur.pop();
                if target.is_absolute() {
                    cur.clear();
                }
                let mut next = to_parts(&target);
                next.extend(pending);
                pending = next;
            }
        }
    }
    Ok(root.join(cur.iter().collect::<PathBuf>()))
}

fn ensure_dir(p: &Path) -> Result<(), StepError> {
    fs::create_dir_all(p).map_err(|e| ioerr("mounts", e, format!("mkdir {}", p.display())))
}

fn ensure_file(p: &Path) -> Result<(), StepError> {
    if let Some(parent) = p.parent() {
        ensure_dir(parent)?;
    }
    if fs::symlink_metadata(p).is_err() {
        fs::File::create(p).map_err(|e| ioerr("mounts", e, format!("create {}", p.display())))?;
    }
    Ok(())
}

fn bind(src: &Path, dst: &Path, read_only: bool) -> Result<(), StepError> {
    let step = "bind mount";
    mount(
        Some(src),
        dst,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| err(step, e, format!("{} -> {}", src.display(), dst.display())))?;
    if read_only {
        mount(
            None::<&str>,
            dst,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
            None::<&str>,
        )
        .map_err(|e| err(step, e, format!("remount ro {}", dst.display())))?;
    }
    Ok(())
}

/// Everything mounted under the (not yet pivoted) rootfs.
pub(super) fn setup(spec: &RunSpec) -> Result<(), StepError> {
    let root = &spec.rootfs.merged;
    let proc_dir = secure_join(root, "/proc")?;
    ensure_dir(&proc_dir)?;
    mount(
        Some("proc"),
        &proc_dir,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| err("mount /proc", e, proc_dir.display()))?;

    setup_dev(&secure_join(root, "/dev")?)?;

    let sys_dir = secure_join(root, "/sys")?;
    ensure_dir(&sys_dir)?;
    mount(
        Some("sysfs"),
        &sys_dir,
        Some("sysfs"),
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| err("mount /sys", e, sys_dir.display()))?;

    for m in &spec.mounts {
        let meta =
            fs::metadata(&m.source).map_err(|e| ioerr("bind mount", e, m.source.display()))?;
        let dst = secure_join(root, &m.destination)?;
        if meta.is_dir() {
            ensure_dir(&dst)?;
        } else {
            ensure_file(&dst)?;
        }
        bind(&m.source, &dst, m.read_only)?;
    }

    // /proc and /sys are kernel filesystems with no untrusted symlinks, so the
    // plain join is safe here.
    for p in MASKED {
        let t = root.join(p);
        let Ok(meta) = fs::metadata(&t) else { continue };
        if meta.is_dir() {
            mount(
                Some("tmpfs"),
                &t,
                Some("tmpfs"),
                MsFlags::MS_RDONLY,
                Some("size=0"),
            )
            .map_err(|e| err("mask path", e, t.display()))?;
        } else {
            bind(Path::new("/dev/null"), &t, false)?;
        }
    }
    for p in READONLY {
        let t = root.join(p);
        if t.exists() {
            bind(&t, &t, true)?;
        }
    }
    Ok(())
}

fn setup_dev(dev: &Path) -> Result<(), StepError> {
    ensure_dir(dev)?;
    mount(
        Some("tmpfs"),
        dev,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_STRICTATIME,
        Some("mode=755,size=65536k"),
    )
    .map_err(|e| err("mount /dev", e, dev.display()))?;
    // mknod rather than bind mounts from the host: one syscall each, and no
    // host-mount references. (Allowed: we are real root; the devices cgroup
    // decides what may be opened.)
    for (name, major, minor) in DEVICES {
        let p = dev.join(name);
        mknod(
            &p,
            SFlag::S_IFCHR,
            Mode::from_bits_truncate(0o666),
            makedev(*major, *minor),
        )
        .map_err(|e| err("mknod", e, p.display()))?;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o666))
            .map_err(|e| ioerr("mknod", e, p.display()))?;
    }
    let pts = dev.join("pts");
    ensure_dir(&pts)?;
    mount(
        Some("devpts"),
        &pts,
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620,gid=5"),
    )
    .map_err(|e| err("mount /dev/pts", e, pts.display()))?;
    let shm = dev.join("shm");
    ensure_dir(&shm)?;
    mount(
        Some("shm"),
        &shm,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("mode=1777,size=65536k"),
    )
    .map_err(|e| err("mount /dev/shm", e, shm.display()))?;
    for (link, target) in [
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(target, dev.join(link))
            .map_err(|e| ioerr("mounts", e, format!("symlink /dev/{link}")))?;
    }
    Ok(())
}

/// Make `root` the process's root (pivot_root(2), NOTES: `pivot_root(".", ".")`
/// stacks the old root on top of the new one; umount2(".", MNT_DETACH) removes
/// it without needing a put_old directory inside the image).
pub(super) fn pivot(root: &Path) -> Result<(), StepError> {
    let step = "pivot_root";
    nix::unistd::chdir(root).map_err(|e| err(step, e, format!("chdir {}", root.display())))?;
    nix::unistd::pivot_root(".", ".").map_err(|e| err(step, e, root.display()))?;
    umount2(".", MntFlags::MNT_DETACH).map_err(|e| err(step, e, "detach old root"))?;
    nix::unistd::chdir("/").map_err(|e| err(step, e, "chdir /"))?;
    Ok(())
}

pub(super) fn remount_root_ro() -> Result<(), StepError> {
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
        None::<&str>,
    )
    .map_err(|e| err("readonly rootfs", e, "/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secure_join_stays_inside_root() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        fs::create_dir_all(r.join("etc")).unwrap();
        std::os::unix::fs::symlink("/../../../../etc", r.join("evil")).unwrap();
        std::os::unix::fs::symlink("../../..", r.join("etc/up")).unwrap();
        assert_eq!(secure_join(r, "/evil/hosts").unwrap(), r.join("etc/hosts"));
        assert_eq!(secure_join(r, "/etc/up/x").unwrap(), r.join("x"));
        assert_eq!(secure_join(r, "/../../a").unwrap(), r.join("a"));
    }
}
