//! The credential each actor of `shoal up` (and `shoal node`) connects with: one identity per
//! actor, so each is confined to what its role may do on the bus.
//!
//! - A `shoal up` that starts its own server uses the built-in identities of its data dir
//!   (`<data dir>/auth/creds/<identity>.nk`), its node's included.
//! - A joined process (`--join URL`, `shoal node`) uses `--creds`: a file (one identity for
//!   every actor, so the actors must share one role: a node credential for `--actors node`,
//!   …) or a directory holding `<identity>.nk` per actor (a copy of the first server's
//!   `auth/creds`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use bus_schemas::roles::Role;
use shoal_bus::auth::{default_name, AuthDir, ClientAuth};

#[derive(Debug, Clone)]
pub enum ActorCreds {
    /// This process provisioned the identities.
    Local { dir: AuthDir, ca: Option<PathBuf> },
    /// `--creds FILE` (or SHOAL_CREDS) of a joined process.
    File(ClientAuth),
    /// `--creds DIR`: `<DIR>/<identity>.nk` per actor.
    Dir { dir: PathBuf, ca: Option<PathBuf> },
}

impl ActorCreds {
    /// The credentials of a process joining an existing bus.
    pub fn joined(creds: Option<&Path>, ca: Option<&Path>) -> Result<ActorCreds> {
        let ca = ca.map(Path::to_path_buf);
        let Some(path) = creds else {
            bail!("joining a bus takes a credential: pass --creds FILE or set SHOAL_CREDS (`shoal creds create --role node --name NODE` on the cluster's machine issues a node's)");
        };
        if path.is_dir() {
            return Ok(ActorCreds::Dir {
                dir: path.to_path_buf(),
                ca,
            });
        }
        let auth = ClientAuth::from_creds_file(path)
            .with_context(|| format!("--creds {}", path.display()))?;
        Ok(ActorCreds::File(auth.with_ca(ca)))
    }

    /// What `role`'s actor connects with.
    pub fn for_role(&self, role: &Role) -> Result<ClientAuth> {
        let name = default_name(role);
        let (path, ca) = match self {
            ActorCreds::File(auth) => return Ok(auth.clone()),
            ActorCreds::Local { dir, ca } => (dir.creds_path(&name), ca),
            ActorCreds::Dir { dir, ca } => (dir.join(format!("{name}.nk")), ca),
        };
        let auth = ClientAuth::from_creds_file(&path).with_context(|| {
            format!(
                "the {role} actor's credential {} (its identity {name} needs role {role})",
                path.display()
            )
        })?;
        Ok(auth
            .with_ca(ca.clone())
            .with_identity(format!("identity {name} (role {role})")))
    }

    /// Connects `role`'s actor.
    pub async fn connect(&self, url: &str, name: &str, role: &Role) -> Result<async_nats::Client> {
        let auth = self.for_role(role)?;
        shoal_bus::connect(url, name, &auth)
            .await
            .map_err(|e| anyhow::anyhow!(crate::creds::connect_error(&e, &auth, url)))
            .with_context(|| format!("connecting the {} actor (role {role})", role.kind()))
    }
}

/// Checks, before a node agent starts, that its connection may act as `node`: a credential
/// issued for another node is refused the node's subjects, and would otherwise only show as
/// a node that never registers.
pub async fn check_node(nats: &async_nats::Client, node: &str) -> Result<()> {
    let mut feed = shoal_bus::violations::subscribe();
    let inbox = shoal_bus::violations::inbox_of(nats);
    let subject = format!(
        "shoal.v1.agent.{}.credential-check",
        bus_schemas::subjects::encode_token(node)
    );
    let probe = nats
        .subscribe(subject.clone())
        .await
        .context("checking the node credential")?;
    nats.flush().await.context("checking the node credential")?;
    // The server's refusal was read before the flush's answer; its report is on its way.
    let refused = tokio::time::timeout(std::time::Duration::from_secs(1), async {
        loop {
            match feed.recv().await {
                Ok(v) if v.inbox == inbox => return Some(v),
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => return None,
            }
        }
    })
    .await;
    drop(probe);
    if let Ok(Some(v)) = refused {
        bail!(
            "{v}: the node {node} needs a credential of role node:{node} (`shoal creds create --role node --name {node}`)"
        );
    }
    Ok(())
}
