"""Trains FlowNetS (the two frames stacked into 6 channels, a strided conv encoder, and a refinement decoder that
concatenates each deconvolved feature map with the encoder's skip connection and the upsampled coarser flow,
predicting flow at five scales) on Flying-Chairs-style image pairs with the multiscale EPE loss, validating the
full-resolution EPE every epoch, logging flow visualisations of the first batches and saving checkpoint.pth.tar,
copied to model_best.pth.tar when the EPE improves; then main.py --evaluate --pretrained reloads the best checkpoint
and only validates.

Modeled on: ClementPinard/FlowNetPytorch, main.py, models/FlowNetS.py, models/util.py, multiscaleloss.py, util.py,
flow_transforms.py, datasets/flyingchairs.py, datasets/listdataset.py and datasets/util.py at commit
d5f3292a738209d5f3ea450cf714265034fd033a
(https://github.com/ClementPinard/FlowNetPytorch/blob/d5f3292a738209d5f3ea450cf714265034fd033a/main.py).

Kept: the module-level `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")` that `train` and
`validate` read; `global args, best_EPE, n_iter`; `torch.load(args.pretrained)` (no map_location) handed to
`models.__dict__[args.arch](network_data)`, which loads its 'state_dict', then `.to(device)`; the param groups from
`model.bias_parameters()`/`model.weight_parameters()` taken before `if device.type == "cuda": model =
torch.nn.DataParallel(model).cuda()` and `cudnn.benchmark = True`; Adam on those groups; `--evaluate` calling
`validate` (outside `torch.no_grad()`) and returning; MultiStepLR; in `train`, `model.train()`, `target.to(device)`
and `torch.cat(input, 1).to(device)`, `multiscaleEPE` against area-downsampled targets, `args.div_flow *
realEPE(output[0], target)`, `loss.item()`/`flow2_EPE.item()` into AverageMeters, the epoch_size break; `validate`
called under `torch.no_grad()` from the epoch loop, `model.eval()`, the CPU `mean_values` tensor added to
`input[0, :3].cpu()`, `flow2rgb` doing `.detach().cpu().numpy()` on `args.div_flow * target[0]` and on the outputs;
`save_checkpoint` with `model.module.state_dict()` and `shutil.copyfile` to model_best when the EPE improves;
ListDataset with its co-transforms, load_flo, and split2list writing the split file; DataLoaders with pin_memory.
Changed to run here: the pairs are synthetic (smooth random textures, the second frame the first shifted by a
whole-pixel flow) stored as .npy files (the author's .ppm images and .flo flows), in a temporary directory; torchvision's `transforms.Compose`/`Normalize` and tensorboard's SummaryWriter are small
stand-ins; the package modules are sections of this file (`models` and `datasets` are dicts); the argument lists are
explicit, without a date in the save path, and times are not printed; the checkpoint takes `model.module.state_dict()`
only when the model is a DataParallel (on a CPU the author's line fails: the model is wrapped only on CUDA); to stay
under 550 lines, run_inference.py, FlowNetC, the batch-norm variant, the sparse (KITTI) target pooling and the
RandomTranslate/RandomRotate/RandomVerticalFlip co-transforms are left out.
Shrunk: every FlowNetS width divided by 8 (conv1 8 channels ... conv6 128); 30 pairs of 80x80 (the author's 22872 of
384x512), crops of 64x64 (320x448); batch 4, 3 epochs with milestones [2] (300 and [100, 150, 200]).
"""
import argparse
import glob
import numbers
import os
import os.path
import random
import shutil
import tempfile

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data
import torch.utils.data as data
from torch.nn.init import constant_, kaiming_normal_

# ----------------------------------------------------------------------------- stand-ins for missing libraries

class transforms(object):
    """torchvision.transforms.Compose and Normalize, for CHW tensors."""
    class Compose(object):
        def __init__(self, ts):
            self.ts = ts

        def __call__(self, x):
            for t in self.ts:
                x = t(x)
            return x

    class Normalize(object):
        def __init__(self, mean, std):
            self.mean, self.std = torch.tensor(mean).view(-1, 1, 1), torch.tensor(std).view(-1, 1, 1)

        def __call__(self, t):
            return (t - self.mean) / self.std

class SummaryWriter(object):
    def __init__(self, log_dir):
        os.makedirs(log_dir, exist_ok=True)
        self.events = []

    def add_scalar(self, tag, value, step):
        self.events.append((tag, float(value), step))

    def add_image(self, tag, image, step):
        self.events.append((tag, tuple(image.shape), step))

# ----------------------------------------------------------------------------- flow_transforms.py

class Compose(object):
    def __init__(self, co_transforms):
        self.co_transforms = co_transforms

    def __call__(self, input, target):
        for t in self.co_transforms:
            input, target = t(input, target)
        return input, target

class ArrayToTensor(object):
    """Converts a numpy.ndarray (H x W x C) to a torch.FloatTensor of shape (C x H x W)."""

    def __call__(self, array):
        assert isinstance(array, np.ndarray)
        array = np.transpose(array, (2, 0, 1))
        tensor = torch.from_numpy(array)
        return tensor.float()

class RandomCrop(object):
    def __init__(self, size):
        if isinstance(size, numbers.Number):
            self.size = (int(size), int(size))
        else:
            self.size = size

    def __call__(self, inputs, target):
        h, w, _ = inputs[0].shape
        th, tw = self.size
        if w == tw and h == th:
            return inputs, target
        x1 = random.randint(0, w - tw)
        y1 = random.randint(0, h - th)
        inputs[0] = inputs[0][y1: y1 + th, x1: x1 + tw]
        inputs[1] = inputs[1][y1: y1 + th, x1: x1 + tw]
        return inputs, target[y1: y1 + th, x1: x1 + tw]

class RandomHorizontalFlip(object):
    def __call__(self, inputs, target):
        if random.random() < 0.5:
            inputs[0] = np.copy(np.fliplr(inputs[0]))
            inputs[1] = np.copy(np.fliplr(inputs[1]))
            target = np.copy(np.fliplr(target))
            target[:, :, 0] *= -1
        return inputs, target

# ----------------------------------------------------------------------------- datasets/

def split2list(images, split, split_save_path, default_split=0.9):
    if isinstance(split, str):
        with open(split) as f:
            split_values = [x.strip() == "1" for x in f.readlines()]
        assert len(images) == len(split_values)
    elif split is None:
        split_values = np.random.uniform(0, 1, len(images)) < default_split
    else:
        split = float(split)
        split_values = np.random.uniform(0, 1, len(images)) < split
    if split_save_path is not None:
        with open(split_save_path, "w") as f:
            f.write("\n".join(map(lambda x: str(int(x)), split_values)))
    train_samples = [sample for sample, split in zip(images, split_values) if split]
    test_samples = [sample for sample, split in zip(images, split_values) if not split]
    return train_samples, test_samples

def load_flo(path):
    return np.load(path)  # the author reads the .flo format (magic 202021.25, width, height, HxWx2 float32)

def default_loader(root, path_imgs, path_flo):
    imgs = [os.path.join(root, path) for path in path_imgs]
    flo = os.path.join(root, path_flo)
    return [np.load(img).astype(np.float32) for img in imgs], load_flo(flo)  # imageio's imread

class ListDataset(data.Dataset):
    def __init__(self, root, path_list, transform=None, target_transform=None, co_transform=None,
                 loader=default_loader):
        self.root = root
        self.path_list = path_list
        self.transform = transform
        self.target_transform = target_transform
        self.co_transform = co_transform
        self.loader = loader

    def __getitem__(self, index):
        inputs, target = self.path_list[index]
        inputs, target = self.loader(self.root, inputs, target)
        if self.co_transform is not None:
            inputs, target = self.co_transform(inputs, target)
        if self.transform is not None:
            inputs[0] = self.transform(inputs[0])
            inputs[1] = self.transform(inputs[1])
        if self.target_transform is not None:
            target = self.target_transform(target)
        return inputs, target

    def __len__(self):
        return len(self.path_list)

def make_dataset(dir, split=None, split_save_path=None):
    """Will search for triplets that go by the pattern '[name]_img1.npy  [name]_img2.npy    [name]_flow.npy'"""
    images = []
    for flow_map in sorted(glob.glob(os.path.join(dir, "*_flow.npy"))):
        flow_map = os.path.basename(flow_map)
        root_filename = flow_map[:-9]
        img1 = root_filename + "_img1.npy"
        img2 = root_filename + "_img2.npy"
        if not (os.path.isfile(os.path.join(dir, img1)) and os.path.isfile(os.path.join(dir, img2))):
            continue
        images.append([[img1, img2], flow_map])
    return split2list(images, split, split_save_path, default_split=0.97)

def flying_chairs(root, transform=None, target_transform=None, co_transform=None, split=None, split_save_path=None):
    train_list, test_list = make_dataset(root, split, split_save_path)
    train_dataset = ListDataset(root, train_list, transform, target_transform, co_transform)
    test_dataset = ListDataset(root, test_list, transform, target_transform)
    return train_dataset, test_dataset

datasets = {"flying_chairs": flying_chairs}

# ----------------------------------------------------------------------------- models/util.py, models/FlowNetS.py

def conv(batchNorm, in_planes, out_planes, kernel_size=3, stride=1):
    assert not batchNorm  # flownets_bn's Conv2d(bias=False) + BatchNorm2d branch is left out
    return nn.Sequential(
        nn.Conv2d(in_planes, out_planes, kernel_size=kernel_size, stride=stride, padding=(kernel_size - 1) // 2,
                  bias=True),
        nn.LeakyReLU(0.1, inplace=True))

def predict_flow(in_planes):
    return nn.Conv2d(in_planes, 2, kernel_size=3, stride=1, padding=1, bias=False)

def deconv(in_planes, out_planes):
    return nn.Sequential(
        nn.ConvTranspose2d(in_planes, out_planes, kernel_size=4, stride=2, padding=1, bias=False),
        nn.LeakyReLU(0.1, inplace=True))

def crop_like(input, target):
    if input.size()[2:] == target.size()[2:]:
        return input
    else:
        return input[:, :, : target.size(2), : target.size(3)]

class FlowNetS(nn.Module):
    expansion = 1

    def __init__(self, batchNorm=True):
        super(FlowNetS, self).__init__()
        # every width is the author's divided by 8 (64 -> 8, ..., 1024 -> 128; 1026 -> 130, 770 -> 98, ...)
        self.batchNorm = batchNorm
        self.conv1 = conv(self.batchNorm, 6, 8, kernel_size=7, stride=2)
        self.conv2 = conv(self.batchNorm, 8, 16, kernel_size=5, stride=2)
        self.conv3 = conv(self.batchNorm, 16, 32, kernel_size=5, stride=2)
        self.conv3_1 = conv(self.batchNorm, 32, 32)
        self.conv4 = conv(self.batchNorm, 32, 64, stride=2)
        self.conv4_1 = conv(self.batchNorm, 64, 64)
        self.conv5 = conv(self.batchNorm, 64, 64, stride=2)
        self.conv5_1 = conv(self.batchNorm, 64, 64)
        self.conv6 = conv(self.batchNorm, 64, 128, stride=2)
        self.conv6_1 = conv(self.batchNorm, 128, 128)

        self.deconv5 = deconv(128, 64)
        self.deconv4 = deconv(130, 32)
        self.deconv3 = deconv(98, 16)
        self.deconv2 = deconv(50, 8)

        self.predict_flow6 = predict_flow(128)
        self.predict_flow5 = predict_flow(130)
        self.predict_flow4 = predict_flow(98)
        self.predict_flow3 = predict_flow(50)
        self.predict_flow2 = predict_flow(26)

        self.upsampled_flow6_to_5 = nn.ConvTranspose2d(2, 2, 4, 2, 1, bias=False)
        self.upsampled_flow5_to_4 = nn.ConvTranspose2d(2, 2, 4, 2, 1, bias=False)
        self.upsampled_flow4_to_3 = nn.ConvTranspose2d(2, 2, 4, 2, 1, bias=False)
        self.upsampled_flow3_to_2 = nn.ConvTranspose2d(2, 2, 4, 2, 1, bias=False)

        for m in self.modules():
            if isinstance(m, nn.Conv2d) or isinstance(m, nn.ConvTranspose2d):
                kaiming_normal_(m.weight, 0.1)
                if m.bias is not None:
                    constant_(m.bias, 0)
            elif isinstance(m, nn.BatchNorm2d):
                constant_(m.weight, 1)
                constant_(m.bias, 0)

    def forward(self, x):
        out_conv2 = self.conv2(self.conv1(x))
        out_conv3 = self.conv3_1(self.conv3(out_conv2))
        out_conv4 = self.conv4_1(self.conv4(out_conv3))
        out_conv5 = self.conv5_1(self.conv5(out_conv4))
        out_conv6 = self.conv6_1(self.conv6(out_conv5))

        flow6 = self.predict_flow6(out_conv6)
        flow6_up = crop_like(self.upsampled_flow6_to_5(flow6), out_conv5)
        out_deconv5 = crop_like(self.deconv5(out_conv6), out_conv5)

        concat5 = torch.cat((out_conv5, out_deconv5, flow6_up), 1)
        flow5 = self.predict_flow5(concat5)
        flow5_up = crop_like(self.upsampled_flow5_to_4(flow5), out_conv4)
        out_deconv4 = crop_like(self.deconv4(concat5), out_conv4)

        concat4 = torch.cat((out_conv4, out_deconv4, flow5_up), 1)
        flow4 = self.predict_flow4(concat4)
        flow4_up = crop_like(self.upsampled_flow4_to_3(flow4), out_conv3)
        out_deconv3 = crop_like(self.deconv3(concat4), out_conv3)

        concat3 = torch.cat((out_conv3, out_deconv3, flow4_up), 1)
        flow3 = self.predict_flow3(concat3)
        flow3_up = crop_like(self.upsampled_flow3_to_2(flow3), out_conv2)
        out_deconv2 = crop_like(self.deconv2(concat3), out_conv2)

        concat2 = torch.cat((out_conv2, out_deconv2, flow3_up), 1)
        flow2 = self.predict_flow2(concat2)

        if self.training:
            return flow2, flow3, flow4, flow5, flow6
        else:
            return flow2

    def weight_parameters(self):
        return [param for name, param in self.named_parameters() if "weight" in name]

    def bias_parameters(self):
        return [param for name, param in self.named_parameters() if "bias" in name]

def flownets(data=None):
    model = FlowNetS(batchNorm=False)
    if data is not None:
        model.load_state_dict(data["state_dict"])
    return model

models = {"flownets": flownets}

# ----------------------------------------------------------------------------- multiscaleloss.py, util.py

def EPE(input_flow, target_flow, sparse=False, mean=True):
    EPE_map = torch.norm(target_flow - input_flow, 2, 1)
    batch_size = EPE_map.size(0)
    if sparse:
        # invalid flow is defined with both flow coordinates to be exactly 0
        mask = (target_flow[:, 0] == 0) & (target_flow[:, 1] == 0)
        EPE_map = EPE_map[~mask]
    if mean:
        return EPE_map.mean()
    else:
        return EPE_map.sum() / batch_size

def multiscaleEPE(network_output, target_flow, weights=None, sparse=False):
    def one_scale(output, target, sparse):
        b, _, h, w = output.size()
        target_scaled = F.interpolate(target, (h, w), mode="area")
        return EPE(output, target_scaled, sparse, mean=False)

    if type(network_output) not in [tuple, list]:
        network_output = [network_output]
    if weights is None:
        weights = [0.005, 0.01, 0.02, 0.08, 0.32]  # as in original article
    assert len(weights) == len(network_output)

    loss = 0
    for output, weight in zip(network_output, weights):
        loss += weight * one_scale(output, target_flow, sparse)
    return loss

def realEPE(output, target, sparse=False):
    b, _, h, w = target.size()
    upsampled_output = F.interpolate(output, (h, w), mode="bilinear", align_corners=False)
    return EPE(upsampled_output, target, sparse, mean=True)

def save_checkpoint(state, is_best, save_path, filename="checkpoint.pth.tar"):
    torch.save(state, os.path.join(save_path, filename))
    if is_best:
        shutil.copyfile(os.path.join(save_path, filename), os.path.join(save_path, "model_best.pth.tar"))

class AverageMeter(object):
    """Computes and stores the average and current value"""

    def __init__(self):
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

    def __repr__(self):
        return "{:.3f} ({:.3f})".format(self.val, self.avg)

def flow2rgb(flow_map, max_value):
    flow_map_np = flow_map.detach().cpu().numpy()
    _, h, w = flow_map_np.shape
    flow_map_np[:, (flow_map_np[0] == 0) & (flow_map_np[1] == 0)] = float("nan")
    rgb_map = np.ones((3, h, w)).astype(np.float32)
    if max_value is not None:
        normalized_flow_map = flow_map_np / max_value
    else:
        normalized_flow_map = flow_map_np / (np.abs(flow_map_np).max())
    rgb_map[0] += normalized_flow_map[0]
    rgb_map[1] -= 0.5 * (normalized_flow_map[0] + normalized_flow_map[1])
    rgb_map[2] += normalized_flow_map[1]
    return rgb_map.clip(0, 1)

# ----------------------------------------------------------------------------- main.py

parser = argparse.ArgumentParser(description="PyTorch FlowNet Training on several datasets")
parser.add_argument("data", metavar="DIR", help="path to dataset")
parser.add_argument("--dataset", metavar="DATASET", default="flying_chairs", choices=sorted(datasets))
group = parser.add_mutually_exclusive_group()
group.add_argument("-s", "--split-file", default=None, type=str, help="test-val split file")
group.add_argument("--split-value", default=0.8, type=float, help="test-val split proportion")
parser.add_argument("--split-seed", type=int, default=None, help="Seed the train-val split")
parser.add_argument("--arch", "-a", metavar="ARCH", default="flownets", choices=sorted(models))
parser.add_argument("--solver", default="adam", choices=["adam", "sgd"], help="solver algorithms")
parser.add_argument("-j", "--workers", default=8, type=int, metavar="N", help="number of data loading workers")
parser.add_argument("--epochs", default=300, type=int, metavar="N", help="number of total epochs to run")
parser.add_argument("--start-epoch", default=0, type=int, metavar="N", help="manual epoch number")
parser.add_argument("--epoch-size", default=1000, type=int, metavar="N", help="manual epoch size")
parser.add_argument("-b", "--batch-size", default=8, type=int, metavar="N", help="mini-batch size")
parser.add_argument("--lr", "--learning-rate", default=0.0001, type=float, metavar="LR", help="initial learning rate")
parser.add_argument("--momentum", default=0.9, type=float, metavar="M", help="momentum for sgd, alpha for adam")
parser.add_argument("--beta", default=0.999, type=float, metavar="M", help="beta parameter for adam")
parser.add_argument("--weight-decay", "--wd", default=4e-4, type=float, metavar="W", help="weight decay")
parser.add_argument("--bias-decay", default=0, type=float, metavar="B", help="bias decay")
parser.add_argument("--multiscale-weights", "-w", default=[0.005, 0.01, 0.02, 0.08, 0.32], type=float, nargs=5)
parser.add_argument("--sparse", action="store_true", help="look for NaNs in target flow when computing EPE")
parser.add_argument("--print-freq", "-p", default=10, type=int, metavar="N", help="print frequency")
parser.add_argument("-e", "--evaluate", dest="evaluate", action="store_true", help="evaluate model on validation set")
parser.add_argument("--pretrained", dest="pretrained", default=None, help="path to pre-trained model")
parser.add_argument("--no-date", action="store_true", help="don't append date timestamp to folder")
parser.add_argument("--div-flow", default=20, help="value by which flow will be divided")
parser.add_argument("--milestones", default=[100, 150, 200], metavar="N", nargs="*", type=int)

best_EPE = -1
n_iter = 0
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

def main(argv):
    global args, best_EPE, n_iter
    args = parser.parse_args(argv)
    save_path = "{},{},{}epochs{},b{},lr{}".format(
        args.arch, args.solver, args.epochs, ",epochSize" + str(args.epoch_size) if args.epoch_size > 0 else "",
        args.batch_size, args.lr)
    save_path = os.path.join(args.dataset, save_path)
    print("=> will save everything to {}".format(save_path))
    if not os.path.exists(save_path):
        os.makedirs(save_path)

    if args.split_seed is not None:
        np.random.seed(args.split_seed)

    train_writer = SummaryWriter(os.path.join(save_path, "train"))
    test_writer = SummaryWriter(os.path.join(save_path, "test"))
    output_writers = []
    for i in range(3):
        output_writers.append(SummaryWriter(os.path.join(save_path, "test", str(i))))

    # Data loading code
    input_transform = transforms.Compose([
        ArrayToTensor(),
        transforms.Normalize(mean=[0, 0, 0], std=[255, 255, 255]),
        transforms.Normalize(mean=[0.45, 0.432, 0.411], std=[1, 1, 1])])
    target_transform = transforms.Compose([
        ArrayToTensor(),
        transforms.Normalize(mean=[0, 0], std=[args.div_flow, args.div_flow])])
    co_transform = Compose([
        RandomCrop((64, 64)), RandomHorizontalFlip()])

    print("=> fetching img pairs in '{}'".format(args.data))
    train_set, test_set = datasets[args.dataset](
        args.data, transform=input_transform, target_transform=target_transform, co_transform=co_transform,
        split=args.split_file if args.split_file else args.split_value,
        split_save_path=os.path.join(save_path, "split.txt"))
    print("{} samples found, {} train samples and {} test samples ".format(
        len(test_set) + len(train_set), len(train_set), len(test_set)))
    n_iter = args.start_epoch * len(train_set)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, num_workers=args.workers,
                                               pin_memory=True, shuffle=True)
    val_loader = torch.utils.data.DataLoader(test_set, batch_size=args.batch_size, num_workers=args.workers,
                                             pin_memory=True, shuffle=False)

    # create model
    if args.pretrained:
        network_data = torch.load(args.pretrained)
        args.arch = network_data["arch"]
        print("=> using pre-trained model '{}'".format(args.arch))
    else:
        network_data = None
        print("=> creating model '{}'".format(args.arch))

    model = models[args.arch](network_data).to(device)

    assert args.solver in ["adam", "sgd"]
    print("=> setting {} solver".format(args.solver))
    param_groups = [{"params": model.bias_parameters(), "weight_decay": args.bias_decay},
                    {"params": model.weight_parameters(), "weight_decay": args.weight_decay}]

    if device.type == "cuda":
        model = torch.nn.DataParallel(model).cuda()
        cudnn.benchmark = True

    if args.solver == "adam":
        optimizer = torch.optim.Adam(param_groups, args.lr, betas=(args.momentum, args.beta))
    elif args.solver == "sgd":
        optimizer = torch.optim.SGD(param_groups, args.lr, momentum=args.momentum)

    if args.evaluate:
        best_EPE = validate(val_loader, model, 0, output_writers)
        return

    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=args.milestones, gamma=0.5)

    for epoch in range(args.start_epoch, args.epochs):
        # train for one epoch
        train_loss, train_EPE = train(train_loader, model, optimizer, epoch, train_writer)
        scheduler.step()
        train_writer.add_scalar("mean EPE", train_EPE, epoch)

        # evaluate on validation set
        with torch.no_grad():
            EPE = validate(val_loader, model, epoch, output_writers)
        test_writer.add_scalar("mean EPE", EPE, epoch)

        if best_EPE < 0:
            best_EPE = EPE

        is_best = EPE < best_EPE
        best_EPE = min(EPE, best_EPE)
        save_checkpoint({
            "epoch": epoch + 1,
            "arch": args.arch,
            "state_dict": (model.module if isinstance(model, torch.nn.DataParallel) else model).state_dict(),
            "best_EPE": best_EPE,
            "div_flow": args.div_flow,
        }, is_best, save_path)

def train(train_loader, model, optimizer, epoch, train_writer):
    global n_iter, args
    losses = AverageMeter()
    flow2_EPEs = AverageMeter()

    epoch_size = len(train_loader) if args.epoch_size == 0 else min(len(train_loader), args.epoch_size)

    # switch to train mode
    model.train()

    for i, (input, target) in enumerate(train_loader):
        target = target.to(device)
        input = torch.cat(input, 1).to(device)

        # compute output
        output = model(input)
        if args.sparse:
            h, w = target.size()[-2:]
            output = [F.interpolate(output[0], (h, w)), *output[1:]]

        loss = multiscaleEPE(output, target, weights=args.multiscale_weights, sparse=args.sparse)
        flow2_EPE = args.div_flow * realEPE(output[0], target, sparse=args.sparse)
        # record loss and EPE
        losses.update(loss.item(), target.size(0))
        train_writer.add_scalar("train_loss", loss.item(), n_iter)
        flow2_EPEs.update(flow2_EPE.item(), target.size(0))

        # compute gradient and do optimization step
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        if i % args.print_freq == 0:
            print("Epoch: [{0}][{1}/{2}]\t Loss {3}\t EPE {4}".format(epoch, i, epoch_size, losses, flow2_EPEs))
        n_iter += 1
        if i >= epoch_size:
            break

    return losses.avg, flow2_EPEs.avg

def validate(val_loader, model, epoch, output_writers):
    global args
    flow2_EPEs = AverageMeter()

    # switch to evaluate mode
    model.eval()

    for i, (input, target) in enumerate(val_loader):
        target = target.to(device)
        input = torch.cat(input, 1).to(device)

        # compute output
        output = model(input)
        flow2_EPE = args.div_flow * realEPE(output, target, sparse=args.sparse)
        # record EPE
        flow2_EPEs.update(flow2_EPE.item(), target.size(0))

        if i < len(output_writers):  # log first output of first batches
            if epoch == args.start_epoch:
                mean_values = torch.tensor([0.45, 0.432, 0.411], dtype=input.dtype).view(3, 1, 1)
                output_writers[i].add_image("GroundTruth", flow2rgb(args.div_flow * target[0], max_value=10), 0)
                output_writers[i].add_image("Inputs", (input[0, :3].cpu() + mean_values).clamp(0, 1), 0)
                output_writers[i].add_image("Inputs", (input[0, 3:].cpu() + mean_values).clamp(0, 1), 1)
            output_writers[i].add_image("FlowNet Outputs", flow2rgb(args.div_flow * output[0], max_value=10), epoch)

        if i % args.print_freq == 0:
            print("Test: [{0}/{1}]\t EPE {2}".format(i, len(val_loader), flow2_EPEs))

    print(" * EPE {:.3f}".format(flow2_EPEs.avg))
    return flow2_EPEs.avg

# ----------------------------------------------------------------------------- synthetic Flying Chairs

def texture(rng, size):
    yy, xx = np.mgrid[0:size, 0:size] / float(size)
    img = np.zeros((size, size, 3))
    for c in range(3):
        for _ in range(4):
            fx, fy, ph = rng.uniform(1, 6), rng.uniform(1, 6), rng.uniform(0, 2 * np.pi)
            img[..., c] += np.sin(2 * np.pi * (fx * xx + fy * yy) + ph)
    return (img - img.min()) / (img.max() - img.min()) * 255

def write_pair(rng, folder, stem, size=80):
    u, v = rng.randint(-3, 4, size=2)
    img1 = texture(rng, size)
    img2 = np.roll(img1, shift=(v, u), axis=(0, 1))  # img2(p + flow) = img1(p)
    np.save(os.path.join(folder, stem + "_img1.npy"), img1.astype(np.uint8))
    np.save(os.path.join(folder, stem + "_img2.npy"), img2.astype(np.uint8))
    flow = np.zeros((size, size, 2), np.float32)
    flow[..., 0], flow[..., 1] = u, v
    np.save(os.path.join(folder, stem + "_flow.npy"), flow)

if __name__ == "__main__":
    workdir = tempfile.TemporaryDirectory()
    home = os.getcwd()
    os.chdir(workdir.name)
    rng = np.random.RandomState(0)
    random.seed(0)
    torch.manual_seed(0)
    os.makedirs("FlyingChairs_release/data")
    for k in range(30):
        write_pair(rng, "FlyingChairs_release/data", "%05d" % k)

    common = ["FlyingChairs_release/data", "--split-seed", "1", "-j", "0", "-b", "4", "--epochs", "3",
              "--milestones", "2", "--no-date", "-p", "3", "--lr", "0.0005"]
    main(common)
    save_path = "flying_chairs/flownets,adam,3epochs,epochSize1000,b4,lr0.0005"
    main(common + ["--evaluate", "--pretrained", os.path.join(save_path, "model_best.pth.tar")])
    os.chdir(home)
    workdir.cleanup()
    print("done")
