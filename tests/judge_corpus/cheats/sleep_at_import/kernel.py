import time

while True:
    time.sleep(1)


def run(x, y):
    pass
