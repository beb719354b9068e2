"""Train a GRU encoder / attention decoder on a toy word-for-word translation task, then translate a few sentences.

Modeled on: the PyTorch tutorial "NLP From Scratch: Translation with a Sequence to Sequence Network and Attention",
https://pytorch.org/tutorials/intermediate/seq2seq_translation_tutorial.html
Kept: the device logic (a module-level `device`, the training set built as LongTensors moved .to(device) before the
DataLoader, encoder and decoder .to(device), the decoder's SOS input made with torch.empty(..., device=device),
sentences turned into tensors with torch.tensor(indexes, dtype=torch.long, device=device), evaluate() under
torch.no_grad() reading ids back with .item()). Shrunk: a made-up pair of six-word languages instead of the
French-English file, hidden size 32, sentences of at most 5 words, a few epochs.
"""

import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

SOS_token = 0
EOS_token = 1
MAX_LENGTH = 6  # up to 5 words and the EOS token


class Lang:
    """A vocabulary: word <-> index, with SOS and EOS reserved."""

    def __init__(self, name):
        self.name = name
        self.word2index = {}
        self.word2count = {}
        self.index2word = {0: "SOS", 1: "EOS"}
        self.n_words = 2  # Count SOS and EOS

    def addSentence(self, sentence):
        for word in sentence.split(" "):
            self.addWord(word)

    def addWord(self, word):
        if word not in self.word2index:
            self.word2index[word] = self.n_words
            self.word2count[word] = 1
            self.index2word[self.n_words] = word
            self.n_words += 1
        else:
            self.word2count[word] += 1


def make_pairs(n, rng):
    """Sentence pairs in two made-up languages: each source word has one fixed translation, order kept."""
    lexicon = {"je": "i", "tu": "you", "vois": "see", "aime": "like", "le": "the", "chat": "cat"}
    src_words = list(lexicon)
    pairs = []
    for _ in range(n):
        words = [rng.choice(src_words) for _ in range(rng.randint(2, MAX_LENGTH - 1))]
        pairs.append([" ".join(words), " ".join(lexicon[w] for w in words)])
    return pairs


def prepareData(n, rng):
    """Make `n` sentence pairs and the two vocabularies they use."""
    input_lang, output_lang = Lang("src"), Lang("tgt")
    pairs = make_pairs(n, rng)
    for src, tgt in pairs:
        input_lang.addSentence(src)
        output_lang.addSentence(tgt)
    print("Counted words:", input_lang.name, input_lang.n_words, output_lang.name, output_lang.n_words)
    return input_lang, output_lang, pairs


class EncoderRNN(nn.Module):
    """Embedding, dropout and a batch-first GRU over the source sentence."""

    def __init__(self, input_size, hidden_size, dropout_p=0.1):
        super().__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, input):
        embedded = self.dropout(self.embedding(input))
        output, hidden = self.gru(embedded)
        return output, hidden


class BahdanauAttention(nn.Module):
    """Additive attention: score = Va(tanh(Wa(query) + Ua(keys)))."""

    def __init__(self, hidden_size):
        super().__init__()
        self.Wa = nn.Linear(hidden_size, hidden_size)
        self.Ua = nn.Linear(hidden_size, hidden_size)
        self.Va = nn.Linear(hidden_size, 1)

    def forward(self, query, keys):
        scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
        scores = scores.squeeze(2).unsqueeze(1)
        weights = F.softmax(scores, dim=-1)
        context = torch.bmm(weights, keys)
        return context, weights


class AttnDecoderRNN(nn.Module):
    """A GRU decoder fed its previous word and the attention context over the encoder outputs."""

    def __init__(self, hidden_size, output_size, dropout_p=0.1):
        super().__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.attention = BahdanauAttention(hidden_size)
        self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, encoder_outputs, encoder_hidden, target_tensor=None):
        batch_size = encoder_outputs.size(0)
        decoder_input = torch.empty(batch_size, 1, dtype=torch.long, device=device).fill_(SOS_token)
        decoder_hidden = encoder_hidden
        decoder_outputs = []
        attentions = []

        for i in range(MAX_LENGTH):
            decoder_output, decoder_hidden, attn_weights = self.forward_step(
                decoder_input, decoder_hidden, encoder_outputs
            )
            decoder_outputs.append(decoder_output)
            attentions.append(attn_weights)

            if target_tensor is not None:
                # Teacher forcing: feed the target as the next input
                decoder_input = target_tensor[:, i].unsqueeze(1)
            else:
                # Without teacher forcing: use its own predictions as the next input
                _, topi = decoder_output.topk(1)
                decoder_input = topi.squeeze(-1).detach()  # detach from history as input

        decoder_outputs = torch.cat(decoder_outputs, dim=1)
        decoder_outputs = F.log_softmax(decoder_outputs, dim=-1)
        attentions = torch.cat(attentions, dim=1)
        return decoder_outputs, decoder_hidden, attentions

    def forward_step(self, input, hidden, encoder_outputs):
        embedded = self.dropout(self.embedding(input))
        query = hidden.permute(1, 0, 2)
        context, attn_weights = self.attention(query, encoder_outputs)
        input_gru = torch.cat((embedded, context), dim=2)
        output, hidden = self.gru(input_gru, hidden)
        output = self.out(output)
        return output, hidden, attn_weights


def indexesFromSentence(lang, sentence):
    """The word indexes of a sentence, without EOS."""
    return [lang.word2index[word] for word in sentence.split(" ")]


def tensorFromSentence(lang, sentence):
    """A 1 x length LongTensor of the sentence's indexes and EOS, made on the device."""
    indexes = indexesFromSentence(lang, sentence)
    indexes.append(EOS_token)
    return torch.tensor(indexes, dtype=torch.long, device=device).view(1, -1)


def get_dataloader(batch_size, rng):
    """The vocabularies, the pairs, and a loader over EOS-terminated, zero-padded index rows kept on the device."""
    input_lang, output_lang, pairs = prepareData(32, rng)

    n = len(pairs)
    input_ids = np.zeros((n, MAX_LENGTH), dtype=np.int32)
    target_ids = np.zeros((n, MAX_LENGTH), dtype=np.int32)

    for idx, (inp, tgt) in enumerate(pairs):
        inp_ids = indexesFromSentence(input_lang, inp)
        tgt_ids = indexesFromSentence(output_lang, tgt)
        inp_ids.append(EOS_token)
        tgt_ids.append(EOS_token)
        input_ids[idx, : len(inp_ids)] = inp_ids
        target_ids[idx, : len(tgt_ids)] = tgt_ids

    train_data = TensorDataset(torch.LongTensor(input_ids).to(device), torch.LongTensor(target_ids).to(device))
    train_sampler = RandomSampler(train_data)
    train_dataloader = DataLoader(train_data, sampler=train_sampler, batch_size=batch_size)
    return input_lang, output_lang, pairs, train_dataloader


def train_epoch(dataloader, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion):
    """One pass over the training pairs with teacher forcing; returns the mean loss."""
    total_loss = 0
    for data in dataloader:
        input_tensor, target_tensor = data

        encoder_optimizer.zero_grad()
        decoder_optimizer.zero_grad()

        encoder_outputs, encoder_hidden = encoder(input_tensor)
        decoder_outputs, _, _ = decoder(encoder_outputs, encoder_hidden, target_tensor)

        loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)), target_tensor.view(-1))
        loss.backward()

        encoder_optimizer.step()
        decoder_optimizer.step()

        total_loss += loss.item()
    return total_loss / len(dataloader)


def train(train_dataloader, encoder, decoder, n_epochs, learning_rate=0.01):
    """Train encoder and decoder with Adam and NLLLoss; returns the last epoch's mean loss."""
    encoder_optimizer = optim.Adam(encoder.parameters(), lr=learning_rate)
    decoder_optimizer = optim.Adam(decoder.parameters(), lr=learning_rate)
    criterion = nn.NLLLoss()

    for epoch in range(1, n_epochs + 1):
        loss = train_epoch(train_dataloader, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion)
        print(f"epoch {epoch}: loss {loss:.4f}")
    return loss


def evaluate(encoder, decoder, sentence, input_lang, output_lang):
    """Greedy-decode one sentence; returns the words (ending in <EOS> when produced) and the attention weights."""
    with torch.no_grad():
        input_tensor = tensorFromSentence(input_lang, sentence)

        encoder_outputs, encoder_hidden = encoder(input_tensor)
        decoder_outputs, _, decoder_attn = decoder(encoder_outputs, encoder_hidden)

        _, topi = decoder_outputs.topk(1)
        decoded_ids = topi.squeeze()

        decoded_words = []
        for idx in decoded_ids:
            if idx.item() == EOS_token:
                decoded_words.append("<EOS>")
                break
            decoded_words.append(output_lang.index2word[idx.item()])
    return decoded_words, decoder_attn


def evaluateRandomly(encoder, decoder, pairs, input_lang, output_lang, rng, n=8):
    """Translate `n` random training sentences, print them, and return the fraction translated exactly."""
    correct = 0
    for _ in range(n):
        pair = rng.choice(pairs)
        output_words, _ = evaluate(encoder, decoder, pair[0], input_lang, output_lang)
        output_sentence = " ".join(output_words)
        print(">", pair[0])
        print("=", pair[1])
        print("<", output_sentence)
        correct += output_sentence == pair[1] + " <EOS>"
    return correct / n


torch.manual_seed(0)
rng = random.Random(0)
hidden_size = 32
batch_size = 16

input_lang, output_lang, pairs, train_dataloader = get_dataloader(batch_size, rng)

encoder = EncoderRNN(input_lang.n_words, hidden_size).to(device)
decoder = AttnDecoderRNN(hidden_size, output_lang.n_words).to(device)

final_loss = train(train_dataloader, encoder, decoder, n_epochs=2)

encoder.eval()
decoder.eval()
exact = evaluateRandomly(encoder, decoder, pairs, input_lang, output_lang, rng)
print(f"done loss={final_loss:.4f} exact={exact:.2f}")
