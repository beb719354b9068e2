"""Trains an SRResNet and then an SRGAN for 4x single-image super-resolution, evaluates the SRGAN generator with PSNR
and SSIM on the luminance channel, and super-resolves one image with both models, following sgrvinod's
"a-PyTorch-Tutorial-to-Super-Resolution": `create_data_lists` writes JSON lists of image files, `SRDataset` crops
high-resolution patches and downsamples them on the CPU (`convert_image` normalises 3-D CPU images with the CPU
ImageNet mean/std, and 4-D device batches with the ``imagenet_mean_cuda``/``imagenet_std_cuda`` copies that utils.py
moves to the default device at import, next to ``rgb_weights``). SRResNet is trained with an MSE loss and pickled
whole (model and optimizer objects) in its checkpoint; the SRGAN generator is initialised from that checkpoint and
trained against a discriminator with a perceptual loss in the feature space of a truncated VGG19; the SRGAN checkpoint
(generator, discriminator and both optimizers, pickled) is then resumed for one more epoch. eval.py and
super_resolve.py load the pickled models with ``torch.load(...)[...].to(device)``.

Modeled on: sgrvinod/a-PyTorch-Tutorial-to-Super-Resolution, utils.py, datasets.py, models.py, train_srresnet.py,
train_srgan.py, eval.py, super_resolve.py and create_data_lists.py at commit c30556bc79a9d43539f2d658722bcb7ff5011ddb
(https://github.com/sgrvinod/a-PyTorch-Tutorial-to-Super-Resolution/blob/c30556bc79a9d43539f2d658722bcb7ff5011ddb/train_srgan.py
and the other files at the same commit).

Kept: utils.py's module-level ``device``, ``rgb_weights = torch.FloatTensor([...]).to(device)``, CPU
``imagenet_mean``/``imagenet_std`` and device ``imagenet_mean_cuda``/``imagenet_std_cuda``; `convert_image` with its
3-D/4-D split for ``'imagenet-norm'`` and the ``'y-channel'`` matmul with ``rgb_weights``; `ImageTransforms`,
`AverageMeter`, `clip_gradient`, `adjust_learning_rate`; datasets.py's `SRDataset` reading the JSON lists; models.py's
`ConvolutionalBlock`, `SubPixelConvolutionalBlock`, `ResidualBlock`, `SRResNet`, `Generator` (with
`initialize_with_srresnet`: ``torch.load(srresnet_checkpoint)['model']`` and ``load_state_dict(srresnet.state_dict())``
into the CPU generator), `Discriminator` and `TruncatedVGG19`'s truncation logic; train_srresnet.py's and
train_srgan.py's `main` and `train` as written: models and Adam optimizers (over ``filter(lambda p:
p.requires_grad, ...)``) built on the CPU or taken from the loaded checkpoint, then ``.to(device)`` for the models,
the truncated VGG and the loss criteria, DataLoaders with ``pin_memory=True``, ``lr_imgs.to(device)``/
``hr_imgs.to(device)`` per batch, ``torch.ones_like``/``torch.zeros_like`` targets, the detached SR images for the
discriminator step, the halfway learning-rate decay and ``torch.save`` of the whole objects; eval.py's loading with
``torch.load(srgan_checkpoint)['generator'].to(device)``, ``eval()``, ``torch.no_grad()`` and ``.cpu().numpy()`` of the
y-channel images; super_resolve.py's loading of both models and its SR calls ``convert_image(lr_img, source='pil',
target='imagenet-norm').unsqueeze(0).to(device)`` followed by ``.squeeze(0).cpu().detach()``.

Changed to run here: images are seeded synthetic RGB arrays (smooth blobs and stripes) stored as ``.npy`` files
instead of COCO/Set5/Set14/BSDS100 JPEGs; a "PIL image" is an H x W x 3 uint8 numpy array, ``FT.to_tensor`` /
``FT.to_pil_image`` are small stand-ins, and PIL's bicubic downsizing is a box filter; torchvision's pretrained VGG19
is replaced by a VGG19-shaped ``features`` stack (same layer sequence, channels divided by 16) with random weights;
skimage's PSNR/SSIM are small numpy versions; the two training scripts share one set of data/learning parameters
(the SRResNet ones are named ``*_srresnet`` and its `main`/`train` are `main_srresnet`/`train_srresnet`); ``torch.load``
of the pickled checkpoints gets ``weights_only=False``; the visualisation grid of super_resolve.py is replaced by
printed PSNRs; eval.py and super_resolve.py are functions; ``"is" 0`` comparisons in `Discriminator` are ``== 0``;
per-function docstrings are shortened and comments and blank lines inside functions dropped; everything runs in a temporary folder removed at the end.
Shrunk: 16 residual blocks -> 2 with 16 channels instead of 64; discriminator channels 64 -> 8; crops of 32 instead of
96 pixels; 32 training images of 48x48; batch size 16 -> 8; 1e6 / 2e5 iterations -> 3 / 8 (1 SRResNet epoch, 3
SRGAN epochs, then 1 resumed); workers 4 -> 0; print every 500 -> 2 batches.
"""
import json
import math
import os
import random
import shutil
import tempfile
import time

import numpy as np
import torch
import torch.backends.cudnn as cudnn
from torch import nn

# ---- utils.py -----------------------------------------------------------------------------------------------------
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# Some constants
rgb_weights = torch.FloatTensor([65.481, 128.553, 24.966]).to(device)
imagenet_mean = torch.FloatTensor([0.485, 0.456, 0.406]).unsqueeze(1).unsqueeze(2)
imagenet_std = torch.FloatTensor([0.229, 0.224, 0.225]).unsqueeze(1).unsqueeze(2)
imagenet_mean_cuda = torch.FloatTensor([0.485, 0.456, 0.406]).to(device).unsqueeze(0).unsqueeze(2).unsqueeze(3)
imagenet_std_cuda = torch.FloatTensor([0.229, 0.224, 0.225]).to(device).unsqueeze(0).unsqueeze(2).unsqueeze(3)

class FT:
    """Stand-ins for torchvision.transforms.functional on H x W x 3 uint8 arrays ("PIL images")."""

    @staticmethod
    def to_tensor(img):
        return torch.from_numpy(img).permute(2, 0, 1).float().div(255.)

    @staticmethod
    def to_pil_image(img):
        return img.mul(255).byte().permute(1, 2, 0).numpy()

def create_data_lists(train_folders, test_folders, min_size, output_folder):
    """Create lists for images in the training set and each of the test sets."""
    print("\nCreating data lists... this may take some time.\n")
    train_images = list()
    for d in train_folders:
        for i in sorted(os.listdir(d)):
            img_path = os.path.join(d, i)
            img = np.load(img_path)
            if img.shape[1] >= min_size and img.shape[0] >= min_size:
                train_images.append(img_path)
    print("There are %d images in the training data.\n" % len(train_images))
    with open(os.path.join(output_folder, 'train_images.json'), 'w') as j:
        json.dump(train_images, j)
    for d in test_folders:
        test_images = list()
        test_name = d.split("/")[-1]
        for i in sorted(os.listdir(d)):
            img_path = os.path.join(d, i)
            img = np.load(img_path)
            if img.shape[1] >= min_size and img.shape[0] >= min_size:
                test_images.append(img_path)
        print("There are %d images in the %s test data.\n" % (len(test_images), test_name))
        with open(os.path.join(output_folder, test_name + '_test_images.json'), 'w') as j:
            json.dump(test_images, j)

def convert_image(img, source, target):
    """Convert an image from a source format to a target format."""
    assert source in {'pil', '[0, 1]', '[-1, 1]'}, "Cannot convert from source format %s!" % source
    assert target in {'pil', '[0, 255]', '[0, 1]', '[-1, 1]', 'imagenet-norm',
                      'y-channel'}, "Cannot convert to target format %s!" % target
    if source == 'pil':
        img = FT.to_tensor(img)
    elif source == '[0, 1]':
        pass  # already in [0, 1]
    elif source == '[-1, 1]':
        img = (img + 1.) / 2.
    if target == 'pil':
        img = FT.to_pil_image(img)
    elif target == '[0, 255]':
        img = 255. * img
    elif target == '[0, 1]':
        pass  # already in [0, 1]
    elif target == '[-1, 1]':
        img = 2. * img - 1.
    elif target == 'imagenet-norm':
        if img.ndimension() == 3:
            img = (img - imagenet_mean) / imagenet_std
        elif img.ndimension() == 4:
            img = (img - imagenet_mean_cuda) / imagenet_std_cuda
    elif target == 'y-channel':
        img = torch.matmul(255. * img.permute(0, 2, 3, 1)[:, 4:-4, 4:-4, :], rgb_weights) / 255. + 16.
    return img

def resize(img, width, height):
    """Box-filter downsizing of an H x W x 3 uint8 array (stands in for PIL's Image.resize(..., Image.BICUBIC))."""
    fy, fx = img.shape[0] // height, img.shape[1] // width
    out = img[:height * fy, :width * fx].reshape(height, fy, width, fx, 3).astype(np.float32).mean(axis=(1, 3))
    return np.round(out).astype(np.uint8)

class ImageTransforms(object):
    """Image transformation pipeline."""

    def __init__(self, split, crop_size, scaling_factor, lr_img_type, hr_img_type):
        self.split = split.lower()
        self.crop_size = crop_size
        self.scaling_factor = scaling_factor
        self.lr_img_type = lr_img_type
        self.hr_img_type = hr_img_type
        assert self.split in {'train', 'test'}

    def __call__(self, img):
        height, width = img.shape[0], img.shape[1]
        if self.split == 'train':
            left = random.randint(1, width - self.crop_size)
            top = random.randint(1, height - self.crop_size)
            right = left + self.crop_size
            bottom = top + self.crop_size
            hr_img = img[top:bottom, left:right]
        else:
            x_remainder = width % self.scaling_factor
            y_remainder = height % self.scaling_factor
            left = x_remainder // 2
            top = y_remainder // 2
            right = left + (width - x_remainder)
            bottom = top + (height - y_remainder)
            hr_img = img[top:bottom, left:right]
        lr_img = resize(hr_img, int(hr_img.shape[1] / self.scaling_factor), int(hr_img.shape[0] / self.scaling_factor))
        assert hr_img.shape[1] == lr_img.shape[1] * self.scaling_factor and hr_img.shape[0] == lr_img.shape[0] * self.scaling_factor
        lr_img = convert_image(lr_img, source='pil', target=self.lr_img_type)
        hr_img = convert_image(hr_img, source='pil', target=self.hr_img_type)
        return lr_img, hr_img

class AverageMeter(object):
    """Keeps track of most recent, average, sum, and count of a metric."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

def clip_gradient(optimizer, grad_clip):
    """Clips gradients computed during backpropagation to avoid explosion of gradients."""
    for group in optimizer.param_groups:
        for param in group['params']:
            if param.grad is not None:
                param.grad.data.clamp_(-grad_clip, grad_clip)

def adjust_learning_rate(optimizer, shrink_factor):
    """Shrinks learning rate by a specified factor."""
    print("\nDECAYING learning rate.")
    for param_group in optimizer.param_groups:
        param_group['lr'] = param_group['lr'] * shrink_factor
    print("The new learning rate is %f\n" % (optimizer.param_groups[0]['lr'],))

# ---- datasets.py --------------------------------------------------------------------------------------------------
class SRDataset(torch.utils.data.Dataset):
    """A PyTorch Dataset to be used by a PyTorch DataLoader."""

    def __init__(self, data_folder, split, crop_size, scaling_factor, lr_img_type, hr_img_type, test_data_name=None):
        self.data_folder = data_folder
        self.split = split.lower()
        self.crop_size = int(crop_size)
        self.scaling_factor = int(scaling_factor)
        self.lr_img_type = lr_img_type
        self.hr_img_type = hr_img_type
        self.test_data_name = test_data_name
        assert self.split in {'train', 'test'}
        if self.split == 'test' and self.test_data_name is None:
            raise ValueError("Please provide the name of the test dataset!")
        assert lr_img_type in {'[0, 255]', '[0, 1]', '[-1, 1]', 'imagenet-norm'}
        assert hr_img_type in {'[0, 255]', '[0, 1]', '[-1, 1]', 'imagenet-norm'}
        if self.split == 'train':
            assert self.crop_size % self.scaling_factor == 0, "Crop dimensions are not perfectly divisible by scaling factor!"
        if self.split == 'train':
            with open(os.path.join(data_folder, 'train_images.json'), 'r') as j:
                self.images = json.load(j)
        else:
            with open(os.path.join(data_folder, self.test_data_name + '_test_images.json'), 'r') as j:
                self.images = json.load(j)
        self.transform = ImageTransforms(split=self.split, crop_size=self.crop_size, scaling_factor=self.scaling_factor,
                                         lr_img_type=self.lr_img_type, hr_img_type=self.hr_img_type)

    def __getitem__(self, i):
        img = np.load(self.images[i])
        lr_img, hr_img = self.transform(img)
        return lr_img, hr_img

    def __len__(self):
        return len(self.images)

# ---- models.py ----------------------------------------------------------------------------------------------------
class ConvolutionalBlock(nn.Module):
    """A convolutional block, comprising convolutional, BN, activation layers."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, batch_norm=False, activation=None):
        super(ConvolutionalBlock, self).__init__()
        if activation is not None:
            activation = activation.lower()
            assert activation in {'prelu', 'leakyrelu', 'tanh'}
        layers = list()
        layers.append(
            nn.Conv2d(in_channels=in_channels, out_channels=out_channels, kernel_size=kernel_size, stride=stride,
                      padding=kernel_size // 2))
        if batch_norm is True:
            layers.append(nn.BatchNorm2d(num_features=out_channels))
        if activation == 'prelu':
            layers.append(nn.PReLU())
        elif activation == 'leakyrelu':
            layers.append(nn.LeakyReLU(0.2))
        elif activation == 'tanh':
            layers.append(nn.Tanh())
        self.conv_block = nn.Sequential(*layers)

    def forward(self, input):
        output = self.conv_block(input)  # (N, out_channels, w, h)
        return output

class SubPixelConvolutionalBlock(nn.Module):
    """A subpixel convolutional block, comprising convolutional, pixel-shuffle, and PReLU activation layers."""

    def __init__(self, kernel_size=3, n_channels=64, scaling_factor=2):
        super(SubPixelConvolutionalBlock, self).__init__()
        self.conv = nn.Conv2d(in_channels=n_channels, out_channels=n_channels * (scaling_factor ** 2),
                              kernel_size=kernel_size, padding=kernel_size // 2)
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor=scaling_factor)
        self.prelu = nn.PReLU()

    def forward(self, input):
        output = self.conv(input)  # (N, n_channels * scaling factor^2, w, h)
        output = self.pixel_shuffle(output)  # (N, n_channels, w * scaling factor, h * scaling factor)
        output = self.prelu(output)  # (N, n_channels, w * scaling factor, h * scaling factor)
        return output

class ResidualBlock(nn.Module):
    """A residual block, comprising two convolutional blocks with a residual connection across them."""

    def __init__(self, kernel_size=3, n_channels=64):
        super(ResidualBlock, self).__init__()
        self.conv_block1 = ConvolutionalBlock(in_channels=n_channels, out_channels=n_channels, kernel_size=kernel_size,
                                              batch_norm=True, activation='PReLu')
        self.conv_block2 = ConvolutionalBlock(in_channels=n_channels, out_channels=n_channels, kernel_size=kernel_size,
                                              batch_norm=True, activation=None)

    def forward(self, input):
        residual = input  # (N, n_channels, w, h)
        output = self.conv_block1(input)  # (N, n_channels, w, h)
        output = self.conv_block2(output)  # (N, n_channels, w, h)
        output = output + residual  # (N, n_channels, w, h)
        return output

class SRResNet(nn.Module):
    """The SRResNet, as defined in the paper."""

    def __init__(self, large_kernel_size=9, small_kernel_size=3, n_channels=64, n_blocks=16, scaling_factor=4):
        super(SRResNet, self).__init__()
        scaling_factor = int(scaling_factor)
        assert scaling_factor in {2, 4, 8}, "The scaling factor must be 2, 4, or 8!"
        self.conv_block1 = ConvolutionalBlock(in_channels=3, out_channels=n_channels, kernel_size=large_kernel_size,
                                              batch_norm=False, activation='PReLu')
        self.residual_blocks = nn.Sequential(
            *[ResidualBlock(kernel_size=small_kernel_size, n_channels=n_channels) for i in range(n_blocks)])
        self.conv_block2 = ConvolutionalBlock(in_channels=n_channels, out_channels=n_channels,
                                              kernel_size=small_kernel_size,
                                              batch_norm=True, activation=None)
        n_subpixel_convolution_blocks = int(math.log2(scaling_factor))
        self.subpixel_convolutional_blocks = nn.Sequential(
            *[SubPixelConvolutionalBlock(kernel_size=small_kernel_size, n_channels=n_channels, scaling_factor=2) for i
              in range(n_subpixel_convolution_blocks)])
        self.conv_block3 = ConvolutionalBlock(in_channels=n_channels, out_channels=3, kernel_size=large_kernel_size,
                                              batch_norm=False, activation='Tanh')

    def forward(self, lr_imgs):
        output = self.conv_block1(lr_imgs)  # (N, 3, w, h)
        residual = output  # (N, n_channels, w, h)
        output = self.residual_blocks(output)  # (N, n_channels, w, h)
        output = self.conv_block2(output)  # (N, n_channels, w, h)
        output = output + residual  # (N, n_channels, w, h)
        output = self.subpixel_convolutional_blocks(output)  # (N, n_channels, w * scaling factor, h * scaling factor)
        sr_imgs = self.conv_block3(output)  # (N, 3, w * scaling factor, h * scaling factor)
        return sr_imgs

class Generator(nn.Module):
    """The generator in the SRGAN, as defined in the paper. Architecture identical to the SRResNet."""

    def __init__(self, large_kernel_size=9, small_kernel_size=3, n_channels=64, n_blocks=16, scaling_factor=4):
        super(Generator, self).__init__()
        self.net = SRResNet(large_kernel_size=large_kernel_size, small_kernel_size=small_kernel_size,
                            n_channels=n_channels, n_blocks=n_blocks, scaling_factor=scaling_factor)

    def initialize_with_srresnet(self, srresnet_checkpoint):
        """Initialize with weights from a trained SRResNet."""
        srresnet = torch.load(srresnet_checkpoint, weights_only=False)['model']
        self.net.load_state_dict(srresnet.state_dict())
        print("\nLoaded weights from pre-trained SRResNet.\n")

    def forward(self, lr_imgs):
        sr_imgs = self.net(lr_imgs)  # (N, n_channels, w * scaling factor, h * scaling factor)
        return sr_imgs

class Discriminator(nn.Module):
    """The discriminator in the SRGAN, as defined in the paper."""

    def __init__(self, kernel_size=3, n_channels=64, n_blocks=8, fc_size=1024):
        super(Discriminator, self).__init__()
        in_channels = 3
        conv_blocks = list()
        for i in range(n_blocks):
            out_channels = (n_channels if i == 0 else in_channels * 2) if i % 2 == 0 else in_channels
            conv_blocks.append(
                ConvolutionalBlock(in_channels=in_channels, out_channels=out_channels, kernel_size=kernel_size,
                                   stride=1 if i % 2 == 0 else 2, batch_norm=i != 0, activation='LeakyReLu'))
            in_channels = out_channels
        self.conv_blocks = nn.Sequential(*conv_blocks)
        self.adaptive_pool = nn.AdaptiveAvgPool2d((6, 6))
        self.fc1 = nn.Linear(out_channels * 6 * 6, fc_size)
        self.leaky_relu = nn.LeakyReLU(0.2)
        self.fc2 = nn.Linear(1024, 1)

    def forward(self, imgs):
        batch_size = imgs.size(0)
        output = self.conv_blocks(imgs)
        output = self.adaptive_pool(output)
        output = self.fc1(output.view(batch_size, -1))
        output = self.leaky_relu(output)
        logit = self.fc2(output)
        return logit

def vgg19_features():
    """The layer sequence of torchvision's vgg19().features, channels divided by 16, randomly initialised like it."""
    layers, in_channels = [], 3
    for v in [4, 4, 'M', 8, 8, 'M', 16, 16, 16, 16, 'M', 32, 32, 32, 32, 'M', 32, 32, 32, 32, 'M']:
        if v == 'M':
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
        else:
            conv2d = nn.Conv2d(in_channels, v, kernel_size=3, padding=1)
            nn.init.kaiming_normal_(conv2d.weight, mode="fan_out", nonlinearity="relu")  # torchvision's VGG init
            nn.init.constant_(conv2d.bias, 0)
            layers += [conv2d, nn.ReLU(inplace=True)]
            in_channels = v
    return nn.Sequential(*layers)

class TruncatedVGG19(nn.Module):
    """A truncated VGG19 network, used to calculate the MSE loss in VGG feature-space, i.e. the VGG loss."""

    def __init__(self, i, j):
        super(TruncatedVGG19, self).__init__()
        vgg19_features_ = vgg19_features()
        maxpool_counter = 0
        conv_counter = 0
        truncate_at = 0
        for layer in vgg19_features_.children():
            truncate_at += 1
            if isinstance(layer, nn.Conv2d):
                conv_counter += 1
            if isinstance(layer, nn.MaxPool2d):
                maxpool_counter += 1
                conv_counter = 0
            if maxpool_counter == i - 1 and conv_counter == j:
                break
        assert maxpool_counter == i - 1 and conv_counter == j, "One or both of i=%d and j=%d are not valid choices for the VGG19!" % (
            i, j)
        self.truncated_vgg19 = nn.Sequential(*list(vgg19_features_.children())[:truncate_at + 1])

    def forward(self, input):
        output = self.truncated_vgg19(input)  # (N, feature_map_channels, feature_map_w, feature_map_h)
        return output

# ---- train_srresnet.py, train_srgan.py: parameters ----------------------------------------------------------------
# Data parameters
data_folder = './'  # folder with JSON data files
crop_size = 32  # crop size of target HR images
scaling_factor = 4  # the scaling factor for the generator

# Model parameters (SRResNet) / Generator parameters (SRGAN)
large_kernel_size = large_kernel_size_g = 9
small_kernel_size = small_kernel_size_g = 3
n_channels = n_channels_g = 16
n_blocks = n_blocks_g = 2
srresnet_checkpoint = "./checkpoint_srresnet.pth.tar"  # filepath of the trained SRResNet checkpoint used for initialization

# Discriminator parameters
kernel_size_d = 3  # kernel size in all convolutional blocks
n_channels_d = 8  # number of output channels in the first convolutional block
n_blocks_d = 8  # number of convolutional blocks
fc_size_d = 1024  # size of the first fully connected layer

# Learning parameters
checkpoint_srresnet = None  # path to SRResNet checkpoint, None if none
checkpoint = None  # path to model (SRGAN) checkpoint, None if none
batch_size = 8  # batch size
start_epoch = 0  # start at this epoch
iterations_srresnet = 3  # number of SRResNet training iterations
iterations = 8  # number of training iterations
workers = 0  # number of workers for loading data in the DataLoader
vgg19_i = 5  # the index i in the definition for VGG loss; see paper or models.py
vgg19_j = 4  # the index j in the definition for VGG loss; see paper or models.py
beta = 1e-3  # the coefficient to weight the adversarial loss in the perceptual loss
print_freq = 2  # print training status once every __ batches
lr = 1e-4  # learning rate
grad_clip = None  # clip if gradients are exploding

cudnn.benchmark = True

# ---- train_srresnet.py --------------------------------------------------------------------------------------------
def main_srresnet():
    """Training."""
    global start_epoch, epoch, checkpoint_srresnet
    if checkpoint_srresnet is None:
        model = SRResNet(large_kernel_size=large_kernel_size, small_kernel_size=small_kernel_size,
                         n_channels=n_channels, n_blocks=n_blocks, scaling_factor=scaling_factor)
        optimizer = torch.optim.Adam(params=filter(lambda p: p.requires_grad, model.parameters()),
                                     lr=lr)
    else:
        checkpoint_srresnet = torch.load(checkpoint_srresnet, weights_only=False)
        start_epoch = checkpoint_srresnet['epoch'] + 1
        model = checkpoint_srresnet['model']
        optimizer = checkpoint_srresnet['optimizer']
    model = model.to(device)
    criterion = nn.MSELoss().to(device)
    train_dataset = SRDataset(data_folder, split='train', crop_size=crop_size, scaling_factor=scaling_factor,
                              lr_img_type='imagenet-norm', hr_img_type='[-1, 1]')
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                                               pin_memory=True)  # note that we're passing the collate function here
    epochs = int(iterations_srresnet // len(train_loader) + 1)
    for epoch in range(start_epoch, epochs):
        loss = train_srresnet(train_loader=train_loader, model=model, criterion=criterion, optimizer=optimizer,
                              epoch=epoch)
        torch.save({'epoch': epoch,
                    'model': model,
                    'optimizer': optimizer},
                   'checkpoint_srresnet.pth.tar')
    return loss

def train_srresnet(train_loader, model, criterion, optimizer, epoch):
    """One epoch's training."""
    model.train()  # training mode enables batch normalization
    batch_time = AverageMeter()  # forward prop. + back prop. time
    data_time = AverageMeter()  # data loading time
    losses = AverageMeter()  # loss
    start = time.time()
    for i, (lr_imgs, hr_imgs) in enumerate(train_loader):
        data_time.update(time.time() - start)
        lr_imgs = lr_imgs.to(device)  # (batch_size (N), 3, 24, 24), imagenet-normed
        hr_imgs = hr_imgs.to(device)  # (batch_size (N), 3, 96, 96), in [-1, 1]
        sr_imgs = model(lr_imgs)  # (N, 3, 96, 96), in [-1, 1]
        loss = criterion(sr_imgs, hr_imgs)  # scalar
        optimizer.zero_grad()
        loss.backward()
        if grad_clip is not None:
            clip_gradient(optimizer, grad_clip)
        optimizer.step()
        losses.update(loss.item(), lr_imgs.size(0))
        batch_time.update(time.time() - start)
        start = time.time()
        if i % print_freq == 0:
            print('Epoch: [{0}][{1}/{2}]----'
                  'Batch Time {batch_time.val:.3f} ({batch_time.avg:.3f})----'
                  'Data Time {data_time.val:.3f} ({data_time.avg:.3f})----'
                  'Loss {loss.val:.4f} ({loss.avg:.4f})'.format(epoch, i, len(train_loader),
                                                                    batch_time=batch_time,
                                                                    data_time=data_time, loss=losses))
    del lr_imgs, hr_imgs, sr_imgs  # free some memory since their histories may be stored
    return losses.avg

# ---- train_srgan.py -----------------------------------------------------------------------------------------------
def main():
    """Training."""
    global start_epoch, epoch, checkpoint, srresnet_checkpoint
    if checkpoint is None:
        generator = Generator(large_kernel_size=large_kernel_size_g,
                              small_kernel_size=small_kernel_size_g,
                              n_channels=n_channels_g,
                              n_blocks=n_blocks_g,
                              scaling_factor=scaling_factor)
        generator.initialize_with_srresnet(srresnet_checkpoint=srresnet_checkpoint)
        optimizer_g = torch.optim.Adam(params=filter(lambda p: p.requires_grad, generator.parameters()),
                                       lr=lr)
        discriminator = Discriminator(kernel_size=kernel_size_d,
                                      n_channels=n_channels_d,
                                      n_blocks=n_blocks_d,
                                      fc_size=fc_size_d)
        optimizer_d = torch.optim.Adam(params=filter(lambda p: p.requires_grad, discriminator.parameters()),
                                       lr=lr)
    else:
        checkpoint = torch.load(checkpoint, weights_only=False)
        start_epoch = checkpoint['epoch'] + 1
        generator = checkpoint['generator']
        discriminator = checkpoint['discriminator']
        optimizer_g = checkpoint['optimizer_g']
        optimizer_d = checkpoint['optimizer_d']
        print("\nLoaded checkpoint from epoch %d.\n" % (checkpoint['epoch'] + 1))
    truncated_vgg19 = TruncatedVGG19(i=vgg19_i, j=vgg19_j)
    truncated_vgg19.eval()
    content_loss_criterion = nn.MSELoss()
    adversarial_loss_criterion = nn.BCEWithLogitsLoss()
    generator = generator.to(device)
    discriminator = discriminator.to(device)
    truncated_vgg19 = truncated_vgg19.to(device)
    content_loss_criterion = content_loss_criterion.to(device)
    adversarial_loss_criterion = adversarial_loss_criterion.to(device)
    train_dataset = SRDataset(data_folder, split='train', crop_size=crop_size, scaling_factor=scaling_factor,
                              lr_img_type='imagenet-norm', hr_img_type='imagenet-norm')
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                                               pin_memory=True)
    epochs = int(iterations // len(train_loader) + 1)
    for epoch in range(start_epoch, epochs):
        if epoch == int((iterations / 2) // len(train_loader) + 1):
            adjust_learning_rate(optimizer_g, 0.1)
            adjust_learning_rate(optimizer_d, 0.1)
        losses = train(train_loader=train_loader, generator=generator, discriminator=discriminator,
                       truncated_vgg19=truncated_vgg19, content_loss_criterion=content_loss_criterion,
                       adversarial_loss_criterion=adversarial_loss_criterion, optimizer_g=optimizer_g,
                       optimizer_d=optimizer_d, epoch=epoch)
        torch.save({'epoch': epoch,
                    'generator': generator,
                    'discriminator': discriminator,
                    'optimizer_g': optimizer_g,
                    'optimizer_d': optimizer_d},
                   'checkpoint_srgan.pth.tar')
    return losses

def train(train_loader, generator, discriminator, truncated_vgg19, content_loss_criterion, adversarial_loss_criterion,
          optimizer_g, optimizer_d, epoch):
    """One epoch's training."""
    generator.train()
    discriminator.train()  # training mode enables batch normalization
    batch_time = AverageMeter()  # forward prop. + back prop. time
    data_time = AverageMeter()  # data loading time
    losses_c = AverageMeter()  # content loss
    losses_a = AverageMeter()  # adversarial loss in the generator
    losses_d = AverageMeter()  # adversarial loss in the discriminator
    start = time.time()
    for i, (lr_imgs, hr_imgs) in enumerate(train_loader):
        data_time.update(time.time() - start)
        lr_imgs = lr_imgs.to(device)  # (batch_size (N), 3, 24, 24), imagenet-normed
        hr_imgs = hr_imgs.to(device)  # (batch_size (N), 3, 96, 96), imagenet-normed
        sr_imgs = generator(lr_imgs)  # (N, 3, 96, 96), in [-1, 1]
        sr_imgs = convert_image(sr_imgs, source='[-1, 1]', target='imagenet-norm')  # (N, 3, 96, 96), imagenet-normed
        sr_imgs_in_vgg_space = truncated_vgg19(sr_imgs)
        hr_imgs_in_vgg_space = truncated_vgg19(hr_imgs).detach()  # detached because they're constant, targets
        sr_discriminated = discriminator(sr_imgs)  # (N)
        content_loss = content_loss_criterion(sr_imgs_in_vgg_space, hr_imgs_in_vgg_space)
        adversarial_loss = adversarial_loss_criterion(sr_discriminated, torch.ones_like(sr_discriminated))
        perceptual_loss = content_loss + beta * adversarial_loss
        optimizer_g.zero_grad()
        perceptual_loss.backward()
        if grad_clip is not None:
            clip_gradient(optimizer_g, grad_clip)
        optimizer_g.step()
        losses_c.update(content_loss.item(), lr_imgs.size(0))
        losses_a.update(adversarial_loss.item(), lr_imgs.size(0))
        hr_discriminated = discriminator(hr_imgs)
        sr_discriminated = discriminator(sr_imgs.detach())
        adversarial_loss = adversarial_loss_criterion(sr_discriminated, torch.zeros_like(sr_discriminated)) + \
                           adversarial_loss_criterion(hr_discriminated, torch.ones_like(hr_discriminated))
        optimizer_d.zero_grad()
        adversarial_loss.backward()
        if grad_clip is not None:
            clip_gradient(optimizer_d, grad_clip)
        optimizer_d.step()
        losses_d.update(adversarial_loss.item(), hr_imgs.size(0))
        batch_time.update(time.time() - start)
        start = time.time()
        if i % print_freq == 0:
            print('Epoch: [{0}][{1}/{2}]----'
                  'Cont. Loss {loss_c.val:.4f} ({loss_c.avg:.4f})----'
                  'Adv. Loss {loss_a.val:.4f} ({loss_a.avg:.4f})----'
                  'Disc. Loss {loss_d.val:.4f} ({loss_d.avg:.4f})'.format(epoch, i, len(train_loader),
                                                                          loss_c=losses_c, loss_a=losses_a,
                                                                          loss_d=losses_d))
    del lr_imgs, hr_imgs, sr_imgs, hr_imgs_in_vgg_space, sr_imgs_in_vgg_space, hr_discriminated, sr_discriminated  # free some memory since their histories may be stored
    return losses_c.avg, losses_d.avg

# ---- eval.py, super_resolve.py ------------------------------------------------------------------------------------
def peak_signal_noise_ratio(image_true, image_test, data_range):
    return 10 * np.log10((data_range ** 2) / np.mean((image_true.astype(np.float64) - image_test) ** 2))

def structural_similarity(im1, im2, data_range, win_size=7):
    """skimage's default SSIM: 7x7 uniform window, sample covariances, K1=0.01, K2=0.03."""
    w = np.lib.stride_tricks.sliding_window_view
    a, b = w(im1.astype(np.float64), (win_size, win_size)), w(im2.astype(np.float64), (win_size, win_size))
    cov_norm = win_size ** 2 / (win_size ** 2 - 1)
    ux, uy = a.mean(axis=(-1, -2)), b.mean(axis=(-1, -2))
    vx = cov_norm * ((a ** 2).mean(axis=(-1, -2)) - ux ** 2)
    vy = cov_norm * ((b ** 2).mean(axis=(-1, -2)) - uy ** 2)
    vxy = cov_norm * ((a * b).mean(axis=(-1, -2)) - ux * uy)
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux ** 2 + uy ** 2 + c1) * (vx + vy + c2))
    return s[win_size // 2:-(win_size // 2) or None, win_size // 2:-(win_size // 2) or None].mean()

def evaluate(test_data_names, srgan_checkpoint="./checkpoint_srgan.pth.tar"):
    srgan_generator = torch.load(srgan_checkpoint, weights_only=False)['generator'].to(device)
    srgan_generator.eval()
    model = srgan_generator
    for test_data_name in test_data_names:
        print("\nFor %s:\n" % test_data_name)
        test_dataset = SRDataset(data_folder, split='test', crop_size=0, scaling_factor=4, lr_img_type='imagenet-norm',
                                 hr_img_type='[-1, 1]', test_data_name=test_data_name)
        test_loader = torch.utils.data.DataLoader(test_dataset, batch_size=1, shuffle=False, num_workers=workers,
                                                  pin_memory=True)
        PSNRs = AverageMeter()
        SSIMs = AverageMeter()
        with torch.no_grad():
            for i, (lr_imgs, hr_imgs) in enumerate(test_loader):
                lr_imgs = lr_imgs.to(device)  # (batch_size (1), 3, w / 4, h / 4), imagenet-normed
                hr_imgs = hr_imgs.to(device)  # (batch_size (1), 3, w, h), in [-1, 1]
                sr_imgs = model(lr_imgs)  # (1, 3, w, h), in [-1, 1]
                sr_imgs_y = convert_image(sr_imgs, source='[-1, 1]', target='y-channel').squeeze(
                    0)  # (w, h), in y-channel
                hr_imgs_y = convert_image(hr_imgs, source='[-1, 1]', target='y-channel').squeeze(0)  # (w, h), in y-channel
                psnr = peak_signal_noise_ratio(hr_imgs_y.cpu().numpy(), sr_imgs_y.cpu().numpy(),
                                               data_range=255.)
                ssim = structural_similarity(hr_imgs_y.cpu().numpy(), sr_imgs_y.cpu().numpy(),
                                             data_range=255.)
                PSNRs.update(psnr, lr_imgs.size(0))
                SSIMs.update(ssim, lr_imgs.size(0))
        print('PSNR - {psnrs.avg:.3f}'.format(psnrs=PSNRs))
        print('SSIM - {ssims.avg:.3f}'.format(ssims=SSIMs))
    return PSNRs.avg, SSIMs.avg

def visualize_sr(img, srgan_checkpoint="./checkpoint_srgan.pth.tar", srresnet_checkpoint="./checkpoint_srresnet.pth.tar"):
    srresnet = torch.load(srresnet_checkpoint, weights_only=False)['model'].to(device)
    srresnet.eval()
    srgan_generator = torch.load(srgan_checkpoint, weights_only=False)['generator'].to(device)
    srgan_generator.eval()
    hr_img = np.load(img)
    lr_img = resize(hr_img, int(hr_img.shape[1] / 4), int(hr_img.shape[0] / 4))
    sr_img_srresnet = srresnet(convert_image(lr_img, source='pil', target='imagenet-norm').unsqueeze(0).to(device))
    sr_img_srresnet = sr_img_srresnet.squeeze(0).cpu().detach()
    sr_img_srresnet = convert_image(sr_img_srresnet, source='[-1, 1]', target='pil')
    sr_img_srgan = srgan_generator(convert_image(lr_img, source='pil', target='imagenet-norm').unsqueeze(0).to(device))
    sr_img_srgan = sr_img_srgan.squeeze(0).cpu().detach()
    sr_img_srgan = convert_image(sr_img_srgan, source='[-1, 1]', target='pil')
    return [peak_signal_noise_ratio(hr_img, x, data_range=255.) for x in (sr_img_srresnet, sr_img_srgan)]

def make_images(folder, n, size, rng):
    os.makedirs(folder, exist_ok=True)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    for k in range(n):
        img = np.zeros((size, size, 3), np.float32)
        for _ in range(4):
            cy, cx, s = rng.uniform(0, size), rng.uniform(0, size), rng.uniform(3, 10)
            img += rng.uniform(0.2, 1.0, 3) * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * s * s))[..., None]
        img += 0.2 * (1 + np.sin(xx * rng.uniform(0.2, 0.8) + rng.uniform(0, 6)))[..., None] * rng.uniform(0, 1, 3)
        np.save(os.path.join(folder, '%03d.npy' % k), (255 * np.clip(img / img.max(), 0, 1)).astype(np.uint8))

if __name__ == '__main__':
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    workdir, startdir = tempfile.mkdtemp(), os.getcwd()
    os.chdir(workdir)
    try:
        rng = np.random.RandomState(0)
        make_images('sr data/train2014', 32, 48, rng)
        make_images('sr data/Set5', 5, 40, rng)
        make_images('sr data/Set14', 6, 44, rng)
        create_data_lists(train_folders=['sr data/train2014'], test_folders=['sr data/Set5', 'sr data/Set14'],
                          min_size=32, output_folder='./')
        srresnet_loss = main_srresnet()
        content_loss, disc_loss = main()
        checkpoint, iterations = 'checkpoint_srgan.pth.tar', 12
        content_loss, disc_loss = main()
        psnr, ssim = evaluate(["Set5", "Set14"])
        psnr_srresnet, psnr_srgan = visualize_sr('sr data/Set14/000.npy')
        print('super_resolve PSNR: SRResNet %.3f, SRGAN %.3f' % (psnr_srresnet, psnr_srgan))
    finally:
        os.chdir(startdir)
        shutil.rmtree(workdir)
    print('done srresnet_loss=%.4f content_loss=%.6f disc_loss=%.4f psnr=%.3f ssim=%.3f' % (
        srresnet_loss, content_loss, disc_loss, psnr, ssim))
