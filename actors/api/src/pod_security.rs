//! Pod security admission: the namespace's labels choose the levels (see
//! [`bus_schemas::pod_security`]); a Pod breaking the `enforce` level is refused, one breaking
//! the `warn` level is admitted with warnings. Workloads are never refused for their template,
//! as in Kubernetes: their pods are, when the controller creates them, and the workload is
//! warned at write time instead.
//!
//! A Pod is checked at creation only: an update may change nothing the check reads (pod
//! updates are limited to images, deadlines, tolerations and the binding).

use std::any::Any;

use bus_schemas::kinds::pod_spec::PodSpec;
use bus_schemas::kinds::{
    CronJob, DaemonSet, Deployment, Job, Namespace, Pod, ReplicaSet, StatefulSet,
};
use bus_schemas::pod_security::{check, policy_name, summary, Policy};
use bus_schemas::{Reason, Resource, Status};

use crate::state::ApiServer;

/// Refuses a new Pod that breaks its namespace's `enforce` level, naming every violation.
pub(crate) fn enforce(namespace: &Namespace, pod: &Pod) -> Result<(), Status> {
    let policy = Policy::from_labels(&namespace.metadata.labels);
    let violations = check(policy.enforce, &pod.spec, "spec");
    if violations.is_empty() {
        return Ok(());
    }
    let mut message = format!(
        "pods {:?} is forbidden: violates PodSecurity {}: {}",
        pod.metadata.name,
        policy_name(policy.enforce),
        summary(&violations)
    );
    for error in &policy.label_errors {
        message.push_str(&format!(
            " (namespace {:?} {error})",
            namespace.metadata.name
        ));
    }
    let causes = violations.iter().map(|v| v.to_cause()).collect();
    Err(Status::new(Reason::Forbidden, message).with_details("Pod", &pod.metadata.name, causes))
}

/// What the namespace's `warn` level has to say about a Pod just created or a workload just
/// written: Kubernetes' `would violate PodSecurity …` lines, and any label that is not a level.
pub(crate) async fn warnings<K: Resource>(
    server: &ApiServer,
    obj: &K,
    created: bool,
) -> Vec<String> {
    let Some((spec, path)) = pod_spec_of(obj, created) else {
        return Vec::new();
    };
    let ns = &obj.meta().namespace;
    // A lookup failing here only loses warnings: the write itself is done.
    let Ok(Some(namespace)) = server.cached_or_current::<Namespace>("", ns).await else {
        return Vec::new();
    };
    let policy = Policy::from_labels(&namespace.metadata.labels);
    let mut warnings: Vec<String> = policy
        .label_errors
        .iter()
        .map(|e| format!("namespace {ns:?}: {e}"))
        .collect();
    let violations = check(policy.warn, spec, path);
    if !violations.is_empty() {
        warnings.push(format!(
            "would violate PodSecurity {}: {}",
            policy_name(policy.warn),
            summary(&violations)
        ));
    }
    warnings
}

/// The pod spec a write of this kind carries and its path: a Pod's own (only when created),
/// or a workload's template.
fn pod_spec_of<K: Resource>(obj: &K, created: bool) -> Option<(&PodSpec, &'static str)> {
    const TEMPLATE: &str = "spec.template.spec";
    let any = obj as &dyn Any;
    if let Some(pod) = any.downcast_ref::<Pod>() {
        return created.then_some((&pod.spec, "spec"));
    }
    if let Some(d) = any.downcast_ref::<Deployment>() {
        return Some((&d.spec.template.spec, TEMPLATE));
    }
    if let Some(rs) = any.downcast_ref::<ReplicaSet>() {
        return Some((&rs.spec.template.spec, TEMPLATE));
    }
    if let Some(sts) = any.downcast_ref::<StatefulSet>() {
        return Some((&sts.spec.template.spec, TEMPLATE));
    }
    if let Some(ds) = any.downcast_ref::<DaemonSet>() {
        return Some((&ds.spec.template.spec, TEMPLATE));
    }
    if let Some(job) = any.downcast_ref::<Job>() {
        return Some((&job.spec.template.spec, TEMPLATE));
    }
    if let Some(cj) = any.downcast_ref::<CronJob>() {
        let spec = &cj.spec.job_template.spec.template.spec;
        return Some((spec, "spec.jobTemplate.spec.template.spec"));
    }
    None
}
