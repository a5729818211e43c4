//! Issue 14, as the README's "Running on several machines" tells an operator to do it: three
//! `shoal up --server-name sN --routes …` processes, each on a host of its own (network
//! namespaces joined by the test fabric), the first one's `auth/` copied to the other two
//! before their first start. They form one NATS cluster with the state at R3. From a fourth
//! host, `shoal version` and `shoal get nodes` show the servers, the JetStream meta leader and
//! each stream's replicas; once one host's `shoal up` is SIGKILLed (its nats-server dies
//! with it), the state stream shows as degraded there and writes go on.
//!
//! Every `shoal up` is stopped, and every namespace removed, when the test ends, even when an
//! assertion failed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use shoal_bus::tied::TiedToThisThread;
use shoal_node::testnet::Fabric;

mod up_cluster;
use up_cluster::SHOAL;

const SERVERS: usize = 3;
/// Three control planes starting on two cores, then a Raft election (4–9 s in nats-server).
const CONVERGE: Duration = Duration::from_secs(120);

/// One host's `shoal up`: SIGINT when dropped, SIGKILL if it has not stopped in 20 s.
struct Up(Option<Child>);

impl Up {
    fn kill(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let Some(child) = self.0.as_mut() else { return };
        let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGINT);
        let start = Instant::now();
        while child.try_wait().ok().flatten().is_none() {
            if start.elapsed() > Duration::from_secs(20) {
                self.kill();
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

struct World {
    // Field order is drop order: the servers stop before their namespaces go.
    ups: Vec<Up>,
    fabric: Fabric,
    dir: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        World {
            ups: Vec::new(),
            fabric: Fabric::new(SERVERS + 1).expect("test fabric (needs root and iproute2)"),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn data_dir(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("s{}", i + 1))
    }

    /// Starts `shoal up` on server host `i`, routed to the other two.
    fn start(&mut self, i: usize) {
        let routes: Vec<String> = (0..SERVERS)
            .filter(|&j| j != i)
            .map(|j| format!("nats://{}:6222", self.fabric.hosts[j].address))
            .collect();
        let log =
            std::fs::File::create(self.dir.path().join(format!("up-s{}.log", i + 1))).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.fabric.hosts[i].netns, SHOAL, "up"])
            .args(["--server-name", &format!("s{}", i + 1)])
            .args(["--nats-host", "0.0.0.0", "--routes", &routes.join(",")])
            .args(["--replicas", "3", "--no-node", "--data-dir"])
            .arg(self.data_dir(i))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .tied_to_this_thread()
            .spawn()
            .unwrap();
        self.ups.push(Up(Some(child)));
    }

    /// Every server's client URL, as an operator sets SHOAL_NATS.
    fn urls(&self) -> String {
        (0..SERVERS)
            .map(|i| format!("nats://{}:4222", self.fabric.hosts[i].address))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `shoal ARGS` as the admin, run on the fourth host.
    fn shoal(&self, urls: &str, args: &[&str]) -> (bool, String, String) {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.fabric.hosts[SERVERS].netns, SHOAL])
            .args(args)
            .env("SHOAL_NATS", urls)
            .env("SHOAL_CREDS", self.data_dir(0).join("auth/creds/admin.nk"));
        up_cluster::run_shown(command, &format!("shoal {}", args.join(" ")))
    }

    /// The servers' logs, for a failure message.
    fn logs(&self) -> String {
        (0..SERVERS)
            .map(|i| {
                let path = self.dir.path().join(format!("up-s{}.log", i + 1));
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(15).collect();
                format!(
                    "--- s{} (last lines)\n{}",
                    i + 1,
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn wait_for(&self, what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
        let start = Instant::now();
        while !ok() {
            assert!(
                start.elapsed() < limit,
                "timed out waiting for {what}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The line `shoal version` prints for `stream`.
fn stream_line<'a>(version: &'a str, stream: &str) -> Option<&'a str> {
    version
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{stream} ")))
}

fn pod(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n  - {{name: c, image: shoal/busybox:1.35}}\n"
    )
}

#[test]
fn three_shoal_ups_with_routes_form_one_cluster_whose_health_the_cli_shows() {
    let mut world = World::new();
    world.start(0);
    // The identities the first server made are every server's: copied before the others'
    // first start, as the README says.
    let auth = world.data_dir(0).join("auth");
    world.wait_for("s1's identities", CONVERGE, || {
        auth.join("nats-auth.conf").exists() && auth.join("creds/admin.nk").exists()
    });
    for i in 1..SERVERS {
        copy_dir(&auth, &world.data_dir(i).join("auth"));
        world.start(i);
    }
    let urls = world.urls();

    let mut version = String::new();
    world.wait_for(
        "`shoal version` to show three servers and the state at R3, fully replicated",
        CONVERGE,
        || {
            let (ok, out, _) = world.shoal(&urls, &["version"]);
            version = out;
            ok && version.contains("NATS cluster: 3 servers")
                && stream_line(&version, "SHOAL_OBJECTS").is_some_and(|l| {
                    l.contains(" ok ")
                        && l.contains("R3 leader s")
                        && l.matches(" current").count() == 2
                })
        },
    );
    let leader = version
        .lines()
        .find_map(|l| l.strip_prefix("JetStream meta leader: "))
        .unwrap_or_else(|| panic!("no meta leader line:\n{version}"));
    assert!(
        ["s1", "s2", "s3"].contains(&leader.trim()),
        "the meta leader is one of the servers: {version}"
    );

    let manifest = world.dir.path().join("before.yaml");
    std::fs::write(&manifest, pod("before")).unwrap();
    let (ok, out, err) = world.shoal(&urls, &["apply", "-f", manifest.to_str().unwrap()]);
    assert!(ok && out.contains("created"), "{out}{err}");
    let (ok, out, err) = world.shoal(&urls, &["get", "nodes"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("NATS cluster: 3 servers; SHOAL_OBJECTS: R3 leader s"),
        "`shoal get nodes` ends with the state's replication: {out}"
    );

    // s3's `shoal up` is killed outright: its nats-server dies with it, the two left keep a
    // quorum, and the CLI (given the survivors first) shows the replica there as gone.
    world.ups[2].kill();
    let survivors = urls.split(',').take(2).collect::<Vec<_>>().join(",");
    world.wait_for(
        "`shoal version` to show the state degraded at s3",
        CONVERGE,
        || {
            let (ok, out, _) = world.shoal(&survivors, &["version"]);
            ok && stream_line(&out, "SHOAL_OBJECTS").is_some_and(|l| {
                l.contains("DEGRADED") && (l.contains("s3 offline") || l.contains("s3 lagging"))
            })
        },
    );
    let manifest = world.dir.path().join("after.yaml");
    std::fs::write(&manifest, pod("after")).unwrap();
    world.wait_for("a write with one server of three down", CONVERGE, || {
        world
            .shoal(&survivors, &["apply", "-f", manifest.to_str().unwrap()])
            .0
    });
    // Every API replica's cache catches up with the new leader (its watch is recreated once
    // the dead leader's heartbeats are missed) and lists both pods.
    world.wait_for("both pods listed after the kill", CONVERGE, || {
        let (ok, out, _) = world.shoal(&survivors, &["get", "pods", "-o", "name"]);
        ok && out.contains("pod/before") && out.contains("pod/after")
    });
}
