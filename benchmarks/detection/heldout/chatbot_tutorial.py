"""Sequence-to-sequence chatbot: bidirectional GRU encoder, Luong-attention GRU decoder, greedy decoding.

Modeled on: PyTorch tutorials, "Chatbot Tutorial" (https://pytorch.org/tutorials/beginner/chatbot_tutorial.html,
beginner_source/chatbot_tutorial.py).
Kept: the device logic: ``USE_CUDA = torch.cuda.is_available()`` and ``device = torch.device("cuda" if USE_CUDA else
"cpu")`` at module level; batches built on the host (``inputVar``/``outputVar``: ``torch.LongTensor`` of the padded
indexes, ``torch.tensor`` lengths, ``torch.BoolTensor`` mask) and moved inside ``train`` with ``.to(device)``, the
lengths sent to ``"cpu"`` for ``pack_padded_sequence``; ``maskNLLLoss`` moving its loss ``.to(device)`` and
returning ``nTotal.item()``; the SOS decoder input ``torch.LongTensor([[SOS_token ...]]).to(device)``; teacher
forcing chosen by ``random.random()``, and without it the next input rebuilt from ``decoder_output.topk(1)`` as
``torch.LongTensor([[topi[i][0] ...]]).to(device)``; ``mask_loss.item() * nTotal`` accumulated per step; gradient
clipping; ``trainIters`` saving a checkpoint dict (``en``/``de``/``en_opt``/``de_opt`` state dicts, ``loss``,
``voc.__dict__``, ``embedding``) with ``torch.save`` every ``save_every`` iterations; models built on the host,
state dicts loaded when a checkpoint is given, then ``encoder.to(device)``/``decoder.to(device)``;
``encoder.train()``/``decoder.train()`` before training; the unconditional "If you have CUDA" loop sending the
optimizers' state tensors to ``.cuda()`` (a no-op on fresh optimizers); ``encoder.eval()``/``decoder.eval()`` before
``GreedySearchDecoder`` (its ``torch.ones(1, 1, device=device, dtype=torch.long) * SOS_token`` and
``torch.zeros([0], device=device)`` buffers, and ``encoder_hidden[:decoder.n_layers]`` read from the global
``decoder``); ``evaluate`` (no ``torch.no_grad()``, as in the tutorial) moving the input batch to ``device``, the
lengths to ``"cpu"``, and reading tokens with ``token.item()``; the checkpoint loaded back with
``torch.load(loadFilename)`` ("if loading on same machine the model was trained on"). Shrunk: synthetic
query/response pairs (the response is the query's words reversed) from a 16-word vocabulary instead of the Cornell
Movie-Dialogs corpus (no file parsing, no trimming of rare words), hidden size 32, batch size 16, 60 iterations with
a teacher forcing ratio of 0.5 and learning rate 0.002, a checkpoint every 30 iterations into a temporary folder,
the run section wrapped in ``build_models`` so it can run once from scratch and once from the saved checkpoint, and
a few fixed sentences decoded instead of the interactive ``evaluateInput`` loop.
"""

import itertools
import os
import random
import re
import tempfile
import unicodedata

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

random.seed(0)
torch.manual_seed(0)

USE_CUDA = torch.cuda.is_available()
device = torch.device("cuda" if USE_CUDA else "cpu")

corpus_name = "synthetic-dialogs"

# Default word tokens
PAD_token = 0  # Used for padding short sentences
SOS_token = 1  # Start-of-sentence token
EOS_token = 2  # End-of-sentence token

MAX_LENGTH = 6  # Maximum sentence length to consider


class Voc:
    def __init__(self, name):
        self.name = name
        self.trimmed = False
        self.word2index = {}
        self.word2count = {}
        self.index2word = {PAD_token: "PAD", SOS_token: "SOS", EOS_token: "EOS"}
        self.num_words = 3  # Count SOS, EOS, PAD

    def addSentence(self, sentence):
        for word in sentence.split(" "):
            self.addWord(word)

    def addWord(self, word):
        if word not in self.word2index:
            self.word2index[word] = self.num_words
            self.word2count[word] = 1
            self.index2word[self.num_words] = word
            self.num_words += 1
        else:
            self.word2count[word] += 1


def unicodeToAscii(s):
    return "".join(c for c in unicodedata.normalize("NFD", s) if unicodedata.category(c) != "Mn")


def normalizeString(s):
    s = unicodeToAscii(s.lower().strip())
    s = re.sub(r"([.!?])", r" \1", s)
    s = re.sub(r"[^a-zA-Z.!?]+", r" ", s)
    s = re.sub(r"\s+", r" ", s).strip()
    return s


def filterPair(p):
    # Input sequences need to preserve the last word for EOS token
    return len(p[0].split(" ")) < MAX_LENGTH and len(p[1].split(" ")) < MAX_LENGTH


def loadPrepareData(corpus_name):
    """Make the dialog pairs (in place of reading formatted_movie_lines.txt) and fill the vocabulary."""
    words = "hello where are you going home today why not now tell me about it sure thing".split()
    rng = random.Random(7)
    pairs = []
    for _ in range(300):
        query = [rng.choice(words) for _ in range(rng.randint(2, 4))]
        pairs.append([normalizeString(" ".join(query)), normalizeString(" ".join(reversed(query)) + " !")])
    voc = Voc(corpus_name)
    pairs = [pair for pair in pairs if filterPair(pair)]
    for pair in pairs:
        voc.addSentence(pair[0])
        voc.addSentence(pair[1])
    print("Counted words:", voc.num_words)
    return voc, pairs


voc, pairs = loadPrepareData(corpus_name)


def indexesFromSentence(voc, sentence):
    return [voc.word2index[word] for word in sentence.split(" ")] + [EOS_token]


def zeroPadding(l, fillvalue=PAD_token):  # noqa: E741 (the tutorial's name)
    return list(itertools.zip_longest(*l, fillvalue=fillvalue))


def binaryMatrix(l, value=PAD_token):  # noqa: E741
    m = []
    for i, seq in enumerate(l):
        m.append([])
        for token in seq:
            if token == PAD_token:
                m[i].append(0)
            else:
                m[i].append(1)
    return m


# Returns padded input sequence tensor and lengths
def inputVar(l, voc):  # noqa: E741
    indexes_batch = [indexesFromSentence(voc, sentence) for sentence in l]
    lengths = torch.tensor([len(indexes) for indexes in indexes_batch])
    padList = zeroPadding(indexes_batch)
    padVar = torch.LongTensor(padList)
    return padVar, lengths


# Returns padded target sequence tensor, padding mask, and max target length
def outputVar(l, voc):  # noqa: E741
    indexes_batch = [indexesFromSentence(voc, sentence) for sentence in l]
    max_target_len = max([len(indexes) for indexes in indexes_batch])
    padList = zeroPadding(indexes_batch)
    mask = binaryMatrix(padList)
    mask = torch.BoolTensor(mask)
    padVar = torch.LongTensor(padList)
    return padVar, mask, max_target_len


# Returns all items for a given batch of pairs
def batch2TrainData(voc, pair_batch):
    pair_batch.sort(key=lambda x: len(x[0].split(" ")), reverse=True)
    input_batch, output_batch = [], []
    for pair in pair_batch:
        input_batch.append(pair[0])
        output_batch.append(pair[1])
    inp, lengths = inputVar(input_batch, voc)
    output, mask, max_target_len = outputVar(output_batch, voc)
    return inp, lengths, output, mask, max_target_len


class EncoderRNN(nn.Module):
    def __init__(self, hidden_size, embedding, n_layers=1, dropout=0):
        super().__init__()
        self.n_layers = n_layers
        self.hidden_size = hidden_size
        self.embedding = embedding
        # input_size and hidden_size are both hidden_size: the input is a word embedding of that size
        self.gru = nn.GRU(
            hidden_size, hidden_size, n_layers, dropout=(0 if n_layers == 1 else dropout), bidirectional=True
        )

    def forward(self, input_seq, input_lengths, hidden=None):
        embedded = self.embedding(input_seq)
        packed = nn.utils.rnn.pack_padded_sequence(embedded, input_lengths)
        outputs, hidden = self.gru(packed, hidden)
        outputs, _ = nn.utils.rnn.pad_packed_sequence(outputs)
        # Sum the two directions
        outputs = outputs[:, :, : self.hidden_size] + outputs[:, :, self.hidden_size :]
        return outputs, hidden


# Luong attention layer
class Attn(nn.Module):
    def __init__(self, method, hidden_size):
        super().__init__()
        self.method = method
        if self.method not in ["dot", "general", "concat"]:
            raise ValueError(self.method, "is not an appropriate attention method.")
        self.hidden_size = hidden_size
        if self.method == "general":
            self.attn = nn.Linear(self.hidden_size, hidden_size)
        elif self.method == "concat":
            self.attn = nn.Linear(self.hidden_size * 2, hidden_size)
            self.v = nn.Parameter(torch.FloatTensor(hidden_size))

    def dot_score(self, hidden, encoder_output):
        return torch.sum(hidden * encoder_output, dim=2)

    def general_score(self, hidden, encoder_output):
        energy = self.attn(encoder_output)
        return torch.sum(hidden * energy, dim=2)

    def concat_score(self, hidden, encoder_output):
        energy = self.attn(torch.cat((hidden.expand(encoder_output.size(0), -1, -1), encoder_output), 2)).tanh()
        return torch.sum(self.v * energy, dim=2)

    def forward(self, hidden, encoder_outputs):
        if self.method == "general":
            attn_energies = self.general_score(hidden, encoder_outputs)
        elif self.method == "concat":
            attn_energies = self.concat_score(hidden, encoder_outputs)
        elif self.method == "dot":
            attn_energies = self.dot_score(hidden, encoder_outputs)
        # (max_length, batch) -> (batch, max_length)
        attn_energies = attn_energies.t()
        return F.softmax(attn_energies, dim=1).unsqueeze(1)


class LuongAttnDecoderRNN(nn.Module):
    def __init__(self, attn_model, embedding, hidden_size, output_size, n_layers=1, dropout=0.1):
        super().__init__()
        self.attn_model = attn_model
        self.hidden_size = hidden_size
        self.output_size = output_size
        self.n_layers = n_layers
        self.dropout = dropout

        self.embedding = embedding
        self.embedding_dropout = nn.Dropout(dropout)
        self.gru = nn.GRU(hidden_size, hidden_size, n_layers, dropout=(0 if n_layers == 1 else dropout))
        self.concat = nn.Linear(hidden_size * 2, hidden_size)
        self.out = nn.Linear(hidden_size, output_size)

        self.attn = Attn(attn_model, hidden_size)

    def forward(self, input_step, last_hidden, encoder_outputs):
        # one word at a time
        embedded = self.embedding(input_step)
        embedded = self.embedding_dropout(embedded)
        rnn_output, hidden = self.gru(embedded, last_hidden)
        attn_weights = self.attn(rnn_output, encoder_outputs)
        context = attn_weights.bmm(encoder_outputs.transpose(0, 1))
        rnn_output = rnn_output.squeeze(0)
        context = context.squeeze(1)
        concat_input = torch.cat((rnn_output, context), 1)
        concat_output = torch.tanh(self.concat(concat_input))
        output = self.out(concat_output)
        output = F.softmax(output, dim=1)
        return output, hidden


def maskNLLLoss(inp, target, mask):
    nTotal = mask.sum()
    crossEntropy = -torch.log(torch.gather(inp, 1, target.view(-1, 1)).squeeze(1))
    loss = crossEntropy.masked_select(mask).mean()
    loss = loss.to(device)
    return loss, nTotal.item()


def train(
    input_variable,
    lengths,
    target_variable,
    mask,
    max_target_len,
    encoder,
    decoder,
    embedding,
    encoder_optimizer,
    decoder_optimizer,
    batch_size,
    clip,
    max_length=MAX_LENGTH,
):
    # Zero gradients
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()

    # Set device options
    input_variable = input_variable.to(device)
    target_variable = target_variable.to(device)
    mask = mask.to(device)
    # Lengths for RNN packing should always be on the CPU
    lengths = lengths.to("cpu")

    loss = 0
    print_losses = []
    n_totals = 0

    encoder_outputs, encoder_hidden = encoder(input_variable, lengths)

    # Decoding starts with an SOS token for each sentence
    decoder_input = torch.LongTensor([[SOS_token for _ in range(batch_size)]])
    decoder_input = decoder_input.to(device)

    # The decoder starts from the encoder's final hidden state
    decoder_hidden = encoder_hidden[: decoder.n_layers]

    use_teacher_forcing = True if random.random() < teacher_forcing_ratio else False  # noqa: SIM210

    if use_teacher_forcing:
        for t in range(max_target_len):
            decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden, encoder_outputs)
            # Teacher forcing: next input is current target
            decoder_input = target_variable[t].view(1, -1)
            mask_loss, nTotal = maskNLLLoss(decoder_output, target_variable[t], mask[t])
            loss += mask_loss
            print_losses.append(mask_loss.item() * nTotal)
            n_totals += nTotal
    else:
        for t in range(max_target_len):
            decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden, encoder_outputs)
            # No teacher forcing: next input is the decoder's own current output
            _, topi = decoder_output.topk(1)
            decoder_input = torch.LongTensor([[topi[i][0] for i in range(batch_size)]])
            decoder_input = decoder_input.to(device)
            mask_loss, nTotal = maskNLLLoss(decoder_output, target_variable[t], mask[t])
            loss += mask_loss
            print_losses.append(mask_loss.item() * nTotal)
            n_totals += nTotal

    loss.backward()

    # Clip gradients: gradients are modified in place
    _ = nn.utils.clip_grad_norm_(encoder.parameters(), clip)
    _ = nn.utils.clip_grad_norm_(decoder.parameters(), clip)

    encoder_optimizer.step()
    decoder_optimizer.step()

    return sum(print_losses) / n_totals


def trainIters(
    model_name,
    voc,
    pairs,
    encoder,
    decoder,
    encoder_optimizer,
    decoder_optimizer,
    embedding,
    encoder_n_layers,
    decoder_n_layers,
    save_dir,
    n_iteration,
    batch_size,
    print_every,
    save_every,
    clip,
    corpus_name,
    loadFilename,
    checkpoint=None,
):
    # Load batches for each iteration
    training_batches = [
        batch2TrainData(voc, [random.choice(pairs) for _ in range(batch_size)]) for _ in range(n_iteration)
    ]

    print("Initializing ...")
    start_iteration = 1
    print_loss = 0
    if loadFilename:
        start_iteration = checkpoint["iteration"] + 1

    print("Training...")
    for iteration in range(start_iteration, n_iteration + 1):
        training_batch = training_batches[iteration - 1]
        input_variable, lengths, target_variable, mask, max_target_len = training_batch

        loss = train(
            input_variable,
            lengths,
            target_variable,
            mask,
            max_target_len,
            encoder,
            decoder,
            embedding,
            encoder_optimizer,
            decoder_optimizer,
            batch_size,
            clip,
        )
        print_loss += loss

        if iteration % print_every == 0:
            print_loss_avg = print_loss / print_every
            print(
                f"Iteration: {iteration}; Percent complete: {iteration / n_iteration * 100:.1f}%; "
                f"Average loss: {print_loss_avg:.4f}"
            )
            print_loss = 0

        if iteration % save_every == 0:
            directory = os.path.join(
                save_dir, model_name, corpus_name, f"{encoder_n_layers}-{decoder_n_layers}_{hidden_size}"
            )
            if not os.path.exists(directory):
                os.makedirs(directory)
            torch.save(
                {
                    "iteration": iteration,
                    "en": encoder.state_dict(),
                    "de": decoder.state_dict(),
                    "en_opt": encoder_optimizer.state_dict(),
                    "de_opt": decoder_optimizer.state_dict(),
                    "loss": loss,
                    "voc_dict": voc.__dict__,
                    "embedding": embedding.state_dict(),
                },
                os.path.join(directory, f"{iteration}_checkpoint.tar"),
            )


class GreedySearchDecoder(nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, input_seq, input_length, max_length):
        encoder_outputs, encoder_hidden = self.encoder(input_seq, input_length)
        decoder_hidden = encoder_hidden[: decoder.n_layers]
        decoder_input = torch.ones(1, 1, device=device, dtype=torch.long) * SOS_token
        all_tokens = torch.zeros([0], device=device, dtype=torch.long)
        all_scores = torch.zeros([0], device=device)
        for _ in range(max_length):
            decoder_output, decoder_hidden = self.decoder(decoder_input, decoder_hidden, encoder_outputs)
            # most likely word token and its softmax score
            decoder_scores, decoder_input = torch.max(decoder_output, dim=1)
            all_tokens = torch.cat((all_tokens, decoder_input), dim=0)
            all_scores = torch.cat((all_scores, decoder_scores), dim=0)
            # next input: the current token, with a batch dimension
            decoder_input = torch.unsqueeze(decoder_input, 0)
        return all_tokens, all_scores


def evaluate(encoder, decoder, searcher, voc, sentence, max_length=MAX_LENGTH):
    # words -> indexes, as a batch of one
    indexes_batch = [indexesFromSentence(voc, sentence)]
    lengths = torch.tensor([len(indexes) for indexes in indexes_batch])
    input_batch = torch.LongTensor(indexes_batch).transpose(0, 1)
    input_batch = input_batch.to(device)
    lengths = lengths.to("cpu")
    tokens, scores = searcher(input_batch, lengths, max_length)  # noqa: RUF059 (the tutorial's names)
    # indexes -> words
    decoded_words = [voc.index2word[token.item()] for token in tokens]
    return decoded_words


# Configure models
model_name = "cb_model"
attn_model = "dot"
# attn_model = 'general'
# attn_model = 'concat'
hidden_size = 32
encoder_n_layers = 2
decoder_n_layers = 2
dropout = 0.1
batch_size = 16


def build_models(loadFilename):
    """The tutorial's "Run Model" block: optionally read a checkpoint, build the models, move them to ``device``."""
    checkpoint = None
    if loadFilename:
        # If loading on same machine the model was trained on
        checkpoint = torch.load(loadFilename)
        # If loading a model trained on GPU to CPU
        # checkpoint = torch.load(loadFilename, map_location=torch.device('cpu'))
        encoder_sd = checkpoint["en"]
        decoder_sd = checkpoint["de"]
        embedding_sd = checkpoint["embedding"]
        voc.__dict__ = checkpoint["voc_dict"]

    print("Building encoder and decoder ...")
    embedding = nn.Embedding(voc.num_words, hidden_size)
    if loadFilename:
        embedding.load_state_dict(embedding_sd)
    encoder = EncoderRNN(hidden_size, embedding, encoder_n_layers, dropout)
    decoder = LuongAttnDecoderRNN(attn_model, embedding, hidden_size, voc.num_words, decoder_n_layers, dropout)
    if loadFilename:
        encoder.load_state_dict(encoder_sd)
        decoder.load_state_dict(decoder_sd)
    # Use appropriate device
    encoder = encoder.to(device)
    decoder = decoder.to(device)
    print("Models built and ready to go!")
    return embedding, encoder, decoder, checkpoint


save_dir_holder = tempfile.TemporaryDirectory()
save_dir = os.path.join(save_dir_holder.name, "data", "save")

loadFilename = None
embedding, encoder, decoder, checkpoint = build_models(loadFilename)

# Configure training/optimization
clip = 50.0
teacher_forcing_ratio = 0.5
learning_rate = 0.002
decoder_learning_ratio = 5.0
n_iteration = 60
print_every = 10
save_every = 30

# Ensure dropout layers are in train mode
encoder.train()
decoder.train()

print("Building optimizers ...")
encoder_optimizer = optim.Adam(encoder.parameters(), lr=learning_rate)
decoder_optimizer = optim.Adam(decoder.parameters(), lr=learning_rate * decoder_learning_ratio)

# If you have CUDA, configure CUDA to call
for state in encoder_optimizer.state.values():
    for k, v in state.items():
        if isinstance(v, torch.Tensor):
            state[k] = v.cuda()

for state in decoder_optimizer.state.values():
    for k, v in state.items():
        if isinstance(v, torch.Tensor):
            state[k] = v.cuda()

print("Starting Training!")
trainIters(
    model_name,
    voc,
    pairs,
    encoder,
    decoder,
    encoder_optimizer,
    decoder_optimizer,
    embedding,
    encoder_n_layers,
    decoder_n_layers,
    save_dir,
    n_iteration,
    batch_size,
    print_every,
    save_every,
    clip,
    corpus_name,
    loadFilename,
)

# Run Evaluation, from the last checkpoint
checkpoint_iter = n_iteration
loadFilename = os.path.join(
    save_dir,
    model_name,
    corpus_name,
    f"{encoder_n_layers}-{decoder_n_layers}_{hidden_size}",
    f"{checkpoint_iter}_checkpoint.tar",
)
embedding, encoder, decoder, checkpoint = build_models(loadFilename)
print(f"Loaded checkpoint of iteration {checkpoint['iteration']} (loss {checkpoint['loss']:.4f})")

# Set dropout layers to eval mode
encoder.eval()
decoder.eval()

searcher = GreedySearchDecoder(encoder, decoder)

for input_sentence in ["hello where are you", "tell me now", "sure thing today"]:
    input_sentence = normalizeString(input_sentence)
    output_words = evaluate(encoder, decoder, searcher, voc, input_sentence)
    output_words[:] = [x for x in output_words if not (x == "EOS" or x == "PAD")]
    print(f"> {input_sentence}")
    print("Bot:", " ".join(output_words))

print(f"done last_checkpoint_loss={checkpoint['loss']:.4f} words={voc.num_words}")
save_dir_holder.cleanup()
