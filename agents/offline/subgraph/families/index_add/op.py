"""Rows added into a tensor by index: ``y = base; y[index[i]] += src[i] * scale[i]``, cast to ``out_dtype``.

``base``: the tensor added into, or None for zeros of ``rows`` rows. ``scale``: one factor per source row, or
None. The product is taken in ``acc_dtype`` (the dtype the reference's scatter adds in, which its multiply
produced), the sum is the scatter's, and a cast after it is folded in as ``out_dtype``.
"""

from __future__ import annotations

from typing import Optional

import torch

from ...ops import define


def _index_add_rows(base: Optional[torch.Tensor], index: torch.Tensor, src: torch.Tensor,
                    scale: Optional[torch.Tensor], rows: int, acc_dtype: torch.dtype,
                    out_dtype: torch.dtype) -> torch.Tensor:  # fmt: skip
    x = src.to(acc_dtype)
    if scale is not None:
        x = x * scale.reshape(-1, 1).to(acc_dtype)
    into = torch.zeros((rows, src.shape[1]), dtype=acc_dtype, device=src.device) if base is None else base
    return torch.index_add(into.to(acc_dtype), 0, index.reshape(-1), x).to(out_dtype)


def _index_add_rows_fake(base, index, src, scale, rows, acc_dtype, out_dtype):
    return torch.empty((rows, src.shape[1]), dtype=out_dtype, device=src.device)


def _index_add_rows_cuda(base, index, src, scale, rows, acc_dtype, out_dtype, out=None):
    from .kernel import fastest_index_add_rows

    return fastest_index_add_rows(base, index, src, scale, rows, acc_dtype, out_dtype,
                                  lambda: _index_add_rows(base, index, src, scale, rows, acc_dtype, out_dtype), out)


INDEX_ADD_ROWS = define("index_add_rows", _index_add_rows, _index_add_rows_fake, _index_add_rows_cuda)
