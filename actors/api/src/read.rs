//! The read verbs: get from the state log, list from the shared cache (consistent: the cache
//! is first brought up to the log's newest revision for that kind).

use bus_schemas::api::{ListMeta, ListOptions, ObjectRef};
use bus_schemas::codec;
use bus_schemas::selector::{FieldSelector, Selector};
use bus_schemas::{subjects, Resource, Status};

use crate::reply::Reply;
use crate::request::Request;
use crate::state::{default_namespace, ApiServer};

/// Bytes kept free in a list page for the envelope and headers.
const PAGE_ENVELOPE: usize = 64 * 1024;

impl ApiServer {
    pub(crate) async fn get<K: Resource>(&self, req: &Request<'_>) -> Result<Reply, Status> {
        let r: ObjectRef = codec::from_msgpack_strict(req.payload)
            .map_err(|causes| Status::invalid("ObjectRef", "", causes))?;
        let ns = default_namespace::<K>(&r.namespace);
        match self.current::<K>(&ns, &r.name).await? {
            Some((obj, _)) => Reply::ok(&obj),
            None => Err(Status::not_found(K::INFO.kind, &ns, &r.name)),
        }
    }

    pub(crate) async fn list<K: Resource>(&self, req: &Request<'_>) -> Result<Reply, Status> {
        let options: ListOptions = codec::from_msgpack_strict(req.payload)
            .map_err(|causes| Status::invalid("ListOptions", "", causes))?;
        let labels = Selector::parse(&options.label_selector)
            .map_err(|e| Status::bad_request(format!("labelSelector: {e}")))?;
        let fields = FieldSelector::parse(&options.field_selector)
            .map_err(|e| Status::bad_request(format!("fieldSelector: {e}")))?;
        let probe = K::default();
        for requirement in fields.requirements() {
            let field = &requirement.field;
            if probe.field_value(field).is_none() {
                return Err(Status::bad_request(format!(
                    "fieldSelector: field label not supported for {}: {field}",
                    K::INFO.kind
                )));
            }
        }

        let informer = self.informers.get::<K>();
        informer
            .wait_synced()
            .await
            .map_err(|e| Status::new(bus_schemas::Reason::ServiceUnavailable, e.to_string()))?;
        // The first page is consistent: the cache first reaches the log's newest revision
        // of the kind, so a client lists what it just wrote. A later page continues that
        // list, which Kubernetes serves at the first page's revision: its token carries that
        // revision, and the cache (of whichever replica answers) need only have reached it.
        // Asking the log again (a wildcard lookup over every subject of the kind) for each of
        // kubectl's pages of 500 would only slow the list down.
        let resumed = ContinueToken::parse(&options.continue_token)?;
        let wanted = match &resumed {
            Some(token) => token.revision,
            None => {
                let filter = subjects::objects_of(&K::INFO.token(), None);
                self.store.last_revision_of(&filter).await.map_err(|e| {
                    Status::new(bus_schemas::Reason::ServiceUnavailable, e.to_string())
                })?
            }
        };
        let caught_up = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            informer.wait_for_revision(wanted),
        )
        .await;
        if caught_up.is_err() {
            return Err(Status::new(
                bus_schemas::Reason::Timeout,
                format!(
                    "cache of {} did not reach revision {wanted} in time",
                    K::INFO.plural
                ),
            ));
        }
        let revision = informer.revision();
        let first_revision = resumed.as_ref().map_or(revision, |t| t.revision);

        let namespace = if K::INFO.namespaced && !options.namespace.is_empty() {
            Some(default_namespace::<K>(&options.namespace))
        } else {
            None
        };
        // Only what sorts after the continue key is a candidate, and only the `limit`
        // smallest candidates need sorting: a list read in pages of 500 must not sort the
        // whole kind for every page (kubectl reads 10,000 pods in 20 pages).
        let after = resumed
            .as_ref()
            .map(|t| (t.namespace.as_str(), t.name.as_str()));
        let mut items: Vec<std::sync::Arc<K>> = informer
            .list(namespace.as_deref(), &labels)
            .into_iter()
            .filter(|o| {
                after.is_none_or(|(ns, name)| {
                    (o.meta().namespace.as_str(), o.meta().name.as_str()) > (ns, name)
                })
            })
            .collect();
        if !fields.is_everything() {
            items.retain(|obj| fields.matches(&|f| obj.field_value(f)));
        }
        let by_key = |a: &std::sync::Arc<K>, b: &std::sync::Arc<K>| {
            (&a.meta().namespace, &a.meta().name).cmp(&(&b.meta().namespace, &b.meta().name))
        };
        let limit = if options.limit == 0 {
            usize::MAX
        } else {
            options.limit as usize
        };
        if items.len() > limit {
            items.select_nth_unstable_by(limit, by_key);
        }
        let more_after_limit = items.len() > limit;
        items.truncate(limit);
        items.sort_unstable_by(by_key);

        // Each item is encoded once: for its size against the page's budget and for the
        // reply itself.
        let budget = self.max_payload.saturating_sub(PAGE_ENVELOPE);
        let mut page: Vec<Vec<u8>> = Vec::new();
        let mut used = 0;
        let mut continue_token = String::new();
        for (i, obj) in items.iter().enumerate() {
            let obj = self.opened(obj.clone())?;
            let encoded = codec::to_msgpack(obj.as_ref())
                .map_err(|e| Status::internal(format!("encoding the list: {e}")))?;
            if !page.is_empty() && used + encoded.len() > budget {
                continue_token = ContinueToken::after(first_revision, items[i - 1].meta());
                break;
            }
            used += encoded.len();
            page.push(encoded);
        }
        if continue_token.is_empty() && more_after_limit {
            if let Some(last) = items.last() {
                continue_token = ContinueToken::after(first_revision, last.meta());
            }
        }
        let metadata = ListMeta {
            resource_version: revision.to_string(),
            continue_token,
        };
        let payload = bus_schemas::api::encode_list_of_encoded(
            K::INFO.api_version,
            &format!("{}List", K::INFO.kind),
            &metadata,
            &page,
        )
        .map_err(|e| Status::internal(format!("encoding the list: {e}")))?;
        Ok(Reply::raw(payload))
    }
}

/// Where a paged list goes on: after `namespace/name`, in a list that began at `revision`.
/// Opaque to clients (`<revision>:<namespace>/<name>`); a token without the revision, as
/// replicas before it wrote, still continues (from revision 0).
#[derive(Debug, PartialEq, Eq)]
struct ContinueToken {
    revision: u64,
    namespace: String,
    name: String,
}

impl ContinueToken {
    fn after(revision: u64, last: &bus_schemas::ObjectMeta) -> String {
        format!("{revision}:{}/{}", last.namespace, last.name)
    }

    fn parse(token: &str) -> Result<Option<ContinueToken>, Status> {
        if token.is_empty() {
            return Ok(None);
        }
        let (revision, key) = match token.split_once(':') {
            Some((revision, key)) => (revision.parse::<u64>().ok(), key),
            None => (Some(0), token),
        };
        match (revision, key.split_once('/')) {
            (Some(revision), Some((namespace, name))) => Ok(Some(ContinueToken {
                revision,
                namespace: namespace.to_string(),
                name: name.to_string(),
            })),
            _ => Err(Status::bad_request(format!(
                "continue: {token:?} is not a continue token this API gave"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ContinueToken;

    #[test]
    fn continue_tokens_round_trip_and_bad_ones_are_refused() {
        let meta = bus_schemas::ObjectMeta {
            namespace: "default".into(),
            name: "web-1".into(),
            ..Default::default()
        };
        let token = ContinueToken::after(42, &meta);
        assert_eq!(
            ContinueToken::parse(&token).unwrap(),
            Some(ContinueToken {
                revision: 42,
                namespace: "default".into(),
                name: "web-1".into()
            })
        );
        assert_eq!(
            ContinueToken::parse("/node-a")
                .unwrap()
                .map(|t| (t.revision, t.name)),
            Some((0, "node-a".to_string()))
        );
        assert_eq!(ContinueToken::parse("").unwrap(), None);
        for bad in ["nonsense", "x:ns/name", "12:nokey"] {
            assert!(ContinueToken::parse(bad).is_err(), "{bad}");
        }
    }
}
