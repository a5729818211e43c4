//! The `shoal` binary end to end: `shoal up` keeps state across restarts, refuses a data dir
//! whose state stream vanished, and a killed API replica costs no request.

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

/// `shoal ARGS` as the admin of the cluster whose data dir is `dir`.
fn shoal(dir: &Path, url: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(SHOAL)
        .args(args)
        .env("SHOAL_NATS", url)
        .env("SHOAL_CREDS", dir.join("auth/creds/admin.nk"))
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn start_up(dir: &Path, port: u16) -> Child {
    Command::new(SHOAL)
        .args(["up", "--no-node", "--port", &port.to_string(), "--data-dir"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .tied_to_this_thread()
        .spawn()
        .unwrap()
}

/// A `shoal up --no-node` in a fresh data dir, once it answers: (data dir, port, NATS URL,
/// process).
fn running_cluster() -> (tempfile::TempDir, String, Child) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let url = format!("nats://127.0.0.1:{port}");
    let up = start_up(dir.path(), port);
    wait_until("the cluster", Duration::from_secs(30), || {
        shoal(dir.path(), &url, &["get", "ns", "default"]).0
    });
    (dir, url, up)
}

fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn stop(child: &mut Child) {
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGINT);
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

const MANIFEST: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: keep-me\n  labels: {app: web}\nspec:\n  containers:\n  - {name: web, image: shoal/busybox:1.35}\n";

#[test]
fn up_keeps_state_across_a_restart() {
    let (dir, url, mut up) = running_cluster();

    let manifest = dir.path().join("pod.yaml");
    std::fs::write(&manifest, MANIFEST).unwrap();
    let (ok, out, err) = shoal(
        dir.path(),
        &url,
        &["apply", "-f", manifest.to_str().unwrap()],
    );
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "pod/keep-me created");
    let (_, out, _) = shoal(
        dir.path(),
        &url,
        &["apply", "-f", manifest.to_str().unwrap()],
    );
    assert_eq!(
        out.trim(),
        "pod/keep-me unchanged",
        "re-applying writes nothing"
    );
    let (_, before, _) = shoal(dir.path(), &url, &["get", "po", "keep-me", "-o", "json"]);

    stop(&mut up);
    assert!(
        !shoal(dir.path(), &url, &["get", "ns"]).0,
        "the cluster is down"
    );
    // A fresh port: the old one is free for any parallel test's nats-server to take now.
    let port = free_port();
    let url = format!("nats://127.0.0.1:{port}");
    let mut up = start_up(dir.path(), port);
    wait_until("the restarted cluster", Duration::from_secs(30), || {
        shoal(dir.path(), &url, &["get", "ns", "default"]).0
    });
    let (ok, after, err) = shoal(dir.path(), &url, &["get", "po", "keep-me", "-o", "json"]);
    assert!(ok, "{err}");
    let uid = |text: &str| {
        serde_json::from_str::<serde_json::Value>(text).unwrap()["metadata"]["uid"].clone()
    };
    assert_eq!(
        uid(&before),
        uid(&after),
        "the same object survived the restart"
    );
    let (_, table, _) = shoal(dir.path(), &url, &["get", "po", "-l", "app=web"]);
    assert!(table.contains("keep-me"), "{table}");
    stop(&mut up);
}

#[test]
fn a_data_dir_whose_state_stream_vanished_is_refused() {
    let (dir, _, mut up) = running_cluster();
    stop(&mut up);
    std::fs::remove_dir_all(dir.path().join("nats/jetstream")).unwrap();

    let out = Command::new(SHOAL)
        .args([
            "up",
            "--no-node",
            "--port",
            &free_port().to_string(),
            "--data-dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "must refuse to start on an empty view"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("state stream is missing"), "{err}");
}

#[test]
fn bad_documents_are_reported_by_index_and_nothing_is_applied() {
    let (dir, url, mut up) = running_cluster();
    let manifest = dir.path().join("mixed.yaml");
    let bad = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: broken}\nspec:\n  containers:\n  - {name: a, imagee: x}\n";
    std::fs::write(&manifest, format!("{MANIFEST}{bad}")).unwrap();
    let (ok, _, err) = shoal(
        dir.path(),
        &url,
        &["apply", "-f", manifest.to_str().unwrap()],
    );
    assert!(!ok);
    assert!(
        err.contains("document 1") && err.contains("spec.containers[0].imagee"),
        "{err}"
    );
    let (_, _, err) = shoal(dir.path(), &url, &["get", "po", "keep-me"]);
    assert!(err.contains("not found"), "nothing applied: {err}");
    stop(&mut up);
}

const SERVICE: &str = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  ports:\n  - {name: http, port: 80, targetPort: 8080}\n---\napiVersion: v1\nkind: Endpoints\nmetadata: {name: web}\nsubsets:\n- addresses: [{ip: 10.9.0.1}, {ip: 10.9.0.2}]\n  notReadyAddresses: [{ip: 10.9.0.3}]\n  ports: [{name: http, port: 8080}]\n";

#[test]
fn services_are_described_with_their_endpoints_and_bad_ones_refused_with_paths() {
    let (dir, url, mut up) = running_cluster();
    let manifest = dir.path().join("svc.yaml");
    std::fs::write(&manifest, SERVICE).unwrap();
    let (ok, _, err) = shoal(
        dir.path(),
        &url,
        &["apply", "-f", manifest.to_str().unwrap()],
    );
    assert!(ok, "{err}");

    let (ok, out, err) = shoal(dir.path(), &url, &["describe", "svc", "web"]);
    assert!(ok, "{err}");
    for line in [
        "Endpoints:          10.9.0.1:8080,10.9.0.2:8080",
        "Not Ready:          10.9.0.3:8080",
        "Port:               http  80/TCP",
        "TargetPort:         8080/TCP",
        "IP:                 10.96.",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    let (ok, out, err) = shoal(dir.path(), &url, &["get", "svc,endpoints"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("10.9.0.1:8080") && out.contains("10.96."),
        "{out}"
    );

    let bad = "apiVersion: v1\nkind: Service\nmetadata: {name: broken}\nspec:\n  selector: {\"bad key!\": web}\n  ports:\n  - {port: 70000}\n";
    std::fs::write(&manifest, bad).unwrap();
    let (ok, _, err) = shoal(
        dir.path(),
        &url,
        &["apply", "-f", manifest.to_str().unwrap()],
    );
    assert!(!ok);
    assert!(
        err.contains("spec.selector") && err.contains("spec.ports[0].port"),
        "{err}"
    );
    let (_, _, err) = shoal(dir.path(), &url, &["get", "svc", "broken"]);
    assert!(err.contains("not found"), "nothing applied: {err}");
    stop(&mut up);
}
