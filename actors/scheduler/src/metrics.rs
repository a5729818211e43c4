//! Counters a scheduler reports: cheap atomics shared with whoever wants to read them (tests,
//! a metrics endpoint later), and logged periodically.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct SchedulerMetrics {
    /// Pods bound.
    pub scheduled: AtomicU64,
    /// Lost optimistic-concurrency races: an allocation record or a pod changed under us.
    pub conflicts: AtomicU64,
    /// Attempts that found no feasible node.
    pub unschedulable: AtomicU64,
    /// Preemptions started (each may evict several victims).
    pub preemptions: AtomicU64,
    /// Scheduling attempts (decisions made).
    pub attempts: AtomicU64,
}

/// A point-in-time copy of the counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    pub scheduled: u64,
    pub conflicts: u64,
    pub unschedulable: u64,
    pub preemptions: u64,
    pub attempts: u64,
}

impl SchedulerMetrics {
    pub fn snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            scheduled: self.scheduled.load(Ordering::Relaxed),
            conflicts: self.conflicts.load(Ordering::Relaxed),
            unschedulable: self.unschedulable.load(Ordering::Relaxed),
            preemptions: self.preemptions.load(Ordering::Relaxed),
            attempts: self.attempts.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
