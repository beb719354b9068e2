"""Trains a Soft Actor-Critic agent (twin Q critics, tanh-squashed Gaussian policy, automatic entropy tuning) and a
deterministic-policy variant, evaluates them, saves a checkpoint and reloads it for evaluation.

Modeled on: pranz24/pytorch-soft-actor-critic, main.py, sac.py, model.py, replay_memory.py and utils.py
(https://github.com/pranz24/pytorch-soft-actor-critic/blob/c1805660b3961694be54079a355155a5cad492f5/main.py,
https://github.com/pranz24/pytorch-soft-actor-critic/blob/c1805660b3961694be54079a355155a5cad492f5/sac.py,
https://github.com/pranz24/pytorch-soft-actor-critic/blob/c1805660b3961694be54079a355155a5cad492f5/model.py,
https://github.com/pranz24/pytorch-soft-actor-critic/blob/c1805660b3961694be54079a355155a5cad492f5/replay_memory.py,
https://github.com/pranz24/pytorch-soft-actor-critic/blob/c1805660b3961694be54079a355155a5cad492f5/utils.py).

Kept: `self.device = torch.device("cuda" if args.cuda else "cpu")` in `SAC.__init__` (the author's `--cuda` flag
becomes `cuda=torch.cuda.is_available()` in the args namespace, as a user with a GPU would pass it); the critic moved
with `.to(device=self.device)` and its optimizer made right after, the target critic with `.to(self.device)` and
`hard_update`; `target_entropy` from `torch.Tensor(action_space.shape).to(self.device)` and `.item()`, `log_alpha =
torch.zeros(1, requires_grad=True, device=self.device)`; the policies' own `to(device)` overrides that move the plain
tensor attributes `action_scale`, `action_bias` (and the deterministic policy's `noise`) before `super().to`; the
deterministic `sample` returning a CPU `torch.tensor(0.)` log-prob; `select_action` with
`torch.FloatTensor(state).to(self.device).unsqueeze(0)` and `action.detach().cpu().numpy()[0]`; `update_parameters`
turning the numpy replay batch into `torch.FloatTensor(...).to(self.device)` (rewards and masks `.unsqueeze(1)`), the
target under `torch.no_grad()`, `self.alpha = self.log_alpha.exp()`, `alpha_loss = torch.tensor(0.).to(self.device)`
and the CPU `torch.tensor(self.alpha)` when not tuning, `soft_update`/`hard_update` through `.data.copy_`, and the
`.item()` losses; `save_checkpoint` with one `torch.save` of the five state dicts, `load_checkpoint` with
`torch.load(ckpt_path)` (no map_location, as written) and the `eval()`/`train()` switch on `evaluate`.
Added: main.py never calls the checkpoint methods; here the trained agent is saved and a fresh agent loads it with
`evaluate=True` for a last evaluation.

Shrunk: a numpy 2-D point-mass "reach the origin" environment with a gym-like Box action space instead of MuJoCo
HalfCheetah; hidden size 32, batch 32, 300 random start steps, 25-step episodes, 16 episodes for the Gaussian agent
(autotuned alpha) and 8 for the deterministic one, evaluation every 8 episodes over 2 episodes; no TensorBoard
writer; checkpoints in a temporary directory.
"""
import argparse
import itertools
import math
import os
import random
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal
from torch.optim import Adam


# ----------------------------------------------------------------------------- utils.py

def soft_update(target, source, tau):
    for target_param, param in zip(target.parameters(), source.parameters()):
        target_param.data.copy_(target_param.data * (1.0 - tau) + param.data * tau)


def hard_update(target, source):
    for target_param, param in zip(target.parameters(), source.parameters()):
        target_param.data.copy_(param.data)


# ----------------------------------------------------------------------------- replay_memory.py

class ReplayMemory:
    def __init__(self, capacity, seed):
        random.seed(seed)
        self.capacity = capacity
        self.buffer = []
        self.position = 0

    def push(self, state, action, reward, next_state, done):
        if len(self.buffer) < self.capacity:
            self.buffer.append(None)
        self.buffer[self.position] = (state, action, reward, next_state, done)
        self.position = (self.position + 1) % self.capacity

    def sample(self, batch_size):
        batch = random.sample(self.buffer, batch_size)
        state, action, reward, next_state, done = map(np.stack, zip(*batch))
        return state, action, reward, next_state, done

    def __len__(self):
        return len(self.buffer)


# ----------------------------------------------------------------------------- model.py

LOG_SIG_MAX = 2
LOG_SIG_MIN = -20
epsilon = 1e-6


def weights_init_(m):
    if isinstance(m, nn.Linear):
        torch.nn.init.xavier_uniform_(m.weight, gain=1)
        torch.nn.init.constant_(m.bias, 0)


class QNetwork(nn.Module):
    def __init__(self, num_inputs, num_actions, hidden_dim):
        super(QNetwork, self).__init__()
        # Q1
        self.linear1 = nn.Linear(num_inputs + num_actions, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, hidden_dim)
        self.linear3 = nn.Linear(hidden_dim, 1)
        # Q2
        self.linear4 = nn.Linear(num_inputs + num_actions, hidden_dim)
        self.linear5 = nn.Linear(hidden_dim, hidden_dim)
        self.linear6 = nn.Linear(hidden_dim, 1)
        self.apply(weights_init_)

    def forward(self, state, action):
        xu = torch.cat([state, action], 1)
        x1 = F.relu(self.linear1(xu))
        x1 = F.relu(self.linear2(x1))
        x1 = self.linear3(x1)
        x2 = F.relu(self.linear4(xu))
        x2 = F.relu(self.linear5(x2))
        x2 = self.linear6(x2)
        return x1, x2


class GaussianPolicy(nn.Module):
    def __init__(self, num_inputs, num_actions, hidden_dim, action_space=None):
        super(GaussianPolicy, self).__init__()
        self.linear1 = nn.Linear(num_inputs, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, hidden_dim)
        self.mean_linear = nn.Linear(hidden_dim, num_actions)
        self.log_std_linear = nn.Linear(hidden_dim, num_actions)
        self.apply(weights_init_)

        # action rescaling
        if action_space is None:
            self.action_scale = torch.tensor(1.)
            self.action_bias = torch.tensor(0.)
        else:
            self.action_scale = torch.FloatTensor((action_space.high - action_space.low) / 2.)
            self.action_bias = torch.FloatTensor((action_space.high + action_space.low) / 2.)

    def forward(self, state):
        x = F.relu(self.linear1(state))
        x = F.relu(self.linear2(x))
        mean = self.mean_linear(x)
        log_std = self.log_std_linear(x)
        log_std = torch.clamp(log_std, min=LOG_SIG_MIN, max=LOG_SIG_MAX)
        return mean, log_std

    def sample(self, state):
        mean, log_std = self.forward(state)
        std = log_std.exp()
        normal = Normal(mean, std)
        x_t = normal.rsample()  # reparameterization trick
        y_t = torch.tanh(x_t)
        action = y_t * self.action_scale + self.action_bias
        log_prob = normal.log_prob(x_t)
        # Enforcing Action Bound
        log_prob -= torch.log(self.action_scale * (1 - y_t.pow(2)) + epsilon)
        log_prob = log_prob.sum(1, keepdim=True)
        mean = torch.tanh(mean) * self.action_scale + self.action_bias
        return action, log_prob, mean

    def to(self, device):
        self.action_scale = self.action_scale.to(device)
        self.action_bias = self.action_bias.to(device)
        return super(GaussianPolicy, self).to(device)


class DeterministicPolicy(nn.Module):
    def __init__(self, num_inputs, num_actions, hidden_dim, action_space=None):
        super(DeterministicPolicy, self).__init__()
        self.linear1 = nn.Linear(num_inputs, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, hidden_dim)
        self.mean = nn.Linear(hidden_dim, num_actions)
        self.noise = torch.Tensor(num_actions)
        self.apply(weights_init_)

        # action rescaling
        if action_space is None:
            self.action_scale = 1.
            self.action_bias = 0.
        else:
            self.action_scale = torch.FloatTensor((action_space.high - action_space.low) / 2.)
            self.action_bias = torch.FloatTensor((action_space.high + action_space.low) / 2.)

    def forward(self, state):
        x = F.relu(self.linear1(state))
        x = F.relu(self.linear2(x))
        mean = torch.tanh(self.mean(x)) * self.action_scale + self.action_bias
        return mean

    def sample(self, state):
        mean = self.forward(state)
        noise = self.noise.normal_(0., std=0.1)
        noise = noise.clamp(-0.25, 0.25)
        action = mean + noise
        return action, torch.tensor(0.), mean

    def to(self, device):
        self.action_scale = self.action_scale.to(device)
        self.action_bias = self.action_bias.to(device)
        self.noise = self.noise.to(device)
        return super(DeterministicPolicy, self).to(device)


# ----------------------------------------------------------------------------- sac.py

class SAC(object):
    def __init__(self, num_inputs, action_space, args):
        self.gamma = args.gamma
        self.tau = args.tau
        self.alpha = args.alpha

        self.policy_type = args.policy
        self.target_update_interval = args.target_update_interval
        self.automatic_entropy_tuning = args.automatic_entropy_tuning

        self.device = torch.device("cuda" if args.cuda else "cpu")

        self.critic = QNetwork(num_inputs, action_space.shape[0], args.hidden_size).to(device=self.device)
        self.critic_optim = Adam(self.critic.parameters(), lr=args.lr)

        self.critic_target = QNetwork(num_inputs, action_space.shape[0], args.hidden_size).to(self.device)
        hard_update(self.critic_target, self.critic)

        if self.policy_type == "Gaussian":
            # Target Entropy = -dim(A)
            if self.automatic_entropy_tuning is True:
                self.target_entropy = -torch.prod(torch.Tensor(action_space.shape).to(self.device)).item()
                self.log_alpha = torch.zeros(1, requires_grad=True, device=self.device)
                self.alpha_optim = Adam([self.log_alpha], lr=args.lr)

            self.policy = GaussianPolicy(num_inputs, action_space.shape[0], args.hidden_size,
                                         action_space).to(self.device)
            self.policy_optim = Adam(self.policy.parameters(), lr=args.lr)
        else:
            self.alpha = 0
            self.automatic_entropy_tuning = False
            self.policy = DeterministicPolicy(num_inputs, action_space.shape[0], args.hidden_size,
                                              action_space).to(self.device)
            self.policy_optim = Adam(self.policy.parameters(), lr=args.lr)

    def select_action(self, state, evaluate=False):
        state = torch.FloatTensor(state).to(self.device).unsqueeze(0)
        if evaluate is False:
            action, _, _ = self.policy.sample(state)
        else:
            _, _, action = self.policy.sample(state)
        return action.detach().cpu().numpy()[0]

    def update_parameters(self, memory, batch_size, updates):
        state_batch, action_batch, reward_batch, next_state_batch, mask_batch = memory.sample(batch_size=batch_size)

        state_batch = torch.FloatTensor(state_batch).to(self.device)
        next_state_batch = torch.FloatTensor(next_state_batch).to(self.device)
        action_batch = torch.FloatTensor(action_batch).to(self.device)
        reward_batch = torch.FloatTensor(reward_batch).to(self.device).unsqueeze(1)
        mask_batch = torch.FloatTensor(mask_batch).to(self.device).unsqueeze(1)

        with torch.no_grad():
            next_state_action, next_state_log_pi, _ = self.policy.sample(next_state_batch)
            qf1_next_target, qf2_next_target = self.critic_target(next_state_batch, next_state_action)
            min_qf_next_target = torch.min(qf1_next_target, qf2_next_target) - self.alpha * next_state_log_pi
            next_q_value = reward_batch + mask_batch * self.gamma * (min_qf_next_target)
        qf1, qf2 = self.critic(state_batch, action_batch)
        qf1_loss = F.mse_loss(qf1, next_q_value)
        qf2_loss = F.mse_loss(qf2, next_q_value)
        qf_loss = qf1_loss + qf2_loss

        self.critic_optim.zero_grad()
        qf_loss.backward()
        self.critic_optim.step()

        pi, log_pi, _ = self.policy.sample(state_batch)

        qf1_pi, qf2_pi = self.critic(state_batch, pi)
        min_qf_pi = torch.min(qf1_pi, qf2_pi)

        policy_loss = ((self.alpha * log_pi) - min_qf_pi).mean()

        self.policy_optim.zero_grad()
        policy_loss.backward()
        self.policy_optim.step()

        if self.automatic_entropy_tuning:
            alpha_loss = -(self.log_alpha * (log_pi + self.target_entropy).detach()).mean()

            self.alpha_optim.zero_grad()
            alpha_loss.backward()
            self.alpha_optim.step()

            self.alpha = self.log_alpha.exp()
            alpha_tlogs = self.alpha.clone()
        else:
            alpha_loss = torch.tensor(0.).to(self.device)
            alpha_tlogs = torch.tensor(self.alpha)

        if updates % self.target_update_interval == 0:
            soft_update(self.critic_target, self.critic, self.tau)

        return qf1_loss.item(), qf2_loss.item(), policy_loss.item(), alpha_loss.item(), alpha_tlogs.item()

    def save_checkpoint(self, env_name, suffix="", ckpt_path=None):
        if ckpt_path is None:
            ckpt_path = "checkpoints/sac_checkpoint_{}_{}".format(env_name, suffix)
        print('Saving models to {}'.format(os.path.basename(ckpt_path)))
        torch.save({'policy_state_dict': self.policy.state_dict(),
                    'critic_state_dict': self.critic.state_dict(),
                    'critic_target_state_dict': self.critic_target.state_dict(),
                    'critic_optimizer_state_dict': self.critic_optim.state_dict(),
                    'policy_optimizer_state_dict': self.policy_optim.state_dict()}, ckpt_path)

    def load_checkpoint(self, ckpt_path, evaluate=False):
        print('Loading models from {}'.format(os.path.basename(ckpt_path)))
        if ckpt_path is not None:
            checkpoint = torch.load(ckpt_path)
            self.policy.load_state_dict(checkpoint['policy_state_dict'])
            self.critic.load_state_dict(checkpoint['critic_state_dict'])
            self.critic_target.load_state_dict(checkpoint['critic_target_state_dict'])
            self.critic_optim.load_state_dict(checkpoint['critic_optimizer_state_dict'])
            self.policy_optim.load_state_dict(checkpoint['policy_optimizer_state_dict'])

            if evaluate:
                self.policy.eval()
                self.critic.eval()
                self.critic_target.eval()
            else:
                self.policy.train()
                self.critic.train()
                self.critic_target.train()


# ----------------------------------------------------------------------------- a tiny gym-like environment

class Box:
    def __init__(self, low, high, seed=0):
        self.low = np.asarray(low, dtype=np.float32)
        self.high = np.asarray(high, dtype=np.float32)
        self.shape = self.low.shape
        self.rng = np.random.RandomState(seed)

    def seed(self, seed):
        self.rng = np.random.RandomState(seed)

    def sample(self):
        return self.rng.uniform(self.low, self.high).astype(np.float32)


class PointMass:
    """Move a point in the plane towards the origin; the action is a velocity in [-1, 1]^2."""
    _max_episode_steps = 25

    def __init__(self):
        self.observation_space = Box(-np.ones(4) * 5, np.ones(4) * 5)
        self.action_space = Box(-np.ones(2), np.ones(2))
        self.rng = np.random.RandomState(0)

    def seed(self, seed):
        self.rng = np.random.RandomState(seed)

    def _obs(self):
        return np.concatenate([self.pos, self.vel]).astype(np.float32)

    def reset(self):
        self.pos = self.rng.uniform(-2, 2, size=2)
        self.vel = np.zeros(2)
        self.t = 0
        return self._obs()

    def step(self, action):
        action = np.clip(action, -1, 1)
        self.vel = 0.5 * self.vel + 0.5 * action
        self.pos = self.pos + 0.2 * self.vel
        self.t += 1
        dist = float(np.linalg.norm(self.pos))
        reward = -dist - 0.05 * float(np.square(action).sum())
        done = self.t >= self._max_episode_steps or dist < 0.1
        return self._obs(), reward, done, {}

    def close(self):
        pass


# ----------------------------------------------------------------------------- main.py

def run(args, ckpt_dir):
    env = PointMass()
    env.seed(args.seed)
    env.action_space.seed(args.seed)

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)

    agent = SAC(env.observation_space.shape[0], env.action_space, args)
    memory = ReplayMemory(args.replay_size, args.seed)

    total_numsteps = 0
    updates = 0

    for i_episode in itertools.count(1):
        episode_reward = 0
        episode_steps = 0
        done = False
        state = env.reset()
        losses = None

        while not done:
            if args.start_steps > total_numsteps:
                action = env.action_space.sample()
            else:
                action = agent.select_action(state)

            if len(memory) > args.batch_size:
                for i in range(args.updates_per_step):
                    losses = agent.update_parameters(memory, args.batch_size, updates)
                    updates += 1

            next_state, reward, done, _ = env.step(action)
            episode_steps += 1
            total_numsteps += 1
            episode_reward += reward

            mask = 1 if episode_steps == env._max_episode_steps else float(not done)
            memory.push(state, action, reward, next_state, mask)
            state = next_state

        if i_episode > args.num_episodes:
            break

        line = "Episode: {}, total numsteps: {}, episode steps: {}, reward: {}".format(
            i_episode, total_numsteps, episode_steps, round(episode_reward, 2))
        if losses is not None:
            line += ", q1 {:.4f} q2 {:.4f} pi {:.4f} ent {:.4f} alpha {:.4f}".format(*losses)
        print(line)

        if i_episode % args.eval_every == 0 and args.eval is True:
            avg_reward = evaluate(agent, env, args.eval_episodes)
            print("Test Episodes: {}, Avg. Reward: {}".format(args.eval_episodes, round(avg_reward, 2)))

    ckpt_path = os.path.join(ckpt_dir, "sac_checkpoint_{}_{}".format("PointMass", args.policy))
    agent.save_checkpoint("PointMass", ckpt_path=ckpt_path)

    fresh = SAC(env.observation_space.shape[0], env.action_space, args)
    fresh.load_checkpoint(ckpt_path, evaluate=True)
    avg_reward = evaluate(fresh, env, args.eval_episodes)
    print("Reloaded {} agent, Avg. Reward: {}".format(args.policy, round(avg_reward, 2)))
    env.close()
    return avg_reward


def evaluate(agent, env, episodes):
    avg_reward = 0.
    for _ in range(episodes):
        state = env.reset()
        episode_reward = 0
        done = False
        while not done:
            action = agent.select_action(state, evaluate=True)
            next_state, reward, done, _ = env.step(action)
            episode_reward += reward
            state = next_state
        avg_reward += episode_reward
    return avg_reward / episodes


if __name__ == "__main__":
    base = dict(env_name="PointMass", eval=True, gamma=0.99, tau=0.005, lr=0.003, alpha=0.2,
                seed=123456, batch_size=32, hidden_size=32, updates_per_step=1, start_steps=300,
                target_update_interval=1, replay_size=100000, cuda=torch.cuda.is_available(),
                eval_every=8, eval_episodes=2)
    with tempfile.TemporaryDirectory() as ckpt_dir:
        gauss = run(argparse.Namespace(policy="Gaussian", automatic_entropy_tuning=True, num_episodes=16, **base),
                    ckpt_dir)
        det = run(argparse.Namespace(policy="Deterministic", automatic_entropy_tuning=False, num_episodes=8, **base),
                  ckpt_dir)
    print("done: gaussian {:.2f}, deterministic {:.2f}".format(gauss, det))
