//! Informers: read caches of one kind, fed by a list and then a watch of the state log.
//!
//! One writer (the informer's own task) and many readers. Readers get `Arc`s of immutable
//! objects, so a process hosting many actors keeps one copy of each object however many
//! actors look at it. Nothing is acted on before [`Informer::wait_synced`]: an empty cache is
//! not evidence of an empty cluster.

use std::collections::{HashMap, HashSet};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bus_schemas::selector::Selector;
use bus_schemas::{codec, subjects, Resource};
use tokio::sync::{broadcast, mpsc, watch};

use crate::backoff::Backoff;
use crate::store::{EventType, RawEvent, Store, StoreError};
use crate::watch::RawWatch;

/// Namespace and name: how objects are keyed everywhere.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
    pub fn of<K: Resource>(obj: &K) -> Self {
        ObjectKey::new(obj.meta().namespace.clone(), obj.meta().name.clone())
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}", self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

/// One change the cache applied.
#[derive(Debug, Clone)]
pub struct Change<K> {
    pub event: EventType,
    pub key: ObjectKey,
    pub old: Option<Arc<K>>,
    /// For DELETED, the object's final version.
    pub new: Arc<K>,
    pub revision: u64,
    /// The trace of the work that wrote this version: work done because of the change
    /// continues it.
    pub traceparent: Option<Arc<str>>,
}

/// Computes the values an object is indexed under (e.g. its node name, its owner uid).
pub type IndexFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

struct Index<K> {
    func: IndexFn<K>,
    entries: HashMap<String, HashSet<ObjectKey>>,
}

struct Cache<K> {
    objects: HashMap<ObjectKey, Arc<K>>,
    /// Beside the objects rather than in them: the trace that wrote each cached version,
    /// which is no part of the object (no annotation a user would see or could forge).
    traces: HashMap<ObjectKey, Arc<str>>,
    indexes: HashMap<&'static str, Index<K>>,
}

/// The (index, value) pairs a change touched, for routing it to keyed subscribers.
type Touched = Vec<(&'static str, String)>;

impl<K: Resource> Cache<K> {
    fn index_add(&mut self, key: &ObjectKey, obj: &K, mut touched: Option<&mut Touched>) {
        for (name, index) in self.indexes.iter_mut() {
            for value in (index.func)(obj) {
                if let Some(t) = touched.as_deref_mut() {
                    t.push((name, value.clone()));
                }
                index.entries.entry(value).or_default().insert(key.clone());
            }
        }
    }

    fn index_remove(&mut self, key: &ObjectKey, obj: &K, mut touched: Option<&mut Touched>) {
        for (name, index) in self.indexes.iter_mut() {
            for value in (index.func)(obj) {
                if let Some(set) = index.entries.get_mut(&value) {
                    set.remove(key);
                    if set.is_empty() {
                        index.entries.remove(&value);
                    }
                }
                if let Some(t) = touched.as_deref_mut() {
                    t.push((name, value));
                }
            }
        }
    }

    fn index_values(&self, obj: &K, touched: &mut Touched) {
        for (name, index) in &self.indexes {
            touched.extend((index.func)(obj).into_iter().map(|v| (*name, v)));
        }
    }
}

struct Shared<K> {
    cache: RwLock<Cache<K>>,
    revision: AtomicU64,
    revision_tx: watch::Sender<u64>,
    synced_tx: watch::Sender<bool>,
    changes: broadcast::Sender<Change<K>>,
    /// Subscribers to the changes of one index value (e.g. the pods of one node).
    keyed: RwLock<KeyedSubscribers<K>>,
    failed: RwLock<Option<String>>,
}

/// Subscribers by (index name, value).
type KeyedSubscribers<K> = HashMap<(&'static str, String), Vec<KeyedSender<K>>>;

/// How many changes a keyed subscriber may fall behind before it must resync from the cache.
const KEYED_CAPACITY: usize = 1024;

/// Between attempts of the initial list.
const RELIST: Backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));

struct KeyedSender<K> {
    tx: mpsc::Sender<Change<K>>,
    lagged: Arc<AtomicBool>,
}

/// The changes of the objects indexed under one value, before or after the change (so an
/// object that moves away is seen leaving). Like a broadcast receiver, it reports `Lagged`
/// when it fell behind; the subscriber then resyncs from the cache.
pub struct KeyedReceiver<K> {
    rx: mpsc::Receiver<Change<K>>,
    lagged: Arc<AtomicBool>,
}

impl<K> KeyedReceiver<K> {
    pub async fn recv(&mut self) -> Result<Change<K>, broadcast::error::RecvError> {
        if self.lagged.swap(false, Ordering::AcqRel) {
            // What is queued is older than what was dropped: the resync supersedes it all.
            let mut dropped = 0u64;
            while self.rx.try_recv().is_ok() {
                dropped += 1;
            }
            return Err(broadcast::error::RecvError::Lagged(dropped));
        }
        self.rx
            .recv()
            .await
            .ok_or(broadcast::error::RecvError::Closed)
    }
}

/// A cache of one kind. Cloning shares the cache.
pub struct Informer<K> {
    shared: Arc<Shared<K>>,
    task: Arc<tokio::task::JoinHandle<()>>,
    _kind: PhantomData<K>,
}

impl<K> Clone for Informer<K> {
    fn clone(&self) -> Self {
        Informer {
            shared: self.shared.clone(),
            task: self.task.clone(),
            _kind: PhantomData,
        }
    }
}

/// Builds an informer with indexes before it starts filling.
pub struct InformerBuilder<K> {
    namespace: Option<String>,
    indexes: Vec<(&'static str, IndexFn<K>)>,
}

impl<K: Resource> Default for InformerBuilder<K> {
    fn default() -> Self {
        InformerBuilder {
            namespace: None,
            indexes: Vec::new(),
        }
    }
}

impl<K: Resource> InformerBuilder<K> {
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    pub fn index(
        mut self,
        name: &'static str,
        func: impl Fn(&K) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        self.indexes.push((name, Arc::new(func)));
        self
    }

    /// Starts listing and watching in a background task.
    pub fn start(self, store: Store) -> Informer<K> {
        let indexes = self
            .indexes
            .into_iter()
            .map(|(name, func)| {
                (
                    name,
                    Index {
                        func,
                        entries: HashMap::new(),
                    },
                )
            })
            .collect();
        let (changes, _) = broadcast::channel(16 * 1024);
        let shared = Arc::new(Shared {
            cache: RwLock::new(Cache {
                objects: HashMap::new(),
                traces: HashMap::new(),
                indexes,
            }),
            revision: AtomicU64::new(0),
            revision_tx: watch::channel(0).0,
            synced_tx: watch::channel(false).0,
            changes,
            keyed: RwLock::new(HashMap::new()),
            failed: RwLock::new(None),
        });
        let filter = subjects::objects_of(&K::INFO.token(), self.namespace.as_deref());
        let task = tokio::spawn(run::<K>(store, filter, shared.clone()));
        Informer {
            shared,
            task: Arc::new(task),
            _kind: PhantomData,
        }
    }
}

impl<K: Resource> Informer<K> {
    pub fn builder() -> InformerBuilder<K> {
        InformerBuilder::default()
    }

    pub fn start(store: Store) -> Informer<K> {
        InformerBuilder::default().start(store)
    }

    /// Waits until the initial list is in the cache. Errors if the state log is missing.
    pub async fn wait_synced(&self) -> Result<(), StoreError> {
        let mut rx = self.shared.synced_tx.subscribe();
        loop {
            if *rx.borrow_and_update() {
                return Ok(());
            }
            if let Some(why) = self.shared.failed.read().expect("informer lock").clone() {
                return Err(StoreError::Unavailable(why));
            }
            if rx.changed().await.is_err() {
                return Err(StoreError::Unavailable("informer stopped".into()));
            }
        }
    }

    pub fn is_synced(&self) -> bool {
        *self.shared.synced_tx.borrow()
    }

    /// The state-log revision the cache reflects.
    pub fn revision(&self) -> u64 {
        self.shared.revision.load(Ordering::Acquire)
    }

    /// Waits until the cache reflects at least `revision` (read-your-writes).
    pub async fn wait_for_revision(&self, revision: u64) {
        let mut rx = self.shared.revision_tx.subscribe();
        while *rx.borrow_and_update() < revision {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        let cache = self.shared.cache.read().expect("informer lock");
        cache.objects.get(&ObjectKey::new(namespace, name)).cloned()
    }

    /// The trace context of the work that wrote the cached version of an object, if any.
    pub fn traceparent(&self, namespace: &str, name: &str) -> Option<Arc<str>> {
        let cache = self.shared.cache.read().expect("informer lock");
        cache.traces.get(&ObjectKey::new(namespace, name)).cloned()
    }

    /// Objects in `namespace` (None: all) whose labels match.
    pub fn list(&self, namespace: Option<&str>, selector: &Selector) -> Vec<Arc<K>> {
        let cache = self.shared.cache.read().expect("informer lock");
        let everything = selector.is_everything();
        cache
            .objects
            .iter()
            .filter(|(key, _)| namespace.is_none_or(|ns| key.namespace == ns))
            .filter(|(_, obj)| everything || selector.matches(&obj.meta().labels))
            .map(|(_, obj)| obj.clone())
            .collect()
    }

    /// What the cache holds, summarised for comparison with a fresh list
    /// ([`bus_schemas::inspect`]). The revision is read before the objects, so a summary
    /// never claims a revision newer than its objects.
    pub fn summary(&self) -> bus_schemas::inspect::CacheSummary {
        let revision = self.revision();
        let synced = self.is_synced();
        let cache = self.shared.cache.read().expect("informer lock");
        let mut summary = bus_schemas::inspect::CacheSummary::of(
            K::INFO.kind,
            cache.objects.iter().map(|(key, obj)| {
                (
                    key.namespace.as_str(),
                    key.name.as_str(),
                    obj.meta().resource_version.as_str(),
                )
            }),
        );
        summary.synced = synced;
        summary.revision = revision;
        summary
    }

    pub fn len(&self) -> usize {
        self.shared
            .cache
            .read()
            .expect("informer lock")
            .objects
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Objects indexed under `value` by the index `name`.
    pub fn by_index(&self, name: &str, value: &str) -> Vec<Arc<K>> {
        let cache = self.shared.cache.read().expect("informer lock");
        let Some(index) = cache.indexes.get(name) else {
            return Vec::new();
        };
        let Some(keys) = index.entries.get(value) else {
            return Vec::new();
        };
        keys.iter()
            .filter_map(|k| cache.objects.get(k).cloned())
            .collect()
    }

    /// Every change applied from now on. A receiver that lags gets `Lagged` and must resync
    /// from the cache (controllers do: they are level-triggered).
    pub fn subscribe(&self) -> broadcast::Receiver<Change<K>> {
        self.shared.changes.subscribe()
    }

    /// The changes of objects indexed under `value` by the index `name`, without waking for
    /// anything else: a node agent among thousands in one process hears only of its own pods.
    pub fn subscribe_index(&self, name: &'static str, value: &str) -> KeyedReceiver<K> {
        let (tx, rx) = mpsc::channel(KEYED_CAPACITY);
        let lagged = Arc::new(AtomicBool::new(false));
        self.shared
            .keyed
            .write()
            .expect("informer lock")
            .entry((name, value.to_string()))
            .or_default()
            .push(KeyedSender {
                tx,
                lagged: lagged.clone(),
            });
        KeyedReceiver { rx, lagged }
    }

    /// Every key in the cache (for resyncs).
    pub fn keys(&self) -> Vec<ObjectKey> {
        self.shared
            .cache
            .read()
            .expect("informer lock")
            .objects
            .keys()
            .cloned()
            .collect()
    }
}

impl<K> Drop for Informer<K> {
    fn drop(&mut self) {
        if Arc::strong_count(&self.task) == 1 {
            self.task.abort();
        }
    }
}

async fn run<K: Resource>(store: Store, filter: String, shared: Arc<Shared<K>>) {
    let mut relists = 0u64;
    // A watch that expires at once again (a compaction record ahead of the log) must not
    // spin the relist: back off until a watch delivers something.
    let mut pause = RELIST.delays();
    loop {
        let (items, revision) = list(&store, &filter, &shared).await;
        if relists == 0 {
            fill(&shared, items);
        } else {
            replace(&shared, items);
        }
        publish_revision(&shared, revision);
        shared.synced_tx.send_replace(true);

        let mut watch = RawWatch::start(store.clone(), filter.clone(), revision + 1);
        let mut delivered = false;
        loop {
            match watch.next().await {
                Some(Ok(raw)) => {
                    delivered = true;
                    apply(&shared, raw)
                }
                Some(Err(expired)) => {
                    // What was missed is unknowable: the list says what is there now, and
                    // the difference to the cache becomes changes, as if watched.
                    tracing::info!(kind = K::INFO.kind, %expired, "informer watch expired; relisting");
                    break;
                }
                None => return,
            }
        }
        if delivered {
            pause = RELIST.delays();
        } else {
            tokio::time::sleep(pause.next().unwrap_or(RELIST.max)).await;
        }
        relists += 1;
    }
}

/// The live objects under `filter` and the list's revision, retried until the log answers.
async fn list<K: Resource>(
    store: &Store,
    filter: &str,
    shared: &Shared<K>,
) -> (Vec<RawEvent>, u64) {
    let mut delays = RELIST.delays();
    let listed = loop {
        match store.list_raw(filter).await {
            Ok(listed) => break listed,
            Err(e) => {
                tracing::warn!(kind = K::INFO.kind, error = %e, "informer list failed; retrying");
                *shared.failed.write().expect("informer lock") = Some(e.to_string());
                shared.synced_tx.send_modify(|_| {});
                tokio::time::sleep(delays.next().unwrap_or(RELIST.max)).await;
            }
        }
    };
    *shared.failed.write().expect("informer lock") = None;
    listed
}

/// The first list: straight into the empty cache, no changes sent (nobody acts before sync).
fn fill<K: Resource>(shared: &Shared<K>, items: Vec<RawEvent>) {
    let mut cache = shared.cache.write().expect("informer lock");
    for raw in items {
        if let Some((key, obj)) = decode::<K>(&raw) {
            cache.index_add(&key, &obj, None);
            if let Some(tp) = &raw.traceparent {
                cache.traces.insert(key.clone(), Arc::from(tp.as_str()));
            }
            cache.objects.insert(key, Arc::new(obj));
        }
    }
}

/// A relist after an expired watch: every listed object whose version the cache lacks is
/// applied as a change, and every cached object the list no longer has is deleted, with its
/// cached version as the final one.
fn replace<K: Resource>(shared: &Shared<K>, items: Vec<RawEvent>) {
    let mut listed = HashSet::new();
    for raw in items {
        let Some((key, obj)) = decode::<K>(&raw) else {
            continue;
        };
        let unchanged = shared
            .cache
            .read()
            .expect("informer lock")
            .objects
            .get(&key)
            .is_some_and(|cached| cached.meta().resource_version == obj.meta().resource_version);
        listed.insert(key);
        if !unchanged {
            apply_at(shared, raw, false);
        }
    }
    let gone: Vec<(ObjectKey, Arc<K>)> = shared
        .cache
        .read()
        .expect("informer lock")
        .objects
        .iter()
        .filter(|(key, _)| !listed.contains(*key))
        .map(|(key, obj)| (key.clone(), obj.clone()))
        .collect();
    for (key, obj) in gone {
        let revision = obj.meta().resource_version.parse().unwrap_or(0);
        let raw = RawEvent {
            subject: subjects::object(&K::INFO.token(), &key.namespace, &key.name),
            revision,
            event: EventType::Deleted,
            payload: match codec::to_msgpack(obj.as_ref()) {
                Ok(bytes) => bytes.into(),
                Err(_) => continue,
            },
            request_id: None,
            traceparent: None,
            stored_at: None,
        };
        apply_at(shared, raw, false);
    }
}

fn publish_revision<K>(shared: &Shared<K>, revision: u64) {
    shared.revision.store(revision, Ordering::Release);
    shared.revision_tx.send_replace(revision);
}

fn decode<K: Resource>(raw: &RawEvent) -> Option<(ObjectKey, K)> {
    match codec::from_msgpack::<K>(&raw.payload) {
        Ok(mut obj) => {
            obj.meta_mut().resource_version = raw.revision.to_string();
            Some((ObjectKey::of(&obj), obj))
        }
        Err(e) => {
            // Acknowledge and move on: one bad message must not block the whole cache.
            tracing::error!(subject = %raw.subject, revision = raw.revision, error = %e,
                "undecodable object in the state log; skipped");
            None
        }
    }
}

fn apply<K: Resource>(shared: &Shared<K>, raw: RawEvent) {
    apply_at(shared, raw, true)
}

/// Applies one version; `publish` false during a relist, whose versions come out of log
/// order: the cache's revision then moves once, to the list's, when the relist is done.
fn apply_at<K: Resource>(shared: &Shared<K>, raw: RawEvent, publish: bool) {
    let Some((key, obj)) = decode::<K>(&raw) else {
        if publish {
            publish_revision(shared, raw.revision);
        }
        return;
    };
    let new = Arc::new(obj);
    // The index values are computed once, for the indexes and for keyed subscribers alike.
    let route = !shared.keyed.read().expect("informer lock").is_empty();
    let mut touched = Touched::new();
    let traceparent: Option<Arc<str>> = raw.traceparent.as_deref().map(Arc::from);
    if let Some(stored_at) = raw.stored_at {
        if let Ok(lag) = stored_at.elapsed() {
            shoal_telemetry::metrics()
                .informers
                .lag_seconds
                .get_or_create(&[("kind", K::INFO.token().to_string())])
                .observe(lag.as_secs_f64());
        }
    }
    let old = {
        let mut cache = shared.cache.write().expect("informer lock");
        let old = cache.objects.remove(&key);
        match (&traceparent, raw.event) {
            (Some(tp), e) if e != EventType::Deleted => {
                cache.traces.insert(key.clone(), tp.clone());
            }
            _ => {
                cache.traces.remove(&key);
            }
        }
        if let Some(old) = &old {
            cache.index_remove(&key, old, route.then_some(&mut touched));
        }
        if raw.event != EventType::Deleted {
            cache.index_add(&key, &new, route.then_some(&mut touched));
            cache.objects.insert(key.clone(), new.clone());
        } else if route {
            cache.index_values(&new, &mut touched);
        }
        old
    };
    let event = match (raw.event, &old) {
        (EventType::Deleted, _) => EventType::Deleted,
        (_, None) => EventType::Added,
        (_, Some(_)) => EventType::Modified,
    };
    if publish {
        publish_revision(shared, raw.revision);
    }
    let change = Change {
        event,
        key,
        old,
        new,
        revision: raw.revision,
        traceparent,
    };
    if route {
        send_keyed(shared, &change, touched);
    }
    let _ = shared.changes.send(change);
}

fn send_keyed<K: Resource>(shared: &Shared<K>, change: &Change<K>, mut targets: Touched) {
    let keyed = shared.keyed.read().expect("informer lock");
    targets.sort();
    targets.dedup();
    let mut closed = false;
    for target in &targets {
        for sub in keyed.get(target).into_iter().flatten() {
            match sub.tx.try_send(change.clone()) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    sub.lagged.store(true, Ordering::Release)
                }
                Err(mpsc::error::TrySendError::Closed(_)) => closed = true,
            }
        }
    }
    drop(keyed);
    if closed {
        let mut keyed = shared.keyed.write().expect("informer lock");
        for target in targets {
            if let Some(subs) = keyed.get_mut(&target) {
                subs.retain(|s| !s.tx.is_closed());
                if subs.is_empty() {
                    keyed.remove(&target);
                }
            }
        }
    }
}

/// One informer per kind per process, shared by every actor the process hosts, so 150,000
/// pods are cached once however many actors read them. Every informer it makes is indexed by
/// controller owner uid (`owner`), orphans by namespace (`orphans`) and, where the kind has
/// one, by `spec.nodeName`.
#[derive(Clone)]
pub struct InformerFactory {
    store: Store,
    informers: Arc<std::sync::Mutex<HashMap<&'static str, FactoryEntry>>>,
}

/// One kind's informer, typed away, with what inspection needs of it.
struct FactoryEntry {
    informer: Box<dyn std::any::Any + Send + Sync>,
    summarize: Box<dyn Fn() -> bus_schemas::inspect::CacheSummary + Send + Sync>,
}

pub const INDEX_OWNER: &str = "owner";
pub const INDEX_NODE: &str = "spec.nodeName";
/// Objects without a controller, by namespace: what a controller may adopt, found without
/// scanning every object of the namespace.
pub const INDEX_ORPHANS: &str = "orphans";

impl InformerFactory {
    pub fn new(store: Store) -> Self {
        InformerFactory {
            store,
            informers: Default::default(),
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The informer for `K` if this process already runs one and its initial list is in;
    /// never starts one (a read-through cache is only worth it where someone keeps it).
    pub fn existing<K: Resource>(&self) -> Option<Informer<K>> {
        let map = self.informers.lock().expect("factory lock");
        map.get(K::INFO.kind)
            .and_then(|existing| existing.informer.downcast_ref::<Informer<K>>())
            .filter(|informer| informer.is_synced())
            .cloned()
    }

    pub fn get<K: Resource>(&self) -> Informer<K> {
        let mut map = self.informers.lock().expect("factory lock");
        if let Some(existing) = map.get(K::INFO.kind) {
            if let Some(informer) = existing.informer.downcast_ref::<Informer<K>>() {
                return informer.clone();
            }
        }
        let informer = Informer::<K>::builder()
            .index(INDEX_OWNER, |obj: &K| {
                obj.meta()
                    .controller_ref()
                    .map(|r| vec![r.uid.clone()])
                    .unwrap_or_default()
            })
            .index(INDEX_ORPHANS, |obj: &K| {
                let meta = obj.meta();
                if meta.controller_ref().is_none() {
                    vec![meta.namespace.clone()]
                } else {
                    Vec::new()
                }
            })
            .index(INDEX_NODE, |obj: &K| {
                obj.field_value(INDEX_NODE)
                    .filter(|n| !n.is_empty())
                    .into_iter()
                    .collect()
            })
            .start(self.store.clone());
        let summarized = informer.clone();
        map.insert(
            K::INFO.kind,
            FactoryEntry {
                informer: Box::new(informer.clone()),
                summarize: Box::new(move || summarized.summary()),
            },
        );
        informer
    }

    /// A summary of every cache this process keeps, by kind.
    pub fn summaries(&self) -> Vec<bus_schemas::inspect::CacheSummary> {
        let map = self.informers.lock().expect("factory lock");
        let mut summaries: Vec<_> = map.values().map(|entry| (entry.summarize)()).collect();
        summaries.sort_by(|a, b| a.kind.cmp(&b.kind));
        summaries
    }
}
