"""Trains a tiny DETR (frozen-BN CNN backbone, sine position embedding, transformer encoder/decoder, Hungarian
matching, set criterion) on synthetic COCO-format detection data, checkpoints it, resumes and evaluates, as
facebookresearch/detr does: ``device = torch.device(args.device)`` and ``model.to(device)`` in `main`, the criterion
(``empty_weight`` buffer) moved in `build` with ``criterion.to(device)``, `train_one_epoch`/`evaluate` moving the
``NestedTensor`` batch with ``samples.to(device)`` and each target dict key by key, the matcher's cost matrix read with
``.cpu()`` for scipy, losses built with ``torch.full``/``torch.as_tensor(..., device=...)``, ``torch.arange(...,
device=x.device)`` in the position embedding, ``.item()`` reads, and ``torch.load(args.resume, map_location='cpu')``.

Modeled on: facebookresearch/detr, main.py, engine.py, models/{detr,matcher,backbone,position_encoding,transformer}.py,
util/misc.py, util/box_ops.py, datasets/coco.py, datasets/transforms.py at commit 29901c51d7fe8712168b8d0d64351170bc0f83e0
(https://github.com/facebookresearch/detr/blob/29901c51d7fe8712168b8d0d64351170bc0f83e0/main.py,
https://github.com/facebookresearch/detr/blob/29901c51d7fe8712168b8d0d64351170bc0f83e0/models/detr.py).

Kept: `NestedTensor.to`, `nested_tensor_from_tensor_list`, `collate_fn`, `accuracy`, `reduce_dict`, `MetricLogger`
(``.item()``), box_ops, `ConvertCocoPolysToMask`, `Normalize`, `FrozenBatchNorm2d`, `BackboneBase`, `Joiner`,
`PositionEmbeddingSine`, `Transformer` (``torch.zeros_like(query_embed)``), `DETR`, `HungarianMatcher`, `SetCriterion`
(labels/cardinality/boxes), `PostProcess`, `MLP`, `build`, `train_one_epoch`, `evaluate` and `main` (backbone param
group, AdamW, StepLR, checkpoint dict, resume that skips the optimizer under --eval).

Changed to run here: a 3-stage conv body replaces torchvision's ResNet; images are ``.npy`` files with COCO json in a
temp folder; a mean-best-IoU score fed by ``.tolist()`` replaces CocoEvaluator; ``--device`` defaults to ``cuda`` only
when available; ``torch.load`` adds ``weights_only=False`` (``args`` is pickled in the checkpoint); distributed,
masks/panoptic, augmentation and the auxiliary decoder losses are left out.
Shrunk: 16 train / 6 val images of 28-40 px, 1-3 boxes, 4 classes, hidden 32, 2+2 layers, 8 queries, 2+1 epochs.
"""
import argparse
import json
import math
import os
import random
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment
from torch import nn
from torch.utils.data import DataLoader

def box_cxcywh_to_xyxy(x):
    x_c, y_c, w, h = x.unbind(-1)
    return torch.stack([(x_c - 0.5 * w), (y_c - 0.5 * h), (x_c + 0.5 * w), (y_c + 0.5 * h)], dim=-1)

def box_xyxy_to_cxcywh(x):
    x0, y0, x1, y1 = x.unbind(-1)
    return torch.stack([(x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0), (y1 - y0)], dim=-1)

def box_iou(boxes1, boxes2):
    area1 = (boxes1[:, 2] - boxes1[:, 0]) * (boxes1[:, 3] - boxes1[:, 1])  # torchvision box_area
    area2 = (boxes2[:, 2] - boxes2[:, 0]) * (boxes2[:, 3] - boxes2[:, 1])
    lt, rb = torch.max(boxes1[:, None, :2], boxes2[:, :2]), torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    union = area1[:, None] + area2 - inter
    return inter / union, union

def generalized_box_iou(boxes1, boxes2):
    assert (boxes1[:, 2:] >= boxes1[:, :2]).all()
    assert (boxes2[:, 2:] >= boxes2[:, :2]).all()
    iou, union = box_iou(boxes1, boxes2)
    lt, rb = torch.min(boxes1[:, None, :2], boxes2[:, :2]), torch.max(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    area = wh[:, :, 0] * wh[:, :, 1]
    return iou - (area - union) / area

class MetricLogger(object):
    def __init__(self, delimiter="\t"):
        self.totals, self.counts, self.delimiter = defaultdict(float), defaultdict(int), delimiter
    def update(self, **kwargs):
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                v = v.item()
            self.totals[k] += v
            self.counts[k] += 1
    def global_avg(self, k):
        return self.totals[k] / self.counts[k]
    def __str__(self):
        return self.delimiter.join("{}: {:.4f}".format(k, self.global_avg(k))
                                   for k in self.totals if '_unscaled' not in k)

def reduce_dict(input_dict, average=True):
    return input_dict  # world_size < 2

class NestedTensor(object):
    def __init__(self, tensors, mask):
        self.tensors, self.mask = tensors, mask
    def to(self, device):
        cast_tensor = self.tensors.to(device)
        mask = self.mask
        cast_mask = mask.to(device) if mask is not None else None
        return NestedTensor(cast_tensor, cast_mask)
    def decompose(self):
        return self.tensors, self.mask

def nested_tensor_from_tensor_list(tensor_list):
    max_size = [max(s) for s in zip(*[list(img.shape) for img in tensor_list])]
    b, c, h, w = batch_shape = [len(tensor_list)] + max_size
    dtype, device = tensor_list[0].dtype, tensor_list[0].device
    tensor = torch.zeros(batch_shape, dtype=dtype, device=device)
    mask = torch.ones((b, h, w), dtype=torch.bool, device=device)
    for img, pad_img, m in zip(tensor_list, tensor, mask):
        pad_img[: img.shape[0], : img.shape[1], : img.shape[2]].copy_(img)
        m[: img.shape[1], :img.shape[2]] = False
    return NestedTensor(tensor, mask)

def collate_fn(batch):
    batch = list(zip(*batch))
    batch[0] = nested_tensor_from_tensor_list(batch[0])
    return tuple(batch)

def accuracy(output, target, topk=(1,)):
    if target.numel() == 0:
        return [torch.zeros([], device=output.device)]
    pred = output.topk(max(topk), 1, True, True)[1].t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    return [correct[:k].view(-1).float().sum(0).mul_(100.0 / target.size(0)) for k in topk]

class ConvertCocoPolysToMask(object):
    def __call__(self, image, target):
        h, w = image.shape[-2:]
        image_id = torch.tensor([target["image_id"]])
        anno = [obj for obj in target["annotations"] if 'iscrowd' not in obj or obj['iscrowd'] == 0]
        boxes = torch.as_tensor([obj["bbox"] for obj in anno], dtype=torch.float32).reshape(-1, 4)
        boxes[:, 2:] += boxes[:, :2]
        boxes[:, 0::2].clamp_(min=0, max=w)
        boxes[:, 1::2].clamp_(min=0, max=h)
        classes = torch.tensor([obj["category_id"] for obj in anno], dtype=torch.int64)
        keep = (boxes[:, 3] > boxes[:, 1]) & (boxes[:, 2] > boxes[:, 0])
        target = {"boxes": boxes[keep], "labels": classes[keep], "image_id": image_id}
        target["area"] = torch.tensor([obj["area"] for obj in anno])[keep]
        target["iscrowd"] = torch.tensor([obj.get("iscrowd", 0) for obj in anno])[keep]
        target["orig_size"], target["size"] = torch.as_tensor([int(h), int(w)]), torch.as_tensor([int(h), int(w)])
        return image, target

class Normalize(object):
    def __init__(self, mean, std):
        self.mean, self.std = torch.tensor(mean)[:, None, None], torch.tensor(std)[:, None, None]
    def __call__(self, image, target=None):
        image = (image - self.mean) / self.std
        target, (h, w) = target.copy(), image.shape[-2:]
        target["boxes"] = box_xyxy_to_cxcywh(target["boxes"]) / torch.tensor([w, h, w, h], dtype=torch.float32)
        return image, target

class CocoDetection(torch.utils.data.Dataset):
    def __init__(self, img_folder, ann_file, transforms):
        with open(ann_file) as f:
            coco = json.load(f)
        self.img_folder, self._transforms, self.prepare = img_folder, transforms, ConvertCocoPolysToMask()
        self.images = {im["id"]: im for im in coco["images"]}
        self.ids, self.anns = sorted(self.images), defaultdict(list)
        for a in coco["annotations"]:
            self.anns[a["image_id"]].append(a)
    def __len__(self):
        return len(self.ids)
    def __getitem__(self, idx):
        image_id = self.ids[idx]
        img = np.load(os.path.join(self.img_folder, self.images[image_id]["file_name"]))
        img = torch.from_numpy(img).permute(2, 0, 1).float() / 255.  # F.to_tensor
        img, target = self.prepare(img, {'image_id': image_id, 'annotations': self.anns[image_id]})
        return self._transforms(img, target)

def build_dataset(image_set, args):
    root = Path(args.coco_path)
    img_folder, ann_file = root / f"{image_set}2017", root / "annotations" / f"instances_{image_set}2017.json"
    return CocoDetection(img_folder, ann_file, transforms=Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]))

def write_synthetic_coco(root, n_train, n_val, num_classes, seed=0):
    rng = np.random.RandomState(seed)
    os.makedirs(os.path.join(root, "annotations"))
    for image_set, n in (("train", n_train), ("val", n_val)):
        os.makedirs(os.path.join(root, f"{image_set}2017"))
        images, annotations = [], []
        for i in range(n):
            h, w = int(rng.choice([28, 32, 36])), int(rng.choice([32, 36, 40]))
            img = rng.randint(0, 60, size=(h, w, 3)).astype(np.uint8)
            image_id, fname = 1000 * (image_set == "val") + i + 1, f"{image_set}_{i:06d}.npy"
            for _ in range(rng.randint(1, 4)):
                bw, bh = rng.randint(6, 14), rng.randint(6, 14)
                x0, y0, cat = rng.randint(0, w - bw), rng.randint(0, h - bh), int(rng.randint(1, num_classes))
                img[y0:y0 + bh, x0:x0 + bw, cat % 3] = 200 + 15 * cat
                annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": cat,
                                    "bbox": [x0, y0, bw, bh], "area": float(bw * bh), "iscrowd": 0})
            np.save(os.path.join(root, f"{image_set}2017", fname), img)
            images.append({"id": image_id, "file_name": fname, "height": h, "width": w})
        with open(os.path.join(root, "annotations", f"instances_{image_set}2017.json"), "w") as f:
            json.dump({"images": images, "annotations": annotations}, f)

class FrozenBatchNorm2d(torch.nn.Module):
    def __init__(self, n):
        super(FrozenBatchNorm2d, self).__init__()
        self.register_buffer("weight", torch.ones(n))
        self.register_buffer("bias", torch.zeros(n))
        self.register_buffer("running_mean", torch.zeros(n))
        self.register_buffer("running_var", torch.ones(n))
    def forward(self, x):
        w, b = self.weight.reshape(1, -1, 1, 1), self.bias.reshape(1, -1, 1, 1)
        rv, rm = self.running_var.reshape(1, -1, 1, 1), self.running_mean.reshape(1, -1, 1, 1)
        scale = w * (rv + 1e-5).rsqrt()
        return x * scale + (b - rm * scale)

def small_resnet_body(width):
    def stage(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, 2, 1, bias=False), FrozenBatchNorm2d(cout), nn.ReLU())
    return nn.Sequential(stage(3, width), stage(width, width), stage(width, 2 * width))

class BackboneBase(nn.Module):
    def __init__(self, backbone, train_backbone, num_channels):
        super().__init__()
        for name, parameter in backbone.named_parameters():
            if not train_backbone or name.startswith('0.'):  # stem frozen, like 'layer2' not in name
                parameter.requires_grad_(False)
        self.body, self.num_channels = backbone, num_channels
    def forward(self, tensor_list):
        x, m = self.body(tensor_list.tensors), tensor_list.mask
        assert m is not None
        mask = F.interpolate(m[None].float(), size=x.shape[-2:]).to(torch.bool)[0]
        return {"0": NestedTensor(x, mask)}

class Joiner(nn.Sequential):
    def forward(self, tensor_list):
        out = list(self[0](tensor_list).values())
        return out, [self[1](x).to(x.tensors.dtype) for x in out]

class PositionEmbeddingSine(nn.Module):
    def __init__(self, num_pos_feats=64, temperature=10000, normalize=False):
        super().__init__()
        self.num_pos_feats, self.temperature = num_pos_feats, temperature
        self.normalize, self.scale = normalize, 2 * math.pi
    def forward(self, tensor_list):
        x, mask = tensor_list.tensors, tensor_list.mask
        not_mask = ~mask
        y_embed, x_embed = not_mask.cumsum(1, dtype=torch.float32), not_mask.cumsum(2, dtype=torch.float32)
        if self.normalize:
            eps = 1e-6
            y_embed = y_embed / (y_embed[:, -1:, :] + eps) * self.scale
            x_embed = x_embed / (x_embed[:, :, -1:] + eps) * self.scale
        dim_t = torch.arange(self.num_pos_feats, dtype=torch.float32, device=x.device)
        dim_t = self.temperature ** (2 * (dim_t // 2) / self.num_pos_feats)
        pos_x, pos_y = x_embed[:, :, :, None] / dim_t, y_embed[:, :, :, None] / dim_t
        pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()), dim=4).flatten(3)
        pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()), dim=4).flatten(3)
        return torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)

class TransformerEncoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward, dropout):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout)
        self.linear1, self.linear2 = nn.Linear(d_model, dim_feedforward), nn.Linear(dim_feedforward, d_model)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)
    def forward(self, src, src_key_padding_mask=None, pos=None):
        q = k = src if pos is None else src + pos
        src = self.norm1(src + self.dropout1(self.self_attn(q, k, value=src, key_padding_mask=src_key_padding_mask)[0]))
        src2 = self.linear2(self.dropout(F.relu(self.linear1(src))))
        return self.norm2(src + self.dropout2(src2))

class TransformerDecoderLayer(TransformerEncoderLayer):
    def __init__(self, d_model, nhead, dim_feedforward, dropout):
        super().__init__(d_model, nhead, dim_feedforward, dropout)
        self.multihead_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout)
    def forward(self, tgt, memory, memory_key_padding_mask=None, pos=None, query_pos=None):
        q = k = tgt + query_pos
        tgt = self.norm1(tgt + self.dropout1(self.self_attn(q, k, value=tgt)[0]))
        tgt2 = self.multihead_attn(query=tgt + query_pos, key=memory + pos, value=memory,
                                   key_padding_mask=memory_key_padding_mask)[0]
        tgt = self.norm2(tgt + self.dropout2(tgt2))
        tgt2 = self.linear2(self.dropout(F.relu(self.linear1(tgt))))
        return self.norm3(tgt + self.dropout3(tgt2))

class Transformer(nn.Module):
    def __init__(self, d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward, dropout):
        super().__init__()
        self.encoder = nn.ModuleList([TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout)
                                      for _ in range(num_encoder_layers)])
        self.decoder = nn.ModuleList([TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout)
                                      for _ in range(num_decoder_layers)])
        self.decoder_norm, self.d_model = nn.LayerNorm(d_model), d_model
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
    def forward(self, src, mask, query_embed, pos_embed):
        bs, c, h, w = src.shape
        src, pos_embed = src.flatten(2).permute(2, 0, 1), pos_embed.flatten(2).permute(2, 0, 1)
        query_embed, mask = query_embed.unsqueeze(1).repeat(1, bs, 1), mask.flatten(1)
        tgt, memory = torch.zeros_like(query_embed), src
        for layer in self.encoder:
            memory = layer(memory, src_key_padding_mask=mask, pos=pos_embed)
        output, intermediate = tgt, []
        for layer in self.decoder:
            output = layer(output, memory, memory_key_padding_mask=mask, pos=pos_embed, query_pos=query_embed)
            intermediate.append(self.decoder_norm(output))
        return torch.stack(intermediate).transpose(1, 2), memory.permute(1, 2, 0).view(bs, c, h, w)

class MLP(nn.Module):
    def __init__(self, input_dim, hidden_dim, output_dim, num_layers):
        super().__init__()
        self.num_layers, h = num_layers, [hidden_dim] * (num_layers - 1)
        self.layers = nn.ModuleList(nn.Linear(n, k) for n, k in zip([input_dim] + h, h + [output_dim]))
    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = F.relu(layer(x)) if i < self.num_layers - 1 else layer(x)
        return x

class DETR(nn.Module):
    def __init__(self, backbone, transformer, num_classes, num_queries):
        super().__init__()
        self.num_queries, self.transformer, self.backbone = num_queries, transformer, backbone
        hidden_dim = transformer.d_model
        self.class_embed, self.bbox_embed = nn.Linear(hidden_dim, num_classes + 1), MLP(hidden_dim, hidden_dim, 4, 3)
        self.query_embed = nn.Embedding(num_queries, hidden_dim)
        self.input_proj = nn.Conv2d(backbone.num_channels, hidden_dim, kernel_size=1)
    def forward(self, samples):
        if isinstance(samples, (list, torch.Tensor)):
            samples = nested_tensor_from_tensor_list(samples)
        features, pos = self.backbone(samples)
        src, mask = features[-1].decompose()
        hs = self.transformer(self.input_proj(src), mask, self.query_embed.weight, pos[-1])[0]
        outputs_class, outputs_coord = self.class_embed(hs), self.bbox_embed(hs).sigmoid()
        return {'pred_logits': outputs_class[-1], 'pred_boxes': outputs_coord[-1]}

class HungarianMatcher(nn.Module):
    def __init__(self, cost_class=1, cost_bbox=1, cost_giou=1):
        super().__init__()
        self.cost_class, self.cost_bbox, self.cost_giou = cost_class, cost_bbox, cost_giou
    @torch.no_grad()
    def forward(self, outputs, targets):
        bs, num_queries = outputs["pred_logits"].shape[:2]
        out_prob, out_bbox = outputs["pred_logits"].flatten(0, 1).softmax(-1), outputs["pred_boxes"].flatten(0, 1)
        tgt_ids, tgt_bbox = torch.cat([v["labels"] for v in targets]), torch.cat([v["boxes"] for v in targets])
        cost_class, cost_bbox = -out_prob[:, tgt_ids], torch.cdist(out_bbox, tgt_bbox, p=1)
        cost_giou = -generalized_box_iou(box_cxcywh_to_xyxy(out_bbox), box_cxcywh_to_xyxy(tgt_bbox))
        C = self.cost_bbox * cost_bbox + self.cost_class * cost_class + self.cost_giou * cost_giou
        C, sizes = C.view(bs, num_queries, -1).cpu(), [len(v["boxes"]) for v in targets]
        indices = [linear_sum_assignment(c[i]) for i, c in enumerate(C.split(sizes, -1))]
        return [(torch.as_tensor(i, dtype=torch.int64), torch.as_tensor(j, dtype=torch.int64)) for i, j in indices]

class SetCriterion(nn.Module):
    def __init__(self, num_classes, matcher, weight_dict, eos_coef, losses):
        super().__init__()
        self.num_classes, self.matcher, self.weight_dict, self.eos_coef, self.losses = \
            num_classes, matcher, weight_dict, eos_coef, losses
        empty_weight = torch.ones(self.num_classes + 1)
        empty_weight[-1] = self.eos_coef
        self.register_buffer('empty_weight', empty_weight)
    def loss_labels(self, outputs, targets, indices, num_boxes, log=True):
        src_logits = outputs['pred_logits']
        idx = self._get_src_permutation_idx(indices)
        target_classes_o = torch.cat([t["labels"][J] for t, (_, J) in zip(targets, indices)])
        target_classes = torch.full(src_logits.shape[:2], self.num_classes,
                                    dtype=torch.int64, device=src_logits.device)
        target_classes[idx] = target_classes_o
        losses = {'loss_ce': F.cross_entropy(src_logits.transpose(1, 2), target_classes, self.empty_weight)}
        if log:
            losses['class_error'] = 100 - accuracy(src_logits[idx], target_classes_o)[0]
        return losses
    @torch.no_grad()
    def loss_cardinality(self, outputs, targets, indices, num_boxes):
        pred_logits, device = outputs['pred_logits'], outputs['pred_logits'].device
        tgt_lengths = torch.as_tensor([len(v["labels"]) for v in targets], device=device)
        card_pred = (pred_logits.argmax(-1) != pred_logits.shape[-1] - 1).sum(1)
        return {'cardinality_error': F.l1_loss(card_pred.float(), tgt_lengths.float())}
    def loss_boxes(self, outputs, targets, indices, num_boxes):
        idx = self._get_src_permutation_idx(indices)
        src_boxes = outputs['pred_boxes'][idx]
        target_boxes = torch.cat([t['boxes'][i] for t, (_, i) in zip(targets, indices)], dim=0)
        losses = {'loss_bbox': F.l1_loss(src_boxes, target_boxes, reduction='none').sum() / num_boxes}
        loss_giou = 1 - torch.diag(generalized_box_iou(box_cxcywh_to_xyxy(src_boxes),
                                                       box_cxcywh_to_xyxy(target_boxes)))
        losses['loss_giou'] = loss_giou.sum() / num_boxes
        return losses
    def _get_src_permutation_idx(self, indices):
        batch_idx = torch.cat([torch.full_like(src, i) for i, (src, _) in enumerate(indices)])
        return batch_idx, torch.cat([src for (src, _) in indices])
    def get_loss(self, loss, outputs, targets, indices, num_boxes, **kwargs):
        return getattr(self, 'loss_' + loss)(outputs, targets, indices, num_boxes, **kwargs)
    def forward(self, outputs, targets):
        indices = self.matcher(outputs, targets)
        num_boxes = sum(len(t["labels"]) for t in targets)
        num_boxes = torch.as_tensor([num_boxes], dtype=torch.float, device=next(iter(outputs.values())).device)
        num_boxes = torch.clamp(num_boxes / 1, min=1).item()
        losses = {}
        for loss in self.losses:
            losses.update(self.get_loss(loss, outputs, targets, indices, num_boxes))
        return losses

class PostProcess(nn.Module):
    @torch.no_grad()
    def forward(self, outputs, target_sizes):
        out_logits, out_bbox = outputs['pred_logits'], outputs['pred_boxes']
        assert len(out_logits) == len(target_sizes)
        scores, labels = F.softmax(out_logits, -1)[..., :-1].max(-1)
        img_h, img_w = target_sizes.unbind(1)
        boxes = box_cxcywh_to_xyxy(out_bbox) * torch.stack([img_w, img_h, img_w, img_h], dim=1)[:, None, :]
        return [{'scores': s, 'labels': l, 'boxes': b} for s, l, b in zip(scores, labels, boxes)]

def build(args):
    num_classes, device = args.num_classes, torch.device(args.device)
    body = BackboneBase(small_resnet_body(16), args.lr_backbone > 0, num_channels=32)
    backbone = Joiner(body, PositionEmbeddingSine(args.hidden_dim // 2, normalize=True))
    backbone.num_channels = body.num_channels
    transformer = Transformer(args.hidden_dim, args.nheads, args.enc_layers, args.dec_layers,
                              args.dim_feedforward, args.dropout)
    model = DETR(backbone, transformer, num_classes=num_classes, num_queries=args.num_queries)
    matcher = HungarianMatcher(args.set_cost_class, args.set_cost_bbox, args.set_cost_giou)
    weight_dict = {'loss_ce': 1, 'loss_bbox': args.bbox_loss_coef, 'loss_giou': args.giou_loss_coef}
    criterion = SetCriterion(num_classes, matcher=matcher, weight_dict=weight_dict,
                             eos_coef=args.eos_coef, losses=['labels', 'boxes', 'cardinality'])
    criterion.to(device)
    return model, criterion, {'bbox': PostProcess()}

def train_one_epoch(model, criterion, data_loader, optimizer, device, epoch, max_norm=0):
    model.train()
    criterion.train()
    metric_logger = MetricLogger(delimiter="  ")
    for samples, targets in data_loader:
        samples = samples.to(device)
        targets = [{k: v.to(device) for k, v in t.items()} for t in targets]
        outputs = model(samples)
        loss_dict, weight_dict = criterion(outputs, targets), criterion.weight_dict
        losses = sum(loss_dict[k] * weight_dict[k] for k in loss_dict.keys() if k in weight_dict)
        loss_dict_reduced = reduce_dict(loss_dict)
        loss_dict_reduced_unscaled = {f'{k}_unscaled': v for k, v in loss_dict_reduced.items()}
        loss_dict_reduced_scaled = {k: v * weight_dict[k] for k, v in loss_dict_reduced.items() if k in weight_dict}
        loss_value = sum(loss_dict_reduced_scaled.values()).item()
        assert math.isfinite(loss_value), "Loss is {}, stopping training".format(loss_value)
        optimizer.zero_grad()
        losses.backward()
        if max_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        metric_logger.update(loss=loss_value, **loss_dict_reduced_scaled, **loss_dict_reduced_unscaled)
        metric_logger.update(class_error=loss_dict_reduced['class_error'], lr=optimizer.param_groups[0]["lr"])
    print("Epoch: [{}] Averaged stats: {}".format(epoch, metric_logger))
    return {k: metric_logger.global_avg(k) for k in metric_logger.totals}

@torch.no_grad()
def evaluate(model, criterion, postprocessors, data_loader, base_ds, device, output_dir):
    model.eval()
    criterion.eval()
    metric_logger = MetricLogger(delimiter="  ")
    coco_evaluator = []  # stand-in for CocoEvaluator: mean best IoU of the 4 top-scoring boxes per gt box
    for samples, targets in data_loader:
        samples = samples.to(device)
        targets = [{k: v.to(device) for k, v in t.items()} for t in targets]
        outputs = model(samples)
        loss_dict, weight_dict = criterion(outputs, targets), criterion.weight_dict
        loss_dict_reduced = reduce_dict(loss_dict)
        loss_dict_reduced_scaled = {k: v * weight_dict[k] for k, v in loss_dict_reduced.items() if k in weight_dict}
        metric_logger.update(loss=sum(loss_dict_reduced_scaled.values()), **loss_dict_reduced_scaled,
                             class_error=loss_dict_reduced['class_error'])
        orig_target_sizes = torch.stack([t["orig_size"] for t in targets], dim=0)
        results = postprocessors['bbox'](outputs, orig_target_sizes)
        res = {target['image_id'].item(): output for target, output in zip(targets, results)}
        for image_id, prediction in res.items():  # prepare_for_coco_detection reads with .tolist()
            boxes, scores = prediction["boxes"].tolist(), prediction["scores"].tolist()
            keep = torch.tensor([b for _, b in sorted(zip(scores, boxes), reverse=True)[:4]])
            gt = torch.tensor([[x, y, x + w, y + h] for x, y, w, h in (a["bbox"] for a in base_ds.anns[image_id])])
            coco_evaluator.append(box_iou(gt, keep)[0].max(1)[0].mean().item())
    print("Test: Averaged stats:", metric_logger)
    stats = {k: metric_logger.global_avg(k) for k in metric_logger.totals}
    stats['coco_eval_bbox'] = [float(np.mean(coco_evaluator))]
    return stats, coco_evaluator

def get_args_parser():
    parser = argparse.ArgumentParser('Set transformer detector', add_help=False)
    for name, default in [('lr', 1e-3), ('lr_backbone', 1e-4), ('batch_size', 4), ('weight_decay', 1e-4), ('epochs', 2),
                          ('lr_drop', 2), ('clip_max_norm', 0.1), ('enc_layers', 2), ('dec_layers', 2),
                          ('dim_feedforward', 64), ('hidden_dim', 32), ('dropout', 0.1), ('nheads', 4),
                          ('num_queries', 8), ('set_cost_class', 1.), ('set_cost_bbox', 5.), ('set_cost_giou', 2.),
                          ('bbox_loss_coef', 5.), ('giou_loss_coef', 2.), ('eos_coef', 0.1), ('num_classes', 4),
                          ('seed', 42), ('start_epoch', 0), ('num_workers', 0)]:
        parser.add_argument('--' + name, default=default, type=type(default))
    parser.add_argument('--coco_path', type=str)
    parser.add_argument('--output_dir', default='')
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--resume', default='')
    parser.add_argument('--eval', action='store_true')
    return parser

def main(args):
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    random.seed(args.seed)
    model, criterion, postprocessors = build(args)
    model.to(device)
    model_without_ddp = model
    print('number of params:', sum(p.numel() for p in model.parameters() if p.requires_grad))
    param_dicts = [
        {"params": [p for n, p in model_without_ddp.named_parameters() if "backbone" not in n and p.requires_grad]},
        {"params": [p for n, p in model_without_ddp.named_parameters() if "backbone" in n and p.requires_grad],
         "lr": args.lr_backbone},
    ]
    optimizer = torch.optim.AdamW(param_dicts, lr=args.lr, weight_decay=args.weight_decay)
    lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, args.lr_drop)
    dataset_train, dataset_val = build_dataset(image_set='train', args=args), build_dataset(image_set='val', args=args)
    sampler_train = torch.utils.data.RandomSampler(dataset_train)
    sampler_val = torch.utils.data.SequentialSampler(dataset_val)
    batch_sampler_train = torch.utils.data.BatchSampler(sampler_train, args.batch_size, drop_last=True)
    data_loader_train = DataLoader(dataset_train, batch_sampler=batch_sampler_train,
                                   collate_fn=collate_fn, num_workers=args.num_workers)
    data_loader_val = DataLoader(dataset_val, args.batch_size, sampler=sampler_val,
                                 drop_last=False, collate_fn=collate_fn, num_workers=args.num_workers)
    base_ds = dataset_val
    output_dir = Path(args.output_dir)
    if args.resume:
        checkpoint = torch.load(args.resume, map_location='cpu', weights_only=False)
        model_without_ddp.load_state_dict(checkpoint['model'])
        if not args.eval and 'optimizer' in checkpoint and 'lr_scheduler' in checkpoint and 'epoch' in checkpoint:
            optimizer.load_state_dict(checkpoint['optimizer'])
            lr_scheduler.load_state_dict(checkpoint['lr_scheduler'])
            args.start_epoch = checkpoint['epoch'] + 1
    if args.eval:
        test_stats, coco_evaluator = evaluate(model, criterion, postprocessors,
                                              data_loader_val, base_ds, device, args.output_dir)
        if args.output_dir:
            torch.save(coco_evaluator, output_dir / "eval.pth")
        return test_stats
    print("Start training")
    for epoch in range(args.start_epoch, args.epochs):
        train_stats = train_one_epoch(model, criterion, data_loader_train, optimizer, device, epoch,
                                      args.clip_max_norm)
        lr_scheduler.step()
        if args.output_dir:
            torch.save({'model': model_without_ddp.state_dict(), 'optimizer': optimizer.state_dict(),
                        'lr_scheduler': lr_scheduler.state_dict(), 'epoch': epoch, 'args': args},
                       output_dir / 'checkpoint.pth')
        test_stats, coco_evaluator = evaluate(model, criterion, postprocessors, data_loader_val, base_ds,
                                              device, args.output_dir)
        print(json.dumps({**{f'train_{k}': round(v, 4) for k, v in train_stats.items() if k.startswith('loss')},
                          'test_loss': round(test_stats['loss'], 4), 'epoch': epoch}))
    return test_stats

if __name__ == '__main__':
    tmp = tempfile.mkdtemp(prefix="detr_")
    try:
        write_synthetic_coco(os.path.join(tmp, "coco"), n_train=16, n_val=6, num_classes=4)
        out, parser = os.path.join(tmp, "out"), argparse.ArgumentParser('DETR', parents=[get_args_parser()])
        Path(out).mkdir(parents=True, exist_ok=True)
        ckpt = os.path.join(out, 'checkpoint.pth')
        common = ['--coco_path', os.path.join(tmp, "coco"), '--output_dir', out]
        for extra in ([], ['--resume', ckpt, '--epochs', '3'], ['--resume', ckpt, '--eval']):
            stats = main(parser.parse_args(common + extra))
        print("done: val loss {:.4f}, mean best IoU {:.3f}".format(stats['loss'], stats['coco_eval_bbox'][0]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
