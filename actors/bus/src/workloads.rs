//! The pod selector of a workload named by kind and name, read from the shared caches: what a
//! VerticalPodAutoscaler's `targetRef` selects. The API (sizing new pods) and the autoscaler
//! (recommending, replacing pods) must agree on it, so both read it here.

use bus_schemas::kinds::{DaemonSet, Deployment, Job, ReplicaSet, StatefulSet};
use bus_schemas::selector::LabelSelector;

use crate::{InformerFactory, StoreError};

/// The kinds whose pods a target reference can name.
pub const KINDS: &[&str] = &[
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "Job",
];

/// What a target reference names, as far as its pods go.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub selector: LabelSelector,
    /// The replicas it asks for; `None` for kinds without a count (Jobs), and for
    /// DaemonSets the nodes it is scheduled on.
    pub replicas: Option<i32>,
}

/// `kind` `namespace/name` once its cache is loaded; `None` when the workload does not
/// exist, has no selector, or is of a kind that has no pods.
pub async fn workload(
    informers: &InformerFactory,
    namespace: &str,
    kind: &str,
    name: &str,
) -> Result<Option<Workload>, StoreError> {
    macro_rules! of {
        ($K:ty, $replicas:expr) => {{
            let informer = informers.get::<$K>();
            informer.wait_synced().await?;
            let replicas: fn(&$K) -> Option<i32> = $replicas;
            Ok(informer.get(namespace, name).and_then(|w| {
                Some(Workload {
                    selector: w.spec.selector.clone()?,
                    replicas: replicas(&w),
                })
            }))
        }};
    }
    match kind {
        // Unset replicas means one, as the controllers read it.
        "Deployment" => of!(Deployment, |d| Some(d.spec.replicas.unwrap_or(1))),
        "ReplicaSet" => of!(ReplicaSet, |r| Some(r.spec.replicas.unwrap_or(1))),
        "StatefulSet" => of!(StatefulSet, |s| Some(s.spec.replicas.unwrap_or(1))),
        "DaemonSet" => of!(DaemonSet, |d| Some(d.status.desired_number_scheduled)),
        "Job" => of!(Job, |_| None),
        _ => Ok(None),
    }
}
