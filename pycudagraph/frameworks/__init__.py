"""PyTorch and CuPy glue, imported lazily: nothing here imports a framework.

================== ==========================================================================
loaded             which frameworks the program imported (``sys.modules``), private entry
                   points by name
pools              memory-safe capture: the private pool framework allocations inside
                   ``pcg.capture`` come from (:class:`~.pools.CapturePool`)
arrays             device arrays of any framework as address, byte range and layout key;
                   the key of a call
ops                what graphed calls ask of the frameworks: streams, copies, comparisons
rebind_plan        where each input sits in an exec, and the set-params calls that move it
graphed            ``pcg.graphed(fn)``: capture once per input key, rebind, launch
graphed_keys       a graphed callable's key table: entries, eager keys, pools, memory budget
graphed_capture    how one key is warmed up and captured on a side stream
graphed_new_keys   what a call with a new key does: capture now or in the background,
                   fall back to eager
graphed_background the capture thread of ``capture="background"``
owners             who owns a device address (the audit's owner lookup)
================== ==========================================================================

This package's ``__init__`` imports nothing, so ``pcg.capture`` can use :mod:`.pools`
without importing the graphed callables.
"""
