"""Trains a visual question answering model ("Show, Ask, Attend, and Answer": an LSTM question encoder, two
attention glimpses over a grid of precomputed image features, a classifier over the most common answers, the loss
weighted by how many of the ten human answers agree) on synthetic questions about synthetic feature maps the way
Cyanogenoid/pytorch-vqa's train.py does it: a `DataParallel` net on the GPU, batches moved with `.cuda(async=True)`
into `Variable`s, the VQA accuracy `min(0.3 * agreeing, 1)`, a `Tracker` of moving means / means, and after every
epoch the tracker, config, weights and validation answers saved with `torch.save`; view-log.py's loader then reads
that file back and reports the validation accuracy per epoch.

Modeled on: Cyanogenoid/pytorch-vqa, train.py, model.py, data.py, utils.py, config.py, preprocess-vocab.py and
view-log.py at commit 8ff1afa630659d7add8d38e692718c2bc2fcae0d
(https://github.com/Cyanogenoid/pytorch-vqa/tree/8ff1afa630659d7add8d38e692718c2bc2fcae0d).

Kept: train.py's `update_learning_rate`, `run` (`net.train()` / `net.eval()`, `nn.LogSoftmax().cuda()`,
`var_params` with `volatile`, the four batch tensors moved with `.cuda(...)` into `Variable`s,
`loss = (nll * a / 10).sum(dim=1).mean()`, `batch_accuracy(out.data, a.data).cpu()`, the step only in training,
`out.data.cpu().max(dim=1)` answers, accuracies and `idx.view(-1).clone()` kept in evaluation, which runs without
`torch.no_grad()` as written, `a.item()` per accuracy) and `main` (`cudnn.benchmark = True`,
`nn.DataParallel(model.Net(...)).cuda()`, Adam, the results dict with `net.state_dict()`); model.py as written
(`TextProcessor.forward` gets `list(q_len.data)`, the lengths already on the GPU, for `pack_padded_sequence`);
data.py's `get_loader`, `collate_fn` (sorted by question length), `VQA` and `prepare_questions` /
`prepare_answers`; utils.py's `batch_accuracy`, `path_for`, `Tracker`; preprocess-vocab.py; view-log.py's `main`
(`torch.load(path)`, `torch.FloatTensor` of the tracked validation accuracies).

Changed to run here: the author's unconditional `.cuda()` calls (net, `LogSoftmax`, the batch) are made only when
`cuda = torch.cuda.is_available()`; `async=True` (a keyword since Python 3.7) is `non_blocking=True`,
`loss.data[0]` is `loss.item()`, `init.xavier_uniform` is `init.xavier_uniform_`; VQA v2 and the ResNet features are
not downloaded: `make_vqa` writes question / annotation jsons in the VQA format (the colour or the position of one
of six object types) and features whose cells hold colour- and shape-specific vectors at the objects; h5py is not
installed, so the features are a `.npy` file opened with `np.load(mmap_mode='r')` where data.py opens the h5 file;
the punctuation regexes of `prepare_answers` are left out (clean answers); config values are module constants;
tqdm, the plot and method docstrings are left out; the log and data folders are temporary.
Shrunk: 2048 x 14 x 14 image features -> 64 x 4 x 4, question features 1024 -> 64, embedding 300 -> 32, attention
512 -> 32, classifier 1024 -> 64, max_answers 3000 -> 8 (all the synthetic answers); batch size 128 -> 32, 3 epochs
instead of 50, lr_halflife 50000 -> 200; 384 training and 96 validation questions; data_workers 8 -> 0.
"""
import itertools
import json
import os
import shutil
import tempfile
from collections import Counter

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.init as init
import torch.optim as optim
import torch.utils.data as data
from torch.autograd import Variable
from torch.nn.utils.rnn import pack_padded_sequence

ROOT = tempfile.mkdtemp(prefix='vqa_')
cuda = torch.cuda.is_available()  # the author moves everything to the GPU unconditionally

# ----------------------------------------------------------------------------- config.py
qa_path = os.path.join(ROOT, 'vqa')  # directory containing the question and annotation jsons
preprocessed_path = os.path.join(ROOT, 'resnet-4x4.npy')  # path where preprocessed features are saved to
vocabulary_path = os.path.join(ROOT, 'vocab.json')  # path where the used vocabularies are saved to
task, dataset = 'OpenEnded', 'mscoco'
output_size = 4  # size of the feature maps after processing through a network
output_features = 64  # number of feature maps thereof
epochs, batch_size = 3, 32
initial_lr = 1e-3  # default Adam lr
lr_halflife = 200  # in iterations
data_workers, max_answers = 0, 8

# ----------------------------------------------------------------------------- synthetic VQA v2 + features
SHAPES = ['cube', 'ball', 'cone', 'ring', 'star', 'disk']
COLOURS = ['red', 'green', 'blue', 'yellow', 'purple', 'white']


def make_vqa(n_images=240, n_train=384, n_val=96, seed=5):
    rng = np.random.RandomState(seed)
    shape_vec = rng.normal(0, 1, (len(SHAPES), output_features))
    colour_vec = rng.normal(0, 1, (len(COLOURS), output_features))
    features = rng.normal(0, 0.3, (n_images, output_features, output_size, output_size)).astype('float32')
    scenes = []
    for i in range(n_images):
        cells, objs = rng.permutation(output_size * output_size)[:3], {}
        for cell, s in zip(cells, rng.permutation(len(SHAPES))[:3]):
            c = rng.randint(len(COLOURS))
            features[i, :, cell // output_size, cell % output_size] += shape_vec[s] + colour_vec[c]
            objs[SHAPES[s]] = (COLOURS[c], 'top' if cell // output_size < output_size // 2 else 'bottom')
        scenes.append(objs)
    ids = np.arange(n_images) * 7 + 100000  # COCO ids
    np.save(preprocessed_path, features)
    np.save(preprocessed_path.replace('.npy', '_ids.npy'), ids)
    os.makedirs(qa_path)
    for split, n in (('train2014', n_train), ('val2014', n_val)):
        questions, annotations = [], []
        for k in range(n):
            i = rng.randint(n_images)
            shape = rng.choice(sorted(scenes[i]))
            colour, where = scenes[i][shape]
            if rng.rand() < 0.7:
                text, answer = 'What color is the %s?' % shape, colour
            else:
                text, answer = 'Is the %s at the top or the bottom of the picture?' % shape, where
            humans = [answer if rng.rand() < 0.85 else rng.choice(COLOURS + ['top', 'bottom']) for _ in range(10)]
            qid = int(ids[i]) * 10 + k
            questions.append({'image_id': int(ids[i]), 'question': text, 'question_id': qid})
            annotations.append({'image_id': int(ids[i]), 'question_id': qid, 'answers': [{'answer': h} for h in humans]})
        with open(path_for(train=split == 'train2014', val=split == 'val2014', question=True), 'w') as fd:
            json.dump({'questions': questions, 'data_type': dataset, 'data_subtype': split}, fd)
        with open(path_for(train=split == 'train2014', val=split == 'val2014', answer=True), 'w') as fd:
            json.dump({'annotations': annotations, 'data_type': dataset, 'data_subtype': split}, fd)


# ----------------------------------------------------------------------------- utils.py
def batch_accuracy(predicted, true):
    """ Compute the accuracies for a batch of predictions and answers """
    _, predicted_index = predicted.max(dim=1, keepdim=True)
    agreeing = true.gather(dim=1, index=predicted_index)
    return (agreeing * 0.3).clamp(max=1)  # min(agreeing * 0.3, 1), see the derivation in utils.py


def path_for(train=False, val=False, test=False, question=False, answer=False):
    assert train + val + test == 1
    assert question + answer == 1
    split = 'train2014' if train else 'val2014' if val else 'test2015'
    fmt = '{0}_{1}_{2}_questions.json' if question else '{1}_{2}_annotations.json'
    return os.path.join(qa_path, fmt.format(task, dataset, split))


class Tracker:
    """ Keep track of results over time, while having access to monitors to display information about them. """
    def __init__(self):
        self.data = {}

    def track(self, name, *monitors):
        l = Tracker.ListStorage(monitors)
        self.data.setdefault(name, []).append(l)
        return l

    def to_dict(self):
        # turn list storages into regular lists
        return {k: list(map(list, v)) for k, v in self.data.items()}

    class ListStorage:
        def __init__(self, monitors=[]):
            self.data = []
            self.monitors = monitors
            for monitor in self.monitors:
                setattr(self, monitor.name, monitor)

        def append(self, item):
            for monitor in self.monitors:
                monitor.update(item)
            self.data.append(item)

        def __iter__(self):
            return iter(self.data)

    class MeanMonitor:
        name = 'mean'

        def __init__(self):
            self.n = 0
            self.total = 0

        def update(self, value):
            self.total += value
            self.n += 1

        @property
        def value(self):
            return self.total / self.n

    class MovingMeanMonitor:
        name = 'mean'

        def __init__(self, momentum=0.9):
            self.momentum = momentum
            self.first = True
            self.value = None

        def update(self, value):
            if self.first:
                self.value = value
                self.first = False
            else:
                m = self.momentum
                self.value = m * self.value + (1 - m) * value


# ----------------------------------------------------------------------------- preprocess-vocab.py
def extract_vocab(iterable, top_k=None, start=0):
    """ Turns an iterable of list of tokens into a vocabulary. """
    all_tokens = itertools.chain.from_iterable(iterable)
    counter = Counter(all_tokens)
    if top_k:
        most_common = counter.most_common(top_k)
        most_common = (t for t, c in most_common)
    else:
        most_common = counter.keys()
    # descending in count, then lexicographical order
    tokens = sorted(most_common, key=lambda x: (counter[x], x), reverse=True)
    vocab = {t: i for i, t in enumerate(tokens, start=start)}
    return vocab


def preprocess_vocab():
    with open(path_for(train=True, question=True), 'r') as fd:
        questions = json.load(fd)
    with open(path_for(train=True, answer=True), 'r') as fd:
        answers = json.load(fd)
    questions = prepare_questions(questions)
    answers = prepare_answers(answers)
    question_vocab = extract_vocab(questions, start=1)
    answer_vocab = extract_vocab(answers, top_k=max_answers)
    vocabs = {'question': question_vocab, 'answer': answer_vocab}
    with open(vocabulary_path, 'w') as fd:
        json.dump(vocabs, fd)


# ----------------------------------------------------------------------------- data.py
def get_loader(train=False, val=False, test=False):
    """ Returns a data loader for the desired split """
    assert train + val + test == 1, 'need to set exactly one of {train, val, test} to True'
    split = VQA(path_for(train=train, val=val, test=test, question=True),
                path_for(train=train, val=val, test=test, answer=True), preprocessed_path, answerable_only=train)
    loader = torch.utils.data.DataLoader(split, batch_size=batch_size,
                                         shuffle=train,  # only shuffle the data in training
                                         pin_memory=True, num_workers=data_workers, collate_fn=collate_fn)
    return loader


def collate_fn(batch):
    # put question lengths in descending order so that we can use packed sequences later
    batch.sort(key=lambda x: x[-1], reverse=True)
    return data.dataloader.default_collate(batch)


class VQA(data.Dataset):
    """ VQA dataset, open-ended """
    def __init__(self, questions_path, answers_path, image_features_path, answerable_only=False):
        super(VQA, self).__init__()
        with open(questions_path, 'r') as fd:
            questions_json = json.load(fd)
        with open(answers_path, 'r') as fd:
            answers_json = json.load(fd)
        with open(vocabulary_path, 'r') as fd:
            vocab_json = json.load(fd)
        self._check_integrity(questions_json, answers_json)
        self.vocab = vocab_json
        self.token_to_index = self.vocab['question']
        self.answer_to_index = self.vocab['answer']
        self.questions = list(prepare_questions(questions_json))
        self.answers = list(prepare_answers(answers_json))
        self.questions = [self._encode_question(q) for q in self.questions]
        self.answers = [self._encode_answers(a) for a in self.answers]
        self.image_features_path = image_features_path
        self.coco_id_to_index = self._create_coco_id_to_index()
        self.coco_ids = [q['image_id'] for q in questions_json['questions']]
        # only use questions that have at least one answer?
        self.answerable_only = answerable_only
        if self.answerable_only:
            self.answerable = self._find_answerable()

    @property
    def max_question_length(self):
        if not hasattr(self, '_max_length'):
            self._max_length = max(map(len, self.questions))
        return self._max_length

    @property
    def num_tokens(self):
        return len(self.token_to_index) + 1  # add 1 for <unknown> token at index 0

    def _create_coco_id_to_index(self):
        coco_ids = np.load(self.image_features_path.replace('.npy', '_ids.npy'))
        return {int(id): i for i, id in enumerate(coco_ids)}

    def _check_integrity(self, questions, answers):
        qa_pairs = list(zip(questions['questions'], answers['annotations']))
        assert all(q['question_id'] == a['question_id'] for q, a in qa_pairs), 'Questions not aligned with answers'
        assert all(q['image_id'] == a['image_id'] for q, a in qa_pairs), 'Image id of question and answer don\'t match'
        assert questions['data_type'] == answers['data_type'], 'Mismatched data types'
        assert questions['data_subtype'] == answers['data_subtype'], 'Mismatched data subtypes'

    def _find_answerable(self):
        answerable = []
        for i, answers in enumerate(self.answers):
            answer_has_index = len(answers.nonzero()) > 0
            if answer_has_index:
                answerable.append(i)
        return answerable

    def _encode_question(self, question):
        vec = torch.zeros(self.max_question_length).long()
        for i, token in enumerate(question):
            index = self.token_to_index.get(token, 0)
            vec[i] = index
        return vec, len(question)

    def _encode_answers(self, answers):
        answer_vec = torch.zeros(len(self.answer_to_index))
        for answer in answers:
            index = self.answer_to_index.get(answer)
            if index is not None:
                answer_vec[index] += 1
        return answer_vec

    def _load_image(self, image_id):
        if not hasattr(self, 'features_file'):
            self.features_file = np.load(self.image_features_path, mmap_mode='r')
        index = self.coco_id_to_index[image_id]
        img = self.features_file[index].astype('float32')
        return torch.from_numpy(img)

    def __getitem__(self, item):
        if self.answerable_only:
            # change of indices to only address answerable questions
            item = self.answerable[item]
        q, q_length = self.questions[item]
        a = self.answers[item]
        image_id = self.coco_ids[item]
        v = self._load_image(image_id)
        return v, q, a, item, q_length

    def __len__(self):
        if self.answerable_only:
            return len(self.answerable)
        else:
            return len(self.questions)


def prepare_questions(questions_json):
    """ Tokenize and normalize questions from a given question json in the usual VQA format. """
    questions = [q['question'] for q in questions_json['questions']]
    for question in questions:
        question = question.lower()[:-1]
        yield question.split(' ')


def prepare_answers(answers_json):
    """ Normalize answers from a given answer json in the usual VQA format. """
    answers = [[a['answer'] for a in ans_dict['answers']] for ans_dict in answers_json['annotations']]
    for answer_list in answers:
        yield list(answer_list)


# ----------------------------------------------------------------------------- model.py
class Net(nn.Module):
    """ Re-implementation of ``Show, Ask, Attend, and Answer: A Strong Baseline For Visual Question Answering'' """
    def __init__(self, embedding_tokens):
        super(Net, self).__init__()
        question_features = 64
        vision_features = output_features
        glimpses = 2
        self.text = TextProcessor(embedding_tokens=embedding_tokens, embedding_features=32,
                                  lstm_features=question_features, drop=0.5)
        self.attention = Attention(v_features=vision_features, q_features=question_features, mid_features=32,
                                   glimpses=2, drop=0.5)
        self.classifier = Classifier(in_features=glimpses * vision_features + question_features, mid_features=64,
                                     out_features=max_answers, drop=0.5)
        for m in self.modules():
            if isinstance(m, nn.Linear) or isinstance(m, nn.Conv2d):
                init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    m.bias.data.zero_()

    def forward(self, v, q, q_len):
        q = self.text(q, list(q_len.data))
        v = v / (v.norm(p=2, dim=1, keepdim=True).expand_as(v) + 1e-8)
        a = self.attention(v, q)
        v = apply_attention(v, a)
        combined = torch.cat([v, q], dim=1)
        answer = self.classifier(combined)
        return answer


class Classifier(nn.Sequential):
    def __init__(self, in_features, mid_features, out_features, drop=0.0):
        super(Classifier, self).__init__()
        self.add_module('drop1', nn.Dropout(drop))
        self.add_module('lin1', nn.Linear(in_features, mid_features))
        self.add_module('relu', nn.ReLU())
        self.add_module('drop2', nn.Dropout(drop))
        self.add_module('lin2', nn.Linear(mid_features, out_features))


class TextProcessor(nn.Module):
    def __init__(self, embedding_tokens, embedding_features, lstm_features, drop=0.0):
        super(TextProcessor, self).__init__()
        self.embedding = nn.Embedding(embedding_tokens, embedding_features, padding_idx=0)
        self.drop = nn.Dropout(drop)
        self.tanh = nn.Tanh()
        self.lstm = nn.LSTM(input_size=embedding_features, hidden_size=lstm_features, num_layers=1)
        self.features = lstm_features
        self._init_lstm(self.lstm.weight_ih_l0)
        self._init_lstm(self.lstm.weight_hh_l0)
        self.lstm.bias_ih_l0.data.zero_()
        self.lstm.bias_hh_l0.data.zero_()
        init.xavier_uniform_(self.embedding.weight)

    def _init_lstm(self, weight):
        for w in weight.chunk(4, 0):
            init.xavier_uniform_(w)

    def forward(self, q, q_len):
        embedded = self.embedding(q)
        tanhed = self.tanh(self.drop(embedded))
        packed = pack_padded_sequence(tanhed, q_len, batch_first=True)
        _, (_, c) = self.lstm(packed)
        return c.squeeze(0)


class Attention(nn.Module):
    def __init__(self, v_features, q_features, mid_features, glimpses, drop=0.0):
        super(Attention, self).__init__()
        self.v_conv = nn.Conv2d(v_features, mid_features, 1, bias=False)  # let self.lin take care of bias
        self.q_lin = nn.Linear(q_features, mid_features)
        self.x_conv = nn.Conv2d(mid_features, glimpses, 1)
        self.drop = nn.Dropout(drop)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, v, q):
        v = self.v_conv(self.drop(v))
        q = self.q_lin(self.drop(q))
        q = tile_2d_over_nd(q, v)
        x = self.relu(v + q)
        x = self.x_conv(self.drop(x))
        return x


def apply_attention(input, attention):
    """ Apply any number of attention maps over the input. """
    n, c = input.size()[:2]
    glimpses = attention.size(1)
    # flatten the spatial dims into the third dim, since we don't need to care about how they are arranged
    input = input.view(n, 1, c, -1)  # [n, 1, c, s]
    attention = attention.view(n, glimpses, -1)
    attention = F.softmax(attention, dim=-1).unsqueeze(2)  # [n, g, 1, s]
    weighted = attention * input  # [n, g, v, s]
    weighted_mean = weighted.sum(dim=-1)  # [n, g, v]
    return weighted_mean.view(n, -1)


def tile_2d_over_nd(feature_vector, feature_map):
    """ Repeat the same feature vector over all spatial positions of a given feature map. """
    n, c = feature_vector.size()
    spatial_size = feature_map.dim() - 2
    tiled = feature_vector.view(n, c, *([1] * spatial_size)).expand_as(feature_map)
    return tiled


# ----------------------------------------------------------------------------- train.py
def update_learning_rate(optimizer, iteration):
    lr = initial_lr * 0.5**(float(iteration) / lr_halflife)
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr


total_iterations = 0


def run(net, loader, optimizer, tracker, train=False, prefix='', epoch=0):
    """ Run an epoch over the given loader """
    if train:
        net.train()
        tracker_class, tracker_params = tracker.MovingMeanMonitor, {'momentum': 0.99}
    else:
        net.eval()
        tracker_class, tracker_params = tracker.MeanMonitor, {}
        answ, idxs, accs = [], [], []
    tq = loader
    loss_tracker = tracker.track('{}_loss'.format(prefix), tracker_class(**tracker_params))
    acc_tracker = tracker.track('{}_acc'.format(prefix), tracker_class(**tracker_params))
    log_softmax = nn.LogSoftmax().cuda() if cuda else nn.LogSoftmax()
    for v, q, a, idx, q_len in tq:
        var_params = {'volatile': not train, 'requires_grad': False}
        v = Variable(v.cuda(non_blocking=True) if cuda else v, **var_params)
        q = Variable(q.cuda(non_blocking=True) if cuda else q, **var_params)
        a = Variable(a.cuda(non_blocking=True) if cuda else a, **var_params)
        q_len = Variable(q_len.cuda(non_blocking=True) if cuda else q_len, **var_params)
        out = net(v, q, q_len)
        nll = -log_softmax(out)
        loss = (nll * a / 10).sum(dim=1).mean()
        acc = batch_accuracy(out.data, a.data).cpu()
        if train:
            global total_iterations
            update_learning_rate(optimizer, total_iterations)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total_iterations += 1
        else:
            # store information about evaluation of this minibatch
            _, answer = out.data.cpu().max(dim=1)
            answ.append(answer.view(-1))
            accs.append(acc.view(-1))
            idxs.append(idx.view(-1).clone())
        loss_tracker.append(loss.item())
        for a in acc:
            acc_tracker.append(a.item())
    fmt = '{:.4f}'.format
    print('{} E{:03d} loss={} acc={}'.format(prefix, epoch, fmt(loss_tracker.mean.value), fmt(acc_tracker.mean.value)))
    if not train:
        answ = list(torch.cat(answ, dim=0))
        accs = list(torch.cat(accs, dim=0))
        idxs = list(torch.cat(idxs, dim=0))
        return answ, accs, idxs


def main():
    name = 'synthetic-vqa'
    target_name = os.path.join(ROOT, 'logs', '{}.pth'.format(name))
    print('will save to {}'.format(target_name))
    cudnn.benchmark = True
    train_loader = get_loader(train=True)
    val_loader = get_loader(val=True)
    net = nn.DataParallel(Net(train_loader.dataset.num_tokens))
    if cuda:
        net = net.cuda()
    optimizer = optim.Adam([p for p in net.parameters() if p.requires_grad])
    tracker = Tracker()
    config_as_dict = {k: globals()[k] for k in ('task', 'dataset', 'output_size', 'output_features', 'epochs',
                                                'batch_size', 'initial_lr', 'lr_halflife', 'max_answers')}
    for i in range(epochs):
        _ = run(net, train_loader, optimizer, tracker, train=True, prefix='train', epoch=i)
        r = run(net, val_loader, optimizer, tracker, train=False, prefix='val', epoch=i)
        results = {
            'name': name, 'tracker': tracker.to_dict(), 'config': config_as_dict, 'weights': net.state_dict(),
            'eval': {'answers': r[0], 'accuracies': r[1], 'idx': r[2]},
            'vocab': train_loader.dataset.vocab,
        }
        torch.save(results, target_name)
    return target_name


def view_log(path):  # view-log.py
    results = torch.load(path)
    val_acc = torch.FloatTensor(results['tracker']['val_acc'])
    val_acc = val_acc.mean(dim=1).numpy()
    print('val accuracy per epoch:', ' '.join('%.4f' % x for x in val_acc))
    return val_acc


if __name__ == '__main__':
    try:
        make_vqa()
        preprocess_vocab()
        os.makedirs(os.path.join(ROOT, 'logs'))
        val_acc = view_log(main())
    finally:
        shutil.rmtree(ROOT, ignore_errors=True)
    print('done: final validation VQA accuracy %.4f' % val_acc[-1])
