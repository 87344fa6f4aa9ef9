"""A bounded load test on loopback: browsing users and uploading users at once, for a fixed time.

    python -m tests.scale.loadtest --url http://127.0.0.1:8000 --token KEY --project ID \
        --archive rank0.zip --browsers 20 --uploaders 5 --seconds 120

Threads and urllib only (no extra tool). Each browsing user loops over the project list, the project's
profiles and one profile's detail and findings; each uploading user posts the archive again and again.
Prints one JSON object: requests, failures (any status other than the expected one, or an exception),
page-time percentiles (ms), uploads accepted, and the ids of the accepted uploads (the caller checks that
none is lost). Only for a server you run yourself on this machine.
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any


def _request(url: str, token: str, *, data: bytes | None = None, content_type: str = "") -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    req.add_header("Authorization", f"Token {token}")
    if content_type:
        req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _multipart(filename: str, payload: bytes) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode()
    return head + payload + f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run(url: str, token: str, project: int, archive: Path, *, browsers: int = 20, uploaders: int = 5,
        seconds: float = 60.0, max_uploads_each: int = 1000) -> dict[str, Any]:
    url = url.rstrip("/")
    deadline = time.monotonic() + seconds
    lock = threading.Lock()
    page_ms: list[float] = []
    failures: list[str] = []
    uploaded: list[int] = []
    upload_ms: list[float] = []
    payload = archive.read_bytes()

    def browse(seed: int) -> None:
        rnd = random.Random(seed)
        while time.monotonic() < deadline:
            paths = ["/api/projects/", f"/api/projects/{project}/", f"/api/projects/{project}/profiles/"]
            status, body = _timed(paths[rnd.randrange(3)], None)
            if status == 200 and uploaded:
                with lock:
                    pid = rnd.choice(uploaded)
                _timed(f"/api/profiles/{pid}/", None)
                _timed(f"/api/profiles/{pid}/findings/", None)

    def _timed(path: str, body: tuple[bytes, str] | None, expect: int = 200) -> tuple[int, bytes]:
        t0 = time.perf_counter()
        try:
            if body is None:
                status, out = _request(url + path, token)
            else:
                status, out = _request(url + path, token, data=body[0], content_type=body[1])
        except Exception as exc:  # a refused connection, a reset: a failed request
            status, out = 0, repr(exc).encode()
        ms = (time.perf_counter() - t0) * 1000
        with lock:
            (page_ms if body is None else upload_ms).append(ms)
            if status != expect:
                failures.append(f"{status} {path}: {out[:200]!r}")
        return status, out

    def upload(n: int) -> None:
        for i in range(max_uploads_each):
            if time.monotonic() >= deadline:
                return
            status, out = _timed(f"/api/projects/{project}/profiles/",
                                 _multipart(f"u{n}-{i}-{archive.name}", payload), expect=201)
            if status == 201:
                with lock:
                    uploaded.append(json.loads(out)["id"])

    threads = [threading.Thread(target=browse, args=(i,)) for i in range(browsers)]
    threads += [threading.Thread(target=upload, args=(i,)) for i in range(uploaders)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    return {
        "browsers": browsers, "uploaders": uploaders, "seconds": round(elapsed, 1),
        "requests": len(page_ms) + len(upload_ms), "failures": len(failures), "failure_samples": failures[:5],
        "page_ms": {"p50": round(percentile(page_ms, 0.5), 1), "p95": round(percentile(page_ms, 0.95), 1),
                    "max": round(max(page_ms, default=0.0), 1), "count": len(page_ms)},
        "upload_ms": {"p50": round(percentile(upload_ms, 0.5), 1),
                      "p95": round(percentile(upload_ms, 0.95), 1), "count": len(upload_ms)},
        "uploads_accepted": len(uploaded), "upload_ids": sorted(uploaded), "archive_bytes": len(payload),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--project", type=int, required=True)
    ap.add_argument("--archive", type=Path, required=True)
    ap.add_argument("--browsers", type=int, default=20)
    ap.add_argument("--uploaders", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=60.0)
    args = ap.parse_args()
    if not args.url.startswith(("http://127.0.0.1", "http://localhost", "http://[::1]")):
        raise SystemExit("loadtest: loopback servers only")
    out = run(args.url, args.token, args.project, args.archive, browsers=args.browsers,
              uploaders=args.uploaders, seconds=args.seconds)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
