# Corner cases of inference-in-train-mode: lines marked with the code must be reported, nothing else.
import torch
import torch.nn as nn
import torchvision
from transformers import AutoModelForSequenceClassification


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 2))

    def forward(self, x):
        return self.fc(x)


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.fc(x))


class Interp(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Conv2d(6, 3, 3, padding=1)

    def inference(self, a, b):
        return self.net(torch.cat([a, b], 1))

    @torch.no_grad()
    def predict(self, a, b):
        return self.net(torch.cat([a, b], 1))


def build_eval():
    return Head().eval()


# -- shape 1: weights loaded, no eval() --------------------------------------------------------------------------------


def predict(path, x):
    model = Head()
    model.load_state_dict(torch.load(path, map_location="cpu"))
    with torch.no_grad():
        return model(x)  # FRY010


def predict_forward(path, x):
    model = torchvision.models.resnet18()
    model.load_state_dict(torch.load(path, map_location="cpu"))
    return model.forward(x)  # FRY010


def whole_model(path, x):
    model = torch.load(path, map_location="cpu", weights_only=False)
    return model(x)  # FRY010


def predict_eval(path, x, device):
    model = Head()
    model.load_state_dict(torch.load(path, map_location="cpu"))
    model.to(device).eval()
    return model(x)


def built_in_eval(path, x):
    model = Head().eval()
    model.load_state_dict(torch.load(path, map_location="cpu"))
    other = build_eval()
    other.load_state_dict(torch.load(path, map_location="cpu"))
    return model(x), other(x)


def mode_free(path, x):
    model = Plain()
    model.load_state_dict(torch.load(path, map_location="cpu"))
    linear = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    linear.load_state_dict(torch.load(path, map_location="cpu"))
    return model(x), linear(x)


def pretrained(path, batch):
    model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")
    model.load_state_dict(torch.load(path, map_location="cpu"))
    return model(**batch)


def fine_tune(path, loader, optimizer):
    model = Head()
    model.load_state_dict(torch.load(path, map_location="cpu"))
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()


def validate_loss(path, loader, criterion):
    model = Head()
    model.load_state_dict(torch.load(path, map_location="cpu"))
    return [criterion(model(x), y) for x, y in loader]


def handed_over(path, x, evaluate):
    model = Head()
    model.load_state_dict(torch.load(path, map_location="cpu"))
    evaluate(model)
    return model(x)


def explicit_train(path, x):
    model = Head()
    model.load_state_dict(torch.load(path, map_location="cpu"))
    model.train()
    return model(x)


def exclusive(path, x, fresh):
    model = Head()
    if fresh:
        model.load_state_dict(torch.load(path, map_location="cpu"))
    else:
        return model(x)


def loaded_elsewhere(model, path, x):
    model.load_state_dict(torch.load(path, map_location="cpu"))
    return model(x)


def optimizer_loaded(path, x):
    model = Head()
    model.eval()
    optimizer = torch.optim.Adam(model.parameters())
    optimizer.load_state_dict(torch.load(path, map_location="cpu"))
    return model(x)


# -- shape 2: eval() without no_grad, outputs kept ---------------------------------------------------------------------


def embed(encoder, images, device):
    encoder.eval()
    feats = []
    for img in images:
        out = encoder(img.to(device))  # FRY010
        feats.append(out[0])
    return feats


def classify(model, batches):
    model.eval()
    probs = []
    for batch in batches:
        probs.append(model(**batch).logits.softmax(-1))  # FRY010
    return probs


def interpolate(frames):
    model = Interp().cuda().eval()
    results = []
    for a, b in frames:
        results.append(model.inference(a, b))  # FRY010
        results.append(model.predict(a, b))
    return results


def embed_no_grad(encoder, images):
    encoder.eval()
    feats = []
    with torch.no_grad():
        for img in images:
            feats.append(encoder(img))
    return feats


@torch.inference_mode()
def embed_decorated(encoder, images):
    encoder.eval()
    feats = []
    for img in images:
        feats.append(encoder(img))
    return feats


def embed_detached(encoder, images):
    encoder.eval()
    feats = []
    for img in images:
        feats.append(encoder(img).detach())
        feats.append(encoder(img).argmax(1))
        feats.append(encoder(img).sum().item())
        feats.append(encoder(img).cpu().numpy())
    return feats


def embed_not_kept(encoder, images, sink):
    encoder.eval()
    for img in images:
        out = encoder(img)
        sink.write(out)
        batch_out = []
        batch_out.append(out)


def saliency(encoder, images):
    encoder.eval()
    grads = []
    for img in images:
        out = encoder(img)
        out.sum().backward()
        grads.append(img.grad)
        grads.append(out)
    return grads


def frozen(encoder, images):
    encoder.eval()
    encoder.requires_grad_(False)
    feats = []
    for img in images:
        feats.append(encoder(img))
    return feats


def caller(encoder, images):
    with torch.no_grad():
        return embed_helper(encoder, images)


def embed_helper(encoder, images):
    encoder.eval()
    feats = []
    for img in images:
        feats.append(encoder(img))
    return feats


def not_evaluated(model, batches):
    outs = []
    for b in batches:
        outs.append(model(b))
    return outs


def enable_grad(encoder, images):
    encoder.eval()
    feats = []
    with torch.enable_grad():
        for img in images:
            feats.append(encoder(img))
    return feats


def comprehension(encoder, images):
    encoder.eval()
    feats = [encoder(img).flatten(1) for img in images]  # FRY010
    labels = [encoder(img).argmax(1) for img in images]
    with torch.no_grad():
        kept = [encoder(img) for img in images]
    return feats, labels, kept
