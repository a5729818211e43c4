//! Who the CLI is on the bus (`--creds`, `--ca`, and the local user's admin credential by
//! default), and `shoal creds`: issuing, listing, revoking and describing identities of the
//! cluster whose data dir this machine holds.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use bus_schemas::roles::{Permissions, Role, ISSUABLE};
use shoal_bus::auth::{default_name, AuthDir, ClientAuth};

/// The credential the CLI presents when given none: the one `shoal up` wrote for the
/// local user.
pub fn default_admin_creds() -> PathBuf {
    crate::up::default_data_dir().join("auth/creds/admin.nk")
}

fn default_ca() -> PathBuf {
    crate::up::default_data_dir().join("auth/tls/ca.pem")
}

/// Which credential a command uses: `--creds`/SHOAL_CREDS, else the local admin's when
/// `shoal up` wrote one here, else none (anonymous).
pub fn resolve(creds: Option<&Path>, ca: Option<&Path>) -> Result<ClientAuth> {
    let path = creds
        .map(Path::to_path_buf)
        .or_else(|| Some(default_admin_creds()).filter(|p| p.is_file()));
    let auth = match &path {
        Some(path) => {
            let auth = ClientAuth::from_creds_file(path).with_context(|| {
                format!("--creds {}: cannot read the credential", path.display())
            })?;
            match identity_of(path, &auth) {
                Some(identity) => auth.with_identity(identity),
                None => auth,
            }
        }
        None => ClientAuth::anonymous(),
    };
    let ca = ca
        .map(Path::to_path_buf)
        .or_else(|| Some(default_ca()).filter(|p| p.is_file()));
    Ok(auth.with_ca(ca))
}

/// `identity NAME (role ROLE)` when a registry next to the credential, or this machine's
/// own cluster's, knows its key.
fn identity_of(path: &Path, auth: &ClientAuth) -> Option<String> {
    let key = auth.public_key()?;
    // A credential `shoal up` wrote sits in `<auth dir>/creds/`.
    let beside = path.parent().and_then(Path::parent).map(AuthDir::open);
    let local = AuthDir::open(crate::up::default_data_dir().join("auth"));
    beside
        .into_iter()
        .chain([local])
        .find_map(|dir| dir.find_key(&key).ok().flatten())
        .map(|i| format!("identity {} (role {})", i.name, i.role))
}

/// What to tell a person whose connection the bus refused or could not secure.
pub fn connect_error(e: &async_nats::ConnectError, auth: &ClientAuth, url: &str) -> String {
    match e.kind() {
        async_nats::ConnectErrorKind::AuthorizationViolation
        | async_nats::ConnectErrorKind::Authentication
            if auth.public_key().is_none() =>
        {
            format!(
                "the bus at {url} refused an anonymous connection: pass --creds FILE or set SHOAL_CREDS (shoal up wrote the admin credential to {}, or, given --data-dir DIR, to DIR/auth/creds/admin.nk)",
                default_admin_creds().display()
            )
        }
        async_nats::ConnectErrorKind::AuthorizationViolation
        | async_nats::ConnectErrorKind::Authentication => format!(
            "the bus at {url} refused {}: the credential was revoked or belongs to another cluster (`shoal creds ls` on the cluster's machine)",
            auth.describe()
        ),
        // The server's certificate is signed by the cluster's own CA: unknown without it.
        _ if auth.ca.is_none()
            && (e.kind() == async_nats::ConnectErrorKind::Tls
                || e.to_string().contains("certificate")) =>
        {
            format!(
            "cannot verify the TLS certificate of {url} ({e}): pass --ca FILE or set SHOAL_CA (shoal up --tls wrote its CA to DATA_DIR/auth/tls/ca.pem)"
            )
        }
        _ => format!(
            "cannot reach NATS at {url}: is the cluster running? (`shoal up`, or set --nats / SHOAL_NATS) [{e}]"
        ),
    }
}

#[derive(clap::Subcommand, Debug)]
pub enum CredsCommand {
    /// Issue a credential: viewer, integration, admin, or node (--name is the node's name).
    Create {
        #[arg(long, value_parser = ISSUABLE)]
        role: String,
        #[arg(long)]
        name: String,
        /// Copy the credential (an nkey seed) to this file, readable by its owner only.
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
        /// Also write a kubeconfig acting as this identity through the Kubernetes API
        /// gateway (as `shoal creds kubeconfig` does).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Write a kubeconfig acting as an identity through the Kubernetes API gateway: a new
    /// bearer token (any earlier one of the identity stops working), the gateway's CA.
    Kubeconfig {
        name: String,
        /// Where to write it (readable by its owner only); `-` prints it.
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
        /// The gateway's URL; by default the one of the kubeconfig `shoal up` wrote.
        #[arg(long)]
        server: Option<String>,
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// List every identity issued, revoked ones included.
    Ls {
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Revoke a credential: refused on its next connect, its live connections closed.
    Revoke {
        name: String,
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Print what a role may publish and subscribe to.
    Describe {
        /// api, node, controllers, scheduler, naming, autoscaler, gateway, admin, viewer or
        /// integration.
        role: String,
        #[arg(short = 'o', long = "output")]
        output: Option<String>,
    },
}

fn auth_dir(data_dir: Option<PathBuf>) -> Result<(AuthDir, PathBuf)> {
    let data_dir = data_dir.unwrap_or_else(crate::up::default_data_dir);
    let auth = data_dir.join("auth");
    if !auth.join("identities.json").is_file() {
        bail!(
            "no identities in {}: start the cluster once with `shoal up --data-dir {}` (or pass the --data-dir it uses)",
            auth.display(),
            data_dir.display()
        );
    }
    Ok((AuthDir::open(auth), data_dir))
}

/// Makes a running server of this data dir read its identities again; a stopped one reads
/// them when it starts.
fn reload(data_dir: &Path) -> Result<bool> {
    let pid_file = data_dir.join("nats/nats-server.pid");
    if !pid_file.is_file() {
        return Ok(false);
    }
    match shoal_bus::natsd::reload_pid_file(&pid_file) {
        Ok(()) => Ok(true),
        // A pid file left by a server that is gone: nothing to tell.
        Err(shoal_bus::natsd::NatsdError::Config { source, .. })
            if source.raw_os_error() == Some(nix::libc::ESRCH) =>
        {
            Ok(false)
        }
        Err(e) => Err(e).context("signalling nats-server to reload its identities"),
    }
}

pub fn run(command: CredsCommand) -> Result<i32> {
    match command {
        CredsCommand::Create {
            role,
            name,
            output,
            kubeconfig,
            data_dir,
        } => {
            let (dir, data_dir) = auth_dir(data_dir)?;
            let (role, identity) = match role.as_str() {
                "node" => {
                    let role = Role::Node(name.clone());
                    let identity = default_name(&role);
                    (role, identity)
                }
                "app" => {
                    let role = Role::parse(&format!("app:{name}"))?;
                    let identity = default_name(&role);
                    (role, identity)
                }
                other => (Role::parse(other)?, name),
            };
            let path = dir.issue(&role, &identity)?;
            let reloaded = reload(&data_dir)?;
            let shown = match output {
                Some(out) => {
                    copy_secret(&path, &out)?;
                    out
                }
                None => path,
            };
            println!(
                "identity {identity} (role {role}) issued; its credential is {}",
                shown.display()
            );
            if !reloaded {
                println!(
                    "(no server runs on this data dir: it admits the identity when it starts)"
                );
            }
            if let Some(out) = kubeconfig {
                write_kubeconfig(&dir, &data_dir, &identity, None, &out)?;
            }
            Ok(0)
        }
        CredsCommand::Kubeconfig {
            name,
            output,
            server,
            data_dir,
        } => {
            let (dir, data_dir) = auth_dir(data_dir)?;
            write_kubeconfig(&dir, &data_dir, &name, server, &output)?;
            Ok(0)
        }
        CredsCommand::Ls { data_dir } => {
            let (dir, _) = auth_dir(data_dir)?;
            let mut rows = vec![[
                "NAME".to_string(),
                "ROLE".into(),
                "PUBLIC-KEY".into(),
                "ISSUED".into(),
                "REVOKED".into(),
            ]];
            for i in dir.list()? {
                rows.push([
                    i.name,
                    i.role,
                    i.public_key,
                    i.issued.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
                    i.revoked
                        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
                        .unwrap_or_else(|| "-".into()),
                ]);
            }
            print_table(&rows);
            Ok(0)
        }
        CredsCommand::Revoke { name, data_dir } => {
            let (dir, data_dir) = auth_dir(data_dir)?;
            if shoal_bus::auth::BUILT_IN
                .iter()
                .any(|(n, _)| *n == name && *n != "admin")
            {
                bail!(
                    "{name} is one of the cluster's own actors: revoking it would stop the cluster"
                );
            }
            let identity = dir.revoke(&name)?;
            reload(&data_dir)?;
            println!(
                "identity {} (role {}) revoked",
                identity.name, identity.role
            );
            Ok(0)
        }
        CredsCommand::Describe { role, output } => {
            let parsed = match role.as_str() {
                "node" => Role::Node("NODE".into()),
                "app" => Role::App("NAME".into()),
                other => Role::parse(other)?,
            };
            let p = parsed.permissions("_INBOX.<public key>");
            match output.as_deref() {
                Some("json") => println!("{}", serde_json::to_string_pretty(&as_json(&p))?),
                None => print!("{}", describe(&parsed, &p)),
                Some(other) => bail!("-o {other:?}: use json, or leave it out for text"),
            }
            Ok(0)
        }
    }
}

/// Issues `identity` a new gateway token and writes a kubeconfig holding it to `out`.
fn write_kubeconfig(
    dir: &AuthDir,
    data_dir: &Path,
    identity: &str,
    server: Option<String>,
    out: &Path,
) -> Result<()> {
    let ca_path = data_dir.join("gateway/ca.crt");
    let ca = std::fs::read_to_string(&ca_path).with_context(|| {
        format!(
            "reading the gateway's CA {}: start the cluster once with `shoal up --data-dir {}`",
            ca_path.display(),
            data_dir.display()
        )
    })?;
    let server = match server {
        Some(server) => server,
        None => gateway_url(data_dir)?,
    };
    let token = dir.issue_token(identity)?;
    let text = shoal_gateway::kubeconfig::render(&server, Some(&ca), identity, &token);
    let context = shoal_gateway::kubeconfig::context_name(identity);
    if out == Path::new("-") {
        print!("{text}");
        return Ok(());
    }
    shoal_bus::auth::write_private(out, &text)
        .with_context(|| format!("--kubeconfig {}", out.display()))?;
    println!(
        "kubeconfig for identity {identity} written to {} (context {context}, server {server}); an earlier one of {identity} no longer works",
        out.display()
    );
    Ok(())
}

/// The gateway's URL as `shoal up` last wrote it into its kubeconfig.
fn gateway_url(data_dir: &Path) -> Result<String> {
    let path = data_dir.join("kubeconfig");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "no gateway URL: {} is missing (pass --server https://HOST:PORT)",
            path.display()
        )
    })?;
    let v: serde_json::Value = serde_norway::from_str(&text)
        .with_context(|| format!("{}: not a kubeconfig", path.display()))?;
    v["clusters"][0]["cluster"]["server"]
        .as_str()
        .map(str::to_string)
        .with_context(|| format!("{}: no clusters[0].cluster.server", path.display()))
}

fn copy_secret(from: &Path, to: &Path) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let seed = std::fs::read(from).with_context(|| format!("reading {}", from.display()))?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(to)
        .with_context(|| format!("-o {}", to.display()))?;
    file.write_all(&seed)
        .with_context(|| format!("-o {}", to.display()))
}

fn print_table(rows: &[[String; 5]]) {
    let mut widths = [0; 5];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", cells.join("   ").trim_end());
    }
}

fn describe(role: &Role, p: &Permissions) -> String {
    let mut out = format!("role {}\n", role.kind());
    let mut section = |title: &str, items: &[String]| {
        if items.is_empty() {
            return;
        }
        out.push_str(&format!("{title}:\n"));
        for item in items {
            out.push_str(&format!("  {item}\n"));
        }
    };
    section("publish allow", &p.publish_allow);
    section("publish deny", &p.publish_deny);
    section("subscribe allow", &p.subscribe_allow);
    section("subscribe deny", &p.subscribe_deny);
    if p.allow_responses {
        out.push_str("may answer requests sent to it\n");
    }
    out
}

fn as_json(p: &Permissions) -> serde_json::Value {
    serde_json::json!({
        "publish": {"allow": p.publish_allow, "deny": p.publish_deny},
        "subscribe": {"allow": p.subscribe_allow, "deny": p.subscribe_deny},
        "allowResponses": p.allow_responses,
    })
}
