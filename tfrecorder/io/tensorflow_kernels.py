"""TensorFlow's image-decoding kernels, run through TensorFlow's C API without importing its Python package.

validate="decode" must give exactly TensorFlow's verdict, so TensorFlow's own kernels decode. Importing
the `tensorflow` Python package costs ~2 s of CPU (thousands of modules) and holds the GIL all along;
the kernels themselves live in the wheel's two native libraries (libtensorflow_framework,
libtensorflow_cc), which load in ~0.4 s. Their C API (c_api.h / c_api_eager.h, TensorFlow's stable ABI)
runs an op eagerly: `DecodeImage` with expand_animations=False is the op `tf.io.decode_image(data,
expand_animations=False)` runs, and `DecodeJpeg` with ratio=8 the one `tf.io.decode_jpeg(data,
ratio=8)` runs (ratio 4, 2 or 1 for near-duplicate hashes, decode_check), with every other attribute at
its default, as those Python calls leave them. The `*_pixels` calls also hand the decoded pixels, as a
numpy view valid during the call, to a function whose result they return (the perceptual hash is
computed from them: no second decode, no copy of a large image).

The decode (TFE_Execute) runs without the GIL, so threads decode in parallel
(beam_pipelines.workers.decode_pool); the other C calls, each a few microseconds of bookkeeping, keep it.
The context is CPU-only (CPU_ONLY_CONFIG): on a machine with GPUs, a default context would initialise
every visible GPU in the converting process and reserve most of its memory, next to a training process
that needs it. (PythonKernels, the fallback below, runs in the Python package's own context, which is
the caller's TensorFlow to configure.)
A process that has imported TensorFlow already shares the same loaded libraries (same files).

`PythonKernels` runs the same two ops through the Python package; `kernels()` falls back to it where the
native libraries are not found under the names below (a platform whose wheel names them otherwise) or
do not load (a broken installation), and raises one TensorFlowUnavailable when the package does not
import either. tests/unit/io/test_tensorflow_kernels.py holds both to `tf.io.decode_image`'s verdicts.
"""
from __future__ import annotations

import atexit
import ctypes
import errno
import importlib.util
import logging
import os
import sys
import threading
from typing import Callable, Optional, Protocol, TypeVar

import numpy as np

from tfrecorder.core.tensorflow_import import import_tensorflow, info_level_unless_set, stderr_without_start_up_lines
from tfrecorder.errors import TensorFlowUnavailable

logger = logging.getLogger("tfrecorder")

# The wheel's native libraries, framework first (the C API library links against it).
LIBRARY_NAMES = {
    "linux": ("libtensorflow_framework.so.2", "libtensorflow_cc.so.2"),
    "darwin": ("libtensorflow_framework.2.dylib", "libtensorflow_cc.2.dylib"),
}
LIBRARY_DIR: Optional[str] = None  # where the native libraries are; None: the installed wheel's folder
_TF_STRING = 7  # TF_DataType of a string tensor
_TSTRING_VIEW = 3  # TF_TString type tag: a view of bytes owned by the caller (TensorFlow never frees them)
_ERROR_LENGTH = 160
CPU_ONLY_CONFIG = b"\x0a\x07\x0a\x03GPU\x10\x00"
"""The decoding context's ConfigProto, `device_count {key: "GPU" value: 0}`, serialised by hand (field 1,
a map<string, int32>, holding one entry): no GPU device is created, so none is initialised or reserved."""
_DEALLOCATOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
_KEEP = _DEALLOCATOR(lambda data, length, argument: None)  # the tensor's memory is Python's to free

Shape = tuple[int, ...]
T = TypeVar("T")


class DecodeFailed(Exception):
    """TensorFlow refused the bytes; the message is TensorFlow's own."""


class Kernels(Protocol):
    def decode_image(self, data: bytes) -> Shape:
        """The shape `tf.io.decode_image(data, expand_animations=False)` yields (DecodeFailed if none)."""

    def decode_jpeg_ratio_8(self, data: bytes) -> Shape:
        """The shape `tf.io.decode_jpeg(data, ratio=8)` yields (DecodeFailed if none)."""

    def decode_jpeg_pixels(self, data: bytes, ratio: int, use: Callable[[np.ndarray], T]) -> tuple[Shape, T]:
        """The shape `tf.io.decode_jpeg(data, ratio=ratio)` yields, and `use` of its pixels (a height ×
        width × channels uint8 array, valid only during the call): the perceptual hash of near-duplicate
        search is computed from the verdict's own decode (DecodeFailed if none)."""

    def decode_image_pixels(self, data: bytes, use: Callable[[np.ndarray], T]) -> tuple[Shape, T]:
        """`decode_image`, with `use` of its pixels as `decode_jpeg_pixels` gives them."""


class NativeKernels:
    """The ops run by TensorFlow's eager C API on one context (thread-safe: each call has its own op)."""

    def __init__(self, directory: str, names: tuple[str, ...]) -> None:
        with info_level_unless_set(), stderr_without_start_up_lines():  # the libraries' start-up lines
            for name in names:
                _open_without_gil(os.path.join(directory, name))
                library = ctypes.CDLL(os.path.join(directory, name), mode=ctypes.RTLD_GLOBAL)
            api = _declare(library)  # a CDLL: each call releases the GIL
            status = api.TF_NewStatus()
            try:
                options = api.TFE_NewContextOptions()
                try:
                    api.TFE_ContextOptionsSetConfig(options, CPU_ONLY_CONFIG, len(CPU_ONLY_CONFIG), status)
                    _raise_unless_ok(api, status, RuntimeError)
                    self._context = api.TFE_NewContext(options, status)  # ~ms: without the GIL
                finally:
                    api.TFE_DeleteContextOptions(options)
                _raise_unless_ok(api, status, RuntimeError)
            finally:
                api.TF_DeleteStatus(status)
            # Per decode, only TFE_Execute (the decode itself) releases the GIL. The same library through
            # PyDLL keeps it for the other calls, microseconds of bookkeeping each: releasing and retaking
            # it around each could have a decoding thread wait for the GIL ~20 times per image behind the
            # encoding thread, idle meanwhile.
            self._execute = api.TFE_Execute
            self._api = _declare(ctypes.PyDLL(library._name, mode=ctypes.RTLD_GLOBAL, handle=library._handle))

    def device_types(self) -> list[str]:
        """The type of each device of the decoding context ("CPU": never a GPU, see CPU_ONLY_CONFIG)."""
        api = self._api
        status = api.TF_NewStatus()
        try:
            devices = api.TFE_ContextListDevices(self._context, status)
            _raise_unless_ok(api, status, RuntimeError)
            try:
                return [api.TF_DeviceListType(devices, index, status).decode()
                        for index in range(api.TF_DeviceListCount(devices))]
            finally:
                api.TF_DeleteDeviceList(devices)
        finally:
            api.TF_DeleteStatus(status)

    def decode_image(self, data: bytes) -> Shape:
        return self._run(b"DecodeImage", data, expand_animations=False)

    def decode_jpeg_ratio_8(self, data: bytes) -> Shape:
        return self._run(b"DecodeJpeg", data, ratio=8)

    def decode_jpeg_pixels(self, data: bytes, ratio: int, use: Callable[[np.ndarray], T]) -> tuple[Shape, T]:
        used: list = []
        return self._run(b"DecodeJpeg", data, ratio=ratio, use=use, used=used), used[0]

    def decode_image_pixels(self, data: bytes, use: Callable[[np.ndarray], T]) -> tuple[Shape, T]:
        used: list = []
        return self._run(b"DecodeImage", data, expand_animations=False, use=use, used=used), used[0]

    def _run(self, op_name: bytes, data: bytes, ratio: Optional[int] = None,
             expand_animations: Optional[bool] = None, use: Optional[Callable] = None,
             used: Optional[list] = None) -> Shape:
        api = self._api
        status = api.TF_NewStatus()
        tensor = handle = op = output = None
        try:
            # A scalar string tensor whose one TF_TString views `data` (which outlives the tensor): no copy.
            view = (ctypes.c_uint64 * 3)(len(data) << 2 | _TSTRING_VIEW, ctypes.cast(data, ctypes.c_void_p).value)
            tensor = api.TF_NewTensor(_TF_STRING, None, 0, view, ctypes.sizeof(view), _KEEP, None)
            handle = api.TFE_NewTensorHandle(tensor, status)
            _raise_unless_ok(api, status, RuntimeError)
            op = api.TFE_NewOp(self._context, op_name, status)
            _raise_unless_ok(api, status, RuntimeError)
            api.TFE_OpAddInput(op, handle, status)
            _raise_unless_ok(api, status, RuntimeError)
            if ratio is not None:
                api.TFE_OpSetAttrInt(op, b"ratio", ratio)
            if expand_animations is not None:
                api.TFE_OpSetAttrBool(op, b"expand_animations", int(expand_animations))
            outputs, count = (ctypes.c_void_p * 1)(), ctypes.c_int(1)
            self._execute(op, outputs, ctypes.byref(count), status)  # the one call without the GIL
            _raise_unless_ok(api, status, DecodeFailed)
            output = outputs[0]
            shape = tuple(api.TFE_TensorHandleDim(output, axis, status)
                          for axis in range(api.TFE_TensorHandleNumDims(output, status)))
            if use is not None and used is not None:  # `use` sees the output tensor's memory before it is freed
                resolved = api.TFE_TensorHandleResolve(output, status)
                _raise_unless_ok(api, status, RuntimeError)
                try:
                    size = api.TF_TensorByteSize(resolved)
                    buffer = (ctypes.c_uint8 * size).from_address(api.TF_TensorData(resolved)) if size else b""
                    used.append(use(np.frombuffer(buffer, dtype=np.uint8).reshape(shape)))
                finally:
                    api.TF_DeleteTensor(resolved)
            return shape
        finally:
            for delete, thing in ((api.TFE_DeleteTensorHandle, output), (api.TFE_DeleteOp, op),
                                  (api.TFE_DeleteTensorHandle, handle), (api.TF_DeleteTensor, tensor)):
                if thing:
                    delete(thing)
            api.TF_DeleteStatus(status)


class PythonKernels:
    """The same ops through the `tensorflow` Python package (imported on first use)."""

    def decode_image(self, data: bytes) -> Shape:
        return self._run(lambda tf: tf.io.decode_image(data, expand_animations=False))

    def decode_jpeg_ratio_8(self, data: bytes) -> Shape:
        return self._run(lambda tf: tf.io.decode_jpeg(data, ratio=8))

    def decode_jpeg_pixels(self, data: bytes, ratio: int, use: Callable[[np.ndarray], T]) -> tuple[Shape, T]:
        used: list = []
        return self._run(lambda tf: tf.io.decode_jpeg(data, ratio=ratio), use, used), used[0]

    def decode_image_pixels(self, data: bytes, use: Callable[[np.ndarray], T]) -> tuple[Shape, T]:
        used: list = []
        return self._run(lambda tf: tf.io.decode_image(data, expand_animations=False), use, used), used[0]

    @staticmethod
    def _run(decode, use: Optional[Callable] = None, used: Optional[list] = None) -> Shape:
        tf = import_tensorflow()
        try:
            decoded = decode(tf)
        except tf.errors.OpError as exc:
            raise DecodeFailed(_first_line(exc.message or type(exc).__name__)) from None
        if use is not None and used is not None:
            used.append(use(decoded.numpy()))
        return tuple(int(size) for size in decoded.shape)


def native_library_dir() -> Optional[str]:
    """The directory of the installed TensorFlow wheel's native libraries (found without importing it)."""
    module = sys.modules.get("tensorflow")
    spec = getattr(module, "__spec__", None) or importlib.util.find_spec("tensorflow")
    locations = list(getattr(spec, "submodule_search_locations", None) or [])
    return locations[0] if locations else None


def _native_names() -> Optional[tuple[str, ...]]:
    platform = "darwin" if sys.platform == "darwin" else "linux" if sys.platform.startswith("linux") else None
    return LIBRARY_NAMES.get(platform) if platform else None


_loaded: Optional[Kernels] = None
_lock = threading.Lock()
_loader: Optional[threading.Thread] = None  # load_in_background's thread, once started


def kernels() -> Kernels:
    """This process's kernels, loaded once: native when the wheel's libraries are there and load, else
    the Python package's (TensorFlowUnavailable when that does not import either)."""
    global _loaded
    if _loaded is not None:  # every decode asks: no lock once loaded
        return _loaded
    with _lock:
        if _loaded is None:
            _loaded = _load()
        return _loaded


def _load() -> Kernels:
    directory, names = LIBRARY_DIR or native_library_dir(), _native_names()
    native_failure = None
    if directory and names and all(os.path.exists(os.path.join(directory, name)) for name in names):
        try:
            return NativeKernels(directory, names)
        except (OSError, AttributeError, RuntimeError) as exc:  # not libraries, a missing symbol, no context
            native_failure = f"TensorFlow's native libraries in {directory} do not load ({_first_line(str(exc))})"
    try:
        import_tensorflow()
    except Exception as exc:  # noqa: BLE001 - whatever a broken installation raises, stated once
        reasons = [native_failure] if native_failure else []
        reasons.append(f"importing tensorflow failed ({type(exc).__name__}: {_first_line(str(exc))})")
        raise TensorFlowUnavailable(
            errno.ELIBACC, f'validate="decode" needs TensorFlow to decode images, and it does not load here: '
            f'{"; ".join(reasons)}. Repair the TensorFlow installation, or convert with validate="header"') from None
    if native_failure:
        logger.warning("%s; decoding through the tensorflow package instead", native_failure)
    return PythonKernels()


def _open_without_gil(path: str) -> None:
    """dlopen `path` as a foreign call through the C library, which ctypes makes without the GIL (its CDLL
    constructor keeps it: a thread loading TensorFlow's libraries, ~0.3 s, would stall every other
    thread). The CDLL that follows finds the library loaded; a failure is left for it to report.

    Lazily bound (RTLD_LAZY): a function is looked up on its first call, not all of the libraries' tens
    of thousands at once — ~0.25 s to load both instead of ~0.45 s (the few this module and a decode
    call are bound on first use; CDLL's own RTLD_NOW does not bind an already loaded library again)."""
    dlopen = ctypes.CDLL(None).dlopen
    dlopen.restype, dlopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_int]
    dlopen(os.fsencode(path), os.RTLD_LAZY | os.RTLD_GLOBAL)


def load_in_background() -> None:
    """Start loading the kernels on a thread (the libraries are opened without the GIL: ~0.3 s hidden behind the caller's
    own start-up, e.g. building a Beam graph), once per process: a later call finds them loading or loaded
    (a thread started while they load would wait for the dynamic loader's lock, holding the GIL). A
    failure here is left for `kernels()` to raise again."""
    global _loader
    if _loaded is not None or _loader is not None:
        return

    def load() -> None:
        try:
            kernels()
        except Exception:  # noqa: BLE001 - the caller's own kernels() call reports it
            pass

    _loader = threading.Thread(target=load, name="tfrecorder-load-kernels", daemon=True)
    _loader.start()
    atexit.register(_loader.join, EXIT_WAIT_SECONDS)


EXIT_WAIT_SECONDS = 60.0
"""How long a process exiting while the kernels load waits for them: the loading thread holds file
descriptor 2 (stderr_without_start_up_lines) and writes what it caught back when it ends, so a message
printed meanwhile (a command line's one-line error before it exits) is not lost with the thread."""


def _first_line(message: str) -> str:
    return message.splitlines()[0][:_ERROR_LENGTH] if message else ""


def _raise_unless_ok(api, status, error: type[Exception]) -> None:
    if api.TF_GetCode(status) != 0:
        raise error(_first_line(api.TF_Message(status).decode("utf-8", "replace")))


def _declare(library: ctypes.CDLL) -> ctypes.CDLL:
    """`library` with the C signatures of the functions this module calls."""
    pointer, text, integer = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    signatures = {
        "TF_NewStatus": (pointer, []),
        "TF_DeleteStatus": (None, [pointer]),
        "TF_GetCode": (integer, [pointer]),
        "TF_Message": (text, [pointer]),
        "TF_NewTensor": (pointer, [integer, ctypes.POINTER(ctypes.c_int64), integer, pointer, ctypes.c_size_t,
                                   _DEALLOCATOR, pointer]),
        "TF_DeleteTensor": (None, [pointer]),
        "TFE_NewContextOptions": (pointer, []),
        "TFE_ContextOptionsSetConfig": (None, [pointer, ctypes.c_char_p, ctypes.c_size_t, pointer]),
        "TFE_DeleteContextOptions": (None, [pointer]),
        "TFE_NewContext": (pointer, [pointer, pointer]),
        "TFE_ContextListDevices": (pointer, [pointer, pointer]),
        "TF_DeviceListCount": (integer, [pointer]),
        "TF_DeviceListType": (text, [pointer, integer, pointer]),
        "TF_DeleteDeviceList": (None, [pointer]),
        "TFE_NewTensorHandle": (pointer, [pointer, pointer]),
        "TFE_DeleteTensorHandle": (None, [pointer]),
        "TFE_TensorHandleNumDims": (integer, [pointer, pointer]),
        "TFE_TensorHandleDim": (ctypes.c_int64, [pointer, integer, pointer]),
        "TFE_NewOp": (pointer, [pointer, text, pointer]),
        "TFE_DeleteOp": (None, [pointer]),
        "TFE_OpAddInput": (None, [pointer, pointer, pointer]),
        "TFE_OpSetAttrInt": (None, [pointer, text, ctypes.c_int64]),
        "TFE_OpSetAttrBool": (None, [pointer, text, ctypes.c_ubyte]),
        "TFE_Execute": (None, [pointer, ctypes.POINTER(pointer), ctypes.POINTER(integer), pointer]),
        "TFE_TensorHandleResolve": (pointer, [pointer, pointer]),
        "TF_TensorData": (pointer, [pointer]),
        "TF_TensorByteSize": (ctypes.c_size_t, [pointer]),
    }
    for name, (result, arguments) in signatures.items():
        function = getattr(library, name)
        function.restype, function.argtypes = result, arguments
    return library

