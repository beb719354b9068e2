#!/usr/bin/env python3
"""Trains the Deep Q-Network of "Deep Reinforcement Learning Hands-On" chapter 6 on a small Pong-like Atari stand-in
through the book's wrapper stack (max-and-skip, fire-reset, 84x84 grey frames, channels-first, a 4-frame buffer,
scaled floats), the way PacktPublishing/Deep-Reinforcement-Learning-Hands-On's Chapter06/02_dqn_pong.py does it: a
`--cuda` flag becomes `device`, which `Agent.play_step(net, epsilon, device=device)` and `calc_loss(batch, net,
tgt_net, device=device)` use to move the numpy states and replay batches with `.to(device)`; the best net's
`state_dict` is saved whenever the mean reward improves. Then 03_dqn_play.py loads that file with
`map_location=lambda storage, loc: storage` into a fresh host net and plays one episode greedily.

Modeled on: PacktPublishing/Deep-Reinforcement-Learning-Hands-On, Chapter06/02_dqn_pong.py, Chapter06/03_dqn_play.py,
Chapter06/lib/wrappers.py and Chapter06/lib/dqn_model.py at commit 10cd8978ac4cc29f599b70edcf83025f02c4b22e
(https://github.com/PacktPublishing/Deep-Reinforcement-Learning-Hands-On/tree/10cd8978ac4cc29f599b70edcf83025f02c4b22e).
Kept: 02_dqn_pong.py (the hyper-parameter constants, `Experience` / `ExperienceBuffer` sampling numpy arrays,
`Agent` with `_reset` reading the module-level `env`, `play_step(net, epsilon=0.0, device="cpu")` building
`torch.tensor(state_a).to(device)` and reading `act_v.item()`, `calc_loss(batch, net, tgt_net, device="cpu")` moving
states / actions / rewards / the done mask with `.to(device)`, `gather`, `tgt_net(...).max(1)[0]`, masked terminal
values, `.detach()`, `nn.MSELoss`; `__main__` with `device = torch.device("cuda" if args.cuda else "cpu")`, both nets
built with `.to(device)`, epsilon decay, the reward / speed report and `SummaryWriter` scalars, `torch.save(
net.state_dict(), args.env + "-best.dat")` on a new best mean reward, the replay warm-up, target sync through
`tgt_net.load_state_dict(net.state_dict())`, Adam); 03_dqn_play.py (`DQN` built on the host, `torch.load(args.model,
map_location=lambda storage, loc: storage)`, `torch.tensor(np.array([state]))`, `net(state_v).data.numpy()[0]`,
`np.argmax`, the action counter); wrappers.py (`FireResetEnv`, `MaxAndSkipEnv`, `ProcessFrame84`, `ImageToPyTorch`,
`ScaledFloatFrame`, `BufferWrapper`, `make_env`); dqn_model.py (`DQN` with `_get_conv_out` probing a host zeros
tensor at construction).
Changed to run here: `--cuda` defaults to `torch.cuda.is_available()` (the book passes it on the command line); the
done mask is a `torch.BoolTensor` (PyTorch refuses uint8 index masks now, and the book's second edition made the same
change); `np.array([...], copy=False)` -> `np.asarray([...])` (NumPy 2 raises when a copy is needed); gym, the Atari
ROM, OpenCV and tensorboardX are not installed: `gym` is a small namespace with `Wrapper` / `ObservationWrapper` /
`spaces.Box` / `make`, "PongNoFrameskip-v4" is a 210x160 RGB paddle-and-ball game (a point per return, minus one per
miss, 3 misses end the episode) with the Atari action meanings, `cv2.resize(..., INTER_AREA)` is numpy
nearest-neighbour sampling, and the writer records scalars in a list; the training loop also stops after `MAX_FRAMES`
and the play loop after 300 steps; the best model is saved in a temporary folder; the play script runs with
`--no-visualize` (no window, no frame sleep).
Shrunk: 84x84 frames -> 42x42 (the resize target 84x110 -> 42x55, crop 18:102 -> 9:51); conv widths 32/64/64 -> 8/16/16
and fc 512 -> 64; replay 10000 -> 2000, warm-up 10000 -> 200 frames, target sync every 1000 -> 100 frames, epsilon
decay over 10**5 -> 500 frames, at most 700 frames.
"""
import argparse
import collections
import os
import tempfile
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

OUT_DIR = tempfile.mkdtemp(prefix="dqn_pong_")


# ---------------------------------------------------------------------------------------------------------------------
# stand-ins for gym (+ the Atari Pong ROM), cv2 and tensorboardX
# ---------------------------------------------------------------------------------------------------------------------
class Box:
    def __init__(self, low, high, shape=None, dtype=np.float32):
        shape = shape if shape is not None else np.shape(low)
        self.low = np.broadcast_to(np.asarray(low, dtype=dtype), shape).copy()
        self.high = np.broadcast_to(np.asarray(high, dtype=dtype), shape).copy()
        self.shape, self.dtype = tuple(shape), dtype


class Discrete:
    def __init__(self, n, rng):
        self.n, self.rng = n, rng

    def sample(self):
        return int(self.rng.randint(self.n))


class PongStandIn:
    """210x160 RGB frames, a right-hand paddle (actions NOOP, FIRE, RIGHT=up, LEFT=down, ...) and a bouncing ball."""

    def __init__(self, seed=0):
        self.rng = np.random.RandomState(seed)
        self.observation_space = Box(0, 255, (210, 160, 3), np.uint8)
        self.action_space = Discrete(6, self.rng)
        self.unwrapped = self

    def get_action_meanings(self):
        return ['NOOP', 'FIRE', 'RIGHT', 'LEFT', 'RIGHTFIRE', 'LEFTFIRE']

    def _frame(self):
        frame = np.zeros((210, 160, 3), dtype=np.uint8)
        frame[34:194, :, :] = (144, 72, 17)
        frame[int(self.paddle) - 8:int(self.paddle) + 8, 140:144, :] = (92, 186, 92)
        frame[int(self.by) - 2:int(self.by) + 2, int(self.bx) - 1:int(self.bx) + 1, :] = (236, 236, 236)
        return frame

    def reset(self):
        self.paddle, self.misses, self.served = 110.0, 0, False
        self.bx, self.by, self.vx, self.vy = 40.0, self.rng.uniform(60, 170), 3.0, self.rng.choice([-2.0, 2.0])
        return self._frame()

    def step(self, action):
        reward = 0.0
        self.served = self.served or action in (1, 4, 5)
        if action in (2, 4):
            self.paddle = max(44.0, self.paddle - 4)
        elif action in (3, 5):
            self.paddle = min(184.0, self.paddle + 4)
        if self.served:
            self.bx, self.by = self.bx + self.vx, self.by + self.vy
            if self.by < 38 or self.by > 190:
                self.vy = -self.vy
            if self.bx <= 12:
                self.vx = abs(self.vx)
            if self.bx >= 138:
                if abs(self.by - self.paddle) <= 10:
                    reward, self.vx = 1.0, -abs(self.vx)
                else:
                    reward, self.misses = -1.0, self.misses + 1
                    self.bx, self.by, self.vx = 40.0, self.rng.uniform(60, 170), abs(self.vx)
        return self._frame(), reward, self.misses >= 3, {}


class _Wrapper:
    def __init__(self, env):
        self.env = env
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self.unwrapped = env.unwrapped

    def step(self, action):
        return self.env.step(action)

    def reset(self):
        return self.env.reset()


class _ObservationWrapper(_Wrapper):
    def step(self, action):
        obs, reward, done, info = self.env.step(action)
        return self.observation(obs), reward, done, info

    def reset(self):
        return self.observation(self.env.reset())


gym = SimpleNamespace(Wrapper=_Wrapper, ObservationWrapper=_ObservationWrapper, spaces=SimpleNamespace(Box=Box),
                      make=lambda env_name: PongStandIn())
cv2 = SimpleNamespace(INTER_AREA=3, resize=lambda img, size, interpolation=None: img[
    np.linspace(0, img.shape[0] - 1, size[1]).round().astype(int)][
    :, np.linspace(0, img.shape[1] - 1, size[0]).round().astype(int)])


class SummaryWriter:
    def __init__(self, comment=""):
        self.comment, self.scalars = comment, []

    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, float(value), step))

    def close(self):
        pass


# ---------------------------------------------------------------------------------------------------------------------
# lib/wrappers.py
# ---------------------------------------------------------------------------------------------------------------------
class FireResetEnv(gym.Wrapper):
    def __init__(self, env=None):
        """For environments where the user need to press FIRE for the game to start."""
        super(FireResetEnv, self).__init__(env)
        assert env.unwrapped.get_action_meanings()[1] == 'FIRE'
        assert len(env.unwrapped.get_action_meanings()) >= 3

    def step(self, action):
        return self.env.step(action)

    def reset(self):
        self.env.reset()
        obs, _, done, _ = self.env.step(1)
        if done:
            self.env.reset()
        obs, _, done, _ = self.env.step(2)
        if done:
            self.env.reset()
        return obs


class MaxAndSkipEnv(gym.Wrapper):
    def __init__(self, env=None, skip=4):
        """Return only every `skip`-th frame"""
        super(MaxAndSkipEnv, self).__init__(env)
        # most recent raw observations (for max pooling across time steps)
        self._obs_buffer = collections.deque(maxlen=2)
        self._skip = skip

    def step(self, action):
        total_reward = 0.0
        done = None
        for _ in range(self._skip):
            obs, reward, done, info = self.env.step(action)
            self._obs_buffer.append(obs)
            total_reward += reward
            if done:
                break
        max_frame = np.max(np.stack(self._obs_buffer), axis=0)
        return max_frame, total_reward, done, info

    def reset(self):
        """Clear past frame buffer and init. to first obs. from inner env."""
        self._obs_buffer.clear()
        obs = self.env.reset()
        self._obs_buffer.append(obs)
        return obs


class ProcessFrame84(gym.ObservationWrapper):
    def __init__(self, env=None):
        super(ProcessFrame84, self).__init__(env)
        self.observation_space = gym.spaces.Box(low=0, high=255, shape=(42, 42, 1), dtype=np.uint8)

    def observation(self, obs):
        return ProcessFrame84.process(obs)

    @staticmethod
    def process(frame):
        if frame.size == 210 * 160 * 3:
            img = np.reshape(frame, [210, 160, 3]).astype(np.float32)
        elif frame.size == 250 * 160 * 3:
            img = np.reshape(frame, [250, 160, 3]).astype(np.float32)
        else:
            assert False, "Unknown resolution."
        img = img[:, :, 0] * 0.299 + img[:, :, 1] * 0.587 + img[:, :, 2] * 0.114
        resized_screen = cv2.resize(img, (42, 55), interpolation=cv2.INTER_AREA)
        x_t = resized_screen[9:51, :]
        x_t = np.reshape(x_t, [42, 42, 1])
        return x_t.astype(np.uint8)


class ImageToPyTorch(gym.ObservationWrapper):
    def __init__(self, env):
        super(ImageToPyTorch, self).__init__(env)
        old_shape = self.observation_space.shape
        self.observation_space = gym.spaces.Box(low=0.0, high=1.0, shape=(old_shape[-1], old_shape[0], old_shape[1]),
                                                dtype=np.float32)

    def observation(self, observation):
        return np.moveaxis(observation, 2, 0)


class ScaledFloatFrame(gym.ObservationWrapper):
    def observation(self, obs):
        return np.array(obs).astype(np.float32) / 255.0


class BufferWrapper(gym.ObservationWrapper):
    def __init__(self, env, n_steps, dtype=np.float32):
        super(BufferWrapper, self).__init__(env)
        self.dtype = dtype
        old_space = env.observation_space
        self.observation_space = gym.spaces.Box(old_space.low.repeat(n_steps, axis=0),
                                                old_space.high.repeat(n_steps, axis=0), dtype=dtype)

    def reset(self):
        self.buffer = np.zeros_like(self.observation_space.low, dtype=self.dtype)
        return self.observation(self.env.reset())

    def observation(self, observation):
        self.buffer[:-1] = self.buffer[1:]
        self.buffer[-1] = observation
        return self.buffer


def make_env(env_name):
    env = gym.make(env_name)
    env = MaxAndSkipEnv(env)
    env = FireResetEnv(env)
    env = ProcessFrame84(env)
    env = ImageToPyTorch(env)
    env = BufferWrapper(env, 4)
    return ScaledFloatFrame(env)


# ---------------------------------------------------------------------------------------------------------------------
# lib/dqn_model.py
# ---------------------------------------------------------------------------------------------------------------------
class DQN(nn.Module):
    def __init__(self, input_shape, n_actions):
        super(DQN, self).__init__()

        self.conv = nn.Sequential(
            nn.Conv2d(input_shape[0], 8, kernel_size=8, stride=4),
            nn.ReLU(),
            nn.Conv2d(8, 16, kernel_size=4, stride=2),
            nn.ReLU(),
            nn.Conv2d(16, 16, kernel_size=3, stride=1),
            nn.ReLU()
        )

        conv_out_size = self._get_conv_out(input_shape)
        self.fc = nn.Sequential(
            nn.Linear(conv_out_size, 64),
            nn.ReLU(),
            nn.Linear(64, n_actions)
        )

    def _get_conv_out(self, shape):
        o = self.conv(torch.zeros(1, *shape))
        return int(np.prod(o.size()))

    def forward(self, x):
        conv_out = self.conv(x).view(x.size()[0], -1)
        return self.fc(conv_out)


# ---------------------------------------------------------------------------------------------------------------------
# 02_dqn_pong.py
# ---------------------------------------------------------------------------------------------------------------------
DEFAULT_ENV_NAME = "PongNoFrameskip-v4"
MEAN_REWARD_BOUND = 19.5

GAMMA = 0.99
BATCH_SIZE = 32
REPLAY_SIZE = 2000
LEARNING_RATE = 1e-4
SYNC_TARGET_FRAMES = 100
REPLAY_START_SIZE = 200
MAX_FRAMES = 700

EPSILON_DECAY_LAST_FRAME = 500
EPSILON_START = 1.0
EPSILON_FINAL = 0.02


Experience = collections.namedtuple('Experience', field_names=['state', 'action', 'reward', 'done', 'new_state'])


class ExperienceBuffer:
    def __init__(self, capacity):
        self.buffer = collections.deque(maxlen=capacity)

    def __len__(self):
        return len(self.buffer)

    def append(self, experience):
        self.buffer.append(experience)

    def sample(self, batch_size):
        indices = np.random.choice(len(self.buffer), batch_size, replace=False)
        states, actions, rewards, dones, next_states = zip(*[self.buffer[idx] for idx in indices])
        return np.array(states), np.array(actions), np.array(rewards, dtype=np.float32), \
               np.array(dones, dtype=np.uint8), np.array(next_states)


class Agent:
    def __init__(self, env, exp_buffer):
        self.env = env
        self.exp_buffer = exp_buffer
        self._reset()

    def _reset(self):
        self.state = env.reset()
        self.total_reward = 0.0

    def play_step(self, net, epsilon=0.0, device="cpu"):
        done_reward = None

        if np.random.random() < epsilon:
            action = env.action_space.sample()
        else:
            state_a = np.asarray([self.state])
            state_v = torch.tensor(state_a).to(device)
            q_vals_v = net(state_v)
            _, act_v = torch.max(q_vals_v, dim=1)
            action = int(act_v.item())

        # do step in the environment
        new_state, reward, is_done, _ = self.env.step(action)
        self.total_reward += reward

        exp = Experience(self.state, action, reward, is_done, new_state)
        self.exp_buffer.append(exp)
        self.state = new_state
        if is_done:
            done_reward = self.total_reward
            self._reset()
        return done_reward


def calc_loss(batch, net, tgt_net, device="cpu"):
    states, actions, rewards, dones, next_states = batch

    states_v = torch.tensor(states).to(device)
    next_states_v = torch.tensor(next_states).to(device)
    actions_v = torch.tensor(actions).to(device)
    rewards_v = torch.tensor(rewards).to(device)
    done_mask = torch.BoolTensor(dones).to(device)

    state_action_values = net(states_v).gather(1, actions_v.unsqueeze(-1)).squeeze(-1)
    next_state_values = tgt_net(next_states_v).max(1)[0]
    next_state_values[done_mask] = 0.0
    next_state_values = next_state_values.detach()

    expected_state_action_values = next_state_values * GAMMA + rewards_v
    return nn.MSELoss()(state_action_values, expected_state_action_values)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", default=torch.cuda.is_available(), action="store_true", help="Enable cuda")
    parser.add_argument("--env", default=DEFAULT_ENV_NAME,
                        help="Name of the environment, default=" + DEFAULT_ENV_NAME)
    parser.add_argument("--reward", type=float, default=MEAN_REWARD_BOUND,
                        help="Mean reward boundary for stop of training, default=%.2f" % MEAN_REWARD_BOUND)
    args = parser.parse_args()
    device = torch.device("cuda" if args.cuda else "cpu")

    env = make_env(args.env)

    net = DQN(env.observation_space.shape, env.action_space.n).to(device)
    tgt_net = DQN(env.observation_space.shape, env.action_space.n).to(device)
    writer = SummaryWriter(comment="-" + args.env)
    print(net)

    buffer = ExperienceBuffer(REPLAY_SIZE)
    agent = Agent(env, buffer)
    epsilon = EPSILON_START

    optimizer = optim.Adam(net.parameters(), lr=LEARNING_RATE)
    total_rewards = []
    frame_idx = 0
    ts_frame = 0
    ts = time.time()
    best_mean_reward = None

    while frame_idx < MAX_FRAMES:
        frame_idx += 1
        epsilon = max(EPSILON_FINAL, EPSILON_START - frame_idx / EPSILON_DECAY_LAST_FRAME)

        reward = agent.play_step(net, epsilon, device=device)
        if reward is not None:
            total_rewards.append(reward)
            speed = (frame_idx - ts_frame) / (time.time() - ts)
            ts_frame = frame_idx
            ts = time.time()
            mean_reward = np.mean(total_rewards[-100:])
            print("%d: done %d games, mean reward %.3f, eps %.2f, speed %.2f f/s" % (
                frame_idx, len(total_rewards), mean_reward, epsilon,
                speed
            ))
            writer.add_scalar("epsilon", epsilon, frame_idx)
            writer.add_scalar("speed", speed, frame_idx)
            writer.add_scalar("reward_100", mean_reward, frame_idx)
            writer.add_scalar("reward", reward, frame_idx)
            if best_mean_reward is None or best_mean_reward < mean_reward:
                torch.save(net.state_dict(), os.path.join(OUT_DIR, args.env + "-best.dat"))
                if best_mean_reward is not None:
                    print("Best mean reward updated %.3f -> %.3f, model saved" % (best_mean_reward, mean_reward))
                best_mean_reward = mean_reward
            if mean_reward > args.reward:
                print("Solved in %d frames!" % frame_idx)
                break

        if len(buffer) < REPLAY_START_SIZE:
            continue

        if frame_idx % SYNC_TARGET_FRAMES == 0:
            tgt_net.load_state_dict(net.state_dict())

        optimizer.zero_grad()
        batch = buffer.sample(BATCH_SIZE)
        loss_t = calc_loss(batch, net, tgt_net, device=device)
        loss_t.backward()
        optimizer.step()
    writer.close()

    # -----------------------------------------------------------------------------------------------------------------
    # 03_dqn_play.py
    # -----------------------------------------------------------------------------------------------------------------
    FPS = 25
    parser = argparse.ArgumentParser()
    parser.add_argument("-m", "--model", required=True, help="Model file to load")
    parser.add_argument("-e", "--env", default=DEFAULT_ENV_NAME,
                        help="Environment name to use, default=" + DEFAULT_ENV_NAME)
    parser.add_argument("-r", "--record", help="Directory to store video recording")
    parser.add_argument("--no-visualize", default=True, action='store_false', dest='visualize',
                        help="Disable visualization of the game play")
    args = parser.parse_args(["-m", os.path.join(OUT_DIR, args.env + "-best.dat"), "--no-visualize"])

    env = make_env(args.env)
    if args.record:
        env = gym.wrappers.Monitor(env, args.record)
    net = DQN(env.observation_space.shape, env.action_space.n)
    net.load_state_dict(torch.load(args.model, map_location=lambda storage, loc: storage))

    state = env.reset()
    total_reward = 0.0
    c = collections.Counter()

    for _ in range(300):
        start_ts = time.time()
        if args.visualize:
            env.render()
        state_v = torch.tensor(np.asarray([state]))
        q_vals = net(state_v).data.numpy()[0]
        action = np.argmax(q_vals)
        c[action] += 1
        state, reward, done, _ = env.step(action)
        total_reward += reward
        if done:
            break
        if args.visualize:
            delta = 1/FPS - (time.time() - start_ts)
            if delta > 0:
                time.sleep(delta)
    print("Total reward: %.2f" % total_reward)
    print("Action counts:", c)
    if args.record:
        env.env.close()
    print("done: %d training games, best mean reward %s, play reward %.2f" % (
        len(total_rewards), best_mean_reward, total_reward))
