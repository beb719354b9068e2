# Corner cases of optimizer-state-loaded-before-move: lines marked with the code must be reported, nothing else.
import torch
import torch.nn as nn
from torch.optim.lr_scheduler import StepLR

import ferry


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


def resume_then_move(path, device):
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ckpt = torch.load(path, map_location="cpu")
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])  # FRY008
    model = model.to(device)  # FRY008
    return model, optimizer


def resume_in_branch(args):
    model = Net()
    opt = torch.optim.Adam([{"params": model.fc.parameters()}], lr=1e-3)
    if args.resume:
        state = torch.load(args.resume, map_location="cpu")
        opt.load_state_dict(state["opt"])  # FRY008
    model.cuda()  # FRY008
    scheduler = StepLR(opt, 10)
    return scheduler


def built_by_helper(cfg, path, device):
    model = Net()
    optimizer = build_optimizer(cfg, model)  # noqa: F821
    optimizer.load_state_dict(torch.load(path, map_location="cpu")["optimizer"])  # FRY008
    model.to(device=device)  # FRY008


def placed_without_optimizer(path, device):
    model = Net()
    optimizer = torch.optim.Adam(model.parameters())
    optimizer.load_state_dict(torch.load(path, map_location="cpu")["optimizer"])  # FRY008
    ferry.place(model, device)  # FRY008


class Trainer:
    def resume(self, path):
        self.model = Net()
        self.optimizer = torch.optim.Adam(self.model.parameters())
        self.optimizer.load_state_dict(torch.load(path, map_location="cpu")["optimizer"])  # FRY008
        self.model.cuda()  # FRY008


# -- correct look-alikes ----------------------------------------------------------------------------------------------


def moved_at_construction(path, device):
    model = Net().to(device)
    optimizer = torch.optim.AdamW(model.parameters())
    optimizer.load_state_dict(torch.load(path, map_location=device)["optimizer"])
    model.to(device)


def moved_before_load(path):
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters())
    model.cuda()
    optimizer.load_state_dict(torch.load(path, map_location="cuda")["optimizer"])
    model.cuda()


def cast_or_cpu_only(path):
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters())
    optimizer.load_state_dict(torch.load(path, map_location="cpu")["optimizer"])
    model.to(torch.bfloat16)
    model.to("cpu")
    model.float()


def exclusive_branches(path, resume):
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters())
    if resume:
        optimizer.load_state_dict(torch.load(path, map_location="cpu")["optimizer"])
    else:
        model.cuda()


def state_moved_after(path, device):
    model = Net()
    optimizer = torch.optim.Adam(model.parameters())
    optimizer.load_state_dict(torch.load(path, map_location="cpu")["optimizer"])
    model.to(device)
    for state in optimizer.state.values():
        for k, v in state.items():
            if torch.is_tensor(v):
                state[k] = v.to(device)


def placed_with_optimizer(path, device):
    model = Net()
    optimizer = torch.optim.Adam(model.parameters())
    optimizer.load_state_dict(torch.load(path, map_location="cpu")["optimizer"])
    ferry.place(model, device, optimizer=optimizer)


def prepared(accelerator, path):
    model = Net()
    optimizer = torch.optim.Adam(model.parameters())
    optimizer.load_state_dict(torch.load(path, map_location="cpu")["optimizer"])
    model, optimizer = accelerator.prepare(model.cuda(), optimizer)


def another_model_moved(path):
    gen = Net()
    disc = Net()
    g_opt = torch.optim.Adam(gen.parameters())
    g_opt.load_state_dict(torch.load(path, map_location="cpu")["g_opt"])
    disc.cuda()


def optimizer_passed_in(model, optimizer, path):
    optimizer.load_state_dict(torch.load(path, map_location="cpu")["optimizer"])
    model.cuda()


def model_passed_in(model, path, device):
    optimizer = torch.optim.Adam(model.parameters())
    optimizer.load_state_dict(torch.load(path, map_location="cpu")["optimizer"])
    model.to(device)


def scheduler_loaded(path):
    model = Net()
    optimizer = torch.optim.Adam(model.parameters())
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 5)
    scheduler.load_state_dict(torch.load(path, map_location="cpu")["scheduler"])
    model.cuda()


def model_weights_only(path, device):
    model = Net()
    model.load_state_dict(torch.load(path, map_location="cpu"))
    model.to(device)
