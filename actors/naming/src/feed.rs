//! Keeps the index equal to what the informer caches hold: every Service (with the Endpoints
//! of the same name) and every pod is a source; a change to one recomputes that source's
//! records from the caches (level-triggered: the cache is at least as new as the event).

use std::collections::HashSet;

use bus_schemas::kinds::{Endpoints, Pod, Service};
use bus_schemas::selector::Selector;
use shoal_bus::informer::Change;
use shoal_bus::shutdown::Shutdown;
use shoal_bus::{Informer, InformerFactory, ObjectKey, StoreError};
use tokio::sync::broadcast::error::RecvError;

use crate::index::Builder;
use crate::records::{self, Source};

struct Caches {
    services: Informer<Service>,
    endpoints: Informer<Endpoints>,
    pods: Informer<Pod>,
}

/// Fills the index once the caches have synced (then calls `synced`), and follows them until
/// `shutdown`. Errors when the state log is unavailable or an informer stops.
pub async fn run(
    informers: InformerFactory,
    mut builder: Builder,
    shutdown: Shutdown,
    synced: impl FnOnce(),
) -> Result<(), StoreError> {
    let caches = Caches {
        services: informers.get::<Service>(),
        endpoints: informers.get::<Endpoints>(),
        pods: informers.get::<Pod>(),
    };
    // Subscribe before the full build, so no change between the two is missed.
    let mut services = caches.services.subscribe();
    let mut endpoints = caches.endpoints.subscribe();
    let mut pods = caches.pods.subscribe();
    caches.services.wait_synced().await?;
    caches.endpoints.wait_synced().await?;
    caches.pods.wait_synced().await?;
    resync(&caches, &mut builder);
    builder.index().set_synced();
    tracing::info!(
        names = builder.index().len(),
        "naming index built from the caches"
    );
    synced();

    let stop = shutdown.wait();
    tokio::pin!(stop);
    loop {
        let source = tokio::select! {
            _ = &mut stop => return Ok(()),
            c = services.recv() => next(c, "Service", |c| Source::Service(c.key)),
            c = endpoints.recv() => next(c, "Endpoints", |c| Source::Service(c.key)),
            c = pods.recv() => next(c, "Pod", |c| Source::Pod(c.key)),
        }?;
        match source {
            Some(source) => {
                let contribution = contribution(&caches, &builder, &source);
                builder.set(source, contribution);
            }
            None => resync(&caches, &mut builder),
        }
    }
}

/// The source a change concerns; None after a lag (the caller resyncs everything).
fn next<K>(
    change: Result<Change<K>, RecvError>,
    kind: &'static str,
    source: impl FnOnce(Change<K>) -> Source,
) -> Result<Option<Source>, StoreError> {
    match change {
        Ok(c) => Ok(Some(source(c))),
        Err(RecvError::Lagged(n)) => {
            tracing::warn!(
                kind,
                missed = n,
                "naming fell behind the {kind} cache; resyncing"
            );
            Ok(None)
        }
        Err(RecvError::Closed) => Err(StoreError::Unavailable(format!(
            "the {kind} informer stopped"
        ))),
    }
}

fn contribution(caches: &Caches, builder: &Builder, source: &Source) -> records::Contribution {
    let domain = builder.index().domain();
    match source {
        Source::Service(ObjectKey { namespace, name }) => {
            match caches.services.get(namespace, name) {
                Some(svc) => {
                    let ep = caches.endpoints.get(namespace, name);
                    records::service(domain, &svc, ep.as_deref())
                }
                None => Default::default(),
            }
        }
        Source::Pod(ObjectKey { namespace, name }) => caches
            .pods
            .get(namespace, name)
            .map(|pod| records::pod(domain, &pod))
            .unwrap_or_default(),
    }
}

/// Recomputes every source from the caches and drops the sources that are gone.
fn resync(caches: &Caches, builder: &mut Builder) {
    let everything = Selector::everything();
    let mut present: HashSet<Source> = HashSet::new();
    let services = caches.services.list(None, &everything);
    let pods = caches.pods.list(None, &everything);
    let sources = services
        .iter()
        .map(|s| Source::Service(ObjectKey::of(s.as_ref())))
        .chain(pods.iter().map(|p| Source::Pod(ObjectKey::of(p.as_ref()))));
    for source in sources {
        let contribution = contribution(caches, builder, &source);
        builder.set(source.clone(), contribution);
        present.insert(source);
    }
    let gone: Vec<Source> = builder
        .sources()
        .filter(|s| !present.contains(s))
        .cloned()
        .collect();
    for source in gone {
        builder.set(source, Default::default());
    }
}
