"""Machine-readable results of a test run, for the nox matrix and compat_matrix.md.

Active when ``TAGGED_OPS_RESULTS`` names a JSON file. Counts passed / failed /
skipped per area (eager contract, opcheck, compile, export, cuda) and per path
(native, fallback), and records the torch build, the schemas each path
registers, the handle's ``register_*`` methods, date and machine.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from collections import defaultdict
from typing import Any

import pytest
import torch

import tagged_ops
from tagged_ops._switches import FALLBACK_ENV_VAR, env_flag

AREAS = {
    "test_definition_errors": "eager",
    "test_compat": "eager",
    "test_layers": "eager",
    "test_free_at_import": "eager",
    "test_registrations": "eager",
    "test_call_contract": "eager",
    "test_autograd": "eager",
    "test_annotations": "eager",
    "test_redefinition": "eager",
    "test_parity": "eager",
    "test_main_job": "eager",
    "test_sin_opcheck": "opcheck",
    "test_compile": "compile",
    "test_cache_switch": "compile",
    "test_lowering": "compile",
    "test_clone_hazard": "compile",
    "test_export": "export",
    "test_testing_kit": "testing kit",
    "test_nox_helper": "testing kit",
    "test_workflow": "testing kit",
    "test_adopting_guide": "real-library forms",
    "test_classic_port": "real-library forms",
    "test_overloads": "real-library forms",
    "test_schema_strings": "real-library forms",
    "test_idioms": "real-library forms",
    "test_upstream_inplace_tag": "upstream-derived",
    "test_upstream_out_variant": "upstream-derived",
    "test_upstream_custom_ops": "upstream-derived",
    "test_cpp_kernel": "C++ kernels",
    "test_dtensor": "DTensor",
}


_AREA_PATH = "tagged_ops_area_path"
#: properties tests record about this torch (``record_property``), written to the results file
FACTS = (
    "compiler_drops_a_read_clone",
    "private_names",
    "raw_reuses_mutated_alias",
    "raw_saved_export_loads",
    "torch_gets_wrong",
    "torch_gets_wrong_in_training",
)


class ResultsRecorder:
    def __init__(self, target: str) -> None:
        self.target = target
        self.counts: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
        self.failures: list[str] = []
        self.skip_reasons: dict[str, int] = defaultdict(int)
        self.paths: dict[str, Any] | None = None
        self.facts: dict[str, Any] = {}  # measured properties of this torch, from tests' record_property

    @staticmethod
    def _classify(item: pytest.Item) -> tuple[str, str]:
        module = item.module.__name__.rsplit(".", 1)[-1] if getattr(item, "module", None) else "other"
        params = getattr(getattr(item, "callspec", None), "params", {})
        area = "cuda" if params.get("tagged_ops_device") == "cuda" else AREAS.get(module, "other")
        if area == "C++ kernels":  # these run on the path the whole run takes, or say which in `fallback`
            if "fallback" in params:
                return area, "fallback" if params["fallback"] else "native"
            return area, "native" if tagged_ops.NATIVE_TAGS and not env_flag(FALLBACK_ENV_VAR) else "fallback"
        path = params.get("path")  # the suite's path fixture; other tests' `path` parameters are not paths
        return area, path if path in ("native", "fallback") else "any"

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        # Classified where the test runs: under pytest-xdist only the report,
        # user_properties included, reaches the process that writes the file.
        outcome = yield
        area, path = self._classify(item)
        outcome.get_result().user_properties.append((_AREA_PATH, (area, path)))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = dict(report.user_properties)
        if "tagged_ops_paths" in properties:  # tests/test_main_job.py ran the self-check on every path
            self.paths = properties["tagged_ops_paths"]
        for name in FACTS:
            if name in properties:
                value, known = properties[name], self.facts.get(name)
                # a fact several tests measure part of (a dict each) gathers their parts
                self.facts[name] = {**known, **value} if isinstance(known, dict) and isinstance(value, dict) else value
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            area, path = properties.get(_AREA_PATH, ("other", "any"))
            outcome = "xfailed" if hasattr(report, "wasxfail") and report.outcome == "skipped" else report.outcome
            self.counts[area][path][outcome] += 1
            if report.outcome == "failed":
                self.failures.append(report.nodeid)
            if report.outcome == "skipped" and isinstance(report.longrepr, tuple):
                self.skip_reasons[report.longrepr[2]] += 1

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if hasattr(session.config, "workerinput"):
            return  # an xdist worker: the controller has every report and writes the file
        import subprocess

        from tagged_ops._selfcheck import describe_paths

        try:
            commit = subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"],
                capture_output=True,
                text=True,
                check=True,
                cwd=os.path.dirname(__file__),
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            commit = "unknown"
        data = {
            "commit": commit,
            "torch": torch.__version__,
            "torch_build": {
                "cuda": torch.version.cuda,
                "git": getattr(torch.version, "git_version", None),
                "debug": bool(getattr(torch.version, "debug", False)),
            },
            "python": platform.python_version(),
            "date": datetime.date.today().isoformat(),
            "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs"
            + (f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ", no CUDA device"),
            "cuda_available": torch.cuda.is_available(),
            "native_tags": tagged_ops.NATIVE_TAGS,
            "fallback_forced": env_flag(tagged_ops.FALLBACK_ENV_VAR),
            "paths": self.paths if self.paths is not None else describe_paths(),  # a run without that test
            "areas": {a: {p: dict(c) for p, c in paths.items()} for a, paths in sorted(self.counts.items())},
            "failures": self.failures,
            "skip_reasons": dict(self.skip_reasons),
            "exitstatus": int(exitstatus),
            "facts": self.facts,
        }
        os.makedirs(os.path.dirname(os.path.abspath(self.target)), exist_ok=True)
        with open(self.target, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
