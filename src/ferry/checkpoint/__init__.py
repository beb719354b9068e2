"""Checkpoints, in parts with one direction of use: each part uses only those listed before it.

- :mod:`ferry.checkpoint.file`: one file on disk (``save``/``load``/``verify``, the format, ``torch.save`` files);
- :mod:`ferry.checkpoint.folder`: the layout of one checkpoint (step) folder: its file names and manifest;
- :mod:`ferry.checkpoint.sharded`: sharded checkpoints over ``torch.distributed.checkpoint`` (its only importer);
- :mod:`ferry.checkpoint.run`: the training run's :class:`~ferry.checkpoint.run.Checkpointer`;
- :mod:`ferry.checkpoint.tools`: what ``ferry ckpt`` does, as functions (resolve, describe, verify, list, collect,
  diff, convert any kind of path).

:mod:`ferry.checkpoint.state_dict` (``ferry.load_state_dict``) loads a file into a module. See README.md here.
"""
