"""Scale-out fixtures: a real S3-compatible server on loopback (moto in server mode, a subprocess), a
Redis database of their own for these tests' workers, and a 4-rank archive built from real samples.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.paths import SAMPLES

QWEN_4NPU = SAMPLES / "ascend_pt" / "qwen3_0.6b_train_4npu_level2"
S3_KEYS = {"PYPTO_S3_ACCESS_KEY": "testing", "PYPTO_S3_SECRET_KEY": "testing", "PYPTO_S3_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``moto_server`` on a free loopback port: a real HTTP S3 API, in its own process."""
    port = free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "wb")
    exe = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port)], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("moto_server did not start")
        time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=20)
    log.close()


def s3_client(endpoint: str) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                        aws_secret_access_key="testing", region_name="us-east-1")


@pytest.fixture
def s3(s3_server: str, settings: Any, request: pytest.FixtureRequest) -> dict[str, Any]:
    """A fresh bucket; this test process stores through S3Storage, and ``env`` does the same for workers."""
    bucket = f"pypto-{request.node.name.lower().replace('_', '-')[:40]}-{os.getpid()}"
    s3_client(s3_server).create_bucket(Bucket=bucket)
    env = {"PYPTO_S3_BUCKET": bucket, "PYPTO_S3_ENDPOINT_URL": s3_server, **S3_KEYS}
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {"bucket_name": bucket, "endpoint_url": s3_server, "access_key": "testing",
                        "secret_key": "testing", "region_name": "us-east-1", "default_acl": None,
                        "file_overwrite": False},
        },
    }
    return {"bucket": bucket, "endpoint": s3_server, "env": env, "client": s3_client(s3_server)}


def bucket_keys(s3: dict[str, Any]) -> list[str]:
    pages = s3["client"].get_paginator("list_objects_v2").paginate(Bucket=s3["bucket"])
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


@contextlib.contextmanager
def sending_to(broker: str) -> Iterator[None]:
    """Send this process's tasks (``delay`` after commit) to ``broker`` for the duration."""
    from pypto_web.celery import app
    from tests.conftest import purge_broker

    purge_broker(broker)
    # broker_write_url: broker_url itself prefers the CELERY_BROKER_URL environment variable.
    old = app.conf.get("broker_write_url")
    app.conf.broker_write_url = broker
    app._pool = None
    app.amqp._producer_pool = None
    try:
        yield
    finally:
        app.conf.broker_write_url = old
        app._pool = None
        app.amqp._producer_pool = None


def four_rank_zip(dest_dir: Path) -> Path:
    """A 4-rank torch_npu archive from the real 2-rank Qwen3 sample: ranks 2 and 3 are copies of 0 and 1
    with their rank ids changed (built in a temporary folder at test time, never committed)."""
    root = dest_dir / "qwen3_4rank"
    shutil.rmtree(root, ignore_errors=True)
    for r in range(4):
        src = QWEN_4NPU / f"rank_{r % 2}_ascend_pt"
        dst = root / f"rank_{r}_ascend_pt"
        shutil.copytree(src, dst)
        info_path = dst / f"profiler_info_{r % 2}.json"
        info = json.loads(info_path.read_text())
        info["rank_id"] = r
        info_path.unlink()
        (dst / f"profiler_info_{r}.json").write_text(json.dumps(info))
    archive = dest_dir / "qwen3_4rank.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(dest_dir).as_posix())
    return archive
