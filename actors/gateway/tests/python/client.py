"""The Python `kubernetes` client against the Shoal gateway: list, watch, create, patch and
delete. Run by tests/python_client.rs with the kubeconfig path as the only argument; exits
non-zero (with the reason) on the first thing that does not work."""

import sys

from kubernetes import client, config, watch


def main(kubeconfig):
    config.load_kube_config(config_file=kubeconfig)
    core = client.CoreV1Api()
    apps = client.AppsV1Api()

    namespaces = [n.metadata.name for n in core.list_namespace().items]
    assert "default" in namespaces, namespaces

    listed = core.list_namespaced_pod("default")
    start = listed.metadata.resource_version
    assert start, "a list carries its resourceVersion"

    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="py", labels={"app": "py"}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="main", image="shoal/busybox:1.35")]),
    )
    created = core.create_namespaced_pod("default", pod)
    assert created.metadata.uid, created

    # A dict body is sent as a strategic merge patch.
    patched = core.patch_namespaced_pod("py", "default", {"metadata": {"labels": {"tier": "a"}}})
    assert patched.metadata.labels == {"app": "py", "tier": "a"}, patched.metadata.labels

    deployment = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="pyweb"),
        spec=client.V1DeploymentSpec(
            replicas=1,
            selector=client.V1LabelSelector(match_labels={"app": "pyweb"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "pyweb"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="web", image="shoal/busybox:1.35")]),
            ),
        ),
    )
    apps.create_namespaced_deployment("default", deployment)
    # A list body is sent as a JSON patch.
    apps.patch_namespaced_deployment(
        "pyweb", "default", [{"op": "replace", "path": "/spec/replicas", "value": 2}]
    )
    assert apps.read_namespaced_deployment("pyweb", "default").spec.replicas == 2

    core.delete_namespaced_pod("py", "default", grace_period_seconds=0)
    apps.delete_namespaced_deployment("pyweb", "default")

    # Every change since the first list, in order, through a watch.
    seen = []
    stream = watch.Watch().stream(
        core.list_namespaced_pod, "default", resource_version=start, timeout_seconds=2
    )
    everything = []
    for event in stream:
        everything.append((event["type"], event["object"].metadata.name))
        if event["object"].metadata.name == "py":
            seen.append(event["type"])
    assert everything, "no event at all since " + start
    assert seen and seen[0] == "ADDED" and seen[-1] == "DELETED", everything
    assert "MODIFIED" in seen, seen
    print("python client: list, create, patch, delete and watch ok:", seen)


if __name__ == "__main__":
    main(sys.argv[1])
