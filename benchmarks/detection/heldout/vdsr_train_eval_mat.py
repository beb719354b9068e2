"""Trains VDSR (a very deep plain conv net predicting the residual between a bicubic-upscaled luminance image and
the high-resolution one, trained with a summed MSE, SGD at a high learning rate divided by 10 every `step` epochs and
gradient-norm clipping) on luminance patches, pickling the whole model into checkpoint/model_epoch_N.pth after every
epoch, then resumes from the last checkpoint for one more epoch; finally runs eval.py, a module-level script that
unpickles the model from a checkpoint onto the CPU, moves it to the GPU with --cuda, and reports the average PSNR of
the upscaled luminance against the bicubic baseline on Set5-style .mat files for scales 2, 3 and 4.

Modeled on: twtygqyy/pytorch-vdsr, main_vdsr.py, vdsr.py, dataset.py and eval.py at commit
514b021044018baf909e79f48392783daa592888
(https://github.com/twtygqyy/pytorch-vdsr/blob/514b021044018baf909e79f48392783daa592888/main_vdsr.py,
https://github.com/twtygqyy/pytorch-vdsr/blob/514b021044018baf909e79f48392783daa592888/eval.py).

Kept: main_vdsr.py's module-level parser and `main()` with `global opt, model`; the `--cuda` store_true flag and the
`--gpus` string written to `os.environ["CUDA_VISIBLE_DEVICES"]`, raising when `--cuda` is given without a GPU;
`torch.manual_seed` and `torch.cuda.manual_seed(opt.seed)` under `if cuda`; `cudnn.benchmark = True`;
`criterion = nn.MSELoss(size_average=False)`; `model = model.cuda()` and `criterion = criterion.cuda()` under
`if cuda`, before the resume (`torch.load(opt.resume)` with no map_location, `opt.start_epoch = checkpoint["epoch"] +
1`, `model.load_state_dict(checkpoint["model"].state_dict())`) and the `--pretrained` copy; SGD made after the move;
`adjust_learning_rate` reading the global `opt` and the lr written into every param group; `model.train()`; the
batches wrapped in `Variable` and moved with `input.cuda()`/`target.cuda()` under `if opt.cuda`;
`nn.utils.clip_grad_norm(model.parameters(), opt.clip)`; `save_checkpoint` pickling `{"epoch": epoch, "model":
model}` (the whole module, on whatever device it is); eval.py as module-level code: its own parser and `PSNR`,
`torch.load(opt.model, map_location=lambda storage, loc: storage)["model"]`, the glob over `<dataset>_mat/*.*`
filtered by `str(scale) in image_name`, the .mat `im_gt_y`/`im_b_y` arrays, the input made with
`Variable(torch.from_numpy(im_input).float()).view(1, -1, h, w)`, then for every image `model = model.cuda()` and
`im_input = im_input.cuda()` if cuda else `model = model.cpu()`, the forward pass with no `torch.no_grad()` and no
`model.eval()`, `HR = HR.cpu()` and `HR.data[0].numpy()` clipped to [0, 255].
Changed to run here: the training patches are synthetic (smooth random luminance images, the input their
downscaled-then-bilinearly-upscaled copy as a stand-in for MATLAB's bicubic) kept in an .npz read by
`DatasetFromHdf5` instead of data/train.h5 (h5py is not installed), and the Set5 .mat files are made the same way
with scipy, all in a temporary directory; the argument lists are explicit (`--cuda` given only when CUDA is
available, the seed is fixed), `parser.parse_args(argv)`; both `torch.load` calls that unpickle a whole model pass
`weights_only=False` (current PyTorch refuses pickled modules otherwise); the training print's `loss.data[0]` (a 0-dim
tensor now) is `loss.item()`; the elapsed time is not printed (it varies run to run); eval.py's code follows
main_vdsr.py's in this file, after the training runs.
Shrunk: the net has 16 channels (the author's 64) and 4 Conv-ReLU blocks (18); 96 patches of 24x24 (41x41), batch
16, 2 epochs then 1 after the resume (50), lr 0.05 (0.1), step 2 (10); 5 evaluation images of 40x40 per scale.
"""
import argparse
import glob
import math
import os
import random
import tempfile
import time
from math import sqrt

import numpy as np
import scipy.io as sio
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data as data
from torch.autograd import Variable
from torch.utils.data import DataLoader


# ----------------------------------------------------------------------------- vdsr.py

class Conv_ReLU_Block(nn.Module):
    def __init__(self):
        super(Conv_ReLU_Block, self).__init__()
        self.conv = nn.Conv2d(in_channels=16, out_channels=16, kernel_size=3, stride=1, padding=1, bias=False)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.conv(x))


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.residual_layer = self.make_layer(Conv_ReLU_Block, 4)
        self.input = nn.Conv2d(in_channels=1, out_channels=16, kernel_size=3, stride=1, padding=1, bias=False)
        self.output = nn.Conv2d(in_channels=16, out_channels=1, kernel_size=3, stride=1, padding=1, bias=False)
        self.relu = nn.ReLU(inplace=True)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                m.weight.data.normal_(0, sqrt(2. / n))

    def make_layer(self, block, num_of_layer):
        layers = []
        for _ in range(num_of_layer):
            layers.append(block())
        return nn.Sequential(*layers)

    def forward(self, x):
        residual = x
        out = self.relu(self.input(x))
        out = self.residual_layer(out)
        out = self.output(out)
        out = torch.add(out, residual)
        return out


# ----------------------------------------------------------------------------- dataset.py

class DatasetFromHdf5(data.Dataset):
    def __init__(self, file_path):
        super(DatasetFromHdf5, self).__init__()
        hf = np.load(file_path)  # the author's h5py.File(file_path)
        self.data = hf['data']
        self.target = hf['label']

    def __getitem__(self, index):
        return torch.from_numpy(self.data[index, :, :, :]).float(), torch.from_numpy(self.target[index, :, :, :]).float()

    def __len__(self):
        return self.data.shape[0]


# ----------------------------------------------------------------------------- synthetic data (data/*.m stand-ins)

def smooth_image(rng, size):
    yy, xx = np.mgrid[0:size, 0:size] / float(size)
    img = np.zeros((size, size))
    for _ in range(6):
        fx, fy, ph = rng.uniform(0.5, 4), rng.uniform(0.5, 4), rng.uniform(0, 2 * np.pi)
        img += rng.uniform(0.3, 1) * np.sin(2 * np.pi * (fx * xx + fy * yy) + ph)
    img = (img - img.min()) / (img.max() - img.min())
    return 16 + img * 219  # the Y channel's range


def degrade(hr, scale):
    """Downscale by `scale` and upscale back (bilinear here; MATLAB's imresize bicubic in the author's scripts)."""
    t = torch.from_numpy(hr).float()[None, None]
    lr = F.interpolate(t, scale_factor=1.0 / scale, mode='bilinear', align_corners=False)
    return F.interpolate(lr, size=hr.shape, mode='bilinear', align_corners=False)[0, 0].numpy().astype(np.float64)


def write_synthetic_data(rng):
    os.makedirs("data", exist_ok=True)
    inputs, labels = [], []
    for k in range(96):
        hr = smooth_image(rng, 24)
        inputs.append(degrade(hr, [2, 3, 4][k % 3]) / 255.)
        labels.append(hr / 255.)
    np.savez("data/train.npz", data=np.array(inputs)[:, None].astype(np.float32),
             label=np.array(labels)[:, None].astype(np.float32))
    os.makedirs("Set5_mat", exist_ok=True)
    for name in ("baby", "bird", "butterfly", "head", "woman"):
        hr = np.round(smooth_image(rng, 40))
        for scale in (2, 3, 4):
            sio.savemat("Set5_mat/{}_GT_x{}.mat".format(name, scale),
                        {"im_gt_y": hr, "im_b_y": np.clip(np.round(degrade(hr, scale)), 0, 255)})


# ----------------------------------------------------------------------------- main_vdsr.py

# Training settings
parser = argparse.ArgumentParser(description="PyTorch VDSR")
parser.add_argument("--batchSize", type=int, default=128, help="Training batch size")
parser.add_argument("--nEpochs", type=int, default=50, help="Number of epochs to train for")
parser.add_argument("--lr", type=float, default=0.1, help="Learning Rate. Default=0.1")
parser.add_argument("--step", type=int, default=10, help="Sets the learning rate to the initial LR decayed by momentum every n epochs, Default: n=10")
parser.add_argument("--cuda", action="store_true", help="Use cuda?")
parser.add_argument("--resume", default="", type=str, help="Path to checkpoint (default: none)")
parser.add_argument("--start-epoch", default=1, type=int, help="Manual epoch number (useful on restarts)")
parser.add_argument("--clip", type=float, default=0.4, help="Clipping Gradients. Default=0.4")
parser.add_argument("--threads", type=int, default=1, help="Number of threads for data loader to use, Default: 1")
parser.add_argument("--momentum", default=0.9, type=float, help="Momentum, Default: 0.9")
parser.add_argument("--weight-decay", "--wd", default=1e-4, type=float, help="Weight decay, Default: 1e-4")
parser.add_argument('--pretrained', default='', type=str, help='path to pretrained model (default: none)')
parser.add_argument("--gpus", default="0", type=str, help="gpu ids (default: 0)")


def main(argv):
    global opt, model
    opt = parser.parse_args(argv)
    print(opt)

    cuda = opt.cuda
    if cuda:
        print("=> use gpu id: '{}'".format(opt.gpus))
        os.environ["CUDA_VISIBLE_DEVICES"] = opt.gpus
        if not torch.cuda.is_available():
            raise Exception("No GPU found or Wrong gpu id, please run without --cuda")

    opt.seed = random.randint(1, 10000)
    print("Random Seed: ", opt.seed)
    torch.manual_seed(opt.seed)
    if cuda:
        torch.cuda.manual_seed(opt.seed)

    cudnn.benchmark = True

    print("===> Loading datasets")
    train_set = DatasetFromHdf5("data/train.npz")
    training_data_loader = DataLoader(dataset=train_set, num_workers=opt.threads, batch_size=opt.batchSize,
                                      shuffle=True)

    print("===> Building model")
    model = Net()
    criterion = nn.MSELoss(size_average=False)

    print("===> Setting GPU")
    if cuda:
        model = model.cuda()
        criterion = criterion.cuda()

    # optionally resume from a checkpoint
    if opt.resume:
        if os.path.isfile(opt.resume):
            print("=> loading checkpoint '{}'".format(opt.resume))
            checkpoint = torch.load(opt.resume, weights_only=False)
            opt.start_epoch = checkpoint["epoch"] + 1
            model.load_state_dict(checkpoint["model"].state_dict())
        else:
            print("=> no checkpoint found at '{}'".format(opt.resume))

    # optionally copy weights from a checkpoint
    if opt.pretrained:
        if os.path.isfile(opt.pretrained):
            print("=> loading model '{}'".format(opt.pretrained))
            weights = torch.load(opt.pretrained, weights_only=False)
            model.load_state_dict(weights['model'].state_dict())
        else:
            print("=> no model found at '{}'".format(opt.pretrained))

    print("===> Setting Optimizer")
    optimizer = optim.SGD(model.parameters(), lr=opt.lr, momentum=opt.momentum, weight_decay=opt.weight_decay)

    print("===> Training")
    for epoch in range(opt.start_epoch, opt.nEpochs + 1):
        train(training_data_loader, optimizer, model, criterion, epoch)
        save_checkpoint(model, epoch)


def adjust_learning_rate(optimizer, epoch):
    """Sets the learning rate to the initial LR decayed by 10 every 10 epochs"""
    lr = opt.lr * (0.1 ** (epoch // opt.step))
    return lr


def train(training_data_loader, optimizer, model, criterion, epoch):
    lr = adjust_learning_rate(optimizer, epoch - 1)

    for param_group in optimizer.param_groups:
        param_group["lr"] = lr

    print("Epoch = {}, lr = {}".format(epoch, optimizer.param_groups[0]["lr"]))

    model.train()

    for iteration, batch in enumerate(training_data_loader, 1):
        input, target = Variable(batch[0]), Variable(batch[1], requires_grad=False)

        if opt.cuda:
            input = input.cuda()
            target = target.cuda()

        loss = criterion(model(input), target)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm(model.parameters(), opt.clip)
        optimizer.step()

        if iteration % 3 == 0:  # the author's 100
            print("===> Epoch[{}]({}/{}): Loss: {:.10f}".format(epoch, iteration, len(training_data_loader),
                                                               loss.item()))


def save_checkpoint(model, epoch):
    model_out_path = "checkpoint/" + "model_epoch_{}.pth".format(epoch)
    state = {"epoch": epoch, "model": model}
    if not os.path.exists("checkpoint/"):
        os.makedirs("checkpoint/")

    torch.save(state, model_out_path)

    print("Checkpoint saved to {}".format(model_out_path))


workdir = tempfile.TemporaryDirectory()
home = os.getcwd()
os.chdir(workdir.name)
random.seed(7)
write_synthetic_data(np.random.RandomState(0))

CUDA_FLAG = ["--cuda"] if torch.cuda.is_available() else []
main(CUDA_FLAG + ["--batchSize", "16", "--nEpochs", "2", "--lr", "0.05", "--step", "2", "--threads", "0"])
main(CUDA_FLAG + ["--batchSize", "16", "--nEpochs", "3", "--lr", "0.05", "--step", "2", "--threads", "0",
                  "--resume", "checkpoint/model_epoch_2.pth"])


# ----------------------------------------------------------------------------- eval.py

parser = argparse.ArgumentParser(description="PyTorch VDSR Eval")
parser.add_argument("--cuda", action="store_true", help="use cuda?")
parser.add_argument("--model", default="model/model_epoch_50.pth", type=str, help="model path")
parser.add_argument("--dataset", default="Set5", type=str, help="dataset name, Default: Set5")
parser.add_argument("--gpus", default="0", type=str, help="gpu ids (default: 0)")


def PSNR(pred, gt, shave_border=0):
    height, width = pred.shape[:2]
    pred = pred[shave_border:height - shave_border, shave_border:width - shave_border]
    gt = gt[shave_border:height - shave_border, shave_border:width - shave_border]
    imdff = pred - gt
    rmse = math.sqrt(np.mean(imdff ** 2))
    if rmse == 0:
        return 100
    return 20 * math.log10(255.0 / rmse)


opt = parser.parse_args(CUDA_FLAG + ["--model", "checkpoint/model_epoch_3.pth", "--dataset", "Set5"])
cuda = opt.cuda

if cuda:
    print("=> use gpu id: '{}'".format(opt.gpus))
    os.environ["CUDA_VISIBLE_DEVICES"] = opt.gpus
    if not torch.cuda.is_available():
        raise Exception("No GPU found or Wrong gpu id, please run without --cuda")

model = torch.load(opt.model, map_location=lambda storage, loc: storage, weights_only=False)["model"]

scales = [2, 3, 4]

image_list = sorted(glob.glob(opt.dataset + "_mat/*.*"))

for scale in scales:
    avg_psnr_predicted = 0.0
    avg_psnr_bicubic = 0.0
    avg_elapsed_time = 0.0
    count = 0.0
    for image_name in image_list:
        if str(scale) in image_name:
            count += 1
            print("Processing ", image_name)
            im_gt_y = sio.loadmat(image_name)['im_gt_y']
            im_b_y = sio.loadmat(image_name)['im_b_y']

            im_gt_y = im_gt_y.astype(float)
            im_b_y = im_b_y.astype(float)

            psnr_bicubic = PSNR(im_gt_y, im_b_y, shave_border=scale)
            avg_psnr_bicubic += psnr_bicubic

            im_input = im_b_y / 255.

            im_input = Variable(torch.from_numpy(im_input).float()).view(1, -1, im_input.shape[0], im_input.shape[1])

            if cuda:
                model = model.cuda()
                im_input = im_input.cuda()
            else:
                model = model.cpu()

            start_time = time.time()
            HR = model(im_input)
            elapsed_time = time.time() - start_time
            avg_elapsed_time += elapsed_time

            HR = HR.cpu()

            im_h_y = HR.data[0].numpy().astype(np.float32)

            im_h_y = im_h_y * 255.
            im_h_y[im_h_y < 0] = 0
            im_h_y[im_h_y > 255.] = 255.
            im_h_y = im_h_y[0, :, :]

            psnr_predicted = PSNR(im_gt_y, im_h_y, shave_border=scale)
            avg_psnr_predicted += psnr_predicted

    print("Scale=", scale)
    print("Dataset=", opt.dataset)
    print("PSNR_predicted= {:.3f}".format(avg_psnr_predicted / count))
    print("PSNR_bicubic= {:.3f}".format(avg_psnr_bicubic / count))

os.chdir(home)
workdir.cleanup()
print("done")
