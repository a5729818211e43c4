//! Interactive exec end to end: `shoal up` with a real node agent, and stock kubectl (the
//! WebSocket remote-command protocol, v5) and `shoal exec` driven through a real
//! pseudo-terminal the test holds: a shell's typed input runs, its exit code becomes the
//! client's; `-i` with piped stdin echoes it back through `cat`. Also stock kubectl following
//! a Deployment of real replicas: `rollout status`, `wait --for=condition=Available`, and a
//! `rollout restart` that replaces every running container.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod up_cluster;
use up_cluster::{Cluster, SHOAL};

const LIMIT: Duration = Duration::from_secs(60);

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: box}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: main, image: "shoal/busybox:1.35", command: ["sleep", "3600"]}
"#;

/// A child killed (and reaped) when dropped, even when the test failed.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Guard {
    fn exit_code(&mut self, what: &str) -> Option<i32> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status.code();
            }
            assert!(start.elapsed() < LIMIT, "{what} never exited");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A command whose stdin, stdout and stderr are the slave of a fresh pty (80x24); the test
/// types on the master and reads what the command shows.
struct OnPty {
    child: Guard,
    master: std::fs::File,
    shown: mpsc::Receiver<Vec<u8>>,
    seen: String,
}

impl OnPty {
    fn spawn(mut command: Command) -> OnPty {
        let pty = nix::pty::openpty(None, None).expect("openpty");
        shoal_node::pty::set_size(std::os::fd::AsFd::as_fd(&pty.master), 80, 24).unwrap();
        let slave = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap());
        let child = command
            .stdin(slave(&pty.slave))
            .stdout(slave(&pty.slave))
            .stderr(slave(&pty.slave))
            .spawn()
            .expect("spawning on the pty");
        drop(pty.slave);
        let master = std::fs::File::from(pty.master);
        let mut reader = master.try_clone().unwrap();
        let (tx, shown) = mpsc::channel();
        // Ends at EIO, once the command and every holder of the slave are gone.
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        OnPty {
            child: Guard(child),
            master,
            shown,
            seen: String::new(),
        }
    }

    fn type_in(&mut self, keys: &str) {
        self.master.write_all(keys.as_bytes()).unwrap();
    }

    /// Waits until the terminal has shown `want` since the last call.
    fn expect(&mut self, want: &str) {
        let start = Instant::now();
        while !self.seen.contains(want) {
            let left = LIMIT.saturating_sub(start.elapsed());
            match self.shown.recv_timeout(left) {
                Ok(bytes) => self.seen.push_str(&String::from_utf8_lossy(&bytes)),
                Err(_) => panic!(
                    "the terminal never showed {want:?}; it showed:\n{}",
                    self.seen
                ),
            }
        }
        let at = self.seen.find(want).unwrap() + want.len();
        self.seen.drain(..at);
    }
}

fn kubectl(dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into()));
    cmd.arg("--cache-dir")
        .arg(dir.join("kube-cache"))
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .env("HOME", dir);
    cmd
}

/// Runs `command` with `input` piped to its stdin; returns (exit code, stdout, stderr).
fn piped(mut command: Command, input: &str) -> (Option<i32>, String, String) {
    let mut child = Guard(
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    child
        .0
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let code = child.exit_code("the piped exec");
    let mut out = String::new();
    let mut err = String::new();
    child
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (code, out, err)
}

/// A shell on the pty: wait for its prompt, compute something (the echo of what was typed
/// does not contain the answer), exit with 5.
fn shell_session(mut on_pty: OnPty, who: &str) {
    on_pty.expect("# ");
    on_pty.type_in("echo hi-$((1+1))\n");
    on_pty.expect("hi-2");
    on_pty.type_in("stty size\n");
    on_pty.expect("24 80");
    on_pty.type_in("exit 5\n");
    assert_eq!(
        on_pty.child.exit_code(who),
        Some(5),
        "{who} exits with the shell's code; the terminal showed:\n{}",
        on_pty.seen
    );
}

#[test]
fn kubectl_and_shoal_exec_it_through_a_pseudo_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), &[]);
    cluster.apply(dir.path(), "box.yaml", POD);
    cluster.wait("the pod running", |c| {
        c.run(&["get", "po", "box", "--no-headers"])
            .1
            .contains("Running")
    });

    // kubectl exec -it: the WebSocket protocol's stdin, TTY and resize channels.
    let mut cmd = kubectl(dir.path());
    cmd.args(["exec", "-it", "box", "--", "sh"]);
    shell_session(OnPty::spawn(cmd), "kubectl exec -it");

    // kubectl exec -i with stdin from a pipe: v5's close of stdin ends `cat`.
    let mut cmd = kubectl(dir.path());
    cmd.args(["exec", "-i", "box", "--", "cat"]);
    let (code, out, err) = piped(cmd, "piped through kubectl\nsecond line\n");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "piped through kubectl\nsecond line\n");

    // The same through `shoal exec`, straight on the bus.
    let mut cmd = Command::new(SHOAL);
    cmd.env("SHOAL_NATS", &cluster.url)
        .env("SHOAL_CREDS", cluster.admin_creds())
        .args(["exec", "-it", "box", "--", "sh"]);
    shell_session(OnPty::spawn(cmd), "shoal exec -it");
    let mut cmd = Command::new(SHOAL);
    cmd.env("SHOAL_NATS", &cluster.url)
        .env("SHOAL_CREDS", cluster.admin_creds())
        .args(["exec", "-i", "box", "--", "cat"]);
    let (code, out, err) = piped(cmd, "piped through shoal\n");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "piped through shoal\n");

    // Non-interactive exec is unchanged: buffered output and the exit code.
    let (ok, out, err) = cluster.run(&["exec", "box", "--", "sh", "-c", "echo one-shot"]);
    assert!(ok, "{err}");
    assert_eq!(out, "one-shot\n");
}

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: main, image: "shoal/busybox:1.35", command: ["sleep", "3600"]}
"#;

/// `kubectl ARGS` against the cluster's gateway; returns (success, stdout, stderr).
fn kubectl_run(dir: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let mut command = kubectl(dir);
    command.args(args);
    up_cluster::run_shown(command, &format!("kubectl {}", args.join(" ")))
}

/// The names of the Deployment's pods, and how many of them are Running.
fn web_pods(dir: &std::path::Path) -> (Vec<String>, usize) {
    let (_, out, _) = kubectl_run(dir, &["get", "pods", "-l", "app=web", "--no-headers"]);
    let names = out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    let running = out.lines().filter(|l| l.contains(" Running ")).count();
    (names, running)
}

#[test]
fn kubectl_follows_a_rollout_of_real_replicas() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), &[]);
    let manifest = dir.path().join("web.yaml");
    std::fs::write(&manifest, DEPLOYMENT).unwrap();
    let (ok, out, err) = kubectl_run(dir.path(), &["apply", "-f", manifest.to_str().unwrap()]);
    assert!(
        ok && out.contains("deployment.apps/web created"),
        "{out}{err}"
    );

    let status = ["rollout", "status", "deploy/web", "--timeout=90s"];
    let (ok, out, err) = kubectl_run(dir.path(), &status);
    assert!(ok && out.contains("successfully rolled out"), "{out}{err}");
    let (ok, out, err) = kubectl_run(
        dir.path(),
        &[
            "wait",
            "--for=condition=Available",
            "deploy/web",
            "--timeout=60s",
        ],
    );
    assert!(ok && out.contains("condition met"), "{out}{err}");
    let (first, running) = web_pods(dir.path());
    assert_eq!((first.len(), running), (2, 2), "{first:?}");

    // A restart rolls every pod: rollout status follows the new ReplicaSet until the old
    // one's containers are gone.
    let (ok, out, err) = kubectl_run(dir.path(), &["rollout", "restart", "deploy/web"]);
    assert!(ok && out.contains("restarted"), "{out}{err}");
    let (ok, out, err) = kubectl_run(dir.path(), &status);
    assert!(ok && out.contains("successfully rolled out"), "{out}{err}");
    cluster.wait("only the new pods, both running", |_| {
        let (names, running) = web_pods(dir.path());
        names.len() == 2 && running == 2 && names.iter().all(|n| !first.contains(n))
    });
    let (ok, out, err) = kubectl_run(
        dir.path(),
        &[
            "get",
            "rs",
            "-l",
            "app=web",
            "-o",
            "jsonpath={range .items[*]}{.spec.replicas} {end}",
        ],
    );
    assert!(ok, "{err}");
    let mut replicas: Vec<&str> = out.split_whitespace().collect();
    replicas.sort();
    assert_eq!(
        replicas,
        ["0", "2"],
        "the old ReplicaSet scaled to 0, the new one to 2"
    );
}
