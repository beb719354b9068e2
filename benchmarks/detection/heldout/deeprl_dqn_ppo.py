"""Runs ShangtongZhang/DeepRL's DQN and PPO agents on a built-in CartPole clone, saves the DQN agent, reloads it into a
fresh agent and evaluates it, as the repository does: the device is the class attribute ``Config.DEVICE`` set by
``select_device(gpu_id)``, every network ends ``__init__`` with ``self.to(Config.DEVICE)`` and wraps its input with
the ``tensor()`` helper (``torch.from_numpy(...).to(Config.DEVICE)``), agents turn rewards, masks, actions and sampled
batch indices into device tensors with ``tensor(...)``, actions go back to the environment through ``to_np``
(``.cpu().detach().numpy()``), rollouts live in a ``Storage`` of device tensors joined with ``torch.cat``, the DQN
target network is synchronised with ``load_state_dict``, and ``BaseAgent.load`` uses ``torch.load(...,
map_location=lambda storage, loc: storage)``.

Modeled on: ShangtongZhang/DeepRL, examples.py, deep_rl/agent/{BaseAgent,DQN_agent,PPO_agent}.py,
deep_rl/network/{network_utils,network_bodies,network_heads}.py, deep_rl/component/{replay,envs}.py and
deep_rl/utils/{config,torch_utils,misc,normalizer,schedule}.py at commit c0968b5c046314af09944843cdf06f4100c6bb95
(https://github.com/ShangtongZhang/DeepRL/blob/c0968b5c046314af09944843cdf06f4100c6bb95/deep_rl/agent/PPO_agent.py,
https://github.com/ShangtongZhang/DeepRL/blob/c0968b5c046314af09944843cdf06f4100c6bb95/deep_rl/utils/torch_utils.py).

Kept: `Config`, `select_device`, `tensor`, `to_np`, `random_seed`, `layer_init`, `FCBody`, `DummyBody`, `VanillaNet`,
`CategoricalActorCriticNet`, `Storage`, `UniformReplay`, `LinearSchedule`, `random_sample`, `RescaleNormalizer`,
`BaseAgent` (save/load/eval), the synchronous `BaseActor`, `DQNActor`/`DQNAgent` (shared-memory network, target
network, ``config.lock``), `PPOAgent` (GAE, KL-gated actor step with separate actor/critic optimizers), `run_steps`.

Changed to run here: gym is replaced by a numpy CartPole behind the `Task`/`DummyVecEnv`/`OriginalReturnWrapper`
interface; the tensorboard logger only logs; ``select_device(0 if torch.cuda.is_available() else -1)`` replaces the
hard-coded ``select_device(-1)``; replay and actor run in-process (``async_replay=False``, ``async_actor=False``); PPO
uses ppo_continuous's settings with the categorical head and without MeanStdNormalizer; A2C, noisy/double/prioritized
DQN variants are left out; files go to a temporary folder.
Shrunk: 64-unit bodies, DQN 600 steps (300 exploration), PPO 128-step rollouts for 512 steps, 3 eval episodes.
"""
import logging
import pickle
import shutil
import tempfile
from collections import namedtuple

import numpy as np
import torch
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

logging.basicConfig(format='%(name)s - %(levelname)s: %(message)s', level=logging.INFO)

class RescaleNormalizer:
    def __init__(self, coef=1.0):
        self.read_only, self.coef = False, coef
    def set_read_only(self):
        self.read_only = True
    def unset_read_only(self):
        self.read_only = False
    def state_dict(self):
        return None
    def load_state_dict(self, _):
        return
    def __call__(self, x):
        if not isinstance(x, torch.Tensor):
            x = np.asarray(x)
        return self.coef * x

class Config:
    DEVICE = torch.device('cpu')
    def __init__(self):
        self.task_fn = self.optimizer_fn = self.network_fn = self.replay_fn = self.discount = self.gradient_clip = None
        self.target_network_update_freq = self.exploration_steps = None
        self.tag, self.num_workers, self.entropy_weight, self.use_gae, self.gae_tau = 'vanilla', 1, 0, False, 1.0
        self.state_normalizer, self.reward_normalizer = RescaleNormalizer(), RescaleNormalizer()
        self.max_steps, self.rollout_length, self.optimization_epochs, self.mini_batch_size = 0, None, 4, 64
        self.sgd_update_frequency, self.random_action_prob, self.__eval_env, self.log_interval = None, None, None, 1000
        self.save_interval, self.eval_interval, self.eval_episodes, self.async_actor, self.n_step = 0, 0, 10, True, 1
    @property
    def eval_env(self):
        return self.__eval_env
    @eval_env.setter
    def eval_env(self, env):
        self.__eval_env = env
        self.state_dim, self.action_dim, self.task_name = env.state_dim, env.action_dim, env.name
    def merge(self, config_dict=None):
        for key in config_dict.keys():
            setattr(self, key, config_dict[key])

def select_device(gpu_id):
    if gpu_id >= 0:
        Config.DEVICE = torch.device('cuda:%d' % (gpu_id))
    else:
        Config.DEVICE = torch.device('cpu')

def tensor(x):
    if isinstance(x, torch.Tensor):
        return x
    x = np.asarray(x, dtype=np.float32)
    x = torch.from_numpy(x).to(Config.DEVICE)
    return x

def to_np(t):
    return t.cpu().detach().numpy()

def random_seed(seed=None):
    np.random.seed(seed)
    torch.manual_seed(np.random.randint(int(1e6)))

def close_obj(obj):
    if hasattr(obj, 'close'):
        obj.close()

def random_sample(indices, batch_size):
    indices = np.asarray(np.random.permutation(indices))
    batches = indices[:len(indices) // batch_size * batch_size].reshape(-1, batch_size)
    for batch in batches:
        yield batch
    r = len(indices) % batch_size
    if r:
        yield indices[-r:]

class LinearSchedule:
    def __init__(self, start, end=None, steps=None):
        if end is None:
            end, steps = start, 1
        self.inc, self.current, self.end = (end - start) / float(steps), start, end
        self.bound = min if end > start else max
    def __call__(self, steps=1):
        val, self.current = self.current, self.bound(self.current + self.inc * steps, self.end)
        return val

def epsilon_greedy(epsilon, x):
    random_actions, greedy_actions = np.random.randint(x.shape[1], size=x.shape[0]), np.argmax(x, axis=-1)
    return np.where(np.random.rand(x.shape[0]) < epsilon, random_actions, greedy_actions)

class CartPole:
    state_dim, action_dim = 4, 2  # numpy port of gym's CartPole-v0 dynamics, 200-step limit
    def __init__(self, seed):
        self.rng, self.state, self.t = np.random.RandomState(seed), None, 0
    def reset(self):
        self.state, self.t = self.rng.uniform(-0.05, 0.05, size=4), 0
        return self.state.astype(np.float32)
    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        cos, sin = np.cos(theta), np.sin(theta)
        temp = ((10.0 if int(action) == 1 else -10.0) + 0.05 * theta_dot ** 2 * sin) / 1.1
        thetaacc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        xacc = temp - 0.05 * thetaacc * cos / 1.1
        self.state, self.t = self.state + 0.02 * np.array([x_dot, xacc, theta_dot, thetaacc]), self.t + 1
        done = bool(abs(self.state[0]) > 2.4 or abs(self.state[2]) > 0.2095 or self.t >= 200)
        return self.state.astype(np.float32), 1.0, done, {}

class Task:
    def __init__(self, name, num_envs=1, seed=None):  # DummyVecEnv of OriginalReturnWrapper(CartPole) envs
        seed = np.random.randint(int(1e9)) if seed is None else seed
        self.envs, self.total_rewards = [CartPole(seed + i) for i in range(num_envs)], [0.0] * num_envs
        self.name, self.state_dim, self.action_dim = name, CartPole.state_dim, CartPole.action_dim
    def reset(self):
        return np.stack([env.reset() for env in self.envs])
    def step(self, actions):
        data = []
        for i, (env, action) in enumerate(zip(self.envs, actions)):
            obs, rew, done, info = env.step(action)
            self.total_rewards[i] += rew
            info['episodic_return'] = self.total_rewards[i] if done else None
            if done:
                obs, self.total_rewards[i] = env.reset(), 0.0
            data.append([obs, rew, done, info])
        obs, rew, done, info = zip(*data)
        return np.stack(obs), np.asarray(rew), np.asarray(done), info

def layer_init(layer, w_scale=1.0):
    nn.init.orthogonal_(layer.weight.data)
    layer.weight.data.mul_(w_scale)
    nn.init.constant_(layer.bias.data, 0)
    return layer

class FCBody(nn.Module):
    def __init__(self, state_dim, hidden_units=(64, 64), gate=F.relu):
        super(FCBody, self).__init__()
        dims = (state_dim,) + hidden_units
        self.layers = nn.ModuleList([layer_init(nn.Linear(dim_in, dim_out)) for dim_in, dim_out in
                                     zip(dims[:-1], dims[1:])])
        self.gate, self.feature_dim = gate, dims[-1]
    def forward(self, x):
        for layer in self.layers:
            x = self.gate(layer(x))
        return x

class DummyBody(nn.Module):
    def __init__(self, state_dim):
        super(DummyBody, self).__init__()
        self.feature_dim = state_dim
    def forward(self, x):
        return x

class VanillaNet(nn.Module):
    def __init__(self, output_dim, body):
        super(VanillaNet, self).__init__()
        self.fc_head, self.body = layer_init(nn.Linear(body.feature_dim, output_dim)), body
        self.to(Config.DEVICE)
    def forward(self, x):
        phi = self.body(tensor(x))
        return dict(q=self.fc_head(phi))

class CategoricalActorCriticNet(nn.Module):
    def __init__(self, state_dim, action_dim, phi_body=None, actor_body=None, critic_body=None):
        super(CategoricalActorCriticNet, self).__init__()
        if phi_body is None: phi_body = DummyBody(state_dim)  # noqa: E701
        if actor_body is None: actor_body = DummyBody(phi_body.feature_dim)  # noqa: E701
        if critic_body is None: critic_body = DummyBody(phi_body.feature_dim)  # noqa: E701
        self.phi_body, self.actor_body, self.critic_body = phi_body, actor_body, critic_body
        self.fc_action = layer_init(nn.Linear(actor_body.feature_dim, action_dim), 1e-3)
        self.fc_critic = layer_init(nn.Linear(critic_body.feature_dim, 1), 1e-3)
        self.actor_params = list(self.actor_body.parameters()) + list(self.fc_action.parameters())
        self.critic_params = list(self.critic_body.parameters()) + list(self.fc_critic.parameters())
        self.phi_params = list(self.phi_body.parameters())
        self.to(Config.DEVICE)
    def forward(self, obs, action=None):
        obs = tensor(obs)
        phi = self.phi_body(obs)
        logits = self.fc_action(self.actor_body(phi))
        v = self.fc_critic(self.critic_body(phi))
        dist = torch.distributions.Categorical(logits=logits)
        if action is None:
            action = dist.sample()
        log_prob = dist.log_prob(action).unsqueeze(-1)
        entropy = dist.entropy().unsqueeze(-1)
        return {'action': action, 'log_pi_a': log_prob, 'entropy': entropy, 'v': v}

Transition = namedtuple('Transition', ['state', 'action', 'reward', 'next_state', 'mask'])

class Storage:
    def __init__(self, memory_size, keys=None):
        if keys is None:
            keys = []
        self.keys = keys + ['state', 'action', 'reward', 'mask', 'v', 'q', 'pi', 'log_pi', 'entropy',
                            'advantage', 'ret', 'q_a', 'log_pi_a', 'mean', 'next_state']
        self.memory_size = memory_size
        self.reset()
    def feed(self, data):
        for k, v in data.items():
            if k not in self.keys:
                raise RuntimeError('Undefined key')
            getattr(self, k).append(v)
    def placeholder(self):
        for k in self.keys:
            if len(getattr(self, k)) == 0:
                setattr(self, k, [None] * self.memory_size)
    def reset(self):
        for key in self.keys:
            setattr(self, key, [])
        self.pos, self._size = 0, 0
    def extract(self, keys):
        data = map(lambda x: torch.cat(x, dim=0), [getattr(self, k)[:self.memory_size] for k in keys])
        return namedtuple('Entry', keys)(*list(data))

class UniformReplay(Storage):
    TransitionCLS = Transition
    def __init__(self, memory_size, batch_size, n_step=1, discount=1, history_length=1, keys=None):
        super(UniformReplay, self).__init__(memory_size, keys)
        self.batch_size, self.n_step, self.discount, self.history_length = batch_size, n_step, discount, history_length
    def feed(self, data):
        for k, vs in data.items():
            storage, pos, size = getattr(self, k), self.pos, self.size()
            for v in vs:
                if pos >= len(storage):
                    storage.append(v)
                    size += 1
                else:
                    storage[self.pos] = v
                pos = (pos + 1) % self.memory_size
        self.pos, self._size = pos, size
    def sample(self, batch_size=None):
        batch_size = self.batch_size if batch_size is None else batch_size
        sampled_data = []
        while len(sampled_data) < batch_size:
            transition = self.construct_transition(np.random.randint(0, self.size()))
            if transition is not None:
                sampled_data.append(transition)
        return Transition(*list(map(lambda x: np.asarray(x), zip(*sampled_data))))
    def construct_transition(self, index):
        if not (index + self.n_step < self.pos or index >= self.pos and index + self.n_step < self.size()):
            return None  # valid_index with history_length == 1
        s_end = index  # history_length == 1: no frame stack
        state, next_state = np.array(self.state[s_end]), np.array(self.state[s_end + self.n_step])
        reward, mask = self.reward[s_end:s_end + self.n_step], self.mask[s_end:s_end + self.n_step]
        cum_r, cum_mask = 0, 1
        for i in reversed(np.arange(self.n_step)):
            cum_r = reward[i] + mask[i] * self.discount * cum_r
            cum_mask = cum_mask and mask[i]
        return Transition(state=state, action=self.action[s_end], reward=cum_r, next_state=next_state, mask=cum_mask)
    def size(self):
        return self._size

class BaseAgent:
    def __init__(self, config):
        self.config, self.logger, self.task_ind = config, logging.getLogger(config.tag), 0
    def close(self):
        close_obj(self.task)
    def save(self, filename):
        torch.save(self.network.state_dict(), '%s.model' % (filename))
        with open('%s.stats' % (filename), 'wb') as f:
            pickle.dump(self.config.state_normalizer.state_dict(), f)
    def load(self, filename):
        state_dict = torch.load('%s.model' % filename, map_location=lambda storage, loc: storage)
        self.network.load_state_dict(state_dict)
        with open('%s.stats' % (filename), 'rb') as f:
            self.config.state_normalizer.load_state_dict(pickle.load(f))
    def eval_episode(self):
        env, state = self.config.eval_env, self.config.eval_env.reset()
        while True:
            action = self.eval_step(state)
            state, reward, done, info = env.step(action)
            ret = info[0]['episodic_return']
            if ret is not None:
                break
        return ret
    def eval_episodes(self):
        episodic_returns = [np.sum(self.eval_episode()) for ep in range(self.config.eval_episodes)]
        self.logger.info('steps %d, episodic_return_test %.2f(%.2f)' % (
            self.total_steps, np.mean(episodic_returns), np.std(episodic_returns) / np.sqrt(len(episodic_returns))))
        return {'episodic_return_test': np.mean(episodic_returns)}
    def record_online_return(self, info, offset=0):
        if isinstance(info, dict):
            if info['episodic_return'] is not None:  # logger.add_scalar('episodic_return_train', ...)
                self.episodic_returns = getattr(self, 'episodic_returns', []) + [info['episodic_return']]
        elif isinstance(info, tuple):
            for i, info_ in enumerate(info):
                self.record_online_return(info_, i)
        else:
            raise NotImplementedError
    def switch_task(self):
        return  # config.tasks is False

class BaseActor:
    """The ``async_actor=False`` path of the torch.multiprocessing actor."""
    def __init__(self, config):
        self.config, self._state, self._network, self._total_steps = config, None, None, 0
        self.start, self.step, self.close = (lambda: None), self._sample, (lambda: None)
        self._task = config.task_fn()
    def _sample(self):
        transitions = []
        for _ in range(self.config.sgd_update_frequency):
            transition = self._transition()
            if transition is not None:
                transitions.append(transition)
        return transitions
    def set_network(self, net):
        self._network = net

class DQNActor(BaseActor):
    def __init__(self, config):
        BaseActor.__init__(self, config)
        self.config = config
        self.start()
    def compute_q(self, prediction):
        q_values = to_np(prediction['q'])
        return q_values
    def _transition(self):
        if self._state is None:
            self._state = self._task.reset()
        config = self.config
        with config.lock:
            prediction = self._network(config.state_normalizer(self._state))
        q_values = self.compute_q(prediction)
        epsilon = 1 if self._total_steps < config.exploration_steps else config.random_action_prob()
        action = epsilon_greedy(epsilon, q_values)
        next_state, reward, done, info = self._task.step(action)
        entry = [self._state, action, reward, next_state, done, info]
        self._total_steps, self._state = self._total_steps + 1, next_state
        return entry

class DQNAgent(BaseAgent):
    def __init__(self, config):
        BaseAgent.__init__(self, config)
        self.config, config.lock = config, mp.Lock()
        self.replay = config.replay_fn()
        self.actor = DQNActor(config)
        self.network = config.network_fn()
        self.network.share_memory()
        self.target_network = config.network_fn()
        self.target_network.load_state_dict(self.network.state_dict())
        self.optimizer = config.optimizer_fn(self.network.parameters())
        self.actor.set_network(self.network)
        self.total_steps = 0
    def close(self):
        close_obj(self.replay)
        close_obj(self.actor)
    def eval_step(self, state):
        self.config.state_normalizer.set_read_only()
        state = self.config.state_normalizer(state)
        q = self.network(state)['q']
        action = to_np(q.argmax(-1))
        self.config.state_normalizer.unset_read_only()
        return action
    def reduce_loss(self, loss):
        return loss.pow(2).mul(0.5).mean()
    def compute_loss(self, transitions):
        config = self.config
        states = self.config.state_normalizer(transitions.state)
        next_states = self.config.state_normalizer(transitions.next_state)
        with torch.no_grad():
            q_next = self.target_network(next_states)['q'].detach().max(1)[0]  # config.double_q is False
        masks, rewards = tensor(transitions.mask), tensor(transitions.reward)
        q_target = rewards + self.config.discount ** config.n_step * q_next * masks
        actions = tensor(transitions.action).long()
        q = self.network(states)['q']
        q = q.gather(1, actions.unsqueeze(-1)).squeeze(-1)
        return q_target - q
    def step(self):
        config = self.config
        transitions = self.actor.step()
        for states, actions, rewards, next_states, dones, info in transitions:
            self.record_online_return(info)
            self.total_steps += 1
            self.replay.feed(dict(state=np.array([s for s in states]), action=actions,
                                  reward=[config.reward_normalizer(r) for r in rewards],
                                  mask=1 - np.asarray(dones, dtype=np.int32)))
        if self.total_steps > self.config.exploration_steps:
            transitions = self.replay.sample()
            loss = self.reduce_loss(self.compute_loss(transitions))
            self.optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(self.network.parameters(), self.config.gradient_clip)
            with config.lock:
                self.optimizer.step()
        if self.total_steps / self.config.sgd_update_frequency % self.config.target_network_update_freq == 0:
            self.target_network.load_state_dict(self.network.state_dict())

class PPOAgent(BaseAgent):
    def __init__(self, config):
        BaseAgent.__init__(self, config)
        self.config = config
        self.task = config.task_fn()
        self.network = config.network_fn()
        self.actor_opt = config.actor_opt_fn(self.network.actor_params)
        self.critic_opt = config.critic_opt_fn(self.network.critic_params)
        self.total_steps = 0
        self.states = config.state_normalizer(self.task.reset())
    def step(self):
        config = self.config
        storage = Storage(config.rollout_length)
        states = self.states
        for _ in range(config.rollout_length):
            prediction = self.network(states)
            next_states, rewards, terminals, info = self.task.step(to_np(prediction['action']))
            self.record_online_return(info)
            rewards = config.reward_normalizer(rewards)
            next_states = config.state_normalizer(next_states)
            storage.feed(prediction)
            storage.feed({'reward': tensor(rewards).unsqueeze(-1), 'mask': tensor(1 - terminals).unsqueeze(-1),
                          'state': tensor(states)})
            states = next_states
            self.total_steps += config.num_workers
        self.states = states
        prediction = self.network(states)
        storage.feed(prediction)
        storage.placeholder()
        advantages = tensor(np.zeros((config.num_workers, 1)))
        returns = prediction['v'].detach()
        for i in reversed(range(config.rollout_length)):
            returns = storage.reward[i] + config.discount * storage.mask[i] * returns
            td_error = storage.reward[i] + config.discount * storage.mask[i] * storage.v[i + 1] - storage.v[i]
            advantages = advantages * config.gae_tau * config.discount * storage.mask[i] + td_error
            storage.advantage[i] = advantages.detach()
            storage.ret[i] = returns.detach()
        entries = storage.extract(['state', 'action', 'log_pi_a', 'ret', 'advantage'])
        EntryCLS = entries.__class__
        entries = EntryCLS(*list(map(lambda x: x.detach(), entries)))
        entries.advantage.copy_((entries.advantage - entries.advantage.mean()) / entries.advantage.std())
        for _ in range(config.optimization_epochs):
            sampler = random_sample(np.arange(entries.state.size(0)), config.mini_batch_size)
            for batch_indices in sampler:
                batch_indices = tensor(batch_indices).long()
                entry = EntryCLS(*list(map(lambda x: x[batch_indices], entries)))
                prediction = self.network(entry.state, entry.action)
                ratio = (prediction['log_pi_a'] - entry.log_pi_a).exp()
                obj = ratio * entry.advantage
                obj_clipped = ratio.clamp(1.0 - config.ppo_ratio_clip, 1.0 + config.ppo_ratio_clip) * entry.advantage
                policy_loss = -torch.min(obj, obj_clipped).mean() - config.entropy_weight * prediction['entropy'].mean()
                value_loss = 0.5 * (entry.ret - prediction['v']).pow(2).mean()
                approx_kl = (entry.log_pi_a - prediction['log_pi_a']).mean()
                if approx_kl <= 1.5 * config.target_kl:
                    self.actor_opt.zero_grad()
                    policy_loss.backward()
                    self.actor_opt.step()
                self.critic_opt.zero_grad()
                value_loss.backward()
                self.critic_opt.step()

def run_steps(agent):
    config = agent.config
    agent_name = agent.__class__.__name__
    while True:
        if config.save_interval and not agent.total_steps % config.save_interval:
            agent.save('%s/%s-%s-%d' % (config.data_dir, agent_name, config.tag, agent.total_steps))
        if config.log_interval and not agent.total_steps % config.log_interval:
            recent = getattr(agent, 'episodic_returns', [0.0])[-5:]
            agent.logger.info('steps %d, episodic_return_train %.2f' % (agent.total_steps, np.mean(recent)))
        if config.eval_interval and not agent.total_steps % config.eval_interval:
            agent.eval_episodes()
        if config.max_steps and agent.total_steps >= config.max_steps:
            agent.close()
            break
        agent.step()
        agent.switch_task()

def dqn_feature(**kwargs):
    config = Config()
    config.merge(kwargs)
    config.task_fn = lambda: Task(config.game)
    config.eval_env = config.task_fn()
    config.optimizer_fn = lambda params: torch.optim.RMSprop(params, 0.001)
    config.network_fn = lambda: VanillaNet(config.action_dim, FCBody(config.state_dim))
    config.history_length, config.batch_size, config.discount, config.max_steps = 1, 10, 0.99, 600
    replay_kwargs = dict(memory_size=int(1e4), batch_size=config.batch_size, n_step=config.n_step,
                         discount=config.discount, history_length=config.history_length)
    config.replay_fn = lambda: UniformReplay(**replay_kwargs)  # ReplayWrapper(..., async_replay=False)
    config.random_action_prob = LinearSchedule(1.0, 0.1, 300)
    config.target_network_update_freq, config.exploration_steps, config.sgd_update_frequency = 20, 300, 4
    config.gradient_clip, config.eval_episodes, config.save_interval, config.log_interval = 5, 3, 600, 200
    config.async_actor = False
    agent = DQNAgent(config)
    run_steps(agent)
    return agent

def ppo_feature(**kwargs):  # ppo_continuous's settings with the categorical head of ppo_pixel
    config = Config()
    config.merge(kwargs)
    config.task_fn = lambda: Task(config.game)
    config.eval_env = config.task_fn()
    config.network_fn = lambda: CategoricalActorCriticNet(
        config.state_dim, config.action_dim, actor_body=FCBody(config.state_dim, gate=torch.tanh),
        critic_body=FCBody(config.state_dim, gate=torch.tanh))
    config.actor_opt_fn = lambda params: torch.optim.Adam(params, 3e-4)
    config.critic_opt_fn = lambda params: torch.optim.Adam(params, 1e-3)
    config.discount, config.use_gae, config.gae_tau, config.gradient_clip = 0.99, True, 0.95, 0.5
    config.rollout_length, config.optimization_epochs, config.mini_batch_size = 128, 2, 64
    config.ppo_ratio_clip, config.log_interval, config.max_steps, config.target_kl = 0.2, 256, 512, 0.01
    agent = PPOAgent(config)
    run_steps(agent)
    return agent

if __name__ == '__main__':
    tmp = tempfile.mkdtemp(prefix="deeprl_")
    try:
        random_seed(0)
        # -1 is CPU, a positive integer is the index of GPU
        select_device(0 if torch.cuda.is_available() else -1)
        dqn = dqn_feature(game='CartPole-v0', tag='dqn', data_dir=tmp)
        ppo = ppo_feature(game='CartPole-v0', tag='ppo', data_dir=tmp)
        fresh = DQNAgent(dqn.config)
        fresh.load('%s/DQNAgent-dqn-600' % tmp)
        result = fresh.eval_episodes()
        same = all(torch.equal(a, b) for a, b in zip(fresh.network.parameters(), dqn.network.parameters()))
        print("done: DQN reloaded (weights equal: %s) eval return %.1f, PPO %d train episodes" % (
            same, result['episodic_return_test'], len(ppo.episodic_returns)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
