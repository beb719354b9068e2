"""One checkpoint file on disk, knowing nothing of training runs.

``save``/``load``/``verify`` (:mod:`~ferry.checkpoint.file.api`) over the byte layout and checksums
(:mod:`~ferry.checkpoint.file.layout`), the JSON structure of a saved object (:mod:`~ferry.checkpoint.file.tree`),
the writer and the reader, and ``torch.save`` files read without running pickled code
(:mod:`~ferry.checkpoint.file.torch_save`). :func:`~ferry.checkpoint.file.kinds.sniff` tells the kinds apart.
"""

from ferry.checkpoint.file.api import load, open_file, save, verify

__all__ = ["load", "open_file", "save", "verify"]
