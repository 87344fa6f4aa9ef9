"""Run the capture agent on an NPU (or GPU, or CPU) host: runs only the workloads of its own config."""

from __future__ import annotations

import argparse
import logging
import os

from pypto_core.capture.agent import Agent
from pypto_core.capture.agent_config import load_config
from pypto_core.capture.upload import MAX_CHUNK_BYTES
from pypto_core.errors import PyptoError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", required=True, help="dashboard URL")
    parser.add_argument("--token", default=os.environ.get("PYPTO_AGENT_TOKEN"),
                        help="the agent's token, shown once when it was registered (default: "
                             "$PYPTO_AGENT_TOKEN)")
    parser.add_argument("--config", required=True, help="agent.toml naming the workloads this host may run")
    parser.add_argument("--poll-s", type=int, default=20, help="long-poll wait for a job, seconds")
    parser.add_argument("--retry-max-s", type=float, default=30.0,
                        help="longest wait between reconnect attempts")
    parser.add_argument("--chunk-bytes", type=int, default=MAX_CHUNK_BYTES,
                        help="upload chunk size (at most 8 MiB)")
    parser.add_argument("--log-interval-s", type=float, default=1.0, help="how often the log tail is sent")
    parser.add_argument("-v", "--verbose", action="store_true")


def run(args: argparse.Namespace) -> int:
    if not args.token:
        raise PyptoError("an agent token is needed: --token or $PYPTO_AGENT_TOKEN")
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = load_config(args.config)
    agent = Agent(args.server, args.token, config, poll_s=args.poll_s, retry_max_s=args.retry_max_s,
                  chunk_bytes=args.chunk_bytes, log_interval_s=args.log_interval_s)
    agent.run_forever()
    return 0
