//! The encryption keys of Secrets: a file of named AES-256 keys, one per line
//! (`NAME:BASE64`); the first encrypts, every one decrypts. Rotation is adding a key at the
//! top and restarting the API actors, which re-seal every Secret under it (see
//! `ApiServer::reseal_secrets`); the old key can be dropped after that.

use std::path::{Path, PathBuf};

use aes_gcm::aead::{Aead, Payload};
use aes_gcm::{Aes256Gcm, KeyInit, Nonce};
use base64::Engine;

/// What marks a sealed value: `shoal:aesgcm:v1:<key name>:` then the nonce and ciphertext.
const SEALED_PREFIX: &[u8] = b"shoal:aesgcm:v1:";
const NONCE_BYTES: usize = 12;

#[derive(Debug, thiserror::Error)]
pub enum KeyRingError {
    #[error("secret key file {path}: {detail}")]
    File { path: PathBuf, detail: String },
    #[error("secret key file {path} line {line}: {detail}")]
    Line {
        path: PathBuf,
        line: usize,
        detail: String,
    },
    #[error("value is not sealed by Shoal")]
    NotSealed,
    #[error("value is sealed with key {0:?}, which this API's key file does not hold")]
    UnknownKey(String),
    #[error("value does not decrypt (wrong key, or the stored bytes were altered)")]
    Corrupt,
}

struct NamedKey {
    name: String,
    cipher: Aes256Gcm,
}

/// The keys an API actor encrypts and decrypts Secret values with.
pub struct KeyRing {
    keys: Vec<NamedKey>,
}

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.keys.iter().map(|k| k.name.as_str()).collect();
        f.debug_struct("KeyRing").field("keys", &names).finish()
    }
}

fn new_key_line() -> String {
    // rand's thread generator is a CSPRNG seeded from the OS.
    let key: [u8; 32] = rand::random();
    // The suffix keeps two keys added within one second apart.
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let name = format!(
        "key-{}-{}",
        chrono::Utc::now().format("%Y%m%dT%H%M%S"),
        &suffix[..6]
    );
    format!(
        "{name}:{}\n",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

impl KeyRing {
    /// Reads the key file, creating it with one fresh key (mode 0600) when it does not exist.
    pub fn load_or_create(path: &Path) -> Result<KeyRing, KeyRingError> {
        if !path.exists() {
            Self::write_new(path, &new_key_line())?;
        }
        Self::load(path)
    }

    /// Puts a fresh key first in the file (the next start encrypts with it); returns its name.
    pub fn add_key(path: &Path) -> Result<String, KeyRingError> {
        let old = std::fs::read_to_string(path).map_err(|e| KeyRingError::File {
            path: path.into(),
            detail: e.to_string(),
        })?;
        let line = new_key_line();
        let name = line.split(':').next().unwrap_or_default().to_string();
        Self::write_new(path, &format!("{line}{old}"))?;
        Ok(name)
    }

    fn write_new(path: &Path, contents: &str) -> Result<(), KeyRingError> {
        let err = |e: std::io::Error| KeyRingError::File {
            path: path.into(),
            detail: e.to_string(),
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        shoal_bus::auth::write_private(path, contents).map_err(err)
    }

    pub fn load(path: &Path) -> Result<KeyRing, KeyRingError> {
        let text = std::fs::read_to_string(path).map_err(|e| KeyRingError::File {
            path: path.into(),
            detail: e.to_string(),
        })?;
        Self::parse(&text).map_err(|(line, detail)| KeyRingError::Line {
            path: path.into(),
            line,
            detail,
        })
    }

    /// Parses `NAME:BASE64` lines (blank lines and `#` comments skipped).
    pub fn parse(text: &str) -> Result<KeyRing, (usize, String)> {
        let mut keys = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, encoded) = line
                .split_once(':')
                .ok_or((i + 1, "expected NAME:BASE64-KEY".to_string()))?;
            let valid_name = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
            if !valid_name {
                return Err((i + 1, format!("key name {name:?} must be [-_.a-zA-Z0-9]+")));
            }
            let raw = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|e| (i + 1, format!("key {name}: {e}")))?;
            let cipher = Aes256Gcm::new_from_slice(&raw).map_err(|_| {
                (
                    i + 1,
                    format!("key {name} is {} bytes; AES-256 needs 32", raw.len()),
                )
            })?;
            if keys.iter().any(|k: &NamedKey| k.name == name) {
                return Err((i + 1, format!("key name {name} appears twice")));
            }
            keys.push(NamedKey {
                name: name.to_string(),
                cipher,
            });
        }
        if keys.is_empty() {
            return Err((0, "holds no key".into()));
        }
        Ok(KeyRing { keys })
    }

    /// The key that encrypts.
    pub fn primary(&self) -> &str {
        &self.keys[0].name
    }

    /// Encrypts `plain` under the primary key, bound to `context` (where the value lives:
    /// a sealed value copied to another Secret or key does not decrypt there).
    pub fn seal(&self, plain: &[u8], context: &str) -> Vec<u8> {
        let key = &self.keys[0];
        // A random 96-bit nonce per value: with one key, collisions stay negligible far
        // beyond the number of Secret writes a cluster makes.
        let nonce_bytes: [u8; NONCE_BYTES] = rand::random();
        let nonce = Nonce::from_slice(&nonce_bytes);
        let sealed = key
            .cipher
            .encrypt(
                nonce,
                Payload {
                    msg: plain,
                    aad: context.as_bytes(),
                },
            )
            .expect("AES-GCM encryption of an in-memory buffer cannot fail");
        let mut out =
            Vec::with_capacity(SEALED_PREFIX.len() + key.name.len() + 1 + 12 + sealed.len());
        out.extend_from_slice(SEALED_PREFIX);
        out.extend_from_slice(key.name.as_bytes());
        out.push(b':');
        out.extend_from_slice(&nonce_bytes);
        out.extend_from_slice(&sealed);
        out
    }

    /// The name of the key `sealed` was encrypted with.
    pub fn key_of(sealed: &[u8]) -> Result<&str, KeyRingError> {
        let rest = sealed
            .strip_prefix(SEALED_PREFIX)
            .ok_or(KeyRingError::NotSealed)?;
        let end = rest
            .iter()
            .position(|b| *b == b':')
            .ok_or(KeyRingError::NotSealed)?;
        std::str::from_utf8(&rest[..end]).map_err(|_| KeyRingError::NotSealed)
    }

    pub fn open(&self, sealed: &[u8], context: &str) -> Result<Vec<u8>, KeyRingError> {
        let name = Self::key_of(sealed)?;
        let key = self
            .keys
            .iter()
            .find(|k| k.name == name)
            .ok_or_else(|| KeyRingError::UnknownKey(name.to_string()))?;
        let body = &sealed[SEALED_PREFIX.len() + name.len() + 1..];
        if body.len() < NONCE_BYTES {
            return Err(KeyRingError::Corrupt);
        }
        let (nonce, ciphertext) = body.split_at(NONCE_BYTES);
        key.cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: context.as_bytes(),
                },
            )
            .map_err(|_| KeyRingError::Corrupt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(lines: &[String]) -> KeyRing {
        KeyRing::parse(&lines.concat()).unwrap()
    }

    #[test]
    fn seals_opens_and_binds_to_its_place() {
        let keys = ring(&[new_key_line()]);
        let sealed = keys.seal(b"hunter2", "default/db/password");
        assert!(!sealed.windows(7).any(|w| w == b"hunter2"));
        assert_eq!(
            keys.open(&sealed, "default/db/password").unwrap(),
            b"hunter2"
        );
        assert!(matches!(
            keys.open(&sealed, "default/other/password"),
            Err(KeyRingError::Corrupt)
        ));
        let mut tampered = sealed.clone();
        *tampered.last_mut().unwrap() ^= 1;
        assert!(keys.open(&tampered, "default/db/password").is_err());
    }

    #[test]
    fn rotation_new_key_encrypts_old_keys_still_decrypt() {
        let old_line = "old:".to_string()
            + &base64::engine::general_purpose::STANDARD.encode([7u8; 32])
            + "\n";
        let old = ring(std::slice::from_ref(&old_line));
        let sealed_by_old = old.seal(b"v", "c");
        let rotated = ring(&[
            "new:".to_string()
                + &base64::engine::general_purpose::STANDARD.encode([9u8; 32])
                + "\n",
            old_line,
        ]);
        assert_eq!(rotated.primary(), "new");
        assert_eq!(rotated.open(&sealed_by_old, "c").unwrap(), b"v");
        assert_eq!(KeyRing::key_of(&rotated.seal(b"v", "c")).unwrap(), "new");
        let only_new = ring(&["new:".to_string()
            + &base64::engine::general_purpose::STANDARD.encode([9u8; 32])
            + "\n"]);
        assert!(matches!(
            only_new.open(&sealed_by_old, "c"),
            Err(KeyRingError::UnknownKey(name)) if name == "old"
        ));
    }

    #[test]
    fn bad_key_files_say_which_line() {
        assert_eq!(KeyRing::parse("# only a comment\n").unwrap_err().0, 0);
        assert_eq!(KeyRing::parse("k1:AAAA\n").unwrap_err().0, 1);
        let (line, detail) = KeyRing::parse("\nnocolon\n").unwrap_err();
        assert_eq!(line, 2);
        assert!(detail.contains("NAME:BASE64"));
    }

    #[test]
    fn the_key_file_is_created_private_and_extended_on_rotation() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets.key");
        let first = KeyRing::load_or_create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let sealed = first.seal(b"v", "c");
        let added = KeyRing::add_key(&path).unwrap();
        let second = KeyRing::load(&path).unwrap();
        assert_eq!(second.primary(), added);
        assert_eq!(second.open(&sealed, "c").unwrap(), b"v");
    }
}
