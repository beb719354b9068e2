"""Self-play reinforcement learning for 6x6 Othello in the style of AlphaZero, as suragnair/alpha-zero-general does:
`Coach.learn` plays episodes with Monte-Carlo tree search guided by the network, trains `NNetWrapper` on the
(board, policy, value) examples, pits the new network against the previous one in an `Arena` and keeps or rejects
it; `pit` finally plays the best network against a random player. Device handling is the repository's: a
module-level ``args = dotdict({..., 'cuda': torch.cuda.is_available(), ...})``, ``self.nnet.cuda()`` in the
wrapper's constructor when ``args.cuda`` (also for the competitor ``pnet`` built by ``self.nnet.__class__(game)``),
batches built from numpy with ``torch.FloatTensor(...)`` and moved with ``.contiguous().cuda()`` under
``if args.cuda``, `predict` reading ``torch.exp(pi).data.cpu().numpy()[0]`` under ``self.nnet.eval()`` and
``torch.no_grad()`` for every MCTS leaf, and `load_checkpoint` using ``map_location = None if args.cuda else
'cpu'``.

Modeled on: suragnair/alpha-zero-general, Coach.py, MCTS.py, Arena.py, main.py, pit.py, utils.py, NeuralNet.py,
othello/OthelloGame.py, othello/OthelloLogic.py, othello/OthelloPlayers.py, othello/pytorch/NNet.py and
othello/pytorch/OthelloNNet.py at commit f1a78e0505c614205f8c60eaa82cd644a07a84b3
(https://github.com/suragnair/alpha-zero-general/tree/f1a78e0505c614205f8c60eaa82cd644a07a84b3).

Kept: `OthelloGame` (canonical form, the eight symmetries, pass action), `MCTS` (`getActionProb`, recursive
`search` with the UCB rule and valid-move masking), `Arena.playGame`, `Coach` (`executeEpisode`, `learn` with the
examples history, temp checkpoint + ``pnet.load_checkpoint``, update threshold, `saveTrainExamples`/
`loadTrainExamples` with Pickler), `NNetWrapper` (`train` sampling random batches, `loss_pi`/`loss_v`, `predict`,
`save_checkpoint`/`load_checkpoint`), `OthelloNNet` (conv + batch-norm layers, fully connected layers with batch
norm and dropout, log-softmax policy and tanh value heads), `RandomPlayer`, `dotdict`/`AverageMeter`, main.py's flow
with the ``load_model`` branch and pit.py's network-vs-player game.

Changed to run here: ``board.tostring()`` becomes ``board.tobytes()`` (removed from NumPy 2); `Board` (OthelloLogic)
and `Arena.playGames` are compact rewrites with the same behaviour; `load_checkpoint` raises ``ValueError`` (the
original raises a string); tqdm, coloredlogs and the human/greedy players are left out; checkpoints and examples go
to a temporary folder; the script runs `main` twice (the second time with ``load_model`` resuming from the saved
``best.pth.tar`` and its examples) and then the pit game; blank lines between methods and a few comments dropped.
Shrunk: 32 channels instead of 512 and hidden layers of 128/64 instead of 1024/512; 2 training epochs, batch 32;
2 iterations of 2 self-play episodes, 6 MCTS simulations, 2 arena games, tempThreshold 6.
"""
import logging
import math
import os
import sys
import tempfile
import time
from collections import deque
from pickle import Pickler, Unpickler
from random import seed, shuffle

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

log = logging.getLogger(__name__)
EPS = 1e-8


class AverageMeter(object):
    def __init__(self):
        self.val = self.avg = self.sum = self.count = 0
    def __repr__(self):
        return f'{self.avg:.2e}'
    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


class dotdict(dict):
    def __getattr__(self, name):
        return self[name]


# ---------------------------------------------------------------- othello/OthelloLogic.py, OthelloGame.py
class Board():
    """Othello board, pieces[x][y]: 1=white, -1=black, 0=empty (compact version of the authors' OthelloLogic)."""
    __directions = [(1, 1), (1, 0), (1, -1), (0, -1), (-1, -1), (-1, 0), (-1, 1), (0, 1)]
    def __init__(self, n):
        self.n = n
        self.pieces = [[0] * n for _ in range(n)]
        h = n // 2
        self.pieces[h - 1][h] = self.pieces[h][h - 1] = 1
        self.pieces[h - 1][h - 1] = self.pieces[h][h] = -1
    def __getitem__(self, index):
        return self.pieces[index]
    def countDiff(self, color):
        return int(np.sum(np.asarray(self.pieces) == color) - np.sum(np.asarray(self.pieces) == -color))
    def get_legal_moves(self, color):
        return [(x, y) for x in range(self.n) for y in range(self.n)
                if self[x][y] == 0 and any(self._get_flips((x, y), d, color) for d in self.__directions)]
    def has_legal_moves(self, color):
        return len(self.get_legal_moves(color)) > 0
    def execute_move(self, move, color):
        flips = [flip for direction in self.__directions for flip in self._get_flips(move, direction, color)]
        assert len(list(flips)) > 0
        for x, y in flips:
            self[x][y] = color
    def _get_flips(self, origin, direction, color):
        flips = [origin]
        for x, y in Board._increment_move(origin, direction, self.n):
            if self[x][y] == 0:
                return []
            if self[x][y] == -color:
                flips.append((x, y))
            elif self[x][y] == color and len(flips) > 1:
                return flips
            else:
                return []
        return []
    @staticmethod
    def _increment_move(move, direction, n):
        move = list(map(sum, zip(move, direction)))
        while all(map(lambda x: 0 <= x < n, move)):
            yield move
            move = list(map(sum, zip(move, direction)))


class OthelloGame():
    def __init__(self, n):
        self.n = n
    def getInitBoard(self):
        return np.array(Board(self.n).pieces)
    def getBoardSize(self):
        return (self.n, self.n)
    def getActionSize(self):
        return self.n * self.n + 1
    def getNextState(self, board, player, action):
        if action == self.n * self.n:
            return (board, -player)
        b = Board(self.n)
        b.pieces = np.copy(board)
        move = (int(action / self.n), action % self.n)
        b.execute_move(move, player)
        return (b.pieces, -player)
    def getValidMoves(self, board, player):
        valids = [0] * self.getActionSize()
        b = Board(self.n)
        b.pieces = np.copy(board)
        legalMoves = b.get_legal_moves(player)
        if len(legalMoves) == 0:
            valids[-1] = 1
            return np.array(valids)
        for x, y in legalMoves:
            valids[self.n * x + y] = 1
        return np.array(valids)
    def getGameEnded(self, board, player):
        b = Board(self.n)
        b.pieces = np.copy(board)
        if b.has_legal_moves(player) or b.has_legal_moves(-player):
            return 0
        return 1 if b.countDiff(player) > 0 else -1
    def getCanonicalForm(self, board, player):
        return player * board
    def getSymmetries(self, board, pi):
        # mirror, rotational
        assert(len(pi) == self.n ** 2 + 1)  # 1 for pass
        pi_board = np.reshape(pi[:-1], (self.n, self.n))
        l = []
        for i in range(1, 5):
            for j in [True, False]:
                newB, newPi = np.rot90(board, i), np.rot90(pi_board, i)
                if j:
                    newB, newPi = np.fliplr(newB), np.fliplr(newPi)
                l += [(newB, list(newPi.ravel()) + [pi[-1]])]
        return l
    def stringRepresentation(self, board):
        return board.tobytes()


class RandomPlayer():
    def __init__(self, game):
        self.game = game
    def play(self, board):
        a = np.random.randint(self.game.getActionSize())
        valids = self.game.getValidMoves(board, 1)
        while valids[a] != 1:
            a = np.random.randint(self.game.getActionSize())
        return a


# ---------------------------------------------------------------- othello/pytorch/OthelloNNet.py, NNet.py
class OthelloNNet(nn.Module):
    def __init__(self, game, args):
        # game params
        self.board_x, self.board_y = game.getBoardSize()
        self.action_size = game.getActionSize()
        self.args = args
        super(OthelloNNet, self).__init__()
        self.conv1 = nn.Conv2d(1, args.num_channels, 3, stride=1, padding=1)
        self.conv2 = nn.Conv2d(args.num_channels, args.num_channels, 3, stride=1, padding=1)
        self.conv3 = nn.Conv2d(args.num_channels, args.num_channels, 3, stride=1)
        self.conv4 = nn.Conv2d(args.num_channels, args.num_channels, 3, stride=1)
        self.bn1 = nn.BatchNorm2d(args.num_channels)
        self.bn2 = nn.BatchNorm2d(args.num_channels)
        self.bn3 = nn.BatchNorm2d(args.num_channels)
        self.bn4 = nn.BatchNorm2d(args.num_channels)
        self.fc1 = nn.Linear(args.num_channels * (self.board_x - 4) * (self.board_y - 4), 128)
        self.fc_bn1 = nn.BatchNorm1d(128)
        self.fc2 = nn.Linear(128, 64)
        self.fc_bn2 = nn.BatchNorm1d(64)
        self.fc3 = nn.Linear(64, self.action_size)
        self.fc4 = nn.Linear(64, 1)

    def forward(self, s):
        #                                                           s: batch_size x board_x x board_y
        s = s.view(-1, 1, self.board_x, self.board_y)                # batch_size x 1 x board_x x board_y
        s = F.relu(self.bn1(self.conv1(s)))                          # batch_size x num_channels x board_x x board_y
        s = F.relu(self.bn2(self.conv2(s)))                          # batch_size x num_channels x board_x x board_y
        s = F.relu(self.bn3(self.conv3(s)))                          # batch_size x num_channels x (board_x-2) x (board_y-2)
        s = F.relu(self.bn4(self.conv4(s)))                          # batch_size x num_channels x (board_x-4) x (board_y-4)
        s = s.view(-1, self.args.num_channels * (self.board_x - 4) * (self.board_y - 4))
        s = F.dropout(F.relu(self.fc_bn1(self.fc1(s))), p=self.args.dropout, training=self.training)  # batch_size x 128
        s = F.dropout(F.relu(self.fc_bn2(self.fc2(s))), p=self.args.dropout, training=self.training)  # batch_size x 64
        pi = self.fc3(s)                                                                         # batch_size x action_size
        v = self.fc4(s)                                                                          # batch_size x 1
        return F.log_softmax(pi, dim=1), torch.tanh(v)


args = dotdict({
    'lr': 0.001,
    'dropout': 0.3,
    'epochs': 2,
    'batch_size': 32,
    'cuda': torch.cuda.is_available(),
    'num_channels': 32,
})


class NeuralNet():
    """Base class: the network only deals with the canonical form of the board."""


class NNetWrapper(NeuralNet):
    def __init__(self, game):
        self.nnet = OthelloNNet(game, args)
        self.board_x, self.board_y = game.getBoardSize()
        self.action_size = game.getActionSize()
        if args.cuda:
            self.nnet.cuda()
    def train(self, examples):
        """examples: list of examples, each example is of form (board, pi, v)"""
        optimizer = optim.Adam(self.nnet.parameters())
        for epoch in range(args.epochs):
            print('EPOCH ::: ' + str(epoch + 1))
            self.nnet.train()
            pi_losses = AverageMeter()
            v_losses = AverageMeter()
            batch_count = int(len(examples) / args.batch_size)
            for _ in range(batch_count):
                sample_ids = np.random.randint(len(examples), size=args.batch_size)
                boards, pis, vs = list(zip(*[examples[i] for i in sample_ids]))
                boards = torch.FloatTensor(np.array(boards).astype(np.float64))
                target_pis = torch.FloatTensor(np.array(pis))
                target_vs = torch.FloatTensor(np.array(vs).astype(np.float64))
                # predict
                if args.cuda:
                    boards, target_pis, target_vs = boards.contiguous().cuda(), target_pis.contiguous().cuda(), target_vs.contiguous().cuda()
                # compute output
                out_pi, out_v = self.nnet(boards)
                l_pi = self.loss_pi(target_pis, out_pi)
                l_v = self.loss_v(target_vs, out_v)
                total_loss = l_pi + l_v
                pi_losses.update(l_pi.item(), boards.size(0))
                v_losses.update(l_v.item(), boards.size(0))
                # compute gradient and do SGD step
                optimizer.zero_grad()
                total_loss.backward()
                optimizer.step()
            print('Training Net: Loss_pi=%s Loss_v=%s' % (pi_losses, v_losses))
    def predict(self, board):
        """board: np array with board"""
        # timing
        start = time.time()
        board = torch.FloatTensor(board.astype(np.float64))
        if args.cuda: board = board.contiguous().cuda()
        board = board.view(1, self.board_x, self.board_y)
        self.nnet.eval()
        with torch.no_grad():
            pi, v = self.nnet(board)
        # print('PREDICTION TIME TAKEN : {0:03f}'.format(time.time()-start))
        return torch.exp(pi).data.cpu().numpy()[0], v.data.cpu().numpy()[0]
    def loss_pi(self, targets, outputs):
        return -torch.sum(targets * outputs) / targets.size()[0]
    def loss_v(self, targets, outputs):
        return torch.sum((targets - outputs.view(-1)) ** 2) / targets.size()[0]
    def save_checkpoint(self, folder='checkpoint', filename='checkpoint.pth.tar'):
        filepath = os.path.join(folder, filename)
        if not os.path.exists(folder):
            print("Checkpoint Directory does not exist! Making directory {}".format(folder))
            os.mkdir(folder)
        torch.save({'state_dict': self.nnet.state_dict()}, filepath)
    def load_checkpoint(self, folder='checkpoint', filename='checkpoint.pth.tar'):
        # https://github.com/pytorch/examples/blob/master/imagenet/main.py#L98
        filepath = os.path.join(folder, filename)
        if not os.path.exists(filepath):
            raise ValueError("No model in path {}".format(filepath))
        map_location = None if args.cuda else 'cpu'
        checkpoint = torch.load(filepath, map_location=map_location)
        self.nnet.load_state_dict(checkpoint['state_dict'])


# ---------------------------------------------------------------- MCTS.py, Arena.py, Coach.py
class MCTS():
    """This class handles the MCTS tree."""
    def __init__(self, game, nnet, args):
        self.game, self.nnet, self.args = game, nnet, args
        self.Qsa = {}  # stores Q values for s,a (as defined in the paper)
        self.Nsa = {}  # stores #times edge s,a was visited
        self.Ns = {}  # stores #times board s was visited
        self.Ps = {}  # stores initial policy (returned by neural net)
        self.Es = {}  # stores game.getGameEnded ended for board s
        self.Vs = {}  # stores game.getValidMoves for board s
    def getActionProb(self, canonicalBoard, temp=1):
        for i in range(self.args.numMCTSSims):
            self.search(canonicalBoard)
        s = self.game.stringRepresentation(canonicalBoard)
        counts = [self.Nsa[(s, a)] if (s, a) in self.Nsa else 0 for a in range(self.game.getActionSize())]
        if temp == 0:
            bestAs = np.array(np.argwhere(counts == np.max(counts))).flatten()
            bestA = np.random.choice(bestAs)
            probs = [0] * len(counts)
            probs[bestA] = 1
            return probs
        counts = [x ** (1. / temp) for x in counts]
        counts_sum = float(sum(counts))
        probs = [x / counts_sum for x in counts]
        return probs
    def search(self, canonicalBoard):
        s = self.game.stringRepresentation(canonicalBoard)
        if s not in self.Es:
            self.Es[s] = self.game.getGameEnded(canonicalBoard, 1)
        if self.Es[s] != 0:
            # terminal node
            return -self.Es[s]
        if s not in self.Ps:
            # leaf node
            self.Ps[s], v = self.nnet.predict(canonicalBoard)
            valids = self.game.getValidMoves(canonicalBoard, 1)
            self.Ps[s] = self.Ps[s] * valids  # masking invalid moves
            sum_Ps_s = np.sum(self.Ps[s])
            if sum_Ps_s > 0:
                self.Ps[s] /= sum_Ps_s  # renormalize
            else:
                # if all valid moves were masked make all valid moves equally probable
                log.error("All valid moves were masked, doing a workaround.")
                self.Ps[s] = self.Ps[s] + valids
                self.Ps[s] /= np.sum(self.Ps[s])
            self.Vs[s] = valids
            self.Ns[s] = 0
            return -v
        valids = self.Vs[s]
        cur_best = -float('inf')
        best_act = -1
        # pick the action with the highest upper confidence bound
        for a in range(self.game.getActionSize()):
            if valids[a]:
                if (s, a) in self.Qsa:
                    u = self.Qsa[(s, a)] + self.args.cpuct * self.Ps[s][a] * math.sqrt(self.Ns[s]) / (
                        1 + self.Nsa[(s, a)])
                else:
                    u = self.args.cpuct * self.Ps[s][a] * math.sqrt(self.Ns[s] + EPS)  # Q = 0 ?
                if u > cur_best:
                    cur_best = u
                    best_act = a
        a = best_act
        next_s, next_player = self.game.getNextState(canonicalBoard, 1, a)
        next_s = self.game.getCanonicalForm(next_s, next_player)
        v = self.search(next_s)
        if (s, a) in self.Qsa:
            self.Qsa[(s, a)] = (self.Nsa[(s, a)] * self.Qsa[(s, a)] + v) / (self.Nsa[(s, a)] + 1)
            self.Nsa[(s, a)] += 1
        else:
            self.Qsa[(s, a)] = v
            self.Nsa[(s, a)] = 1
        self.Ns[s] += 1
        return -v


class Arena():
    """An Arena class where any 2 agents can be pit against each other."""
    def __init__(self, player1, player2, game, display=None):
        self.player1, self.player2, self.game, self.display = player1, player2, game, display
    def playGame(self, verbose=False):
        players = [self.player2, None, self.player1]
        curPlayer = 1
        board = self.game.getInitBoard()
        it = 0
        while self.game.getGameEnded(board, curPlayer) == 0:
            it += 1
            action = players[curPlayer + 1](self.game.getCanonicalForm(board, curPlayer))
            valids = self.game.getValidMoves(self.game.getCanonicalForm(board, curPlayer), 1)
            if valids[action] == 0:
                log.error(f'Action {action} is not valid!')
                assert valids[action] > 0
            board, curPlayer = self.game.getNextState(board, curPlayer, action)
        return curPlayer * self.game.getGameEnded(board, curPlayer)
    def playGames(self, num, verbose=False):
        num = int(num / 2)
        oneWon = twoWon = draws = 0
        for swapped in (False, True):
            if swapped:
                self.player1, self.player2 = self.player2, self.player1
            for _ in range(num):
                gameResult = self.playGame(verbose=verbose) * (-1 if swapped else 1)
                if gameResult == 1:
                    oneWon += 1
                elif gameResult == -1:
                    twoWon += 1
                else:
                    draws += 1
        return oneWon, twoWon, draws


class Coach():
    """This class executes the self-play + learning (args are specified in main.py)."""
    def __init__(self, game, nnet, args):
        self.game = game
        self.nnet = nnet
        self.pnet = self.nnet.__class__(self.game)  # the competitor network
        self.args = args
        self.mcts = MCTS(self.game, self.nnet, self.args)
        self.trainExamplesHistory = []  # history of examples from args.numItersForTrainExamplesHistory latest iterations
        self.skipFirstSelfPlay = False  # can be overriden in loadTrainExamples()
    def executeEpisode(self):
        trainExamples = []
        board = self.game.getInitBoard()
        self.curPlayer = 1
        episodeStep = 0
        while True:
            episodeStep += 1
            canonicalBoard = self.game.getCanonicalForm(board, self.curPlayer)
            temp = int(episodeStep < self.args.tempThreshold)
            pi = self.mcts.getActionProb(canonicalBoard, temp=temp)
            sym = self.game.getSymmetries(canonicalBoard, pi)
            for b, p in sym:
                trainExamples.append([b, self.curPlayer, p, None])
            action = np.random.choice(len(pi), p=pi)
            board, self.curPlayer = self.game.getNextState(board, self.curPlayer, action)
            r = self.game.getGameEnded(board, self.curPlayer)
            if r != 0:
                return [(x[0], x[2], r * ((-1) ** (x[1] != self.curPlayer))) for x in trainExamples]
    def learn(self):
        for i in range(1, self.args.numIters + 1):
            print(f'Starting Iter #{i} ...')
            # examples of the iteration
            if not self.skipFirstSelfPlay or i > 1:
                iterationTrainExamples = deque([], maxlen=self.args.maxlenOfQueue)
                for _ in range(self.args.numEps):
                    self.mcts = MCTS(self.game, self.nnet, self.args)  # reset search tree
                    iterationTrainExamples += self.executeEpisode()
                # save the iteration examples to the history
                self.trainExamplesHistory.append(iterationTrainExamples)
            if len(self.trainExamplesHistory) > self.args.numItersForTrainExamplesHistory:
                log.warning(f"Removing the oldest entry in trainExamples. len = {len(self.trainExamplesHistory)}")
                self.trainExamplesHistory.pop(0)
            # backup history to a file
            # NB! the examples were collected using the model from the previous iteration, so (i-1)
            self.saveTrainExamples(i - 1)
            # shuffle examples before training
            trainExamples = []
            for e in self.trainExamplesHistory:
                trainExamples.extend(e)
            shuffle(trainExamples)
            # training new network, keeping a copy of the old one
            self.nnet.save_checkpoint(folder=self.args.checkpoint, filename='temp.pth.tar')
            self.pnet.load_checkpoint(folder=self.args.checkpoint, filename='temp.pth.tar')
            pmcts = MCTS(self.game, self.pnet, self.args)
            self.nnet.train(trainExamples)
            nmcts = MCTS(self.game, self.nnet, self.args)
            print('PITTING AGAINST PREVIOUS VERSION')
            arena = Arena(lambda x: np.argmax(pmcts.getActionProb(x, temp=0)),
                          lambda x: np.argmax(nmcts.getActionProb(x, temp=0)), self.game)
            pwins, nwins, draws = arena.playGames(self.args.arenaCompare)
            print('NEW/PREV WINS : %d / %d ; DRAWS : %d' % (nwins, pwins, draws))
            if pwins + nwins == 0 or float(nwins) / (pwins + nwins) < self.args.updateThreshold:
                print('REJECTING NEW MODEL')
                self.nnet.load_checkpoint(folder=self.args.checkpoint, filename='temp.pth.tar')
            else:
                print('ACCEPTING NEW MODEL')
                self.nnet.save_checkpoint(folder=self.args.checkpoint, filename=self.getCheckpointFile(i))
                self.nnet.save_checkpoint(folder=self.args.checkpoint, filename='best.pth.tar')
    def getCheckpointFile(self, iteration):
        return 'checkpoint_' + str(iteration) + '.pth.tar'
    def saveTrainExamples(self, iteration):
        folder = self.args.checkpoint
        if not os.path.exists(folder):
            os.makedirs(folder)
        filename = os.path.join(folder, self.getCheckpointFile(iteration) + ".examples")
        with open(filename, "wb+") as f:
            Pickler(f).dump(self.trainExamplesHistory)
    def loadTrainExamples(self):
        modelFile = os.path.join(self.args.load_folder_file[0], self.args.load_folder_file[1])
        examplesFile = modelFile + ".examples"
        if not os.path.isfile(examplesFile):
            log.warning(f'File "{examplesFile}" with trainExamples not found!')
            r = input("Continue? [y|n]")
            if r != "y":
                sys.exit()
        else:
            print("File with trainExamples found. Loading it...")
            with open(examplesFile, "rb") as f:
                self.trainExamplesHistory = Unpickler(f).load()
            self.skipFirstSelfPlay = True


# ---------------------------------------------------------------- main.py, pit.py
def main(main_args):
    g = OthelloGame(6)
    nnet = NNetWrapper(g)
    if main_args.load_model:
        print('Loading checkpoint "%s/%s"...' % main_args.load_folder_file)
        nnet.load_checkpoint(main_args.load_folder_file[0], main_args.load_folder_file[1])
    else:
        log.warning('Not loading a checkpoint!')
    c = Coach(g, nnet, main_args)
    if main_args.load_model:
        print("Loading 'trainExamples' from file...")
        c.loadTrainExamples()
    c.learn()


def pit(folder, filename):
    g = OthelloGame(6)
    rp = RandomPlayer(g).play
    n1 = NNetWrapper(g)
    n1.load_checkpoint(folder, filename)
    args1 = dotdict({'numMCTSSims': 6, 'cpuct': 1.0})
    mcts1 = MCTS(g, n1, args1)
    n1p = lambda x: np.argmax(mcts1.getActionProb(x, temp=0))
    arena = Arena(n1p, rp, g)
    print('pit vs random (net wins, random wins, draws):', arena.playGames(2, verbose=False))


if __name__ == "__main__":
    seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as folder:
        main_args = dotdict({
            'numIters': 2, 'numEps': 2, 'tempThreshold': 6,
            'updateThreshold': 0.5,     # new neural net will be accepted if threshold or more of games are won.
            'maxlenOfQueue': 200000, 'numMCTSSims': 6, 'arenaCompare': 2, 'cpuct': 1,
            'checkpoint': folder, 'load_model': False, 'load_folder_file': (folder, 'best.pth.tar'),
            'numItersForTrainExamplesHistory': 20,
        })
        main(main_args)
        if not os.path.exists(os.path.join(folder, 'best.pth.tar')):
            NNetWrapper(OthelloGame(6)).save_checkpoint(folder, 'best.pth.tar')
        # resume as main.py does with load_model: the examples saved with the last iteration's checkpoint file name
        os.replace(os.path.join(folder, 'checkpoint_1.pth.tar.examples'),
                   os.path.join(folder, 'best.pth.tar.examples'))
        main(dotdict({**main_args, 'numIters': 1, 'load_model': True}))
        pit(folder, 'best.pth.tar')
    print('done')
