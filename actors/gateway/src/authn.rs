//! Who is calling: a bearer token (`Authorization: Bearer shoal_…`, a kubeconfig's `token`)
//! issued into the identity registry by `shoal creds kubeconfig`, whose SHA-256 the registry
//! keeps. A caller is one bus identity and acts with its role's rights ([`crate::authz`]).
//!
//! The registry is re-read whenever its file changes (every write renames a new file over
//! it), so a revocation, or a token replaced by a new one, is refused on its very next
//! request by a gateway that is already running.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bus_schemas::roles::{self, Permissions, Role};
use hyper::header::AUTHORIZATION;
use hyper::HeaderMap;
use shoal_bus::auth::{token_digest, AuthDir};

/// An authenticated caller: Kubernetes' user is the identity's name, its groups the role.
#[derive(Debug, Clone)]
pub struct Caller {
    pub name: String,
    pub role: Role,
    /// What the role may do on the bus, computed once per registry load.
    pub permissions: Arc<Permissions>,
}

/// The group every authenticated caller is in, as Kubernetes names it.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";

impl Caller {
    pub fn new(name: impl Into<String>, role: Role) -> Caller {
        // The inbox prefix only names reply subjects, which no authorization decision reads.
        let permissions = Arc::new(role.permissions(&roles::inbox_prefix("GATEWAY")));
        Caller {
            name: name.into(),
            role,
            permissions,
        }
    }

    /// Kubernetes groups: the role (as a client certificate's O would name it) and
    /// `system:authenticated`.
    pub fn groups(&self) -> Vec<String> {
        vec![self.role.to_string(), AUTHENTICATED_GROUP.to_string()]
    }
}

/// Why a request's credential was refused (always answered 401 without detail: the detail
/// goes to the gateway's log, not to someone probing tokens).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// An `Authorization` header that is not `Bearer <token>`.
    Malformed,
    /// A token no live identity holds: unknown, replaced or revoked.
    UnknownToken,
}

/// Checks callers' tokens against one identity registry; cheap to clone.
#[derive(Clone)]
pub struct Authenticator {
    dir: AuthDir,
    cache: Arc<Mutex<Cache>>,
}

#[derive(Default)]
struct Cache {
    /// The registry file as last read; None forces a read.
    stamp: Option<Stamp>,
    by_digest: HashMap<String, Caller>,
}

/// Identifies one version of the registry file: a rename gives a new inode, and an edit in
/// place changes the length or the modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    inode: u64,
    len: u64,
    modified_ns: i128,
}

impl Authenticator {
    /// Callers are identities of the registry in `dir` (`<data dir>/auth`). A missing or
    /// unreadable registry admits nobody: the gateway never acts for someone it cannot name.
    pub fn new(dir: impl Into<PathBuf>) -> Authenticator {
        Authenticator {
            dir: AuthDir::open(dir),
            cache: Arc::default(),
        }
    }

    /// The caller the request's credential names; `Ok(None)` when it carries none
    /// (anonymous, see [`crate::authz::public`]).
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Option<Caller>, Refusal> {
        let Some(value) = headers.get(AUTHORIZATION) else {
            return Ok(None);
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| {
                let (scheme, token) = v.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .filter(|t| !t.is_empty())
            .ok_or(Refusal::Malformed)?;
        self.lookup(&token_digest(token))
            .map(Some)
            .ok_or(Refusal::UnknownToken)
    }

    fn lookup(&self, digest: &str) -> Option<Caller> {
        let path = self.dir.registry_path();
        let stamp = std::fs::metadata(&path).ok().map(|m| Stamp {
            inode: m.ino(),
            len: m.len(),
            modified_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        });
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if stamp.is_none() || cache.stamp != stamp {
            cache.by_digest = self.load();
            cache.stamp = stamp;
        }
        cache.by_digest.get(digest).cloned()
    }

    fn load(&self) -> HashMap<String, Caller> {
        let identities = match self.dir.list() {
            Ok(identities) => identities,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the identity registry: every caller is refused");
                return HashMap::new();
            }
        };
        identities
            .into_iter()
            .filter(|i| i.revoked.is_none())
            .filter_map(|i| {
                let digest = i.token_sha256.clone()?;
                match i.role() {
                    Ok(role) => Some((digest, Caller::new(i.name, role))),
                    Err(e) => {
                        tracing::warn!(identity = %i.name, error = %e, "identity with an unknown role is refused");
                        None
                    }
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bearer(token: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
        h
    }

    #[test]
    fn tokens_name_live_identities_only() {
        let dir = tempfile::tempdir().unwrap();
        let auth = AuthDir::provision(dir.path()).unwrap();
        auth.issue(&Role::Viewer, "carol").unwrap();
        let token = auth.issue_token("carol").unwrap();
        let gate = Authenticator::new(dir.path());
        let caller = gate.authenticate(&bearer(&token)).unwrap().unwrap();
        assert_eq!(
            (caller.name.as_str(), &caller.role),
            ("carol", &Role::Viewer)
        );
        assert_eq!(caller.groups(), ["viewer", AUTHENTICATED_GROUP]);
        assert!(gate.authenticate(&HeaderMap::new()).unwrap().is_none());
        assert_eq!(
            gate.authenticate(&bearer("shoal_nope")).unwrap_err(),
            Refusal::UnknownToken
        );
        let mut basic = HeaderMap::new();
        basic.insert(AUTHORIZATION, "Basic YTpi".parse().unwrap());
        assert_eq!(gate.authenticate(&basic).unwrap_err(), Refusal::Malformed);

        auth.revoke("carol").unwrap();
        assert_eq!(
            gate.authenticate(&bearer(&token)).unwrap_err(),
            Refusal::UnknownToken,
            "a revocation is seen without a restart"
        );
    }

    #[test]
    fn no_registry_admits_nobody() {
        let dir = tempfile::tempdir().unwrap();
        let gate = Authenticator::new(dir.path().join("absent"));
        assert_eq!(
            gate.authenticate(&bearer("shoal_x")).unwrap_err(),
            Refusal::UnknownToken
        );
    }
}
