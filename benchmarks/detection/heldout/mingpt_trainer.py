"""A tiny GPT learns to add 1-digit numbers, trained by minGPT's generic Trainer and scored with ``model.generate``.

Modeled on: karpathy/minGPT, mingpt/model.py, mingpt/trainer.py, mingpt/utils.py and projects/adder/adder.py
(https://github.com/karpathy/minGPT).
Kept: the device logic: ``Trainer.__init__`` choosing ``self.device = 'cuda' if torch.cuda.is_available() else
'cpu'`` when ``config.device == 'auto'`` and moving the model with ``self.model.to(self.device)``; ``run`` building
AdamW from ``configure_optimizers`` (decay/no-decay parameter groups), a ``DataLoader`` with ``RandomSampler(...,
replacement=True, num_samples=int(1e10))`` and ``pin_memory=True``, ``model.train()``, re-creating the iterator on
``StopIteration``, ``batch = [t.to(self.device) for t in batch]``, ``model.zero_grad(set_to_none=True)``, gradient
clipping, the ``on_batch_end`` callbacks and ``max_iters``; the model's causal mask as a registered buffer named
``bias``, positions made with ``torch.arange(..., device=idx.device)``, ``cross_entropy(..., ignore_index=-1)``,
``generate`` decorated with ``@torch.no_grad()`` (cropping to ``block_size``, greedy ``torch.topk`` or
``torch.multinomial``); ``set_seed`` seeding ``random``, ``numpy``, ``torch`` and ``torch.cuda``; the adder's
``AdditionDataset`` building each example on the host with ``torch.tensor`` (targets masked with -1), and its
callback printing ``trainer.loss.item()``, then every N iterations ``model.eval()``, ``torch.no_grad()``,
``eval_split`` (``factors = torch.tensor(...).to(trainer.device)``, ``x.to(trainer.device)``, ``model.generate``,
``(d3i_pred == d3i_gt).cpu()``), ``torch.save(model.state_dict(), ...)`` on a new top score, and ``model.train()``.
Shrunk: ndigit=1 (100 problems, 20 for test), the 'gpt-nano' configuration, batch size 32, learning rate 1e-3, 80
iterations, evaluation every 40 iterations and logging every 20, ``num_workers=0`` instead of 4, the work folder a
temporary directory, the iteration time left out of the printed line, command-line overrides and the printout of the
configuration (it names the temporary folder) dropped.
"""

import json
import math
import os
import random
import sys
import tempfile
import time
from collections import defaultdict

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F
from torch.utils.data import Dataset
from torch.utils.data.dataloader import DataLoader

# ----------------------------------------------------------------------------- mingpt/utils.py


def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def setup_logging(config):
    """Create the work folder and write the arguments and the configuration into it."""
    work_dir = config.system.work_dir
    os.makedirs(work_dir, exist_ok=True)
    with open(os.path.join(work_dir, "args.txt"), "w") as f:
        f.write(" ".join(sys.argv))
    with open(os.path.join(work_dir, "config.json"), "w") as f:
        f.write(json.dumps(config.to_dict(), indent=4))


class CfgNode:
    """A small attribute-style configuration tree."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)

    def __str__(self):
        return self._str_helper(0)

    def _str_helper(self, indent):
        parts = []
        for k, v in self.__dict__.items():
            if isinstance(v, CfgNode):
                parts.append(f"{k}:\n")
                parts.append(v._str_helper(indent + 1))
            else:
                parts.append(f"{k}: {v}\n")
        parts = [" " * (indent * 4) + p for p in parts]
        return "".join(parts)

    def to_dict(self):
        return {k: v.to_dict() if isinstance(v, CfgNode) else v for k, v in self.__dict__.items()}

    def merge_from_dict(self, d):
        self.__dict__.update(d)


CN = CfgNode

# ----------------------------------------------------------------------------- mingpt/model.py


class NewGELU(nn.Module):
    """The tanh approximation of GELU used by BERT and GPT."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class CausalSelfAttention(nn.Module):
    """Multi-head masked self-attention followed by an output projection."""

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query, value projections for all heads, in one matrix
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)
        # lower-triangular mask: attend only to the left
        self.register_buffer(
            "bias",
            torch.tril(torch.ones(config.block_size, config.block_size)).view(
                1, 1, config.block_size, config.block_size
            ),
        )
        self.n_head = config.n_head
        self.n_embd = config.n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)

        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    """Pre-LayerNorm transformer block."""

    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = nn.ModuleDict(
            dict(
                c_fc=nn.Linear(config.n_embd, 4 * config.n_embd),
                c_proj=nn.Linear(4 * config.n_embd, config.n_embd),
                act=NewGELU(),
                dropout=nn.Dropout(config.resid_pdrop),
            )
        )
        m = self.mlp
        self.mlpf = lambda x: m.dropout(m.c_proj(m.act(m.c_fc(x))))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlpf(self.ln_2(x))
        return x


class GPT(nn.Module):
    """GPT language model."""

    @staticmethod
    def get_default_config():
        C = CN()
        C.model_type = "gpt"
        C.n_layer = None
        C.n_head = None
        C.n_embd = None
        C.vocab_size = None
        C.block_size = None
        C.embd_pdrop = 0.1
        C.resid_pdrop = 0.1
        C.attn_pdrop = 0.1
        return C

    def __init__(self, config):
        super().__init__()
        assert config.vocab_size is not None
        assert config.block_size is not None
        self.block_size = config.block_size

        type_given = config.model_type is not None
        params_given = all([config.n_layer is not None, config.n_head is not None, config.n_embd is not None])
        assert type_given ^ params_given
        if type_given:
            config.merge_from_dict(
                {
                    "gpt2": dict(n_layer=12, n_head=12, n_embd=768),
                    "gpt-mini": dict(n_layer=6, n_head=6, n_embd=192),
                    "gpt-micro": dict(n_layer=4, n_head=4, n_embd=128),
                    "gpt-nano": dict(n_layer=3, n_head=3, n_embd=48),
                }[config.model_type]
            )

        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.embd_pdrop),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=nn.LayerNorm(config.n_embd),
            )
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

        # GPT-2 init, with scaled residual projections
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

        n_params = sum(p.numel() for p in self.transformer.parameters())
        print(f"number of parameters: {n_params / 1e6:.2f}M")

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
        elif isinstance(module, nn.LayerNorm):
            torch.nn.init.zeros_(module.bias)
            torch.nn.init.ones_(module.weight)

    def configure_optimizers(self, train_config):
        """AdamW with weight decay on the Linear weights only."""
        decay = set()
        no_decay = set()
        whitelist_weight_modules = (torch.nn.Linear,)
        blacklist_weight_modules = (torch.nn.LayerNorm, torch.nn.Embedding)
        for mn, m in self.named_modules():
            for pn, _p in m.named_parameters():
                fpn = f"{mn}.{pn}" if mn else pn
                if pn.endswith("bias"):
                    no_decay.add(fpn)
                elif pn.endswith("weight") and isinstance(m, whitelist_weight_modules):
                    decay.add(fpn)
                elif pn.endswith("weight") and isinstance(m, blacklist_weight_modules):
                    no_decay.add(fpn)

        param_dict = {pn: p for pn, p in self.named_parameters()}
        inter_params = decay & no_decay
        union_params = decay | no_decay
        assert len(inter_params) == 0, f"parameters {inter_params} made it into both decay/no_decay sets!"
        assert len(param_dict.keys() - union_params) == 0, (
            f"parameters {param_dict.keys() - union_params} were not separated into either decay/no_decay set!"
        )

        optim_groups = [
            {"params": [param_dict[pn] for pn in sorted(decay)], "weight_decay": train_config.weight_decay},
            {"params": [param_dict[pn] for pn in sorted(no_decay)], "weight_decay": 0.0},
        ]
        optimizer = torch.optim.AdamW(optim_groups, lr=train_config.learning_rate, betas=train_config.betas)
        return optimizer

    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()  # noqa: RUF059 (minGPT's names)
        assert t <= self.block_size, f"Cannot forward sequence of length {t}, block size is only {self.block_size}"
        pos = torch.arange(0, t, dtype=torch.long, device=device).unsqueeze(0)  # shape (1, t)

        tok_emb = self.transformer.wte(idx)
        pos_emb = self.transformer.wpe(pos)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)

        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, do_sample=False, top_k=None):
        """Extend ``idx`` (b, t) by ``max_new_tokens`` tokens, feeding each prediction back in."""
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size :]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, top_k)
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            if do_sample:
                idx_next = torch.multinomial(probs, num_samples=1)
            else:
                _, idx_next = torch.topk(probs, k=1, dim=-1)
            idx = torch.cat((idx, idx_next), dim=1)

        return idx


# ----------------------------------------------------------------------------- mingpt/trainer.py


class Trainer:
    @staticmethod
    def get_default_config():
        C = CN()
        C.device = "auto"
        C.num_workers = 0
        C.max_iters = None
        C.batch_size = 64
        C.learning_rate = 3e-4
        C.betas = (0.9, 0.95)
        C.weight_decay = 0.1  # only applied on matmul weights
        C.grad_norm_clip = 1.0
        return C

    def __init__(self, config, model, train_dataset):
        self.config = config
        self.model = model
        self.optimizer = None
        self.train_dataset = train_dataset
        self.callbacks = defaultdict(list)

        # the device we'll train on
        if config.device == "auto":
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        else:
            self.device = config.device
        self.model = self.model.to(self.device)
        print("running on device", self.device)

        self.iter_num = 0
        self.iter_time = 0.0
        self.iter_dt = 0.0

    def add_callback(self, onevent: str, callback):
        self.callbacks[onevent].append(callback)

    def set_callback(self, onevent: str, callback):
        self.callbacks[onevent] = [callback]

    def trigger_callbacks(self, onevent: str):
        for callback in self.callbacks.get(onevent, []):
            callback(self)

    def run(self):
        model, config = self.model, self.config

        self.optimizer = model.configure_optimizers(config)

        train_loader = DataLoader(
            self.train_dataset,
            sampler=torch.utils.data.RandomSampler(self.train_dataset, replacement=True, num_samples=int(1e10)),
            shuffle=False,
            pin_memory=True,
            batch_size=config.batch_size,
            num_workers=config.num_workers,
        )

        model.train()
        self.iter_num = 0
        self.iter_time = time.time()
        data_iter = iter(train_loader)
        while True:
            # next batch, starting the iterator again when it runs out
            try:
                batch = next(data_iter)
            except StopIteration:
                data_iter = iter(train_loader)
                batch = next(data_iter)
            batch = [t.to(self.device) for t in batch]
            x, y = batch

            logits, self.loss = model(x, y)  # noqa: RUF059

            model.zero_grad(set_to_none=True)
            self.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_norm_clip)
            self.optimizer.step()

            self.trigger_callbacks("on_batch_end")
            self.iter_num += 1
            tnow = time.time()
            self.iter_dt = tnow - self.iter_time
            self.iter_time = tnow

            if config.max_iters is not None and self.iter_num >= config.max_iters:
                break


# ----------------------------------------------------------------------------- projects/adder/adder.py


def get_config(work_dir):
    C = CN()

    C.system = CN()
    C.system.seed = 3407
    C.system.work_dir = work_dir

    C.data = AdditionDataset.get_default_config()

    C.model = GPT.get_default_config()
    C.model.model_type = "gpt-nano"

    C.trainer = Trainer.get_default_config()
    C.trainer.learning_rate = 1e-3
    C.trainer.batch_size = 32
    C.trainer.max_iters = 80

    return C


class AdditionDataset(Dataset):
    """n-digit additions written as digit strings: a, b, then the sum reversed, e.g. 85 + 50 -> "8550531"."""

    @staticmethod
    def get_default_config():
        C = CN()
        C.ndigit = 1
        return C

    def __init__(self, config, split):
        self.config = config
        self.split = split

        ndigit = self.config.ndigit
        assert ndigit <= 3
        num = (10**ndigit) ** 2  # all the problems
        rng = torch.Generator()
        rng.manual_seed(1337)
        perm = torch.randperm(num, generator=rng)
        num_test = min(int(num * 0.2), 500)
        self.ixes = perm[:num_test] if split == "test" else perm[num_test:]

    def get_vocab_size(self):
        return 10  # digits

    def get_block_size(self):
        # a, b, a+b with a possible carry digit, less the last digit which is never fed back
        return 3 * self.config.ndigit + 1 - 1

    def __len__(self):
        return self.ixes.nelement()

    def __getitem__(self, idx):
        ndigit = self.config.ndigit
        idx = self.ixes[idx].item()
        nd = 10**ndigit
        a = idx // nd
        b = idx % nd
        c = a + b
        astr = f"{a:0{ndigit}d}"
        bstr = f"{b:0{ndigit}d}"
        cstr = f"{c:0{ndigit + 1}d}"[::-1]  # reversed: easier to learn
        render = astr + bstr + cstr
        dix = [int(s) for s in render]
        x = torch.tensor(dix[:-1], dtype=torch.long)
        y = torch.tensor(dix[1:], dtype=torch.long)  # next token
        y[: ndigit * 2 - 1] = -1  # only the output positions are trained
        return x, y


if __name__ == "__main__":
    work_root = tempfile.TemporaryDirectory()
    config = get_config(os.path.join(work_root.name, "out", "adder"))
    setup_logging(config)
    set_seed(config.system.seed)

    train_dataset = AdditionDataset(config.data, split="train")
    test_dataset = AdditionDataset(config.data, split="test")

    config.model.vocab_size = train_dataset.get_vocab_size()
    config.model.block_size = train_dataset.get_block_size()
    model = GPT(config.model)

    trainer = Trainer(config.trainer, model, train_dataset)

    def eval_split(trainer, split, max_batches=None):
        dataset = {"train": train_dataset, "test": test_dataset}[split]
        ndigit = config.data.ndigit
        results = []
        mistakes_printed_already = 0
        factors = torch.tensor([[10**i for i in range(ndigit + 1)][::-1]]).to(trainer.device)
        loader = DataLoader(dataset, batch_size=100, num_workers=0, drop_last=False)
        for b, (x, y) in enumerate(loader):  # noqa: B007
            x = x.to(trainer.device)
            # the two operands
            d1d2 = x[:, : ndigit * 2]
            # the model writes the sum
            d1d2d3 = model.generate(d1d2, ndigit + 1, do_sample=False)
            d3 = d1d2d3[:, -(ndigit + 1) :]
            d3 = d3.flip(1)  # back to the normal digit order
            d1i = (d1d2[:, :ndigit] * factors[:, 1:]).sum(1)
            d2i = (d1d2[:, ndigit : ndigit * 2] * factors[:, 1:]).sum(1)
            d3i_pred = (d3 * factors).sum(1)
            d3i_gt = d1i + d2i
            correct = (d3i_pred == d3i_gt).cpu()
            for i in range(x.size(0)):
                results.append(int(correct[i]))
                if not correct[i] and mistakes_printed_already < 3:
                    mistakes_printed_already += 1
                    print(f"GPT claims that {d1i[i]} + {d2i[i]} = {d3i_pred[i]} but gt is {d3i_gt[i]}")
            if max_batches is not None and b + 1 >= max_batches:
                break
        rt = torch.tensor(results, dtype=torch.float)
        print(f"{split} final score: {rt.sum():.0f}/{len(results)} = {100 * rt.mean():.2f}% correct")
        return rt.sum()

    top_score = 0

    def batch_end_callback(trainer):
        global top_score

        if trainer.iter_num % 20 == 0:
            print(f"iter {trainer.iter_num}: train loss {trainer.loss.item():.5f}")

        if trainer.iter_num % 40 == 0:
            train_max_batches = {1: None, 2: None, 3: 5}[config.data.ndigit]
            model.eval()
            with torch.no_grad():
                train_score = eval_split(trainer, "train", max_batches=train_max_batches)
                test_score = eval_split(trainer, "test", max_batches=None)
            score = train_score + test_score
            if score > top_score:
                top_score = score
                print(f"saving model with new top score of {score}")
                ckpt_path = os.path.join(config.system.work_dir, "model.pt")
                torch.save(model.state_dict(), ckpt_path)
            model.train()

    trainer.set_callback("on_batch_end", batch_end_callback)

    trainer.run()
    print(f"done iters={trainer.iter_num} loss={trainer.loss.item():.5f} top_score={float(top_score):.0f}")
    work_root.cleanup()
