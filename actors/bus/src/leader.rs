//! Lease-based leader election for active/standby actors.
//!
//! A candidate takes the Lease `<namespace>/<name>` when nobody holds it or the holder's
//! renewTime + leaseDurationSeconds has passed, and renews it every `renew_period`. Every write
//! is a CAS on the Lease's resourceVersion through the API, so two candidates can never both
//! believe they took the same lapsed lease: one of them gets Conflict.
//!
//! ```ignore
//! let elector = LeaderElector::new(api, LeaderElectionConfig::new("shoal-system", "controllers", id));
//! let mut leadership = elector.acquire().await;   // resolves once we lead
//! tokio::select! { _ = leadership.lost() => { /* stop working */ }, _ = shutdown => {} }
//! leadership.release().await;                     // hand over at once instead of lapsing
//! ```
//!
//! NOTE: a leader that cannot renew stops considering itself leader after `lease_duration`
//! minus one renew period has passed since its last successful renewal, so it steps down
//! before a standby may take over (assuming clocks that do not drift by more than that).

use std::time::{Duration, Instant, SystemTime};

use bus_schemas::kinds::Lease;
use bus_schemas::meta::Time;
use tokio::sync::watch;

use crate::client::{ApiClient, ApiError};

#[derive(Debug, Clone)]
pub struct LeaderElectionConfig {
    pub namespace: String,
    /// The Lease's name: the controller (or controller manager) being elected.
    pub name: String,
    /// This candidate's identity (host name + a random suffix is a good choice).
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_period: Duration,
    /// How often a standby looks at the lease.
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    /// 15 s leases renewed every 2 s, retried every 2 s.
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        LeaderElectionConfig {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_period: Duration::from_secs(2),
            retry_period: Duration::from_secs(2),
        }
    }
}

fn now() -> Time {
    Time::from(SystemTime::now())
}

fn whole_seconds(d: Duration) -> i32 {
    i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)
}

/// Campaigns for one Lease.
#[derive(Clone)]
pub struct LeaderElector {
    api: ApiClient,
    config: LeaderElectionConfig,
}

/// What one attempt found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// We hold the lease (acquired or renewed).
    Leading,
    /// Someone else holds it and it has not lapsed.
    Standby { holder: String },
}

impl LeaderElector {
    pub fn new(api: ApiClient, config: LeaderElectionConfig) -> Self {
        LeaderElector { api, config }
    }

    pub fn config(&self) -> &LeaderElectionConfig {
        &self.config
    }

    /// One CAS attempt to acquire or renew. Conflict means another candidate wrote first:
    /// reported as `Standby` so the caller simply looks again later.
    pub async fn try_acquire_or_renew(&self) -> Result<Attempt, ApiError> {
        let cfg = &self.config;
        let t = now();
        let current: Option<Lease> = match self.api.get::<Lease>(&cfg.namespace, &cfg.name).await {
            Ok(lease) => Some(lease),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e),
        };
        let Some(mut lease) = current else {
            let mut lease = Lease::default();
            lease.metadata.namespace = cfg.namespace.clone();
            lease.metadata.name = cfg.name.clone();
            lease.spec.holder_identity = Some(cfg.identity.clone());
            lease.spec.lease_duration_seconds = Some(whole_seconds(cfg.lease_duration));
            lease.spec.acquire_time = Some(t);
            lease.spec.renew_time = Some(t);
            lease.spec.lease_transitions = Some(0);
            return match self.api.create(&lease).await {
                Ok(_) => Ok(Attempt::Leading),
                Err(e) if e.is_already_exists() || e.is_conflict() => Ok(Attempt::Standby {
                    holder: String::new(),
                }),
                Err(e) => Err(e),
            };
        };
        let holder = lease.spec.holder_identity.clone().unwrap_or_default();
        let mine = holder == cfg.identity;
        if !mine && !lease.is_available(t) {
            return Ok(Attempt::Standby { holder });
        }
        if !mine {
            lease.spec.holder_identity = Some(cfg.identity.clone());
            lease.spec.acquire_time = Some(t);
            lease.spec.lease_transitions = Some(lease.spec.lease_transitions.unwrap_or(0) + 1);
        }
        lease.spec.lease_duration_seconds = Some(whole_seconds(cfg.lease_duration));
        lease.spec.renew_time = Some(t);
        match self.api.update(&lease).await {
            Ok(_) => Ok(Attempt::Leading),
            Err(e) if e.is_conflict() || e.is_not_found() => Ok(Attempt::Standby { holder }),
            Err(e) => Err(e),
        }
    }

    /// Waits until this candidate leads, then keeps renewing in the background.
    pub async fn acquire(&self) -> Leadership {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Leading) => break,
                Ok(Attempt::Standby { holder }) => {
                    tracing::debug!(lease = %self.config.name, %holder, "standing by");
                }
                Err(e) => {
                    tracing::warn!(lease = %self.config.name, error = %e, "leader election attempt failed");
                }
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
        tracing::info!(lease = %self.config.name, identity = %self.config.identity, "became leader");
        let (tx, rx) = watch::channel(true);
        let elector = self.clone();
        let renewals = tokio::spawn(async move { elector.renew_loop(tx).await });
        Leadership {
            elector: self.clone(),
            leading: rx,
            renewals,
        }
    }

    async fn renew_loop(self, leading: watch::Sender<bool>) {
        let cfg = &self.config;
        let mut last_renewed = Instant::now();
        // Step down a renew period before a standby could take over.
        let give_up = cfg.lease_duration.saturating_sub(cfg.renew_period);
        loop {
            tokio::time::sleep(cfg.renew_period).await;
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Leading) => last_renewed = Instant::now(),
                Ok(Attempt::Standby { holder }) => {
                    tracing::warn!(lease = %cfg.name, %holder, "lost the lease to another candidate");
                    leading.send_replace(false);
                    return;
                }
                Err(e) => {
                    tracing::warn!(lease = %cfg.name, error = %e, "lease renewal failed");
                    if last_renewed.elapsed() >= give_up {
                        leading.send_replace(false);
                        return;
                    }
                }
            }
        }
    }
}

/// Held while this candidate leads. Dropping it stops renewals without releasing the
/// lease (a standby takes over once it lapses); [`Leadership::release`] hands over at once.
pub struct Leadership {
    elector: LeaderElector,
    leading: watch::Receiver<bool>,
    renewals: tokio::task::JoinHandle<()>,
}

impl Leadership {
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// Resolves once leadership is lost (a renewal failed for too long, or another
    /// candidate holds the lease).
    pub async fn lost(&mut self) {
        while *self.leading.borrow_and_update() {
            if self.leading.changed().await.is_err() {
                return;
            }
        }
    }

    /// A receiver that turns `false` when leadership is lost.
    pub fn watch(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// Stops renewing and clears the holder so a standby can take over immediately.
    pub async fn release(self) {
        self.renewals.abort();
        let cfg = &self.elector.config;
        for _ in 0..3 {
            let Ok(mut lease) = self
                .elector
                .api
                .get::<Lease>(&cfg.namespace, &cfg.name)
                .await
            else {
                return;
            };
            if lease.spec.holder_identity.as_deref() != Some(cfg.identity.as_str()) {
                return;
            }
            lease.spec.holder_identity = None;
            lease.spec.renew_time = None;
            match self.elector.api.update(&lease).await {
                Err(e) if e.is_conflict() => continue,
                _ => return,
            }
        }
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.renewals.abort();
    }
}
