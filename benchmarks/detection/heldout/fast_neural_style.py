"""Fast neural style transfer: train an image transformation network against a frozen feature net, then stylize.

Modeled on: pytorch/examples, fast_neural_style/neural_style/neural_style.py, utils.py, transformer_net.py and
vgg.py (https://github.com/pytorch/examples/tree/main/fast_neural_style).
Kept: the device logic (``train(args)`` and ``stylize(args)`` each choosing
``torch.accelerator.current_accelerator()`` when ``args.accel`` else the CPU, ``main()`` refusing ``accel`` without
an accelerator, ``TransformerNet().to(device)`` and the frozen ``Vgg16(requires_grad=False).to(device)``, the style
image repeated over the batch and moved with ``.to(device)``, the Gram matrices of the style computed once,
``normalize_batch`` making its constants with ``batch.new_tensor``, each batch moved with ``x = x.to(device)``, the
losses read back with ``.item()``, checkpoints written from ``transformer.eval().cpu()`` and training resumed with
``transformer.to(device).train()``, the final state_dict saved from the CPU; stylizing under ``torch.no_grad()``
with a fresh ``TransformerNet()`` loaded with ``torch.load(args.model)`` (no ``map_location``, as the example has
it: the file was saved from the CPU), the deprecated ``running_*`` keys dropped, ``style_model.to(device)``,
``style_model.eval()``, the content image moved with ``.unsqueeze(0).to(device)``, ``output = style_model(...).cpu()``
and the image written through ``.clone().clamp(0, 255).numpy()``). Shrunk: synthetic smooth 32x32 images saved as
numpy arrays instead of a COCO image folder and JPEG files (no PIL, no torchvision), a small random frozen
four-slice CNN in place of the pretrained VGG16, a narrower transformer net with two residual blocks, 8 training
images in batches of 4 for 2 epochs, a style weight that suits the random feature net, a checkpoint every batch,
the losses and the stylized output's statistics printed with few digits (so they do not depend on the number of CPU
threads), the log line without its wall-clock time, no ONNX branch, the two subcommands run one after the other
with their arguments as ``Namespace`` constants.
"""

import os
import re
import sys
import tempfile
import time
from argparse import Namespace
from collections import namedtuple

import numpy as np
import torch
import torch.nn.functional as F
from torch.optim import Adam
from torch.utils.data import DataLoader, TensorDataset

# the --accel flag, given when there is an accelerator
ACCEL = torch.accelerator.is_available()

# ------------------------------------------------------------------------------------------------------ utils.py


def load_image(filename, size=None, scale=None):
    """An RGB image as a float CHW tensor in [0, 1] (what ``ToTensor()`` of the PIL image gives), resized if asked."""
    img = torch.from_numpy(np.load(filename)).permute(2, 0, 1).float().div(255)
    if size is not None:
        img = F.interpolate(img.unsqueeze(0), size=(size, size), mode="bilinear", align_corners=False)[0]
    elif scale is not None:
        img = F.interpolate(img.unsqueeze(0), scale_factor=1 / scale, mode="bilinear", align_corners=False)[0]
    return img


def save_image(filename, data):
    """Write a CHW tensor of 0-255 values as an HWC uint8 array."""
    img = data.clone().clamp(0, 255).numpy()
    img = img.transpose(1, 2, 0).astype("uint8")
    np.save(filename, img)


def gram_matrix(y):
    """Channel-by-channel feature correlations of a batch, normalised by the feature map size."""
    (b, ch, h, w) = y.size()
    features = y.view(b, ch, w * h)
    features_t = features.transpose(1, 2)
    gram = features.bmm(features_t) / (ch * h * w)
    return gram


def normalize_batch(batch):
    """Scale 0-255 images to [0, 1] in place, then normalise them with the ImageNet mean and std."""
    mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
    std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
    batch = batch.div_(255.0)
    return (batch - mean) / std


# -------------------------------------------------------------------------------------------- transformer_net.py


class TransformerNet(torch.nn.Module):
    """Downsample twice, residual blocks, upsample twice, back to 3 channels."""

    def __init__(self):
        super().__init__()
        self.conv1 = ConvLayer(3, 8, kernel_size=9, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(8, affine=True)
        self.conv2 = ConvLayer(8, 16, kernel_size=3, stride=2)
        self.in2 = torch.nn.InstanceNorm2d(16, affine=True)
        self.conv3 = ConvLayer(16, 32, kernel_size=3, stride=2)
        self.in3 = torch.nn.InstanceNorm2d(32, affine=True)
        self.res1 = ResidualBlock(32)
        self.res2 = ResidualBlock(32)
        self.deconv1 = UpsampleConvLayer(32, 16, kernel_size=3, stride=1, upsample=2)
        self.in4 = torch.nn.InstanceNorm2d(16, affine=True)
        self.deconv2 = UpsampleConvLayer(16, 8, kernel_size=3, stride=1, upsample=2)
        self.in5 = torch.nn.InstanceNorm2d(8, affine=True)
        self.deconv3 = ConvLayer(8, 3, kernel_size=9, stride=1)
        self.relu = torch.nn.ReLU()

    def forward(self, X):
        y = self.relu(self.in1(self.conv1(X)))
        y = self.relu(self.in2(self.conv2(y)))
        y = self.relu(self.in3(self.conv3(y)))
        y = self.res1(y)
        y = self.res2(y)
        y = self.relu(self.in4(self.deconv1(y)))
        y = self.relu(self.in5(self.deconv2(y)))
        y = self.deconv3(y)
        return y


class ConvLayer(torch.nn.Module):
    """Reflection padding, then a convolution."""

    def __init__(self, in_channels, out_channels, kernel_size, stride):
        super().__init__()
        reflection_padding = kernel_size // 2
        self.reflection_pad = torch.nn.ReflectionPad2d(reflection_padding)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        out = self.reflection_pad(x)
        out = self.conv2d(out)
        return out


class ResidualBlock(torch.nn.Module):
    """Two normalised convolutions and a skip connection."""

    def __init__(self, channels):
        super().__init__()
        self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in2 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        residual = x
        out = self.relu(self.in1(self.conv1(x)))
        out = self.in2(self.conv2(out))
        out = out + residual
        return out


class UpsampleConvLayer(torch.nn.Module):
    """Nearest-neighbour upsampling, then a convolution (instead of a transposed convolution)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
        super().__init__()
        self.upsample = upsample
        reflection_padding = kernel_size // 2
        self.reflection_pad = torch.nn.ReflectionPad2d(reflection_padding)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        x_in = x
        if self.upsample:
            x_in = F.interpolate(x_in, mode="nearest", scale_factor=self.upsample)
        out = self.reflection_pad(x_in)
        out = self.conv2d(out)
        return out


# ------------------------------------------------------------------------------------------------------- vgg.py


class Vgg16(torch.nn.Module):
    """A frozen feature extractor cut into four slices, returning each slice's activations (random weights here)."""

    def __init__(self, requires_grad=False):
        super().__init__()
        generator = torch.Generator().manual_seed(16)  # the same "pretrained" weights every time
        features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.Conv2d(8, 8, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 16, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1),
            torch.nn.ReLU(),
        )
        with torch.no_grad():
            for param in features.parameters():
                param.copy_(torch.randn(param.shape, generator=generator) * 0.2)
        self.slice1 = torch.nn.Sequential()
        self.slice2 = torch.nn.Sequential()
        self.slice3 = torch.nn.Sequential()
        self.slice4 = torch.nn.Sequential()
        for x in range(4):
            self.slice1.add_module(str(x), features[x])
        for x in range(4, 7):
            self.slice2.add_module(str(x), features[x])
        for x in range(7, 10):
            self.slice3.add_module(str(x), features[x])
        for x in range(10, 13):
            self.slice4.add_module(str(x), features[x])
        if not requires_grad:
            for param in self.parameters():
                param.requires_grad = False

    def forward(self, X):
        h = self.slice1(X)
        h_relu1_2 = h
        h = self.slice2(h)
        h_relu2_2 = h
        h = self.slice3(h)
        h_relu3_3 = h
        h = self.slice4(h)
        h_relu4_3 = h
        vgg_outputs = namedtuple("VggOutputs", ["relu1_2", "relu2_2", "relu3_3", "relu4_3"])
        out = vgg_outputs(h_relu1_2, h_relu2_2, h_relu3_3, h_relu4_3)
        return out


# ----------------------------------------------------------------------------------------------- neural_style.py


def synthetic_photos(n, size, seed):
    """``n`` smooth random RGB images, 0-255 floats, as ``ToTensor()`` then ``x.mul(255)`` would give."""
    generator = torch.Generator().manual_seed(seed)
    coarse = torch.rand(n, 3, size // 8, size // 8, generator=generator)
    return F.interpolate(coarse, size=(size, size), mode="bilinear", align_corners=False).mul(255)


def write_image(filename, image):
    """Write a 0-255 CHW tensor as the HWC uint8 array an image file would hold."""
    np.save(filename, image.permute(1, 2, 0).round().to(torch.uint8).numpy())


def check_paths(args):
    try:
        if not os.path.exists(args.save_model_dir):
            os.makedirs(args.save_model_dir)
        if args.checkpoint_model_dir is not None and not (os.path.exists(args.checkpoint_model_dir)):
            os.makedirs(args.checkpoint_model_dir)
    except OSError as e:
        print(e)
        sys.exit(1)


def train(args):
    """Train the transformer net so that its outputs keep the content of the inputs and take the style image's."""
    if args.accel:  # noqa: SIM108 (the example's if/else)
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")

    print(f"Using device: {device}")

    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    # the image folder: every picture already resized and cropped to image_size, 0-255, label 0
    images = synthetic_photos(8, args.image_size, seed=1)
    train_dataset = TensorDataset(images, torch.zeros(len(images), dtype=torch.long))
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size)

    transformer = TransformerNet().to(device)
    optimizer = Adam(transformer.parameters(), args.lr)
    mse_loss = torch.nn.MSELoss()

    vgg = Vgg16(requires_grad=False).to(device)
    style = load_image(args.style_image, size=args.style_size)
    style = style.mul(255)
    style = style.repeat(args.batch_size, 1, 1, 1).to(device)

    features_style = vgg(normalize_batch(style))
    gram_style = [gram_matrix(y) for y in features_style]

    for e in range(args.epochs):
        transformer.train()
        agg_content_loss = 0.0
        agg_style_loss = 0.0
        count = 0
        for batch_id, (x, _) in enumerate(train_loader):
            n_batch = len(x)
            count += n_batch
            optimizer.zero_grad()

            x = x.to(device)
            y = transformer(x)

            y = normalize_batch(y)
            x = normalize_batch(x)

            features_y = vgg(y)
            features_x = vgg(x)

            content_loss = args.content_weight * mse_loss(features_y.relu2_2, features_x.relu2_2)

            style_loss = 0.0
            for ft_y, gm_s in zip(features_y, gram_style, strict=True):
                gm_y = gram_matrix(ft_y)
                style_loss += mse_loss(gm_y, gm_s[:n_batch, :, :])
            style_loss *= args.style_weight

            total_loss = content_loss + style_loss
            total_loss.backward()
            optimizer.step()

            agg_content_loss += content_loss.item()
            agg_style_loss += style_loss.item()

            if (batch_id + 1) % args.log_interval == 0:
                mesg = (
                    f"Epoch {e + 1}:\t[{count}/{len(train_dataset)}]\t"
                    f"content: {agg_content_loss / (batch_id + 1):.1f}\t"
                    f"style: {agg_style_loss / (batch_id + 1):.1f}\t"
                    f"total: {(agg_content_loss + agg_style_loss) / (batch_id + 1):.1f}"
                )
                print(mesg)

            if args.checkpoint_model_dir is not None and (batch_id + 1) % args.checkpoint_interval == 0:
                transformer.eval().cpu()
                ckpt_model_filename = "ckpt_epoch_" + str(e) + "_batch_id_" + str(batch_id + 1) + ".pth"
                ckpt_model_path = os.path.join(args.checkpoint_model_dir, ckpt_model_filename)
                torch.save(transformer.state_dict(), ckpt_model_path)
                transformer.to(device).train()

    # save model
    transformer.eval().cpu()
    timestamp = time.strftime("%Y-%m-%d_%H-%M-%S")
    save_model_filename = f"epoch_{args.epochs}_{timestamp}_{args.content_weight}_{args.style_weight}.model"
    save_model_path = os.path.join(args.save_model_dir, save_model_filename)
    torch.save(transformer.state_dict(), save_model_path)

    print("\nDone, trained model saved at", save_model_path)
    return save_model_path


def stylize(args):
    """Run a trained transformer net on one content image and write the result."""
    if args.accel:  # noqa: SIM108 (the example's if/else)
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")

    print(f"Using device: {device}")

    content_image = load_image(args.content_image, scale=args.content_scale)
    content_image = content_image.mul(255)
    content_image = content_image.unsqueeze(0).to(device)

    with torch.no_grad():
        style_model = TransformerNet()
        state_dict = torch.load(args.model)
        # remove saved deprecated running_* keys in InstanceNorm from the checkpoint
        for k in list(state_dict.keys()):
            if re.search(r"in\d+\.running_(mean|var)$", k):
                del state_dict[k]
        style_model.load_state_dict(state_dict)
        style_model.to(device)
        style_model.eval()
        output = style_model(content_image).cpu()
    print(f"output {tuple(output.shape)} mean {output.mean().item():.2f} std {output.std().item():.2f}")
    save_image(args.output_image, output[0])


def main():
    with tempfile.TemporaryDirectory() as work:
        style_image = os.path.join(work, "mosaic.npy")
        content_image = os.path.join(work, "amber.npy")
        write_image(style_image, synthetic_photos(1, 32, seed=2)[0])
        write_image(content_image, synthetic_photos(1, 48, seed=3)[0])

        train_args = Namespace(
            subcommand="train",
            epochs=2,
            batch_size=4,
            style_image=style_image,
            save_model_dir=os.path.join(work, "models"),
            checkpoint_model_dir=os.path.join(work, "checkpoints"),
            image_size=32,
            style_size=32,
            accel=ACCEL,
            seed=42,
            content_weight=1e5,
            style_weight=1e6,
            lr=1e-3,
            log_interval=1,
            checkpoint_interval=1,
        )
        eval_args = Namespace(
            subcommand="eval",
            content_image=content_image,
            content_scale=1.5,
            output_image=os.path.join(work, "amber-mosaic.npy"),
            model=None,
            export_onnx=None,
            accel=ACCEL,
        )

        for args in (train_args, eval_args):
            if args.accel and not torch.accelerator.is_available():
                print("ERROR: accelerator is not available, try running on CPU")
                sys.exit(1)
            if not args.accel and torch.accelerator.is_available():
                print("WARNING: accelerator is available, run with --accel to enable it")

            if args.subcommand == "train":
                check_paths(args)
                eval_args.model = train(args)
            else:
                stylize(args)

        stylized = np.load(eval_args.output_image)
        checkpoints = sorted(os.listdir(train_args.checkpoint_model_dir))
        print(f"checkpoints: {checkpoints}")
        print(f"done stylized {stylized.shape} {stylized.dtype} mean={stylized.mean():.2f}")


if __name__ == "__main__":
    main()
