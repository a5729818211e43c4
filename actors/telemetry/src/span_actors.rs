//! For tests: which actor each span made while some code runs names (`shoal.actor`).

use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

use crate::ACTOR_ATTRIBUTE;

/// A span's name and the actor it names, if any.
pub type SpanActor = (&'static str, Option<String>);

/// Runs `f` under a subscriber of its own (no OpenTelemetry layer, so every span is made)
/// and returns each span it made, in order.
pub fn span_actors(f: impl FnOnce()) -> Vec<SpanActor> {
    let seen = Recorder::default();
    let subscriber = tracing_subscriber::registry().with(seen.clone());
    tracing::subscriber::with_default(subscriber, f);
    let spans = seen.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
    spans
}

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<SpanActor>>>);

struct ActorField(Option<String>);

impl Visit for ActorField {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == ACTOR_ATTRIBUTE {
            self.0 = Some(value.to_string());
        }
    }

    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

impl<S: tracing::Subscriber> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        let mut actor = ActorField(None);
        attrs.record(&mut actor);
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((attrs.metadata().name(), actor.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_each_span_and_the_actor_it_names() {
        let spans = span_actors(|| {
            let outer = tracing::info_span!("outer", shoal.actor = "api");
            let _inner = outer.in_scope(|| tracing::info_span!("inner", kind = "Pod"));
        });
        assert_eq!(spans, [("outer", Some("api".to_string())), ("inner", None)]);
    }
}
