//! R3 against R1: the same acknowledged publishes, with the same concurrency, to a stream of
//! each replica count in the one cluster, one after the other in the same run.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use async_nats::jetstream::{self, stream};
use bus_schemas::subjects;
use futures::StreamExt;
use shoal_bus::cluster::health::stream_health;

pub struct Figures {
    pub writes: usize,
    pub r3_per_sec: f64,
    pub r1_per_sec: f64,
}

const IN_FLIGHT: usize = 32;

/// The subjects of the baseline's stream with `replicas`.
fn bench_subject(replicas: usize, token: &str) -> String {
    let bench = subjects::BENCH_ALL.trim_end_matches('>');
    format!("{bench}r{replicas}.{token}")
}

/// Acknowledged publishes per second to a fresh stream with `replicas`, made and dropped
/// by `js` (as the API: only it may manage streams and write the bench subjects).
async fn rate(js: &jetstream::Context, replicas: usize, writes: usize) -> Result<f64> {
    let name = format!("CHAOS_BENCH_R{replicas}");
    js.get_or_create_stream(stream::Config {
        name: name.clone(),
        subjects: vec![bench_subject(replicas, "*")],
        storage: stream::StorageType::File,
        num_replicas: replicas,
        ..Default::default()
    })
    .await
    .with_context(|| format!("creating {name}"))?;
    // A new replicated stream answers writes once its Raft group has elected a leader;
    // one published before that is refused (no responders), which would count as lost.
    let deadline = Instant::now() + Duration::from_secs(30);
    while stream_health(js, &name).await.leader.is_none() {
        if Instant::now() > deadline {
            bail!("{name} has no leader after 30 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let start = Instant::now();
    let acked = futures::stream::iter(0..writes)
        .map(|i| {
            let js = js.clone();
            async move {
                let subject = bench_subject(replicas, &format!("w{}", i % 64));
                let ack = js.publish(subject, vec![0u8; 256].into()).await.ok()?;
                tokio::time::timeout(Duration::from_secs(10), ack)
                    .await
                    .ok()?
                    .ok()
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .filter(|a| std::future::ready(a.is_some()))
        .count()
        .await;
    let elapsed = start.elapsed();
    let _ = js.delete_stream(&name).await;
    if acked < writes {
        bail!(
            "only {acked} of {writes} writes to {name} were acknowledged: the baseline means nothing (may the API identity publish on {}?)",
            bench_subject(replicas, "*")
        );
    }
    Ok(acked as f64 / elapsed.as_secs_f64())
}

pub async fn measure(nats: &async_nats::Client, writes: usize) -> Result<Figures> {
    let js = jetstream::new(nats.clone());
    // A warm-up first (fresh connections, Raft groups placed, caches filled), then R1, R3
    // and R1 again: the mean of the two R1 runs cancels a drift of the machine's load.
    rate(&js, 3, writes / 4).await?;
    let r1_a = rate(&js, 1, writes / 2).await?;
    let r3 = rate(&js, 3, writes).await?;
    let r1_b = rate(&js, 1, writes / 2).await?;
    Ok(Figures {
        writes,
        r3_per_sec: r3,
        r1_per_sec: (r1_a + r1_b) / 2.0,
    })
}
