"""Trains the GE2E speaker encoder of CorentinJ/Real-Time-Voice-Cloning (SV2TTS) on synthetic speakers and then
embeds utterances with its inference module. The training script splits the work between two devices on purpose:
`device = torch.device("cuda" if torch.cuda.is_available() else "cpu")` runs the LSTM forward pass, while
`loss_device = torch.device("cpu")` holds the similarity scaling parameters and computes the loss ("FIXME:
currently, the gradient is None if loss_device is cuda"). `SpeakerEncoder.__init__` moves its LSTM, linear layer
and ReLU with `.to(device)` and creates `nn.Parameter(torch.tensor([10.])).to(loss_device)`; each step moves the
numpy batch of partial-utterance mel frames with `torch.from_numpy(...).to(device)`, calls `sync(device)` for the
profiler, sends the embeddings to the loss device with `.view(...).to(loss_device)`, builds the similarity matrix
there (`torch.zeros(...).to(self.loss_device)` filled with numpy index masks), computes the EER from
`sim_matrix.detach().cpu().numpy()` with sklearn/scipy, and scales the gradients of the CPU parameters before
clipping all parameters together. Checkpoints (`step`, model and optimizer state) are saved with `torch.save` and a
second run resumes from them with `torch.load(state_fpath)`; inference reloads the weights with
`torch.load(weights_fpath, _device)` into a model built with `torch.device("cpu")` as its loss device and returns
`.detach().cpu().numpy()` embeddings of partial utterances.

Modeled on: CorentinJ/Real-Time-Voice-Cloning, encoder/train.py, encoder/model.py, encoder/inference.py,
encoder/params_model.py, encoder/params_data.py, encoder/data_objects/*.py, utils/profiler.py and encoder_train.py
at commit 865eba8826bb6d76721a9d828a546724779c23ab
(https://github.com/CorentinJ/Real-Time-Voice-Cloning/blob/865eba8826bb6d76721a9d828a546724779c23ab/encoder/train.py,
https://github.com/CorentinJ/Real-Time-Voice-Cloning/blob/865eba8826bb6d76721a9d828a546724779c23ab/encoder/model.py,
https://github.com/CorentinJ/Real-Time-Voice-Cloning/blob/865eba8826bb6d76721a9d828a546724779c23ab/encoder/inference.py).

Kept: `SpeakerEncoder` as written (`.to(device)` of the submodules, the similarity parameters and loss on
`loss_device`, `do_gradient_ops`, `forward`, `similarity_matrix`, `loss` with the EER under `torch.no_grad()`);
`sync`; `train` as written (the two devices, `SpeakerEncoder(device, loss_device)`, the resume branch with
`torch.load(state_fpath)`, `optimizer.load_state_dict`, the `lr` reset, `torch.cuda.get_device_name(0)` logging, the
step loop with `torch.from_numpy(speaker_batch.data).to(device)`, `.to(loss_device)`, `model.zero_grad()`,
`loss.item()`, the UMAP `embeds.detach().cpu().numpy()`, the save and backup `torch.save` calls); the data objects
(`RandomCycler`, `Utterance`, `Speaker`, `SpeakerBatch`, `SpeakerVerificationDataset`,
`SpeakerVerificationDataLoader` with its `collate`) and `Profiler` as written; inference.py's module globals `_model`
and `_device`, `load_model`, `embed_frames_batch`, `compute_partial_slices` and `embed_utterance`.

Changed to run here: one file; `np.int` (removed from numpy) is `int`; visdom/UMAP `Visualizations` is a stub that
prints the mean loss and EER; librosa's mel spectrogram is a numpy stand-in (framed power spectrum times a
triangular mel filterbank), and the LibriSpeech/VoxCeleb speakers are synthetic (each speaker a set of harmonics
plus noise) written to disk as the preprocessed `.npy` frame files with `_sources.txt`, the way
encoder_preprocess.py lays them out; `num_workers` is 0; `train` gets a `max_step` after which the endless loop
stops (the repository trains until interrupted); the speaker folders are globbed in sorted order; files go to a
temporary folder.
Shrunk: 6 speakers per batch and 4 utterances per speaker instead of 64 and 10, 12 speakers with 6 utterances each,
24 mel channels instead of 40, partial utterances of 32 frames instead of 160 (inference 24), hidden size 48 and
embedding size 32 instead of 256 and 256, 2 LSTM layers instead of 3, learning rate 3e-3, 16 + 8 steps, saves
every 8, backups every 16, projections every 8.
"""
import random
import shutil
import tempfile
from collections import OrderedDict
from pathlib import Path
from time import perf_counter as timer

import numpy as np
import torch
from scipy.interpolate import interp1d
from scipy.optimize import brentq
from sklearn.metrics import roc_curve
from torch import nn
from torch.nn.utils import clip_grad_norm_
from torch.utils.data import Dataset, DataLoader

# ---------------------------------------------------------------------------------------------------- params_*.py
mel_window_length = 25  # In milliseconds
mel_window_step = 10    # In milliseconds
mel_n_channels = 24
sampling_rate = 16000
partials_n_frames = 32
inference_n_frames = 24

model_hidden_size = 48
model_embedding_size = 32
model_num_layers = 2
learning_rate_init = 3e-3
speakers_per_batch = 6
utterances_per_speaker = 4


# ---------------------------------------------------------------------------------------------------- utils/profiler.py
class Profiler:
    def __init__(self, summarize_every=5, disabled=False):
        self.last_tick = timer()
        self.logs = OrderedDict()
        self.summarize_every = summarize_every
        self.disabled = disabled

    def tick(self, name):
        if self.disabled:
            return
        # Log the time needed to execute that function
        if not name in self.logs:
            self.logs[name] = []
        if len(self.logs[name]) >= self.summarize_every:
            self.summarize()
            self.purge_logs()
        self.logs[name].append(timer() - self.last_tick)
        self.reset_timer()

    def purge_logs(self):
        for name in self.logs:
            self.logs[name].clear()

    def reset_timer(self):
        self.last_tick = timer()

    def summarize(self):
        n = max(map(len, self.logs.values()))
        assert n == self.summarize_every
        print("\nAverage execution time over %d steps:" % n)
        name_msgs = ["%s (%d/%d):" % (name, len(deltas), n) for name, deltas in self.logs.items()]
        pad = max(map(len, name_msgs))
        for name_msg, deltas in zip(name_msgs, self.logs.values()):
            print("  %s  mean: %4.0fms   std: %4.0fms" %
                  (name_msg.ljust(pad), np.mean(deltas) * 1000, np.std(deltas) * 1000))
        print("", flush=True)


# ---------------------------------------------------------------------------------------------------- data_objects
class RandomCycler:
    def __init__(self, source):
        if len(source) == 0:
            raise Exception("Can't create RandomCycler from an empty collection")
        self.all_items = list(source)
        self.next_items = []

    def sample(self, count: int):
        shuffle = lambda l: random.sample(l, len(l))
        out = []
        while count > 0:
            if count >= len(self.all_items):
                out.extend(shuffle(list(self.all_items)))
                count -= len(self.all_items)
                continue
            n = min(count, len(self.next_items))
            out.extend(self.next_items[:n])
            count -= n
            self.next_items = self.next_items[n:]
            if len(self.next_items) == 0:
                self.next_items = shuffle(list(self.all_items))
        return out

    def __next__(self):
        return self.sample(1)[0]


class Utterance:
    def __init__(self, frames_fpath, wave_fpath):
        self.frames_fpath = frames_fpath
        self.wave_fpath = wave_fpath

    def get_frames(self):
        return np.load(self.frames_fpath)

    def random_partial(self, n_frames):
        frames = self.get_frames()
        if frames.shape[0] == n_frames:
            start = 0
        else:
            start = np.random.randint(0, frames.shape[0] - n_frames)
        end = start + n_frames
        return frames[start:end], (start, end)


class Speaker:
    def __init__(self, root: Path):
        self.root = root
        self.name = root.name
        self.utterances = None
        self.utterance_cycler = None

    def _load_utterances(self):
        with self.root.joinpath("_sources.txt").open("r") as sources_file:
            sources = [l.split(",") for l in sources_file]
        sources = {frames_fname: wave_fpath for frames_fname, wave_fpath in sources}
        self.utterances = [Utterance(self.root.joinpath(f), w) for f, w in sources.items()]
        self.utterance_cycler = RandomCycler(self.utterances)

    def random_partial(self, count, n_frames):
        if self.utterances is None:
            self._load_utterances()
        utterances = self.utterance_cycler.sample(count)
        a = [(u,) + u.random_partial(n_frames) for u in utterances]
        return a


class SpeakerBatch:
    def __init__(self, speakers, utterances_per_speaker: int, n_frames: int):
        self.speakers = speakers
        self.partials = {s: s.random_partial(utterances_per_speaker, n_frames) for s in speakers}
        # Array of shape (n_speakers * n_utterances, n_frames, mel_n)
        self.data = np.array([frames for s in speakers for _, frames, _ in self.partials[s]])


class SpeakerVerificationDataset(Dataset):
    def __init__(self, datasets_root: Path):
        self.root = datasets_root
        speaker_dirs = [f for f in sorted(self.root.glob("*")) if f.is_dir()]
        if len(speaker_dirs) == 0:
            raise Exception("No speakers found. Make sure you are pointing to the directory "
                            "containing all preprocessed speaker directories.")
        self.speakers = [Speaker(speaker_dir) for speaker_dir in speaker_dirs]
        self.speaker_cycler = RandomCycler(self.speakers)

    def __len__(self):
        return int(1e10)

    def __getitem__(self, index):
        return next(self.speaker_cycler)


class SpeakerVerificationDataLoader(DataLoader):
    def __init__(self, dataset, speakers_per_batch, utterances_per_speaker, sampler=None, batch_sampler=None,
                 num_workers=0, pin_memory=False, timeout=0, worker_init_fn=None):
        self.utterances_per_speaker = utterances_per_speaker
        super().__init__(dataset=dataset, batch_size=speakers_per_batch, shuffle=False, sampler=sampler,
                         batch_sampler=batch_sampler, num_workers=num_workers, collate_fn=self.collate,
                         pin_memory=pin_memory, drop_last=False, timeout=timeout, worker_init_fn=worker_init_fn)

    def collate(self, speakers):
        return SpeakerBatch(speakers, self.utterances_per_speaker, partials_n_frames)


# ---------------------------------------------------------------------------------------------------- encoder/model.py
class SpeakerEncoder(nn.Module):
    def __init__(self, device, loss_device):
        super().__init__()
        self.loss_device = loss_device

        # Network defition
        self.lstm = nn.LSTM(input_size=mel_n_channels, hidden_size=model_hidden_size, num_layers=model_num_layers,
                            batch_first=True).to(device)
        self.linear = nn.Linear(in_features=model_hidden_size, out_features=model_embedding_size).to(device)
        self.relu = torch.nn.ReLU().to(device)

        # Cosine similarity scaling (with fixed initial parameter values)
        self.similarity_weight = nn.Parameter(torch.tensor([10.])).to(loss_device)
        self.similarity_bias = nn.Parameter(torch.tensor([-5.])).to(loss_device)

        # Loss
        self.loss_fn = nn.CrossEntropyLoss().to(loss_device)

    def do_gradient_ops(self):
        # Gradient scale
        self.similarity_weight.grad *= 0.01
        self.similarity_bias.grad *= 0.01

        # Gradient clipping
        clip_grad_norm_(self.parameters(), 3, norm_type=2)

    def forward(self, utterances, hidden_init=None):
        out, (hidden, cell) = self.lstm(utterances, hidden_init)

        # We take only the hidden state of the last layer
        embeds_raw = self.relu(self.linear(hidden[-1]))

        # L2-normalize it
        embeds = embeds_raw / (torch.norm(embeds_raw, dim=1, keepdim=True) + 1e-5)
        return embeds

    def similarity_matrix(self, embeds):
        speakers_per_batch, utterances_per_speaker = embeds.shape[:2]

        # Inclusive centroids (1 per speaker). Cloning is needed for reverse differentiation
        centroids_incl = torch.mean(embeds, dim=1, keepdim=True)
        centroids_incl = centroids_incl.clone() / (torch.norm(centroids_incl, dim=2, keepdim=True) + 1e-5)

        # Exclusive centroids (1 per utterance)
        centroids_excl = (torch.sum(embeds, dim=1, keepdim=True) - embeds)
        centroids_excl /= (utterances_per_speaker - 1)
        centroids_excl = centroids_excl.clone() / (torch.norm(centroids_excl, dim=2, keepdim=True) + 1e-5)

        sim_matrix = torch.zeros(speakers_per_batch, utterances_per_speaker,
                                 speakers_per_batch).to(self.loss_device)
        mask_matrix = 1 - np.eye(speakers_per_batch, dtype=int)
        for j in range(speakers_per_batch):
            mask = np.where(mask_matrix[j])[0]
            sim_matrix[mask, :, j] = (embeds[mask] * centroids_incl[j]).sum(dim=2)
            sim_matrix[j, :, j] = (embeds[j] * centroids_excl[j]).sum(dim=1)

        sim_matrix = sim_matrix * self.similarity_weight + self.similarity_bias
        return sim_matrix

    def loss(self, embeds):
        speakers_per_batch, utterances_per_speaker = embeds.shape[:2]

        # Loss
        sim_matrix = self.similarity_matrix(embeds)
        sim_matrix = sim_matrix.reshape((speakers_per_batch * utterances_per_speaker, speakers_per_batch))
        ground_truth = np.repeat(np.arange(speakers_per_batch), utterances_per_speaker)
        target = torch.from_numpy(ground_truth).long().to(self.loss_device)
        loss = self.loss_fn(sim_matrix, target)

        # EER (not backpropagated)
        with torch.no_grad():
            inv_argmax = lambda i: np.eye(1, speakers_per_batch, i, dtype=int)[0]
            labels = np.array([inv_argmax(i) for i in ground_truth])
            preds = sim_matrix.detach().cpu().numpy()

            # Snippet from https://yangcha.github.io/EER-ROC/
            fpr, tpr, thresholds = roc_curve(labels.flatten(), preds.flatten())
            eer = brentq(lambda x: 1. - x - interp1d(fpr, tpr)(x), 0., 1.)

        return loss, eer


# ---------------------------------------------------------------------------------------------------- encoder/train.py
class Visualizations:
    """Stand-in for the visdom/UMAP dashboard: averages and prints loss and EER every `update_every` steps."""

    def __init__(self, env_name=None, update_every=10, server="http://localhost", disabled=False):
        self.update_every = update_every
        self.losses, self.eers = [], []
        print("Updating the visualizations every %d steps." % update_every)

    def log_dataset(self, dataset):
        print("Dataset: %d speakers" % len(dataset.speakers))

    def log_params(self):
        pass

    def log_implementation(self, params):
        print("Implementation:", params)

    def update(self, loss, eer, step):
        self.losses.append(loss)
        self.eers.append(eer)
        if step % self.update_every == 0:
            print("Step %d   Loss: %.4f   EER: %.4f" % (step, np.mean(self.losses), np.mean(self.eers)))
            self.losses.clear()
            self.eers.clear()

    def draw_projections(self, embeds, utterances_per_speaker, step, out_fpath=None, max_speakers=10):
        centroids = embeds.reshape(-1, utterances_per_speaker, embeds.shape[-1]).mean(axis=1)
        np.save(str(out_fpath).replace(".png", ".npy"), centroids)

    def save(self):
        pass


def sync(device: torch.device):
    # For correct profiling (cuda operations are async)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train(run_id: str, clean_data_root: Path, models_dir: Path, umap_every: int, save_every: int,
          backup_every: int, vis_every: int, force_restart: bool, visdom_server: str,
          no_visdom: bool, max_step: int):
    # Create a dataset and a dataloader
    dataset = SpeakerVerificationDataset(clean_data_root)
    loader = SpeakerVerificationDataLoader(
        dataset,
        speakers_per_batch,
        utterances_per_speaker,
        num_workers=0,
    )

    # Setup the device on which to run the forward pass and the loss. These can be different,
    # because the forward pass is faster on the GPU whereas the loss is often (depending on your
    # hyperparameters) faster on the CPU.
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    # FIXME: currently, the gradient is None if loss_device is cuda
    loss_device = torch.device("cpu")

    # Create the model and the optimizer
    model = SpeakerEncoder(device, loss_device)
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate_init)
    init_step = 1

    # Configure file path for the model
    model_dir = models_dir / run_id
    model_dir.mkdir(exist_ok=True, parents=True)
    state_fpath = model_dir / "encoder.pt"

    # Load any existing model
    if not force_restart:
        if state_fpath.exists():
            print("Found existing model \"%s\", loading it and resuming training." % run_id)
            checkpoint = torch.load(state_fpath)
            init_step = checkpoint["step"]
            model.load_state_dict(checkpoint["model_state"])
            optimizer.load_state_dict(checkpoint["optimizer_state"])
            optimizer.param_groups[0]["lr"] = learning_rate_init
        else:
            print("No model \"%s\" found, starting training from scratch." % run_id)
    else:
        print("Starting the training from scratch.")
    model.train()

    # Initialize the visualization environment
    vis = Visualizations(run_id, vis_every, server=visdom_server, disabled=no_visdom)
    vis.log_dataset(dataset)
    vis.log_params()
    device_name = str(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU")
    vis.log_implementation({"Device": device_name})

    # Training loop
    profiler = Profiler(summarize_every=10, disabled=False)
    for step, speaker_batch in enumerate(loader, init_step):
        profiler.tick("Blocking, waiting for batch (threaded)")

        # Forward pass
        inputs = torch.from_numpy(speaker_batch.data).to(device)
        sync(device)
        profiler.tick("Data to %s" % device)
        embeds = model(inputs)
        sync(device)
        profiler.tick("Forward pass")
        embeds_loss = embeds.view((speakers_per_batch, utterances_per_speaker, -1)).to(loss_device)
        loss, eer = model.loss(embeds_loss)
        sync(loss_device)
        profiler.tick("Loss")

        # Backward pass
        model.zero_grad()
        loss.backward()
        profiler.tick("Backward pass")
        model.do_gradient_ops()
        optimizer.step()
        profiler.tick("Parameter update")

        # Update visualizations
        vis.update(loss.item(), eer, step)

        # Draw projections and save them to the backup folder
        if umap_every != 0 and step % umap_every == 0:
            print("Drawing and saving projections (step %d)" % step)
            projection_fpath = model_dir / f"umap_{step:06d}.png"
            embeds = embeds.detach().cpu().numpy()
            vis.draw_projections(embeds, utterances_per_speaker, step, projection_fpath)
            vis.save()

        # Overwrite the latest version of the model
        if save_every != 0 and step % save_every == 0:
            print("Saving the model (step %d)" % step)
            torch.save({
                "step": step + 1,
                "model_state": model.state_dict(),
                "optimizer_state": optimizer.state_dict(),
            }, state_fpath)

        # Make a backup
        if backup_every != 0 and step % backup_every == 0:
            print("Making a backup (step %d)" % step)
            backup_fpath = model_dir / f"encoder_{step:06d}.bak"
            torch.save({
                "step": step + 1,
                "model_state": model.state_dict(),
                "optimizer_state": optimizer.state_dict(),
            }, backup_fpath)

        profiler.tick("Extras (visualizations, saving)")
        if step >= max_step:
            break
    return state_fpath


# ---------------------------------------------------------------------------------------------------- encoder/inference.py
_model = None  # type: SpeakerEncoder
_device = None  # type: torch.device


def load_model(weights_fpath: Path, device=None):
    global _model, _device
    if device is None:
        _device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    elif isinstance(device, str):
        _device = torch.device(device)
    _model = SpeakerEncoder(_device, torch.device("cpu"))
    checkpoint = torch.load(weights_fpath, _device)
    _model.load_state_dict(checkpoint["model_state"])
    _model.eval()
    print("Loaded encoder \"%s\" trained to step %d" % (weights_fpath.name, checkpoint["step"]))


def embed_frames_batch(frames_batch):
    if _model is None:
        raise Exception("Model was not loaded. Call load_model() before inference.")

    frames = torch.from_numpy(frames_batch).to(_device)
    embed = _model.forward(frames).detach().cpu().numpy()
    return embed


def compute_partial_slices(n_samples, partial_utterance_n_frames=inference_n_frames, min_pad_coverage=0.75,
                           overlap=0.5):
    assert 0 <= overlap < 1
    assert 0 < min_pad_coverage <= 1

    samples_per_frame = int((sampling_rate * mel_window_step / 1000))
    n_frames = int(np.ceil((n_samples + 1) / samples_per_frame))
    frame_step = max(int(np.round(partial_utterance_n_frames * (1 - overlap))), 1)

    # Compute the slices
    wav_slices, mel_slices = [], []
    steps = max(1, n_frames - partial_utterance_n_frames + frame_step + 1)
    for i in range(0, steps, frame_step):
        mel_range = np.array([i, i + partial_utterance_n_frames])
        wav_range = mel_range * samples_per_frame
        mel_slices.append(slice(*mel_range))
        wav_slices.append(slice(*wav_range))

    # Evaluate whether extra padding is warranted or not
    last_wav_range = wav_slices[-1]
    coverage = (n_samples - last_wav_range.start) / (last_wav_range.stop - last_wav_range.start)
    if coverage < min_pad_coverage and len(mel_slices) > 1:
        mel_slices = mel_slices[:-1]
        wav_slices = wav_slices[:-1]

    return wav_slices, mel_slices


def embed_utterance(wav, using_partials=True, return_partials=False, **kwargs):
    # Process the entire utterance if not using partials
    if not using_partials:
        frames = wav_to_mel_spectrogram(wav)
        embed = embed_frames_batch(frames[None, ...])[0]
        if return_partials:
            return embed, None, None
        return embed

    # Compute where to split the utterance into partials and pad if necessary
    wave_slices, mel_slices = compute_partial_slices(len(wav), **kwargs)
    max_wave_length = wave_slices[-1].stop
    if max_wave_length >= len(wav):
        wav = np.pad(wav, (0, max_wave_length - len(wav)), "constant")

    # Split the utterance into partials
    frames = wav_to_mel_spectrogram(wav)
    frames_batch = np.array([frames[s] for s in mel_slices])
    partial_embeds = embed_frames_batch(frames_batch)

    # Compute the utterance embedding from the partial embeddings
    raw_embed = np.mean(partial_embeds, axis=0)
    embed = raw_embed / np.linalg.norm(raw_embed, 2)

    if return_partials:
        return embed, partial_embeds, wave_slices
    return embed


# ---------------------------------------------------------------------------------------------------- audio stand-ins
def _mel_filterbank(n_fft, n_mels):
    mel = lambda f: 2595. * np.log10(1. + f / 700.)
    hz = lambda m: 700. * (10. ** (m / 2595.) - 1.)
    edges = hz(np.linspace(mel(20.), mel(sampling_rate / 2), n_mels + 2))
    freqs = np.fft.rfftfreq(n_fft, 1. / sampling_rate)
    fb = np.zeros((n_mels, len(freqs)), dtype=np.float32)
    for m in range(n_mels):
        lo, c, hi = edges[m], edges[m + 1], edges[m + 2]
        fb[m] = np.clip(np.minimum((freqs - lo) / (c - lo), (hi - freqs) / (hi - c)), 0, None)
    return fb


def wav_to_mel_spectrogram(wav):
    """Mel spectrogram (not log) of a waveform, frames of 25 ms every 10 ms, as librosa.feature.melspectrogram."""
    n_fft = int(sampling_rate * mel_window_length / 1000)
    hop = int(sampling_rate * mel_window_step / 1000)
    padded = np.pad(wav, (n_fft // 2, n_fft // 2), mode="reflect")
    n_frames = 1 + (len(padded) - n_fft) // hop
    idx = np.arange(n_fft)[None, :] + hop * np.arange(n_frames)[:, None]
    power = np.abs(np.fft.rfft(padded[idx] * np.hanning(n_fft), axis=1)) ** 2
    return (power @ _mel_filterbank(n_fft, mel_n_channels).T).astype(np.float32)


def synthetic_wav(speaker_rng, seconds, rng):
    t = np.arange(int(seconds * sampling_rate)) / sampling_rate
    f0, formants = speaker_rng
    wav = sum(a * np.sin(2 * np.pi * f0 * k * t + rng.uniform(0, 6.28)) for k, a in formants)
    return (0.05 * wav * (1 + 0.3 * np.sin(2 * np.pi * rng.uniform(2, 5) * t)) +
            0.01 * rng.randn(len(t))).astype(np.float32)


def make_speakers(root: Path, n_speakers=12, n_utterances=6):
    rng = np.random.RandomState(0)
    voices = []
    for s in range(n_speakers):
        voice = (rng.uniform(90, 260), [(k, rng.uniform(0.1, 1.0)) for k in range(1, 9)])
        voices.append(voice)
        speaker_dir = root / ("speaker_%02d" % s)
        speaker_dir.mkdir(parents=True, exist_ok=True)
        with speaker_dir.joinpath("_sources.txt").open("w") as sources_file:
            for u in range(n_utterances):
                frames = wav_to_mel_spectrogram(synthetic_wav(voice, rng.uniform(0.5, 0.8), rng))
                fname = "utt_%02d.npy" % u
                np.save(speaker_dir / fname, frames)
                sources_file.write("%s,%s\n" % (fname, "synthetic/%02d/%02d.flac" % (s, u)))
    return voices


def main():
    random.seed(0)
    np.random.seed(0)
    workdir = Path(tempfile.mkdtemp())
    try:
        clean_data_root = workdir / "SV2TTS" / "encoder"
        voices = make_speakers(clean_data_root)
        common = dict(run_id="synthetic_run", clean_data_root=clean_data_root, models_dir=workdir / "saved_models",
                      umap_every=8, save_every=8, backup_every=16, vis_every=4, visdom_server="http://localhost",
                      no_visdom=True)
        train(force_restart=False, max_step=16, **common)
        state_fpath = train(force_restart=False, max_step=24, **common)

        load_model(state_fpath)
        rng = np.random.RandomState(1)
        embeds = [embed_utterance(synthetic_wav(voices[s], 0.6, rng)) for s in (0, 0, 5)]
        same, other = float(np.dot(embeds[0], embeds[1])), float(np.dot(embeds[0], embeds[2]))
        _, partials, slices = embed_utterance(synthetic_wav(voices[3], 0.7, rng), return_partials=True)
        print("partial embeddings:", partials.shape, "slices:", len(slices))
        print("done: cosine similarity same speaker %.3f, different speakers %.3f" % (same, other))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
