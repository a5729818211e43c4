//! What the bus tests share: a real nats-server in a directory, with the state stream.

use bus_schemas::roles::Role;
use shoal_bus::natsd::Natsd;
use shoal_bus::store::{ensure_stream, StreamSettings};
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
