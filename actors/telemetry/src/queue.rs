//! A bounded export queue in front of one exporter.
//!
//! NOTE: why not the SDK's BatchSpanProcessor. Its exports run on a plain thread (the gRPC
//! and async HTTP exporters need a tokio runtime there), and the spans it drops when full are
//! only logged at shutdown, while an operator needs a counter that rises as it happens. Here
//! each exporter gets a thread with a runtime of its own; ending a span is a `try_send` into a
//! bounded channel, so an actor never waits for a collector: a full queue or a failed export
//! drops spans and counts them.

use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use opentelemetry_sdk::Resource;
use prometheus_client::metrics::counter::Counter;
use tokio::sync::mpsc;

/// Spans waiting for export, per exporter.
pub const QUEUE_CAPACITY: usize = 4096;
const BATCH_SIZE: usize = 512;
const BATCH_INTERVAL: Duration = Duration::from_millis(500);
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

enum Control {
    Flush(std::sync::mpsc::Sender<()>),
    Shutdown(std::sync::mpsc::Sender<()>),
}

#[derive(Debug)]
pub struct BoundedProcessor {
    name: &'static str,
    spans: mpsc::Sender<SpanData>,
    control: mpsc::UnboundedSender<Control>,
    dropped: Counter,
}

impl BoundedProcessor {
    /// Starts the export thread. `make_exporter` runs there, inside its runtime (the gRPC
    /// client must be made in one).
    pub fn start<E, F>(
        name: &'static str,
        resource: Resource,
        dropped: Counter,
        make_exporter: F,
    ) -> std::io::Result<BoundedProcessor>
    where
        E: SpanExporter + 'static,
        F: FnOnce() -> Result<E, String> + Send + 'static,
    {
        let (spans_tx, spans_rx) = mpsc::channel(QUEUE_CAPACITY);
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let counter = dropped.clone();
        std::thread::Builder::new()
            .name(format!("otel-{name}"))
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        eprintln!("warning: {name} span export disabled: no runtime: {e}");
                        return;
                    }
                };
                runtime.block_on(async move {
                    match make_exporter() {
                        Ok(mut exporter) => {
                            exporter.set_resource(&resource);
                            export_loop(name, exporter, spans_rx, control_rx, counter).await
                        }
                        Err(e) => eprintln!("warning: {name} span export disabled: {e}"),
                    }
                });
            })?;
        Ok(BoundedProcessor {
            name,
            spans: spans_tx,
            control: control_tx,
            dropped,
        })
    }

    fn ask(&self, make: impl FnOnce(std::sync::mpsc::Sender<()>) -> Control, timeout: Duration) {
        let (tx, rx) = std::sync::mpsc::channel();
        if self.control.send(make(tx)).is_ok() {
            let _ = rx.recv_timeout(timeout);
        }
    }
}

async fn export_loop<E: SpanExporter>(
    name: &'static str,
    exporter: E,
    mut spans: mpsc::Receiver<SpanData>,
    mut control: mpsc::UnboundedReceiver<Control>,
    dropped: Counter,
) {
    let mut batch: Vec<SpanData> = Vec::with_capacity(BATCH_SIZE);
    let mut tick = tokio::time::interval(BATCH_INTERVAL);
    let mut warned = false;
    loop {
        let mut ack = None;
        let mut stop = false;
        tokio::select! {
            span = spans.recv() => match span {
                Some(span) => {
                    batch.push(span);
                    if batch.len() < BATCH_SIZE {
                        continue;
                    }
                }
                None => stop = true,
            },
            _ = tick.tick() => {}
            c = control.recv() => match c {
                Some(Control::Flush(tx)) => ack = Some(tx),
                Some(Control::Shutdown(tx)) => { ack = Some(tx); stop = true; }
                None => stop = true,
            },
        }
        // A flush must include what was queued before it was asked for.
        if ack.is_some() {
            while let Ok(span) = spans.try_recv() {
                batch.push(span);
            }
        }
        while !batch.is_empty() {
            let take = batch.len().min(BATCH_SIZE);
            let chunk: Vec<SpanData> = batch.drain(..take).collect();
            let n = chunk.len() as u64;
            let result = tokio::time::timeout(EXPORT_TIMEOUT, exporter.export(chunk)).await;
            let failure = match result {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some(format!("no answer within {EXPORT_TIMEOUT:?}")),
            };
            if let Some(why) = failure {
                dropped.inc_by(n);
                if !warned {
                    warned = true;
                    tracing::warn!(exporter = name, error = %why, "span export failed: spans are dropped (and counted) until it works again");
                }
            } else {
                warned = false;
            }
        }
        if let Some(tx) = ack {
            let _ = tx.send(());
        }
        if stop {
            return;
        }
    }
}

impl SpanProcessor for BoundedProcessor {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        if self.spans.try_send(span).is_err() {
            self.dropped.inc();
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.ask(Control::Flush, EXPORT_TIMEOUT * 2);
        Ok(())
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        if self.control.is_closed() {
            return Err(OTelSdkError::AlreadyShutdown);
        }
        self.ask(Control::Shutdown, timeout);
        Ok(())
    }
}

impl BoundedProcessor {
    pub fn name(&self) -> &'static str {
        self.name
    }
}
