//! Identities on the bus: nkey credentials, one per identity, each with one [`Role`], and the
//! nats-server `authorization` block rendered from them.
//!
//! An identity directory (`<data dir>/auth/` for `shoal up`) holds:
//! - `identities.json`: the registry (name, role, public key, when issued, when revoked);
//! - `creds/<name>.nk`: each credential, an nkey seed alone on one line (any NATS client reads
//!   it: async-nats `ConnectOptions::nkey`, nats-py `nkeys_seed=`, the `nats` CLI `--nkey`);
//! - `nats-auth.conf`: what the server includes. Revoking an identity removes it from there;
//!   a configuration reload then refuses its next connect and closes its live connections.
//!
//! Why server configuration and not decentralized JWT: see `docs/architecture.md`,
//! "Identities on the bus".

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use bus_schemas::roles::{self, Permissions, Role};
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not an identity registry: {source}")]
    Registry {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("credential {path}: not an nkey user seed (a line starting with SU): {reason}")]
    BadSeed { path: PathBuf, reason: String },
    #[error("an identity named {0:?} exists already: pick another --name, or revoke it first")]
    Exists(String),
    #[error("no identity named {0:?}: `shoal creds ls` lists them")]
    NotFound(String),
    #[error("identity name {0:?}: use 1-63 lowercase letters, digits, '-' or '_'")]
    BadName(String),
    #[error(transparent)]
    Role(#[from] roles::RoleError),
}

/// The identity `name` if it was issued and not revoked: the only ones that may be given a
/// token or be revoked.
fn live_mut<'a>(registry: &'a mut Registry, name: &str) -> Result<&'a mut Identity, AuthError> {
    registry
        .identities
        .get_mut(name)
        .filter(|i| i.revoked.is_none())
        .ok_or_else(|| AuthError::NotFound(name.to_string()))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> AuthError + '_ {
    move |source| AuthError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One issued credential, as the registry records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub name: String,
    /// [`Role`]'s text form: `viewer`, `node:n1`, …
    pub role: String,
    pub public_key: String,
    pub issued: chrono::DateTime<chrono::Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked: Option<chrono::DateTime<chrono::Utc>>,
    /// The SHA-256 (hex) of the Kubernetes API gateway's bearer token for this identity, when
    /// one was issued (`shoal creds kubeconfig`). The token itself is never kept here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_sha256: Option<String>,
}

impl Identity {
    pub fn role(&self) -> Result<Role, roles::RoleError> {
        Role::parse(&self.role)
    }
}

/// The identities the cluster's own actors run as, provisioned on first start.
pub const BUILT_IN: [(&str, Role); 7] = [
    ("api", Role::Api),
    ("controllers", Role::Controllers),
    ("scheduler", Role::Scheduler),
    ("naming", Role::Naming),
    ("autoscaler", Role::Autoscaler),
    ("gateway", Role::Gateway),
    ("admin", Role::Admin),
];

/// The identity name a role gets when nobody names it: `node:n1` → `node-n1`.
pub fn default_name(role: &Role) -> String {
    match role {
        Role::Node(node) => format!(
            "node-{}",
            node.to_ascii_lowercase()
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                })
                .collect::<String>()
        ),
        Role::App(name) => format!("app-{name}"),
        other => other.kind().to_string(),
    }
}

/// An identity directory.
#[derive(Debug, Clone)]
pub struct AuthDir {
    dir: PathBuf,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Registry {
    identities: BTreeMap<String, Identity>,
}

impl AuthDir {
    /// Opens `dir`, creating it with the built-in identities on first use, and (re)writes the
    /// server's authorization file.
    pub fn provision(dir: impl Into<PathBuf>) -> Result<AuthDir, AuthError> {
        let auth = AuthDir { dir: dir.into() };
        let creds = auth.dir.join("creds");
        std::fs::create_dir_all(&creds).map_err(io(&creds))?;
        for d in [&auth.dir, &creds] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).map_err(io(d))?;
        }
        let _lock = auth.lock()?;
        let mut registry = auth.load()?;
        let mut changed = false;
        for (name, role) in BUILT_IN {
            let usable = registry
                .identities
                .get(name)
                .is_some_and(|i| i.revoked.is_none() && auth.creds_path(name).is_file());
            if !usable {
                registry.identities.remove(name);
                auth.issue_into(&mut registry, &role, name)?;
                changed = true;
            }
        }
        if changed || !auth.server_conf_path().is_file() {
            auth.save(&registry)?;
        }
        Ok(auth)
    }

    /// Opens `dir` as it is, creating nothing: for reading the registry, or issuing into a
    /// directory `shoal up` provisioned.
    pub fn open(dir: impl Into<PathBuf>) -> AuthDir {
        AuthDir { dir: dir.into() }
    }

    /// The identity whose credential has this public key, revoked or not.
    pub fn find_key(&self, public_key: &str) -> Result<Option<Identity>, AuthError> {
        Ok(self
            .load()?
            .identities
            .into_values()
            .find(|i| i.public_key == public_key))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file nats-server includes.
    pub fn server_conf_path(&self) -> PathBuf {
        self.dir.join("nats-auth.conf")
    }

    pub fn creds_path(&self, name: &str) -> PathBuf {
        self.dir.join("creds").join(format!("{name}.nk"))
    }

    /// Every identity ever issued here, revoked ones included, by name.
    pub fn list(&self) -> Result<Vec<Identity>, AuthError> {
        Ok(self.load()?.identities.into_values().collect())
    }

    /// Issues a credential for `role` under `name` and writes the server's authorization
    /// file; a running server needs a reload ([`crate::natsd::reload`]) to admit it.
    pub fn issue(&self, role: &Role, name: &str) -> Result<PathBuf, AuthError> {
        let _lock = self.lock()?;
        let mut registry = self.load()?;
        if registry
            .identities
            .get(name)
            .is_some_and(|i| i.revoked.is_none())
        {
            return Err(AuthError::Exists(name.to_string()));
        }
        let path = self.issue_into(&mut registry, role, name)?;
        self.save(&registry)?;
        Ok(path)
    }

    /// The credential of `name`, issuing it with `role` if there is none yet (a node's
    /// credential, on its first start).
    pub fn ensure(&self, role: &Role, name: &str) -> Result<PathBuf, AuthError> {
        let (mut paths, _) = self.ensure_many(&[(role.clone(), name.to_string())])?;
        Ok(paths.remove(0))
    }

    /// [`AuthDir::ensure`] for many identities at once, with one write of the server's
    /// authorization file: a fleet of nodes is admitted by a single reload rather than one
    /// reload (and one rewrite of a file listing them all) per node. Returns each credential's
    /// path, in order, and whether any was issued.
    pub fn ensure_many(
        &self,
        wanted: &[(Role, String)],
    ) -> Result<(Vec<PathBuf>, bool), AuthError> {
        let _lock = self.lock()?;
        let mut registry = self.load()?;
        let mut issued = false;
        let mut paths = Vec::with_capacity(wanted.len());
        for (role, name) in wanted {
            let usable = registry
                .identities
                .get(name)
                .is_some_and(|i| i.revoked.is_none() && self.creds_path(name).is_file());
            if usable {
                paths.push(self.creds_path(name));
            } else {
                paths.push(self.issue_into(&mut registry, role, name)?);
                issued = true;
            }
        }
        if issued {
            self.save(&registry)?;
        }
        Ok((paths, issued))
    }

    /// Marks `name` revoked and drops it from the server's authorization file; its
    /// credential file is deleted. A running server needs a reload to act on it.
    pub fn revoke(&self, name: &str) -> Result<Identity, AuthError> {
        let _lock = self.lock()?;
        let mut registry = self.load()?;
        let identity = live_mut(&mut registry, name)?;
        identity.revoked = Some(chrono::Utc::now());
        let revoked = identity.clone();
        self.save(&registry)?;
        let creds = self.creds_path(name);
        match std::fs::remove_file(&creds) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&creds)(e)),
            _ => {}
        }
        Ok(revoked)
    }

    /// A new bearer token for the gateway, acting as `name`: only its digest is recorded,
    /// and it replaces any token issued before (whose holders get 401 from then on). The
    /// token is returned once, for the caller to put in a kubeconfig.
    pub fn issue_token(&self, name: &str) -> Result<String, AuthError> {
        let _lock = self.lock()?;
        let mut registry = self.load()?;
        let identity = live_mut(&mut registry, name)?;
        let token = new_token();
        identity.token_sha256 = Some(token_digest(&token));
        self.save(&registry)?;
        Ok(token)
    }

    /// Whether `token` is the live bearer token of identity `name`.
    pub fn token_is_current(&self, name: &str, token: &str) -> Result<bool, AuthError> {
        let digest = token_digest(token);
        Ok(self
            .load()?
            .identities
            .get(name)
            .is_some_and(|i| i.revoked.is_none() && i.token_sha256.as_deref() == Some(&digest)))
    }

    /// The registry file: its change (every write renames a new file over it) is how a
    /// running gateway learns of a revocation.
    pub fn registry_path(&self) -> PathBuf {
        self.dir.join("identities.json")
    }

    fn issue_into(
        &self,
        registry: &mut Registry,
        role: &Role,
        name: &str,
    ) -> Result<PathBuf, AuthError> {
        if !valid_name(name) {
            return Err(AuthError::BadName(name.to_string()));
        }
        let key = nkeys::KeyPair::new_user();
        let seed = key.seed().map_err(|e| AuthError::BadSeed {
            path: self.creds_path(name),
            reason: e.to_string(),
        })?;
        let path = self.creds_path(name);
        write_secret(&path, &format!("{seed}\n"))?;
        registry.identities.insert(
            name.to_string(),
            Identity {
                name: name.to_string(),
                role: role.to_string(),
                public_key: key.public_key(),
                issued: chrono::Utc::now(),
                revoked: None,
                token_sha256: None,
            },
        );
        Ok(path)
    }

    /// Held from reading the registry to writing it back: `shoal up` (its gateway's token,
    /// a node's first credential) and `shoal creds` change one directory at the same time,
    /// and without it one's write drops what the other issued. Released when dropped.
    fn lock(&self) -> Result<nix::fcntl::Flock<std::fs::File>, AuthError> {
        let path = self.dir.join("registry.lock");
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(io(&path))?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, errno)| io(&path)(std::io::Error::from(errno)))
    }

    fn load(&self) -> Result<Registry, AuthError> {
        let path = self.registry_path();
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|source| AuthError::Registry { path, source }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Registry::default()),
            Err(e) => Err(io(&path)(e)),
        }
    }

    /// Writes the registry, then the server's view of it; each through a rename, so a
    /// crash leaves either the old file or the new one.
    fn save(&self, registry: &Registry) -> Result<(), AuthError> {
        let json = serde_json::to_vec_pretty(registry).expect("registry serializes");
        write_secret(
            &self.registry_path(),
            std::str::from_utf8(&json).unwrap_or_default(),
        )?;
        write_secret(&self.server_conf_path(), &render_authorization(registry)?)
    }
}

/// Gateway bearer tokens start with this, so a leaked one is recognisable (secret scanners,
/// logs) and one for the bus (an nkey seed, `SU…`) is never mistaken for it.
pub const TOKEN_PREFIX: &str = "shoal_";

/// 256 random bits: guessing is hopeless, so a plain digest (no salt, no slow hash) suffices
/// to keep the registry free of anything that would let its reader call the gateway.
fn new_token() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{TOKEN_PREFIX}{}", hex::encode(bytes))
}

/// The digest the registry keeps of a bearer token.
pub fn token_digest(token: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(token.as_bytes()))
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

fn write_secret(path: &Path, contents: &str) -> Result<(), AuthError> {
    write_private(path, contents).map_err(io(path))
}

/// Writes a file only its owner may read, beside and renamed over: a crash leaves the old
/// file or the new one, never half of a key. The file beside is this writer's own, so two
/// processes writing the same file at once never write into one another's.
pub fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nth = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp.{}.{nth}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// The server's `authorization` block: every live identity's nkey and its role's lists.
/// Users of the global account, so the state log of a cluster started before identities
/// existed stays where it is.
fn render_authorization(registry: &Registry) -> Result<String, AuthError> {
    let mut out = String::from(
        "# Written by Shoal from identities.json: edit with `shoal creds`, not by hand.\nauthorization {\n  users = [\n",
    );
    for identity in registry.identities.values() {
        if identity.revoked.is_some() {
            continue;
        }
        let role = identity.role()?;
        let permissions = role.permissions(&roles::inbox_prefix(&identity.public_key));
        out.push_str(&format!(
            "    # {} ({})\n    {{ nkey: \"{}\", permissions: {} }}\n",
            identity.name,
            role,
            identity.public_key,
            render_permissions(&permissions)
        ));
    }
    out.push_str("  ]\n}\n");
    Ok(out)
}

fn render_permissions(p: &Permissions) -> String {
    let list = |items: &[String]| {
        let quoted: Vec<String> = items.iter().map(|s| format!("\"{s}\"")).collect();
        format!("[{}]", quoted.join(", "))
    };
    let side = |allow: &[String], deny: &[String]| {
        if deny.is_empty() {
            format!("{{ allow: {} }}", list(allow))
        } else {
            format!("{{ allow: {}, deny: {} }}", list(allow), list(deny))
        }
    };
    let mut out = format!(
        "{{ publish: {}, subscribe: {}",
        side(&p.publish_allow, &p.publish_deny),
        side(&p.subscribe_allow, &p.subscribe_deny)
    );
    if p.allow_responses {
        out.push_str(", allow_responses: true");
    }
    out.push_str(" }");
    out
}

/// How one process authenticates to the bus and verifies the server.
#[derive(Clone, Default)]
pub struct ClientAuth {
    seed: Option<String>,
    /// The CA that signed the server's certificate: set, the connection requires TLS.
    pub ca: Option<PathBuf>,
    /// Who this is, as people know it (`identity viewer1 (role viewer)`), for messages.
    pub identity: Option<String>,
}

impl std::fmt::Debug for ClientAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientAuth")
            .field("public_key", &self.public_key())
            .field("ca", &self.ca)
            .finish()
    }
}

/// Where a process finds its credential when it is given none.
pub const CREDS_ENV: &str = "SHOAL_CREDS";
/// Where a process finds the CA of a TLS bus when it is given none.
pub const CA_ENV: &str = "SHOAL_CA";

impl ClientAuth {
    /// No credential: refused by any server with identities on.
    pub fn anonymous() -> ClientAuth {
        ClientAuth::default()
    }

    /// Reads an nkey seed file.
    pub fn from_creds_file(path: &Path) -> Result<ClientAuth, AuthError> {
        let text = std::fs::read_to_string(path).map_err(io(path))?;
        let seed = text
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("SU"))
            .ok_or_else(|| AuthError::BadSeed {
                path: path.to_path_buf(),
                reason: "no line starts with SU".into(),
            })?;
        nkeys::KeyPair::from_seed(seed).map_err(|e| AuthError::BadSeed {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        Ok(ClientAuth {
            seed: Some(seed.to_string()),
            ca: None,
            identity: None,
        })
    }

    /// `SHOAL_CREDS` and `SHOAL_CA` when set, otherwise anonymous.
    pub fn from_env() -> Result<ClientAuth, AuthError> {
        let mut auth = match std::env::var_os(CREDS_ENV) {
            Some(path) if !path.is_empty() => ClientAuth::from_creds_file(Path::new(&path))?,
            _ => ClientAuth::anonymous(),
        };
        if let Some(ca) = std::env::var_os(CA_ENV).filter(|c| !c.is_empty()) {
            auth.ca = Some(PathBuf::from(ca));
        }
        Ok(auth)
    }

    pub fn with_ca(mut self, ca: Option<PathBuf>) -> ClientAuth {
        self.ca = ca;
        self
    }

    pub fn with_identity(mut self, identity: impl Into<String>) -> ClientAuth {
        self.identity = Some(identity.into());
        self
    }

    /// Who this credential is, for messages: its identity when known, else its key.
    pub fn describe(&self) -> String {
        match (&self.identity, self.public_key()) {
            (Some(identity), _) => identity.clone(),
            (None, Some(key)) => format!("the credential {key}"),
            (None, None) => "an anonymous connection".to_string(),
        }
    }

    pub fn public_key(&self) -> Option<String> {
        let seed = self.seed.as_deref()?;
        nkeys::KeyPair::from_seed(seed).ok().map(|k| k.public_key())
    }

    /// Applies the credential, its private inbox prefix and the CA to connect options.
    pub fn apply(&self, mut options: async_nats::ConnectOptions) -> async_nats::ConnectOptions {
        if let (Some(seed), Some(key)) = (&self.seed, self.public_key()) {
            options = options
                .nkey(seed.clone())
                .custom_inbox_prefix(roles::inbox_prefix(&key));
        }
        if let Some(ca) = &self.ca {
            options = options.add_root_certificates(ca.clone()).require_tls(true);
        }
        options
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provisioning_issues_the_built_in_identities_once() {
        let dir = tempfile::tempdir().unwrap();
        let auth = AuthDir::provision(dir.path().join("auth")).unwrap();
        let first = auth.list().unwrap();
        assert_eq!(first.len(), BUILT_IN.len());
        let again = AuthDir::provision(dir.path().join("auth")).unwrap();
        assert_eq!(
            again.list().unwrap(),
            first,
            "a restart keeps the same keys"
        );
        let seed = std::fs::read_to_string(auth.creds_path("admin")).unwrap();
        assert!(seed.starts_with("SU"));
        let mode = std::fs::metadata(auth.creds_path("admin"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "credentials are private to their owner");
    }

    #[test]
    fn a_revoked_identity_leaves_the_server_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let auth = AuthDir::provision(dir.path()).unwrap();
        let path = auth.issue(&Role::Viewer, "alice").unwrap();
        let key = ClientAuth::from_creds_file(&path)
            .unwrap()
            .public_key()
            .unwrap();
        let conf = std::fs::read_to_string(auth.server_conf_path()).unwrap();
        assert!(conf.contains(&key));
        assert!(matches!(
            auth.issue(&Role::Viewer, "alice"),
            Err(AuthError::Exists(_))
        ));
        let revoked = auth.revoke("alice").unwrap();
        assert!(revoked.revoked.is_some());
        let conf = std::fs::read_to_string(auth.server_conf_path()).unwrap();
        assert!(!conf.contains(&key));
        assert!(!path.exists());
        assert!(matches!(auth.revoke("alice"), Err(AuthError::NotFound(_))));
        assert!(matches!(
            auth.issue(&Role::Viewer, "Alice!"),
            Err(AuthError::BadName(_))
        ));
    }

    #[test]
    fn a_gateway_token_is_kept_as_a_digest_and_dies_with_its_identity() {
        let dir = tempfile::tempdir().unwrap();
        let auth = AuthDir::provision(dir.path()).unwrap();
        auth.issue(&Role::Viewer, "bob").unwrap();
        let token = auth.issue_token("bob").unwrap();
        assert!(
            token.starts_with(TOKEN_PREFIX) && token.len() > 64,
            "{token}"
        );
        let registry = std::fs::read_to_string(auth.registry_path()).unwrap();
        assert!(!registry.contains(&token), "the token is not kept in clear");
        assert!(registry.contains(&token_digest(&token)));
        assert!(auth.token_is_current("bob", &token).unwrap());
        let replaced = auth.issue_token("bob").unwrap();
        assert!(
            !auth.token_is_current("bob", &token).unwrap(),
            "a new token replaces the old"
        );
        auth.revoke("bob").unwrap();
        assert!(!auth.token_is_current("bob", &replaced).unwrap());
        assert!(matches!(
            auth.issue_token("bob"),
            Err(AuthError::NotFound(_))
        ));
    }

    #[test]
    fn writers_at_the_same_time_lose_nothing_the_others_issued() {
        let dir = tempfile::tempdir().unwrap();
        let auth = AuthDir::provision(dir.path()).unwrap();
        // What `shoal up`'s gateway (a token) and several `shoal creds create` do at once.
        let writers: Vec<_> = (0..6)
            .map(|w| {
                let auth = AuthDir::open(dir.path());
                std::thread::spawn(move || {
                    for i in 0..4 {
                        auth.issue(&Role::Viewer, &format!("user-{w}-{i}")).unwrap();
                        auth.issue_token("admin").unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let issued = auth.list().unwrap();
        assert_eq!(issued.len(), BUILT_IN.len() + 24, "{issued:?}");
        let conf = std::fs::read_to_string(auth.server_conf_path()).unwrap();
        for identity in &issued {
            assert!(
                conf.contains(&identity.public_key),
                "{} is admitted",
                identity.name
            );
        }
        let admin = issued.iter().find(|i| i.name == "admin").unwrap();
        assert!(admin.token_sha256.is_some());
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| name.contains(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn a_file_without_a_seed_is_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.nk");
        std::fs::write(&path, "hello\n").unwrap();
        let err = ClientAuth::from_creds_file(&path).unwrap_err().to_string();
        assert!(err.contains("x.nk") && err.contains("SU"), "{err}");
    }
}
