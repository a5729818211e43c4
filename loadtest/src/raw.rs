//! The JetStream write capacity baseline: `count` messages published to the state stream's
//! subjects with `concurrency` awaiting acks. Every write path above it has this ceiling.
//! Shared by `shoal-loadtest` and the `src/bin` benchmarks (included by path).

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use bytes::Bytes;
use tokio::sync::Semaphore;

pub async fn raw_publishes(
    nats: &async_nats::Client,
    count: usize,
    concurrency: usize,
    payload: Bytes,
) -> Result<f64> {
    let js = async_nats::jetstream::new(nats.clone());
    let sem = Arc::new(Semaphore::new(concurrency));
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(count);
    for i in 0..count {
        let permit = sem.clone().acquire_owned().await?;
        let js = js.clone();
        let payload = payload.clone();
        tasks.push(tokio::spawn(async move {
            let subject = bus_schemas::subjects::object("benchraw", "default", &format!("r{i}"));
            js.publish(subject, payload).await?.await?;
            drop(permit);
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(count as f64 / start.elapsed().as_secs_f64())
}
