"""Trains a Wave-U-Net (1-D U-Net on raw waveforms) for speech enhancement, resumes it from its latest checkpoint,
then enhances noisy files with the best checkpoint. `BaseTrainer` picks the device from ``torch.cuda.device_count()``
(`_prepare_device`: ``cuda:0`` or ``cpu``), moves the model with ``model.to(self.device)``, wraps it in
``torch.nn.DataParallel(self.model, device_ids=list(range(self.n_gpu)))`` when there are several GPUs, saves by moving
the model to the CPU (``self.model.cpu().state_dict()``, ``.module`` when wrapped) and back with
``self.model.to(self.device)``, and resumes with ``torch.load(..., map_location=self.device)``. `Trainer` moves both
waveforms with ``.to(self.device)``; its ``@torch.no_grad()`` validation pads with ``torch.zeros(...,
device=self.device)`` and collects ``self.model(chunk).detach().cpu()``. The enhancement part is module-level script
code as in enhancement.py: ``CUDA_VISIBLE_DEVICES`` from ``--device``, ``cuda:0`` when available,
`load_checkpoint(path, device)`, then ``model.to(device)`` and ``model.eval()``.

Modeled on: haoxiangsnr/Wave-U-Net-for-Speech-Enhancement, train.py, enhancement.py, trainer/base_trainer.py,
trainer/trainer.py, model/unet_basic.py, model/loss.py, dataset/waveform_dataset.py,
dataset/waveform_dataset_enhancement.py, util/utils.py and config/{train/train,enhancement/unet_basic}.json at commit
64e1aa2a39b3f496701dfc60d9717d219ef18e44 (https://github.com/haoxiangsnr/Wave-U-Net-for-Speech-Enhancement).

Kept: `DownSamplingLayer`, `UpSamplingLayer`, `Model`; `mse_loss`; `Dataset` (``noisy clean`` list file, aligned
random crops in ``train`` mode) and `WaveformDataset`; `load_checkpoint`, `prepare_empty_dir`, `ExecutionTime`,
`initialize_config`, `sample_fixed_length_data_aligned`; `BaseTrainer` (`_prepare_device`, `_resume_checkpoint`,
`_save_checkpoint` writing latest_model.tar, model_<epoch>.pth and best_model.tar, `_is_best`, `_print_networks`,
`train`) and `Trainer`; train.py's `main`; enhancement.py's flow.

Changed to run here: speech is synthetic (harmonic tones plus white noise) in .npy files in a temporary folder, read
with ``np.load`` instead of ``librosa.load`` and written with ``np.save``; `initialize_config` looks "module" names up
in a dict; configs are dicts, json replaces json5; TensorBoard is a small in-memory stand-in and the matplotlib/librosa
figures are left out; PESQ and STOI (pesq, pystoi) are SNR- and correlation-based stand-ins; tqdm is dropped;
``torch.load`` gets ``weights_only=False`` (the checkpoint holds a numpy best score); the enhancement arguments are a
list (``-D 0`` when CUDA is available, else ``-1``); blank lines inside functions and between methods dropped.
Shrunk: 4 U-Net layers of 8-channel steps instead of 12 of 24, sample_length 1024 instead of 16384, 24 training and 3
validation utterances of 2000-3000 samples, batch 8, 2 epochs then 1 more after resuming.
"""
import argparse
import json
import os
import tempfile
import time
import types
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils import data
from torch.utils.data import DataLoader, Dataset as TorchDataset


# ---------------------------------------------------------------- util/visualization.py (TensorBoard stand-in)
class _Writer:
    def __init__(self, log_dir):
        self.log_dir, self.scalars = log_dir, {}
    add_text = add_audio = lambda self, *args, **kwargs: None
    add_scalar = lambda self, tag, value, step: self.scalars.setdefault(tag, []).append((step, float(value)))
    add_scalars = lambda self, tag, values, step: [self.add_scalar(f"{tag}/{k}", v, step) for k, v in values.items()]

def writer(logs_dir):
    return _Writer(log_dir=logs_dir)


# ---------------------------------------------------------------- util/utils.py
def load_checkpoint(checkpoint_path, device):
    _, ext = os.path.splitext(os.path.basename(checkpoint_path))
    assert ext in (".pth", ".tar"), "Only support ext and tar extensions of model checkpoint."
    model_checkpoint = torch.load(checkpoint_path, map_location=device, weights_only=False)
    if ext == ".pth":
        print(f"Loading {checkpoint_path}.")
        return model_checkpoint
    else:  # tar
        print(f"Loading {checkpoint_path}, epoch = {model_checkpoint['epoch']}.")
        return model_checkpoint["model"]

def prepare_empty_dir(dirs, resume=False):
    """if resume experiment, assert the dirs exist, if not resume experiment, make dirs."""
    for dir_path in dirs:
        if resume:
            assert dir_path.exists()
        else:
            dir_path.mkdir(parents=True, exist_ok=True)

class ExecutionTime:
    def __init__(self):
        self.start_time = time.time()
    def duration(self):
        return int(time.time() - self.start_time)

def initialize_config(module_cfg, pass_args=True):
    """According to config items, load specific module dynamically with params."""
    module = MODULES[module_cfg["module"]]
    if pass_args:
        return getattr(module, module_cfg["main"])(**module_cfg["args"])
    else:
        return getattr(module, module_cfg["main"])

def compute_PESQ(clean_signal, noisy_signal, sr=16000):
    snr = 10 * np.log10(np.sum(clean_signal ** 2) / (np.sum((clean_signal - noisy_signal) ** 2) + 1e-8) + 1e-8)
    return float(4.5 / (1 + np.exp(-snr / 8)) - 0.5)

def compute_STOI(clean_signal, noisy_signal, sr=16000):
    return float(np.corrcoef(clean_signal, noisy_signal)[0, 1])

def sample_fixed_length_data_aligned(data_a, data_b, sample_length):
    """sample with fixed length from two dataset"""
    assert len(data_a) == len(data_b), "Inconsistent dataset length, unable to sampling"
    assert len(data_a) >= sample_length, f"len(data_a) is {len(data_a)}, sample_length is {sample_length}."
    frames_total = len(data_a)
    start = np.random.randint(frames_total - sample_length + 1)
    end = start + sample_length
    return data_a[start:end], data_b[start:end]


# ---------------------------------------------------------------- dataset/waveform_dataset.py
class Dataset(data.Dataset):
    def __init__(self, dataset, limit=None, offset=0, sample_length=16384, mode="train"):
        """Construct dataset for training and validation; the list file holds ``<noisy_path> <clean_path>`` lines."""
        super(Dataset, self).__init__()
        dataset_list = [line.rstrip('\n') for line in open(os.path.abspath(os.path.expanduser(dataset)), "r")]
        dataset_list = dataset_list[offset:]
        if limit:
            dataset_list = dataset_list[:limit]
        assert mode in ("train", "validation"), "Mode must be one of 'train' or 'validation'."
        self.length = len(dataset_list)
        self.dataset_list = dataset_list
        self.sample_length = sample_length
        self.mode = mode
    def __len__(self):
        return self.length
    def __getitem__(self, item):
        mixture_path, clean_path = self.dataset_list[item].split(" ")
        filename = os.path.splitext(os.path.basename(mixture_path))[0]
        mixture = np.load(os.path.abspath(os.path.expanduser(mixture_path)))
        clean = np.load(os.path.abspath(os.path.expanduser(clean_path)))
        if self.mode == "train":
            # The input of model should be fixed-length in the training.
            mixture, clean = sample_fixed_length_data_aligned(mixture, clean, self.sample_length)
            return mixture.reshape(1, -1), clean.reshape(1, -1), filename
        else:
            return mixture.reshape(1, -1), clean.reshape(1, -1), filename


# ---------------------------------------------------------------- dataset/waveform_dataset_enhancement.py
class WaveformDataset(TorchDataset):
    def __init__(self, dataset, limit=None, offset=0, sample_length=16384):
        """Construct dataset for enhancement; the list file holds one ``<noisy_path>`` per line."""
        super(WaveformDataset, self).__init__()
        dataset_list = [line.rstrip('\n') for line in open(os.path.abspath(os.path.expanduser(dataset)), "r")]
        dataset_list = dataset_list[offset:]
        if limit:
            dataset_list = dataset_list[:limit]
        self.length = len(dataset_list)
        self.dataset_list = dataset_list
        self.sample_length = sample_length
    def __len__(self):
        return self.length
    def __getitem__(self, item):
        mixture_path = self.dataset_list[item]
        name = os.path.splitext(os.path.basename(mixture_path))[0]
        mixture = np.load(os.path.abspath(os.path.expanduser(mixture_path)))
        return mixture.reshape(1, -1), name


# ---------------------------------------------------------------- model/unet_basic.py and model/loss.py
class DownSamplingLayer(nn.Module):
    def __init__(self, channel_in, channel_out, dilation=1, kernel_size=15, stride=1, padding=7):
        super(DownSamplingLayer, self).__init__()
        self.main = nn.Sequential(
            nn.Conv1d(channel_in, channel_out, kernel_size=kernel_size, stride=stride, padding=padding,
                      dilation=dilation),
            nn.BatchNorm1d(channel_out),
            nn.LeakyReLU(negative_slope=0.1))
    def forward(self, ipt):
        return self.main(ipt)

class UpSamplingLayer(nn.Module):
    def __init__(self, channel_in, channel_out, kernel_size=5, stride=1, padding=2):
        super(UpSamplingLayer, self).__init__()
        self.main = nn.Sequential(
            nn.Conv1d(channel_in, channel_out, kernel_size=kernel_size, stride=stride, padding=padding),
            nn.BatchNorm1d(channel_out),
            nn.LeakyReLU(negative_slope=0.1, inplace=True))
    def forward(self, ipt):
        return self.main(ipt)

class Model(nn.Module):
    def __init__(self, n_layers=12, channels_interval=24):
        super(Model, self).__init__()
        self.n_layers = n_layers
        self.channels_interval = channels_interval
        encoder_in_channels_list = [1] + [i * self.channels_interval for i in range(1, self.n_layers)]
        encoder_out_channels_list = [i * self.channels_interval for i in range(1, self.n_layers + 1)]
        self.encoder = nn.ModuleList()
        for i in range(self.n_layers):
            self.encoder.append(DownSamplingLayer(channel_in=encoder_in_channels_list[i],
                                                  channel_out=encoder_out_channels_list[i]))
        self.middle = nn.Sequential(
            nn.Conv1d(self.n_layers * self.channels_interval, self.n_layers * self.channels_interval, 15, stride=1,
                      padding=7),
            nn.BatchNorm1d(self.n_layers * self.channels_interval),
            nn.LeakyReLU(negative_slope=0.1, inplace=True))
        decoder_in_channels_list = [(2 * i + 1) * self.channels_interval for i in range(1, self.n_layers)] + [
            2 * self.n_layers * self.channels_interval]
        decoder_in_channels_list = decoder_in_channels_list[::-1]
        decoder_out_channels_list = encoder_out_channels_list[::-1]
        self.decoder = nn.ModuleList()
        for i in range(self.n_layers):
            self.decoder.append(UpSamplingLayer(channel_in=decoder_in_channels_list[i],
                                                channel_out=decoder_out_channels_list[i]))
        self.out = nn.Sequential(nn.Conv1d(1 + self.channels_interval, 1, kernel_size=1, stride=1), nn.Tanh())
    def forward(self, input):
        tmp = []
        o = input
        # Up Sampling
        for i in range(self.n_layers):
            o = self.encoder[i](o)
            tmp.append(o)
            # [batch_size, T // 2, channels]
            o = o[:, :, ::2]
        o = self.middle(o)
        # Down Sampling
        for i in range(self.n_layers):
            # [batch_size, T * 2, channels]
            o = F.interpolate(o, scale_factor=2, mode="linear", align_corners=True)
            # Skip Connection
            o = torch.cat([o, tmp[self.n_layers - i - 1]], dim=1)
            o = self.decoder[i](o)
        o = torch.cat([o, input], dim=1)
        o = self.out(o)
        return o

def mse_loss():
    return torch.nn.MSELoss()


# ---------------------------------------------------------------- trainer/base_trainer.py
class BaseTrainer:
    def __init__(self, config, resume: bool, model, loss_function, optimizer):
        self.n_gpu = torch.cuda.device_count()
        self.device = self._prepare_device(self.n_gpu, cudnn_deterministic=config["cudnn_deterministic"])
        self.optimizer = optimizer
        self.loss_function = loss_function
        self.model = model.to(self.device)
        if self.n_gpu > 1:
            self.model = torch.nn.DataParallel(self.model, device_ids=list(range(self.n_gpu)))
        # Trainer
        self.epochs = config["trainer"]["epochs"]
        self.save_checkpoint_interval = config["trainer"]["save_checkpoint_interval"]
        self.validation_config = config["trainer"]["validation"]
        self.validation_interval = self.validation_config["interval"]
        self.find_max = self.validation_config["find_max"]
        self.validation_custom_config = self.validation_config["custom"]
        # The following args is not in the config file. We will update it if the resume is True in later.
        self.start_epoch = 1
        self.best_score = -np.inf if self.find_max else np.inf
        self.root_dir = Path(config["root_dir"]).expanduser().absolute() / config["experiment_name"]
        self.checkpoints_dir = self.root_dir / "checkpoints"
        self.logs_dir = self.root_dir / "logs"
        prepare_empty_dir([self.checkpoints_dir, self.logs_dir], resume=resume)
        self.writer = writer(self.logs_dir.as_posix())
        self.writer.add_text(tag="Configuration", text_string=f"<pre>  \n{json.dumps(config, indent=4)}  \n</pre>",
                             global_step=1)
        if resume: self._resume_checkpoint()
        print("Configurations are as follows: ")
        print(json.dumps(config, indent=2, sort_keys=False))
        with open((self.root_dir / f"{time.strftime('%Y-%m-%d-%H-%M-%S')}.json").as_posix(), "w") as handle:
            json.dump(config, handle, indent=2, sort_keys=False)
        self._print_networks([self.model])
    def _resume_checkpoint(self):
        """Resume experiment from the latest checkpoint (model.module.* when the model is a DataParallel)."""
        latest_model_path = self.checkpoints_dir.expanduser().absolute() / "latest_model.tar"
        assert latest_model_path.exists(), f"{latest_model_path} does not exist, can not load latest checkpoint."
        checkpoint = torch.load(latest_model_path.as_posix(), map_location=self.device, weights_only=False)
        self.start_epoch = checkpoint["epoch"] + 1
        self.best_score = checkpoint["best_score"]
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        if isinstance(self.model, torch.nn.DataParallel):
            self.model.module.load_state_dict(checkpoint["model"])
        else:
            self.model.load_state_dict(checkpoint["model"])
        print(f"Model checkpoint loaded. Training will begin in {self.start_epoch} epoch.")
    def _save_checkpoint(self, epoch, is_best=False):
        """Save checkpoint (epoch, best score, optimizer and model parameters) to <root_dir>/checkpoints."""
        print(f"\t Saving {epoch} epoch model checkpoint...")
        state_dict = {"epoch": epoch, "best_score": self.best_score, "optimizer": self.optimizer.state_dict()}
        if isinstance(self.model, torch.nn.DataParallel):  # Parallel
            state_dict["model"] = self.model.module.cpu().state_dict()
        else:
            state_dict["model"] = self.model.cpu().state_dict()
        torch.save(state_dict, (self.checkpoints_dir / "latest_model.tar").as_posix())
        torch.save(state_dict["model"], (self.checkpoints_dir / f"model_{str(epoch).zfill(4)}.pth").as_posix())
        if is_best:
            print(f"\t Found best score in {epoch} epoch, saving...")
            torch.save(state_dict, (self.checkpoints_dir / "best_model.tar").as_posix())
        # Use model.cpu() or model.to("cpu") will migrate the model to CPU, at which point we need remigrate model back.
        # No matter tensor.cuda() or tensor.to("cuda"), if tensor in CPU, the tensor will not be migrated to GPU, but the model will.
        self.model.to(self.device)
    @staticmethod
    def _prepare_device(n_gpu: int, cudnn_deterministic=False):
        """Choose to use CPU or GPU depend on "n_gpu"."""
        if n_gpu == 0:
            print("Using CPU in the experiment.")
            device = torch.device("cpu")
        else:
            if cudnn_deterministic:
                print("Using CuDNN deterministic mode in the experiment.")
                torch.backends.cudnn.deterministic = True
                torch.backends.cudnn.benchmark = False
            device = torch.device("cuda:0")
        return device
    def _is_best(self, score, find_max=True):
        """Check if the current model is the best."""
        if find_max and score >= self.best_score:
            self.best_score = score
            return True
        elif not find_max and score <= self.best_score:
            self.best_score = score
            return True
        else:
            return False
    @staticmethod
    def _transform_pesq_range(pesq_score):
        """transform PESQ range. From [-0.5 ~ 4.5] to [0 ~ 1]."""
        return (pesq_score + 0.5) / 5
    @staticmethod
    def _print_networks(nets: list):
        print(f"This project contains {len(nets)} networks, the number of the parameters: ")
        params_of_all_networks = 0
        for i, net in enumerate(nets, start=1):
            params_of_network = 0
            for param in net.parameters():
                params_of_network += param.numel()
            print(f"\tNetwork {i}: {params_of_network / 1e6} million.")
            params_of_all_networks += params_of_network
        print(f"The amount of parameters is {params_of_all_networks / 1e6} million.")
    def _set_models_to_train_mode(self):
        self.model.train()
    def _set_models_to_eval_mode(self):
        self.model.eval()
    def train(self):
        for epoch in range(self.start_epoch, self.epochs + 1):
            print(f"============== {epoch} epoch ==============")
            print("[0 seconds] Begin training...")
            timer = ExecutionTime()
            self._set_models_to_train_mode()
            self._train_epoch(epoch)
            if self.save_checkpoint_interval != 0 and (epoch % self.save_checkpoint_interval == 0):
                self._save_checkpoint(epoch)
            if self.validation_interval != 0 and epoch % self.validation_interval == 0:
                print(f"[{timer.duration()} seconds] Training is over. Validation is in progress...")
                self._set_models_to_eval_mode()
                score = self._validation_epoch(epoch)
                if self._is_best(score, find_max=self.find_max):
                    self._save_checkpoint(epoch, is_best=True)
            print(f"[{timer.duration()} seconds] End this epoch.")


# ---------------------------------------------------------------- trainer/trainer.py
class Trainer(BaseTrainer):
    def __init__(self, config, resume: bool, model, loss_function, optimizer, train_dataloader,
                 validation_dataloader):
        super(Trainer, self).__init__(config, resume, model, loss_function, optimizer)
        self.train_data_loader = train_dataloader
        self.validation_data_loader = validation_dataloader
    def _train_epoch(self, epoch):
        loss_total = 0.0
        for i, (mixture, clean, name) in enumerate(self.train_data_loader):
            mixture = mixture.to(self.device)
            clean = clean.to(self.device)
            self.optimizer.zero_grad()
            enhanced = self.model(mixture)
            loss = self.loss_function(clean, enhanced)
            loss.backward()
            self.optimizer.step()
            loss_total += loss.item()
        dl_len = len(self.train_data_loader)
        self.writer.add_scalar(f"Train/Loss", loss_total / dl_len, epoch)
        print(f"\t train loss {loss_total / dl_len:.5f}")
    @torch.no_grad()
    def _validation_epoch(self, epoch):
        visualize_audio_limit = self.validation_custom_config["visualize_audio_limit"]
        sample_length = self.validation_custom_config["sample_length"]
        stoi_c_n = []  # clean and noisy
        stoi_c_e = []  # clean and enhanced
        pesq_c_n = []
        pesq_c_e = []
        for i, (mixture, clean, name) in enumerate(self.validation_data_loader):
            assert len(name) == 1, "Only support batch size is 1 in enhancement stage."
            name = name[0]
            padded_length = 0
            mixture = mixture.to(self.device)  # [1, 1, T]
            # The input of the model should be fixed length.
            if mixture.size(-1) % sample_length != 0:
                padded_length = sample_length - (mixture.size(-1) % sample_length)
                mixture = torch.cat([mixture, torch.zeros(1, 1, padded_length, device=self.device)], dim=-1)
            assert mixture.size(-1) % sample_length == 0 and mixture.dim() == 3
            mixture_chunks = list(torch.split(mixture, sample_length, dim=-1))
            enhanced_chunks = []
            for chunk in mixture_chunks:
                enhanced_chunks.append(self.model(chunk).detach().cpu())
            enhanced = torch.cat(enhanced_chunks, dim=-1)  # [1, 1, T]
            enhanced = enhanced if padded_length == 0 else enhanced[:, :, :-padded_length]
            mixture = mixture if padded_length == 0 else mixture[:, :, :-padded_length]
            enhanced = enhanced.reshape(-1).numpy()
            clean = clean.numpy().reshape(-1)
            mixture = mixture.cpu().numpy().reshape(-1)
            assert len(mixture) == len(enhanced) == len(clean)
            if i <= visualize_audio_limit:
                self.writer.add_audio(f"Speech/{name}_Noisy", mixture, epoch, sample_rate=16000)
                self.writer.add_audio(f"Speech/{name}_Enhanced", enhanced, epoch, sample_rate=16000)
                self.writer.add_audio(f"Speech/{name}_Clean", clean, epoch, sample_rate=16000)
            # Metric
            stoi_c_n.append(compute_STOI(clean, mixture, sr=16000))
            stoi_c_e.append(compute_STOI(clean, enhanced, sr=16000))
            pesq_c_n.append(compute_PESQ(clean, mixture, sr=16000))
            pesq_c_e.append(compute_PESQ(clean, enhanced, sr=16000))
        get_metrics_ave = lambda metrics: np.sum(metrics) / len(metrics)
        self.writer.add_scalars(f"Metric/STOI", {"Clean and noisy": get_metrics_ave(stoi_c_n),
                                                 "Clean and enhanced": get_metrics_ave(stoi_c_e)}, epoch)
        self.writer.add_scalars(f"Metric/PESQ", {"Clean and noisy": get_metrics_ave(pesq_c_n),
                                                 "Clean and enhanced": get_metrics_ave(pesq_c_e)}, epoch)
        score = (get_metrics_ave(stoi_c_e) + self._transform_pesq_range(get_metrics_ave(pesq_c_e))) / 2
        print(f"\t validation score {score:.4f}")
        return score

MODULES = {
    "model.unet_basic": types.SimpleNamespace(Model=Model), "model.loss": types.SimpleNamespace(mse_loss=mse_loss),
    "dataset.waveform_dataset": types.SimpleNamespace(Dataset=Dataset),
    "dataset.waveform_dataset_enhancement": types.SimpleNamespace(WaveformDataset=WaveformDataset),
    "trainer.trainer": types.SimpleNamespace(Trainer=Trainer),
}


# ---------------------------------------------------------------- train.py
def main(config, resume):
    torch.manual_seed(config["seed"])  # for both CPU and GPU
    np.random.seed(config["seed"])
    train_dataloader = DataLoader(
        dataset=initialize_config(config["train_dataset"]),
        batch_size=config["train_dataloader"]["batch_size"],
        num_workers=config["train_dataloader"]["num_workers"],
        shuffle=config["train_dataloader"]["shuffle"],
        pin_memory=config["train_dataloader"]["pin_memory"])
    valid_dataloader = DataLoader(dataset=initialize_config(config["validation_dataset"]), num_workers=0, batch_size=1)
    model = initialize_config(config["model"])
    optimizer = torch.optim.Adam(params=model.parameters(), lr=config["optimizer"]["lr"],
                                 betas=(config["optimizer"]["beta1"], config["optimizer"]["beta2"]))
    loss_function = initialize_config(config["loss_function"])
    trainer_class = initialize_config(config["trainer"], pass_args=False)
    trainer = trainer_class(config=config, resume=resume, model=model, loss_function=loss_function,
                            optimizer=optimizer, train_dataloader=train_dataloader,
                            validation_dataloader=valid_dataloader)
    trainer.train()

def make_synthetic_speech(folder, n_train=24, n_valid=3, n_enhance=2, sr=16000):
    """Noisy/clean pairs (harmonic 'voiced' tones with a syllable envelope, plus white noise) and the list files."""
    rng = np.random.RandomState(0)
    os.makedirs(folder, exist_ok=True)
    def utterance(name):
        n, f0 = rng.randint(2000, 3000), rng.uniform(100, 250)
        t = np.arange(n) / sr
        clean = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 4)) * (0.5 + 0.5 * np.sin(2 * np.pi * 4 * t))
        clean = (0.3 * clean).astype(np.float32)
        noisy = (clean + 0.1 * rng.randn(n)).astype(np.float32)
        paths = os.path.join(folder, f"{name}_noisy.npy"), os.path.join(folder, f"{name}_clean.npy")
        np.save(paths[0], noisy), np.save(paths[1], clean)
        return paths
    for split, count in (("train", n_train), ("test", n_valid)):
        with open(os.path.join(folder, f"{split}_dataset.txt"), "w") as f:
            f.write("\n".join(" ".join(utterance(f"{split}_{i}")) for i in range(count)))
    with open(os.path.join(folder, "data.txt"), "w") as f:
        f.write("\n".join(utterance(f"enh_{i}")[0] for i in range(n_enhance)))

if __name__ == '__main__':
    workdir = tempfile.mkdtemp(prefix="wave_unet_")
    make_synthetic_speech(os.path.join(workdir, "Datasets"))
    unet_args = {"n_layers": 4, "channels_interval": 8}
    configuration = {
        "seed": 0, "description": "...des", "root_dir": os.path.join(workdir, "Experiments", "Wave-U-Net"),
        "cudnn_deterministic": False,
        "trainer": {"module": "trainer.trainer", "main": "Trainer", "epochs": 2, "save_checkpoint_interval": 1,
                    "validation": {"interval": 1, "find_max": True,
                                   "custom": {"visualize_audio_limit": 20, "visualize_waveform_limit": 20,
                                              "visualize_spectrogram_limit": 20, "sample_length": 1024}}},
        "model": {"module": "model.unet_basic", "main": "Model", "args": unet_args},
        "loss_function": {"module": "model.loss", "main": "mse_loss", "args": {}},
        "optimizer": {"lr": 0.001, "beta1": 0.9, "beta2": 0.999},
        "train_dataset": {"module": "dataset.waveform_dataset", "main": "Dataset",
                          "args": {"dataset": os.path.join(workdir, "Datasets", "train_dataset.txt"), "limit": None,
                                   "offset": 0, "sample_length": 1024, "mode": "train"}},
        "validation_dataset": {"module": "dataset.waveform_dataset", "main": "Dataset",
                               "args": {"dataset": os.path.join(workdir, "Datasets", "test_dataset.txt"),
                                        "limit": 400, "offset": 0, "mode": "validation"}},
        "train_dataloader": {"batch_size": 8, "num_workers": 0, "shuffle": True, "pin_memory": True},
    }
    configuration["experiment_name"], configuration["config_path"] = "train", "config/train/train.json"
    main(configuration, resume=False)
    configuration["trainer"]["epochs"] = 3
    main(configuration, resume=True)
    # ------------------------------------------------------------ enhancement.py (module-level script code)
    # Parameters
    parser = argparse.ArgumentParser("Wave-U-Net: Speech Enhancement")
    parser.add_argument("-C", "--config", type=str, required=True, help="Model and dataset for enhancement (*.json).")
    parser.add_argument("-D", "--device", default="-1", type=str, help="GPU for speech enhancement. default: CPU")
    parser.add_argument("-O", "--output_dir", type=str, required=True, help="Where are audio save.")
    parser.add_argument("-M", "--model_checkpoint_path", type=str, required=True, help="Checkpoint.")
    config_path = os.path.join(workdir, "unet_basic.json")
    with open(config_path, "w") as f:
        json.dump({"model": {"module": "model.unet_basic", "main": "Model", "args": unet_args},
                   "dataset": {"module": "dataset.waveform_dataset_enhancement", "main": "WaveformDataset",
                               "args": {"dataset": os.path.join(workdir, "Datasets", "data.txt"), "limit": 400,
                                        "offset": 0, "sample_length": 1024}},
                   "custom": {"sample_length": 1024}}, f)
    os.makedirs(os.path.join(workdir, "enhanced"))
    args = parser.parse_args(["-C", config_path, "-D", "0" if torch.cuda.is_available() else "-1",
                              "-O", os.path.join(workdir, "enhanced"), "-M",
                              os.path.join(configuration["root_dir"], "train", "checkpoints", "best_model.tar")])
    # Preparation
    os.environ["CUDA_VISIBLE_DEVICES"] = args.device
    config = json.load(open(args.config))
    model_checkpoint_path = args.model_checkpoint_path
    output_dir = args.output_dir
    assert os.path.exists(output_dir), "Enhanced directory should be exist."
    # DataLoader
    device = torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")
    dataloader = DataLoader(dataset=initialize_config(config["dataset"]), batch_size=1, num_workers=0)
    # Model
    model = initialize_config(config["model"])
    model.load_state_dict(load_checkpoint(model_checkpoint_path, device))
    model.to(device)
    model.eval()
    # Enhancement
    sample_length = config["custom"]["sample_length"]
    for mixture, name in dataloader:
        assert len(name) == 1, "Only support batch size is 1 in enhancement stage."
        name = name[0]
        padded_length = 0
        mixture = mixture.to(device)  # [1, 1, T]
        # The input of the model should be fixed length.
        if mixture.size(-1) % sample_length != 0:
            padded_length = sample_length - (mixture.size(-1) % sample_length)
            mixture = torch.cat([mixture, torch.zeros(1, 1, padded_length, device=device)], dim=-1)
        assert mixture.size(-1) % sample_length == 0 and mixture.dim() == 3
        mixture_chunks = list(torch.split(mixture, sample_length, dim=-1))
        enhanced_chunks = []
        for chunk in mixture_chunks:
            enhanced_chunks.append(model(chunk).detach().cpu())
        enhanced = torch.cat(enhanced_chunks, dim=-1)  # [1, 1, T]
        enhanced = enhanced if padded_length == 0 else enhanced[:, :, :-padded_length]
        enhanced = enhanced.reshape(-1).numpy()
        output_path = os.path.join(output_dir, f"{name}.npy")
        np.save(output_path, enhanced)
    print(f"done: enhanced {len(dataloader)} files into {output_dir}")
