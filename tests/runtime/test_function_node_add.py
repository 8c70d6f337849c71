"""``fast.add_function_node``: a node launching a library's ``CUfunction`` (a graph file's
kernel found by name) added with one packed buffer through ctypes, on both routes, against
the driver stub (``tests/support/driver_stub.c`` as libcuda)."""

from tests.support.native_driver import both, run


@both
def test_a_function_node_is_added_with_its_dims_deps_and_argument_bytes(native):
    run('''
        import struct
        args = [struct.pack("<Q", 0x7F00_0000_1000), struct.pack("<f", 0.5), struct.pack("<i", 3)]
        h = fast.add_function_node(0x7000, [0xD1, 0xD2], 0x6000, (2, 1, 1, 32, 1, 1, 16), args)
        assert h == 0xABC000 + stub.calls("cuGraphAddKernelNode"), hex(h)
        assert stub.header() == (0x6000, 2, 1, 1, 32, 1, 1, 16), stub.header()
        assert stub.ints(2) == (0x7000, 2) and stub.deps(2) == [0xD1, 0xD2]
        assert stub.values(k.params) == (0x7F00_0000_1000, 0.5, 3), stub.values(k.params)
        # no dependencies: a null array
        fast.add_function_node(0x7000, [], 0x6000, (1, 1, 1, 1, 1, 1, 0), args)
        assert stub.ints(2) == (0x7000, 0)
        # a refused add raises the CudaError naming the call, after one driver call
        driver_refuses(lambda: fast.add_function_node(0x7000, [], 0x6000,
                                                      (1, 1, 1, 1, 1, 1, 0), args),
                       "cuGraphAddKernelNode")
        stub.set_rc("cuGraphAddKernelNode", 0)
        # a trace records the call
        seen = []
        check.tracer = lambda api, a, r: seen.append((api, r))
        try:
            fast.add_function_node(0x7000, [0xD1], 0x6000, (1, 1, 1, 1, 1, 1, 0), args)
        finally:
            check.tracer = None
        assert seen == [("cuGraphAddKernelNode", (0,))], seen
    ''', native)
