"""kernel_lib's own torch matrix, built on tagged_ops' nox helper.

The environment that runs nox needs no torch: install tagged-ops there without its
dependencies (the helper imports neither torch nor nox until this file calls it).

    pip install nox uv packaging
    pip install --no-deps tagged-ops
    nox -l                       # tests-2.4.1, tests-2.13.0, tests-2.13.0-fallback
    nox -s tests-2.4.1           # one release; JUnit results in results/tests-2.4.1.xml
    TAGGED_OPS_PRUNE_ENVS=1 nox  # every session, each environment removed after its run

tagged_ops is installed from TAGGED_OPS_SOURCE when set (a path or a requirement),
else from the package index, like any other dependency.
"""

import os

from tagged_ops.testing.nox import torch_matrix

torch_matrix(
    ["2.4.1", "2.13.0"],
    deps=["pytest", "numpy", "expecttest", "setuptools", os.environ.get("TAGGED_OPS_SOURCE", "tagged-ops")],
)
