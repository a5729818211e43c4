//! Callers' identities through stock kubectl: a bearer token names a bus identity, its role
//! decides every request (403 in Kubernetes' words, nothing written), `kubectl auth can-i`
//! and `whoami` answer from the same rules, and a wrong or revoked token is 401.

mod common;

use bus_schemas::roles::Role;
use common::{pod, Env, DEPLOYMENT};

/// What kubectl prints for a 401; 1.32 follows it with "(the server has asked for the client
/// to provide credentials)" when discovery is what was refused, as with kube-apiserver.
const UNAUTHORIZED: &str = "error: You must be logged in to the server";

#[actix::test]
async fn a_viewer_reads_but_every_write_is_forbidden_and_nothing_is_written() {
    let env = Env::start().await;
    let out = env.with_stdin(&["apply", "-f", "-"], DEPLOYMENT).await;
    assert!(out.ok, "{}", out.stderr);
    let viewer = env.kubeconfig_for("viewer1", &Role::Viewer);

    let out = env
        .kubectl_with(&viewer, &["get", "deployments", "-o", "name"])
        .await;
    assert!(out.ok, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "deployment.apps/web");
    assert!(env.kubectl_with(&viewer, &["get", "pods"]).await.ok);

    let manifest = env.write_file("p.yaml", &pod("intruder", "x"));
    let out = env
        .kubectl_with(&viewer, &["create", "-f", &manifest])
        .await;
    assert!(!out.ok);
    assert!(
        out.stderr.contains(r#"pods is forbidden: User "viewer1" cannot create resource "pods" in API group "" in the namespace "default""#),
        "{}",
        out.stderr
    );
    let out = env
        .kubectl_with(&viewer, &["delete", "deployment", "web"])
        .await;
    assert!(
        out.stderr.contains(r#"deployments.apps "web" is forbidden: User "viewer1" cannot delete resource "deployments" in API group "apps" in the namespace "default""#),
        "{}",
        out.stderr
    );
    let out = env
        .kubectl_with(&viewer, &["scale", "deployment", "web", "--replicas=5"])
        .await;
    assert!(
        out.stderr
            .contains(r#"cannot patch resource "deployments/scale" in API group "apps""#),
        "{}",
        out.stderr
    );
    let out = env
        .kubectl_with(&viewer, &["label", "deployment", "web", "tier=x"])
        .await;
    assert!(out.stderr.contains("is forbidden"), "{}", out.stderr);
    // A Secret's contents are not for viewers, watched or read.
    let out = env.kubectl_with(&viewer, &["get", "secrets"]).await;
    assert!(
        out.stderr
            .contains(r#"cannot list resource "secrets" in API group """#),
        "{}",
        out.stderr
    );

    // Nothing of it reached the state: the admin sees the deployment as it was.
    let spec = env
        .ok(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.replicas} {.metadata.labels}",
        ])
        .await;
    assert_eq!(spec, r#"2 {"app":"web"}"#);
    let missing = env.fails(&["get", "pod", "intruder"]).await;
    assert!(
        missing.contains("NotFound") || missing.contains("not found"),
        "{missing}"
    );
}

#[actix::test]
async fn auth_can_i_and_whoami_answer_from_the_role() {
    let env = Env::start().await;
    let viewer = env.kubeconfig_for("viewer2", &Role::Viewer);

    let out = env
        .kubectl_with(&viewer, &["auth", "can-i", "create", "pods"])
        .await;
    assert_eq!(out.code, Some(1), "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.starts_with("no"), "{}{}", out.stdout, out.stderr);
    let out = env
        .kubectl_with(&viewer, &["auth", "can-i", "get", "secrets"])
        .await;
    assert_eq!(
        (out.code, out.stdout.starts_with("no")),
        (Some(1), true),
        "{}",
        out.stdout
    );
    let out = env
        .kubectl_with(
            &viewer,
            &["auth", "can-i", "list", "pods", "-n", "kube-system"],
        )
        .await;
    assert_eq!(
        (out.code, out.stdout.trim()),
        (Some(0), "yes"),
        "{}",
        out.stderr
    );
    let out = env
        .kubectl_with(
            &viewer,
            &["auth", "can-i", "create", "pods", "--subresource", "exec"],
        )
        .await;
    assert_eq!(out.code, Some(1), "{}", out.stdout);

    let admin = env.kubectl(&["auth", "can-i", "create", "pods"]).await;
    assert_eq!(
        (admin.code, admin.stdout.trim()),
        (Some(0), "yes"),
        "{}",
        admin.stderr
    );
    let admin = env.kubectl(&["auth", "can-i", "create", "pods/exec"]).await;
    assert_eq!(admin.stdout.trim(), "yes", "{}", admin.stderr);
    let admin = env.kubectl(&["auth", "can-i", "*", "*"]).await;
    assert_eq!(admin.stdout.trim(), "yes", "{}", admin.stderr);

    let list = env
        .kubectl_with(&viewer, &["auth", "can-i", "--list"])
        .await;
    assert!(list.ok, "{}", list.stderr);
    let row = |resource: &str| {
        list.stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(resource))
            .map(str::to_string)
    };
    let pods = row("pods").unwrap_or_else(|| panic!("no pods row:\n{}", list.stdout));
    assert!(pods.ends_with("[get list watch]"), "{pods}");
    assert!(row("deployments.apps").is_some(), "{}", list.stdout);
    assert!(row("pods/log").is_some(), "{}", list.stdout);
    assert!(row("secrets").is_none(), "{}", list.stdout);
    assert!(row("pods/exec").is_none(), "{}", list.stdout);
    assert!(row("selfsubjectaccessreviews.authorization.k8s.io").is_some());

    let who = env.kubectl_with(&viewer, &["auth", "whoami"]).await;
    assert!(who.ok, "{}", who.stderr);
    assert!(
        who.stdout
            .lines()
            .any(|l| l.split_whitespace().eq(["Username", "viewer2"])),
        "{}",
        who.stdout
    );
    assert!(
        who.stdout.contains("[viewer system:authenticated]"),
        "{}",
        who.stdout
    );
    let who = env
        .ok(&[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ])
        .await;
    assert_eq!(who, "admin");
}

#[actix::test]
async fn a_missing_wrong_or_revoked_token_is_unauthorized() {
    let env = Env::start().await;
    // (No credential at all makes kubectl prompt for a password: python_client.rs checks
    // that case without kubectl.)
    let wrong = env.write_kubeconfig("guess", "shoal_0000");
    let out = env.kubectl_with(&wrong, &["get", "pods"]).await;
    assert!(out.stderr.contains(UNAUTHORIZED), "{}", out.stderr);
    let out = env
        .kubectl_with(&wrong, &["get", "--raw", "/version"])
        .await;
    assert!(
        !out.ok,
        "a bad credential is refused even where none is needed"
    );

    let viewer = env.kubeconfig_for("viewer3", &Role::Viewer);
    assert!(env.kubectl_with(&viewer, &["get", "pods"]).await.ok);
    // Revoked while this gateway runs: refused on its very next request.
    env.auth.revoke("viewer3").unwrap();
    let out = env.kubectl_with(&viewer, &["get", "pods"]).await;
    assert!(out.stderr.contains(UNAUTHORIZED), "{}", out.stderr);
    // A new token replaces the old one.
    let admin_again = env.write_kubeconfig("admin2", &env.auth.issue_token("admin").unwrap());
    assert!(env.kubectl_with(&admin_again, &["get", "pods"]).await.ok);
    let out = env.kubectl(&["get", "pods"]).await;
    assert!(out.stderr.contains(UNAUTHORIZED), "{}", out.stderr);
}
