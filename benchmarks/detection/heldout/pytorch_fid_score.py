"""Computes the Frechet Inception Distance between folders of images (and against a saved ``.npz`` statistics file)
with a shrunk FID-Inception network, as mseitzer/pytorch-fid does: `main` picks ``torch.device("cuda" if
torch.cuda.is_available() else "cpu")`` unless ``--device`` is given, `calculate_fid_given_paths` / `save_fid_stats`
build ``InceptionV3([block_idx]).to(device)`` whose blocks come from `fid_inception_v3` (torchvision's Inception
with the FID-patched A/C/E blocks, weights loaded with ``load_state_dict_from_url``), `get_activations` puts the model
in ``eval()``, moves each DataLoader batch with ``batch.to(device)``, runs it under ``torch.no_grad()``, pools
non-scalar feature maps with ``adaptive_avg_pool2d`` and brings them back with ``.cpu().numpy()`` into a numpy array;
the statistics and the distance itself (``scipy.linalg.sqrtm``) are computed in numpy on the host.

Modeled on: mseitzer/pytorch-fid, src/pytorch_fid/fid_score.py and src/pytorch_fid/inception.py at commit
b9c18118d082cbd263c1b8963fc4221dc1cbb659
(https://github.com/mseitzer/pytorch-fid/blob/b9c18118d082cbd263c1b8963fc4221dc1cbb659/src/pytorch_fid/fid_score.py,
https://github.com/mseitzer/pytorch-fid/blob/b9c18118d082cbd263c1b8963fc4221dc1cbb659/src/pytorch_fid/inception.py),
with torchvision/models/inception.py (``Inception3``, ``BasicConv2d``, ``InceptionA``-``InceptionE``) for the
blocks it patches.

Kept: fid_score.py's argument parser, ``IMAGE_EXTENSIONS``, `ImagePathDataset`, `get_activations`,
`calculate_frechet_distance` (with the singular-product and imaginary-component handling),
`calculate_activation_statistics`, `compute_statistics_of_path` (image folder or ``.npz``),
`calculate_fid_given_paths`, `save_fid_stats` and `main` (device choice, ``--save-stats``); inception.py's
`InceptionV3` (``BLOCK_INDEX_BY_DIM``, block assembly up to ``last_needed_block``, ``requires_grad``, resize and
normalisation in ``forward``), `fid_inception_v3`, `FIDInceptionA`, `FIDInceptionC`, `FIDInceptionE_1`,
`FIDInceptionE_2`.

Changed to run here: torchvision is not installed, so a shrunk copy of its ``Inception3`` and blocks is included
(channel widths divided by ``W``); the released FID weights are replaced by a seeded state dict written to a local
cache that the `load_state_dict_from_url` stand-in reads with ``torch.load(..., map_location=...)`` as torch.hub
does; PIL is not installed, so images are binary PPM files (an accepted extension) read by a small loader in place of
``Image.open(...).convert("RGB")`` and ``TF.ToTensor()``; ``num_workers`` is 0; tqdm is the author's fallback
identity; image folders, the weights cache and the ``.npz`` live in a temporary folder.
Shrunk: Inception channel widths /16 (``BLOCK_INDEX_BY_DIM`` dims scaled to match), input resized to 75 instead of
299, two folders of 40 and one of 24 images at 32x32, batch size 16.
"""
import os
import pathlib
import shutil
import tempfile
from argparse import ArgumentDefaultsHelpFormatter, ArgumentParser

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from scipy import linalg
from torch.nn.functional import adaptive_avg_pool2d


def tqdm(x):  # fid_score.py's fallback when tqdm is not available
    return x


W = 16  # channel-width divisor of the shrunk Inception
RESIZE = 75  # 299 in the original
FID_WEIGHTS_URL = "https://github.com/mseitzer/pytorch-fid/releases/download/fid_weights/pt_inception-2015-12-05-6726825d.pth"  # noqa: E501
HUB_DIR = None  # torch.hub cache directory, set in __main__


def c(n):
    return max(2, n // W)


# ------------------------------------------------------------- torchvision/models/inception.py (shrunk)
class BasicConv2d(nn.Module):
    def __init__(self, in_channels, out_channels, **kwargs):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, bias=False, **kwargs)
        self.bn = nn.BatchNorm2d(out_channels, eps=0.001)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)), inplace=True)


class InceptionA(nn.Module):
    def __init__(self, in_channels, pool_features):
        super().__init__()
        self.branch1x1 = BasicConv2d(in_channels, c(64), kernel_size=1)
        self.branch5x5_1 = BasicConv2d(in_channels, c(48), kernel_size=1)
        self.branch5x5_2 = BasicConv2d(c(48), c(64), kernel_size=5, padding=2)
        self.branch3x3dbl_1 = BasicConv2d(in_channels, c(64), kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(c(64), c(96), kernel_size=3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(c(96), c(96), kernel_size=3, padding=1)
        self.branch_pool = BasicConv2d(in_channels, pool_features, kernel_size=1)


class InceptionB(nn.Module):
    def __init__(self, in_channels):
        super().__init__()
        self.branch3x3 = BasicConv2d(in_channels, c(384), kernel_size=3, stride=2)
        self.branch3x3dbl_1 = BasicConv2d(in_channels, c(64), kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(c(64), c(96), kernel_size=3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(c(96), c(96), kernel_size=3, stride=2)

    def forward(self, x):
        branch3x3 = self.branch3x3(x)
        branch3x3dbl = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        branch_pool = F.max_pool2d(x, kernel_size=3, stride=2)
        return torch.cat([branch3x3, branch3x3dbl, branch_pool], 1)


class InceptionC(nn.Module):
    def __init__(self, in_channels, channels_7x7):
        super().__init__()
        c7 = channels_7x7
        self.branch1x1 = BasicConv2d(in_channels, c(192), kernel_size=1)
        self.branch7x7_1 = BasicConv2d(in_channels, c7, kernel_size=1)
        self.branch7x7_2 = BasicConv2d(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7_3 = BasicConv2d(c7, c(192), kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = BasicConv2d(in_channels, c7, kernel_size=1)
        self.branch7x7dbl_2 = BasicConv2d(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = BasicConv2d(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = BasicConv2d(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = BasicConv2d(c7, c(192), kernel_size=(1, 7), padding=(0, 3))
        self.branch_pool = BasicConv2d(in_channels, c(192), kernel_size=1)


class InceptionD(nn.Module):
    def __init__(self, in_channels):
        super().__init__()
        self.branch3x3_1 = BasicConv2d(in_channels, c(192), kernel_size=1)
        self.branch3x3_2 = BasicConv2d(c(192), c(320), kernel_size=3, stride=2)
        self.branch7x7x3_1 = BasicConv2d(in_channels, c(192), kernel_size=1)
        self.branch7x7x3_2 = BasicConv2d(c(192), c(192), kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7x3_3 = BasicConv2d(c(192), c(192), kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7x3_4 = BasicConv2d(c(192), c(192), kernel_size=3, stride=2)

    def forward(self, x):
        branch3x3 = self.branch3x3_2(self.branch3x3_1(x))
        branch7x7x3 = self.branch7x7x3_4(self.branch7x7x3_3(self.branch7x7x3_2(self.branch7x7x3_1(x))))
        branch_pool = F.max_pool2d(x, kernel_size=3, stride=2)
        return torch.cat([branch3x3, branch7x7x3, branch_pool], 1)


class InceptionE(nn.Module):
    def __init__(self, in_channels):
        super().__init__()
        self.branch1x1 = BasicConv2d(in_channels, c(320), kernel_size=1)
        self.branch3x3_1 = BasicConv2d(in_channels, c(384), kernel_size=1)
        self.branch3x3_2a = BasicConv2d(c(384), c(384), kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3_2b = BasicConv2d(c(384), c(384), kernel_size=(3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = BasicConv2d(in_channels, c(448), kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(c(448), c(384), kernel_size=3, padding=1)
        self.branch3x3dbl_3a = BasicConv2d(c(384), c(384), kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = BasicConv2d(c(384), c(384), kernel_size=(3, 1), padding=(1, 0))
        self.branch_pool = BasicConv2d(in_channels, c(192), kernel_size=1)


class Inception3(nn.Module):
    """torchvision's Inception3 trunk (aux_logits=False), widths divided by W."""

    def __init__(self, num_classes=1000):
        super().__init__()
        self.Conv2d_1a_3x3 = BasicConv2d(3, c(32), kernel_size=3, stride=2)
        self.Conv2d_2a_3x3 = BasicConv2d(c(32), c(32), kernel_size=3)
        self.Conv2d_2b_3x3 = BasicConv2d(c(32), c(64), kernel_size=3, padding=1)
        self.Conv2d_3b_1x1 = BasicConv2d(c(64), c(80), kernel_size=1)
        self.Conv2d_4a_3x3 = BasicConv2d(c(80), c(192), kernel_size=3)
        self.Mixed_5b = InceptionA(c(192), pool_features=c(32))
        self.Mixed_5c = InceptionA(c(256), pool_features=c(64))
        self.Mixed_5d = InceptionA(c(288), pool_features=c(64))
        self.Mixed_6a = InceptionB(c(288))
        self.Mixed_6b = InceptionC(c(768), channels_7x7=c(128))
        self.Mixed_6c = InceptionC(c(768), channels_7x7=c(160))
        self.Mixed_6d = InceptionC(c(768), channels_7x7=c(160))
        self.Mixed_6e = InceptionC(c(768), channels_7x7=c(192))
        self.Mixed_7a = InceptionD(c(768))
        self.Mixed_7b = InceptionE(c(1280))
        self.Mixed_7c = InceptionE(c(2048))
        self.fc = nn.Linear(c(2048), num_classes)


def _inception_v3(num_classes=1000, aux_logits=False, weights=None, init_weights=False):
    """Wraps `torchvision.models.inception_v3` (here: the shrunk Inception3 above)"""
    assert weights is None and not aux_logits
    return Inception3(num_classes=num_classes)


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True):
    """torch.hub stand-in: the file is expected in the hub cache (nothing is downloaded here)."""
    cached_file = os.path.join(model_dir or os.path.join(HUB_DIR, "checkpoints"), os.path.basename(url))
    if progress:
        print("Loading {} from the hub cache".format(os.path.basename(url)))
    return torch.load(cached_file, map_location=map_location)


# ------------------------------------------------------------- pytorch_fid/inception.py
class InceptionV3(nn.Module):
    """Pretrained InceptionV3 network returning feature maps"""

    DEFAULT_BLOCK_INDEX = 3
    # Maps feature dimensionality to their output blocks indices (64/192/768/2048 divided by W)
    BLOCK_INDEX_BY_DIM = {c(64): 0, c(192): 1, c(768): 2, c(2048): 3}

    def __init__(self, output_blocks=(DEFAULT_BLOCK_INDEX,), resize_input=True, normalize_input=True,
                 requires_grad=False, use_fid_inception=True):
        super(InceptionV3, self).__init__()
        self.resize_input = resize_input
        self.normalize_input = normalize_input
        self.output_blocks = sorted(output_blocks)
        self.last_needed_block = max(output_blocks)
        assert self.last_needed_block <= 3, "Last possible output block index is 3"
        self.blocks = nn.ModuleList()

        if use_fid_inception:
            inception = fid_inception_v3()
        else:  # torchvision's ImageNet weights: not available here
            raise NotImplementedError("only the FID Inception is available in this copy")

        # Block 0: input to maxpool1
        block0 = [inception.Conv2d_1a_3x3, inception.Conv2d_2a_3x3, inception.Conv2d_2b_3x3,
                  nn.MaxPool2d(kernel_size=3, stride=2)]
        self.blocks.append(nn.Sequential(*block0))
        # Block 1: maxpool1 to maxpool2
        if self.last_needed_block >= 1:
            block1 = [inception.Conv2d_3b_1x1, inception.Conv2d_4a_3x3, nn.MaxPool2d(kernel_size=3, stride=2)]
            self.blocks.append(nn.Sequential(*block1))
        # Block 2: maxpool2 to aux classifier
        if self.last_needed_block >= 2:
            block2 = [inception.Mixed_5b, inception.Mixed_5c, inception.Mixed_5d, inception.Mixed_6a,
                      inception.Mixed_6b, inception.Mixed_6c, inception.Mixed_6d, inception.Mixed_6e]
            self.blocks.append(nn.Sequential(*block2))
        # Block 3: aux classifier to final avgpool
        if self.last_needed_block >= 3:
            block3 = [inception.Mixed_7a, inception.Mixed_7b, inception.Mixed_7c,
                      nn.AdaptiveAvgPool2d(output_size=(1, 1))]
            self.blocks.append(nn.Sequential(*block3))

        for param in self.parameters():
            param.requires_grad = requires_grad

    def forward(self, inp):
        outp = []
        x = inp
        if self.resize_input:
            x = F.interpolate(x, size=(RESIZE, RESIZE), mode="bilinear", align_corners=False)
        if self.normalize_input:
            x = 2 * x - 1  # Scale from range (0, 1) to range (-1, 1)
        for idx, block in enumerate(self.blocks):
            x = block(x)
            if idx in self.output_blocks:
                outp.append(x)
            if idx == self.last_needed_block:
                break
        return outp


def fid_inception_v3():
    """Build pretrained Inception model for FID computation"""
    inception = _inception_v3(num_classes=1008, aux_logits=False, weights=None)
    inception.Mixed_5b = FIDInceptionA(c(192), pool_features=c(32))
    inception.Mixed_5c = FIDInceptionA(c(256), pool_features=c(64))
    inception.Mixed_5d = FIDInceptionA(c(288), pool_features=c(64))
    inception.Mixed_6b = FIDInceptionC(c(768), channels_7x7=c(128))
    inception.Mixed_6c = FIDInceptionC(c(768), channels_7x7=c(160))
    inception.Mixed_6d = FIDInceptionC(c(768), channels_7x7=c(160))
    inception.Mixed_6e = FIDInceptionC(c(768), channels_7x7=c(192))
    inception.Mixed_7b = FIDInceptionE_1(c(1280))
    inception.Mixed_7c = FIDInceptionE_2(c(2048))

    state_dict = load_state_dict_from_url(FID_WEIGHTS_URL, progress=True)
    inception.load_state_dict(state_dict)
    return inception


class FIDInceptionA(InceptionA):
    """InceptionA block patched for FID computation"""

    def forward(self, x):
        branch1x1 = self.branch1x1(x)
        branch5x5 = self.branch5x5_2(self.branch5x5_1(x))
        branch3x3dbl = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        # Patch: Tensorflow's average pool does not use the padded zero's in its average calculation
        branch_pool = F.avg_pool2d(x, kernel_size=3, stride=1, padding=1, count_include_pad=False)
        branch_pool = self.branch_pool(branch_pool)
        return torch.cat([branch1x1, branch5x5, branch3x3dbl, branch_pool], 1)


class FIDInceptionC(InceptionC):
    """InceptionC block patched for FID computation"""

    def forward(self, x):
        branch1x1 = self.branch1x1(x)
        branch7x7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        branch7x7dbl = self.branch7x7dbl_1(x)
        branch7x7dbl = self.branch7x7dbl_3(self.branch7x7dbl_2(branch7x7dbl))
        branch7x7dbl = self.branch7x7dbl_5(self.branch7x7dbl_4(branch7x7dbl))
        # Patch: Tensorflow's average pool does not use the padded zero's in its average calculation
        branch_pool = F.avg_pool2d(x, kernel_size=3, stride=1, padding=1, count_include_pad=False)
        branch_pool = self.branch_pool(branch_pool)
        return torch.cat([branch1x1, branch7x7, branch7x7dbl, branch_pool], 1)


class FIDInceptionE_1(InceptionE):
    """First InceptionE block patched for FID computation"""

    def _branches(self, x):
        branch1x1 = self.branch1x1(x)
        branch3x3 = self.branch3x3_1(x)
        branch3x3 = torch.cat([self.branch3x3_2a(branch3x3), self.branch3x3_2b(branch3x3)], 1)
        branch3x3dbl = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        branch3x3dbl = torch.cat([self.branch3x3dbl_3a(branch3x3dbl), self.branch3x3dbl_3b(branch3x3dbl)], 1)
        return branch1x1, branch3x3, branch3x3dbl

    def forward(self, x):
        branch1x1, branch3x3, branch3x3dbl = self._branches(x)
        # Patch: Tensorflow's average pool does not use the padded zero's in its average calculation
        branch_pool = F.avg_pool2d(x, kernel_size=3, stride=1, padding=1, count_include_pad=False)
        branch_pool = self.branch_pool(branch_pool)
        return torch.cat([branch1x1, branch3x3, branch3x3dbl, branch_pool], 1)


class FIDInceptionE_2(FIDInceptionE_1):
    """Second InceptionE block patched for FID computation"""

    def forward(self, x):
        branch1x1, branch3x3, branch3x3dbl = self._branches(x)
        # Patch: The FID Inception model uses max pooling instead of average pooling.
        branch_pool = F.max_pool2d(x, kernel_size=3, stride=1, padding=1)
        branch_pool = self.branch_pool(branch_pool)
        return torch.cat([branch1x1, branch3x3, branch3x3dbl, branch_pool], 1)


# ------------------------------------------------------------- pytorch_fid/fid_score.py
parser = ArgumentParser(formatter_class=ArgumentDefaultsHelpFormatter)
parser.add_argument("--batch-size", type=int, default=50, help="Batch size to use")
parser.add_argument("--num-workers", type=int, help="Number of processes to use for data loading.")
parser.add_argument("--device", type=str, default=None, help="Device to use. Like cuda, cuda:0 or cpu")
parser.add_argument("--dims", type=int, default=c(2048), choices=list(InceptionV3.BLOCK_INDEX_BY_DIM),
                    help="Dimensionality of Inception features to use. By default, uses pool3 features")
parser.add_argument("--save-stats", action="store_true",
                    help="Generate an npz archive from a directory of samples.")
parser.add_argument("path", type=str, nargs=2, help="Paths to the generated images or to .npz statistic files")

IMAGE_EXTENSIONS = {"bmp", "jpg", "jpeg", "pgm", "png", "ppm", "tif", "tiff", "webp"}


def read_ppm_rgb(path):
    """Binary PPM (P6) reader standing in for ``Image.open(path).convert("RGB")``."""
    with open(path, "rb") as f:
        assert f.readline().strip() == b"P6"
        w, h = map(int, f.readline().split())
        assert int(f.readline()) == 255
        return np.frombuffer(f.read(w * h * 3), dtype=np.uint8).reshape(h, w, 3)


def to_tensor(img):  # torchvision.transforms.ToTensor
    return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))).float().div(255)


class ImagePathDataset(torch.utils.data.Dataset):
    def __init__(self, files, transforms=None):
        self.files = files
        self.transforms = transforms

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        path = self.files[i]
        img = read_ppm_rgb(path)
        if self.transforms is not None:
            img = self.transforms(img)
        return img


def get_activations(files, model, batch_size=50, dims=2048, device="cpu", num_workers=1):
    """Calculates the activations of the pool_3 layer for all images."""
    model.eval()
    if batch_size > len(files):
        print("Warning: batch size is bigger than the data size. Setting batch size to data size")
        batch_size = len(files)

    dataset = ImagePathDataset(files, transforms=to_tensor)
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=False, drop_last=False,
                                             num_workers=num_workers)
    pred_arr = np.empty((len(files), dims))
    start_idx = 0
    for batch in tqdm(dataloader):
        batch = batch.to(device)
        with torch.no_grad():
            pred = model(batch)[0]
        # If model output is not scalar, apply global spatial average pooling.
        # This happens if you choose a dimensionality not equal 2048.
        if pred.size(2) != 1 or pred.size(3) != 1:
            pred = adaptive_avg_pool2d(pred, output_size=(1, 1))
        pred = pred.squeeze(3).squeeze(2).cpu().numpy()
        pred_arr[start_idx:start_idx + pred.shape[0]] = pred
        start_idx = start_idx + pred.shape[0]
    return pred_arr


def calculate_frechet_distance(mu1, sigma1, mu2, sigma2, eps=1e-6):
    """Numpy implementation of the Frechet Distance (stable version by Dougal J. Sutherland)."""
    mu1 = np.atleast_1d(mu1)
    mu2 = np.atleast_1d(mu2)
    sigma1 = np.atleast_2d(sigma1)
    sigma2 = np.atleast_2d(sigma2)
    assert mu1.shape == mu2.shape, "Training and test mean vectors have different lengths"
    assert sigma1.shape == sigma2.shape, "Training and test covariances have different dimensions"
    diff = mu1 - mu2

    # Product might be almost singular
    covmean, _ = linalg.sqrtm(sigma1.dot(sigma2), disp=False)
    if not np.isfinite(covmean).all():
        msg = ("fid calculation produces singular product; adding %s to diagonal of cov estimates") % eps
        print(msg)
        offset = np.eye(sigma1.shape[0]) * eps
        covmean = linalg.sqrtm((sigma1 + offset).dot(sigma2 + offset))

    # Numerical error might give slight imaginary component
    if np.iscomplexobj(covmean):
        if not np.allclose(np.diagonal(covmean).imag, 0, atol=1e-3):
            m = np.max(np.abs(covmean.imag))
            raise ValueError("Imaginary component {}".format(m))
        covmean = covmean.real
    tr_covmean = np.trace(covmean)
    return diff.dot(diff) + np.trace(sigma1) + np.trace(sigma2) - 2 * tr_covmean


def calculate_activation_statistics(files, model, batch_size=50, dims=2048, device="cpu", num_workers=1):
    """Calculation of the statistics used by the FID."""
    act = get_activations(files, model, batch_size, dims, device, num_workers)
    mu = np.mean(act, axis=0)
    sigma = np.cov(act, rowvar=False)
    return mu, sigma


def compute_statistics_of_path(path, model, batch_size, dims, device, num_workers=1):
    if path.endswith(".npz"):
        with np.load(path) as f:
            m, s = f["mu"][:], f["sigma"][:]
    else:
        path = pathlib.Path(path)
        files = sorted([file for ext in IMAGE_EXTENSIONS for file in path.glob("*.{}".format(ext))])
        m, s = calculate_activation_statistics(files, model, batch_size, dims, device, num_workers)
    return m, s


def calculate_fid_given_paths(paths, batch_size, device, dims, num_workers=1):
    """Calculates the FID of two paths"""
    for p in paths:
        if not os.path.exists(p):
            raise RuntimeError("Invalid path: %s" % p)
    block_idx = InceptionV3.BLOCK_INDEX_BY_DIM[dims]
    model = InceptionV3([block_idx]).to(device)
    m1, s1 = compute_statistics_of_path(paths[0], model, batch_size, dims, device, num_workers)
    m2, s2 = compute_statistics_of_path(paths[1], model, batch_size, dims, device, num_workers)
    fid_value = calculate_frechet_distance(m1, s1, m2, s2)
    return fid_value


def save_fid_stats(paths, batch_size, device, dims, num_workers=1):
    """Saves FID statistics of one path"""
    if not os.path.exists(paths[0]):
        raise RuntimeError("Invalid path: %s" % paths[0])
    if os.path.exists(paths[1]):
        raise RuntimeError("Existing output file: %s" % paths[1])
    block_idx = InceptionV3.BLOCK_INDEX_BY_DIM[dims]
    model = InceptionV3([block_idx]).to(device)
    print(f"Saving statistics for {paths[0]}")
    m1, s1 = compute_statistics_of_path(paths[0], model, batch_size, dims, device, num_workers)
    np.savez_compressed(paths[1], mu=m1, sigma=s1)


def main(argv):
    args = parser.parse_args(argv)
    if args.device is None:
        device = torch.device("cuda" if (torch.cuda.is_available()) else "cpu")
    else:
        device = torch.device(args.device)
    num_workers = 0 if args.num_workers is None else args.num_workers  # min(8, num_cpus) in the original

    if args.save_stats:
        save_fid_stats(args.path, args.batch_size, device, args.dims, num_workers)
        return None
    fid_value = calculate_fid_given_paths(args.path, args.batch_size, device, args.dims, num_workers)
    print("FID: ", fid_value)
    return fid_value


def write_image_folder(folder, n, seed, shift=0.0, side=32):
    """Smooth random colour fields saved as binary PPM files."""
    rng = np.random.RandomState(seed)
    os.makedirs(folder)
    yy, xx = np.mgrid[0:side, 0:side] / float(side)
    for i in range(n):
        f = rng.uniform(1, 4, size=(3, 2))
        ph = rng.uniform(0, 2 * np.pi, size=3)
        img = np.stack([0.5 + 0.4 * np.sin(2 * np.pi * (f[k, 0] * xx + f[k, 1] * yy) + ph[k]) for k in range(3)], -1)
        img = np.clip(img + shift + 0.05 * rng.randn(side, side, 3), 0, 1)
        with open(os.path.join(folder, "img_{:04d}.ppm".format(i)), "wb") as fh:
            fh.write(b"P6\n%d %d\n255\n" % (side, side))
            fh.write((img * 255).astype(np.uint8).tobytes())


def write_fid_weights(hub_dir):
    """Stands in for the released pt_inception weights: a seeded FID-Inception state dict in the hub cache."""
    torch.manual_seed(0)
    inception = _inception_v3(num_classes=1008, aux_logits=False, weights=None)
    for name, mod in [("Mixed_5b", FIDInceptionA(c(192), c(32))), ("Mixed_5c", FIDInceptionA(c(256), c(64))),
                      ("Mixed_5d", FIDInceptionA(c(288), c(64))), ("Mixed_6b", FIDInceptionC(c(768), c(128))),
                      ("Mixed_6c", FIDInceptionC(c(768), c(160))), ("Mixed_6d", FIDInceptionC(c(768), c(160))),
                      ("Mixed_6e", FIDInceptionC(c(768), c(192))), ("Mixed_7b", FIDInceptionE_1(c(1280))),
                      ("Mixed_7c", FIDInceptionE_2(c(2048)))]:
        setattr(inception, name, mod)
    trunk = nn.Sequential(*[getattr(inception, n) for n in (
        "Conv2d_1a_3x3", "Conv2d_2a_3x3", "Conv2d_2b_3x3", "Conv2d_3b_1x1", "Conv2d_4a_3x3", "Mixed_5b", "Mixed_5c",
        "Mixed_5d", "Mixed_6a", "Mixed_6b", "Mixed_6c", "Mixed_6d", "Mixed_6e", "Mixed_7a", "Mixed_7b", "Mixed_7c")])
    for m in inception.modules():  # "pretrained" batch-norm statistics: one cumulative pass over noise images
        if isinstance(m, nn.BatchNorm2d):
            m.momentum = None
    with torch.no_grad():
        trunk(F.interpolate(torch.rand(32, 3, 32, 32), size=(RESIZE, RESIZE), mode="bilinear") * 2 - 1)
    os.makedirs(os.path.join(hub_dir, "checkpoints"))
    torch.save(inception.state_dict(), os.path.join(hub_dir, "checkpoints", os.path.basename(FID_WEIGHTS_URL)))


if __name__ == "__main__":
    tmp = tempfile.mkdtemp(prefix="fid_")
    try:
        HUB_DIR = os.path.join(tmp, "hub")
        write_fid_weights(HUB_DIR)
        real, fake, far = os.path.join(tmp, "real"), os.path.join(tmp, "fake"), os.path.join(tmp, "far")
        write_image_folder(real, 40, seed=1)
        write_image_folder(fake, 40, seed=2)
        write_image_folder(far, 24, seed=3, shift=0.3)
        stats = os.path.join(tmp, "real_stats.npz")
        main(["--batch-size", "16", "--dims", str(c(192)), "--save-stats", real, stats])
        fid_same = main(["--batch-size", "16", "--dims", str(c(192)), stats, fake])
        fid_far = main(["--batch-size", "16", "--dims", str(c(192)), stats, far])
        fid_pool3 = main(["--batch-size", "16", real, fake])
        print("done fid_same={:.4f} fid_far={:.4f} fid_pool3={:.4f}".format(fid_same, fid_far, fid_pool3))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
