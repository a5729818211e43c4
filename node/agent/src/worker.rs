//! One worker per pod bound to this node: a level-triggered loop that makes the runtime match
//! the pod (sandbox, images, init containers in order, app containers, restarts with back-off,
//! probes) and reports the status it observes. It resumes from what the runtime holds, so an
//! agent restart re-adopts running containers instead of restarting them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bus_schemas::kinds::container::Container;
use bus_schemas::kinds::Pod;
use chrono::Utc;
use shoal_bus::Informer;
use shoal_node::{ContainerInfo, ContainerState, SandboxInfo};
use shoal_telemetry::work::Traced;
use tokio::sync::watch;
use tracing::Instrument;

use crate::agent::AgentCtx;
use crate::probes::{ProbeKind, ProbeTracker};
use crate::status::{self, time, Observed, ObservedState, Snapshot, Terminated};
use crate::{hooks, sidecars, spec, termination, traces};

/// How often a hollow pod whose containers all run is looked at again. Hollow containers
/// change only when the agent tells them to, so polling them every second only burns the
/// CPU a scale benchmark needs for the control plane (150,000 hollow pods polled each
/// second took a core). Pod changes still wake the worker at once.
const HOLLOW_SETTLED_SYNC: Duration = Duration::from_secs(30);

/// The runtime's view of this pod when the worker starts (for re-adoption).
#[derive(Default)]
pub struct Adopted {
    pub sandbox: Option<SandboxInfo>,
    pub containers: Vec<ContainerInfo>,
}

struct Track {
    container: Container,
    id: Option<String>,
    observed: Observed,
    backoff_until: Option<Instant>,
    backoff_exp: u32,
    probes: ProbeTracker,
    /// A liveness or startup failure asked for this instance to be restarted.
    kill_requested: bool,
    /// Ships this instance's log lines to the bus while it lives.
    shipper: Option<crate::telemetry::LogShipper>,
    /// The termination message read for an exited instance (its id, the message): read
    /// once, not on every pass.
    message_of: Option<(String, String)>,
}

impl Track {
    fn new(container: &Container, restart_count: i32) -> Track {
        Track {
            container: container.clone(),
            id: None,
            observed: Observed {
                name: container.name.clone(),
                image: container.image.clone(),
                restart_count,
                sidecar: container.is_sidecar(),
                ..Default::default()
            },
            backoff_until: None,
            backoff_exp: 0,
            probes: ProbeTracker::new(container),
            kill_requested: false,
            shipper: None,
            message_of: None,
        }
    }
}

pub struct Worker {
    ctx: Arc<AgentCtx>,
    sandbox: Option<SandboxInfo>,
    init: Vec<Track>,
    app: Vec<Track>,
    start_time: Option<bus_schemas::Time>,
    failed: Option<(String, String)>,
    last_reported: Option<bus_schemas::kinds::pod::PodStatus>,
    adopted: HashMap<String, ContainerInfo>,
    images_ready: bool,
    /// The pod cache, for the trace that last changed the pod.
    traces_from: Option<Informer<Pod>>,
    first_seen: Instant,
    /// This worker started a container (so its start time is a pod start, not a re-adoption).
    started_any: bool,
    /// All app containers ran (and were ready) once: routine work is not traced past it.
    start_recorded: bool,
    startup_over: bool,
    /// Why the pod's configuration volumes could not be written on the last pass.
    config_volumes: Result<(), spec::ConfigError>,
    /// The main containers finished for good and the sidecars were stopped: not restarted.
    sidecars_stopped: bool,
}

impl Worker {
    pub fn new(ctx: Arc<AgentCtx>, pod: &Pod, adopted: Adopted) -> Worker {
        let restarts = |statuses: &[bus_schemas::kinds::pod::ContainerStatus], name: &str| {
            statuses
                .iter()
                .find(|s| s.name == name)
                .map(|s| s.restart_count)
                .unwrap_or(0)
        };
        let init = pod
            .spec
            .init_containers
            .iter()
            .map(|c| Track::new(c, restarts(&pod.status.init_container_statuses, &c.name)))
            .collect();
        let app = pod
            .spec
            .containers
            .iter()
            .map(|c| Track::new(c, restarts(&pod.status.container_statuses, &c.name)))
            .collect();
        let adopted_containers = adopted
            .containers
            .into_iter()
            .map(|c| (c.name.clone(), c))
            .collect();
        Worker {
            ctx,
            sandbox: adopted.sandbox,
            init,
            app,
            start_time: pod.status.start_time,
            failed: None,
            last_reported: None,
            adopted: adopted_containers,
            images_ready: false,
            traces_from: None,
            first_seen: Instant::now(),
            started_any: false,
            start_recorded: false,
            startup_over: false,
            config_volumes: Ok(()),
            sidecars_stopped: false,
        }
    }

    /// Runs until the pod is gone from this node.
    pub async fn run(mut self, mut pod_rx: watch::Receiver<Option<Arc<Pod>>>) {
        loop {
            let pod = pod_rx.borrow_and_update().clone();
            let Some(pod) = pod else {
                self.stop_containers(None, Duration::from_secs(2)).await;
                self.remove_sandbox().await;
                return;
            };
            if pod.metadata.deletion_timestamp.is_some() {
                self.terminate(&pod, &mut pod_rx).await;
                self.confirm_deleted(&pod, &mut pod_rx).await;
                return;
            }
            let traced = if self.startup_over {
                Traced::none()
            } else {
                let traceparent = self
                    .traces_from
                    .as_ref()
                    .and_then(|pods| pods.traceparent(&pod.metadata.namespace, &pod.metadata.name));
                traces::sync_span(&pod, &self.ctx.config.node_name, traceparent.as_deref())
            };
            traced.run(self.sync(&pod)).await;
            traced.run(self.report(&pod)).await;
            self.note_startup();
            let wait = self.next_wakeup();
            tokio::select! {
                // The agent is stopping: leave the containers running for the next agent to
                // re-adopt. Only an explicit "pod gone" (None) tears a pod down.
                changed = pod_rx.changed() => if changed.is_err() {
                    return;
                },
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Confirms the deletion until it lands, backing off, or until the pod leaves this
    /// node's cache (removed by someone else) or the agent stops.
    async fn confirm_deleted(&self, pod: &Pod, pod_rx: &mut watch::Receiver<Option<Arc<Pod>>>) {
        let mut backoff = Duration::from_millis(200);
        while !self.ctx.confirm_deleted(pod).await {
            tokio::select! {
                changed = pod_rx.changed() => {
                    if changed.is_err() || pod_rx.borrow_and_update().is_none() {
                        return;
                    }
                }
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }

    /// Continues the trace that last changed the pod (from the pod cache) while it starts.
    pub fn trace_from(mut self, pods: Informer<Pod>) -> Worker {
        self.traces_from = Some(pods);
        self
    }

    fn note_startup(&mut self) {
        let running = !self.app.is_empty()
            && self
                .app
                .iter()
                .all(|t| matches!(t.observed.state, ObservedState::Running { .. }));
        if running && self.started_any && !self.start_recorded {
            self.start_recorded = true;
            traces::pod_started(self.first_seen.elapsed());
        }
        if running && self.app.iter().all(|t| t.observed.ready) {
            self.startup_over = true;
        }
    }

    fn next_wakeup(&self) -> Duration {
        let now = Instant::now();
        let mut wait = if self.ctx.backend.is_hollow() && self.settled() {
            HOLLOW_SETTLED_SYNC
        } else {
            self.ctx.config.sync_period
        };
        for t in self.init.iter().chain(&self.app) {
            if let Some(until) = t.backoff_until {
                wait = wait.min(until.saturating_duration_since(now));
            }
            if let Some(next) = t.probes.next_due() {
                wait = wait.min(next.saturating_duration_since(now));
            }
        }
        wait.max(Duration::from_millis(20))
    }

    /// Every app container runs and the status saying so has landed.
    fn settled(&self) -> bool {
        self.last_reported.is_some()
            && self
                .app
                .iter()
                .all(|t| matches!(t.observed.state, ObservedState::Running { .. }))
    }

    async fn sync(&mut self, pod: &Pod) {
        if self.failed.is_some() || is_finished(pod, &self.app) {
            return;
        }
        if self.start_time.is_none() {
            self.start_time = Some(Utc::now());
        }
        if !self.images_ready && !self.pull_images(pod).await {
            return;
        }
        if self.sandbox.is_none() {
            let sandbox_spec = spec::sandbox_spec(pod, &self.ctx.config.pod_defaults);
            let started = Instant::now();
            let made = self
                .ctx
                .call(move |rt| rt.create_sandbox(&sandbox_spec))
                .await;
            traces::sandbox_made(started, &made);
            match made {
                Ok(sandbox) => self.sandbox = Some(sandbox),
                Err(e) => {
                    for t in self.init.iter_mut().chain(self.app.iter_mut()) {
                        t.observed.state = ObservedState::Waiting {
                            reason: "CreatePodSandboxError".into(),
                            message: e.to_string(),
                        };
                    }
                    return;
                }
            }
        }
        let sandbox = self.sandbox.clone().expect("sandbox just ensured");
        // Every pass: a changed ConfigMap or Secret reaches running containers this way.
        self.config_volumes = crate::config::volumes::refresh(&self.ctx, pod, &sandbox).await;
        // Init containers: one at a time, in order, each to successful completion; a sidecar
        // among them opens the way to the next once it has started. Once the app containers
        // began (this agent or a previous one started them), nothing holds them back again.
        let apps_began = self
            .app
            .iter()
            .any(|t| t.id.is_some() || self.adopted.contains_key(&t.container.name));
        for i in 0..self.init.len() {
            self.observe(i, true).await;
            self.ensure_shipper(pod, &sandbox, i, true, false);
            let t = &self.init[i];
            if t.container.is_sidecar() {
                if !self.sidecars_stopped {
                    self.drive(pod, &sandbox, i, true).await;
                }
                let t = &self.init[i];
                let started = matches!(t.observed.state, ObservedState::Running { .. })
                    && t.probes.is_started();
                if started || apps_began || self.sidecars_stopped {
                    continue;
                }
                // Its startup probe decides when the next container may start.
                self.run_probes(&sandbox).await;
                return;
            }
            let done =
                matches!(&t.observed.state, ObservedState::Terminated(t) if t.exit_code == 0);
            if done || apps_began {
                continue;
            }
            self.drive(pod, &sandbox, i, true).await;
            self.run_probes(&sandbox).await;
            return;
        }
        for i in 0..self.app.len() {
            self.observe(i, false).await;
            self.ensure_shipper(pod, &sandbox, i, false, false);
            self.drive(pod, &sandbox, i, false).await;
        }
        self.run_probes(&sandbox).await;
        self.stop_sidecars_when_done(pod, &sandbox).await;
    }

    /// A pod whose main containers finished for good (a Job's) stops its sidecars, in reverse
    /// order, each with the pod's grace period, so that it can complete.
    async fn stop_sidecars_when_done(&mut self, pod: &Pod, sandbox: &SandboxInfo) {
        if self.sidecars_stopped || !self.init.iter().any(|t| t.container.is_sidecar()) {
            return;
        }
        let app: Vec<Observed> = self.app.iter().map(|t| t.observed.clone()).collect();
        if !sidecars::main_containers_done(&pod.spec.restart_policy, &app) {
            return;
        }
        self.sidecars_stopped = true;
        let grace = grace_period(pod);
        for i in (0..self.init.len()).rev() {
            let t = &self.init[i];
            if !t.container.is_sidecar() {
                continue;
            }
            if let Some(id) = t.id.clone() {
                let container = t.container.clone();
                hooks::stop(&self.ctx, Some(pod), Some(sandbox), &id, &container, grace).await;
            }
            self.observe(i, true).await;
        }
    }

    async fn pull_images(&mut self, pod: &Pod) -> bool {
        let mut all = true;
        let registry = self.ctx.registry.clone();
        for t in self.init.iter_mut().chain(self.app.iter_mut()) {
            if t.backoff_until.is_some_and(|u| Instant::now() < u) {
                all = false;
                continue;
            }
            let always = t.container.image_pull_policy == "Always";
            let looked = Instant::now();
            let pulled = match self.ctx.backend.present_image(&t.container.image, always) {
                Some(info) => {
                    traces::image_present(&t.container.image, looked);
                    Ok(info)
                }
                None => {
                    let span = traces::image_span(&t.container.image);
                    let pulled = self
                        .ctx
                        .backend
                        .pull_image(&registry, &t.container.image)
                        .instrument(span.clone())
                        .await;
                    traces::outcome(&span, &pulled);
                    pulled
                }
            };
            match pulled {
                Ok(info) => {
                    if let Some(info) = info {
                        t.observed.image_id =
                            format!("{}@{}", info.reference, info.manifest_digest);
                    }
                    if matches!(&t.observed.state, ObservedState::Waiting { reason, .. } if reason.contains("ImagePull"))
                    {
                        t.observed.state = ObservedState::NotCreated;
                        t.backoff_until = None;
                        t.backoff_exp = 0;
                    }
                }
                Err(e) => {
                    all = false;
                    let first = t.backoff_exp == 0;
                    t.observed.state = ObservedState::Waiting {
                        reason: if first {
                            "ErrImagePull"
                        } else {
                            "ImagePullBackOff"
                        }
                        .into(),
                        message: format!("pulling {}: {e}", t.container.image),
                    };
                    let delay = self.ctx.config.backoff(t.backoff_exp);
                    t.backoff_exp += 1;
                    t.backoff_until = Some(Instant::now() + delay);
                }
            }
        }
        let _ = pod;
        self.images_ready = all;
        all
    }

    fn shipper(
        &self,
        pod: &Pod,
        sandbox: &SandboxInfo,
        name: &str,
        id: &str,
        from_start: bool,
    ) -> Option<crate::telemetry::LogShipper> {
        let reader = self.ctx.backend.logs(sandbox, name)?;
        let subject = bus_schemas::subjects::logs(
            &self.ctx.config.node_name,
            &pod.metadata.namespace,
            &pod.metadata.name,
            name,
        );
        Some(crate::telemetry::ship_logs(
            self.ctx.nats_client.clone(),
            reader,
            subject,
            id.to_string(),
            from_start,
        ))
    }

    fn track(&mut self, i: usize, init: bool) -> &mut Track {
        if init {
            &mut self.init[i]
        } else {
            &mut self.app[i]
        }
    }

    /// Starts shipping logs of an adopted instance (from now on: earlier lines were shipped by
    /// the previous agent).
    fn ensure_shipper(
        &mut self,
        pod: &Pod,
        sandbox: &SandboxInfo,
        i: usize,
        init: bool,
        from_start: bool,
    ) {
        let t = if init { &self.init[i] } else { &self.app[i] };
        if t.shipper.is_some() {
            return;
        }
        let Some(id) = t.id.clone() else { return };
        let name = t.container.name.clone();
        let shipper = self.shipper(pod, sandbox, &name, &id, from_start);
        self.track(i, init).shipper = shipper;
    }

    /// Refreshes one container's observed state from the runtime.
    async fn observe(&mut self, i: usize, init: bool) {
        let name = self.track(i, init).container.name.clone();
        if self.track(i, init).id.is_none() {
            if let Some(info) = self.adopted.remove(&name) {
                let t = self.track(i, init);
                t.id = Some(info.id.clone());
                t.observed.container_id = format!("shoal://{}", info.id);
                t.observed.started = true;
            }
        }
        let Some(id) = self.track(i, init).id.clone() else {
            return;
        };
        let queried = id.clone();
        let state = match self.ctx.call(move |rt| rt.container_state(&queried)).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(container = %name, error = %e, "container state unreadable; recreating");
                self.track(i, init).id = None;
                return;
            }
        };
        let t = self.track(i, init);
        match state {
            ContainerState::Created => {}
            ContainerState::Running { started_at, .. } => {
                if !matches!(t.observed.state, ObservedState::Running { .. }) {
                    t.probes.container_started(Instant::now());
                }
                t.observed.state = ObservedState::Running {
                    started_at: time(started_at),
                };
            }
            ContainerState::Exited {
                exit_code,
                signal,
                reason,
                started_at,
                finished_at,
            } => {
                let message = match &t.message_of {
                    Some((of, message)) if *of == id => message.clone(),
                    _ => {
                        let container = t.container.clone();
                        let sandbox = self.sandbox.clone();
                        let message = termination::message(
                            &self.ctx,
                            sandbox.as_ref(),
                            &id,
                            &container,
                            exit_code,
                        )
                        .await;
                        let t = self.track(i, init);
                        t.message_of = Some((id.clone(), message.clone()));
                        message
                    }
                };
                let t = self.track(i, init);
                let terminated = Terminated {
                    exit_code,
                    signal: signal.unwrap_or(0),
                    reason: reason.as_str().to_string(),
                    message,
                    started_at: Some(time(started_at)),
                    finished_at: Some(time(finished_at)),
                    container_id: t.observed.container_id.clone(),
                };
                if t.observed.state != ObservedState::Terminated(terminated.clone()) {
                    t.probes.container_stopped();
                    t.observed.ready = false;
                }
                t.observed.state = ObservedState::Terminated(terminated);
            }
        }
    }

    /// Starts or restarts one container as the restart policy says.
    async fn drive(&mut self, pod: &Pod, sandbox: &SandboxInfo, i: usize, init: bool) {
        let policy =
            sidecars::restart_policy(pod, &self.track(i, init).container, init).to_string();
        let now = Instant::now();
        let grace = grace_period(pod);
        let ctx = self.ctx.clone();
        let config_backoff = move |exp| ctx.config.backoff(exp);
        let t = self.track(i, init);
        if t.kill_requested {
            if let Some(id) = t.id.clone() {
                t.kill_requested = false;
                let container = t.container.clone();
                hooks::stop(&self.ctx, Some(pod), Some(sandbox), &id, &container, grace).await;
                self.observe(i, init).await;
            }
        }
        let t = self.track(i, init);
        let should_start = match &t.observed.state {
            ObservedState::Running { .. } => false,
            ObservedState::Terminated(term) => match policy.as_str() {
                "Always" => true,
                "OnFailure" => term.exit_code != 0,
                _ => false,
            },
            _ => t.id.is_none(),
        };
        if !should_start {
            if init && policy == "Never" {
                if let ObservedState::Terminated(term) = &t.observed.state {
                    if term.exit_code != 0 {
                        let msg = format!(
                            "init container {} failed with exit code {}",
                            t.container.name, term.exit_code
                        );
                        self.failed = Some(("InitContainerFailed".into(), msg));
                    }
                }
            }
            return;
        }
        if let ObservedState::Terminated(term) = t.observed.state.clone() {
            // A restart: back off exponentially, showing CrashLoopBackOff meanwhile. The
            // runtime keeps reporting the exited instance, so the waiting state is re-asserted
            // on every pass until the back-off ends.
            let until = match t.backoff_until {
                Some(until) => until,
                None => {
                    let delay = config_backoff(t.backoff_exp);
                    t.backoff_exp += 1;
                    t.backoff_until = Some(now + delay);
                    now + delay
                }
            };
            t.observed.last_terminated = Some(term);
            if now < until {
                t.observed.state = ObservedState::Waiting {
                    reason: "CrashLoopBackOff".into(),
                    message: format!(
                        "back-off {}s restarting failed container={} pod={}",
                        until.saturating_duration_since(now).as_secs() + 1,
                        t.container.name,
                        pod.metadata.name
                    ),
                };
                return;
            }
        } else if let ObservedState::Waiting { .. } = &t.observed.state {
            if t.backoff_until.is_some_and(|u| now < u) {
                return;
            }
        }
        let restarting = t.id.is_some() || t.observed.last_terminated.is_some();
        t.shipper = None;
        if let Some(old) = t.id.take() {
            let _ = self.ctx.call(move |rt| rt.remove_container(&old)).await;
        }
        let container = self.track(i, init).container.clone();
        let volumes = self.config_volumes.clone();
        let prepared =
            crate::config::volumes::prepare(&self.ctx, pod, &container, sandbox, volumes).await;
        let t = self.track(i, init);
        let container_spec = match prepared {
            Ok(mut s) => {
                s.termination_message_path = termination::path(&t.container);
                s
            }
            Err(e) => {
                let waiting = ObservedState::Waiting {
                    reason: "CreateContainerConfigError".into(),
                    message: e.0.clone(),
                };
                // Retried every pass (the source may appear any time); recorded once per
                // cause, not once a second.
                let news = t.observed.state != waiting;
                t.observed.state = waiting;
                if news {
                    let message = format!("Error: {}", e.0);
                    self.ctx.pod_event(pod, "Warning", "Failed", &message).await;
                }
                return;
            }
        };
        let sandbox_for_start = sandbox.clone();
        let span = traces::container_span(&t.container.name, restarting);
        let result = self
            .ctx
            .call(move |rt| rt.start_container(&sandbox_for_start, &container_spec))
            .instrument(span.clone())
            .await;
        traces::outcome(&span, &result);
        self.started_any = true;
        let t = self.track(i, init);
        match result {
            Ok(info) => {
                if restarting {
                    t.observed.restart_count += 1;
                    traces::container_restarted();
                }
                t.id = Some(info.id.clone());
                t.observed.container_id = format!("shoal://{}", info.id);
                if let Err(message) = self.post_start(pod, sandbox, i, init, &info.id).await {
                    let t = self.track(i, init);
                    t.observed.state = ObservedState::Waiting {
                        reason: "PostStartHookError".into(),
                        message,
                    };
                    return;
                }
                let t = self.track(i, init);
                t.observed.state = ObservedState::Running {
                    started_at: time(info.started_at),
                };
                let name = t.container.name.clone();
                let shipper = self.shipper(pod, sandbox, &name, &info.id, true);
                let t = self.track(i, init);
                t.shipper = shipper;
                t.observed.started = true;
                t.backoff_until = None;
                t.probes.container_started(Instant::now());
            }
            Err(e) => {
                let delay = config_backoff(t.backoff_exp);
                t.backoff_exp += 1;
                t.backoff_until = Some(now + delay);
                // A spec the runtime refuses (runAsNonRoot with a root image, a missing
                // seccomp profile) is the pod's configuration, said in its own words.
                let message = match &e {
                    shoal_node::Error::InvalidSpec(m) => m.clone(),
                    e => e.to_string(),
                };
                let waiting = ObservedState::Waiting {
                    reason: e.k8s_reason().into(),
                    message: message.clone(),
                };
                let news = t.observed.state != waiting;
                t.observed.state = waiting;
                // Like the agent's own configuration errors, told once per cause.
                if news && e.k8s_reason() == "CreateContainerConfigError" {
                    let message = format!("Error: {message}");
                    self.ctx.pod_event(pod, "Warning", "Failed", &message).await;
                }
            }
        }
        // A container that stays up for a while earns its back-off back.
        let t = self.track(i, init);
        if matches!(t.observed.state, ObservedState::Running { .. }) && t.backoff_exp > 0 {
            if let ObservedState::Running { started_at } = t.observed.state {
                if Utc::now() - started_at > chrono::Duration::seconds(60) {
                    t.backoff_exp = 0;
                }
            }
        }
    }

    /// Runs the container's postStart hook, if it has one; a failure kills the container
    /// (its restart policy then decides) and is reported as a `FailedPostStartHook` Event.
    async fn post_start(
        &mut self,
        pod: &Pod,
        sandbox: &SandboxInfo,
        i: usize,
        init: bool,
        id: &str,
    ) -> Result<(), String> {
        let container = self.track(i, init).container.clone();
        let Some(handler) = container
            .lifecycle
            .as_ref()
            .and_then(|l| l.post_start.as_ref())
        else {
            return Ok(());
        };
        let outcome = hooks::run(
            &self.ctx,
            sandbox,
            id,
            &container,
            handler,
            hooks::POST_START_TIMEOUT,
        )
        .await;
        let Err(failure) = outcome else {
            return Ok(());
        };
        let message = format!(
            "PostStartHook failed for container {:?}: {failure}",
            container.name
        );
        tracing::info!(pod = %pod.metadata.name, %message, "killing the container");
        self.ctx
            .pod_event(pod, "Warning", "FailedPostStartHook", &message)
            .await;
        let (id, grace) = (id.to_string(), grace_period(pod));
        if let Err(e) = self.ctx.call(move |rt| rt.stop_container(&id, grace)).await {
            tracing::warn!(container = %container.name, error = %e, "killing after a failed postStart hook");
        }
        Err(message)
    }

    /// Probes of the running app containers and sidecars.
    async fn run_probes(&mut self, sandbox: &SandboxInfo) {
        let now = Instant::now();
        let sidecars = (0..self.init.len())
            .filter(|&i| self.init[i].container.is_sidecar())
            .map(|i| (i, true));
        let probed: Vec<(usize, bool)> = sidecars
            .chain((0..self.app.len()).map(|i| (i, false)))
            .collect();
        for (i, init) in probed {
            let running = matches!(
                self.track(i, init).observed.state,
                ObservedState::Running { .. }
            );
            if !running {
                self.track(i, init).observed.ready = false;
                continue;
            }
            while let Some(kind) = self.track(i, init).probes.due(now) {
                let probe = self.track(i, init).probes.probe(kind).cloned();
                let Some(probe) = probe else { break };
                let id = self.track(i, init).id.clone().unwrap_or_default();
                let container = self.track(i, init).container.clone();
                let span = traces::probe_span(kind, &container.name);
                let ok = crate::probes::run(&self.ctx, sandbox, &id, &container, &probe)
                    .instrument(span.clone())
                    .await;
                let t = self.track(i, init);
                let verdict = t.probes.record(kind, ok, Instant::now());
                traces::probe_result(&span, kind, ok, t.probes.is_ready());
                if verdict.restart {
                    t.kill_requested = true;
                }
                if kind == ProbeKind::Liveness && verdict.restart {
                    tracing::info!(container = %container.name, "liveness probe failed; restarting");
                }
            }
            let t = self.track(i, init);
            t.observed.ready = t.probes.is_ready();
            t.observed.started = t.probes.is_started();
        }
        if self.init.iter().chain(&self.app).any(|t| t.kill_requested) {
            self.ctx.poke();
        }
    }

    async fn report(&mut self, pod: &Pod) {
        let init: Vec<Observed> = self.init.iter().map(|t| t.observed.clone()).collect();
        let app: Vec<Observed> = self.app.iter().map(|t| t.observed.clone()).collect();
        let snapshot = Snapshot {
            pod,
            init: &init,
            app: &app,
            pod_ip: self
                .sandbox
                .as_ref()
                .map(|s| s.ip.to_string())
                .unwrap_or_default(),
            host_ip: self.ctx.config.host_ip.clone(),
            start_time: self.start_time,
            failed: self.failed.clone(),
            now: Utc::now(),
        };
        let status = status::build(&snapshot);
        if self.last_reported.as_ref() == Some(&status) || pod.status == status {
            self.last_reported = Some(status);
            return;
        }
        if self.ctx.report_pod_status(pod, status.clone()).await {
            self.last_reported = Some(status);
        }
    }

    /// Tears a deleted pod down within its deletion's grace period, or sooner when the
    /// deletion is shortened meanwhile: a second delete with a shorter grace period, or the
    /// object removed outright (`shoal delete --force`). An operator forcing out a pod whose
    /// shutdown hangs expects its containers gone, not running on for the rest of the grace
    /// it started with. The stop in progress waits in blocking runtime calls, so it is not
    /// cancelled but overtaken: the containers are killed beside it, which ends its waits.
    async fn terminate(&mut self, pod: &Pod, pod_rx: &mut watch::Receiver<Option<Arc<Pod>>>) {
        let grace = deletion_grace(pod);
        let ids: Vec<String> = self
            .init
            .iter()
            .chain(&self.app)
            .filter_map(|t| t.id.clone())
            .chain(self.adopted.values().map(|c| c.id.clone()))
            .collect();
        let ctx = self.ctx.clone();
        let name = pod.metadata.name.clone();
        tokio::select! {
            _ = self.stop_containers(Some(pod), grace) => {}
            _ = kill_when_cut_short(&ctx, &name, ids, grace, pod_rx) => {}
        }
        self.remove_sandbox().await;
    }

    /// Stops every container: the app containers together, then the sidecars one by one in
    /// reverse order, all within one grace period. Each runs its preStop hook first; what
    /// the hook takes comes out of its grace.
    async fn stop_containers(&mut self, pod: Option<&Pod>, grace: Duration) {
        let deadline = Instant::now() + grace;
        let ctx = self.ctx.clone();
        let sandbox = self.sandbox.clone();
        let stop = |id: String, container: Container| {
            let (ctx, sandbox) = (ctx.clone(), sandbox.clone());
            async move {
                let grace = deadline.saturating_duration_since(Instant::now());
                hooks::stop(&ctx, pod, sandbox.as_ref(), &id, &container, grace).await;
            }
        };
        let main = self
            .app
            .iter()
            .chain(self.init.iter().filter(|t| !t.container.is_sidecar()))
            .filter_map(|t| Some(stop(t.id.clone()?, t.container.clone())));
        futures::future::join_all(main).await;
        for t in self.init.iter().rev().filter(|t| t.container.is_sidecar()) {
            if let Some(id) = t.id.clone() {
                stop(id, t.container.clone()).await;
            }
        }
        let adopted = self
            .adopted
            .drain()
            .map(|(_, c)| self.ctx.call(move |rt| rt.stop_container(&c.id, grace)));
        futures::future::join_all(adopted).await;
    }

    /// Once every container has stopped: ends the log shippers and removes the sandbox.
    async fn remove_sandbox(&mut self) {
        // Only now: what a container writes while it stops (its SIGTERM handler, what its
        // preStop hook set off) is the log an operator wants most when a shutdown
        // misbehaves. A stopped shipper sends what is left in the file, then ends.
        for t in self.init.iter_mut().chain(self.app.iter_mut()) {
            t.shipper = None;
        }
        if let Some(sandbox) = self.sandbox.take() {
            let id = sandbox.id.clone();
            if let Err(e) = self.ctx.call(move |rt| rt.remove_sandbox(&id)).await {
                tracing::warn!(sandbox = %sandbox.id, error = %e, "removing sandbox failed; the orphan sweep will retry");
            }
        }
    }
}

/// The grace period a deletion gave the pod.
fn deletion_grace(pod: &Pod) -> Duration {
    let seconds = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
    Duration::from_secs(seconds.max(0) as u64)
}

/// Waits while a termination runs with the `grace` it started with; once the pod's deletion
/// is shortened (a shorter grace period, or the pod removed), waits out what is left of the
/// shorter one and kills every container. Never returns otherwise, so the stop in progress
/// finishes first.
async fn kill_when_cut_short(
    ctx: &Arc<AgentCtx>,
    pod: &str,
    ids: Vec<String>,
    grace: Duration,
    pod_rx: &mut watch::Receiver<Option<Arc<Pod>>>,
) {
    let started = tokio::time::Instant::now();
    let mut cut_to: Option<tokio::time::Instant> = None;
    loop {
        let until_cut = async {
            match cut_to {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = pod_rx.changed() => {
                // The agent is stopping: the stop in progress is left as it is.
                if changed.is_err() {
                    return std::future::pending().await;
                }
                let shorter = match pod_rx.borrow_and_update().as_deref() {
                    None => Duration::ZERO,
                    Some(p) => deletion_grace(p),
                };
                let now = tokio::time::Instant::now();
                if now + shorter < cut_to.unwrap_or(started + grace) {
                    tracing::info!(%pod, grace_seconds = shorter.as_secs(), "termination cut short");
                    cut_to = Some(now + shorter);
                }
            }
            _ = until_cut => break,
        }
    }
    let kills = ids
        .into_iter()
        .map(|id| ctx.call(move |rt| rt.stop_container(&id, Duration::ZERO)));
    for outcome in futures::future::join_all(kills).await {
        if let Err(e) = outcome {
            if !e.is_not_found() {
                tracing::warn!(%pod, error = %e, "killing a container of a pod whose termination was cut short");
            }
        }
    }
}

/// The pod's terminationGracePeriodSeconds.
fn grace_period(pod: &Pod) -> Duration {
    Duration::from_secs(
        pod.spec
            .termination_grace_period_seconds
            .unwrap_or(bus_schemas::kinds::pod_spec::DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS)
            .max(0) as u64,
    )
}

/// A pod that reached Succeeded or Failed is never run again.
fn is_finished(pod: &Pod, _app: &[Track]) -> bool {
    matches!(pod.status.phase.as_str(), "Succeeded" | "Failed")
}
