"""A graph's execs (``NodeTable.execs``, an ``ExecRefs``): held weakly, seen as the execs
themselves, an exec gone without ``close()`` no longer keeps the raw graph, and adding from
several threads while another reads loses nothing. CPU only: any weakly referable object
stands for an exec, and the last test uses the driver stub (both routes)."""

import threading
import weakref

import pytest

from pycudagraph.nodes.table import ExecRefs
from tests.support.native_driver import both, run


class Exe:  # stands for a GraphExec: weakly referable, compared by identity
    pass


def test_add_discard_contains_and_what_iterating_sees():
    refs, a, b = ExecRefs(), Exe(), Exe()
    refs.add(a)
    refs.add_ref(weakref.ref(b))  # the frameless form adds the same thing
    refs.add(a)  # twice: once
    assert a in refs and b in refs and Exe() not in refs
    assert len(refs) == 2 and set(refs) == {a, b} and sorted(map(id, refs)) == sorted([id(a), id(b)])
    refs.discard(a)
    refs.discard(a)  # not there: no error
    assert list(refs) == [b] and bool(refs) and repr(refs).startswith("ExecRefs([")
    refs.discard(b)
    assert not refs and len(refs) == 0 and list(refs) == []


def test_an_exec_gone_without_close_is_not_counted_and_its_ref_is_dropped():
    refs, keep = ExecRefs(), Exe()
    gone = Exe()
    refs.add(keep)
    refs.add(gone)
    del gone  # reference counting frees it now: no collector run
    assert list(refs) == [keep] and len(refs) == 1
    assert len(refs.refs) == 1  # the dead ref was dropped when met
    with pytest.raises(TypeError):
        refs.add(1)  # not weakly referable: refused, nothing added
    assert len(refs.refs) == 1


def test_threads_add_while_another_reads():
    refs, made, stop = ExecRefs(), [], threading.Event()
    errors = []

    def reader():
        try:
            while not stop.is_set():
                for exe in refs:
                    assert isinstance(exe, Exe)
                len(refs)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def writer(n):
        mine = [Exe() for _ in range(n)]
        made.extend(mine)
        for i, exe in enumerate(mine):
            refs.add_ref(weakref.ref(exe)) if i % 2 else refs.add(exe)

    r = threading.Thread(target=reader)
    r.start()
    writers = [threading.Thread(target=writer, args=(500,)) for _ in range(4)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    stop.set()
    r.join()
    assert not errors, errors
    assert len(refs) == 2000 and set(refs) == set(made)


@both
def test_a_closed_graph_waits_for_its_exec_and_not_for_a_dropped_one(native):
    run('''
        from cuda.bindings import runtime as rt
        from pycudagraph.graph.exec_reuse import paused
        rt.cudaGraphExecDestroy = lambda h: None
        destroyed = []
        rt.cudaGraphDestroy = lambda raw: destroyed.append(int(raw))
        def graph():  # owned: close() destroys its raw graph (cudaGraphDestroy)
            g = pcg.Graph._wrap(rt.cudaGraph_t(0xD0000 + len(destroyed) * 16 + stub.total()),
                                owned=True)
            g.add_kernel(k, 1, 32, (buffer(), 1.0, 4))
            return g
        with paused():  # no released exec kept for reuse: each destroyed at once
            g = graph()
            exe = g.instantiate()
            assert g.execs == [exe] and exe in g.table.execs
            del exe  # dropped without close(), no collector run: the graph no longer waits
            assert g.execs == [] and not g.table.execs
            g.close()
            assert destroyed == [g.table.h] and g.table.dead
            g2 = graph()
            held = g2.instantiate()
            g2.close()  # its exec still needs the raw graph: destroyed after it
            assert destroyed == [g.table.h] and not g2.table.dead
            assert list(g2.table.execs) == [held]
            held.close()
            assert destroyed == [g.table.h, g2.table.h] and not g2.table.execs and g2.table.dead
    ''', native)
