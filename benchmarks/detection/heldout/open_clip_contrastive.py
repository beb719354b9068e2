"""Trains a small CLIP (ViT image tower, causal-masked text transformer, learned logit scale) contrastively on
synthetic captioned shape images, evaluates zero-shot classification and image/text retrieval, checkpoints each
epoch and resumes with gradient accumulation, as mlfoundations/open_clip's open_clip_train (legacy_main.py,
legacy_train.py, zero_shot.py, distributed.py, precision.py, scheduler.py) and open_clip (model.py, transformer.py,
loss.py, zero_shot_classifier.py) do: `init_distributed_device` turns ``--device cuda`` into the CPU when CUDA is
missing, the model is moved with ``model.to(device)`` before the AdamW param groups (no weight decay on gains,
biases and ``logit_scale``) and the ``torch.amp.GradScaler(device=device)`` for ``amp`` are made; batches are dicts
whose ``"image"`` is moved with ``.to(device=device, dtype=input_dtype, non_blocking=True)`` and ``"text"`` with
``.to(device=device, non_blocking=True)``; the text causal mask is a non-persistent buffer, the EOT pooling
indexes with ``torch.arange(x.shape[0], device=x.device)``, `ClipLoss` caches its labels per device
(``torch.arange(num_logits, device=device)``), ``logit_scale`` is clamped in place under ``torch.no_grad()``,
evaluation (under ``torch.no_grad()``, as before open_clip's 698f8cc moved it to ``torch.inference_mode()``)
gathers features with ``.cpu()`` and ranks them with ``logit_scale.cpu()``, the zero-shot classifier's
prompts are tokenized and moved with ``.to(device)``, and checkpoints are read with ``map_location='cpu'`` (a
``module.`` prefix stripped) into the moved model, optimizer and scaler.

Modeled on: mlfoundations/open_clip, src/open_clip_train/legacy_main.py, src/open_clip_train/legacy_train.py,
src/open_clip_train/zero_shot.py, src/open_clip_train/distributed.py, src/open_clip_train/precision.py,
src/open_clip_train/scheduler.py, src/open_clip/model.py, src/open_clip/transformer.py, src/open_clip/loss.py and
src/open_clip/zero_shot_classifier.py at commit 89fb801f1e6087880e951fc8354b8a2077b79c6d
(https://github.com/mlfoundations/open_clip/blob/89fb801f1e6087880e951fc8354b8a2077b79c6d/src/open_clip_train/legacy_train.py,
https://github.com/mlfoundations/open_clip/blob/89fb801f1e6087880e951fc8354b8a2077b79c6d/src/open_clip_train/legacy_main.py,
https://github.com/mlfoundations/open_clip/blob/89fb801f1e6087880e951fc8354b8a2077b79c6d/src/open_clip/model.py).

Kept: legacy_main.py's `main` flow (device, seed, model, exclude/include param groups, scaler, resume, cosine
schedule, epoch loop, checkpoint dict), `train_one_epoch` (scheduler per step, dict batch, both the plain and the
``accum_freq`` feature-caching paths, scaler and clip-norm, ``logit_scale`` clamp, AverageMeter logging),
`evaluate` (zero-shot, val contrastive loss, `get_clip_metrics`), `ClipLoss`, `CLIP` (`encode_image`,
`encode_text`, dict output), `VisionTransformer`, `Transformer`/`ResidualAttentionBlock`, `text_global_pool`,
`build_zero_shot_classifier`, `run_zero_shot_classifier`, `get_autocast`, `cosine_lr`.

Changed to run here: one process (no DDP, gather, distill); ``precision`` is ``amp`` with CUDA, else ``fp32``;
the data and BPE tokenizer are synthetic coloured shapes captioned from a 12-word vocabulary by a word tokenizer
(EOT the largest id, as in CLIP); print for logging/tensorboard; no CoCa, SigLIP, NaFlex, locking, checkpointing.
Shrunk: ViT-B/32 on 224px -> width 48, 2 layers, patch 8 on 32px; text width 48, 2 layers, context 8; embed 32;
160 train / 64 val images, batch 32, 2 epochs + 1 resumed epoch with accum_freq 2.
"""
import argparse
import math
import os
import random
import tempfile
import time
from contextlib import suppress
from functools import partial

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

COLORS = ["red", "green", "blue", "yellow"]
SHAPES = ["square", "disc", "bar", "ring"]
VOCAB = ["<pad>", "a", "photo", "of"] + COLORS + SHAPES  # then <sot>, <eot> (the largest id)
SOT, EOT = len(VOCAB), len(VOCAB) + 1


def init_distributed_device(args):
    args.distributed, args.world_size, args.rank, args.local_rank = False, 1, 0, 0
    device_type = args.device.split(':', maxsplit=1)[0]
    if device_type == 'cuda' and not torch.cuda.is_available():
        print(f"Device {args.device} was not available, falling back to CPU.")
        args.device = 'cpu'
    return torch.device(args.device)


def is_master(args):
    return args.rank == 0


def get_autocast(precision, device_type='cuda'):
    if precision == 'amp':
        return partial(torch.amp.autocast, device_type=device_type, dtype=torch.float16)
    return suppress


def get_input_dtype(precision):
    return {'bf16': torch.bfloat16, 'fp16': torch.float16}.get(precision)


def cosine_lr(optimizer, base_lr, warmup_length, steps):
    def _lr_adjuster(step):
        if step < warmup_length:
            lr = base_lr * (step + 1) / warmup_length
        else:
            e = step - warmup_length
            lr = float(0.5 * (1 + np.cos(np.pi * e / (steps - warmup_length))) * base_lr)
        for param_group in optimizer.param_groups:  # assign_learning_rate
            param_group["lr"] = lr
        return lr
    return _lr_adjuster


class ResidualAttentionBlock(nn.Module):
    def __init__(self, d_model, n_head, mlp_ratio=4.0):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_head, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d_model, int(d_model * mlp_ratio)), nn.GELU(),
                                 nn.Linear(int(d_model * mlp_ratio), d_model))

    def attention(self, q_x, attn_mask=None):
        attn_mask = attn_mask.to(q_x.dtype) if attn_mask is not None else None
        return self.attn(q_x, q_x, q_x, need_weights=False, attn_mask=attn_mask)[0]

    def forward(self, q_x, attn_mask=None):
        x = q_x + self.attention(self.ln_1(q_x), attn_mask=attn_mask)
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, width, layers, heads):
        super().__init__()
        self.width, self.layers = width, layers
        self.resblocks = nn.ModuleList([ResidualAttentionBlock(width, heads) for _ in range(layers)])

    def get_cast_dtype(self):
        return self.resblocks[0].mlp[0].weight.dtype

    def forward(self, x, attn_mask=None):
        for r in self.resblocks:
            x = r(x, attn_mask=attn_mask)
        return x


class VisionTransformer(nn.Module):
    def __init__(self, image_size, patch_size, width, layers, heads, output_dim):
        super().__init__()
        self.image_size, self.patch_size = image_size, patch_size
        self.conv1 = nn.Conv2d(3, width, kernel_size=patch_size, stride=patch_size, bias=False)
        scale = width ** -0.5
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn((image_size // patch_size) ** 2 + 1, width))
        self.ln_pre = nn.LayerNorm(width)
        self.transformer = Transformer(width, layers, heads)
        self.ln_post = nn.LayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, output_dim))

    def forward(self, x):
        x = self.conv1(x)  # shape = [*, width, grid, grid]
        x = x.reshape(x.shape[0], x.shape[1], -1).permute(0, 2, 1)  # shape = [*, grid ** 2, width]
        # class embeddings and positional embeddings
        x = torch.cat([self.class_embedding.view(1, 1, -1).expand(x.shape[0], -1, -1).to(x.dtype), x], dim=1)
        x = x + self.positional_embedding.to(x.dtype)
        x = self.transformer(self.ln_pre(x))
        return self.ln_post(x[:, 0]) @ self.proj  # pooled


def text_global_pool(x, text=None, pool_type='argmax'):
    if pool_type == 'first':
        return x[:, 0]
    # take features from the eot embedding (eot_token is the highest number in each sequence)
    return x[torch.arange(x.shape[0], device=x.device), text.argmax(dim=-1)]


def build_causal_mask(num_pos):
    # pytorch uses additive attention mask; fill with -inf
    mask = torch.empty(num_pos, num_pos)
    mask.fill_(float("-inf"))
    mask.triu_(1)  # zero out the lower diagonal
    return mask


class CLIP(nn.Module):
    def __init__(self, embed_dim, vision_cfg, text_cfg, init_logit_scale=np.log(1 / 0.07), output_dict=True):
        super().__init__()
        self.output_dict = output_dict
        self.visual = VisionTransformer(output_dim=embed_dim, **vision_cfg)
        self.context_length, self.vocab_size = text_cfg['context_length'], text_cfg['vocab_size']
        width = text_cfg['width']
        self.transformer = Transformer(width, text_cfg['layers'], text_cfg['heads'])
        self.token_embedding = nn.Embedding(self.vocab_size, width)
        self.positional_embedding = nn.Parameter(torch.empty(self.context_length, width))
        nn.init.normal_(self.positional_embedding, std=0.01)
        self.ln_final = nn.LayerNorm(width)
        self.text_projection = nn.Parameter(width ** -0.5 * torch.randn(width, embed_dim))
        self.text_pool_type = 'argmax'
        self.register_buffer('attn_mask', build_causal_mask(self.context_length), persistent=False)
        self.logit_scale = nn.Parameter(torch.ones([]) * init_logit_scale)

    def encode_image(self, image, normalize: bool = False):
        features = self.visual(image)
        return F.normalize(features, dim=-1) if normalize else features

    def encode_text(self, text, normalize: bool = False):
        cast_dtype = self.transformer.get_cast_dtype()
        x = self.token_embedding(text).to(cast_dtype)  # [batch_size, n_ctx, d_model]
        x = x + self.positional_embedding.to(cast_dtype)
        x = self.transformer(x, attn_mask=self.attn_mask)
        x = self.ln_final(x)  # [batch_size, n_ctx, transformer.width]
        x = text_global_pool(x, text, self.text_pool_type)
        x = x @ self.text_projection
        return F.normalize(x, dim=-1) if normalize else x

    def forward(self, image=None, text=None):
        image_features = self.encode_image(image, normalize=True) if image is not None else None
        text_features = self.encode_text(text, normalize=True) if text is not None else None
        if self.output_dict:
            return {"image_features": image_features, "text_features": text_features,
                    "logit_scale": self.logit_scale.exp()}
        return image_features, text_features, self.logit_scale.exp()


class ClipLoss(nn.Module):
    def __init__(self, cache_labels=False, rank=0, world_size=1):
        super().__init__()
        self.cache_labels, self.rank, self.world_size = cache_labels, rank, world_size
        self.prev_num_logits, self.labels = 0, {}  # cache state

    def get_ground_truth(self, device, num_logits):
        # calculated ground-truth and cache if enabled
        if self.prev_num_logits != num_logits or device not in self.labels:
            labels = torch.arange(num_logits, device=device, dtype=torch.long)
            if self.cache_labels:
                self.labels[device] = labels
                self.prev_num_logits = num_logits
        else:
            labels = self.labels[device]
        return labels

    def forward(self, image_features, text_features, logit_scale, output_dict=False):
        device = image_features.device
        logits_per_image = logit_scale * image_features @ text_features.T
        logits_per_text = logit_scale * text_features @ image_features.T
        labels = self.get_ground_truth(device, logits_per_image.shape[0])
        total_loss = (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_text, labels)) / 2
        return {"contrastive_loss": total_loss} if output_dict else total_loss


def tokenize(texts, context_length=8):
    result = torch.zeros(len(texts), context_length, dtype=torch.long)
    for i, text in enumerate(texts):
        tokens = [SOT] + [VOCAB.index(w) for w in text.split()] + [EOT]
        result[i, :len(tokens)] = torch.tensor(tokens[:context_length])
    return result


class ShapeCaptionDataset(Dataset):
    """Coloured shapes on noise; the caption names colour and shape, the zero-shot label is the shape."""

    def __init__(self, n, size, seed):
        rng = np.random.RandomState(seed)
        yy, xx = np.mgrid[0:size, 0:size] / size - 0.5
        rgb = {"red": (1, 0, 0), "green": (0, 1, 0), "blue": (0, 0, 1), "yellow": (1, 1, 0)}
        self.images, self.captions, self.labels = [], [], []
        for i in range(n):
            color, shape = COLORS[rng.randint(4)], rng.randint(4)
            cx, cy, r = rng.uniform(-0.15, 0.15), rng.uniform(-0.15, 0.15), rng.uniform(0.15, 0.3)
            d = np.sqrt((xx - cx) ** 2 + (yy - cy) ** 2)
            mask = [np.maximum(abs(xx - cx), abs(yy - cy)) < r, d < r, (abs(yy - cy) < r / 3) & (abs(xx - cx) < r),
                    (d < r) & (d > r / 2)][shape]
            img = 0.2 * rng.rand(3, size, size) + mask[None] * np.array(rgb[color])[:, None, None] * 0.8
            self.images.append(((img - 0.45) / 0.27).astype(np.float32))
            self.captions.append(f"a photo of a {color} {SHAPES[shape]}")
            self.labels.append(shape)
        self.tokens = tokenize(self.captions)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return {"image": torch.from_numpy(self.images[idx]), "text": self.tokens[idx], "label": self.labels[idx]}


class DataInfo:
    def __init__(self, dataloader):
        self.dataloader = dataloader
        dataloader.num_samples, dataloader.num_batches = len(dataloader.dataset), len(dataloader)

    def set_epoch(self, epoch):
        pass


def get_data(args):
    train = DataLoader(ShapeCaptionDataset(160, 32, seed=1), batch_size=args.batch_size, shuffle=True,
                       drop_last=True, pin_memory=True)
    val = DataLoader(ShapeCaptionDataset(64, 32, seed=2), batch_size=args.batch_size, pin_memory=True)
    return {"train": DataInfo(train), "val": DataInfo(val), "zeroshot": DataInfo(val)}


class AverageMeter(object):
    """Computes and stores the average and current value"""

    def __init__(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def unwrap_model(model):
    return model.module if hasattr(model, 'module') else model


def backward(total_loss, scaler):
    if scaler is not None:
        scaler.scale(total_loss).backward()
    else:
        total_loss.backward()


def train_one_epoch(model, data, loss, epoch, optimizer, scaler, scheduler, args):
    device = torch.device(args.device)
    autocast = get_autocast(args.precision, device_type=device.type)
    input_dtype = get_input_dtype(args.precision)
    model.train()
    data['train'].set_epoch(epoch)
    dataloader = data['train'].dataloader
    num_batches_per_epoch = dataloader.num_batches // args.accum_freq
    if args.accum_freq > 1:
        accum_images, accum_texts, accum_features = [], [], {}
    losses_m = {}
    batch_time_m = AverageMeter()
    end = time.time()
    for i, batch in enumerate(dataloader):
        i_accum = i // args.accum_freq
        step = num_batches_per_epoch * epoch + i_accum
        scheduler(step)
        images, texts = batch["image"], batch["text"]
        images = images.to(device=device, dtype=input_dtype, non_blocking=True)
        texts = texts.to(device=device, non_blocking=True)
        optimizer.zero_grad()
        if args.accum_freq == 1:
            with autocast():
                model_out = model(images, texts)
                logit_scale = model_out["logit_scale"]
                losses = loss(**model_out, output_dict=True)
                total_loss = sum(losses.values())
                losses["loss"] = total_loss
            backward(total_loss, scaler)
        else:
            # First, cache the features without any gradient tracking.
            with torch.no_grad():
                with autocast():
                    model_out = model(images, texts)
                    model_out.pop("logit_scale")
                    for key, val in model_out.items():
                        accum_features.setdefault(key, []).append(val)
                accum_images.append(images)
                accum_texts.append(texts)
            if ((i + 1) % args.accum_freq) > 0:
                continue
            # Re-do the forward pass for those batches, and use the cached features from the other batches as negatives.
            optimizer.zero_grad()
            for j in range(args.accum_freq):
                images, texts = accum_images[j], accum_texts[j]
                with autocast():
                    model_out = model(images, texts)
                    logit_scale = model_out.pop("logit_scale")
                    inputs = {}
                    for key, val in accum_features.items():
                        accumulated = accum_features[key]
                        inputs[key] = torch.cat(accumulated[:j] + [model_out[key]] + accumulated[j + 1:])
                    losses = loss(**inputs, logit_scale=logit_scale, output_dict=True)
                    del inputs
                    total_loss = sum(losses.values())
                    losses["loss"] = total_loss
                backward(total_loss, scaler)

        if scaler is not None:
            if args.grad_clip_norm is not None:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip_norm, norm_type=2.0)
            scaler.step(optimizer)
            scaler.update()
        else:
            if args.grad_clip_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip_norm, norm_type=2.0)
            optimizer.step()

        # reset gradient accum, if enabled
        if args.accum_freq > 1:
            accum_images, accum_texts, accum_features = [], [], {}

        # Note: we clamp to 4.6052 = ln(100), as in the original paper.
        with torch.no_grad():
            unwrap_model(model).logit_scale.clamp_(0, math.log(100))

        batch_time_m.update(time.time() - end)
        end = time.time()
        batch_count = i_accum + 1
        if is_master(args) and (i_accum % args.log_every_n_steps == 0 or batch_count == num_batches_per_epoch):
            batch_size = len(images)
            for key, val in losses.items():
                losses_m.setdefault(key, AverageMeter()).update(val.item(), batch_size)
            loss_log = " ".join(f"{name.capitalize()}: {m.val:#.5g} ({m.avg:#.5g})" for name, m in losses_m.items())
            print(f"Train Epoch: {epoch} [{batch_count}/{num_batches_per_epoch}] "
                         f"LR: {optimizer.param_groups[0]['lr']:5f} Logit Scale: {logit_scale.item():.3f} " + loss_log)


def get_clip_metrics(image_features, text_features, logit_scale):
    metrics = {}
    logits_per_image = (logit_scale * image_features @ text_features.t()).detach().cpu()
    logits = {"image_to_text": logits_per_image, "text_to_image": logits_per_image.t().detach().cpu()}
    ground_truth = torch.arange(len(text_features)).view(-1, 1)
    for name, logit in logits.items():
        ranking = torch.argsort(logit, descending=True)
        preds = torch.where(ranking == ground_truth)[1].detach().cpu().numpy()
        metrics[f"{name}_mean_rank"] = preds.mean() + 1
        for k in [1, 5]:
            metrics[f"{name}_R@{k}"] = np.mean(preds < k)
    return metrics


def build_zero_shot_classifier(model, tokenizer, classnames, templates, device='cpu'):
    with torch.no_grad():
        texts = [template.format(c) for c in classnames for template in templates]
        texts = tokenizer(texts).to(device)
        class_embeddings = model(text=texts)['text_features']
        class_embeddings = class_embeddings.reshape(len(classnames), len(templates), -1).mean(dim=1)
        class_embeddings = class_embeddings / class_embeddings.norm(dim=1, keepdim=True)
        return class_embeddings.T


def run_zero_shot_classifier(model, classifier, dataloader, args):
    device = torch.device(args.device)
    autocast = get_autocast(args.precision, device_type=device.type)
    input_dtype = get_input_dtype(args.precision)
    with torch.no_grad():
        top1, n = 0., 0.
        for batch in dataloader:
            images = batch["image"].to(device=device, dtype=input_dtype, non_blocking=True)
            target = batch["label"].to(device, non_blocking=True)
            with autocast():
                image_features = model(image=images)['image_features']
                logits = 100. * image_features @ classifier
            pred = logits.topk(1, 1, True, True)[1].t()
            top1 += pred.eq(target.view(1, -1).expand_as(pred)).reshape(-1).float().sum().item()
            n += images.size(0)
    return top1 / n


def evaluate(model, data, epoch, args):
    metrics = {}
    device = torch.device(args.device)
    model.eval()
    classifier = build_zero_shot_classifier(model, tokenize, SHAPES, ["a photo of a {}", "a {}"], device=device)
    metrics["zeroshot-top1"] = run_zero_shot_classifier(model, classifier, data["zeroshot"].dataloader, args)
    autocast = get_autocast(args.precision, device_type=device.type)
    input_dtype = get_input_dtype(args.precision)
    dataloader = data['val'].dataloader
    num_samples, cumulative_loss = 0, 0.0
    all_image_features, all_text_features = [], []
    with torch.no_grad():
        for i, batch in enumerate(dataloader):
            images, texts = batch["image"], batch["text"]
            images = images.to(device=device, dtype=input_dtype, non_blocking=True)
            texts = texts.to(device=device, non_blocking=True)
            with autocast():
                model_out = model(images, texts)
                image_features, text_features = model_out["image_features"], model_out["text_features"]
                logit_scale = model_out["logit_scale"]
                # features are accumulated in CPU tensors, otherwise GPU memory exhausted quickly
                all_image_features.append(image_features.cpu())
                all_text_features.append(text_features.cpu())
                logit_scale = logit_scale.mean()
                logits_per_image = logit_scale * image_features @ text_features.t()
                batch_size = images.shape[0]
                labels = torch.arange(batch_size, device=device).long()
                total_loss = (F.cross_entropy(logits_per_image, labels) +
                              F.cross_entropy(logits_per_image.t(), labels)) / 2
            cumulative_loss += total_loss * batch_size
            num_samples += batch_size
        val_metrics = get_clip_metrics(image_features=torch.cat(all_image_features).float(),
                                       text_features=torch.cat(all_text_features).float(),
                                       logit_scale=logit_scale.cpu().float())
        loss = cumulative_loss / num_samples
        metrics.update({**val_metrics, "clip_val_loss": loss.item(), "epoch": epoch, "num_samples": num_samples})
    print(f"Eval Epoch: {epoch} " + "\t".join([f"{k}: {round(float(v), 4):.4f}" for k, v in metrics.items()]))
    return metrics


def random_seed(seed=42, rank=0):
    torch.manual_seed(seed + rank)
    np.random.seed(seed + rank)
    random.seed(seed + rank)


def main(args):
    device = init_distributed_device(args)
    args.precision = 'amp' if device.type == 'cuda' else 'fp32'
    print(f'Running with a single process. Device {args.device}.')
    random_seed(args.seed, 0)
    model = CLIP(embed_dim=32, vision_cfg=dict(image_size=32, patch_size=8, width=48, layers=2, heads=4),
                 text_cfg=dict(context_length=8, vocab_size=EOT + 1, width=48, layers=2, heads=4))
    model.to(device=device)
    random_seed(args.seed, args.rank)

    # create optimizer and scaler
    exclude = lambda n, p: p.ndim < 2 or "bn" in n or "ln" in n or "bias" in n or 'logit_scale' in n
    include = lambda n, p: not exclude(n, p)
    named_parameters = list(model.named_parameters())
    gain_or_bias_params = [p for n, p in named_parameters if exclude(n, p) and p.requires_grad]
    rest_params = [p for n, p in named_parameters if include(n, p) and p.requires_grad]
    optimizer = torch.optim.AdamW([{"params": gain_or_bias_params, "weight_decay": 0.},
                                   {"params": rest_params, "weight_decay": args.wd}],
                                  lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps)
    scaler = torch.amp.GradScaler(device=device) if args.precision == "amp" else None

    # optionally resume from a checkpoint
    start_epoch = 0
    if args.resume is not None:
        checkpoint = torch.load(args.resume, map_location='cpu')
        start_epoch = checkpoint["epoch"]
        sd = checkpoint["state_dict"]
        if not args.distributed and next(iter(sd.items()))[0].startswith('module'):
            sd = {k[len('module.'):]: v for k, v in sd.items()}
        model.load_state_dict(sd)
        optimizer.load_state_dict(checkpoint["optimizer"])
        if scaler is not None and 'scaler' in checkpoint:
            scaler.load_state_dict(checkpoint['scaler'])
        print(f"=> resuming checkpoint '{args.resume}' (epoch {start_epoch})")

    data = get_data(args)
    total_steps = (data["train"].dataloader.num_batches // args.accum_freq) * args.epochs
    scheduler = cosine_lr(optimizer, args.lr, args.warmup, total_steps)
    loss = ClipLoss(cache_labels=True, rank=args.rank, world_size=args.world_size)

    metrics = {}
    for epoch in range(start_epoch, args.epochs):
        print(f'Start epoch {epoch}')
        train_one_epoch(model, data, loss, epoch, optimizer, scaler, scheduler, args)
        completed_epoch = epoch + 1
        metrics = evaluate(model, data, completed_epoch, args)
        # Saving checkpoints.
        checkpoint_dict = {"epoch": completed_epoch, "name": args.name, "state_dict": model.state_dict(),
                           "optimizer": optimizer.state_dict()}
        if scaler is not None:
            checkpoint_dict["scaler"] = scaler.state_dict()
        torch.save(checkpoint_dict, os.path.join(args.checkpoint_path, f"epoch_{completed_epoch}.pt"))
    return metrics


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        args = argparse.Namespace(device='cuda', seed=0, name='clip-shapes', lr=1e-3, wd=0.1, beta1=0.9, beta2=0.98,
                                  eps=1e-6, warmup=4, batch_size=32, epochs=2, accum_freq=1, grad_clip_norm=1.0,
                                  log_every_n_steps=2, resume=None, checkpoint_path=tmp)
        main(args)
        # resume from the last checkpoint for one more epoch, accumulating two batches per step
        args = argparse.Namespace(**{**vars(args), 'device': 'cuda', 'epochs': 3, 'accum_freq': 2,
                                     'resume': os.path.join(tmp, "epoch_2.pt")})
        metrics = main(args)
    print(f"done: zero-shot top1 {metrics['zeroshot-top1']:.3f}, "
          f"image->text R@1 {metrics['image_to_text_R@1']:.3f}, val loss {metrics['clip_val_loss']:.4f}")
