"""Trains StarGAN (one generator translating between domains, a PatchGAN discriminator with an auxiliary domain
classifier, WGAN-GP and reconstruction losses) on synthetic "CelebA" images with five binary attributes and synthetic
"RaFD" images with eight expressions, resumes the CelebA run from its checkpoints and translates the test images, as
yunjey/stargan does: the `Solver` picks ``torch.device('cuda' if torch.cuda.is_available() else 'cpu')``, moves both
networks with ``.to(self.device)`` after building their optimizers, builds one-hot labels on the CPU and moves every
batch, label and target-domain vector with ``.to(self.device)``, makes the gradient-penalty ``torch.ones(...)`` and
``torch.rand(...)`` tensors and moves them, saves translated images from ``x_concat.data.cpu()`` and restores
checkpoints with ``map_location=lambda storage, loc: storage``.

Modeled on: yunjey/stargan, solver.py, model.py, data_loader.py and main.py at commit
94dd002e93a2863d9b987a937b85925b80f7a19f
(https://github.com/yunjey/stargan/blob/94dd002e93a2863d9b987a937b85925b80f7a19f/solver.py,
https://github.com/yunjey/stargan/blob/94dd002e93a2863d9b987a937b85925b80f7a19f/model.py).

Kept: model.py as written (`ResidualBlock`, `Generator` with ``c.view(...).repeat(...)`` label maps, `Discriminator`);
solver.py's `Solver` for one data set as written: `build_model`, `print_network`, `restore_model`, `update_lr`,
`reset_grad`, `denorm`, `gradient_penalty`, `label2onehot` (CPU ``torch.zeros``), `create_labels` (hair-colour logic,
RaFD one-hots, ``c_trg.to(self.device)``), `classification_loss`, `train` (fixed debug batch, ``next(data_iter)`` with
the bare ``except`` restart, ``torch.randperm`` targets, the ``.to(self.device)`` moves, D and G steps, ``.item()``
logs, sampling under ``torch.no_grad()``, checkpoints, lr decay) and `test`; data_loader.py's `CelebA` attribute-file
preprocessing and `get_loader`; main.py's `main` and `str2bool`.

Changed to run here: images are generated (colour bands per attribute/expression) instead of read with PIL; the
attribute file is written to a temporary folder; RaFD's ImageFolder is a small stand-in; torchvision's transforms
are left out and ``save_image`` stores the grid with ``np.save``; no tensorboard; the CelebA+RaFD "Both" mode
(`train_multi`/`test_multi`) is left out; four runs: CelebA train, RaFD train, CelebA resumed, CelebA test.
Shrunk: 128 -> 32 pixel images, conv dims 64 -> 16, 2 residual blocks in G and 3 strided convs in D, batch 4,
200000 iterations -> 6 (resumed to 10), n_critic 5 -> 2, 24 CelebA / 16 RaFD images.
"""
import argparse
import datetime
import os
import random
import shutil
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.backends import cudnn
from torch.utils import data

def save_image(tensor, filename, nrow=8, padding=2):
    """Stand-in for torchvision.utils.save_image: stores the image grid as a numpy array."""
    np.save(filename, tensor.numpy())

# ---- model.py ----------------------------------------------------------------------------------------------------
class ResidualBlock(nn.Module):
    """Residual Block with instance normalization."""
    def __init__(self, dim_in, dim_out):
        super(ResidualBlock, self).__init__()
        self.main = nn.Sequential(
            nn.Conv2d(dim_in, dim_out, kernel_size=3, stride=1, padding=1, bias=False),
            nn.InstanceNorm2d(dim_out, affine=True, track_running_stats=True),
            nn.ReLU(inplace=True),
            nn.Conv2d(dim_out, dim_out, kernel_size=3, stride=1, padding=1, bias=False),
            nn.InstanceNorm2d(dim_out, affine=True, track_running_stats=True))
    def forward(self, x):
        return x + self.main(x)

class Generator(nn.Module):
    """Generator network."""
    def __init__(self, conv_dim=64, c_dim=5, repeat_num=6):
        super(Generator, self).__init__()
        layers = []
        layers.append(nn.Conv2d(3+c_dim, conv_dim, kernel_size=7, stride=1, padding=3, bias=False))
        layers.append(nn.InstanceNorm2d(conv_dim, affine=True, track_running_stats=True))
        layers.append(nn.ReLU(inplace=True))
        curr_dim = conv_dim
        for i in range(2):
            layers.append(nn.Conv2d(curr_dim, curr_dim*2, kernel_size=4, stride=2, padding=1, bias=False))
            layers.append(nn.InstanceNorm2d(curr_dim*2, affine=True, track_running_stats=True))
            layers.append(nn.ReLU(inplace=True))
            curr_dim = curr_dim * 2
        for i in range(repeat_num):
            layers.append(ResidualBlock(dim_in=curr_dim, dim_out=curr_dim))
        for i in range(2):
            layers.append(nn.ConvTranspose2d(curr_dim, curr_dim//2, kernel_size=4, stride=2, padding=1, bias=False))
            layers.append(nn.InstanceNorm2d(curr_dim//2, affine=True, track_running_stats=True))
            layers.append(nn.ReLU(inplace=True))
            curr_dim = curr_dim // 2
        layers.append(nn.Conv2d(curr_dim, 3, kernel_size=7, stride=1, padding=3, bias=False))
        layers.append(nn.Tanh())
        self.main = nn.Sequential(*layers)
    def forward(self, x, c):
        c = c.view(c.size(0), c.size(1), 1, 1)
        c = c.repeat(1, 1, x.size(2), x.size(3))
        x = torch.cat([x, c], dim=1)
        return self.main(x)

class Discriminator(nn.Module):
    """Discriminator network with PatchGAN."""
    def __init__(self, image_size=128, conv_dim=64, c_dim=5, repeat_num=6):
        super(Discriminator, self).__init__()
        layers = []
        layers.append(nn.Conv2d(3, conv_dim, kernel_size=4, stride=2, padding=1))
        layers.append(nn.LeakyReLU(0.01))
        curr_dim = conv_dim
        for i in range(1, repeat_num):
            layers.append(nn.Conv2d(curr_dim, curr_dim*2, kernel_size=4, stride=2, padding=1))
            layers.append(nn.LeakyReLU(0.01))
            curr_dim = curr_dim * 2
        kernel_size = int(image_size / np.power(2, repeat_num))
        self.main = nn.Sequential(*layers)
        self.conv1 = nn.Conv2d(curr_dim, 1, kernel_size=3, stride=1, padding=1, bias=False)
        self.conv2 = nn.Conv2d(curr_dim, c_dim, kernel_size=kernel_size, bias=False)
    def forward(self, x):
        h = self.main(x)
        out_src = self.conv1(h)
        out_cls = self.conv2(h)
        return out_src, out_cls.view(out_cls.size(0), out_cls.size(1))

# ---- data_loader.py ----------------------------------------------------------------------------------------------
def make_image(seed, code, image_size):
    """A synthetic face: a pattern whose colour bands follow the attribute / expression code, plus noise."""
    rng = np.random.RandomState(seed)
    img = 0.2 * rng.randn(3, image_size, image_size)
    for k, bit in enumerate(code):
        img[k % 3, (k * image_size) // len(code):((k + 1) * image_size) // len(code), :] += 1.2 * bit - 0.6
    return torch.from_numpy(np.clip(img, -1, 1).astype(np.float32))

class CelebA(data.Dataset):
    """Dataset class for the CelebA dataset."""
    def __init__(self, image_dir, attr_path, selected_attrs, transform, mode):
        """Initialize and preprocess the CelebA dataset."""
        self.image_dir = image_dir
        self.attr_path = attr_path
        self.selected_attrs = selected_attrs
        self.transform = transform
        self.mode = mode
        self.train_dataset = []
        self.test_dataset = []
        self.attr2idx = {}
        self.idx2attr = {}
        self.preprocess()
        if mode == 'train':
            self.num_images = len(self.train_dataset)
        else:
            self.num_images = len(self.test_dataset)
    def preprocess(self):
        """Preprocess the CelebA attribute file."""
        lines = [line.rstrip() for line in open(self.attr_path, 'r')]
        all_attr_names = lines[1].split()
        for i, attr_name in enumerate(all_attr_names):
            self.attr2idx[attr_name] = i
            self.idx2attr[i] = attr_name
        lines = lines[2:]
        random.seed(1234)
        random.shuffle(lines)
        for i, line in enumerate(lines):
            split = line.split()
            filename = split[0]
            values = split[1:]
            label = []
            for attr_name in self.selected_attrs:
                idx = self.attr2idx[attr_name]
                label.append(values[idx] == '1')
            if (i+1) < 5:
                self.test_dataset.append([filename, label])
            else:
                self.train_dataset.append([filename, label])
        print('Finished preprocessing the CelebA dataset...')
    def __getitem__(self, index):
        """Return one image and its corresponding attribute label."""
        dataset = self.train_dataset if self.mode == 'train' else self.test_dataset
        filename, label = dataset[index]
        image = make_image(int(filename[:6]), label, self.transform)
        return image, torch.FloatTensor(label)
    def __len__(self):
        """Return the number of images."""
        return self.num_images

class ImageFolder(data.Dataset):
    """Stand-in for torchvision's ImageFolder over RaFD: (image, class index) for eight expression folders."""
    def __init__(self, image_dir, transform, n_images=16, n_classes=8):
        self.samples = [(i, i % n_classes) for i in range(n_images)]
        self.transform, self.n_classes = transform, n_classes
    def __getitem__(self, index):
        seed, target = self.samples[index]
        return make_image(100 + seed, np.eye(self.n_classes)[target], self.transform), target
    def __len__(self):
        return len(self.samples)

def get_loader(image_dir, attr_path, selected_attrs, crop_size=178, image_size=128,
               batch_size=16, dataset='CelebA', mode='train', num_workers=1):
    """Build and return a data loader."""
    transform = image_size  # RandomHorizontalFlip, CenterCrop, Resize, ToTensor and Normalize are left out
    if dataset == 'CelebA':
        dataset = CelebA(image_dir, attr_path, selected_attrs, transform, mode)
    elif dataset == 'RaFD':
        dataset = ImageFolder(image_dir, transform)
    data_loader = data.DataLoader(dataset=dataset,
                                  batch_size=batch_size,
                                  shuffle=(mode=='train'),
                                  num_workers=num_workers)
    return data_loader

# ---- solver.py ---------------------------------------------------------------------------------------------------
class Solver(object):
    """Solver for training and testing StarGAN."""
    def __init__(self, celeba_loader, rafd_loader, config):
        """Initialize configurations."""
        self.celeba_loader = celeba_loader
        self.rafd_loader = rafd_loader
        self.c_dim = config.c_dim
        self.c2_dim = config.c2_dim
        self.image_size = config.image_size
        self.g_conv_dim = config.g_conv_dim
        self.d_conv_dim = config.d_conv_dim
        self.g_repeat_num = config.g_repeat_num
        self.d_repeat_num = config.d_repeat_num
        self.lambda_cls = config.lambda_cls
        self.lambda_rec = config.lambda_rec
        self.lambda_gp = config.lambda_gp
        self.dataset = config.dataset
        self.batch_size = config.batch_size
        self.num_iters = config.num_iters
        self.num_iters_decay = config.num_iters_decay
        self.g_lr = config.g_lr
        self.d_lr = config.d_lr
        self.n_critic = config.n_critic
        self.beta1 = config.beta1
        self.beta2 = config.beta2
        self.resume_iters = config.resume_iters
        self.selected_attrs = config.selected_attrs
        self.test_iters = config.test_iters
        self.use_tensorboard = config.use_tensorboard
        self.device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
        self.log_dir = config.log_dir
        self.sample_dir = config.sample_dir
        self.model_save_dir = config.model_save_dir
        self.result_dir = config.result_dir
        self.log_step = config.log_step
        self.sample_step = config.sample_step
        self.model_save_step = config.model_save_step
        self.lr_update_step = config.lr_update_step
        self.build_model()
    def build_model(self):
        """Create a generator and a discriminator."""
        if self.dataset in ['CelebA', 'RaFD']:
            self.G = Generator(self.g_conv_dim, self.c_dim, self.g_repeat_num)
            self.D = Discriminator(self.image_size, self.d_conv_dim, self.c_dim, self.d_repeat_num)
        self.g_optimizer = torch.optim.Adam(self.G.parameters(), self.g_lr, [self.beta1, self.beta2])
        self.d_optimizer = torch.optim.Adam(self.D.parameters(), self.d_lr, [self.beta1, self.beta2])
        self.print_network(self.G, 'G')
        self.print_network(self.D, 'D')
        self.G.to(self.device)
        self.D.to(self.device)
    def print_network(self, model, name):
        """Print out the network information."""
        num_params = 0
        for p in model.parameters():
            num_params += p.numel()
        print(name, "- the number of parameters: {}".format(num_params))
    def restore_model(self, resume_iters):
        """Restore the trained generator and discriminator."""
        print('Loading the trained models from step {}...'.format(resume_iters))
        G_path = os.path.join(self.model_save_dir, '{}-G.ckpt'.format(resume_iters))
        D_path = os.path.join(self.model_save_dir, '{}-D.ckpt'.format(resume_iters))
        self.G.load_state_dict(torch.load(G_path, map_location=lambda storage, loc: storage))
        self.D.load_state_dict(torch.load(D_path, map_location=lambda storage, loc: storage))
    def update_lr(self, g_lr, d_lr):
        """Decay learning rates of the generator and discriminator."""
        for param_group in self.g_optimizer.param_groups:
            param_group['lr'] = g_lr
        for param_group in self.d_optimizer.param_groups:
            param_group['lr'] = d_lr
    def reset_grad(self):
        """Reset the gradient buffers."""
        self.g_optimizer.zero_grad()
        self.d_optimizer.zero_grad()
    def denorm(self, x):
        """Convert the range from [-1, 1] to [0, 1]."""
        out = (x + 1) / 2
        return out.clamp_(0, 1)
    def gradient_penalty(self, y, x):
        """Compute gradient penalty: (L2_norm(dy/dx) - 1)**2."""
        weight = torch.ones(y.size()).to(self.device)
        dydx = torch.autograd.grad(outputs=y,
                                   inputs=x,
                                   grad_outputs=weight,
                                   retain_graph=True,
                                   create_graph=True,
                                   only_inputs=True)[0]
        dydx = dydx.view(dydx.size(0), -1)
        dydx_l2norm = torch.sqrt(torch.sum(dydx**2, dim=1))
        return torch.mean((dydx_l2norm-1)**2)
    def label2onehot(self, labels, dim):
        """Convert label indices to one-hot vectors."""
        batch_size = labels.size(0)
        out = torch.zeros(batch_size, dim)
        out[np.arange(batch_size), labels.long()] = 1
        return out
    def create_labels(self, c_org, c_dim=5, dataset='CelebA', selected_attrs=None):
        """Generate target domain labels for debugging and testing."""
        if dataset == 'CelebA':
            hair_color_indices = []
            for i, attr_name in enumerate(selected_attrs):
                if attr_name in ['Black_Hair', 'Blond_Hair', 'Brown_Hair', 'Gray_Hair']:
                    hair_color_indices.append(i)
        c_trg_list = []
        for i in range(c_dim):
            if dataset == 'CelebA':
                c_trg = c_org.clone()
                if i in hair_color_indices:  # Set one hair color to 1 and the rest to 0.
                    c_trg[:, i] = 1
                    for j in hair_color_indices:
                        if j != i:
                            c_trg[:, j] = 0
                else:
                    c_trg[:, i] = (c_trg[:, i] == 0)  # Reverse attribute value.
            elif dataset == 'RaFD':
                c_trg = self.label2onehot(torch.ones(c_org.size(0))*i, c_dim)
            c_trg_list.append(c_trg.to(self.device))
        return c_trg_list
    def classification_loss(self, logit, target, dataset='CelebA'):
        """Compute binary or softmax cross entropy loss."""
        if dataset == 'CelebA':
            return F.binary_cross_entropy_with_logits(logit, target, size_average=False) / logit.size(0)
        elif dataset == 'RaFD':
            return F.cross_entropy(logit, target)
    def train(self):
        """Train StarGAN within a single dataset."""
        if self.dataset == 'CelebA':
            data_loader = self.celeba_loader
        elif self.dataset == 'RaFD':
            data_loader = self.rafd_loader
        data_iter = iter(data_loader)
        x_fixed, c_org = next(data_iter)
        x_fixed = x_fixed.to(self.device)
        c_fixed_list = self.create_labels(c_org, self.c_dim, self.dataset, self.selected_attrs)
        g_lr = self.g_lr
        d_lr = self.d_lr
        start_iters = 0
        if self.resume_iters:
            start_iters = self.resume_iters
            self.restore_model(self.resume_iters)
        print('Start training...')
        start_time = time.time()
        for i in range(start_iters, self.num_iters):
            try:
                x_real, label_org = next(data_iter)
            except:
                data_iter = iter(data_loader)
                x_real, label_org = next(data_iter)
            rand_idx = torch.randperm(label_org.size(0))
            label_trg = label_org[rand_idx]
            if self.dataset == 'CelebA':
                c_org = label_org.clone()
                c_trg = label_trg.clone()
            elif self.dataset == 'RaFD':
                c_org = self.label2onehot(label_org, self.c_dim)
                c_trg = self.label2onehot(label_trg, self.c_dim)
            x_real = x_real.to(self.device)           # Input images.
            c_org = c_org.to(self.device)             # Original domain labels.
            c_trg = c_trg.to(self.device)             # Target domain labels.
            label_org = label_org.to(self.device)     # Labels for computing classification loss.
            label_trg = label_trg.to(self.device)     # Labels for computing classification loss.
            out_src, out_cls = self.D(x_real)
            d_loss_real = - torch.mean(out_src)
            d_loss_cls = self.classification_loss(out_cls, label_org, self.dataset)
            x_fake = self.G(x_real, c_trg)
            out_src, out_cls = self.D(x_fake.detach())
            d_loss_fake = torch.mean(out_src)
            alpha = torch.rand(x_real.size(0), 1, 1, 1).to(self.device)
            x_hat = (alpha * x_real.data + (1 - alpha) * x_fake.data).requires_grad_(True)
            out_src, _ = self.D(x_hat)
            d_loss_gp = self.gradient_penalty(out_src, x_hat)
            d_loss = d_loss_real + d_loss_fake + self.lambda_cls * d_loss_cls + self.lambda_gp * d_loss_gp
            self.reset_grad()
            d_loss.backward()
            self.d_optimizer.step()
            loss = {}
            loss['D/loss_real'] = d_loss_real.item()
            loss['D/loss_fake'] = d_loss_fake.item()
            loss['D/loss_cls'] = d_loss_cls.item()
            loss['D/loss_gp'] = d_loss_gp.item()
            if (i+1) % self.n_critic == 0:
                x_fake = self.G(x_real, c_trg)
                out_src, out_cls = self.D(x_fake)
                g_loss_fake = - torch.mean(out_src)
                g_loss_cls = self.classification_loss(out_cls, label_trg, self.dataset)
                x_reconst = self.G(x_fake, c_org)
                g_loss_rec = torch.mean(torch.abs(x_real - x_reconst))
                g_loss = g_loss_fake + self.lambda_rec * g_loss_rec + self.lambda_cls * g_loss_cls
                self.reset_grad()
                g_loss.backward()
                self.g_optimizer.step()
                loss['G/loss_fake'] = g_loss_fake.item()
                loss['G/loss_rec'] = g_loss_rec.item()
                loss['G/loss_cls'] = g_loss_cls.item()
            if (i+1) % self.log_step == 0:
                et = time.time() - start_time
                et = str(datetime.timedelta(seconds=et))[:-7]
                log = "Elapsed [{}], Iteration [{}/{}]".format(et, i+1, self.num_iters)
                for tag, value in loss.items():
                    log += ", {}: {:.4f}".format(tag, value)
                print(log)
            if (i+1) % self.sample_step == 0:
                with torch.no_grad():
                    x_fake_list = [x_fixed]
                    for c_fixed in c_fixed_list:
                        x_fake_list.append(self.G(x_fixed, c_fixed))
                    x_concat = torch.cat(x_fake_list, dim=3)
                    sample_path = os.path.join(self.sample_dir, '{}-images.jpg'.format(i+1))
                    save_image(self.denorm(x_concat.data.cpu()), sample_path, nrow=1, padding=0)
                    print('Saved real and fake images into {}...'.format(sample_path))
            if (i+1) % self.model_save_step == 0:
                G_path = os.path.join(self.model_save_dir, '{}-G.ckpt'.format(i+1))
                D_path = os.path.join(self.model_save_dir, '{}-D.ckpt'.format(i+1))
                torch.save(self.G.state_dict(), G_path)
                torch.save(self.D.state_dict(), D_path)
                print('Saved model checkpoints into {}...'.format(self.model_save_dir))
            if (i+1) % self.lr_update_step == 0 and (i+1) > (self.num_iters - self.num_iters_decay):
                g_lr -= (self.g_lr / float(self.num_iters_decay))
                d_lr -= (self.d_lr / float(self.num_iters_decay))
                self.update_lr(g_lr, d_lr)
                print('Decayed learning rates, g_lr: {}, d_lr: {}.'.format(g_lr, d_lr))
        return loss
    def test(self):
        """Translate images using StarGAN trained on a single dataset."""
        self.restore_model(self.test_iters)
        if self.dataset == 'CelebA':
            data_loader = self.celeba_loader
        elif self.dataset == 'RaFD':
            data_loader = self.rafd_loader
        with torch.no_grad():
            for i, (x_real, c_org) in enumerate(data_loader):
                x_real = x_real.to(self.device)
                c_trg_list = self.create_labels(c_org, self.c_dim, self.dataset, self.selected_attrs)
                x_fake_list = [x_real]
                for c_trg in c_trg_list:
                    x_fake_list.append(self.G(x_real, c_trg))
                x_concat = torch.cat(x_fake_list, dim=3)
                result_path = os.path.join(self.result_dir, '{}-images.jpg'.format(i+1))
                save_image(self.denorm(x_concat.data.cpu()), result_path, nrow=1, padding=0)
                print('Saved real and fake images into {}...'.format(result_path))
        return x_concat

# ---- main.py -----------------------------------------------------------------------------------------------------
def str2bool(v):
    return v.lower() in ('true')

def main(config):
    cudnn.benchmark = True
    for folder in [config.log_dir, config.model_save_dir, config.sample_dir, config.result_dir]:
        if not os.path.exists(folder):
            os.makedirs(folder)
    celeba_loader = None
    rafd_loader = None
    if config.dataset in ['CelebA', 'Both']:
        celeba_loader = get_loader(config.celeba_image_dir, config.attr_path, config.selected_attrs,
                                   config.celeba_crop_size, config.image_size, config.batch_size,
                                   'CelebA', config.mode, config.num_workers)
    if config.dataset in ['RaFD', 'Both']:
        rafd_loader = get_loader(config.rafd_image_dir, None, None,
                                 config.rafd_crop_size, config.image_size, config.batch_size,
                                 'RaFD', config.mode, config.num_workers)
    solver = Solver(celeba_loader, rafd_loader, config)
    if config.mode == 'train':
        if config.dataset in ['CelebA', 'RaFD']:
            return solver.train()
    elif config.mode == 'test':
        if config.dataset in ['CelebA', 'RaFD']:
            return solver.test()

def parse_config(argv, root):
    parser = argparse.ArgumentParser()
    parser.add_argument('--c_dim', type=int, default=5)
    parser.add_argument('--c2_dim', type=int, default=8)
    parser.add_argument('--celeba_crop_size', type=int, default=178)
    parser.add_argument('--rafd_crop_size', type=int, default=256)
    parser.add_argument('--image_size', type=int, default=32)
    parser.add_argument('--g_conv_dim', type=int, default=16)
    parser.add_argument('--d_conv_dim', type=int, default=16)
    parser.add_argument('--g_repeat_num', type=int, default=2)
    parser.add_argument('--d_repeat_num', type=int, default=3)
    parser.add_argument('--lambda_cls', type=float, default=1)
    parser.add_argument('--lambda_rec', type=float, default=10)
    parser.add_argument('--lambda_gp', type=float, default=10)
    parser.add_argument('--dataset', type=str, default='CelebA', choices=['CelebA', 'RaFD', 'Both'])
    parser.add_argument('--batch_size', type=int, default=4)
    parser.add_argument('--num_iters', type=int, default=6)
    parser.add_argument('--num_iters_decay', type=int, default=3)
    parser.add_argument('--g_lr', type=float, default=0.0001)
    parser.add_argument('--d_lr', type=float, default=0.0001)
    parser.add_argument('--n_critic', type=int, default=2)
    parser.add_argument('--beta1', type=float, default=0.5)
    parser.add_argument('--beta2', type=float, default=0.999)
    parser.add_argument('--resume_iters', type=int, default=None)
    parser.add_argument('--selected_attrs', '--list', nargs='+', help='selected attributes for the CelebA dataset',
                        default=['Black_Hair', 'Blond_Hair', 'Brown_Hair', 'Male', 'Young'])
    parser.add_argument('--test_iters', type=int, default=6)
    parser.add_argument('--num_workers', type=int, default=0)
    parser.add_argument('--mode', type=str, default='train', choices=['train', 'test'])
    parser.add_argument('--use_tensorboard', type=str2bool, default=False)
    parser.add_argument('--celeba_image_dir', type=str, default=os.path.join(root, 'data/celeba/images'))
    parser.add_argument('--attr_path', type=str, default=os.path.join(root, 'data/celeba/list_attr_celeba.txt'))
    parser.add_argument('--rafd_image_dir', type=str, default=os.path.join(root, 'data/RaFD/train'))
    parser.add_argument('--log_dir', type=str, default=os.path.join(root, 'stargan/logs'))
    parser.add_argument('--model_save_dir', type=str, default=os.path.join(root, 'stargan/models'))
    parser.add_argument('--sample_dir', type=str, default=os.path.join(root, 'stargan/samples'))
    parser.add_argument('--result_dir', type=str, default=os.path.join(root, 'stargan/results'))
    parser.add_argument('--log_step', type=int, default=2)
    parser.add_argument('--sample_step', type=int, default=3)
    parser.add_argument('--model_save_step', type=int, default=3)
    parser.add_argument('--lr_update_step', type=int, default=2)
    return parser.parse_args(argv)

def write_attr_file(path, n_images=24, seed=0):
    """Writes list_attr_celeba.txt: the image count, the 40 attribute names, then one +1/-1 row per image."""
    names = ['5_o_Clock_Shadow', 'Arched_Eyebrows', 'Attractive', 'Bags_Under_Eyes', 'Bald', 'Bangs', 'Big_Lips',
             'Big_Nose', 'Black_Hair', 'Blond_Hair', 'Blurry', 'Brown_Hair', 'Bushy_Eyebrows', 'Chubby',
             'Double_Chin', 'Eyeglasses', 'Goatee', 'Gray_Hair', 'Heavy_Makeup', 'High_Cheekbones', 'Male',
             'Mouth_Slightly_Open', 'Mustache', 'Narrow_Eyes', 'No_Beard', 'Oval_Face', 'Pale_Skin',
             'Pointy_Nose', 'Receding_Hairline', 'Rosy_Cheeks', 'Sideburns', 'Smiling', 'Straight_Hair',
             'Wavy_Hair', 'Wearing_Earrings', 'Wearing_Hat', 'Wearing_Lipstick', 'Wearing_Necklace',
             'Wearing_Necktie', 'Young']
    rng = np.random.RandomState(seed)
    os.makedirs(os.path.dirname(path))
    with open(path, 'w') as f:
        f.write('%d\n%s\n' % (n_images, ' '.join(names)))
        for i in range(n_images):
            values = rng.choice(['1', '-1'], size=len(names))
            hair = rng.choice([8, 9, 11])  # one hair colour per face
            values[[8, 9, 11, 17]] = '-1'
            values[hair] = '1'
            f.write('%06d.jpg %s\n' % (i + 1, ' '.join(values)))

def run():
    root = tempfile.mkdtemp(prefix='stargan_')
    try:
        write_attr_file(os.path.join(root, 'data/celeba/list_attr_celeba.txt'))
        celeba = main(parse_config(['--dataset', 'CelebA'], root))
        rafd = main(parse_config(['--dataset', 'RaFD', '--c_dim', '8', '--rafd_crop_size', '256',
                                  '--model_save_dir', os.path.join(root, 'stargan_rafd/models')], root))
        resumed = main(parse_config(['--dataset', 'CelebA', '--resume_iters', '6', '--num_iters', '10'], root))
        x_concat = main(parse_config(['--dataset', 'CelebA', '--mode', 'test', '--test_iters', '9'], root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print('done: CelebA D/loss_gp {:.4f}, RaFD D/loss_cls {:.4f}, resumed G/loss_rec {:.4f}, test grid {}'.format(
        celeba['D/loss_gp'], rafd['D/loss_cls'], resumed['G/loss_rec'], tuple(x_concat.shape)))

if __name__ == '__main__':
    run()
