# coding: UTF-8
"""Trains character-level news-headline classifiers the way Chinese-Text-Classification-Pytorch's run.py does, for
two of its models: TextRNN_Att (a 2-layer bidirectional LSTM with a learned attention vector pooling the hidden
states) and Transformer (sinusoidal position encodings added in forward, hand-written multi-head attention and
feed-forward blocks, a linear layer over the flattened sequence). Each run builds the vocabulary from the training
file, pads or cuts every headline to pad_size, batches it with the repository's own iterator, trains with Adam,
evaluates on the dev set every few batches (saving the state dict when the dev loss improves, stopping early when it
has not for require_improvement batches), then reloads the best checkpoint and prints the test accuracy, the
per-class report and the confusion matrix.

Modeled on: 649453932/Chinese-Text-Classification-Pytorch, run.py, train_eval.py, utils.py,
models/TextRNN_Att.py and models/Transformer.py at commit 6cb26819af7b646275aff8a4693676f2849e67f6
(https://github.com/649453932/Chinese-Text-Classification-Pytorch/blob/6cb26819af7b646275aff8a4693676f2849e67f6/train_eval.py).

Kept: each model's `Config` setting `self.device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')`;
`build_iterator(dataset, config)` handing `config.device` to `DatasetIterater(batches, batch_size, device)`, whose
`_to_tensor` builds `torch.LongTensor` ids, labels and lengths from Python lists and moves each with
`.to(self.device)`, including its residue-batch logic; `model = x.Model(config).to(config.device)` then
`init_network(model)` (xavier, skipping the embedding) for all but the Transformer; the Transformer's
`Positional_Encoding(config.embed, config.pad_size, config.dropout, config.device)` keeping a plain CPU tensor `pe`
and adding `nn.Parameter(self.pe, requires_grad=False).to(self.device)` in every forward; `torch.cuda.manual_seed_all`
and `cudnn.deterministic`; in `train`, `model.train()`, Adam, `model.zero_grad()`, the periodic evaluation with
`labels.data.cpu()` and `torch.max(outputs.data, 1)[1].cpu()` for sklearn's accuracy, `torch.save(model.state_dict(),
config.save_path)` on a better dev loss, `model.train()` after evaluating, the early stop, then `test`;
`test` doing `model.load_state_dict(torch.load(config.save_path))` and `model.eval()`; `evaluate` under
`torch.no_grad()` summing the loss tensors (`loss_total += loss`, so the dev loss is a device tensor that is compared
with a float and formatted), `.data.cpu().numpy()` for labels and predictions, sklearn's report and confusion matrix;
run.py's module-level parser and `args`, the model module chosen by name, the seeds.
Changed to run here: THUCNews is replaced by synthetic headlines (each of 4 classes draws most characters from its
own set of Chinese characters) written to THUCNews/data in a temporary directory; the models' files are sections of
this file, and `import_module('models.' + model_name)` is a lookup in a dict of namespaces; run.py's module-level
body runs once per argument list (TextRNN_Att, then Transformer), both with `--embedding random` (the pretrained
Sogou vectors are a download); tensorboardX's SummaryWriter is a stand-in that keeps the scalars.
Shrunk: 320 train, 64 dev and 64 test headlines; pad_size 16 (the author's 32), batch 32 (128), embed and
dim_model 32 (300), hidden_size 32 (128), hidden_size2 16 (64), Transformer hidden 64 (1024) with 4 heads (5);
2 and 4 epochs (10 and 20), evaluating every 5 batches (100) with require_improvement 20 (1000 and 2000).
"""
import argparse
import copy
import os
import pickle as pkl
import random
import tempfile
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn import metrics
from tqdm import tqdm

class SummaryWriter(object):
    """Stand-in for tensorboardX.SummaryWriter."""

    def __init__(self, log_dir):
        os.makedirs(log_dir, exist_ok=True)
        self.scalars = []

    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, float(value), step))

    def close(self):
        pass

# ----------------------------------------------------------------------------- utils.py

MAX_VOCAB_SIZE = 10000  # 词表长度限制
UNK, PAD = '<UNK>', '<PAD>'  # 未知字，padding符号

def build_vocab(file_path, tokenizer, max_size, min_freq):
    vocab_dic = {}
    with open(file_path, 'r', encoding='UTF-8') as f:
        for line in tqdm(f):
            lin = line.strip()
            if not lin:
                continue
            content = lin.split('\t')[0]
            for word in tokenizer(content):
                vocab_dic[word] = vocab_dic.get(word, 0) + 1
        vocab_list = sorted([_ for _ in vocab_dic.items() if _[1] >= min_freq], key=lambda x: x[1],
                            reverse=True)[:max_size]
        vocab_dic = {word_count[0]: idx for idx, word_count in enumerate(vocab_list)}
        vocab_dic.update({UNK: len(vocab_dic), PAD: len(vocab_dic) + 1})
    return vocab_dic

def build_dataset(config, ues_word):
    if ues_word:
        tokenizer = lambda x: x.split(' ')  # 以空格隔开，word-level
    else:
        tokenizer = lambda x: [y for y in x]  # char-level
    if os.path.exists(config.vocab_path):
        vocab = pkl.load(open(config.vocab_path, 'rb'))
    else:
        vocab = build_vocab(config.train_path, tokenizer=tokenizer, max_size=MAX_VOCAB_SIZE, min_freq=1)
        pkl.dump(vocab, open(config.vocab_path, 'wb'))
    print(f"Vocab size: {len(vocab)}")

    def load_dataset(path, pad_size=32):
        contents = []
        with open(path, 'r', encoding='UTF-8') as f:
            for line in tqdm(f):
                lin = line.strip()
                if not lin:
                    continue
                content, label = lin.split('\t')
                words_line = []
                token = tokenizer(content)
                seq_len = len(token)
                if pad_size:
                    if len(token) < pad_size:
                        token.extend([PAD] * (pad_size - len(token)))
                    else:
                        token = token[:pad_size]
                        seq_len = pad_size
                # word to id
                for word in token:
                    words_line.append(vocab.get(word, vocab.get(UNK)))
                contents.append((words_line, int(label), seq_len))
        return contents  # [([...], 0), ([...], 1), ...]
    train = load_dataset(config.train_path, config.pad_size)
    dev = load_dataset(config.dev_path, config.pad_size)
    test = load_dataset(config.test_path, config.pad_size)
    return vocab, train, dev, test

class DatasetIterater(object):
    def __init__(self, batches, batch_size, device):
        self.batch_size = batch_size
        self.batches = batches
        self.n_batches = len(batches) // batch_size
        self.residue = False  # 记录batch数量是否为整数
        if len(batches) % self.n_batches != 0:
            self.residue = True
        self.index = 0
        self.device = device

    def _to_tensor(self, datas):
        x = torch.LongTensor([_[0] for _ in datas]).to(self.device)
        y = torch.LongTensor([_[1] for _ in datas]).to(self.device)

        # pad前的长度(超过pad_size的设为pad_size)
        seq_len = torch.LongTensor([_[2] for _ in datas]).to(self.device)
        return (x, seq_len), y

    def __next__(self):
        if self.residue and self.index == self.n_batches:
            batches = self.batches[self.index * self.batch_size: len(self.batches)]
            self.index += 1
            batches = self._to_tensor(batches)
            return batches
        elif self.index >= self.n_batches:
            self.index = 0
            raise StopIteration
        else:
            batches = self.batches[self.index * self.batch_size: (self.index + 1) * self.batch_size]
            self.index += 1
            batches = self._to_tensor(batches)
            return batches

    def __iter__(self):
        return self

    def __len__(self):
        if self.residue:
            return self.n_batches + 1
        else:
            return self.n_batches

def build_iterator(dataset, config):
    iter = DatasetIterater(dataset, config.batch_size, config.device)
    return iter

# ----------------------------------------------------------------------------- models/TextRNN_Att.py

class TextRNN_Att_Config(object):
    """配置参数"""

    def __init__(self, dataset, embedding):
        self.model_name = 'TextRNN_Att'
        self.train_path = dataset + '/data/train.txt'
        self.dev_path = dataset + '/data/dev.txt'
        self.test_path = dataset + '/data/test.txt'
        self.class_list = [x.strip() for x in open(dataset + '/data/class.txt', encoding='utf-8').readlines()]
        self.vocab_path = dataset + '/data/vocab.pkl'
        self.save_path = dataset + '/saved_dict/' + self.model_name + '.ckpt'
        self.log_path = dataset + '/log/' + self.model_name
        self.embedding_pretrained = torch.tensor(
            np.load(dataset + '/data/' + embedding)["embeddings"].astype('float32')) \
            if embedding != 'random' else None
        self.device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')   # 设备

        self.dropout = 0.5
        self.require_improvement = 20
        self.num_classes = len(self.class_list)
        self.n_vocab = 0
        self.num_epochs = 2
        self.batch_size = 32
        self.pad_size = 16
        self.learning_rate = 1e-3
        self.embed = self.embedding_pretrained.size(1) if self.embedding_pretrained is not None else 32
        self.hidden_size = 32
        self.num_layers = 2
        self.hidden_size2 = 16

class TextRNN_Att_Model(nn.Module):
    def __init__(self, config):
        super(TextRNN_Att_Model, self).__init__()
        if config.embedding_pretrained is not None:
            self.embedding = nn.Embedding.from_pretrained(config.embedding_pretrained, freeze=False)
        else:
            self.embedding = nn.Embedding(config.n_vocab, config.embed, padding_idx=config.n_vocab - 1)
        self.lstm = nn.LSTM(config.embed, config.hidden_size, config.num_layers,
                            bidirectional=True, batch_first=True, dropout=config.dropout)
        self.tanh1 = nn.Tanh()
        self.w = nn.Parameter(torch.zeros(config.hidden_size * 2))
        self.tanh2 = nn.Tanh()
        self.fc1 = nn.Linear(config.hidden_size * 2, config.hidden_size2)
        self.fc = nn.Linear(config.hidden_size2, config.num_classes)

    def forward(self, x):
        x, _ = x
        emb = self.embedding(x)  # [batch_size, seq_len, embeding]
        H, _ = self.lstm(emb)  # [batch_size, seq_len, hidden_size * num_direction]

        M = self.tanh1(H)
        alpha = F.softmax(torch.matmul(M, self.w), dim=1).unsqueeze(-1)  # [batch_size, seq_len, 1]
        out = H * alpha
        out = torch.sum(out, 1)
        out = F.relu(out)
        out = self.fc1(out)
        out = self.fc(out)
        return out

# ----------------------------------------------------------------------------- models/Transformer.py

class Transformer_Config(TextRNN_Att_Config):
    """配置参数 (the author's file repeats the paths and the device line)"""

    def __init__(self, dataset, embedding):
        super(Transformer_Config, self).__init__(dataset, embedding)
        self.model_name = 'Transformer'
        self.save_path = dataset + '/saved_dict/' + self.model_name + '.ckpt'
        self.log_path = dataset + '/log/' + self.model_name
        self.device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')   # 设备
        self.require_improvement = 20
        self.num_epochs = 4
        self.learning_rate = 5e-4
        self.dim_model = 32
        self.hidden = 64
        self.last_hidden = 32
        self.num_head = 4
        self.num_encoder = 2

class Transformer_Model(nn.Module):
    def __init__(self, config):
        super(Transformer_Model, self).__init__()
        if config.embedding_pretrained is not None:
            self.embedding = nn.Embedding.from_pretrained(config.embedding_pretrained, freeze=False)
        else:
            self.embedding = nn.Embedding(config.n_vocab, config.embed, padding_idx=config.n_vocab - 1)

        self.postion_embedding = Positional_Encoding(config.embed, config.pad_size, config.dropout, config.device)
        self.encoder = Encoder(config.dim_model, config.num_head, config.hidden, config.dropout)
        self.encoders = nn.ModuleList([copy.deepcopy(self.encoder) for _ in range(config.num_encoder)])

        self.fc1 = nn.Linear(config.pad_size * config.dim_model, config.num_classes)

    def forward(self, x):
        out = self.embedding(x[0])
        out = self.postion_embedding(out)
        for encoder in self.encoders:
            out = encoder(out)
        out = out.view(out.size(0), -1)
        out = self.fc1(out)
        return out

class Encoder(nn.Module):
    def __init__(self, dim_model, num_head, hidden, dropout):
        super(Encoder, self).__init__()
        self.attention = Multi_Head_Attention(dim_model, num_head, dropout)
        self.feed_forward = Position_wise_Feed_Forward(dim_model, hidden, dropout)

    def forward(self, x):
        out = self.attention(x)
        out = self.feed_forward(out)
        return out

class Positional_Encoding(nn.Module):
    def __init__(self, embed, pad_size, dropout, device):
        super(Positional_Encoding, self).__init__()
        self.device = device
        self.pe = torch.tensor([[pos / (10000.0 ** (i // 2 * 2.0 / embed)) for i in range(embed)]
                                for pos in range(pad_size)])
        self.pe[:, 0::2] = np.sin(self.pe[:, 0::2])
        self.pe[:, 1::2] = np.cos(self.pe[:, 1::2])
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        out = x + nn.Parameter(self.pe, requires_grad=False).to(self.device)
        out = self.dropout(out)
        return out

class Scaled_Dot_Product_Attention(nn.Module):
    '''Scaled Dot-Product Attention '''

    def __init__(self):
        super(Scaled_Dot_Product_Attention, self).__init__()

    def forward(self, Q, K, V, scale=None):
        attention = torch.matmul(Q, K.permute(0, 2, 1))
        if scale:
            attention = attention * scale
        attention = F.softmax(attention, dim=-1)
        context = torch.matmul(attention, V)
        return context

class Multi_Head_Attention(nn.Module):
    def __init__(self, dim_model, num_head, dropout=0.0):
        super(Multi_Head_Attention, self).__init__()
        self.num_head = num_head
        assert dim_model % num_head == 0
        self.dim_head = dim_model // self.num_head
        self.fc_Q = nn.Linear(dim_model, num_head * self.dim_head)
        self.fc_K = nn.Linear(dim_model, num_head * self.dim_head)
        self.fc_V = nn.Linear(dim_model, num_head * self.dim_head)
        self.attention = Scaled_Dot_Product_Attention()
        self.fc = nn.Linear(num_head * self.dim_head, dim_model)
        self.dropout = nn.Dropout(dropout)
        self.layer_norm = nn.LayerNorm(dim_model)

    def forward(self, x):
        batch_size = x.size(0)
        Q = self.fc_Q(x)
        K = self.fc_K(x)
        V = self.fc_V(x)
        Q = Q.view(batch_size * self.num_head, -1, self.dim_head)
        K = K.view(batch_size * self.num_head, -1, self.dim_head)
        V = V.view(batch_size * self.num_head, -1, self.dim_head)
        scale = K.size(-1) ** -0.5  # 缩放因子
        context = self.attention(Q, K, V, scale)

        context = context.view(batch_size, -1, self.dim_head * self.num_head)
        out = self.fc(context)
        out = self.dropout(out)
        out = out + x  # 残差连接
        out = self.layer_norm(out)
        return out

class Position_wise_Feed_Forward(nn.Module):
    def __init__(self, dim_model, hidden, dropout=0.0):
        super(Position_wise_Feed_Forward, self).__init__()
        self.fc1 = nn.Linear(dim_model, hidden)
        self.fc2 = nn.Linear(hidden, dim_model)
        self.dropout = nn.Dropout(dropout)
        self.layer_norm = nn.LayerNorm(dim_model)

    def forward(self, x):
        out = self.fc1(x)
        out = F.relu(out)
        out = self.fc2(out)
        out = self.dropout(out)
        out = out + x  # 残差连接
        out = self.layer_norm(out)
        return out

# ----------------------------------------------------------------------------- train_eval.py

def init_network(model, method='xavier', exclude='embedding', seed=123):
    for name, w in model.named_parameters():
        if exclude not in name:
            if 'weight' in name:
                if method == 'xavier':
                    nn.init.xavier_normal_(w)
                elif method == 'kaiming':
                    nn.init.kaiming_normal_(w)
                else:
                    nn.init.normal_(w)
            elif 'bias' in name:
                nn.init.constant_(w, 0)
            else:
                pass

def train(config, model, train_iter, dev_iter, test_iter):
    start_time = time.time()
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)

    total_batch = 0  # 记录进行到多少batch
    dev_best_loss = float('inf')
    last_improve = 0  # 记录上次验证集loss下降的batch数
    flag = False  # 记录是否很久没有效果提升
    writer = SummaryWriter(log_dir=config.log_path + '/' + time.strftime('%m-%d_%H.%M', time.localtime()))
    for epoch in range(config.num_epochs):
        print('Epoch [{}/{}]'.format(epoch + 1, config.num_epochs))
        for i, (trains, labels) in enumerate(train_iter):
            outputs = model(trains)
            model.zero_grad()
            loss = F.cross_entropy(outputs, labels)
            loss.backward()
            optimizer.step()
            if total_batch % 5 == 0:  # the author's 100
                # 每多少轮输出在训练集和验证集上的效果
                true = labels.data.cpu()
                predic = torch.max(outputs.data, 1)[1].cpu()
                train_acc = metrics.accuracy_score(true, predic)
                dev_acc, dev_loss = evaluate(config, model, dev_iter)
                if dev_loss < dev_best_loss:
                    dev_best_loss = dev_loss
                    torch.save(model.state_dict(), config.save_path)
                    improve = '*'
                    last_improve = total_batch
                else:
                    improve = ''
                msg = 'Iter: {0:>6},  Train Loss: {1:>5.2},  Train Acc: {2:>6.2%},  Val Loss: {3:>5.2},  Val Acc: {4:>6.2%} {5}'
                print(msg.format(total_batch, loss.item(), train_acc, dev_loss, dev_acc, improve))
                writer.add_scalar("loss/train", loss.item(), total_batch)
                writer.add_scalar("loss/dev", dev_loss, total_batch)
                writer.add_scalar("acc/train", train_acc, total_batch)
                writer.add_scalar("acc/dev", dev_acc, total_batch)
                model.train()
            total_batch += 1
            if total_batch - last_improve > config.require_improvement:
                # 验证集loss超过1000batch没下降，结束训练
                print("No optimization for a long time, auto-stopping...")
                flag = True
                break
        if flag:
            break
    writer.close()
    test(config, model, test_iter)

def test(config, model, test_iter):
    # test
    model.load_state_dict(torch.load(config.save_path))
    model.eval()
    start_time = time.time()
    test_acc, test_loss, test_report, test_confusion = evaluate(config, model, test_iter, test=True)
    msg = 'Test Loss: {0:>5.2},  Test Acc: {1:>6.2%}'
    print(msg.format(test_loss, test_acc))
    print("Precision, Recall and F1-Score...")
    print(test_report)
    print("Confusion Matrix...")
    print(test_confusion)

def evaluate(config, model, data_iter, test=False):
    model.eval()
    loss_total = 0
    predict_all = np.array([], dtype=int)
    labels_all = np.array([], dtype=int)
    with torch.no_grad():
        for texts, labels in data_iter:
            outputs = model(texts)
            loss = F.cross_entropy(outputs, labels)
            loss_total += loss
            labels = labels.data.cpu().numpy()
            predic = torch.max(outputs.data, 1)[1].cpu().numpy()
            labels_all = np.append(labels_all, labels)
            predict_all = np.append(predict_all, predic)

    acc = metrics.accuracy_score(labels_all, predict_all)
    if test:
        report = metrics.classification_report(labels_all, predict_all, target_names=config.class_list, digits=4)
        confusion = metrics.confusion_matrix(labels_all, predict_all)
        return acc, loss_total / len(data_iter), report, confusion
    return acc, loss_total / len(data_iter)

# ----------------------------------------------------------------------------- synthetic THUCNews

CLASS_CHARS = {
    'finance': '股票基金银行市场投资利率经济债券',
    'sports': '足球篮球比赛冠军球队联赛进球教练',
    'education': '学校考试学生教育大学老师课程招生',
    'technology': '手机芯片科技网络电脑软件数据智能',
}
COMMON_CHARS = '的了在是有和人这中大为上个国我以要他时来用们'

def write_synthetic_thucnews(root, seed=0):
    rng = random.Random(seed)
    os.makedirs(root + '/data', exist_ok=True)
    os.makedirs(root + '/saved_dict', exist_ok=True)
    names = list(CLASS_CHARS)
    with open(root + '/data/class.txt', 'w', encoding='utf-8') as f:
        f.write('\n'.join(names) + '\n')
    for split, n in (('train', 320), ('dev', 64), ('test', 64)):
        with open(root + '/data/' + split + '.txt', 'w', encoding='utf-8') as f:
            for k in range(n):
                label = k % len(names)
                length = rng.randint(8, 22)
                chars = [rng.choice(CLASS_CHARS[names[label]]) if rng.random() < 0.5 else rng.choice(COMMON_CHARS)
                         for _ in range(length)]
                f.write(''.join(chars) + '\t' + str(label) + '\n')

# ----------------------------------------------------------------------------- run.py

MODELS = {
    'TextRNN_Att': SimpleNamespace(Config=TextRNN_Att_Config, Model=TextRNN_Att_Model),
    'Transformer': SimpleNamespace(Config=Transformer_Config, Model=Transformer_Model),
}

parser = argparse.ArgumentParser(description='Chinese Text Classification')
parser.add_argument('--model', type=str, required=True,
                    help='choose a model: TextCNN, TextRNN, FastText, TextRCNN, TextRNN_Att, DPCNN, Transformer')
parser.add_argument('--embedding', default='pre_trained', type=str, help='random or pre_trained')
parser.add_argument('--word', default=False, type=bool, help='True for word, False for char')

workdir = tempfile.TemporaryDirectory()
home = os.getcwd()
os.chdir(workdir.name)
write_synthetic_thucnews('THUCNews')

for argv in (['--model', 'TextRNN_Att', '--embedding', 'random'], ['--model', 'Transformer', '--embedding', 'random']):
    args = parser.parse_args(argv)

    dataset = 'THUCNews'  # 数据集

    embedding = 'embedding_SougouNews.npz'
    if args.embedding == 'random':
        embedding = 'random'
    model_name = args.model

    x = MODELS[model_name]  # the author's import_module('models.' + model_name)
    config = x.Config(dataset, embedding)
    np.random.seed(1)
    torch.manual_seed(1)
    torch.cuda.manual_seed_all(1)
    torch.backends.cudnn.deterministic = True  # 保证每次结果一样

    start_time = time.time()
    print("Loading data...")
    vocab, train_data, dev_data, test_data = build_dataset(config, args.word)
    train_iter = build_iterator(train_data, config)
    dev_iter = build_iterator(dev_data, config)
    test_iter = build_iterator(test_data, config)

    # train
    config.n_vocab = len(vocab)
    model = x.Model(config).to(config.device)
    if model_name != 'Transformer':
        init_network(model)
    print(model_name, sum(p.numel() for p in model.parameters()), 'parameters')
    train(config, model, train_iter, dev_iter, test_iter)

torch.backends.cudnn.deterministic = False
os.chdir(home)
workdir.cleanup()
print("done")
