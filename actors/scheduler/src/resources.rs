//! Resource vectors as the scheduler counts them: integers, so sums and fit checks are exact
//! and cheap (no Quantity arithmetic in the hot path).

use std::collections::BTreeMap;

use bus_schemas::quantity::Quantity;

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const PODS: &str = "pods";

/// What kube-scheduler assumes a pod without requests uses, for scoring only (so that
/// best-effort pods still spread instead of piling onto one node).
pub const DEFAULT_MILLI_CPU: i64 = 100;
pub const DEFAULT_MEMORY: i64 = 200 * 1024 * 1024;

/// Requests or allocatable amounts: cpu in millicores, memory in bytes, pods as a count, and
/// any other resource (ephemeral-storage, extended resources) in milli-units, sorted by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    pub milli_cpu: i64,
    pub memory: i64,
    pub pods: i64,
    pub other: Vec<(String, i64)>,
}

fn clamp(v: i128) -> i64 {
    v.clamp(0, i128::from(i64::MAX)) as i64
}

impl Resources {
    /// From a quantity map (a node's allocatable or a pod's summed requests). Negative values
    /// count as zero: bad data must not make room appear.
    pub fn from_map(map: &BTreeMap<String, Quantity>) -> Resources {
        let mut r = Resources::default();
        for (name, q) in map {
            match name.as_str() {
                CPU => r.milli_cpu = clamp(q.milli_value()),
                MEMORY => r.memory = clamp(q.value()),
                PODS => r.pods = clamp(q.value()),
                _ => r.other.push((name.clone(), clamp(q.milli_value()))),
            }
        }
        r
    }

    /// From the scheduler's integer map (the allocation ledger's encoding).
    pub fn from_ints(map: &BTreeMap<String, i64>) -> Resources {
        let mut r = Resources::default();
        for (name, v) in map {
            let v = (*v).max(0);
            match name.as_str() {
                CPU => r.milli_cpu = v,
                MEMORY => r.memory = v,
                PODS => r.pods = v,
                _ => r.other.push((name.clone(), v)),
            }
        }
        r
    }

    pub fn to_ints(&self) -> BTreeMap<String, i64> {
        let mut map = BTreeMap::new();
        for (name, v) in [
            (CPU, self.milli_cpu),
            (MEMORY, self.memory),
            (PODS, self.pods),
        ] {
            if v != 0 {
                map.insert(name.to_string(), v);
            }
        }
        for (name, v) in &self.other {
            map.insert(name.clone(), *v);
        }
        map
    }

    /// A pod's request: its summed container requests (see `Pod::requests_total`) plus one pod.
    pub fn of_pod(pod: &bus_schemas::kinds::Pod) -> Resources {
        let mut r = Resources::from_map(&pod.requests_total());
        r.pods = 1;
        r
    }

    pub fn other(&self, name: &str) -> i64 {
        self.other
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, v)| *v)
    }

    pub fn add(&mut self, o: &Resources) {
        self.milli_cpu = self.milli_cpu.saturating_add(o.milli_cpu);
        self.memory = self.memory.saturating_add(o.memory);
        self.pods = self.pods.saturating_add(o.pods);
        for (name, v) in &o.other {
            match self.other.iter_mut().find(|(n, _)| n == name) {
                Some((_, have)) => *have = have.saturating_add(*v),
                None => {
                    self.other.push((name.clone(), *v));
                    self.other.sort_by(|a, b| a.0.cmp(&b.0));
                }
            }
        }
    }

    pub fn sub(&mut self, o: &Resources) {
        self.milli_cpu = self.milli_cpu.saturating_sub(o.milli_cpu);
        self.memory = self.memory.saturating_sub(o.memory);
        self.pods = self.pods.saturating_sub(o.pods);
        for (name, v) in &o.other {
            if let Some((_, have)) = self.other.iter_mut().find(|(n, _)| n == name) {
                *have = have.saturating_sub(*v);
            }
        }
    }

    /// Cpu and memory as scoring sees them: zero requests count as kube-scheduler's defaults.
    pub fn non_zero(&self) -> (i64, i64) {
        let cpu = if self.milli_cpu == 0 {
            DEFAULT_MILLI_CPU
        } else {
            self.milli_cpu
        };
        let mem = if self.memory == 0 {
            DEFAULT_MEMORY
        } else {
            self.memory
        };
        (cpu, mem)
    }
}

/// Why a request does not fit; rendered like kube-scheduler's NodeResourcesFit reasons.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Shortfall {
    TooManyPods,
    Insufficient(String),
}

/// Checks `request` against `allocatable - used`, pushing every shortfall (a node short of
/// both cpu and memory counts under both reasons, as in kube-scheduler). A node that does
/// not report a pod limit has none.
pub fn check_fit(
    request: &Resources,
    used: &Resources,
    allocatable: &Resources,
    out: &mut Vec<Shortfall>,
) {
    if allocatable.pods > 0 && used.pods.saturating_add(request.pods) > allocatable.pods {
        out.push(Shortfall::TooManyPods);
    }
    if request.milli_cpu > 0
        && used.milli_cpu.saturating_add(request.milli_cpu) > allocatable.milli_cpu
    {
        out.push(Shortfall::Insufficient(CPU.into()));
    }
    if request.memory > 0 && used.memory.saturating_add(request.memory) > allocatable.memory {
        out.push(Shortfall::Insufficient(MEMORY.into()));
    }
    for (name, v) in &request.other {
        if *v > 0 && used.other(name).saturating_add(*v) > allocatable.other(name) {
            out.push(Shortfall::Insufficient(name.clone()));
        }
    }
}

/// Whether `request` fits (no shortfall), without allocating.
pub fn fits(request: &Resources, used: &Resources, allocatable: &Resources) -> bool {
    if allocatable.pods > 0 && used.pods.saturating_add(request.pods) > allocatable.pods {
        return false;
    }
    if request.milli_cpu > 0
        && used.milli_cpu.saturating_add(request.milli_cpu) > allocatable.milli_cpu
    {
        return false;
    }
    if request.memory > 0 && used.memory.saturating_add(request.memory) > allocatable.memory {
        return false;
    }
    request
        .other
        .iter()
        .all(|(name, v)| *v <= 0 || used.other(name).saturating_add(*v) <= allocatable.other(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(map: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        map.iter()
            .map(|(k, v)| (k.to_string(), Quantity::parse(v).unwrap()))
            .collect()
    }

    #[test]
    fn parses_and_checks_fit() {
        let alloc = Resources::from_map(&q(&[
            ("cpu", "2"),
            ("memory", "1Gi"),
            ("pods", "3"),
            ("nvidia.com/gpu", "1"),
        ]));
        assert_eq!(alloc.milli_cpu, 2000);
        assert_eq!(alloc.memory, 1 << 30);
        let mut req = Resources::from_map(&q(&[
            ("cpu", "1500m"),
            ("memory", "2Gi"),
            ("nvidia.com/gpu", "2"),
        ]));
        req.pods = 1;
        let used = Resources {
            milli_cpu: 1000,
            pods: 3,
            ..Default::default()
        };
        let mut out = Vec::new();
        check_fit(&req, &used, &alloc, &mut out);
        assert_eq!(
            out,
            vec![
                Shortfall::TooManyPods,
                Shortfall::Insufficient("cpu".into()),
                Shortfall::Insufficient("memory".into()),
                Shortfall::Insufficient("nvidia.com/gpu".into()),
            ]
        );
        assert!(!fits(&req, &used, &alloc));
        let small = Resources {
            milli_cpu: 500,
            pods: 1,
            ..Default::default()
        };
        assert!(fits(&small, &Resources::default(), &alloc));
        let mut sum = used.clone();
        sum.add(&req);
        sum.sub(&req);
        assert_eq!(sum.milli_cpu, used.milli_cpu);
    }
}
