//! The Python `kubernetes` client (from PyPI; setup.sh installs it) lists, watches, creates,
//! patches and deletes through the gateway; with a viewer's token it is refused writes.

mod common;

use common::Env;

#[actix::test]
async fn python_kubernetes_client_lists_watches_creates_patches_deletes() {
    let env = Env::start().await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/client.py");
    let out = tokio::process::Command::new("python3")
        .arg(script)
        .arg(&env.kubeconfig)
        .env("HOME", env.dir.path())
        .kill_on_drop(true)
        .output()
        .await
        .expect("running python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Python client failed (is `kubernetes` installed? ops/scripts/setup.sh installs it):\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("ok:"), "{stdout}");
}

#[actix::test]
async fn python_kubernetes_client_with_a_viewer_token() {
    let env = Env::start().await;
    let viewer = env.kubeconfig_for("pyviewer", &bus_schemas::roles::Role::Viewer);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/auth.py");
    let out = tokio::process::Command::new("python3")
        .arg(script)
        .arg(&viewer)
        .arg("pyviewer")
        .env("HOME", env.dir.path())
        .kill_on_drop(true)
        .output()
        .await
        .expect("running python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("ok:"), "{stdout}");
    let missing = env.fails(&["get", "pod", "py-denied"]).await;
    assert!(
        missing.contains("not found"),
        "nothing was written: {missing}"
    );
}
