"""The Python `kubernetes` client with bearer tokens: a viewer's token reads, its writes are
403 in Kubernetes' words, an access review answers for it, and no token or a wrong one is 401
(only /healthz is for anyone). Run by tests/python_client.rs with the viewer's kubeconfig and
identity name; exits non-zero (with the reason) on the first thing that does not work."""

import json
import ssl
import sys
import urllib.request

from kubernetes import client, config
from kubernetes.client.rest import ApiException


def refused(call, status):
    try:
        call()
    except ApiException as e:
        assert e.status == status, (e.status, e.body)
        return json.loads(e.body)
    raise AssertionError(f"expected {status}, the call succeeded")


def main(kubeconfig, name):
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    assert cfg.api_key.get("authorization", "").startswith("Bearer shoal_"), cfg.api_key
    core = client.CoreV1Api(client.ApiClient(cfg))
    core.list_namespaced_pod("default")

    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="py-denied"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="main", image="shoal/busybox:1.35")]),
    )
    body = refused(lambda: core.create_namespaced_pod("default", pod), 403)
    assert body["reason"] == "Forbidden", body
    want = f'pods is forbidden: User "{name}" cannot create resource "pods" in API group "" in the namespace "default"'
    assert body["message"] == want, body["message"]

    authz = client.AuthorizationV1Api(client.ApiClient(cfg))
    review = authz.create_self_subject_access_review(
        client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(
                resource_attributes=client.V1ResourceAttributes(verb="list", resource="pods", namespace="default")
            )
        )
    )
    assert review.status.allowed is True, review.status

    def bare(token):
        c = client.Configuration()
        c.host, c.ssl_ca_cert = cfg.host, cfg.ssl_ca_cert
        if token:
            c.api_key = {"authorization": f"Bearer {token}"}
        return client.CoreV1Api(client.ApiClient(c))

    for token in [None, "shoal_wrong"]:
        body = refused(lambda: bare(token).list_namespaced_pod("default"), 401)
        assert body["reason"] == "Unauthorized", body

    tls = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
    with urllib.request.urlopen(cfg.host + "/healthz", context=tls) as r:
        assert r.status == 200, r.status
    try:
        urllib.request.urlopen(cfg.host + "/api", context=tls)
        raise AssertionError("anonymous discovery was served")
    except urllib.error.HTTPError as e:
        assert e.code == 401, e.code
    print("ok: viewer token reads, 403 on create, review answered, 401 without a good token")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
