//! A one-machine cluster (`shoal up` with a real node agent) for the end-to-end tests of
//! workloads, with a Drop guard that stops it and removes its pods, bridge and Service rules,
//! and the helpers those tests share (running `shoal`, waiting with a deadline, removing
//! the pods a stopped `shoal up` left running).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use shoal_bus::tied::TiedToThisThread;
use shoal_node::net::NetworkConfig;
use shoal_node::runtime::RuntimeConfig;
use shoal_node::LinuxRuntime;

pub const SHOAL: &str = env!("CARGO_BIN_EXE_shoal");
pub const T: Duration = Duration::from_secs(90);

pub struct Cluster {
    pub url: String,
    pub up: Child,
    pub bridge: String,
    pub pod_cidr: String,
    pub data_dir: PathBuf,
}

impl Cluster {
    /// The admin credential `shoal up` wrote into its data dir.
    pub fn admin_creds(&self) -> PathBuf {
        self.data_dir.join("auth/creds/admin.nk")
    }

    /// `shoal ARGS` as this cluster's admin, not yet run.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(SHOAL);
        command
            .args(args)
            .env("SHOAL_NATS", &self.url)
            .env("SHOAL_CREDS", self.admin_creds());
        command
    }

    pub fn run(&self, args: &[&str]) -> (bool, String, String) {
        run_shown(self.command(args), &format!("shoal {}", args.join(" ")))
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
        let (url, admin) = (self.url.clone(), self.admin_creds());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let answer = runtime.block_on(async move {
            let auth = shoal_bus::auth::ClientAuth::from_creds_file(&admin).unwrap();
            let nats = shoal_bus::connect(&url, "clock-test", &auth).await.unwrap();
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
        remove_pods(&self.data_dir, &self.bridge, &self.pod_cidr);
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .status();
        let _ = Command::new("nft")
            .args(["delete", "table", "ip", "shoal"])
            .stderr(Stdio::null())
            .status();
    }
}

/// Runs `command` with no stdin; returns (success, stdout, stderr), and shows them under
/// `shown` in the test's output (printed only when it fails).
pub fn run_shown(mut command: Command, shown: &str) -> (bool, String, String) {
    let out = command.stdin(Stdio::null()).output().unwrap();
    let out = (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    eprintln!("$ {shown}\n{}{}", out.1, out.2);
    out
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
        let pod_cidr = format!("10.{}.{}.0/24", 232 + range / 256, range % 256);
        let up = Command::new(SHOAL)
            .args([
                "up",
                "--port",
                &port.to_string(),
                "--bridge",
                &bridge,
                "--pod-cidr",
                &pod_cidr,
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
            .tied_to_this_thread()
            .spawn()
            .unwrap();
        let cluster = Cluster {
            url: format!("nats://127.0.0.1:{port}"),
            up,
            bridge,
            pod_cidr,
            data_dir: dir.to_path_buf(),
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

/// Removes every sandbox and container of the node of the `shoal up` whose data dir was
/// `data_dir` (its runtime state is `<data_dir>/node`), saying what could not be removed.
/// `shoal up` stops without stopping its containers (the next start re-adopts them, as after
/// a kubelet restart), so a test that only stopped it would leave every pod's monitor and
/// pause process (`shoal-shim`) and its containers running for good. Call it once `shoal up`
/// has exited, so that no agent starts anything behind it.
pub fn remove_pods(data_dir: &Path, bridge: &str, pod_cidr: &str) {
    let Ok(cidr) = pod_cidr.parse() else {
        eprintln!("test cleanup: bad pod CIDR {pod_cidr}");
        return;
    };
    // `shoal up` resolves its data dir before naming the node's cgroup parent after it.
    let data_dir = data_dir
        .canonicalize()
        .unwrap_or_else(|_| data_dir.to_path_buf());
    let state_dir = data_dir.join("node");
    let mut config = RuntimeConfig::new(&state_dir, NetworkConfig::new(bridge, cidr));
    // The cgroup parent `shoal up` gives its node, named after the host by default.
    config.cgroup_parent = RuntimeConfig::cgroup_parent_for(&hostname(), &state_dir);
    match LinuxRuntime::new(config) {
        Ok(runtime) => {
            for failure in runtime.remove_all() {
                eprintln!("test cleanup: {failure}");
            }
        }
        Err(e) => eprintln!("test cleanup: opening the node's runtime: {e}"),
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_lowercase())
        .unwrap_or_else(|_| "node".into())
}
