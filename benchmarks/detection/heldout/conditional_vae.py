"""Trains a conditional VAE (the label vector embedded as an extra image channel for the encoder and concatenated
to the latent code for the decoder) on synthetic attribute-labelled face-like images, with the repository's
experiment class driven by a small loop that does what its PyTorch Lightning Trainer does (device placement, batch
transfer, optimizer and per-epoch scheduler steps, a no-grad validation pass, reconstruction and sample grids on
validation end, checkpointing on val_loss); then reloads the best checkpoint and reconstructs and samples from it.

Modeled on: AntixK/PyTorch-VAE, models/cvae.py, models/base.py, experiment.py, dataset.py, run.py and
configs/cvae.yaml (https://github.com/AntixK/PyTorch-VAE/blob/a6896b944c918dd7030e7d795a8c13e5c6345ec7/models/cvae.py,
https://github.com/AntixK/PyTorch-VAE/blob/a6896b944c918dd7030e7d795a8c13e5c6345ec7/models/base.py,
https://github.com/AntixK/PyTorch-VAE/blob/a6896b944c918dd7030e7d795a8c13e5c6345ec7/experiment.py,
https://github.com/AntixK/PyTorch-VAE/blob/a6896b944c918dd7030e7d795a8c13e5c6345ec7/dataset.py,
https://github.com/AntixK/PyTorch-VAE/blob/a6896b944c918dd7030e7d795a8c13e5c6345ec7/run.py,
https://github.com/AntixK/PyTorch-VAE/blob/a6896b944c918dd7030e7d795a8c13e5c6345ec7/configs/cvae.yaml).

Kept: the model code (`ConditionalVAE` with `embed_class`/`embed_data`, `torch.cat` of the embedded class channel,
`reparameterize` with `torch.randn_like`, the decoder fed `torch.cat([z, y], dim = 1)`, the loss dict, and `sample`
drawing `z = torch.randn(num_samples, self.latent_dim)` on the host and moving it with `z = z.to(current_device)`
before concatenating the labels, which are already on the device); `VAEXperiment` as written: `self.curr_device =
real_img.device` in the training and validation steps, `labels = labels` passed on, `log_dict` of `.item()` values,
`sample_images` taking a batch from the datamodule's `test_dataloader()` and moving it with
`.to(self.curr_device)`, `self.model.generate`, `self.model.sample(144, self.curr_device, labels = test_label)`
wrapped in `try/except Warning`, `samples.cpu().data` for the grid but `recons.data` (a device tensor) handed
straight to `save_image`; `configure_optimizers` with Adam, the `LR_2`/`submodel` and `scheduler_gamma_2` lookups
in `try/except` and the ExponentialLR; run.py's `pin_memory=len(config['trainer_params']['gpus']) != 0` for the
data module and the `seed_everything(manual_seed)`; the data module's loaders (test loader shuffled).
Changed where needed: PyTorch Lightning is not used, so `pl.LightningModule` is a small `nn.Module` base with
`log_dict`, `trainer`, `logger` and `current_epoch`, and `Trainer.fit` is a short loop doing what Lightning 1.x does
for this config: move the module to `cuda:gpus[0]` (`trainer_params: gpus`), which is set here to `[0]` when
`torch.cuda.is_available()` and to `[]` (CPU) otherwise; move each batch to that device; `optimizer.zero_grad()`,
`backward()`, `step()`; step the scheduler each epoch; validate with `eval()` under `torch.no_grad()` and call
`on_validation_end` there; save `{'epoch', 'state_dict', 'optimizer_states', 'lr_schedulers'}` for the top-2
`val_loss` and `last.ckpt` (ModelCheckpoint); the reload at the end reads the best file on the CPU
(`map_location=lambda storage, loc: storage`, as Lightning's `load_from_checkpoint`) before moving the experiment;
`yaml` config becomes a dict; torchvision's `save_image` is a small stand-in (grid, then `.cpu()` and `np.save`);
`MyCelebA` is a synthetic tensor dataset; the log directories are temporary; the reload rebuilds the model from a fresh
`hidden_dims` list, because `ConditionalVAE.__init__` reverses the config's list in place (a quirk kept).

Shrunk: 3x32x32 images drawn from 40 binary attributes of which 6 matter (background tone, a face disc's size and
brightness, two eyes, a mouth bar, a colour cast), 256 training and 72 validation images; hidden_dims [16, 32, 64,
512] (the model's `decode` hard-codes 512 x 2 x 2), latent_dim 16; batch 32, test batch 36 (and 36 samples) instead
of 144; 4 epochs.
"""
import math
import os
import tempfile
import random
from abc import abstractmethod
from typing import List, Any, TypeVar

import numpy as np
import torch
from torch import nn
from torch import optim
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

Tensor = TypeVar('torch.tensor')


# ----------------------------------------------------------------------------- models/base.py

class BaseVAE(nn.Module):

    def __init__(self) -> None:
        super(BaseVAE, self).__init__()

    def encode(self, input: Tensor) -> List[Tensor]:
        raise NotImplementedError

    def decode(self, input: Tensor) -> Any:
        raise NotImplementedError

    def sample(self, batch_size: int, current_device: int, **kwargs) -> Tensor:
        raise NotImplementedError

    def generate(self, x: Tensor, **kwargs) -> Tensor:
        raise NotImplementedError

    @abstractmethod
    def forward(self, *inputs: Tensor) -> Tensor:
        pass

    @abstractmethod
    def loss_function(self, *inputs: Any, **kwargs) -> Tensor:
        pass


# ----------------------------------------------------------------------------- models/cvae.py

class ConditionalVAE(BaseVAE):

    def __init__(self,
                 in_channels: int,
                 num_classes: int,
                 latent_dim: int,
                 hidden_dims: List = None,
                 img_size: int = 64,
                 **kwargs) -> None:
        super(ConditionalVAE, self).__init__()

        self.latent_dim = latent_dim
        self.img_size = img_size

        self.embed_class = nn.Linear(num_classes, img_size * img_size)
        self.embed_data = nn.Conv2d(in_channels, in_channels, kernel_size=1)

        modules = []
        if hidden_dims is None:
            hidden_dims = [32, 64, 128, 256, 512]

        in_channels += 1  # To account for the extra label channel
        # Build Encoder
        for h_dim in hidden_dims:
            modules.append(
                nn.Sequential(
                    nn.Conv2d(in_channels, out_channels=h_dim,
                              kernel_size=3, stride=2, padding=1),
                    nn.BatchNorm2d(h_dim),
                    nn.LeakyReLU())
            )
            in_channels = h_dim

        self.encoder = nn.Sequential(*modules)
        self.fc_mu = nn.Linear(hidden_dims[-1] * 4, latent_dim)
        self.fc_var = nn.Linear(hidden_dims[-1] * 4, latent_dim)

        # Build Decoder
        modules = []

        self.decoder_input = nn.Linear(latent_dim + num_classes, hidden_dims[-1] * 4)

        hidden_dims.reverse()

        for i in range(len(hidden_dims) - 1):
            modules.append(
                nn.Sequential(
                    nn.ConvTranspose2d(hidden_dims[i],
                                       hidden_dims[i + 1],
                                       kernel_size=3,
                                       stride=2,
                                       padding=1,
                                       output_padding=1),
                    nn.BatchNorm2d(hidden_dims[i + 1]),
                    nn.LeakyReLU())
            )

        self.decoder = nn.Sequential(*modules)

        self.final_layer = nn.Sequential(
            nn.ConvTranspose2d(hidden_dims[-1],
                               hidden_dims[-1],
                               kernel_size=3,
                               stride=2,
                               padding=1,
                               output_padding=1),
            nn.BatchNorm2d(hidden_dims[-1]),
            nn.LeakyReLU(),
            nn.Conv2d(hidden_dims[-1], out_channels=3,
                      kernel_size=3, padding=1),
            nn.Tanh())

    def encode(self, input: Tensor) -> List[Tensor]:
        result = self.encoder(input)
        result = torch.flatten(result, start_dim=1)

        # Split the result into mu and var components
        # of the latent Gaussian distribution
        mu = self.fc_mu(result)
        log_var = self.fc_var(result)

        return [mu, log_var]

    def decode(self, z: Tensor) -> Tensor:
        result = self.decoder_input(z)
        result = result.view(-1, 512, 2, 2)
        result = self.decoder(result)
        result = self.final_layer(result)
        return result

    def reparameterize(self, mu: Tensor, logvar: Tensor) -> Tensor:
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return eps * std + mu

    def forward(self, input: Tensor, **kwargs) -> List[Tensor]:
        y = kwargs['labels'].float()
        embedded_class = self.embed_class(y)
        embedded_class = embedded_class.view(-1, self.img_size, self.img_size).unsqueeze(1)
        embedded_input = self.embed_data(input)

        x = torch.cat([embedded_input, embedded_class], dim=1)
        mu, log_var = self.encode(x)

        z = self.reparameterize(mu, log_var)

        z = torch.cat([z, y], dim=1)
        return [self.decode(z), input, mu, log_var]

    def loss_function(self,
                      *args,
                      **kwargs) -> dict:
        recons = args[0]
        input = args[1]
        mu = args[2]
        log_var = args[3]

        kld_weight = kwargs['M_N']  # Account for the minibatch samples from the dataset
        recons_loss = F.mse_loss(recons, input)

        kld_loss = torch.mean(-0.5 * torch.sum(1 + log_var - mu ** 2 - log_var.exp(), dim=1), dim=0)

        loss = recons_loss + kld_weight * kld_loss
        return {'loss': loss, 'Reconstruction_Loss': recons_loss, 'KLD': -kld_loss}

    def sample(self,
               num_samples: int,
               current_device: int,
               **kwargs) -> Tensor:
        y = kwargs['labels'].float()
        z = torch.randn(num_samples,
                        self.latent_dim)

        z = z.to(current_device)

        z = torch.cat([z, y], dim=1)
        samples = self.decode(z)
        return samples

    def generate(self, x: Tensor, **kwargs) -> Tensor:
        return self.forward(x, **kwargs)[0]


vae_models = {'ConditionalVAE': ConditionalVAE}


# ----------------------------------------------------------------------------- stand-ins for pytorch_lightning, torchvision

def save_image(tensor, filename, nrow=8, normalize=False):
    """Stand-in for torchvision.utils.save_image: a normalized grid of the batch, written with numpy."""
    tensor = tensor.clone()
    if normalize:
        low, high = float(tensor.min()), float(tensor.max())
        tensor.clamp_(min=low, max=high)
        tensor.add_(-low).div_(max(high - low, 1e-5))
    n, c, h, w = tensor.shape
    ncol = int(math.ceil(float(n) / nrow))
    grid = tensor.new_zeros((c, ncol * h, nrow * w))
    for k in range(n):
        r, q = divmod(k, nrow)
        grid[:, r * h:(r + 1) * h, q * w:(q + 1) * w] = tensor[k]
    ndarr = grid.mul(255).add_(0.5).clamp_(0, 255).to("cpu", torch.uint8).numpy()
    np.save(filename, ndarr)


class vutils:
    save_image = staticmethod(save_image)


class Logger(object):
    def __init__(self, save_dir, name):
        self.name = name
        self.log_dir = os.path.join(save_dir, name, "version_0")


class LightningModule(nn.Module):
    """The few parts of pl.LightningModule that VAEXperiment uses."""

    def __init__(self):
        super(LightningModule, self).__init__()
        self.trainer = None
        self.logger = None
        self.current_epoch = 0
        self.logged = {}

    def log_dict(self, metrics, sync_dist=False):
        for key, val in metrics.items():
            self.logged.setdefault(key, []).append(val)


class pl:
    LightningModule = LightningModule


class CheckpointCallback(object):
    """ModelCheckpoint(save_top_k=2, dirpath=..., monitor="val_loss", save_last=True)."""

    def __init__(self, dirpath, save_top_k=2, monitor="val_loss", save_last=True):
        self.dirpath = dirpath
        self.save_top_k = save_top_k
        self.monitor = monitor
        self.save_last = save_last
        self.best_k_models = {}

    def best_model_path(self):
        return min(self.best_k_models, key=self.best_k_models.get)

    def save(self, module, optimizers, schedulers, epoch, score):
        os.makedirs(self.dirpath, exist_ok=True)
        state = {'epoch': epoch,
                 'state_dict': module.state_dict(),
                 'optimizer_states': [o.state_dict() for o in optimizers],
                 'lr_schedulers': [s.state_dict() for s in schedulers]}
        path = os.path.join(self.dirpath, "epoch={}-step={}.ckpt".format(epoch, self.global_step))
        if len(self.best_k_models) < self.save_top_k or score < max(self.best_k_models.values()):
            if len(self.best_k_models) == self.save_top_k:
                worst = max(self.best_k_models, key=self.best_k_models.get)
                del self.best_k_models[worst]
                os.remove(worst)
            torch.save(state, path)
            self.best_k_models[path] = score
        if self.save_last:
            torch.save(state, os.path.join(self.dirpath, "last.ckpt"))


class Trainer(object):
    """What pytorch_lightning.Trainer(gpus=..., max_epochs=...).fit does for VAEXperiment, on one device."""

    def __init__(self, logger, callbacks, gpus, max_epochs):
        self.logger = logger
        self.checkpoint_callback = callbacks[0]
        self.root_device = torch.device('cuda', gpus[0]) if len(gpus) else torch.device('cpu')
        self.max_epochs = max_epochs
        self.global_step = 0

    def fit(self, model, datamodule):
        self.datamodule = datamodule
        model.trainer = self
        model.logger = self.logger
        model.to(self.root_device)
        configured = model.configure_optimizers()
        optimizers, schedulers = configured if isinstance(configured, tuple) else (configured, [])
        optimizer = optimizers[0]
        for epoch in range(self.max_epochs):
            model.current_epoch = epoch
            model.train()
            model.logged = {}
            for batch_idx, batch in enumerate(datamodule.train_dataloader()):
                batch = [b.to(self.root_device) for b in batch]
                loss = model.training_step(batch, batch_idx)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                self.global_step += 1
            train_logs = {k: float(np.mean(v)) for k, v in model.logged.items()}
            model.eval()
            model.logged = {}
            with torch.no_grad():
                for batch_idx, batch in enumerate(datamodule.val_dataloader()):
                    batch = [b.to(self.root_device) for b in batch]
                    model.validation_step(batch, batch_idx)
                val_logs = {k: float(np.mean(v)) for k, v in model.logged.items()}
                model.on_validation_end()
            model.train()
            for scheduler in schedulers:
                scheduler.step()
            print("Epoch {}: loss {:.4f} recon {:.4f} KLD {:.2f} | val_loss {:.4f} val_recon {:.4f} | lr {:.5f}".format(
                epoch, train_logs['loss'], train_logs['Reconstruction_Loss'], train_logs['KLD'],
                val_logs['val_loss'], val_logs['val_Reconstruction_Loss'], optimizer.param_groups[0]['lr']))
            self.checkpoint_callback.global_step = self.global_step
            self.checkpoint_callback.save(model, optimizers, schedulers, epoch, val_logs['val_loss'])


# ----------------------------------------------------------------------------- experiment.py

class VAEXperiment(pl.LightningModule):

    def __init__(self,
                 vae_model: BaseVAE,
                 params: dict) -> None:
        super(VAEXperiment, self).__init__()

        self.model = vae_model
        self.params = params
        self.curr_device = None
        self.hold_graph = False
        try:
            self.hold_graph = self.params['retain_first_backpass']
        except:
            pass

    def forward(self, input: Tensor, **kwargs) -> Tensor:
        return self.model(input, **kwargs)

    def training_step(self, batch, batch_idx, optimizer_idx=0):
        real_img, labels = batch
        self.curr_device = real_img.device

        results = self.forward(real_img, labels=labels)
        train_loss = self.model.loss_function(*results,
                                              M_N=self.params['kld_weight'],
                                              optimizer_idx=optimizer_idx,
                                              batch_idx=batch_idx)

        self.log_dict({key: val.item() for key, val in train_loss.items()}, sync_dist=True)

        return train_loss['loss']

    def validation_step(self, batch, batch_idx, optimizer_idx=0):
        real_img, labels = batch
        self.curr_device = real_img.device

        results = self.forward(real_img, labels=labels)
        val_loss = self.model.loss_function(*results,
                                            M_N=1.0,
                                            optimizer_idx=optimizer_idx,
                                            batch_idx=batch_idx)

        self.log_dict({f"val_{key}": val.item() for key, val in val_loss.items()}, sync_dist=True)

    def on_validation_end(self) -> None:
        self.sample_images()

    def sample_images(self):
        # Get sample reconstruction image
        test_input, test_label = next(iter(self.trainer.datamodule.test_dataloader()))
        test_input = test_input.to(self.curr_device)
        test_label = test_label.to(self.curr_device)

        recons = self.model.generate(test_input, labels=test_label)
        vutils.save_image(recons.data,
                          os.path.join(self.logger.log_dir,
                                       "Reconstructions",
                                       f"recons_{self.logger.name}_Epoch_{self.current_epoch}.npy"),
                          normalize=True,
                          nrow=6)

        try:
            samples = self.model.sample(36,
                                        self.curr_device,
                                        labels=test_label)
            vutils.save_image(samples.cpu().data,
                              os.path.join(self.logger.log_dir,
                                           "Samples",
                                           f"{self.logger.name}_Epoch_{self.current_epoch}.npy"),
                              normalize=True,
                              nrow=6)
        except Warning:
            pass

    def configure_optimizers(self):

        optims = []
        scheds = []

        optimizer = optim.Adam(self.model.parameters(),
                               lr=self.params['LR'],
                               weight_decay=self.params['weight_decay'])
        optims.append(optimizer)
        # Check if more than 1 optimizer is required (Used for adversarial training)
        try:
            if self.params['LR_2'] is not None:
                optimizer2 = optim.Adam(getattr(self.model, self.params['submodel']).parameters(),
                                        lr=self.params['LR_2'])
                optims.append(optimizer2)
        except:
            pass

        try:
            if self.params['scheduler_gamma'] is not None:
                scheduler = optim.lr_scheduler.ExponentialLR(optims[0],
                                                             gamma=self.params['scheduler_gamma'])
                scheds.append(scheduler)

                # Check if another scheduler is required for the second optimizer
                try:
                    if self.params['scheduler_gamma_2'] is not None:
                        scheduler2 = optim.lr_scheduler.ExponentialLR(optims[1],
                                                                      gamma=self.params['scheduler_gamma_2'])
                        scheds.append(scheduler2)
                except:
                    pass
                return optims, scheds
        except:
            return optims


# ----------------------------------------------------------------------------- dataset.py

class MyCelebA(Dataset):
    """Synthetic CelebA: 32x32 'faces' whose look follows 6 of 40 binary attributes; returns (img, attrs)."""

    def __init__(self, n, seed, patch_size=32):
        g = torch.Generator().manual_seed(seed)
        self.attrs = (torch.rand(n, 40, generator=g) < 0.5).long()
        yy, xx = torch.meshgrid(torch.arange(patch_size).float(), torch.arange(patch_size).float(), indexing='ij')
        imgs = []
        for a in self.attrs.tolist():
            img = torch.full((3, patch_size, patch_size), 0.2 + 0.3 * a[0])
            radius = 9.0 + 4.0 * a[1]
            face = ((yy - 16) ** 2 + (xx - 16) ** 2) <= radius ** 2
            img[:, face] = 0.6 + 0.3 * a[2]
            if a[3]:
                for cx in (12, 20):
                    img[:, (yy - 13) ** 2 + (xx - cx) ** 2 <= 3] = 0.05
            if a[4]:
                img[:, (yy >= 20) & (yy <= 21) & (xx >= 12) & (xx <= 20)] = 0.1
            if a[5]:
                img[0] = img[0] * 1.2
                img[2] = img[2] * 0.8
            imgs.append(img.clamp(0, 1))
        self.imgs = torch.stack(imgs)
        self.imgs = self.imgs + 0.03 * torch.randn(self.imgs.shape, generator=g)

    def __len__(self):
        return len(self.attrs)

    def __getitem__(self, idx):
        img = self.imgs[idx]
        if random.random() < 0.5:  # RandomHorizontalFlip
            img = img.flip(2)
        return img, self.attrs[idx]


class VAEDataset(object):
    def __init__(self, data_path, train_batch_size=8, val_batch_size=8, patch_size=(256, 256), num_workers=0,
                 pin_memory=False, **kwargs):
        self.data_dir = data_path
        self.train_batch_size = train_batch_size
        self.val_batch_size = val_batch_size
        self.patch_size = patch_size
        self.num_workers = num_workers
        self.pin_memory = pin_memory

    def setup(self, stage=None) -> None:
        self.train_dataset = MyCelebA(256, 0, self.patch_size)
        # Replace CelebA with your dataset
        self.val_dataset = MyCelebA(72, 1, self.patch_size)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(
            self.train_dataset,
            batch_size=self.train_batch_size,
            num_workers=self.num_workers,
            shuffle=True,
            pin_memory=self.pin_memory,
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(
            self.val_dataset,
            batch_size=self.val_batch_size,
            num_workers=self.num_workers,
            shuffle=False,
            pin_memory=self.pin_memory,
        )

    def test_dataloader(self) -> DataLoader:
        return DataLoader(
            self.val_dataset,
            batch_size=36,
            num_workers=self.num_workers,
            shuffle=True,
            pin_memory=self.pin_memory,
        )


# ----------------------------------------------------------------------------- run.py

def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


if __name__ == '__main__':
    save_dir = tempfile.mkdtemp()
    config = {
        'model_params': {'name': 'ConditionalVAE', 'in_channels': 3, 'num_classes': 40, 'latent_dim': 16,
                         'hidden_dims': [16, 32, 64, 512], 'img_size': 32},
        'data_params': {'data_path': "Data/", 'train_batch_size': 32, 'val_batch_size': 32, 'patch_size': 32,
                        'num_workers': 0},
        'exp_params': {'LR': 0.005, 'weight_decay': 0.0, 'scheduler_gamma': 0.95, 'kld_weight': 0.00025,
                       'manual_seed': 1265},
        'trainer_params': {'gpus': [0] if torch.cuda.is_available() else [], 'max_epochs': 4},
        'logging_params': {'save_dir': os.path.join(save_dir, "logs/"), 'name': "ConditionalVAE"},
    }

    tb_logger = Logger(save_dir=config['logging_params']['save_dir'],
                       name=config['model_params']['name'])

    # For reproducibility
    seed_everything(config['exp_params']['manual_seed'])

    model = vae_models[config['model_params']['name']](**config['model_params'])
    experiment = VAEXperiment(model,
                              config['exp_params'])

    data = VAEDataset(**config["data_params"], pin_memory=len(config['trainer_params']['gpus']) != 0)

    data.setup()
    checkpoint_callback = CheckpointCallback(save_top_k=2,
                                             dirpath=os.path.join(tb_logger.log_dir, "checkpoints"),
                                             monitor="val_loss",
                                             save_last=True)
    runner = Trainer(logger=tb_logger,
                     callbacks=[checkpoint_callback],
                     **config['trainer_params'])

    os.makedirs(f"{tb_logger.log_dir}/Samples", exist_ok=True)
    os.makedirs(f"{tb_logger.log_dir}/Reconstructions", exist_ok=True)

    print(f"======= Training {config['model_params']['name']} =======")
    runner.fit(experiment, datamodule=data)

    # reload the best checkpoint, as VAEXperiment.load_from_checkpoint does
    best_path = checkpoint_callback.best_model_path()
    checkpoint = torch.load(best_path, map_location=lambda storage, loc: storage)
    print("best checkpoint: epoch {} val_loss {:.4f}".format(checkpoint['epoch'],
                                                            checkpoint_callback.best_k_models[best_path]))
    config['model_params']['hidden_dims'] = [16, 32, 64, 512]
    best = VAEXperiment(vae_models[config['model_params']['name']](**config['model_params']), config['exp_params'])
    best.load_state_dict(checkpoint['state_dict'])
    best.to(runner.root_device)
    best.eval()
    with torch.no_grad():
        test_input, test_label = next(iter(data.test_dataloader()))
        test_input = test_input.to(runner.root_device)
        test_label = test_label.to(runner.root_device)
        recons = best.model.generate(test_input, labels=test_label)
        samples = best.model.sample(36, runner.root_device, labels=test_label)
        flipped = test_label.clone()
        flipped[:, 3] = 1 - flipped[:, 3]
        recons_flipped = best.model.generate(test_input, labels=flipped)
    print("reconstruction mse {:.4f} | samples mean {:.4f} std {:.4f} | eye-attribute flip changes {:.4f}".format(
        F.mse_loss(recons, test_input).item(), samples.mean().item(), samples.std().item(),
        (recons_flipped - recons).abs().mean().item()))
    print("done")
