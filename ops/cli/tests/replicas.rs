//! One of two API replicas is killed (SIGKILL) under load: every request still succeeds
//! through the other, and retries never duplicate an object.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bus_schemas::api::ListOptions;
use bus_schemas::kinds::Pod;
use shoal_api::local::LocalCluster;
use shoal_bus::tied::TiedToThisThread;

#[actix::test]
async fn killing_one_api_replica_under_load_loses_no_request() {
    let cluster = LocalCluster::start().await.unwrap();
    let mut replica = Command::new(env!("CARGO_BIN_EXE_shoal"))
        .args([
            "up",
            "--no-node",
            "--nats",
            &cluster.url(),
            "--monitor",
            "127.0.0.1:1",
            "--creds",
        ])
        // The cluster's credentials directory: each actor its own identity there.
        .arg(
            cluster
                .natsd
                .config()
                .auth
                .as_ref()
                .expect("test clusters run with identities on")
                .dir()
                .join("creds"),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .tied_to_this_thread()
        .spawn()
        .unwrap();
    // The replica prints once its API actor serves and bootstrap is done.
    let stdout = replica.stdout.take().unwrap();
    let ready = tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|l| l.contains("cluster is up"))
    });
    assert!(tokio::time::timeout(Duration::from_secs(30), ready)
        .await
        .unwrap()
        .unwrap());

    let api = cluster.api();
    let done = Arc::new(AtomicUsize::new(0));
    let total = 400;
    let sem = Arc::new(tokio::sync::Semaphore::new(16));
    let mut tasks = Vec::new();
    for i in 0..total {
        let (api, done, sem) = (api.clone(), done.clone(), sem.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = sem.acquire().await.unwrap();
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("load-{i:04}")},
                "spec": {"containers": [{"name": "a", "image": "shoal/busybox:1.35"}]}
            }))
            .unwrap();
            let started = std::time::Instant::now();
            let result = api.create(&pod).await;
            done.fetch_add(1, Ordering::SeqCst);
            result.map(|_| started.elapsed())
        }));
    }
    while done.load(Ordering::SeqCst) < total / 4 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    replica.kill().unwrap();
    replica.wait().unwrap();
    let mut failures = Vec::new();
    let mut slowest = Duration::ZERO;
    for t in tasks {
        match t.await.unwrap() {
            Ok(took) => slowest = slowest.max(took),
            Err(e) => failures.push(e.to_string()),
        }
    }
    eprintln!("slowest create {slowest:?}");
    assert!(
        failures.is_empty(),
        "{} requests failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(3)]
    );
    let pods = api.list::<Pod>(&ListOptions::default()).await.unwrap();
    assert_eq!(pods.items.len(), total, "every create landed exactly once");
}
