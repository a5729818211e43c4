//! The gateway's side of the bus: untyped API requests (objects as JSON values) and the
//! conversion of client JSON into the typed, strictly checked msgpack the API actors take.

use bus_schemas::api::{ListOptions, ObjectList, ObjectRef};
use bus_schemas::subjects::Verb;
use bus_schemas::{codec, with_kind, Cause, Reason, Status};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use shoal_bus::client::decode_reply;
use shoal_bus::{ApiClient, ApiError, Store};

use crate::resources::RestResource;

/// Everything a handler needs from the bus; cheap to clone.
#[derive(Clone)]
pub struct Bus {
    pub api: ApiClient,
    pub nats: async_nats::Client,
    pub store: Store,
    /// Shared log consumers for this replica's watches.
    pub watches: crate::watch_hub::WatchHub,
}

/// How unknown fields in a request body are treated (`fieldValidation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Strict,
    Ignore,
}

impl FieldValidation {
    /// `Strict` refuses unknown fields; `Warn` and `Ignore` drop them (the API actors
    /// themselves are always strict, so anything dropped here never reaches them).
    pub fn from_query(value: Option<&str>) -> FieldValidation {
        match value {
            Some("Strict") => FieldValidation::Strict,
            _ => FieldValidation::Ignore,
        }
    }
}

impl Bus {
    pub async fn call<B: Serialize>(
        &self,
        resource: &RestResource,
        verb: Verb,
        body: &B,
    ) -> Result<(Value, async_nats::HeaderMap), ApiError> {
        let body = codec::to_msgpack(body)
            .map_err(|e| ApiError::Status(Status::bad_request(format!("cannot encode: {e}"))))?;
        self.call_raw(resource, verb, body).await
    }

    pub async fn call_raw(
        &self,
        resource: &RestResource,
        verb: Verb,
        body: Vec<u8>,
    ) -> Result<(Value, async_nats::HeaderMap), ApiError> {
        self.call_raw_with(resource, verb, body, async_nats::HeaderMap::new())
            .await
    }

    /// As [`Bus::call_raw`], with request headers (the field manager, force).
    pub async fn call_raw_with(
        &self,
        resource: &RestResource,
        verb: Verb,
        body: Vec<u8>,
        headers: async_nats::HeaderMap,
    ) -> Result<(Value, async_nats::HeaderMap), ApiError> {
        let token = resource.info.token();
        let reply = self
            .api
            .request_raw_with(&token, verb, body, headers)
            .await?;
        let subject = bus_schemas::subjects::api(&token, verb);
        let (mut value, headers) = decode_reply::<Value>(&subject, reply)?;
        with_type_meta(&mut value, resource);
        Ok((value, headers))
    }

    pub async fn get(
        &self,
        resource: &RestResource,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        let body = ObjectRef {
            namespace: namespace.into(),
            name: name.into(),
        };
        Ok(self.call(resource, Verb::Get, &body).await?.0)
    }

    /// One page of a list, as `<Kind>List` JSON with `items` always present.
    pub async fn list(
        &self,
        resource: &RestResource,
        options: &ListOptions,
    ) -> Result<ObjectList<Value>, ApiError> {
        let mut list = self.list_of::<Value>(resource, options).await?;
        for item in &mut list.items {
            with_type_meta(item, resource);
        }
        list.api_version = resource.api_version().to_string();
        list.kind = format!("{}List", resource.kind());
        Ok(list)
    }

    /// One page of a list with its items decoded straight from the reply as `T`: the kind's
    /// own type where no JSON of the objects is needed (Table rows). Items as the bus stores
    /// them, without `apiVersion`/`kind` filled in or conversion to the served version.
    pub async fn list_of<T: DeserializeOwned>(
        &self,
        resource: &RestResource,
        options: &ListOptions,
    ) -> Result<ObjectList<T>, ApiError> {
        let mut list = self.list_once(resource, options).await?;
        if list.metadata.resource_version == "0" {
            // The API answers revision 0 for a kind never written, and to a watch "0" means
            // "any state", not "after this list". Re-list after reading the log's revision:
            // if still nothing of this kind was written, the list holds at that revision.
            let floor = self.store.last_revision().await.map_err(|e| {
                ApiError::Status(Status::new(Reason::ServiceUnavailable, e.to_string()))
            })?;
            list = self.list_once(resource, options).await?;
            if list.metadata.resource_version == "0" {
                list.metadata.resource_version = floor.to_string();
            }
        }
        Ok(list)
    }
}

impl Bus {
    async fn list_once<T: DeserializeOwned>(
        &self,
        resource: &RestResource,
        options: &ListOptions,
    ) -> Result<ObjectList<T>, ApiError> {
        // Decoded straight into the list: lists are the large replies.
        let body = codec::to_msgpack(options)
            .map_err(|e| ApiError::Status(Status::bad_request(format!("cannot encode: {e}"))))?;
        let token = resource.info.token();
        let reply = self.api.request_raw(&token, Verb::List, body).await?;
        let subject = bus_schemas::subjects::api(&token, Verb::List);
        Ok(decode_reply::<ObjectList<T>>(&subject, reply)?.0)
    }
}

/// Sets `apiVersion` and `kind` where the stored object left them out (kubectl decodes
/// every object by them), and converts the object to the version the client asked for.
/// Every object the gateway answers with passes here.
pub fn with_type_meta(value: &mut Value, resource: &RestResource) {
    if let Some(map) = value.as_object_mut() {
        if map
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
            && map.contains_key("metadata")
        {
            map.insert("kind".into(), resource.kind().into());
            map.insert("apiVersion".into(), resource.info.api_version.into());
        }
    }
    crate::convert::to_served(value, resource);
}

/// Decodes a client's object into the kind's type and encodes it for the bus. Strict
/// validation reports every unknown field with its path; lenient validation drops them.
pub fn encode_object(
    resource: &RestResource,
    value: Value,
    validation: FieldValidation,
) -> Result<Vec<u8>, Status> {
    let kind = resource.kind();
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let value = crate::convert::to_bus(value, resource)?;
    with_kind!(kind, K => {
        let decoded: Result<K, Vec<Cause>> = codec::from_json_value_strict(value.clone());
        let object: K = match decoded {
            Ok(object) => object,
            Err(causes) => {
                let only_unknown = causes.iter().all(|c| c.reason == "FieldValueUnknown");
                if validation == FieldValidation::Ignore && only_unknown {
                    serde_json::from_value(value)
                        .map_err(|e| decode_status(resource, &name, vec![Cause::new("FieldValueTypeInvalid", "", e.to_string())]))?
                } else {
                    return Err(decode_status(resource, &name, causes));
                }
            }
        };
        codec::to_msgpack(&object).map_err(|e| Status::internal(format!("encoding {kind}: {e}")))
    }, _ => Err(Status::new(Reason::NotFound, format!("no kind {kind:?} is served")))
    )
}

/// A body that does not decode as its kind: 400, as Kubernetes' strict decoding reports it,
/// with each field path as a cause.
pub fn decode_status(resource: &RestResource, name: &str, causes: Vec<Cause>) -> Status {
    let kind = resource.kind();
    let list: Vec<String> = causes
        .iter()
        .map(|c| match c.reason.as_str() {
            "FieldValueUnknown" => format!("unknown field {:?}", c.field),
            _ => c.to_string(),
        })
        .collect();
    Status::new(
        Reason::BadRequest,
        format!(
            "{kind} in version {:?} cannot be handled as a {kind}: strict decoding error: {}",
            resource.version,
            list.join(", ")
        ),
    )
    .with_details(kind, name, causes)
}
