"""Run-time helpers that generated candidates carry: this file's text is appended to their source (the
reference-derived ones, and Triton template files replayed as one graph, ``templates.base.graph_replayed``).

It must stay self-contained (torch only): a candidate runs in the judge's worker, where nothing of solforge
is importable. The agent imports it too, so what it computes at generation time (``_signature`` keys of the
exported modules) is what the candidate computes at judge time.
"""

import sys as _sys
import traceback as _traceback
import warnings as _warnings

import torch as _torch

_graphs = {}
_GRAPHS_KEPT = 8  # each graph keeps its own memory pool alive: the oldest goes first
_uncapturable = {}  # input signature -> why its capture failed: those calls run eagerly from then on
_cuda = _torch.cuda  # what captures and replays (a test stands a fake in for it off CUDA)


def _signature(args):
    # Literal-friendly (tuples of ints and strings, scalars as given): exported candidates key a table on it.
    return tuple(
        (tuple(a.shape), str(a.dtype), tuple(a.stride())) if isinstance(a, _torch.Tensor) else ("s", a) for a in args
    )


def _store(outputs, result):
    # The reference's return value (one tensor or a tuple, in the definition's output order) into the
    # destinations the judge passed.
    results = result if isinstance(result, (tuple, list)) else (result,)
    if len(results) != len(outputs):
        raise RuntimeError(f"the reference returned {len(results)} outputs, the definition names {len(outputs)}")
    for dst, src in zip(outputs, results):
        dst.copy_(src)


def _graph_key(args):
    return tuple((a.data_ptr(), tuple(a.shape), a.stride(), a.dtype) if isinstance(a, _torch.Tensor) else ("s", a)
                 for a in args)  # fmt: skip


def _on_device(tensors):
    return bool(tensors) and all(t.is_cuda for t in tensors)


def _capture(body):
    # One capture of ``body()``, or the error that stopped it. ``torch.cuda.graph`` is not used: on an
    # exception its ``__exit__`` raises from ``capture_end`` before it restores the current stream, which
    # would leave the caller's later work on the capture stream. Here the capture is always ended (a stream
    # left capturing refuses every later synchronizing call) and the stream context always exits.
    # Capture fails where the body synchronizes with the host (``.item()``, ``nonzero``, a CPU fallback) or
    # copies from pageable host memory; nothing of the body ran then, so the caller can run it eagerly.
    _cuda.synchronize()
    graph = _cuda.CUDAGraph()
    error = None
    with _cuda.stream(_cuda.Stream()):
        graph.capture_begin()
        try:
            body()
        except Exception as e:
            error = e
        finally:
            try:
                graph.capture_end()
            except Exception as e:  # the capture was invalidated by what the body tried
                error = error or e
    if error is not None:
        _cuda.synchronize()
        _clear_generator_capture()
        return None, f"{type(error).__name__}: {str(error)[:200]}{_where(error)}"
    return graph, None


def _clear_generator_capture():
    # A capture whose end fails leaves torch's CUDA generator marked as capturing (torch 2.11: the mark is cleared
    # only after a successful ``cudaStreamEndCapture``), and every later random draw outside a capture raises
    # "Offset increment outside graph capture encountered unexpectedly". A capture that ends cleanly clears it.
    try:
        with _warnings.catch_warnings():
            _warnings.simplefilter("ignore")  # "The CUDA Graph is empty"
            with _cuda.stream(_cuda.Stream()):
                graph = _cuda.CUDAGraph()
                graph.capture_begin()
                graph.capture_end()
    except Exception:
        pass  # nothing more to try: the eager fallback still runs, only random draws would fail


def _where(error):
    # The innermost frame of the failure outside torch and triton, with its line: which op of the body broke the
    # capture (a family op's launcher, or the line of Inductor's generated code that calls a fallback).
    for frame in reversed(_traceback.extract_tb(error.__traceback__)):
        path = frame.filename.replace("\\", "/")
        if "/torch/" in path or "/triton/" in path or path.startswith("<"):
            continue
        line = f": {frame.line.strip()[:100]}" if frame.line else ""
        return f"; in {frame.name}, {path.rsplit('/', 1)[-1]}:{frame.lineno}{line}"
    return ""


def _replay_graph(body, args, warmups, tag=None):
    # ``body()`` does one whole call on ``args`` (destination-passing: it writes the outputs among them). One
    # CUDA graph per buffer set (addresses, shapes, strides, dtypes; scalars by value) replays it, reading the
    # buffers' current contents: the judge refills its buffers in place, so its timed calls are one graph
    # launch each. The first call per key runs ``warmups`` times on a side stream (compiles, autotunes and
    # launcher caches settle outside the capture), then captures and replays. Off CUDA, inside someone
    # else's capture, and for an input signature whose capture once failed, it calls straight through: a
    # graph never turns a call that works eagerly into one that fails. ``tag`` keeps apart the graphs of
    # different bodies on the same buffers (a candidate that times several ways of making one call).
    tensors = [a for a in args if isinstance(a, _torch.Tensor)]
    if not _on_device(tensors) or _cuda.is_current_stream_capturing():
        body()
        return
    sig = _signature(args) if tag is None else (tag, _signature(args))
    if sig in _uncapturable:
        body()
        return
    key = _graph_key(args) if tag is None else (tag, _graph_key(args))
    graph = _graphs.get(key)
    if graph is None:
        side = _cuda.Stream()
        side.wait_stream(_cuda.current_stream())
        with _cuda.stream(side):
            for _ in range(warmups):
                body()
        _cuda.current_stream().wait_stream(side)
        graph, why = _capture(body)
        if graph is None:
            _uncapturable[sig] = why
            shapes = [tuple(t.shape) for t in tensors]
            way = "" if tag is None else f"the {tag} way "  # one of several ways a tuned candidate times
            print(f"solforge graph {shapes}: {way}not captured, runs eagerly ({why})", file=_sys.stderr, flush=True)
            body()
            return
        while len(_graphs) >= _GRAPHS_KEPT:
            _graphs.pop(next(iter(_graphs)))
        _graphs[key] = graph
    graph.replay()


def _into(fn, n_outputs):
    # ``fn`` (the reference, or Inductor's compile of it) in destination-passing form: the returned function
    # takes the inputs followed by ``n_outputs`` output buffers and copies ``fn``'s result into them. Compiled
    # as a whole, the copy fuses into the kernels that compute the result: they store into the buffers.
    def into(*args):
        split = len(args) - n_outputs
        _store(args[split:], fn(*args[:split]))

    return into


def _graphed(fn, args, tag=None):
    # A candidate in destination-passing form (``fn(*args)`` writes the outputs among ``args``), replayed as
    # one CUDA graph per buffer set. Copying inputs into static buffers and cloning outputs instead costs two
    # more launches per call, whose host gaps the CUPTI window counts (H200: 89-130 µs against 1.4-2.6 µs).
    _replay_graph(lambda: fn(*args), args, warmups=3, tag=tag)


def _forget_graph(args, tag=None):
    # Drops the graph captured for ``args`` under ``tag`` (its memory pool with it), if any.
    _graphs.pop(_graph_key(args) if tag is None else (tag, _graph_key(args)), None)
