//! The Python `kubernetes` client (from PyPI; setup.sh installs it) lists, watches, creates,
//! patches and deletes through the gateway; with a viewer's token it is refused writes; it relists
//! when its watch revision was compacted.

mod common;

use common::Env;

/// Runs one of `tests/python/` with `args` and `HOME` in the test's directory (kubectl's and the
/// client's caches stay there), and expects it to succeed and print `ok:`.
async fn run_python(env: &Env, script: &str, args: &[&dyn AsRef<std::ffi::OsStr>]) {
    let path = format!("{}/tests/python/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = tokio::process::Command::new("python3")
        .arg(path)
        .args(args.iter().map(|a| a.as_ref()))
        .env("HOME", env.dir.path())
        .kill_on_drop(true)
        .output()
        .await
        .expect("running python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{script} failed (is `kubernetes` installed? ops/scripts/setup.sh installs it):\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("ok:"), "{stdout}");
}

#[actix::test]
async fn python_kubernetes_client_lists_watches_creates_patches_deletes() {
    let env = Env::start().await;
    run_python(&env, "client.py", &[&env.kubeconfig]).await;
}

/// Issue 14: a watch from below the log's compaction revision gets 410 Expired through the
/// gateway, and the Python client's relist (list, then watch from the list) converges.
#[actix::test]
async fn python_client_relists_after_its_watch_revision_was_compacted() {
    use bus_schemas::api::DeleteOptions;
    use bus_schemas::kinds::Pod;
    use bus_schemas::state_log::CompactionRecord;
    use bus_schemas::subjects;

    let env = Env::start().await;
    let api = env.cluster.api();
    let store = &env.cluster.store;
    let pod = |name: &str| -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "main", "image": "shoal/busybox:1.35"}]}
        }))
        .unwrap()
    };
    api.create(&pod("kept")).await.unwrap();
    let old = store.last_revision().await.unwrap();
    api.create(&pod("gone")).await.unwrap();
    let _: Pod = api
        .delete(&DeleteOptions {
            namespace: "default".into(),
            name: "gone".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    // What the compactor does once the tombstone is older than the retention (1 h here):
    // record the compaction revision, then purge. Only the API role may do either.
    let subject = subjects::object("pod", "default", "gone");
    let tombstone = store.get_raw(&subject).await.unwrap().unwrap().revision;
    let as_api = shoal_bus::Store::open(
        env.cluster
            .connect_as(&bus_schemas::roles::Role::Api, "compaction")
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    let base = as_api
        .compaction_record()
        .await
        .unwrap()
        .map(|(revision, _)| revision)
        .unwrap_or(0);
    let record = CompactionRecord {
        revision: tombstone,
        holder: "test".into(),
        // Long ago: the cluster's own compactor may take its lease back at once.
        renewed_ms: 0,
    };
    // The cluster's compactor renews its lease on the same record: retry on a conflict.
    let mut base = base;
    loop {
        match as_api.write_compaction_record(&record, base).await {
            Ok(_) => break,
            Err(shoal_bus::StoreError::Conflict { .. }) => {
                base = as_api.compaction_record().await.unwrap().unwrap().0;
            }
            Err(e) => panic!("writing the compaction record: {e}"),
        }
    }
    as_api.purge_through(&subject, tombstone).await.unwrap();

    run_python(&env, "relist.py", &[&env.kubeconfig, &old.to_string()]).await;
}

#[actix::test]
async fn python_kubernetes_client_with_a_viewer_token() {
    let env = Env::start().await;
    let viewer = env.kubeconfig_for("pyviewer", &bus_schemas::roles::Role::Viewer);
    run_python(&env, "auth.py", &[&viewer, &"pyviewer"]).await;
    let missing = env.fails(&["get", "pod", "py-denied"]).await;
    assert!(
        missing.contains("not found"),
        "nothing was written: {missing}"
    );
}
