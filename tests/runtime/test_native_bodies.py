"""Per-node exec updates of nodes in conditional bodies after a removal (CPU, driver stub):
set_arg, compiled or through ctypes, refuses a removed node, or one of a destroyed body,
with ClosedError instead of handing the driver a destroyed node handle."""

from tests.support.native_driver import both, run

SETUP = '''
import textwrap
from cuda.bindings import runtime as rt
import pycudagraph.graph.topology as T
T.call = lambda *a: None  # cudaGraphDestroyNode: nothing to destroy here

def exec_of(g, nodes):
    return fake_exec(g)  # it copies the graph's table (and its bodies') as instantiate does

g = fake_graph()
cond = fake_node(g, pcg.IfElseNode)  # a conditional node owning two body graphs
cond._bodies = (g.table.child(rt.cudaGraph_t(0x9000), owner=cond),
                g.table.child(rt.cudaGraph_t(0x9100), owner=cond))
body, inner_owner = cond._bodies[0], None
a = body.add_kernel(k, 1, 32, (buffer(), 1.0, 4))
b = cond._bodies[1].add_kernel(k, 1, 32, (buffer(), 1.0, 4))
exe = exec_of(g, [a, b])
made = stub.calls("cuGraphExecKernelNodeSetParams")
exe.set_arg(a, 1, 2.0)
exe.set_arg(b, 1, 2.0)  # both have exec packs now
assert stub.calls("cuGraphExecKernelNodeSetParams") == made + 2
'''


@both
def test_set_arg_on_a_node_removed_from_a_body(native):
    run(SETUP + '''
body.remove_node(a)
refused(lambda: exe.set_arg(a, 1, 3.0), pcg.ClosedError, "was removed from its graph")
exe.set_arg(b, 1, 3.0)  # the other body's node is still updated
assert stub.last() == "cuGraphExecKernelNodeSetParams" and stub.ints(2)[1] == int(b)
''', native)


@both
def test_set_arg_on_a_node_of_a_body_destroyed_with_its_owner(native):
    run(SETUP + '''
g.remove_node(cond)
refused(lambda: exe.set_arg(a, 1, 3.0), pcg.ClosedError, "belongs to Graph")
refused(lambda: exe.set_arg(b, 1, 3.0), pcg.ClosedError, "belongs to Graph")
''', native)


@both
def test_set_arg_finds_the_packs_in_the_table_copies_taken_at_instantiation(native):
    """An exec copies the node tables (root and bodies) instead of walking the nodes;
    set_arg finds each kernel node's ArgPack there on first use, in the node's record."""
    run(SETUP + '''
root = g.add_kernel(k, 1, 32, (buffer(), 1.0, 4))
exe2 = exec_of(g, [])
assert len(exe2._taken) == 3  # the root graph's table and both bodies'
for node in (root, a, b):
    exe2.set_arg(node, 1, 5.0)
    assert stub.last() == "cuGraphExecKernelNodeSetParams" and stub.ints(2)[1] == int(node)
    assert exe2.exec_node(node).source == node.graph.table.kept(node)  # found in the copies
''', native)
