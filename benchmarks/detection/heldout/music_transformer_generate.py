"""Trains a decoder-only Music Transformer on event-encoded piano performances, continues training from saved epoch
weights, evaluates the best weights and generates music from a primer with them (train.py, evaluate.py, generate.py).
The device lives in utilities/device.py: chosen once at import (``torch.device("cuda")`` when
``torch.cuda.device_count() > 0``), switched off by `use_cuda(False)` (``--force_cpu``), and every caller asks
`get_device()`: the model is built with ``.to(get_device())``, `train_epoch`/`eval_model` move batches with
``batch[0].to(get_device())``, `MusicTransformer.forward` moves its causal mask with ``.to(get_device())`` and
`generate` fills ``torch.full(..., device=get_device())``; the datasets build tensors on ``cpu_device()``. Weights
are saved with ``torch.save(model.state_dict(), ...)`` and loaded with ``torch.load(...)`` without map_location;
evaluation and generation run under ``torch.set_grad_enabled(False)`` after ``model.eval()``.

Modeled on: gwinndr/MusicTransformer-Pytorch, train.py, evaluate.py, generate.py, utilities/device.py,
utilities/run_model.py, utilities/lr_scheduling.py, utilities/constants.py, utilities/argument_funcs.py,
model/music_transformer.py, model/positional_encoding.py and dataset/e_piano.py at commit
7161590fe306578ad02d851e74e1141bd39004af (https://github.com/gwinndr/MusicTransformer-Pytorch).

Kept: the device helpers and their import-time choice; the constants (388 events plus end and pad tokens, Adam
settings); `EPianoDataset`, `process_midi`, `create_epiano_datasets`, `compute_epiano_accuracy`;
`PositionalEncoding`, `MusicTransformer` (``nn.Transformer`` with zero decoder layers and `DummyDecoder`) with
`generate` (sampling and beam); `LrStepTracker` with `LambdaLR`, `get_lr`; `train_epoch`, `eval_model`; train.py's
`main` (baseline epoch, best-loss/best-accuracy weights, epoch weights, results csv, ``-continue_weights``);
evaluate.py's and generate.py's `main`.

Changed to run here: the Maestro pickles are synthetic event lists in a temporary folder; the three `main`s are
renamed `train_main`, `evaluate_main`, `generate_main` and take argument lists; the parsers keep only the options
used and are built from tables; TensorBoard is off; `decode_midi` writes the event ids to a text file; the label
smoothing loss of model/loss.py is ``nn.CrossEntropyLoss(label_smoothing=...)``; `DummyDecoder.forward` takes
``**kwargs`` (newer ``nn.Transformer`` passes ``tgt_is_causal``); the RPR encoder (model/rpr.py), midi primer files,
`cuda_device`, docstring banners, most progress prints and the ``#####`` section comments are left
out; blank lines between methods dropped.
Shrunk: d_model 64, 2 layers, 4 heads, feed-forward 128, max_sequence 64, 12/4/4 pieces of 100-200 events, batch 4,
2 epochs then 1 continued epoch, warm-up 40 steps; 40 generated events from a 16-event primer.
"""
import argparse
import csv
import math
import os
import pickle
import random
import tempfile

import torch
import torch.nn as nn
from torch.optim import Adam
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, Dataset

# ---------------------------------------------------------------- utilities/device.py
TORCH_CPU_DEVICE = torch.device("cpu")

if(torch.cuda.device_count() > 0):
    TORCH_CUDA_DEVICE = torch.device("cuda")
else:
    print("----- WARNING: CUDA devices not detected. This will cause the model to run very slow! -----")
    TORCH_CUDA_DEVICE = None

USE_CUDA = True

def use_cuda(cuda_bool):
    """Sets whether to use CUDA (if available), or use the CPU (not recommended)"""
    global USE_CUDA
    USE_CUDA = cuda_bool

def get_device():
    """Grabs the default device. Default device is CUDA if available and use_cuda is not False, CPU otherwise."""
    if((not USE_CUDA) or (TORCH_CUDA_DEVICE is None)):
        return TORCH_CPU_DEVICE
    else:
        return TORCH_CUDA_DEVICE

def cpu_device():
    return TORCH_CPU_DEVICE


# ---------------------------------------------------------------- utilities/constants.py
RANGE_NOTE_ON, RANGE_NOTE_OFF, RANGE_VEL, RANGE_TIME_SHIFT = 128, 128, 32, 100
SEPERATOR = "========================="
ADAM_BETA_1, ADAM_BETA_2, ADAM_EPSILON = 0.9, 0.98, 10e-9  # Taken from the paper
LR_DEFAULT_START, SCHEDULER_WARMUP_STEPS = 1.0, 40
TOKEN_END = RANGE_NOTE_ON + RANGE_NOTE_OFF + RANGE_VEL + RANGE_TIME_SHIFT
TOKEN_PAD = TOKEN_END + 1
VOCAB_SIZE = TOKEN_PAD + 1
TORCH_FLOAT, TORCH_INT, TORCH_LABEL_TYPE = torch.float32, torch.int32, torch.long
PREPEND_ZEROS_WIDTH = 4


# ---------------------------------------------------------------- utilities/lr_scheduling.py
class LrStepTracker:
    """lr = [ 1/sqrt(d_model) ] * min[ 1/sqrt(step) , step * (warmup_steps)^-1.5 ] (Attention is All you Need)"""
    def __init__(self, model_dim=512, warmup_steps=4000, init_steps=0):
        self.warmup_steps = warmup_steps
        self.model_dim = model_dim
        self.init_steps = init_steps
        self.invsqrt_dim = (1 / math.sqrt(model_dim))
        self.invsqrt_warmup = (1 / (warmup_steps * math.sqrt(warmup_steps)))
    def step(self, step):
        step += self.init_steps
        if(step <= self.warmup_steps):
            return self.invsqrt_dim * self.invsqrt_warmup * step
        else:
            invsqrt_step = (1 / math.sqrt(step))
            return self.invsqrt_dim * invsqrt_step

def get_lr(optimizer):
    for param_group in optimizer.param_groups:
        return param_group['lr']


# ---------------------------------------------------------------- dataset/e_piano.py
SEQUENCE_START = 0

class EPianoDataset(Dataset):
    def __init__(self, root, max_seq=2048, random_seq=True):
        self.root       = root
        self.max_seq    = max_seq
        self.random_seq = random_seq
        fs = [os.path.join(root, f) for f in sorted(os.listdir(self.root))]
        self.data_files = [f for f in fs if os.path.isfile(f)]
    def __len__(self):
        return len(self.data_files)
    def __getitem__(self, idx):
        # All data on cpu to allow for the Dataloader to multithread
        i_stream    = open(self.data_files[idx], "rb")
        raw_mid     = torch.tensor(pickle.load(i_stream), dtype=TORCH_LABEL_TYPE, device=cpu_device())
        i_stream.close()
        x, tgt = process_midi(raw_mid, self.max_seq, self.random_seq)
        return x, tgt

def process_midi(raw_mid, max_seq, random_seq):
    x   = torch.full((max_seq, ), TOKEN_PAD, dtype=TORCH_LABEL_TYPE, device=cpu_device())
    tgt = torch.full((max_seq, ), TOKEN_PAD, dtype=TORCH_LABEL_TYPE, device=cpu_device())
    raw_len     = len(raw_mid)
    full_seq    = max_seq + 1 # Performing seq2seq
    if(raw_len == 0):
        return x, tgt
    if(raw_len < full_seq):
        x[:raw_len]         = raw_mid
        tgt[:raw_len-1]     = raw_mid[1:]
        tgt[raw_len-1]      = TOKEN_END
    else:
        # Randomly selecting a range
        if(random_seq):
            end_range = raw_len - full_seq
            start = random.randint(SEQUENCE_START, end_range)
        # Always taking from the start to as far as we can
        else:
            start = SEQUENCE_START
        end = start + full_seq
        data = raw_mid[start:end]
        x = data[:max_seq]
        tgt = data[1:full_seq]
    return x, tgt

def create_epiano_datasets(dataset_root, max_seq, random_seq=True):
    train_root = os.path.join(dataset_root, "train")
    val_root = os.path.join(dataset_root, "val")
    test_root = os.path.join(dataset_root, "test")
    train_dataset = EPianoDataset(train_root, max_seq, random_seq)
    val_dataset = EPianoDataset(val_root, max_seq, random_seq)
    test_dataset = EPianoDataset(test_root, max_seq, random_seq)
    return train_dataset, val_dataset, test_dataset

def compute_epiano_accuracy(out, tgt):
    softmax = nn.Softmax(dim=-1)
    out = torch.argmax(softmax(out), dim=-1)
    out = out.flatten()
    tgt = tgt.flatten()
    mask = (tgt != TOKEN_PAD)
    out = out[mask]
    tgt = tgt[mask]
    if(len(tgt) == 0):
        return 1.0
    num_right = (out == tgt)
    num_right = torch.sum(num_right).type(TORCH_FLOAT)
    acc = num_right / len(tgt)
    return acc


# ---------------------------------------------------------------- model/positional_encoding.py
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super(PositionalEncoding, self).__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.register_buffer('pe', pe)
    def forward(self, x):
        x = x + self.pe[:x.size(0), :]
        return self.dropout(x)


# ---------------------------------------------------------------- model/music_transformer.py
class MusicTransformer(nn.Module):
    def __init__(self, n_layers=6, num_heads=8, d_model=512, dim_feedforward=1024,
                 dropout=0.1, max_sequence=2048, rpr=False):
        super(MusicTransformer, self).__init__()
        self.dummy      = DummyDecoder()
        self.nlayers    = n_layers
        self.nhead      = num_heads
        self.d_model    = d_model
        self.d_ff       = dim_feedforward
        self.dropout    = dropout
        self.max_seq    = max_sequence
        self.rpr        = rpr
        self.embedding = nn.Embedding(VOCAB_SIZE, self.d_model)
        self.positional_encoding = PositionalEncoding(self.d_model, self.dropout, self.max_seq)
        # Base transformer: masked encoder layers and a dummy decoder that just returns the encoder output
        self.transformer = nn.Transformer(
            d_model=self.d_model, nhead=self.nhead, num_encoder_layers=self.nlayers,
            num_decoder_layers=0, dropout=self.dropout, # activation=self.ff_activ,
            dim_feedforward=self.d_ff, custom_decoder=self.dummy
        )
        # Final output is a softmaxed linear layer
        self.Wout       = nn.Linear(self.d_model, VOCAB_SIZE)
        self.softmax    = nn.Softmax(dim=-1)
    def forward(self, x, mask=True):
        if(mask is True):
            mask = self.transformer.generate_square_subsequent_mask(x.shape[1]).to(get_device())
        else:
            mask = None
        x = self.embedding(x)
        # Input shape is (max_seq, batch_size, d_model)
        x = x.permute(1,0,2)
        x = self.positional_encoding(x)
        # Since there are no true decoder layers, the tgt is unused (Pytorch wants src and tgt to have some equal dims)
        x_out = self.transformer(src=x, tgt=x, src_mask=mask)
        # Back to (batch_size, max_seq, d_model)
        x_out = x_out.permute(1,0,2)
        y = self.Wout(x_out)
        del mask
        # They are trained to predict the next note in sequence (we don't need the last one)
        return y
    def generate(self, primer=None, target_seq_length=1024, beam=0, beam_chance=1.0):
        assert (not self.training), "Cannot generate while in training mode"
        print("Generating sequence of max length:", target_seq_length)
        gen_seq = torch.full((1,target_seq_length), TOKEN_PAD, dtype=TORCH_LABEL_TYPE, device=get_device())
        num_primer = len(primer)
        gen_seq[..., :num_primer] = primer.type(TORCH_LABEL_TYPE).to(get_device())
        cur_i = num_primer
        while(cur_i < target_seq_length):
            y = self.softmax(self.forward(gen_seq[..., :cur_i]))[..., :TOKEN_END]
            token_probs = y[:, cur_i-1, :]
            if(beam == 0):
                beam_ran = 2.0
            else:
                beam_ran = random.uniform(0,1)
            if(beam_ran <= beam_chance):
                token_probs = token_probs.flatten()
                top_res, top_i = torch.topk(token_probs, beam)
                beam_rows = top_i // VOCAB_SIZE
                beam_cols = top_i % VOCAB_SIZE
                gen_seq = gen_seq[beam_rows, :]
                gen_seq[..., cur_i] = beam_cols
            else:
                distrib = torch.distributions.categorical.Categorical(probs=token_probs)
                next_token = distrib.sample()
                gen_seq[:, cur_i] = next_token
                # Let the transformer decide to end if it wants to
                if(next_token == TOKEN_END):
                    print("Model called end of sequence at:", cur_i, "/", target_seq_length)
                    break
            cur_i += 1
            if(cur_i % 50 == 0):
                print(cur_i, "/", target_seq_length)
        return gen_seq[:, :cur_i]

class DummyDecoder(nn.Module):
    """A dummy decoder that returns its input (memory): stacked encoders with it make a decoder-only model."""
    def __init__(self):
        super(DummyDecoder, self).__init__()
    def forward(self, tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask, **kwargs):
        return memory


# ---------------------------------------------------------------- utilities/run_model.py
def train_epoch(cur_epoch, model, dataloader, loss, opt, lr_scheduler=None, print_modulus=1):
    out = -1
    model.train()
    for batch_num, batch in enumerate(dataloader):
        opt.zero_grad()
        x   = batch[0].to(get_device())
        tgt = batch[1].to(get_device())
        y = model(x)
        y   = y.reshape(y.shape[0] * y.shape[1], -1)
        tgt = tgt.flatten()
        out = loss.forward(y, tgt)
        out.backward()
        opt.step()
        if(lr_scheduler is not None):
            lr_scheduler.step()
        if((batch_num+1) % print_modulus == 0):
            print("Epoch", cur_epoch, " Batch", batch_num+1, "/", len(dataloader), "LR:", get_lr(opt),
                  "Train loss:", float(out))
    return

def eval_model(model, dataloader, loss):
    model.eval()
    avg_acc, avg_loss = -1, -1
    with torch.set_grad_enabled(False):
        n_test      = len(dataloader)
        sum_loss   = 0.0
        sum_acc    = 0.0
        for batch in dataloader:
            x   = batch[0].to(get_device())
            tgt = batch[1].to(get_device())
            y = model(x)
            sum_acc += float(compute_epiano_accuracy(y, tgt))
            y   = y.reshape(y.shape[0] * y.shape[1], -1)
            tgt = tgt.flatten()
            out = loss.forward(y, tgt)
            sum_loss += float(out)
        avg_loss    = sum_loss / n_test
        avg_acc     = sum_acc / n_test
    return avg_loss, avg_acc


# ---------------------------------------------------------------- utilities/argument_funcs.py (shortened)
def _add(parser, *options):
    for flag, kind, default in options:
        if kind is bool:
            parser.add_argument(flag, action="store_true")
        else:
            parser.add_argument(flag, type=kind, default=default)
    return parser


def _model_args(parser):
    return _add(parser, ("--force_cpu", bool, None), ("--rpr", bool, None), ("-max_sequence", int, 2048),
                ("-n_layers", int, 6), ("-num_heads", int, 8), ("-d_model", int, 512), ("-dim_feedforward", int, 1024))


def parse_train_args(argv):
    return _add(_model_args(argparse.ArgumentParser()), ("-input_dir", str, "./dataset/e_piano"),
                ("-output_dir", str, "./saved_models"), ("-weight_modulus", int, 1), ("-print_modulus", int, 1),
                ("-n_workers", int, 1), ("--no_tensorboard", bool, None), ("-continue_weights", str, None),
                ("-continue_epoch", int, None), ("-lr", float, None), ("-ce_smoothing", float, None),
                ("-batch_size", int, 2), ("-epochs", int, 100), ("-dropout", float, 0.1)).parse_args(argv)


def parse_eval_args(argv):
    return _add(_model_args(argparse.ArgumentParser()), ("-dataset_dir", str, "./dataset/e_piano"),
                ("-model_weights", str, "./saved_models/model.pickle"), ("-n_workers", int, 1),
                ("-batch_size", int, 2)).parse_args(argv)


def parse_generate_args(argv):
    return _add(_model_args(argparse.ArgumentParser()), ("-midi_root", str, "./dataset/e_piano/"),
                ("-output_dir", str, "./gen"), ("-primer_file", str, None), ("-target_seq_length", int, 1024),
                ("-num_prime", int, 256), ("-model_weights", str, "./saved_models/model.pickle"),
                ("-beam", int, 0)).parse_args(argv)


def decode_midi(events, file_path):
    """Stand-in for the midi_processor's decode_midi: writes the event ids."""
    with open(file_path, "w") as f:
        f.write(" ".join(str(int(e)) for e in events))


# ---------------------------------------------------------------- train.py
CSV_HEADER = ["Epoch", "Learn rate", "Avg Train loss", "Train Accuracy", "Avg Eval loss", "Eval accuracy"]
# Baseline is an untrained epoch that we evaluate as a baseline loss and accuracy
BASELINE_EPOCH = -1

def train_main(argv):
    args = parse_train_args(argv)
    if(args.force_cpu):
        use_cuda(False)
        print("WARNING: Forced CPU usage, expect model to perform slower")
    os.makedirs(args.output_dir, exist_ok=True)
    weights_folder = os.path.join(args.output_dir, "weights")
    os.makedirs(weights_folder, exist_ok=True)
    results_folder = os.path.join(args.output_dir, "results")
    os.makedirs(results_folder, exist_ok=True)
    results_file = os.path.join(results_folder, "results.csv")
    best_loss_file = os.path.join(results_folder, "best_loss_weights.pickle")
    best_acc_file = os.path.join(results_folder, "best_acc_weights.pickle")
    best_text = os.path.join(results_folder, "best_epochs.txt")
    train_dataset, val_dataset, test_dataset = create_epiano_datasets(args.input_dir, args.max_sequence)
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size, num_workers=args.n_workers, shuffle=True)
    val_loader = DataLoader(val_dataset, batch_size=args.batch_size, num_workers=args.n_workers)
    test_loader = DataLoader(test_dataset, batch_size=args.batch_size, num_workers=args.n_workers)
    model = MusicTransformer(n_layers=args.n_layers, num_heads=args.num_heads,
                d_model=args.d_model, dim_feedforward=args.dim_feedforward, dropout=args.dropout,
                max_sequence=args.max_sequence, rpr=args.rpr).to(get_device())
    start_epoch = BASELINE_EPOCH
    if(args.continue_weights is not None):
        if(args.continue_epoch is None):
            print("ERROR: Need epoch number to continue from (-continue_epoch) when using continue_weights")
            return
        else:
            model.load_state_dict(torch.load(args.continue_weights))
            start_epoch = args.continue_epoch
    elif(args.continue_epoch is not None):
        print("ERROR: Need continue weights (-continue_weights) when using continue_epoch")
        return
    if(args.lr is None):
        init_step = 0 if args.continue_epoch is None else args.continue_epoch * len(train_loader)
        lr = LR_DEFAULT_START
        lr_stepper = LrStepTracker(args.d_model, SCHEDULER_WARMUP_STEPS, init_step)
    else:
        lr = args.lr
    eval_loss_func = nn.CrossEntropyLoss(ignore_index=TOKEN_PAD)
    if(args.ce_smoothing is None):
        train_loss_func = eval_loss_func
    else:  # the repository's SmoothCrossEntropyLoss (model/loss.py) is left out here
        train_loss_func = nn.CrossEntropyLoss(ignore_index=TOKEN_PAD, label_smoothing=args.ce_smoothing)
    opt = Adam(model.parameters(), lr=lr, betas=(ADAM_BETA_1, ADAM_BETA_2), eps=ADAM_EPSILON)
    lr_scheduler = LambdaLR(opt, lr_stepper.step) if args.lr is None else None
    best_eval_acc, best_eval_acc_epoch = 0.0, -1
    best_eval_loss, best_eval_loss_epoch = float("inf"), -1
    if(not os.path.isfile(results_file)):
        with open(results_file, "w", newline="") as o_stream:
            writer = csv.writer(o_stream)
            writer.writerow(CSV_HEADER)
    for epoch in range(start_epoch, args.epochs):
        # Baseline has no training and acts as a base loss and accuracy (epoch 0 in a sense)
        if(epoch > BASELINE_EPOCH):
            print(SEPERATOR, "\nNEW EPOCH:", epoch+1)
            train_epoch(epoch+1, model, train_loader, train_loss_func, opt, lr_scheduler, args.print_modulus)
            print(SEPERATOR, "\nEvaluating:")
        else:
            print(SEPERATOR, "\nBaseline model evaluation (Epoch 0):")
        train_loss, train_acc = eval_model(model, train_loader, train_loss_func)
        eval_loss, eval_acc = eval_model(model, test_loader, eval_loss_func)
        lr = get_lr(opt)
        print("Epoch:", epoch+1, "Avg train loss:", train_loss, "Avg train acc:", train_acc)
        print("Avg eval loss:", eval_loss, "Avg eval acc:", eval_acc)
        new_best = False
        if(eval_acc > best_eval_acc):
            best_eval_acc = eval_acc
            best_eval_acc_epoch  = epoch+1
            torch.save(model.state_dict(), best_acc_file)
            new_best = True
        if(eval_loss < best_eval_loss):
            best_eval_loss       = eval_loss
            best_eval_loss_epoch = epoch+1
            torch.save(model.state_dict(), best_loss_file)
            new_best = True
        # Writing out new bests
        if(new_best):
            with open(best_text, "w") as o_stream:
                print("Best eval acc epoch:", best_eval_acc_epoch, "\nBest eval acc:", best_eval_acc, file=o_stream)
                print("Best eval loss epoch:", best_eval_loss_epoch, "\nBest eval loss:", best_eval_loss, file=o_stream)
        if((epoch+1) % args.weight_modulus == 0):
            epoch_str = str(epoch+1).zfill(PREPEND_ZEROS_WIDTH)
            path = os.path.join(weights_folder, "epoch_" + epoch_str + ".pickle")
            torch.save(model.state_dict(), path)
        with open(results_file, "a", newline="") as o_stream:
            writer = csv.writer(o_stream)
            writer.writerow([epoch+1, lr, train_loss, train_acc, eval_loss, eval_acc])
    return


# ---------------------------------------------------------------- evaluate.py
def evaluate_main(argv):
    args = parse_eval_args(argv)
    if(args.force_cpu):
        use_cuda(False)
        print("WARNING: Forced CPU usage, expect model to perform slower")
    # Test dataset
    _, _, test_dataset = create_epiano_datasets(args.dataset_dir, args.max_sequence)
    test_loader = DataLoader(test_dataset, batch_size=args.batch_size, num_workers=args.n_workers)
    model = MusicTransformer(n_layers=args.n_layers, num_heads=args.num_heads,
                d_model=args.d_model, dim_feedforward=args.dim_feedforward,
                max_sequence=args.max_sequence, rpr=args.rpr).to(get_device())
    model.load_state_dict(torch.load(args.model_weights))
    # No smoothed loss
    loss = nn.CrossEntropyLoss(ignore_index=TOKEN_PAD)
    print("Evaluating:")
    model.eval()
    avg_loss, avg_acc = eval_model(model, test_loader, loss)
    print("Avg loss:", avg_loss, "Avg acc:", avg_acc)
    print(SEPERATOR)
    return avg_loss


# ---------------------------------------------------------------- generate.py
def generate_main(argv):
    args = parse_generate_args(argv)
    if(args.force_cpu):
        use_cuda(False)
        print("WARNING: Forced CPU usage, expect model to perform slower")
    os.makedirs(args.output_dir, exist_ok=True)
    # Grabbing dataset if needed
    _, _, dataset = create_epiano_datasets(args.midi_root, args.num_prime, random_seq=False)
    # Can be None, an integer index to dataset, or a file path (a midi primer is not supported here)
    if(args.primer_file is None):
        f = str(random.randrange(len(dataset)))
    else:
        f = args.primer_file
    idx = int(f)
    primer, _  = dataset[idx]
    primer = primer.to(get_device())
    print("Using primer index:", idx, "(", dataset.data_files[idx], ")")
    model = MusicTransformer(n_layers=args.n_layers, num_heads=args.num_heads,
                d_model=args.d_model, dim_feedforward=args.dim_feedforward,
                max_sequence=args.max_sequence, rpr=args.rpr).to(get_device())
    model.load_state_dict(torch.load(args.model_weights))
    # Saving primer first
    f_path = os.path.join(args.output_dir, "primer.mid")
    decode_midi(primer[:args.num_prime].cpu().numpy(), file_path=f_path)
    # GENERATION
    model.eval()
    with torch.set_grad_enabled(False):
        if(args.beam > 0):
            print("BEAM:", args.beam)
            beam_seq = model.generate(primer[:args.num_prime], args.target_seq_length, beam=args.beam)
            f_path = os.path.join(args.output_dir, "beam.mid")
            decode_midi(beam_seq[0].cpu().numpy(), file_path=f_path)
        else:
            print("RAND DIST")
            rand_seq = model.generate(primer[:args.num_prime], args.target_seq_length, beam=0)
            f_path = os.path.join(args.output_dir, "rand.mid")
            decode_midi(rand_seq[0].cpu().numpy(), file_path=f_path)

def make_synthetic_maestro(root, counts=(("train", 12), ("val", 4), ("test", 4))):
    rng = random.Random(0)
    for split, count in counts:
        os.makedirs(os.path.join(root, split), exist_ok=True)
        for i in range(count):
            events, pitch = [], rng.randrange(48, 72)
            while len(events) < rng.randrange(100, 200):
                pitch = min(max(pitch + rng.choice([-4, -2, 0, 2, 3, 5]), 21), 108)
                events += [RANGE_NOTE_ON + RANGE_NOTE_OFF + RANGE_TIME_SHIFT + rng.randrange(12, 20), pitch,
                           RANGE_NOTE_ON + RANGE_NOTE_OFF + rng.choice([9, 19, 39]), RANGE_NOTE_ON + pitch]
            with open(os.path.join(root, split, f"piece_{i}.pickle"), "wb") as o_stream:
                pickle.dump(events, o_stream)

if __name__ == "__main__":
    workdir = tempfile.mkdtemp(prefix="music_transformer_")
    data_dir, out_dir = os.path.join(workdir, "e_piano"), os.path.join(workdir, "saved_models")
    make_synthetic_maestro(data_dir)
    model_argv = ["-max_sequence", "64", "-n_layers", "2", "-num_heads", "4", "-d_model", "64", "-dim_feedforward", "128"]
    common = ["-input_dir", data_dir, "-output_dir", out_dir, "-n_workers", "0", "--no_tensorboard", "-batch_size", "4"]
    train_main(common + model_argv + ["-epochs", "2", "-ce_smoothing", "0.1"])
    weights = os.path.join(out_dir, "weights", "epoch_0002.pickle")
    train_main(common + model_argv + ["-epochs", "3", "-continue_weights", weights, "-continue_epoch", "2"])
    best = os.path.join(out_dir, "results", "best_loss_weights.pickle")
    avg_loss = evaluate_main(["-dataset_dir", data_dir, "-model_weights", best, "-n_workers", "0", "-batch_size", "4"]
                             + model_argv)
    for beam in ("0", "3"):
        generate_main(["-midi_root", data_dir, "-output_dir", os.path.join(workdir, "gen"), "-primer_file", "1",
                       "-target_seq_length", "40", "-num_prime", "16", "-model_weights", best, "-beam", beam]
                      + model_argv)
    print("done: trained, evaluated (loss {:.3f}) and generated".format(avg_loss))
