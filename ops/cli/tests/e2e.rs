//! A one-machine cluster end to end, as a person uses it: `shoal up` with a real node agent,
//! the busybox image built into the cluster registry, a Deployment scheduled and running real
//! containers, then `exec`, `logs` and `top` against them.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use shoal_bus::tied::TiedToThisThread;

mod up_cluster;

const SHOAL: &str = env!("CARGO_BIN_EXE_shoal");

struct Cluster {
    url: String,
    up: Child,
    bridge: String,
    pod_cidr: String,
    data_dir: std::path::PathBuf,
}

impl Cluster {
    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(SHOAL)
            .args(args)
            .env("SHOAL_NATS", &self.url)
            .env("SHOAL_CREDS", self.data_dir.join("auth/creds/admin.nk"))
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn wait(&self, what: &str, limit: Duration, mut ok: impl FnMut(&Cluster) -> bool) {
        let start = Instant::now();
        while !ok(self) {
            assert!(start.elapsed() < limit, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // A test may have stopped it already (and its pid may be another process's now).
        if matches!(self.up.try_wait(), Ok(None)) {
            let _ = kill(Pid::from_raw(self.up.id() as i32), Signal::SIGINT);
            let _ = self.up.wait();
        }
        up_cluster::remove_pods(&self.data_dir, &self.bridge, &self.pod_cidr);
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .status();
        // The node's Service rules outlive `shoal up` by design (like kube-proxy's), so the
        // next start finds traffic still flowing; a test must not leave them on the machine.
        let _ = Command::new("nft")
            .args(["delete", "table", "ip", "shoal"])
            .stderr(Stdio::null())
            .status();
    }
}

const APP: &str = r#"
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
      - name: httpd
        image: shoal/busybox:1.35
        command: ["sh", "-c", "echo starting $(hostname); echo ready; exec httpd -f -p 8080 -h /var/www"]
        ports: [{name: http, containerPort: 8080}]
        readinessProbe: {httpGet: {path: /, port: http}, periodSeconds: 1}
        resources: {requests: {cpu: 10m, memory: 8Mi}, limits: {memory: 64Mi}}
"#;

/// Ignores SIGTERM (saying so in its log) and may take two minutes to stop.
const STUBBORN: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: stubborn}
spec:
  terminationGracePeriodSeconds: 120
  containers:
  - name: main
    image: shoal/busybox:1.35
    command: ["sh", "-c", "trap 'echo got TERM' TERM; echo ready; while true; do sleep 1; done"]
    resources: {requests: {cpu: 10m, memory: 8Mi}, limits: {memory: 64Mi}}
"#;

#[test]
fn a_one_machine_cluster_runs_scales_and_answers_exec_logs_and_top() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let n = port % 200 + 20;
    let bridge = format!("she{n}");
    let gateway_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let pod_cidr = format!("10.231.{n}.0/24");
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
            &format!("127.0.0.1:{gateway_port}"),
            "--data-dir",
        ])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .tied_to_this_thread()
        .spawn()
        .unwrap();
    let mut cluster = Cluster {
        url: format!("nats://127.0.0.1:{port}"),
        up,
        bridge,
        pod_cidr,
        data_dir: dir.path().to_path_buf(),
    };
    cluster.wait("the cluster and its node", Duration::from_secs(60), |c| {
        c.run(&["get", "no", "-o", "name"]).1.contains("node/")
    });
    let (code, out, err) = cluster.run(&["image", "build-busybox"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("imported shoal/busybox:1.35"), "{out}");

    let manifest = dir.path().join("app.yaml");
    std::fs::write(&manifest, APP).unwrap();
    let (code, _, err) = cluster.run(&["apply", "-f", manifest.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let ready = |c: &Cluster, want: &str| {
        let (_, out, _) = c.run(&["get", "deploy", "web"]);
        out.lines()
            .nth(1)
            .is_some_and(|l| l.split_whitespace().nth(1) == Some(want))
    };
    cluster.wait("2/2 ready", Duration::from_secs(60), |c| ready(c, "2/2"));

    let (_, names, _) = cluster.run(&["get", "po", "-l", "app=web", "-o", "name"]);
    let pod = names
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("pod/")
        .to_string();

    let (code, out, _) = cluster.run(&[
        "exec",
        &pod,
        "--",
        "sh",
        "-c",
        "echo hi from $(hostname); exit 3",
    ]);
    assert_eq!(code, 3, "exec returns the command's exit code");
    assert_eq!(out.trim(), format!("hi from {pod}"));
    // The same through stock kubectl and the gateway (WebSocket remote-command protocol).
    let kubectl = Command::new(std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into()))
        .args([
            "exec",
            &pod,
            "--",
            "sh",
            "-c",
            "echo via kubectl; echo oops >&2; exit 3",
        ])
        .arg("--cache-dir")
        .arg(dir.path().join("kube-cache"))
        .env("KUBECONFIG", dir.path().join("kubeconfig"))
        .env("HOME", dir.path())
        .output()
        .unwrap();
    assert_eq!(kubectl.status.code(), Some(3), "{kubectl:?}");
    assert_eq!(String::from_utf8_lossy(&kubectl.stdout), "via kubectl\n");
    assert!(
        String::from_utf8_lossy(&kubectl.stderr).contains("oops"),
        "{kubectl:?}"
    );
    let (code, out, _) = cluster.run(&["exec", &pod, "--", "cat", "/proc/1/cmdline"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("httpd"), "pid 1 is the workload: {out:?}");

    cluster.wait("the pod's log lines", Duration::from_secs(20), |c| {
        c.run(&["logs", &pod, "--tail", "1"]).1.trim() == "ready"
    });
    let (_, all, _) = cluster.run(&["logs", &pod]);
    assert_eq!(
        all.lines().collect::<Vec<_>>(),
        [format!("starting {pod}").as_str(), "ready"]
    );
    let (_, by_label, _) = cluster.run(&["logs", "-l", "app=web", "--tail", "1"]);
    assert_eq!(
        by_label.lines().filter(|l| l.ends_with("ready")).count(),
        2,
        "{by_label}"
    );

    cluster.wait("usage samples", Duration::from_secs(30), |c| {
        c.run(&["top", "pods"]).1.contains(&pod)
    });

    // Scaling down removes pods and their containers.
    let (code, _, err) = cluster.run(&["scale", "deploy/web", "--replicas", "1"]);
    assert_eq!(code, 0, "{err}");
    cluster.wait("1 pod left", Duration::from_secs(30), |c| {
        c.run(&["get", "po", "-o", "name"]).1.lines().count() == 1
    });
    let (code, _, err) = cluster.run(&["delete", "deploy", "web"]);
    assert_eq!(code, 0, "{err}");
    cluster.wait("every pod gone", Duration::from_secs(60), |c| {
        c.run(&["get", "po", "-o", "name"]).1.trim().is_empty()
    });

    // Ctrl-C stops the cluster promptly even while its node waits out a pod's grace period:
    // the wait is abandoned (the next start finds the container), not sat through.
    let stubborn = dir.path().join("stubborn.yaml");
    std::fs::write(&stubborn, STUBBORN).unwrap();
    let (code, _, err) = cluster.run(&["apply", "-f", stubborn.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    cluster.wait("the stubborn pod's log", Duration::from_secs(60), |c| {
        c.run(&["logs", "stubborn"]).1.contains("ready")
    });
    let (code, _, err) = cluster.run(&["delete", "po", "stubborn"]);
    assert_eq!(code, 0, "{err}");
    cluster.wait("SIGTERM delivered", Duration::from_secs(30), |c| {
        c.run(&["logs", "stubborn"]).1.contains("got TERM")
    });
    let asked = Instant::now();
    kill(Pid::from_raw(cluster.up.id() as i32), Signal::SIGINT).unwrap();
    while cluster.up.try_wait().unwrap().is_none() {
        assert!(
            asked.elapsed() < Duration::from_secs(60),
            "shoal up still running a minute after Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "shoal up took {:?} to stop (its budget is 5 s) while a pod had 120 s of grace left",
        asked.elapsed()
    );
}
