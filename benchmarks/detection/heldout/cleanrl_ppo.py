"""Trains a PPO agent (clipped surrogate objective, GAE, value clipping, entropy bonus, annealed learning rate) on
four synchronous copies of CartPole, following CleanRL's single-file ppo.py: ``device`` is picked from
``torch.cuda.is_available() and args.cuda``, the `Agent` (separate actor and critic MLPs with orthogonal init) is moved
there before its Adam optimizer is built, and the rollout storage (observations, actions, log-probabilities,
rewards, dones, values) is pre-allocated on the device. Each environment step turns the numpy observations and
rewards into device tensors and sends the sampled actions back with ``action.cpu().numpy()``; the advantages are
computed on the device under ``torch.no_grad()``, and the minibatches are taken from the flattened device buffers
with numpy index arrays. The explained variance is computed from ``.cpu().numpy()`` copies.

Modeled on: vwxyzjn/cleanrl, cleanrl/ppo.py at commit fe8d8a03c41a7ef5b523e2e354bd01c363e786bb
(https://github.com/vwxyzjn/cleanrl/blob/fe8d8a03c41a7ef5b523e2e354bd01c363e786bb/cleanrl/ppo.py).

Kept: the `Args` dataclass, `make_env`, `layer_init` and `Agent` as written; the ``__main__`` block as written:
seeding and ``torch.backends.cudnn.deterministic``, ``device = torch.device("cuda" if torch.cuda.is_available() and
args.cuda else "cpu")``, ``Agent(envs).to(device)`` then ``optim.Adam(agent.parameters(), ...)``, the storage
``torch.zeros(...).to(device)`` buffers, ``next_obs = torch.Tensor(next_obs).to(device)``, ``next_done =
torch.zeros(args.num_envs).to(device)``, the rollout loop (``torch.no_grad()`` action sampling, ``envs.step(
action.cpu().numpy())``, ``torch.tensor(reward).to(device).view(-1)``, ``torch.Tensor(...).to(device)`` for the next
observation and done flags, the ``final_info`` episode logging), the GAE computation with ``torch.zeros_like(
rewards).to(device)``, the flattening, the minibatch update loop with ``b_actions.long()[mb_inds]`` indexing by numpy
arrays, KL/clip-fraction statistics, the clipped value loss, ``clip_grad_norm_``, the optional ``target_kl`` break,
the explained variance from ``.cpu().numpy()``, the SummaryWriter calls and the SPS print.

Changed to run here: gymnasium is replaced by a small numpy stand-in (``gym.make``, ``gym.wrappers
.RecordEpisodeStatistics``, ``gym.vector.SyncVectorEnv`` with gymnasium 0.29's autoreset and ``final_info``, and
``gym.spaces``) around a numpy port of gymnasium's CartPole-v1 dynamics; tensorboard's SummaryWriter is a stub that
keeps the last value of each scalar; ``tyro.cli(Args)`` is ``Args(...)`` with the sizes below; the episodic-return
line is printed for every 10th finished episode; the final line reports the last losses and mean episodic return.
Shrunk: 500000 total steps -> 1024 (8 iterations), 128 steps per rollout -> 32, CartPole's 500-step limit -> 100.
"""
import math
import os
import random
import time
import types
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.distributions.categorical import Categorical


# ---- stand-ins for gymnasium (CartPole-v1, RecordEpisodeStatistics, SyncVectorEnv) and tensorboard ------------------
class Discrete:
    def __init__(self, n):
        self.n, self.shape = n, ()


class Box:
    def __init__(self, high, shape):
        self.high, self.shape = high, shape


class CartPoleEnv:
    """gymnasium's CartPole-v1 dynamics (Euler integration), with a time limit."""

    def __init__(self, max_episode_steps=100):
        self.gravity, self.masscart, self.masspole, self.length, self.force_mag, self.tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
        self.total_mass, self.polemass_length = self.masspole + self.masscart, self.masspole * self.length
        self.theta_threshold_radians, self.x_threshold = 12 * 2 * math.pi / 360, 2.4
        self.observation_space = Box(np.inf, (4,))
        self.action_space = Discrete(2)
        self.max_episode_steps, self.np_random = max_episode_steps, np.random.RandomState()

    def reset(self, seed=None):
        if seed is not None:
            self.np_random = np.random.RandomState(seed)
        self.state, self.elapsed = self.np_random.uniform(low=-0.05, high=0.05, size=(4,)), 0
        return np.array(self.state, dtype=np.float32), {}

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        costheta, sintheta = math.cos(theta), math.sin(theta)
        temp = (force + self.polemass_length * theta_dot**2 * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta**2 / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x, x_dot = x + self.tau * x_dot, x_dot + self.tau * xacc
        theta, theta_dot = theta + self.tau * theta_dot, theta_dot + self.tau * thetaacc
        self.state, self.elapsed = (x, x_dot, theta, theta_dot), self.elapsed + 1
        terminated = bool(x < -self.x_threshold or x > self.x_threshold
                          or theta < -self.theta_threshold_radians or theta > self.theta_threshold_radians)
        truncated = self.elapsed >= self.max_episode_steps
        return np.array(self.state, dtype=np.float32), 1.0, terminated, truncated, {}


class RecordEpisodeStatistics:
    def __init__(self, env):
        self.env, self.observation_space, self.action_space = env, env.observation_space, env.action_space

    def reset(self, seed=None):
        self.episode_return, self.episode_length = 0.0, 0
        return self.env.reset(seed=seed)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.episode_return += reward
        self.episode_length += 1
        if terminated or truncated:
            info["episode"] = {"r": np.array([self.episode_return]), "l": np.array([self.episode_length])}
        return obs, reward, terminated, truncated, info


class SyncVectorEnv:
    """gymnasium 0.29's SyncVectorEnv: batched arrays, autoreset, ``infos["final_info"]`` for finished envs."""

    def __init__(self, env_fns):
        self.envs = [fn() for fn in env_fns]
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space

    def reset(self, seed=None):
        obs = [env.reset(seed=None if seed is None else seed + i)[0] for i, env in enumerate(self.envs)]
        return np.stack(obs), {}

    def step(self, actions):
        obs, rewards, terms, truncs, final_info, infos = [], [], [], [], [None] * len(self.envs), {}
        for i, (env, action) in enumerate(zip(self.envs, actions)):
            o, r, term, trunc, info = env.step(action)
            if term or trunc:
                final_info[i] = info
                o, _ = env.reset()
            obs.append(o), rewards.append(r), terms.append(term), truncs.append(trunc)
        if any(x is not None for x in final_info):
            infos["final_info"] = np.array(final_info, dtype=object)
        return np.stack(obs), np.array(rewards), np.array(terms), np.array(truncs), infos

    def close(self):
        pass


gym = types.SimpleNamespace(
    make=lambda env_id, render_mode=None: CartPoleEnv(),
    wrappers=types.SimpleNamespace(RecordEpisodeStatistics=RecordEpisodeStatistics, RecordVideo=None),
    vector=types.SimpleNamespace(SyncVectorEnv=SyncVectorEnv),
    spaces=types.SimpleNamespace(Discrete=Discrete, Box=Box),
)


class SummaryWriter:
    def __init__(self, log_dir):
        self.scalars = {}

    def add_text(self, tag, text):
        pass

    def add_scalar(self, tag, value, step):
        self.scalars[tag] = value

    def close(self):
        pass


# ---- cleanrl/ppo.py -----------------------------------------------------------------------------------------------
@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=False`"""
    cuda: bool = True
    """if toggled, cuda will be enabled by default"""
    track: bool = False
    """if toggled, this experiment will be tracked with Weights and Biases"""
    wandb_project_name: str = "cleanRL"
    """the wandb's project name"""
    wandb_entity: str = None
    """the entity (team) of wandb's project"""
    capture_video: bool = False
    """whether to capture videos of the agent performances (check out `videos` folder)"""

    # Algorithm specific arguments
    env_id: str = "CartPole-v1"
    """the id of the environment"""
    total_timesteps: int = 500000
    """total timesteps of the experiments"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 4
    """the number of parallel game environments"""
    num_steps: int = 128
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """Toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 4
    """the number of mini-batches"""
    update_epochs: int = 4
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """Toggles advantages normalization"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """Toggles whether or not to use a clipped loss for the value function, as per the paper."""
    ent_coef: float = 0.01
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    target_kl: float = None
    """the target KL divergence threshold"""

    # to be filled in runtime
    batch_size: int = 0
    """the batch size (computed in runtime)"""
    minibatch_size: int = 0
    """the mini-batch size (computed in runtime)"""
    num_iterations: int = 0
    """the number of iterations (computed in runtime)"""


def make_env(env_id, idx, capture_video, run_name):
    def thunk():
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        return env

    return thunk


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(np.array(envs.single_observation_space.shape).prod(), 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor = nn.Sequential(
            layer_init(nn.Linear(np.array(envs.single_observation_space.shape).prod(), 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, envs.single_action_space.n), std=0.01),
        )

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        logits = self.actor(x)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


if __name__ == "__main__":
    args = Args(total_timesteps=1024, num_steps=32)
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    if args.track:
        import wandb

        wandb.init(
            project=args.wandb_project_name,
            entity=args.wandb_entity,
            sync_tensorboard=True,
            config=vars(args),
            name=run_name,
            monitor_gym=True,
            save_code=True,
        )
    writer = SummaryWriter(f"runs/{run_name}")
    writer.add_text(
        "hyperparameters",
        "|param|value|\n|-|-|\n%s" % ("\n".join([f"|{key}|{value}|" for key, value in vars(args).items()])),
    )

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic

    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup
    envs = gym.vector.SyncVectorEnv(
        [make_env(args.env_id, i, args.capture_video, run_name) for i in range(args.num_envs)],
    )
    assert isinstance(envs.single_action_space, gym.spaces.Discrete), "only discrete action space is supported"

    agent = Agent(envs).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # ALGO Logic: Storage setup
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs) + envs.single_action_space.shape).to(device)
    logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
    rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
    values = torch.zeros((args.num_steps, args.num_envs)).to(device)

    # TRY NOT TO MODIFY: start the game
    global_step = 0
    episode_returns = []
    start_time = time.time()
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.Tensor(next_obs).to(device)
    next_done = torch.zeros(args.num_envs).to(device)

    for iteration in range(1, args.num_iterations + 1):
        # Annealing the rate if instructed to do so.
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            lrnow = frac * args.learning_rate
            optimizer.param_groups[0]["lr"] = lrnow

        for step in range(0, args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs
            dones[step] = next_done

            # ALGO LOGIC: action logic
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob

            # TRY NOT TO MODIFY: execute the game and log data.
            next_obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
            next_done = np.logical_or(terminations, truncations)
            rewards[step] = torch.tensor(reward).to(device).view(-1)
            next_obs, next_done = torch.Tensor(next_obs).to(device), torch.Tensor(next_done).to(device)

            if "final_info" in infos:
                for info in infos["final_info"]:
                    if info and "episode" in info:
                        episode_returns.append(float(info["episode"]["r"][0]))
                        if len(episode_returns) % 10 == 0:
                            print(f"global_step={global_step}, episodic_return={info['episode']['r']}")
                        writer.add_scalar("charts/episodic_return", info["episode"]["r"], global_step)
                        writer.add_scalar("charts/episodic_length", info["episode"]["l"], global_step)

        # bootstrap value if not done
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards).to(device)
            lastgaelam = 0
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t + 1]
                    nextvalues = values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
            returns = advantages + values

        # flatten the batch
        b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape((-1,) + envs.single_action_space.shape)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)

        # Optimizing the policy and value network
        b_inds = np.arange(args.batch_size)
        clipfracs = []
        for epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, args.batch_size, args.minibatch_size):
                end = start + args.minibatch_size
                mb_inds = b_inds[start:end]

                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions.long()[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():
                    # calculate approx_kl http://joschu.net/blog/kl-approx.html
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs += [((ratio - 1.0).abs() > args.clip_coef).float().mean().item()]

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

                # Policy loss
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                # Value loss
                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(
                        newvalue - b_values[mb_inds],
                        -args.clip_coef,
                        args.clip_coef,
                    )
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss_max = torch.max(v_loss_unclipped, v_loss_clipped)
                    v_loss = 0.5 * v_loss_max.mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

                entropy_loss = entropy.mean()
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
        var_y = np.var(y_true)
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y

        # TRY NOT TO MODIFY: record rewards for plotting purposes
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
        writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", np.mean(clipfracs), global_step)
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        print("SPS:", int(global_step / (time.time() - start_time)))
        writer.add_scalar("charts/SPS", int(global_step / (time.time() - start_time)), global_step)

    envs.close()
    writer.close()
    print(
        f"done value_loss={writer.scalars['losses/value_loss']:.4f} "
        f"policy_loss={writer.scalars['losses/policy_loss']:.6f} "
        f"explained_var={explained_var:.4f} mean_return={np.mean(episode_returns[-10:]):.2f}"
    )
