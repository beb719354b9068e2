"""Trains a beta-VAE (Burgess et al.'s "understanding beta-VAE" model B and its capacity-annealed objective: Bernoulli
reconstruction plus gamma * |KL - C| with C growing linearly to C_max) on dSprites-like binary 64x64 shape images,
saving a 'last' checkpoint (iteration, model and optimizer states) every save_step iterations and writing latent
traversals (each latent dimension swept over [-3, 3] from a fixed square, ellipse and heart image and a random one)
at every display step; then main.py is run again: once with --train false, which reloads the 'last' checkpoint and
only traverses the latents, and once more with --train true, which resumes from the checkpoint's iteration.

Modeled on: 1Konny/Beta-VAE, main.py, solver.py, model.py, dataset.py and utils.py at commit
977a1ece88e190dd8a556b4e2efb665f759d0772 (https://github.com/1Konny/Beta-VAE/blob/977a1ece88e190dd8a556b4e2efb665f759d0772/solver.py).

Kept: the `--cuda` str2bool flag and `Solver.use_cuda = args.cuda and torch.cuda.is_available()`; the helper
`cuda(tensor, uses_cuda)` from utils.py that every move goes through (the net `cuda(net(self.z_dim, self.nc),
self.use_cuda)` before Adam is made, `self.C_max = Variable(cuda(torch.FloatTensor([self.C_max]), self.use_cuda))`,
each batch `Variable(cuda(x, self.use_cuda))`, the traversal images and `torch.rand(1, self.z_dim)` with
`volatile=True`); `torch.cuda.manual_seed(seed)` and the cudnn flags in main.py; `reparametrize` drawing eps with
the legacy `std.data.new(...).normal_()`; `reconstruction_loss`, `kl_divergence` (totals kept as 1-element tensors), the
clamp of C against `self.C_max.data[0]`; `net_mode(train=...)` switching around the traversal; the traversal reading
single items from `data_loader.dataset`, sweeping `z[:, row] = val` and collecting `F.sigmoid(decoder(z)).data`,
then `.cpu()` before saving; `save_checkpoint` writing {'iter', 'win_states', 'model_states', 'optim_states'} through
an open file and `load_checkpoint` (called from `__init__` with ckpt_name 'last') doing `torch.load(file_path)` with
no map_location, then restoring the net and optimizer states; the DataLoader with `pin_memory=True` and
`drop_last=True` over a `CustomTensorDataset`; the `if args.train: net.train() else: net.traverse()` switch
(`traverse` is what the author's main.py calls; the solver's method is `viz_traverse`, so it is aliased here).
Changed to run here: the dSprites .npz is synthetic (squares, ellipses and hearts at random scales and positions)
and written under a temporary directory instead of downloaded; visdom is off (`--viz_on false`) and its plotting
methods (viz_reconstruction, viz_lines), the DataGather feeding them and the CelebA/3DChairs branches are left out; torchvision's `save_image` is replaced by a small PGM writer
and `grid2gif` (which shells out to ImageMagick) only lists the frames; `recon_loss.data[0]` (a 0-dim tensor in
current PyTorch) is `recon_loss.item()`; tqdm's bar prints plain lines; the three argument lists are explicit (and
`std.data.new(std.size())`, once `new(*std.size())` while the pretend device read a Size as data, is as written).
Shrunk: 384 images (the author's 737280) with the fixed traversal indices scaled to match; batch 8, 20 iterations
then 20 more after the resume (the author's 1.5e6), display every 20 and save every 10 (the author's 10000),
C_stop_iter 20, z_dim 4, num_workers 0.
"""
import argparse
import glob
import os
import random
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.init as init
import torch.optim as optim
from torch.autograd import Variable
from torch.utils.data import DataLoader, Dataset

torch.backends.cudnn.enabled = True
torch.backends.cudnn.benchmark = True

# ----------------------------------------------------------------------------- utils.py

def cuda(tensor, uses_cuda):
    return tensor.cuda() if uses_cuda else tensor

def str2bool(v):
    if v.lower() in ('yes', 'true', 't', 'y', '1'):
        return True
    elif v.lower() in ('no', 'false', 'f', 'n', '0'):
        return False
    else:
        raise argparse.ArgumentTypeError('Boolean value expected.')

def grid2gif(image_str, output_gif, delay=100):
    """The author runs ImageMagick's `convert -delay ... -loop 0 <frames> <gif>` here."""
    frames = sorted(glob.glob(image_str))
    with open(output_gif + '.txt', 'w') as f:
        f.write('\n'.join(frames))

def save_image(tensor, filename, nrow=8, pad_value=0):
    """Stand-in for torchvision.utils.save_image: the frames side by side as a binary PGM."""
    array = tensor.clamp(0, 1).mul(255).byte().numpy()  # N x C x H x W, on the CPU
    row = np.concatenate([np.pad(a[0], 1, constant_values=int(pad_value * 255)) for a in array], axis=1)
    with open(filename.replace('.jpg', '.pgm'), 'wb') as f:
        f.write(b'P5 %d %d 255\n' % (row.shape[1], row.shape[0]))
        f.write(row.tobytes())

# ----------------------------------------------------------------------------- model.py

def reparametrize(mu, logvar):
    std = logvar.div(2).exp()
    eps = Variable(std.data.new(std.size()).normal_())
    return mu + std * eps

class View(nn.Module):
    def __init__(self, size):
        super(View, self).__init__()
        self.size = size

    def forward(self, tensor):
        return tensor.view(self.size)

class BetaVAE_B(nn.Module):
    """Model proposed in understanding beta-VAE paper(Burgess et al, arxiv:1804.03599, 2018)."""

    def __init__(self, z_dim=10, nc=1):
        super(BetaVAE_B, self).__init__()
        self.nc = nc
        self.z_dim = z_dim

        self.encoder = nn.Sequential(
            nn.Conv2d(nc, 32, 4, 2, 1),           # B,  32, 32, 32
            nn.ReLU(True),
            nn.Conv2d(32, 32, 4, 2, 1),           # B,  32, 16, 16
            nn.ReLU(True),
            nn.Conv2d(32, 32, 4, 2, 1),           # B,  32,  8,  8
            nn.ReLU(True),
            nn.Conv2d(32, 32, 4, 2, 1),           # B,  32,  4,  4
            nn.ReLU(True),
            View((-1, 32 * 4 * 4)),               # B, 512
            nn.Linear(32 * 4 * 4, 256),           # B, 256
            nn.ReLU(True),
            nn.Linear(256, 256),                  # B, 256
            nn.ReLU(True),
            nn.Linear(256, z_dim * 2),            # B, z_dim*2
        )

        self.decoder = nn.Sequential(
            nn.Linear(z_dim, 256),                # B, 256
            nn.ReLU(True),
            nn.Linear(256, 256),                  # B, 256
            nn.ReLU(True),
            nn.Linear(256, 32 * 4 * 4),           # B, 512
            nn.ReLU(True),
            View((-1, 32, 4, 4)),                 # B,  32,  4,  4
            nn.ConvTranspose2d(32, 32, 4, 2, 1),  # B,  32,  8,  8
            nn.ReLU(True),
            nn.ConvTranspose2d(32, 32, 4, 2, 1),  # B,  32, 16, 16
            nn.ReLU(True),
            nn.ConvTranspose2d(32, 32, 4, 2, 1),  # B,  32, 32, 32
            nn.ReLU(True),
            nn.ConvTranspose2d(32, nc, 4, 2, 1),  # B,  nc, 64, 64
        )
        self.weight_init()

    def weight_init(self):
        for block in self._modules:
            for m in self._modules[block]:
                kaiming_init(m)

    def forward(self, x):
        distributions = self._encode(x)
        mu = distributions[:, :self.z_dim]
        logvar = distributions[:, self.z_dim:]
        z = reparametrize(mu, logvar)
        x_recon = self._decode(z).view(x.size())
        return x_recon, mu, logvar

    def _encode(self, x):
        return self.encoder(x)

    def _decode(self, z):
        return self.decoder(z)

def kaiming_init(m):
    if isinstance(m, (nn.Linear, nn.Conv2d)):
        init.kaiming_normal(m.weight)
        if m.bias is not None:
            m.bias.data.fill_(0)
    elif isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
        m.weight.data.fill_(1)
        if m.bias is not None:
            m.bias.data.fill_(0)

# ----------------------------------------------------------------------------- dataset.py

class CustomTensorDataset(Dataset):
    def __init__(self, data_tensor):
        self.data_tensor = data_tensor

    def __getitem__(self, index):
        return self.data_tensor[index]

    def __len__(self):
        return self.data_tensor.size(0)

def write_synthetic_dsprites(path, per_shape=128, seed=0):
    """Binary 64x64 squares, ellipses and hearts, in that (shape-major) order as in dSprites."""
    rng = np.random.RandomState(seed)
    yy, xx = np.mgrid[0:64, 0:64].astype(np.float32)
    imgs = np.zeros((3 * per_shape, 64, 64), dtype=np.uint8)
    for shape in range(3):
        for k in range(per_shape):
            cx, cy = rng.uniform(16, 48, size=2)
            s = rng.uniform(5, 12)
            u, v = (xx - cx) / s, (yy - cy) / s
            if shape == 0:
                mask = (np.abs(u) <= 1) & (np.abs(v) <= 1)
            elif shape == 1:
                mask = (u / 1.4) ** 2 + v ** 2 <= 1
            else:
                mask = (u ** 2 + (-v) ** 2 - 1) ** 3 - u ** 2 * (-v) ** 3 <= 0
            imgs[shape * per_shape + k] = mask
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.savez(path, imgs=imgs)

def return_data(args):
    name = args.dataset
    dset_dir = args.dset_dir
    batch_size = args.batch_size
    num_workers = args.num_workers
    image_size = args.image_size
    assert image_size == 64, 'currently only image size of 64 is supported'

    if name.lower() == 'dsprites':
        root = os.path.join(dset_dir, 'dsprites-dataset/dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz')
        if not os.path.exists(root):
            print('Now make a synthetic dsprites-dataset')
            write_synthetic_dsprites(root)
        data = np.load(root, encoding='bytes')
        data = torch.from_numpy(data['imgs']).unsqueeze(1).float()
        train_kwargs = {'data_tensor': data}
        dset = CustomTensorDataset
    else:
        raise NotImplementedError

    train_data = dset(**train_kwargs)
    train_loader = DataLoader(train_data, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                              pin_memory=True, drop_last=True)
    data_loader = train_loader
    return data_loader

# ----------------------------------------------------------------------------- solver.py

def reconstruction_loss(x, x_recon, distribution):
    batch_size = x.size(0)
    assert batch_size != 0

    if distribution == 'bernoulli':
        recon_loss = F.binary_cross_entropy_with_logits(x_recon, x, size_average=False).div(batch_size)
    elif distribution == 'gaussian':
        x_recon = F.sigmoid(x_recon)
        recon_loss = F.mse_loss(x_recon, x, size_average=False).div(batch_size)
    else:
        recon_loss = None
    return recon_loss

def kl_divergence(mu, logvar):
    batch_size = mu.size(0)
    assert batch_size != 0
    if mu.data.ndimension() == 4:
        mu = mu.view(mu.size(0), mu.size(1))
    if logvar.data.ndimension() == 4:
        logvar = logvar.view(logvar.size(0), logvar.size(1))

    klds = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp())
    total_kld = klds.sum(1).mean(0, True)
    dimension_wise_kld = klds.mean(0)
    mean_kld = klds.mean(1).mean(0, True)
    return total_kld, dimension_wise_kld, mean_kld

class Solver(object):
    def __init__(self, args):
        self.use_cuda = args.cuda and torch.cuda.is_available()
        self.max_iter = args.max_iter
        self.global_iter = 0

        self.z_dim = args.z_dim
        self.beta = args.beta
        self.gamma = args.gamma
        self.C_max = args.C_max
        self.C_stop_iter = args.C_stop_iter
        self.objective = args.objective
        self.model = args.model
        self.lr = args.lr
        self.beta1 = args.beta1
        self.beta2 = args.beta2

        if args.dataset.lower() == 'dsprites':
            self.nc = 1
            self.decoder_dist = 'bernoulli'
        else:
            raise NotImplementedError

        if args.model == 'B':
            net = BetaVAE_B
        else:
            raise NotImplementedError('only support model H or B')

        self.net = cuda(net(self.z_dim, self.nc), self.use_cuda)
        self.optim = optim.Adam(self.net.parameters(), lr=self.lr, betas=(self.beta1, self.beta2))

        self.viz_name = args.viz_name
        self.viz_on = args.viz_on
        self.win_recon = None
        self.win_kld = None
        self.win_mu = None
        self.win_var = None

        self.ckpt_dir = os.path.join(args.ckpt_dir, args.viz_name)
        if not os.path.exists(self.ckpt_dir):
            os.makedirs(self.ckpt_dir, exist_ok=True)
        self.ckpt_name = args.ckpt_name
        if self.ckpt_name is not None:
            self.load_checkpoint(self.ckpt_name)

        self.save_output = args.save_output
        self.output_dir = os.path.join(args.output_dir, args.viz_name)
        if not os.path.exists(self.output_dir):
            os.makedirs(self.output_dir, exist_ok=True)

        self.gather_step = args.gather_step
        self.display_step = args.display_step
        self.save_step = args.save_step

        self.dset_dir = args.dset_dir
        self.dataset = args.dataset
        self.batch_size = args.batch_size
        self.data_loader = return_data(args)


    def train(self):
        self.net_mode(train=True)
        self.C_max = Variable(cuda(torch.FloatTensor([self.C_max]), self.use_cuda))
        out = False

        print('progress {}/{}'.format(self.global_iter, int(self.max_iter)))
        while not out:
            for x in self.data_loader:
                self.global_iter += 1

                x = Variable(cuda(x, self.use_cuda))
                x_recon, mu, logvar = self.net(x)
                recon_loss = reconstruction_loss(x, x_recon, self.decoder_dist)
                total_kld, dim_wise_kld, mean_kld = kl_divergence(mu, logvar)

                if self.objective == 'H':
                    beta_vae_loss = recon_loss + self.beta * total_kld
                elif self.objective == 'B':
                    C = torch.clamp(self.C_max / self.C_stop_iter * self.global_iter, 0, self.C_max.data[0])
                    beta_vae_loss = recon_loss + self.gamma * (total_kld - C).abs()

                self.optim.zero_grad()
                beta_vae_loss.backward()
                self.optim.step()

                if self.global_iter % self.display_step == 0:
                    print('[{}] recon_loss:{:.3f} total_kld:{:.3f} mean_kld:{:.3f}'.format(
                        self.global_iter, recon_loss.item(), total_kld.data[0], mean_kld.data[0]))

                    var = logvar.exp().mean(0).data
                    var_str = ''
                    for j, var_j in enumerate(var):
                        var_str += 'var{}:{:.4f} '.format(j + 1, var_j)
                    print(var_str)

                    if self.objective == 'B':
                        print('C:{:.3f}'.format(C.data[0]))

                    if self.viz_on or self.save_output:
                        self.viz_traverse()

                if self.global_iter % self.save_step == 0:
                    self.save_checkpoint('last')
                    print('Saved checkpoint(iter:{})'.format(self.global_iter))

                if self.global_iter % 50000 == 0:
                    self.save_checkpoint(str(self.global_iter))

                if self.global_iter >= self.max_iter:
                    out = True
                    break

        print("[Training Finished]")

    def viz_traverse(self, limit=3, inter=2 / 3, loc=-1):
        self.net_mode(train=False)

        decoder = self.net.decoder
        encoder = self.net.encoder
        interpolation = torch.arange(-limit, limit + 0.1, inter)

        n_dsets = len(self.data_loader.dataset)
        rand_idx = random.randint(1, n_dsets - 1)

        random_img = self.data_loader.dataset.__getitem__(rand_idx)
        random_img = Variable(cuda(random_img, self.use_cuda), volatile=True).unsqueeze(0)
        random_img_z = encoder(random_img)[:, :self.z_dim]

        random_z = Variable(cuda(torch.rand(1, self.z_dim), self.use_cuda), volatile=True)

        if self.dataset == 'dsprites':
            fixed_idx1 = 45   # square (the author's 87040 of 737280)
            fixed_idx2 = 173  # ellipse (332800)
            fixed_idx3 = 301  # heart (578560)

            fixed_img1 = self.data_loader.dataset.__getitem__(fixed_idx1)
            fixed_img1 = Variable(cuda(fixed_img1, self.use_cuda), volatile=True).unsqueeze(0)
            fixed_img_z1 = encoder(fixed_img1)[:, :self.z_dim]

            fixed_img2 = self.data_loader.dataset.__getitem__(fixed_idx2)
            fixed_img2 = Variable(cuda(fixed_img2, self.use_cuda), volatile=True).unsqueeze(0)
            fixed_img_z2 = encoder(fixed_img2)[:, :self.z_dim]

            fixed_img3 = self.data_loader.dataset.__getitem__(fixed_idx3)
            fixed_img3 = Variable(cuda(fixed_img3, self.use_cuda), volatile=True).unsqueeze(0)
            fixed_img_z3 = encoder(fixed_img3)[:, :self.z_dim]

            Z = {'fixed_square': fixed_img_z1, 'fixed_ellipse': fixed_img_z2,
                 'fixed_heart': fixed_img_z3, 'random_img': random_img_z}

        gifs = []
        for key in Z.keys():
            z_ori = Z[key]
            samples = []
            for row in range(self.z_dim):
                if loc != -1 and row != loc:
                    continue
                z = z_ori.clone()
                for val in interpolation:
                    z[:, row] = val
                    sample = F.sigmoid(decoder(z)).data
                    samples.append(sample)
                    gifs.append(sample)
            samples = torch.cat(samples, dim=0).cpu()
            title = '{}_latent_traversal(iter:{})'.format(key, self.global_iter)

        if self.save_output:
            output_dir = os.path.join(self.output_dir, str(self.global_iter))
            os.makedirs(output_dir, exist_ok=True)
            gifs = torch.cat(gifs)
            gifs = gifs.view(len(Z), self.z_dim, len(interpolation), self.nc, 64, 64).transpose(1, 2)
            for i, key in enumerate(Z.keys()):
                for j, val in enumerate(interpolation):
                    save_image(tensor=gifs[i][j].cpu(), filename=os.path.join(output_dir, '{}_{}.jpg'.format(key, j)),
                               nrow=self.z_dim, pad_value=1)

                grid2gif(os.path.join(output_dir, key + '*.pgm'), os.path.join(output_dir, key + '.gif'), delay=10)
            print('traversal of', ', '.join(Z.keys()), 'written to', output_dir)

        self.net_mode(train=True)

    traverse = viz_traverse

    def net_mode(self, train):
        if not isinstance(train, bool):
            raise ('Only bool type is supported. True or False')
        if train:
            self.net.train()
        else:
            self.net.eval()

    def save_checkpoint(self, filename, silent=True):
        model_states = {'net': self.net.state_dict(), }
        optim_states = {'optim': self.optim.state_dict(), }
        win_states = {'recon': self.win_recon, 'kld': self.win_kld, 'mu': self.win_mu, 'var': self.win_var, }
        states = {'iter': self.global_iter, 'win_states': win_states, 'model_states': model_states,
                  'optim_states': optim_states}

        file_path = os.path.join(self.ckpt_dir, filename)
        with open(file_path, mode='wb+') as f:
            torch.save(states, f)
        if not silent:
            print("=> saved checkpoint '{}' (iter {})".format(file_path, self.global_iter))

    def load_checkpoint(self, filename):
        file_path = os.path.join(self.ckpt_dir, filename)
        if os.path.isfile(file_path):
            checkpoint = torch.load(file_path)
            self.global_iter = checkpoint['iter']
            self.win_recon = checkpoint['win_states']['recon']
            self.win_kld = checkpoint['win_states']['kld']
            self.win_var = checkpoint['win_states']['var']
            self.win_mu = checkpoint['win_states']['mu']
            self.net.load_state_dict(checkpoint['model_states']['net'])
            self.optim.load_state_dict(checkpoint['optim_states']['optim'])
            print("=> loaded checkpoint '{} (iter {})'".format(file_path, self.global_iter))
        else:
            print("=> no checkpoint found at '{}'".format(file_path))

# ----------------------------------------------------------------------------- main.py

def main(args):
    seed = args.seed
    torch.manual_seed(seed)
    torch.cuda.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)

    net = Solver(args)

    if args.train:
        net.train()
    else:
        net.traverse()

def make_parser():
    parser = argparse.ArgumentParser(description='toy Beta-VAE')
    parser.add_argument('--train', default=True, type=str2bool, help='train or traverse')
    parser.add_argument('--seed', default=1, type=int, help='random seed')
    parser.add_argument('--cuda', default=True, type=str2bool, help='enable cuda')
    parser.add_argument('--max_iter', default=1e6, type=float, help='maximum training iteration')
    parser.add_argument('--batch_size', default=64, type=int, help='batch size')
    parser.add_argument('--z_dim', default=10, type=int, help='dimension of the representation z')
    parser.add_argument('--beta', default=4, type=float, help='beta parameter for KL-term in original beta-VAE')
    parser.add_argument('--objective', default='H', type=str, help='beta-vae objective H/B')
    parser.add_argument('--model', default='H', type=str, help='model H/B')
    parser.add_argument('--gamma', default=1000, type=float, help='gamma parameter for KL-term')
    parser.add_argument('--C_max', default=25, type=float, help='capacity parameter(C) of bottleneck channel')
    parser.add_argument('--C_stop_iter', default=1e5, type=float, help='when to stop increasing the capacity')
    parser.add_argument('--lr', default=1e-4, type=float, help='learning rate')
    parser.add_argument('--beta1', default=0.9, type=float, help='Adam optimizer beta1')
    parser.add_argument('--beta2', default=0.999, type=float, help='Adam optimizer beta2')
    parser.add_argument('--dset_dir', default='data', type=str, help='dataset directory')
    parser.add_argument('--dataset', default='CelebA', type=str, help='dataset name')
    parser.add_argument('--image_size', default=64, type=int, help='image size. now only (64,64) is supported')
    parser.add_argument('--num_workers', default=2, type=int, help='dataloader num_workers')
    parser.add_argument('--viz_on', default=True, type=str2bool, help='enable visdom visualization')
    parser.add_argument('--viz_name', default='main', type=str, help='visdom env name')
    parser.add_argument('--viz_port', default=8097, type=str, help='visdom port number')
    parser.add_argument('--save_output', default=True, type=str2bool, help='save traverse images and gif')
    parser.add_argument('--output_dir', default='outputs', type=str, help='output directory')
    parser.add_argument('--gather_step', default=1000, type=int, help='iterations between data gathering')
    parser.add_argument('--display_step', default=10000, type=int, help='iterations between loss prints')
    parser.add_argument('--save_step', default=10000, type=int, help='iterations between checkpoints')
    parser.add_argument('--ckpt_dir', default='checkpoints', type=str, help='checkpoint directory')
    parser.add_argument('--ckpt_name', default='last', type=str, help='load previous checkpoint')
    return parser

# run_dsprites_B_gamma100_z10.sh, shrunk; then the same with --train false, then a resumed run
COMMON = ['--dataset', 'dsprites', '--seed', '2', '--lr', '5e-4', '--beta1', '0.9', '--beta2', '0.999',
          '--objective', 'B', '--model', 'B', '--batch_size', '8', '--z_dim', '4', '--gamma', '100',
          '--C_max', '20', '--C_stop_iter', '20', '--viz_on', 'false', '--viz_name', 'dsprites_B_gamma100_z10',
          '--num_workers', '0', '--display_step', '20', '--save_step', '10']
RUNS = [
    COMMON + ['--max_iter', '20'],
    COMMON + ['--train', 'false'],
    COMMON + ['--max_iter', '40'],
]

if __name__ == "__main__":
    workdir = tempfile.TemporaryDirectory()
    home = os.getcwd()
    os.chdir(workdir.name)
    parser = make_parser()
    for argv in RUNS:
        args = parser.parse_args(argv)
        main(args)
    os.chdir(home)
    workdir.cleanup()
    print("done")
