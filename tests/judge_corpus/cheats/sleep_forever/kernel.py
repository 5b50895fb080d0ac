import time


def run(x, y):
    while True:
        time.sleep(1)
