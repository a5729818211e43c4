//! The kubeconfig `shoal up` writes: one cluster, user and context named `shoal`.

use base64::Engine;
use serde_json::json;

/// A kubeconfig for `server` (an `https://` or `http://` URL) trusting `ca_pem`.
pub fn render(server: &str, ca_pem: Option<&str>) -> String {
    let mut cluster = json!({"server": server});
    if let Some(ca) = ca_pem {
        cluster["certificate-authority-data"] =
            json!(base64::engine::general_purpose::STANDARD.encode(ca));
    }
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "shoal", "cluster": cluster}],
        // NOTE: the gateway acts with its own bus credential for every client and does not
        // check this token yet; mapping tokens or client certificates onto bus identities is
        // future work. A user without any credential makes kubectl prompt for a password.
        "users": [{"name": "shoal", "user": {"token": "shoal-admin"}}],
        "contexts": [{"name": "shoal", "context": {"cluster": "shoal", "user": "shoal", "namespace": "default"}}],
        "current-context": "shoal",
        "preferences": {},
    });
    serde_norway::to_string(&config).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_the_shoal_context() {
        let text = super::render("https://127.0.0.1:6443", Some("PEM"));
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
    }
}
