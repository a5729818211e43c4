//! A one-machine cluster (`shoal up` with a real node agent) for the end-to-end tests of
//! workloads, with a Drop guard that stops it and removes its bridge and Service rules, and
//! the helpers those tests share (running `shoal`, waiting with a deadline).

#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

pub const SHOAL: &str = env!("CARGO_BIN_EXE_shoal");
pub const T: Duration = Duration::from_secs(90);

pub struct Cluster {
    pub url: String,
    pub up: Child,
    pub bridge: String,
}

impl Cluster {
    pub fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new(SHOAL)
            .args(args)
            .env("SHOAL_NATS", &self.url)
            .output()
            .unwrap();
        let out = (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        eprintln!("$ shoal {}\n{}{}", args.join(" "), out.1, out.2);
        out
    }

    pub fn wait(&self, what: &str, ok: impl FnMut(&Cluster) -> bool) {
        self.wait_for(what, T, ok)
    }

    pub fn wait_for(&self, what: &str, limit: Duration, mut ok: impl FnMut(&Cluster) -> bool) {
        let start = Instant::now();
        while !ok(self) {
            assert!(start.elapsed() < limit, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Sets the controllers' clock; returns once they have it.
    pub fn set_clock(&self, t: chrono::DateTime<chrono::Utc>) {
        let url = self.url.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let answer = runtime.block_on(async move {
            let nats = shoal_bus::connect(&url, "clock-test").await.unwrap();
            let reply = nats
                .request(bus_schemas::subjects::TEST_CLOCK, t.to_rfc3339().into())
                .await
                .expect("the controllers answer on the test clock");
            String::from_utf8_lossy(&reply.payload).into_owned()
        });
        assert_eq!(answer, "ok");
    }

    /// Job names of the CronJob `tick`, from `shoal get jobs`.
    pub fn jobs(&self) -> Vec<(String, String)> {
        let (_, out, _) = self.run(&["get", "jobs", "--no-headers"]);
        out.lines()
            .filter_map(|l| {
                let mut cells = l.split_whitespace();
                Some((cells.next()?.to_string(), cells.next()?.to_string()))
            })
            .filter(|(name, _)| name.starts_with("tick-"))
            .collect()
    }

    /// Lets the running pod of job `job` finish: its container waits for /tmp/done.
    pub fn release(&self, job: &str) {
        let mut pod = String::new();
        self.wait("the job's pod running", |c| {
            let (_, out, _) = c.run(&[
                "get",
                "po",
                "-l",
                &format!("job-name={job}"),
                "--no-headers",
            ]);
            match out.lines().find(|l| l.contains("Running")) {
                Some(line) => {
                    pod = line.split_whitespace().next().unwrap().to_string();
                    true
                }
                None => false,
            }
        });
        let (ok, _, err) = self.run(&["exec", &pod, "--", "touch", "/tmp/done"]);
        assert!(ok, "{err}");
        self.wait("the job complete", |c| {
            c.run(&["get", "job", job, "--no-headers"])
                .1
                .contains("Complete")
        });
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.up.id() as i32), Signal::SIGINT);
        let _ = self.up.wait();
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .status();
        let _ = Command::new("nft")
            .args(["delete", "table", "ip", "shoal"])
            .stderr(Stdio::null())
            .status();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Cluster {
    /// `shoal up` on fresh ports, a bridge and pod range of its own, `env` added; returns
    /// once its node is registered and the busybox image is in the registry.
    pub fn start(dir: &std::path::Path, env: &[(&str, &str)]) -> Cluster {
        Cluster::start_with(dir, env, &[])
    }

    /// [`Cluster::start`] with more `shoal up` arguments (actors, metrics period, …).
    pub fn start_with(dir: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> Cluster {
        let port = free_port();
        // Named after the NATS port, unique among the clusters running at one time (two in
        // one test, too): a shared bridge or pod range breaks both clusters' networks.
        let bridge = format!("shs{port}");
        let range = port % 2048;
        let up = Command::new(SHOAL)
            .args([
                "up",
                "--port",
                &port.to_string(),
                "--bridge",
                &bridge,
                "--pod-cidr",
                &format!("10.{}.{}.0/24", 232 + range / 256, range % 256),
                "--gateway-listen",
                &format!("127.0.0.1:{}", free_port()),
                "--metrics-addr",
                &format!("127.0.0.1:{}", free_port()),
                "--data-dir",
            ])
            .arg(dir)
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let cluster = Cluster {
            url: format!("nats://127.0.0.1:{port}"),
            up,
            bridge,
        };
        cluster.wait("the cluster and its node", |c| {
            c.run(&["get", "no", "-o", "name"]).1.contains("node/")
        });
        let (ok, _, err) = cluster.run(&["image", "build-busybox"]);
        assert!(ok, "{err}");
        cluster
    }

    /// `shoal apply` of a manifest given as text.
    pub fn apply(&self, dir: &std::path::Path, name: &str, manifest: &str) {
        let path = dir.join(name);
        std::fs::write(&path, manifest).unwrap();
        let (ok, _, err) = self.run(&["apply", "-f", path.to_str().unwrap()]);
        assert!(ok, "{err}");
    }
}
