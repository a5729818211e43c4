//! Shoal's node container runtime: images, rootfs, cgroups, pod sandboxes,
//! containers, supervision, logs, probes and a hollow (simulated) runtime.
//!
//! # Layout
//!
//! One module per kernel concept, each small and with one job:
//!
//! | module | what lives there |
//! | --- | --- |
//! | [`error`] | the crate's [`Error`] type and the Kubernetes reason each error maps to |
//! | [`image`] | content-addressed image store: import (OCI layout / docker-save), blob verification, references, layer unpacking with whiteouts; [`image::build`] writes deterministic OCI layouts, among them the busybox image built from the host's busybox-static |
//! | `testimage` | (feature `test-support`) the `docker save` writer and busybox tarball, for tests |
//! | `testnet` | (feature `test-support`) a private multi-host network made of network namespaces (a switch namespace and host namespaces routed to each other's pod CIDRs), for tests and benchmarks |
//! | [`rootfs`] | per-container overlayfs (lower = unpacked layers, upper/work per container) |
//! | [`cgroups`] | [`cgroups::CgroupDriver`] trait with v1, v2 and fake drivers; Kubernetes cpu/memory/pids formulas |
//! | [`net`] | pod CIDR maths and the file-backed IP allocator ([`net::Ipam`]) |
//! | [`sandbox`] | pod sandbox spec/info, /etc/hosts and resolv.conf rendering |
//! | [`seccomp`] | seccomp profiles as data (`RuntimeDefault`, `Localhost` files in Docker's format) compiled to BPF with seccompiler |
//! | [`container`] | container spec/info/state types and the on-disk state files written by the monitor |
//! | [`logs`] | CRI-format log writer with size rotation (used by the monitor) and reader (tail/follow/previous) |
//! | [`pty`] | terminal sizes (read and set) for interactive exec sessions |
//! | [`probe`] | HTTP GET / TCP socket probes (optionally from inside a network namespace) |
//! | [`runtime`] | the [`Runtime`] trait and the real Linux implementation [`LinuxRuntime`], split by job: run-spec resolution (pure), sandbox plumbing, container lifecycle, orphan cleanup |
//! | [`hollow`] | [`HollowRuntime`]: a simulated runtime for scale tests only |
//! | [`shim`] | the code of the single-threaded `shoal-shim` helper binary: namespaces (every unshare and setns, in `shim::namespaces`), mounts, pivot_root, caps, exec (one-shot, and interactive sessions on a pty or pipes), the last steps before exec (user, caps, no_new_privs, seccomp, in `shim::confine`), the per-container monitor |
//! | `sys` | the only module allowed `unsafe`: fork(2), pidfd_open(2), fd 3 passing to the shim, and the terminal ioctls (TIOCSCTTY, TIOCSWINSZ, TIOCGWINSZ) |
//!
//! # Process model (why there is a shim)
//!
//! The agent is multi-threaded, and `unshare(CLONE_NEWNS)`, `setns` into a mount
//! namespace and `fork` are unsafe or impossible there. Every kernel-heavy step
//! therefore runs in `shoal-shim` (built from `src/bin/shoal-shim.rs`), which the
//! runtime spawns with a JSON spec on stdin and whose JSON reply it reads on stdout.
//! For `run`, the shim double-forks a per-container *monitor* (like conmon) that is
//! the parent of the container's init, copies its stdout/stderr into log files, and
//! writes `exit.json` when it exits. The agent is never the container's parent, so
//! an agent restart re-adopts containers from the state directory instead of
//! restarting them.
//!
//! # State directory
//!
//! ```text
//! <state>/images/blobs/sha256/<hex>      verified blobs
//! <state>/images/refs.json               reference -> manifest digest
//! <state>/images/layers/<hex>/           unpacked layers (extracted once)
//! <state>/sandboxes/<sid>/sandbox.json   sandbox record (written first: removal tolerates half-created sandboxes)
//! <state>/sandboxes/<sid>/{hosts,resolv.conf,hostname}
//! <state>/sandboxes/<sid>/pause.json       pause process of a shared pid namespace (written by the shim)
//! <state>/sandboxes/<sid>/volumes/<name>/  emptyDir volumes
//! <state>/sandboxes/<sid>/logs/<container-name>/{current,previous}.log[.N]
//! <state>/containers/<cid>/container.json  runtime's record of the container
//! <state>/containers/<cid>/pid.json        written by the monitor once init is forked
//! <state>/containers/<cid>/exit.json       written by the monitor when init exits
//! <state>/containers/<cid>/{upper,work,rootfs}/
//! <state>/ipam/<ip>                        one file per allocated pod IP (content: sandbox id)
//! <state>/trash/                           removed container dirs, deleted by a background thread
//! <run>/<sid>/{net,ipc,uts[,pid]}          namespace bind mounts (default run dir: <state>/run)
//! ```

pub mod cgroups;
pub mod container;
pub mod error;
pub mod hollow;
pub mod image;
pub mod logs;
pub mod net;
pub mod probe;
pub mod pty;
pub mod rootfs;
pub mod runtime;
pub mod sandbox;
pub mod seccomp;
pub mod shim;
mod sys;
#[cfg(feature = "test-support")]
pub mod testimage;
#[cfg(feature = "test-support")]
pub mod testnet;
mod util;

pub use container::{ContainerInfo, ContainerSpec, ContainerState, ExitReason, MountSpec};
pub use error::{Error, Result};
pub use hollow::{HollowConfig, HollowRuntime};
pub use runtime::{
    CleanupReport, ExecRequest, ExecResult, LinuxRuntime, Runtime, RuntimeConfig, Stats,
};
pub use sandbox::{DnsConfig, PauseProcess, SandboxInfo, SandboxSpec};
