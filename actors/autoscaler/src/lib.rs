//! The autoscaler actor: Kubernetes' HorizontalPodAutoscaler and VerticalPodAutoscaler on
//! metrics from the bus.
//!
//! # Layout
//! - [`calc`]: the replica calculator, one metric's observations → a proposal (pure).
//! - [`normalize`]: stabilization windows and scaling-rate limits over a per-HPA
//!   [`normalize::History`] (pure, clock injected).
//! - [`decide`]: one HPA pass: plan (every metric, the largest proposal), decide (normalize,
//!   clamp, conditions, events) and the status to write (pure).
//! - [`metrics`]: the latest pod usage and external samples from the bus; bad samples are
//!   dropped and counted.
//! - [`jetstream_lag`]: JetStream consumer lag as a built-in External metric, read from
//!   consumer info, woken by the stream's messages while the lag is zero.
//! - [`hook`]: asking an autoscaling hook over NATS request/reply.
//! - [`pass`]: one HPA against the cluster: scale through the API, status, Events, the
//!   published decision.
//! - [`vpa`]: VerticalPodAutoscaler: decaying usage histograms per container, the
//!   recommendation written to VPA status, and Recreate's evictions.
//! - [`run`]: the actor: leader election, the metrics feed, periodic and prompt passes (a
//!   span per pass and per HPA, the decisions counted in Prometheus).
//!
//! Like every actor it never calls another: it reads HPAs and pods from the shared caches
//! and metrics from the bus, and writes only through the API (the scale subresource, HPA
//! and VPA status, pod deletions for Recreate, Events).

pub mod calc;
pub mod decide;
pub mod hook;
pub mod jetstream_lag;
pub mod metrics;
pub mod normalize;
pub mod pass;
pub mod vpa;

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bus_schemas::api::PodMetrics;
use bus_schemas::kinds::{HorizontalPodAutoscaler, Pod, VerticalPodAutoscaler};
use bus_schemas::selector::Selector;
use bus_schemas::{codec, subjects};
use futures::StreamExt;
use shoal_bus::leader::{LeaderElectionConfig, LeaderElector, Leadership};
use shoal_bus::{ApiClient, InformerFactory, Store, StoreError};
use tracing::Instrument;

use crate::decide::Settings;
use crate::jetstream_lag::LagWatchers;
use crate::metrics::MetricStore;
use crate::pass::Ctx;

#[derive(Debug, thiserror::Error)]
pub enum AutoscalerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("subscribing to {subject}: {detail}")]
    Subscribe { subject: String, detail: String },
}

#[derive(Clone)]
pub struct AutoscalerConfig {
    /// Shares another actor's caches (the one-machine cluster hosts every actor).
    pub informers: Option<InformerFactory>,
    /// With `Some`, only the holder of this Lease acts; the others stand by.
    pub leader_election: Option<LeaderElectionConfig>,
    /// How often every HPA is evaluated (Kubernetes: 15 s). HPA changes and external
    /// samples for a target at zero trigger a pass at once.
    pub sync_period: Duration,
    pub settings: Settings,
    /// How long a hook may take before the built-in proposal is used.
    pub hook_timeout: Duration,
    /// Older metric samples are not used.
    pub metrics_max_age: Duration,
    /// The node agents' sample period (the span a usage sample averages over).
    pub sample_window: Duration,
    /// How often JetStream consumer lag is read while messages are pending (a message to an
    /// idle stream is noticed at once).
    pub lag_period: Duration,
    /// The VPA recommender's half-lives, intervals, margin and minimums.
    pub vpa: vpa::recommend::Settings,
    /// An unchanged VPA recommendation is rewritten (its bounds refreshed) this often.
    pub vpa_status_period: Duration,
}

impl Default for AutoscalerConfig {
    fn default() -> Self {
        AutoscalerConfig {
            informers: None,
            leader_election: None,
            sync_period: Duration::from_secs(2),
            settings: Settings::default(),
            hook_timeout: Duration::from_secs(2),
            metrics_max_age: Duration::from_secs(60),
            sample_window: Duration::from_secs(5),
            lag_period: Duration::from_secs(1),
            vpa: vpa::recommend::Settings::default(),
            vpa_status_period: Duration::from_secs(60),
        }
    }
}

impl AutoscalerConfig {
    /// Leader election on the Lease `shoal-system/shoal-autoscaler` with this identity.
    pub fn with_leader_election(mut self, identity: impl Into<String>) -> Self {
        self.leader_election = Some(LeaderElectionConfig::new(
            "shoal-system",
            "shoal-autoscaler",
            identity,
        ));
        self
    }
}

/// HPAs evaluated at once in a pass.
const PASS_CONCURRENCY: usize = 32;

/// Runs the autoscaler until `shutdown` resolves. With leader election it campaigns first;
/// metrics are collected while standing by too, so a new leader decides on warm data.
pub async fn run(
    config: AutoscalerConfig,
    nats: async_nats::Client,
    shutdown: impl Future<Output = ()>,
) -> Result<(), AutoscalerError> {
    let informers = match config.informers.clone() {
        Some(f) => f,
        None => InformerFactory::new(Store::open(nats.clone()).await?),
    };
    let api = ApiClient::new(nats.clone());
    let prompt = Arc::new(tokio::sync::Notify::new());
    let lag = LagWatchers::new(nats.clone(), config.lag_period, prompt.clone());
    let lag_table = lag.table.clone();
    let metrics = MetricStore::new(config.metrics_max_age, config.sample_window)
        .with_builtin(move |_, metric| lag_table.answer(metric));
    let hpas = informers.get::<HorizontalPodAutoscaler>();
    let pods = informers.get::<Pod>();
    let recommender = vpa::Recommender::new(vpa::recommend::Settings {
        sample_period: config.sample_window,
        ..config.vpa.clone()
    });
    let feed = spawn_metrics_feed(
        &nats,
        metrics.clone(),
        recommender.clone(),
        pods.clone(),
        prompt.clone(),
    )
    .await?;
    let vpa_targets = spawn_vpa_targets(
        informers.clone(),
        recommender.clone(),
        pods.clone(),
        config.sync_period,
    );
    let watcher = spawn_hpa_watch(&hpas, prompt.clone(), lag);
    tokio::pin!(shutdown);
    let result = loop {
        let mut leadership: Option<Leadership> = None;
        if let Some(le) = &config.leader_election {
            let elector = LeaderElector::new(api.clone(), le.clone());
            tokio::select! {
                l = elector.acquire() => leadership = Some(l),
                _ = &mut shutdown => break Ok(()),
            }
        }
        let synced = tokio::select! {
            r = async { hpas.wait_synced().await?; pods.wait_synced().await } => Some(r),
            _ = &mut shutdown => None,
            _ = lost(&mut leadership) => continue,
        };
        match synced {
            Some(Ok(())) => {}
            other => {
                if let Some(l) = leadership {
                    l.release().await;
                }
                break other.unwrap_or(Ok(())).map_err(Into::into);
            }
        }
        let ctx = Arc::new(Ctx::new(
            api.clone(),
            nats.clone(),
            hpas.clone(),
            pods.clone(),
            metrics.clone(),
            config.settings.clone(),
            config.hook_timeout,
        ));
        let vpa_ctx = Arc::new(vpa::pass::Ctx::new(
            api.clone(),
            informers.clone(),
            recommender.clone(),
            config.vpa_status_period,
        ));
        tracing::info!("autoscaler acting");
        let stop = tokio::select! {
            _ = passes(ctx, vpa_ctx, config.sync_period, prompt.clone()) => true,
            _ = &mut shutdown => true,
            _ = lost(&mut leadership) => false,
        };
        if stop {
            if let Some(l) = leadership {
                l.release().await;
            }
            break Ok(());
        }
        tracing::warn!("autoscaler lost leadership; standing by");
    };
    feed.abort();
    watcher.abort();
    vpa_targets.abort();
    result
}

async fn lost(leadership: &mut Option<Leadership>) {
    match leadership {
        Some(l) => l.lost().await,
        None => std::future::pending().await,
    }
}

/// Every `period`, or at once when prompted, evaluates every HPA; every period, every VPA.
async fn passes(
    ctx: Arc<Ctx>,
    vpa_ctx: Arc<vpa::pass::Ctx>,
    period: Duration,
    prompt: Arc<tokio::sync::Notify>,
) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let periodic = tokio::select! {
            _ = tick.tick() => true,
            _ = prompt.notified() => false,
        };
        one_pass(&ctx).await;
        if periodic {
            let span = tracing::info_span!("autoscaler.vpa_pass", shoal.actor = "autoscaler");
            vpa::pass::all(&vpa_ctx).instrument(span).await;
        }
    }
}

/// Evaluates every HPA once (those backing off excepted).
pub async fn one_pass(ctx: &Arc<Ctx>) {
    let hpas = ctx.hpas.list(None, &Selector::everything());
    let live: HashSet<String> = hpas.iter().map(|h| h.metadata.uid.clone()).collect();
    ctx.retain(&live);
    let pods = &ctx.pods;
    ctx.metrics
        .retain_pods(|ns, name| pods.get(ns, name).is_some());
    let started = std::time::Instant::now();
    let span = tracing::info_span!(
        "autoscaler.pass",
        shoal.actor = "autoscaler",
        hpas = hpas.len()
    );
    futures::stream::iter(hpas)
        .filter(|hpa| std::future::ready(!ctx.backing_off(&hpa.metadata.uid)))
        .for_each_concurrent(PASS_CONCURRENCY, |hpa| {
            let ctx = ctx.clone();
            let span = pass::reconcile_span(&span, &hpa);
            async move { pass::reconcile(&ctx, hpa).await }.instrument(span)
        })
        .instrument(span.clone())
        .await;
    shoal_telemetry::metrics()
        .autoscaler
        .pass_seconds
        .observe(started.elapsed().as_secs_f64());
}

/// Feeds the metric store from `shoal.v1.metrics.>`; an external sample prompts a pass, so
/// a target at zero gets its first replica without waiting for the period.
async fn spawn_metrics_feed(
    nats: &async_nats::Client,
    metrics: MetricStore,
    recommender: vpa::Recommender,
    pods: shoal_bus::Informer<Pod>,
    prompt: Arc<tokio::sync::Notify>,
) -> Result<tokio::task::JoinHandle<()>, AutoscalerError> {
    let mut sub =
        nats.subscribe(subjects::METRICS_ALL)
            .await
            .map_err(|e| AutoscalerError::Subscribe {
                subject: subjects::METRICS_ALL.into(),
                detail: e.to_string(),
            })?;
    let _ = nats.flush().await;
    Ok(tokio::spawn(async move {
        while let Some(msg) = sub.next().await {
            if metrics.ingest(&msg.subject, &msg.payload).is_some() {
                prompt.notify_one();
                continue;
            }
            // Every pod sample (not only the latest) goes into the VPA histograms.
            if recommender.has_targets() && !msg.subject.starts_with("shoal.v1.metrics.external.") {
                if let Ok(sample) = codec::from_msgpack::<PodMetrics>(&msg.payload) {
                    if let Some(pod) = pods.get(&sample.namespace, &sample.pod) {
                        recommender.ingest(&sample, &pod.metadata.labels);
                    }
                }
            }
        }
    }))
}

/// Refreshes which pods each VPA's samples come from, leading or not (so a new leader has
/// history), and forgets memory peaks of pods that are gone.
fn spawn_vpa_targets(
    informers: InformerFactory,
    recommender: vpa::Recommender,
    pods: shoal_bus::Informer<Pod>,
    period: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let vpas = informers.get::<VerticalPodAutoscaler>();
        if vpas.wait_synced().await.is_err() {
            return;
        }
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            recommender.set_targets(vpa::targets(&informers, &vpas).await);
            recommender.retain_pods(&pods);
        }
    })
}

/// A new or changed HPA is evaluated at once; the consumers whose lag HPAs read are
/// followed as HPAs come and go.
fn spawn_hpa_watch(
    hpas: &shoal_bus::Informer<HorizontalPodAutoscaler>,
    prompt: Arc<tokio::sync::Notify>,
    mut lag: LagWatchers,
) -> tokio::task::JoinHandle<()> {
    let mut rx = hpas.subscribe();
    let hpas = hpas.clone();
    tokio::spawn(async move {
        let follow = |lag: &mut LagWatchers| {
            let all = hpas.list(None, &Selector::everything());
            lag.follow(&jetstream_lag::referenced(all.iter().map(|h| h.as_ref())));
        };
        // Changes missed while the cache loads are covered by a slow periodic look.
        let mut resync = tokio::time::interval(Duration::from_secs(5));
        loop {
            tokio::select! {
                change = rx.recv() => match change {
                    Ok(change) => {
                        // Our own status writes change the HPA too: only spec changes matter.
                        let spec_changed = change
                            .old
                            .as_ref()
                            .is_none_or(|old| old.spec != change.new.spec);
                        if spec_changed {
                            follow(&mut lag);
                            prompt.notify_one();
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        follow(&mut lag);
                        prompt.notify_one();
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                },
                _ = resync.tick() => follow(&mut lag),
            }
        }
    })
}
