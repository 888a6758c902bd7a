"""bench/bench_tree_layout.py's three layouts hold the same tree: from the final root, every key set in
the run is found by a walk in each of them (real LMDB environments), and each walk reads the same nodes."""

from __future__ import annotations

from pathlib import Path

import lmdb

from bench import bench_tree_layout as layout
from node.merkle.codec import key_path


def test_every_layout_walks_to_every_key(tmp_path: Path) -> None:
    tree, cost = layout.run(tmp_path, blocks=12, keys=150, updates=0.2, walk_count=10, report=4)
    assert set(cost) == set(layout.LAYOUTS)
    assert len(tree.keys) == 12 * 150 - int(11 * 150 * 0.2)  # the first block has nothing to overwrite
    root_loc = tree.created[tree.root]
    reads: dict[str, list[int]] = {}
    for name in layout.LAYOUTS:
        env = lmdb.open(str(tmp_path / name), readonly=True)
        try:
            with env.begin() as txn:
                get = layout.reader(name, txn)
                reads[name] = [layout.walk(get, tree.root, root_loc, key_path(k)) for k in tree.keys]
        finally:
            env.close()
    assert reads["position"] == reads["hash"] == reads["block"]
