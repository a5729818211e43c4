//! `shoal create configmap|secret`: ConfigMaps and Secrets from literals, files and env
//! files, as kubectl builds them.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use bus_schemas::kinds::byte_string::ByteString;
use bus_schemas::kinds::secret::{
    DOCKER_CONFIG_JSON_KEY, TLS_CERT_KEY, TLS_PRIVATE_KEY_KEY, TYPE_DOCKER_CONFIG_JSON, TYPE_TLS,
};
use bus_schemas::kinds::{ConfigMap, Secret};
use clap::{Args, Subcommand};

use crate::remote::Session;

#[derive(Subcommand, Debug)]
pub enum SecretCommand {
    /// An Opaque Secret from literals, files or env files.
    Generic(GenericSecretArgs),
    /// A kubernetes.io/tls Secret from a certificate and its key.
    Tls(TlsArgs),
    /// A kubernetes.io/dockerconfigjson Secret for one registry.
    DockerRegistry(DockerRegistryArgs),
}

#[derive(Args, Debug)]
pub struct DataArgs {
    pub name: String,
    /// `KEY=VALUE`; repeatable.
    #[arg(long = "from-literal", value_name = "KEY=VALUE")]
    pub literals: Vec<String>,
    /// `[KEY=]PATH`: the file's contents under its base name (or KEY); a directory adds
    /// each regular file in it. Repeatable.
    #[arg(long = "from-file", value_name = "[KEY=]PATH")]
    pub files: Vec<String>,
    /// A file of `KEY=VALUE` lines (blank lines and `#` comments skipped). Repeatable.
    #[arg(long = "from-env-file", value_name = "PATH")]
    pub env_files: Vec<String>,
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
}

#[derive(Args, Debug)]
pub struct GenericSecretArgs {
    #[command(flatten)]
    pub data: DataArgs,
    /// The Secret's type (default Opaque).
    #[arg(long = "type")]
    pub type_: Option<String>,
}

#[derive(Args, Debug)]
pub struct TlsArgs {
    pub name: String,
    #[arg(long)]
    pub cert: String,
    #[arg(long)]
    pub key: String,
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
}

#[derive(Args, Debug)]
pub struct DockerRegistryArgs {
    pub name: String,
    #[arg(long)]
    pub docker_server: String,
    #[arg(long)]
    pub docker_username: String,
    #[arg(long)]
    pub docker_password: String,
    #[arg(long, default_value = "")]
    pub docker_email: String,
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
}

fn insert(
    data: &mut BTreeMap<String, Vec<u8>>,
    key: String,
    value: Vec<u8>,
    from: &str,
) -> Result<()> {
    if let Err(e) = bus_schemas::kinds::config_map::config_key(&key) {
        bail!("{from}: key {key:?} is not valid: {e}");
    }
    if data.insert(key.clone(), value).is_some() {
        bail!("{from}: key {key:?} is given twice");
    }
    Ok(())
}

fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("--from-file: reading {}", path.display()))
}

/// Every key and value the flags name, in the order kubectl reads them.
pub fn collect(args: &DataArgs) -> Result<BTreeMap<String, Vec<u8>>> {
    let mut data = BTreeMap::new();
    for literal in &args.literals {
        let Some((key, value)) = literal.split_once('=') else {
            bail!("--from-literal={literal}: expected KEY=VALUE");
        };
        insert(
            &mut data,
            key.into(),
            value.as_bytes().to_vec(),
            "--from-literal",
        )?;
    }
    for spec in &args.files {
        let (key, path) = match spec.split_once('=') {
            Some((key, path)) => (Some(key.to_string()), Path::new(path)),
            None => (None, Path::new(spec.as_str())),
        };
        if path.is_dir() {
            if key.is_some() {
                bail!("--from-file={spec}: a directory cannot be given a key");
            }
            let mut entries: Vec<_> = std::fs::read_dir(path)
                .with_context(|| format!("--from-file: reading {}", path.display()))?
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .collect();
            entries.sort_by_key(|e| e.file_name());
            for entry in entries {
                let key = entry.file_name().to_string_lossy().to_string();
                insert(&mut data, key, read_file(&entry.path())?, "--from-file")?;
            }
            continue;
        }
        let key = match key {
            Some(key) => key,
            None => path
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .with_context(|| format!("--from-file={spec}: no file name to use as key"))?,
        };
        insert(&mut data, key, read_file(path)?, "--from-file")?;
    }
    for path in &args.env_files {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--from-env-file: reading {path}"))?;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_start();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                bail!("--from-env-file {path} line {}: expected KEY=VALUE", i + 1);
            };
            insert(
                &mut data,
                key.into(),
                value.as_bytes().to_vec(),
                &format!("{path} line {}", i + 1),
            )?;
        }
    }
    Ok(data)
}

fn namespace(ns: &Option<String>) -> String {
    ns.clone().unwrap_or_else(|| "default".into())
}

pub async fn configmap(session: &Session, args: DataArgs) -> Result<i32> {
    let mut cm = ConfigMap::default();
    cm.metadata.name = args.name.clone();
    cm.metadata.namespace = namespace(&args.namespace);
    for (key, value) in collect(&args)? {
        match String::from_utf8(value) {
            Ok(text) => cm.data.insert(key, text),
            Err(e) => cm
                .binary_data
                .insert(key, e.into_bytes().into())
                .map(|_| String::new()),
        };
    }
    let created = session.api.create(&cm).await?;
    println!("configmap/{} created", created.metadata.name);
    Ok(0)
}

pub async fn secret(session: &Session, command: SecretCommand) -> Result<i32> {
    let secret = build_secret(command)?;
    let created = session.api.create(&secret).await?;
    println!("secret/{} created", created.metadata.name);
    Ok(0)
}

fn build_secret(command: SecretCommand) -> Result<Secret> {
    let mut secret = Secret::default();
    let (name, ns) = match &command {
        SecretCommand::Generic(a) => (&a.data.name, &a.data.namespace),
        SecretCommand::Tls(a) => (&a.name, &a.namespace),
        SecretCommand::DockerRegistry(a) => (&a.name, &a.namespace),
    };
    secret.metadata.name = name.clone();
    secret.metadata.namespace = namespace(ns);
    match command {
        SecretCommand::Generic(args) => {
            secret.type_ = args.type_.unwrap_or_default();
            secret.data = collect(&args.data)?
                .into_iter()
                .map(|(k, v)| (k, ByteString(v)))
                .collect();
        }
        SecretCommand::Tls(args) => {
            secret.type_ = TYPE_TLS.into();
            let cert =
                std::fs::read(&args.cert).with_context(|| format!("--cert {}", args.cert))?;
            let key = std::fs::read(&args.key).with_context(|| format!("--key {}", args.key))?;
            secret.data.insert(TLS_CERT_KEY.into(), ByteString(cert));
            secret
                .data
                .insert(TLS_PRIVATE_KEY_KEY.into(), ByteString(key));
        }
        SecretCommand::DockerRegistry(args) => {
            use base64::Engine;
            secret.type_ = TYPE_DOCKER_CONFIG_JSON.into();
            let auth = base64::engine::general_purpose::STANDARD
                .encode(format!("{}:{}", args.docker_username, args.docker_password));
            let config = serde_json::json!({"auths": {args.docker_server: {
                "username": args.docker_username,
                "password": args.docker_password,
                "email": args.docker_email,
                "auth": auth,
            }}});
            secret.data.insert(
                DOCKER_CONFIG_JSON_KEY.into(),
                ByteString(config.to_string().into_bytes()),
            );
        }
    }
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_files_and_env_files_fold_into_one_map() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("app.properties");
        std::fs::write(&file, "color=blue\n").unwrap();
        let env = dir.path().join("app.env");
        std::fs::write(&env, "# comment\nMODE=fast\n\nLEVEL=3\n").unwrap();
        let args = DataArgs {
            name: "app".into(),
            literals: vec!["greeting=hello=world".into()],
            files: vec![
                file.display().to_string(),
                format!("renamed={}", file.display()),
            ],
            env_files: vec![env.display().to_string()],
            namespace: None,
        };
        let data = collect(&args).unwrap();
        assert_eq!(data["greeting"], b"hello=world");
        assert_eq!(data["app.properties"], b"color=blue\n");
        assert_eq!(data["renamed"], b"color=blue\n");
        assert_eq!(data["MODE"], b"fast");
        assert_eq!(data["LEVEL"], b"3");
        assert_eq!(data.len(), 5);
    }

    #[test]
    fn bad_keys_and_repeats_are_named() {
        let args = |literals: &[&str]| DataArgs {
            name: "app".into(),
            literals: literals.iter().map(|s| s.to_string()).collect(),
            files: vec![],
            env_files: vec![],
            namespace: None,
        };
        let err = collect(&args(&["bad key=1"])).unwrap_err().to_string();
        assert!(err.contains("\"bad key\""), "{err}");
        let err = collect(&args(&["a=1", "a=2"])).unwrap_err().to_string();
        assert!(err.contains("twice"), "{err}");
        assert!(collect(&args(&["novalue"]))
            .unwrap_err()
            .to_string()
            .contains("KEY=VALUE"));
    }
}
