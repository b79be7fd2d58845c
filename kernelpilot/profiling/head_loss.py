"""The language model's head and its loss as one chain: the last linear layer, the upcast and the cross-entropy.

Unfused, the head writes the logits (tokens x vocabulary: 16k x 128k is 4 GiB in bf16, twice that once
upcast), the loss reads them back, and the backward writes their gradient; torch.compile does the same,
since the matmul is a library call it does not fuse across. A kernel that computes the loss and the
gradients of the hidden states and the head's weight chunk by chunk never holds them. This module finds
that chain in a traced step, wherever the loss is computed:

- in the model's forward (transformers' ``labels=``): every call runs inside the root's forward;
- in the script, right after the model call (``F.cross_entropy(model(x).view(-1, V), y.view(-1))``):
  the head runs in the forward, the loss after it returned (``where == "script"``).

It starts from each ``nll_loss_forward`` whose log-probabilities are a ``_log_softmax`` of a matmul with a
parameter of the model as its weight, through views and casts only. The chain's one result is the
loss; the logits are an intermediate nothing may read outside the chain (``logits_readers`` says who
does, which rules out a swap: the kernel never makes them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelpilot.errors import KernelpilotError
from kernelpilot.profiling.fusion import Chain, measure
from kernelpilot.profiling.records import VIEW_OPS, OpRecord, TensorArg
from kernelpilot.profiling.trace import Trace

LOSS_OPS = {"aten::nll_loss_forward", "aten::nll_loss2d_forward"}
HEAD_OPS = {"aten::mm", "aten::addmm", "aten::matmul", "aten::linear"}
PASS_OPS = VIEW_OPS | {"aten::_to_copy", "aten::clone"}  # between the head and the log-softmax: no arithmetic
ROLE = "head+loss"
IGNORE_SHARE = 0.1  # of drawn labels set to the ignore index, when the recorded labels held it


@dataclass
class HeadLoss:
    """What the extraction and the swap need beyond the chain itself."""

    chain: Chain
    hidden: int  # value id of the hidden states the head reads (before its flattening view)
    labels: int  # value id of the labels the loss reads
    logits: int  # value id of the head's result (the logits, as the model made them)
    ignore_index: int
    classes: int  # the vocabulary: the head's output features
    logits_readers: list[str] = field(default_factory=list)  # calls outside the chain that read the logits

    @property
    def where(self) -> str:
        return self.chain.where


def find_head_losses(trace: Trace, step: int) -> list[HeadLoss]:
    """Every head-plus-loss chain of ``step``, in the order they ran."""
    ops = [o for o in trace.ops if o.step == step and o.phase in ("forward", "other")]
    producers = trace.producers()
    consumers = trace.consumers()
    found = []
    for op in ops:
        if op.name not in LOSS_OPS:
            continue
        head = _head_of(trace, op, producers)
        if head is not None:
            found.append(_chain(trace, op, head, consumers))
    return found


def _producer(trace: Trace, vid: int, producers: dict[int, int]) -> OpRecord | None:
    index = producers.get(vid)
    return trace.ops[index] if index is not None else None


def _head_of(trace: Trace, loss: OpRecord, producers: dict[int, int]) -> list[OpRecord] | None:
    """The calls from the head's matmul to ``loss``, or None when the log-probabilities do not come from one."""
    ins = loss.tensor_inputs()
    softmax = _producer(trace, ins[0].vid, producers) if ins else None
    if softmax is None or softmax.name != "aten::_log_softmax" or softmax.phase not in ("forward", "other"):
        return None
    path = [loss, softmax]
    current = _producer(trace, softmax.tensor_inputs()[0].vid, producers)
    while current is not None and current.name in PASS_OPS:
        path.append(current)
        current = _producer(trace, current.tensor_inputs()[0].vid, producers)
    if current is None or current.name not in HEAD_OPS or current.phase != "forward":
        return None
    path.append(current)
    weight = False
    # the weight (and bias) and the hidden states, each through the views the head's module made of them (so the
    # chain's hidden states are what the head module was called with: transformers slices them before)
    for ref in current.tensor_inputs():
        vid, views = ref.vid, []
        while ((made := _producer(trace, vid, producers)) is not None and made.name in VIEW_OPS
               and made.stack == current.stack):
            views.append(made)
            vid = made.tensor_inputs()[0].vid
        if vid in trace.params:
            weight = weight or len(trace.param_specs[trace.params[vid]].spec.shape) == 2
        path += views
    return sorted(path, key=lambda o: o.index) if weight else None


def _chain(trace: Trace, loss: OpRecord, ops: list[OpRecord], consumers: dict[int, list[int]]) -> HeadLoss:
    chain = measure(trace, ops, consumers)
    chain.role = ROLE
    chain.where = "script" if any(o.phase == "other" for o in ops) else "forward"
    value = loss.outputs[0]
    assert value is not None
    chain.outputs = [value]
    # one kernel reads the hidden states, the weight and the labels once and writes the loss: the logits and
    # what autograd saves of them are what it leaves out, not what it must still write
    chain.escapes = []
    read: dict[int, int] = {}
    for o in ops:
        for r in o.tensor_inputs():
            if r.vid in chain.inputs:
                read.setdefault(r.vid, r.nbytes)
    chain.fused_bytes = sum(read.values()) + loss.out_bytes // max(1, sum(v is not None for v in loss.outputs))
    members = {o.index for o in ops}
    head = next(o for o in ops if o.name in HEAD_OPS)
    logits = next(v for v in head.outputs if v is not None)
    hidden = next(v for v in chain.inputs if v not in trace.params)
    labels = loss.tensor_inputs()[1].vid
    softmax = next(o for o in ops if o.name == "aten::_log_softmax")
    classes = softmax.tensor_inputs()[0].spec.shape[softmax.args[1]]  # the logits' size along the softmax's dim
    readers = []
    for vid in chain.made():
        if vid == value:
            continue
        for i in consumers.get(vid, []):
            other = trace.ops[i]
            if i not in members and other.phase in ("forward", "other") and other.step == loss.step:
                where = other.stack[-1] if other.stack else ""
                readers.append(f"{other.name} ({'model.' + where if where else 'the script'})")
    ignore = loss.args[4] if len(loss.args) > 4 and isinstance(loss.args[4], int) else -100
    return HeadLoss(chain, hidden, labels, logits, ignore, int(classes), list(dict.fromkeys(readers)))


def labels_maker(spec: TensorArg, *, classes: int, ignore_index: int) -> str:
    """Labels drawn in the vocabulary, a share of them the ignore index when the recorded ones held it (a
    draw in the recorded range would give negative classes nll_loss refuses)."""
    shape = ", ".join(str(d) for d in spec.shape) + ("," if len(spec.shape) == 1 else "")
    labels = f"torch.randint(0, {classes}, ({shape}), dtype={spec.dtype})"
    if spec.low is not None and spec.low == ignore_index:
        return f"torch.where(torch.rand(({shape})) < {IGNORE_SHARE}, {ignore_index}, {labels})"
    return labels


HEAD_NOTE = ("\nIts one result is the loss: the logits are neither returned nor kept (a kernel may compute the loss "
             "and, in\nModelNew.backward, the gradients of the hidden states and the weight chunk by chunk, never "
             "holding them).")
REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def head_origin(head: HeadLoss) -> dict[str, Any]:
    """The origin.json fields of a head-plus-loss chain."""
    loss = head.chain.ops[-1]
    reduction = loss.args[3] if len(loss.args) > 3 and isinstance(loss.args[3], int) else 1
    return {"role": ROLE, "where": head.where, "classes": head.classes, "ignore_index": head.ignore_index,
            "reduction": REDUCTIONS.get(reduction, str(reduction)), "logits_readers": head.logits_readers}


def script_loss_origin(trace: Trace, head: HeadLoss) -> dict[str, Any]:
    """Where a loss computed in the script is swapped: the head module's forward returns deferred logits, and
    the script's cross-entropy of them runs the kernel (dropin_swap.DeferredLogits)."""
    op = next(o for o in head.chain.ops if o.name in HEAD_OPS)
    path = op.stack[-1] if op.stack else ""
    call = next((c for c in trace.calls if c.path == path and c.first_op <= op.index < c.last_op), None)
    if call is None or [r.vid for _, r in call.inputs] != [head.hidden]:
        raise KernelpilotError(f"the head (model.{path}) is not called with the hidden states alone; the loss "
                               "computed in the script cannot be swapped in.")
    labels = next(r.spec for r in head.chain.ops[-1].tensor_inputs() if r.vid == head.labels)
    softmax = next(o for o in head.chain.ops if o.name == "aten::_log_softmax")
    return {"script_loss": True, "path": path, "class": call.cls, "arguments": [k for k, _ in call.inputs],
            "literals": call.literals, "shapes": [[list(r.spec.shape) for _, r in call.inputs]],
            "dtypes": [r.spec.dtype for _, r in call.inputs], "labels_shape": list(labels.shape),
            "labels_dtype": labels.dtype, "logits_dtype": softmax.tensor_inputs()[0].spec.dtype}
