"""Trains the LPIPS linear calibration layers (with the BCE ranking head) on synthetic Berkeley-Adobe 2AFC triplets,
saves the calibrated network, then scores the validation split with the saved LPIPS model, the uncalibrated baseline
and L2, as richzhang/PerceptualSimilarity's train.py and test_dataset_model.py do: the device comes from a
``--use_gpu`` flag and ``--gpu_ids``, `Trainer.initialize` builds the Adam optimizer first and then moves the net with
``self.net.to(gpu_ids[0])``, wraps it in ``torch.nn.DataParallel(self.net, device_ids=gpu_ids)`` and moves the ranking
loss with ``.to(device=gpu_ids[0])``; `set_input` moves each dict entry (ref/p0/p1/judge) with
``.to(device=self.gpu_ids[0])``, the accuracy and logged losses are read with ``.cpu().data.numpy()``, the scaling
layer keeps its shift/scale as buffers, saving unwraps ``self.net.module`` when on the GPU, LPIPS loads calibrated
weights with ``torch.load(model_path, map_location='cpu')``, and the 2AFC scorer feeds CPU batches straight into the
(possibly DataParallel) network and reads distances with ``.data.cpu().numpy()``; the L2 metric builds its result
with ``torch.Tensor((value,))`` and ``.cuda()`` when ``use_gpu``.

Modeled on: richzhang/PerceptualSimilarity, train.py, test_dataset_model.py, lpips/trainer.py, lpips/lpips.py,
lpips/__init__.py, lpips/pretrained_networks.py, data/custom_dataset_data_loader.py and
data/dataset/twoafc_dataset.py at commit 082bb24f84c091ea94de2867d34c4544f68e0963
(https://github.com/richzhang/PerceptualSimilarity/blob/082bb24f84c091ea94de2867d34c4544f68e0963/lpips/trainer.py,
https://github.com/richzhang/PerceptualSimilarity/blob/082bb24f84c091ea94de2867d34c4544f68e0963/lpips/lpips.py).

Kept: `Trainer` (`initialize` for lpips/baseline/L2, `forward`, `optimize_parameters`, `clamp_weights`, `set_input`,
`forward_train`, `backward_train`, `compute_accuracy`, `get_current_errors`, `get_current_visuals`, `save`,
`save_network`, `update_learning_rate`), `score_2afc_dataset`, `LPIPS` (scaling layer, per-layer normalisation,
linear layers, spatial average), `ScalingLayer`, `NetLinLayer`, `Dist2LogitLayer`, `BCERankingLoss`, `L2` (RGB),
`normalize_tensor`, `tensor2im`, `l2`, the five-slice `alexnet` wrapper, `TwoAFCDataset` and
`CustomDatasetDataLoader`, train.py's epoch loop (print/display/save frequencies, linear lr decay) and
test_dataset_model.py's loop over datasets.

Changed to run here: torchvision's ImageNet AlexNet features are replaced by a small randomly initialised conv stack
with the same 12-layer/5-slice layout; patches are ``.npy`` arrays (no PIL) already at ``load_size``; ``--use_gpu`` is
passed when ``torch.cuda.is_available()``; `Visualizer` only prints (timings go to train_log.txt only); `load_network`
(which reads an unset ``save_dir``), DSSIM, the Lab colorspace (skimage), the JND dataset and visdom are left out.
Shrunk: 32x32 patches, 96 train / 32 val triplets, trunk channels 16-48, batch 16, 2 + 1 epochs.
"""
import argparse
import os
import shutil
import tempfile
import time
from collections import OrderedDict, namedtuple

import numpy as np
import torch
import torch.nn as nn
from scipy.ndimage import zoom
from torch.autograd import Variable

def normalize_tensor(in_feat, eps=1e-10):
    norm_factor = torch.sqrt(torch.sum(in_feat ** 2, dim=1, keepdim=True))
    return in_feat / (norm_factor + eps)

def l2(p0, p1, range=255.):
    return .5 * np.mean((p0 / range - p1 / range) ** 2)

def tensor2im(image_tensor, imtype=np.uint8, cent=1., factor=255. / 2.):
    image_numpy = image_tensor[0].cpu().float().numpy()
    image_numpy = (np.transpose(image_numpy, (1, 2, 0)) + cent) * factor
    return image_numpy.astype(imtype)

def tiny_alexnet_features():
    """Stand-in for ``tv.alexnet(pretrained=...).features``: same 12 layers, slice boundaries 2/5/8/10/12."""
    g = torch.Generator().manual_seed(1234)  # "pretrained" weights: fixed, identical in every run
    layers = [nn.Conv2d(3, 16, 5, stride=2, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
              nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
              nn.Conv2d(32, 48, 3, padding=1), nn.ReLU(inplace=True), nn.Conv2d(48, 32, 3, padding=1),
              nn.ReLU(inplace=True), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(inplace=True)]
    for layer in layers:
        if isinstance(layer, nn.Conv2d):
            layer.weight.data.normal_(0, (2. / (layer.in_channels * layer.kernel_size[0] ** 2)) ** .5, generator=g)
            layer.bias.data.zero_()
    return nn.Sequential(*layers)

class alexnet(torch.nn.Module):
    def __init__(self, requires_grad=False, pretrained=True):
        super(alexnet, self).__init__()
        alexnet_pretrained_features = tiny_alexnet_features()
        self.slice1 = torch.nn.Sequential()
        self.slice2 = torch.nn.Sequential()
        self.slice3 = torch.nn.Sequential()
        self.slice4 = torch.nn.Sequential()
        self.slice5 = torch.nn.Sequential()
        self.N_slices = 5
        for x in range(2):
            self.slice1.add_module(str(x), alexnet_pretrained_features[x])
        for x in range(2, 5):
            self.slice2.add_module(str(x), alexnet_pretrained_features[x])
        for x in range(5, 8):
            self.slice3.add_module(str(x), alexnet_pretrained_features[x])
        for x in range(8, 10):
            self.slice4.add_module(str(x), alexnet_pretrained_features[x])
        for x in range(10, 12):
            self.slice5.add_module(str(x), alexnet_pretrained_features[x])
        if not requires_grad:
            for param in self.parameters():
                param.requires_grad = False
    def forward(self, X):
        h = self.slice1(X)
        h_relu1 = h
        h = self.slice2(h)
        h_relu2 = h
        h = self.slice3(h)
        h_relu3 = h
        h = self.slice4(h)
        h_relu4 = h
        h = self.slice5(h)
        h_relu5 = h
        alexnet_outputs = namedtuple("AlexnetOutputs", ['relu1', 'relu2', 'relu3', 'relu4', 'relu5'])
        return alexnet_outputs(h_relu1, h_relu2, h_relu3, h_relu4, h_relu5)

def spatial_average(in_tens, keepdim=True):
    return in_tens.mean([2, 3], keepdim=keepdim)

class LPIPS(nn.Module):
    def __init__(self, pretrained=True, net='alex', version='0.1', lpips=True, spatial=False, pnet_rand=False,
                 pnet_tune=False, use_dropout=True, model_path=None, eval_mode=True, verbose=True):
        super(LPIPS, self).__init__()
        if verbose:
            print('Setting up [%s] perceptual loss: trunk [%s], v[%s], spatial [%s]' %
                  ('LPIPS' if lpips else 'baseline', net, version, 'on' if spatial else 'off'))
        self.pnet_type = net
        self.pnet_tune = pnet_tune
        self.pnet_rand = pnet_rand
        self.spatial = spatial
        self.lpips = lpips  # false means baseline of just averaging all layers
        self.version = version
        self.scaling_layer = ScalingLayer()
        net_type = alexnet
        self.chns = [16, 32, 48, 32, 32]
        self.L = len(self.chns)
        self.net = net_type(pretrained=not self.pnet_rand, requires_grad=self.pnet_tune)
        if lpips:
            self.lin0 = NetLinLayer(self.chns[0], use_dropout=use_dropout)
            self.lin1 = NetLinLayer(self.chns[1], use_dropout=use_dropout)
            self.lin2 = NetLinLayer(self.chns[2], use_dropout=use_dropout)
            self.lin3 = NetLinLayer(self.chns[3], use_dropout=use_dropout)
            self.lin4 = NetLinLayer(self.chns[4], use_dropout=use_dropout)
            self.lins = [self.lin0, self.lin1, self.lin2, self.lin3, self.lin4]
            self.lins = nn.ModuleList(self.lins)
            if pretrained:
                if verbose:
                    print('Loading model from: %s' % os.path.basename(model_path))
                self.load_state_dict(torch.load(model_path, map_location='cpu'), strict=False)
        if eval_mode:
            self.eval()
    def forward(self, in0, in1, retPerLayer=False, normalize=False):
        if normalize:  # turn on this flag if input is [0,1] so it can be adjusted to [-1, +1]
            in0 = 2 * in0 - 1
            in1 = 2 * in1 - 1
        in0_input, in1_input = ((self.scaling_layer(in0), self.scaling_layer(in1)) if self.version == '0.1'
                                else (in0, in1))
        outs0, outs1 = self.net.forward(in0_input), self.net.forward(in1_input)
        feats0, feats1, diffs = {}, {}, {}
        for kk in range(self.L):
            feats0[kk], feats1[kk] = normalize_tensor(outs0[kk]), normalize_tensor(outs1[kk])
            diffs[kk] = (feats0[kk] - feats1[kk]) ** 2
        if self.lpips:
            res = [spatial_average(self.lins[kk](diffs[kk]), keepdim=True) for kk in range(self.L)]
        else:
            res = [spatial_average(diffs[kk].sum(dim=1, keepdim=True), keepdim=True) for kk in range(self.L)]
        val = 0
        for l in range(self.L):
            val += res[l]
        if retPerLayer:
            return (val, res)
        return val

class ScalingLayer(nn.Module):
    def __init__(self):
        super(ScalingLayer, self).__init__()
        self.register_buffer('shift', torch.Tensor([-.030, -.088, -.188])[None, :, None, None])
        self.register_buffer('scale', torch.Tensor([.458, .448, .450])[None, :, None, None])
    def forward(self, inp):
        return (inp - self.shift) / self.scale

class NetLinLayer(nn.Module):
    ''' A single linear layer which does a 1x1 conv '''
    def __init__(self, chn_in, chn_out=1, use_dropout=False):
        super(NetLinLayer, self).__init__()
        layers = [nn.Dropout(), ] if use_dropout else []
        layers += [nn.Conv2d(chn_in, chn_out, 1, stride=1, padding=0, bias=False), ]
        self.model = nn.Sequential(*layers)
    def forward(self, x):
        return self.model(x)

class Dist2LogitLayer(nn.Module):
    ''' takes 2 distances, puts through fc layers, spits out value between [0,1] (if use_sigmoid is True) '''
    def __init__(self, chn_mid=32, use_sigmoid=True):
        super(Dist2LogitLayer, self).__init__()
        layers = [nn.Conv2d(5, chn_mid, 1, stride=1, padding=0, bias=True), ]
        layers += [nn.LeakyReLU(0.2, True), ]
        layers += [nn.Conv2d(chn_mid, chn_mid, 1, stride=1, padding=0, bias=True), ]
        layers += [nn.LeakyReLU(0.2, True), ]
        layers += [nn.Conv2d(chn_mid, 1, 1, stride=1, padding=0, bias=True), ]
        if use_sigmoid:
            layers += [nn.Sigmoid(), ]
        self.model = nn.Sequential(*layers)
    def forward(self, d0, d1, eps=0.1):
        return self.model.forward(torch.cat((d0, d1, d0 - d1, d0 / (d1 + eps), d1 / (d0 + eps)), dim=1))

class BCERankingLoss(nn.Module):
    def __init__(self, chn_mid=32):
        super(BCERankingLoss, self).__init__()
        self.net = Dist2LogitLayer(chn_mid=chn_mid)
        self.loss = torch.nn.BCELoss()
    def forward(self, d0, d1, judge):
        per = (judge + 1.) / 2.
        self.logit = self.net.forward(d0, d1)
        return self.loss(self.logit, per)

class FakeNet(nn.Module):
    def __init__(self, use_gpu=True, colorspace='Lab'):
        super(FakeNet, self).__init__()
        self.use_gpu = use_gpu
        self.colorspace = colorspace

class L2(FakeNet):
    def forward(self, in0, in1, retPerLayer=None):
        assert (in0.size()[0] == 1)  # currently only supports batchSize 1
        if self.colorspace == 'RGB':
            value = l2(tensor2im(in0.data).astype('float'), tensor2im(in1.data).astype('float'), range=255.)
            ret_var = Variable(torch.Tensor((value,)))
            if self.use_gpu:
                ret_var = ret_var.cuda()
            return ret_var
        raise NotImplementedError('Lab colorspace needs skimage')

class Trainer():
    def name(self):
        return self.model_name
    def initialize(self, model='lpips', net='alex', colorspace='Lab', pnet_rand=False, pnet_tune=False,
                   model_path=None, use_gpu=True, printNet=False, spatial=False, is_train=False, lr=.0001, beta1=0.5,
                   version='0.1', gpu_ids=[0]):
        self.use_gpu = use_gpu
        self.gpu_ids = gpu_ids
        self.model = model
        self.net = net
        self.is_train = is_train
        self.spatial = spatial
        self.model_name = '%s [%s]' % (model, net)
        if self.model == 'lpips':  # pretrained net + linear layer
            self.net = LPIPS(pretrained=not is_train, net=net, version=version, lpips=True, spatial=spatial,
                             pnet_rand=pnet_rand, pnet_tune=pnet_tune, use_dropout=True, model_path=model_path,
                             eval_mode=False)
        elif self.model == 'baseline':  # pretrained network
            self.net = LPIPS(pnet_rand=pnet_rand, net=net, lpips=False)
        elif self.model in ['L2', 'l2']:
            self.net = L2(use_gpu=use_gpu, colorspace=colorspace)  # not really a network, only for testing
            self.model_name = 'L2'
        else:
            raise ValueError("Model [%s] not recognized." % self.model)
        self.parameters = list(self.net.parameters())
        if self.is_train:  # training mode
            # extra network on top to go from distances (d0,d1) => predicted human judgment (h*)
            self.rankLoss = BCERankingLoss()
            self.parameters += list(self.rankLoss.net.parameters())
            self.lr = lr
            self.old_lr = lr
            self.optimizer_net = torch.optim.Adam(self.parameters, lr=lr, betas=(beta1, 0.999))
        else:  # test mode
            self.net.eval()
        if use_gpu:
            self.net.to(gpu_ids[0])
            self.net = torch.nn.DataParallel(self.net, device_ids=gpu_ids)
            if self.is_train:
                self.rankLoss = self.rankLoss.to(device=gpu_ids[0])  # just put this on GPU0
    def forward(self, in0, in1, retPerLayer=False):
        return self.net.forward(in0, in1, retPerLayer=retPerLayer)
    def optimize_parameters(self):
        self.forward_train()
        self.optimizer_net.zero_grad()
        self.backward_train()
        self.optimizer_net.step()
        self.clamp_weights()
    def clamp_weights(self):
        for module in self.net.modules():
            if hasattr(module, 'weight') and module.kernel_size == (1, 1):
                module.weight.data = torch.clamp(module.weight.data, min=0)
    def set_input(self, data):
        self.input_ref = data['ref']
        self.input_p0 = data['p0']
        self.input_p1 = data['p1']
        self.input_judge = data['judge']
        if self.use_gpu:
            self.input_ref = self.input_ref.to(device=self.gpu_ids[0])
            self.input_p0 = self.input_p0.to(device=self.gpu_ids[0])
            self.input_p1 = self.input_p1.to(device=self.gpu_ids[0])
            self.input_judge = self.input_judge.to(device=self.gpu_ids[0])
        self.var_ref = Variable(self.input_ref, requires_grad=True)
        self.var_p0 = Variable(self.input_p0, requires_grad=True)
        self.var_p1 = Variable(self.input_p1, requires_grad=True)
    def forward_train(self):  # run forward pass
        self.d0 = self.forward(self.var_ref, self.var_p0)
        self.d1 = self.forward(self.var_ref, self.var_p1)
        self.acc_r = self.compute_accuracy(self.d0, self.d1, self.input_judge)
        self.var_judge = Variable(1. * self.input_judge).view(self.d0.size())
        self.loss_total = self.rankLoss.forward(self.d0, self.d1, self.var_judge * 2. - 1.)
        return self.loss_total
    def backward_train(self):
        torch.mean(self.loss_total).backward()
    def compute_accuracy(self, d0, d1, judge):
        ''' d0, d1 are Variables, judge is a Tensor '''
        d1_lt_d0 = (d1 < d0).cpu().data.numpy().flatten()
        judge_per = judge.cpu().numpy().flatten()
        return d1_lt_d0 * judge_per + (1 - d1_lt_d0) * (1 - judge_per)
    def get_current_errors(self):
        retDict = OrderedDict([('loss_total', self.loss_total.data.cpu().numpy()), ('acc_r', self.acc_r)])
        for key in retDict.keys():
            retDict[key] = np.mean(retDict[key])
        return retDict
    def get_current_visuals(self):
        zoom_factor = 256 / self.var_ref.data.size()[2]
        ref_img = tensor2im(self.var_ref.data)
        p0_img = tensor2im(self.var_p0.data)
        p1_img = tensor2im(self.var_p1.data)
        ref_img_vis = zoom(ref_img, [zoom_factor, zoom_factor, 1], order=0)
        p0_img_vis = zoom(p0_img, [zoom_factor, zoom_factor, 1], order=0)
        p1_img_vis = zoom(p1_img, [zoom_factor, zoom_factor, 1], order=0)
        return OrderedDict([('ref', ref_img_vis), ('p0', p0_img_vis), ('p1', p1_img_vis)])
    def save(self, path, label):
        if self.use_gpu:
            self.save_network(self.net.module, path, '', label)
        else:
            self.save_network(self.net, path, '', label)
        self.save_network(self.rankLoss.net, path, 'rank', label)
    def save_network(self, network, path, network_label, epoch_label):
        save_filename = '%s_net_%s.pth' % (epoch_label, network_label)
        save_path = os.path.join(path, save_filename)
        torch.save(network.state_dict(), save_path)
    def update_learning_rate(self, nepoch_decay):
        lrd = self.lr / nepoch_decay
        lr = self.old_lr - lrd
        for param_group in self.optimizer_net.param_groups:
            param_group['lr'] = lr
        print('update lr decay: %f -> %f' % (self.old_lr, lr))
        self.old_lr = lr

def score_2afc_dataset(data_loader, func, name=''):
    d0s = []
    d1s = []
    gts = []
    for data in data_loader.load_data():
        d0s += func(data['ref'], data['p0']).data.cpu().numpy().flatten().tolist()
        d1s += func(data['ref'], data['p1']).data.cpu().numpy().flatten().tolist()
        gts += data['judge'].cpu().numpy().flatten().tolist()
    d0s = np.array(d0s)
    d1s = np.array(d1s)
    gts = np.array(gts)
    scores = (d0s < d1s) * (1. - gts) + (d1s < d0s) * gts + (d1s == d0s) * .5
    return (np.mean(scores), dict(d0s=d0s, d1s=d1s, gts=gts, scores=scores))

class TwoAFCDataset(torch.utils.data.Dataset):
    def initialize(self, dataroots, load_size=64):
        if not isinstance(dataroots, list):
            dataroots = [dataroots, ]
        self.roots = dataroots
        self.load_size = load_size

        def make_dataset(dirs):
            return sorted(os.path.join(d, f) for d in dirs for f in os.listdir(d) if f.endswith('.npy'))
        self.ref_paths = make_dataset([os.path.join(root, 'ref') for root in self.roots])
        self.p0_paths = make_dataset([os.path.join(root, 'p0') for root in self.roots])
        self.p1_paths = make_dataset([os.path.join(root, 'p1') for root in self.roots])
        self.judge_paths = make_dataset([os.path.join(root, 'judge') for root in self.roots])
    def transform(self, img):  # ToTensor + Normalize((0.5,)*3, (0.5,)*3)
        return (torch.from_numpy(img).permute(2, 0, 1).float() / 255. - 0.5) / 0.5
    def __getitem__(self, index):
        p0_img = self.transform(np.load(self.p0_paths[index]))
        p1_img = self.transform(np.load(self.p1_paths[index]))
        ref_img = self.transform(np.load(self.ref_paths[index]))
        judge_img = torch.FloatTensor(np.load(self.judge_paths[index]).reshape((1, 1, 1,)))  # [0,1]
        return {'p0': p0_img, 'p1': p1_img, 'ref': ref_img, 'judge': judge_img, 'p0_path': self.p0_paths[index],
                'p1_path': self.p1_paths[index], 'ref_path': self.ref_paths[index],
                'judge_path': self.judge_paths[index]}
    def __len__(self):
        return len(self.p0_paths)

class CustomDatasetDataLoader():
    def initialize(self, datafolders, dataroot='./dataset', dataset_mode='2afc', load_size=64, batch_size=1,
                   serial_batches=True, nThreads=1):
        if not isinstance(datafolders, list):
            datafolders = [datafolders, ]
        data_root_folders = [os.path.join(dataroot, datafolder) for datafolder in datafolders]
        self.dataset = TwoAFCDataset()
        self.dataset.initialize(data_root_folders, load_size=load_size)
        self.dataloader = torch.utils.data.DataLoader(self.dataset, batch_size=batch_size,
                                                      shuffle=not serial_batches, num_workers=int(nThreads))
    def load_data(self):
        return self.dataloader
    def __len__(self):
        return len(self.dataset)

def CreateDataLoader(datafolder, dataroot='./dataset', dataset_mode='2afc', load_size=64, batch_size=1,
                     serial_batches=True, nThreads=4):
    data_loader = CustomDatasetDataLoader()
    data_loader.initialize(datafolder, dataroot=dataroot, dataset_mode=dataset_mode, load_size=load_size,
                           batch_size=batch_size, serial_batches=serial_batches, nThreads=nThreads)
    return data_loader

def write_2afc_split(root, n, size=32, seed=0):
    """ref/p0/p1 patches plus the fraction of (simulated) raters who judged p1 closer to ref."""
    rng = np.random.RandomState(seed)
    for sub in ('ref', 'p0', 'p1', 'judge'):
        os.makedirs(os.path.join(root, sub))
    yy, xx = np.mgrid[0:size, 0:size] / size
    for i in range(n):
        freq, phase = rng.uniform(1, 4, size=3), rng.uniform(0, 6.3, size=3)
        ref = 0.5 + 0.4 * np.sin(2 * np.pi * freq * (xx + yy)[..., None] + phase)
        s0, s1 = rng.uniform(0.02, 0.3, size=2)
        p0 = ref + s0 * rng.randn(size, size, 3)
        p1 = np.roll(ref, int(rng.randint(0, 4)), axis=1) + s1 * rng.randn(size, size, 3)
        judge = 1. / (1. + np.exp(-12. * (np.mean((p0 - ref) ** 2) - np.mean((p1 - ref) ** 2)) / 0.02))
        for sub, arr in (('ref', ref), ('p0', p0), ('p1', p1)):
            np.save(os.path.join(root, sub, '%06d.npy' % i), (255 * np.clip(arr, 0, 1)).astype(np.uint8))
        np.save(os.path.join(root, 'judge', '%06d.npy' % i), np.array([judge]))

def train(opt):
    opt.save_dir = os.path.join(opt.checkpoints_dir, opt.name)
    if not os.path.exists(opt.save_dir):
        os.mkdir(opt.save_dir)
    trainer = Trainer()
    trainer.initialize(model=opt.model, net=opt.net, use_gpu=opt.use_gpu, is_train=True, pnet_rand=opt.from_scratch,
                       pnet_tune=opt.train_trunk, gpu_ids=opt.gpu_ids, lr=opt.lr)
    data_loader = CreateDataLoader(opt.datasets, dataroot=opt.dataroot, dataset_mode='2afc', load_size=opt.load_size,
                                   batch_size=opt.batch_size, serial_batches=False, nThreads=opt.nThreads)
    dataset = data_loader.load_data()
    dataset_size = len(data_loader)
    D = len(dataset)
    print('Loading %i instances from' % dataset_size, opt.datasets)
    total_steps = 0
    fid = open(os.path.join(opt.checkpoints_dir, opt.name, 'train_log.txt'), 'w+')
    for epoch in range(1, opt.nepoch + opt.nepoch_decay + 1):
        epoch_start_time = time.time()
        for i, data in enumerate(dataset):
            iter_start_time = time.time()
            total_steps += opt.batch_size
            epoch_iter = total_steps - dataset_size * (epoch - 1)
            trainer.set_input(data)
            trainer.optimize_parameters()
            if total_steps % opt.display_freq == 0:
                visuals = trainer.get_current_visuals()  # visualizer.display_current_results
                assert visuals['ref'].shape == (256, 256, 3)
            if total_steps % opt.print_freq == 0:
                errors = trainer.get_current_errors()
                t = (time.time() - iter_start_time) / opt.batch_size
                t2o = (time.time() - epoch_start_time) / 3600.
                t2 = t2o * D / (i + .0001)
                message = (', ').join(['%s: %.3f' % (k, v) for k, v in errors.items()])
                print('(ep: %d, it: %d) %s' % (epoch, epoch_iter, message))  # visualizer.print_current_errors
                fid.write('(ep: %d, it: %d, t: %.3f[s], ept: %.2f/%.2f[h]) %s\n'
                          % (epoch, epoch_iter, t, t2o, t2, message))
            if total_steps % opt.save_latest_freq == 0:
                print('saving the latest model (epoch %d, total_steps %d)' % (epoch, total_steps))
                trainer.save(opt.save_dir, 'latest')
        if epoch % opt.save_epoch_freq == 0:
            print('saving the model at the end of epoch %d, iters %d' % (epoch, total_steps))
            trainer.save(opt.save_dir, 'latest')
            trainer.save(opt.save_dir, epoch)
        if epoch > opt.nepoch:
            trainer.update_learning_rate(opt.nepoch_decay)
    fid.close()
    return trainer

def test_dataset_model(opt):
    if opt.model in ['l2', 'ssim']:
        opt.batch_size = 1
    trainer = Trainer()
    trainer.initialize(model=opt.model, net=opt.net, colorspace=opt.colorspace, model_path=opt.model_path,
                       use_gpu=opt.use_gpu, pnet_rand=opt.from_scratch, pnet_tune=opt.train_trunk,
                       version=opt.version, gpu_ids=opt.gpu_ids)
    results = {}
    for dataset in opt.datasets:
        data_loader = CreateDataLoader(dataset, dataroot=opt.dataroot, dataset_mode=opt.dataset_mode,
                                       load_size=opt.load_size, batch_size=opt.batch_size, nThreads=opt.nThreads)
        (score, results_verbose) = score_2afc_dataset(data_loader, trainer.forward, name=dataset)
        print('  Dataset [%s]: %.2f' % (dataset, 100. * score))
        results[dataset] = score
    return results

def get_parser():
    parser = argparse.ArgumentParser()
    parser.add_argument('--datasets', type=str, nargs='+', default=['train/mix'])
    parser.add_argument('--dataroot', type=str, default='./dataset')
    parser.add_argument('--dataset_mode', type=str, default='2afc')
    parser.add_argument('--model', type=str, default='lpips')
    parser.add_argument('--net', type=str, default='alex')
    parser.add_argument('--colorspace', type=str, default='RGB')
    parser.add_argument('--version', type=str, default='0.1')
    parser.add_argument('--model_path', type=str, default=None)
    parser.add_argument('--batch_size', type=int, default=16)
    parser.add_argument('--load_size', type=int, default=32)
    parser.add_argument('--use_gpu', action='store_true', help='turn on flag to use GPU')
    parser.add_argument('--gpu_ids', type=int, nargs='+', default=[0], help='gpus to use')
    parser.add_argument('--nThreads', type=int, default=0)
    parser.add_argument('--lr', type=float, default=1e-3)
    parser.add_argument('--nepoch', type=int, default=2)
    parser.add_argument('--nepoch_decay', type=int, default=1)
    parser.add_argument('--display_freq', type=int, default=64)
    parser.add_argument('--print_freq', type=int, default=32)
    parser.add_argument('--save_latest_freq', type=int, default=96)
    parser.add_argument('--save_epoch_freq', type=int, default=1)
    parser.add_argument('--checkpoints_dir', type=str, default='checkpoints')
    parser.add_argument('--name', type=str, default='tmp')
    parser.add_argument('--from_scratch', action='store_true')
    parser.add_argument('--train_trunk', action='store_true')
    return parser

if __name__ == '__main__':
    torch.manual_seed(0)
    tmp = tempfile.mkdtemp(prefix="lpips_")
    try:
        dataroot = os.path.join(tmp, 'dataset')
        write_2afc_split(os.path.join(dataroot, 'train', 'mix'), 96, seed=0)
        write_2afc_split(os.path.join(dataroot, 'val', 'traditional'), 32, seed=1)
        gpu = ['--use_gpu'] if torch.cuda.is_available() else []
        common = ['--dataroot', dataroot, '--checkpoints_dir', tmp] + gpu
        parser = get_parser()
        train(parser.parse_args(common))
        scores = {}
        for model in ('lpips', 'baseline', 'l2'):
            extra = ['--model_path', os.path.join(tmp, 'tmp', 'latest_net_.pth')] if model == 'lpips' else []
            opt = parser.parse_args(common + ['--model', model, '--datasets', 'val/traditional'] + extra)
            scores[model] = test_dataset_model(opt)['val/traditional']
        print("done: 2AFC val scores " + ", ".join("%s %.3f" % kv for kv in scores.items()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
