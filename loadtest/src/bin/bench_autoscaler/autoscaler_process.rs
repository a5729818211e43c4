//! Actors as their own process: `shoal up --join URL --actors LIST --creds DIR`, the `shoal`
//! binary beside this one (same target directory), each actor presenting its own identity
//! from the bus's identity directory. Its memory is then its own, and its `/metrics` (on a
//! free port) tells every pass's duration: between two readings one pass apart, the growth
//! of the pass histogram's sum is that pass's duration exactly.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

const PASS_FAMILY: &str = "shoal_autoscaler_pass_duration_seconds";

pub struct ActorProcess {
    child: Child,
    metrics_addr: String,
    _data_dir: tempfile::TempDir,
}

/// The `shoal` binary this benchmark runs: `SHOAL_BIN`, else beside this executable.
fn shoal_bin() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("SHOAL_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().context("locating this binary")?;
    let path = exe.with_file_name("shoal");
    if !path.is_file() {
        bail!(
            "{} is missing: build it first (`cargo build -p shoal-cli`, same profile) or set SHOAL_BIN",
            path.display()
        );
    }
    Ok(path)
}

impl ActorProcess {
    /// Starts `actors` joined to `url`, with credentials from `auth_dir/creds` and pods
    /// sampled every `metrics_period` (the autoscaler's sample window follows it).
    pub fn start(
        url: &str,
        auth_dir: &Path,
        actors: &str,
        metrics_period: Duration,
    ) -> Result<ActorProcess> {
        let data_dir = tempfile::tempdir()?;
        let port = shoal_bus::natsd::free_port()?;
        let metrics_addr = format!("127.0.0.1:{port}");
        let mut command = Command::new(shoal_bin()?);
        command
            .args(["up", "--join", url, "--actors", actors])
            .arg("--creds")
            .arg(auth_dir.join("creds"))
            .arg("--data-dir")
            .arg(data_dir.path())
            .args(["--metrics-addr", &metrics_addr])
            .args([
                "--metrics-period",
                &metrics_period.as_secs().max(1).to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        // If this benchmark dies, however it dies, its actors go with it.
        let child = shoal_bus::tied::spawn(command, Signal::SIGKILL)
            .context("starting `shoal up --join` for the actors")?;
        println!(
            "actors [{actors}] in their own process: shoal up --join (pid {}, /metrics on {metrics_addr})",
            child.id()
        );
        Ok(ActorProcess {
            child,
            metrics_addr,
            _data_dir: data_dir,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The pass histogram's (count, sum in seconds); None until it is served.
    pub fn pass_totals(&self) -> Option<(u64, f64)> {
        pass_totals(&http_get(&self.metrics_addr, "/metrics").ok()?)
    }
}

/// The pass histogram's (count, sum) in a Prometheus text exposition.
fn pass_totals(body: &str) -> Option<(u64, f64)> {
    let value = |suffix: &str| {
        body.lines()
            .find(|l| {
                l.strip_prefix(PASS_FAMILY)
                    .and_then(|rest| rest.strip_prefix(suffix))
                    .is_some_and(|rest| rest.starts_with(['{', ' ']))
            })
            .and_then(|l| l.split_whitespace().last())
            .and_then(|v| v.parse::<f64>().ok())
    };
    Some((value("_count")? as u64, value("_sum")?))
}

impl Drop for ActorProcess {
    fn drop(&mut self) {
        // SIGTERM first: it releases its leases and stops its actors in order.
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.0 GET (the body only); enough for a local `/metrics`.
fn http_get(addr: &str, path: &str) -> Result<String> {
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    match response.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.") && head.contains(" 200") => {
            Ok(body.to_string())
        }
        _ => bail!("GET http://{addr}{path}: unexpected response"),
    }
}

#[cfg(test)]
mod tests {
    use super::pass_totals;

    #[test]
    fn the_pass_histogram_is_read_with_or_without_labels_and_other_families_ignored() {
        let body = "# TYPE shoal_autoscaler_pass_duration_seconds histogram\n\
            shoal_autoscaler_pass_duration_seconds_sum_other 9\n\
            shoal_autoscaler_pass_duration_seconds_sum{actor=\"autoscaler\"} 1.25\n\
            shoal_autoscaler_pass_duration_seconds_count{actor=\"autoscaler\"} 3\n\
            shoal_autoscaler_pass_duration_seconds_bucket{le=\"0.001\",actor=\"autoscaler\"} 0\n";
        assert_eq!(pass_totals(body), Some((3, 1.25)));
        let bare = "shoal_autoscaler_pass_duration_seconds_count 7\n\
            shoal_autoscaler_pass_duration_seconds_sum 0.5\n";
        assert_eq!(pass_totals(bare), Some((7, 0.5)));
        assert_eq!(pass_totals("# EOF\n"), None);
    }
}
