//! Admission: policy applied after validation and before the write — namespaces must exist
//! and not be terminating, pod priorities are resolved from PriorityClasses, and a node may
//! write only what is bound to it.

use std::any::Any;
use std::net::Ipv4Addr;

use bus_schemas::kinds::{Lease, Namespace, Node, Pod, PriorityClass, Service};
use bus_schemas::status::Cause;
use bus_schemas::{Reason, Resource, Status};

use crate::request::Request;
use crate::server::ApiServer;

/// The namespace that holds one Lease per allocated Service ClusterIP (named after the IP,
/// dots replaced by dashes), naming its Service (holderIdentity `namespace/name`, label
/// [`SERVICE_UID_LABEL`]): creating it is the atomic reservation.
pub const SERVICE_IP_NAMESPACE: &str = "shoal-service-ips";
/// Label on a reservation Lease: the uid of the Service holding the IP.
pub const SERVICE_UID_LABEL: &str = "shoal.io/service-uid";
/// The range Service ClusterIPs are allocated from.
pub const SERVICE_CIDR: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 96, 0, 0), 16);
/// The address cluster DNS is given explicitly; never handed out at random.
pub const CLUSTER_DNS_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);

#[tracing::instrument(name = "api.admission", level = "info", skip_all, fields(kind = K::INFO.kind))]
pub(crate) async fn admit<K: Resource>(
    server: &ApiServer,
    obj: &mut K,
    old: Option<&K>,
) -> Result<(), Status> {
    if K::INFO.namespaced && old.is_none() {
        check_namespace(server, &obj.meta().namespace).await?;
    }
    if let Some(pod) = (obj as &mut dyn Any).downcast_mut::<Pod>() {
        match old.and_then(|o| (o as &dyn Any).downcast_ref::<Pod>()) {
            None => resolve_priority(server, pod).await?,
            // Priority is resolved once, at creation; updates keep it.
            Some(old) => {
                if pod.spec.priority.is_none() {
                    pod.spec.priority = old.spec.priority;
                }
                if pod.spec.preemption_policy.is_empty() {
                    pod.spec.preemption_policy = old.spec.preemption_policy.clone();
                }
            }
        }
    }
    if let (Some(svc), Some(old)) = ((obj as &mut dyn Any).downcast_mut::<Service>(), old) {
        // A manifest that leaves clusterIP out keeps the address allocated at creation.
        if let Some(old) = (old as &dyn Any).downcast_ref::<Service>() {
            svc.carry_allocated_from(old);
        }
    }
    Ok(())
}

async fn check_namespace(server: &ApiServer, namespace: &str) -> Result<(), Status> {
    match server.cached_or_current::<Namespace>("", namespace).await? {
        None => Err(Status::not_found("Namespace", "", namespace)),
        Some(ns) if ns.metadata.deletion_timestamp.is_some() => Err(Status::new(
            Reason::Forbidden,
            format!(
                "namespace {namespace:?} is being terminated: no new objects may be created in it"
            ),
        )),
        Some(_) => Ok(()),
    }
}

async fn resolve_priority(server: &ApiServer, pod: &mut Pod) -> Result<(), Status> {
    let class_name = pod.spec.priority_class_name.clone();
    if class_name.is_empty() {
        pod.spec.priority.get_or_insert(0);
        return Ok(());
    }
    match server
        .cached_or_current::<PriorityClass>("", &class_name)
        .await?
    {
        Some(class) => {
            pod.spec.priority = Some(class.value);
            if pod.spec.preemption_policy.is_empty() {
                pod.spec.preemption_policy = class.preemption_policy.clone();
            }
            Ok(())
        }
        None => Err(Status::new(
            Reason::Forbidden,
            format!("no PriorityClass with name {class_name:?} was found"),
        )),
    }
}

/// Policy that writes other objects, so it runs only once the object is known valid (just
/// before the create is stored): Service ClusterIP allocation.
/// Boxed: it creates objects itself (through `create_object`, which calls it).
pub(crate) fn reserve<'a, K: Resource>(
    server: &'a ApiServer,
    obj: &'a mut K,
) -> futures::future::BoxFuture<'a, Result<(), Status>> {
    Box::pin(async move {
        if let Some(svc) = (obj as &mut dyn Any).downcast_mut::<Service>() {
            allocate_cluster_ip(server, svc).await?;
        }
        Ok(())
    })
}

/// The name of the Lease that reserves `ip`.
pub fn service_ip_lease_name(ip: Ipv4Addr) -> String {
    ip.to_string().replace('.', "-")
}

fn cidr_bounds() -> (u32, u32) {
    let (base, bits) = SERVICE_CIDR;
    let size = 1u32 << (32 - u32::from(bits));
    let first = u32::from(base) & !(size - 1);
    (first, size)
}

/// Gives a ClusterIP Service an address (or reserves the one it asks for). Headless and
/// ExternalName Services get none.
async fn allocate_cluster_ip(server: &ApiServer, svc: &mut Service) -> Result<(), Status> {
    if svc.spec.type_ == "ExternalName" || svc.is_headless() {
        return Ok(());
    }
    let (first, size) = cidr_bounds();
    let name = svc.metadata.name.clone();
    let invalid = |message: String| {
        Status::invalid(
            "Service",
            &name,
            vec![Cause::invalid("spec.clusterIP", message)],
        )
    };
    ensure_ip_namespace(server).await?;
    if !svc.spec.cluster_ip.is_empty() {
        let ip: Ipv4Addr = svc
            .spec
            .cluster_ip
            .parse()
            .map_err(|_| invalid("must be a valid IPv4 address".into()))?;
        let offset = u32::from(ip).wrapping_sub(first);
        if offset >= size {
            let (base, bits) = SERVICE_CIDR;
            return Err(invalid(format!(
                "provided IP is not in the valid range: the service CIDR is {base}/{bits}"
            )));
        }
        if offset == 0 || offset == size - 1 {
            return Err(invalid(
                "provided IP is the network or broadcast address of the service CIDR".into(),
            ));
        }
        return match reserve_ip(server, svc, ip).await {
            Ok(()) => {
                svc.spec.cluster_ips = vec![svc.spec.cluster_ip.clone()];
                Ok(())
            }
            Err(s) if s.is(Reason::AlreadyExists) => {
                Err(invalid("provided IP is already allocated".into()))
            }
            Err(s) => Err(s),
        };
    }
    // Random start, then linear probing: concurrent replicas rarely collide, and a collision
    // costs one more create (the store's create is the arbiter).
    let start = uuid::Uuid::new_v4().as_u128() as u32 % size;
    for i in 0..size {
        let offset = (start + i) % size;
        let ip = Ipv4Addr::from(first + offset);
        // Network, broadcast, the first host (reserved) and the cluster DNS address.
        if offset == 0 || offset == 1 || offset == size - 1 || ip == CLUSTER_DNS_IP {
            continue;
        }
        match reserve_ip(server, svc, ip).await {
            Ok(()) => {
                svc.spec.cluster_ip = ip.to_string();
                svc.spec.cluster_ips = vec![ip.to_string()];
                return Ok(());
            }
            Err(s) if s.is(Reason::AlreadyExists) => continue,
            Err(s) => return Err(s),
        }
    }
    Err(Status::internal(format!(
        "failed to allocate a service IP: range {}/{} is full",
        SERVICE_CIDR.0, SERVICE_CIDR.1
    )))
}

async fn ensure_ip_namespace(server: &ApiServer) -> Result<(), Status> {
    if server
        .current::<Namespace>("", SERVICE_IP_NAMESPACE)
        .await?
        .is_some()
    {
        return Ok(());
    }
    let mut ns = Namespace::default();
    ns.metadata.name = SERVICE_IP_NAMESPACE.into();
    match server
        .create_object(&Request::new("internal.service-ip", None, b""), ns)
        .await
    {
        Ok(_) => Ok(()),
        Err(s) if s.is(Reason::AlreadyExists) => Ok(()),
        Err(s) => Err(s),
    }
}

/// Reserves `ip` for `svc`. A reservation whose Service is gone (an API replica stopped
/// between a Service's removal and the release of its address) is reclaimed here, so a leak
/// costs nothing but this check.
async fn reserve_ip(server: &ApiServer, svc: &Service, ip: Ipv4Addr) -> Result<(), Status> {
    match create_ip_lease(server, svc, ip).await {
        Err(s) if s.is(Reason::AlreadyExists) => {
            let name = service_ip_lease_name(ip);
            let Some((lease, _)) = server.current::<Lease>(SERVICE_IP_NAMESPACE, &name).await?
            else {
                return create_ip_lease(server, svc, ip).await;
            };
            if holder_exists(server, &lease).await? {
                return Err(s);
            }
            delete_reservation(server, &lease).await?;
            create_ip_lease(server, svc, ip).await
        }
        other => other,
    }
}

async fn holder_exists(server: &ApiServer, lease: &Lease) -> Result<bool, Status> {
    let holder = lease.spec.holder_identity.as_deref().unwrap_or_default();
    let Some((ns, name)) = holder.split_once('/') else {
        return Ok(false);
    };
    let uid = lease.metadata.labels.get(SERVICE_UID_LABEL);
    Ok(server
        .current::<Service>(ns, name)
        .await?
        .is_some_and(|(svc, _)| uid.is_none_or(|u| *u == svc.metadata.uid)))
}

/// Deletes a reservation, only the exact one that was read (uid and resourceVersion), so a
/// concurrent re-reservation of the same address is never undone.
async fn delete_reservation(server: &ApiServer, lease: &Lease) -> Result<(), Status> {
    let options = bus_schemas::api::DeleteOptions {
        namespace: SERVICE_IP_NAMESPACE.into(),
        name: lease.metadata.name.clone(),
        preconditions: Some(bus_schemas::api::Preconditions {
            uid: Some(lease.metadata.uid.clone()),
            resource_version: Some(lease.metadata.resource_version.clone()),
        }),
        ..Default::default()
    };
    let req = Request::new("internal.service-ip", None, b"");
    match Box::pin(server.delete_object::<Lease>(&req, &options)).await {
        Ok(_) => Ok(()),
        Err(s) if s.is(Reason::NotFound) || s.is(Reason::Conflict) => Ok(()),
        Err(s) => Err(s),
    }
}

/// Called once an object is gone from the store: a removed Service gives its ClusterIP back.
pub(crate) async fn on_removed<K: Resource>(server: &ApiServer, obj: &K) {
    let Some(svc) = (obj as &dyn Any).downcast_ref::<Service>() else {
        return;
    };
    for ip in svc.spec.cluster_ips.iter().chain([&svc.spec.cluster_ip]) {
        let Ok(ip) = ip.parse::<Ipv4Addr>() else {
            continue;
        };
        let name = service_ip_lease_name(ip);
        let lease = match server.current::<Lease>(SERVICE_IP_NAMESPACE, &name).await {
            Ok(Some((lease, _))) => lease,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(ip = %ip, error = %e.message, "cannot read a service IP reservation; it will be reclaimed when the address is next needed");
                continue;
            }
        };
        if lease.metadata.labels.get(SERVICE_UID_LABEL) != Some(&svc.metadata.uid) {
            continue;
        }
        if let Err(e) = delete_reservation(server, &lease).await {
            tracing::warn!(ip = %ip, error = %e.message, "cannot release a service IP; it will be reclaimed when the address is next needed");
        }
    }
}

async fn create_ip_lease(server: &ApiServer, svc: &Service, ip: Ipv4Addr) -> Result<(), Status> {
    let mut lease = Lease::default();
    lease.metadata.name = service_ip_lease_name(ip);
    lease.metadata.namespace = SERVICE_IP_NAMESPACE.into();
    // NOTE: no ownerReference: owners must share the dependent's namespace (GC looks the
    // owner up there), so a reference to the Service would make GC release the IP at once.
    // The holder is recorded instead, and the API releases the IP when it removes the Service.
    lease
        .metadata
        .labels
        .insert(SERVICE_UID_LABEL.into(), svc.metadata.uid.clone());
    lease.spec.holder_identity = Some(format!("{}/{}", svc.metadata.namespace, svc.metadata.name));
    let req = Request::new("internal.service-ip", None, b"");
    Box::pin(server.create_object(&req, lease))
        .await
        .map(|_| ())
}

/// The grace period a deletion gets: pods running on a node get time to stop; everything
/// else is removed at once (or when its finalizers are gone).
pub(crate) fn grace_period<K: Resource>(obj: &K, requested: Option<i64>) -> i64 {
    let Some(pod) = (obj as &dyn Any).downcast_ref::<Pod>() else {
        return 0;
    };
    if pod.spec.node_name.is_empty() || is_terminal(pod) {
        return 0;
    }
    requested
        .or(pod.spec.termination_grace_period_seconds)
        .unwrap_or(30)
        .max(0)
}

/// A bound, still-running pod is removed only when its node confirms its containers stopped
/// (the node deletes it again with grace period 0).
pub(crate) fn awaits_node<K: Resource>(obj: &K) -> bool {
    let Some(pod) = (obj as &dyn Any).downcast_ref::<Pod>() else {
        return false;
    };
    !pod.spec.node_name.is_empty()
        && !is_terminal(pod)
        && pod.metadata.deletion_grace_period_seconds.unwrap_or(0) > 0
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(pod.status.phase.as_str(), "Succeeded" | "Failed")
}

/// Side effects of starting a deletion.
pub(crate) fn on_delete<K: Resource>(obj: &mut K) {
    if let Some(ns) = (obj as &mut dyn Any).downcast_mut::<Namespace>() {
        ns.status.phase = "Terminating".into();
    }
}

/// A node may write only its own Node object and the pods bound to it.
pub(crate) fn check_node_owns<K: Resource>(node: &str, current: &K) -> Result<(), Status> {
    let any = current as &dyn Any;
    let owned = if let Some(pod) = any.downcast_ref::<Pod>() {
        pod.spec.node_name == node
    } else if let Some(n) = any.downcast_ref::<Node>() {
        n.metadata.name == node
    } else {
        false
    };
    if owned {
        Ok(())
    } else {
        Err(Status::new(
            Reason::Forbidden,
            format!(
                "node {node:?} may not write {} {:?}: it is not bound to that node",
                K::INFO.kind,
                current.meta().name
            ),
        ))
    }
}
