//! Traced work that costs nothing when its trace is not sampled.
//!
//! A `tracing` span costs the same whether or not the sampler will keep it: the layer
//! records its name, fields and timings before anyone asks, and an instrumented future
//! enters and leaves it on every poll. At a 0.01 ratio that was a sixth of the control
//! plane's time, spent on spans that were then dropped. So work that continues a trace
//! which is already decided against (an unsampled remote parent, or an unsampled span
//! above it) makes no span: it only carries the trace's context, attached as the
//! OpenTelemetry context while it runs, so whatever it sends downstream still names that
//! trace and is skipped there too. A trace is kept whole or not at all.
//!
//! A request with no parent at all is a new root, sampled before its span is made: a dropped
//! one makes none and carries an unsampled context (see [`Traced::new_root`]). Work caused by
//! an object's change never starts a trace: it continues the one kept with the change, and a
//! change kept with none was sampled out (see [`Traced::from_traceparent`]).

use std::future::Future;

use async_nats::HeaderMap;
use futures::future::Either;
use opentelemetry::context::FutureExt as _;
use opentelemetry::trace::{SpanContext, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry::{Context, ContextGuard};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
use tracing::instrument::Instrumented;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::propagation;
use crate::sampling::KeptRoot;

/// One unit of work's place in its trace: a span that records it, or only the context of an
/// unsampled trace, carried on.
#[derive(Debug, Clone)]
pub struct Traced {
    span: tracing::Span,
    carried: Option<Context>,
}

/// Whether a trace that `cx` belongs to is recorded. Only a valid context that says "not
/// sampled" counts as decided against: with no parent-based sampling configured, every
/// span decides for itself, so nothing is skipped.
fn decided_against(cx: &Context) -> bool {
    let span = cx.span();
    let sc = span.span_context();
    sc.is_valid() && !sc.is_sampled() && crate::sampling::parent_decides()
}

/// Whether work started now would be the root of a new trace that [`Traced`] may sample up
/// front: no span or context is current to continue, and remote parents decide for their
/// children (otherwise every span decides for itself, as the SDK would).
fn starts_a_trace() -> bool {
    crate::sampling::parent_decides()
        && tracing::Span::current().is_none()
        && !Context::current().span().span_context().is_valid()
}

/// The remote context a traceparent names (empty for none, or a malformed one).
fn context_of(traceparent: Option<&str>) -> Context {
    traceparent
        .map(propagation::extract_traceparent)
        .unwrap_or_default()
}

/// The unsampled trace the running code carries, if any: set by [`Traced::run`] or
/// [`Traced::enter`] of carried work, when no span is current.
fn carried_now() -> Option<Context> {
    if !tracing::Span::current().is_none() {
        return None;
    }
    let cx = Context::current();
    decided_against(&cx).then_some(cx)
}

/// What work with no trace to continue does (no parent, and no work running around it).
#[derive(Debug, Clone, Copy)]
enum Unparented {
    /// A request: a new root, sampled at the configured ratio.
    NewRoot,
    /// Work caused by an object's change: no trace (see [`Traced::from_traceparent`]).
    SampledOut,
}

impl Traced {
    /// Work that is not traced (routine work, or tracing is off).
    pub fn none() -> Traced {
        Traced {
            span: tracing::Span::none(),
            carried: None,
        }
    }

    /// Work continuing the remote context `parent` (a request's, from its headers); with none
    /// to continue, a new root. `make` builds the span, only if it will be recorded.
    pub fn continuing(parent: Context, make: impl FnOnce() -> tracing::Span) -> Traced {
        Traced::continuing_or(parent, Unparented::NewRoot, make)
    }

    fn continuing_or(
        parent: Context,
        unparented: Unparented,
        make: impl FnOnce() -> tracing::Span,
    ) -> Traced {
        if !crate::installed() {
            return Traced {
                span: make(),
                carried: None,
            };
        }
        if decided_against(&parent) {
            return Traced {
                span: tracing::Span::none(),
                carried: Some(parent),
            };
        }
        let has_parent = parent.span().span_context().is_valid();
        if !has_parent {
            if let Some(carried) = carried_now() {
                return Traced {
                    span: tracing::Span::none(),
                    carried: Some(carried),
                };
            }
            if starts_a_trace() {
                return match unparented {
                    Unparented::NewRoot => Traced::new_root(make),
                    Unparented::SampledOut => {
                        Traced::sampled_out(RandomIdGenerator::default().new_trace_id())
                    }
                };
            }
        }
        let span = make();
        if has_parent {
            let _ = span.set_parent(parent);
        }
        Traced {
            span,
            carried: None,
        }
    }

    /// A new trace, sampled before any span of it exists. A dropped one makes no span: a
    /// root span costs the same as any other before the sampler sees it, and at a 0.01 ratio
    /// nearly every root is dropped. It carries an unsampled context instead, so whatever it
    /// causes downstream is skipped too.
    fn new_root(make: impl FnOnce() -> tracing::Span) -> Traced {
        let (trace_id, keep) = crate::sampling::decide_root();
        if keep {
            let span = make();
            let _ = span.set_parent(Context::new().with_value(KeptRoot));
            return Traced {
                span,
                carried: None,
            };
        }
        Traced::sampled_out(trace_id)
    }

    /// Work in a trace decided against from its start: no span, and an unsampled context
    /// carried on, so what it sends downstream is not drawn again as a new root.
    fn sampled_out(trace_id: TraceId) -> Traced {
        let dropped = SpanContext::new(
            trace_id,
            RandomIdGenerator::default().new_span_id(),
            TraceFlags::default(),
            false,
            TraceState::default(),
        );
        Traced {
            span: tracing::Span::none(),
            carried: Some(Context::new().with_remote_span_context(dropped)),
        }
    }

    /// Work that records no span but carries the trace a traceparent names (none: nothing)
    /// on to what it sends, so a write it makes continues that trace at the API.
    pub fn carrying(traceparent: Option<&str>) -> Traced {
        let parent = context_of(traceparent);
        let valid = crate::installed() && parent.span().span_context().is_valid();
        Traced {
            span: tracing::Span::none(),
            carried: valid.then_some(parent),
        }
    }

    /// The running work's trace, for a part of it handed to a task of its own (a write made
    /// in the background): its context only, carried on, so the task's requests continue
    /// the trace without holding the running span open until they end.
    pub fn handed_off() -> Traced {
        let cx = propagation::current_context();
        let valid = crate::installed() && cx.span().span_context().is_valid();
        Traced {
            span: tracing::Span::none(),
            carried: valid.then_some(cx),
        }
    }

    /// Work caused by an object's change: [`Traced::continuing`] the trace the change was
    /// kept with.
    ///
    /// A change kept with no trace (or a malformed one) starts none: under parent-based
    /// sampling the API keeps only sampled traces with the events it writes
    /// ([`crate::propagation::traceparent_to_keep`]), so a change without one was made in a
    /// trace decided against, or by a writer that traces nothing. Such work makes no span and
    /// carries an unsampled context on, so what it writes is not drawn again at the API: the
    /// trace stays whole, or absent.
    pub fn from_traceparent(
        traceparent: Option<&str>,
        make: impl FnOnce() -> tracing::Span,
    ) -> Traced {
        Traced::continuing_or(context_of(traceparent), Unparented::SampledOut, make)
    }

    /// [`Traced::continuing`] the trace a request's headers carry (a missing or malformed
    /// one starts a new root: the work goes on).
    pub fn from_headers(
        headers: Option<&HeaderMap>,
        make: impl FnOnce() -> tracing::Span,
    ) -> Traced {
        Traced::continuing(propagation::extract(headers), make)
    }

    /// Routine work (a node's heartbeat): it continues a trace its headers carry, but with
    /// none it starts no trace of its own, at any sample ratio.
    pub fn continuing_only(
        headers: Option<&HeaderMap>,
        make: impl FnOnce() -> tracing::Span,
    ) -> Traced {
        let parent = propagation::extract(headers);
        if crate::installed() && !parent.span().span_context().is_valid() {
            return Traced::none();
        }
        Traced::continuing(parent, make)
    }

    /// A part of this work: its own span while this work is recorded, else the same
    /// carried context (or nothing, for untraced work).
    pub fn child(&self, make: impl FnOnce() -> tracing::Span) -> Traced {
        if self.span.is_none() {
            return Traced {
                span: tracing::Span::none(),
                carried: self.carried.clone(),
            };
        }
        if crate::installed() && !self.span.context().span().span_context().is_sampled() {
            // A new root the sampler decided against: its parts need no spans either.
            return Traced {
                span: tracing::Span::none(),
                carried: None,
            };
        }
        let span = self.span.in_scope(make);
        Traced {
            span,
            carried: None,
        }
    }

    /// The span that records this work (a disabled one when nothing does): fields are
    /// recorded on it whatever it is.
    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// Runs `fut` as this work: inside its span, or with its carried context current.
    pub fn run<F: Future>(
        &self,
        fut: F,
    ) -> Either<Instrumented<F>, opentelemetry::context::WithContext<F>> {
        match &self.carried {
            Some(cx) => Either::Right(fut.with_context(cx.clone())),
            None => Either::Left(fut.instrument(self.span.clone())),
        }
    }

    /// Enters this work for synchronous code, until the guard is dropped.
    pub fn enter(&self) -> Entered<'_> {
        Entered {
            _span: self.span.enter(),
            _carried: self.carried.clone().map(Context::attach),
        }
    }

    /// Runs `f` inside this work.
    pub fn in_scope<R>(&self, f: impl FnOnce() -> R) -> R {
        let _entered = self.enter();
        f()
    }
}

/// While held, the work's span or carried context is current.
pub struct Entered<'a> {
    _span: tracing::span::Entered<'a>,
    _carried: Option<ContextGuard>,
}

/// A part of whatever work is running now: a span when that work is recorded, nothing
/// otherwise (outside any work, or in a trace decided against).
pub fn child_of_current(make: impl FnOnce() -> tracing::Span) -> tracing::Span {
    let current = tracing::Span::current();
    if current.is_none() {
        return tracing::Span::none();
    }
    Traced {
        span: current,
        carried: None,
    }
    .child(make)
    .span
}
