"""Deep Q-learning with experience replay and a soft-updated target network, on a small pole-balancing simulator.

Modeled on: pytorch/tutorials, intermediate_source/reinforcement_q_learning.py
(https://github.com/pytorch/tutorials/blob/main/intermediate_source/reinforcement_q_learning.py).
Kept: the device logic (``torch.device("cuda" if torch.cuda.is_available() else "mps" if
torch.backends.mps.is_available() else "cpu")`` at module level, ``policy_net`` and ``target_net`` built with
``DQN(...).to(device)``, the target loaded from the policy's ``state_dict()``, the greedy action under
``torch.no_grad()`` and the random one made with ``torch.tensor([[...]], device=device, dtype=torch.long)``, every
observation and reward turned into a tensor with ``torch.tensor(..., device=device)``, the replay memory holding device
tensors, the batch's non-final mask made with ``device=device``, ``next_state_values`` with
``torch.zeros(BATCH_SIZE, device=device)`` filled under ``torch.no_grad()``, ``action.item()`` handed to the
environment, the soft update written through the two ``state_dict()``s and ``load_state_dict``, more episodes when a
GPU is present, the durations kept in a host tensor read with ``.numpy()``). Shrunk: a small cart-pole simulator with
gymnasium's ``reset``/``step``/``action_space`` interface instead of gymnasium (no package), episodes cut at 25
steps, 6 episodes on a GPU and 4 on the CPU instead of 600 and 50, a 32-unit network, batches of 16, the plots
printed instead.
"""

import math
import random
from collections import deque, namedtuple
from itertools import count

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class Discrete:
    """The action space: ``n`` actions, sampled from a seeded generator."""

    def __init__(self, n, seed=0):
        self.n = n
        self._rng = random.Random(seed)

    def sample(self):
        return self._rng.randrange(self.n)


class CartPole:
    """A pole on a cart pushed left or right; +1 reward per step while the pole stays up and the cart on the track."""

    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    theta_threshold, x_threshold, max_steps = 12 * 2 * math.pi / 360, 2.4, 25

    def __init__(self, seed=0):
        self.action_space = Discrete(2, seed)
        self._rng = np.random.default_rng(seed)
        self.state = None
        self.steps = 0

    def reset(self):
        self.state = self._rng.uniform(-0.05, 0.05, size=4)
        self.steps = 0
        return self.state.astype(np.float32), {}

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        total_mass = self.masspole + self.masscart
        polemass_length = self.masspole * self.length
        costheta, sintheta = math.cos(theta), math.sin(theta)
        temp = (force + polemass_length * theta_dot**2 * sintheta) / total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta**2 / total_mass)
        )
        xacc = temp - polemass_length * thetaacc * costheta / total_mass
        x, x_dot = x + self.tau * x_dot, x_dot + self.tau * xacc
        theta, theta_dot = theta + self.tau * theta_dot, theta_dot + self.tau * thetaacc
        self.state = np.array([x, x_dot, theta, theta_dot])
        self.steps += 1
        terminated = bool(abs(x) > self.x_threshold or abs(theta) > self.theta_threshold)
        truncated = self.steps >= self.max_steps
        return self.state.astype(np.float32), 1.0, terminated, truncated, {}


env = CartPole(seed=0)

# if GPU is to be used
device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")

random.seed(0)
torch.manual_seed(0)


Transition = namedtuple("Transition", ("state", "action", "next_state", "reward"))


class ReplayMemory:
    """A bounded buffer of the transitions seen last, sampled at random for training."""

    def __init__(self, capacity):
        self.memory = deque(maxlen=capacity)

    def push(self, *args):
        """Save a transition."""
        self.memory.append(Transition(*args))

    def sample(self, batch_size):
        return random.sample(self.memory, batch_size)

    def __len__(self):
        return len(self.memory)


class DQN(nn.Module):
    """Q(s, .): a state in, one expected return per action out."""

    def __init__(self, n_observations, n_actions):
        super().__init__()
        self.layer1 = nn.Linear(n_observations, 32)
        self.layer2 = nn.Linear(32, 32)
        self.layer3 = nn.Linear(32, n_actions)

    def forward(self, x):
        """One state (for the next action) or a batch (during optimisation)."""
        x = F.relu(self.layer1(x))
        x = F.relu(self.layer2(x))
        return self.layer3(x)


BATCH_SIZE = 16
GAMMA = 0.99
EPS_START = 0.9
EPS_END = 0.01
EPS_DECAY = 50
TAU = 0.005
LR = 3e-4

n_actions = env.action_space.n
state, info = env.reset()
n_observations = len(state)

policy_net = DQN(n_observations, n_actions).to(device)
target_net = DQN(n_observations, n_actions).to(device)
target_net.load_state_dict(policy_net.state_dict())

optimizer = optim.AdamW(policy_net.parameters(), lr=LR, amsgrad=True)
memory = ReplayMemory(1000)


steps_done = 0


def select_action(state):
    """Epsilon-greedy: the policy's best action, or a random one with a probability that decays with the steps."""
    global steps_done
    sample = random.random()
    eps_threshold = EPS_END + (EPS_START - EPS_END) * math.exp(-1.0 * steps_done / EPS_DECAY)
    steps_done += 1
    if sample > eps_threshold:
        with torch.no_grad():
            # the index of the largest expected return
            return policy_net(state).max(1).indices.view(1, 1)
    else:
        return torch.tensor([[env.action_space.sample()]], device=device, dtype=torch.long)


episode_durations = []


def plot_durations(show_result=False):
    """The tutorial's live plot, as a line of text: the durations and their running mean over 3 episodes."""
    durations_t = torch.tensor(episode_durations, dtype=torch.float)
    title = "Result" if show_result else "Training..."
    line = f"{title} durations {durations_t.numpy().astype(int).tolist()}"
    if len(durations_t) >= 3:
        means = durations_t.unfold(0, 3, 1).mean(1).view(-1)
        means = torch.cat((torch.zeros(2), means))
        line += f" mean3 {means[-1].item():.2f}"
    print(line)


def optimize_model():
    """One step of gradient descent on the Huber loss of the Bellman error, over a batch from the replay memory."""
    if len(memory) < BATCH_SIZE:
        return None
    transitions = memory.sample(BATCH_SIZE)
    # a list of Transitions -> a Transition of tuples
    batch = Transition(*zip(*transitions, strict=True))

    # the states after which the episode went on
    non_final_mask = torch.tensor(tuple(s is not None for s in batch.next_state), device=device, dtype=torch.bool)
    non_final_next_states = torch.cat([s for s in batch.next_state if s is not None])
    state_batch = torch.cat(batch.state)
    action_batch = torch.cat(batch.action)
    reward_batch = torch.cat(batch.reward)

    # Q(s_t, a) of the actions taken
    state_action_values = policy_net(state_batch).gather(1, action_batch)

    # V(s_{t+1}) from the older target network; 0 where the episode ended
    next_state_values = torch.zeros(BATCH_SIZE, device=device)
    with torch.no_grad():
        next_state_values[non_final_mask] = target_net(non_final_next_states).max(1).values
    expected_state_action_values = (next_state_values * GAMMA) + reward_batch

    criterion = nn.SmoothL1Loss()
    loss = criterion(state_action_values, expected_state_action_values.unsqueeze(1))

    optimizer.zero_grad()
    loss.backward()
    # in-place gradient clipping
    torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
    optimizer.step()
    return loss


if torch.cuda.is_available() or torch.backends.mps.is_available():  # noqa: SIM108 (the tutorial's if/else)
    num_episodes = 6
else:
    num_episodes = 4

last_loss = None
for _i_episode in range(num_episodes):
    state, info = env.reset()
    state = torch.tensor(state, dtype=torch.float32, device=device).unsqueeze(0)
    for t in count():
        action = select_action(state)
        observation, reward, terminated, truncated, _ = env.step(action.item())
        reward = torch.tensor([reward], device=device)
        done = terminated or truncated

        if terminated:  # noqa: SIM108 (the tutorial's if/else)
            next_state = None
        else:
            next_state = torch.tensor(observation, dtype=torch.float32, device=device).unsqueeze(0)

        memory.push(state, action, next_state, reward)

        state = next_state

        loss = optimize_model()
        if loss is not None:
            last_loss = loss

        # soft update of the target network: theta' <- tau * theta + (1 - tau) * theta'
        target_net_state_dict = target_net.state_dict()
        policy_net_state_dict = policy_net.state_dict()
        for key in policy_net_state_dict:
            target_net_state_dict[key] = policy_net_state_dict[key] * TAU + target_net_state_dict[key] * (1 - TAU)
        target_net.load_state_dict(target_net_state_dict)

        if done:
            episode_durations.append(t + 1)
            plot_durations()
            break

print("Complete")
plot_durations(show_result=True)
print(f"done episodes={num_episodes} steps={steps_done} loss={last_loss.item():.5f}")
