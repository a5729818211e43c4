"""The Python `kubernetes` client relists when its watch revision was compacted away (issue
14). Run by tests/python_client.rs with the kubeconfig path and a revision at or below the
state log's compaction revision; the pod `gone` was deleted (and purged) after it, `kept`
lives. Exits non-zero (with the reason) on the first thing that does not work."""

import sys

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException


def main(kubeconfig, old):
    config.load_kube_config(config_file=kubeconfig)
    core = client.CoreV1Api()
    try:
        for event in watch.Watch().stream(
            core.list_namespaced_pod, "default", resource_version=old, timeout_seconds=10
        ):
            raise AssertionError(f"a watch from a compacted revision served {event['type']}")
        raise AssertionError("the watch ended without 410")
    except ApiException as e:
        assert e.status == 410, e

    # What every Kubernetes client does on 410: list again, then watch from the list.
    listed = core.list_namespaced_pod("default")
    names = {p.metadata.name for p in listed.items}
    assert "kept" in names and "gone" not in names, names
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="after"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="main", image="shoal/busybox:1.35")]),
    )
    core.create_namespaced_pod("default", pod)
    for event in watch.Watch().stream(
        core.list_namespaced_pod,
        "default",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=10,
    ):
        if event["type"] == "ADDED" and event["object"].metadata.name == "after":
            print("ok: relisted after 410 and watched on")
            return
    raise AssertionError("the watch after the relist did not see the new pod")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
