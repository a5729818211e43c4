//! The actix adapter: one subscription per actor, each request handled in its own task so
//! thousands can wait on the state log at once.

use std::sync::Arc;

use actix::prelude::*;
use async_nats::Message;

use crate::request::Request;
use crate::server::ApiServer;

pub struct ApiActor {
    server: Arc<ApiServer>,
    nats: async_nats::Client,
    subscriptions: Vec<async_nats::Subscriber>,
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
        }
    }
}

impl Actor for ApiActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        for subscription in self.subscriptions.drain(..) {
            ctx.add_stream(subscription);
        }
    }
}

impl StreamHandler<Message> for ApiActor {
    fn handle(&mut self, msg: Message, _ctx: &mut Self::Context) {
        let (server, nats) = (self.server.clone(), self.nats.clone());
        actix::spawn(async move {
            let Some(reply_to) = msg.reply.clone() else {
                tracing::debug!(subject = %msg.subject, "request without reply subject ignored");
                return;
            };
            let request = Request::new(msg.subject.as_str(), msg.headers.as_ref(), &msg.payload);
            let reply = server.handle(request).await;
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
