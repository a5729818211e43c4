//! Service ClusterIP allocation. Each allocated address is a Lease in
//! [`SERVICE_IP_NAMESPACE`] named after the IP; creating it is the atomic reservation, so
//! replicas need no coordination beyond the log's compare-and-swap. A reservation Lease names
//! its Service by holderIdentity `namespace/name` and by the label [`SERVICE_UID_LABEL`].
//!
//! Reservations are the server's own bookkeeping: they are written through the shared state's
//! primitives ([`ApiServer::store_new`], [`ApiServer::remove_exact`]), never through the verbs,
//! so allocating never re-enters the create it is part of.

use std::any::Any;
use std::net::Ipv4Addr;

use bus_schemas::kinds::{Lease, Namespace, Service};
use bus_schemas::status::Cause;
use bus_schemas::{Reason, Resource, Status};

use crate::request::Request;
use crate::state::{stamp_new, ApiServer};

pub use bus_schemas::wellknown::{SERVICE_IP_NAMESPACE, SERVICE_UID_LABEL};

/// The range Service ClusterIPs are allocated from.
pub const SERVICE_CIDR: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 96, 0, 0), 16);
/// The address cluster DNS is given explicitly; never handed out at random.
pub const CLUSTER_DNS_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);

/// Policy that writes other objects, so it runs only once the object is known valid (just
/// before the create is stored): a new Service gets its ClusterIP.
pub(crate) async fn allocate<K: Resource>(server: &ApiServer, obj: &mut K) -> Result<(), Status> {
    if let Some(svc) = (obj as &mut dyn Any).downcast_mut::<Service>() {
        allocate_cluster_ip(server, svc).await?;
    }
    Ok(())
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

/// Creates the reservations' namespace on first use (bootstrap creates it too; this covers a
/// cluster whose namespace was removed).
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
    stamp_new(&mut ns);
    match server.store_new(&internal_request(), ns).await {
        Ok(_) => Ok(()),
        Err(s) if s.is(Reason::AlreadyExists) => Ok(()),
        Err(s) => Err(s),
    }
}

fn internal_request() -> Request<'static> {
    Request::new("internal.service-ip", None, b"")
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
/// Deletes a reservation, only the exact version that was read, so a concurrent
/// re-reservation of the same address is never undone.
async fn delete_reservation(server: &ApiServer, lease: &Lease) -> Result<(), Status> {
    let Some(revision) = lease.metadata.revision() else {
        return Ok(());
    };
    match server
        .remove_exact(&internal_request(), lease.clone(), revision)
        .await
    {
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
    stamp_new(&mut lease);
    server
        .store_new(&internal_request(), lease)
        .await
        .map(|_| ())
}
