"""Trains the PSMNet stereo-matching network (stacked-hourglass variant) the way PSMNet's main.py pre-trains it on
SceneFlow (dense disparities, smooth L1 on the three hourglass outputs where the disparity is below `maxdisp`, a
checkpoint per epoch, then the end-point error on test pairs padded to multiples of 16), and then runs submission.py
on unlabelled pairs: the checkpoint is loaded into `DataParallel(model, device_ids=[0])` and the padded predictions
are cropped and written as uint16 disparity maps (x256).

Modeled on: JiaRenChang/PSMNet, main.py, submission.py, models/stackhourglass.py, models/submodule.py,
dataloader/SecenFlowLoader.py, dataloader/listflowfile.py and dataloader/preprocess.py at commit
87ac9093afbf6545c093bd9d26c5ffd66e49a7b8
(https://github.com/JiaRenChang/PSMNet/blob/87ac9093afbf6545c093bd9d26c5ffd66e49a7b8/main.py and the other files at
the same commit).

Kept: the `--no-cuda` flag with `args.cuda = not args.no_cuda and torch.cuda.is_available()`, `torch.manual_seed`
and `torch.cuda.manual_seed` under `if args.cuda:`; the model built on the host and, `if args.cuda:`, wrapped in
`nn.DataParallel(model)` then `model.cuda()` (submission.py: `nn.DataParallel(model, device_ids=[0])`);
`torch.load(args.loadmodel)` without `map_location` and `load_state_dict(...['state_dict'])` after the move; Adam
built after it; main.py's `train` (`model.train()`, `imgL.cuda()`, `imgR.cuda()`, `disp_L.cuda()` under `args.cuda`,
`mask = disp_true < args.maxdisp` with `mask.detach_()`, the weighted `smooth_l1_loss(..., size_average=True)` on
the masked outputs, `return loss.data`, summed into the epoch loss) and `test` (`model.eval()`, the moves, padding
with `F.pad`, the forward under `torch.no_grad()`, `torch.squeeze`, cropping `top_pad`, the masked L1 and
`loss.data.cpu()`), `adjust_learning_rate` and `main` (`torch.save` of `model.state_dict()` and the train loss each
epoch, then the test loop and `testinformation.tar`); submission.py's `test` (`imgL.cuda()`/`imgR.cuda()` under
`args.cuda`, `torch.squeeze(output).data.cpu().numpy()`) and its padding/cropping; models/: `convbn`, `convbn_3d`,
`BasicBlock`, `disparityregression` (its disparity values made in `__init__` with
`torch.Tensor(np.reshape(np.array(range(maxdisp)), ...)).cuda()`, the module built inside every forward),
`feature_extraction` with its SPP branches and `F.upsample`, `hourglass`, `PSMNet.forward` (the cost volume made with
`Variable(torch.FloatTensor(...).zero_()).cuda()` and filled by slicing, the three classifiers, trilinear
`F.upsample`, softmax over disparities, three outputs in training and one in eval) and the weight initialisation; the
loader's random training crops and the ImageNet normalisation.

Changed to run here: the model code calls `.cuda()` unconditionally (the cost volume, the disparity values), which
fails with `--no-cuda` on a machine without a GPU; here those two calls are made `if torch.cuda.is_available()`, and
submission.py's `DataParallel(..., device_ids=[0])`/`model.cuda()` are under `args.cuda` (so the checkpoint keys
match on a CPU); main.py's `train` only defines `disp_true` under `args.cuda`, so an `else: disp_true = disp_L` is
added; the `basic` model, finetune.py (Python 2 only) and the per-iteration prints are left out; images and PFM/PNG
files are replaced by synthetic stereo pairs (a textured background plane and a nearer rectangle, the right view
shifted by the disparity) stored as `.npy` files in a temporary folder, PIL/torchvision transforms by the same
normalisation in numpy and listflowfile's SceneFlow folder walk by a listing of that folder; the two scripts are
functions taking argument lists and sharing module globals (`args`, `model`, `optimizer`, the loaders);
`num_workers` is 0; submission writes `.npy` files; the test mask is `< args.maxdisp` instead of `< 192`.
Shrunk: `maxdisp` 192 -> 32; feature extraction layer2 16 -> 2 blocks, layer3/layer4 3 -> 1 block, SPP pools
64/32/16/8 -> 8/4/2/1; training crops 256x512 -> 32x64; SceneFlow-style pairs 540x960 -> 40x80 (padded to 48x80 for
the test), KITTI-style submission pairs 46x100 (padded to 48x112); 6 training, 2 test and 2 submission pairs; batch
12/8 -> 2; 10 epochs -> 2.
"""
from __future__ import print_function
import argparse
import math
import os
import random
import shutil
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data
from torch.autograd import Variable


# ----------------------------------------------------------------------------- models/submodule.py

def convbn(in_planes, out_planes, kernel_size, stride, pad, dilation):
    return nn.Sequential(nn.Conv2d(in_planes, out_planes, kernel_size=kernel_size, stride=stride,
                                   padding=dilation if dilation > 1 else pad, dilation=dilation, bias=False),
                         nn.BatchNorm2d(out_planes))


def convbn_3d(in_planes, out_planes, kernel_size, stride, pad):
    return nn.Sequential(nn.Conv3d(in_planes, out_planes, kernel_size=kernel_size, padding=pad, stride=stride,
                                   bias=False),
                         nn.BatchNorm3d(out_planes))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride, downsample, pad, dilation):
        super(BasicBlock, self).__init__()
        self.conv1 = nn.Sequential(convbn(inplanes, planes, 3, stride, pad, dilation), nn.ReLU(inplace=True))
        self.conv2 = convbn(planes, planes, 3, 1, pad, dilation)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        out = self.conv1(x)
        out = self.conv2(out)
        if self.downsample is not None:
            x = self.downsample(x)
        out += x
        return out


class disparityregression(nn.Module):
    def __init__(self, maxdisp):
        super(disparityregression, self).__init__()
        self.disp = torch.Tensor(np.reshape(np.array(range(maxdisp)), [1, maxdisp, 1, 1]))
        if torch.cuda.is_available():
            self.disp = self.disp.cuda()

    def forward(self, x):
        out = torch.sum(x * self.disp.data, 1, keepdim=True)
        return out


class feature_extraction(nn.Module):
    def __init__(self):
        super(feature_extraction, self).__init__()
        self.inplanes = 32
        self.firstconv = nn.Sequential(convbn(3, 32, 3, 2, 1, 1), nn.ReLU(inplace=True),
                                       convbn(32, 32, 3, 1, 1, 1), nn.ReLU(inplace=True),
                                       convbn(32, 32, 3, 1, 1, 1), nn.ReLU(inplace=True))
        self.layer1 = self._make_layer(BasicBlock, 32, 3, 1, 1, 1)
        self.layer2 = self._make_layer(BasicBlock, 64, 2, 2, 1, 1)
        self.layer3 = self._make_layer(BasicBlock, 128, 1, 1, 1, 1)
        self.layer4 = self._make_layer(BasicBlock, 128, 1, 1, 1, 2)
        self.branch1 = nn.Sequential(nn.AvgPool2d((8, 8), stride=(8, 8)), convbn(128, 32, 1, 1, 0, 1),
                                     nn.ReLU(inplace=True))
        self.branch2 = nn.Sequential(nn.AvgPool2d((4, 4), stride=(4, 4)), convbn(128, 32, 1, 1, 0, 1),
                                     nn.ReLU(inplace=True))
        self.branch3 = nn.Sequential(nn.AvgPool2d((2, 2), stride=(2, 2)), convbn(128, 32, 1, 1, 0, 1),
                                     nn.ReLU(inplace=True))
        self.branch4 = nn.Sequential(nn.AvgPool2d((1, 1), stride=(1, 1)), convbn(128, 32, 1, 1, 0, 1),
                                     nn.ReLU(inplace=True))
        self.lastconv = nn.Sequential(convbn(320, 128, 3, 1, 1, 1), nn.ReLU(inplace=True),
                                      nn.Conv2d(128, 32, kernel_size=1, padding=0, stride=1, bias=False))

    def _make_layer(self, block, planes, blocks, stride, pad, dilation):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * block.expansion, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * block.expansion),)
        layers = []
        layers.append(block(self.inplanes, planes, stride, downsample, pad, dilation))
        self.inplanes = planes * block.expansion
        for i in range(1, blocks):
            layers.append(block(self.inplanes, planes, 1, None, pad, dilation))
        return nn.Sequential(*layers)

    def forward(self, x):
        output = self.firstconv(x)
        output = self.layer1(output)
        output_raw = self.layer2(output)
        output = self.layer3(output_raw)
        output_skip = self.layer4(output)
        size = (output_skip.size()[2], output_skip.size()[3])
        output_branch1 = F.upsample(self.branch1(output_skip), size, mode='bilinear')
        output_branch2 = F.upsample(self.branch2(output_skip), size, mode='bilinear')
        output_branch3 = F.upsample(self.branch3(output_skip), size, mode='bilinear')
        output_branch4 = F.upsample(self.branch4(output_skip), size, mode='bilinear')
        output_feature = torch.cat(
            (output_raw, output_skip, output_branch4, output_branch3, output_branch2, output_branch1), 1)
        output_feature = self.lastconv(output_feature)
        return output_feature


# ----------------------------------------------------------------------------- models/stackhourglass.py

class hourglass(nn.Module):
    def __init__(self, inplanes):
        super(hourglass, self).__init__()
        self.conv1 = nn.Sequential(convbn_3d(inplanes, inplanes * 2, kernel_size=3, stride=2, pad=1),
                                   nn.ReLU(inplace=True))
        self.conv2 = convbn_3d(inplanes * 2, inplanes * 2, kernel_size=3, stride=1, pad=1)
        self.conv3 = nn.Sequential(convbn_3d(inplanes * 2, inplanes * 2, kernel_size=3, stride=2, pad=1),
                                   nn.ReLU(inplace=True))
        self.conv4 = nn.Sequential(convbn_3d(inplanes * 2, inplanes * 2, kernel_size=3, stride=1, pad=1),
                                   nn.ReLU(inplace=True))
        self.conv5 = nn.Sequential(nn.ConvTranspose3d(inplanes * 2, inplanes * 2, kernel_size=3, padding=1,
                                                      output_padding=1, stride=2, bias=False),
                                   nn.BatchNorm3d(inplanes * 2))  # +conv2
        self.conv6 = nn.Sequential(nn.ConvTranspose3d(inplanes * 2, inplanes, kernel_size=3, padding=1,
                                                      output_padding=1, stride=2, bias=False),
                                   nn.BatchNorm3d(inplanes))  # +x

    def forward(self, x, presqu, postsqu):
        out = self.conv1(x)  # in:1/4 out:1/8
        pre = self.conv2(out)  # in:1/8 out:1/8
        if postsqu is not None:
            pre = F.relu(pre + postsqu, inplace=True)
        else:
            pre = F.relu(pre, inplace=True)
        out = self.conv3(pre)  # in:1/8 out:1/16
        out = self.conv4(out)  # in:1/16 out:1/16
        if presqu is not None:
            post = F.relu(self.conv5(out) + presqu, inplace=True)  # in:1/16 out:1/8
        else:
            post = F.relu(self.conv5(out) + pre, inplace=True)
        out = self.conv6(post)  # in:1/8 out:1/4
        return out, pre, post


class PSMNet(nn.Module):
    def __init__(self, maxdisp):
        super(PSMNet, self).__init__()
        self.maxdisp = maxdisp
        self.feature_extraction = feature_extraction()
        self.dres0 = nn.Sequential(convbn_3d(64, 32, 3, 1, 1), nn.ReLU(inplace=True),
                                   convbn_3d(32, 32, 3, 1, 1), nn.ReLU(inplace=True))
        self.dres1 = nn.Sequential(convbn_3d(32, 32, 3, 1, 1), nn.ReLU(inplace=True), convbn_3d(32, 32, 3, 1, 1))
        self.dres2 = hourglass(32)
        self.dres3 = hourglass(32)
        self.dres4 = hourglass(32)
        self.classif1 = nn.Sequential(convbn_3d(32, 32, 3, 1, 1), nn.ReLU(inplace=True),
                                      nn.Conv3d(32, 1, kernel_size=3, padding=1, stride=1, bias=False))
        self.classif2 = nn.Sequential(convbn_3d(32, 32, 3, 1, 1), nn.ReLU(inplace=True),
                                      nn.Conv3d(32, 1, kernel_size=3, padding=1, stride=1, bias=False))
        self.classif3 = nn.Sequential(convbn_3d(32, 32, 3, 1, 1), nn.ReLU(inplace=True),
                                      nn.Conv3d(32, 1, kernel_size=3, padding=1, stride=1, bias=False))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                m.weight.data.normal_(0, math.sqrt(2. / n))
            elif isinstance(m, nn.Conv3d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.kernel_size[2] * m.out_channels
                m.weight.data.normal_(0, math.sqrt(2. / n))
            elif isinstance(m, nn.BatchNorm2d) or isinstance(m, nn.BatchNorm3d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()

    def forward(self, left, right):
        refimg_fea = self.feature_extraction(left)
        targetimg_fea = self.feature_extraction(right)
        # matching
        cost = Variable(torch.FloatTensor(refimg_fea.size()[0], refimg_fea.size()[1] * 2, self.maxdisp // 4,
                                          refimg_fea.size()[2], refimg_fea.size()[3]).zero_())
        if torch.cuda.is_available():
            cost = cost.cuda()
        for i in range(self.maxdisp // 4):
            if i > 0:
                cost[:, :refimg_fea.size()[1], i, :, i:] = refimg_fea[:, :, :, i:]
                cost[:, refimg_fea.size()[1]:, i, :, i:] = targetimg_fea[:, :, :, :-i]
            else:
                cost[:, :refimg_fea.size()[1], i, :, :] = refimg_fea
                cost[:, refimg_fea.size()[1]:, i, :, :] = targetimg_fea
        cost = cost.contiguous()
        cost0 = self.dres0(cost)
        cost0 = self.dres1(cost0) + cost0
        out1, pre1, post1 = self.dres2(cost0, None, None)
        out1 = out1 + cost0
        out2, pre2, post2 = self.dres3(out1, pre1, post1)
        out2 = out2 + cost0
        out3, pre3, post3 = self.dres4(out2, pre1, post2)
        out3 = out3 + cost0
        cost1 = self.classif1(out1)
        cost2 = self.classif2(out2) + cost1
        cost3 = self.classif3(out3) + cost2
        if self.training:
            cost1 = F.upsample(cost1, [self.maxdisp, left.size()[2], left.size()[3]], mode='trilinear')
            cost2 = F.upsample(cost2, [self.maxdisp, left.size()[2], left.size()[3]], mode='trilinear')
            cost1 = torch.squeeze(cost1, 1)
            pred1 = F.softmax(cost1, dim=1)
            pred1 = disparityregression(self.maxdisp)(pred1)
            cost2 = torch.squeeze(cost2, 1)
            pred2 = F.softmax(cost2, dim=1)
            pred2 = disparityregression(self.maxdisp)(pred2)
        cost3 = F.upsample(cost3, [self.maxdisp, left.size()[2], left.size()[3]], mode='trilinear')
        cost3 = torch.squeeze(cost3, 1)
        pred3 = F.softmax(cost3, dim=1)
        pred3 = disparityregression(self.maxdisp)(pred3)
        if self.training:
            return pred1, pred2, pred3
        else:
            return pred3


stackhourglass = PSMNet


# ----------------------------------------------------------------------------- synthetic data and dataloader/

def stereo_pair(rng, h, w, far=3, near=11):
    """Left/right views (H x W x 3 in [0, 255]) of a textured background plane and a nearer rectangle."""
    tex = rng.uniform(0, 255, size=(h, w + near, 3))
    tex = (tex + np.roll(tex, 1, 1) + np.roll(tex, 1, 0)) / 3
    disp = np.full((h, w), float(far))
    y0, x0 = rng.randint(0, h // 2), rng.randint(near, w // 2)
    disp[y0:y0 + h // 2, x0:x0 + w // 3] = near
    cols = np.arange(w)[None, :] + near - disp.astype(int)
    left = tex[:, near:near + w]
    right = np.empty_like(left)
    right[np.arange(h)[:, None], np.clip(cols - near, 0, w - 1)] = left  # right(x - d) = left(x)
    right[:, w - far:] = tex[:, w + near - far:w + near]
    return left.astype(np.uint8), right.astype(np.uint8), disp.astype(np.float32)


def write_pairs(folder, n, h, w, seed):
    rng = np.random.RandomState(seed)
    for sub in ('left', 'right', 'disp'):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    for i in range(n):
        left, right, disp = stereo_pair(rng, h, w)
        name = '%06d_10.npy' % i
        np.save(os.path.join(folder, 'left', name), left)
        np.save(os.path.join(folder, 'right', name), right)
        np.save(os.path.join(folder, 'disp', name), disp)


def dataloader(filepath, n_train):
    image = sorted(img for img in os.listdir(os.path.join(filepath, 'left')) if img.find('_10') > -1)
    paths = [[os.path.join(filepath, sub, img) for img in image] for sub in ('left', 'right', 'disp')]
    return [p[:n_train] for p in paths] + [p[n_train:] for p in paths]


def processed(img):
    """preprocess.get_transform(augment=False): ToTensor and Normalize with the ImageNet statistics."""
    img = img.astype(np.float32).transpose(2, 0, 1) / 255.0
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    return torch.from_numpy(((img - mean[:, None, None]) / std[:, None, None]).astype(np.float32))


class myImageFloder(torch.utils.data.Dataset):
    def __init__(self, left, right, left_disparity, training):
        self.left = left
        self.right = right
        self.disp_L = left_disparity
        self.training = training

    def __getitem__(self, index):
        left_img = np.load(self.left[index])  # self.loader(left)
        right_img = np.load(self.right[index])
        dataL = np.load(self.disp_L[index])  # self.dploader(disp_L): readPFM
        dataL = np.ascontiguousarray(dataL, dtype=np.float32)
        if self.training:
            h, w = left_img.shape[:2]
            th, tw = 32, 64
            x1 = random.randint(0, w - tw)
            y1 = random.randint(0, h - th)
            left_img = left_img[y1:y1 + th, x1:x1 + tw]
            right_img = right_img[y1:y1 + th, x1:x1 + tw]
            dataL = dataL[y1:y1 + th, x1:x1 + tw]
        return processed(left_img), processed(right_img), dataL

    def __len__(self):
        return len(self.left)


def make_model_and_optimizer(lr):
    global model, optimizer
    if args.model == 'stackhourglass':
        model = stackhourglass(args.maxdisp)
    else:
        print('no model')
    if args.cuda:
        model = nn.DataParallel(model)
        model.cuda()
    if args.loadmodel is not None:
        print('Load pretrained model')
        pretrain_dict = torch.load(args.loadmodel)
        model.load_state_dict(pretrain_dict['state_dict'])
    print('Number of model parameters: {}'.format(sum([p.data.nelement() for p in model.parameters()])))
    optimizer = optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.999))


def parse(argv, datapath, loadmodel, savemodel, epochs):
    global args
    parser = argparse.ArgumentParser(description='PSMNet')
    parser.add_argument('--maxdisp', type=int, default=32, help='maxium disparity')
    parser.add_argument('--model', default='stackhourglass', help='select model')
    parser.add_argument('--datapath', default=datapath, help='datapath')
    parser.add_argument('--epochs', type=int, default=epochs, help='number of epochs to train')
    parser.add_argument('--loadmodel', default=loadmodel, help='load model')
    parser.add_argument('--savemodel', default=savemodel, help='save model')
    parser.add_argument('--no-cuda', action='store_true', default=False, help='enables CUDA training')
    parser.add_argument('--seed', type=int, default=1, metavar='S', help='random seed (default: 1)')
    args = parser.parse_args(argv)
    args.cuda = not args.no_cuda and torch.cuda.is_available()
    torch.manual_seed(args.seed)
    if args.cuda:
        torch.cuda.manual_seed(args.seed)


# ----------------------------------------------------------------------------- main.py (SceneFlow)

def train(imgL, imgR, disp_L):
    model.train()
    if args.cuda:
        imgL, imgR, disp_true = imgL.cuda(), imgR.cuda(), disp_L.cuda()
    else:
        disp_true = disp_L
    mask = disp_true < args.maxdisp
    mask.detach_()
    optimizer.zero_grad()
    output1, output2, output3 = model(imgL, imgR)
    output1 = torch.squeeze(output1, 1)
    output2 = torch.squeeze(output2, 1)
    output3 = torch.squeeze(output3, 1)
    loss = 0.5 * F.smooth_l1_loss(output1[mask], disp_true[mask], size_average=True) + 0.7 * F.smooth_l1_loss(
        output2[mask], disp_true[mask], size_average=True) + F.smooth_l1_loss(output3[mask], disp_true[mask],
                                                                              size_average=True)
    loss.backward()
    optimizer.step()
    return loss.data


def test(imgL, imgR, disp_true):
    model.eval()
    if args.cuda:
        imgL, imgR, disp_true = imgL.cuda(), imgR.cuda(), disp_true.cuda()
    mask = disp_true < args.maxdisp  # 192 in the author's code
    if imgL.shape[2] % 16 != 0:
        times = imgL.shape[2] // 16
        top_pad = (times + 1) * 16 - imgL.shape[2]
    else:
        top_pad = 0
    if imgL.shape[3] % 16 != 0:
        times = imgL.shape[3] // 16
        right_pad = (times + 1) * 16 - imgL.shape[3]
    else:
        right_pad = 0
    imgL = F.pad(imgL, (0, right_pad, top_pad, 0))
    imgR = F.pad(imgR, (0, right_pad, top_pad, 0))
    with torch.no_grad():
        output3 = model(imgL, imgR)
        output3 = torch.squeeze(output3)
    if top_pad != 0:
        img = output3[:, top_pad:, :]
    else:
        img = output3
    if len(disp_true[mask]) == 0:
        loss = 0
    else:
        loss = F.l1_loss(img[mask], disp_true[mask])  # end-point-error
    return loss.data.cpu()


def adjust_learning_rate(optimizer, epoch):
    lr = 0.001
    print(lr)
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr


def sceneflow_main(argv, datapath, savemodel):
    global TrainImgLoader, TestImgLoader
    parse(argv, datapath, None, savemodel, 2)
    all_left_img, all_right_img, all_left_disp, test_left_img, test_right_img, test_left_disp = dataloader(
        args.datapath, 6)
    TrainImgLoader = torch.utils.data.DataLoader(myImageFloder(all_left_img, all_right_img, all_left_disp, True),
                                                 batch_size=2, shuffle=True, num_workers=0, drop_last=False)
    TestImgLoader = torch.utils.data.DataLoader(myImageFloder(test_left_img, test_right_img, test_left_disp, False),
                                                batch_size=2, shuffle=False, num_workers=0, drop_last=False)
    make_model_and_optimizer(0.001)
    start_full_time = time.time()
    for epoch in range(0, args.epochs):
        print('This is %d-th epoch' % (epoch))
        total_train_loss = 0
        adjust_learning_rate(optimizer, epoch)
        # training
        for batch_idx, (imgL_crop, imgR_crop, disp_crop_L) in enumerate(TrainImgLoader):
            loss = train(imgL_crop, imgR_crop, disp_crop_L)
            total_train_loss += loss
        print('epoch %d total training loss = %.3f' % (epoch, total_train_loss / len(TrainImgLoader)))
        # SAVE
        savefilename = args.savemodel + '/checkpoint_' + str(epoch) + '.tar'
        torch.save({'epoch': epoch, 'state_dict': model.state_dict(),
                    'train_loss': total_train_loss / len(TrainImgLoader)}, savefilename)
    print('full training time = %.2f HR' % ((time.time() - start_full_time) / 3600))
    # TEST
    total_test_loss = 0
    for batch_idx, (imgL, imgR, disp_L) in enumerate(TestImgLoader):
        test_loss = test(imgL, imgR, disp_L)
        print('Iter %d test loss = %.3f' % (batch_idx, test_loss))
        total_test_loss += test_loss
    print('total test loss = %.3f' % (total_test_loss / len(TestImgLoader)))
    # SAVE test information
    savefilename = args.savemodel + 'testinformation.tar'
    torch.save({'test_loss': total_test_loss / len(TestImgLoader)}, savefilename)
    return float(total_test_loss / len(TestImgLoader))


# ----------------------------------------------------------------------------- submission.py

def submission_test(imgL, imgR):
    model.eval()
    if args.cuda:
        imgL = imgL.cuda()
        imgR = imgR.cuda()
    with torch.no_grad():
        output = model(imgL, imgR)
    output = torch.squeeze(output).data.cpu().numpy()
    return output


def submission_main(argv, datapath, loadmodel, outdir):
    global model
    parse(argv, datapath, loadmodel, None, 0)
    test_left_img, test_right_img = dataloader(args.datapath, 0)[3:5]
    model = stackhourglass(args.maxdisp)
    if args.cuda:
        model = nn.DataParallel(model, device_ids=[0])
        model.cuda()
    if args.loadmodel is not None:
        state_dict = torch.load(args.loadmodel)
        model.load_state_dict(state_dict['state_dict'])
    saved = []
    for inx in range(len(test_left_img)):
        imgL = processed(np.load(test_left_img[inx]))
        imgR = processed(np.load(test_right_img[inx]))
        # pad to width and hight to 16 times
        if imgL.shape[1] % 16 != 0:
            times = imgL.shape[1] // 16
            top_pad = (times + 1) * 16 - imgL.shape[1]
        else:
            top_pad = 0
        if imgL.shape[2] % 16 != 0:
            times = imgL.shape[2] // 16
            right_pad = (times + 1) * 16 - imgL.shape[2]
        else:
            right_pad = 0
        imgL = F.pad(imgL, (0, right_pad, top_pad, 0)).unsqueeze(0)
        imgR = F.pad(imgR, (0, right_pad, top_pad, 0)).unsqueeze(0)
        pred_disp = submission_test(imgL, imgR)
        if top_pad != 0 or right_pad != 0:
            img = pred_disp[top_pad:, :-right_pad]
        else:
            img = pred_disp
        img = (img * 256).astype('uint16')
        saved.append(os.path.join(outdir, os.path.basename(test_left_img[inx])))
        np.save(saved[-1], img)
    return saved


if __name__ == '__main__':
    random.seed(0)
    root = tempfile.mkdtemp(prefix='psmnet_')
    write_pairs(os.path.join(root, 'SceneFlowData'), 8, 40, 80, seed=1)
    write_pairs(os.path.join(root, 'testing'), 2, 46, 100, seed=3)
    no_cuda = [] if torch.cuda.is_available() else ['--no-cuda']
    epe = sceneflow_main(no_cuda, os.path.join(root, 'SceneFlowData'), root + '/')
    outputs = submission_main(no_cuda, os.path.join(root, 'testing'), root + '/checkpoint_1.tar', root)
    shapes = [np.load(p).shape for p in outputs]
    shutil.rmtree(root, ignore_errors=True)
    print('done: SceneFlow end-point error %.3f, submission disparity maps %s' % (epe, shapes))
