"""Beam options of a portable run that needs no cluster and no network: Beam's embedded job service, and an
SDK worker in a process of its own, started with this interpreter (it inherits the test's environment)."""
from __future__ import annotations

from beam_pipelines.launches.portable_launch import SUBPROCESS_ENVIRONMENT, subprocess_worker_command

SUBPROCESS_WORKERS = {"job_endpoint": "embed", "environment_type": SUBPROCESS_ENVIRONMENT,
                      "environment_config": subprocess_worker_command(), "sdk_worker_parallelism": 1}
