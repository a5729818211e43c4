//! What the CLI tests share: running the real `shoal` binary as a person would.

use std::path::PathBuf;
use std::process::Command;

use shoal_api::local::LocalCluster;

pub const SHOAL: &str = env!("CARGO_BIN_EXE_shoal");

pub struct Out {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// The admin credential of a test cluster: what its operator's `shoal` presents.
pub fn admin_creds(cluster: &LocalCluster) -> PathBuf {
    cluster
        .natsd
        .config()
        .auth
        .as_ref()
        .expect("test clusters run with identities on")
        .creds_path("admin")
}

/// Runs `shoal ARGS` as the admin of `cluster`, off the test's runtime (it is a blocking
/// wait), and echoes the command and its output so a failing test shows what it saw.
pub async fn shoal_at(cluster: &LocalCluster, args: &[&str]) -> Out {
    let (url, creds) = (cluster.url(), admin_creds(cluster));
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let out = Command::new(SHOAL)
            .args(&args)
            .env("SHOAL_NATS", url)
            .env("SHOAL_CREDS", creds)
            .env_remove("SHOAL_LOG")
            .output()
            .expect("run shoal");
        let out = Out {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        eprintln!("$ shoal {}\n{}{}", args.join(" "), out.stdout, out.stderr);
        out
    })
    .await
    .unwrap()
}
