"""What the published NKI API stubs say `nki.isa` and `nki.language` hold, per NKI generation:
every public function's parameters (a trailing "=" marks one with a default) and every other public
name (dtypes, buffers, enums). The simulated language (kernelsweep.sim.nki.modules) binds every call
against these, so a keyword a generation does not take is the TypeError it is on a host (real-host
audit 2, N7), and a name it does not have is an AttributeError.

Source: aws-neuron/aws-neuron-sdk, nki/api/nki/isa/__init__.py and nki/api/nki/language/__init__.py,
read with `ast` at each release commit: NKI 0.1 (SDK 2.27) 337e6041, 0.2 (2.28) 86a92868, 0.3 (2.29)
539a73c5, 0.4 (2.30) 3afa0fdf, 0.5 (2.31) ee7d6e00, 0.6 (2.32) a3247f5b. NKI 0.7 (SDK 2.33) has no
public stubs (addendum F8): it is 0.6 without the dynamic loop constructs 0.6 deprecated (F3, F4).
The tables hold 0.6 whole and, for each older generation, what differs from the next newer one.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

ISA, LANGUAGE = "isa", "language"


_ISA_06 = {
    "activate2": "dst, op, data, imm0, imm1, op0, op1, relu_param=, reverse0=, reverse1=, reduce_op=, reduce_res=, reduce_cmd=, name=",
    "activation": "dst, op, data, bias=, scale=, reduce_op=, reduce_res=, reduce_cmd=, name=",
    "activation_reduce": "dst, op, data, reduce_op, reduce_res, bias=, scale=, name=",
    "affine_select": "dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op=, offset=, name=",
    "bn_aggr": "dst, data, name=",
    "bn_stats": "dst, data, name=",
    "core_barrier": "data, cores, engine=, name=",
    "dma_compute": "dst, srcs, reduce_op, scales=, unique_indices=, oob_mode=, name=",
    "dma_copy": "dst, src, priority=, oob_mode=, dge_mode=, engine=, name=",
    "dma_transpose": "dst, src, axes=, priority=, dge_mode=, oob_mode=, name=",
    "dropout": "dst, data, prob, name=",
    "exponential": "dst, src, max_value=, reduce_res=, reduce_cmd=, reduce_init=, name=",
    "get_nc_sub_version": "",
    "get_nc_version": "",
    "iota": "dst, pattern, offset=, channel_multiplier=, name=",
    "local_gather": "dst, src_buffer, index, num_elem_per_idx=, num_valid_indices=, name=",
    "max8": "dst, src, name=",
    "memset": "dst, value, engine=, name=",
    "nc_find_index8": "dst, data, vals, name=",
    "nc_match_replace8": "dst, data, vals, imm, dst_idx=, name=",
    "nc_matmul": "dst, stationary, moving, is_stationary_onezero=, is_moving_onezero=, is_transpose=, accumulate=, tile_position=, tile_size=, perf_mode=, name=",
    "nc_matmul_mx": "dst, stationary, moving, stationary_scale, moving_scale, tile_position=, tile_size=, accumulate=, name=",
    "nc_n_gather": "dst, data, indices, name=",
    "nc_stream_shuffle": "dst, src, shuffle_mask, name=",
    "nc_transpose": "dst, data, engine=, name=",
    "nonzero_with_count": "dst, src, index_offset=, padding_val=, name=",
    "quantize_mx": "dst, src, dst_scale, name=",
    "rand2": "dst, min, max, name=",
    "rand_get_state": "dst, engine=, name=",
    "rand_set_state": "src_seeds, engine=, name=",
    "range_select": "dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=, reduce_res=, reduce_op=, range_start=, on_false_value=, name=",
    "reciprocal": "dst, data, name=",
    "register_alloc": "x=",
    "register_load": "dst, src",
    "register_move": "dst, src",
    "register_store": "dst, src",
    "rng": "dst, engine=, name=",
    "scalar_tensor_tensor": "dst, data, op0, operand0, op1, operand1, reverse0=, reverse1=, name=",
    "select_reduce": "dst, predicate, on_true, on_false, reduce_res=, reduce_cmd=, reduce_op=, reverse_pred=, name=",
    "sendrecv": "src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=, name=",
    "sequence_bounds": "dst, segment_ids, name=",
    "set_rng_seed": "src_seeds, name=",
    "tensor_copy": "dst, src, engine=, name=",
    "tensor_copy_predicated": "dst, src, predicate, reverse_pred=, name=",
    "tensor_partition_reduce": "dst, op, data, name=",
    "tensor_reduce": "dst, op, data, axis, negate=, keepdims=, name=",
    "tensor_scalar": "dst, data, op0, operand0, reverse0=, op1=, operand1=, reverse1=, engine=, name=",
    "tensor_scalar_cumulative": "dst, src, op0, op1, imm0, imm1=, reduce_cmd=, name=",
    "tensor_scalar_reduce": "dst, data, op0, operand0, reduce_op, reduce_res=, reverse0=, reduce_cmd=, reduce_init=, reduce_res_negate=, name=",
    "tensor_tensor": "dst, data1, data2, op, engine=, name=",
    "tensor_tensor_scan": "dst, data0, data1, initial, op0, op1, reverse0=, reverse1=, name=",
    "topk": "val_dst, idx_dst, src, n, name=",
}

_ISA_06_NAMES = frozenset(
    {
        "NkiInstruction",
        "NkiValidationError",
        "VirtualRegister",
        "dge_mode",
        "dma_engine",
        "engine",
        "gpsimd_engine",
        "matmul_perf_mode",
        "nc_version",
        "oob_mode",
        "reduce_cmd",
        "scalar_engine",
        "tensor_engine",
        "unknown_engine",
        "vector_engine",
    }
)

_ISA_CHANGES: dict[str, tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]] = {
    # generation: (signatures that differ, names it lacks, names only it has)
    "0.5": (
        {
            "tensor_scalar_reduce": "dst, data, op0, operand0, reduce_op, reduce_res, reverse0=, reduce_cmd=, reduce_init=, name="
        },
        ("topk", "NkiInstruction"),
        (),
    ),
    "0.4": ({}, ("get_nc_sub_version",), ()),
    "0.3": (
        {
            "dma_compute": "dst, srcs, reduce_op, scales=, unique_indices=, name=",
            "dma_copy": "dst, src, oob_mode=, dge_mode=, engine=, name=",
            "dma_transpose": "dst, src, axes=, dge_mode=, oob_mode=, name=",
            "tensor_scalar_reduce": "dst, data, op0, operand0, reduce_op, reduce_res, reverse0=, name=",
        },
        ("activate2",),
        ("NKIObject",),
    ),
    "0.2": (
        {
            "affine_select": "dst, pattern, offset, channel_multiplier, on_true_tile, on_false_value, cmp_op=, name=",
            "dma_compute": "dst, srcs, scales, reduce_op, name=",
            "dma_copy": "dst, src, dst_rmw_op=, oob_mode=, dge_mode=, unique_indices=, name=",
            "exponential": "dst, src, max_value=, reduce_res=, reduce_cmd=, reduce_init=",
            "iota": "dst, pattern, offset, channel_multiplier=, name=",
            "nc_matmul": "dst, stationary, moving, is_stationary_onezero=, is_moving_onezero=, is_transpose=, tile_position=, tile_size=, perf_mode=, name=",
            "nc_matmul_mx": "dst, stationary, moving, stationary_scale, moving_scale, tile_position=, tile_size=, name=",
            "nonzero_with_count": "dst, src, index_offset=, padding_val=",
            "register_move": "dst, imm",
            "sendrecv": "src, dst, send_to_rank, recv_from_rank, pipe_id, name=",
            "tensor_scalar_cumulative": "dst, src, op0, op1, imm0, imm1=, reduce_cmd=",
        },
        ("NKIObject", "NkiValidationError", "VirtualRegister"),
        (),
    ),
    "0.1": (
        {
            "dma_copy": "dst, src, dst_rmw_op=, oob_mode=, dge_mode=, name=",
            "dma_transpose": "dst, src, axes=, dge_mode=, name=",
            "tensor_copy_dynamic_dst": "dst, src, engine=, name=",
            "tensor_copy_dynamic_src": "dst, src, engine=, name=",
        },
        ("exponential", "nonzero_with_count"),
        (),
    ),
}

_LANGUAGE_06 = {
    "abs": "x, dtype=",
    "abs_max": "x, y, dtype=",
    "abs_min": "x, y, dtype=",
    "add": "x, y, dtype=",
    "affine_range": "start, stop=, step=",
    "all": "x, axis, dtype=",
    "arctan": "x, dtype=",
    "bitwise_and": "x, y, dtype=",
    "bitwise_or": "x, y, dtype=",
    "bitwise_xor": "x, y, dtype=",
    "broadcast_to": "x, shape, dtype=",
    "ceil": "x, dtype=",
    "copy": "x, dtype=",
    "cos": "x, dtype=",
    "device_print": "print_prefix, tensor",
    "divide": "x, y, dtype=",
    "dropout": "x, rate, dtype=",
    "ds": "start, size",
    "dynamic_range": "start, stop=, step=",
    "empty_like": "x, dtype=, buffer=, name=",
    "equal": "x, y, dtype=",
    "erf": "x, dtype=",
    "erf_dx": "x, dtype=",
    "exp": "x, dtype=",
    "expand_dims": "x, axis",
    "floor": "x, dtype=",
    "fmod": "x, y, dtype=",
    "fori_loop": "lower, upper, body_fun, step=",
    "full": "shape, fill_value, dtype, buffer=, name=",
    "gather_flattened": "data, indices, axis=, dtype=",
    "gelu": "x, dtype=",
    "gelu_apprx_sigmoid": "x, dtype=",
    "gelu_apprx_sigmoid_dx": "x, dtype=",
    "gelu_apprx_tanh": "x, dtype=",
    "gelu_dx": "x, dtype=",
    "greater": "x, y, dtype=",
    "greater_equal": "x, y, dtype=",
    "invert": "x, dtype=",
    "is_hbm": "buffer",
    "is_on_chip": "buffer",
    "is_psum": "buffer",
    "is_sbuf": "buffer",
    "left_shift": "x, y, dtype=",
    "less": "x, y, dtype=",
    "less_equal": "x, y, dtype=",
    "load": "src, dtype=",
    "load_transpose2d": "src, dtype=",
    "log": "x, dtype=",
    "logical_and": "x, y, dtype=",
    "logical_not": "x, dtype=",
    "logical_or": "x, y, dtype=",
    "logical_xor": "x, y, dtype=",
    "matmul": "x, y, transpose_x=",
    "max": "x, axis, dtype=, keepdims=",
    "maximum": "x, y, dtype=",
    "mean": "x, axis, dtype=, keepdims=",
    "min": "x, axis, dtype=, keepdims=",
    "minimum": "x, y, dtype=",
    "mish": "x, dtype=",
    "mod": "x, y, dtype=",
    "multiply": "x, y, dtype=",
    "ndarray": "shape, dtype, buffer=, name=, address=",
    "negative": "x, dtype=",
    "no_reorder": "",
    "not_equal": "x, y, dtype=",
    "num_programs": "axes=",
    "ones": "shape, dtype, buffer=, name=",
    "power": "x, y, dtype=",
    "prod": "x, axis, dtype=, keepdims=",
    "program_id": "axis=",
    "program_ndim": "",
    "rand": "shape, dtype, buffer=, name=",
    "random_seed": "seed",
    "reciprocal": "x, dtype=",
    "relu": "x, dtype=",
    "right_shift": "x, y, dtype=",
    "rms_norm": "x, w, axis, n, epsilon=, dtype=, compute_dtype=",
    "rsqrt": "x, dtype=",
    "sequential_range": "start, stop=, step=",
    "shared_constant": "constant",
    "shared_identity_matrix": "n, dtype=, dst=",
    "sigmoid": "x, dtype=",
    "sign": "x, dtype=",
    "silu": "x, dtype=",
    "silu_dx": "x, dtype=",
    "sin": "x, dtype=",
    "softmax": "x, axis=, dtype=",
    "softplus": "x, dtype=",
    "sqrt": "x, dtype=",
    "square": "x, dtype=",
    "static_range": "start, stop=, step=",
    "store": "dst, value",
    "subtract": "x, y, dtype=",
    "sum": "x, axis, dtype=, keepdims=",
    "tan": "x, dtype=",
    "tanh": "x, dtype=",
    "transpose": "x, dtype=",
    "trunc": "x, dtype=",
    "var": "x, axis, dtype=, keepdims=",
    "where": "condition, x, y, dtype=",
    "while_loop": "init, body_fun",
    "zeros": "shape, dtype, buffer=, name=",
    "zeros_like": "x, dtype=, buffer=, name=",
}

_LANGUAGE_06_NAMES = frozenset(
    {
        "MemoryRegion",
        "NKIObject",
        "NkiTensor",
        "average",
        "bfloat16",
        "bool_",
        "bypass",
        "float16",
        "float32",
        "float4_e2m1fn_x4",
        "float8_e4m3",
        "float8_e4m3fn",
        "float8_e4m3fn_x4",
        "float8_e5m2",
        "float8_e5m2_x4",
        "float8_e8m0fnu",
        "hbm",
        "int16",
        "int32",
        "int8",
        "prelu",
        "private_hbm",
        "psum",
        "sbuf",
        "shared_hbm",
        "tfloat32",
        "tile_size",
        "uint16",
        "uint32",
        "uint8",
    }
)

_LANGUAGE_CHANGES: dict[str, tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]] = {
    # generation: (signatures that differ, names it lacks, names only it has)
    "0.5": ({}, ("fori_loop", "while_loop"), ()),
    "0.4": ({}, ("average", "float8_e8m0fnu"), ()),
    "0.3": ({}, ("abs_max", "abs_min", "bypass", "prelu"), ()),
    "0.2": (
        {
            "ndarray": "shape, dtype, buffer=, name=",
            "program_id": "axis",
            "sequential_range": "start, stop, step",
            "shared_constant": "constant, dtype=",
            "shared_identity_matrix": "n, dtype=",
        },
        (
            "all",
            "arctan",
            "broadcast_to",
            "ceil",
            "copy",
            "cos",
            "dropout",
            "dynamic_range",
            "empty_like",
            "erf",
            "erf_dx",
            "exp",
            "expand_dims",
            "floor",
            "fmod",
            "full",
            "gather_flattened",
            "gelu",
            "gelu_apprx_tanh",
            "gelu_dx",
            "is_hbm",
            "is_on_chip",
            "is_psum",
            "is_sbuf",
            "load",
            "load_transpose2d",
            "log",
            "matmul",
            "max",
            "mean",
            "min",
            "mish",
            "mod",
            "negative",
            "no_reorder",
            "ones",
            "prod",
            "rand",
            "random_seed",
            "relu",
            "rms_norm",
            "sigmoid",
            "sign",
            "silu",
            "silu_dx",
            "sin",
            "softmax",
            "softplus",
            "sqrt",
            "square",
            "store",
            "sum",
            "tan",
            "tanh",
            "transpose",
            "trunc",
            "var",
            "where",
            "zeros_like",
            "MemoryRegion",
            "NkiTensor",
        ),
        (),
    ),
    "0.1": ({}, ("gelu_apprx_sigmoid_dx", "float8_e4m3fn"), ()),
}

_TABLES = {ISA: (_ISA_06, _ISA_06_NAMES, _ISA_CHANGES), LANGUAGE: (_LANGUAGE_06, _LANGUAGE_06_NAMES, _LANGUAGE_CHANGES)}
# NKI 0.7 removed the dynamic loop constructs 0.6 deprecated (addendum F3, F4).
_REMOVED_IN_07 = {ISA: (), LANGUAGE: ("dynamic_range",)}


class _StubDefault:
    """A parameter the stub gives a default: its value is no concern of a binding."""

    def __repr__(self) -> str:
        return "..."


_STUB_DEFAULT = _StubDefault()


@dataclass(frozen=True)
class Api:
    """One module of one generation: its functions' signatures and its other public names."""

    functions: Mapping[str, inspect.Signature]
    names: frozenset[str]

    def has(self, name: str) -> bool:
        return name in self.functions or name in self.names


@lru_cache(maxsize=32)
def api(generation: str, module: str) -> Api:
    """`nki.isa` or `nki.language` as NKI `generation` ("0.1" ... "0.7") publishes it."""
    functions, names, changes = _TABLES[module]
    found, others = dict(functions), set(names)
    order = ("0.5", "0.4", "0.3", "0.2", "0.1")
    if generation == "0.7":
        for name in _REMOVED_IN_07[module]:
            found.pop(name, None)
    elif generation != "0.6":
        for step in order[: order.index(generation) + 1]:  # from 0.6 back to the generation wanted
            changed, lacks, only = changes[step]
            for name in lacks:
                found.pop(name, None)
                others.discard(name)
            found.update(changed)
            others.update(only)
    return Api({name: _signature(text) for name, text in found.items()}, frozenset(others))


def _signature(text: str) -> inspect.Signature:
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [p.strip() for p in text.split(",") if p.strip()]
    return inspect.Signature(
        [
            inspect.Parameter(
                p.rstrip("="), kind, default=_STUB_DEFAULT if p.endswith("=") else inspect.Parameter.empty
            )
            for p in params
        ]
    )
