//! Crash hygiene of `shoal up`: its nats-server dies with it even on SIGKILL, a server left
//! over by an older crash is stopped and reported, and Ctrl-C returns within 5 s.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

const SHOAL: &str = env!("CARGO_BIN_EXE_shoal");

/// A `shoal up` child, SIGKILLed when dropped (and by the kernel if this test dies).
struct Up {
    child: Child,
    /// Everything it wrote on stderr, collected by a thread.
    stderr: std::sync::mpsc::Receiver<String>,
}

impl Up {
    /// Starts `shoal up` on `port` with its state in `dir`, and waits until it says it is up.
    fn start(dir: &Path, port: u16) -> Up {
        let mut command = Command::new(SHOAL);
        command
            .args(["up", "--no-node", "--port", &port.to_string()])
            .args(["--gateway-listen", "127.0.0.1:0", "--metrics-addr", ""])
            .arg("--data-dir")
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        shoal_bus::tied::die_with_spawning_thread(&mut command, Signal::SIGKILL);
        let mut child = command.spawn().unwrap();
        let (err_tx, stderr) = std::sync::mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                eprintln!("shoal up: {line}");
                let _ = err_tx.send(line);
            }
        });
        let out = child.stdout.take().unwrap();
        let (up_tx, up_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if line.contains("cluster is up") {
                    let _ = up_tx.send(());
                }
            }
        });
        let up = Up { child, stderr };
        up_rx
            .recv_timeout(Duration::from_secs(90))
            .expect("shoal up says the cluster is up");
        up
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    /// What it printed on stderr so far.
    fn stderr(&self) -> Vec<String> {
        self.stderr.try_iter().collect()
    }

    /// Waits for the process to exit, up to `limit`; whether it did.
    fn exited_within(&mut self, limit: Duration) -> bool {
        eventually(limit, || self.child.try_wait().ok().flatten().is_some())
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `cond` until it holds or `limit` passes; whether it held.
fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn server_pid(data_dir: &Path) -> i32 {
    std::fs::read_to_string(data_dir.join("nats/nats-server.pid"))
        .expect("the server wrote its pid file")
        .trim()
        .parse()
        .unwrap()
}

fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// The live nats-servers whose command line names this data dir's config.
fn servers_for(data_dir: &Path) -> Vec<i32> {
    let conf = data_dir.join("nats/nats-server.conf");
    let conf = conf.to_string_lossy();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(conf.as_ref()))
                .unwrap_or(false)
        })
        .filter(|pid| alive(*pid))
        .collect()
}

fn data_dir(tmp: &tempfile::TempDir) -> PathBuf {
    tmp.path().canonicalize().unwrap()
}

#[test]
fn sigkill_of_up_takes_its_server_along_and_ctrl_c_returns_within_5s() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = data_dir(&tmp);
    let port = shoal_bus::natsd::free_port().unwrap();

    let first = Up::start(&dir, port);
    let server = server_pid(&dir);
    assert!(alive(server));
    kill(first.pid(), Signal::SIGKILL).unwrap();
    assert!(
        eventually(Duration::from_secs(10), || !alive(server)),
        "nats-server {server} outlived its SIGKILLed shoal up"
    );
    drop(first);

    // The port and the store are free again: the next start comes up where the first was.
    let mut second = Up::start(&dir, port);
    assert_eq!(
        servers_for(&dir).len(),
        1,
        "exactly one server for the data dir"
    );
    let server = server_pid(&dir);
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());

    let asked = Instant::now();
    kill(second.pid(), Signal::SIGINT).unwrap();
    assert!(
        second.exited_within(Duration::from_secs(5)),
        "shoal up still ran 5 s after Ctrl-C"
    );
    eprintln!("Ctrl-C returned in {:?}", asked.elapsed());
    let status = second.child.try_wait().unwrap().unwrap();
    assert!(status.success(), "{status}: {:?}", second.stderr());
    assert!(!alive(server), "the server stopped with shoal up");
}

#[test]
fn an_orphaned_server_of_the_data_dir_is_stopped_and_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = data_dir(&tmp);
    let port = shoal_bus::natsd::free_port().unwrap();
    let mut first = Up::start(&dir, port);
    kill(first.pid(), Signal::SIGINT).unwrap();
    assert!(first.exited_within(Duration::from_secs(5)));

    // What an older shoal up, whose server did not die with it, left behind: a server on
    // the data dir's config, holding its port and store, parented to no shoal.
    let mut orphan = Command::new(shoal_bus::natsd::server_binary().unwrap());
    orphan
        .arg("-c")
        .arg(dir.join("nats/nats-server.conf"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    shoal_bus::tied::die_with_spawning_thread(&mut orphan, Signal::SIGKILL);
    let mut orphan = orphan.spawn().unwrap();
    let orphan_pid = orphan.id() as i32;
    // Up as far as a crash would have left it: serving, and its pid on record.
    let pid_file = dir.join("nats/nats-server.pid");
    assert!(eventually(Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            && std::fs::read_to_string(&pid_file).is_ok_and(|p| p.trim() == orphan_pid.to_string())
    }));

    let second = Up::start(&dir, port);
    let said = format!(
        "stopped an orphaned nats-server (pid {orphan_pid}) left by a previous shoal up for {}",
        dir.display()
    );
    let stderr = second.stderr();
    assert!(
        stderr.iter().any(|l| l == &said),
        "expected {said:?} in {stderr:?} (the orphan {}; its log: {})",
        if alive(orphan_pid) {
            "still runs"
        } else {
            "had exited"
        },
        std::fs::read_to_string(dir.join("nats/nats-server.log")).unwrap_or_default()
    );
    assert!(
        orphan.try_wait().unwrap().is_some(),
        "the orphan was stopped"
    );
    let servers = servers_for(&dir);
    assert_eq!(servers.len(), 1, "one server for the data dir: {servers:?}");
    assert_ne!(servers[0], orphan_pid);
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
}

#[test]
fn a_server_that_dies_under_up_is_started_again_and_the_cluster_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = data_dir(&tmp);
    let port = shoal_bus::natsd::free_port().unwrap();
    let up = Up::start(&dir, port);
    let first = server_pid(&dir);
    kill(Pid::from_raw(first), Signal::SIGKILL).unwrap();

    let manifest = dir.join("ns.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: after-the-crash\n",
    )
    .unwrap();
    let shoal = |args: &[&str]| {
        Command::new(SHOAL)
            .args(args)
            .env("SHOAL_NATS", format!("nats://127.0.0.1:{port}"))
            .env("SHOAL_CREDS", dir.join("auth/creds/admin.nk"))
            .output()
            .unwrap()
    };
    // Written through the API actor, whose connection had to come back to the new server.
    assert!(
        eventually(Duration::from_secs(60), || {
            shoal(&["apply", "-f", manifest.to_str().unwrap()])
                .status
                .success()
        }),
        "no write succeeded within 60 s of the server's death (servers now: {:?})",
        servers_for(&dir)
    );
    let got = shoal(&["get", "ns", "after-the-crash", "-o", "name"]);
    assert!(
        String::from_utf8_lossy(&got.stdout).contains("after-the-crash"),
        "{got:?}"
    );
    let servers = servers_for(&dir);
    assert_eq!(servers.len(), 1, "one server for the data dir: {servers:?}");
    assert_ne!(servers[0], first, "a new process");

    let mut said = Vec::new();
    assert!(
        eventually(Duration::from_secs(10), || {
            said.extend(up.stderr());
            said.iter()
                .any(|l| l.contains("nats-server exited on its own (signal: 9"))
                && said.iter().any(|l| l.contains("nats-server is back on"))
        }),
        "shoal up reports the exit and the restart: {said:?}"
    );
}
