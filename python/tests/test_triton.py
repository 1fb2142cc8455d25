# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""halogpu.triton without a GPU: Triton compiles for sm_90 on the client,
and the arguments map as Triton's launcher maps them (constexprs removed,
scalars packed, buffers as binding slots, the two hidden scratch pointers
as nulls). Skipped when triton is not installed. Real launches run on the
GPU machine (scripts/gpu-test's Triton step)."""

import numpy as np
import pytest

import halogpu

# halogpu.triton asks for Triton 3.6 or newer (pyproject.toml); older ones
# report no pointer or float annotation types and take other arguments.
triton = pytest.importorskip(
    "triton", minversion="3.6",
    reason="triton 3.6 or newer is not installed (pip install triton): the "
    "halogpu.triton compile and argument-mapping tests need it, not a GPU")
tl = pytest.importorskip("triton.language")
halotriton = pytest.importorskip("halogpu.triton")


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements,
               BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@triton.jit
def scale_kernel(x_ptr, out_ptr, factor, n, bias: tl.constexpr,
                 BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    y = tl.load(x_ptr + offsets, mask=mask) * factor
    if bias is not None:
        y = y + bias
    tl.store(out_ptr + offsets, y, mask=mask)


@triton.jit
def strided_kernel(x_ptr: "*fp32", stride: tl.int64, scale: tl.float16,
                   BLOCK: tl.constexpr):
    # 64-bit index arithmetic: the reason to annotate stride as tl.int64.
    offsets = tl.program_id(0) * stride + tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets) * scale)


def test_compile_for_sm90_without_a_gpu():
    compiled = halotriton.compile(
        add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                     "n_elements": "i32", "BLOCK_SIZE": "constexpr"},
        {"BLOCK_SIZE": 1024}, {}, 90)
    assert compiled.name == "add_kernel"
    assert compiled.cubin[:4] == b"\x7fELF"
    assert ".target sm_90" in compiled.ptx
    # 3 pointers, n, and Triton's 2 hidden scratch pointers.
    assert compiled.parameters == [8, 8, 8, 4, 8, 8]
    again = halotriton.compile(
        add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                     "n_elements": "i32", "BLOCK_SIZE": "constexpr"},
        {"BLOCK_SIZE": 1024}, {}, 90)
    assert again is compiled  # the in-memory cache


def test_vector_add_argument_mapping(client):
    n = 1000
    x = client.from_numpy(np.arange(n, dtype=np.float32))
    y = client.from_numpy(np.ones(n, dtype=np.float32))
    out = client.empty(n, np.float32)
    add = halotriton.kernel(client, add_kernel, arch=90)
    plan = add.prepare(x, y, out, n, BLOCK_SIZE=256, num_warps=2,
                       grid=lambda meta: (triton.cdiv(
                           meta["n_elements"], meta["BLOCK_SIZE"]),))
    assert plan.signature == {"x_ptr": "*fp32", "y_ptr": "*fp32",
                              "out_ptr": "*fp32", "n_elements": "i32",
                              "BLOCK_SIZE": "constexpr"}
    assert plan.constexprs == {"BLOCK_SIZE": 256}
    assert plan.grid == (4, 1, 1)
    assert plan.block == (64, 1, 1)  # num_warps * 32
    assert [a.slot for a in plan.args[:3]] == [0, 1, 2]
    assert plan.args[3] == np.int32(n).tobytes()
    assert plan.hidden == 2 and plan.args[4:] == [None, None]
    assert [ref.buffer for ref in plan.bindings] == [x, y, out]
    assert plan.compiled.parameters == [8, 8, 8, 4, 8, 8]


def test_scalars_constexprs_and_specialization(client):
    x = client.from_numpy(np.zeros(64, np.float16))
    kernel = halotriton.kernel(client, scale_kernel, arch=90)
    plan = kernel.prepare(x, x.ref(32), np.float16(2.0), 2**40, 1.5, 64,
                          grid=(1,))
    assert plan.signature["x_ptr"] == "*fp16"
    assert plan.signature["factor"] == "fp16"
    assert plan.signature["n"] == "i64"  # past the i32 range
    assert plan.constexprs == {"bias": 1.5, "BLOCK": 64}
    assert plan.args[2] == np.float16(2.0).tobytes()
    assert plan.args[3] == (2**40).to_bytes(8, "little")
    # None is a constexpr, as in Triton; a float is fp32.
    plan = kernel.prepare(x, x, 3.0, 10, None, 64, grid=1)
    assert plan.signature["factor"] == "fp32"
    assert plan.constexprs["bias"] is None
    assert plan.args[2] == np.float32(3.0).tobytes()
    assert plan.grid == (1, 1, 1)


def test_mapping_errors(client):
    add = halotriton.kernel(client, add_kernel, arch=90)
    untyped = client.create_buffer(64, memory="host_visible")
    typed = client.empty(16, "float32")
    with pytest.raises(TypeError, match="no element type"):
        add.prepare(untyped, typed, typed, 16, BLOCK_SIZE=16, grid=(1,))
    with pytest.raises(TypeError, match="x_ptr|argument"):
        add.prepare("x", typed, typed, 16, BLOCK_SIZE=16, grid=(1,))
    with pytest.raises(TypeError, match="add_kernel"):
        add.prepare(typed, typed, BLOCK_SIZE=16, grid=(1,))
    with pytest.raises(ValueError, match="grid"):
        add.prepare(typed, typed, typed, 16, BLOCK_SIZE=16, grid=(1, 1, 1, 1))
    with pytest.raises(TypeError, match="triton.jit"):
        halotriton.kernel(client, lambda: None, arch=90)


def test_cpu_driver_needs_an_arch_and_cannot_run_ptx(client):
    if client.devices[0].driver != "local":
        pytest.skip("the CPU driver's refusals")
    with pytest.raises(ValueError, match="CUDA device.*arch="):
        halotriton.kernel(client, add_kernel)
    typed = client.empty(16, "float32")
    add = halotriton.kernel(client, add_kernel, arch=90)
    with pytest.raises(halogpu.UnimplementedError):
        add[(1,)](typed, typed, typed, 16, BLOCK_SIZE=16)


def test_gpu_check_kernels_compile_and_map(client):
    """The kernels of gpu_triton_check.py (scripts/gpu-test) compile for
    sm_90 and map here, so the GPU step fails only on the GPU's account."""
    import gpu_triton_check as check

    x = client.empty(1024, np.float32)
    softmax = halotriton.kernel(client, check.softmax_kernel, arch=90)
    plan = softmax.prepare(x, x, 32, 32, 32, BLOCK_SIZE=32, num_warps=8,
                           grid=(32,))
    assert plan.block == (256, 1, 1) and plan.hidden == 2
    assert plan.signature["input_row_stride"] == "i32"
    a = client.empty(64 * 64, np.float16)
    c = client.empty(64 * 64, np.float32)
    matmul = halotriton.kernel(client, check.matmul_kernel, arch=90)
    plan = matmul.prepare(a, a, c, 64, 64, 64, 64, 1, 64, 1, 64, 1,
                          BLOCK_M=64, BLOCK_N=64, BLOCK_K=32,
                          grid=lambda meta: (64 // meta["BLOCK_M"], 1))
    assert plan.grid == (1, 1, 1) and plan.hidden == 2
    assert plan.signature["a_ptr"] == "*fp16"
    assert len(plan.args) == 12 + 2
    add = halotriton.kernel(client, check.add_kernel, arch=90)
    plan = add.prepare(x.ref(4), x.ref(4), x.ref(4), 1019, BLOCK_SIZE=1024,
                       grid=(1,))
    assert plan.unaligned and [ref.offset for ref in plan.bindings] == [4] * 3


def test_parameters_cross_check():
    """After loading, the driver's parameter list (Executable.parameters)
    must have the sizes read from the PTX: check_parameters refuses a
    mismatch clearly."""
    compiled = halotriton.compile(
        add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                     "n_elements": "i32", "BLOCK_SIZE": "constexpr"},
        {"BLOCK_SIZE": 1024}, {}, 90)
    # As CUDA lays them out: offsets aligned to the sizes.
    driver = [halogpu.Parameter(o, s) for o, s in
              [(0, 8), (8, 8), (16, 8), (24, 4), (32, 8), (40, 8)]]
    halotriton.check_parameters(compiled, driver)
    with pytest.raises(RuntimeError,
                       match=r"add_kernel: the driver lists 5 parameters "
                       r"of \[8, 8, 8, 4, 8\] bytes, the PTX entry 6"):
        halotriton.check_parameters(compiled, driver[:5])
    wider = driver[:3] + [halogpu.Parameter(24, 8)] + driver[4:]
    with pytest.raises(RuntimeError, match="would not match"):
        halotriton.check_parameters(compiled, wider)


def test_unaligned_pointer_records_unaligned_bindings(client):
    """A pointer at an offset that is not a multiple of 16 is compiled
    without tt.divisibility and recorded with unaligned_bindings (halod
    refuses such kernel arguments otherwise); aligned ones are not."""
    x = client.empty(1024, np.float32)
    add = halotriton.kernel(client, add_kernel, arch=90)
    aligned = add.prepare(x, x.ref(64), x, 16, BLOCK_SIZE=16, grid=(1,))
    assert aligned.unaligned is False
    shifted = add.prepare(x, x.ref(4), x, 16, BLOCK_SIZE=16, grid=(1,))
    assert shifted.unaligned is True
    assert shifted.bindings[1].offset == 4
    # Another specialization: y_ptr without divisibility.
    assert shifted.compiled.metadata.hash != aligned.compiled.metadata.hash


def test_annotated_parameters_keep_their_type(client):
    """A parameter annotated with a type takes it, as Triton's own launcher
    does: stride: tl.int64 given 1000 is compiled and passed as i64 (not
    i32: the kernel's index arithmetic stays 64-bit), scale: tl.float16 as
    fp16, x_ptr: "*fp32" a float pointer whatever the buffer's dtype."""
    raw = client.create_buffer(4096, memory="host_visible")  # no dtype
    kernel = halotriton.kernel(client, strided_kernel, arch=90)
    plan = kernel.prepare(raw, 1000, 0.5, BLOCK=16, grid=(1,))
    assert plan.signature == {"x_ptr": "*fp32", "stride": "i64",
                              "scale": "fp16", "BLOCK": "constexpr"}
    assert plan.compiled.parameters[:3] == [8, 8, 2]
    assert plan.args[1] == (1000).to_bytes(8, "little")
    assert plan.args[2] == np.float16(0.5).tobytes()
