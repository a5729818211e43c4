//! Finds and stops a nats-server that a crashed `shoal up` left running on its data dir.
//!
//! The server records its pid in the data dir (`pid_file`). A pid is only trusted after
//! `/proc/<pid>/cmdline` shows it is a nats-server started with *this* data dir's config:
//! pids are reused, and the process behind a stale pid file may be anything.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::natsd::NatsdConfig;

/// How long a left-over server gets to shut down cleanly before it is killed.
const GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum OrphanError {
    #[error("the orphaned nats-server (pid {pid}) for {config} cannot be stopped: {source}")]
    Signal {
        pid: i32,
        config: String,
        source: nix::Error,
    },
    #[error("the orphaned nats-server (pid {pid}) for {config} was still running {waited:?} after SIGKILL")]
    Survived {
        pid: i32,
        config: String,
        waited: Duration,
    },
}

/// Stops the nats-server left running for `config`'s data dir, if there is one, and says
/// which pid it was.
pub async fn stop_orphan(config: &NatsdConfig) -> Result<Option<i32>, OrphanError> {
    let Some(pid) = orphan_pid(config) else {
        return Ok(None);
    };
    let described = config.config_path().display().to_string();
    let signal = |sig| {
        kill(Pid::from_raw(pid), sig).map_err(|source| OrphanError::Signal {
            pid,
            config: described.clone(),
            source,
        })
    };
    signal(Signal::SIGTERM)?;
    if !gone_within(pid, GRACE).await {
        signal(Signal::SIGKILL)?;
        if !gone_within(pid, GRACE).await {
            return Err(OrphanError::Survived {
                pid,
                config: described,
                waited: GRACE,
            });
        }
    }
    Ok(Some(pid))
}

/// The pid of a running nats-server started with `config`'s config file, per its pid file.
fn orphan_pid(config: &NatsdConfig) -> Option<i32> {
    let text = std::fs::read_to_string(config.pid_path()).ok()?;
    let pid: i32 = text.trim().parse().ok()?;
    (pid > 0 && pid as u32 != std::process::id() && runs_config(pid, &config.config_path()))
        .then_some(pid)
}

/// Whether process `pid` is a live nats-server whose command line names `conf`.
fn runs_config(pid: i32, conf: &Path) -> bool {
    if is_gone(pid) {
        return false;
    }
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let mut args = cmdline.split(|b| *b == 0).filter(|a| !a.is_empty());
    let is_server = args
        .next()
        .map(|argv0| Path::new(std::ffi::OsStr::from_bytes(argv0)))
        .and_then(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy().starts_with("nats-server"))
        })
        .unwrap_or(false);
    let conf = conf.as_os_str().as_bytes();
    is_server && args.any(|a| a == conf)
}

/// A process that exited but was not reaped yet (a zombie) counts as gone: it holds no port
/// and no files any more.
fn is_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses and may hold spaces.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_none_or(|state| state == "Z" || state == "X"),
        Err(_) => true,
    }
}

async fn gone_within(pid: i32, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if is_gone(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    is_gone(pid)
}
