//! Who a write is recorded as in `metadata.managedFields`: Kubernetes' `fieldManager` and
//! `force` query parameters, passed on as the bus' `Shoal-Field-Manager` and `Shoal-Force`
//! request headers, which the API actors' server-side apply reads.

use bus_schemas::api::{HEADER_FIELD_MANAGER, HEADER_FORCE};
use bus_schemas::{Cause, Status};

use crate::http::Request;

/// Kubernetes refuses longer manager names.
const MAX_MANAGER_LEN: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer {
    pub manager: Option<String>,
    pub force: bool,
}

impl Writer {
    /// For create, update and the non-apply patches: the client's `fieldManager`, else its
    /// User-Agent up to the first `/`, the name Kubernetes gives such writers (`kubectl`).
    pub fn for_update(req: &Request) -> Result<Writer, Status> {
        if req.param("force").is_some() {
            return Err(invalid(Cause::new(
                "FieldValueForbidden",
                "force",
                "may not be specified for non-apply patch",
            )));
        }
        let manager = match req.param("fieldManager") {
            Some(named) => Some(checked(named)?),
            None => {
                let agent = req.user_agent().split('/').next().unwrap_or("").trim();
                (!agent.is_empty()).then(|| agent.chars().take(MAX_MANAGER_LEN).collect())
            }
        };
        Ok(Writer {
            manager,
            force: false,
        })
    }

    /// For server-side apply, where the manager is what the merge is about: required.
    pub fn for_apply(req: &Request) -> Result<Writer, Status> {
        let Some(named) = req.param("fieldManager") else {
            return Err(invalid(Cause::new(
                "FieldValueRequired",
                "fieldManager",
                "is required for apply patch",
            )));
        };
        Ok(Writer {
            manager: Some(checked(named)?),
            force: req.flag("force"),
        })
    }

    pub fn headers(&self) -> async_nats::HeaderMap {
        let mut headers = async_nats::HeaderMap::new();
        if let Some(manager) = &self.manager {
            headers.insert(HEADER_FIELD_MANAGER, manager.as_str());
        }
        if self.force {
            headers.insert(HEADER_FORCE, "true");
        }
        headers
    }
}

fn checked(manager: &str) -> Result<String, Status> {
    if manager.chars().count() > MAX_MANAGER_LEN || manager.chars().any(char::is_control) {
        return Err(invalid(Cause::invalid(
            "fieldManager",
            format!("must be at most {MAX_MANAGER_LEN} printable characters"),
        )));
    }
    Ok(manager.to_string())
}

fn invalid(cause: Cause) -> Status {
    Status::invalid("PatchOptions", "", vec![cause])
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::{HeaderValue, USER_AGENT};

    fn request(query: &str, agent: &str) -> Request {
        let mut headers = hyper::HeaderMap::new();
        headers.insert(USER_AGENT, HeaderValue::from_str(agent).unwrap());
        Request {
            method: hyper::Method::PATCH,
            path: "/".into(),
            query: crate::http::parse_query(Some(query)),
            headers,
            body: Default::default(),
        }
    }

    #[test]
    fn updates_are_recorded_under_the_named_manager_or_the_user_agent() {
        let named = Writer::for_update(&request("fieldManager=kubectl-edit", "kubectl/v1.32.4"));
        assert_eq!(named.unwrap().manager.as_deref(), Some("kubectl-edit"));
        let agent = Writer::for_update(&request("", "kubectl/v1.32.4 (linux/amd64)"));
        assert_eq!(agent.unwrap().manager.as_deref(), Some("kubectl"));
        let forced = Writer::for_update(&request("force=true", "kubectl/v1.32.4"));
        assert_eq!(
            forced.unwrap_err().details.unwrap().causes[0].field,
            "force"
        );
    }

    #[test]
    fn apply_needs_a_manager_and_may_force() {
        let missing = Writer::for_apply(&request("", "kubectl/v1.32.4")).unwrap_err();
        assert_eq!(missing.details.unwrap().causes[0].field, "fieldManager");
        let forced = Writer::for_apply(&request("fieldManager=ops&force=true", "x")).unwrap();
        assert_eq!(
            (forced.manager.as_deref(), forced.force),
            (Some("ops"), true)
        );
        let headers = forced.headers();
        assert_eq!(headers.get(HEADER_FIELD_MANAGER).unwrap().as_str(), "ops");
        assert_eq!(headers.get(HEADER_FORCE).unwrap().as_str(), "true");
        let long = "m".repeat(MAX_MANAGER_LEN + 1);
        assert!(Writer::for_apply(&request(&format!("fieldManager={long}"), "x")).is_err());
    }
}
