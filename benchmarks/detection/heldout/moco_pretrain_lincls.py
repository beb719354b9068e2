"""Pre-trains a MoCo v2 contrastive encoder (query encoder, momentum key encoder, a queue of negative keys kept as a
buffer, shuffling BatchNorm across the process group) on two augmented views of synthetic images under
DistributedDataParallel in a one-process group, checkpointing every epoch and resuming once; then trains a linear
classifier on the frozen features (main_lincls.py), with its sanity check that nothing but the classifier changed,
and re-evaluates the best linear checkpoint with --resume --evaluate.

Modeled on: facebookresearch/moco, main_moco.py, moco/builder.py, moco/loader.py and main_lincls.py
(https://github.com/facebookresearch/moco/blob/7397dfe146c7ca6bbb58e9c382498069178ba764/main_moco.py,
https://github.com/facebookresearch/moco/blob/7397dfe146c7ca6bbb58e9c382498069178ba764/moco/builder.py,
https://github.com/facebookresearch/moco/blob/7397dfe146c7ca6bbb58e9c382498069178ba764/moco/loader.py,
https://github.com/facebookresearch/moco/blob/7397dfe146c7ca6bbb58e9c382498069178ba764/main_lincls.py).

Kept: builder.py whole: the key encoder copied from the query encoder with `param_k.data.copy_(param_q.data)` and
`requires_grad = False`; `register_buffer("queue", torch.randn(dim, K))` followed by `self.queue =
nn.functional.normalize(self.queue, dim=0)` and the long `queue_ptr` buffer; the momentum update through `.data`;
`_dequeue_and_enqueue` with `int(self.queue_ptr)` and `self.queue[:, ptr:ptr + batch_size] = keys.T`;
`_batch_shuffle_ddp` / `_batch_unshuffle_ddp` with `concat_all_gather`, a `torch.randperm(...).cuda()` index,
`torch.distributed.broadcast(idx_shuffle, src=0)` and `torch.argsort`; the queue used as
`self.queue.clone().detach()`; `labels = torch.zeros(logits.shape[0], dtype=torch.long).cuda()`; the mlp hack on
`encoder_q.fc`. main_moco.py: `args.distributed = args.world_size > 1 or args.multiprocessing_distributed`,
`dist.init_process_group(...)`, `torch.cuda.set_device(args.gpu)`, `model.cuda(args.gpu)`, the per-GPU batch
division and `DistributedDataParallel(model, device_ids=[args.gpu])`; `nn.CrossEntropyLoss().cuda(args.gpu)`; SGD
made after the move; the resume path `torch.load(args.resume, map_location="cuda:{}".format(args.gpu))` then
`model.load_state_dict` and `optimizer.load_state_dict`; `cudnn.benchmark = True`; `DistributedSampler` with
`set_epoch`, `pin_memory=True`, `drop_last=True`; `TwoCropsTransform`; `images[0].cuda(args.gpu,
non_blocking=True)`; the cosine `adjust_learning_rate`; `accuracy` building device `correct_k.mul_(100.0 /
batch_size)` tensors that the `AverageMeter`s sum; `save_checkpoint` of `model.state_dict()` (DDP `module.` keys) and
`optimizer.state_dict()`. main_lincls.py: all but fc frozen, `fc.weight.data.normal_`; the pre-trained checkpoint
read with `map_location="cpu"` and its `module.encoder_q.` keys renamed *before* the model moves, `strict=False` with
the missing-keys assert; the single-GPU path `torch.cuda.set_device(args.gpu); model = model.cuda(args.gpu)`
(else `torch.nn.DataParallel(model).cuda()`); `train` keeping `model.eval()` for frozen BN; `target.cuda(args.gpu,
non_blocking=True)` outside the `if args.gpu is not None:`; `validate` under `torch.no_grad()`; the global
`best_acc1 = 0` that becomes a device tensor (`top1.avg`), saved in the checkpoint and on resume moved with
`best_acc1.to(args.gpu)`; `shutil.copyfile` to `model_best.pth.tar`; `sanity_check` comparing `state_dict[k].cpu()`
with the CPU-loaded pre-trained weights; the `warnings.warn` for a seed and for a chosen GPU.
Changed to run in one process: main_moco runs as the README's single-node `--world-size 1 --rank 0
--multiprocessing-distributed`, but the one worker that `mp.spawn(main_worker, nprocs=1, ...)` would start is called
in this process as `main_worker(0, 1, args)` (`assert ngpus_per_node == 1`); main_lincls takes its single-GPU
`--gpu 0` path. Changed to run without a GPU too: with no CUDA, `ngpus_per_node` is 1 (one CPU process stands in
for the GPU) and main_worker's `args.gpu` is None; lincls gets `args.gpu = 0 if torch.cuda.is_available() else
None`; every
`.cuda(...)` call that the author makes unconditionally (`model.cuda()` on the gpu-None DDP path, the criteria, the
lincls targets, `DataParallel(...).cuda()`, and builder.py's `randperm(...).cuda()` and `zeros(...).cuda()`) is under
`if args.cuda:` (or the builder's `use_cuda`), both set from `torch.cuda.is_available()`; the process group is the
one-process `gloo` group on a `file://` URL in a temporary folder (the author's default backend is nccl, which a
CPU machine lacks; gloo handles CUDA tensors for these collectives), and `dist.destroy_process_group()` ends
main_worker so that the resumed run can start a new group; `parser.parse_args()` becomes namespaces of the same
options; checkpoints go to a temporary folder; the two calls of main_moco (the second with `--resume`) and the two
of main_lincls (the second with `--resume model_best.pth.tar --evaluate`) run in sequence in one process.
Changed for no torchvision: `models.__dict__[args.arch]` is a tiny ResNet-like `resnet_tiny(num_classes=...)` with an
`fc`; ImageFolder and the PIL augmentations are a tensor dataset with random crops, flips, brightness jitter,
grayscale and noise.
Changed where the 2020 code no longer runs: `accuracy`'s `correct[:k].view(-1)` on the transposed (non-contiguous)
`correct` is `.reshape(-1)`, the usual fix. Added: after pre-training, a print of the queue pointer and the mean
norm of the queue's columns.

Shrunk: 3x16x16 images from 8 classes (a fixed random colour pattern per class, shifted and noised), 256 training
and 128 validation images; moco_dim 32, moco_k 256, moco_m 0.99, moco_t 0.2, mlp and aug_plus on (MoCo v2), cos;
batch 32; pre-training 2 epochs then 1 more on resume; lincls lr 3.0 (author's 30.0 is for ImageNet features), 3
epochs; print_freq 4.
"""
import argparse
import builtins
import math
import os
import random
import shutil
import tempfile
import time
import types
import warnings

import torch
import torch.backends.cudnn as cudnn
import torch.distributed as dist
import torch.nn as nn
import torch.nn.parallel
import torch.optim
import torch.utils.data
import torch.utils.data.distributed

use_cuda = torch.cuda.is_available()


# ----------------------------------------------------------------------------- moco/builder.py

class MoCo(nn.Module):
    """
    Build a MoCo model with: a query encoder, a key encoder, and a queue
    https://arxiv.org/abs/1911.05722
    """

    def __init__(self, base_encoder, dim=128, K=65536, m=0.999, T=0.07, mlp=False):
        """
        dim: feature dimension (default: 128)
        K: queue size; number of negative keys (default: 65536)
        m: moco momentum of updating key encoder (default: 0.999)
        T: softmax temperature (default: 0.07)
        """
        super(MoCo, self).__init__()

        self.K = K
        self.m = m
        self.T = T

        # create the encoders
        # num_classes is the output fc dimension
        self.encoder_q = base_encoder(num_classes=dim)
        self.encoder_k = base_encoder(num_classes=dim)

        if mlp:  # hack: brute-force replacement
            dim_mlp = self.encoder_q.fc.weight.shape[1]
            self.encoder_q.fc = nn.Sequential(
                nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_q.fc
            )
            self.encoder_k.fc = nn.Sequential(
                nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_k.fc
            )

        for param_q, param_k in zip(
            self.encoder_q.parameters(), self.encoder_k.parameters()
        ):
            param_k.data.copy_(param_q.data)  # initialize
            param_k.requires_grad = False  # not update by gradient

        # create the queue
        self.register_buffer("queue", torch.randn(dim, K))
        self.queue = nn.functional.normalize(self.queue, dim=0)

        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        """
        Momentum update of the key encoder
        """
        for param_q, param_k in zip(
            self.encoder_q.parameters(), self.encoder_k.parameters()
        ):
            param_k.data = param_k.data * self.m + param_q.data * (1.0 - self.m)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys):
        # gather keys before updating queue
        keys = concat_all_gather(keys)

        batch_size = keys.shape[0]

        ptr = int(self.queue_ptr)
        assert self.K % batch_size == 0  # for simplicity

        # replace the keys at ptr (dequeue and enqueue)
        self.queue[:, ptr : ptr + batch_size] = keys.T
        ptr = (ptr + batch_size) % self.K  # move pointer

        self.queue_ptr[0] = ptr

    @torch.no_grad()
    def _batch_shuffle_ddp(self, x):
        """
        Batch shuffle, for making use of BatchNorm.
        *** Only support DistributedDataParallel (DDP) model. ***
        """
        # gather from all gpus
        batch_size_this = x.shape[0]
        x_gather = concat_all_gather(x)
        batch_size_all = x_gather.shape[0]

        num_gpus = batch_size_all // batch_size_this

        # random shuffle index
        idx_shuffle = torch.randperm(batch_size_all)
        if use_cuda:
            idx_shuffle = idx_shuffle.cuda()

        # broadcast to all gpus
        torch.distributed.broadcast(idx_shuffle, src=0)

        # index for restoring
        idx_unshuffle = torch.argsort(idx_shuffle)

        # shuffled index for this gpu
        gpu_idx = torch.distributed.get_rank()
        idx_this = idx_shuffle.view(num_gpus, -1)[gpu_idx]

        return x_gather[idx_this], idx_unshuffle

    @torch.no_grad()
    def _batch_unshuffle_ddp(self, x, idx_unshuffle):
        """
        Undo batch shuffle.
        *** Only support DistributedDataParallel (DDP) model. ***
        """
        # gather from all gpus
        batch_size_this = x.shape[0]
        x_gather = concat_all_gather(x)
        batch_size_all = x_gather.shape[0]

        num_gpus = batch_size_all // batch_size_this

        # restored index for this gpu
        gpu_idx = torch.distributed.get_rank()
        idx_this = idx_unshuffle.view(num_gpus, -1)[gpu_idx]

        return x_gather[idx_this]

    def forward(self, im_q, im_k):
        """
        Input:
            im_q: a batch of query images
            im_k: a batch of key images
        Output:
            logits, targets
        """

        # compute query features
        q = self.encoder_q(im_q)  # queries: NxC
        q = nn.functional.normalize(q, dim=1)

        # compute key features
        with torch.no_grad():  # no gradient to keys
            self._momentum_update_key_encoder()  # update the key encoder

            # shuffle for making use of BN
            im_k, idx_unshuffle = self._batch_shuffle_ddp(im_k)

            k = self.encoder_k(im_k)  # keys: NxC
            k = nn.functional.normalize(k, dim=1)

            # undo shuffle
            k = self._batch_unshuffle_ddp(k, idx_unshuffle)

        # compute logits
        # Einstein sum is more intuitive
        # positive logits: Nx1
        l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
        # negative logits: NxK
        l_neg = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])

        # logits: Nx(1+K)
        logits = torch.cat([l_pos, l_neg], dim=1)

        # apply temperature
        logits /= self.T

        # labels: positive key indicators
        labels = torch.zeros(logits.shape[0], dtype=torch.long)
        if use_cuda:
            labels = labels.cuda()

        # dequeue and enqueue
        self._dequeue_and_enqueue(k)

        return logits, labels


# utils
@torch.no_grad()
def concat_all_gather(tensor):
    """
    Performs all_gather operation on the provided tensors.
    *** Warning ***: torch.distributed.all_gather has no gradient.
    """
    tensors_gather = [
        torch.ones_like(tensor) for _ in range(torch.distributed.get_world_size())
    ]
    torch.distributed.all_gather(tensors_gather, tensor, async_op=False)

    output = torch.cat(tensors_gather, dim=0)
    return output


# ----------------------------------------------------------------------------- stand-ins for torchvision

class TinyResNet(nn.Module):
    def __init__(self, num_classes=1000):
        super(TinyResNet, self).__init__()
        self.conv1 = nn.Conv2d(3, 16, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32),
                                    nn.ReLU(inplace=True))
        self.layer2 = nn.Sequential(nn.Conv2d(32, 64, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(64),
                                    nn.ReLU(inplace=True))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def resnet_tiny(num_classes=1000):
    return TinyResNet(num_classes=num_classes)


models = types.SimpleNamespace(resnet_tiny=resnet_tiny)


class SyntheticImageFolder(torch.utils.data.Dataset):
    """ImageFolder stand-in: 8 classes, each a fixed random 3x20x20 colour pattern; samples are shifted, noised
    copies, handed to `transform` as a CPU tensor in [0, 1]."""

    def __init__(self, n, seed, transform):
        g = torch.Generator().manual_seed(1234)
        self.patterns = torch.rand(8, 3, 5, 5, generator=g).repeat_interleave(4, 2).repeat_interleave(4, 3)
        g = torch.Generator().manual_seed(seed)
        self.targets = torch.randint(0, 8, (n,), generator=g).tolist()
        self.shifts = torch.randint(0, 5, (n, 2), generator=g).tolist()
        self.noise = torch.rand(n, 3, 20, 20, generator=g) * 0.2
        self.transform = transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        img = (self.patterns[self.targets[index]] * 0.8 + self.noise[index]).clamp(0, 1)
        dy, dx = self.shifts[index]
        img = torch.roll(img, shifts=(dy, dx), dims=(1, 2))
        return self.transform(img), self.targets[index]


class Augment(object):
    """RandomResizedCrop/ColorJitter/RandomGrayscale/RandomHorizontalFlip/Normalize, on tensors."""

    def __init__(self, size=16, train=True):
        self.size = size
        self.train = train
        self.mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
        self.std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)

    def __call__(self, img):
        if self.train:
            top, left = random.randint(0, 4), random.randint(0, 4)
            img = img[:, top:top + self.size, left:left + self.size]
            if random.random() < 0.8:
                img = (img * random.uniform(0.6, 1.4)).clamp(0, 1)
            if random.random() < 0.2:
                img = img.mean(0, keepdim=True).expand(3, -1, -1)
            if random.random() < 0.5:
                img = img.flip(2)
        else:
            img = img[:, 2:2 + self.size, 2:2 + self.size]
        return (img - self.mean) / self.std


# ----------------------------------------------------------------------------- moco/loader.py

class TwoCropsTransform:
    """Take two random crops of one image as the query and key."""

    def __init__(self, base_transform):
        self.base_transform = base_transform

    def __call__(self, x):
        q = self.base_transform(x)
        k = self.base_transform(x)
        return [q, k]


# ----------------------------------------------------------------------------- shared helpers (both scripts)

def save_checkpoint(state, is_best, filename="checkpoint.pth.tar"):
    torch.save(state, filename)
    if is_best:
        shutil.copyfile(filename, os.path.join(os.path.dirname(filename), "model_best.pth.tar"))


class AverageMeter(object):
    """Computes and stores the average and current value"""

    def __init__(self, name, fmt=":f"):
        self.name = name
        self.fmt = fmt
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def __str__(self):
        fmtstr = "{name} {val" + self.fmt + "} ({avg" + self.fmt + "})"
        return fmtstr.format(**self.__dict__)


class ProgressMeter(object):
    def __init__(self, num_batches, meters, prefix=""):
        self.batch_fmtstr = self._get_batch_fmtstr(num_batches)
        self.meters = meters
        self.prefix = prefix

    def display(self, batch):
        entries = [self.prefix + self.batch_fmtstr.format(batch)]
        entries += [str(meter) for meter in self.meters]
        print("\t".join(entries))

    def _get_batch_fmtstr(self, num_batches):
        num_digits = len(str(num_batches // 1))
        fmt = "{:" + str(num_digits) + "d}"
        return "[" + fmt + "/" + fmt.format(num_batches) + "]"


def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k"""
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)

        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))

        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


# ----------------------------------------------------------------------------- main_moco.py

def moco_main(args):
    if args.seed is not None:
        random.seed(args.seed)
        torch.manual_seed(args.seed)
        cudnn.deterministic = True
        warnings.warn(
            "You have chosen to seed training. "
            "This will turn on the CUDNN deterministic setting, "
            "which can slow down your training considerably! "
            "You may see unexpected behavior when restarting "
            "from checkpoints."
        )

    if args.gpu is not None:
        warnings.warn(
            "You have chosen a specific GPU. This will completely "
            "disable data parallelism."
        )

    if args.dist_url == "env://" and args.world_size == -1:
        args.world_size = int(os.environ["WORLD_SIZE"])

    args.distributed = args.world_size > 1 or args.multiprocessing_distributed

    ngpus_per_node = torch.cuda.device_count() if args.cuda else 1
    if args.multiprocessing_distributed:
        # Since we have ngpus_per_node processes per node, the total world_size
        # needs to be adjusted accordingly
        args.world_size = ngpus_per_node * args.world_size
        # Use torch.multiprocessing.spawn to launch distributed processes: the
        # main_worker process function
        # (here: the one process that mp.spawn(main_worker, nprocs=1, ...) would start, run in this process)
        assert ngpus_per_node == 1
        moco_main_worker(0, ngpus_per_node, args)
    else:
        # Simply call main_worker function
        moco_main_worker(args.gpu, ngpus_per_node, args)


def moco_main_worker(gpu, ngpus_per_node, args):
    args.gpu = gpu if args.cuda else None

    # suppress printing if not master
    if args.multiprocessing_distributed and args.gpu is not None and args.gpu != 0:

        def print_pass(*args):
            pass

        builtins.print = print_pass

    if args.gpu is not None:
        print("Use GPU: {} for training".format(args.gpu))

    if args.distributed:
        if args.dist_url == "env://" and args.rank == -1:
            args.rank = int(os.environ["RANK"])
        if args.multiprocessing_distributed:
            # For multiprocessing distributed training, rank needs to be the
            # global rank among all the processes
            args.rank = args.rank * ngpus_per_node + gpu
        dist.init_process_group(
            backend=args.dist_backend,
            init_method=args.dist_url,
            world_size=args.world_size,
            rank=args.rank,
        )
    # create model
    print("=> creating model '{}'".format(args.arch))
    model = MoCo(
        models.__dict__[args.arch],
        args.moco_dim,
        args.moco_k,
        args.moco_m,
        args.moco_t,
        args.mlp,
    )

    if args.distributed:
        # For multiprocessing distributed, DistributedDataParallel constructor
        # should always set the single device scope, otherwise,
        # DistributedDataParallel will use all available devices.
        if args.gpu is not None:
            torch.cuda.set_device(args.gpu)
            model.cuda(args.gpu)
            # When using a single GPU per process and per
            # DistributedDataParallel, we need to divide the batch size
            # ourselves based on the total number of GPUs we have
            args.batch_size = int(args.batch_size / ngpus_per_node)
            args.workers = int((args.workers + ngpus_per_node - 1) / ngpus_per_node)
            model = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=[args.gpu]
            )
        else:
            if args.cuda:
                model.cuda()
            # DistributedDataParallel will divide and allocate batch_size to all
            # available GPUs if device_ids are not set
            model = torch.nn.parallel.DistributedDataParallel(model)
    else:
        # AllGather implementation (batch shuffle, queue update, etc.) in
        # this code only supports DistributedDataParallel.
        raise NotImplementedError("Only DistributedDataParallel is supported.")

    # define loss function (criterion) and optimizer
    criterion = nn.CrossEntropyLoss()
    if args.cuda:
        criterion = criterion.cuda(args.gpu)

    optimizer = torch.optim.SGD(
        model.parameters(),
        args.lr,
        momentum=args.momentum,
        weight_decay=args.weight_decay,
    )

    # optionally resume from a checkpoint
    if args.resume:
        if os.path.isfile(args.resume):
            print("=> loading checkpoint '{}'".format(os.path.basename(args.resume)))
            if args.gpu is None:
                checkpoint = torch.load(args.resume)
            else:
                # Map model to be loaded to specified single gpu.
                loc = "cuda:{}".format(args.gpu)
                checkpoint = torch.load(args.resume, map_location=loc)
            args.start_epoch = checkpoint["epoch"]
            model.load_state_dict(checkpoint["state_dict"])
            optimizer.load_state_dict(checkpoint["optimizer"])
            print(
                "=> loaded checkpoint '{}' (epoch {})".format(
                    os.path.basename(args.resume), checkpoint["epoch"]
                )
            )
        else:
            print("=> no checkpoint found at '{}'".format(args.resume))

    cudnn.benchmark = True

    # Data loading code
    augmentation = Augment(size=16, train=True)

    train_dataset = SyntheticImageFolder(256, 0, TwoCropsTransform(augmentation))

    if args.distributed:
        train_sampler = torch.utils.data.distributed.DistributedSampler(train_dataset)
    else:
        train_sampler = None

    train_loader = torch.utils.data.DataLoader(
        train_dataset,
        batch_size=args.batch_size,
        shuffle=(train_sampler is None),
        num_workers=args.workers,
        pin_memory=args.cuda,
        sampler=train_sampler,
        drop_last=True,
    )

    for epoch in range(args.start_epoch, args.epochs):
        if args.distributed:
            train_sampler.set_epoch(epoch)
        moco_adjust_learning_rate(optimizer, epoch, args)

        # train for one epoch
        moco_train(train_loader, model, criterion, optimizer, epoch, args)

        if not args.multiprocessing_distributed or (
            args.multiprocessing_distributed and args.rank % ngpus_per_node == 0
        ):
            save_checkpoint(
                {
                    "epoch": epoch + 1,
                    "arch": args.arch,
                    "state_dict": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                },
                is_best=False,
                filename=os.path.join(args.out_dir, "checkpoint_{:04d}.pth.tar".format(epoch)),
            )

    m = model.module
    print("queue_ptr {} | queue norms mean {:.4f} | queue {}".format(
        int(m.queue_ptr), m.queue.norm(dim=0).mean().item(), m.queue.device.type))
    if args.distributed:
        dist.destroy_process_group()


def moco_train(train_loader, model, criterion, optimizer, epoch, args):
    batch_time = AverageMeter("Time", ":6.3f")
    data_time = AverageMeter("Data", ":6.3f")
    losses = AverageMeter("Loss", ":.4e")
    top1 = AverageMeter("Acc@1", ":6.2f")
    top5 = AverageMeter("Acc@5", ":6.2f")
    progress = ProgressMeter(
        len(train_loader),
        [batch_time, data_time, losses, top1, top5],
        prefix="Epoch: [{}]".format(epoch),
    )

    # switch to train mode
    model.train()

    end = time.time()
    for i, (images, _) in enumerate(train_loader):
        # measure data loading time
        data_time.update(time.time() - end)

        if args.gpu is not None:
            images[0] = images[0].cuda(args.gpu, non_blocking=True)
            images[1] = images[1].cuda(args.gpu, non_blocking=True)

        # compute output
        output, target = model(im_q=images[0], im_k=images[1])
        loss = criterion(output, target)

        # acc1/acc5 are (K+1)-way contrast classifier accuracy
        # measure accuracy and record loss
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        losses.update(loss.item(), images[0].size(0))
        top1.update(acc1[0], images[0].size(0))
        top5.update(acc5[0], images[0].size(0))

        # compute gradient and do SGD step
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        # measure elapsed time
        batch_time.update(time.time() - end)
        end = time.time()

        if i % args.print_freq == 0:
            progress.display(i)


def moco_adjust_learning_rate(optimizer, epoch, args):
    """Decay the learning rate based on schedule"""
    lr = args.lr
    if args.cos:  # cosine lr schedule
        lr *= 0.5 * (1.0 + math.cos(math.pi * epoch / args.epochs))
    else:  # stepwise lr schedule
        for milestone in args.schedule:
            lr *= 0.1 if epoch >= milestone else 1.0
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr


# ----------------------------------------------------------------------------- main_lincls.py

best_acc1 = 0


def lincls_main(args):
    if args.seed is not None:
        random.seed(args.seed)
        torch.manual_seed(args.seed)
        cudnn.deterministic = True
        warnings.warn(
            "You have chosen to seed training. "
            "This will turn on the CUDNN deterministic setting, "
            "which can slow down your training considerably! "
            "You may see unexpected behavior when restarting "
            "from checkpoints."
        )

    if args.gpu is not None:
        warnings.warn(
            "You have chosen a specific GPU. This will completely "
            "disable data parallelism."
        )

    args.distributed = args.world_size > 1 or args.multiprocessing_distributed

    ngpus_per_node = torch.cuda.device_count()
    # Simply call main_worker function
    lincls_main_worker(args.gpu, ngpus_per_node, args)


def lincls_main_worker(gpu, ngpus_per_node, args):
    global best_acc1
    args.gpu = gpu

    if args.gpu is not None:
        print("Use GPU: {} for training".format(args.gpu))

    # create model
    print("=> creating model '{}'".format(args.arch))
    model = models.__dict__[args.arch](num_classes=8)

    # freeze all layers but the last fc
    for name, param in model.named_parameters():
        if name not in ["fc.weight", "fc.bias"]:
            param.requires_grad = False
    # init the fc layer
    model.fc.weight.data.normal_(mean=0.0, std=0.01)
    model.fc.bias.data.zero_()

    # load from pre-trained, before DistributedDataParallel constructor
    if args.pretrained:
        if os.path.isfile(args.pretrained):
            print("=> loading checkpoint '{}'".format(os.path.basename(args.pretrained)))
            checkpoint = torch.load(args.pretrained, map_location="cpu")

            # rename moco pre-trained keys
            state_dict = checkpoint["state_dict"]
            for k in list(state_dict.keys()):
                # retain only encoder_q up to before the embedding layer
                if k.startswith("module.encoder_q") and not k.startswith(
                    "module.encoder_q.fc"
                ):
                    # remove prefix
                    state_dict[k[len("module.encoder_q.") :]] = state_dict[k]
                # delete renamed or unused k
                del state_dict[k]

            args.start_epoch = 0
            msg = model.load_state_dict(state_dict, strict=False)
            assert set(msg.missing_keys) == {"fc.weight", "fc.bias"}

            print("=> loaded pre-trained model '{}'".format(os.path.basename(args.pretrained)))
        else:
            print("=> no checkpoint found at '{}'".format(args.pretrained))

    if args.gpu is not None:
        torch.cuda.set_device(args.gpu)
        model = model.cuda(args.gpu)
    else:
        # DataParallel will divide and allocate batch_size to all available GPUs
        model = torch.nn.DataParallel(model)
        if args.cuda:
            model = model.cuda()

    # define loss function (criterion) and optimizer
    criterion = nn.CrossEntropyLoss()
    if args.cuda:
        criterion = criterion.cuda(args.gpu)

    # optimize only the linear classifier
    parameters = list(filter(lambda p: p.requires_grad, model.parameters()))
    assert len(parameters) == 2  # fc.weight, fc.bias
    optimizer = torch.optim.SGD(
        parameters, args.lr, momentum=args.momentum, weight_decay=args.weight_decay
    )

    # optionally resume from a checkpoint
    if args.resume:
        if os.path.isfile(args.resume):
            print("=> loading checkpoint '{}'".format(os.path.basename(args.resume)))
            if args.gpu is None:
                checkpoint = torch.load(args.resume)
            else:
                # Map model to be loaded to specified single gpu.
                loc = "cuda:{}".format(args.gpu)
                checkpoint = torch.load(args.resume, map_location=loc)
            args.start_epoch = checkpoint["epoch"]
            best_acc1 = checkpoint["best_acc1"]
            if args.gpu is not None:
                # best_acc1 may be from a checkpoint from a different GPU
                best_acc1 = best_acc1.to(args.gpu)
            model.load_state_dict(checkpoint["state_dict"])
            optimizer.load_state_dict(checkpoint["optimizer"])
            print(
                "=> loaded checkpoint '{}' (epoch {}, best Acc@1 {:.3f})".format(
                    os.path.basename(args.resume), checkpoint["epoch"], float(best_acc1)
                )
            )
        else:
            print("=> no checkpoint found at '{}'".format(args.resume))

    cudnn.benchmark = True

    # Data loading code
    train_dataset = SyntheticImageFolder(256, 0, Augment(size=16, train=True))
    train_sampler = None

    train_loader = torch.utils.data.DataLoader(
        train_dataset,
        batch_size=args.batch_size,
        shuffle=(train_sampler is None),
        num_workers=args.workers,
        pin_memory=args.cuda,
        sampler=train_sampler,
    )

    val_loader = torch.utils.data.DataLoader(
        SyntheticImageFolder(128, 1, Augment(size=16, train=False)),
        batch_size=args.batch_size,
        shuffle=False,
        num_workers=args.workers,
        pin_memory=args.cuda,
    )

    if args.evaluate:
        lincls_validate(val_loader, model, criterion, args)
        return

    for epoch in range(args.start_epoch, args.epochs):
        lincls_adjust_learning_rate(optimizer, epoch, args)

        # train for one epoch
        lincls_train(train_loader, model, criterion, optimizer, epoch, args)

        # evaluate on validation set
        acc1 = lincls_validate(val_loader, model, criterion, args)

        # remember best acc@1 and save checkpoint
        is_best = acc1 > best_acc1
        best_acc1 = max(acc1, best_acc1)

        save_checkpoint(
            {
                "epoch": epoch + 1,
                "arch": args.arch,
                "state_dict": model.state_dict(),
                "best_acc1": best_acc1,
                "optimizer": optimizer.state_dict(),
            },
            is_best,
            filename=os.path.join(args.out_dir, "checkpoint.pth.tar"),
        )
        if epoch == args.start_epoch:
            sanity_check(model.state_dict(), args.pretrained)


def lincls_train(train_loader, model, criterion, optimizer, epoch, args):
    batch_time = AverageMeter("Time", ":6.3f")
    data_time = AverageMeter("Data", ":6.3f")
    losses = AverageMeter("Loss", ":.4e")
    top1 = AverageMeter("Acc@1", ":6.2f")
    top5 = AverageMeter("Acc@5", ":6.2f")
    progress = ProgressMeter(
        len(train_loader),
        [batch_time, data_time, losses, top1, top5],
        prefix="Epoch: [{}]".format(epoch),
    )

    """
    Switch to eval mode:
    Under the protocol of linear classification on frozen features/models,
    it is not legitimate to change any part of the pre-trained model.
    BatchNorm in train mode may revise running mean/std (even if it receives
    no gradient), which are part of the model parameters too.
    """
    model.eval()

    end = time.time()
    for i, (images, target) in enumerate(train_loader):
        # measure data loading time
        data_time.update(time.time() - end)

        if args.gpu is not None:
            images = images.cuda(args.gpu, non_blocking=True)
        if args.cuda:
            target = target.cuda(args.gpu, non_blocking=True)

        # compute output
        output = model(images)
        loss = criterion(output, target)

        # measure accuracy and record loss
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        losses.update(loss.item(), images.size(0))
        top1.update(acc1[0], images.size(0))
        top5.update(acc5[0], images.size(0))

        # compute gradient and do SGD step
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        # measure elapsed time
        batch_time.update(time.time() - end)
        end = time.time()

        if i % args.print_freq == 0:
            progress.display(i)


def lincls_validate(val_loader, model, criterion, args):
    batch_time = AverageMeter("Time", ":6.3f")
    losses = AverageMeter("Loss", ":.4e")
    top1 = AverageMeter("Acc@1", ":6.2f")
    top5 = AverageMeter("Acc@5", ":6.2f")
    progress = ProgressMeter(
        len(val_loader), [batch_time, losses, top1, top5], prefix="Test: "
    )

    # switch to evaluate mode
    model.eval()

    with torch.no_grad():
        end = time.time()
        for i, (images, target) in enumerate(val_loader):
            if args.gpu is not None:
                images = images.cuda(args.gpu, non_blocking=True)
            if args.cuda:
                target = target.cuda(args.gpu, non_blocking=True)

            # compute output
            output = model(images)
            loss = criterion(output, target)

            # measure accuracy and record loss
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            losses.update(loss.item(), images.size(0))
            top1.update(acc1[0], images.size(0))
            top5.update(acc5[0], images.size(0))

            # measure elapsed time
            batch_time.update(time.time() - end)
            end = time.time()

            if i % args.print_freq == 0:
                progress.display(i)

        # TODO: this should also be done with the ProgressMeter
        print(
            " * Acc@1 {top1.avg:.3f} Acc@5 {top5.avg:.3f}".format(top1=top1, top5=top5)
        )

    return top1.avg


def sanity_check(state_dict, pretrained_weights):
    """
    Linear classifier should not change any weights other than the linear layer.
    This sanity check asserts nothing wrong happens (e.g., BN stats updated).
    """
    print("=> loading '{}' for sanity check".format(os.path.basename(pretrained_weights)))
    checkpoint = torch.load(pretrained_weights, map_location="cpu")
    state_dict_pre = checkpoint["state_dict"]

    for k in list(state_dict.keys()):
        # only ignore fc layer
        if "fc.weight" in k or "fc.bias" in k:
            continue

        # name in pretrained model
        k_pre = (
            "module.encoder_q." + k[len("module.") :]
            if k.startswith("module.")
            else "module.encoder_q." + k
        )

        assert (
            state_dict[k].cpu() == state_dict_pre[k_pre]
        ).all(), "{} is changed in linear classifier training.".format(k)

    print("=> sanity check passed.")


def lincls_adjust_learning_rate(optimizer, epoch, args):
    """Decay the learning rate based on schedule"""
    lr = args.lr
    for milestone in args.schedule:
        lr *= 0.1 if epoch >= milestone else 1.0
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr


# ----------------------------------------------------------------------------- the runs

if __name__ == "__main__":
    out_dir = tempfile.mkdtemp()
    cuda = torch.cuda.is_available()

    def moco_args(**kw):
        args = argparse.Namespace(
            arch="resnet_tiny", workers=0, epochs=2, start_epoch=0, batch_size=32, lr=0.03,
            schedule=[120, 160], momentum=0.9, weight_decay=1e-4, print_freq=4, resume="",
            world_size=1, rank=0, dist_url="file://" + os.path.join(out_dir, "dist_init"),
            dist_backend="gloo", seed=0, gpu=None, multiprocessing_distributed=True,
            moco_dim=32, moco_k=256, moco_m=0.99, moco_t=0.2, mlp=True, aug_plus=True, cos=True,
            cuda=cuda, out_dir=out_dir)
        for k, v in kw.items():
            setattr(args, k, v)
        return args

    def lincls_args(**kw):
        args = argparse.Namespace(
            arch="resnet_tiny", workers=0, epochs=3, start_epoch=0, batch_size=32, lr=3.0,
            schedule=[60, 80], momentum=0.9, weight_decay=0.0, print_freq=4, resume="", evaluate=False,
            world_size=-1, rank=-1, dist_url="", dist_backend="gloo", seed=0, gpu=0 if cuda else None,
            multiprocessing_distributed=False, pretrained=os.path.join(out_dir, "checkpoint_0002.pth.tar"),
            cuda=cuda, out_dir=out_dir)
        for k, v in kw.items():
            setattr(args, k, v)
        return args

    moco_main(moco_args())
    if os.path.exists(os.path.join(out_dir, "dist_init")):
        os.remove(os.path.join(out_dir, "dist_init"))
    moco_main(moco_args(epochs=3, resume=os.path.join(out_dir, "checkpoint_0001.pth.tar")))
    lincls_main(lincls_args())
    lincls_main(lincls_args(resume=os.path.join(out_dir, "model_best.pth.tar"), evaluate=True))
    print("done")
