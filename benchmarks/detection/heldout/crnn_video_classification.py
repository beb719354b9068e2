"""Trains HHTseng's ResNet-CRNN video classifier (a frozen ResNet run per frame under `torch.no_grad()`, trainable
fc/bn embedding layers, an LSTM decoder) on synthetic UCF101-style frame folders as module-level script code, the way
HHTseng/video-classification's ResNetCRNN/UCF101_ResNetCRNN.py does it, then runs ResNetCRNN_check_prediction.py's
module-level code: rebuild both halves on `device`, `load_state_dict(torch.load(...))`, predict every video.

Modeled on: HHTseng/video-classification, ResNetCRNN/UCF101_ResNetCRNN.py, ResNetCRNN/functions.py and
ResNetCRNN/ResNetCRNN_check_prediction.py at commit 99ebf204f0b1d737e38bc0d8b65aca128a57d7b1
(https://github.com/HHTseng/video-classification/tree/99ebf204f0b1d737e38bc0d8b65aca128a57d7b1).
Kept: the training script's module-level flow (hyper-parameter globals, `use_cuda = torch.cuda.is_available()`,
`device = torch.device("cuda" if use_cuda else "cpu")`, loader `params` with `pin_memory` only `if use_cuda`,
`LabelEncoder` / `OneHotEncoder` over the action names, action names parsed from the `v_<Action>_g..` folder names,
`train_test_split`, `Dataset_CRNN` loaders, both halves built with `.to(device)`, `nn.DataParallel` on each when
`torch.cuda.device_count() > 1` with the optimizer over `cnn_encoder.module.fc1...` parameters, else over
`cnn_encoder.fc1...` (the ResNet itself is never optimised), Adam, the epoch loop saving the score arrays with
`np.save`); `train(log_interval, model, device, train_loader, optimizer, epoch)` (`X.to(device)`,
`y.to(device).view(-1, )`, `loss.item()`, `accuracy_score` on `y.cpu().data.squeeze().numpy()`); `validation(model,
device, optimizer, test_loader)` (`eval()`, `torch.no_grad()`, device `y` / `y_pred` tensors collected in lists and
`torch.stack`ed, `.cpu()` for sklearn, three `torch.save(... .state_dict(), ...)` files per epoch named from the
module-level `epoch`); functions.py (`labels2cat` / `cat2labels` / ..., `Dataset_CRNN.read_images` stacking the
transformed frames, `CRNN_final_prediction` with `y_pred.cpu().data.squeeze().numpy().tolist()`, `ResCNNEncoder`
dropping the ResNet's fc via `list(resnet.children())[:-1]` and running it per time step under `torch.no_grad()`,
`DecoderRNN` with `flatten_parameters()` and the last time step's output); check_prediction.py's module-level flow
(its own `params` / `all_data_params`, reload with `torch.load` and no `map_location` into models already on
`device`, predictions for all videos saved next to their names and labels).
Changed to run here: the training script's `elif torch.cuda.device_count() == 1:` branch is an `else:`, so that a host
without a GPU (where the original leaves `crnn_params` undefined) builds the same optimizer, and both scripts' host
loader parameters (`{}`: batch 1, which the BatchNorm1d layers cannot train on and whose `.squeeze()` leaves
`CRNN_final_prediction` a 0-d array) get the batch size; the video folders are listed `sorted`; no torchvision / PIL /
pandas / matplotlib: `models.resnet152(pretrained=True)` is a small untrained ResNet with torchvision's child layout
(`conv1, bn1, relu, maxpool, layer1..4, avgpool, fc`), the `transforms.Compose([Resize, ToTensor, Normalize])`
pipeline is re-implemented on numpy frames stored as `.npy` instead of jpg, `UCF101actions.pkl` and the frame
folders are written to a temporary folder (each action moves a bright square in its own direction), the prediction
table is a pickled dict instead of a `DataFrame`, the loss plot is left out, tqdm writes to a string buffer.
Shrunk: 101 actions -> 5; 224 px -> 32; frames 1..28 -> 1..8; CNN fc 1024/768 -> 64/48, embedding 512 -> 32; LSTM
3 x 512 -> 2 x 32, fc 256 -> 16; 30 videos, batch 40 -> 6, 120 epochs -> 5, workers 4 -> 0.
"""
import io
import os
import pickle
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data as data
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import LabelEncoder, OneHotEncoder
from tqdm import tqdm

ROOT = tempfile.mkdtemp(prefix="ucf101_")
ACTIONS = ['ApplyEyeMakeup', 'Basketball', 'Biking', 'Diving', 'JumpRope']
DIRECTIONS = [(1, 0), (-1, 0), (0, 1), (0, -1), (1, 1)]


def write_ucf101(root, videos_per_action=6, n_frames=10, size=40):
    rng = np.random.RandomState(0)
    with open(os.path.join(root, 'UCF101actions.pkl'), 'wb') as f:
        pickle.dump(ACTIONS, f)
    for a, (action, (dx, dy)) in enumerate(zip(ACTIONS, DIRECTIONS)):
        for v in range(videos_per_action):
            folder = os.path.join(root, 'jpegs_256', 'v_{}_g{:02d}_c01'.format(action, v + 1))
            os.makedirs(folder)
            x, y = rng.randint(10, size - 10, 2)
            for t in range(1, n_frames + 1):
                frame = rng.randint(0, 60, (size, size, 3)).astype(np.uint8)
                cx, cy = int(np.clip(x + dx * 2 * t, 4, size - 5)), int(np.clip(y + dy * 2 * t, 4, size - 5))
                frame[cy - 4:cy + 4, cx - 4:cx + 4, :] = 230 - 30 * a
                np.save(os.path.join(folder, 'frame{:06d}.npy'.format(t)), frame)


write_ucf101(ROOT)


# ---------------------------------------------------------------------------------------------------------------------
# torchvision stand-ins: transforms on numpy frames, a small resnet with torchvision's child layout
# ---------------------------------------------------------------------------------------------------------------------
class transforms:
    class Compose:
        def __init__(self, ts):
            self.ts = ts

        def __call__(self, img):
            for t in self.ts:
                img = t(img)
            return img

    class Resize:
        def __init__(self, size):
            self.size = size

        def __call__(self, img):
            rows = np.linspace(0, img.shape[0] - 1, self.size[0]).round().astype(int)
            cols = np.linspace(0, img.shape[1] - 1, self.size[1]).round().astype(int)
            return img[rows][:, cols]

    class ToTensor:
        def __call__(self, img):
            return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))).float().div(255)

    class Normalize:
        def __init__(self, mean, std):
            self.mean, self.std = torch.tensor(mean).view(3, 1, 1), torch.tensor(std).view(3, 1, 1)

        def __call__(self, tensor):
            return (tensor - self.mean) / self.std


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1):
        super(BasicBlock, self).__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None if stride == 1 and inplanes == planes else nn.Sequential(
            nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + identity)


class ResNet(nn.Module):
    def __init__(self, widths=(8, 16, 32, 64), num_classes=1000):
        super(ResNet, self).__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = BasicBlock(widths[0], widths[0])
        self.layer2 = BasicBlock(widths[0], widths[1], 2)
        self.layer3 = BasicBlock(widths[1], widths[2], 2)
        self.layer4 = BasicBlock(widths[2], widths[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(widths[3], num_classes)


class models:
    @staticmethod
    def resnet152(pretrained=False):
        return ResNet()


# ---------------------------------------------------------------------------------------------------------------------
# ResNetCRNN/functions.py
# ---------------------------------------------------------------------------------------------------------------------
## ------------------- label conversion tools ------------------ ##
def labels2cat(label_encoder, list):
    return label_encoder.transform(list)

def cat2labels(label_encoder, y_cat):
    return label_encoder.inverse_transform(y_cat).tolist()


# for CRNN
class Dataset_CRNN(data.Dataset):
    "Characterizes a dataset for PyTorch"
    def __init__(self, data_path, folders, labels, frames, transform=None):
        "Initialization"
        self.data_path = data_path
        self.labels = labels
        self.folders = folders
        self.transform = transform
        self.frames = frames

    def __len__(self):
        "Denotes the total number of samples"
        return len(self.folders)

    def read_images(self, path, selected_folder, use_transform):
        X = []
        for i in self.frames:
            image = np.load(os.path.join(path, selected_folder, 'frame{:06d}.npy'.format(i)))

            if use_transform is not None:
                image = use_transform(image)

            X.append(image)
        X = torch.stack(X, dim=0)

        return X

    def __getitem__(self, index):
        "Generates one sample of data"
        # Select sample
        folder = self.folders[index]

        # Load data
        X = self.read_images(self.data_path, folder, self.transform)     # (input) spatial images
        y = torch.LongTensor([self.labels[index]])                  # (labels) LongTensor are for int64 instead of FloatTensor

        return X, y


def CRNN_final_prediction(model, device, loader):
    cnn_encoder, rnn_decoder = model
    cnn_encoder.eval()
    rnn_decoder.eval()

    all_y_pred = []
    with torch.no_grad():
        for batch_idx, (X, y) in enumerate(tqdm(loader, file=io.StringIO())):
            # distribute data to device
            X = X.to(device)
            output = rnn_decoder(cnn_encoder(X))
            y_pred = output.max(1, keepdim=True)[1]  # location of max log-probability as prediction
            all_y_pred.extend(y_pred.cpu().data.squeeze().numpy().tolist())

    return all_y_pred


# 2D CNN encoder using ResNet-152 pretrained
class ResCNNEncoder(nn.Module):
    def __init__(self, fc_hidden1=512, fc_hidden2=512, drop_p=0.3, CNN_embed_dim=300):
        """Load the pretrained ResNet-152 and replace top fc layer."""
        super(ResCNNEncoder, self).__init__()

        self.fc_hidden1, self.fc_hidden2 = fc_hidden1, fc_hidden2
        self.drop_p = drop_p

        resnet = models.resnet152(pretrained=True)
        modules = list(resnet.children())[:-1]      # delete the last fc layer.
        self.resnet = nn.Sequential(*modules)
        self.fc1 = nn.Linear(resnet.fc.in_features, fc_hidden1)
        self.bn1 = nn.BatchNorm1d(fc_hidden1, momentum=0.01)
        self.fc2 = nn.Linear(fc_hidden1, fc_hidden2)
        self.bn2 = nn.BatchNorm1d(fc_hidden2, momentum=0.01)
        self.fc3 = nn.Linear(fc_hidden2, CNN_embed_dim)

    def forward(self, x_3d):
        cnn_embed_seq = []
        for t in range(x_3d.size(1)):
            # ResNet CNN
            with torch.no_grad():
                x = self.resnet(x_3d[:, t, :, :, :])  # ResNet
                x = x.view(x.size(0), -1)             # flatten output of conv

            # FC layers
            x = self.bn1(self.fc1(x))
            x = F.relu(x)
            x = self.bn2(self.fc2(x))
            x = F.relu(x)
            x = F.dropout(x, p=self.drop_p, training=self.training)
            x = self.fc3(x)

            cnn_embed_seq.append(x)

        # swap time and sample dim such that (sample dim, time dim, CNN latent dim)
        cnn_embed_seq = torch.stack(cnn_embed_seq, dim=0).transpose_(0, 1)
        # cnn_embed_seq: shape=(batch, time_step, input_size)

        return cnn_embed_seq


class DecoderRNN(nn.Module):
    def __init__(self, CNN_embed_dim=300, h_RNN_layers=3, h_RNN=256, h_FC_dim=128, drop_p=0.3, num_classes=50):
        super(DecoderRNN, self).__init__()

        self.RNN_input_size = CNN_embed_dim
        self.h_RNN_layers = h_RNN_layers   # RNN hidden layers
        self.h_RNN = h_RNN                 # RNN hidden nodes
        self.h_FC_dim = h_FC_dim
        self.drop_p = drop_p
        self.num_classes = num_classes

        self.LSTM = nn.LSTM(
            input_size=self.RNN_input_size,
            hidden_size=self.h_RNN,
            num_layers=h_RNN_layers,
            batch_first=True,       # input & output will has batch size as 1s dimension. e.g. (batch, time_step, input_size)
        )

        self.fc1 = nn.Linear(self.h_RNN, self.h_FC_dim)
        self.fc2 = nn.Linear(self.h_FC_dim, self.num_classes)

    def forward(self, x_RNN):

        self.LSTM.flatten_parameters()
        RNN_out, (h_n, h_c) = self.LSTM(x_RNN, None)
        """ h_n shape (n_layers, batch, hidden_size), h_c shape (n_layers, batch, hidden_size) """
        """ None represents zero initial hidden state. RNN_out has shape=(batch, time_step, output_size) """

        # FC layers
        x = self.fc1(RNN_out[:, -1, :])   # choose RNN_out at the last time step
        x = F.relu(x)
        x = F.dropout(x, p=self.drop_p, training=self.training)
        x = self.fc2(x)

        return x


# ---------------------------------------------------------------------------------------------------------------------
# ResNetCRNN/UCF101_ResNetCRNN.py (module-level script code)
# ---------------------------------------------------------------------------------------------------------------------
# set path
data_path = os.path.join(ROOT, "jpegs_256")    # define UCF-101 RGB data path
action_name_path = os.path.join(ROOT, 'UCF101actions.pkl')
save_model_path = os.path.join(ROOT, "ResNetCRNN_ckpt")
os.makedirs(save_model_path)

# EncoderCNN architecture
CNN_fc_hidden1, CNN_fc_hidden2 = 64, 48
CNN_embed_dim = 32    # latent dim extracted by 2D CNN
res_size = 32         # ResNet image size
dropout_p = 0.0       # dropout probability

# DecoderRNN architecture
RNN_hidden_layers = 2
RNN_hidden_nodes = 32
RNN_FC_dim = 16

# training parameters
k = 5               # number of target category
epochs = 5          # training epochs
batch_size = 6
learning_rate = 1e-3
log_interval = 2    # interval for displaying training info

# Select which frame to begin & end in videos
begin_frame, end_frame, skip_frame = 1, 9, 1


def train(log_interval, model, device, train_loader, optimizer, epoch):
    # set model as training mode
    cnn_encoder, rnn_decoder = model
    cnn_encoder.train()
    rnn_decoder.train()

    losses = []
    scores = []
    N_count = 0   # counting total trained sample in one epoch
    for batch_idx, (X, y) in enumerate(train_loader):
        # distribute data to device
        X, y = X.to(device), y.to(device).view(-1, )

        N_count += X.size(0)

        optimizer.zero_grad()
        output = rnn_decoder(cnn_encoder(X))   # output has dim = (batch, number of classes)

        loss = F.cross_entropy(output, y)
        losses.append(loss.item())

        # to compute accuracy
        y_pred = torch.max(output, 1)[1]  # y_pred != output
        step_score = accuracy_score(y.cpu().data.squeeze().numpy(), y_pred.cpu().data.squeeze().numpy())
        scores.append(step_score)         # computed on CPU

        loss.backward()
        optimizer.step()

        # show information
        if (batch_idx + 1) % log_interval == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}, Accu: {:.2f}%'.format(
                epoch + 1, N_count, len(train_loader.dataset), 100. * (batch_idx + 1) / len(train_loader), loss.item(), 100 * step_score))

    return losses, scores


def validation(model, device, optimizer, test_loader):
    # set model as testing mode
    cnn_encoder, rnn_decoder = model
    cnn_encoder.eval()
    rnn_decoder.eval()

    test_loss = 0
    all_y = []
    all_y_pred = []
    with torch.no_grad():
        for X, y in test_loader:
            # distribute data to device
            X, y = X.to(device), y.to(device).view(-1, )

            output = rnn_decoder(cnn_encoder(X))

            loss = F.cross_entropy(output, y, reduction='sum')
            test_loss += loss.item()                 # sum up batch loss
            y_pred = output.max(1, keepdim=True)[1]  # (y_pred != output) get the index of the max log-probability

            # collect all y and y_pred in all batches
            all_y.extend(y)
            all_y_pred.extend(y_pred)

    test_loss /= len(test_loader.dataset)

    # compute accuracy
    all_y = torch.stack(all_y, dim=0)
    all_y_pred = torch.stack(all_y_pred, dim=0)
    test_score = accuracy_score(all_y.cpu().data.squeeze().numpy(), all_y_pred.cpu().data.squeeze().numpy())

    # show information
    print('\nTest set ({:d} samples): Average loss: {:.4f}, Accuracy: {:.2f}%\n'.format(len(all_y), test_loss, 100* test_score))

    # save Pytorch models of best record
    torch.save(cnn_encoder.state_dict(), os.path.join(save_model_path, 'cnn_encoder_epoch{}.pth'.format(epoch + 1)))  # save spatial_encoder
    torch.save(rnn_decoder.state_dict(), os.path.join(save_model_path, 'rnn_decoder_epoch{}.pth'.format(epoch + 1)))  # save motion_encoder
    torch.save(optimizer.state_dict(), os.path.join(save_model_path, 'optimizer_epoch{}.pth'.format(epoch + 1)))      # save optimizer
    print("Epoch {} model saved!".format(epoch + 1))

    return test_loss, test_score


# Detect devices
use_cuda = torch.cuda.is_available()                   # check if GPU exists
device = torch.device("cuda" if use_cuda else "cpu")   # use CPU or GPU

# Data loading parameters
params = {'batch_size': batch_size, 'shuffle': True, 'num_workers': 0, 'pin_memory': True} if use_cuda else {'batch_size': batch_size, 'shuffle': True}


# load UCF101 actions names
with open(action_name_path, 'rb') as f:
    action_names = pickle.load(f)

# convert labels -> category
le = LabelEncoder()
le.fit(action_names)

# show how many classes there are
list(le.classes_)

# convert category -> 1-hot
action_category = le.transform(action_names).reshape(-1, 1)
enc = OneHotEncoder()
enc.fit(action_category)

actions = []
fnames = sorted(os.listdir(data_path))

all_names = []
for f in fnames:
    loc1 = f.find('v_')
    loc2 = f.find('_g')
    actions.append(f[(loc1 + 2): loc2])

    all_names.append(f)


# list all data files
all_X_list = all_names                  # all video file names
all_y_list = labels2cat(le, actions)    # all video labels

# train, test split
train_list, test_list, train_label, test_label = train_test_split(all_X_list, all_y_list, test_size=0.25, random_state=42)

transform = transforms.Compose([transforms.Resize([res_size, res_size]),
                                transforms.ToTensor(),
                                transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])])

selected_frames = np.arange(begin_frame, end_frame, skip_frame).tolist()

train_set, valid_set = Dataset_CRNN(data_path, train_list, train_label, selected_frames, transform=transform), \
                       Dataset_CRNN(data_path, test_list, test_label, selected_frames, transform=transform)

train_loader = data.DataLoader(train_set, **params)
valid_loader = data.DataLoader(valid_set, **params)


# Create model
cnn_encoder = ResCNNEncoder(fc_hidden1=CNN_fc_hidden1, fc_hidden2=CNN_fc_hidden2, drop_p=dropout_p, CNN_embed_dim=CNN_embed_dim).to(device)
rnn_decoder = DecoderRNN(CNN_embed_dim=CNN_embed_dim, h_RNN_layers=RNN_hidden_layers, h_RNN=RNN_hidden_nodes,
                         h_FC_dim=RNN_FC_dim, drop_p=dropout_p, num_classes=k).to(device)

# Parallelize model to multiple GPUs
if torch.cuda.device_count() > 1:
    print("Using", torch.cuda.device_count(), "GPUs!")
    cnn_encoder = nn.DataParallel(cnn_encoder)
    rnn_decoder = nn.DataParallel(rnn_decoder)

    # Combine all EncoderCNN + DecoderRNN parameters
    crnn_params = list(cnn_encoder.module.fc1.parameters()) + list(cnn_encoder.module.bn1.parameters()) + \
                  list(cnn_encoder.module.fc2.parameters()) + list(cnn_encoder.module.bn2.parameters()) + \
                  list(cnn_encoder.module.fc3.parameters()) + list(rnn_decoder.parameters())

else:
    print("Using", torch.cuda.device_count(), "GPU!")
    # Combine all EncoderCNN + DecoderRNN parameters
    crnn_params = list(cnn_encoder.fc1.parameters()) + list(cnn_encoder.bn1.parameters()) + \
                  list(cnn_encoder.fc2.parameters()) + list(cnn_encoder.bn2.parameters()) + \
                  list(cnn_encoder.fc3.parameters()) + list(rnn_decoder.parameters())

optimizer = torch.optim.Adam(crnn_params, lr=learning_rate)


# record training process
epoch_train_losses = []
epoch_train_scores = []
epoch_test_losses = []
epoch_test_scores = []

# start training
for epoch in range(epochs):
    # train, test model
    train_losses, train_scores = train(log_interval, [cnn_encoder, rnn_decoder], device, train_loader, optimizer, epoch)
    epoch_test_loss, epoch_test_score = validation([cnn_encoder, rnn_decoder], device, optimizer, valid_loader)

    # save results
    epoch_train_losses.append(train_losses)
    epoch_train_scores.append(train_scores)
    epoch_test_losses.append(epoch_test_loss)
    epoch_test_scores.append(epoch_test_score)

    # save all train test results
    A = np.array(epoch_train_losses)
    B = np.array(epoch_train_scores)
    C = np.array(epoch_test_losses)
    D = np.array(epoch_test_scores)
    np.save(os.path.join(ROOT, 'CRNN_epoch_training_losses.npy'), A)
    np.save(os.path.join(ROOT, 'CRNN_epoch_training_scores.npy'), B)
    np.save(os.path.join(ROOT, 'CRNN_epoch_test_loss.npy'), C)
    np.save(os.path.join(ROOT, 'CRNN_epoch_test_score.npy'), D)


# ---------------------------------------------------------------------------------------------------------------------
# ResNetCRNN/ResNetCRNN_check_prediction.py (module-level script code)
# ---------------------------------------------------------------------------------------------------------------------
# data loading parameters
use_cuda = torch.cuda.is_available()                   # check if GPU exists
device = torch.device("cuda" if use_cuda else "cpu")   # use CPU or GPU
params = {'batch_size': batch_size, 'shuffle': True, 'num_workers': 0, 'pin_memory': True} if use_cuda else {'batch_size': batch_size, 'shuffle': True}

# reset data loader
all_data_params = {'batch_size': batch_size, 'shuffle': False, 'num_workers': 0, 'pin_memory': True} if use_cuda else {'batch_size': batch_size, 'shuffle': False}
all_data_loader = data.DataLoader(Dataset_CRNN(data_path, all_X_list, all_y_list, selected_frames, transform=transform), **all_data_params)


# reload CRNN model
cnn_encoder = ResCNNEncoder(fc_hidden1=CNN_fc_hidden1, fc_hidden2=CNN_fc_hidden2, drop_p=dropout_p, CNN_embed_dim=CNN_embed_dim).to(device)
rnn_decoder = DecoderRNN(CNN_embed_dim=CNN_embed_dim, h_RNN_layers=RNN_hidden_layers, h_RNN=RNN_hidden_nodes,
                         h_FC_dim=RNN_FC_dim, drop_p=dropout_p, num_classes=k).to(device)

cnn_encoder.load_state_dict(torch.load(os.path.join(save_model_path, 'cnn_encoder_epoch{}.pth'.format(epochs))))
rnn_decoder.load_state_dict(torch.load(os.path.join(save_model_path, 'rnn_decoder_epoch{}.pth'.format(epochs))))
print('CRNN model reloaded!')


# make all video predictions by reloaded model
print('Predicting all {} videos:'.format(len(all_data_loader.dataset)))
all_y_pred = CRNN_final_prediction([cnn_encoder, rnn_decoder], device, all_data_loader)


# write in pandas dataframe
df = {'filename': fnames, 'y': cat2labels(le, all_y_list), 'y_pred': cat2labels(le, all_y_pred)}
with open(os.path.join(ROOT, "UCF101_videos_prediction.pkl"), 'wb') as f:  # save pandas dataframe
    pickle.dump(df, f)
print('video prediction finished!')
print('done: {} / {} videos predicted correctly'.format(sum(a == b for a, b in zip(df['y'], df['y_pred'])), len(fnames)))
