//! A bounded export queue in front of one exporter.
//!
//! NOTE: why not the SDK's BatchSpanProcessor. Its exports run on a plain thread (the gRPC
//! and async HTTP exporters need a tokio runtime there), and the spans it drops when full are
//! only logged at shutdown, while an operator needs a counter that rises as it happens. Here
//! each exporter gets a thread with a runtime of its own; ending a span pushes it onto a
//! bounded queue, so an actor never waits for a collector: a full queue or a failed export
//! drops spans and counts them.
//!
//! The queue wakes the export thread once per batch, not per span: a channel's wake-up is a
//! system call, and at a 1.0 ratio one per span was 4 % of the control plane's time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use opentelemetry_sdk::Resource;
use prometheus_client::metrics::counter::Counter;
use tokio::sync::{mpsc, Notify};

/// Spans waiting for export, per exporter.
pub const QUEUE_CAPACITY: usize = 4096;
const BATCH_SIZE: usize = 512;
const BATCH_INTERVAL: Duration = Duration::from_millis(500);
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

enum Control {
    Flush(std::sync::mpsc::Sender<()>),
    Shutdown(std::sync::mpsc::Sender<()>),
}

/// Ended spans waiting for the export thread.
#[derive(Debug)]
struct Pending {
    spans: Mutex<Vec<SpanData>>,
    /// Rung when a batch is full (the thread also exports what waits every interval).
    batch_full: Notify,
}

impl Pending {
    /// The queue; a thread that panicked holding it left whole spans, so it stays usable.
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<SpanData>> {
        self.spans.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Swaps what waits for `spare`, an empty buffer the export thread drained: the actors'
    /// buffer keeps its capacity, so ending a span never regrows (and copies) it.
    fn swap(&self, spare: &mut Vec<SpanData>) {
        debug_assert!(spare.is_empty());
        std::mem::swap(&mut *self.lock(), spare);
    }
}

#[derive(Debug)]
pub struct BoundedProcessor {
    name: &'static str,
    pending: Arc<Pending>,
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
        let pending = Arc::new(Pending {
            spans: Mutex::new(Vec::with_capacity(BATCH_SIZE)),
            batch_full: Notify::new(),
        });
        let queued = pending.clone();
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
                            export_loop(name, exporter, queued, control_rx, counter).await
                        }
                        Err(e) => eprintln!("warning: {name} span export disabled: {e}"),
                    }
                });
            })?;
        Ok(BoundedProcessor {
            name,
            pending,
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
    pending: Arc<Pending>,
    mut control: mpsc::UnboundedReceiver<Control>,
    dropped: Counter,
) {
    let mut tick = tokio::time::interval(BATCH_INTERVAL);
    let mut warned = false;
    let mut batch: Vec<SpanData> = Vec::with_capacity(BATCH_SIZE);
    loop {
        let mut ack = None;
        let mut stop = false;
        tokio::select! {
            _ = pending.batch_full.notified() => {}
            _ = tick.tick() => {}
            c = control.recv() => match c {
                Some(Control::Flush(tx)) => ack = Some(tx),
                Some(Control::Shutdown(tx)) => { ack = Some(tx); stop = true; }
                None => stop = true,
            },
        }
        // Taken after the wake-up, so a flush includes what was queued before it was asked.
        pending.swap(&mut batch);
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
        let mut spans = self.pending.lock();
        if spans.len() >= QUEUE_CAPACITY {
            drop(spans);
            self.dropped.inc();
            return;
        }
        spans.push(span);
        let full = spans.len() == BATCH_SIZE;
        drop(spans);
        if full {
            self.pending.batch_full.notify_one();
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
