"""Kernel arguments of the wrong kind, refused the same way on the compiled route and the
ctypes route (CPU, driver stub), before any driver call: True for an ``int`` or ``float``
parameter (numpy's too), a numpy float as a device pointer; and capturing the legacy
default stream is an argument error saying to use a non-default stream."""

import pytest

import pycudagraph as pcg

from tests.support.native_driver import both, run


@both
def test_bools_and_float_pointers_are_refused_on_every_hot_call(native):
    run('''
        buf = buffer()
        bad = [((buf, 1.0, True), "'n' (int) cannot take True of type bool"),
               ((buf, 1.0, np.bool_(False)), "'n' (int) cannot take np.False_"),
               ((buf, True, 4), "'a' (float) cannot take True of type bool"),
               ((buf, np.bool_(True), 4), "'a' (float) cannot take np.True_"),
               ((np.float64(4096.0), 1.0, 4), "'y' (float*) cannot take np.float64(4096.0)"),
               ((np.float32(4096.0), 1.0, 4), "not float32")]
        for _ in range(2):  # the first call is the checked one; later ones may be compiled
            k.launch(1, 32, (buf, 1.0, 4))
            for args, words in bad:
                refused(lambda: k.launch(1, 32, args), pcg.ArgumentError, words)
        assert route(lambda: k.launch(1, 32, (buf, 1.0, np.int32(4)))) == C
        g = fake_graph()
        node = g.add_kernel(k, 1, 32, (buf, 1.0, 4))
        for args, words in bad:
            refused(lambda: g.add_kernel(k, 1, 32, args), pcg.ArgumentError, words)
        exe = fake_exec(g)
        exe.set_arg(node, "n", 5)
        for i, value, words in [(2, True, "(int) cannot take True"),
                                (1, np.bool_(True), "(float) cannot take np.True_"),
                                (0, np.float64(8.0), "(float*) cannot take np.float64(8.0)")]:
            for key in (i, np.int64(i)):  # an int key and a numpy one take different routes
                refused(lambda: exe.set_arg(node, key, value), pcg.ArgumentError, words)
        assert stub.values(k.params)[2] == 5  # every refusal left the slot as it was
    ''', native)


@pytest.mark.parametrize("handle", [0, 1], ids=["0", "cudaStreamLegacy"])
def test_capturing_the_legacy_stream_is_an_argument_error(handle):
    stream = pcg.Stream.wrap(handle)
    with pytest.raises(pcg.ArgumentError, match="must be a non-default stream, got the legacy "
                                                "default stream") as info:
        stream.require_capturable("stream capture")
    assert "use a non-default stream" in str(info.value)
    with pytest.raises(pcg.ArgumentError, match="stream capture: the stream must be a "
                                                "non-default stream"):
        with pcg.capture(stream):
            pass  # not reached: refused before any CUDA call
