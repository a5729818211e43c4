//! The in-memory index queries are answered from, and the [`Builder`] that keeps it current.
//!
//! [`Index`] maps each existing name (lowercase, uncompressed wire form) to its pre-encoded
//! [`Entry`]; serving threads take a read lock, look up and copy. The builder (one task)
//! remembers what every source contributed, and on each change re-encodes only the names
//! whose records changed, then swaps them in under a short write lock.
//!
//! Names that hold nothing but have names below them (`default.svc.<domain>`,
//! `_tcp.web.default.svc.<domain>`) exist too, answering NOERROR with no records: NXDOMAIN
//! would tell a resolver that nothing exists below (RFC 8020).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use hickory_proto::rr::Name;

use crate::encode::{self, Entry, Section};
use crate::names::Domain;
use crate::records::{Contribution, RecordData, Source};

/// Answers' TTL, and the negative-caching TTL of the SOA: short, as pods come and go.
pub const DEFAULT_TTL: u32 = 5;

pub struct Index {
    domain: Domain,
    apex_key: Box<[u8]>,
    ttl: u32,
    /// SOA for the authority section of NXDOMAIN and NODATA answers.
    negative: Section,
    /// The OPT record of EDNS responses.
    opt: Box<[u8]>,
    table: RwLock<HashMap<Box<[u8]>, Entry>>,
    synced: AtomicBool,
}

#[derive(Debug, thiserror::Error)]
#[error("encoding the zone's own records: {0}")]
pub struct IndexError(#[from] hickory_proto::ProtoError);

impl Index {
    pub fn new(domain: Domain, ttl: u32) -> Result<Index, IndexError> {
        let apex = domain.name().clone();
        let serial = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as u32)
            .unwrap_or(1);
        let soa = encode::soa(&apex, serial, ttl)?;
        let apex_entry = encode::entry(&apex, &BTreeSet::new(), Some(&soa), ttl)?;
        let apex_key: Box<[u8]> = wire_key(&apex).into();
        let mut table = HashMap::new();
        table.insert(apex_key.clone(), apex_entry);
        Ok(Index {
            negative: encode::negative(&apex, &soa, ttl)?,
            opt: encode::opt_record()?,
            domain,
            apex_key,
            ttl,
            table: RwLock::new(table),
            synced: AtomicBool::new(false),
        })
    }

    pub fn domain(&self) -> &Domain {
        &self.domain
    }

    pub fn ttl(&self) -> u32 {
        self.ttl
    }

    pub fn negative(&self) -> &Section {
        &self.negative
    }

    pub fn opt(&self) -> &[u8] {
        &self.opt
    }

    /// Whether `key` (lowercase wire form) is the apex or below it.
    pub fn in_zone(&self, key: &[u8]) -> bool {
        let mut at = 0;
        while let Some(rest) = key.get(at..) {
            if rest == &*self.apex_key {
                return true;
            }
            match rest.first() {
                Some(&len) if len > 0 => at += len as usize + 1,
                _ => return false,
            }
        }
        false
    }

    /// Runs `f` on the entry of `key` (lowercase wire form) under the read lock.
    pub fn with_entry<R>(&self, key: &[u8], f: impl FnOnce(Option<&Entry>) -> R) -> R {
        let table = self.table.read().unwrap_or_else(|e| e.into_inner());
        f(table.get(key))
    }

    /// Until the caches have loaded, an empty index is not evidence that names do not exist.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    pub fn set_synced(&self) {
        self.synced.store(true, Ordering::Release);
    }

    /// The number of names the index holds (with the apex).
    pub fn len(&self) -> usize {
        self.table.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The lookup key of a name: its uncompressed wire form, lowercase.
pub fn wire_key(name: &Name) -> Vec<u8> {
    let mut key = Vec::with_capacity(encode::wire_len(name));
    for label in name.iter() {
        key.push(label.len() as u8);
        key.extend(label.iter().map(u8::to_ascii_lowercase));
    }
    key.push(0);
    key
}

#[derive(Default)]
struct NameState {
    /// The records each source puts here; a source with no records still makes the name exist.
    own: Vec<(Source, Vec<RecordData>)>,
    /// How many names with sources of their own lie below this one.
    below: u32,
}

impl NameState {
    fn exists(&self) -> bool {
        !self.own.is_empty() || self.below > 0
    }
}

/// Keeps the [`Index`] equal to the union of every source's contribution.
pub struct Builder {
    index: Arc<Index>,
    by_source: HashMap<Source, Contribution>,
    names: HashMap<String, NameState>,
}

impl Builder {
    pub fn new(index: Arc<Index>) -> Builder {
        Builder {
            index,
            by_source: HashMap::new(),
            names: HashMap::new(),
        }
    }

    pub fn index(&self) -> &Arc<Index> {
        &self.index
    }

    pub fn sources(&self) -> impl Iterator<Item = &Source> {
        self.by_source.keys()
    }

    /// Replaces what `source` contributes (an empty contribution removes it) and publishes the
    /// names that changed.
    pub fn set(&mut self, source: Source, mut contribution: Contribution) {
        let domain = self.index.domain.clone();
        contribution.retain(|name, _| domain.contains(name) && name != domain.as_str());
        let old = self.by_source.remove(&source).unwrap_or_default();
        if old == contribution {
            if !contribution.is_empty() {
                self.by_source.insert(source, contribution);
            }
            return;
        }
        let mut touched = BTreeSet::new();
        for (name, records) in &old {
            if contribution.get(name) != Some(records) {
                self.remove_own(name, &source, &mut touched);
            }
        }
        for (name, records) in &contribution {
            if old.get(name) != Some(records) {
                self.add_own(name, &source, records, &mut touched);
            }
        }
        if !contribution.is_empty() {
            self.by_source.insert(source, contribution);
        }
        self.publish(touched);
    }

    fn add_own(
        &mut self,
        name: &str,
        source: &Source,
        records: &[RecordData],
        touched: &mut BTreeSet<String>,
    ) {
        let state = self.names.entry(name.to_string()).or_default();
        let had_own = !state.own.is_empty();
        state.own.retain(|(s, _)| s != source);
        state.own.push((source.clone(), records.to_vec()));
        touched.insert(name.to_string());
        if had_own {
            return;
        }
        for ancestor in self.index.domain.ancestors(name) {
            let state = self.names.entry(ancestor.to_string()).or_default();
            state.below += 1;
            if state.below == 1 && state.own.is_empty() {
                touched.insert(ancestor.to_string());
            }
        }
    }

    fn remove_own(&mut self, name: &str, source: &Source, touched: &mut BTreeSet<String>) {
        let Some(state) = self.names.get_mut(name) else {
            return;
        };
        let before = state.own.len();
        state.own.retain(|(s, _)| s != source);
        if state.own.len() == before {
            return;
        }
        touched.insert(name.to_string());
        let lost_own = state.own.is_empty();
        if !state.exists() {
            self.names.remove(name);
        }
        if !lost_own {
            return;
        }
        for ancestor in self.index.domain.ancestors(name) {
            let Some(state) = self.names.get_mut(ancestor) else {
                continue;
            };
            state.below = state.below.saturating_sub(1);
            if !state.exists() {
                self.names.remove(ancestor);
                touched.insert(ancestor.to_string());
            }
        }
    }

    fn publish(&mut self, touched: BTreeSet<String>) {
        let mut updates = Vec::with_capacity(touched.len());
        for name in touched {
            let owner = match Name::from_ascii(&name) {
                Ok(mut n) => {
                    n.set_fqdn(true);
                    n
                }
                Err(e) => {
                    tracing::warn!(%name, error = %e, "not a valid DNS name; not served");
                    continue;
                }
            };
            let key: Box<[u8]> = wire_key(&owner).into();
            let entry = self.names.get(&name).filter(|s| s.exists()).map(|state| {
                let records: BTreeSet<RecordData> = state
                    .own
                    .iter()
                    .flat_map(|(_, r)| r.iter().cloned())
                    .collect();
                encode::entry(&owner, &records, None, self.index.ttl).unwrap_or_else(|e| {
                    tracing::warn!(%name, error = %e, "records not encodable; name served empty");
                    Entry::default()
                })
            });
            updates.push((key, entry));
        }
        let mut table = self.index.table.write().unwrap_or_else(|e| e.into_inner());
        for (key, entry) in updates {
            match entry {
                Some(entry) => {
                    table.insert(key, entry);
                }
                None => {
                    table.remove(&key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::RecordType;
    use shoal_bus::ObjectKey;

    fn builder() -> Builder {
        let domain = Domain::new("cluster.local").unwrap();
        Builder::new(Arc::new(Index::new(domain, 5).unwrap()))
    }

    fn key(name: &str) -> Vec<u8> {
        wire_key(&Name::from_ascii(name).unwrap())
    }

    /// None: no such name; Some(false): exists without A records; Some(true): has A records.
    fn a_state(b: &Builder, name: &str) -> Option<bool> {
        b.index.with_entry(&key(name), |e| {
            e.map(|e| e.section(RecordType::A).is_some())
        })
    }

    fn source(name: &str) -> Source {
        Source::Service(ObjectKey::new("default", name))
    }

    fn contribution(pairs: &[(&str, Option<&str>)]) -> Contribution {
        let mut c = Contribution::new();
        for (name, ip) in pairs {
            let records = c.entry(name.to_string()).or_default();
            if let Some(ip) = ip {
                records.push(RecordData::A(ip.parse().unwrap()));
            }
        }
        c
    }

    #[test]
    fn names_and_their_ancestors_come_and_go() {
        let mut b = builder();
        assert_eq!(a_state(&b, "cluster.local"), Some(false));
        b.set(
            source("web"),
            contribution(&[("web.default.svc.cluster.local", Some("10.96.0.1"))]),
        );
        assert_eq!(a_state(&b, "web.default.svc.cluster.local"), Some(true));
        assert_eq!(a_state(&b, "default.svc.cluster.local"), Some(false));
        assert_eq!(a_state(&b, "svc.cluster.local"), Some(false));
        assert_eq!(a_state(&b, "other.default.svc.cluster.local"), None);

        b.set(
            source("db"),
            contribution(&[("db.default.svc.cluster.local", None)]),
        );
        b.set(source("web"), Contribution::new());
        assert_eq!(a_state(&b, "web.default.svc.cluster.local"), None);
        assert_eq!(a_state(&b, "db.default.svc.cluster.local"), Some(false));
        assert_eq!(a_state(&b, "default.svc.cluster.local"), Some(false));
        b.set(source("db"), Contribution::new());
        assert_eq!(a_state(&b, "default.svc.cluster.local"), None);
        assert_eq!(a_state(&b, "svc.cluster.local"), None);
        assert_eq!(b.index.len(), 1, "only the apex is left");
        assert!(b.names.is_empty());
    }

    #[test]
    fn shared_names_keep_records_until_the_last_source_goes() {
        let mut b = builder();
        let name = "10-0-0-1.default.pod.cluster.local";
        let p1 = Source::Pod(ObjectKey::new("default", "p1"));
        let p2 = Source::Pod(ObjectKey::new("default", "p2"));
        b.set(p1.clone(), contribution(&[(name, Some("10.0.0.1"))]));
        b.set(p2.clone(), contribution(&[(name, Some("10.0.0.1"))]));
        b.set(p1, Contribution::new());
        assert_eq!(a_state(&b, name), Some(true));
        b.set(p2, Contribution::new());
        assert_eq!(a_state(&b, name), None);
    }

    #[test]
    fn names_outside_the_domain_are_ignored() {
        let mut b = builder();
        b.set(
            source("x"),
            contribution(&[("x.example.com", Some("10.0.0.1")), ("cluster.local", None)]),
        );
        assert_eq!(b.index.len(), 1);
    }

    #[test]
    fn zone_membership_is_by_whole_labels() {
        let b = builder();
        assert!(b.index.in_zone(&key("a.b.cluster.local")));
        assert!(b.index.in_zone(&key("cluster.local")));
        assert!(!b.index.in_zone(&key("acluster.local")));
        assert!(!b.index.in_zone(&key("example.com")));
        assert!(!b.index.in_zone(&[3, b'a']));
    }
}
