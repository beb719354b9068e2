"""Trains a tiny DLRM click model (sparse EmbeddingBags, MLPs, dot interaction), saves it, reloads it for inference.

Modeled on: facebookresearch/dlrm, dlrm_s_pytorch.py and dlrm_data_pytorch.py
(https://github.com/facebookresearch/dlrm/blob/090956ee2319ddd349a42232958aefccfe3f7b0a/dlrm_s_pytorch.py,
https://github.com/facebookresearch/dlrm/blob/090956ee2319ddd349a42232958aefccfe3f7b0a/dlrm_data_pytorch.py).

Kept: `use_gpu = args.use_gpu and torch.cuda.is_available()`, then `device = torch.device("cuda", 0)` or
`torch.device("cpu")`, `torch.cuda.manual_seed_all` and cudnn determinism under use_gpu; the module-level `dlrm`,
`ndevices = min(ngpus, mini_batch_size, num_fea - 1) if use_gpu else -1`, `dlrm = dlrm.to(device)` only under use_gpu;
weights made in numpy and assigned with `LL.weight.data = torch.tensor(W, requires_grad=True)`; `nn.EmbeddingBag(...,
mode="sum", sparse=True)` with plain SGD; the RandomDataset that yields whole batches (a list of per-table index
tensors and a stacked offsets tensor) through a DataLoader with batch_size=1 and `collate_wrapper_random_offset`;
`dlrm_wrap` moving lS_i/lS_o only under use_gpu (list or tensor) and `X.to(device)` always; `loss_fn_wrap` moving the
target with `T.to(device)`; `time_wrap` calling `torch.cuda.synchronize()` under use_gpu; the dot interaction that
indexes the device tensor Z with host index tensors `li`, `lj`; the loss read with `E.detach().cpu().numpy()` every
step; `inference()` without eval()/no_grad (as the author has it), reading scores with `Z_test.detach().cpu().numpy()`
and the `Z_test.is_cuda` synchronize; the LRPolicyScheduler stepped per iteration; the "best" model (the loop never
updates `best_acc_test`, so every test saves) saved as a dict with `state_dict` and `opt_state_dict` via `torch.save`;
and the `--load-model` path that loads it with `map_location=torch.device("cuda")` under use_gpu or
`map_location=torch.device("cpu")` otherwise, into a model already moved, restoring the optimizer state only when not
inference-only (the reload here is inference-only).

Shrunk: three small tables, 4 dense features, batches of 32, 20 batches for 3 epochs; targets follow a fixed rule of
the features (the author draws them at random) so accuracy moves; the test set uses another seed (the author's uses
the same one); no MLPerf logging, tensorboard, profiler, ONNX, quantization, QR/MD tricks or distributed mode;
`np.fromstring` replaced by a split; SimpleNamespace args; the checkpoint holds numpy scalars, so it is reloaded with
`weights_only=False` (the author's call predates that default); files in a temporary directory.
"""
import os
import random
import sys
import tempfile
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
from torch.optim.lr_scheduler import _LRScheduler


# ----------------------------------------------------------------------------- dlrm_data_pytorch.py


class RandomDataset(torch.utils.data.Dataset):
    def __init__(self, m_den, ln_emb, mini_batch_size, num_batches, num_indices_per_lookup, rand_seed):
        self.m_den = m_den
        self.ln_emb = ln_emb
        self.mini_batch_size = mini_batch_size
        self.num_batches = num_batches
        self.num_indices_per_lookup = num_indices_per_lookup
        self.rand_seed = rand_seed

    def __getitem__(self, index):
        ra = np.random.RandomState(self.rand_seed * 1000 + index)
        n = self.mini_batch_size
        # dense feature
        Xt = torch.tensor(ra.rand(n, self.m_den).astype(np.float32))
        # sparse feature (sparse indices)
        lS_emb_offsets = []
        lS_emb_indices = []
        first_index = []
        for size in self.ln_emb:
            lS_batch_offsets = []
            lS_batch_indices = []
            offset = 0
            for i in range(n):
                r = ra.random(1)
                sparse_group_size = np.int64(np.round(max([1.0], r[0] * min(size, self.num_indices_per_lookup))))
                r = ra.random(sparse_group_size)
                sparse_group = np.unique(np.round(r * (size - 1)).astype(np.int64))
                sparse_group_size = np.int32(sparse_group.size)
                lS_batch_offsets += [offset]
                lS_batch_indices += sparse_group.tolist()
                offset += sparse_group_size
                if len(first_index) < n:
                    first_index.append(int(sparse_group[0]))
            lS_emb_offsets.append(torch.tensor(lS_batch_offsets))
            lS_emb_indices.append(torch.tensor(lS_batch_indices))
        # a click when the dense features are large, more likely when the first table's item is in its lower half
        rule = (Xt[:, 0] + Xt[:, 1]).numpy() + 0.8 * (np.array(first_index) < self.ln_emb[0] // 2) > 1.4
        T = torch.tensor(rule.astype(np.float32)[:, None])
        return (Xt, lS_emb_offsets, lS_emb_indices, T)

    def __len__(self):
        return self.num_batches


def collate_wrapper_random_offset(list_of_tuples):
    # where each tuple is (X, lS_o, lS_i, T)
    (X, lS_o, lS_i, T) = list_of_tuples[0]
    return (X, torch.stack(lS_o), lS_i, T)


def make_random_data_and_loader(args, ln_emb, m_den):
    train_data = RandomDataset(m_den, ln_emb, args.mini_batch_size, args.num_batches,
                               args.num_indices_per_lookup, rand_seed=args.numpy_rand_seed)
    test_data = RandomDataset(m_den, ln_emb, args.mini_batch_size, args.num_test_batches,
                              args.num_indices_per_lookup, rand_seed=args.numpy_rand_seed + 1)
    train_loader = torch.utils.data.DataLoader(
        train_data, batch_size=1, shuffle=False, num_workers=args.num_workers,
        collate_fn=collate_wrapper_random_offset, pin_memory=False, drop_last=False,
    )
    test_loader = torch.utils.data.DataLoader(
        test_data, batch_size=1, shuffle=False, num_workers=args.num_workers,
        collate_fn=collate_wrapper_random_offset, pin_memory=False, drop_last=False,
    )
    return train_data, train_loader, test_data, test_loader


# ----------------------------------------------------------------------------- dlrm_s_pytorch.py


def time_wrap(use_gpu):
    if use_gpu:
        torch.cuda.synchronize()
    return time.time()


def dlrm_wrap(X, lS_o, lS_i, use_gpu, device, ndevices=1):
    if use_gpu:  # .cuda()
        # lS_i can be either a list of tensors or a stacked tensor.
        # Handle each case below:
        if ndevices == 1:
            lS_i = (
                [S_i.to(device) for S_i in lS_i]
                if isinstance(lS_i, list)
                else lS_i.to(device)
            )
            lS_o = (
                [S_o.to(device) for S_o in lS_o]
                if isinstance(lS_o, list)
                else lS_o.to(device)
            )
    return dlrm(X.to(device), lS_o, lS_i)


def loss_fn_wrap(Z, T, use_gpu, device):
    if args.loss_function == "mse" or args.loss_function == "bce":
        return dlrm.loss_fn(Z, T.to(device))
    elif args.loss_function == "wbce":
        loss_ws_ = dlrm.loss_ws[T.data.view(-1).long()].view_as(T).to(device)
        loss_fn_ = dlrm.loss_fn(Z, T.to(device))
        loss_sc_ = loss_ws_ * loss_fn_
        return loss_sc_.mean()


def unpack_batch(b):
    # Experiment with unweighted samples
    return b[0], b[1], b[2], b[3], torch.ones(b[3].size()), None


class LRPolicyScheduler(_LRScheduler):
    def __init__(self, optimizer, num_warmup_steps, decay_start_step, num_decay_steps):
        self.num_warmup_steps = num_warmup_steps
        self.decay_start_step = decay_start_step
        self.decay_end_step = decay_start_step + num_decay_steps
        self.num_decay_steps = num_decay_steps

        if self.decay_start_step < self.num_warmup_steps:
            sys.exit("Learning rate warmup must finish before the decay starts")

        super(LRPolicyScheduler, self).__init__(optimizer)

    def get_lr(self):
        step_count = self._step_count
        if step_count < self.num_warmup_steps:
            # warmup
            scale = 1.0 - (self.num_warmup_steps - step_count) / self.num_warmup_steps
            lr = [base_lr * scale for base_lr in self.base_lrs]
            self.last_lr = lr
        elif self.decay_start_step <= step_count and step_count < self.decay_end_step:
            # decay
            decayed_steps = step_count - self.decay_start_step
            scale = ((self.num_decay_steps - decayed_steps) / self.num_decay_steps) ** 2
            min_lr = 0.0000001
            lr = [max(min_lr, base_lr * scale) for base_lr in self.base_lrs]
            self.last_lr = lr
        else:
            if self.num_decay_steps > 0:
                # freeze at last, either because we're after decay
                # or because we're between warmup and decay
                lr = self.last_lr
            else:
                # do not adjust
                lr = self.base_lrs
        return lr


class DLRM_Net(nn.Module):
    def create_mlp(self, ln, sigmoid_layer):
        # build MLP layer by layer
        layers = nn.ModuleList()
        for i in range(0, ln.size - 1):
            n = ln[i]
            m = ln[i + 1]

            # construct fully connected operator
            LL = nn.Linear(int(n), int(m), bias=True)

            # initialize the weights
            # custom Xavier input, output or two-sided fill
            mean = 0.0  # std_dev = np.sqrt(variance)
            std_dev = np.sqrt(2 / (m + n))  # np.sqrt(1 / m) # np.sqrt(1 / n)
            W = np.random.normal(mean, std_dev, size=(m, n)).astype(np.float32)
            std_dev = np.sqrt(1 / m)  # np.sqrt(2 / (m + 1))
            bt = np.random.normal(mean, std_dev, size=m).astype(np.float32)
            # approach 1
            LL.weight.data = torch.tensor(W, requires_grad=True)
            LL.bias.data = torch.tensor(bt, requires_grad=True)
            layers.append(LL)

            # construct sigmoid or relu operator
            if i == sigmoid_layer:
                layers.append(nn.Sigmoid())
            else:
                layers.append(nn.ReLU())

        return torch.nn.Sequential(*layers)

    def create_emb(self, m, ln, weighted_pooling=None):
        emb_l = nn.ModuleList()
        v_W_l = []
        for i in range(0, ln.size):
            n = ln[i]
            EE = nn.EmbeddingBag(n, m, mode="sum", sparse=True)
            # initialize embeddings
            W = np.random.uniform(
                low=-np.sqrt(1 / n), high=np.sqrt(1 / n), size=(n, m)
            ).astype(np.float32)
            # approach 1
            EE.weight.data = torch.tensor(W, requires_grad=True)
            if weighted_pooling is None:
                v_W_l.append(None)
            else:
                v_W_l.append(torch.ones(n, dtype=torch.float32))
            emb_l.append(EE)
        return emb_l, v_W_l

    def __init__(
        self,
        m_spa=None,
        ln_emb=None,
        ln_bot=None,
        ln_top=None,
        arch_interaction_op=None,
        arch_interaction_itself=False,
        sigmoid_bot=-1,
        sigmoid_top=-1,
        loss_threshold=0.0,
        ndevices=-1,
        weighted_pooling=None,
        loss_function="bce",
    ):
        super(DLRM_Net, self).__init__()
        # save arguments
        self.ndevices = ndevices
        self.arch_interaction_op = arch_interaction_op
        self.arch_interaction_itself = arch_interaction_itself
        self.loss_threshold = loss_threshold
        self.loss_function = loss_function
        self.weighted_pooling = weighted_pooling

        # create operators
        if ndevices <= 1:
            self.emb_l, self.v_W_l = self.create_emb(m_spa, ln_emb, weighted_pooling)
        self.bot_l = self.create_mlp(ln_bot, sigmoid_bot)
        self.top_l = self.create_mlp(ln_top, sigmoid_top)

        # specify the loss function
        if self.loss_function == "mse":
            self.loss_fn = torch.nn.MSELoss(reduction="mean")
        elif self.loss_function == "bce":
            self.loss_fn = torch.nn.BCELoss(reduction="mean")
        else:
            sys.exit("ERROR: --loss-function=" + self.loss_function + " is not supported")

    def apply_mlp(self, x, layers):
        return layers(x)

    def apply_emb(self, lS_o, lS_i, emb_l, v_W_l):
        ly = []
        for k, sparse_index_group_batch in enumerate(lS_i):
            sparse_offset_group_batch = lS_o[k]

            if v_W_l[k] is not None:
                per_sample_weights = v_W_l[k].gather(0, sparse_index_group_batch)
            else:
                per_sample_weights = None

            E = emb_l[k]
            V = E(
                sparse_index_group_batch,
                sparse_offset_group_batch,
                per_sample_weights=per_sample_weights,
            )

            ly.append(V)
        return ly

    def interact_features(self, x, ly):
        if self.arch_interaction_op == "dot":
            # concatenate dense and sparse features
            (batch_size, d) = x.shape
            T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
            # perform a dot product
            Z = torch.bmm(T, torch.transpose(T, 1, 2))
            # append dense feature with the interactions (into a row vector)
            _, ni, nj = Z.shape
            # approach 2: custom
            offset = 1 if self.arch_interaction_itself else 0
            li = torch.tensor([i for i in range(ni) for j in range(i + offset)])
            lj = torch.tensor([j for i in range(nj) for j in range(i + offset)])
            Zflat = Z[:, li, lj]
            # concatenate dense features and interactions
            R = torch.cat([x] + [Zflat], dim=1)
        elif self.arch_interaction_op == "cat":
            # concatenation features (into a row vector)
            R = torch.cat([x] + ly, dim=1)
        else:
            sys.exit("ERROR: --arch-interaction-op=" + self.arch_interaction_op + " is not supported")

        return R

    def forward(self, dense_x, lS_o, lS_i):
        if self.ndevices <= 1:
            # single device run
            return self.sequential_forward(dense_x, lS_o, lS_i)
        raise NotImplementedError("parallel_forward is not part of this shrunk copy")

    def sequential_forward(self, dense_x, lS_o, lS_i):
        # process dense features (using bottom mlp), resulting in a row vector
        x = self.apply_mlp(dense_x, self.bot_l)

        # process sparse features(using embeddings), resulting in a list of row vectors
        ly = self.apply_emb(lS_o, lS_i, self.emb_l, self.v_W_l)

        # interact features (dense and sparse)
        z = self.interact_features(x, ly)

        # obtain probability of a click (using top mlp)
        p = self.apply_mlp(z, self.top_l)

        # clamp output if needed
        if 0.0 < self.loss_threshold and self.loss_threshold < 1.0:
            z = torch.clamp(p, min=self.loss_threshold, max=(1.0 - self.loss_threshold))
        else:
            z = p

        return z


def inference(args, dlrm, best_acc_test, test_ld, device, use_gpu):
    test_accu = 0
    test_samp = 0

    for i, testBatch in enumerate(test_ld):
        # early exit if nbatches was set by the user and was exceeded
        if nbatches > 0 and i >= nbatches:
            break

        X_test, lS_o_test, lS_i_test, T_test, W_test, CBPP_test = unpack_batch(testBatch)

        # forward pass
        Z_test = dlrm_wrap(
            X_test,
            lS_o_test,
            lS_i_test,
            use_gpu,
            device,
            ndevices=ndevices,
        )
        # For some reason it requires explicit sync before all_gather call if
        # tensor is on GPU memory
        if Z_test.is_cuda:
            torch.cuda.synchronize()

        # compute loss and accuracy
        S_test = Z_test.detach().cpu().numpy()  # numpy array
        T_test = T_test.detach().cpu().numpy()  # numpy array

        mbs_test = T_test.shape[0]  # = mini_batch_size except last
        A_test = np.sum((np.round(S_test, 0) == T_test).astype(np.uint8))

        test_accu += A_test
        test_samp += mbs_test

    acc_test = test_accu / test_samp

    model_metrics_dict = {
        "nepochs": args.nepochs,
        "nbatches": nbatches,
        "nbatches_test": nbatches_test,
        "state_dict": dlrm.state_dict(),
        "test_acc": acc_test,
    }

    is_best = acc_test > best_acc_test
    if is_best:
        best_acc_test = acc_test
    print(" accuracy {:3.3f} %, best {:3.3f} %".format(acc_test * 100, best_acc_test * 100), flush=True)
    return model_metrics_dict, is_best


def run():
    global args, dlrm, ndevices, nbatches, nbatches_test

    ### some basic setup ###
    np.random.seed(args.numpy_rand_seed)
    np.set_printoptions(precision=args.print_precision)
    torch.set_printoptions(precision=args.print_precision)
    torch.manual_seed(args.numpy_rand_seed)

    use_gpu = args.use_gpu and torch.cuda.is_available()

    if use_gpu:
        torch.cuda.manual_seed_all(args.numpy_rand_seed)
        torch.backends.cudnn.deterministic = True
        ngpus = torch.cuda.device_count()
        device = torch.device("cuda", 0)
        print("Using {} GPU(s)...".format(ngpus))
    else:
        device = torch.device("cpu")
        print("Using CPU...")

    ### prepare training data ###
    ln_bot = np.array([int(v) for v in args.arch_mlp_bot.split("-")])
    # input and target at random
    ln_emb = np.array([int(v) for v in args.arch_embedding_size.split("-")])
    m_den = ln_bot[0]
    train_data, train_ld, test_data, test_ld = make_random_data_and_loader(args, ln_emb, m_den)
    nbatches = args.num_batches if args.num_batches > 0 else len(train_ld)
    nbatches_test = len(test_ld)

    ### parse command line arguments ###
    m_spa = args.arch_sparse_feature_size
    num_fea = ln_emb.size + 1  # num sparse + num dense features
    m_den_out = ln_bot[ln_bot.size - 1]
    if args.arch_interaction_itself:
        num_int = (num_fea * (num_fea + 1)) // 2 + m_den_out
    else:
        num_int = (num_fea * (num_fea - 1)) // 2 + m_den_out
    arch_mlp_top_adjusted = str(num_int) + "-" + args.arch_mlp_top
    ln_top = np.array([int(v) for v in arch_mlp_top_adjusted.split("-")])
    if m_spa != m_den_out:
        sys.exit("ERROR: arch-sparse-feature-size does not match last dim of bottom mlp")

    ndevices = min(ngpus, args.mini_batch_size, num_fea - 1) if use_gpu else -1

    ### construct the neural network specified above ###
    dlrm = DLRM_Net(
        m_spa,
        ln_emb,
        ln_bot,
        ln_top,
        arch_interaction_op=args.arch_interaction_op,
        arch_interaction_itself=args.arch_interaction_itself,
        sigmoid_bot=-1,
        sigmoid_top=ln_top.size - 2,
        loss_threshold=args.loss_threshold,
        ndevices=ndevices,
        weighted_pooling=args.weighted_pooling,
        loss_function=args.loss_function,
    )

    if use_gpu:
        # Custom Model-Data Parallel
        # the mlps are replicated and use data parallelism, while
        # the embeddings are distributed and use model parallelism
        dlrm = dlrm.to(device)  # .cuda()
        if dlrm.ndevices > 1:
            dlrm.emb_l, dlrm.v_W_l = dlrm.create_emb(m_spa, ln_emb, args.weighted_pooling)
        else:
            if dlrm.weighted_pooling == "fixed":
                for k, w in enumerate(dlrm.v_W_l):
                    dlrm.v_W_l[k] = w.cuda()

    if not args.inference_only:
        # specify the optimizer algorithm
        opts = {"sgd": torch.optim.SGD, "adagrad": torch.optim.Adagrad}
        optimizer = opts[args.optimizer](dlrm.parameters(), lr=args.learning_rate)
        lr_scheduler = LRPolicyScheduler(
            optimizer,
            args.lr_num_warmup_steps,
            args.lr_decay_start_step,
            args.lr_num_decay_steps,
        )

    ### main loop ###
    best_acc_test = 0
    skip_upto_epoch = 0
    skip_upto_batch = 0
    total_time = 0
    total_loss = 0
    total_iter = 0
    total_samp = 0

    # Load model is specified
    if not (args.load_model == ""):
        print("Loading saved model {}".format(os.path.basename(args.load_model)))
        if use_gpu:
            # NOTE: when targeting inference on single GPU,
            # note that the call to .to(device) has already happened
            ld_model = torch.load(
                args.load_model,
                map_location=torch.device("cuda"),
                weights_only=False,
            )
        else:
            # when targeting inference on CPU
            ld_model = torch.load(args.load_model, map_location=torch.device("cpu"), weights_only=False)
        dlrm.load_state_dict(ld_model["state_dict"])
        ld_j = ld_model["iter"]
        ld_k = ld_model["epoch"]
        ld_nepochs = ld_model["nepochs"]
        ld_nbatches = ld_model["nbatches"]
        ld_nbatches_test = ld_model["nbatches_test"]
        ld_train_loss = ld_model["train_loss"]
        ld_total_loss = ld_model["total_loss"]
        ld_acc_test = ld_model["test_acc"]
        if not args.inference_only:
            optimizer.load_state_dict(ld_model["opt_state_dict"])
            best_acc_test = ld_acc_test
            total_loss = ld_total_loss
            skip_upto_epoch = ld_k  # epochs
            skip_upto_batch = ld_j  # batches
        else:
            args.print_freq = ld_nbatches
            args.test_freq = 0

        print(
            "Saved at: epoch = {:d}/{:d}, batch = {:d}/{:d}, ntbatch = {:d}".format(
                ld_k, ld_nepochs, ld_j, ld_nbatches, ld_nbatches_test
            )
        )
        print("Training state: loss = {:.6f}".format(ld_train_loss))
        print("Testing state: accuracy = {:3.3f} %".format(ld_acc_test * 100))

    print("time/loss/accuracy (if enabled):")

    if not args.inference_only:
        k = 0
        while k < args.nepochs:
            if k < skip_upto_epoch:
                k += 1
                continue

            for j, inputBatch in enumerate(train_ld):
                if j < skip_upto_batch:
                    continue

                X, lS_o, lS_i, T, W, CBPP = unpack_batch(inputBatch)

                t1 = time_wrap(use_gpu)

                # early exit if nbatches was set by the user and has been exceeded
                if nbatches > 0 and j >= nbatches:
                    break

                mbs = T.shape[0]  # = args.mini_batch_size except maybe for last

                # forward pass
                Z = dlrm_wrap(
                    X,
                    lS_o,
                    lS_i,
                    use_gpu,
                    device,
                    ndevices=ndevices,
                )

                # loss
                E = loss_fn_wrap(Z, T, use_gpu, device)

                # compute loss and accuracy
                L = E.detach().cpu().numpy()  # numpy array

                # scaled error gradient propagation
                # (where we do not accumulate gradients across mini-batches)
                optimizer.zero_grad()
                # backward pass
                E.backward()

                # optimizer
                optimizer.step()
                lr_scheduler.step()

                t2 = time_wrap(use_gpu)
                total_time += t2 - t1

                total_loss += L * mbs
                total_iter += 1
                total_samp += mbs

                should_print = ((j + 1) % args.print_freq == 0) or (j + 1 == nbatches)
                should_test = (args.test_freq > 0) and (((j + 1) % args.test_freq == 0) or (j + 1 == nbatches))

                # print time, loss and accuracy
                if should_print or should_test:
                    gT = 1000.0 * total_time / total_iter if args.print_time else -1
                    total_time = 0

                    train_loss = total_loss / total_samp
                    total_loss = 0

                    print(
                        "Finished {} it {}/{} of epoch {}, {:.2f} ms/it,".format(
                            "training", j + 1, nbatches, k, gT
                        )
                        + " loss {:.6f}".format(train_loss),
                        flush=True,
                    )

                    total_iter = 0
                    total_samp = 0

                # testing
                if should_test:
                    print("Testing at - {}/{} of epoch {},".format(j + 1, nbatches, k))
                    model_metrics_dict, is_best = inference(
                        args,
                        dlrm,
                        best_acc_test,
                        test_ld,
                        device,
                        use_gpu,
                    )

                    if is_best and not (args.save_model == "") and not args.inference_only:
                        model_metrics_dict["epoch"] = k
                        model_metrics_dict["iter"] = j + 1
                        model_metrics_dict["train_loss"] = train_loss
                        model_metrics_dict["total_loss"] = total_loss
                        model_metrics_dict["opt_state_dict"] = optimizer.state_dict()
                        print("Saving model to {}".format(os.path.basename(args.save_model)))
                        torch.save(model_metrics_dict, args.save_model)
            skip_upto_batch = 0
            k += 1  # nepochs
    else:
        print("Testing for inference only")
        inference(args, dlrm, best_acc_test, test_ld, device, use_gpu)


def default_args(tmpdir):
    return SimpleNamespace(
        arch_sparse_feature_size=8,
        arch_embedding_size="40-30-20",
        arch_mlp_bot="4-16-8",
        arch_mlp_top="16-1",
        arch_interaction_op="dot",
        arch_interaction_itself=False,
        weighted_pooling=None,
        loss_function="bce",
        loss_threshold=0.0,
        mini_batch_size=32,
        num_batches=20,
        num_test_batches=5,
        num_indices_per_lookup=4,
        num_workers=0,
        nepochs=3,
        learning_rate=0.2,
        optimizer="sgd",
        lr_num_warmup_steps=5,
        lr_decay_start_step=30,
        lr_num_decay_steps=30,
        print_freq=10,
        test_freq=20,
        print_time=False,
        print_precision=5,
        numpy_rand_seed=123,
        use_gpu=True,
        inference_only=False,
        save_model=os.path.join(tmpdir, "dlrm.pt"),
        load_model="",
    )


if __name__ == "__main__":
    random.seed(0)
    with tempfile.TemporaryDirectory() as tmpdir:
        args = default_args(tmpdir)
        run()

        # python dlrm_s_pytorch.py --inference-only --load-model=dlrm.pt
        args = default_args(tmpdir)
        args.inference_only = True
        args.load_model = args.save_model
        args.save_model = ""
        run()
