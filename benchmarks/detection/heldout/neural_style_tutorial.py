"""Neural style transfer (Gatys et al.): optimise an input image with L-BFGS against content and style losses.

Modeled on: PyTorch tutorials, "Neural Transfer Using PyTorch"
(https://pytorch.org/tutorials/advanced/neural_style_tutorial.html, advanced_source/neural_style_tutorial.py).
Kept: the device logic: module-level ``device = torch.device("cuda" if torch.cuda.is_available() else "cpu")``; the
image size chosen by ``torch.cuda.is_available()``; ``image_loader`` returning ``image.to(device, torch.float)``;
the feature extractor moved with ``.to(device).eval()``; ``cnn_normalization_mean/std =
torch.tensor([...]).to(device)``; the ``Normalization`` module re-wrapping them with ``torch.tensor(mean).view(-1,
1, 1)`` (plain attributes, not buffers) and moved with ``Normalization(...).to(device)``; ``ContentLoss`` and
``StyleLoss`` keeping detached targets (``gram_matrix`` normalised by the element count) and inserted after the
convolutions of a ``copy.deepcopy`` of the network, rebuilt into a new ``nn.Sequential`` with out-of-place ReLUs and
trimmed after the last loss; ``input_img = content_img.clone()``; ``optim.LBFGS([input_img])`` with
``input_img.requires_grad_(True)``, ``model.eval()`` and ``model.requires_grad_(False)``; the closure clamping the
image in place under ``torch.no_grad()`` and reading the scores with ``.item()``; the last clamp. Shrunk: random
3-channel images instead of picasso.jpg/dancing.jpg (no PIL, no matplotlib: the images are printed as numbers), a
small randomly initialised VGG-like ``features`` Sequential (Conv2d/ReLU(inplace=True)/MaxPool2d, six convolutions)
standing in for the pretrained ``models.vgg19(...).features`` (built by ``small_vgg_features()`` then
``.to(device).eval()``), 32x32 (GPU) or 24x24 (CPU) images, ``num_steps=20`` instead of 300 (two L-BFGS steps of up
to 20 closure calls), printing every 5 closure calls instead of 50.
"""

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# desired size of the output image
imsize = 32 if torch.cuda.is_available() else 24  # use small size if no GPU


def image_loader(seed):
    """A random RGB picture (with a little structure) in place of reading and resizing a photograph."""
    gen = torch.Generator().manual_seed(seed)
    coarse = torch.rand(3, imsize // 4, imsize // 4, generator=gen)
    image = F.interpolate(coarse.unsqueeze(0), size=(imsize, imsize), mode="bilinear", align_corners=False)
    image = (0.8 * image + 0.2 * torch.rand(1, 3, imsize, imsize, generator=gen)).clamp(0, 1)
    # fake batch dimension required to fit the network's input dimensions
    return image.to(device, torch.float)


style_img = image_loader(1)
content_img = image_loader(2)

assert style_img.size() == content_img.size(), "we need to import style and content images of the same size"


def describe(tensor, title):
    image = tensor.cpu().clone()  # we clone the tensor to not do changes on it
    image = image.squeeze(0)  # remove the fake batch dimension
    print(f"{title}: mean {image.mean().item():.4f} std {image.std().item():.4f}")


describe(style_img, "Style Image")
describe(content_img, "Content Image")


class ContentLoss(nn.Module):
    def __init__(self, target):
        super().__init__()
        # the target is a stated value, not a variable: detach it from the graph
        self.target = target.detach()

    def forward(self, input):
        self.loss = F.mse_loss(input, self.target)
        return input


def gram_matrix(input):
    a, b, c, d = input.size()  # a=batch size(=1), b=number of feature maps, (c,d)=dimensions of a feature map
    features = input.view(a * b, c * d)
    G = torch.mm(features, features.t())
    # normalise by the number of elements in each feature map
    return G.div(a * b * c * d)


class StyleLoss(nn.Module):
    def __init__(self, target_feature):
        super().__init__()
        self.target = gram_matrix(target_feature).detach()

    def forward(self, input):
        G = gram_matrix(input)
        self.loss = F.mse_loss(G, self.target)
        return input


def small_vgg_features():
    """Same layer kinds and order as the start of ``vgg19().features``, fewer channels, random weights."""
    return nn.Sequential(
        nn.Conv2d(3, 8, kernel_size=3, padding=1),
        nn.ReLU(inplace=True),
        nn.Conv2d(8, 8, kernel_size=3, padding=1),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(kernel_size=2, stride=2),
        nn.Conv2d(8, 16, kernel_size=3, padding=1),
        nn.ReLU(inplace=True),
        nn.Conv2d(16, 16, kernel_size=3, padding=1),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(kernel_size=2, stride=2),
        nn.Conv2d(16, 32, kernel_size=3, padding=1),
        nn.ReLU(inplace=True),
        nn.Conv2d(32, 32, kernel_size=3, padding=1),
        nn.ReLU(inplace=True),
    )


cnn = small_vgg_features().to(device).eval()

cnn_normalization_mean = torch.tensor([0.485, 0.456, 0.406]).to(device)
cnn_normalization_std = torch.tensor([0.229, 0.224, 0.225]).to(device)


class Normalization(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        # view mean and std as [C x 1 x 1] so that they broadcast over an image [B x C x H x W]
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def forward(self, img):
        return (img - self.mean) / self.std


content_layers_default = ["conv_4"]
style_layers_default = ["conv_1", "conv_2", "conv_3", "conv_4", "conv_5"]


def get_style_model_and_losses(
    cnn,
    normalization_mean,
    normalization_std,
    style_img,
    content_img,
    content_layers=content_layers_default,
    style_layers=style_layers_default,
):
    cnn = copy.deepcopy(cnn)

    normalization = Normalization(normalization_mean, normalization_std).to(device)

    content_losses = []
    style_losses = []

    # a new nn.Sequential with the loss modules inserted after the layers they watch
    model = nn.Sequential(normalization)

    i = 0  # incremented at every conv
    for layer in cnn.children():
        if isinstance(layer, nn.Conv2d):
            i += 1
            name = f"conv_{i}"
        elif isinstance(layer, nn.ReLU):
            name = f"relu_{i}"
            # the in-place ReLU would overwrite what ContentLoss/StyleLoss saw
            layer = nn.ReLU(inplace=False)
        elif isinstance(layer, nn.MaxPool2d):
            name = f"pool_{i}"
        elif isinstance(layer, nn.BatchNorm2d):
            name = f"bn_{i}"
        else:
            raise RuntimeError(f"Unrecognized layer: {layer.__class__.__name__}")

        model.add_module(name, layer)

        if name in content_layers:
            target = model(content_img).detach()
            content_loss = ContentLoss(target)
            model.add_module(f"content_loss_{i}", content_loss)
            content_losses.append(content_loss)

        if name in style_layers:
            target_feature = model(style_img).detach()
            style_loss = StyleLoss(target_feature)
            model.add_module(f"style_loss_{i}", style_loss)
            style_losses.append(style_loss)

    # trim off the layers after the last content or style loss
    for i in range(len(model) - 1, -1, -1):
        if isinstance(model[i], ContentLoss) or isinstance(model[i], StyleLoss):  # noqa: SIM101
            break

    model = model[: (i + 1)]

    return model, style_losses, content_losses


input_img = content_img.clone()
# white noise instead: input_img = torch.randn(content_img.data.size(), device=device)
describe(input_img, "Input Image")


def get_input_optimizer(input_img):
    # the input image is what gets optimised
    optimizer = optim.LBFGS([input_img])
    return optimizer


def run_style_transfer(
    cnn,
    normalization_mean,
    normalization_std,
    content_img,
    style_img,
    input_img,
    num_steps=20,
    style_weight=1000000,
    content_weight=1,
):
    """Run the style transfer."""
    print("Building the style transfer model..")
    model, style_losses, content_losses = get_style_model_and_losses(
        cnn, normalization_mean, normalization_std, style_img, content_img
    )

    # optimise the input, not the model
    input_img.requires_grad_(True)
    # evaluation mode, so that dropout/batch norm layers (if any) behave
    model.eval()
    model.requires_grad_(False)

    optimizer = get_input_optimizer(input_img)

    print("Optimizing..")
    run = [0]
    while run[0] <= num_steps:

        def closure():
            # correct the values of the updated input image
            with torch.no_grad():
                input_img.clamp_(0, 1)

            optimizer.zero_grad()
            model(input_img)
            style_score = 0
            content_score = 0

            for sl in style_losses:
                style_score += sl.loss
            for cl in content_losses:
                content_score += cl.loss

            style_score *= style_weight
            content_score *= content_weight

            loss = style_score + content_score
            loss.backward()

            run[0] += 1
            if run[0] % 5 == 0:
                print(f"run {run}:")
                print(f"Style Loss : {style_score.item():4f} Content Loss: {content_score.item():4f}")
                print()

            return style_score + content_score

        optimizer.step(closure)

    # a last correction...
    with torch.no_grad():
        input_img.clamp_(0, 1)

    return input_img


output = run_style_transfer(cnn, cnn_normalization_mean, cnn_normalization_std, content_img, style_img, input_img)

describe(output, "Output Image")
print(f"done output_sum={output.detach().sum().item():.4f}")
