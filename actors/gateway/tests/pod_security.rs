//! Pod security through stock kubectl: a refusal reads as Kubernetes' does, and the API's
//! warnings reach kubectl as `Warning:` lines.

mod common;

use common::Env;

const HOST_PATH_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: rooted
spec:
  volumes:
  - name: root
    hostPath:
      path: /
  containers:
  - name: main
    image: busybox:1.36
"#;

const LENIENT_NAMESPACE: &str = r#"
apiVersion: v1
kind: Namespace
metadata:
  name: lenient
  labels:
    pod-security.kubernetes.io/warn: restricted
"#;

const PLAIN_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: plain
  namespace: lenient
spec:
  containers:
  - name: main
    image: busybox:1.36
"#;

#[actix::test]
async fn kubectl_shows_refusals_and_warnings() {
    let env = Env::start().await;

    let out = env.with_stdin(&["apply", "-f", "-"], HOST_PATH_POD).await;
    assert!(
        !out.ok
            && out.stderr.contains(
                "pods \"rooted\" is forbidden: violates PodSecurity \"baseline:latest\": \
                 hostPath volumes (volume \"root\")"
            ),
        "{}",
        out.stderr
    );
    assert_eq!(
        env.ok(&["get", "pods", "-o", "name"]).await,
        "",
        "nothing written"
    );

    let out = env
        .with_stdin(&["apply", "-f", "-"], LENIENT_NAMESPACE)
        .await;
    assert!(out.ok, "{}", out.stderr);
    let out = env.with_stdin(&["apply", "-f", "-"], PLAIN_POD).await;
    assert!(out.ok, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("Warning: would violate PodSecurity \"restricted:latest\": ")
            && out.stderr.contains("runAsNonRoot != true"),
        "{}",
        out.stderr
    );
}
