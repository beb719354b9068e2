"""Trains and evaluates a person re-identification baseline the way layumi/Person_reID_baseline_pytorch does it:
train.py fine-tunes a ResNet-50-style `ft_net` (global pooling, a `ClassBlock` bottleneck, an identity classifier)
with SGD on two learning-rate groups, alternating train and val phases and saving snapshots with `save_network`
(which moves the network back to the GPU after saving); test.py loads the last snapshot into a fresh network, drops
the classifier, fuses conv+BN, extracts L2-normalised gallery and query features (image plus flip, two scales) into
a host tensor and saves them with `scipy.io.savemat`; evaluate_gpu.py ranks the gallery for every query on the GPU
and reports Rank@1/5/10 and mAP with camera-aware junk filtering.

Modeled on: layumi/Person_reID_baseline_pytorch, train.py, test.py, evaluate_gpu.py, model.py and utils.py at commit
82ff40fb11b7353400dc8670dcec620d97285096
(https://github.com/layumi/Person_reID_baseline_pytorch/blob/82ff40fb11b7353400dc8670dcec620d97285096/train.py and
the other files at the same commit).

Kept: `--gpu_ids` parsing and `cudnn.benchmark`; `use_gpu = torch.cuda.is_available()`; loaders with
`pin_memory=True`, `drop_last=True` and a first batch fetched early; the model moved before the SGD groups are built
(`ignored_params` by `id`, base at `0.1 * opt.lr`), `StepLR`, `torch.cuda.amp.GradScaler()`; `train_model`
(`model.train(True/False)`, last-batch skipping, `inputs.cuda().detach()`/`labels.cuda().detach()` under `use_gpu`,
the val forward under `torch.no_grad()`, `torch.max(outputs.data, 1)`, `loss.item() * now_batch_size`,
`float(torch.sum(preds == labels.data))`, `last_model_wts = model.state_dict()` and `save_network` every few epochs,
`model.load_state_dict(last_model_wts)`, the `'last'` snapshot); `save_network` (`torch.save(network.state_dict())`
then `network.cuda()`); `opts.yaml` written by train.py, read by test.py; test.py's `torch.cuda.set_device`,
`load_network` (`torch.load` without `map_location` into a host model), the classifier replaced by
`nn.Sequential()`, `model.eval()` then `model.cuda()`, `fuse_all_conv_bn`, `extract_feature` under `torch.no_grad()`
(`torch.FloatTensor(n, linear_num).zero_().cuda()`, `fliplr` with a host index, `Variable(img.cuda())`, bicubic
`interpolate`, L2 normalisation, the host `features` filled by slice assignment from the device `ff`), `get_id`,
`.numpy()` and `savemat`; evaluate_gpu.py (`loadmat`, features moved with `.cuda()`, `torch.mm` on the device,
`.squeeze(1).cpu()`, numpy ranking, `compute_mAP` with its `torch.IntTensor` CMC); model.py's `ClassBlock`, `ft_net`
and init functions.

Changed to run here: no Market-1501, torchvision or matplotlib: `write_synthetic_market` writes identities (a
person-like blob with identity colours under camera lighting) as `.npy` images in Market-1501's `pytorch/` layout
(names like `0002_c1s1_000451_01.npy`, two `-1` junk gallery images), `ImageFolder` is a stand-in with
`.classes`/`.imgs`, transforms are numpy functions, the pretrained ResNet-50 is a random bottleneck ResNet with the
attributes `ft_net` reads, the loss-curve plot is dropped; the author moves to the GPU unconditionally in train.py
(`model.cuda()`), `save_network`, `extract_feature` and evaluate_gpu.py (with `--gpu_ids 0` by default): here under
`use_gpu`/`torch.cuda.is_available()`, and `--gpu_ids` is `-1` without a GPU; train.py/test.py are functions taking
argument lists, evaluate_gpu.py a function called instead of `os.system('python evaluate_gpu.py')`; only the softmax
loss of `train_model` is kept (no ArcFace/circle/triplet/PCB/DG/SWA/fp16/warm-up branches, nor the several-GPU
`DataParallel` one); progress bars, file copies and some comments are dropped; everything is in a temporary folder.
Shrunk: images 256x128 -> 64x32; ResNet-50 widths /16 with one bottleneck per stage (2048 -> 128 features);
`linear_num` 512 -> 32; 8 training identities x 6 images, 4 test identities (3 query, 6 gallery images each); batch
32 -> 8 (test 256 -> 16); 60 epochs -> 4, snapshots every 2 epochs instead of 10; `num_workers` 0.
"""
from __future__ import print_function, division

import argparse
import math
import os
import shutil
import tempfile
import time

import numpy as np
import scipy.io
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.optim as optim
import yaml
from torch.autograd import Variable
from torch.nn import init
from torch.nn.utils import fuse_conv_bn_eval

WORKDIR = tempfile.mkdtemp(prefix='reid_')
H, W = 64, 32


def write_synthetic_market(root, n_train=8, n_test=4, seed=11):
    rng = np.random.RandomState(seed)
    lights = rng.uniform(0.7, 1.3, size=(3, 3))
    test_ids = range(n_train + 1, n_train + n_test + 1)
    plan = ([('train', p, k % 3, k) for p in range(1, n_train + 1) for k in range(6)]
            + [('val', p, 0, 99) for p in range(1, n_train + 1)]
            + [('query', p, k, k) for p in test_ids for k in range(3)]
            + [('gallery', p, k % 3, 10 + k) for p in test_ids for k in range(6)]
            + [('gallery', -1, k, 50 + k) for k in range(2)])
    for folder, pid, cam, k in plan:
        ident = '%04d' % pid if pid >= 0 else '-1'
        img = rng.uniform(0, 60, size=(H, W, 3))
        shirt, trousers = np.random.RandomState(max(pid, 0) + 99).uniform(40, 255, size=(2, 3)) * lights[cam]
        x0 = rng.randint(6, 10)
        img[8:34, x0:x0 + 16], img[34:60, x0 + 2:x0 + 14] = shirt, trousers
        os.makedirs(os.path.join(root, folder, ident), exist_ok=True)
        np.save(os.path.join(root, folder, ident, '%s_c%ds1_%06d_01.npy' % (ident, cam + 1, k)),
                np.clip(img + rng.normal(0, 8, size=img.shape), 0, 255).astype(np.uint8))


class ImageFolder(torch.utils.data.Dataset):
    def __init__(self, root, transform):
        self.classes = sorted(os.listdir(root))
        self.imgs = [(os.path.join(root, c, f), i) for i, c in enumerate(self.classes)
                     for f in sorted(os.listdir(os.path.join(root, c)))]
        self.transform = transform

    def __getitem__(self, index):
        return self.transform(np.load(self.imgs[index][0])), self.imgs[index][1]

    def __len__(self):
        return len(self.imgs)


def to_normalized_tensor(img):  # transforms.ToTensor() + transforms.Normalize(ImageNet mean/std)
    img = img.astype(np.float32).transpose(2, 0, 1) / 255.0
    mean, std = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)
    return torch.from_numpy((img - mean[:, None, None]) / std[:, None, None])


def train_transform(img, pad=3):  # Pad(10), RandomCrop((h, w)), RandomHorizontalFlip(), ToTensor(), Normalize()
    img = np.pad(img, ((pad, pad), (pad, pad), (0, 0)))
    y, x = np.random.randint(0, 2 * pad + 1, size=2)
    img = img[y:y + H, x:x + W]
    return to_normalized_tensor(img[:, ::-1] if np.random.rand() < 0.5 else img)


class Bottleneck(nn.Module):  # torchvision.models.resnet.Bottleneck
    def __init__(self, inplanes, planes, stride, downsample):
        super(Bottleneck, self).__init__()
        self.conv1, self.bn1 = nn.Conv2d(inplanes, planes, 1, bias=False), nn.BatchNorm2d(planes)
        self.conv2, self.bn2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False), nn.BatchNorm2d(planes)
        self.conv3, self.bn3 = nn.Conv2d(planes, planes * 4, 1, bias=False), nn.BatchNorm2d(planes * 4)
        self.relu, self.downsample = nn.ReLU(inplace=True), downsample

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn3(self.conv3(self.relu(self.bn2(self.conv2(out)))))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


def resnet50(pretrained=False, widths=(4, 8, 16, 32)):
    """torchvision's resnet50 layout (conv1 ... layer4, avgpool, fc), widths /16, one bottleneck per stage."""
    model = nn.Module()
    model.conv1, model.bn1 = nn.Conv2d(3, widths[0], 7, 2, 3, bias=False), nn.BatchNorm2d(widths[0])
    model.relu, model.maxpool = nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)
    inplanes = widths[0]
    for i, planes in enumerate(widths):
        stride = 1 if i == 0 else 2
        down = nn.Sequential(nn.Conv2d(inplanes, planes * 4, 1, stride, bias=False), nn.BatchNorm2d(planes * 4))
        setattr(model, 'layer%d' % (i + 1), nn.Sequential(Bottleneck(inplanes, planes, stride, down)))
        inplanes = planes * 4
    model.avgpool, model.fc = nn.AdaptiveAvgPool2d((1, 1)), nn.Linear(inplanes, 1000)
    return model


def weights_init_kaiming(m):
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        init.kaiming_normal_(m.weight.data, a=0, mode='fan_in')
    elif classname.find('Linear') != -1:
        init.kaiming_normal_(m.weight.data, a=0, mode='fan_out')
    elif classname.find('BatchNorm1d') != -1:
        init.normal_(m.weight.data, 1.0, 0.02)
    if hasattr(m, 'bias') and m.bias is not None:
        init.constant_(m.bias.data, 0.0)


def weights_init_classifier(m):
    classname = m.__class__.__name__
    if classname.find('Linear') != -1:
        init.normal_(m.weight.data, std=0.0001)
        init.constant_(m.bias.data, 0.0)


# Defines the new fc layer and classification layer
# |--Linear--|--bn--|--relu--|--Linear--|
class ClassBlock(nn.Module):
    def __init__(self, input_dim, class_num, droprate, relu=False, bnorm=True, linear=512, return_f=False):
        super(ClassBlock, self).__init__()
        self.return_f = return_f
        add_block = []
        if linear > 0:
            add_block += [nn.Linear(input_dim, linear)]
        else:
            linear = input_dim
        if bnorm:
            add_block += [nn.BatchNorm1d(linear)]
        if relu:
            add_block += [nn.LeakyReLU(0.1)]
        if droprate > 0:
            add_block += [nn.Dropout(p=droprate)]
        add_block = nn.Sequential(*add_block)
        add_block.apply(weights_init_kaiming)
        classifier = []
        classifier += [nn.Linear(linear, class_num)]
        classifier = nn.Sequential(*classifier)
        classifier.apply(weights_init_classifier)
        self.linear_num = linear
        self.add_block = add_block
        self.classifier = classifier

    def forward(self, x):
        x = self.add_block(x)
        if self.return_f:
            f = x
            x = self.classifier(x)
            return [x, f]
        else:
            x = self.classifier(x)
            return x


# Define the ResNet50-based Model
class ft_net(nn.Module):
    def __init__(self, class_num=751, droprate=0.5, stride=2, circle=False, ibn=False, linear_num=512, usam=False):
        super(ft_net, self).__init__()
        model_ft = resnet50(pretrained=True)
        # avg pooling to global pooling
        if stride == 1:
            model_ft.layer4[0].downsample[0].stride = (1, 1)
            model_ft.layer4[0].conv2.stride = (1, 1)
        model_ft.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.model = model_ft
        self.circle = circle
        self.classifier = ClassBlock(128, class_num, droprate, linear=linear_num, return_f=circle)

    def forward(self, x):
        x = self.model.conv1(x)
        x = self.model.bn1(x)
        x = self.model.relu(x)
        x = self.model.maxpool(x)
        x = self.model.layer1(x)
        x = self.model.layer2(x)
        x = self.model.layer3(x)
        x = self.model.layer4(x)
        x = self.model.avgpool(x)
        x = x.view(x.size(0), x.size(1))
        x = self.classifier(x)
        return x


def fuse_all_conv_bn(model):
    stack = []
    for name, module in model.named_children():
        if list(module.named_children()):
            fuse_all_conv_bn(module)
        if isinstance(module, nn.BatchNorm2d):
            if not stack:
                continue
            if isinstance(stack[-1][1], nn.Conv2d):
                setattr(model, stack[-1][0], fuse_conv_bn_eval(stack[-1][1], module))
                setattr(model, name, nn.Identity())
        else:
            stack.append((name, module))
    return model


def save_network(network, dirname, epoch_label):
    if isinstance(epoch_label, int):
        save_filename = 'net_%03d.pth' % epoch_label
    else:
        save_filename = 'net_%s.pth' % epoch_label
    save_path = os.path.join(WORKDIR, 'model', dirname, save_filename)
    torch.save(network.state_dict(), save_path)
    if torch.cuda.is_available():
        network.cuda()


def train_model(model, criterion, optimizer, scheduler, scaler, num_epochs=25):
    since = time.time()
    for epoch in range(num_epochs):
        for phase in ['train', 'val']:
            if phase == 'train':
                model.train(True)  # Set model to training mode
            else:
                model.train(False)  # Set model to evaluate mode
            running_loss = 0.0
            running_corrects = 0.0
            for iter, data in enumerate(dataloaders[phase]):
                inputs, labels = data
                now_batch_size, c, h, w = inputs.shape
                if now_batch_size < opt.batchsize:  # skip the last batch
                    continue
                if use_gpu:
                    inputs = inputs.cuda().detach()
                    labels = labels.cuda().detach()
                optimizer.zero_grad()
                if phase == 'val':
                    with torch.no_grad():
                        outputs = model(inputs)
                else:
                    outputs = model(inputs)
                _, preds = torch.max(outputs.data, 1)
                loss = criterion(outputs, labels)
                del inputs
                # backward + optimize only if in training phase
                if phase == 'train':
                    loss.backward()
                    optimizer.step()
                running_loss += loss.item() * now_batch_size
                del loss
                running_corrects += float(torch.sum(preds == labels.data))
            epoch_loss = running_loss / dataset_sizes[phase]
            epoch_acc = running_corrects / dataset_sizes[phase]
            print('{} Epoch {}/{} Loss: {:.4f} Acc: {:.4f}'.format(phase, epoch, num_epochs - 1, epoch_loss,
                                                                   epoch_acc))
            y_loss[phase].append(epoch_loss)
            y_err[phase].append(1.0 - epoch_acc)
            # deep copy the model
            if phase == 'val' and epoch % 2 == 1:
                last_model_wts = model.state_dict()
                save_network(model, opt.name, epoch + 1)
            if phase == 'train':
                scheduler.step()
    time_elapsed = time.time() - since
    print('Training complete in {:.0f}m {:.0f}s'.format(time_elapsed // 60, time_elapsed % 60))
    # load best model weights
    model.load_state_dict(last_model_wts)
    save_network(model, opt.name, 'last')
    return model


def train_main(argv):
    global opt, dataloaders, dataset_sizes, use_gpu, y_loss, y_err
    parser = argparse.ArgumentParser(description='Training')
    parser.add_argument('--gpu_ids', default='0', type=str, help='gpu_ids: e.g. 0  0,1,2  0,2')
    parser.add_argument('--name', default='ft_ResNet50', type=str, help='output model name')
    parser.add_argument('--data_dir', default='../Market/pytorch', type=str, help='training dir path')
    parser.add_argument('--batchsize', default=32, type=int, help='batchsize')
    parser.add_argument('--lr', default=0.05, type=float, help='learning rate')
    parser.add_argument('--weight_decay', default=5e-4, type=float, help='Weight decay.')
    parser.add_argument('--total_epoch', default=60, type=int, help='total training epoch')
    parser.add_argument('--linear_num', default=512, type=int, help='feature dimension: 512 or default or 0')
    parser.add_argument('--stride', default=2, type=int, help='stride')
    parser.add_argument('--droprate', default=0.5, type=float, help='drop rate')
    opt = parser.parse_args(argv)
    data_dir = opt.data_dir
    gpu_ids = [int(str_id) for str_id in opt.gpu_ids.split(',') if int(str_id) >= 0]
    opt.gpu_ids = gpu_ids
    if len(gpu_ids) > 0:
        cudnn.enabled = True
        cudnn.benchmark = True
    image_datasets = {'train': ImageFolder(os.path.join(data_dir, 'train'), train_transform),
                      'val': ImageFolder(os.path.join(data_dir, 'val'), to_normalized_tensor)}
    dataloaders = {x: torch.utils.data.DataLoader(image_datasets[x], batch_size=opt.batchsize, shuffle=True,
                                                  num_workers=0, pin_memory=True, drop_last=True)
                   for x in ['train', 'val']}
    dataset_sizes = {x: len(image_datasets[x]) for x in ['train', 'val']}
    class_names = image_datasets['train'].classes
    use_gpu = torch.cuda.is_available()
    inputs, classes = next(iter(dataloaders['train']))
    y_loss = {'train': [], 'val': []}  # loss history
    y_err = {'train': [], 'val': []}
    model = ft_net(len(class_names), opt.droprate, opt.stride, circle=False, linear_num=opt.linear_num)
    opt.nclasses = len(class_names)
    if use_gpu:
        model = model.cuda()
    optim_name = optim.SGD
    ignored_params = list(map(id, model.classifier.parameters()))
    base_params = filter(lambda p: id(p) not in ignored_params, model.parameters())
    classifier_params = model.classifier.parameters()
    optimizer_ft = optim_name([
        {'params': base_params, 'lr': 0.1 * opt.lr},
        {'params': classifier_params, 'lr': opt.lr}
    ], weight_decay=opt.weight_decay, momentum=0.9, nesterov=True)
    # Decay LR by a factor of 0.1 every 40 epochs
    exp_lr_scheduler = optim.lr_scheduler.StepLR(optimizer_ft, step_size=opt.total_epoch * 2 // 3, gamma=0.1)
    dir_name = os.path.join(WORKDIR, 'model', opt.name)
    if not os.path.isdir(dir_name):
        os.makedirs(dir_name)
    with open('%s/opts.yaml' % dir_name, 'w') as fp:
        yaml.dump(vars(opt), fp, default_flow_style=False)
    criterion = nn.CrossEntropyLoss()
    scaler = torch.cuda.amp.GradScaler()
    model = train_model(model, criterion, optimizer_ft, exp_lr_scheduler, scaler, num_epochs=opt.total_epoch)
    return y_err['val'][-1]


def fliplr(img):
    '''flip horizontal'''
    inv_idx = torch.arange(img.size(3) - 1, -1, -1).long()  # N x C x H x W
    img_flip = img.index_select(3, inv_idx)
    return img_flip


def extract_feature(model, dataloaders):
    for iter, data in enumerate(dataloaders):
        img, label = data
        n, c, h, w = img.size()
        ff = torch.FloatTensor(n, opt.linear_num).zero_()
        if use_gpu:
            ff = ff.cuda()
        for i in range(2):
            if (i == 1):
                img = fliplr(img)
            input_img = Variable(img.cuda()) if use_gpu else Variable(img)
            for scale in ms:
                if scale != 1:
                    # bicubic is only  available in pytorch>= 1.1
                    input_img = nn.functional.interpolate(input_img, scale_factor=scale, mode='bicubic',
                                                          align_corners=False)
                outputs = model(input_img)
                ff += outputs
        fnorm = torch.norm(ff, p=2, dim=1, keepdim=True)
        ff = ff.div(fnorm.expand_as(ff))
        if iter == 0:
            features = torch.FloatTensor(len(dataloaders.dataset), ff.shape[1])
        start = iter * opt.batchsize
        end = min((iter + 1) * opt.batchsize, len(dataloaders.dataset))
        features[start:end, :] = ff
    return features


def get_id(img_path):
    camera_id = []
    labels = []
    for path, v in img_path:
        filename = os.path.basename(path)
        label = filename[0:4]
        camera = filename.split('c')[1]
        labels.append(-1 if label[0:2] == '-1' else int(label))
        camera_id.append(int(camera[0]))
    return camera_id, labels


def test_main(argv):
    global opt, ms, use_gpu
    parser = argparse.ArgumentParser(description='Test')
    parser.add_argument('--gpu_ids', default='0', type=str, help='gpu_ids: e.g. 0  0,1,2  0,2')
    parser.add_argument('--which_epoch', default='last', type=str, help='0,1,2,3...or last')
    parser.add_argument('--test_dir', default='../Market/pytorch', type=str, help='./test_data')
    parser.add_argument('--name', default='ft_ResNet50', type=str, help='save model path')
    parser.add_argument('--batchsize', default=256, type=int, help='batchsize')
    parser.add_argument('--linear_num', default=512, type=int, help='feature dimension: 512 or default or 0')
    parser.add_argument('--ms', default='1', type=str, help='multiple_scale: e.g. 1 1,1.1  1,1.1,1.2')
    opt = parser.parse_args(argv)
    config_path = os.path.join(WORKDIR, 'model', opt.name, 'opts.yaml')
    with open(config_path, 'r') as stream:
        config = yaml.load(stream, Loader=yaml.FullLoader)
    opt.stride = config['stride']
    opt.nclasses = config['nclasses'] if 'nclasses' in config else 751
    if 'linear_num' in config:
        opt.linear_num = config['linear_num']
    name = opt.name
    gpu_ids = [int(str_id) for str_id in opt.gpu_ids.split(',') if int(str_id) >= 0]
    print('We use the scale: %s' % opt.ms)
    ms = [math.sqrt(float(s)) for s in opt.ms.split(',')]
    # set gpu ids
    if len(gpu_ids) > 0:
        torch.cuda.set_device(gpu_ids[0])
        cudnn.benchmark = True
    image_datasets = {x: ImageFolder(os.path.join(opt.test_dir, x), to_normalized_tensor) for x in ['gallery', 'query']}
    dataloaders = {x: torch.utils.data.DataLoader(image_datasets[x], batch_size=opt.batchsize, shuffle=False,
                                                  num_workers=0) for x in ['gallery', 'query']}
    use_gpu = torch.cuda.is_available()

    def load_network(network):
        save_path = os.path.join(WORKDIR, 'model', name, 'net_%s.pth' % opt.which_epoch)
        network.load_state_dict(torch.load(save_path))
        return network

    gallery_cam, gallery_label = get_id(image_datasets['gallery'].imgs)
    query_cam, query_label = get_id(image_datasets['query'].imgs)
    print('-------test-----------')
    model_structure = ft_net(opt.nclasses, stride=opt.stride, linear_num=opt.linear_num)
    model = load_network(model_structure)
    model.classifier.classifier = nn.Sequential()
    model = model.eval()
    if use_gpu:
        model = model.cuda()
    model = fuse_all_conv_bn(model)
    with torch.no_grad():
        gallery_feature = extract_feature(model, dataloaders['gallery'])
        query_feature = extract_feature(model, dataloaders['query'])
    result = {'gallery_f': gallery_feature.numpy(), 'gallery_label': gallery_label, 'gallery_cam': gallery_cam,
              'query_f': query_feature.numpy(), 'query_label': query_label, 'query_cam': query_cam}
    scipy.io.savemat(os.path.join(WORKDIR, 'pytorch_result.mat'), result)
    print(opt.name)
    return evaluate_gpu()


def evaluate(qf, ql, qc, gf, gl, gc):
    query = qf.view(-1, 1)
    score = torch.mm(gf, query)
    score = score.squeeze(1).cpu()
    score = score.numpy()
    index = np.argsort(score)  # from small to large
    index = index[::-1]
    query_index = np.argwhere(gl == ql)
    camera_index = np.argwhere(gc == qc)
    good_index = np.setdiff1d(query_index, camera_index, assume_unique=True)
    junk_index1 = np.argwhere(gl == -1)
    junk_index2 = np.intersect1d(query_index, camera_index)
    junk_index = np.append(junk_index2, junk_index1)
    CMC_tmp = compute_mAP(index, good_index, junk_index)
    return CMC_tmp


def compute_mAP(index, good_index, junk_index):
    ap = 0
    cmc = torch.IntTensor(len(index)).zero_()
    if good_index.size == 0:  # if empty
        cmc[0] = -1
        return ap, cmc
    mask = np.isin(index, junk_index, invert=True)
    index = index[mask]
    ngood = len(good_index)
    mask = np.isin(index, good_index)
    rows_good = np.argwhere(mask == True)
    rows_good = rows_good.flatten()
    cmc[rows_good[0]:] = 1
    for i in range(ngood):
        d_recall = 1.0 / ngood
        precision = (i + 1) * 1.0 / (rows_good[i] + 1)
        if rows_good[i] != 0:
            old_precision = i * 1.0 / rows_good[i]
        else:
            old_precision = 1.0
        ap = ap + d_recall * (old_precision + precision) / 2
    return ap, cmc


def evaluate_gpu():
    result = scipy.io.loadmat(os.path.join(WORKDIR, 'pytorch_result.mat'))
    query_feature = torch.FloatTensor(result['query_f'])
    query_cam = result['query_cam'][0]
    query_label = result['query_label'][0]
    gallery_feature = torch.FloatTensor(result['gallery_f'])
    gallery_cam = result['gallery_cam'][0]
    gallery_label = result['gallery_label'][0]
    if torch.cuda.is_available():
        query_feature = query_feature.cuda()
        gallery_feature = gallery_feature.cuda()
    print(query_feature.shape)
    CMC = torch.IntTensor(len(gallery_label)).zero_()
    ap = 0.0
    for i in range(len(query_label)):
        ap_tmp, CMC_tmp = evaluate(query_feature[i], query_label[i], query_cam[i], gallery_feature, gallery_label,
                                   gallery_cam)
        if CMC_tmp[0] == -1:
            continue
        CMC = CMC + CMC_tmp
        ap += ap_tmp
    CMC = CMC.float()
    CMC = CMC / len(query_label)  # average CMC
    print('Rank@1:%f Rank@5:%f Rank@10:%f mAP:%f' % (CMC[0], CMC[4], CMC[9], ap / len(query_label)))
    return CMC[0].item(), ap / len(query_label)


if __name__ == '__main__':
    np.random.seed(0)
    torch.manual_seed(0)
    data_dir = os.path.join(WORKDIR, 'Market', 'pytorch')
    write_synthetic_market(data_dir)
    gpu = '0' if torch.cuda.is_available() else '-1'
    val_err = train_main(['--gpu_ids', gpu, '--data_dir', data_dir, '--batchsize', '8', '--total_epoch', '4',
                          '--linear_num', '32', '--lr', '0.05'])
    rank1, mAP = test_main(['--gpu_ids', gpu, '--test_dir', data_dir, '--batchsize', '16', '--linear_num', '32',
                            '--ms', '1,1.1'])
    shutil.rmtree(WORKDIR, ignore_errors=True)
    print('done: val top-1 error %.3f, Rank@1 %.3f, mAP %.3f' % (val_err, rank1, mAP))
