//! `RuntimeDefault`: the policy of Docker's and containerd's default seccomp profile.
//!
//! Everything not allowed fails with EPERM. The allow list is the syscalls an ordinary
//! program needs; calls that reach kernel-wide state (namespaces, mounts, modules, keyrings,
//! BPF, perf, reboot, clock setting, userfaultfd) are allowed only with the capability that
//! already guards them, so a container given CAP_SYS_ADMIN may mount as it could with
//! Docker, and one without it cannot even reach the kernel code that checks.

use super::{Action, ArgCheck, ArgOp, Profile, Rule};

const EPERM: u32 = libc::EPERM as u32;
const ENOSYS: u32 = libc::ENOSYS as u32;

/// Allowed whatever the container's capabilities. Names of other architectures (the
/// 32-bit variants) are harmless: they are skipped where absent.
#[rustfmt::skip]
const ALLOWED: &[&str] = &[
    "accept", "accept4", "access", "adjtimex", "alarm", "bind", "brk", "cachestat", "capget",
    "capset", "chdir", "chmod", "chown", "chown32", "clock_adjtime", "clock_adjtime64",
    "clock_getres", "clock_getres_time64", "clock_gettime", "clock_gettime64",
    "clock_nanosleep", "clock_nanosleep_time64", "close", "close_range", "connect",
    "copy_file_range", "creat", "dup", "dup2", "dup3", "epoll_create", "epoll_create1",
    "epoll_ctl", "epoll_ctl_old", "epoll_pwait", "epoll_pwait2", "epoll_wait", "epoll_wait_old",
    "eventfd", "eventfd2", "execve", "execveat", "exit", "exit_group", "faccessat",
    "faccessat2", "fadvise64", "fadvise64_64", "fallocate", "fanotify_mark", "fchdir", "fchmod",
    "fchmodat", "fchmodat2", "fchown", "fchown32", "fchownat", "fcntl", "fcntl64", "fdatasync",
    "fgetxattr", "flistxattr", "flock", "fork", "fremovexattr", "fsetxattr", "fstat", "fstat64",
    "fstatat64", "fstatfs", "fstatfs64", "fsync", "ftruncate", "ftruncate64", "futex",
    "futex_requeue", "futex_time64", "futex_wait", "futex_waitv", "futex_wake", "futimesat",
    "getcpu", "getcwd", "getdents", "getdents64", "getegid", "getegid32", "geteuid",
    "geteuid32", "getgid", "getgid32", "getgroups", "getgroups32", "getitimer", "getpeername",
    "getpgid", "getpgrp", "getpid", "getppid", "getpriority", "getrandom", "getresgid",
    "getresgid32", "getresuid", "getresuid32", "getrlimit", "get_robust_list", "getrusage",
    "getsid", "getsockname", "getsockopt", "get_thread_area", "gettid", "gettimeofday",
    "getuid", "getuid32", "getxattr", "inotify_add_watch", "inotify_init", "inotify_init1",
    "inotify_rm_watch", "io_cancel", "ioctl", "io_destroy", "io_getevents", "io_pgetevents",
    "io_pgetevents_time64", "ioprio_get", "ioprio_set", "io_setup", "io_submit", "ipc", "kill",
    "landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self", "lchown",
    "lchown32", "lgetxattr", "link", "linkat", "listen", "listxattr", "llistxattr", "_llseek",
    "lremovexattr", "lseek", "lsetxattr", "lstat", "lstat64", "madvise", "map_shadow_stack",
    "membarrier", "memfd_create", "memfd_secret", "mincore", "mkdir", "mkdirat", "mknod",
    "mknodat", "mlock", "mlock2", "mlockall", "mmap", "mmap2", "mprotect", "mq_getsetattr",
    "mq_notify", "mq_open", "mq_timedreceive", "mq_timedreceive_time64", "mq_timedsend",
    "mq_timedsend_time64", "mq_unlink", "mremap", "mseal", "msgctl", "msgget", "msgrcv",
    "msgsnd", "msync", "munlock", "munlockall", "munmap", "name_to_handle_at", "nanosleep",
    "newfstatat", "_newselect", "open", "openat", "openat2", "pause", "pidfd_open",
    "pidfd_send_signal", "pipe", "pipe2", "pkey_alloc", "pkey_free", "pkey_mprotect", "poll",
    "ppoll", "ppoll_time64", "prctl", "pread64", "preadv", "preadv2", "prlimit64",
    "process_mrelease", "pselect6", "pselect6_time64", "pwrite64", "pwritev", "pwritev2",
    "read", "readahead", "readlink", "readlinkat", "readv", "recv", "recvfrom", "recvmmsg",
    "recvmmsg_time64", "recvmsg", "remap_file_pages", "removexattr", "rename", "renameat",
    "renameat2", "restart_syscall", "rmdir", "rseq", "rt_sigaction", "rt_sigpending",
    "rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
    "rt_sigtimedwait_time64", "rt_tgsigqueueinfo", "sched_getaffinity", "sched_getattr",
    "sched_getparam", "sched_get_priority_max", "sched_get_priority_min", "sched_getscheduler",
    "sched_rr_get_interval", "sched_rr_get_interval_time64", "sched_setaffinity",
    "sched_setattr", "sched_setparam", "sched_setscheduler", "sched_yield", "seccomp", "select",
    "semctl", "semget", "semop", "semtimedop", "semtimedop_time64", "send", "sendfile",
    "sendfile64", "sendmmsg", "sendmsg", "sendto", "setfsgid", "setfsgid32", "setfsuid",
    "setfsuid32", "setgid", "setgid32", "setgroups", "setgroups32", "setitimer", "setpgid",
    "setpriority", "setregid", "setregid32", "setresgid", "setresgid32", "setresuid",
    "setresuid32", "setreuid", "setreuid32", "setrlimit", "set_robust_list", "setsid",
    "setsockopt", "set_thread_area", "set_tid_address", "setuid", "setuid32", "setxattr",
    "shmat", "shmctl", "shmdt", "shmget", "shutdown", "sigaltstack", "signalfd", "signalfd4",
    "sigprocmask", "sigreturn", "socket", "socketcall", "socketpair", "splice", "stat",
    "stat64", "statfs", "statfs64", "statx", "symlink", "symlinkat", "sync", "sync_file_range",
    "syncfs", "sysinfo", "tee", "tgkill", "time", "timer_create", "timer_delete",
    "timer_getoverrun", "timer_gettime", "timer_gettime64", "timer_settime", "timer_settime64",
    "timerfd_create", "timerfd_gettime", "timerfd_gettime64", "timerfd_settime",
    "timerfd_settime64", "times", "tkill", "truncate", "truncate64", "ugetrlimit", "umask",
    "uname", "unlink", "unlinkat", "utime", "utimensat", "utimensat_time64", "utimes", "vfork",
    "vmsplice", "wait4", "waitid", "waitpid", "write", "writev",
    // Kernels from 4.8 on check ptrace against seccomp itself, so it is safe to allow.
    "ptrace", "process_vm_readv", "process_vm_writev",
    // x86's own: thread-local storage and the segment table.
    "arch_prctl", "modify_ldt",
];

/// Allowed only to containers holding the capability that guards them in the kernel.
#[rustfmt::skip]
const BY_CAPABILITY: &[(&str, &[&str])] = &[
    (
        "CAP_SYS_ADMIN",
        &[
            "bpf",
            "clone",
            "clone3",
            "fanotify_init",
            "fsconfig",
            "fsmount",
            "fsopen",
            "fspick",
            "lookup_dcookie",
            "mount",
            "mount_setattr",
            "move_mount",
            "open_tree",
            "perf_event_open",
            "quotactl",
            "quotactl_fd",
            "setdomainname",
            "sethostname",
            "setns",
            "syslog",
            "umount",
            "umount2",
            "unshare",
        ],
    ),
    ("CAP_SYS_BOOT", &["reboot"]),
    ("CAP_SYS_CHROOT", &["chroot"]),
    (
        "CAP_SYS_MODULE",
        &["delete_module", "init_module", "finit_module"],
    ),
    ("CAP_SYS_PACCT", &["acct"]),
    (
        "CAP_SYS_PTRACE",
        &["kcmp", "pidfd_getfd", "process_madvise"],
    ),
    ("CAP_SYS_RAWIO", &["iopl", "ioperm"]),
    (
        "CAP_SYS_TIME",
        &["settimeofday", "stime", "clock_settime", "clock_settime64"],
    ),
    ("CAP_SYS_TTY_CONFIG", &["vhangup"]),
    (
        "CAP_SYS_NICE",
        &[
            "get_mempolicy",
            "mbind",
            "set_mempolicy",
            "set_mempolicy_home_node",
        ],
    ),
    ("CAP_SYSLOG", &["syslog"]),
    ("CAP_BPF", &["bpf"]),
    ("CAP_PERFMON", &["perf_event_open"]),
];

/// clone(2) flags that create namespaces: without CAP_SYS_ADMIN clone may only make
/// processes and threads.
const CLONE_NAMESPACE_FLAGS: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWCGROUP) as u64;

/// The personalities programs legitimately switch to (Linux, 32-bit address space,
/// randomisation off for debuggers, and the query value).
const PERSONALITIES: &[u64] = &[0x0, 0x8, 0x20000, 0x20008, 0xffff_ffff];

/// The `RuntimeDefault` profile for a container with capabilities `caps` (names such as
/// `CAP_SYS_ADMIN`, as the runtime resolves them).
pub fn profile(caps: &[String]) -> Profile {
    let has = |cap: &str| caps.iter().any(|c| c == cap);
    let mut rules = vec![Rule::new(ALLOWED, Action::Allow)];
    for (cap, names) in BY_CAPABILITY {
        if has(cap) {
            rules.push(Rule::new(names, Action::Allow));
        }
    }
    for p in PERSONALITIES {
        let mut r = Rule::new(&["personality"], Action::Allow);
        r.args = vec![ArgCheck {
            index: 0,
            op: ArgOp::Eq,
            value: *p,
        }];
        rules.push(r);
    }
    if !has("CAP_SYS_ADMIN") {
        let mut clone = Rule::new(&["clone"], Action::Allow);
        clone.args = vec![ArgCheck {
            index: 0,
            op: ArgOp::MaskedEq(CLONE_NAMESPACE_FLAGS),
            value: 0,
        }];
        rules.push(clone);
        // clone3 passes its flags in memory a filter cannot read. ENOSYS, not EPERM, makes
        // the C library fall back to clone, whose flags the rule above checks.
        rules.push(Rule::new(&["clone3"], Action::Errno(ENOSYS)));
    }
    Profile {
        default_action: Action::Errno(EPERM),
        rules,
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn capability_calls_follow_the_capabilities() {
        let plain = profile(&["CAP_CHOWN".into()]);
        let allowed = |p: &Profile, name: &str| {
            p.rules.iter().any(|r| {
                r.action == Action::Allow && r.args.is_empty() && r.names.iter().any(|n| n == name)
            })
        };
        assert!(allowed(&plain, "read"));
        assert!(!allowed(&plain, "mount"));
        assert!(!allowed(&plain, "unshare"));
        assert!(
            !allowed(&plain, "clone"),
            "clone only without namespace flags"
        );
        let admin = profile(&["CAP_SYS_ADMIN".into()]);
        assert!(allowed(&admin, "mount"));
        assert!(allowed(&admin, "clone"));
        assert!(!admin
            .rules
            .iter()
            .any(|r| r.action == Action::Errno(ENOSYS)));
        for p in [plain, admin] {
            assert_eq!(p.default_action, Action::Errno(EPERM));
            assert!(!crate::seccomp::filters(&p).unwrap().is_empty());
        }
    }
}
