//! The from-zero consumer pod's program (this binary, mounted into a busybox container):
//! pulls from a durable JetStream consumer, acks each message (double ack: the server has
//! confirmed it) and then reports it on a plain subject, until the pod is stopped.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use async_nats::jetstream;
use clap::Args;
use futures::StreamExt;
use shoal_bus::auth::ClientAuth;

#[derive(Args)]
pub struct ConsumeArgs {
    #[arg(long)]
    url: String,
    /// The application's credential (`app:<name>`).
    #[arg(long)]
    creds: PathBuf,
    #[arg(long)]
    stream: String,
    #[arg(long)]
    consumer: String,
    /// Where each acked message's payload is reported.
    #[arg(long)]
    done: String,
}

pub fn run(args: ConsumeArgs) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let auth = ClientAuth::from_creds_file(&args.creds)
            .with_context(|| format!("--creds {}", args.creds.display()))?;
        let nats = shoal_bus::connect(&args.url, "bench-consumer-pod", &auth)
            .await
            .with_context(|| format!("connecting to {}", args.url))?;
        let js = jetstream::new(nats.clone());
        let consumer: jetstream::consumer::PullConsumer = js
            .get_stream(&args.stream)
            .await
            .with_context(|| format!("the stream {}", args.stream))?
            .get_consumer(&args.consumer)
            .await
            .map_err(|e| anyhow::anyhow!("the consumer {}: {e}", args.consumer))?;
        println!("consuming {}/{}", args.stream, args.consumer);
        loop {
            let mut batch = consumer
                .fetch()
                .max_messages(16)
                .expires(Duration::from_secs(5))
                .messages()
                .await?;
            while let Some(msg) = batch.next().await {
                let msg = msg.map_err(|e| anyhow::anyhow!("{e}"))?;
                let payload = msg.payload.clone();
                msg.double_ack()
                    .await
                    .map_err(|e| anyhow::anyhow!("ack: {e}"))?;
                nats.publish(args.done.clone(), payload.clone()).await?;
                nats.flush().await?;
                println!("consumed {}", String::from_utf8_lossy(&payload));
            }
        }
    })
}
