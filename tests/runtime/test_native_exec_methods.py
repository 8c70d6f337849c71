"""``GraphExec.set_arg`` and ``GraphExec.set_params(node, args=...)``, inherited from the
hot path's base type (``fast.ExecBase``: ``_native_types.c`` compiled, ``_cuda/hot_base.py``
with PYCUDAGRAPH_NO_NATIVE=1): for a kernel node the exec has a record of, the compiled
update is made without the checked methods' frames and the replaced objects are retired;
everything else is the subclass's checked method's, with the same result (CPU, the driver
stub; both routes)."""

from tests.support.native_driver import both, run


@both
def test_updates_as_methods_in_c_and_their_fallbacks(native):
    run('''
        import sys
        from pycudagraph.graph import exec as exec_module
        from pycudagraph.nodes import kernel_node
        for name in ("set_arg", "set_params"):  # inherited from the base, not the class's own
            assert name not in pcg.GraphExec.__dict__ and name in fast.ExecBase.__dict__
            kind = type(fast.ExecBase.__dict__[name]).__name__
            assert kind == ("method_descriptor" if COMPILED else "function"), kind
        g, y, y2 = fake_graph(), buffer(), buffer()
        node = g.add_kernel(k, 1, 32, (y, 1.0, 4))
        exe = g.instantiate()
        exe.set_arg(node, 1, 2.0)  # the first call makes the record (the Python method)
        frames = []
        watched = {exec_module.GraphExec._set_params_checked,
                   exec_module.GraphExec._set_arg_checked, kernel_node.exec_set_arg,
                   kernel_node.exec_set_args}
        codes = {getattr(f, "__code__", None) for f in watched}

        def watch(frame, event, arg):
            if event == "call" and frame.f_code in codes:
                frames.append(frame.f_code.co_name)
        sys.setprofile(watch)
        exe.set_arg(node, 1, 2.5)
        exe.set_arg(node, "y", y2)
        exe.set_params(node, args=(y, 3.5, 6))
        exe.set_params(node, args=[y2, 4.5, 7])
        sys.setprofile(None)
        # compiled: the base's common case; ctypes: the checked methods, all Python anyway
        assert (frames == []) == COMPILED, frames
        assert stub.values(k.params) == (y2.ptr, 4.5, 7)
        retired = exe._ledger.retired
        assert any(r is y for r in retired) and any(r is y2 for r in retired)

        # what the methods in C leave to the Python ones: the same results
        exe.set_arg(node=node, index_or_name=1, value=5.5)  # keywords
        assert stub.values(k.params)[1] == 5.5
        exe.set_params(node, args={"a": 6.5})  # a dict
        assert stub.values(k.params) == (y2.ptr, 6.5, 7)
        exe.set_params(node, args=(y, 7.5, 8), grid=2)  # other changes
        assert stub.values(k.params) == (y.ptr, 7.5, 8)
        refused(lambda: exe.set_params(node, args=(y, 1.0)), pcg.ArgumentError, "2 given")
        refused(lambda: exe.set_arg(node, 1), TypeError, "value")
        refused(lambda: exe.set_arg(node, 1, 2.0, 3), TypeError, "")
        exe.close()
        refused(lambda: exe.set_arg(node, 1, 1.0), pcg.ClosedError, "closed")
        refused(lambda: exe.set_params(node, args=(y, 1.0, 2)), pcg.ClosedError, "closed")
        exe2 = g.instantiate()
        exe2.set_arg(node, 1, 8.5)  # no record yet: made by the Python method
        exe2.set_arg(node, 1, 9.5)
        assert stub.values(k.params)[1] == 9.5
        seen.multi = True  # several devices: the device check is the Python method's
        exe2.set_params(node, args=(y2, 1.5, 2))
        seen.multi = False
        assert stub.values(k.params) == (y2.ptr, 1.5, 2)
        node._raw = REMOVED
        refused(lambda: exe2.set_arg(node, 1, 1.0), pcg.ClosedError, "removed")
        refused(lambda: exe2.set_params(node, args=(y, 1.0, 2)), pcg.ClosedError, "removed")
        node._raw = None
        g.table.dead = "was destroyed: a test"
        refused(lambda: exe2.set_arg(node, 1, 1.0), pcg.ClosedError, "destroyed")
        refused(lambda: exe2.set_params(node, args=(y, 1.0, 2)), pcg.ClosedError, "destroyed")
        g.table.dead = ""
        exe2.set_arg(node, 1, 3.0)
        assert stub.values(k.params)[1] == 3.0
    ''', native)
