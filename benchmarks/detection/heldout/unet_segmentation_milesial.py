"""U-Net semantic segmentation: train on image/mask pairs with cross-entropy plus Dice loss, validate, then predict.

Modeled on: milesial/Pytorch-UNet (train.py, evaluate.py, predict.py, unet/unet_model.py, unet/unet_parts.py,
utils/data_loading.py, utils/dice_score.py) at commit 21d7850f2af30a9695bbeea75f3136aa538cfc4a
(https://github.com/milesial/Pytorch-UNet/tree/21d7850f2af30a9695bbeea75f3136aa538cfc4a).
Kept: the device logic (``device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')`` in the main block,
the model built on the host and converted with ``model.to(memory_format=torch.channels_last)``, an optional
``torch.load(args.load, map_location=device)`` whose ``'mask_values'`` entry is deleted before ``load_state_dict``,
then ``model.to(device=device)``); ``train_model(model, device, ...)`` creating the RMSprop optimizer
(``foreach=True``), ``ReduceLROnPlateau`` on the Dice score, ``torch.cuda.amp.GradScaler(enabled=amp)``, moving
``batch['image']`` with ``.to(device=device, dtype=torch.float32, memory_format=torch.channels_last)`` and
``batch['mask']`` with ``.to(device=device, dtype=torch.long)``, ``torch.autocast(device.type if device.type != 'mps'
else 'cpu', enabled=amp)``, BCE/CE plus ``dice_loss`` on ``F.softmax``/``F.one_hot(...).permute(0, 3, 1, 2)``,
``unscale_`` and gradient clipping, the validation round every ``n_train // (5 * batch_size)`` steps (weights and
gradients checked with ``torch.isinf``/``torch.isnan`` and copied with ``.data.cpu()``), the per-epoch checkpoint of
``model.state_dict()`` with ``mask_values`` added; ``evaluate`` under ``@torch.inference_mode()`` with ``net.eval()``
and ``net.train()`` at the end; the Dice helpers; ``BasicDataset``/``CarvanaDataset`` returning dict samples built
with ``torch.as_tensor(...).float()/.long()``, ``random_split`` with a seeded ``torch.Generator()``, loaders with
``pin_memory=True``; ``predict_img`` (``net.eval()``, ``img.unsqueeze(0).to(device=device, dtype=torch.float32)``,
``torch.no_grad()``, ``net(img).cpu()`` then ``F.interpolate`` and ``argmax`` on the host) and predict.py's loading
(``net.to(device=device)`` first, then ``torch.load(args.model, map_location=device)`` and
``state_dict.pop('mask_values', [0, 1])``).
Shrunk: 48 synthetic 48x48 RGB ``.npy`` images with elliptical 0/255 ``_mask.npy`` masks in a temporary folder instead
of Carvana JPEG/GIF files (nearest-neighbour numpy resizing instead of PIL, no multiprocessing Pool for the mask
scan), U-Net widths 8-128 instead of 64-1024, 2 epochs of batch 4, no wandb/tqdm, no out-of-memory retry with
checkpointing, argparse replaced by a constant namespace, a second short run that resumes from the first checkpoint
through ``args.load``.
"""

import logging
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor, optim
from torch.utils.data import DataLoader, Dataset, random_split


# unet/unet_parts.py
class DoubleConv(nn.Module):
    """(convolution => [BN] => ReLU) * 2"""

    def __init__(self, in_channels, out_channels, mid_channels=None):
        super().__init__()
        if not mid_channels:
            mid_channels = out_channels
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(mid_channels), nn.ReLU(inplace=True),
            nn.Conv2d(mid_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True))

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(in_channels, out_channels))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    def __init__(self, in_channels, out_channels, bilinear=True):
        super().__init__()
        if bilinear:
            self.up = nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True)
            self.conv = DoubleConv(in_channels, out_channels, in_channels // 2)
        else:
            self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        diff_y = x2.size()[2] - x1.size()[2]
        diff_x = x2.size()[3] - x1.size()[3]
        x1 = F.pad(x1, [diff_x // 2, diff_x - diff_x // 2, diff_y // 2, diff_y - diff_y // 2])
        return self.conv(torch.cat([x2, x1], dim=1))


class OutConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1)

    def forward(self, x):
        return self.conv(x)


# unet/unet_model.py
class UNet(nn.Module):
    def __init__(self, n_channels, n_classes, bilinear=False, width=8):
        super().__init__()
        self.n_channels = n_channels
        self.n_classes = n_classes
        self.bilinear = bilinear
        w, factor = width, (2 if bilinear else 1)
        self.inc = DoubleConv(n_channels, w)
        self.down1, self.down2, self.down3 = Down(w, 2 * w), Down(2 * w, 4 * w), Down(4 * w, 8 * w)
        self.down4 = Down(8 * w, 16 * w // factor)
        self.up1 = Up(16 * w, 8 * w // factor, bilinear)
        self.up2 = Up(8 * w, 4 * w // factor, bilinear)
        self.up3 = Up(4 * w, 2 * w // factor, bilinear)
        self.up4 = Up(2 * w, w, bilinear)
        self.outc = OutConv(w, n_classes)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x4 = self.down3(x3)
        x5 = self.down4(x4)
        x = self.up2(self.up1(x5, x4), x3)
        x = self.up4(self.up3(x, x2), x1)
        return self.outc(x)


# utils/dice_score.py
def dice_coeff(input: Tensor, target: Tensor, reduce_batch_first: bool = False, epsilon: float = 1e-6):
    assert input.size() == target.size()
    assert input.dim() == 3 or not reduce_batch_first
    sum_dim = (-1, -2) if input.dim() == 2 or not reduce_batch_first else (-1, -2, -3)
    inter = 2 * (input * target).sum(dim=sum_dim)
    sets_sum = input.sum(dim=sum_dim) + target.sum(dim=sum_dim)
    sets_sum = torch.where(sets_sum == 0, inter, sets_sum)
    dice = (inter + epsilon) / (sets_sum + epsilon)
    return dice.mean()


def multiclass_dice_coeff(input: Tensor, target: Tensor, reduce_batch_first: bool = False, epsilon: float = 1e-6):
    return dice_coeff(input.flatten(0, 1), target.flatten(0, 1), reduce_batch_first, epsilon)


def dice_loss(input: Tensor, target: Tensor, multiclass: bool = False):
    fn = multiclass_dice_coeff if multiclass else dice_coeff
    return 1 - fn(input, target, reduce_batch_first=True)


# utils/data_loading.py
def load_image(filename):
    # the original also opens .pt files and PIL images; the synthetic data here is stored as .npy
    return np.load(filename)


def unique_mask_values(idx, mask_dir, mask_suffix):
    mask_file = list(mask_dir.glob(idx + mask_suffix + '.*'))[0]
    mask = np.asarray(load_image(mask_file))
    return np.unique(mask) if mask.ndim == 2 else np.unique(mask.reshape(-1, mask.shape[-1]), axis=0)


class BasicDataset(Dataset):
    def __init__(self, images_dir, mask_dir, scale=1.0, mask_suffix=''):
        self.images_dir, self.mask_dir = Path(images_dir), Path(mask_dir)
        assert 0 < scale <= 1, 'Scale must be between 0 and 1'
        self.scale, self.mask_suffix = scale, mask_suffix
        self.ids = sorted(os.path.splitext(f)[0] for f in os.listdir(images_dir)
                          if os.path.isfile(os.path.join(images_dir, f)) and not f.startswith('.'))
        if not self.ids:
            raise RuntimeError(f'No input file found in {images_dir}')
        unique = [unique_mask_values(i, self.mask_dir, self.mask_suffix) for i in self.ids]
        self.mask_values = list(sorted(np.unique(np.concatenate(unique), axis=0).tolist()))
        logging.info(f'Unique mask values: {self.mask_values}')

    def __len__(self):
        return len(self.ids)

    @staticmethod
    def preprocess(mask_values, img, scale, is_mask):
        h, w = img.shape[:2]
        new_w, new_h = int(scale * w), int(scale * h)
        assert new_w > 0 and new_h > 0, 'Scale is too small'
        # nearest-neighbour resize (PIL's Image.resize in the original)
        img = img[(np.arange(new_h) * h / new_h).astype(np.int64)][:, (np.arange(new_w) * w / new_w).astype(np.int64)]
        if is_mask:
            mask = np.zeros((new_h, new_w), dtype=np.int64)
            for i, v in enumerate(mask_values):
                if img.ndim == 2:
                    mask[img == v] = i
                else:
                    mask[(img == v).all(-1)] = i
            return mask
        img = img[np.newaxis, ...] if img.ndim == 2 else img.transpose((2, 0, 1))
        if (img > 1).any():
            img = img / 255.0
        return img

    def __getitem__(self, idx):
        name = self.ids[idx]
        mask_file = list(self.mask_dir.glob(name + self.mask_suffix + '.*'))
        img_file = list(self.images_dir.glob(name + '.*'))
        assert len(img_file) == 1 and len(mask_file) == 1, f'Bad files for the ID {name}'
        mask, img = load_image(mask_file[0]), load_image(img_file[0])
        assert img.shape[:2] == mask.shape[:2], f'Image and mask {name} should be the same size'
        img = self.preprocess(self.mask_values, img, self.scale, is_mask=False)
        mask = self.preprocess(self.mask_values, mask, self.scale, is_mask=True)
        return {'image': torch.as_tensor(img.copy()).float().contiguous(),
                'mask': torch.as_tensor(mask.copy()).long().contiguous()}


class CarvanaDataset(BasicDataset):
    def __init__(self, images_dir, mask_dir, scale=1):
        super().__init__(images_dir, mask_dir, scale, mask_suffix='_mask')


def write_synthetic_carvana(root, n=48, size=48):
    """Ellipses ("cars") of a random colour on a noisy background; the mask is 255 inside the ellipse."""
    rng = np.random.RandomState(0)
    dir_img, dir_mask = root / 'imgs', root / 'masks'
    for d in (dir_img, dir_mask):
        d.mkdir(parents=True)
    yy, xx = np.mgrid[0:size, 0:size]
    for i in range(n):
        cy, cx = rng.randint(16, size - 16, size=2)
        ry, rx = rng.randint(8, 16, size=2)
        inside = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1.0
        img = rng.randint(0, 90, size=(size, size, 3))
        img[inside] = rng.randint(120, 255, size=3)
        np.save(dir_img / f'car{i:03d}.npy', img.astype(np.uint8))
        np.save(dir_mask / f'car{i:03d}_mask.npy', (inside * 255).astype(np.uint8))
    return dir_img, dir_mask


# evaluate.py
@torch.inference_mode()
def evaluate(net, dataloader, device, amp):
    net.eval()
    num_val_batches = len(dataloader)
    dice_score = 0
    with torch.autocast(device.type if device.type != 'mps' else 'cpu', enabled=amp):
        for batch in dataloader:
            image, mask_true = batch['image'], batch['mask']
            image = image.to(device=device, dtype=torch.float32, memory_format=torch.channels_last)
            mask_true = mask_true.to(device=device, dtype=torch.long)
            mask_pred = net(image)
            if net.n_classes == 1:
                mask_pred = (F.sigmoid(mask_pred) > 0.5).float()
                dice_score += dice_coeff(mask_pred, mask_true, reduce_batch_first=False)
            else:
                mask_true = F.one_hot(mask_true, net.n_classes).permute(0, 3, 1, 2).float()
                mask_pred = F.one_hot(mask_pred.argmax(dim=1), net.n_classes).permute(0, 3, 1, 2).float()
                dice_score += multiclass_dice_coeff(mask_pred[:, 1:], mask_true[:, 1:], reduce_batch_first=False)
    net.train()
    return dice_score / max(num_val_batches, 1)


# train.py
def train_model(model, device, dir_img, dir_mask, dir_checkpoint, epochs=5, batch_size=1, learning_rate=1e-5,
                val_percent=0.1, save_checkpoint=True, img_scale=0.5, amp=False, weight_decay=1e-8,
                momentum=0.999, gradient_clipping=1.0):
    try:
        dataset = CarvanaDataset(dir_img, dir_mask, img_scale)
    except (AssertionError, RuntimeError, IndexError):
        dataset = BasicDataset(dir_img, dir_mask, img_scale)

    n_val = int(len(dataset) * val_percent)
    n_train = len(dataset) - n_val
    train_set, val_set = random_split(dataset, [n_train, n_val], generator=torch.Generator().manual_seed(0))

    loader_args = dict(batch_size=batch_size, num_workers=0, pin_memory=True)
    train_loader = DataLoader(train_set, shuffle=True, **loader_args)
    val_loader = DataLoader(val_set, shuffle=False, drop_last=True, **loader_args)

    optimizer = optim.RMSprop(model.parameters(), lr=learning_rate, weight_decay=weight_decay,
                              momentum=momentum, foreach=True)
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, 'max', patience=5)
    grad_scaler = torch.cuda.amp.GradScaler(enabled=amp)
    criterion = nn.CrossEntropyLoss() if model.n_classes > 1 else nn.BCEWithLogitsLoss()
    global_step = 0
    val_score = 0.0

    for epoch in range(1, epochs + 1):
        model.train()
        epoch_loss = 0
        for batch in train_loader:
            images, true_masks = batch['image'], batch['mask']
            assert images.shape[1] == model.n_channels, 'wrong number of input channels'
            images = images.to(device=device, dtype=torch.float32, memory_format=torch.channels_last)
            true_masks = true_masks.to(device=device, dtype=torch.long)

            with torch.autocast(device.type if device.type != 'mps' else 'cpu', enabled=amp):
                masks_pred = model(images)
                if model.n_classes == 1:
                    loss = criterion(masks_pred.squeeze(1), true_masks.float())
                    loss += dice_loss(F.sigmoid(masks_pred.squeeze(1)), true_masks.float(), multiclass=False)
                else:
                    loss = criterion(masks_pred, true_masks)
                    loss += dice_loss(F.softmax(masks_pred, dim=1).float(),
                                      F.one_hot(true_masks, model.n_classes).permute(0, 3, 1, 2).float(),
                                      multiclass=True)

            optimizer.zero_grad(set_to_none=True)
            grad_scaler.scale(loss).backward()
            grad_scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
            grad_scaler.step(optimizer)
            grad_scaler.update()

            global_step += 1
            epoch_loss += loss.item()

            division_step = n_train // (5 * batch_size)
            if division_step > 0 and global_step % division_step == 0:
                histograms = {}
                for tag, value in model.named_parameters():
                    tag = tag.replace('/', '.')
                    if not (torch.isinf(value) | torch.isnan(value)).any():
                        histograms['Weights/' + tag] = value.data.cpu()  # wandb.Histogram(...) in the original
                    if not (torch.isinf(value.grad) | torch.isnan(value.grad)).any():
                        histograms['Gradients/' + tag] = value.grad.data.cpu()
                val_score = evaluate(model, val_loader, device, amp)
                scheduler.step(val_score)
                logging.info('Validation Dice score: {}'.format(val_score))

        print(f'epoch {epoch}: train loss {epoch_loss / len(train_loader):.4f}, '
              f'validation Dice {float(val_score):.4f}, lr {optimizer.param_groups[0]["lr"]:.2e}')

        if save_checkpoint:
            Path(dir_checkpoint).mkdir(parents=True, exist_ok=True)
            state_dict = model.state_dict()
            state_dict['mask_values'] = dataset.mask_values
            torch.save(state_dict, str(Path(dir_checkpoint) / 'checkpoint_epoch{}.pth'.format(epoch)))
            logging.info(f'Checkpoint {epoch} saved!')
    return dataset


# predict.py
def predict_img(net, full_img, device, scale_factor=1, out_threshold=0.5):
    net.eval()
    img = torch.from_numpy(BasicDataset.preprocess(None, full_img, scale_factor, is_mask=False))
    img = img.unsqueeze(0).to(device=device, dtype=torch.float32)
    with torch.no_grad():
        output = net(img).cpu()
        output = F.interpolate(output, (full_img.shape[0], full_img.shape[1]), mode='bilinear')
        if net.n_classes > 1:
            mask = output.argmax(dim=1)
        else:
            mask = torch.sigmoid(output) > out_threshold
    return mask[0].long().squeeze().numpy()


def mask_to_image(mask: np.ndarray, mask_values):
    out = np.zeros((mask.shape[-2], mask.shape[-1]), dtype=np.uint8)
    for i, v in enumerate(mask_values):
        out[mask == i] = v
    return out


def main():
    logging.basicConfig(level=logging.WARNING, format='%(levelname)s: %(message)s')
    torch.manual_seed(0)
    tmp = tempfile.TemporaryDirectory()
    root = Path(tmp.name)
    dir_img, dir_mask = write_synthetic_carvana(root / 'data')
    dir_checkpoint = root / 'checkpoints'

    args = SimpleNamespace(epochs=2, batch_size=4, lr=2e-4, load=False, scale=0.5, val=10.0, amp=False,
                           bilinear=False, classes=2)
    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    logging.info(f'Using device {device}')

    for run in range(2):
        model = UNet(n_channels=3, n_classes=args.classes, bilinear=args.bilinear)
        model = model.to(memory_format=torch.channels_last)
        if args.load:
            state_dict = torch.load(args.load, map_location=device)
            del state_dict['mask_values']
            model.load_state_dict(state_dict)
            print(f'run {run}: model loaded from {Path(args.load).name}')
        model.to(device=device)
        train_model(model=model, device=device, dir_img=dir_img, dir_mask=dir_mask,
                    dir_checkpoint=dir_checkpoint, epochs=args.epochs, batch_size=args.batch_size,
                    learning_rate=args.lr, img_scale=args.scale, val_percent=args.val / 100, amp=args.amp)
        # the second run fine-tunes the first run's last checkpoint for one epoch at a tenth of the rate
        args.load, args.epochs, args.lr = str(dir_checkpoint / f'checkpoint_epoch{args.epochs}.pth'), 1, args.lr / 10

    # predict.py: load the final checkpoint into a fresh network and segment a few full-size images
    net = UNet(n_channels=3, n_classes=args.classes, bilinear=args.bilinear)
    net.to(device=device)
    state_dict = torch.load(str(dir_checkpoint / 'checkpoint_epoch1.pth'), map_location=device)
    mask_values = state_dict.pop('mask_values', [0, 1])
    net.load_state_dict(state_dict)
    for name in ['car000', 'car001', 'car002']:
        img, truth = load_image(dir_img / f'{name}.npy'), load_image(dir_mask / f'{name}_mask.npy')
        mask = predict_img(net=net, full_img=img, scale_factor=args.scale, out_threshold=0.5, device=device)
        result = mask_to_image(mask, mask_values)
        print(f'predict {name}: mask {tuple(result.shape)}, foreground {int((result > 0).sum())} px, '
              f'pixel agreement {float((result == truth).mean()):.3f}')
    tmp.cleanup()


if __name__ == '__main__':
    main()
