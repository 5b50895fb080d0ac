import socket


def run(x, y):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect(("127.0.0.1", int("@@PORT@@")))
    s.sendall(b"give me the answers")
    raise RuntimeError("LEAK: connected to 127.0.0.1")
