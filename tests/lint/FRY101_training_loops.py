# Corner cases of host-sync-in-training-loop: lines marked with the code must be reported, nothing else.
import torch
import torch.nn as nn
from torch.utils.data import DataLoader


def train(model: nn.Module, loader: DataLoader, optimizer: torch.optim.Optimizer, device, scheduler, writer):
    model.train()
    total = 0.0
    running = torch.zeros((), device=device)
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        out = model(x)
        loss = nn.functional.cross_entropy(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()  # FRY101
        acc = (out.argmax(1) == y).float().mean()
        writer.add_scalar("acc", float(acc), step)  # FRY101
        preds = out.argmax(1).cpu().numpy()  # FRY101
        print(loss)  # FRY101
        print(f"loss {loss:.3f}")  # FRY101
        labels = y.tolist()  # FRY101
        running += loss.detach()
        if step % 100 == 0:
            print(f"step {step} loss {running.item() / 100:.4f}")
        if not torch.isfinite(loss):
            raise RuntimeError(f"loss is {loss.item()}")
        if step == len(loader) - 1:
            print(loss.item())
        if loss.item() > 1e4:  # FRY101
            break
        n = x.size(0)
        lr = scheduler.get_last_lr()[0]
        total += float(n) + lr
    print(f"epoch loss {loss.item()}")
    return preds, labels


def amp(model: nn.Module, loader, optimizer, scaler, losses):
    for x, y in loader:
        with torch.autocast("cuda"):
            loss = model(x.cuda()).sum()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())  # FRY101


def host_values(model: nn.Module, loader, optimizer):
    for x, y in loader:
        loss = model(x.cuda()).sum()
        loss.backward()
        optimizer.step()
        ys = y.tolist()
        perm = torch.randperm(8).tolist()
        hist = torch.zeros(10)
        counts = hist.numpy()
        moved = loss.cpu()  # FRY101
        again = moved.item()
    return ys, perm, counts, again


def evaluate(model: nn.Module, loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    return correct


def epochs(model: nn.Module, loader, optimizer, n):
    for epoch in range(n):
        for x, _ in loader:
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: {loss.item()}")


def scheduler_only(model: nn.Module, scheduler, data):
    for _ in range(3):
        scheduler.step()
        out = model(data)
        print(out.sum().item())


def numbers_only(model: nn.Module, loader, optimizer):
    seen = 0
    for x, _ in loader:
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        seen += int(x.shape[0])
        print(f"seen {seen}")
        stats = {"loss": 1.0}
        print(float(stats["loss"]))
    return seen


def logging_steps(model: nn.Module, loader, optimizer, args, logger):
    for step, (x, _) in enumerate(loader):
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        if args.log_every and step > 0:
            logger.info(f"{loss.item():.3f}")
        if args.verbose:
            print(loss)


def nested_helper(model: nn.Module, loader, optimizer):
    for x, _ in loader:
        loss = model(x).sum()
        loss.backward()
        optimizer.step()

        def report():
            return loss.item()

        yield report


def loop_parts(model: nn.Module, optimizer, data):
    for x in data[: int(model(data).sum())]:
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
    else:
        print(loss.item())
