"""Trains IBM pytorch-seq2seq's attention GRU encoder-decoder on the toy digit-reversal task, checkpoints, resumes from
the latest checkpoint and reloads a named one for the Predictor, as examples/sample.py does: ``seq2seq.cuda()`` and
``loss.cuda()`` (NLLLoss weight buffer) under ``if torch.cuda.is_available()``, ``BucketIterator(device=None if
torch.cuda.is_available() else -1)`` batches, ``input_lengths.tolist()``, ``<sos>`` inputs from ``torch.LongTensor``
then ``.cuda()``, ``.cpu().view(-1).numpy()`` EOS reads, ``.sum().item()`` counts, ``torch.save(model)`` reloaded with
``map_location`` only without CUDA, and a Predictor that moves the model and source ids with ``.cuda()``/``.cpu()``.

Modeled on: IBM/pytorch-seq2seq, examples/sample.py, scripts/generate_toy_data.py, seq2seq/trainer/supervised_trainer.py,
seq2seq/evaluator/{evaluator,predictor}.py, seq2seq/models/{EncoderRNN,DecoderRNN,attention,baseRNN,seq2seq}.py,
seq2seq/{loss/loss,optim/optim,util/checkpoint,dataset/fields}.py at commit f146087a9a271e9b50f46561e090324764b081fb
(https://github.com/IBM/pytorch-seq2seq/blob/f146087a9a271e9b50f46561e090324764b081fb/examples/sample.py,
https://github.com/IBM/pytorch-seq2seq/blob/f146087a9a271e9b50f46561e090324764b081fb/seq2seq/models/DecoderRNN.py).

Kept: `BaseRNN`, `EncoderRNN`, `Attention`, `DecoderRNN` (with the module-level ``import torch.cuda as device``),
`Seq2seq`, `Loss`/`NLLLoss`/`Perplexity` (``norm_term`` a device tensor read with ``.item()``), `Optimizer`,
`Checkpoint`, `Evaluator`, `Predictor`, `SupervisedTrainer` (resume rebuilds the optimizer around the reloaded model).

Changed to run here: torchtext's Field/TabularDataset/BucketIterator/Vocab are small stand-ins with the same interface;
vocabularies are pickled instead of dilled; ``torch.load`` gets ``weights_only=False`` (whole models are pickled);
``size_average=False`` is ``reduction='sum'``, ``F.tanh`` is ``torch.tanh``; the ``raw_input`` loop predicts three fixed
sequences; the commented-out explicit Adam optimizer is used (lr 0.01); checkpoint folder names get a counter; the
trainer's every-N-steps progress log and TopKDecoder are left out.
Shrunk: 192 train / 32 dev pairs of up to 6 digits, hidden size 16 (bidirectional), batch 32, 2 + 1 epochs.
"""
import argparse
import itertools
import logging
import os
import pickle
import random
import shutil
import tempfile
import time
from collections import Counter

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

if torch.cuda.is_available():
    import torch.cuda as device  # noqa: F401  (as in seq2seq/models/DecoderRNN.py)
else:
    import torch as device  # noqa: F401

src_field_name = 'src'
tgt_field_name = 'tgt'

class Field(object):  # torchtext.data.Field
    def __init__(self, batch_first=True, include_lengths=False, preprocessing=None):
        self.batch_first, self.include_lengths, self.preprocessing = batch_first, include_lengths, preprocessing
        self.pad_token, self.vocab = '<pad>', None
    def preprocess(self, text):
        return self.preprocessing(text.split()) if self.preprocessing is not None else text.split()
    def build_vocab(self, dataset, max_size=None):
        name = [n for n, f in dataset.fields.items() if f is self][0]
        counter = Counter(tok for ex in dataset.examples for tok in getattr(ex, name))
        itos = ['<unk>', self.pad_token] + [t for t in ('<sos>', '<eos>') if t in counter]  # torchtext.vocab.Vocab
        itos += [w for w, _ in counter.most_common(max_size) if w not in itos]
        self.vocab = argparse.Namespace(itos=itos, stoi={w: i for i, w in enumerate(itos)})
    def process(self, batch, device):  # Field.pad + Field.numericalize(arr, device=device)
        lengths = [len(x) for x in batch]
        arr = [[self.vocab.stoi.get(tok, 0) for tok in x + [self.pad_token] * (max(lengths) - len(x))] for x in batch]
        var = torch.tensor(arr, dtype=torch.long, device=device)
        return (var, torch.tensor(lengths, dtype=torch.long, device=device)) if self.include_lengths else var

class SourceField(Field):
    def __init__(self, **kwargs):
        kwargs['batch_first'], kwargs['include_lengths'] = True, True
        super(SourceField, self).__init__(**kwargs)

class TargetField(Field):
    SYM_SOS, SYM_EOS = '<sos>', '<eos>'
    def __init__(self, **kwargs):
        kwargs['batch_first'] = True
        kwargs['preprocessing'] = lambda seq: [self.SYM_SOS] + seq + [self.SYM_EOS]
        self.sos_id, self.eos_id = None, None
        super(TargetField, self).__init__(**kwargs)
    def build_vocab(self, *args, **kwargs):
        super(TargetField, self).build_vocab(*args, **kwargs)
        self.sos_id = self.vocab.stoi[self.SYM_SOS]
        self.eos_id = self.vocab.stoi[self.SYM_EOS]

class TabularDataset(object):
    def __init__(self, path, format, fields, filter_pred=None):
        self.fields, self.examples = dict(fields), []
        with open(path) as f:
            for line in f:
                ex = argparse.Namespace(**{name: field.preprocess(col) for (name, field), col
                                           in zip(fields, line.rstrip('\n').split('\t'))})
                if filter_pred is None or filter_pred(ex):
                    self.examples.append(ex)

class BucketIterator(object):
    """torchtext.data.BucketIterator: batches are numericalized on `device`, None = the current GPU, -1 = CPU."""
    def __init__(self, dataset, batch_size, sort_key, device=None, sort=False, sort_within_batch=None,
                 repeat=False, train=True):
        self.dataset, self.batch_size, self.sort_key, self.train, self.sort = dataset, batch_size, sort_key, train, sort
        self.sort_within_batch = sort if sort_within_batch is None else sort_within_batch
        self.device = torch.device('cpu') if device == -1 else torch.device('cuda', torch.cuda.current_device())
    def __len__(self):
        return (len(self.dataset.examples) + self.batch_size - 1) // self.batch_size
    def __iter__(self):
        data = sorted(self.dataset.examples, key=self.sort_key) if self.sort else list(self.dataset.examples)
        if self.train and not self.sort:
            random.shuffle(data)
        for i in range(0, len(data), self.batch_size):
            minibatch = data[i:i + self.batch_size]
            if self.sort_within_batch:
                minibatch = sorted(minibatch, key=self.sort_key, reverse=True)
            yield argparse.Namespace(**{name: field.process([getattr(ex, name) for ex in minibatch], self.device)
                                        for name, field in self.dataset.fields.items()})

class BaseRNN(nn.Module):
    def __init__(self, vocab_size, max_len, hidden_size, input_dropout_p, dropout_p, n_layers, rnn_cell):
        super(BaseRNN, self).__init__()
        self.vocab_size, self.max_len, self.hidden_size, self.n_layers = vocab_size, max_len, hidden_size, n_layers
        self.input_dropout_p, self.dropout_p = input_dropout_p, dropout_p
        self.input_dropout = nn.Dropout(p=input_dropout_p)
        self.rnn_cell = {'lstm': nn.LSTM, 'gru': nn.GRU}[rnn_cell.lower()]

class EncoderRNN(BaseRNN):
    def __init__(self, vocab_size, max_len, hidden_size, input_dropout_p=0, dropout_p=0, n_layers=1,
                 bidirectional=False, rnn_cell='gru', variable_lengths=False, update_embedding=True):
        super().__init__(vocab_size, max_len, hidden_size, input_dropout_p, dropout_p, n_layers, rnn_cell)
        self.variable_lengths = variable_lengths
        self.embedding = nn.Embedding(vocab_size, hidden_size)
        self.embedding.weight.requires_grad = update_embedding
        self.rnn = self.rnn_cell(hidden_size, hidden_size, n_layers, batch_first=True, bidirectional=bidirectional,
                                 dropout=dropout_p)
    def forward(self, input_var, input_lengths=None):
        embedded = self.input_dropout(self.embedding(input_var))
        if self.variable_lengths:
            embedded = nn.utils.rnn.pack_padded_sequence(embedded, input_lengths, batch_first=True)
        output, hidden = self.rnn(embedded)
        if self.variable_lengths:
            output, _ = nn.utils.rnn.pad_packed_sequence(output, batch_first=True)
        return output, hidden

class Attention(nn.Module):
    def __init__(self, dim):
        super(Attention, self).__init__()
        self.linear_out = nn.Linear(dim * 2, dim)
    def forward(self, output, context):
        batch_size, hidden_size, input_size = output.size(0), output.size(2), context.size(1)
        attn = torch.bmm(output, context.transpose(1, 2))
        attn = F.softmax(attn.view(-1, input_size), dim=1).view(batch_size, -1, input_size)
        combined = torch.cat((torch.bmm(attn, context), output), dim=2)
        output = torch.tanh(self.linear_out(combined.view(-1, 2 * hidden_size))).view(batch_size, -1, hidden_size)
        return output, attn

class DecoderRNN(BaseRNN):
    KEY_ATTN_SCORE, KEY_LENGTH, KEY_SEQUENCE = 'attention_score', 'length', 'sequence'
    def __init__(self, vocab_size, max_len, hidden_size, sos_id, eos_id, n_layers=1, rnn_cell='gru',
                 bidirectional=False, input_dropout_p=0, dropout_p=0, use_attention=False):
        super().__init__(vocab_size, max_len, hidden_size, input_dropout_p, dropout_p, n_layers, rnn_cell)
        self.bidirectional_encoder = bidirectional
        self.rnn = self.rnn_cell(hidden_size, hidden_size, n_layers, batch_first=True, dropout=dropout_p)
        self.output_size, self.max_length, self.use_attention = vocab_size, max_len, use_attention
        self.eos_id, self.sos_id, self.init_input = eos_id, sos_id, None
        self.embedding = nn.Embedding(self.output_size, self.hidden_size)
        if use_attention:
            self.attention = Attention(self.hidden_size)
        self.out = nn.Linear(self.hidden_size, self.output_size)
    def forward_step(self, input_var, hidden, encoder_outputs, function):
        batch_size, output_size = input_var.size(0), input_var.size(1)
        output, hidden = self.rnn(self.input_dropout(self.embedding(input_var)), hidden)
        attn = None
        if self.use_attention:
            output, attn = self.attention(output, encoder_outputs)
        predicted_softmax = function(self.out(output.contiguous().view(-1, self.hidden_size)),
                                     dim=1).view(batch_size, output_size, -1)
        return predicted_softmax, hidden, attn
    def forward(self, inputs=None, encoder_hidden=None, encoder_outputs=None, function=F.log_softmax,
                teacher_forcing_ratio=0):
        ret_dict = dict()
        if self.use_attention:
            ret_dict[DecoderRNN.KEY_ATTN_SCORE] = list()
        inputs, batch_size, max_length = self._validate_args(inputs, encoder_hidden, encoder_outputs,
                                                             function, teacher_forcing_ratio)
        decoder_hidden = self._init_state(encoder_hidden)
        use_teacher_forcing = True if random.random() < teacher_forcing_ratio else False
        decoder_outputs, sequence_symbols, lengths = [], [], np.array([max_length] * batch_size)

        def decode(step, step_output, step_attn):
            decoder_outputs.append(step_output)
            if self.use_attention:
                ret_dict[DecoderRNN.KEY_ATTN_SCORE].append(step_attn)
            symbols = decoder_outputs[-1].topk(1)[1]
            sequence_symbols.append(symbols)
            eos_batches = symbols.data.eq(self.eos_id)
            if eos_batches.dim() > 0:
                eos_batches = eos_batches.cpu().view(-1).numpy()
                update_idx = ((lengths > step) & eos_batches) != 0
                lengths[update_idx] = len(sequence_symbols)
            return symbols
        if use_teacher_forcing:
            decoder_input = inputs[:, :-1]
            decoder_output, decoder_hidden, attn = self.forward_step(decoder_input, decoder_hidden, encoder_outputs,
                                                                     function=function)
            for di in range(decoder_output.size(1)):
                decode(di, decoder_output[:, di, :], attn[:, di, :] if attn is not None else None)
        else:
            decoder_input = inputs[:, 0].unsqueeze(1)
            for di in range(max_length):
                decoder_output, decoder_hidden, step_attn = self.forward_step(decoder_input, decoder_hidden,
                                                                              encoder_outputs, function=function)
                decoder_input = decode(di, decoder_output.squeeze(1), step_attn)
        ret_dict[DecoderRNN.KEY_SEQUENCE] = sequence_symbols
        ret_dict[DecoderRNN.KEY_LENGTH] = lengths.tolist()
        return decoder_outputs, decoder_hidden, ret_dict
    def _init_state(self, encoder_hidden):
        if encoder_hidden is None:
            return None
        if isinstance(encoder_hidden, tuple):
            return tuple([self._cat_directions(h) for h in encoder_hidden])
        return self._cat_directions(encoder_hidden)
    def _cat_directions(self, h):
        if self.bidirectional_encoder:
            h = torch.cat([h[0:h.size(0):2], h[1:h.size(0):2]], 2)
        return h
    def _validate_args(self, inputs, encoder_hidden, encoder_outputs, function, teacher_forcing_ratio):
        if inputs is None and encoder_hidden is None:
            batch_size = 1
        elif inputs is not None:
            batch_size = inputs.size(0)
        else:
            batch_size = encoder_hidden[0].size(1) if self.rnn_cell is nn.LSTM else encoder_hidden.size(1)
        if inputs is None:
            assert teacher_forcing_ratio == 0, "Teacher forcing has to be disabled when no inputs is provided."
            inputs = torch.LongTensor([self.sos_id] * batch_size).view(batch_size, 1)
            if torch.cuda.is_available():
                inputs = inputs.cuda()
            max_length = self.max_length
        else:
            max_length = inputs.size(1) - 1  # minus the start of sequence symbol
        return inputs, batch_size, max_length

class Seq2seq(nn.Module):
    def __init__(self, encoder, decoder, decode_function=F.log_softmax):
        super(Seq2seq, self).__init__()
        self.encoder, self.decoder, self.decode_function = encoder, decoder, decode_function
    def flatten_parameters(self):
        self.encoder.rnn.flatten_parameters()
        self.decoder.rnn.flatten_parameters()
    def forward(self, input_variable, input_lengths=None, target_variable=None, teacher_forcing_ratio=0):
        encoder_outputs, encoder_hidden = self.encoder(input_variable, input_lengths)
        return self.decoder(inputs=target_variable, encoder_hidden=encoder_hidden, encoder_outputs=encoder_outputs,
                            function=self.decode_function, teacher_forcing_ratio=teacher_forcing_ratio)

class Loss(object):
    def __init__(self, name, criterion):
        self.name, self.criterion, self.acc_loss, self.norm_term = name, criterion, 0, 0
    def reset(self):
        self.acc_loss = 0
        self.norm_term = 0
    def cuda(self):
        self.criterion.cuda()
    def backward(self):
        assert type(self.acc_loss) is not int, "No loss to back propagate."
        self.acc_loss.backward()

class NLLLoss(Loss):
    _NAME = "Avg NLLLoss"
    def __init__(self, weight=None, mask=None, size_average=True):
        self.mask, self.size_average = mask, size_average
        if mask is not None:
            weight[mask] = 0
        criterion = nn.NLLLoss(weight=weight, reduction='mean' if size_average else 'sum')
        super(NLLLoss, self).__init__(self._NAME, criterion)
    def get_loss(self):
        if isinstance(self.acc_loss, int):
            return 0
        loss = self.acc_loss.data.item()
        return loss / self.norm_term if self.size_average else loss
    def eval_batch(self, outputs, target):
        self.acc_loss += self.criterion(outputs, target)
        self.norm_term += 1

class Perplexity(NLLLoss):
    _NAME = "Perplexity"
    _MAX_EXP = 100
    def __init__(self, weight=None, mask=None):
        super(Perplexity, self).__init__(weight=weight, mask=mask, size_average=False)
    def eval_batch(self, outputs, target):
        self.acc_loss += self.criterion(outputs, target)
        if self.mask is None:
            self.norm_term += np.prod(target.size())
        else:
            self.norm_term += target.data.ne(self.mask).sum()
    def get_loss(self):
        nll = super(Perplexity, self).get_loss() / self.norm_term.item()
        return np.exp(min(nll, Perplexity._MAX_EXP))

class Optimizer(object):
    def __init__(self, optim, max_grad_norm=0):
        self.optimizer, self.scheduler, self.max_grad_norm = optim, None, max_grad_norm
    def set_scheduler(self, scheduler):
        self.scheduler = scheduler
    def step(self):
        if self.max_grad_norm > 0:
            params = itertools.chain.from_iterable([group['params'] for group in self.optimizer.param_groups])
            torch.nn.utils.clip_grad_norm_(params, self.max_grad_norm)
        self.optimizer.step()
    def update(self, loss, epoch):
        if isinstance(self.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
            self.scheduler.step(loss)
        elif self.scheduler is not None:
            self.scheduler.step()

class Checkpoint(object):
    CHECKPOINT_DIR_NAME, TRAINER_STATE_NAME, MODEL_NAME = 'checkpoints', 'trainer_states.pt', 'model.pt'
    INPUT_VOCAB_FILE, OUTPUT_VOCAB_FILE = 'input_vocab.pt', 'output_vocab.pt'
    _counter = itertools.count()
    def __init__(self, model, optimizer, epoch, step, input_vocab, output_vocab, path=None):
        self.model, self.optimizer, self.input_vocab, self.output_vocab = model, optimizer, input_vocab, output_vocab
        self.epoch, self.step, self._path = epoch, step, path
    def save(self, experiment_dir):
        date_time = time.strftime('%Y_%m_%d_%H_%M_%S', time.localtime()) + '_%04d' % next(self._counter)
        self._path = path = os.path.join(experiment_dir, self.CHECKPOINT_DIR_NAME, date_time)
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        torch.save({'epoch': self.epoch, 'step': self.step, 'optimizer': self.optimizer},
                   os.path.join(path, self.TRAINER_STATE_NAME))
        torch.save(self.model, os.path.join(path, self.MODEL_NAME))
        for name, vocab in ((self.INPUT_VOCAB_FILE, self.input_vocab), (self.OUTPUT_VOCAB_FILE, self.output_vocab)):
            with open(os.path.join(path, name), 'wb') as fout:
                pickle.dump(vocab, fout)
        return path
    @classmethod
    def load(cls, path):
        if torch.cuda.is_available():
            resume_checkpoint = torch.load(os.path.join(path, cls.TRAINER_STATE_NAME), weights_only=False)
            model = torch.load(os.path.join(path, cls.MODEL_NAME), weights_only=False)
        else:
            resume_checkpoint = torch.load(os.path.join(path, cls.TRAINER_STATE_NAME),
                                           map_location=lambda storage, loc: storage, weights_only=False)
            model = torch.load(os.path.join(path, cls.MODEL_NAME), map_location=lambda storage, loc: storage,
                               weights_only=False)
        model.flatten_parameters()  # make RNN parameters contiguous
        input_vocab, output_vocab = [pickle.load(open(os.path.join(path, f), 'rb'))
                                     for f in (cls.INPUT_VOCAB_FILE, cls.OUTPUT_VOCAB_FILE)]
        return Checkpoint(model=model, input_vocab=input_vocab, output_vocab=output_vocab,
                          optimizer=resume_checkpoint['optimizer'], epoch=resume_checkpoint['epoch'],
                          step=resume_checkpoint['step'], path=path)
    @classmethod
    def get_latest_checkpoint(cls, experiment_path):
        checkpoints_path = os.path.join(experiment_path, cls.CHECKPOINT_DIR_NAME)
        return os.path.join(checkpoints_path, sorted(os.listdir(checkpoints_path), reverse=True)[0])

class Evaluator(object):
    def __init__(self, loss=None, batch_size=64):
        self.loss, self.batch_size = loss, batch_size
    def evaluate(self, model, data):
        model.eval()
        loss = self.loss
        loss.reset()
        match, total = 0, 0
        device = None if torch.cuda.is_available() else -1
        batch_iterator = BucketIterator(dataset=data, batch_size=self.batch_size, sort=True,
                                        sort_key=lambda x: len(x.src), device=device, train=False)
        pad = data.fields[tgt_field_name].vocab.stoi[data.fields[tgt_field_name].pad_token]
        with torch.no_grad():
            for batch in batch_iterator:
                input_variables, input_lengths = getattr(batch, src_field_name)
                target_variables = getattr(batch, tgt_field_name)
                decoder_outputs, decoder_hidden, other = model(input_variables, input_lengths.tolist(),
                                                               target_variables)
                seqlist = other['sequence']
                for step, step_output in enumerate(decoder_outputs):
                    target = target_variables[:, step + 1]
                    loss.eval_batch(step_output.view(target_variables.size(0), -1), target)
                    non_padding = target.ne(pad)
                    match += seqlist[step].view(-1).eq(target).masked_select(non_padding).sum().item()
                    total += non_padding.sum().item()
        return loss.get_loss(), float('nan') if total == 0 else match / total

class Predictor(object):
    def __init__(self, model, src_vocab, tgt_vocab):
        if torch.cuda.is_available():
            self.model = model.cuda()
        else:
            self.model = model.cpu()
        self.model.eval()
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
    def get_decoder_features(self, src_seq):
        src_id_seq = torch.LongTensor([self.src_vocab.stoi[tok] for tok in src_seq]).view(1, -1)
        if torch.cuda.is_available():
            src_id_seq = src_id_seq.cuda()
        with torch.no_grad():
            softmax_list, _, other = self.model(src_id_seq, [len(src_seq)])
        return other
    def predict(self, src_seq):
        other = self.get_decoder_features(src_seq)
        tgt_id_seq = [other['sequence'][di][0].data[0] for di in range(other['length'][0])]
        return [self.tgt_vocab.itos[tok] for tok in tgt_id_seq]

class SupervisedTrainer(object):
    def __init__(self, expt_dir='experiment', loss=None, batch_size=64, random_seed=None, checkpoint_every=100,
                 print_every=100):
        self.random_seed = random_seed
        if random_seed is not None:
            random.seed(random_seed)
            torch.manual_seed(random_seed)
        self.loss, self.optimizer, self.batch_size = loss, None, batch_size
        self.evaluator = Evaluator(loss=self.loss, batch_size=batch_size)
        self.checkpoint_every, self.print_every, self.expt_dir = checkpoint_every, print_every, expt_dir
        os.makedirs(self.expt_dir, exist_ok=True)
        self.logger = logging.getLogger(__name__)
    def _train_batch(self, input_variable, input_lengths, target_variable, model, teacher_forcing_ratio):
        loss = self.loss
        decoder_outputs, decoder_hidden, other = model(input_variable, input_lengths, target_variable,
                                                       teacher_forcing_ratio=teacher_forcing_ratio)
        loss.reset()
        for step, step_output in enumerate(decoder_outputs):
            batch_size = target_variable.size(0)
            loss.eval_batch(step_output.contiguous().view(batch_size, -1), target_variable[:, step + 1])
        model.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.get_loss()
    def _train_epoches(self, data, model, n_epochs, start_epoch, start_step, dev_data=None, teacher_forcing_ratio=0):
        epoch_loss_total = 0  # Reset every epoch
        device = None if torch.cuda.is_available() else -1
        batch_iterator = BucketIterator(dataset=data, batch_size=self.batch_size, sort=False, sort_within_batch=True,
                                        sort_key=lambda x: len(x.src), device=device, repeat=False)
        steps_per_epoch = len(batch_iterator)
        total_steps = steps_per_epoch * n_epochs
        step, step_elapsed = start_step, 0
        for epoch in range(start_epoch, n_epochs + 1):
            batch_generator = batch_iterator.__iter__()
            for _ in range((epoch - 1) * steps_per_epoch, step):  # consuming seen batches from previous training
                next(batch_generator)
            model.train(True)
            for batch in batch_generator:
                step, step_elapsed = step + 1, step_elapsed + 1
                input_variables, input_lengths = getattr(batch, src_field_name)
                target_variables = getattr(batch, tgt_field_name)
                loss = self._train_batch(input_variables, input_lengths.tolist(), target_variables, model,
                                         teacher_forcing_ratio)
                epoch_loss_total += loss
                if step % self.checkpoint_every == 0 or step == total_steps:
                    Checkpoint(model=model, optimizer=self.optimizer, epoch=epoch, step=step,
                               input_vocab=data.fields[src_field_name].vocab,
                               output_vocab=data.fields[tgt_field_name].vocab).save(self.expt_dir)
            if step_elapsed == 0:
                continue
            epoch_loss_avg, epoch_loss_total = epoch_loss_total / min(steps_per_epoch, step - start_step), 0
            log_msg = "Finished epoch %d: Train %s: %.4f" % (epoch, self.loss.name, epoch_loss_avg)
            if dev_data is not None:
                dev_loss, accuracy = self.evaluator.evaluate(model, dev_data)
                self.optimizer.update(dev_loss, epoch)
                log_msg += ", Dev %s: %.4f, Accuracy: %.4f" % (self.loss.name, dev_loss, accuracy)
                model.train(mode=True)
            else:
                self.optimizer.update(epoch_loss_avg, epoch)
            self.logger.info(log_msg)
    def train(self, model, data, num_epochs=5, resume=False, dev_data=None, optimizer=None, teacher_forcing_ratio=0):
        if resume:
            resume_checkpoint = Checkpoint.load(Checkpoint.get_latest_checkpoint(self.expt_dir))
            model, self.optimizer = resume_checkpoint.model, resume_checkpoint.optimizer
            # A walk around to set optimizing parameters properly
            resume_optim = self.optimizer.optimizer
            defaults = resume_optim.param_groups[0]
            defaults.pop('params', None)
            defaults.pop('initial_lr', None)
            self.optimizer.optimizer = resume_optim.__class__(model.parameters(), **defaults)
            start_epoch, step = resume_checkpoint.epoch, resume_checkpoint.step
        else:
            start_epoch, step = 1, 0
            if optimizer is None:
                optimizer = Optimizer(optim.Adam(model.parameters()), max_grad_norm=5)
            self.optimizer = optimizer
        self.logger.info("Optimizer: %s" % type(self.optimizer.optimizer).__name__)
        self._train_epoches(data, model, num_epochs, start_epoch, step, dev_data=dev_data,
                            teacher_forcing_ratio=teacher_forcing_ratio)
        return model

def generate_dataset(root, name, size, max_len):
    os.makedirs(os.path.join(root, name), exist_ok=True)
    with open(os.path.join(root, name, 'data.txt'), 'w') as fout:
        for _ in range(size):
            seq = [str(random.randint(0, 9)) for _ in range(random.randint(1, max_len))]
            fout.write("\t".join([" ".join(seq), " ".join(reversed(seq))]) + '\n')
    return os.path.join(root, name, 'data.txt')

def sample(opt, train_path, dev_path):
    if opt.load_checkpoint is not None:
        logging.info("loading checkpoint from {}".format(opt.load_checkpoint))
        checkpoint = Checkpoint.load(os.path.join(opt.expt_dir, Checkpoint.CHECKPOINT_DIR_NAME, opt.load_checkpoint))
        seq2seq, input_vocab, output_vocab = checkpoint.model, checkpoint.input_vocab, checkpoint.output_vocab
    else:
        src, tgt, max_len = SourceField(), TargetField(), 50
        def len_filter(example):
            return len(example.src) <= max_len and len(example.tgt) <= max_len
        train, dev = [TabularDataset(path=path, format='tsv', fields=[('src', src), ('tgt', tgt)],
                                     filter_pred=len_filter) for path in (train_path, dev_path)]
        src.build_vocab(train, max_size=50000)
        tgt.build_vocab(train, max_size=50000)
        input_vocab, output_vocab = src.vocab, tgt.vocab
        weight = torch.ones(len(tgt.vocab.itos))
        pad = tgt.vocab.stoi[tgt.pad_token]
        loss = Perplexity(weight, pad)
        if torch.cuda.is_available():
            loss.cuda()
        seq2seq, optimizer = None, None
        if not opt.resume:
            hidden_size, bidirectional = 16, True
            encoder = EncoderRNN(len(src.vocab.itos), max_len, hidden_size, bidirectional=bidirectional,
                                 variable_lengths=True)
            decoder = DecoderRNN(len(tgt.vocab.itos), max_len, hidden_size * 2 if bidirectional else hidden_size,
                                 dropout_p=0.2, use_attention=True, bidirectional=bidirectional,
                                 eos_id=tgt.eos_id, sos_id=tgt.sos_id)
            seq2seq = Seq2seq(encoder, decoder)
            if torch.cuda.is_available():
                seq2seq.cuda()
            for param in seq2seq.parameters():
                param.data.uniform_(-0.08, 0.08)
            optimizer = Optimizer(torch.optim.Adam(seq2seq.parameters(), lr=0.01), max_grad_norm=5)
        t = SupervisedTrainer(loss=loss, batch_size=32, random_seed=opt.seed, checkpoint_every=4, print_every=3,
                              expt_dir=opt.expt_dir)
        seq2seq = t.train(seq2seq, train, num_epochs=opt.epochs, dev_data=dev, optimizer=optimizer,
                          teacher_forcing_ratio=0.5, resume=opt.resume)
    predictor = Predictor(seq2seq, input_vocab, output_vocab)
    predictions = [predictor.predict(seq_str.strip().split()) for seq_str in ("1 2 3", "9 8 7 6", "4 0 4 5 2")]
    print(predictions)
    return predictions

if __name__ == '__main__':
    logging.basicConfig(format='%(name)-12s %(levelname)-8s %(message)s', level=logging.INFO)
    random.seed(0)
    torch.manual_seed(0)
    tmp = tempfile.mkdtemp(prefix="seq2seq_")
    try:
        train_path = generate_dataset(os.path.join(tmp, 'toy_reverse'), 'train', 192, max_len=6)
        dev_path = generate_dataset(os.path.join(tmp, 'toy_reverse'), 'dev', 32, max_len=6)
        parser = argparse.ArgumentParser()
        parser.add_argument('--expt_dir', default=os.path.join(tmp, 'experiment'))
        parser.add_argument('--load_checkpoint', default=None)
        parser.add_argument('--resume', action='store_true', default=False)
        parser.add_argument('--epochs', type=int, default=2)
        parser.add_argument('--seed', type=int, default=1)
        sample(parser.parse_args([]), train_path, dev_path)
        sample(parser.parse_args(['--resume', '--epochs', '3']), train_path, dev_path)
        latest = os.path.basename(Checkpoint.get_latest_checkpoint(os.path.join(tmp, 'experiment')))
        predictions = sample(parser.parse_args(['--load_checkpoint', latest]), train_path, dev_path)
        print("done: %d predictions from checkpoint %s" % (len(predictions), latest[-4:]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
