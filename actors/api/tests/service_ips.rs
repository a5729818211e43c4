//! Service ClusterIP allocation: distinct addresses from the service CIDR, none for headless
//! Services, user-chosen addresses reserved (and refused when taken), each reservation a
//! Lease naming its Service.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use bus_schemas::kinds::{Lease, Service};
use bus_schemas::Reason;
use shoal_api::local::LocalCluster;
use shoal_api::service_ips::{service_ip_lease_name, SERVICE_IP_NAMESPACE, SERVICE_UID_LABEL};

fn service(name: &str, cluster_ip: Option<&str>) -> Service {
    let mut spec = serde_json::json!({
        "selector": {"app": name},
        "ports": [{"port": 80, "targetPort": 8080}]
    });
    if let Some(ip) = cluster_ip {
        spec["clusterIP"] = ip.into();
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name},
        "spec": spec
    }))
    .expect("fixture service")
}

fn in_cidr(ip: &str) -> bool {
    let ip: Ipv4Addr = ip.parse().expect("an IPv4 address");
    let o = ip.octets();
    o[0] == 10
        && o[1] == 96
        && ip != Ipv4Addr::new(10, 96, 0, 0)
        && ip != Ipv4Addr::new(10, 96, 0, 1)
        && ip != Ipv4Addr::new(10, 96, 0, 10)
        && ip != Ipv4Addr::new(10, 96, 255, 255)
}

#[actix::test]
async fn services_get_distinct_cluster_ips() {
    let mut cluster = LocalCluster::start().await.expect("cluster starts");
    // Two replicas: requests are spread over both, so both allocate.
    cluster.add_api_replica().await.expect("second replica");
    let api = cluster.api();

    let creates = (0..20).map(|i| {
        let api = api.clone();
        async move { api.create(&service(&format!("svc-{i}"), None)).await }
    });
    let created = futures::future::join_all(creates).await;
    let mut ips = BTreeSet::new();
    for svc in created {
        let svc = svc.expect("service created");
        assert!(in_cidr(&svc.spec.cluster_ip), "{}", svc.spec.cluster_ip);
        assert_eq!(svc.spec.cluster_ips, vec![svc.spec.cluster_ip.clone()]);
        ips.insert(svc.spec.cluster_ip.clone());

        // The reservation exists and is owned by the Service.
        let ip: Ipv4Addr = svc.spec.cluster_ip.parse().unwrap();
        let lease: Lease = api
            .get(SERVICE_IP_NAMESPACE, &service_ip_lease_name(ip))
            .await
            .expect("reservation exists");
        assert_eq!(
            lease.spec.holder_identity,
            Some(format!("default/{}", svc.metadata.name))
        );
        assert_eq!(
            lease.metadata.labels.get(SERVICE_UID_LABEL),
            Some(&svc.metadata.uid)
        );
    }
    assert_eq!(ips.len(), 20, "20 distinct ClusterIPs");

    // Headless: no address, no reservation.
    let headless = api
        .create(&service("headless", Some("None")))
        .await
        .expect("headless created");
    assert_eq!(headless.spec.cluster_ip, "None");

    // A user-chosen free IP is reserved; the same IP again is refused.
    let chosen = api
        .create(&service("chosen", Some("10.96.7.7")))
        .await
        .expect("chosen IP accepted");
    assert_eq!(chosen.spec.cluster_ip, "10.96.7.7");
    let lease: Lease = api
        .get(SERVICE_IP_NAMESPACE, "10-96-7-7")
        .await
        .expect("chosen IP reserved");
    assert_eq!(
        lease.metadata.labels.get(SERVICE_UID_LABEL),
        Some(&chosen.metadata.uid)
    );
    let taken = ips.iter().next().unwrap().clone();
    for ip in ["10.96.7.7", taken.as_str()] {
        let err = api
            .create(&service("dup", Some(ip)))
            .await
            .expect_err("a taken IP is refused");
        assert!(err.is(Reason::Invalid), "{err}");
        let text = format!("{err:?}");
        assert!(text.contains("spec.clusterIP"), "{text}");
        assert!(text.contains("provided IP is already allocated"), "{text}");
    }

    // Outside the CIDR: refused.
    let err = api
        .create(&service("outside", Some("192.168.0.5")))
        .await
        .expect_err("outside the CIDR");
    assert!(err.is(Reason::Invalid), "{err}");
    assert!(api.get::<Service>("default", "outside").await.is_err());

    // The DNS address may be asked for explicitly.
    let dns = api
        .create(&service("dns", Some("10.96.0.10")))
        .await
        .expect("cluster DNS IP by request");
    assert_eq!(dns.spec.cluster_ip, "10.96.0.10");
}

#[actix::test]
async fn deleting_a_service_releases_its_ip_and_stale_reservations_are_reclaimed() {
    let cluster = LocalCluster::start().await.expect("cluster starts");
    let api = cluster.api();
    let delete = |name: &str| bus_schemas::api::DeleteOptions {
        namespace: "default".into(),
        name: name.into(),
        ..Default::default()
    };

    let first = api
        .create(&service("first", Some("10.96.8.8")))
        .await
        .expect("created");
    api.delete::<Service>(&delete("first"))
        .await
        .expect("deleted");
    let gone = api.get::<Lease>(SERVICE_IP_NAMESPACE, "10-96-8-8").await;
    assert!(
        gone.is_err(),
        "the reservation of a deleted Service is released: {gone:?}"
    );
    // The address is free again, for a new Service with a new uid.
    let second = api
        .create(&service("second", Some("10.96.8.8")))
        .await
        .expect("a released IP can be reserved again");
    assert_ne!(first.metadata.uid, second.metadata.uid);
    let lease: Lease = api
        .get(SERVICE_IP_NAMESPACE, "10-96-8-8")
        .await
        .expect("reserved again");
    assert_eq!(
        lease.metadata.labels.get(SERVICE_UID_LABEL),
        Some(&second.metadata.uid)
    );

    // A reservation left behind by a Service that no longer exists (as if an API replica
    // stopped between removing the Service and releasing the address) is reclaimed.
    let mut stale = Lease::default();
    stale.metadata.namespace = SERVICE_IP_NAMESPACE.into();
    stale.metadata.name = "10-96-9-9".into();
    stale
        .metadata
        .labels
        .insert(SERVICE_UID_LABEL.into(), "no-such-uid".into());
    stale.spec.holder_identity = Some("default/vanished".into());
    api.create(&stale).await.expect("stale reservation written");
    let reclaimed = api
        .create(&service("reclaimer", Some("10.96.9.9")))
        .await
        .expect("a stale reservation does not block its address");
    let lease: Lease = api
        .get(SERVICE_IP_NAMESPACE, "10-96-9-9")
        .await
        .expect("reserved");
    assert_eq!(
        lease.metadata.labels.get(SERVICE_UID_LABEL),
        Some(&reclaimed.metadata.uid)
    );
    // But a live holder still wins.
    let err = api
        .create(&service("late", Some("10.96.9.9")))
        .await
        .expect_err("taken");
    assert!(err.is(Reason::Invalid), "{err}");
}
