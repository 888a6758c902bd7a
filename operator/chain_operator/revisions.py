"""Which node pods run the StatefulSet's pod template, and the hold that keeps the others where they are.

A change of anything in the pod template (the image, the chart's labels, an environment variable, a probe) gives
the StatefulSet a new `status.updateRevision`; every pod carries the revision it was made from in its
`controller-revision-hash` label. A pod is *current* when it exists, carries the update revision (when both are
known) and runs the template's image; any other pod is *outdated* and waits for the operator to release it.

The hold is the StatefulSet partition at `replicas`: the controller replaces only the pods whose ordinal is at
or above the partition, so none. The chart renders it so in every render and the operator puts it back after
each rollout (and on a scale), so a template change made by anyone (helm, a GitOps sync, kubectl) moves no pod
until the operator lowers the partition, one ordinal at a time, each after the rollout gates pass
(upgrade.release_next). A render applied during a rollout raises the partition to `replicas` again: the
`settled` ordinal (the lowest from which every pod up to the top is current) is where the operator takes it
back down to at once, since lowering it there replaces nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from chain_operator.errors import KubeNotFound
from chain_operator.kube import KubeApi, Obj, pod_path
from chain_operator.nodes import PodView, pod_view
from chain_operator.spec import Network, same_image

REVISION_LABEL = "controller-revision-hash"
UNOBSERVED_WAIT = 0.5  # seconds before looking again at a StatefulSet whose controller has not seen its spec yet


def spec_observed(sts: Obj) -> bool:
    """Has the StatefulSet controller observed the current spec? While it has not (its status is older than the
    object's generation: a render just applied), the status's revisions and the pods judged by them say
    nothing about the new template, so nothing may be decided from them."""
    status = sts.get("status") or {}
    generation = (sts.get("metadata") or {}).get("generation")
    seen = status.get("observedGeneration")
    return generation is None or seen is None or int(seen) >= int(generation)


def update_revision(sts: Obj) -> str:
    """The revision the StatefulSet controller makes new pods from; "" while it has not observed the current
    spec or reports none."""
    if not spec_observed(sts):
        return ""
    return str((sts.get("status") or {}).get("updateRevision") or "")


def is_current(pod: PodView | None, template_image: str, revision: str) -> bool:
    if pod is None:
        return False
    if revision and pod.revision and pod.revision != revision:
        return False
    return same_image(pod.image, template_image)


async def pod_views(kube: KubeApi, net: Network, replicas: int) -> list[PodView | None]:
    async def one(ordinal: int) -> PodView | None:
        try:
            return pod_view(await kube.get(pod_path(net.namespace, net.spec.pod_name(ordinal))), net.spec.container)
        except KubeNotFound:
            return None

    return list(await asyncio.gather(*(one(i) for i in range(replicas))))


def settled(pods: Sequence[PodView | None], template_image: str, revision: str) -> int:
    """The lowest ordinal from which every pod up to the highest is current (len(pods) when the highest is not)."""
    ordinal = len(pods)
    while ordinal > 0 and is_current(pods[ordinal - 1], template_image, revision):
        ordinal -= 1
    return ordinal


def outdated(pods: Sequence[PodView | None], template_image: str, revision: str) -> list[int]:
    """The ordinals of the pods that exist and do not run the template. A missing pod is not counted: the
    controller is creating it (a first install, a scale, a deleted pod); once it exists it is judged."""
    return [i for i, pod in enumerate(pods) if pod is not None and not is_current(pod, template_image, revision)]


def partition_body(partition: int) -> Obj:
    return {"spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}}}}
