//! A cluster for gateway tests: nats-server and an API replica (`shoal_api::local`), the
//! controllers, and gateway replicas serving HTTPS with a generated CA, all in this process;
//! the stock `kubectl` binary (and the Python client) run against them as child processes.

#![allow(dead_code, unused_imports)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use bus_schemas::roles::Role;
use shoal_api::local::LocalCluster;
use shoal_bus::auth::AuthDir;
use shoal_bus::shutdown::{self, Trigger};
use shoal_gateway::tls::Credentials;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

pub use shoal_api::local::eventually;

pub struct Env {
    pub cluster: LocalCluster,
    pub dir: tempfile::TempDir,
    pub creds: Credentials,
    /// The admin's kubeconfig (context `shoal`), as `shoal up` writes it.
    pub kubeconfig: PathBuf,
    /// The cluster's identity registry, which the gateway admits callers from.
    pub auth: AuthDir,
    admin_token: String,
    pub gateway: Option<(Trigger, SocketAddr)>,
    _controllers: Trigger,
}

/// The kubectl this machine has (setup.sh installs one when missing).
pub fn kubectl_binary() -> String {
    std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into())
}

pub struct Output {
    pub ok: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Env {
    /// Must run inside an actix system (`#[actix::test]`).
    pub async fn start() -> Env {
        let cluster = LocalCluster::start().await.expect("local cluster");
        let (trigger, shutdown) = shutdown::channel();
        let nats = cluster
            .connect_as(&Role::Controllers, "controllers")
            .await
            .unwrap();
        actix::spawn(async move {
            let config = shoal_controllers::ControllersConfig::default();
            let _ = shoal_controllers::run(config, nats, shutdown.wait()).await;
        });
        let dir = tempfile::tempdir().unwrap();
        let (creds, _) = shoal_gateway::tls::generate(&[]).unwrap();
        let auth = cluster.natsd.config().auth.clone().expect("identities on");
        let admin_token = auth.issue_token("admin").unwrap();
        let mut env = Env {
            cluster,
            kubeconfig: dir.path().join("kubeconfig"),
            auth,
            admin_token,
            dir,
            creds,
            gateway: None,
            _controllers: trigger,
        };
        env.start_gateway().await;
        env
    }

    /// Starts a gateway replica on a free port and points the kubeconfig at it.
    pub async fn start_gateway(&mut self) -> SocketAddr {
        self.start_gateway_on("127.0.0.1:0".parse().unwrap()).await
    }

    /// Starts a gateway replica listening on `listen`.
    pub async fn start_gateway_on(&mut self, listen: SocketAddr) -> SocketAddr {
        let nats = self
            .cluster
            .connect_as(&Role::Gateway, "gateway")
            .await
            .unwrap();
        let (trigger, shutdown) = shutdown::channel();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let config = shoal_gateway::GatewayConfig {
            listen,
            tls: Some(self.creds.clone()),
            identities: self.auth.dir().to_path_buf(),
        };
        actix::spawn(async move {
            if let Err(e) =
                shoal_gateway::run_with_ready(config, nats, shutdown.wait(), ready_tx).await
            {
                panic!("gateway failed: {e}");
            }
        });
        let addr = ready_rx.await.expect("gateway listening");
        let text = shoal_gateway::kubeconfig::render(
            &format!("https://{addr}"),
            Some(&self.creds.ca_pem),
            "admin",
            &self.admin_token,
        );
        std::fs::write(&self.kubeconfig, text).unwrap();
        self.gateway = Some((trigger, addr));
        addr
    }

    /// Issues identity `name` with `role` and a kubeconfig acting as it, as `shoal creds
    /// create --kubeconfig` does; returns the kubeconfig's path.
    pub fn kubeconfig_for(&self, name: &str, role: &Role) -> PathBuf {
        self.auth.issue(role, name).unwrap();
        self.write_kubeconfig(name, &self.auth.issue_token(name).unwrap())
    }

    /// A kubeconfig for the running gateway acting with `token` (any text).
    pub fn write_kubeconfig(&self, name: &str, token: &str) -> PathBuf {
        let (_, addr) = self.gateway.as_ref().expect("a gateway runs");
        let text = shoal_gateway::kubeconfig::render(
            &format!("https://{addr}"),
            Some(&self.creds.ca_pem),
            name,
            token,
        );
        let path = self.dir.path().join(format!("kubeconfig-{name}"));
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Runs kubectl with another kubeconfig than the admin's.
    pub async fn kubectl_with(&self, kubeconfig: &std::path::Path, args: &[&str]) -> Output {
        let mut cmd = self.command(args);
        cmd.env("KUBECONFIG", kubeconfig);
        let out = cmd.output().await.expect("running kubectl");
        Output {
            ok: out.status.success(),
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Stops the running gateway replica (its open connections are dropped).
    pub fn stop_gateway(&mut self) {
        if let Some((trigger, _)) = self.gateway.take() {
            trigger.fire();
        }
    }

    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(kubectl_binary());
        cmd.args(args)
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    /// Runs kubectl to completion (asynchronously: the gateway serves on this thread).
    pub async fn kubectl(&self, args: &[&str]) -> Output {
        let out = self.command(args).output().await.expect("running kubectl");
        Output {
            ok: out.status.success(),
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs kubectl and fails the test when it fails; returns stdout.
    pub async fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args).await;
        assert!(
            out.ok,
            "kubectl {} failed:\n{}\n{}",
            args.join(" "),
            out.stdout,
            out.stderr
        );
        out.stdout
    }

    /// Runs kubectl expecting failure; returns stderr.
    pub async fn fails(&self, args: &[&str]) -> String {
        let out = self.kubectl(args).await;
        assert!(
            !out.ok,
            "kubectl {} should have failed:\n{}",
            args.join(" "),
            out.stdout
        );
        out.stderr
    }

    /// `kubectl … -f -` with `input` on stdin.
    pub async fn with_stdin(&self, args: &[&str], input: &str) -> Output {
        let mut cmd = self.command(args);
        cmd.stdin(Stdio::piped());
        let mut child = cmd.spawn().expect("running kubectl");
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.as_bytes()).await.unwrap();
        drop(stdin);
        let out = child.wait_with_output().await.unwrap();
        Output {
            ok: out.status.success(),
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    pub fn write_file(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    }
}

/// A long-running kubectl (`get -w`, `logs -f`) whose output lines are read as they come;
/// killed when dropped.
pub struct Streaming {
    _child: tokio::process::Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    pub seen: Vec<String>,
}

impl Streaming {
    pub fn spawn(env: &Env, args: &[&str]) -> Streaming {
        let mut child = env.command(args).spawn().expect("running kubectl");
        let stdout = child.stdout.take().unwrap();
        Streaming {
            _child: child,
            lines: BufReader::new(stdout).lines(),
            seen: Vec::new(),
        }
    }

    /// Reads lines until one satisfies `want`; fails after `limit`.
    pub async fn until(&mut self, what: &str, limit: Duration, want: impl Fn(&str) -> bool) {
        let read = async {
            while let Ok(Some(line)) = self.lines.next_line().await {
                let hit = want(&line);
                self.seen.push(line);
                if hit {
                    return true;
                }
            }
            false
        };
        let found = tokio::time::timeout(limit, read).await.unwrap_or(false);
        assert!(
            found,
            "never saw {what}; lines so far:\n{}",
            self.seen.join("\n")
        );
    }
}

pub const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: NAME
  labels: {app: LABEL}
spec:
  containers:
  - name: main
    image: shoal/busybox:1.35
";

pub fn pod(name: &str, app: &str) -> String {
    POD.replace("NAME", name).replace("LABEL", app)
}

pub const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: shoal/busybox:1.35
        env:
        - {name: A, value: \"1\"}
";
