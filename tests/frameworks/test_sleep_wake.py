"""Sleep and wake of a sleepable pool (pycudagraph/frameworks/sleep.py, regions.py,
sleep_alloc.py, pools.py), on CPU: the state machine (sleep twice, wake while awake, a failed
wake stays asleep), which execs a sleep blocks (those holding the pool, those whose graphs
bake in its addresses) and that their launches raise naming the pool while others launch,
argument errors, how PyTorch and CuPy allocations reach the table, regions and captures
inside them, g.sleep(). The sleepable memory table runs on the stand-in driver
(tests/support/vmm_driver_stub.c), device synchronization and host copies are recorded
instead of made; each test runs in a fresh interpreter.
"""

from tests.support.vmm_stub import run

#: Device synchronization, pinned host memory and copies recorded, not made (no GPU here).
FAKE_COPIES = '''
    from cuda.bindings import runtime as rt
    from pycudagraph.frameworks import sleep as S
    from pycudagraph._cuda import versions as _versions
    from tests.support.fakes import fake_exec, fake_graph, fake_kernel, fake_kernel_node
    synced, copies, pinned = [], [], []

    class FakePinned:
        def __init__(self, n):
            self.ptr, self.nbytes, self.freed = 0x5550000 + 0x100000 * len(pinned), n, False
            pinned.append(self)
        def free(self):
            self.freed = True

    S._synchronize = lambda devs: synced.append(sorted(devs))
    S.PinnedBuffer = FakePinned
    S.call = lambda fn, *a: copies.append((a[3].name[len("cudaMemcpy"):], a[0], a[1], a[2]))
    _versions.graph_nodes = lambda raw: [rt.cudaGraphNode_t(int(n)) for g in GRAPHS
                                         if int(g.table.h) == int(raw)
                                         for n in g.table.nodes.values()]
    GRAPHS = []

    def graph(*keep):
        g = fake_graph()
        g.table.ledger.keep_also(*keep)
        GRAPHS.append(g)
        return g

    def reads(address):
        """A graph with one kernel node whose pointer argument is ``address``."""
        g = graph()
        fake_kernel_node(g, fake_kernel("float* y, int n"), args=(address, 4),
                         sig="float* y, int n")
        return g

    def blocked(exe, words):
        refused(lambda: exe.launch(None), PyCudaGraphError, words)
'''


def test_sleep_wake_state_machine_and_blocked_launches():
    run(FAKE_COPIES + '''
        pool = pcg.CapturePool(sleepable=True)
        tag = pool._state.sleep.tag
        a, b = vmm.alloc(MB, 0, tag), vmm.alloc(3 * MB, 0, tag)
        assert pool.sleepable and not pool.asleep
        assert pool.nbytes == pool.mapped_bytes == 4 * MB
        holder = fake_exec(graph(pool))        # a graph captured with the pool
        reader = fake_exec(reads(b + 4096))    # another graph reading inside it
        other = fake_exec(reads(0x1234560000))  # one that does not
        assert pool.sleep(keep=True) == 4 * MB
        assert pool.asleep and pool.mapped_bytes == 0 and pool.nbytes == 4 * MB
        assert stub.live()["handles"] == 0 and stub.live()["ranges"] == 2
        assert synced == [[0]]                 # the device was idle before the unmap
        assert sorted(c[:2] for c in copies) == [("DeviceToHost", p) for p in
                                                  sorted((pinned[0].ptr, pinned[0].ptr + MB))]
        for exe in (holder, reader):
            blocked(exe, "is asleep")
            assert repr(pool).replace(" asleep", "") in exe.launch_block
        assert other.launch_block is None
        assert pool.sleep() == 0 and len(copies) == 2 and len(synced) == 1  # asleep: nothing
        refused(lambda: pool.activate(0, 0), PyCudaGraphError, "is asleep")
        assert "asleep" in repr(pool)
        copies.clear()
        assert pool.wake() == 4 * MB
        assert sorted(c[:3] for c in copies) == sorted(
            [("HostToDevice", a, pinned[0].ptr), ("HostToDevice", b, pinned[0].ptr + MB)])
        assert pinned[0].freed and not pool.asleep and pool.mapped_bytes == 4 * MB
        assert [r[0] for r in vmm.allocations(tag)] == [a, b]   # the same addresses
        assert holder.launch_block is None and reader.launch_block is None
        assert pool.wake() == 0
        copies.clear()
        assert pool.sleep(keep=False) == 4 * MB and copies == [] and len(pinned) == 1
        assert pool.wake() == 4 * MB and copies == []   # scratch: nothing restored
        assert stub.live()["misuse"] == 0
    ''')


def test_a_failed_wake_stays_asleep_and_two_sleepers_block_until_both_wake():
    run(FAKE_COPIES + '''
        one, two = pcg.CapturePool(sleepable=True), pcg.CapturePool(sleepable=True)
        vmm.alloc(MB, 0, one._state.sleep.tag)
        vmm.alloc(MB, 0, two._state.sleep.tag)
        exe = fake_exec(graph(one, two))
        one.sleep(keep=False)
        two.sleep(keep=False)
        stub.fail("cuMemCreate", 1)
        refused(one.wake, CudaError, "cuMemCreate")
        assert one.asleep and stub.live()["mappings"] == 0
        blocked(exe, "is asleep")
        one.wake()
        blocked(exe, repr(two))                 # still asleep: the other one blocks it
        two.wake()
        assert exe.launch_block is None
        assert stub.live()["misuse"] == 0
    ''')


def test_a_pool_that_goes_asleep_wakes_first():
    run(FAKE_COPIES + '''
        import gc
        pool = pcg.CapturePool(sleepable=True)
        p = vmm.alloc(MB, 0, pool._state.sleep.tag)
        pool.sleep(keep=True)
        del pool
        gc.collect()
        assert [r[3] for r in vmm.allocations() if r[0] == p] == [True]  # mapped again
        assert pinned[0].freed
    ''')


def test_argument_errors():
    run(FAKE_COPIES + '''
        refused(lambda: pcg.CapturePool(sleepable="yes"), ArgumentError, "sleepable")
        refused(lambda: pcg.CapturePool(torch_pool=(0, 1), sleepable=True), ArgumentError,
                "give no torch_pool or cupy_pool")
        plain = pcg.CapturePool()
        assert not plain.sleepable and not plain.asleep and plain.nbytes == 0
        refused(plain.sleep, ArgumentError,
                "cannot sleep; make it with pcg.CapturePool(sleepable=True)")
        refused(plain.wake, ArgumentError, "cannot sleep")
        pool = pcg.CapturePool(sleepable=True)
        refused(lambda: pool.sleep(keep=1), ArgumentError, "keep")
        pool.activate(0, 0).close()
        refused(lambda: pool.activate(1, 0), ArgumentError, "serves device 0")
        g = graph()
        refused(g.sleep, ArgumentError, "holds no memory that can sleep")
        assert g.wake() == 0
        g2 = graph(pool)
        vmm.alloc(MB, 0, pool._state.sleep.tag)
        S_trim = []
        import pycudagraph.frameworks.regions as R
        R.graph_mem_info = lambda dev=None: {"reserved": 0}
        R.graph_mem_trim = lambda dev=None: S_trim.append(dev)
        assert g2.sleep(keep=False) == MB and pool.asleep and S_trim == [None]
        assert g2.wake() == MB and not pool.asleep
    ''')


def test_frameworks_allocate_from_the_table_with_the_pool_tag():
    run(FAKE_COPIES + '''
        import contextlib, ctypes, types
        lib = {}
        made = []

        class Allocator:  # torch.cuda.memory.CUDAPluggableAllocator
            def __init__(self, path, malloc, free):
                cdll = ctypes.CDLL(path)
                self.malloc = getattr(cdll, malloc)
                self.malloc.restype = ctypes.c_void_p
                self.malloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
                made.append((path, malloc, free))
            def allocator(self):
                return self

        class MemPool:
            def __init__(self, allocator):
                self.allocator, self.id = allocator, (0, 100 + len(lib))
                lib[self.id] = self

        routed = []
        c = types.ModuleType("torch._C")
        c._cuda_beginAllocateCurrentThreadToPool = lambda dev, pid: routed.append(("begin", pid))
        c._cuda_endAllocateToPool = lambda dev, pid: routed.append(("end", pid))
        c._cuda_releasePool = lambda dev, pid: routed.append(("release", pid))
        torch = types.ModuleType("torch")
        torch._C = c
        torch.__version__ = "0.0-fake"
        torch.cuda = types.SimpleNamespace(
            is_initialized=lambda: True, MemPool=MemPool, current_device=lambda: 0,
            memory=types.SimpleNamespace(CUDAPluggableAllocator=Allocator),
            device=lambda d: contextlib.nullcontext(), graph_pool_handle=lambda: (0, 1))
        sys.modules["torch"], sys.modules["torch._C"] = torch, c

        class Mem:
            def __init__(self, ptr, size, owner, device_id):
                self.ptr, self.size, self.owner = ptr, size, owner
        class Ptr:
            def __init__(self, mem, offset):
                self.mem, self.ptr = mem, mem.ptr + offset
        class CupyPool:
            def __init__(self, allocator):
                self.alloc = allocator
            def malloc(self, size):
                return self.alloc(size)
            def total_bytes(self):
                return 0
            def free_all_blocks(self):
                pass
        cupy = types.ModuleType("cupy")
        thread_allocators = []
        cupy.cuda = types.SimpleNamespace(
            MemoryPool=CupyPool, UnownedMemory=Mem, MemoryPointer=Ptr,
            using_allocator=lambda fn: (thread_allocators.append(fn),
                                        contextlib.nullcontext())[1])
        sys.modules["cupy"] = cupy
        import pycudagraph.frameworks.pools as P
        P.call = lambda fn, mode: 0  # the capture mode exchange around CuPy's allocation

        pool = pcg.CapturePool(sleepable=True)
        tag = pool._state.sleep.tag
        act = pool.activate(0, 0)
        assert routed == [("begin", pool.torch_id)] and pool.torch_id in lib
        assert made == [(vmm.library_path(), "pcg_vmm_malloc", "pcg_vmm_free")]
        seg = lib[pool.torch_id].allocator.malloc(20 << 20, 0, None)  # PyTorch's segment
        piece1 = thread_allocators[-1](1000)       # CuPy pieces of one chunk of the table
        piece2 = thread_allocators[-1](3000)
        act.close()
        assert vmm.set_tag(0) == 0                 # the tag went back after the activation
        assert piece2.ptr == piece1.ptr + 1024
        rows = {r[0]: r for r in vmm.allocations(tag)}
        assert seg in rows and rows[seg][1] == 20 << 20
        assert piece1.ptr in rows and rows[piece1.ptr][1] == MB
        assert pool.nbytes == (20 << 20) + MB
        pool.activate(0, 0).close()                # a second capture: no second MemPool
        assert len(lib) == 1 and len(made) == 1
    ''')


def test_a_capture_inside_a_region_gets_its_own_pool():
    run(FAKE_COPIES + '''
        from pycudagraph.frameworks.pools import framework_pools
        import types
        sys.modules["cupy"] = types.ModuleType("cupy")  # a framework is imported (no torch)
        sys.modules["cupy"].cuda = types.SimpleNamespace(
            using_allocator=lambda fn: __import__("contextlib").nullcontext())
        stream = types.SimpleNamespace(device=0, ptr=0)
        with pcg.sleepable(device=0) as region:
            assert isinstance(region, pcg.SleepableRegion) and region.pool.sleepable
            act = framework_pools(None, stream)
            assert act.pool is not region.pool and not act.pool.sleepable
            act.close()
            shared = framework_pools(region.pool, stream)  # unless given it
            assert shared.pool is region.pool
            shared.close()
            refused(region.__enter__, ArgumentError, "open already")
        vmm.alloc(MB, 0, region.pool._state.sleep.tag)
        assert region.nbytes == region.mapped_bytes == MB
        assert region.sleep() == MB and region.asleep and region.mapped_bytes == 0
        assert len(pinned) == 1                  # a region keeps its contents by default
        refused(region.__enter__, PyCudaGraphError, "is asleep")
        assert region.wake() == MB and not region.asleep
        assert "SleepableRegion" in repr(region)
    ''')
