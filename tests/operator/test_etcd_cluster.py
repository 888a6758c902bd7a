"""The etcd membership's Kubernetes side (chain_operator.etcd_cluster.apply) against kmock, and the etcd init
container's part (charts/chain/files/etcd-datadir.sh) run here: a member added gets the ConfigMap that names
it before its pod may start, a member removed loses its pod only after its removal, a replaced member's pod
is deleted and its volume emptied by the init container because the ConfigMap names a new id for it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import kopf
import pytest

from chain_operator.errors import KubeNotFound
from chain_operator.etcd_cluster import apply, member
from chain_operator.etcd_members import Change, Kind
from chain_operator.kube import KubeApi, configmap_path, pod_path, statefulset_path
from chain_operator.spec import EtcdSpec
from tests.charts.helm import CHART
from tests.operator.conftest import NAMESPACE

SPEC = EtcdSpec("chain-etcd", "chain-etcd-headless", "chain-etcd-members", 3, "http", 2379, 2380)


def obj(kind: str, name: str, **rest: Any) -> dict[str, Any]:
    version = "apps/v1" if kind == "StatefulSet" else "v1"
    return {"apiVersion": version, "kind": kind, "metadata": {"name": name, "namespace": NAMESPACE}, **rest}


async def test_objects_follow_each_membership_change(cluster) -> None:
    kube = KubeApi(kopf.ConnectionInfo(server=str(cluster.url).rstrip("/"), token="test-token"))
    try:
        await kube.create(statefulset_path(NAMESPACE), obj("StatefulSet", "chain-etcd", spec={"replicas": 3}))
        data = {"initialCluster": "first", "initialClusterState": "new"}
        await kube.create(configmap_path(NAMESPACE), obj("ConfigMap", "chain-etcd-members", data=data))
        await kube.create(pod_path(NAMESPACE), obj("Pod", "chain-etcd-1", spec={}))

        added = Change(Kind.ADD, "chain-etcd-3", "wanted", "a=b,c=d", running=4, member_id=0xABC)
        await apply(kube, NAMESPACE, SPEC, added)
        cm = await kube.get(configmap_path(NAMESPACE, "chain-etcd-members"))
        assert cm["data"]["initialCluster"] == "a=b,c=d" and cm["data"]["initialClusterState"] == "existing"
        assert cm["data"]["id.chain-etcd-3"] == "abc"
        assert (await kube.get(statefulset_path(NAMESPACE, "chain-etcd")))["spec"]["replicas"] == 4

        waiting = Change(Kind.WAIT, detail="members not answering", initial_cluster="x", running=4)
        await apply(kube, NAMESPACE, SPEC, waiting)  # nothing is written for the starting member meanwhile
        assert (await kube.get(configmap_path(NAMESPACE, "chain-etcd-members")))["data"]["initialCluster"] == "a=b,c=d"

        removed = Change(Kind.REMOVE, "chain-etcd-3", "not wanted", "a=b", running=3)
        await apply(kube, NAMESPACE, SPEC, removed)
        assert (await kube.get(statefulset_path(NAMESPACE, "chain-etcd")))["spec"]["replicas"] == 3

        replaced = Change(Kind.REPLACE, "chain-etcd-1", "silent", "a=b,e=f", running=3, member_id=0xDEF)
        await apply(kube, NAMESPACE, SPEC, replaced)
        assert (await kube.get(configmap_path(NAMESPACE, "chain-etcd-members")))["data"]["id.chain-etcd-1"] == "def"
        with pytest.raises(KubeNotFound):  # deleted: it starts again from its init container
            await kube.get(pod_path(NAMESPACE, "chain-etcd-1"))
    finally:
        await kube.close()


def test_member_urls_are_the_pods_names_under_the_headless_service() -> None:
    m = member("prod", SPEC, 4)
    assert m.name == "chain-etcd-4"
    assert m.peer_url == "http://chain-etcd-4.chain-etcd-headless.prod.svc:2380"
    assert m.client_url == "http://chain-etcd-4.chain-etcd-headless.prod.svc:2379"


def run_init(mount: Path, members: Path, pod: str) -> subprocess.CompletedProcess[str]:
    script = (CHART / "files" / "etcd-datadir.sh").read_text()
    env = dict(os.environ, ETCD_MEMBERS_DIR=str(members), POD_NAME=pod)
    return subprocess.run(
        ["sh", "-c", script, "datadir", str(mount)], env=env, capture_output=True, text=True, timeout=30, check=False
    )


def test_init_container_empties_a_volume_written_for_another_member_id(tmp_path: Path) -> None:
    members, mount = tmp_path / "members", tmp_path / "volume"
    members.mkdir()
    (mount / "data" / "member" / "wal").mkdir(parents=True)
    (mount / "data" / "member" / "wal" / "0.wal").write_bytes(b"old member")
    assert run_init(mount, members, "chain-etcd-1").returncode == 0  # no id for it: the data stays
    assert (mount / "data" / "member" / "wal" / "0.wal").exists()
    (members / "id.chain-etcd-1").write_text("def")
    done = run_init(mount, members, "chain-etcd-1")
    assert done.returncode == 0, done.stderr
    assert "emptied" in done.stdout
    assert list((mount / "data").iterdir()) == []  # etcd joins on an empty data dir under the new id
    (mount / "data" / "member").mkdir()  # what etcd writes as the new member
    again = run_init(mount, members, "chain-etcd-1")  # a restart of the same member keeps its data
    assert again.returncode == 0 and "emptied" not in again.stdout
    assert (mount / "data" / "member").exists()
