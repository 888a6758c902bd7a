"""bench/bench_tree_layout.py's three layouts hold the same tree: from the final root, every key set in
the run is found by a walk in each of them (real LMDB environments), and each walk reads the same nodes."""

from __future__ import annotations

from pathlib import Path

import lmdb
import pytest

from bench import bench_tree_layout as layout
from node.merkle.codec import key_path


def test_every_layout_walks_to_every_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    grown: list[layout.Tree] = []
    real_walks = layout.walks

    def keep(tallies: dict[str, layout.Tally], tree: layout.Tree, count: int) -> dict[str, float]:
        grown.append(tree)
        return real_walks(tallies, tree, count)

    monkeypatch.setattr(layout, "walks", keep)
    cost = layout.run(tmp_path, blocks=12, keys=150, updates=0.2, walk_count=10, report=4)
    assert set(cost) == set(layout.LAYOUTS)
    tree = grown[0]
    assert len(tree.keys) == 12 * 150 - int(11 * 150 * 0.2)  # the first block has nothing to overwrite
    root_loc = tree.created[tree.root]
    reads: dict[str, list[int]] = {}
    for name in layout.LAYOUTS:
        env = lmdb.open(str(tmp_path / name), readonly=True)
        try:
            with env.begin() as txn:
                get = {
                    "hash": lambda h, d, p, loc: txn.get(h),
                    "position": lambda h, d, p, loc: txn.get(layout.position(d, p) + h),
                    "block": lambda h, d, p, loc: txn.get(loc + h),
                }[name]
                reads[name] = [layout.walk(get, tree.root, root_loc, key_path(k)) for k in tree.keys]
        finally:
            env.close()
    assert reads["position"] == reads["hash"] == reads["block"]
