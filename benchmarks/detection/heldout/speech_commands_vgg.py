"""Keyword spotting on Google-Speech-Commands-style 1x32x32 mel spectrograms with a VGG19-BN network, as in the
10th-place Kaggle TensorFlow Speech Recognition Challenge code: the training script (module level, with global
`train(epoch)`/`valid(epoch)`) balances the 12 classes with a `WeightedRandomSampler`, wraps the model in
`DataParallel` and moves it to the GPU when one is available, trains with SGD and `ReduceLROnPlateau`, keeps the
running accuracy as a device tensor, and each epoch saves a checkpoint dict and pickles the whole model for the best
accuracy and loss. The test script loads the pickled model with `torch.load`, moves it to the GPU and evaluates with
multi-crop averaging and a confusion meter, collecting per-file predictions and probabilities.

Modeled on: tugstugi/pytorch-speech-commands, train_speech_commands.py, test_speech_commands.py, models/vgg.py,
models/__init__.py and datasets/speech_commands_dataset.py
(https://github.com/tugstugi/pytorch-speech-commands/tree/36f3cd9e0d2b2d50cf4b023c9af1544fdfeeb886).

Kept: `use_gpu = torch.cuda.is_available()` with `cudnn.benchmark` in both scripts; `pin_memory=use_gpu` loaders;
`model = torch.nn.DataParallel(model).cuda()` under `if use_gpu:` BEFORE the optimizer is built; the resume path
(`torch.load(args.resume)`, `model.load_state_dict`, `model.float()`, `optimizer.load_state_dict`); `Variable`
wrappers and `inputs.cuda()`/`targets.cuda(...)` under `if use_gpu:` in `train`/`valid`/`test`;
`pred = outputs.data.max(1, keepdim=True)[1]` and `correct += pred.eq(targets.data.view_as(pred)).sum()` kept as
a tensor and formatted with `100*correct/total`; the checkpoint dict holding that accuracy tensor, the best-model
logic with `torch.save(checkpoint, ...)` and `torch.save(model, ...)`; the test script's `model =
torch.load(args.model)`, `model.float()`, `model.cuda()` under `if use_gpu:`, `multi_crop` (stack, view, replicate
pad, `torch.cat((inputs, outputs.data))`), softmax averaging, `confusion_matrix.add(pred, targets.data)` and
`outputs.data[j].tolist()`; `VGG`/`make_layers`/`cfg['E']`/`_initialize_weights`; `create_model`.

Changed to run here: WAV files, librosa transforms and noise augmentation are replaced by synthetic class-specific
mel patterns in `SpeechCommandsDataset` (same item dicts and `make_weights_for_balanced_classes`); tqdm and torchnet's
ConfusionMeter are minimal stand-ins; tensorboardX logging and the (off by default) mixup option are dropped;
PyTorch 0.3 idioms updated: `.cuda(async=True)` is `.cuda(non_blocking=True)`, `loss.data[0]` is `loss.item()`,
`volatile=True` dropped, the pickled model loaded with `weights_only=False`; `parse_args([...])` follows TRAINING.md;
outputs go to a temporary folder; no Kaggle CSV; blank lines inside functions dropped to keep the file short.
Shrunk: VGG19-BN widths divided by 8 (classifier 64-128-128); 320/80/80 clips (+10% silence) instead of
~58k/7k/7k; batch 32 instead of 96; 3 epochs instead of 70.
"""
import argparse
import math
import os
import shutil
import tempfile
import time
import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.sampler import WeightedRandomSampler

CLASSES = 'unknown, silence, yes, no, up, down, left, right, on, off, stop, go'.split(', ')
WIDTH_DIVISOR = 8

class VGG(nn.Module):
    def __init__(self, features, num_classes=1000, init_weights=True):
        super(VGG, self).__init__()
        self.features = features
        self.classifier = nn.Sequential(
            nn.Linear(512 // WIDTH_DIVISOR * 1 * 1, 4096 // 32),
            nn.ReLU(True),
            nn.Dropout(),
            nn.Linear(4096 // 32, 4096 // 32),
            nn.ReLU(True),
            nn.Dropout(),
            nn.Linear(4096 // 32, num_classes),
        )
        if init_weights:
            self._initialize_weights()
    def forward(self, x):
        x = self.features(x)
        x = x.view(x.size(0), -1)
        x = self.classifier(x)
        return x
    def _initialize_weights(self):
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                m.weight.data.normal_(0, math.sqrt(2. / n))
                if m.bias is not None:
                    m.bias.data.zero_()
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()
            elif isinstance(m, nn.Linear):
                m.weight.data.normal_(0, 0.01)
                m.bias.data.zero_()

def make_layers(cfg, batch_norm=False, in_channels = 3):
    layers = []
    for v in cfg:
        if v == 'M':
            layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
        else:
            v = v // WIDTH_DIVISOR
            conv2d = nn.Conv2d(in_channels, v, kernel_size=3, padding=1)
            if batch_norm:
                layers += [conv2d, nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
            else:
                layers += [conv2d, nn.ReLU(inplace=True)]
            in_channels = v
    return nn.Sequential(*layers)

cfg = {'E': [64, 64, 'M', 128, 128, 'M', 256, 256, 256, 256, 'M', 512, 512, 512, 512, 'M', 512, 512, 512, 512, 'M']}

def vgg19_bn(pretrained=False, in_channels=3, **kwargs):
    return VGG(make_layers(cfg['E'], batch_norm=True, in_channels=in_channels), **kwargs)

available_models = ['vgg19_bn']

def create_model(model_name, num_classes, in_channels):
    return vgg19_bn(num_classes=num_classes, in_channels=in_channels)

class SpeechCommandsDataset(Dataset):
    """Synthetic stand-in: every clip is a class-specific mel pattern, shifted in time, plus noise."""
    def __init__(self, folder, n_clips, classes=CLASSES, silence_percentage=0.1, seed=0):
        rng = np.random.RandomState(seed)
        patterns = np.random.RandomState(1234).randn(len(classes), 32, 8).astype(np.float32)
        data = [('%s/%s/%05d.wav' % (folder, classes[t], i), t) for i, t in
                enumerate(rng.randint(2, len(classes), size=n_clips))]
        # add silence
        data += [('', classes.index('silence'))] * int(len(data) * silence_percentage)
        self.classes, self.data, self.mels = classes, data, []
        for path, target in data:
            mel = 0.5 * rng.randn(32, 32).astype(np.float32)
            if target != classes.index('silence'):
                start = rng.randint(0, 24)
                mel[:, start:start + 8] += 3 * patterns[target]
            self.mels.append(mel)
    def __len__(self):
        return len(self.data)
    def __getitem__(self, index):
        path, target = self.data[index]
        return {'path': path, 'target': target, 'input': torch.from_numpy(self.mels[index])}
    def make_weights_for_balanced_classes(self):
        nclasses = len(self.classes)
        count = np.zeros(nclasses)
        for item in self.data:
            count[item[1]] += 1
        N = float(sum(count))
        weight_per_class = N / np.maximum(count, 1)
        weight = np.zeros(len(self))
        for idx, item in enumerate(self.data):
            weight[idx] = weight_per_class[item[1]]
        return weight

class ConfusionMeter(object):
    def __init__(self, k):
        self.conf = np.zeros((k, k), dtype=np.int32)
    def add(self, predicted, target):
        predicted = predicted.cpu().squeeze().numpy()
        target = target.cpu().squeeze().numpy()
        np.add.at(self.conf, (target, predicted), 1)
    def value(self):
        return self.conf

def tqdm(iterable, unit=None, unit_scale=None):
    return iterable

workdir = tempfile.mkdtemp()
os.makedirs(os.path.join(workdir, 'checkpoints'))
torch.manual_seed(0)
np.random.seed(0)
parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--train-dataset", type=str, default='datasets/speech_commands/train', help='path of train dataset')
parser.add_argument("--valid-dataset", type=str, default='datasets/speech_commands/valid', help='path of validation dataset')
parser.add_argument("--batch-size", type=int, default=128, help='batch size')
parser.add_argument("--dataload-workers-nums", type=int, default=6, help='number of workers for dataloader')
parser.add_argument("--weight-decay", type=float, default=1e-2, help='weight decay')
parser.add_argument("--optim", choices=['sgd', 'adam'], default='sgd', help='choices of optimization algorithms')
parser.add_argument("--learning-rate", type=float, default=1e-4, help='learning rate for optimization')
parser.add_argument("--lr-scheduler", choices=['plateau', 'step'], default='plateau', help='method to adjust learning rate')
parser.add_argument("--lr-scheduler-patience", type=int, default=5, help='lr scheduler plateau: Number of epochs with no improvement after which learning rate will be reduced')
parser.add_argument("--lr-scheduler-step-size", type=int, default=50, help='lr scheduler step: number of epochs of learning rate decay.')
parser.add_argument("--lr-scheduler-gamma", type=float, default=0.1, help='learning rate is multiplied by the gamma to decrease it')
parser.add_argument("--max-epochs", type=int, default=70, help='max number of epochs')
parser.add_argument("--resume", type=str, help='checkpoint file to resume')
parser.add_argument("--model", choices=available_models, default=available_models[0], help='model of NN')
args = parser.parse_args(['--model=vgg19_bn', '--optim=sgd', '--lr-scheduler=plateau', '--learning-rate=0.01',
                          '--lr-scheduler-patience=5', '--max-epochs=3', '--batch-size=32',
                          '--dataload-workers-nums=0'])

use_gpu = torch.cuda.is_available()
print('use_gpu', use_gpu)
if use_gpu:
    torch.backends.cudnn.benchmark = True
train_dataset = SpeechCommandsDataset(args.train_dataset, 320, seed=1)
valid_dataset = SpeechCommandsDataset(args.valid_dataset, 80, seed=2)

weights = train_dataset.make_weights_for_balanced_classes()
sampler = WeightedRandomSampler(weights, len(weights))
train_dataloader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=sampler,
                              pin_memory=use_gpu, num_workers=args.dataload_workers_nums)
valid_dataloader = DataLoader(valid_dataset, batch_size=args.batch_size, shuffle=False,
                              pin_memory=use_gpu, num_workers=args.dataload_workers_nums)

# a name used to save checkpoints etc.
full_name = '%s_%s_%s_bs%d_lr%.1e_wd%.1e' % (args.model, args.optim, args.lr_scheduler, args.batch_size, args.learning_rate, args.weight_decay)

model = create_model(model_name=args.model, num_classes=len(CLASSES), in_channels=1)
if use_gpu:
    model = torch.nn.DataParallel(model).cuda()
criterion = torch.nn.CrossEntropyLoss()
if args.optim == 'sgd':
    optimizer = torch.optim.SGD(model.parameters(), lr=args.learning_rate, momentum=0.9, weight_decay=args.weight_decay)
else:
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)

start_timestamp = int(time.time()*1000)
start_epoch = 0
best_accuracy = 0
best_loss = 1e100
global_step = 0
if args.resume:
    print("resuming a checkpoint '%s'" % args.resume)
    checkpoint = torch.load(args.resume)
    model.load_state_dict(checkpoint['state_dict'])
    model.float()
    optimizer.load_state_dict(checkpoint['optimizer'])
    best_accuracy = checkpoint.get('accuracy', best_accuracy)
    best_loss = checkpoint.get('loss', best_loss)
    start_epoch = checkpoint.get('epoch', start_epoch)
    global_step = checkpoint.get('step', global_step)
    del checkpoint  # reduce memory

if args.lr_scheduler == 'plateau':
    lr_scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=args.lr_scheduler_patience, factor=args.lr_scheduler_gamma)
else:
    lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=args.lr_scheduler_step_size, gamma=args.lr_scheduler_gamma, last_epoch=start_epoch-1)

def get_lr():
    return optimizer.param_groups[0]['lr']

def train(epoch):
    global global_step
    print("epoch %3d with lr=%.02e" % (epoch, get_lr()))
    model.train()  # Set model to training mode
    running_loss = 0.0
    it = 0
    correct = 0
    total = 0
    pbar = tqdm(train_dataloader, unit="audios", unit_scale=train_dataloader.batch_size)
    for batch in pbar:
        inputs = batch['input']
        inputs = torch.unsqueeze(inputs, 1)
        targets = batch['target']
        inputs = Variable(inputs, requires_grad=True)
        targets = Variable(targets, requires_grad=False)
        if use_gpu:
            inputs = inputs.cuda()
            targets = targets.cuda(non_blocking=True)
        # forward/backward
        outputs = model(inputs)
        loss = criterion(outputs, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        # statistics
        it += 1
        global_step += 1
        running_loss += loss.item()
        pred = outputs.data.max(1, keepdim=True)[1]
        correct += pred.eq(targets.data.view_as(pred)).sum()
        total += targets.size(0)
    accuracy = correct/total
    epoch_loss = running_loss / it
    print("  train loss %.05f acc %.02f%%" % (epoch_loss, 100*accuracy))

def valid(epoch):
    global best_accuracy, best_loss, global_step
    model.eval()  # Set model to evaluate mode
    running_loss = 0.0
    it = 0
    correct = 0
    total = 0
    pbar = tqdm(valid_dataloader, unit="audios", unit_scale=valid_dataloader.batch_size)
    for batch in pbar:
        inputs = batch['input']
        inputs = torch.unsqueeze(inputs, 1)
        targets = batch['target']
        inputs = Variable(inputs)
        targets = Variable(targets, requires_grad=False)
        if use_gpu:
            inputs = inputs.cuda()
            targets = targets.cuda(non_blocking=True)
        # forward
        outputs = model(inputs)
        loss = criterion(outputs, targets)
        # statistics
        it += 1
        global_step += 1
        running_loss += loss.item()
        pred = outputs.data.max(1, keepdim=True)[1]
        correct += pred.eq(targets.data.view_as(pred)).sum()
        total += targets.size(0)
    accuracy = correct/total
    epoch_loss = running_loss / it
    print("  valid loss %.05f acc %.02f%%" % (epoch_loss, 100*accuracy))
    checkpoint = {'epoch': epoch, 'step': global_step, 'state_dict': model.state_dict(), 'loss': epoch_loss,
                  'accuracy': accuracy, 'optimizer' : optimizer.state_dict()}
    if accuracy > best_accuracy:
        best_accuracy = accuracy
        torch.save(checkpoint, os.path.join(workdir, 'checkpoints/best-loss-speech-commands-checkpoint-%s.pth' % full_name))
        torch.save(model, os.path.join(workdir, '%d-%s-best-loss.pth' % (start_timestamp, full_name)))
    if epoch_loss < best_loss:
        best_loss = epoch_loss
        torch.save(checkpoint, os.path.join(workdir, 'checkpoints/best-acc-speech-commands-checkpoint-%s.pth' % full_name))
        torch.save(model, os.path.join(workdir, '%d-%s-best-acc.pth' % (start_timestamp, full_name)))
    torch.save(checkpoint, os.path.join(workdir, 'checkpoints/last-speech-commands-checkpoint.pth'))
    del checkpoint  # reduce memory
    return epoch_loss

print("training %s for Google speech commands..." % args.model)
since = time.time()
for epoch in range(start_epoch, args.max_epochs):
    if args.lr_scheduler == 'step':
        lr_scheduler.step()
    train(epoch)
    epoch_loss = valid(epoch)
    if args.lr_scheduler == 'plateau':
        lr_scheduler.step(metrics=epoch_loss)
    time_elapsed = time.time() - since
    time_str = 'total time elapsed: {:.0f}h {:.0f}m {:.0f}s '.format(time_elapsed // 3600, time_elapsed % 3600 // 60, time_elapsed % 60)
    print("%s, best accuracy: %.02f%%, best loss %f" % (time_str, 100*best_accuracy, best_loss))
print("finished")

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--dataset-dir", type=str, default='datasets/speech_commands/test', help='path of test dataset')
parser.add_argument("--batch-size", type=int, default=128, help='batch size')
parser.add_argument("--dataload-workers-nums", type=int, default=3, help='number of workers for dataloader')
parser.add_argument('--multi-crop', action='store_true', help='apply crop and average the results')
parser.add_argument("model", help='a pretrained neural network model')
args = parser.parse_args(['--multi-crop', '--batch-size=32', '--dataload-workers-nums=0',
                          os.path.join(workdir, '%d-%s-best-acc.pth' % (start_timestamp, full_name))])
dataset_dir = args.dataset_dir
print("loading model...")
model = torch.load(args.model, weights_only=False)
model.float()

use_gpu = torch.cuda.is_available()
print('use_gpu', use_gpu)
if use_gpu:
    torch.backends.cudnn.benchmark = True
    model.cuda()
test_dataset = SpeechCommandsDataset(dataset_dir, 80, silence_percentage=0, seed=3)
test_dataloader = DataLoader(test_dataset, batch_size=args.batch_size, sampler=None,
                            pin_memory=use_gpu, num_workers=args.dataload_workers_nums)
criterion = torch.nn.CrossEntropyLoss()

def multi_crop(inputs):
    b = 1
    size = inputs.size(3) - b * 2
    patches = [inputs[:, :, :, i*b:size+i*b] for i in range(3)]
    outputs = torch.stack(patches)
    outputs = outputs.view(-1, inputs.size(1), inputs.size(2), size)
    outputs = torch.nn.functional.pad(outputs, (b, b, 0, 0), mode='replicate')
    return torch.cat((inputs, outputs.data))

def test():
    model.eval()  # Set model to evaluate mode
    correct = 0
    total = 0
    confusion_matrix = ConfusionMeter(len(CLASSES))
    predictions = {}
    probabilities = {}
    pbar = tqdm(test_dataloader, unit="audios", unit_scale=test_dataloader.batch_size)
    for batch in pbar:
        inputs = batch['input']
        inputs = torch.unsqueeze(inputs, 1)
        targets = batch['target']
        n = inputs.size(0)
        if args.multi_crop:
            inputs = multi_crop(inputs)
        inputs = Variable(inputs)
        targets = Variable(targets, requires_grad=False)
        if use_gpu:
            inputs = inputs.cuda()
            targets = targets.cuda(non_blocking=True)
        # forward
        outputs = model(inputs)
        outputs = torch.nn.functional.softmax(outputs, dim=1)
        if args.multi_crop:
            outputs = outputs.view(-1, n, outputs.size(1))
            outputs = torch.mean(outputs, dim=0)
            outputs = torch.nn.functional.softmax(outputs, dim=1)
        # statistics
        pred = outputs.data.max(1, keepdim=True)[1]
        correct += pred.eq(targets.data.view_as(pred)).sum()
        total += targets.size(0)
        confusion_matrix.add(pred, targets.data)
        filenames = batch['path']
        for j in range(len(pred)):
            fn = filenames[j]
            predictions[fn] = pred[j][0]
            probabilities[fn] = outputs.data[j].tolist()
    accuracy = correct/total
    print("accuracy: %f%%" % (100*accuracy))
    print("confusion matrix:")
    print(confusion_matrix.value())
    return probabilities, predictions

print("testing...")
probabilities, predictions = test()
shutil.rmtree(workdir)
print("done best_accuracy=%.4f best_loss=%.4f test_files=%d" % (float(best_accuracy), best_loss, len(predictions)))
