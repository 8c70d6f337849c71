"""The NCCL unique id handed from rank 0 to the other ranks in the type each binding takes
(no GPU): stand-in ``cupy.cuda.nccl`` modules as CuPy 14 (bytes) and older CuPy (a tuple
of signed chars on x86-64, unsigned on aarch64) shape them, and a stand-in nccl4py
(``nccl.bindings.nccl``: a ``UniqueId`` with the buffer protocol, ``comm_init_rank_scalable``
taking a bytearray). Each stand-in refuses what its binding refuses, with its words."""

from __future__ import annotations

import importlib
import os
import pickle
import sys
import types

import pytest

from tests.multi_gpu.gpu_counts import MULTICAST_OFF, ROOT

EXAMPLES = str(ROOT / "examples")
# An id with bytes above 127 (where signedness matters) and zeros, as NCCL's are.
UID = bytes([0x8D, 0x09, 0xD3, 0x4E, 0xFF, 0x80, 0x7F, 0x00] + [(37 * i) % 256 for i in range(120)])


@pytest.fixture(scope="module")
def nccl_ex():
    """examples/multi_gpu_nccl.py as a module; this process's multicast variables restored."""
    saved = {k: os.environ.get(k) for k in MULTICAST_OFF}
    sys.path.insert(0, EXAMPLES)
    try:
        return importlib.import_module("multi_gpu_nccl")
    finally:
        sys.path.remove(EXAMPLES)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class _CupyComm:
    made: list = []

    def __init__(self, ndev, comm_id, rank):  # what CuPy's Cython signature checks
        shape = self.shape
        if shape == "bytes":
            if not isinstance(comm_id, bytes):
                raise TypeError(f"Argument 'commId' has incorrect type (expected bytes, got "
                                f"{type(comm_id).__name__})")
            data = comm_id
        else:
            if not isinstance(comm_id, tuple):
                raise TypeError(f"Argument 'commId' has incorrect type (expected tuple, got "
                                f"{type(comm_id).__name__})")
            assert len(comm_id) == 128
            low, high = (-128, 127) if shape == "signed" else (0, 255)
            for v in comm_id:
                if not low <= v <= high:
                    raise OverflowError("value too large to convert to char" if v > high
                                        else "can't convert negative value to char")
            data = bytes(v & 0xFF for v in comm_id)
        self.made.append((ndev, data, rank, type(comm_id)))


def _cupy(shape: str, uid: bytes):
    """A stand-in cupy.cuda.nccl whose id is ``uid`` in the shape ``shape``."""
    mod = types.ModuleType("cupy.cuda.nccl")
    mod.available = True
    mod.NCCL_FLOAT32, mod.NCCL_SUM = 7, 0
    mod.get_version = lambda: 22703
    if shape == "bytes":
        mod.get_unique_id = lambda: uid
    elif shape == "signed":
        mod.get_unique_id = lambda: tuple(b - 256 if b > 127 else b for b in uid)
    else:
        mod.get_unique_id = lambda: tuple(uid)
    mod.NcclCommunicator = type("NcclCommunicator", (_CupyComm,), {"shape": shape, "made": []})
    return mod


class _UniqueId:
    """nccl4py's low-level UniqueId: 128 bytes through the buffer protocol."""

    def __init__(self, data: bytes):
        self._data = bytearray(data)

    def __buffer__(self, flags):
        return memoryview(self._data)

    def __bytes__(self):
        return bytes(self._data)


def _nccl4py(uid: bytes):
    mod = types.ModuleType("nccl.bindings.nccl")
    mod.DataType = types.SimpleNamespace(Float32=7)
    mod.RedOp = types.SimpleNamespace(Sum=0)
    mod.get_version = lambda: 22904
    mod.get_unique_id = lambda: _UniqueId(uid)
    mod.made = []

    def comm_init_rank_scalable(nranks, myrank, n_id, comm_ids, config):
        if not isinstance(comm_ids, (bytes, bytearray)) or len(comm_ids) != 128 * n_id:
            raise TypeError(f"comm_ids must be {n_id} ids of 128 bytes, got {comm_ids!r:.40}")
        if not isinstance(config, int):
            raise TypeError("config must be an address")
        mod.made.append((nranks, bytes(comm_ids), myrank))
        return 0xC0FFEE

    mod.comm_init_rank_scalable = comm_init_rank_scalable
    return mod


def _install(monkeypatch, cupy=None, nccl4py=None):
    """Make ``import nccl.bindings`` / ``from cupy.cuda import nccl`` find the stand-ins
    (None: that binding is missing)."""
    if nccl4py is None:
        monkeypatch.setitem(sys.modules, "nccl.bindings", None)  # ImportError
    else:
        pkg = types.ModuleType("nccl")
        sub = types.ModuleType("nccl.bindings")
        sub.nccl = nccl4py
        pkg.bindings = sub
        for name, mod in (("nccl", pkg), ("nccl.bindings", sub), ("nccl.bindings.nccl", nccl4py)):
            monkeypatch.setitem(sys.modules, name, mod)
    if cupy is None:
        monkeypatch.setitem(sys.modules, "cupy.cuda", None)
    else:
        top, cuda = types.ModuleType("cupy"), types.ModuleType("cupy.cuda")
        cuda.nccl, top.cuda = cupy, cuda
        for name, mod in (("cupy", top), ("cupy.cuda", cuda), ("cupy.cuda.nccl", cupy)):
            monkeypatch.setitem(sys.modules, name, mod)


@pytest.mark.parametrize("shape, taken", [("bytes", bytes), ("signed", tuple),
                                          ("unsigned", tuple)])
def test_cupy_rank_joins_with_the_id_in_the_type_its_communicator_takes(nccl_ex, monkeypatch,
                                                                        shape, taken):
    cupy = _cupy(shape, UID)
    _install(monkeypatch, cupy=cupy)
    rank0, rank1 = nccl_ex.Nccl(), nccl_ex.Nccl()
    assert rank0.kind == "cupy"
    uid = rank0.unique_id()
    assert type(uid) is bytes and uid == UID  # what travels: the id's own 128 bytes
    uid = pickle.loads(pickle.dumps(uid))  # through a queue, a TCP store or MPI
    comm = rank1.comm_init_rank(2, uid, 1)
    ndev, data, rank, got = cupy.NcclCommunicator.made[-1]
    assert (ndev, data, rank) == (2, UID, 1) and got is taken
    assert isinstance(comm, cupy.NcclCommunicator)


def test_cupy_14_communicator_never_sees_a_tuple(nccl_ex, monkeypatch):
    cupy = _cupy("bytes", UID)
    _install(monkeypatch, cupy=cupy)
    nccl_ex.Nccl().comm_init_rank(2, UID, 0)
    assert [m[3] for m in cupy.NcclCommunicator.made] == [bytes]


def test_an_id_no_form_fits_names_every_refusal(nccl_ex):
    def refuses(ndev, comm_id, rank):
        raise TypeError(f"Argument 'commId' has incorrect type (got {type(comm_id).__name__})")
    with pytest.raises(TypeError, match=r"none of its forms \(bytes: TypeError.*tuple: TypeError"):
        nccl_ex.cupy_communicator(refuses, 2, UID, 0)


def test_nccl_errors_are_not_retried(nccl_ex):
    calls = []

    class NcclError(RuntimeError):
        pass

    def fails(ndev, comm_id, rank):
        calls.append(comm_id)
        raise NcclError("NCCL_ERROR_INVALID_ARGUMENT")
    with pytest.raises(NcclError):
        nccl_ex.cupy_communicator(fails, 2, UID, 0)
    assert calls == [UID]


def test_nccl4py_rank_joins_with_a_bytearray_of_the_id(nccl_ex, monkeypatch):
    lib = _nccl4py(UID)
    _install(monkeypatch, nccl4py=lib, cupy=_cupy("bytes", UID))
    rank0, rank1 = nccl_ex.Nccl(), nccl_ex.Nccl()
    assert rank0.kind == "nccl4py"  # preferred over CuPy
    uid = rank0.unique_id()
    assert type(uid) is bytes and uid == UID
    assert rank1.comm_init_rank(2, uid, 1) == 0xC0FFEE
    assert lib.made == [(2, UID, 1)]


@pytest.mark.parametrize("given", [UID, bytearray(UID), memoryview(UID), _UniqueId(UID),
                                   tuple(UID), tuple(b - 256 if b > 127 else b for b in UID)])
def test_every_binding_form_of_the_id_gives_the_same_bytes(nccl_ex, given):
    assert nccl_ex.id_bytes(given) == UID


def test_an_id_of_the_wrong_size_is_refused(nccl_ex):
    with pytest.raises(ValueError, match="128 bytes, got 127"):
        nccl_ex.id_bytes(UID[:127])


def test_the_launchers_share_the_bytes_rank_zero_made(nccl_ex, monkeypatch):
    """share_unique_id through spawn's queue (a plain list stands in) gives every rank
    the bytes rank 0 made, which each binding's communicator then takes."""
    import queue

    from multi_gpu_launch import share_unique_id
    cupy = _cupy("signed", UID)
    _install(monkeypatch, cupy=cupy)
    box = types.SimpleNamespace(ids=queue.Queue())
    sent = share_unique_id(nccl_ex.Nccl(), 0, 2, box)
    got = share_unique_id(nccl_ex.Nccl(), 1, 2, box)
    assert sent == got == UID
    nccl_ex.Nccl().comm_init_rank(2, got, 1)
    assert cupy.NcclCommunicator.made[-1][1] == UID
