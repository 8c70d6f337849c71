"""Stand-ins for the profiler's CPU tests: cupti-python's ``cupti`` module (the calls
profile_cupti makes), and a graph the stamps method can instrument whose exec writes the
stamp slots a launch would."""

import types

import pycudagraph as pcg


class FakeCupti:
    """Stands for cupti-python's ``cupti`` module: the calls profile_cupti makes."""

    class ActivityKind:
        CONCURRENT_KERNEL, MEMCPY, MEMSET = 10, 1, 2

    class CallbackDomain:
        RESOURCE = 3

    class CallbackIdResource:
        GRAPHNODE_CLONED = 15

    class ResourceData:
        def __init__(self, descriptor):
            self.resource_descriptor = descriptor

    class GraphData:
        table: dict = {}

        @staticmethod
        def from_ptr(ptr):
            return FakeCupti.GraphData.table[ptr]

    def __init__(self, node_ids):
        self.node_ids = node_ids
        self.calls = []
        self.enabled = set()
        self.pending = []

    def get_timestamp(self):
        return 1

    def activity_register_callbacks(self, requested, completed):
        self.calls.append("register")
        assert requested() == (8 << 20, 0)
        self.completed = completed

    def get_graph_node_id(self, handle):
        return self.node_ids[handle]

    def subscribe(self, callback, userdata):
        self.callback = callback
        self.calls.append("subscribe")
        return 77

    def enable_callback(self, on, sub, domain, cbid):
        assert (on, sub, domain, cbid) == (1, 77, 3, 15)

    def unsubscribe(self, sub):
        self.calls.append("unsubscribe")
        self.callback = None

    def activity_enable(self, kind):
        self.enabled.add(kind)

    def activity_disable(self, kind):
        self.enabled.discard(kind)

    def activity_flush_all(self, flag):
        """Hands over the pending records: (node id, correlation, start, end) and, for a
        record that says what it did, (kind, kernel name or bytes)."""
        self.calls.append("flush")
        self.completed([_record(*rec) for rec in self.pending] +
                       [types.SimpleNamespace(graph_node_id=0, correlation_id=1, start=0, end=1)])
        self.pending = []


class FakeExec:
    """An exec whose launches, while ``fake`` (a :class:`FakeCupti`) records, hand it the
    records ``make(n)`` of launch n (counted from 1, the warm-up included)."""

    def __init__(self, fake, make):
        self.fake, self.make, self.launches = fake, make, 0

    def launch(self, stream):
        self.launches += 1
        if self.fake.enabled:
            self.fake.pending += self.make(self.launches)

    def synchronize(self):
        pass

    def close(self):
        self.fake.calls.append("close")


def _record(node_id, corr, start, end, kind=None, what=None):
    rec = types.SimpleNamespace(graph_node_id=node_id, correlation_id=corr, start=start, end=end)
    if kind is not None:
        rec.kind = kind
        if kind == FakeCupti.ActivityKind.CONCURRENT_KERNEL:
            rec.name = what
        else:
            rec.bytes = what
    return rec


class Handle:
    """A node as profile_cupti reads it: a handle CUPTI can be asked about, a type, and
    what its records would show (a kernel's name, a memset's bytes), edges."""

    def __init__(self, h, type_="kernel", name=None, nbytes=None, deps=()):
        self.handle, self.type, self.kernel_name, self.mangled_name = h, type_, name, name
        self.deps = list(deps)
        if nbytes is not None:
            self.params = types.SimpleNamespace(count=nbytes, height=1, element_size=1,
                                                nbytes=nbytes, depth=1)

    @property
    def dependencies(self):
        return list(self.deps)

    def describe(self):
        return f"{self.type} {self.kernel_name or ''}".strip()

    # the facets the profile asks (nodes/base.py Node): answered as the real classes would
    repeats_bodies = property(lambda self: self.type == "conditional")
    idle = property(lambda self: self.type == "empty")

    def label(self):
        return self.kernel_name if self.type == "kernel" else self.describe()

    def shape(self):
        return str(self.type)

    def work(self):
        p = getattr(self, "params", None)
        if self.type == "kernel":
            return "kernel", {n for n in (self.mangled_name, self.kernel_name) if n}
        if self.type == "memcpy":
            return "memcpy", None if p is None else p.nbytes * p.height * p.depth
        if self.type == "memset":
            return "memset", None if p is None else p.count * p.height * p.element_size
        return None


class SNode:
    """A node of a stand-in graph: type, label, its graph, what it waits for."""

    def __init__(self, graph, type_, label, deps=()):
        self.graph, self.type, self.kernel_name = graph, type_, label
        self.deps = list(deps)

    @property
    def dependencies(self):
        return list(self.deps)

    def describe(self):
        return self.kernel_name

    # the facets the profile asks (nodes/base.py Node): answered as the real classes would
    repeats_bodies = property(lambda self: self.type == "conditional")
    idle = property(lambda self: self.type == "empty")

    def label(self):
        return self.kernel_name

    def shape(self):
        return str(self.type)

    def work(self):
        return ("kernel", {self.kernel_name}) if self.type == "kernel" else None


REFUSED = ("cudaGraphInstantiateWithParams", 801, "cudaErrorNotSupported",
           "operation not supported")


class SGraph:
    """Records the stamps added to it; its exec writes the stamp slots a launch would.

    ``refuse``: None, ``"always"`` (CUDA refuses every second exec, as for a graph with
    conditional nodes while the profiled exec lives) or ``"bodies"`` (it refuses the graph
    while stamps sit in one of ``bodies``, the stand-in graphs of its conditional nodes)."""

    def __init__(self, times, runs=None, clonable=True, refuse=None):
        self.nodes, self.times, self.runs, self.clonable = [], times, runs or {}, clonable
        self.added, self.removed, self.slot_of, self.closed = [], [], {}, False
        self.refuse, self.bodies, self.ends, self.instantiated = refuse, [], {}, 0

    def add(self, type_, label, deps=()):
        node = SNode(self, type_, label, deps)
        self.nodes.append(node)
        return node

    def clone(self):
        if not self.clonable:
            raise pcg.CudaError("cudaGraphClone", 1, "cudaErrorInvalidValue", "invalid argument")
        twin = SGraph(self.times, self.runs)
        copies = {}
        for n in self.nodes:
            copies[n] = twin.add(n.type, n.kernel_name, [copies[d] for d in n.deps])
        twin.find = copies.__getitem__
        return twin

    def add_kernel(self, kernel, grid, block, args, deps=()):
        node = SNode(self, "kernel", kernel, deps)
        self.added.append(node)
        if kernel == "end":  # slot i times what the end stamp waits for
            self.slot_of[args[1]] = deps[0]
            self.ends[node] = args[1]
        return node

    def add_dependency(self, a, b):
        b.deps.append(a)

    def remove_node(self, node):
        self.removed.append(node)
        self.slot_of.pop(self.ends.pop(node, None), None)

    def instantiate(self):
        self.instantiated += 1
        stamped_body = any(len(b.added) > len(b.removed) for b in self.bodies)
        if self.refuse == "always" or (self.refuse == "bodies" and stamped_body):
            raise pcg.CudaError(*REFUSED)
        return SExec(self)

    def close(self):
        self.closed = True


class SExec:
    slots = None

    def __init__(self, graph):
        self.graph = graph

    def launch(self, stream):
        mem = SExec.slots.mem.reshape(-1, 3)
        for g in [self.graph] + self.graph.bodies:
            for i, node in g.slot_of.items():
                label = "calibration" if node.kernel_name == "begin" else node.kernel_name
                runs = g.runs.get(label, 1)
                mem[i, 1] += int(1000 * g.times[label] * runs)
                mem[i, 2] += runs

    def synchronize(self):
        pass

    def close(self):
        pass


class SBuffer:
    def __init__(self, nbytes):
        import numpy as np
        self.mem = np.zeros(nbytes // 8, np.uint64)
        SExec.slots = self

    def copy_from(self, arr):
        self.mem[:] = arr

    def copy_to(self, arr):
        arr[:] = self.mem
