"""One-step actor-critic with a shared two-headed policy network, on a tiny seeded stand-in for CartPole.

Modeled on: pytorch/examples, reinforcement_learning/actor_critic.py
(https://github.com/pytorch/examples/blob/main/reinforcement_learning/actor_critic.py).
Kept: the device logic, which is the original's host-only one (no device is chosen: the policy stays on the CPU,
each numpy observation becomes a tensor with ``torch.from_numpy(state).float()``, actions are sampled from a
``Categorical`` and read back with ``.item()``, the critic's value read with ``value.item()``, the returns built
with ``torch.tensor(returns)`` and each target with ``torch.tensor([R])``, ``eps`` from ``np.finfo``). Shrunk: a
small environment class with ``reset()``/``step()`` drawing random observations from a seeded numpy generator in
place of gymnasium's CartPole-v1, a 32-unit hidden layer, 6 episodes of at most 20 steps, the settings constants
instead of an argument parser.
"""

from collections import namedtuple
from itertools import count
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

GAMMA = 0.99
SEED = 0
LOG_INTERVAL = 2
EPISODES = 6
MAX_STEPS = 20


class TinyCartPole:
    """A stand-in for CartPole-v1: 4 observations, 2 actions, reward 1 per step until the pole 'falls'.

    The state drifts at random and each action pushes its first component left or right; the episode ends when that
    component leaves [-1, 1] or after ``MAX_STEPS`` steps.
    """

    def __init__(self):
        self.spec = SimpleNamespace(reward_threshold=MAX_STEPS - 1.0)
        self.rng = np.random.default_rng()
        self.state = np.zeros(4, dtype=np.float32)
        self.steps = 0

    def reset(self, seed=None):
        """Start an episode; ``seed`` reseeds the generator. Returns the first observation and an info dict."""
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.state = self.rng.uniform(-0.05, 0.05, size=4).astype(np.float32)
        self.steps = 0
        return self.state.copy(), {}

    def step(self, action):
        """Apply action 0 (push left) or 1 (push right); returns observation, reward, terminated, truncated, info."""
        self.steps += 1
        push = 0.1 if action == 1 else -0.1
        self.state = (self.state + self.rng.normal(0.0, 0.15, size=4)).astype(np.float32)
        self.state[0] += push - 0.5 * self.state[2]
        terminated = bool(abs(self.state[0]) > 1.0)
        truncated = self.steps >= MAX_STEPS
        return self.state.copy(), 1.0, terminated, truncated, {}


env = TinyCartPole()
env.reset(seed=SEED)
torch.manual_seed(SEED)


SavedAction = namedtuple("SavedAction", ["log_prob", "value"])


class Policy(nn.Module):
    """Actor and critic in one model: a shared hidden layer, an action head and a value head."""

    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(4, 32)

        # the actor's head
        self.action_head = nn.Linear(32, 2)

        # the critic's head
        self.value_head = nn.Linear(32, 1)

        # what the episode did, for finish_episode()
        self.saved_actions = []
        self.rewards = []

    def forward(self, x):
        """Return the probability of each action and the estimated value of state ``x``."""
        x = F.relu(self.affine1(x))

        # actor: a probability for each action in state s_t
        action_prob = F.softmax(self.action_head(x), dim=-1)

        # critic: the value of being in state s_t
        state_values = self.value_head(x)

        return action_prob, state_values


model = Policy()
optimizer = optim.Adam(model.parameters(), lr=3e-2)
eps = np.finfo(np.float32).eps.item()


def select_action(state):
    """Sample an action for the numpy observation ``state``, remembering its log-probability and value."""
    state = torch.from_numpy(state).float()
    probs, state_value = model(state)

    # a categorical distribution over the actions' probabilities
    m = Categorical(probs)

    action = m.sample()

    model.saved_actions.append(SavedAction(m.log_prob(action), state_value))

    # left (0) or right (1)
    return action.item()


def finish_episode():
    """Compute the actor and critic losses of the finished episode, take one optimizer step, return the loss."""
    R = 0
    saved_actions = model.saved_actions
    policy_losses = []  # the actor's loss terms
    value_losses = []  # the critic's loss terms
    returns = []  # the discounted returns

    # discounted returns, from the last reward back
    for r in model.rewards[::-1]:
        R = r + GAMMA * R
        returns.insert(0, R)

    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)

    for (log_prob, value), R in zip(saved_actions, returns, strict=True):
        advantage = R - value.item()

        # actor (policy) loss
        policy_losses.append(-log_prob * advantage)

        # critic (value) loss, smooth L1
        value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))

    optimizer.zero_grad()

    loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()

    loss.backward()
    optimizer.step()

    del model.rewards[:]
    del model.saved_actions[:]
    return loss.item()


def main():
    """Run episodes until the running reward passes the threshold or EPISODES have run."""
    running_reward = 10
    loss = 0.0

    for i_episode in count(1):
        state, _ = env.reset()
        ep_reward = 0

        for t in range(1, 10000):  # noqa: B007 (t is read after the loop, by the "Solved!" message)
            action = select_action(state)

            state, reward, terminated, truncated, _ = env.step(action)

            model.rewards.append(reward)
            ep_reward += reward
            if terminated or truncated:
                break

        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward

        loss = finish_episode()

        if i_episode % LOG_INTERVAL == 0:
            print(f"Episode {i_episode}\tLast reward: {ep_reward:.2f}\tAverage reward: {running_reward:.2f}")

        if running_reward > env.spec.reward_threshold:
            print(f"Solved! Running reward is now {running_reward:.2f} and the last episode runs to {t} time steps!")
            break
        if i_episode >= EPISODES:
            break
    print(f"done loss={loss:.4f} running_reward={running_reward:.2f}")


if __name__ == "__main__":
    main()
