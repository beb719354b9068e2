"""Trains Monodepth2 (self-supervised depth and ego-motion: ResNet-18 depth encoder/decoder, a separate ResNet pose
network, SSIM+L1 reprojection loss with auto-masking, edge-aware smoothness) on synthetic KITTI-like frame triplets,
then resumes from the saved weights and Adam state with stereo frames added, as nianticlabs/monodepth2 does: the
`Trainer` keeps its networks in a ``self.models`` dict moved with ``.to(self.device)`` (``torch.device("cpu" if
self.opt.no_cuda else "cuda")``), moves every entry of the batch dict with ``ipt.to(self.device)``, holds
per-scale `BackprojectDepth`/`Project3D` layers (pixel grids as ``nn.Parameter``) in plain dicts moved one by one,
builds pose matrices with ``torch.zeros(...).to(device=vec.device)``, and reads losses and metrics with ``.cpu()``.

Modeled on: nianticlabs/monodepth2, trainer.py, layers.py, networks/resnet_encoder.py, networks/depth_decoder.py,
networks/pose_decoder.py, datasets/mono_dataset.py, datasets/kitti_dataset.py, options.py, utils.py and train.py
at commit b676244e5a1ca55564eb5d16ab521a48f823af31
(https://github.com/nianticlabs/monodepth2/blob/b676244e5a1ca55564eb5d16ab521a48f823af31/trainer.py,
https://github.com/nianticlabs/monodepth2/blob/b676244e5a1ca55564eb5d16ab521a48f823af31/layers.py).

Kept: trainer.py's `Trainer` for the "separate_resnet" pose network with "pairs" input, as written: the device
choice, the models dict with ``.to(self.device)``, Adam and StepLR, `load_model` (filtered state dicts, ``torch.load``
without map_location, the adam.pth state), `BackprojectDepth`/`Project3D`/`SSIM` moved to the device,
`run_epoch` (``losses["loss"].cpu().data``), `process_batch`, `predict_poses`, `val` (``torch.no_grad()``),
`generate_images_pred` (``inputs["stereo_T"]``, ``F.grid_sample``), `compute_losses` (``torch.randn(...,
device=self.device)``), `compute_depth_losses` (``torch.zeros_like(mask)``, ``np.array(depth_errors[i].cpu())``),
`log` and `save_model`; layers.py, `ResnetEncoder`, `DepthDecoder` and `PoseDecoder` as written; the keys made by
`MonoDataset.__getitem__` (``torch.from_numpy(K)``/``inv_K`` per scale, ``depth_gt``, ``stereo_T``); `normalize_image`.

Changed to run here: KITTI is replaced by `SyntheticKITTIDataset` (a random texture panned to make the -1/0/+1 frames
and the other stereo view; scales by average pooling; a brightness jitter for ColorJitter); torchvision's ResNet-18
is a small stand-in with the same attribute names; "scratch" weights; a stub SummaryWriter that logs scalars and
no images but the disparities; ``next(self.val_iter)`` for ``.next()``; depth-metric size and Eigen crop scaled;
options are the few flags used plus fixed values, ``--no_cuda`` is passed when CUDA is not available; the "shared"
and "posecnn" pose networks, ``--predictive_mask`` (its loss uses ``torch.ones(mask.shape).cuda()``),
``--v1_multiscale``, ``--avg_reprojection``, ``--no_ssim`` and `save_opts` are left out.
Shrunk: 192x640 -> 64x96 images, batch 12 -> 2, 4 training / 2 validation items, 2 epochs + 1 resumed epoch,
logging every 2 batches instead of 250.
"""
import argparse
import os
import shutil
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from collections import OrderedDict
from torch.utils.data import DataLoader, Dataset

# ---- utils.py / tensorboardX stand-in ----------------------------------------------------------------------------
def normalize_image(x):
    """Rescale image pixels to span range [0, 1]"""
    ma = float(x.max().cpu().data)
    mi = float(x.min().cpu().data)
    d = ma - mi if ma != mi else 1e5
    return (x - mi) / d

def sec_to_hm_str(t):
    t = int(t)
    return "{:02d}h{:02d}m{:02d}s".format(t // 3600, t // 60 % 60, t % 60)

class SummaryWriter:
    def __init__(self, log_dir):
        self.scalars, self.images = {}, 0
    def add_scalar(self, tag, value, step):
        self.scalars[tag] = float(value)
    def add_image(self, tag, img, step):
        self.images += 1

# ---- layers.py ---------------------------------------------------------------------------------------------------
def disp_to_depth(disp, min_depth, max_depth):
    """Convert network's sigmoid output into depth prediction"""
    min_disp, max_disp = 1 / max_depth, 1 / min_depth
    scaled_disp = min_disp + (max_disp - min_disp) * disp
    depth = 1 / scaled_disp
    return scaled_disp, depth

def transformation_from_parameters(axisangle, translation, invert=False):
    """Convert the network's (axisangle, translation) output into a 4x4 matrix"""
    R = rot_from_axisangle(axisangle)
    t = translation.clone()
    if invert:
        R = R.transpose(1, 2)
        t *= -1
    T = get_translation_matrix(t)
    if invert:
        M = torch.matmul(R, T)
    else:
        M = torch.matmul(T, R)
    return M

def get_translation_matrix(translation_vector):
    """Convert a translation vector into a 4x4 transformation matrix"""
    T = torch.zeros(translation_vector.shape[0], 4, 4).to(device=translation_vector.device)
    t = translation_vector.contiguous().view(-1, 3, 1)
    T[:, 0, 0] = 1
    T[:, 1, 1] = 1
    T[:, 2, 2] = 1
    T[:, 3, 3] = 1
    T[:, :3, 3, None] = t
    return T

def rot_from_axisangle(vec):
    """Convert an axisangle rotation into a 4x4 transformation matrix"""
    angle = torch.norm(vec, 2, 2, True)
    axis = vec / (angle + 1e-7)
    ca, sa = torch.cos(angle), torch.sin(angle)
    C = 1 - ca
    x, y, z = axis[..., 0].unsqueeze(1), axis[..., 1].unsqueeze(1), axis[..., 2].unsqueeze(1)
    xs, ys, zs = x * sa, y * sa, z * sa
    xC, yC, zC = x * C, y * C, z * C
    xyC, yzC, zxC = x * yC, y * zC, z * xC
    rot = torch.zeros((vec.shape[0], 4, 4)).to(device=vec.device)
    rot[:, 0, 0] = torch.squeeze(x * xC + ca)
    rot[:, 0, 1] = torch.squeeze(xyC - zs)
    rot[:, 0, 2] = torch.squeeze(zxC + ys)
    rot[:, 1, 0] = torch.squeeze(xyC + zs)
    rot[:, 1, 1] = torch.squeeze(y * yC + ca)
    rot[:, 1, 2] = torch.squeeze(yzC - xs)
    rot[:, 2, 0] = torch.squeeze(zxC - ys)
    rot[:, 2, 1] = torch.squeeze(yzC + xs)
    rot[:, 2, 2] = torch.squeeze(z * zC + ca)
    rot[:, 3, 3] = 1
    return rot

class ConvBlock(nn.Module):
    """Layer to perform a convolution followed by ELU"""
    def __init__(self, in_channels, out_channels):
        super(ConvBlock, self).__init__()
        self.conv = Conv3x3(in_channels, out_channels)
        self.nonlin = nn.ELU(inplace=True)
    def forward(self, x):
        return self.nonlin(self.conv(x))

class Conv3x3(nn.Module):
    """Layer to pad and convolve input"""
    def __init__(self, in_channels, out_channels, use_refl=True):
        super(Conv3x3, self).__init__()
        self.pad = nn.ReflectionPad2d(1) if use_refl else nn.ZeroPad2d(1)
        self.conv = nn.Conv2d(int(in_channels), int(out_channels), 3)
    def forward(self, x):
        return self.conv(self.pad(x))

class BackprojectDepth(nn.Module):
    """Layer to transform a depth image into a point cloud"""
    def __init__(self, batch_size, height, width):
        super(BackprojectDepth, self).__init__()
        self.batch_size, self.height, self.width = batch_size, height, width
        meshgrid = np.meshgrid(range(self.width), range(self.height), indexing='xy')
        self.id_coords = np.stack(meshgrid, axis=0).astype(np.float32)
        self.id_coords = nn.Parameter(torch.from_numpy(self.id_coords), requires_grad=False)
        self.ones = nn.Parameter(torch.ones(self.batch_size, 1, self.height * self.width), requires_grad=False)
        self.pix_coords = torch.unsqueeze(torch.stack(
            [self.id_coords[0].view(-1), self.id_coords[1].view(-1)], 0), 0)
        self.pix_coords = self.pix_coords.repeat(batch_size, 1, 1)
        self.pix_coords = nn.Parameter(torch.cat([self.pix_coords, self.ones], 1), requires_grad=False)
    def forward(self, depth, inv_K):
        cam_points = torch.matmul(inv_K[:, :3, :3], self.pix_coords)
        cam_points = depth.view(self.batch_size, 1, -1) * cam_points
        cam_points = torch.cat([cam_points, self.ones], 1)
        return cam_points

class Project3D(nn.Module):
    """Layer which projects 3D points into a camera with intrinsics K and at position T"""
    def __init__(self, batch_size, height, width, eps=1e-7):
        super(Project3D, self).__init__()
        self.batch_size, self.height, self.width, self.eps = batch_size, height, width, eps
    def forward(self, points, K, T):
        P = torch.matmul(K, T)[:, :3, :]
        cam_points = torch.matmul(P, points)
        pix_coords = cam_points[:, :2, :] / (cam_points[:, 2, :].unsqueeze(1) + self.eps)
        pix_coords = pix_coords.view(self.batch_size, 2, self.height, self.width)
        pix_coords = pix_coords.permute(0, 2, 3, 1)
        pix_coords[..., 0] /= self.width - 1
        pix_coords[..., 1] /= self.height - 1
        pix_coords = (pix_coords - 0.5) * 2
        return pix_coords

def upsample(x):
    """Upsample input tensor by a factor of 2"""
    return F.interpolate(x, scale_factor=2, mode="nearest")

def get_smooth_loss(disp, img):
    """Computes the smoothness loss for a disparity image; the color image is used for edge-aware smoothness"""
    grad_disp_x = torch.abs(disp[:, :, :, :-1] - disp[:, :, :, 1:])
    grad_disp_y = torch.abs(disp[:, :, :-1, :] - disp[:, :, 1:, :])
    grad_img_x = torch.mean(torch.abs(img[:, :, :, :-1] - img[:, :, :, 1:]), 1, keepdim=True)
    grad_img_y = torch.mean(torch.abs(img[:, :, :-1, :] - img[:, :, 1:, :]), 1, keepdim=True)
    grad_disp_x *= torch.exp(-grad_img_x)
    grad_disp_y *= torch.exp(-grad_img_y)
    return grad_disp_x.mean() + grad_disp_y.mean()

class SSIM(nn.Module):
    """Layer to compute the SSIM loss between a pair of images"""
    def __init__(self):
        super(SSIM, self).__init__()
        self.mu_x_pool, self.mu_y_pool = nn.AvgPool2d(3, 1), nn.AvgPool2d(3, 1)
        self.sig_x_pool, self.sig_y_pool, self.sig_xy_pool = nn.AvgPool2d(3, 1), nn.AvgPool2d(3, 1), nn.AvgPool2d(3, 1)
        self.refl = nn.ReflectionPad2d(1)
        self.C1, self.C2 = 0.01 ** 2, 0.03 ** 2
    def forward(self, x, y):
        x, y = self.refl(x), self.refl(y)
        mu_x, mu_y = self.mu_x_pool(x), self.mu_y_pool(y)
        sigma_x = self.sig_x_pool(x ** 2) - mu_x ** 2
        sigma_y = self.sig_y_pool(y ** 2) - mu_y ** 2
        sigma_xy = self.sig_xy_pool(x * y) - mu_x * mu_y
        SSIM_n = (2 * mu_x * mu_y + self.C1) * (2 * sigma_xy + self.C2)
        SSIM_d = (mu_x ** 2 + mu_y ** 2 + self.C1) * (sigma_x + sigma_y + self.C2)
        return torch.clamp((1 - SSIM_n / SSIM_d) / 2, 0, 1)

def compute_depth_errors(gt, pred):
    """Computation of error metrics between predicted and ground truth depths"""
    thresh = torch.max((gt / pred), (pred / gt))
    a1 = (thresh < 1.25).float().mean()
    a2 = (thresh < 1.25 ** 2).float().mean()
    a3 = (thresh < 1.25 ** 3).float().mean()
    rmse = torch.sqrt(((gt - pred) ** 2).mean())
    rmse_log = torch.sqrt(((torch.log(gt) - torch.log(pred)) ** 2).mean())
    abs_rel, sq_rel = torch.mean(torch.abs(gt - pred) / gt), torch.mean((gt - pred) ** 2 / gt)
    return abs_rel, sq_rel, rmse, rmse_log, a1, a2, a3

# ---- networks/ (torchvision's ResNet-18 as a small stand-in with the same attribute names) ------------------------
class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1):
        super(BasicBlock, self).__init__()
        self.conv1, self.bn1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False), nn.BatchNorm2d(planes)
        self.conv2, self.bn2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False), nn.BatchNorm2d(planes)
        self.downsample = None if stride == 1 and inplanes == planes else nn.Sequential(
            nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))
    def forward(self, x):
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))

class ResNetMultiImageInput(nn.Module):
    """A ResNet-18 with a varying number of input images (torchvision's models.ResNet attributes)."""
    def __init__(self, num_input_images=1):
        super(ResNetMultiImageInput, self).__init__()
        self.conv1 = nn.Conv2d(num_input_images * 3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1, self.relu = nn.BatchNorm2d(64), nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = nn.Sequential(BasicBlock(64, 64), BasicBlock(64, 64))
        self.layer2 = nn.Sequential(BasicBlock(64, 128, 2), BasicBlock(128, 128))
        self.layer3 = nn.Sequential(BasicBlock(128, 256, 2), BasicBlock(256, 256))
        self.layer4 = nn.Sequential(BasicBlock(256, 512, 2), BasicBlock(512, 512))

class ResnetEncoder(nn.Module):
    """Pytorch module for a resnet encoder"""
    def __init__(self, num_layers, pretrained, num_input_images=1):
        super(ResnetEncoder, self).__init__()
        self.num_ch_enc = np.array([64, 64, 128, 256, 512])
        self.encoder = ResNetMultiImageInput(num_input_images)
    def forward(self, input_image):
        self.features = []
        x = (input_image - 0.45) / 0.225
        x = self.encoder.conv1(x)
        x = self.encoder.bn1(x)
        self.features.append(self.encoder.relu(x))
        self.features.append(self.encoder.layer1(self.encoder.maxpool(self.features[-1])))
        self.features.append(self.encoder.layer2(self.features[-1]))
        self.features.append(self.encoder.layer3(self.features[-1]))
        self.features.append(self.encoder.layer4(self.features[-1]))
        return self.features

class DepthDecoder(nn.Module):
    def __init__(self, num_ch_enc, scales=range(4), num_output_channels=1, use_skips=True):
        super(DepthDecoder, self).__init__()
        self.num_output_channels, self.use_skips, self.upsample_mode = num_output_channels, use_skips, 'nearest'
        self.scales, self.num_ch_enc = scales, num_ch_enc
        self.num_ch_dec = np.array([16, 32, 64, 128, 256])
        self.convs = OrderedDict()
        for i in range(4, -1, -1):
            num_ch_in = self.num_ch_enc[-1] if i == 4 else self.num_ch_dec[i + 1]
            num_ch_out = self.num_ch_dec[i]
            self.convs[("upconv", i, 0)] = ConvBlock(num_ch_in, num_ch_out)
            num_ch_in = self.num_ch_dec[i]
            if self.use_skips and i > 0:
                num_ch_in += self.num_ch_enc[i - 1]
            num_ch_out = self.num_ch_dec[i]
            self.convs[("upconv", i, 1)] = ConvBlock(num_ch_in, num_ch_out)
        for s in self.scales:
            self.convs[("dispconv", s)] = Conv3x3(self.num_ch_dec[s], self.num_output_channels)
        self.decoder = nn.ModuleList(list(self.convs.values()))
        self.sigmoid = nn.Sigmoid()
    def forward(self, input_features):
        self.outputs = {}
        x = input_features[-1]
        for i in range(4, -1, -1):
            x = self.convs[("upconv", i, 0)](x)
            x = [upsample(x)]
            if self.use_skips and i > 0:
                x += [input_features[i - 1]]
            x = torch.cat(x, 1)
            x = self.convs[("upconv", i, 1)](x)
            if i in self.scales:
                self.outputs[("disp", i)] = self.sigmoid(self.convs[("dispconv", i)](x))
        return self.outputs

class PoseDecoder(nn.Module):
    def __init__(self, num_ch_enc, num_input_features, num_frames_to_predict_for=None, stride=1):
        super(PoseDecoder, self).__init__()
        self.num_ch_enc, self.num_input_features = num_ch_enc, num_input_features
        if num_frames_to_predict_for is None:
            num_frames_to_predict_for = num_input_features - 1
        self.num_frames_to_predict_for = num_frames_to_predict_for
        self.convs = OrderedDict()
        self.convs[("squeeze")] = nn.Conv2d(self.num_ch_enc[-1], 256, 1)
        self.convs[("pose", 0)] = nn.Conv2d(num_input_features * 256, 256, 3, stride, 1)
        self.convs[("pose", 1)] = nn.Conv2d(256, 256, 3, stride, 1)
        self.convs[("pose", 2)] = nn.Conv2d(256, 6 * num_frames_to_predict_for, 1)
        self.relu = nn.ReLU()
        self.net = nn.ModuleList(list(self.convs.values()))
    def forward(self, input_features):
        last_features = [f[-1] for f in input_features]
        cat_features = [self.relu(self.convs["squeeze"](f)) for f in last_features]
        out = torch.cat(cat_features, 1)
        for i in range(3):
            out = self.convs[("pose", i)](out)
            if i != 2:
                out = self.relu(out)
        out = out.mean(3).mean(2)
        out = 0.01 * out.view(-1, self.num_frames_to_predict_for, 1, 6)
        return out[..., :3], out[..., 3:]

# ---- datasets/mono_dataset.py + kitti_dataset.py (images replaced) -----------------------------------------------
class SyntheticKITTIDataset(Dataset):
    """Frames -1/0/+1 (and the other stereo view "s") panned across one random texture; the keys of MonoDataset."""
    def __init__(self, data_path, filenames, height, width, frame_idxs, num_scales, is_train=False, img_ext='.jpg'):
        super(SyntheticKITTIDataset, self).__init__()
        self.filenames, self.height, self.width, self.num_scales = filenames, height, width, num_scales
        self.frame_idxs, self.is_train = frame_idxs, is_train
        self.K = np.array([[0.58, 0, 0.5, 0], [0, 1.92, 0.5, 0], [0, 0, 1, 0], [0, 0, 0, 1]], dtype=np.float32)
    def get_color(self, folder, frame_index, side, do_flip):
        rng = np.random.RandomState(int(folder))
        texture = torch.from_numpy(rng.uniform(0, 1, (1, 3, self.height // 8, self.width // 4)).astype(np.float32))
        texture = F.interpolate(texture, size=(self.height, 2 * self.width), mode="bilinear")[0]
        offset = 4 * frame_index + (6 if side == "r" else 0)
        color = texture[:, :, offset:offset + self.width]
        return color.flip(2) if do_flip else color
    def __len__(self):
        return len(self.filenames)
    def __getitem__(self, index):
        inputs = {}
        do_color_aug = self.is_train and np.random.random() > 0.5
        do_flip = self.is_train and np.random.random() > 0.5
        folder, frame_index, side = self.filenames[index].split()
        for i in self.frame_idxs:
            if i == "s":
                other_side = {"r": "l", "l": "r"}[side]
                inputs[("color", i, -1)] = self.get_color(folder, int(frame_index), other_side, do_flip)
            else:
                inputs[("color", i, -1)] = self.get_color(folder, int(frame_index) + i, side, do_flip)
        for scale in range(self.num_scales):
            K = self.K.copy()
            K[0, :] *= self.width // (2 ** scale)
            K[1, :] *= self.height // (2 ** scale)
            inv_K = np.linalg.pinv(K)
            inputs[("K", scale)] = torch.from_numpy(K)
            inputs[("inv_K", scale)] = torch.from_numpy(inv_K)
        brightness = np.random.uniform(0.8, 1.2) if do_color_aug else 1.0  # stands in for ColorJitter
        for i in self.frame_idxs:
            for s in range(self.num_scales):
                inputs[("color", i, s)] = F.avg_pool2d(inputs[("color", i, -1)][None], 2 ** s)[0]
                inputs[("color_aug", i, s)] = (inputs[("color", i, s)] * brightness).clamp(0, 1)
            del inputs[("color", i, -1)]
        depth_gt = 5.0 + 20.0 * inputs[("color", 0, 0)].mean(0, keepdim=True).numpy()
        inputs["depth_gt"] = torch.from_numpy(depth_gt.astype(np.float32))
        if "s" in self.frame_idxs:
            stereo_T = np.eye(4, dtype=np.float32)
            baseline_sign = -1 if do_flip else 1
            side_sign = -1 if side == "l" else 1
            stereo_T[0, 3] = side_sign * baseline_sign * 0.1
            inputs["stereo_T"] = torch.from_numpy(stereo_T)
        return inputs

# ---- options.py --------------------------------------------------------------------------------------------------
def parse_options(argv):
    parser = argparse.ArgumentParser(description="Monodepthv2 options")
    parser.add_argument("--log_dir", type=str, default=os.path.join(os.path.expanduser("~"), "tmp"))
    parser.add_argument("--model_name", type=str, default="mdp")
    parser.add_argument("--use_stereo", action="store_true")
    parser.add_argument("--num_epochs", type=int, default=2)
    parser.add_argument("--no_cuda", action="store_true")
    parser.add_argument("--load_weights_folder", type=str)
    opt = parser.parse_args(argv)
    opt.__dict__.update(num_layers=18, height=64, width=96, disparity_smoothness=1e-3, scales=[0, 1, 2, 3],
                        min_depth=0.1, max_depth=100.0, frame_ids=[0, -1, 1], batch_size=2, learning_rate=1e-4,
                        scheduler_step_size=15, disable_automasking=False, weights_init="scratch",
                        pose_model_input="pairs", pose_model_type="separate_resnet", num_workers=0,
                        models_to_load=["encoder", "depth", "pose_encoder", "pose"], log_frequency=2,
                        save_frequency=1)
    return opt

# ---- trainer.py --------------------------------------------------------------------------------------------------
class Trainer:
    def __init__(self, options):
        self.opt = options
        self.log_path = os.path.join(self.opt.log_dir, self.opt.model_name)
        assert self.opt.height % 32 == 0, "'height' must be a multiple of 32"
        assert self.opt.width % 32 == 0, "'width' must be a multiple of 32"
        self.models, self.parameters_to_train = {}, []
        self.device = torch.device("cpu" if self.opt.no_cuda else "cuda")
        self.num_scales = len(self.opt.scales)
        self.num_input_frames = len(self.opt.frame_ids)
        self.num_pose_frames = 2 if self.opt.pose_model_input == "pairs" else self.num_input_frames
        assert self.opt.frame_ids[0] == 0, "frame_ids must start with 0"
        self.use_pose_net = not (self.opt.use_stereo and self.opt.frame_ids == [0])
        if self.opt.use_stereo:
            self.opt.frame_ids.append("s")
        self.models["encoder"] = ResnetEncoder(self.opt.num_layers, self.opt.weights_init == "pretrained")
        self.models["encoder"].to(self.device)
        self.parameters_to_train += list(self.models["encoder"].parameters())
        self.models["depth"] = DepthDecoder(self.models["encoder"].num_ch_enc, self.opt.scales)
        self.models["depth"].to(self.device)
        self.parameters_to_train += list(self.models["depth"].parameters())
        if self.use_pose_net:
            if self.opt.pose_model_type == "separate_resnet":
                self.models["pose_encoder"] = ResnetEncoder(
                    self.opt.num_layers, self.opt.weights_init == "pretrained", num_input_images=self.num_pose_frames)
                self.models["pose_encoder"].to(self.device)
                self.parameters_to_train += list(self.models["pose_encoder"].parameters())
                self.models["pose"] = PoseDecoder(
                    self.models["pose_encoder"].num_ch_enc, num_input_features=1, num_frames_to_predict_for=2)
            self.models["pose"].to(self.device)
            self.parameters_to_train += list(self.models["pose"].parameters())
        self.model_optimizer = optim.Adam(self.parameters_to_train, self.opt.learning_rate)
        self.model_lr_scheduler = optim.lr_scheduler.StepLR(self.model_optimizer, self.opt.scheduler_step_size, 0.1)
        if self.opt.load_weights_folder is not None:
            self.load_model()
        print("Training model named {} on {}".format(self.opt.model_name, self.device))
        train_filenames = ["{} {} l".format(k % 3, 2 + k) for k in range(4)]  # "folder frame side" split lines
        val_filenames = ["{} {} r".format(3 + k, 2) for k in range(2)]
        self.num_total_steps = len(train_filenames) // self.opt.batch_size * self.opt.num_epochs
        train_dataset = SyntheticKITTIDataset(
            None, train_filenames, self.opt.height, self.opt.width, self.opt.frame_ids, 4, is_train=True)
        self.train_loader = DataLoader(train_dataset, self.opt.batch_size, True,
                                       num_workers=self.opt.num_workers, pin_memory=True, drop_last=True)
        val_dataset = SyntheticKITTIDataset(
            None, val_filenames, self.opt.height, self.opt.width, self.opt.frame_ids, 4, is_train=False)
        self.val_loader = DataLoader(val_dataset, self.opt.batch_size, True,
                                     num_workers=self.opt.num_workers, pin_memory=True, drop_last=True)
        self.val_iter = iter(self.val_loader)
        self.writers = {}
        for mode in ["train", "val"]:
            self.writers[mode] = SummaryWriter(os.path.join(self.log_path, mode))
        self.ssim = SSIM()
        self.ssim.to(self.device)
        self.backproject_depth, self.project_3d = {}, {}
        for scale in self.opt.scales:
            h, w = self.opt.height // (2 ** scale), self.opt.width // (2 ** scale)
            self.backproject_depth[scale] = BackprojectDepth(self.opt.batch_size, h, w)
            self.backproject_depth[scale].to(self.device)
            self.project_3d[scale] = Project3D(self.opt.batch_size, h, w)
            self.project_3d[scale].to(self.device)
        self.depth_metric_names = [
            "de/abs_rel", "de/sq_rel", "de/rms", "de/log_rms", "da/a1", "da/a2", "da/a3"]
        print("There are {:d} training items and {:d} validation items\n".format(
            len(train_dataset), len(val_dataset)))
    def set_train(self):
        for m in self.models.values():
            m.train()
    def set_eval(self):
        for m in self.models.values():
            m.eval()
    def train(self):
        self.epoch, self.step, self.start_time = 0, 0, time.time()
        for self.epoch in range(self.opt.num_epochs):
            self.run_epoch()
            if (self.epoch + 1) % self.opt.save_frequency == 0:
                self.save_model()
    def run_epoch(self):
        self.model_lr_scheduler.step()
        print("Training")
        self.set_train()
        for batch_idx, inputs in enumerate(self.train_loader):
            before_op_time = time.time()
            outputs, losses = self.process_batch(inputs)
            self.model_optimizer.zero_grad()
            losses["loss"].backward()
            self.model_optimizer.step()
            duration = time.time() - before_op_time
            early_phase = batch_idx % self.opt.log_frequency == 0 and self.step < 2000
            late_phase = self.step % 2000 == 0
            if early_phase or late_phase:
                self.log_time(batch_idx, duration, losses["loss"].cpu().data)
                if "depth_gt" in inputs:
                    self.compute_depth_losses(inputs, outputs, losses)
                self.log("train", inputs, outputs, losses)
                self.val()
            self.step += 1
    def process_batch(self, inputs):
        for key, ipt in inputs.items():
            inputs[key] = ipt.to(self.device)
        features = self.models["encoder"](inputs["color_aug", 0, 0])
        outputs = self.models["depth"](features)
        if self.use_pose_net:
            outputs.update(self.predict_poses(inputs, features))
        self.generate_images_pred(inputs, outputs)
        losses = self.compute_losses(inputs, outputs)
        return outputs, losses
    def predict_poses(self, inputs, features):
        outputs = {}
        if self.num_pose_frames == 2:
            pose_feats = {f_i: inputs["color_aug", f_i, 0] for f_i in self.opt.frame_ids}
            for f_i in self.opt.frame_ids[1:]:
                if f_i != "s":
                    if f_i < 0:
                        pose_inputs = [pose_feats[f_i], pose_feats[0]]
                    else:
                        pose_inputs = [pose_feats[0], pose_feats[f_i]]
                    pose_inputs = [self.models["pose_encoder"](torch.cat(pose_inputs, 1))]
                    axisangle, translation = self.models["pose"](pose_inputs)
                    outputs[("axisangle", 0, f_i)] = axisangle
                    outputs[("translation", 0, f_i)] = translation
                    outputs[("cam_T_cam", 0, f_i)] = transformation_from_parameters(
                        axisangle[:, 0], translation[:, 0], invert=(f_i < 0))
        return outputs
    def val(self):
        self.set_eval()
        try:
            inputs = next(self.val_iter)
        except StopIteration:
            self.val_iter = iter(self.val_loader)
            inputs = next(self.val_iter)
        with torch.no_grad():
            outputs, losses = self.process_batch(inputs)
            if "depth_gt" in inputs:
                self.compute_depth_losses(inputs, outputs, losses)
            self.log("val", inputs, outputs, losses)
            del inputs, outputs, losses
        self.set_train()
    def generate_images_pred(self, inputs, outputs):
        for scale in self.opt.scales:
            disp = outputs[("disp", scale)]
            disp = F.interpolate(disp, [self.opt.height, self.opt.width], mode="bilinear", align_corners=False)
            source_scale = 0
            _, depth = disp_to_depth(disp, self.opt.min_depth, self.opt.max_depth)
            outputs[("depth", 0, scale)] = depth
            for i, frame_id in enumerate(self.opt.frame_ids[1:]):
                if frame_id == "s":
                    T = inputs["stereo_T"]
                else:
                    T = outputs[("cam_T_cam", 0, frame_id)]
                cam_points = self.backproject_depth[source_scale](depth, inputs[("inv_K", source_scale)])
                pix_coords = self.project_3d[source_scale](cam_points, inputs[("K", source_scale)], T)
                outputs[("sample", frame_id, scale)] = pix_coords
                outputs[("color", frame_id, scale)] = F.grid_sample(
                    inputs[("color", frame_id, source_scale)],
                    outputs[("sample", frame_id, scale)],
                    padding_mode="border")
                if not self.opt.disable_automasking:
                    outputs[("color_identity", frame_id, scale)] = inputs[("color", frame_id, source_scale)]
    def compute_reprojection_loss(self, pred, target):
        abs_diff = torch.abs(target - pred)
        l1_loss = abs_diff.mean(1, True)
        ssim_loss = self.ssim(pred, target).mean(1, True)
        reprojection_loss = 0.85 * ssim_loss + 0.15 * l1_loss
        return reprojection_loss
    def compute_losses(self, inputs, outputs):
        losses = {}
        total_loss = 0
        for scale in self.opt.scales:
            loss = 0
            reprojection_losses = []
            source_scale = 0
            disp = outputs[("disp", scale)]
            color = inputs[("color", 0, scale)]
            target = inputs[("color", 0, source_scale)]
            for frame_id in self.opt.frame_ids[1:]:
                pred = outputs[("color", frame_id, scale)]
                reprojection_losses.append(self.compute_reprojection_loss(pred, target))
            reprojection_losses = torch.cat(reprojection_losses, 1)
            if not self.opt.disable_automasking:
                identity_reprojection_losses = []
                for frame_id in self.opt.frame_ids[1:]:
                    pred = inputs[("color", frame_id, source_scale)]
                    identity_reprojection_losses.append(self.compute_reprojection_loss(pred, target))
                identity_reprojection_losses = torch.cat(identity_reprojection_losses, 1)
                identity_reprojection_loss = identity_reprojection_losses
            reprojection_loss = reprojection_losses
            if not self.opt.disable_automasking:
                identity_reprojection_loss += torch.randn(
                    identity_reprojection_loss.shape, device=self.device) * 0.00001
                combined = torch.cat((identity_reprojection_loss, reprojection_loss), dim=1)
            else:
                combined = reprojection_loss
            if combined.shape[1] == 1:
                to_optimise = combined
            else:
                to_optimise, idxs = torch.min(combined, dim=1)
            if not self.opt.disable_automasking:
                outputs["identity_selection/{}".format(scale)] = (
                    idxs > identity_reprojection_loss.shape[1] - 1).float()
            loss += to_optimise.mean()
            mean_disp = disp.mean(2, True).mean(3, True)
            norm_disp = disp / (mean_disp + 1e-7)
            smooth_loss = get_smooth_loss(norm_disp, color)
            loss += self.opt.disparity_smoothness * smooth_loss / (2 ** scale)
            total_loss += loss
            losses["loss/{}".format(scale)] = loss
        total_loss /= self.num_scales
        losses["loss"] = total_loss
        return losses
    def compute_depth_losses(self, inputs, outputs, losses):
        depth_pred = outputs[("depth", 0, 0)]
        depth_pred = torch.clamp(F.interpolate(
            depth_pred, [self.opt.height, self.opt.width], mode="bilinear", align_corners=False), 1e-3, 80)
        depth_pred = depth_pred.detach()
        depth_gt = inputs["depth_gt"]
        mask = depth_gt > 0
        crop_mask = torch.zeros_like(mask)
        crop_mask[:, :, 26:63, 3:92] = 1
        mask = mask * crop_mask
        depth_gt, depth_pred = depth_gt[mask], depth_pred[mask]
        depth_pred *= torch.median(depth_gt) / torch.median(depth_pred)
        depth_pred = torch.clamp(depth_pred, min=1e-3, max=80)
        depth_errors = compute_depth_errors(depth_gt, depth_pred)
        for i, metric in enumerate(self.depth_metric_names):
            losses[metric] = np.array(depth_errors[i].cpu())
    def log_time(self, batch_idx, duration, loss):
        samples_per_sec = self.opt.batch_size / duration
        time_sofar = time.time() - self.start_time
        training_time_left = (self.num_total_steps / self.step - 1.0) * time_sofar if self.step > 0 else 0
        print_string = "epoch {:>3} | batch {:>6} | examples/s: {:5.1f}" + \
            " | loss: {:.5f} | time elapsed: {} | time left: {}"
        print(print_string.format(self.epoch, batch_idx, samples_per_sec, loss,
                                  sec_to_hm_str(time_sofar), sec_to_hm_str(training_time_left)))
    def log(self, mode, inputs, outputs, losses):
        writer = self.writers[mode]
        for l, v in losses.items():
            writer.add_scalar("{}".format(l), v, self.step)
        for j in range(min(4, self.opt.batch_size)):  # write a maxmimum of four images
            for s in self.opt.scales:
                writer.add_image("disp_{}/{}".format(s, j), normalize_image(outputs[("disp", s)][j]), self.step)
                if not self.opt.disable_automasking:
                    writer.add_image("automask_{}/{}".format(s, j),
                                     outputs["identity_selection/{}".format(s)][j][None, ...], self.step)
    def save_model(self):
        save_folder = os.path.join(self.log_path, "models", "weights_{}".format(self.epoch))
        if not os.path.exists(save_folder):
            os.makedirs(save_folder)
        for model_name, model in self.models.items():
            save_path = os.path.join(save_folder, "{}.pth".format(model_name))
            to_save = model.state_dict()
            if model_name == 'encoder':
                to_save['height'] = self.opt.height
                to_save['width'] = self.opt.width
                to_save['use_stereo'] = self.opt.use_stereo
            torch.save(to_save, save_path)
        save_path = os.path.join(save_folder, "{}.pth".format("adam"))
        torch.save(self.model_optimizer.state_dict(), save_path)
    def load_model(self):
        self.opt.load_weights_folder = os.path.expanduser(self.opt.load_weights_folder)
        assert os.path.isdir(self.opt.load_weights_folder), \
            "Cannot find folder {}".format(self.opt.load_weights_folder)
        print("loading model from folder {}".format(self.opt.load_weights_folder))
        for n in self.opt.models_to_load:
            print("Loading {} weights...".format(n))
            path = os.path.join(self.opt.load_weights_folder, "{}.pth".format(n))
            model_dict = self.models[n].state_dict()
            pretrained_dict = torch.load(path)
            pretrained_dict = {k: v for k, v in pretrained_dict.items() if k in model_dict}
            model_dict.update(pretrained_dict)
            self.models[n].load_state_dict(model_dict)
        optimizer_load_path = os.path.join(self.opt.load_weights_folder, "adam.pth")
        if os.path.isfile(optimizer_load_path):
            print("Loading Adam weights")
            optimizer_dict = torch.load(optimizer_load_path)
            self.model_optimizer.load_state_dict(optimizer_dict)
        else:
            print("Cannot find Adam weights so Adam is randomly initialized")

# ---- train.py ----------------------------------------------------------------------------------------------------
def main():
    folder = tempfile.mkdtemp(prefix="monodepth2_")
    try:
        common = ["--log_dir", folder] + ([] if torch.cuda.is_available() else ["--no_cuda"])
        trainer = Trainer(parse_options(common))
        trainer.train()
        first = dict(trainer.writers["val"].scalars)
        weights = os.path.join(folder, "mdp", "models", "weights_1")
        trainer = Trainer(parse_options(common + ["--model_name", "mdp_stereo", "--use_stereo", "--num_epochs", "1",
                                                  "--load_weights_folder", weights]))
        trainer.train()
        second = dict(trainer.writers["val"].scalars)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print("done: val loss {:.4f} -> {:.4f} (mono+stereo), abs_rel {:.3f}, a1 {:.3f}".format(
        first["loss"], second["loss"], second["de/abs_rel"], second["da/a1"]))

if __name__ == "__main__":
    main()
