//! Run a closure inside another network namespace.
//!
//! # Layout
//! - [`in_netns`]: the one operation, and [`NetnsError`], what can go wrong with it.
//!
//! This is its own crate so that control-plane actors that bind sockets inside a node's
//! namespace (the naming actor) do not build the container runtime to get fourteen lines.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("open network namespace {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("setns into network namespace {path}: {source}")]
    Enter { path: PathBuf, source: nix::Error },
    #[error("the thread inside network namespace {path} panicked")]
    ThreadPanicked { path: PathBuf },
}

/// Run `f` on a short-lived thread that has joined the network namespace at `netns`
/// (a path such as `/var/run/netns/NAME` or `/proc/PID/ns/net`). setns(2) on one thread
/// of a multi-threaded process affects only that thread, so the caller's namespace, and
/// every socket its other threads hold, is untouched.
pub fn in_netns<T: Send + 'static>(
    netns: &Path,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, NetnsError> {
    let file = std::fs::File::open(netns).map_err(|source| NetnsError::Open {
        path: netns.to_path_buf(),
        source,
    })?;
    let path = netns.to_path_buf();
    let thread_path = path.clone();
    std::thread::spawn(move || {
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).map_err(|source| {
            NetnsError::Enter {
                path: thread_path,
                source,
            }
        })?;
        Ok(f())
    })
    .join()
    .map_err(|_| NetnsError::ThreadPanicked { path })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_namespace_is_an_open_error_naming_the_path() {
        let missing = Path::new("/nonexistent/shoal-netns-test");
        match in_netns(missing, || ()) {
            Err(NetnsError::Open { path, .. }) => assert_eq!(path, missing),
            other => panic!("expected an open error, got {other:?}"),
        }
    }

    #[test]
    fn the_own_namespace_runs_the_closure_and_returns_its_value() {
        // Joining the namespace we are already in needs CAP_SYS_ADMIN; skip without it.
        match in_netns(Path::new("/proc/self/ns/net"), || 42) {
            Ok(v) => assert_eq!(v, 42),
            Err(NetnsError::Enter {
                source: nix::Error::EPERM,
                ..
            }) => {}
            Err(e) => panic!("unexpected error: {e}"),
        }
    }

    #[test]
    fn a_panicking_closure_is_an_error_not_a_panic() {
        match in_netns(Path::new("/proc/self/ns/net"), || -> () { panic!("boom") }) {
            Err(NetnsError::ThreadPanicked { .. }) | Err(NetnsError::Enter { .. }) => {}
            other => panic!("expected a thread-panicked error, got {other:?}"),
        }
    }
}
