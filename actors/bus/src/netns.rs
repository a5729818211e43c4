//! Async work inside another network namespace: a host of a multi-host test fabric, where a
//! server listens on an address the caller's namespace cannot reach.
//!
//! A socket belongs to the namespace of the thread that made it, so the work runs on a thread
//! that joined the namespace, on a single-threaded runtime of its own: every connection it
//! opens, and every reconnect, is made there.

use std::future::Future;
use std::path::PathBuf;

pub use shoal_netns::NetnsError;

fn netns_path(name: &str) -> PathBuf {
    PathBuf::from(format!("/run/netns/{name}"))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread tokio runtime builds with the default settings")
}

/// Runs `work` to completion inside the namespace `netns` (an `ip netns` name), blocking the
/// caller: call it from a blocking context (`spawn_blocking`, a plain thread).
pub fn block_on_in<T, F>(netns: &str, work: F) -> Result<T, NetnsError>
where
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    shoal_netns::in_netns(&netns_path(netns), move || runtime().block_on(work))
}

/// Starts `work` inside the namespace `netns` on a thread of its own; join the handle for its
/// result (a panic inside comes back as the join's error).
pub fn spawn_in<T, F, Fut>(netns: &str, work: F) -> std::thread::JoinHandle<Result<T, NetnsError>>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T>,
{
    let path = netns_path(netns);
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).map_err(|source| NetnsError::Open {
            path: path.clone(),
            source,
        })?;
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
            .map_err(|source| NetnsError::Enter { path, source })?;
        Ok(runtime().block_on(work()))
    })
}
