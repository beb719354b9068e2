"""Fine-tunes a C3D action-recognition network on clips of preprocessed video frames the way
jfzhang95/pytorch-video-recognition's train.py does it: the model is built on the host and initialised from a
"pretrained" Sports-1M-style state dict (`torch.load` without `map_location`, keys renamed), trained with SGD on two
parameter groups (fc8 at 10x the learning rate) and StepLR, alternating train and val phases each epoch with
snapshots of model and optimizer and a periodic test pass; a second call resumes from a snapshot
(`map_location=lambda storage, loc: storage`); then inference.py's loop loads the last snapshot onto the device and
classifies a sliding window of 16 frames over a video.

Modeled on: jfzhang95/pytorch-video-recognition, train.py, inference.py, network/C3D_model.py,
dataloaders/dataset.py and mypath.py at commit ca37de9f69a961f22a821c157e9ccf47a601904d
(https://github.com/jfzhang95/pytorch-video-recognition/blob/ca37de9f69a961f22a821c157e9ccf47a601904d/train.py and
the other files at the same commit).

Kept: train.py's module-level configuration (`device = torch.device("cuda:0" if torch.cuda.is_available() else
"cpu")`, `nEpochs`, `resume_epoch`, `useTest`, `nTestInterval`, `snapshot`, `lr`, the `run/run_<id>` folder found with
`glob`, `modelName`/`saveName`); `train_model` as written: `C3D(num_classes, pretrained=True)`, the
`get_1x_lr_params`/`get_10x_lr_params` groups, SGD, `StepLR`, the resume branch (`torch.load(..., map_location=lambda
storage, loc: storage)`, model and optimizer `load_state_dict`), `model.to(device)` and `criterion.to(device)` after
the optimizer exists, `scheduler.step()` at the start of each train phase,
`model.train()`/`model.eval()`, `Variable(inputs, requires_grad=True).to(device)`, `Variable(labels).to(device)`,
`optimizer.zero_grad()` in both phases, the val forward under `torch.no_grad()`, `nn.Softmax(dim=1)` and
`torch.max(probs, 1)[1]`, `loss.item() * inputs.size(0)`, `running_corrects += torch.sum(preds == labels.data)` (a
device tensor) and `.double() / size` handed to the writer, `torch.save` of epoch, `state_dict` and `opt_dict`, and the
test pass (`.to(device)`, forward under `torch.no_grad()`, loss outside it); C3D_model.py's network, `__init_weight`
and `__load_pretrained_weights` (`torch.load(Path.model_dir())`, the `corresp_name` renaming into
`self.state_dict()`); dataset.py's `VideoDataset` (split/class/video frame folders, `label2index`, the labels file in
`dataloaders/`, `load_frames`, random temporal and spatial `crop`, `randomflip` for the test split, mean subtraction,
`to_tensor`, `torch.from_numpy` of buffer and label); inference.py's `main` (`map_location=lambda storage, loc:
storage`, `model.to(device)`, `model.eval()`, `center_crop`, mean subtraction, `np.transpose` to 1 x C x T x H x W,
`Variable(inputs, requires_grad=False).to(device)`, forward under `torch.no_grad()`,
`torch.max(probs, 1)[1].detach().cpu().numpy()[0]` and `probs[0][label]` formatted with `%.4f`).

Changed to run here: no videos, OpenCV, tensorboardX or pretrained weights here: `write_synthetic_ucf` writes the
preprocessed frame folders directly (three classes of a bright square moving in a class-dependent direction, 20
frames per video as `.npy` files read with `np.load` instead of `cv2.imread`; the OpenCV `preprocess` is left out) and
a randomly initialised C3D state dict under the Sports-1M key names as the "pretrained" file; `SummaryWriter` is a
stand-in keeping the scalars; inference reads one synthetic video's frames instead of `cv2.VideoCapture` and collects
the predictions instead of drawing them; `mypath.Path` points into a temporary working folder (holding `run/` and
`dataloaders/`) removed at the end; progress bars and execution-time prints are dropped; `train_model` returns its
scalars. One fix: the author moves the model after the resume branch, so `optimizer.load_state_dict` puts SGD's
momentum buffers on the CPU and the first `optimizer.step()` on a GPU fails with tensors on two devices; here
`model.to(device)`/`criterion.to(device)` come before the resume branch (still after the optimizer is built).
Shrunk: C3D channels 64-128-256-512-512 -> 8-16-32-64-64 and fc6/fc7 4096 -> 64 (`x.view(-1, 8192)` is
`x.view(-1, 256)`); frames 128x171 with 112x112 crops -> 64x86 with 56x56 crops (inference's center crop alike); 3
classes, 8/2/2 videos per class for train/val/test; batch size 20 -> 4; `num_workers` 4 -> 0; 2 epochs, then resumed
for 2 more; `snapshot` 50 -> 1, `nTestInterval` 20 -> 2, StepLR step 10 -> 2.
"""
import glob
import os
import shutil
import tempfile
import timeit

import numpy as np
import torch
from torch import nn, optim
from torch.autograd import Variable
from torch.utils.data import DataLoader, Dataset

WORKDIR = tempfile.mkdtemp(prefix='c3d_')
CLASSES = ['ApplyEyeMakeup', 'Biking', 'PushUps']


class Path(object):
    @staticmethod
    def db_dir(database):
        if database == 'ucf101':
            root_dir = os.path.join(WORKDIR, 'UCF-101')  # folder that contains class labels
            output_dir = os.path.join(WORKDIR, 'VAR', 'ucf101')
            return root_dir, output_dir
        else:
            print('Database {} not available.'.format(database))
            raise NotImplementedError

    @staticmethod
    def model_dir():
        return os.path.join(WORKDIR, 'Models', 'c3d-pretrained.pth')


def synthetic_frames(label, rng, n_frames=20, height=64, width=86):
    """A bright square moving right (0), down (1) or diagonally (2) over a noisy BGR background, as float frames."""
    frames = rng.uniform(60, 120, size=(n_frames, height, width, 3)).astype(np.float32)
    y, x = rng.randint(8, 24), rng.randint(8, 24)
    dy, dx = [(0, 2), (2, 0), (2, 2)][label]
    for t in range(n_frames):
        yy, xx = (y + dy * t) % (height - 12), (x + dx * t) % (width - 12)
        frames[t, yy:yy + 12, xx:xx + 12, :] = 230.0
    return frames


def write_synthetic_ucf(seed=0, counts=(('train', 8), ('val', 2), ('test', 2))):
    """Writes output_dir/{split}/{class}/{video}/0000{i}.npy like dataset.py's `process_video` writes its jpgs."""
    rng = np.random.RandomState(seed)
    root_dir, output_dir = Path.db_dir('ucf101')
    for label, name in enumerate(CLASSES):
        os.makedirs(os.path.join(root_dir, name), exist_ok=True)
        for split, count in counts:
            for v in range(count):
                folder = os.path.join(output_dir, split, name, 'v_{}_g{:02d}_c01'.format(name, v))
                os.makedirs(folder)
                for i, frame in enumerate(synthetic_frames(label, rng)):
                    np.save(os.path.join(folder, '0000{:02d}.npy'.format(i)), frame)
    # the Sports-1M-style pretrained weights read by C3D.__load_pretrained_weights
    os.makedirs(os.path.dirname(Path.model_dir()))
    sports = C3D(num_classes=487).state_dict()
    names = zip(['features.%d' % i for i in (0, 3, 6, 8, 11, 13, 16, 18)] + ['classifier.%d' % i for i in (0, 3, 6)],
                ['conv1', 'conv2', 'conv3a', 'conv3b', 'conv4a', 'conv4b', 'conv5a', 'conv5b', 'fc6', 'fc7', 'fc8'])
    torch.save({old + suffix: sports[new + suffix] for old, new in names for suffix in ('.weight', '.bias')},
               Path.model_dir())


# ----------------------------------------------------------------------------- network/C3D_model.py

class C3D(nn.Module):
    """The C3D network."""

    def __init__(self, num_classes, pretrained=False):
        super(C3D, self).__init__()
        self.conv1 = nn.Conv3d(3, 8, kernel_size=(3, 3, 3), padding=(1, 1, 1))
        self.pool1 = nn.MaxPool3d(kernel_size=(1, 2, 2), stride=(1, 2, 2))
        self.conv2 = nn.Conv3d(8, 16, kernel_size=(3, 3, 3), padding=(1, 1, 1))
        self.pool2 = nn.MaxPool3d(kernel_size=(2, 2, 2), stride=(2, 2, 2))
        self.conv3a = nn.Conv3d(16, 32, kernel_size=(3, 3, 3), padding=(1, 1, 1))
        self.conv3b = nn.Conv3d(32, 32, kernel_size=(3, 3, 3), padding=(1, 1, 1))
        self.pool3 = nn.MaxPool3d(kernel_size=(2, 2, 2), stride=(2, 2, 2))
        self.conv4a = nn.Conv3d(32, 64, kernel_size=(3, 3, 3), padding=(1, 1, 1))
        self.conv4b = nn.Conv3d(64, 64, kernel_size=(3, 3, 3), padding=(1, 1, 1))
        self.pool4 = nn.MaxPool3d(kernel_size=(2, 2, 2), stride=(2, 2, 2))
        self.conv5a = nn.Conv3d(64, 64, kernel_size=(3, 3, 3), padding=(1, 1, 1))
        self.conv5b = nn.Conv3d(64, 64, kernel_size=(3, 3, 3), padding=(1, 1, 1))
        self.pool5 = nn.MaxPool3d(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 1, 1))
        self.fc6 = nn.Linear(256, 64)
        self.fc7 = nn.Linear(64, 64)
        self.fc8 = nn.Linear(64, num_classes)
        self.dropout = nn.Dropout(p=0.5)
        self.relu = nn.ReLU()
        self.__init_weight()
        if pretrained:
            self.__load_pretrained_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.pool1(x)
        x = self.relu(self.conv2(x))
        x = self.pool2(x)
        x = self.relu(self.conv3a(x))
        x = self.relu(self.conv3b(x))
        x = self.pool3(x)
        x = self.relu(self.conv4a(x))
        x = self.relu(self.conv4b(x))
        x = self.pool4(x)
        x = self.relu(self.conv5a(x))
        x = self.relu(self.conv5b(x))
        x = self.pool5(x)
        x = x.view(-1, 256)
        x = self.relu(self.fc6(x))
        x = self.dropout(x)
        x = self.relu(self.fc7(x))
        x = self.dropout(x)
        logits = self.fc8(x)
        return logits

    def __load_pretrained_weights(self):
        """Initialiaze network."""
        corresp_name = {
            # Conv1 .. Conv5b
            "features.0.weight": "conv1.weight", "features.0.bias": "conv1.bias",
            "features.3.weight": "conv2.weight", "features.3.bias": "conv2.bias",
            "features.6.weight": "conv3a.weight", "features.6.bias": "conv3a.bias",
            "features.8.weight": "conv3b.weight", "features.8.bias": "conv3b.bias",
            "features.11.weight": "conv4a.weight", "features.11.bias": "conv4a.bias",
            "features.13.weight": "conv4b.weight", "features.13.bias": "conv4b.bias",
            "features.16.weight": "conv5a.weight", "features.16.bias": "conv5a.bias",
            "features.18.weight": "conv5b.weight", "features.18.bias": "conv5b.bias",
            # fc6, fc7
            "classifier.0.weight": "fc6.weight", "classifier.0.bias": "fc6.bias",
            "classifier.3.weight": "fc7.weight", "classifier.3.bias": "fc7.bias",
        }

        p_dict = torch.load(Path.model_dir())
        s_dict = self.state_dict()
        for name in p_dict:
            if name not in corresp_name:
                continue
            s_dict[corresp_name[name]] = p_dict[name]
        self.load_state_dict(s_dict)

    def __init_weight(self):
        for m in self.modules():
            if isinstance(m, nn.Conv3d):
                torch.nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm3d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()


def get_1x_lr_params(model):
    """This generator returns all the parameters for conv and two fc layers of the net."""
    b = [model.conv1, model.conv2, model.conv3a, model.conv3b, model.conv4a, model.conv4b,
         model.conv5a, model.conv5b, model.fc6, model.fc7]
    for i in range(len(b)):
        for k in b[i].parameters():
            if k.requires_grad:
                yield k


def get_10x_lr_params(model):
    """This generator returns all the parameters for the last fc layer of the net."""
    b = [model.fc8]
    for j in range(len(b)):
        for k in b[j].parameters():
            if k.requires_grad:
                yield k


# ----------------------------------------------------------------------------- dataloaders/dataset.py

class VideoDataset(Dataset):
    r"""A Dataset for a folder of videos. Expects the directory structure to be
    directory->[train/val/test]->[class labels]->[videos]."""

    def __init__(self, dataset='ucf101', split='train', clip_len=16, preprocess=False):
        self.root_dir, self.output_dir = Path.db_dir(dataset)
        folder = os.path.join(self.output_dir, split)
        self.clip_len = clip_len
        self.split = split

        # The following three parameters are chosen as described in the paper section 4.1 (shrunk here)
        self.resize_height = 64
        self.resize_width = 86
        self.crop_size = 56

        if not self.check_integrity():
            raise RuntimeError('Dataset not found or corrupted.' +
                               ' You need to download it from official website.')

        # Obtain all the filenames of files inside all the class folders
        self.fnames, labels = [], []
        for label in sorted(os.listdir(folder)):
            for fname in sorted(os.listdir(os.path.join(folder, label))):
                self.fnames.append(os.path.join(folder, label, fname))
                labels.append(label)

        assert len(labels) == len(self.fnames)
        print('Number of {} videos: {:d}'.format(split, len(self.fnames)))

        # Prepare a mapping between the label names (strings) and indices (ints)
        self.label2index = {label: index for index, label in enumerate(sorted(set(labels)))}
        # Convert the list of label names into an array of label indices
        self.label_array = np.array([self.label2index[label] for label in labels], dtype=int)

        if dataset == "ucf101":
            if not os.path.exists('dataloaders/ucf_labels.txt'):
                with open('dataloaders/ucf_labels.txt', 'w') as f:
                    for id, label in enumerate(sorted(self.label2index)):
                        f.writelines(str(id + 1) + ' ' + label + '\n')

    def __len__(self):
        return len(self.fnames)

    def __getitem__(self, index):
        # Loading and preprocessing.
        buffer = self.load_frames(self.fnames[index])
        buffer = self.crop(buffer, self.clip_len, self.crop_size)
        labels = np.array(self.label_array[index])

        if self.split == 'test':
            # Perform data augmentation
            buffer = self.randomflip(buffer)
        buffer = self.normalize(buffer)
        buffer = self.to_tensor(buffer)
        return torch.from_numpy(buffer), torch.from_numpy(labels)

    def check_integrity(self):
        return os.path.exists(self.root_dir)

    def randomflip(self, buffer):
        """Horizontally flip the given image and ground truth randomly with a probability of 0.5."""
        if np.random.random() < 0.5:
            for i, frame in enumerate(buffer):
                frame = np.flip(buffer[i], axis=1)
                buffer[i] = np.flip(frame, axis=1)
        return buffer

    def normalize(self, buffer):
        for i, frame in enumerate(buffer):
            frame -= np.array([[[90.0, 98.0, 102.0]]])
            buffer[i] = frame
        return buffer

    def to_tensor(self, buffer):
        return buffer.transpose((3, 0, 1, 2))

    def load_frames(self, file_dir):
        frames = sorted([os.path.join(file_dir, img) for img in os.listdir(file_dir)])
        frame_count = len(frames)
        buffer = np.empty((frame_count, self.resize_height, self.resize_width, 3), np.dtype('float32'))
        for i, frame_name in enumerate(frames):
            frame = np.array(np.load(frame_name)).astype(np.float64)
            buffer[i] = frame
        return buffer

    def crop(self, buffer, clip_len, crop_size):
        # randomly select time index for temporal jittering
        time_index = np.random.randint(buffer.shape[0] - clip_len)
        # Randomly select start indices in order to crop the video
        height_index = np.random.randint(buffer.shape[1] - crop_size)
        width_index = np.random.randint(buffer.shape[2] - crop_size)
        buffer = buffer[time_index:time_index + clip_len,
                        height_index:height_index + crop_size,
                        width_index:width_index + crop_size, :]
        return buffer


# ----------------------------------------------------------------------------- train.py

class SummaryWriter(object):  # stand-in for tensorboardX's: keeps the scalars
    def __init__(self, log_dir=None):
        self.scalars = {}

    def add_scalar(self, tag, value, step):
        self.scalars.setdefault(tag, []).append((step, float(value)))

    def close(self):
        pass


# Use GPU if available else revert to CPU
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
print("Device being used:", device)

nEpochs = 2  # Number of epochs for training
resume_epoch = 0  # Default is 0, change if want to resume
useTest = True  # See evolution of the test set when training
nTestInterval = 2  # Run on test set every nTestInterval epochs
snapshot = 1  # Store a model every snapshot epochs
lr = 1e-3  # Learning rate

dataset = 'ucf101'  # Options: hmdb51 or ucf101
num_classes = len(CLASSES)

save_dir_root = WORKDIR
runs = sorted(glob.glob(os.path.join(save_dir_root, 'run', 'run_*')))
run_id = int(runs[-1].split('_')[-1]) + 1 if runs else 0
save_dir = os.path.join(save_dir_root, 'run', 'run_' + str(run_id))
modelName = 'C3D'  # Options: C3D or R2Plus1D or R3D
saveName = modelName + '-' + dataset


def train_model(dataset=dataset, save_dir=save_dir, num_classes=num_classes, lr=lr,
                num_epochs=nEpochs, save_epoch=snapshot, useTest=useTest, test_interval=nTestInterval):
    if modelName == 'C3D':
        model = C3D(num_classes=num_classes, pretrained=True)
        train_params = [{'params': get_1x_lr_params(model), 'lr': lr},
                        {'params': get_10x_lr_params(model), 'lr': lr * 10}]
    else:
        print('We only implemented C3D and R2Plus1D models.')
        raise NotImplementedError
    criterion = nn.CrossEntropyLoss()  # standard crossentropy loss for classification
    optimizer = optim.SGD(train_params, lr=lr, momentum=0.9, weight_decay=5e-4)
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=2,
                                          gamma=0.1)  # the scheduler divides the lr by 10 every 10 epochs

    model.to(device)  # moved up from below the resume branch (see the docstring)
    criterion.to(device)

    if resume_epoch == 0:
        print("Training {} from scratch...".format(modelName))
    else:
        checkpoint = torch.load(
            os.path.join(save_dir, 'models', saveName + '_epoch-' + str(resume_epoch - 1) + '.pth.tar'),
            map_location=lambda storage, loc: storage)  # Load all tensors onto the CPU
        print("Initializing weights from: {}...".format(
            os.path.join(save_dir, 'models', saveName + '_epoch-' + str(resume_epoch - 1) + '.pth.tar')))
        model.load_state_dict(checkpoint['state_dict'])
        optimizer.load_state_dict(checkpoint['opt_dict'])

    print('Total params: %.2fM' % (sum(p.numel() for p in model.parameters()) / 1000000.0))

    log_dir = os.path.join(save_dir, 'models')
    os.makedirs(log_dir, exist_ok=True)
    writer = SummaryWriter(log_dir=log_dir)

    print('Training model on {} dataset...'.format(dataset))
    train_dataloader = DataLoader(VideoDataset(dataset=dataset, split='train', clip_len=16), batch_size=4,
                                  shuffle=True, num_workers=0)
    val_dataloader = DataLoader(VideoDataset(dataset=dataset, split='val', clip_len=16), batch_size=4, num_workers=0)
    test_dataloader = DataLoader(VideoDataset(dataset=dataset, split='test', clip_len=16), batch_size=4,
                                 num_workers=0)

    trainval_loaders = {'train': train_dataloader, 'val': val_dataloader}
    trainval_sizes = {x: len(trainval_loaders[x].dataset) for x in ['train', 'val']}
    test_size = len(test_dataloader.dataset)

    for epoch in range(resume_epoch, num_epochs):
        # each epoch has a training and validation step
        for phase in ['train', 'val']:
            start_time = timeit.default_timer()
            # reset the running loss and corrects
            running_loss = 0.0
            running_corrects = 0.0
            # set model to train() or eval() mode depending on whether it is trained or being validated
            if phase == 'train':
                # scheduler.step() is to be called once every epoch during training
                scheduler.step()
                model.train()
            else:
                model.eval()

            for inputs, labels in trainval_loaders[phase]:
                # move inputs and labels to the device the training is taking place on
                inputs = Variable(inputs, requires_grad=True).to(device)
                labels = Variable(labels).to(device)
                optimizer.zero_grad()
                if phase == 'train':
                    outputs = model(inputs)
                else:
                    with torch.no_grad():
                        outputs = model(inputs)
                probs = nn.Softmax(dim=1)(outputs)
                preds = torch.max(probs, 1)[1]
                loss = criterion(outputs, labels)
                if phase == 'train':
                    loss.backward()
                    optimizer.step()
                running_loss += loss.item() * inputs.size(0)
                running_corrects += torch.sum(preds == labels.data)

            epoch_loss = running_loss / trainval_sizes[phase]
            epoch_acc = running_corrects.double() / trainval_sizes[phase]

            if phase == 'train':
                writer.add_scalar('data/train_loss_epoch', epoch_loss, epoch)
                writer.add_scalar('data/train_acc_epoch', epoch_acc, epoch)
            else:
                writer.add_scalar('data/val_loss_epoch', epoch_loss, epoch)
                writer.add_scalar('data/val_acc_epoch', epoch_acc, epoch)

            print("[{}] Epoch: {}/{} Loss: {} Acc: {}".format(phase, epoch + 1, nEpochs, epoch_loss, epoch_acc))

        if epoch % save_epoch == (save_epoch - 1):
            torch.save({
                'epoch': epoch + 1,
                'state_dict': model.state_dict(),
                'opt_dict': optimizer.state_dict(),
            }, os.path.join(save_dir, 'models', saveName + '_epoch-' + str(epoch) + '.pth.tar'))
            print("Save model at {}\n".format(
                os.path.join(save_dir, 'models', saveName + '_epoch-' + str(epoch) + '.pth.tar')))

        if useTest and epoch % test_interval == (test_interval - 1):
            model.eval()
            start_time = timeit.default_timer()
            running_loss = 0.0
            running_corrects = 0.0
            for inputs, labels in test_dataloader:
                inputs = inputs.to(device)
                labels = labels.to(device)

                with torch.no_grad():
                    outputs = model(inputs)
                probs = nn.Softmax(dim=1)(outputs)
                preds = torch.max(probs, 1)[1]
                loss = criterion(outputs, labels)

                running_loss += loss.item() * inputs.size(0)
                running_corrects += torch.sum(preds == labels.data)

            epoch_loss = running_loss / test_size
            epoch_acc = running_corrects.double() / test_size

            writer.add_scalar('data/test_loss_epoch', epoch_loss, epoch)
            writer.add_scalar('data/test_acc_epoch', epoch_acc, epoch)

            print("[test] Epoch: {}/{} Loss: {} Acc: {}".format(epoch + 1, nEpochs, epoch_loss, epoch_acc))

    writer.close()
    return writer.scalars


# ----------------------------------------------------------------------------- inference.py

def center_crop(frame):
    frame = frame[4:60, 15:71, :]
    return np.array(frame).astype(np.uint8)


def inference(checkpoint_path, video_dir):
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    print("Device being used:", device)

    with open('./dataloaders/ucf_labels.txt', 'r') as f:
        class_names = f.readlines()
        f.close()
    # init model
    model = C3D(num_classes=num_classes)
    checkpoint = torch.load(checkpoint_path, map_location=lambda storage, loc: storage)
    model.load_state_dict(checkpoint['state_dict'])
    model.to(device)
    model.eval()

    # read video
    frames = [np.load(os.path.join(video_dir, name)) for name in sorted(os.listdir(video_dir))]
    predictions = []

    clip = []
    for frame in frames:
        tmp_ = center_crop(frame)
        tmp = tmp_ - np.array([[[90.0, 98.0, 102.0]]])
        clip.append(tmp)
        if len(clip) == 16:
            inputs = np.array(clip).astype(np.float32)
            inputs = np.expand_dims(inputs, axis=0)
            inputs = np.transpose(inputs, (0, 4, 1, 2, 3))
            inputs = torch.from_numpy(inputs)
            inputs = torch.autograd.Variable(inputs, requires_grad=False).to(device)
            with torch.no_grad():
                outputs = model.forward(inputs)

            probs = torch.nn.Softmax(dim=1)(outputs)
            label = torch.max(probs, 1)[1].detach().cpu().numpy()[0]

            predictions.append((class_names[label].split(' ')[-1].strip(), "prob: %.4f" % probs[0][label]))
            clip.pop(0)

    return predictions


if __name__ == "__main__":
    cwd = os.getcwd()
    os.chdir(WORKDIR)
    os.makedirs('dataloaders')
    np.random.seed(0)
    torch.manual_seed(0)
    write_synthetic_ucf()
    first = train_model()
    # resume from the last snapshot for two more epochs
    resume_epoch = nEpochs
    nEpochs = 4
    second = train_model(num_epochs=nEpochs)
    checkpoint_path = os.path.join(save_dir, 'models', saveName + '_epoch-' + str(nEpochs - 1) + '.pth.tar')
    video = os.path.join(Path.db_dir('ucf101')[1], 'test', CLASSES[1], 'v_{}_g00_c01'.format(CLASSES[1]))
    predictions = inference(checkpoint_path, video)
    for name, prob in predictions:
        print(name, prob)
    os.chdir(cwd)
    shutil.rmtree(WORKDIR, ignore_errors=True)
    print("done: train acc {:.3f}, val acc {:.3f}, test acc {:.3f}, {} windows classified".format(
        second['data/train_acc_epoch'][-1][1], second['data/val_acc_epoch'][-1][1],
        second['data/test_acc_epoch'][-1][1], len(predictions)))
