"""Trains Fujimoto et al.'s Twin Delayed Deep Deterministic policy gradient (TD3) agent on a small continuous-control
task: the agent (an `Actor` and a twin-Q `Critic`, each with a deep-copied target network and its own Adam optimizer)
collects transitions into a numpy `ReplayBuffer` that hands out device tensors on `sample`, acts randomly for the first
`start_timesteps` steps and then with Gaussian exploration noise, and is trained with clipped double-Q targets,
target-policy smoothing, delayed actor updates and Polyak-averaged targets. The policy is evaluated every `eval_freq`
steps on a separately seeded copy of the environment, saved with `policy.save`, and at the end a fresh agent is
created and restored with `policy.load` (the `--load_model` path) and evaluated again.

Modeled on: sfujim/TD3, TD3.py, utils.py and main.py
(https://github.com/sfujim/TD3/blob/34770ccdcb51df6f6c7d85c1ba7e40d71b940d16/TD3.py,
https://github.com/sfujim/TD3/blob/34770ccdcb51df6f6c7d85c1ba7e40d71b940d16/utils.py,
https://github.com/sfujim/TD3/blob/34770ccdcb51df6f6c7d85c1ba7e40d71b940d16/main.py).

Kept: the module-level `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")` of TD3.py; `Actor`,
`Critic` (with `Q1`) and the `TD3` class as written: `Actor(...).to(device)` and `Critic(...).to(device)` followed by
`copy.deepcopy` for the targets and Adam built after the move; `select_action` doing
`torch.FloatTensor(state.reshape(1, -1)).to(device)` and returning `.cpu().data.numpy().flatten()`; `train` with the
target computation under `torch.no_grad()` (`torch.randn_like(action)` noise, clamps, `torch.min` of the twin
targets), the delayed actor update every `policy_freq` iterations and the in-place `target_param.data.copy_(...)`
soft updates; `save`/`load` of the four state dicts with `torch.save`/`torch.load` (no `map_location`) and the
targets re-made with `copy.deepcopy` after loading; utils.py's `ReplayBuffer` keeping numpy arrays and its own
`self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`, with `sample` returning
`torch.FloatTensor(...).to(self.device)` for each field; main.py's `eval_policy`, seeding, `kwargs` construction
(policy noise and noise clip scaled by `max_action`), the random-then-noisy action selection loop,
`done_bool` from `_max_episode_steps`, episode bookkeeping and the evaluate/`np.save`/`policy.save` block.

Changed to run here: gym's HalfCheetah is replaced by `PointMassEnv`, a 2-D point-mass reaching task written in
numpy with the gym API that main.py uses (`seed`, `reset`, `step`, `observation_space`, `action_space` with
`sample`/`seed`/`high`, `_max_episode_steps`); `gym.make(name)` is a small `make_env`; `parser.parse_args()` is
`parser.parse_args([...])` with the sizes below (plus an `--eval_episodes` option); the body of main.py's
`__main__` block is a `run(argv, workdir)` function, called with `--save_model` and then, for a short second run,
with `--load_model default`; `./results` and `./models` live in a temporary folder removed at the end; the
episode line is printed every 5th episode; OurDDPG/DDPG are not included; blank lines inside methods are dropped.
Shrunk: hidden layers 64 instead of 256; 1000 time steps instead of 1e6 with 250 random start steps instead of 25e3;
evaluation every 500 steps over 3 episodes instead of 5e3 and 10; batch size 64 instead of 256; episodes of 50 steps.
"""
import argparse
import copy
import os
import shutil
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# Implementation of Twin Delayed Deep Deterministic Policy Gradients (TD3)
# Paper: https://arxiv.org/abs/1802.09477

class Actor(nn.Module):
	def __init__(self, state_dim, action_dim, max_action):
		super(Actor, self).__init__()
		self.l1 = nn.Linear(state_dim, 64)
		self.l2 = nn.Linear(64, 64)
		self.l3 = nn.Linear(64, action_dim)
		self.max_action = max_action

	def forward(self, state):
		a = F.relu(self.l1(state))
		a = F.relu(self.l2(a))
		return self.max_action * torch.tanh(self.l3(a))

class Critic(nn.Module):
	def __init__(self, state_dim, action_dim):
		super(Critic, self).__init__()
		# Q1 architecture
		self.l1 = nn.Linear(state_dim + action_dim, 64)
		self.l2 = nn.Linear(64, 64)
		self.l3 = nn.Linear(64, 1)
		# Q2 architecture
		self.l4 = nn.Linear(state_dim + action_dim, 64)
		self.l5 = nn.Linear(64, 64)
		self.l6 = nn.Linear(64, 1)

	def forward(self, state, action):
		sa = torch.cat([state, action], 1)
		q1 = F.relu(self.l1(sa))
		q1 = F.relu(self.l2(q1))
		q1 = self.l3(q1)
		q2 = F.relu(self.l4(sa))
		q2 = F.relu(self.l5(q2))
		q2 = self.l6(q2)
		return q1, q2

	def Q1(self, state, action):
		sa = torch.cat([state, action], 1)
		q1 = F.relu(self.l1(sa))
		q1 = F.relu(self.l2(q1))
		q1 = self.l3(q1)
		return q1

class TD3(object):
	def __init__(
		self,
		state_dim,
		action_dim,
		max_action,
		discount=0.99,
		tau=0.005,
		policy_noise=0.2,
		noise_clip=0.5,
		policy_freq=2
	):

		self.actor = Actor(state_dim, action_dim, max_action).to(device)
		self.actor_target = copy.deepcopy(self.actor)
		self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=3e-4)
		self.critic = Critic(state_dim, action_dim).to(device)
		self.critic_target = copy.deepcopy(self.critic)
		self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=3e-4)
		self.max_action = max_action
		self.discount = discount
		self.tau = tau
		self.policy_noise = policy_noise
		self.noise_clip = noise_clip
		self.policy_freq = policy_freq
		self.total_it = 0

	def select_action(self, state):
		state = torch.FloatTensor(state.reshape(1, -1)).to(device)
		return self.actor(state).cpu().data.numpy().flatten()

	def train(self, replay_buffer, batch_size=256):
		self.total_it += 1
		# Sample replay buffer
		state, action, next_state, reward, not_done = replay_buffer.sample(batch_size)
		with torch.no_grad():
			# Select action according to policy and add clipped noise
			noise = (
				torch.randn_like(action) * self.policy_noise
			).clamp(-self.noise_clip, self.noise_clip)
			next_action = (
				self.actor_target(next_state) + noise
			).clamp(-self.max_action, self.max_action)
			# Compute the target Q value
			target_Q1, target_Q2 = self.critic_target(next_state, next_action)
			target_Q = torch.min(target_Q1, target_Q2)
			target_Q = reward + not_done * self.discount * target_Q
		# Get current Q estimates
		current_Q1, current_Q2 = self.critic(state, action)
		# Compute critic loss
		critic_loss = F.mse_loss(current_Q1, target_Q) + F.mse_loss(current_Q2, target_Q)
		# Optimize the critic
		self.critic_optimizer.zero_grad()
		critic_loss.backward()
		self.critic_optimizer.step()
		# Delayed policy updates
		if self.total_it % self.policy_freq == 0:
			# Compute actor losse
			actor_loss = -self.critic.Q1(state, self.actor(state)).mean()
			# Optimize the actor
			self.actor_optimizer.zero_grad()
			actor_loss.backward()
			self.actor_optimizer.step()
			# Update the frozen target models
			for param, target_param in zip(self.critic.parameters(), self.critic_target.parameters()):
				target_param.data.copy_(self.tau * param.data + (1 - self.tau) * target_param.data)
			for param, target_param in zip(self.actor.parameters(), self.actor_target.parameters()):
				target_param.data.copy_(self.tau * param.data + (1 - self.tau) * target_param.data)

	def save(self, filename):
		torch.save(self.critic.state_dict(), filename + "_critic")
		torch.save(self.critic_optimizer.state_dict(), filename + "_critic_optimizer")
		torch.save(self.actor.state_dict(), filename + "_actor")
		torch.save(self.actor_optimizer.state_dict(), filename + "_actor_optimizer")

	def load(self, filename):
		self.critic.load_state_dict(torch.load(filename + "_critic"))
		self.critic_optimizer.load_state_dict(torch.load(filename + "_critic_optimizer"))
		self.critic_target = copy.deepcopy(self.critic)
		self.actor.load_state_dict(torch.load(filename + "_actor"))
		self.actor_optimizer.load_state_dict(torch.load(filename + "_actor_optimizer"))
		self.actor_target = copy.deepcopy(self.actor)

# ----------------------------------------------------------------------------- utils.py

class ReplayBuffer(object):
	def __init__(self, state_dim, action_dim, max_size=int(1e6)):
		self.max_size = max_size
		self.ptr = 0
		self.size = 0
		self.state = np.zeros((max_size, state_dim))
		self.action = np.zeros((max_size, action_dim))
		self.next_state = np.zeros((max_size, state_dim))
		self.reward = np.zeros((max_size, 1))
		self.not_done = np.zeros((max_size, 1))
		self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

	def add(self, state, action, next_state, reward, done):
		self.state[self.ptr] = state
		self.action[self.ptr] = action
		self.next_state[self.ptr] = next_state
		self.reward[self.ptr] = reward
		self.not_done[self.ptr] = 1. - done
		self.ptr = (self.ptr + 1) % self.max_size
		self.size = min(self.size + 1, self.max_size)

	def sample(self, batch_size):
		ind = np.random.randint(0, self.size, size=batch_size)
		return (
			torch.FloatTensor(self.state[ind]).to(self.device),
			torch.FloatTensor(self.action[ind]).to(self.device),
			torch.FloatTensor(self.next_state[ind]).to(self.device),
			torch.FloatTensor(self.reward[ind]).to(self.device),
			torch.FloatTensor(self.not_done[ind]).to(self.device)
		)

# ----------------------------------------------------------------------------- stand-in for gym

class Box(object):
	def __init__(self, low, high, shape):
		self.low, self.high, self.shape = np.full(shape, low), np.full(shape, high), shape
		self._rng = np.random.RandomState()
	def seed(self, seed):
		self._rng = np.random.RandomState(seed)
	def sample(self):
		return self._rng.uniform(self.low, self.high)

class PointMassEnv(object):
	"""A point in the plane, pushed by a bounded force, must reach and stay at a goal."""
	def __init__(self):
		self.observation_space, self.action_space = Box(-np.inf, np.inf, (6,)), Box(-1.0, 1.0, (2,))
		self._max_episode_steps = 50
		self._rng = np.random.RandomState()
	def seed(self, seed):
		self._rng = np.random.RandomState(seed)
	def reset(self):
		self.pos, self.vel, self.goal, self.t = self._rng.uniform(-1, 1, size=2), np.zeros(2), self._rng.uniform(-1, 1, size=2), 0
		return np.concatenate([self.pos, self.vel, self.goal - self.pos])
	def step(self, action):
		action = np.clip(action, -1.0, 1.0)
		self.vel = 0.9 * self.vel + 0.1 * action
		self.pos = np.clip(self.pos + self.vel, -2, 2)
		self.t += 1
		reward = -np.linalg.norm(self.goal - self.pos) - 0.01 * float(np.square(action).sum())
		return np.concatenate([self.pos, self.vel, self.goal - self.pos]), reward, self.t >= self._max_episode_steps, {}

def make_env(env_name):
	assert env_name == "PointMass-v0"
	return PointMassEnv()

# ----------------------------------------------------------------------------- main.py

# Runs policy for X episodes and returns average reward
# A fixed seed is used for the eval environment
def eval_policy(policy, env_name, seed, eval_episodes=10):
	eval_env = make_env(env_name)
	eval_env.seed(seed + 100)

	avg_reward = 0.
	for _ in range(eval_episodes):
		state, done = eval_env.reset(), False
		while not done:
			action = policy.select_action(np.array(state))
			state, reward, done, _ = eval_env.step(action)
			avg_reward += reward

	avg_reward /= eval_episodes

	print("---------------------------------------")
	print(f"Evaluation over {eval_episodes} episodes: {avg_reward:.3f}")
	print("---------------------------------------")
	return avg_reward

def run(argv, workdir):
	parser = argparse.ArgumentParser()
	parser.add_argument("--policy", default="TD3")                  # Policy name (TD3, DDPG or OurDDPG)
	parser.add_argument("--env", default="PointMass-v0")            # OpenAI gym environment name
	parser.add_argument("--seed", default=0, type=int)              # Sets Gym, PyTorch and Numpy seeds
	parser.add_argument("--start_timesteps", default=250, type=int) # Time steps initial random policy is used
	parser.add_argument("--eval_freq", default=500, type=int)       # How often (time steps) we evaluate
	parser.add_argument("--eval_episodes", default=3, type=int)
	parser.add_argument("--max_timesteps", default=1000, type=int)  # Max time steps to run environment
	parser.add_argument("--expl_noise", default=0.1, type=float)    # Std of Gaussian exploration noise
	parser.add_argument("--batch_size", default=64, type=int)       # Batch size for both actor and critic
	parser.add_argument("--discount", default=0.99, type=float)     # Discount factor
	parser.add_argument("--tau", default=0.005, type=float)         # Target network update rate
	parser.add_argument("--policy_noise", default=0.2)              # Noise added to target policy during critic update
	parser.add_argument("--noise_clip", default=0.5)                # Range to clip target policy noise
	parser.add_argument("--policy_freq", default=2, type=int)       # Frequency of delayed policy updates
	parser.add_argument("--save_model", action="store_true")        # Save model and optimizer parameters
	parser.add_argument("--load_model", default="")                 # Model load file name, "" doesn't load, "default" uses file_name
	args = parser.parse_args(argv)

	file_name = f"{args.policy}_{args.env}_{args.seed}"
	print("---------------------------------------")
	print(f"Policy: {args.policy}, Env: {args.env}, Seed: {args.seed}")
	print("---------------------------------------")

	results_dir = os.path.join(workdir, "results")
	models_dir = os.path.join(workdir, "models")
	if not os.path.exists(results_dir):
		os.makedirs(results_dir)

	if args.save_model and not os.path.exists(models_dir):
		os.makedirs(models_dir)

	env = make_env(args.env)

	# Set seeds
	env.seed(args.seed)
	env.action_space.seed(args.seed)
	torch.manual_seed(args.seed)
	np.random.seed(args.seed)

	state_dim = env.observation_space.shape[0]
	action_dim = env.action_space.shape[0]
	max_action = float(env.action_space.high[0])

	kwargs = {
		"state_dim": state_dim,
		"action_dim": action_dim,
		"max_action": max_action,
		"discount": args.discount,
		"tau": args.tau,
	}

	# Initialize policy
	# Target policy smoothing is scaled wrt the action scale
	kwargs["policy_noise"] = args.policy_noise * max_action
	kwargs["noise_clip"] = args.noise_clip * max_action
	kwargs["policy_freq"] = args.policy_freq
	policy = TD3(**kwargs)

	if args.load_model != "":
		policy_file = file_name if args.load_model == "default" else args.load_model
		policy.load(os.path.join(models_dir, policy_file))

	replay_buffer = ReplayBuffer(state_dim, action_dim, max_size=int(1e5))

	# Evaluate untrained policy
	evaluations = [eval_policy(policy, args.env, args.seed, args.eval_episodes)]

	state, done = env.reset(), False
	episode_reward = 0
	episode_timesteps = 0
	episode_num = 0

	for t in range(int(args.max_timesteps)):

		episode_timesteps += 1
		# Select action randomly or according to policy
		if t < args.start_timesteps:
			action = env.action_space.sample()
		else:
			action = (
				policy.select_action(np.array(state))
				+ np.random.normal(0, max_action * args.expl_noise, size=action_dim)
			).clip(-max_action, max_action)
		# Perform action
		next_state, reward, done, _ = env.step(action)
		done_bool = float(done) if episode_timesteps < env._max_episode_steps else 0
		# Store data in replay buffer
		replay_buffer.add(state, action, next_state, reward, done_bool)
		state = next_state
		episode_reward += reward
		# Train agent after collecting sufficient data
		if t >= args.start_timesteps:
			policy.train(replay_buffer, args.batch_size)
		if done:
			# +1 to account for 0 indexing. +0 on ep_timesteps since it will increment +1 even if done=True
			if (episode_num + 1) % 5 == 0:
				print(f"Total T: {t+1} Episode Num: {episode_num+1} Episode T: {episode_timesteps} Reward: {episode_reward:.3f}")
			# Reset environment
			state, done = env.reset(), False
			episode_reward = 0
			episode_timesteps = 0
			episode_num += 1
		# Evaluate episode
		if (t + 1) % args.eval_freq == 0:
			evaluations.append(eval_policy(policy, args.env, args.seed, args.eval_episodes))
			np.save(os.path.join(results_dir, file_name), evaluations)
			if args.save_model: policy.save(os.path.join(models_dir, file_name))

	return policy, evaluations

if __name__ == "__main__":
	workdir = tempfile.mkdtemp()
	try:
		policy, evaluations = run(["--save_model"], workdir)
		# a second, short run that restores the saved agent (main.py's --load_model default)
		restored, restored_evals = run(["--load_model", "default", "--max_timesteps", "300",
										"--start_timesteps", "100", "--eval_freq", "150"], workdir)
		state = np.zeros(6, dtype=np.float32)
		a1 = policy.select_action(state)
		print(f"restored agent evaluations: {[round(float(e), 3) for e in restored_evals]}")
	finally:
		shutil.rmtree(workdir)
	print(f"done eval_reward={evaluations[-1]:.3f} restored_reward={restored_evals[0]:.3f} action0={a1[0]:.3f}")
