"""Trains DINO (self-distillation with no labels: a ViT student and an EMA teacher, multi-crop views, a centred and
sharpened teacher softmax) on a synthetic image folder, resumes from its checkpoint for one more epoch, then scores
the teacher backbone with the weighted k-NN classifier, as facebookresearch/dino's main_dino.py and eval_knn.py do:
student and teacher (each a `MultiCropWrapper` of backbone and `DINOHead`) are moved to the GPU before the teacher
is loaded from the student, the `DINOLoss` with its ``center`` buffer is moved as a module, the AdamW optimizer is
built from the moved student's parameter groups, every crop of the batch list is moved with ``im.cuda(non_blocking=
True)``, the teacher follows the student by an in-place EMA under ``torch.no_grad()``, `MultiCropWrapper` starts its
output with ``torch.empty(0).to(x[0].device)``, `drop_path` draws its mask with ``device=x.device``, checkpoints
are saved whole and restored with ``torch.load(ckp_path, map_location="cpu")`` into the moved modules (and the
optimizer and GradScaler), the k-NN feature bank is made on the CPU and moved when ``use_cuda``, and the one-hot
retrieval buffer is made with ``.to(train_features.device)``.

Modeled on: facebookresearch/dino, main_dino.py, eval_knn.py, utils.py and vision_transformer.py at commit
7c446df5b9f45747937fb0d72314eb9f7b66930a
(https://github.com/facebookresearch/dino/blob/7c446df5b9f45747937fb0d72314eb9f7b66930a/main_dino.py,
https://github.com/facebookresearch/dino/blob/7c446df5b9f45747937fb0d72314eb9f7b66930a/eval_knn.py,
https://github.com/facebookresearch/dino/blob/7c446df5b9f45747937fb0d72314eb9f7b66930a/utils.py,
https://github.com/facebookresearch/dino/blob/7c446df5b9f45747937fb0d72314eb9f7b66930a/vision_transformer.py).

Kept: `train_dino` (build, move, copy student to teacher, freeze it, loss, param groups, fp16 GradScaler, the
lr/wd/momentum cosine schedules, `restart_from_checkpoint`, epoch loop, save dict), `train_one_epoch` (schedules,
crops moved, teacher on the two global views, finiteness check, `clip_gradients`, `cancel_gradients_last_layer`, EMA
update), `DINOLoss` (buffer ``center``, temperature warm-up, `update_center`), `DINOHead` (weight-normed last layer),
the ViT (`drop_path`, `Attention`, `Block`, `interpolate_pos_encoding` for the small crops), and eval_knn's
`extract_features` (CPU or GPU bank, ``index_copy_``), `knn_classifier` and `load_pretrained_weights`.

Changed to run here: the device is ``cuda:{args.gpu}`` when CUDA is available, else the CPU, and ``.cuda()`` is
``.to(args.device)``; one process, so no process group, DistributedSampler or DDP (the loss's ``all_reduce`` is
skipped without a group, the k-NN ``all_gather`` is left out, ``teacher_without_ddp`` is the teacher); ImageFolder
and the torchvision augmentations are a synthetic in-memory image set and tensor crops (resized crop, flip,
brightness); fp16 only with CUDA; no XCiT, torchvision backbones, MetricLogger or hub download.
Shrunk: 224/96 crops -> 32/16, patch 16 -> 8, ViT-tiny 192x12 -> 48x2, head 2048/256/65536 -> 64/32/128, 2 local
crops, 96 train / 48 val images in 4 classes, batch 16, 2 epochs + 1 resumed, k in (5, 10).
"""
import argparse
import datetime
import json
import math
import os
import sys
import tempfile
import time
from collections import defaultdict
from functools import partial

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def get_world_size():
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def init_distributed_mode(args):
    args.rank, args.world_size = 0, 1
    args.gpu = 0 if torch.cuda.is_available() else None  # launched naively: one GPU, or the CPU
    if args.gpu is not None:
        torch.cuda.set_device(args.gpu)
    args.device = torch.device("cuda", args.gpu) if args.gpu is not None else torch.device("cpu")


def cosine_scheduler(base_value, final_value, epochs, niter_per_ep, warmup_epochs=0, start_warmup_value=0):
    warmup_iters = warmup_epochs * niter_per_ep
    warmup_schedule = np.linspace(start_warmup_value, base_value, warmup_iters)
    iters = np.arange(epochs * niter_per_ep - warmup_iters)
    schedule = final_value + 0.5 * (base_value - final_value) * (1 + np.cos(np.pi * iters / len(iters)))
    schedule = np.concatenate((warmup_schedule, schedule))
    assert len(schedule) == epochs * niter_per_ep
    return schedule


def clip_gradients(model, clip):
    norms = []
    for name, p in model.named_parameters():
        if p.grad is not None:
            param_norm = p.grad.data.norm(2)
            norms.append(param_norm.item())
            clip_coef = clip / (param_norm + 1e-6)
            if clip_coef < 1:
                p.grad.data.mul_(clip_coef)
    return norms


def cancel_gradients_last_layer(epoch, model, freeze_last_layer):
    for n, p in model.named_parameters():
        if epoch < freeze_last_layer and "last_layer" in n:
            p.grad = None


def restart_from_checkpoint(ckp_path, run_variables=None, **kwargs):
    if not os.path.isfile(ckp_path):
        return
    print("Found checkpoint at {}".format(ckp_path))
    checkpoint = torch.load(ckp_path, map_location="cpu", weights_only=False)
    for key, value in kwargs.items():
        if key in checkpoint and value is not None:
            try:
                value.load_state_dict(checkpoint[key], strict=False)
            except TypeError:  # optimizer and GradScaler take no `strict`
                value.load_state_dict(checkpoint[key])
            print("=> loaded '{}' from checkpoint '{}'".format(key, ckp_path))
    for var_name in run_variables or {}:  # re load variable important for the run
        if var_name in checkpoint:
            run_variables[var_name] = checkpoint[var_name]


def load_pretrained_weights(model, pretrained_weights, checkpoint_key):
    state_dict = torch.load(pretrained_weights, map_location="cpu", weights_only=False)
    if checkpoint_key is not None and checkpoint_key in state_dict:
        print(f"Take key {checkpoint_key} in provided checkpoint dict")
        state_dict = state_dict[checkpoint_key]
    state_dict = {k.replace("module.", "").replace("backbone.", ""): v for k, v in state_dict.items()}
    msg = model.load_state_dict(state_dict, strict=False)
    print('Pretrained weights loaded, {} head keys left out'.format(len(msg.unexpected_keys)))


class MultiCropWrapper(nn.Module):
    def __init__(self, backbone, head):
        super(MultiCropWrapper, self).__init__()
        backbone.fc, backbone.head = nn.Identity(), nn.Identity()
        self.backbone = backbone
        self.head = head

    def forward(self, x):
        if not isinstance(x, list):
            x = [x]
        idx_crops = torch.cumsum(torch.unique_consecutive(
            torch.tensor([inp.shape[-1] for inp in x]), return_counts=True)[1], 0)
        start_idx, output = 0, torch.empty(0).to(x[0].device)
        for end_idx in idx_crops:
            output = torch.cat((output, self.backbone(torch.cat(x[start_idx: end_idx]))))
            start_idx = end_idx
        return self.head(output)


def get_params_groups(model):
    regularized, not_regularized = [], []
    for name, param in model.named_parameters():
        if param.requires_grad:  # we do not regularize biases nor Norm parameters
            (not_regularized if name.endswith(".bias") or len(param.shape) == 1 else regularized).append(param)
    return [{'params': regularized}, {'params': not_regularized, 'weight_decay': 0.}]


def drop_path(x, drop_prob: float = 0., training: bool = False):
    if drop_prob == 0. or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = keep_prob + torch.rand(shape, dtype=x.dtype, device=x.device)
    random_tensor.floor_()
    return x.div(keep_prob) * random_tensor


class Attention(nn.Module):
    def __init__(self, dim, num_heads=8, qkv_bias=False):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x), attn


class Block(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio=4., qkv_bias=False, drop_path=0., norm_layer=nn.LayerNorm):
        super().__init__()
        self.norm1 = norm_layer(dim)
        self.attn = Attention(dim, num_heads=num_heads, qkv_bias=qkv_bias)
        self.drop_prob = drop_path
        self.norm2 = norm_layer(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, int(dim * mlp_ratio)), nn.GELU(), nn.Linear(int(dim * mlp_ratio), dim))

    def forward(self, x):
        y, attn = self.attn(self.norm1(x))
        x = x + drop_path(y, self.drop_prob, self.training)
        x = x + drop_path(self.mlp(self.norm2(x)), self.drop_prob, self.training)
        return x


class VisionTransformer(nn.Module):
    def __init__(self, img_size=[224], patch_size=16, in_chans=3, num_classes=0, embed_dim=768, depth=12,
                 num_heads=12, mlp_ratio=4., qkv_bias=False, drop_path_rate=0., norm_layer=nn.LayerNorm, **kwargs):
        super().__init__()
        self.num_features = self.embed_dim = embed_dim
        self.patch_size = patch_size
        self.patch_embed = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)
        num_patches = (img_size[0] // patch_size) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, embed_dim))
        dpr = [x.item() for x in torch.linspace(0, drop_path_rate, depth)]
        self.blocks = nn.ModuleList([
            Block(dim=embed_dim, num_heads=num_heads, mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, drop_path=dpr[i],
                  norm_layer=norm_layer) for i in range(depth)])
        self.norm = norm_layer(embed_dim)
        self.head = nn.Identity()
        nn.init.trunc_normal_(self.pos_embed, std=.02)
        nn.init.trunc_normal_(self.cls_token, std=.02)

    def interpolate_pos_encoding(self, x, w, h):
        npatch = x.shape[1] - 1
        N = self.pos_embed.shape[1] - 1
        if npatch == N and w == h:
            return self.pos_embed
        class_pos_embed = self.pos_embed[:, 0]
        patch_pos_embed = self.pos_embed[:, 1:]
        dim = x.shape[-1]
        w0, h0 = w // self.patch_size + 0.1, h // self.patch_size + 0.1
        patch_pos_embed = nn.functional.interpolate(
            patch_pos_embed.reshape(1, int(math.sqrt(N)), int(math.sqrt(N)), dim).permute(0, 3, 1, 2),
            scale_factor=(w0 / math.sqrt(N), h0 / math.sqrt(N)), mode='bicubic')
        assert int(w0) == patch_pos_embed.shape[-2] and int(h0) == patch_pos_embed.shape[-1]
        patch_pos_embed = patch_pos_embed.permute(0, 2, 3, 1).view(1, -1, dim)
        return torch.cat((class_pos_embed.unsqueeze(0), patch_pos_embed), dim=1)

    def prepare_tokens(self, x):
        B, nc, w, h = x.shape
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        cls_tokens = self.cls_token.expand(B, -1, -1)
        x = torch.cat((cls_tokens, x), dim=1)
        return x + self.interpolate_pos_encoding(x, w, h)

    def forward(self, x):
        x = self.prepare_tokens(x)
        for blk in self.blocks:
            x = blk(x)
        x = self.norm(x)
        return x[:, 0]


def vit_tiny(patch_size=16, **kwargs):
    return VisionTransformer(patch_size=patch_size, embed_dim=48, depth=2, num_heads=3, mlp_ratio=2,
                             qkv_bias=True, norm_layer=partial(nn.LayerNorm, eps=1e-6), **kwargs)


class DINOHead(nn.Module):
    def __init__(self, in_dim, out_dim, use_bn=False, norm_last_layer=True, hidden_dim=64, bottleneck_dim=32):
        super().__init__()
        norm = (lambda: nn.BatchNorm1d(hidden_dim)) if use_bn else nn.Identity
        self.mlp = nn.Sequential(nn.Linear(in_dim, hidden_dim), norm(), nn.GELU(), nn.Linear(hidden_dim, hidden_dim),
                                 norm(), nn.GELU(), nn.Linear(hidden_dim, bottleneck_dim))
        self.last_layer = nn.utils.weight_norm(nn.Linear(bottleneck_dim, out_dim, bias=False))
        self.last_layer.weight_g.data.fill_(1)
        if norm_last_layer:
            self.last_layer.weight_g.requires_grad = False

    def forward(self, x):
        x = self.mlp(x)
        x = nn.functional.normalize(x, dim=-1, p=2)
        return self.last_layer(x)


class SyntheticImageFolder(torch.utils.data.Dataset):
    """Stands in for ImageFolder: each class is a coloured oriented stripe pattern plus noise."""

    def __init__(self, n, num_classes, size, seed, transform=None, return_index=False):
        rng = np.random.RandomState(seed)
        self.samples = [(i, i % num_classes) for i in range(n)]
        c = np.arange(n)[:, None, None, None] % num_classes
        yy, xx = np.mgrid[0:size, 0:size] / size
        angle, phase = np.pi * c / num_classes, rng.rand(n, 1, 1, 1) * 6.28
        wave = np.sin(2 * np.pi * 3 * (np.cos(angle) * xx + np.sin(angle) * yy) + phase)
        colour = np.stack([(c + 1) % 3, (c + 2) % 3, c % 3], 1)[..., 0] / 2.0
        self.images = (0.5 + 0.3 * wave * colour + 0.25 * rng.randn(n, 3, size, size)).astype(np.float32)
        self.transform, self.return_index = transform, return_index

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        img = self.transform(torch.from_numpy(self.images[idx]))
        return img, (idx if self.return_index else self.samples[idx][1])  # ReturnIndexDataset for the k-NN


def normalize(img):
    mean = torch.tensor((0.485, 0.456, 0.406)).view(3, 1, 1)
    return (img - mean) / torch.tensor((0.229, 0.224, 0.225)).view(3, 1, 1)


class DataAugmentationDINO(object):
    def __init__(self, global_crops_scale, local_crops_scale, local_crops_number, global_size=32, local_size=16):
        self.global_crops_scale, self.local_crops_scale = global_crops_scale, local_crops_scale
        self.local_crops_number, self.global_size, self.local_size = local_crops_number, global_size, local_size

    def crop(self, img, size, scale):  # RandomResizedCrop + flip_and_color_jitter + normalize
        _, h, w = img.shape
        ch = max(4, int(round(math.sqrt(float(np.random.uniform(*scale))) * h)))
        top, left = np.random.randint(0, h - ch + 1), np.random.randint(0, w - ch + 1)
        img = F.interpolate(img[None, :, top:top + ch, left:left + ch], size=(size, size), mode='bilinear')[0]
        if np.random.rand() < 0.5:
            img = img.flip(-1)
        if np.random.rand() < 0.8:
            img = img * float(np.random.uniform(0.6, 1.4))
        return normalize(img.clamp(0, 1))

    def __call__(self, image):
        crops = [self.crop(image, self.global_size, self.global_crops_scale) for _ in range(2)]
        crops += [self.crop(image, self.local_size, self.local_crops_scale) for _ in range(self.local_crops_number)]
        return crops


def train_dino(args):
    init_distributed_mode(args)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.backends.cudnn.benchmark = True

    transform = DataAugmentationDINO(args.global_crops_scale, args.local_crops_scale, args.local_crops_number)
    dataset = SyntheticImageFolder(96, 4, 40, seed=1, transform=transform)
    data_loader = torch.utils.data.DataLoader(dataset, shuffle=True, batch_size=args.batch_size_per_gpu,
                                              num_workers=args.num_workers, pin_memory=True, drop_last=True)
    student = vit_tiny(patch_size=args.patch_size, img_size=[32], drop_path_rate=args.drop_path_rate)
    teacher = vit_tiny(patch_size=args.patch_size, img_size=[32])
    student = MultiCropWrapper(student, DINOHead(student.embed_dim, args.out_dim, use_bn=args.use_bn_in_head,
                                                 norm_last_layer=args.norm_last_layer))
    teacher = MultiCropWrapper(teacher, DINOHead(teacher.embed_dim, args.out_dim, args.use_bn_in_head))
    # move networks to gpu
    student, teacher = student.to(args.device), teacher.to(args.device)
    teacher_without_ddp = teacher
    teacher_without_ddp.load_state_dict(student.state_dict())
    for p in teacher.parameters():
        p.requires_grad = False
    print("Student and Teacher are built: they are both vit_tiny network.")
    dino_loss = DINOLoss(args.out_dim, args.local_crops_number + 2, args.warmup_teacher_temp, args.teacher_temp,
                         args.warmup_teacher_temp_epochs, args.epochs).to(args.device)

    params_groups = get_params_groups(student)
    optimizer = torch.optim.AdamW(params_groups)
    fp16_scaler = torch.amp.GradScaler("cuda") if args.use_fp16 else None  # for mixed precision training

    lr_schedule = cosine_scheduler(args.lr * (args.batch_size_per_gpu * get_world_size()) / 256., args.min_lr,
                                   args.epochs, len(data_loader), warmup_epochs=args.warmup_epochs)
    wd_schedule = cosine_scheduler(args.weight_decay, args.weight_decay_end, args.epochs, len(data_loader))
    momentum_schedule = cosine_scheduler(args.momentum_teacher, 1, args.epochs, len(data_loader))
    print("Loss, optimizer and schedulers ready.")
    to_restore = {"epoch": 0}
    restart_from_checkpoint(os.path.join(args.output_dir, "checkpoint.pth"), run_variables=to_restore,
                            student=student, teacher=teacher, optimizer=optimizer, fp16_scaler=fp16_scaler,
                            dino_loss=dino_loss)
    start_epoch = to_restore["epoch"]
    start_time = time.time()
    print("Starting DINO training !")
    for epoch in range(start_epoch, args.epochs):
        train_stats = train_one_epoch(student, teacher, teacher_without_ddp, dino_loss, data_loader, optimizer,
                                      lr_schedule, wd_schedule, momentum_schedule, epoch, fp16_scaler, args)
        save_dict = {'student': student.state_dict(), 'teacher': teacher.state_dict(),
                     'optimizer': optimizer.state_dict(), 'epoch': epoch + 1, 'args': args,
                     'dino_loss': dino_loss.state_dict()}
        if fp16_scaler is not None:
            save_dict['fp16_scaler'] = fp16_scaler.state_dict()
        torch.save(save_dict, os.path.join(args.output_dir, 'checkpoint.pth'))
        print(json.dumps({**{f'train_{k}': round(v, 6) for k, v in train_stats.items()}, 'epoch': epoch}))
    total_time = time.time() - start_time
    print('Training time {}'.format(str(datetime.timedelta(seconds=int(total_time)))))


def train_one_epoch(student, teacher, teacher_without_ddp, dino_loss, data_loader, optimizer, lr_schedule,
                    wd_schedule, momentum_schedule, epoch, fp16_scaler, args):
    stats = defaultdict(list)
    for it, (images, _) in enumerate(data_loader):
        it = len(data_loader) * epoch + it  # global training iteration
        for i, param_group in enumerate(optimizer.param_groups):
            param_group["lr"] = lr_schedule[it]
            if i == 0:
                param_group["weight_decay"] = wd_schedule[it]

        # move images to gpu
        images = [im.to(args.device, non_blocking=True) for im in images]
        with torch.autocast(args.device.type, enabled=fp16_scaler is not None):
            teacher_output = teacher(images[:2])  # only the 2 global views pass through the teacher
            student_output = student(images)
            loss = dino_loss(student_output, teacher_output, epoch)

        if not math.isfinite(loss.item()):
            print("Loss is {}, stopping training".format(loss.item()))
            sys.exit(1)

        optimizer.zero_grad()
        param_norms = None
        if fp16_scaler is None:
            loss.backward()
            if args.clip_grad:
                param_norms = clip_gradients(student, args.clip_grad)
            cancel_gradients_last_layer(epoch, student, args.freeze_last_layer)
            optimizer.step()
        else:
            fp16_scaler.scale(loss).backward()
            if args.clip_grad:
                fp16_scaler.unscale_(optimizer)
                param_norms = clip_gradients(student, args.clip_grad)
            cancel_gradients_last_layer(epoch, student, args.freeze_last_layer)
            fp16_scaler.step(optimizer)
            fp16_scaler.update()

        # EMA update for the teacher
        with torch.no_grad():
            m = momentum_schedule[it]
            for param_q, param_k in zip(student.parameters(), teacher_without_ddp.parameters()):
                param_k.data.mul_(m).add_((1 - m) * param_q.detach().data)

        if torch.cuda.is_available():
            torch.cuda.synchronize()
        stats["loss"].append(loss.item())
        stats["lr"].append(optimizer.param_groups[0]["lr"])
        stats["grad_norm"].append(float(np.mean(param_norms)) if param_norms else 0.0)
    return {k: float(np.mean(v)) for k, v in stats.items()}


class DINOLoss(nn.Module):
    def __init__(self, out_dim, ncrops, warmup_teacher_temp, teacher_temp, warmup_teacher_temp_epochs, nepochs,
                 student_temp=0.1, center_momentum=0.9):
        super().__init__()
        self.student_temp, self.center_momentum, self.ncrops = student_temp, center_momentum, ncrops
        self.register_buffer("center", torch.zeros(1, out_dim))
        self.teacher_temp_schedule = np.concatenate((
            np.linspace(warmup_teacher_temp, teacher_temp, warmup_teacher_temp_epochs),
            np.ones(nepochs - warmup_teacher_temp_epochs) * teacher_temp
        ))

    def forward(self, student_output, teacher_output, epoch):
        student_out = (student_output / self.student_temp).chunk(self.ncrops)
        # teacher centering and sharpening
        temp = self.teacher_temp_schedule[epoch]
        teacher_out = F.softmax((teacher_output - self.center) / temp, dim=-1).detach().chunk(2)
        total_loss, n_loss_terms = 0, 0
        for iq, q in enumerate(teacher_out):
            for v in range(len(student_out)):
                if v == iq:
                    continue
                loss = torch.sum(-q * F.log_softmax(student_out[v], dim=-1), dim=-1)
                total_loss += loss.mean()
                n_loss_terms += 1
        total_loss /= n_loss_terms
        self.update_center(teacher_output)
        return total_loss

    @torch.no_grad()
    def update_center(self, teacher_output):
        batch_center = torch.sum(teacher_output, dim=0, keepdim=True)
        if get_world_size() > 1:
            dist.all_reduce(batch_center)
        batch_center = batch_center / (len(teacher_output) * get_world_size())
        self.center = self.center * self.center_momentum + batch_center * (1 - self.center_momentum)


def extract_feature_pipeline(args):
    transform = lambda img: normalize(F.interpolate(img[None], size=(32, 32), mode='bilinear')[0])
    dataset_train = SyntheticImageFolder(96, 4, 40, seed=1, transform=transform, return_index=True)
    dataset_val = SyntheticImageFolder(48, 4, 40, seed=2, transform=transform, return_index=True)
    data_loader_train = torch.utils.data.DataLoader(dataset_train, batch_size=args.batch_size_per_gpu, pin_memory=True)
    data_loader_val = torch.utils.data.DataLoader(dataset_val, batch_size=args.batch_size_per_gpu, pin_memory=True)

    model = vit_tiny(patch_size=args.patch_size, img_size=[32])
    model.to(args.device)
    load_pretrained_weights(model, args.pretrained_weights, args.checkpoint_key)
    model.eval()
    train_features = nn.functional.normalize(extract_features(model, data_loader_train, args.device, args.use_cuda))
    test_features = nn.functional.normalize(extract_features(model, data_loader_val, args.device, args.use_cuda))
    train_labels = torch.tensor([s[-1] for s in dataset_train.samples]).long()
    test_labels = torch.tensor([s[-1] for s in dataset_val.samples]).long()
    return train_features, test_features, train_labels, test_labels


@torch.no_grad()
def extract_features(model, data_loader, device, use_cuda=True):
    features = None
    for samples, index in data_loader:
        samples = samples.to(device, non_blocking=True)
        index = index.to(device, non_blocking=True)
        feats = model(samples).clone()
        if features is None:
            features = torch.zeros(len(data_loader.dataset), feats.shape[-1])
            if use_cuda:
                features = features.to(device, non_blocking=True)
            print(f"Storing features into tensor of shape {features.shape}")
        if use_cuda:  # update storage feature matrix
            features.index_copy_(0, index, feats)
        else:
            features.index_copy_(0, index.cpu(), feats.cpu())
    return features


@torch.no_grad()
def knn_classifier(train_features, train_labels, test_features, test_labels, k, T, num_classes=4):
    top1, total = 0.0, 0
    train_features = train_features.t()
    num_test_images, num_chunks = test_labels.shape[0], 4
    imgs_per_chunk = num_test_images // num_chunks
    retrieval_one_hot = torch.zeros(k, num_classes).to(train_features.device)
    for idx in range(0, num_test_images, imgs_per_chunk):
        features, targets = test_features[idx: idx + imgs_per_chunk], test_labels[idx: idx + imgs_per_chunk]
        batch_size = targets.shape[0]
        distances, indices = torch.mm(features, train_features).topk(k, largest=True, sorted=True)
        candidates = train_labels.view(1, -1).expand(batch_size, -1)
        retrieved_neighbors = torch.gather(candidates, 1, indices)
        retrieval_one_hot.resize_(batch_size * k, num_classes).zero_()
        retrieval_one_hot.scatter_(1, retrieved_neighbors.view(-1, 1), 1)
        distances_transform = distances.clone().div_(T).exp_()
        probs = torch.sum(torch.mul(retrieval_one_hot.view(batch_size, -1, num_classes),
                                    distances_transform.view(batch_size, -1, 1)), 1)
        _, predictions = probs.sort(1, True)
        correct = predictions.eq(targets.data.view(-1, 1))
        top1, total = top1 + correct.narrow(1, 0, 1).sum().item(), total + targets.size(0)
    return top1 * 100.0 / total


def eval_knn(args):
    train_features, test_features, train_labels, test_labels = extract_feature_pipeline(args)
    if args.use_cuda:
        train_features = train_features.to(args.device)
        test_features = test_features.to(args.device)
        train_labels = train_labels.to(args.device)
        test_labels = test_labels.to(args.device)
    results = {}
    for k in args.nb_knn:
        top1 = knn_classifier(train_features, train_labels, test_features, test_labels, k, args.temperature)
        print(f"{k}-NN classifier result: Top1: {top1}")
        results[k] = top1
    return results


def get_args():
    return argparse.Namespace(
        patch_size=8, out_dim=128, norm_last_layer=True, momentum_teacher=0.996, use_bn_in_head=False,
        warmup_teacher_temp=0.04, teacher_temp=0.04, warmup_teacher_temp_epochs=1, use_fp16=torch.cuda.is_available(),
        weight_decay=0.04, weight_decay_end=0.4, clip_grad=3.0, batch_size_per_gpu=16, epochs=2, freeze_last_layer=1,
        lr=0.0005, warmup_epochs=1, min_lr=1e-6, drop_path_rate=0.1, global_crops_scale=(0.4, 1.),
        local_crops_number=2, local_crops_scale=(0.05, 0.4), output_dir=".", seed=0, num_workers=0, nb_knn=[5, 10],
        temperature=0.07, use_cuda=torch.cuda.is_available(), checkpoint_key="teacher")


if __name__ == '__main__':
    args = get_args()  # main_dino.py's and eval_knn.py's argparse defaults, shrunk
    with tempfile.TemporaryDirectory() as tmp:
        args.output_dir = tmp
        train_dino(args)
        args.epochs += 1  # resume from checkpoint.pth for one more epoch
        train_dino(args)
        args.pretrained_weights = os.path.join(args.output_dir, "checkpoint.pth")
        results = eval_knn(args)
    print("done: 5-NN top1 {:.1f}".format(results[5]))
