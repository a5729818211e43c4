//! Identities through the CLI, against a real `shoal up`: anonymous connections are refused
//! with a message saying what to pass; a viewer reads but may neither write nor exec, and is
//! told so at once; a revoked credential is refused and its live watch ends; a node
//! credential serves only its own node; `shoal creds describe` prints a role's lists.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use shoal_bus::tied::TiedToThisThread;

const SHOAL: &str = env!("CARGO_BIN_EXE_shoal");
const T: Duration = Duration::from_secs(60);

/// A child process stopped (SIGINT, then SIGKILL) when dropped, even if the test failed.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.0.id() as i32), Signal::SIGINT);
        let start = Instant::now();
        while self.0.try_wait().ok().flatten().is_none() {
            if start.elapsed() > Duration::from_secs(10) {
                let _ = self.0.kill();
                let _ = self.0.wait();
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

struct Cluster {
    dir: tempfile::TempDir,
    url: String,
    /// The CA of a TLS bus, passed to every command.
    ca: Option<PathBuf>,
    _up: Running,
}

impl Cluster {
    fn start() -> Cluster {
        Cluster::start_with(&[])
    }

    /// `shoal up --no-node ARGS` in a fresh data dir, once it answers its admin.
    fn start_with(args: &[&str]) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let up_stdout = std::fs::File::create(dir.path().join("up.stdout")).unwrap();
        let up_stderr = std::fs::File::create(dir.path().join("up.stderr")).unwrap();
        let up = Command::new(SHOAL)
            .args(["up", "--no-node", "--port", &port.to_string()])
            .args(["--gateway-listen", "127.0.0.1:0", "--metrics-addr", ""])
            .arg("--data-dir")
            .arg(dir.path())
            .args(args)
            .stdout(up_stdout)
            .stderr(up_stderr)
            .tied_to_this_thread()
            .spawn()
            .unwrap();
        let cluster = Cluster {
            url: format!("nats://127.0.0.1:{port}"),
            ca: args
                .contains(&"--tls")
                .then(|| dir.path().join("auth/tls/ca.pem")),
            dir,
            _up: Running(up),
        };
        wait_until("the cluster", || {
            cluster
                .shoal(Some(&cluster.admin()), &["get", "ns", "default"])
                .0
        });
        cluster
    }

    fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The end of what `shoal up` and its nats-server wrote: a failed test shows why the
    /// cluster stopped answering, before the data dir is deleted.
    fn print_logs(&self) {
        for file in [
            "up.stderr",
            "nats/nats-server.stderr",
            "nats/nats-server.log",
        ] {
            let text = std::fs::read_to_string(self.data_dir().join(file)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(40)..].join("\n");
            eprintln!("--- the end of {file}:\n{tail}");
        }
    }

    fn admin(&self) -> PathBuf {
        self.data_dir().join("auth/creds/admin.nk")
    }

    /// `shoal ARGS` with the credential `creds` (none: anonymous), in an empty home so the
    /// default credential of whoever runs the tests is not picked up.
    fn command(&self, creds: Option<&Path>, args: &[&str]) -> Command {
        let mut command = Command::new(SHOAL);
        command
            .args(args)
            .env("SHOAL_NATS", &self.url)
            .env("HOME", self.data_dir().join("home"))
            .env_remove("XDG_DATA_HOME")
            .env_remove("SHOAL_CREDS")
            .env_remove("SHOAL_CA");
        if let Some(creds) = creds {
            command.env("SHOAL_CREDS", creds);
        }
        if let Some(ca) = &self.ca {
            command.env("SHOAL_CA", ca);
        }
        command
    }

    fn shoal(&self, creds: Option<&Path>, args: &[&str]) -> (bool, String, String) {
        let out = self.command(creds, args).output().unwrap();
        let out = (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        eprintln!("$ shoal {}\n{}{}", args.join(" "), out.1, out.2);
        out
    }

    /// A hollow node agent named `name`, with a node credential issued for it; returns
    /// once the node is registered.
    fn hollow_node(&self, name: &str) -> Running {
        let creds = self.data_dir().join(format!("{name}.nk"));
        let (ok, _, err) = self.creds(&[
            "create",
            "--role",
            "node",
            "--name",
            name,
            "-o",
            creds.to_str().unwrap(),
        ]);
        assert!(ok, "{err}");
        let node = self
            .command(Some(&creds), &["node", "--hollow", "--name", name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .tied_to_this_thread()
            .spawn()
            .unwrap();
        let node = Running(node);
        wait_until(&format!("node {name} registered"), || {
            self.shoal(Some(&self.admin()), &["get", "no", "-o", "name"])
                .1
                .contains(&format!("node/{name}"))
        });
        node
    }

    /// `shoal creds ARGS` on this cluster's data dir.
    fn creds(&self, args: &[&str]) -> (bool, String, String) {
        let mut all = vec!["creds"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--data-dir", self.data_dir().to_str().unwrap()]);
        self.shoal(None, &all)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.print_logs();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < T, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: by-viewer\nspec:\n  containers:\n  - {name: c, image: shoal/busybox:1.35}\n";

#[test]
fn anonymous_connections_are_refused_with_what_to_pass() {
    let cluster = Cluster::start();
    let (ok, _, err) = cluster.shoal(None, &["get", "pods"]);
    assert!(!ok);
    assert!(
        err.contains("refused an anonymous connection")
            && err.contains("--creds")
            && err.contains("DIR/auth/creds/admin.nk"),
        "{err}"
    );
}

/// The CLI finds the admin credential by itself only in the default data dir: a cluster
/// started in another one says what to export, and that is enough.
#[test]
fn a_cluster_in_another_data_dir_says_which_credential_the_cli_needs() {
    let cluster = Cluster::start_with(&["--tls"]);
    let summary = cluster.data_dir().join("up.stdout");
    let mut printed = String::new();
    wait_until("shoal up's summary", || {
        printed = std::fs::read_to_string(&summary).unwrap_or_default();
        printed.contains("SHOAL_CA=")
    });
    let exported = |variable: &str| -> PathBuf {
        let prefix = format!("export {variable}=");
        let line = printed
            .lines()
            .find_map(|l| l.split_once(&prefix))
            .unwrap_or_else(|| panic!("no {prefix} in:\n{printed}"))
            .1;
        PathBuf::from(line.split_whitespace().next().unwrap())
    };
    let dir = cluster.data_dir().canonicalize().unwrap();
    assert_eq!(exported("SHOAL_CREDS"), dir.join("auth/creds/admin.nk"));
    assert_eq!(exported("SHOAL_CA"), dir.join("auth/tls/ca.pem"));
    let (ok, out, err) = cluster
        .command(None, &["get", "ns", "default", "-o", "name"])
        .env("SHOAL_CREDS", exported("SHOAL_CREDS"))
        .env("SHOAL_CA", exported("SHOAL_CA"))
        .output()
        .map(|o| {
            (
                o.status.success(),
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        })
        .unwrap();
    assert!(ok && out.contains("namespace/default"), "{out}{err}");
}

#[test]
fn a_viewer_reads_but_may_not_write_or_exec_and_a_revoked_one_is_cut_off() {
    let cluster = Cluster::start();
    let copy = cluster.data_dir().join("alice.nk");
    let (ok, out, err) = cluster.creds(&[
        "create",
        "--role",
        "viewer",
        "--name",
        "alice",
        "-o",
        copy.to_str().unwrap(),
    ]);
    assert!(ok && out.contains("alice"), "{err}");
    let mode = std::fs::metadata(&copy).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "a credential copy is private to its owner");
    // The copy `shoal up`'s directory keeps names its identity in messages.
    let alice = cluster.data_dir().join("auth/creds/alice.nk");

    wait_until("the viewer admitted", || {
        cluster.shoal(Some(&alice), &["get", "pods"]).0
    });
    let (ok, _, err) = cluster.shoal(Some(&alice), &["get", "ns", "default"]);
    assert!(ok, "{err}");

    let manifest = cluster.data_dir().join("pod.yaml");
    std::fs::write(&manifest, POD).unwrap();
    let started = Instant::now();
    let (ok, _, err) = cluster.shoal(Some(&alice), &["apply", "-f", manifest.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        err.contains(
            "permission denied: identity alice (role viewer) may not publish shoal.v1.api.pod."
        ),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "refused at once, not after a timeout: {:?}",
        started.elapsed()
    );
    let (_, pods, _) = cluster.shoal(Some(&cluster.admin()), &["get", "pods", "-o", "name"]);
    assert!(!pods.contains("by-viewer"), "nothing was written: {pods}");

    // exec: a pod on a (hollow) node, placed there by the admin.
    let admin = cluster.admin();
    let _ghost = cluster.hollow_node("ghost");
    let placed = POD.replace("by-viewer", "placed") + "  nodeName: ghost\n";
    std::fs::write(&manifest, placed).unwrap();
    let (ok, _, err) = cluster.shoal(Some(&admin), &["apply", "-f", manifest.to_str().unwrap()]);
    assert!(ok, "{err}");
    let (ok, _, err) = cluster.shoal(Some(&alice), &["exec", "placed", "--", "true"]);
    assert!(!ok);
    assert!(
        err.contains("permission denied: identity alice (role viewer) may not publish shoal.v1.agent.ghost.exec"),
        "{err}"
    );

    // A live watch of the viewer, then the revocation.
    let mut watch = cluster
        .command(Some(&copy), &["get", "pods", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .tied_to_this_thread()
        .spawn()
        .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let stderr = watch.stderr.take().unwrap();
    let mut watch = Running(watch);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let listed = rx.recv_timeout(T).expect("the watch lists the pods first");
    assert!(
        listed.contains("NAME") || listed.contains("placed"),
        "{listed}"
    );

    let (ok, _, err) = cluster.creds(&["revoke", "alice"]);
    assert!(ok, "{err}");
    let start = Instant::now();
    while watch.0.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < T, "the revoked viewer's watch still runs");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut said = String::new();
    std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut said).unwrap();
    assert!(said.contains("refused the credential"), "{said}");
    let (ok, _, err) = cluster.shoal(Some(&copy), &["get", "pods"]);
    assert!(!ok);
    assert!(err.contains("refused"), "{err}");

    let (ok, table, _) = cluster.creds(&["ls"]);
    assert!(ok);
    let line = table.lines().find(|l| l.starts_with("alice")).unwrap();
    assert!(
        line.contains("viewer") && !line.trim_end().ends_with('-'),
        "{line}"
    );
}

#[test]
fn a_node_credential_serves_only_its_own_node() {
    let cluster = Cluster::start();
    let _h1 = cluster.hollow_node("h1");
    let creds = cluster.data_dir().join("h1.nk");
    // Another node's name with h1's credential: refused before it starts.
    let (ok, _, err) = cluster.shoal(
        Some(&creds),
        &[
            "node",
            "--hollow",
            "--name",
            "h2",
            "--creds",
            creds.to_str().unwrap(),
        ],
    );
    assert!(!ok);
    assert!(err.contains("role node:h2"), "{err}");
}

#[test]
fn a_role_is_described_by_its_subject_lists() {
    let out = Command::new(SHOAL)
        .args(["creds", "describe", "viewer"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("shoal.v1.api.*.get"), "{text}");
    assert!(
        text.contains("publish deny") && text.contains("shoal.v1.api.secret.>"),
        "{text}"
    );
    let out = Command::new(SHOAL)
        .args(["creds", "describe", "admin", "-o", "json"])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let allow = json["publish"]["allow"].as_array().unwrap();
    assert!(allow.iter().any(|s| s == "shoal.v1.api.>"), "{json}");
    let out = Command::new(SHOAL)
        .args(["creds", "describe", "root"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown role"));
}

/// The Python example hook, run as an integration identity with nats-py: it signs in with
/// the seed file `shoal creds` wrote, answers the autoscaler on its private inbox, and may
/// publish an external metric.
#[actix::test]
async fn an_integration_serves_a_hook_and_publishes_metrics_from_python() {
    let cluster = Cluster::start();
    let creds = cluster.data_dir().join("hooks.nk");
    let (ok, _, err) = cluster.creds(&[
        "create",
        "--role",
        "integration",
        "--name",
        "hooks",
        "-o",
        creds.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/autoscale_hook.py");
    let hook = Command::new("python3")
        .arg(script)
        .args([
            "--nats",
            &cluster.url,
            "--name",
            "per-five",
            "--capacity",
            "5",
        ])
        .arg("--creds")
        .arg(&creds)
        .stdin(Stdio::null())
        .tied_to_this_thread()
        .spawn()
        .expect("python3 runs the example hook");
    let _hook = Running(hook);

    // Asked as the autoscaler asks: the built-in identity `shoal up` runs it as.
    let autoscaler = shoal_bus::auth::ClientAuth::from_creds_file(
        &cluster.data_dir().join("auth/creds/autoscaler.nk"),
    )
    .unwrap();
    let nats = shoal_bus::connect(&cluster.url, "test-autoscaler", &autoscaler)
        .await
        .unwrap();
    let request = serde_json::json!({
        "hpa": {"namespace": "default", "name": "workers"},
        "metrics": [{"external": {"current": {"value": "12"}}}],
    });
    let start = Instant::now();
    let answer = loop {
        match nats
            .request(
                bus_schemas::subjects::autoscale_hook("per-five"),
                request.to_string().into(),
            )
            .await
        {
            Ok(reply) => break reply,
            Err(e) => {
                assert!(start.elapsed() < T, "the hook never answered: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let answer: serde_json::Value = serde_json::from_slice(&answer.payload).unwrap();
    assert_eq!(answer["desiredReplicas"], 3, "{answer}");

    // A metric published with the same credential: the server reports no violation (a
    // viewer's identical publish is refused, see the second half).
    let publish = |creds: &Path| {
        let program = format!(
            r#"
import asyncio, sys
sys.path.insert(0, {dir:?})
import autoscale_hook as hook
import nats

async def main():
    refused = []
    async def on_error(e):
        refused.append(str(e))
    nc = await nats.connect({url:?}, nkeys_seed={creds:?}, error_cb=on_error,
                            inbox_prefix="_INBOX." + hook.public_key({creds:?}))
    await nc.publish("shoal.v1.metrics.external.default.queue-depth", b'{{"value": "7"}}')
    await nc.flush()
    await asyncio.sleep(0.2)
    await nc.close()
    print("refused" if refused else "published", refused)

asyncio.run(main())
"#,
            dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"),
            url = cluster.url,
            creds = creds.to_str().unwrap(),
        );
        let out = Command::new("python3")
            .arg("-c")
            .arg(program)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        eprintln!("python: {said}{}", String::from_utf8_lossy(&out.stderr));
        said
    };
    assert!(publish(&creds).starts_with("published"));
    let viewer = cluster.data_dir().join("bob.nk");
    let (ok, _, err) = cluster.creds(&[
        "create",
        "--role",
        "viewer",
        "--name",
        "bob",
        "-o",
        viewer.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(publish(&viewer).starts_with("refused"));
}

#[test]
fn a_tls_bus_serves_clients_that_trust_its_ca_and_refuses_plaintext() {
    let cluster = Cluster::start_with(&["--tls"]);
    let admin = cluster.admin();
    let (ok, _, err) = cluster.shoal(Some(&admin), &["get", "nodes"]);
    assert!(ok, "{err}");
    // Without the CA the client cannot verify the server (and will not talk plaintext).
    let out = cluster
        .command(Some(&admin), &["get", "nodes"])
        .env_remove("SHOAL_CA")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("--ca"), "{err}");
    // A client speaking plaintext NATS is refused by the server.
    use std::io::{Read, Write};
    let address = cluster.url.trim_start_matches("nats://");
    let mut socket = std::net::TcpStream::connect(address).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut info = [0u8; 4096];
    let n = socket.read(&mut info).unwrap();
    let info = String::from_utf8_lossy(&info[..n]).into_owned();
    assert!(info.contains("\"tls_required\":true"), "{info}");
    let _ = socket.write_all(b"CONNECT {\"verbose\":false}\r\nPING\r\n");
    let mut answer = Vec::new();
    let _ = socket.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        !answer.contains("PONG"),
        "a plaintext client was served: {answer}"
    );
}
