"""Trains a two-level VQ-VAE-2 (EMA codebooks) on small images, checkpoints every epoch, extracts the top/bottom
code maps with a reloaded model and decodes images back from the stored codes.

Modeled on: rosinality/vq-vae-2-pytorch, train_vqvae.py, vqvae.py, extract_code.py, dataset.py and sample.py
(https://github.com/rosinality/vq-vae-2-pytorch/blob/ef5f67c46f93624163776caec9e0d95063910eca/train_vqvae.py,
https://github.com/rosinality/vq-vae-2-pytorch/blob/ef5f67c46f93624163776caec9e0d95063910eca/vqvae.py,
https://github.com/rosinality/vq-vae-2-pytorch/blob/ef5f67c46f93624163776caec9e0d95063910eca/extract_code.py,
https://github.com/rosinality/vq-vae-2-pytorch/blob/ef5f67c46f93624163776caec9e0d95063910eca/dataset.py,
https://github.com/rosinality/vq-vae-2-pytorch/blob/ef5f67c46f93624163776caec9e0d95063910eca/sample.py).

Kept: the author hard-codes `device = "cuda"` in all three scripts; here it is `"cuda" if
torch.cuda.is_available() else "cpu"`, still a string passed to `train(...)`, `extract(...)` and `load_model(...)`;
`Quantize` with its `embed`, `cluster_size`, `embed_avg` registered buffers, the EMA update through `.data.mul_`,
`.add_`, `.copy_` only under `self.training`, `F.one_hot(...).type(flatten.dtype)` and `F.embedding` on the
transposed buffer; `model = VQVAE().to(device)` before the Adam optimizer; `train()` with `model.zero_grad()`,
`img = img.to(device)`, `latent_loss.mean()`, `.item()` sums, and every 100 batches `model.eval()`, a sample of the
batch run under `torch.no_grad()`, then `model.train()`; `torch.save(model.state_dict(), ...)` per epoch;
extract_code.py's `model = VQVAE()`, `model.load_state_dict(torch.load(args.ckpt))` (no map_location), `model =
model.to(device)`, `model.eval()` and `extract()` moving `img.to(device)`, calling `model.encode` without no_grad and
storing `id_t.detach().cpu().numpy()`; the code dataset returning `torch.from_numpy(row.top)`; sample.py's
`load_model` (`torch.load`, `load_state_dict`, `.to(device)`, `eval()`) and `decode_code(...).clamp(-1, 1)` under
`@torch.no_grad()`, here fed stored codes moved with `.to(device)` instead of PixelSNAIL samples.

Shrunk: 96 synthetic 16x16 RGB images (coloured rectangles on noise, in [-1, 1]) instead of an ImageFolder of
256x256 FFHQ; channel 32, 8 residual channels, embed_dim 16, 32 codes; batch 16, 6 epochs, the eval sample every 4
batches; no tqdm, no save_image (the sample's MSE is printed instead), no distributed launch (the `dist` helpers are
the one-process stubs), `num_workers=0`, no lmdb (the code rows are pickled into a dict); files in a temporary
directory.
"""
import os
import pickle
import random
import tempfile
from collections import namedtuple

import numpy as np
import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset


# ----------------------------------------------------------------------------- distributed (one process)

class dist:
    @staticmethod
    def is_primary():
        return True

    @staticmethod
    def all_reduce(tensor):
        return tensor

    @staticmethod
    def all_gather(data):
        return [data]


dist_fn = dist


# ----------------------------------------------------------------------------- vqvae.py

class Quantize(nn.Module):
    def __init__(self, dim, n_embed, decay=0.99, eps=1e-5):
        super().__init__()
        self.dim = dim
        self.n_embed = n_embed
        self.decay = decay
        self.eps = eps

        embed = torch.randn(dim, n_embed)
        self.register_buffer("embed", embed)
        self.register_buffer("cluster_size", torch.zeros(n_embed))
        self.register_buffer("embed_avg", embed.clone())

    def forward(self, input):
        flatten = input.reshape(-1, self.dim)
        dist = (
            flatten.pow(2).sum(1, keepdim=True)
            - 2 * flatten @ self.embed
            + self.embed.pow(2).sum(0, keepdim=True)
        )
        _, embed_ind = (-dist).max(1)
        embed_onehot = F.one_hot(embed_ind, self.n_embed).type(flatten.dtype)
        embed_ind = embed_ind.view(*input.shape[:-1])
        quantize = self.embed_code(embed_ind)

        if self.training:
            embed_onehot_sum = embed_onehot.sum(0)
            embed_sum = flatten.transpose(0, 1) @ embed_onehot

            dist_fn.all_reduce(embed_onehot_sum)
            dist_fn.all_reduce(embed_sum)

            self.cluster_size.data.mul_(self.decay).add_(embed_onehot_sum, alpha=1 - self.decay)
            self.embed_avg.data.mul_(self.decay).add_(embed_sum, alpha=1 - self.decay)
            n = self.cluster_size.sum()
            cluster_size = (self.cluster_size + self.eps) / (n + self.n_embed * self.eps) * n
            embed_normalized = self.embed_avg / cluster_size.unsqueeze(0)
            self.embed.data.copy_(embed_normalized)

        diff = (quantize.detach() - input).pow(2).mean()
        quantize = input + (quantize - input).detach()

        return quantize, diff, embed_ind

    def embed_code(self, embed_id):
        return F.embedding(embed_id, self.embed.transpose(0, 1))


class ResBlock(nn.Module):
    def __init__(self, in_channel, channel):
        super().__init__()
        self.conv = nn.Sequential(
            nn.ReLU(),
            nn.Conv2d(in_channel, channel, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(channel, in_channel, 1),
        )

    def forward(self, input):
        out = self.conv(input)
        out += input
        return out


class Encoder(nn.Module):
    def __init__(self, in_channel, channel, n_res_block, n_res_channel, stride):
        super().__init__()
        if stride == 4:
            blocks = [
                nn.Conv2d(in_channel, channel // 2, 4, stride=2, padding=1),
                nn.ReLU(inplace=True),
                nn.Conv2d(channel // 2, channel, 4, stride=2, padding=1),
                nn.ReLU(inplace=True),
                nn.Conv2d(channel, channel, 3, padding=1),
            ]
        elif stride == 2:
            blocks = [
                nn.Conv2d(in_channel, channel // 2, 4, stride=2, padding=1),
                nn.ReLU(inplace=True),
                nn.Conv2d(channel // 2, channel, 3, padding=1),
            ]
        for i in range(n_res_block):
            blocks.append(ResBlock(channel, n_res_channel))
        blocks.append(nn.ReLU(inplace=True))
        self.blocks = nn.Sequential(*blocks)

    def forward(self, input):
        return self.blocks(input)


class Decoder(nn.Module):
    def __init__(self, in_channel, out_channel, channel, n_res_block, n_res_channel, stride):
        super().__init__()
        blocks = [nn.Conv2d(in_channel, channel, 3, padding=1)]
        for i in range(n_res_block):
            blocks.append(ResBlock(channel, n_res_channel))
        blocks.append(nn.ReLU(inplace=True))
        if stride == 4:
            blocks.extend([
                nn.ConvTranspose2d(channel, channel // 2, 4, stride=2, padding=1),
                nn.ReLU(inplace=True),
                nn.ConvTranspose2d(channel // 2, out_channel, 4, stride=2, padding=1),
            ])
        elif stride == 2:
            blocks.append(nn.ConvTranspose2d(channel, out_channel, 4, stride=2, padding=1))
        self.blocks = nn.Sequential(*blocks)

    def forward(self, input):
        return self.blocks(input)


class VQVAE(nn.Module):
    def __init__(self, in_channel=3, channel=32, n_res_block=2, n_res_channel=8, embed_dim=16, n_embed=32,
                 decay=0.99):
        super().__init__()
        self.enc_b = Encoder(in_channel, channel, n_res_block, n_res_channel, stride=4)
        self.enc_t = Encoder(channel, channel, n_res_block, n_res_channel, stride=2)
        self.quantize_conv_t = nn.Conv2d(channel, embed_dim, 1)
        self.quantize_t = Quantize(embed_dim, n_embed)
        self.dec_t = Decoder(embed_dim, embed_dim, channel, n_res_block, n_res_channel, stride=2)
        self.quantize_conv_b = nn.Conv2d(embed_dim + channel, embed_dim, 1)
        self.quantize_b = Quantize(embed_dim, n_embed)
        self.upsample_t = nn.ConvTranspose2d(embed_dim, embed_dim, 4, stride=2, padding=1)
        self.dec = Decoder(embed_dim + embed_dim, in_channel, channel, n_res_block, n_res_channel, stride=4)

    def forward(self, input):
        quant_t, quant_b, diff, _, _ = self.encode(input)
        dec = self.decode(quant_t, quant_b)
        return dec, diff

    def encode(self, input):
        enc_b = self.enc_b(input)
        enc_t = self.enc_t(enc_b)

        quant_t = self.quantize_conv_t(enc_t).permute(0, 2, 3, 1)
        quant_t, diff_t, id_t = self.quantize_t(quant_t)
        quant_t = quant_t.permute(0, 3, 1, 2)
        diff_t = diff_t.unsqueeze(0)

        dec_t = self.dec_t(quant_t)
        enc_b = torch.cat([dec_t, enc_b], 1)

        quant_b = self.quantize_conv_b(enc_b).permute(0, 2, 3, 1)
        quant_b, diff_b, id_b = self.quantize_b(quant_b)
        quant_b = quant_b.permute(0, 3, 1, 2)
        diff_b = diff_b.unsqueeze(0)

        return quant_t, quant_b, diff_t + diff_b, id_t, id_b

    def decode(self, quant_t, quant_b):
        upsample_t = self.upsample_t(quant_t)
        quant = torch.cat([upsample_t, quant_b], 1)
        dec = self.dec(quant)
        return dec

    def decode_code(self, code_t, code_b):
        quant_t = self.quantize_t.embed_code(code_t)
        quant_t = quant_t.permute(0, 3, 1, 2)
        quant_b = self.quantize_b.embed_code(code_b)
        quant_b = quant_b.permute(0, 3, 1, 2)
        dec = self.decode(quant_t, quant_b)
        return dec


# ----------------------------------------------------------------------------- data (stand-in for ImageFolder)

class ShapesDataset(Dataset):
    """Coloured rectangles on a noisy background, normalized to [-1, 1] like Normalize([0.5]*3, [0.5]*3)."""

    def __init__(self, n, size=16, seed=0):
        rng = np.random.RandomState(seed)
        imgs = rng.uniform(0, 0.2, size=(n, 3, size, size)).astype(np.float32)
        labels = rng.randint(0, 4, size=n)
        for k in range(n):
            x0, y0 = rng.randint(0, size // 2, size=2)
            w, h = rng.randint(4, size // 2 + 1, size=2)
            imgs[k, :, y0:y0 + h, x0:x0 + w] = rng.uniform(0.3, 1.0, size=(3, 1, 1))
        self.imgs = torch.from_numpy(imgs * 2 - 1)
        self.labels = torch.from_numpy(labels)

    def __len__(self):
        return len(self.imgs)

    def __getitem__(self, index):
        return self.imgs[index], self.labels[index]


class ImageFileDataset(ShapesDataset):
    def __getitem__(self, index):
        sample, target = super().__getitem__(index)
        filename = os.path.join(str(int(target)), "{:05d}.png".format(index))
        return sample, target, filename


CodeRow = namedtuple('CodeRow', ['top', 'bottom', 'filename'])


class CodeDataset(Dataset):
    """dataset.py's LMDBDataset, reading the pickled rows from a dict instead of lmdb."""

    def __init__(self, store):
        self.store = store
        self.length = int(store['length'.encode('utf-8')].decode('utf-8'))

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        row = pickle.loads(self.store[str(index).encode('utf-8')])
        return torch.from_numpy(row.top), torch.from_numpy(row.bottom), row.filename


# ----------------------------------------------------------------------------- train_vqvae.py

def train(epoch, loader, model, optimizer, scheduler, device):
    criterion = nn.MSELoss()

    latent_loss_weight = 0.25
    sample_size = 8

    mse_sum = 0
    mse_n = 0

    for i, (img, label) in enumerate(loader):
        model.zero_grad()

        img = img.to(device)

        out, latent_loss = model(img)
        recon_loss = criterion(out, img)
        latent_loss = latent_loss.mean()
        loss = recon_loss + latent_loss_weight * latent_loss
        loss.backward()

        if scheduler is not None:
            scheduler.step()
        optimizer.step()

        part_mse_sum = recon_loss.item() * img.shape[0]
        part_mse_n = img.shape[0]
        comm = {"mse_sum": part_mse_sum, "mse_n": part_mse_n}
        comm = dist.all_gather(comm)

        for part in comm:
            mse_sum += part["mse_sum"]
            mse_n += part["mse_n"]

        if dist.is_primary():
            lr = optimizer.param_groups[0]["lr"]
            print(f"epoch: {epoch + 1}; mse: {recon_loss.item():.5f}; latent: {latent_loss.item():.3f}; "
                  f"avg mse: {mse_sum / mse_n:.5f}; lr: {lr:.5f}")

            if i % 4 == 0:
                model.eval()

                sample = img[:sample_size]

                with torch.no_grad():
                    out, _ = model(sample)

                sample_mse = (torch.cat([sample, out], 0)[sample_size:] - sample).pow(2).mean().item()
                print(f"  sample {str(epoch + 1).zfill(5)}_{str(i).zfill(5)}: mse {sample_mse:.5f}")

                model.train()


def main(args, directory):
    device = "cuda" if torch.cuda.is_available() else "cpu"

    dataset = ShapesDataset(96)
    loader = DataLoader(dataset, batch_size=args.batch, shuffle=True, num_workers=0)

    model = VQVAE().to(device)

    optimizer = optim.Adam(model.parameters(), lr=args.lr)
    scheduler = None

    for i in range(args.epoch):
        train(i, loader, model, optimizer, scheduler, device)

        if dist.is_primary():
            torch.save(model.state_dict(), os.path.join(directory, f"vqvae_{str(i + 1).zfill(3)}.pt"))


# ----------------------------------------------------------------------------- extract_code.py

def extract(store, loader, model, device):
    index = 0

    for img, _, filename in loader:
        img = img.to(device)

        _, _, _, id_t, id_b = model.encode(img)
        id_t = id_t.detach().cpu().numpy()
        id_b = id_b.detach().cpu().numpy()

        for file, top, bottom in zip(filename, id_t, id_b):
            row = CodeRow(top=top, bottom=bottom, filename=file)
            store[str(index).encode('utf-8')] = pickle.dumps(row)
            index += 1

    store['length'.encode('utf-8')] = str(index).encode('utf-8')
    print(f"inserted: {index}")


def extract_main(ckpt):
    device = "cuda" if torch.cuda.is_available() else "cpu"

    dataset = ImageFileDataset(32, seed=1)
    loader = DataLoader(dataset, batch_size=16, shuffle=False, num_workers=0)

    model = VQVAE()
    model.load_state_dict(torch.load(ckpt))
    model = model.to(device)
    model.eval()

    store = {}
    extract(store, loader, model, device)
    return store, dataset


# ----------------------------------------------------------------------------- sample.py (decoding stored codes)

def load_model(model, checkpoint, device):
    ckpt = torch.load(checkpoint)

    if model == 'vqvae':
        model = VQVAE()

    if 'model' in ckpt:
        ckpt = ckpt['model']

    model.load_state_dict(ckpt)
    model = model.to(device)
    model.eval()

    return model


@torch.no_grad()
def decode_main(ckpt, store, dataset):
    device = "cuda" if torch.cuda.is_available() else "cpu"

    model_vqvae = load_model('vqvae', ckpt, device)
    codes = CodeDataset(store)
    loader = DataLoader(codes, batch_size=8, shuffle=False)

    total, n, used = 0.0, 0, set()
    for top, bottom, filenames in loader:
        top = top.to(device)
        bottom = bottom.to(device)
        decoded_sample = model_vqvae.decode_code(top, bottom)
        decoded_sample = decoded_sample.clamp(-1, 1)
        index = [int(os.path.basename(f)[:5]) for f in filenames]
        target = dataset.imgs[index].to(device)
        total += (decoded_sample - target).pow(2).sum().item()
        n += target.numel()
        used.update(bottom.view(-1).tolist())
    print(f"decoded {len(codes)} images from codes: mse {total / n:.5f}, bottom codes used {len(used)}")
    return total / n


if __name__ == "__main__":
    import argparse

    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    args = argparse.Namespace(n_gpu=1, size=16, epoch=6, lr=3e-3, sched=None, batch=16)
    print(args)

    with tempfile.TemporaryDirectory() as directory:
        main(args, directory)
        ckpt = os.path.join(directory, f"vqvae_{str(args.epoch).zfill(3)}.pt")
        store, dataset = extract_main(ckpt)
        row = pickle.loads(store[b"0"])
        print(f"first row {row.filename}: top {row.top.shape} {row.top.ravel()[:4].tolist()}, "
              f"bottom {row.bottom.shape} {row.bottom.ravel()[:4].tolist()}")
        mse = decode_main(ckpt, store, dataset)
    print(f"done: decode mse {mse:.5f}")
