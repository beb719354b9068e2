"""Image captioning: a CNN encoder and an LSTM decoder trained on packed padded captions, then greedy sampling.

Modeled on: yunjey/pytorch-tutorial, tutorials/03-advanced/image_captioning/ (model.py, train.py, sample.py,
data_loader.py, build_vocab.py) (https://github.com/yunjey/pytorch-tutorial/tree/master/tutorials/03-advanced/
image_captioning).
Kept: the module-level ``device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')`` in both the
training and the sampling script; the ``Vocabulary`` wrapper (pickled, ``<pad>``/``<start>``/``<end>``/``<unk>``);
the dataset returning ``(image, torch.Tensor(caption))`` on the host and ``collate_fn`` sorting by caption length,
``torch.stack`` of the images, zero-padded ``.long()`` targets and a Python list of lengths; ``EncoderCNN`` (a
backbone's children without its last ``fc``, run under ``torch.no_grad()``, then ``linear`` and ``BatchNorm1d``) and
``DecoderRNN`` (embedding, ``torch.cat((features.unsqueeze(1), embeddings), 1)``, ``pack_padded_sequence(...,
lengths, batch_first=True)``, LSTM, ``linear(hiddens[0])``; ``sample`` feeding its own greedy predictions back
through ``self.embed`` with ``states`` threaded through the loop and ``torch.stack(sampled_ids, 1)``); training with
``EncoderCNN(...).to(device)``, ``DecoderRNN(...).to(device)``, the optimizer over the decoder plus
``encoder.linear`` and ``encoder.bn`` parameters, ``images.to(device)``, ``captions.to(device)``, targets from
``pack_padded_sequence(captions, lengths, batch_first=True)[0]``, ``decoder.zero_grad(); encoder.zero_grad()``,
logging with ``np.exp(loss.item())``, and saving ``decoder-E-S.ckpt``/``encoder-E-S.ckpt`` state_dicts every
``save_step``; sampling with ``EncoderCNN(...).eval()``, ``.to(device)``, ``load_state_dict(torch.load(path))`` (no
``map_location``, as in the original), ``image.to(device)`` and ``sampled_ids[0].cpu().numpy()``. Shrunk: a small
random residual CNN stands in for the pretrained ResNet-152 (same ``children()[:-1]``/``fc.in_features`` use; seeded
inside ``EncoderCNN`` so that training and sampling build the same frozen backbone);
32x32 synthetic images of a coloured square at a position, captioned "a <colour> square on the <side>" (fixed
seed), held in memory instead of COCO files and nltk, no torchvision transforms; embed 32, hidden 64, batch 16, 6
epochs; settings as constant namespaces instead of argparse; files under a temporary folder; the matplotlib display
left out.
"""

import os
import pickle
import tempfile
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.utils.data as data
from torch.nn.utils.rnn import pack_padded_sequence


# ---------------------------------------------------------------------------------------------------------------
# build_vocab.py
# ---------------------------------------------------------------------------------------------------------------
class Vocabulary(object):
    """Simple vocabulary wrapper."""
    def __init__(self):
        self.word2idx = {}
        self.idx2word = {}
        self.idx = 0

    def add_word(self, word):
        if not word in self.word2idx:
            self.word2idx[word] = self.idx
            self.idx2word[self.idx] = word
            self.idx += 1

    def __call__(self, word):
        if not word in self.word2idx:
            return self.word2idx['<unk>']
        return self.word2idx[word]

    def __len__(self):
        return len(self.word2idx)


def build_vocab(captions, threshold):
    """Build a simple vocabulary wrapper."""
    from collections import Counter
    counter = Counter()
    for caption in captions:
        tokens = caption.lower().split()
        counter.update(tokens)

    # If the word frequency is less than 'threshold', then the word is discarded.
    words = [word for word, cnt in sorted(counter.items()) if cnt >= threshold]

    # Create a vocab wrapper and add some special tokens.
    vocab = Vocabulary()
    vocab.add_word('<pad>')
    vocab.add_word('<start>')
    vocab.add_word('<end>')
    vocab.add_word('<unk>')

    # Add the words to the vocabulary.
    for i, word in enumerate(words):
        vocab.add_word(word)
    return vocab


# ---------------------------------------------------------------------------------------------------------------
# synthetic "COCO": images and captions
# ---------------------------------------------------------------------------------------------------------------
COLOURS = {"red": (1.0, -1.0, -1.0), "green": (-1.0, 1.0, -1.0), "blue": (-1.0, -1.0, 1.0), "white": (1.0, 1.0, 1.0)}
SIDES = ["left", "right", "top", "bottom"]


def make_coco(n, seed):
    rng = np.random.RandomState(seed)
    images, captions = [], []
    for _ in range(n):
        colour = list(COLOURS)[rng.randint(len(COLOURS))]
        side = SIDES[rng.randint(len(SIDES))]
        img = rng.normal(0.0, 0.3, size=(3, 32, 32)).astype(np.float32)
        y, x = {"left": (12, 2), "right": (12, 20), "top": (2, 12), "bottom": (20, 12)}[side]
        img[:, y:y + 10, x:x + 10] += np.array(COLOURS[colour], dtype=np.float32)[:, None, None]
        images.append(img)
        if rng.rand() < 0.5:
            captions.append("a {} square on the {}".format(colour, side))
        else:
            captions.append("there is a {} square at the {}".format(colour, side))
    return images, captions


# ---------------------------------------------------------------------------------------------------------------
# data_loader.py
# ---------------------------------------------------------------------------------------------------------------
class CocoDataset(data.Dataset):
    """COCO Custom Dataset compatible with torch.utils.data.DataLoader."""
    def __init__(self, images, captions, vocab, transform=None):
        self.images = images
        self.captions = captions
        self.ids = list(range(len(captions)))
        self.vocab = vocab
        self.transform = transform

    def __getitem__(self, index):
        """Returns one data pair (image and caption)."""
        vocab = self.vocab
        ann_id = self.ids[index]
        caption = self.captions[ann_id]

        image = torch.from_numpy(self.images[ann_id])
        if self.transform is not None:
            image = self.transform(image)

        # Convert caption (string) to word ids.
        tokens = str(caption).lower().split()
        caption = []
        caption.append(vocab('<start>'))
        caption.extend([vocab(token) for token in tokens])
        caption.append(vocab('<end>'))
        target = torch.Tensor(caption)
        return image, target

    def __len__(self):
        return len(self.ids)


def collate_fn(data):
    """Creates mini-batch tensors from the list of tuples (image, caption)."""
    # Sort a data list by caption length (descending order).
    data.sort(key=lambda x: len(x[1]), reverse=True)
    images, captions = zip(*data)

    # Merge images (from tuple of 3D tensor to 4D tensor).
    images = torch.stack(images, 0)

    # Merge captions (from tuple of 1D tensor to 2D tensor).
    lengths = [len(cap) for cap in captions]
    targets = torch.zeros(len(captions), max(lengths)).long()
    for i, cap in enumerate(captions):
        end = lengths[i]
        targets[i, :end] = cap[:end]
    return images, targets, lengths


def get_loader(images, captions, vocab, transform, batch_size, shuffle, num_workers):
    """Returns torch.utils.data.DataLoader for custom coco dataset."""
    coco = CocoDataset(images=images, captions=captions, vocab=vocab, transform=transform)
    data_loader = torch.utils.data.DataLoader(dataset=coco,
                                              batch_size=batch_size,
                                              shuffle=shuffle,
                                              num_workers=num_workers,
                                              collate_fn=collate_fn)
    return data_loader


# ---------------------------------------------------------------------------------------------------------------
# model.py (a small random residual CNN stands in for torchvision's pretrained resnet152)
# ---------------------------------------------------------------------------------------------------------------
class BasicBlock(nn.Module):
    def __init__(self, in_planes, planes, stride=1):
        super(BasicBlock, self).__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class TinyResNet(nn.Module):
    def __init__(self, num_classes=10):
        super(TinyResNet, self).__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = BasicBlock(16, 16)
        self.layer2 = BasicBlock(16, 32, stride=2)
        self.layer3 = BasicBlock(32, 64, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((2, 2))
        self.fc = nn.Linear(64 * 4, num_classes)

    def forward(self, x):
        x = self.layer3(self.layer2(self.layer1(self.relu(self.bn1(self.conv1(x))))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class EncoderCNN(nn.Module):
    def __init__(self, embed_size):
        """Load the pretrained ResNet-152 and replace top fc layer."""
        super(EncoderCNN, self).__init__()
        torch.manual_seed(42)                        # the same "pretrained" backbone in training and sampling
        resnet = TinyResNet().eval()
        modules = list(resnet.children())[:-1]      # delete the last fc layer.
        self.resnet = nn.Sequential(*modules)
        self.linear = nn.Linear(resnet.fc.in_features, embed_size)
        self.bn = nn.BatchNorm1d(embed_size, momentum=0.01)

    def forward(self, images):
        """Extract feature vectors from input images."""
        with torch.no_grad():
            features = self.resnet(images)
        features = features.reshape(features.size(0), -1)
        features = self.bn(self.linear(features))
        return features


class DecoderRNN(nn.Module):
    def __init__(self, embed_size, hidden_size, vocab_size, num_layers, max_seq_length=20):
        """Set the hyper-parameters and build the layers."""
        super(DecoderRNN, self).__init__()
        self.embed = nn.Embedding(vocab_size, embed_size)
        self.lstm = nn.LSTM(embed_size, hidden_size, num_layers, batch_first=True)
        self.linear = nn.Linear(hidden_size, vocab_size)
        self.max_seg_length = max_seq_length

    def forward(self, features, captions, lengths):
        """Decode image feature vectors and generates captions."""
        embeddings = self.embed(captions)
        embeddings = torch.cat((features.unsqueeze(1), embeddings), 1)
        packed = pack_padded_sequence(embeddings, lengths, batch_first=True)
        hiddens, _ = self.lstm(packed)
        outputs = self.linear(hiddens[0])
        return outputs

    def sample(self, features, states=None):
        """Generate captions for given image features using greedy search."""
        sampled_ids = []
        inputs = features.unsqueeze(1)
        for i in range(self.max_seg_length):
            hiddens, states = self.lstm(inputs, states)          # hiddens: (batch_size, 1, hidden_size)
            outputs = self.linear(hiddens.squeeze(1))            # outputs:  (batch_size, vocab_size)
            _, predicted = outputs.max(1)                        # predicted: (batch_size)
            sampled_ids.append(predicted)
            inputs = self.embed(predicted)                       # inputs: (batch_size, embed_size)
            inputs = inputs.unsqueeze(1)                         # inputs: (batch_size, 1, embed_size)
        sampled_ids = torch.stack(sampled_ids, 1)                # sampled_ids: (batch_size, max_seq_length)
        return sampled_ids


# ---------------------------------------------------------------------------------------------------------------
# train.py
# ---------------------------------------------------------------------------------------------------------------
# Device configuration
device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')


def train_main(args):
    # Create model directory
    if not os.path.exists(args.model_path):
        os.makedirs(args.model_path)

    # Load vocabulary wrapper
    with open(args.vocab_path, 'rb') as f:
        vocab = pickle.load(f)

    # Build data loader
    images, captions = make_coco(96, seed=1)
    data_loader = get_loader(images, captions, vocab, None, args.batch_size,
                             shuffle=True, num_workers=args.num_workers)

    # Build the models
    encoder = EncoderCNN(args.embed_size).to(device)
    decoder = DecoderRNN(args.embed_size, args.hidden_size, len(vocab), args.num_layers).to(device)

    # Loss and optimizer
    criterion = nn.CrossEntropyLoss()
    params = list(decoder.parameters()) + list(encoder.linear.parameters()) + list(encoder.bn.parameters())
    optimizer = torch.optim.Adam(params, lr=args.learning_rate)

    # Train the models
    total_step = len(data_loader)
    for epoch in range(args.num_epochs):
        for i, (images, captions, lengths) in enumerate(data_loader):

            # Set mini-batch dataset
            images = images.to(device)
            captions = captions.to(device)
            targets = pack_padded_sequence(captions, lengths, batch_first=True)[0]

            # Forward, backward and optimize
            features = encoder(images)
            outputs = decoder(features, captions, lengths)
            loss = criterion(outputs, targets)
            decoder.zero_grad()
            encoder.zero_grad()
            loss.backward()
            optimizer.step()

            # Print log info
            if i % args.log_step == 0:
                print('Epoch [{}/{}], Step [{}/{}], Loss: {:.4f}, Perplexity: {:5.4f}'
                      .format(epoch, args.num_epochs, i, total_step, loss.item(), np.exp(loss.item())))

            # Save the model checkpoints
            if (i+1) % args.save_step == 0:
                torch.save(decoder.state_dict(), os.path.join(
                    args.model_path, 'decoder-{}-{}.ckpt'.format(epoch+1, i+1)))
                torch.save(encoder.state_dict(), os.path.join(
                    args.model_path, 'encoder-{}-{}.ckpt'.format(epoch+1, i+1)))


# ---------------------------------------------------------------------------------------------------------------
# sample.py
# ---------------------------------------------------------------------------------------------------------------
def load_image(image, transform=None):
    image = torch.from_numpy(image)
    if transform is not None:
        image = transform(image).unsqueeze(0)
    return image


def sample_main(args):
    # Load vocabulary wrapper
    with open(args.vocab_path, 'rb') as f:
        vocab = pickle.load(f)

    # Build models
    encoder = EncoderCNN(args.embed_size).eval()  # eval mode (batchnorm uses moving mean/variance)
    decoder = DecoderRNN(args.embed_size, args.hidden_size, len(vocab), args.num_layers)
    encoder = encoder.to(device)
    decoder = decoder.to(device)

    # Load the trained model parameters
    encoder.load_state_dict(torch.load(args.encoder_path))
    decoder.load_state_dict(torch.load(args.decoder_path))

    # Prepare an image
    image = load_image(args.image, transform=lambda t: t)
    image_tensor = image.to(device)

    # Generate an caption from the image
    feature = encoder(image_tensor)
    sampled_ids = decoder.sample(feature)
    sampled_ids = sampled_ids[0].cpu().numpy()          # (1, max_seq_length) -> (max_seq_length)

    # Convert word_ids to words
    sampled_caption = []
    for word_id in sampled_ids:
        word = vocab.idx2word[word_id]
        sampled_caption.append(word)
        if word == '<end>':
            break
    sentence = ' '.join(sampled_caption)

    # Print out the generated caption
    print(sentence)


if __name__ == '__main__':
    torch.manual_seed(0)
    root = tempfile.mkdtemp()

    # build_vocab.py
    _, all_captions = make_coco(96, seed=1)
    vocab = build_vocab(all_captions, threshold=1)
    vocab_path = os.path.join(root, 'vocab.pkl')
    with open(vocab_path, 'wb') as f:
        pickle.dump(vocab, f)
    print("Total vocabulary size: {}".format(len(vocab)))

    args = SimpleNamespace(model_path=os.path.join(root, 'models/'), vocab_path=vocab_path, log_step=2, save_step=6,
                           embed_size=32, hidden_size=64, num_layers=1, num_epochs=6, batch_size=16, num_workers=0,
                           learning_rate=0.005)
    train_main(args)

    test_images, test_captions = make_coco(3, seed=99)
    for img, cap in zip(test_images, test_captions):
        print('reference:', cap)
        sample_args = SimpleNamespace(image=img, encoder_path=os.path.join(args.model_path, 'encoder-6-6.ckpt'),
                                      decoder_path=os.path.join(args.model_path, 'decoder-6-6.ckpt'),
                                      vocab_path=vocab_path, embed_size=32, hidden_size=64, num_layers=1)
        sample_main(sample_args)
    print('done')
