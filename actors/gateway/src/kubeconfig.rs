//! Kubeconfigs for the gateway: one cluster `shoal`, and one user holding an identity's
//! bearer token. The admin's (`shoal up`) has its context and user named `shoal`; another
//! identity's are `<identity>@shoal`, so several merge into one file without clashing.

use base64::Engine;
use serde_json::json;

/// The context (and user) name of `identity`'s kubeconfig.
pub fn context_name(identity: &str) -> String {
    if identity == "admin" {
        "shoal".to_string()
    } else {
        format!("{identity}@shoal")
    }
}

/// A kubeconfig for `server` (an `https://` or `http://` URL) trusting `ca_pem`, acting as
/// `identity` with its bearer `token` (`AuthDir::issue_token`).
pub fn render(server: &str, ca_pem: Option<&str>, identity: &str, token: &str) -> String {
    let mut cluster = json!({"server": server});
    if let Some(ca) = ca_pem {
        cluster["certificate-authority-data"] =
            json!(base64::engine::general_purpose::STANDARD.encode(ca));
    }
    let name = context_name(identity);
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "shoal", "cluster": cluster}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": "shoal", "user": name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    });
    serde_norway::to_string(&config).unwrap_or_default()
}

/// The bearer token of a kubeconfig's current user, if it has one: how `shoal up` keeps the
/// admin's token across restarts instead of invalidating copies of its kubeconfig.
pub fn token_of(text: &str) -> Option<String> {
    let v: serde_json::Value = serde_norway::from_str(text).ok()?;
    let current = v["current-context"].as_str()?;
    let context = v["contexts"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == current)?;
    let user = context["context"]["user"].as_str()?;
    v["users"].as_array()?.iter().find(|u| u["name"] == user)?["user"]["token"]
        .as_str()
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_the_shoal_context() {
        let text = super::render("https://127.0.0.1:6443", Some("PEM"), "admin", "shoal_t");
        let v: serde_json::Value = serde_norway::from_str(&text).unwrap();
        assert_eq!(v["current-context"], "shoal");
        assert_eq!(
            v["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:6443"
        );
        assert_eq!(
            v["clusters"][0]["cluster"]["certificate-authority-data"],
            "UEVN"
        );
        assert_eq!(super::token_of(&text).as_deref(), Some("shoal_t"));
    }

    #[test]
    fn another_identity_gets_its_own_context() {
        let text = super::render("https://h:6443", None, "alice", "shoal_a");
        let v: serde_json::Value = serde_norway::from_str(&text).unwrap();
        assert_eq!(v["current-context"], "alice@shoal");
        assert_eq!(v["users"][0]["name"], "alice@shoal");
        assert_eq!(super::token_of(&text).as_deref(), Some("shoal_a"));
    }
}
