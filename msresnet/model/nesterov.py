"""Nesterov momentum that also works on the CPU.

``nn.Momentum(use_nesterov=True)`` hands the flag to the ``ApplyMomentum``
operator, and MindSpore 2.10's CPU kernel ignores it: three steps of a small
network with and without the flag leave bit-identical weights (measured here;
chapter 10 shows it, ``tests/test_nesterov.py`` keeps checking it). A config that
asks for Nesterov would silently train with plain momentum. :class:`NesterovMomentum`
is the same optimizer (same parameters, moments, weight-decay groups, learning-rate
schedule and checkpoint layout) with the update written in MindSpore operators,
as ``nn.Momentum``'s docstring defines it::

    v = momentum * v + grad
    p = p - lr * (grad + momentum * v)

:func:`msresnet.training.factories.make_model` uses it for ``nesterov: true`` on the CPU,
and MindSpore's own operator on GPU and Ascend (not checked here: no such device).
"""

from __future__ import annotations

from mindspore import nn
from mindspore.ops import composite as C
from mindspore.ops import functional as F

_nesterov_update = C.MultitypeFuncGraph("nesterov_update")


@_nesterov_update.register("Tensor", "Tensor", "Tensor", "Tensor", "Tensor")
def _update(momentum, lr, grad, param, moment):
    moment_new = momentum * moment + grad
    done = F.assign(moment, moment_new)
    param_new = param - lr * (grad + momentum * moment_new)
    return F.depend(done, F.assign(param, param_new))


class NesterovMomentum(nn.Momentum):
    """``nn.Momentum`` with the Nesterov update done by hand (see the module docstring).

    Takes ``nn.Momentum``'s arguments except ``use_nesterov``. One learning rate
    for all groups (what :func:`msresnet.model.resnet.param_groups` builds); per-group
    learning rates are refused rather than mishandled.
    """

    def __init__(self, params, learning_rate, momentum, weight_decay=0.0,
                 loss_scale=1.0) -> None:
        super().__init__(params, learning_rate, momentum, weight_decay=weight_decay,
                         loss_scale=loss_scale, use_nesterov=True)
        if self.is_group_lr:
            raise ValueError("NesterovMomentum: per-group learning rates are not supported")

    def construct(self, gradients):
        gradients = self.decay_weight(gradients)
        gradients = self.gradients_centralization(gradients)
        gradients = self.scale_grad(gradients)
        lr = self.get_lr()
        self.assignadd(self.global_step, self.global_step_increase_tensor)
        return self.hyper_map(F.partial(_nesterov_update, self.momentum, lr), gradients,
                              self.params, self.moments)
