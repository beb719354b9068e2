"""Trains a YOLOv3-tiny Darknet (built from a .cfg file; its two YOLO heads compute their own loss with
`build_targets`) on a custom-class detection set with train.py, saving a state-dict checkpoint every epoch, resumes
from one with ``--pretrained_weights``, then runs detect.py on a folder of images with a saved checkpoint. The device
is ``torch.device("cuda" if torch.cuda.is_available() else "cpu")``: the model goes there with ``Darknet(...).to(device)``
and training batches with ``Variable(imgs.to(device))``; detect.py converts images with ``input_imgs.type(Tensor)``,
``Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor``. The YOLO layer picks its
tensor types from the input (``torch.cuda.FloatTensor if x.is_cuda else torch.FloatTensor``) for the grid offsets,
the scaled anchors and the box buffer, `build_targets` does the same from ``pred_boxes.is_cuda`` for its masks, and
`Darknet.forward` returns the detections through ``to_cpu`` (``tensor.detach().cpu()``), so NMS and the box rescaling
run on the CPU; the per-layer metrics are read with ``to_cpu(...).item()``. Checkpoints: ``torch.save(
model.state_dict(), ...)``, then ``torch.load(path)`` (no map_location) into a model already moved with ``.to(device)``.

Modeled on: eriklindernoren/PyTorch-YOLOv3, train.py, detect.py, models.py, utils/utils.py, utils/datasets.py,
utils/augmentations.py, utils/parse_config.py and config/yolov3-tiny.cfg at commit
239e51853677daaed3f9a8ee8d7ed51619a2fad8 (https://github.com/eriklindernoren/PyTorch-YOLOv3/tree/239e518).

Kept: models.py (`create_modules`, `Upsample`, `YOLOLayer`, `Darknet`), `build_targets`, `non_max_suppression` (the
pure-torch weighted merge), the box helpers, `ListDataset` (multiscale `collate_fn`, flips), `ImageFolder`, the config
parsers and train.py's and detect.py's ``__main__`` bodies (gradient accumulation, checkpoints, the reload).
Changed to run here: the data (coloured boxes of 3 classes on noise, YOLO label files) and the .cfg/.data/.names files
are written to a temporary folder; images are .npy arrays read with `np.load` (no PIL/torchvision), so label paths also
map ``.npy`` to ``.txt``; the ``__main__`` bodies are `train_main`/`detect_main` taking argument lists (``--n_cpu 0``),
parsers built from tables; TensorBoard and the AsciiTable are one printed line; detect.py `np.save`s the boxes instead
of drawing them; train.py's per-epoch mAP evaluation (test.py), three YOLO metrics, shortcut layers and the darknet
weight-file code are left out; numpy is seeded for the flips; assignments joined, comments cut, method blank lines dropped.
Shrunk: filters 16..1024 are 8..128, 3 classes, 128 px (multiscale 32..224), 16 images, batch 4, 2+1 epochs, 4 detected.
"""
import argparse
import glob
import os
import random
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable
from torch.utils.data import DataLoader, Dataset

# ---------------------------------------------------------------- utils/parse_config.py, utils/utils.py
def parse_model_config(path):
    """Parses the yolo-v3 layer configuration file and returns module definitions"""
    lines = open(path, 'r').read().split('\n')
    lines = [x.rstrip().lstrip() for x in lines if x and not x.startswith('#')]  # get rid of fringe whitespaces
    module_defs = []
    for line in lines:
        if line.startswith('['):  # This marks the start of a new block
            module_defs.append({})
            module_defs[-1]['type'] = line[1:-1].rstrip()
            if module_defs[-1]['type'] == 'convolutional':
                module_defs[-1]['batch_normalize'] = 0
        else:
            key, value = line.split("=")
            module_defs[-1][key.rstrip()] = value.strip()
    return module_defs

def parse_data_config(path):
    """Parses the data configuration file"""
    options = {'gpus': '0,1,2,3', 'num_workers': '10'}
    for line in [line.strip() for line in open(path, 'r').readlines()]:
        if line == '' or line.startswith('#'):
            continue
        key, value = line.split('=')
        options[key.strip()] = value.strip()
    return options

def to_cpu(tensor):
    return tensor.detach().cpu()

def load_classes(path):
    """Loads class labels at 'path'"""
    return open(path, "r").read().split("\n")[:-1]

def weights_init_normal(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif classname.find("BatchNorm2d") != -1:
        torch.nn.init.normal_(m.weight.data, 1.0, 0.02)
        torch.nn.init.constant_(m.bias.data, 0.0)

def rescale_boxes(boxes, current_dim, original_shape):
    """ Rescales bounding boxes to the original shape """
    orig_h, orig_w = original_shape
    pad_x = max(orig_h - orig_w, 0) * (current_dim / max(original_shape))
    pad_y = max(orig_w - orig_h, 0) * (current_dim / max(original_shape))
    unpad_h, unpad_w = current_dim - pad_y, current_dim - pad_x  # size after padding is removed
    boxes[:, 0] = ((boxes[:, 0] - pad_x // 2) / unpad_w) * orig_w
    boxes[:, 1] = ((boxes[:, 1] - pad_y // 2) / unpad_h) * orig_h
    boxes[:, 2] = ((boxes[:, 2] - pad_x // 2) / unpad_w) * orig_w
    boxes[:, 3] = ((boxes[:, 3] - pad_y // 2) / unpad_h) * orig_h
    return boxes

def xywh2xyxy(x):
    y = x.new(x.shape)
    y[..., 0] = x[..., 0] - x[..., 2] / 2
    y[..., 1] = x[..., 1] - x[..., 3] / 2
    y[..., 2] = x[..., 0] + x[..., 2] / 2
    y[..., 3] = x[..., 1] + x[..., 3] / 2
    return y

def bbox_wh_iou(wh1, wh2):
    wh2 = wh2.t()
    (w1, h1), (w2, h2) = (wh1[0], wh1[1]), (wh2[0], wh2[1])
    inter_area = torch.min(w1, w2) * torch.min(h1, h2)
    union_area = (w1 * h1 + 1e-16) + w2 * h2 - inter_area
    return inter_area / union_area

def bbox_iou(box1, box2, x1y1x2y2=True):
    if not x1y1x2y2:
        b1_x1, b1_x2 = box1[:, 0] - box1[:, 2] / 2, box1[:, 0] + box1[:, 2] / 2
        b1_y1, b1_y2 = box1[:, 1] - box1[:, 3] / 2, box1[:, 1] + box1[:, 3] / 2
        b2_x1, b2_x2 = box2[:, 0] - box2[:, 2] / 2, box2[:, 0] + box2[:, 2] / 2
        b2_y1, b2_y2 = box2[:, 1] - box2[:, 3] / 2, box2[:, 1] + box2[:, 3] / 2
    else:
        b1_x1, b1_y1, b1_x2, b1_y2 = box1[:, 0], box1[:, 1], box1[:, 2], box1[:, 3]
        b2_x1, b2_y1, b2_x2, b2_y2 = box2[:, 0], box2[:, 1], box2[:, 2], box2[:, 3]
    inter_rect_x1, inter_rect_y1 = torch.max(b1_x1, b2_x1), torch.max(b1_y1, b2_y1)
    inter_rect_x2, inter_rect_y2 = torch.min(b1_x2, b2_x2), torch.min(b1_y2, b2_y2)
    inter_area = torch.clamp(inter_rect_x2 - inter_rect_x1 + 1, min=0) * torch.clamp(inter_rect_y2 - inter_rect_y1 + 1, min=0)
    b1_area = (b1_x2 - b1_x1 + 1) * (b1_y2 - b1_y1 + 1)
    b2_area = (b2_x2 - b2_x1 + 1) * (b2_y2 - b2_y1 + 1)
    iou = inter_area / (b1_area + b2_area - inter_area + 1e-16)
    return iou

def non_max_suppression(prediction, conf_thres=0.5, nms_thres=0.4):
    """Removes detections with lower object confidence score than 'conf_thres' and performs Non-Maximum Suppression.
    Returns detections with shape: (x1, y1, x2, y2, object_conf, class_score, class_pred)"""
    # From (center x, center y, width, height) to (x1, y1, x2, y2)
    prediction[..., :4] = xywh2xyxy(prediction[..., :4])
    output = [None for _ in range(len(prediction))]
    for image_i, image_pred in enumerate(prediction):
        image_pred = image_pred[image_pred[:, 4] >= conf_thres]
        if not image_pred.size(0):
            continue
        score = image_pred[:, 4] * image_pred[:, 5:].max(1)[0]
        image_pred = image_pred[(-score).argsort()]
        class_confs, class_preds = image_pred[:, 5:].max(1, keepdim=True)
        detections = torch.cat((image_pred[:, :5], class_confs.float(), class_preds.float()), 1)
        keep_boxes = []
        while detections.size(0):
            large_overlap = bbox_iou(detections[0, :4].unsqueeze(0), detections[:, :4]) > nms_thres
            label_match = detections[0, -1] == detections[:, -1]
            invalid = large_overlap & label_match
            weights = detections[invalid, 4:5]
            detections[0, :4] = (weights * detections[invalid, :4]).sum(0) / weights.sum()
            keep_boxes += [detections[0]]
            detections = detections[~invalid]
        if keep_boxes:
            output[image_i] = torch.stack(keep_boxes)
    return output

def build_targets(pred_boxes, pred_cls, target, anchors, ignore_thres):
    BoolTensor = torch.cuda.BoolTensor if pred_boxes.is_cuda else torch.BoolTensor
    FloatTensor = torch.cuda.FloatTensor if pred_boxes.is_cuda else torch.FloatTensor
    nB, nA, nC, nG = pred_boxes.size(0), pred_boxes.size(1), pred_cls.size(-1), pred_boxes.size(2)
    obj_mask = BoolTensor(nB, nA, nG, nG).fill_(0)
    noobj_mask = BoolTensor(nB, nA, nG, nG).fill_(1)
    class_mask = FloatTensor(nB, nA, nG, nG).fill_(0)
    iou_scores = FloatTensor(nB, nA, nG, nG).fill_(0)
    tx, ty, tw, th = [FloatTensor(nB, nA, nG, nG).fill_(0) for _ in range(4)]
    tcls = FloatTensor(nB, nA, nG, nG, nC).fill_(0)
    target_boxes = target[:, 2:6] * nG
    gxy = target_boxes[:, :2]
    gwh = target_boxes[:, 2:]
    ious = torch.stack([bbox_wh_iou(anchor, gwh) for anchor in anchors])
    best_ious, best_n = ious.max(0)
    b, target_labels = target[:, :2].long().t()
    (gx, gy), (gw, gh) = gxy.t(), gwh.t()
    gi, gj = gxy.long().t()
    obj_mask[b, best_n, gj, gi] = 1
    noobj_mask[b, best_n, gj, gi] = 0
    # Set noobj mask to zero where iou exceeds ignore threshold
    for i, anchor_ious in enumerate(ious.t()):
        noobj_mask[b[i], anchor_ious > ignore_thres, gj[i], gi[i]] = 0
    tx[b, best_n, gj, gi] = gx - gx.floor()
    ty[b, best_n, gj, gi] = gy - gy.floor()
    tw[b, best_n, gj, gi] = torch.log(gw / anchors[best_n][:, 0] + 1e-16)
    th[b, best_n, gj, gi] = torch.log(gh / anchors[best_n][:, 1] + 1e-16)
    tcls[b, best_n, gj, gi, target_labels] = 1
    class_mask[b, best_n, gj, gi] = (pred_cls[b, best_n, gj, gi].argmax(-1) == target_labels).float()
    iou_scores[b, best_n, gj, gi] = bbox_iou(pred_boxes[b, best_n, gj, gi], target_boxes, x1y1x2y2=False)
    tconf = obj_mask.float()
    return iou_scores, class_mask, obj_mask, noobj_mask, tx, ty, tw, th, tcls, tconf

# ---------------------------------------------------------------- utils/augmentations.py, utils/datasets.py
def horisontal_flip(images, targets):
    images = torch.flip(images, [-1])
    targets[:, 2] = 1 - targets[:, 2]
    return images, targets

def pad_to_square(img, pad_value):
    c, h, w = img.shape
    dim_diff = np.abs(h - w)
    pad1, pad2 = dim_diff // 2, dim_diff - dim_diff // 2  # (upper / left) padding and (lower / right) padding
    pad = (0, 0, pad1, pad2) if h <= w else (pad1, pad2, 0, 0)
    img = F.pad(img, pad, "constant", value=pad_value)
    return img, pad

def resize(image, size):
    image = F.interpolate(image.unsqueeze(0), size=size, mode="nearest").squeeze(0)
    return image

class ImageFolder(Dataset):
    def __init__(self, folder_path, img_size=416):
        self.files = sorted(glob.glob("%s/*.*" % folder_path))
        self.img_size = img_size
    def __getitem__(self, index):
        img_path = self.files[index % len(self.files)]
        img = torch.from_numpy(np.load(img_path)).permute(2, 0, 1).float().div(255)  # transforms.ToTensor()(Image.open(img_path))
        img, _ = pad_to_square(img, 0)  # Pad to square resolution
        img = resize(img, self.img_size)
        return img_path, img
    def __len__(self):
        return len(self.files)

class ListDataset(Dataset):
    def __init__(self, list_path, img_size=416, augment=True, multiscale=True, normalized_labels=True):
        with open(list_path, "r") as file:
            self.img_files = file.readlines()
        self.label_files = [path.replace("images", "labels").replace(".png", ".txt").replace(".jpg", ".txt").replace(".npy", ".txt")
                            for path in self.img_files]
        self.img_size, self.max_objects, self.augment, self.multiscale = img_size, 100, augment, multiscale
        self.normalized_labels = normalized_labels
        self.min_size, self.max_size, self.batch_count = self.img_size - 3 * 32, self.img_size + 3 * 32, 0
    def __getitem__(self, index):
        img_path = self.img_files[index % len(self.img_files)].rstrip()
        img = torch.from_numpy(np.load(img_path)).permute(2, 0, 1).float().div(255)  # transforms.ToTensor()(Image.open(...))
        _, h, w = img.shape
        h_factor, w_factor = (h, w) if self.normalized_labels else (1, 1)
        img, pad = pad_to_square(img, 0)  # Pad to square resolution
        _, padded_h, padded_w = img.shape
        label_path = self.label_files[index % len(self.img_files)].rstrip()
        targets = None
        if os.path.exists(label_path):
            boxes = torch.from_numpy(np.loadtxt(label_path).reshape(-1, 5))
            # Extract coordinates for unpadded + unscaled image, adjusted for added padding
            x1 = w_factor * (boxes[:, 1] - boxes[:, 3] / 2) + pad[0]
            y1 = h_factor * (boxes[:, 2] - boxes[:, 4] / 2) + pad[2]
            x2 = w_factor * (boxes[:, 1] + boxes[:, 3] / 2) + pad[1]
            y2 = h_factor * (boxes[:, 2] + boxes[:, 4] / 2) + pad[3]
            boxes[:, 1] = ((x1 + x2) / 2) / padded_w
            boxes[:, 2] = ((y1 + y2) / 2) / padded_h
            boxes[:, 3] *= w_factor / padded_w
            boxes[:, 4] *= h_factor / padded_h
            targets = torch.zeros((len(boxes), 6))
            targets[:, 1:] = boxes
        if self.augment:  # Apply augmentations
            if np.random.random() < 0.5:
                img, targets = horisontal_flip(img, targets)
        return img_path, img, targets
    def collate_fn(self, batch):
        paths, imgs, targets = list(zip(*batch))
        targets = [boxes for boxes in targets if boxes is not None]
        for i, boxes in enumerate(targets):
            boxes[:, 0] = i
        targets = torch.cat(targets, 0)
        # Selects new image size every tenth batch
        if self.multiscale and self.batch_count % 10 == 0:
            self.img_size = random.choice(range(self.min_size, self.max_size + 1, 32))
        imgs = torch.stack([resize(img, self.img_size) for img in imgs])
        self.batch_count += 1
        return paths, imgs, targets
    def __len__(self):
        return len(self.img_files)

# ---------------------------------------------------------------- models.py
def create_modules(module_defs):
    """Constructs module list of layer blocks from module configuration in module_defs"""
    hyperparams = module_defs.pop(0)
    output_filters = [int(hyperparams["channels"])]
    module_list = nn.ModuleList()
    for module_i, module_def in enumerate(module_defs):
        modules = nn.Sequential()
        if module_def["type"] == "convolutional":
            bn, filters, kernel_size = int(module_def["batch_normalize"]), int(module_def["filters"]), int(module_def["size"])
            pad = (kernel_size - 1) // 2
            modules.add_module(f"conv_{module_i}", nn.Conv2d(in_channels=output_filters[-1], out_channels=filters,
                                                             kernel_size=kernel_size, stride=int(module_def["stride"]),
                                                             padding=pad, bias=not bn))
            if bn:
                modules.add_module(f"batch_norm_{module_i}", nn.BatchNorm2d(filters, momentum=0.9, eps=1e-5))
            if module_def["activation"] == "leaky":
                modules.add_module(f"leaky_{module_i}", nn.LeakyReLU(0.1))
        elif module_def["type"] == "maxpool":
            kernel_size, stride = int(module_def["size"]), int(module_def["stride"])
            if kernel_size == 2 and stride == 1:
                modules.add_module(f"_debug_padding_{module_i}", nn.ZeroPad2d((0, 1, 0, 1)))
            modules.add_module(f"maxpool_{module_i}", nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=int((kernel_size - 1) // 2)))
        elif module_def["type"] == "upsample":
            modules.add_module(f"upsample_{module_i}", Upsample(scale_factor=int(module_def["stride"]), mode="nearest"))
        elif module_def["type"] == "route":
            layers = [int(x) for x in module_def["layers"].split(",")]
            filters = sum([output_filters[1:][i] for i in layers])
            modules.add_module(f"route_{module_i}", nn.Sequential())
        elif module_def["type"] == "yolo":
            anchor_idxs = [int(x) for x in module_def["mask"].split(",")]
            anchors = [int(x) for x in module_def["anchors"].split(",")]  # Extract anchors
            anchors = [(anchors[i], anchors[i + 1]) for i in range(0, len(anchors), 2)]
            anchors = [anchors[i] for i in anchor_idxs]
            num_classes = int(module_def["classes"])
            img_size = int(hyperparams["height"])
            modules.add_module(f"yolo_{module_i}", YOLOLayer(anchors, num_classes, img_size))
        module_list.append(modules)
        output_filters.append(filters)
    return hyperparams, module_list

class Upsample(nn.Module):
    """ nn.Upsample is deprecated """
    def __init__(self, scale_factor, mode="nearest"):
        super(Upsample, self).__init__()
        self.scale_factor, self.mode = scale_factor, mode
    def forward(self, x):
        return F.interpolate(x, scale_factor=self.scale_factor, mode=self.mode)

class YOLOLayer(nn.Module):
    """Detection layer"""
    def __init__(self, anchors, num_classes, img_dim=416):
        super(YOLOLayer, self).__init__()
        self.anchors, self.num_anchors, self.num_classes, self.ignore_thres = anchors, len(anchors), num_classes, 0.5
        self.mse_loss, self.bce_loss = nn.MSELoss(), nn.BCELoss()
        self.obj_scale, self.noobj_scale = 1, 100
        self.metrics, self.img_dim, self.grid_size = {}, img_dim, 0  # grid size
    def compute_grid_offsets(self, grid_size, cuda=True):
        self.grid_size = grid_size
        g = self.grid_size
        FloatTensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
        self.stride = self.img_dim / self.grid_size
        # Calculate offsets for each grid
        self.grid_x = torch.arange(g).repeat(g, 1).view([1, 1, g, g]).type(FloatTensor)
        self.grid_y = torch.arange(g).repeat(g, 1).t().view([1, 1, g, g]).type(FloatTensor)
        self.scaled_anchors = FloatTensor([(a_w / self.stride, a_h / self.stride) for a_w, a_h in self.anchors])
        self.anchor_w = self.scaled_anchors[:, 0:1].view((1, self.num_anchors, 1, 1))
        self.anchor_h = self.scaled_anchors[:, 1:2].view((1, self.num_anchors, 1, 1))
    def forward(self, x, targets=None, img_dim=None):
        # Tensors for cuda support
        FloatTensor = torch.cuda.FloatTensor if x.is_cuda else torch.FloatTensor
        LongTensor = torch.cuda.LongTensor if x.is_cuda else torch.LongTensor
        ByteTensor = torch.cuda.ByteTensor if x.is_cuda else torch.ByteTensor
        self.img_dim = img_dim
        num_samples, grid_size = x.size(0), x.size(2)
        prediction = x.view(num_samples, self.num_anchors, self.num_classes + 5, grid_size, grid_size).permute(0, 1, 3, 4, 2).contiguous()
        x = torch.sigmoid(prediction[..., 0])  # Center x
        y = torch.sigmoid(prediction[..., 1])  # Center y
        w = prediction[..., 2]  # Width
        h = prediction[..., 3]  # Height
        pred_conf = torch.sigmoid(prediction[..., 4])  # Conf
        pred_cls = torch.sigmoid(prediction[..., 5:])  # Cls pred.
        if grid_size != self.grid_size:
            self.compute_grid_offsets(grid_size, cuda=x.is_cuda)
        # Add offset and scale with anchors
        pred_boxes = FloatTensor(prediction[..., :4].shape)
        pred_boxes[..., 0] = x.data + self.grid_x
        pred_boxes[..., 1] = y.data + self.grid_y
        pred_boxes[..., 2] = torch.exp(w.data) * self.anchor_w
        pred_boxes[..., 3] = torch.exp(h.data) * self.anchor_h
        output = torch.cat((pred_boxes.view(num_samples, -1, 4) * self.stride, pred_conf.view(num_samples, -1, 1),
                            pred_cls.view(num_samples, -1, self.num_classes)), -1)
        if targets is None:
            return output, 0
        else:
            iou_scores, class_mask, obj_mask, noobj_mask, tx, ty, tw, th, tcls, tconf = build_targets(
                pred_boxes=pred_boxes, pred_cls=pred_cls, target=targets, anchors=self.scaled_anchors, ignore_thres=self.ignore_thres)
            # Loss : Mask outputs to ignore non-existing objects (except with conf. loss)
            loss_x = self.mse_loss(x[obj_mask], tx[obj_mask])
            loss_y = self.mse_loss(y[obj_mask], ty[obj_mask])
            loss_w = self.mse_loss(w[obj_mask], tw[obj_mask])
            loss_h = self.mse_loss(h[obj_mask], th[obj_mask])
            loss_conf_obj = self.bce_loss(pred_conf[obj_mask], tconf[obj_mask])
            loss_conf_noobj = self.bce_loss(pred_conf[noobj_mask], tconf[noobj_mask])
            loss_conf = self.obj_scale * loss_conf_obj + self.noobj_scale * loss_conf_noobj
            loss_cls = self.bce_loss(pred_cls[obj_mask], tcls[obj_mask])
            total_loss = loss_x + loss_y + loss_w + loss_h + loss_conf + loss_cls
            # Metrics (recall75, precision and conf_noobj are left out)
            cls_acc = 100 * class_mask[obj_mask].mean()
            conf_obj = pred_conf[obj_mask].mean()
            recall50 = torch.sum((iou_scores > 0.5).float() * (pred_conf > 0.5).float() * class_mask * tconf) / (obj_mask.sum() + 1e-16)
            self.metrics = {
                "loss": to_cpu(total_loss).item(), "x": to_cpu(loss_x).item(), "y": to_cpu(loss_y).item(),
                "w": to_cpu(loss_w).item(), "h": to_cpu(loss_h).item(), "conf": to_cpu(loss_conf).item(),
                "cls": to_cpu(loss_cls).item(), "cls_acc": to_cpu(cls_acc).item(), "recall50": to_cpu(recall50).item(),
                "conf_obj": to_cpu(conf_obj).item(), "grid_size": grid_size}
            return output, total_loss

class Darknet(nn.Module):
    """YOLOv3 object detection model"""
    def __init__(self, config_path, img_size=416):
        super(Darknet, self).__init__()
        self.module_defs = parse_model_config(config_path)
        self.hyperparams, self.module_list = create_modules(self.module_defs)
        self.yolo_layers = [layer[0] for layer in self.module_list if hasattr(layer[0], "metrics")]
        self.img_size, self.seen = img_size, 0
        self.header_info = np.array([0, 0, 0, self.seen, 0], dtype=np.int32)
    def forward(self, x, targets=None):
        img_dim, loss = x.shape[2], 0
        layer_outputs, yolo_outputs = [], []
        for i, (module_def, module) in enumerate(zip(self.module_defs, self.module_list)):
            if module_def["type"] in ["convolutional", "upsample", "maxpool"]:
                x = module(x)
            elif module_def["type"] == "route":
                x = torch.cat([layer_outputs[int(layer_i)] for layer_i in module_def["layers"].split(",")], 1)
            elif module_def["type"] == "yolo":
                x, layer_loss = module[0](x, targets, img_dim)
                loss += layer_loss
                yolo_outputs.append(x)
            layer_outputs.append(x)
        yolo_outputs = to_cpu(torch.cat(yolo_outputs, 1))
        return yolo_outputs if targets is None else (loss, yolo_outputs)

# ---------------------------------------------------------------- train.py
def train_main(argv):
    parser = argparse.ArgumentParser()
    for flag, kwargs in [  # the author's options, help strings dropped
            ("--epochs", dict(type=int, default=100)), ("--batch_size", dict(type=int, default=8)),
            ("--gradient_accumulations", dict(type=int, default=2)), ("--model_def", dict(type=str, default="config/yolov3.cfg")),
            ("--data_config", dict(type=str, default="config/coco.data")), ("--pretrained_weights", dict(type=str)),
            ("--n_cpu", dict(type=int, default=8)), ("--img_size", dict(type=int, default=416)),
            ("--checkpoint_interval", dict(type=int, default=1)), ("--evaluation_interval", dict(type=int, default=1)),
            ("--compute_map", dict(default=False)), ("--multiscale_training", dict(default=True))]:
        parser.add_argument(flag, **kwargs)
    opt = parser.parse_args(argv)
    print(opt)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    os.makedirs("output", exist_ok=True)
    os.makedirs("checkpoints", exist_ok=True)
    data_config = parse_data_config(opt.data_config)
    train_path, valid_path = data_config["train"], data_config["valid"]  # (class_names served the evaluation)
    model = Darknet(opt.model_def).to(device)
    model.apply(weights_init_normal)
    if opt.pretrained_weights:
        if opt.pretrained_weights.endswith(".pth"):
            model.load_state_dict(torch.load(opt.pretrained_weights))
    dataset = ListDataset(train_path, augment=True, multiscale=opt.multiscale_training)
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=opt.batch_size, shuffle=True, num_workers=opt.n_cpu,
                                             pin_memory=True, collate_fn=dataset.collate_fn)
    optimizer = torch.optim.Adam(model.parameters())
    metrics = ["grid_size", "loss", "x", "y", "w", "h", "conf", "cls", "cls_acc", "recall50", "conf_obj"]
    for epoch in range(opt.epochs):
        model.train()
        for batch_i, (_, imgs, targets) in enumerate(dataloader):
            batches_done = len(dataloader) * epoch + batch_i
            imgs = Variable(imgs.to(device))
            targets = Variable(targets.to(device), requires_grad=False)
            loss, outputs = model(imgs, targets)
            loss.backward()
            if batches_done % opt.gradient_accumulations:  # Accumulates gradient before each step
                optimizer.step()
                optimizer.zero_grad()
            # Log progress (a plain print of the AsciiTable of the YOLO layers' metrics; no TensorBoard)
            print("---- [Epoch %d/%d, Batch %d/%d] ----" % (epoch, opt.epochs, batch_i, len(dataloader)), " ".join(
                "%s %s" % (m, "/".join("%.4f" % yolo.metrics.get(m, 0) for yolo in model.yolo_layers)) for m in metrics), f"Total loss {loss.item()}")
            model.seen += imgs.size(0)
        if epoch % opt.checkpoint_interval == 0:
            torch.save(model.state_dict(), f"checkpoints/yolov3_ckpt_%d.pth" % epoch)

# ---------------------------------------------------------------- detect.py
def detect_main(argv):
    parser = argparse.ArgumentParser()
    for flag, kwargs in [
            ("--image_folder", dict(type=str, default="data/samples")), ("--model_def", dict(type=str, default="config/yolov3.cfg")),
            ("--weights_path", dict(type=str, default="weights/yolov3.weights")), ("--class_path", dict(type=str, default="data/coco.names")),
            ("--conf_thres", dict(type=float, default=0.8)), ("--nms_thres", dict(type=float, default=0.4)),
            ("--batch_size", dict(type=int, default=1)), ("--n_cpu", dict(type=int, default=0)),
            ("--img_size", dict(type=int, default=416)), ("--checkpoint_model", dict(type=str))]:
        parser.add_argument(flag, **kwargs)
    opt = parser.parse_args(argv)
    print(opt)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    os.makedirs("output", exist_ok=True)
    model = Darknet(opt.model_def, img_size=opt.img_size).to(device)
    if opt.weights_path.endswith(".weights"):
        raise NotImplementedError("model.load_darknet_weights is left out")
    else:
        model.load_state_dict(torch.load(opt.weights_path))
    model.eval()  # Set in evaluation mode
    dataloader = DataLoader(ImageFolder(opt.image_folder, img_size=opt.img_size), batch_size=opt.batch_size,
                            shuffle=False, num_workers=opt.n_cpu)
    classes = load_classes(opt.class_path)  # Extracts class labels from file
    Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor
    imgs, img_detections = [], []  # Stores image paths and detections for each image index
    print("\nPerforming object detection:")
    for batch_i, (img_paths, input_imgs) in enumerate(dataloader):
        input_imgs = Variable(input_imgs.type(Tensor))  # Configure input
        with torch.no_grad():  # Get detections
            detections = model(input_imgs)
            detections = non_max_suppression(detections, opt.conf_thres, opt.nms_thres)
        imgs.extend(img_paths)
        img_detections.extend(detections)
    # Iterate through images and save the detections (the author draws them with matplotlib)
    for img_i, (path, detections) in enumerate(zip(imgs, img_detections)):
        print("(%d) Image: '%s'" % (img_i, path))
        img = np.load(path)
        if detections is not None:
            detections = rescale_boxes(detections, opt.img_size, img.shape[:2])  # Rescale boxes to original image
            for x1, y1, x2, y2, conf, cls_conf, cls_pred in detections:
                print("\t+ Label: %s, Conf: %.5f" % (classes[int(cls_pred)], cls_conf.item()))
            filename = path.split("/")[-1].split(".")[0]
            np.save(f"output/{filename}.npy", detections.numpy())
    return sum(d is not None for d in img_detections)

# ---------------------------------------------------------------- config/create_custom_model.sh, data/custom
def write_custom_data(root, n_train, n_samples, img_size=128, classes=("square", "bar", "dot"), seed=0):
    """yolov3-tiny.cfg with its filters shrunk and the anchors scaled to 128 px; .data, .names and YOLO-format labels"""
    rng = np.random.RandomState(seed)
    conv = "[convolutional]\nbatch_normalize=1\nfilters=%d\nsize=%d\nstride=1\npad=1\nactivation=leaky"
    head = "[convolutional]\nsize=1\nstride=1\npad=1\nfilters=%d\nactivation=linear" % (3 * (len(classes) + 5))
    yolo = "[yolo]\nmask = %s\nanchors = 3,4, 7,8, 11,18, 25,25, 42,52, 106,98\nclasses=" + "%d\nnum=6" % len(classes)
    blocks = ["[net]\nbatch=4\nsubdivisions=1\nwidth=%d\nheight=%d\nchannels=3" % (img_size, img_size)]
    for i, f in enumerate([8, 16, 32, 64, 64, 128]):
        blocks += [conv % (f, 3), "[maxpool]\nsize=2\nstride=%d" % (2 if i < 5 else 1)]
    blocks += [conv % (128, 3), conv % (64, 1), conv % (128, 3), head, yolo % "3,4,5", "[route]\nlayers = -4", conv % (32, 1),
               "[upsample]\nstride=2", "[route]\nlayers = -1, 8", conv % (64, 3), head, yolo % "1,2,3"]
    open(os.path.join(root, "yolov3-custom.cfg"), "w").write("\n\n".join(blocks) + "\n")
    open(os.path.join(root, "classes.names"), "w").write("\n".join(classes) + "\n")
    lists = {"train": [], "samples": []}  # (the valid list is the train list: train.py's evaluation is left out)
    for i in range(n_train + n_samples):
        img, rows = rng.randint(0, 50, (img_size, img_size, 3)).astype(np.uint8), []
        for _ in range(rng.randint(1, 4)):
            c = rng.randint(len(classes))
            w, h = [(0.25, 0.25), (0.4, 0.12), (0.1, 0.1)][c]
            x, y = rng.uniform(w / 2, 1 - w / 2), rng.uniform(h / 2, 1 - h / 2)
            x0, y0 = int((x - w / 2) * img_size), int((y - h / 2) * img_size)
            img[y0:y0 + int(h * img_size), x0:x0 + int(w * img_size), c] = 230
            rows.append("%d %.6f %.6f %.6f %.6f" % (c, x, y, w, h))
        split = "train" if i < n_train else "samples"  # detect.py's image folder (no labels)
        path = os.path.join(root, "images" if split == "train" else "samples", "%05d.npy" % i)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        np.save(path, img)
        lists[split].append(path)
        if split == "train":
            os.makedirs(os.path.join(root, "labels"), exist_ok=True)
            open(path.replace("images", "labels").replace(".npy", ".txt"), "w").write("\n".join(rows) + "\n")
    open(os.path.join(root, "train.txt"), "w").write("\n".join(lists["train"]) + "\n")
    open(os.path.join(root, "custom.data"), "w").write("classes=%d\ntrain=%s\nvalid=%s\nnames=%s\n" % (
        len(classes), os.path.join(root, "train.txt"), os.path.join(root, "train.txt"), os.path.join(root, "classes.names")))

if __name__ == "__main__":
    np.random.seed(0)  # the flips draw from numpy's global generator: seeded so the output repeats
    with tempfile.TemporaryDirectory() as root:
        write_custom_data(root, n_train=16, n_samples=4)
        os.chdir(root)
        config = ["--model_def", "yolov3-custom.cfg", "--img_size", "128", "--n_cpu", "0"]
        train_main(config + ["--data_config", "custom.data", "--epochs", "2", "--batch_size", "4"])
        train_main(config + ["--data_config", "custom.data", "--epochs", "1", "--batch_size", "4",
                             "--pretrained_weights", "checkpoints/yolov3_ckpt_1.pth"])
        n = detect_main(config + ["--image_folder", "samples", "--weights_path", "checkpoints/yolov3_ckpt_0.pth",
                                  "--class_path", "classes.names", "--conf_thres", "0.3"])
        os.chdir("/")
    print("done: detections in %d of 4 sample images" % n)
