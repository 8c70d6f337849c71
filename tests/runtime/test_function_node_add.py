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


@both
def test_a_run_of_function_nodes_is_added_one_call_a_record_and_undone_when_refused(native):
    # bulk.function_params writes every params struct and pointer array in whole-array
    # steps; fast.add_function_nodes adds one node per record (compiled: no Python work per
    # call), dependencies by record; a refusal removes what the call made, then raises
    run('''
        import struct
        from pycudagraph._cuda import bulk
        recs = np.zeros(3, bulk.RECORD)
        recs["kernel"] = [1, 0, 1]
        recs["grid"] = [(2, 1, 1), (3, 1, 1), (4, 2, 1)]
        recs["block"] = [(32, 1, 1), (64, 1, 1), (128, 1, 1)]
        recs["shared_mem"] = [0, 16, 0]
        blocks = [struct.pack("<Qfi", 0x7F00_0000_1000, 0.5, 3),  # kernel 1: (8, 4, 4) bytes
                  struct.pack("<Qi", 0x7F00_0000_2000, 7),  # kernel 0: (8, 4)
                  struct.pack("<Qfi", 0x7F00_0000_3000, 1.5, 9)]
        args = np.frombuffer(b"".join(blocks), np.uint8).copy()
        recs["arg_offset"] = [0, 16, 28]
        recs["arg_length"] = [16, 12, 16]
        deps = np.array([0, 0, 1], "<u4")  # node 1 after 0; node 2 after 0 and 1
        recs["dep_first"] = [0, 0, 1]
        recs["dep_count"] = [0, 1, 2]
        funcs, starts = [0x6000, 0x6100], [[0, 8], [0, 8, 12]]
        params = bulk.function_params(funcs, starts, recs, args)
        before = stub.calls("cuGraphAddKernelNode")
        made = []
        assert route(lambda: made.extend(fast.add_function_nodes(0x7000, params, recs, deps))) == C
        assert stub.calls("cuGraphAddKernelNode") == before + 3
        assert made == [0xABC000 + before + i + 1 for i in range(3)], made
        assert stub.header() == (0x6100, 4, 2, 1, 128, 1, 1, 0), stub.header()
        assert stub.ints(2) == (0x7000, 2) and stub.deps(2) == made[:2]
        assert stub.values(k.params) == (0x7F00_0000_3000, 1.5, 9), stub.values(k.params)
        # the third node failing: the two made are removed, the refusal raised
        stub.fail_at("cuGraphAddKernelNode", 3)
        gone = stub.calls("cuGraphDestroyNode")
        try:
            fast.add_function_nodes(0x7000, params, recs, deps)
        except pcg.CudaError as exc:
            assert str(exc).startswith("cuGraphAddKernelNode"), exc
        else:
            raise AssertionError("a refused add was not raised")
        assert stub.calls("cuGraphDestroyNode") == gone + 2
        # a record depending on a later one is refused before its call, what the call made
        # before it removed
        bad = recs.copy()
        bad["dep_first"][2], bad["dep_count"][2] = 2, 1  # deps[2] = 1 ... and node 2 itself
        deps_bad = np.array([0, 0, 2], "<u4")
        added, gone = stub.calls("cuGraphAddKernelNode"), stub.calls("cuGraphDestroyNode")
        try:
            fast.add_function_nodes(0x7000, params, bad, deps_bad)
        except pcg.ArgumentError as exc:
            assert "record 2: a dependency is not an earlier record" in str(exc), exc
        else:
            raise AssertionError("a late dependency was not refused")
        assert stub.calls("cuGraphAddKernelNode") == added + 2
        assert stub.calls("cuGraphDestroyNode") == gone + 2
    ''', native)


@both
def test_a_run_builds_nodes_that_know_their_arguments_as_one_by_one_builds_do(native):
    run('''
        import struct
        from pycudagraph._cuda import bulk
        from pycudagraph.nodes import captured_kernel, function_records
        function_records.function_offsets = lambda func, sizes: [0, 8, 12][:len(sizes)]  # the
        # sizes checked against cuFuncGetParamInfo on a GPU
        recs = np.zeros(2, bulk.RECORD)
        recs["grid"], recs["block"] = (1, 1, 1), (32, 1, 1)
        recs["arg_offset"], recs["arg_length"] = [4, 20], 16
        recs["dep_first"], recs["dep_count"] = [0, 0], [0, 1]
        args = np.zeros(40, np.uint8)
        args[4:20] = np.frombuffer(struct.pack("<Qfi", 0x7F00_0000_1000, 0.5, 3), np.uint8)
        args[20:36] = np.frombuffer(struct.pack("<Qfi", 0x7F00_0000_2000, 2.5, 4), np.uint8)
        g = fake_graph()
        g.table.h = 0x7000  # stands for the raw graph handle
        nodes = captured_kernel.CapturedKernelNode.run_records(
            {0: 0x6000}, {0: [8, 4, 4]}, recs, args, np.array([0], "<u4")).add(g.table)
        assert [type(n).__name__ for n in nodes] == ["CapturedKernelNode"] * 2
        assert [g.table.nodes[int(n)] for n in nodes] == nodes  # registered
        assert nodes[1].arg_spans() == [(0, 0, struct.pack("<Q", 0x7F00_0000_2000)),
                                        (1, 8, struct.pack("<f", 2.5)), (2, 12, struct.pack("<i", 4))]
        assert stub.deps(1) == [int(nodes[0])]
    ''', native)


@both
def test_records_prepared_once_are_added_run_by_run_as_separate_runs_would_be(native):
    # a graph file's loader checks a file's records of library functions and writes their
    # params structs once (FunctionRecords), then adds them run by run: each run's
    # dependencies are positions inside it, its argument bytes as they are when it is added
    run('''
        import struct
        from pycudagraph._cuda import bulk
        from pycudagraph.errors import ArgumentError
        from pycudagraph.nodes import captured_kernel, function_records
        function_records.function_offsets = lambda func, sizes: [0, 8, 12][:len(sizes)]  # the
        # sizes checked against cuFuncGetParamInfo on a GPU
        recs = np.zeros(4, bulk.RECORD)
        recs["kernel"] = [0, 1, 0, 1]  # both take (8, 4, 4) bytes: what the stub reads back
        recs["grid"], recs["block"] = (1, 1, 1), (32, 1, 1)
        recs["arg_offset"], recs["arg_length"] = [0, 16, 32, 48], 16
        recs["dep_first"], recs["dep_count"] = [0, 0, 0, 0], [0, 1, 0, 1]  # 1 after 0, 3 after 2
        args = np.zeros(64, np.uint8)
        for i, (p, a, n) in enumerate(((0xA0, 0.5, 3), (0xB0, 2.0, 7), (0xC0, 1.5, 9), (0xD0, 4.0, 8))):
            args[16 * i:16 * i + 16] = np.frombuffer(struct.pack("<Qfi", p, a, n), np.uint8)
        g = fake_graph()
        g.table.h = 0x7000  # stands for the raw graph handle
        named = captured_kernel.CapturedKernelNode.run_records(
            {0: 0x6000, 1: 0x6100}, {0: [8, 4, 4], 1: [8, 4, 4]}, recs, args, np.array([0], "<u4"))
        first = named.add(g.table, 0, 2)
        args[48:56] = np.frombuffer(struct.pack("<Q", 0xE0), np.uint8)  # written before its run
        second = named.add(g.table, 2, 2)
        assert stub.deps(1) == [int(second[0])]  # record 3 after record 2, not after record 0
        assert stub.header()[0] == 0x6100 and stub.values(k.params) == (0xE0, 4.0, 8)
        nodes = first + second
        assert [g.table.nodes[int(n)] for n in nodes] == nodes
        assert [n.arg_spans()[0][2] for n in nodes] == [struct.pack("<Q", v)
                                                        for v in (0xA0, 0xB0, 0xC0, 0xE0)]
        assert nodes[2].arg_spans()[1:] == [(1, 8, struct.pack("<f", 1.5)), (2, 12, struct.pack("<i", 9))]
        try:
            named.add(g.table, 3, 2)
        except ArgumentError as exc:
            assert "records 3..5 are not inside the 4 records" in str(exc), exc
        else:
            raise AssertionError("a run past the records was added")
        # a function whose sizes do not match is named before any node is made
        function_records.function_offsets = captured_kernel.function_offsets
        made = stub.calls("cuGraphAddKernelNode")
        def offsets(func, sizes):
            raise ArgumentError("the function takes arguments of [8, 8] bytes; [8, 4] were given")
        function_records.function_offsets = offsets
        try:
            captured_kernel.CapturedKernelNode.run_records(
                {0: 0x6000, 1: 0x6100}, {0: [8, 4, 4], 1: [8, 4, 4]}, recs, args,
                np.array([0], "<u4"), {0: "'_Z5scalePfi'", 1: "'_Z4stepPfi'"})
        except ArgumentError as exc:
            assert str(exc).startswith("'_Z5scalePfi': the function takes"), exc
        else:
            raise AssertionError("a size mismatch was not refused")
        assert stub.calls("cuGraphAddKernelNode") == made
    ''', native)


@both
def test_a_run_of_kernel_records_is_added_in_compiled_code_or_handed_back(native):
    # fast.add_record_nodes: each params struct written in C from the kernel's plan and the
    # argument bytes in place, one add per record; a record it does not take (a launch over
    # the kernel's limits) and the ctypes route hand the run back (None), nothing left added
    run('''
        import struct
        from pycudagraph._cuda import bulk
        k.check_config(1, 32)  # its limits read, as the loader's first-record check does
        recs = np.zeros(3, bulk.RECORD)
        recs["grid"] = [(2, 1, 1), (3, 1, 1), (4, 1, 1)]
        recs["block"] = [(32, 1, 1), (64, 1, 1), (128, 1, 1)]
        recs["shared_mem"] = [0, 16, 0]
        n = bulk.arg_length(k)  # float* y, float a, int n: 16 bytes of slots
        blocks = [struct.pack("<Qfi", 0x7F00_0000_1000 * (i + 1), 0.5 + i, 3 + i) for i in range(3)]
        args = np.frombuffer(b"".join(blocks), np.uint8).copy()
        recs["arg_offset"], recs["arg_length"] = [0, n, 2 * n], n
        deps = np.array([0, 1], "<u4")
        recs["dep_first"], recs["dep_count"] = [0, 0, 1], [0, 1, 1]
        before = stub.calls("cuGraphAddKernelNode")
        got = fast.add_record_nodes(0x7000, (k,), recs, args, deps)
        if not COMPILED:
            assert got is None and stub.calls("cuGraphAddKernelNode") == before
        else:
            assert got == [0xABC000 + before + i + 1 for i in range(3)], got
            assert stub.header() == (k.current_function(), 4, 1, 1, 128, 1, 1, 0), stub.header()
            assert stub.ints(2) == (0x7000, 1) and stub.deps(1) == got[1:2]
            assert stub.values(k.params) == (0x7F00_0000_1000 * 3, 2.5, 5), stub.values(k.params)
            # a launch over the kernel's 1024 threads: handed back, what was added removed
            recs["block"][2] = (2048, 1, 1)
            added, gone = stub.calls("cuGraphAddKernelNode"), stub.calls("cuGraphDestroyNode")
            assert fast.add_record_nodes(0x7000, (k,), recs, args, deps) is None
            assert stub.calls("cuGraphAddKernelNode") == added + 2
            assert stub.calls("cuGraphDestroyNode") == gone + 2
    ''', native)
