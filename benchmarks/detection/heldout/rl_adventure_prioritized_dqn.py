"""Trains deep Q-networks with prioritized experience replay (a naive proportional buffer whose priorities are the
last TD errors, importance-sampling weights annealed by beta, epsilon-greedy exploration decaying with the frame
count, a target network synced every N frames): first an MLP Q-network on CartPole, then a convolutional Q-network on
an Atari-style screen game with PyTorch-layout frames, printing the episode rewards and the mean TD loss.

Modeled on: higgsfield/RL-Adventure, "4.prioritized dqn.ipynb" and common/wrappers.py
(https://github.com/higgsfield/RL-Adventure/blob/master/4.prioritized%20dqn.ipynb,
https://github.com/higgsfield/RL-Adventure/blob/master/common/wrappers.py).

Kept: `USE_CUDA = torch.cuda.is_available()` at module level and the notebook's
`Variable = lambda *args, **kwargs: autograd.Variable(*args, **kwargs).cuda() if USE_CUDA else
autograd.Variable(*args, **kwargs)` through which every batch tensor reaches the device; `current_model` and
`target_model` built on the host and moved with `.cuda()` under `if USE_CUDA:`; Adam over `current_model.parameters()`
made after the move; `update_target` as `target_model.load_state_dict(current_model.state_dict())`; `DQN.act` /
`CnnDQN.act` wrapping the numpy state in `Variable(torch.FloatTensor(...).unsqueeze(0), volatile=True)` (a no-op
keyword now, as in the original there is no `torch.no_grad()`); `compute_td_loss` turning the sampled numpy state,
next state, action, reward, done and importance weights into `Variable(torch.FloatTensor(...))` /
`Variable(torch.LongTensor(action))`, gathering the Q values, the target from `target_model`,
`expected_q_value.detach()`, `prios = loss + 1e-5` handed back to the buffer with `prios.data.cpu().numpy()`, and
`optimizer.step()` after `update_priorities`; `CnnDQN.feature_size` running the conv stack on a host
`autograd.Variable(torch.zeros(1, *self.input_shape))` inside `__init__` (before the move); the numpy-only
`NaivePrioritizedBuffer`; `wrap_pytorch`'s `ImageToPyTorch` HWC->CHW observation wrapper.

Changed to run on a current PyTorch and GPU: `act` returns `q_value.max(1)[1].item()` instead of `.data[0]` (which is
now a 0-dim tensor on the GPU, that would be pushed into the replay buffer and handed to the environment), and the
losses are kept with `loss.item()` instead of `loss.data[0]`.
Changed to run here: the notebook's training cell (model construction with the `if USE_CUDA:` moves, Adam, the buffer,
the frame loop) is a function `run(env, current_model, target_model, ...)` called for both games, and
`compute_td_loss` takes the models, optimizer and buffer as arguments instead of reading notebook globals.
Changed for no gym/Atari: CartPole-v0 is a numpy re-implementation of the classic cart-pole dynamics (200-step
limit), and PongNoFrameskip-v4 with make_atari/wrap_deepmind is a small "catch the falling ball" game giving 36x36x1
uint8 frames (the ImageToPyTorch wrapper kept); the plots are replaced by printed summaries.
Shrunk: 600 CartPole frames with a 64-unit MLP, target sync every 200 frames, epsilon decay 150 and beta over 400
frames; 300 Atari-style frames with replay_initial 64 (the author's 10000), a smaller conv stack for 36x36 frames,
target sync every 100 frames; buffer capacity 1000; batch 32.
"""
import math
import random

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import torch.autograd as autograd


USE_CUDA = torch.cuda.is_available()
Variable = lambda *args, **kwargs: autograd.Variable(*args, **kwargs).cuda() if USE_CUDA else autograd.Variable(*args, **kwargs)  # noqa: E731,E501


# ----------------------------------------------------------------------------- environments (stand-ins for gym)

class Discrete(object):
    def __init__(self, n):
        self.n = n


class Box(object):
    def __init__(self, shape):
        self.shape = shape


class CartPoleEnv(object):
    """The classic cart-pole system, as CartPole-v0 (episodes end after 200 steps)."""

    def __init__(self, seed=0):
        self.gravity, self.masscart, self.masspole, self.length = 9.8, 1.0, 0.1, 0.5
        self.force_mag, self.tau = 10.0, 0.02
        self.theta_threshold_radians = 12 * 2 * math.pi / 360
        self.x_threshold = 2.4
        self.observation_space = Box((4,))
        self.action_space = Discrete(2)
        self.np_random = np.random.RandomState(seed)
        self.state = None
        self.steps = 0

    def reset(self):
        self.state = self.np_random.uniform(low=-0.05, high=0.05, size=(4,))
        self.steps = 0
        return np.array(self.state)

    def step(self, action):
        assert action in (0, 1), action
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        costheta, sintheta = math.cos(theta), math.sin(theta)
        total_mass = self.masspole + self.masscart
        polemass_length = self.masspole * self.length
        temp = (force + polemass_length * theta_dot * theta_dot * sintheta) / total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta * costheta / total_mass))
        xacc = temp - polemass_length * thetaacc * costheta / total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        self.state = (x, x_dot, theta, theta_dot)
        self.steps += 1
        done = bool(x < -self.x_threshold or x > self.x_threshold or theta < -self.theta_threshold_radians
                    or theta > self.theta_threshold_radians or self.steps >= 200)
        return np.array(self.state), 1.0, done, {}


class CatchEnv(object):
    """A ball falls down a 36x36 screen; the 3 actions move the paddle left, not at all, or right."""

    def __init__(self, size=36, seed=0):
        self.size = size
        self.observation_space = Box((size, size, 1))
        self.action_space = Discrete(3)
        self.np_random = np.random.RandomState(seed)

    def _frame(self):
        frame = np.zeros((self.size, self.size, 1), dtype=np.uint8)
        frame[self.ball_y:self.ball_y + 2, self.ball_x:self.ball_x + 2, 0] = 255
        frame[self.size - 2:, max(self.paddle - 3, 0):self.paddle + 3, 0] = 128
        return frame

    def reset(self):
        self.ball_x = self.np_random.randint(0, self.size - 2)
        self.ball_y = 0
        self.paddle = self.size // 2
        return self._frame()

    def step(self, action):
        assert action in (0, 1, 2), action
        self.paddle = int(np.clip(self.paddle + 3 * (action - 1), 3, self.size - 3))
        self.ball_y += 3
        done = self.ball_y >= self.size - 4
        reward = 0.0
        if done:
            reward = 1.0 if abs(self.ball_x + 1 - self.paddle) <= 4 else -1.0
        return self._frame(), reward, done, {}


class ImageToPyTorch(object):
    """Image shape to num_channels x weight x height (common/wrappers.py)."""

    def __init__(self, env):
        self.env = env
        old_shape = env.observation_space.shape
        self.observation_space = Box((old_shape[-1], old_shape[0], old_shape[1]))
        self.action_space = env.action_space

    def observation(self, observation):
        return np.swapaxes(observation, 2, 0)

    def reset(self):
        return self.observation(self.env.reset())

    def step(self, action):
        obs, reward, done, info = self.env.step(action)
        return self.observation(obs), reward, done, info


def wrap_pytorch(env):
    return ImageToPyTorch(env)


# ----------------------------------------------------------------------------- replay buffer

class NaivePrioritizedBuffer(object):
    def __init__(self, capacity, prob_alpha=0.6):
        self.prob_alpha = prob_alpha
        self.capacity = capacity
        self.buffer = []
        self.pos = 0
        self.priorities = np.zeros((capacity,), dtype=np.float32)

    def push(self, state, action, reward, next_state, done):
        assert state.ndim == next_state.ndim
        state = np.expand_dims(state, 0)
        next_state = np.expand_dims(next_state, 0)

        max_prio = self.priorities.max() if self.buffer else 1.0

        if len(self.buffer) < self.capacity:
            self.buffer.append((state, action, reward, next_state, done))
        else:
            self.buffer[self.pos] = (state, action, reward, next_state, done)

        self.priorities[self.pos] = max_prio
        self.pos = (self.pos + 1) % self.capacity

    def sample(self, batch_size, beta=0.4):
        if len(self.buffer) == self.capacity:
            prios = self.priorities
        else:
            prios = self.priorities[:self.pos]

        probs = prios ** self.prob_alpha
        probs /= probs.sum()

        indices = np.random.choice(len(self.buffer), batch_size, p=probs)
        samples = [self.buffer[idx] for idx in indices]

        total = len(self.buffer)
        weights = (total * probs[indices]) ** (-beta)
        weights /= weights.max()
        weights = np.array(weights, dtype=np.float32)

        batch = list(zip(*samples))
        states = np.concatenate(batch[0])
        actions = batch[1]
        rewards = batch[2]
        next_states = np.concatenate(batch[3])
        dones = batch[4]

        return states, actions, rewards, next_states, dones, indices, weights

    def update_priorities(self, batch_indices, batch_priorities):
        for idx, prio in zip(batch_indices, batch_priorities):
            self.priorities[idx] = prio

    def __len__(self):
        return len(self.buffer)


beta_start = 0.4
beta_frames = 400
beta_by_frame = lambda frame_idx: min(1.0, beta_start + frame_idx * (1.0 - beta_start) / beta_frames)  # noqa: E731

epsilon_start = 1.0
epsilon_final = 0.01
epsilon_decay = 150
epsilon_by_frame = lambda frame_idx: epsilon_final + (epsilon_start - epsilon_final) * math.exp(  # noqa: E731
    -1. * frame_idx / epsilon_decay)


# ----------------------------------------------------------------------------- models

class DQN(nn.Module):
    def __init__(self, num_inputs, num_actions):
        super(DQN, self).__init__()
        self.num_actions = num_actions
        self.layers = nn.Sequential(
            nn.Linear(num_inputs, 64),
            nn.ReLU(),
            nn.Linear(64, 64),
            nn.ReLU(),
            nn.Linear(64, num_actions)
        )

    def forward(self, x):
        return self.layers(x)

    def act(self, state, epsilon):
        if random.random() > epsilon:
            state = Variable(torch.FloatTensor(state).unsqueeze(0), volatile=True)
            q_value = self.forward(state)
            action = q_value.max(1)[1].item()
        else:
            action = random.randrange(self.num_actions)
        return action


class CnnDQN(nn.Module):
    def __init__(self, input_shape, num_actions):
        super(CnnDQN, self).__init__()

        self.input_shape = input_shape
        self.num_actions = num_actions

        self.features = nn.Sequential(
            nn.Conv2d(input_shape[0], 8, kernel_size=8, stride=4),
            nn.ReLU(),
            nn.Conv2d(8, 16, kernel_size=4, stride=2),
            nn.ReLU(),
            nn.Conv2d(16, 16, kernel_size=3, stride=1),
            nn.ReLU()
        )

        self.fc = nn.Sequential(
            nn.Linear(self.feature_size(), 64),
            nn.ReLU(),
            nn.Linear(64, self.num_actions)
        )

    def forward(self, x):
        x = self.features(x)
        x = x.view(x.size(0), -1)
        x = self.fc(x)
        return x

    def feature_size(self):
        return self.features(autograd.Variable(torch.zeros(1, *self.input_shape))).view(1, -1).size(1)

    def act(self, state, epsilon):
        if random.random() > epsilon:
            state = Variable(torch.FloatTensor(np.float32(state)).unsqueeze(0), volatile=True)
            q_value = self.forward(state)
            action = q_value.max(1)[1].item()
        else:
            action = random.randrange(self.num_actions)
        return action


def update_target(current_model, target_model):
    target_model.load_state_dict(current_model.state_dict())


def compute_td_loss(current_model, target_model, optimizer, replay_buffer, batch_size, beta, gamma):
    state, action, reward, next_state, done, indices, weights = replay_buffer.sample(batch_size, beta)

    state = Variable(torch.FloatTensor(np.float32(state)))
    next_state = Variable(torch.FloatTensor(np.float32(next_state)))
    action = Variable(torch.LongTensor(action))
    reward = Variable(torch.FloatTensor(reward))
    done = Variable(torch.FloatTensor(done))
    weights = Variable(torch.FloatTensor(weights))

    q_values = current_model(state)
    next_q_values = target_model(next_state)

    q_value = q_values.gather(1, action.unsqueeze(1)).squeeze(1)
    next_q_value = next_q_values.max(1)[0]
    expected_q_value = reward + gamma * next_q_value * (1 - done)

    loss = (q_value - expected_q_value.detach()).pow(2) * weights
    prios = loss + 1e-5
    loss = loss.mean()

    optimizer.zero_grad()
    loss.backward()
    replay_buffer.update_priorities(indices, prios.data.cpu().numpy())
    optimizer.step()

    return loss


def run(env, current_model, target_model, num_frames, replay_initial, target_every, batch_size=32, gamma=0.99):
    if USE_CUDA:
        current_model = current_model.cuda()
        target_model = target_model.cuda()

    optimizer = optim.Adam(current_model.parameters(), lr=0.0005)
    replay_buffer = NaivePrioritizedBuffer(1000)
    update_target(current_model, target_model)

    losses = []
    all_rewards = []
    episode_reward = 0

    state = env.reset()
    for frame_idx in range(1, num_frames + 1):
        epsilon = epsilon_by_frame(frame_idx)
        action = current_model.act(state, epsilon)

        next_state, reward, done, _ = env.step(action)
        replay_buffer.push(state, action, reward, next_state, done)

        state = next_state
        episode_reward += reward

        if done:
            state = env.reset()
            all_rewards.append(episode_reward)
            episode_reward = 0

        if len(replay_buffer) > replay_initial:
            beta = beta_by_frame(frame_idx)
            loss = compute_td_loss(current_model, target_model, optimizer, replay_buffer, batch_size, beta, gamma)
            losses.append(loss.item())

        if frame_idx % 200 == 0:
            print('frame %d. reward: %s loss: %.4f' % (
                frame_idx, np.mean(all_rewards[-10:]) if all_rewards else 0.0, np.mean(losses[-50:])))

        if frame_idx % target_every == 0:
            update_target(current_model, target_model)

    return all_rewards, losses


if __name__ == '__main__':
    np.random.seed(0)
    random.seed(0)
    torch.manual_seed(0)

    # --- CartPole-v0
    env = CartPoleEnv(seed=0)
    current_model = DQN(env.observation_space.shape[0], env.action_space.n)
    target_model = DQN(env.observation_space.shape[0], env.action_space.n)
    rewards, losses = run(env, current_model, target_model, num_frames=600, replay_initial=32, target_every=200)
    print('cartpole episodes %d mean reward %.2f mean loss %.4f' % (len(rewards), np.mean(rewards), np.mean(losses)))

    # --- Atari-style screen
    env = wrap_pytorch(CatchEnv(seed=0))
    current_model = CnnDQN(env.observation_space.shape, env.action_space.n)
    target_model = CnnDQN(env.observation_space.shape, env.action_space.n)
    rewards2, losses2 = run(env, current_model, target_model, num_frames=300, replay_initial=64, target_every=100)
    print('catch episodes %d mean reward %.2f mean loss %.4f' % (len(rewards2), np.mean(rewards2), np.mean(losses2)))

    print('done cartpole_loss=%.4f catch_loss=%.4f' % (np.mean(losses), np.mean(losses2)))
