"""Explains a small CNN classifier's predictions with pytorch-grad-cam: class activation maps from GradCAM, HiResCAM,
GradCAM++, LayerCAM, EigenCAM (first principal component of the activations) and ScoreCAM on the last residual stage, each run through the
`BaseCAM` machinery (forward hooks that save activations to the host and register tensor hooks that save gradients,
targets defaulting to the top-scoring class, the CAM rescaled to the input size), guided backpropagation (every ReLU
swapped for a guided-ReLU autograd Function and back), and the faithfulness metrics: the confidence change when the
image is multiplied by its CAM and ROAD (remove-and-debias: the most or least relevant pixels are filled in by a
noisy linear imputation solved with scipy's sparse solver) at several percentiles. The classifier (a stand-in for the
pretrained ResNet-50 of `cam.py`) is first fitted briefly on synthetic images where one of three shapes is drawn at
a random place, so that the maps can be checked against the shape's box.

Modeled on: jacobgil/pytorch-grad-cam, cam.py, pytorch_grad_cam/base_cam.py, activations_and_gradients.py,
grad_cam.py, hirescam.py, grad_cam_plusplus.py, layer_cam.py, eigen_cam.py, score_cam.py, guided_backprop.py,
utils/model_targets.py, utils/image.py, utils/svd_on_activations.py, utils/find_layers.py,
metrics/perturbation_confidence.py, metrics/cam_mult_image.py and metrics/road.py
(https://github.com/jacobgil/pytorch-grad-cam/blob/084273b3f30b54ad0c64cf8020a4337d979a66e0/cam.py,
https://github.com/jacobgil/pytorch-grad-cam/blob/084273b3f30b54ad0c64cf8020a4337d979a66e0/pytorch_grad_cam/base_cam.py,
https://github.com/jacobgil/pytorch-grad-cam/blob/084273b3f30b54ad0c64cf8020a4337d979a66e0/pytorch_grad_cam/metrics/road.py).

Kept: cam.py's `--device` string, the model moved with `.to(torch.device(args.device)).eval()` and the preprocessed
input with `.to(args.device)`; `BaseCAM` taking its device from the model, `self.device =
next(self.model.parameters()).device`, and moving the input with `input_tensor.to(self.device)` in `forward`; the
targets from `np.argmax(outputs.cpu().data.numpy(), axis=-1)`; `ActivationsAndGradients` keeping
`activation.cpu().detach()` and `grad.cpu().detach()` (when `detach`), and `compute_cam_per_layer` turning them into
numpy with `.cpu().data.numpy()`, all weighting done in numpy; `loss.backward(retain_graph=True)` after
`self.model.zero_grad()`; ScoreCAM under `torch.no_grad()` with `torch.from_numpy(activations).to(self.device)`,
an `UpsamplingBilinear2d` built inside the call, masked inputs from the device input, `target(o).cpu().item()` per
output and `torch.Tensor(scores)` on the host; `ClassifierOutputReST` building its label with
`torch.tensor([...], device=model_output.device)`; the context manager releasing the hooks; guided backprop with
`GuidedBackpropReLUModel(model=model, device=args.device)` (`torch.device(device)` and `self.model.to(self.device)`),
`input_img.to(self.device).requires_grad_(True)`, the guided ReLU building its zeros with
`torch.zeros(input_img.size()).type_as(input_img)`, and the gradient read back with `input_img.grad.cpu().data.numpy()`;
`PerturbationConfidenceMetric` scoring under `torch.no_grad()` with `target(output).cpu().numpy()`, perturbing each
image on the host (`input_tensor[i, ...].cpu()` with `torch.from_numpy(cam)`) and moving it back with
`tensor.to(input_tensor.device)`; `RemoveMostRelevantFirst` thresholding `mask.cpu().numpy()` and moving the binary
mask with `.to(mask.device)`; `NoisyLinearImputer` solving on the host and building `torch.tensor(spsolve(...))`.

Changed to run here: the pretrained torchvision ResNet-50 is replaced by a small residual CNN with the same
`layer4` target, whose weights come from a short training run added here (model and batches moved with
`.to(args.device)`); cam.py's `--device` defaults to 'cuda' when CUDA is available (its default is 'cpu', and its
README passes the device); the image read with cv2 is a batch of four synthetic images; `preprocess_image` does
ToTensor/Normalize with torch; `cv2.resize` in `scale_cam_image` is a bilinear `scipy.ndimage.zoom`; `cv2.merge` is
`np.stack`; the ROAD 'auto' (Otsu) threshold, test-time augmentation (ttach; `aug_smooth` is accepted and ignored), the
overlay images, the HPU branch and tqdm are left out; the script prints the predictions, the share of each map
inside the shape's box and the metric scores; nothing is written to disk; the `ScoreCAM`'s batch size is set as cam.py sets it.
Shrunk: 32x32 inputs, a 4-stage CNN with 8-32 channels and 3 classes; 40 training steps; ROADCombined over
percentiles 20/40/60/80.
"""
import argparse
from typing import Callable, List, Optional

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from scipy.ndimage import zoom
from scipy.sparse import lil_matrix, csc_matrix
from scipy.sparse.linalg import spsolve
from torch.autograd import Function


# ----------------------------------------------------------------------------- utils/image.py

def preprocess_image(img: np.ndarray, mean=[0.5, 0.5, 0.5], std=[0.5, 0.5, 0.5]) -> torch.Tensor:
    tensor = torch.from_numpy(img.copy().transpose(2, 0, 1)).float()  # ToTensor (img already in [0, 1])
    tensor = (tensor - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)  # Normalize
    return tensor.unsqueeze(0)


def deprocess_image(img):
    """ see https://github.com/jacobgil/keras-grad-cam/blob/master/grad-cam.py#L65 """
    img = img - np.mean(img)
    img = img / (np.std(img) + 1e-5)
    img = img * 0.1
    img = img + 0.5
    img = np.clip(img, 0, 1)
    return np.uint8(img * 255)


def _resize(img, target_size):
    width, height = target_size
    return zoom(np.float32(img), (height / img.shape[0], width / img.shape[1]), order=1)


def scale_cam_image(cam, target_size=None):
    result = []
    for img in cam:
        img = img - np.min(img)
        img = img / (1e-7 + np.max(img))
        if target_size is not None:
            if len(img.shape) > 2:
                img = zoom(np.float32(img), [(t_s / i_s) for i_s, t_s in zip(img.shape, target_size[::-1])])
            else:
                img = _resize(img, target_size)
        result.append(img)
    result = np.float32(result)

    return result


# ----------------------------------------------------------------------------- utils/svd_on_activations.py

def get_2d_projection(activation_batch):
    activation_batch = activation_batch.copy()
    activation_batch[np.isnan(activation_batch)] = 0
    projections = []
    for activations in activation_batch:
        reshaped_activations = (activations).reshape(activations.shape[0], -1).transpose()
        # Centering before the SVD seems to be important here,
        # Otherwise the image returned is negative
        reshaped_activations = reshaped_activations - reshaped_activations.mean(axis=0)
        U, S, VT = np.linalg.svd(reshaped_activations, full_matrices=True)
        projection = reshaped_activations @ VT[0, :]
        projection = projection.reshape(activations.shape[1:])
        projections.append(projection)
    return np.float32(projections)


# ----------------------------------------------------------------------------- utils/model_targets.py

class ClassifierOutputTarget:
    def __init__(self, category):
        self.category = category

    def __call__(self, model_output):
        if len(model_output.shape) == 1:
            return model_output[self.category]
        return model_output[:, self.category]


class ClassifierOutputSoftmaxTarget:
    def __init__(self, category):
        self.category = category

    def __call__(self, model_output):
        if len(model_output.shape) == 1:
            return torch.softmax(model_output, dim=-1)[self.category]
        return torch.softmax(model_output, dim=-1)[:, self.category]


class ClassifierOutputReST:
    """
    Using both pre-softmax and post-softmax, proposed in https://arxiv.org/abs/2501.06261
    """
    def __init__(self, category):
        self.category = category

    def __call__(self, model_output):
        if len(model_output.shape) == 1:
            target = torch.tensor([self.category], device=model_output.device)
            model_output = model_output.unsqueeze(0)
            return model_output[0][self.category] - torch.nn.functional.cross_entropy(model_output, target)
        else:
            target = torch.tensor([self.category] * model_output.shape[0], device=model_output.device)
            return model_output[:, self.category] - torch.nn.functional.cross_entropy(model_output, target)


# ----------------------------------------------------------------------------- activations_and_gradients.py

class ActivationsAndGradients:
    """ Class for extracting activations and
    registering gradients from targetted intermediate layers """

    def __init__(self, model, target_layers, reshape_transform, detach=True):
        self.model = model
        self.gradients = []
        self.activations = []
        self.reshape_transform = reshape_transform
        self.detach = detach
        self.handles = []
        for target_layer in target_layers:
            self.handles.append(target_layer.register_forward_hook(self.save_activation))
            # Because of https://github.com/pytorch/pytorch/issues/61519,
            # we don't use backward hook to record gradients.
            self.handles.append(target_layer.register_forward_hook(self.save_gradient))

    def save_activation(self, module, input, output):
        activation = output
        if self.detach:
            if self.reshape_transform is not None:
                activation = self.reshape_transform(activation)
            self.activations.append(activation.cpu().detach())
        else:
            self.activations.append(activation)

    def save_gradient(self, module, input, output):
        if not hasattr(output, "requires_grad") or not output.requires_grad:
            # You can only register hooks on tensor requires grad.
            return

        # Gradients are computed in reverse order
        def _store_grad(grad):
            if self.detach:
                if self.reshape_transform is not None:
                    grad = self.reshape_transform(grad)
                self.gradients = [grad.cpu().detach()] + self.gradients
            else:
                self.gradients = [grad] + self.gradients

        output.register_hook(_store_grad)

    def __call__(self, x):
        self.gradients = []
        self.activations = []
        return self.model(x)

    def clear(self):
        # Explicitly detach tensors from the autograd graph
        for a in self.activations:
            if isinstance(a, torch.Tensor):
                a.detach_()
        for g in self.gradients:
            if isinstance(g, torch.Tensor):
                g.detach_()

        self.activations.clear()
        self.gradients.clear()

    def release(self):
        self.clear()
        for handle in self.handles:
            handle.remove()
        self.handles.clear()


# ----------------------------------------------------------------------------- base_cam.py

class BaseCAM:
    def __init__(self, model: torch.nn.Module, target_layers: List[torch.nn.Module],
                 reshape_transform: Optional[Callable] = None, compute_input_gradient: bool = False,
                 uses_gradients: bool = True, detach: bool = True) -> None:
        self.model = model
        self.model.eval()
        self.target_layers = target_layers

        # Use the same device as the model.
        self.device = next(self.model.parameters()).device
        self.reshape_transform = reshape_transform
        self.compute_input_gradient = compute_input_gradient
        self.uses_gradients = uses_gradients
        self.detach = detach
        self.activations_and_grads = ActivationsAndGradients(self.model, target_layers, reshape_transform,
                                                             self.detach)

    """ Get a vector of weights for every channel in the target layer.
        Methods that return weights channels,
        will typically need to only implement this function. """

    def get_cam_weights(self, input_tensor, target_layers, targets, activations, grads) -> np.ndarray:
        raise NotImplementedError("get_cam_weights must be implemented by subclass")

    def get_cam_image(self, input_tensor, target_layer, targets, activations, grads,
                      eigen_smooth: bool = False) -> np.ndarray:
        weights = self.get_cam_weights(input_tensor, target_layer, targets, activations, grads)
        if isinstance(activations, torch.Tensor):
            activations = activations.cpu().detach().numpy()
        # 2D conv
        if len(activations.shape) == 4:
            weighted_activations = weights[:, :, None, None] * activations
        # 3D conv
        elif len(activations.shape) == 5:
            weighted_activations = weights[:, :, None, None, None] * activations
        else:
            raise ValueError(f"Invalid activation shape. Get {len(activations.shape)}.")

        if eigen_smooth:
            cam = get_2d_projection(weighted_activations)
        else:
            cam = weighted_activations.sum(axis=1)
        return cam

    def forward(self, input_tensor: torch.Tensor, targets: Optional[List[torch.nn.Module]],
                eigen_smooth: bool = False) -> np.ndarray:
        input_tensor = input_tensor.to(self.device)

        if self.compute_input_gradient:
            input_tensor = torch.autograd.Variable(input_tensor, requires_grad=True)

        self.outputs = outputs = self.activations_and_grads(input_tensor)

        if targets is None:
            target_categories = np.argmax(outputs.cpu().data.numpy(), axis=-1)
            targets = [ClassifierOutputTarget(category) for category in target_categories]

        if self.uses_gradients:
            self.model.zero_grad()
            loss = sum([target(output) for target, output in zip(targets, outputs)])
            if self.detach:
                loss.backward(retain_graph=True)
            else:
                # keep the computational graph, create_graph = True is needed for hvp
                torch.autograd.grad(loss, input_tensor, retain_graph=True, create_graph=True)

        # In most of the saliency attribution papers, the saliency is
        # computed with a single target layer.
        # Commonly it is the last convolutional layer.
        # Here we support passing a list with multiple target layers.
        # It will compute the saliency image for every image,
        # and then aggregate them (with a default mean aggregation).
        cam_per_layer = self.compute_cam_per_layer(input_tensor, targets, eigen_smooth)
        return self.aggregate_multi_layers(cam_per_layer)

    def get_target_width_height(self, input_tensor: torch.Tensor):
        if len(input_tensor.shape) == 4:
            width, height = input_tensor.size(-1), input_tensor.size(-2)
            return width, height
        elif len(input_tensor.shape) == 5:
            depth, width, height = input_tensor.size(-1), input_tensor.size(-2), input_tensor.size(-3)
            return depth, width, height
        else:
            raise ValueError("Invalid input_tensor shape. Only 2D or 3D images are supported.")

    def compute_cam_per_layer(self, input_tensor: torch.Tensor, targets: List[torch.nn.Module],
                              eigen_smooth: bool) -> np.ndarray:
        if self.detach:
            activations_list = [a.cpu().data.numpy() for a in self.activations_and_grads.activations]
            grads_list = [g.cpu().data.numpy() for g in self.activations_and_grads.gradients]
        else:
            activations_list = [a for a in self.activations_and_grads.activations]
            grads_list = [g for g in self.activations_and_grads.gradients]
        target_size = self.get_target_width_height(input_tensor)

        cam_per_target_layer = []
        # Loop over the saliency image from every layer
        for i in range(len(self.target_layers)):
            target_layer = self.target_layers[i]
            layer_activations = None
            layer_grads = None
            if i < len(activations_list):
                layer_activations = activations_list[i]
            if i < len(grads_list):
                layer_grads = grads_list[i]

            cam = self.get_cam_image(input_tensor, target_layer, targets, layer_activations, layer_grads,
                                     eigen_smooth)
            cam = np.maximum(cam, 0)
            scaled = scale_cam_image(cam, target_size)
            cam_per_target_layer.append(scaled[:, None, :])

        return cam_per_target_layer

    def aggregate_multi_layers(self, cam_per_target_layer: np.ndarray) -> np.ndarray:
        cam_per_target_layer = np.concatenate(cam_per_target_layer, axis=1)
        cam_per_target_layer = np.maximum(cam_per_target_layer, 0)
        result = np.mean(cam_per_target_layer, axis=1)
        return scale_cam_image(result)

    def __call__(self, input_tensor: torch.Tensor, targets: Optional[List[torch.nn.Module]],
                 aug_smooth: bool = False, eigen_smooth: bool = False) -> np.ndarray:
        return self.forward(input_tensor, targets, eigen_smooth)

    def __del__(self):
        self.activations_and_grads.release()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_value, exc_tb):
        self.activations_and_grads.release()
        if isinstance(exc_value, IndexError):
            # Handle IndexError here...
            print(f"An exception occurred in CAM with block: {exc_type}. Message: {exc_value}")
            return True


# ----------------------------------------------------------------------------- the CAM methods

class GradCAM(BaseCAM):
    def __init__(self, model, target_layers, reshape_transform=None):
        super(GradCAM, self).__init__(model, target_layers, reshape_transform)

    def get_cam_weights(self, input_tensor, target_layer, target_category, activations, grads):
        # 2D image
        if len(grads.shape) == 4:
            return np.mean(grads, axis=(2, 3))
        # 3D image
        elif len(grads.shape) == 5:
            return np.mean(grads, axis=(2, 3, 4))
        else:
            raise ValueError("Invalid grads shape."
                             "Shape of grads should be 4 (2D image) or 5 (3D image).")


class HiResCAM(BaseCAM):
    def __init__(self, model, target_layers, reshape_transform=None):
        super(HiResCAM, self).__init__(model, target_layers, reshape_transform)

    def get_cam_image(self, input_tensor, target_layer, target_category, activations, grads, eigen_smooth):
        elementwise_activations = grads * activations

        if eigen_smooth:
            print("Warning: HiResCAM's faithfulness guarantees do not hold if smoothing is applied")
            cam = get_2d_projection(elementwise_activations)
        else:
            cam = elementwise_activations.sum(axis=1)
        return cam


class GradCAMPlusPlus(BaseCAM):
    def __init__(self, model, target_layers, reshape_transform=None):
        super(GradCAMPlusPlus, self).__init__(model, target_layers, reshape_transform)

    def get_cam_weights(self, input_tensor, target_layers, target_category, activations, grads):
        grads_power_2 = grads ** 2
        grads_power_3 = grads_power_2 * grads
        # Equation 19 in https://arxiv.org/abs/1710.11063
        sum_activations = np.sum(activations, axis=(2, 3))
        eps = 0.000001
        aij = grads_power_2 / (2 * grads_power_2 + sum_activations[:, :, None, None] * grads_power_3 + eps)
        # Now bring back the ReLU from eq.7 in the paper,
        # And zero out aijs where the activations are 0
        aij = np.where(grads != 0, aij, 0)

        weights = np.maximum(grads, 0) * aij
        weights = np.sum(weights, axis=(2, 3))
        return weights


class LayerCAM(BaseCAM):
    def __init__(self, model, target_layers, reshape_transform=None):
        super(LayerCAM, self).__init__(model, target_layers, reshape_transform)

    def get_cam_image(self, input_tensor, target_layer, target_category, activations, grads, eigen_smooth):
        spatial_weighted_activations = np.maximum(grads, 0) * activations

        if eigen_smooth:
            cam = get_2d_projection(spatial_weighted_activations)
        else:
            cam = spatial_weighted_activations.sum(axis=1)
        return cam


class EigenCAM(BaseCAM):
    def __init__(self, model, target_layers, reshape_transform=None):
        super(EigenCAM, self).__init__(model, target_layers, reshape_transform, uses_gradients=False)

    def get_cam_image(self, input_tensor, target_layer, target_category, activations, grads, eigen_smooth):
        return get_2d_projection(activations)


class ScoreCAM(BaseCAM):
    def __init__(self, model, target_layers, reshape_transform=None):
        super(ScoreCAM, self).__init__(model, target_layers, reshape_transform=reshape_transform,
                                       uses_gradients=False)

    def get_cam_weights(self, input_tensor, target_layer, targets, activations, grads):
        with torch.no_grad():
            upsample = torch.nn.UpsamplingBilinear2d(size=input_tensor.shape[-2:])
            activation_tensor = torch.from_numpy(activations)
            activation_tensor = activation_tensor.to(self.device)

            upsampled = upsample(activation_tensor)

            maxs = upsampled.view(upsampled.size(0), upsampled.size(1), -1).max(dim=-1)[0]
            mins = upsampled.view(upsampled.size(0), upsampled.size(1), -1).min(dim=-1)[0]

            maxs, mins = maxs[:, :, None, None], mins[:, :, None, None]
            upsampled = (upsampled - mins) / (maxs - mins + 1e-8)

            input_tensors = input_tensor[:, None, :, :] * upsampled[:, :, None, :, :]

            if hasattr(self, "batch_size"):
                BATCH_SIZE = self.batch_size
            else:
                BATCH_SIZE = 16

            scores = []
            for target, tensor in zip(targets, input_tensors):
                for i in range(0, tensor.size(0), BATCH_SIZE):
                    batch = tensor[i: i + BATCH_SIZE, :]
                    outputs = [target(o).cpu().item() for o in self.model(batch)]
                    scores.extend(outputs)
            scores = torch.Tensor(scores)
            scores = scores.view(activations.shape[0], activations.shape[1])
            weights = torch.nn.Softmax(dim=-1)(scores).numpy()
            return weights


# ----------------------------------------------------------------------------- guided_backprop.py, find_layers.py

def replace_all_layer_type_recursive(model, old_layer_type, new_layer):
    for name, layer in model._modules.items():
        if isinstance(layer, old_layer_type):
            model._modules[name] = new_layer
        replace_all_layer_type_recursive(layer, old_layer_type, new_layer)


class GuidedBackpropReLU(Function):
    @staticmethod
    def forward(self, input_img):
        positive_mask = (input_img > 0).type_as(input_img)
        output = torch.addcmul(torch.zeros(input_img.size()).type_as(input_img), input_img, positive_mask)
        self.save_for_backward(input_img, output)
        return output

    @staticmethod
    def backward(self, grad_output):
        input_img, output = self.saved_tensors
        grad_input = None

        positive_mask_1 = (input_img > 0).type_as(grad_output)
        positive_mask_2 = (grad_output > 0).type_as(grad_output)
        grad_input = torch.addcmul(
            torch.zeros(input_img.size()).type_as(input_img),
            torch.addcmul(torch.zeros(input_img.size()).type_as(input_img), grad_output, positive_mask_1),
            positive_mask_2)
        return grad_input


class GuidedBackpropReLUasModule(torch.nn.Module):
    def __init__(self):
        super(GuidedBackpropReLUasModule, self).__init__()

    def forward(self, input_img):
        return GuidedBackpropReLU.apply(input_img)


class GuidedBackpropReLUModel:
    def __init__(self, model, device=None):
        self.model = model
        self.model.eval()
        if device is None:
            self.device = next(self.model.parameters()).device
        else:
            self.device = torch.device(device)
            self.model = self.model.to(self.device)

    def forward(self, input_img):
        return self.model(input_img)

    def __call__(self, input_img, target_category=None):
        replace_all_layer_type_recursive(self.model, torch.nn.ReLU, GuidedBackpropReLUasModule())

        input_img = input_img.to(self.device)

        input_img = input_img.requires_grad_(True)

        output = self.forward(input_img)

        if target_category is None:
            target_category = np.argmax(output.cpu().data.numpy())

        loss = output[0, target_category]
        loss.backward(retain_graph=True)

        output = input_img.grad.cpu().data.numpy()
        output = output[0, :, :, :]
        output = output.transpose((1, 2, 0))

        replace_all_layer_type_recursive(self.model, GuidedBackpropReLUasModule, torch.nn.ReLU())

        return output


# ----------------------------------------------------------------------------- metrics

class PerturbationConfidenceMetric:
    def __init__(self, perturbation):
        self.perturbation = perturbation

    def __call__(self, input_tensor: torch.Tensor, cams: np.ndarray, targets: List[Callable],
                 model: torch.nn.Module, return_visualization=False, return_diff=True):

        if return_diff:
            with torch.no_grad():
                outputs = model(input_tensor)
                scores = [target(output).cpu().numpy() for target, output in zip(targets, outputs)]
                scores = np.float32(scores)

        batch_size = input_tensor.size(0)
        perturbated_tensors = []
        for i in range(batch_size):
            cam = cams[i]
            tensor = self.perturbation(input_tensor[i, ...].cpu(), torch.from_numpy(cam))
            tensor = tensor.to(input_tensor.device)
            perturbated_tensors.append(tensor.unsqueeze(0))
        perturbated_tensors = torch.cat(perturbated_tensors)

        with torch.no_grad():
            outputs_after_imputation = model(perturbated_tensors)
        scores_after_imputation = [
            target(output).cpu().numpy() for target, output in zip(targets, outputs_after_imputation)]
        scores_after_imputation = np.float32(scores_after_imputation)

        if return_diff:
            result = scores_after_imputation - scores
        else:
            result = scores_after_imputation

        if return_visualization:
            return result, perturbated_tensors
        else:
            return result


class RemoveMostRelevantFirst:
    def __init__(self, percentile, imputer):
        self.percentile = percentile
        self.imputer = imputer

    def __call__(self, input_tensor, mask):
        imputer = self.imputer
        threshold = np.percentile(mask.cpu().numpy(), self.percentile)
        binary_mask = np.float32(mask < threshold)

        binary_mask = torch.from_numpy(binary_mask)
        binary_mask = binary_mask.to(mask.device)
        return imputer(input_tensor, binary_mask)


class RemoveLeastRelevantFirst(RemoveMostRelevantFirst):
    def __init__(self, percentile, imputer):
        super(RemoveLeastRelevantFirst, self).__init__(percentile, imputer)

    def __call__(self, input_tensor, mask):
        return super(RemoveLeastRelevantFirst, self).__call__(input_tensor, 1 - mask)


class AveragerAcrossThresholds:
    def __init__(self, imputer, percentiles=[10, 20, 30, 40, 50, 60, 70, 80, 90]):
        self.imputer = imputer
        self.percentiles = percentiles

    def __call__(self, input_tensor: torch.Tensor, cams: np.ndarray, targets: List[Callable],
                 model: torch.nn.Module):
        scores = []
        for percentile in self.percentiles:
            imputer = self.imputer(percentile)
            scores.append(imputer(input_tensor, cams, targets, model))
        return np.mean(np.float32(scores), axis=0)


def multiply_tensor_with_cam(input_tensor: torch.Tensor, cam: torch.Tensor):
    """ Multiply an input tensor (after normalization)
        with a pixel attribution map
    """
    return input_tensor * cam


class CamMultImageConfidenceChange(PerturbationConfidenceMetric):
    def __init__(self):
        super(CamMultImageConfidenceChange, self).__init__(multiply_tensor_with_cam)


# The weights of the surrounding pixels
neighbors_weights = [((1, 1), 1 / 12), ((0, 1), 1 / 6), ((-1, 1), 1 / 12), ((1, -1), 1 / 12),
                     ((0, -1), 1 / 6), ((-1, -1), 1 / 12), ((1, 0), 1 / 6), ((-1, 0), 1 / 6)]


class NoisyLinearImputer:
    def __init__(self, noise: float = 0.01, weighting: List[float] = neighbors_weights):
        """
                Noisy linear imputation.
                noise: magnitude of noise to add (absolute, set to 0 for no noise)
                weighting: Weights of the neighboring pixels in the computation.
                List of tuples of (offset, weight)
        """
        self.noise = noise
        self.weighting = neighbors_weights

    @staticmethod
    def add_offset_to_indices(indices, offset, mask_shape):
        """ Add the corresponding offset to the indices.
    Return new indices plus a valid bit-vector. """
        cord1 = indices % mask_shape[1]
        cord0 = indices // mask_shape[1]
        cord0 += offset[0]
        cord1 += offset[1]
        valid = ((cord0 < 0) | (cord1 < 0) | (cord0 >= mask_shape[0]) | (cord1 >= mask_shape[1]))
        return ~valid, indices + offset[0] * mask_shape[1] + offset[1]

    @staticmethod
    def setup_sparse_system(mask, img, neighbors_weights):
        """ Vectorized version to set up the equation system.
                mask: (H, W)-tensor of missing pixels.
                Image: (H, W, C)-tensor of all values.
                Return (N,N)-System matrix, (N,C)-Right hand side for each of the C channels.
        """
        maskflt = mask.flatten()
        imgflat = img.reshape((img.shape[0], -1))
        # Indices that are imputed in the flattened mask:
        indices = np.argwhere(maskflt == 0).flatten()
        coords_to_vidx = np.zeros(len(maskflt), dtype=int)
        coords_to_vidx[indices] = np.arange(len(indices))
        numEquations = len(indices)
        # System matrix:
        A = lil_matrix((numEquations, numEquations))
        b = np.zeros((numEquations, img.shape[0]))
        # Sum of weights assigned:
        sum_neighbors = np.ones(numEquations)
        for n in neighbors_weights:
            offset, weight = n[0], n[1]
            # Take out outliers
            valid, new_coords = NoisyLinearImputer.add_offset_to_indices(indices, offset, mask.shape)
            valid_coords = new_coords[valid]
            valid_ids = np.argwhere(valid == 1).flatten()
            # Add values to the right hand-side
            has_values_coords = valid_coords[maskflt[valid_coords] > 0.5]
            has_values_ids = valid_ids[maskflt[valid_coords] > 0.5]
            b[has_values_ids, :] -= weight * imgflat[:, has_values_coords].T
            # Add weights to the system (left hand side)
            # Find coordinates in the system.
            has_no_values = valid_coords[maskflt[valid_coords] < 0.5]
            variable_ids = coords_to_vidx[has_no_values]
            has_no_values_ids = valid_ids[maskflt[valid_coords] < 0.5]
            A[has_no_values_ids, variable_ids] = weight
            # Reduce weight for invalid
            sum_neighbors[np.argwhere(valid == 0).flatten()] = \
                sum_neighbors[np.argwhere(valid == 0).flatten()] - weight

        A[np.arange(numEquations), np.arange(numEquations)] = -sum_neighbors
        return A, b

    def __call__(self, img: torch.Tensor, mask: torch.Tensor):
        """ Our linear inputation scheme. """
        """
        This is the function to do the linear infilling
        img: original image (C,H,W)-tensor;
        mask: mask; (H,W)-tensor

        """
        imgflt = img.reshape(img.shape[0], -1)
        maskflt = mask.reshape(-1)
        # Indices that need to be imputed.
        indices_linear = np.argwhere(maskflt == 0).flatten()
        # Set up sparse equation system, solve system.
        A, b = NoisyLinearImputer.setup_sparse_system(mask.numpy(), img.numpy(), neighbors_weights)
        res = torch.tensor(spsolve(csc_matrix(A), b), dtype=torch.float)

        # Fill the values with the solution of the system.
        img_infill = imgflt.clone()
        img_infill[:, indices_linear] = res.t() + self.noise * torch.randn_like(res.t())

        return img_infill.reshape_as(img)


class ROADMostRelevantFirst(PerturbationConfidenceMetric):
    def __init__(self, percentile=80):
        super(ROADMostRelevantFirst, self).__init__(RemoveMostRelevantFirst(percentile, NoisyLinearImputer()))


class ROADLeastRelevantFirst(PerturbationConfidenceMetric):
    def __init__(self, percentile=20):
        super(ROADLeastRelevantFirst, self).__init__(RemoveLeastRelevantFirst(percentile, NoisyLinearImputer()))


class ROADMostRelevantFirstAverage(AveragerAcrossThresholds):
    def __init__(self, percentiles=[10, 20, 30, 40, 50, 60, 70, 80, 90]):
        super(ROADMostRelevantFirstAverage, self).__init__(ROADMostRelevantFirst, percentiles)


class ROADLeastRelevantFirstAverage(AveragerAcrossThresholds):
    def __init__(self, percentiles=[10, 20, 30, 40, 50, 60, 70, 80, 90]):
        super(ROADLeastRelevantFirstAverage, self).__init__(ROADLeastRelevantFirst, percentiles)


class ROADCombined:
    def __init__(self, percentiles=[10, 20, 30, 40, 50, 60, 70, 80, 90]):
        self.percentiles = percentiles
        self.morf_averager = ROADMostRelevantFirstAverage(percentiles)
        self.lerf_averager = ROADLeastRelevantFirstAverage(percentiles)

    def __call__(self, input_tensor: torch.Tensor, cams: np.ndarray, targets: List[Callable],
                 model: torch.nn.Module):

        scores_lerf = self.lerf_averager(input_tensor, cams, targets, model)
        scores_morf = self.morf_averager(input_tensor, cams, targets, model)
        return (scores_lerf - scores_morf) / 2


# ----------------------------------------------------------------------------- the model and images (stand-ins)

class Stage(nn.Module):
    def __init__(self, ch_in, ch_out, stride):
        super(Stage, self).__init__()
        self.conv1 = nn.Conv2d(ch_in, ch_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(ch_out)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(ch_out, ch_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(ch_out)
        self.downsample = nn.Sequential(nn.Conv2d(ch_in, ch_out, 1, stride=stride, bias=False),
                                        nn.BatchNorm2d(ch_out))
        self.relu_out = nn.ReLU()

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu_out(out + self.downsample(x))


class SmallResNet(nn.Module):
    """Stands in for torchvision's resnet50: conv stem, layer1..layer4, global pooling, fc."""

    def __init__(self, num_classes=3):
        super(SmallResNet, self).__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.layer1 = Stage(8, 8, 1)
        self.layer2 = Stage(8, 16, 2)
        self.layer3 = Stage(16, 32, 1)
        self.layer4 = Stage(32, 32, 1)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
SHAPE_NAMES = ['square', 'frame', 'cross']


def make_rgb_image(rng, category, size=32, box=10):
    """A float32 HxWx3 image in [0, 1] with one shape of the given category; returns the image and its box."""
    img = np.clip(0.45 + rng.randn(size, size, 3) * 0.08, 0, 1).astype(np.float32)
    y0, x0 = rng.randint(0, size - box, size=2)
    patch = np.zeros((box, box), dtype=bool)
    if category == 0:
        patch[:, :] = True
    elif category == 1:
        patch[:2, :] = patch[-2:, :] = patch[:, :2] = patch[:, -2:] = True
    else:
        patch[box // 2 - 1:box // 2 + 1, :] = patch[:, box // 2 - 1:box // 2 + 1] = True
    colour = rng.uniform(0.75, 1.0, size=3).astype(np.float32)
    region = img[y0:y0 + box, x0:x0 + box]
    region[patch] = colour
    return img, (y0, x0, box)


def train_stand_in_weights(model, device, steps=40, batch_size=32):
    """Replaces the ImageNet weights: a few Adam steps on random shape images."""
    rng = np.random.RandomState(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for step in range(steps):
        categories = rng.randint(3, size=batch_size)
        images = [preprocess_image(make_rgb_image(rng, c)[0], mean=MEAN, std=STD) for c in categories]
        x = torch.cat(images).to(device)
        y = torch.from_numpy(categories).long().to(device)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 9:
            print('stand-in training step %d loss %.4f' % (step + 1, loss.item()))


def mass_in_box(cam, box):
    y0, x0, size = box
    return float(cam[y0:y0 + size, x0:x0 + size].sum() / (cam.sum() + 1e-7))


# ----------------------------------------------------------------------------- cam.py

def get_args():
    parser = argparse.ArgumentParser()
    parser.add_argument('--device', type=str, default='cuda' if torch.cuda.is_available() else 'cpu',
                        help='Torch device to use')
    parser.add_argument('--eigen-smooth', action='store_true',
                        help='Reduce noise by taking the first principle component'
                        'of cam_weights*activations')
    parser.add_argument('--methods', type=str, default='gradcam,hirescam,gradcam++,layercam,eigencam,scorecam')
    args = parser.parse_args([])

    if args.device:
        print(f'Using device "{args.device}" for acceleration')
    else:
        print('Using CPU for computation')

    return args


if __name__ == '__main__':
    torch.manual_seed(0)
    args = get_args()
    methods = {
        "gradcam": GradCAM,
        "hirescam": HiResCAM,
        "scorecam": ScoreCAM,
        "gradcam++": GradCAMPlusPlus,
        "eigencam": EigenCAM,
        "layercam": LayerCAM,
    }

    model = SmallResNet().to(torch.device(args.device))
    train_stand_in_weights(model, args.device)
    model = model.eval()

    # Choose the target layer you want to compute the visualization for.
    target_layers = [model.layer4]

    rng = np.random.RandomState(1)
    rgb_imgs, boxes, truth = [], [], []
    for category in [0, 1, 2, 1]:
        rgb_img, box = make_rgb_image(rng, category)
        rgb_imgs.append(rgb_img)
        boxes.append(box)
        truth.append(category)
    input_tensor = torch.cat([preprocess_image(rgb_img, mean=MEAN, std=STD) for rgb_img in rgb_imgs]).to(args.device)

    # If targets is None, the highest scoring category (for every member in the batch) will be used.
    targets = None

    results = {}
    for method in args.methods.split(','):
        cam_algorithm = methods[method]
        eigen_smooth = args.eigen_smooth
        with cam_algorithm(model=model, target_layers=target_layers) as cam:
            # AblationCAM and ScoreCAM have batched implementations.
            # You can override the internal batch size for faster computation.
            cam.batch_size = 32
            grayscale_cams = cam(input_tensor=input_tensor, targets=targets, eigen_smooth=eigen_smooth)
            predicted = [int(o.argmax()) for o in cam.outputs.cpu()]
        in_box = np.mean([mass_in_box(grayscale_cams[i], boxes[i]) for i in range(len(boxes))])
        results[method] = grayscale_cams
        print('%-10s predicted %s (truth %s) | CAM mass inside the shape box %.3f' % (
            method, predicted, truth, in_box))

    # Guided backpropagation, combined with the GradCAM map of the first image
    grayscale_cam = results['gradcam'][0, :]
    gb_model = GuidedBackpropReLUModel(model=model, device=args.device)
    gb = gb_model(input_tensor[:1], target_category=None)

    cam_mask = np.stack([grayscale_cam, grayscale_cam, grayscale_cam], axis=-1)
    cam_gb = deprocess_image(cam_mask * gb)
    gb = deprocess_image(gb)
    print('guided backprop: shape %s, mean %.2f | cam*gb mean %.2f | ReLUs restored: %s' % (
        gb.shape, gb.mean(), cam_gb.mean(), isinstance(model.layer4.relu, nn.ReLU)))

    # Metrics: the confidence change after multiplying the image with the CAM, and ROAD
    predicted = model(input_tensor).argmax(-1).cpu().numpy()
    metric_targets = [ClassifierOutputSoftmaxTarget(int(c)) for c in predicted]
    cam_metric = CamMultImageConfidenceChange()
    road = ROADCombined(percentiles=[20, 40, 60, 80])
    for method in ['gradcam', 'gradcam++', 'scorecam']:
        grayscale_cams = results[method]
        scores, batch_visualizations = cam_metric(input_tensor, grayscale_cams, metric_targets, model,
                                                  return_visualization=True)
        inverse_scores = cam_metric(input_tensor, 1 - grayscale_cams, metric_targets, model)
        morf = ROADMostRelevantFirst(percentile=75)(input_tensor, grayscale_cams, metric_targets, model)
        combined = road(input_tensor, grayscale_cams, metric_targets, model)
        print('%-10s cam*image confidence change %.4f (inverse %.4f) | ROAD MoRF@75 %.4f | ROAD combined %.4f' % (
            method, scores.mean(), inverse_scores.mean(), morf.mean(), combined.mean()))

    # ReST target: pre-softmax score minus the cross-entropy, on the device of the output
    with GradCAM(model=model, target_layers=target_layers) as cam:
        rest_cams = cam(input_tensor=input_tensor, targets=[ClassifierOutputReST(int(c)) for c in predicted])
    rest_in_box = np.mean([mass_in_box(rest_cams[i], boxes[i]) for i in range(len(boxes))])
    print('gradcam with ReST targets: CAM mass inside the shape box %.3f' % rest_in_box)

    print('done gradcam_in_box=%.3f rest_in_box=%.3f' % (
        np.mean([mass_in_box(results['gradcam'][i], boxes[i]) for i in range(len(boxes))]), rest_in_box))
