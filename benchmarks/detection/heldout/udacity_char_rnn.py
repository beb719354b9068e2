"""Trains Udacity's character-level LSTM (`CharRNN`) on a small text and samples from it, following the solution
notebook of the Deep Learning Nanodegree's char-rnn lesson: the text is encoded as integers, mini-batches of
``batch_size x seq_length`` characters are cut by the `get_batches` generator and one-hot encoded with numpy, and a
two-layer LSTM is trained with Adam, gradient clipping and a periodic validation pass. The module-level
``train_on_gpu = torch.cuda.is_available()`` flag decides everywhere whether the network, the inputs, the targets and
the initial hidden state go to the GPU. The trained network is saved as a checkpoint dictionary, text is sampled from
it with top-k sampling, and the checkpoint is loaded into a fresh `CharRNN` that is sampled from again.

Modeled on: udacity/deep-learning-v2-pytorch, recurrent-neural-networks/char-rnn/Character_Level_RNN_Solution.ipynb
at commit c9404fc86181fc3f0906b368697268257f348535
(https://github.com/udacity/deep-learning-v2-pytorch/blob/c9404fc86181fc3f0906b368697268257f348535/recurrent-neural-networks/char-rnn/Character_Level_RNN_Solution.ipynb).

Kept: the notebook's code cells in order, as module-level code: the text encoding (``int2char``/``char2int``,
``encoded``), `one_hot_encode` and `get_batches` (with its test prints), the ``train_on_gpu`` check and its message;
`CharRNN` as written, with `init_hidden` building ``weight.new(...).zero_()`` tensors and calling ``.cuda()`` on them
``if (train_on_gpu)``; `train` as written: ``net.train()``, the Adam optimizer and criterion built *before*
``net.cuda()`` (``if(train_on_gpu)``), the per-batch ``inputs.cuda()``/``targets.cuda()``, the hidden state
re-wrapped with ``tuple([each.data for each in h])``, ``net.zero_grad()``, ``clip_grad_norm_``, the validation
loop with ``net.eval()``/``net.train()`` and its own ``val_h``; the checkpoint dictionary (``n_hidden``,
``n_layers``, ``state_dict``, ``tokens``) written with ``torch.save`` through an open file and read back with
``torch.load(f)`` (no ``map_location``) into a new `CharRNN` built on the CPU; `predict` (``inputs.cuda()``,
``F.softmax(out, dim=1).data``, ``p.cpu()`` when on the GPU, ``topk``, numpy sampling) and `sample` (``net.cuda()``
or ``net.cpu()``, ``net.eval()``, ``net.init_hidden(1)``).

Changed to run here: Anna Karenina (``data/anna.txt``) is replaced by a synthetic text of sentences drawn with a
seeded generator from a small word list, written to ``data/anna.txt`` in a temporary folder that is the working
directory while the script runs and is removed at the end; ``chars = tuple(set(text))`` is sorted so that the
character order (and the output) does not depend on string hashing; the notebook's display-only cells
(``text[:100]``, ``encoded[:100]``) are dropped; `train` returns its last training and validation losses (for
the final line).
Shrunk: 512 hidden units -> 64, 20 epochs -> 2, batch size 128 -> 8, sequence length 100 -> 25, samples of 1000 and
2000 characters -> 120 and 80; a text of about 12000 characters.
"""
import os
import shutil
import tempfile

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

np.random.seed(0)
torch.manual_seed(0)
workdir = tempfile.mkdtemp()
startdir = os.getcwd()
os.chdir(workdir)
os.makedirs('data')
_words = ['anna', 'levin', 'kitty', 'said', 'the', 'and', 'was', 'she', 'he', 'that', 'with', 'her', 'his', 'not',
          'happy', 'family', 'all', 'alike', 'every', 'unhappy', 'in', 'its', 'own', 'way', 'house', 'oblonsky']
_rng = np.random.RandomState(1)
with open('data/anna.txt', 'w') as f:
    _n = 0
    while _n < 12000:
        _s = ' '.join(_words[i] for i in _rng.randint(len(_words), size=_rng.randint(4, 12))).capitalize() + '.\n'
        f.write(_s)
        _n += len(_s)

# open text file and read in data as `text`
with open('data/anna.txt', 'r') as f:
    text = f.read()

# encode the text and map each character to an integer and vice versa

# we create two dictionaries:
# 1. int2char, which maps integers to characters
# 2. char2int, which maps characters to unique integers
chars = tuple(sorted(set(text)))
int2char = dict(enumerate(chars))
char2int = {ch: ii for ii, ch in int2char.items()}

# encode the text
encoded = np.array([char2int[ch] for ch in text])

def one_hot_encode(arr, n_labels):
    
    # Initialize the the encoded array
    one_hot = np.zeros((arr.size, n_labels), dtype=np.float32)
    
    # Fill the appropriate elements with ones
    one_hot[np.arange(one_hot.shape[0]), arr.flatten()] = 1.
    
    # Finally reshape it to get back to the original array
    one_hot = one_hot.reshape((*arr.shape, n_labels))
    
    return one_hot

# check that the function works as expected
test_seq = np.array([[3, 5, 1]])
one_hot = one_hot_encode(test_seq, 8)

print(one_hot)

def get_batches(arr, batch_size, seq_length):
    '''Create a generator that returns batches of size
       batch_size x seq_length from arr.
       
       Arguments
       ---------
       arr: Array you want to make batches from
       batch_size: Batch size, the number of sequences per batch
       seq_length: Number of encoded chars in a sequence
    '''
    
    batch_size_total = batch_size * seq_length
    # total number of batches we can make
    n_batches = len(arr)//batch_size_total
    
    # Keep only enough characters to make full batches
    arr = arr[:n_batches * batch_size_total]
    # Reshape into batch_size rows
    arr = arr.reshape((batch_size, -1))
    
    # iterate through the array, one sequence at a time
    for n in range(0, arr.shape[1], seq_length):
        # The features
        x = arr[:, n:n+seq_length]
        # The targets, shifted by one
        y = np.zeros_like(x)
        try:
            y[:, :-1], y[:, -1] = x[:, 1:], arr[:, n+seq_length]
        except IndexError:
            y[:, :-1], y[:, -1] = x[:, 1:], arr[:, 0]
        yield x, y

batches = get_batches(encoded, 8, 50)
x, y = next(batches)

# printing out the first 10 items in a sequence
print('x\n', x[:10, :10])
print('\ny\n', y[:10, :10])

# check if GPU is available
train_on_gpu = torch.cuda.is_available()
if(train_on_gpu):
    print('Training on GPU!')
else: 
    print('No GPU available, training on CPU; consider making n_epochs very small.')

class CharRNN(nn.Module):
    
    def __init__(self, tokens, n_hidden=256, n_layers=2,
                               drop_prob=0.5, lr=0.001):
        super().__init__()
        self.drop_prob = drop_prob
        self.n_layers = n_layers
        self.n_hidden = n_hidden
        self.lr = lr
        
        # creating character dictionaries
        self.chars = tokens
        self.int2char = dict(enumerate(self.chars))
        self.char2int = {ch: ii for ii, ch in self.int2char.items()}
        
        ## TODO: define the LSTM
        self.lstm = nn.LSTM(len(self.chars), n_hidden, n_layers, 
                            dropout=drop_prob, batch_first=True)
        
        ## TODO: define a dropout layer
        self.dropout = nn.Dropout(drop_prob)
        
        ## TODO: define the final, fully-connected output layer
        self.fc = nn.Linear(n_hidden, len(self.chars))
      
    
    def forward(self, x, hidden):
        ''' Forward pass through the network. 
            These inputs are x, and the hidden/cell state `hidden`. '''
                
        ## TODO: Get the outputs and the new hidden state from the lstm
        r_output, hidden = self.lstm(x, hidden)
        
        ## TODO: pass through a dropout layer
        out = self.dropout(r_output)
        
        # Stack up LSTM outputs using view
        # you may need to use contiguous to reshape the output
        out = out.contiguous().view(-1, self.n_hidden)
        
        ## TODO: put x through the fully-connected layer
        out = self.fc(out)
        
        # return the final output and the hidden state
        return out, hidden
    
    
    def init_hidden(self, batch_size):
        ''' Initializes hidden state '''
        # Create two new tensors with sizes n_layers x batch_size x n_hidden,
        # initialized to zero, for hidden state and cell state of LSTM
        weight = next(self.parameters()).data
        
        if (train_on_gpu):
            hidden = (weight.new(self.n_layers, batch_size, self.n_hidden).zero_().cuda(),
                  weight.new(self.n_layers, batch_size, self.n_hidden).zero_().cuda())
        else:
            hidden = (weight.new(self.n_layers, batch_size, self.n_hidden).zero_(),
                      weight.new(self.n_layers, batch_size, self.n_hidden).zero_())
        
        return hidden
        
def train(net, data, epochs=10, batch_size=10, seq_length=50, lr=0.001, clip=5, val_frac=0.1, print_every=10):
    ''' Training a network 
    
        Arguments
        ---------
        
        net: CharRNN network
        data: text data to train the network
        epochs: Number of epochs to train
        batch_size: Number of mini-sequences per mini-batch, aka batch size
        seq_length: Number of character steps per mini-batch
        lr: learning rate
        clip: gradient clipping
        val_frac: Fraction of data to hold out for validation
        print_every: Number of steps for printing training and validation loss
    
    '''
    net.train()
    
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    criterion = nn.CrossEntropyLoss()
    
    # create training and validation data
    val_idx = int(len(data)*(1-val_frac))
    data, val_data = data[:val_idx], data[val_idx:]
    
    if(train_on_gpu):
        net.cuda()
    
    counter = 0
    n_chars = len(net.chars)
    for e in range(epochs):
        # initialize hidden state
        h = net.init_hidden(batch_size)
        
        for x, y in get_batches(data, batch_size, seq_length):
            counter += 1
            
            # One-hot encode our data and make them Torch tensors
            x = one_hot_encode(x, n_chars)
            inputs, targets = torch.from_numpy(x), torch.from_numpy(y)
            
            if(train_on_gpu):
                inputs, targets = inputs.cuda(), targets.cuda()

            # Creating new variables for the hidden state, otherwise
            # we'd backprop through the entire training history
            h = tuple([each.data for each in h])

            # zero accumulated gradients
            net.zero_grad()
            
            # get the output from the model
            output, h = net(inputs, h)
            
            # calculate the loss and perform backprop
            loss = criterion(output, targets.view(batch_size*seq_length).long())
            loss.backward()
            # `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
            nn.utils.clip_grad_norm_(net.parameters(), clip)
            opt.step()
            
            # loss stats
            if counter % print_every == 0:
                # Get validation loss
                val_h = net.init_hidden(batch_size)
                val_losses = []
                net.eval()
                for x, y in get_batches(val_data, batch_size, seq_length):
                    # One-hot encode our data and make them Torch tensors
                    x = one_hot_encode(x, n_chars)
                    x, y = torch.from_numpy(x), torch.from_numpy(y)
                    
                    # Creating new variables for the hidden state, otherwise
                    # we'd backprop through the entire training history
                    val_h = tuple([each.data for each in val_h])
                    
                    inputs, targets = x, y
                    if(train_on_gpu):
                        inputs, targets = inputs.cuda(), targets.cuda()

                    output, val_h = net(inputs, val_h)
                    val_loss = criterion(output, targets.view(batch_size*seq_length).long())
                
                    val_losses.append(val_loss.item())
                
                net.train() # reset to train mode after iterationg through validation data
                
                print("Epoch: {}/{}...".format(e+1, epochs),
                      "Step: {}...".format(counter),
                      "Loss: {:.4f}...".format(loss.item()),
                      "Val Loss: {:.4f}".format(np.mean(val_losses)))
    return loss.item(), np.mean(val_losses)

# define and print the net
n_hidden=64
n_layers=2

net = CharRNN(chars, n_hidden, n_layers)
print(net)

batch_size = 8
seq_length = 25
n_epochs = 2 # start smaller if you are just testing initial behavior

# train the model
train_loss, val_loss = train(net, encoded, epochs=n_epochs, batch_size=batch_size, seq_length=seq_length, lr=0.001, print_every=10)

# change the name, for saving multiple files
model_name = 'rnn_20_epoch.net'

checkpoint = {'n_hidden': net.n_hidden,
              'n_layers': net.n_layers,
              'state_dict': net.state_dict(),
              'tokens': net.chars}

with open(model_name, 'wb') as f:
    torch.save(checkpoint, f)

def predict(net, char, h=None, top_k=None):
        ''' Given a character, predict the next character.
            Returns the predicted character and the hidden state.
        '''
        
        # tensor inputs
        x = np.array([[net.char2int[char]]])
        x = one_hot_encode(x, len(net.chars))
        inputs = torch.from_numpy(x)
        
        if(train_on_gpu):
            inputs = inputs.cuda()
        
        # detach hidden state from history
        h = tuple([each.data for each in h])
        # get the output of the model
        out, h = net(inputs, h)

        # get the character probabilities
        p = F.softmax(out, dim=1).data
        if(train_on_gpu):
            p = p.cpu() # move to cpu
        
        # get top characters
        if top_k is None:
            top_ch = np.arange(len(net.chars))
        else:
            p, top_ch = p.topk(top_k)
            top_ch = top_ch.numpy().squeeze()
        
        # select the likely next character with some element of randomness
        p = p.numpy().squeeze()
        char = np.random.choice(top_ch, p=p/p.sum())
        
        # return the encoded value of the predicted char and the hidden state
        return net.int2char[char], h

def sample(net, size, prime='The', top_k=None):
        
    if(train_on_gpu):
        net.cuda()
    else:
        net.cpu()
    
    net.eval() # eval mode
    
    # First off, run through the prime characters
    chars = [ch for ch in prime]
    h = net.init_hidden(1)
    for ch in prime:
        char, h = predict(net, ch, h, top_k=top_k)

    chars.append(char)
    
    # Now pass in the previous character and get a new one
    for ii in range(size):
        char, h = predict(net, chars[-1], h, top_k=top_k)
        chars.append(char)

    return ''.join(chars)

sampled = sample(net, 120, prime='Anna', top_k=5)
print(sampled)

# Here we have loaded in a model that trained over 20 epochs `rnn_20_epoch.net`
with open('rnn_20_epoch.net', 'rb') as f:
    checkpoint = torch.load(f)
    
loaded = CharRNN(checkpoint['tokens'], n_hidden=checkpoint['n_hidden'], n_layers=checkpoint['n_layers'])
loaded.load_state_dict(checkpoint['state_dict'])

# Sample using a loaded model
sampled_loaded = sample(loaded, 80, top_k=5, prime="And Levin said")
print(sampled_loaded)

os.chdir(startdir)
shutil.rmtree(workdir)
print("done train_loss={:.4f} val_loss={:.4f} sample_len={} sample_tail={!r}".format(
    train_loss, val_loss, len(sampled_loaded), sampled_loaded[-12:]))
