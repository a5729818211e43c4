//! `shoal up` serves the Kubernetes API over TLS and writes a kubeconfig that stock kubectl
//! uses as is: the generated CA verifies the gateway's certificate, the admin's token
//! authenticates it, and both survive a restart so the kubeconfig stays valid. `shoal creds`
//! gives other identities kubeconfigs, and revoking one refuses its next request.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use shoal_bus::tied::TiedToThisThread;

const SHOAL: &str = env!("CARGO_BIN_EXE_shoal");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `shoal up` child, stopped (SIGINT, then SIGKILL) when dropped, even if the test failed.
struct Up(Child);

impl Up {
    fn start(dir: &Path, gateway_port: u16) -> Up {
        let child = Command::new(SHOAL)
            .args(["up", "--no-node", "--port", &free_port().to_string()])
            .args(["--gateway-listen", &format!("127.0.0.1:{gateway_port}")])
            .arg("--data-dir")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .tied_to_this_thread()
            .spawn()
            .unwrap();
        Up(child)
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.0.id() as i32), Signal::SIGINT);
        let start = Instant::now();
        while self.0.try_wait().ok().flatten().is_none() {
            if start.elapsed() > Duration::from_secs(20) {
                let _ = self.0.kill();
                let _ = self.0.wait();
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn kubectl(dir: &Path, args: &[&str]) -> (bool, String, String) {
    kubectl_with(dir, &dir.join("kubeconfig"), args)
}

fn kubectl_with(dir: &Path, kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into()))
        .args(args)
        .arg("--cache-dir")
        .arg(dir.join("kube-cache"))
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", dir)
        .stdin(Stdio::null())
        .output()
        .expect("running kubectl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn shoal(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(SHOAL)
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .env("HOME", dir)
        .output()
        .expect("running shoal");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn wait_for_kubectl(dir: &Path) {
    let start = Instant::now();
    loop {
        let (ok, _, err) = kubectl(dir, &["get", "ns", "default"]);
        if ok {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "kubectl never reached the gateway: {err}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn up_serves_kubectl_over_tls_with_the_kubeconfig_it_writes() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let up = Up::start(dir.path(), port);
    wait_for_kubectl(dir.path());
    let config = std::fs::read_to_string(dir.path().join("kubeconfig")).unwrap();
    assert!(
        config.contains(&format!("server: https://127.0.0.1:{port}")),
        "{config}"
    );
    assert!(config.contains("current-context: shoal"), "{config}");

    let manifest = dir.path().join("pod.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: via-kubectl\nspec:\n  containers:\n  - {name: c, image: shoal/busybox:1.35}\n",
    )
    .unwrap();
    let (ok, out, err) = kubectl(dir.path(), &["apply", "-f", manifest.to_str().unwrap()]);
    assert!(ok && out.contains("pod/via-kubectl created"), "{out}{err}");
    let ca_before = std::fs::read(dir.path().join("gateway/ca.crt")).unwrap();

    drop(up);
    let _up = Up::start(dir.path(), port);
    wait_for_kubectl(dir.path());
    assert_eq!(
        std::fs::read(dir.path().join("gateway/ca.crt")).unwrap(),
        ca_before,
        "the CA is kept across restarts"
    );
    let (ok, out, err) = kubectl(dir.path(), &["get", "pod", "via-kubectl", "-o", "name"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "pod/via-kubectl");
}

#[test]
fn an_identitys_kubeconfig_acts_with_its_role_until_revoked() {
    let dir = tempfile::tempdir().unwrap();
    let _up = Up::start(dir.path(), free_port());
    wait_for_kubectl(dir.path());
    let config = std::fs::read_to_string(dir.path().join("kubeconfig")).unwrap();
    assert!(
        config.contains("token: shoal_"),
        "a real admin token: {config}"
    );

    let alice = dir.path().join("alice.kubeconfig");
    let (ok, out, err) = shoal(
        dir.path(),
        &[
            "creds",
            "create",
            "--role",
            "viewer",
            "--name",
            "alice",
            "--kubeconfig",
            alice.to_str().unwrap(),
        ],
    );
    assert!(ok && out.contains("context alice@shoal"), "{out}{err}");
    let (ok, out, err) = kubectl_with(dir.path(), &alice, &["get", "ns", "-o", "name"]);
    assert!(ok && out.contains("namespace/default"), "{out}{err}");
    let (ok, out, _) = kubectl_with(dir.path(), &alice, &["auth", "can-i", "create", "pods"]);
    assert!(!ok && out.starts_with("no"), "{out}");
    let (ok, out, _) = kubectl(dir.path(), &["auth", "can-i", "create", "pods"]);
    assert!(ok && out.trim() == "yes", "{out}");
    let (ok, out, err) = kubectl_with(dir.path(), &alice, &["create", "namespace", "alices"]);
    assert!(!ok, "{out}");
    assert!(
        err.contains(r#"namespaces is forbidden: User "alice" cannot create resource "namespaces" in API group "" at the cluster scope"#),
        "{err}"
    );
    let (_, out, _) = kubectl_with(dir.path(), &alice, &["auth", "whoami"]);
    assert!(out.contains("alice") && out.contains("viewer"), "{out}");

    // Revoked while the gateway runs: its very next request is refused.
    let (ok, out, err) = shoal(dir.path(), &["creds", "revoke", "alice"]);
    assert!(ok, "{out}{err}");
    let (ok, _, err) = kubectl_with(dir.path(), &alice, &["get", "ns"]);
    assert!(
        !ok && err.contains("You must be logged in to the server"),
        "{err}"
    );
    let (ok, _, err) = shoal(dir.path(), &["creds", "kubeconfig", "alice", "-o", "-"]);
    assert!(
        !ok && err.contains("alice"),
        "a revoked identity gets no token: {err}"
    );
    let (ok, _, err) = kubectl(dir.path(), &["get", "ns"]);
    assert!(ok, "the admin is untouched: {err}");
}
