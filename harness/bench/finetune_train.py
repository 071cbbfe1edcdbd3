"""Fine-tune a pretrained BERT for sentence classification on the [CLS] token, on a target's parts.

The model is ``BertForSequenceClassification`` from all-MiniLM-L6-v2 (``harness.bench.models.finetune_data.
model_path``: 6 layers, hidden 384, 12 heads, pretrained pooler), ``num_labels=2``: the new
classifier reads the pooler's tanh(W h_[CLS] + b) (Devlin et al. 2018: one task-specific
output layer, everything fine-tuned). Swap-ins (Narang et al. 2021, "Do Transformer
Modifications Transfer Across Implementations and Applications?"):

  sdpa       the target's ``scaled_dot_product_attention`` registered through transformers'
             ``AttentionInterface`` (``harness.adapters.hf_attention_interface``); BERT then
             passes a boolean (B, 1, L, L) padding mask (True = may attend; None when no row
             of the batch is padded) and the attention-dropout probability as ``dropout_p``;
  layernorm  every ``nn.LayerNorm`` (embeddings + 2 per layer = 13) replaced by the target's
             ``LayerNorm(hidden, eps=config.layer_norm_eps)`` with the pretrained weight and
             bias copied in.

Everything random is drawn from the seed: the classifier init (normal(0, 0.02), zero bias, from
a generator seeded with ``seed``, identical for every swap), the data order, dropout. So a
swap and the stock model with the same seed form a pair (only dropout masks and rounding
differ between implementations). Stock attention is transformers' "sdpa" (torch's kernel).
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass

import torch

from harness.boundary import module_tensors
from harness.bench.memory import peak_memory
from harness.bench.points import check_finite
from harness.bench.timer import synchronize
from harness.bench.models import finetune_data as fd


@dataclass(frozen=True)
class Hyper:
    """Fixed fine-tuning hyperparameters (AdamW, linear warmup then linear decay)."""
    lr: float = 1e-4
    batch_size: int = 32
    epochs: int = 1
    max_length: int = 64
    weight_decay: float = 0.01
    warmup_frac: float = 0.1
    grad_clip: float = 1.0
    eval_batch_size: int = 128

    def as_params(self) -> dict:
        return asdict(self)


@dataclass
class Data:
    """Tokenized movie-disjoint train/evaluation sets (built once per process). ``test_*`` is the
    set accuracy is measured on: the held-out test movies, or (``prepare(validation_fraction=...)``)
    a split of the training movies, for choosing hyperparameters without looking at the test set."""
    train_ids: list
    train_labels: list
    test_ids: list
    test_labels: list
    pad_id: int
    n_train_movies: int
    n_test_movies: int


def prepare(train_examples: int | None, test_examples: int | None, max_length: int,
            test_fraction: float = 0.2, data_seed: int = 0,
            validation_fraction: float | None = None) -> Data:
    """Load, split by movie, subsample (fixed ``data_seed``: every training seed sees the same
    examples), tokenize. With ``validation_fraction`` the test movies are dropped altogether and
    the training movies are split again by movie (``fd.VALIDATION_SALT``): the returned "test"
    set is then that validation split, and training uses the rest."""
    df = fd.load_reviews()
    train, test = fd.train_eval_split(df, test_fraction, validation_fraction)
    train = fd.subsample(train, train_examples, data_seed)
    test = fd.subsample(test, test_examples, data_seed)
    tok = fd.load_tokenizer()
    return Data(fd.encode(tok, train["text"], max_length), train["label"].tolist(),
                fd.encode(tok, test["text"], max_length), test["label"].tolist(),
                int(tok.pad_token_id), train["movie"].nunique(), test["movie"].nunique())


def attention_name(sdpa) -> str:
    """Registered implementation name for ``sdpa`` (one per function object in this process)."""
    from harness.adapters.hf_attention_interface import register_target_attention
    name = f"harness_finetune_{id(sdpa):x}"
    return register_target_attention(sdpa, name=name)


def swap_layernorms(model: torch.nn.Module, layernorm_cls, eps: float) -> int:
    """Replace every ``nn.LayerNorm`` by ``layernorm_cls(shape, eps=eps)`` with its weights, written
    where the conformance suites write them (``module_tensors``: ``.weight``/``.bias``)."""
    targets = [(name, mod) for name, mod in model.named_modules() if isinstance(mod, torch.nn.LayerNorm)]
    for name, old in targets:
        new = layernorm_cls(old.normalized_shape, eps=eps, elementwise_affine=True)
        new = new.to(device=old.weight.device)
        try:
            for role in ("weight", "bias"):
                module_tensors.write(new, "LayerNorm", role, getattr(old, role).detach())
        except AssertionError as exc:
            raise TypeError(f"{layernorm_cls!r}: no place to copy the pretrained values into: {exc}") from None
        parent_name, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, attr, new)
    return len(targets)


def build_model(device: str, seed: int, sdpa=None, layernorm_cls=None):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import BertForSequenceClassification
    from transformers.utils import logging as hf_logging
    attn = attention_name(sdpa) if sdpa is not None else "sdpa"
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()  # the "classifier.* newly initialized" report is expected
    hf_logging.disable_progress_bar()
    try:
        model = BertForSequenceClassification.from_pretrained(
            str(fd.model_path()), num_labels=2, attn_implementation=attn,
            dtype=torch.float32)  # fp32 master weights, also from a half-precision checkpoint
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        model.classifier.weight.copy_(torch.randn(model.classifier.weight.shape, generator=gen) * 0.02)
        model.classifier.bias.zero_()
    swapped = 0
    if layernorm_cls is not None:
        swapped = swap_layernorms(model, layernorm_cls, model.config.layer_norm_eps)
    return model.to(device), attn, swapped


def _schedule(step: int, total: int, warmup: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def evaluate(model, data: Data, hyper: Hyper, device: str) -> tuple[float, float]:
    """(accuracy, mean loss) on the test set, in batches of similar length (shortest first: padding
    is per batch, so this does the least padded work; the order does not change any prediction)."""
    model.eval()
    correct, loss_sum = 0, 0.0
    order = sorted(range(len(data.test_ids)), key=lambda i: len(data.test_ids[i]))
    ids, labels = [data.test_ids[i] for i in order], [data.test_labels[i] for i in order]
    with torch.no_grad():
        for x, m, y in fd.batches(ids, labels, hyper.eval_batch_size, data.pad_id):
            x, m, y = x.to(device), m.to(device), y.to(device)
            logits = model(input_ids=x, attention_mask=m).logits
            check_finite(logits, "eval logits")
            loss_sum += torch.nn.functional.cross_entropy(logits.float(), y, reduction="sum").item()
            correct += (logits.argmax(-1) == y).sum().item()
    n = len(data.test_labels)
    return correct / n, loss_sum / n


def train_eval(data: Data, hyper: Hyper, seed: int, device: str, *, sdpa=None, layernorm_cls=None,
               max_steps: int | None = None) -> dict:
    """Fine-tune from the pretrained weights with ``seed``; accuracy on the held-out movies."""
    torch.manual_seed(seed)
    model, attn, swapped = build_model(device, seed, sdpa, layernorm_cls)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": hyper.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=hyper.lr)
    steps_per_epoch = math.ceil(len(data.train_ids) / hyper.batch_size)
    total = steps_per_epoch * hyper.epochs if max_steps is None else min(max_steps, steps_per_epoch * hyper.epochs)
    warmup = max(1, int(hyper.warmup_frac * total))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _schedule(s, total, warmup))
    gen = torch.Generator().manual_seed(seed)
    model.train()
    step, losses = 0, []
    synchronize(device)
    t0 = time.perf_counter()
    for _ in range(hyper.epochs):
        for x, m, y in fd.batches(data.train_ids, data.train_labels, hyper.batch_size, data.pad_id, gen):
            if step >= total:
                break
            out = model(input_ids=x.to(device), attention_mask=m.to(device), labels=y.to(device))
            check_finite(out.loss, f"training loss at step {step}")
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), hyper.grad_clip)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            losses.append(out.loss.item())
            step += 1
    synchronize(device)
    train_s = time.perf_counter() - t0
    acc, test_loss = evaluate(model, data, hyper, device)
    synchronize(device)
    eval_s = time.perf_counter() - t0 - train_s
    tail = losses[-max(1, len(losses) // 5):]
    return {"accuracy": acc, "train_time_s": train_s, "eval_time_s": eval_s, "steps": step,
            "train_loss_last": sum(tail) / len(tail), "test_loss": test_loss,
            "attn_implementation": attn, "layernorms_swapped": swapped}


def measured_train_eval(data: Data, hyper: Hyper, seed: int, device: str, **kw) -> dict:
    """``train_eval`` with the peak memory of the whole run (model load, training, evaluation)."""
    res, peak, method = peak_memory(lambda: train_eval(data, hyper, seed, device, **kw), device)
    res.update(peak_mem_bytes=peak, peak_mem_method=method)
    return res


def train_seed(threads: int | None, data: Data, hyper: Hyper, seed: int, device: str, **kw) -> dict:
    """``measured_train_eval`` on ``threads`` CPU threads (None: as they are). A swap of the
    target's components runs it in the target's worker (``Context.on_target``): its autograd
    and allocations are there."""
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        return measured_train_eval(data, hyper, seed, device, **kw)
    finally:
        torch.set_num_threads(before)


def eval_logits(device: str, x: torch.Tensor, mask: torch.Tensor, **swap) -> torch.Tensor:
    """Float logits of the freshly built (seed 0) model, with ``swap``, in eval mode."""
    model = build_model(device, 0, **swap)[0].eval()
    with torch.no_grad():
        return model(input_ids=x, attention_mask=mask).logits.float()
