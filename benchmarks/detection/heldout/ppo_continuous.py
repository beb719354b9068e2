"""Trains a continuous-action PPO agent (clipped objective, decaying action std), saves it and reloads it to test it.

Modeled on: nikhilbarhate99/PPO-PyTorch, PPO.py, train.py and test.py
(https://github.com/nikhilbarhate99/PPO-PyTorch/blob/728cce83d7ab628fe2634eabcdf3239997eb81dd/PPO.py,
https://github.com/nikhilbarhate99/PPO-PyTorch/blob/728cce83d7ab628fe2634eabcdf3239997eb81dd/train.py,
https://github.com/nikhilbarhate99/PPO-PyTorch/blob/728cce83d7ab628fe2634eabcdf3239997eb81dd/test.py).

Kept: the module-level `device = torch.device('cpu')`, switched to `torch.device('cuda:0')` (with
`torch.cuda.empty_cache()` and `torch.cuda.get_device_name(device)`) when CUDA is available, and used as a global
everywhere; `self.action_var`, a plain tensor attribute made with `torch.full(...).to(device)` in `__init__` and
remade the same way by `set_action_std`; `cov_mat = torch.diag_embed(action_var).to(device)` in `evaluate`;
`ActorCritic(...).to(device)` for both `policy` and `policy_old`, `policy_old.load_state_dict(policy.state_dict())`;
`select_action` building `torch.FloatTensor(state).to(device)` under `torch.no_grad()`, keeping the device tensors in
the rollout buffer and returning `action.detach().cpu().numpy().flatten()` to the environment; `update` turning the
Monte-Carlo returns into `torch.tensor(rewards, dtype=torch.float32).to(device)` and stacking the buffer with
`.detach().to(device)`; no eval()/train() switching (the nets have no dropout or batch norm); `save` with
`torch.save(self.policy_old.state_dict(), path)` and `load` with `torch.load(path, map_location=lambda storage, loc:
storage)` into both policies; the test script building a fresh agent with the final action std and loading the
checkpoint before running episodes.

Shrunk: a small numpy point-mass "reach the target" environment instead of gym/roboschool, 40-step episodes, 2400
training steps with updates every 160 steps and 10 PPO epochs, the std decayed by 0.1 every 600 steps down to 0.2, a
checkpoint every 1200 steps into a temporary directory, 3 test episodes without rendering; `random_seed = 1` so the
seeding branch runs (the author's default 0 skips it); no CSV log.
"""
import os
import random
import tempfile

import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical, MultivariateNormal

################################## set device ##################################
print("============================================================================================")
# set device to cpu or cuda
device = torch.device('cpu')
if torch.cuda.is_available():
    device = torch.device('cuda:0')
    torch.cuda.empty_cache()
    print("Device set to : " + str(torch.cuda.get_device_name(device)))
else:
    print("Device set to : cpu")
print("============================================================================================")


################################## PPO Policy ##################################
class RolloutBuffer:
    def __init__(self):
        self.actions = []
        self.states = []
        self.logprobs = []
        self.rewards = []
        self.state_values = []
        self.is_terminals = []

    def clear(self):
        del self.actions[:]
        del self.states[:]
        del self.logprobs[:]
        del self.rewards[:]
        del self.state_values[:]
        del self.is_terminals[:]


class ActorCritic(nn.Module):
    def __init__(self, state_dim, action_dim, has_continuous_action_space, action_std_init):
        super(ActorCritic, self).__init__()

        self.has_continuous_action_space = has_continuous_action_space

        if has_continuous_action_space:
            self.action_dim = action_dim
            self.action_var = torch.full((action_dim,), action_std_init * action_std_init).to(device)
        # actor
        if has_continuous_action_space:
            self.actor = nn.Sequential(
                nn.Linear(state_dim, 64),
                nn.Tanh(),
                nn.Linear(64, 64),
                nn.Tanh(),
                nn.Linear(64, action_dim),
                nn.Tanh()
            )
        else:
            self.actor = nn.Sequential(
                nn.Linear(state_dim, 64),
                nn.Tanh(),
                nn.Linear(64, 64),
                nn.Tanh(),
                nn.Linear(64, action_dim),
                nn.Softmax(dim=-1)
            )
        # critic
        self.critic = nn.Sequential(
            nn.Linear(state_dim, 64),
            nn.Tanh(),
            nn.Linear(64, 64),
            nn.Tanh(),
            nn.Linear(64, 1)
        )

    def set_action_std(self, new_action_std):
        if self.has_continuous_action_space:
            self.action_var = torch.full((self.action_dim,), new_action_std * new_action_std).to(device)
        else:
            print("WARNING : Calling ActorCritic::set_action_std() on discrete action space policy")

    def forward(self):
        raise NotImplementedError

    def act(self, state):
        if self.has_continuous_action_space:
            action_mean = self.actor(state)
            cov_mat = torch.diag(self.action_var).unsqueeze(dim=0)
            dist = MultivariateNormal(action_mean, cov_mat)
        else:
            action_probs = self.actor(state)
            dist = Categorical(action_probs)

        action = dist.sample()
        action_logprob = dist.log_prob(action)
        state_val = self.critic(state)

        return action.detach(), action_logprob.detach(), state_val.detach()

    def evaluate(self, state, action):
        if self.has_continuous_action_space:
            action_mean = self.actor(state)

            action_var = self.action_var.expand_as(action_mean)
            cov_mat = torch.diag_embed(action_var).to(device)
            dist = MultivariateNormal(action_mean, cov_mat)

            # For Single Action Environments.
            if self.action_dim == 1:
                action = action.reshape(-1, self.action_dim)
        else:
            action_probs = self.actor(state)
            dist = Categorical(action_probs)
        action_logprobs = dist.log_prob(action)
        dist_entropy = dist.entropy()
        state_values = self.critic(state)

        return action_logprobs, state_values, dist_entropy


class PPO:
    def __init__(self, state_dim, action_dim, lr_actor, lr_critic, gamma, K_epochs, eps_clip,
                 has_continuous_action_space, action_std_init=0.6):
        self.has_continuous_action_space = has_continuous_action_space

        if has_continuous_action_space:
            self.action_std = action_std_init

        self.gamma = gamma
        self.eps_clip = eps_clip
        self.K_epochs = K_epochs

        self.buffer = RolloutBuffer()

        self.policy = ActorCritic(state_dim, action_dim, has_continuous_action_space, action_std_init).to(device)
        self.optimizer = torch.optim.Adam([
            {'params': self.policy.actor.parameters(), 'lr': lr_actor},
            {'params': self.policy.critic.parameters(), 'lr': lr_critic}
        ])

        self.policy_old = ActorCritic(state_dim, action_dim, has_continuous_action_space, action_std_init).to(device)
        self.policy_old.load_state_dict(self.policy.state_dict())

        self.MseLoss = nn.MSELoss()

    def set_action_std(self, new_action_std):
        if self.has_continuous_action_space:
            self.action_std = new_action_std
            self.policy.set_action_std(new_action_std)
            self.policy_old.set_action_std(new_action_std)
        else:
            print("WARNING : Calling PPO::set_action_std() on discrete action space policy")

    def decay_action_std(self, action_std_decay_rate, min_action_std):
        if self.has_continuous_action_space:
            self.action_std = self.action_std - action_std_decay_rate
            self.action_std = round(self.action_std, 4)
            if self.action_std <= min_action_std:
                self.action_std = min_action_std
                print("setting actor output action_std to min_action_std : ", self.action_std)
            else:
                print("setting actor output action_std to : ", self.action_std)
            self.set_action_std(self.action_std)
        else:
            print("WARNING : Calling PPO::decay_action_std() on discrete action space policy")

    def select_action(self, state):
        if self.has_continuous_action_space:
            with torch.no_grad():
                state = torch.FloatTensor(state).to(device)
                action, action_logprob, state_val = self.policy_old.act(state)

            self.buffer.states.append(state)
            self.buffer.actions.append(action)
            self.buffer.logprobs.append(action_logprob)
            self.buffer.state_values.append(state_val)

            return action.detach().cpu().numpy().flatten()
        else:
            with torch.no_grad():
                state = torch.FloatTensor(state).to(device)
                action, action_logprob, state_val = self.policy_old.act(state)

            self.buffer.states.append(state)
            self.buffer.actions.append(action)
            self.buffer.logprobs.append(action_logprob)
            self.buffer.state_values.append(state_val)

            return action.item()

    def update(self):
        # Monte Carlo estimate of returns
        rewards = []
        discounted_reward = 0
        for reward, is_terminal in zip(reversed(self.buffer.rewards), reversed(self.buffer.is_terminals)):
            if is_terminal:
                discounted_reward = 0
            discounted_reward = reward + (self.gamma * discounted_reward)
            rewards.insert(0, discounted_reward)

        # Normalizing the rewards
        rewards = torch.tensor(rewards, dtype=torch.float32).to(device)
        rewards = (rewards - rewards.mean()) / (rewards.std() + 1e-7)

        # convert list to tensor
        old_states = torch.squeeze(torch.stack(self.buffer.states, dim=0)).detach().to(device)
        old_actions = torch.squeeze(torch.stack(self.buffer.actions, dim=0)).detach().to(device)
        old_logprobs = torch.squeeze(torch.stack(self.buffer.logprobs, dim=0)).detach().to(device)
        old_state_values = torch.squeeze(torch.stack(self.buffer.state_values, dim=0)).detach().to(device)

        # calculate advantages
        advantages = rewards.detach() - old_state_values.detach()

        # Optimize policy for K epochs
        for _ in range(self.K_epochs):
            # Evaluating old actions and values
            logprobs, state_values, dist_entropy = self.policy.evaluate(old_states, old_actions)

            # match state_values tensor dimensions with rewards tensor
            state_values = torch.squeeze(state_values)

            # Finding the ratio (pi_theta / pi_theta__old)
            ratios = torch.exp(logprobs - old_logprobs.detach())

            # Finding Surrogate Loss
            surr1 = ratios * advantages
            surr2 = torch.clamp(ratios, 1 - self.eps_clip, 1 + self.eps_clip) * advantages

            # final loss of clipped objective PPO
            loss = -torch.min(surr1, surr2) + 0.5 * self.MseLoss(state_values, rewards) - 0.01 * dist_entropy

            # take gradient step
            self.optimizer.zero_grad()
            loss.mean().backward()
            self.optimizer.step()

        # Copy new weights into old policy
        self.policy_old.load_state_dict(self.policy.state_dict())

        # clear buffer
        self.buffer.clear()

    def save(self, checkpoint_path):
        torch.save(self.policy_old.state_dict(), checkpoint_path)

    def load(self, checkpoint_path):
        self.policy_old.load_state_dict(torch.load(checkpoint_path, map_location=lambda storage, loc: storage))
        self.policy.load_state_dict(torch.load(checkpoint_path, map_location=lambda storage, loc: storage))


################################## a stand-in environment ##################################
class PointReacher:
    """A 2-D point mass pushed by a force in [-1, 1]^2 towards a random target; gym's old step/reset API."""

    state_dim = 6
    action_dim = 2

    def __init__(self, max_steps):
        self.max_steps = max_steps
        self.rng = np.random.RandomState(0)

    def seed(self, seed):
        self.rng = np.random.RandomState(seed)

    def _obs(self):
        return np.concatenate([self.pos, self.vel, self.target]).astype(np.float32)

    def reset(self):
        self.pos = self.rng.uniform(-1, 1, 2)
        self.vel = np.zeros(2)
        self.target = self.rng.uniform(-1, 1, 2)
        self.t = 0
        return self._obs()

    def step(self, action):
        force = np.clip(action, -1, 1)
        self.vel = 0.8 * self.vel + 0.1 * force
        self.pos = np.clip(self.pos + self.vel, -1.5, 1.5)
        self.t += 1
        dist = np.linalg.norm(self.pos - self.target)
        reward = -dist - 0.01 * float(np.sum(force ** 2))
        done = bool(dist < 0.1) or self.t >= self.max_steps
        if dist < 0.1:
            reward += 5.0
        return self._obs(), reward, done, {}

    def close(self):
        pass


################################### Training ###################################
def train(checkpoint_path):
    env_name = "PointReacher"
    has_continuous_action_space = True  # continuous action space; else discrete

    max_ep_len = 40                    # max timesteps in one episode
    max_training_timesteps = 2400      # break training loop if timeteps > max_training_timesteps
    print_freq = max_ep_len * 10       # print avg reward in the interval (in num timesteps)
    save_model_freq = 1200             # save model frequency (in num timesteps)

    action_std = 0.6                   # starting std for action distribution (Multivariate Normal)
    action_std_decay_rate = 0.1        # linearly decay action_std (action_std = action_std - action_std_decay_rate)
    min_action_std = 0.2               # minimum action_std (stop decay after action_std <= min_action_std)
    action_std_decay_freq = 600        # action_std decay frequency (in num timesteps)

    update_timestep = max_ep_len * 4   # update policy every n timesteps
    K_epochs = 10                      # update policy for K epochs in one PPO update
    eps_clip = 0.2                     # clip parameter for PPO
    gamma = 0.99                       # discount factor
    lr_actor = 0.0003                  # learning rate for actor network
    lr_critic = 0.001                  # learning rate for critic network
    random_seed = 1                    # set random seed if required (0 = no random seed)

    print("training environment name : " + env_name)
    env = PointReacher(max_ep_len)
    state_dim = env.state_dim
    action_dim = env.action_dim

    if random_seed:
        print("setting random seed to ", random_seed)
        torch.manual_seed(random_seed)
        env.seed(random_seed)
        np.random.seed(random_seed)
        random.seed(random_seed)

    ppo_agent = PPO(state_dim, action_dim, lr_actor, lr_critic, gamma, K_epochs, eps_clip,
                    has_continuous_action_space, action_std)

    print_running_reward = 0
    print_running_episodes = 0
    time_step = 0
    i_episode = 0

    # training loop
    while time_step <= max_training_timesteps:
        state = env.reset()
        current_ep_reward = 0

        for t in range(1, max_ep_len + 1):
            # select action with policy
            action = ppo_agent.select_action(state)
            state, reward, done, _ = env.step(action)

            # saving reward and is_terminals
            ppo_agent.buffer.rewards.append(reward)
            ppo_agent.buffer.is_terminals.append(done)

            time_step += 1
            current_ep_reward += reward

            # update PPO agent
            if time_step % update_timestep == 0:
                ppo_agent.update()

            # if continuous action space; then decay action std of ouput action distribution
            if has_continuous_action_space and time_step % action_std_decay_freq == 0:
                ppo_agent.decay_action_std(action_std_decay_rate, min_action_std)

            # printing average reward
            if time_step % print_freq == 0:
                print_avg_reward = print_running_reward / max(print_running_episodes, 1)
                print_avg_reward = round(print_avg_reward, 2)
                print("Episode : {} \t\t Timestep : {} \t\t Average Reward : {}".format(
                    i_episode, time_step, print_avg_reward))
                print_running_reward = 0
                print_running_episodes = 0

            # save model weights
            if time_step % save_model_freq == 0:
                print("saving model at : " + os.path.basename(checkpoint_path))
                ppo_agent.save(checkpoint_path)
                print("model saved")

            # break; if the episode is over
            if done:
                break

        print_running_reward += current_ep_reward
        print_running_episodes += 1
        i_episode += 1

    env.close()
    return ppo_agent.action_std


#################################### Testing ###################################
def test(checkpoint_path, action_std):
    has_continuous_action_space = True
    max_ep_len = 40             # max timesteps in one episode
    total_test_episodes = 3     # total num of testing episodes

    K_epochs = 10               # update policy for K epochs
    eps_clip = 0.2              # clip parameter for PPO
    gamma = 0.99                # discount factor
    lr_actor = 0.0003           # learning rate for actor
    lr_critic = 0.001           # learning rate for critic

    env = PointReacher(max_ep_len)
    env.seed(100)
    state_dim = env.state_dim
    action_dim = env.action_dim

    # initialize a PPO agent
    ppo_agent = PPO(state_dim, action_dim, lr_actor, lr_critic, gamma, K_epochs, eps_clip,
                    has_continuous_action_space, action_std)

    print("loading network from : " + os.path.basename(checkpoint_path))
    ppo_agent.load(checkpoint_path)

    test_running_reward = 0
    for ep in range(1, total_test_episodes + 1):
        ep_reward = 0
        state = env.reset()
        for t in range(1, max_ep_len + 1):
            action = ppo_agent.select_action(state)
            state, reward, done, _ = env.step(action)
            ep_reward += reward
            if done:
                break

        # clear buffer
        ppo_agent.buffer.clear()

        test_running_reward += ep_reward
        print('Episode: {} \t\t Reward: {}'.format(ep, round(ep_reward, 2)))
        ep_reward = 0

    env.close()
    avg_test_reward = test_running_reward / total_test_episodes
    avg_test_reward = round(avg_test_reward, 2)
    print("average test reward : " + str(avg_test_reward))


if __name__ == '__main__':
    with tempfile.TemporaryDirectory() as directory:
        checkpoint_path = os.path.join(directory, "PPO_{}_{}_{}.pth".format("PointReacher", 1, 0))
        final_std = train(checkpoint_path)
        test(checkpoint_path, final_std)
