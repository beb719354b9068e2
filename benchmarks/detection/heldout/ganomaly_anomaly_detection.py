"""Trains GANomaly (Akcay et al., 2018) on the normal classes of a CIFAR-10-style set with one class held out as the
anomaly, scores test images by the distance between the latent code and the re-encoded reconstruction's code (ROC
AUC), then builds a second model that resumes from the saved weights and re-tests with ``--load_weights``.
`Options.parse` turns ``--gpu_ids`` into an id list and calls ``torch.cuda.set_device(self.opt.gpu_ids[0])`` when
``--device gpu``; `BaseModel` derives ``self.device = torch.device("cuda:0" if self.opt.device != 'cpu' else
"cpu")``; `Ganomaly` moves both nets with ``.to(self.device)`` and preallocates input/label buffers with
``torch.empty(..., device=self.device)`` that `set_input` refills with ``resize_(...).copy_(batch)``; the DCGAN
`Encoder`/`Decoder` run ``nn.parallel.data_parallel(self.main, input, range(self.ngpu))`` when ``--ngpu`` > 1;
`test` allocates score buffers with ``torch.zeros(..., device=self.device)``, loads ``netG.pth`` with
``torch.load(path)`` (no map_location) and the ROC code reads ``labels.cpu()``/``scores.cpu()``.

Modeled on: samet-akcay/ganomaly, train.py, options.py, lib/model.py, lib/networks.py, lib/loss.py, lib/evaluate.py,
lib/data.py (load_data, get_cifar_anomaly_dataset) and lib/visualizer.py at commit
78da4ea9a99f5b02ab60dd651a18def929176d77 (https://github.com/samet-akcay/ganomaly).

Kept: `Options` (gpu id parsing, ``set_device``, opt.txt), `load_data`'s cifar10 branch, `get_cifar_anomaly_dataset`;
`weights_init`, `Encoder`, `Decoder`, `NetD`, `NetG`; `l2_loss`; `evaluate`/`roc`; `BaseModel` (`seed`,
`set_input`, `get_errors`, `get_current_images`, `save_weights`, `train_one_epoch`, `train`, `test`) and `Ganomaly`
(resume from ``netG.pth``/``netD.pth``, `forward_g`, `forward_d`, `backward_g` with ``retain_graph=True``,
`backward_d`, `reinit_d`, `optimize_params`); train.py's `train`.

Changed to run here: CIFAR-10 is synthetic (ten coloured stripe classes of 16x16 uint8 images) and the transforms a
plain function; `Options.parse` takes an argument list (``--device cpu`` when CUDA is missing, as a CPU user must)
and builds the parser from a table of the options used; the weights path in `test` is joined from ``opt.outf``
instead of the hard-coded ``./output``; sklearn's ROC AUC is numpy code and the EER is left out; visdom, tqdm and the
mnist branches are left out and `Visualizer` only logs and ``torch.save``s image batches; blank lines inside
functions and some comments dropped. Fixed: the original's `test` scores with netG in training mode (it never calls ``eval()``, so
BatchNorm uses and updates batch statistics at test time); here `test` calls ``self.netg.eval()`` first.
Shrunk: isize 16, nz 16, ngf/ndf 16, 300 training and 100 test images, batch 16, 2 epochs.
"""
import argparse
import os
import random
import tempfile
import time
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.parallel
import torch.optim as optim
import torch.utils.data


# ---------------------------------------------------------------- options.py
class Options():
    """Options class: argparse containing train and test options"""
    def __init__(self):
        self.parser = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        # Base
        for flag, kind, default in [
                # Base
                ('--dataset', str, 'cifar10'), ('--batchsize', int, 64), ('--workers', int, 8), ('--isize', int, 32),
                ('--nc', int, 3), ('--nz', int, 100), ('--ngf', int, 64), ('--ndf', int, 64), ('--extralayers', int, 0),
                ('--device', str, 'gpu'),  # Device: gpu | cpu
                ('--gpu_ids', str, '0'),  # gpu ids: e.g. 0  0,1,2, 0,2. use -1 for CPU
                ('--ngpu', int, 1),  # number of GPUs to use
                ('--name', str, 'experiment_name'), ('--model', str, 'ganomaly'), ('--display', bool, False),
                ('--outf', str, './output'), ('--manualseed', int, -1), ('--abnormal_class', str, 'car'),
                ('--metric', str, 'roc'),
                # Train
                ('--print_freq', int, 100), ('--save_image_freq', int, 100), ('--load_weights', bool, False),
                ('--resume', str, ''), ('--phase', str, 'train'), ('--iter', int, 0), ('--niter', int, 15),
                ('--beta1', float, 0.5), ('--lr', float, 0.0002), ('--w_adv', float, 1), ('--w_con', float, 50),
                ('--w_enc', float, 1)]:
            if kind is bool:
                self.parser.add_argument(flag, action='store_true')
            else:
                self.parser.add_argument(flag, type=kind, default=default)
        self.isTrain = True
        self.opt = None
    def parse(self, argv=None):
        """ Parse Arguments."""
        self.opt = self.parser.parse_args(argv)
        self.opt.isTrain = self.isTrain   # train or test
        str_ids = self.opt.gpu_ids.split(',')
        self.opt.gpu_ids = []
        for str_id in str_ids:
            id = int(str_id)
            if id >= 0:
                self.opt.gpu_ids.append(id)
        # set gpu ids
        if self.opt.device == 'gpu':
            torch.cuda.set_device(self.opt.gpu_ids[0])
        args = vars(self.opt)
        # save to the disk
        if self.opt.name == 'experiment_name':
            self.opt.name = "%s/%s" % (self.opt.model, self.opt.dataset)
        expr_dir = os.path.join(self.opt.outf, self.opt.name, 'train')
        test_dir = os.path.join(self.opt.outf, self.opt.name, 'test')
        if not os.path.isdir(expr_dir):
            os.makedirs(expr_dir)
        if not os.path.isdir(test_dir):
            os.makedirs(test_dir)
        file_name = os.path.join(expr_dir, 'opt.txt')
        with open(file_name, 'wt') as opt_file:
            opt_file.write('------------ Options -------------\n')
            for k, v in sorted(args.items()):
                opt_file.write('%s: %s\n' % (str(k), str(v)))
            opt_file.write('-------------- End ----------------\n')
        return self.opt


# ---------------------------------------------------------------- lib/data.py
class CIFAR10(torch.utils.data.Dataset):
    """Synthetic stand-in for torchvision's CIFAR10: ``data`` (N, H, W, 3) uint8 and ``targets`` lists."""
    def __init__(self, root, train=True, download=False, transform=None, size=16):
        rng = np.random.RandomState(0 if train else 1)
        n = 300 if train else 100
        self.targets = list(rng.randint(0, 10, n))
        colours = np.random.RandomState(7).randint(40, 215, (10, 3))
        yy, xx = np.mgrid[0:size, 0:size]
        self.data = np.zeros((n, size, size, 3), dtype=np.uint8)
        for i, c in enumerate(self.targets):
            pattern = ((xx * (c % 3 + 1) + yy * (c // 3 + 1)) % 8 < 4)[..., None]
            img = pattern * colours[c] + rng.randint(0, 40, (size, size, 3))
            self.data[i] = np.clip(img, 0, 255).astype(np.uint8)
        self.transform = transform
    def __len__(self):
        return len(self.data)
    def __getitem__(self, index):
        img, target = self.data[index], int(self.targets[index])
        return self.transform(img), target

def transform(img):
    """transforms.Compose([Resize(isize), ToTensor(), Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])"""
    return (torch.from_numpy(img).permute(2, 0, 1).float() / 255.0 - 0.5) / 0.5

def load_data(opt):
    """ Load Data"""
    splits = ['train', 'test']
    drop_last_batch = {'train': True, 'test': False}
    shuffle = {'train': True, 'test': False}
    classes = {'plane': 0, 'car': 1, 'bird': 2, 'cat': 3, 'deer': 4, 'dog': 5, 'frog': 6, 'horse': 7, 'ship': 8,
               'truck': 9}
    dataset = {}
    dataset['train'] = CIFAR10(root='./data', train=True, download=True, transform=transform, size=opt.isize)
    dataset['test'] = CIFAR10(root='./data', train=False, download=True, transform=transform, size=opt.isize)
    dataset['train'].data, dataset['train'].targets, \
    dataset['test'].data, dataset['test'].targets = get_cifar_anomaly_dataset(
        trn_img=dataset['train'].data, trn_lbl=dataset['train'].targets,
        tst_img=dataset['test'].data, tst_lbl=dataset['test'].targets,
        abn_cls_idx=classes[opt.abnormal_class], manualseed=opt.manualseed)
    dataloader = {x: torch.utils.data.DataLoader(dataset=dataset[x], batch_size=opt.batchsize, shuffle=shuffle[x],
                                                 num_workers=int(opt.workers), drop_last=drop_last_batch[x],
                                                 worker_init_fn=(None if opt.manualseed == -1
                                                 else lambda x: np.random.seed(opt.manualseed)))
                  for x in splits}
    return dataloader

def get_cifar_anomaly_dataset(trn_img, trn_lbl, tst_img, tst_lbl, abn_cls_idx=0, manualseed=-1):
    """New training-test images and labels: train on normal classes, test on normal (0) and abnormal (1)."""
    trn_lbl = np.array(trn_lbl)
    tst_lbl = np.array(tst_lbl)
    nrm_trn_idx = np.where(trn_lbl != abn_cls_idx)[0]
    abn_trn_idx = np.where(trn_lbl == abn_cls_idx)[0]
    nrm_trn_img, abn_trn_img = trn_img[nrm_trn_idx], trn_img[abn_trn_idx]    # Normal / abnormal training images
    nrm_trn_lbl, abn_trn_lbl = trn_lbl[nrm_trn_idx], trn_lbl[abn_trn_idx]    # Normal / abnormal training labels
    nrm_tst_idx = np.where(tst_lbl != abn_cls_idx)[0]
    abn_tst_idx = np.where(tst_lbl == abn_cls_idx)[0]
    nrm_tst_img, abn_tst_img = tst_img[nrm_tst_idx], tst_img[abn_tst_idx]    # Normal / abnormal test images
    nrm_tst_lbl, abn_tst_lbl = tst_lbl[nrm_tst_idx], tst_lbl[abn_tst_idx]    # Normal / abnormal test labels
    nrm_trn_lbl[:], nrm_tst_lbl[:] = 0, 0
    abn_trn_lbl[:], abn_tst_lbl[:] = 1, 1
    if manualseed != -1:
        nrm_img = np.concatenate((nrm_trn_img, nrm_tst_img), axis=0)
        nrm_lbl = np.concatenate((nrm_trn_lbl, nrm_tst_lbl), axis=0)
        abn_img = np.concatenate((abn_trn_img, abn_tst_img), axis=0)
        abn_lbl = np.concatenate((abn_trn_lbl, abn_tst_lbl), axis=0)
        idx = np.arange(len(nrm_lbl))
        np.random.seed(manualseed)
        np.random.shuffle(idx)
        nrm_trn_len = int(len(idx) * 0.80)
        nrm_trn_idx = idx[:nrm_trn_len]
        nrm_tst_idx = idx[nrm_trn_len:]
        nrm_trn_img = nrm_img[nrm_trn_idx]
        nrm_trn_lbl = nrm_lbl[nrm_trn_idx]
        nrm_tst_img = nrm_img[nrm_tst_idx]
        nrm_tst_lbl = nrm_lbl[nrm_tst_idx]
    new_trn_img = np.copy(nrm_trn_img)
    new_trn_lbl = np.copy(nrm_trn_lbl)
    new_tst_img = np.concatenate((nrm_tst_img, abn_trn_img, abn_tst_img), axis=0)
    new_tst_lbl = np.concatenate((nrm_tst_lbl, abn_trn_lbl, abn_tst_lbl), axis=0)
    return new_trn_img, new_trn_lbl, new_tst_img, new_tst_lbl


# ---------------------------------------------------------------- lib/networks.py
def weights_init(mod):
    """Custom weights initialization called on netG, netD and netE"""
    classname = mod.__class__.__name__
    if classname.find('Conv') != -1:
        mod.weight.data.normal_(0.0, 0.02)
    elif classname.find('BatchNorm') != -1:
        mod.weight.data.normal_(1.0, 0.02)
        mod.bias.data.fill_(0)

class Encoder(nn.Module):
    """DCGAN ENCODER NETWORK"""
    def __init__(self, isize, nz, nc, ndf, ngpu, n_extra_layers=0, add_final_conv=True):
        super(Encoder, self).__init__()
        self.ngpu = ngpu
        assert isize % 16 == 0, "isize has to be a multiple of 16"
        main = nn.Sequential()
        main.add_module('initial-conv-{0}-{1}'.format(nc, ndf), nn.Conv2d(nc, ndf, 4, 2, 1, bias=False))
        main.add_module('initial-relu-{0}'.format(ndf), nn.LeakyReLU(0.2, inplace=True))
        csize, cndf = isize / 2, ndf
        for t in range(n_extra_layers):
            main.add_module('extra-layers-{0}-{1}-conv'.format(t, cndf), nn.Conv2d(cndf, cndf, 3, 1, 1, bias=False))
            main.add_module('extra-layers-{0}-{1}-batchnorm'.format(t, cndf), nn.BatchNorm2d(cndf))
            main.add_module('extra-layers-{0}-{1}-relu'.format(t, cndf), nn.LeakyReLU(0.2, inplace=True))
        while csize > 4:
            in_feat = cndf
            out_feat = cndf * 2
            main.add_module('pyramid-{0}-{1}-conv'.format(in_feat, out_feat),
                            nn.Conv2d(in_feat, out_feat, 4, 2, 1, bias=False))
            main.add_module('pyramid-{0}-batchnorm'.format(out_feat), nn.BatchNorm2d(out_feat))
            main.add_module('pyramid-{0}-relu'.format(out_feat), nn.LeakyReLU(0.2, inplace=True))
            cndf = cndf * 2
            csize = csize / 2
        if add_final_conv:
            main.add_module('final-{0}-{1}-conv'.format(cndf, 1), nn.Conv2d(cndf, nz, 4, 1, 0, bias=False))
        self.main = main
    def forward(self, input):
        if self.ngpu > 1:
            output = nn.parallel.data_parallel(self.main, input, range(self.ngpu))
        else:
            output = self.main(input)
        return output

class Decoder(nn.Module):
    """DCGAN DECODER NETWORK"""
    def __init__(self, isize, nz, nc, ngf, ngpu, n_extra_layers=0):
        super(Decoder, self).__init__()
        self.ngpu = ngpu
        assert isize % 16 == 0, "isize has to be a multiple of 16"
        cngf, tisize = ngf // 2, 4
        while tisize != isize:
            cngf = cngf * 2
            tisize = tisize * 2
        main = nn.Sequential()
        main.add_module('initial-{0}-{1}-convt'.format(nz, cngf), nn.ConvTranspose2d(nz, cngf, 4, 1, 0, bias=False))
        main.add_module('initial-{0}-batchnorm'.format(cngf), nn.BatchNorm2d(cngf))
        main.add_module('initial-{0}-relu'.format(cngf), nn.ReLU(True))
        csize, _ = 4, cngf
        while csize < isize // 2:
            main.add_module('pyramid-{0}-{1}-convt'.format(cngf, cngf // 2),
                            nn.ConvTranspose2d(cngf, cngf // 2, 4, 2, 1, bias=False))
            main.add_module('pyramid-{0}-batchnorm'.format(cngf // 2), nn.BatchNorm2d(cngf // 2))
            main.add_module('pyramid-{0}-relu'.format(cngf // 2), nn.ReLU(True))
            cngf = cngf // 2
            csize = csize * 2
        for t in range(n_extra_layers):
            main.add_module('extra-layers-{0}-{1}-conv'.format(t, cngf), nn.Conv2d(cngf, cngf, 3, 1, 1, bias=False))
            main.add_module('extra-layers-{0}-{1}-batchnorm'.format(t, cngf), nn.BatchNorm2d(cngf))
            main.add_module('extra-layers-{0}-{1}-relu'.format(t, cngf), nn.ReLU(True))
        main.add_module('final-{0}-{1}-convt'.format(cngf, nc), nn.ConvTranspose2d(cngf, nc, 4, 2, 1, bias=False))
        main.add_module('final-{0}-tanh'.format(nc), nn.Tanh())
        self.main = main
    def forward(self, input):
        if self.ngpu > 1:
            output = nn.parallel.data_parallel(self.main, input, range(self.ngpu))
        else:
            output = self.main(input)
        return output

class NetD(nn.Module):
    """DISCRIMINATOR NETWORK"""
    def __init__(self, opt):
        super(NetD, self).__init__()
        model = Encoder(opt.isize, 1, opt.nc, opt.ngf, opt.ngpu, opt.extralayers)
        layers = list(model.main.children())
        self.features = nn.Sequential(*layers[:-1])
        self.classifier = nn.Sequential(layers[-1])
        self.classifier.add_module('Sigmoid', nn.Sigmoid())
    def forward(self, x):
        features = self.features(x)
        features = features
        classifier = self.classifier(features)
        classifier = classifier.view(-1, 1).squeeze(1)
        return classifier, features

class NetG(nn.Module):
    """GENERATOR NETWORK"""
    def __init__(self, opt):
        super(NetG, self).__init__()
        self.encoder1 = Encoder(opt.isize, opt.nz, opt.nc, opt.ngf, opt.ngpu, opt.extralayers)
        self.decoder = Decoder(opt.isize, opt.nz, opt.nc, opt.ngf, opt.ngpu, opt.extralayers)
        self.encoder2 = Encoder(opt.isize, opt.nz, opt.nc, opt.ngf, opt.ngpu, opt.extralayers)
    def forward(self, x):
        latent_i = self.encoder1(x)
        gen_imag = self.decoder(latent_i)
        latent_o = self.encoder2(gen_imag)
        return gen_imag, latent_i, latent_o


# ---------------------------------------------------------------- lib/loss.py and lib/evaluate.py
def l2_loss(input, target, size_average=True):
    """ L2 Loss without reduce flag."""
    if size_average:
        return torch.mean(torch.pow((input-target), 2))
    else:
        return torch.pow((input-target), 2)

def evaluate(labels, scores, metric='roc'):
    if metric == 'roc':
        return roc(labels, scores)
    else:
        raise NotImplementedError("Check the evaluation metric.")

def roc(labels, scores, saveto=None):
    """Compute ROC curve and ROC area (numpy stand-ins for sklearn's roc_curve and auc)"""
    labels = labels.cpu()
    scores = scores.cpu()
    # True/False Positive Rates.
    order = np.argsort(-scores.numpy(), kind='mergesort')
    y = labels.numpy()[order]
    tpr = np.concatenate([[0.0], np.cumsum(y) / max(y.sum(), 1)])
    fpr = np.concatenate([[0.0], np.cumsum(1 - y) / max((1 - y).sum(), 1)])
    roc_auc = float(np.trapezoid(tpr, fpr))
    return roc_auc


# ---------------------------------------------------------------- lib/visualizer.py (no visdom)
class Visualizer():
    def __init__(self, opt):
        self.name = opt.name
        self.opt = opt
        self.img_dir = os.path.join(opt.outf, opt.name, 'train', 'images')
        os.makedirs(self.img_dir, exist_ok=True)
        self.log_name = os.path.join(opt.outf, opt.name, 'loss_log.txt')
    def print_current_performance(self, performance, best):
        message = '   ' + ''.join('%s: %.3f ' % (key, val) for key, val in performance.items())
        message += 'max ' + self.opt.metric + ': %.3f' % best
        print(message)
        with open(self.log_name, "a") as log_file:
            log_file.write('%s\n' % message)
    def save_current_images(self, epoch, reals, fakes, fixed):
        torch.save(reals.cpu(), '%s/reals.pt' % self.img_dir)
        torch.save(fakes.cpu(), '%s/fakes.pt' % self.img_dir)
        torch.save(fixed.cpu(), '%s/fixed_fakes_%03d.pt' % (self.img_dir, epoch+1))


# ---------------------------------------------------------------- lib/model.py
class BaseModel():
    """ Base Model for ganomaly"""
    def __init__(self, opt, dataloader):
        self.seed(opt.manualseed)
        self.opt = opt
        self.visualizer = Visualizer(opt)
        self.dataloader = dataloader
        self.trn_dir = os.path.join(self.opt.outf, self.opt.name, 'train')
        self.tst_dir = os.path.join(self.opt.outf, self.opt.name, 'test')
        self.device = torch.device("cuda:0" if self.opt.device != 'cpu' else "cpu")
    def set_input(self, input: torch.Tensor):
        """ Set input and ground truth"""
        with torch.no_grad():
            self.input.resize_(input[0].size()).copy_(input[0])
            self.gt.resize_(input[1].size()).copy_(input[1])
            self.label.resize_(input[1].size())
            # Copy the first batch as the fixed input.
            if self.total_steps == self.opt.batchsize:
                self.fixed_input.resize_(input[0].size()).copy_(input[0])
    def seed(self, seed_value):
        if seed_value == -1:
            return
        random.seed(seed_value)
        torch.manual_seed(seed_value)
        torch.cuda.manual_seed_all(seed_value)
        np.random.seed(seed_value)
        torch.backends.cudnn.deterministic = True
    def get_errors(self):
        errors = OrderedDict([('err_d', self.err_d.item()), ('err_g', self.err_g.item()),
                              ('err_g_adv', self.err_g_adv.item()), ('err_g_con', self.err_g_con.item()),
                              ('err_g_enc', self.err_g_enc.item())])
        return errors
    def get_current_images(self):
        reals = self.input.data
        fakes = self.fake.data
        fixed = self.netg(self.fixed_input)[0].data
        return reals, fakes, fixed
    def save_weights(self, epoch):
        """Save netG and netD weights for the current epoch."""
        weight_dir = os.path.join(self.opt.outf, self.opt.name, 'train', 'weights')
        if not os.path.exists(weight_dir): os.makedirs(weight_dir)
        torch.save({'epoch': epoch + 1, 'state_dict': self.netg.state_dict()}, '%s/netG.pth' % (weight_dir))
        torch.save({'epoch': epoch + 1, 'state_dict': self.netd.state_dict()}, '%s/netD.pth' % (weight_dir))
    def train_one_epoch(self):
        """ Train the model for one epoch."""
        self.netg.train()
        epoch_iter = 0
        for data in self.dataloader['train']:
            self.total_steps += self.opt.batchsize
            epoch_iter += self.opt.batchsize
            self.set_input(data)
            self.optimize_params()
            if self.total_steps % self.opt.print_freq == 0:
                errors = self.get_errors()
                print('   Loss: ' + ' '.join('%s: %.3f' % (k, v) for k, v in errors.items()))
            if self.total_steps % self.opt.save_image_freq == 0:
                reals, fakes, fixed = self.get_current_images()
                self.visualizer.save_current_images(self.epoch, reals, fakes, fixed)
        print(">> Training model %s. Epoch %d/%d" % (self.name, self.epoch+1, self.opt.niter))
    def train(self):
        """ Train the model"""
        self.total_steps = 0
        best_auc = 0
        print(">> Training model %s." % self.name)
        for self.epoch in range(self.opt.iter, self.opt.niter):
            self.train_one_epoch()
            res = self.test()
            if res[self.opt.metric] > best_auc:
                best_auc = res[self.opt.metric]
                self.save_weights(self.epoch)
            self.visualizer.print_current_performance(res, best_auc)
        print(">> Training model %s.[Done]" % self.name)
    def test(self):
        """ Test GANomaly model."""
        self.netg.eval()  # not in the original, which tests in training mode (see the module docstring)
        with torch.no_grad():
            if self.opt.load_weights:
                path = os.path.join(self.opt.outf, self.name.lower(), self.opt.dataset, "train/weights/netG.pth")
                pretrained_dict = torch.load(path)['state_dict']
                try:
                    self.netg.load_state_dict(pretrained_dict)
                except IOError:
                    raise IOError("netG weights not found")
                print('   Loaded weights.')
            self.opt.phase = 'test'
            self.an_scores = torch.zeros(size=(len(self.dataloader['test'].dataset),), dtype=torch.float32, device=self.device)
            self.gt_labels = torch.zeros(size=(len(self.dataloader['test'].dataset),), dtype=torch.long,    device=self.device)
            self.latent_i  = torch.zeros(size=(len(self.dataloader['test'].dataset), self.opt.nz), dtype=torch.float32, device=self.device)
            self.latent_o  = torch.zeros(size=(len(self.dataloader['test'].dataset), self.opt.nz), dtype=torch.float32, device=self.device)
            self.times = []
            self.total_steps = 0
            epoch_iter = 0
            for i, data in enumerate(self.dataloader['test'], 0):
                self.total_steps += self.opt.batchsize
                epoch_iter += self.opt.batchsize
                time_i = time.time()
                self.set_input(data)
                self.fake, latent_i, latent_o = self.netg(self.input)
                error = torch.mean(torch.pow((latent_i-latent_o), 2), dim=1)
                time_o = time.time()
                self.an_scores[i*self.opt.batchsize : i*self.opt.batchsize+error.size(0)] = error.reshape(error.size(0))
                self.gt_labels[i*self.opt.batchsize : i*self.opt.batchsize+error.size(0)] = self.gt.reshape(error.size(0))
                self.latent_i [i*self.opt.batchsize : i*self.opt.batchsize+error.size(0), :] = latent_i.reshape(error.size(0), self.opt.nz)
                self.latent_o [i*self.opt.batchsize : i*self.opt.batchsize+error.size(0), :] = latent_o.reshape(error.size(0), self.opt.nz)
                self.times.append(time_o - time_i)
            self.times = np.array(self.times)
            self.times = np.mean(self.times[:100] * 1000)
            # Scale error vector between [0, 1]
            self.an_scores = (self.an_scores - torch.min(self.an_scores)) / (torch.max(self.an_scores) - torch.min(self.an_scores))
            auc = evaluate(self.gt_labels, self.an_scores, metric=self.opt.metric)
            performance = OrderedDict([('Avg Run Time (ms/batch)', self.times), (self.opt.metric, auc)])
            return performance

class Ganomaly(BaseModel):
    """GANomaly Class"""
    @property
    def name(self): return 'Ganomaly'
    def __init__(self, opt, dataloader):
        super(Ganomaly, self).__init__(opt, dataloader)
        self.epoch = 0
        self.times = []
        self.total_steps = 0
        self.netg = NetG(self.opt).to(self.device)
        self.netd = NetD(self.opt).to(self.device)
        self.netg.apply(weights_init)
        self.netd.apply(weights_init)
        if self.opt.resume != '':
            print("\nLoading pre-trained networks.")
            self.opt.iter = torch.load(os.path.join(self.opt.resume, 'netG.pth'))['epoch']
            self.netg.load_state_dict(torch.load(os.path.join(self.opt.resume, 'netG.pth'))['state_dict'])
            self.netd.load_state_dict(torch.load(os.path.join(self.opt.resume, 'netD.pth'))['state_dict'])
            print("\tDone.\n")
        self.l_adv = l2_loss
        self.l_con = nn.L1Loss()
        self.l_enc = l2_loss
        self.l_bce = nn.BCELoss()
        self.input = torch.empty(size=(self.opt.batchsize, 3, self.opt.isize, self.opt.isize), dtype=torch.float32, device=self.device)
        self.label = torch.empty(size=(self.opt.batchsize,), dtype=torch.float32, device=self.device)
        self.gt    = torch.empty(size=(opt.batchsize,), dtype=torch.long, device=self.device)
        self.fixed_input = torch.empty(size=(self.opt.batchsize, 3, self.opt.isize, self.opt.isize), dtype=torch.float32, device=self.device)
        self.real_label = torch.ones (size=(self.opt.batchsize,), dtype=torch.float32, device=self.device)
        self.fake_label = torch.zeros(size=(self.opt.batchsize,), dtype=torch.float32, device=self.device)
        if self.opt.isTrain:
            self.netg.train()
            self.netd.train()
            self.optimizer_d = optim.Adam(self.netd.parameters(), lr=self.opt.lr, betas=(self.opt.beta1, 0.999))
            self.optimizer_g = optim.Adam(self.netg.parameters(), lr=self.opt.lr, betas=(self.opt.beta1, 0.999))
    def forward_g(self):
        self.fake, self.latent_i, self.latent_o = self.netg(self.input)
    def forward_d(self):
        self.pred_real, self.feat_real = self.netd(self.input)
        self.pred_fake, self.feat_fake = self.netd(self.fake.detach())
    def backward_g(self):
        self.err_g_adv = self.l_adv(self.netd(self.input)[1], self.netd(self.fake)[1])
        self.err_g_con = self.l_con(self.fake, self.input)
        self.err_g_enc = self.l_enc(self.latent_o, self.latent_i)
        self.err_g = self.err_g_adv * self.opt.w_adv + \
                     self.err_g_con * self.opt.w_con + \
                     self.err_g_enc * self.opt.w_enc
        self.err_g.backward(retain_graph=True)
    def backward_d(self):
        self.err_d_real = self.l_bce(self.pred_real, self.real_label)
        self.err_d_fake = self.l_bce(self.pred_fake, self.fake_label)
        self.err_d = (self.err_d_real + self.err_d_fake) * 0.5
        self.err_d.backward()
    def reinit_d(self):
        """ Re-initialize the weights of netD"""
        self.netd.apply(weights_init)
        print('   Reloading net d')
    def optimize_params(self):
        """ Forwardpass, Loss Computation and Backwardpass."""
        self.forward_g()
        self.forward_d()
        self.optimizer_g.zero_grad()
        self.backward_g()
        self.optimizer_g.step()
        self.optimizer_d.zero_grad()
        self.backward_d()
        self.optimizer_d.step()
        if self.err_d.item() < 1e-5: self.reinit_d()


# ---------------------------------------------------------------- train.py
def train(argv):
    """ Training"""
    opt = Options().parse(argv)
    dataloader = load_data(opt)
    model = Ganomaly(opt, dataloader)
    model.train()
    return model

if __name__ == '__main__':
    outf = tempfile.mkdtemp(prefix='ganomaly_')
    common = ['--outf', outf, '--isize', '16', '--nz', '16', '--ngf', '16', '--ndf', '16', '--batchsize', '16',
              '--workers', '0', '--manualseed', '0', '--print_freq', '160', '--save_image_freq', '320']
    if not torch.cuda.is_available():
        common += ['--device', 'cpu', '--gpu_ids', '-1']
    train(common + ['--niter', '2'])
    # resume from the saved weights and test them again
    opt = Options().parse(common + ['--niter', '2', '--load_weights',
                                    '--resume', os.path.join(outf, 'ganomaly', 'cifar10', 'train', 'weights')])
    model = Ganomaly(opt, load_data(opt))
    res = model.test()
    print('done: re-tested epoch %d weights, %s %.3f' % (opt.iter, opt.metric, res[opt.metric]))
