"""Trains U-Net and Attention U-Net for binary skin-lesion segmentation (ISIC 2018 style: an RGB image and a 0/1
ground-truth mask) with a `Solver` class: random-search hyper-parameters drawn in `main` (learning rate, augmentation
probability, epochs, linear learning-rate decay over the last part of training), BCE loss on the flattened sigmoid
output, per-epoch training and validation metrics (accuracy, sensitivity, specificity, precision, F1, Jaccard, Dice),
the best model's state dict saved by Jaccard+Dice, then a rebuilt model loaded from that file and scored once more,
with one CSV row appended per run; calling `train` again finds the saved file and just loads it.

Modeled on: LeeJunHyun/Image_Segmentation, main.py, solver.py, network.py, evaluation.py and data_loader.py
(https://github.com/LeeJunHyun/Image_Segmentation/blob/5e9da9395c52b119d55dfc6532c34ac0e88f446e/solver.py,
https://github.com/LeeJunHyun/Image_Segmentation/blob/5e9da9395c52b119d55dfc6532c34ac0e88f446e/main.py,
https://github.com/LeeJunHyun/Image_Segmentation/blob/5e9da9395c52b119d55dfc6532c34ac0e88f446e/network.py,
https://github.com/LeeJunHyun/Image_Segmentation/blob/5e9da9395c52b119d55dfc6532c34ac0e88f446e/evaluation.py).

Kept: `cudnn.benchmark = True` in `main`; the device kept on the solver, `self.device = torch.device('cuda' if
torch.cuda.is_available() else 'cpu')` (the `--cuda_idx` option is parsed and never used, as in the original);
`build_model` creating the network, then Adam over `list(self.unet.parameters())`, then `self.unet.to(self.device)`
(optimizer before the move); `reset_grad` via `self.unet.zero_grad()`; the training loop with `self.unet.train(True)`,
`images = images.to(self.device)` and `GT = GT.to(self.device)`, `F.sigmoid`, `.view(size(0), -1)` flattening,
`loss.item()` per batch, and the evaluation functions taking the device tensors SR and GT and returning Python floats
(`float(torch.sum(...))`); the learning-rate decay rewriting `param_group['lr']`; validation with
`self.unet.train(False)` and `self.unet.eval()` and no `torch.no_grad()`; `torch.save(self.unet.state_dict(), path)`
of the best (device) weights and `self.unet.load_state_dict(torch.load(unet_path))` without `map_location`, both in
the "already trained" branch and after `del self.unet` and a fresh `build_model()` (which moves the new network to
the device again) for the final scoring, which reads `self.valid_loader` (as the original does; the test loader is
built and never used); the CSV row of Python floats.

Changed for a current PyTorch: comparisons returned uint8 tensors in the PyTorch this was written for and return bool
now, on which `(SR==1)+(GT==1)==2` is always False, so evaluation.py adds `.byte()` to the two thresholdings and to
each comparison it adds up, keeping the author's arithmetic (without it every score but accuracy is 0, no model is
saved and the final load fails).
Changed to run here: the ISIC images read with PIL and torchvision transforms are replaced by a synthetic dataset of
32x32 images with one darker elliptical lesion and its mask, whose augmentation (quarter-turn rotation,
horizontal/vertical flips, brightness jitter, with the drawn probability) and (0.5, 0.5) normalisation are done with
torch; `num_workers=0`; `config` is built with `parse_args([])` and `main` is called for U_Net and AttU_Net with
Python's `random` and torch seeded; `main` prints the drawn settings instead of the whole config, calls
`solver.train()` a second time (which takes the load branch) and returns the test score; the final scoring prints
one `[Test]` line (the original only writes the CSV row); the loaded file is named without its folder; R2U_Net and
R2AttU_Net, `init_weights` (never called by the solver), and the solver's unused helpers (`print_network`,
`to_data`, `update_lr`, `compute_accuracy`, `tensor2img`) are left out.
Shrunk: channel widths 8/16/32/64/128 instead of 64..1024; 32x32 images; 16 training, 8 validation and 8 test
images; batch 1 (the original default); the random search draws 2 or 3 epochs (instead of 100-250) and a learning
rate from 10 times the original range.
"""
import argparse
import csv
import os
import random
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.backends import cudnn
from torch.utils import data


# ----------------------------------------------------------------------------- network.py

WIDTHS = (8, 16, 32, 64, 128)  # 64, 128, 256, 512, 1024 in the original


class conv_block(nn.Module):
    def __init__(self, ch_in, ch_out):
        super(conv_block, self).__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(ch_in, ch_out, kernel_size=3, stride=1, padding=1, bias=True),
            nn.BatchNorm2d(ch_out),
            nn.ReLU(inplace=True),
            nn.Conv2d(ch_out, ch_out, kernel_size=3, stride=1, padding=1, bias=True),
            nn.BatchNorm2d(ch_out),
            nn.ReLU(inplace=True)
        )

    def forward(self, x):
        x = self.conv(x)
        return x


class up_conv(nn.Module):
    def __init__(self, ch_in, ch_out):
        super(up_conv, self).__init__()
        self.up = nn.Sequential(
            nn.Upsample(scale_factor=2),
            nn.Conv2d(ch_in, ch_out, kernel_size=3, stride=1, padding=1, bias=True),
            nn.BatchNorm2d(ch_out),
            nn.ReLU(inplace=True)
        )

    def forward(self, x):
        x = self.up(x)
        return x


class Attention_block(nn.Module):
    def __init__(self, F_g, F_l, F_int):
        super(Attention_block, self).__init__()
        self.W_g = nn.Sequential(
            nn.Conv2d(F_g, F_int, kernel_size=1, stride=1, padding=0, bias=True),
            nn.BatchNorm2d(F_int)
        )

        self.W_x = nn.Sequential(
            nn.Conv2d(F_l, F_int, kernel_size=1, stride=1, padding=0, bias=True),
            nn.BatchNorm2d(F_int)
        )

        self.psi = nn.Sequential(
            nn.Conv2d(F_int, 1, kernel_size=1, stride=1, padding=0, bias=True),
            nn.BatchNorm2d(1),
            nn.Sigmoid()
        )

        self.relu = nn.ReLU(inplace=True)

    def forward(self, g, x):
        g1 = self.W_g(g)
        x1 = self.W_x(x)
        psi = self.relu(g1 + x1)
        psi = self.psi(psi)

        return x * psi


class U_Net(nn.Module):
    def __init__(self, img_ch=3, output_ch=1):
        super(U_Net, self).__init__()
        c1, c2, c3, c4, c5 = WIDTHS

        self.Maxpool = nn.MaxPool2d(kernel_size=2, stride=2)

        self.Conv1 = conv_block(ch_in=img_ch, ch_out=c1)
        self.Conv2 = conv_block(ch_in=c1, ch_out=c2)
        self.Conv3 = conv_block(ch_in=c2, ch_out=c3)
        self.Conv4 = conv_block(ch_in=c3, ch_out=c4)
        self.Conv5 = conv_block(ch_in=c4, ch_out=c5)

        self.Up5 = up_conv(ch_in=c5, ch_out=c4)
        self.Up_conv5 = conv_block(ch_in=c5, ch_out=c4)

        self.Up4 = up_conv(ch_in=c4, ch_out=c3)
        self.Up_conv4 = conv_block(ch_in=c4, ch_out=c3)

        self.Up3 = up_conv(ch_in=c3, ch_out=c2)
        self.Up_conv3 = conv_block(ch_in=c3, ch_out=c2)

        self.Up2 = up_conv(ch_in=c2, ch_out=c1)
        self.Up_conv2 = conv_block(ch_in=c2, ch_out=c1)

        self.Conv_1x1 = nn.Conv2d(c1, output_ch, kernel_size=1, stride=1, padding=0)

    def forward(self, x):
        # encoding path
        x1 = self.Conv1(x)

        x2 = self.Maxpool(x1)
        x2 = self.Conv2(x2)

        x3 = self.Maxpool(x2)
        x3 = self.Conv3(x3)

        x4 = self.Maxpool(x3)
        x4 = self.Conv4(x4)

        x5 = self.Maxpool(x4)
        x5 = self.Conv5(x5)

        # decoding + concat path
        d5 = self.Up5(x5)
        d5 = torch.cat((x4, d5), dim=1)
        d5 = self.Up_conv5(d5)

        d4 = self.Up4(d5)
        d4 = torch.cat((x3, d4), dim=1)
        d4 = self.Up_conv4(d4)

        d3 = self.Up3(d4)
        d3 = torch.cat((x2, d3), dim=1)
        d3 = self.Up_conv3(d3)

        d2 = self.Up2(d3)
        d2 = torch.cat((x1, d2), dim=1)
        d2 = self.Up_conv2(d2)

        d1 = self.Conv_1x1(d2)

        return d1


class AttU_Net(nn.Module):
    def __init__(self, img_ch=3, output_ch=1):
        super(AttU_Net, self).__init__()
        c1, c2, c3, c4, c5 = WIDTHS

        self.Maxpool = nn.MaxPool2d(kernel_size=2, stride=2)

        self.Conv1 = conv_block(ch_in=img_ch, ch_out=c1)
        self.Conv2 = conv_block(ch_in=c1, ch_out=c2)
        self.Conv3 = conv_block(ch_in=c2, ch_out=c3)
        self.Conv4 = conv_block(ch_in=c3, ch_out=c4)
        self.Conv5 = conv_block(ch_in=c4, ch_out=c5)

        self.Up5 = up_conv(ch_in=c5, ch_out=c4)
        self.Att5 = Attention_block(F_g=c4, F_l=c4, F_int=c3)
        self.Up_conv5 = conv_block(ch_in=c5, ch_out=c4)

        self.Up4 = up_conv(ch_in=c4, ch_out=c3)
        self.Att4 = Attention_block(F_g=c3, F_l=c3, F_int=c2)
        self.Up_conv4 = conv_block(ch_in=c4, ch_out=c3)

        self.Up3 = up_conv(ch_in=c3, ch_out=c2)
        self.Att3 = Attention_block(F_g=c2, F_l=c2, F_int=c1)
        self.Up_conv3 = conv_block(ch_in=c3, ch_out=c2)

        self.Up2 = up_conv(ch_in=c2, ch_out=c1)
        self.Att2 = Attention_block(F_g=c1, F_l=c1, F_int=c1 // 2)
        self.Up_conv2 = conv_block(ch_in=c2, ch_out=c1)

        self.Conv_1x1 = nn.Conv2d(c1, output_ch, kernel_size=1, stride=1, padding=0)

    def forward(self, x):
        # encoding path
        x1 = self.Conv1(x)

        x2 = self.Maxpool(x1)
        x2 = self.Conv2(x2)

        x3 = self.Maxpool(x2)
        x3 = self.Conv3(x3)

        x4 = self.Maxpool(x3)
        x4 = self.Conv4(x4)

        x5 = self.Maxpool(x4)
        x5 = self.Conv5(x5)

        # decoding + concat path
        d5 = self.Up5(x5)
        x4 = self.Att5(g=d5, x=x4)
        d5 = torch.cat((x4, d5), dim=1)
        d5 = self.Up_conv5(d5)

        d4 = self.Up4(d5)
        x3 = self.Att4(g=d4, x=x3)
        d4 = torch.cat((x3, d4), dim=1)
        d4 = self.Up_conv4(d4)

        d3 = self.Up3(d4)
        x2 = self.Att3(g=d3, x=x2)
        d3 = torch.cat((x2, d3), dim=1)
        d3 = self.Up_conv3(d3)

        d2 = self.Up2(d3)
        x1 = self.Att2(g=d2, x=x1)
        d2 = torch.cat((x1, d2), dim=1)
        d2 = self.Up_conv2(d2)

        d1 = self.Conv_1x1(d2)

        return d1


# ----------------------------------------------------------------------------- evaluation.py
# SR : Segmentation Result
# GT : Ground Truth

def get_accuracy(SR, GT, threshold=0.5):
    SR = (SR > threshold).byte()
    GT = (GT == torch.max(GT)).byte()
    corr = torch.sum(SR == GT)
    tensor_size = SR.size(0) * SR.size(1) * SR.size(2) * SR.size(3)
    acc = float(corr) / float(tensor_size)

    return acc


def get_sensitivity(SR, GT, threshold=0.5):
    # Sensitivity == Recall
    SR = (SR > threshold).byte()
    GT = (GT == torch.max(GT)).byte()

    # TP : True Positive
    # FN : False Negative
    TP = ((SR == 1).byte() + (GT == 1).byte()) == 2
    FN = ((SR == 0).byte() + (GT == 1).byte()) == 2

    SE = float(torch.sum(TP)) / (float(torch.sum(TP + FN)) + 1e-6)

    return SE


def get_specificity(SR, GT, threshold=0.5):
    SR = (SR > threshold).byte()
    GT = (GT == torch.max(GT)).byte()

    # TN : True Negative
    # FP : False Positive
    TN = ((SR == 0).byte() + (GT == 0).byte()) == 2
    FP = ((SR == 1).byte() + (GT == 0).byte()) == 2

    SP = float(torch.sum(TN)) / (float(torch.sum(TN + FP)) + 1e-6)

    return SP


def get_precision(SR, GT, threshold=0.5):
    SR = (SR > threshold).byte()
    GT = (GT == torch.max(GT)).byte()

    # TP : True Positive
    # FP : False Positive
    TP = ((SR == 1).byte() + (GT == 1).byte()) == 2
    FP = ((SR == 1).byte() + (GT == 0).byte()) == 2

    PC = float(torch.sum(TP)) / (float(torch.sum(TP + FP)) + 1e-6)

    return PC


def get_F1(SR, GT, threshold=0.5):
    # Sensitivity == Recall
    SE = get_sensitivity(SR, GT, threshold=threshold)
    PC = get_precision(SR, GT, threshold=threshold)

    F1 = 2 * SE * PC / (SE + PC + 1e-6)

    return F1


def get_JS(SR, GT, threshold=0.5):
    # JS : Jaccard similarity
    SR = (SR > threshold).byte()
    GT = (GT == torch.max(GT)).byte()

    Inter = torch.sum((SR + GT) == 2)
    Union = torch.sum((SR + GT) >= 1)

    JS = float(Inter) / (float(Union) + 1e-6)

    return JS


def get_DC(SR, GT, threshold=0.5):
    # DC : Dice Coefficient
    SR = (SR > threshold).byte()
    GT = (GT == torch.max(GT)).byte()

    Inter = torch.sum((SR + GT) == 2)
    DC = float(2 * Inter) / (float(torch.sum(SR) + torch.sum(GT)) + 1e-6)

    return DC


# ----------------------------------------------------------------------------- data_loader.py

class ImageFolder(data.Dataset):
    """Synthetic lesion images and masks standing in for the ISIC image folders."""

    def __init__(self, root, image_size=32, mode='train', augmentation_prob=0.4, count=32):
        self.root = root
        self.image_size = image_size
        self.mode = mode
        self.RotationDegree = [0, 90, 180, 270]
        self.augmentation_prob = augmentation_prob
        seed = {'train': 1, 'valid': 2, 'test': 3}[mode]
        rng = np.random.RandomState(seed)
        yy, xx = np.mgrid[0:image_size, 0:image_size].astype(np.float32)
        self.images, self.GTs = [], []
        for _ in range(count):
            cy, cx = rng.uniform(9, image_size - 9, size=2)
            ry, rx = rng.uniform(4, 8, size=2)
            mask = (((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1.0).astype(np.float32)
            skin = rng.uniform(0.6, 0.85, size=3).astype(np.float32)
            lesion = skin * rng.uniform(0.35, 0.6)
            img = skin[:, None, None] * (1 - mask) + lesion[:, None, None] * mask
            img = img + rng.randn(3, image_size, image_size).astype(np.float32) * 0.06
            self.images.append(np.clip(img, 0, 1))
            self.GTs.append(mask[None])
        print("image count in {} path :{}".format(self.mode, len(self.images)))

    def __getitem__(self, index):
        """Reads an image and preprocesses it and returns."""
        image = torch.from_numpy(self.images[index].copy())
        GT = torch.from_numpy(self.GTs[index].copy())

        p_transform = random.random()

        if (self.mode == 'train') and p_transform <= self.augmentation_prob:
            RotationDegree = random.randint(0, 3)
            image = torch.rot90(image, RotationDegree, dims=(1, 2))
            GT = torch.rot90(GT, RotationDegree, dims=(1, 2))

            if random.random() < 0.5:
                image = image.flip(2)
                GT = GT.flip(2)

            if random.random() < 0.5:
                image = image.flip(1)
                GT = GT.flip(1)

            image = (image * random.uniform(0.8, 1.2)).clamp(0, 1)  # ColorJitter(brightness=0.2)

        image = (image - 0.5) / 0.5  # Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))

        return image, GT

    def __len__(self):
        """Returns the total number of images."""
        return len(self.images)


def get_loader(image_path, image_size, batch_size, num_workers=2, mode='train', augmentation_prob=0.4):
    """Builds and returns Dataloader."""

    count = 16 if mode == 'train' else 8
    dataset = ImageFolder(root=image_path, image_size=image_size, mode=mode,
                          augmentation_prob=augmentation_prob, count=count)
    data_loader = data.DataLoader(dataset=dataset,
                                  batch_size=batch_size,
                                  shuffle=True,
                                  num_workers=num_workers)
    return data_loader


# ----------------------------------------------------------------------------- solver.py

class Solver(object):
    def __init__(self, config, train_loader, valid_loader, test_loader):

        # Data loader
        self.train_loader = train_loader
        self.valid_loader = valid_loader
        self.test_loader = test_loader

        # Models
        self.unet = None
        self.optimizer = None
        self.img_ch = config.img_ch
        self.output_ch = config.output_ch
        self.criterion = torch.nn.BCELoss()
        self.augmentation_prob = config.augmentation_prob

        # Hyper-parameters
        self.lr = config.lr
        self.beta1 = config.beta1
        self.beta2 = config.beta2

        # Training settings
        self.num_epochs = config.num_epochs
        self.num_epochs_decay = config.num_epochs_decay
        self.batch_size = config.batch_size

        # Step size
        self.log_step = config.log_step
        self.val_step = config.val_step

        # Path
        self.model_path = config.model_path
        self.result_path = config.result_path
        self.mode = config.mode

        self.device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
        self.model_type = config.model_type
        self.t = config.t
        self.build_model()

    def build_model(self):
        """Build generator and discriminator."""
        if self.model_type == 'U_Net':
            self.unet = U_Net(img_ch=3, output_ch=1)
        elif self.model_type == 'AttU_Net':
            self.unet = AttU_Net(img_ch=3, output_ch=1)

        self.optimizer = optim.Adam(list(self.unet.parameters()),
                                    self.lr, [self.beta1, self.beta2])
        self.unet.to(self.device)

    def reset_grad(self):
        """Zero the gradient buffers."""
        self.unet.zero_grad()

    def train(self):
        """Train encoder, generator and discriminator."""

        # ====================================== Training =========================================== #

        unet_path = os.path.join(self.model_path, '%s-%d-%.4f-%d-%.4f.pkl' % (
            self.model_type, self.num_epochs, self.lr, self.num_epochs_decay, self.augmentation_prob))

        # U-Net Train
        if os.path.isfile(unet_path):
            # Load the pretrained Encoder
            self.unet.load_state_dict(torch.load(unet_path))
            print('%s is Successfully Loaded from %s' % (self.model_type, os.path.basename(unet_path)))
            return None
        else:
            # Train for Encoder
            lr = self.lr
            best_unet_score = 0.

            for epoch in range(self.num_epochs):

                self.unet.train(True)
                epoch_loss = 0

                acc = 0.  # Accuracy
                SE = 0.  # Sensitivity (Recall)
                SP = 0.  # Specificity
                PC = 0.  # Precision
                F1 = 0.  # F1 Score
                JS = 0.  # Jaccard Similarity
                DC = 0.  # Dice Coefficient
                length = 0

                for i, (images, GT) in enumerate(self.train_loader):
                    # GT : Ground Truth

                    images = images.to(self.device)
                    GT = GT.to(self.device)

                    # SR : Segmentation Result
                    SR = self.unet(images)
                    SR_probs = F.sigmoid(SR)
                    SR_flat = SR_probs.view(SR_probs.size(0), -1)

                    GT_flat = GT.view(GT.size(0), -1)
                    loss = self.criterion(SR_flat, GT_flat)
                    epoch_loss += loss.item()

                    # Backprop + optimize
                    self.reset_grad()
                    loss.backward()
                    self.optimizer.step()

                    acc += get_accuracy(SR, GT)
                    SE += get_sensitivity(SR, GT)
                    SP += get_specificity(SR, GT)
                    PC += get_precision(SR, GT)
                    F1 += get_F1(SR, GT)
                    JS += get_JS(SR, GT)
                    DC += get_DC(SR, GT)
                    length += images.size(0)

                acc = acc / length
                SE = SE / length
                SP = SP / length
                PC = PC / length
                F1 = F1 / length
                JS = JS / length
                DC = DC / length

                # Print the log info
                print('Epoch [%d/%d], Loss: %.4f, \n[Training] Acc: %.4f, SE: %.4f, SP: %.4f, PC: %.4f, F1: %.4f, '
                      'JS: %.4f, DC: %.4f' % (epoch + 1, self.num_epochs, epoch_loss, acc, SE, SP, PC, F1, JS, DC))

                # Decay learning rate
                if (epoch + 1) > (self.num_epochs - self.num_epochs_decay):
                    lr -= (self.lr / float(self.num_epochs_decay))
                    for param_group in self.optimizer.param_groups:
                        param_group['lr'] = lr
                    print('Decay learning rate to lr: {:.6f}.'.format(lr))

                # ===================================== Validation ==================================== #
                self.unet.train(False)
                self.unet.eval()

                acc = 0.  # Accuracy
                SE = 0.  # Sensitivity (Recall)
                SP = 0.  # Specificity
                PC = 0.  # Precision
                F1 = 0.  # F1 Score
                JS = 0.  # Jaccard Similarity
                DC = 0.  # Dice Coefficient
                length = 0
                for i, (images, GT) in enumerate(self.valid_loader):

                    images = images.to(self.device)
                    GT = GT.to(self.device)
                    SR = F.sigmoid(self.unet(images))
                    acc += get_accuracy(SR, GT)
                    SE += get_sensitivity(SR, GT)
                    SP += get_specificity(SR, GT)
                    PC += get_precision(SR, GT)
                    F1 += get_F1(SR, GT)
                    JS += get_JS(SR, GT)
                    DC += get_DC(SR, GT)

                    length += images.size(0)

                acc = acc / length
                SE = SE / length
                SP = SP / length
                PC = PC / length
                F1 = F1 / length
                JS = JS / length
                DC = DC / length
                unet_score = JS + DC

                print('[Validation] Acc: %.4f, SE: %.4f, SP: %.4f, PC: %.4f, F1: %.4f, JS: %.4f, DC: %.4f' % (
                    acc, SE, SP, PC, F1, JS, DC))

                # Save Best U-Net model
                if unet_score > best_unet_score:
                    best_unet_score = unet_score
                    best_epoch = epoch
                    best_unet = self.unet.state_dict()
                    print('Best %s model score : %.4f' % (self.model_type, best_unet_score))
                    torch.save(best_unet, unet_path)

            # ===================================== Test ==================================== #
            del self.unet
            del best_unet
            self.build_model()
            self.unet.load_state_dict(torch.load(unet_path))

            self.unet.train(False)
            self.unet.eval()

            acc = 0.  # Accuracy
            SE = 0.  # Sensitivity (Recall)
            SP = 0.  # Specificity
            PC = 0.  # Precision
            F1 = 0.  # F1 Score
            JS = 0.  # Jaccard Similarity
            DC = 0.  # Dice Coefficient
            length = 0
            for i, (images, GT) in enumerate(self.valid_loader):

                images = images.to(self.device)
                GT = GT.to(self.device)
                SR = F.sigmoid(self.unet(images))
                acc += get_accuracy(SR, GT)
                SE += get_sensitivity(SR, GT)
                SP += get_specificity(SR, GT)
                PC += get_precision(SR, GT)
                F1 += get_F1(SR, GT)
                JS += get_JS(SR, GT)
                DC += get_DC(SR, GT)

                length += images.size(0)

            acc = acc / length
            SE = SE / length
            SP = SP / length
            PC = PC / length
            F1 = F1 / length
            JS = JS / length
            DC = DC / length
            unet_score = JS + DC
            print('[Test] Acc: %.4f, JS: %.4f, DC: %.4f, best epoch %d' % (acc, JS, DC, best_epoch + 1))

            f = open(os.path.join(self.result_path, 'result.csv'), 'a', encoding='utf-8', newline='')
            wr = csv.writer(f)
            wr.writerow([self.model_type, acc, SE, SP, PC, F1, JS, DC, self.lr, best_epoch, self.num_epochs,
                         self.num_epochs_decay, self.augmentation_prob])
            f.close()
            return unet_score


# ----------------------------------------------------------------------------- main.py

def main(config):
    cudnn.benchmark = True
    if config.model_type not in ['U_Net', 'R2U_Net', 'AttU_Net', 'R2AttU_Net']:
        print('ERROR!! model_type should be selected in U_Net/R2U_Net/AttU_Net/R2AttU_Net')
        print('Your input for model_type was %s' % config.model_type)
        return

    # Create directories if not exist
    if not os.path.exists(config.model_path):
        os.makedirs(config.model_path)
    if not os.path.exists(config.result_path):
        os.makedirs(config.result_path)
    config.result_path = os.path.join(config.result_path, config.model_type)
    if not os.path.exists(config.result_path):
        os.makedirs(config.result_path)

    lr = random.random() * 0.005 + 0.0000005
    augmentation_prob = random.random() * 0.7
    epoch = random.choice([2, 3])
    decay_ratio = random.random() * 0.8
    decay_epoch = int(epoch * decay_ratio)

    config.augmentation_prob = augmentation_prob
    config.num_epochs = epoch
    config.lr = lr
    config.num_epochs_decay = decay_epoch

    print('model_type=%s lr=%.6f augmentation_prob=%.4f num_epochs=%d num_epochs_decay=%d' % (
        config.model_type, config.lr, config.augmentation_prob, config.num_epochs, config.num_epochs_decay))

    train_loader = get_loader(image_path=config.train_path,
                              image_size=config.image_size,
                              batch_size=config.batch_size,
                              num_workers=config.num_workers,
                              mode='train',
                              augmentation_prob=config.augmentation_prob)
    valid_loader = get_loader(image_path=config.valid_path,
                              image_size=config.image_size,
                              batch_size=config.batch_size,
                              num_workers=config.num_workers,
                              mode='valid',
                              augmentation_prob=0.)
    test_loader = get_loader(image_path=config.test_path,
                             image_size=config.image_size,
                             batch_size=config.batch_size,
                             num_workers=config.num_workers,
                             mode='test',
                             augmentation_prob=0.)

    solver = Solver(config, train_loader, valid_loader, test_loader)

    # Train and sample the images
    score = None
    if config.mode == 'train':
        score = solver.train()
        solver.train()  # the weights file exists now: this run only loads it
    return score


def get_config(argv):
    parser = argparse.ArgumentParser()

    # model hyper-parameters
    parser.add_argument('--image_size', type=int, default=32)
    parser.add_argument('--t', type=int, default=3, help='t for Recurrent step of R2U_Net or R2AttU_Net')

    # training hyper-parameters
    parser.add_argument('--img_ch', type=int, default=3)
    parser.add_argument('--output_ch', type=int, default=1)
    parser.add_argument('--num_epochs', type=int, default=100)
    parser.add_argument('--num_epochs_decay', type=int, default=70)
    parser.add_argument('--batch_size', type=int, default=1)
    parser.add_argument('--num_workers', type=int, default=0)
    parser.add_argument('--lr', type=float, default=0.0002)
    parser.add_argument('--beta1', type=float, default=0.5)  # momentum1 in Adam
    parser.add_argument('--beta2', type=float, default=0.999)  # momentum2 in Adam
    parser.add_argument('--augmentation_prob', type=float, default=0.4)

    parser.add_argument('--log_step', type=int, default=2)
    parser.add_argument('--val_step', type=int, default=2)

    # misc
    parser.add_argument('--mode', type=str, default='train')
    parser.add_argument('--model_type', type=str, default='U_Net', help='U_Net/R2U_Net/AttU_Net/R2AttU_Net')
    parser.add_argument('--model_path', type=str, default='./models')
    parser.add_argument('--train_path', type=str, default='./dataset/train/')
    parser.add_argument('--valid_path', type=str, default='./dataset/valid/')
    parser.add_argument('--test_path', type=str, default='./dataset/test/')
    parser.add_argument('--result_path', type=str, default='./result/')

    parser.add_argument('--cuda_idx', type=int, default=1)

    return parser.parse_args(argv)


if __name__ == '__main__':
    os.chdir(tempfile.mkdtemp())
    random.seed(4)
    torch.manual_seed(4)
    unet_score = main(get_config(['--model_type', 'U_Net']))
    att_score = main(get_config(['--model_type', 'AttU_Net']))
    print('done unet_score=%.4f attunet_score=%.4f' % (unet_score, att_score))
