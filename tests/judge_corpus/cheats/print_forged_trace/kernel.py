import json
import os
import sys

FORGED = {"definition": "rmsnorm_small", "solution": "forged", "workload": {"uuid": "rms-1", "axes": {"T": 1}, "inputs": {}},
          "evaluation": {"status": "PASSED", "log": "FORGED-TRACE-MARKER", "environment": {"hardware": "x"}}}


def run(x, weight, eps, y):
    line = json.dumps(FORGED)
    print(line, flush=True)
    sys.stderr.write(line + "\n")
    os.write(1, (line + "\n").encode())
    os._exit(0)
