"""The engine's listeners (tinytorch.core.hooks): each operation's forward and backward is told to
every active listener, with its real arrays, and to nobody once the `with` block ends."""

import threading

import numpy as np

from tinytorch.core.hooks import Listener, listen, listeners
from tinytorch.core.tensor import Mul, Sum, Tensor


class Record(Listener):
    def __init__(self):
        self.forwards, self.backwards = [], []

    def forward(self, fn, inputs, kwargs, output, seconds):
        self.forwards.append((type(fn), [a.copy() for a in inputs], dict(kwargs), output.copy()))
        assert seconds >= 0

    def backward(self, fn, grad, grads, seconds):
        self.backwards.append((type(fn), grad.copy(), grads))


def test_every_forward_is_heard_with_its_arrays_and_keywords():
    a, b = Tensor([1.0, 2.0, 3.0], requires_grad=True), Tensor([4.0, 5.0, 6.0])
    with listen(Record()) as record:
        total = (a * b).sum(axis=0)
    assert [f[0] for f in record.forwards] == [Mul, Sum]
    kind, inputs, kwargs, output = record.forwards[0]
    np.testing.assert_array_equal(inputs[0], [1, 2, 3])
    np.testing.assert_array_equal(output, [4, 10, 18])
    assert record.forwards[1][2] == {"axis": 0, "keepdims": False}
    assert float(total.data) == 32.0


def test_backward_of_a_listened_operation_is_heard_and_unchanged():
    a, b = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0, -1.0], requires_grad=True)
    with listen(Record()) as record:
        out = a * b
        grads = out._ctx.backward(np.array([1.0, 2.0], dtype=np.float32))
    np.testing.assert_array_equal(grads[0], [3.0, -2.0])
    ((kind, grad, heard),) = record.backwards
    assert kind is Mul and heard is grads
    np.testing.assert_array_equal(grad, [1.0, 2.0])


def test_nothing_is_heard_outside_the_block_and_the_class_is_untouched():
    backward = Mul.backward
    with listen(Record()) as record:
        pass
    Tensor([1.0]) * Tensor([2.0])
    assert record.forwards == [] and listeners() == () and Mul.backward is backward


def test_two_listeners_both_hear_and_leave_in_any_order():
    first, second = Record(), Record()
    with listen(first):
        with listen(second):
            Tensor([1.0]) + Tensor([2.0])
        Tensor([1.0]) + Tensor([2.0])
    assert len(first.forwards) == 2 and len(second.forwards) == 1


def test_operations_on_other_threads_are_heard():
    with listen(Record()) as record:
        worker = threading.Thread(target=lambda: Tensor([1.0]).exp())
        worker.start()
        worker.join()
    assert len(record.forwards) == 1
