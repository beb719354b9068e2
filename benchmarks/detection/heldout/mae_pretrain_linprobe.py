"""Pre-trains a tiny masked autoencoder (ViT encoder/decoder, per-sample random masking, fixed sin-cos position
embeddings) on a synthetic ImageFolder, resumes the pre-training from its checkpoint, then linear-probes the encoder at
a larger input size (interpolated position embeddings, BatchNorm head, LARS), as facebookresearch/mae's main_pretrain.py
and main_linprobe.py do: ``device = torch.device(args.device)`` and ``model.to(device)`` after the checkpoint surgery,
batches moved with ``.to(device, non_blocking=True)`` under CUDA autocast with a GradScaler-based ``NativeScaler``,
``torch.cuda.synchronize()`` after each step, ``loss.item()`` reads, masking noise from ``torch.rand(N, L,
device=x.device)`` and the mask from ``torch.ones([N, L], device=x.device)``, sin-cos tables copied from numpy into
parameters, the grad norm stacked on ``parameters[0].grad.device``, and checkpoints (resume and the pre-trained
weights for probing) read with ``torch.load(..., map_location='cpu')``.

Modeled on: facebookresearch/mae, main_pretrain.py, engine_pretrain.py, models_mae.py, main_linprobe.py,
engine_finetune.py, models_vit.py, util/{misc,pos_embed,lr_sched,lars}.py at commit
efb2a8062c206524e35e47d04501ed4f544c0ae8
(https://github.com/facebookresearch/mae/blob/efb2a8062c206524e35e47d04501ed4f544c0ae8/main_pretrain.py,
https://github.com/facebookresearch/mae/blob/efb2a8062c206524e35e47d04501ed4f544c0ae8/models_mae.py).

Kept: `MaskedAutoencoderViT` (`patchify`, `random_masking`, encoder/decoder, `forward_loss`), models_vit's
`VisionTransformer` (``global_pool``), `get_2d_sincos_pos_embed`, `interpolate_pos_embed`, `adjust_learning_rate`,
`NativeScalerWithGradNormCount`, `get_grad_norm_`, `save_model`, `load_model`, `LARS`, both `train_one_epoch`s,
`evaluate`, both `main`s (lr scaling, weight-decay groups, checkpoint head removal, frozen trunk with a BN head).

Changed to run here: timm's PatchEmbed/Block/VisionTransformer/``add_weight_decay``/``accuracy`` and torchvision's
ImageFolder/transforms are small re-implementations over ``.npy`` images; ``--device`` defaults to ``cuda`` only when
available and ``torch.cuda.synchronize()`` runs only ``if torch.cuda.is_available()``; ``torch.cuda.amp.autocast()``/
``GradScaler()`` are ``torch.amp.autocast('cuda', ...)``/``torch.amp.GradScaler('cuda', ...)`` with
``enabled=torch.cuda.is_available()`` (same behaviour, no warnings); ``torch.load`` adds ``weights_only=False``
(checkpoints pickle ``args``); np.float is np.float64; ``unpatchify``, distributed, TensorBoard, log.txt left out.
Shrunk: 32 px images (40 px probing), patch 8, width 32, depth 2, decoder 16x1, 64/32 images, 3 classes, batch 16.
"""
import argparse
import math
import os
import shutil
import sys
import tempfile
from collections import defaultdict
from functools import partial
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

def get_2d_sincos_pos_embed(embed_dim, grid_size, cls_token=False):
    grid_h, grid_w = np.arange(grid_size, dtype=np.float32), np.arange(grid_size, dtype=np.float32)
    grid = np.stack(np.meshgrid(grid_w, grid_h), axis=0).reshape([2, 1, grid_size, grid_size])  # here w goes first
    emb_h = get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[0])  # get_2d_sincos_pos_embed_from_grid
    emb_w = get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[1])
    pos_embed = np.concatenate([emb_h, emb_w], axis=1)  # (H*W, D)
    if cls_token:
        pos_embed = np.concatenate([np.zeros([1, embed_dim]), pos_embed], axis=0)
    return pos_embed

def get_1d_sincos_pos_embed_from_grid(embed_dim, pos):
    omega = 1. / 10000 ** (np.arange(embed_dim // 2, dtype=np.float64) / (embed_dim / 2.))  # (D/2,)
    out = np.einsum('m,d->md', pos.reshape(-1), omega)  # (M, D/2), outer product
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)  # (M, D)

def interpolate_pos_embed(model, checkpoint_model):
    if 'pos_embed' in checkpoint_model:
        pos_embed_checkpoint = checkpoint_model['pos_embed']
        embedding_size = pos_embed_checkpoint.shape[-1]
        num_patches = model.patch_embed.num_patches
        num_extra_tokens = model.pos_embed.shape[-2] - num_patches
        orig_size = int((pos_embed_checkpoint.shape[-2] - num_extra_tokens) ** 0.5)
        new_size = int(num_patches ** 0.5)
        if orig_size != new_size:
            print("Position interpolate from %dx%d to %dx%d" % (orig_size, orig_size, new_size, new_size))
            extra_tokens = pos_embed_checkpoint[:, :num_extra_tokens]
            pos_tokens = pos_embed_checkpoint[:, num_extra_tokens:]  # only the position tokens are interpolated
            pos_tokens = pos_tokens.reshape(-1, orig_size, orig_size, embedding_size).permute(0, 3, 1, 2)
            pos_tokens = torch.nn.functional.interpolate(
                pos_tokens, size=(new_size, new_size), mode='bicubic', align_corners=False)
            pos_tokens = pos_tokens.permute(0, 2, 3, 1).flatten(1, 2)
            checkpoint_model['pos_embed'] = torch.cat((extra_tokens, pos_tokens), dim=1)

def adjust_learning_rate(optimizer, epoch, args):  # decay the learning rate with half-cycle cosine after warmup
    if epoch < args.warmup_epochs:
        lr = args.lr * epoch / args.warmup_epochs
    else:
        lr = args.min_lr + (args.lr - args.min_lr) * 0.5 * \
            (1. + math.cos(math.pi * (epoch - args.warmup_epochs) / (args.epochs - args.warmup_epochs)))
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr * param_group["lr_scale"] if "lr_scale" in param_group else lr
    return lr

class LARS(torch.optim.Optimizer):
    """LARS optimizer, no rate scaling or weight decay for parameters <= 1D."""
    def __init__(self, params, lr=0, weight_decay=0, momentum=0.9, trust_coefficient=0.001):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum,
                                      trust_coefficient=trust_coefficient))
    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g['params']:
                dp = p.grad
                if dp is None:
                    continue
                if p.ndim > 1:  # if not normalization gamma/beta or bias
                    dp = dp.add(p, alpha=g['weight_decay'])
                    param_norm, update_norm = torch.norm(p), torch.norm(dp)
                    one = torch.ones_like(param_norm)
                    q = torch.where(param_norm > 0., torch.where(update_norm > 0,
                                    (g['trust_coefficient'] * param_norm / update_norm), one), one)
                    dp = dp.mul(q)
                param_state = self.state[p]
                if 'mu' not in param_state:
                    param_state['mu'] = torch.zeros_like(p)
                mu = param_state['mu']
                mu.mul_(g['momentum']).add_(dp)
                p.add_(mu, alpha=-g['lr'])

class MetricLogger(object):
    def __init__(self, delimiter="\t"):
        self.totals, self.counts, self.delimiter = defaultdict(float), defaultdict(int), delimiter
    def update(self, n=1, **kwargs):
        for k, v in kwargs.items():
            self.totals[k] += (v.item() if isinstance(v, torch.Tensor) else v) * n
            self.counts[k] += n
    def global_avg(self, k):
        return self.totals[k] / self.counts[k]
    def __str__(self):
        return self.delimiter.join("{}: {:.4f}".format(k, self.global_avg(k)) for k in self.totals)

class NativeScalerWithGradNormCount:
    def __init__(self):
        self._scaler = torch.amp.GradScaler('cuda', enabled=torch.cuda.is_available())
    def __call__(self, loss, optimizer, clip_grad=None, parameters=None, create_graph=False, update_grad=True):
        self._scaler.scale(loss).backward(create_graph=create_graph)
        if update_grad:
            if clip_grad is not None:
                self._scaler.unscale_(optimizer)  # unscale the gradients of optimizer's assigned params in-place
                norm = torch.nn.utils.clip_grad_norm_(parameters, clip_grad)
            else:
                self._scaler.unscale_(optimizer)
                norm = get_grad_norm_(parameters)
            self._scaler.step(optimizer)
            self._scaler.update()
        else:
            norm = None
        return norm
    def state_dict(self):
        return self._scaler.state_dict()
    def load_state_dict(self, state_dict):
        self._scaler.load_state_dict(state_dict)

def get_grad_norm_(parameters, norm_type: float = 2.0) -> torch.Tensor:
    parameters = [p for p in parameters if p.grad is not None]
    norm_type = float(norm_type)
    if len(parameters) == 0:
        return torch.tensor(0.)
    device = parameters[0].grad.device
    if norm_type == math.inf:
        total_norm = max(p.grad.detach().abs().max().to(device) for p in parameters)
    else:
        total_norm = torch.norm(torch.stack([torch.norm(p.grad.detach(), norm_type).to(device)
                                             for p in parameters]), norm_type)
    return total_norm

def save_model(args, epoch, model, model_without_ddp, optimizer, loss_scaler):
    to_save = {'model': model_without_ddp.state_dict(), 'optimizer': optimizer.state_dict(), 'epoch': epoch,
               'scaler': loss_scaler.state_dict(), 'args': args}
    torch.save(to_save, Path(args.output_dir) / ('checkpoint-%s.pth' % str(epoch)))  # save_on_master

def load_model(args, model_without_ddp, optimizer, loss_scaler):
    if args.resume:
        checkpoint = torch.load(args.resume, map_location='cpu', weights_only=False)
        model_without_ddp.load_state_dict(checkpoint['model'])
        if 'optimizer' in checkpoint and 'epoch' in checkpoint and not (hasattr(args, 'eval') and args.eval):
            optimizer.load_state_dict(checkpoint['optimizer'])
            args.start_epoch = checkpoint['epoch'] + 1
            if 'scaler' in checkpoint:
                loss_scaler.load_state_dict(checkpoint['scaler'])
            print("Resume checkpoint %s with optim & sched!" % os.path.basename(args.resume))

def accuracy(output, target, topk=(1,)):  # timm.utils.accuracy
    maxk, batch_size = min(max(topk), output.size()[1]), target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    correct = pred.t().eq(target.reshape(1, -1).expand_as(pred.t()))
    return [correct[:min(k, maxk)].reshape(-1).float().sum(0) * 100. / batch_size for k in topk]

def add_weight_decay(model, weight_decay=1e-5, skip_list=()):  # timm.optim.optim_factory
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if param.requires_grad:  # skip frozen weights
            (no_decay if len(param.shape) == 1 or name.endswith(".bias") or name in skip_list else decay).append(param)
    return [{'params': no_decay, 'weight_decay': 0.}, {'params': decay, 'weight_decay': weight_decay}]

class PatchEmbed(nn.Module):
    def __init__(self, img_size=224, patch_size=16, in_chans=3, embed_dim=768):
        super().__init__()
        self.patch_size = (patch_size, patch_size)
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)
    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)

class Block(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio=4., qkv_bias=False, qk_scale=None, norm_layer=nn.LayerNorm):
        super().__init__()
        self.num_heads = num_heads
        self.norm1, self.norm2 = norm_layer(dim), norm_layer(dim)
        self.qkv, self.proj = nn.Linear(dim, dim * 3, bias=qkv_bias), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, int(dim * mlp_ratio)), nn.GELU(), nn.Linear(int(dim * mlp_ratio), dim))
    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        attn = (qkv[0] @ qkv[1].transpose(-2, -1)) * (C // self.num_heads) ** -0.5
        x = x + self.proj((attn.softmax(dim=-1) @ qkv[2]).transpose(1, 2).reshape(B, N, C))
        return x + self.mlp(self.norm2(x))

class MaskedAutoencoderViT(nn.Module):
    """ Masked Autoencoder with VisionTransformer backbone """
    def __init__(self, img_size=224, patch_size=16, in_chans=3, embed_dim=1024, depth=24, num_heads=16,
                 decoder_embed_dim=512, decoder_depth=8, decoder_num_heads=16, mlp_ratio=4.,
                 norm_layer=nn.LayerNorm, norm_pix_loss=False):
        super().__init__()
        self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, embed_dim)
        num_patches = self.patch_embed.num_patches
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, embed_dim), requires_grad=False)  # fixed sin-cos
        self.blocks = nn.ModuleList([Block(embed_dim, num_heads, mlp_ratio, qkv_bias=True, qk_scale=None,
                                           norm_layer=norm_layer) for i in range(depth)])
        self.norm = norm_layer(embed_dim)
        self.decoder_embed = nn.Linear(embed_dim, decoder_embed_dim, bias=True)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, decoder_embed_dim))
        self.decoder_pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, decoder_embed_dim), requires_grad=False)
        self.decoder_blocks = nn.ModuleList([Block(decoder_embed_dim, decoder_num_heads, mlp_ratio, qkv_bias=True,
                                                   qk_scale=None, norm_layer=norm_layer) for i in range(decoder_depth)])
        self.decoder_norm = norm_layer(decoder_embed_dim)
        self.decoder_pred = nn.Linear(decoder_embed_dim, patch_size ** 2 * in_chans, bias=True)  # decoder to patch
        self.norm_pix_loss = norm_pix_loss
        self.initialize_weights()
    def initialize_weights(self):
        grid = int(self.patch_embed.num_patches ** .5)  # initialize (and freeze) pos_embed by sin-cos embedding
        pos_embed = get_2d_sincos_pos_embed(self.pos_embed.shape[-1], grid, cls_token=True)
        self.pos_embed.data.copy_(torch.from_numpy(pos_embed).float().unsqueeze(0))
        decoder_pos_embed = get_2d_sincos_pos_embed(self.decoder_pos_embed.shape[-1], grid, cls_token=True)
        self.decoder_pos_embed.data.copy_(torch.from_numpy(decoder_pos_embed).float().unsqueeze(0))
        w = self.patch_embed.proj.weight.data  # initialize patch_embed like nn.Linear (instead of nn.Conv2d)
        torch.nn.init.xavier_uniform_(w.view([w.shape[0], -1]))
        torch.nn.init.normal_(self.cls_token, std=.02)
        torch.nn.init.normal_(self.mask_token, std=.02)
        self.apply(self._init_weights)
    def _init_weights(self, m):
        if isinstance(m, nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.constant_(m.bias, 0)
        elif isinstance(m, nn.LayerNorm):
            nn.init.constant_(m.bias, 0)
            nn.init.constant_(m.weight, 1.0)
    def patchify(self, imgs):
        p = self.patch_embed.patch_size[0]
        h = w = imgs.shape[2] // p
        x = imgs.reshape(shape=(imgs.shape[0], 3, h, p, w, p))
        x = torch.einsum('nchpwq->nhwpqc', x)
        return x.reshape(shape=(imgs.shape[0], h * w, p ** 2 * 3))
    def random_masking(self, x, mask_ratio):
        N, L, D = x.shape  # batch, length, dim
        len_keep = int(L * (1 - mask_ratio))
        noise = torch.rand(N, L, device=x.device)  # noise in [0, 1]
        ids_shuffle = torch.argsort(noise, dim=1)  # ascend: small is keep, large is remove
        ids_restore = torch.argsort(ids_shuffle, dim=1)
        ids_keep = ids_shuffle[:, :len_keep]
        x_masked = torch.gather(x, dim=1, index=ids_keep.unsqueeze(-1).repeat(1, 1, D))
        mask = torch.ones([N, L], device=x.device)  # the binary mask: 0 is keep, 1 is remove
        mask[:, :len_keep] = 0
        mask = torch.gather(mask, dim=1, index=ids_restore)  # unshuffle to get the binary mask
        return x_masked, mask, ids_restore
    def forward_encoder(self, x, mask_ratio):
        x = self.patch_embed(x)
        x = x + self.pos_embed[:, 1:, :]
        x, mask, ids_restore = self.random_masking(x, mask_ratio)
        cls_tokens = (self.cls_token + self.pos_embed[:, :1, :]).expand(x.shape[0], -1, -1)
        x = torch.cat((cls_tokens, x), dim=1)
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x), mask, ids_restore
    def forward_decoder(self, x, ids_restore):
        x = self.decoder_embed(x)
        mask_tokens = self.mask_token.repeat(x.shape[0], ids_restore.shape[1] + 1 - x.shape[1], 1)
        x_ = torch.cat([x[:, 1:, :], mask_tokens], dim=1)  # no cls token
        x_ = torch.gather(x_, dim=1, index=ids_restore.unsqueeze(-1).repeat(1, 1, x.shape[2]))  # unshuffle
        x = torch.cat([x[:, :1, :], x_], dim=1)  # append cls token
        x = x + self.decoder_pos_embed
        for blk in self.decoder_blocks:
            x = blk(x)
        x = self.decoder_pred(self.decoder_norm(x))
        return x[:, 1:, :]  # remove cls token
    def forward_loss(self, imgs, pred, mask):
        target = self.patchify(imgs)
        if self.norm_pix_loss:
            mean, var = target.mean(dim=-1, keepdim=True), target.var(dim=-1, keepdim=True)
            target = (target - mean) / (var + 1.e-6) ** .5
        loss = ((pred - target) ** 2).mean(dim=-1)  # [N, L], mean loss per patch
        return (loss * mask).sum() / mask.sum()  # mean loss on removed patches
    def forward(self, imgs, mask_ratio=0.75):
        latent, mask, ids_restore = self.forward_encoder(imgs, mask_ratio)
        pred = self.forward_decoder(latent, ids_restore)  # [N, L, p*p*3]
        loss = self.forward_loss(imgs, pred, mask)
        return loss, pred, mask

def mae_vit_tiny_patch8(**kwargs):
    return MaskedAutoencoderViT(patch_size=8, embed_dim=32, depth=2, num_heads=4, decoder_embed_dim=16,
                                decoder_depth=1, decoder_num_heads=2, mlp_ratio=2,
                                norm_layer=partial(nn.LayerNorm, eps=1e-6), **kwargs)

class VisionTransformer(nn.Module):
    """ timm VisionTransformer with support for global average pooling (models_vit.py) """
    def __init__(self, global_pool=False, img_size=224, patch_size=16, num_classes=1000, embed_dim=768, depth=12,
                 num_heads=12, mlp_ratio=4., qkv_bias=True, norm_layer=nn.LayerNorm):
        super().__init__()
        self.patch_embed = PatchEmbed(img_size, patch_size, 3, embed_dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 1, embed_dim))
        self.blocks = nn.ModuleList([Block(embed_dim, num_heads, mlp_ratio, qkv_bias=qkv_bias,
                                           norm_layer=norm_layer) for i in range(depth)])
        self.norm = norm_layer(embed_dim)
        self.head, self.global_pool = nn.Linear(embed_dim, num_classes), global_pool
        if self.global_pool:
            self.fc_norm = norm_layer(embed_dim)
            del self.norm  # remove the original norm
    def forward_features(self, x):
        cls_tokens = self.cls_token.expand(x.shape[0], -1, -1)
        x = self.patch_embed(x)
        x = torch.cat((cls_tokens, x), dim=1)
        x = x + self.pos_embed  # pos_drop has p=0
        for blk in self.blocks:
            x = blk(x)
        if self.global_pool:
            x = x[:, 1:, :].mean(dim=1)  # global pool without cls token
            outcome = self.fc_norm(x)
        else:
            x = self.norm(x)
            outcome = x[:, 0]
        return outcome
    def forward(self, x):
        return self.head(self.forward_features(x))

def vit_tiny_patch8(**kwargs):
    return VisionTransformer(patch_size=8, embed_dim=32, depth=2, num_heads=4, mlp_ratio=2, qkv_bias=True,
                             norm_layer=partial(nn.LayerNorm, eps=1e-6), **kwargs)

def train_one_epoch_pretrain(model, data_loader, optimizer, device, epoch, loss_scaler, log_writer=None, args=None):
    model.train(True)
    metric_logger, accum_iter = MetricLogger(delimiter="  "), args.accum_iter
    optimizer.zero_grad()
    for data_iter_step, (samples, _) in enumerate(data_loader):
        if data_iter_step % accum_iter == 0:  # we use a per iteration (instead of per epoch) lr scheduler
            adjust_learning_rate(optimizer, data_iter_step / len(data_loader) + epoch, args)
        samples = samples.to(device, non_blocking=True)
        with torch.amp.autocast('cuda', enabled=torch.cuda.is_available()):
            loss, _, _ = model(samples, mask_ratio=args.mask_ratio)
        loss_value = loss.item()
        if not math.isfinite(loss_value):
            sys.exit("Loss is {}, stopping training".format(loss_value))
        loss /= accum_iter
        loss_scaler(loss, optimizer, parameters=model.parameters(), update_grad=(data_iter_step + 1) % accum_iter == 0)
        if (data_iter_step + 1) % accum_iter == 0:
            optimizer.zero_grad()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        metric_logger.update(loss=loss_value, lr=optimizer.param_groups[0]["lr"])
    print("Epoch: [{}] Averaged stats: {}".format(epoch, metric_logger))
    return {k: metric_logger.global_avg(k) for k in metric_logger.totals}

def train_one_epoch(model, criterion, data_loader, optimizer, device, epoch, loss_scaler, max_norm=0,
                    mixup_fn=None, log_writer=None, args=None):
    model.train(True)
    metric_logger, accum_iter = MetricLogger(delimiter="  "), args.accum_iter
    optimizer.zero_grad()
    for data_iter_step, (samples, targets) in enumerate(data_loader):
        if data_iter_step % accum_iter == 0:
            adjust_learning_rate(optimizer, data_iter_step / len(data_loader) + epoch, args)
        samples = samples.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        with torch.amp.autocast('cuda', enabled=torch.cuda.is_available()):
            outputs = model(samples)
            loss = criterion(outputs, targets)
        loss_value = loss.item()
        if not math.isfinite(loss_value):
            sys.exit("Loss is {}, stopping training".format(loss_value))
        loss /= accum_iter
        loss_scaler(loss, optimizer, clip_grad=max_norm, parameters=model.parameters(), create_graph=False,
                    update_grad=(data_iter_step + 1) % accum_iter == 0)
        if (data_iter_step + 1) % accum_iter == 0:
            optimizer.zero_grad()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        metric_logger.update(loss=loss_value, lr=max(group["lr"] for group in optimizer.param_groups))
    print("Epoch: [{}] Averaged stats: {}".format(epoch, metric_logger))
    return {k: metric_logger.global_avg(k) for k in metric_logger.totals}

@torch.no_grad()
def evaluate(data_loader, model, device):
    criterion, metric_logger = torch.nn.CrossEntropyLoss(), MetricLogger(delimiter="  ")
    model.eval()  # switch to evaluation mode
    for batch in data_loader:
        images, target = batch[0], batch[-1]
        images = images.to(device, non_blocking=True)
        target = target.to(device, non_blocking=True)
        with torch.amp.autocast('cuda', enabled=torch.cuda.is_available()):
            output = model(images)
            loss = criterion(output, target)
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        metric_logger.update(loss=loss.item())
        metric_logger.update(acc1=acc1.item(), acc5=acc5.item(), n=images.shape[0])
    print('* ' + str(metric_logger))
    return {k: metric_logger.global_avg(k) for k in metric_logger.totals}

class ImageFolder(torch.utils.data.Dataset):  # torchvision's, over .npy images, with the transforms folded in
    def __init__(self, root, size, train):
        self.classes = sorted(os.listdir(root))
        self.samples = [(os.path.join(root, c, f), i) for i, c in enumerate(self.classes)
                        for f in sorted(os.listdir(os.path.join(root, c)))]
        self.size, self.train = size, train
    def __len__(self):
        return len(self.samples)
    def __getitem__(self, index):
        img = torch.from_numpy(np.load(self.samples[index][0])).permute(2, 0, 1).float() / 255.
        if self.train:  # RandomResizedCrop (square) + RandomHorizontalFlip
            s = int(torch.randint(img.shape[1] // 2, img.shape[1] + 1, (1,)))
            i, j = [int(v) for v in torch.randint(0, img.shape[1] - s + 1, (2,))]
            img = img[:, i:i + s, j:j + s].flip(-1) if torch.rand(1) < 0.5 else img[:, i:i + s, j:j + s]
        img = F.interpolate(img[None], size=(self.size, self.size), mode='bicubic', align_corners=False)[0]
        mean, std = torch.tensor([[[0.485]], [[0.456]], [[0.406]]]), torch.tensor([[[0.229]], [[0.224]], [[0.225]]])
        return (img - mean) / std, self.samples[index][1]

def get_args_parser():
    parser = argparse.ArgumentParser('MAE pre-training / linear probing', add_help=False)
    for name, default in [('batch_size', 16), ('epochs', 2), ('accum_iter', 1), ('input_size', 32),
                          ('mask_ratio', 0.75), ('weight_decay', 0.05), ('blr', 1.5e-2), ('min_lr', 0.),
                          ('warmup_epochs', 1), ('seed', 0), ('start_epoch', 0), ('num_workers', 0), ('nb_classes', 3)]:
        parser.add_argument('--' + name, default=default, type=type(default))
    for name, default in [('model', 'mae_vit_tiny_patch8'), ('data_path', ''), ('output_dir', ''), ('resume', ''),
                          ('finetune', ''), ('device', 'cuda' if torch.cuda.is_available() else 'cpu')]:
        parser.add_argument('--' + name, default=default, type=str)
    for name in ('norm_pix_loss', 'global_pool', 'eval', 'pin_mem'):
        parser.add_argument('--' + name, action='store_true')
    parser.add_argument('--lr', type=float, default=None)
    return parser

def main_pretrain(args):
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    dataset_train = ImageFolder(os.path.join(args.data_path, 'train'), args.input_size, train=True)
    data_loader_train = torch.utils.data.DataLoader(
        dataset_train, sampler=torch.utils.data.RandomSampler(dataset_train), batch_size=args.batch_size,
        num_workers=args.num_workers, pin_memory=args.pin_mem, drop_last=True)
    model = globals()[args.model](norm_pix_loss=args.norm_pix_loss, img_size=args.input_size)
    model.to(device)
    model_without_ddp = model
    eff_batch_size = args.batch_size * args.accum_iter
    if args.lr is None:  # only base_lr is specified
        args.lr = args.blr * eff_batch_size / 256
    param_groups = add_weight_decay(model_without_ddp, args.weight_decay)  # wd 0 for bias and norm layers
    optimizer = torch.optim.AdamW(param_groups, lr=args.lr, betas=(0.9, 0.95))
    loss_scaler = NativeScalerWithGradNormCount()
    load_model(args=args, model_without_ddp=model_without_ddp, optimizer=optimizer, loss_scaler=loss_scaler)
    for epoch in range(args.start_epoch, args.epochs):
        train_stats = train_one_epoch_pretrain(model, data_loader_train, optimizer, device, epoch, loss_scaler,
                                               args=args)
        if args.output_dir and (epoch % 20 == 0 or epoch + 1 == args.epochs):
            save_model(args=args, model=model, model_without_ddp=model_without_ddp, optimizer=optimizer,
                       loss_scaler=loss_scaler, epoch=epoch)
    return train_stats

def main_linprobe(args):
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    dataset_train = ImageFolder(os.path.join(args.data_path, 'train'), args.input_size, train=True)
    dataset_val = ImageFolder(os.path.join(args.data_path, 'val'), args.input_size, train=False)
    data_loader_train = torch.utils.data.DataLoader(
        dataset_train, sampler=torch.utils.data.RandomSampler(dataset_train), batch_size=args.batch_size,
        num_workers=args.num_workers, pin_memory=args.pin_mem, drop_last=True)
    data_loader_val = torch.utils.data.DataLoader(
        dataset_val, sampler=torch.utils.data.SequentialSampler(dataset_val), batch_size=args.batch_size,
        num_workers=args.num_workers, pin_memory=args.pin_mem, drop_last=False)
    model = globals()[args.model](num_classes=args.nb_classes, global_pool=args.global_pool, img_size=args.input_size)
    if args.finetune and not args.eval:
        checkpoint = torch.load(args.finetune, map_location='cpu', weights_only=False)
        print("Load pre-trained checkpoint from: %s" % os.path.basename(args.finetune))
        checkpoint_model, state_dict = checkpoint['model'], model.state_dict()
        for k in ['head.weight', 'head.bias']:
            if k in checkpoint_model and checkpoint_model[k].shape != state_dict[k].shape:
                del checkpoint_model[k]
        interpolate_pos_embed(model, checkpoint_model)  # interpolate position embedding
        msg = model.load_state_dict(checkpoint_model, strict=False)  # load pre-trained model
        assert set(msg.missing_keys) == ({'head.weight', 'head.bias', 'fc_norm.weight', 'fc_norm.bias'}
                                         if args.global_pool else {'head.weight', 'head.bias'})
        torch.nn.init.trunc_normal_(model.head.weight, std=0.01)  # manually initialize fc layer: following MoCo v3
    # for linear prob only. hack: revise model's head with BN
    model.head = torch.nn.Sequential(torch.nn.BatchNorm1d(model.head.in_features, affine=False, eps=1e-6), model.head)
    for _, p in model.named_parameters():  # freeze all but the head
        p.requires_grad = False
    for _, p in model.head.named_parameters():
        p.requires_grad = True
    model.to(device)
    model_without_ddp = model
    if args.lr is None:  # only base_lr is specified
        args.lr = args.blr * args.batch_size * args.accum_iter / 256
    optimizer = LARS(model_without_ddp.head.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    loss_scaler, criterion = NativeScalerWithGradNormCount(), torch.nn.CrossEntropyLoss()
    load_model(args=args, model_without_ddp=model_without_ddp, optimizer=optimizer, loss_scaler=loss_scaler)
    if args.eval:
        return evaluate(data_loader_val, model, device)
    for epoch in range(args.start_epoch, args.epochs):
        train_one_epoch(model, criterion, data_loader_train, optimizer, device, epoch, loss_scaler, max_norm=None,
                        args=args)
        if args.output_dir:
            save_model(args=args, model=model, model_without_ddp=model_without_ddp, optimizer=optimizer,
                       loss_scaler=loss_scaler, epoch=epoch)
        test_stats = evaluate(data_loader_val, model, device)
    return test_stats

def write_image_folder(root, n_train=64, n_val=32, size=32, classes=3, seed=0):
    rng = np.random.RandomState(seed)
    yy, xx = np.mgrid[0:size, 0:size] / size
    for split, n in (('train', n_train), ('val', n_val)):
        for i in range(n):
            c = i % classes
            os.makedirs(os.path.join(root, split, 'class%d' % c), exist_ok=True)
            img = 0.5 + 0.4 * np.sin(2 * np.pi * ((c + 1) * xx + rng.uniform(0, 1) + (2 - c) * yy))[..., None]
            img = img * np.array([1.0, 0.6 + 0.2 * c, 0.8])[None, None] + 0.05 * rng.randn(size, size, 3)
            np.save(os.path.join(root, split, 'class%d' % c, '%04d.npy' % i),
                    (255 * np.clip(img, 0, 1)).astype(np.uint8))

if __name__ == '__main__':
    tmp = tempfile.mkdtemp(prefix="mae_")
    try:
        data_path, out = os.path.join(tmp, 'imagenet'), os.path.join(tmp, 'output_dir')
        write_image_folder(data_path)
        Path(out).mkdir(parents=True, exist_ok=True)
        parser = argparse.ArgumentParser('MAE', parents=[get_args_parser()])
        common = ['--data_path', data_path, '--output_dir', out]
        main_pretrain(parser.parse_args(common + ['--epochs', '2']))
        stats = main_pretrain(parser.parse_args(common + ['--epochs', '3', '--resume',
                                                          os.path.join(out, 'checkpoint-1.pth')]))
        Path(out, 'linprobe').mkdir()
        test_stats = main_linprobe(parser.parse_args([
            '--data_path', data_path, '--output_dir', os.path.join(out, 'linprobe'), '--model', 'vit_tiny_patch8',
            '--input_size', '40',
            '--finetune', os.path.join(out, 'checkpoint-2.pth'), '--blr', '0.1', '--weight_decay', '0.0']))
        print("done: pre-train loss %.4f, linear-probe acc1 %.1f" % (stats['loss'], test_stats['acc1']))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
