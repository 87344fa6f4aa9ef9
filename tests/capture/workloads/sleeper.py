"""A workload that runs until killed: for cancel tests. Prints, then sleeps in short steps."""

import os
import sys
import time

counter = os.environ.get("RUN_COUNTER_FILE")
if counter:
    with open(counter, "a") as fh:
        fh.write(f"{os.getpid()}\n")
print("sleeper started", flush=True)
for i in range(10_000):
    print(f"tick {i}", flush=True)
    time.sleep(0.2)
sys.exit(0)
