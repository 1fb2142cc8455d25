# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The halo Authors
"""Triton kernels on halo devices (the optional extra ``triton``: ``pip install
'./python[triton]'`` in halo's source tree, or ``pip install triton``).

::

    add = halogpu.triton.kernel(client, add_kernel)   # a @triton.jit function
    add[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](
        x, y, out, n, BLOCK_SIZE=1024).wait()

``kernel()`` wraps a ``@triton.jit`` function for one client and device.
Each launch ``kernel[grid](*args, **kwargs)``:

1. maps the arguments as Triton's own launcher does: halo buffers (or
   ``buffer.ref(...)``) are pointers to their ``dtype`` (set by
   ``Client.from_numpy``/``Client.empty``, or ``buffer.ref(dtype=...)``),
   Python ints are ``i32`` (``i64``/``u64`` past that range), floats
   ``fp32``, bools ``i1``, numpy scalars their own type, None and the
   ``tl.constexpr`` parameters compile-time constants (removed from the
   parameter list); a parameter annotated with a type (``n: tl.int64``,
   ``scale: tl.float16``, ``x_ptr: "*fp32"``) takes that type instead,
   its value packed as such; pointers at 16-byte aligned offsets and ints
   divisible by 16 are specialized as such (``tt.divisibility``), as
   Triton does;
2. compiles the specialization with Triton's compiler on the client, for
   the device's architecture (``sm_XY`` from ``Device.compute_capability``)
   without a GPU or a CUDA context: ``triton.compile(ASTSource(...),
   target=GPUTarget("cuda", XY, 32))``. Compiled kernels are kept in
   memory (per function and specialization) and on disk by Triton's cache
   (``~/.triton/cache``, ``TRITON_CACHE_DIR``);
3. loads the CUBIN (or PTX) through ``Client.load_executable`` (halod's
   own caches make a second process's load cheap) and checks the parameter
   sizes read from the PTX against the driver's own list
   (``Executable.parameters``; skipped where the driver cannot tell);
4. records the dispatch into a command buffer with the buffers as binding
   slots, scalars as constants and the parameters Triton appends (the
   global and profile scratch pointers: found by comparing the PTX entry's
   parameters with the visible ones) as null pointers, or, where the
   kernel needs global scratch memory, as one more binding slot (the
   launch binds its own scratch buffer there, see 5). The recording is
   memoized per grid, block, shared memory and scalar values: a repeated
   launch replays it with a new binding table. A specialization with a
   pointer at an offset that is not a multiple of 16 (compiled without
   ``tt.divisibility``, so without vectorized accesses through it) is
   recorded with ``unaligned_bindings=True``, which halod's 16-byte rule
   for kernel arguments would otherwise refuse;
5. executes it on the kernel's queue (or ``queue=``) after ``wait=`` and
   returns a Launch, whose ``wait()`` / ``await wait_async()`` waits for
   that launch's kernel, and only for it.

Completion. halo's queues are unordered (a launch held back by ``wait=``,
or on another queue, may finish after a later one), so every launch in
flight signals a semaphore of its own: each Kernel keeps a pool of them,
with the value each was last signalled with. A launch reuses a semaphore
whose last launch is done (a read of shared memory, no message to the
daemon) and signals the next value on it, or creates a new one; with
MAX_LAUNCHES_IN_FLIGHT (64) launches of the Kernel in flight, a launch
first waits for any of them to complete. A launch that fails (its
``wait=`` semaphore failed, the kernel faulted) fails only its own Launch:
its semaphore is never reused, and the Kernel's other launches go on.

Global scratch memory (``Compiled.global_scratch`` bytes per program) is
per launch in flight too: the buffer goes with the launch's semaphore, so
two launches running at once never share one, and a launch that reuses a
semaphore reuses its buffer (made larger when needed). A Kernel therefore
keeps up to one scratch buffer per launch it ever had in flight at once.

halo's CPU driver cannot run PTX: launches need a CUDA device. Compiling
and the argument mapping (``kernel.prepare(...)``) need neither.
"""

import collections
import inspect
import operator
import re
import struct
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ._lib import DISPATCH_ALIGNMENT
from ._object import check_int
from .buffer import Buffer, BufferRef, slot
from .client import Client
from .command_buffer import CommandBuffer
from .errors import HaloError, OutOfRangeError, UnimplementedError
from .executable import Executable, Parameter
from .queue import Queue
from .semaphore import Semaphore, wait_any

# numpy dtype name -> Triton's type name.
_NUMPY_TO_TRITON = {
    "bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32",
    "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
    "uint64": "u64", "float16": "fp16", "bfloat16": "bf16",
    "float32": "fp32", "float64": "fp64",
}

# The Triton type of a Python int -> struct format of its bytes in the
# parameter buffer.
_INT_FORMATS = {"i32": "<i", "i64": "<q", "u64": "<Q"}

# The scalar types a parameter may be annotated with (n: tl.int64,
# scale: tl.float16, ...) -> struct format of the value's bytes, as
# Triton's launcher packs them; bf16 is packed apart (fp32 truncated).
_ANNOTATED_FORMATS = {
    "i1": "<?", "u1": "<?", "i8": "<b", "i16": "<h", "i32": "<i",
    "i64": "<q", "u8": "<B", "u16": "<H", "u32": "<I", "u64": "<Q",
    "fp16": "<e", "fp32": "<f", "f32": "<f", "fp64": "<d", "bf16": "",
}

# Bytes of a PTX parameter type (.u64, .b32, .f16, ...).
_PTX_SIZES = {"8": 1, "16": 2, "32": 4, "64": 8}

_ENTRY = re.compile(r"\.entry\s+(\w+)\s*\(([^)]*)\)", re.S)
# One parameter: ".param .u64 .ptr .global .align 1 name" or
# ".param .align 2 .b8 name[2]" (an fp16 scalar).
_PARAM = re.compile(r"\.([bsuf])(8|16|32|64)\b")
_ARRAY = re.compile(r"\[(\d+)\]\s*$")

# Recordings kept per kernel (least recently used dropped first).
MAX_RECORDINGS = 64

# Launches of one Kernel in flight at once, each with a completion
# semaphore of its own (at most halo's WAIT_MAX_COUNT, 64: a launch past it
# waits on all of them at once for the first to complete).
MAX_LAUNCHES_IN_FLIGHT = 64


def _triton() -> Any:
    try:
        import triton
    except ImportError:
        raise ImportError(
            "halogpu.triton needs Triton 3.6 or newer: pip install triton "
            "(or, in halo's source tree, pip install './python[triton]')"
        ) from None
    return triton


def triton_type(dtype: Any) -> str:
    """Triton's name ("fp32", "i64", ...) for a numpy dtype (or its name;
    "bfloat16" too, which numpy has no dtype for: "bf16"). TypeError for
    a dtype in non-native byte order (``>f4`` on a little-endian host):
    kernels read native numbers."""
    if isinstance(dtype, str) and dtype in _NUMPY_TO_TRITON:
        return _NUMPY_TO_TRITON[dtype]
    name = getattr(dtype, "name", None)
    if name is None:
        import numpy

        dtype = numpy.dtype(dtype)
        name = dtype.name
    if getattr(dtype, "isnative", True) is False:
        raise TypeError(
            f"element type {dtype} is not in native byte order, which "
            "kernels read (Client.from_numpy converts; or "
            "array.astype(array.dtype.newbyteorder('=')))")
    try:
        return _NUMPY_TO_TRITON[name]
    except KeyError:
        raise TypeError(
            f"element type {name} has no Triton equivalent (one of "
            f"{', '.join(sorted(_NUMPY_TO_TRITON))})") from None


def ptx_parameters(ptx: str, entry: Optional[str] = None) -> List[int]:
    """The byte sizes of the parameters of |entry| (None: the first
    .entry) in PTX text."""
    for match in _ENTRY.finditer(ptx):
        if entry is None or match.group(1) == entry:
            sizes = []
            for param in match.group(2).split(","):
                if not param.strip():
                    continue
                found = _PARAM.search(param)
                if found is None:
                    raise ValueError(f"unknown PTX parameter {param.strip()}")
                array = _ARRAY.search(param)
                count = int(array.group(1)) if array else 1
                sizes.append(_PTX_SIZES[found.group(2)] * count)
            return sizes
    raise ValueError(f"no .entry {entry or ''} in the PTX")


def check_parameters(compiled: "Compiled",
                     parameters: Sequence[Parameter]) -> None:
    """Raises RuntimeError unless the driver's |parameters| of the entry
    (Executable.parameters) have the byte sizes read from the PTX
    (|compiled|.parameters), which the argument mapping relies on."""
    sizes = [parameter.size for parameter in parameters]
    if sizes != compiled.parameters:
        raise RuntimeError(
            f"{compiled.name}: the driver lists {len(sizes)} parameters of "
            f"{sizes} bytes, the PTX entry {len(compiled.parameters)} of "
            f"{compiled.parameters} bytes: the arguments would not match "
            "the kernel's parameters")


@dataclass
class Compiled:
    """One compiled specialization of a Triton function."""

    name: str  # the kernel's entry point
    cubin: bytes = field(repr=False)  # tens of KiB: not in repr()
    ptx: str = field(repr=False)
    num_warps: int
    shared: int  # dynamic shared memory in bytes
    parameters: List[int]  # byte sizes of every parameter of the entry
    global_scratch: int  # bytes per program
    num_ctas: int
    metadata: Any = field(repr=False)


@dataclass
class Plan:
    """What a launch passes to halo (Kernel.prepare)."""

    compiled: Compiled
    signature: Dict[str, str]  # every parameter's Triton type
    constexprs: Dict[str, Any]
    grid: Tuple[int, int, int]
    block: Tuple[int, int, int]
    args: List[Any]  # SlotRef, bytes (a scalar) or None (a null pointer)
    bindings: List[BufferRef]  # slot i of the binding table
    hidden: int  # parameters Triton appended
    scratch: int  # bytes of global scratch memory (0: none)
    # A pointer at an offset that is not a multiple of 16: recorded with
    # unaligned_bindings (halod refuses such addresses otherwise).
    unaligned: bool = False


class Launch:
    """A submitted kernel: ``wait(timeout)`` or ``await wait_async()``.

    ``semaphore`` reaches ``value`` when this launch's kernel is done (and
    fails with the cause if the launch failed); the Kernel may signal the
    same semaphore again for a later launch once this one completed."""

    def __init__(self, semaphore: Semaphore, value: int,
                 memo_hit: Optional[bool]) -> None:
        self.semaphore = semaphore
        self.value = value
        # The daemon's memo cache hit flag of the recording (None: this
        # kernel object replayed its own recording).
        self.memo_hit = memo_hit

    def wait(self, timeout: Optional[float] = None) -> None:
        """Waits until this launch's kernel is done (Semaphore.wait: raises
        DeadlineExceededError after |timeout| seconds, or the launch's
        failure)."""
        self.semaphore.wait(self.value, timeout)

    async def wait_async(self, timeout: Optional[float] = None) -> None:
        """wait() for asyncio (Semaphore.wait_async)."""
        await self.semaphore.wait_async(self.value, timeout)

    def __repr__(self) -> str:
        return f"<halogpu.triton.Launch {self.semaphore!r} >= {self.value}>"


class _Completion:
    """A completion semaphore of a Kernel, signalled by one launch at a
    time: the value its latest launch signals, and that launch's global
    scratch buffer (kept for the next launch to use it)."""

    __slots__ = ("semaphore", "value", "scratch")

    def __init__(self, semaphore: Semaphore) -> None:
        self.semaphore = semaphore
        self.value = 0
        self.scratch: Optional[Buffer] = None


# (function cache key, specialization) -> Compiled, for every client.
_compiled: Dict[Tuple[Any, ...], Compiled] = {}
_compiled_lock = threading.Lock()


def compile(fn: Any, signature: Dict[str, str], constexprs: Dict[str, Any],
            attrs: Dict[Tuple[int, ...], Any], arch: int,
            num_warps: int = 4, num_stages: int = 3) -> Compiled:
    """Compiles the @triton.jit |fn| for sm_|arch| with Triton's compiler
    (no GPU needed); cached in memory and by Triton on disk."""
    triton = _triton()
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    key = (fn.cache_key, tuple(signature.items()),
           tuple(sorted((k, repr(v)) for k, v in constexprs.items())),
           tuple(sorted((k, repr(v)) for k, v in attrs.items())), arch,
           num_warps, num_stages)
    with _compiled_lock:
        found = _compiled.get(key)
    if found is not None:
        return found
    source = ASTSource(fn, signature=signature, constexprs=constexprs,
                       attrs=attrs)
    kernel = triton.compile(source, target=GPUTarget("cuda", arch, 32),
                            options={"num_warps": num_warps,
                                     "num_stages": num_stages})
    metadata = kernel.metadata
    ptx = kernel.asm["ptx"]
    compiled = Compiled(
        name=metadata.name, cubin=bytes(kernel.asm["cubin"]), ptx=ptx,
        num_warps=metadata.num_warps, shared=metadata.shared,
        parameters=ptx_parameters(ptx, metadata.name),
        global_scratch=getattr(metadata, "global_scratch_size", 0),
        num_ctas=getattr(metadata, "num_ctas", 1), metadata=metadata)
    with _compiled_lock:
        _compiled[key] = compiled
    return compiled


def _grid3(grid: Any, what: str) -> Tuple[int, int, int]:
    if isinstance(grid, int) and not isinstance(grid, bool):
        grid = (grid,)
    try:
        dims = tuple(grid)
    except TypeError:
        raise TypeError(
            f"{what} must be an int, a tuple of 1 to 3 ints or a callable "
            f"returning one, not {type(grid).__name__}") from None
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"{what} has {len(dims)} dimensions (1 to 3)")
    values = [check_int(d, f"{what}[{i}]", 0, 2**31 - 1)
              for i, d in enumerate(dims)]
    values += [1] * (3 - len(values))
    return (values[0], values[1], values[2])


def _scalar(value: Any, name: str) -> Tuple[str, bytes, bool]:
    """(Triton type, bytes, divisible by 16) of a scalar argument."""
    if isinstance(value, bool):
        return "i1", struct.pack("<?", value), False
    if isinstance(value, int):
        if -2**31 <= value < 2**31:
            kind = "i32"
        elif -2**63 <= value < 2**63:
            kind = "i64"
        elif value < 2**64:
            kind = "u64"
        else:
            raise ValueError(f"argument {name} = {value} does not fit in 64 "
                             "bits")
        return kind, struct.pack(_INT_FORMATS[kind], value), \
            value % 16 == 0
    if isinstance(value, float):
        return "fp32", struct.pack("<f", value), False
    dtype = getattr(value, "dtype", None)
    if dtype is not None and getattr(value, "shape", None) == ():
        kind = triton_type(dtype)
        data = value.tobytes()
        divisible = (kind[0] in "iu" and kind != "i1"
                     and int(value) % 16 == 0)
        return kind, data, divisible
    raise TypeError(
        f"argument {name}: expected a halo Buffer, buffer.ref(), int, "
        f"float, bool, numpy scalar or None, not {type(value).__name__}")


def _annotation(param: Any) -> str:
    """The type a @triton.jit parameter is annotated with ("i64",
    "*fp32", ...; "" for none), which Triton's launcher passes the
    argument as instead of the argument's own type."""
    kind = getattr(param, "annotation_type", None)
    if kind is None:  # a Triton before annotation_type
        kind = getattr(param, "annotation", "")
    if isinstance(kind, str) and (kind.startswith("*")
                                  or kind in _ANNOTATED_FORMATS):
        return kind
    return ""


def _annotated_scalar(value: Any, kind: str,
                      name: str) -> Tuple[bytes, bool]:
    """(bytes, divisible by 16) of a scalar argument of a parameter
    annotated with type |kind|, packed as Triton's launcher packs it."""
    what = f"argument {name}: the kernel annotates it {kind}"
    if isinstance(value, (Buffer, BufferRef)):
        raise TypeError(f"{what}, not a pointer: pass a number")
    if kind[0] in "fb":
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise TypeError(f"{what}: expected a number, not "
                            f"{type(value).__name__}") from None
        try:
            if kind == "bf16":  # the upper half of the fp32
                bits = struct.unpack("<I", struct.pack("<f", number))[0]
                return struct.pack("<H", bits >> 16), False
            return struct.pack(_ANNOTATED_FORMATS[kind], number), False
        except (OverflowError, struct.error):
            raise ValueError(f"{what}: {value!r} does not fit") from None
    try:
        integer = operator.index(value)
    except TypeError:
        raise TypeError(f"{what}: expected an int, not "
                        f"{type(value).__name__}") from None
    try:
        data = struct.pack(_ANNOTATED_FORMATS[kind], integer)
    except struct.error:
        raise ValueError(f"{what}: {integer} does not fit") from None
    return data, kind not in ("i1", "u1") and integer % 16 == 0


class Kernel:
    """A @triton.jit function bound to a client and device
    (halogpu.triton.kernel). ``kernel[grid](*args, **kwargs)`` launches it;
    see the module docstring. Thread safety: launches from several threads
    are serialized by a lock. Launches complete independently, each on its
    own semaphore value (Launch)."""

    def __init__(self, client: Client, fn: Any, *, device: int = 0,
                 arch: Optional[int] = None, binary: str = "cubin",
                 queue: Optional[Queue] = None) -> None:
        _triton()
        if not hasattr(fn, "params") or not hasattr(fn, "cache_key"):
            raise TypeError(
                f"expected a @triton.jit function, not {type(fn).__name__}")
        if binary not in ("cubin", "ptx"):
            raise ValueError(f"binary must be 'cubin' or 'ptx', not "
                             f"{binary!r}")
        self.client = client
        self.fn = fn
        self.device = check_int(device, "device", 0, 2**32 - 1)
        self.binary = binary
        if arch is None:
            devices = client.devices
            if self.device >= len(devices):
                raise OutOfRangeError(
                    f"device {self.device} does not exist (the daemon has "
                    f"{len(devices)})")
            info = devices[self.device]
            major, minor = info.compute_capability
            if info.driver != "cuda" or major == 0:
                raise ValueError(
                    f"device {self.device} is served by the {info.driver} "
                    "driver: Triton kernels need a CUDA device (pass arch=, "
                    "e.g. 90, to compile and prepare without one)")
            arch = 10 * major + minor
        self.arch = check_int(arch, "arch", 1, 1000)
        self._signature = inspect.signature(fn.fn)
        self._queue = queue
        # The completion semaphores (see the module docstring), those in
        # flight and those free for reuse, least recently launched first.
        self._completions: List[_Completion] = []
        self._executables: Dict[str, Executable] = {}
        self._recordings: "collections.OrderedDict[Tuple[Any, ...], " \
            "CommandBuffer]" = collections.OrderedDict()
        self._lock = threading.RLock()

    def __getitem__(self, grid: Any) -> Callable[..., Launch]:
        """``kernel[grid]``: a function that launches with |grid| (an
        int, a tuple of up to 3 ints, or a callable taking the arguments
        and options and returning one): run(..., grid=grid)."""
        def launch(*args: Any, **kwargs: Any) -> Launch:
            return self.run(*args, grid=grid, **kwargs)
        return launch

    # ---------------------------------------------------------- mapping

    def prepare(self, *args: Any, grid: Any, num_warps: int = 4,
                num_stages: int = 3, **kwargs: Any) -> Plan:
        """Maps the arguments and compiles (nothing runs, no device is
        needed): what run() would pass to halo."""
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{self.fn.__name__}: {error}") from None
        bound.apply_defaults()
        values = bound.arguments
        signature: Dict[str, str] = {}
        constexprs: Dict[str, Any] = {}
        attrs: Dict[Tuple[int, ...], Any] = {}
        visible: List[Tuple[str, Any]] = []  # (kind, value) per parameter
        bindings: List[BufferRef] = []
        unaligned = False  # a pointer off DISPATCH_ALIGNMENT
        for index, param in enumerate(self.fn.params):
            name = param.name
            value = values[name]
            if param.is_constexpr or value is None:
                signature[name] = "constexpr"
                constexprs[name] = value
                continue
            annotation = _annotation(param)
            if isinstance(value, Buffer):
                value = value.ref()
            if annotation.startswith("*") and \
                    not isinstance(value, BufferRef):
                raise TypeError(
                    f"argument {name}: the kernel annotates it as a pointer "
                    f"({annotation}): pass a halo Buffer or buffer.ref(), "
                    f"not {type(value).__name__}")
            pointer = annotation.startswith("*") or not annotation
            if isinstance(value, BufferRef) and pointer:
                if value.buffer.client is not self.client:
                    raise ValueError(
                        f"argument {name}: the buffer belongs to another "
                        "client")
                if annotation.startswith("*"):
                    # As Triton: the annotation, not the buffer's dtype.
                    signature[name] = annotation
                elif value.dtype is None:
                    raise TypeError(
                        f"argument {name}: the buffer has no element type; "
                        "make it with Client.from_numpy() or Client.empty(), "
                        "set buffer.dtype, or pass buffer.ref(dtype=...)")
                else:
                    signature[name] = "*" + triton_type(value.dtype)
                if value.offset % DISPATCH_ALIGNMENT == 0:
                    attrs[(index,)] = [["tt.divisibility", 16]]
                else:
                    unaligned = True
                visible.append(("pointer", slot(len(bindings))))
                bindings.append(value)
                continue
            if annotation:
                kind = annotation
                data, divisible = _annotated_scalar(value, kind, name)
            else:
                kind, data, divisible = _scalar(value, name)
            signature[name] = kind
            if divisible and not getattr(param, "do_not_specialize", False):
                attrs[(index,)] = [["tt.divisibility", 16]]
            visible.append((kind, data))
        compiled = compile(self.fn, signature, constexprs, attrs, self.arch,
                           num_warps, num_stages)
        if callable(grid):
            meta = dict(values)
            meta.update(num_warps=num_warps, num_stages=num_stages)
            grid = grid(meta)
        grid3 = _grid3(grid, "grid")
        hidden = len(compiled.parameters) - len(visible)
        if hidden < 0:
            raise RuntimeError(
                f"{compiled.name}: the PTX entry has "
                f"{len(compiled.parameters)} parameters, fewer than the "
                f"{len(visible)} arguments mapped")
        dispatch: List[Any] = []
        for position, (kind, value) in enumerate(visible):
            size = compiled.parameters[position]
            if kind == "pointer":
                expected = 8
            else:
                expected = len(value)
                if kind in ("i1", "u1"):  # PTX passes a byte, or wider
                    value = value + bytes(max(0, size - len(value)))
                    expected = size
            if size != expected:
                raise RuntimeError(
                    f"{compiled.name}: parameter {position} is {size} bytes "
                    f"in the PTX, the argument {kind} is {expected}")
            dispatch.append(value)
        programs = grid3[0] * grid3[1] * grid3[2] * compiled.num_ctas
        scratch = compiled.global_scratch * programs
        for extra in range(hidden):
            if extra == 0 and scratch:
                dispatch.append("scratch")
            else:
                dispatch.append(None)  # a null pointer
        return Plan(compiled=compiled, signature=signature,
                    constexprs=constexprs, grid=grid3,
                    block=(32 * compiled.num_warps, 1, 1),
                    args=dispatch, bindings=bindings, hidden=hidden,
                    scratch=scratch, unaligned=unaligned)

    # ---------------------------------------------------------- launches

    def _executable(self, compiled: Compiled) -> Executable:
        key = compiled.metadata.hash
        found = self._executables.get(key)
        if found is None:
            if self.binary == "cubin":
                found = self.client.load_cubin(compiled.cubin,
                                               device=self.device)
            else:
                found = self.client.load_ptx(compiled.ptx, device=self.device)
            try:
                parameters = found.parameters(compiled.name)
            except UnimplementedError:
                parameters = None  # the driver cannot tell: the PTX's list
            if parameters is not None:
                try:
                    check_parameters(compiled, parameters)
                except RuntimeError:
                    found.release()
                    raise
            self._executables[key] = found
        return found

    def _recording(self, plan: Plan) -> Tuple[CommandBuffer, Optional[bool]]:
        compiled = plan.compiled
        key = (compiled.metadata.hash, plan.grid, len(plan.bindings),
               plan.unaligned,
               tuple(a if isinstance(a, (bytes, str)) or a is None
                     else ("slot", a.slot) for a in plan.args))
        found = self._recordings.get(key)
        if found is not None:
            self._recordings.move_to_end(key)
            return found, None
        executable = self._executable(compiled)
        # The global scratch pointer is the binding slot after the
        # arguments': each launch binds a scratch buffer of its own.
        args = [slot(len(plan.bindings)) if isinstance(arg, str) else arg
                for arg in plan.args]  # "scratch", a slot, bytes or None
        with self.client.record(bindings=len(plan.bindings) +
                                (1 if plan.scratch else 0),
                                device=self.device,
                                unaligned_bindings=plan.unaligned
                                ) as command_buffer:
            command_buffer.dispatch(executable, compiled.name,
                                    grid=plan.grid, block=plan.block,
                                    args=args,
                                    shared_memory=compiled.shared)
        self._recordings[key] = command_buffer
        while len(self._recordings) > MAX_RECORDINGS:
            _, old = self._recordings.popitem(last=False)
            old.release()
        return command_buffer, command_buffer.memo_hit

    def _completion(self) -> _Completion:
        """A completion semaphore for a new launch (under self._lock): one
        whose last launch is done, else a new one, else (with
        MAX_LAUNCHES_IN_FLIGHT in flight) the first to complete."""
        pool = self._completions
        error: Optional[HaloError] = None
        while True:
            index = 0
            while index < len(pool):
                completion = pool[index]
                try:
                    done = completion.semaphore.query() >= completion.value
                except HaloError:
                    # Its launch failed: the semaphore stays failed (its
                    # Launch raises the cause); never reuse it.
                    del pool[index]
                    if completion.scratch is not None:
                        completion.scratch.release()
                    continue
                if done:
                    return pool.pop(index)
                index += 1
            if len(pool) < MAX_LAUNCHES_IN_FLIGHT:
                return _Completion(self.client.create_semaphore())
            if error is not None:
                # The wait failed, yet no semaphore failed or completed.
                raise error
            try:
                wait_any([(c.semaphore, c.value) for c in pool])
            except HaloError as raised:
                error = raised  # a failed launch: the next look drops it

    def run(self, *args: Any, grid: Any, num_warps: int = 4,
            num_stages: int = 3, queue: Optional[Queue] = None,
            wait: Sequence[Tuple[Semaphore, int]] = (),
            **kwargs: Any) -> Launch:
        """Launches the kernel (kernel[grid](...) calls this): maps,
        compiles, loads and records as needed, executes, and returns the
        Launch to wait on (its own semaphore value: see the module
        docstring)."""
        plan = self.prepare(*args, grid=grid, num_warps=num_warps,
                            num_stages=num_stages, **kwargs)
        with self._lock:
            command_buffer, memo_hit = self._recording(plan)
            completion = self._completion()
            bindings: List[Any] = list(plan.bindings)
            try:
                if plan.scratch:
                    scratch = completion.scratch
                    if scratch is None or scratch.size < plan.scratch:
                        completion.scratch = None
                        if scratch is not None:
                            scratch.release()
                        completion.scratch = self.client.create_buffer(
                            plan.scratch, device=self.device)
                    bindings.append(completion.scratch)
                value = completion.value + 1
                target = queue if queue is not None else self._queue
                self.client.execute(command_buffer, bindings=bindings,
                                    wait=wait,
                                    signal=[(completion.semaphore, value)],
                                    queue=target)
            except BaseException:
                # Whether the daemon took the launch is unknown: its
                # semaphore may or may not reach value, so it is not reused.
                if completion.scratch is not None:
                    completion.scratch.release()
                raise
            completion.value = value
            self._completions.append(completion)
        return Launch(completion.semaphore, value, memo_hit)


def kernel(client: Client, fn: Any, *, device: int = 0,
           arch: Optional[int] = None, binary: str = "cubin",
           queue: Optional[Queue] = None) -> Kernel:
    """Binds the @triton.jit function |fn| to |client| and |device| (its
    architecture from the device info; |arch| (e.g. 90) overrides it, and
    lets a CPU-driver client compile and prepare). |binary|: load the
    "cubin" (default) or the "ptx" (the driver JIT-compiles it). |queue|:
    where launches run (None: the client's default queue).
    OutOfRangeError for a |device| the daemon does not have (without
    |arch|)."""
    return Kernel(client, fn, device=device, arch=arch, binary=binary,
                  queue=queue)


__all__ = ["Compiled", "Kernel", "Launch", "Plan", "check_parameters",
           "compile", "kernel", "ptx_parameters", "triton_type"]
