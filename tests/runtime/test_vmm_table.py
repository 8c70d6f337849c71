"""The sleepable memory table (pycudagraph/_cuda/_vmm_table.c through _cuda/vmm.py), on CPU:
each allocation a range of its own backed by one physical allocation, unmap keeps the
ranges and gives the memory back, remap backs them again at the same addresses (all or
nothing), tags keep pools apart, PyTorch's allocator functions tag by thread, and every
failure names its call. A stand-in driver (tests/support/vmm_driver_stub.c) keeps what a
real one would and counts any misuse; each test runs in a fresh interpreter.
"""

import os

from pycudagraph._cuda import _build
from tests.support import vmm_stub
from tests.support.vmm_stub import run


def test_the_table_builds_as_its_own_module():
    """setup.py and _build.py build _vmm from its own files, beside (not inside) _native."""
    assert _build.VMM_SOURCES == ("_vmm.c", "_vmm_table.c")
    assert not set(_build.VMM_SOURCES) & set(_build.SOURCES)
    assert os.path.basename(_build.target("_vmm")).startswith("_vmm.")
    assert all(os.path.exists(p) for p in _build.vmm_sources() + _build.vmm_headers())
    setup = open(os.path.join(vmm_stub.ROOT, "setup.py"), encoding="utf-8").read()
    assert '"pycudagraph._cuda._vmm", _build.vmm_sources(relative=True)' in setup


def test_alloc_unmap_remap_free_bookkeeping():
    run('''
        a = vmm.alloc(1000, 0, 7)          # rounds up to the granularity
        b = vmm.alloc(3 * MB - 5, 0, 7)
        c = vmm.alloc(MB, 0, 8)            # another tag
        assert a % MB == 0 and len({a, b, c}) == 3
        rows = {r[0]: r for r in vmm.allocations()}
        assert rows[a][1:] == (MB, 0, True, 7) and rows[b][1] == 3 * MB
        assert vmm.allocations(8) == [(c, MB, 0, True, 8)]
        assert stub.live() == {"ranges": 3, "handles": 3, "mappings": 3, "bytes": 5 * MB,
                               "misuse": 0}
        assert stub.value("stub_last_access_flags", __import__("ctypes").c_int) == 3  # read/write
        assert vmm.unmap(7) == (2, 4 * MB)
        assert stub.live() == {"ranges": 3, "handles": 1, "mappings": 1, "bytes": MB, "misuse": 0}
        assert vmm.unmap(7) == (0, 0)      # nothing mapped: nothing to do
        assert [r[3] for r in vmm.allocations(7)] == [False, False]
        assert vmm.remap(7) == (2, 4 * MB)
        assert {r[0] for r in vmm.allocations(7)} == {a, b}   # the same addresses
        assert stub.live()["bytes"] == 5 * MB and stub.live()["mappings"] == 3
        assert vmm.remap(7) == (0, 0)
        vmm.unmap(7)
        vmm.free(a)                        # asleep: only its range is freed
        vmm.free(b)
        vmm.free(c)                        # awake: waits for the device, unmaps, releases
        assert stub.calls("cuCtxSynchronize") == 1
        assert stub.live() == {"ranges": 0, "handles": 0, "mappings": 0, "bytes": 0, "misuse": 0}
        assert vmm.allocations() == []
        refused(lambda: vmm.free(c), CudaError, "not an allocation of this table")
    ''')


def test_remap_is_all_or_nothing():
    run('''
        ptrs = [vmm.alloc(MB, 0, 3) for _ in range(4)]
        vmm.unmap(3)
        stub.fail("cuMemMap", 3)           # the third mapping fails
        exc = refused(lambda: vmm.remap(3), CudaError, "cuMemMap")
        assert exc.api == "cuMemMap"
        assert all(not r[3] for r in vmm.allocations(3))  # what was mapped went back
        assert stub.live() == {"ranges": 4, "handles": 0, "mappings": 0, "bytes": 0, "misuse": 0}
        assert vmm.remap(3) == (4, 4 * MB)   # and a later wake works
        for p in ptrs:
            vmm.free(p)
        assert stub.live()["ranges"] == 0 and stub.live()["misuse"] == 0
    ''')


def test_failed_allocation_leaves_nothing_behind():
    run('''
        for api in ("cuMemAddressReserve", "cuMemCreate", "cuMemMap", "cuMemSetAccess"):
            stub.fail(api, 1)
            exc = refused(lambda: vmm.alloc(MB, 0, 1), CudaError, api)
            assert exc.api == api
            live = stub.live()
            assert live == {"ranges": 0, "handles": 0, "mappings": 0, "bytes": 0,
                            "misuse": 0}, (api, live)
        assert vmm.allocations() == []
        assert stub.value("stub_mode", __import__("ctypes").c_int) == 0  # capture mode restored
    ''')


def test_unmap_failure_names_the_call_and_keeps_the_rest():
    run('''
        a, b = vmm.alloc(MB, 0, 5), vmm.alloc(MB, 0, 5)
        stub.fail("cuMemUnmap", 2)
        refused(lambda: vmm.unmap(5), CudaError, "cuMemUnmap")
        mapped = [r[3] for r in vmm.allocations(5)]
        assert sorted(mapped) == [False, True]
        assert vmm.unmap(5) == (1, MB)      # the rest goes on a second try
        assert vmm.remap(5) == (2, 2 * MB)
        vmm.free(a); vmm.free(b)
        assert stub.live()["misuse"] == 0 and stub.live()["ranges"] == 0
    ''')


def test_torch_allocator_functions_tag_by_thread_and_never_raise():
    run('''
        import ctypes, threading
        lib = ctypes.CDLL(vmm.library_path())
        lib.pcg_vmm_malloc.restype = ctypes.c_void_p
        lib.pcg_vmm_malloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        lib.pcg_vmm_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                     ctypes.c_void_p]
        assert vmm.set_tag(11) == 0
        p = lib.pcg_vmm_malloc(5 << 20, 0, None)
        seen = []
        def other():                         # another thread: its own tag (none set)
            seen.append(lib.pcg_vmm_malloc(MB, 0, None))
        t = threading.Thread(target=other); t.start(); t.join()
        assert vmm.set_tag(0) == 11
        tags = {r[0]: r[4] for r in vmm.allocations()}
        assert tags == {p: 11, seen[0]: 0}
        assert dict((r[0], r[1]) for r in vmm.allocations())[p] == 3 * MB
        assert lib.pcg_vmm_malloc(0, 0, None) is None and vmm.take_allocator_error() is None
        stub.fail("cuMemCreate", 1)
        assert lib.pcg_vmm_malloc(MB, 0, None) is None   # a failure is a null pointer
        assert vmm.take_allocator_error() == ("cuMemCreate", 2)
        assert vmm.take_allocator_error() is None
        lib.pcg_vmm_free(ctypes.c_void_p(0x1234), 0, 0, None)   # not ours: noted, no crash
        assert vmm.take_allocator_error()[0].startswith("pcg_vmm_free")
        lib.pcg_vmm_free(p, 3 * MB, 0, None)
        lib.pcg_vmm_free(seen[0], MB, 0, None)
        assert stub.live() == {"ranges": 0, "handles": 0, "mappings": 0, "bytes": 0, "misuse": 0}
    ''')


def test_a_thread_without_a_context_gets_the_primary_one():
    run('''
        import ctypes
        assert stub.value("stub_current", ctypes.c_void_p) is None
        p = vmm.alloc(MB, 2, 1)
        assert stub.value("stub_current", ctypes.c_void_p) == 0x1002  # device 2's primary
        assert stub.value("stub_last_create_device", ctypes.c_int) == 2
        vmm.free(p)
        assert stub.calls("cuDevicePrimaryCtxRetain") == 1    # retained once, then reused
    ''')


def test_trace_sees_the_calls():
    run('''
        with pcg.trace() as t:
            p = vmm.alloc(MB, 0, 4)
            vmm.unmap(4)
            vmm.remap(4)
            vmm.free(p)
        names = [r.api for r in t.records]
        for api in ("cuMemAddressReserve", "cuMemCreate", "cuMemMap", "cuMemSetAccess",
                    "cuMemUnmap", "cuMemRelease", "cuMemAddressFree"):
            assert api in names, (api, names)
    ''')
