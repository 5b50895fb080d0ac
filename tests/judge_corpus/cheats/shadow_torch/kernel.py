import torch


def run(x, weight, eps, y):
    y.zero_()
