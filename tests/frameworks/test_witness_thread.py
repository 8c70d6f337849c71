"""The thread of a save's second capture (frameworks/graphed_witness.py) gets a stack no
earlier thread used: each asks for a larger stack than the last (so glibc cannot hand it
a finished thread's stack, which keeps that thread's addresses), and the process-wide
default stack size is set back right after the thread starts. CPU only."""

import ctypes
import threading

from pycudagraph.frameworks.graphed_witness import fresh_stack_thread


def _stack_size() -> int:
    """The size of the calling thread's stack (``pthread_getattr_np``)."""
    libc = ctypes.CDLL(None)
    libc.pthread_self.restype = ctypes.c_ulong  # a pthread_t, not an int
    libc.pthread_getattr_np.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
    libc.pthread_attr_getstack.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    libc.pthread_attr_destroy.argtypes = [ctypes.c_void_p]
    attr = ctypes.create_string_buffer(128)  # pthread_attr_t (56 bytes on x86-64 glibc)
    assert libc.pthread_getattr_np(libc.pthread_self(), attr) == 0
    addr, size = ctypes.c_void_p(), ctypes.c_size_t()
    assert libc.pthread_attr_getstack(attr, ctypes.byref(addr), ctypes.byref(size)) == 0
    libc.pthread_attr_destroy(attr)
    return size.value


def test_each_second_capture_thread_asks_for_a_larger_new_stack():
    before = threading.stack_size()
    sizes = []
    for _ in range(3):
        t = fresh_stack_thread(lambda: sizes.append(_stack_size()), "stack-test")
        t.join()
        assert threading.stack_size() == before  # set back at once
    assert sizes[0] >= 32 << 20 and sizes[0] < sizes[1] < sizes[2], sizes
    plain = []
    t = threading.Thread(target=lambda: plain.append(_stack_size()))
    t.start()
    t.join()
    assert plain[0] < sizes[0]  # other threads keep the default
