//! The read verbs: get from the state log, list from the shared cache (consistent: the cache
//! is first brought up to the log's newest revision for that kind).

use bus_schemas::api::{ListMeta, ListOptions, ObjectList, ObjectRef};
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
        let filter = subjects::objects_of(&K::INFO.token(), None);
        let newest = self
            .store
            .last_revision_of(&filter)
            .await
            .map_err(|e| Status::new(bus_schemas::Reason::ServiceUnavailable, e.to_string()))?;
        let caught_up = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            informer.wait_for_revision(newest),
        )
        .await;
        if caught_up.is_err() {
            return Err(Status::new(
                bus_schemas::Reason::Timeout,
                format!(
                    "cache of {} did not reach revision {newest} in time",
                    K::INFO.plural
                ),
            ));
        }

        let namespace = if K::INFO.namespaced && !options.namespace.is_empty() {
            Some(default_namespace::<K>(&options.namespace))
        } else {
            None
        };
        let mut items = informer
            .list(namespace.as_deref(), &labels)
            .into_iter()
            .map(|obj| self.opened(obj))
            .collect::<Result<Vec<_>, Status>>()?;
        if !fields.is_everything() {
            items.retain(|obj| fields.matches(&|f| obj.field_value(f)));
        }
        items.sort_by(|a, b| {
            (&a.meta().namespace, &a.meta().name).cmp(&(&b.meta().namespace, &b.meta().name))
        });
        let start = match options.continue_token.split_once('/') {
            Some((ns, name)) if !options.continue_token.is_empty() => items.partition_point(|o| {
                (o.meta().namespace.as_str(), o.meta().name.as_str()) <= (ns, name)
            }),
            _ => 0,
        };

        let budget = self.max_payload.saturating_sub(PAGE_ENVELOPE);
        let limit = if options.limit == 0 {
            usize::MAX
        } else {
            options.limit as usize
        };
        let mut page = Vec::new();
        let mut used = 0;
        let mut continue_token = String::new();
        for obj in &items[start..] {
            let size = codec::to_msgpack(obj.as_ref())
                .map(|b| b.len())
                .unwrap_or(0);
            if !page.is_empty() && (page.len() >= limit || used + size > budget) {
                let last: &K = page
                    .last()
                    .map(|o: &std::sync::Arc<K>| o.as_ref())
                    .expect("page");
                continue_token = format!("{}/{}", last.meta().namespace, last.meta().name);
                break;
            }
            used += size;
            page.push(obj.clone());
        }
        let list = ObjectList {
            api_version: K::INFO.api_version.to_string(),
            kind: format!("{}List", K::INFO.kind),
            metadata: ListMeta {
                resource_version: informer.revision().to_string(),
                continue_token,
            },
            items: page.iter().map(|o| o.as_ref()).collect::<Vec<&K>>(),
        };
        Reply::ok(&list)
    }
}
