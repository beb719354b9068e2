"""Fits matrix-factorization recommenders with Spotlight's estimator classes on a synthetic user-item interaction set
split at random into train and test: an implicit-feedback model trained with the BPR loss against one sampled
negative item per positive, the same with the adaptive hinge loss (the highest-scoring of several sampled negatives)
fitted twice to show that a second `fit` resumes training, and an explicit-feedback model trained with the squared
error on ratings; it reports the mean reciprocal rank and precision/recall at 5 on the test set (train items masked)
and the test RMSE.

Modeled on: maciejkula/spotlight, spotlight/factorization/implicit.py, spotlight/factorization/explicit.py,
spotlight/factorization/_components.py, spotlight/factorization/representations.py, spotlight/layers.py,
spotlight/losses.py, spotlight/sampling.py, spotlight/torch_utils.py, spotlight/interactions.py,
spotlight/cross_validation.py and spotlight/evaluation.py
(https://github.com/maciejkula/spotlight/blob/448f891a625bed02a9fab5dc9bcd55fd890de5dc/spotlight/factorization/implicit.py,
https://github.com/maciejkula/spotlight/tree/master/spotlight).

Kept: the `use_cuda` flag given to each model and kept as `self._use_cuda`; `torch_utils.gpu(tensor, gpu=False)`
(`tensor.cuda()` only when the flag is set) and `cpu(tensor)` (`.cpu()` only when `tensor.is_cuda`);
`set_seed(seed, cuda=self._use_cuda)` calling `torch.cuda.manual_seed` when the flag is set; `_initialize` moving the
BilinearNet with `gpu(BilinearNet(...), self._use_cuda)` before Adam is made; `fit` shuffling the numpy ids each
epoch and moving the whole epoch with `gpu(torch.from_numpy(users), self._use_cuda)` (items and ratings likewise),
then slicing device minibatches; `_get_negative_prediction` drawing numpy negatives with `sample_items` and moving
them with `gpu(torch.from_numpy(negative_items), self._use_cuda)`; `_get_multiple_negative_predictions` with
`.view(...).expand(...).reshape(...)` of the device user ids; `loss.item()` per minibatch; `predict` calling
`self._net.train(False)` and `_predict_process_ids(user_ids, item_ids, num_items, use_cuda)` (host
`torch.from_numpy(...)`, `expand`, `Variable(gpu(..., use_cuda))`, `.squeeze()`), returning
`cpu(out).detach().numpy().flatten()` (no `torch.no_grad()`, and `fit` never calls `train(True)` again, as in the
original); `evaluation.mrr_score`/`precision_recall_score`/`rmse_score` working on the numpy predictions.

Changed to run here: the three models are fitted in one script (`use_cuda=torch.cuda.is_available()`, as Spotlight's
examples pass it); the Movielens download is a synthetic low-rank interaction set (60 users, 80 items, 1-5 ratings)
built with numpy; `Interactions` keeps only the fields used here; the
net/optimizer part that implicit.py's and explicit.py's `_initialize` share is one `_build_net` method of a small base
class (same code, including `_check_input`); the repr and the sequence models are left out.
Shrunk: embedding_dim 8, batch 64, 3-4 epochs, 3 negative samples for the adaptive hinge loss.
"""
import numpy as np
import scipy.sparse as sp
import scipy.stats as st
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable


FLOAT_MAX = np.finfo(np.float32).max


# ----------------------------------------------------------------------------- torch_utils.py

def gpu(tensor, gpu=False):

    if gpu:
        return tensor.cuda()
    else:
        return tensor


def cpu(tensor):

    if tensor.is_cuda:
        return tensor.cpu()
    else:
        return tensor


def minibatch(*tensors, **kwargs):

    batch_size = kwargs.get('batch_size', 128)

    if len(tensors) == 1:
        tensor = tensors[0]
        for i in range(0, len(tensor), batch_size):
            yield tensor[i:i + batch_size]
    else:
        for i in range(0, len(tensors[0]), batch_size):
            yield tuple(x[i:i + batch_size] for x in tensors)


def shuffle(*arrays, **kwargs):

    random_state = kwargs.get('random_state')

    if len(set(len(x) for x in arrays)) != 1:
        raise ValueError('All inputs to shuffle must have '
                         'the same length.')

    if random_state is None:
        random_state = np.random.RandomState()

    shuffle_indices = np.arange(len(arrays[0]))
    random_state.shuffle(shuffle_indices)

    if len(arrays) == 1:
        return arrays[0][shuffle_indices]
    else:
        return tuple(x[shuffle_indices] for x in arrays)


def assert_no_grad(variable):

    if variable.requires_grad:
        raise ValueError(
            "nn criterions don't compute the gradient w.r.t. targets - please "
            "mark these variables as volatile or not requiring gradients"
        )


def set_seed(seed, cuda=False):

    torch.manual_seed(seed)

    if cuda:
        torch.cuda.manual_seed(seed)


# ----------------------------------------------------------------------------- interactions / cross_validation

class Interactions(object):

    def __init__(self, user_ids, item_ids, ratings=None, num_users=None, num_items=None):

        self.num_users = num_users or int(user_ids.max() + 1)
        self.num_items = num_items or int(item_ids.max() + 1)

        self.user_ids = user_ids
        self.item_ids = item_ids
        self.ratings = ratings

    def __len__(self):

        return len(self.user_ids)

    def tocoo(self):

        row = self.user_ids
        col = self.item_ids
        data = self.ratings if self.ratings is not None else np.ones(len(self))

        return sp.coo_matrix((data, (row, col)), shape=(self.num_users, self.num_items))

    def tocsr(self):

        return self.tocoo().tocsr()


def _index_or_none(array, shuffle_index):

    if array is None:
        return None
    else:
        return array[shuffle_index]


def random_train_test_split(interactions, test_percentage=0.2, random_state=None):

    if random_state is None:
        random_state = np.random.RandomState()

    interactions = interactions.tocoo()

    uids, iids, data = shuffle(interactions.row, interactions.col, interactions.data, random_state=random_state)

    cutoff = int((1.0 - test_percentage) * len(uids))

    train_idx = slice(None, cutoff)
    test_idx = slice(cutoff, None)

    train = Interactions(uids[train_idx], iids[train_idx], ratings=data[train_idx].astype(np.float32),
                         num_users=interactions.shape[0], num_items=interactions.shape[1])
    test = Interactions(uids[test_idx], iids[test_idx], ratings=data[test_idx].astype(np.float32),
                        num_users=interactions.shape[0], num_items=interactions.shape[1])

    return train, test


def synthetic_interactions(num_users=60, num_items=80, rank=3, per_user=16, random_state=None):
    """Stands in for spotlight.datasets.movielens.get_movielens_dataset (which downloads)."""
    users_f = random_state.randn(num_users, rank)
    items_f = random_state.randn(num_items, rank)
    scores = users_f @ items_f.T
    user_ids, item_ids, ratings = [], [], []
    for u in range(num_users):
        top = np.argsort(-scores[u] + 0.5 * random_state.randn(num_items))[:per_user]
        for i in top:
            user_ids.append(u)
            item_ids.append(i)
            ratings.append(float(np.clip(np.round(3 + scores[u, i]), 1, 5)))
    return Interactions(np.array(user_ids, dtype=np.int32), np.array(item_ids, dtype=np.int32),
                        ratings=np.array(ratings, dtype=np.float32), num_users=num_users, num_items=num_items)


# ----------------------------------------------------------------------------- layers.py / representations.py

class ScaledEmbedding(nn.Embedding):
    """Embedding layer that initialises its values to using a normal variable scaled by the inverse of the
    embedding dimension."""

    def reset_parameters(self):

        self.weight.data.normal_(0, 1.0 / self.embedding_dim)
        if self.padding_idx is not None:
            self.weight.data[self.padding_idx].fill_(0)


class ZeroEmbedding(nn.Embedding):
    """Embedding layer that initialises its values to zero. Used for biases."""

    def reset_parameters(self):

        self.weight.data.zero_()
        if self.padding_idx is not None:
            self.weight.data[self.padding_idx].fill_(0)


class BilinearNet(nn.Module):

    def __init__(self, num_users, num_items, embedding_dim=32,
                 user_embedding_layer=None, item_embedding_layer=None, sparse=False):

        super(BilinearNet, self).__init__()

        self.embedding_dim = embedding_dim

        if user_embedding_layer is not None:
            self.user_embeddings = user_embedding_layer
        else:
            self.user_embeddings = ScaledEmbedding(num_users, embedding_dim, sparse=sparse)

        if item_embedding_layer is not None:
            self.item_embeddings = item_embedding_layer
        else:
            self.item_embeddings = ScaledEmbedding(num_items, embedding_dim, sparse=sparse)

        self.user_biases = ZeroEmbedding(num_users, 1, sparse=sparse)
        self.item_biases = ZeroEmbedding(num_items, 1, sparse=sparse)

    def forward(self, user_ids, item_ids):

        user_embedding = self.user_embeddings(user_ids)
        item_embedding = self.item_embeddings(item_ids)

        user_embedding = user_embedding.squeeze()
        item_embedding = item_embedding.squeeze()

        user_bias = self.user_biases(user_ids).squeeze()
        item_bias = self.item_biases(item_ids).squeeze()

        dot = (user_embedding * item_embedding).sum(1)

        return dot + user_bias + item_bias


# ----------------------------------------------------------------------------- losses.py / sampling.py

def pointwise_loss(positive_predictions, negative_predictions, mask=None):

    positives_loss = (1.0 - torch.sigmoid(positive_predictions))
    negatives_loss = torch.sigmoid(negative_predictions)

    loss = (positives_loss + negatives_loss)

    if mask is not None:
        mask = mask.float()
        loss = loss * mask
        return loss.sum() / mask.sum()

    return loss.mean()


def bpr_loss(positive_predictions, negative_predictions, mask=None):

    loss = (1.0 - torch.sigmoid(positive_predictions - negative_predictions))

    if mask is not None:
        mask = mask.float()
        loss = loss * mask
        return loss.sum() / mask.sum()

    return loss.mean()


def hinge_loss(positive_predictions, negative_predictions, mask=None):

    loss = torch.clamp(negative_predictions - positive_predictions + 1.0, 0.0)

    if mask is not None:
        mask = mask.float()
        loss = loss * mask
        return loss.sum() / mask.sum()

    return loss.mean()


def adaptive_hinge_loss(positive_predictions, negative_predictions, mask=None):

    highest_negative_predictions, _ = torch.max(negative_predictions, 0)

    return hinge_loss(positive_predictions, highest_negative_predictions.squeeze(), mask=mask)


def regression_loss(observed_ratings, predicted_ratings):

    assert_no_grad(observed_ratings)

    return ((observed_ratings - predicted_ratings) ** 2).mean()


def sample_items(num_items, shape, random_state=None):

    if random_state is None:
        random_state = np.random.RandomState()

    items = random_state.randint(0, num_items, shape, dtype=np.int64)

    return items


# ----------------------------------------------------------------------------- factorization/_components.py

def _predict_process_ids(user_ids, item_ids, num_items, use_cuda):

    if item_ids is None:
        item_ids = np.arange(num_items, dtype=np.int64)

    if np.isscalar(user_ids):
        user_ids = np.array(user_ids, dtype=np.int64)

    user_ids = torch.from_numpy(user_ids.reshape(-1, 1).astype(np.int64))
    item_ids = torch.from_numpy(item_ids.reshape(-1, 1).astype(np.int64))

    if item_ids.size()[0] != user_ids.size(0):
        user_ids = user_ids.expand(item_ids.size())

    user_var = Variable(gpu(user_ids, use_cuda))
    item_var = Variable(gpu(item_ids, use_cuda))

    return user_var.squeeze(), item_var.squeeze()


class _FactorizationBase(object):

    @property
    def _initialized(self):
        return self._net is not None

    def _check_input(self, user_ids, item_ids, allow_items_none=False):

        if isinstance(user_ids, int):
            user_id_max = user_ids
        else:
            user_id_max = user_ids.max()

        if user_id_max >= self._num_users:
            raise ValueError('Maximum user id greater '
                             'than number of users in model.')

        if allow_items_none and item_ids is None:
            return

        if isinstance(item_ids, int):
            item_id_max = item_ids
        else:
            item_id_max = item_ids.max()

        if item_id_max >= self._num_items:
            raise ValueError('Maximum item id greater '
                             'than number of items in model.')

    def _build_net(self, interactions):

        (self._num_users,
         self._num_items) = (interactions.num_users,
                             interactions.num_items)

        if self._representation is not None:
            self._net = gpu(self._representation,
                            self._use_cuda)
        else:
            self._net = gpu(
                BilinearNet(self._num_users,
                            self._num_items,
                            self._embedding_dim,
                            sparse=self._sparse),
                self._use_cuda
            )

        if self._optimizer_func is None:
            self._optimizer = optim.Adam(
                self._net.parameters(),
                weight_decay=self._l2,
                lr=self._learning_rate
            )
        else:
            self._optimizer = self._optimizer_func(self._net.parameters())


# ----------------------------------------------------------------------------- factorization/implicit.py

class ImplicitFactorizationModel(_FactorizationBase):

    def __init__(self,
                 loss='pointwise',
                 embedding_dim=32,
                 n_iter=10,
                 batch_size=256,
                 l2=0.0,
                 learning_rate=1e-2,
                 optimizer_func=None,
                 use_cuda=False,
                 representation=None,
                 sparse=False,
                 random_state=None,
                 num_negative_samples=5):

        assert loss in ('pointwise',
                        'bpr',
                        'hinge',
                        'adaptive_hinge')

        self._loss = loss
        self._embedding_dim = embedding_dim
        self._n_iter = n_iter
        self._learning_rate = learning_rate
        self._batch_size = batch_size
        self._l2 = l2
        self._use_cuda = use_cuda
        self._representation = representation
        self._sparse = sparse
        self._optimizer_func = optimizer_func
        self._random_state = random_state or np.random.RandomState()
        self._num_negative_samples = num_negative_samples

        self._num_users = None
        self._num_items = None
        self._net = None
        self._optimizer = None
        self._loss_func = None

        set_seed(self._random_state.randint(-10**8, 10**8),
                 cuda=self._use_cuda)

    def _initialize(self, interactions):

        self._build_net(interactions)

        if self._loss == 'pointwise':
            self._loss_func = pointwise_loss
        elif self._loss == 'bpr':
            self._loss_func = bpr_loss
        elif self._loss == 'hinge':
            self._loss_func = hinge_loss
        else:
            self._loss_func = adaptive_hinge_loss

    def fit(self, interactions, verbose=False):

        user_ids = interactions.user_ids.astype(np.int64)
        item_ids = interactions.item_ids.astype(np.int64)

        if not self._initialized:
            self._initialize(interactions)

        self._check_input(user_ids, item_ids)

        for epoch_num in range(self._n_iter):

            users, items = shuffle(user_ids,
                                   item_ids,
                                   random_state=self._random_state)

            user_ids_tensor = gpu(torch.from_numpy(users),
                                  self._use_cuda)
            item_ids_tensor = gpu(torch.from_numpy(items),
                                  self._use_cuda)

            epoch_loss = 0.0

            for (minibatch_num,
                 (batch_user,
                  batch_item)) in enumerate(minibatch(user_ids_tensor,
                                                      item_ids_tensor,
                                                      batch_size=self._batch_size)):

                positive_prediction = self._net(batch_user, batch_item)

                if self._loss == 'adaptive_hinge':
                    negative_prediction = self._get_multiple_negative_predictions(
                        batch_user, n=self._num_negative_samples)
                else:
                    negative_prediction = self._get_negative_prediction(batch_user)

                self._optimizer.zero_grad()

                loss = self._loss_func(positive_prediction, negative_prediction)
                epoch_loss += loss.item()

                loss.backward()
                self._optimizer.step()

            epoch_loss /= minibatch_num + 1

            if verbose:
                print('Epoch {}: loss {:.6f}'.format(epoch_num, epoch_loss))

            if np.isnan(epoch_loss) or epoch_loss == 0.0:
                raise ValueError('Degenerate epoch loss: {}'
                                 .format(epoch_loss))

    def _get_negative_prediction(self, user_ids):

        negative_items = sample_items(
            self._num_items,
            len(user_ids),
            random_state=self._random_state)
        negative_var = gpu(torch.from_numpy(negative_items), self._use_cuda)

        negative_prediction = self._net(user_ids, negative_var)

        return negative_prediction

    def _get_multiple_negative_predictions(self, user_ids, n=5):

        batch_size = user_ids.size(0)

        negative_prediction = self._get_negative_prediction(user_ids
                                                            .view(batch_size, 1)
                                                            .expand(batch_size, n)
                                                            .reshape(batch_size * n))

        return negative_prediction.view(n, len(user_ids))

    def predict(self, user_ids, item_ids=None):

        self._check_input(user_ids, item_ids, allow_items_none=True)
        self._net.train(False)

        user_ids, item_ids = _predict_process_ids(user_ids, item_ids,
                                                  self._num_items,
                                                  self._use_cuda)

        out = self._net(user_ids, item_ids)

        return cpu(out).detach().numpy().flatten()


# ----------------------------------------------------------------------------- factorization/explicit.py

class ExplicitFactorizationModel(_FactorizationBase):

    def __init__(self,
                 loss='regression',
                 embedding_dim=32,
                 n_iter=10,
                 batch_size=256,
                 l2=0.0,
                 learning_rate=1e-2,
                 optimizer_func=None,
                 use_cuda=False,
                 representation=None,
                 sparse=False,
                 random_state=None):

        assert loss in ('regression',
                        'poisson',
                        'logistic')

        self._loss = loss
        self._embedding_dim = embedding_dim
        self._n_iter = n_iter
        self._learning_rate = learning_rate
        self._batch_size = batch_size
        self._l2 = l2
        self._use_cuda = use_cuda
        self._representation = representation
        self._sparse = sparse
        self._optimizer_func = optimizer_func
        self._random_state = random_state or np.random.RandomState()

        self._num_users = None
        self._num_items = None
        self._net = None
        self._optimizer = None
        self._loss_func = None

        set_seed(self._random_state.randint(-10**8, 10**8),
                 cuda=self._use_cuda)

    def _initialize(self, interactions):

        self._build_net(interactions)

        if self._loss == 'regression':
            self._loss_func = regression_loss
        else:
            raise ValueError('Unknown loss: {}'.format(self._loss))

    def fit(self, interactions, verbose=False):

        user_ids = interactions.user_ids.astype(np.int64)
        item_ids = interactions.item_ids.astype(np.int64)

        if not self._initialized:
            self._initialize(interactions)

        self._check_input(user_ids, item_ids)

        for epoch_num in range(self._n_iter):

            users, items, ratings = shuffle(user_ids,
                                            item_ids,
                                            interactions.ratings,
                                            random_state=self._random_state)

            user_ids_tensor = gpu(torch.from_numpy(users),
                                  self._use_cuda)
            item_ids_tensor = gpu(torch.from_numpy(items),
                                  self._use_cuda)
            ratings_tensor = gpu(torch.from_numpy(ratings),
                                 self._use_cuda)

            epoch_loss = 0.0

            for (minibatch_num,
                 (batch_user,
                  batch_item,
                  batch_rating)) in enumerate(minibatch(user_ids_tensor,
                                                        item_ids_tensor,
                                                        ratings_tensor,
                                                        batch_size=self._batch_size)):

                predictions = self._net(batch_user, batch_item)

                if self._loss == 'poisson':
                    predictions = torch.exp(predictions)

                self._optimizer.zero_grad()

                loss = self._loss_func(batch_rating, predictions)
                epoch_loss += loss.item()

                loss.backward()
                self._optimizer.step()

            epoch_loss /= minibatch_num + 1

            if verbose:
                print('Epoch {}: loss {:.6f}'.format(epoch_num, epoch_loss))

            if np.isnan(epoch_loss) or epoch_loss == 0.0:
                raise ValueError('Degenerate epoch loss: {}'
                                 .format(epoch_loss))

    def predict(self, user_ids, item_ids=None):

        self._check_input(user_ids, item_ids, allow_items_none=True)
        self._net.train(False)

        user_ids, item_ids = _predict_process_ids(user_ids, item_ids,
                                                  self._num_items,
                                                  self._use_cuda)

        out = self._net(user_ids, item_ids)

        if self._loss == 'poisson':
            out = torch.exp(out)
        elif self._loss == 'logistic':
            out = torch.sigmoid(out)

        return cpu(out).detach().numpy().flatten()


# ----------------------------------------------------------------------------- evaluation.py

def mrr_score(model, test, train=None):

    test = test.tocsr()

    if train is not None:
        train = train.tocsr()

    mrrs = []

    for user_id, row in enumerate(test):

        if not len(row.indices):
            continue

        predictions = -model.predict(user_id)

        if train is not None:
            predictions[train[user_id].indices] = FLOAT_MAX

        mrr = (1.0 / st.rankdata(predictions)[row.indices]).mean()

        mrrs.append(mrr)

    return np.array(mrrs)


def _get_precision_recall(predictions, targets, k):

    predictions = predictions[:k]
    num_hit = len(set(predictions).intersection(set(targets)))

    return float(num_hit) / len(predictions), float(num_hit) / len(targets)


def precision_recall_score(model, test, train=None, k=10):

    test = test.tocsr()

    if train is not None:
        train = train.tocsr()

    if np.isscalar(k):
        k = np.array([k])

    precision = []
    recall = []

    for user_id, row in enumerate(test):

        if not len(row.indices):
            continue

        predictions = -model.predict(user_id)

        if train is not None:
            rated = train[user_id].indices
            predictions[rated] = FLOAT_MAX

        predictions = predictions.argsort()

        targets = row.indices

        user_precision, user_recall = zip(*[
            _get_precision_recall(predictions, targets, x)
            for x in k
        ])

        precision.append(user_precision)
        recall.append(user_recall)

    precision = np.array(precision).squeeze()
    recall = np.array(recall).squeeze()

    return precision, recall


def rmse_score(model, test):

    predictions = model.predict(test.user_ids, test.item_ids)

    return np.sqrt(((test.ratings - predictions) ** 2).mean())


# ----------------------------------------------------------------------------- example script

if __name__ == '__main__':
    use_cuda = torch.cuda.is_available()

    dataset = synthetic_interactions(random_state=np.random.RandomState(11))
    train, test = random_train_test_split(dataset, test_percentage=0.25, random_state=np.random.RandomState(42))
    print('interactions: {} train, {} test'.format(len(train), len(test)))

    # implicit, BPR
    implicit_train = Interactions(train.user_ids, train.item_ids,
                                  num_users=train.num_users, num_items=train.num_items)
    model = ImplicitFactorizationModel(loss='bpr', embedding_dim=8, n_iter=4, batch_size=64,
                                       learning_rate=5e-2, use_cuda=use_cuda,
                                       random_state=np.random.RandomState(42))
    model.fit(implicit_train, verbose=True)
    bpr_mrr = mrr_score(model, test, train=train).mean()
    precision, recall = precision_recall_score(model, test, train=train, k=5)
    print('bpr: test MRR {:.4f}, precision@5 {:.4f}, recall@5 {:.4f}'.format(
        bpr_mrr, precision.mean(), recall.mean()))

    # implicit, adaptive hinge; a second fit resumes from the first
    model = ImplicitFactorizationModel(loss='adaptive_hinge', embedding_dim=8, n_iter=2, batch_size=64,
                                       learning_rate=5e-2, use_cuda=use_cuda, num_negative_samples=3,
                                       random_state=np.random.RandomState(43))
    model.fit(implicit_train, verbose=True)
    first_mrr = mrr_score(model, test, train=train).mean()
    model.fit(implicit_train, verbose=True)
    hinge_mrr = mrr_score(model, test, train=train).mean()
    print('adaptive hinge: test MRR {:.4f} after 2 epochs, {:.4f} after 4'.format(first_mrr, hinge_mrr))

    # explicit, regression
    model = ExplicitFactorizationModel(loss='regression', embedding_dim=8, n_iter=4, batch_size=64,
                                       learning_rate=5e-2, l2=1e-6, use_cuda=use_cuda,
                                       random_state=np.random.RandomState(44))
    model.fit(train, verbose=True)
    train_rmse = rmse_score(model, train)
    test_rmse = rmse_score(model, test)
    print('explicit: train RMSE {:.4f}, test RMSE {:.4f}'.format(train_rmse, test_rmse))

    print('done bpr_mrr={:.4f} hinge_mrr={:.4f} rmse={:.4f}'.format(bpr_mrr, hinge_mrr, test_rmse))
