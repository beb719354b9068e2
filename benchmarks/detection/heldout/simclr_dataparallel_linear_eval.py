"""Pre-trains SimCLR (a ResNet-18 encoder with its fc replaced by an identity, a two-layer projection head, the NT-Xent
loss over two augmented views) on a CIFAR-10-style image set with main.py, wrapped in ``DataParallel`` as with
``dataparallel: 1`` in config.yaml, then trains a logistic-regression probe on frozen features with
linear_evaluation.py. Both scripts set ``args.device = torch.device("cuda:0" if torch.cuda.is_available() else
"cpu")`` (``"cuda"`` in linear_evaluation.py); main.py moves the model with ``model.to(args.device)`` before and after
wrapping it, but its `train` moves the two views with ``x_i.cuda(non_blocking=True)``; `NT_Xent` builds its boolean
negative mask on the CPU in ``__init__`` (the loss module is never moved) and indexes the device similarity matrix
with it, then puts the zero labels on ``positive_samples.device``; `save_model` saves ``model.module.state_dict()``
when the model is a DataParallel. linear_evaluation.py loads that checkpoint with ``torch.load(model_fp,
map_location=args.device.type)`` into a fresh SimCLR, moves it, extracts features in `inference(loader, simclr_model,
device)` (``x.to(device)``, ``h.cpu().detach().numpy()``), rebuilds CPU loaders from the numpy arrays and trains and
tests the probe with batches moved by ``x.to(args.device)``.

Modeled on: Spijkervet/SimCLR, main.py, linear_evaluation.py, model.py, config/config.yaml,
utils/yaml_config_hook.py, simclr/simclr.py, simclr/modules/nt_xent.py, simclr/modules/gather.py,
simclr/modules/identity.py, simclr/modules/logistic_regression.py, simclr/modules/resnet.py and
simclr/modules/transformations/simclr.py at commit 2738efae85b3ca1b70b7919c5d7a7837d9d75235
(https://github.com/Spijkervet/SimCLR).

Kept: both scripts' ``__main__`` setup (the parser built from the YAML config, the device, ``args.num_gpus``,
``args.world_size``, `main(0, args)` for one node) and their functions (`train`, `main`; `inference`, `get_features`,
`create_data_loaders_from_arrays`, `train`, `test`); `load_optimizer` (Adam branch), `save_model`,
`yaml_config_hook`, `SimCLR`, `Identity`, `NT_Xent` with `mask_correlated_samples`, `GatherLayer`,
`LogisticRegression`, `TransformsSimCLR`'s two views, `get_resnet`.
Changed to run here: CIFAR-10 is a synthetic set of 32x32 images of 10 classes (oriented colour gradients with noise)
and config.yaml is written to a temporary folder with the shrunk values; no torchvision here, so `get_resnet` builds a
torchvision-style ResNet-18 defined below and `TransformsSimCLR` does random resized crop, flip, colour jitter and
grayscale on tensors; ``x_i.cuda(non_blocking=True)`` is only called when CUDA is available (the author's `train`
needs a GPU); `convert_model` (Synchronized-BatchNorm) is an identity stand-in; SummaryWriter keeps the scalars; the
two ``__main__`` bodies are `main_py` and `linear_evaluation_py` taking argument lists; the two scripts'
`train` functions are `train` and `train_probe`; LARS, DDP/`mp.spawn` and the STL10 branch are left out; blank lines
between methods dropped.
Shrunk: ResNet-18 widths 64..512 are 16..128, 24x24 crops, 256 training / 128 test images, batch 32, 2 epochs of
pre-training, logistic batch 64 and 5 probe epochs, projection dim 32, workers 0.
"""
import argparse
import os
import tempfile

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import yaml
from torch.nn.parallel import DataParallel


# ---------------------------------------------------------------- simclr/modules/resnet.py (torchvision.models.resnet18)
class BasicBlock(nn.Module):
    expansion = 1
    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super(BasicBlock, self).__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=1000, width=64):
        super(ResNet, self).__init__()
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, width, layers[0])
        self.layer2 = self._make_layer(block, width * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(block, width * 4, layers[2], stride=2)
        self.layer4 = self._make_layer(block, width * 8, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8 * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)
    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def get_resnet(name, pretrained=False):
    resnets = {
        "resnet18": ResNet(BasicBlock, [2, 2, 2, 2], width=16),  # torchvision.models.resnet18(pretrained=pretrained)
    }
    if name not in resnets.keys():
        raise KeyError(f"{name} is not a valid ResNet version")
    return resnets[name]


# ---------------------------------------------------------------- simclr/modules: identity, simclr, gather, nt_xent, logistic_regression
class Identity(nn.Module):
    def __init__(self):
        super(Identity, self).__init__()
    def forward(self, x):
        return x


class SimCLR(nn.Module):
    """ResNet encoder h_i = f(x_i) with the output after the average pooling layer, and an MLP projection head"""
    def __init__(self, encoder, projection_dim, n_features):
        super(SimCLR, self).__init__()
        self.encoder = encoder
        self.n_features = n_features
        # Replace the fc layer with an Identity function
        self.encoder.fc = Identity()
        # We use a MLP with one hidden layer to obtain z_i = g(h_i) = W(2)σ(W(1)h_i) where σ is a ReLU non-linearity.
        self.projector = nn.Sequential(nn.Linear(self.n_features, self.n_features, bias=False), nn.ReLU(),
                                       nn.Linear(self.n_features, projection_dim, bias=False))
    def forward(self, x_i, x_j):
        h_i = self.encoder(x_i)
        h_j = self.encoder(x_j)
        z_i = self.projector(h_i)
        z_j = self.projector(h_j)
        return h_i, h_j, z_i, z_j


class GatherLayer(torch.autograd.Function):
    """Gather tensors from all process, supporting backward propagation."""
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        output = [torch.zeros_like(input) for _ in range(dist.get_world_size())]
        dist.all_gather(output, input)
        return tuple(output)
    @staticmethod
    def backward(ctx, *grads):
        (input,) = ctx.saved_tensors
        grad_out = torch.zeros_like(input)
        grad_out[:] = grads[dist.get_rank()]
        return grad_out


class NT_Xent(nn.Module):
    def __init__(self, batch_size, temperature, world_size):
        super(NT_Xent, self).__init__()
        self.batch_size = batch_size
        self.temperature = temperature
        self.world_size = world_size
        self.mask = self.mask_correlated_samples(batch_size, world_size)
        self.criterion = nn.CrossEntropyLoss(reduction="sum")
        self.similarity_f = nn.CosineSimilarity(dim=2)
    def mask_correlated_samples(self, batch_size, world_size):
        N = 2 * batch_size * world_size
        mask = torch.ones((N, N), dtype=bool)
        mask = mask.fill_diagonal_(0)
        for i in range(batch_size * world_size):
            mask[i, batch_size * world_size + i] = 0
            mask[batch_size * world_size + i, i] = 0
        return mask
    def forward(self, z_i, z_j):
        """The other 2(N - 1) augmented examples within a minibatch are the negative examples."""
        N = 2 * self.batch_size * self.world_size
        if self.world_size > 1:
            z_i = torch.cat(GatherLayer.apply(z_i), dim=0)
            z_j = torch.cat(GatherLayer.apply(z_j), dim=0)
        z = torch.cat((z_i, z_j), dim=0)
        sim = self.similarity_f(z.unsqueeze(1), z.unsqueeze(0)) / self.temperature
        sim_i_j = torch.diag(sim, self.batch_size * self.world_size)
        sim_j_i = torch.diag(sim, -self.batch_size * self.world_size)
        # We have 2N samples, but with Distributed training every GPU gets N examples too, resulting in: 2xNxN
        positive_samples = torch.cat((sim_i_j, sim_j_i), dim=0).reshape(N, 1)
        negative_samples = sim[self.mask].reshape(N, -1)
        labels = torch.zeros(N).to(positive_samples.device).long()
        logits = torch.cat((positive_samples, negative_samples), dim=1)
        loss = self.criterion(logits, labels)
        loss /= N
        return loss


class LogisticRegression(nn.Module):
    def __init__(self, n_features, n_classes):
        super(LogisticRegression, self).__init__()
        self.model = nn.Linear(n_features, n_classes)
    def forward(self, x):
        return self.model(x)


def convert_model(module):
    """sync_batchnorm.convert_model swaps BatchNorm for SynchronizedBatchNorm (the same on one device)"""
    return module


# ---------------------------------------------------------------- simclr/modules/transformations/simclr.py (tensor versions)
class TransformsSimCLR:
    """A stochastic data augmentation module that transforms any given data example randomly resulting in two
    correlated views of the same example, denoted x_i and x_j, which we consider as a positive pair."""
    def __init__(self, size):
        self.size, s = size, 1
        self.jitter = (0.8 * s, 0.8 * s, 0.8 * s)  # ColorJitter(0.8 s, 0.8 s, 0.8 s, 0.2 s) without the hue
    def train_transform(self, img):
        # RandomResizedCrop(size), RandomHorizontalFlip(), RandomApply([color_jitter], p=0.8), RandomGrayscale(p=0.2)
        _, h, w = img.shape
        scale = float(np.random.uniform(0.3, 1.0))
        ch, cw = max(2, int(h * scale ** 0.5)), max(2, int(w * scale ** 0.5))
        top, left = np.random.randint(0, h - ch + 1), np.random.randint(0, w - cw + 1)
        x = F.interpolate(img[None, :, top:top + ch, left:left + cw], size=(self.size, self.size), mode="bilinear",
                          align_corners=False)[0]
        if np.random.rand() < 0.5:
            x = x.flip(-1)
        if np.random.rand() < 0.8:
            b, c, sat = [1 + np.random.uniform(-j, j) for j in self.jitter]
            x = (x * b).clamp(0, 1)
            x = ((x - x.mean()) * c + x.mean()).clamp(0, 1)
            x = ((x - x.mean(0, keepdim=True)) * sat + x.mean(0, keepdim=True)).clamp(0, 1)
        if np.random.rand() < 0.2:
            x = x.mean(0, keepdim=True).expand(3, -1, -1)
        return x
    def test_transform(self, img):
        # Resize(size=size), ToTensor()
        return F.interpolate(img[None], size=(self.size, self.size), mode="bilinear", align_corners=False)[0]
    def __call__(self, x):
        return self.train_transform(x), self.train_transform(x)


class CIFAR10(torch.utils.data.Dataset):
    """torchvision.datasets.CIFAR10 stand-in: 32x32 images in [0, 1] of 10 classes (a gradient direction and a colour)"""
    def __init__(self, root, train=True, download=False, transform=None, n=None):
        rng = np.random.RandomState(0 if train else 1)
        n = n or (256 if train else 128)
        self.targets = rng.randint(0, 10, n)
        ramp = np.linspace(0, 1, 32, dtype=np.float32)
        self.data = []
        for t in self.targets:
            angle = np.pi * t / 5
            grad = np.cos(angle) * ramp[None, :] + np.sin(angle) * ramp[:, None]
            colour = np.array([(t % 3) / 2, (t % 5) / 4, (t % 2)], np.float32)[:, None, None]
            img = 0.5 * colour + 0.4 * (grad - grad.min()) / (np.ptp(grad) + 1e-6) + 0.1 * rng.rand(3, 32, 32)
            self.data.append(torch.from_numpy(img.astype(np.float32)).clamp(0, 1))
        self.transform = transform
    def __getitem__(self, index):
        img, target = self.data[index], int(self.targets[index])
        if self.transform is not None:
            img = self.transform(img)
        return img, target
    def __len__(self):
        return len(self.data)


# ---------------------------------------------------------------- utils/yaml_config_hook.py, config/config.yaml, model.py
def yaml_config_hook(config_file):
    """Custom YAML config loader, which can include other yaml files"""
    with open(config_file) as f:
        cfg = yaml.safe_load(f)
        for d in cfg.get("defaults", []):
            config_dir, cf = d.popitem()
            cf = os.path.join(os.path.dirname(config_file), config_dir, cf + ".yaml")
            with open(cf) as f:
                l = yaml.safe_load(f)
                cfg.update(l)
    if "defaults" in cfg.keys():
        del cfg["defaults"]
    return cfg


CONFIG_YAML = """# distributed training
nodes: 1
gpus: 1 # I recommend always assigning 1 GPU to 1 node
nr: 0 # machine nr. in node (0 -- nodes - 1)
dataparallel: 1 # Use DataParallel instead of DistributedDataParallel
workers: 0
dataset_dir: "./datasets"
# train options
seed: 42 # sacred handles automatic seeding when passed in the config
batch_size: 32
image_size: 24
start_epoch: 0
epochs: 2
dataset: "CIFAR10" # STL10
pretrain: True
# model options
resnet: "resnet18"
projection_dim: 32 # "[...] to project the representation to a 128-dimensional latent space"
# loss options
optimizer: "Adam" # or LARS (experimental)
weight_decay: 1.0e-6 # "optimized using LARS [...] and weight decay of 10-6"
temperature: 0.5 # see appendix B.7.: Optimal temperature under different batch sizes
# reload options
model_path: "save" # set to the directory containing `checkpoint_##.tar`
epoch_num: 2 # set to checkpoint number
reload: False
# logistic regression options
logistic_batch_size: 64
logistic_epochs: 5
"""


def load_optimizer(args, model):
    scheduler = None
    if args.optimizer == "Adam":
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)  # TODO: LARS
    else:
        raise NotImplementedError  # the LARS optimizer with its cosine schedule is left out
    return optimizer, scheduler


def save_model(args, model, optimizer):
    out = os.path.join(args.model_path, "checkpoint_{}.tar".format(args.current_epoch))
    # To save a DataParallel model generically, save the model.module.state_dict().
    # This way, you have the flexibility to load the model any way you want to any device you want.
    if isinstance(model, torch.nn.DataParallel):
        torch.save(model.module.state_dict(), out)
    else:
        torch.save(model.state_dict(), out)


class SummaryWriter:
    """torch.utils.tensorboard.SummaryWriter stand-in: keeps the scalars"""
    def __init__(self):
        self.scalars = []
    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, value, step))


# ---------------------------------------------------------------- main.py
def train(args, train_loader, model, criterion, optimizer, writer):
    loss_epoch = 0
    for step, ((x_i, x_j), _) in enumerate(train_loader):
        optimizer.zero_grad()
        if torch.cuda.is_available():  # the author's `train` always calls .cuda()
            x_i = x_i.cuda(non_blocking=True)
            x_j = x_j.cuda(non_blocking=True)
        # positive pair, with encoding
        h_i, h_j, z_i, z_j = model(x_i, x_j)
        loss = criterion(z_i, z_j)
        loss.backward()
        optimizer.step()
        if dist.is_available() and dist.is_initialized():
            loss = loss.data.clone()
            dist.all_reduce(loss.div_(dist.get_world_size()))
        if args.nr == 0 and step % 50 == 0:
            print(f"Step [{step}/{len(train_loader)}]\t Loss: {loss.item()}")
        if args.nr == 0:
            writer.add_scalar("Loss/train_epoch", loss.item(), args.global_step)
            args.global_step += 1
        loss_epoch += loss.item()
    return loss_epoch


def main(gpu, args):
    rank = args.nr * args.gpus + gpu
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    if args.dataset == "CIFAR10":
        train_dataset = CIFAR10(args.dataset_dir, download=True, transform=TransformsSimCLR(size=args.image_size))
    else:
        raise NotImplementedError
    train_sampler = None
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size, shuffle=(train_sampler is None),
                                               drop_last=True, num_workers=args.workers, sampler=train_sampler)
    # initialize ResNet
    encoder = get_resnet(args.resnet, pretrained=False)
    n_features = encoder.fc.in_features  # get dimensions of fc layer
    # initialize model
    model = SimCLR(encoder, args.projection_dim, n_features)
    if args.reload:
        model_fp = os.path.join(args.model_path, "checkpoint_{}.tar".format(args.epoch_num))
        model.load_state_dict(torch.load(model_fp, map_location=args.device.type))
    model = model.to(args.device)
    # optimizer / loss
    optimizer, scheduler = load_optimizer(args, model)
    criterion = NT_Xent(args.batch_size, args.temperature, args.world_size)
    # DDP / DP
    if args.dataparallel:
        model = convert_model(model)
        model = DataParallel(model)
    model = model.to(args.device)
    writer = None
    if args.nr == 0:
        writer = SummaryWriter()
    args.global_step = 0
    args.current_epoch = 0
    for epoch in range(args.start_epoch, args.epochs):
        if train_sampler is not None:
            train_sampler.set_epoch(epoch)
        lr = optimizer.param_groups[0]["lr"]
        loss_epoch = train(args, train_loader, model, criterion, optimizer, writer)
        if args.nr == 0 and scheduler:
            scheduler.step()
        if args.nr == 0 and epoch % 10 == 0:
            save_model(args, model, optimizer)
        if args.nr == 0:
            writer.add_scalar("Loss/train", loss_epoch / len(train_loader), epoch)
            writer.add_scalar("Misc/learning_rate", lr, epoch)
            print(f"Epoch [{epoch}/{args.epochs}]\t Loss: {loss_epoch / len(train_loader)}\t lr: {round(lr, 5)}")
            args.current_epoch += 1
    ## end training
    save_model(args, model, optimizer)
    return loss_epoch / len(train_loader)


def main_py(argv):
    parser = argparse.ArgumentParser(description="SimCLR")
    config = yaml_config_hook("./config/config.yaml")
    for k, v in config.items():
        parser.add_argument(f"--{k}", default=v, type=type(v))
    args = parser.parse_args(argv)
    # Master address for distributed data parallel
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "8000"
    if not os.path.exists(args.model_path):
        os.makedirs(args.model_path)
    args.device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    args.num_gpus = torch.cuda.device_count()
    args.world_size = args.gpus * args.nodes
    return main(0, args)  # (args.nodes > 1 spawns one process per GPU with mp.spawn: left out)


# ---------------------------------------------------------------- linear_evaluation.py
def inference(loader, simclr_model, device):
    feature_vector = []
    labels_vector = []
    for step, (x, y) in enumerate(loader):
        x = x.to(device)
        # get encoding
        with torch.no_grad():
            h, _, z, _ = simclr_model(x, x)
        h = h.detach()
        feature_vector.extend(h.cpu().detach().numpy())
        labels_vector.extend(y.numpy())
        if step % 20 == 0:
            print(f"Step [{step}/{len(loader)}]\t Computing features...")
    feature_vector = np.array(feature_vector)
    labels_vector = np.array(labels_vector)
    print("Features shape {}".format(feature_vector.shape))
    return feature_vector, labels_vector


def get_features(simclr_model, train_loader, test_loader, device):
    train_X, train_y = inference(train_loader, simclr_model, device)
    test_X, test_y = inference(test_loader, simclr_model, device)
    return train_X, train_y, test_X, test_y


def create_data_loaders_from_arrays(X_train, y_train, X_test, y_test, batch_size):
    train = torch.utils.data.TensorDataset(torch.from_numpy(X_train), torch.from_numpy(y_train))
    train_loader = torch.utils.data.DataLoader(train, batch_size=batch_size, shuffle=False)
    test = torch.utils.data.TensorDataset(torch.from_numpy(X_test), torch.from_numpy(y_test))
    test_loader = torch.utils.data.DataLoader(test, batch_size=batch_size, shuffle=False)
    return train_loader, test_loader


def train_probe(args, loader, simclr_model, model, criterion, optimizer):
    loss_epoch = 0
    accuracy_epoch = 0
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        x = x.to(args.device)
        y = y.to(args.device)
        output = model(x)
        loss = criterion(output, y)
        predicted = output.argmax(1)
        acc = (predicted == y).sum().item() / y.size(0)
        accuracy_epoch += acc
        loss.backward()
        optimizer.step()
        loss_epoch += loss.item()
    return loss_epoch, accuracy_epoch


def test(args, loader, simclr_model, model, criterion, optimizer):
    loss_epoch = 0
    accuracy_epoch = 0
    model.eval()
    for step, (x, y) in enumerate(loader):
        model.zero_grad()
        x = x.to(args.device)
        y = y.to(args.device)
        output = model(x)
        loss = criterion(output, y)
        predicted = output.argmax(1)
        acc = (predicted == y).sum().item() / y.size(0)
        accuracy_epoch += acc
        loss_epoch += loss.item()
    return loss_epoch, accuracy_epoch


def linear_evaluation_py(argv):
    parser = argparse.ArgumentParser(description="SimCLR")
    config = yaml_config_hook("./config/config.yaml")
    for k, v in config.items():
        parser.add_argument(f"--{k}", default=v, type=type(v))
    args = parser.parse_args(argv)
    args.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.dataset == "CIFAR10":
        train_dataset = CIFAR10(args.dataset_dir, train=True, download=True,
                                transform=TransformsSimCLR(size=args.image_size).test_transform)
        test_dataset = CIFAR10(args.dataset_dir, train=False, download=True,
                               transform=TransformsSimCLR(size=args.image_size).test_transform)
    else:
        raise NotImplementedError
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.logistic_batch_size, shuffle=True,
                                               drop_last=True, num_workers=args.workers)
    test_loader = torch.utils.data.DataLoader(test_dataset, batch_size=args.logistic_batch_size, shuffle=False,
                                              drop_last=True, num_workers=args.workers)
    encoder = get_resnet(args.resnet, pretrained=False)
    n_features = encoder.fc.in_features  # get dimensions of fc layer
    # load pre-trained model from checkpoint
    simclr_model = SimCLR(encoder, args.projection_dim, n_features)
    model_fp = os.path.join(args.model_path, "checkpoint_{}.tar".format(args.epoch_num))
    simclr_model.load_state_dict(torch.load(model_fp, map_location=args.device.type))
    simclr_model = simclr_model.to(args.device)
    simclr_model.eval()
    ## Logistic Regression
    n_classes = 10  # CIFAR-10 / STL-10
    model = LogisticRegression(simclr_model.n_features, n_classes)
    model = model.to(args.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    criterion = torch.nn.CrossEntropyLoss()
    print("### Creating features from pre-trained context model ###")
    (train_X, train_y, test_X, test_y) = get_features(simclr_model, train_loader, test_loader, args.device)
    arr_train_loader, arr_test_loader = create_data_loaders_from_arrays(train_X, train_y, test_X, test_y, args.logistic_batch_size)
    for epoch in range(args.logistic_epochs):
        loss_epoch, accuracy_epoch = train_probe(args, arr_train_loader, simclr_model, model, criterion, optimizer)
        print(f"Epoch [{epoch}/{args.logistic_epochs}]\t Loss: {loss_epoch / len(arr_train_loader)}\t Accuracy: {accuracy_epoch / len(arr_train_loader)}")
    # final testing
    loss_epoch, accuracy_epoch = test(args, arr_test_loader, simclr_model, model, criterion, optimizer)
    print(f"[FINAL]\t Loss: {loss_epoch / len(arr_test_loader)}\t Accuracy: {accuracy_epoch / len(arr_test_loader)}")
    return accuracy_epoch / len(arr_test_loader)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        os.makedirs("config")
        open("./config/config.yaml", "w").write(CONFIG_YAML)
        pretrain_loss = main_py([])
        accuracy = linear_evaluation_py([])
        os.chdir("/")
    print("done: pre-training loss %.4f, linear probe test accuracy %.3f" % (pretrain_loss, accuracy))
