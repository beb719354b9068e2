"""Vision Transformer (patch embedding, class token, MultiheadAttention encoder blocks) on synthetic CIFAR-like images.

Modeled on: pytorch/examples, vision_transformer/main.py (https://github.com/pytorch/examples/blob/
14fb9c42bd39b821e385b604d5fed61ed1e3f993/vision_transformer/main.py).
Kept: the device logic (``use_cuda = not no_cuda and torch.cuda.is_available()``, ``torch.device("cuda" if use_cuda
else "cpu")``) computed twice, once in ``main`` and once inside ``InputEmbedding.__init__`` which keeps its own
``self.device``; the class token and positional embedding built as ``nn.Parameter(torch.randn(batch_size, 1,
latent_size).to(self.device))``; ``InputEmbedding.forward`` moving its input with ``input_data.to(self.device)``,
building a fresh ``PatchExtractor`` per call (``unfold``/``permute``/``contiguous``/``view``) and calling
``.to(self.device)`` on the projection; ``EncoderBlock`` (shared LayerNorm, ``nn.MultiheadAttention`` fed (B, N, E)
as the original does, GELU MLP); ``ViT(args).to(device)``; the ``TrainEval`` class with ``train_fn`` (model.train(),
``images.to(self.device), labels.to(self.device)``, zero_grad/backward/step) and ``eval_fn`` (model.eval(), no
``torch.no_grad()``, as in the original), ``train`` saving ``self.model.state_dict()`` whenever the validation loss
improves and printing the best losses; Adam with weight decay. Shrunk: 16x16 synthetic images of 4 classes whose
colour depends on the class (from a fixed seed) instead of downloading CIFAR-10 with Resize to 224, patch size 4,
latent size 32, 2 heads, 2 encoders, batch size 8, 4 epochs, no tqdm progress bar (one printed line per epoch
instead), settings as a constant namespace instead of argparse, the weights file written in a temporary folder.
"""

import os
import tempfile
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
from torch import optim
from torch.utils.data import DataLoader, TensorDataset


class PatchExtractor(nn.Module):
    def __init__(self, patch_size=16):
        super().__init__()
        self.patch_size = patch_size

    def forward(self, input_data):
        batch_size, channels, height, width = input_data.size()
        assert height % self.patch_size == 0 and width % self.patch_size == 0, \
            f"Input height ({height}) and width ({width}) must be divisible by patch size ({self.patch_size})"

        num_patches_h = height // self.patch_size
        num_patches_w = width // self.patch_size
        num_patches = num_patches_h * num_patches_w

        patches = input_data.unfold(2, self.patch_size, self.patch_size). \
            unfold(3, self.patch_size, self.patch_size). \
            permute(0, 2, 3, 1, 4, 5). \
            contiguous(). \
            view(batch_size, num_patches, -1)

        return patches


class InputEmbedding(nn.Module):

    def __init__(self, args):
        super(InputEmbedding, self).__init__()
        self.patch_size = args.patch_size
        self.n_channels = args.n_channels
        self.latent_size = args.latent_size
        use_cuda = not args.no_cuda and torch.cuda.is_available()
        self.device = torch.device("cuda" if use_cuda else "cpu")
        self.batch_size = args.batch_size
        self.input_size = self.patch_size * self.patch_size * self.n_channels

        # Linear projection
        self.LinearProjection = nn.Linear(self.input_size, self.latent_size)
        # Class token
        self.class_token = nn.Parameter(torch.randn(self.batch_size, 1, self.latent_size).to(self.device))
        # Positional embedding
        self.pos_embedding = nn.Parameter(torch.randn(self.batch_size, 1, self.latent_size).to(self.device))

    def forward(self, input_data):
        input_data = input_data.to(self.device)
        # Patchifying the Image
        patchify = PatchExtractor(patch_size=self.patch_size)
        patches = patchify(input_data)

        linear_projection = self.LinearProjection(patches).to(self.device)
        b, n, _ = linear_projection.shape
        linear_projection = torch.cat((self.class_token, linear_projection), dim=1)
        pos_embed = self.pos_embedding[:, :n + 1, :]
        linear_projection += pos_embed

        return linear_projection


class EncoderBlock(nn.Module):

    def __init__(self, args):
        super(EncoderBlock, self).__init__()

        self.latent_size = args.latent_size
        self.num_heads = args.num_heads
        self.dropout = args.dropout
        self.norm = nn.LayerNorm(self.latent_size)
        self.attention = nn.MultiheadAttention(self.latent_size, self.num_heads, dropout=self.dropout)
        self.enc_MLP = nn.Sequential(
            nn.Linear(self.latent_size, self.latent_size * 4),
            nn.GELU(),
            nn.Dropout(self.dropout),
            nn.Linear(self.latent_size * 4, self.latent_size),
            nn.Dropout(self.dropout)
        )

    def forward(self, emb_patches):
        first_norm = self.norm(emb_patches)
        attention_out = self.attention(first_norm, first_norm, first_norm)[0]
        first_added = attention_out + emb_patches
        second_norm = self.norm(first_added)
        mlp_out = self.enc_MLP(second_norm)
        output = mlp_out + first_added

        return output


class ViT(nn.Module):
    def __init__(self, args):
        super(ViT, self).__init__()

        self.num_encoders = args.num_encoders
        self.latent_size = args.latent_size
        self.num_classes = args.num_classes
        self.dropout = args.dropout

        self.embedding = InputEmbedding(args)
        # Encoder Stack
        self.encoders = nn.ModuleList([EncoderBlock(args) for _ in range(self.num_encoders)])
        self.MLPHead = nn.Sequential(
            nn.LayerNorm(self.latent_size),
            nn.Linear(self.latent_size, self.latent_size),
            nn.Linear(self.latent_size, self.num_classes),
        )

    def forward(self, test_input):
        enc_output = self.embedding(test_input)
        for enc_layer in self.encoders:
            enc_output = enc_layer(enc_output)

        class_token_embed = enc_output[:, 0]
        return self.MLPHead(class_token_embed)


class TrainEval:

    def __init__(self, args, model, train_dataloader, val_dataloader, optimizer, criterion, device):
        self.model = model
        self.train_dataloader = train_dataloader
        self.val_dataloader = val_dataloader
        self.optimizer = optimizer
        self.criterion = criterion
        self.epoch = args.epochs
        self.device = device
        self.args = args

    def train_fn(self, current_epoch):
        self.model.train()
        total_loss = 0.0

        for t, data in enumerate(self.train_dataloader):
            images, labels = data
            images, labels = images.to(self.device), labels.to(self.device)
            self.optimizer.zero_grad()
            logits = self.model(images)
            loss = self.criterion(logits, labels)
            loss.backward()
            self.optimizer.step()

            total_loss += loss.item()
            if self.args.dry_run:
                break

        print("EPOCH[TRAIN]" + str(current_epoch + 1) + "/" + str(self.epoch),
              "Loss: %6f" % float(total_loss / len(self.train_dataloader)))
        return total_loss / len(self.train_dataloader)

    def eval_fn(self, current_epoch):
        self.model.eval()
        total_loss = 0.0

        for t, data in enumerate(self.val_dataloader):
            images, labels = data
            images, labels = images.to(self.device), labels.to(self.device)

            logits = self.model(images)
            loss = self.criterion(logits, labels)

            total_loss += loss.item()
            if self.args.dry_run:
                break

        print("EPOCH[VALID]" + str(current_epoch + 1) + "/" + str(self.epoch),
              "Loss: %6f" % float(total_loss / len(self.val_dataloader)))
        return total_loss / len(self.val_dataloader)

    def train(self):
        best_valid_loss = np.inf
        best_train_loss = np.inf
        for i in range(self.epoch):
            train_loss = self.train_fn(i)
            val_loss = self.eval_fn(i)

            if val_loss < best_valid_loss:
                torch.save(self.model.state_dict(), os.path.join(self.args.save_dir, "best-weights.pt"))
                print("Saved Best Weights")
                best_valid_loss = val_loss
                best_train_loss = train_loss
        print(f"Training Loss : {best_train_loss:.6f}")
        print(f"Valid Loss : {best_valid_loss:.6f}")


def make_images(n, args, generator):
    """Synthetic stand-in for CIFAR-10: each class has its own mean colour, plus noise."""
    labels = torch.randint(0, args.num_classes, (n,), generator=generator)
    colours = torch.linspace(-1.0, 1.0, args.num_classes * args.n_channels).view(args.num_classes, args.n_channels)
    images = colours[labels].view(n, args.n_channels, 1, 1) + 0.5 * torch.randn(
        n, args.n_channels, args.img_size, args.img_size, generator=generator)
    return images, labels


def main():
    args = SimpleNamespace(
        no_cuda=False, patch_size=4, latent_size=32, n_channels=3, num_heads=2, num_encoders=2, dropout=0.1,
        img_size=16, num_classes=4, epochs=4, lr=1e-3, weight_decay=3e-2, batch_size=8, dry_run=False,
        save_dir=tempfile.mkdtemp(),
    )
    torch.manual_seed(0)

    use_cuda = not args.no_cuda and torch.cuda.is_available()
    device = torch.device("cuda" if use_cuda else "cpu")

    g = torch.Generator().manual_seed(1)
    train_data = TensorDataset(*make_images(64, args, g))
    valid_data = TensorDataset(*make_images(32, args, g))
    train_loader = DataLoader(train_data, batch_size=args.batch_size, shuffle=True)
    valid_loader = DataLoader(valid_data, batch_size=args.batch_size, shuffle=True)

    model = ViT(args).to(device)

    optimizer = optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    criterion = nn.CrossEntropyLoss()

    TrainEval(args, model, train_loader, valid_loader, optimizer, criterion, device).train()
    print("done")


if __name__ == "__main__":
    main()
