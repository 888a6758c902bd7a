"""The kopf handlers, registered into a fresh registry built from one frozen OperatorConfig.

Runtime objects (the config and the Kubernetes API client) live in `memo.runtime`, one `Runtime` shared
by every per-object copy of the memo; progress lives in each ChainNetwork's status. Every handler turns
our typed errors into kopf's retry-or-stop errors in one place (`errors.to_kopf`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import kopf

from chain_operator import replica_rollout, snapshot_jobs, snapshots, status, upgrade
from chain_operator.conditions import ConditionReason, ConditionType, now_iso
from chain_operator.config import OperatorConfig
from chain_operator.errors import KubeNotFound, OperatorError, SpecInvalid, Stop, UpgradeFailed, to_kopf
from chain_operator.kube import GROUP, NETWORKS, VERSION, KubeApi, Obj, statefulset_path
from chain_operator.metrics import OperatorMetrics
from chain_operator.revisions import partition_body
from chain_operator.snapshot_jobs import Outcome, Step
from chain_operator.spec import Network, parse_spec, parse_time
from chain_operator.upgrade import ConditionUpdate, UpgradeProgress

log = logging.getLogger("chain.operator")


class Runtime:
    """What the handlers share: the config, the metrics, and the API client the login handler (re)creates."""

    def __init__(self, config: OperatorConfig, metrics: OperatorMetrics | None = None) -> None:
        self.config = config
        self.metrics = metrics if metrics is not None else OperatorMetrics()
        self.statuses = status.StatusStore()
        self._kube: KubeApi | None = None

    @property
    def kube(self) -> KubeApi:
        if self._kube is None:
            raise kopf.TemporaryError("not logged in to the Kubernetes API yet", delay=1)
        return self._kube

    async def replace_kube(self, kube: KubeApi | None) -> None:
        old, self._kube = self._kube, kube
        if old is not None:
            await old.close()


def runtime_of(memo: Any) -> Runtime:
    runtime = getattr(memo, "runtime", None)
    if not isinstance(runtime, Runtime):
        raise kopf.PermanentError("memo.runtime is not set up (build the operator with chain_operator.main)")
    return runtime


def network_of(body: Mapping[str, Any]) -> Network:
    meta = body.get("metadata", {})
    return Network(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        spec=parse_spec(body.get("spec") or {}),
    )


def key_of(body: Mapping[str, Any]) -> tuple[str, str]:
    meta = body.get("metadata", {})
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


@contextlib.asynccontextmanager
async def fresh_body(runtime: Runtime, body: Mapping[str, Any]) -> AsyncIterator[Obj | None]:
    """The object as the API has it now (None once deleted), read while holding its lock, so that the
    handler decides from it and writes before another handler of the same object reads (status.py)."""
    namespace, name = key_of(body)
    async with runtime.statuses.lock(namespace, name):
        try:
            fresh: Obj | None = await status.read(runtime.kube, namespace, name)
        except KubeNotFound:
            fresh = None
        yield fresh


async def handle_upgrade(runtime: Runtime, body: Mapping[str, Any]) -> None:
    try:
        async with fresh_body(runtime, body) as fresh:
            if fresh is not None:
                await _upgrade_step(runtime, fresh)
    except OperatorError as exc:
        raise to_kopf(exc) from exc


async def _upgrade_step(runtime: Runtime, fresh: Obj) -> None:
    result = await _upgrade_move(runtime, fresh)
    if not result.done:
        raise kopf.TemporaryError("upgrade in progress", delay=result.wait)


async def _upgrade_move(runtime: Runtime, fresh: Obj) -> upgrade.Step:
    """One step of the upgrade, its outcome written to the status and the rollout metric."""
    current: Mapping[str, Any] = fresh.get("status") or {}
    kube = runtime.kube
    try:
        result = await upgrade.step(kube, runtime.config, network_of(fresh), dict(current))
    except UpgradeFailed as exc:
        await _failed(runtime, fresh, exc)
        raise
    except Stop as exc:
        await status.write(kube, fresh, {}, (ConditionUpdate(ConditionType.READY, False, exc.reason, str(exc)),))
        raise
    net = network_of(fresh)
    # the nodes are done (and none is off the template: a render's change before its rollout started): the
    # read replicas next (replica_rollout.py)
    if result.done and not await upgrade.pending(kube, runtime.config, net):
        try:
            replicas = await replica_rollout.step(kube, runtime.config, net, current)
        except UpgradeFailed as exc:  # a read replica that did not come back: the rollout stops, as for a node
            await _failed(runtime, fresh, exc)
            raise
        fields = {**result.status, **replicas.status}
        result = upgrade.Step(fields, result.conditions + replicas.conditions, replicas.done, replicas.wait)
    await status.write(kube, fresh, result.status, result.conditions)
    _record_rollout(runtime, fresh, result.status)
    return result


async def _failed(runtime: Runtime, fresh: Obj, exc: UpgradeFailed) -> None:
    """The rollout stops: `status.upgrade` says Failed and why, the conditions and the rollout metric too."""
    current: Mapping[str, Any] = fresh.get("status") or {}
    result = upgrade.failed(UpgradeProgress.from_status(current.get("upgrade")), exc)
    await status.write(runtime.kube, fresh, result.status, result.conditions)
    _record_rollout(runtime, fresh, result.status)


async def _pending(runtime: Runtime, net: Network) -> bool:
    if await upgrade.pending(runtime.kube, runtime.config, net):
        return True
    return await replica_rollout.pending(runtime.kube, runtime.config, net)


async def handle_template_check(runtime: Runtime, body: Mapping[str, Any]) -> None:
    """The periodic check (`--rollout-check`): a pod template changed by anyone (helm, a GitOps sync, kubectl)
    leaves pods outdated behind the hold; drive the same rollout as a new version until it is done. A rollout
    that failed stays failed until the template (or the version) changes again."""
    try:
        while True:
            async with fresh_body(runtime, body) as fresh:
                if fresh is None:
                    return
                net = network_of(fresh)
                if not await _pending(runtime, net):
                    return
                progress = UpgradeProgress.from_status((fresh.get("status") or {}).get("upgrade"))
                rollout = await upgrade.rollout_of(runtime.kube, runtime.config, net)
                if progress.phase is upgrade.Phase.FAILED and progress.revision == rollout.revision:
                    return
                result = await _upgrade_move(runtime, fresh)
            if result.done:
                return
            await asyncio.sleep(result.wait or runtime.config.upgrade_poll)
    except UpgradeFailed:
        return  # recorded by _upgrade_move
    except OperatorError as exc:
        raise to_kopf(exc) from exc


def _record_rollout(runtime: Runtime, body: Mapping[str, Any], fields: Mapping[str, Any]) -> None:
    """chain_operator_rollout_phase from the upgrade progress just written (or the one already there)."""
    namespace, name = key_of(body)
    phase = UpgradeProgress.from_status(fields.get("upgrade") or body.get("status", {}).get("upgrade")).phase
    runtime.metrics.rollout(namespace, name, phase.value)


async def handle_snapshots(runtime: Runtime, body: Mapping[str, Any]) -> None:
    """One tick of the snapshot schedule (snapshot_jobs.py): start a due job or follow the running one."""
    try:
        async with fresh_body(runtime, body) as fresh:
            if fresh is not None:
                await _snapshot_tick(runtime, fresh)
    except OperatorError as exc:
        raise to_kopf(exc) from exc


async def _snapshot_tick(runtime: Runtime, fresh: Obj) -> None:
    current: Mapping[str, Any] = fresh.get("status") or {}
    net = network_of(fresh)
    last = parse_time((current.get("snapshots") or {}).get("lastTime", ""))
    if last is not None:  # kept in the status, so an operator restart does not lose it
        runtime.metrics.snapshot_last_success.labels(net.namespace, net.name).set(last.timestamp())
    try:
        result = await snapshot_jobs.step(runtime.kube, runtime.config, net, dict(current))
    except SpecInvalid:
        raise
    except OperatorError as exc:
        # The start was refused (no ready pod, node unreachable or refusing): one failure, retried on the next
        # tick; the schedule is not advanced.
        runtime.metrics.snapshot_failed(net.namespace, net.name)
        record = dict(current.get("snapshots") or {})
        record["failures"] = int(record.get("failures", 0)) + 1
        update = ConditionUpdate(ConditionType.SNAPSHOTS_READY, False, exc.reason, str(exc))
        await status.write(runtime.kube, fresh, {"snapshots": record}, (update,))
        raise
    if result.outcome is not Outcome.IDLE:
        await _record_step(runtime, net, result, fresh)


async def _record_step(runtime: Runtime, net: Network, result: Step, fresh: Obj) -> None:
    """Status and metrics after a tick that started, followed or ended a job."""
    assert result.job is not None
    metrics, config, kube = runtime.metrics, runtime.config, runtime.kube
    current: Mapping[str, Any] = fresh.get("status") or {}
    record: dict[str, Any] = dict(current.get("snapshots") or {})
    record["job"] = result.job.as_status()
    if result.outcome is Outcome.RUNNING:
        metrics.snapshot_running(net.namespace, net.name)
        if record != current.get("snapshots"):
            await status.write(kube, fresh, {"snapshots": record}, ())
        return
    if result.outcome is Outcome.FAILED:
        # Counted once; the schedule is not advanced, so the next tick starts a new job.
        log.warning("%s/%s: snapshot failed: %s", net.namespace, net.name, result.message)
        metrics.snapshot_failed(net.namespace, net.name)
        record["failures"] = int(record.get("failures", 0)) + 1
        reason = result.reason or ConditionReason.SNAPSHOT_JOB_FAILED
        update = ConditionUpdate(ConditionType.SNAPSHOTS_READY, False, reason, result.message)
        await status.write(kube, fresh, {"snapshots": record}, (update,))
        return
    created = result.created
    assert created is not None
    metrics.snapshot_succeeded(net.namespace, net.name)
    spec = created["spec"]
    record.update(
        lastTime=now_iso(),
        last=created["metadata"]["name"],
        lastBlock=spec["blockNumber"],
        lastStateRoot=spec["stateRoot"],
        pruned=0,
        pruneError="",
    )
    message = f"{created['metadata']['name']} at block {spec['blockNumber']} on {spec['pod']}"
    try:
        record["pruned"] = len(await snapshots.prune(kube, config, net))
    except OperatorError as exc:
        log.warning("%s/%s: pruning failed (retried after the next snapshot): %s", net.namespace, net.name, exc)
        record["pruneError"] = f"{exc.reason}: {exc}"
        message += f"; pruning failed: {exc}"
    taken = ConditionUpdate(ConditionType.SNAPSHOTS_READY, True, ConditionReason.SNAPSHOT_TAKEN, message)
    await status.write(kube, fresh, {"snapshots": record}, (taken,))


async def handle_scale(runtime: Runtime, body: Mapping[str, Any]) -> None:
    try:
        async with fresh_body(runtime, body) as fresh:
            if fresh is None:
                return
            net = network_of(fresh)
            progress = UpgradeProgress.from_status((fresh.get("status") or {}).get("upgrade"))
            if progress.phase is upgrade.Phase.PROGRESSING:
                delay = runtime.config.upgrade_poll
                raise kopf.TemporaryError("scaling waits for the upgrade in progress", delay=delay)
            path = statefulset_path(net.namespace, net.spec.statefulset)
            # The hold follows the replica count: a pod added above an old partition would take the next
            # template without the operator.
            body = partition_body(net.spec.replicas)
            body["spec"]["replicas"] = net.spec.replicas
            await runtime.kube.merge_patch(path, body)
    except OperatorError as exc:
        raise to_kopf(exc) from exc


def build_registry(config: OperatorConfig) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    res = (GROUP, VERSION, NETWORKS)

    @kopf.on.startup(registry=registry)
    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.level = logging.WARNING
        # Fixed namespaces (or the whole cluster) and CRDs installed with the chart: no need to scan for
        # namespaces and CRDs appearing later, so RBAC needs no list/watch on either.
        settings.scanning.disabled = True
        settings.persistence.finalizer = f"{GROUP}/operator"
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)

    @kopf.on.login(registry=registry)
    async def login(memo: Any, **kwargs: Any) -> kopf.ConnectionInfo:
        info = kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)
        if info is None:
            raise kopf.LoginError("no service account and no kubeconfig to log in with")
        await runtime_of(memo).replace_kube(KubeApi(info))
        return info

    @kopf.on.cleanup(registry=registry)
    async def close(memo: Any, **_: Any) -> None:
        await runtime_of(memo).replace_kube(None)

    @kopf.on.create(*res, id="upgrade", registry=registry)
    # A new version, digest or repository may change the desired image; `step` compares references.
    @kopf.on.update(*res, id="upgrade", field="spec.version", registry=registry)
    @kopf.on.update(*res, id="upgrade", field="spec.digest", registry=registry)
    @kopf.on.update(*res, id="upgrade", field="spec.image", registry=registry)
    @kopf.on.resume(*res, id="upgrade", registry=registry)
    async def upgrade_handler(body: kopf.Body, memo: Any, **_: Any) -> None:
        await handle_upgrade(runtime_of(memo), body)

    @kopf.on.update(*res, id="scale", field="spec.replicas", registry=registry)
    async def scale_handler(body: kopf.Body, memo: Any, **_: Any) -> None:
        await handle_scale(runtime_of(memo), body)

    @kopf.timer(*res, id="rollout", interval=config.rollout_check, registry=registry)
    async def template_timer(body: kopf.Body, memo: Any, **_: Any) -> None:
        await handle_template_check(runtime_of(memo), body)

    @kopf.timer(*res, id="snapshots", interval=config.snapshot_tick, registry=registry)
    async def snapshot_timer(body: kopf.Body, memo: Any, **_: Any) -> None:
        await handle_snapshots(runtime_of(memo), body)

    return registry
