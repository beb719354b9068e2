"""Trains a "Show, Attend and Tell" captioner (a CNN encoder with adaptive pooling, an LSTMCell decoder with soft
attention, a gating scalar and doubly stochastic attention regularisation) on synthetic shape images with two
captions each, validating with loss, top-5 accuracy and corpus BLEU-4 every epoch and checkpointing whole models and
optimizers; then resumes from the checkpoint with encoder fine-tuning switched on, and finally captions a new image
with beam search from the best checkpoint, as caption.py does.

Modeled on: sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning, train.py, models.py, datasets.py, utils.py and caption.py
(https://github.com/sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning/blob/cc9c7e2f4017938d414178d3781fed8dbe442852/train.py,
https://github.com/sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning/blob/cc9c7e2f4017938d414178d3781fed8dbe442852/models.py,
https://github.com/sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning/blob/cc9c7e2f4017938d414178d3781fed8dbe442852/datasets.py,
https://github.com/sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning/blob/cc9c7e2f4017938d414178d3781fed8dbe442852/utils.py,
https://github.com/sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning/blob/cc9c7e2f4017938d414178d3781fed8dbe442852/caption.py).

Kept: the module-level `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")` that models.py,
train.py and caption.py each define, and `cudnn.benchmark = True`; the decoder's `predictions` and `alphas` buffers
made with `torch.zeros(...).to(device)` (the global device, not the input's); the sort of `caption_lengths` and the
`decode_lengths = (caption_lengths - 1).tolist()` host list driving `batch_size_t` and `pack_padded_sequence(...,
decode_lengths, batch_first=True)`; `Encoder.fine_tune` freezing all but children [5:]; the optimizers built over
`filter(lambda p: p.requires_grad, ...)` on the CPU models *before* `decoder.to(device)`/`encoder.to(device)`, the
encoder optimizer only when fine-tuning; the resume branch reading the whole checkpoint dict with `torch.load(checkpoint)`
(models and optimizers come back on the device they were saved from) and making the encoder optimizer then;
`nn.CrossEntropyLoss().to(device)`; `imgs`, `caps`, `caplens` moved with `.to(device)` per batch, while `allcaps`
stays on the host; `clip_gradient` clamping `param.grad.data` per optimizer group; `AverageMeter`s fed `loss.item()`
and `accuracy(...)` (which `.item()`s a device sum); `validate` with `decoder.eval()`/`encoder.eval()` under
`torch.no_grad()`, `scores_copy = scores.clone()`, and `torch.max(scores_copy, dim=2)` then `.tolist()` for the
hypotheses; `adjust_learning_rate`; `save_checkpoint` pickling the whole encoder, decoder and optimizers, with a
`BEST_` copy; caption.py's `torch.load(args.model, map_location=str(device))`, `decoder.to(device)`,
`decoder.eval()`, the image turned into `torch.FloatTensor(img).to(device)` before normalising, and the beam search
that builds `k_prev_words = torch.LongTensor([[word_map['<start>']]] * k).to(device)`, `torch.zeros(k, 1).to(device)`
and `torch.ones(k, 1, enc_image_size, enc_image_size).to(device)`, indexes device tensors with Python lists
(`seqs[incomplete_inds]`) and with device index tensors, and collects `top_k_scores[complete_inds]` device scalars,
picking the best with `max` on them; `alphas = torch.FloatTensor(alphas)` on the returned list.
Changed where the 2020 code no longer runs: in `validate`, `allcaps = allcaps[sort_ind]` indexes a host tensor with
the device tensor `sort_ind`, which current PyTorch refuses on a GPU ("indices should be either on cpu or on the
same device as the indexed tensor"), so it is `allcaps[sort_ind.cpu()]`; in the beam search `prev_word_inds =
top_k_words / vocab_size` is true division now (a float tensor cannot index), so it is `//`; `torch.load` of the
pickled models gets `weights_only=False`, which torch >= 2.6 needs; `self.split is 'TRAIN'` becomes `==`; `scores, _ = pack_padded_sequence(...)` unpacks
the four fields a PackedSequence has now (`scores, _, _, _`); `pin_memory=True` becomes
`pin_memory=torch.cuda.is_available()` (torch warns about pinning with no GPU).
Changed to run without files: torchvision's ResNet-101 is a small stand-in with the same eight children (conv1, bn1,
relu, maxpool, layer1-4), so `fine_tune`'s children[5:] cut is the same; the HDF5/JSON `CaptionDataset` reads
in-memory arrays with the same `__getitem__`; `transforms.Normalize` is a small stand-in; nltk's `corpus_bleu` is
reimplemented (uniform BLEU-4, no smoothing); caption.py's image comes from an array instead of `imread`/`imresize`,
and the attention plot prints the caption and the shape of the alphas; workers 0 instead of 1; the checkpoints go
to a temporary directory.

Shrunk: 3x32x32 images of one coloured shape (square, disc, cross, bar) at one of four places, each with two
captions ("a red disc on the left", "the disc is red"), 160 training and 32 validation images; emb 16, attention and
decoder dims 32, encoder_dim 32 with 4x4 encoded images; batch 32; 6 epochs, then 2 more on resume with
fine_tune_encoder; print_freq 5; beam size 3; decoder_lr 1e-2 instead of 4e-4 so that the few steps learn.
"""
import json
import os
import tempfile
import time
from collections import Counter
import math

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn.functional as F
import torch.optim
import torch.utils.data
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence
from torch.utils.data import Dataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # sets device for model and PyTorch tensors


# ----------------------------------------------------------------------------- models.py

class TinyResNet(nn.Module):
    """Stand-in for torchvision's ResNet-101: the same children names and order, tiny widths."""

    def __init__(self):
        super(TinyResNet, self).__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.layer2 = nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.layer3 = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.layer4 = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(32, 10)


class Encoder(nn.Module):
    """
    Encoder.
    """

    def __init__(self, encoded_image_size=4):
        super(Encoder, self).__init__()
        self.enc_image_size = encoded_image_size

        resnet = TinyResNet()  # stands in for the pretrained ImageNet ResNet-101

        # Remove linear and pool layers (since we're not doing classification)
        modules = list(resnet.children())[:-2]
        self.resnet = nn.Sequential(*modules)

        # Resize image to fixed size to allow input images of variable size
        self.adaptive_pool = nn.AdaptiveAvgPool2d((encoded_image_size, encoded_image_size))

        self.fine_tune()

    def forward(self, images):
        out = self.resnet(images)  # (batch_size, 32, image_size/8, image_size/8)
        out = self.adaptive_pool(out)  # (batch_size, 32, encoded_image_size, encoded_image_size)
        out = out.permute(0, 2, 3, 1)  # (batch_size, encoded_image_size, encoded_image_size, 32)
        return out

    def fine_tune(self, fine_tune=True):
        """
        Allow or prevent the computation of gradients for convolutional blocks 2 through 4 of the encoder.

        :param fine_tune: Allow?
        """
        for p in self.resnet.parameters():
            p.requires_grad = False
        # If fine-tuning, only fine-tune convolutional blocks 2 through 4
        for c in list(self.resnet.children())[5:]:
            for p in c.parameters():
                p.requires_grad = fine_tune


class Attention(nn.Module):
    """
    Attention Network.
    """

    def __init__(self, encoder_dim, decoder_dim, attention_dim):
        super(Attention, self).__init__()
        self.encoder_att = nn.Linear(encoder_dim, attention_dim)  # linear layer to transform encoded image
        self.decoder_att = nn.Linear(decoder_dim, attention_dim)  # linear layer to transform decoder's output
        self.full_att = nn.Linear(attention_dim, 1)  # linear layer to calculate values to be softmax-ed
        self.relu = nn.ReLU()
        self.softmax = nn.Softmax(dim=1)  # softmax layer to calculate weights

    def forward(self, encoder_out, decoder_hidden):
        att1 = self.encoder_att(encoder_out)  # (batch_size, num_pixels, attention_dim)
        att2 = self.decoder_att(decoder_hidden)  # (batch_size, attention_dim)
        att = self.full_att(self.relu(att1 + att2.unsqueeze(1))).squeeze(2)  # (batch_size, num_pixels)
        alpha = self.softmax(att)  # (batch_size, num_pixels)
        attention_weighted_encoding = (encoder_out * alpha.unsqueeze(2)).sum(dim=1)  # (batch_size, encoder_dim)

        return attention_weighted_encoding, alpha


class DecoderWithAttention(nn.Module):
    """
    Decoder.
    """

    def __init__(self, attention_dim, embed_dim, decoder_dim, vocab_size, encoder_dim=32, dropout=0.5):
        super(DecoderWithAttention, self).__init__()

        self.encoder_dim = encoder_dim
        self.attention_dim = attention_dim
        self.embed_dim = embed_dim
        self.decoder_dim = decoder_dim
        self.vocab_size = vocab_size
        self.dropout = dropout

        self.attention = Attention(encoder_dim, decoder_dim, attention_dim)  # attention network

        self.embedding = nn.Embedding(vocab_size, embed_dim)  # embedding layer
        self.dropout = nn.Dropout(p=self.dropout)
        self.decode_step = nn.LSTMCell(embed_dim + encoder_dim, decoder_dim, bias=True)  # decoding LSTMCell
        self.init_h = nn.Linear(encoder_dim, decoder_dim)  # linear layer to find initial hidden state of LSTMCell
        self.init_c = nn.Linear(encoder_dim, decoder_dim)  # linear layer to find initial cell state of LSTMCell
        self.f_beta = nn.Linear(decoder_dim, encoder_dim)  # linear layer to create a sigmoid-activated gate
        self.sigmoid = nn.Sigmoid()
        self.fc = nn.Linear(decoder_dim, vocab_size)  # linear layer to find scores over vocabulary
        self.init_weights()  # initialize some layers with the uniform distribution

    def init_weights(self):
        self.embedding.weight.data.uniform_(-0.1, 0.1)
        self.fc.bias.data.fill_(0)
        self.fc.weight.data.uniform_(-0.1, 0.1)

    def init_hidden_state(self, encoder_out):
        mean_encoder_out = encoder_out.mean(dim=1)
        h = self.init_h(mean_encoder_out)  # (batch_size, decoder_dim)
        c = self.init_c(mean_encoder_out)
        return h, c

    def forward(self, encoder_out, encoded_captions, caption_lengths):
        batch_size = encoder_out.size(0)
        encoder_dim = encoder_out.size(-1)
        vocab_size = self.vocab_size

        # Flatten image
        encoder_out = encoder_out.view(batch_size, -1, encoder_dim)  # (batch_size, num_pixels, encoder_dim)
        num_pixels = encoder_out.size(1)

        # Sort input data by decreasing lengths; why? apparent below
        caption_lengths, sort_ind = caption_lengths.squeeze(1).sort(dim=0, descending=True)
        encoder_out = encoder_out[sort_ind]
        encoded_captions = encoded_captions[sort_ind]

        # Embedding
        embeddings = self.embedding(encoded_captions)  # (batch_size, max_caption_length, embed_dim)

        # Initialize LSTM state
        h, c = self.init_hidden_state(encoder_out)  # (batch_size, decoder_dim)

        # We won't decode at the <end> position, since we've finished generating as soon as we generate <end>
        # So, decoding lengths are actual lengths - 1
        decode_lengths = (caption_lengths - 1).tolist()

        # Create tensors to hold word predicion scores and alphas
        predictions = torch.zeros(batch_size, max(decode_lengths), vocab_size).to(device)
        alphas = torch.zeros(batch_size, max(decode_lengths), num_pixels).to(device)

        for t in range(max(decode_lengths)):
            batch_size_t = sum([l > t for l in decode_lengths])
            attention_weighted_encoding, alpha = self.attention(encoder_out[:batch_size_t],
                                                                h[:batch_size_t])
            gate = self.sigmoid(self.f_beta(h[:batch_size_t]))  # gating scalar, (batch_size_t, encoder_dim)
            attention_weighted_encoding = gate * attention_weighted_encoding
            h, c = self.decode_step(
                torch.cat([embeddings[:batch_size_t, t, :], attention_weighted_encoding], dim=1),
                (h[:batch_size_t], c[:batch_size_t]))  # (batch_size_t, decoder_dim)
            preds = self.fc(self.dropout(h))  # (batch_size_t, vocab_size)
            predictions[:batch_size_t, t, :] = preds
            alphas[:batch_size_t, t, :] = alpha

        return predictions, encoded_captions, decode_lengths, alphas, sort_ind


# ----------------------------------------------------------------------------- synthetic create_input_files.py

COLORS = {'red': (1.0, 0.1, 0.1), 'green': (0.1, 0.9, 0.1), 'blue': (0.1, 0.2, 1.0), 'yellow': (1.0, 0.9, 0.1)}
SHAPES = ['square', 'disc', 'cross', 'bar']
PLACES = ['left', 'right', 'top', 'bottom']
CENTRES = {'left': (16, 8), 'right': (16, 24), 'top': (8, 16), 'bottom': (24, 16)}


def draw(color, shape, place, rng):
    img = rng.rand(32, 32, 3) * 0.15
    cy, cx = CENTRES[place]
    yy, xx = np.mgrid[0:32, 0:32]
    dy, dx = yy - cy, xx - cx
    if shape == 'square':
        m = (abs(dy) <= 4) & (abs(dx) <= 4)
    elif shape == 'disc':
        m = dy ** 2 + dx ** 2 <= 20
    elif shape == 'cross':
        m = ((abs(dy) <= 1) & (abs(dx) <= 5)) | ((abs(dx) <= 1) & (abs(dy) <= 5))
    else:
        m = (abs(dy) <= 1) & (abs(dx) <= 6)
    img[m] = COLORS[color]
    return (img * 255).astype(np.uint8)  # (H, W, 3) like imread


def create_input_files(n_images, rng, word_map=None, max_len=8, captions_per_image=2):
    images, captions_words = [], []
    for _ in range(n_images):
        color, shape, place = rng.choice(list(COLORS)), rng.choice(SHAPES), rng.choice(PLACES)
        images.append(draw(color, shape, place, rng).transpose(2, 0, 1))
        captions_words.append(['a', color, shape, 'on', 'the', place])
        captions_words.append(['the', shape, 'is', color])
    if word_map is None:
        word_freq = Counter(w for c in captions_words for w in c)
        words = sorted(w for w in word_freq.keys())
        word_map = {k: v + 1 for v, k in enumerate(words)}
        word_map['<unk>'] = len(word_map) + 1
        word_map['<start>'] = len(word_map) + 1
        word_map['<end>'] = len(word_map) + 1
        word_map['<pad>'] = 0
    enc_captions, caplens = [], []
    for c in captions_words:
        enc_c = [word_map['<start>']] + [word_map.get(word, word_map['<unk>']) for word in c] + [
            word_map['<end>']] + [word_map['<pad>']] * (max_len - len(c))
        enc_captions.append(enc_c)
        caplens.append(len(c) + 2)
    return {'images': np.stack(images), 'captions': enc_captions, 'caplens': caplens,
            'captions_per_image': captions_per_image}, word_map


# ----------------------------------------------------------------------------- datasets.py, utils.py

class Normalize(object):
    """Stand-in for torchvision.transforms.Normalize (works on the tensor's own device)."""

    def __init__(self, mean, std):
        self.mean = mean
        self.std = std

    def __call__(self, tensor):
        mean = torch.as_tensor(self.mean, dtype=tensor.dtype, device=tensor.device).view(-1, 1, 1)
        std = torch.as_tensor(self.std, dtype=tensor.dtype, device=tensor.device).view(-1, 1, 1)
        return (tensor - mean) / std


class CaptionDataset(Dataset):
    """
    A PyTorch Dataset class to be used in a PyTorch DataLoader to create batches.
    """

    def __init__(self, data, split, transform=None):
        self.split = split
        assert self.split in {'TRAIN', 'VAL', 'TEST'}

        self.imgs = data['images']
        # Captions per image
        self.cpi = data['captions_per_image']
        self.captions = data['captions']
        self.caplens = data['caplens']

        # PyTorch transformation pipeline for the image (normalizing, etc.)
        self.transform = transform

        # Total number of datapoints
        self.dataset_size = len(self.captions)

    def __getitem__(self, i):
        # Remember, the Nth caption corresponds to the (N // captions_per_image)th image
        img = torch.FloatTensor(self.imgs[i // self.cpi] / 255.)
        if self.transform is not None:
            img = self.transform(img)

        caption = torch.LongTensor(self.captions[i])

        caplen = torch.LongTensor([self.caplens[i]])

        if self.split == 'TRAIN':
            return img, caption, caplen
        else:
            # For validation of testing, also return all 'captions_per_image' captions to find BLEU-4 score
            all_captions = torch.LongTensor(
                self.captions[((i // self.cpi) * self.cpi):(((i // self.cpi) * self.cpi) + self.cpi)])
            return img, caption, caplen, all_captions

    def __len__(self):
        return self.dataset_size


def corpus_bleu(list_of_references, hypotheses, max_n=4):
    """Corpus BLEU-4 with uniform weights and no smoothing, as nltk.translate.bleu_score.corpus_bleu."""
    p_num, p_den = Counter(), Counter()
    hyp_lengths, ref_lengths = 0, 0
    for references, hypothesis in zip(list_of_references, hypotheses):
        for n in range(1, max_n + 1):
            counts = Counter(tuple(hypothesis[i:i + n]) for i in range(len(hypothesis) - n + 1))
            max_counts = Counter()
            for reference in references:
                max_counts |= Counter(tuple(reference[i:i + n]) for i in range(len(reference) - n + 1))
            p_num[n] += sum(min(c, max_counts[g]) for g, c in counts.items())
            p_den[n] += max(1, len(hypothesis) - n + 1)
        hyp_len = len(hypothesis)
        hyp_lengths += hyp_len
        ref_lengths += min((len(r) for r in references), key=lambda ref_len: (abs(ref_len - hyp_len), ref_len))
    if p_num[1] == 0 or min(p_num[n] for n in range(1, max_n + 1)) == 0:
        return 0
    bp = 1.0 if hyp_lengths > ref_lengths else math.exp(1 - ref_lengths / max(hyp_lengths, 1))
    return bp * math.exp(sum(math.log(p_num[n] / p_den[n]) for n in range(1, max_n + 1)) / max_n)


def clip_gradient(optimizer, grad_clip):
    for group in optimizer.param_groups:
        for param in group['params']:
            if param.grad is not None:
                param.grad.data.clamp_(-grad_clip, grad_clip)


def save_checkpoint(data_name, epoch, epochs_since_improvement, encoder, decoder, encoder_optimizer, decoder_optimizer,
                    bleu4, is_best):
    state = {'epoch': epoch,
             'epochs_since_improvement': epochs_since_improvement,
             'bleu-4': bleu4,
             'encoder': encoder,
             'decoder': decoder,
             'encoder_optimizer': encoder_optimizer,
             'decoder_optimizer': decoder_optimizer}
    filename = 'checkpoint_' + data_name + '.pth.tar'
    torch.save(state, os.path.join(checkpoint_folder, filename))
    # If this checkpoint is the best so far, store a copy so it doesn't get overwritten by a worse checkpoint
    if is_best:
        torch.save(state, os.path.join(checkpoint_folder, 'BEST_' + filename))


class AverageMeter(object):
    """
    Keeps track of most recent, average, sum, and count of a metric.
    """

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


def adjust_learning_rate(optimizer, shrink_factor):
    print("\nDECAYING learning rate.")
    for param_group in optimizer.param_groups:
        param_group['lr'] = param_group['lr'] * shrink_factor
    print("The new learning rate is %f\n" % (optimizer.param_groups[0]['lr'],))


def accuracy(scores, targets, k):
    batch_size = targets.size(0)
    _, ind = scores.topk(k, 1, True, True)
    correct = ind.eq(targets.view(-1, 1).expand_as(ind))
    correct_total = correct.view(-1).float().sum()  # 0D tensor
    return correct_total.item() * (100.0 / batch_size)


# ----------------------------------------------------------------------------- train.py

# Data parameters
data_name = 'shapes_2_cap_per_img_1_min_word_freq'  # base name shared by data files
checkpoint_folder = tempfile.mkdtemp()

# Model parameters
emb_dim = 16  # dimension of word embeddings
attention_dim = 32  # dimension of attention linear layers
decoder_dim = 32  # dimension of decoder RNN
dropout = 0.5
cudnn.benchmark = True  # set to true only if inputs to model are fixed size; otherwise lot of computational overhead

# Training parameters
start_epoch = 0
epochs = 6  # number of epochs to train for (if early stopping is not triggered)
epochs_since_improvement = 0  # keeps track of number of epochs since there's been an improvement in validation BLEU
batch_size = 32
workers = 0  # for data-loading
encoder_lr = 1e-4  # learning rate for encoder if fine-tuning
decoder_lr = 1e-2  # learning rate for decoder
grad_clip = 5.  # clip gradients at an absolute value of
alpha_c = 1.  # regularization parameter for 'doubly stochastic attention', as in the paper
best_bleu4 = 0.  # BLEU-4 score right now
print_freq = 5  # print training/validation stats every __ batches
fine_tune_encoder = False  # fine-tune encoder?
checkpoint = None  # path to checkpoint, None if none

data_rng = np.random.RandomState(0)
TRAIN_DATA, WORD_MAP = create_input_files(160, data_rng)
VAL_DATA, _ = create_input_files(32, data_rng, WORD_MAP)


def main():
    """
    Training and validation.
    """

    global best_bleu4, epochs_since_improvement, checkpoint, start_epoch, fine_tune_encoder, data_name, word_map

    # Read word map
    word_map = WORD_MAP

    # Initialize / load checkpoint
    if checkpoint is None:
        decoder = DecoderWithAttention(attention_dim=attention_dim,
                                       embed_dim=emb_dim,
                                       decoder_dim=decoder_dim,
                                       vocab_size=len(word_map),
                                       dropout=dropout)
        decoder_optimizer = torch.optim.Adam(params=filter(lambda p: p.requires_grad, decoder.parameters()),
                                             lr=decoder_lr)
        encoder = Encoder()
        encoder.fine_tune(fine_tune_encoder)
        encoder_optimizer = torch.optim.Adam(params=filter(lambda p: p.requires_grad, encoder.parameters()),
                                             lr=encoder_lr) if fine_tune_encoder else None

    else:
        checkpoint = torch.load(checkpoint, weights_only=False)
        start_epoch = checkpoint['epoch'] + 1
        epochs_since_improvement = checkpoint['epochs_since_improvement']
        best_bleu4 = checkpoint['bleu-4']
        decoder = checkpoint['decoder']
        decoder_optimizer = checkpoint['decoder_optimizer']
        encoder = checkpoint['encoder']
        encoder_optimizer = checkpoint['encoder_optimizer']
        if fine_tune_encoder is True and encoder_optimizer is None:
            encoder.fine_tune(fine_tune_encoder)
            encoder_optimizer = torch.optim.Adam(params=filter(lambda p: p.requires_grad, encoder.parameters()),
                                                 lr=encoder_lr)

    # Move to GPU, if available
    decoder = decoder.to(device)
    encoder = encoder.to(device)

    # Loss function
    criterion = nn.CrossEntropyLoss().to(device)

    # Custom dataloaders
    normalize = Normalize(mean=[0.485, 0.456, 0.406],
                          std=[0.229, 0.224, 0.225])
    train_loader = torch.utils.data.DataLoader(
        CaptionDataset(TRAIN_DATA, 'TRAIN', transform=normalize),
        batch_size=batch_size, shuffle=True, num_workers=workers, pin_memory=torch.cuda.is_available())
    val_loader = torch.utils.data.DataLoader(
        CaptionDataset(VAL_DATA, 'VAL', transform=normalize),
        batch_size=batch_size, shuffle=True, num_workers=workers, pin_memory=torch.cuda.is_available())

    # Epochs
    for epoch in range(start_epoch, epochs):

        # Decay learning rate if there is no improvement for 8 consecutive epochs, and terminate training after 20
        if epochs_since_improvement == 20:
            break
        if epochs_since_improvement > 0 and epochs_since_improvement % 8 == 0:
            adjust_learning_rate(decoder_optimizer, 0.8)
            if fine_tune_encoder:
                adjust_learning_rate(encoder_optimizer, 0.8)

        # One epoch's training
        train(train_loader=train_loader,
              encoder=encoder,
              decoder=decoder,
              criterion=criterion,
              encoder_optimizer=encoder_optimizer,
              decoder_optimizer=decoder_optimizer,
              epoch=epoch)

        # One epoch's validation
        recent_bleu4 = validate(val_loader=val_loader,
                                encoder=encoder,
                                decoder=decoder,
                                criterion=criterion)

        # Check if there was an improvement
        is_best = recent_bleu4 > best_bleu4
        best_bleu4 = max(recent_bleu4, best_bleu4)
        if not is_best:
            epochs_since_improvement += 1
            print("\nEpochs since last improvement: %d\n" % (epochs_since_improvement,))
        else:
            epochs_since_improvement = 0

        # Save checkpoint
        save_checkpoint(data_name, epoch, epochs_since_improvement, encoder, decoder, encoder_optimizer,
                        decoder_optimizer, recent_bleu4, is_best)


def train(train_loader, encoder, decoder, criterion, encoder_optimizer, decoder_optimizer, epoch):
    """
    Performs one epoch's training.
    """

    decoder.train()  # train mode (dropout and batchnorm is used)
    encoder.train()

    batch_time = AverageMeter()  # forward prop. + back prop. time
    data_time = AverageMeter()  # data loading time
    losses = AverageMeter()  # loss (per word decoded)
    top5accs = AverageMeter()  # top5 accuracy

    start = time.time()

    # Batches
    for i, (imgs, caps, caplens) in enumerate(train_loader):
        data_time.update(time.time() - start)

        # Move to GPU, if available
        imgs = imgs.to(device)
        caps = caps.to(device)
        caplens = caplens.to(device)

        # Forward prop.
        imgs = encoder(imgs)
        scores, caps_sorted, decode_lengths, alphas, sort_ind = decoder(imgs, caps, caplens)

        # Since we decoded starting with <start>, the targets are all words after <start>, up to <end>
        targets = caps_sorted[:, 1:]

        # Remove timesteps that we didn't decode at, or are pads
        # pack_padded_sequence is an easy trick to do this
        scores, _, _, _ = pack_padded_sequence(scores, decode_lengths, batch_first=True)
        targets, _, _, _ = pack_padded_sequence(targets, decode_lengths, batch_first=True)

        # Calculate loss
        loss = criterion(scores, targets)

        # Add doubly stochastic attention regularization
        loss += alpha_c * ((1. - alphas.sum(dim=1)) ** 2).mean()

        # Back prop.
        decoder_optimizer.zero_grad()
        if encoder_optimizer is not None:
            encoder_optimizer.zero_grad()
        loss.backward()

        # Clip gradients
        if grad_clip is not None:
            clip_gradient(decoder_optimizer, grad_clip)
            if encoder_optimizer is not None:
                clip_gradient(encoder_optimizer, grad_clip)

        # Update weights
        decoder_optimizer.step()
        if encoder_optimizer is not None:
            encoder_optimizer.step()

        # Keep track of metrics
        top5 = accuracy(scores, targets, 5)
        losses.update(loss.item(), sum(decode_lengths))
        top5accs.update(top5, sum(decode_lengths))
        batch_time.update(time.time() - start)

        start = time.time()

        # Print status
        if i % print_freq == 0:
            print('Epoch: [{0}][{1}/{2}]\t'
                  'Loss {loss.val:.4f} ({loss.avg:.4f})\t'
                  'Top-5 Accuracy {top5.val:.3f} ({top5.avg:.3f})'.format(epoch, i, len(train_loader),
                                                                          loss=losses,
                                                                          top5=top5accs))


def validate(val_loader, encoder, decoder, criterion):
    """
    Performs one epoch's validation.
    """
    decoder.eval()  # eval mode (no dropout or batchnorm)
    if encoder is not None:
        encoder.eval()

    batch_time = AverageMeter()
    losses = AverageMeter()
    top5accs = AverageMeter()

    start = time.time()

    references = list()  # references (true captions) for calculating BLEU-4 score
    hypotheses = list()  # hypotheses (predictions)

    # explicitly disable gradient calculation to avoid CUDA memory error
    # solves the issue #57
    with torch.no_grad():
        # Batches
        for i, (imgs, caps, caplens, allcaps) in enumerate(val_loader):

            # Move to device, if available
            imgs = imgs.to(device)
            caps = caps.to(device)
            caplens = caplens.to(device)

            # Forward prop.
            if encoder is not None:
                imgs = encoder(imgs)
            scores, caps_sorted, decode_lengths, alphas, sort_ind = decoder(imgs, caps, caplens)

            # Since we decoded starting with <start>, the targets are all words after <start>, up to <end>
            targets = caps_sorted[:, 1:]

            # Remove timesteps that we didn't decode at, or are pads
            # pack_padded_sequence is an easy trick to do this
            scores_copy = scores.clone()
            scores, _, _, _ = pack_padded_sequence(scores, decode_lengths, batch_first=True)
            targets, _, _, _ = pack_padded_sequence(targets, decode_lengths, batch_first=True)

            # Calculate loss
            loss = criterion(scores, targets)

            # Add doubly stochastic attention regularization
            loss += alpha_c * ((1. - alphas.sum(dim=1)) ** 2).mean()

            # Keep track of metrics
            losses.update(loss.item(), sum(decode_lengths))
            top5 = accuracy(scores, targets, 5)
            top5accs.update(top5, sum(decode_lengths))
            batch_time.update(time.time() - start)

            start = time.time()

            if i % print_freq == 0:
                print('Validation: [{0}/{1}]\t'
                      'Loss {loss.val:.4f} ({loss.avg:.4f})\t'
                      'Top-5 Accuracy {top5.val:.3f} ({top5.avg:.3f})\t'.format(i, len(val_loader),
                                                                                loss=losses, top5=top5accs))

            # References
            allcaps = allcaps[sort_ind.cpu()]  # because images were sorted in the decoder
            for j in range(allcaps.shape[0]):
                img_caps = allcaps[j].tolist()
                img_captions = list(
                    map(lambda c: [w for w in c if w not in {word_map['<start>'], word_map['<pad>']}],
                        img_caps))  # remove <start> and pads
                references.append(img_captions)

            # Hypotheses
            _, preds = torch.max(scores_copy, dim=2)
            preds = preds.tolist()
            temp_preds = list()
            for j, p in enumerate(preds):
                temp_preds.append(preds[j][:decode_lengths[j]])  # remove pads
            preds = temp_preds
            hypotheses.extend(preds)

            assert len(references) == len(hypotheses)

        # Calculate BLEU-4 scores
        bleu4 = corpus_bleu(references, hypotheses)

        print(
            '\n * LOSS - {loss.avg:.3f}, TOP-5 ACCURACY - {top5.avg:.3f}, BLEU-4 - {bleu:.4f}\n'.format(
                loss=losses,
                top5=top5accs,
                bleu=bleu4))

    return bleu4


# ----------------------------------------------------------------------------- caption.py

def caption_image_beam_search(encoder, decoder, img, word_map, beam_size=3):
    """
    Reads an image and captions it with beam search.
    """

    k = beam_size
    vocab_size = len(word_map)

    # Read image and process
    img = img.transpose(2, 0, 1)
    img = img / 255.
    img = torch.FloatTensor(img).to(device)
    normalize = Normalize(mean=[0.485, 0.456, 0.406],
                          std=[0.229, 0.224, 0.225])
    image = normalize(img)  # (3, 32, 32)

    # Encode
    image = image.unsqueeze(0)  # (1, 3, 32, 32)
    encoder_out = encoder(image)  # (1, enc_image_size, enc_image_size, encoder_dim)
    enc_image_size = encoder_out.size(1)
    encoder_dim = encoder_out.size(3)

    # Flatten encoding
    encoder_out = encoder_out.view(1, -1, encoder_dim)  # (1, num_pixels, encoder_dim)
    num_pixels = encoder_out.size(1)

    # We'll treat the problem as having a batch size of k
    encoder_out = encoder_out.expand(k, num_pixels, encoder_dim)  # (k, num_pixels, encoder_dim)

    # Tensor to store top k previous words at each step; now they're just <start>
    k_prev_words = torch.LongTensor([[word_map['<start>']]] * k).to(device)  # (k, 1)

    # Tensor to store top k sequences; now they're just <start>
    seqs = k_prev_words  # (k, 1)

    # Tensor to store top k sequences' scores; now they're just 0
    top_k_scores = torch.zeros(k, 1).to(device)  # (k, 1)

    # Tensor to store top k sequences' alphas; now they're just 1s
    seqs_alpha = torch.ones(k, 1, enc_image_size, enc_image_size).to(device)  # (k, 1, enc_image_size, enc_image_size)

    # Lists to store completed sequences, their alphas and scores
    complete_seqs = list()
    complete_seqs_alpha = list()
    complete_seqs_scores = list()

    # Start decoding
    step = 1
    h, c = decoder.init_hidden_state(encoder_out)

    # s is a number less than or equal to k, because sequences are removed from this process once they hit <end>
    while True:

        embeddings = decoder.embedding(k_prev_words).squeeze(1)  # (s, embed_dim)

        awe, alpha = decoder.attention(encoder_out, h)  # (s, encoder_dim), (s, num_pixels)

        alpha = alpha.view(-1, enc_image_size, enc_image_size)  # (s, enc_image_size, enc_image_size)

        gate = decoder.sigmoid(decoder.f_beta(h))  # gating scalar, (s, encoder_dim)
        awe = gate * awe

        h, c = decoder.decode_step(torch.cat([embeddings, awe], dim=1), (h, c))  # (s, decoder_dim)

        scores = decoder.fc(h)  # (s, vocab_size)
        scores = F.log_softmax(scores, dim=1)

        # Add
        scores = top_k_scores.expand_as(scores) + scores  # (s, vocab_size)

        # For the first step, all k points will have the same scores (since same k previous words, h, c)
        if step == 1:
            top_k_scores, top_k_words = scores[0].topk(k, 0, True, True)  # (s)
        else:
            # Unroll and find top scores, and their unrolled indices
            top_k_scores, top_k_words = scores.view(-1).topk(k, 0, True, True)  # (s)

        # Convert unrolled indices to actual indices of scores
        prev_word_inds = top_k_words // vocab_size  # (s)
        next_word_inds = top_k_words % vocab_size  # (s)

        # Add new words to sequences, alphas
        seqs = torch.cat([seqs[prev_word_inds], next_word_inds.unsqueeze(1)], dim=1)  # (s, step+1)
        seqs_alpha = torch.cat([seqs_alpha[prev_word_inds], alpha[prev_word_inds].unsqueeze(1)],
                               dim=1)  # (s, step+1, enc_image_size, enc_image_size)

        # Which sequences are incomplete (didn't reach <end>)?
        incomplete_inds = [ind for ind, next_word in enumerate(next_word_inds) if
                           next_word != word_map['<end>']]
        complete_inds = list(set(range(len(next_word_inds))) - set(incomplete_inds))

        # Set aside complete sequences
        if len(complete_inds) > 0:
            complete_seqs.extend(seqs[complete_inds].tolist())
            complete_seqs_alpha.extend(seqs_alpha[complete_inds].tolist())
            complete_seqs_scores.extend(top_k_scores[complete_inds])
        k -= len(complete_inds)  # reduce beam length accordingly

        # Proceed with incomplete sequences
        if k == 0:
            break
        seqs = seqs[incomplete_inds]
        seqs_alpha = seqs_alpha[incomplete_inds]
        h = h[prev_word_inds[incomplete_inds]]
        c = c[prev_word_inds[incomplete_inds]]
        encoder_out = encoder_out[prev_word_inds[incomplete_inds]]
        top_k_scores = top_k_scores[incomplete_inds].unsqueeze(1)
        k_prev_words = next_word_inds[incomplete_inds].unsqueeze(1)

        # Break if things have been going on too long
        if step > 50:
            break
        step += 1

    i = complete_seqs_scores.index(max(complete_seqs_scores))
    seq = complete_seqs[i]
    alphas = complete_seqs_alpha[i]

    return seq, alphas


if __name__ == '__main__':
    torch.manual_seed(0)
    # train.py from scratch, encoder frozen
    main()
    # train.py again, resuming from the checkpoint with fine_tune_encoder = True
    checkpoint = os.path.join(checkpoint_folder, 'checkpoint_' + data_name + '.pth.tar')
    fine_tune_encoder = True
    epochs = 8
    print('\nResuming from checkpoint with fine_tune_encoder = True')
    main()

    # caption.py on a new image with the best checkpoint
    checkpoint = torch.load(os.path.join(checkpoint_folder, 'BEST_checkpoint_' + data_name + '.pth.tar'),
                            map_location=str(device), weights_only=False)
    print('best checkpoint: epoch {}, BLEU-4 {:.4f}'.format(checkpoint['epoch'], checkpoint['bleu-4']))
    decoder = checkpoint['decoder']
    decoder = decoder.to(device)
    decoder.eval()
    encoder = checkpoint['encoder']
    encoder = encoder.to(device)
    encoder.eval()

    word_map = WORD_MAP
    rev_word_map = {v: k for k, v in word_map.items()}  # ix2word

    image_rng = np.random.RandomState(5)
    for color, shape, place in (('green', 'disc', 'right'), ('red', 'bar', 'top')):
        img = draw(color, shape, place, image_rng)
        # Encode, decode with attention and beam search
        seq, alphas = caption_image_beam_search(encoder, decoder, img, word_map, 3)
        alphas = torch.FloatTensor(alphas)
        words = [rev_word_map[ind] for ind in seq]
        print('{} {} {}: {} | alphas {}'.format(color, shape, place, ' '.join(words), tuple(alphas.shape)))
    print('done')
