//! The actix adapter: one subscription per actor, each request handled in its own task so
//! thousands can wait on the state log at once, in lanes so that load of one kind cannot
//! starve another.
//!
//! NOTE: why lanes. A flood of workload writes (a 150,000-pod Deployment) used to delay node
//! heartbeats past the node grace period; every node then went NotReady, their pods were
//! evicted, and the evictions' writes deepened the flood. Each lane (heartbeats and node
//! status; other node reports; creates; the rest of the API) has its own bound on requests
//! in flight, so heartbeats wait only behind heartbeats, and binds and status reports never
//! wait behind creates. A request that waited for its lane longer than its sender waits for
//! the reply is dropped unanswered: the sender has retried or given up, and doing its work
//! anyway only deepens the queue.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use async_nats::Message;
use bus_schemas::subjects::{self, NodeReport, NodeSubjectError};
use shoal_bus::client::HEADER_TIMEOUT_MS;
use tokio::sync::Semaphore;

use crate::request::Request;
use crate::state::ApiServer;
use crate::telemetry;

/// Requests of one lane in flight at once.
pub const LANE_IN_FLIGHT: usize = 256;

/// What one lane served and dropped since the last overload report.
#[derive(Default, Debug)]
struct LaneCounters {
    served: std::sync::atomic::AtomicU64,
    dropped_late: std::sync::atomic::AtomicU64,
}

struct Lane {
    permits: Arc<Semaphore>,
    counters: LaneCounters,
}

impl Lane {
    fn new() -> Lane {
        Lane {
            permits: Arc::new(Semaphore::new(LANE_IN_FLIGHT)),
            counters: LaneCounters::default(),
        }
    }
}

/// The lane of a subject: 0 heartbeats and node status, 1 other node reports, 2 creates,
/// 3 the rest of the API. Creates bring new work; the rest (binds, status, deletes, reads)
/// moves existing work along, and must not wait behind a burst of new work, or work piles
/// up half-done (pods created faster than they can be bound).
fn lane_of(subject: &str) -> usize {
    match subjects::parse_node_report(subject) {
        Ok((_, NodeReport::Heartbeat | NodeReport::NodeStatus)) => 0,
        Err(NodeSubjectError::NotNodeReport(_)) if subject.ends_with(".create") => 2,
        Err(NodeSubjectError::NotNodeReport(_)) => 3,
        // Malformed reports are refused quickly; they share the lane of other reports.
        _ => 1,
    }
}

pub struct ApiActor {
    server: Arc<ApiServer>,
    nats: async_nats::Client,
    subscriptions: Vec<async_nats::Subscriber>,
    lanes: Arc<[Lane; 4]>,
}

impl ApiActor {
    pub fn new(
        server: Arc<ApiServer>,
        nats: async_nats::Client,
        subscriptions: Vec<async_nats::Subscriber>,
    ) -> Self {
        ApiActor {
            server,
            nats,
            subscriptions,
            lanes: Arc::new([Lane::new(), Lane::new(), Lane::new(), Lane::new()]),
        }
    }
}

/// How often dropped requests are summed up in the log.
const OVERLOAD_REPORT_INTERVAL: Duration = Duration::from_secs(30);
const LANE_NAMES: [&str; 4] = ["heartbeats", "node reports", "creates", "API requests"];

impl ApiActor {
    fn report_overload(&self) {
        for (lane, name) in self.lanes.iter().zip(LANE_NAMES) {
            let dropped = lane
                .counters
                .dropped_late
                .swap(0, std::sync::atomic::Ordering::Relaxed);
            let served = lane
                .counters
                .served
                .swap(0, std::sync::atomic::Ordering::Relaxed);
            if dropped > 0 {
                tracing::warn!(
                    lane = name,
                    dropped,
                    served,
                    "dropped requests whose senders had stopped waiting: this API replica is overloaded (run another replica, or look for a client retrying in a loop)"
                );
            }
        }
    }
}

impl Actor for ApiActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        for subscription in self.subscriptions.drain(..) {
            ctx.add_stream(subscription);
        }
        ctx.run_interval(OVERLOAD_REPORT_INTERVAL, |actor, _| {
            actor.report_overload();
        });
    }
}

/// How long the sender of `msg` waits for this attempt, if it said.
fn sender_timeout(msg: &Message) -> Option<Duration> {
    let value = msg.headers.as_ref()?.get(HEADER_TIMEOUT_MS)?;
    value.as_str().parse().ok().map(Duration::from_millis)
}

impl StreamHandler<Message> for ApiActor {
    fn handle(&mut self, msg: Message, _ctx: &mut Self::Context) {
        let received = Instant::now();
        let (server, nats, lanes) = (self.server.clone(), self.nats.clone(), self.lanes.clone());
        actix::spawn(async move {
            let Some(reply_to) = msg.reply.clone() else {
                tracing::debug!(subject = %msg.subject, "request without reply subject ignored");
                return;
            };
            let lane = &lanes[lane_of(msg.subject.as_str())];
            let Ok(_permit) = lane.permits.clone().acquire_owned().await else {
                return;
            };
            if sender_timeout(&msg).is_some_and(|t| received.elapsed() > t) {
                lane.counters
                    .dropped_late
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                telemetry::lane_dropped(LANE_NAMES[lane_of(msg.subject.as_str())]);
                tracing::debug!(subject = %msg.subject, "request dropped: its sender stopped waiting");
                return;
            }
            let traced = telemetry::request_span(msg.subject.as_str(), msg.headers.as_ref());
            let reply = traced
                .run(async {
                    let request =
                        Request::new(msg.subject.as_str(), msg.headers.as_ref(), &msg.payload);
                    server.handle(request).await
                })
                .await;
            telemetry::served(
                traced.span(),
                msg.subject.as_str(),
                &reply.headers,
                received.elapsed(),
            );
            lane.counters
                .served
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if let Err(e) = nats
                .publish_with_headers(reply_to, reply.headers, reply.payload)
                .await
            {
                tracing::warn!(error = %e, "could not send API reply");
            }
        });
    }

    // The default stops the actor when a stream ends; a subscription ends only when the
    // client shuts down, and the actor should then stop too, but say why.
    fn finished(&mut self, ctx: &mut Self::Context) {
        tracing::info!("API subscription closed; stopping API actor");
        ctx.stop();
    }
}

/// Stops the actor.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Shutdown;

impl Handler<Shutdown> for ApiActor {
    type Result = ();
    fn handle(&mut self, _: Shutdown, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::lane_of;

    #[test]
    fn heartbeats_have_a_lane_of_their_own() {
        assert_eq!(lane_of("shoal.v1.node.n1.heartbeat"), 0);
        assert_eq!(lane_of("shoal.v1.node.n1.node-status"), 0);
        assert_eq!(lane_of("shoal.v1.node.n1.pod-status"), 1);
        assert_eq!(lane_of("shoal.v1.node.n1.pod-delete"), 1);
        assert_eq!(lane_of("shoal.v1.api.pod.create"), 2);
        assert_eq!(lane_of("shoal.v1.api.pod.update"), 3);
        assert_eq!(lane_of("shoal.v1.api.lease.update"), 3);
    }
}
