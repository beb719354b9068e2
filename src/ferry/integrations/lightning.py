"""ferry files as Lightning's checkpoints: :class:`FerryCheckpointIO`, and :func:`load_from_checkpoint` to read them.

One line makes every checkpoint of a ``lightning.pytorch.Trainer`` (``ModelCheckpoint``, ``trainer.save_checkpoint``)
or of ``lightning.fabric.Fabric.save`` a ferry file: atomic (a crash leaves the previous file or the new one, never a
torn one), fsynced, checksummed, and free of pickle::

    trainer = Trainer(plugins=[FerryCheckpointIO()])
    fabric = Fabric(plugins=[FerryCheckpointIO()])

The file keeps Lightning's name (``epoch=3-step=400.ckpt``, ``last.ckpt``) and opens with ``ferry.load``,
``ferry.verify`` and ``ferry ckpt verify``/``inspect``. Resuming (``trainer.fit(model, ckpt_path="last")``,
``fabric.load``) and ``trainer.test(ckpt_path=...)`` read through the plugin; ``LightningModule.load_from_checkpoint``
does not (it calls ``torch.load`` itself), so use :func:`load_from_checkpoint` here. Strategies that write their
own checkpoints (FSDP, ModelParallel, DeepSpeed) do not use a CheckpointIO: see ``docs/integrations/lightning.md``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import torch

from ferry.integrations import require

require("lightning", "lightning", "ferry.integrations.lightning")  # names the extra when lightning is missing

from lightning.fabric.plugins import CheckpointIO  # noqa: E402 - after require(), which words a missing package
from lightning.pytorch import LightningDataModule, LightningModule  # noqa: E402
from lightning.pytorch.core import saving  # noqa: E402
from lightning.pytorch.utilities.migration.utils import _pl_migrate_checkpoint  # noqa: E402

from ferry._fs import remove_stale_temporaries  # noqa: E402
from ferry.checkpoint.file import load, save  # noqa: E402
from ferry.devices import DeviceLike  # noqa: E402
from ferry.errors import ArgumentError, CheckpointError, UnsafeCheckpointError  # noqa: E402
from ferry.integrations._values import Trail, conversion, key_path, plain  # noqa: E402

__all__ = ["CheckpointNotFoundError", "FerryCheckpointIO", "load_from_checkpoint"]

_Loaded = TypeVar("_Loaded", bound="LightningModule | LightningDataModule")

#: the top-level key every checkpoint a Trainer writes has (Fabric's are the user's own dict)
_TRAINER_KEY = "pytorch-lightning_version"
_PLAIN = "tensors and plain values (str, int, float, bool, None, and dicts, lists and tuples of them)"


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """No checkpoint file at the path Lightning asked for; also a ``FileNotFoundError``, as ``TorchCheckpointIO``'s."""


class FerryCheckpointIO(CheckpointIO):
    """Lightning's checkpoint plugin writing ferry files: ``Trainer(plugins=[FerryCheckpointIO()])``.

    Replaces ``TorchCheckpointIO`` (``torch.save``/``torch.load``) for ``lightning.pytorch.Trainer`` and
    ``lightning.fabric.Fabric``, alone or wrapped in ``AsyncCheckpointIO``. Every checkpoint is one ferry file (a
    safetensors file with the structure and checksums in its header) under the name Lightning chooses: written to a
    temporary file, fsynced and renamed into place, so a crash or ``SIGKILL`` at any moment leaves the previous
    checkpoint or the new one; read back with every checksum verified; never pickled. Local paths only.

    What a Lightning checkpoint holds round-trips: ``state_dict``, ``optimizer_states``, ``lr_schedulers``,
    ``loops``, ``callbacks`` (keyed by strings such as ``"ModelCheckpoint{...}"``), ``hyper_parameters``, the
    precision plugin's state, ``epoch``, ``global_step``, version strings, int dict keys, tuples and 0-dim tensors.
    Lightning's ``AttributeDict`` and other dict subclasses come back as plain dicts, numpy floats as floats. A value
    that only pickle could store (a module or function passed to ``save_hyperparameters``, a callback state holding
    an object) is refused before anything is written, with its key path and the fix.
    """

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | os.PathLike[str], storage_options: Any | None = None
    ) -> None:
        """Write ``checkpoint`` to ``path`` as one ferry file, creating the folder; mirrors ``TorchCheckpointIO``.

        Tensors are written from whatever device they are on, in their own dtype, each storage once; on load they
        come back on the CPU (or ``map_location``). Called by the Trainer's strategy (``ModelCheckpoint``,
        ``trainer.save_checkpoint``) and by ``Fabric.save``, only on global rank 0 in a multi-process run.

        Args:
            checkpoint: Lightning's checkpoint dict (``Trainer``) or the state given to ``Fabric.save``, with
                modules and optimizers already turned into their ``state_dict``.
            path: The file to write, e.g. ``checkpoints/epoch=0-step=100.ckpt``; a local path. Missing folders are
                created. An existing file is replaced atomically.
            storage_options: Must be None: as for ``TorchCheckpointIO``, there are none.

        Raises:
            UnsafeCheckpointError: a value (or dict key) that is not a tensor, a plain value or a dict/list/tuple:
                the message names its key path (``hyper_parameters["encoder"]``) and the fix. Nothing is written.
            ArgumentError: ``storage_options`` is not None (also a ``TypeError``, which ``TorchCheckpointIO``
                raises), ``path`` is a URL (``s3://...``) or not a path, or ``checkpoint`` is not a dict.
            CheckpointError: a tensor ferry cannot store (on ``meta``, sparse, a dtype safetensors lacks), or the
                file system failed (full disk, permissions); the file at ``path`` is then as it was.
        """
        if storage_options is not None:
            raise ArgumentError(
                f"FerryCheckpointIO.save_checkpoint got storage_options={storage_options!r}, but it writes local "
                "files and takes no storage options (as TorchCheckpointIO). Call trainer.save_checkpoint(path) "
                "without storage_options, or write a CheckpointIO subclass that uses them."
            )
        file = _local_path(path, "save_checkpoint")
        if not isinstance(checkpoint, Mapping):
            raise ArgumentError(
                f"FerryCheckpointIO.save_checkpoint(checkpoint, path) needs a dict of state, got a "
                f"{type(checkpoint).__name__}. Pass a dict, e.g. Fabric.save(path, {{'model': model}})."
            )
        trainer = _TRAINER_KEY in checkpoint
        fix = _trainer_fix if trainer else _fabric_fix
        state = plain(dict(checkpoint), "" if trainer else "state", file, fix)
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise CheckpointError(
                f"cannot save {str(file)!r}: creating its folder failed ({err.strerror or err}). Nothing was "
                "written. Check that this user can create folders there, or set ModelCheckpoint(dirpath=...) to a "
                "folder it can write.",
                path=file,
            ) from err
        save(state, file)

    def load_checkpoint(
        self, path: str | os.PathLike[str], map_location: Any | None = None, weights_only: bool | None = None
    ) -> dict[str, Any]:
        """Read the checkpoint at ``path``, verifying every checksum; mirrors ``TorchCheckpointIO.load_checkpoint``.

        Args:
            path: A ferry file written by this plugin; also a ``torch.save`` checkpoint (one written by
                ``TorchCheckpointIO``, to resume a run that switched plugins), read with torch's restricted
                unpickler, or a plain safetensors file (a dict of tensors).
            map_location: Where the tensors go, as for ``torch.load``. ``None`` (what Lightning passes): the CPU,
                whatever device they were saved from; the Trainer and Fabric then move the model and optimizer
                state to their device (``TorchCheckpointIO`` instead returns tensors to the device they were saved
                from). A device (``"cuda:1"``, ``torch.device``, an index). A dict (``{"cpu": "cuda:0"}``) or a
                callable ``f(storage, location)`` as ``torch.load`` takes them: a ferry file holds its tensors as
                host bytes, so every tensor's saved location is ``"cpu"``; the dict's value for ``"cpu"`` applies
                (other keys never match), and the callable is called once, with an empty CPU storage and
                ``"cpu"``, and the device of the storage it returns (None: the CPU) is where all tensors go.
            weights_only: Irrelevant for ferry files, which hold no pickle: nothing in them can run code, with any
                value. For a ``torch.save`` checkpoint it means what it means to ``torch.load``: ``False`` runs its
                pickle unrestricted (only for files you trust), ``None`` and ``True`` use the restricted unpickler.

        Returns:
            The saved dict: same keys, containers and values as saved (dict subclasses as dicts).

        Raises:
            CheckpointNotFoundError: no file at ``path`` (also a ``FileNotFoundError``).
            CorruptCheckpointError: the file is truncated, fails a checksum, or is not a checkpoint.
            UnsafeCheckpointError: a ``torch.save`` checkpoint whose pickle needs code to load (see
                ``weights_only``).
            ArgumentError: a ``map_location`` of another kind, or a callable returning something else than a
                storage or None; ``path`` a URL.
            DeviceError: ``map_location`` names a device this machine lacks.
            CheckpointError: the file is unreadable, from a newer ferry, or holds something else than a dict.
        """
        file = _local_path(path, "load_checkpoint")
        device = _map_device(map_location)
        try:
            checkpoint = load(file, device=device, trusted=weights_only is False)
        except UnsafeCheckpointError as err:
            raise UnsafeCheckpointError(
                f"{err} With Lightning: pass weights_only=False to trainer.fit(..., weights_only=False) or "
                "fabric.load(..., weights_only=False), only if you trust the file.",
                path=file,
            ) from err
        except CheckpointError as err:
            if isinstance(err.__cause__, FileNotFoundError):
                raise CheckpointNotFoundError(
                    f"no checkpoint at {str(file)!r}: the file does not exist (working directory "
                    f"{os.getcwd()!r}). Check ckpt_path=... (trainer.fit, trainer.test) or the path given to "
                    "fabric.load; ckpt_path='last' finds ModelCheckpoint(save_last=True)'s last.ckpt.",
                    path=file,
                ) from err.__cause__
            raise
        if not isinstance(checkpoint, dict):
            raise CheckpointError(
                f"{str(file)!r} holds a {type(checkpoint).__name__}, not a checkpoint dict. Lightning checkpoints "
                "and Fabric.save states are dicts: load this file with ferry.load instead.",
                path=file,
            )
        return checkpoint

    def remove_checkpoint(self, path: str | os.PathLike[str]) -> None:
        """Delete the checkpoint at ``path``; nothing happens if it is gone; mirrors ``TorchCheckpointIO``.

        A folder is removed with its contents, as ``TorchCheckpointIO`` does. The temporary files that saves of
        ``path`` killed mid-write left beside it (``<name>.ferry-tmp-<pid>-<hex>``, from dead processes only) go
        too.

        Raises:
            ArgumentError: ``path`` is a URL or not a path.
            CheckpointError: the file exists but cannot be removed (permissions).
        """
        file = _local_path(path, "remove_checkpoint")
        try:
            if file.is_dir() and not file.is_symlink():
                shutil.rmtree(file)
            else:
                file.unlink(missing_ok=True)
        except OSError as err:
            raise CheckpointError(
                f"cannot remove the checkpoint {str(file)!r}: {err.strerror or err}. Check that this user may "
                "delete files in its folder.",
                path=file,
            ) from err
        remove_stale_temporaries(file)


def load_from_checkpoint(
    module_class: type[_Loaded],
    path: str | os.PathLike[str],
    map_location: Any | None = None,
    *,
    hparams_file: str | os.PathLike[str] | None = None,
    strict: bool | None = None,
    weights_only: bool | None = None,
    **kwargs: Any,
) -> _Loaded:
    """Build ``module_class`` from a :class:`FerryCheckpointIO` checkpoint; mirrors its ``load_from_checkpoint``.

    ``MyModule.load_from_checkpoint(path)`` reads the file with ``torch.load`` and cannot open a ferry file; this
    does the same steps through :class:`FerryCheckpointIO`: Lightning's checkpoint migration, the saved
    ``hyper_parameters`` (updated with ``hparams_file`` then ``kwargs``) passed to ``module_class(...)``,
    ``configure_model()`` if overridden, ``on_load_checkpoint(checkpoint)``, ``load_state_dict(state_dict,
    strict=...)``, and the module moved to the device of the loaded weights. Like Lightning, it returns the module
    in training mode: call ``.eval()`` for inference. A ``LightningDataModule`` class is rebuilt from its
    hyperparameters and ``load_state_dict``, as ``LightningDataModule.load_from_checkpoint`` does.

    Args:
        module_class: The ``LightningModule`` (or ``LightningDataModule``) subclass to build.
        path: The checkpoint file (a ferry file, or a ``torch.save`` checkpoint read without running code).
        map_location: Where the weights go; the module follows them. ``None``: the CPU (Lightning's default keeps
            the saved device; a ferry file does not record it). Otherwise as in
            :meth:`FerryCheckpointIO.load_checkpoint`.
        hparams_file: A ``.yaml`` or ``.csv`` file whose hyperparameters replace the saved ones, as in Lightning.
        strict: Passed to ``load_state_dict``; ``None`` uses the module's ``strict_loading`` (default True).
        weights_only: Only for ``torch.save`` checkpoints, as in :meth:`FerryCheckpointIO.load_checkpoint`.
        **kwargs: Arguments for ``module_class(...)`` that override the saved hyperparameters.

    Returns:
        The built module, its weights loaded, on the weights' device, in training mode.

    Raises:
        CheckpointNotFoundError, CorruptCheckpointError, UnsafeCheckpointError, DeviceError: as
            :meth:`FerryCheckpointIO.load_checkpoint`.
        ArgumentError: ``module_class`` is not a LightningModule or LightningDataModule subclass, or
            ``hparams_file`` is neither ``.yaml``/``.yml`` nor ``.csv``.
        RuntimeError: ``load_state_dict`` found missing or unexpected keys (``strict``), as in Lightning.
    """
    if not (isinstance(module_class, type) and issubclass(module_class, (LightningModule, LightningDataModule))):
        raise ArgumentError(
            f"load_from_checkpoint(module_class, path) needs the LightningModule or LightningDataModule class to "
            f"build, got {module_class!r}. Pass the class itself, e.g. load_from_checkpoint(MyModel, path)."
        )
    checkpoint = FerryCheckpointIO().load_checkpoint(path, map_location=map_location, weights_only=weights_only)
    checkpoint = _pl_migrate_checkpoint(checkpoint, checkpoint_path=Path(path))
    key = module_class.CHECKPOINT_HYPER_PARAMS_KEY
    if hparams_file is not None:
        extension = Path(hparams_file).suffix.lower()
        if extension not in (".csv", ".yml", ".yaml"):
            raise ArgumentError(
                f"hparams_file={os.fspath(hparams_file)!r} is neither .yaml/.yml nor .csv. Pass a hyperparameters "
                "file Lightning wrote (hparams.yaml), or leave hparams_file out to use the saved hyperparameters."
            )
        read = saving.load_hparams_from_tags_csv if extension == ".csv" else saving.load_hparams_from_yaml
        checkpoint[key] = read(Path(hparams_file))
    checkpoint.setdefault(key, {})
    checkpoint[key].update(kwargs)
    if issubclass(module_class, LightningDataModule):
        datamodule: _Loaded = saving._load_state(module_class, checkpoint, **kwargs)  # type: ignore[assignment]
        return datamodule
    module: _Loaded = saving._load_state(module_class, checkpoint, strict=strict, **kwargs)  # type: ignore[assignment]
    weights = checkpoint["state_dict"]
    if weights and isinstance(module, LightningModule):
        device = next((t.device for t in weights.values() if isinstance(t, torch.Tensor)), torch.device("cpu"))
        module.to(device)
    return module


def _local_path(path: object, method: str) -> Path:
    if isinstance(path, (str, os.PathLike)):
        text = os.fspath(path)
        if isinstance(text, str) and text:
            scheme, sep, _ = text.partition("://")
            if sep and scheme.isidentifier():
                raise ArgumentError(
                    f"FerryCheckpointIO.{method} got {text!r}, a URL: ferry writes and reads local files (it "
                    "renames a finished temporary file into place, which object stores cannot do atomically). "
                    "Checkpoint to a local or mounted folder (ModelCheckpoint(dirpath='checkpoints/')) and copy "
                    "the files from there, or keep TorchCheckpointIO for remote storage."
                )
            return Path(text)
    raise ArgumentError(
        f"FerryCheckpointIO.{method} needs a file path (str or os.PathLike), got {type(path).__name__}: "
        f"{path!r}. Pass the checkpoint's path, e.g. 'checkpoints/last.ckpt'."
    )


def _map_device(map_location: object) -> DeviceLike:
    if map_location is None:
        return "cpu"
    if isinstance(map_location, (str, torch.device)) or (
        isinstance(map_location, int) and not isinstance(map_location, bool)
    ):
        return map_location
    if isinstance(map_location, Mapping):
        target = map_location.get("cpu", "cpu")
        if isinstance(target, (str, torch.device)):
            return target
        raise ArgumentError(
            f"map_location={map_location!r} maps 'cpu' to {target!r}, which is not a device. Map locations to "
            "device names, e.g. map_location={'cpu': 'cuda:0'}, or pass the device: map_location='cuda:0'."
        )
    if callable(map_location):
        return _device_from_callable(map_location)
    raise ArgumentError(
        f"map_location={map_location!r} is a {type(map_location).__name__}; torch.load's forms are a device "
        "('cuda:0', torch.device), a dict of locations ({'cpu': 'cuda:0'}) or a function(storage, location). "
        "Pass one of those, or None for the CPU."
    )


def _device_from_callable(function: Callable[..., object]) -> DeviceLike:
    result = function(torch.empty(0, dtype=torch.uint8).untyped_storage(), "cpu")
    if result is None:
        return "cpu"
    device = getattr(result, "device", None)
    if isinstance(result, (torch.UntypedStorage, torch.TypedStorage)) and isinstance(device, torch.device):
        return device
    raise ArgumentError(
        f"map_location={function!r} returned a {type(result).__name__} for a CPU storage; torch.load expects a "
        "storage (e.g. storage.cuda(0)) or None. Return a storage, or pass the target device itself: "
        "map_location='cuda:0'."
    )


def _trainer_fix(trail: Trail, value: object) -> str:
    top = trail[0] if trail else None
    convert = conversion(value)
    instead = f"or store a plain value instead: {convert}." if convert else f"or store {_PLAIN} instead."
    if top in ("hyper_parameters", "datamodule_hyper_parameters") and len(trail) >= 2:
        owner = "LightningModule" if top == "hyper_parameters" else "LightningDataModule"
        ignore = f"self.save_hyperparameters(ignore=[{json.dumps(trail[1])}])"
        if isinstance(value, torch.nn.Module):
            return (
                f"A module passed to __init__ is saved in the checkpoint's state_dict already (as a submodule): "
                f"leave it out of the hyperparameters with {ignore} in the {owner}'s __init__."
            )
        return f"Leave it out of the hyperparameters with {ignore} in the {owner}'s __init__, {instead}"
    if top == "hparams_type":
        return (
            "The hyperparameters are an OmegaConf container: save plain ones, "
            "self.save_hyperparameters(OmegaConf.to_container(config, resolve=True))."
        )
    if top == "callbacks" and len(trail) >= 2:
        return f"The callback {trail[1]}'s state_dict() returns it: make it return {_PLAIN}" + (
            f"; {convert}." if convert else "."
        )
    where = key_path("", trail)
    return (
        f"Whatever puts it there (a state_dict(), an on_save_checkpoint(checkpoint) hook) must store {_PLAIN} at "
        f"{where}{': ' + convert if convert else ''}."
    )


def _fabric_fix(trail: Trail, value: object) -> str:
    convert = conversion(value)
    return (
        "Fabric.save stores modules, optimizers and objects with state_dict()/load_state_dict() as their "
        f"state_dict(); this value is none of those: put {_PLAIN} in the state instead"
        f"{' (' + convert + ')' if convert else ''}, or leave it out."
    )
