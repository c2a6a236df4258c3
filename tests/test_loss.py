"""The label-smoothed loss of the CPU path: the numbers and gradients of torch's CrossEntropyLoss."""

import pytest
import torch
from torch import nn

import mt.train.loss
from mt.train.loss import SmoothedCrossEntropy
from mt.data.tokenizer import PAD


def logits_and_targets(rows=37, vocab=50, seed=0):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, vocab, generator=generator) * 4
    target = torch.randint(4, vocab, (rows,), generator=generator)
    target[::5] = PAD  # padding positions count for nothing
    return logits, target


def loss_and_gradient(criterion, logits, target, scale=1.0):
    """As in training, the logits come out of a product (the generator's), not from a leaf."""
    leaf = logits.detach().requires_grad_()
    loss = criterion(leaf * 1, target)
    (loss * scale).backward()
    return loss.detach(), leaf.grad


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("block_bytes", [4 * 50 * 4, 2 ** 21])  # blocks of 4 rows, and one block
def test_equals_torchs_cross_entropy_in_fp32(monkeypatch, smoothing, block_bytes):
    monkeypatch.setattr(mt.train.loss, "BLOCK_BYTES", block_bytes)
    logits, target = logits_and_targets()
    torchs = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=smoothing, reduction="sum")
    expected_loss, expected_grad = loss_and_gradient(torchs, logits, target, scale=0.37)
    loss, grad = loss_and_gradient(SmoothedCrossEntropy(PAD, smoothing), logits, target, scale=0.37)
    torch.testing.assert_close(loss, expected_loss, rtol=1e-6, atol=1e-4)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-5, atol=1e-6)
    assert (grad[target == PAD] == 0).all()


def test_bf16_logits_are_scored_in_fp32_and_get_a_bf16_gradient():
    logits, target = logits_and_targets(rows=64, vocab=300)
    logits = logits.bfloat16()
    torchs = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1, reduction="sum")
    expected_loss, expected_grad = loss_and_gradient(torchs, logits.float(), target)
    loss, grad = loss_and_gradient(SmoothedCrossEntropy(PAD, 0.1), logits, target)
    assert loss.dtype == torch.float32 and grad.dtype == torch.bfloat16
    torch.testing.assert_close(loss, expected_loss, rtol=1e-6, atol=1e-3)  # the same fp32 sum, not a bf16 one
    torch.testing.assert_close(grad.float(), expected_grad, rtol=0.01, atol=1e-3)


def test_a_batch_of_padding_has_zero_loss_and_gradient():
    logits = torch.randn(6, 20)
    target = torch.full((6,), PAD)
    loss, grad = loss_and_gradient(SmoothedCrossEntropy(PAD, 0.1), logits, target)
    assert loss.item() == 0 and (grad == 0).all()


def test_a_second_backward_pass_is_refused_not_wrong():
    """The backward pass writes the gradient over the logits, so autograd must refuse to read them again."""
    logits, target = logits_and_targets()
    loss = SmoothedCrossEntropy(PAD, 0.1)(logits.requires_grad_() * 1, target)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
