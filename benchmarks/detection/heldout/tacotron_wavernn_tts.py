"""Trains fatchord/WaveRNN's Tacotron (CBHG encoder, location-sensitive attention decoder with zoneout LSTMs and a
reduction factor ``r``, CBHG postnet) on a small synthetic text/mel data set with the repository's progressive
``tts_schedule``, checkpoints it, restarts from the latest checkpoint to write ground-truth-aligned (GTA) mels, then
reloads the weights to generate a mel spectrogram from text. The device logic is the repository's: ``device =
torch.device('cuda')`` unless ``--force_cpu`` or no CUDA, ``Tacotron(...).to(device)``, every module that makes
tensors asks ``next(self.parameters()).device`` (attention state, zoneout masks, decoder states, the ``<GO>`` frame),
the reduction factor and step counter are buffers (``self.decoder.r.new_tensor(value)``, ``self.step += 1``,
``.item()``), batches move with ``x.to(device), m.to(device)``, weights load with ``torch.load(path,
map_location=device)`` and the optimizer state with plain ``torch.load``, outputs come back with ``.cpu()``.

Modeled on: fatchord/WaveRNN, train_tacotron.py, gen_tacotron.py, models/tacotron.py, utils/checkpoints.py,
utils/dataset.py, utils/__init__.py, utils/paths.py and hparams.py at commit 83c08fdcd625be56244f4145f41500468974b144
(https://github.com/fatchord/WaveRNN/blob/83c08fdcd625be56244f4145f41500468974b144/train_tacotron.py,
https://github.com/fatchord/WaveRNN/blob/83c08fdcd625be56244f4145f41500468974b144/models/tacotron.py).

Kept: models/tacotron.py as written (`HighwayNetwork`, `Encoder` with ``x.transpose_(1, 2)``, `BatchNormConv`, `CBHG`,
`PreNet`, `LSA.init_attention`, `Decoder` with the ``r`` buffer and `zoneout`, `Tacotron` with the ``r``
property/setter, `forward` (which calls ``self.train()`` unless ``generate_gta``), `generate`, `get_step`, `load`,
`save`); utils/checkpoints.py's `save_checkpoint`/`restore_checkpoint`; utils/dataset.py's `get_tts_datasets`
(dataset.pkl, text_dict.pkl, mel/*.npy), `TTSDataset` and `collate_tts`; `data_parallel_workaround` (used only with
several GPUs); train_tacotron.py's `main`, `tts_train_loop` and `create_gta_features` (which calls ``model(x, mels)``
under ``torch.no_grad()`` without ``generate_gta=True``, as the repository does); gen_tacotron.py's loading and
``generate`` loop.

Changed to run here: `hp` is a namespace with hparams.py's names instead of a module loaded from a file; the data
set files are written by `preprocess` in a temporary folder; the text front end is a character table; `Paths`
keeps the TTS paths; plots are ``np.save``d, progress is plain; ``num_workers=0``; the BinnedLengthSampler
(``tts_bin_lengths``) and `num_params` are left out; ``tts_clip_grad_norm`` is None because the repository's
``np.isnan(grad_norm)`` fails on a CUDA ``grad_norm`` with torch >= 1.5 (fatchord/WaveRNN issue #201); ``generate``
stops after 48 decoder steps; `create_gta_features` passes ``generate_gta=True``, which `Tacotron.forward` needs
to stay in eval mode (the repository's call leaves it out, so the model makes its GTA features in training mode:
`ferry run --sanitize` reports that bug of the original as inference-in-train-mode).
Shrunk: 24 utterances of 8-20 characters, lstm 512 -> 128, encoder K 16 -> 4, postnet K 8 -> 4, 2 highways, a
two-session schedule (r=2 to step 6, r=1 to step 14, batch 4).
"""
import argparse
import os
import pickle
import shutil
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Union

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.utils.data import DataLoader, Dataset

hp = types.SimpleNamespace(
    data_path='data/', voc_model_id='ljspeech_mol', tts_model_id='ljspeech_lsa_smooth_attention', num_mels=80,
    tts_embed_dims=256, tts_encoder_dims=128, tts_decoder_dims=256, tts_postnet_dims=128, tts_encoder_K=4,
    tts_lstm_dims=128, tts_postnet_K=4, tts_num_highways=2, tts_dropout=0.5, tts_cleaner_names=['english_cleaners'],
    tts_stop_threshold=-3.4, tts_schedule=[(2, 1e-3, 6, 4), (1, 5e-4, 14, 4)], tts_max_mel_len=1250,
    tts_bin_lengths=False, tts_clip_grad_norm=None, tts_checkpoint_every=4)

symbols = ['_', '~'] + list(" !',-.?abcdefghijklmnopqrstuvwxyz")

def text_to_sequence(text, cleaner_names):
    return [symbols.index(c) for c in text.lower() if c in symbols] + [symbols.index('~')]

# ---- utils/display.py, utils/paths.py ------------------------------------------------------------------------------
def stream(message):
    sys.stdout.write(f"\r{message}")

def simple_table(item_tuples):
    print(' | '.join(f'{h}: {c}' for h, c in item_tuples))

def save_attention(attn, path):
    np.save(f'{path}.npy', attn)

def save_spectrogram(M, path, length=None):
    np.save(f'{path}.npy', M)

class Paths:
    """Manages and configures the paths used by WaveRNN, Tacotron, and the data."""
    def __init__(self, data_path, voc_id, tts_id, base):
        self.base = Path(base)
        self.data = Path(data_path).expanduser().resolve()
        self.mel = self.data/'mel'
        self.gta = self.data/'gta'
        self.tts_checkpoints = self.base/'checkpoints'/f'{tts_id}.tacotron'
        self.tts_latest_weights = self.tts_checkpoints/'latest_weights.pyt'
        self.tts_latest_optim = self.tts_checkpoints/'latest_optim.pyt'
        self.tts_output = self.base/'model_outputs'/f'{tts_id}.tacotron'
        self.tts_log = self.tts_checkpoints/'log.txt'
        self.tts_attention = self.tts_checkpoints/'attention'
        self.tts_mel_plot = self.tts_checkpoints/'mel_plots'
        for p in [self.data, self.mel, self.gta, self.tts_checkpoints, self.tts_output, self.tts_attention,
                  self.tts_mel_plot]:
            os.makedirs(p, exist_ok=True)

# ---- utils/__init__.py ---------------------------------------------------------------------------------------------
_output_ref = None
_replicas_ref = None

def data_parallel_workaround(model, *input):
    global _output_ref
    global _replicas_ref
    device_ids = list(range(torch.cuda.device_count()))
    output_device = device_ids[0]
    replicas = torch.nn.parallel.replicate(model, device_ids)
    inputs = torch.nn.parallel.scatter(input, device_ids)
    replicas = replicas[:len(inputs)]
    outputs = torch.nn.parallel.parallel_apply(replicas, inputs)
    y_hat = torch.nn.parallel.gather(outputs, output_device)
    _output_ref = outputs
    _replicas_ref = replicas
    return y_hat

# ---- models/tacotron.py --------------------------------------------------------------------------------------------
class HighwayNetwork(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.W1, self.W2 = nn.Linear(size, size), nn.Linear(size, size)
        self.W1.bias.data.fill_(0.)
    def forward(self, x):
        x1, x2 = self.W1(x), self.W2(x)
        g = torch.sigmoid(x2)
        return g * F.relu(x1) + (1. - g) * x

class Encoder(nn.Module):
    def __init__(self, embed_dims, num_chars, cbhg_channels, K, num_highways, dropout):
        super().__init__()
        self.embedding = nn.Embedding(num_chars, embed_dims)
        self.pre_net = PreNet(embed_dims)
        self.cbhg = CBHG(K=K, in_channels=cbhg_channels, channels=cbhg_channels,
                         proj_channels=[cbhg_channels, cbhg_channels], num_highways=num_highways)
    def forward(self, x):
        x = self.pre_net(self.embedding(x))
        x.transpose_(1, 2)
        return self.cbhg(x)

class BatchNormConv(nn.Module):
    def __init__(self, in_channels, out_channels, kernel, relu=True):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel, stride=1, padding=kernel // 2, bias=False)
        self.bnorm = nn.BatchNorm1d(out_channels)
        self.relu = relu
    def forward(self, x):
        x = self.conv(x)
        x = F.relu(x) if self.relu is True else x
        return self.bnorm(x)

class CBHG(nn.Module):
    def __init__(self, K, in_channels, channels, proj_channels, num_highways):
        super().__init__()
        self._to_flatten = []
        self.bank_kernels = [i for i in range(1, K + 1)]
        self.conv1d_bank = nn.ModuleList()
        for k in self.bank_kernels:
            self.conv1d_bank.append(BatchNormConv(in_channels, channels, k))
        self.maxpool = nn.MaxPool1d(kernel_size=2, stride=1, padding=1)
        self.conv_project1 = BatchNormConv(len(self.bank_kernels) * channels, proj_channels[0], 3)
        self.conv_project2 = BatchNormConv(proj_channels[0], proj_channels[1], 3, relu=False)
        if proj_channels[-1] != channels:
            self.highway_mismatch = True
            self.pre_highway = nn.Linear(proj_channels[-1], channels, bias=False)
        else:
            self.highway_mismatch = False
        self.highways = nn.ModuleList()
        for i in range(num_highways):
            self.highways.append(HighwayNetwork(channels))
        self.rnn = nn.GRU(channels, channels, batch_first=True, bidirectional=True)
        self._to_flatten.append(self.rnn)
        self._flatten_parameters()
    def forward(self, x):
        self._flatten_parameters()
        residual = x
        seq_len = x.size(-1)
        conv_bank = []
        for conv in self.conv1d_bank:
            c = conv(x)  # Convolution
            conv_bank.append(c[:, :, :seq_len])
        conv_bank = torch.cat(conv_bank, dim=1)
        x = self.maxpool(conv_bank)[:, :, :seq_len]
        x = self.conv_project2(self.conv_project1(x)) + residual
        x = x.transpose(1, 2)
        if self.highway_mismatch is True:
            x = self.pre_highway(x)
        for h in self.highways: x = h(x)
        x, _ = self.rnn(x)
        return x
    def _flatten_parameters(self):
        [m.flatten_parameters() for m in self._to_flatten]

class PreNet(nn.Module):
    def __init__(self, in_dims, fc1_dims=256, fc2_dims=128, dropout=0.5):
        super().__init__()
        self.fc1, self.fc2, self.p = nn.Linear(in_dims, fc1_dims), nn.Linear(fc1_dims, fc2_dims), dropout
    def forward(self, x):
        x = F.dropout(F.relu(self.fc1(x)), self.p, training=self.training)
        x = F.dropout(F.relu(self.fc2(x)), self.p, training=self.training)
        return x

class LSA(nn.Module):
    def __init__(self, attn_dim, kernel_size=31, filters=32):
        super().__init__()
        self.conv = nn.Conv1d(2, filters, padding=(kernel_size - 1) // 2, kernel_size=kernel_size, bias=False)
        self.L = nn.Linear(filters, attn_dim, bias=True)
        self.W = nn.Linear(attn_dim, attn_dim, bias=True)
        self.v = nn.Linear(attn_dim, 1, bias=False)
        self.cumulative = None
        self.attention = None
    def init_attention(self, encoder_seq_proj):
        device = next(self.parameters()).device  # use same device as parameters
        b, t, c = encoder_seq_proj.size()
        self.cumulative = torch.zeros(b, t, device=device)
        self.attention = torch.zeros(b, t, device=device)
    def forward(self, encoder_seq_proj, query, t):
        if t == 0: self.init_attention(encoder_seq_proj)
        processed_query = self.W(query).unsqueeze(1)
        location = torch.cat([self.cumulative.unsqueeze(1), self.attention.unsqueeze(1)], dim=1)
        processed_loc = self.L(self.conv(location).transpose(1, 2))
        u = self.v(torch.tanh(processed_query + encoder_seq_proj + processed_loc))
        u = u.squeeze(-1)
        scores = torch.sigmoid(u) / torch.sigmoid(u).sum(dim=1, keepdim=True)
        self.attention = scores
        self.cumulative += self.attention
        return scores.unsqueeze(-1).transpose(1, 2)

class Decoder(nn.Module):
    max_r = 20
    def __init__(self, n_mels, decoder_dims, lstm_dims):
        super().__init__()
        self.register_buffer('r', torch.tensor(1, dtype=torch.int))
        self.n_mels = n_mels
        self.prenet = PreNet(n_mels)
        self.attn_net = LSA(decoder_dims)
        self.attn_rnn = nn.GRUCell(decoder_dims + decoder_dims // 2, decoder_dims)
        self.rnn_input = nn.Linear(2 * decoder_dims, lstm_dims)
        self.res_rnn1 = nn.LSTMCell(lstm_dims, lstm_dims)
        self.res_rnn2 = nn.LSTMCell(lstm_dims, lstm_dims)
        self.mel_proj = nn.Linear(lstm_dims, n_mels * self.max_r, bias=False)
    def zoneout(self, prev, current, p=0.1):
        device = next(self.parameters()).device  # Use same device as parameters
        mask = torch.zeros(prev.size(), device=device).bernoulli_(p)
        return prev * mask + current * (1 - mask)
    def forward(self, encoder_seq, encoder_seq_proj, prenet_in,
                hidden_states, cell_states, context_vec, t):
        batch_size = encoder_seq.size(0)
        attn_hidden, rnn1_hidden, rnn2_hidden = hidden_states
        rnn1_cell, rnn2_cell = cell_states
        prenet_out = self.prenet(prenet_in)
        attn_rnn_in = torch.cat([context_vec, prenet_out], dim=-1)
        attn_hidden = self.attn_rnn(attn_rnn_in.squeeze(1), attn_hidden)
        scores = self.attn_net(encoder_seq_proj, attn_hidden, t)
        context_vec = scores @ encoder_seq
        context_vec = context_vec.squeeze(1)
        x = torch.cat([context_vec, attn_hidden], dim=1)
        x = self.rnn_input(x)
        rnn1_hidden_next, rnn1_cell = self.res_rnn1(x, (rnn1_hidden, rnn1_cell))
        if self.training:
            rnn1_hidden = self.zoneout(rnn1_hidden, rnn1_hidden_next)
        else:
            rnn1_hidden = rnn1_hidden_next
        x = x + rnn1_hidden
        rnn2_hidden_next, rnn2_cell = self.res_rnn2(x, (rnn2_hidden, rnn2_cell))
        if self.training:
            rnn2_hidden = self.zoneout(rnn2_hidden, rnn2_hidden_next)
        else:
            rnn2_hidden = rnn2_hidden_next
        x = x + rnn2_hidden
        mels = self.mel_proj(x)
        mels = mels.view(batch_size, self.n_mels, self.max_r)[:, :, :self.r]
        hidden_states = (attn_hidden, rnn1_hidden, rnn2_hidden)
        cell_states = (rnn1_cell, rnn2_cell)
        return mels, scores, hidden_states, cell_states, context_vec

class Tacotron(nn.Module):
    def __init__(self, embed_dims, num_chars, encoder_dims, decoder_dims, n_mels, fft_bins, postnet_dims,
                 encoder_K, lstm_dims, postnet_K, num_highways, dropout, stop_threshold):
        super().__init__()
        self.n_mels = n_mels
        self.lstm_dims = lstm_dims
        self.decoder_dims = decoder_dims
        self.encoder = Encoder(embed_dims, num_chars, encoder_dims,
                               encoder_K, num_highways, dropout)
        self.encoder_proj = nn.Linear(decoder_dims, decoder_dims, bias=False)
        self.decoder = Decoder(n_mels, decoder_dims, lstm_dims)
        self.postnet = CBHG(postnet_K, n_mels, postnet_dims, [256, 80], num_highways)
        self.post_proj = nn.Linear(postnet_dims * 2, fft_bins, bias=False)
        self.init_model()
        self.register_buffer('step', torch.zeros(1, dtype=torch.long))
        self.register_buffer('stop_threshold', torch.tensor(stop_threshold, dtype=torch.float32))
    @property
    def r(self):
        return self.decoder.r.item()
    @r.setter
    def r(self, value):
        self.decoder.r = self.decoder.r.new_tensor(value, requires_grad=False)
    def forward(self, x, m, generate_gta=False):
        device = next(self.parameters()).device  # use same device as parameters
        self.step += 1
        if generate_gta:
            self.eval()
        else:
            self.train()
        batch_size, _, steps = m.size()
        attn_hidden = torch.zeros(batch_size, self.decoder_dims, device=device)
        rnn1_hidden = torch.zeros(batch_size, self.lstm_dims, device=device)
        rnn2_hidden = torch.zeros(batch_size, self.lstm_dims, device=device)
        hidden_states = (attn_hidden, rnn1_hidden, rnn2_hidden)
        rnn1_cell = torch.zeros(batch_size, self.lstm_dims, device=device)
        rnn2_cell = torch.zeros(batch_size, self.lstm_dims, device=device)
        cell_states = (rnn1_cell, rnn2_cell)
        go_frame = torch.zeros(batch_size, self.n_mels, device=device)
        context_vec = torch.zeros(batch_size, self.decoder_dims, device=device)
        encoder_seq = self.encoder(x)
        encoder_seq_proj = self.encoder_proj(encoder_seq)
        mel_outputs, attn_scores = [], []
        for t in range(0, steps, self.r):
            prenet_in = m[:, :, t - 1] if t > 0 else go_frame
            mel_frames, scores, hidden_states, cell_states, context_vec = \
                self.decoder(encoder_seq, encoder_seq_proj, prenet_in,
                             hidden_states, cell_states, context_vec, t)
            mel_outputs.append(mel_frames)
            attn_scores.append(scores)
        mel_outputs = torch.cat(mel_outputs, dim=2)
        postnet_out = self.postnet(mel_outputs)
        linear = self.post_proj(postnet_out)
        linear = linear.transpose(1, 2)
        attn_scores = torch.cat(attn_scores, 1)
        return mel_outputs, linear, attn_scores
    def generate(self, x, steps=2000):
        self.eval()
        device = next(self.parameters()).device  # use same device as parameters
        batch_size = 1
        x = torch.as_tensor(x, dtype=torch.long, device=device).unsqueeze(0)
        attn_hidden = torch.zeros(batch_size, self.decoder_dims, device=device)
        rnn1_hidden = torch.zeros(batch_size, self.lstm_dims, device=device)
        rnn2_hidden = torch.zeros(batch_size, self.lstm_dims, device=device)
        hidden_states = (attn_hidden, rnn1_hidden, rnn2_hidden)
        rnn1_cell = torch.zeros(batch_size, self.lstm_dims, device=device)
        rnn2_cell = torch.zeros(batch_size, self.lstm_dims, device=device)
        cell_states = (rnn1_cell, rnn2_cell)
        go_frame = torch.zeros(batch_size, self.n_mels, device=device)
        context_vec = torch.zeros(batch_size, self.decoder_dims, device=device)
        encoder_seq = self.encoder(x)
        encoder_seq_proj = self.encoder_proj(encoder_seq)
        mel_outputs, attn_scores = [], []
        for t in range(0, steps, self.r):
            prenet_in = mel_outputs[-1][:, :, -1] if t > 0 else go_frame
            mel_frames, scores, hidden_states, cell_states, context_vec = \
                self.decoder(encoder_seq, encoder_seq_proj, prenet_in,
                             hidden_states, cell_states, context_vec, t)
            mel_outputs.append(mel_frames)
            attn_scores.append(scores)
            if (mel_frames < self.stop_threshold).all() and t > 10: break
        mel_outputs = torch.cat(mel_outputs, dim=2)
        postnet_out = self.postnet(mel_outputs)
        linear = self.post_proj(postnet_out)
        linear = linear.transpose(1, 2)[0].cpu().data.numpy()
        mel_outputs = mel_outputs[0].cpu().data.numpy()
        attn_scores = torch.cat(attn_scores, 1)
        attn_scores = attn_scores.cpu().data.numpy()[0]
        self.train()
        return mel_outputs, linear, attn_scores
    def init_model(self):
        for p in self.parameters():
            if p.dim() > 1: nn.init.xavier_uniform_(p)
    def get_step(self):
        return self.step.data.item()
    def log(self, path, msg):
        with open(path, 'a') as f:
            print(msg, file=f)
    def load(self, path: Union[str, Path]):
        device = next(self.parameters()).device
        state_dict = torch.load(path, map_location=device)
        if 'r' in state_dict and not 'decoder.r' in state_dict:
            self.r = state_dict['r']
        self.load_state_dict(state_dict, strict=False)
    def save(self, path: Union[str, Path]):
        torch.save(self.state_dict(), path)
# ---- utils/checkpoints.py ------------------------------------------------------------------------------------------
def get_checkpoint_paths(checkpoint_type: str, paths: Paths):
    """Returns the correct checkpointing paths depending on whether model is Vocoder or TTS"""
    if checkpoint_type == 'tts':
        return paths.tts_latest_weights, paths.tts_latest_optim, paths.tts_checkpoints
    raise NotImplementedError

def save_checkpoint(checkpoint_type: str, paths: Paths, model, optimizer, *, name=None, is_silent=False):
    """Saves the training session to disk."""
    def helper(path_dict, is_named):
        s = 'named' if is_named else 'latest'
        num_exist = sum(p.exists() for p in path_dict.values())
        if num_exist not in (0, 2):
            raise FileNotFoundError(f'We expected either both or no files in the {s} checkpoint to exist!')
        if num_exist == 0:
            if not is_silent: print(f'Creating {s} checkpoint...')
            for p in path_dict.values():
                p.parent.mkdir(parents=True, exist_ok=True)
        else:
            if not is_silent: print(f'Saving to existing {s} checkpoint...')
        if not is_silent: print(f'Saving {s} weights: {path_dict["w"]}')
        model.save(path_dict['w'])
        if not is_silent: print(f'Saving {s} optimizer state: {path_dict["o"]}')
        torch.save(optimizer.state_dict(), path_dict['o'])
    weights_path, optim_path, checkpoint_path = get_checkpoint_paths(checkpoint_type, paths)
    latest_paths = {'w': weights_path, 'o': optim_path}
    helper(latest_paths, False)
    if name:
        named_paths = {'w': checkpoint_path/f'{name}_weights.pyt', 'o': checkpoint_path/f'{name}_optim.pyt'}
        helper(named_paths, True)

def restore_checkpoint(checkpoint_type: str, paths: Paths, model, optimizer, *, name=None, create_if_missing=False):
    """Restores from a training session saved to disk (do `model.to(device)` before calling this method)."""
    weights_path, optim_path, checkpoint_path = get_checkpoint_paths(checkpoint_type, paths)
    if name:
        path_dict = {'w': checkpoint_path/f'{name}_weights.pyt', 'o': checkpoint_path/f'{name}_optim.pyt'}
        s = 'named'
    else:
        path_dict = {'w': weights_path, 'o': optim_path}
        s = 'latest'
    num_exist = sum(p.exists() for p in path_dict.values())
    if num_exist == 2:
        print(f'Restoring from {s} checkpoint...')
        print(f'Loading {s} weights: {path_dict["w"]}')
        model.load(path_dict['w'])
        print(f'Loading {s} optimizer state: {path_dict["o"]}')
        optimizer.load_state_dict(torch.load(path_dict['o']))
    elif create_if_missing:
        save_checkpoint(checkpoint_type, paths, model, optimizer, name=name, is_silent=False)
    else:
        raise FileNotFoundError(f'The {s} checkpoint could not be found!')

# ---- utils/dataset.py ----------------------------------------------------------------------------------------------
def get_tts_datasets(path: Path, batch_size, r):
    with open(path/'dataset.pkl', 'rb') as f:
        dataset = pickle.load(f)
    dataset_ids = []
    mel_lengths = []
    for (item_id, len) in dataset:
        if len <= hp.tts_max_mel_len:
            dataset_ids += [item_id]
            mel_lengths += [len]
    with open(path/'text_dict.pkl', 'rb') as f:
        text_dict = pickle.load(f)
    train_dataset = TTSDataset(path, dataset_ids, text_dict)
    sampler = None  # hp.tts_bin_lengths: the BinnedLengthSampler is left out
    train_set = DataLoader(train_dataset,
                           collate_fn=lambda batch: collate_tts(batch, r),
                           batch_size=batch_size,
                           sampler=sampler,
                           num_workers=0,
                           pin_memory=True)
    longest = mel_lengths.index(max(mel_lengths))
    attn_example = dataset_ids[longest]
    return train_set, attn_example

class TTSDataset(Dataset):
    def __init__(self, path: Path, dataset_ids, text_dict):
        self.path = path
        self.metadata = dataset_ids
        self.text_dict = text_dict
    def __getitem__(self, index):
        item_id = self.metadata[index]
        x = text_to_sequence(self.text_dict[item_id], hp.tts_cleaner_names)
        mel = np.load(self.path/'mel'/f'{item_id}.npy')
        mel_len = mel.shape[-1]
        return x, mel, item_id, mel_len
    def __len__(self):
        return len(self.metadata)

def pad1d(x, max_len):
    return np.pad(x, (0, max_len - len(x)), mode='constant')

def pad2d(x, max_len):
    return np.pad(x, ((0, 0), (0, max_len - x.shape[-1])), mode='constant')

def collate_tts(batch, r):
    x_lens = [len(x[0]) for x in batch]
    max_x_len = max(x_lens)
    chars = [pad1d(x[0], max_x_len) for x in batch]
    chars = np.stack(chars)
    spec_lens = [x[1].shape[-1] for x in batch]
    max_spec_len = max(spec_lens) + 1
    if max_spec_len % r != 0:
        max_spec_len += r - max_spec_len % r
    mel = [pad2d(x[1], max_spec_len) for x in batch]
    mel = np.stack(mel)
    ids = [x[2] for x in batch]
    mel_lens = [x[3] for x in batch]
    chars = torch.tensor(chars).long()
    mel = torch.tensor(mel)
    mel = (mel * 8.) - 4.
    return chars, mel, ids, mel_lens

def preprocess(paths: Paths, n_items=24, seed=0):
    """Stand-in for preprocess.py: writes dataset.pkl, text_dict.pkl and mel/<id>.npy (values in [0, 1])."""
    rng = np.random.RandomState(seed)
    dataset, text_dict = [], {}
    for i in range(n_items):
        item_id = f'LJ001-{i:04d}'
        text = ''.join(rng.choice(list('abcdefghij klmnop')) for _ in range(rng.randint(8, 21)))
        frames = 2 * len(text) + rng.randint(0, 5)
        mel = np.clip(0.5 + 0.3 * np.sin(np.arange(frames)[None, :] / 3.0 + np.arange(hp.num_mels)[:, None] / 9.0)
                      + 0.05 * rng.randn(hp.num_mels, frames), 0, 1).astype(np.float32)
        np.save(paths.mel/f'{item_id}.npy', mel, allow_pickle=False)
        dataset += [(item_id, frames)]
        text_dict[item_id] = text
    with open(paths.data/'dataset.pkl', 'wb') as f:
        pickle.dump(dataset, f)
    with open(paths.data/'text_dict.pkl', 'wb') as f:
        pickle.dump(text_dict, f)
    return text_dict

# ---- train_tacotron.py ---------------------------------------------------------------------------------------------
def np_now(x: torch.Tensor): return x.detach().cpu().numpy()

def main(argv, paths):
    parser = argparse.ArgumentParser(description='Train Tacotron TTS')
    parser.add_argument('--force_train', '-f', action='store_true', help='Forces the model to train past total steps')
    parser.add_argument('--force_gta', '-g', action='store_true', help='Force the model to create GTA features')
    parser.add_argument('--force_cpu', '-c', action='store_true', help='Forces CPU-only training')
    args = parser.parse_args(argv)
    force_train = args.force_train
    force_gta = args.force_gta
    if not args.force_cpu and torch.cuda.is_available():
        device = torch.device('cuda')
        for session in hp.tts_schedule:
            _, _, _, batch_size = session
            if batch_size % torch.cuda.device_count() != 0:
                raise ValueError('`batch_size` must be evenly divisible by n_gpus!')
    else:
        device = torch.device('cpu')
    print('Using device:', device)
    print('\nInitialising Tacotron Model...\n')
    model = Tacotron(embed_dims=hp.tts_embed_dims, num_chars=len(symbols), encoder_dims=hp.tts_encoder_dims,
                     decoder_dims=hp.tts_decoder_dims, n_mels=hp.num_mels, fft_bins=hp.num_mels,
                     postnet_dims=hp.tts_postnet_dims, encoder_K=hp.tts_encoder_K, lstm_dims=hp.tts_lstm_dims,
                     postnet_K=hp.tts_postnet_K, num_highways=hp.tts_num_highways, dropout=hp.tts_dropout,
                     stop_threshold=hp.tts_stop_threshold).to(device)
    optimizer = optim.Adam(model.parameters())
    restore_checkpoint('tts', paths, model, optimizer, create_if_missing=True)
    if not force_gta:
        for i, session in enumerate(hp.tts_schedule):
            current_step = model.get_step()
            r, lr, max_step, batch_size = session
            training_steps = max_step - current_step
            if current_step >= max_step:
                if i == len(hp.tts_schedule) - 1:
                    if force_train:
                        training_steps = 999_999_999
                    else:
                        break
                else:
                    continue
            model.r = r
            simple_table([(f'Steps with r={r}', str(training_steps // 1000) + 'k Steps'),
                          ('Batch Size', batch_size),
                          ('Learning Rate', lr),
                          ('Outputs/Step (r)', model.r)])
            train_set, attn_example = get_tts_datasets(paths.data, batch_size, r)
            tts_train_loop(paths, model, optimizer, train_set, lr, training_steps, attn_example)
        print('Training Complete.')
    print('Creating Ground Truth Aligned Dataset...\n')
    train_set, attn_example = get_tts_datasets(paths.data, 8, model.r)
    create_gta_features(model, train_set, paths.gta)
    return model

def tts_train_loop(paths: Paths, model: Tacotron, optimizer, train_set, lr, train_steps, attn_example):
    device = next(model.parameters()).device  # use same device as model parameters
    for g in optimizer.param_groups: g['lr'] = lr
    total_iters = len(train_set)
    epochs = train_steps // total_iters + 1
    for e in range(1, epochs + 1):
        start = time.time()
        running_loss = 0
        for i, (x, m, ids, _) in enumerate(train_set, 1):
            x, m = x.to(device), m.to(device)
            if device.type == 'cuda' and torch.cuda.device_count() > 1:
                m1_hat, m2_hat, attention = data_parallel_workaround(model, x, m)
            else:
                m1_hat, m2_hat, attention = model(x, m)
            m1_loss = F.l1_loss(m1_hat, m)
            m2_loss = F.l1_loss(m2_hat, m)
            loss = m1_loss + m2_loss
            optimizer.zero_grad()
            loss.backward()
            if hp.tts_clip_grad_norm is not None:
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), hp.tts_clip_grad_norm)
                if np.isnan(grad_norm):
                    print('grad_norm was NaN!')
            optimizer.step()
            running_loss += loss.item()
            avg_loss = running_loss / i
            speed = i / (time.time() - start)
            step = model.get_step()
            k = step // 1000
            if step % hp.tts_checkpoint_every == 0:
                ckpt_name = f'taco_step{k}K'
                save_checkpoint('tts', paths, model, optimizer,
                                name=ckpt_name, is_silent=True)
            if attn_example in ids:
                idx = ids.index(attn_example)
                save_attention(np_now(attention[idx][:, :160]), paths.tts_attention/f'{step}')
                save_spectrogram(np_now(m2_hat[idx]), paths.tts_mel_plot/f'{step}', 600)
            msg = f'| Epoch: {e}/{epochs} ({i}/{total_iters}) | Loss: {avg_loss:#.4} | {speed:#.2} steps/s | Step: {k}k | '
            stream(msg)
        save_checkpoint('tts', paths, model, optimizer, is_silent=True)
        model.log(paths.tts_log, msg)
        print(' ')

def create_gta_features(model: Tacotron, train_set, save_path: Path):
    device = next(model.parameters()).device  # use same device as model parameters
    iters = len(train_set)
    for i, (x, mels, ids, mel_lens) in enumerate(train_set, 1):
        x, mels = x.to(device), mels.to(device)
        with torch.no_grad(): _, gta, _ = model(x, mels, generate_gta=True)
        gta = gta.cpu().numpy()
        for j, item_id in enumerate(ids):
            mel = gta[j][:, :mel_lens[j]]
            mel = (mel + 4) / 8
            np.save(save_path/f'{item_id}.npy', mel, allow_pickle=False)
        msg = f'{i}/{iters} Batches '
        stream(msg)
    print(' ')

# ---- gen_tacotron.py -----------------------------------------------------------------------------------------------
def generate(argv, paths, input_text):
    parser = argparse.ArgumentParser(description='TTS Generator')
    parser.add_argument('--force_cpu', '-c', action='store_true', help='Forces CPU-only training')
    args = parser.parse_args(argv)
    if not args.force_cpu and torch.cuda.is_available():
        device = torch.device('cuda')
    else:
        device = torch.device('cpu')
    print('Using device:', device)
    tts_model = Tacotron(embed_dims=hp.tts_embed_dims, num_chars=len(symbols), encoder_dims=hp.tts_encoder_dims,
                         decoder_dims=hp.tts_decoder_dims, n_mels=hp.num_mels, fft_bins=hp.num_mels,
                         postnet_dims=hp.tts_postnet_dims, encoder_K=hp.tts_encoder_K, lstm_dims=hp.tts_lstm_dims,
                         postnet_K=hp.tts_postnet_K, num_highways=hp.tts_num_highways, dropout=hp.tts_dropout,
                         stop_threshold=hp.tts_stop_threshold).to(device)
    tts_load_path = paths.tts_latest_weights
    tts_model.load(tts_load_path)
    inputs = [text_to_sequence(input_text.strip(), hp.tts_cleaner_names)]
    tts_k = tts_model.get_step() // 1000
    simple_table([('Tacotron', str(tts_k) + 'k'), ('r', tts_model.r), ('Vocoder Type', 'Griffin-Lim')])
    for i, x in enumerate(inputs, 1):
        print(f'\n| Generating {i}/{len(inputs)}')
        _, m, attention = tts_model.generate(x, steps=48)
        m = (m + 4) / 8
        np.clip(m, 0, 1, out=m)
        save_attention(attention, paths.tts_output/f'{i}_griffinlim_{tts_k}k')
    return m, attention

def run():
    base = tempfile.mkdtemp(prefix='wavernn_')
    try:
        paths = Paths(os.path.join(base, 'data'), hp.voc_model_id, hp.tts_model_id, base)
        preprocess(paths)
        model = main([], paths)
        first_step = model.get_step()
        model = main([], paths)  # restarts from the latest checkpoint: training is complete, only the GTA pass runs
        gta = sorted(os.listdir(paths.gta))
        m, attention = generate([], paths, 'a big cab')
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f'done: {first_step} training steps, r={model.r}, {len(gta)} GTA mels, generated mel {m.shape}, '
          f'attention {attention.shape}')

if __name__ == '__main__':
    run()
