"""A runnable tour of specgrad's engine, layer by layer (run: python docs/abstractions.py; the tests run it too)."""

import numpy as np

from specgrad import Tensor, Variable
from specgrad.device import Device, render_ast
from specgrad.ops import BinaryOps, BufferOps, LoadOps
from specgrad.realize import run_schedule
from specgrad.schedule import create_schedule
from specgrad.shape.shapetracker import ShapeTracker

# 1. A Tensor is a handle on a LazyBuffer: nothing runs until you ask for data.
a, b = Tensor([2.0]), Tensor([3.0])
res = a + b
lb = res.lazydata
assert lb.op is BinaryOps.ADD and lb.realized is None, "a lazy add, not computed yet"
assert a.lazydata.realized is not None, "tensors made from data are realized buffers"

# 2. Movement ops are views: they share the base and cost nothing.
x = Tensor(np.arange(12, dtype=np.float32)).reshape(3, 4)
xt = x.permute(1, 0)
assert xt.lazydata.base is x.lazydata.base and xt.shape == (4, 3)

# 3. The scheduler fuses the graph into kernels (ScheduleItems). Each ast ends in a STORE of LOADs and CONSTs.
out = (xt * 2 + 1).relu().sum(axis=1)
schedule = create_schedule([out.lazydata])
assert len(schedule) == 1, "elementwise ops fuse into the reduce that consumes them"
kernel = schedule[0]
assert kernel.ast.op is BufferOps.STORE
print(render_ast(kernel.ast))

# 4. Running the schedule realizes the buffers on the default device (CLANG compiles the kernel to C; CPU would
#    interpret it with numpy). DEBUG=4 shows the generated source.
run_schedule(schedule)
np.testing.assert_allclose(out.numpy(), np.maximum(np.arange(12).reshape(3, 4).T * 2 + 1, 0).sum(1))
assert out.device == Device.DEFAULT

# 5. Autograd: backward() walks the mlops Functions and accumulates .grad.
w = Tensor([[1.0, -2.0], [3.0, 4.0]], requires_grad=True)
(w * w).sum().backward()
np.testing.assert_allclose(w.grad.numpy(), 2 * w.numpy())

# 6. ShapeTracker: a permute then two reshapes is still one buffer, read through two views.
st = ShapeTracker.from_shape((10, 10)).permute((1, 0)).reshape((5, 2, 5, 2)).reshape((100,))
idx, valid = st.expr_idxs()
print(len(st.views), "views; index", idx.render())
assert idx.render() == "(((idx0%10)*10)+(idx0//10))"

# 7. Symbolic integers simplify index math.
i, j = Variable("a", 0, 10), Variable("b", 0, 10)
assert ((i + j * 10) % 10).render() == "(a%10)"
assert ((i * 40 + j) // 20).render() == "(a*2)"

# 8. Realized tensors schedule nothing; loads of other devices' data are LoadOps.FROM.
assert create_schedule([x.lazydata]) == [] and LoadOps.FROM.name == "FROM"
print("tour complete")
