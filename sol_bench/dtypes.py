"""The format's dtype names, their torch dtypes and their storage widths."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import torch


class DType(str, Enum):
    float64 = "float64"
    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"
    float8_e4m3fn = "float8_e4m3fn"
    float8_e5m2 = "float8_e5m2"
    float4_e2m1 = "float4_e2m1"
    float4_e2m1fn_x2 = "float4_e2m1fn_x2"
    int64 = "int64"
    int32 = "int32"
    int16 = "int16"
    int8 = "int8"
    uint8 = "uint8"
    bool = "bool"


@dataclass(frozen=True)
class DTypeInfo:
    torch_dtype: torch.dtype
    bits: int  # storage bits per declared element
    is_float: bool
    is_packed_fp4: bool = False


def _fp4_storage() -> torch.dtype:
    # Packed fp4 is stored two values per byte; torch names that dtype float4_e2m1fn_x2.
    return getattr(torch, "float4_e2m1fn_x2", torch.uint8)


_INFO: dict[DType, DTypeInfo] = {
    DType.float64: DTypeInfo(torch.float64, 64, True),
    DType.float32: DTypeInfo(torch.float32, 32, True),
    DType.float16: DTypeInfo(torch.float16, 16, True),
    DType.bfloat16: DTypeInfo(torch.bfloat16, 16, True),
    DType.float8_e4m3fn: DTypeInfo(torch.float8_e4m3fn, 8, True),
    DType.float8_e5m2: DTypeInfo(torch.float8_e5m2, 8, True),
    # Declared shape of a float4_e2m1 tensor counts fp4 values; storage packs two per byte.
    DType.float4_e2m1: DTypeInfo(torch.uint8, 4, True, is_packed_fp4=True),
    # Declared shape of a float4_e2m1fn_x2 tensor counts bytes (pairs of values).
    DType.float4_e2m1fn_x2: DTypeInfo(_fp4_storage(), 8, True, is_packed_fp4=True),
    DType.int64: DTypeInfo(torch.int64, 64, False),
    DType.int32: DTypeInfo(torch.int32, 32, False),
    DType.int16: DTypeInfo(torch.int16, 16, False),
    DType.int8: DTypeInfo(torch.int8, 8, False),
    DType.uint8: DTypeInfo(torch.uint8, 8, False),
    DType.bool: DTypeInfo(torch.bool, 8, False),
}


def info(dtype: DType | str) -> DTypeInfo:
    return _INFO[DType(dtype)]


def to_torch(dtype: DType | str) -> torch.dtype:
    return info(dtype).torch_dtype


def storage_shape(dtype: DType | str, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Shape of the tensor that holds a value of the declared dtype and shape."""
    if DType(dtype) is DType.float4_e2m1:
        if not shape or shape[-1] % 2:
            raise ValueError(f"float4_e2m1 needs an even last dimension to pack two per byte, got {shape}")
        return (*shape[:-1], shape[-1] // 2)
    return shape


def nbytes(dtype: DType | str, shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return (n * info(dtype).bits + 7) // 8


def from_torch(dtype: torch.dtype) -> DType:
    for name, i in _INFO.items():
        if i.torch_dtype == dtype and not i.is_packed_fp4:
            return name
    if dtype == _fp4_storage():
        return DType.float4_e2m1fn_x2
    raise KeyError(f"no format dtype for {dtype}")
