//! What the bus tests share: a real nats-server in a directory, with the state stream.

use bus_schemas::kinds::Pod;
use bus_schemas::roles::Role;
use bus_schemas::{codec, subjects};
use shoal_bus::natsd::Natsd;
use shoal_bus::store::{ensure_stream, StreamSettings};
use shoal_bus::store::{EventType, WriteMeta};
use shoal_bus::Store;

pub async fn setup(dir: &std::path::Path) -> (Natsd, Store) {
    let natsd = Natsd::start_in(dir).await.expect("nats-server starts");
    // The store's tests write the state log as the API does.
    let api = natsd.creds(&Role::Api).await.unwrap();
    let nats = shoal_bus::connect(&natsd.url(), "test", &api)
        .await
        .unwrap();
    ensure_stream(
        &async_nats::jetstream::new(nats.clone()),
        &StreamSettings::default(),
    )
    .await
    .unwrap();
    (natsd, Store::open(nats).await.unwrap())
}

/// Writes a version of pod `name` (bound to `node`) as the API would, expecting the version
/// it last saw; returns the revision the log gave it.
#[allow(dead_code)] // not every test file that shares this module writes pods
pub async fn put_pod(store: &Store, name: &str, node: &str, event: EventType) -> u64 {
    let subject = subjects::object("pod", "default", name);
    let last = store
        .get_raw(&subject)
        .await
        .unwrap()
        .map(|r| r.revision)
        .unwrap_or(0);
    let mut pod = Pod::default();
    pod.metadata.namespace = "default".into();
    pod.metadata.name = name.into();
    pod.metadata.uid = format!("uid-{name}");
    pod.spec.node_name = node.into();
    let body = codec::to_msgpack(&pod).unwrap();
    store
        .write(&subject, event, body, last, &WriteMeta::default())
        .await
        .expect("write")
        .revision
}
