# Corner cases of whole-module-pickled: lines marked with the code must be reported, nothing else.
import torch
import torch.nn as nn
import torchvision


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def export(self, path):
        torch.save(self, path)  # FRY004
        torch.save(self.state_dict(), path)
        torch.save(self.fc, path)  # FRY004


net = Net()
torch.save(net, "net.pt")  # FRY004
torch.save(net.state_dict(), "net.pt")
torch.save(nn.DataParallel(net), "dp.pt")  # FRY004
torch.save(torchvision.models.resnet18(), "r.pt")  # FRY004
torch.save([net, 3], "pair.pt")  # FRY004
torch.save((net.state_dict(), 3), "pair.pt")
torch.save({"model": net.state_dict(), "epoch": 3}, "ckpt.pt")
torch.save(torch.randn(3), "t.pt")
ckpt = {"epoch": 1, "net": net}
torch.save(ckpt, "ckpt.pt")  # FRY004
blob = {"epoch": 1}
blob["model"] = net
torch.save(blob, "blob.pt")  # FRY004


def save_checkpoint(epoch, model, optimizer, path):
    torch.save({"epoch": epoch, "model": model, "optimizer": optimizer.state_dict()}, path)  # FRY004


def save_weights(model, path):
    torch.save(model, path)  # FRY004


def save_student(student_net, path):
    torch.save({"student": student_net}, path)  # FRY004


def save_state(model, path):
    model = model.state_dict()
    torch.save({"model": model}, path)


def save_annotated(model: dict, path):
    torch.save({"model": model}, path)


def save_named(state, path):
    torch.save(state, path)


def dump(model, path):
    torch.save({"model": model}, path)


dump(net.state_dict(), "sd.pt")


def dump_module(model, path):
    torch.save({"model": model}, path)  # FRY004


dump_module(net, "m.pt")
